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

/// The longest comment, in bytes: GitHub takes at most 65,536 characters
/// in a comment's or a review's body.
pub const MAX_BYTES: usize = 60_000;

/// The comment for a review, at most [`MAX_BYTES`]: the folded bodies are
/// left out when they do not fit, then the table's last rows, and the
/// comment says so.
pub fn markdown(review: &Review) -> String {
    let full = comment(review, true);
    if full.len() <= MAX_BYTES {
        return full;
    }
    let mut out = comment(review, false);
    let mut note =
        "\nThe findings' bodies did not fit: see the SARIF or `--format json`.\n".to_string();
    if out.len() + note.len() > MAX_BYTES {
        let mut kept = String::new();
        let (mut rows, mut shown) = (0, 0);
        for line in out.lines() {
            let row = line.starts_with("| ") && !line.starts_with("| severity");
            rows += usize::from(row);
            if kept.len() + line.len() + 200 > MAX_BYTES {
                continue;
            }
            shown += usize::from(row);
            kept.push_str(line);
            kept.push('\n');
        }
        out = kept;
        note = format!(
            "\n{} of {rows} findings shown: see the SARIF or `--format json`.\n",
            shown
        );
    }
    out.push_str(&note);
    out
}

fn comment(review: &Review, bodies: bool) -> String {
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
    for q in findings
        .iter()
        .filter(|q| bodies && !q.finding.body.is_empty())
    {
        out.push_str(&format!(
            "<details><summary>{} <code>{}</code> {}</summary>\n\n{}\n\n</details>\n",
            dot(q.finding.severity),
            html(&place(&q.finding)),
            html(&q.finding.title),
            // A body cannot close the fold it is in.
            q.finding
                .body
                .trim_end()
                .replace("</details>", "&lt;/details&gt;")
        ));
    }
    out
}

/// `🔴 **red** · 1 of 2`.
fn headline(review: &Review) -> String {
    let label = review.agreed.as_str();
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
        let mut review = sample::review();
        review.merged[0].finding.body = "a </details> b".into();
        let md = markdown(&review);
        assert!(md.contains("a &lt;/details&gt; b\n\n</details>"), "{md}");
    }

    #[test]
    fn a_long_comment_is_bounded() {
        let mut review = sample::review();
        let one = review.merged[0].clone(); // green
        review.merged = (0..10_000)
            .map(|i| {
                let mut q = one.clone();
                q.finding.line = i;
                q.finding.body = "b".repeat(50);
                q
            })
            .collect();
        let md = markdown(&review);
        assert!(md.len() <= MAX_BYTES, "{}", md.len());
        assert!(!md.contains("<details>"), "bodies left out first");
        let shown = md.lines().filter(|l| l.starts_with("| 🟢")).count();
        assert!(shown > 100, "{shown}");
        assert!(
            md.ends_with(&format!(
                "{shown} of 10000 findings shown: see the SARIF or `--format json`.\n"
            )),
            "{}",
            &md[md.len() - 200..]
        );
        review.merged.truncate(300);
        let md = markdown(&review);
        assert!(
            md.len() <= MAX_BYTES && !md.contains("<details>"),
            "{}",
            md.len()
        );
        assert_eq!(md.lines().filter(|l| l.starts_with("| 🟢")).count(), 300);
        assert!(
            md.ends_with("The findings' bodies did not fit: see the SARIF or `--format json`.\n")
        );
    }

    #[test]
    fn no_findings_says_so() {
        let md = markdown(&Review {
            base: "HEAD".into(),
            verdict: Some(Severity::Green),
            agreed: "2 of 2".into(),
            ..Review::default()
        });
        assert_eq!(
            md,
            format!("{MARKER}\n## quorum review: 🟢 **green** · 2 of 2\n\nNo findings.\n")
        );
    }
}
