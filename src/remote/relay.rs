//! quorum on a host (`quorum proxy`), between the quorum at home (its stdin
//! and stdout, an ssh session's) and an agent it starts there, under the
//! same supervisor and sandbox as at home. Lines pass through untouched
//! both ways, except the agent's `fs/*` and `terminal/*` requests, which
//! are answered here ([`Answers`]: the very handlers quorum answers them
//! with at home), confined to the task's directory on this host. When home goes (its stdin ends, for any
//! reason) the agent's stdin is closed, and after a short grace its whole
//! process group is ended; when the agent goes, the relay ends too.
//!
//! Both sides are read as home reads an agent (`confine::lines`): lines
//! capped at the agent's `max_frame_bytes`, bytes that are not UTF-8 never
//! ending the reading. The agent's lines go home as they came, so home
//! replaces such bytes and tells the box, as for an agent of its own; a
//! line over the cap goes home cut, where it ends the connection as it
//! would at home. What is answered here is told here, in the box at home.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::acp::answers::Answers;
use crate::acp::client::AcpError;
use crate::acp::registry::{AgentSpec, STARTUP_TIMEOUT};
use crate::confine::fsroot::Root;
use crate::confine::limits::{Limits, MAX_FRAME};
use crate::confine::lines::{self, KEPT_BUFFER, Line, read_line_async, too_long};
use crate::runtime::sandbox::Sandbox;
use crate::runtime::supervisor::{self, Group, Supervisor};

/// How long the agent has to exit by itself once home is gone and its
/// stdin closed, before its process group is ended.
const STDIN_GRACE: Duration = Duration::from_secs(1);

/// What the quorum at home tells the one on the host about the agent (as
/// JSON, an argument of `quorum proxy`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hosted {
    pub name: String,
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub sandbox: Option<Sandbox>,
    pub terminal_sandbox: Option<Sandbox>,
    #[serde(default)]
    pub terminal_network: bool,
    #[serde(default)]
    pub state: Vec<String>,
    #[serde(default)]
    pub credentials: Vec<String>,
    #[serde(default)]
    pub writable: Vec<String>,
    #[serde(default)]
    pub protect: Vec<String>,
    #[serde(default)]
    pub unix_sockets: Vec<String>,
    #[serde(default)]
    pub user_namespaces: bool,
    /// A worktree task's (its process sandboxed by default).
    #[serde(default)]
    pub isolated: bool,
    /// A private file holding `env` (JSON), read and removed by the proxy:
    /// an agent's environment (its keys) never shows in a process listing.
    #[serde(default)]
    pub env_file: Option<String>,
    /// The longest line read, from either side (home's `max_frame_bytes`
    /// for the agent).
    #[serde(default = "max_frame")]
    pub max_frame: u64,
}

fn max_frame() -> u64 {
    MAX_FRAME
}

impl Hosted {
    /// `spec` as the host is told it.
    pub fn of(spec: &AgentSpec, isolated: bool) -> Self {
        Self {
            name: spec.name.clone(),
            command: spec.command.clone(),
            args: spec.args.clone(),
            env: spec.env.clone(),
            sandbox: spec.sandbox,
            terminal_sandbox: spec.terminal_sandbox,
            terminal_network: spec.terminal_network,
            state: spec.state.clone(),
            credentials: spec.credentials.clone(),
            writable: spec.writable.clone(),
            protect: spec.protect.clone(),
            unix_sockets: spec.unix_sockets.clone(),
            user_namespaces: spec.user_namespaces,
            isolated,
            env_file: None,
            max_frame: spec.limits.max_frame_bytes,
        }
    }

    /// The agent as this host runs it.
    fn spec(&self) -> AgentSpec {
        AgentSpec {
            name: self.name.clone(),
            command: self.command.clone(),
            args: self.args.clone(),
            env: self.env.clone(),
            description: String::new(),
            permissions: Default::default(),
            startup_timeout: STARTUP_TIMEOUT,
            install: None,
            model: None,
            mode: None,
            source: None,
            limits: Limits {
                max_frame_bytes: self.max_frame,
                ..Limits::default()
            },
            terminal_sandbox: self.terminal_sandbox,
            terminal_network: self.terminal_network,
            sandbox: self.sandbox,
            state: self.state.clone(),
            credentials: self.credentials.clone(),
            writable: self.writable.clone(),
            protect: self.protect.clone(),
            unix_sockets: self.unix_sockets.clone(),
            user_namespaces: self.user_namespaces,
            mcp_pick: None,
            mcp_servers: Vec::new(),
            host: None,
        }
    }
}

/// Why the proxy could not start its agent (said on stderr, which ssh
/// carries home).
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The agent's environment, in the private file home wrote.
    #[error("{file}: {error}")]
    EnvRead { file: String, error: std::io::Error },
    #[error("{file}: {error}")]
    EnvParse {
        file: String,
        error: serde_json::Error,
    },
    /// The task's directory here.
    #[error("{}: {error}", dir.display())]
    Dir { dir: PathBuf, error: std::io::Error },
    /// The agent could not be started.
    #[error(transparent)]
    Start(#[from] AcpError),
}

/// Runs the agent `hosted` in `dir` (made if missing) between this
/// process's stdin and stdout until either side ends; every process it
/// started is ended before it returns. The agent's exit code (128 + the
/// signal that ended it).
pub async fn relay(
    mut hosted: Hosted,
    dir: &Path,
    supervisor: &Supervisor,
) -> Result<i32, RelayError> {
    take_env(&mut hosted)?;
    let root = task_dir(dir, hosted.isolated)?;
    let spec = hosted.spec();
    let policy = spec.process_policy(hosted.isolated);
    let (mut child, group, _sandboxed) =
        crate::acp::spawn(&spec, &root, supervisor, policy.as_ref()).await?;
    let agent_in = child.stdin.take().expect("piped");
    let agent_out = child.stdout.take().expect("piped");
    let mut agent_err = child.stderr.take().expect("piped");
    // The agent's stderr goes home as this process's (ssh carries it).
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut agent_err, &mut tokio::io::stderr()).await;
    });
    // Lines for the agent's stdin: home's, and the answers given here.
    let (to_agent, agent_writer) = writer(agent_in, |line: String| line.into_bytes());
    // Lines for home: the agent's, as they came (not always UTF-8), and
    // what the answers here tell.
    let (to_home, home_writer) = writer(tokio::io::stdout(), |line: Vec<u8>| line);
    let answers = Answers::start(&spec, &root, supervisor, to_agent.clone(), to_home);
    let (max, name) = (hosted.max_frame, spec.name.clone());
    let home_reader = tokio::spawn(read_home(answers.clone(), to_agent, (max, name.clone())));
    let agent_reader = tokio::spawn(read_agent(answers.clone(), agent_out, (max, name)));
    let running = Running {
        child,
        group,
        answers,
        home_reader,
        agent_reader,
        agent_writer,
        home_writer,
    };
    Ok(running.end(&spec.name, supervisor).await)
}

/// The agent's environment, read from the private file home wrote (and
/// removed): its keys never show in a process listing.
fn take_env(hosted: &mut Hosted) -> Result<(), RelayError> {
    if let Some(file) = hosted.env_file.take() {
        let read = std::fs::read(&file);
        let _ = std::fs::remove_file(&file);
        let read = read.map_err(|error| RelayError::EnvRead {
            file: file.clone(),
            error,
        })?;
        hosted.env =
            serde_json::from_slice(&read).map_err(|error| RelayError::EnvParse { file, error })?;
    }
    Ok(())
}

/// The task's directory here, made if missing (a worktree task's marked
/// as one), as the session directory the agent is confined to.
fn task_dir(dir: &Path, isolated: bool) -> Result<Root, RelayError> {
    let failed = |error| RelayError::Dir {
        dir: dir.to_path_buf(),
        error,
    };
    std::fs::create_dir_all(dir).map_err(failed)?;
    if isolated {
        crate::runtime::machinery::mark_worktree(dir);
    }
    crate::runtime::git::root(dir).map_err(failed)
}

/// A task writing the lines sent on the channel it returns to `out`, each
/// with a newline, until the channel closes or `out` does.
fn writer<T: Send + 'static>(
    mut out: impl tokio::io::AsyncWrite + Unpin + Send + 'static,
    bytes: fn(T) -> Vec<u8>,
) -> (mpsc::UnboundedSender<T>, JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<T>();
    let task = tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            let line = bytes(line);
            if out.write_all(&line).await.is_err()
                || out.write_all(b"\n").await.is_err()
                || out.flush().await.is_err()
            {
                break;
            }
        }
        // Dropped: `out` is closed (the agent's stdin, for its writer).
    });
    (tx, task)
}

/// Reads the next line of `input` into `buf` (its room given back when a
/// long line took much): `Ok` when there is one within `max` bytes; else
/// why not (`None`: the input ended, or could not be read).
async fn next_line(
    input: &mut (impl tokio::io::AsyncBufRead + Unpin),
    buf: &mut Vec<u8>,
    max: u64,
) -> Result<(), Option<std::io::Error>> {
    if buf.capacity() > KEPT_BUFFER {
        *buf = Vec::new();
    }
    match read_line_async(input, buf, max).await {
        Ok(Some(Line {
            too_long: false, ..
        })) => Ok(()),
        Ok(Some(_)) => Err(Some(too_long(max))),
        Ok(None) | Err(_) => Err(None),
    }
}

/// Home's lines, to the agent: a prompt opens its session's turn here (its
/// commands may run until it is answered), a cancel ends them.
async fn read_home(
    answers: Arc<Answers>,
    to_agent: mpsc::UnboundedSender<String>,
    (max, name): (u64, String),
) {
    let mut input = tokio::io::BufReader::new(tokio::io::stdin());
    let mut buf = Vec::new();
    loop {
        if let Err(too_long) = next_line(&mut input, &mut buf, max).await {
            if let Some(e) = too_long {
                tracing::warn!("{name}: home {e}");
            }
            break;
        }
        let (line, bad) = lines::text(Line::body(&buf));
        if bad {
            tracing::warn!("{name}: home sent bytes that are not UTF-8; replaced");
        }
        let line = line.into_owned();
        answers.from_home(&line);
        if to_agent.send(line).is_err() {
            break;
        }
    }
}

/// The agent's lines: its fs and terminal requests answered here,
/// everything else home, as it came; the answer to a prompt ends its turn
/// here.
async fn read_agent(
    answers: Arc<Answers>,
    agent_out: impl AsyncRead + Unpin,
    (max, name): (u64, String),
) {
    let mut input = tokio::io::BufReader::with_capacity(64 * 1024, agent_out);
    let mut buf = Vec::new();
    loop {
        match next_line(&mut input, &mut buf, max).await {
            Ok(()) => {}
            // Home reads the line as far as it may and no further, and
            // ends the connection, naming the limit, as it does for an
            // agent of its own.
            Err(Some(e)) => {
                tracing::warn!("{name} {e}");
                let _ = answers.home(std::mem::take(&mut buf));
                break;
            }
            Err(None) => break,
        }
        let body = Line::body(&buf);
        let (line, bad) = lines::text(body);
        if !answers.from_agent(&line, bad) {
            continue;
        }
        if !answers.home(body.to_vec()) {
            break;
        }
    }
}

/// A relay under way: the agent, the answers here, and the tasks moving
/// its lines.
struct Running {
    child: tokio::process::Child,
    group: Group,
    answers: Arc<Answers>,
    home_reader: JoinHandle<()>,
    agent_reader: JoinHandle<()>,
    agent_writer: JoinHandle<()>,
    home_writer: JoinHandle<()>,
}

impl Running {
    /// Whichever side ends first ends it all: the agent's stdin closed,
    /// its process group ended after a grace, what it said last sent
    /// home. Its exit, as a shell says it, for home to tell (ssh passes it
    /// on).
    async fn end(mut self, name: &str, supervisor: &Supervisor) -> i32 {
        // (The agent's exit counts by itself: what it started may hold its
        // stdout open.)
        let mut exited = None;
        tokio::select! {
            _ = &mut self.home_reader => tracing::info!("{name}: home went; ending the agent"),
            _ = &mut self.agent_reader => tracing::info!("{name}: the agent ended"),
            status = self.child.wait() => {
                tracing::info!("{name}: the agent exited");
                exited = status.ok();
            }
            _ = terminated() => tracing::info!("{name}: signalled; ending the agent"),
        }
        self.home_reader.abort();
        self.answers.stop_answering();
        // Its stdin closes once nothing more can be sent to it.
        self.agent_writer.abort();
        let status = match exited {
            Some(status) => Some(status),
            None => match tokio::time::timeout(STDIN_GRACE, self.child.wait()).await {
                Ok(status) => status.ok(),
                Err(_) => {
                    supervisor.terminate(&self.group, supervisor::GRACE).await;
                    self.child.wait().await.ok()
                }
            },
        };
        supervisor.terminate(&self.group, supervisor::GRACE).await;
        drop(self.answers);
        // What the agent said last still goes home.
        let mut agent_reader = self.agent_reader;
        if !agent_reader.is_finished() {
            let _ = tokio::time::timeout(Duration::from_millis(500), &mut agent_reader).await;
        }
        agent_reader.abort();
        let _ = tokio::time::timeout(Duration::from_millis(500), self.home_writer).await;
        status.map_or(0, |s| {
            use std::os::unix::process::ExitStatusExt;
            s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
        })
    }
}

/// SIGTERM, SIGINT or SIGHUP.
async fn terminated() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
        _ = hup.recv() => {}
    }
}
