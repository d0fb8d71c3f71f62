//! The `subagent` tool's replies as the model reads them: each kind of
//! reply is a type that serializes to exactly the JSON the model gets.
//! Fields go out in the order written here; those marked to be skipped
//! are left out when they have nothing to say, the others are always
//! there (`null` included).

use serde::{Serialize, Serializer};

use crate::event::finding::{Finding, QuorumFinding};
use crate::event::{Quorum, Severity, StopReason, Work};
use crate::subagent::dispatch::Reply;
use crate::subagent::dispatch::batch::{BatchResult, TaskResult, TaskStart};
use crate::subagent::severity;

/// Whether a task runs or waits for its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Progress {
    Running,
    Queued,
}

/// A reply, as whichever of its kinds it is.
#[derive(Serialize)]
#[serde(untagged)]
enum ReplyJson<'a> {
    Done(Done<'a>),
    Started(Started<'a>),
    Batch(Batch<'a>),
    BatchStarted(BatchStarted<'a>),
}

/// A call's outcome: its final message as the agent wrote it, and why
/// its turn ended.
#[derive(Serialize)]
struct Done<'a> {
    output: &'a str,
    stop_reason: StopReason,
    /// A code review's findings.
    #[serde(skip_serializing_if = "<[Finding]>::is_empty")]
    findings: &'a [Finding],
    /// A worktree task's branch, worktree and diffstat.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    work: Option<&'a Work>,
}

/// A background call: its task id, at once.
#[derive(Serialize)]
struct Started<'a> {
    task_id: &'a str,
    status: Progress,
}

/// A batch's results: a summary, one entry per task, and the quorum of a
/// batch of code reviews.
#[derive(Serialize)]
struct Batch<'a> {
    summary: BatchSummary,
    tasks: Vec<TaskEntry<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    quorum: Option<QuorumJson<'a>>,
    /// An arena's comparison: a row per writer, the winner and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    comparison: Option<&'a crate::event::arena::Comparison>,
}

#[derive(Serialize)]
struct BatchSummary {
    total: usize,
    succeeded: u32,
    failed: u32,
    worst_verdict: Option<Severity>,
}

/// How one task of a batch ended: its report (severity header stripped)
/// and stop reason, or why it failed (`tasks[i]: ...`).
#[derive(Serialize)]
struct TaskEntry<'a> {
    task: usize,
    agent: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stop_reason: Option<StopReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    severity: Option<Severity>,
    #[serde(skip_serializing_if = "<[Finding]>::is_empty")]
    findings: &'a [Finding],
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    work: Option<&'a Work>,
}

/// A review batch's quorum: the worst verdict, how many reviewers gave
/// it, of how many, and the line that says so.
#[derive(Serialize)]
struct QuorumJson<'a> {
    verdict: Option<Severity>,
    agree: u32,
    total: u32,
    text: String,
    /// The verdict before the quorum checked its findings, when that
    /// changed it (`verify`).
    #[serde(skip_serializing_if = "Option::is_none")]
    before: Option<Severity>,
    /// The reviewers' findings, merged: who found each, of how many.
    #[serde(skip_serializing_if = "<[QuorumFinding]>::is_empty")]
    findings: &'a [QuorumFinding],
}

/// A background batch: its id, and each task's id at once.
#[derive(Serialize)]
struct BatchStarted<'a> {
    batch_id: &'a str,
    tasks: Vec<TaskStarted<'a>>,
}

/// A background batch's task: its id and whether it waits for a place,
/// or why it could not start (`tasks[i]: ...`).
#[derive(Serialize)]
struct TaskStarted<'a> {
    task: usize,
    agent: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    task_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Progress>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

impl<'a> ReplyJson<'a> {
    fn of(reply: &'a Reply) -> Self {
        match reply {
            Reply::Done(o) => ReplyJson::Done(Done {
                output: &o.output,
                stop_reason: o.stop_reason,
                findings: &o.findings,
                work: o.work.as_ref(),
            }),
            Reply::Started { task_id, .. } => ReplyJson::Started(Started {
                task_id,
                status: Progress::Running,
            }),
            Reply::Batch(batch) => ReplyJson::Batch(Batch::of(batch)),
            Reply::BatchStarted { batch_id, tasks } => ReplyJson::BatchStarted(BatchStarted {
                batch_id,
                tasks: tasks.iter().map(TaskStarted::of).collect(),
            }),
        }
    }
}

impl<'a> Batch<'a> {
    fn of(batch: &'a BatchResult) -> Self {
        Self {
            summary: BatchSummary {
                total: batch.tasks.len(),
                succeeded: batch.succeeded(),
                failed: batch.failed(),
                worst_verdict: batch.worst_verdict(),
            },
            tasks: batch.tasks.iter().map(TaskEntry::of).collect(),
            quorum: batch.quorum.as_ref().map(QuorumJson::of),
            comparison: batch.comparison.as_ref(),
        }
    }
}

impl<'a> TaskEntry<'a> {
    fn of(task: &'a TaskResult) -> Self {
        let entry = Self {
            task: task.index,
            agent: &task.agent,
            output: None,
            stop_reason: None,
            severity: None,
            findings: &[],
            error: None,
            work: task.result.as_ref().ok().and_then(|o| o.work.as_ref()),
        };
        match &task.result {
            Ok(o) if o.stop_reason == StopReason::Error => Self {
                stop_reason: Some(o.stop_reason),
                error: Some(format!("tasks[{}]: {}", task.index, o.output)),
                ..entry
            },
            Ok(o) => Self {
                output: Some(severity::parse(&o.output).body),
                stop_reason: Some(o.stop_reason),
                severity: o.severity,
                findings: &o.findings,
                ..entry
            },
            Err(e) => Self {
                error: Some(e.clone()),
                ..entry
            },
        }
    }
}

impl<'a> QuorumJson<'a> {
    fn of(q: &'a Quorum) -> Self {
        Self {
            verdict: q.verdict,
            agree: q.agree,
            total: q.total,
            text: q.label(),
            before: q.before,
            findings: &q.findings,
        }
    }
}

impl<'a> TaskStarted<'a> {
    fn of(start: &'a TaskStart) -> Self {
        match &start.started {
            Ok((task_id, queued)) => Self {
                task: start.index,
                agent: &start.agent,
                task_id: Some(task_id),
                status: Some(if *queued {
                    Progress::Queued
                } else {
                    Progress::Running
                }),
                error: None,
            },
            Err(e) => Self {
                task: start.index,
                agent: &start.agent,
                task_id: None,
                status: None,
                error: Some(e),
            },
        }
    }
}

/// The tool result the model reads.
impl Serialize for Reply {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        ReplyJson::of(self).serialize(serializer)
    }
}

/// A batch's part of the tool result (`quorum review --json` adds to it).
impl Serialize for BatchResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Batch::of(self).serialize(serializer)
    }
}

impl Reply {
    /// The tool result as a JSON value, for a reader that looks into it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a reply is JSON")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Outcome;

    /// What the model reads of a reply: the tool result's text.
    fn text(reply: &Reply) -> String {
        serde_json::to_string(reply).unwrap()
    }

    fn reviewed(stop_reason: StopReason, output: &str, severity: Option<Severity>) -> Outcome {
        let mut outcome = Outcome::new(stop_reason, output);
        outcome.severity = severity;
        outcome.session_id = Some("s1".into());
        outcome
    }

    #[test]
    fn a_single_call_reads_its_output_and_stop_reason() {
        let done = reviewed(
            StopReason::EndTurn,
            "<!-- severity: red -->\nBad.",
            Some(Severity::Red),
        );
        assert_eq!(
            text(&Reply::Done(done)),
            r#"{"output":"<!-- severity: red -->\nBad.","stop_reason":"end_turn"}"#
        );
        assert_eq!(
            text(&Reply::Done(Outcome::error("fake: exited"))),
            r#"{"output":"fake: exited","stop_reason":"error"}"#
        );
        // A worktree task names its branch, worktree and diffstat.
        let mut worked = Outcome::new(StopReason::EndTurn, "wrote");
        worked.work = Some(Work {
            branch: "quorum/t3-fix-retries".into(),
            worktree: "/state/worktrees/r/quorum-t3-fix-retries".into(),
            diffstat: "+42 −7 in 3 files".into(),
            ..Default::default()
        });
        assert_eq!(
            text(&Reply::Done(worked)),
            r#"{"output":"wrote","stop_reason":"end_turn","branch":"quorum/t3-fix-retries","worktree":"/state/worktrees/r/quorum-t3-fix-retries","diffstat":"+42 −7 in 3 files"}"#
        );
        let started = Reply::Started {
            task_id: "t1".into(),
            call_id: "call-1".into(),
        };
        assert_eq!(text(&started), r#"{"task_id":"t1","status":"running"}"#);
    }

    #[test]
    fn a_batch_reads_its_summary_tasks_and_quorum() {
        let tasks = vec![
            TaskResult {
                index: 0,
                agent: "fake".into(),
                result: Ok(reviewed(
                    StopReason::EndTurn,
                    "<!-- severity: yellow -->\nNits.",
                    Some(Severity::Yellow),
                )),
            },
            TaskResult {
                index: 1,
                agent: "fake-b".into(),
                result: Ok(reviewed(StopReason::EndTurn, "plain \"quoted\"", None)),
            },
            TaskResult {
                index: 2,
                agent: "fake-c".into(),
                result: Ok(Outcome::error("fake-c: exited")),
            },
            TaskResult {
                index: 3,
                agent: "nope".into(),
                result: Err("tasks[3]: unknown agent \"nope\"".into()),
            },
            TaskResult {
                index: 4,
                agent: "internal".into(),
                result: Ok(reviewed(StopReason::Cancelled, "cut", None)),
            },
        ];
        let call_ids: Vec<Option<String>> = (0..5).map(|i| Some(format!("call-{i}"))).collect();
        let quorum = Some(BatchResult::quorum_of(&tasks, &call_ids));
        let batch = BatchResult {
            batch_id: "b1".into(),
            tasks,
            quorum,
            comparison: None,
        };
        assert_eq!(
            text(&Reply::Batch(batch)),
            concat!(
                r#"{"summary":{"total":5,"succeeded":2,"failed":3,"worst_verdict":"yellow"},"#,
                r#""tasks":[{"task":0,"agent":"fake","output":"Nits.","stop_reason":"end_turn","severity":"yellow"},"#,
                r#"{"task":1,"agent":"fake-b","output":"plain \"quoted\"","stop_reason":"end_turn"},"#,
                r#"{"task":2,"agent":"fake-c","stop_reason":"error","error":"tasks[2]: fake-c: exited"},"#,
                r#"{"task":3,"agent":"nope","error":"tasks[3]: unknown agent \"nope\""},"#,
                r#"{"task":4,"agent":"internal","output":"cut","stop_reason":"cancelled"}],"#,
                r#""quorum":{"verdict":"yellow","agree":1,"total":5,"text":"yellow · 1 of 5"}}"#
            )
        );
        // No verdict: nulls, not left out; no quorum: left out.
        let tasks = vec![TaskResult {
            index: 0,
            agent: "fake".into(),
            result: Ok(reviewed(StopReason::EndTurn, "ok", None)),
        }];
        let quorum = Some(BatchResult::quorum_of(&tasks, &[None]));
        let mut batch = BatchResult {
            batch_id: "b2".into(),
            tasks,
            quorum,
            comparison: None,
        };
        assert_eq!(
            text(&Reply::Batch(batch.clone())),
            concat!(
                r#"{"summary":{"total":1,"succeeded":1,"failed":0,"worst_verdict":null},"#,
                r#""tasks":[{"task":0,"agent":"fake","output":"ok","stop_reason":"end_turn"}],"#,
                r#""quorum":{"verdict":null,"agree":0,"total":1,"text":"no verdict · 0 of 1"}}"#
            )
        );
        batch.quorum = None;
        assert_eq!(
            text(&Reply::Batch(batch)),
            concat!(
                r#"{"summary":{"total":1,"succeeded":1,"failed":0,"worst_verdict":null},"#,
                r#""tasks":[{"task":0,"agent":"fake","output":"ok","stop_reason":"end_turn"}]}"#
            )
        );
    }

    #[test]
    fn a_background_batch_reads_a_task_id_or_an_error_per_task() {
        let started = Reply::BatchStarted {
            batch_id: "b1".into(),
            tasks: vec![
                TaskStart {
                    index: 0,
                    agent: "fake".into(),
                    started: Ok(("t1".into(), false)),
                },
                TaskStart {
                    index: 1,
                    agent: "fake".into(),
                    started: Ok(("t2".into(), true)),
                },
                TaskStart {
                    index: 2,
                    agent: "internal".into(),
                    started: Err("tasks[2]: `input` is empty".into()),
                },
            ],
        };
        assert_eq!(
            text(&started),
            concat!(
                r#"{"batch_id":"b1","tasks":[{"task":0,"agent":"fake","task_id":"t1","status":"running"},"#,
                r#"{"task":1,"agent":"fake","task_id":"t2","status":"queued"},"#,
                r#"{"task":2,"agent":"internal","error":"tasks[2]: `input` is empty"}]}"#
            )
        );
    }

    /// A review's findings are in the tool's result: a call's, each
    /// task's and the quorum's, merged.
    #[test]
    fn findings_are_in_the_result() {
        use crate::event::finding::Finding;
        let f = Finding {
            file: "a.rs".into(),
            line: 2,
            end_line: None,
            severity: Severity::Red,
            title: "t".into(),
            body: String::new(),
        };
        let mut outcome = reviewed(
            StopReason::EndTurn,
            "<!-- severity: red -->\nBad.",
            Some(Severity::Red),
        );
        outcome.findings = vec![f.clone()];
        let done = Reply::Done(outcome.clone()).to_json();
        assert_eq!(done["findings"][0]["file"], "a.rs");
        let mut quorum = Quorum::of(vec![crate::event::ReviewerVerdict {
            agent: "fake".into(),
            call_id: None,
            severity: Some(Severity::Red),
            failed: false,
        }]);
        quorum.findings = crate::subagent::findings::merge::merge(&[("fake", &[f])], 1, None);
        let batch = Reply::Batch(BatchResult {
            batch_id: "b1".into(),
            tasks: vec![TaskResult {
                index: 0,
                agent: "fake".into(),
                result: Ok(outcome),
            }],
            quorum: Some(quorum),
            comparison: None,
        })
        .to_json();
        assert_eq!(batch["tasks"][0]["findings"][0]["line"], 2);
        assert_eq!(batch["quorum"]["findings"][0]["by"][0], "fake");
        assert!(
            batch["quorum"]["text"]
                .as_str()
                .unwrap()
                .ends_with("1 finding: 1 red · agreed: 1 by 1 of 1")
        );
    }
}
