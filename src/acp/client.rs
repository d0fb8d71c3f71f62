//! Connections to ACP agent processes, and one sub-agent turn over them.
//!
//! One connection per agent name, started on first use and kept for later
//! calls; a connection whose process died is started again. The process
//! runs in the session's directory, so what an agent writes of its own
//! (fast-agent's `.fast-agent/`, say) stays inside it.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, ContentBlock, FileSystemCapabilities, Implementation,
    InitializeRequest, InitializeResponse, LoadSessionRequest, NewSessionRequest, PromptRequest,
    ReadTextFileRequest, ReadTextFileResponse, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, ResumeSessionRequest, SessionConfigKind, SessionConfigOption,
    SessionConfigOptionCategory, SessionConfigSelect, SessionConfigSelectOptions,
    SessionNotification, SessionUpdate, SetSessionConfigOptionRequest, SubagentCapabilities,
    SubagentUpdate, TextContent, WriteTextFileRequest, WriteTextFileResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Lines};
use futures::StreamExt;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::permission::{
    outcome_for, outside_path, permission_detail, permission_title, pick_option,
};
use super::registry::AgentSpec;
use super::translate::{self, ChildInfo, Translated, stop_reason};
use crate::agent::{Permissions, TurnControl, TurnRequest, TurnSink};
use crate::confine::fsroot::{Exclude, Root};
use crate::event::{Activity, Outcome, SessionKind, StopReason};
use crate::runtime::cancel::cancelled;
use crate::runtime::path::locate;
use crate::runtime::supervisor::{self, Group, Supervisor};

/// How long an agent may take to end its turn after `session/cancel`.
const CANCEL_GRACE: Duration = Duration::from_secs(10);
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

#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    #[error("{agent}: command {command:?} not found")]
    NotInstalled { agent: String, command: String },
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

/// Something the agent sent that belongs to one session's turn.
enum Incoming {
    Update(Box<SessionUpdate>),
    Permission(
        Box<RequestPermissionRequest>,
        Responder<RequestPermissionResponse>,
    ),
    /// Something the person should know of, shown in the box: a file
    /// request refused, a message with bytes that are not UTF-8.
    Notice(String),
}

/// Each running turn's channel, by session id: the turn's own session and
/// the child sessions its agent announced. What is sent carries the
/// session it came for.
type Routes = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<(String, Incoming)>>>>;
/// What each running session may not read (`exclude_files_pattern`).
type Exclusions = Arc<Mutex<HashMap<String, Exclude>>>;

/// Hands `incoming` to its session's turn; gives it back if no turn runs.
/// A `subagent_update` announcing a child session routes the child's
/// traffic to the same turn from now on (before any of it is read).
fn route(routes: &Routes, session: &str, incoming: Incoming) -> Option<Incoming> {
    let mut routes = routes
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(tx) = routes.get(session).cloned() else {
        return Some(incoming);
    };
    if let Incoming::Update(update) = &incoming
        && let SessionUpdate::SubagentUpdate(child) = update.as_ref()
    {
        routes
            .entry(child.session_id.0.to_string())
            .or_insert_with(|| tx.clone());
    }
    tx.send((session.to_string(), incoming))
        .err()
        .map(|e| e.0.1)
}

/// A live connection to one agent process.
pub struct Connection {
    pub agent: String,
    cx: ConnectionTo<Agent>,
    pub init: InitializeResponse,
    routes: Routes,
    exclusions: Exclusions,
    dead: Arc<AtomicBool>,
    /// Set by [`Connection::stop_now`].
    urgent: Arc<AtomicBool>,
    exit: Arc<Mutex<Option<String>>>,
    stderr: Arc<Mutex<Tail>>,
    /// Why quorum stopped reading the agent, if it did.
    cause: Arc<Mutex<Option<String>>>,
    shutdown: Mutex<Option<oneshot::Sender<()>>>,
    /// How long `session/new` (and resume, load) may take.
    startup_timeout: Duration,
}

impl Connection {
    pub fn alive(&self) -> bool {
        !self.dead.load(Ordering::SeqCst)
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
        if let Some(tx) = self
            .shutdown
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            let _ = tx.send(());
        }
    }

    /// Starts `spec`'s process in `root`, owned by `supervisor`, and
    /// initializes it, within the agent's `startup_timeout`. Dropping the
    /// future before it is done stops the process.
    pub async fn start(
        spec: &AgentSpec,
        root: &Root,
        supervisor: &Supervisor,
    ) -> Result<Arc<Self>, AcpError> {
        let agent = spec.name.clone();
        let path = locate(&spec.command).ok_or_else(|| AcpError::NotInstalled {
            agent: agent.clone(),
            command: spec.command.clone(),
        })?;
        let mut cmd = tokio::process::Command::new(&path);
        cmd.args(&spec.args)
            .envs(&spec.env)
            .current_dir(root.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let (mut child, group) =
            supervisor
                .spawn(cmd, &agent)
                .map_err(|source| AcpError::Spawn {
                    agent: agent.clone(),
                    command: spec.command.clone(),
                    source,
                })?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let stderr_pipe = child.stderr.take().expect("piped");

        let stderr = Arc::new(Mutex::new(Tail::default()));
        tokio::spawn(drain_stderr(
            agent.clone(),
            stderr_pipe,
            stderr.clone(),
            spec.limits.stderr_bytes,
        ));
        // Why quorum stopped reading, when it did (a message too long).
        let cause: Arc<Mutex<Option<String>>> = Arc::default();

        let dead = Arc::new(AtomicBool::new(false));
        let urgent = Arc::new(AtomicBool::new(false));
        let exit = Arc::new(Mutex::new(None));
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        let (kill_tx, kill_rx) = oneshot::channel::<()>();
        tokio::spawn(watch_process(
            agent.clone(),
            child,
            (supervisor.clone(), group),
            kill_rx,
            (dead.clone(), urgent.clone()),
            exit.clone(),
        ));

        let routes: Routes = Arc::default();
        let exclusions: Exclusions = Arc::default();
        let read_exclusions = exclusions.clone();
        let transport = transport(
            stdin,
            stdout,
            Reading {
                agent: agent.clone(),
                routes: routes.clone(),
                max_frame: spec.limits.max_frame_bytes,
                cause: cause.clone(),
            },
        );
        let (cx_tx, cx_rx) = oneshot::channel();

        let notify_routes = routes.clone();
        let perm_routes = routes.clone();
        let read_routes = routes.clone();
        let write_routes = routes.clone();
        let read_root = root.clone();
        let write_root = root.clone();
        let driver = Client
            .v1()
            .name("quorum")
            .on_receive_notification(
                async move |n: SessionNotification, _cx| {
                    let _ = route(
                        &notify_routes,
                        &n.session_id.0,
                        Incoming::Update(Box::new(n.update)),
                    );
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_request(
                async move |req: RequestPermissionRequest,
                            responder: Responder<RequestPermissionResponse>,
                            _cx| {
                    let session = req.session_id.0.to_string();
                    // The turn decides; an unknown session gets `cancelled`.
                    if let Some(Incoming::Permission(_, responder)) = route(
                        &perm_routes,
                        &session,
                        Incoming::Permission(Box::new(req), responder),
                    ) {
                        responder.respond(RequestPermissionResponse::new(
                            RequestPermissionOutcome::Cancelled,
                        ))?;
                    }
                    Ok(())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req: ReadTextFileRequest,
                            responder: Responder<ReadTextFileResponse>,
                            _cx| {
                    let exclude = read_exclusions
                        .lock()
                        .expect("not poisoned")
                        .get(req.session_id.0.as_ref())
                        .cloned();
                    // File I/O runs on a blocking thread, and the answer
                    // is sent from a task of its own: the dispatch loop
                    // never waits on the disk.
                    let root = read_root.clone();
                    let routes = read_routes.clone();
                    tokio::spawn(async move {
                        let session = req.session_id.0.clone();
                        let read = tokio::task::spawn_blocking(move || {
                            root.check(&req.path, exclude.as_ref())
                                .and_then(|()| root.read(&req.path, req.line, req.limit))
                        })
                        .await;
                        let _ = match read {
                            Ok(Ok(text)) => responder.respond(ReadTextFileResponse::new(text)),
                            Ok(Err(e)) => {
                                let _ = route(
                                    &routes,
                                    &session,
                                    Incoming::Notice(format!("refused to read {e}")),
                                );
                                responder.respond_with_error(fs_error(&e))
                            }
                            Err(e) => responder.respond_with_error(
                                agent_client_protocol::Error::internal_error()
                                    .data(format!("the read stopped: {e}")),
                            ),
                        };
                    });
                    Ok(())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req: WriteTextFileRequest,
                            responder: Responder<WriteTextFileResponse>,
                            _cx| {
                    let root = write_root.clone();
                    let routes = write_routes.clone();
                    tokio::spawn(async move {
                        let session = req.session_id.0.clone();
                        let path = req.path.clone();
                        let written = tokio::task::spawn_blocking(move || {
                            root.write(&req.path, &req.content)
                        })
                        .await;
                        let _ = match written {
                            Ok(Ok(())) => responder.respond(WriteTextFileResponse::new()),
                            Ok(Err(e)) => {
                                let _ = route(
                                    &routes,
                                    &session,
                                    Incoming::Notice(format!("refused to write {e}")),
                                );
                                responder.respond_with_error(fs_error(&e))
                            }
                            Err(e) => responder.respond_with_error(
                                agent_client_protocol::Error::internal_error()
                                    .data(format!("the write to {} stopped: {e}", path.display())),
                            ),
                        };
                    });
                    Ok(())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
                let _ = cx_tx.send(cx.clone());
                tokio::select! {
                    _ = shutdown_rx => {}
                    _ = cx.incoming_closed() => {}
                }
                Ok(())
            });
        {
            let agent = agent.clone();
            let dead = dead.clone();
            tokio::spawn(async move {
                if let Err(e) = driver.await {
                    tracing::warn!("{agent}: connection ended: {e}");
                }
                dead.store(true, Ordering::SeqCst);
                // The transport, and with it the agent's stdin, is closed:
                // the process group goes next.
                let _ = kill_tx.send(());
            });
        }
        let cx = cx_rx.await.map_err(|_| AcpError::Protocol {
            agent: agent.clone(),
            what: "connecting",
            message: "the connection closed at once".into(),
        })?;
        let init = InitializeRequest::new(ProtocolVersion::V1)
            .client_capabilities(
                ClientCapabilities::new()
                    .fs(FileSystemCapabilities::new()
                        .read_text_file(true)
                        .write_text_file(true))
                    // Child sessions are shown as nested boxes.
                    .subagents(SubagentCapabilities::new()),
            )
            .client_info(Implementation::new("quorum", env!("CARGO_PKG_VERSION")));
        let answer = tokio::time::timeout(spec.startup_timeout, cx.send_request(init).block_task());
        let init = match answer.await {
            Ok(Ok(init)) => init,
            Err(_) => {
                let _ = shutdown_tx.send(());
                return Err(AcpError::Timeout {
                    agent,
                    what: "initialize",
                    timeout: spec.startup_timeout,
                });
            }
            Ok(Err(e)) => {
                // Give the watcher a moment to see an exit, for a better message.
                tokio::time::sleep(Duration::from_millis(100)).await;
                let message = if dead.load(Ordering::SeqCst) {
                    death(&cause, &exit, &stderr)
                } else {
                    e.to_string()
                };
                let _ = shutdown_tx.send(());
                return Err(AcpError::Protocol {
                    agent,
                    what: "initialize",
                    message,
                });
            }
        };
        let conn = Self {
            agent,
            cx,
            init,
            routes,
            exclusions,
            dead,
            urgent,
            exit,
            stderr,
            cause,
            shutdown: Mutex::new(Some(shutdown_tx)),
            startup_timeout: spec.startup_timeout,
        };
        Ok(Arc::new(conn))
    }

    /// Runs one turn: opens (or resumes) a session, sends the prompt,
    /// streams activity to `sink` and ends with the agent's final message.
    pub async fn turn(
        &self,
        request: TurnRequest<'_>,
        sink: &dyn TurnSink,
        control: &mut TurnControl,
    ) -> Outcome {
        // Opening the session may hang like `initialize`: it is bounded by
        // the startup timeout, and the person can cancel it.
        let open = tokio::time::timeout(
            self.startup_timeout,
            self.open_session(request.root, request.resume, sink),
        );
        let opened = tokio::select! {
            opened = open => opened,
            _ = cancelled(&mut control.cancel) => {
                return Outcome::new(
                    StopReason::Cancelled,
                    format!("{}: cancelled while opening a session", self.agent),
                );
            }
        };
        let (session_id, kind, offered) = match opened {
            Ok(Ok(opened)) => opened,
            Ok(Err(message)) => return Outcome::error(message),
            Err(_) => {
                return Outcome::error(format!(
                    "{}: no answer to session/new within {} s (startup_timeout in its config)",
                    self.agent,
                    self.startup_timeout.as_secs_f64()
                ));
            }
        };
        sink.session(kind, &session_id);
        if matches!(kind, SessionKind::Fresh | SessionKind::NewAfterStale) {
            let wanted = [("model", request.model), ("mode", request.mode)];
            self.apply_settings(&session_id, offered, wanted, sink)
                .await;
        }
        if let Some(exclude) = request.exclude {
            self.exclusions
                .lock()
                .expect("not poisoned")
                .insert(session_id.clone(), exclude.clone());
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        self.routes
            .lock()
            .expect("not poisoned")
            .insert(session_id.clone(), tx.clone());
        // The child sessions the agent announced, by session id.
        let mut children: HashMap<String, Child> = HashMap::new();
        // Which child asked each pending permission request.
        let mut asked_by: HashMap<String, String> = HashMap::new();
        let prompt = PromptRequest::new(
            session_id.clone(),
            vec![ContentBlock::Text(TextContent::new(
                request.prompt.to_string(),
            ))],
        );
        let response = self.cx.send_request(prompt).block_task();
        tokio::pin!(response);
        let mut turn = Turn::default();
        let root = Root::new(request.root).ok();
        let mut pending: HashMap<
            String,
            (
                RequestPermissionRequest,
                Responder<RequestPermissionResponse>,
            ),
        > = HashMap::new();
        let mut cancelled = false;
        let grace = tokio::time::sleep(Duration::MAX / 4);
        tokio::pin!(grace);
        let result = loop {
            tokio::select! {
                biased;
                Some((from, incoming)) = rx.recv() => match incoming {
                    // Asked to stop: what the agent still says is not shown.
                    Incoming::Update(_) if cancelled => {}
                    Incoming::Update(update) => match *update {
                        SessionUpdate::SubagentUpdate(u) => {
                            Self::announce(u, &mut children, sink);
                        }
                        update if from == session_id => turn.update(update, sink),
                        update => {
                            if let Some(child) = children.get_mut(&from) {
                                let child_sink = ChildSink { inner: sink, child: &from };
                                child.turn.update(update, &child_sink);
                            }
                        }
                    },
                    Incoming::Notice(text) => sink.activity(Activity::Notice { text }),
                    Incoming::Permission(req, responder) => {
                        // A child's request names the child, and is shown
                        // in its box too.
                        let child = (from != session_id).then_some(from.as_str());
                        let (id, title) = match child {
                            None => (req.tool_call.tool_call_id.0.to_string(), permission_title(&req)),
                            Some(c) => (
                                format!("{c}/{}", req.tool_call.tool_call_id.0),
                                format!("{}: {}", children.get(c).map_or(c, |k| k.name(c)), permission_title(&req)),
                            ),
                        };
                        let sink = &Both { sink, child };
                        // Whatever the policy, nothing outside the session directory.
                        if let Some(path) = root.as_ref().and_then(|r| outside_path(&req, r)) {
                            sink.activity(Activity::PermissionRequest {
                                id: id.clone(),
                                title: title.clone(),
                                options: req.options.iter().map(|o| o.name.clone()).collect(),
                                detail: permission_detail(&req),
                            });
                            let reason = format!("refused: {path} is outside the session directory");
                            sink.activity(Activity::PermissionResolved { id, outcome: reason.clone() });
                            sink.notice(&format!("{}: {reason}", self.agent));
                            let _ = responder.respond(outcome_for(pick_option(&req, false).map(|(id, _)| id)));
                            continue;
                        }
                        let policy = if cancelled { Permissions::Deny } else { request.policy };
                        match policy {
                            Permissions::Allow | Permissions::Deny if cancelled => {
                                let _ = responder.respond(RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled));
                            }
                            Permissions::Allow | Permissions::Deny => {
                                let allow = policy == Permissions::Allow;
                                let picked = pick_option(&req, allow);
                                let name = picked.as_ref().map_or("cancelled".to_string(), |(_, n)| n.clone());
                                sink.activity(Activity::PermissionRequest {
                                    id: id.clone(),
                                    title: title.clone(),
                                    options: req.options.iter().map(|o| o.name.clone()).collect(),
                                    detail: permission_detail(&req),
                                });
                                sink.activity(Activity::PermissionResolved { id, outcome: format!("{name} (by policy)") });
                                let _ = responder.respond(outcome_for(picked.map(|(id, _)| id)));
                            }
                            Permissions::Ask => {
                                sink.activity(Activity::PermissionRequest {
                                    id: id.clone(),
                                    title: title.clone(),
                                    options: req.options.iter().map(|o| o.name.clone()).collect(),
                                    detail: permission_detail(&req),
                                });
                                if let Some(c) = child {
                                    asked_by.insert(id.clone(), c.to_string());
                                }
                                pending.insert(id, (*req, responder));
                            }
                        }
                    }
                },
                Some(answer) = control.answers.recv() => {
                    if let Some((req, responder)) = pending.remove(&answer.request_id) {
                        let chosen = answer.option.and_then(|i| req.options.get(i));
                        let outcome = chosen.map_or("cancelled".to_string(), |o| o.name.clone());
                        let child = asked_by.remove(&answer.request_id);
                        let sink = &Both { sink, child: child.as_deref() };
                        sink.activity(Activity::PermissionResolved { id: answer.request_id, outcome });
                        let _ = responder.respond(outcome_for(chosen.map(|o| o.option_id.0.to_string())));
                    }
                }
                Some(child) = control.cancel_children.recv() => {
                    match children.get(&child) {
                        // The agent allows it: only the child's work stops.
                        Some(c) if c.info.can_cancel => {
                            let _ = self.cx.send_notification(CancelNotification::new(child.clone()));
                            // Its open permission requests are answered `cancelled`.
                            let asked: Vec<String> = asked_by
                                .iter()
                                .filter(|(_, c)| **c == child)
                                .map(|(id, _)| id.clone())
                                .collect();
                            for id in asked {
                                asked_by.remove(&id);
                                if let Some((_, responder)) = pending.remove(&id) {
                                    let both = Both { sink, child: Some(&child) };
                                    both.activity(Activity::PermissionResolved { id, outcome: "cancelled".into() });
                                    let _ = responder.respond(RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled));
                                }
                            }
                            sink.notice(&format!("{}: cancel asked for {}", self.agent, c.name(&child)));
                        }
                        Some(c) => sink.notice(&format!(
                            "{}: {} cannot be cancelled alone (its agent does not allow it); Esc cancels the call",
                            self.agent,
                            c.name(&child)
                        )),
                        None => {}
                    }
                }
                changed = control.cancel.changed(), if !cancelled => {
                    if changed.is_ok() && *control.cancel.borrow() {
                        cancelled = true;
                        let _ = self.cx.send_notification(CancelNotification::new(session_id.clone()));
                        for (id, (_, responder)) in pending.drain() {
                            let child = asked_by.remove(&id);
                            let sink = &Both { sink, child: child.as_deref() };
                            sink.activity(Activity::PermissionResolved { id, outcome: "cancelled".into() });
                            let _ = responder.respond(RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled));
                        }
                        grace.as_mut().reset(tokio::time::Instant::now() + CANCEL_GRACE);
                    }
                }
                result = &mut response => break Some(result),
                _ = &mut grace => break None,
                // Asked again: the agent is stopped now, not waited for.
                _ = crate::runtime::cancel::cancelled(&mut control.kill) => {
                    tracing::info!("{}: stopped at the person's second cancel", self.agent);
                    self.stop_now();
                    break None;
                }
            }
        };
        // Updates sent before the response are already queued: take them
        // (unless the turn was cancelled: its output is no longer shown).
        while let Ok((from, incoming)) = rx.try_recv() {
            if cancelled {
                continue;
            }
            if let Incoming::Update(update) = incoming {
                match *update {
                    SessionUpdate::SubagentUpdate(u) => {
                        Self::announce(u, &mut children, sink);
                    }
                    update if from == session_id => turn.update(update, sink),
                    update => {
                        if let Some(child) = children.get_mut(&from) {
                            child.turn.update(
                                update,
                                &ChildSink {
                                    inner: sink,
                                    child: &from,
                                },
                            );
                        }
                    }
                }
            }
        }
        // This turn's routes: its session's and its children's.
        self.routes
            .lock()
            .expect("not poisoned")
            .retain(|_, route| !route.same_channel(&tx));
        self.exclusions
            .lock()
            .expect("not poisoned")
            .remove(&session_id);
        for (_, (_, responder)) in pending.drain() {
            let _ = responder.respond(RequestPermissionResponse::new(
                RequestPermissionOutcome::Cancelled,
            ));
        }
        let (output, stop_reason) = match result {
            // Some agents answer a cancelled turn with `end_turn`: it was cancelled.
            Some(Ok(_)) if cancelled => (turn.final_text, StopReason::Cancelled),
            Some(Ok(response)) => (turn.final_text, stop_reason(response.stop_reason)),
            Some(Err(e)) => {
                // A dead process fails its pending requests: say so plainly.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let message = if self.alive() {
                    format!("{}: {}", self.agent, e.message)
                } else {
                    format!("{} exited during the turn: {}", self.agent, self.death())
                };
                (message, StopReason::Error)
            }
            None => (turn.final_text, StopReason::Cancelled),
        };
        Outcome {
            output,
            stop_reason,
            severity: None,
            session: Some(kind),
            session_id: Some(session_id),
        }
    }

    /// Takes in a `subagent_update`: the first one for a session announces
    /// a child, later ones patch what is known of it.
    fn announce(
        update: SubagentUpdate,
        children: &mut HashMap<String, Child>,
        sink: &dyn TurnSink,
    ) {
        let id = update.session_id.0.to_string();
        // Its traffic is routed here already (`route`).
        let child = children.entry(id.clone()).or_default();
        child.info.apply(update);
        let info = &child.info;
        sink.child(
            &id,
            info.title.as_deref(),
            info.description.as_deref(),
            info.state,
            info.can_cancel,
        );
    }

    async fn open_session(
        &self,
        root: &Path,
        resume: Option<&str>,
        sink: &dyn TurnSink,
    ) -> Result<(String, SessionKind, Offered), String> {
        if let Some(id) = resume {
            // History replayed by load (or resume) arrives before the answer,
            // while no route exists for the session: it is not shown.
            let reopened = if self.can_resume() {
                Some((
                    self.cx
                        .send_request(ResumeSessionRequest::new(
                            id.to_string(),
                            root.to_path_buf(),
                        ))
                        .block_task()
                        .await
                        .map(|_| ()),
                    SessionKind::Resumed,
                ))
            } else if self.can_load() {
                Some((
                    self.cx
                        .send_request(LoadSessionRequest::new(id.to_string(), root.to_path_buf()))
                        .block_task()
                        .await
                        .map(|_| ()),
                    SessionKind::Loaded,
                ))
            } else {
                None
            };
            match reopened {
                Some((Ok(()), kind)) => return Ok((id.to_string(), kind, None)),
                Some((Err(e), _)) => {
                    if !self.alive() {
                        return Err(format!("{} exited: {}", self.agent, self.death()));
                    }
                    sink.notice(&format!(
                        "{}: session {id} could not be reopened ({}); starting a new one",
                        self.agent, e.message
                    ));
                    return self
                        .new_session(root)
                        .await
                        .map(|(id, offered)| (id, SessionKind::NewAfterStale, offered));
                }
                None => {}
            }
        }
        self.new_session(root)
            .await
            .map(|(id, offered)| (id, SessionKind::Fresh, offered))
    }

    /// Applies the configured (or remembered) model and mode to a new
    /// session through its config options; says so when it cannot.
    async fn apply_settings(
        &self,
        session_id: &str,
        offered: Offered,
        wanted: [(&'static str, Option<&str>); 2],
        sink: &dyn TurnSink,
    ) {
        let wanted: Vec<(&str, &str)> = wanted
            .into_iter()
            .filter_map(|(key, value)| value.map(|v| (key, v)))
            .collect();
        if wanted.is_empty() {
            return;
        }
        let Some(offered) = offered else {
            let keys: Vec<&str> = wanted.iter().map(|(k, _)| *k).collect();
            sink.notice(&format!(
                "{} offers no config options: its {} from the config file is not applied",
                self.agent,
                keys.join(" and ")
            ));
            return;
        };
        for (key, value) in wanted {
            let category = match key {
                "model" => SessionConfigOptionCategory::Model,
                _ => SessionConfigOptionCategory::Mode,
            };
            let Some(option) = offered
                .iter()
                .find(|o| o.category.as_ref() == Some(&category))
            else {
                sink.notice(&format!(
                    "{} offers no {key} option: {key} {value:?} is not applied",
                    self.agent
                ));
                continue;
            };
            let SessionConfigKind::Select(select) = &option.kind else {
                continue;
            };
            let values = select_values(select);
            if !values.iter().any(|v| v == value) {
                sink.notice(&format!(
                    "{}: {key} {value:?} is not one it offers ({}); it keeps {}",
                    self.agent,
                    values.join(", "),
                    select.current_value
                ));
                continue;
            }
            if select.current_value.to_string() == value {
                continue;
            }
            let request = SetSessionConfigOptionRequest::new(
                session_id.to_string(),
                option.id.clone(),
                value,
            );
            if let Err(e) = self.cx.send_request(request).block_task().await {
                sink.notice(&format!(
                    "{}: setting {key} to {value:?} failed: {}",
                    self.agent, e.message
                ));
            }
        }
    }

    async fn new_session(&self, root: &Path) -> Result<(String, Offered), String> {
        match self
            .cx
            .send_request(NewSessionRequest::new(root.to_path_buf()))
            .block_task()
            .await
        {
            Ok(r) => Ok((r.session_id.0.to_string(), r.config_options)),
            Err(e) if e.code == agent_client_protocol::ErrorCode::AUTH_REQUIRED => {
                Err(self.auth_required())
            }
            Err(e) if self.alive() => {
                Err(format!("{}: session/new failed: {}", self.agent, e.message))
            }
            Err(_) => Err(format!("{} exited: {}", self.agent, self.death())),
        }
    }

    /// What to tell a person whose agent wants to be authenticated first:
    /// the methods it offers and the environment variables they take.
    fn auth_required(&self) -> String {
        let methods = auth_methods(&self.init);
        if methods.is_empty() {
            return format!(
                "{} needs authentication before it opens a session, and names no method; set it up with the agent's own CLI",
                self.agent
            );
        }
        format!(
            "{} needs authentication before it opens a session. It offers: {}. Set the variables in the agent's `env` in the config file, or sign in with the agent's own CLI.",
            self.agent,
            methods.join("; ")
        )
    }

    /// What the agent says it can do, for `quorum agents --probe`.
    pub fn capabilities(&self) -> Vec<&'static str> {
        let caps = &self.init.agent_capabilities;
        let sessions = &caps.session_capabilities;
        [
            ("load", caps.load_session),
            ("resume", sessions.resume.is_some()),
            ("list", sessions.list.is_some()),
            ("close", sessions.close.is_some()),
            ("images", caps.prompt_capabilities.image),
            (
                "MCP",
                caps.mcp_capabilities.http || caps.mcp_capabilities.sse,
            ),
        ]
        .into_iter()
        .filter_map(|(name, yes)| yes.then_some(name))
        .collect()
    }

    /// The agent's authentication methods, described for a person.
    pub fn auth_methods(&self) -> Vec<String> {
        auth_methods(&self.init)
    }
}

/// The config options a new session offers (`None`: the agent has none).
type Offered = Option<Vec<SessionConfigOption>>;

/// The values a select option offers, grouped or not.
fn select_values(select: &SessionConfigSelect) -> Vec<String> {
    match &select.options {
        SessionConfigSelectOptions::Ungrouped(options) => {
            options.iter().map(|o| o.value.to_string()).collect()
        }
        SessionConfigSelectOptions::Grouped(groups) => groups
            .iter()
            .flat_map(|g| g.options.iter().map(|o| o.value.to_string()))
            .collect(),
        _ => Vec::new(),
    }
}

/// `name (id): description [env: A, B]` for each method the agent offers.
/// Agent text: sanitised.
fn auth_methods(init: &InitializeResponse) -> Vec<String> {
    use agent_client_protocol::v1::schema::AuthMethod;
    let clean = |s: &str| crate::confine::sanitize::sanitize(s).into_owned();
    init.auth_methods
        .iter()
        .map(|m| {
            let mut text = format!("{} ({})", clean(m.name()), clean(&m.id().0));
            if let Some(d) = m.description().filter(|d| !d.trim().is_empty()) {
                text.push_str(&format!(": {}", clean(d.trim())));
            }
            let mut vars: Vec<String> = match m {
                AuthMethod::Terminal(t) => t.env.keys().map(|k| clean(k)).collect(),
                _ => Vec::new(),
            };
            vars.sort();
            if !vars.is_empty() {
                text.push_str(&format!(" [env: {}]", vars.join(", ")));
            }
            text
        })
        .collect()
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.close();
    }
}

/// The agent's stdio as JSON-RPC lines.
///
/// `session/update` notifications are the stream of a turn, often one per
/// token: they are parsed here, straight into the schema's type, and handed
/// to their session's turn, instead of going through the SDK's generic
/// dispatch (several times slower per message). Everything else, and any
/// update this fast path cannot parse, goes to the SDK. Updates are still
/// delivered in order, and before the answer to the prompt that caused them.
fn transport(
    stdin: tokio::process::ChildStdin,
    stdout: tokio::process::ChildStdout,
    reading: Reading,
) -> Lines<
    impl futures::Sink<String, Error = std::io::Error> + Send + 'static,
    impl futures::Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    let outgoing = futures::sink::unfold(stdin, async |mut stdin, line: String| {
        stdin.write_all(line.as_bytes()).await?;
        stdin.write_all(b"\n").await?;
        stdin.flush().await?;
        Ok::<_, std::io::Error>(stdin)
    });
    let Reading {
        agent,
        routes,
        max_frame,
        cause,
    } = reading;
    let reader = tokio::io::BufReader::with_capacity(64 * 1024, stdout);
    let mut lossy_lines = 0u64;
    // After an error nothing more is read: the connection ends, and its
    // error says why.
    let incoming = futures::stream::unfold(Some(reader), move |reader| async move {
        let mut reader = reader?;
        match read_frame(&mut reader, max_frame).await {
            Ok(Some(frame)) => Some((Ok(frame), Some(reader))),
            Ok(None) => None,
            Err(e) => Some((Err(e), None)),
        }
    })
    .filter_map(move |frame| {
        let line = match frame {
            Ok(Frame { line, lossy }) => {
                if lossy {
                    lossy_lines += 1;
                    // The first, then the 10th, 100th, ...: a stream of
                    // them does not flood the box.
                    if power_of_ten(lossy_lines) {
                        let count = if lossy_lines == 1 {
                            String::new()
                        } else {
                            format!(" ({lossy_lines} so far)")
                        };
                        let text = format!(
                            "{agent} sent a message with bytes that are not UTF-8; they show as \u{fffd}{count}"
                        );
                        tracing::warn!("{text}");
                        notify_all(&routes, &text);
                    }
                }
                Ok(line)
            }
            Err(e) => {
                let text = format!("{agent} {e}");
                tracing::warn!("{text}");
                *cause.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                Err(std::io::Error::new(e.kind(), text))
            }
        };
        let forward = match &line {
            Ok(text) => match fast_update(text) {
                Some(n) => {
                    let _ = route(
                        &routes,
                        &n.session_id.0,
                        Incoming::Update(Box::new(n.update)),
                    );
                    false
                }
                None => true,
            },
            Err(_) => true,
        };
        std::future::ready(forward.then_some(line))
    });
    Lines::new(outgoing, incoming)
}

/// 1, 10, 100, …
fn power_of_ten(mut n: u64) -> bool {
    while n >= 10 && n.is_multiple_of(10) {
        n /= 10;
    }
    n == 1
}

/// What the reading half of the transport needs.
struct Reading {
    agent: String,
    routes: Routes,
    /// The longest message read (`max_frame_bytes`).
    max_frame: u64,
    /// Set to the reason when reading stops on an error.
    cause: Arc<Mutex<Option<String>>>,
}

/// Shows `text` in the box of every turn running on the connection.
fn notify_all(routes: &Routes, text: &str) {
    let routes = routes.lock().unwrap_or_else(|p| p.into_inner());
    // A turn's child sessions share its channel: one notice per turn.
    let mut told: Vec<&mpsc::UnboundedSender<(String, Incoming)>> = Vec::new();
    for (session, tx) in routes.iter() {
        if told.iter().any(|t| t.same_channel(tx)) {
            continue;
        }
        let _ = tx.send((session.clone(), Incoming::Notice(text.to_string())));
        told.push(tx);
    }
}

/// One line of an agent's stdout; `lossy` when bytes that are not UTF-8
/// were replaced.
struct Frame {
    line: String,
    lossy: bool,
}

/// One line of the agent's stdout, without its line end. Bytes that are not
/// UTF-8 are replaced (U+FFFD) rather than ending the connection: one bad
/// byte costs at most its message. A line longer than `max` bytes is an
/// error, read no further.
async fn read_frame(
    reader: &mut tokio::io::BufReader<tokio::process::ChildStdout>,
    max: u64,
) -> std::io::Result<Option<Frame>> {
    let mut buf = Vec::new();
    let n = (&mut *reader)
        .take(max.saturating_add(1))
        .read_until(b'\n', &mut buf)
        .await?;
    if n == 0 {
        return Ok(None);
    }
    if buf.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "sent a message over {}, read no further (max_frame_bytes under [limits] in the config)",
                crate::confine::limits::size(max)
            ),
        ));
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
    }
    Ok(Some(match String::from_utf8(buf) {
        Ok(line) => Frame { line, lossy: false },
        Err(e) => Frame {
            line: String::from_utf8_lossy(e.as_bytes()).into_owned(),
            lossy: true,
        },
    }))
}

/// A `session/update` notification, if `line` is one this client knows.
fn fast_update(line: &str) -> Option<SessionNotification> {
    #[derive(serde::Deserialize)]
    struct Frame {
        method: Option<String>,
        id: Option<serde::de::IgnoredAny>,
        params: Option<SessionNotification>,
    }
    if !line.contains("\"session/update\"") {
        return None;
    }
    let frame: Frame = serde_json::from_str(line).ok()?;
    match frame {
        Frame {
            method: Some(m),
            id: None,
            params: Some(n),
        } if m == "session/update" => Some(n),
        _ => None,
    }
}

/// Why an agent's connection ended: why quorum stopped reading it (if it
/// did), how the process ended, and its last line of stderr.
fn death(
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
struct Tail {
    lines: VecDeque<String>,
    bytes: usize,
}

impl Tail {
    fn push(&mut self, line: String, cap: usize) {
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.bytes > cap && self.lines.len() > 1 {
            if let Some(old) = self.lines.pop_front() {
                self.bytes -= old.len();
            }
        }
    }
}

fn fs_error(e: &crate::confine::fsroot::FsError) -> agent_client_protocol::Error {
    use crate::confine::fsroot::FsError;
    let code = match e {
        FsError::Outside { .. }
        | FsError::Excluded { .. }
        | FsError::NotRegular { .. }
        | FsError::TooBig { .. } => agent_client_protocol::ErrorCode::INVALID_PARAMS,
        FsError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            agent_client_protocol::ErrorCode::RESOURCE_NOT_FOUND
        }
        FsError::Io { .. } => agent_client_protocol::ErrorCode::INTERNAL_ERROR,
    };
    agent_client_protocol::Error::new(code, e.to_string())
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
    *exit
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(description);
    dead.store(true, Ordering::SeqCst);
    // Whatever the agent left running goes with it.
    supervisor.terminate(&group, supervisor::GRACE).await;
}

/// The text of one turn, and its final message.
#[derive(Default)]
struct Turn {
    /// Text written since the last tool call.
    final_text: String,
}

impl Turn {
    /// Translates `update` and sends what it means to `sink`; message
    /// text after the last tool call is the final message.
    fn update(&mut self, update: SessionUpdate, sink: &dyn TurnSink) {
        match translate::update(update) {
            Translated::Activity(activity) => {
                match &activity {
                    Activity::MessageChunk { text } => self.final_text.push_str(text),
                    Activity::ToolCall { .. } => self.final_text.clear(),
                    _ => {}
                }
                sink.activity(activity);
            }
            Translated::ModelPicked(model) => sink.model_picked(&model),
            Translated::Nothing => {}
        }
    }
}

/// A child session the agent announced (`subagent_update`), as far as
/// its updates told, and its turn.
#[derive(Default)]
struct Child {
    info: ChildInfo,
    turn: Turn,
}

impl Child {
    /// What a permission prompt calls it: its title, else its session id.
    fn name<'a>(&'a self, id: &'a str) -> &'a str {
        self.info.title.as_deref().unwrap_or(id)
    }
}

/// A child session's activity, sent as the child's.
struct ChildSink<'a> {
    inner: &'a dyn TurnSink,
    child: &'a str,
}

impl TurnSink for ChildSink<'_> {
    fn activity(&self, activity: Activity) {
        self.inner.child_activity(self.child, activity);
    }
    fn session(&self, _kind: SessionKind, _session_id: &str) {}
    fn notice(&self, text: &str) {
        self.inner.notice(text);
    }
}

/// A permission request's activity: the call's, and the asking child's
/// when a child asked.
struct Both<'a> {
    sink: &'a dyn TurnSink,
    child: Option<&'a str>,
}

impl Both<'_> {
    fn activity(&self, activity: Activity) {
        if let Some(child) = self.child {
            self.sink.child_activity(child, activity.clone());
        }
        self.sink.activity(activity);
    }
    fn notice(&self, text: &str) {
        self.sink.notice(text);
    }
}

#[cfg(test)]
mod tests {
    use super::power_of_ten;

    #[test]
    fn notices_of_bad_bytes_come_at_powers_of_ten() {
        let told: Vec<u64> = (0..=1200).filter(|&n| power_of_ten(n)).collect();
        assert_eq!(told, [1, 10, 100, 1000]);
    }
}
