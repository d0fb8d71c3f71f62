//! The client terminals quorum runs for agents (`terminal/*`), against the
//! fake agent's `term` scenarios: what the agent reads back, what the box
//! shows (live, opened, finished, replayed), confinement to the session
//! directory, the sandbox, and that no command outlives its terminal.

use crate::common;

use std::time::{Duration, Instant};

use common::app::{drive, key, line, live_session, text, until};
use common::shell::{shell, shell_with, text as out_text};
use proptest::strategy::Strategy;
use quorum::agent::Permissions;
use quorum::event::{Activity, Event};
use quorum::tui::state::{CellKind, State};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::KeyCode;

/// Whether bubblewrap is installed (`.ci/run` installs it; the sandbox
/// tests fail without it).
fn bwrap() -> bool {
    quorum::runtime::path::locate("bwrap").is_some()
}

/// How many processes on the machine have an argument exactly `arg`.
fn processes_with(arg: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == arg.as_bytes()))
        })
        .count()
}

/// Waits (up to 20 s) until no process has the argument `arg`.
fn gone(arg: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while processes_with(arg) > 0 {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

#[test]
fn a_command_runs_to_its_end_and_the_agent_reads_its_output_and_exit() {
    let s = shell();
    let o = s.run_unwedged(&[
        "call",
        "--agent",
        "fake",
        "--input",
        "term run echo hi; echo to-stderr >&2; echo env=$FAKE_TERM; pwd; exit 3",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", out_text(&o.stderr));
    let stdout = out_text(&o.stdout);
    let dir = s.dir.path().canonicalize().unwrap();
    assert_eq!(
        stdout,
        format!(
            "exit: 3, signal: none, truncated: false, exit status in output: true\nhi\nto-stderr\nenv=set\n{}\n\n",
            dir.display()
        )
    );
    // The headless progress names the command and how it ended.
    let stderr = out_text(&o.stderr);
    assert!(stderr.contains("fake: $ sh -c 'echo hi;"), "{stderr}");
    assert!(stderr.contains("fake: $ … exit 3"), "{stderr}");
}

#[test]
fn output_over_the_limit_keeps_the_newest_cut_at_a_character_boundary() {
    let s = shell();
    // 1 + 2 + 3 + 1 bytes; the newest 5 begin inside "é".
    let o = s.run_unwedged(&[
        "call",
        "--agent",
        "fake",
        "--input",
        "term run --limit 5 printf 'aé€z'",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", out_text(&o.stderr));
    assert_eq!(
        out_text(&o.stdout),
        "exit: 0, signal: none, truncated: true, exit status in output: true\n€z\n"
    );
    let o = s.run_unwedged(&[
        "call",
        "--agent",
        "fake",
        "--input",
        "term run --limit 100 printf abc",
    ]);
    assert!(
        out_text(&o.stdout).starts_with("exit: 0, signal: none, truncated: false"),
        "{}",
        out_text(&o.stdout)
    );
}

#[test]
fn a_cwd_outside_the_session_directory_is_refused_and_shown() {
    let s = shell();
    std::fs::create_dir(s.dir.path().join("sub")).unwrap();
    // A link in the session directory that leads out of it.
    let outside = tempfile::tempdir_in("/var/tmp").unwrap();
    std::os::unix::fs::symlink(outside.path(), s.dir.path().join("way-out")).unwrap();
    for (cwd, expect) in [
        ("/", "refused: cwd / is outside the session directory"),
        ("..", "refused: cwd .. is outside the session directory"),
        (
            "way-out",
            "refused: cwd way-out is outside the session directory",
        ),
    ] {
        let input = format!("term run --cwd {cwd} touch escaped");
        let o = s.run_unwedged(&["call", "--agent", "fake", "--input", &input]);
        assert_eq!(o.status.code(), Some(0), "{}", out_text(&o.stderr));
        assert!(
            out_text(&o.stdout).starts_with(expect),
            "{}",
            out_text(&o.stdout)
        );
        let stderr = out_text(&o.stderr);
        assert!(
            stderr.contains("! fake: refused to run `sh -c 'touch escaped'`: cwd"),
            "the box is told: {stderr}"
        );
        assert!(!outside.path().join("escaped").exists());
    }
    // Inside it (relative to the session directory), it runs there.
    let o = s.run_unwedged(&[
        "call",
        "--agent",
        "fake",
        "--input",
        "term run --cwd sub pwd",
    ]);
    let sub = s.dir.path().canonicalize().unwrap().join("sub");
    assert!(
        out_text(&o.stdout).ends_with(&format!("{}\n\n", sub.display())),
        "{}",
        out_text(&o.stdout)
    );
}

#[test]
fn unknown_terminal_ids_get_a_clear_error() {
    let s = shell();
    let o = s.run_unwedged(&["call", "--agent", "fake", "--input", "term unknown"]);
    let stdout = out_text(&o.stdout);
    assert!(
        stdout.starts_with("error -32602: unknown terminal \"term-nope\" in session fake-"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with(": never created, or released\n"),
        "{stdout}"
    );
}

#[test]
fn a_killed_command_is_gone_its_output_readable_until_release() {
    let s = shell();
    let marker = format!("987.{}", std::process::id());
    let input = format!("term kill echo started; exec sleep {marker}");
    let ps = format!("term ps {marker}");
    let o = s.run_unwedged(&["call", "--agent", "fake", "--input", &input, "--input", &ps]);
    assert_eq!(o.status.code(), Some(0), "{}", out_text(&o.stderr));
    let stdout = out_text(&o.stdout);
    let killed = stdout.as_str();
    let lines: Vec<&str> = killed.lines().collect();
    // Ended by quorum's SIGTERM: told as the signal.
    assert_eq!(lines[0], "killed: exit: none, signal: SIGTERM", "{killed}");
    assert_eq!(lines[1], "before kill: started");
    assert_eq!(lines[2], "after kill: started", "output stays readable");
    assert!(
        lines[3].starts_with("after release: error -32602: unknown terminal \"term-1\""),
        "{killed}"
    );
    // While quorum still ran (the second turn), the command was gone.
    assert_eq!(lines[4], format!("processes with {marker}: 0"), "{stdout}");
    assert!(gone(&marker));
}

#[test]
fn a_terminal_left_running_ends_with_its_turn() {
    let s = shell();
    let marker = format!("986.{}", std::process::id());
    let input = format!("term leave exec sleep {marker}");
    let ps = format!("term ps {marker}");
    let o = s.run_unwedged(&["call", "--agent", "fake", "--input", &input, "--input", &ps]);
    assert_eq!(o.status.code(), Some(0), "{}", out_text(&o.stderr));
    assert_eq!(
        out_text(&o.stdout),
        format!("left term-1 running\nprocesses with {marker}: 0\n")
    );
    let stderr = out_text(&o.stderr);
    assert!(stderr.contains("fake: $ … killed by SIGTERM"), "{stderr}");
}

/// A file outside the session directory and outside `/tmp` (which the
/// sandbox makes private, so a write there succeeds but never lands; a
/// clone under `/tmp` has its target there too): in `/var/tmp`.
fn outside_file(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new("/var/tmp");
    let path = dir.join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

#[test]
fn under_bwrap_a_write_outside_the_session_directory_fails() {
    let s = shell();
    let target = outside_file("escape");
    let input = format!(
        "term run echo x > {} && echo wrote || echo write failed; echo y > inside && echo inside ok",
        target.display()
    );
    let o = s.run_unwedged(&["call", "--agent", "fake", "--input", &input]);
    assert_eq!(o.status.code(), Some(0), "{}", out_text(&o.stderr));
    let stdout = out_text(&o.stdout);
    let stderr = out_text(&o.stderr);
    assert!(stdout.contains("inside ok"), "{stdout}");
    assert!(s.dir.path().join("inside").exists());
    assert!(
        bwrap(),
        "the sandbox tests need bubblewrap: apt-get install bubblewrap"
    );
    assert!(stdout.contains("Read-only file system"), "{stdout}");
    assert!(stdout.contains("write failed"), "{stdout}");
    assert!(!target.exists(), "the write got out");
    assert!(!stderr.contains("not sandboxed"), "{stderr}");
}

#[test]
fn terminal_sandbox_none_runs_unconfined_and_says_so_once() {
    let s = shell_with("terminal_sandbox = \"none\"\n");
    let target = outside_file("unconfined");
    let input = format!("term run echo x > {} && echo wrote", target.display());
    let o = s.run_unwedged(&["call", "--agent", "fake", "--input", &input]);
    assert_eq!(o.status.code(), Some(0), "{}", out_text(&o.stderr));
    assert!(
        out_text(&o.stdout).contains("wrote"),
        "{}",
        out_text(&o.stdout)
    );
    assert!(target.exists());
    std::fs::remove_file(&target).unwrap();
    // Two commands in one turn: the box is told once.
    let o = s.run_unwedged(&["call", "--agent", "fake", "--input", "term two"]);
    let stderr = out_text(&o.stderr);
    assert_eq!(
        stderr
            .matches(
                "terminal commands are not sandboxed (terminal_sandbox = \"none\" in its config)"
            )
            .count(),
        1,
        "{stderr}"
    );
    // A bad value names the place.
    let s = shell_with("terminal_sandbox = \"docker\"\n");
    let o = s.run(&["call", "--agent", "fake", "--input", "term two"]);
    assert_ne!(o.status.code(), Some(0));
    let stderr = out_text(&o.stderr);
    assert!(stderr.contains("quorum.toml: line 4"), "{stderr}");
    assert!(stderr.contains("expected `bwrap` or `none`"), "{stderr}");
}

/// The box of a running call shows its command's output as it comes; Esc
/// cancels the call and ends the command; the finished box counts it; the
/// opened box shows all of it; and the recorded transcript replays the
/// same.
#[tokio::test(flavor = "multi_thread")]
async fn the_box_shows_live_output_and_cancel_ends_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("session.jsonl");
    let (session, mut app, mut ev_rx) =
        live_session(dir.path(), "", None, Permissions::Ask, Some(record.clone()));
    let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    let marker = format!("985.{}", std::process::id());
    let prompt =
        format!("@fake term hold for i in 1 2 3 4 5 6; do echo line-$i; done; exec sleep {marker}");
    drive(&mut terminal, &mut app, line(&prompt), vec![]).await;
    // The output may come before the tool call that shows it (then under
    // a `$ command` line of its own): waited for both.
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("│ line-6") && s.contains("⚙ Run for i in 1 2 3")
    })
    .await;
    let screen = text(&terminal);
    // Under the tool call that shows the terminal: its last lines.
    let rows: Vec<&str> = screen.lines().collect();
    let tool = rows
        .iter()
        .position(|r| r.contains("⚙ Run for i in 1 2 3"))
        .unwrap_or_else(|| panic!("{screen}"));
    for (i, n) in [4, 5, 6].iter().enumerate() {
        assert!(
            rows[tool + 1 + i].contains(&format!("│ line-{n}")),
            "{screen}"
        );
    }
    assert!(
        !screen.contains("│ line-3"),
        "only the last lines: {screen}"
    );
    // Its last line is out; the `sleep` it runs next may not be yet.
    let deadline = Instant::now() + Duration::from_secs(10);
    while processes_with(&marker) != 1 {
        assert!(Instant::now() < deadline, "it never ran: {screen}");
        std::thread::sleep(Duration::from_millis(20));
    }

    drive(&mut terminal, &mut app, vec![key(KeyCode::Esc)], vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("stop reason: cancelled")
    })
    .await;
    // Gone with the cancel, while quorum runs on.
    assert!(gone(&marker), "the command outlived the cancel");
    let screen = text(&terminal);
    assert!(screen.contains("ran 1 command"), "{screen}");
    drop(session);

    // The transcript replays the same: the running box's live lines, the
    // finished box's count, the opened box's whole output.
    let events = common::events(&record);
    let finished = events
        .iter()
        .position(|e| matches!(e.event, Event::SubagentFinished { .. }))
        .expect("the call finished");
    let live = common::rows(&common::screen(&events[..finished], 100, 30, Some(false))).join("\n");
    assert!(live.contains("│ line-6"), "{live}");
    assert!(live.contains("⚙ Run for i in 1 2 3"), "{live}");
    let end = common::rows(&common::screen(&events, 100, 30, Some(false))).join("\n");
    assert!(end.contains("ran 1 command"), "{end}");
    let outputs = events
        .iter()
        .filter(|e| {
            matches!(
                &e.event,
                Event::SubagentActivity {
                    activity: Activity::TerminalOutput { .. },
                    ..
                }
            )
        })
        .count();
    assert!(outputs >= 1, "output is recorded as chunks");
    let opened = common::opened_box(&events, 100);
    for i in 1..=6 {
        assert!(opened.contains(&format!("  line-{i}\n")), "{opened}");
    }
    assert!(opened.contains("$ sh -c 'for i in 1 2 3"), "{opened}");
    assert!(opened.contains("✗ killed by SIGTERM"), "{opened}");
}

#[test]
fn the_finished_box_counts_the_commands_run() {
    let s = shell();
    let record = s.dir.path().join("two.jsonl");
    let o = s.run_unwedged(&[
        "call",
        "--agent",
        "fake",
        "--record",
        record.to_str().unwrap(),
        "--input",
        "term two",
    ]);
    assert_eq!(out_text(&o.stdout), "ran two\n");
    let events = common::events(&record);
    let screen = common::rows(&common::screen(&events, 100, 30, Some(false))).join("\n");
    assert!(screen.contains("ran 2 commands"), "{screen}");
}

/// `quorum call` running `term hold exec sleep MARKER`, once the command
/// runs.
fn holding(s: &common::shell::Shell, marker: &str) -> std::process::Child {
    let input = format!("term hold exec sleep {marker}");
    let mut child = s
        .command(&["call", "--agent", "fake", "--input", &input])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while processes_with(marker) == 0 {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the command never started");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

#[test]
fn a_terminal_ends_with_quorum_even_when_it_is_killed() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let s = shell();
    for (n, signal) in [
        (1, Signal::SIGINT),
        (2, Signal::SIGTERM),
        (3, Signal::SIGKILL),
    ] {
        let marker = format!("98{n}.{}", std::process::id());
        let mut child = holding(&s, &marker);
        kill(Pid::from_raw(child.id() as i32), signal).unwrap();
        common::wait_bounded(&mut child, &format!("quorum after {signal}"));
        assert!(gone(&marker), "the command outlived quorum's {signal}");
    }
}

#[test]
fn no_command_starts_for_a_session_no_turn_runs() {
    let s = shell();
    let o = s.run_unwedged(&[
        "call",
        "--agent",
        "fake",
        "--input",
        "term stray touch started-stray",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", out_text(&o.stderr));
    let stdout = out_text(&o.stdout);
    assert!(
        stdout.starts_with("refused: no turn of session fake-"),
        "{stdout}"
    );
    assert!(stdout.contains("-gone is running"), "{stdout}");
    assert!(!s.dir.path().join("started-stray").exists());
}

/// A command asked for on a session whose turn has just ended (the agent
/// goes on working after its answer) is refused: nothing would end it.
/// The session is a real one, routed while its turn ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_command_starts_after_its_sessions_turn_ended() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) =
        live_session(dir.path(), "", None, Permissions::Allow, None);
    let mut terminal = Terminal::new(TestBackend::new(120, 30)).unwrap();
    drive(
        &mut terminal,
        &mut app,
        line("@fake term late touch started-late"),
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("ending; a command comes later")
    })
    .await;
    let said = dir.path().join("late-terminal.txt");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !said.exists() {
        assert!(Instant::now() < deadline, "the late request never came");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(50));
    let said = std::fs::read_to_string(&said).unwrap();
    assert!(
        said.starts_with("refused: no turn of session fake-"),
        "{said}"
    );
    assert!(!dir.path().join("started-late").exists());
}

/// A command asked for as its turn ends (the request and the answer that
/// ends the turn sent together) never runs past the turn, whichever way the
/// race goes: refused if the request came after the turn's end, refused
/// and ended at once if the turn ended while it started, ended with the
/// turn if it was quicker. Raced a few times; each run says which way it
/// went (on stderr, and in every failure).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_racing_its_turns_end_does_not_outlive_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) =
        live_session(dir.path(), "", None, Permissions::Allow, None);
    let mut terminal = Terminal::new(TestBackend::new(120, 30)).unwrap();
    let said = dir.path().join("race-terminal.txt");
    let mut ways = Vec::new();
    let mut finished = 0;
    for n in 0..8 {
        let _ = std::fs::remove_file(&said);
        // Its command line names this test and this run alone.
        let command = format!("sleep 0.5; touch started-race-{n}.{}", std::process::id());
        drive(
            &mut terminal,
            &mut app,
            line(&format!("@fake term race {command}")),
            vec![],
        )
        .await;
        let deadline = Instant::now() + Duration::from_secs(10);
        // The agent's answer (written whole once it has it), and the call's
        // end on screen (the next run is a call of its own).
        let answer = loop {
            let answer = std::fs::read_to_string(&said).unwrap_or_default();
            if !answer.is_empty() && finished > n {
                break answer;
            }
            assert!(
                Instant::now() < deadline,
                "run {n}: the racing request was never answered ({answer:?}), or its call never ended"
            );
            if let Ok(Some(e)) = tokio::time::timeout(Duration::from_millis(20), ev_rx.recv()).await
            {
                if matches!(e.event, Event::SubagentFinished { .. }) {
                    finished += 1;
                }
                drive(&mut terminal, &mut app, vec![], vec![e]).await;
            }
        };
        let way = if answer.starts_with("refused: no turn of session fake-") {
            "the request came after the turn's end: refused"
        } else if answer.starts_with("refused: the turn of session fake-")
            && answer.ends_with(" ended")
        {
            "the turn ended while the command started: refused, and ended at once"
        } else if answer.starts_with("created term-") {
            "the command started before the turn's end: ended with the turn"
        } else {
            panic!("run {n}: an answer of no known way: {answer}")
        };
        eprintln!("race run {n}: {way}");
        // Once nothing runs the command, nothing will touch its file.
        assert!(
            gone(&command),
            "run {n} ({way}): the command still runs after its turn"
        );
        let started = dir
            .path()
            .join(format!("started-race-{n}.{}", std::process::id()));
        assert!(
            !started.exists(),
            "run {n} ({way}): the command ran past its turn"
        );
        ways.push(way);
    }
    eprintln!("race ways: {ways:#?}");
}

/// Characters the screen must never get from a terminal's output.
fn unsafe_char(c: char) -> bool {
    (c.is_control() && c != '\n')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200b}'..='\u{200f}')
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Whatever a command writes (escape sequences, controls, bidi marks,
    /// in any pieces), the box and the opened box keep no unsafe character,
    /// and the screen draws it without a panic.
    #[test]
    fn hostile_output_reaches_the_screen_clean(
        chunks in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::prelude::any::<String>(),
                proptest::sample::select(vec![
                    "\u{1b}[2J", "\u{1b}]0;title\u{7}", "\r", "\u{202e}evil", "\t", "ok\n", "\u{1b}[31",
                ]).prop_map(str::to_string),
            ],
            1..12,
        ),
        command in proptest::prelude::any::<String>(),
    ) {
        use quorum::event::{AgentRef, Stamped, build};
        let mut events = vec![
            Stamped { t: 1, event: build::started("c1", AgentRef::Acp("fake".into())).into() },
            Stamped { t: 2, event: build::activity("c1", Activity::TerminalStarted { terminal_id: "term-1".into(), command }) },
        ];
        for (i, text) in chunks.into_iter().enumerate() {
            events.push(Stamped {
                t: 3 + i as u64,
                event: build::activity("c1", Activity::TerminalOutput { terminal_id: "term-1".into(), text }),
            });
        }
        let mut state = State::new();
        for e in &events {
            state.apply(e);
        }
        let b = state.cells.iter().find_map(|c| match &c.kind {
            CellKind::Subagent(b) => Some(b),
            _ => None,
        }).unwrap();
        let t = b.terminals.get("term-1").unwrap();
        proptest::prop_assert!(!t.output.chars().any(unsafe_char), "{:?}", t.output);
        proptest::prop_assert!(!t.command.chars().any(unsafe_char), "{:?}", t.command);
        for line in quorum::tui::detail::render(b, 60, state.now) {
            for span in line.spans {
                proptest::prop_assert!(!span.content.chars().any(unsafe_char), "{:?}", span.content);
            }
        }
        let _ = common::screen(&events, 60, 20, Some(false));
    }
}

/// A running box with two commands: one shown by its tool call (its last
/// lines under it, and how it failed), one on its own (`$ command`); then
/// the finished box's summary.
#[test]
fn the_running_and_the_finished_box_with_terminals() {
    use quorum::event::{AgentRef, Stamped, ToolContent, ToolDetail, ToolStatus, build};
    let act = |t: u64, activity: Activity| Stamped {
        t,
        event: build::activity("c1", activity),
    };
    let mut events = vec![
        Stamped {
            t: 1,
            event: build::started("c1", AgentRef::Acp("fake".into()))
                .input("build and test")
                .into(),
        },
        act(
            2,
            Activity::TerminalStarted {
                terminal_id: "term-1".into(),
                command: "sh -c 'make all'".into(),
            },
        ),
        act(
            3,
            Activity::ToolCall {
                id: "x1".into(),
                title: "make all".into(),
                status: ToolStatus::InProgress,
                detail: Box::new(ToolDetail {
                    kind: Some("execute".into()),
                    content: vec![ToolContent::Terminal {
                        terminal_id: "term-1".into(),
                    }],
                    ..ToolDetail::default()
                }),
            },
        ),
        act(
            4,
            Activity::TerminalOutput {
                terminal_id: "term-1".into(),
                text: "cc -c a.c\ncc -c b.c\nb.c:3: error: expected ';'\n".into(),
            },
        ),
        act(
            5,
            Activity::TerminalExit {
                terminal_id: "term-1".into(),
                exit_code: Some(2),
                signal: None,
            },
        ),
        act(
            6,
            Activity::ToolCallUpdate {
                id: "x1".into(),
                title: None,
                status: Some(ToolStatus::Failed),
                detail: Box::default(),
            },
        ),
        act(
            7,
            Activity::TerminalStarted {
                terminal_id: "term-2".into(),
                command: "cargo test".into(),
            },
        ),
        act(
            8,
            Activity::TerminalOutput {
                terminal_id: "term-2".into(),
                text: "running 3 tests\ntest a ... ok\n".into(),
            },
        ),
    ];
    let running = common::rows(&common::screen(&events, 70, 14, Some(false))).join("\n");
    insta::assert_snapshot!("terminal_box_running", running);
    events.push(Stamped {
        t: 9,
        event: build::finished("c1", "Fixed b.c; tests pass.").into(),
    });
    let finished = common::rows(&common::screen(&events, 70, 14, Some(false))).join("\n");
    insta::assert_snapshot!("terminal_box_finished", finished);
}

/// What a turn sends, for a turn driven by hand: its activity.
struct Sink(tokio::sync::mpsc::UnboundedSender<Activity>);

impl quorum::agent::TurnSink for Sink {
    fn activity(&self, activity: Activity) {
        let _ = self.0.send(activity);
    }
    fn session(&self, _kind: quorum::event::SessionKind, _session_id: &str) {}
    fn notice(&self, _text: &str) {}
}

/// A call given up while its agent's command runs (its turn's future
/// dropped, not ended): the command ends all the same, while the
/// connection and quorum live on.
#[tokio::test(flavor = "multi_thread")]
async fn a_turn_given_up_ends_its_commands() {
    use quorum::acp::client::Connection;
    use quorum::acp::registry::Registry;
    use quorum::agent::{TurnControl, TurnRequest};
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("q.toml");
    std::fs::write(
        &config,
        format!(
            "[agents.fake]\ncommand = {:?}\n",
            env!("CARGO_BIN_EXE_quorum-fake-agent")
        ),
    )
    .unwrap();
    let registry = Registry::load_only(&config).unwrap();
    let root = quorum::confine::fsroot::Root::new(dir.path()).unwrap();
    let supervisor = quorum::runtime::supervisor::Supervisor::new();
    let conn = Connection::start(registry.get("fake").unwrap(), &root, &supervisor, None)
        .await
        .unwrap();
    let marker = format!("979.{}", std::process::id());
    let prompt = format!("term hold exec sleep {marker}");
    let (_cancel_tx, cancel) = tokio::sync::watch::channel(false);
    let (_kill_tx, kill) = tokio::sync::watch::channel(false);
    let (_answers_tx, answers) = tokio::sync::mpsc::unbounded_channel();
    let (_children_tx, cancel_children) = tokio::sync::mpsc::unbounded_channel();
    let (_elicit_tx, elicitations) = tokio::sync::mpsc::unbounded_channel();
    let mut control = TurnControl {
        cancel,
        kill,
        answers,
        cancel_children,
        elicitations,
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let sink = Sink(tx);
    {
        let turn = conn.turn(
            TurnRequest {
                prompt: &prompt,
                root: dir.path(),
                resume: None,
                policy: Permissions::Allow,
                model: None,
                mode: None,
                exclude: None,
                elicit: quorum::agent::Elicit::Decline,
                trusted_mcp: None,
                person: false,
            },
            &sink,
            &mut control,
        );
        tokio::pin!(turn);
        // Driven until the agent shows the terminal in its tool call.
        loop {
            tokio::select! {
                _ = &mut turn => panic!("the turn ended by itself"),
                Some(activity) = rx.recv() => {
                    if matches!(activity, Activity::ToolCall { .. }) {
                        break;
                    }
                }
            }
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while processes_with(&marker) == 0 {
            assert!(Instant::now() < deadline, "the command never ran");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert!(
        tokio::task::spawn_blocking(move || gone(&marker))
            .await
            .unwrap(),
        "the command outlived its turn"
    );
    assert!(conn.alive(), "the connection lives on");
}
