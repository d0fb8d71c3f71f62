//! Continuing a recorded session: what its events say the new process
//! must carry on with. The chat model's context (the messages as they were
//! sent, after the last `/new`), the calls that were still running when
//! quorum ended (they are marked interrupted), the background reports the
//! model never got, and where the session clock stood.

use std::collections::{HashMap, HashSet};

use crate::event::{Activity, ChatEntry, Event, Stamped, StopReason};
use crate::llm::Message;
use crate::model_loop::chat::message_of;

/// A call that was running when the recorded session ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Interrupted {
    pub call_id: String,
    pub task_id: Option<String>,
    pub agent: String,
    /// What its agent had written since its last tool call: the report so
    /// far.
    pub partial: String,
}

/// What a recorded session leaves to the process that continues it.
#[derive(Debug, Default)]
pub struct Continued {
    /// The chat model's context, rebuilt and fitted to the budget.
    pub context: Vec<Message>,
    /// Turns of the conversation left out of `context` (the oldest).
    pub dropped_turns: usize,
    /// Calls that were running, in the order they started.
    pub interrupted: Vec<Interrupted>,
    /// A chat turn had started and not ended.
    pub open_turn: bool,
    /// Batches that had not finished: their id, and their tasks' call ids.
    pub open_batches: Vec<(String, Vec<String>)>,
    /// Background tasks that finished but whose report the chat model
    /// never got.
    pub undelivered: Vec<String>,
    /// The last event's time, ms: the continued session's clock goes on
    /// from here.
    pub last_t: u64,
}

/// The tool result a call that never returned gets in the rebuilt context.
pub const NEVER_RETURNED: &str = "error: interrupted: quorum ended before this call returned; \
its task, if it had one, is marked interrupted (`subagent_status` with `retry: true` runs it again)";

impl Continued {
    /// Reads `events` (a whole recorded session); the context keeps at
    /// most `budget` chars of the newest turns.
    pub fn of(events: &[Stamped], budget: u64) -> Self {
        let mut read = Reading::default();
        for stamped in events {
            read.take(stamped);
        }
        read.continued(budget)
    }

    /// What the chat model is told before the person's next message, once.
    pub fn note(&self) -> Option<String> {
        let tasks: Vec<String> = self
            .interrupted
            .iter()
            .filter_map(|c| c.task_id.as_ref().map(|t| format!("{t} ({})", c.agent)))
            .collect();
        let calls = self.interrupted.len() - tasks.len();
        if tasks.is_empty() && calls == 0 && self.dropped_turns == 0 {
            return None;
        }
        let mut note = String::from(
            "[automated message] quorum ended and this session was continued in a new process.",
        );
        if !tasks.is_empty() {
            note.push_str(&format!(
                " These background tasks were running and were interrupted: {}. \
                 Their partial output is in `subagent_status`; `subagent_status` with \
                 `task_id` and `retry: true` runs one again on its agent's session.",
                tasks.join(", ")
            ));
        }
        if calls > 0 {
            note.push_str(&format!(
                " {calls} sub-agent call(s) of the last turn were interrupted before they returned."
            ));
        }
        if self.dropped_turns > 0 {
            note.push_str(&format!(
                " The {} oldest turn(s) of the conversation no longer fit the context and were left out.",
                self.dropped_turns
            ));
        }
        note.push_str("\n\n");
        Some(note)
    }
}

/// A recorded session as it is read, event by event.
#[derive(Default)]
struct Reading<'a> {
    /// The chat model's context since the last `/new`.
    context: Vec<&'a ChatEntry>,
    /// Running calls by call id, and their order.
    running: HashMap<&'a str, Interrupted>,
    order: Vec<&'a str>,
    ordered: HashSet<&'a str>,
    finished_tasks: Vec<&'a str>,
    reported: HashSet<&'a str>,
    /// Batches (their tasks' call ids), and those not finished.
    batches: Vec<(&'a str, Vec<&'a str>)>,
    open_batches: HashSet<&'a str>,
    task_of: HashMap<&'a str, &'a str>,
    agent_of: HashMap<&'a str, &'a str>,
    open_turn: bool,
    last_t: u64,
}

impl<'a> Reading<'a> {
    /// Takes in one event.
    fn take(&mut self, stamped: &'a Stamped) {
        self.last_t = self.last_t.max(stamped.t);
        match &stamped.event {
            Event::ChatMessage { message } => self.context.push(message),
            Event::ChatReset => self.context.clear(),
            Event::TurnStarted => self.open_turn = true,
            Event::TurnEnded { .. } => self.open_turn = false,
            started @ Event::SubagentStarted { .. } => self.started(started),
            Event::SubagentBackgrounded { call_id, task_id } => {
                // The call went on as a background task.
                self.task_of.insert(call_id, task_id);
                if let Some(call) = self.running.get_mut(call_id.as_str()) {
                    call.task_id = Some(task_id.clone());
                }
            }
            Event::SubagentFollowup { call_id, .. } => self.followup(call_id),
            Event::SubagentActivity { call_id, activity } => {
                if let Some(call) = self.running.get_mut(call_id.as_str()) {
                    match activity {
                        Activity::MessageChunk { text } => call.partial.push_str(text),
                        Activity::ToolCall { .. } => call.partial.clear(),
                        _ => {}
                    }
                }
            }
            Event::SubagentFinished {
                call_id,
                stop_reason,
                ..
            } => {
                self.running.remove(call_id.as_str());
                // An interrupted task is not a report: the model was
                // told of it when the session was continued.
                if let Some(task_id) = self.task_of.get(call_id.as_str())
                    && *stop_reason != StopReason::Interrupted
                {
                    self.finished_tasks.push(task_id);
                }
            }
            Event::TaskReported { task_id } => {
                self.reported.insert(task_id);
            }
            Event::BatchStarted { batch_id, .. } => {
                self.batches.push((batch_id, Vec::new()));
                self.open_batches.insert(batch_id);
            }
            Event::BatchFinished { batch_id, .. } => {
                self.open_batches.remove(batch_id.as_str());
            }
            _ => {}
        }
    }

    /// A call started (`subagent_started`): running, in its batch.
    fn started(&mut self, started: &'a Event) {
        let Event::SubagentStarted {
            call_id,
            task_id,
            agent,
            batch_id,
            ..
        } = started
        else {
            return;
        };
        self.running.insert(
            call_id,
            Interrupted {
                call_id: call_id.clone(),
                task_id: task_id.clone(),
                agent: agent.name().to_string(),
                partial: String::new(),
            },
        );
        if self.ordered.insert(call_id) {
            self.order.push(call_id);
        }
        self.agent_of.insert(call_id, agent.name());
        if let Some(task_id) = task_id {
            self.task_of.insert(call_id, task_id);
        }
        if let Some(batch) = batch_id
            && let Some((_, calls)) = self.batches.iter_mut().find(|(b, _)| b == batch)
        {
            calls.push(call_id);
        }
    }

    /// A finished task runs again: it is running once more.
    fn followup(&mut self, call_id: &'a str) {
        if let Some(task_id) = self.task_of.get(call_id) {
            self.finished_tasks.retain(|t| t != task_id);
            self.reported.remove(task_id);
        }
        let (task_of, agent_of) = (&self.task_of, &self.agent_of);
        self.running.entry(call_id).or_insert_with(|| Interrupted {
            call_id: call_id.to_string(),
            task_id: task_of.get(call_id).map(|t| t.to_string()),
            agent: agent_of.get(call_id).unwrap_or(&"").to_string(),
            partial: String::new(),
        });
        if self.ordered.insert(call_id) {
            self.order.push(call_id);
        }
    }

    /// What the whole session leaves: the calls still running are
    /// interrupted, the finished tasks not reported are undelivered, and
    /// the context is fitted to `budget`.
    fn continued(mut self, budget: u64) -> Continued {
        let interrupted = self
            .order
            .iter()
            .filter_map(|id| self.running.remove(id))
            .collect::<Vec<_>>();
        let mut undelivered: Vec<String> = Vec::new();
        for task_id in self.finished_tasks {
            if !self.reported.contains(task_id) && !undelivered.iter().any(|t| t == task_id) {
                undelivered.push(task_id.to_string());
            }
        }
        let (context, dropped_turns) = fit(repair(&self.context), budget);
        let open = &self.open_batches;
        Continued {
            context,
            dropped_turns,
            interrupted,
            open_turn: self.open_turn,
            open_batches: self
                .batches
                .into_iter()
                .filter(|(b, _)| open.contains(b))
                .map(|(b, calls)| (b.to_string(), calls.into_iter().map(String::from).collect()))
                .collect(),
            undelivered,
            last_t: self.last_t,
        }
    }
}

/// The recorded context as the model gets it, with an answer for every
/// tool call: a call that never returned (quorum ended while it ran) gets
/// [`NEVER_RETURNED`], right after the answers its message did get.
fn repair(entries: &[&ChatEntry]) -> Vec<Message> {
    let answered: HashSet<&str> = entries
        .iter()
        .filter_map(|e| match e {
            ChatEntry::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    let mut out = Vec::with_capacity(entries.len());
    // Calls of the last assistant message still to be answered.
    let mut owed: Vec<(String, String)> = Vec::new();
    let settle = |out: &mut Vec<Message>, owed: &mut Vec<(String, String)>| {
        for (id, name) in owed.drain(..) {
            out.push(Message::Tool {
                tool_call_id: id,
                name,
                content: NEVER_RETURNED.to_string(),
            });
        }
    };
    for entry in entries {
        if !matches!(entry, ChatEntry::Tool { .. }) {
            settle(&mut out, &mut owed);
        }
        if let ChatEntry::Assistant { tool_calls, .. } = entry {
            owed = tool_calls
                .iter()
                .filter(|c| !answered.contains(c.id.as_str()))
                .map(|c| (c.id.clone(), c.name.clone()))
                .collect();
        }
        out.push(message_of(entry));
    }
    settle(&mut out, &mut owed);
    out
}

fn chars(m: &Message) -> u64 {
    let n = match m {
        Message::User { content } => content.len(),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            content.len()
                + tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.len())
                    .sum::<usize>()
        }
        Message::Tool { content, .. } => content.len(),
    };
    n as u64
}

/// The newest whole turns (each from a person's message to the next) that
/// fit in `budget` chars, the last turn always; and how many were left out.
fn fit(messages: Vec<Message>, budget: u64) -> (Vec<Message>, usize) {
    let starts: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| matches!(m, Message::User { .. }))
        .map(|(i, _)| i)
        .collect();
    let total: u64 = messages.iter().map(chars).sum();
    if total <= budget || starts.len() <= 1 {
        return (messages, 0);
    }
    let mut size = total;
    let mut cut = 0;
    let mut dropped = 0;
    // Drop turns from the oldest until the rest fits (keep the last one).
    for window in starts.windows(2) {
        if size <= budget {
            break;
        }
        let (from, to) = (window[0], window[1]);
        size -= messages[cut.max(from)..to].iter().map(chars).sum::<u64>();
        // Whatever came before the first person's message goes too.
        cut = to;
        dropped += 1;
    }
    (messages.into_iter().skip(cut).collect(), dropped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{AgentRef, ChatToolCall, build};

    fn at(t: u64, event: Event) -> Stamped {
        Stamped::new(t, event)
    }

    fn chat(message: ChatEntry) -> Event {
        Event::ChatMessage { message }
    }

    fn user(text: &str) -> ChatEntry {
        ChatEntry::User {
            content: text.into(),
        }
    }

    fn calls(text: &str, ids: &[&str]) -> ChatEntry {
        ChatEntry::Assistant {
            content: text.into(),
            tool_calls: ids
                .iter()
                .map(|id| ChatToolCall {
                    id: id.to_string(),
                    name: "subagent".into(),
                    arguments: "{}".into(),
                })
                .collect(),
        }
    }

    fn result(id: &str, text: &str) -> ChatEntry {
        ChatEntry::Tool {
            tool_call_id: id.into(),
            name: "subagent".into(),
            content: text.into(),
        }
    }

    #[test]
    fn the_context_is_the_messages_after_the_last_reset_with_every_call_answered() {
        let events = vec![
            at(1, chat(user("old"))),
            at(2, Event::ChatReset),
            at(3, chat(user("fix it"))),
            at(4, chat(calls("on it", &["a", "b"]))),
            at(5, chat(result("a", "{\"task_id\":\"t1\"}"))),
            // quorum died while `b` ran.
        ];
        let c = Continued::of(&events, 1_000_000);
        assert_eq!(c.last_t, 5);
        assert_eq!(c.context.len(), 4, "{:?}", c.context);
        assert_eq!(c.context[0], message_of(&user("fix it")));
        assert!(matches!(&c.context[2], Message::Tool { tool_call_id, .. } if tool_call_id == "a"));
        assert!(
            matches!(&c.context[3], Message::Tool { tool_call_id, content, .. } if tool_call_id == "b" && content == NEVER_RETURNED)
        );
    }

    #[test]
    fn running_calls_are_interrupted_with_their_report_so_far() {
        let agent = || AgentRef::Acp("fast".into());
        let events = vec![
            at(0, Event::TurnStarted),
            at(1, build::started("call-1", agent()).task("t1").event()),
            at(2, build::chunk("call-1", "looking… ")),
            at(3, build::started("call-2", agent()).task("t2").event()),
            at(4, build::finished("call-2", "done").event()),
            at(5, build::chunk("call-1", "half of it")),
            at(6, build::started("call-3", agent()).task("t3").event()),
            at(7, build::finished("call-3", "also done").event()),
            at(
                8,
                Event::TaskReported {
                    task_id: "t3".into(),
                },
            ),
            // A foreground call that went on in the background: a task.
            at(9, build::started("call-4", agent()).event()),
            at(10, build::backgrounded("call-4", "t4")),
            at(11, build::started("call-5", agent()).event()),
            at(12, build::backgrounded("call-5", "t5")),
            at(13, build::finished("call-5", "five").event()),
        ];
        let c = Continued::of(&events, 1_000_000);
        assert!(c.open_turn);
        assert_eq!(c.interrupted.len(), 2);
        assert_eq!(c.interrupted[0].task_id.as_deref(), Some("t1"));
        assert_eq!(c.interrupted[0].partial, "looking… half of it");
        assert_eq!(c.interrupted[1].task_id.as_deref(), Some("t4"));
        // t3's report was delivered; t2's and t5's never were.
        assert_eq!(c.undelivered, vec!["t2".to_string(), "t5".to_string()]);
        let note = c.note().unwrap();
        assert!(note.contains("interrupted: t1 (fast)"), "{note}");
    }

    #[test]
    fn the_oldest_turns_go_when_the_conversation_no_longer_fits() {
        let long = "x".repeat(100);
        let events: Vec<Stamped> = (0..5)
            .flat_map(|i| {
                [
                    at(i, chat(user(&format!("q{i} {long}")))),
                    at(i, chat(calls(&format!("a{i}"), &[]))),
                ]
            })
            .collect();
        let c = Continued::of(&events, 250);
        assert_eq!(c.dropped_turns, 3);
        assert_eq!(c.context.len(), 4);
        assert!(matches!(&c.context[0], Message::User { content } if content.starts_with("q3")));
        assert!(c.note().unwrap().contains("3 oldest turn(s)"));
        // The last turn stays, however long.
        let c = Continued::of(&events, 10);
        assert_eq!(c.dropped_turns, 4);
        assert!(matches!(&c.context[0], Message::User { content } if content.starts_with("q4")));
    }
}
