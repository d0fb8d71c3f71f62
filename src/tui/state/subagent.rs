//! The box of a `subagent` call, and the events that open it, start it
//! from the queue, reopen it for a follow-up, close it, and announce its
//! agent's child sessions (each drawn as a box inside it).

use std::collections::VecDeque;

use super::{ActivityLine, CellKind, Changes, Log, LogEntry, Member, State, Task, ToolInfo, clean};
use crate::event::finding::{Check, Finding};
use crate::event::{
    AgentRef, ChildState, Event, PlanEntry, PlanStatus, SessionKind, Severity, StopReason, Summary,
    TaskState,
};

/// A `subagent` call's box.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentBox {
    pub call_id: String,
    pub task_id: Option<String>,
    pub agent: AgentRef,
    pub input: String,
    pub code_review: bool,
    pub background: bool,
    pub session: Option<SessionKind>,
    pub started: u64,
    pub finished: Option<u64>,
    /// The last few things the agent did, oldest first.
    pub activity: VecDeque<ActivityLine>,
    pub plan: Vec<PlanEntry>,
    /// An unanswered permission request: id, title, options.
    pub permission: Option<(String, String, Vec<String>)>,
    /// What that request asks about (path, command, diff).
    pub permission_detail: ToolInfo,
    pub output: Option<String>,
    pub stop_reason: Option<StopReason>,
    pub severity: Option<Severity>,
    /// A review's findings, as its end carried them.
    pub findings: Vec<Finding>,
    /// What another reviewer said of each of `findings` (the same order),
    /// once its quorum checked itself; empty until then.
    pub checks: Vec<Option<Check>>,
    /// What quorum told of the call (the last few), kept when it ends.
    pub notices: VecDeque<String>,
    pub session_id: Option<String>,
    /// Everything the agent did (bounded), for the opened box.
    pub log: Log,
    /// What its tool calls changed, for the finished box's summary line.
    pub changes: Changes,
    /// The board's latest snapshot of the call, sanitised, as the side
    /// panel shows it: its state (queued until its place comes, then as
    /// the snapshots say, and as its end says once it ended), its tool
    /// calls, its context and cost and its part of the totals; waiting for
    /// the person, and asked to stop with its agent not stopped yet, only
    /// while the box runs. (`severity` is its report's verdict.)
    pub summary: Summary,
    /// The batch it is a task of: its box is drawn inside the group.
    pub batch: Option<Grouped>,
    /// The child sessions its agent announced, in order: drawn nested
    /// inside its box.
    pub children: Vec<ChildBox>,
    /// Its streamed text and thoughts, cleaned as they arrive.
    pub(super) streams: Streams,
    /// A task with a worktree of its own: its branch and what it changed.
    /// (Boxed, as the question below: few boxes have one, and a long
    /// session holds many boxes.)
    pub worktree: Option<Box<WorktreeLine>>,
    /// A question (an elicitation) waiting for the person.
    pub question: Option<Box<super::Question>>,
    /// Its turns before the current one (follow-ups), oldest first: each
    /// shown with its input above its output. At most [`EARLIER_TURNS`];
    /// `earlier_dropped` counts those let go.
    pub earlier: VecDeque<EarlierTurn>,
    pub earlier_dropped: usize,
    /// The current turn's input, when it is a follow-up (`input` is the
    /// first turn's).
    pub turn_input: Option<String>,
    /// The current turn's session is open: its agent has it and says
    /// nothing yet (`waiting for NAME`), rather than still `starting…`.
    pub opened: bool,
    /// The terminals its agent ran commands in (quorum's).
    pub terminals: super::Terminals,
    /// What its agent announced of its session: commands, mode, options.
    pub announced: super::Announced,
}

/// How many earlier turns a box keeps.
pub const EARLIER_TURNS: usize = 8;

/// A turn of a call before its current one.
#[derive(Debug, Clone, PartialEq)]
pub struct EarlierTurn {
    /// The first line of its input.
    pub input: String,
    pub output: String,
    pub stop_reason: Option<StopReason>,
}

/// A worktree task's branch, as its box shows it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorktreeLine {
    pub branch: String,
    /// `from HEAD`, or `from HEAD + your uncommitted changes`.
    pub base: String,
    /// Set once its work was committed.
    pub diffstat: Option<crate::event::Diffstat>,
    /// The branch's diff, for the opened box (sanitised).
    pub diff: String,
    /// `merged into main`, `discarded`, once it is.
    pub fate: Option<String>,
    /// What `[worktree] check` found on its latest commit.
    pub check: Option<CheckLine>,
}

/// A writer's check, as its box shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckLine {
    /// `✓ check passed · 12 passed`, `✗ check failed · 2 failed of 14`,
    /// `⏱ check timed out after 600 s`.
    pub line: String,
    pub passed: bool,
    /// The commit it checked.
    pub commit: String,
    /// Its output (sanitised), for the opened box.
    pub output: String,
    /// The tests and check configuration the branch changes.
    pub touches_tests: Vec<String>,
}

/// A box's two streams of text, each cleaned across its chunks.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Streams {
    text: crate::confine::sanitize::Stream,
    thought: crate::confine::sanitize::Stream,
}

impl Streams {
    pub(super) fn clean<'a>(&mut self, chunk: &'a str, thought: bool) -> std::borrow::Cow<'a, str> {
        if thought {
            self.thought.push(chunk)
        } else {
            self.text.push(chunk)
        }
    }
}

/// A child session of a call's agent (a nested sub-agent), as its box
/// inside the call's box shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildBox {
    pub child_id: String,
    pub title: Option<String>,
    pub description: Option<String>,
    /// The agent's word on its work, when it gave one.
    pub state: Option<ChildState>,
    pub can_cancel: bool,
    /// The board's latest snapshot of it.
    pub summary: Summary,
    /// The last few things it did, oldest first.
    pub activity: VecDeque<ActivityLine>,
    pub(super) streams: Streams,
}

impl ChildBox {
    /// Its title, else its session id.
    pub fn name(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.child_id)
    }

    /// Its agent lets it be cancelled alone, and it is not idle (while
    /// its call runs).
    pub fn cancellable(&self) -> bool {
        self.can_cancel && self.state != Some(ChildState::Idle)
    }
}

/// A box's place in its batch's group.
#[derive(Debug, Clone, PartialEq)]
pub struct Grouped {
    pub batch_id: String,
    /// The batch's tint (its quorum's or worst verdict), once known.
    pub tint: Option<Severity>,
    /// The last box of a finished batch: it closes the group.
    pub last: bool,
}

impl SubagentBox {
    pub fn running(&self) -> bool {
        self.finished.is_none()
    }

    pub fn queued(&self) -> bool {
        self.running() && self.summary.state == TaskState::Queued
    }

    /// A box as its call opens: who was asked what, when, and in what
    /// state; nothing done yet.
    fn new(
        call_id: String,
        agent: AgentRef,
        input: String,
        started: u64,
        state: TaskState,
    ) -> Self {
        SubagentBox {
            findings: Vec::new(),
            checks: Vec::new(),
            call_id,
            task_id: None,
            agent,
            input,
            code_review: false,
            background: false,
            session: None,
            started,
            finished: None,
            activity: VecDeque::new(),
            plan: Vec::new(),
            permission: None,
            permission_detail: ToolInfo::default(),
            output: None,
            stop_reason: None,
            severity: None,
            notices: VecDeque::new(),
            session_id: None,
            log: Log::default(),
            changes: Changes::default(),
            summary: Summary {
                state,
                ..Summary::default()
            },
            children: Vec::new(),
            streams: Streams::default(),
            worktree: None,
            question: None,
            earlier: VecDeque::new(),
            earlier_dropped: 0,
            turn_input: None,
            opened: false,
            terminals: super::Terminals::default(),
            batch: None,
            announced: super::Announced::default(),
        }
    }

    /// Keeps only what a finished box draws, each text in just the room
    /// it needs (text that streamed in grew by doubling): for a finished
    /// box that let its detail go, which seldom changes again. Its last
    /// activity lines are let go: only a running box draws them, and a
    /// follow-up starts without them.
    pub(super) fn compact(&mut self) {
        self.input.shrink_to_fit();
        if let Some(output) = &mut self.output {
            output.shrink_to_fit();
        }
        self.activity = VecDeque::new();
        self.notices.iter_mut().for_each(String::shrink_to_fit);
        self.notices.shrink_to_fit();
        for turn in &mut self.earlier {
            turn.input.shrink_to_fit();
            turn.output.shrink_to_fit();
        }
        self.earlier.shrink_to_fit();
        self.plan.shrink_to_fit();
        self.children.shrink_to_fit();
    }
}

/// The panel's task for a call started in the background: its first
/// line of input.
fn started_task(
    t: u64,
    call_id: &str,
    task_id: &str,
    agent: &AgentRef,
    input: &str,
    code_review: bool,
    state: TaskState,
) -> Task {
    Task {
        task_id: clean(task_id),
        call_id: call_id.to_string(),
        agent: agent.name().to_string(),
        input: clean(input.lines().find(|l| !l.trim().is_empty()).unwrap_or("")),
        code_review,
        started: t,
        finished: None,
        summary: Summary {
            state,
            ..Summary::default()
        },
        reported: false,
    }
}

impl State {
    pub(super) fn subagent(&mut self, call_id: &str) -> Option<&mut SubagentBox> {
        let index = *self.calls.get(call_id)?;
        match self.touch(index) {
            CellKind::Subagent(b) => Some(b),
            _ => None,
        }
    }

    pub(super) fn child(&mut self, call_id: &str, child_id: &str) -> Option<&mut ChildBox> {
        self.subagent(call_id)?
            .children
            .iter_mut()
            .find(|c| c.child_id == child_id)
    }

    /// Opens a call's box (and its panel task, and its place in its
    /// batch's header). `started` is a [`Event::SubagentStarted`]: its nine
    /// fields are too many to hand over one by one.
    pub(super) fn on_subagent_started(&mut self, t: u64, started: &Event) {
        let Event::SubagentStarted {
            call_id,
            task_id,
            agent,
            input,
            code_review,
            background,
            session,
            batch_id,
            queued,
            ..
        } = started
        else {
            return;
        };
        self.open_assistant = None;
        // A call the model wrote as text runs: it is written.
        self.writing_call = None;
        let state = if *queued {
            TaskState::Queued
        } else {
            TaskState::Running
        };
        let agent = match agent {
            AgentRef::Internal => AgentRef::Internal,
            AgentRef::Acp(name) => AgentRef::Acp(clean(name)),
        };
        if let Some(task_id) = task_id {
            let task = started_task(t, call_id, task_id, &agent, input, *code_review, state);
            self.push_task(task_id, task);
        }
        if let Some(header) = batch_id.as_deref().and_then(|id| self.batch(id)) {
            header.members.push(Member {
                call_id: call_id.clone(),
                agent: agent.name().to_string(),
                summary: Summary {
                    state,
                    ..Summary::default()
                },
            });
        }
        let internal = agent == AgentRef::Internal;
        let batch = batch_id
            .as_ref()
            .filter(|id| self.batches.contains_key(*id))
            .map(|id| Grouped {
                batch_id: id.clone(),
                tint: None,
                last: false,
            });
        let i = self.push_box(SubagentBox {
            task_id: task_id.clone(),
            code_review: *code_review,
            background: *background,
            session: *session,
            // The internal agent has no session to open: it asks its model
            // at once.
            opened: session.is_some() || internal,
            batch,
            ..SubagentBox::new(call_id.clone(), agent, clean(input), t, state)
        });
        // A call id used twice replaces the older box's entry: the older
        // box counts no more.
        if let Some(old) = self.calls.insert(call_id.clone(), i) {
            self.open.remove(&old);
        }
        self.track(i);
    }

    pub(super) fn on_subagent_dequeued(&mut self, t: u64, call_id: &str) {
        let Some(&index) = self.calls.get(call_id) else {
            return;
        };
        let dequeued = self.edit_box(index, |b| {
            if !b.queued() {
                return None;
            }
            // Its time counts from when it runs.
            b.summary.state = TaskState::Running;
            b.started = t;
            Some(b.task_id.clone())
        });
        if let Some(Some(Some(task_id))) = dequeued {
            self.edit_task(&task_id, |task| {
                task.started = t;
                task.summary.state = TaskState::Running;
            });
        }
    }

    /// A call goes on in the background: its box says so, and it joins
    /// the side panel as the task it now is, with what its box has so far.
    pub(super) fn on_subagent_backgrounded(&mut self, call_id: &str, task_id: &str) {
        let Some(&index) = self.calls.get(call_id) else {
            return;
        };
        if self.task_index.contains_key(task_id) {
            return;
        }
        let task = self.edit_box(index, |b| {
            if b.task_id.is_some() {
                return None;
            }
            b.task_id = Some(task_id.to_string());
            b.background = true;
            Some(Task {
                task_id: clean(task_id),
                call_id: call_id.to_string(),
                agent: b.agent.name().to_string(),
                input: b
                    .input
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .to_string(),
                code_review: b.code_review,
                started: b.started,
                finished: b.finished,
                summary: b.summary.clone(),
                reported: false,
            })
        });
        if let Some(Some(task)) = task {
            self.push_task(task_id, task);
        }
    }

    pub(super) fn on_subagent_session(
        &mut self,
        call_id: &str,
        session: SessionKind,
        session_id: Option<&str>,
    ) {
        if let Some(b) = self.subagent(call_id) {
            b.session = Some(session);
            b.opened = true;
            if let Some(id) = session_id {
                b.session_id = Some(clean(id));
            }
        }
    }

    pub(super) fn on_subagent_followup(&mut self, call_id: &str, input: &str) {
        let Some(b) = self.subagent(call_id) else {
            return;
        };
        // The box reopens for the new turn; the turn before keeps its
        // input and output above it.
        let input = clean(input);
        let before = b.turn_input.take().unwrap_or_else(|| b.input.clone());
        if b.earlier.len() == EARLIER_TURNS {
            b.earlier.pop_front();
            b.earlier_dropped += 1;
        }
        b.earlier.push_back(EarlierTurn {
            input: first_line(&before).to_string(),
            output: b.output.take().unwrap_or_default(),
            stop_reason: b.stop_reason.take(),
        });
        b.finished = None;
        b.severity = None;
        b.opened = false;
        // What the agent did in the turn before is that turn's.
        b.activity.clear();
        b.turn_input = Some(input.clone());
        b.log.push(LogEntry::Turn(input));
        let task_id = b.task_id.clone();
        self.track_call(call_id);
        if let Some(task_id) = task_id {
            self.edit_task(&task_id, |task| {
                task.finished = None;
                task.reported = false;
                task.summary.state = TaskState::Running;
                task.summary.severity = None;
            });
        }
    }

    pub(super) fn on_subagent_child(
        &mut self,
        call_id: &str,
        child_id: &str,
        title: Option<&str>,
        description: Option<&str>,
        state: Option<ChildState>,
        can_cancel: bool,
    ) {
        let Some(b) = self.subagent(call_id) else {
            return;
        };
        let child = match b.children.iter().position(|c| c.child_id == child_id) {
            Some(i) => &mut b.children[i],
            None => {
                b.children.push(ChildBox {
                    child_id: clean(child_id),
                    title: None,
                    description: None,
                    state: None,
                    can_cancel: false,
                    summary: Summary::default(),
                    activity: VecDeque::new(),
                    streams: Streams::default(),
                });
                b.children.last_mut().expect("just pushed")
            }
        };
        // Each announcement carries all that is known of it.
        child.title = title.map(clean);
        child.description = description.map(clean);
        child.state = state;
        child.can_cancel = can_cancel;
    }

    /// A task's worktree is ready: its box names the branch.
    pub(super) fn on_worktree_ready(&mut self, call_id: &str, branch: &str, base: &str) {
        let Some(i) = self.box_index(call_id) else {
            return;
        };
        let base = if base == "uncommitted" {
            "from HEAD + your uncommitted changes"
        } else {
            "from HEAD"
        };
        self.edit_box(i, |b| {
            b.worktree = Some(Box::new(WorktreeLine {
                branch: clean(branch),
                base: base.to_string(),
                ..WorktreeLine::default()
            }));
        });
    }

    /// A task's work was committed: its box shows the diffstat, the
    /// opened box the diff.
    pub(super) fn on_worktree_committed(
        &mut self,
        call_id: &str,
        diffstat: crate::event::Diffstat,
        diff: &str,
    ) {
        let Some(i) = self.box_index(call_id) else {
            return;
        };
        let diff = clean(diff);
        self.edit_box(i, |b| {
            if let Some(w) = &mut b.worktree {
                w.diffstat = Some(diffstat);
                w.diff = diff;
            }
        });
    }

    /// A writer's check finished: its box says what it found, the opened
    /// box its output.
    pub(super) fn on_check_finished(&mut self, call_id: &str, check: CheckLine) {
        let Some(i) = self.box_index(call_id) else {
            return;
        };
        self.edit_box(i, |b| {
            if let Some(w) = &mut b.worktree {
                w.check = Some(check);
            }
        });
    }

    /// A branch was merged or thrown away: its boxes say so.
    pub(super) fn on_branch_fate(&mut self, branch: &str, fate: String) {
        let branch = clean(branch);
        let boxes: Vec<usize> = self
            .calls
            .values()
            .copied()
            .filter(|&i| {
                matches!(&self.cells[i].kind, CellKind::Subagent(b)
                    if b.worktree.as_ref().is_some_and(|w| w.branch == branch))
            })
            .collect();
        for i in boxes {
            self.edit_box(i, |b| {
                if let Some(w) = &mut b.worktree {
                    w.fate = Some(fate.clone());
                }
            });
        }
    }

    pub(super) fn on_subagent_finished(
        &mut self,
        t: u64,
        call_id: &str,
        output: &str,
        (stop_reason, severity): (StopReason, Option<Severity>),
        findings: &[Finding],
    ) {
        let Some(&index) = self.calls.get(call_id) else {
            return;
        };
        self.edit_box(index, |b| {
            b.findings = findings.to_vec();
            b.finished = Some(t);
            b.output = Some(clean(output));
            b.stop_reason = Some(stop_reason);
            b.severity = severity;
            b.permission = None;
            b.question = None;
            b.summary.waiting = false;
            b.summary.state = TaskState::from_stop_reason(stop_reason);
        });
        self.asking.remove(&index);
        self.eliciting.remove(&index);
        self.track_call(call_id);
        self.hold_detail(index);
    }

    /// Notes whether the box at `index` is open (running, or queued), as
    /// its own state says: the index the open and queued counts are read
    /// from.
    fn track(&mut self, index: usize) {
        if matches!(&self.cells[index].kind, CellKind::Subagent(b) if b.running()) {
            self.open.insert(index);
            self.running_boxes.insert(index);
        } else {
            self.open.remove(&index);
            self.running_boxes.remove(&index);
        }
    }

    /// [`State::track`] for a call's box.
    fn track_call(&mut self, call_id: &str) {
        if let Some(&index) = self.calls.get(call_id) {
            self.track(index);
        }
    }
}

/// The first line of `text` that is not blank.
pub fn first_line(text: &str) -> &str {
    text.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
}

/// Plan progress: `(completed, total, current entry)`.
pub fn plan_progress(plan: &[PlanEntry]) -> (usize, usize, Option<&str>) {
    let done = plan
        .iter()
        .filter(|e| e.status == PlanStatus::Completed)
        .count();
    let current = plan
        .iter()
        .find(|e| e.status == PlanStatus::InProgress)
        .or_else(|| plan.iter().find(|e| e.status == PlanStatus::Pending))
        .map(|e| e.content.as_str());
    (done, plan.len(), current)
}

#[cfg(test)]
mod tests {
    //! What applying the events of a call's box changes on screen.

    use super::*;
    use crate::event::build;
    use crate::tui::state::fixtures::*;

    #[test]
    fn a_worktree_task_box_names_its_branch_then_its_diffstat_then_its_fate() {
        let mut s = State::new();
        apply(&mut s, 1, started(true));
        let call_id = the_box(&s).call_id.clone();
        apply(
            &mut s,
            2,
            Event::WorktreeReady {
                call_id: call_id.clone(),
                task_id: Some("t1".into()),
                branch: "quorum/t1-fix\u{1b}[31m".into(),
                path: "/w".into(),
                base: "uncommitted".into(),
                base_commit: "abc".into(),
            },
        );
        let w = the_box(&s).worktree.clone().unwrap();
        assert_eq!(w.branch, "quorum/t1-fix", "sanitised");
        assert_eq!(w.base, "from HEAD + your uncommitted changes");
        assert_eq!(w.diffstat, None);
        apply(
            &mut s,
            3,
            Event::WorktreeCommitted {
                call_id: call_id.clone(),
                branch: "quorum/t1-fix\u{1b}[31m".into(),
                commit: Some("def".into()),
                diffstat: crate::event::Diffstat {
                    added: 42,
                    removed: 7,
                    files: 3,
                },
                diff: "+ok\u{1b}]0;title\u{7}".into(),
            },
        );
        let w = the_box(&s).worktree.clone().unwrap();
        assert_eq!(w.diffstat.unwrap().to_string(), "+42 −7 in 3 files");
        assert!(!w.diff.contains('\u{1b}'), "{:?}", w.diff);
        apply(
            &mut s,
            4,
            Event::CheckFinished {
                call_id: call_id.clone(),
                branch: "quorum/t1-fix".into(),
                commit: "def".into(),
                passed: false,
                counts: Some(crate::event::CheckCounts {
                    passed: 12,
                    failed: 2,
                }),
                timed_out: None,
                output: "FAILED\u{1b}[2J".into(),
                touches_tests: vec!["tests/a.rs".into()],
                missing: None,
                ms: None,
            },
        );
        let check = the_box(&s).worktree.clone().unwrap().check.unwrap();
        assert_eq!(check.line, "✗ check failed · 2 failed of 14");
        assert!(!check.output.contains('\u{1b}'), "{:?}", check.output);
        assert_eq!(check.touches_tests, ["tests/a.rs"]);
        apply(
            &mut s,
            4,
            Event::BranchMerged {
                branch: "quorum/t1-fix\u{1b}[31m".into(),
                into: "main".into(),
            },
        );
        assert_eq!(
            the_box(&s).worktree.as_ref().unwrap().fate.as_deref(),
            Some("merged into main")
        );
    }

    #[test]
    fn subagent_started_opens_a_box_and_a_task() {
        let mut s = State::new();
        apply(&mut s, 7, started(true));
        let b = the_box(&s);
        assert_eq!(b.agent, AgentRef::Acp("fake".into()), "sanitised");
        assert!(b.running() && b.code_review && b.background);
        assert_eq!(s.running(), 1);
        assert_eq!(s.tasks[0].task_id, "t1");
        assert_eq!(s.tasks[0].input, "review it", "the first line");
        assert_eq!(s.tasks[0].started, 7);
        assert_eq!(s.latest_running_call().as_deref(), Some("c1"));
    }

    #[test]
    fn subagent_backgrounded_makes_a_running_box_a_panel_task() {
        let mut s = State::new();
        apply(&mut s, 5, started(false));
        apply(&mut s, 6, build::chunk("c1", "reading\n"));
        assert!(s.tasks.is_empty());
        apply(&mut s, 9, build::backgrounded("c1", "t1"));
        let b = box_of(&s, "c1");
        assert_eq!((b.task_id.as_deref(), b.background), (Some("t1"), true));
        assert_eq!(s.tasks.len(), 1);
        let task = &s.tasks[0];
        assert_eq!(
            (
                task.task_id.as_str(),
                task.call_id.as_str(),
                task.input.as_str(),
                task.started,
                task.summary.state
            ),
            ("t1", "c1", "review it", 5, TaskState::Running)
        );
        assert_eq!(s.task_counts(), (1, 0));
        // Once: a second one changes nothing, nor one for another call.
        apply(&mut s, 10, build::backgrounded("c1", "t4"));
        apply(&mut s, 10, build::backgrounded("c9", "t5"));
        assert_eq!(s.tasks.len(), 1);
        // Its end finishes the panel's task too.
        apply(&mut s, 20, snapshot(0, TaskState::Done, false));
        apply(&mut s, 20, build::finished("c1", "ok").event());
        assert_eq!(s.task_counts(), (0, 0));
    }

    #[test]
    fn subagent_dequeued_starts_a_queued_box_and_its_clock() {
        let mut s = State::new();
        apply(&mut s, 1, batch_started());
        apply(&mut s, 2, member("c1", "a", true));
        assert_eq!((s.running(), s.queued()), (1, 1));
        apply(
            &mut s,
            50,
            Event::SubagentDequeued {
                call_id: "c1".into(),
            },
        );
        let b = box_of(&s, "c1");
        assert_eq!(
            (b.summary.state, b.started, b.queued()),
            (TaskState::Running, 50, false)
        );
        assert_eq!((s.running(), s.queued()), (1, 0));
        assert_eq!(
            (s.tasks[0].started, s.tasks[0].summary.state),
            (50, TaskState::Running)
        );
        // Only a queued box is dequeued.
        apply(
            &mut s,
            60,
            Event::SubagentDequeued {
                call_id: "c1".into(),
            },
        );
        assert_eq!(box_of(&s, "c1").started, 50);
        // A queued box that finishes (cancelled while queued) leaves the count.
        apply(&mut s, 70, member("c2", "b", true));
        apply(
            &mut s,
            80,
            Event::SubagentFinished {
                call_id: "c2".into(),
                output: "b: cancelled while queued".into(),
                stop_reason: StopReason::Cancelled,
                severity: None,
                findings: Vec::new(),
            },
        );
        assert_eq!((s.running(), s.queued()), (1, 0));
    }

    #[test]
    fn subagent_session_sets_the_badge() {
        let mut s = State::new();
        apply(&mut s, 1, started(false));
        apply(
            &mut s,
            2,
            Event::SubagentSession {
                call_id: "c1".into(),
                session: SessionKind::Resumed,
                session_id: Some("s".into()),
            },
        );
        assert_eq!(the_box(&s).session, Some(SessionKind::Resumed));
    }

    #[test]
    fn subagent_followup_reopens_the_box_and_its_task() {
        let mut s = State::new();
        apply(&mut s, 1, started(true));
        apply(
            &mut s,
            5,
            Event::SubagentFinished {
                call_id: "c1".into(),
                output: "first".into(),
                stop_reason: StopReason::EndTurn,
                severity: Some(Severity::Green),
                findings: Vec::new(),
            },
        );
        apply(&mut s, 6, snapshot(0, TaskState::Done, false));
        assert_eq!(s.running(), 0);
        apply(
            &mut s,
            8,
            Event::SubagentFollowup {
                call_id: "c1".into(),
                input: "and the tests?\x1b[31m".into(),
            },
        );
        let b = the_box(&s);
        assert!(b.running(), "the box runs again");
        assert_eq!((b.output.as_deref(), b.severity), (None, None));
        // The turn before keeps its input and output; this one shows its
        // own input, and its session is not open yet.
        assert_eq!(
            b.earlier.iter().collect::<Vec<_>>(),
            [&EarlierTurn {
                input: "review it".into(),
                output: "first".into(),
                stop_reason: Some(StopReason::EndTurn),
            }]
        );
        assert_eq!(b.turn_input.as_deref(), Some("and the tests?"));
        assert!(b.activity.is_empty() && !b.opened);
        assert_eq!(
            b.log.entries.back(),
            Some(&LogEntry::Turn("and the tests?".into()))
        );
        assert_eq!(s.running(), 1);
        assert_eq!(s.tasks[0].summary.state, TaskState::Running);
        assert_eq!(s.tasks[0].finished, None);
        // A follow-up for an unknown call changes nothing.
        apply(
            &mut s,
            9,
            Event::SubagentFollowup {
                call_id: "c9".into(),
                input: "x".into(),
            },
        );
        assert_eq!(s.running(), 1);
    }

    #[test]
    fn subagent_finished_closes_the_box() {
        let mut s = State::new();
        apply(&mut s, 1, started(false));
        apply(
            &mut s,
            5,
            Event::SubagentFinished {
                call_id: "c1".into(),
                output: "Done.".into(),
                stop_reason: StopReason::Refusal,
                severity: Some(Severity::Red),
                findings: Vec::new(),
            },
        );
        let b = the_box(&s);
        assert_eq!(b.finished, Some(5));
        assert_eq!(b.output.as_deref(), Some("Done."));
        assert_eq!(b.stop_reason, Some(StopReason::Refusal));
        assert_eq!(b.severity, Some(Severity::Red));
        assert_eq!(s.running(), 0);
    }

    #[test]
    fn subagent_child_opens_a_child_box_in_its_call_and_updates_replace_it() {
        let mut s = State::new();
        apply(&mut s, 1, started(false));
        apply(
            &mut s,
            2,
            child(Some("scout"), Some(ChildState::Running), true),
        );
        let c = &the_box(&s).children[0];
        assert_eq!(c.name(), "scout");
        assert_eq!(c.description.as_deref(), Some("finds tests"), "sanitised");
        assert_eq!(c.state, Some(ChildState::Running));
        assert!(c.can_cancel);
        // A later announcement of the same child replaces what it says.
        apply(&mut s, 3, child(None, Some(ChildState::Idle), false));
        let b = the_box(&s);
        assert_eq!(b.children.len(), 1, "the same child");
        assert_eq!(b.children[0].name(), "s-1-child", "its id without a title");
        assert_eq!(b.children[0].state, Some(ChildState::Idle));
        assert!(!b.children[0].can_cancel);
        // A child of an unknown call is ignored.
        apply(
            &mut s,
            4,
            Event::SubagentChild {
                call_id: "nope".into(),
                child_id: "x".into(),
                title: None,
                description: None,
                state: None,
                can_cancel: false,
            },
        );
        assert_eq!(the_box(&s).children.len(), 1);
    }
}
