//! The side panel's background tasks, and the report a finished task
//! sends back into the chat.

use super::{CellKind, State, clean};
use crate::event::Summary;

/// A background task, as the side panel shows it: its summary is a copy
/// of the task board's latest snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub task_id: String,
    pub call_id: String,
    pub agent: String,
    /// The first line of the message the task was given.
    pub input: String,
    pub code_review: bool,
    pub started: u64,
    pub finished: Option<u64>,
    /// The board's latest snapshot.
    pub summary: Summary,
    pub reported: bool,
}

impl State {
    pub(super) fn on_task_reported(&mut self, task_id: &str) {
        self.open_assistant = None;
        let Some((agent, call_id)) = self.edit_task(task_id, |task| {
            task.reported = true;
            (task.agent.clone(), task.call_id.clone())
        }) else {
            return;
        };
        let report = self
            .calls
            .get(&call_id)
            .and_then(|&i| match &self.cells[i].kind {
                CellKind::Subagent(b) => Some((
                    b.output.clone().unwrap_or_default(),
                    b.stop_reason.unwrap_or_default(),
                    b.severity,
                )),
                _ => None,
            });
        let (output, stop_reason, severity) = report.unwrap_or_default();
        self.push(CellKind::TaskReport(Box::new(super::cells::TaskReport {
            task_id: clean(task_id),
            agent,
            output,
            stop_reason,
            severity,
        })));
    }
}

#[cfg(test)]
mod tests {
    //! What applying a task's report changes in the panel and the chat.

    use super::*;
    use crate::event::{Event, Severity, StopReason};
    use crate::tui::state::fixtures::*;

    #[test]
    fn task_reported_shows_the_report_of_its_box() {
        let mut s = State::new();
        apply(&mut s, 1, started(true));
        apply(
            &mut s,
            5,
            Event::SubagentFinished {
                call_id: "c1".into(),
                output: "All good.".into(),
                stop_reason: StopReason::EndTurn,
                severity: Some(Severity::Green),
                findings: Vec::new(),
            },
        );
        apply(
            &mut s,
            6,
            Event::TaskReported {
                task_id: "t1".into(),
            },
        );
        assert!(s.tasks[0].reported);
        assert_eq!(
            s.cells.last().unwrap().kind,
            CellKind::TaskReport(Box::new(crate::tui::state::cells::TaskReport {
                task_id: "t1".into(),
                agent: "fake".into(),
                output: "All good.".into(),
                stop_reason: StopReason::EndTurn,
                severity: Some(Severity::Green),
            }))
        );
        // An unknown task is ignored.
        let cells = s.cells.len();
        apply(
            &mut s,
            7,
            Event::TaskReported {
                task_id: "t9".into(),
            },
        );
        assert_eq!(s.cells.len(), cells);
    }
}
