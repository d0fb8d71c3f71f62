//! `/agents NAME`, `/mode NAME MODE` and `/set NAME OPTION VALUE`: what an
//! agent announced of its session (its commands, modes and config options),
//! and changing its mode and options on its latest session. What was
//! announced is the agent connection's, asked through the dispatcher.

use super::ops::Ops;
use crate::event::{Event, NoticeLevel};

impl Ops {
    /// `/agents NAME`: the agent, and what it announced of its latest
    /// session.
    pub(super) fn agent_info(&self, name: &str) {
        let spec = match self.dispatcher.registry().get(name) {
            Ok(spec) => spec,
            Err(e) => {
                return self.emitter.emit(Event::Error {
                    text: format!("/agents: {e}"),
                });
            }
        };
        let mut text = match spec.description.as_str() {
            "" => name.to_string(),
            d => format!("{name} ({d})"),
        };
        match self.dispatcher.announced(name) {
            Some((session, announced)) => {
                text.push_str(&format!(", session {session}:"));
                for line in announced.describe() {
                    text.push('\n');
                    text.push_str(&line.replace("NAME", name));
                }
            }
            None => text.push_str(&format!(
                ": no session open yet, so nothing announced; its commands, modes and options \
                 come with its first session (`@{name} message`)"
            )),
        }
        self.emitter.emit(Event::Notice {
            level: NoticeLevel::Info,
            text,
        });
    }

    /// `/mode NAME MODE` and `/set NAME OPTION VALUE` (`command`: `mode`
    /// or `set`, written as `usage`).
    pub(super) fn agent_setting(&self, command: &str, usage: &str, arg: &str) {
        let words: Vec<&str> = arg.split_whitespace().collect();
        let usage = match command {
            "mode" => {
                format!("{usage}: give the agent and the mode (/agents NAME lists its modes)")
            }
            _ => format!(
                "{usage}: give the agent, the option and its value (/agents NAME lists its options)"
            ),
        };
        let wanted = if command == "mode" { 2 } else { 3 };
        if words.len() != wanted {
            return self.emitter.emit(Event::Error { text: usage });
        }
        self.emitter.emit(Event::UserMessage {
            text: format!("/{command} {}", words.join(" ")),
        });
        let (dispatcher, emitter) = (self.dispatcher.clone(), self.emitter.clone());
        let words: Vec<String> = words.into_iter().map(str::to_string).collect();
        let command = command.to_string();
        tokio::spawn(async move {
            let done = match &words[..] {
                [agent, mode] if command == "mode" => dispatcher.set_mode(agent, mode).await,
                [agent, option, value] => dispatcher.set_option(agent, option, value).await,
                _ => return,
            };
            emitter.emit(match done {
                Ok(text) => Event::Notice {
                    level: NoticeLevel::Info,
                    text,
                },
                Err(e) => Event::Error {
                    text: format!("/{command}: {e}"),
                },
            });
        });
    }
}
