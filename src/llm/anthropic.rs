//! Anthropic Messages, streamed.
//!
//! `POST {base}/v1/messages` with `x-api-key` and `anthropic-version`; the
//! answer is SSE events: `message_start` (input tokens),
//! `content_block_start` (a text or `tool_use` block), `content_block_delta`
//! (`text_delta`, `input_json_delta`), `content_block_stop`,
//! `message_delta` (stop reason, output tokens), `message_stop`, and
//! `ping` and `error` anywhere.

use std::collections::HashMap;

use futures::stream::BoxStream;
use serde_json::{Value, json};

use super::http::{self, Endpoint, EventDecoder, RetryPolicy, StreamDecoder};
use super::openai::{clip, schema};
use super::sse::SseEvent;
use super::{Delta, FinishReason, LlmError, Message, Model, Request, ToolSpec};

pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

pub struct Anthropic {
    endpoint: Endpoint,
}

impl Anthropic {
    /// `api_key` may be `None` behind a proxy that adds it: no `x-api-key`
    /// is sent then.
    pub fn new(model: &str, base_url: &str, api_key: Option<String>) -> Self {
        Self {
            endpoint: Endpoint::new(model, base_url, api_key),
        }
    }

    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.endpoint.retry = retry;
        self
    }

    /// `{base}/v1/messages`; a base that already ends in `/v1` or names
    /// the endpoint is taken as it is.
    pub fn url(&self) -> String {
        let base = &self.endpoint.base_url;
        if base.ends_with("/messages") {
            base.clone()
        } else if base.ends_with("/v1") {
            http::join_url(base, "messages")
        } else {
            http::join_url(base, "v1/messages")
        }
    }

    /// The JSON body for `request`.
    pub fn body(&self, request: &Request) -> Value {
        let mut body = json!({
            "model": self.endpoint.model,
            "max_tokens": request.max_tokens,
            "stream": true,
            "messages": messages(&request.messages),
        });
        if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
            body["system"] = system.into();
        }
        if !request.tools.is_empty() {
            body["tools"] = request.tools.iter().map(tool).collect();
        }
        body
    }
}

/// Messages as content blocks. Consecutive messages of one role become one
/// message (the tool results of one turn, and the person's next words after
/// them); empty text is left out, as the API refuses it.
fn messages(ms: &[Message]) -> Vec<Value> {
    let mut out: Vec<(&str, Vec<Value>)> = Vec::new();
    for m in ms {
        let (role, blocks) = match m {
            Message::User { content } => ("user", text_block(content).into_iter().collect()),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks: Vec<Value> = text_block(content).into_iter().collect();
                blocks.extend(tool_calls.iter().map(|c| {
                    json!({
                        "type": "tool_use",
                        "id": c.id,
                        "name": c.name,
                        "input": input(&c.arguments),
                    })
                }));
                ("assistant", blocks)
            }
            Message::Tool {
                tool_call_id,
                content,
                ..
            } => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": tool_call_id,
                    "content": content,
                })],
            ),
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last, held)) if *last == role => held.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

fn text_block(text: &str) -> Option<Value> {
    (!text.trim().is_empty()).then(|| json!({"type": "text", "text": text}))
}

/// A call's JSON arguments as the object `tool_use.input` must be; `{}`
/// when they are not one (a call cut at `max_tokens`).
fn input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({}),
    }
}

fn tool(t: &ToolSpec) -> Value {
    json!({
        "name": t.name,
        "description": t.description,
        "input_schema": schema(&t.parameters),
    })
}

impl Model for Anthropic {
    fn name(&self) -> String {
        format!("anthropic:{}", self.endpoint.model)
    }

    fn stream(&self, request: Request) -> BoxStream<'static, Result<Delta, LlmError>> {
        let mut headers = vec![("anthropic-version", ANTHROPIC_VERSION.to_string())];
        if let Some(key) = &self.endpoint.api_key {
            headers.push(("x-api-key", key.clone()));
        }
        self.endpoint
            .stream::<Decoder>(self.url(), headers, &self.body(&request))
    }
}

/// The bytes of a response body to deltas.
pub fn decoder() -> StreamDecoder<Decoder> {
    StreamDecoder::new(Decoder::default())
}

/// Message events to deltas. Tool calls are numbered among themselves
/// (a text block before them takes no number); usage and the finish come
/// at `message_stop`.
#[derive(Debug, Default)]
pub struct Decoder {
    blocks: HashMap<u64, Block>,
    tools: usize,
    input_tokens: u64,
    output_tokens: u64,
    stop: Option<FinishReason>,
}

#[derive(Debug)]
enum Block {
    Text,
    Tool {
        index: usize,
        any_args: bool,
        /// `content_block_start`'s `input`: `{}` when streamed.
        input: Value,
    },
    /// Thinking, server tools: not shown.
    Other,
}

/// A count in the JSON (0 when it is not one).
fn number(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

impl Decoder {
    /// `content_block_start`: text (its first text, if any), or a tool
    /// call (started), or something not shown.
    fn block_start(&mut self, json: &Value, out: &mut Vec<Delta>) {
        let index = number(&json["index"]);
        let block = &json["content_block"];
        let block = match block["type"].as_str() {
            Some("text") => {
                if let Some(text) = block["text"].as_str().filter(|t| !t.is_empty()) {
                    out.push(Delta::Text(text.to_string()));
                }
                Block::Text
            }
            Some("tool_use") => {
                let ordinal = self.tools;
                self.tools += 1;
                out.push(Delta::ToolCallStart {
                    index: ordinal,
                    id: block["id"].as_str().unwrap_or("").to_string(),
                    name: block["name"].as_str().unwrap_or("").to_string(),
                });
                Block::Tool {
                    index: ordinal,
                    any_args: false,
                    input: block["input"].clone(),
                }
            }
            _ => Block::Other,
        };
        self.blocks.insert(index, block);
    }

    /// `content_block_delta`: more text, or more of a tool call's
    /// arguments.
    fn block_delta(&mut self, json: &Value, out: &mut Vec<Delta>) {
        let delta = &json["delta"];
        match (
            self.blocks.get_mut(&number(&json["index"])),
            delta["type"].as_str(),
        ) {
            (Some(Block::Text), Some("text_delta")) => {
                if let Some(text) = delta["text"].as_str().filter(|t| !t.is_empty()) {
                    out.push(Delta::Text(text.to_string()));
                }
            }
            (
                Some(Block::Tool {
                    index, any_args, ..
                }),
                Some("input_json_delta"),
            ) => {
                if let Some(part) = delta["partial_json"].as_str().filter(|t| !t.is_empty()) {
                    *any_args = true;
                    out.push(Delta::ToolCallArgs {
                        index: *index,
                        fragment: part.to_string(),
                    });
                }
            }
            _ => {}
        }
    }

    /// `content_block_stop`: a tool call that streamed no arguments still
    /// gets them (its start's `input`, or `{}`).
    fn block_stop(&mut self, json: &Value, out: &mut Vec<Delta>) {
        if let Some(Block::Tool {
            index,
            any_args,
            input,
        }) = self.blocks.get_mut(&number(&json["index"]))
            && !*any_args
        {
            *any_args = true;
            let fragment = match input {
                Value::Object(map) if !map.is_empty() => input.to_string(),
                _ => "{}".to_string(),
            };
            out.push(Delta::ToolCallArgs {
                index: *index,
                fragment,
            });
        }
    }

    fn finish(&mut self, out: &mut Vec<Delta>) {
        out.push(Delta::Usage {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
        });
        let reason = match self.stop.take() {
            Some(reason) => reason,
            None if self.tools > 0 => FinishReason::ToolCalls,
            None => FinishReason::Stop,
        };
        out.push(Delta::Finish(reason));
    }
}

pub fn stop_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" => FinishReason::Length,
        other => FinishReason::Other(other.to_string()),
    }
}

/// An `error` event as the HTTP error it stands for.
fn stream_error(json: &Value) -> LlmError {
    let kind = json["error"]["type"].as_str().unwrap_or("");
    let status = match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "overloaded_error" => 529,
        _ => 500,
    };
    let message = http::json_error_message(json).unwrap_or_else(|| json.to_string());
    LlmError::Http { status, message }
}

impl EventDecoder for Decoder {
    fn event(&mut self, event: SseEvent, out: &mut Vec<Delta>) -> Result<(), LlmError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(());
        }
        let json: Value = serde_json::from_str(data)
            .map_err(|e| LlmError::Decode(format!("{e} in event {}", clip(data))))?;
        let kind = json
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or("");
        match kind {
            "message_start" => {
                let usage = &json["message"]["usage"];
                self.input_tokens = number(&usage["input_tokens"])
                    + number(&usage["cache_creation_input_tokens"])
                    + number(&usage["cache_read_input_tokens"]);
                self.output_tokens = number(&usage["output_tokens"]);
            }
            "content_block_start" => self.block_start(&json, out),
            "content_block_delta" => self.block_delta(&json, out),
            "content_block_stop" => self.block_stop(&json, out),
            "message_delta" => {
                if let Some(reason) = json["delta"]["stop_reason"].as_str() {
                    self.stop = Some(stop_reason(reason));
                }
                let usage = &json["usage"];
                if let Some(tokens) = usage["output_tokens"].as_u64() {
                    self.output_tokens = tokens;
                }
                if let Some(tokens) = usage["input_tokens"].as_u64().filter(|&t| t > 0) {
                    self.input_tokens = tokens
                        + number(&usage["cache_creation_input_tokens"])
                        + number(&usage["cache_read_input_tokens"]);
                }
            }
            "message_stop" => self.finish(out),
            "error" => return Err(stream_error(&json)),
            // `ping`, and events added to the API later.
            _ => {}
        }
        Ok(())
    }

    /// A stream closed after its `message_delta` said why it stopped, but
    /// before `message_stop`, still finished.
    fn end(&mut self, out: &mut Vec<Delta>) -> Result<(), LlmError> {
        if self.stop.is_none() {
            return Err(LlmError::Cut);
        }
        self.finish(out);
        Ok(())
    }
}
