//! quorum for other programs: its tools over MCP. [`mcp`] is the server
//! (the very `subagent` and `subagent_status` the chat model calls, on a
//! session's dispatcher); [`endpoint`] serves it privately on a Unix
//! socket for a session's conductor agent (reached through
//! `quorum mcp-connect`, whose command is in `cli`); `quorum mcp` serves it
//! on stdio to any MCP host (the command is in `cli`). [`acp`] is quorum
//! itself as an ACP agent (`quorum acp`).

pub mod acp;
pub mod endpoint;
pub mod mcp;

pub use endpoint::Endpoint;
pub use mcp::{McpOptions, McpServeError, QuorumMcp};

/// Serves `session`'s tools to its conductor (`--model acp:NAME`, or one
/// `/model acp:NAME` chooses later) on a private endpoint, and tells the
/// session where: the endpoint, to be kept as long as the session. The
/// conductor's chat is told when a background task ends, so a call sent
/// to the background says its report will be delivered.
pub fn hand_tools(
    session: &crate::engine::Session,
    config: &crate::config::ConfigFile,
) -> std::io::Result<Endpoint> {
    let options = McpOptions {
        reports_delivered: true,
        ..McpOptions::from_config(config)
    };
    let endpoint = Endpoint::for_session(session, options)?;
    session.hand_tools(endpoint.server_spec()?);
    Ok(endpoint)
}

/// [`hand_tools`] for the TUI, whose chat may become a conductor later
/// (`/model acp:NAME`): an error only when the chat is one already
/// (otherwise the endpoint is missed, and logged).
pub fn offer_tools(
    session: &crate::engine::Session,
    config: &crate::config::ConfigFile,
) -> Result<Option<Endpoint>, ToolsError> {
    match hand_tools(session, config) {
        Ok(endpoint) => Ok(Some(endpoint)),
        Err(e) if session.conducted() => Err(ToolsError(e)),
        Err(e) => {
            tracing::warn!(
                "quorum's tools are not served for a conductor: {}",
                causes(&e)
            );
            Ok(None)
        }
    }
}

/// The chat is a conductor, and its tools cannot be served to it.
#[derive(Debug, thiserror::Error)]
#[error("cannot serve quorum's tools to the chat")]
pub struct ToolsError(#[source] pub std::io::Error);

/// `e` and each of its causes, after `: ` (as `anyhow` shows an error
/// with `{:#}`).
pub fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        text.push_str(&format!(": {cause}"));
        next = cause.source();
    }
    text
}

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
