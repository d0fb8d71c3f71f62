//! `quorum watch`: the screen follows a session another process records
//! (as `quorum mcp` does), read-only: what is appended shows as it comes
//! (a box, its task in the side panel, its verdict), a line still being
//! written waits for its end, keys scroll and quit, and the screen says
//! when the writer lets the session go. The app loop runs on
//! `TestBackend`, fed by the same follower `quorum watch` runs.

use crate::common;

use std::io::Write;
use std::time::Duration;

use quorum::event::{AgentRef, Event, Severity, Stamped, build};
use quorum::transcript::follow::Follower;
use quorum::transcript::{Header, Recorder, TerminalSize};
use quorum::tui::app::App;
use quorum::tui::modes::follow;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::KeyCode;

use common::app::{drive, key, text, until};

#[tokio::test]
async fn the_screen_follows_a_session_as_it_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut writer = Recorder::create(
        &path,
        &Header::now(dir.path(), TerminalSize { cols: 0, rows: 0 }),
    )
    .unwrap();
    let mut record = |t: u64, event: Event| writer.record(&Stamped::new(t, event)).unwrap();
    record(
        10,
        Event::UserMessage {
            text: "watch the parser review".into(),
        },
    );

    // What `quorum watch` does: what is there already, then what comes.
    let mut follower = Follower::open(&path, 1 << 20).unwrap();
    let earlier = follower.poll().unwrap();
    let mut app = App::watch("s");
    app.view.set_panel(Some(true));
    app.on_earlier(&earlier);
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let following = tokio::spawn(follow(follower, tx, Duration::from_millis(20)));
    let mut terminal = Terminal::new(TestBackend::new(110, 30)).unwrap();
    drive(&mut terminal, &mut app, vec![], vec![]).await;
    let screen = text(&terminal);
    assert!(screen.contains("watch the parser review"), "{screen}");
    assert!(screen.contains("◉ watching s"), "{screen}");
    assert!(screen.contains("q quit"), "{screen}");

    // A call starts in the recorded session: its box shows.
    record(
        20,
        build::started("call-1", AgentRef::Acp("fake".into()))
            .input("review the parser")
            .review()
            .event(),
    );
    record(30, build::chunk("call-1", "reading parser.rs\n"));
    until(&mut terminal, &mut app, &mut events, |s| {
        s.contains("╭─ fake") && s.contains("reading parser.rs")
    })
    .await;

    // It goes on in the background: the panel shows its task.
    record(40, build::backgrounded("call-1", "t1"));
    until(&mut terminal, &mut app, &mut events, |s| {
        s.contains("╭─ fake [t1] · acp · review · background") && s.contains("t1 fake")
    })
    .await;

    // A line the writer has only begun is no error: it shows once ended.
    let finished = serde_json::to_string(&Stamped::new(
        50,
        build::finished("call-1", "The parser is fine.")
            .severity(Severity::Green)
            .event(),
    ))
    .unwrap();
    let mut raw = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    raw.write_all(&finished.as_bytes()[..20]).unwrap();
    // Once the follower has read the half line, whatever it makes of it
    // comes before what it makes of the rest.
    assert!(
        read_to_the_end(&path).await,
        "the follower never read the half line"
    );
    raw.write_all(format!("{}\n", &finished[20..]).as_bytes())
        .unwrap();
    // The follower's next event is the whole line: nothing came of its
    // first half alone.
    let next = tokio::time::timeout(common::events::PATIENCE, events.recv())
        .await
        .expect("the line, once ended")
        .unwrap();
    assert_eq!(serde_json::to_string(&next).unwrap(), finished);
    drive(&mut terminal, &mut app, vec![], vec![next]).await;
    until(&mut terminal, &mut app, &mut events, |s| {
        s.contains("The parser is fine.")
    })
    .await;
    let buf = terminal.backend().buffer().clone();
    assert_eq!(
        common::box_colour(&buf, "fake"),
        quorum::tui::theme::severity_color(Severity::Green),
        "the verdict tints the box"
    );

    // The writer lets the session go: the screen says so.
    drop(raw);
    drop(writer);
    until(&mut terminal, &mut app, &mut events, |s| {
        s.contains("stopped recording this session")
    })
    .await;

    // Keys are the reader's: typing sends nothing (there is no composer),
    // q quits.
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Char('x')), key(KeyCode::PageUp)],
        vec![],
    )
    .await;
    assert!(!app.quitting());
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Char('q'))],
        vec![],
    )
    .await;
    assert!(app.quitting());
    following.abort();
}

/// Waits (bounded) until this process's reader of `path` (the follower:
/// the one descriptor of it opened read-only) has read it to its end.
async fn read_to_the_end(path: &std::path::Path) -> bool {
    let len = std::fs::metadata(path).unwrap().len();
    let read_to = || -> Option<u64> {
        std::fs::read_dir("/proc/self/fd")
            .ok()?
            .flatten()
            .find_map(|fd| {
                if std::fs::read_link(fd.path()).ok()? != path {
                    return None;
                }
                let info = std::fs::read_to_string(format!(
                    "/proc/self/fdinfo/{}",
                    fd.file_name().to_string_lossy()
                ))
                .ok()?;
                let field = |name: &str| {
                    info.lines()
                        .find_map(|l| l.strip_prefix(name))
                        .map(str::trim)
                };
                let flags = u32::from_str_radix(field("flags:")?, 8).ok()?;
                let read_only = flags & 0o3 == 0;
                read_only.then(|| field("pos:")?.parse().ok())?
            })
    };
    common::events::eventually(|| read_to() == Some(len)).await
}
