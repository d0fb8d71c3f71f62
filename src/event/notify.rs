//! Word for the person when something needs them or is done (`[notify]`):
//! the kinds of notification, what one says, and [`Watch`], which reads
//! them off the event stream. Pure: no I/O, no clock. The engine runs
//! `[notify] command` for them (`engine::notify`); the screen sends them
//! to the desktop through the terminal (`tui::notify`).
//!
//! `budget` comes of the spending ledger's events: a cap reached, and the
//! 80 % warning ([`Notification::budget`], with what was spent).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{Activity, Event, TaskState};

/// What a notification is about: the names `[notify] events` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyKind {
    /// A box (or the chat's conductor) starts waiting for a permission or
    /// an answer: where the bell rings.
    NeedsYou,
    /// A background task finished.
    TaskDone,
    /// The last running task and the chat have finished: once, until
    /// something runs again.
    AllIdle,
    /// An error event.
    Error,
    /// The session's spending reached a cap or its warning (sent by the
    /// budget's events; see [`Notification::budget`]).
    Budget,
}

impl NotifyKind {
    /// Every kind: the default of `[notify] events`.
    pub const ALL: [NotifyKind; 5] = [
        NotifyKind::NeedsYou,
        NotifyKind::TaskDone,
        NotifyKind::AllIdle,
        NotifyKind::Error,
        NotifyKind::Budget,
    ];

    /// Its name in `[notify] events` and in the JSON's `event`.
    pub fn as_str(self) -> &'static str {
        match self {
            NotifyKind::NeedsYou => "needs_you",
            NotifyKind::TaskDone => "task_done",
            NotifyKind::AllIdle => "all_idle",
            NotifyKind::Error => "error",
            NotifyKind::Budget => "budget",
        }
    }
}

/// One notification: what `[notify] command` reads on its stdin as one
/// JSON object (`event`, `session`, `task`, `agent`, `text`, `cost`; what
/// does not apply is `null`), and what the desktop notification says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    pub event: NotifyKind,
    /// The session: its transcript's name (`null` when not recorded).
    pub session: Option<String>,
    /// The background task's id (`t3`).
    pub task: Option<String>,
    /// The agent: its name, `internal`, or `chat`.
    pub agent: Option<String>,
    /// What happened, in a line.
    pub text: String,
    /// In US dollars as the agents report it: a task's cost for
    /// `task_done`, the session's for `all_idle` and `budget`.
    pub cost: Option<f64>,
}

/// The longest `text` a notification carries (characters).
pub const MAX_TEXT: usize = 200;

impl Notification {
    fn new(event: NotifyKind, text: impl AsRef<str>) -> Self {
        Self {
            event,
            session: None,
            task: None,
            agent: None,
            text: one_line(text.as_ref()),
            cost: None,
        }
    }

    /// The budget's word (a cap reached, its warning): for the budget's
    /// events to map to when they exist.
    pub fn budget(text: impl AsRef<str>, cost: Option<f64>) -> Self {
        Self {
            cost,
            ..Self::new(NotifyKind::Budget, text)
        }
    }

    /// The one-line text a desktop notification shows: `quorum: TEXT`.
    pub fn headline(&self) -> String {
        format!("quorum: {}", self.text)
    }
}

/// `text` on one line (its runs of blanks and control characters one
/// space), at most [`MAX_TEXT`] characters with `…` after them when cut.
/// Not yet made safe for a terminal: what writes it to one does that.
fn one_line(text: &str) -> String {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect();
    let line = words.join(" ");
    match line.char_indices().nth(MAX_TEXT) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// What [`Watch`] knows of one call.
#[derive(Debug, Clone, Default)]
struct Call {
    agent: String,
    task: Option<String>,
    running: bool,
    waiting: bool,
    /// The call's cost as its agent last reported it, and its part of the
    /// session's.
    cost: Option<f64>,
    share: Option<f64>,
}

/// Reads notifications off the event stream, in order: feed it every
/// event ([`Watch::observe`]); what it returns is due now.
#[derive(Debug, Clone, Default)]
pub struct Watch {
    calls: BTreeMap<String, Call>,
    /// The chat is in a turn.
    chat_busy: bool,
    /// The chat's conductor waits for an answer.
    chat_asking: bool,
    /// The session has a chat, which is told each background task's report
    /// in a turn of its own: a finished task whose report it was not told
    /// yet is work still to come.
    chat: bool,
    unreported: BTreeSet<String>,
    /// Something ran since the last `all_idle`.
    ran: bool,
}

impl Watch {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `event` can matter to a [`Watch`]: the bus hands a watcher
    /// only these (no streamed text).
    pub fn wants(event: &Event) -> bool {
        matches!(
            event,
            Event::SessionInfo { .. }
                | Event::SubagentStarted { .. }
                | Event::SubagentFollowup { .. }
                | Event::SubagentBackgrounded { .. }
                | Event::SubagentFinished { .. }
                | Event::TaskProgress { .. }
                | Event::TaskReported { .. }
                | Event::TurnStarted
                | Event::TurnEnded { .. }
                | Event::ChatReset
                | Event::ChatActivity { .. }
                | Event::Error { .. }
                | Event::BudgetWarning { .. }
                | Event::BudgetReached { .. }
        )
    }

    /// The notifications `event` makes due.
    pub fn observe(&mut self, event: &Event) -> Vec<Notification> {
        let mut out = Vec::new();
        match event {
            Event::SessionInfo { model, .. } => self.chat = model.is_some(),
            Event::SubagentStarted {
                call_id,
                task_id,
                agent,
                ..
            } => {
                let call = Call {
                    agent: agent.name().to_string(),
                    task: task_id.clone(),
                    running: true,
                    ..Call::default()
                };
                self.calls.insert(call_id.clone(), call);
                self.ran = true;
            }
            Event::SubagentFollowup { call_id, .. } => {
                if let Some(c) = self.calls.get_mut(call_id) {
                    c.running = true;
                    self.ran = true;
                }
            }
            Event::SubagentBackgrounded { call_id, task_id } => {
                if let Some(c) = self.calls.get_mut(call_id) {
                    c.task = Some(task_id.clone());
                }
            }
            Event::TaskProgress {
                call_id, summary, ..
            } => out.extend(self.progress(call_id, summary)),
            Event::SubagentFinished {
                call_id,
                output,
                stop_reason,
                ..
            } => out.extend(self.finished(call_id, output, stop_reason.as_str())),
            // The chat is told a report as its turn starts (just before
            // the turn's `turn_started`): it is busy from here.
            Event::TaskReported { task_id } => {
                self.unreported.remove(task_id);
                self.chat_busy = true;
            }
            Event::TurnStarted => (self.chat_busy, self.ran) = (true, true),
            Event::TurnEnded { .. } => self.chat_busy = false,
            Event::ChatReset => self.unreported.clear(),
            Event::ChatActivity { activity } => out.extend(self.chat_activity(activity)),
            Event::Error { text } => out.push(Notification::new(NotifyKind::Error, text)),
            Event::BudgetWarning {
                unit,
                spent,
                cap,
                estimated,
            } => out.push(Notification::budget(
                super::budget::warning_text(*unit, (*spent, *estimated), *cap),
                (*unit == super::budget::Unit::Usd).then_some(*spent),
            )),
            Event::BudgetReached {
                call_id,
                unit,
                spent,
                cap,
                estimated,
            } => out.push(Notification::budget(
                super::budget::reached_text(call_id.as_deref(), *unit, (*spent, *estimated), *cap),
                (*unit == super::budget::Unit::Usd).then_some(*spent),
            )),
            _ => {}
        }
        out.extend(self.idle());
        out
    }

    /// A call's snapshot: it starts waiting for the person (`needs_you`).
    fn progress(&mut self, call_id: &str, summary: &super::Summary) -> Option<Notification> {
        let call = self.calls.get_mut(call_id)?;
        if let Some(cost) = summary.usage.as_ref().and_then(|u| u.cost.as_ref()) {
            call.cost = Some(cost.amount);
        }
        if let Some(cost) = summary.share.as_ref().and_then(|s| s.cost.as_ref()) {
            call.share = Some(cost.amount);
        }
        let waiting = summary.waiting && summary.state == TaskState::Running;
        let started = waiting && !call.waiting;
        call.waiting = waiting;
        if !started {
            return None;
        }
        let what = summary.last_activity.as_deref().unwrap_or("waits for you");
        Some(Notification {
            task: call.task.clone(),
            agent: Some(call.agent.clone()),
            ..Notification::new(
                NotifyKind::NeedsYou,
                format!("{} needs you: {what}", call.agent),
            )
        })
    }

    /// A call ended: a background task's `task_done`.
    fn finished(&mut self, call_id: &str, output: &str, stop: &str) -> Option<Notification> {
        let call = self.calls.get_mut(call_id)?;
        (call.running, call.waiting) = (false, false);
        let task = call.task.clone()?;
        if self.chat {
            self.unreported.insert(task.clone());
        }
        let first = output.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        let text = match stop {
            "end_turn" => format!("{} finished {task}: {first}", call.agent),
            stop => format!("{} ended {task} ({stop}): {first}", call.agent),
        };
        Some(Notification {
            task: Some(task),
            agent: Some(call.agent.clone()),
            cost: call.cost,
            ..Notification::new(NotifyKind::TaskDone, text.trim_end_matches([' ', ':']))
        })
    }

    /// The chat's conductor asks for a permission or an answer.
    fn chat_activity(&mut self, activity: &Activity) -> Option<Notification> {
        let text = match activity {
            Activity::PermissionRequest { title, .. } => title,
            Activity::Elicitation { message, .. } => message,
            Activity::PermissionResolved { .. } | Activity::ElicitationResolved { .. } => {
                self.chat_asking = false;
                return None;
            }
            _ => return None,
        };
        let started = !self.chat_asking;
        self.chat_asking = true;
        started.then(|| Notification {
            agent: Some("chat".into()),
            ..Notification::new(NotifyKind::NeedsYou, format!("the chat needs you: {text}"))
        })
    }

    /// `all_idle`, once, when nothing runs any more and something ran.
    fn idle(&mut self) -> Option<Notification> {
        let busy =
            self.chat_busy || !self.unreported.is_empty() || self.calls.values().any(|c| c.running);
        if busy || !self.ran {
            return None;
        }
        self.ran = false;
        let shares: Vec<f64> = self.calls.values().filter_map(|c| c.share).collect();
        let done = self.calls.values().filter(|c| c.task.is_some()).count();
        Some(Notification {
            cost: (!shares.is_empty()).then(|| shares.iter().sum()),
            ..Notification::new(
                NotifyKind::AllIdle,
                format!("all idle: the chat and every task have finished ({done} tasks)"),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{AgentRef, StopReason, Summary};

    fn started(call: &str, task: Option<&str>) -> Event {
        Event::SubagentStarted {
            call_id: call.into(),
            task_id: task.map(str::to_string),
            agent: AgentRef::Acp("fake".into()),
            input: "slow 1".into(),
            code_review: false,
            background: task.is_some(),
            session: None,
            batch_id: None,
            queued: false,
            max_cost: None,
        }
    }

    fn finished(call: &str) -> Event {
        Event::SubagentFinished {
            call_id: call.into(),
            output: "working\n done".into(),
            stop_reason: StopReason::EndTurn,
            severity: None,
            findings: Vec::new(),
        }
    }

    fn kinds(watch: &mut Watch, events: &[Event]) -> Vec<NotifyKind> {
        events
            .iter()
            .flat_map(|e| watch.observe(e))
            .map(|n| n.event)
            .collect()
    }

    /// A chat that is told each report in a turn of its own: `all_idle`
    /// once, after the last report's turn, not when the tasks end.
    #[test]
    fn all_idle_fires_once_when_the_tasks_and_the_chat_are_done() {
        use NotifyKind::{AllIdle, TaskDone};
        let mut w = Watch::new();
        let events = [
            Event::SessionInfo {
                model: Some("script:x".into()),
                agents: vec![],
            },
            Event::TurnStarted,
            started("c1", Some("t1")),
            started("c2", Some("t2")),
            Event::TurnEnded {
                stop_reason: StopReason::EndTurn,
            },
            finished("c1"),
            // As the chat tells them: the report, then the turn.
            Event::TaskReported {
                task_id: "t1".into(),
            },
            Event::TurnStarted,
            finished("c2"),
            Event::TurnEnded {
                stop_reason: StopReason::EndTurn,
            },
        ];
        assert_eq!(kinds(&mut w, &events), [TaskDone, TaskDone]);
        // The second report's turn: then all is idle, once.
        let last = [
            Event::TaskReported {
                task_id: "t2".into(),
            },
            Event::TurnStarted,
            Event::TurnEnded {
                stop_reason: StopReason::EndTurn,
            },
        ];
        assert_eq!(kinds(&mut w, &last), [AllIdle]);
        assert_eq!(
            kinds(
                &mut w,
                &[Event::TurnEnded {
                    stop_reason: StopReason::EndTurn
                }]
            ),
            []
        );
        // Only after something ran again.
        let again = [started("c3", None), finished("c3")];
        assert_eq!(kinds(&mut w, &again), [AllIdle]);
    }

    #[test]
    fn without_a_chat_the_last_task_ending_is_all_idle() {
        use NotifyKind::{AllIdle, TaskDone};
        let mut w = Watch::new();
        let events = [
            started("c1", Some("t1")),
            started("c2", Some("t2")),
            finished("c2"),
            finished("c1"),
        ];
        assert_eq!(kinds(&mut w, &events), [TaskDone, TaskDone, AllIdle]);
    }

    #[test]
    fn needs_you_once_per_wait_and_errors() {
        let mut w = Watch::new();
        let progress = |waiting| Event::TaskProgress {
            call_id: "c1".into(),
            task_id: Some("t1".into()),
            summary: Summary {
                waiting,
                ..Summary::default()
            },
        };
        let events = [
            started("c1", Some("t1")),
            progress(true),
            progress(true),
            progress(false),
            progress(true),
            Event::Error {
                text: "boom\x1b[31m\nline".into(),
            },
        ];
        let out: Vec<Notification> = events.iter().flat_map(|e| w.observe(e)).collect();
        let got: Vec<NotifyKind> = out.iter().map(|n| n.event).collect();
        use NotifyKind::{Error, NeedsYou};
        assert_eq!(got, [NeedsYou, NeedsYou, Error]);
        assert_eq!(out[0].task.as_deref(), Some("t1"));
        assert_eq!(out[0].agent.as_deref(), Some("fake"));
        // One line, control characters gone (the terminal's writer
        // sanitises the rest).
        assert!(!out[2].text.contains(['\n', '\x1b']), "{:?}", out[2].text);
    }

    #[test]
    fn a_notification_is_one_json_object_with_every_field() {
        let mut n = Notification::budget("80 % of $1.00 spent", Some(0.8));
        n.session = Some("2026-01-01-abc".into());
        let v = serde_json::to_value(&n).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "event": "budget", "session": "2026-01-01-abc", "task": null,
                "agent": null, "text": "80 % of $1.00 spent", "cost": 0.8
            })
        );
        let long = Notification::budget("y".repeat(1000), None);
        assert_eq!(long.text.chars().count(), MAX_TEXT + 1);
        let names: Vec<&str> = NotifyKind::ALL.iter().map(|k| k.as_str()).collect();
        for (k, name) in NotifyKind::ALL.iter().zip(&names) {
            assert_eq!(serde_json::to_value(k).unwrap(), *name);
        }
    }

    #[test]
    fn a_cap_warned_of_or_reached_is_a_budget_notification() {
        let mut w = Watch::default();
        let reached = Event::BudgetReached {
            call_id: None,
            unit: super::super::budget::Unit::Usd,
            spent: 1.2,
            cap: 1.0,
            estimated: false,
        };
        assert!(Watch::wants(&reached));
        let out = w.observe(&reached);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].event, NotifyKind::Budget);
        assert_eq!(
            out[0].text,
            "budget: the session has spent $1.20 of its $1.00 cap"
        );
        assert_eq!(out[0].cost, Some(1.2));
        let warned = w.observe(&Event::BudgetWarning {
            unit: super::super::budget::Unit::Tokens,
            spent: 900.0,
            cap: 1000.0,
            estimated: false,
        });
        assert_eq!(warned[0].event, NotifyKind::Budget);
        assert_eq!(warned[0].cost, None, "tokens are no cost");
    }
}
