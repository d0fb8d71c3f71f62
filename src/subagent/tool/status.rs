//! The `subagent_status` tool: a background task's state (and its report
//! once done) or every task's, read from the task board after the cancel,
//! follow-up message and wait the call asks for; its answer a type that
//! serializes to exactly the JSON the model reads.

use std::sync::Arc;

use serde::Serialize;

use crate::event::{Severity, StopReason, TaskState, Usage};
use crate::runtime::board::{Board, Entry, UnknownTask};
use crate::subagent::dispatch::{DispatchError, Dispatcher, FollowUp, Reply};
use crate::subagent::input::{MAX_WAIT_SECONDS, StatusInput};

/// `subagent_status`'s answer: one task, or every task (`{"tasks": [...]}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Status {
    Task(Box<TaskStatus>),
    All { tasks: Vec<TaskStatus> },
}

/// One background task as `subagent_status` tells it. Its fields go out
/// in this order; those marked to be skipped are left out when they have
/// nothing to say.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskStatus {
    pub task_id: Option<String>,
    pub agent: String,
    pub state: TaskState,
    pub elapsed_ms: u64,
    pub tool_calls: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_activity: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub waiting_for_permission: bool,
    /// Its report, severity header stripped, once done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    /// A review's findings, once done.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<crate::event::finding::Finding>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// What became of the follow-up message the call sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<FollowUp>,
    /// The task this one runs again (`retry`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_of: Option<String>,
    /// A worktree task's branch, worktree and diffstat.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub work: Option<Box<crate::event::Work>>,
}

impl TaskStatus {
    /// A background task's entry on the board, `now` ms into the session.
    pub fn of(entry: &Entry, now: u64) -> Self {
        let s = &entry.summary;
        Self {
            task_id: entry.task_id.clone(),
            agent: entry.agent.clone(),
            state: s.state,
            elapsed_ms: entry.finished.unwrap_or(now).saturating_sub(entry.started),
            tool_calls: s.tool_calls,
            last_activity: s.last_activity.clone(),
            waiting_for_permission: s.waiting,
            output: entry.output.clone(),
            stop_reason: entry.stop_reason,
            severity: s.severity,
            findings: entry.findings.clone(),
            usage: s.usage.clone(),
            message: None,
            retry_of: None,
            work: entry.work.clone().map(Box::new),
        }
    }
}

impl Status {
    /// The answer for one task, or for every task, from `board`.
    pub fn of(board: &Board, task_id: Option<&str>, now: u64) -> Result<Self, UnknownTask> {
        match task_id {
            Some(id) => Ok(Status::Task(Box::new(TaskStatus::of(
                board.known_task(id)?,
                now,
            )))),
            None => Ok(Status::All {
                tasks: board.tasks().map(|e| TaskStatus::of(e, now)).collect(),
            }),
        }
    }

    /// Says what became of the follow-up message the call sent.
    pub fn sent(&mut self, follow_up: FollowUp) {
        if let Status::Task(task) = self {
            task.message = Some(follow_up);
        }
    }

    /// The answer as a JSON value, for a reader that looks into it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a status is JSON")
    }
}

impl Dispatcher {
    /// The `subagent_status` tool: one task's state (and report once
    /// done), or every task.
    pub fn status(&self, task_id: Option<&str>) -> Result<Status, DispatchError> {
        let now = self.emitter.now();
        Ok(self.emitter.board(|b| Status::of(b, task_id, now))?)
    }

    /// The whole `subagent_status` tool: cancels, sends a follow-up, waits
    /// (in that order), then answers with the status.
    pub async fn status_with(
        self: &Arc<Self>,
        input: StatusInput,
    ) -> Result<Status, DispatchError> {
        let task_id = input.task_id.as_deref().map(str::trim);
        // An unknown task is an error that lists the known ones.
        if let Some(id) = task_id {
            self.status(Some(id))?;
        }
        if input.retry {
            let id = task_id.ok_or(DispatchError::NeedsTask("retry"))?;
            let new = match self.retry(id).await? {
                Reply::Started { task_id, .. } => task_id,
                _ => return self.status(None),
            };
            let mut status = self.status(Some(&new))?;
            if let Status::Task(task) = &mut status {
                task.retry_of = Some(id.to_string());
            }
            return Ok(status);
        }
        let mut sent = None;
        if input.cancel {
            let id = task_id.ok_or(DispatchError::NeedsTask("cancel"))?;
            self.cancel(id);
        }
        if let Some(message) = &input.message {
            let id = task_id.ok_or(DispatchError::NeedsTask("message"))?;
            sent = Some(self.follow_up(id, message)?);
        }
        if let Some(wait) = wait_for(input.wait_seconds) {
            let _ = tokio::time::timeout(wait, self.until_idle(task_id)).await;
        }
        let mut status = self.status(task_id)?;
        if let Some(sent) = sent {
            status.sent(sent);
        }
        Ok(status)
    }
}

/// How long `wait_seconds` waits: at most [`MAX_WAIT_SECONDS`]; none for 0.
pub fn wait_for(wait_seconds: Option<u64>) -> Option<std::time::Duration> {
    wait_seconds
        .filter(|s| *s > 0)
        .map(|s| std::time::Duration::from_secs(s.min(MAX_WAIT_SECONDS)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Activity, Event, Stamped, build};
    use crate::runtime::board::fixtures::*;

    /// What the model reads of the board's answer.
    fn text(b: &Board, task_id: Option<&str>, now: u64) -> String {
        serde_json::to_string(&Status::of(b, task_id, now).unwrap()).unwrap()
    }

    #[test]
    fn waiting_for_permission_and_the_finish() {
        let mut b = Board::new();
        b.observe(&started("c1", Some("t1")));
        b.observe(&activity(
            "c1",
            Activity::PermissionRequest {
                id: "p".into(),
                title: "Delete build/".into(),
                options: vec!["Allow".into()],
                detail: Default::default(),
            },
        ));
        assert!(b.task("t1").unwrap().summary.waiting);
        b.observe(&activity(
            "c1",
            Activity::PermissionResolved {
                id: "p".into(),
                outcome: "Allow".into(),
            },
        ));
        assert!(!b.task("t1").unwrap().summary.waiting);
        let snap = b.observe(&Stamped::new(
            90,
            build::finished("c1", "Looks red.")
                .severity(Severity::Red)
                .findings(vec![crate::event::finding::Finding {
                    file: "a.rs".into(),
                    line: 4,
                    end_line: None,
                    severity: Severity::Red,
                    title: "t".into(),
                    body: String::new(),
                }])
                .event(),
        ));
        let Some(Event::TaskProgress { summary, .. }) = snap else {
            panic!("{snap:?}")
        };
        assert_eq!(
            (summary.state, summary.severity, summary.waiting),
            (TaskState::Done, Some(Severity::Red), false)
        );
        let status = Status::of(&b, Some("t1"), 1000).unwrap().to_json();
        assert_eq!(status["elapsed_ms"], 80);
        assert_eq!(status["output"], "Looks red.");
        assert_eq!(status["severity"], "red");
        assert_eq!(
            status["findings"][0]["line"], 4,
            "a background review's findings"
        );
        assert_eq!(status["state"], "done");
    }

    #[test]
    fn a_queued_call_runs_when_dequeued_and_counts_its_time_from_then() {
        let mut b = Board::new();
        assert_eq!(b.observe(&started_queued("c1", Some("t1"), true)), None);
        assert_eq!(b.task("t1").unwrap().summary.state, TaskState::Queued);
        assert_eq!(
            Status::of(&b, Some("t1"), 50).unwrap().to_json()["state"],
            "queued"
        );
        let dequeued = build::dequeued("c1");
        let Some(Event::TaskProgress { summary, .. }) =
            b.observe(&Stamped::new(40, dequeued.clone()))
        else {
            panic!("a snapshot")
        };
        assert_eq!(summary.state, TaskState::Running);
        assert_eq!(
            Status::of(&b, Some("t1"), 100).unwrap().to_json()["elapsed_ms"],
            60
        );
        // Only a queued call is dequeued.
        assert_eq!(b.observe(&Stamped::new(50, dequeued)), None);
    }

    #[test]
    fn unknown_task_names_the_known_ones() {
        let mut b = Board::new();
        assert_eq!(
            Status::of(&b, Some("t9"), 0).unwrap_err().to_string(),
            "unknown task \"t9\"; known tasks: none"
        );
        b.observe(&started("c1", Some("t1")));
        b.observe(&started("c2", None));
        assert_eq!(
            Status::of(&b, Some("t9"), 0).unwrap_err().to_string(),
            "unknown task \"t9\"; known tasks: t1"
        );
        assert_eq!(
            Status::of(&b, None, 0).unwrap().to_json()["tasks"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn subagent_status_reads_as_it_always_has() {
        let mut b = Board::new();
        b.observe(&started("c1", Some("t1")));
        b.observe(&started("c2", None));
        b.observe(&started("c3", Some("t2")));
        // Nothing known yet: only what every task has.
        let fresh = concat!(
            r#"{"task_id":"t2","agent":"fake","state":"running","elapsed_ms":990,"#,
            r#""tool_calls":0}"#
        );
        assert_eq!(text(&b, Some("t2"), 1000), fresh);
        b.observe(&activity("c1", tool("a")));
        b.observe(&activity(
            "c1",
            Activity::PermissionRequest {
                id: "p".into(),
                title: "Delete \"build/\"".into(),
                options: vec!["Allow".into()],
                detail: Default::default(),
            },
        ));
        b.observe(&activity("c1", usage(1200, Some(0.04))));
        let waiting = concat!(
            r#"{"task_id":"t1","agent":"fake","state":"running","elapsed_ms":990,"#,
            r#""tool_calls":1,"last_activity":"? permission: Delete \"build/\"","#,
            r#""waiting_for_permission":true,"#,
            r#""usage":{"used":1200,"size":200000,"cost":{"amount":0.04,"currency":"USD"}}}"#
        );
        assert_eq!(text(&b, Some("t1"), 1000), waiting);
        // A follow-up sent: `subagent_status` adds what became of it.
        let mut sent = Status::of(&b, Some("t1"), 1000).unwrap();
        sent.sent(FollowUp::Queued);
        assert_eq!(
            serde_json::to_string(&sent).unwrap(),
            format!("{},\"message\":\"queued\"}}", &waiting[..waiting.len() - 1])
        );
        b.observe(&Stamped::new(
            90,
            build::finished("c1", "Looks red.\n")
                .severity(Severity::Red)
                .event(),
        ));
        let done = concat!(
            r#"{"task_id":"t1","agent":"fake","state":"done","elapsed_ms":80,"#,
            r#""tool_calls":1,"last_activity":"? permission: Delete \"build/\"","#,
            r#""output":"Looks red.\n","stop_reason":"end_turn","severity":"red","#,
            r#""usage":{"used":1200,"size":200000,"cost":{"amount":0.04,"currency":"USD"}}}"#
        );
        assert_eq!(text(&b, Some("t1"), 1000), done);
        // Every task, oldest first; the foreground call is not one.
        assert_eq!(
            text(&b, None, 1000),
            format!("{{\"tasks\":[{done},{fresh}]}}")
        );
    }

    #[test]
    fn wait_seconds_is_capped_at_600() {
        use std::time::Duration;
        assert_eq!(wait_for(None), None);
        assert_eq!(wait_for(Some(0)), None);
        assert_eq!(wait_for(Some(5)), Some(Duration::from_secs(5)));
        assert_eq!(wait_for(Some(86_400)), Some(Duration::from_secs(600)));
    }
}
