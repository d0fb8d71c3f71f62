//! A review quorum: several reviewers, one verdict.

use serde::{Deserialize, Serialize};

use super::{Severity, finding};

/// One reviewer's verdict in a review quorum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewerVerdict {
    pub agent: String,
    /// The reviewer's box (none when its task could not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// `None`: the reviewer gave no verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    /// The review failed (could not run, or its turn did not end normally).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
}

/// Several reviewers, one verdict: the worst verdict any reviewer gave,
/// and how many of them gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quorum {
    /// The worst verdict (`None`: no reviewer gave one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Severity>,
    /// Reviewers whose verdict is `verdict`.
    pub agree: u32,
    /// Every reviewer, failed ones included.
    pub total: u32,
    /// Each reviewer's verdict, in the order of the tasks.
    pub verdicts: Vec<ReviewerVerdict>,
    /// The reviewers' findings, merged (none in older transcripts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<finding::QuorumFinding>,
    /// The verdict before the quorum checked its findings, when checking
    /// changed it (`Quorum::checked`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Severity>,
}

impl Quorum {
    /// The quorum of `verdicts`.
    pub fn of(verdicts: Vec<ReviewerVerdict>) -> Self {
        let verdict = verdicts.iter().filter_map(|v| v.severity).max();
        let agree = match verdict {
            Some(worst) => verdicts
                .iter()
                .filter(|v| v.severity == Some(worst))
                .count(),
            None => 0,
        };
        Self {
            verdict,
            agree: agree as u32,
            total: verdicts.len() as u32,
            verdicts,
            findings: Vec::new(),
            before: None,
        }
    }

    /// Every reviewer gave the same verdict.
    pub fn unanimous(&self) -> bool {
        self.verdict.is_some() && self.agree == self.total
    }

    /// Whether a reviewer failed or gave no verdict.
    pub fn incomplete(&self) -> bool {
        self.verdicts
            .iter()
            .any(|v| v.failed || v.severity.is_none())
    }
}
