//! The person's commands: chat messages, `@NAME message`, slash commands,
//! Esc and permission answers, turned into chat turns and sub-agent calls.

use crate::confine::lock;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::agent::PermissionAnswer;
use crate::event::{Event, NoticeLevel, Op};
use crate::harness::chat::ChatHandle;
use crate::runtime::bus::Emitter;
use crate::subagent::dispatch::FollowUp;
use crate::subagent::dispatch::isolate::Discarded;
use crate::subagent::dispatch::{Dispatcher, Reply};
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
        if !crate::acp::registry::is_agent_name(name) {
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
    /// For `/record`'s header.
    pub terminal: TerminalSize,
    /// Where the person's answers to the chat conductor's permission
    /// requests go.
    pub chat_answers: super::conductor::ChatAnswers,
    /// Makes the conductor `/model acp:NAME` asks for.
    pub conductors: super::conductor::Factory,
}

/// What a plain message gets when no chat model is configured.
pub const NO_MODEL: &str = "No chat model: nobody answers plain messages. `/model PROVIDER:NAME` sets one; `@agent message` talks to an agent.";

pub const WELCOME: &str = "No chat model is configured, so plain messages have no one to answer them. \
Set one with `--model PROVIDER:NAME` (`openai:gpt-4o`, `anthropic:claude-sonnet-4-5`) and \
OPENAI_API_KEY or ANTHROPIC_API_KEY; for a local server (llama-server, Ollama, vLLM) add \
`--base-url http://127.0.0.1:8080/v1`; `--model script:FILE` plays a scripted model; \
QUORUM_MODEL sets the default. Meanwhile `@NAME message` talks to an agent directly \
(`@NAME!` in the background, `@NAME?` for a code review, `@A,B,C? message` for a review \
by several agents at once), `/help` lists the commands, and `quorum replay FILE` replays a \
recorded session.";

const HELP: &str = "Commands: /agents [NAME] (the agents you can call; with a name, the commands, \
modes and options it announced) · /mode NAME MODE (change an agent's mode) · /set NAME OPTION VALUE \
(change one of its options: model, effort, ...; a model is remembered) · /tasks (background tasks) · \
/cancel [TASK] (cancel a task, else the running turn) · /msg TASK message (a follow-up \
turn for a task's agent) · /retry TASK (run an interrupted or failed task again) · /merge TASK (merge a worktree task's \
branch into your branch; refused while its review quorum is red, /merge! TASK merges anyway) · \
/discard TASK (remove a worktree task's worktree and branch) · /new (new conversation; sessions \
forgotten) · /model [SPEC] (show or change the chat model) · /record FILE (record this \
session) · /help. `@NAME message` calls an agent directly (`@NAME!` background, `@NAME?` \
review, `@NAME+` in a git worktree of its own on a new branch, `@A,B,C? message` one review by \
several agents, with their quorum; `@A,B,C+ message` best of N, each in its worktree). Keys: Esc cancels the running turn or call, 1-9 answer a permission request, \
↑/↓ recall the messages you sent, Tab completes @NAME and /commands (after @NAME /, the \
agent's own), PgUp/PgDn scroll, Alt+↑/↓ focus a box and Enter opens it (Esc closes), Ctrl+T shows the \
tasks, Tab focuses them (↑/↓ select, Enter open, m message, c cancel, Esc back), Ctrl+C quits.";

impl Ops {
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

    fn slash(&self, command: &str) {
        let (name, arg) = command
            .split_once(char::is_whitespace)
            .unwrap_or((command, ""));
        let arg = arg.trim();
        match name {
            "help" | "" => self.notice(HELP),
            "agents" if !arg.is_empty() => self.agent_info(arg),
            "mode" | "set" => self.agent_setting(name, arg),
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
                text.push_str(
                    " Without a name, `subagent` runs the internal agent. `/agents NAME` shows \
                     what an agent announced: its commands, modes and options.",
                );
                self.notice(text);
            }
            "tasks" => {
                let lines: Vec<String> = self.emitter.board(|b| {
                    b.tasks()
                        .map(|t| {
                            format!(
                                "{} {} {}{} · {} tool calls",
                                t.task_id.as_deref().unwrap_or("?"),
                                t.agent,
                                t.summary.state.as_str(),
                                t.summary
                                    .severity
                                    .map(|s| format!(" ({})", s.as_str()))
                                    .unwrap_or_default(),
                                t.summary.tool_calls
                            )
                        })
                        .collect()
                });
                if lines.is_empty() {
                    self.notice("No background tasks.");
                } else {
                    self.notice(lines.join("\n"));
                }
            }
            "record" => self.record(arg),
            "msg" => {
                let (task, message) = arg.split_once(char::is_whitespace).unwrap_or((arg, ""));
                if task.is_empty() || message.trim().is_empty() {
                    return self.error("/msg TASK message: give the task id and the message");
                }
                self.emitter.emit(Event::UserMessage {
                    text: format!("/msg {task} {}", message.trim()),
                });
                match self.dispatcher.follow_up(task, message) {
                    Ok(FollowUp::Queued) => self.notice(format!(
                        "{task} is running: the message goes in its next turn"
                    )),
                    Ok(_) => {}
                    Err(e) => self.error(format!("/msg: {e}")),
                }
            }
            "retry" => {
                if arg.is_empty() {
                    return self.error(
                        "/retry TASK: give the id of an interrupted or failed task (/tasks lists them)",
                    );
                }
                self.emitter.emit(Event::UserMessage {
                    text: format!("/retry {arg}"),
                });
                let (dispatcher, emitter, id) = (
                    self.dispatcher.clone(),
                    self.emitter.clone(),
                    arg.to_string(),
                );
                tokio::spawn(async move {
                    let event = match dispatcher.retry(&id).await {
                        Ok(Reply::Started { task_id, .. }) => Event::Notice {
                            level: NoticeLevel::Info,
                            text: format!("{id} runs again as {task_id}"),
                        },
                        Ok(_) => return,
                        Err(e) => Event::Error {
                            text: format!("/retry: {e}"),
                        },
                    };
                    emitter.emit(event);
                });
            }
            "merge" | "merge!" => {
                if arg.is_empty() {
                    return self.error(format!(
                        "/{name} TASK: give the worktree task's id (or its branch)"
                    ));
                }
                self.emitter.emit(Event::UserMessage {
                    text: format!("/{name} {arg}"),
                });
                match self.dispatcher.merge(arg, name == "merge!") {
                    Ok(text) => self.notice(text),
                    Err(e) => self.error(format!("/{name} {arg}: {e}")),
                }
            }
            "discard" => {
                if arg.is_empty() {
                    return self
                        .error("/discard TASK: give the worktree task's id (or its branch)");
                }
                self.emitter.emit(Event::UserMessage {
                    text: format!("/discard {arg}"),
                });
                match self.dispatcher.discard(arg) {
                    Ok(Discarded::Asked { branch, commits }) => self.emitter.emit(Event::Notice {
                        level: NoticeLevel::Warning,
                        text: format!(
                            "{branch} has {commits} commit{} that {} never merged: /discard {arg} \
                             again to throw {} away with its worktree",
                            if commits == 1 { "" } else { "s" },
                            if commits == 1 { "was" } else { "were" },
                            if commits == 1 { "it" } else { "them" },
                        ),
                    }),
                    Ok(Discarded::Done { branch }) => {
                        self.notice(format!("{branch}: worktree and branch removed"))
                    }
                    Err(e) => self.error(format!("/discard {arg}: {e}")),
                }
            }
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
                    None => {
                        self.dispatcher.forget();
                        self.emitter.emit(Event::ChatReset);
                    }
                }
                // The agents' sessions it forgets are closed.
                let dispatcher = self.dispatcher.clone();
                tokio::spawn(async move { dispatcher.close_sessions().await });
                self.notice(
                    "New conversation: the model's context and the agents' sessions are forgotten.",
                );
            }
            "model" => match (arg.is_empty(), &self.chat) {
                (true, Some(chat)) => self.notice(format!("Chat model: {}", chat.model_name())),
                (true, None) => self.notice(WELCOME),
                (false, Some(chat)) if super::config::conductor_of(arg).is_some() => {
                    let name = super::config::conductor_of(arg).unwrap_or_default();
                    match (self.conductors)(name) {
                        Ok(conductor) => {
                            let name = conductor.name();
                            chat.set_conductor(conductor);
                            self.notice(format!(
                                "Chat: {name} (its session opens with your next message; quorum's tools are handed to it over MCP)"
                            ));
                        }
                        Err(e) => self.error(format!("/model {arg}: {e}")),
                    }
                }
                (false, Some(chat)) => {
                    match crate::llm::select::from_spec(
                        arg,
                        self.base_url.as_deref(),
                        &super::config::env_var,
                    ) {
                        Ok(model) => {
                            let name = model.name();
                            chat.set_model(model);
                            self.notice(format!("Chat model: {name}"));
                        }
                        Err(e) => self.error(format!("/model: {e}")),
                    }
                }
                (false, None) => {
                    self.error("/model: restart quorum with --model SPEC to start a chat")
                }
            },
            other => self.error(format!("unknown command /{other}; /help lists them")),
        }
    }

    /// `/record FILE`: records this session's events from now on.
    fn record(&self, path: &str) {
        if path.is_empty() {
            return self.error("/record FILE: give the file to record to");
        }
        if let Some(current) = self.emitter.recording() {
            return self.notice(format!("already recording to {}", current.display()));
        }
        let header = crate::transcript::Header::now(self.dispatcher.root().path(), self.terminal);
        match crate::transcript::Recorder::create(std::path::Path::new(path), &header) {
            Ok(recorder) => {
                let shown = recorder.path().display().to_string();
                match self.emitter.record(recorder) {
                    Ok(()) => self.notice(format!("recording to {shown}")),
                    Err(current) => {
                        self.notice(format!("already recording to {}", current.display()))
                    }
                }
            }
            Err(e) => self.error(format!("cannot record to {path}: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The commands the composer completes are the ones `/help` lists.
    #[test]
    fn help_lists_every_completed_command() {
        for name in crate::event::SLASH_COMMANDS {
            assert!(HELP.contains(&format!("/{name}")), "/help lacks /{name}");
        }
        let listed = regex::Regex::new(r"/([a-z]+)").unwrap();
        for c in listed.captures_iter(HELP.split("`@NAME").next().unwrap()) {
            assert!(
                crate::event::SLASH_COMMANDS.contains(&&c[1]),
                "/{} is not completed",
                &c[1]
            );
        }
    }

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
