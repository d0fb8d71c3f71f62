//! A JSON-RPC peer on a child's stdin and stdout, one message a line, as
//! a host drives `quorum acp` or `quorum mcp`: requests numbered from 1,
//! every message read kept in order, every wait for one bounded.

use std::io::Write;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long `quorum acp`'s tests wait for a message.
pub const WAIT: Duration = Duration::from_secs(60);

pub struct Peer {
    pub child: Child,
    /// Its stdin; `None` once closed (the host gone).
    pub stdin: Option<ChildStdin>,
    /// Its stdout's lines, read on a thread of their own.
    pub lines: mpsc::Receiver<String>,
    /// Every message read so far, in order.
    pub seen: Vec<Value>,
    next: u64,
    /// The longest wait for a message.
    wait: Duration,
}

impl Peer {
    /// Starts `command` with its stdin and stdout piped, its stderr to
    /// `stderr`; a message is waited for `wait` at the most.
    pub fn spawn(mut command: Command, stderr: Stdio, wait: Duration) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = crate::common::lines_of(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            next: 1,
            wait,
        }
    }

    pub fn write(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request; its id.
    pub fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next;
        self.next += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.write(&line.to_string());
        id
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        let line = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.write(&line.to_string());
    }

    /// Waits for the first message (from `from` on) that `pred` takes; its index.
    pub fn wait_for(&mut self, from: usize, what: &str, pred: impl Fn(&Value) -> bool) -> usize {
        let deadline = Instant::now() + self.wait;
        loop {
            if let Some(i) = self.seen[from.min(self.seen.len())..]
                .iter()
                .position(&pred)
            {
                return from + i;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(json_line(&line)),
                Err(_) => panic!("no {what} within {:?}; seen:\n{:#?}", self.wait, self.seen),
            }
        }
    }

    /// The answer to request `id`.
    pub fn answer(&mut self, id: u64) -> Value {
        let i = self.wait_for(0, &format!("answer to {id}"), |v| {
            v["id"] == id && v.get("method").is_none()
        });
        self.seen[i].clone()
    }

    /// The host goes: its end of the child's stdin closes.
    pub fn close(&mut self) {
        self.stdin = None;
    }

    /// Whether the child ended within `within` (killed if not).
    pub fn ended(&mut self, within: Duration) -> bool {
        let ended =
            crate::common::pty::wait_until(within, || self.child.try_wait().unwrap().is_some());
        if !ended {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        ended
    }
}

/// A line the other side wrote, which must be JSON.
pub fn json_line(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("a line that is not JSON ({e}): {line}"))
}
