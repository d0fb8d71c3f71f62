//! A pull request's comment: the verdict, each reviewer's, a table of the
//! findings worst first (severity, `file:line`, title, who found each,
//! whether it was verified), then each finding's body folded in
//! `<details>`. It begins with a hidden marker ([`MARKER`]) by which a
//! later run can find its own comment.

use super::{Review, found_by, place, verdict_word, verified};
use crate::event::Severity;
use crate::event::finding::QuorumFinding;

/// The comment's first line, hidden when rendered.
pub const MARKER: &str = "<!-- quorum-review -->";

/// The comment for a review.
pub fn markdown(review: &Review) -> String {
    let mut out = format!("{MARKER}\n## quorum review: {}\n\n", headline(review));
    if !review.reviewers.is_empty() {
        let each: Vec<String> = review
            .reviewers
            .iter()
            .map(|r| {
                let verdict = if r.failed {
                    "failed"
                } else {
                    verdict_word(r.verdict)
                };
                format!("{} {verdict}", cell(&r.name))
            })
            .collect();
        out.push_str(&format!(
            "Reviewed `git diff {}`: {}.\n\n",
            cell(&review.base),
            each.join(", ")
        ));
    }
    let findings = review.findings();
    if findings.is_empty() {
        out.push_str("No findings.\n");
        return out;
    }
    out.push_str("| severity | where | finding | found by | verified |\n|---|---|---|---|---|\n");
    for q in &findings {
        out.push_str(&row(q));
    }
    out.push('\n');
    for q in findings.iter().filter(|q| !q.finding.body.is_empty()) {
        out.push_str(&format!(
            "<details><summary>{} <code>{}</code> {}</summary>\n\n{}\n\n</details>\n",
            dot(q.finding.severity),
            html(&place(&q.finding)),
            html(&q.finding.title),
            q.finding.body.trim_end()
        ));
    }
    out
}

/// `🔴 **red** · 1 of 2`.
fn headline(review: &Review) -> String {
    let label = review.label.split_once(" · ").map_or("", |(_, n)| n);
    let verdict = match review.verdict {
        Some(s) => format!("{} **{}**", dot(s), s.as_str()),
        None => "**no verdict**".to_string(),
    };
    if label.is_empty() {
        verdict
    } else {
        format!("{verdict} · {label}")
    }
}

fn row(q: &QuorumFinding) -> String {
    let f = &q.finding;
    let mut title = cell(&f.title);
    if !q.counts() {
        title = format!("~~{title}~~");
    }
    if q.outside_diff {
        title.push_str(" (outside the diff)");
    }
    format!(
        "| {} {} | `{}` | {title} | {} | {} |\n",
        dot(f.severity),
        f.severity.as_str(),
        place(f).replace('`', "'").replace('|', "\\|"),
        cell(&found_by(q)),
        cell(&verified(q))
    )
}

fn dot(severity: Severity) -> &'static str {
    match severity {
        Severity::Red => "🔴",
        Severity::Yellow => "🟡",
        Severity::Green => "🟢",
    }
}

/// Text for a table's cell: on one line, its pipes escaped, no HTML.
fn cell(s: &str) -> String {
    html(&s.split_whitespace().collect::<Vec<_>>().join(" ")).replace('|', "\\|")
}

fn html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::super::{Review, sample};
    use super::*;

    #[test]
    fn the_comment_has_the_verdict_a_table_and_folded_bodies() {
        let md = markdown(&sample::review());
        assert!(md.starts_with(MARKER), "{md}");
        assert!(
            md.contains("## quorum review: 🔴 **red** · 1 of 2\n"),
            "{md}"
        );
        assert!(
            md.contains("Reviewed `git diff HEAD`: claude red, codex yellow."),
            "{md}"
        );
        let rows: Vec<&str> = md
            .lines()
            .filter(|l| l.starts_with("| 🔴") || l.starts_with("| 🟡") || l.starts_with("| 🟢"))
            .collect();
        assert_eq!(
            rows,
            [
                "| 🔴 red | `src/http.rs:42-48` | retries a POST that is not idempotent | claude, codex · 2 of 2 | not verified |",
                "| 🟡 yellow | `src/lib.rs:90` | a name \\| with a pipe (outside the diff) | codex · 1 of 2 | not verified |",
                "| 🟢 green | `src/lib.rs:3` | ~~could be shorter~~ | claude · 1 of 2 | refuted by codex: it is short enough |",
            ]
        );
        assert_eq!(md.matches("<details>").count(), 3);
        assert!(md.contains("<details><summary>🔴 <code>src/http.rs:42-48</code> retries a POST that is not idempotent</summary>\n\nWhy retries"), "{md}");
        assert!(
            md.contains("```rust\nlet x = 1;\n```\n\n</details>"),
            "{md}"
        );
    }

    #[test]
    fn no_findings_says_so() {
        let md = markdown(&Review {
            base: "HEAD".into(),
            verdict: Some(Severity::Green),
            label: "green · 2 of 2".into(),
            ..Review::default()
        });
        assert_eq!(
            md,
            format!("{MARKER}\n## quorum review: 🟢 **green** · 2 of 2\n\nNo findings.\n")
        );
    }
}
