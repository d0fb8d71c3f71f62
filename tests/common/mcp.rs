//! `quorum mcp` as an MCP host runs it: a [`Peer`] initialised as a host
//! initialises it.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::jsonrpc::Peer;

/// How long a test waits for `quorum mcp`'s answer, or its end.
pub const WAIT: Duration = Duration::from_secs(30);

/// Starts `command` (a `quorum mcp`, its stderr piped) and initialises it
/// as a host does; the answer to `initialize` is returned.
pub fn start(command: Command) -> (Peer, Value) {
    let mut server = Peer::spawn(command, Stdio::piped(), WAIT);
    let id = server.send(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}),
    );
    let initialized = server.answer(id);
    server.notify("notifications/initialized", json!({}));
    (server, initialized)
}

/// Calls the `subagent` tool with `arguments`; the request's id.
pub fn call(server: &mut Peer, arguments: Value) -> u64 {
    server.send(
        "tools/call",
        json!({"name": "subagent", "arguments": arguments}),
    )
}
