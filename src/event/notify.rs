//! Word for the person when something needs them or is done (`[notify]`):
//! the kinds of notification, what one says, and [`Watch`], which reads
//! them off the event stream. Pure: no I/O, no clock. The engine runs
//! `[notify] command` for them (`engine::notify`); the screen sends them
//! to the desktop through the terminal (`tui::notify`).

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
            Event::TaskReported { task_id } => {
                self.unreported.remove(task_id);
            }
            Event::TurnStarted => (self.chat_busy, self.ran) = (true, true),
            Event::TurnEnded { .. } => self.chat_busy = false,
            Event::ChatReset => self.unreported.clear(),
            Event::ChatActivity { activity } => out.extend(self.chat_activity(activity)),
            Event::Error { text } => out.push(Notification::new(NotifyKind::Error, text)),
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
        let busy = self.chat_busy
            || !self.unreported.is_empty()
            || self.calls.values().any(|c| c.running);
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
