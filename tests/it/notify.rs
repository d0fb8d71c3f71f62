//! `[notify]`: desktop notifications through the terminal while it does
//! not have the focus (the real binary in a pseudo-terminal), the notify
//! program fed one JSON line per notification (headless `quorum run` and
//! `quorum call`), `all_idle` once for a batch, and what goes wrong with
//! the program or the config said once and clearly.
#![cfg(target_os = "linux")]

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::Bounded;
use common::pty::{Terminal, wait_until};
use common::shell::{shell_with, stderr, text};

/// A notify program: appends what it reads on stdin to the file `log`.
fn logger(dir: &Path, log: &Path) -> String {
    let script = dir.join("notify.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nPATH=/usr/bin:/bin\ncat >> {:?}\n",
            log.display().to_string()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script.display().to_string()
}

/// The notifications the log holds, each line one JSON object.
fn logged(log: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect()
}

fn events_of(lines: &[serde_json::Value]) -> Vec<&str> {
    lines.iter().map(|l| l["event"].as_str().unwrap()).collect()
}

/// The TUI: a task that ends while the terminal has the focus sends no
/// OSC; once the focus is out (`ESC [ O`), a task's end and a permission
/// request each send OSC 9 (WezTerm), the text one clean line.
#[test]
fn desktop_notifications_go_out_only_while_the_focus_is_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quorum.toml");
    std::fs::write(
        &config,
        format!(
            "[agents.fake]\ncommand = {:?}\n[notify]\nevents = [\"needs_you\", \"task_done\"]\n",
            env!("CARGO_BIN_EXE_quorum-fake-agent")
        ),
    )
    .unwrap();
    let terminal = Terminal::open(120, 36);
    let mut quorum = terminal.spawn(
        common::quorum(dir.path())
            .arg("--config")
            .arg(&config)
            .arg("--no-record")
            .env("TERM_PROGRAM", "WezTerm")
            .env_remove("TMUX")
            .current_dir(dir.path()),
        Stdio::null(),
    );
    struct Guard<'a>(&'a mut std::process::Child);
    impl Drop for Guard<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let guard = Guard(&mut quorum);
    terminal.wait_for("Ctrl+C quits");
    assert!(
        terminal.output().contains("\x1b[?1004h"),
        "focus reporting is on"
    );
    let osc = |t: &Terminal| t.output().matches("\x1b]9;").count();

    // Focus in: the task ends, nothing is sent.
    terminal.type_keys(b"\x1b[I");
    terminal.type_keys(b"@fake! echo first-done\r");
    terminal.wait_for("first-done");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(osc(&terminal), 0, "focused: no desktop notification");

    // Focus out: the next task's end is sent.
    terminal.type_keys(b"\x1b[O");
    terminal.type_keys(b"@fake! echo second-done\r");
    assert!(
        wait_until(Duration::from_secs(30), || osc(&terminal) == 1),
        "no OSC 9 for the task's end: {:?}",
        terminal.output()
    );
    let out = terminal.output();
    let at = out.find("\x1b]9;").unwrap();
    let end = at + out[at..].find('\x07').expect("ended by BEL");
    assert_eq!(
        &out[at..end],
        "\x1b]9;quorum: fake finished t2: second-done"
    );

    // A permission request, still out of focus: needs_you.
    terminal.type_keys(b"@fake permission\r");
    assert!(
        wait_until(Duration::from_secs(30), || terminal.output().contains(
            "\x1b]9;quorum: fake needs you: ? permission: Delete build/\x07"
        )),
        "no OSC 9 for the permission: {:?}",
        terminal.output()
    );
    // Nothing else was sent: one sequence for each of the two.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(osc(&terminal), 2, "{:?}", terminal.output());
    drop(guard);
}

/// `quorum run`: a batch of two background tasks, each reported to the
/// chat in a turn: the program gets one JSON line per notification, two
/// `task_done` and one `all_idle`, last, with every field.
#[test]
fn the_notify_program_gets_one_json_line_per_event_and_all_idle_once() {
    let base = tempfile::tempdir().unwrap();
    let log = base.path().join("notify.log");
    let program = logger(base.path(), &log);
    let s = shell_with(&format!(
        "[notify]\ncommand = [{program:?}]\nevents = [\"task_done\", \"all_idle\", \"error\"]\n"
    ));
    let script = s.dir.path().join("script.json");
    let batch = serde_json::json!({"name": "subagent", "arguments": {
        "run_in_background": true,
        "tasks": [{"agent": "fake", "input": "echo one"}, {"agent": "fake", "input": "slow 1"}]
    }});
    let turns = serde_json::json!([
        {"text": "Started them.", "tool_calls": [batch]},
        {"text": "They run."},
        {"text": "A report."},
        {"text": "Another report."},
        {"text": "Spare."}
    ]);
    std::fs::write(&script, turns.to_string()).unwrap();
    let o = s.run(&[
        "run",
        "--model",
        &format!("script:{}", script.display()),
        "-p",
        "go",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let lines = logged(&log);
    assert_eq!(
        events_of(&lines),
        ["task_done", "task_done", "all_idle"],
        "{lines:#?}"
    );
    for line in &lines {
        let mut keys: Vec<&String> = line.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(
            keys,
            ["agent", "cost", "event", "session", "task", "text"],
            "{line}"
        );
    }
    let mut tasks: Vec<&str> = lines[..2]
        .iter()
        .map(|l| l["task"].as_str().unwrap())
        .collect();
    tasks.sort();
    assert_eq!(tasks, ["t1", "t2"]);
    assert!(lines[..2].iter().all(|l| l["agent"] == "fake"));
    assert!(
        lines.iter().any(|l| l["text"] == "fake finished t1: one"),
        "{lines:#?}"
    );
    assert!(lines[2]["task"].is_null() && lines[2]["agent"].is_null());
    // Recorded sessions are named by their transcript.
    assert!(lines.iter().all(|l| l["session"].is_string()), "{lines:#?}");
}

/// An unknown event name: refused before anything runs, with the file,
/// the line and the nearest name.
#[test]
fn an_unknown_event_name_is_refused_with_its_place_and_the_nearest_name() {
    let s = shell_with("[notify]\nevents = [\"task_done\", \"all_idel\"]\n");
    let o = s.run(&["call", "--agent", "fake", "--input", "echo hi"]);
    assert_ne!(o.status.code(), Some(0));
    let e = stderr(&o);
    assert!(
        e.contains(&format!("{}: line 5, column ", s.config.display()))
            && e.contains(": unknown variant `all_idel`"),
        "{e}"
    );
    assert!(e.contains("did you mean `all_idle`?"), "{e}");
    assert!(text(&o.stdout).is_empty());
}

/// A program that hangs is ended after its timeout, said once as a
/// notice; the session goes on (the second call runs while it hangs) and
/// the program is gone when quorum is.
#[test]
fn a_notify_program_that_hangs_is_ended_with_one_notice() {
    let base = tempfile::tempdir().unwrap();
    let script = base.path().join("hang.sh");
    std::fs::write(&script, "#!/bin/sh\nexec /bin/sleep 987.25\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let s = shell_with(&format!(
        "[notify]\ncommand = [{:?}]\n",
        script.display().to_string()
    ));
    let started = Instant::now();
    let o = s.run(&[
        "call", "--agent", "fake", "--input", "echo one", "--input", "echo two",
    ]);
    let took = started.elapsed();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(text(&o.stdout), "one\ntwo\n", "both calls ran");
    let e = stderr(&o);
    let said = "was still running after 5 s and was ended";
    assert_eq!(e.matches(said).count(), 1, "{e}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    // Nothing of it outlives quorum.
    let left = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|d| std::fs::read(d.ok()?.path().join("cmdline")).ok())
            .filter(|c| String::from_utf8_lossy(c).contains("987.25"))
            .count()
    };
    assert!(
        wait_until(Duration::from_secs(10), || left() == 0),
        "the hung program is still running"
    );
}

/// A program that is not there: one notice, however many notifications;
/// the calls' output is whole.
#[test]
fn a_missing_notify_program_is_one_notice() {
    let s = shell_with("[notify]\ncommand = [\"/nonexistent/quorum-notify\", \"x\"]\n");
    let o = s
        .command(&[
            "call", "--agent", "fake", "--input", "echo one", "--input", "echo two",
        ])
        .output_bounded();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(text(&o.stdout), "one\ntwo\n");
    let e = stderr(&o);
    assert_eq!(
        e.matches("[notify] command: /nonexistent/quorum-notify was not found")
            .count(),
        1,
        "{e}"
    );
}
