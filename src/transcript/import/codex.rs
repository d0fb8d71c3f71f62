//! Codex rollouts: `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`,
//! one record a line, `{"timestamp", "type", "payload"}`: `session_meta`,
//! `turn_context`, `response_item` (the model's items: messages, function
//! calls and their outputs, reasoning) and `event_msg` (what the session
//! showed: the person's message, turn ends, token counts, errors).
//!
//! A sub-agent is a `spawn_agent` call (the multi-agent tools); its result
//! names the new thread, whose own rollout ends in `-<thread id>.jsonl`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{
    ImportError, Parts, Reader, Record, Subagent, clean, is_review, one_line, tool_call_finished,
    tool_call_started, tool_ended, tool_started,
};
use crate::event::{Activity, AgentRef, Event, NoticeLevel, StopReason};

/// `event_msg` payloads that repeat what the `response_item`s say, or
/// carry nothing to show.
const QUIET_EVENTS: [&str; 34] = [
    "task_started",
    "turn_started",
    "agent_message",
    "agent_message_delta",
    "agent_message_content_delta",
    "agent_reasoning",
    "agent_reasoning_delta",
    "agent_reasoning_raw_content",
    "agent_reasoning_section_break",
    "exec_command_begin",
    "exec_command_output_delta",
    "exec_command_end",
    "exec_approval_request",
    "apply_patch_approval_request",
    "patch_apply_begin",
    "patch_apply_updated",
    "patch_apply_end",
    "turn_diff",
    "mcp_tool_call_begin",
    "mcp_tool_call_end",
    "mcp_startup_update",
    "mcp_startup_complete",
    "web_search_begin",
    "web_search_end",
    "plan_update",
    "item_started",
    "item_completed",
    "context_compacted",
    "entered_review_mode",
    "exited_review_mode",
    "session_configured",
    "thread_name_updated",
    "view_image_tool_call",
    "terminal_interaction",
];

/// `response_item` payloads with nothing to show.
const QUIET_ITEMS: [&str; 7] = [
    "reasoning",
    "web_search_call",
    "ghost_snapshot",
    "compaction",
    "tool_search_call",
    "tool_search_output",
    "image_generation_call",
];

pub(super) struct Import<'a> {
    path: &'a Path,
    parts: Parts,
    provider: Option<String>,
    /// `spawn_agent` calls waiting for their result, by call id: when, and
    /// the message.
    spawns: HashMap<String, (Option<u64>, String)>,
    turn_open: bool,
    /// What `wait_agent` calls returned: when, and the output.
    waits: Vec<(Option<u64>, Value)>,
    /// Sub-agents whose rollout was not found: their stream so far and
    /// agent id, to finish from a `wait_agent` result.
    unfinished: Vec<(Subagent, String)>,
}

impl<'a> Reader<'a> for Import<'a> {
    fn new(path: &'a Path, _records: &[Record], parts: Parts) -> Self {
        Import {
            path,
            parts,
            provider: None,
            spawns: HashMap::new(),
            turn_open: false,
            waits: Vec::new(),
            unfinished: Vec::new(),
        }
    }

    fn record(&mut self, r: &Record) -> Result<(), ImportError> {
        let path = self.path;
        let Some(kind) = r.kind(path, &mut self.parts.skipped)? else {
            return Ok(());
        };
        let time = r.time();
        let payload = &r.value["payload"];
        match kind {
            "session_meta" => {
                if let Some(cwd) = payload["cwd"].as_str() {
                    self.parts.cwd.get_or_insert_with(|| cwd.to_string());
                }
                self.provider = payload["model_provider"].as_str().map(str::to_string);
            }
            "turn_context" => {
                if self.parts.model.is_none()
                    && let Some(model) = payload["model"].as_str()
                {
                    let provider = self.provider.as_deref().unwrap_or("openai");
                    self.parts.model = Some(format!("{provider}:{model}"));
                }
            }
            "compacted" => {}
            "response_item" => self.item(r, payload, time)?,
            "event_msg" => self.event(r, payload, time)?,
            other => self.parts.skipped.add(other),
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Parts, ImportError> {
        for (mut subagent, agent_id) in std::mem::take(&mut self.unfinished) {
            // What `wait_agent` said of it: `{"status": {ID: {"completed": REPORT}}}`.
            let found = self.waits.iter().find_map(|(time, value)| {
                let status = &value["status"][agent_id.as_str()];
                let report = status["completed"].as_str()?;
                Some((*time, report.to_string()))
            });
            if let Some((time, report)) = found {
                let code_review = is_review(&report);
                let verdict = crate::subagent::severity::parse(&report);
                subagent.finish(time, verdict, code_review, StopReason::EndTurn);
            }
            self.parts.subagents.push(subagent.into_stream());
        }
        if self.turn_open {
            let last = Some(self.parts.main.last());
            self.parts.main.push(
                last,
                Event::TurnEnded {
                    stop_reason: StopReason::EndTurn,
                },
            );
        }
        Ok(self.parts)
    }
}

impl Import<'_> {
    fn item(&mut self, r: &Record, item: &Value, time: Option<u64>) -> Result<(), ImportError> {
        let kind = payload_type(self.path, r)?;
        let main = &mut self.parts.main;
        match kind.as_str() {
            "message" => {
                if item["role"] == "assistant" {
                    for text in output_texts(&item["content"]) {
                        main.assistant(time, &text);
                    }
                }
                // The person's words come from `event_msg` `user_message`:
                // these carry codex's own context too.
            }
            "function_call" | "custom_tool_call" => {
                let id = item["call_id"].as_str().unwrap_or_default().to_string();
                let name = item["name"].as_str().unwrap_or_default();
                let input = arguments(item);
                if name == "spawn_agent" {
                    self.spawns.insert(id, (time, spawn_message(&input)));
                    return Ok(());
                }
                main.push(time, tool_call_started(&id, name, &input));
            }
            "function_call_output" | "custom_tool_call_output" => {
                let id = item["call_id"].as_str().unwrap_or_default();
                let output = Output::of(&item["output"]);
                if let Some((started, message)) = self.spawns.remove(id) {
                    return self.spawned(id, started, message, &output, time);
                }
                if let Ok(value @ Value::Object(_)) = serde_json::from_str::<Value>(&output.text)
                    && value.get("status").is_some_and(Value::is_object)
                {
                    self.waits.push((time, value));
                }
                main.push(time, tool_call_finished(id, output.ok, &output.summary()));
            }
            k if QUIET_ITEMS.contains(&k) || k == "local_shell_call" => {}
            other => self.parts.skipped.add(&format!("response_item {other}")),
        }
        Ok(())
    }

    fn event(&mut self, r: &Record, event: &Value, time: Option<u64>) -> Result<(), ImportError> {
        let kind = payload_type(self.path, r)?;
        let main = &mut self.parts.main;
        let message = || clean(event["message"].as_str().unwrap_or_default());
        match kind.as_str() {
            "user_message" => {
                if self.turn_open {
                    main.push(
                        time,
                        Event::TurnEnded {
                            stop_reason: StopReason::EndTurn,
                        },
                    );
                }
                main.push(time, Event::UserMessage { text: message() });
                main.push(time, Event::TurnStarted);
                self.turn_open = true;
            }
            "task_complete" | "turn_complete" | "turn_aborted" if self.turn_open => {
                let stop_reason = if kind == "turn_aborted" {
                    StopReason::Cancelled
                } else {
                    StopReason::EndTurn
                };
                main.push(time, Event::TurnEnded { stop_reason });
                self.turn_open = false;
            }
            "task_complete" | "turn_complete" | "turn_aborted" => {}
            "error" => main.push(time, Event::Error { text: message() }),
            "warning" | "stream_error" => main.push(
                time,
                Event::Notice {
                    level: NoticeLevel::Warning,
                    text: message(),
                },
            ),
            "token_count" => {
                let last = &event["info"]["last_token_usage"];
                if last.is_object() {
                    main.push(
                        time,
                        Event::Usage {
                            input_tokens: last["input_tokens"].as_u64().unwrap_or(0),
                            output_tokens: last["output_tokens"].as_u64().unwrap_or(0),
                        },
                    );
                }
            }
            k if QUIET_EVENTS.contains(&k) || k.starts_with("collab_") => {}
            other => self.parts.skipped.add(&format!("event_msg {other}")),
        }
        Ok(())
    }

    /// A `spawn_agent` call returned: the sub-agent's box, from its own
    /// rollout.
    fn spawned(
        &mut self,
        call_id: &str,
        started: Option<u64>,
        message: String,
        output: &Output,
        time: Option<u64>,
    ) -> Result<(), ImportError> {
        let result: Value = serde_json::from_str(&output.text).unwrap_or_default();
        let agent_id = result["agent_id"].as_str().unwrap_or_default().to_string();
        let rollout = find_rollout(self.path, &agent_id);
        let log = match &rollout {
            Some(file) => Some(ChildLog::read(file, &mut self.parts)?),
            None => None,
        };
        let nickname = log
            .as_ref()
            .and_then(|l| l.nickname.clone())
            .or_else(|| result["nickname"].as_str().map(str::to_string))
            .unwrap_or_else(|| "codex".into());
        let agent = AgentRef::Acp(one_line(&nickname, 40));
        let report = log
            .as_ref()
            .and_then(|l| l.end.as_ref())
            .map(|e| e.report.clone());
        let mut subagent = Subagent::start(
            started,
            call_id,
            agent,
            clean(&message),
            report.as_deref().is_some_and(is_review),
        );
        if !output.ok {
            // The spawn failed: no sub-agent ran.
            let verdict = crate::subagent::severity::parse(&output.text);
            subagent.finish(time, verdict, false, StopReason::Error);
            self.parts.subagents.push(subagent.into_stream());
            return Ok(());
        }
        let Some(log) = log else {
            self.parts.warnings.push(format!(
                "{}: no rollout found for sub-agent {} (rollout-*-{}.jsonl under the same sessions/ directory); its box shows only what wait_agent returned",
                self.path.display(),
                clean(&agent_id),
                clean(&agent_id),
            ));
            self.unfinished.push((subagent, agent_id));
            return Ok(());
        };
        subagent.activity(log.activity);
        if let Some(end) = log.end {
            let code_review = is_review(&end.report);
            let verdict = crate::subagent::severity::parse(&end.report);
            subagent.finish(end.time, verdict, code_review, end.stop_reason);
        }
        self.parts.subagents.push(subagent.into_stream());
        Ok(())
    }
}

/// A payload's `type`, which every `response_item` and `event_msg` has.
fn payload_type(path: &Path, r: &Record) -> Result<String, ImportError> {
    match r.value.get("payload") {
        Some(Value::Object(p)) => match p.get("type") {
            Some(Value::String(t)) => Ok(t.clone()),
            Some(other) => Err(r.bad(
                path,
                "payload.type",
                format!("expected a string, found {}", super::kind(other)),
            )),
            None => Err(r.bad(path, "payload.type", "missing".into())),
        },
        Some(other) => Err(r.bad(
            path,
            "payload",
            format!("expected an object, found {}", super::kind(other)),
        )),
        None => Err(r.bad(path, "payload", "missing".into())),
    }
}

/// The texts of a message's `output_text` (or `input_text`) parts.
fn output_texts(content: &Value) -> Vec<String> {
    match content {
        Value::String(s) => vec![s.clone()],
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// A call's arguments: a JSON string (function calls) or raw text
/// (custom tools, like `apply_patch`).
fn arguments(item: &Value) -> Value {
    let raw = item
        .get("arguments")
        .or_else(|| item.get("input"))
        .cloned()
        .unwrap_or_default();
    let parsed = match raw {
        Value::String(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
        other => other,
    };
    match parsed {
        Value::String(s) => serde_json::json!({ "input": s }),
        other => other,
    }
}

/// `spawn_agent`'s message: `message`, or the texts of its `items`.
fn spawn_message(input: &Value) -> String {
    if let Some(m) = input["message"].as_str() {
        return m.to_string();
    }
    input["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// What a tool returned, and whether it went well.
struct Output {
    text: String,
    ok: bool,
}

impl Output {
    /// Codex writes a tool's output as text (`Process exited with code 0
    /// ... Output:\n...`), as JSON text (`{"output", "metadata":
    /// {"exit_code"}}`), or as `{"content", "success"}`.
    fn of(output: &Value) -> Output {
        let (text, success) = match output {
            Value::String(s) => (s.clone(), None),
            Value::Object(_) => (
                output["content"].as_str().unwrap_or_default().to_string(),
                output["success"].as_bool(),
            ),
            Value::Array(parts) => (
                parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                None,
            ),
            _ => (String::new(), None),
        };
        if let Some(ok) = success {
            return Output { text, ok };
        }
        if let Ok(v) = serde_json::from_str::<Value>(&text)
            && let Some(code) = v["metadata"]["exit_code"].as_i64()
        {
            let text = v["output"].as_str().unwrap_or_default().to_string();
            return Output {
                text,
                ok: code == 0,
            };
        }
        let code = text.lines().find_map(|l| {
            l.trim()
                .strip_prefix("Process exited with code ")
                .and_then(|c| c.trim().parse::<i64>().ok())
        });
        Output {
            ok: code.is_none_or(|c| c == 0),
            text,
        }
    }

    /// The output proper: after `Output:` when codex added a preamble.
    fn body(&self) -> &str {
        match self.text.split_once("\nOutput:\n") {
            Some((_, body)) => body,
            None => &self.text,
        }
    }

    /// What to show of it on one line: `wait_agent`'s statuses
    /// (`{"status": {ID: {"completed": ...}}}`) by name, else the body.
    fn summary(&self) -> String {
        if let Ok(v) = serde_json::from_str::<Value>(&self.text)
            && let Some(status) = v["status"].as_object()
        {
            let states: Vec<String> = status
                .values()
                .map(|s| match s {
                    Value::Object(m) => m.keys().next().cloned().unwrap_or_default(),
                    Value::String(s) => s.clone(),
                    _ => String::new(),
                })
                .collect();
            return format!("{} sub-agent(s): {}", states.len(), states.join(", "));
        }
        self.body().to_string()
    }
}

/// Finds the rollout of thread `id`: `rollout-*-<id>.jsonl` in the same
/// directory as `main`, else anywhere under the `sessions/` directory
/// above it (three levels: YYYY/MM/DD).
fn find_rollout(main: &Path, id: &str) -> Option<PathBuf> {
    let safe = !id.is_empty() && id.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    if !safe {
        return None;
    }
    let suffix = format!("-{id}.jsonl");
    let dir = main.parent()?;
    if let Some(found) = search(dir, &suffix, 0) {
        return Some(found);
    }
    let sessions = dir
        .ancestors()
        .take(4)
        .find(|d| d.file_name().is_some_and(|n| n == "sessions"))?;
    search(sessions, &suffix, 3)
}

/// A file named `rollout-*<suffix>` in `dir`, or up to `depth` levels
/// below it (symbolic links are not followed).
fn search(dir: &Path, suffix: &str, depth: usize) -> Option<PathBuf> {
    let mut entries: Vec<_> = std::fs::read_dir(dir).ok()?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in &entries {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let kind = entry.file_type().ok()?;
        if kind.is_file() && name.starts_with("rollout-") && name.ends_with(suffix) {
            return Some(entry.path());
        }
    }
    if depth == 0 {
        return None;
    }
    entries
        .iter()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .find_map(|e| search(&e.path(), suffix, depth - 1))
}

/// A sub-agent's rollout, read into box activity.
#[derive(Default)]
struct ChildLog {
    nickname: Option<String>,
    activity: Vec<(Option<u64>, Activity)>,
    end: Option<End>,
}

/// How a sub-agent's turn ended.
struct End {
    time: Option<u64>,
    report: String,
    stop_reason: StopReason,
}

impl ChildLog {
    fn read(path: &Path, parts: &mut Parts) -> Result<ChildLog, ImportError> {
        let records = parts.read_log(path)?;
        let mut log = ChildLog::default();
        let mut last_words: Vec<String> = Vec::new();
        for r in &records {
            let time = r.time();
            let Some(kind) = r.kind(path, &mut parts.skipped)? else {
                continue;
            };
            let p = &r.value["payload"];
            match kind {
                "session_meta" => {
                    log.nickname = p["agent_nickname"]
                        .as_str()
                        .or_else(|| {
                            p["source"]["subagent"]["thread_spawn"]["agent_nickname"].as_str()
                        })
                        .map(str::to_string);
                }
                "turn_context" | "compacted" => {}
                "response_item" => match payload_type(path, r)?.as_str() {
                    "message" if p["role"] == "assistant" => {
                        for text in output_texts(&p["content"]) {
                            last_words.push(text.clone());
                            log.activity.push((
                                time,
                                Activity::MessageChunk {
                                    text: format!("{}\n", clean(&text)),
                                },
                            ));
                        }
                    }
                    "message" => {}
                    "reasoning" => {
                        for s in p["summary"].as_array().into_iter().flatten() {
                            if let Some(text) = s["text"].as_str() {
                                log.activity.push((
                                    time,
                                    Activity::ThoughtChunk {
                                        text: format!("{}\n", clean(text)),
                                    },
                                ));
                            }
                        }
                    }
                    "function_call" | "custom_tool_call" => {
                        last_words.clear();
                        let id = p["call_id"].as_str().unwrap_or_default();
                        let name = p["name"].as_str().unwrap_or_default();
                        let input = arguments(p);
                        log.activity.push((time, tool_started(id, name, &input)));
                    }
                    "function_call_output" | "custom_tool_call_output" => {
                        let id = p["call_id"].as_str().unwrap_or_default();
                        let output = Output::of(&p["output"]);
                        log.activity
                            .push((time, tool_ended(id, output.ok, output.body())));
                    }
                    k if QUIET_ITEMS.contains(&k) || k == "local_shell_call" => {}
                    other => parts.skipped.add(&format!("response_item {other}")),
                },
                "event_msg" => match payload_type(path, r)?.as_str() {
                    k @ ("task_complete" | "turn_complete" | "turn_aborted") => {
                        let report = p["last_agent_message"]
                            .as_str()
                            .map(str::to_string)
                            .unwrap_or_else(|| last_words.join("\n"));
                        log.end = Some(End {
                            time,
                            report,
                            stop_reason: if k == "turn_aborted" {
                                StopReason::Cancelled
                            } else {
                                StopReason::EndTurn
                            },
                        });
                    }
                    "error" => log.activity.push((
                        time,
                        Activity::Notice {
                            text: clean(p["message"].as_str().unwrap_or_default()),
                        },
                    )),
                    k if QUIET_EVENTS.contains(&k)
                        || k.starts_with("collab_")
                        || matches!(k, "user_message" | "token_count" | "warning") => {}
                    other => parts.skipped.add(&format!("event_msg {other}")),
                },
                other => parts.skipped.add(other),
            }
        }
        Ok(log)
    }
}
