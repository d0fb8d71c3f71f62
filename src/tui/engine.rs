//! The engine behind the interactive TUI: it turns the screen's commands
//! into chat turns, sub-agent calls and slash commands.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::app::Op;
use crate::acp::client::PermissionAnswer;
use crate::event::{Emitter, Event, NoticeLevel};
use crate::harness::chat::ChatHandle;
use crate::subagent::dispatch::Dispatcher;
use crate::subagent::types::SubAgentCallInput;

/// Turns a model spec into a model, for `/model SPEC`.
pub type ModelMaker = Arc<dyn Fn(&str) -> Result<Arc<dyn crate::llm::Model>, String> + Send + Sync>;

pub struct Engine {
    pub emitter: Emitter,
    pub dispatcher: Arc<Dispatcher>,
    /// The chat model's conversation, when a model is configured.
    pub chat: Option<ChatHandle>,
    pub make_model: Option<ModelMaker>,
}

pub const WELCOME: &str = "No chat model is configured, so plain messages have no one to answer them. \
Set one with `--model PROVIDER:NAME` (`openai:gpt-4o`, `anthropic:claude-sonnet-4-5`) and \
OPENAI_API_KEY or ANTHROPIC_API_KEY; for a local server (llama-server, Ollama, vLLM) add \
`--base-url http://127.0.0.1:8080/v1`; `--model script:FILE` plays a scripted model; \
QUORUM_MODEL sets the default. Meanwhile `@NAME message` talks to an agent directly \
(`@NAME!` in the background, `@NAME?` for a code review), `/help` lists the commands, and \
`quorum replay FILE` replays a recorded session.";

const HELP: &str = "Commands: /agents (the agents you can call) · /tasks (background tasks) · \
/cancel [TASK] (cancel a task, else the running turn) · /new (new conversation; sessions \
forgotten) · /model [SPEC] (show or change the chat model) · /record FILE (record this \
session) · /help. `@NAME message` calls an agent directly (`@NAME!` background, `@NAME?` \
review). Keys: Esc cancels the running turn or call, 1-9 answer a permission request, \
PgUp/PgDn scroll, Ctrl+T shows the tasks, Ctrl+C quits.";

impl Engine {
    fn notice(&self, text: impl Into<String>) {
        self.emitter.emit(Event::Notice {
            level: NoticeLevel::Info,
            text: text.into(),
        });
    }

    fn error(&self, text: impl Into<String>) {
        self.emitter.emit(Event::Error { text: text.into() });
    }

    /// Runs until the screen is gone.
    pub async fn run(self, mut ops: mpsc::UnboundedReceiver<Op>) {
        while let Some(op) = ops.recv().await {
            match op {
                Op::Submit(text) => self.submit(text),
                Op::Cancel(call_id) => {
                    // Esc: the running chat turn first (its calls with it).
                    let turn = self.chat.as_ref().is_some_and(|c| c.cancel());
                    if !turn && !call_id.is_empty() {
                        self.dispatcher.cancel(&call_id);
                    }
                }
                Op::Answer {
                    call_id,
                    request_id,
                    option,
                } => {
                    self.dispatcher
                        .answer(&call_id, PermissionAnswer { request_id, option });
                }
            }
        }
    }

    fn submit(&self, text: String) {
        if let Some(command) = text.trim().strip_prefix('/') {
            return self.slash(command.trim());
        }
        if let Some(mention) = super::app::parse_mention(&text) {
            self.emitter.emit(Event::UserMessage { text: text.clone() });
            let dispatcher = self.dispatcher.clone();
            let emitter = self.emitter.clone();
            tokio::spawn(async move {
                let call = SubAgentCallInput {
                    agent: Some(mention.agent),
                    input: Some(mention.message),
                    code_review: mention.review,
                    continue_session: true,
                    run_in_background: mention.background,
                };
                if let Err(e) = dispatcher.call(call).await {
                    emitter.emit(Event::Error {
                        text: e.to_string(),
                    });
                }
            });
            return;
        }
        match &self.chat {
            // The chat records the message when its turn starts.
            Some(chat) => chat.send(text),
            None => {
                self.emitter.emit(Event::UserMessage { text });
                self.emitter.emit(Event::Notice {
                    level: NoticeLevel::Warning,
                    text: WELCOME.into(),
                });
            }
        }
    }

    fn slash(&self, command: &str) {
        let (name, arg) = command
            .split_once(char::is_whitespace)
            .unwrap_or((command, ""));
        let arg = arg.trim();
        match name {
            "help" | "" => self.notice(HELP),
            "agents" => {
                let registry = self.dispatcher.registry();
                let installed = registry.installed();
                let mut text = if installed.is_empty() {
                    "No ACP agents are installed (see `quorum agents`).".to_string()
                } else {
                    format!(
                        "Agents: {}.",
                        installed
                            .iter()
                            .map(|a| if a.description.is_empty() {
                                a.name.clone()
                            } else {
                                format!("{} ({})", a.name, a.description)
                            })
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                text.push_str(" Without a name, `subagent` runs the internal agent.");
                self.notice(text);
            }
            "tasks" => match self.dispatcher.status(None) {
                Ok(status) => {
                    let tasks = status["tasks"].as_array().cloned().unwrap_or_default();
                    if tasks.is_empty() {
                        self.notice("No background tasks.");
                    } else {
                        let lines: Vec<String> = tasks
                            .iter()
                            .map(|t| {
                                format!(
                                    "{} {} {}{} · {} tool calls",
                                    t["task_id"].as_str().unwrap_or("?"),
                                    t["agent"].as_str().unwrap_or("?"),
                                    t["state"].as_str().unwrap_or("?"),
                                    t["severity"]
                                        .as_str()
                                        .map(|s| format!(" ({s})"))
                                        .unwrap_or_default(),
                                    t["tool_calls"]
                                )
                            })
                            .collect();
                        self.notice(lines.join("\n"));
                    }
                }
                Err(e) => self.error(e.to_string()),
            },
            "cancel" => {
                if arg.is_empty() {
                    let turn = self.chat.as_ref().is_some_and(|c| c.cancel());
                    if !turn {
                        self.dispatcher.cancel_all();
                    }
                } else if !self.dispatcher.cancel(arg) {
                    self.error(format!("/cancel: no running task or call {arg:?}"));
                }
            }
            "new" => {
                match &self.chat {
                    Some(chat) => chat.reset(),
                    None => self.dispatcher.forget(),
                }
                self.notice(
                    "New conversation: the model's context and the agents' sessions are forgotten.",
                );
            }
            "model" => match (arg.is_empty(), &self.chat, &self.make_model) {
                (true, Some(chat), _) => self.notice(format!("Chat model: {}", chat.model_name())),
                (true, None, _) => self.notice(WELCOME),
                (false, Some(chat), Some(make)) => match make(arg) {
                    Ok(model) => {
                        let name = model.name();
                        chat.set_model(model);
                        self.notice(format!("Chat model: {name}"));
                    }
                    Err(e) => self.error(format!("/model: {e}")),
                },
                (false, _, _) => {
                    self.error("/model: restart quorum with --model SPEC to start a chat")
                }
            },
            // `/record` is handled by the screen, which owns the recorder.
            other => self.error(format!("unknown command /{other}; /help lists them")),
        }
    }
}
