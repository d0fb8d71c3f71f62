//! The findings view driven by keys, drawn into a buffer.

use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;

use super::*;
use crate::event::Severity;
use crate::event::finding::{Check, Finding};
use crate::tui::state::BatchHeader;

pub const DIFF: &str = "diff --git a/src/a.rs b/src/a.rs
--- a/src/a.rs
+++ b/src/a.rs
@@ -1,4 +1,5 @@
 one
-two
+deux
+zwei
 three
@@ -20,2 +21,2 @@
 twenty
-twenty-one
+vingt-et-un\u{1b}[2J
";

fn finding(file: &str, line: u32, severity: Severity, title: &str, by: &[&str]) -> QuorumFinding {
    QuorumFinding {
        finding: Finding {
            file: file.into(),
            line,
            end_line: None,
            severity,
            title: title.into(),
            body: format!("why {title}"),
        },
        by: by.iter().map(|s| s.to_string()).collect(),
        of: 2,
        outside_diff: false,
        check: None,
    }
}

pub fn header() -> BatchHeader {
    let mut q = crate::event::Quorum::of(Vec::new());
    q.findings = vec![
        finding("src/a.rs", 2, Severity::Red, "deux is French", &["a", "b"]),
        finding("src/a.rs", 22, Severity::Yellow, "so is vingt", &["b"]),
        finding("README.md", 1, Severity::Green, "a typo", &["a"]),
    ];
    q.findings[1].check = Some(Check::Refuted {
        by: "a".into(),
        reason: "it is a name".into(),
    });
    BatchHeader {
        batch_id: "b1".into(),
        tasks: 2,
        review: true,
        members: Vec::new(),
        finished: None,
        quorum: Some(q),
        branch: Some("quorum/t1-fix".into()),
        diff: Some(crate::confine::sanitize::sanitize(DIFF).into_owned()),
    }
}

fn press(v: &mut FindingsView, code: KeyCode) -> ViewKey {
    v.key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn screen(v: &mut FindingsView) -> Vec<String> {
    let area = Rect::new(0, 0, 80, 30);
    let mut buf = Buffer::empty(area);
    v.draw(area, &mut buf);
    (0..area.height)
        .map(|y| {
            (0..area.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect()
}

fn writer() -> Target {
    Target::Writer {
        task: "t1".into(),
        agent: "claude".into(),
        branch: "quorum/t1-fix".into(),
    }
}

#[test]
fn the_diff_is_shown_file_by_file_with_each_finding_under_its_line() {
    let mut v = FindingsView::new(&header(), writer());
    let rows = screen(&mut v);
    let at = |needle: &str| {
        rows.iter()
            .position(|r| r.contains(needle))
            .unwrap_or_else(|| panic!("{needle:?} not in {rows:#?}"))
    };
    assert!(rows[0].contains("findings · review b1"), "{rows:#?}");
    assert!(rows[1].contains("━━ src/a.rs  · 2 findings"), "{rows:#?}");
    assert!(rows[2].contains("@@ -1,4 +1,5 @@"), "{rows:#?}");
    assert_eq!(at("deux is French"), at("│+deux") + 1, "under its line");
    assert!(rows[at("deux is French") + 1].contains("a, b · 2 of 2"));
    assert!(rows[at("deux is French") + 2].contains("why deux is French"));
    assert!(rows[at("so is vingt") + 1].contains("refuted by a: it is a name"));
    assert!(at("━━ outside the diff") < at("a typo"), "{rows:#?}");
    assert!(rows.iter().all(|r| !r.contains('\u{1b}')), "sanitised");
    assert!(rows[28].contains("0 selected · no comment"), "{rows:#?}");
    assert!(rows[28].contains("claude (t1)"), "{rows:#?}");
}

#[test]
fn n_and_shift_n_go_to_the_next_and_previous_finding_and_space_selects() {
    let mut v = FindingsView::new(&header(), writer());
    screen(&mut v);
    assert_eq!(v.current(), None);
    press(&mut v, KeyCode::Char('n'));
    assert_eq!(v.current(), Some(0));
    press(&mut v, KeyCode::Char('n'));
    assert_eq!(v.current(), Some(1));
    press(&mut v, KeyCode::Char('n'));
    assert_eq!(v.current(), Some(2));
    press(&mut v, KeyCode::Char('n'));
    assert_eq!(v.current(), Some(2), "the last one stays");
    assert!(screen(&mut v)[28].contains("no finding after this one"));
    press(&mut v, KeyCode::Char('N'));
    press(&mut v, KeyCode::Char('N'));
    assert_eq!(v.current(), Some(0));
    press(&mut v, KeyCode::Char(' '));
    assert_eq!(v.selected(), 1);
    let rows = screen(&mut v);
    assert!(rows.iter().any(|r| r.contains("[x] ● red")), "{rows:#?}");
    assert!(rows[28].contains("1 selected · "), "{rows:#?}");
    press(&mut v, KeyCode::Char(' '));
    assert_eq!(v.selected(), 0, "space again unselects");
}

#[test]
fn s_sends_the_selected_findings_and_the_comments_to_the_writer() {
    let mut v = FindingsView::new(&header(), writer());
    screen(&mut v);
    assert!(matches!(
        press(&mut v, KeyCode::Char('s')),
        ViewKey::Handled
    ));
    press(&mut v, KeyCode::Char('n'));
    press(&mut v, KeyCode::Char(' '));
    // A comment on the line under the cursor (the finding's line).
    press(&mut v, KeyCode::Char('c'));
    for c in "keep it".chars() {
        press(&mut v, KeyCode::Char(c));
    }
    assert!(screen(&mut v)[28].contains("comment on src/a.rs:2: keep it"));
    press(&mut v, KeyCode::Enter);
    assert!(screen(&mut v).iter().any(|r| r.contains("✎ you: keep it")));
    let ViewKey::Send { text, what } = press(&mut v, KeyCode::Char('s')) else {
        panic!("not sent")
    };
    assert!(
        text.starts_with("/msg t1 The review of your branch `quorum/t1-fix`"),
        "{text}"
    );
    assert!(
        text.contains("## 1. src/a.rs:2 (red): deux is French"),
        "{text}"
    );
    assert!(
        text.contains("```diff\n@@ -1,4 +1,5 @@\n one\n-two\n+deux\n+zwei\n three\n```"),
        "{text}"
    );
    assert!(
        text.contains("## 2. src/a.rs:2 (a comment from the person)"),
        "{text}"
    );
    assert!(!text.contains("so is vingt"), "only the selected: {text}");
    assert_eq!(what, "1 finding and 1 comment sent to t1");
}

#[test]
fn in_the_persons_own_tree_the_agent_is_asked_for() {
    let mut v = FindingsView::new(
        &header(),
        Target::Ask {
            default: "codex".into(),
        },
    );
    screen(&mut v);
    press(&mut v, KeyCode::Char('n'));
    press(&mut v, KeyCode::Char(' '));
    press(&mut v, KeyCode::Char('s'));
    assert!(screen(&mut v)[28].contains("send to: @codex"));
    for _ in 0..5 {
        press(&mut v, KeyCode::Backspace);
    }
    for c in "gemini".chars() {
        press(&mut v, KeyCode::Char(c));
    }
    let ViewKey::Send { text, .. } = press(&mut v, KeyCode::Enter) else {
        panic!("not sent")
    };
    assert!(text.starts_with("@gemini A review of the change"), "{text}");
    assert!(matches!(press(&mut v, KeyCode::Char('q')), ViewKey::Close));
}

#[test]
fn a_quorum_without_a_recorded_diff_lists_its_findings() {
    let mut h = header();
    h.diff = None;
    let mut v = FindingsView::new(&h, writer());
    let rows = screen(&mut v);
    assert!(rows[1].contains("was not recorded"), "{rows:#?}");
    assert!(rows.iter().any(|r| r.contains("deux is French")));
    press(&mut v, KeyCode::Char('n'));
    press(&mut v, KeyCode::Char(' '));
    let ViewKey::Send { text, .. } = press(&mut v, KeyCode::Char('s')) else {
        panic!("not sent")
    };
    assert!(text.contains("outside the reviewed diff"), "{text}");
}
