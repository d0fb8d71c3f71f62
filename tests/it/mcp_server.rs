//! quorum's MCP server in process (`serve::QuorumMcp`), on a session with
//! the fake agent: a failed call reads as the chat model reads it; a batch
//! still running after `sync_seconds` comes back with a task id for each
//! task still running and the report of each that ended, and goes on in
//! the background (its tasks in the board and the transcript as tasks); a
//! call its host cancels is cancelled.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum::acp::registry::Registry;
use quorum::confine::fsroot::Root;
use quorum::engine::{Session, SessionConfig};
use quorum::event::{Event, Stamped};
use quorum::llm::ToolCall;
use quorum::model_loop::ToolSet;
use quorum::serve::{McpOptions, QuorumMcp};
use quorum::subagent::tool::SubagentTool;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

fn session(dir: &std::path::Path) -> (Session, mpsc::UnboundedReceiver<Stamped>) {
    let config = dir.join("q.toml");
    std::fs::write(
        &config,
        format!(
            "[agents.fake]\ncommand = {:?}\n",
            env!("CARGO_BIN_EXE_quorum-fake-agent")
        ),
    )
    .unwrap();
    let registry = Registry::load_only(&config).unwrap();
    Session::start(
        SessionConfig::new(registry, Root::new(dir).unwrap()),
        Instant::now(),
    )
    .unwrap()
}

fn args(v: Value) -> Option<serde_json::Map<String, Value>> {
    match v {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

fn never() -> watch::Receiver<bool> {
    watch::channel(false).1
}

/// Every event sent so far.
fn drain(events: &mut mpsc::UnboundedReceiver<Stamped>) -> Vec<Event> {
    let mut out = Vec::new();
    while let Ok(s) = events.try_recv() {
        out.push(s.event);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_read_as_the_chat_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let (session, _events) = session(dir.path());
    let server = QuorumMcp::for_session(&session, McpOptions::default());
    let chat = SubagentTool::new(session.dispatcher().clone(), 0);
    for (name, arguments) in [
        ("subagent", json!({"agent": "nope", "input": "hi"})),
        ("subagent", json!({"agnet": "fake"})),
        (
            "subagent",
            json!({"agent": "fake", "tasks": [], "input": "x"}),
        ),
        ("subagent_status", json!({"task_id": "t9"})),
        ("subagent_status", json!({"cancel": true})),
    ] {
        let over_mcp = server
            .call(name, args(arguments.clone()), never(), None)
            .await
            .unwrap_err();
        let call = ToolCall {
            id: "1".into(),
            name: name.into(),
            arguments: arguments.to_string(),
        };
        let in_chat = ToolSet::call(&chat, call, never()).await.unwrap_err();
        // The chat model reads `error: ` and the error (model_loop/mod.rs).
        assert_eq!(over_mcp, format!("error: {in_chat}"), "{name} {arguments}");
    }
    // The tools listed are the chat's.
    let tools = server.tools();
    let specs = ToolSet::specs(&chat);
    assert_eq!(tools.len(), specs.len());
    for (tool, spec) in tools.iter().zip(&specs) {
        assert_eq!(tool.name, spec.name);
        assert_eq!(tool.description.as_deref(), Some(spec.description.as_str()));
        assert_eq!(Value::Object((*tool.input_schema).clone()), spec.parameters);
    }
    session.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_past_sync_seconds_goes_on_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let (session, mut events) = session(dir.path());
    let options = McpOptions {
        sync: Duration::from_secs(1),
        ..McpOptions::default()
    };
    let server = QuorumMcp::for_session(&session, options);
    let said = Arc::new(std::sync::Mutex::new(Vec::new()));
    let progress = {
        let said = said.clone();
        move |ms: u64, line: String| said.lock().unwrap().push((ms, line))
    };
    let started = Instant::now();
    let text = server
        .call(
            "subagent",
            args(json!({"tasks": [
                {"agent": "fake", "input": "slow 3"},
                {"agent": "fake", "input": "echo quick"},
                {"agent": "nope", "input": "never"},
            ]})),
            never(),
            Some(&progress),
        )
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "it did not wait"
    );
    let reply: Value = serde_json::from_str(&text).unwrap();
    let tasks = reply["tasks"].as_array().unwrap();
    assert_eq!(reply["batch_id"], "b1", "{reply}");
    assert_eq!(
        (tasks[0]["task"].as_u64(), tasks[0]["status"].as_str()),
        (Some(0), Some("running")),
        "{reply}"
    );
    let task_id = tasks[0]["task_id"].as_str().unwrap().to_string();
    assert_eq!(
        tasks[1],
        json!({"task": 1, "agent": "fake", "output": "quick", "stop_reason": "end_turn"})
    );
    assert_eq!(
        tasks[2],
        json!({"task": 2, "agent": "nope", "error": "tasks[2]: unknown agent \"nope\"; available: fake"})
    );
    assert!(
        reply["note"]
            .as_str()
            .unwrap()
            .contains(&format!("goes on in the background as task {task_id}")),
        "{reply}"
    );
    assert!(
        said.lock()
            .unwrap()
            .iter()
            .any(|(_, l)| l.starts_with("fake: ")),
        "{:?}",
        said.lock().unwrap()
    );

    // The task ends by itself; its report is `subagent_status`'s (which
    // waits no longer than `sync_seconds` a call: asked again, bounded).
    let mut status = Value::Null;
    for _ in 0..10 {
        let text = server
            .call(
                "subagent_status",
                args(json!({"task_id": task_id, "wait_seconds": 10})),
                never(),
                None,
            )
            .await
            .unwrap();
        status = serde_json::from_str(&text).unwrap();
        if status["state"] != "running" {
            break;
        }
    }
    assert_eq!(
        (status["state"].as_str(), status["output"].as_str()),
        (Some("done"), Some("working done")),
        "{status}"
    );
    // The transcript says so: the call became the task, and reported.
    let events = drain(&mut events);
    let backgrounded: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::SubagentBackgrounded { .. }))
        .collect();
    assert_eq!(backgrounded.len(), 1, "{events:?}");
    let Event::SubagentBackgrounded {
        call_id,
        task_id: t,
    } = backgrounded[0]
    else {
        unreachable!()
    };
    assert_eq!(t, &task_id);
    assert!(events.iter().any(|e| matches!(
        e,
        Event::TaskProgress { call_id: c, task_id: Some(t), .. } if c == call_id && *t == task_id
    )));
    session.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_its_host_cancels_is_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let (session, mut events) = session(dir.path());
    let server = QuorumMcp::for_session(&session, McpOptions::default());
    let (cancel_tx, cancel) = watch::channel(false);
    // The host cancels once the call runs (its box has started).
    tokio::spawn(async move {
        crate::common::events::until(&mut events, |e| matches!(e, Event::SubagentStarted { .. }))
            .await;
        let _ = cancel_tx.send(true);
    });
    let text = tokio::time::timeout(
        Duration::from_secs(20),
        server.call(
            "subagent",
            args(json!({"agent": "fake", "input": "slow 30"})),
            cancel,
            None,
        ),
    )
    .await
    .expect("a cancelled call ends")
    .unwrap();
    let reply: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(reply["stop_reason"], "cancelled", "{reply}");
    assert!(!session.busy());
    session.shutdown();
}

/// A review over MCP answers with its findings, as the chat's tool does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_over_mcp_carries_its_findings() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lib.rs"), "fn old() {}\nfn added() {}\n").unwrap();
    let (session, _events) = session(dir.path());
    let server = QuorumMcp::for_session(&session, McpOptions::default());
    let arguments = json!({"agent": "fake", "input": "findings b", "code_review": true});
    let answer = server
        .call("subagent", args(arguments), never(), None)
        .await
        .unwrap();
    let v: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(
        v["findings"],
        json!([{
            "file": "lib.rs", "line": 1, "end_line": 2, "severity": "yellow",
            "title": "added() has no caller", "body": "Dead code here."
        }]),
        "{answer}"
    );
    session.shutdown();
}
