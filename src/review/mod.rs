//! A review's findings where code is reviewed (issue 38): pure functions
//! from a finished review quorum ([`Review`]: the verdict, each reviewer's
//! name and findings, the quorum's merged findings, the reviewed diff's
//! lines) to the forms `quorum review --format` prints: [`sarif`] (SARIF
//! 2.1.0, for code scanning), [`markdown`] (a pull request's comment),
//! [`github`] (the body of GitHub's "create a review" request) and
//! [`text`] (the findings as lines on a terminal). No I/O here: `cli`
//! runs the review and prints what these make.

pub mod diff;
pub mod github;
pub mod markdown;
pub mod sarif;
pub mod text;

use crate::event::Severity;
use crate::event::finding::{Check, Finding, QuorumFinding};

pub use diff::DiffLines;

/// One reviewer of the quorum, as the formats name it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reviewer {
    /// The agent's name.
    pub name: String,
    /// Its verdict (`None`: it gave none).
    pub verdict: Option<Severity>,
    /// It failed (an error, or a turn that did not end normally).
    pub failed: bool,
    /// What it found, in the order it reported.
    pub findings: Vec<Finding>,
}

/// A finished review quorum, everything the formats read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Review {
    /// What was reviewed (`git diff REV`'s `REV`).
    pub base: String,
    /// The quorum's verdict (`None`: no reviewer gave one).
    pub verdict: Option<Severity>,
    /// How many reviewers gave the verdict (`2 of 3`), or what else to
    /// say after it (`nothing to review`).
    pub agreed: String,
    /// The reviewers, in the order of the tasks.
    pub reviewers: Vec<Reviewer>,
    /// The quorum's merged findings.
    pub merged: Vec<QuorumFinding>,
    /// The lines of the reviewed diff, when it was read.
    pub diff: Option<DiffLines>,
}

impl Review {
    /// The quorum's findings: the merged ones; while nothing merged them
    /// (none given, but reviewers found something), each reviewer's own,
    /// one reviewer each. Worst first, then by file and line.
    pub fn findings(&self) -> Vec<QuorumFinding> {
        let mut all = if self.merged.is_empty() {
            let of = self.reviewers.len();
            self.reviewers
                .iter()
                .flat_map(|r| {
                    r.findings.iter().map(|f| QuorumFinding {
                        finding: f.clone(),
                        by: vec![r.name.clone()],
                        of,
                        outside_diff: false,
                        check: None,
                    })
                })
                .collect()
        } else {
            self.merged.clone()
        };
        all.sort_by(|a, b| {
            (b.finding.severity, &a.finding.file, a.finding.line).cmp(&(
                a.finding.severity,
                &b.finding.file,
                b.finding.line,
            ))
        });
        all
    }
}

/// `file:line`, or `file:line-end` for a range.
pub fn place(f: &Finding) -> String {
    match f.end_line {
        Some(end) if end > f.line => format!("{}:{}-{end}", f.file, f.line),
        _ => format!("{}:{}", f.file, f.line),
    }
}

/// Who found it: `claude, codex · 2 of 3`.
pub fn found_by(q: &QuorumFinding) -> String {
    format!("{} · {} of {}", q.by.join(", "), q.by.len(), q.of)
}

/// Whether a second reviewer checked it: `confirmed by codex`, `refuted
/// by codex: REASON`, or `not verified`.
pub fn verified(q: &QuorumFinding) -> String {
    let (word, by, reason) = match &q.check {
        None => return "not verified".to_string(),
        Some(Check::Confirmed { by, reason }) => ("confirmed", by, reason),
        Some(Check::Refuted { by, reason }) => ("refuted", by, reason),
    };
    if reason.is_empty() {
        format!("{word} by {by}")
    } else {
        format!("{word} by {by}: {reason}")
    }
}

/// The verdict's word, `none` without one.
pub fn verdict_word(verdict: Option<Severity>) -> &'static str {
    verdict.map_or("none", Severity::as_str)
}

#[cfg(test)]
pub(crate) mod sample {
    //! Findings made up for the formats' tests.
    use super::*;

    pub fn finding(
        file: &str,
        line: u32,
        end: Option<u32>,
        severity: Severity,
        title: &str,
    ) -> Finding {
        Finding {
            file: file.into(),
            line,
            end_line: end,
            severity,
            title: title.into(),
            body: format!("Why {title}.\n\n```rust\nlet x = 1;\n```"),
        }
    }

    /// Two reviewers (claude red, codex yellow), a shared red finding in
    /// the diff, a yellow one outside it, a green one refuted; the diff
    /// changes `src/http.rs` lines 40-50 and `src/lib.rs` line 3.
    pub fn review() -> Review {
        let red = finding(
            "src/http.rs",
            42,
            Some(48),
            Severity::Red,
            "retries a POST that is not idempotent",
        );
        let yellow = finding(
            "src/lib.rs",
            90,
            None,
            Severity::Yellow,
            "a name | with a pipe",
        );
        let green = finding("src/lib.rs", 3, None, Severity::Green, "could be shorter");
        let diff = DiffLines::parse(
            "diff --git a/src/http.rs b/src/http.rs\n--- a/src/http.rs\n+++ b/src/http.rs\n\
             @@ -40,9 +40,11 @@ fn f() {\n context\n+added\n\
             diff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n\
             @@ -3 +3 @@\n-old\n+new\n",
        );
        Review {
            base: "HEAD".into(),
            verdict: Some(Severity::Red),
            agreed: "1 of 2".into(),
            reviewers: vec![
                Reviewer {
                    name: "claude".into(),
                    verdict: Some(Severity::Red),
                    failed: false,
                    findings: vec![red.clone(), green.clone()],
                },
                Reviewer {
                    name: "codex".into(),
                    verdict: Some(Severity::Yellow),
                    failed: false,
                    findings: vec![red.clone(), yellow.clone()],
                },
            ],
            merged: vec![
                QuorumFinding {
                    finding: green,
                    by: vec!["claude".into()],
                    of: 2,
                    outside_diff: false,
                    check: Some(Check::Refuted {
                        by: "codex".into(),
                        reason: "it is short enough".into(),
                    }),
                },
                QuorumFinding {
                    finding: yellow,
                    by: vec!["codex".into()],
                    of: 2,
                    outside_diff: true,
                    check: None,
                },
                QuorumFinding {
                    finding: red,
                    by: vec!["claude".into(), "codex".into()],
                    of: 2,
                    outside_diff: false,
                    check: None,
                },
            ],
            diff: Some(diff),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_are_the_merged_ones_worst_first() {
        let r = sample::review();
        let f = r.findings();
        let order: Vec<Severity> = f.iter().map(|q| q.finding.severity).collect();
        assert_eq!(order, [Severity::Red, Severity::Yellow, Severity::Green]);
        assert_eq!(found_by(&f[0]), "claude, codex · 2 of 2");
        assert_eq!(place(&f[0].finding), "src/http.rs:42-48");
        assert_eq!(place(&f[1].finding), "src/lib.rs:90");
        assert_eq!(verified(&f[2]), "refuted by codex: it is short enough");
    }

    #[test]
    fn without_merged_findings_each_reviewers_own_are_taken() {
        let mut r = sample::review();
        r.merged.clear();
        let f = r.findings();
        assert_eq!(f.len(), 4);
        assert!(f.iter().all(|q| q.by.len() == 1 && q.of == 2));
        assert_eq!(f[0].finding.severity, Severity::Red);
        r.reviewers.iter_mut().for_each(|r| r.findings.clear());
        assert!(r.findings().is_empty());
    }
}
