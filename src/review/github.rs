//! The body of GitHub's "create a review for a pull request" request
//! (`POST /repos/O/R/pulls/N/reviews`), for
//! `gh api repos/O/R/pulls/N/reviews --input -`: `event` from the verdict
//! (`REQUEST_CHANGES` when it is red, `COMMENT` otherwise), a comment per
//! finding whose lines the diff shows (`path`, `line`, `side: RIGHT`, and
//! `start_line` for a range in one hunk) unless a second reviewer refuted
//! it, and the rest in the body: the verdict, then the other findings,
//! each on a line and its body folded. Bounded: at most
//! [`MAX_COMMENTS`] comments (the worst findings), each comment and the
//! body at most `markdown::MAX_BYTES`.

use serde_json::{Value, json};

use super::{Review, found_by, markdown, place, verified};
use crate::event::Severity;
use crate::event::finding::QuorumFinding;

/// The most comments a review has; the other findings are listed in its
/// body.
pub const MAX_COMMENTS: usize = 50;

/// The request's body for a review.
pub fn github(review: &Review) -> Value {
    let event = if review.verdict == Some(Severity::Red) {
        "REQUEST_CHANGES"
    } else {
        "COMMENT"
    };
    let mut comments = Vec::new();
    let mut rest = Vec::new();
    for q in review.findings() {
        // A refuted finding is no line's comment: it is listed in the body.
        match comment(review, &q) {
            Some(c) if q.counts() && comments.len() < MAX_COMMENTS => comments.push(c),
            _ => rest.push(q),
        }
    }
    let mut body = markdown::markdown(&Review {
        merged: Vec::new(),
        reviewers: review
            .reviewers
            .iter()
            .map(|r| super::Reviewer {
                findings: Vec::new(),
                ..r.clone()
            })
            .collect(),
        ..review.clone()
    });
    // The summary without its table: the findings are the comments, and
    // what no line takes is listed here.
    body = body
        .trim_end()
        .trim_end_matches("No findings.")
        .trim_end()
        .to_string();
    body.push_str(&format!(
        "\n\n{} findings on the diff's lines",
        comments.len()
    ));
    if rest.is_empty() {
        body.push_str(".\n");
    } else {
        body.push_str(&format!("; {} elsewhere:\n\n", rest.len()));
        for (i, q) in rest.iter().enumerate() {
            // Its line, then its body folded.
            let mut line = format!("- {}\n", headline(q));
            if !q.finding.body.is_empty() {
                line.push_str(&format!(
                    "\n<details><summary>details</summary>\n\n{}\n\n</details>\n\n",
                    q.finding
                        .body
                        .trim_end()
                        .replace("</details>", "&lt;/details&gt;")
                ));
            }
            if body.len() + line.len() + 100 > markdown::MAX_BYTES {
                body.push_str(&format!("- and {} more: see the SARIF\n", rest.len() - i));
                break;
            }
            body.push_str(&line);
        }
    }
    json!({ "event": event, "body": body, "comments": comments })
}

/// A comment on the diff, when the finding's lines are in one of its hunks
/// (else its first line, when only that is).
fn comment(review: &Review, q: &QuorumFinding) -> Option<Value> {
    let f = &q.finding;
    let diff = review.diff.as_ref()?;
    let end = f.end_line.unwrap_or(f.line).max(f.line);
    let mut body = text(q);
    if body.len() > markdown::MAX_BYTES {
        let mut cut = markdown::MAX_BYTES;
        while !body.is_char_boundary(cut) {
            cut -= 1;
        }
        body.truncate(cut);
        body.push_str("\n\n(cut short)");
    }
    let mut c = json!({ "path": f.file, "side": "RIGHT", "body": body });
    if end > f.line && diff.holds(&f.file, f.line, end) {
        c["start_line"] = f.line.into();
        c["start_side"] = "RIGHT".into();
        c["line"] = end.into();
    } else if diff.hunk(&f.file, f.line).is_some() {
        c["line"] = f.line.into();
    } else {
        return None;
    }
    Some(c)
}

/// A finding as Markdown: severity, title (struck when refuted), place,
/// who, verified, then its body.
fn text(q: &QuorumFinding) -> String {
    let f = &q.finding;
    let mut s = headline(q);
    if !f.body.is_empty() {
        s.push_str("\n\n");
        s.push_str(f.body.trim_end());
    }
    s
}

/// A finding on one line: severity, title (struck when refuted), place,
/// who, verified.
fn headline(q: &QuorumFinding) -> String {
    let f = &q.finding;
    let title = if q.counts() {
        f.title.clone()
    } else {
        format!("~~{}~~", f.title)
    };
    format!(
        "**{}** {title} (`{}`; {}; {})",
        f.severity.as_str(),
        place(f),
        found_by(q),
        verified(q)
    )
}

#[cfg(test)]
mod tests {
    use super::super::sample;
    use super::*;

    #[test]
    fn red_requests_changes_with_a_comment_per_finding_on_the_diff() {
        let mut review = sample::review();
        let refuted = github(&review);
        assert_eq!(
            refuted["comments"].as_array().unwrap().len(),
            1,
            "the refuted one is not"
        );
        let listed = refuted["body"].as_str().unwrap();
        assert!(listed.contains("- **green** ~~could be shorter~~ (`src/lib.rs:3`; claude · 1 of 2; refuted by codex: it is short enough)\n\n<details><summary>details</summary>\n\nWhy could"), "{listed}");
        review.merged[0].check = None;
        let body = github(&review);
        assert_eq!(body["event"], "REQUEST_CHANGES");
        let comments = body["comments"].as_array().unwrap();
        assert_eq!(comments.len(), 2, "{body:#}");
        assert_eq!(comments[0]["path"], "src/http.rs");
        assert_eq!(
            (
                comments[0]["start_line"].as_u64(),
                comments[0]["line"].as_u64()
            ),
            (Some(42), Some(48))
        );
        assert_eq!(comments[0]["side"], "RIGHT");
        let first = comments[0]["body"].as_str().unwrap();
        assert!(first.starts_with("**red** retries a POST that is not idempotent (`src/http.rs:42-48`; claude, codex · 2 of 2; not verified)\n\nWhy"), "{first}");
        assert_eq!(
            (comments[1]["path"].as_str(), comments[1]["line"].as_u64()),
            (Some("src/lib.rs"), Some(3))
        );
        assert!(comments[1].get("start_line").is_none());
        let text = body["body"].as_str().unwrap();
        assert!(
            text.contains("## quorum review: 🔴 **red** · 1 of 2"),
            "{text}"
        );
        assert!(text.contains("2 findings on the diff's lines; 1 elsewhere:\n\n- **yellow** a name | with a pipe (`src/lib.rs:90`; codex · 1 of 2; not verified)\n\n<details>"), "{text}");
        assert!(!text.contains("| severity |"), "no table: {text}");
    }

    #[test]
    fn a_review_is_bounded() {
        let mut review = sample::review();
        let red = review.merged[2].clone();
        review.merged = (0..10_000)
            .map(|i| {
                let mut q = red.clone();
                q.finding.line = 40 + i % 11;
                q.finding.end_line = None;
                q.finding.title = format!("finding {i}");
                q
            })
            .collect();
        review.merged[0].finding.body = "x".repeat(100_000);
        let body = github(&review);
        assert_eq!(body["comments"].as_array().unwrap().len(), MAX_COMMENTS);
        let text = body["body"].as_str().unwrap();
        assert!(text.len() <= markdown::MAX_BYTES, "{}", text.len());
        assert!(
            text.contains(" more: see the SARIF\n"),
            "{}",
            &text[text.len() - 300..]
        );
        for c in body["comments"].as_array().unwrap() {
            assert!(c["body"].as_str().unwrap().len() <= markdown::MAX_BYTES + 20);
        }
    }

    #[test]
    fn otherwise_a_comment_and_without_a_diff_everything_in_the_body() {
        let mut review = sample::review();
        review.verdict = Some(Severity::Yellow);
        review.diff = None;
        let body = github(&review);
        assert_eq!(body["event"], "COMMENT");
        assert_eq!(body["comments"], json!([]));
        assert!(
            body["body"]
                .as_str()
                .unwrap()
                .contains("0 findings on the diff's lines; 3 elsewhere")
        );
        review.verdict = Some(Severity::Green);
        review.merged.clear();
        review.reviewers.clear();
        let body = github(&review);
        assert_eq!(body["event"], "COMMENT");
        assert!(
            body["body"]
                .as_str()
                .unwrap()
                .ends_with("0 findings on the diff's lines.\n"),
            "{body}"
        );
    }
}
