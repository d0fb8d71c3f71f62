//! The follow-up the findings view sends: each selected finding and each
//! comment with its `file:lines` and the hunk around them, as one message
//! to the branch's writer (or the agent the person names). Pure.

use super::diff::{At, DiffFile, quote};
use crate::event::finding::{Check, QuorumFinding};

/// A comment the person wrote on a line of the diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    pub file: String,
    pub line: u32,
    pub at: At,
    pub text: String,
}

/// The message: an opening line, then the findings, then the comments.
pub fn text(
    files: &[DiffFile],
    findings: &[(&QuorumFinding, Option<At>)],
    comments: &[&Comment],
    branch: Option<&str>,
) -> String {
    let mut out = vec![match branch {
        Some(b) => format!(
            "The review of your branch `{b}` found what follows. Please fix each point in the \
             same worktree (or say why it is not a problem)."
        ),
        None => "A review of the change found what follows. Please fix each point (or say why \
                 it is not a problem)."
            .to_string(),
    }];
    let mut n = 0;
    for (q, at) in findings {
        n += 1;
        out.push(finding(n, files, q, *at));
    }
    for c in comments {
        n += 1;
        out.push(format!(
            "## {n}. {}:{} (a comment from the person)\n\n```diff\n{}\n```\n\n{}",
            c.file,
            c.line,
            quote(files, c.at, c.line, c.line),
            c.text.trim()
        ));
    }
    out.join("\n\n")
}

/// One finding: its place, severity and title, who found it, the hunk,
/// its body.
fn finding(n: usize, files: &[DiffFile], q: &QuorumFinding, at: Option<At>) -> String {
    let f = &q.finding;
    let mut s = format!(
        "## {n}. {} ({}): {}\n\nFound by {}.",
        f.place(),
        f.severity.as_str(),
        f.title,
        q.who()
    );
    match &q.check {
        Some(Check::Refuted { by, reason }) => {
            s.push_str(&format!(" Refuted by {by}: {reason}"));
        }
        Some(Check::Confirmed { by, .. }) => s.push_str(&format!(" Confirmed by {by}.")),
        None => {}
    }
    match at {
        Some(at) => s.push_str(&format!(
            "\n\n```diff\n{}\n```",
            quote(files, at, f.line, f.end_line.unwrap_or(f.line).max(f.line))
        )),
        None => s.push_str("\n\n(Its lines are outside the reviewed diff.)"),
    }
    if !f.body.trim().is_empty() {
        s.push_str("\n\n");
        s.push_str(f.body.trim());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::diff::{parse, place};
    use super::*;
    use crate::event::Severity;
    use crate::event::finding::Finding;

    #[test]
    fn the_follow_up_quotes_each_place_its_hunk_and_the_finding() {
        let files =
            parse("--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1,3 +1,3 @@\n one\n-two\n+deux\n three\n");
        let q = QuorumFinding {
            finding: Finding {
                file: "src/a.rs".into(),
                line: 2,
                end_line: None,
                severity: Severity::Red,
                title: "deux is French".into(),
                body: "Use English.".into(),
            },
            by: vec!["a".into(), "b".into()],
            of: 2,
            outside_diff: false,
            check: None,
        };
        let at = place(&files, "src/a.rs", 2, 2);
        let c = Comment {
            file: "src/a.rs".into(),
            line: 3,
            at: place(&files, "src/a.rs", 3, 3).unwrap(),
            text: "and keep three".into(),
        };
        let t = text(&files, &[(&q, at)], &[&c], Some("quorum/t1-x"));
        assert!(
            t.starts_with("The review of your branch `quorum/t1-x`"),
            "{t}"
        );
        assert!(
            t.contains(
                "## 1. src/a.rs:2 (red): deux is French\n\nFound by a, b · 2 of 2.\n\n\
                 ```diff\n@@ -1,3 +1,3 @@\n one\n-two\n+deux\n three\n```\n\nUse English."
            ),
            "{t}"
        );
        assert!(
            t.contains("## 2. src/a.rs:3 (a comment from the person)"),
            "{t}"
        );
        assert!(t.ends_with("```\n\nand keep three"), "{t}");
        let outside = text(&files, &[(&q, None)], &[], None);
        assert!(outside.contains("outside the reviewed diff"), "{outside}");
    }
}
