//! A quorum that checks itself (`verify`): a red or yellow finding only
//! one reviewer made goes to another reviewer of the batch (never its
//! author), with the reviewed diff and the finding, whose answer begins
//! `<!-- finding-check: confirmed -->` or `<!-- finding-check: refuted -->`,
//! then its reason. Pure: which findings are checked and by whom, the
//! message the checker gets, and its answer read.

use crate::confine::sanitize::{clip, one_line};
use crate::event::Severity;
use crate::event::finding::{Check, Finding, QuorumFinding};

/// The longest reason kept, in characters.
pub const MAX_REASON: usize = 400;

/// The contract appended to a check's message.
pub const CHECK_CONTRACT: &str = "\n\nBegin your answer with exactly one line \
`<!-- finding-check: confirmed -->` (the finding is right: the code does what it says, and it \
matters) or `<!-- finding-check: refuted -->` (it is wrong, or it does not matter), then your \
reason in one short paragraph.";

/// Whether a quorum's finding is to be checked: red or yellow, and made
/// by one reviewer only.
pub fn wanted(f: &QuorumFinding) -> bool {
    f.by.len() == 1 && f.finding.severity >= Severity::Yellow
}

/// Who checks which finding: for each finding [`wanted`] (its index in
/// `findings`), one of `reviewers` (the batch's that answered, in task
/// order) that did not make it, taken in turn; `None` when there is no
/// other reviewer.
pub fn checkers(findings: &[QuorumFinding], reviewers: &[String]) -> Vec<(usize, Option<String>)> {
    let mut distinct: Vec<&String> = Vec::new();
    for r in reviewers {
        if !distinct.contains(&r) {
            distinct.push(r);
        }
    }
    let mut turn = 0;
    findings
        .iter()
        .enumerate()
        .filter(|(_, f)| wanted(f))
        .map(|(i, f)| {
            let others: Vec<&&String> = distinct.iter().filter(|r| !f.by.contains(r)).collect();
            if others.is_empty() {
                return (i, None);
            }
            let checker = others[turn % others.len()].to_string();
            turn += 1;
            (i, Some(checker))
        })
        .collect()
}

/// The message a checker gets: what to do, the finding, the reviewed
/// diff (when known), and the contract last.
pub fn prompt(author: &str, f: &Finding, diff: Option<&str>) -> String {
    let mut p = format!(
        "Check a finding of {author}'s code review: {}\n\n\
         Another reviewer reported the finding below about this change. Read the code it \
         points at and decide whether it is right.\n\n\
         ## The finding\n\n{} at {}: {}\n\n{}\n\n## The change\n\n",
        f.line_text(),
        f.severity.as_str(),
        f.place(),
        f.title,
        f.body.trim()
    );
    match diff {
        Some(diff) => p.push_str(&format!("```diff\n{}\n```", diff.trim_end())),
        None => p.push_str("(The reviewed diff is not known: read the repository.)"),
    }
    p.push_str(CHECK_CONTRACT);
    p
}

/// A checker's answer read: its header anywhere at a line's start
/// (blank lines and a sentence before it are tolerated; case and inner
/// spaces too), its reason the first paragraph after it, sanitised, on one
/// line and bounded. `None`: no such header, or a value that is neither
/// confirmed nor refuted.
pub fn parse(answer: &str, by: &str) -> Option<Check> {
    let mut at = 0;
    while let Some(open) = answer[at..].find("<!--") {
        let from = at + open + 4;
        let close = answer[from..].find("-->")?;
        let inner = &answer[from..from + close];
        at = from + close + 3;
        let Some((key, value)) = inner.split_once(':') else {
            continue;
        };
        if !key.trim().eq_ignore_ascii_case("finding-check") {
            continue;
        }
        let reason = reason(&answer[at..]);
        let by = by.to_string();
        return match value.trim().to_ascii_lowercase().as_str() {
            "confirmed" | "confirm" => Some(Check::Confirmed { by, reason }),
            "refuted" | "refute" => Some(Check::Refuted { by, reason }),
            _ => None,
        };
    }
    None
}

/// The first paragraph of `text`, on one line, bounded.
fn reason(text: &str) -> String {
    let text = text.trim_start();
    let first = text.split("\n\n").next().unwrap_or("");
    clip(&one_line(first), MAX_REASON)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(by: &[&str], severity: Severity) -> QuorumFinding {
        QuorumFinding {
            finding: Finding {
                file: "lib.rs".into(),
                line: 2,
                end_line: None,
                severity,
                title: "added() is never called".into(),
                body: "Nothing calls it.".into(),
            },
            by: by.iter().map(|b| b.to_string()).collect(),
            of: 3,
            outside_diff: false,
            check: None,
        }
    }

    #[test]
    fn the_header_is_read_tolerantly() {
        let c = parse(
            "<!-- finding-check: refuted -->\nIt is called from main.\n\nMore.",
            "b",
        );
        assert_eq!(
            c,
            Some(Check::Refuted {
                by: "b".into(),
                reason: "It is called from main.".into()
            })
        );
        let c = parse(
            "Sure.\n\n  <!--Finding-Check :CONFIRMED-->  right\x1b[31m.",
            "b",
        );
        assert_eq!(
            c,
            Some(Check::Confirmed {
                by: "b".into(),
                reason: "right.".into()
            })
        );
        // A severity header before it is not it; a long reason is cut.
        let long = format!(
            "<!-- severity: red -->\n<!-- finding-check: refuted -->\n{}",
            "x".repeat(900)
        );
        let Some(Check::Refuted { reason, .. }) = parse(&long, "b") else {
            panic!("refuted")
        };
        assert!(
            reason.chars().count() <= MAX_REASON + 1 && reason.ends_with('…'),
            "{reason}"
        );
        for garbled in [
            "",
            "I agree.",
            "<!-- finding-check: maybe -->",
            "<!-- finding-check confirmed",
        ] {
            assert_eq!(parse(garbled, "b"), None, "{garbled:?}");
        }
    }

    /// Only lone red and yellow findings are checked, each by a reviewer
    /// that did not make it, in turn; with nobody else, by nobody.
    #[test]
    fn checkers_are_the_others_in_turn() {
        let findings = vec![
            finding(&["a"], Severity::Red),
            finding(&["a", "b"], Severity::Red),
            finding(&["a"], Severity::Green),
            finding(&["a"], Severity::Yellow),
            finding(&["c"], Severity::Yellow),
        ];
        let reviewers: Vec<String> = ["a", "b", "c", "b"].map(String::from).to_vec();
        assert_eq!(
            checkers(&findings, &reviewers),
            vec![
                (0, Some("b".into())),
                (3, Some("c".into())),
                (4, Some("a".into())),
            ]
        );
        assert_eq!(
            checkers(&findings[..1], &["a".to_string()]),
            vec![(0, None)]
        );
    }

    #[test]
    fn the_prompt_has_the_finding_the_diff_and_the_contract() {
        let f = finding(&["a"], Severity::Red).finding;
        let p = prompt("a", &f, Some("+fn added() {}\n"));
        assert!(
            p.starts_with(
                "Check a finding of a's code review: red lib.rs:2 added() is never called\n"
            ),
            "{p}"
        );
        assert!(p.contains("Nothing calls it."), "{p}");
        assert!(p.contains("```diff\n+fn added() {}\n```"), "{p}");
        assert!(p.ends_with(CHECK_CONTRACT), "{p}");
        assert!(!p.contains("<!-- finding:"), "not read as a finding: {p}");
        let p = prompt("a", &f, None);
        assert!(p.contains("not known"), "{p}");
    }
}
