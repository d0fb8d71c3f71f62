//! Spending caps (issue 40): what a session, or one task, may spend, and
//! what was spent. The caps come from the command line (`--max-cost`,
//! `--max-tokens`), the config file's `[budget]` and a `subagent` call's
//! `max_cost`; the spending from what agents and the chat's model report
//! (a call's part of its agent session's cost, the chat's tokens). The
//! task board keeps the ledger (`runtime::ledger`); these are its words.

use serde::{Deserialize, Serialize};

/// The caps of a session: none set is no cap.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Caps {
    /// What the whole session may cost, in USD: the chat, every agent,
    /// nested sub-agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_usd: Option<f64>,
    /// What one task (a call and its follow-ups) may cost, in USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_usd: Option<f64>,
    /// How many tokens the session may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

impl Caps {
    pub fn is_empty(&self) -> bool {
        self.session_usd.is_none() && self.task_usd.is_none() && self.tokens.is_none()
    }
}

/// What was spent: the cost agents reported (in their currency, USD by
/// default) and tokens.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Spent {
    #[serde(default)]
    pub cost: f64,
    #[serde(default)]
    pub tokens: u64,
    /// Part of the cost is quorum's estimate from a price table (an agent
    /// that reports tokens but no cost, the chat's model): shown `~$0.42`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

impl Spent {
    /// `$1.20`, or `~$1.20` when part of it is an estimate.
    pub fn cost_text(&self) -> String {
        Unit::Usd.spent(self.cost, self.estimated)
    }
}

/// A model's price in USD per million tokens, read (`input`) and written
/// (`output`): what quorum estimates a cost with when none is reported.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    #[serde(deserialize_with = "per_million")]
    pub input: f64,
    #[serde(deserialize_with = "per_million")]
    pub output: f64,
}

/// A price is 0 or more dollars a million tokens.
fn per_million<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let value = <f64 as Deserialize>::deserialize(d)?;
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(serde::de::Error::custom(format!(
            "a price is USD per million tokens, 0 or more (like 3.0), not {value}"
        )))
    }
}

impl Price {
    /// What `input` tokens read and `output` tokens written cost, in USD.
    pub fn of(&self, input: u64, output: u64) -> f64 {
        (input as f64 * self.input + output as f64 * self.output) / 1e6
    }
}

/// What a cap counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Usd,
    Tokens,
}

impl Unit {
    /// `$1.20`, `120k tokens`.
    pub fn amount(self, value: f64) -> String {
        match self {
            Unit::Usd => format!("${value:.2}"),
            Unit::Tokens => format!("{} tokens", value as u64),
        }
    }

    /// [`Unit::amount`] of what was spent: `~$1.20` when it is in part
    /// an estimate (tokens are counted, never estimated).
    pub fn spent(self, value: f64, estimated: bool) -> String {
        match (self, estimated) {
            (Unit::Usd, true) => format!("~{}", self.amount(value)),
            _ => self.amount(value),
        }
    }
}

/// What a cap reached says: `the session has spent $1.20 of its $1.00 cap`
/// (or a task, `c3`; `~$1.20` when part of it is an estimate).
pub fn reached_text(
    call_id: Option<&str>,
    unit: Unit,
    (spent, estimated): (f64, bool),
    cap: f64,
) -> String {
    let who = match call_id {
        Some(call) => format!("task {}", call.replace("call-", "c")),
        None => "the session".to_string(),
    };
    format!(
        "budget: {who} has spent {} of its {} cap",
        unit.spent(spent, estimated),
        unit.amount(cap)
    )
}

/// What a cap warned of says: `$0.90 of the session's $1.00 cap spent`.
pub fn warning_text(unit: Unit, (spent, estimated): (f64, bool), cap: f64) -> String {
    format!(
        "budget: {} of the session's {} cap spent",
        unit.spent(spent, estimated),
        unit.amount(cap)
    )
}

/// A cap that is not a positive number is refused (`--max-cost 0`,
/// `session_usd = -1`): named, with what it takes.
pub fn check_usd(what: &str, value: f64) -> Result<f64, String> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(format!(
            "{what} must be an amount above 0 (in USD, like 2.50), not {value}"
        ))
    }
}

/// [`check_usd`] for a token cap.
pub fn check_tokens(what: &str, value: u64) -> Result<u64, String> {
    if value > 0 {
        Ok(value)
    } else {
        Err(format!("{what} must be a number of tokens above 0, not 0"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_says_who_spent_what() {
        assert_eq!(
            reached_text(None, Unit::Usd, (1.2, false), 1.0),
            "budget: the session has spent $1.20 of its $1.00 cap"
        );
        assert_eq!(
            reached_text(Some("call-3"), Unit::Tokens, (1200.0, true), 1000.0),
            "budget: task c3 has spent 1200 tokens of its 1000 tokens cap"
        );
        assert_eq!(
            warning_text(Unit::Usd, (0.9, true), 1.0),
            "budget: ~$0.90 of the session's $1.00 cap spent"
        );
        assert!(check_usd("--max-cost", 0.0).is_err());
        assert!(check_usd("--max-cost", -1.0).is_err());
        assert!(check_usd("--max-cost", f64::NAN).is_err());
        assert_eq!(check_usd("--max-cost", 2.5), Ok(2.5));
        assert!(check_tokens("--max-tokens", 0).is_err());
    }
}
