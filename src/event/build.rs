//! Event builders: the common case of an event in one line, and the rest
//! said by name, e.g. `build::started("c1", agent).review().background("t1")`.
//!
//! For tests, benchmarks and the importers, in place of the literals with
//! every field written out. What a builder is not told is the event's plain
//! case: a call in the foreground with no task, batch or session, not a
//! review, not queued; a turn that ended normally with no verdict.

use super::{Activity, AgentRef, Event, SessionKind, Severity, StopReason, Summary};

/// A `subagent_started`: a call's box opens.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct Started {
    call_id: String,
    task_id: Option<String>,
    agent: AgentRef,
    input: String,
    code_review: bool,
    background: bool,
    session: Option<SessionKind>,
    batch_id: Option<String>,
    queued: bool,
}

/// Call `call_id` on `agent` starts: in the foreground, with no input, no
/// task, batch or session, not a review, not queued.
pub fn started(call_id: impl Into<String>, agent: AgentRef) -> Started {
    Started {
        call_id: call_id.into(),
        task_id: None,
        agent,
        input: String::new(),
        code_review: false,
        background: false,
        session: None,
        batch_id: None,
        queued: false,
    }
}

impl Started {
    /// What the call was asked.
    pub fn input(mut self, input: impl Into<String>) -> Self {
        self.input = input.into();
        self
    }

    /// A code review: its verdict tints the box.
    pub fn review(self) -> Self {
        self.code_review(true)
    }

    /// A code review or not, when that is worked out.
    pub fn code_review(mut self, code_review: bool) -> Self {
        self.code_review = code_review;
        self
    }

    /// A background task: task `task_id`, run in the background.
    pub fn background(mut self, task_id: impl Into<String>) -> Self {
        self.background = true;
        self.task(task_id)
    }

    /// Task `task_id`, without saying it runs in the background.
    pub fn task(mut self, task_id: impl Into<String>) -> Self {
        self.task_id = Some(task_id.into());
        self
    }

    /// How the session was opened, known at start.
    pub fn session(mut self, session: SessionKind) -> Self {
        self.session = Some(session);
        self
    }

    /// A task of batch `batch_id`.
    pub fn batch(mut self, batch_id: impl Into<String>) -> Self {
        self.batch_id = Some(batch_id.into());
        self
    }

    /// Waiting for a free place before it runs.
    pub fn queued(mut self) -> Self {
        self.queued = true;
        self
    }
}

impl From<Started> for Event {
    fn from(s: Started) -> Self {
        Event::SubagentStarted {
            call_id: s.call_id,
            task_id: s.task_id,
            agent: s.agent,
            input: s.input,
            code_review: s.code_review,
            background: s.background,
            session: s.session,
            batch_id: s.batch_id,
            queued: s.queued,
            max_cost: None,
        }
    }
}

/// A `subagent_finished`: a call's end and its output.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct Finished {
    call_id: String,
    output: String,
    stop_reason: StopReason,
    severity: Option<Severity>,
    findings: Vec<crate::event::finding::Finding>,
}

/// Call `call_id` ended its turn normally (`end_turn`) with `output`, and
/// no verdict.
pub fn finished(call_id: impl Into<String>, output: impl Into<String>) -> Finished {
    Finished {
        call_id: call_id.into(),
        output: output.into(),
        stop_reason: StopReason::EndTurn,
        severity: None,
        findings: Vec::new(),
    }
}

impl Finished {
    /// A review's findings.
    pub fn findings(mut self, findings: Vec<crate::event::finding::Finding>) -> Self {
        self.findings = findings;
        self
    }

    /// Why the turn ended.
    pub fn stop(mut self, stop_reason: StopReason) -> Self {
        self.stop_reason = stop_reason;
        self
    }

    /// A review's verdict (`Severity::Red`, or an `Option` of one).
    pub fn severity(mut self, severity: impl Into<Option<Severity>>) -> Self {
        self.severity = severity.into();
        self
    }
}

impl From<Finished> for Event {
    fn from(f: Finished) -> Self {
        Event::SubagentFinished {
            call_id: f.call_id,
            output: f.output,
            stop_reason: f.stop_reason,
            severity: f.severity,
            findings: f.findings,
        }
    }
}

/// A `subagent_activity`: something call `call_id`'s agent did.
pub fn activity(call_id: impl Into<String>, activity: Activity) -> Event {
    Event::SubagentActivity {
        call_id: call_id.into(),
        activity,
    }
}

/// A `subagent_activity` of a chunk of call `call_id`'s message text.
pub fn chunk(call_id: impl Into<String>, text: impl Into<String>) -> Event {
    activity(call_id, Activity::MessageChunk { text: text.into() })
}

/// A `task_progress`: the task board's snapshot of a call.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct Progress {
    call_id: String,
    task_id: Option<String>,
    summary: Summary,
}

/// The board's `summary` of call `call_id`, which is no task.
pub fn progress(call_id: impl Into<String>, summary: Summary) -> Progress {
    Progress {
        call_id: call_id.into(),
        task_id: None,
        summary,
    }
}

impl Progress {
    /// The call is task `task_id`.
    pub fn task(mut self, task_id: impl Into<String>) -> Self {
        self.task_id = Some(task_id.into());
        self
    }
}

impl From<Progress> for Event {
    fn from(p: Progress) -> Self {
        Event::TaskProgress {
            call_id: p.call_id,
            task_id: p.task_id,
            summary: p.summary,
        }
    }
}

/// A `subagent_session`: the call's session is open.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct Session {
    call_id: String,
    session: SessionKind,
    session_id: Option<String>,
}

/// Call `call_id`'s session was opened as `session` (its id not given).
pub fn session(call_id: impl Into<String>, session: SessionKind) -> Session {
    Session {
        call_id: call_id.into(),
        session,
        session_id: None,
    }
}

impl Session {
    /// The agent's session id.
    pub fn id(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }
}

impl From<Session> for Event {
    fn from(s: Session) -> Self {
        Event::SubagentSession {
            call_id: s.call_id,
            session: s.session,
            session_id: s.session_id,
        }
    }
}

/// A `subagent_dequeued`: queued call `call_id` runs from now.
pub fn dequeued(call_id: impl Into<String>) -> Event {
    Event::SubagentDequeued {
        call_id: call_id.into(),
    }
}

/// A `subagent_backgrounded`: call `call_id` goes on as task `task_id`.
pub fn backgrounded(call_id: impl Into<String>, task_id: impl Into<String>) -> Event {
    Event::SubagentBackgrounded {
        call_id: call_id.into(),
        task_id: task_id.into(),
    }
}

/// A `subagent_cancelling`: call `call_id` was asked to stop.
pub fn cancelling(call_id: impl Into<String>) -> Event {
    Event::SubagentCancelling {
        call_id: call_id.into(),
    }
}

/// A `subagent_followup`: `input` starts a new turn on call `call_id`.
pub fn followup(call_id: impl Into<String>, input: impl Into<String>) -> Event {
    Event::SubagentFollowup {
        call_id: call_id.into(),
        input: input.into(),
    }
}

/// A `batch_started`.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct BatchStarted {
    batch_id: String,
    tasks: u32,
    review: bool,
}

/// Batch `batch_id` of `tasks` tasks starts; not a review.
pub fn batch_started(batch_id: impl Into<String>, tasks: u32) -> BatchStarted {
    BatchStarted {
        batch_id: batch_id.into(),
        tasks,
        review: false,
    }
}

impl BatchStarted {
    /// Every task is a code review: a quorum comes at the end.
    pub fn review(mut self) -> Self {
        self.review = true;
        self
    }
}

impl From<BatchStarted> for Event {
    fn from(b: BatchStarted) -> Self {
        Event::BatchStarted {
            batch_id: b.batch_id,
            tasks: b.tasks,
            review: b.review,
            arena: false,
        }
    }
}

/// A `batch_finished`.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct BatchFinished {
    batch_id: String,
    total: u32,
    failed: u32,
    worst_verdict: Option<Severity>,
}

/// Every one of batch `batch_id`'s `total` tasks has ended, all of them
/// normally (none failed), with no verdict.
pub fn batch_finished(batch_id: impl Into<String>, total: u32) -> BatchFinished {
    BatchFinished {
        batch_id: batch_id.into(),
        total,
        failed: 0,
        worst_verdict: None,
    }
}

impl BatchFinished {
    /// `failed` of the tasks did not end normally; the others succeeded.
    pub fn failed(mut self, failed: u32) -> Self {
        self.failed = failed;
        self
    }

    /// The worst verdict (`Severity::Red`, or an `Option` of one).
    pub fn worst(mut self, verdict: impl Into<Option<Severity>>) -> Self {
        self.worst_verdict = verdict.into();
        self
    }
}

impl From<BatchFinished> for Event {
    fn from(b: BatchFinished) -> Self {
        Event::BatchFinished {
            batch_id: b.batch_id,
            total: b.total,
            succeeded: b.total.saturating_sub(b.failed),
            failed: b.failed,
            worst_verdict: b.worst_verdict,
        }
    }
}

/// `.event()` on each builder: the event it builds, as `.into()` makes it
/// where the type is not known.
macro_rules! event_method {
    ($($builder:ty),*) => {
        $(impl $builder {
            pub fn event(self) -> Event {
                self.into()
            }
        })*
    };
}

event_method!(
    Started,
    Finished,
    Progress,
    Session,
    BatchStarted,
    BatchFinished
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::TaskState;

    fn claude() -> AgentRef {
        AgentRef::Acp("claude".into())
    }

    #[test]
    fn a_started_call_is_plain_until_told_otherwise() {
        assert_eq!(
            started("c1", claude()).event(),
            Event::SubagentStarted {
                call_id: "c1".into(),
                task_id: None,
                agent: claude(),
                input: String::new(),
                code_review: false,
                background: false,
                session: None,
                batch_id: None,
                queued: false,
                max_cost: None,
            }
        );
    }

    #[test]
    fn each_started_setter_sets_its_field() {
        let every: Event = started("c1", AgentRef::Internal)
            .input("review it")
            .review()
            .background("t1")
            .session(SessionKind::NewAfterStale)
            .batch("b1")
            .queued()
            .into();
        assert_eq!(
            every,
            Event::SubagentStarted {
                call_id: "c1".into(),
                task_id: Some("t1".into()),
                agent: AgentRef::Internal,
                input: "review it".into(),
                code_review: true,
                background: true,
                session: Some(SessionKind::NewAfterStale),
                batch_id: Some("b1".into()),
                queued: true,
                max_cost: None,
            }
        );
        // A task need not be in the background; a review can be worked out.
        let Event::SubagentStarted {
            task_id,
            background,
            code_review,
            ..
        } = started("c1", claude())
            .task("t2")
            .code_review(false)
            .event()
        else {
            unreachable!()
        };
        assert_eq!(
            (task_id.as_deref(), background, code_review),
            (Some("t2"), false, false)
        );
    }

    #[test]
    fn a_finish_is_a_normal_end_without_verdict_until_told() {
        assert_eq!(
            finished("c1", "ok").event(),
            Event::SubagentFinished {
                call_id: "c1".into(),
                output: "ok".into(),
                stop_reason: StopReason::EndTurn,
                severity: None,
                findings: Vec::new(),
            }
        );
        assert_eq!(
            finished("c1", "no")
                .stop(StopReason::Refusal)
                .severity(Severity::Red)
                .event(),
            Event::SubagentFinished {
                call_id: "c1".into(),
                output: "no".into(),
                stop_reason: StopReason::Refusal,
                severity: Some(Severity::Red),
                findings: Vec::new(),
            }
        );
        let none: Option<Severity> = None;
        assert!(matches!(
            finished("c1", "")
                .severity(Severity::Green)
                .severity(none)
                .event(),
            Event::SubagentFinished { severity: None, .. }
        ));
    }

    #[test]
    fn activity_chunk_and_call_events() {
        assert_eq!(
            chunk("c1", "hi"),
            Event::SubagentActivity {
                call_id: "c1".into(),
                activity: Activity::MessageChunk { text: "hi".into() },
            }
        );
        assert_eq!(
            activity("c2", Activity::Notice { text: "n".into() }),
            Event::SubagentActivity {
                call_id: "c2".into(),
                activity: Activity::Notice { text: "n".into() },
            }
        );
        assert_eq!(
            dequeued("c1"),
            Event::SubagentDequeued {
                call_id: "c1".into()
            }
        );
        assert_eq!(
            cancelling("c1"),
            Event::SubagentCancelling {
                call_id: "c1".into()
            }
        );
        assert_eq!(
            followup("c1", "more"),
            Event::SubagentFollowup {
                call_id: "c1".into(),
                input: "more".into(),
            }
        );
    }

    #[test]
    fn progress_and_session_take_their_ids_when_given() {
        let summary = Summary {
            state: TaskState::Done,
            tool_calls: 2,
            ..Summary::default()
        };
        assert_eq!(
            progress("c1", summary.clone()).event(),
            Event::TaskProgress {
                call_id: "c1".into(),
                task_id: None,
                summary: summary.clone(),
            }
        );
        assert_eq!(
            progress("c1", summary.clone()).task("t1").event(),
            Event::TaskProgress {
                call_id: "c1".into(),
                task_id: Some("t1".into()),
                summary,
            }
        );
        assert_eq!(
            session("c1", SessionKind::Resumed).event(),
            Event::SubagentSession {
                call_id: "c1".into(),
                session: SessionKind::Resumed,
                session_id: None,
            }
        );
        assert_eq!(
            session("c1", SessionKind::Fresh).id("s1").event(),
            Event::SubagentSession {
                call_id: "c1".into(),
                session: SessionKind::Fresh,
                session_id: Some("s1".into()),
            }
        );
    }

    #[test]
    fn a_batch_finish_counts_the_rest_as_succeeded() {
        assert_eq!(
            batch_started("b1", 3).event(),
            Event::BatchStarted {
                batch_id: "b1".into(),
                tasks: 3,
                review: false,
                arena: false,
            }
        );
        assert!(matches!(
            batch_started("b1", 3).review().event(),
            Event::BatchStarted { review: true, .. }
        ));
        assert_eq!(
            batch_finished("b1", 3).event(),
            Event::BatchFinished {
                batch_id: "b1".into(),
                total: 3,
                succeeded: 3,
                failed: 0,
                worst_verdict: None,
            }
        );
        assert_eq!(
            batch_finished("b1", 3)
                .failed(1)
                .worst(Severity::Red)
                .event(),
            Event::BatchFinished {
                batch_id: "b1".into(),
                total: 3,
                succeeded: 2,
                failed: 1,
                worst_verdict: Some(Severity::Red),
            }
        );
    }
}
