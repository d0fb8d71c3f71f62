//! `quorum call` and `quorum agents` from the shell, against the fake agent.

use crate::common;

use common::Bounded;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use common::shell::{shell, text};

use quorum::event::Event;

#[test]
fn prints_the_final_message_and_exits_zero() {
    let s = shell();
    let o = s.run(&["call", "--agent", "fake", "--input", "tools"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "Final answer.\n");
    assert!(
        text(&o.stderr).contains("⚙ Read README.md"),
        "progress on stderr: {}",
        text(&o.stderr)
    );
}

#[test]
fn several_inputs_continue_one_session_and_json_says_so() {
    let s = shell();
    let o = s.run(&[
        "call", "--agent", "fake", "--json", "--input", "turns", "--input", "turns", "--input",
        "turns",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let lines: Vec<serde_json::Value> = text(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let outputs: Vec<&str> = lines
        .iter()
        .map(|l| l["output"].as_str().unwrap())
        .collect();
    assert_eq!(outputs, ["turns: 1", "turns: 2", "turns: 3"]);
    let kinds: Vec<&str> = lines
        .iter()
        .map(|l| l["session"].as_str().unwrap())
        .collect();
    // The session is still open on the agent's connection: each later
    // call prompts it as it is (no session/resume).
    assert_eq!(kinds, ["fresh", "continued", "continued"]);
    assert!(
        lines
            .iter()
            .all(|l| l["stop_reason"] == "end_turn" && l["severity"].is_null())
    );
}

#[test]
fn stdin_review_and_record() {
    let s = shell();
    let record = s.dir.path().join("call.jsonl");
    let mut child = s
        .command(&[
            "call",
            "--agent",
            "fake",
            "--code-review",
            "--json",
            "--record",
            record.to_str().unwrap(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"review yellow\n")
        .unwrap();
    let o = common::wait_output_bounded(child, "quorum call");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    assert_eq!(v["severity"], "yellow");
    // The verdict is the `severity` field and a line on stderr; the header
    // is not part of the output.
    assert_eq!(v["output"], "## Review\nLooks yellow.");
    assert!(
        text(&o.stderr).contains("fake: ■ end_turn, verdict yellow"),
        "{}",
        text(&o.stderr)
    );
    let events = quorum::transcript::load(&record).unwrap().events;
    assert!(matches!(
        &events[0].event,
        Event::SessionInfo { model: None, agents } if agents.contains(&"fake".to_string())
    ));
    assert!(matches!(&events[1].event, Event::PricesSet { .. }));
    assert!(
        matches!(&events[2].event, Event::SubagentStarted { code_review: true, input, .. } if input == "review yellow")
    );
    assert!(events.iter().any(|e| matches!(
        &e.event,
        Event::SubagentFinished {
            severity: Some(quorum::event::Severity::Yellow),
            ..
        }
    )));
}

#[test]
fn exit_codes_for_other_stop_reasons_and_bad_calls() {
    let s = shell();
    let o = s.run(&["call", "--agent", "fake", "--input", "stop max_tokens"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("stop reason: max_tokens"));
    // What went wrong goes to stderr: stdout is the agent's answer. It
    // follows the call's end (its lines are printed by another task: they
    // came after it in some runs).
    for _ in 0..10 {
        let o = s.run(&["call", "--agent", "fake", "--input", "crash"]);
        assert_eq!(o.status.code(), Some(1));
        assert_eq!(text(&o.stdout), "");
        let err = text(&o.stderr);
        let lines: Vec<&str> = err.lines().collect();
        let end = lines.iter().position(|l| *l == "fake: ■ error");
        let why = lines
            .iter()
            .position(|l| l.starts_with("fake exited during the turn"));
        assert!(matches!((end, why), (Some(e), Some(w)) if e < w), "{err}");
    }
    let o = s.run(&["call", "--agent", "nobody", "--input", "hi"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("unknown agent \"nobody\"; available: fake"),
        "{}",
        text(&o.stderr)
    );
    let o = s.run(&[
        "call",
        "--agent",
        "fake",
        "--input",
        "hi",
        "--cwd",
        "/no/such/dir",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("--cwd /no/such/dir"),
        "{}",
        text(&o.stderr)
    );
    std::fs::write(&s.config, "[agents.fake]\nargs = 3\n").unwrap();
    let o = s.run(&["call", "--agent", "fake", "--input", "hi"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("quorum.toml: line 2"),
        "{}",
        text(&o.stderr)
    );
}

#[cfg(unix)]
#[test]
fn ctrl_c_cancels_the_turn() {
    let s = shell();
    let mut child = s
        .command(&["call", "--agent", "fake", "--json", "--input", "slow 30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the session is open, then interrupt.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("fake: session:") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "quorum ended early"
        );
    }
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let o = common::wait_output_bounded(child, "quorum call");
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    assert_eq!(v["stop_reason"], "cancelled");
}

#[test]
fn agents_lists_and_probes() {
    let s = shell();
    let o = s.run(&["agents"]);
    assert!(o.status.success());
    let out = text(&o.stdout);
    assert!(out.starts_with("NAME"), "{out}");
    let fake_row = out
        .lines()
        .find(|l| l.starts_with("fake "))
        .expect("fake listed");
    assert!(
        fake_row.ends_with(env!("CARGO_BIN_EXE_quorum-fake-agent")),
        "{fake_row}"
    );
    let gemini = out
        .lines()
        .find(|l| l.starts_with("gemini"))
        .expect("built-ins listed");
    assert!(gemini.contains("gemini --acp"), "{gemini}");
    // What a sandboxed agent keeps private and what it shares with you.
    let below = |name: &str| {
        let mut lines = out.lines().skip_while(|l| !l.starts_with(name));
        lines.nth(1).unwrap_or_default().trim().to_string()
    };
    assert_eq!(
        below("claude "),
        "↳ sandboxed, its state is private: ~/.claude, ~/.claude.json (kept in ~/state/quorum/homes/claude); \
         shared with you: ~/.claude/.credentials.json"
    );
    assert_eq!(
        below("fake "),
        "↳ sandboxed, it names no state of its own: your home is read-only to it"
    );
    let o = s.run(&["agents", "--probe"]);
    let out = text(&o.stdout);
    assert!(
        out.contains("↳ quorum-fake-agent 1.0.0; can: load, resume; auth: none"),
        "{out}"
    );
}

#[test]
fn new_session_makes_every_call_fresh_and_logs_go_to_the_state_dir() {
    let s = shell();
    let state = s.dir.path().join("state");
    let o = s
        .command(&[
            "call",
            "--agent",
            "fake",
            "--json",
            "--new-session",
            "--input",
            "turns",
            "--input",
            "turns",
        ])
        .env("XDG_STATE_HOME", &state)
        .env("QUORUM_LOG", "debug")
        .output_bounded();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let lines: Vec<serde_json::Value> = text(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        (lines[0]["output"].as_str(), lines[1]["output"].as_str()),
        (Some("turns: 1"), Some("turns: 1"))
    );
    assert_ne!(lines[0]["session_id"], lines[1]["session_id"]);
    let log = std::fs::read_to_string(state.join("quorum/quorum.log")).unwrap();
    assert!(log.contains("fake"), "the agent's process is logged: {log}");
}

/// `quorum call` on an agent that never answers `initialize` ends at its
/// `startup_timeout` with exit code 1 and says which agent and step.
#[test]
fn a_stuck_agent_times_out_and_call_exits_1() {
    let s = shell();
    std::fs::write(
        &s.config,
        format!(
            "[agents.stuck]\ncommand = {:?}\nargs = [\"--hang-initialize\"]\nstartup_timeout = 1\n",
            env!("CARGO_BIN_EXE_quorum-fake-agent")
        ),
    )
    .unwrap();
    let o = s.run(&["call", "--agent", "stuck", "--input", "hi"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr)
            .contains("stuck: no answer to initialize within 1 s (startup_timeout in its config)"),
        "{}",
        text(&o.stderr)
    );
    assert!(
        text(&o.stderr).contains("stop reason: error"),
        "{}",
        text(&o.stderr)
    );
}

/// `--resume ID` resumes a session of an earlier quorum process; one the
/// agent no longer knows (the fake agent keeps sessions in memory only)
/// heals to a new session, and says so.
#[test]
fn resume_takes_a_session_from_an_earlier_process() {
    let s = shell();
    let o = s.run(&["call", "--agent", "fake", "--json", "--input", "turns"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let first: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    let id = first["session_id"].as_str().unwrap();
    let o = s.run(&[
        "call", "--agent", "fake", "--json", "--resume", id, "--input", "turns",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let second: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    assert_eq!(second["session"], "new_after_stale");
    assert!(
        text(&o.stderr).contains(&format!("session {id} could not be reopened")),
        "{}",
        text(&o.stderr)
    );
    let o = s.run(&[
        "call",
        "--agent",
        "fake",
        "--resume",
        "x",
        "--new-session",
        "--input",
        "turns",
    ]);
    assert_eq!(o.status.code(), Some(2), "conflicting flags");
}

/// An agent that answers `session/new` with auth-required: quorum names
/// its methods and the variables they take; the probe lists them too.
#[test]
fn auth_required_names_the_methods_and_their_variables() {
    let s = shell();
    std::fs::write(
        &s.config,
        format!(
            "[agents.locked]\ncommand = {:?}\nargs = [\"--auth-required\"]\n",
            env!("CARGO_BIN_EXE_quorum-fake-agent")
        ),
    )
    .unwrap();
    let o = s.run(&["call", "--agent", "locked", "--input", "hi"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let out = text(&o.stderr);
    assert!(
        out.contains(
            "locked needs authentication before it opens a session. It offers: \
             API key (api-key): a key from your account page [env: FAKE_API_KEY]; \
             Sign in with a browser (browser)"
        ),
        "{out}"
    );
    let o = s.run(&["agents", "--probe"]);
    assert!(
        text(&o.stdout).contains(
            "can: load, resume; auth: API key (api-key): a key from your account page [env: FAKE_API_KEY]; \
             Sign in with a browser (browser)"
        ),
        "{}",
        text(&o.stdout)
    );
}

/// `model` and `mode` in the config are applied through the agent's
/// config options; what cannot be applied is said; a model picked through
/// the agent is remembered for its next sessions, in later processes too.
#[test]
fn model_and_mode_go_through_config_options_and_picks_are_remembered() {
    let s = shell();
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    std::fs::write(
        &s.config,
        format!(
            "[agents.opts]\ncommand = {fake:?}\nargs = [\"--config-options\"]\nmodel = \"smart\"\nmode = \"code\"\n\n\
             [agents.odd]\ncommand = {fake:?}\nargs = [\"--config-options\"]\nmode = \"bogus\"\n\n\
             [agents.plain]\ncommand = {fake:?}\nmodel = \"smart\"\n"
        ),
    )
    .unwrap();
    let o = s.run(&["call", "--agent", "opts", "--input", "whoami"]);
    assert_eq!(
        text(&o.stdout).trim(),
        "model: smart, mode: code",
        "{}",
        text(&o.stderr)
    );

    let o = s.run(&["call", "--agent", "odd", "--input", "whoami"]);
    assert_eq!(text(&o.stdout).trim(), "model: fast, mode: ask");
    assert!(
        text(&o.stderr)
            .contains("odd: mode \"bogus\" is not one it offers (ask, code); it keeps ask"),
        "{}",
        text(&o.stderr)
    );

    let o = s.run(&["call", "--agent", "plain", "--input", "echo hi"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        text(&o.stderr).contains(
            "plain offers no config options: its model from the config file is not applied"
        ),
        "{}",
        text(&o.stderr)
    );

    // A pick made through the agent outlives the process.
    let o = s.run(&["call", "--agent", "odd", "--input", "pick smart"]);
    assert!(
        text(&o.stderr).contains("odd: model smart picked; its next sessions start with it"),
        "{}",
        text(&o.stderr)
    );
    let o = s.run(&[
        "call",
        "--agent",
        "odd",
        "--new-session",
        "--input",
        "whoami",
    ]);
    assert_eq!(
        text(&o.stdout).trim(),
        "model: smart, mode: ask",
        "{}",
        text(&o.stderr)
    );
}

/// Text that reads differently than it is (a bidi override, zero-width
/// characters) is dropped from plain output and escaped in JSON.
#[test]
fn unseen_characters_never_reach_the_terminal() {
    let s = shell();
    let input = "echo if admin \u{202e}{ }\u{2066}x\u{2069} a\u{200b}b\u{feff}c\u{ad}d";
    let o = s.run(&["call", "--agent", "fake", "--input", input]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "if admin { }x abcd\n");

    let o = s.run(&["call", "--json", "--agent", "fake", "--input", input]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains(r"\u202e{ }\u2066x\u2069 a\u200bb\ufeffc\u00add"),
        "{out}"
    );
    // Nothing is lost: the JSON still holds the agent's exact text.
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["output"], input.strip_prefix("echo ").unwrap());
}

/// An agent's stderr is read to its end whatever it holds: bytes that are
/// not UTF-8 and a 1 MB line (more than a pipe holds) neither stop the
/// reading nor break the agent's writes (before, the reading stopped at the
/// bad byte and the agent's next write failed, ending the turn in error).
#[test]
fn stderr_that_is_not_utf8_or_endless_never_wedges_a_call() {
    let s = shell();
    // A wedge would hang forever: run_unwedged gives up after a minute.
    let o = s.run_unwedged(&["call", "--agent", "fake", "--input", "noisy"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "still here\n");
}

/// A byte that is not UTF-8 in one message costs that byte, not the
/// connection (before: "fake exited during the turn: exited with code 0").
#[test]
fn a_bad_byte_on_stdout_does_not_end_the_connection() {
    let s = shell();
    let o = s.run(&["call", "--agent", "fake", "--input", "badbyte"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "caf\u{fffd} after\n");
}

/// A call that fails (here: its host cannot be reached) says why on
/// stderr; stdout, where a script reads the agent's answer, stays empty.
/// With `--json`, the object on stdout carries it in `error`.
#[test]
fn a_failed_call_says_why_on_stderr_and_in_the_json_error() {
    // Nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let s = common::shell::shell_with(&format!(
        "\n[hosts.closed]\nssh = \"127.0.0.1\"\nssh_args = [\"-p\", \"{port}\", \"-F\", \"/dev/null\"]\n\n\
         [agents.far]\ncommand = \"x\"\nhost = \"closed\"\n"
    ));
    let said = |text: &str| text.contains("host closed") && text.contains("Connection refused");
    let o = s.run(&["call", "--agent", "far", "--input", "echo hi"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "");
    assert!(said(&text(&o.stderr)), "{}", text(&o.stderr));
    let o = s.run(&["call", "--agent", "far", "--json", "--input", "echo hi"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(text(&o.stdout).trim())
        .unwrap_or_else(|e| panic!("{e}: {}", text(&o.stdout)));
    assert_eq!(
        (&v["stop_reason"], &v["output"]),
        (&"error".into(), &"".into())
    );
    assert!(said(v["error"].as_str().unwrap_or_default()), "{v}");
}

/// A git step that fails without a word is said once, plainly (it read
/// `exit status exit status: 1`): here `git stash create`, as a `git` on
/// PATH that fails it silently.
#[test]
fn a_git_step_that_fails_silently_is_said_plainly() {
    use std::os::unix::fs::PermissionsExt;
    let s = shell();
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "quorum.toml"],
        &["commit", "-q", "-m", "first"],
    ] {
        let o = common::git(s.dir.path())
            .args(args)
            .current_dir(s.dir.path())
            .output_bounded();
        assert!(o.status.success(), "git {args:?}: {}", text(&o.stderr));
    }
    let bin = tempfile::tempdir().unwrap();
    let git = bin.path().join("git");
    std::fs::write(
        &git,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = stash ] && exit 1; done\nexec {:?} \"$@\"\n",
            common::hermetic_path().join("git")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        common::hermetic_path().display()
    );
    let o = s.run_unwedged_with(
        &[
            "call",
            "--agent",
            "fake",
            "--worktree",
            "--input",
            "echo hi",
        ],
        &[("PATH", &path)],
    );
    assert_ne!(o.status.code(), Some(0));
    assert_eq!(text(&o.stdout), "");
    let err = text(&o.stderr);
    assert!(
        err.contains(
            "worktree: saving your uncommitted changes (git stash create) failed: git exited \
             with status 1 and said nothing"
        ),
        "{err}"
    );
}

/// `quorum call --code-review --json` carries the review's findings,
/// checked against the directory it ran in: one at a line past its
/// file's end and one with a severity not of the three are dropped, each
/// told on stderr; the review still counts by its header.
#[test]
fn a_reviews_findings_are_in_json() {
    let s = shell();
    std::fs::write(s.dir.path().join("lib.rs"), "fn old() {}\nfn added() {}\n").unwrap();
    let o = s.run(&[
        "call",
        "--agent",
        "fake",
        "--code-review",
        "--json",
        "--input",
        "findings b",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    assert_eq!(v["severity"], "yellow");
    assert_eq!(
        v["findings"],
        serde_json::json!([{
            "file": "lib.rs", "line": 1, "end_line": 2, "severity": "yellow",
            "title": "added() has no caller", "body": "Dead code here."
        }])
    );
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains("severity \"orange\" is not green, yellow or red")
            && stderr.contains("line 99 is past the end of lib.rs (2 lines)"),
        "{stderr}"
    );
}
