//! `quorum review`'s formats read by the real programs that read them: the
//! SARIF against the official SARIF 2.1.0 JSON schema (npm
//! `@microsoft/jest-sarif` carries it; PyPI `jsonschema` validates,
//! tests/sarif_validate.py) and by PyPI `sarif-tools` (`sarif summary`);
//! `action.yml` by actionlint (with shellcheck on its scripts). All of them
//! are installed into `.tools/` by scripts/install-review-tools.sh, which
//! these tests run. `review_cli` runs `quorum review` itself through
//! [`valid_sarif`] and [`summary`].

use crate::common;
use common::Bounded;
use common::shell::text;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use quorum::event::Severity;
use quorum::event::finding::{Check, Finding, QuorumFinding};
use quorum::review::{DiffLines, Review, Reviewer};

/// Where scripts/install-review-tools.sh installed the tools (once per
/// test program).
pub fn tools() -> &'static Path {
    static TOOLS: OnceLock<PathBuf> = OnceLock::new();
    TOOLS.get_or_init(|| common::install("install-review-tools.sh"))
}

fn tests_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// The schema validator's verdict on the logs: its output, and whether
/// every log is valid.
fn validate(logs: &[&Path]) -> (bool, String) {
    let tools = tools();
    let out = std::process::Command::new(tools.join("bin/python"))
        .arg(tests_dir().join("sarif_validate.py"))
        .arg(tools.join("sarif-schema-2.1.0.json"))
        .args(logs)
        .output_bounded();
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        said.contains("Draft4Validator"),
        "the validator did not run as the schema says: {said}"
    );
    (out.status.success(), said)
}

/// Asserts `log` is valid SARIF 2.1.0.
pub fn valid_sarif(log: &Path) {
    let (ok, said) = validate(&[log]);
    assert!(ok, "not valid SARIF 2.1.0:\n{said}");
}

/// `sarif summary LOG`, which must succeed.
pub fn summary(log: &Path) -> String {
    let out = std::process::Command::new(tools().join("bin/sarif"))
        .arg("summary")
        .arg(log)
        .output_bounded();
    assert!(
        out.status.success(),
        "sarif summary failed: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn finding(file: &str, line: u32, end: Option<u32>, severity: Severity, title: &str) -> Finding {
    Finding {
        file: file.into(),
        line,
        end_line: end,
        severity,
        title: title.into(),
        body: format!("Why: {title}.\n\n```rust\nlet x = \"<b>\";\n```"),
    }
}

/// Two reviewers, a shared red finding, a yellow one of one reviewer, a
/// green one refuted.
fn review() -> Review {
    let red = finding("src/http.rs", 42, Some(48), Severity::Red, "retries a POST");
    let yellow = finding(
        "src/lib.rs",
        7,
        None,
        Severity::Yellow,
        "a name | with a pipe",
    );
    let green = finding("src/lib.rs", 3, None, Severity::Green, "could be shorter");
    let reviewer = |name: &str, verdict, findings: Vec<Finding>| Reviewer {
        name: name.into(),
        verdict: Some(verdict),
        failed: false,
        findings,
    };
    let quorum = |finding: Finding, by: &[&str], check| QuorumFinding {
        finding,
        by: by.iter().map(|s| s.to_string()).collect(),
        of: 2,
        outside_diff: false,
        check,
    };
    Review {
        base: "HEAD".into(),
        verdict: Some(Severity::Red),
        agreed: "2 of 2".into(),
        reviewers: vec![
            reviewer("claude", Severity::Red, vec![red.clone(), green.clone()]),
            reviewer("codex", Severity::Red, vec![red.clone(), yellow.clone()]),
        ],
        merged: vec![
            quorum(red, &["claude", "codex"], None),
            quorum(
                yellow,
                &["codex"],
                Some(Check::Confirmed {
                    by: "claude".into(),
                    reason: String::new(),
                }),
            ),
            quorum(
                green,
                &["claude"],
                Some(Check::Refuted {
                    by: "codex".into(),
                    reason: "short enough".into(),
                }),
            ),
        ],
        diff: Some(DiffLines::parse(
            "--- a/src/http.rs\n+++ b/src/http.rs\n@@ -40,10 +40,12 @@\n",
        )),
    }
}

#[test]
fn findings_as_sarif_are_valid_and_sarif_tools_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("review.sarif");
    let sarif = quorum::review::sarif::sarif(&review());
    std::fs::write(&log, serde_json::to_string_pretty(&sarif).unwrap()).unwrap();
    valid_sarif(&log);
    let said = summary(&log);
    // Four results of the reviewers' runs and three of the quorum's: 3
    // errors (red), 2 warnings (yellow), 2 notes (green): the quorum's
    // green one was refuted, so it is suppressed, which sarif-tools leaves
    // out.
    assert!(said.contains("error: 3"), "{said}");
    assert!(said.contains("warning: 2"), "{said}");
    assert!(said.contains("note: 2"), "{said}");
    assert!(said.contains("finding/red retries a POST: 3"), "{said}");
    let empty = dir.path().join("empty.sarif");
    let none = Review {
        verdict: Some(Severity::Green),
        ..Review::default()
    };
    std::fs::write(&empty, quorum::review::sarif::sarif(&none).to_string()).unwrap();
    valid_sarif(&empty);
    summary(&empty);
}

/// The validator is no yes-man: a log without runs, and one whose result
/// has a level SARIF does not know, are refused.
#[test]
fn the_schema_refuses_what_is_not_sarif() {
    let dir = tempfile::tempdir().unwrap();
    let mut sarif = quorum::review::sarif::sarif(&review());
    let no_runs = dir.path().join("no-runs.sarif");
    std::fs::write(&no_runs, r#"{"version": "2.1.0"}"#).unwrap();
    sarif["runs"][2]["results"][0]["level"] = "fatal".into();
    let bad_level = dir.path().join("bad-level.sarif");
    std::fs::write(&bad_level, sarif.to_string()).unwrap();
    for log in [&no_runs, &bad_level] {
        let (ok, said) = validate(&[log]);
        assert!(!ok, "{} passed: {said}", log.display());
    }
}

/// actionlint, with shellcheck on every script, on `workflow` and on the
/// steps of `action` made a workflow (actionlint reads workflows), in a
/// repository of their own where `uses: ./` is `action`.
fn actionlint(action: &str, workflow: &str) -> (bool, String) {
    let tools = tools();
    let dir = tempfile::tempdir().unwrap();
    // actionlint finds the project, and so `./`, by its `.git`.
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    let workflows = dir.path().join(".github/workflows");
    std::fs::create_dir_all(&workflows).unwrap();
    std::fs::write(dir.path().join("action.yml"), action).unwrap();
    std::fs::write(workflows.join("quorum-review.yml"), workflow).unwrap();
    let out = std::process::Command::new(tools.join("bin/python"))
        .arg(tests_dir().join("action_workflow.py"))
        .arg(dir.path().join("action.yml"))
        .arg(workflows.join("action-steps.yml"))
        .output_bounded();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = std::process::Command::new(tools.join("bin/actionlint"))
        .arg("-oneline")
        .arg("-pyflakes=")
        .arg("-shellcheck")
        .arg(tools.join("bin/shellcheck"))
        .args([
            ".github/workflows/quorum-review.yml",
            ".github/workflows/action-steps.yml",
        ])
        .current_dir(dir.path())
        .output_bounded();
    (
        out.status.success(),
        format!("{}{}", text(&out.stdout), text(&out.stderr)),
    )
}

/// The example workflow of docs/reviews.md, its `OWNER/quorum@main` made
/// this checkout (`./`).
fn docs_workflow() -> String {
    let page = std::fs::read_to_string(tests_dir().join("../docs/reviews.md")).unwrap();
    let block = page
        .split("```yaml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap())
        .find(|b| b.contains("OWNER/quorum@main"))
        .expect("docs/reviews.md shows a workflow that uses the action");
    block.replace("OWNER/quorum@main", "./")
}

#[test]
fn the_action_and_its_workflow_pass_actionlint() {
    let action =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("action.yml"))
            .unwrap();
    let (ok, said) = actionlint(&action, &docs_workflow());
    assert!(ok, "actionlint:\n{said}");
    // And it does read them: an input the action does not have, a step
    // reading one it does not declare, and an unquoted variable are each
    // an error.
    let workflow = docs_workflow().replace("fail-on: red", "fail-on: red\n          agentz: x");
    let broken = action
        .replacen("inputs.fail-on", "inputs.fail_onn", 1)
        .replacen("mkdir -p \"$OUT\"", "mkdir -p $OUT", 1);
    assert_ne!(action, broken);
    let (ok, said) = actionlint(&broken, &workflow);
    assert!(!ok, "{said}");
    for what in ["agentz", "fail_onn", "SC2086"] {
        assert!(said.contains(what), "{what}: {said}");
    }
}
