//! A long session's memory follows the screen, not its length: only the
//! newest finished boxes keep what their agents did in memory, and an
//! older box opened by the person shows the same, read back from the
//! transcript (issue 27, item 3).

use crate::common;

use common::app::*;
use quorum::agent::Permissions;
use quorum::transcript;
use quorum::tui::state::{CellKind, DETAIL_WINDOW, State, SubagentBox};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::KeyCode;

fn boxes(state: &State) -> Vec<(usize, &SubagentBox)> {
    (state.cells.iter().enumerate())
        .filter_map(|(i, c)| match &c.kind {
            CellKind::Subagent(b) => Some((i, b.as_ref())),
            _ => None,
        })
        .collect()
}

/// A live session recorded to `dir/s.jsonl`, older boxes' detail read
/// back from it; `said(n)` sent for calls 0..`calls`, one after another,
/// each waited for to its end.
async fn session_of_calls(
    dir: &std::path::Path,
    calls: usize,
    said: impl Fn(usize) -> String,
) -> (
    quorum::engine::Session,
    quorum::tui::app::App,
    Terminal<TestBackend>,
) {
    let path = dir.join("s.jsonl");
    let (session, mut app, mut ev_rx) =
        live_session(dir, "", None, Permissions::Allow, Some(path.clone()));
    app.set_transcript(&path, quorum::confine::limits::MAX_TRANSCRIPT_LINE);
    let mut terminal = Terminal::new(TestBackend::new(100, 40)).unwrap();
    for n in 0..calls {
        drive(&mut terminal, &mut app, line(&said(n)), vec![]).await;
        while boxes(&app.state).len() <= n || boxes(&app.state)[n].1.finished.is_none() {
            let e = tokio::time::timeout(std::time::Duration::from_secs(20), ev_rx.recv())
                .await
                .unwrap()
                .unwrap();
            drive(&mut terminal, &mut app, vec![], vec![e]).await;
        }
    }
    (session, app, terminal)
}

/// Alt+↑ from the newest of `calls` boxes to the first, and Enter.
fn open_the_first(calls: usize) -> Vec<quorum::tui::app::Input> {
    let mut keys = vec![alt(KeyCode::Up); calls];
    keys.push(key(KeyCode::Enter));
    keys
}

#[tokio::test(flavor = "multi_thread")]
async fn an_old_box_opened_shows_its_detail_read_back_from_the_transcript() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    // The first call edits a file (a tool call with a diff); then enough
    // calls that it falls out of the window.
    let calls = DETAIL_WINDOW + 2;
    let (_session, mut app, mut terminal) = session_of_calls(dir.path(), calls, |n| {
        if n == 0 {
            "@fake diff src/first.rs".to_string()
        } else {
            format!("@fake echo call {n}")
        }
    })
    .await;
    let all = boxes(&app.state);
    assert_eq!(all.len(), calls);
    let (first, _) = all[0];
    assert!(
        app.state.detail_spilled(first),
        "the oldest box let its detail go"
    );
    let held = all.iter().filter(|(i, _)| !app.state.detail_spilled(*i));
    assert_eq!(held.count(), DETAIL_WINDOW);

    // The same session read from its transcript, everything kept.
    let mut whole = State::new();
    for e in transcript::load(&path).unwrap().events {
        whole.apply(&e);
    }
    let kept = boxes(&whole)[0].1.clone();
    assert!(
        kept.log.entries.len() >= 2,
        "the first box did something: {:?}",
        kept.log
    );

    // Focus the first box (Alt+↑ from the newest) and open it.
    drive(&mut terminal, &mut app, open_the_first(calls), vec![]).await;
    let shown = text(&terminal);
    assert!(shown.contains("Edit src/first.rs"), "{shown}");
    assert!(!shown.contains("could not be read back"), "{shown}");
    let opened = boxes(&app.state)[0].1.clone();
    assert!(!opened.log.spilled);
    assert_eq!(opened.log, kept.log, "the opened box shows what it did");
    assert_eq!(opened.terminals, kept.terminals);
    // Drawn by the same code from the same detail: the same lines.
    let lines = |b: &SubagentBox| {
        quorum::tui::detail::render(b, 98, 0)
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(lines(&opened), lines(&kept));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_box_whose_transcript_is_gone_says_so_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let calls = DETAIL_WINDOW + 1;
    let (_session, mut app, mut terminal) =
        session_of_calls(dir.path(), calls, |n| format!("@fake echo call {n}")).await;
    std::fs::write(&path, "").unwrap();
    drive(&mut terminal, &mut app, open_the_first(calls), vec![]).await;
    let shown = text(&terminal);
    assert!(
        shown.contains("kept in the transcript only, and could not be read back"),
        "{shown}"
    );
}

/// Through quorum's own start (the TUI in a terminal, its config's
/// `[limits] max_transcript_line_bytes` read as it reads it): a session
/// with more boxes than the window, recorded; the oldest box, opened, is
/// read back from that transcript, with the configured limit: a line of
/// its span longer than the limit (put there by the test, as a writer
/// with a larger limit would have) is refused, naming the limit.
#[cfg(unix)]
#[test]
fn the_tui_reads_an_old_box_back_from_its_recorded_transcript_within_the_configured_limit() {
    use common::pty::Terminal as Pty;
    use quorum::event::{Event, Stamped, build};
    let dir = tempfile::tempdir().unwrap();
    let limit = 100_000;
    let config = dir.path().join("quorum.toml");
    // One task at a time: they finish in order, the first first.
    std::fs::write(
        &config,
        format!(
            "max_parallel = 1\n[limits]\nmax_transcript_line_bytes = {limit}\n\
             [agents.fake]\ncommand = {:?}\n",
            env!("CARGO_BIN_EXE_quorum-fake-agent")
        ),
    )
    .unwrap();
    let calls = DETAIL_WINDOW + 2;
    let tasks: Vec<serde_json::Value> = (0..calls)
        .map(|n| {
            let input = match n {
                0 => "diff src/first.rs".to_string(),
                n => format!("echo call {n}"),
            };
            serde_json::json!({"agent": "fake", "input": input})
        })
        .collect();
    let script = dir.path().join("model.json");
    std::fs::write(
        &script,
        serde_json::json!([
            {"tool_calls": [{"name": "subagent", "arguments": {"tasks": tasks}}]},
            {"text": "All reported."}
        ])
        .to_string(),
    )
    .unwrap();
    let record = dir.path().join("s.jsonl");
    let terminal = Pty::open(240, 50);
    let mut quorum = terminal.spawn(
        common::quorum(dir.path())
            .arg("--config")
            .arg(&config)
            .arg("--model")
            .arg(format!("script:{}", script.display()))
            .arg("--record")
            .arg(&record)
            .current_dir(dir.path()),
        std::process::Stdio::null(),
    );
    terminal.wait_for("Ctrl+C quits");
    terminal.type_keys(b"go\r");
    terminal.wait_for("All reported.");

    // A line over the limit in the first box's span, right after its start.
    let text = std::fs::read_to_string(&record).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let (at, call_id, t) = lines
        .iter()
        .enumerate()
        .find_map(|(i, l)| {
            let e: Stamped = serde_json::from_str(l).ok()?;
            match e.event {
                Event::SubagentStarted { call_id, input, .. } if input == "diff src/first.rs" => {
                    Some((i, call_id, e.t))
                }
                _ => None,
            }
        })
        .expect("the first box's start is recorded");
    let long = Stamped::new(t, build::chunk(&call_id, "x".repeat(2 * limit)));
    lines.insert(at + 1, serde_json::to_string(&long).unwrap());
    std::fs::write(&record, lines.join("\n") + "\n").unwrap();

    // Alt+↑ from the newest box to the first, and Enter.
    for _ in 0..calls {
        terminal.type_keys(b"\x1b[1;3A");
    }
    terminal.type_keys(b"\r");
    // (It names the line 0: the read back seeks to the box's time, and
    // counts no lines.)
    let refused = format!(
        "this call's detail could not be read back: {}:",
        record.display()
    );
    let limit_named = format!(
        "a line over {limit} bytes, read no further (max_transcript_line_bytes under [limits] in the config)"
    );
    terminal.wait_for_screen(|s| {
        s.contents().contains(&refused) && s.contents().contains(&limit_named)
    });
    terminal.type_keys(b"\x1bq");
    terminal.type_keys(b"\x03");
    common::wait_bounded(&mut quorum, "quorum after Ctrl+C");
}
