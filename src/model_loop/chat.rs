//! The main chat: a model loop whose tools (the engine gives it the
//! sub-agent tool) report to the transcript, with background completions
//! delivered to the model exactly once, and the summary of its
//! conversation that sub-agents may get.

use crate::confine::lock;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};

use futures::StreamExt;

use super::{Mirror, ModelLoop, Sink, ToolError, ToolSet, summarize_args};
use crate::event::{ChatEntry, ChatToolCall, Event, NoticeLevel, Outcome, StopReason};
use crate::llm::{Delta, LlmError, Message, Model, Request, ToolCall};
use crate::runtime::bus::Emitter;
use crate::runtime::cancel::cancelled;

const SYSTEM: &str = "You are the chat agent of quorum, a terminal client for working with many \
coding agents at once. You get work done by delegating it with the `subagent` tool: to an ACP \
agent by name, or to the internal agent. Ask for a code review with `code_review` when the person \
wants one; use `tasks` to give several agents work at once (the same review to several agents \
gives a quorum); use `run_in_background` for long work and keep talking meanwhile. Sub-agents \
know nothing of this conversation unless you say it or set `include_main_summary`. Reports of \
background tasks arrive as automated messages. Be brief.";

/// The main chat's events: assistant text, tool lines (a `subagent` call
/// is its box instead), usage and retries.
pub struct ChatSink {
    pub emitter: Emitter,
}

impl Sink for ChatSink {
    fn text(&self, text: &str) {
        self.emitter.emit(Event::AssistantDelta {
            text: text.to_string(),
        });
    }

    fn message_end(&self) {
        self.emitter.emit(Event::AssistantEnd);
    }

    fn writing_call(&self, bytes: usize) {
        self.emitter.emit(Event::AssistantWritingCall {
            bytes: bytes as u64,
        });
    }

    fn tool_started(&self, call: &ToolCall) {
        if call.name != "subagent" {
            self.emitter.emit(Event::ToolCallStarted {
                id: call.id.clone(),
                name: call.name.clone(),
                summary: summarize_args(call),
            });
        }
    }

    fn tool_finished(&self, call: &ToolCall, result: &Result<String, ToolError>) {
        match (call.name.as_str(), result) {
            // The box shows a call that ran; one that could not run is an error.
            ("subagent", Ok(_)) => {}
            ("subagent", Err(e)) => self.emitter.emit(Event::Error {
                text: format!("subagent: {e}"),
            }),
            (_, result) => {
                let (ok, text): (bool, std::borrow::Cow<'_, str>) = match result {
                    Ok(t) => (true, t.into()),
                    Err(e) => (false, e.to_string().into()),
                };
                let mut summary: String = text
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(100)
                    .collect();
                if text.len() > summary.len() {
                    summary.push('…');
                }
                self.emitter.emit(Event::ToolCallFinished {
                    id: call.id.clone(),
                    ok,
                    summary,
                });
            }
        }
    }

    fn usage(&self, input_tokens: u64, output_tokens: u64) {
        self.emitter.emit(Event::Usage {
            input_tokens,
            output_tokens,
        });
    }

    fn retry(&self, attempt: u32, wait_ms: u64, reason: &str) {
        self.emitter.emit(Event::ModelRetry {
            attempt,
            wait_ms,
            reason: reason.to_string(),
        });
    }

    fn context(&self, message: &Message) {
        self.emitter.emit(Event::ChatMessage {
            message: entry_of(message),
        });
    }
}

/// A context message as the transcript records it.
pub fn entry_of(message: &Message) -> ChatEntry {
    match message {
        Message::User { content } => ChatEntry::User {
            content: content.clone(),
        },
        Message::Assistant {
            content,
            tool_calls,
        } => ChatEntry::Assistant {
            content: content.clone(),
            tool_calls: tool_calls
                .iter()
                .map(|c| ChatToolCall {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
        },
        Message::Tool {
            tool_call_id,
            name,
            content,
        } => ChatEntry::Tool {
            tool_call_id: tool_call_id.clone(),
            name: name.clone(),
            content: content.clone(),
        },
    }
}

/// A recorded context message as the model gets it.
pub fn message_of(entry: &ChatEntry) -> Message {
    match entry {
        ChatEntry::User { content } => Message::User {
            content: content.clone(),
        },
        ChatEntry::Assistant {
            content,
            tool_calls,
        } => Message::Assistant {
            content: content.clone(),
            tool_calls: tool_calls
                .iter()
                .map(|c| ToolCall {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
        },
        ChatEntry::Tool {
            tool_call_id,
            name,
            content,
        } => Message::Tool {
            tool_call_id: tool_call_id.clone(),
            name: name.clone(),
            content: content.clone(),
        },
    }
}

/// How much of the conversation the summary is written from (chars, the
/// newest kept).
const SUMMARY_SOURCE: usize = 24_000;
/// How long the summary may be (chars).
const SUMMARY_CHARS: usize = 2_000;
/// How much of each message the fallback summary keeps (chars).
const CLIP_CHARS: usize = 600;

const SUMMARY_SYSTEM: &str = "You write the context a helper agent gets before its task. \
Summarise the conversation below in a few short sentences or bullet points: what the person \
wants, what was decided, and the facts the helper needs (files, names, constraints). Write only \
the summary.";

/// The main conversation for `include_main_summary`: the chat's messages
/// (as of its last tool calls) and the model that summarises them, in
/// one extra request. Without a model, or when the request fails, the
/// summary is the last user and assistant messages, clipped.
#[derive(Clone)]
pub struct ConversationSummary {
    messages: Mirror,
    model: Arc<std::sync::Mutex<Option<Arc<dyn Model>>>>,
}

impl ConversationSummary {
    pub fn new(messages: Mirror, model: Option<Arc<dyn Model>>) -> Self {
        Self {
            messages,
            model: Arc::new(std::sync::Mutex::new(model)),
        }
    }
}

impl ConversationSummary {
    /// The summary, or `None` when there is no conversation yet.
    pub fn summary(&self, cancel: watch::Receiver<bool>) -> BoxFuture<'_, Option<String>> {
        async move {
            let messages = self
                .messages
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let said = |m: &Message| match m {
                Message::User { content } | Message::Assistant { content, .. } => {
                    !content.trim().is_empty()
                }
                Message::Tool { .. } => false,
            };
            if !messages.iter().any(said) {
                return None;
            }
            let model = self.model.lock().unwrap_or_else(|e| e.into_inner()).clone();
            if let Some(model) = model
                && let Some(summary) = write_summary(model, &messages, cancel).await
            {
                return Some(summary);
            }
            Some(clipped(&messages))
        }
        .boxed()
    }
}

/// The conversation as text for the summary request: the newest
/// [`SUMMARY_SOURCE`] chars of it.
fn conversation_text(messages: &[Message]) -> String {
    let mut text = String::new();
    for m in messages {
        match m {
            Message::User { content } => text.push_str(&format!("Person: {content}\n\n")),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                if !content.trim().is_empty() {
                    text.push_str(&format!("Assistant: {content}\n\n"));
                }
                for call in tool_calls {
                    text.push_str(&format!(
                        "[the assistant called {} with {}]\n\n",
                        call.name,
                        clip(&call.arguments, 300)
                    ));
                }
            }
            Message::Tool { name, content, .. } => {
                text.push_str(&format!("[{name} answered: {}]\n\n", clip(content, 600)));
            }
        }
    }
    let chars = text.chars().count();
    if chars > SUMMARY_SOURCE {
        text = text.chars().skip(chars - SUMMARY_SOURCE).collect();
    }
    text
}

/// One request to `model` for the summary; `None` if it fails, is
/// cancelled or says nothing.
async fn write_summary(
    model: Arc<dyn Model>,
    messages: &[Message],
    mut cancel: watch::Receiver<bool>,
) -> Option<String> {
    let request = Request {
        system: Some(SUMMARY_SYSTEM.to_string()),
        messages: vec![Message::User {
            content: format!(
                "The conversation:\n\n{}\nWrite the summary.",
                conversation_text(messages)
            ),
        }],
        tools: Vec::new(),
        max_tokens: 1024,
    };
    let mut stream = model.stream(request);
    let mut text = String::new();
    loop {
        let next = tokio::select! {
            next = stream.next() => next,
            _ = cancelled(&mut cancel) => return None,
        };
        match next {
            Some(Ok(Delta::Text(t))) => text.push_str(&t),
            Some(Ok(Delta::Finish(_))) | None => break,
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                tracing::warn!("the main conversation's summary failed: {e}");
                return None;
            }
        }
    }
    let text = text.trim();
    (!text.is_empty()).then(|| clip(text, SUMMARY_CHARS))
}

/// The fallback summary: the last user and assistant messages, clipped.
fn clipped(messages: &[Message]) -> String {
    let last = |user: bool| {
        messages.iter().rev().find_map(|m| match m {
            Message::User { content } if user && !content.trim().is_empty() => Some(content),
            Message::Assistant { content, .. } if !user && !content.trim().is_empty() => {
                Some(content)
            }
            _ => None,
        })
    };
    let mut text = String::new();
    if let Some(u) = last(true) {
        text.push_str(&format!(
            "The person's last message: {}",
            clip(u.trim(), CLIP_CHARS)
        ));
    }
    if let Some(a) = last(false) {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&format!(
            "The assistant's last message: {}",
            clip(a.trim(), CLIP_CHARS)
        ));
    }
    text
}

/// `text` cut to `max` chars, ending with `…` when cut.
fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// What answers the chat instead of a model: an ACP agent handed quorum's
/// tools (the engine makes it; this layer knows nothing of ACP).
pub trait Conductor: Send {
    /// `acp:NAME`, for the status line.
    fn name(&self) -> String;
    /// One turn for `prompt`: its text and tool lines go to `sink`; the
    /// error is a sentence naming the agent.
    fn turn<'a>(
        &'a mut self,
        prompt: String,
        sink: &'a ChatSink,
        cancel: watch::Receiver<bool>,
    ) -> BoxFuture<'a, Result<Outcome, String>>;
    /// A new conversation: its next turn opens a new session.
    fn reset(&mut self);
    /// Goes on with `session`, its session in a recorded conversation.
    fn reattach(&mut self, session: String);
}

/// What answers the chat: the model loop, or a conductor.
enum Brain {
    Model(ModelLoop),
    Conductor(Box<dyn Conductor>),
}

/// The conversation with the main chat: the chat model's loop, or a
/// conductor agent; the prompts, reports and events are the same.
pub struct Chat {
    brain: Brain,
    /// The chat's tools, told when the conversation starts over.
    tools: Arc<dyn ToolSet>,
    sink: ChatSink,
    /// Background tasks that finished, by task id.
    completions: mpsc::UnboundedReceiver<String>,
    /// The conversation as `include_main_summary` summarises it, with the
    /// chat's own model.
    summary: ConversationSummary,
    /// The conversation, as the summary reads it (a conductor's is kept
    /// here by the chat; a model's by its model loop).
    mirror: Mirror,
    /// Said to the model once, before the person's next message: what
    /// happened while quorum was not running (a continued session).
    note: Option<String>,
    /// Background tasks whose reports are still to be delivered (those of
    /// a continued session), delivered with the next turn.
    deferred: Vec<String>,
    /// The session's cap reached was said to the model.
    budget_told: bool,
}

impl Chat {
    /// A chat with `model` and `tools`; background completions (task ids)
    /// arrive on `completions`.
    pub fn new(
        model: Arc<dyn Model>,
        tools: Arc<dyn ToolSet>,
        emitter: Emitter,
        completions: mpsc::UnboundedReceiver<String>,
    ) -> Self {
        let mut model_loop = ModelLoop::new(model.clone(), tools.clone(), Some(SYSTEM.to_string()));
        let mirror = model_loop.mirror();
        Self::with(
            Brain::Model(model_loop),
            Some(model),
            mirror,
            tools,
            emitter,
            completions,
        )
    }

    /// A chat answered by `conductor`, which calls `tools` itself (over
    /// MCP); background completions arrive on `completions` and are sent
    /// to it as prompts.
    pub fn conducted(
        conductor: Box<dyn Conductor>,
        tools: Arc<dyn ToolSet>,
        emitter: Emitter,
        completions: mpsc::UnboundedReceiver<String>,
    ) -> Self {
        Self::with(
            Brain::Conductor(conductor),
            None,
            Mirror::default(),
            tools,
            emitter,
            completions,
        )
    }

    fn with(
        brain: Brain,
        model: Option<Arc<dyn Model>>,
        mirror: Mirror,
        tools: Arc<dyn ToolSet>,
        emitter: Emitter,
        completions: mpsc::UnboundedReceiver<String>,
    ) -> Self {
        Self {
            brain,
            tools,
            sink: ChatSink { emitter },
            completions,
            summary: ConversationSummary::new(mirror.clone(), model),
            mirror,
            note: None,
            deferred: Vec::new(),
            budget_told: false,
        }
    }

    /// Goes on from a continued session: its rebuilt context, a note for
    /// the model's next turn, and the background tasks whose reports it
    /// has not had yet. (A conductor goes on from its own session.)
    pub fn restore(&mut self, context: Vec<Message>, note: Option<String>, deferred: Vec<String>) {
        match &mut self.brain {
            Brain::Model(model_loop) => model_loop.restore(context),
            Brain::Conductor(_) => {
                *self.mirror.lock().unwrap_or_else(|e| e.into_inner()) = context;
            }
        }
        self.note = note;
        self.deferred = deferred;
    }

    /// The conversation's summary, for the sub-agents that ask for it
    /// (`include_main_summary`).
    pub fn summary(&self) -> ConversationSummary {
        self.summary.clone()
    }

    pub fn model_name(&self) -> String {
        match &self.brain {
            Brain::Model(model_loop) => model_loop.model().name(),
            Brain::Conductor(c) => c.name(),
        }
    }

    /// Goes on with another model (the conversation is kept); it also
    /// writes the summaries of the conversation from now on.
    pub fn set_model(&mut self, model: Arc<dyn Model>) {
        *self.summary.model.lock().unwrap_or_else(|e| e.into_inner()) = Some(model.clone());
        match &mut self.brain {
            Brain::Model(model_loop) => model_loop.set_model(model),
            Brain::Conductor(_) => {
                let mut model_loop =
                    ModelLoop::new(model, self.tools.clone(), Some(SYSTEM.to_string()));
                let context = self
                    .mirror
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                model_loop.restore(context);
                model_loop.set_mirror(self.mirror.clone());
                self.brain = Brain::Model(model_loop);
            }
        }
    }

    /// Goes on with a conductor: it opens a session of its own at its
    /// next turn (the model's context stays for the summary).
    pub fn set_conductor(&mut self, conductor: Box<dyn Conductor>) {
        *self.summary.model.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.brain = Brain::Conductor(conductor);
    }

    /// A new conversation: the model's context and what its tools
    /// remember (the sub-agents' sessions) are forgotten.
    pub fn reset(&mut self) {
        match &mut self.brain {
            Brain::Model(model_loop) => model_loop.clear(),
            Brain::Conductor(c) => {
                c.reset();
                self.mirror
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clear();
            }
        }
        self.tools.forget();
        self.note = None;
        self.deferred.clear();
        self.sink.emitter.emit(Event::ChatReset);
    }

    /// A background completion that is waiting, if any.
    pub fn try_completion(&mut self) -> Option<String> {
        self.completions.try_recv().ok()
    }

    /// Waits for the next background completion (for an idle chat).
    pub async fn next_completion(&mut self) -> Option<String> {
        self.completions.recv().await
    }

    /// One turn for the person's `message` (or `None` when only completions
    /// are delivered). Completions not yet delivered go first, each once.
    pub async fn turn(
        &mut self,
        message: Option<String>,
        first: Option<String>,
        cancel: watch::Receiver<bool>,
    ) -> Result<Outcome, LlmError> {
        let prompt = self.prompt(message, first);
        self.sink.emitter.emit(Event::TurnStarted);
        let result = self.answer(prompt, cancel).await;
        self.tell_end(&result);
        result
    }

    /// The turn's prompt: the reports of the background tasks that ended
    /// (told as reported), then the person's message (told as theirs).
    fn prompt(&mut self, message: Option<String>, first: Option<String>) -> String {
        let mut delivered: Vec<String> = std::mem::take(&mut self.deferred);
        delivered.extend(first);
        while let Ok(c) = self.completions.try_recv() {
            delivered.push(c);
        }
        let emitter = &self.sink.emitter;
        let mut prompt = self.note.take().unwrap_or_default();
        // The session's cap reached: said once.
        if !self.budget_told
            && let Some(said) = emitter.board(|b| b.budget_message())
        {
            self.budget_told = true;
            prompt.push_str(&said);
        }
        for task_id in delivered {
            let Some(task) = emitter.board(|b| b.task(&task_id).cloned()) else {
                continue;
            };
            emitter.emit(Event::TaskReported {
                task_id: task_id.clone(),
            });
            prompt.push_str(&format!(
                "[automated message] Background task {task_id} ({}) finished with stop reason {}{}{}. Its report:\n{}\n\n",
                task.agent,
                task.stop_reason.unwrap_or_default(),
                task.summary.severity
                    .map(|s| format!(", verdict {}", s.as_str()))
                    .unwrap_or_default(),
                task.work
                    .as_ref()
                    .map(|w| format!(
                        "; its work is on branch {} (worktree {}, {})",
                        w.branch, w.worktree, w.diffstat
                    ))
                    .unwrap_or_default(),
                task.output.as_deref().unwrap_or("")
            ));
        }
        if let Some(m) = message {
            emitter.emit(Event::UserMessage { text: m.clone() });
            prompt.push_str(&m);
        }
        prompt
    }

    /// The chat's answer to `prompt`: its model loop's turn, or its
    /// conductor's (whose conversation is kept as the summary, and a later
    /// model, read it).
    async fn answer(
        &mut self,
        prompt: String,
        cancel: watch::Receiver<bool>,
    ) -> Result<Outcome, LlmError> {
        match &mut self.brain {
            Brain::Model(model_loop) => model_loop.turn(prompt, &self.sink, cancel).await,
            Brain::Conductor(conductor) => {
                // The conversation as the summary (and a later model)
                // reads it: the prompt, and what the conductor said.
                let user = Message::User {
                    content: prompt.clone(),
                };
                self.sink.context(&user);
                self.mirror
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(user);
                let result = conductor.turn(prompt, &self.sink, cancel).await;
                if let Ok(outcome) = &result {
                    let said = Message::Assistant {
                        content: outcome.output.clone(),
                        tool_calls: Vec::new(),
                    };
                    self.sink.context(&said);
                    self.mirror
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(said);
                }
                result.map_err(LlmError::Agent)
            }
        }
    }

    /// The turn's end, told: its stop reason, and an error or a warning
    /// when it did not end as a turn should.
    fn tell_end(&self, result: &Result<Outcome, LlmError>) {
        let emitter = &self.sink.emitter;
        let stop_reason = match result {
            Ok(end) => end.stop_reason,
            Err(_) => StopReason::Error,
        };
        emitter.emit(Event::TurnEnded { stop_reason });
        let warning = match (result, stop_reason) {
            (Err(LlmError::Agent(e)), _) => {
                emitter.emit(Event::Error { text: e.clone() });
                None
            }
            (Err(e), _) => {
                emitter.emit(Event::Error {
                    text: format!("model: {e}"),
                });
                None
            }
            (_, StopReason::Cancelled) => Some("turn cancelled".to_string()),
            (_, StopReason::MaxTurnRequests) => Some(format!(
                "turn stopped after {} model requests",
                super::MAX_REQUESTS
            )),
            (_, StopReason::MaxTokens) => {
                Some("the model's answer was cut at its token limit".to_string())
            }
            _ => None,
        };
        if let Some(text) = warning {
            emitter.emit(Event::Notice {
                level: NoticeLevel::Warning,
                text,
            });
        }
    }
}

enum ChatCommand {
    Message(String),
    Reset,
    SetModel(Arc<dyn Model>),
    SetConductor(Box<dyn Conductor>),
}

/// A chat running in its own task: messages queue up and run one turn at
/// a time; while idle, a background completion starts a turn by itself.
#[derive(Clone)]
pub struct ChatHandle {
    tx: mpsc::UnboundedSender<ChatCommand>,
    cancel: Arc<std::sync::Mutex<Option<watch::Sender<bool>>>>,
    model: Arc<std::sync::Mutex<String>>,
}

impl ChatHandle {
    pub fn spawn(chat: Chat) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let handle = Self {
            tx,
            cancel: Arc::default(),
            model: Arc::new(std::sync::Mutex::new(chat.model_name())),
        };
        tokio::spawn(actor(chat, rx, handle.cancel.clone(), handle.model.clone()));
        handle
    }

    pub fn send(&self, message: String) {
        let _ = self.tx.send(ChatCommand::Message(message));
    }

    pub fn reset(&self) {
        let _ = self.tx.send(ChatCommand::Reset);
    }

    pub fn set_model(&self, model: Arc<dyn Model>) {
        *lock(&self.model) = model.name();
        let _ = self.tx.send(ChatCommand::SetModel(model));
    }

    /// Goes on with `conductor` as the chat.
    pub fn set_conductor(&self, conductor: Box<dyn Conductor>) {
        *lock(&self.model) = conductor.name();
        let _ = self.tx.send(ChatCommand::SetConductor(conductor));
    }

    pub fn model_name(&self) -> String {
        lock(&self.model).clone()
    }

    /// Cancels the running turn (and the tool calls it waits on). False if
    /// the chat is idle.
    pub fn cancel(&self) -> bool {
        match lock(&self.cancel).as_ref() {
            Some(tx) => tx.send(true).is_ok(),
            None => false,
        }
    }
}

async fn actor(
    mut chat: Chat,
    mut rx: mpsc::UnboundedReceiver<ChatCommand>,
    cancel_slot: Arc<std::sync::Mutex<Option<watch::Sender<bool>>>>,
    model_name: Arc<std::sync::Mutex<String>>,
) {
    loop {
        let (message, first) = tokio::select! {
            cmd = rx.recv() => match cmd {
                Some(ChatCommand::Message(m)) => (Some(m), None),
                Some(ChatCommand::Reset) => {
                    chat.reset();
                    continue;
                }
                Some(ChatCommand::SetModel(model)) => {
                    *lock(&model_name) = model.name();
                    chat.set_model(model);
                    continue;
                }
                Some(ChatCommand::SetConductor(conductor)) => {
                    *lock(&model_name) = conductor.name();
                    chat.set_conductor(conductor);
                    continue;
                }
                None => return,
            },
            completion = chat.next_completion() => match completion {
                Some(c) => (None, Some(c)),
                None => std::future::pending().await,
            },
        };
        let (tx, cancel) = watch::channel(false);
        *lock(&cancel_slot) = Some(tx);
        let _ = chat.turn(message, first, cancel).await;
        *lock(&cancel_slot) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::script::{ScriptModel, Turn};

    fn conversation() -> Mirror {
        Arc::new(std::sync::Mutex::new(vec![
            Message::User {
                content: "Fix the login bug in src/auth.rs".into(),
            },
            Message::Assistant {
                content: "I'll ask an agent.".into(),
                tool_calls: vec![ToolCall {
                    id: "1".into(),
                    name: "subagent".into(),
                    arguments: "{}".into(),
                }],
            },
        ]))
    }

    fn script(turns: serde_json::Value) -> Arc<dyn Model> {
        let turns: Vec<Turn> = serde_json::from_value(turns).unwrap();
        Arc::new(ScriptModel::new("s", turns))
    }

    fn never() -> watch::Receiver<bool> {
        watch::channel(false).1
    }

    #[tokio::test]
    async fn the_model_writes_the_summary_in_one_request() {
        let model = script(serde_json::json!([{"text": "The person wants the login bug fixed."}]));
        let s = ConversationSummary::new(conversation(), Some(model.clone()));
        assert_eq!(
            s.summary(never()).await.as_deref(),
            Some("The person wants the login bug fixed.")
        );
        // The script had one turn: a second summary finds it used up and
        // falls back to the clipped messages.
        let fallback = s.summary(never()).await.unwrap();
        assert!(
            fallback.starts_with("The person's last message: Fix the login bug"),
            "{fallback}"
        );
    }

    #[tokio::test]
    async fn without_a_model_the_last_messages_are_clipped() {
        let messages = conversation();
        messages.lock().unwrap().push(Message::User {
            content: "x".repeat(5000),
        });
        let s = ConversationSummary::new(messages, None);
        let text = s.summary(never()).await.unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].starts_with("The person's last message: xxx"),
            "{text}"
        );
        assert!(
            lines[0].ends_with('…') && lines[0].chars().count() < 700,
            "{text}"
        );
        assert_eq!(lines[1], "The assistant's last message: I'll ask an agent.");
        // No conversation yet: no summary.
        let empty = ConversationSummary::new(Arc::default(), None);
        assert_eq!(empty.summary(never()).await, None);
    }
}
