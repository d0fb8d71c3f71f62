use super::merge::merge;
use super::place::{DiffRanges, check};
use super::*;

fn finding(file: &str, line: u32, end: Option<u32>, severity: Severity, title: &str) -> Finding {
    Finding {
        file: file.into(),
        line,
        end_line: end,
        severity,
        title: title.into(),
        body: String::new(),
    }
}

#[test]
fn the_comment_form_reads_each_finding_and_its_body() {
    let report = "## Review\nTwo problems.\n\n\
        <!-- finding: {\"file\": \"src/http.rs\", \"line\": 42, \"end_line\": 48, \"severity\": \"red\", \"title\": \"retries a POST\"} -->\n\
        A POST is not idempotent.\n\n\
        <!--Finding:{\"file\":\"././src/a.rs\",\"line\":\"7\",\"severity\":\"Yellow\",\"title\":\"naming\"}-->\nCall it `b`.\n";
    let p = parse(report);
    assert_eq!(p.notices, Vec::<String>::new());
    assert_eq!(p.findings.len(), 2);
    let (a, b) = (&p.findings[0], &p.findings[1]);
    assert_eq!(
        (a.file.as_str(), a.line, a.end_line, a.severity),
        ("src/http.rs", 42, Some(48), Severity::Red)
    );
    assert_eq!(a.title, "retries a POST");
    assert_eq!(a.body, "A POST is not idempotent.");
    assert_eq!(
        (b.line, b.severity, b.body.as_str()),
        (7, Severity::Yellow, "Call it `b`.")
    );
    assert_eq!(b.file, "src/a.rs", "`./` dropped");
    // Other comments are not findings, and a report without any has none.
    assert!(parse("<!-- note: hi -->\nplain").findings.is_empty());
    assert_eq!(parse("no findings here"), Parsed::default());
}

#[test]
fn a_fenced_json_list_is_read_when_there_is_no_comment() {
    let report = "Found:\n```json\n[\n  {\"file\": \"a.rs\", \"line\": 3, \"severity\": \"green\", \"title\": \"ok\", \"body\": \"fine\"},\n  {\"file\": \"b.rs\", \"line\": 0, \"severity\": \"red\", \"title\": \"bad line\"}\n]\n```\nand\n```json\n{\"other\": 1}\n```\n";
    let p = parse(report);
    assert_eq!(p.findings.len(), 1);
    assert_eq!(
        (p.findings[0].file.as_str(), p.findings[0].body.as_str()),
        ("a.rs", "fine")
    );
    assert_eq!(p.notices.len(), 1, "{:?}", p.notices);
    assert!(
        p.notices[0].contains("`line` 0 is not a line number"),
        "{:?}",
        p.notices
    );
    // With comment findings, a json block is part of a body, not read.
    let both = "<!-- finding: {\"file\": \"c.rs\", \"line\": 1, \"severity\": \"red\", \"title\": \"t\"} -->\n```json\n[{\"file\": \"d.rs\", \"line\": 2, \"severity\": \"red\", \"title\": \"u\"}]\n```";
    let p = parse(both);
    assert_eq!(p.findings.len(), 1);
    assert_eq!(p.findings[0].file, "c.rs");
}

#[test]
fn a_malformed_finding_is_dropped_with_a_notice_and_the_rest_kept() {
    let report = "<!-- finding: {\"file\": \"a.rs\", \"line\": 1, \"severity\": \"purple\", \"title\": \"t\"} -->\nx\n\
        <!-- finding: {not json} -->\ny\n\
        <!-- finding: {\"line\": 1, \"severity\": \"red\", \"title\": \"t\"} -->\n\
        <!-- finding: {\"file\": \"a.rs\", \"line\": 1, \"severity\": \"red\"} -->\n\
        <!-- finding: [1, 2] -->\n\
        <!-- finding: {\"file\": \"a.rs\", \"line\": 9, \"end_line\": 3, \"severity\": \"red\", \"title\": \"kept\"} -->\nz";
    let p = parse(report);
    assert_eq!(p.findings.len(), 1);
    assert_eq!(
        (p.findings[0].title.as_str(), p.findings[0].end_line),
        ("kept", None),
        "an end before the start is left out"
    );
    let n = &p.notices;
    assert_eq!(n.len(), 5, "{n:?}");
    assert!(
        n[0].starts_with("finding 1 dropped: severity \"purple\" is not green, yellow or red"),
        "{n:?}"
    );
    assert!(n[1].starts_with("finding 2 dropped: not JSON"), "{n:?}");
    assert!(n[2].contains("no `file`"), "{n:?}");
    assert!(n[3].contains("no `title`"), "{n:?}");
    assert!(n[4].contains("not a JSON object"), "{n:?}");
}

#[test]
fn ten_thousand_findings_keep_the_first_two_hundred_and_say_so() {
    let one = "<!-- finding: {\"file\": \"a.rs\", \"line\": 1, \"severity\": \"red\", \"title\": \"t\"} -->\nb\n";
    let p = parse(&one.repeat(10_000));
    assert_eq!(p.findings.len(), MAX_FINDINGS);
    assert_eq!(p.notices, ["9800 findings past the first 200 dropped"]);
    let list = format!(
        "```json\n[{}]\n```",
        vec![r#"{"file":"a.rs","line":1,"severity":"red","title":"t"}"#; 10_000].join(",")
    );
    let p = parse(&list);
    assert_eq!(p.findings.len(), MAX_FINDINGS);
    assert_eq!(p.notices, ["9800 findings past the first 200 dropped"]);
}

#[test]
fn escapes_are_stripped_and_long_text_is_cut() {
    let title = format!("bad\u{1b}]8;;http://evil\u{7}link{}", "x".repeat(500));
    let report = format!(
        "<!-- finding: {} -->\nbody \u{1b}[31mred\u{1b}[0m {}",
        serde_json::json!({"file": "a\u{1b}[2J.rs", "line": 1, "severity": "red", "title": title}),
        "y".repeat(10_000)
    );
    let p = parse(&report);
    let f = &p.findings[0];
    for text in [&f.file, &f.title, &f.body] {
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text:?}"
        );
    }
    assert!(f.title.starts_with("badlink"), "{}", f.title);
    assert_eq!(f.title.chars().count(), MAX_TITLE + 1, "cut, with `…`");
    assert!(f.body.starts_with("body red "), "{}", &f.body[..20]);
    assert_eq!(f.body.chars().count(), MAX_BODY + 1);
}

#[test]
fn many_notices_are_bounded() {
    let bad = "<!-- finding: {} -->\n".repeat(50);
    let p = parse(&bad);
    assert_eq!(p.notices.len(), 50);
    let shown = p.bounded_notices();
    assert_eq!(shown.len(), MAX_NOTICES);
    assert_eq!(shown[MAX_NOTICES - 1], "and 41 more findings dropped");
}

#[test]
fn the_diff_of_a_prompt_gives_its_new_lines() {
    let prompt = "Review this.\n\n```diff\ndiff --git a/src/a.rs b/src/a.rs\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -10,3 +10,5 @@ fn f()\n ctx\n+new\n@@ -40,2 +42,0 @@\n-gone\ndiff --git a/old.rs b/old.rs\n--- a/old.rs\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-x\n```\nafter\n";
    let d = DiffRanges::of_prompt(prompt).unwrap();
    assert!(d.has("src/a.rs") && d.has("old.rs") && !d.has("after"));
    assert!(d.touches("src/a.rs", 14, 14));
    assert!(!d.touches("src/a.rs", 15, 20));
    assert!(d.touches("src/a.rs", 43, 43), "around a cut");
    assert!(!d.touches("src/b.rs", 1, 1));
    assert_eq!(DiffRanges::of_prompt("no diff"), None);
}

#[test]
fn findings_are_checked_against_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/a.rs"), "1\n2\n3\n").unwrap();
    let diff = DiffRanges::of_diff("--- a/gone.rs\n+++ /dev/null\n@@ -1,9 +0,0 @@\n");
    let mut p = Parsed {
        findings: vec![
            finding("src/a.rs", 3, None, Severity::Red, "kept"),
            finding("src/a.rs", 30, None, Severity::Red, "past the end"),
            finding("src/nope.rs", 1, None, Severity::Red, "no such file"),
            finding("../etc/passwd", 1, None, Severity::Red, "out"),
            finding("/etc/passwd", 1, None, Severity::Red, "absolute"),
            finding("gone.rs", 5, None, Severity::Yellow, "deleted, in the diff"),
            finding("src", 1, None, Severity::Yellow, "a folder"),
        ],
        notices: vec![],
    };
    check(&mut p, dir.path(), Some(&diff), None);
    let kept: Vec<&str> = p.findings.iter().map(|f| f.title.as_str()).collect();
    assert_eq!(kept, ["kept", "deleted, in the diff"]);
    let n = &p.notices;
    assert_eq!(n.len(), 5, "{n:?}");
    assert!(
        n[0].contains("line 30 is past the end of src/a.rs (3 lines)"),
        "{n:?}"
    );
    assert!(
        n[1].contains("src/nope.rs is not in the repository"),
        "{n:?}"
    );
    assert!(
        n[2].contains("leaves the repository") && n[3].contains("leaves the repository"),
        "{n:?}"
    );
    assert!(n[4].contains("src is not a file"), "{n:?}");
}

#[test]
fn overlapping_findings_of_two_reviewers_merge_at_the_worst_severity() {
    use Severity::*;
    let claude = [
        finding("src/a.rs", 10, Some(14), Yellow, "retries a POST"),
        finding("src/a.rs", 12, None, Green, "a second thing, same lines"),
        finding("src/b.rs", 1, None, Yellow, "only claude"),
    ];
    let codex = [
        finding("src/a.rs", 13, Some(20), Red, "POST retried"),
        finding("src/a.rs", 30, None, Red, "elsewhere in a.rs"),
    ];
    let diff = DiffRanges::of_diff("+++ b/src/a.rs\n@@ -1,1 +1,25 @@\n");
    let m = merge(&[("claude", &claude), ("codex", &codex)], 3, Some(&diff));
    let shown: Vec<(String, Severity, String, bool)> = m
        .iter()
        .map(|q| {
            (
                q.finding.place(),
                q.finding.severity,
                q.who(),
                q.outside_diff,
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            (
                "src/a.rs:10-20".into(),
                Red,
                "claude, codex · 2 of 3".into(),
                false
            ),
            ("src/a.rs:30".into(), Red, "codex · 1 of 3".into(), true),
            ("src/b.rs:1".into(), Yellow, "claude · 1 of 3".into(), true),
            ("src/a.rs:12".into(), Green, "claude · 1 of 3".into(), false),
        ]
    );
    assert_eq!(
        m[0].finding.title, "retries a POST",
        "the first reviewer's title"
    );
    // Without a known diff, nothing is said to be outside it.
    assert!(
        merge(&[("claude", &claude)], 1, None)
            .iter()
            .all(|q| !q.outside_diff)
    );
}

/// Reviewers told where the repository is write absolute paths (the
/// local model, and agents that read files by absolute path): a path
/// inside the repository is taken relative to its top; one outside it,
/// or one that only looks inside (`..`), still leaves it.
#[test]
fn an_absolute_path_inside_the_repository_is_taken_relative() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/a.rs"), "1\n2\n3\n").unwrap();
    let top = dir.path().display().to_string();
    let canonical = dir.path().canonicalize().unwrap().display().to_string();
    let mut p = Parsed {
        findings: vec![
            finding(
                &format!("{top}/src/a.rs"),
                2,
                None,
                Severity::Red,
                "as given",
            ),
            finding(
                &format!("{canonical}/src/a.rs"),
                3,
                None,
                Severity::Red,
                "canonical",
            ),
            finding(
                &format!("{top}/../x/src/a.rs"),
                1,
                None,
                Severity::Red,
                "climbs",
            ),
            finding("/etc/passwd", 1, None, Severity::Red, "outside"),
        ],
        notices: vec![],
    };
    check(&mut p, dir.path(), None, None);
    let kept: Vec<(&str, &str)> = p
        .findings
        .iter()
        .map(|f| (f.file.as_str(), f.title.as_str()))
        .collect();
    assert_eq!(kept, [("src/a.rs", "as given"), ("src/a.rs", "canonical")]);
    assert_eq!(p.notices.len(), 2, "{:?}", p.notices);
    assert!(
        p.notices
            .iter()
            .all(|n| n.contains("leaves the repository"))
    );
}
