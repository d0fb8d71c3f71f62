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

#[derive(Debug, Clone)]
struct CostTally {
    currency: String,
    amount: f64,
    boxes: BTreeSet<usize>,
}

impl Tally {
    /// Counts the snapshot of the box at cell `index`.
    pub fn add_box(&mut self, index: usize, s: &Summary) {
        self.waiting += usize::from(s.waiting);
        self.cancelling += usize::from(s.cancelling);
        let Some(share) = &s.share else {
            return;
        };
        self.shares += 1;
        self.tokens += share.tokens;
        if let Some(c) = &share.cost {
            match self.costs.iter_mut().find(|x| x.currency == c.currency) {
                Some(x) => {
                    x.amount += c.amount;
                    x.boxes.insert(index);
                }
                None => self.costs.push(CostTally {
                    currency: c.currency.clone(),
                    amount: c.amount,
                    boxes: BTreeSet::from([index]),
                }),
            }
        }
    }

    /// Takes back what [`Tally::add_box`] counted of the same snapshot.
    pub fn remove_box(&mut self, index: usize, s: &Summary) {
        self.waiting -= usize::from(s.waiting);
        self.cancelling -= usize::from(s.cancelling);
        let Some(share) = &s.share else {
            return;
        };
        self.shares -= 1;
        self.tokens -= share.tokens;
        if let Some(c) = &share.cost
            && let Some(i) = self.costs.iter().position(|x| x.currency == c.currency)
        {
            let x = &mut self.costs[i];
            x.amount -= c.amount;
            x.boxes.remove(&index);
            if x.boxes.is_empty() {
                // No box has a cost in it any more: the currency goes.
                self.costs.remove(i);
            }
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
                })
                .collect(),
        })
    }
}
