//! Starting an agent's process and connecting to it: the spawn, the
//! client's request handlers, `initialize`; the draining of its stderr
//! (the tail kept for error messages); and the watch on the process, which
//! ends its whole group when it exits or the connection closes.

use crate::confine::lock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, CompleteElicitationNotification, CreateElicitationRequest,
    CreateElicitationResponse, FileSystemCapabilities, Implementation, InitializeRequest,
    InitializeResponse, RequestPermissionRequest, RequestPermissionResponse, SessionNotification,
    SubagentCapabilities,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{
    Agent, Client, HandleConnectionClose, HandleDispatchFrom, RunWithConnectionTo,
};
use tokio::io::AsyncReadExt;
use tokio::sync::oneshot;

use super::client::{AcpError, Connection, Tail, death};
use super::elicit::{on_elicitation_complete, on_elicitation_request};
use super::fs::{Exclusions, Files};
use super::registry::AgentSpec;
use super::route::{Routes, on_permission_request, on_session_update};
use super::terminal::Terminals;
use super::transport::{Reading, transport};
use crate::confine::fsroot::Root;
use crate::runtime::path::{locate, shadowed};
use crate::runtime::sandbox::{self, Policy};
use crate::runtime::supervisor::{self, Group, Supervisor};

/// How much of one stderr line is kept.
const STDERR_LINE: usize = 4096;
/// How long an agent may take to exit by itself once its stdin is closed
/// (as the ACP stdio transport asks) before its process group is
/// terminated. Agents that ignore the closed stdin (codex-acp,
/// claude-agent-acp) are terminated after it.
const STDIN_GRACE: Duration = Duration::from_secs(1);
/// How long an agent stopped by a second cancel gets between SIGTERM and
/// SIGKILL.
const URGENT_GRACE: Duration = Duration::from_millis(200);

impl Connection {
    /// Starts `spec`'s process in `root`, owned by `supervisor` (and
    /// sandboxed as `policy` says, when one is given), and initializes it,
    /// within the agent's `startup_timeout`. Dropping the future before it
    /// is done stops the process.
    pub async fn start(
        spec: &AgentSpec,
        root: &Root,
        supervisor: &Supervisor,
        policy: Option<&Policy>,
    ) -> Result<Arc<Self>, AcpError> {
        let agent = spec.name.clone();
        let (mut child, group, sandboxed) = spawn(spec, root, supervisor, policy).await?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let (watched, kill) = watch(spec, child, (supervisor.clone(), group));
        // Why quorum stopped reading, when it did (a message too long).
        let cause: Arc<Mutex<Option<String>>> = Arc::default();
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();

        let routes: Routes = Arc::default();
        let meta: super::meta::Meta = Arc::default();
        let announced: super::meta::Listener = Arc::default();
        let exclusions: Exclusions = Arc::default();
        let reading = Reading {
            agent: agent.clone(),
            routes: routes.clone(),
            max_frame: spec.limits.max_frame_bytes,
            cause: cause.clone(),
            meta: meta.clone(),
            announced: announced.clone(),
            relayed: spec.host.is_some(),
        };
        let answering = answering(spec, root, supervisor, (&exclusions, &routes));
        let (files, terminals) = (answering.files.clone(), answering.terminals.clone());
        let cx = connect(
            &agent,
            (stdin, stdout, reading),
            (answering, &routes, &meta),
            shutdown_rx,
            (watched.dead.clone(), kill),
        )
        .await?;
        let died = || death(&cause, &watched.exit, &watched.stderr);
        let init = match initialize(&cx, spec, &watched.dead, died).await {
            Ok(init) => init,
            Err(e) => {
                let _ = shutdown_tx.send(());
                return Err(e);
            }
        };
        let Watched {
            stderr,
            dead,
            urgent,
            exit,
        } = watched;
        let conn = Self {
            agent,
            cx,
            init,
            routes,
            exclusions,
            files,
            dead,
            urgent,
            exit,
            stderr,
            cause,
            shutdown: Mutex::new(Some(shutdown_tx)),
            startup_timeout: spec.startup_timeout,
            open: Mutex::default(),
            terminals,
            mcp: spec.mcp_servers.clone(),
            meta,
            sandboxed,
            announced,
        };
        Ok(Arc::new(conn))
    }
}

/// What answers the agent's requests of files and terminals: the
/// session directory, the editor's files, the paths each session may not
/// read, the sessions' turns, and its terminals.
fn answering(
    spec: &AgentSpec,
    root: &Root,
    supervisor: &Supervisor,
    (exclusions, routes): (&Exclusions, &Routes),
) -> super::handlers::Answering {
    // What the agent asks of the client; each handler is named in the
    // file of its job.
    let files: Files = Arc::default();
    let terminals = Arc::new(Terminals::new(
        spec.name.clone(),
        supervisor.clone(),
        spec.terminal_policy(),
        (root.clone(), exclusions.clone(), routes.clone()),
    ));
    super::handlers::Answering {
        root: root.clone(),
        files,
        exclusions: exclusions.clone(),
        routes: routes.clone(),
        terminals,
    }
}

/// A started agent's process as its watchers keep it: the tail of its
/// stderr, whether it is dead to quorum, whether the person asked twice to
/// stop it, and how it exited.
struct Watched {
    stderr: Arc<Mutex<Tail>>,
    dead: Arc<AtomicBool>,
    urgent: Arc<AtomicBool>,
    exit: Arc<Mutex<Option<String>>>,
}

/// Drains `child`'s stderr and watches it (owned by the supervisor, as
/// `group`) until it exits; the sender returned ends its group once the
/// connection is over.
fn watch(
    spec: &AgentSpec,
    mut child: tokio::process::Child,
    owner: (Supervisor, Group),
) -> (Watched, oneshot::Sender<()>) {
    let agent = &spec.name;
    let stderr = Arc::new(Mutex::new(Tail::default()));
    tokio::spawn(drain_stderr(
        agent.clone(),
        child.stderr.take().expect("piped"),
        stderr.clone(),
        spec.limits.stderr_bytes,
    ));
    let dead = Arc::new(AtomicBool::new(false));
    let urgent = Arc::new(AtomicBool::new(false));
    let exit = Arc::new(Mutex::new(None));
    let (kill_tx, kill_rx) = oneshot::channel::<()>();
    tokio::spawn(watch_process(
        agent.clone(),
        child,
        owner,
        kill_rx,
        (dead.clone(), urgent.clone()),
        exit.clone(),
    ));
    let watched = Watched {
        stderr,
        dead,
        urgent,
        exit,
    };
    (watched, kill_tx)
}

/// Connects to the agent over its stdio with quorum's handlers; the
/// connection runs on a task of its own until `shutdown` or the agent
/// closes it, and then (`drive`) the agent is dead and its group ended.
async fn connect(
    agent: &str,
    (stdin, stdout, reading): (
        tokio::process::ChildStdin,
        tokio::process::ChildStdout,
        Reading,
    ),
    (answering, routes, meta): (super::handlers::Answering, &Routes, &super::meta::Meta),
    shutdown: oneshot::Receiver<()>,
    (dead, kill): (Arc<AtomicBool>, oneshot::Sender<()>),
) -> Result<ConnectionTo<Agent>, AcpError> {
    let transport = transport(stdin, stdout, reading);
    let (cx_tx, cx_rx) = oneshot::channel();
    let driver = Client.v1().name("quorum");
    // Files and terminals, as the proxy on a host answers them too.
    let driver = super::handlers::files_and_terminals(driver, answering);
    let driver = updates_and_asks(driver, routes, meta).connect_with(
        transport,
        async move |cx: ConnectionTo<Agent>| {
            let _ = cx_tx.send(cx.clone());
            tokio::select! {
                _ = shutdown => {}
                _ = cx.incoming_closed() => {}
            }
            Ok(())
        },
    );
    tokio::spawn(drive(agent.to_string(), driver, dead, kill));
    cx_rx.await.map_err(|_| AcpError::Protocol {
        agent: agent.to_string(),
        what: "connecting",
        message: "the connection closed at once".into(),
    })
}

/// `builder` with the handlers of what the agent tells of its sessions
/// (`session/update`: announced, then routed to their turns) and what it
/// asks the person (permissions, questions), each to its turn.
fn updates_and_asks<H, R, C>(
    builder: agent_client_protocol::v1::Builder<Client, H, R, C>,
    routes: &Routes,
    meta: &super::meta::Meta,
) -> agent_client_protocol::v1::Builder<Client, impl HandleDispatchFrom<Agent> + use<H, R, C>, R, C>
where
    H: HandleDispatchFrom<Agent>,
    R: RunWithConnectionTo<Agent>,
    C: HandleConnectionClose<Agent>,
{
    let notify_meta = meta.clone();
    let notify_routes = routes.clone();
    let perm_routes = routes.clone();
    let ask_routes = routes.clone();
    let done_routes = routes.clone();
    builder
        .on_receive_notification(
            async move |n: SessionNotification, _cx| {
                super::meta::observe(&notify_meta, &n.session_id.0, &n.update);
                on_session_update(&notify_routes, n);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |req: RequestPermissionRequest,
                        responder: Responder<RequestPermissionResponse>,
                        _cx| { on_permission_request(&perm_routes, req, responder) },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: CreateElicitationRequest,
                        responder: Responder<CreateElicitationResponse>,
                        _cx| { on_elicitation_request(&ask_routes, req, responder) },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CompleteElicitationNotification, _cx| {
                on_elicitation_complete(&done_routes, n);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
}

/// Runs the connection to its end; then the agent is dead to quorum, and
/// its process group is ended (the transport, and with it the agent's
/// stdin, is closed by then).
async fn drive(
    agent: String,
    driver: impl Future<Output = Result<(), agent_client_protocol::Error>>,
    dead: Arc<AtomicBool>,
    kill: oneshot::Sender<()>,
) {
    if let Err(e) = driver.await {
        tracing::warn!("{agent}: connection ended: {e}");
    }
    dead.store(true, Ordering::SeqCst);
    // The transport, and with it the agent's stdin, is closed: the
    // process group goes next.
    let _ = kill.send(());
}

/// `initialize`, within the agent's `startup_timeout`: its answer, or why
/// there is none (`died` tells how the agent died, when it did).
async fn initialize(
    cx: &ConnectionTo<Agent>,
    spec: &AgentSpec,
    dead: &AtomicBool,
    died: impl FnOnce() -> String,
) -> Result<InitializeResponse, AcpError> {
    let answer = tokio::time::timeout(
        spec.startup_timeout,
        cx.send_request(initialize_request()).block_task(),
    );
    match answer.await {
        Ok(Ok(init)) => Ok(init),
        Err(_) => Err(AcpError::Timeout {
            agent: spec.name.clone(),
            what: "initialize",
            timeout: spec.startup_timeout,
        }),
        Ok(Err(e)) => {
            // Give the watcher a moment to see an exit, for a better message.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let message = if dead.load(Ordering::SeqCst) {
                died()
            } else {
                super::error::describe(&e)
            };
            Err(AcpError::Protocol {
                agent: spec.name.clone(),
                what: "initialize",
                message,
            })
        }
    }
}

/// Finds `spec`'s command and starts it in `root`, its stdio piped, as a
/// process group owned by `supervisor`; under bubblewrap when `policy`
/// says so (the last value: whether it is). The sandbox is made ready on a
/// blocking thread: bringing an agent's private home up to date copies
/// files. (Quorum's proxy on a host starts its agent so too.)
pub async fn spawn(
    spec: &AgentSpec,
    root: &Root,
    supervisor: &Supervisor,
    policy: Option<&Policy>,
) -> Result<(tokio::process::Child, Group, bool), AcpError> {
    let agent = &spec.name;
    // Its program is never one found in the directory it starts in.
    crate::runtime::path::session_dir(root.path());
    let path = locate(&spec.command).ok_or_else(|| match shadowed(&spec.command) {
        Some((found, session)) => AcpError::InSession {
            agent: agent.clone(),
            command: spec.command.clone(),
            found,
            session,
        },
        None => AcpError::NotInstalled {
            agent: agent.clone(),
            command: spec.command.clone(),
        },
    })?;
    let spawn_error = |source| AcpError::Spawn {
        agent: agent.clone(),
        command: spec.command.clone(),
        source,
    };
    let (mut cmd, sandboxed) = match policy {
        Some(policy) => {
            let (path, args, dir, policy, env) = (
                path.clone(),
                spec.args.clone(),
                root.path().to_path_buf(),
                policy.clone(),
                spec.env.clone(),
            );
            let confined = tokio::task::spawn_blocking(move || {
                sandbox::command(
                    &path,
                    &args,
                    (&dir, &dir),
                    &policy,
                    sandbox::Env::Agent(&env),
                )
            })
            .await
            .map_err(|e| spawn_error(std::io::Error::other(e.to_string())))?
            .map_err(|e| spawn_error(std::io::Error::other(e.to_string())))?;
            if let Some(weaker) = &confined.weaker {
                tracing::warn!("{agent}: {weaker}");
            }
            (confined.cmd, confined.sandboxed)
        }
        None => {
            let mut cmd = supervisor::command(&path);
            cmd.args(&spec.args)
                .envs(&spec.env)
                .current_dir(root.path());
            (cmd, false)
        }
    };
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let (child, group) = supervisor.spawn(cmd, agent).map_err(spawn_error)?;
    Ok((child, group, sandboxed))
}

/// What quorum tells an agent it can do: read and write text files (in the
/// session's directory), run commands in terminals, show child sessions as
/// nested boxes, and ask the person questions (forms and URLs).
fn initialize_request() -> InitializeRequest {
    InitializeRequest::new(ProtocolVersion::V1)
        .client_capabilities(
            ClientCapabilities::new()
                .fs(FileSystemCapabilities::new()
                    .read_text_file(true)
                    .write_text_file(true))
                // Commands run in terminals quorum owns (`terminal`).
                .terminal(true)
                // Child sessions are shown as nested boxes.
                .subagents(SubagentCapabilities::new())
                // Questions for the person: forms in the box, and URLs.
                .elicitation(
                    agent_client_protocol::v1::schema::ElicitationCapabilities::new()
                        .form(agent_client_protocol::v1::schema::ElicitationFormCapabilities::new())
                        .url(agent_client_protocol::v1::schema::ElicitationUrlCapabilities::new()),
                ),
        )
        .client_info(Implementation::new("quorum", env!("CARGO_PKG_VERSION")))
}

/// Reads an agent's stderr to its end, whatever it writes: each line is
/// logged (debug) and kept, clean, among the last `keep_bytes` of it; a line
/// is kept to its first [`STDERR_LINE`] bytes, so one endless line costs no
/// more, and bytes that are not UTF-8 are replaced, never a reason to stop
/// reading (an undrained pipe would block the agent).
async fn drain_stderr(
    agent: String,
    mut pipe: tokio::process::ChildStderr,
    keep: Arc<Mutex<Tail>>,
    keep_bytes: u64,
) {
    let cap = usize::try_from(keep_bytes).unwrap_or(usize::MAX);
    let mut buf = vec![0u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    let mut cut = false;
    let emit = |line: &[u8], cut: bool| {
        let text = String::from_utf8_lossy(line);
        let more = if cut { "…" } else { "" };
        tracing::debug!(target: "agent_stderr", "{agent}: {text}{more}");
        let clean = crate::confine::sanitize::sanitize(&text).trim().to_string();
        if clean.is_empty() {
            return;
        }
        keep.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(clean + more, cap);
    };
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for piece in buf[..n].split_inclusive(|&b| b == b'\n') {
            let (body, ends) = match piece.split_last() {
                Some((b'\n', body)) => (body, true),
                _ => (piece, false),
            };
            let room = STDERR_LINE.saturating_sub(line.len());
            cut |= body.len() > room;
            line.extend_from_slice(&body[..body.len().min(room)]);
            if ends {
                emit(&line, cut);
                line.clear();
                cut = false;
            }
        }
    }
    if !line.is_empty() {
        emit(&line, cut);
    }
}

/// Waits for the agent to exit, or for the connection to close (its stdin
/// is closed by then); either way its whole process group (agents often
/// run helpers) is terminated.
async fn watch_process(
    agent: String,
    mut child: tokio::process::Child,
    (supervisor, group): (Supervisor, Group),
    kill: oneshot::Receiver<()>,
    (dead, urgent): (Arc<AtomicBool>, Arc<AtomicBool>),
    exit: Arc<Mutex<Option<String>>>,
) {
    let status = tokio::select! {
        status = child.wait() => status,
        _ = kill => match urgent.load(Ordering::SeqCst) {
            // The person asked twice: no grace for a closed stdin.
            true => {
                supervisor.terminate(&group, URGENT_GRACE).await;
                child.wait().await
            }
            false => match tokio::time::timeout(STDIN_GRACE, child.wait()).await {
                Ok(status) => status,
                Err(_) => {
                    supervisor.terminate(&group, supervisor::GRACE).await;
                    child.wait().await
                }
            },
        },
    };
    let description = match status {
        Ok(s) => match s.code() {
            Some(code) => format!("exited with code {code}"),
            None => format!("ended by {s}"),
        },
        Err(e) => format!("could not be waited for: {e}"),
    };
    tracing::info!("{agent}: process {description}");
    *lock(&exit) = Some(description);
    dead.store(true, Ordering::SeqCst);
    // Whatever the agent left running goes with it.
    supervisor.terminate(&group, supervisor::GRACE).await;
}
