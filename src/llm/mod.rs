//! Model providers behind one streaming trait: OpenAI-compatible chat
//! completions, Anthropic Messages, and a scripted model for demos and
//! tests.

pub mod anthropic;
pub mod http;
pub mod openai;
pub mod recover;
pub mod script;
pub mod select;
pub mod sse;

use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments.
    pub parameters: serde_json::Value,
}

/// A tool call the model made. `arguments` is JSON text, as models send it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    User {
        content: String,
    },
    Assistant {
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        tool_call_id: String,
        name: String,
        content: String,
    },
}

/// One model request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub system: Option<String>,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    /// Always sent: local servers may otherwise generate without end.
    pub max_tokens: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// The model ended its message.
    Stop,
    /// The model wants its tool calls run.
    ToolCalls,
    /// Cut at `max_tokens`.
    Length,
    Other(String),
}

/// A piece of a streamed response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    Text(String),
    /// A tool call starts; `index` orders parallel calls.
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    /// More of a tool call's JSON arguments.
    ToolCallArgs {
        index: usize,
        fragment: String,
    },
    Usage {
        input_tokens: u64,
        output_tokens: u64,
    },
    /// The request is retried after a rate limit or server error, before
    /// anything was streamed (shown in the status line).
    Retry {
        attempt: u32,
        wait_ms: u64,
        reason: String,
    },
    Finish(FinishReason),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    #[error("cannot reach {url}: {message}")]
    Connect { url: String, message: String },
    #[error("the API key was refused ({status}): {message}")]
    Auth { status: u16, message: String },
    #[error("rate limited ({status}) after {attempts} attempts: {message}")]
    RateLimited {
        status: u16,
        attempts: u32,
        message: String,
    },
    #[error("HTTP {status}: {message}")]
    Http { status: u16, message: String },
    #[error("the response stream was cut before it ended")]
    Cut,
    #[error("bad response from the model server: {0}")]
    Decode(String),
    #[error("{0}")]
    Config(String),
    /// The chat's conductor (an ACP agent) failed; the text names it.
    #[error("{0}")]
    Agent(String),
}

/// A chat model that streams its answer.
pub trait Model: Send + Sync {
    /// `provider:name`, for the status line.
    fn name(&self) -> String;
    /// Streams the answer to `request`. The stream ends after a
    /// [`Delta::Finish`], or with an error.
    fn stream(&self, request: Request) -> BoxStream<'static, Result<Delta, LlmError>>;
}
