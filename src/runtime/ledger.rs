//! The session's spending, kept by the task board (the one owner of call
//! state) and counted against its caps (`event::budget`).
//!
//! What is counted: each call's part of its agent session's cost (the
//! board's share: a resumed session's earlier spending is not counted
//! again) and of its context tokens, and the chat model's input and output
//! tokens. Nested sub-agents are calls like any other, so they count too.
//! The ledger says what changed as events: the session's spending (a
//! snapshot, with a line per agent), a warning at 80 % of a cap, and a cap
//! reached (once each).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::event::Event;
use crate::event::budget::{Caps, Spent, Unit};

/// The share of a cap past which the status line warns.
const WARN_AT: f64 = 0.8;

#[derive(Debug, Default, Clone)]
pub struct Ledger {
    caps: Caps,
    spent: Spent,
    by_agent: BTreeMap<String, Spent>,
    /// Each call: its agent, what it spent, its own cap.
    calls: HashMap<String, Call>,
    warned: HashSet<Unit>,
    reached: HashSet<Unit>,
    reached_calls: HashSet<String>,
    /// Events to send after the one that made them.
    said: Vec<Event>,
}

#[derive(Debug, Default, Clone)]
struct Call {
    agent: String,
    spent: Spent,
    cap: Option<f64>,
}

impl Ledger {
    /// The caps to count against (again, from what was spent).
    pub fn set_caps(&mut self, caps: Caps) {
        self.caps = caps;
        self.warned.clear();
        self.reached.clear();
        self.check_session();
    }

    pub fn caps(&self) -> Caps {
        self.caps
    }

    pub fn spent(&self) -> Spent {
        self.spent
    }

    /// What each agent spent (`chat` for the chat's model), by name.
    pub fn by_agent(&self) -> &BTreeMap<String, Spent> {
        &self.by_agent
    }

    /// A call started, with its own cap (else the session's `task_usd`).
    pub fn call_started(&mut self, call_id: &str, agent: &str, cap: Option<f64>) {
        self.calls.insert(
            call_id.to_string(),
            Call {
                agent: agent.to_string(),
                spent: Spent::default(),
                cap,
            },
        );
    }

    /// [`Ledger::call_started`], unless it was.
    pub fn call_started_once(&mut self, call_id: &str, agent: &str) {
        if !self.calls.contains_key(call_id) {
            self.call_started(call_id, agent, None);
        }
    }

    /// A call's part of its session is now `spent` (cost, and its context
    /// tokens, never below 0).
    pub fn call_spent(&mut self, call_id: &str, spent: Spent) {
        let Some(call) = self.calls.get_mut(call_id) else {
            return;
        };
        let before = std::mem::replace(&mut call.spent, spent);
        let agent = call.agent.clone();
        let mine = self.by_agent.entry(agent).or_default();
        mine.cost += spent.cost - before.cost;
        mine.tokens = (mine.tokens + spent.tokens).saturating_sub(before.tokens);
        mine.estimated |= spent.estimated;
        self.spent.cost += spent.cost - before.cost;
        self.spent.tokens = (self.spent.tokens + spent.tokens).saturating_sub(before.tokens);
        self.spent.estimated |= spent.estimated;
        self.changed();
        self.check_call(call_id);
    }

    /// The chat's model used `tokens` (a turn's input and output), which
    /// cost `cost` (an estimate from its price when `estimated`).
    pub fn chat_spent(&mut self, tokens: u64, cost: f64, estimated: bool) {
        let chat = self.by_agent.entry("chat".into()).or_default();
        for s in [&mut self.spent, chat] {
            s.tokens += tokens;
            s.cost += cost;
            s.estimated |= estimated;
        }
        self.changed();
    }

    /// Why no new call may start now: the session's cap reached.
    pub fn refusal(&self) -> Option<String> {
        self.session_reached().map(|reached| {
            format!(
                "{reached}: no new call starts (raise it with --max-cost, --max-tokens or [budget])"
            )
        })
    }

    /// What the session's cap reached says (`budget: the session has spent
    /// $1.20 of its $1.00 cap`), once it is.
    pub fn session_reached(&self) -> Option<String> {
        let text = crate::event::budget::reached_text;
        if let Some(cap) = self.caps.session_usd.filter(|c| self.spent.cost >= *c) {
            let spent = (self.spent.cost, self.spent.estimated);
            return Some(text(None, Unit::Usd, spent, cap));
        }
        let cap = self.caps.tokens.filter(|c| self.spent.tokens >= *c)?;
        let spent = (self.spent.tokens as f64, false);
        Some(text(None, Unit::Tokens, spent, cap as f64))
    }

    /// Why `call_id` may not go on (a follow-up): its own cap reached, or
    /// the session's.
    pub fn refusal_of(&self, call_id: &str) -> Option<String> {
        if let Some(call) = self.calls.get(call_id)
            && let Some(cap) = self.cap_of(call)
            && call.spent.cost >= cap
        {
            return Some(format!(
                "{}: nothing more of it starts",
                crate::event::budget::reached_text(
                    Some(call_id),
                    Unit::Usd,
                    (call.spent.cost, call.spent.estimated),
                    cap
                )
            ));
        }
        self.refusal()
    }

    /// A cap was reached (the session's or a task's).
    pub fn stopped(&self) -> bool {
        !self.reached.is_empty() || !self.reached_calls.is_empty()
    }

    /// The events the last changes made, to send after them.
    pub fn take_said(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.said)
    }

    fn cap_of(&self, call: &Call) -> Option<f64> {
        call.cap.or(self.caps.task_usd)
    }

    fn changed(&mut self) {
        // Sums of reported amounts, kept to a billionth of a dollar (no
        // `0.8999999999999999` in what is said).
        let round = |x: f64| (x * 1e9).round() / 1e9;
        self.spent.cost = round(self.spent.cost);
        for s in self.by_agent.values_mut() {
            s.cost = round(s.cost);
        }
        self.said.push(Event::SessionSpend {
            spent: self.spent,
            by_agent: self.by_agent.clone(),
        });
        self.check_session();
    }

    fn check_session(&mut self) {
        let usd = self
            .caps
            .session_usd
            .map(|cap| (Unit::Usd, self.spent.cost, cap));
        let tokens = self
            .caps
            .tokens
            .map(|cap| (Unit::Tokens, self.spent.tokens as f64, cap as f64));
        for (unit, spent, cap) in [usd, tokens].into_iter().flatten() {
            let estimated = unit == Unit::Usd && self.spent.estimated;
            if spent >= cap && self.reached.insert(unit) {
                self.said.push(Event::BudgetReached {
                    call_id: None,
                    unit,
                    spent,
                    cap,
                    estimated,
                });
            } else if spent >= cap * WARN_AT && spent < cap && self.warned.insert(unit) {
                self.said.push(Event::BudgetWarning {
                    unit,
                    spent,
                    cap,
                    estimated,
                });
            }
        }
    }

    fn check_call(&mut self, call_id: &str) {
        let Some(call) = self.calls.get(call_id) else {
            return;
        };
        let Some(cap) = self.cap_of(call) else {
            return;
        };
        let spent = call.spent.cost;
        if spent >= cap && self.reached_calls.insert(call_id.to_string()) {
            self.said.push(Event::BudgetReached {
                call_id: Some(call_id.to_string()),
                unit: Unit::Usd,
                spent,
                cap,
                estimated: call.spent.estimated,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spent(cost: f64, tokens: u64) -> Spent {
        Spent {
            cost,
            tokens,
            estimated: false,
        }
    }

    fn kinds(events: &[Event]) -> Vec<&'static str> {
        events.iter().map(Event::type_name).collect()
    }

    #[test]
    fn calls_add_up_per_agent_and_a_cap_is_warned_then_reached_once() {
        let mut l = Ledger::default();
        l.set_caps(Caps {
            session_usd: Some(1.0),
            ..Caps::default()
        });
        l.call_started("c1", "fake", None);
        l.call_started("c2", "other", None);
        l.call_spent("c1", spent(0.5, 100));
        assert_eq!(kinds(&l.take_said()), ["session_spend"]);
        // A later report of the same call replaces its part.
        l.call_spent("c1", spent(0.6, 150));
        l.call_spent("c2", spent(0.25, 10));
        let said = l.take_said();
        assert_eq!(
            kinds(&said),
            ["session_spend", "session_spend", "budget_warning"]
        );
        assert_eq!(l.spent(), spent(0.85, 160));
        let Event::SessionSpend { by_agent, .. } = &said[1] else {
            unreachable!()
        };
        assert_eq!(by_agent["fake"], spent(0.6, 150));
        assert_eq!(l.refusal(), None);
        l.call_spent("c2", spent(0.45, 10));
        assert_eq!(kinds(&l.take_said()), ["session_spend", "budget_reached"]);
        assert!(l.refusal().unwrap().contains("$1.05 of its $1.00 cap"));
        l.call_spent("c2", spent(0.5, 10));
        assert_eq!(kinds(&l.take_said()), ["session_spend"], "said once");
    }

    #[test]
    fn a_tasks_own_cap_stops_it_alone_and_tokens_count_the_chat() {
        let mut l = Ledger::default();
        l.set_caps(Caps {
            task_usd: Some(0.1),
            tokens: Some(1_000),
            ..Caps::default()
        });
        l.call_started("call-1", "fake", None);
        l.call_started("call-2", "fake", Some(1.0));
        l.call_spent("call-1", spent(0.2, 0));
        l.call_spent("call-2", spent(0.2, 0));
        let said = l.take_said();
        assert_eq!(
            kinds(&said),
            ["session_spend", "budget_reached", "session_spend"]
        );
        assert!(l.refusal_of("call-1").unwrap().contains("task c1"));
        assert_eq!(l.refusal_of("call-2"), None);
        assert_eq!(l.refusal(), None);
        l.chat_spent(900, 0.0, false);
        l.take_said();
        l.chat_spent(100, 0.0, false);
        assert_eq!(kinds(&l.take_said()), ["session_spend", "budget_reached"]);
        assert!(
            l.refusal()
                .unwrap()
                .contains("1000 tokens of its 1000 tokens cap")
        );
    }
}
