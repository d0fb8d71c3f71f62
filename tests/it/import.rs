//! `quorum import claude|codex FILE`: session logs written by the agents'
//! own code (tests/fixtures/import/, made by scripts/make-import-fixtures.sh
//! with Claude Code and codex-acp run offline against the fake model
//! servers) become transcripts that quorum's reader loads and its screen
//! draws: the prompt, the answer, a box per sub-agent with its report, and
//! the review's verdict as the box's colour.

use crate::common;
use common::shell::text;

use common::Bounded;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{box_colour, rows, screen};
use quorum::event::{Activity, AgentRef, Event, Severity, StopReason, TaskState, build};
use quorum::transcript;
use ratatui::style::Color;

const PROMPT: &str = "inspect delegate inspect review red";
const ANSWER: &str = "Delegated; the sub-agent's report is in.";
const REPORT: &str = "## Review\nLooks red.";

fn fixtures() -> PathBuf {
    common::fixture("import")
}

/// The Claude Code session log: the one `.jsonl` in its project directory.
fn claude_log() -> PathBuf {
    let projects = fixtures().join("claude/projects");
    let mut found = Vec::new();
    for project in std::fs::read_dir(&projects).unwrap() {
        for entry in std::fs::read_dir(project.unwrap().path()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                found.push(path);
            }
        }
    }
    assert_eq!(found.len(), 1, "one session under {}", projects.display());
    found.pop().unwrap()
}

/// The codex rollouts: the session's and its sub-agent's (whose
/// `session_meta` names the thread that spawned it).
fn codex_logs() -> (PathBuf, PathBuf) {
    let mut main = Vec::new();
    let mut child = Vec::new();
    let mut stack = vec![fixtures().join("codex/sessions")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let text = std::fs::read_to_string(&path).unwrap();
                let meta: serde_json::Value =
                    serde_json::from_str(text.lines().next().unwrap()).unwrap();
                match meta["payload"]["parent_thread_id"].as_str() {
                    Some(_) => child.push(path),
                    None => main.push(path),
                }
            }
        }
    }
    assert_eq!((main.len(), child.len()), (1, 1), "{main:?} {child:?}");
    (main.pop().unwrap(), child.pop().unwrap())
}

/// `quorum ARGS` in `dir`.
fn quorum(dir: &Path, args: &[&str]) -> Output {
    common::quorum(dir)
        .args(args)
        .current_dir(dir)
        .env("XDG_STATE_HOME", dir.join("state"))
        .output_bounded()
}

/// `quorum import TOOL FILE -o OUT` in a fresh directory: the transcript
/// loaded by quorum's own reader, and stderr.
fn import(tool: &str, file: &Path) -> (tempfile::TempDir, PathBuf, Vec<Event>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("imported.jsonl");
    let run = quorum(
        dir.path(),
        &[
            "import",
            tool,
            file.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
    );
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let loaded = transcript::load(&out).unwrap_or_else(|e| panic!("{e}"));
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.header.format, "quorum-transcript");
    let events = loaded.events.into_iter().map(|s| s.event).collect();
    (dir, out, events, stderr)
}

/// What the person sees of the main conversation: prompts, the
/// assistant's text, tool calls by name with their summaries.
fn conversation(events: &[Event]) -> (Vec<String>, String, Vec<(String, String, bool)>) {
    let prompts = events
        .iter()
        .filter_map(|e| match e {
            Event::UserMessage { text } => Some(text.clone()),
            _ => None,
        })
        .collect();
    let answer = events
        .iter()
        .filter_map(|e| match e {
            Event::AssistantDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let mut tools = Vec::new();
    for e in events {
        if let Event::ToolCallStarted { id, name, summary } = e {
            let ok = events.iter().any(
                |f| matches!(f, Event::ToolCallFinished { id: fid, ok: true, .. } if fid == id),
            );
            tools.push((name.clone(), summary.clone(), ok));
        }
    }
    (prompts, answer, tools)
}

/// The one sub-agent box: its start and its end.
fn the_subagent(events: &[Event]) -> (&Event, &Event) {
    let started: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::SubagentStarted { .. }))
        .collect();
    let finished: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::SubagentFinished { .. }))
        .collect();
    assert_eq!((started.len(), finished.len()), (1, 1), "{events:#?}");
    (started[0], finished[0])
}

/// The sub-agent's own tool calls, by title.
fn subagent_tools(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentActivity {
                activity: Activity::ToolCall { title, .. },
                ..
            } => Some(title.clone()),
            _ => None,
        })
        .collect()
}

/// The board's last snapshot of the call: the side panel's numbers.
fn last_progress(events: &[Event]) -> (TaskState, u32, Option<Severity>) {
    events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::TaskProgress { summary, .. } => {
                Some((summary.state, summary.tool_calls, summary.severity))
            }
            _ => None,
        })
        .expect("a task_progress snapshot")
}

/// The screen after the transcript, as `quorum replay --screenshot`
/// draws it: the box titled `agent` is there, holds the report, and is
/// red.
fn assert_red_box(out: &Path, agent: &str) {
    let loaded = transcript::load(out).unwrap();
    let buf = screen(&loaded.events, 120, 40, None);
    let shown = rows(&buf).join("\n");
    assert_eq!(box_colour(&buf, agent), Color::Red, "{shown}");
    assert!(shown.contains("Looks red."), "{shown}");
    assert!(shown.contains(&format!("› {PROMPT}")), "{shown}");
    assert!(shown.contains(ANSWER), "{shown}");
    assert!(
        !shown.contains("severity:"),
        "the header is stripped: {shown}"
    );
}

#[test]
fn a_claude_code_session_replays_with_its_subagent_in_a_red_box() {
    let (_dir, out, events, stderr) = import("claude", &claude_log());
    assert!(!stderr.contains("skipped"), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let (prompts, answer, tools) = conversation(&events);
    assert_eq!(prompts, [PROMPT]);
    assert_eq!(answer, ANSWER);
    assert_eq!(tools, [("Bash".to_string(), "ls".to_string(), true)]);
    let (started, finished) = the_subagent(&events);
    let Event::SubagentStarted {
        agent,
        input,
        code_review,
        ..
    } = started
    else {
        unreachable!()
    };
    assert_eq!(agent, &AgentRef::Acp("general-purpose".into()));
    assert_eq!(input, "inspect review red");
    assert!(code_review, "a report with a severity header is a review");
    let Event::SubagentStarted { call_id, .. } = started else {
        unreachable!()
    };
    assert_eq!(
        finished,
        &build::finished(call_id, REPORT)
            .stop(StopReason::EndTurn)
            .severity(Severity::Red)
            .event()
    );
    assert_eq!(subagent_tools(&events), ["Bash ls"]);
    assert_eq!(
        last_progress(&events),
        (TaskState::Done, 1, Some(Severity::Red))
    );
    assert!(matches!(
        events.last(),
        Some(Event::TurnEnded {
            stop_reason: StopReason::EndTurn
        })
    ));
    assert_red_box(&out, "general-purpose");
}

#[test]
fn a_codex_rollout_replays_with_its_spawned_agent_in_a_red_box() {
    let (main, child) = codex_logs();
    // codex names each sub-agent; the box is titled with that name.
    let meta: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(&child)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let nickname = meta["payload"]["agent_nickname"].as_str().unwrap();
    let (_dir, out, events, stderr) = import("codex", &main);
    assert!(!stderr.contains("skipped"), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    assert!(
        stderr.contains("(2 files)"),
        "read the sub-agent's rollout: {stderr}"
    );
    let (prompts, answer, tools) = conversation(&events);
    assert_eq!(prompts, [PROMPT]);
    assert_eq!(answer, ANSWER);
    assert_eq!(
        tools,
        [
            ("exec_command".to_string(), "ls".to_string(), true),
            ("wait_agent".to_string(), String::new(), true),
        ]
    );
    let (started, finished) = the_subagent(&events);
    assert!(
        matches!(started, Event::SubagentStarted { agent, input, code_review: true, .. }
            if agent == &AgentRef::Acp(nickname.into()) && input == "inspect review red"),
        "{started:?}"
    );
    assert!(
        matches!(finished, Event::SubagentFinished { output, stop_reason: StopReason::EndTurn, severity: Some(Severity::Red), .. }
            if output == REPORT),
        "{finished:?}"
    );
    assert_eq!(subagent_tools(&events), ["exec_command ls"]);
    assert_eq!(
        last_progress(&events),
        (TaskState::Done, 1, Some(Severity::Red))
    );
    assert_red_box(&out, nickname);
}

#[test]
fn the_replay_command_screenshots_an_imported_session() {
    let (dir, out, _, _) = import("claude", &claude_log());
    let shot = dir.path().join("shot.txt");
    let run = quorum(
        dir.path(),
        &[
            "replay",
            out.to_str().unwrap(),
            "--screenshot",
            shot.to_str().unwrap(),
        ],
    );
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let shown = std::fs::read_to_string(&shot).unwrap();
    assert!(
        shown.contains("╭─ general-purpose · acp · review"),
        "{shown}"
    );
    assert!(shown.contains("● red"), "{shown}");
    assert!(shown.contains("Looks red."), "{shown}");
    assert!(shown.contains("⚙ Bash ls"), "{shown}");
}

/// A copy of the Claude fixture (log and sub-agent directory) in `dir`.
fn copy_claude(dir: &Path) -> PathBuf {
    let log = claude_log();
    let session = log.with_extension("");
    let copy = dir.join(log.file_name().unwrap());
    std::fs::copy(&log, &copy).unwrap();
    let subagents = copy.with_extension("").join("subagents");
    std::fs::create_dir_all(&subagents).unwrap();
    for entry in std::fs::read_dir(session.join("subagents")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), subagents.join(entry.file_name())).unwrap();
    }
    copy
}

fn append(path: &Path, lines: &[&str]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
}

#[test]
fn unknown_record_types_are_counted_and_reported_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let log = copy_claude(dir.path());
    append(
        &log,
        &[
            r#"{"type":"hologram","timestamp":"2030-01-01T00:00:00.000Z","x":1}"#,
            r#"{"type":"teleport"}"#,
            r#"{"type":"hologram"}"#,
        ],
    );
    let (_d, _out, events, stderr) = import("claude", &log);
    assert!(
        stderr.contains("skipped 3 records of 2 unknown types: hologram (2), teleport (1)"),
        "{stderr}"
    );
    // Everything else came through.
    let (_, finished) = the_subagent(&events);
    assert!(matches!(
        finished,
        Event::SubagentFinished {
            severity: Some(Severity::Red),
            ..
        }
    ));

    let (main, _) = codex_logs();
    let copy = dir.path().join("sessions/2030/01/01");
    std::fs::create_dir_all(&copy).unwrap();
    for entry in std::fs::read_dir(main.parent().unwrap()).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
    }
    let main = copy.join(main.file_name().unwrap());
    append(
        &main,
        &[
            r#"{"timestamp":"2030-01-01T00:00:00.000Z","type":"event_msg","payload":{"type":"mystery"}}"#,
            r#"{"timestamp":"2030-01-01T00:00:00.000Z","type":"oddity","payload":{}}"#,
        ],
    );
    let (_d, _out, events, stderr) = import("codex", &main);
    assert!(
        stderr.contains("skipped 2 records of 2 unknown types: event_msg mystery (1), oddity (1)"),
        "{stderr}"
    );
    assert_eq!(conversation(&events).1, ANSWER);
}

#[test]
fn a_bad_line_names_file_and_line_and_a_cut_last_line_is_only_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let log = copy_claude(dir.path());
    let lines = std::fs::read_to_string(&log).unwrap().lines().count();
    append(
        &log,
        &[
            "{not json",
            r#"{"type":"user","message":{"content":"late"}}"#,
        ],
    );
    let run = quorum(
        dir.path(),
        &["import", "claude", log.to_str().unwrap(), "-o", "-"],
    );
    assert_eq!(run.status.code(), Some(2));
    let stderr = text(&run.stderr);
    let name = log.file_name().unwrap().to_str().unwrap();
    assert!(
        stderr.contains(&format!("{name}:{}: not JSON", lines + 1)),
        "{stderr}"
    );
    assert!(run.stdout.is_empty(), "nothing written on error");

    // A log cut mid-line (the tool was killed while writing): the rest imports.
    let log = copy_claude(dir.path());
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .and_then(|mut f| std::io::Write::write_all(&mut f, br#"{"type":"assistant","mess"#))
        .unwrap();
    let (_d, _out, events, stderr) = import("claude", &log);
    assert!(
        stderr.contains(&format!(
            "warning: {}:{}: last line is cut short",
            log.display(),
            lines + 1
        )),
        "{stderr}"
    );
    assert_eq!(conversation(&events).1, ANSWER);

    // A known record with a field of the wrong shape names the field.
    let log = copy_claude(dir.path());
    append(&log, &[r#"{"type":"assistant","message":{"content":7}}"#]);
    let run = quorum(
        dir.path(),
        &["import", "claude", log.to_str().unwrap(), "-o", "-"],
    );
    assert_eq!(run.status.code(), Some(2));
    assert!(
        text(&run.stderr).contains(&format!(
            "{name}:{}: bad \"message.content\": expected a string or a list, found a number",
            lines + 1
        )),
        "{}",
        text(&run.stderr)
    );
}

#[test]
fn without_the_subagent_logs_the_boxes_keep_their_reports_and_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let log = copy_claude(dir.path());
    std::fs::remove_dir_all(log.with_extension("")).unwrap();
    let (_d, out, events, stderr) = import("claude", &log);
    assert!(
        stderr.contains("warning:") && stderr.contains("no log for sub-agent"),
        "{stderr}"
    );
    let (_, finished) = the_subagent(&events);
    assert!(
        matches!(finished, Event::SubagentFinished { output, severity: Some(Severity::Red), .. } if output == REPORT),
        "the report comes from the tool result: {finished:?}"
    );
    assert!(subagent_tools(&events).is_empty());
    assert_red_box(&out, "general-purpose");

    // codex: the report comes from what wait_agent returned.
    let (main, _) = codex_logs();
    let alone = dir.path().join("sessions/2030/01/02");
    std::fs::create_dir_all(&alone).unwrap();
    let main = {
        let copy = alone.join(main.file_name().unwrap());
        std::fs::copy(&main, &copy).unwrap();
        copy
    };
    let (_d, _out, events, stderr) = import("codex", &main);
    assert!(
        stderr.contains("no rollout found for sub-agent"),
        "{stderr}"
    );
    let (_, finished) = the_subagent(&events);
    assert!(
        matches!(finished, Event::SubagentFinished { output, severity: Some(Severity::Red), .. } if output == REPORT),
        "{finished:?}"
    );
}

#[test]
fn the_default_output_goes_beside_in_the_current_directory_and_is_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let log = claude_log();
    let run = quorum(dir.path(), &["import", "claude", log.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let stem = log.file_stem().unwrap().to_str().unwrap();
    let out = dir.path().join(format!("{stem}.quorum.jsonl"));
    let first = std::fs::read_to_string(&out).unwrap();
    assert!(text(&run.stderr).contains(&format!("quorum replay {stem}.quorum.jsonl")));

    std::fs::write(&out, "mine").unwrap();
    let run = quorum(dir.path(), &["import", "claude", log.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(2));
    assert!(
        text(&run.stderr).contains("exists; pass --force"),
        "{}",
        text(&run.stderr)
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "mine");

    let run = quorum(
        dir.path(),
        &["import", "claude", log.to_str().unwrap(), "--force"],
    );
    assert_eq!(run.status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), first);

    // `-o -`: the transcript on stdout, the same as in the file.
    let run = quorum(
        dir.path(),
        &["import", "claude", log.to_str().unwrap(), "-o", "-"],
    );
    assert_eq!(run.status.code(), Some(0));
    assert_eq!(text(&run.stdout), first);
}
