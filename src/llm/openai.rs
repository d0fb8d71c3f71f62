//! OpenAI-compatible chat completions, streamed: OpenAI itself, and local
//! servers through their base URL (llama.cpp's llama-server, Ollama, vLLM).
//!
//! `POST {base_url}/chat/completions` with `stream: true` and
//! `stream_options.include_usage`; the answer is SSE chunks of
//! `choices[0].delta` (`content`, `tool_calls[i]` with `index`, `id`,
//! `function.name` and `function.arguments` fragments) and a
//! `finish_reason`, a last chunk with `usage`, then `data: [DONE]`.

use std::collections::HashMap;

use futures::stream::BoxStream;
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{self, Endpoint, EventDecoder, RetryPolicy, StreamDecoder};
use super::sse::SseEvent;
use super::{Delta, FinishReason, LlmError, Message, Model, Request, ToolSpec};

/// The official API; a request there is authenticated.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

pub struct OpenAi {
    endpoint: Endpoint,
}

impl OpenAi {
    /// `api_key` may be `None` for a local server: no `Authorization` is
    /// sent then.
    pub fn new(model: &str, base_url: &str, api_key: Option<String>) -> Self {
        Self {
            endpoint: Endpoint::new(model, base_url, api_key),
        }
    }

    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.endpoint.retry = retry;
        self
    }

    pub fn url(&self) -> String {
        if self.endpoint.base_url.ends_with("/chat/completions") {
            self.endpoint.base_url.clone()
        } else {
            http::join_url(&self.endpoint.base_url, "chat/completions")
        }
    }

    /// The JSON body for `request`.
    pub fn body(&self, request: &Request) -> Value {
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
            messages.push(json!({"role": "system", "content": system}));
        }
        messages.extend(request.messages.iter().map(message));
        // OpenAI's own reasoning models refuse `max_tokens`; the field that
        // replaced it is not known to every local server.
        let limit = if self.endpoint.base_url == OPENAI_BASE_URL {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        let mut body = json!({
            "model": self.endpoint.model,
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        body[limit] = request.max_tokens.into();
        if !request.tools.is_empty() {
            body["tools"] = request.tools.iter().map(tool).collect();
        }
        body
    }
}

fn message(m: &Message) -> Value {
    match m {
        Message::User { content } => json!({"role": "user", "content": content}),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            if tool_calls.is_empty() {
                return json!({"role": "assistant", "content": content});
            }
            let calls: Vec<Value> = tool_calls
                .iter()
                .map(|c| {
                    let arguments = if c.arguments.trim().is_empty() {
                        "{}"
                    } else {
                        &c.arguments
                    };
                    json!({
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": arguments},
                    })
                })
                .collect();
            let content = if content.is_empty() {
                Value::Null
            } else {
                Value::from(content.as_str())
            };
            json!({"role": "assistant", "content": content, "tool_calls": calls})
        }
        Message::Tool {
            tool_call_id,
            content,
            ..
        } => json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}),
    }
}

fn tool(t: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": t.name,
            "description": t.description,
            "parameters": schema(&t.parameters),
        },
    })
}

/// A tool's schema, or the empty object schema when it has none.
pub(crate) fn schema(parameters: &Value) -> Value {
    if parameters.is_null() {
        json!({"type": "object", "properties": {}})
    } else {
        parameters.clone()
    }
}

impl Model for OpenAi {
    fn name(&self) -> String {
        format!("openai:{}", self.endpoint.model)
    }

    fn stream(&self, request: Request) -> BoxStream<'static, Result<Delta, LlmError>> {
        let mut headers = Vec::new();
        if let Some(key) = &self.endpoint.api_key {
            headers.push(("authorization", format!("Bearer {key}")));
        }
        self.endpoint
            .stream::<Decoder>(self.url(), headers, &self.body(&request))
    }
}

/// The bytes of a response body to deltas.
pub fn decoder() -> StreamDecoder<Decoder> {
    StreamDecoder::new(Decoder::default())
}

/// Chat-completion chunks to deltas. Tool calls are numbered in the order
/// they first appear; a call's start waits for its name, and its argument
/// fragments for its start. Usage and the finish come at `[DONE]`, usage
/// (the last one reported) right before the finish.
#[derive(Debug, Default)]
pub struct Decoder {
    calls: Vec<PendingCall>,
    by_index: HashMap<u64, usize>,
    finish: Option<FinishReason>,
    usage: Option<(u64, u64)>,
}

#[derive(Debug, Default)]
struct PendingCall {
    id: String,
    name: String,
    started: bool,
    /// Fragments that came before the name.
    held: String,
    any_args: bool,
}

impl Decoder {
    fn tool_call(&mut self, item: &Value, out: &mut Vec<Delta>) {
        let id = item.get("id").and_then(Value::as_str).unwrap_or("");
        let function = item.get("function");
        let name = function
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let fragment = match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => String::new(),
            // Some servers send the arguments as an object.
            Some(other) => other.to_string(),
        };
        let ordinal = match item.get("index").and_then(Value::as_u64) {
            Some(index) => *self.by_index.entry(index).or_insert_with(|| {
                self.calls.push(PendingCall::default());
                self.calls.len() - 1
            }),
            // No index (some servers): a new id is a new call.
            None => match self.calls.last() {
                Some(last) if id.is_empty() || last.id == id => self.calls.len() - 1,
                _ => {
                    self.calls.push(PendingCall::default());
                    self.calls.len() - 1
                }
            },
        };
        let call = &mut self.calls[ordinal];
        if call.id.is_empty() {
            call.id = id.to_string();
        }
        if call.name.is_empty() {
            call.name = name.to_string();
        }
        if !fragment.is_empty() {
            call.any_args = true;
            if call.started {
                out.push(Delta::ToolCallArgs {
                    index: ordinal,
                    fragment,
                });
            } else {
                call.held.push_str(&fragment);
            }
        }
        if !call.started && !call.name.is_empty() {
            start(ordinal, call, out);
        }
    }

    fn finish(&mut self, out: &mut Vec<Delta>) {
        for (index, call) in self.calls.iter_mut().enumerate() {
            if !call.started {
                start(index, call, out);
            }
            if !call.any_args {
                out.push(Delta::ToolCallArgs {
                    index,
                    fragment: "{}".into(),
                });
            }
        }
        if let Some((input_tokens, output_tokens)) = self.usage {
            out.push(Delta::Usage {
                input_tokens,
                output_tokens,
            });
        }
        let reason = match self.finish.take() {
            // Some servers say `stop` after tool calls.
            Some(FinishReason::Stop) | None if !self.calls.is_empty() => FinishReason::ToolCalls,
            Some(reason) => reason,
            None => FinishReason::Stop,
        };
        out.push(Delta::Finish(reason));
    }
}

fn start(index: usize, call: &mut PendingCall, out: &mut Vec<Delta>) {
    call.started = true;
    let id = if call.id.is_empty() {
        format!("call_{index}")
    } else {
        call.id.clone()
    };
    out.push(Delta::ToolCallStart {
        index,
        id,
        name: call.name.clone(),
    });
    if !call.held.is_empty() {
        out.push(Delta::ToolCallArgs {
            index,
            fragment: std::mem::take(&mut call.held),
        });
    }
}

/// An error object in a stream or a body, as an [`LlmError::Http`].
fn stream_error(json: &Value) -> LlmError {
    let error = &json["error"];
    let status = error
        .get("code")
        .and_then(Value::as_u64)
        .or_else(|| json.get("code").and_then(Value::as_u64))
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c))
        .unwrap_or(500);
    let message = http::json_error_message(json).unwrap_or_else(|| json.to_string());
    LlmError::Http { status, message }
}

/// The most of a model listing read (`GET {base}/models`).
const MAX_LISTING: usize = 1 << 20;

/// The models an OpenAI-compatible server at `base_url` lists (`GET
/// {base_url}/models`: `data[].id`, as llama-server, Ollama and vLLM
/// answer), or `None` when nothing answers so within `timeout`, or the
/// answer is no listing. No key is sent: it asks a local server.
pub async fn list_models(base_url: &str, timeout: std::time::Duration) -> Option<Vec<String>> {
    let url = http::join_url(base_url.trim_end_matches("/chat/completions"), "models");
    let ask = async {
        let client = reqwest::Client::builder()
            .connect_timeout(timeout)
            .user_agent(concat!("quorum/", env!("CARGO_PKG_VERSION")))
            .build()
            .ok()?;
        let mut response = client.get(&url).send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.ok()? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_LISTING {
                return None;
            }
        }
        model_ids(&serde_json::from_slice(&body).ok()?)
    };
    tokio::time::timeout(timeout, ask).await.ok().flatten()
}

/// The ids of a model listing (`{"data": [{"id": ...}, ...]}`), in its
/// order, each once; `None` when it is no listing.
fn model_ids(listing: &Value) -> Option<Vec<String>> {
    let mut seen = std::collections::HashSet::new();
    let mut ids: Vec<String> = Vec::new();
    for model in listing.get("data")?.as_array()? {
        let Some(id) = model.get("id").and_then(Value::as_str) else {
            continue;
        };
        let id = id.trim();
        if !id.is_empty() && seen.insert(id) {
            ids.push(id.to_string());
        }
    }
    Some(ids)
}

pub fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" | "end_turn" | "eos" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" | "max_tokens" => FinishReason::Length,
        other => FinishReason::Other(other.to_string()),
    }
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    delta: Option<ChoiceDelta>,
    #[serde(default)]
    finish_reason: Option<Value>,
}

#[derive(Deserialize)]
struct ChoiceDelta {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Value>,
}

impl EventDecoder for Decoder {
    fn event(&mut self, event: SseEvent, out: &mut Vec<Delta>) -> Result<(), LlmError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.finish(out);
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        let bad = |e: serde_json::Error| LlmError::Decode(format!("{e} in chunk {}", clip(data)));
        if event.event.as_deref() == Some("error") {
            return Err(stream_error(&serde_json::from_str(data).map_err(bad)?));
        }
        // Only what is used is kept (`id`, `model`, `timings`… are skipped).
        let chunk: Chunk = serde_json::from_str(data).map_err(bad)?;
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            return Err(stream_error(&json!({ "error": error })));
        }
        if let Some(usage) = chunk.usage.filter(|u| u.is_object()) {
            let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
            self.usage = Some((n("prompt_tokens"), n("completion_tokens")));
        }
        for choice in chunk.choices.into_iter().flatten() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                if let Some(Value::String(text)) = delta.content
                    && !text.is_empty()
                {
                    out.push(Delta::Text(text));
                }
                if let Some(Value::Array(calls)) = delta.tool_calls {
                    for item in &calls {
                        self.tool_call(item, out);
                    }
                }
            }
            if let Some(Value::String(reason)) = choice.finish_reason {
                self.finish = Some(finish_reason(&reason));
            }
        }
        Ok(())
    }

    /// A server that closes after its `finish_reason` without `[DONE]`
    /// still finished.
    fn end(&mut self, out: &mut Vec<Delta>) -> Result<(), LlmError> {
        if self.finish.is_none() {
            return Err(LlmError::Cut);
        }
        self.finish(out);
        Ok(())
    }
}

pub(crate) fn clip(s: &str) -> String {
    if s.chars().count() <= 200 {
        return s.to_string();
    }
    let mut out: String = s.chars().take(200).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listings_ids_in_order_each_once() {
        let listing = json!({"object": "list", "data": [
            {"id": "qwen"}, {"id": " llama "}, {"id": "qwen"}, {"id": ""}, {"name": "x"}
        ]});
        assert_eq!(
            model_ids(&listing),
            Some(vec!["qwen".into(), "llama".into()])
        );
        assert_eq!(model_ids(&json!({"models": []})), None);
        assert_eq!(model_ids(&json!({"data": {}})), None);
    }
}
