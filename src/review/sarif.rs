//! SARIF 2.1.0 (OASIS), for code scanning: a run per reviewer, then one
//! for the quorum's merged findings. A result's level is its severity's
//! (red `error`, yellow `warning`, green `note`), its rule `finding/red`,
//! `finding/yellow` or `finding/green`, its region the finding's lines; a
//! refuted finding of the quorum is kept, suppressed (`external`, the
//! reason its justification). Each run's `automationDetails.id` is its
//! own (`quorum-review/claude/`, `quorum-review/quorum/`), so code
//! scanning keeps each run's alerts apart.
//!
//! The fingerprint (`partialFingerprints["quorumFinding/v1"]`) is the same
//! for the same finding in another run or another review: the 64-bit
//! FNV-1a hash, in 16 hex digits, of `FILE\nTITLE\nLINE-END` where TITLE
//! is the title in lower case with every run of characters that are not
//! letters or digits made one space (trimmed), and END is the last line
//! (the line itself when there is no `end_line`). It moves when the
//! finding moves to other lines or is worded otherwise.

use serde_json::{Value, json};

use super::{Review, found_by, verified};
use crate::event::Severity;
use crate::event::finding::{Check, Finding, QuorumFinding};

/// The schema the log names.
pub const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";
/// The key of quorum's fingerprint in `partialFingerprints`.
pub const FINGERPRINT: &str = "quorumFinding/v1";

const SEVERITIES: [Severity; 3] = [Severity::Green, Severity::Yellow, Severity::Red];

/// The SARIF log of a review.
pub fn sarif(review: &Review) -> Value {
    let mut runs: Vec<Value> = review
        .reviewers
        .iter()
        .map(|r| {
            let results = r.findings.iter().map(|f| result(f, None)).collect();
            run(&r.name, results, r.verdict, !r.failed)
        })
        .collect();
    let merged = review
        .findings()
        .iter()
        .map(|q| result(&q.finding, Some(q)))
        .collect();
    runs.push(run("quorum", merged, review.verdict, true));
    json!({ "$schema": SCHEMA, "version": "2.1.0", "runs": runs })
}

/// The level of a severity.
pub fn level(severity: Severity) -> &'static str {
    match severity {
        Severity::Red => "error",
        Severity::Yellow => "warning",
        Severity::Green => "note",
    }
}

/// One run: quorum as the tool, its three rules, the reviewer's results.
fn run(who: &str, results: Vec<Value>, verdict: Option<Severity>, ok: bool) -> Value {
    let rules: Vec<Value> = SEVERITIES
        .iter()
        .map(|&s| {
            json!({
                "id": rule(s),
                "name": format!("{}Finding", s.as_str()),
                "shortDescription": { "text": format!("A {} finding of a code review", s.as_str()) },
                "defaultConfiguration": { "level": level(s) },
            })
        })
        .collect();
    json!({
        "tool": { "driver": {
            "name": "quorum",
            "version": env!("CARGO_PKG_VERSION"),
            "rules": rules,
        } },
        "automationDetails": { "id": format!("quorum-review/{who}/") },
        "invocations": [{ "executionSuccessful": ok }],
        "results": results,
        "properties": { "reviewer": who, "verdict": super::verdict_word(verdict) },
    })
}

fn rule(severity: Severity) -> String {
    format!("finding/{}", severity.as_str())
}

/// A finding as a result; a quorum's finding says who found it, whether
/// it was verified, and whether it is outside the diff.
fn result(f: &Finding, quorum: Option<&QuorumFinding>) -> Value {
    let start = f.line.max(1);
    let end = f.end_line.unwrap_or(start).max(start);
    let mut markdown = format!("**{}**", f.title);
    if !f.body.is_empty() {
        markdown.push_str("\n\n");
        markdown.push_str(&f.body);
    }
    let mut r = json!({
        "ruleId": rule(f.severity),
        "ruleIndex": SEVERITIES.iter().position(|&s| s == f.severity),
        "level": level(f.severity),
        "message": { "text": f.title, "markdown": markdown },
        "locations": [{ "physicalLocation": {
            "artifactLocation": { "uri": uri(&f.file), "uriBaseId": "%SRCROOT%" },
            "region": { "startLine": start, "endLine": end },
        } }],
        "partialFingerprints": { FINGERPRINT: fingerprint(f) },
    });
    if let Some(q) = quorum {
        r["properties"] = json!({
            "foundBy": q.by,
            "agreement": found_by(q),
            "verified": verified(q),
            "outsideDiff": q.outside_diff,
        });
        if let Some(Check::Refuted { .. }) = &q.check {
            r["suppressions"] = json!([{ "kind": "external", "justification": verified(q) }]);
        }
    }
    r
}

/// A relative path as a URI reference: every byte but the unreserved ones
/// and `/` percent-encoded (`src/a b.rs` is `src/a%20b.rs`).
pub fn uri(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for &b in path.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The finding's fingerprint (see the module's documentation).
pub fn fingerprint(f: &Finding) -> String {
    let end = f.end_line.unwrap_or(f.line).max(f.line);
    let key = format!("{}\n{}\n{}-{end}", f.file, normalised(&f.title), f.line);
    format!("{:016x}", fnv1a(key.as_bytes()))
}

/// Lower case; every run of characters that are not letters or digits one
/// space; trimmed.
fn normalised(title: &str) -> String {
    let lower = title.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    words.join(" ")
}

/// FNV-1a, 64 bits: the same on every machine and every build.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::super::sample;
    use super::*;

    #[test]
    fn a_run_per_reviewer_then_the_quorums() {
        let log = sarif(&sample::review());
        assert_eq!(log["version"], "2.1.0");
        let runs = log["runs"].as_array().unwrap();
        let who: Vec<&str> = runs
            .iter()
            .map(|r| r["properties"]["reviewer"].as_str().unwrap())
            .collect();
        assert_eq!(who, ["claude", "codex", "quorum"]);
        assert_eq!(runs[0]["automationDetails"]["id"], "quorum-review/claude/");
        let quorum = runs[2]["results"].as_array().unwrap();
        let levels: Vec<&str> = quorum
            .iter()
            .map(|r| r["level"].as_str().unwrap())
            .collect();
        assert_eq!(levels, ["error", "warning", "note"]);
        let red = &quorum[0];
        assert_eq!(red["ruleId"], "finding/red");
        assert_eq!(red["ruleIndex"], 2);
        let region = &red["locations"][0]["physicalLocation"]["region"];
        assert_eq!(
            (region["startLine"].as_u64(), region["endLine"].as_u64()),
            (Some(42), Some(48))
        );
        assert_eq!(red["properties"]["foundBy"], json!(["claude", "codex"]));
        assert!(red.get("suppressions").is_none());
        assert_eq!(
            quorum[2]["suppressions"][0]["kind"], "external",
            "refuted: suppressed"
        );
        assert_eq!(quorum[1]["properties"]["outsideDiff"], true);
        // The same finding has the same fingerprint in each run.
        assert_eq!(
            runs[0]["results"][0]["partialFingerprints"],
            red["partialFingerprints"]
        );
    }

    #[test]
    fn fingerprints_hold_across_wording_of_case_and_punctuation_only() {
        let f = sample::finding("a.rs", 3, None, Severity::Red, "Retries a POST!");
        let mut same = f.clone();
        same.title = "retries  a post".into();
        same.body = "another body".into();
        same.severity = Severity::Yellow;
        assert_eq!(fingerprint(&f), fingerprint(&same));
        let mut explicit = f.clone();
        explicit.end_line = Some(3);
        assert_eq!(fingerprint(&f), fingerprint(&explicit), "end_line = line");
        for other in [
            Finding {
                line: 4,
                ..f.clone()
            },
            Finding {
                end_line: Some(5),
                ..f.clone()
            },
            Finding {
                file: "b.rs".into(),
                ..f.clone()
            },
            Finding {
                title: "retries a GET".into(),
                ..f.clone()
            },
        ] {
            assert_ne!(fingerprint(&f), fingerprint(&other), "{other:?}");
        }
        // Pinned: a change of the hash breaks every alert's history.
        assert_eq!(
            fingerprint(&f),
            format!("{:016x}", fnv1a(b"a.rs\nretries a post\n3-3"))
        );
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn paths_are_uri_references() {
        assert_eq!(uri("src/a.rs"), "src/a.rs");
        assert_eq!(uri("src/a b#1%.rs"), "src/a%20b%231%25.rs");
        assert_eq!(uri("é.rs"), "%C3%A9.rs");
    }

    #[test]
    fn a_review_without_findings_has_empty_runs() {
        let log = sarif(&Review {
            verdict: Some(Severity::Green),
            ..Review::default()
        });
        let runs = log["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0]["results"], json!([]));
    }
}
