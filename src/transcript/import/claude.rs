//! Claude Code session logs: `~/.claude/projects/<dir>/<session>.jsonl`,
//! one record a line (`user`, `assistant`, `system`, and bookkeeping);
//! an assistant message is written one content block a record. A
//! sub-agent is an `Agent` (formerly `Task`) tool call; its own log is
//! `<session>/subagents/agent-<id>.jsonl`, the id given in the tool
//! result's `toolUseResult.agentId` (and in the `progress` records).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{
    ImportError, Parts, Reader, Record, Stream, Subagent, clean, is_review, one_line,
    tool_call_finished, tool_call_started, tool_ended, tool_started,
};
use crate::event::{Activity, AgentRef, Event, StopReason};

/// Record types that carry nothing to show: the prompt queue, the last
/// prompt, sub-agent progress (read from the sub-agent's own log instead),
/// file backups, titles and summaries.
const QUIET: [&str; 6] = [
    "queue-operation",
    "last-prompt",
    "progress",
    "file-history-snapshot",
    "summary",
    "custom-title",
];

/// The tools that run a sub-agent.
const SUBAGENT_TOOLS: [&str; 2] = ["Agent", "Task"];

/// The sub-agent id of each `Agent` call, by tool call id.
fn agent_ids(records: &[Record]) -> HashMap<String, String> {
    let mut ids = HashMap::new();
    for r in records {
        let v = &r.value;
        if let Some(agent) = v["toolUseResult"]["agentId"].as_str()
            && let Some(blocks) = v["message"]["content"].as_array()
        {
            for b in blocks.iter().filter(|b| b["type"] == "tool_result") {
                if let Some(id) = b["tool_use_id"].as_str() {
                    ids.insert(id.to_string(), agent.to_string());
                }
            }
        }
        if let (Some(agent), Some(id)) =
            (v["data"]["agentId"].as_str(), v["parentToolUseID"].as_str())
        {
            ids.entry(id.to_string())
                .or_insert_with(|| agent.to_string());
        }
    }
    ids
}

pub(super) struct Import<'a> {
    path: &'a Path,
    parts: Parts,
    agent_ids: HashMap<String, String>,
    /// Sub-agent calls whose result has not come yet, by tool call id.
    pending: HashMap<String, Pending>,
    turn_open: bool,
    last_stop: StopReason,
    /// Messages whose usage was counted (a message spans several records).
    usage_seen: HashSet<String>,
}

/// A sub-agent call waiting for its result.
struct Pending {
    started: Option<u64>,
    agent: String,
    input: String,
    log: Option<SubagentLog>,
}

impl<'a> Reader<'a> for Import<'a> {
    fn new(path: &'a Path, records: &[Record], parts: Parts) -> Self {
        Import {
            path,
            parts,
            agent_ids: agent_ids(records),
            pending: HashMap::new(),
            turn_open: false,
            last_stop: StopReason::EndTurn,
            usage_seen: HashSet::new(),
        }
    }

    fn record(&mut self, r: &Record) -> Result<(), ImportError> {
        let path = self.path;
        let Some(kind) = r.kind(path, &mut self.parts.skipped)? else {
            return Ok(());
        };
        if self.parts.cwd.is_none()
            && let Some(cwd) = r.value["cwd"].as_str()
        {
            self.parts.cwd = Some(cwd.to_string());
        }
        let time = r.time();
        match kind {
            "user" => self.user(r, time),
            "assistant" => self.assistant(r, time),
            "system" => {
                if let Some(text) = r.value["content"].as_str().filter(|t| !t.trim().is_empty()) {
                    let level = match r.value["level"].as_str() {
                        Some("error" | "warning") => crate::event::NoticeLevel::Warning,
                        _ => crate::event::NoticeLevel::Info,
                    };
                    self.parts.main.push(
                        time,
                        Event::Notice {
                            level,
                            text: clean(text),
                        },
                    );
                }
                Ok(())
            }
            k if QUIET.contains(&k) => Ok(()),
            other => {
                self.parts.skipped.add(other);
                Ok(())
            }
        }
    }

    fn finish(mut self) -> Result<Parts, ImportError> {
        // Sub-agents whose result never came: their boxes stay open, as
        // the log left them.
        let mut open: Vec<(String, Pending)> = self.pending.drain().collect();
        open.sort_by_key(|(_, p)| p.started);
        for (id, pending) in open {
            self.parts
                .subagents
                .push(subagent_stream(&id, pending, None));
        }
        if self.turn_open {
            let last = Some(self.parts.main.last());
            self.parts.main.push(
                last,
                Event::TurnEnded {
                    stop_reason: self.last_stop,
                },
            );
        }
        Ok(self.parts)
    }
}

impl Import<'_> {
    fn user(&mut self, r: &Record, time: Option<u64>) -> Result<(), ImportError> {
        if r.value["isMeta"] == true {
            return Ok(());
        }
        match content(self.path, r)? {
            Content::Text(text) => self.prompt(&text, time),
            Content::Blocks(blocks) => {
                let results: Vec<&Value> = blocks
                    .iter()
                    .filter(|b| b["type"] == "tool_result")
                    .collect();
                if results.is_empty() {
                    let text = texts(&blocks).join("\n");
                    if !text.trim().is_empty() {
                        self.prompt(&text, time);
                    }
                }
                for result in results {
                    self.tool_result(r, result, time);
                }
            }
        }
        Ok(())
    }

    /// What the person typed: it ends the turn before and starts one.
    fn prompt(&mut self, text: &str, time: Option<u64>) {
        let main = &mut self.parts.main;
        if text
            .trim_start()
            .starts_with("[Request interrupted by user")
        {
            if self.turn_open {
                main.push(
                    time,
                    Event::TurnEnded {
                        stop_reason: StopReason::Cancelled,
                    },
                );
                self.turn_open = false;
            }
            return;
        }
        if self.turn_open {
            main.push(
                time,
                Event::TurnEnded {
                    stop_reason: self.last_stop,
                },
            );
        }
        main.push(time, Event::UserMessage { text: clean(text) });
        main.push(time, Event::TurnStarted);
        self.turn_open = true;
        self.last_stop = StopReason::EndTurn;
    }

    fn tool_result(&mut self, r: &Record, result: &Value, time: Option<u64>) {
        let id = result["tool_use_id"].as_str().unwrap_or_default();
        let failed = result["is_error"] == true;
        if let Some(pending) = self.pending.remove(id) {
            // The report: the sub-agent's last words in its own log, else
            // what the tool returned.
            let structured = r.value["toolUseResult"]["content"]
                .as_array()
                .map(|blocks| texts(blocks).join("\n"));
            let report = pending
                .log
                .as_ref()
                .and_then(|l| l.report.clone())
                .or(structured)
                .unwrap_or_else(|| first_text(&result["content"]));
            let stop_reason = if failed {
                StopReason::Error
            } else {
                StopReason::EndTurn
            };
            let stream = subagent_stream(id, pending, Some((time, report, stop_reason)));
            self.parts.subagents.push(stream);
            return;
        }
        self.parts.main.push(
            time,
            tool_call_finished(id, !failed, &result_text(&result["content"])),
        );
    }

    fn assistant(&mut self, r: &Record, time: Option<u64>) -> Result<(), ImportError> {
        let message = &r.value["message"];
        if let Some(stop) = message["stop_reason"].as_str() {
            self.last_stop = stop_reason(stop);
        }
        if let (Some(id), Some(usage)) = (message["id"].as_str(), message.get("usage"))
            && self.usage_seen.insert(id.to_string())
        {
            let n = |k: &str| usage[k].as_u64().unwrap_or(0);
            self.parts.main.push(
                time,
                Event::Usage {
                    input_tokens: n("input_tokens")
                        + n("cache_creation_input_tokens")
                        + n("cache_read_input_tokens"),
                    output_tokens: n("output_tokens"),
                },
            );
        }
        if self.parts.model.is_none()
            && let Some(model) = message["model"].as_str()
        {
            self.parts.model = Some(format!("anthropic:{model}"));
        }
        let blocks = match content(self.path, r)? {
            Content::Text(text) => vec![serde_json::json!({"type": "text", "text": text})],
            Content::Blocks(blocks) => blocks,
        };
        for block in &blocks {
            match block["type"].as_str().unwrap_or_default() {
                "text" => {
                    let text = block["text"].as_str().unwrap_or_default();
                    self.parts.main.assistant(time, text);
                }
                "thinking" | "redacted_thinking" => {}
                "tool_use" => self.tool_use(block, time)?,
                other => self.parts.skipped.add(&format!("assistant {other} block")),
            }
        }
        Ok(())
    }

    fn tool_use(&mut self, block: &Value, time: Option<u64>) -> Result<(), ImportError> {
        let id = block["id"].as_str().unwrap_or_default().to_string();
        let name = block["name"].as_str().unwrap_or_default();
        let input = &block["input"];
        if SUBAGENT_TOOLS.contains(&name) {
            let log = match self.agent_ids.get(&id).cloned() {
                Some(agent) => self.subagent_log(&agent)?,
                None => None,
            };
            let agent = input["subagent_type"]
                .as_str()
                .filter(|s| !s.trim().is_empty())
                .unwrap_or(name);
            self.pending.insert(
                id,
                Pending {
                    started: time,
                    agent: one_line(agent, 40),
                    input: clean(input["prompt"].as_str().unwrap_or_default()),
                    log,
                },
            );
            return Ok(());
        }
        self.parts
            .main
            .push(time, tool_call_started(&id, name, input));
        Ok(())
    }

    /// The sub-agent's log, `<session>/subagents/agent-<id>.jsonl`, if
    /// there is one (a warning if not).
    fn subagent_log(&mut self, agent: &str) -> Result<Option<SubagentLog>, ImportError> {
        let safe = !agent.is_empty()
            && agent
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        let file: PathBuf = self
            .path
            .with_extension("")
            .join("subagents")
            .join(format!("agent-{agent}.jsonl"));
        if !safe || !file.is_file() {
            self.parts.warnings.push(format!(
                "{}: no log for sub-agent {} ({}); its box shows only its report",
                self.path.display(),
                clean(agent),
                file.display()
            ));
            return Ok(None);
        }
        let log = SubagentLog::read(&file, &mut self.parts)?;
        Ok(Some(log))
    }
}

/// The events of one sub-agent call: its start, what it did, and, once
/// its result came (`time`, report, stop reason), its end.
fn subagent_stream(
    call_id: &str,
    pending: Pending,
    end: Option<(Option<u64>, String, StopReason)>,
) -> Stream {
    let report = end
        .as_ref()
        .map(|(_, report, _)| report.clone())
        .or_else(|| pending.log.as_ref().and_then(|l| l.report.clone()));
    let verdict = report.as_deref().map(crate::subagent::severity::parse);
    let code_review = report.as_deref().is_some_and(is_review);
    let mut subagent = Subagent::start(
        pending.started,
        call_id,
        AgentRef::Acp(pending.agent),
        pending.input,
        code_review,
    );
    subagent.activity(pending.log.map(|l| l.activity).unwrap_or_default());
    if let (Some((time, _, stop_reason)), Some(verdict)) = (end, verdict) {
        subagent.finish(time, verdict, code_review, stop_reason);
    }
    subagent.into_stream()
}

/// A sub-agent's own log, read into box activity.
#[derive(Debug, Default)]
struct SubagentLog {
    activity: Vec<(Option<u64>, Activity)>,
    /// Its text after its last tool call.
    report: Option<String>,
}

impl SubagentLog {
    fn read(path: &Path, parts: &mut Parts) -> Result<Self, ImportError> {
        let records = parts.read_log(path)?;
        let mut log = SubagentLog::default();
        let mut last_words: Vec<String> = Vec::new();
        let mut prompt_seen = false;
        for r in &records {
            let time = r.time();
            let Some(kind) = r.kind(path, &mut parts.skipped)? else {
                continue;
            };
            match kind {
                "user" => match content(path, r)? {
                    // The first is the prompt, shown as the box's input.
                    Content::Text(_) if !prompt_seen => prompt_seen = true,
                    Content::Text(_) => {}
                    Content::Blocks(blocks) => {
                        prompt_seen = true;
                        for b in blocks.iter().filter(|b| b["type"] == "tool_result") {
                            let text = result_text(&b["content"]);
                            let id = b["tool_use_id"].as_str().unwrap_or_default();
                            let ok = b["is_error"] != true;
                            log.activity.push((time, tool_ended(id, ok, &text)));
                        }
                    }
                },
                "assistant" => {
                    let blocks = match content(path, r)? {
                        Content::Text(text) => {
                            vec![serde_json::json!({"type": "text", "text": text})]
                        }
                        Content::Blocks(blocks) => blocks,
                    };
                    for b in &blocks {
                        match b["type"].as_str().unwrap_or_default() {
                            "text" => {
                                let text = b["text"].as_str().unwrap_or_default();
                                last_words.push(text.to_string());
                                log.activity.push((
                                    time,
                                    Activity::MessageChunk {
                                        text: format!("{}\n", clean(text)),
                                    },
                                ));
                            }
                            "thinking" => {
                                let text = b["thinking"].as_str().unwrap_or_default();
                                log.activity.push((
                                    time,
                                    Activity::ThoughtChunk {
                                        text: format!("{}\n", clean(text)),
                                    },
                                ));
                            }
                            "redacted_thinking" => {}
                            "tool_use" => {
                                last_words.clear();
                                let id = b["id"].as_str().unwrap_or_default();
                                let name = b["name"].as_str().unwrap_or_default();
                                log.activity
                                    .push((time, tool_started(id, name, &b["input"])));
                            }
                            other => parts.skipped.add(&format!("assistant {other} block")),
                        }
                    }
                }
                k if QUIET.contains(&k) || k == "system" => {}
                other => parts.skipped.add(other),
            }
        }
        if !last_words.is_empty() {
            log.report = Some(last_words.join("\n"));
        }
        Ok(log)
    }
}

/// A user or assistant message's content.
enum Content {
    Text(String),
    Blocks(Vec<Value>),
}

fn content(path: &Path, r: &Record) -> Result<Content, ImportError> {
    let message = match r.value.get("message") {
        Some(m @ Value::Object(_)) => m,
        Some(other) => {
            return Err(r.bad(
                path,
                "message",
                format!("expected an object, found {}", super::kind(other)),
            ));
        }
        None => return Err(r.bad(path, "message", "missing".into())),
    };
    match message.get("content") {
        Some(Value::String(s)) => Ok(Content::Text(s.clone())),
        Some(Value::Array(blocks)) => Ok(Content::Blocks(blocks.clone())),
        Some(other) => Err(r.bad(
            path,
            "message.content",
            format!("expected a string or a list, found {}", super::kind(other)),
        )),
        None => Ok(Content::Blocks(Vec::new())),
    }
}

fn stop_reason(s: &str) -> StopReason {
    match s {
        "max_tokens" => StopReason::MaxTokens,
        "refusal" => StopReason::Refusal,
        _ => StopReason::EndTurn,
    }
}

/// The text blocks of a list of content blocks.
fn texts(blocks: &[Value]) -> Vec<String> {
    blocks
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str().map(str::to_string))
        .collect()
}

/// A tool result's text (a string, or text blocks).
fn result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => texts(blocks).join("\n"),
        _ => String::new(),
    }
}

/// The first text of a tool result (a sub-agent's result adds a second
/// block of bookkeeping: its id and usage).
fn first_text(content: &Value) -> String {
    match content {
        Value::Array(blocks) => texts(blocks).into_iter().next().unwrap_or_default(),
        other => result_text(other),
    }
}
