//! The counts the status line and the side panel show every frame, kept
//! as the board's snapshots are copied: when a box's or a task's snapshot
//! is replaced, the old one's part comes off and the new one's goes on.
//! They add up what the boxes and tasks hold, never events, so they read
//! the same as a walk over every cell would; and reading them costs the
//! same however long the session is.

use std::collections::BTreeSet;

use super::batch::UsageTotal;
use crate::event::{Cost, Summary, TaskState};

#[derive(Debug, Default, Clone)]
pub(super) struct Tally {
    /// Boxes whose snapshot says they wait for the person.
    pub waiting: usize,
    /// Boxes whose snapshot says they are being cancelled.
    pub cancelling: usize,
    /// Boxes whose snapshot carries a share of the session's usage.
    shares: usize,
    tokens: i64,
    /// Each currency's amount, and the boxes (by cell index) that have a
    /// cost in it: the lowest one gives the currency its place, as when
    /// the shares are added up in the transcript's order.
    costs: Vec<CostTally>,
    /// Panel tasks whose snapshot says running, and queued.
    pub tasks_running: usize,
    pub tasks_queued: usize,
}

/// What [`Tally::take_box`] took off: the place in `costs` of the old
/// snapshot's currency, if it had a cost.
#[must_use]
pub(super) struct Taken {
    cost: Option<usize>,
}

#[derive(Debug, Clone)]
struct CostTally {
    currency: String,
    amount: f64,
    boxes: BTreeSet<usize>,
    /// How many of them have an estimated cost.
    estimated: usize,
}

impl Tally {
    /// Counts the snapshot of the box at cell `index`.
    pub fn add_box(&mut self, index: usize, s: &Summary) {
        self.count_share(s);
        let Some(share) = &s.share else {
            return;
        };
        if let Some(c) = &share.cost {
            match self.costs.iter_mut().find(|x| x.currency == c.currency) {
                Some(x) => {
                    x.amount += c.amount;
                    x.boxes.insert(index);
                    x.estimated += usize::from(c.estimated);
                }
                None => self.costs.push(CostTally {
                    currency: c.currency.clone(),
                    amount: c.amount,
                    boxes: BTreeSet::from([index]),
                    estimated: usize::from(c.estimated),
                }),
            }
        }
    }

    /// Takes off what [`Tally::add_box`] counted of a box's snapshot that
    /// is about to change; [`Tally::put_box`] counts the changed one. A
    /// cost's currency keeps the box among those that have a cost in it
    /// until then, so a share replaced in the same currency (what a box's
    /// snapshots do again and again) leaves the set of boxes untouched.
    pub fn take_box(&mut self, s: &Summary) -> Taken {
        self.waiting -= usize::from(s.waiting);
        self.cancelling -= usize::from(s.cancelling);
        let Some(share) = &s.share else {
            return Taken { cost: None };
        };
        self.shares -= 1;
        self.tokens -= share.tokens;
        let cost = share.cost.as_ref().and_then(|c| {
            let i = self.costs.iter().position(|x| x.currency == c.currency)?;
            self.costs[i].amount -= c.amount;
            self.costs[i].estimated -= usize::from(c.estimated);
            Some(i)
        });
        Taken { cost }
    }

    /// Counts the changed snapshot of the box at cell `index`, after
    /// [`Tally::take_box`] took off its old one.
    pub fn put_box(&mut self, index: usize, taken: Taken, s: &Summary) {
        let cost = s.share.as_ref().and_then(|share| share.cost.as_ref());
        if let Some(i) = taken.cost {
            let x = &mut self.costs[i];
            match cost {
                Some(c) if c.currency == x.currency => {
                    // The same currency: as if the box left it and came
                    // back, its amount alone when it is the only one.
                    if x.boxes.len() == 1 {
                        x.amount = c.amount;
                    } else {
                        x.amount += c.amount;
                    }
                    x.estimated += usize::from(c.estimated);
                    self.count_share(s);
                    return;
                }
                _ => {
                    x.boxes.remove(&index);
                    if x.boxes.is_empty() {
                        // No box has a cost in it any more: the currency goes.
                        self.costs.remove(i);
                    }
                }
            }
        }
        self.add_box(index, s);
    }

    /// The counts of a snapshot but its cost.
    fn count_share(&mut self, s: &Summary) {
        self.waiting += usize::from(s.waiting);
        self.cancelling += usize::from(s.cancelling);
        if let Some(share) = &s.share {
            self.shares += 1;
            self.tokens += share.tokens;
        }
    }

    /// Counts a panel task's snapshot.
    pub fn add_task(&mut self, s: &Summary) {
        self.tasks_running += usize::from(s.state == TaskState::Running);
        self.tasks_queued += usize::from(s.state == TaskState::Queued);
    }

    /// Takes back what [`Tally::add_task`] counted.
    pub fn remove_task(&mut self, s: &Summary) {
        self.tasks_running -= usize::from(s.state == TaskState::Running);
        self.tasks_queued -= usize::from(s.state == TaskState::Queued);
    }

    /// Every box's share added up, or `None` when none reported usage.
    pub fn usage_total(&self) -> Option<UsageTotal> {
        if self.shares == 0 {
            return None;
        }
        let mut costs: Vec<&CostTally> = self.costs.iter().collect();
        costs.sort_by_key(|c| c.boxes.first().copied());
        Some(UsageTotal {
            tokens: self.tokens,
            costs: costs
                .into_iter()
                .map(|c| Cost {
                    amount: c.amount,
                    currency: c.currency.clone(),
                    estimated: c.estimated > 0,
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    //! The tallies in the cases that could lead them astray. Every event
    //! the state's tests apply also checks them against a walk over every
    //! cell (`State::assert_tallies`); these pin the numbers too.

    use super::super::State;
    use super::super::fixtures::apply;
    use crate::event::build;
    use crate::event::{AgentRef, Cost, Event, StopReason, Summary, TaskState, UsageShare};

    /// A call's box with its panel task `t-{call}`.
    fn start(s: &mut State, t: u64, call: &str) {
        let e = build::started(call, AgentRef::Acp("fake".into()))
            .input("x")
            .background(format!("t-{call}"))
            .event();
        apply(s, t, e);
    }

    /// The board's snapshot of `call`.
    fn snap(s: &mut State, t: u64, call: &str, summary: Summary) {
        let e = Event::TaskProgress {
            call_id: call.into(),
            task_id: Some(format!("t-{call}")),
            summary,
        };
        apply(s, t, e);
    }

    fn running(waiting: bool, cancelling: bool) -> Summary {
        Summary {
            state: TaskState::Running,
            waiting,
            cancelling,
            ..Summary::default()
        }
    }

    fn finish(s: &mut State, t: u64, call: &str, stop_reason: StopReason) {
        let e = Event::SubagentFinished {
            call_id: call.into(),
            output: "done".into(),
            stop_reason,
            severity: None,
            findings: Vec::new(),
        };
        apply(s, t, e);
    }

    fn share(tokens: i64, amount: f64, currency: &str) -> Summary {
        Summary {
            state: TaskState::Running,
            share: Some(UsageShare {
                tokens,
                cost: Some(Cost {
                    amount,
                    currency: currency.into(),
                    estimated: false,
                }),
            }),
            ..Summary::default()
        }
    }

    /// `(tokens, [(currency, amount in cents)])` of the session's total.
    fn total(s: &State) -> Option<(i64, Vec<(String, i64)>)> {
        s.usage_total().map(|t| {
            let costs = t.costs.iter();
            let cents = costs.map(|c| (c.currency.clone(), (c.amount * 100.0).round() as i64));
            (t.tokens, cents.collect())
        })
    }

    #[test]
    fn a_box_that_waits_then_is_answered_needs_you_no_more() {
        let mut s = State::new();
        start(&mut s, 1, "c1");
        start(&mut s, 2, "c2");
        snap(&mut s, 3, "c1", running(true, false));
        snap(&mut s, 4, "c2", running(true, false));
        assert_eq!(s.needs_you(), 2);
        // The same snapshot again counts once.
        snap(&mut s, 5, "c1", running(true, false));
        assert_eq!(s.needs_you(), 2);
        // Answered: the board says it runs on.
        snap(&mut s, 6, "c1", running(false, false));
        assert_eq!(s.needs_you(), 1);
        // Ended while waiting: it waits no more, and a late snapshot that
        // still says waiting does not count it again.
        finish(&mut s, 7, "c2", StopReason::EndTurn);
        assert_eq!(s.needs_you(), 0);
        snap(&mut s, 8, "c2", running(true, false));
        assert_eq!(s.needs_you(), 0);
        // The panel copies the board's snapshot as it is: both tasks run.
        assert_eq!(s.task_counts(), (2, 0));
    }

    #[test]
    fn a_box_cancelling_then_finishing_stops_counting_with_the_boards_last_snapshot() {
        let mut s = State::new();
        start(&mut s, 1, "c1");
        snap(&mut s, 2, "c1", running(false, true));
        assert_eq!(s.cancelling(), 1);
        finish(&mut s, 3, "c1", StopReason::Cancelled);
        // The end alone leaves the box's snapshot as it was, as it always
        // did; the board's snapshot that follows clears it.
        assert_eq!(s.cancelling(), 1);
        let cancelled = Summary {
            state: TaskState::Cancelled,
            ..Summary::default()
        };
        snap(&mut s, 4, "c1", cancelled);
        assert_eq!((s.cancelling(), s.running()), (0, 0));
        assert_eq!(s.task_counts(), (0, 0));
    }

    #[test]
    fn a_follow_up_reopens_a_finished_box_and_its_task_in_the_counts() {
        let mut s = State::new();
        start(&mut s, 1, "c1");
        finish(&mut s, 2, "c1", StopReason::EndTurn);
        let done = Summary {
            state: TaskState::Done,
            ..Summary::default()
        };
        snap(&mut s, 3, "c1", done.clone());
        assert_eq!((s.task_counts(), s.needs_you()), ((0, 0), 0));
        let followup = Event::SubagentFollowup {
            call_id: "c1".into(),
            input: "and this".into(),
        };
        apply(&mut s, 4, followup);
        assert_eq!((s.task_counts(), s.running()), ((1, 0), 1));
        snap(&mut s, 5, "c1", running(true, false));
        assert_eq!(s.needs_you(), 1);
        finish(&mut s, 6, "c1", StopReason::EndTurn);
        snap(&mut s, 7, "c1", done);
        assert_eq!(
            (s.task_counts(), s.needs_you(), s.running()),
            ((0, 0), 0, 0)
        );
    }

    #[test]
    fn usage_snapshots_replaced_again_and_again_count_their_latest() {
        let mut s = State::new();
        assert_eq!(total(&s), None);
        start(&mut s, 1, "c1");
        start(&mut s, 2, "c2");
        // c2 reports in EUR first; c1's USD still comes first, as c1's box
        // does.
        snap(&mut s, 3, "c2", share(10, 0.5, "EUR"));
        snap(&mut s, 4, "c1", share(100, 0.01, "USD"));
        assert_eq!(
            total(&s),
            Some((110, vec![("USD".into(), 1), ("EUR".into(), 50)]))
        );
        for i in 1..=50i64 {
            snap(
                &mut s,
                4 + i as u64,
                "c1",
                share(100 * i, 0.01 * i as f64, "USD"),
            );
        }
        assert_eq!(
            total(&s),
            Some((5_010, vec![("USD".into(), 50), ("EUR".into(), 50)]))
        );
        // c1 moves to EUR: USD goes, and EUR adds up both.
        snap(&mut s, 60, "c1", share(1, 0.25, "EUR"));
        assert_eq!(total(&s), Some((11, vec![("EUR".into(), 75)])));
        // A snapshot without usage takes its share back; with none left,
        // no total.
        snap(&mut s, 61, "c1", running(false, false));
        snap(&mut s, 62, "c2", running(false, false));
        assert_eq!(total(&s), None);
    }

    #[test]
    fn a_reused_call_id_counts_its_new_box_and_keeps_the_old_ones_part() {
        let mut s = State::new();
        start(&mut s, 1, "c1");
        let waiting = Summary {
            waiting: true,
            ..share(100, 1.0, "USD")
        };
        snap(&mut s, 2, "c1", waiting);
        assert_eq!(s.needs_you(), 1);
        // The same call id again (a new batch reusing it): snapshots go to
        // the newer box; the older one keeps what it showed, as the walk
        // over every cell counted it.
        start(&mut s, 4, "c1");
        snap(&mut s, 5, "c1", share(7, 2.0, "USD"));
        assert_eq!((s.needs_you(), s.running()), (1, 1));
        assert_eq!(total(&s), Some((107, vec![("USD".into(), 300)])));
        snap(&mut s, 6, "c1", running(true, false));
        assert_eq!(s.needs_you(), 2);
        assert_eq!(total(&s), Some((100, vec![("USD".into(), 100)])));
        // Two tasks of the same id: the panel counts both entries.
        assert_eq!(s.task_counts(), (2, 0));
    }
}
