//! Errors with their detail (issue 18, item 6): an agent's JSON-RPC error
//! `{"code":-32602,"message":"Invalid params","data":"the model name
//! 'gpt-9' is not available for this account"}` shows its `data` with its
//! message, in the box, in `quorum call` output and `--json`, and in the
//! tool result the chat model reads. (Before, only `Invalid params` was
//! shown.)

use crate::common;

use common::app::*;
use common::shell::{shell, shell_with};
use quorum::agent::Permissions;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const DETAIL: &str = "Invalid params: the model name 'gpt-9' is not available for this account";

#[test]
fn a_prompt_answered_with_an_error_shows_its_data_in_call_output_and_json() {
    let s = shell();
    let o = s.run(&["call", "--agent", "fake", "--input", "rpcerror"]);
    assert_ne!(o.status.code(), Some(0));
    // An error is no answer: stderr says it, stdout stays empty.
    assert_eq!(out(&o.stdout), "");
    assert!(
        out(&o.stderr).contains(&format!("\nfake: {DETAIL}\n")),
        "{}",
        out(&o.stderr)
    );
    let o = s.run(&["call", "--agent", "fake", "--json", "--input", "rpcerror"]);
    let line: serde_json::Value = serde_json::from_str(out(&o.stdout).trim()).unwrap();
    assert_eq!(line["error"], format!("fake: {DETAIL}"));
    assert_eq!(line["output"], "");
    assert_eq!(line["stop_reason"], "error");
}

#[test]
fn a_session_new_answered_with_an_error_shows_its_data() {
    let s = shell_with("args = [\"--new-error\"]\n");
    let o = s.run(&["call", "--agent", "fake", "--json", "--input", "echo hi"]);
    let line: serde_json::Value = serde_json::from_str(out(&o.stdout).trim()).unwrap();
    assert_eq!(
        line["error"],
        format!("fake: session/new failed: {DETAIL}"),
        "{}",
        out(&o.stderr)
    );
    assert_eq!(line["stop_reason"], "error");
}

#[tokio::test]
async fn the_box_shows_the_errors_data() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(dir.path(), "", None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(200, 30)).unwrap();
    drive(&mut terminal, &mut app, line("@fake rpcerror"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("Invalid params")
    })
    .await;
    let screen = text(&terminal);
    assert!(screen.contains(DETAIL), "{screen}");
}

#[test]
fn the_chat_model_reads_the_errors_data_in_the_tool_result() {
    let s = shell();
    let script = s.dir.path().join("chat.json");
    std::fs::write(
        &script,
        serde_json::json!({
            "turns": [
                {"text": "Asking.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "rpcerror"}}]},
                {"text": "It failed."}
            ],
            "log": "chat.log",
        })
        .to_string(),
    )
    .unwrap();
    let model = format!("script:{}", script.display());
    let o = s.run_unwedged(&["run", "--approve", "all", "--model", &model, "-p", "go"]);
    assert!(o.status.success(), "{}", out(&o.stderr));
    let log = std::fs::read_to_string(s.dir.path().join("chat.log")).unwrap();
    let requests: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(requests.len(), 2, "{log}");
    let second = requests[1].to_string();
    // The tool result is JSON inside the request's JSON: its quotes are
    // escaped twice over; the detail's words are there as they are.
    assert!(
        second.contains("the model name 'gpt-9' is not available for this account"),
        "{second}"
    );
    assert!(second.contains("Invalid params"), "{second}");
}

fn out(b: &[u8]) -> String {
    common::shell::text(b)
}
