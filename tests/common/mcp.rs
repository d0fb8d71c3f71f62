//! `quorum mcp` as an MCP host runs it: JSON-RPC lines on its stdin and
//! stdout, initialised, every wait bounded.

use std::io::Write;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use serde_json::{Value, json};

pub struct Server {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Server {
    /// Starts `command` (a `quorum mcp`) and initialises it as a host
    /// does; the answer to `initialize` is returned.
    pub fn start(mut command: Command) -> (Self, Value) {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        // Its answers, read on a thread of their own.
        let lines = crate::common::lines_of(child.stdout.take().unwrap());
        let mut server = Self {
            child,
            stdin,
            lines,
        };
        server.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}),
        );
        let initialized = server.answer(1);
        server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        (server, initialized)
    }

    pub fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Calls the `subagent` tool with `arguments`, as request `id`.
    pub fn call(&mut self, id: u64, arguments: Value) {
        self.send(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "subagent", "arguments": arguments}}),
        );
    }

    /// The answer to request `id` (what comes before it is skipped).
    pub fn answer(&self, id: u64) -> Value {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|e| panic!("no answer to request {id}: {e}"));
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }

    /// The host goes: its end of quorum's stdin closes.
    pub fn close(&mut self) {
        self.stdin = None;
    }

    /// Whether quorum ended within 30 s (killed if not).
    pub fn ended(&mut self) -> bool {
        let ended = crate::common::pty::wait_until(Duration::from_secs(30), || {
            self.child.try_wait().unwrap().is_some()
        });
        if !ended {
            let _ = self.child.kill();
        }
        ended
    }
}
