//! Connections to ACP agent processes, and one sub-agent turn over them.
//!
//! One connection per agent name, started on first use and kept for later
//! calls; a connection whose process died is started again. The process
//! runs in the session's directory, so what an agent writes of its own
//! (fast-agent's `.fast-agent/`, say) stays inside it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::Agent;
use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, InitializeResponse, PromptRequest, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SessionUpdate, SubagentUpdate,
    TextContent,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use tokio::sync::{mpsc, oneshot};

use super::fs::Exclusions;
use super::permission::{
    outcome_for, outside_path, permission_detail, permission_title, pick_option,
};
use super::process::{Tail, death};
use super::route::{Incoming, Routes};
use super::translate::{self, ChildInfo, Translated, stop_reason};
use crate::agent::{Permissions, TurnControl, TurnRequest, TurnSink};
use crate::confine::fsroot::Root;
use crate::event::{Activity, Outcome, SessionKind, StopReason};
use crate::runtime::cancel::cancelled;

/// How long an agent may take to end its turn after `session/cancel`.
const CANCEL_GRACE: Duration = Duration::from_secs(10);
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

/// A live connection to one agent process.
pub struct Connection {
    pub agent: String,
    pub(super) cx: ConnectionTo<Agent>,
    pub init: InitializeResponse,
    pub(super) routes: Routes,
    pub(super) exclusions: Exclusions,
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
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.close();
    }
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
