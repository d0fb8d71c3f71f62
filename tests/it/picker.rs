//! The session picker (`quorum --resume` with no id): its screen, drawn
//! headlessly, and the keys that move, pick and cancel.

use std::path::PathBuf;

use crate::common::app::key;
use std::time::{Duration, SystemTime};

use quorum::transcript::sessions::SessionInfo;
use quorum::tui::app::Input;
use quorum::tui::picker::{PickOptions, Picker, pick};
use quorum::tui::screenshot;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use tokio::sync::mpsc;

fn now() -> SystemTime {
    humantime::parse_rfc3339("2026-12-31T12:00:00Z").unwrap()
}

/// Session `n`, its last event `ago` before [`now`].
fn session(n: usize, ago: Duration) -> SessionInfo {
    let last_event = now() - ago;
    SessionInfo {
        id: format!("2026-12-31T00-00-00Z-{n}"),
        path: PathBuf::from(format!("/state/sessions/s{n}.jsonl")),
        cwd: format!("/home/me/projects/project-{n}"),
        started: last_event - Duration::from_secs(600),
        last_event,
        first_message: Some(format!("task number {n}: make the thing work")),
        agents: vec!["claude".into()],
        running_tasks: Vec::new(),
        spent: None,
        events: 100 * n as u64,
        bytes: 1000,
        open_in: None,
        version: 2,
        quorum_version: "0.1.0".into(),
    }
}

fn sessions() -> Vec<SessionInfo> {
    let mut list = vec![
        session(1, Duration::from_secs(5)),
        session(2, Duration::from_secs(5 * 60)),
        session(3, Duration::from_secs(3 * 3600)),
        session(4, Duration::from_secs(6 * 86_400)),
        session(5, Duration::from_secs(90 * 86_400)),
    ];
    list[1].agents = vec![
        "claude".into(),
        "internal".into(),
        "gemini".into(),
        "codex".into(),
    ];
    list[1].running_tasks = vec!["t1".into(), "t2".into()];
    list[2].first_message = Some("evil \x1b]0;title\x07\x1b[31mred\nand a second line".into());
    list[2].cwd = "/home/me/a/rather/deeply/nested/directory/of/work".into();
    list[3].first_message = None;
    list[3].agents.clear();
    list[4].open_in = Some(4242);
    list[4].first_message = Some("a very long first message ".repeat(10));
    list
}

fn options(show_dirs: bool) -> PickOptions {
    PickOptions {
        title: "Sessions of /home/me/projects".into(),
        show_dirs,
        now: now(),
    }
}

fn render(picker: &mut Picker, cols: u16, rows: u16) -> Buffer {
    let area = Rect::new(0, 0, cols, rows);
    let mut buf = Buffer::empty(area);
    picker.render(area, &mut buf);
    buf
}

fn text(buf: &Buffer) -> String {
    screenshot::to_text(buf)
}

#[test]
fn the_picker_screen() {
    let mut picker = Picker::new(sessions(), options(false));
    insta::assert_snapshot!("picker_screen", text(&render(&mut picker, 100, 10)));
}

#[test]
fn the_picker_screen_with_directories() {
    let mut picker = Picker::new(sessions(), options(true));
    picker.handle(&key(KeyCode::Down));
    insta::assert_snapshot!("picker_screen_all", text(&render(&mut picker, 120, 10)));
}

#[test]
fn the_selected_row_is_highlighted_and_nothing_raw_shows() {
    let mut picker = Picker::new(sessions(), options(false));
    picker.handle(&key(KeyCode::Down));
    let buf = render(&mut picker, 100, 10);
    let reversed = |y: u16| buf[(5, y)].modifier.contains(Modifier::REVERSED);
    // Title, heading, then the rows: the second session's is selected.
    assert!(!reversed(2) && reversed(3) && !reversed(4));
    let screen = text(&buf);
    assert!(
        !screen.contains('\x1b') && !screen.contains('\x07'),
        "{screen:?}"
    );
    assert!(screen.contains("› 5m ago"), "{screen}");
    // Tasks left running read as a warning, a session open elsewhere as an error.
    let colour_at = |needle: &str| {
        let rows = screen.lines().collect::<Vec<_>>();
        let y = rows.iter().position(|r| r.contains(needle)).unwrap();
        let x = rows[y][..rows[y].find(needle).unwrap()].chars().count();
        buf[(x as u16, y as u16)].fg
    };
    assert_eq!(colour_at("2 running"), quorum::tui::theme::YELLOW);
    assert_eq!(colour_at("open in process 4242"), quorum::tui::theme::RED);
}

#[test]
fn the_selection_stays_in_view() {
    let many: Vec<SessionInfo> = (1..=30)
        .map(|n| session(n, Duration::from_secs(60 * n as u64)))
        .collect();
    let mut picker = Picker::new(many, options(false));
    // 10 rows: title, heading, help, and 7 sessions.
    render(&mut picker, 80, 10);
    picker.handle(&key(KeyCode::End));
    let screen = text(&render(&mut picker, 80, 10));
    assert!(screen.contains("› 30m ago"), "{screen}");
    assert!(
        screen.contains("  24m ago") && !screen.contains(" 23m ago"),
        "{screen}"
    );
    picker.handle(&key(KeyCode::PageUp));
    let screen = text(&render(&mut picker, 80, 10));
    assert_eq!(picker.selected().unwrap().id, "2026-12-31T00-00-00Z-23");
    assert!(screen.contains("› 23m ago"), "{screen}");
    picker.handle(&key(KeyCode::Home));
    let screen = text(&render(&mut picker, 80, 10));
    assert!(screen.contains("› 1m ago"), "{screen}");
    // Tiny screens draw what fits, and nothing panics.
    for (cols, rows) in [(1, 1), (10, 2), (20, 3), (5, 30), (200, 4)] {
        render(&mut picker, cols, rows);
    }
    let mut empty = Picker::new(Vec::new(), options(false));
    assert!(text(&render(&mut empty, 60, 8)).contains("no sessions recorded"));
    assert_eq!(empty.handle(&key(KeyCode::Enter)), None);
}

/// Runs [`pick`] on a 100x12 test terminal with `inputs`, then closes them.
async fn drive(inputs: Vec<Input>) -> Option<PathBuf> {
    let mut terminal = Terminal::new(TestBackend::new(100, 12)).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    for i in inputs {
        tx.send(i).unwrap();
    }
    drop(tx);
    pick(sessions(), options(false), &mut terminal, &mut rx)
        .await
        .unwrap()
}

fn path(n: usize) -> Option<PathBuf> {
    Some(PathBuf::from(format!("/state/sessions/s{n}.jsonl")))
}

#[tokio::test]
async fn keys_move_pick_and_cancel() {
    use KeyCode::*;
    assert_eq!(drive(vec![key(Enter)]).await, path(1));
    assert_eq!(drive(vec![key(Down), key(Down), key(Enter)]).await, path(3));
    let vim = vec![key(Char('j')), key(Char('j')), key(Char('k')), key(Enter)];
    assert_eq!(drive(vim).await, path(2));
    assert_eq!(drive(vec![key(End), key(Enter)]).await, path(5));
    assert_eq!(drive(vec![key(End), key(Down), key(Enter)]).await, path(5));
    assert_eq!(drive(vec![key(Up), key(Enter)]).await, path(1));
    assert_eq!(drive(vec![key(PageDown), key(Enter)]).await, path(5));
    assert_eq!(
        drive(vec![key(End), key(Home), key(Down), key(Enter)]).await,
        path(2)
    );
    assert_eq!(drive(vec![key(Down), key(Esc), key(Enter)]).await, None);
    assert_eq!(drive(vec![key(Char('q'))]).await, None);
    let ctrl_c = Input::Key(KeyEvent::new(Char('c'), KeyModifiers::CONTROL));
    assert_eq!(drive(vec![ctrl_c]).await, None);
    assert_eq!(drive(vec![Input::Quit]).await, None);
    // Inputs closed with nothing picked.
    assert_eq!(drive(vec![key(Down)]).await, None);
}
