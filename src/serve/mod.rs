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
