//! The chat's conductor (`--model acp:NAME`, issue 25): an ACP agent as
//! the chat, against the fake agent. Its text and tool lines are the
//! chat's, its session is recorded and reattached by a continued session,
//! and a bad name is a clear error.

use crate::common;

use common::shell::{shell_with, text};

/// The fake agent as `fake`, keeping its sessions on disk (so a new
/// process can resume them).
fn conducted() -> common::shell::Shell {
    let s = shell_with("args = [\"--store\", \"store\"]\n");
    std::fs::create_dir(s.dir.path().join("store")).unwrap();
    s
}

fn events(stdout: &[u8]) -> Vec<serde_json::Value> {
    text(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn the_conductors_text_and_tool_lines_are_the_chats() {
    let s = conducted();
    let o = s.run_unwedged(&[
        "run",
        "--json",
        "--no-record",
        "--model",
        "acp:fake",
        "-p",
        "tools",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let events = events(&o.stdout);
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(events[0]["model"], "acp:fake");
    let said: String = events
        .iter()
        .filter(|e| e["type"] == "assistant_delta")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(said, "Let me look.Still looking.Final answer.");
    let tools: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool_call_started")
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(tools, ["Read README.md", "Search \"fn main\""]);
    assert_eq!(
        kinds.iter().filter(|k| **k == "tool_call_finished").count(),
        2
    );
    assert!(kinds.contains(&"conductor_session"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"turn_ended"));
    // Headless, the plain output is its final message.
    let o = s.run_unwedged(&[
        "run",
        "--no-record",
        "--model",
        "acp:fake",
        "-p",
        "echo hi there",
    ]);
    assert_eq!(text(&o.stdout), "hi there\n");
}

/// A continued session reattaches the conductor's session: the fake
/// agent counts the turns of the session it is prompted on.
#[test]
fn a_continued_session_reattaches_the_conductors_session() {
    let s = conducted();
    let record = s.dir.path().join("chat.jsonl");
    let record = record.to_str().unwrap();
    let o = s.run_unwedged(&[
        "run", "--record", record, "--model", "acp:fake", "-p", "turns",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "turns: 1\n");
    let o = s.run_unwedged(&[
        "run", "--json", "--resume", record, "--model", "acp:fake", "-p", "turns",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let events = events(&o.stdout);
    let session = events
        .iter()
        .find(|e| e["type"] == "conductor_session")
        .expect("the conductor's session");
    assert_eq!(session["session"], "resumed", "{session}");
    let said: String = events
        .iter()
        .filter(|e| e["type"] == "assistant_delta")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(said, "turns: 2");
}

#[test]
fn an_unknown_or_missing_conductor_is_named() {
    let s = conducted();
    let o = s.run_unwedged(&["run", "--no-record", "--model", "acp:nope", "-p", "hi"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stderr),
        "quorum: --model acp:nope: unknown agent \"nope\"; available: fake\n"
    );
    let o = s.run_unwedged(&["run", "--no-record", "--model", "acp:claude", "-p", "hi"]);
    assert!(
        text(&o.stderr).starts_with("quorum: --model acp:claude: claude is not installed"),
        "{}",
        text(&o.stderr)
    );
}

/// A TUI session (the app loop) whose chat is the fake agent as its
/// conductor: its directory, the session, the app and the session's events.
fn conducted_app() -> (
    tempfile::TempDir,
    quorum::engine::Session,
    quorum::tui::app::App,
    tokio::sync::mpsc::UnboundedReceiver<quorum::event::Stamped>,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.toml");
    std::fs::write(
        &path,
        format!(
            "[agents.fake]\ncommand = {:?}\n",
            env!("CARGO_BIN_EXE_quorum-fake-agent")
        ),
    )
    .unwrap();
    let registry = quorum::acp::registry::Registry::load_only(&path).unwrap();
    let root = quorum::confine::fsroot::Root::new(dir.path()).unwrap();
    let mut config = quorum::engine::SessionConfig::new(registry, root);
    config.conductor = Some("fake".into());
    let started = std::time::Instant::now();
    let (mut session, events) = quorum::engine::Session::start(config, started).unwrap();
    let app = quorum::tui::app::App::live(session.serve(), started);
    (dir, session, app, events)
}

/// In the TUI, the conductor's usage is in the status line, and its own
/// permission request is a line of the chat the digit keys answer, as a
/// box's is; the status line counts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conductors_permission_request_is_answered_with_the_digit_keys() {
    use common::app::{drive, key, line, until};
    use ratatui::crossterm::event::KeyCode;
    let (_dir, session, mut app, mut events) = conducted_app();
    let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(150, 30)).unwrap();
    // Its context and cost (`usage_update`) are the status line's.
    drive(
        &mut terminal,
        &mut app,
        line("usage 12000 200000 0.04"),
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut events, |s| {
        s.contains("chat 12k / 200k tokens · $0.04")
    })
    .await;
    drive(&mut terminal, &mut app, line("permission"), vec![]).await;
    until(&mut terminal, &mut app, &mut events, |s| {
        s.contains("fake asks: Delete build/")
    })
    .await;
    let screen = common::app::text(&terminal);
    assert!(
        screen.contains("[1 Allow once · 2 Allow always · 3 Reject]"),
        "{screen}"
    );
    assert!(screen.contains("? 1 needs you"), "{screen}");
    assert!(screen.contains("acp:fake"), "{screen}");
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Char('1'))],
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut events, |s| {
        s.contains("permitted")
    })
    .await;
    let screen = common::app::text(&terminal);
    assert!(screen.contains("→ Allow once"), "{screen}");
    assert!(!screen.contains("needs you"), "{screen}");
    session.shutdown();
}

/// The sub-agent events of a run, as the screen and the transcript read
/// them: times and session ids (which differ from run to run) left out.
fn subagent_events(events: &[serde_json::Value]) -> Vec<serde_json::Value> {
    events
        .iter()
        .filter(|e| {
            let kind = e["type"].as_str().unwrap_or_default();
            kind.starts_with("subagent") || kind.starts_with("task_") || kind.starts_with("batch")
        })
        .map(|e| {
            let mut e = e.clone();
            let o = e.as_object_mut().unwrap();
            o.remove("t");
            o.remove("session_id");
            e
        })
        .collect()
}

/// The built-in chat (a scripted model) and a conductor (the fake agent,
/// calling quorum's tool over MCP with the official SDK's client) make the
/// same `subagent` call: the same events, and the same reply comes back.
#[test]
fn the_built_in_chat_and_a_conductor_make_the_same_call() {
    let s = conducted();
    let call = serde_json::json!({"agent": "fake", "input": "echo the same box"});
    let script = s.dir.path().join("script.json");
    std::fs::write(
        &script,
        serde_json::json!([
            {"tool_calls": [{"name": "subagent", "arguments": call}]},
            {"text": "done"}
        ])
        .to_string(),
    )
    .unwrap();
    let model = format!("script:{}", script.display());
    let o = s.run_unwedged(&[
        "run",
        "--json",
        "--no-record",
        "--model",
        &model,
        "-p",
        "go",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let built_in = events(&o.stdout);
    let prompt = format!("mcp subagent {call}");
    let o = s.run_unwedged(&[
        "run",
        "--json",
        "--no-record",
        "--model",
        "acp:fake",
        "-p",
        &prompt,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let conducted = events(&o.stdout);
    let (a, b) = (subagent_events(&built_in), subagent_events(&conducted));
    assert!(!a.is_empty());
    assert_eq!(a, b);
    // The tool's reply reached the conductor, which said it.
    let said: String = conducted
        .iter()
        .filter(|e| e["type"] == "assistant_delta")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(
        said,
        r#"mcp: {"output":"the same box","stop_reason":"end_turn"}"#
    );
    // Its own line for the call (and the permission quorum gave itself) is
    // the box: not drawn twice.
    let kinds: Vec<&str> = conducted
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert!(!kinds.contains(&"tool_call_started"), "{kinds:?}");
    assert!(!kinds.contains(&"chat_activity"), "{kinds:?}");
}

/// A background task the conductor started reports back to it as a new
/// prompt, marked as quorum's, once, when it ends.
#[test]
fn a_background_report_reaches_the_conductor() {
    let s = conducted();
    let call = serde_json::json!({"agent": "fake", "input": "slow 1", "run_in_background": true});
    let prompt = format!("mcp subagent {call}");
    let o = s.run_unwedged(&[
        "run",
        "--json",
        "--no-record",
        "--model",
        "acp:fake",
        "-p",
        &prompt,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let events = events(&o.stdout);
    let reported: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "task_reported")
        .collect();
    assert_eq!(reported.len(), 1, "{}", text(&o.stdout));
    // The conductor's second prompt is the report.
    let prompts: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "chat_message" && e["message"]["role"] == "user")
        .filter_map(|e| e["message"]["content"].as_str())
        .collect();
    assert_eq!(prompts.len(), 2, "{prompts:?}");
    assert!(
        prompts[1].starts_with(
            "[automated message] Background task t1 (fake) finished with stop reason end_turn"
        ) && prompts[1].contains("working done"),
        "{}",
        prompts[1]
    );
}

/// A conductor that dies mid-turn: the turn ends with an error naming it,
/// and the next message starts it again (said).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conductor_that_dies_is_named_and_started_again() {
    use common::app::{drive, line, until, until_event};
    use quorum::event::{Event, StopReason};
    let (_dir, session, mut app, mut events) = conducted_app();
    let mut terminal = ratatui::Terminal::new(ratatui::backend::TestBackend::new(150, 30)).unwrap();
    drive(&mut terminal, &mut app, line("crash"), vec![]).await;
    // Its turn ends, an error...
    let ended = until_event(&mut terminal, &mut app, &mut events, |e| {
        matches!(e, Event::TurnEnded { .. })
    })
    .await;
    assert!(
        matches!(ended, Event::TurnEnded { stop_reason } if stop_reason == StopReason::Error),
        "{ended:?}"
    );
    // ...that names it; the status line says no more that it works.
    until(&mut terminal, &mut app, &mut events, |s| {
        s.contains("✗ fake: ")
    })
    .await;
    let screen = common::app::text(&terminal);
    assert!(!screen.contains("chat working"), "{screen}");
    drive(&mut terminal, &mut app, line("echo back again"), vec![]).await;
    // Its answer: a line of its own (the person's message says `echo`).
    until(&mut terminal, &mut app, &mut events, |s| {
        s.lines()
            .any(|l| l.split('│').next().unwrap_or("").trim() == "back again")
    })
    .await;
    let screen = common::app::text(&terminal);
    assert!(screen.contains("fake had exited"), "{screen}");
    assert!(screen.contains("starting it again"), "{screen}");
    session.shutdown();
}

/// A sandboxed conductor (`sandbox = "bwrap"`: its process under
/// bubblewrap, whose seccomp filter refuses Unix sockets) still reaches
/// quorum's tools: it is given their socket, and that socket alone.
#[test]
fn a_sandboxed_conductor_reaches_quorums_tools() {
    let s = shell_with("sandbox = \"bwrap\"\n");
    let call = serde_json::json!({"agent": "fake", "input": "echo from the sandbox"});
    let prompt = format!("mcp subagent {call}");
    let o = s.run_unwedged(&[
        "run",
        "--json",
        "--no-record",
        "--model",
        "acp:fake",
        "-p",
        &prompt,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let said: String = events(&o.stdout)
        .iter()
        .filter(|e| e["type"] == "assistant_delta")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(
        said,
        r#"mcp: {"output":"from the sandbox","stop_reason":"end_turn"}"#
    );
}
