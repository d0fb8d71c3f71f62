//! The main chat: a harness whose tools are `subagent` and
//! `subagent_status`, reporting to the transcript, with background
//! completions delivered to the model exactly once.

use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};

use super::{Harness, Sink, ToolSet, summarize_args};
use crate::acp::registry::INTERNAL_AGENT_NOTE;
use crate::bus::Emitter;
use crate::event::{Event, NoticeLevel, Outcome, StopReason};
use crate::llm::{LlmError, Model, ToolCall, ToolSpec};
use crate::subagent::dispatch::Dispatcher;
use crate::subagent::types::{StatusInput, SubAgentCallInput, input_schema, status_schema};

const SYSTEM: &str = "You are the chat agent of quorum, a terminal client for working with many \
coding agents at once. You get work done by delegating it with the `subagent` tool: to an ACP \
agent by name, or to the internal agent. Ask for a code review with `code_review` when the person \
wants one; use `run_in_background` for long work and keep talking meanwhile. Reports of \
background tasks arrive as automated messages. Be brief.";

/// `subagent` and `subagent_status`, on a dispatcher.
pub struct ChatTools {
    dispatcher: Arc<Dispatcher>,
    /// Nesting depth of the calls these tools make (0: the main chat).
    depth: u32,
}

impl ChatTools {
    pub fn new(dispatcher: Arc<Dispatcher>, depth: u32) -> Self {
        Self { dispatcher, depth }
    }
}

impl ToolSet for ChatTools {
    fn specs(&self) -> Vec<ToolSpec> {
        let mut description = self.dispatcher.registry().tool_description();
        description.set_note(INTERNAL_AGENT_NOTE);
        vec![
            ToolSpec {
                name: "subagent".into(),
                description: description.text(),
                parameters: input_schema(),
            },
            ToolSpec {
                name: "subagent_status".into(),
                description: "The state of a background sub-agent task (and its report once \
                              done), or of every task when `task_id` is left out. With \
                              `message`, steer the task: sent as its next turn (queued while \
                              it runs; a new turn on the same session once done). `cancel` \
                              stops it; `wait_seconds` (at most 600) waits for it to finish \
                              before answering."
                    .into(),
                parameters: status_schema(),
            },
        ]
    }

    fn call(
        &self,
        call: ToolCall,
        cancel: watch::Receiver<bool>,
    ) -> BoxFuture<'static, Result<String, String>> {
        let dispatcher = self.dispatcher.clone();
        let depth = self.depth;
        async move {
            let arguments = if call.arguments.trim().is_empty() {
                "{}"
            } else {
                call.arguments.as_str()
            };
            match call.name.as_str() {
                "subagent" => {
                    let input: SubAgentCallInput = serde_json::from_str(arguments)
                        .map_err(|e| format!("bad subagent arguments: {e}"))?;
                    let reply = dispatcher
                        .call_with(input, Some(cancel), depth)
                        .await
                        .map_err(|e| e.to_string())?;
                    Ok(reply.to_json().to_string())
                }
                "subagent_status" => {
                    let input: StatusInput = serde_json::from_str(arguments)
                        .map_err(|e| format!("bad subagent_status arguments: {e}"))?;
                    // Waiting (`wait_seconds`) ends with the turn.
                    let mut cancel = cancel;
                    let status = tokio::select! {
                        status = dispatcher.status_with(input) => status.map_err(|e| e.to_string())?,
                        _ = crate::cancel::cancelled(&mut cancel) => {
                            return Err("subagent_status: cancelled".to_string());
                        }
                    };
                    Ok(status.to_string())
                }
                other => Err(format!("unknown tool {other:?}")),
            }
        }
        .boxed()
    }
}

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

    fn tool_started(&self, call: &ToolCall) {
        if call.name != "subagent" {
            self.emitter.emit(Event::ToolCallStarted {
                id: call.id.clone(),
                name: call.name.clone(),
                summary: summarize_args(call),
            });
        }
    }

    fn tool_finished(&self, call: &ToolCall, result: &Result<String, String>) {
        match (call.name.as_str(), result) {
            // The box shows a call that ran; one that could not run is an error.
            ("subagent", Ok(_)) => {}
            ("subagent", Err(e)) => self.emitter.emit(Event::Error {
                text: format!("subagent: {e}"),
            }),
            (_, result) => {
                let (ok, text) = match result {
                    Ok(t) => (true, t),
                    Err(e) => (false, e),
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
}

/// The conversation with the main chat model.
pub struct Chat {
    harness: Harness,
    dispatcher: Arc<Dispatcher>,
    sink: ChatSink,
    /// Background tasks that finished, by task id.
    completions: mpsc::UnboundedReceiver<String>,
}

impl Chat {
    pub fn new(
        model: Arc<dyn Model>,
        dispatcher: Arc<Dispatcher>,
        emitter: Emitter,
        completions: mpsc::UnboundedReceiver<String>,
    ) -> Self {
        let tools = Arc::new(ChatTools::new(dispatcher.clone(), 0));
        Self {
            harness: Harness::new(model, tools, Some(SYSTEM.to_string())),
            dispatcher,
            sink: ChatSink { emitter },
            completions,
        }
    }

    pub fn model_name(&self) -> String {
        self.harness.model().name()
    }

    pub fn dispatcher(&self) -> &Arc<Dispatcher> {
        &self.dispatcher
    }

    /// A new conversation: the model's context and the sub-agents'
    /// sessions are forgotten.
    pub fn reset(&mut self) {
        self.harness.clear();
        self.dispatcher.forget();
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
        let mut delivered: Vec<String> = first.into_iter().collect();
        while let Ok(c) = self.completions.try_recv() {
            delivered.push(c);
        }
        let emitter = &self.sink.emitter;
        let mut prompt = String::new();
        for task_id in delivered {
            let Some(task) = emitter.board(|b| b.task(&task_id).cloned()) else {
                continue;
            };
            emitter.emit(Event::TaskReported {
                task_id: task_id.clone(),
            });
            prompt.push_str(&format!(
                "[automated message] Background task {task_id} ({}) finished with stop reason {}{}. Its report:\n{}\n\n",
                task.agent,
                task.stop_reason.unwrap_or_default(),
                task.summary.severity
                    .map(|s| format!(", verdict {}", s.as_str()))
                    .unwrap_or_default(),
                task.output.as_deref().unwrap_or("")
            ));
        }
        if let Some(m) = message {
            emitter.emit(Event::UserMessage { text: m.clone() });
            prompt.push_str(&m);
        }
        emitter.emit(Event::TurnStarted);
        let result = self.harness.turn(prompt, &self.sink, cancel).await;
        let emitter = &self.sink.emitter;
        let stop_reason = match &result {
            Ok(end) => end.stop_reason,
            Err(_) => StopReason::Error,
        };
        emitter.emit(Event::TurnEnded { stop_reason });
        let warning = match (&result, stop_reason) {
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
        result
    }
}

enum ChatCommand {
    Message(String),
    Reset,
    SetModel(Arc<dyn Model>),
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
        *self.model.lock().expect("not poisoned") = model.name();
        let _ = self.tx.send(ChatCommand::SetModel(model));
    }

    pub fn model_name(&self) -> String {
        self.model.lock().expect("not poisoned").clone()
    }

    /// Cancels the running turn (and the tool calls it waits on). False if
    /// the chat is idle.
    pub fn cancel(&self) -> bool {
        match self.cancel.lock().expect("not poisoned").as_ref() {
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
                    *model_name.lock().expect("not poisoned") = model.name();
                    chat.harness.set_model(model);
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
        *cancel_slot.lock().expect("not poisoned") = Some(tx);
        let _ = chat.turn(message, first, cancel).await;
        *cancel_slot.lock().expect("not poisoned") = None;
    }
}
