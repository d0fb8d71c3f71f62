//! The task board: the one record of every sub-agent call and background
//! task, and the only place their summaries (state, tool count, last
//! activity, verdict, waiting for the person) are computed.
//!
//! The board is pure: it takes in the events a call emits (started,
//! activity, finished) and answers with the snapshot they change, as a
//! `task_progress` event that carries the whole summary. The engine runs
//! every event through one board as it is emitted; the screen copies the
//! snapshots and never counts by itself, so a box and the side panel can't
//! disagree. The transcript reader runs version-1 files (which had no
//! snapshots for calls) through a board too.

use std::collections::{BTreeMap, HashMap};

use crate::event::{
    Activity, AgentRef, ChildState, Cost, Event, Severity, Stamped, StopReason, Summary, TaskState,
    Usage, UsageShare,
    budget::{Price, Spent},
};

/// Longest summary line kept (chars).
const SUMMARY_CHARS: usize = 160;
/// Longest unfinished text line kept while waiting for its end (bytes).
const PARTIAL_BYTES: usize = 512;

/// One call on the board.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub call_id: String,
    pub task_id: Option<String>,
    pub agent: String,
    /// The agent as the call named it (`/retry` runs it again).
    pub target: AgentRef,
    /// The message it was given (its first turn's).
    pub input: String,
    pub code_review: bool,
    /// When it started and ended, ms since the session started.
    pub started: u64,
    pub finished: Option<u64>,
    /// What the screen shows of it, sent whole in each snapshot.
    pub summary: Summary,
    pub stop_reason: Option<StopReason>,
    /// A background task's report, severity header stripped (kept for
    /// `subagent_status`; foreground calls return theirs at once).
    pub output: Option<String>,
    /// A background review's findings, with its report.
    pub findings: Vec<crate::event::finding::Finding>,
    /// A worktree task's branch, worktree and diffstat.
    pub work: Option<crate::event::Work>,
    /// The streamed text line not yet ended by a newline, and whether it
    /// is a thought's (`"thinking: "`) or the message's (`""`).
    partial: String,
    partial_prefix: &'static str,
    /// The agent session it runs on (`agent` and session id), once known.
    session: Option<String>,
    /// What its session had reported before this call's first usage.
    base: Option<Usage>,
}

impl Entry {
    /// The snapshot event of this entry.
    pub fn snapshot(&self) -> Event {
        Event::TaskProgress {
            call_id: self.call_id.clone(),
            task_id: self.task_id.clone(),
            summary: self.summary.clone(),
        }
    }
}

/// No background task has this id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown task {id:?}; known tasks: {}", if known.is_empty() { "none".to_string() } else { known.join(", ") })]
pub struct UnknownTask {
    pub id: String,
    pub known: Vec<String>,
}

/// The ledger's name for the chat's own spending.
const CHAT: &str = "chat";

#[derive(Debug, Default, Clone)]
pub struct Board {
    entries: Vec<Entry>,
    by_call: HashMap<String, usize>,
    by_task: HashMap<String, usize>,
    /// The latest usage of each agent session (by `Entry::session`, or
    /// the call id when none is known).
    sessions: HashMap<String, Usage>,
    /// The child sessions calls' agents announced, by call and child id:
    /// summed up like calls.
    children: HashMap<(String, String), Entry>,
    /// The session's spending, against its caps.
    ledger: super::ledger::Ledger,
    /// What a cost is estimated with, by agent (`chat`: the chat's model).
    prices: BTreeMap<String, Price>,
}

impl Board {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes in one event; returns the snapshot it changed, if any.
    pub fn observe(&mut self, stamped: &Stamped) -> Option<Event> {
        let t = stamped.t;
        match &stamped.event {
            Event::BudgetSet { caps } => {
                self.ledger.set_caps(*caps);
                None
            }
            Event::PricesSet { prices } => {
                self.prices = prices.clone();
                None
            }
            Event::Usage {
                input_tokens,
                output_tokens,
            } => {
                let cost = self
                    .prices
                    .get(CHAT)
                    .map(|p| p.of(*input_tokens, *output_tokens));
                self.ledger.chat_spent(
                    input_tokens + output_tokens,
                    cost.unwrap_or(0.0),
                    cost.is_some(),
                );
                None
            }
            Event::ChatActivity {
                activity: Activity::Usage { usage },
            } => {
                // A conductor's session reports its cumulative cost.
                self.ledger.call_started_once(CHAT, "chat");
                self.ledger.call_spent(
                    CHAT,
                    Spent {
                        cost: usage.cost.as_ref().map_or(0.0, |c| c.amount),
                        tokens: usage.used,
                        estimated: false,
                    },
                );
                None
            }
            started @ Event::SubagentStarted { .. } => {
                self.start(t, started);
                // The screen opens the box and the task from the start
                // event itself: nothing else to say yet.
                None
            }
            Event::SubagentFollowup { call_id, .. } => {
                let entry = self.entry_mut(call_id)?;
                entry.run_again();
                Some(entry.snapshot())
            }
            Event::SubagentBackgrounded { call_id, task_id } => self.background(call_id, task_id),
            Event::SubagentCancelling { call_id } => {
                let entry = self.entry_mut(call_id)?;
                entry.cancelling().then(|| entry.snapshot())
            }
            Event::SubagentDequeued { call_id } => {
                let entry = self.entry_mut(call_id)?;
                entry.dequeued(t).then(|| entry.snapshot())
            }
            Event::SubagentSession {
                call_id,
                session_id: Some(id),
                ..
            } => {
                let entry = self.entry_mut(call_id)?;
                entry.session = Some(format!("{}\0{id}", entry.agent));
                None
            }
            Event::SubagentActivity {
                call_id,
                activity: Activity::Usage { usage },
            } => self.usage(call_id, usage),
            Event::SubagentActivity { call_id, activity } => {
                let entry = self.entry_mut(call_id)?;
                entry.activity(activity).then(|| entry.snapshot())
            }
            Event::SubagentFinished {
                call_id,
                output,
                stop_reason,
                severity,
                findings,
            } => {
                let entry = self.entry_mut(call_id)?;
                entry.finish(t, output, (*stop_reason, *severity), findings);
                Some(entry.snapshot())
            }
            Event::SubagentChild {
                call_id,
                child_id,
                state,
                ..
            } => Some(self.child_state(t, call_id, child_id, *state)),
            Event::SubagentChildActivity {
                call_id,
                child_id,
                activity,
            } => self.child_activity(call_id, child_id, activity),
            Event::WorktreeReady {
                call_id,
                branch,
                path,
                ..
            } => {
                self.entry_mut(call_id)?.work_ready(branch, path);
                None
            }
            Event::WorktreeCommitted {
                call_id, diffstat, ..
            } => {
                if let Some(work) = &mut self.entry_mut(call_id)?.work {
                    work.diffstat = diffstat.to_string();
                }
                None
            }
            _ => None,
        }
    }

    /// A call that started (`subagent_started`): on the board from now on.
    fn start(&mut self, t: u64, started: &Event) {
        let Event::SubagentStarted {
            call_id,
            task_id,
            agent,
            code_review,
            queued,
            input,
            max_cost,
            ..
        } = started
        else {
            return;
        };
        self.ledger.call_started(call_id, agent.name(), *max_cost);
        let state = if *queued {
            TaskState::Queued
        } else {
            TaskState::Running
        };
        let entry = Entry {
            task_id: task_id.clone(),
            input: input.clone(),
            code_review: *code_review,
            summary: Summary {
                state,
                ..Summary::default()
            },
            ..Entry::new(call_id, agent.name().to_string(), agent.clone(), t)
        };
        let index = self.entries.len();
        self.entries.push(entry);
        self.by_call.insert(call_id.clone(), index);
        if let Some(task_id) = task_id {
            self.by_task.insert(task_id.clone(), index);
        }
    }

    /// The call is a background task from now on: its report is kept for
    /// `subagent_status`.
    fn background(&mut self, call_id: &str, task_id: &str) -> Option<Event> {
        let index = *self.by_call.get(call_id)?;
        let entry = self.entries.get_mut(index)?;
        if entry.task_id.is_some() {
            return None;
        }
        entry.task_id = Some(task_id.to_string());
        self.by_task.insert(task_id.to_string(), index);
        Some(entry.snapshot())
    }

    /// A call's usage report. An agent reports its session's cumulative
    /// cost (and its whole context), and a resumed session carries what
    /// earlier calls spent. So each call's share is how far it moved its
    /// session's figures: the latest report less the session's last one
    /// before this call. Summed per session (for the session total or a
    /// review quorum) the shares add up to the session's latest figures,
    /// counted once.
    fn usage(&mut self, call_id: &str, usage: &Usage) -> Option<Event> {
        let index = *self.by_call.get(call_id)?;
        let entry = self.entries.get_mut(index)?;
        let key = entry.session.clone().unwrap_or_else(|| call_id.to_string());
        if entry.summary.usage.is_none() {
            entry.base = self.sessions.get(&key).cloned();
        }
        let usage = &estimated(
            usage,
            self.sessions.get(&key),
            self.prices.get(&entry.agent),
        );
        self.sessions.insert(key, usage.clone());
        let part = share(entry.base.as_ref(), usage);
        let spent = Spent {
            cost: part.cost.as_ref().map_or(0.0, |c| c.amount),
            tokens: part.tokens.max(0) as u64,
            estimated: part.cost.as_ref().is_some_and(|c| c.estimated),
        };
        entry.summary.share = Some(part);
        entry.summary.usage = Some(usage.clone());
        let snapshot = entry.snapshot();
        self.ledger.call_spent(call_id, spent);
        Some(snapshot)
    }

    /// The prices costs are estimated with, by agent (`chat` too).
    pub fn prices(&self) -> &BTreeMap<String, Price> {
        &self.prices
    }

    /// The session's spending and caps.
    pub fn ledger(&self) -> &super::ledger::Ledger {
        &self.ledger
    }

    /// What the last events made the ledger say (spending, caps warned
    /// of or reached), to send after them.
    pub fn take_said(&mut self) -> Vec<Event> {
        self.ledger.take_said()
    }

    /// A child session a call's agent announced, or its new state: its
    /// snapshot.
    fn child_state(
        &mut self,
        t: u64,
        call_id: &str,
        child_id: &str,
        state: Option<ChildState>,
    ) -> Event {
        let key = (call_id.to_string(), child_id.to_string());
        let entry = self.children.entry(key).or_insert_with(|| {
            Entry::new(
                call_id,
                child_id.to_string(),
                AgentRef::Acp(child_id.to_string()),
                t,
            )
        });
        match state {
            Some(ChildState::Running) => {
                entry.summary.state = TaskState::Running;
                entry.summary.waiting = false;
                entry.finished = None;
            }
            Some(ChildState::RequiresAction) => {
                entry.summary.state = TaskState::Running;
                entry.summary.waiting = true;
            }
            Some(ChildState::Idle) => {
                entry.summary.state = TaskState::Done;
                entry.summary.waiting = false;
                entry.finished.get_or_insert(t);
                entry.flush();
            }
            Some(ChildState::Unknown) | None => {}
        }
        child_snapshot(child_id, entry)
    }

    /// What a child session did: its snapshot, when its summary changed.
    fn child_activity(
        &mut self,
        call_id: &str,
        child_id: &str,
        activity: &Activity,
    ) -> Option<Event> {
        let entry = self
            .children
            .get_mut(&(call_id.to_string(), child_id.to_string()))?;
        entry
            .activity(activity)
            .then(|| child_snapshot(child_id, entry))
    }

    /// A call's child session, by call and child id.
    pub fn child(&self, call_id: &str, child_id: &str) -> Option<&Entry> {
        self.children
            .get(&(call_id.to_string(), child_id.to_string()))
    }

    fn entry_mut(&mut self, call_id: &str) -> Option<&mut Entry> {
        let index = *self.by_call.get(call_id)?;
        self.entries.get_mut(index)
    }

    pub fn call(&self, call_id: &str) -> Option<&Entry> {
        self.entries.get(*self.by_call.get(call_id)?)
    }

    pub fn task(&self, task_id: &str) -> Option<&Entry> {
        self.entries.get(*self.by_task.get(task_id)?)
    }

    /// The background task `task_id`, or an error that names the known
    /// ones.
    pub fn known_task(&self, task_id: &str) -> Result<&Entry, UnknownTask> {
        self.task(task_id).ok_or_else(|| UnknownTask {
            id: task_id.to_string(),
            known: self.tasks().filter_map(|e| e.task_id.clone()).collect(),
        })
    }

    /// The background tasks, oldest first.
    pub fn tasks(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| e.task_id.is_some())
    }

    /// What the chat is told, once, when the session's cap is reached:
    /// what stopped, and what runs on to the end of its turn.
    pub fn budget_message(&self) -> Option<String> {
        let reached = self.ledger.session_reached()?;
        let name = |e: &Entry| e.task_id.clone().unwrap_or_else(|| e.call_id.clone());
        let names = |state: TaskState| {
            let picked: Vec<String> = self
                .entries
                .iter()
                .filter(|e| e.summary.state == state)
                .map(name)
                .collect();
            match picked.is_empty() {
                true => "none".to_string(),
                false => picked.join(", "),
            }
        };
        Some(format!(
            "[automated message] {reached}. The budget stopped the work: no new sub-agent call \
             starts (the subagent tool refuses it); tasks still queued will not start ({}); \
             running tasks finish their current turn and take no follow-ups ({}). Tell the \
             person: they can raise the cap (--max-cost, --max-tokens or [budget]).\n\n",
            names(TaskState::Queued),
            names(TaskState::Running),
        ))
    }
}

/// The `child_progress` event of a child session's entry.
fn child_snapshot(child_id: &str, entry: &Entry) -> Event {
    Event::ChildProgress {
        call_id: entry.call_id.clone(),
        child_id: child_id.to_string(),
        summary: entry.summary.clone(),
    }
}

impl Entry {
    /// A call (or a child session) of `agent`, started at `t`, with
    /// nothing known of it yet.
    fn new(call_id: &str, agent: String, target: AgentRef, t: u64) -> Self {
        Entry {
            call_id: call_id.to_string(),
            task_id: None,
            agent,
            target,
            input: String::new(),
            code_review: false,
            started: t,
            finished: None,
            summary: Summary::default(),
            stop_reason: None,
            output: None,
            findings: Vec::new(),
            work: None,
            partial: String::new(),
            partial_prefix: "",
            session: None,
            base: None,
        }
    }

    /// A new turn on the call's session: it runs again.
    fn run_again(&mut self) {
        self.finished = None;
        self.summary.state = TaskState::Running;
        self.summary.severity = None;
        self.summary.waiting = false;
        self.summary.cancelling = false;
        self.stop_reason = None;
        self.output = None;
        self.findings.clear();
    }

    /// The person cancels it; true when that is news.
    fn cancelling(&mut self) -> bool {
        if !self.summary.state.active() || self.summary.cancelling {
            return false;
        }
        self.summary.cancelling = true;
        self.summary.waiting = false;
        true
    }

    /// A queued call takes its place; true when it was queued. Its time
    /// counts from when it runs.
    fn dequeued(&mut self, t: u64) -> bool {
        if self.summary.state != TaskState::Queued {
            return false;
        }
        self.summary.state = TaskState::Running;
        self.started = t;
        true
    }

    /// Its turn ended at `t`.
    fn finish(
        &mut self,
        t: u64,
        output: &str,
        (stop_reason, severity): (StopReason, Option<Severity>),
        findings: &[crate::event::finding::Finding],
    ) {
        self.finished = Some(t);
        self.summary.state = TaskState::from_stop_reason(stop_reason);
        self.stop_reason = Some(stop_reason);
        self.summary.severity = severity;
        self.summary.waiting = false;
        self.summary.cancelling = false;
        // The line the agent ended on, though no newline ended it.
        self.flush();
        if self.task_id.is_some() {
            self.output = Some(output.to_string());
            self.findings = findings.to_vec();
        }
    }

    /// Its worktree task's branch and worktree are ready.
    fn work_ready(&mut self, branch: &str, worktree: &str) {
        self.work = Some(crate::event::Work {
            branch: branch.to_string(),
            worktree: worktree.to_string(),
            diffstat: "nothing committed yet".into(),
            ..Default::default()
        });
    }

    /// Applies one activity; true when the summary changed. Streamed text
    /// changes it only when a line ends, not on every chunk.
    fn activity(&mut self, activity: &Activity) -> bool {
        match activity {
            Activity::MessageChunk { text } => self.text(text, ""),
            Activity::ThoughtChunk { text } => self.text(text, "thinking: "),
            Activity::ToolCall { title, .. } => {
                self.summary.tool_calls += 1;
                self.partial.clear();
                self.set_last(format!("⚙ {}", one_line(title)));
                true
            }
            Activity::PermissionRequest { title, .. } => {
                self.summary.waiting = true;
                self.set_last(format!("? permission: {}", one_line(title)));
                true
            }
            Activity::PermissionResolved { outcome, .. } => {
                let was = self.summary.waiting;
                self.summary.waiting = false;
                let last = format!("permission {}", one_line(outcome));
                was | self.set_last(last)
            }
            Activity::Notice { text } => self.set_last(format!("! {}", one_line(text))),
            Activity::Elicitation { message, .. } => {
                self.summary.waiting = true;
                self.set_last(format!("? question: {}", one_line(message)));
                true
            }
            Activity::ElicitationResolved { outcome, .. } => {
                let was = self.summary.waiting;
                self.summary.waiting = false;
                was | self.set_last(format!("question: {}", one_line(outcome)))
            }
            Activity::ToolCallUpdate { .. } | Activity::Plan { .. } => false,
            // Taken in by `Board::observe`, which knows the sessions.
            Activity::Usage { .. } => false,
            Activity::TerminalStarted { command, .. } => {
                self.partial.clear();
                self.set_last(format!("$ {}", one_line(command)))
            }
            // Output is the box's; the panel's line names the command.
            Activity::TerminalOutput { .. } | Activity::TerminalExit { .. } => false,
            // What the agent offers: the box shows it, no summary does.
            Activity::Commands { .. } | Activity::Mode { .. } | Activity::Config { .. } => false,
        }
    }

    fn text(&mut self, chunk: &str, prefix: &'static str) -> bool {
        // A thought after message text (or the other way round) ends the
        // line before it.
        let mut changed = false;
        if self.partial_prefix != prefix {
            changed = self.flush();
            self.partial_prefix = prefix;
        }
        let Some(end) = chunk.rfind('\n') else {
            if self.partial.len() < PARTIAL_BYTES {
                self.partial.push_str(chunk);
            }
            return changed;
        };
        // The last non-empty line that this chunk ends.
        let mut done = std::mem::take(&mut self.partial);
        done.push_str(&chunk[..end]);
        self.partial.push_str(&chunk[end + 1..]);
        match done.lines().rev().find(|l| !l.trim().is_empty()) {
            Some(line) => self.set_last(format!("{prefix}{}", one_line(line))) | changed,
            None => changed,
        }
    }

    /// Ends the unfinished line: it becomes the summary.
    fn flush(&mut self) -> bool {
        let partial = std::mem::take(&mut self.partial);
        if partial.trim().is_empty() {
            return false;
        }
        self.set_last(format!("{}{}", self.partial_prefix, one_line(&partial)))
    }

    fn set_last(&mut self, line: String) -> bool {
        if self.summary.last_activity.as_deref() == Some(line.as_str()) {
            return false;
        }
        self.summary.last_activity = Some(line);
        true
    }
}

/// `usage` with its session's cumulative cost estimated when it reports
/// none and its agent has a `price`: the session's estimate so far
/// (`last`, its report before this one) plus this report's context read
/// once at the input price. A model reads its whole context at each step,
/// and each report follows a step; cache discounts are not known, so the
/// estimate errs high, the safe side of a cap.
fn estimated(usage: &Usage, last: Option<&Usage>, price: Option<&Price>) -> Usage {
    let (None, Some(price)) = (&usage.cost, price) else {
        return usage.clone();
    };
    let before = last
        .and_then(|l| l.cost.as_ref())
        .filter(|c| c.estimated)
        .map_or(0.0, |c| c.amount);
    Usage {
        cost: Some(Cost {
            amount: before + price.of(usage.used, 0),
            currency: "USD".into(),
            estimated: true,
        }),
        ..usage.clone()
    }
}

/// How far `usage` moved its session's figures from `base` (its report
/// before this call, if any). A cost in another currency than the base's
/// counts whole.
fn share(base: Option<&Usage>, usage: &Usage) -> UsageShare {
    let base_used = base.map_or(0, |b| b.used);
    let cost = usage.cost.as_ref().map(|c| {
        let before = base
            .and_then(|b| b.cost.as_ref())
            .filter(|b| b.currency == c.currency)
            .map_or(0.0, |b| b.amount);
        Cost {
            amount: c.amount - before,
            currency: c.currency.clone(),
            estimated: c.estimated,
        }
    });
    UsageShare {
        tokens: usage.used as i64 - base_used as i64,
        cost,
    }
}

/// The first line of `text`, trimmed and cut to [`SUMMARY_CHARS`].
fn one_line(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let line = line.trim();
    if line.chars().count() > SUMMARY_CHARS {
        let mut cut: String = line.chars().take(SUMMARY_CHARS - 1).collect();
        cut.push('…');
        cut
    } else {
        line.to_string()
    }
}

/// The board's test events, shared with the tests of what reads it
/// (`subagent_status`).
#[cfg(test)]
pub(crate) mod fixtures {
    use crate::event::{Activity, AgentRef, Cost, Stamped, ToolStatus, Usage, build};

    pub(crate) fn started(call: &str, task: Option<&str>) -> Stamped {
        started_queued(call, task, false)
    }

    pub(crate) fn started_queued(call: &str, task: Option<&str>, queued: bool) -> Stamped {
        let mut started = build::started(call, AgentRef::Acp("fake".into()))
            .input("go")
            .review();
        if let Some(task) = task {
            started = started.background(task);
        }
        if queued {
            started = started.batch("b1").queued();
        }
        Stamped::new(10, started.event())
    }

    pub(crate) fn activity(call: &str, activity: Activity) -> Stamped {
        Stamped::new(20, build::activity(call, activity))
    }

    pub(crate) fn tool(id: &str) -> Activity {
        Activity::ToolCall {
            id: id.into(),
            title: format!("Read {id}"),
            status: ToolStatus::Pending,
            detail: Default::default(),
        }
    }

    pub(crate) fn usage(used: u64, cost: Option<f64>) -> Activity {
        Activity::Usage {
            usage: Usage {
                used,
                size: Some(200_000),
                cost: cost.map(|amount| Cost {
                    amount,
                    currency: "USD".into(),
                    estimated: false,
                }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;
    use crate::event::{Severity, build};

    #[test]
    fn each_tool_call_is_counted_once_and_snapshotted_whole() {
        let mut b = Board::new();
        assert_eq!(b.observe(&started("c1", Some("t1"))), None);
        let snap = b.observe(&activity("c1", tool("a"))).unwrap();
        assert_eq!(
            snap,
            Event::TaskProgress {
                call_id: "c1".into(),
                task_id: Some("t1".into()),
                summary: Summary {
                    state: TaskState::Running,
                    tool_calls: 1,
                    last_activity: Some("⚙ Read a".into()),
                    severity: None,
                    waiting: false,
                    cancelling: false,
                    usage: None,
                    share: None,
                },
            }
        );
        b.observe(&activity("c1", tool("b")));
        assert_eq!(b.task("t1").unwrap().summary.tool_calls, 2);
        assert_eq!(b.call("c1").unwrap().summary.tool_calls, 2);
    }

    fn session(call: &str, id: &str) -> Stamped {
        Stamped::new(
            15,
            build::session(call, crate::event::SessionKind::Resumed)
                .id(id)
                .event(),
        )
    }

    fn share_of(b: &Board, call: &str) -> (i64, f64) {
        let share = b.call(call).unwrap().summary.share.clone().unwrap();
        (share.tokens, share.cost.map_or(0.0, |c| c.amount))
    }

    #[test]
    fn usage_is_snapshotted_and_a_resumed_session_is_not_counted_twice() {
        let mut b = Board::new();
        b.observe(&started("c1", Some("t1")));
        b.observe(&session("c1", "s1"));
        let snap = b.observe(&activity("c1", usage(1_000, Some(0.01))));
        let Some(Event::TaskProgress { summary, .. }) = snap else {
            panic!("{snap:?}")
        };
        assert_eq!(
            summary.usage,
            Some(Usage {
                used: 1_000,
                size: Some(200_000),
                cost: Some(Cost {
                    amount: 0.01,
                    currency: "USD".into(),
                    estimated: false,
                })
            })
        );
        assert_eq!(summary.tool_calls, 0, "usage is no tool call");
        b.observe(&activity("c1", usage(3_000, Some(0.03))));
        assert_eq!(share_of(&b, "c1"), (3_000, 0.03));
        // A new call resumes the session: its cost is cumulative.
        b.observe(&started("c2", None));
        b.observe(&session("c2", "s1"));
        b.observe(&activity("c2", usage(5_000, Some(0.05))));
        let (tokens, cost) = share_of(&b, "c2");
        assert_eq!(tokens, 2_000);
        assert!((cost - 0.02).abs() < 1e-9, "{cost}");
        assert_eq!(
            b.call("c2").unwrap().summary.usage.as_ref().unwrap().used,
            5_000,
            "the box shows what the agent reported"
        );
        // Another session counts whole.
        b.observe(&started("c3", None));
        b.observe(&session("c3", "s2"));
        b.observe(&activity("c3", usage(700, None)));
        assert_eq!(share_of(&b, "c3"), (700, 0.0));
        // The internal agent has no session: its call is its own.
        b.observe(&started("c4", None));
        b.observe(&activity("c4", usage(40, None)));
        b.observe(&activity("c4", usage(90, None)));
        assert_eq!(share_of(&b, "c4"), (90, 0.0));
        assert_eq!(b.observe(&activity("c9", usage(1, None))), None);
    }

    #[test]
    fn a_call_sent_to_the_background_is_a_task_with_its_report() {
        let mut b = Board::new();
        b.observe(&started("c1", None));
        b.observe(&activity("c1", tool("a")));
        assert!(b.task("t1").is_none());
        let snap = b.observe(&Stamped::new(15, build::backgrounded("c1", "t1")));
        let Some(Event::TaskProgress {
            task_id, summary, ..
        }) = snap
        else {
            panic!("{snap:?}")
        };
        assert_eq!((task_id.as_deref(), summary.tool_calls), (Some("t1"), 1));
        assert_eq!(b.tasks().count(), 1);
        // Once.
        assert_eq!(
            b.observe(&Stamped::new(16, build::backgrounded("c1", "t2"))),
            None
        );
        b.observe(&Stamped::new(30, build::finished("c1", "report").event()));
        assert_eq!(b.task("t1").unwrap().output.as_deref(), Some("report"));
    }

    #[test]
    fn a_follow_up_sets_a_finished_task_running_again() {
        let mut b = Board::new();
        b.observe(&started("c1", Some("t1")));
        b.observe(&activity("c1", tool("a")));
        b.observe(&Stamped::new(
            30,
            build::finished("c1", "first")
                .severity(Severity::Green)
                .event(),
        ));
        let snap = b.observe(&Stamped::new(40, build::followup("c1", "more")));
        let Some(Event::TaskProgress { summary, .. }) = snap else {
            panic!("{snap:?}")
        };
        assert_eq!(summary.state, TaskState::Running);
        assert_eq!(summary.severity, None);
        assert_eq!(summary.tool_calls, 1, "counts go on");
        let entry = b.task("t1").unwrap();
        assert_eq!(
            (entry.finished, &entry.output, entry.stop_reason),
            (None, &None, None)
        );
        assert_eq!(
            b.observe(&Stamped::new(41, build::followup("c9", "x"))),
            None
        );
    }

    #[test]
    fn text_changes_the_summary_only_when_a_line_ends() {
        let mut b = Board::new();
        b.observe(&started("c1", None));
        let chunk = |t: &str| Stamped::new(20, build::chunk("c1", t));
        assert_eq!(b.observe(&chunk("Looking at ")), None);
        assert_eq!(b.observe(&chunk("the code")), None);
        let Some(Event::TaskProgress { summary, .. }) = b.observe(&chunk(".\nNext")) else {
            panic!("a line ended")
        };
        assert_eq!(
            summary.last_activity.as_deref(),
            Some("Looking at the code.")
        );
        // The same line again is no change.
        assert_eq!(
            b.observe(&chunk("\n")),
            Some(b.call("c1").unwrap().snapshot())
        );
        assert_eq!(
            b.call("c1").unwrap().summary.last_activity.as_deref(),
            Some("Next")
        );
        assert_eq!(b.observe(&chunk("\n\n")), None);
        // A thought ends the message line before it; the finish ends the
        // thought's.
        b.observe(&chunk("Almost"));
        let thought = activity(
            "c1",
            Activity::ThoughtChunk {
                text: "checking".into(),
            },
        );
        assert!(b.observe(&thought).is_some());
        assert_eq!(
            b.call("c1").unwrap().summary.last_activity.as_deref(),
            Some("Almost")
        );
        b.observe(&Stamped::new(30, build::finished("c1", "Almost").event()));
        assert_eq!(
            b.call("c1").unwrap().summary.last_activity.as_deref(),
            Some("thinking: checking")
        );
    }

    #[test]
    fn a_cancel_is_shown_until_the_call_ends() {
        let mut b = Board::new();
        b.observe(&started("c1", Some("t1")));
        let cancelling = build::cancelling("c1");
        let Some(Event::TaskProgress { summary, .. }) =
            b.observe(&Stamped::new(10, cancelling.clone()))
        else {
            panic!("a snapshot")
        };
        assert!(summary.cancelling);
        assert_eq!(summary.state, TaskState::Running);
        // Once is enough.
        assert_eq!(b.observe(&Stamped::new(11, cancelling.clone())), None);
        b.observe(&Stamped::new(
            20,
            build::finished("c1", "stopped")
                .stop(StopReason::Cancelled)
                .event(),
        ));
        let summary = &b.task("t1").unwrap().summary;
        assert_eq!(
            (summary.state, summary.cancelling),
            (TaskState::Cancelled, false)
        );
        // A finished call is not cancelling.
        assert_eq!(b.observe(&Stamped::new(30, cancelling)), None);
    }

    fn on_child(t: u64, event: Event) -> Stamped {
        Stamped::new(t, event)
    }

    fn announce(state: Option<ChildState>) -> Event {
        Event::SubagentChild {
            call_id: "c1".into(),
            child_id: "k".into(),
            title: Some("scout".into()),
            description: None,
            state,
            can_cancel: false,
        }
    }

    #[test]
    fn a_child_session_is_summed_up_like_a_call() {
        let mut b = Board::new();
        b.observe(&started("c1", None));
        let Some(Event::ChildProgress {
            call_id,
            child_id,
            summary,
        }) = b.observe(&on_child(11, announce(Some(ChildState::Running))))
        else {
            panic!("a child snapshot");
        };
        assert_eq!((call_id.as_str(), child_id.as_str()), ("c1", "k"));
        assert_eq!(summary.state, TaskState::Running);
        let child_activity = |activity| Event::SubagentChildActivity {
            call_id: "c1".into(),
            child_id: "k".into(),
            activity,
        };
        let Some(Event::ChildProgress { summary, .. }) =
            b.observe(&on_child(12, child_activity(tool("k1"))))
        else {
            panic!("a child snapshot");
        };
        assert_eq!(summary.tool_calls, 1);
        assert_eq!(summary.last_activity.as_deref(), Some("⚙ Read k1"));
        // The call's own count is not the child's.
        assert_eq!(b.call("c1").unwrap().summary.tool_calls, 0);
        assert_eq!(b.child("c1", "k").unwrap().summary.tool_calls, 1);
        // Waiting, then idle: done.
        let Some(Event::ChildProgress { summary, .. }) =
            b.observe(&on_child(13, announce(Some(ChildState::RequiresAction))))
        else {
            panic!("a child snapshot");
        };
        assert!(summary.waiting);
        let Some(Event::ChildProgress { summary, .. }) =
            b.observe(&on_child(14, announce(Some(ChildState::Idle))))
        else {
            panic!("a child snapshot");
        };
        assert_eq!(summary.state, TaskState::Done);
        assert!(!summary.waiting);
        // Activity of a child never announced is not on the board.
        let stray = Event::SubagentChildActivity {
            call_id: "c1".into(),
            child_id: "other".into(),
            activity: tool("k2"),
        };
        assert_eq!(b.observe(&on_child(15, stray)), None);
    }
}
