//! Sessions used as the protocol means (issue 18, item 8): a stored
//! session still open on the agent's live connection is prompted
//! directly, with no `session/load` or `session/resume` (the badge says
//! `continued`); a restarted agent reopens it as before; sessions quorum
//! is done with are closed with `session/close` where the agent offers it.
//!
//! Found with mistral-vibe: quorum's second call sent `session/load` for
//! the session already open in that process, vibe ran it twice and sent
//! every update twice, and quorum printed doubled text. The fake agent's
//! `--double-on-reload` behaves so; `--sessions FILE` logs each session
//! request it gets.

use crate::common;

use std::path::Path;

use common::app::*;
use common::shell::shell_with;
use quorum::agent::Permissions;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn out(b: &[u8]) -> String {
    common::shell::text(b)
}

/// The session requests the fake agent logged: `(what, id)`.
fn requests(file: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let (what, id) = l.split_once(' ').unwrap();
            (what.to_string(), id.to_string())
        })
        .collect()
}

fn json_lines(o: &std::process::Output) -> Vec<serde_json::Value> {
    out(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A second call on a live session sends no load (the agent loads, as
/// vibe does) and its output is not doubled; the session is closed when
/// the call ends.
#[test]
fn a_second_call_on_a_live_session_prompts_it_directly_and_is_not_doubled() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sessions.log");
    let s = shell_with(&format!(
        "args = [\"--no-resume\", \"--double-on-reload\", \"--close\", \"--sessions\", {:?}]\n",
        log.display().to_string()
    ));
    let o = s.run(&[
        "call",
        "--agent",
        "fake",
        "--json",
        "--input",
        "echo First answer MANGO-1.",
        "--input",
        "echo Second answer MANGO-2.",
        "--input",
        "turns",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o.stderr));
    let lines = json_lines(&o);
    let outputs: Vec<&str> = lines
        .iter()
        .map(|l| l["output"].as_str().unwrap())
        .collect();
    assert_eq!(
        outputs,
        [
            "First answer MANGO-1.",
            "Second answer MANGO-2.",
            "turns: 3"
        ]
    );
    let kinds: Vec<&str> = lines
        .iter()
        .map(|l| l["session"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["fresh", "continued", "continued"]);
    let id = lines[0]["session_id"].as_str().unwrap().to_string();
    assert!(lines.iter().all(|l| l["session_id"] == id.as_str()));
    // One session/new, no load or resume; closed at the end of the call.
    assert_eq!(
        requests(&log),
        [("new".to_string(), id.clone()), ("close".to_string(), id)]
    );
}

/// Without `sessionCapabilities.close`, nothing is closed (and the
/// second call still continues its session).
#[test]
fn an_agent_that_offers_no_close_is_sent_none() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sessions.log");
    let s = shell_with(&format!(
        "args = [\"--sessions\", {:?}]\n",
        log.display().to_string()
    ));
    let o = s.run(&[
        "call", "--agent", "fake", "--json", "--input", "turns", "--input", "turns",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o.stderr));
    let kinds: Vec<String> = json_lines(&o)
        .iter()
        .map(|l| l["session"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["fresh", "continued"]);
    let whats: Vec<String> = requests(&log).into_iter().map(|(w, _)| w).collect();
    assert_eq!(whats, ["new"]);
}

/// A connection that died and was started again has nothing open: the
/// stored session is reopened (resumed) on the new process, as before.
#[test]
fn a_restarted_agent_resumes_the_stored_session() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sessions.log");
    let store = dir.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    let s = shell_with(&format!(
        "args = [\"--close\", \"--double-on-reload\", \"--store\", {:?}, \"--sessions\", {:?}]\n",
        store.display().to_string(),
        log.display().to_string()
    ));
    let o = s.run(&[
        "call", "--agent", "fake", "--json", "--input", "turns", "--input", "crash", "--input",
        "turns",
    ]);
    let lines = json_lines(&o);
    assert_eq!(lines.len(), 3, "{}", out(&o.stderr));
    let kinds: Vec<&str> = lines
        .iter()
        .map(|l| l["session"].as_str().unwrap())
        .collect();
    // The crash's turn ran on the open session; after it the agent was
    // started again and the session resumed on it.
    assert_eq!(kinds, ["fresh", "continued", "resumed"]);
    assert_eq!(lines[1]["stop_reason"], "error");
    // The resumed session is the first one: its turn before the crash
    // (which never ended, and is not stored) and this one.
    assert_eq!(lines[2]["output"], "turns: 2");
    let id = lines[0]["session_id"].as_str().unwrap().to_string();
    assert_eq!(
        requests(&log),
        [
            ("new".to_string(), id.clone()),
            ("resume".to_string(), id.clone()),
            ("close".to_string(), id)
        ]
    );
}

/// `/new` closes the sessions it forgets.
#[tokio::test]
async fn slash_new_closes_the_agents_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sessions.log");
    let extra = format!(
        "args = [\"--close\", \"--sessions\", {:?}]\n",
        log.display().to_string()
    );
    let (_session, mut app, mut ev_rx) =
        live_session(dir.path(), &extra, None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    drive(
        &mut terminal,
        &mut app,
        line("@fake echo hello there"),
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| s.contains("✓")).await;
    assert_eq!(requests(&log).len(), 1, "{:?}", requests(&log));
    drive(&mut terminal, &mut app, line("/new"), vec![]).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while requests(&log).len() < 2 {
        assert!(std::time::Instant::now() < deadline, "{:?}", requests(&log));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let log = requests(&log);
    assert_eq!(log[0].0, "new");
    assert_eq!(log[1], ("close".to_string(), log[0].1.clone()));
}

/// The fake agent behaves as vibe did: a `session/load` of a session open
/// in its process makes it send every later update twice (what quorum's
/// second call got before it prompted open sessions directly).
#[test]
fn the_fake_agent_doubles_updates_after_a_load_of_an_open_session() {
    use std::io::{BufRead, BufReader, Write};
    let mut agent = std::process::Command::new(env!("CARGO_BIN_EXE_quorum-fake-agent"))
        .args(["--no-resume", "--double-on-reload"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = agent.stdin.take().unwrap();
    let mut stdout = BufReader::new(agent.stdout.take().unwrap());
    let mut send = |value: serde_json::Value| {
        writeln!(stdin, "{value}").unwrap();
        stdin.flush().unwrap();
    };
    // Reads messages up to the answer to request `id`; returns the text of
    // the agent message chunks seen on the way.
    let mut answer = |id: u64| -> (serde_json::Value, String) {
        let mut text = String::new();
        loop {
            let mut line = String::new();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "the agent ended");
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return (v, text);
            }
            let update = &v["params"]["update"];
            if update["sessionUpdate"] == "agent_message_chunk" {
                text.push_str(update["content"]["text"].as_str().unwrap_or_default());
            }
        }
    };
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1}}),
    );
    answer(1);
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
        "params": {"cwd": "/tmp", "mcpServers": []}}),
    );
    let id = answer(2).0["result"]["sessionId"].clone();
    let prompt = |n: u64| {
        serde_json::json!({"jsonrpc": "2.0", "id": n, "method": "session/prompt",
            "params": {"sessionId": id, "prompt": [{"type": "text", "text": "echo abc"}]}})
    };
    send(prompt(3));
    assert_eq!(answer(3).1, "abc");
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 4, "method": "session/load",
        "params": {"sessionId": id, "cwd": "/tmp", "mcpServers": []}}),
    );
    answer(4);
    send(prompt(5));
    assert_eq!(answer(5).1, "aabbcc", "every update twice");
    drop(stdin);
    common::wait_bounded(&mut agent, "the fake agent after its stdin closed");
}

/// Quitting the TUI closes the agents' sessions before it stops them.
#[cfg(target_os = "linux")]
#[test]
fn quitting_closes_the_agents_sessions() {
    use common::pty::{Terminal, wait_until};
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sessions.log");
    let config = dir.path().join("quorum.toml");
    std::fs::write(
        &config,
        format!(
            "[agents.fake]\ncommand = {:?}\nargs = [\"--close\", \"--sessions\", {:?}]\n",
            env!("CARGO_BIN_EXE_quorum-fake-agent"),
            log.display().to_string()
        ),
    )
    .unwrap();
    let terminal = Terminal::open(100, 30);
    let mut quorum = terminal.spawn(
        common::quorum(dir.path())
            .arg("--config")
            .arg(&config)
            .arg("--no-record")
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .current_dir(dir.path()),
        std::process::Stdio::null(),
    );
    /// Kills quorum if the test fails.
    struct Guard<'a>(&'a mut std::process::Child, bool);
    impl Drop for Guard<'_> {
        fn drop(&mut self) {
            if !self.1 {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
    }
    let mut guard = Guard(&mut quorum, false);
    terminal.wait_for("Ctrl+C quits");
    terminal.type_keys(b"@fake echo all done\r");
    terminal.wait_for_screen(|s| s.contents().contains("all done") && s.contents().contains("✓"));
    assert_eq!(requests(&log).len(), 1, "{:?}", requests(&log));
    terminal.type_keys(b"\x03");
    assert!(wait_until(Duration::from_secs(30), || guard
        .0
        .try_wait()
        .unwrap()
        .is_some()));
    guard.1 = true;
    let log = requests(&log);
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[1], ("close".to_string(), log[0].1.clone()));
}

/// A turn the agent answered with an error leaves its session open: the
/// next call prompts it as it is, not reloaded (and so not doubled).
#[test]
fn an_error_answer_keeps_the_session_open() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sessions.log");
    let s = shell_with(&format!(
        "args = [\"--double-on-reload\", \"--sessions\", {:?}]\n",
        log.display().to_string()
    ));
    let o = s.run(&[
        "call",
        "--agent",
        "fake",
        "--json",
        "--input",
        "turns",
        "--input",
        "rpcerror",
        "--input",
        "echo still one",
    ]);
    let lines = json_lines(&o);
    let kinds: Vec<&str> = lines
        .iter()
        .map(|l| l["session"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["fresh", "continued", "continued"],
        "{}",
        out(&o.stderr)
    );
    assert_eq!(lines[1]["stop_reason"], "error");
    assert_eq!(lines[2]["output"], "still one");
    let whats: Vec<String> = requests(&log).into_iter().map(|(w, _)| w).collect();
    assert_eq!(whats, ["new"]);
}
