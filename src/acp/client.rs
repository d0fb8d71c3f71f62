//! Connections to ACP agent processes, and one sub-agent turn over them.
//!
//! One connection per agent name, started on first use and kept for later
//! calls; a connection whose process died is started again. The process
//! runs in the session's directory, so what an agent writes of its own
//! (fast-agent's `.fast-agent/`, say) stays inside it.
//!
//! Here: the connection itself, its small accessors and its errors. Its
//! other jobs are `impl Connection` blocks in files of their own: starting
//! the process (`process`), sessions (`session`) and the turn (`turn`),
//! over the framing (`transport`), the routing to turns (`route`), the
//! file requests (`fs`), the terminals (`terminal`), permissions (`permission`) and the translation of
//! updates into activity (`translate`).

use crate::confine::lock;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::Agent;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::InitializeResponse;
use tokio::sync::oneshot;

use super::fs::Exclusions;
use super::route::Routes;
use super::terminal::Terminals;

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    #[error("{agent}: command {command:?} not found")]
    NotInstalled { agent: String, command: String },
    /// Found on `PATH` only inside a session directory, where an agent
    /// could have put it (`runtime::path`).
    #[error(
        "{agent}: `{command}` is on PATH only at {}, inside the session directory {}, where an agent could have put it: quorum does not start it (give its absolute path as agents.{agent}.command to start it anyway)",
        found.display(),
        session.display()
    )]
    InSession {
        agent: String,
        command: String,
        found: std::path::PathBuf,
        session: std::path::PathBuf,
    },
    #[error("{agent}: cannot start {command:?}: {source}")]
    Spawn {
        agent: String,
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{agent}: {what} failed: {message}")]
    Protocol {
        agent: String,
        what: &'static str,
        message: String,
    },
    #[error(
        "{agent}: no answer to {what} within {} s (startup_timeout in its config)",
        timeout.as_secs_f64()
    )]
    Timeout {
        agent: String,
        what: &'static str,
        timeout: Duration,
    },
}

/// A live connection to one agent process.
pub struct Connection {
    pub agent: String,
    pub(super) cx: ConnectionTo<Agent>,
    pub init: InitializeResponse,
    pub(super) routes: Routes,
    pub(super) exclusions: Exclusions,
    /// Where the session directory's file requests go, when not the disk.
    pub(super) files: super::fs::Files,
    pub(super) dead: Arc<AtomicBool>,
    /// Set by [`Connection::stop_now`].
    pub(super) urgent: Arc<AtomicBool>,
    pub(super) exit: Arc<Mutex<Option<String>>>,
    pub(super) stderr: Arc<Mutex<Tail>>,
    /// Why quorum stopped reading the agent, if it did.
    pub(super) cause: Arc<Mutex<Option<String>>>,
    pub(super) shutdown: Mutex<Option<oneshot::Sender<()>>>,
    /// How long `session/new` (and resume, load) may take.
    pub(super) startup_timeout: Duration,
    /// The sessions open on it (see `live`).
    pub(super) open: Mutex<std::collections::HashSet<String>>,
    /// The terminals the agent runs commands in (`terminal/*`).
    pub(super) terminals: Arc<Terminals>,
    /// The MCP servers its sessions are given (`[mcp_servers]`).
    pub(super) mcp: Vec<super::mcp::McpServerSpec>,
    /// What the agent announced of its sessions: commands, modes, options.
    pub(super) meta: super::meta::Meta,
    /// Whether the agent process runs under bubblewrap.
    pub(super) sandboxed: bool,
    /// Who is told what the agent announces outside a turn.
    pub(super) announced: super::meta::Listener,
}

impl Connection {
    pub fn alive(&self) -> bool {
        !self.dead.load(Ordering::SeqCst)
    }

    /// Whether the agent process itself runs under bubblewrap.
    pub fn sandboxed(&self) -> bool {
        self.sandboxed
    }

    /// Tells `tell` what the agent announces of a session (its commands,
    /// mode, options) while none of its turns runs: real agents send their
    /// commands when they have them, after the session opened. Set once.
    pub fn on_announced(
        &self,
        tell: impl Fn(&str, crate::event::Activity) + Send + Sync + 'static,
    ) {
        let _ = self.announced.set(Box::new(tell));
    }

    pub fn can_resume(&self) -> bool {
        self.init
            .agent_capabilities
            .session_capabilities
            .resume
            .is_some()
    }

    pub fn can_load(&self) -> bool {
        self.init.agent_capabilities.load_session
    }

    /// Why the process ended, with its last stderr line, once it has.
    /// From now on the session directory's `fs/*` requests go to `host`
    /// (the editor quorum serves), after the same checks.
    pub fn serve_files(&self, host: Arc<dyn super::fs::HostFiles>) {
        *lock(&self.files) = Some(host);
    }

    pub fn death(&self) -> String {
        death(&self.cause, &self.exit, &self.stderr)
    }

    /// Closes the connection and stops the process at once (SIGTERM, and
    /// SIGKILL shortly after), without the grace a closed stdin gets.
    pub fn stop_now(&self) {
        self.urgent.store(true, Ordering::SeqCst);
        self.close();
    }

    /// Closes the connection; the process is stopped.
    pub fn close(&self) {
        if let Some(tx) = lock(&self.shutdown).take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.close();
    }
}

/// Why an agent's connection ended: why quorum stopped reading it (if it
/// did), how the process ended, and its last line of stderr.
pub(super) fn death(
    cause: &Mutex<Option<String>>,
    exit: &Mutex<Option<String>>,
    stderr: &Mutex<Tail>,
) -> String {
    let exit = exit.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let exit = exit.unwrap_or_else(|| "the connection closed".to_string());
    let exit = match cause.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
        Some(cause) => format!("{cause}; then {exit}"),
        None => exit,
    };
    match stderr
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .lines
        .back()
    {
        Some(line) => format!("{exit}; last output: {line}"),
        None => exit,
    }
}

/// The latest lines of an agent's stderr, at most `cap` bytes of them.
#[derive(Default)]
pub(super) struct Tail {
    lines: VecDeque<String>,
    bytes: usize,
}

impl Tail {
    pub(super) fn push(&mut self, line: String, cap: usize) {
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.bytes > cap && self.lines.len() > 1 {
            if let Some(old) = self.lines.pop_front() {
                self.bytes -= old.len();
            }
        }
    }
}
