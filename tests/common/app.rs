//! The app loop driven with `TestBackend` against a live session, as the
//! app-loop tests drive it: keys, the loop, and reading the screen.

use std::time::Instant;

use quorum::acp::registry::Registry;
use quorum::agent::Permissions;
use quorum::confine::fsroot::Root;
use quorum::engine::{Session, SessionConfig};
use quorum::event::Stamped;
use quorum::tui::app::{self, App, Input};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use tokio::sync::mpsc;

use super::rows;

pub fn key(code: KeyCode) -> Input {
    Input::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

pub fn ctrl(c: char) -> Input {
    Input::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL))
}

pub fn alt(code: KeyCode) -> Input {
    Input::Key(KeyEvent::new(code, KeyModifiers::ALT))
}

pub fn chars(s: &str) -> Vec<Input> {
    s.chars().map(|c| key(KeyCode::Char(c))).collect()
}

/// Runs the loop until `inputs` are used up (or the app quits).
pub async fn drive(
    terminal: &mut Terminal<TestBackend>,
    app: &mut App,
    inputs: Vec<Input>,
    events: Vec<Stamped>,
) {
    let (in_tx, mut in_rx) = mpsc::unbounded_channel();
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
    for e in events {
        ev_tx.send(e).unwrap();
    }
    // Engine events already waiting are applied before any key.
    drop(ev_tx);
    for i in inputs {
        in_tx.send(i).unwrap();
    }
    drop(in_tx);
    app::run(terminal, app, &mut in_rx, &mut ev_rx)
        .await
        .unwrap();
}

/// A session as `quorum` starts one, in `dir` with the fake agent
/// configured (`extra` adds to its config table), serving the app: the
/// app's commands go to it, its events come back.
pub fn live_session(
    dir: &std::path::Path,
    extra: &str,
    model: Option<std::sync::Arc<dyn quorum::llm::Model>>,
    permissions: Permissions,
    record: Option<std::path::PathBuf>,
) -> (Session, App, mpsc::UnboundedReceiver<Stamped>) {
    let config = dir.join("q.toml");
    std::fs::write(
        &config,
        format!(
            "[agents.fake]\ncommand = {:?}\n{extra}",
            env!("CARGO_BIN_EXE_quorum-fake-agent")
        ),
    )
    .unwrap();
    // The configured agents only: none found on the machine's PATH.
    let registry = Registry::load_only(&config).unwrap();
    let mut config = SessionConfig::new(registry, Root::new(dir).unwrap());
    config.model = model;
    config.permissions = permissions;
    config.record = record;
    let started = Instant::now();
    let (mut session, events) = Session::start(config, started).unwrap();
    let ops = session.serve();
    (session, App::live(ops, started), events)
}

pub fn text(terminal: &Terminal<TestBackend>) -> String {
    rows(terminal.backend().buffer()).join("\n")
}

/// Feeds engine events to the loop until `done` holds for the screen.
pub async fn until(
    terminal: &mut Terminal<TestBackend>,
    app: &mut App,
    ev_rx: &mut mpsc::UnboundedReceiver<Stamped>,
    done: impl Fn(&str) -> bool,
) {
    let deadline = Instant::now() + std::time::Duration::from_secs(20);
    while !done(&text(terminal)) {
        assert!(Instant::now() < deadline, "timed out:\n{}", text(terminal));
        let e = tokio::time::timeout(std::time::Duration::from_secs(20), ev_rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no event for 20 s; the screen:\n{}", text(terminal)))
            .expect("the session runs");
        drive(terminal, app, vec![], vec![e]).await;
    }
}

/// Feeds engine events to the loop until one for which `done` holds has
/// been drawn; that event.
pub async fn until_event(
    terminal: &mut Terminal<TestBackend>,
    app: &mut App,
    ev_rx: &mut mpsc::UnboundedReceiver<Stamped>,
    mut done: impl FnMut(&quorum::event::Event) -> bool,
) -> quorum::event::Event {
    loop {
        let e = tokio::time::timeout(std::time::Duration::from_secs(20), ev_rx.recv())
            .await
            .unwrap_or_else(|_| panic!("timed out:\n{}", text(terminal)))
            .expect("the session runs");
        let last = done(&e.event).then(|| e.event.clone());
        drive(terminal, app, vec![], vec![e]).await;
        if let Some(event) = last {
            return event;
        }
    }
}

/// Keys that type `line` and press Enter.
pub fn line(text: &str) -> Vec<Input> {
    let mut keys = chars(text);
    keys.push(key(KeyCode::Enter));
    keys
}
