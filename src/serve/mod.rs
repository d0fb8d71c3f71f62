//! quorum for other programs: its tools over MCP. [`mcp`] is the server
//! (the very `subagent` and `subagent_status` the chat model calls, on a
//! session's dispatcher); [`endpoint`] serves it privately on a Unix
//! socket for a session's conductor agent (reached through
//! `quorum mcp-connect`, [`connect`]); `quorum mcp` serves it on stdio to
//! any MCP host (the command is in `cli`).

pub mod connect;
pub mod endpoint;
pub mod mcp;

pub use endpoint::Endpoint;
pub use mcp::{McpOptions, QuorumMcp};

/// Every quorum process puts its pid here in its environment, so the
/// agents it starts (and what they start: an agent's own MCP servers)
/// carry it; `quorum mcp` started by one of them refuses to serve, so no
/// sub-agent is handed quorum's tools (a claude sub-agent would otherwise
/// find a `quorum mcp` in the person's own MCP settings: recursion).
pub const PROCESS_ENV: &str = "QUORUM_PROCESS";

/// Marks this process as quorum's ([`PROCESS_ENV`]); the mark it had, if
/// a quorum (the pid) started it. First thing in `main`, while the process
/// has one thread.
pub fn mark_process() -> Option<String> {
    let outer = std::env::var(PROCESS_ENV).ok().filter(|v| !v.is_empty());
    // SAFETY: called first thing in `main`, before any thread starts (the
    // reaper's check before it starts none), so nothing reads the
    // environment meanwhile.
    unsafe { std::env::set_var(PROCESS_ENV, std::process::id().to_string()) };
    outer
}
