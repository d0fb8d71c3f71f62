//! The screen's state, built by applying events. Pure: no I/O, no clock.
//!
//! `State` and its look-ups live here, with `apply`: one thin match that
//! hands each kind of event to its handler, in the file of its job —
//! the transcript's cells (`cells`), a call's box (`subagent`) and what it
//! takes in of its agent's activity (`activity`), the opened box's log
//! (`log`), batch headers and usage totals (`batch`), the board's
//! snapshots (`snapshot`) and the side panel's tasks (`panel`).

use std::collections::{BTreeSet, HashMap, HashSet};

#[cfg(test)]
use crate::event::TaskState;
use crate::event::{Event, NoticeLevel, Stamped};

mod activity;
mod announced;
mod arena;
mod batch;
mod budget;
mod cells;
mod elicit;
mod lines;
mod log;
mod panel;
mod snapshot;
mod spill;
mod subagent;
mod tally;
mod terminal;

#[cfg(test)]
mod fixtures;

pub use announced::Announced;
pub use arena::ArenaCell;
pub use batch::{BatchHeader, Member, UsageTotal};
pub use budget::Spending;
pub use cells::{Cell, CellKind, ChatPermission, TaskReport, ToolCell};
pub use elicit::{Question, answer_line};
pub use lines::{ACTIVITY_LINES, ActivityLine};
pub use log::{Changes, LOG_BYTES, LOG_ENTRIES, Log, LogEntry, ToolInfo};
pub use panel::Task;
pub use spill::DETAIL_WINDOW;
pub use subagent::{
    CheckLine, ChildBox, EARLIER_TURNS, EarlierTurn, Grouped, SubagentBox, plan_progress,
};
pub use terminal::{TerminalView, Terminals, exit_words};

/// Everything the screen shows, as built from events.
#[derive(Debug, Default, Clone)]
pub struct State {
    pub cells: Vec<Cell>,
    pub tasks: Vec<Task>,
    /// Time of the latest event, ms since the session started.
    pub now: u64,
    pub model: Option<String>,
    pub agents: Vec<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The session's spending and caps.
    pub spending: Spending,
    /// How many events were applied.
    pub applied: u64,
    /// Whether the chat model is working on a turn.
    pub turn_running: bool,
    /// How much of what may be a tool call the chat model has written as
    /// text (held back until its message ends).
    pub writing_call: Option<u64>,
    /// The chat model's pending retry: attempt, wait, reason.
    pub retry: Option<(u32, u64, String)>,
    /// The boxes still open (running, or queued for their place), by cell
    /// index: the newest box of each call id. Each box's handlers note it
    /// from the box's own state, so the counts below are read off the
    /// boxes the board's snapshots describe, never kept by hand; and they
    /// cost what is open, not the transcript's length.
    open: HashSet<usize>,
    /// Every box (by cell index, oldest first), every box still running
    /// (its end not come: older boxes of a reused call id too), and every
    /// box with an unanswered permission request: what the keys look up,
    /// so no key walks the transcript.
    boxes: Vec<usize>,
    running_boxes: BTreeSet<usize>,
    asking: BTreeSet<usize>,
    /// What the boxes' and tasks' snapshots add up to (waiting,
    /// cancelling, usage, the panel's running and queued): kept as each
    /// snapshot is copied, through [`State::edit_box`] and
    /// [`State::edit_task`], so a frame reads them without a walk.
    tally: tally::Tally,
    calls: HashMap<String, usize>,
    /// Batch headers, by batch id.
    batches: HashMap<String, usize>,
    tools: HashMap<String, usize>,
    task_index: HashMap<String, usize>,
    open_assistant: Option<usize>,
    /// The chat model's streamed reply, cleaned across its chunks.
    assistant_stream: crate::confine::sanitize::Stream,
    next_rev: u64,
    /// Every box with a question (an elicitation) waiting, by cell index.
    eliciting: BTreeSet<usize>,
    /// The commands each agent last announced (sanitised), by agent name:
    /// what Tab completes after `@NAME /`.
    pub agent_commands: HashMap<String, Vec<crate::event::AgentCommand>>,
    /// The chats `/model` offers (sanitised, one word each): what Tab
    /// completes after `/model `.
    pub model_choices: Vec<String>,
    /// The chat's conductor (an ACP agent), once it opened a session.
    pub conductor: Option<String>,
    /// Its context and cost, as it last reported them.
    pub chat_usage: Option<crate::event::Usage>,
    /// Its unanswered permission request, by cell index.
    chat_asking: Option<usize>,
    /// Which finished boxes keep their detail in memory (`None`: all).
    detail: Option<spill::Window>,
}

impl State {
    pub fn new() -> Self {
        Self::default()
    }

    /// The call id of the newest running box.
    pub fn latest_running_call(&self) -> Option<String> {
        let &i = self.running_boxes.last()?;
        match &self.cells[i].kind {
            CellKind::Subagent(b) => Some(b.call_id.clone()),
            _ => None,
        }
    }

    /// The newest unanswered permission request: call id, request id and
    /// how many options it offers.
    /// A box's first; else the chat conductor's, as call [`CHAT_CALL`].
    ///
    /// [`CHAT_CALL`]: crate::event::CHAT_CALL
    pub fn pending_permission(&self) -> Option<(String, String, usize)> {
        let i = self.asking.last().copied().or(self.chat_asking)?;
        match &self.cells[i].kind {
            CellKind::Subagent(b) => b
                .permission
                .as_ref()
                .map(|(id, _, options)| (b.call_id.clone(), id.clone(), options.len())),
            CellKind::ChatPermission(p) => Some((
                crate::event::CHAT_CALL.to_string(),
                p.id.clone(),
                p.options.len(),
            )),
            _ => None,
        }
    }

    /// The newest child session whose work can be cancelled alone (its
    /// agent allows it, it is not idle, its call runs): call and child id.
    pub fn cancellable_child(&self) -> Option<(String, String)> {
        self.running_boxes
            .iter()
            .rev()
            .find_map(|&i| match &self.cells[i].kind {
                CellKind::Subagent(b) => b
                    .children
                    .iter()
                    .rev()
                    .find(|c| c.cancellable())
                    .map(|c| (b.call_id.clone(), c.child_id.clone())),
                _ => None,
            })
    }

    /// The boxes' cell indices, oldest first.
    pub fn boxes(&self) -> &[usize] {
        &self.boxes
    }

    /// How many sub-agent boxes are still running (queued ones included).
    pub fn running(&self) -> usize {
        self.open.len()
    }

    /// How many boxes wait for their place in a batch.
    pub fn queued(&self) -> usize {
        self.open
            .iter()
            .filter(|&&i| matches!(&self.cells[i].kind, CellKind::Subagent(b) if b.queued()))
            .count()
    }

    /// Applies one event: each kind goes to its handler, in the file of
    /// its job, by way of the dispatch of its part of the session (the
    /// chat, a call's box, its child sessions, batches, branches).
    pub fn apply(&mut self, stamped: &Stamped) {
        let t = stamped.t;
        self.now = self.now.max(t);
        self.applied += 1;
        let event = &stamped.event;
        // The model answered (or failed for good): no retry is pending.
        if matches!(
            event,
            Event::AssistantDelta { .. }
                | Event::Usage { .. }
                | Event::Error { .. }
                | Event::ToolCallStarted { .. }
        ) {
            self.retry = None;
        }
        match event {
            Event::SessionInfo { .. }
            | Event::UserMessage { .. }
            | Event::AssistantDelta { .. }
            | Event::TurnStarted
            | Event::TurnEnded { .. }
            | Event::AssistantWritingCall { .. }
            | Event::AssistantEnd
            | Event::ToolCallStarted { .. }
            | Event::ToolCallFinished { .. }
            | Event::ModelRetry { .. }
            | Event::Usage { .. }
            | Event::Notice { .. }
            | Event::Error { .. }
            | Event::SessionResumed { .. }
            | Event::ChatMessage { .. }
            | Event::ChatReset
            | Event::AgentCommands { .. }
            | Event::ModelChoices { .. }
            | Event::ConductorSession { .. }
            | Event::ChatActivity { .. } => self.apply_chat(event),
            Event::SubagentStarted { .. }
            | Event::SubagentCancelling { .. }
            | Event::SubagentDequeued { .. }
            | Event::SubagentBackgrounded { .. }
            | Event::SubagentSession { .. }
            | Event::SubagentFollowup { .. }
            | Event::SubagentActivity { .. }
            | Event::SubagentFinished { .. }
            | Event::TaskProgress { .. }
            | Event::TaskReported { .. } => self.apply_call(t, event),
            Event::SubagentChild { .. }
            | Event::SubagentChildActivity { .. }
            | Event::ChildProgress { .. } => self.apply_child(event),
            Event::BatchStarted { .. }
            | Event::BatchFinished { .. }
            | Event::ReviewQuorum { .. } => self.apply_batch(event),
            Event::WorktreeReady { .. }
            | Event::WorktreeCommitted { .. }
            | Event::CheckFinished { .. }
            | Event::BranchVerdict { .. }
            | Event::BranchMerged { .. }
            | Event::BranchDiscarded { .. } => self.apply_branch(event),
            Event::ArenaCompared {
                batch_id,
                comparison,
            } => self.on_arena_compared(batch_id, comparison),
            Event::SessionSpend { .. }
            | Event::BudgetSet { .. }
            | Event::PricesSet { .. }
            | Event::BudgetWarning { .. }
            | Event::BudgetReached { .. } => self.apply_budget(event),
        }
        #[cfg(test)]
        self.assert_tallies();
    }

    /// The chat's events: the session, the conversation, the chat's own
    /// tool calls, the model's retries and usage, notices and errors.
    /// (Only [`State::apply`] calls it, with those.)
    fn apply_chat(&mut self, event: &Event) {
        match event {
            Event::SessionInfo { model, agents } => self.on_session_info(model, agents),
            Event::UserMessage { text } => self.on_user_message(text),
            Event::AssistantDelta { text } => self.on_assistant_delta(text),
            Event::TurnStarted => self.on_turn_started(),
            Event::TurnEnded { .. } => self.on_turn_ended(),
            Event::AssistantWritingCall { bytes } => self.on_writing_call(*bytes),
            Event::AssistantEnd => self.on_assistant_end(),
            Event::ToolCallStarted { id, name, summary } => {
                self.on_tool_call_started(id, name, summary)
            }
            Event::ToolCallFinished { id, ok, summary } => {
                self.on_tool_call_finished(id, *ok, summary)
            }
            Event::ModelRetry {
                attempt,
                wait_ms,
                reason,
            } => self.on_model_retry(*attempt, *wait_ms, reason),
            Event::Usage {
                input_tokens,
                output_tokens,
            } => self.on_usage(*input_tokens, *output_tokens),
            Event::Notice { level, text } => self.on_notice(*level, text),
            Event::Error { text } => self.on_error(text),
            Event::SessionResumed { at, quorum_version } => self.on_notice(
                NoticeLevel::Info,
                &format!("session continued {at} (quorum {quorum_version})"),
            ),
            // The model's context: the screen has the same conversation
            // from the events above.
            Event::ChatMessage { .. } | Event::ChatReset => {}
            Event::AgentCommands { agent, commands } => {
                let commands = announced::clean_commands(commands);
                self.agent_commands.insert(clean(agent), commands);
            }
            Event::ModelChoices { specs } => {
                self.model_choices = specs
                    .iter()
                    .map(|s| clean(s))
                    .filter(|s| !s.is_empty() && !s.contains(char::is_whitespace))
                    .collect();
            }
            Event::ConductorSession { agent, .. } => self.conductor = Some(clean(agent)),
            Event::ChatActivity { activity } => self.on_chat_activity(activity),
            _ => {}
        }
    }

    /// A sub-agent call's events, into its box and its panel task. (Only
    /// [`State::apply`] calls it, with those.)
    fn apply_call(&mut self, t: u64, event: &Event) {
        match event {
            started @ Event::SubagentStarted { .. } => self.on_subagent_started(t, started),
            // The board's snapshot that follows says so: the box and the
            // panel copy it, as they copy every count.
            Event::SubagentCancelling { .. } => {}
            Event::SubagentDequeued { call_id } => self.on_subagent_dequeued(t, call_id),
            Event::SubagentBackgrounded { call_id, task_id } => {
                self.on_subagent_backgrounded(call_id, task_id)
            }
            Event::SubagentSession {
                call_id,
                session,
                session_id,
            } => self.on_subagent_session(call_id, *session, session_id.as_deref()),
            Event::SubagentFollowup { call_id, input } => self.on_subagent_followup(call_id, input),
            Event::SubagentActivity { call_id, activity } => self.on_activity(call_id, activity),
            Event::SubagentFinished {
                call_id,
                output,
                stop_reason,
                severity,
                findings,
            } => self.on_subagent_finished(t, call_id, output, (*stop_reason, *severity), findings),
            Event::TaskProgress {
                call_id,
                task_id,
                summary,
            } => self.on_task_progress(t, call_id, task_id.as_deref(), summary),
            Event::TaskReported { task_id } => self.on_task_reported(task_id),
            _ => {}
        }
    }

    /// A call's child sessions' events, into their boxes inside its box.
    /// (Only [`State::apply`] calls it, with those.)
    fn apply_child(&mut self, event: &Event) {
        match event {
            Event::SubagentChild {
                call_id,
                child_id,
                title,
                description,
                state,
                can_cancel,
            } => self.on_subagent_child(
                call_id,
                child_id,
                title.as_deref(),
                description.as_deref(),
                *state,
                *can_cancel,
            ),
            Event::SubagentChildActivity {
                call_id,
                child_id,
                activity,
            } => self.on_child_activity(call_id, child_id, activity),
            Event::ChildProgress {
                call_id,
                child_id,
                summary,
            } => self.on_child_progress(call_id, child_id, summary),
            _ => {}
        }
    }

    /// A batch's events, into its header. (Only [`State::apply`] calls
    /// it, with those.)
    fn apply_batch(&mut self, event: &Event) {
        match event {
            Event::BatchStarted {
                batch_id,
                tasks,
                review,
                ..
            } => self.on_batch_started(batch_id, *tasks, *review),
            Event::BatchFinished {
                batch_id,
                succeeded,
                failed,
                worst_verdict,
                ..
            } => self.on_batch_finished(batch_id, *succeeded, *failed, *worst_verdict),
            Event::ReviewQuorum {
                batch_id,
                quorum,
                diff,
            } => self.on_review_quorum(batch_id, quorum, diff.as_deref()),
            _ => {}
        }
    }

    /// A worktree's and its branch's events: into the call's box, and a
    /// verdict also as a notice. (Only [`State::apply`] calls it, with
    /// those.)
    fn apply_branch(&mut self, event: &Event) {
        match event {
            Event::WorktreeReady {
                call_id,
                branch,
                base,
                ..
            } => self.on_worktree_ready(call_id, branch, base),
            Event::WorktreeCommitted {
                call_id,
                diffstat,
                diff,
                ..
            } => self.on_worktree_committed(call_id, *diffstat, diff),
            Event::CheckFinished {
                call_id,
                commit,
                passed,
                counts,
                timed_out,
                output,
                touches_tests,
                missing,
                ..
            } => {
                let check = subagent::CheckLine {
                    line: crate::event::check_line(
                        *passed,
                        *counts,
                        *timed_out,
                        missing.as_deref().map(clean).as_deref(),
                    ),
                    passed: *passed,
                    commit: clean(commit),
                    output: clean(output),
                    touches_tests: touches_tests.iter().map(|t| clean(t)).collect(),
                };
                self.on_check_finished(call_id, check)
            }
            Event::BranchVerdict {
                branch,
                verdict,
                batch_id,
            } => {
                self.on_branch_verdict(batch_id.as_deref(), branch);
                self.on_notice(
                    NoticeLevel::Info,
                    &format!(
                        "{branch}: review quorum {}",
                        verdict.map_or("gave no verdict", |v| v.as_str())
                    ),
                )
            }
            Event::BranchMerged { branch, into } => {
                self.on_branch_fate(branch, format!("merged into {}", clean(into)))
            }
            Event::BranchDiscarded { branch } => {
                self.on_branch_fate(branch, "discarded".to_string())
            }
            _ => {}
        }
    }

    /// The tallies read what a walk over every cell and task reads (the
    /// state's tests check it after every event they apply).
    #[cfg(test)]
    pub(super) fn assert_tallies(&self) {
        let boxes = || {
            self.cells.iter().filter_map(|c| match &c.kind {
                CellKind::Subagent(b) => Some(b),
                _ => None,
            })
        };
        // The chat's conductor waiting for an answer needs you too.
        assert_eq!(
            self.needs_you(),
            boxes().filter(|b| b.summary.waiting).count() + usize::from(self.chat_asking.is_some()),
            "waiting"
        );
        assert_eq!(
            self.cancelling(),
            boxes().filter(|b| b.summary.cancelling).count(),
            "cancelling"
        );
        let indexed = |pick: fn(&SubagentBox) -> bool| -> Vec<usize> {
            let cells = self.cells.iter().enumerate();
            cells
                .filter(|(_, c)| matches!(&c.kind, CellKind::Subagent(b) if pick(b)))
                .map(|(i, _)| i)
                .collect()
        };
        assert_eq!(self.boxes, indexed(|_| true), "boxes");
        let running: Vec<usize> = self.running_boxes.iter().copied().collect();
        assert_eq!(running, indexed(|b| b.running()), "running boxes");
        let asking: Vec<usize> = self.asking.iter().copied().collect();
        assert_eq!(asking, indexed(|b| b.permission.is_some()), "asking");
        let eliciting: Vec<usize> = self.eliciting.iter().copied().collect();
        assert_eq!(eliciting, indexed(|b| b.question.is_some()), "eliciting");
        let count = |s| self.tasks.iter().filter(|t| t.summary.state == s).count();
        assert_eq!(
            self.task_counts(),
            (count(TaskState::Running), count(TaskState::Queued)),
            "panel tasks"
        );
        let walked = UsageTotal::of(boxes().filter_map(|b| b.summary.share.as_ref()));
        let kept = self.usage_total();
        assert_eq!(
            kept.as_ref().map(|t| (t.tokens, t.costs.len())),
            walked.as_ref().map(|t| (t.tokens, t.costs.len())),
            "usage"
        );
        for (k, w) in kept
            .iter()
            .flat_map(|k| k.costs.iter().zip(&walked.as_ref().unwrap().costs))
        {
            assert_eq!(k.currency, w.currency, "currency order");
            assert!(
                (k.amount - w.amount).abs() < 1e-9,
                "{} vs {}",
                k.amount,
                w.amount
            );
        }
    }

    fn on_session_info(&mut self, model: &Option<String>, agents: &[String]) {
        self.model = model.clone();
        self.agents = agents.to_vec();
    }

    fn on_turn_started(&mut self) {
        self.turn_running = true;
    }

    fn on_turn_ended(&mut self) {
        self.turn_running = false;
        self.writing_call = None;
    }

    fn on_writing_call(&mut self, bytes: u64) {
        self.writing_call = Some(bytes);
    }

    fn on_model_retry(&mut self, attempt: u32, wait_ms: u64, reason: &str) {
        self.retry = Some((attempt, wait_ms, clean(reason)));
    }

    fn on_usage(&mut self, input_tokens: u64, output_tokens: u64) {
        self.input_tokens += input_tokens;
        self.output_tokens += output_tokens;
    }

    /// Every sub-agent call's usage added up: the session total.
    pub fn usage_total(&self) -> Option<UsageTotal> {
        self.tally.usage_total()
    }

    /// Boxes waiting for the person (a permission answer), as the board
    /// says: the status line's "needs you" count.
    pub fn needs_you(&self) -> usize {
        self.tally.waiting + usize::from(self.chat_asking.is_some())
    }

    /// What the chat's conductor did besides its text and tool lines: a
    /// permission request (a cell the digit keys answer), its answer, its
    /// usage (the status line's).
    fn on_chat_activity(&mut self, activity: &crate::event::Activity) {
        use crate::event::Activity;
        match activity {
            Activity::PermissionRequest {
                id, title, options, ..
            } => {
                self.open_assistant = None;
                let agent = self.conductor.clone().unwrap_or_else(|| "chat".into());
                let i = self.push(CellKind::ChatPermission(Box::new(cells::ChatPermission {
                    id: clean(id),
                    agent,
                    title: clean(title),
                    options: options.iter().map(|o| clean(o)).collect(),
                    answer: None,
                })));
                self.chat_asking = Some(i);
            }
            Activity::PermissionResolved { id, outcome } => {
                let Some(i) = self.chat_asking else { return };
                if let CellKind::ChatPermission(asked) = self.touch(i)
                    && asked.id == clean(id)
                {
                    asked.answer = Some(clean(outcome));
                    self.chat_asking = None;
                }
            }
            Activity::Usage { usage } => self.chat_usage = Some(usage.clone()),
            _ => {}
        }
    }

    /// Calls asked to stop whose agents have not stopped yet.
    pub fn cancelling(&self) -> usize {
        self.tally.cancelling
    }

    /// The side panel's tasks the board says run, and wait for their
    /// place: `(running, queued)`.
    pub fn task_counts(&self) -> (usize, usize) {
        (self.tally.tasks_running, self.tally.tasks_queued)
    }

    /// Changes the box at cell `index` (marking the cell changed), its
    /// snapshot's part of the tallies taken off before and put back
    /// after. Every change to a box's snapshot goes through here.
    pub(super) fn edit_box<R>(
        &mut self,
        index: usize,
        edit: impl FnOnce(&mut SubagentBox) -> R,
    ) -> Option<R> {
        self.next_rev += 1;
        let cell = self.cells.get_mut(index)?;
        cell.rev = self.next_rev;
        let CellKind::Subagent(b) = &mut cell.kind else {
            return None;
        };
        let taken = self.tally.take_box(&b.summary);
        let r = edit(b);
        self.tally.put_box(index, taken, &b.summary);
        Some(r)
    }

    /// A new box, counted in the tallies.
    pub(super) fn push_box(&mut self, b: SubagentBox) -> usize {
        let index = self.cells.len();
        self.tally.add_box(index, &b.summary);
        self.boxes.push(index);
        self.push(CellKind::Subagent(Box::new(b)))
    }

    /// Changes a panel task, its snapshot's part of the tallies taken off
    /// before and put back after. Every change to a task's snapshot goes
    /// through here.
    pub(super) fn edit_task<R>(
        &mut self,
        task_id: &str,
        edit: impl FnOnce(&mut Task) -> R,
    ) -> Option<R> {
        let task = self.tasks.get_mut(*self.task_index.get(task_id)?)?;
        self.tally.remove_task(&task.summary);
        let r = edit(task);
        self.tally.add_task(&task.summary);
        Some(r)
    }

    /// A new panel task, found by `task_id`, counted in the tallies.
    pub(super) fn push_task(&mut self, task_id: &str, task: Task) {
        self.tally.add_task(&task.summary);
        self.task_index
            .insert(task_id.to_string(), self.tasks.len());
        self.tasks.push(task);
    }

    /// The box of a call, by call id.
    pub fn subagent_box(&self, call_id: &str) -> Option<&SubagentBox> {
        match &self.cells.get(*self.calls.get(call_id)?)?.kind {
            CellKind::Subagent(b) => Some(b),
            _ => None,
        }
    }

    /// The cell index of a call's box.
    pub fn box_index(&self, call_id: &str) -> Option<usize> {
        self.calls.get(call_id).copied()
    }
}

fn clean(s: &str) -> String {
    crate::confine::sanitize::sanitize(s).into_owned()
}

#[cfg(test)]
mod tests {
    //! What applying the chat's status events changes on screen, and that
    //! every event kind has its test (one per kind, in the file of its
    //! handler).

    use super::*;
    use crate::event::{StopReason, Summary, TaskState};
    use crate::tui::state::fixtures::*;

    #[test]
    fn session_info_sets_the_status_line() {
        let mut s = State::new();
        apply(
            &mut s,
            0,
            Event::SessionInfo {
                model: Some("script:x".into()),
                agents: vec!["fake".into()],
            },
        );
        assert_eq!(
            (s.model.as_deref(), &s.agents[..]),
            (Some("script:x"), &["fake".to_string()][..])
        );
    }

    #[test]
    fn turn_started_and_ended_drive_the_working_mark() {
        let mut s = State::new();
        apply(&mut s, 1, Event::TurnStarted);
        assert!(s.turn_running);
        apply(
            &mut s,
            2,
            Event::TurnEnded {
                stop_reason: StopReason::Cancelled,
            },
        );
        assert!(!s.turn_running);
    }

    #[test]
    fn a_continued_session_says_so_and_the_models_context_is_not_drawn() {
        let mut s = State::new();
        apply(
            &mut s,
            1,
            Event::ChatMessage {
                message: crate::event::ChatEntry::User {
                    content: "hi".into(),
                },
            },
        );
        apply(&mut s, 2, Event::ChatReset);
        assert!(
            s.cells.is_empty(),
            "the context is the model's, not the screen's"
        );
        apply(
            &mut s,
            3,
            Event::SessionResumed {
                at: "2026-12-01T18:00:00Z".into(),
                quorum_version: "0.1.0".into(),
            },
        );
        assert!(matches!(
            &s.cells[0].kind,
            cells::CellKind::Notice { text, .. }
                if text == "session continued 2026-12-01T18:00:00Z (quorum 0.1.0)"
        ));
    }

    #[test]
    fn model_retry_shows_until_the_model_answers() {
        let mut s = State::new();
        apply(
            &mut s,
            1,
            Event::ModelRetry {
                attempt: 2,
                wait_ms: 1500,
                reason: "rate limited".into(),
            },
        );
        assert_eq!(s.retry, Some((2, 1500, "rate limited".into())));
        apply(&mut s, 2, Event::AssistantDelta { text: "ok".into() });
        assert_eq!(s.retry, None);
    }

    /// Commands an agent announced outside its calls are what Tab offers
    /// after `@NAME /`, cleaned for the screen.
    #[test]
    fn an_agents_commands_announced_outside_a_call_are_kept() {
        use crate::event::AgentCommand;
        let mut s = State::new();
        apply(
            &mut s,
            1,
            Event::AgentCommands {
                agent: "claude".into(),
                commands: vec![AgentCommand {
                    name: "re\u{1b}[31mview".into(),
                    description: "Review".into(),
                    hint: None,
                }],
            },
        );
        let names: Vec<&str> = s.agent_commands["claude"]
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, ["review"]);
    }

    /// The chats `/model` offers are what Tab completes after `/model `:
    /// cleaned for the screen, one word each (a server's odd ids left out).
    #[test]
    fn the_model_choices_are_kept_for_completion() {
        let mut s = State::new();
        let specs = [
            "acp:claude",
            "openai:q\u{1b}[31mwen",
            "openai:two words",
            "",
        ];
        let specs = specs.iter().map(|s| s.to_string()).collect();
        apply(&mut s, 1, Event::ModelChoices { specs });
        assert_eq!(s.model_choices, ["acp:claude", "openai:qwen"]);
    }

    /// The chat's conductor: its name from its session, its permission
    /// request a cell the keys answer (as call `chat`) until it is
    /// resolved, its usage the status line's.
    #[test]
    fn the_conductors_session_permission_and_usage() {
        use crate::event::{Activity, CHAT_CALL, SessionKind, Usage};
        let mut s = State::new();
        apply(
            &mut s,
            1,
            Event::ConductorSession {
                agent: "claude".into(),
                session: SessionKind::Fresh,
                session_id: "s1".into(),
            },
        );
        assert_eq!(s.conductor.as_deref(), Some("claude"));
        apply(
            &mut s,
            2,
            Event::ChatActivity {
                activity: Activity::PermissionRequest {
                    id: "p1".into(),
                    title: "Bash: npm test".into(),
                    options: vec!["Allow once".into(), "Reject".into()],
                    detail: Box::default(),
                },
            },
        );
        assert_eq!(
            s.pending_permission(),
            Some((CHAT_CALL.to_string(), "p1".to_string(), 2))
        );
        assert_eq!(s.needs_you(), 1);
        assert!(matches!(
            &s.cells.last().unwrap().kind,
            cells::CellKind::ChatPermission(p)
                if p.agent == "claude" && p.title == "Bash: npm test" && p.answer.is_none()
        ));
        // Another request's answer leaves it waiting; its own resolves it.
        for (t, id) in [(3, "p0"), (4, "p1")] {
            apply(
                &mut s,
                t,
                Event::ChatActivity {
                    activity: Activity::PermissionResolved {
                        id: id.into(),
                        outcome: "Allow once".into(),
                    },
                },
            );
        }
        assert_eq!(s.pending_permission(), None);
        assert_eq!(s.needs_you(), 0);
        assert!(matches!(
            &s.cells.last().unwrap().kind,
            cells::CellKind::ChatPermission(p) if p.answer.as_deref() == Some("Allow once")
        ));
        let usage = Usage {
            used: 12_000,
            size: Some(200_000),
            cost: None,
        };
        apply(
            &mut s,
            5,
            Event::ChatActivity {
                activity: Activity::Usage {
                    usage: usage.clone(),
                },
            },
        );
        assert_eq!(s.chat_usage, Some(usage));
    }

    #[test]
    fn usage_adds_up() {
        let mut s = State::new();
        for t in 0..2 {
            apply(
                &mut s,
                t,
                Event::Usage {
                    input_tokens: 10,
                    output_tokens: 3,
                },
            );
        }
        assert_eq!((s.input_tokens, s.output_tokens), (20, 6));
    }

    #[test]
    fn running_and_queued_are_read_off_the_open_boxes() {
        let mut s = State::new();
        apply(&mut s, 1, batch_started());
        apply(&mut s, 2, member("c1", "a", true));
        apply(&mut s, 2, member("c2", "b", true));
        assert_eq!((s.running(), s.queued()), (2, 2));
        // The board's snapshot says c1 runs: it waits no more, though no
        // dequeue event came.
        apply(
            &mut s,
            3,
            Event::TaskProgress {
                call_id: "c1".into(),
                task_id: Some("t-c1".into()),
                summary: Summary {
                    state: TaskState::Running,
                    ..Summary::default()
                },
            },
        );
        assert_eq!((s.running(), s.queued()), (2, 1));
        // A call id used again: its newer box counts, the older one not.
        apply(&mut s, 4, member("c2", "b", false));
        assert_eq!((s.running(), s.queued()), (2, 0));
        // A box that ends twice leaves the count once.
        for t in [5, 6] {
            apply(
                &mut s,
                t,
                Event::SubagentFinished {
                    call_id: "c1".into(),
                    output: "done".into(),
                    stop_reason: StopReason::EndTurn,
                    severity: None,
                    findings: Vec::new(),
                },
            );
        }
        assert_eq!((s.running(), s.queued()), (1, 0));
        assert_eq!(s.latest_running_call().as_deref(), Some("c2"));
    }

    #[test]
    fn a_conductors_session_names_its_requests_which_are_answered_in_place() {
        use crate::event::{Activity, SessionKind};
        let mut s = State::new();
        apply(
            &mut s,
            1,
            Event::ConductorSession {
                agent: "claude".into(),
                session: SessionKind::Fresh,
                session_id: "s-1".into(),
            },
        );
        assert_eq!(s.conductor.as_deref(), Some("claude"));
        let ask = Activity::PermissionRequest {
            id: "p1".into(),
            title: "Delete build/".into(),
            options: vec!["Allow once".into()],
            detail: Box::default(),
        };
        apply(&mut s, 2, Event::ChatActivity { activity: ask });
        let answered = Activity::PermissionResolved {
            id: "p1".into(),
            outcome: "Allow once".into(),
        };
        apply(&mut s, 3, Event::ChatActivity { activity: answered });
        assert!(s.chat_asking.is_none(), "answered, asked no more");
    }

    /// Each event kind has its test; a new kind must get one.
    #[test]
    fn every_event_kind_is_covered() {
        let covered = [
            "session_info",
            "user_message",
            "assistant_delta",
            "assistant_end",
            "assistant_writing_call",
            "turn_started",
            "turn_ended",
            "tool_call_started",
            "tool_call_finished",
            "subagent_started",
            "subagent_dequeued",
            "subagent_backgrounded",
            "subagent_cancelling",
            "batch_started",
            "batch_finished",
            "review_quorum",
            "subagent_session",
            "subagent_followup",
            "subagent_activity",
            "subagent_child",
            "subagent_child_activity",
            "child_progress",
            "subagent_finished",
            "task_progress",
            "task_reported",
            "model_retry",
            "agent_commands",
            "model_choices",
            "conductor_session",
            "chat_activity",
            "usage",
            "notice",
            "error",
            "session_resumed",
            "chat_message",
            "chat_reset",
            "worktree_ready",
            "worktree_committed",
            "check_finished",
            "branch_verdict",
            "branch_merged",
            "branch_discarded",
            "session_spend",
            "budget_set",
            "prices_set",
            "budget_warning",
            "budget_reached",
            "arena_compared",
        ];
        assert_eq!(covered, Event::TYPES);
    }
}
