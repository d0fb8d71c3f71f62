//! The composer of the real `quorum` binary in a pseudo-terminal (no
//! tmux): a draft longer than the width wraps, all of it on screen, the
//! terminal's cursor after it; what is sent is kept in the history file
//! in the state directory.
#![cfg(target_os = "linux")]

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::pty::{Terminal, wait_until};

const COLS: u16 = 100;
const ROWS: u16 = 30;

/// The composer's rows (between its top border and the status line), each
/// without its two columns of prompt; and the screen row of the first.
fn composer_rows(screen: &vt100::Screen) -> (u16, Vec<String>) {
    let rows: Vec<String> = screen.rows(0, COLS).collect();
    let status = rows.len() - 1;
    let border = (0..status)
        .rev()
        .find(|&y| rows[y].starts_with('─'))
        .expect("the composer's top border");
    let shown = rows[border + 1..status]
        .iter()
        .map(|r| r.chars().skip(2).collect::<String>().trim_end().to_string())
        .collect();
    ((border + 1) as u16, shown)
}

#[test]
fn three_hundred_typed_characters_all_show_wrapped_in_the_composer() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quorum.toml");
    std::fs::write(&config, "").unwrap();
    let state = dir.path().join("state");
    let terminal = Terminal::open(COLS, ROWS);
    let mut quorum = terminal.spawn(
        common::quorum(dir.path())
            .arg("--config")
            .arg(&config)
            .arg("--no-record")
            .env("XDG_STATE_HOME", &state)
            .current_dir(dir.path()),
        Stdio::from(std::fs::File::create(dir.path().join("stderr")).unwrap()),
    );
    /// Kills quorum if the test fails.
    struct Guard<'a>(&'a mut std::process::Child, bool);
    impl Drop for Guard<'_> {
        fn drop(&mut self) {
            if !self.1 {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
    }
    let mut guard = Guard(&mut quorum, false);
    terminal.wait_for("Ctrl+C quits");

    // 60 words of four letters and a space, the last one an exclamation
    // mark instead: 300 characters, three times the width.
    let words: Vec<String> = (0..60).map(|i| format!("w{i:03}")).collect();
    let draft = words.join(" ") + "!";
    assert_eq!(draft.chars().count(), 300);
    terminal.type_keys(draft.as_bytes());
    // (Waited for until the cursor is placed too: a frame's text and its
    // cursor may arrive in two reads of the pty.)
    let screen = terminal.wait_for_screen(|s| {
        let (first, shown) = composer_rows(s);
        let last = shown.len().saturating_sub(1);
        shown.concat().ends_with("w059!")
            && s.cursor_position()
                == (
                    first + last as u16,
                    2 + shown.last().map_or(0, |r| r.chars().count()) as u16,
                )
    });
    let (first, shown) = composer_rows(&screen);
    // All of it, wrapped between words, no row wider than the screen.
    assert_eq!(shown.join(" "), draft, "{}", screen.contents());
    assert!(shown.len() >= 4, "{shown:?}");
    assert!(shown.iter().all(|r| r.chars().count() < COLS as usize - 2));
    let rows: Vec<String> = screen.rows(0, COLS).collect();
    assert!(rows[first as usize].starts_with("› w000 "), "{rows:?}");
    // The terminal's cursor is after the last character typed.
    let last = shown.len() - 1;
    assert!(!screen.hide_cursor(), "the cursor shows");
    assert_eq!(
        screen.cursor_position(),
        (first + last as u16, 2 + shown[last].chars().count() as u16)
    );

    // Sent, it is kept in the history file, the person's alone.
    terminal.type_keys(b"\r");
    let history = state.join("quorum/history.jsonl");
    assert!(
        wait_until(Duration::from_secs(30), || std::fs::read_to_string(
            &history
        )
        .is_ok_and(|t| t.ends_with('\n'))),
        "no history file"
    );
    let text = std::fs::read_to_string(&history).unwrap();
    assert_eq!(text, serde_json::to_string(&draft).unwrap() + "\n");
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&history), 0o600);
    assert_eq!(mode(&state.join("quorum")), 0o700);

    // An empty composer: Ctrl+C quits.
    terminal.type_keys(b"\x03");
    assert!(wait_until(Duration::from_secs(30), || guard
        .0
        .try_wait()
        .unwrap()
        .is_some()));
    guard.1 = true;
    terminal.assert_restored();
}
