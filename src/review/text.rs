//! The findings as lines for a terminal, under `quorum review`'s verdicts:
//! severity, `file:line`, title, who found it, and what a second reviewer
//! said; every piece sanitised (an agent wrote it).

use super::{Review, found_by, place};
use crate::confine::sanitize::sanitize;
use crate::event::finding::Check;

/// `findings:` and a line per finding, worst first; nothing without any.
pub fn findings(review: &Review) -> String {
    let all = review.findings();
    if all.is_empty() {
        return String::new();
    }
    let width = all
        .iter()
        .map(|q| place(&q.finding).chars().count())
        .max()
        .unwrap_or(0);
    let mut out = format!("findings: {}\n", all.len());
    for q in &all {
        let f = &q.finding;
        let mut line = format!(
            "  {:<6}  {:width$}  {}  ({})",
            f.severity.as_str(),
            sanitize(&place(f)),
            sanitize(&f.title),
            sanitize(&found_by(q))
        );
        match &q.check {
            Some(Check::Confirmed { by, .. }) => {
                line.push_str(&format!(" confirmed by {}", sanitize(by)))
            }
            Some(Check::Refuted { by, .. }) => {
                line.push_str(&format!(" refuted by {}", sanitize(by)))
            }
            None => {}
        }
        if q.outside_diff {
            line.push_str(" outside the diff");
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::sample;
    use super::*;

    #[test]
    fn a_line_per_finding_worst_first() {
        let mut review = sample::review();
        review.merged[1].finding.title.push_str("\x1b[31m!");
        assert_eq!(
            findings(&review),
            "findings: 3\n  \
             red     src/http.rs:42-48  retries a POST that is not idempotent  (claude, codex · 2 of 2)\n  \
             yellow  src/lib.rs:90      a name | with a pipe!  (codex · 1 of 2) outside the diff\n  \
             green   src/lib.rs:3       could be shorter  (claude · 1 of 2) refuted by codex\n"
        );
        assert_eq!(findings(&Review::default()), "");
    }
}
