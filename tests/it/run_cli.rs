//! `quorum run`: the chat loop headless, on the scripted model and the
//! fake ACP agent.

use crate::common;
use common::shell::stderr;

use common::Bounded;

use std::process::{Command, Output};

use quorum::event::{Event, Severity, Stamped};

struct Dir {
    dir: tempfile::TempDir,
    config: std::path::PathBuf,
}

fn dir() -> Dir {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quorum.toml");
    std::fs::write(
        &config,
        format!(
            "[agents.fake]\ncommand = {:?}\n",
            env!("CARGO_BIN_EXE_quorum-fake-agent")
        ),
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.txt"), "the notes say 42\n").unwrap();
    Dir { dir, config }
}

impl Dir {
    /// `quorum` with its state and config in this directory, never the
    /// real ones of whoever runs the tests.
    fn quorum(&self) -> Command {
        common::quorum(self.dir.path())
    }

    fn run(&self, script: serde_json::Value, extra: &[&str]) -> (Output, Vec<Event>) {
        let path = self
            .dir
            .path()
            .join(format!("script-{}.json", rand_suffix()));
        std::fs::write(&path, script.to_string()).unwrap();
        let out = self
            .quorum()
            .arg("--config")
            .arg(&self.config)
            .args(["run", "--json", "--model"])
            .arg(format!("script:{}", path.display()))
            .arg("--cwd")
            .arg(self.dir.path())
            .args(extra)
            .output_bounded();
        let events = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                serde_json::from_str::<Stamped>(l)
                    .unwrap_or_else(|e| panic!("{e}: {l}"))
                    .event
            })
            .collect();
        (out, events)
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn assistant_text(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Event::AssistantDelta { text } => Some(text.as_str()),
            Event::AssistantEnd => Some("|"),
            _ => None,
        })
        .collect()
}

#[test]
fn a_review_by_an_acp_agent_in_json_events() {
    let d = dir();
    let script = serde_json::json!([
        {"text": "Asking fake.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "review red", "code_review": true}}]},
        {"text": "The review is red."}
    ]);
    let (o, events) = d.run(script, &["-p", "review my change"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        matches!(&events[0], Event::SessionInfo { model: Some(m), agents } if m.starts_with("script:") && agents.contains(&"fake".to_string()))
    );
    // The prices costs are estimated with (the built-in agents'), then
    // the person's message.
    assert!(matches!(&events[1], Event::PricesSet { prices } if prices.contains_key("codex")));
    assert!(matches!(&events[2], Event::UserMessage { text } if text == "review my change"));
    assert_eq!(assistant_text(&events), "Asking fake.|The review is red.|");
    let finished = events.iter().find_map(|e| match e {
        Event::SubagentFinished {
            severity,
            stop_reason,
            ..
        } => Some((*severity, *stop_reason)),
        _ => None,
    });
    assert_eq!(
        finished,
        Some((Some(Severity::Red), quorum::event::StopReason::EndTurn))
    );
    // The box's events come between the two assistant messages.
    let started = events
        .iter()
        .position(|e| matches!(e, Event::SubagentStarted { .. }))
        .unwrap();
    let second = events
        .iter()
        .rposition(|e| matches!(e, Event::AssistantDelta { .. }))
        .unwrap();
    assert!(started < second);
}

#[test]
fn the_internal_agent_reads_a_real_file() {
    let d = dir();
    let script = serde_json::json!([
        {"tool_calls": [{"name": "subagent", "arguments": {"input": "What do the notes say?"}}]},
        {"text": "Reading.", "tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
        {"text": "They say 42."},
        {"text": "The internal agent says: 42."}
    ]);
    let (o, events) = d.run(script, &["-p", "what do the notes say?"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(events.iter().any(|e| matches!(
        e,
        Event::SubagentStarted {
            agent: quorum::event::AgentRef::Internal,
            ..
        }
    )));
    let tool = events.iter().find_map(|e| match e {
        Event::SubagentActivity {
            activity: quorum::event::Activity::ToolCall { title, .. },
            ..
        } => Some(title.clone()),
        _ => None,
    });
    assert_eq!(tool.as_deref(), Some("read path: notes.txt"));
    let finished = events.iter().find_map(|e| match e {
        Event::SubagentFinished { output, .. } => Some(output.clone()),
        _ => None,
    });
    assert_eq!(
        finished.as_deref(),
        Some("They say 42."),
        "only the final report"
    );
    assert!(assistant_text(&events).ends_with("The internal agent says: 42.|"));
}

#[test]
fn background_reports_are_delivered_before_exit_or_not_with_no_wait() {
    let d = dir();
    let script = || {
        serde_json::json!([
            {"text": "Started it.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "slow 1", "run_in_background": true}}]},
            {"text": "It is running."},
            {"text": "The task said: working done."}
        ])
    };
    let (o, events) = d.run(script(), &["-p", "go"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let reported: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::TaskReported { .. }))
        .collect();
    assert_eq!(reported.len(), 1, "delivered exactly once");
    assert!(matches!(reported[0], Event::TaskReported { task_id } if task_id == "t1"));
    // The report itself is the one the task's box finished with.
    assert!(events.iter().any(|e| matches!(e, Event::SubagentFinished { output, stop_reason: quorum::event::StopReason::EndTurn, .. } if output == "working done")));
    assert!(assistant_text(&events).ends_with("The task said: working done.|"));

    let (o, events) = d.run(script(), &["-p", "go", "--no-wait"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("still running"), "{}", stderr(&o));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::TaskReported { .. }))
    );
}

#[test]
fn failures_have_their_exit_codes() {
    let d = dir();
    // The model fails: exit 1, the error in the stream.
    let (o, events) = d.run(serde_json::json!([]), &["-p", "hi"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Error { text } if text.contains("no more turns"))),
        "{events:?}"
    );
    // A bad model spec: exit 2.
    let o = d
        .quorum()
        .args(["run", "-p", "hi", "--model", "nosuch:thing"])
        .output_bounded();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("nosuch"), "{}", stderr(&o));
    // No model at all: exit 2 with what to do.
    let o = d
        .quorum()
        .args(["run", "-p", "hi"])
        .env("XDG_CONFIG_HOME", d.dir.path())
        .output_bounded();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no chat model"), "{}", stderr(&o));
}

/// `--model script:FILE` in its object form, without the optional `log`:
/// it failed with `missing field log` at `0:0`.
#[test]
fn a_script_object_without_a_log_runs() {
    let d = dir();
    let script = serde_json::json!({"turns": [{"text": "scripted answer"}]});
    let (o, events) = d.run(script, &["-p", "hi"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(assistant_text(&events), "scripted answer|");
}

/// Options given before the subcommand apply to it: `quorum --model M run`
/// is `quorum run --model M`.
#[test]
fn global_model_options_apply_before_or_after_the_subcommand() {
    let d = dir();
    let script = d.dir.path().join("hello.json");
    std::fs::write(&script, r#"[{"text": "Hello from the script."}]"#).unwrap();
    let model = format!("script:{}", script.display());
    for args in [
        vec!["--model", model.as_str(), "run", "-p", "hi"],
        vec!["run", "-p", "hi", "--model", model.as_str()],
    ] {
        let out = d
            .quorum()
            .arg("--config")
            .arg(&d.config)
            .args(&args)
            .arg("--cwd")
            .arg(d.dir.path())
            .env("XDG_STATE_HOME", d.dir.path().join("state"))
            .output_bounded();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "Hello from the script."
        );
    }
}

/// A small model that names an agent that is not there (`"subagent"`) is
/// told it can leave `agent` out to use the internal agent.
#[test]
fn an_unknown_agent_error_says_to_omit_agent_for_the_internal_one() {
    let d = dir();
    let script = serde_json::json!([
        {"tool_calls": [{"name": "subagent", "arguments": {"agent": "subagent", "input": "read the notes"}}]},
        {"text": "Retrying without an agent."}
    ]);
    let (o, events) = d.run(script, &["-p", "read my notes"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let error = events
        .iter()
        .find_map(|e| match e {
            Event::Error { text } => Some(text.clone()),
            _ => None,
        })
        .expect("the tool's error is shown");
    assert!(error.contains("unknown agent \"subagent\""), "{error}");
    assert!(
        error.contains("to run the task on the internal agent instead, omit `agent`"),
        "{error}"
    );
}

/// A local model that writes its tool calls as text: the screen hears that
/// a call is being written, and how big it is; the same call written three
/// times, then a made-up result on the next line, runs once; calls
/// recovered in different answers get different ids.
#[test]
fn tool_calls_written_as_text_are_shown_run_once_and_told_apart() {
    let d = dir();
    let status = r#"{"name": "subagent_status", "arguments": {}}"#;
    let long_input = format!("echo {}", "checking the notes again ".repeat(20));
    let call = serde_json::json!({"name": "subagent", "arguments": {"agent": "fake", "input": long_input}}).to_string();
    let wall = format!(
        "{call}\n{call}\n{call}\n{{\"output\": \"made up\", \"stop_reason\": \"end_turn\"}}"
    );
    let script = serde_json::json!([
        {"text": status},
        {"text": wall},
        {"text": status},
        {"text": "done"}
    ]);
    let (o, events) = d.run(script, &["-p", "go"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The wall is written between the first status call and the box.
    let from = events
        .iter()
        .position(|e| matches!(e, Event::ToolCallStarted { .. }))
        .unwrap();
    let to = events
        .iter()
        .position(|e| matches!(e, Event::SubagentStarted { .. }))
        .unwrap();
    let writing: Vec<u64> = events[from..to]
        .iter()
        .filter_map(|e| match e {
            Event::AssistantWritingCall { bytes } => Some(*bytes),
            _ => None,
        })
        .collect();
    assert!(writing.len() >= 3, "{writing:?}");
    assert!(writing.windows(2).all(|w| w[0] < w[1]), "{writing:?}");
    assert!(*writing.iter().max().unwrap() > 1024, "{writing:?}");
    let boxes = events
        .iter()
        .filter(|e| matches!(e, Event::SubagentStarted { .. }))
        .count();
    assert_eq!(boxes, 1, "the repeated call ran once");
    assert!(
        !assistant_text(&events).contains("made up"),
        "{}",
        assistant_text(&events)
    );
    let ids: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCallStarted { id, name, .. } if name == "subagent_status" => {
                Some(id.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_ne!(ids[0], ids[1]);
    assert_eq!(assistant_text(&events), "done|");
}
