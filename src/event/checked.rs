//! A review quorum that checked itself (`verify`): each red or yellow
//! finding only one reviewer made was sent to another reviewer, who
//! confirmed or refuted it. A refuted finding stays listed but no longer
//! counts, and the verdict is made again without it.
//!
//! The rule: a reviewer's verdict stands on its findings. When a finding
//! of a reviewer's was refuted whose severity reached the reviewer's own
//! verdict, and none of that reviewer's findings that still count reaches
//! it, the reviewer's verdict falls to the worst of its findings that still
//! count (green when none does). Every other reviewer's verdict stands as
//! it gave it. The quorum's verdict is then the worst of the reviewers'
//! verdicts, as before, and `agree` counts those that give it. A reviewer
//! that said red with no finding at all stays red: there was nothing to
//! refute.

use super::finding::QuorumFinding;
use super::{Quorum, ReviewerVerdict, Severity};

impl Quorum {
    /// Makes the verdict again once its findings were checked (their
    /// `check` set): the rule above. The verdict it had is kept in
    /// `before` when it changed.
    pub fn checked(&mut self) {
        let was = self.verdict;
        let standing: Vec<Option<Severity>> =
            self.verdicts.iter().map(|v| self.standing(v)).collect();
        let verdict = standing.iter().flatten().max().copied();
        self.agree = match verdict {
            Some(worst) => standing.iter().filter(|s| **s == Some(worst)).count() as u32,
            None => 0,
        };
        self.verdict = verdict;
        self.before = if was != verdict { was } else { None };
    }

    /// A reviewer's verdict once its findings were checked.
    fn standing(&self, v: &ReviewerVerdict) -> Option<Severity> {
        let said = v.severity?;
        let mine = || self.findings.iter().filter(|f| f.by.contains(&v.agent));
        let refuted = mine().filter(|f| !f.counts()).map(severity).max();
        let kept = mine().filter(|f| f.counts()).map(severity).max();
        match refuted {
            Some(r) if r >= said && kept.is_none_or(|k| k < said) => {
                Some(kept.unwrap_or(Severity::Green))
            }
            _ => Some(said),
        }
    }

    /// `1 of 2 red findings refuted, 1 of 1 yellow finding refuted`: what
    /// checking refuted, none when it refuted nothing.
    pub fn refuted_label(&self) -> Option<String> {
        let mut said = Vec::new();
        for s in [Severity::Red, Severity::Yellow, Severity::Green] {
            let of = self
                .findings
                .iter()
                .filter(|f| f.finding.severity == s)
                .count();
            let refuted = self
                .findings
                .iter()
                .filter(|f| f.finding.severity == s && !f.counts())
                .count();
            if refuted > 0 {
                said.push(format!(
                    "{refuted} of {of} {} finding{} refuted",
                    s.as_str(),
                    if of == 1 { "" } else { "s" }
                ));
            }
        }
        (!said.is_empty()).then(|| said.join(", "))
    }

    /// The verdict's words: `red`, `no verdict`, and once checking refuted
    /// something, `red → yellow after verification: 1 of 2 red findings
    /// refuted` (or `red after verification: …` when it stands).
    pub fn verdict_text(&self) -> String {
        let now = self.verdict.map_or("no verdict", Severity::as_str);
        let Some(refuted) = self.refuted_label() else {
            return now.to_string();
        };
        match self.before {
            Some(before) => format!("{} → {now} after verification: {refuted}", before.as_str()),
            None => format!("{now} after verification: {refuted}"),
        }
    }

    /// `red · 2 of 3` (`no verdict · 0 of 3` when no reviewer gave one),
    /// then its findings when it has any:
    /// `red · 1 of 2 · 3 findings: 1 red, 2 yellow · agreed: 1 by 2 of 2, 2 by 1 of 2`;
    /// after a verification that refuted something, the verdict says so
    /// (`red → green after verification: 1 of 1 red finding refuted · 1 of 2 · …`).
    pub fn label(&self) -> String {
        let verdict = format!("{} · {} of {}", self.verdict_text(), self.agree, self.total);
        match self.findings_label() {
            Some(findings) => format!("{verdict} · {findings}"),
            None => verdict,
        }
    }

    /// `3 findings: 1 red, 2 yellow · agreed: 1 by 2 of 2, 2 by 1 of 2`:
    /// how many of each severity, and how many reviewers found each.
    pub fn findings_label(&self) -> Option<String> {
        if self.findings.is_empty() {
            return None;
        }
        let n = self.findings.len();
        let mut counts = Vec::new();
        for s in [Severity::Red, Severity::Yellow, Severity::Green] {
            let k = self
                .findings
                .iter()
                .filter(|f| f.finding.severity == s)
                .count();
            if k > 0 {
                counts.push(format!("{k} {}", s.as_str()));
            }
        }
        let mut agreed: Vec<(usize, usize)> = Vec::new();
        for f in &self.findings {
            match agreed.iter_mut().find(|(by, _)| *by == f.by.len()) {
                Some((_, k)) => *k += 1,
                None => agreed.push((f.by.len(), 1)),
            }
        }
        agreed.sort_by_key(|&(by, _)| std::cmp::Reverse(by));
        let agreed: Vec<String> = agreed
            .iter()
            .map(|(by, k)| format!("{k} by {by} of {}", self.total))
            .collect();
        Some(format!(
            "{n} finding{}: {} · agreed: {}",
            if n == 1 { "" } else { "s" },
            counts.join(", "),
            agreed.join(", ")
        ))
    }
}

fn severity(f: &QuorumFinding) -> Severity {
    f.finding.severity
}

#[cfg(test)]
mod tests {
    use super::super::finding::{Check, Finding};
    use super::*;
    use Severity::*;

    fn reviewer(agent: &str, severity: Severity) -> ReviewerVerdict {
        ReviewerVerdict {
            agent: agent.into(),
            call_id: None,
            severity: Some(severity),
            failed: false,
        }
    }

    fn found(by: &str, line: u32, severity: Severity, refuted: Option<bool>) -> QuorumFinding {
        QuorumFinding {
            finding: Finding {
                file: "a.rs".into(),
                line,
                end_line: None,
                severity,
                title: "t".into(),
                body: String::new(),
            },
            by: vec![by.into()],
            of: 2,
            outside_diff: false,
            check: refuted.map(|r| {
                let (by, reason) = ("other".to_string(), "because".to_string());
                if r {
                    Check::Refuted { by, reason }
                } else {
                    Check::Confirmed { by, reason }
                }
            }),
        }
    }

    /// A lone red finding refuted turns a red reviewer's verdict to the
    /// worst of what still counts; the verdict says so.
    #[test]
    fn a_refuted_red_finding_turns_the_verdict() {
        let mut q = Quorum::of(vec![reviewer("a", Red), reviewer("b", Yellow)]);
        q.findings = vec![
            found("a", 1, Red, Some(true)),
            found("a", 5, Green, None),
            found("b", 9, Yellow, Some(false)),
        ];
        q.checked();
        assert_eq!((q.verdict, q.before, q.agree), (Some(Yellow), Some(Red), 1));
        assert_eq!(
            q.verdict_text(),
            "red → yellow after verification: 1 of 1 red finding refuted"
        );
        assert!(
            q.label().starts_with(
                "red → yellow after verification: 1 of 1 red finding refuted · 1 of 2 · 3 findings"
            ),
            "{}",
            q.label()
        );
    }

    /// A red finding that still counts keeps the verdict red; it says
    /// what was refuted all the same. Nothing refuted: nothing said.
    #[test]
    fn a_red_that_still_counts_keeps_the_verdict() {
        let mut q = Quorum::of(vec![reviewer("a", Red), reviewer("b", Green)]);
        q.findings = vec![
            found("a", 1, Red, Some(true)),
            found("a", 3, Red, Some(false)),
        ];
        q.checked();
        assert_eq!((q.verdict, q.before), (Some(Red), None));
        assert_eq!(
            q.verdict_text(),
            "red after verification: 1 of 2 red findings refuted"
        );
        let mut q = Quorum::of(vec![reviewer("a", Red), reviewer("b", Green)]);
        q.findings = vec![found("a", 1, Red, Some(false))];
        q.checked();
        assert_eq!((q.verdict_text().as_str(), q.agree), ("red", 1));
        // Every finding refuted: the reviewer falls to green.
        let mut q = Quorum::of(vec![reviewer("a", Red), reviewer("b", Green)]);
        q.findings = vec![found("a", 1, Red, Some(true))];
        q.checked();
        assert_eq!((q.verdict, q.agree), (Some(Green), 2));
        // A red verdict with no finding has nothing to refute.
        let mut q = Quorum::of(vec![reviewer("a", Red), reviewer("b", Green)]);
        q.findings = vec![found("b", 1, Yellow, Some(true))];
        q.checked();
        assert_eq!((q.verdict, q.before), (Some(Red), None));
    }

    /// Transcripts from before verification load without `before`.
    #[test]
    fn before_is_left_out_when_unchanged() {
        let q = Quorum::of(vec![reviewer("a", Red)]);
        let json = serde_json::to_value(&q).unwrap();
        assert!(json.get("before").is_none(), "{json}");
    }
}
