//! Steering and opening boxes through the app loop (TestBackend): the side
//! panel's keys (message, cancel, open), the "needs you" mark and the bell,
//! the quit question, the opened box with a diff and a command, and the
//! change summary a finished box keeps.

use crate::common;

use common::app::*;
use common::*;
use quorum::agent::Permissions;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::KeyCode;
use ratatui::style::Color;

/// The screen with what changes from run to run (session ids, elapsed
/// seconds) replaced.
fn stable(screen: &str) -> String {
    // The pid's digits vary in number: the border after it moves.
    let ids = regex::Regex::new(r"fake-\d+-\d+ *│").unwrap();
    let secs = regex::Regex::new(r"\b\d+s\b").unwrap();
    secs.replace_all(&ids.replace_all(screen, "fake-PID-N │"), "Ns")
        .into_owned()
}

#[tokio::test]
async fn a_message_from_the_panel_reopens_a_finished_task_on_its_session() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(dir.path(), "", None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    drive(&mut terminal, &mut app, line("@fake! echo first"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("  done")
    })
    .await;
    // Tab focuses the panel; `m` starts a message to the selected task.
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Tab), key(KeyCode::Char('m'))],
        vec![],
    )
    .await;
    let screen = text(&terminal);
    assert!(screen.contains("› /msg t1"), "{screen}");
    drive(&mut terminal, &mut app, line("turns"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("turns: 2")
    })
    .await;
    let screen = text(&terminal);
    assert!(screen.contains("› /msg t1 turns"), "{screen}");
    assert!(screen.contains("[t1]"), "the same box: {screen}");
    assert_eq!(
        screen.matches("╭─ fake").count(),
        1,
        "no second box: {screen}"
    );
}

#[tokio::test]
async fn a_message_from_the_panel_to_a_running_task_is_its_next_turn() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(dir.path(), "", None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    drive(&mut terminal, &mut app, line("@fake! permission"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("press 1-3 to answer")
    })
    .await;
    let mut keys = vec![key(KeyCode::Tab), key(KeyCode::Char('m'))];
    keys.extend(line("turns"));
    drive(&mut terminal, &mut app, keys, vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("t1 is running: the message goes in its next turn")
    })
    .await;
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Char('1'))],
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("turns: 2")
    })
    .await;
    // The first turn ended ("permitted"); the queued message ran next on
    // the same session (its second prompt), in the same box.
    let screen = text(&terminal);
    assert_eq!(screen.matches("╭─ fake").count(), 1, "{screen}");
    assert!(screen.contains("› /msg t1 turns"), "{screen}");
}

#[tokio::test]
async fn c_in_the_panel_cancels_the_selected_task() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(dir.path(), "", None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    drive(&mut terminal, &mut app, line("@fake! slow 30"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("working")
    })
    .await;
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Tab), key(KeyCode::Char('c'))],
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("  cancelled")
    })
    .await;
    // Esc leaves the panel: keys go to the composer again.
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Esc), key(KeyCode::Char('x'))],
        vec![],
    )
    .await;
    assert!(text(&terminal).contains("› x"), "{}", text(&terminal));
}

#[tokio::test]
async fn a_task_waiting_for_you_is_marked_counted_and_rings_once() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(dir.path(), "", None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    drive(
        &mut terminal,
        &mut app,
        line("@fake! permission build/x"),
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("running · needs you") && s.contains("? 1 needs you")
    })
    .await;
    let buf = terminal.backend().buffer().clone();
    let screen = rows(&buf).join("\n");
    // The panel marks it in its own colour.
    let (x, y) = find(&buf, "? t1 fake").unwrap_or_else(|| panic!("{screen}"));
    assert_eq!(buf[(x, y)].fg, Color::LightYellow, "{screen}");
    let (x, y) = find(&buf, "? 1 needs you").unwrap();
    assert_eq!(buf[(x, y)].fg, Color::LightYellow);
    // The prompt shows what is asked: the path.
    assert!(screen.contains("path: build/x"), "{screen}");
    assert_eq!(app.bells, 1, "the bell rang once");
    // More frames, no more bells.
    drive(&mut terminal, &mut app, vec![key(KeyCode::PageUp)], vec![]).await;
    assert_eq!(app.bells, 1);
    // Answered: no longer needs you.
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Char('1'))],
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("permitted") && !s.contains("needs you")
    })
    .await;
}

#[tokio::test]
async fn bell_false_keeps_it_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(dir.path(), "", None, Permissions::Ask, None);
    app.set_bell(false);
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    drive(&mut terminal, &mut app, line("@fake! permission"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("? 1 needs you")
    })
    .await;
    assert_eq!(app.bells, 0);
}

#[tokio::test]
async fn quitting_with_tasks_running_asks_once() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(dir.path(), "", None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    drive(&mut terminal, &mut app, line("@fake! slow 30"), vec![]).await;
    drive(&mut terminal, &mut app, line("@fake! slow 30"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("2 running")
    })
    .await;
    drive(&mut terminal, &mut app, vec![ctrl('c')], vec![]).await;
    assert!(!app.quitting());
    assert!(
        text(&terminal).contains("2 tasks running: Ctrl+C again quits and cancels them"),
        "{}",
        text(&terminal)
    );
    // Another key takes the question back.
    drive(&mut terminal, &mut app, vec![key(KeyCode::PageUp)], vec![]).await;
    assert!(!text(&terminal).contains("Ctrl+C again"));
    drive(&mut terminal, &mut app, vec![ctrl('d'), ctrl('c')], vec![]).await;
    assert!(app.quitting());
}

#[tokio::test]
async fn an_opened_box_shows_the_diff_and_the_command_and_esc_returns() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(dir.path(), "", None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(100, 50)).unwrap();
    app.view.set_panel(Some(false));
    drive(
        &mut terminal,
        &mut app,
        line("@fake! diff src/a.rs"),
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("edited src/a.rs")
    })
    .await;
    drive(
        &mut terminal,
        &mut app,
        line("/msg t1 execute cargo test"),
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("✎ edited src/a.rs · ran 1 command")
    })
    .await;
    // Alt+↑ focuses the newest box; Enter opens it.
    drive(&mut terminal, &mut app, vec![alt(KeyCode::Up)], vec![]).await;
    let before = text(&terminal);
    assert!(before.contains("Enter open box"), "{before}");
    drive(&mut terminal, &mut app, vec![key(KeyCode::Enter)], vec![]).await;
    let opened = text(&terminal);
    insta::assert_snapshot!("opened_box_diff_and_command", stable(&opened));
    // Diffs in diff colours.
    let buf = terminal.backend().buffer();
    let (x, y) = find(buf, "-two").unwrap();
    assert_eq!(buf[(x, y)].fg, Color::Red);
    let (x, y) = find(buf, "+2 ").unwrap();
    assert_eq!(buf[(x, y)].fg, Color::Green);
    // Esc returns to the same place.
    drive(&mut terminal, &mut app, vec![key(KeyCode::Esc)], vec![]).await;
    assert_eq!(text(&terminal), before);
}

#[tokio::test]
async fn an_internal_agent_that_overwrote_a_file_says_so() {
    use quorum::llm::script::ScriptModel;

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("README.md"), "old\n").unwrap();
    let turns: Vec<quorum::llm::script::Turn> = serde_json::from_value(serde_json::json!([
        {"tool_calls": [{"name": "subagent", "arguments": {"input": "Rewrite the readme."}}]},
        {"tool_calls": [{"name": "write", "arguments": {"path": "README.md", "content": "new\n"}}]},
        {"tool_calls": [{"name": "shell", "arguments": {"command": "true"}}]},
        {"text": "Rewritten."},
        {"text": "The readme is rewritten."},
    ]))
    .unwrap();
    let model: std::sync::Arc<dyn quorum::llm::Model> =
        std::sync::Arc::new(ScriptModel::new("chat.json", turns));
    let (_session, mut app, mut ev_rx) =
        live_session(dir.path(), "", Some(model), Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(100, 40)).unwrap();
    drive(&mut terminal, &mut app, line("rewrite the readme"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("The readme is rewritten.")
    })
    .await;
    let screen = text(&terminal);
    assert!(
        screen.contains("✎ edited README.md · ran 1 command"),
        "{screen}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("README.md")).unwrap(),
        "new\n"
    );
}

#[tokio::test]
async fn the_panel_selects_with_arrows_and_enter_opens_the_task_box() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(dir.path(), "", None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    drive(&mut terminal, &mut app, line("@fake! echo one"), vec![]).await;
    drive(&mut terminal, &mut app, line("@fake! echo two"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("0 running · 2 done")
    })
    .await;
    // Tab selects the newest task; ↑ the one before; Enter opens its box.
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Tab), key(KeyCode::Up), key(KeyCode::Enter)],
        vec![],
    )
    .await;
    let screen = text(&terminal);
    assert!(screen.contains("╭ opened box"), "{screen}");
    assert!(screen.contains("fake [t1]"), "{screen}");
    assert!(!screen.contains("[t2]"), "{screen}");
    // Esc closes the box, Esc again leaves the panel.
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Esc), key(KeyCode::Esc)],
        vec![],
    )
    .await;
    let screen = text(&terminal);
    assert!(!screen.contains("╭ opened box"), "{screen}");
    assert!(
        screen.contains("Tab tasks"),
        "the composer's keys: {screen}"
    );
}
