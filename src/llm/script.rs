//! The scripted model (`--model script:FILE`): a JSON file of turns, each
//! text and/or tool calls, answered one per request. For demos and tests.
//!
//! ```json
//! [
//!   {"text": "Let me ask claude.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "claude", "input": "Review it"}}]},
//!   {"text": "Claude says it is fine.", "usage": {"input_tokens": 900, "output_tokens": 12}}
//! ]
//! ```
//!
//! The file may also be `{"turns": [...], "log": "requests.jsonl"}` (`log`
//! optional): each request the model gets (its messages and tool names) is
//! then appended to the log as one JSON line, to see what the chat sent.

use crate::confine::lock;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use futures::stream::{self, BoxStream, StreamExt};
use serde::Deserialize;

use super::{Delta, FinishReason, LlmError, Model, Request};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub tool_calls: Vec<ScriptedCall>,
    /// Milliseconds to wait before answering (a slow model, for cancel).
    #[serde(default)]
    pub delay_ms: u64,
    /// The token usage the model reports for this answer; by default no
    /// input and a token per word.
    #[serde(default)]
    pub usage: Option<ScriptedUsage>,
}

/// A scripted answer's `usage`: `{"input_tokens": 900, "output_tokens": 30}`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    pub name: String,
    #[serde(default)]
    pub arguments: serde_json::Value,
}

pub struct ScriptModel {
    label: String,
    turns: Mutex<std::vec::IntoIter<Turn>>,
    log: Option<PathBuf>,
}

/// A script file's object form: its turns and, if it names one, a log of
/// the requests.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    turns: Vec<Turn>,
    #[serde(default)]
    log: Option<PathBuf>,
}

impl ScriptModel {
    pub fn load(path: &Path) -> Result<Self, LlmError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| LlmError::Config(format!("{}: cannot read: {e}", path.display())))?;
        let bad = |e: serde_json::Error| {
            LlmError::Config(format!(
                "{}:{}:{}: {e}",
                path.display(),
                e.line(),
                e.column()
            ))
        };
        // Parse the shape it has, from the text, for an error that names
        // the field and its line.
        let script = if text.trim_start().starts_with('[') {
            Script {
                turns: serde_json::from_str(&text).map_err(bad)?,
                log: None,
            }
        } else {
            serde_json::from_str(&text).map_err(bad)?
        };
        let label = path.display().to_string();
        let log = script
            .log
            .map(|log| path.parent().unwrap_or(Path::new(".")).join(log));
        Ok(Self {
            log,
            ..Self::new(&label, script.turns)
        })
    }

    pub fn new(label: &str, turns: Vec<Turn>) -> Self {
        Self {
            label: label.to_string(),
            turns: Mutex::new(turns.into_iter()),
            log: None,
        }
    }

    /// Appends `request` to the log, if there is one.
    fn log(&self, request: &Request) {
        let Some(path) = &self.log else { return };
        let line = serde_json::json!({
            "system": request.system,
            "messages": request.messages,
            "tools": request.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        });
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| {
                use std::io::Write;
                writeln!(f, "{line}")
            });
        if let Err(e) = written {
            tracing::warn!("the script's log {}: {e}", path.display());
        }
    }
}

impl Model for ScriptModel {
    fn name(&self) -> String {
        format!("script:{}", self.label)
    }

    fn stream(&self, request: Request) -> BoxStream<'static, Result<Delta, LlmError>> {
        self.log(&request);
        let Some(turn) = lock(&self.turns).next() else {
            return stream::iter([Err(LlmError::Config(format!(
                "the script {} has no more turns",
                self.label
            )))])
            .boxed();
        };
        let mut deltas: Vec<Result<Delta, LlmError>> = Vec::new();
        // Text in word-sized pieces, like a real stream.
        for piece in turn.text.split_inclusive(' ') {
            deltas.push(Ok(Delta::Text(piece.to_string())));
        }
        for (index, call) in turn.tool_calls.iter().enumerate() {
            deltas.push(Ok(Delta::ToolCallStart {
                index,
                id: format!("script-{index}-{}", call.name),
                name: call.name.clone(),
            }));
            deltas.push(Ok(Delta::ToolCallArgs {
                index,
                fragment: call.arguments.to_string(),
            }));
        }
        let usage = turn.usage.unwrap_or(ScriptedUsage {
            input_tokens: 0,
            output_tokens: turn.text.split_whitespace().count() as u64,
        });
        deltas.push(Ok(Delta::Usage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
        }));
        deltas.push(Ok(Delta::Finish(if turn.tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        })));
        let delay = std::time::Duration::from_millis(turn.delay_ms);
        stream::once(async move { tokio::time::sleep(delay).await })
            .flat_map(move |()| stream::iter(deltas.clone()))
            .boxed()
    }
}
