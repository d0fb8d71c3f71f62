//! The session's spending as the screen shows it: the board's snapshot
//! (`session_spend`) copied, the caps it counts against, and a line in
//! the transcript when a cap is warned of or reached.

use std::collections::BTreeMap;

use super::State;
use crate::event::budget::{Caps, Spent, reached_text, warning_text};
use crate::event::{Event, NoticeLevel};

/// What the status line and the side panel say of the session's spending.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Spending {
    /// The session's total: the chat, every agent, nested sub-agents.
    pub spent: Spent,
    /// Per agent (`chat` for the chat's model), by name.
    pub by_agent: BTreeMap<String, Spent>,
    pub caps: Caps,
    /// A cap of the session's was reached.
    pub reached: bool,
}

impl Spending {
    /// The cost cap's share spent, when there is one (`0.85`).
    pub fn share_of_cap(&self) -> Option<f64> {
        let usd = self.caps.session_usd.map(|c| self.spent.cost / c);
        let tokens = self
            .caps
            .tokens
            .map(|c| self.spent.tokens as f64 / c as f64);
        match (usd, tokens) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

impl State {
    /// The ledger's events. (Only [`State::apply`] calls it, with those.)
    pub(super) fn apply_budget(&mut self, event: &Event) {
        match event {
            Event::SessionSpend { spent, by_agent } => {
                self.spending.spent = *spent;
                self.spending.by_agent = by_agent
                    .iter()
                    .map(|(name, s)| (crate::confine::sanitize::one_line(name), *s))
                    .collect();
            }
            Event::BudgetSet { caps } => {
                self.spending.caps = *caps;
                self.spending.reached = false;
            }
            Event::BudgetWarning {
                unit,
                spent,
                cap,
                estimated,
            } => self.on_notice(
                NoticeLevel::Warning,
                &format!(
                    "{} ({:.0} %)",
                    warning_text(*unit, (*spent, *estimated), *cap),
                    spent / cap * 100.0
                ),
            ),
            Event::BudgetReached {
                call_id,
                unit,
                spent,
                cap,
                estimated,
            } => {
                let text = reached_text(call_id.as_deref(), *unit, (*spent, *estimated), *cap);
                let then = match call_id {
                    None => {
                        self.spending.reached = true;
                        "no new call, queued task or follow-up starts; calls in a turn finish it"
                    }
                    Some(_) => "nothing more of it starts",
                };
                self.on_error(&format!("{text}: {then}"));
            }
            _ => {}
        }
    }
}
