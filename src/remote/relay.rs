//! quorum on a host, between the quorum at home (its stdin and stdout, an
//! ssh session's) and an agent it starts there, under the same supervisor
//! and sandbox as at home. Lines pass through untouched both ways, except
//! the agent's `fs/*` and `terminal/*` requests, which are answered here, by
//! the very handlers quorum answers them with at home, confined to the
//! task's directory on this host. When home goes (its stdin ends, for any
//! reason) the agent's stdin is closed, and after a short grace its whole
//! process group is ended; when the agent goes, the relay ends too.
//!
//! Both sides are read as home reads an agent (`confine::lines`): lines
//! capped at the agent's `max_frame_bytes`, bytes that are not UTF-8 never
//! ending the reading. The agent's lines go home as they came, so home
//! replaces such bytes and tells the box, as for an agent of its own; a
//! line over the cap goes home cut, where it ends the connection as it
//! would at home. What is answered here is told here, in the box at home.

use crate::runtime::lock;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::{Agent, Client, Lines};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::fs::{Exclusions, Files};
use super::registry::{AgentSpec, STARTUP_TIMEOUT};
use super::route::{Incoming, QUORUM_METHODS, Routes, relayed_line};
use super::terminal::Terminals;
use super::transport::{KEPT_BUFFER, lossy, too_long};
use crate::confine::limits::{Limits, MAX_FRAME};
use crate::confine::lines::{self, Line, read_line_async};
use crate::runtime::sandbox::Sandbox;
use crate::runtime::supervisor::{self, Supervisor};

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

/// Just enough of a JSON-RPC message to route it.
#[derive(Deserialize)]
struct Peek {
    method: Option<String>,
    id: Option<serde_json::Value>,
    params: Option<PeekParams>,
}

#[derive(Deserialize)]
struct PeekParams {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

fn peek(line: &str) -> Option<Peek> {
    serde_json::from_str(line).ok()
}

/// Runs the agent `hosted` in `dir` (made if missing) between this
/// process's stdin and stdout until either side ends; every process it
/// started is ended before it returns. The agent's exit code (128 + the
/// signal that ended it).
pub async fn relay(mut hosted: Hosted, dir: &Path, supervisor: &Supervisor) -> Result<i32, String> {
    if let Some(file) = hosted.env_file.take() {
        let read = std::fs::read(&file).map_err(|e| format!("{file}: {e}"));
        let _ = std::fs::remove_file(&file);
        hosted.env = serde_json::from_slice(&read?).map_err(|e| format!("{file}: {e}"))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if hosted.isolated {
        crate::runtime::machinery::mark_worktree(dir);
    }
    let root = crate::runtime::git::root(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let spec = hosted.spec();
    let policy = spec.process_policy(hosted.isolated);
    let (mut child, group, _sandboxed) =
        super::process::spawn(&spec, &root, supervisor, policy.as_ref())
            .await
            .map_err(|e| e.to_string())?;
    let mut agent_in = child.stdin.take().expect("piped");
    let agent_out = child.stdout.take().expect("piped");
    let mut agent_err = child.stderr.take().expect("piped");
    // The agent's stderr goes home as this process's (ssh carries it).
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut agent_err, &mut tokio::io::stderr()).await;
    });

    // Lines for the agent's stdin: home's, and the answers given here.
    let (to_agent, mut for_agent) = mpsc::unbounded_channel::<String>();
    let agent_writer = tokio::spawn(async move {
        while let Some(line) = for_agent.recv().await {
            if agent_in.write_all(line.as_bytes()).await.is_err()
                || agent_in.write_all(b"\n").await.is_err()
                || agent_in.flush().await.is_err()
            {
                break;
            }
        }
        // Dropped: the agent's stdin is closed.
    });
    // Lines for home: the agent's, as they came (not always UTF-8), and
    // what the handlers here tell.
    let (to_home, mut for_home) = mpsc::unbounded_channel::<Vec<u8>>();
    let home_writer = tokio::spawn(async move {
        let mut out = tokio::io::stdout();
        while let Some(line) = for_home.recv().await {
            if out.write_all(&line).await.is_err()
                || out.write_all(b"\n").await.is_err()
                || out.flush().await.is_err()
            {
                break;
            }
        }
    });

    // The handlers answering here, on a connection of their own whose
    // "agent" is the agent's requests, passed to it line by line.
    let routes: Routes = Arc::default();
    let exclusions: Exclusions = Arc::default();
    let terminals = Arc::new(Terminals::new(
        spec.name.clone(),
        supervisor.clone(),
        spec.terminal_policy(),
        (root.clone(), exclusions.clone(), routes.clone()),
    ));
    let (to_local, from_agent) = mpsc::unbounded_channel::<String>();
    let local = local_client(
        &root,
        (&exclusions, &routes, &terminals),
        to_agent.clone(),
        from_agent,
    );
    let local = tokio::spawn(local);

    // Home's lines: to the agent; a prompt opens its session's turn here
    // (its commands may run until it is answered), a cancel ends them.
    let prompts: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let (turn_tx, mut turn_rx) = mpsc::unbounded_channel::<(String, Incoming)>();
    // What the handlers here would show in the task's box (a request
    // refused, a command's output) goes home, as `_quorum/relayed` notifications,
    // where it is shown as a local agent's is.
    let relayed = {
        let to_home = to_home.clone();
        tokio::spawn(async move {
            while let Some((session, incoming)) = turn_rx.recv().await {
                if let Some(line) = relayed_line(&session, incoming)
                    && to_home.send(line.into_bytes()).is_err()
                {
                    break;
                }
            }
        })
    };
    let max = hosted.max_frame;
    let home_reader = {
        let (to_agent, prompts, routes, terminals) = (
            to_agent.clone(),
            prompts.clone(),
            routes.clone(),
            terminals.clone(),
        );
        let name = spec.name.clone();
        tokio::spawn(async move {
            let mut input = tokio::io::BufReader::new(tokio::io::stdin());
            let mut buf = Vec::new();
            loop {
                if buf.capacity() > KEPT_BUFFER {
                    buf = Vec::new();
                }
                match read_line_async(&mut input, &mut buf, max).await {
                    Ok(Some(Line {
                        too_long: false, ..
                    })) => {}
                    Ok(Some(_)) => {
                        tracing::warn!("{name}: home {}", too_long(max));
                        break;
                    }
                    Ok(None) | Err(_) => break,
                }
                let (line, bad) = lines::text(Line::body(&buf));
                if bad {
                    tracing::warn!("{name}: home sent bytes that are not UTF-8; replaced");
                }
                let line = line.into_owned();
                if let Some(Peek {
                    method: Some(method),
                    id,
                    params:
                        Some(PeekParams {
                            session_id: Some(session),
                        }),
                }) = peek(&line)
                {
                    match (method.as_str(), id) {
                        ("session/prompt", Some(id)) => {
                            let route = super::route::Route::through(turn_tx.clone());
                            lock(&routes).insert(session.clone(), route);
                            lock(&prompts).insert(id.to_string(), session);
                        }
                        ("session/cancel", _) => terminals.kill_sessions(&[session]),
                        _ => {}
                    }
                }
                if to_agent.send(line).is_err() {
                    break;
                }
            }
        })
    };
    drop(to_agent);

    // The agent's lines: its fs and terminal requests answered here,
    // everything else home, as it came; the answer to a prompt ends its
    // turn here.
    let agent_reader = {
        let (prompts, routes, terminals) = (prompts.clone(), routes.clone(), terminals.clone());
        let name = spec.name.clone();
        tokio::spawn(async move {
            let mut input = tokio::io::BufReader::with_capacity(64 * 1024, agent_out);
            let mut buf = Vec::new();
            // Lines with bytes that are not UTF-8 answered here.
            let mut lossy_lines = 0;
            loop {
                if buf.capacity() > KEPT_BUFFER {
                    buf = Vec::new();
                }
                match read_line_async(&mut input, &mut buf, max).await {
                    Ok(Some(Line {
                        too_long: false, ..
                    })) => {}
                    // Home reads the line as far as it may and no further,
                    // and ends the connection, naming the limit, as it does
                    // for an agent of its own.
                    Ok(Some(_)) => {
                        tracing::warn!("{name} {}", too_long(max));
                        let _ = to_home.send(std::mem::take(&mut buf));
                        break;
                    }
                    Ok(None) | Err(_) => break,
                }
                let body = Line::body(&buf);
                let (line, bad) = lines::text(body);
                match peek(&line) {
                    Some(Peek {
                        method: Some(method),
                        id: Some(_),
                        ..
                    }) if method.starts_with("fs/") || method.starts_with("terminal/") => {
                        if bad {
                            lossy(&mut lossy_lines, &name, &routes);
                        }
                        let _ = to_local.send(line.into_owned());
                        continue;
                    }
                    // Only this proxy speaks as quorum: an agent's line in
                    // its name is dropped.
                    Some(Peek {
                        method: Some(method),
                        ..
                    }) if method.starts_with(QUORUM_METHODS) => continue,
                    Some(Peek {
                        method: None,
                        id: Some(id),
                        ..
                    }) => {
                        if let Some(session) = lock(&prompts).remove(&id.to_string()) {
                            lock(&routes).remove(&session);
                            terminals.drop_sessions(&[session]);
                        }
                    }
                    _ => {}
                }
                if to_home.send(body.to_vec()).is_err() {
                    break;
                }
            }
        })
    };

    // Whichever side ends first ends it all.
    let mut home_reader = home_reader;
    let mut agent_reader = agent_reader;
    // (The agent's exit counts by itself: what it started may hold its
    // stdout open.)
    let mut exited = None;
    tokio::select! {
        _ = &mut home_reader => tracing::info!("{}: home went; ending the agent", spec.name),
        _ = &mut agent_reader => tracing::info!("{}: the agent ended", spec.name),
        status = child.wait() => {
            tracing::info!("{}: the agent exited", spec.name);
            exited = status.ok();
        }
        _ = terminated() => tracing::info!("{}: signalled; ending the agent", spec.name),
    }
    home_reader.abort();
    local.abort();
    // Its stdin closes once nothing more can be sent to it.
    agent_writer.abort();
    let status = match exited {
        Some(status) => Some(status),
        None => match tokio::time::timeout(STDIN_GRACE, child.wait()).await {
            Ok(status) => status.ok(),
            Err(_) => {
                supervisor.terminate(&group, supervisor::GRACE).await;
                child.wait().await.ok()
            }
        },
    };
    supervisor.terminate(&group, supervisor::GRACE).await;
    drop(terminals);
    // What the agent said last still goes home.
    if !agent_reader.is_finished() {
        let _ = tokio::time::timeout(Duration::from_millis(500), &mut agent_reader).await;
    }
    agent_reader.abort();
    relayed.abort();
    let _ = tokio::time::timeout(Duration::from_millis(500), home_writer).await;
    // Its exit, as a shell says it, for home to tell (ssh passes it on).
    Ok(status.map_or(0, |s| {
        use std::os::unix::process::ExitStatusExt;
        s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
    }))
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

/// The client connection that answers the agent's `fs/*` and `terminal/*`
/// requests (read from `requests`, answered into `answers`), as quorum
/// answers them at home.
fn local_client(
    root: &crate::confine::fsroot::Root,
    (exclusions, routes, terminals): (&Exclusions, &Routes, &Arc<Terminals>),
    answers: mpsc::UnboundedSender<String>,
    requests: mpsc::UnboundedReceiver<String>,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let outgoing = futures::sink::unfold(answers, async |answers, line: String| {
        answers
            .send(line)
            .map_err(|_| std::io::Error::other("the agent is gone"))?;
        Ok::<_, std::io::Error>(answers)
    });
    let incoming = futures::stream::unfold(requests, async |mut requests| {
        let line = requests.recv().await?;
        Some((Ok::<_, std::io::Error>(line), requests))
    });
    // On a host, files are the disk's there: no editor's.
    let answering = super::handlers::Answering {
        root: root.clone(),
        files: Files::default(),
        exclusions: exclusions.clone(),
        routes: routes.clone(),
        terminals: terminals.clone(),
    };
    let driver = super::handlers::files_and_terminals(Client.v1().name("quorum-proxy"), answering)
        .connect_with(
            Lines::new(outgoing, incoming),
            async move |cx: agent_client_protocol::v1::ConnectionTo<Agent>| {
                cx.incoming_closed().await;
                Ok(())
            },
        );
    async move {
        if let Err(e) = driver.await {
            tracing::warn!("the host's file and terminal answers ended: {e}");
        }
    }
}
