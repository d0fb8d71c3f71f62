//! The person's commands: chat messages, `@NAME message`, slash commands
//! (run in `slash`), Esc and permission answers, turned into chat turns and
//! sub-agent calls.

use crate::confine::lock;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::agent::PermissionAnswer;
use crate::event::{Event, NoticeLevel, Op};
use crate::model_loop::chat::ChatHandle;
use crate::runtime::bus::Emitter;
use crate::subagent::dispatch::Dispatcher;
use crate::subagent::input::{Isolation, SubAgentCallInput, TaskInput};
use crate::transcript::TerminalSize;

/// `@NAME message`: a message straight to an agent; `@A,B,C message`:
/// the same message to several agents at once, as one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mention {
    /// One agent, or several (each once, in the order given).
    pub agents: Vec<String>,
    pub message: String,
    /// `@NAME!`: run in the background.
    pub background: bool,
    /// `@NAME?`: ask for a code review (with several agents: a review
    /// quorum).
    pub review: bool,
    /// `@NAME+`: in a git worktree of its own (with several agents: one
    /// each, best of N).
    pub worktree: bool,
}

impl Mention {
    /// The call it makes: one call, or a batch with one task per agent.
    pub fn call(self) -> SubAgentCallInput {
        let mut call = SubAgentCallInput {
            code_review: self.review,
            run_in_background: self.background,
            isolation: self.worktree.then_some(Isolation::Worktree),
            ..SubAgentCallInput::default()
        };
        match &self.agents[..] {
            [agent] => {
                call.agent = Some(agent.clone());
                call.input = Some(self.message);
            }
            agents => {
                // Several writers, each in a worktree: an arena, compared.
                call.compare = self.worktree && !self.review;
                call.tasks = Some(
                    agents
                        .iter()
                        .map(|agent| TaskInput {
                            agent: Some(agent.clone()),
                            input: self.message.clone(),
                            ..TaskInput::default()
                        })
                        .collect(),
                );
            }
        }
        call
    }
}

/// Parses `@NAME message`, `@NAME! message` or `@NAME? message` (the marks
/// may be combined), and `@A,B,C? message` for several agents.
pub fn parse_mention(text: &str) -> Option<Mention> {
    let rest = text.trim_start().strip_prefix('@')?;
    let (head, message) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let names = head.trim_end_matches(['!', '?', '+']);
    let marks = &head[names.len()..];
    let mut agents: Vec<String> = Vec::new();
    for name in names.split(',') {
        if !crate::config::is_name(name) {
            return None;
        }
        if !agents.iter().any(|a| a == name) {
            agents.push(name.to_string());
        }
    }
    Some(Mention {
        agents,
        message: message.trim().to_string(),
        background: marks.contains('!'),
        review: marks.contains('?'),
        worktree: marks.contains('+'),
    })
}

pub(super) struct Ops {
    pub emitter: Emitter,
    pub dispatcher: Arc<Dispatcher>,
    /// The chat model's conversation, when a model is configured.
    pub chat: Option<ChatHandle>,
    /// The base URL for `/model SPEC`.
    pub base_url: Option<String>,
    /// `[prices]`: the price of the chat `/model` picks.
    pub prices: std::collections::BTreeMap<String, crate::event::budget::Price>,
    /// For `/record`'s header.
    pub terminal: TerminalSize,
    /// Where the person's answers to the chat conductor's permission
    /// requests go.
    pub chat_answers: super::conductor::ChatAnswers,
    /// Makes the conductor `/model acp:NAME` asks for.
    pub conductors: super::conductor::Factory,
}

/// What a plain message gets when no chat model is configured.
pub const NO_MODEL: &str = "No chat model: nobody answers plain messages (`/model` says what you could have). `@agent message` talks to an agent.";

/// The chats `/model` offers ([`super::chats::choices`], then a local
/// server's: [`super::chats::served`]), sent as
/// `model_choices` for the composer's completion; with `listing`, said
/// first, the chat in use (`Some(None)`: no chat) before them. A local
/// server is asked in a task of its own, so the caller never waits for it.
pub(super) fn offer_choices(
    dispatcher: &Arc<Dispatcher>,
    emitter: &Emitter,
    base_url: Option<String>,
    listing: Option<Option<String>>,
) {
    let emitter = emitter.clone();
    let offer = move |choices: Vec<super::chats::Choice>| {
        if let Some(chat) = listing {
            emitter.emit(Event::Notice {
                level: NoticeLevel::Info,
                text: super::chats::listing(chat.as_deref(), &choices),
            });
        }
        emitter.emit(Event::ModelChoices {
            specs: choices.into_iter().map(|c| c.spec).collect(),
        });
    };
    let env = super::config::env_var;
    let mut choices = super::chats::choices(dispatcher.registry(), &env);
    let Some(url) = super::chats::probe_url(base_url.as_deref(), &env) else {
        return offer(choices);
    };
    tokio::spawn(async move {
        choices.extend(super::chats::served(&url).await);
        offer(choices);
    });
}

impl Ops {
    pub(super) fn notice(&self, text: impl Into<String>) {
        self.emitter.emit(Event::Notice {
            level: NoticeLevel::Info,
            text: text.into(),
        });
    }

    pub(super) fn error(&self, text: impl Into<String>) {
        self.emitter.emit(Event::Error { text: text.into() });
    }

    /// Runs until the screen is gone.
    pub async fn run(self, mut ops: mpsc::UnboundedReceiver<Op>) {
        while let Some(op) = ops.recv().await {
            match op {
                Op::Submit(text) => self.submit(text),
                Op::Cancel(call_id) => {
                    // Esc again: calls asked to stop that have not are
                    // ended now, their agents stopped.
                    if self.dispatcher.kill_cancelling() {
                        continue;
                    }
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
                    let answer = PermissionAnswer { request_id, option };
                    if call_id == crate::event::CHAT_CALL {
                        let answers = lock(&self.chat_answers);
                        if let Some(tx) = answers.as_ref() {
                            let _ = tx.send(answer);
                        }
                    } else {
                        self.dispatcher.answer(&call_id, answer);
                    }
                }
                Op::Elicit {
                    call_id,
                    request_id,
                    answer,
                } => {
                    let answer = crate::agent::ElicitationAnswer { request_id, answer };
                    if !self.dispatcher.elicit(&call_id, answer) {
                        self.error(format!("no running call {call_id:?} to answer"));
                    }
                }
                Op::CancelChild { call_id, child_id } => {
                    if !self.dispatcher.cancel_child(&call_id, &child_id) {
                        self.error(format!("no running call {call_id:?} to cancel a child of"));
                    }
                }
                Op::CancelTask(task_id) => {
                    if !self.dispatcher.cancel(&task_id) {
                        self.error(format!("no running task {task_id:?} to cancel"));
                    }
                }
            }
        }
    }

    fn submit(&self, text: String) {
        if let Some(command) = text.trim().strip_prefix('/') {
            return self.slash(command.trim());
        }
        if let Some(mention) = parse_mention(&text) {
            self.emitter.emit(Event::UserMessage { text: text.clone() });
            let dispatcher = self.dispatcher.clone();
            let emitter = self.emitter.clone();
            tokio::spawn(async move {
                if let Err(e) = dispatcher.call(mention.call()).await {
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
                // The whole story was told at the start (and `/model` tells
                // it again): one line here.
                self.emitter.emit(Event::Notice {
                    level: NoticeLevel::Warning,
                    text: NO_MODEL.into(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions() {
        let m = parse_mention("@claude review src/lib.rs").unwrap();
        assert_eq!(
            (&m.agents[..], m.message.as_str(), m.background, m.review),
            (
                &["claude".to_string()][..],
                "review src/lib.rs",
                false,
                false
            )
        );
        let m = parse_mention("@fast-agent!? go").unwrap();
        assert_eq!(
            (m.agents.join(","), m.background, m.review),
            ("fast-agent".to_string(), true, true)
        );
        let m = parse_mention("  @codex?\nmulti\nline").unwrap();
        assert_eq!(
            (m.agents.join(","), m.message.as_str(), m.review),
            ("codex".to_string(), "multi\nline", true)
        );
        assert_eq!(parse_mention("hello @claude"), None);
        assert_eq!(parse_mention("@ hi"), None);
        assert_eq!(parse_mention("email@x.com"), None);
    }

    #[test]
    fn several_agents_make_one_batch() {
        let m = parse_mention("@claude,codex,gemini? check the diff").unwrap();
        assert_eq!(m.agents, ["claude", "codex", "gemini"]);
        assert!(m.review && !m.background);
        let call = m.call();
        assert_eq!((call.agent.as_deref(), call.input.as_deref()), (None, None));
        assert!(call.code_review);
        let tasks = call.tasks.unwrap();
        assert_eq!(
            tasks
                .iter()
                .map(|t| t.agent.as_deref().unwrap())
                .collect::<Vec<_>>(),
            ["claude", "codex", "gemini"]
        );
        assert!(tasks.iter().all(|t| t.input == "check the diff"));
        // A name given twice is asked once; `!` runs the batch in the background.
        let m = parse_mention("@a,b,a! go").unwrap();
        assert_eq!(
            (m.agents.join(","), m.background),
            ("a,b".to_string(), true)
        );
        // One name is a single call, as before.
        let call = parse_mention("@claude? hi").unwrap().call();
        assert_eq!(
            (call.agent.as_deref(), call.input.as_deref(), call.tasks),
            (Some("claude"), Some("hi"), None)
        );
        for bad in ["@a,,b hi", "@,a hi", "@a, hi", "@a,b/c hi"] {
            assert_eq!(parse_mention(bad), None, "{bad}");
        }
    }
}
