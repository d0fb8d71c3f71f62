//! The OpenAI-compatible and Anthropic providers against a mock HTTP
//! server on 127.0.0.1 (hand-rolled HTTP/1.1: it checks what was sent and
//! answers with the SSE fixtures of tests/fixtures/sse), and their stream
//! decoders fed the fixtures split at every byte.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use quorum::llm::anthropic::{self, Anthropic};
use quorum::llm::http::{EventDecoder, RetryPolicy, StreamDecoder};
use quorum::llm::openai::{self, OpenAi};
use quorum::llm::select;
use quorum::llm::{Delta, FinishReason, LlmError, Message, Model, Request, ToolCall, ToolSpec};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

// ---------------------------------------------------------------- fixtures

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sse")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn text(s: &str) -> Delta {
    Delta::Text(s.to_string())
}

fn start(index: usize, id: &str, name: &str) -> Delta {
    Delta::ToolCallStart {
        index,
        id: id.to_string(),
        name: name.to_string(),
    }
}

fn args(index: usize, fragment: &str) -> Delta {
    Delta::ToolCallArgs {
        index,
        fragment: fragment.to_string(),
    }
}

fn usage(input_tokens: u64, output_tokens: u64) -> Delta {
    Delta::Usage {
        input_tokens,
        output_tokens,
    }
}

fn finish(reason: FinishReason) -> Delta {
    Delta::Finish(reason)
}

/// What each fixture decodes to.
fn expected(name: &str) -> Vec<Delta> {
    use FinishReason::*;
    match name {
        "openai_text.sse" => vec![
            text("Claude"),
            text("’s review"),
            text(" is done:"),
            text(" the parser"),
            text(" looks fine ✓"),
            text("."),
            usage(412, 11),
            finish(Stop),
        ],
        "openai_tool_call.sse" => {
            let mut d = vec![start(0, "call_Yk3pWc9bH2sQfV7rN0tLmA1x", "subagent")];
            for a in [
                "{\"", "agent", "\":\"", "claude", "\",\"", "input", "\":\"", "Review", " src",
                "/llm", " for", " bugs", "\"}",
            ] {
                d.push(args(0, a));
            }
            d.extend([usage(388, 27), finish(ToolCalls)]);
            d
        }
        "openai_parallel_tool_calls.sse" => vec![
            text("Asking both."),
            start(0, "call_9vQeLr2mXbT4nK7sJdP1wZ0c", "subagent"),
            args(0, "{\"agent\""),
            args(0, ":\"claude\""),
            args(0, ",\"input\":\"Review "),
            args(0, "the diff\"}"),
            start(1, "call_Hs5uEo8yGi3aRf6tMkC2pN4v", "subagent"),
            args(1, "{\"agent\":\"co"),
            args(1, "dex\",\"input\":\"Run"),
            args(1, " the tests\"}"),
            start(2, "call_Wd1xBq7nLz0cVh3eYsT9jK5r", "list_agents"),
            args(2, "{}"),
            usage(402, 71),
            finish(ToolCalls),
        ],
        "openai_length.sse" => vec![
            text("Here is"),
            text(" a long"),
            text(" answer"),
            usage(12, 3),
            finish(Length),
        ],
        // Recorded from llama-server with Qwen2.5-coder 0.5B: its tool call
        // came as text.
        "openai_llamacpp_tool_as_text.sse" => {
            let pieces = [
                "{\n",
                "\"name",
                "\":",
                " \"",
                "sub",
                "agent",
                "\",\n",
                "\"",
                "arguments",
                "\":",
                " {\n",
                "\"",
                "agent",
                "\":",
                " \"",
                "cla",
                "ude",
                "\",\n",
                "\"",
                "input",
                "\":",
                " \"",
                "src",
                "/",
                "ll",
                "m",
                "/open",
                "ai",
                ".rs",
                "\"\n",
                "}\n",
                "}",
            ];
            let mut d: Vec<Delta> = pieces.into_iter().map(text).collect();
            d.extend([usage(223, 33), finish(Stop)]);
            d
        }
        "anthropic_text.sse" => vec![
            text("Claude"),
            text("’s review is done:"),
            text(" the parser looks"),
            text(" fine ✓."),
            usage(25, 15),
            finish(Stop),
        ],
        "anthropic_tool_use.sse" => vec![
            text("I'll ask"),
            text(" claude to review it."),
            start(0, "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "subagent"),
            args(0, "{\"agent\": \"cl"),
            args(0, "aude\", \"input\": \"Review"),
            args(0, " src/llm for bugs\"}"),
            usage(472, 89),
            finish(ToolCalls),
        ],
        "anthropic_parallel_tool_use.sse" => vec![
            text("Asking both."),
            start(0, "toolu_01A09q90qw90lq917835lq9", "subagent"),
            args(0, "{\"agent\":\"claude\","),
            args(0, "\"input\":\"Review the diff\"}"),
            start(1, "toolu_01B4kS7c9Pq2WdLx8mNe5Rtv", "subagent"),
            args(1, "{\"agent\":\"codex\",\"in"),
            args(1, "put\":\"Run the tests\"}"),
            // Streamed no arguments: given `{}`.
            start(2, "toolu_01C7hJ3sX5vB2nQ9wE4rT6yU", "list_agents"),
            args(2, "{}"),
            usage(510, 134),
            finish(ToolCalls),
        ],
        "anthropic_max_tokens.sse" => vec![
            text("Here is"),
            text(" a long"),
            usage(30, 2),
            finish(Length),
        ],
        other => panic!("no expectation for {other}"),
    }
}

const OPENAI_FIXTURES: [&str; 5] = [
    "openai_text.sse",
    "openai_llamacpp_tool_as_text.sse",
    "openai_tool_call.sse",
    "openai_parallel_tool_calls.sse",
    "openai_length.sse",
];
const ANTHROPIC_FIXTURES: [&str; 4] = [
    "anthropic_text.sse",
    "anthropic_tool_use.sse",
    "anthropic_parallel_tool_use.sse",
    "anthropic_max_tokens.sse",
];

/// The tool calls that `deltas` assemble, as the harness would.
fn assembled_calls(deltas: &[Delta]) -> Vec<(String, String, Value)> {
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for d in deltas {
        match d {
            Delta::ToolCallStart { index, id, name } => {
                assert_eq!(*index, calls.len(), "calls start in order");
                calls.push((id.clone(), name.clone(), String::new()));
            }
            Delta::ToolCallArgs { index, fragment } => calls[*index].2.push_str(fragment),
            _ => {}
        }
    }
    calls
        .into_iter()
        .map(|(id, name, a)| {
            let a = serde_json::from_str(&a).unwrap_or_else(|e| panic!("{a}: {e}"));
            (id, name, a)
        })
        .collect()
}

// ------------------------------------------------- decoders, split anywhere

fn decode<D: EventDecoder>(
    mut d: StreamDecoder<D>,
    chunks: &[&[u8]],
) -> Result<Vec<Delta>, LlmError> {
    let mut out = Vec::new();
    for chunk in chunks {
        out.extend(d.push(chunk)?);
    }
    out.extend(d.finish()?);
    Ok(out)
}

/// The fixture whole and split in two at every byte (inside UTF-8
/// characters too); with CRLF and with CR line ends, whole and split at
/// every byte next to a line end (elsewhere it is the LF case again):
/// always the same deltas.
fn split_everywhere<D: EventDecoder>(name: &str, new: fn() -> StreamDecoder<D>) {
    let lf = fixture(name);
    let want = expected(name);
    let crlf = String::from_utf8(lf.clone()).unwrap().replace('\n', "\r\n");
    let cr = String::from_utf8(lf.clone()).unwrap().replace('\n', "\r");
    for (ending, body) in [
        ("LF", lf),
        ("CRLF", crlf.into_bytes()),
        ("CR", cr.into_bytes()),
    ] {
        assert_eq!(
            decode(new(), &[&body]).unwrap(),
            want,
            "{name} {ending} whole"
        );
        let near_line_end = |cut: usize| {
            let line_end = |i: usize| matches!(body.get(i), Some(b'\r' | b'\n'));
            ending == "LF" || line_end(cut) || (cut > 0 && line_end(cut - 1))
        };
        for cut in (0..=body.len()).filter(|&cut| near_line_end(cut)) {
            let got = decode(new(), &[&body[..cut], &body[cut..]]);
            assert_eq!(got.as_ref(), Ok(&want), "{name} {ending} cut at byte {cut}");
        }
    }
}

#[test]
fn openai_fixtures_decode_alike_however_split() {
    for name in OPENAI_FIXTURES {
        split_everywhere(name, openai::decoder);
    }
}

#[test]
fn anthropic_fixtures_decode_alike_however_split() {
    for name in ANTHROPIC_FIXTURES {
        split_everywhere(name, anthropic::decoder);
    }
}

#[test]
fn fixture_tool_calls_assemble_to_json() {
    let calls = assembled_calls(&expected("openai_parallel_tool_calls.sse"));
    assert_eq!(
        calls,
        vec![
            (
                "call_9vQeLr2mXbT4nK7sJdP1wZ0c".into(),
                "subagent".into(),
                json!({"agent": "claude", "input": "Review the diff"})
            ),
            (
                "call_Hs5uEo8yGi3aRf6tMkC2pN4v".into(),
                "subagent".into(),
                json!({"agent": "codex", "input": "Run the tests"})
            ),
            (
                "call_Wd1xBq7nLz0cVh3eYsT9jK5r".into(),
                "list_agents".into(),
                json!({})
            ),
        ]
    );
    let calls = assembled_calls(&expected("anthropic_tool_use.sse"));
    assert_eq!(
        calls[0].2,
        json!({"agent": "claude", "input": "Review src/llm for bugs"})
    );
    assert_eq!(
        assembled_calls(&expected("anthropic_parallel_tool_use.sse")).len(),
        3
    );
}

#[test]
fn a_local_model_tool_call_written_as_text_is_recovered() {
    let deltas = expected("openai_llamacpp_tool_as_text.sse");
    let said: String = deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    let calls = quorum::llm::recover::recover_tool_calls(&said, &[subagent_tool(), list_tool()]);
    assert_eq!(
        calls,
        Some(vec![ToolCall {
            id: "recovered-0".into(),
            name: "subagent".into(),
            arguments: r#"{"agent":"claude","input":"src/llm/openai.rs"}"#.into(),
        }])
    );
}

#[test]
fn a_body_without_its_end_is_cut() {
    // Stopped anywhere before `[DONE]`/`finish_reason`, or `message_delta`.
    for (name, end) in [
        ("openai_tool_call.sse", "\"finish_reason\":\"tool_calls\""),
        ("anthropic_tool_use.sse", "event: message_delta"),
    ] {
        let body = fixture(name);
        let end = String::from_utf8_lossy(&body).find(end).unwrap();
        for cut in [0, 1, end / 2, end - 1] {
            let got = if name.starts_with("openai") {
                decode(openai::decoder(), &[&body[..cut]])
            } else {
                decode(anthropic::decoder(), &[&body[..cut]])
            };
            assert_eq!(got, Err(LlmError::Cut), "{name} ending at {cut}");
        }
    }
}

#[test]
fn a_finished_stream_may_close_without_its_last_marker() {
    // OpenAI-compatible servers that close after `finish_reason` (no
    // `[DONE]`), and a last event without its blank line.
    let body = String::from_utf8(fixture("openai_text.sse")).unwrap();
    let without_done = body.replace("data: [DONE]\n\n", "");
    assert_eq!(
        decode(openai::decoder(), &[without_done.as_bytes()]).unwrap(),
        expected("openai_text.sse")
    );
    let no_blank_line = body.trim_end();
    assert_eq!(
        decode(openai::decoder(), &[no_blank_line.as_bytes()]).unwrap(),
        expected("openai_text.sse")
    );
    let body = String::from_utf8(fixture("anthropic_text.sse")).unwrap();
    let without_stop = &body[..body.find("event: message_stop").unwrap()];
    assert_eq!(
        decode(anthropic::decoder(), &[without_stop.as_bytes()]).unwrap(),
        expected("anthropic_text.sse")
    );
}

#[test]
fn anthropic_error_event_is_an_error() {
    let got = decode(
        anthropic::decoder(),
        &[&fixture("anthropic_error_event.sse")],
    );
    assert_eq!(
        got,
        Err(LlmError::Http {
            status: 529,
            message: "Overloaded".into()
        })
    );
}

#[test]
fn openai_stream_quirks_of_local_servers() {
    // Ollama-style: a whole call in one chunk without `index`, and `stop`
    // as the finish reason; llama.cpp-style usage in the finish chunk.
    let body = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"subagent\",\"arguments\":\"{\\\"agent\\\":\\\"claude\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"list_agents\",\"arguments\":{}}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"completion_tokens\":9,\"prompt_tokens\":120,\"total_tokens\":129},\"timings\":{\"predicted_n\":9}}\n\n",
        "data: [DONE]\n\n",
    );
    assert_eq!(
        decode(openai::decoder(), &[body.as_bytes()]).unwrap(),
        vec![
            start(0, "call_a", "subagent"),
            args(0, "{\"agent\":\"claude\"}"),
            start(1, "call_b", "list_agents"),
            args(1, "{}"),
            usage(120, 9),
            finish(FinishReason::ToolCalls),
        ]
    );
    // A name that comes after the first argument fragment: the fragments
    // wait for it.
    let body = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"subagent\",\"arguments\":\":1}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    assert_eq!(
        decode(openai::decoder(), &[body.as_bytes()]).unwrap(),
        vec![
            start(0, "c1", "subagent"),
            args(0, "{\"a\":1}"),
            finish(FinishReason::ToolCalls),
        ]
    );
}

#[test]
fn openai_error_inside_the_stream() {
    let body = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n",
        "data: {\"error\":{\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\",\"code\":null}}\n\n",
    );
    // The text before the error arrives, though both came in one read.
    let mut d = openai::decoder();
    assert_eq!(d.push(body.as_bytes()), Ok(vec![Delta::Text("Hi".into())]));
    assert_eq!(
        d.take_error(),
        Some(LlmError::Http {
            status: 500,
            message: "The server had an error while processing your request.".into()
        })
    );
    // Older llama.cpp servers: an `error:` line.
    let body = "error: {\"code\":500,\"message\":\"context shift is disabled\",\"type\":\"server_error\"}\n\n";
    assert_eq!(
        decode(openai::decoder(), &[body.as_bytes()]),
        Err(LlmError::Http {
            status: 500,
            message: "context shift is disabled".into()
        })
    );
    let garbage = "data: {\"choices\": [\n\n";
    assert!(matches!(
        decode(openai::decoder(), &[garbage.as_bytes()]),
        Err(LlmError::Decode(_))
    ));
}

// ------------------------------------------------------ the mock server

#[derive(Debug)]
struct Seen {
    method: String,
    path: String,
    /// Lower-cased names.
    headers: Vec<(String, String)>,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone)]
enum Reply {
    /// An SSE body in chunked encoding, written in small pieces.
    Sse(Vec<u8>),
    /// An SSE body delimited by closing the connection (no length, not
    /// chunked), as some servers do.
    SseUntilClose(Vec<u8>),
    /// The first `keep` bytes of a chunked SSE body, then the connection
    /// closes (no last chunk).
    SseCut(Vec<u8>, usize),
    /// A JSON error body.
    Status(u16, Vec<(&'static str, &'static str)>, Vec<u8>),
}

struct Mock {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    server: tokio::task::JoinHandle<()>,
}

impl Mock {
    /// Serves `replies`, one connection each, in order.
    async fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let server = tokio::spawn(async move {
            for reply in replies {
                let (mut socket, _) = listener.accept().await.unwrap();
                let request = read_request(&mut socket).await;
                log.lock().unwrap().push(request);
                answer(&mut socket, reply).await;
            }
        });
        Self { url, seen, server }
    }

    /// The requests, once every reply was given.
    async fn requests(self) -> Vec<Seen> {
        tokio::time::timeout(Duration::from_secs(5), self.server)
            .await
            .expect("every reply was asked for")
            .unwrap();
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

async fn read_request(socket: &mut TcpStream) -> Seen {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the client closed before its request ended");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buf[..head_end].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap().split(' ');
    let method = first.next().unwrap().to_string();
    let path = first.next().unwrap().to_string();
    assert_eq!(first.next(), Some("HTTP/1.1"));
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .expect("the body has a length")
        .1
        .parse()
        .unwrap();
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await.unwrap();
        assert!(n > 0);
        body.extend_from_slice(&chunk[..n]);
    }
    Seen {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).expect("the body is JSON"),
    }
}

async fn answer(socket: &mut TcpStream, reply: Reply) {
    const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n";
    let result = match reply {
        Reply::Sse(body) => write_chunked(socket, SSE_HEAD, &body, body.len(), true).await,
        Reply::SseCut(body, keep) => write_chunked(socket, SSE_HEAD, &body, keep, false).await,
        Reply::SseUntilClose(body) => {
            let mut out = format!("{SSE_HEAD}\r\n").into_bytes();
            out.extend_from_slice(&body);
            socket.write_all(&out).await
        }
        Reply::Status(status, headers, body) => {
            let mut head = format!(
                "HTTP/1.1 {status} Whatever\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (n, v) in headers {
                head.push_str(&format!("{n}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let mut out = head.into_bytes();
            out.extend_from_slice(&body);
            socket.write_all(&out).await
        }
    };
    // The client may have gone already (a test that drops the stream).
    if result.is_ok() {
        let _ = socket.shutdown().await;
    }
}

async fn write_chunked(
    socket: &mut TcpStream,
    head: &str,
    body: &[u8],
    keep: usize,
    last_chunk: bool,
) -> std::io::Result<()> {
    socket
        .write_all(format!("{head}transfer-encoding: chunked\r\n\r\n").as_bytes())
        .await?;
    for piece in body[..keep].chunks(97) {
        let mut out = format!("{:x}\r\n", piece.len()).into_bytes();
        out.extend_from_slice(piece);
        out.extend_from_slice(b"\r\n");
        socket.write_all(&out).await?;
        socket.flush().await?;
    }
    if last_chunk {
        socket.write_all(b"0\r\n\r\n").await?;
    }
    Ok(())
}

// ------------------------------------------------------ requests

fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 4,
        base_delay: Duration::from_millis(4),
        max_delay: Duration::from_secs(1),
    }
}

fn subagent_tool() -> ToolSpec {
    ToolSpec {
        name: "subagent".into(),
        description: "Ask a coding agent.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"agent": {"type": "string"}, "input": {"type": "string"}},
            "required": ["agent", "input"],
        }),
    }
}

fn list_tool() -> ToolSpec {
    ToolSpec {
        name: "list_agents".into(),
        description: "The agents.".into(),
        parameters: Value::Null,
    }
}

fn simple_request() -> Request {
    Request {
        system: Some("You convene coding agents.".into()),
        messages: vec![Message::User {
            content: "Ask claude to review src/llm".into(),
        }],
        tools: vec![subagent_tool(), list_tool()],
        max_tokens: 1024,
    }
}

/// A turn with two tool calls answered, then the person again.
fn conversation() -> Request {
    Request {
        system: Some("You convene coding agents.".into()),
        messages: vec![
            Message::User {
                content: "Review and test it".into(),
            },
            Message::Assistant {
                content: "Asking both.".into(),
                tool_calls: vec![
                    ToolCall {
                        id: "call_1".into(),
                        name: "subagent".into(),
                        arguments: r#"{"agent":"claude","input":"Review"}"#.into(),
                    },
                    ToolCall {
                        id: "call_2".into(),
                        name: "list_agents".into(),
                        arguments: String::new(),
                    },
                ],
            },
            Message::Tool {
                tool_call_id: "call_1".into(),
                name: "subagent".into(),
                content: "Looks fine.".into(),
            },
            Message::Tool {
                tool_call_id: "call_2".into(),
                name: "list_agents".into(),
                content: "claude, codex".into(),
            },
            Message::User {
                content: "Thanks. And codex?".into(),
            },
            // A turn that failed before saying anything.
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![],
            },
            Message::User {
                content: "Again?".into(),
            },
        ],
        tools: vec![subagent_tool()],
        max_tokens: 300,
    }
}

/// Everything the model streams: the deltas, and the error that ended it.
async fn run(model: &dyn Model, request: Request) -> (Vec<Delta>, Option<LlmError>) {
    let items: Vec<_> =
        tokio::time::timeout(Duration::from_secs(10), model.stream(request).collect())
            .await
            .expect("the stream ends");
    let mut deltas = Vec::new();
    let mut error = None;
    for (i, item) in items.iter().enumerate() {
        match item {
            Ok(d) => {
                assert!(error.is_none(), "nothing after an error");
                deltas.push(d.clone());
            }
            Err(e) => {
                assert_eq!(i, items.len() - 1, "an error ends the stream");
                error = Some(e.clone());
            }
        }
    }
    if error.is_none() {
        assert!(
            matches!(deltas.last(), Some(Delta::Finish(_))),
            "{deltas:?}"
        );
    }
    (deltas, error)
}

fn retries(deltas: &[Delta]) -> Vec<(u32, u64)> {
    deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Retry {
                attempt, wait_ms, ..
            } => Some((*attempt, *wait_ms)),
            _ => None,
        })
        .collect()
}

fn without_retries(deltas: Vec<Delta>) -> Vec<Delta> {
    deltas
        .into_iter()
        .filter(|d| !matches!(d, Delta::Retry { .. }))
        .collect()
}

fn openai_at(mock: &Mock, key: Option<&str>) -> OpenAi {
    OpenAi::new(
        "gpt-4o-mini",
        &format!("{}/v1", mock.url),
        key.map(str::to_string),
    )
    .with_retry(fast_retry())
}

fn anthropic_at(mock: &Mock) -> Anthropic {
    Anthropic::new("claude-sonnet-4-5", &mock.url, Some("sk-ant-test".into()))
        .with_retry(fast_retry())
}

// ------------------------------------------------------ OpenAI over HTTP

#[tokio::test]
async fn openai_streams_text_and_sends_the_documented_request() {
    let mock = Mock::start(vec![Reply::Sse(fixture("openai_text.sse"))]).await;
    let model = openai_at(&mock, Some("sk-test"));
    let (deltas, error) = run(&model, simple_request()).await;
    assert_eq!(error, None);
    assert_eq!(deltas, expected("openai_text.sse"));
    let seen = mock.requests().await;
    assert_eq!(seen.len(), 1);
    let r = &seen[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(r.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("accept"), Some("text/event-stream"));
    assert_eq!(
        r.body,
        json!({
            "model": "gpt-4o-mini",
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 1024,
            "messages": [
                {"role": "system", "content": "You convene coding agents."},
                {"role": "user", "content": "Ask claude to review src/llm"},
            ],
            "tools": [
                {"type": "function", "function": {
                    "name": "subagent",
                    "description": "Ask a coding agent.",
                    "parameters": subagent_tool().parameters,
                }},
                {"type": "function", "function": {
                    "name": "list_agents",
                    "description": "The agents.",
                    "parameters": {"type": "object", "properties": {}},
                }},
            ],
        })
    );
}

#[tokio::test]
async fn openai_streams_tool_calls() {
    for name in [
        "openai_tool_call.sse",
        "openai_parallel_tool_calls.sse",
        "openai_length.sse",
    ] {
        let mock = Mock::start(vec![Reply::Sse(fixture(name))]).await;
        let (deltas, error) = run(&openai_at(&mock, Some("sk-test")), simple_request()).await;
        assert_eq!(error, None, "{name}");
        assert_eq!(deltas, expected(name), "{name}");
        mock.requests().await;
    }
}

#[tokio::test]
async fn openai_sends_a_conversation_with_tool_calls_and_results() {
    let mock = Mock::start(vec![Reply::Sse(fixture("openai_text.sse"))]).await;
    run(&openai_at(&mock, Some("sk-test")), conversation()).await;
    let seen = mock.requests().await;
    assert_eq!(seen[0].body["max_tokens"], 300);
    assert_eq!(
        seen[0].body["messages"],
        json!([
            {"role": "system", "content": "You convene coding agents."},
            {"role": "user", "content": "Review and test it"},
            {"role": "assistant", "content": "Asking both.", "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "subagent", "arguments": "{\"agent\":\"claude\",\"input\":\"Review\"}"}},
                {"id": "call_2", "type": "function",
                 "function": {"name": "list_agents", "arguments": "{}"}},
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "Looks fine."},
            {"role": "tool", "tool_call_id": "call_2", "content": "claude, codex"},
            {"role": "user", "content": "Thanks. And codex?"},
            {"role": "assistant", "content": ""},
            {"role": "user", "content": "Again?"},
        ])
    );
}

#[tokio::test]
async fn openai_local_server_without_key_gets_no_authorization() {
    let mock = Mock::start(vec![Reply::Sse(fixture("openai_text.sse"))]).await;
    // Through `--model` and `OPENAI_BASE_URL`, as a person would.
    let base = format!("{}/v1/", mock.url);
    let env = move |k: &str| (k == "OPENAI_BASE_URL").then(|| base.clone());
    let model = select::from_spec("openai:qwen2.5-coder", None, &env).unwrap();
    let (deltas, error) = run(&*model, simple_request()).await;
    assert_eq!((deltas, error), (expected("openai_text.sse"), None));
    let seen = mock.requests().await;
    assert_eq!(seen[0].path, "/v1/chat/completions");
    assert_eq!(seen[0].header("authorization"), None);
    assert_eq!(seen[0].body["model"], "qwen2.5-coder");
}

#[tokio::test]
async fn openai_retries_a_429_after_its_retry_after() {
    let mock = Mock::start(vec![
        Reply::Status(
            429,
            vec![("retry-after", "0.01")],
            fixture("openai_error_429.json"),
        ),
        Reply::Status(503, vec![], b"upstream unavailable".to_vec()),
        Reply::Sse(fixture("openai_tool_call.sse")),
    ])
    .await;
    let (deltas, error) = run(&openai_at(&mock, Some("sk-test")), simple_request()).await;
    assert_eq!(error, None);
    // Announced before the wait: 10 ms as asked, then the doubled backoff.
    assert_eq!(retries(&deltas), vec![(2, 10), (3, 8)]);
    let Delta::Retry { reason, .. } = &deltas[0] else {
        panic!("{deltas:?}")
    };
    assert!(
        reason.starts_with("HTTP 429: Rate limit reached for gpt-4o-mini"),
        "{reason}"
    );
    assert_eq!(without_retries(deltas), expected("openai_tool_call.sse"));
    let seen = mock.requests().await;
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0].body, seen[2].body, "the same request again");
}

#[tokio::test]
async fn openai_gives_up_after_four_rate_limits() {
    let limited = Reply::Status(
        429,
        vec![("retry-after", "0")],
        fixture("openai_error_429.json"),
    );
    let mock = Mock::start(vec![limited; 4]).await;
    let (deltas, error) = run(&openai_at(&mock, Some("sk-test")), simple_request()).await;
    assert_eq!(retries(&deltas), vec![(2, 0), (3, 0), (4, 0)]);
    match error {
        Some(LlmError::RateLimited {
            status: 429,
            attempts: 4,
            message,
        }) => assert!(
            message.starts_with("Rate limit reached for gpt-4o-mini"),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(mock.requests().await.len(), 4);
}

#[tokio::test]
async fn a_retry_after_longer_than_the_cap_is_not_waited_for() {
    let mock = Mock::start(vec![Reply::Status(
        429,
        vec![("retry-after", "3600")],
        fixture("openai_error_429.json"),
    )])
    .await;
    let (deltas, error) = run(&openai_at(&mock, Some("sk-test")), simple_request()).await;
    assert_eq!(deltas, vec![]);
    assert!(
        matches!(error, Some(LlmError::RateLimited { attempts: 1, .. })),
        "{error:?}"
    );
    mock.requests().await;
}

#[tokio::test]
async fn openai_refused_key_and_bad_request_are_not_retried() {
    let mock = Mock::start(vec![Reply::Status(
        401,
        vec![],
        fixture("openai_error_401.json"),
    )])
    .await;
    let (deltas, error) = run(&openai_at(&mock, Some("sk-test")), simple_request()).await;
    assert_eq!(deltas, vec![]);
    assert_eq!(
        error,
        Some(LlmError::Auth {
            status: 401,
            message: "Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.".into()
        })
    );
    assert_eq!(mock.requests().await.len(), 1);

    let mock = Mock::start(vec![Reply::Status(
        400,
        vec![],
        fixture("openai_error_400.json"),
    )])
    .await;
    let (_, error) = run(&openai_at(&mock, Some("sk-test")), simple_request()).await;
    match error {
        Some(LlmError::Http {
            status: 400,
            message,
        }) => {
            assert!(
                message.starts_with("This model's maximum context length"),
                "{message}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(mock.requests().await.len(), 1);
}

#[tokio::test]
async fn openai_stream_cut_mid_way() {
    let body = fixture("openai_tool_call.sse");
    let keep = String::from_utf8_lossy(&body).find("Review").unwrap();
    let mock = Mock::start(vec![Reply::SseCut(body, keep)]).await;
    let (deltas, error) = run(&openai_at(&mock, Some("sk-test")), simple_request()).await;
    assert_eq!(error, Some(LlmError::Cut));
    let want = expected("openai_tool_call.sse");
    // What came before the cut was delivered, and not retried.
    assert!(
        !deltas.is_empty() && want.starts_with(&deltas),
        "{deltas:?}"
    );
    assert_eq!(mock.requests().await.len(), 1);
}

#[tokio::test]
async fn openai_stream_closed_cleanly_before_its_end_is_cut() {
    let body = String::from_utf8(fixture("openai_text.sse")).unwrap();
    let body = body[..body.find("\"finish_reason\":\"stop\"").unwrap()].to_string();
    let body = body[..body.rfind("data:").unwrap()].to_string();
    let mock = Mock::start(vec![Reply::SseUntilClose(body.into_bytes())]).await;
    let (deltas, error) = run(&openai_at(&mock, Some("sk-test")), simple_request()).await;
    assert_eq!(error, Some(LlmError::Cut));
    assert_eq!(deltas.len(), 6, "the text came: {deltas:?}");
    mock.requests().await;
}

#[tokio::test]
async fn openai_close_delimited_body_is_fine() {
    let mock = Mock::start(vec![Reply::SseUntilClose(fixture(
        "openai_parallel_tool_calls.sse",
    ))])
    .await;
    let (deltas, error) = run(&openai_at(&mock, None), simple_request()).await;
    assert_eq!(
        (deltas, error),
        (expected("openai_parallel_tool_calls.sse"), None)
    );
    mock.requests().await;
}

#[tokio::test]
async fn a_json_answer_to_a_stream_request_is_an_error() {
    let mock = Mock::start(vec![
        Reply::Status(
            200,
            vec![],
            br#"{"error":{"message":"upstream quota exceeded"}}"#.to_vec(),
        ),
        Reply::Status(
            200,
            vec![],
            br#"{"choices":[{"message":{"content":"Hi"}}]}"#.to_vec(),
        ),
    ])
    .await;
    let model = openai_at(&mock, None);
    let (_, error) = run(&model, simple_request()).await;
    assert_eq!(
        error,
        Some(LlmError::Http {
            status: 200,
            message: "upstream quota exceeded".into()
        })
    );
    let (_, error) = run(&model, simple_request()).await;
    match error {
        Some(LlmError::Decode(m)) => assert!(m.contains("not an event stream"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(mock.requests().await.len(), 2);
}

#[tokio::test]
async fn nobody_listening_is_retried_then_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let model = OpenAi::new("m", &url, None).with_retry(fast_retry());
    let (deltas, error) = run(&model, simple_request()).await;
    assert_eq!(retries(&deltas), vec![(2, 4), (3, 8), (4, 16)]);
    match error {
        Some(LlmError::Connect { url: u, message }) => {
            assert_eq!(u, format!("{url}/chat/completions"));
            assert!(
                message.contains("refused") && !message.contains(&u),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn dropping_the_stream_ends_the_request() {
    // The consumer stops after the first delta; the stream is dropped
    // while the server still has more to send, and nothing hangs.
    let mock = Mock::start(vec![Reply::Sse(fixture("openai_parallel_tool_calls.sse"))]).await;
    let model = openai_at(&mock, None);
    let mut stream = model.stream(simple_request());
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .unwrap();
    assert_eq!(first, Some(Ok(text("Asking both."))));
    drop(stream);
    mock.requests().await;
}

// ------------------------------------------------------ Anthropic over HTTP

#[tokio::test]
async fn anthropic_streams_text_and_sends_the_documented_request() {
    let mock = Mock::start(vec![Reply::Sse(fixture("anthropic_text.sse"))]).await;
    let (deltas, error) = run(&anthropic_at(&mock), simple_request()).await;
    assert_eq!(error, None);
    assert_eq!(deltas, expected("anthropic_text.sse"));
    let seen = mock.requests().await;
    let r = &seen[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(r.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("authorization"), None);
    assert_eq!(
        r.body,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "stream": true,
            "system": "You convene coding agents.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Ask claude to review src/llm"}]},
            ],
            "tools": [
                {"name": "subagent", "description": "Ask a coding agent.", "input_schema": subagent_tool().parameters},
                {"name": "list_agents", "description": "The agents.", "input_schema": {"type": "object", "properties": {}}},
            ],
        })
    );
}

#[tokio::test]
async fn anthropic_streams_tool_use() {
    for name in [
        "anthropic_tool_use.sse",
        "anthropic_parallel_tool_use.sse",
        "anthropic_max_tokens.sse",
    ] {
        let mock = Mock::start(vec![Reply::Sse(fixture(name))]).await;
        let (deltas, error) = run(&anthropic_at(&mock), simple_request()).await;
        assert_eq!(error, None, "{name}");
        assert_eq!(deltas, expected(name), "{name}");
        mock.requests().await;
    }
}

#[tokio::test]
async fn anthropic_sends_tool_use_and_grouped_tool_results() {
    let mock = Mock::start(vec![Reply::Sse(fixture("anthropic_text.sse"))]).await;
    run(&anthropic_at(&mock), conversation()).await;
    let seen = mock.requests().await;
    assert_eq!(seen[0].body["max_tokens"], 300);
    assert_eq!(
        seen[0].body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Review and test it"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Asking both."},
                {"type": "tool_use", "id": "call_1", "name": "subagent",
                 "input": {"agent": "claude", "input": "Review"}},
                {"type": "tool_use", "id": "call_2", "name": "list_agents", "input": {}},
            ]},
            // Both results, and the person's next words, in one message;
            // the empty assistant turn is left out.
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "Looks fine."},
                {"type": "tool_result", "tool_use_id": "call_2", "content": "claude, codex"},
                {"type": "text", "text": "Thanks. And codex?"},
                {"type": "text", "text": "Again?"},
            ]},
        ])
    );
}

#[tokio::test]
async fn anthropic_overloaded_is_retried() {
    // `message_start` alone, then the error.
    let body = fixture("anthropic_text.sse");
    let body = &body[..body.windows(7).position(|w| w == b"\n\nevent").unwrap() + 2];
    let mock = Mock::start(vec![
        Reply::Status(529, vec![], fixture("anthropic_error_529.json")),
        // Overloaded inside the stream before anything was said: retried.
        Reply::Sse(
            [
                body,
                b"event: ping\ndata: {\"type\": \"ping\"}\n\n",
                b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
            ]
            .concat(),
        ),
        Reply::Sse(fixture("anthropic_tool_use.sse")),
    ])
    .await;
    let (deltas, error) = run(&anthropic_at(&mock), simple_request()).await;
    assert_eq!(error, None);
    assert_eq!(retries(&deltas), vec![(2, 4), (3, 8)]);
    let Delta::Retry { reason, .. } = &deltas[0] else {
        panic!("{deltas:?}")
    };
    assert_eq!(reason, "HTTP 529: Overloaded");
    assert_eq!(without_retries(deltas), expected("anthropic_tool_use.sse"));
    assert_eq!(mock.requests().await.len(), 3);
}

#[tokio::test]
async fn anthropic_error_event_after_text_ends_the_stream() {
    let mock = Mock::start(vec![Reply::Sse(fixture("anthropic_error_event.sse"))]).await;
    let (deltas, error) = run(&anthropic_at(&mock), simple_request()).await;
    assert_eq!(deltas, vec![text("Let me")]);
    assert_eq!(
        error,
        Some(LlmError::Http {
            status: 529,
            message: "Overloaded".into()
        })
    );
    assert_eq!(mock.requests().await.len(), 1);
}

#[tokio::test]
async fn anthropic_refused_key() {
    let mock = Mock::start(vec![Reply::Status(
        401,
        vec![],
        fixture("anthropic_error_401.json"),
    )])
    .await;
    let (deltas, error) = run(&anthropic_at(&mock), simple_request()).await;
    assert_eq!(deltas, vec![]);
    assert_eq!(
        error,
        Some(LlmError::Auth {
            status: 401,
            message: "invalid x-api-key".into()
        })
    );
    assert_eq!(mock.requests().await.len(), 1);
}

#[tokio::test]
async fn anthropic_stream_cut_mid_way() {
    let body = fixture("anthropic_parallel_tool_use.sse");
    let keep = String::from_utf8_lossy(&body).find("toolu_01B4").unwrap();
    let mock = Mock::start(vec![Reply::SseCut(body, keep)]).await;
    let (deltas, error) = run(&anthropic_at(&mock), simple_request()).await;
    assert_eq!(error, Some(LlmError::Cut));
    let want = expected("anthropic_parallel_tool_use.sse");
    assert!(deltas.len() >= 4 && want.starts_with(&deltas), "{deltas:?}");
    assert_eq!(mock.requests().await.len(), 1);
}

#[tokio::test]
async fn anthropic_through_select_with_a_base_url() {
    let mock = Mock::start(vec![Reply::Sse(fixture("anthropic_text.sse"))]).await;
    let env = |k: &str| (k == "ANTHROPIC_API_KEY").then(|| "sk-ant-env".to_string());
    let base = format!("{}/v1", mock.url);
    let model = select::from_spec("anthropic:claude-haiku-4-5", Some(&base), &env).unwrap();
    assert_eq!(model.name(), "anthropic:claude-haiku-4-5");
    let (deltas, error) = run(&*model, simple_request()).await;
    assert_eq!((deltas, error), (expected("anthropic_text.sse"), None));
    let seen = mock.requests().await;
    assert_eq!(seen[0].path, "/v1/messages");
    assert_eq!(seen[0].header("x-api-key"), Some("sk-ant-env"));
    assert_eq!(seen[0].body["model"], "claude-haiku-4-5");
}

#[test]
fn endpoints_and_the_token_limit_field() {
    let req = simple_request();
    // OpenAI's own reasoning models refuse `max_tokens`.
    let official = OpenAi::new("o3", openai::OPENAI_BASE_URL, Some("k".into()));
    assert_eq!(official.url(), "https://api.openai.com/v1/chat/completions");
    let body = official.body(&req);
    assert_eq!(body["max_completion_tokens"], 1024);
    assert_eq!(body.get("max_tokens"), None);
    let local = OpenAi::new("q", "http://127.0.0.1:18090/v1/", None);
    assert_eq!(local.url(), "http://127.0.0.1:18090/v1/chat/completions");
    assert_eq!(local.body(&req)["max_tokens"], 1024);
    let full = OpenAi::new("q", "http://h/api/chat/completions", None);
    assert_eq!(full.url(), "http://h/api/chat/completions");
    for (base, url) in [
        (
            anthropic::ANTHROPIC_BASE_URL,
            "https://api.anthropic.com/v1/messages",
        ),
        ("http://proxy/", "http://proxy/v1/messages"),
        ("http://proxy/v1", "http://proxy/v1/messages"),
        (
            "http://proxy/anthropic/v1/messages",
            "http://proxy/anthropic/v1/messages",
        ),
    ] {
        assert_eq!(Anthropic::new("c", base, None).url(), url);
    }
    // No tools: no `tools` field (some servers refuse an empty list).
    let bare = Request {
        tools: vec![],
        system: None,
        ..simple_request()
    };
    assert_eq!(local.body(&bare).get("tools"), None);
    assert_eq!(local.body(&bare)["messages"].as_array().unwrap().len(), 1);
    let a = Anthropic::new("c", "http://proxy", None).body(&bare);
    assert_eq!((a.get("tools"), a.get("system")), (None, None));
}
