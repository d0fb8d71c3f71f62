//! The board's snapshots as the screen copies them, sanitised: a call's
//! into its box, its batch member and its panel task; a child session's
//! into its child box. Copied, never added to: box, header and panel show
//! the same numbers.

use super::{State, clean};
use crate::event::{Cost, Summary, Usage, UsageShare};

impl State {
    pub(super) fn on_task_progress(
        &mut self,
        t: u64,
        call_id: &str,
        task_id: Option<&str>,
        summary: &Summary,
    ) {
        // A copy of the board's snapshot: box, batch header and
        // panel show the same numbers. Sanitised once, then copied.
        let snapshot = clean_summary(summary);
        if let Some(&index) = self.calls.get(call_id) {
            self.edit_box(index, |b| {
                let running = b.running();
                b.summary = Summary {
                    // A box that ended keeps the state its end gave it.
                    state: if running {
                        snapshot.state
                    } else {
                        b.summary.state
                    },
                    waiting: snapshot.waiting && running,
                    cancelling: snapshot.cancelling && running,
                    ..snapshot.clone()
                };
            });
        }
        if let Some(batch_id) = self.batch_of(call_id)
            && let Some(header) = self.batch(&batch_id)
            && let Some(member) = header.members.iter_mut().find(|m| m.call_id == call_id)
        {
            member.summary = snapshot.clone();
        }
        if let Some(task_id) = task_id {
            self.edit_task(task_id, |task| {
                task.summary = snapshot;
                if !summary.state.active() && task.finished.is_none() {
                    task.finished = Some(t);
                }
            });
        }
    }

    pub(super) fn on_child_progress(&mut self, call_id: &str, child_id: &str, summary: &Summary) {
        if let Some(child) = self.child(call_id, child_id) {
            child.summary = Summary {
                last_activity: summary.last_activity.as_deref().map(clean),
                ..summary.clone()
            };
        }
    }
}

/// A board snapshot, sanitised for the screen: its last activity, and
/// the currency of its usage and share.
fn clean_summary(summary: &Summary) -> Summary {
    Summary {
        state: summary.state,
        tool_calls: summary.tool_calls,
        last_activity: summary.last_activity.as_deref().map(clean),
        severity: summary.severity,
        waiting: summary.waiting,
        cancelling: summary.cancelling,
        usage: clean_usage(&summary.usage),
        share: clean_share(&summary.share),
    }
}

/// A board snapshot's usage, sanitised for the screen.
fn clean_usage(usage: &Option<Usage>) -> Option<Usage> {
    usage.as_ref().map(|u| Usage {
        used: u.used,
        size: u.size,
        cost: u.cost.as_ref().map(clean_cost),
    })
}

fn clean_share(share: &Option<UsageShare>) -> Option<UsageShare> {
    share.as_ref().map(|s| UsageShare {
        tokens: s.tokens,
        cost: s.cost.as_ref().map(clean_cost),
    })
}

fn clean_cost(c: &Cost) -> Cost {
    Cost {
        amount: c.amount,
        currency: clean(&c.currency),
        estimated: c.estimated,
    }
}

#[cfg(test)]
mod tests {
    //! What applying the board's snapshots copies into box, header and panel.

    use super::*;
    use crate::event::{Event, TaskState};
    use crate::tui::state::fixtures::*;

    #[test]
    fn subagent_cancelling_shows_through_the_boards_snapshot() {
        let mut s = State::new();
        apply(&mut s, 1, started(true));
        // The event itself changes nothing: the board's snapshot does.
        apply(
            &mut s,
            2,
            Event::SubagentCancelling {
                call_id: "c1".into(),
            },
        );
        assert!(!the_box(&s).summary.cancelling);
        let Event::TaskProgress {
            call_id,
            task_id,
            mut summary,
        } = snapshot(0, TaskState::Running, false)
        else {
            unreachable!()
        };
        summary.cancelling = true;
        apply(
            &mut s,
            3,
            Event::TaskProgress {
                call_id,
                task_id,
                summary,
            },
        );
        assert!(the_box(&s).summary.cancelling);
        assert!(s.tasks[0].summary.cancelling);
        assert_eq!(s.cancelling(), 1);
    }

    #[test]
    fn task_progress_is_copied_into_box_and_panel() {
        let mut s = State::new();
        apply(&mut s, 1, started(true));
        apply(&mut s, 2, snapshot(3, TaskState::Running, true));
        assert_eq!(the_box(&s).summary.tool_calls, 3);
        let task = &s.tasks[0].summary;
        assert_eq!((task.tool_calls, task.waiting), (3, true));
        assert_eq!(task.last_activity.as_deref(), Some("⚙ Read a.rs"));
        // Copied, never added to: the same snapshot twice is the same.
        apply(&mut s, 3, snapshot(3, TaskState::Running, false));
        assert_eq!(
            (
                the_box(&s).summary.tool_calls,
                s.tasks[0].summary.tool_calls
            ),
            (3, 3)
        );
        assert!(!s.tasks[0].summary.waiting);
        apply(&mut s, 9, snapshot(3, TaskState::Done, false));
        assert_eq!(s.tasks[0].finished, Some(9));
    }

    #[test]
    fn child_progress_copies_the_boards_snapshot() {
        let mut s = State::new();
        apply(&mut s, 1, started(false));
        apply(&mut s, 2, child(Some("scout"), None, false));
        let summary = Summary {
            state: TaskState::Running,
            tool_calls: 2,
            last_activity: Some("⚙ Read\x1b[31m".into()),
            severity: None,
            waiting: true,
            cancelling: false,
            usage: None,
            share: None,
        };
        apply(
            &mut s,
            3,
            Event::ChildProgress {
                call_id: "c1".into(),
                child_id: "s-1-child".into(),
                summary: summary.clone(),
            },
        );
        let c = &the_box(&s).children[0];
        assert_eq!(c.summary.tool_calls, 2);
        assert!(c.summary.waiting);
        assert_eq!(c.summary.last_activity.as_deref(), Some("⚙ Read"));
    }
}
