//! Misbehaving agents, files and transcripts, through `quorum call` and
//! `quorum replay` as a person runs them: each case of the hardening issue
//! that failed, kept as a regression test.

use crate::common;

use common::Bounded;

use common::shell::{shell, shell_with, text};

/// A link inside the session directory to a file that does not exist yet
/// outside it: a write through it used to follow it out.
#[test]
fn a_write_through_a_dangling_link_stays_inside() {
    let s = shell();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("planted.txt");
    std::os::unix::fs::symlink(&target, s.dir.path().join("link.txt")).unwrap();
    let o = s.run_unwedged(&[
        "call",
        "--agent",
        "fake",
        "--input",
        "write link.txt planted",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.starts_with("write failed: link.txt: outside the session directory"),
        "{out}"
    );
    assert!(
        !target.exists(),
        "the write escaped to {}",
        target.display()
    );
    // The box says so too.
    assert!(
        text(&o.stderr).contains("refused to write link.txt"),
        "{}",
        text(&o.stderr)
    );

    // A dangling link that stays inside is followed: the file is created
    // where it points.
    std::os::unix::fs::symlink("sub/made.txt", s.dir.path().join("inner.txt")).unwrap();
    std::fs::create_dir(s.dir.path().join("sub")).unwrap();
    let o = s.run_unwedged(&["call", "--agent", "fake", "--input", "write inner.txt made"]);
    assert_eq!(text(&o.stdout), "wrote\n", "{}", text(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(s.dir.path().join("sub/made.txt")).unwrap(),
        "made"
    );
}

/// A FIFO in the session directory used to block a worker thread forever
/// on `open`, wedging the connection and quorum's exit.
#[test]
fn a_fifo_is_refused_not_waited_on() {
    let s = shell();
    nix::unistd::mkfifo(&s.dir.path().join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let o = s.run_unwedged(&["call", "--agent", "fake", "--input", "read pipe"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "read failed: pipe: not a regular file (a FIFO); only regular files are read or written\n"
    );
    let o = s.run_unwedged(&["call", "--agent", "fake", "--input", "write pipe x"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).starts_with("write failed: pipe: not a regular file"),
        "{}",
        text(&o.stdout)
    );
}

/// A read of a file over the limit is refused with the size and the
/// setting, instead of costing eight times the file in memory.
#[test]
fn a_file_over_the_read_limit_is_refused_naming_the_limit() {
    let s = shell_with("[limits]\nmax_read_bytes = 1000\n");
    std::fs::write(s.dir.path().join("big.txt"), "z".repeat(2000)).unwrap();
    std::fs::write(s.dir.path().join("small.txt"), "fine").unwrap();
    let o = s.run_unwedged(&["call", "--agent", "fake", "--input", "read big.txt"]);
    assert_eq!(
        text(&o.stdout),
        "read failed: big.txt: 2000 bytes, over the read limit of 1000 bytes \
         (max_read_bytes under [limits] in the config)\n"
    );
    let o = s.run_unwedged(&["call", "--agent", "fake", "--input", "read small.txt"]);
    assert_eq!(text(&o.stdout), "read: fine\n");
}

/// A stdout line that never ends used to grow without bound and the turn
/// never ended; now the call fails at the cap, naming the agent and the
/// setting.
#[test]
fn an_endless_message_ends_the_turn_with_the_cause() {
    let s = shell_with("[limits]\nmax_frame_bytes = 100000\n");
    let o = s.run_unwedged(&["call", "--agent", "fake", "--input", "hugeline 1000000"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    // stderr says what went wrong and how the call stopped; stdout, the
    // agent's answer, is empty.
    assert!(
        text(&o.stderr).contains("stop reason: error"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(text(&o.stdout), "");
    let err = text(&o.stderr);
    assert!(
        err.contains(
            "\nfake exited during the turn: sent a message over 100000 bytes, read no further \
             (max_frame_bytes under [limits] in the config)"
        ),
        "{err}"
    );
}

/// An endless stderr line costs its first few KB, and the turn goes on.
#[test]
fn an_endless_stderr_line_is_kept_short() {
    let s = shell_with("[limits]\nstderr_bytes = 1000\n");
    let o = s.run_unwedged_with(
        &["call", "--agent", "fake", "--input", "hugestderr 3000000"],
        &[("QUORUM_LOG", "agent_stderr=debug")],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "still here\n");
    // What was kept of the endless line (logged as kept): its first 4096
    // bytes and a mark that it was cut; and reading went on past it.
    let log = std::fs::read_to_string(s.dir.path().join("state/quorum/quorum.log")).unwrap();
    let kept: Vec<&str> = log.lines().filter(|l| l.contains("fake: y")).collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let ys = kept[0].split("fake: ").nth(1).unwrap();
    assert_eq!(ys, format!("{}…", "y".repeat(4096)));
    assert!(
        log.lines().any(|l| l.ends_with("fake: last words")),
        "{log}"
    );
    assert!(log.len() < 64 * 1024, "the log holds {} bytes", log.len());
}

/// A bad limit in the config is an error with the file and the line.
#[test]
fn a_bad_limit_names_the_file_and_line() {
    let s = shell_with("[limits]\nmax_read_bytes = 0\n");
    let o = s.run(&["call", "--agent", "fake", "--input", "echo hi"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.starts_with("quorum: "), "{err}");
    assert!(err.contains("quorum.toml: line 5"), "{err}");
    assert!(err.contains("a limit must be at least 1 byte"), "{err}");
}

/// `quorum replay /dev/zero` used to grow to 10 GB; a line over the cap
/// is now an error naming the file and line.
#[test]
fn replaying_an_endless_line_stops_at_the_cap() {
    let s = shell_with("[limits]\nmax_transcript_line_bytes = 4096\n");
    let shot = s.dir.path().join("shot.txt");
    let o = s.run_unwedged(&[
        "replay",
        "/dev/zero",
        "--screenshot",
        shot.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stderr),
        "quorum: /dev/zero:1: a line over 4 KB, read no further \
         (max_transcript_line_bytes under [limits] in the config)\n"
    );
}

/// Whoever lowers `max_transcript_line_bytes` still replays what quorum
/// recorded: no line is written longer than the reader takes, an event's
/// longest strings cut and the cut named. (A report longer than the limit
/// used to be recorded whole, on a line the replay then refused.)
#[test]
fn every_recorded_line_fits_the_configured_limit() {
    let s = shell_with("[limits]\nmax_transcript_line_bytes = 4096\n");
    let record = s.dir.path().join("long.jsonl");
    let long = "word ".repeat(2000);
    let o = s.run_unwedged(&[
        "call",
        "--agent",
        "fake",
        "--record",
        record.to_str().unwrap(),
        "--input",
        &format!("echo {long}"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    // The call itself answers in full: only the record is cut.
    assert!(text(&o.stdout).len() > 9_000, "{}", text(&o.stdout));
    let recorded = std::fs::read_to_string(&record).unwrap();
    for (n, line) in recorded.lines().enumerate() {
        assert!(line.len() <= 4096, "line {}: {} bytes", n + 1, line.len());
    }
    let shot = s.dir.path().join("shot.txt");
    let o = s.run_unwedged(&[
        "replay",
        record.to_str().unwrap(),
        "--screenshot",
        shot.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let loaded = quorum::transcript::load_capped(&record, 4096).unwrap();
    let output = loaded
        .events
        .iter()
        .find_map(|e| match &e.event {
            quorum::event::Event::SubagentFinished { output, .. } => Some(output.clone()),
            _ => None,
        })
        .expect("the call finished");
    assert!(output.starts_with("word word"), "{output}");
    assert!(output.ends_with(" bytes cut by quorum]"), "{output}");
}

/// A message with a byte that is not UTF-8 costs that byte, and the box
/// says so.
#[test]
fn a_bad_byte_is_replaced_with_a_notice() {
    let s = shell();
    let o = s.run_unwedged(&["call", "--agent", "fake", "--input", "badbyte"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "caf\u{fffd} after\n");
    assert!(
        text(&o.stderr)
            .contains("fake sent a message with bytes that are not UTF-8; they show as \u{fffd}"),
        "{}",
        text(&o.stderr)
    );
}

/// A permission request whose raw input names a path outside, nested in
/// its arguments or under `~`, is refused whatever the policy (before,
/// only top-level absolute strings were checked).
#[test]
fn a_permission_naming_a_path_outside_anywhere_in_its_input_is_refused() {
    let s = shell();
    let home = tempfile::tempdir().unwrap();
    for (input, shown) in [
        (r#"{"args": {"path": "/etc"}}"#, "/etc"),
        (r#"{"paths": ["ok.txt", "../up.txt"]}"#, "../up.txt"),
        (r#"{"file": "~/.ssh/id_rsa"}"#, "~/.ssh/id_rsa"),
        (r#"{"file": "~root/.profile"}"#, "~root/.profile"),
        (r#"{"command": ["rm", "-rf", "/etc"]}"#, "/etc"),
    ] {
        let o = s
            .command(&["call", "--approve", "all", "--agent", "fake", "--input"])
            .arg(format!("permission {input}"))
            .env("HOME", home.path())
            .output_bounded();
        assert_eq!(text(&o.stdout), "denied\n", "{input}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(&format!(
                "refused: {shown} is outside the session directory"
            )),
            "{input}: {}",
            text(&o.stderr)
        );
    }
    // Paths inside, nested or not, are left to the policy.
    let o = s.run(&[
        "call",
        "--approve",
        "all",
        "--agent",
        "fake",
        "--input",
        r#"permission {"args": {"path": "src/main.rs", "cmd": "cat /etc/passwd", "url": "https://example.com/x"}, "command": ["/bin/bash", "-lc", "echo hi > out.txt"]}"#,
    ]);
    assert_eq!(text(&o.stdout), "permitted\n", "{}", text(&o.stderr));
}

/// Output to a reader that went away (`quorum … 2>&1 | head -1`) is no
/// panic: stdout and stderr both closed before quorum writes a line.
#[test]
fn closed_pipes_are_no_panic() {
    let s = shell();
    for args in [
        &["call", "--agent", "fake", "--input", "tools"][..],
        &[
            "call",
            "--json",
            "--agent",
            "fake",
            "--input",
            "stream 20000",
        ],
        &["agents"],
    ] {
        let mut child = s
            .command(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        drop(child.stderr.take());
        let start = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > std::time::Duration::from_secs(60) {
                let _ = child.kill();
                panic!("quorum {args:?} is wedged on a closed stdout");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(0), "{args:?}: {status:?}");
    }
}
