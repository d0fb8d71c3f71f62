//! The slash commands, run: each [`Slash`] of the table in
//! [`crate::event::SLASH_COMMANDS`] to its handler. `/agents NAME`, `/mode`
//! and `/set` are in `settings`.

use super::ops::{Ops, offer_choices};
use crate::event::{Event, NoticeLevel, Slash, slash_command, slash_help};
use crate::subagent::dispatch::isolate::Discarded;
use crate::subagent::dispatch::{FollowUp, Reply};

/// What `/help` says after the commands: `@NAME` and the keys.
const MORE_HELP: &str = "`@NAME message` calls an agent directly (`@NAME!` background, `@NAME?` \
review, `@NAME+` in a git worktree of its own on a new branch, `@A,B,C? message` one review by \
several agents, with their quorum; `@A,B,C+ message` best of N, each in its worktree). Keys: Esc \
cancels the running turn or call, 1-9 answer a permission request, ↑/↓ recall the messages you \
sent, Tab completes @NAME and /commands (after @NAME /, the agent's own; after /model, the chats), \
PgUp/PgDn scroll, Alt+↑/↓ focus a box or a review quorum and Enter opens it (a quorum: its findings view; Esc closes), Ctrl+T shows the tasks, Tab focuses them \
(↑/↓ select, Enter open, m message, c cancel, Esc back), Ctrl+C quits.";

/// `/help`: the table's commands, then `@NAME` and the keys.
pub(super) fn help() -> String {
    format!("{} {MORE_HELP}", slash_help())
}

impl Ops {
    /// A slash command (`typed`: what follows the slash).
    pub(super) fn slash(&self, typed: &str) {
        let (word, arg) = typed.split_once(char::is_whitespace).unwrap_or((typed, ""));
        let arg = arg.trim();
        // `/` alone is `/help`.
        let Some((command, usage)) = slash_command(if word.is_empty() { "help" } else { word })
        else {
            return self.error(format!("unknown command /{word}; /help lists them"));
        };
        match command.command {
            Slash::Help => self.notice(help()),
            Slash::Agents if arg.is_empty() => self.list_agents(),
            Slash::Agents => self.agent_info(arg),
            Slash::Mode | Slash::Set => self.agent_setting(command.name, usage, arg),
            Slash::Tasks => self.list_tasks(),
            Slash::Spend => self.spend(),
            Slash::Record => self.record(usage, arg),
            Slash::Msg => self.message_task(usage, arg),
            Slash::Retry => self.retry(usage, arg),
            Slash::Merge => self.merge(usage, arg, usage != command.usage),
            Slash::Discard => self.discard(usage, arg),
            Slash::Cancel => self.cancel(arg),
            Slash::New => self.new_conversation(),
            Slash::Model => self.model(arg),
        }
    }

    /// `/agents`: the agents installed.
    fn list_agents(&self) {
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

    /// `/tasks`: the tasks on the board.
    /// `/spend`: the session's spending, agent by agent, and its caps.
    fn spend(&self) {
        let text = self.emitter.board(|b| {
            let l = b.ledger();
            let line = |s: &crate::event::budget::Spent| {
                format!("{} · {} tokens", s.cost_text(), s.tokens)
            };
            let caps = l.caps();
            let mut caps_said = Vec::new();
            if let Some(c) = caps.session_usd {
                caps_said.push(format!("session ${c:.2}"));
            }
            if let Some(c) = caps.task_usd {
                caps_said.push(format!("each task ${c:.2}"));
            }
            if let Some(c) = caps.tokens {
                caps_said.push(format!("{c} tokens"));
            }
            let mut text = format!("Spent: {}", line(&l.spent()));
            text.push_str(&match caps_said.is_empty() {
                true => " (no cap: --max-cost, --max-tokens, [budget])".to_string(),
                false => format!(" (caps: {})", caps_said.join(", ")),
            });
            for (agent, s) in l.by_agent() {
                text.push_str(&format!("\n  {agent}: {}", line(s)));
            }
            if l.spent().estimated {
                text.push_str("\n  ~: estimated from a price table ([prices], docs/budget.md)");
            }
            text
        });
        self.notice(&text);
    }

    fn list_tasks(&self) {
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

    /// `/msg TASK message`: a follow-up turn for a task's agent.
    fn message_task(&self, usage: &str, arg: &str) {
        let (task, message) = arg.split_once(char::is_whitespace).unwrap_or((arg, ""));
        if task.is_empty() || message.trim().is_empty() {
            return self.error(format!("{usage}: give the task id and the message"));
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

    /// `/retry TASK`: an interrupted or failed task, run again.
    fn retry(&self, usage: &str, arg: &str) {
        if arg.is_empty() {
            return self.error(format!(
                "{usage}: give the id of an interrupted or failed task (/tasks lists them)"
            ));
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

    /// `/merge TASK` (`force`: `/merge! TASK`): a worktree task's branch
    /// into the person's.
    fn merge(&self, usage: &str, arg: &str, force: bool) {
        let spelling = usage.split(' ').next().unwrap_or(usage);
        if arg.is_empty() {
            return self.error(format!(
                "{usage}: give the worktree task's id (or its branch)"
            ));
        }
        self.emitter.emit(Event::UserMessage {
            text: format!("{spelling} {arg}"),
        });
        // `/merge best`: the last arena's winner.
        let picked = self.dispatcher.arena_pick(arg);
        match picked.and_then(|branch| self.dispatcher.merge(&branch, force)) {
            Ok(text) => self.notice(text),
            Err(e) => self.error(format!("{spelling} {arg}: {e}")),
        }
    }

    /// `/discard TASK`: a worktree task's worktree and branch, removed
    /// (asked once when it has commits never merged).
    fn discard(&self, usage: &str, arg: &str) {
        if arg.is_empty() {
            return self.error(format!(
                "{usage}: give the worktree task's id (or its branch)"
            ));
        }
        self.emitter.emit(Event::UserMessage {
            text: format!("/discard {arg}"),
        });
        if arg == "others" {
            return self.discard_others();
        }
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

    /// `/discard others`: every writer of the last arena but its winner,
    /// asking once for those with commits never merged.
    fn discard_others(&self) {
        match self.dispatcher.discard_others() {
            Ok(d) => {
                if !d.done.is_empty() {
                    self.notice(format!(
                        "{}: worktrees and branches removed",
                        d.done.join(", ")
                    ));
                }
                if !d.asked.is_empty() {
                    let names: Vec<String> = d
                        .asked
                        .iter()
                        .map(|(b, n)| format!("{b} ({n} commit{})", if *n == 1 { "" } else { "s" }))
                        .collect();
                    self.emitter.emit(Event::Notice {
                        level: NoticeLevel::Warning,
                        text: format!(
                            "{} never merged: /discard others again to throw them away with \
                             their worktrees",
                            names.join(", ")
                        ),
                    });
                }
                if d.done.is_empty() && d.asked.is_empty() {
                    self.notice("no other writer's branch is left".to_string());
                }
            }
            Err(e) => self.error(format!("/discard others: {e}")),
        }
    }

    /// `/cancel [TASK]`: a task or call, else the running turn, else every
    /// call.
    fn cancel(&self, arg: &str) {
        if arg.is_empty() {
            let turn = self.chat.as_ref().is_some_and(|c| c.cancel());
            if !turn {
                self.dispatcher.cancel_all();
            }
        } else if !self.dispatcher.cancel(arg) {
            self.error(format!("/cancel: no running task or call {arg:?}"));
        }
    }

    /// `/new`: a new conversation; the agents' sessions are forgotten and
    /// closed.
    fn new_conversation(&self) {
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

    /// `/model [SPEC]`: the chat, shown with the choices, or changed
    /// (`acp:NAME`: a conductor).
    fn model(&self, arg: &str) {
        if arg.is_empty() {
            let chat = self.chat.as_ref().map(|c| c.model_name());
            let base_url = self.base_url.clone();
            return offer_choices(&self.dispatcher, &self.emitter, base_url, Some(chat));
        }
        let Some(chat) = &self.chat else {
            return self.error(format!(
                "/model: this session has no chat; restart quorum with --model {arg} to start one"
            ));
        };
        if crate::llm::select::is_none(arg) {
            return self.error(
                "/model none: the chat stays until quorum restarts; --model none (or [model] \
                 name = \"none\") starts quorum without one",
            );
        }
        if let Some(name) = super::config::conductor_of(arg) {
            return match (self.conductors)(name) {
                Ok(conductor) => {
                    let name = conductor.name();
                    chat.set_conductor(conductor);
                    // A conductor reports its own cost.
                    self.reprice(None);
                    self.notice(format!(
                        "Chat: {name} (its session opens with your next message; quorum's tools are handed to it over MCP)"
                    ));
                }
                Err(e) => self.error(format!("/model {arg}: {e}")),
            };
        }
        match crate::llm::select::from_spec(arg, self.base_url.as_deref(), &super::config::env_var)
        {
            Ok(model) => {
                let name = model.name();
                chat.set_model(model);
                self.reprice(Some(&name));
                self.notice(format!("Chat model: {name}"));
            }
            Err(e) => self.error(format!("/model: {e}")),
        }
    }

    /// The chat's price for a new chat model (`None`: a conductor, which
    /// reports its cost), sent with the agents' as `prices_set`.
    fn reprice(&self, model: Option<&str>) {
        let mut prices = self.emitter.board(|b| b.prices().clone());
        let before = prices.clone();
        match model.and_then(|m| super::prices::of_model(m, &self.prices)) {
            Some(price) => prices.insert("chat".to_string(), price),
            None => prices.remove("chat"),
        };
        if prices != before {
            self.emitter.emit(Event::PricesSet { prices });
        }
    }

    /// `/record FILE`: records this session's events from now on.
    fn record(&self, usage: &str, path: &str) {
        if path.is_empty() {
            return self.error(format!("{usage}: give the file to record to"));
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

    /// `/help` is the table's sentence, then `@NAME` and the keys, as it
    /// was when it was written by hand.
    #[test]
    fn help_is_the_tables_commands_then_mentions_and_keys() {
        let help = help();
        assert!(help.starts_with("Commands: /agents [NAME] (the agents you can call;"));
        assert!(
            help.contains(" · /record FILE (record this session) · /help. `@NAME message` calls")
        );
        assert!(help.ends_with("Esc back), Ctrl+C quits."));
    }
}
