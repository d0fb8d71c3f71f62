//! The chat loop, used by the main chat and by internal nested agents: a
//! conversation driven turn by turn. The model's deltas go to a sink; its
//! tool calls run (several at once in parallel) and their results go back
//! to the model until it ends the turn.

pub mod chat;
pub mod tools;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use tokio::sync::watch;

use crate::confine::fsroot::FsError;
use crate::confine::limits::{MAX_FINAL_TEXT, name_cut, push_capped};
use crate::event::{Outcome, StopReason};
use crate::llm::{Delta, FinishReason, LlmError, Message, Model, Request, ToolCall, ToolSpec};

/// Room for the model's answer in each request.
pub const MAX_TOKENS: u32 = 4096;
/// Model requests in one turn before it is stopped (a model that calls
/// tools forever would otherwise never end its turn).
pub const MAX_REQUESTS: usize = 100;

/// Tools a harness offers its model.
pub trait ToolSet: Send + Sync {
    fn specs(&self) -> Vec<ToolSpec>;
    /// Runs one call. `Err` is a failed call: its message goes back to the
    /// model. Cancellation is signalled on `cancel`.
    fn call(
        &self,
        call: ToolCall,
        cancel: watch::Receiver<bool>,
    ) -> BoxFuture<'static, Result<String, ToolError>>;
    /// A new conversation begins: what the tools remember of the old one
    /// is forgotten (the sub-agent tool: its agents' sessions and the last
    /// message).
    fn forget(&self) {}
}

/// Why a tool call failed. The model reads its text (after `error: `).
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The call's arguments are not the tool's.
    #[error("bad arguments for {tool}: {source}")]
    BadArguments {
        tool: String,
        source: serde_json::Error,
    },
    /// No tool of the set has this name.
    #[error("unknown tool {0:?}")]
    Unknown(String),
    /// The call was cancelled before it was done.
    #[error("cancelled")]
    Cancelled,
    /// A path the call named is outside the session directory, kept out
    /// of it, or cannot be read or written.
    #[error(transparent)]
    Fs(#[from] FsError),
    /// The tool could not do what it was asked: what went wrong.
    #[error("{0}")]
    Failed(String),
    /// A tool set's own error (the sub-agent tool's), told as it is.
    #[error(transparent)]
    Tool(Box<dyn std::error::Error + Send + Sync>),
}

/// Where a harness reports what happens.
pub trait Sink: Send + Sync {
    fn text(&self, text: &str);
    /// The model's message ended (before its tool calls run, if any).
    fn message_end(&self);
    fn tool_started(&self, call: &ToolCall);
    fn tool_finished(&self, call: &ToolCall, result: &Result<String, ToolError>);
    fn usage(&self, input_tokens: u64, output_tokens: u64);
    fn retry(&self, attempt: u32, wait_ms: u64, reason: &str);
    /// The model is writing what may be a tool call as text, held back
    /// until its message ends: `bytes` so far (told as it grows).
    fn writing_call(&self, _bytes: usize) {}
    /// A message was added to the model's context, as it will be sent
    /// (the main chat records it, so a continued session can rebuild it).
    fn context(&self, _message: &Message) {}
}

/// A copy of a harness's conversation, for those who read it while a
/// turn runs (the tools it calls).
pub type Mirror = Arc<std::sync::Mutex<Vec<Message>>>;

pub struct Harness {
    model: Arc<dyn Model>,
    tools: Arc<dyn ToolSet>,
    system: Option<String>,
    messages: Vec<Message>,
    /// Updated before each round of tool calls, when someone reads it.
    mirror: Option<Mirror>,
}

impl Harness {
    pub fn new(model: Arc<dyn Model>, tools: Arc<dyn ToolSet>, system: Option<String>) -> Self {
        Self {
            model,
            tools,
            system,
            messages: Vec::new(),
            mirror: None,
        }
    }

    /// The conversation as its tools see it: copied before each round of
    /// tool calls (so a call sees the message that made it).
    pub fn mirror(&mut self) -> Mirror {
        self.mirror
            .get_or_insert_with(|| Arc::new(std::sync::Mutex::new(self.messages.clone())))
            .clone()
    }

    /// Keeps its conversation in `mirror` from now on (a chat that goes on
    /// with another model keeps the one its summary reads).
    pub fn set_mirror(&mut self, mirror: Mirror) {
        self.mirror = Some(mirror);
        self.update_mirror();
    }

    /// The conversation so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    fn update_mirror(&self) {
        if let Some(mirror) = &self.mirror {
            *mirror.lock().unwrap_or_else(|e| e.into_inner()) = self.messages.clone();
        }
    }

    pub fn model(&self) -> &Arc<dyn Model> {
        &self.model
    }

    /// Goes on with another model (the conversation is kept).
    pub fn set_model(&mut self, model: Arc<dyn Model>) {
        self.model = model;
    }

    /// Goes on from `messages`: the context of a continued session.
    pub fn restore(&mut self, messages: Vec<Message>) {
        self.messages = messages;
        self.update_mirror();
    }

    /// Adds a message to the context, and tells the sink.
    fn push(&mut self, message: Message, sink: &dyn Sink) {
        sink.context(&message);
        self.messages.push(message);
    }

    /// Forgets the conversation.
    pub fn clear(&mut self) {
        self.messages.clear();
        self.update_mirror();
    }

    /// Runs one turn for `user`'s message until the model ends it, the
    /// person cancels it, or the model fails.
    pub async fn turn(
        &mut self,
        user: String,
        sink: &dyn Sink,
        mut cancel: watch::Receiver<bool>,
    ) -> Result<Outcome, LlmError> {
        self.push(Message::User { content: user }, sink);
        let specs = self.tools.specs();
        for _ in 0..MAX_REQUESTS {
            let (mut reply, cancelled) = self.request(&specs, sink, &mut cancel).await?;
            let (calls, malformed) = reply.calls(cancelled, &specs, self.messages.len());
            reply.show_rest(sink);
            let text = reply.text;
            self.push(
                Message::Assistant {
                    content: text.clone(),
                    tool_calls: if cancelled { Vec::new() } else { calls.clone() },
                },
                sink,
            );
            if cancelled {
                return Ok(Outcome::new(StopReason::Cancelled, text));
            }
            if calls.is_empty() {
                let stop_reason = match reply.finish {
                    Some(FinishReason::Length) => StopReason::MaxTokens,
                    _ => StopReason::EndTurn,
                };
                return Ok(Outcome::new(stop_reason, text));
            }
            self.update_mirror();
            self.run_calls(&calls, &malformed, sink, &cancel).await;
            if *cancel.borrow() {
                return Ok(Outcome::new(StopReason::Cancelled, ""));
            }
        }
        Ok(Outcome::new(StopReason::MaxTurnRequests, ""))
    }

    /// One request to the model, its reply streamed to the sink; whether
    /// the person cancelled it. A failed stream keeps what was said, so
    /// the conversation can go on.
    async fn request(
        &mut self,
        specs: &[ToolSpec],
        sink: &dyn Sink,
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<(Reply, bool), LlmError> {
        let request = Request {
            system: self.system.clone(),
            messages: self.messages.clone(),
            tools: specs.to_vec(),
            max_tokens: MAX_TOKENS,
        };
        let mut stream = self.model.stream(request);
        let mut reply = Reply::default();
        let cancelled = loop {
            let next = tokio::select! {
                next = stream.next() => next,
                _ = cancelled(cancel) => break true,
            };
            match next {
                None => break false,
                Some(Err(e)) => {
                    name_cut(&mut reply.text, reply.cut, "a message", MAX_FINAL_TEXT);
                    reply.show_rest(sink);
                    // Keep what was said, so the conversation can go on.
                    self.push(
                        Message::Assistant {
                            content: reply.text,
                            tool_calls: Vec::new(),
                        },
                        sink,
                    );
                    return Err(e);
                }
                Some(Ok(delta)) => reply.take(delta, sink),
            }
        };
        drop(stream);
        name_cut(&mut reply.text, reply.cut, "a message", MAX_FINAL_TEXT);
        Ok((reply, cancelled))
    }

    /// Runs the calls in parallel; results go back in call order.
    async fn run_calls(
        &mut self,
        calls: &[ToolCall],
        malformed: &HashMap<String, String>,
        sink: &dyn Sink,
        cancel: &watch::Receiver<bool>,
    ) {
        let runs = calls.iter().map(|call| {
            sink.tool_started(call);
            // A malformed call is answered with why, never run.
            let fut = match malformed.get(&call.id) {
                Some(reason) => {
                    futures::future::ready(Err(ToolError::Failed(reason.clone()))).boxed()
                }
                None => self.tools.call(call.clone(), cancel.clone()),
            };
            async move { (call, fut.await) }
        });
        let results = futures::future::join_all(runs).await;
        for (call, result) in results {
            sink.tool_finished(call, &result);
            let content = match result {
                Ok(out) => out,
                Err(e) => format!("error: {e}"),
            };
            self.push(
                Message::Tool {
                    tool_call_id: call.id.clone(),
                    name: call.name.clone(),
                    content,
                },
                sink,
            );
        }
    }
}

/// The model's reply to one request, as it streams in.
#[derive(Default)]
struct Reply {
    text: String,
    /// What of the model's text was past MAX_FINAL_TEXT, not kept
    /// (a server that never stops costs no more).
    cut: u64,
    /// How much of `text` the sink has seen.
    shown: usize,
    /// The size of held-back text last told (`writing_call`).
    told: usize,
    calls: BTreeMap<usize, ToolCall>,
    finish: Option<FinishReason>,
}

impl Reply {
    /// Takes in one delta.
    fn take(&mut self, delta: Delta, sink: &dyn Sink) {
        match delta {
            Delta::Text(t) => {
                push_capped(&mut self.text, &mut self.cut, &t, MAX_FINAL_TEXT);
                // Text that may be a tool call written as JSON is
                // held back until the message ends.
                if !may_be_a_call(&self.text) {
                    sink.text(&self.text[self.shown..]);
                    self.shown = self.text.len();
                } else if !self.text.trim().is_empty()
                    && (self.told == 0
                        || self.text.len() / WRITING_STEP != self.told / WRITING_STEP)
                {
                    // Held back: say that something is being
                    // written, and how much, every few hundred
                    // bytes.
                    sink.writing_call(self.text.len());
                    self.told = self.text.len();
                }
            }
            Delta::ToolCallStart { index, id, name } => {
                self.calls.insert(
                    index,
                    ToolCall {
                        id,
                        name,
                        arguments: String::new(),
                    },
                );
            }
            Delta::ToolCallArgs { index, fragment } => {
                if let Some(c) = self.calls.get_mut(&index) {
                    c.arguments.push_str(&fragment);
                }
            }
            Delta::Usage {
                input_tokens,
                output_tokens,
            } => sink.usage(input_tokens, output_tokens),
            Delta::Retry {
                attempt,
                wait_ms,
                reason,
            } => sink.retry(attempt, wait_ms, &reason),
            Delta::Finish(reason) => self.finish = Some(reason),
        }
    }

    /// Its tool calls, and the ids of those written as text that cannot
    /// run, with why. A local model may write its call as JSON text
    /// instead: the text is then the calls'.
    fn calls(
        &mut self,
        cancelled: bool,
        specs: &[ToolSpec],
        turn: usize,
    ) -> (Vec<ToolCall>, HashMap<String, String>) {
        let mut calls: Vec<ToolCall> = std::mem::take(&mut self.calls).into_values().collect();
        let mut malformed: HashMap<String, String> = HashMap::new();
        if calls.is_empty()
            && !cancelled
            && let Some(recovered) = recover(&self.text, specs, turn)
        {
            for r in recovered {
                if let Some(reason) = r.malformed {
                    malformed.insert(r.call.id.clone(), reason);
                }
                calls.push(r.call);
            }
            self.text.clear();
        }
        (calls, malformed)
    }

    /// Shows the sink what of the text it has not seen, and ends the
    /// message.
    fn show_rest(&self, sink: &dyn Sink) {
        if self.shown < self.text.len() {
            sink.text(&self.text[self.shown..]);
        }
        if !self.text.is_empty() {
            sink.message_end();
        }
    }
}

pub use crate::runtime::cancel::cancelled;

/// A one-line summary of a tool call's arguments.
pub fn summarize_args(call: &ToolCall) -> String {
    let summary = match serde_json::from_str::<serde_json::Value>(&call.arguments) {
        Ok(serde_json::Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => format!("{k}: {}", s.lines().next().unwrap_or("")),
                other => format!("{k}: {other}"),
            })
            .collect::<Vec<_>>()
            .join(", "),
        _ => call.arguments.clone(),
    };
    if summary.chars().count() > 120 {
        let cut: String = summary.chars().take(119).collect();
        format!("{cut}…")
    } else {
        summary
    }
}

/// How often held-back text is told of, in bytes.
const WRITING_STEP: usize = 64;

/// Whether `text` so far could be a tool call written as JSON.
fn may_be_a_call(text: &str) -> bool {
    let t = text.trim_start();
    t.is_empty()
        || t.starts_with(['{', '['])
        || t.starts_with("```")
        || t.starts_with("<tool_call>")
}

/// Tool calls a local model wrote as JSON text, with ids distinct across
/// the conversation (`turn` tells this answer from the others).
fn recover(
    text: &str,
    specs: &[ToolSpec],
    turn: usize,
) -> Option<Vec<crate::llm::recover::Recovered>> {
    let mut calls = crate::llm::recover::recover_calls(text, specs)?;
    for (i, r) in calls.iter_mut().enumerate() {
        r.call.id = format!("recovered-{turn}-{i}");
    }
    Some(calls)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::script::{ScriptModel, Turn};
    use futures::FutureExt;
    use std::sync::Mutex;

    /// Records what a harness reports.
    #[derive(Default)]
    struct Log(Mutex<Vec<String>>);

    impl Sink for Log {
        fn text(&self, text: &str) {
            self.0.lock().unwrap().push(format!("text {text}"));
        }
        fn message_end(&self) {
            self.0.lock().unwrap().push("end".into());
        }
        fn tool_started(&self, call: &ToolCall) {
            self.0.lock().unwrap().push(format!("start {}", call.name));
        }
        fn tool_finished(&self, call: &ToolCall, result: &Result<String, ToolError>) {
            self.0
                .lock()
                .unwrap()
                .push(format!("done {} {result:?}", call.name));
        }
        fn usage(&self, _: u64, _: u64) {}
        fn retry(&self, _: u32, _: u64, _: &str) {}
    }

    /// `wait` only returns when two calls wait at once: run one at a time,
    /// the turn would hang.
    struct Meet(Arc<tokio::sync::Barrier>);

    impl ToolSet for Meet {
        fn specs(&self) -> Vec<ToolSpec> {
            vec![ToolSpec {
                name: "wait".into(),
                description: "waits".into(),
                parameters: serde_json::json!({"type": "object"}),
            }]
        }
        fn call(
            &self,
            call: ToolCall,
            _cancel: watch::Receiver<bool>,
        ) -> BoxFuture<'static, Result<String, ToolError>> {
            let barrier = self.0.clone();
            async move {
                barrier.wait().await;
                Ok(format!("met {}", call.arguments))
            }
            .boxed()
        }
    }

    fn script(turns: serde_json::Value) -> Arc<dyn Model> {
        let turns: Vec<Turn> = serde_json::from_value(turns).unwrap();
        Arc::new(ScriptModel::new("test", turns))
    }

    #[tokio::test]
    async fn tool_calls_of_one_answer_run_in_parallel() {
        let model = script(serde_json::json!([
            {"tool_calls": [{"name": "wait", "arguments": {"n": 1}}, {"name": "wait", "arguments": {"n": 2}}]},
            {"text": "both met"}
        ]));
        let mut h = Harness::new(
            model,
            Arc::new(Meet(Arc::new(tokio::sync::Barrier::new(2)))),
            None,
        );
        let log = Log::default();
        let (_tx, cancel) = watch::channel(false);
        let end = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            h.turn("go".into(), &log, cancel),
        )
        .await
        .expect("parallel calls meet")
        .unwrap();
        assert_eq!(end, Outcome::new(StopReason::EndTurn, "both met"));
        // Results go back in call order.
        let results: Vec<&Message> = h
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Tool { .. }))
            .collect();
        assert!(matches!(results[0], Message::Tool { content, .. } if content == "met {\"n\":1}"));
        assert!(matches!(results[1], Message::Tool { content, .. } if content == "met {\"n\":2}"));
    }

    /// A model's message longer than quorum keeps (a server that does not
    /// stop): its head is the report, and what was cut is named.
    #[tokio::test]
    async fn a_message_over_the_cap_keeps_its_head_and_names_the_rest() {
        let long = format!("report {}", "z".repeat(MAX_FINAL_TEXT));
        let model = script(serde_json::json!([{ "text": long }]));
        let barrier = Arc::new(tokio::sync::Barrier::new(1));
        let mut h = Harness::new(model, Arc::new(Meet(barrier)), None);
        let (_tx, cancel) = watch::channel(false);
        let end = h.turn("go".into(), &Log::default(), cancel).await.unwrap();
        assert!(end.output.starts_with("report zzz"));
        assert!(
            end.output
                .ends_with("zzz\n\n[… 7 bytes cut by quorum: a message keeps its first 1 MB]"),
            "{}",
            &end.output[end.output.len() - 100..]
        );
    }

    #[tokio::test]
    async fn a_call_written_as_json_text_is_run() {
        let model = script(serde_json::json!([
            {"text": "{\"name\": \"wait\", \"arguments\": {\"n\": 7}}"},
            {"text": "done"}
        ]));
        let barrier = Arc::new(tokio::sync::Barrier::new(1));
        let mut h = Harness::new(model, Arc::new(Meet(barrier)), None);
        let log = Log::default();
        let (_tx, cancel) = watch::channel(false);
        let end = h.turn("go".into(), &log, cancel).await.unwrap();
        assert_eq!(end.output, "done");
        let seen = log.0.lock().unwrap().clone();
        assert!(
            !seen.iter().any(|l| l.contains("\"name\"")),
            "the JSON call is not shown as text: {seen:?}"
        );
        assert!(seen.contains(&"text done".to_string()), "{seen:?}");
        assert!(
            seen.contains(&"done wait Ok(\"met {\\\"n\\\":7}\")".to_string()),
            "the recovered call ran: {seen:?}"
        );
        let log = Log::default();
        let model =
            script(serde_json::json!([{"text": "{\"not\": \"a call\"} is JSON I was asked for"}]));
        let mut h = Harness::new(
            model,
            Arc::new(Meet(Arc::new(tokio::sync::Barrier::new(1)))),
            None,
        );
        let (_tx, cancel) = watch::channel(false);
        h.turn("go".into(), &log, cancel).await.unwrap();
        let shown: String = log
            .0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| l.strip_prefix("text "))
            .collect();
        assert_eq!(
            shown, "{\"not\": \"a call\"} is JSON I was asked for",
            "held text is shown at the end"
        );
    }

    /// A call written as text whose arguments are not an object is not
    /// run: the model gets it back as a failed call saying why, and the
    /// text is not shown as if it were an answer.
    #[tokio::test]
    async fn a_malformed_call_written_as_text_fails_with_the_reason() {
        let model = script(serde_json::json!([
            {"text": "{\"name\": \"wait\", \"arguments\": [\"calc.py\", \"add\"]}"},
            {"text": "done"}
        ]));
        let barrier = Arc::new(tokio::sync::Barrier::new(1));
        let mut h = Harness::new(model, Arc::new(Meet(barrier)), None);
        let log = Log::default();
        let (_tx, cancel) = watch::channel(false);
        let end = h.turn("go".into(), &log, cancel).await.unwrap();
        assert_eq!(end.output, "done");
        let seen = log.0.lock().unwrap().clone();
        assert!(
            !seen
                .iter()
                .any(|l| l.starts_with("text ") && l.contains("calc.py")),
            "the JSON call is not shown as text: {seen:?}"
        );
        assert!(
            seen.iter()
                .any(|l| l.starts_with("done wait Err(") && l.contains("arguments")),
            "the call failed: {seen:?}"
        );
        let result = h.messages.iter().find_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        });
        let result = result.expect("a tool result went back to the model");
        assert!(
            result.starts_with("error: ")
                && result.contains("\"arguments\" must be a JSON object")
                && result.contains("an array"),
            "{result}"
        );
    }

    #[tokio::test]
    async fn a_model_that_never_stops_calling_tools_is_stopped() {
        let turns: Vec<serde_json::Value> = (0..MAX_REQUESTS + 5)
            .map(|_| serde_json::json!({"tool_calls": [{"name": "wait", "arguments": {}}]}))
            .collect();
        let mut h = Harness::new(
            script(serde_json::Value::Array(turns)),
            Arc::new(Meet(Arc::new(tokio::sync::Barrier::new(1)))),
            None,
        );
        let (_tx, cancel) = watch::channel(false);
        let end = h.turn("go".into(), &Log::default(), cancel).await.unwrap();
        assert_eq!(end.stop_reason, StopReason::MaxTurnRequests);
    }

    #[tokio::test]
    async fn cancel_ends_a_slow_answer() {
        let model = script(serde_json::json!([{"delay_ms": 30000, "text": "late"}]));
        let mut h = Harness::new(
            model,
            Arc::new(Meet(Arc::new(tokio::sync::Barrier::new(1)))),
            None,
        );
        let (tx, cancel) = watch::channel(false);
        let log = Log::default();
        let turn = h.turn("go".into(), &log, cancel);
        tokio::pin!(turn);
        tokio::select! {
            _ = &mut turn => panic!("the slow answer came early"),
            _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => {}
        }
        tx.send(true).unwrap();
        let end = tokio::time::timeout(std::time::Duration::from_secs(5), turn)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(end.stop_reason, StopReason::Cancelled);
        assert!(log.0.lock().unwrap().is_empty());
    }
}
