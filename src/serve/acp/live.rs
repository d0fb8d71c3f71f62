//! One ACP session: one engine [`Session`], driven with `Op`s, its events
//! translated for the host by a pump of its own, and its prompts answered
//! when their work ends.

use crate::runtime::lock;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, SessionId,
    SessionNotification, SessionUpdate, UnstructuredCommandInput,
};
use tokio::sync::{mpsc, oneshot};

use super::host;
use super::translate::{AskKind, Out, Translator};
use crate::engine::{Session, parse_mention};
use crate::event::{Event, NoticeLevel, Op, Stamped, StopReason};
use crate::runtime::bus::Emitter;
use crate::serve::Endpoint;
use crate::subagent::dispatch::Dispatcher;

/// What a session without a chat says to a plain message.
pub const NO_CHAT: &str = "quorum has no chat model, so nobody answers plain messages here. \
Give `quorum acp` one in the agent's arguments: `--model acp:NAME` (an ACP agent of yours as the \
chat; without any choice the first one installed is, claude, codex, gemini or opencode first), \
`--model PROVIDER:NAME` (`anthropic:claude-sonnet-4-5` with ANTHROPIC_API_KEY, `openai:gpt-4o` \
with OPENAI_API_KEY, `openai:NAME --base-url URL` for a local server), or QUORUM_MODEL, or \
`[model] name` in quorum's config file (`none` keeps the chat off). Meanwhile `@NAME message` \
talks to an agent directly (`@NAME?` a code review, `@NAME!` in the background, `@A,B? message` \
a review quorum).";

/// How the host is asked, as `initialize` told.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostCaps {
    /// Child sessions (`subagents`).
    pub children: bool,
    /// `elicitation.form`.
    pub forms: bool,
    /// `elicitation.url`.
    pub urls: bool,
    /// `fs.readTextFile` and `fs.writeTextFile`, both.
    pub files: bool,
}

/// Why a prompt was not answered with a stop reason.
pub enum PromptError {
    /// The chat's turn failed: what went wrong.
    Failed(String),
}

/// Commands to a session's pump: translate and send every event emitted
/// so far, then tell.
struct Flush(oneshot::Sender<()>);

/// What a prompt and the pump share; set before the prompt's `Op` is sent,
/// so the pump knows of it before any event it causes.
#[derive(Default)]
struct Shared {
    /// The chat prompt waiting for its turn to end.
    chat_turn: Mutex<Option<oneshot::Sender<Result<StopReason, String>>>>,
    /// Tell when the next notice or error comes.
    said: Mutex<Option<oneshot::Sender<()>>>,
    /// A prompt runs (informational notices go to the host).
    talking: AtomicBool,
    /// The running prompt's own calls (an `@NAME` prompt's), for cancel.
    prompt_calls: Mutex<Option<Vec<String>>>,
}

/// A live ACP session.
pub struct Live {
    pub id: String,
    ops: mpsc::UnboundedSender<Op>,
    control: mpsc::UnboundedSender<Flush>,
    shared: Arc<Shared>,
    session: Mutex<Option<Session>>,
    dispatcher: Arc<Dispatcher>,
    emitter: Emitter,
    chat: bool,
    /// A prompt runs (one at a time).
    busy: AtomicBool,
    /// The running prompt was cancelled.
    cancelled: AtomicBool,
    /// The conductor's MCP endpoint, kept as long as the session.
    _tools: Option<Endpoint>,
    pump: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Opens the pump once the host has the session's id.
    gate: Mutex<Option<oneshot::Sender<()>>>,
}

impl Live {
    /// Whether a spending cap stopped work in this session.
    pub fn budget_stopped(&self) -> bool {
        self.emitter.board(|b| b.ledger().stopped())
    }

    /// Takes a started session: its events go to the host on `cx` from now
    /// on (a loaded one's history first, when `replay`).
    pub fn start(
        id: String,
        mut session: Session,
        events: mpsc::UnboundedReceiver<Stamped>,
        tools: Option<Endpoint>,
        cx: ConnectionTo<Client>,
        caps: HostCaps,
        replay: bool,
    ) -> Arc<Self> {
        let history = session.take_history();
        let chat = session.has_chat();
        let ops = session.serve();
        let (control, control_rx) = mpsc::unbounded_channel();
        let shared: Arc<Shared> = Arc::default();
        let sid = SessionId::new(id.clone());
        if caps.files {
            session
                .dispatcher()
                .set_files(Arc::new(super::host::HostFs {
                    cx: cx.clone(),
                    session: sid.clone(),
                }));
        }
        if replay {
            send_history(&cx, &sid, caps.children, &history);
        }
        let pump = Pump {
            translator: Translator::new(sid, caps.children),
            cx,
            ops: ops.clone(),
            caps,
            shared: shared.clone(),
            user_seen: false,
            ours: false,
            failing: false,
            resolved: None,
            asks: HashMap::new(),
            outbox: Vec::new(),
        };
        let (gate, opened) = oneshot::channel();
        let pump = tokio::spawn(async move {
            let _ = opened.await;
            pump.run(events, control_rx).await
        });
        Arc::new(Self {
            id,
            ops,
            control,
            shared,
            dispatcher: session.dispatcher().clone(),
            emitter: session.emitter().clone(),
            session: Mutex::new(Some(session)),
            chat,
            busy: AtomicBool::new(false),
            cancelled: AtomicBool::new(false),
            _tools: tools,
            pump: Mutex::new(Some(pump)),
            gate: Mutex::new(Some(gate)),
        })
    }

    /// The host has the session's id (the answer to `session/new`, `load`
    /// or `resume` is sent): its updates may go now, the commands it takes
    /// first.
    pub fn go(&self, cx: &ConnectionTo<Client>) {
        if let Some(gate) = lock(&self.gate).take() {
            let _ = cx.send_notification(SessionNotification::new(
                SessionId::new(self.id.clone()),
                SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands())),
            ));
            let _ = gate.send(());
        }
    }

    /// Whether a prompt runs.
    pub fn busy(&self) -> bool {
        self.busy.load(Ordering::SeqCst)
    }

    /// Starts a prompt: false when one runs already.
    pub fn begin(&self) -> bool {
        self.busy
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// Runs a prompt (after [`Live::begin`]) to its end: the chat's turn,
    /// an `@NAME` call, or a `/command`.
    pub async fn prompt(&self, text: String) -> Result<StopReason, PromptError> {
        self.cancelled.store(false, Ordering::SeqCst);
        self.shared.talking.store(true, Ordering::SeqCst);
        let result = self.run_prompt(text).await;
        self.flush().await;
        self.shared.talking.store(false, Ordering::SeqCst);
        *lock(&self.shared.prompt_calls) = None;
        self.busy.store(false, Ordering::SeqCst);
        result
    }

    async fn run_prompt(&self, text: String) -> Result<StopReason, PromptError> {
        let trimmed = text.trim_start();
        if let Some(mention) = parse_mention(trimmed) {
            *lock(&self.shared.prompt_calls) = Some(Vec::new());
            self.emitter.emit(Event::UserMessage { text: text.clone() });
            if let Err(e) = self.dispatcher.call(mention.call()).await {
                self.emitter.emit(Event::Error {
                    text: e.to_string(),
                });
            }
            return Ok(self.stop_reason());
        }
        if trimmed.starts_with('/') {
            let (tx, said) = oneshot::channel();
            *lock(&self.shared.said) = Some(tx);
            let _ = self.ops.send(Op::Submit(text));
            let _ = tokio::time::timeout(Duration::from_secs(2), said).await;
            return Ok(self.stop_reason());
        }
        if !self.chat {
            self.emitter.emit(Event::UserMessage { text });
            self.emitter.emit(Event::Notice {
                level: NoticeLevel::Warning,
                text: NO_CHAT.into(),
            });
            return Ok(StopReason::EndTurn);
        }
        let (tx, ended) = oneshot::channel();
        *lock(&self.shared.chat_turn) = Some(tx);
        let _ = self.ops.send(Op::Submit(text));
        match ended.await {
            Ok(Ok(reason)) => Ok(reason),
            Ok(Err(why)) => Err(PromptError::Failed(why)),
            Err(_) => Err(PromptError::Failed("the session ended".into())),
        }
    }

    fn stop_reason(&self) -> StopReason {
        if self.cancelled.load(Ordering::SeqCst) {
            StopReason::Cancelled
        } else {
            StopReason::EndTurn
        }
    }

    /// Waits until every event emitted so far has gone to the host.
    pub async fn flush(&self) {
        let (tx, done) = oneshot::channel();
        if self.control.send(Flush(tx)).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(5), done).await;
        }
    }

    /// `session/cancel`: the running prompt stops (the chat's turn and its
    /// calls, or an `@NAME` prompt's calls); background tasks go on.
    pub fn cancel(&self) {
        if !self.busy() {
            return;
        }
        self.cancelled.store(true, Ordering::SeqCst);
        let calls = lock(&self.shared.prompt_calls).clone();
        match calls {
            Some(calls) => {
                for call in calls {
                    self.dispatcher.cancel(&call);
                }
            }
            None => {
                let _ = self.ops.send(Op::Cancel(String::new()));
            }
        }
    }

    /// `session/cancel` of a call's child session: that call stops.
    pub fn cancel_call(&self, call_id: &str) -> bool {
        self.dispatcher.cancel(call_id)
    }

    /// Ends the session: what runs is cancelled and given a moment to say
    /// so, its agents' sessions closed, every process it started stopped;
    /// its last events go to the host.
    pub async fn close(&self) {
        self.cancel();
        // The session itself is not `Sync`: what it runs is wound down on
        // its dispatcher.
        self.dispatcher.wind_down().await;
        self.dispatcher.close_sessions().await;
        let session = lock(&self.session).take();
        if let Some(session) = session {
            session.shutdown();
            drop(session);
        }
        if let Some(gate) = lock(&self.gate).take() {
            let _ = gate.send(());
        }
        self.flush().await;
        // A prompt whose turn never said it ended is answered: cancelled.
        if let Some(tx) = lock(&self.shared.chat_turn).take() {
            let _ = tx.send(Ok(StopReason::Cancelled));
        }
        if let Some(pump) = lock(&self.pump).take() {
            pump.abort();
        }
    }

    /// The transcript the session is recorded to.
    pub fn recording(&self) -> Option<PathBuf> {
        self.emitter.recording()
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Some(pump) = lock(&self.pump).take() {
            pump.abort();
        }
    }
}

/// quorum's commands a host offers as `/name`: the rows of the slash
/// command table with a host's description (what the TUI's composer takes,
/// less what needs quorum's own screen or files), their arguments as the
/// input hint.
fn commands() -> Vec<AvailableCommand> {
    crate::event::SLASH_COMMANDS
        .iter()
        .filter_map(|c| {
            let command = AvailableCommand::new(c.name, c.host?);
            Some(match c.arguments() {
                Some(hint) => command.input(AvailableCommandInput::Unstructured(
                    UnstructuredCommandInput::new(hint),
                )),
                None => command,
            })
        })
        .collect()
}

/// A loaded session's history, as updates.
fn send_history(cx: &ConnectionTo<Client>, id: &SessionId, children: bool, history: &[Stamped]) {
    let mut translator = Translator::new(id.clone(), children).replaying();
    for stamped in history {
        for out in translator.event(&stamped.event) {
            if let Out::Update(n) = out {
                let _ = cx.send_notification(*n);
            }
        }
    }
    for out in translator.flush() {
        if let Out::Update(n) = out {
            let _ = cx.send_notification(*n);
        }
    }
}

/// A session's history as updates, for a session loaded again while it is
/// open here: read from its transcript.
pub fn replay_file(
    cx: &ConnectionTo<Client>,
    id: &str,
    children: bool,
    path: &std::path::Path,
) -> Result<(), crate::transcript::TranscriptError> {
    let loaded = crate::transcript::load(path)?;
    send_history(
        cx,
        &SessionId::new(id.to_string()),
        children,
        &loaded.events,
    );
    Ok(())
}

/// Translates a session's events and sends them; asks the host what its
/// agents ask; tells prompts when they end.
struct Pump {
    translator: Translator,
    cx: ConnectionTo<Client>,
    ops: mpsc::UnboundedSender<Op>,
    caps: HostCaps,
    shared: Arc<Shared>,
    /// The person's message was seen: the turn that starts next is the
    /// prompt's.
    user_seen: bool,
    /// The running turn is the prompt's.
    ours: bool,
    /// The prompt's turn failed: its error follows.
    failing: bool,
    /// How the prompt's turn ended, told once the updates before it went.
    resolved: Option<Result<StopReason, String>>,
    /// Requests the host was sent and has not answered.
    asks: HashMap<(String, String), tokio::task::AbortHandle>,
    outbox: Vec<Out>,
}

impl Pump {
    async fn run(
        mut self,
        mut events: mpsc::UnboundedReceiver<Stamped>,
        mut control: mpsc::UnboundedReceiver<Flush>,
    ) {
        loop {
            tokio::select! {
                biased;
                event = events.recv() => match event {
                    Some(stamped) => {
                        self.event(&stamped.event);
                        self.drain(&mut events);
                    }
                    None => {
                        self.send();
                        self.resolve_failing();
                        // The session is over: prompts still waiting hear so.
                        if let Some(tx) = lock(&self.shared.chat_turn).take() {
                            let _ = tx.send(Err("the session ended".into()));
                        }
                        while let Some(Flush(tx)) = control.recv().await {
                            let _ = tx.send(());
                        }
                        return;
                    }
                },
                c = control.recv() => match c {
                    Some(Flush(tx)) => {
                        self.drain(&mut events);
                        let _ = tx.send(());
                    }
                    None => return,
                },
            }
        }
    }

    /// Every event waiting, then what they make goes out.
    fn drain(&mut self, events: &mut mpsc::UnboundedReceiver<Stamped>) {
        while let Ok(stamped) = events.try_recv() {
            self.event(&stamped.event);
        }
        self.resolve_failing();
        self.send();
    }

    fn event(&mut self, event: &Event) {
        if self.failing {
            // The failed turn's error says why.
            if let Event::Error { text } = event {
                self.resolved = Some(Err(text.clone()));
                self.failing = false;
            } else {
                self.resolve_failing();
            }
        }
        self.translator
            .set_talking(self.shared.talking.load(Ordering::SeqCst));
        let waiting = lock(&self.shared.chat_turn).is_some();
        match event {
            Event::UserMessage { .. } if waiting && !self.ours => self.user_seen = true,
            Event::TurnStarted => {
                self.ours = std::mem::take(&mut self.user_seen) && waiting;
            }
            Event::TurnEnded { stop_reason } if self.ours => {
                self.ours = false;
                match stop_reason {
                    StopReason::Error => self.failing = true,
                    StopReason::Interrupted => self.resolved = Some(Ok(StopReason::Cancelled)),
                    other => self.resolved = Some(Ok(*other)),
                }
            }
            Event::Notice { .. } | Event::Error { .. } => {
                if let Some(tx) = lock(&self.shared.said).take() {
                    let _ = tx.send(());
                }
            }
            Event::SubagentStarted {
                call_id,
                background: false,
                ..
            } => {
                if let Some(calls) = lock(&self.shared.prompt_calls).as_mut() {
                    calls.push(call_id.clone());
                }
            }
            _ => {}
        }
        let out = self.translator.event(event);
        self.outbox.extend(out);
    }

    fn resolve_failing(&mut self) {
        if std::mem::take(&mut self.failing) {
            self.resolved = Some(Err("the chat's turn failed".into()));
        }
    }

    /// Sends what was gathered (the running calls' activity last), then
    /// tells the prompt whose turn ended.
    fn send(&mut self) {
        let mut out = std::mem::take(&mut self.outbox);
        out.extend(self.translator.flush());
        for item in out {
            match item {
                Out::Update(n) => self.notify(*n),
                Out::Ask(ask) => self.ask(ask),
                Out::Withdraw {
                    call_id,
                    request_id,
                } => {
                    if let Some(task) = self.asks.remove(&(call_id, request_id)) {
                        task.abort();
                    }
                }
            }
        }
        if let Some(result) = self.resolved.take()
            && let Some(tx) = lock(&self.shared.chat_turn).take()
        {
            let _ = tx.send(result);
        }
    }

    fn notify(&self, n: SessionNotification) {
        if let Err(e) = self.cx.send_notification(n) {
            tracing::debug!("quorum acp: an update was not sent: {e:?}");
        }
    }

    /// Asks the host, in a task of its own; its answer goes to the engine.
    fn ask(&mut self, ask: super::translate::Ask) {
        let key = (ask.call_id.clone(), ask.request_id.clone());
        if self.asks.contains_key(&key) {
            return;
        }
        let (cx, ops, caps) = (self.cx.clone(), self.ops.clone(), self.caps);
        let task = tokio::spawn(async move {
            let op = match &ask.what {
                AskKind::Permission { .. } => match host::permission(&ask) {
                    Some(request) => {
                        let answer = cx.send_request(request).block_task().await;
                        host::permission_answer(&ask, answer)
                    }
                    None => return,
                },
                AskKind::Question { .. } => match host::question(&ask, caps.forms, caps.urls) {
                    Some(request) => {
                        let answer = cx.send_request(request).block_task().await;
                        host::question_answer(&ask, answer)
                    }
                    None => Op::Elicit {
                        call_id: ask.call_id.clone(),
                        request_id: ask.request_id.clone(),
                        answer: crate::event::ElicitAnswer::Decline,
                    },
                },
            };
            let _ = ops.send(op);
        });
        self.asks.insert(key, task.abort_handle());
    }
}

#[cfg(test)]
mod tests {
    /// The commands a host is offered, with their input hints: those it
    /// was offered when the list was written by hand.
    #[test]
    fn hosts_are_offered_the_tables_commands_with_their_arguments() {
        let offered: Vec<(String, Option<String>)> = super::commands()
            .into_iter()
            .map(|c| {
                let hint = c.input.map(|i| match i {
                    super::AvailableCommandInput::Unstructured(u) => u.hint,
                    _ => String::new(),
                });
                (c.name, hint)
            })
            .collect();
        let hint = |h: &str| Some(h.to_string());
        assert_eq!(
            offered,
            [
                ("agents".into(), hint("NAME")),
                ("mode".into(), hint("NAME MODE")),
                ("set".into(), hint("NAME OPTION VALUE")),
                ("tasks".into(), None),
                ("spend".into(), None),
                ("cancel".into(), hint("TASK")),
                ("msg".into(), hint("TASK message")),
                ("retry".into(), hint("TASK")),
                ("new".into(), None),
                ("help".into(), None),
            ]
        );
    }
}
