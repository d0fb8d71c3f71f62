//! Findings: what a reviewer found, and where. The contract every
//! reviewer is held to is an HTML comment before each finding's body:
//! `<!-- finding: {"file": "src/http.rs", "line": 42, "end_line": 48,
//! "severity": "red", "title": "retries a POST that is not idempotent"} -->`
//! (issue 38). This module holds the vocabulary only: the parsing, the
//! merging and the formats live where they are used.

use serde::{Deserialize, Serialize};

use super::Severity;

/// One problem one reviewer found, at a place in the repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Relative to the repository's top.
    pub file: String,
    /// 1-based, as editors number lines.
    pub line: u32,
    /// The last line of the range, when it is more than one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u32>,
    pub severity: Severity,
    pub title: String,
    /// The finding's Markdown, up to the next finding or the report's end
    /// (sanitised, bounded).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub body: String,
}

impl Finding {
    /// `src/a.rs:42` or `src/a.rs:42-48`.
    pub fn place(&self) -> String {
        match self.end_line {
            Some(end) if end > self.line => format!("{}:{}-{end}", self.file, self.line),
            _ => format!("{}:{}", self.file, self.line),
        }
    }

    /// `red src/a.rs:42-48 retries a POST`: one line of a list.
    pub fn line_text(&self) -> String {
        format!("{} {} {}", self.severity.as_str(), self.place(), self.title)
    }
}

/// What a second reviewer said of a finding (`verify`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "verdict")]
pub enum Check {
    Confirmed {
        by: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reason: String,
    },
    Refuted {
        by: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reason: String,
    },
}

/// A finding of a review quorum: the reviewers' findings at one place
/// about one thing, merged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumFinding {
    /// The merged finding: the highest severity given, the first title.
    #[serde(flatten)]
    pub finding: Finding,
    /// Who found it, in the order they reported.
    pub by: Vec<String>,
    /// How many reviewers the quorum had.
    pub of: usize,
    /// Its lines are outside the reviewed diff.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub outside_diff: bool,
    /// The second reviewer's check, when the quorum checked itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
}

impl QuorumFinding {
    /// `claude, codex · 2 of 3`: who found it, of how many.
    pub fn who(&self) -> String {
        format!("{} · {} of {}", self.by.join(", "), self.by.len(), self.of)
    }

    /// Whether it counts toward the verdict (a refuted finding does not).
    pub fn counts(&self) -> bool {
        !matches!(self.check, Some(Check::Refuted { .. }))
    }
}

/// The most of a reviewed diff a `review_quorum` event carries.
pub const MAX_REVIEWED_DIFF: usize = 256 * 1024;

/// `diff` bounded for a `review_quorum` event: cut at a line's end within
/// [`MAX_REVIEWED_DIFF`], with a note of what was left out.
pub fn bounded_diff(diff: &str) -> String {
    if diff.len() <= MAX_REVIEWED_DIFF {
        return diff.to_string();
    }
    let mut end = MAX_REVIEWED_DIFF;
    while !diff.is_char_boundary(end) {
        end -= 1;
    }
    let end = diff[..end].rfind('\n').map_or(end, |n| n + 1);
    format!(
        "{}(the diff is cut here: {} more bytes were reviewed)\n",
        &diff[..end],
        diff.len() - end
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The contract's JSON, as the review instructions show it, is a
    /// finding; `end_line` and the body may be left out.
    #[test]
    fn the_contracts_json_reads_as_a_finding() {
        let f: Finding = serde_json::from_str(
            r#"{"file": "src/http.rs", "line": 42, "end_line": 48, "severity": "red", "title": "retries a POST that is not idempotent"}"#,
        )
        .unwrap();
        assert_eq!(
            (f.file.as_str(), f.line, f.end_line),
            ("src/http.rs", 42, Some(48))
        );
        assert_eq!(f.severity, Severity::Red);
        let short: Finding = serde_json::from_str(
            r#"{"file": "a.rs", "line": 1, "severity": "yellow", "title": "t"}"#,
        )
        .unwrap();
        assert_eq!((short.end_line, short.body.as_str()), (None, ""));
        assert!(
            serde_json::from_str::<Finding>(
                r#"{"file": "a.rs", "line": 1, "severity": "blue", "title": "t"}"#
            )
            .is_err()
        );
    }

    #[test]
    fn a_refuted_finding_does_not_count() {
        let finding: Finding =
            serde_json::from_str(r#"{"file": "a.rs", "line": 1, "severity": "red", "title": "t"}"#)
                .unwrap();
        let mut q = QuorumFinding {
            finding,
            by: vec!["claude".into()],
            of: 2,
            outside_diff: false,
            check: None,
        };
        assert!(q.counts());
        q.check = Some(Check::Refuted {
            by: "codex".into(),
            reason: "the retry is guarded".into(),
        });
        assert!(!q.counts());
        let json = serde_json::to_value(&q).unwrap();
        assert_eq!(json["file"], "a.rs");
        assert_eq!(json["check"]["verdict"], "refuted");
    }

    #[test]
    fn a_long_diff_is_cut_at_a_line_with_a_note() {
        assert_eq!(bounded_diff("+a\n"), "+a\n");
        let long = "+ééé\n".repeat(MAX_REVIEWED_DIFF / 4);
        let cut = bounded_diff(&long);
        assert!(cut.len() < MAX_REVIEWED_DIFF + 100);
        let (kept, note) = cut.rsplit_once("+ééé\n").unwrap();
        assert!(kept.ends_with('\n') || kept.is_empty());
        assert!(note.starts_with("(the diff is cut here: "), "{note}");
    }
}
