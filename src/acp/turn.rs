//! One turn over a connection: the session opened for it, the prompt, the
//! loop that takes in what the agent sends (updates, permission requests,
//! notices) and what the person does (answers, cancels), and the outcome.
//! Also the turn's state: its text, its pending permission requests (the
//! agent's, and quorum's own: may it write a file other programs run), and
//! the child sessions its agent announces.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::Responder;
use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, PromptRequest, PromptResponse, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SessionUpdate, SubagentUpdate,
    TextContent,
};
use tokio::sync::mpsc;

use super::client::Connection;
use super::error::describe;
use super::permission::{
    outcome_for, outside_path, permission_detail, permission_title, pick_option,
};
use super::route::{Chunk, Consent, Incoming, Route, WriteAsk};
use super::stream::{Stream, TurnText};
use super::translate::{ChildInfo, stop_reason};
use crate::agent::{PermissionAnswer, Permissions, TurnControl, TurnRequest, TurnSink};
use crate::confine::fsroot::{Exclude, Root};
use crate::event::{Activity, Outcome, SessionKind, StopReason};
use crate::runtime::cancel::cancelled;
use crate::runtime::lock;

/// How long an agent may take to end its turn after `session/cancel`.
const CANCEL_GRACE: Duration = Duration::from_secs(10);

/// A turn's channel: what is routed to it, with the session it came for.
type Inbox = mpsc::UnboundedReceiver<(String, Incoming)>;
type Outbox = mpsc::UnboundedSender<(String, Incoming)>;
/// How the prompt's answer arrives.
type Answer = Result<PromptResponse, agent_client_protocol::Error>;

impl Connection {
    /// Runs one turn: opens (or resumes) a session, sends the prompt,
    /// streams activity to `sink` and ends with the agent's final message.
    pub async fn turn(
        &self,
        request: TurnRequest<'_>,
        sink: &dyn TurnSink,
        control: &mut TurnControl,
    ) -> Outcome {
        // The turn's directory as file access sees it (made as the session
        // opens: git is asked for its hooks directory).
        let root = {
            let dir = request.root.to_path_buf();
            tokio::task::spawn_blocking(move || crate::runtime::git::root(&dir).ok())
        };
        let (session_id, kind) = match self.open_for_turn(&request, sink, control).await {
            Ok(opened) => opened,
            Err(outcome) => return outcome,
        };
        let stream = Arc::new(Stream::new(sink.stream()));
        let root = root.await.ok().flatten();
        let (tx, mut rx) = self.admit(&session_id, request.exclude, root.clone(), &stream);
        let mut guard = Unfinished {
            conn: self,
            tx: Some(tx.clone()),
        };
        // What the agent announced of the session so far (some of it
        // before this turn could be routed anything): shown from the start.
        for activity in self.announced_activities(&session_id) {
            sink.activity(activity);
        }
        let prompt = PromptRequest::new(
            session_id.clone(),
            vec![ContentBlock::Text(TextContent::new(
                request.prompt.to_string(),
            ))],
        );
        let response = self.cx.send_request(prompt).block_task();
        tokio::pin!(response);
        let mut running = Running::new(self, session_id, &request, root, sink, stream);
        let result = running.exchange(&mut rx, response, control).await;
        // The turn's terminals end with it; what they wrote is told first.
        let sessions = self.sessions_of(&tx);
        self.terminals.end_sessions(&sessions).await;
        guard.tx = None;
        // Updates sent before the response are already queued: take them
        // (unless the turn was cancelled: its output is no longer shown).
        while let Ok((from, incoming)) = rx.try_recv() {
            match incoming {
                Incoming::Activity(activity) => running.sink.activity(activity),
                _ if running.stream.is_cancelled() => {}
                Incoming::Update(update) => running.update(from, *update),
                Incoming::Chunk(chunk) => running.chunk(&from, chunk),
                _ => {}
            }
        }
        self.dismiss(&tx, &running.session_id);
        self.terminals.forget(&sessions);
        running.end(result, kind).await
    }

    /// Opens (or reopens) the session for a turn, says which to `sink`, and
    /// sets a new one's model and mode. Opening may hang like
    /// `initialize`: it is bounded by the startup timeout, and the person
    /// can cancel it; either ends the turn with the outcome given.
    async fn open_for_turn(
        &self,
        request: &TurnRequest<'_>,
        sink: &dyn TurnSink,
        control: &mut TurnControl,
    ) -> Result<(String, SessionKind), Outcome> {
        let open = tokio::time::timeout(
            self.startup_timeout,
            self.open_session(request.root, request.resume, sink),
        );
        let opened = tokio::select! {
            opened = open => opened,
            _ = cancelled(&mut control.cancel) => {
                return Err(Outcome::new(
                    StopReason::Cancelled,
                    format!("{}: cancelled while opening a session", self.agent),
                ));
            }
        };
        let (session_id, kind, offered) = match opened {
            Ok(Ok(opened)) => opened,
            Ok(Err(e)) => return Err(Outcome::error(e.to_string())),
            Err(_) => {
                return Err(Outcome::error(format!(
                    "{}: no answer to session/new within {} s (startup_timeout in its config)",
                    self.agent,
                    self.startup_timeout.as_secs_f64()
                )));
            }
        };
        sink.session(kind, &session_id);
        if matches!(kind, SessionKind::Fresh | SessionKind::NewAfterStale) {
            let wanted = [("model", request.model), ("mode", request.mode)];
            self.apply_settings(&session_id, offered, wanted, sink)
                .await;
        }
        Ok((session_id, kind))
    }

    /// Keeps `session_id` from what it may not read (and, with `root`,
    /// confined to that directory), and routes its traffic (and, once
    /// announced, its children's) to a new channel.
    fn admit(
        &self,
        session_id: &str,
        exclude: Option<&Exclude>,
        root: Option<Root>,
        stream: &Arc<Stream>,
    ) -> (Outbox, Inbox) {
        lock(&self.exclusions).insert(
            session_id.to_string(),
            super::fs::Scope {
                exclude: exclude.cloned(),
                root,
            },
        );
        let (tx, rx) = mpsc::unbounded_channel();
        let route = Route {
            tx: tx.clone(),
            stream: stream.clone(),
            child: false,
        };
        lock(&self.routes).insert(session_id.to_string(), route);
        (tx, rx)
    }

    /// The sessions routed to this turn's channel: its own and its
    /// children's.
    fn sessions_of(&self, tx: &Outbox) -> Vec<String> {
        lock(&self.routes)
            .iter()
            .filter(|(_, route)| route.tx.same_channel(tx))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Undoes [`Connection::admit`]: this turn's routes (its session's and
    /// its children's), and its session's exclusions.
    fn dismiss(&self, tx: &Outbox, session_id: &str) {
        lock(&self.routes).retain(|_, route| !route.tx.same_channel(tx));
        lock(&self.exclusions).remove(session_id);
    }
}

/// A turn not yet ended: if its future is dropped before (the call given
/// up), the commands its sessions run in terminals are ended.
struct Unfinished<'a> {
    conn: &'a Connection,
    tx: Option<Outbox>,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if let Some(tx) = &self.tx {
            let sessions = self.conn.sessions_of(tx);
            self.conn.terminals.drop_sessions(&sessions);
        }
    }
}

/// A running turn's state.
struct Running<'a> {
    conn: &'a Connection,
    sink: &'a dyn TurnSink,
    session_id: String,
    policy: Permissions,
    /// The MCP server whose tool calls are allowed without asking.
    trusted_mcp: Option<String>,
    /// The session's directory: nothing outside it is allowed.
    root: Option<Root>,
    /// The turn's text, and what the reading may do without this task.
    stream: Arc<Stream>,
    /// The child sessions the agent announced, by session id.
    children: HashMap<String, Child>,
    /// Which child asked each pending permission request.
    asked_by: HashMap<String, String>,
    /// The permission requests waiting for the person, by id.
    pending: HashMap<
        String,
        (
            RequestPermissionRequest,
            Responder<RequestPermissionResponse>,
        ),
    >,
    /// Whether a person answers what is asked (else quorum's own
    /// questions are refused at once).
    person: bool,
    /// quorum's own questions waiting for the person: may the agent write
    /// a file other programs run (`fs/write_text_file`), by id.
    asks: HashMap<String, tokio::sync::oneshot::Sender<Consent>>,
    /// How many of those the turn asked (their ids).
    asked: u32,
    /// The questions (elicitations) waiting for the person.
    elicitations: super::elicit::Elicitations,
    /// What the turn's elicitations get.
    elicit: crate::agent::Elicit,
}

impl<'a> Running<'a> {
    fn new(
        conn: &'a Connection,
        session_id: String,
        request: &TurnRequest<'_>,
        root: Option<Root>,
        sink: &'a dyn TurnSink,
        stream: Arc<Stream>,
    ) -> Self {
        Self {
            conn,
            sink,
            session_id,
            policy: request.policy,
            trusted_mcp: request.trusted_mcp.map(str::to_string),
            root,
            stream,
            children: HashMap::new(),
            asked_by: HashMap::new(),
            pending: HashMap::new(),
            person: request.person,
            asks: HashMap::new(),
            asked: 0,
            elicitations: Default::default(),
            elicit: request.elicit,
        }
    }

    /// Takes in what the agent sends and what the person does until the
    /// prompt is answered (`Some`), or the turn ends without an answer
    /// (`None`): the agent took longer than [`CANCEL_GRACE`] after a
    /// cancel, or the person asked again and the agent was stopped.
    async fn exchange<F: Future<Output = Answer>>(
        &mut self,
        rx: &mut Inbox,
        mut response: Pin<&mut F>,
        control: &mut TurnControl,
    ) -> Option<Answer> {
        let grace = tokio::time::sleep(Duration::MAX / 4);
        tokio::pin!(grace);
        loop {
            tokio::select! {
                biased;
                Some((from, incoming)) = rx.recv() => {
                    self.take(from, incoming);
                    self.stream.taken();
                }
                Some(answer) = control.answers.recv() => self.answer(answer),
                Some(child) = control.cancel_children.recv() => self.cancel_child(child),
                Some(answer) = control.elicitations.recv() => {
                    self.elicitations.answer(answer, self.sink);
                }
                changed = control.cancel.changed(), if !self.stream.is_cancelled() => {
                    if changed.is_ok() && *control.cancel.borrow() {
                        self.cancel();
                        grace.as_mut().reset(tokio::time::Instant::now() + CANCEL_GRACE);
                    }
                }
                result = &mut response => break Some(result),
                _ = &mut grace => break None,
                // Asked again: the agent is stopped now, not waited for.
                _ = crate::runtime::cancel::cancelled(&mut control.kill) => {
                    tracing::info!("{}: stopped at the person's second cancel", self.conn.agent);
                    self.conn.stop_now();
                    break None;
                }
            }
        }
    }

    /// One thing routed to this turn.
    fn take(&mut self, from: String, incoming: Incoming) {
        match incoming {
            // Asked to stop: what the agent still says is not shown.
            Incoming::Update(_) | Incoming::Chunk(_) if self.stream.is_cancelled() => {}
            Incoming::Update(update) => self.update(from, *update),
            Incoming::Chunk(chunk) => self.chunk(&from, chunk),
            Incoming::Notice(text) => self.sink.activity(Activity::Notice { text }),
            Incoming::Permission(req, responder) => self.permission(from, req, responder),
            Incoming::Elicitation(req, responder) => {
                // A child's question names the child, and is shown in
                // its box too.
                let child = (from != self.session_id).then(|| {
                    let name = self
                        .children
                        .get(&from)
                        .map_or(from.as_str(), |c| c.name(&from));
                    (from.as_str(), name)
                });
                self.elicitations.ask(
                    *req,
                    responder,
                    (self.elicit, self.stream.is_cancelled()),
                    child,
                    self.sink,
                );
            }
            Incoming::ElicitationComplete(id) => self.elicitations.complete(&id, self.sink),
            Incoming::Ask(ask) => self.ask(from, *ask),
            // A terminal's output is shown even after a cancel: it is
            // what the command did.
            Incoming::Activity(activity) => self.sink.activity(activity),
        }
    }

    /// A session update, from the turn's session or one of its children.
    fn update(&mut self, from: String, update: SessionUpdate) {
        let sink = self.sink;
        match update {
            SessionUpdate::SubagentUpdate(u) => {
                announce(u, &mut self.children, sink);
            }
            update if from == self.session_id => {
                if let Some(activity) = self.conn.announced_update(&from, &update) {
                    sink.activity(activity);
                }
                lock(&self.stream.turn).update(update, sink)
            }
            update => {
                if let Some(child) = self.children.get_mut(&from) {
                    let child_sink = ChildSink {
                        inner: sink,
                        child: &from,
                    };
                    child.turn.update(update, &child_sink);
                }
            }
        }
    }

    /// A message or thought chunk, from the turn's session or one of its
    /// children: what [`Running::update`] does with the update it came as.
    fn chunk(&mut self, from: &str, chunk: Chunk) {
        if from == self.session_id {
            lock(&self.stream.turn).chunk(chunk, self.sink);
        } else if let Some(child) = self.children.get_mut(from) {
            let child_sink = ChildSink {
                inner: self.sink,
                child: from,
            };
            child.turn.chunk(chunk, &child_sink);
        }
    }

    /// A permission request: refused if it names a path outside the
    /// session directory, answered by the policy, or left to the person.
    fn permission(
        &mut self,
        from: String,
        req: Box<RequestPermissionRequest>,
        responder: Responder<RequestPermissionResponse>,
    ) {
        let sink = self.sink;
        let cancelled = self.stream.is_cancelled();
        // A child's request names the child, and is shown
        // in its box too.
        let child = (from != self.session_id).then_some(from.as_str());
        let (id, title) = match child {
            None => (
                req.tool_call.tool_call_id.0.to_string(),
                permission_title(&req),
            ),
            Some(c) => (
                format!("{c}/{}", req.tool_call.tool_call_id.0),
                format!(
                    "{}: {}",
                    self.children.get(c).map_or(c, |k| k.name(c)),
                    permission_title(&req)
                ),
            ),
        };
        let sink = &Both { sink, child };
        // Whatever the policy, nothing outside the session directory.
        if let Some(path) = self.root.as_ref().and_then(|r| outside_path(&req, r)) {
            sink.activity(Activity::PermissionRequest {
                id: id.clone(),
                title: title.clone(),
                options: req.options.iter().map(|o| o.name.clone()).collect(),
                detail: permission_detail(&req),
            });
            let reason = format!("refused: {path} is outside the session directory");
            sink.activity(Activity::PermissionResolved {
                id,
                outcome: reason.clone(),
            });
            sink.notice(&format!("{}: {reason}", self.conn.agent));
            let _ = responder.respond(outcome_for(pick_option(&req, false).map(|(id, _)| id)));
            return;
        }
        let trusted = self
            .trusted_mcp
            .as_deref()
            .is_some_and(|server| super::permission::calls_mcp_server(&req, server));
        let policy = if cancelled {
            Permissions::Deny
        } else if trusted {
            Permissions::Allow
        } else {
            self.policy
        };
        match policy {
            Permissions::Allow | Permissions::Deny if cancelled => {
                let _ = responder.respond(RequestPermissionResponse::new(
                    RequestPermissionOutcome::Cancelled,
                ));
            }
            Permissions::Allow | Permissions::Deny => {
                let allow = policy == Permissions::Allow;
                let picked = pick_option(&req, allow);
                let name = picked
                    .as_ref()
                    .map_or("cancelled".to_string(), |(_, n)| n.clone());
                sink.activity(Activity::PermissionRequest {
                    id: id.clone(),
                    title: title.clone(),
                    options: req.options.iter().map(|o| o.name.clone()).collect(),
                    detail: permission_detail(&req),
                });
                sink.activity(Activity::PermissionResolved {
                    id,
                    outcome: format!("{name} (by policy)"),
                });
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
                    self.asked_by.insert(id.clone(), c.to_string());
                }
                self.pending.insert(id, (*req, responder));
            }
        }
    }

    /// quorum's own question: may the agent write `ask.path`, a file
    /// other programs run, in the person's own tree? Shown as a permission
    /// request whatever the turn's policy (an agent's `allow` does not
    /// cover it); with nobody to ask, or once cancelled, refused at once.
    fn ask(&mut self, from: String, ask: WriteAsk) {
        if !self.person || self.stream.is_cancelled() {
            let consent = if self.person {
                Consent::Refused
            } else {
                Consent::NobodyToAsk
            };
            let _ = ask.reply.send(consent);
            return;
        }
        let child = (from != self.session_id).then_some(from.as_str());
        self.asked += 1;
        let id = format!("quorum-write-{}", self.asked);
        let shown = ask.below.display().to_string();
        let sink = &Both {
            sink: self.sink,
            child,
        };
        sink.activity(Activity::PermissionRequest {
            id: id.clone(),
            title: format!(
                "write {shown}? {} (quorum asks: files other programs run are written in your tree only with your leave)",
                ask.why
            ),
            options: vec!["Allow once".into(), "Reject".into()],
            detail: Box::new(crate::event::ToolDetail {
                kind: Some("edit".into()),
                locations: vec![ask.path.display().to_string()],
                content: vec![crate::event::ToolContent::Diff {
                    path: shown,
                    old_text: ask.old,
                    new_text: ask.content,
                }],
                ..Default::default()
            }),
        });
        if let Some(c) = child {
            self.asked_by.insert(id.clone(), c.to_string());
        }
        self.asks.insert(id, ask.reply);
    }

    /// The person's answer to a pending permission request.
    fn answer(&mut self, answer: PermissionAnswer) {
        if let Some(reply) = self.asks.remove(&answer.request_id) {
            let child = self.asked_by.remove(&answer.request_id);
            let allowed = answer.option == Some(0);
            let sink = &Both {
                sink: self.sink,
                child: child.as_deref(),
            };
            sink.activity(Activity::PermissionResolved {
                id: answer.request_id,
                outcome: match answer.option {
                    Some(0) => "Allow once".into(),
                    Some(_) => "Reject".into(),
                    None => "cancelled".into(),
                },
            });
            let _ = reply.send(if allowed {
                Consent::Allowed
            } else {
                Consent::Refused
            });
            return;
        }
        if let Some((req, responder)) = self.pending.remove(&answer.request_id) {
            let chosen = answer.option.and_then(|i| req.options.get(i));
            let outcome = chosen.map_or("cancelled".to_string(), |o| o.name.clone());
            let child = self.asked_by.remove(&answer.request_id);
            let sink = &Both {
                sink: self.sink,
                child: child.as_deref(),
            };
            sink.activity(Activity::PermissionResolved {
                id: answer.request_id,
                outcome,
            });
            let _ = responder.respond(outcome_for(chosen.map(|o| o.option_id.0.to_string())));
        }
    }

    /// The person cancels one child session's work.
    fn cancel_child(&mut self, child: String) {
        let sink = self.sink;
        let agent = &self.conn.agent;
        match self.children.get(&child) {
            // The agent allows it: only the child's work stops.
            Some(c) if c.info.can_cancel => {
                let _ = self
                    .conn
                    .cx
                    .send_notification(CancelNotification::new(child.clone()));
                // Its commands stop too.
                self.conn.terminals.kill_sessions(std::slice::from_ref(&child));
                // Its open permission requests are answered `cancelled`.
                let asked: Vec<String> = self
                    .asked_by
                    .iter()
                    .filter(|(_, c)| **c == child)
                    .map(|(id, _)| id.clone())
                    .collect();
                for id in asked {
                    self.asked_by.remove(&id);
                    if let Some((_, responder)) = self.pending.remove(&id) {
                        let both = Both {
                            sink,
                            child: Some(&child),
                        };
                        both.activity(Activity::PermissionResolved {
                            id,
                            outcome: "cancelled".into(),
                        });
                        let _ = responder.respond(RequestPermissionResponse::new(
                            RequestPermissionOutcome::Cancelled,
                        ));
                    }
                }
                sink.notice(&format!("{agent}: cancel asked for {}", c.name(&child)));
            }
            Some(c) => sink.notice(&format!(
                "{}: {} cannot be cancelled alone (its agent does not allow it); Esc cancels the call",
                agent,
                c.name(&child)
            )),
            None => {}
        }
    }

    /// The person cancels the turn: the agent is told, and every pending
    /// permission request is answered `cancelled`.
    fn cancel(&mut self) {
        self.stream.cancel();
        let _ = self
            .conn
            .cx
            .send_notification(CancelNotification::new(self.session_id.clone()));
        // The commands it runs in terminals stop too.
        let mut sessions: Vec<String> = self.children.keys().cloned().collect();
        sessions.push(self.session_id.clone());
        self.conn.terminals.kill_sessions(&sessions);
        for (id, (_, responder)) in self.pending.drain() {
            let child = self.asked_by.remove(&id);
            let sink = &Both {
                sink: self.sink,
                child: child.as_deref(),
            };
            sink.activity(Activity::PermissionResolved {
                id,
                outcome: "cancelled".into(),
            });
            let _ = responder.respond(RequestPermissionResponse::new(
                RequestPermissionOutcome::Cancelled,
            ));
        }
        for (id, reply) in self.asks.drain() {
            let child = self.asked_by.remove(&id);
            let sink = &Both {
                sink: self.sink,
                child: child.as_deref(),
            };
            sink.activity(Activity::PermissionResolved {
                id,
                outcome: "cancelled".into(),
            });
            let _ = reply.send(Consent::Refused);
        }
        self.elicitations
            .cancel_all(self.sink, "the turn was cancelled");
    }

    /// Answers what is still pending `cancelled`, and makes the turn's
    /// outcome of the prompt's answer (`None`: none came).
    async fn end(mut self, result: Option<Answer>, kind: SessionKind) -> Outcome {
        self.elicitations.drop_all();
        for (_, (_, responder)) in self.pending.drain() {
            let _ = responder.respond(RequestPermissionResponse::new(
                RequestPermissionOutcome::Cancelled,
            ));
        }
        for (_, reply) in self.asks.drain() {
            let _ = reply.send(Consent::Refused);
        }
        let conn = self.conn;
        let final_text = lock(&self.stream.turn).take_final();
        let (output, stop_reason) = match result {
            // Some agents answer a cancelled turn with `end_turn`: it was cancelled.
            Some(Ok(_)) if self.stream.is_cancelled() => (final_text, StopReason::Cancelled),
            Some(Ok(response)) => (final_text, stop_reason(response.stop_reason)),
            Some(Err(e)) => {
                // The agent no longer knows the session: the next call
                // reopens it (and heals if it cannot).
                if e.code == agent_client_protocol::ErrorCode::RESOURCE_NOT_FOUND {
                    conn.forget_open(&self.session_id);
                }
                // A dead process fails its pending requests: say so plainly.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let message = if conn.alive() {
                    format!("{}: {}", conn.agent, describe(&e))
                } else {
                    format!("{} exited during the turn: {}", conn.agent, conn.death())
                };
                (message, StopReason::Error)
            }
            None => (final_text, StopReason::Cancelled),
        };
        Outcome {
            output,
            stop_reason,
            severity: None,
            findings: Vec::new(),
            session: Some(kind),
            session_id: Some(self.session_id),
            work: None,
        }
    }
}

/// Takes in a `subagent_update`: the first one for a session announces
/// a child, later ones patch what is known of it.
fn announce(update: SubagentUpdate, children: &mut HashMap<String, Child>, sink: &dyn TurnSink) {
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

/// A child session the agent announced (`subagent_update`), as far as
/// its updates told, and its turn.
#[derive(Default)]
struct Child {
    info: ChildInfo,
    turn: TurnText,
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
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;
    use crate::event::ChildState;

    /// Everything a turn sent, in order.
    #[derive(Default)]
    struct Recorder {
        sent: Mutex<Vec<String>>,
        activities: Mutex<Vec<Activity>>,
    }

    impl Recorder {
        fn log(&self, line: String) {
            self.sent.lock().unwrap().push(line);
        }
        fn sent(&self) -> Vec<String> {
            self.sent.lock().unwrap().clone()
        }
    }

    impl TurnSink for Recorder {
        fn activity(&self, activity: Activity) {
            self.log(format!(
                "activity {}",
                serde_json::to_string(&activity).unwrap()
            ));
            self.activities.lock().unwrap().push(activity);
        }
        fn session(&self, kind: SessionKind, session_id: &str) {
            self.log(format!("session {kind:?} {session_id}"));
        }
        fn notice(&self, text: &str) {
            self.log(format!("notice {text}"));
        }
        fn child(
            &self,
            child_id: &str,
            title: Option<&str>,
            description: Option<&str>,
            state: Option<ChildState>,
            can_cancel: bool,
        ) {
            self.log(format!(
                "child {child_id} {title:?} {description:?} {state:?} {can_cancel}"
            ));
        }
        fn child_activity(&self, child_id: &str, activity: Activity) {
            self.log(format!(
                "child_activity {child_id} {}",
                serde_json::to_string(&activity).unwrap()
            ));
        }
        fn model_picked(&self, model: &str) {
            self.log(format!("model {model}"));
        }
    }

    fn wire(value: serde_json::Value) -> SessionUpdate {
        serde_json::from_value(value).expect("a session update")
    }

    fn chunk(text: &str) -> SessionUpdate {
        wire(json!({
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": text},
        }))
    }

    fn tool_call(id: &str) -> SessionUpdate {
        wire(json!({"sessionUpdate": "tool_call", "toolCallId": id, "title": "Read"}))
    }

    /// A final message longer than quorum keeps: its head, and the rest
    /// named (a tool call starts a new one, with nothing cut).
    #[test]
    fn a_final_message_over_the_cap_keeps_its_head_and_names_the_rest() {
        use crate::confine::limits::MAX_FINAL_TEXT;
        let sink = Recorder::default();
        let mut turn = TurnText::default();
        let big = "y".repeat(MAX_FINAL_TEXT);
        turn.update(chunk(&big), &sink);
        turn.update(tool_call("t1"), &sink);
        turn.update(chunk("head "), &sink);
        turn.update(chunk(&big), &sink);
        turn.update(chunk("tail"), &sink);
        let text = turn.take_final();
        assert!(text.starts_with("head yyy"), "{}", &text[..20]);
        assert!(
            text.ends_with(&format!(
                "y\n\n[… {} bytes cut by quorum: a final message keeps its first 1 MB]",
                5 + 4
            )),
            "{}",
            &text[text.len() - 100..]
        );
        assert!(turn.take_final().is_empty());
    }

    #[test]
    fn the_final_message_is_the_text_after_the_last_tool_call() {
        let sink = Recorder::default();
        let mut turn = TurnText::default();
        for update in [
            chunk("Looking. "),
            tool_call("t1"),
            chunk("Found it"),
            wire(json!({
                "sessionUpdate": "agent_thought_chunk",
                "content": {"type": "text", "text": "(thinking)"},
            })),
            wire(
                json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"}),
            ),
            chunk(": the bug is here."),
        ] {
            turn.update(update, &sink);
        }
        assert_eq!(turn.final_text, "Found it: the bug is here.");
        // Every update that means something reached the sink, in order.
        let kinds: Vec<&str> = sink
            .activities
            .lock()
            .unwrap()
            .iter()
            .map(|a| match a {
                Activity::MessageChunk { .. } => "message",
                Activity::ThoughtChunk { .. } => "thought",
                Activity::ToolCall { .. } => "tool_call",
                Activity::ToolCallUpdate { .. } => "tool_call_update",
                _ => "other",
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "message",
                "tool_call",
                "message",
                "thought",
                "tool_call_update",
                "message"
            ]
        );
    }

    #[test]
    fn a_picked_model_goes_to_the_sink_and_nothing_else_does() {
        let sink = Recorder::default();
        let mut turn = TurnText::default();
        turn.update(
            wire(json!({
                "sessionUpdate": "config_option_update",
                "configOptions": [{
                    "id": "model", "name": "Model", "category": "model", "type": "select",
                    "currentValue": "smart",
                    "options": [{"value": "smart", "name": "smart"}],
                }],
            })),
            &sink,
        );
        turn.update(
            wire(json!({"sessionUpdate": "current_mode_update", "currentModeId": "code"})),
            &sink,
        );
        assert_eq!(sink.sent(), ["model smart"]);
        assert_eq!(turn.final_text, "");
    }

    #[test]
    fn a_childs_activity_goes_out_as_the_childs() {
        let sink = Recorder::default();
        let mut children: HashMap<String, Child> = HashMap::new();
        let announced: SubagentUpdate = serde_json::from_value(json!({
            "sessionId": "c1",
            "title": "scout",
            "capabilities": {"cancel": {}},
            "state": {"state": "running"},
        }))
        .unwrap();
        announce(announced, &mut children, &sink);
        let patched: SubagentUpdate =
            serde_json::from_value(json!({"sessionId": "c1", "state": {"state": "idle"}})).unwrap();
        announce(patched, &mut children, &sink);
        let child = children.get_mut("c1").expect("announced");
        assert_eq!(child.name("c1"), "scout");
        child.turn.update(
            chunk("scanning"),
            &ChildSink {
                inner: &sink,
                child: "c1",
            },
        );
        assert_eq!(
            sink.sent(),
            [
                "child c1 Some(\"scout\") None Some(Running) true",
                "child c1 Some(\"scout\") None Some(Idle) true",
                "child_activity c1 {\"kind\":\"message_chunk\",\"text\":\"scanning\"}",
            ]
        );
        // A child without a title goes by its session id.
        assert_eq!(Child::default().name("c2"), "c2");
    }

    #[test]
    fn a_childs_permission_shows_in_both_boxes() {
        let sink = Recorder::default();
        let resolved = Activity::PermissionResolved {
            id: "c1/k2".into(),
            outcome: "cancelled".into(),
        };
        Both {
            sink: &sink,
            child: Some("c1"),
        }
        .activity(resolved.clone());
        Both {
            sink: &sink,
            child: None,
        }
        .activity(resolved);
        let line = r#"{"kind":"permission_resolved","id":"c1/k2","outcome":"cancelled"}"#;
        assert_eq!(
            sink.sent(),
            [
                format!("child_activity c1 {line}"),
                format!("activity {line}"),
                format!("activity {line}"),
            ]
        );
    }

    /// A turn's route whose chunks go to `rec` when taken on the spot,
    /// and its channel.
    fn routed(rec: &Arc<Recorder>) -> (super::super::route::Routes, Arc<Stream>, Inbox) {
        let to = rec.clone();
        let stream = Arc::new(Stream::new(Some(Arc::new(move |a| to.activity(a)))));
        let (tx, rx) = mpsc::unbounded_channel();
        let routes = super::super::route::Routes::default();
        let route = Route {
            tx,
            stream: stream.clone(),
            child: false,
        };
        lock(&routes).insert("s".to_string(), route);
        (routes, stream, rx)
    }

    fn text(t: &str) -> Incoming {
        Incoming::Chunk(Chunk {
            text: t.into(),
            thought: false,
        })
    }

    /// What the turn's task does with what reached it (`Running::take`).
    fn take(stream: &Stream, rx: &mut Inbox, sink: &dyn TurnSink) {
        while let Ok((_, incoming)) = rx.try_recv() {
            match incoming {
                Incoming::Update(u) => lock(&stream.turn).update(*u, sink),
                Incoming::Chunk(c) => lock(&stream.turn).chunk(c, sink),
                _ => {}
            }
            stream.taken();
        }
    }

    fn shown(rec: &Recorder) -> Vec<String> {
        rec.activities
            .lock()
            .unwrap()
            .iter()
            .map(|a| match a {
                Activity::MessageChunk { text } => text.clone(),
                Activity::ToolCall { .. } => "[tool]".into(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_chunk_is_taken_on_the_spot_only_with_nothing_queued_ahead_of_it() {
        use super::super::route::route;
        let rec = Arc::new(Recorder::default());
        let (routes, stream, mut rx) = routed(&rec);
        // Nothing queued: shown at once, without the turn's task.
        assert!(route(&routes, "s", text("a")).is_none());
        assert_eq!(shown(&rec), ["a"]);
        assert!(rx.try_recv().is_err());
        // A tool call the turn's task has not taken yet: the next chunk
        // waits behind it, so the box shows them in the order sent.
        let _ = route(&routes, "s", Incoming::Update(Box::new(tool_call("t1"))));
        let _ = route(&routes, "s", text("b"));
        assert_eq!(shown(&rec), ["a"]);
        take(&stream, &mut rx, rec.as_ref());
        assert_eq!(shown(&rec), ["a", "[tool]", "b"]);
        // All taken in: on the spot again.
        let _ = route(&routes, "s", text("c"));
        assert_eq!(shown(&rec), ["a", "[tool]", "b", "c"]);
        assert!(rx.try_recv().is_err());
        // The final message is the text after the last tool call, however
        // its chunks came.
        assert_eq!(lock(&stream.turn).final_text, "bc");
        // A turn given up (its task gone) shows nothing more.
        drop(rx);
        assert!(route(&routes, "s", text("d")).is_some());
        assert_eq!(shown(&rec), ["a", "[tool]", "b", "c"]);
    }

    #[test]
    fn chunks_of_a_child_or_a_cancelled_turn_are_not_taken_on_the_spot() {
        use super::super::route::route;
        let rec = Arc::new(Recorder::default());
        let (routes, stream, mut rx) = routed(&rec);
        let announce = wire(json!({
            "sessionUpdate": "subagent_update", "sessionId": "kid", "title": "helper",
        }));
        let _ = route(&routes, "s", Incoming::Update(Box::new(announce)));
        take(&stream, &mut rx, rec.as_ref());
        // A child's chunk goes to the turn's task, which names the child.
        let _ = route(&routes, "kid", text("k"));
        assert!(matches!(rx.try_recv(), Ok((from, Incoming::Chunk(_))) if from == "kid"));
        stream.taken();
        // Once the person cancelled, what the agent still says is not shown.
        stream.cancel();
        assert!(route(&routes, "s", text("late")).is_none());
        assert!(shown(&rec).iter().all(|s| s != "late"));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn a_sink_that_does_not_stream_gets_every_chunk_through_the_turn() {
        use super::super::route::route;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let routes = super::super::route::Routes::default();
        lock(&routes).insert("s".to_string(), Route::through(tx));
        let _ = route(&routes, "s", text("a"));
        assert!(matches!(rx.try_recv(), Ok((_, Incoming::Chunk(c))) if c.text == "a"));
    }
}
