//! The app loop driven headlessly with `TestBackend`: replay keys, the
//! composer, scrolling, and recording, as a person would use them.

use crate::common;

use std::time::Instant;

use common::app::*;
use common::*;
use quorum::agent::Permissions;
use quorum::engine::Session;
use quorum::event::{Activity, Event, Op, Stamped};
use quorum::transcript;
use quorum::tui::app::{self, App, Input};
use quorum::tui::replay::Player;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};
use ratatui::style::Color;
use tokio::sync::mpsc;

fn paused_demo() -> (App, Vec<Stamped>) {
    let events = events(&demo());
    let mut player = Player::new(events.clone(), 1.0, Instant::now());
    player.set_paused(true, Instant::now());
    (App::replay(player), events)
}

/// Index (1-based count) of the first event matching `f`.
fn upto(events: &[Stamped], f: impl Fn(&Event) -> bool) -> usize {
    events
        .iter()
        .position(|e| f(&e.event))
        .expect("the demo has it")
        + 1
}

#[tokio::test]
async fn demo_replays_through_the_loop_with_snapshots_at_key_events() {
    let (mut app, events) = paused_demo();
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let total = events.len();

    // 1. Claude asks for permission while the background review runs.
    let n = upto(&events, |e| {
        matches!(
            e,
            Event::SubagentActivity {
                activity: Activity::PermissionRequest { .. },
                ..
            }
        )
    });
    let steps = vec![key(KeyCode::Char('n')); n];
    drive(&mut terminal, &mut app, steps, vec![]).await;
    let screen = text(&terminal);
    assert!(
        screen.contains(&format!("replay paused 1x · event {n}/{total}")),
        "{screen}"
    );
    insta::assert_snapshot!("demo_permission_request", screen);

    // 2. Claude's review ends red.
    let m = upto(
        &events,
        |e| matches!(e, Event::SubagentFinished { call_id, .. } if call_id == "c2"),
    );
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Right); m - n],
        vec![],
    )
    .await;
    assert_eq!(
        box_colour(terminal.backend().buffer(), "claude"),
        Color::Red
    );
    insta::assert_snapshot!("demo_claude_red", text(&terminal));

    // 3. The internal agent at work: plan and tool calls in its box.
    let k = upto(
        &events,
        |e| matches!(e, Event::SubagentActivity { call_id, activity: Activity::ToolCallUpdate { .. } } if call_id == "c3"),
    );
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Char('n')); k - m],
        vec![],
    )
    .await;
    let screen = text(&terminal);
    assert!(screen.contains("plan 3/4"), "{screen}");
    insta::assert_snapshot!("demo_internal_running", screen);

    // 4. End moves the view, not the replay: nothing more is played.
    let applied = app.state.applied;
    drive(&mut terminal, &mut app, vec![key(KeyCode::End)], vec![]).await;
    assert_eq!(app.state.applied, applied, "End plays nothing");
    // e: everything played, the background review reported back.
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Char('e'))],
        vec![],
    )
    .await;
    let buf = terminal.backend().buffer().clone();
    let screen = rows(&buf).join("\n");
    assert!(
        screen.contains(&format!("replay done 1x · event {total}/{total}")),
        "{screen}"
    );
    assert!(
        screen.contains("task t1 (gemini) finished ● yellow"),
        "{screen}"
    );
    assert_eq!(box_colour(&buf, "internal"), Color::Green);
    let (x, y) = find(&buf, "t1 gemini").unwrap();
    assert_eq!(
        buf[(x, y)].fg,
        Color::Yellow,
        "the finished task takes its verdict colour"
    );
    insta::assert_debug_snapshot!("demo_end", buf);
}

#[tokio::test]
async fn replay_keys_pause_speed_and_quit() {
    let (mut app, events) = paused_demo();
    let mut terminal = Terminal::new(TestBackend::new(120, 20)).unwrap();
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Char('+')), key(KeyCode::Char('+'))],
        vec![],
    )
    .await;
    assert!(
        text(&terminal).contains("replay paused 4x"),
        "{}",
        text(&terminal)
    );
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Char('-')); 5],
        vec![],
    )
    .await;
    assert!(
        text(&terminal).contains("replay paused 0.125x"),
        "{}",
        text(&terminal)
    );
    // Space plays; space again pauses.
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Char(' '))],
        vec![],
    )
    .await;
    assert!(
        text(&terminal).contains("▶ replay 0.125x"),
        "{}",
        text(&terminal)
    );
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Char(' '))],
        vec![],
    )
    .await;
    assert!(
        text(&terminal).contains("⏸ replay paused"),
        "{}",
        text(&terminal)
    );
    // q quits at once: the keys after it are never handled.
    let applied = app.state.applied;
    drive(
        &mut terminal,
        &mut app,
        vec![
            key(KeyCode::Char('q')),
            key(KeyCode::Char('n')),
            key(KeyCode::End),
        ],
        vec![],
    )
    .await;
    assert!(app.quitting());
    assert_eq!(app.state.applied, applied);
    assert!(app.state.applied < events.len() as u64);
}

#[tokio::test]
async fn replay_plays_in_real_time_scaled_by_speed() {
    let events: Vec<Stamped> = (0..3)
        .map(|i| {
            Stamped::new(
                i * 100,
                Event::UserMessage {
                    text: format!("message {i}"),
                },
            )
        })
        .collect();
    let mut app = App::replay(Player::new(events, 4.0, Instant::now()));
    let mut terminal = Terminal::new(TestBackend::new(80, 10)).unwrap();
    let (_in_tx, mut in_rx) = mpsc::unbounded_channel();
    let (_ev_tx, mut ev_rx) = mpsc::unbounded_channel::<Stamped>();
    // The loop runs until the person quits; stop it once all has played.
    let run = app::run(&mut terminal, &mut app, &mut in_rx, &mut ev_rx);
    let _ = tokio::time::timeout(std::time::Duration::from_millis(2000), run).await;
    assert_eq!(
        app.state.applied, 3,
        "200 ms of events at 4x (50 ms) play within 2 s"
    );
    assert!(
        text(&terminal).contains("replay done"),
        "{}",
        text(&terminal)
    );
}

#[tokio::test]
async fn composer_sends_messages_and_quits_like_a_shell() {
    let (ops_tx, mut ops_rx) = mpsc::unbounded_channel();
    let mut app = App::live(ops_tx, Instant::now());
    let mut terminal = Terminal::new(TestBackend::new(80, 12)).unwrap();
    let mut inputs = chars("hello wrold");
    inputs.extend([ctrl('w')]);
    inputs.extend(chars("world"));
    inputs.push(key(KeyCode::Enter));
    drive(&mut terminal, &mut app, inputs, vec![]).await;
    assert_eq!(ops_rx.try_recv().unwrap(), Op::Submit("hello world".into()));
    // Typing shows in the composer; Ctrl+C clears it first, then quits.
    drive(&mut terminal, &mut app, chars("draft"), vec![]).await;
    assert!(text(&terminal).contains("› draft"), "{}", text(&terminal));
    drive(&mut terminal, &mut app, vec![ctrl('c')], vec![]).await;
    assert!(!text(&terminal).contains("draft"));
    assert!(!app.quitting());
    drive(&mut terminal, &mut app, vec![ctrl('c')], vec![]).await;
    assert!(app.quitting());
    assert!(ops_rx.try_recv().is_err(), "nothing else was sent");
}

/// What the engine emits is recorded (by the engine, not the screen) and
/// shown; the transcript holds exactly the events the screen applied.
#[tokio::test]
async fn live_events_are_recorded_and_shown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let (_session, mut app, mut ev_rx) =
        live_session(dir.path(), "", None, Permissions::Ask, Some(path.clone()));
    let mut terminal = Terminal::new(TestBackend::new(100, 40)).unwrap();
    drive(&mut terminal, &mut app, line("hello there"), vec![]).await;
    let mut seen = Vec::new();
    while seen.len() < 5 {
        let e = tokio::time::timeout(std::time::Duration::from_secs(10), ev_rx.recv())
            .await
            .unwrap()
            .unwrap();
        seen.push(e);
    }
    // session_info, the welcome notice, the chats `/model` offers, the
    // message, the notice again.
    assert!(matches!(&seen[2].event, Event::ModelChoices { .. }));
    assert!(matches!(&seen[3].event, Event::UserMessage { text } if text == "hello there"));
    drive(&mut terminal, &mut app, vec![], seen.clone()).await;
    assert!(
        text(&terminal).contains("› hello there"),
        "{}",
        text(&terminal)
    );
    assert_eq!(transcript::load(&path).unwrap().events, seen);
}

fn many_messages(n: usize) -> Vec<Stamped> {
    (0..n)
        .map(|i| {
            Stamped::new(
                i as u64,
                Event::UserMessage {
                    text: format!("message number {i}"),
                },
            )
        })
        .collect()
}

#[tokio::test]
async fn scrolling_stays_put_while_output_arrives_and_end_follows_again() {
    let (ops_tx, _ops_rx) = mpsc::unbounded_channel();
    let mut app = App::live(ops_tx, Instant::now());
    let mut terminal = Terminal::new(TestBackend::new(60, 14)).unwrap();
    drive(&mut terminal, &mut app, vec![], many_messages(40)).await;
    assert!(text(&terminal).contains("message number 39"));

    drive(&mut terminal, &mut app, vec![key(KeyCode::PageUp)], vec![]).await;
    let scrolled = text(&terminal);
    assert!(!scrolled.contains("message number 39"), "{scrolled}");
    assert!(scrolled.contains("scrolled, End follows"), "{scrolled}");

    // New output arrives: the view does not move.
    let more = vec![Stamped::new(
        100,
        Event::UserMessage {
            text: "late arrival".into(),
        },
    )];
    drive(&mut terminal, &mut app, vec![], more).await;
    assert_eq!(
        rows(terminal.backend().buffer())[..10],
        scrolled.lines().map(String::from).collect::<Vec<_>>()[..10]
    );

    // Home shows the first message; the wheel scrolls by rows.
    drive(&mut terminal, &mut app, vec![key(KeyCode::Home)], vec![]).await;
    assert!(rows(terminal.backend().buffer())[0].contains("message number 0"));
    let wheel = Input::Mouse(MouseEvent {
        kind: MouseEventKind::ScrollDown,
        column: 0,
        row: 0,
        modifiers: KeyModifiers::NONE,
    });
    drive(&mut terminal, &mut app, vec![wheel], vec![]).await;
    // Three rows down: message 0 and 1 (two rows each) scroll out.
    let screen = rows(terminal.backend().buffer());
    assert_eq!(screen[1], " › message number 2", "{}", text(&terminal));
    assert!(
        !screen.iter().any(|r| r.contains("message number 1")),
        "{}",
        text(&terminal)
    );

    // End (with an empty composer) follows the bottom again.
    drive(&mut terminal, &mut app, vec![key(KeyCode::End)], vec![]).await;
    let screen = text(&terminal);
    assert!(screen.contains("late arrival"), "{screen}");
    assert!(!screen.contains("scrolled"), "{screen}");

    // PgDn past the end also resumes following.
    drive(
        &mut terminal,
        &mut app,
        vec![
            key(KeyCode::PageUp),
            key(KeyCode::PageDown),
            key(KeyCode::PageDown),
        ],
        vec![],
    )
    .await;
    assert!(!text(&terminal).contains("scrolled"), "{}", text(&terminal));
}

#[tokio::test]
async fn side_panel_toggles_with_ctrl_t() {
    let (ops_tx, _ops_rx) = mpsc::unbounded_channel();
    let mut app = App::live(ops_tx, Instant::now());
    let mut terminal = Terminal::new(TestBackend::new(120, 20)).unwrap();
    drive(&mut terminal, &mut app, vec![], vec![]).await;
    assert!(text(&terminal).contains("Tasks ·"));
    drive(&mut terminal, &mut app, vec![ctrl('t')], vec![]).await;
    assert!(!text(&terminal).contains("Tasks ·"));
    drive(&mut terminal, &mut app, vec![ctrl('t')], vec![]).await;
    assert!(text(&terminal).contains("Tasks ·"));
}

#[tokio::test]
async fn resizing_rewraps_the_transcript() {
    let (mut app, _) = paused_demo();
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Char('e'))],
        vec![],
    )
    .await;
    let wide = text(&terminal);
    assert!(
        wide.contains("The background security review of src/auth/ finished yellow: nothing"),
        "{wide}"
    );
    terminal.backend_mut().resize(70, 40);
    drive(&mut terminal, &mut app, vec![Input::Resize], vec![]).await;
    let narrow = text(&terminal);
    assert!(
        narrow
            .lines()
            .all(|l| unicode_width::UnicodeWidthStr::width(l) <= 70)
    );
    assert!(
        narrow.contains("Shall I have an agent fix both?"),
        "{narrow}"
    );
    assert!(
        !narrow.contains("Tasks ·"),
        "panel hides below 100 columns: {narrow}"
    );
}

/// `@NAME message` in the composer runs a call on that agent: keys → the
/// engine → the dispatcher → the fake agent → events → the box on screen.
#[tokio::test]
async fn mention_dispatches_to_an_acp_agent_and_digits_answer_permission() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(dir.path(), "", None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();

    drive(&mut terminal, &mut app, line("@fake? review red"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| s.contains("● red")).await;
    let screen = text(&terminal);
    assert!(
        screen.contains("╭─ fake · acp · review · fresh"),
        "{screen}"
    );
    assert!(screen.contains("Looks red."), "{screen}");
    assert!(
        !screen.contains("severity:"),
        "the header is stripped: {screen}"
    );
    assert_eq!(box_colour(terminal.backend().buffer(), "fake"), Color::Red);

    // A permission request: the box asks, the digit answers.
    drive(&mut terminal, &mut app, line("@fake permission"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("press 1-3 to answer")
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
        s.contains("permitted")
    })
    .await;
    // The session is still open on the agent's connection: continued.
    assert!(text(&terminal).contains("continued"), "{}", text(&terminal));

    // Esc cancels the running call.
    drive(&mut terminal, &mut app, line("@fake slow 30"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("working")
    })
    .await;
    drive(&mut terminal, &mut app, vec![key(KeyCode::Esc)], vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("stop reason: cancelled")
    })
    .await;

    // An unknown agent is an error in the transcript; the app goes on.
    drive(&mut terminal, &mut app, line("@nobody hi"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("unknown agent \"nobody\"")
    })
    .await;
    assert!(!app.quitting());
}

/// `@a,b,c? message` sends one review to several agents as a batch: their
/// boxes are grouped under a quorum header tinted with the worst verdict.
#[tokio::test]
async fn mention_of_several_agents_runs_a_review_quorum() {
    let dir = tempfile::tempdir().unwrap();
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let extra: String = [("rev-a", "red"), ("rev-b", "green"), ("rev-c", "red")]
        .iter()
        .map(|(name, verdict)| {
            format!("\n[agents.{name}]\ncommand = {fake:?}\nargs = [\"--review\", \"{verdict}\"]\n")
        })
        .collect();
    let (_session, mut app, mut ev_rx) =
        live_session(dir.path(), &extra, None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    drive(
        &mut terminal,
        &mut app,
        line("@rev-a,rev-b,rev-c? check the change"),
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("┏━ quorum")
    })
    .await;
    let buf = terminal.backend().buffer().clone();
    let screen = rows(&buf).join("\n");
    assert!(
        screen.contains(
            "┏━ quorum ● red · 2 of 3 · split: rev-a ● red · rev-b ● green · rev-c ● red"
        ),
        "{screen}"
    );
    let (x, y) = find(&buf, "┏━ quorum").unwrap();
    assert_eq!(buf[(x, y)].fg, Color::Red);
    assert_eq!(buf[(x + 3, y)].fg, Color::Red, "quorum");
    for (agent, colour) in [
        ("rev-a", Color::Red),
        ("rev-b", Color::Green),
        ("rev-c", Color::Red),
    ] {
        assert_eq!(box_colour(&buf, agent), colour, "{agent}");
    }
    assert!(screen.contains("Looks green."), "{screen}");
    // The one message went to each of them.
    assert_eq!(screen.matches("› check the change").count(), 3, "{screen}");
}

/// The scripted model driving the whole app: an internal sub-agent that
/// reads a real file, a background review on the fake agent whose report is
/// delivered to the model by itself, and a cancelled turn.
#[tokio::test]
async fn scripted_chat_drives_the_app() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "the answer is 42\n").unwrap();
    let (_session, mut app, mut ev_rx) = scripted(
        dir.path(),
        serde_json::json!([
            {"tool_calls": [{"name": "subagent", "arguments": {"input": "What do the notes say?"}}]},
            {"text": "Reading.", "tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
            {"text": "The notes say **42**."},
            {"text": "Your notes say 42."},
            {"text": "Started a review.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "review yellow", "code_review": true, "run_in_background": true}}]},
            {"text": "It runs in the background."},
            {"text": "The background review came back yellow."},
            {"delay_ms": 30000, "text": "never shown"}
        ]),
    );
    let mut terminal = Terminal::new(TestBackend::new(100, 40)).unwrap();

    drive(
        &mut terminal,
        &mut app,
        line("what do my notes say?"),
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("Your notes say 42.")
    })
    .await;
    let screen = text(&terminal);
    assert!(screen.contains("╭─ internal ─"), "{screen}");
    assert!(
        screen.contains("The notes say 42."),
        "the internal agent's final report: {screen}"
    );
    assert!(screen.contains("1 tool call"), "{screen}");

    drive(
        &mut terminal,
        &mut app,
        line("review it in the background"),
        vec![],
    )
    .await;
    // The report comes back and the idle chat answers it by itself.
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("The background review came back yellow.")
    })
    .await;
    let buf = terminal.backend().buffer().clone();
    let screen = rows(&buf).join("\n");
    assert!(
        screen.contains("(fake) finished ● yellow — reported to the"),
        "{screen}"
    );
    assert_eq!(box_colour(&buf, "fake"), Color::Yellow);
    assert!(screen.contains("done · yellow"), "the side panel: {screen}");

    // A slow turn, cancelled with Esc.
    drive(&mut terminal, &mut app, line("one more"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("› one more") && s.contains("chat working (Esc cancels)")
    })
    .await;
    drive(&mut terminal, &mut app, vec![key(KeyCode::Esc)], vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("turn cancelled")
    })
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        !s.contains("chat working")
    })
    .await;
    assert!(!text(&terminal).contains("never shown"));
}

#[tokio::test]
async fn slash_commands() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(
        dir.path(),
        "description = \"the fake\"\n",
        None,
        Permissions::Deny,
        None,
    );
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    // The session opens with what it runs with, the welcome notice and the
    // chats `/model` offers.
    for _ in 0..3 {
        let e = tokio::time::timeout(std::time::Duration::from_secs(20), ev_rx.recv())
            .await
            .expect("the session's first events within 20 s")
            .unwrap();
        drive(&mut terminal, &mut app, vec![], vec![e]).await;
    }

    async fn say(
        terminal: &mut Terminal<TestBackend>,
        app: &mut App,
        ev_rx: &mut mpsc::UnboundedReceiver<Stamped>,
        typed: &str,
        expect: &str,
    ) {
        drive(terminal, app, line(typed), vec![]).await;
        // The model's context and the chats offered (not drawn) are
        // skipped: what shows is next.
        let e = loop {
            let e = tokio::time::timeout(std::time::Duration::from_secs(10), ev_rx.recv())
                .await
                .unwrap()
                .unwrap();
            let unseen = matches!(
                e.event,
                Event::ChatReset | Event::ChatMessage { .. } | Event::ModelChoices { .. }
            );
            if !unseen {
                break e;
            }
        };
        let shown = format!("{:?}", e.event);
        assert!(shown.contains(expect), "{typed}: {shown}");
        drive(terminal, app, vec![], vec![e]).await;
    }
    say(
        &mut terminal,
        &mut app,
        &mut ev_rx,
        "/help",
        "Commands: /agents",
    )
    .await;
    say(
        &mut terminal,
        &mut app,
        &mut ev_rx,
        "/agents",
        "Agents: fake (the fake)",
    )
    .await;
    say(
        &mut terminal,
        &mut app,
        &mut ev_rx,
        "/tasks",
        "No background tasks.",
    )
    .await;
    say(
        &mut terminal,
        &mut app,
        &mut ev_rx,
        "/model",
        "No chat in this session",
    )
    .await;
    say(
        &mut terminal,
        &mut app,
        &mut ev_rx,
        "/new",
        "New conversation",
    )
    .await;
    say(
        &mut terminal,
        &mut app,
        &mut ev_rx,
        "/cancel t9",
        "no running task or call \\\"t9\\\"",
    )
    .await;
    say(
        &mut terminal,
        &mut app,
        &mut ev_rx,
        "/bogus",
        "unknown command /bogus",
    )
    .await;
    say(&mut terminal, &mut app, &mut ev_rx, "hello", "UserMessage").await;
    let welcome = tokio::time::timeout(std::time::Duration::from_secs(10), ev_rx.recv())
        .await
        .unwrap()
        .unwrap();
    // The long notice was told at the start: a plain message gets one line.
    assert!(
        matches!(&welcome.event, Event::Notice { text, .. } if text.starts_with("No chat model: nobody answers plain messages"))
    );

    // /record starts a transcript from now on.
    let record = dir.path().join("rec.jsonl");
    say(
        &mut terminal,
        &mut app,
        &mut ev_rx,
        &format!("/record {}", record.display()),
        &format!("recording to {}", record.display()),
    )
    .await;
    say(&mut terminal, &mut app, &mut ev_rx, "/help", "Commands:").await;
    let recorded = quorum::transcript::load(&record).unwrap().events;
    assert_eq!(recorded.len(), 2, "{recorded:?}");
    assert!(
        matches!(&recorded[1].event, Event::Notice { text, .. } if text.starts_with("Commands:"))
    );
    say(
        &mut terminal,
        &mut app,
        &mut ev_rx,
        "/record other.jsonl",
        "already recording to",
    )
    .await;
}

/// A background task's box and its side-panel entry show the same tool
/// count, through the real dispatcher and the fake agent: both copy the
/// task board's snapshot (they used to count on their own and disagree).
#[tokio::test]
async fn box_and_panel_show_the_same_tool_count() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(dir.path(), "", None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    drive(&mut terminal, &mut app, line("@fake! tools"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("Final answer.") && s.contains("done ·")
    })
    .await;
    let screen = text(&terminal);
    assert!(screen.contains("2 tool calls ─╯"), "the box: {screen}");
    assert!(screen.contains("done · 2 tools"), "the panel: {screen}");
    assert!(
        screen.contains("t1 fake"),
        "the first background task is t1: {screen}"
    );
}

/// Esc cancels an agent that never answers `initialize`: the box closes as
/// cancelled and the app goes on.
#[tokio::test]
async fn esc_cancels_a_stuck_start() {
    let dir = tempfile::tempdir().unwrap();
    let extra = format!(
        "\n[agents.stuck]\ncommand = {:?}\nargs = [\"--hang-initialize\"]\n",
        env!("CARGO_BIN_EXE_quorum-fake-agent")
    );
    let (_session, mut app, mut ev_rx) =
        live_session(dir.path(), &extra, None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    drive(&mut terminal, &mut app, line("@stuck hello"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("╭─ stuck")
    })
    .await;
    drive(&mut terminal, &mut app, vec![key(KeyCode::Esc)], vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("stop reason: cancelled")
    })
    .await;
    assert!(
        text(&terminal).contains("stuck: cancelled while starting"),
        "{}",
        text(&terminal)
    );
    // Another agent still answers.
    drive(
        &mut terminal,
        &mut app,
        line("@fake echo still here"),
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("│ still here")
    })
    .await;
}

/// Events as the engine emits them: each run through a task board, its
/// snapshot following it, at the given times.
fn with_board(events: Vec<(u64, Event)>) -> Vec<Stamped> {
    let mut board = quorum::runtime::board::Board::new();
    let mut out = Vec::new();
    for (t, event) in events {
        let stamped = Stamped::new(t, event);
        let snapshot = board.observe(&stamped);
        out.push(stamped);
        if let Some(s) = snapshot {
            out.push(Stamped::new(t, s));
        }
    }
    out
}

fn usage(used: u64, size: Option<u64>, cost: Option<f64>) -> Activity {
    Activity::Usage {
        usage: quorum::event::Usage {
            used,
            size,
            cost: cost.map(|amount| quorum::event::Cost {
                amount,
                currency: "USD".into(),
                estimated: false,
            }),
        },
    }
}

/// Context and cost on each box's bottom border, the review quorum's total
/// on its header, and the session's in the status line and side panel. A
/// resumed session's cumulative cost counts once: claude's two calls on
/// session s1 cost $0.10 in all, not $0.14.
#[test]
fn usage_on_boxes_and_totals_in_status_line_panel_and_quorum() {
    use quorum::event::{AgentRef, Quorum, ReviewerVerdict, SessionKind, Severity, build};
    let started = |call: &str, agent: AgentRef, input: &str, task: Option<&str>, batch: bool| {
        let mut started = build::started(call, agent).input(input);
        if let Some(task) = task {
            started = started.background(task);
        }
        if batch {
            started = started.review().batch("b1");
        }
        started.event()
    };
    let session = |call: &str, kind, id: &str| build::session(call, kind).id(id).event();
    let act = |call: &str, activity| build::activity(call, activity);
    let text = |call: &str, t: &str| build::chunk(call, t);
    let finished = |call: &str, severity: Option<Severity>| {
        build::finished(call, "Done.").severity(severity).event()
    };
    let claude = || AgentRef::Acp("claude".into());
    let verdict = |agent: &str, call: &str| ReviewerVerdict {
        agent: agent.into(),
        call_id: Some(call.into()),
        severity: Some(Severity::Green),
        failed: false,
    };
    let events = with_board(vec![
        (
            0,
            started("c1", claude(), "explain the change", None, false),
        ),
        (100, session("c1", SessionKind::Fresh, "s1")),
        (900, act("c1", usage(12_300, Some(200_000), Some(0.04)))),
        (1_000, finished("c1", None)),
        (
            2_000,
            started("c2", claude(), "and the tests?", None, false),
        ),
        (2_100, session("c2", SessionKind::Resumed, "s1")),
        (2_900, text("c2", "Reading the tests.\n")),
        // Nearly the whole window: the context shows in the warning colour.
        (3_000, act("c2", usage(171_000, Some(200_000), Some(0.10)))),
        (
            4_000,
            started("c3", AgentRef::Internal, "count the files", None, false),
        ),
        (4_500, act("c3", usage(930, None, None))),
        (5_000, finished("c3", None)),
        (6_000, build::batch_started("b1", 2).review().event()),
        (6_000, started("r1", claude(), "review", Some("t1"), true)),
        (6_000, session("r1", SessionKind::Fresh, "s2")),
        (
            6_000,
            started(
                "r2",
                AgentRef::Acp("codex".into()),
                "review",
                Some("t2"),
                true,
            ),
        ),
        (6_000, session("r2", SessionKind::Fresh, "s3")),
        (7_000, act("r1", usage(8_000, Some(200_000), Some(0.02)))),
        (7_500, act("r2", usage(20_500, Some(400_000), Some(0.03)))),
        (8_000, finished("r1", Some(Severity::Green))),
        (8_000, finished("r2", Some(Severity::Green))),
        (
            8_000,
            Event::ReviewQuorum {
                batch_id: "b1".into(),
                quorum: Quorum::of(vec![verdict("claude", "r1"), verdict("codex", "r2")]),
                diff: None,
            },
        ),
        (
            8_000,
            build::batch_finished("b1", 2)
                .worst(Severity::Green)
                .event(),
        ),
    ]);
    let buf = screen(&events, 140, 50, Some(true));
    let screen = rows(&buf).join("\n");
    insta::assert_snapshot!("usage_boxes_and_totals", screen);
    // The colour says how full the context is.
    let colour = |needle: &str| {
        let (x, y) = find(&buf, needle).unwrap_or_else(|| panic!("no {needle}:\n{screen}"));
        buf[(x, y)].fg
    };
    assert_eq!(colour("171k / 200k tokens"), Color::Yellow, "nearly full");
    assert_eq!(colour("12.3k / 200k tokens"), Color::DarkGray);
    assert_eq!(colour("930 tokens"), Color::DarkGray);
}

/// The fake agent's `usage_update`s reach the box through the real
/// dispatcher; a second call resumes its session, whose cumulative cost
/// the session total counts once; the recorded transcript replays them.
#[tokio::test]
async fn usage_updates_from_an_agent_reach_the_screen_and_the_replay() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("rec.jsonl");
    let (session, mut app, mut ev_rx) =
        live_session(dir.path(), "", None, Permissions::Ask, Some(record.clone()));
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    drive(
        &mut terminal,
        &mut app,
        line("@fake usage 12300 200000 0.04"),
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("12.3k / 200k tokens · $0.04 ─╯")
    })
    .await;
    // The call ended (its session remembered) before the next is sent: a
    // call sent while it still runs gets a fresh session, and the wait for
    // "continued" below timed out under load.
    until_event(&mut terminal, &mut app, &mut ev_rx, |e| {
        matches!(e, Event::SubagentFinished { .. })
    })
    .await;
    // The same session, continued: $0.10 is its cost so far, not this call's.
    drive(
        &mut terminal,
        &mut app,
        line("@fake usage 30000 200000 0.10"),
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("30k / 200k tokens · $0.10 ─╯") && s.contains("· continued")
    })
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("agents Σ 30k tokens · $0.10")
    })
    .await;
    let screen = text(&terminal);
    assert!(
        screen.contains("12.3k / 200k tokens · $0.04 ─╯"),
        "the first box keeps its figures: {screen}"
    );
    assert!(!screen.contains("$0.14"), "counted once: {screen}");
    drop(session);
    drop(app);

    let replayed = rows(&screen_of(&events(&record), 120, 40)).join("\n");
    assert!(
        replayed.contains("30k / 200k tokens · $0.10 ─╯"),
        "{replayed}"
    );
    assert!(
        replayed.contains("agents Σ 30k tokens · $0.10"),
        "{replayed}"
    );
}

fn screen_of(events: &[Stamped], cols: u16, rows: u16) -> ratatui::buffer::Buffer {
    screen(events, cols, rows, Some(false))
}

/// The internal agent's context is its provider's token usage: the last
/// request's input and output tokens, with no window and no cost.
#[tokio::test]
async fn the_internal_agents_box_shows_its_models_token_usage() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = scripted(
        dir.path(),
        serde_json::json!([
            {"tool_calls": [{"name": "subagent", "arguments": {"input": "Say hi."}}]},
            {"text": "Listing.", "tool_calls": [{"name": "list", "arguments": {"path": "."}}],
             "usage": {"input_tokens": 1200, "output_tokens": 40}},
            {"text": "Hi.", "usage": {"input_tokens": 1500, "output_tokens": 20}},
            {"text": "It said hi.", "usage": {"input_tokens": 99999, "output_tokens": 1}}
        ]),
    );
    let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    drive(&mut terminal, &mut app, line("greet"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("It said hi.")
    })
    .await;
    let screen = text(&terminal);
    // 1500 + 20 from its last request; the chat model's own usage is not
    // a sub-agent's.
    assert!(screen.contains("1.5k tokens · 1 tool call ─╯"), "{screen}");
    assert!(screen.contains("agents Σ 1.5k tokens"), "{screen}");
}

/// A nested sub-agent: the fake agent announces a child session
/// (`subagent_update`), streams the child's own updates and has the child
/// ask a permission. Through the real dispatcher, the child is a box
/// inside its call's box, and the prompt names the child that asks.
#[tokio::test]
async fn a_child_session_is_a_nested_box_and_its_permission_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(dir.path(), "", None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    drive(&mut terminal, &mut app, line("@fake nested"), vec![]).await;

    // Every event the screen got, for a still replay of the same moment.
    let mut seen: Vec<Stamped> = Vec::new();
    let deadline = Instant::now() + std::time::Duration::from_secs(20);
    while !text(&terminal).contains("press 1-2 to answer") {
        assert!(Instant::now() < deadline, "timed out:\n{}", text(&terminal));
        let e = tokio::time::timeout(std::time::Duration::from_secs(20), ev_rx.recv())
            .await
            .unwrap()
            .unwrap();
        seen.push(e.clone());
        drive(&mut terminal, &mut app, vec![], vec![e]).await;
    }
    let screen = text(&terminal);
    assert!(
        screen.contains("permission: scout: Delete target/"),
        "the prompt names the child: {screen}"
    );
    // The child's box is drawn inside the call's box, its rows within the
    // call's borders.
    let rows: Vec<&str> = screen.lines().collect();
    let top = rows
        .iter()
        .position(|r| r.contains("↳ scout"))
        .unwrap_or_else(|| panic!("a child box: {screen}"));
    assert!(
        rows[top]
            .trim_start()
            .starts_with("│ ╭─ ↳ scout · Ctrl+X cancels"),
        "{}",
        rows[top]
    );
    assert!(rows[top].contains("? needs you"), "{}", rows[top]);
    let body: Vec<&str> = rows[top + 1..]
        .iter()
        .take_while(|r| !r.contains("╰"))
        .copied()
        .collect();
    assert!(
        body.iter().any(|r| r.contains("│ │ looks for the tests")),
        "{body:?}"
    );
    assert!(
        body.iter()
            .any(|r| r.contains("asks permission: Delete target/")),
        "the child's own box says it asks: {body:?}"
    );
    assert!(
        !body.iter().any(|r| r.contains("Delegating.")),
        "the call's own text stays out of the child's box: {body:?}"
    );

    // The same events, replayed still (times set to 0, so the spinner and
    // clocks hold): the nested box and the attributed prompt.
    let still: Vec<Stamped> = seen
        .iter()
        .map(|e| Stamped::new(0, e.event.clone()))
        .collect();
    let nested = rows_of(&common::screen(&still, 100, 30, Some(false)));
    insta::assert_snapshot!("nested_child_asks_permission", nested);

    // The answer goes to the child; its box shows the rest of its work.
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Char('1'))],
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("nested done: permitted")
    })
    .await;
    let screen = text(&terminal);
    assert!(screen.contains("child permitted"), "{screen}");
    assert!(screen.contains("✓ idle"), "{screen}");
    assert!(screen.contains("permission Allow once"), "{screen}");
}

fn rows_of(buf: &ratatui::buffer::Buffer) -> String {
    rows(buf).join("\n")
}

/// Ctrl+X cancels the newest child whose agent allows it: only the
/// child's work stops (its permission request is answered cancelled); the
/// call goes on to the end of its turn.
#[tokio::test]
async fn ctrl_x_cancels_a_child_session_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(dir.path(), "", None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    drive(&mut terminal, &mut app, line("@fake nested"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("press 1-2 to answer")
    })
    .await;
    drive(&mut terminal, &mut app, vec![ctrl('x')], vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("nested done: cancelled")
    })
    .await;
    let screen = text(&terminal);
    assert!(screen.contains("child cancelled"), "{screen}");
    assert!(screen.contains("permission cancelled"), "{screen}");
    assert!(screen.contains("cancel asked for scout"), "{screen}");
    assert!(
        !screen.contains("stop reason: cancelled"),
        "the call itself ends its turn: {screen}"
    );
}

/// The processes whose working directory is `dir`: agents started there.
fn agents_in(dir: &std::path::Path) -> Vec<u32> {
    let dir = dir.canonicalize().unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir))
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.starts_with("quorum-fake"))
        })
        .collect()
}

/// The highest `tick N` on the screen.
fn last_tick(screen: &str) -> u32 {
    screen
        .split("tick ")
        .skip(1)
        .filter_map(|rest| {
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .max()
        .unwrap_or(0)
}

/// An agent that ignores `session/cancel`: Esc shows "cancelling…" at once
/// and its output stops showing; a second Esc ends the call and stops the
/// agent, instead of the 10 s grace (before, it kept streaming for the full
/// grace with nothing shown).
#[tokio::test]
async fn esc_on_an_agent_that_ignores_cancel_says_cancelling_and_esc_again_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(dir.path(), "", None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    drive(&mut terminal, &mut app, line("@fake deaf"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| last_tick(s) >= 3).await;
    assert_eq!(agents_in(dir.path()).len(), 1);

    drive(&mut terminal, &mut app, vec![key(KeyCode::Esc)], vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("⊘ cancelling…") && s.contains("Esc again ends it now")
    })
    .await;
    // The agent goes on writing; none of it is shown.
    let shown = last_tick(&text(&terminal));
    let until_then = Instant::now() + std::time::Duration::from_millis(600);
    while Instant::now() < until_then {
        if let Ok(Some(e)) =
            tokio::time::timeout(std::time::Duration::from_millis(50), ev_rx.recv()).await
        {
            drive(&mut terminal, &mut app, vec![], vec![e]).await;
        }
    }
    assert_eq!(last_tick(&text(&terminal)), shown, "{}", text(&terminal));
    assert!(text(&terminal).contains("⊘ cancelling…"));

    drive(&mut terminal, &mut app, vec![key(KeyCode::Esc)], vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("stop reason: cancelled")
    })
    .await;
    assert!(
        !text(&terminal).contains("cancelling…"),
        "{}",
        text(&terminal)
    );
    // Stopped, not left streaming into the void: the grace path would
    // leave it running for its whole minute.
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    while !agents_in(dir.path()).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the agent still runs after the second Esc"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A message with a byte that is not UTF-8 costs that byte; the box says
/// so, and the turn goes on (before: the connection ended, "exited with
/// code 0", the cause only in the log).
#[tokio::test]
async fn a_bad_byte_shows_a_notice_in_the_box_and_the_turn_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(dir.path(), "", None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(120, 30)).unwrap();
    drive(&mut terminal, &mut app, line("@fake badbyte"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| s.contains("✓")).await;
    let screen = text(&terminal);
    let inside_box = screen
        .lines()
        .filter(|l| l.contains("│"))
        .any(|l| l.contains("fake sent a message with bytes that are not UTF-8"));
    assert!(inside_box, "{screen}");
    assert!(screen.contains("caf\u{fffd} after"), "{screen}");
}

/// Without a chat model, the long notice is shown once, at the start;
/// each plain message then gets one line (it used to get all 8 again).
#[tokio::test]
async fn the_no_model_notice_is_told_in_full_once() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(dir.path(), "", None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(120, 50)).unwrap();
    let mut keys = line("hello");
    keys.extend(line("anyone there?"));
    drive(&mut terminal, &mut app, keys, vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.matches("No chat model: nobody answers plain messages")
            .count()
            == 2
    })
    .await;
    let screen = text(&terminal);
    assert_eq!(
        screen.matches("No chat model is configured").count(),
        1,
        "{screen}"
    );
    assert!(screen.contains("› anyone there?"), "{screen}");
}

// The composer: wrapping and growth, line keys, history, completion.

fn alt_enter() -> Input {
    Input::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT))
}

/// The composer's rows as shown: between its top border and the status
/// line, each without its two columns of prompt; and the screen row of
/// the first.
fn composer_rows(terminal: &Terminal<TestBackend>) -> (u16, Vec<String>) {
    let rows = rows(terminal.backend().buffer());
    let status = rows.len() - 1;
    let border = (0..status)
        .rev()
        .find(|&y| rows[y].starts_with('─'))
        .expect("the composer's top border");
    let shown = rows[border + 1..status]
        .iter()
        .map(|r| r.chars().skip(2).collect())
        .collect();
    ((border + 1) as u16, shown)
}

/// Words `w000 w001 …`, `n` of them, one space between.
fn words(n: usize) -> String {
    (0..n)
        .map(|i| format!("w{i:03}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test]
async fn a_long_draft_wraps_in_a_growing_composer_with_the_cursor_after_it() {
    let (ops_tx, _ops_rx) = mpsc::unbounded_channel();
    let mut app = App::live(ops_tx, Instant::now());
    let mut terminal = Terminal::new(TestBackend::new(60, 30)).unwrap();
    drive(&mut terminal, &mut app, vec![], vec![]).await;
    let (first, shown) = composer_rows(&terminal);
    assert_eq!(shown.len(), 1, "an empty composer is one row");
    assert_eq!(first, 28);
    // 120 characters: cut at the edge before, wrapped between words now.
    let draft = words(24);
    assert_eq!(draft.chars().count(), 119);
    drive(&mut terminal, &mut app, chars(&format!("{draft}!")), vec![]).await;
    let (first, shown) = composer_rows(&terminal);
    assert_eq!(
        shown.iter().map(|r| r.trim_end()).collect::<Vec<_>>(),
        [
            "w000 w001 w002 w003 w004 w005 w006 w007 w008 w009 w010",
            "w011 w012 w013 w014 w015 w016 w017 w018 w019 w020 w021",
            "w022 w023!"
        ],
        "the whole draft, wrapped"
    );
    assert_eq!(first, 26, "the composer grew upwards");
    let screen = rows_of_screen(&terminal);
    assert!(screen[26].starts_with("› w000"), "{}", screen[26]);
    // The cursor is on the terminal, after the last character.
    assert!(terminal.backend().cursor_visible());
    assert_eq!(
        terminal.backend().cursor_position(),
        ratatui::layout::Position::new(2 + 10, 28)
    );
}

#[tokio::test]
async fn a_draft_taller_than_a_third_of_the_screen_scrolls_to_the_cursor() {
    let (ops_tx, mut ops_rx) = mpsc::unbounded_channel();
    let mut app = App::live(ops_tx, Instant::now());
    let mut terminal = Terminal::new(TestBackend::new(60, 30)).unwrap();
    // 15 rows of 11 words; a third of 30 rows is 10: a border and 9 rows.
    let draft = words(165);
    drive(&mut terminal, &mut app, chars(&draft), vec![]).await;
    let (first, shown) = composer_rows(&terminal);
    assert_eq!((first, shown.len()), (20, 9), "{shown:?}");
    assert!(
        shown[8].starts_with("w154 "),
        "the last row shows: {shown:?}"
    );
    assert!(shown[8].trim_end().ends_with("w164"), "{shown:?}");
    let screen = rows_of_screen(&terminal);
    assert!(
        screen[20].starts_with("↑ w066"),
        "rows hidden above: {}",
        screen[20]
    );
    let cursor = terminal.backend().cursor_position();
    assert_eq!((cursor.x, cursor.y), (2 + 54, 28), "after the last word");
    // ↑ moves the cursor up a row at a time; the rows follow it.
    let ups = vec![key(KeyCode::Up); 10];
    drive(&mut terminal, &mut app, ups, vec![]).await;
    let (_, shown) = composer_rows(&terminal);
    assert!(shown[0].starts_with("w044 "), "{shown:?}");
    let cursor = terminal.backend().cursor_position();
    assert_eq!((cursor.x, cursor.y), (2 + 54, 20), "on the top row shown");
    let screen = rows_of_screen(&terminal);
    assert!(
        screen[28].starts_with("↓ w132"),
        "rows hidden below: {}",
        screen[28]
    );
    // Up to the first row: the prompt shows again.
    drive(&mut terminal, &mut app, vec![key(KeyCode::Up); 4], vec![]).await;
    let (_, shown) = composer_rows(&terminal);
    assert!(shown[0].starts_with("w000 "), "{shown:?}");
    assert!(rows_of_screen(&terminal)[20].starts_with("› w000"));
    // Typing there goes in at the cursor; Enter sends all of it.
    drive(&mut terminal, &mut app, chars("+"), vec![]).await;
    drive(&mut terminal, &mut app, vec![key(KeyCode::Enter)], vec![]).await;
    let Op::Submit(sent) = ops_rx.try_recv().unwrap() else {
        panic!("a message")
    };
    assert_eq!(sent.replace('+', ""), draft);
    assert_eq!(sent.find('+'), Some(54));
    let (_, shown) = composer_rows(&terminal);
    assert_eq!(shown.len(), 1, "the composer shrinks back: {shown:?}");
}

fn rows_of_screen(terminal: &Terminal<TestBackend>) -> Vec<String> {
    rows(terminal.backend().buffer())
}

#[tokio::test]
async fn line_keys_act_on_the_line_of_a_draft_of_several() {
    let (ops_tx, mut ops_rx) = mpsc::unbounded_channel();
    let mut app = App::live(ops_tx, Instant::now());
    let mut terminal = Terminal::new(TestBackend::new(60, 20)).unwrap();
    let mut keys = chars("first line");
    keys.push(alt_enter());
    keys.extend(chars("second line"));
    keys.extend(vec![key(KeyCode::Left); 4]);
    // Ctrl+U: the start of this line, not the whole draft.
    keys.push(ctrl('u'));
    drive(&mut terminal, &mut app, keys, vec![]).await;
    let (_, shown) = composer_rows(&terminal);
    assert_eq!(shown, ["first line", "line"]);
    // Ctrl+A, Ctrl+E and Ctrl+K too; Home types at the start of the line.
    let mut keys = vec![ctrl('a')];
    keys.extend(chars("a "));
    keys.extend([key(KeyCode::Up), ctrl('e'), ctrl('w')]);
    keys.extend(chars("row"));
    keys.extend([key(KeyCode::Home), ctrl('k')]);
    drive(&mut terminal, &mut app, keys, vec![]).await;
    let (_, shown) = composer_rows(&terminal);
    assert_eq!(shown, ["", "a line"]);
    let cursor = terminal.backend().cursor_position();
    assert_eq!(
        (cursor.x, cursor.y),
        (2, 17),
        "at the start of the empty line"
    );
    drive(&mut terminal, &mut app, vec![key(KeyCode::Enter)], vec![]).await;
    assert_eq!(ops_rx.try_recv().unwrap(), Op::Submit("\na line".into()));
}

#[tokio::test]
async fn up_and_down_recall_messages_sent_before_even_in_a_new_session() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("state/history.jsonl");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let (ops_tx, mut ops_rx) = mpsc::unbounded_channel();
    let mut app = App::live(ops_tx, Instant::now());
    app.set_history(&file);
    let mut terminal = Terminal::new(TestBackend::new(60, 20)).unwrap();
    let mut keys = line("one");
    keys.extend(chars("two"));
    keys.push(alt_enter());
    keys.extend(line("lines"));
    keys.extend(chars("draft"));
    drive(&mut terminal, &mut app, keys, vec![]).await;
    assert_eq!(ops_rx.try_recv().unwrap(), Op::Submit("one".into()));
    assert_eq!(ops_rx.try_recv().unwrap(), Op::Submit("two\nlines".into()));
    let shown = |terminal: &Terminal<TestBackend>| composer_rows(terminal).1;
    // ↑ on the draft's first row: the newest message, the cursor at its end.
    drive(&mut terminal, &mut app, vec![key(KeyCode::Up)], vec![]).await;
    assert_eq!(shown(&terminal), ["two", "lines"]);
    // ↑ goes up its rows first, then to the message before.
    drive(&mut terminal, &mut app, vec![key(KeyCode::Up)], vec![]).await;
    assert_eq!(shown(&terminal), ["two", "lines"]);
    drive(&mut terminal, &mut app, vec![key(KeyCode::Up)], vec![]).await;
    assert_eq!(shown(&terminal), ["one"]);
    // Nothing older: it stays.
    drive(&mut terminal, &mut app, vec![key(KeyCode::Up)], vec![]).await;
    assert_eq!(shown(&terminal), ["one"]);
    // ↓ comes back, and past the newest gives the draft back.
    drive(&mut terminal, &mut app, vec![key(KeyCode::Down)], vec![]).await;
    assert_eq!(shown(&terminal), ["two", "lines"]);
    drive(&mut terminal, &mut app, vec![key(KeyCode::Down)], vec![]).await;
    assert_eq!(shown(&terminal), ["draft"]);
    // The file keeps them, one JSON string a line.
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text, "\"one\"\n\"two\\nlines\"\n");
    // A new session of the same person recalls them.
    let (ops_tx, mut ops_rx) = mpsc::unbounded_channel();
    let mut app = App::live(ops_tx, Instant::now());
    app.set_history(&file);
    let mut terminal = Terminal::new(TestBackend::new(60, 20)).unwrap();
    let keys = vec![key(KeyCode::Up), key(KeyCode::Up), key(KeyCode::Up)];
    drive(&mut terminal, &mut app, keys, vec![]).await;
    assert_eq!(shown(&terminal), ["one"]);
    drive(&mut terminal, &mut app, vec![key(KeyCode::Enter)], vec![]).await;
    assert_eq!(ops_rx.try_recv().unwrap(), Op::Submit("one".into()));
}

#[tokio::test]
async fn tab_completes_agent_names_and_commands() {
    let dir = tempfile::tempdir().unwrap();
    // The configured agent, and two more as the session names them.
    let (_session, mut app, mut ev_rx) =
        live_session(dir.path(), "", None, Permissions::Deny, None);
    let mut terminal = Terminal::new(TestBackend::new(100, 20)).unwrap();
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("· fake ·")
    })
    .await;
    let tab = || key(KeyCode::Tab);
    let mut keys = chars("@f");
    keys.push(tab());
    drive(&mut terminal, &mut app, keys, vec![]).await;
    assert_eq!(composer_rows(&terminal).1, ["@fake"]);
    let cursor = terminal.backend().cursor_position();
    assert_eq!(cursor.x, 2 + 6, "after the name and a space");
    drive(&mut terminal, &mut app, vec![ctrl('c')], vec![]).await;

    let info = Stamped {
        t: 0,
        event: Event::SessionInfo {
            model: None,
            agents: vec!["claude".into(), "codex".into(), "fake".into()],
        },
    };
    let mut keys = chars("@c");
    keys.push(tab());
    drive(&mut terminal, &mut app, keys, vec![info]).await;
    let screen = rows_of_screen(&terminal);
    let (first, shown) = composer_rows(&terminal);
    assert_eq!(shown, ["@c"]);
    assert!(
        screen[first as usize - 1].contains("Tab: @claude  @codex"),
        "the choices: {screen:?}"
    );
    drive(&mut terminal, &mut app, vec![tab()], vec![]).await;
    assert_eq!(composer_rows(&terminal).1, ["@claude"]);
    drive(&mut terminal, &mut app, vec![tab()], vec![]).await;
    assert_eq!(composer_rows(&terminal).1, ["@codex"]);
    // Typing on ends the choosing.
    drive(&mut terminal, &mut app, chars(",f"), vec![]).await;
    assert!(!text(&terminal).contains("Tab:"), "{}", text(&terminal));
    drive(&mut terminal, &mut app, vec![tab()], vec![]).await;
    assert_eq!(composer_rows(&terminal).1, ["@codex,fake"]);
    drive(&mut terminal, &mut app, vec![ctrl('c')], vec![]).await;

    // Commands, first in the draft.
    let mut keys = chars("/ag");
    keys.push(tab());
    drive(&mut terminal, &mut app, keys, vec![]).await;
    assert_eq!(composer_rows(&terminal).1, ["/agents"]);
    drive(&mut terminal, &mut app, vec![key(KeyCode::Enter)], vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("Agents: fake")
    })
    .await;
    let mut keys = chars("/m");
    keys.push(tab());
    drive(&mut terminal, &mut app, keys, vec![]).await;
    let screen = text(&terminal);
    assert!(
        screen.contains("Tab: /merge  /mode  /model  /msg"),
        "{screen}"
    );
    let mut keys = vec![ctrl('c')];
    keys.extend(chars("/x"));
    keys.push(tab());
    drive(&mut terminal, &mut app, keys, vec![]).await;
    assert!(text(&terminal).contains("Tab: no command starts with /x"));
}

/// A chat on a scripted model, in the app loop.
fn scripted(
    dir: &std::path::Path,
    turns: serde_json::Value,
) -> (Session, App, mpsc::UnboundedReceiver<Stamped>) {
    use quorum::llm::script::ScriptModel;
    let turns: Vec<quorum::llm::script::Turn> = serde_json::from_value(turns).unwrap();
    let model: std::sync::Arc<dyn quorum::llm::Model> =
        std::sync::Arc::new(ScriptModel::new("chat.json", turns));
    live_session(dir, "", Some(model), Permissions::Ask, None)
}

/// Single newlines are line breaks, as the model wrote them (a file list
/// used to run together as `a.py b.py c.py`).
#[tokio::test]
async fn text_keeps_its_single_line_breaks() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = scripted(
        dir.path(),
        serde_json::json!([{"text": "The files:\na.py\nb.py\nc.py"}]),
    );
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
    drive(&mut terminal, &mut app, line("list them"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| s.contains("c.py")).await;
    let screen = text(&terminal);
    let lines: Vec<&str> = screen.lines().map(str::trim).collect();
    for name in ["a.py", "b.py", "c.py"] {
        assert!(lines.iter().any(|l| l.starts_with(name)), "{screen}");
    }
    assert!(!screen.contains("a.py b.py"), "{screen}");
}

/// A model that writes its call as JSON text: the status line says a call
/// is being written, and how much, then the call runs once (it was written
/// twice, then a made-up result).
#[tokio::test]
async fn a_tool_call_written_as_text_shows_while_written_and_runs_once() {
    let dir = tempfile::tempdir().unwrap();
    let input = format!("echo {}", "all of the notes, please ".repeat(24));
    let call =
        serde_json::json!({"name": "subagent", "arguments": {"agent": "fake", "input": input}})
            .to_string();
    let (_session, mut app, mut ev_rx) = scripted(
        dir.path(),
        serde_json::json!([
            {"text": format!("{call}\n{call}\n{{\"output\": \"made up\"}}")},
            {"text": "The agent echoed the notes."}
        ]),
    );
    let mut terminal = Terminal::new(TestBackend::new(120, 30)).unwrap();
    drive(&mut terminal, &mut app, line("echo my notes"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("chat writing a tool call (")
    })
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("The agent echoed the notes.")
    })
    .await;
    let screen = text(&terminal);
    assert_eq!(screen.matches("╭─ fake").count(), 1, "{screen}");
    assert!(!screen.contains("made up"), "{screen}");
    assert!(!screen.contains("writing a tool call"), "{screen}");
}

/// A model naming an agent that is not there is told, on screen too, that
/// leaving `agent` out runs the internal agent.
#[tokio::test]
async fn an_unknown_agent_error_points_at_the_internal_agent() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = scripted(
        dir.path(),
        serde_json::json!([
            {"tool_calls": [{"name": "subagent", "arguments": {"agent": "subagent", "input": "read"}}]},
            {"text": "I will leave agent out."}
        ]),
    );
    let mut terminal = Terminal::new(TestBackend::new(160, 30)).unwrap();
    drive(&mut terminal, &mut app, line("read my notes"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("I will leave agent out.")
    })
    .await;
    let screen = text(&terminal);
    assert!(screen.contains("unknown agent \"subagent\""), "{screen}");
    assert!(screen.contains("omit `agent`"), "{screen}");
}

/// Issue 35 (5): the internal agent is auto-approved, but not for a file
/// other programs run in the person's own tree (`.envrc`, which direnv
/// runs): its box asks, the file is written only once the person presses
/// `1`, and `2` refuses it.
#[tokio::test]
async fn the_internal_agent_asks_before_writing_a_file_other_programs_run() {
    use quorum::llm::script::ScriptModel;
    for (key, written) in [('2', None), ('1', Some("export EVIL=1\n"))] {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        let turns: Vec<quorum::llm::script::Turn> = serde_json::from_value(serde_json::json!([
            {"tool_calls": [{"name": "subagent", "arguments": {"input": "set up direnv"}}]},
            {"tool_calls": [{"name": "write", "arguments": {"path": ".envrc", "content": "export EVIL=1\n"}}]},
            {"text": "tried"},
            {"text": "The helper is done."}
        ]))
        .unwrap();
        let registry = quorum::acp::registry::Registry::load_only(&{
            let config = dir.join("q.toml");
            std::fs::write(&config, "").unwrap();
            config
        })
        .unwrap();
        // The person's tree as quorum opens it (its own files guarded).
        let root = quorum::runtime::git::root(&dir).unwrap();
        let mut config = quorum::engine::SessionConfig::new(registry, root);
        config.model = Some(std::sync::Arc::new(ScriptModel::new("chat.json", turns)));
        config.permissions = Permissions::Ask;
        let started = Instant::now();
        let (mut session, mut ev_rx) = Session::start(config, started).unwrap();
        let mut app = App::live(session.serve(), started);
        let mut terminal = Terminal::new(TestBackend::new(140, 40)).unwrap();
        drive(&mut terminal, &mut app, line("set up direnv"), vec![]).await;
        until(&mut terminal, &mut app, &mut ev_rx, |s| {
            s.contains("write .envrc? direnv runs it")
        })
        .await;
        assert!(
            !dir.join(".envrc").exists(),
            "written before it was allowed"
        );
        drive(&mut terminal, &mut app, chars(&key.to_string()), vec![]).await;
        until(&mut terminal, &mut app, &mut ev_rx, |s| {
            s.contains("The helper is done.")
        })
        .await;
        assert_eq!(
            std::fs::read_to_string(dir.join(".envrc")).ok().as_deref(),
            written
        );
        session.shutdown();
    }
}
