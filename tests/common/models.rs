//! Fake model servers on loopback for the real agent adapters: Anthropic's
//! Messages API (claude-agent-acp) and OpenAI's Responses API (codex-acp),
//! both streamed as SSE. What they answer is chosen by the first word of
//! the newest user text:
//!
//! | word | answer |
//! |---|---|
//! | `plain` | `Plain answer.` |
//! | `review V` | a review with `<!-- severity: V -->` |
//! | `Review` (`quorum review`'s prompt) | a review of its diff: a finding per seeded bug on an added or context line, `SEEDED red: TITLE` (found by both), `SEEDED-claude ...` / `SEEDED-codex ...` (only by that one) |
//! | `Check` (a `--verify` check of a finding) | claude: `<!-- finding-check: confirmed -->`; codex: `refuted`, each with a reason |
//! | `count` | `messages: N`, N = the prompts the request carries (a resumed session carries the earlier ones) |
//! | `slow` | 40 words, 250 ms apart |
//! | `write PATH` (claude) | a `Write` tool call for PATH, then `written` once its result comes back |
//! | `greet PATH` | PATH (relative) written in the session's directory with the agent's own edit tool, each its own content: claude a `Write` of `hello from claude`; codex an `apply_patch` adding `hello from codex` and `and more`; then `written` / `ran` |
//! | `run CMD` (codex) | an `exec_command` call of CMD, then `ran` once its output comes back |
//! | `inspect WORDS` | a shell call (claude `Bash`, codex `exec_command`) of `ls`, then the answer to WORDS |
//! | `conduct AGENT WORDS` | a call of quorum's `subagent` tool over MCP (claude `mcp__quorum__subagent`; codex `subagent` in the namespace `mcp__quorum`) with `{"agent": AGENT, "input": WORDS}`, then `Conducted: ` and what the tool returned, on one line |
//! | `call AGENT WORDS` | the built-in chat's `subagent` tool call (Anthropic `tool_use` named `subagent`), then `written` |
//! | `review-quorum A,B WORDS` | quorum's `subagent` over MCP (as `conduct`) with a batch of code reviews, one task per agent, then `The reviewers have spoken: ` and what the tool returned |
//! | `delegate WORDS` | a sub-agent with the prompt WORDS (claude `Agent`; codex `multi_agent_v1` `spawn_agent`, then `wait_agent` for it), then `Delegated; the sub-agent's report is in.` |
//! | `expensive WORDS` | the answer to WORDS, its usage [`EXPENSIVE_INPUT`] input tokens (Anthropic and Responses) instead of 10 |
//! | `uncached WORDS` | the answer to WORDS, its usage without cache counts (Anthropic), as some compatible servers send it |
//! | anything else | `unknown: WORD` |
//!
//! Once a tool result has come back for a word that has no next step,
//! the answer is `written` (claude) or `ran` (codex).
//!
//! The Anthropic answers' usage is shaped as the real API's: `message_start`
//! carries the input, cache and output counts, `message_delta` the output.
//!
//! Every request body is kept, for assertions.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A running fake model server.
pub struct FakeModel {
    pub port: u16,
    pub requests: Arc<Mutex<Vec<Value>>>,
}

impl FakeModel {
    /// Starts the server on 127.0.0.1 (it ends with the test's runtime).
    pub async fn start() -> FakeModel {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = requests.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(handle(sock, kept.clone()));
            }
        });
        FakeModel { port, requests }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// Reads one HTTP request from `sock`: its head (request line and
/// headers) and its body, as long as `content-length` says.
pub async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let (head_end, length) = loop {
        let n = sock.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..at]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (at + 4, length);
        }
    };
    while buf.len() < head_end + length {
        let n = sock.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    Some((head, buf[head_end..].to_vec()))
}

async fn handle(mut sock: tokio::net::TcpStream, requests: Arc<Mutex<Vec<Value>>>) {
    let Some((head, body)) = read_request(&mut sock).await else {
        return;
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or_default();
    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
    if !head.starts_with("POST") {
        let _ = sock
            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .await;
        return;
    }
    requests.lock().unwrap().push(body.clone());
    let _ = sock
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
        )
        .await;
    let events = if path.starts_with("/v1/messages") {
        anthropic(&body)
    } else {
        responses(&body)
    };
    let calls = events.iter().any(|(_, _, data)| {
        let text = data.to_string();
        text.contains("\"tool_use\"")
            || text.contains("\"function_call\"")
            || text.contains("\"custom_tool_call\"")
    });
    for (delay, name, data) in events {
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let frame = format!("event: {name}\ndata: {data}\n\n");
        if sock.write_all(frame.as_bytes()).await.is_err() {
            return;
        }
    }
    let _ = sock.shutdown().await;
    if calls {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        TOOL_CALLS_SENT.lock().unwrap().push(now.as_millis());
    }
}

/// When (Unix ms) each answer that was a tool call had been sent whole:
/// for measuring what follows a model's tool call (`quorum-fake-model
/// --tool-times FILE`).
pub static TOOL_CALLS_SENT: Mutex<Vec<u128>> = Mutex::new(Vec::new());

type Sse = Vec<(Duration, &'static str, Value)>;

/// What to answer: text in chunks, or a tool call.
enum Answer {
    Text(Vec<String>, Duration),
    Tool {
        name: &'static str,
        input: Value,
    },
    /// A tool of a namespace (codex's `multi_agent_v1`).
    Namespaced {
        namespace: &'static str,
        name: &'static str,
        input: Value,
    },
    /// A freeform tool of the Responses API (codex's `apply_patch`):
    /// its input is plain text.
    Custom {
        name: &'static str,
        input: String,
    },
}

/// What a request carries, as far as the answer depends on it.
struct Turn {
    /// The newest prompt's text.
    prompt: String,
    /// How many prompts the request carries.
    prompts: usize,
    /// Tool results that came back since the newest prompt.
    results: usize,
    /// The text of the newest tool result.
    last_output: String,
    codex: bool,
    /// The session's directory, as the agent tells its model (claude's
    /// `Working directory:`, codex's `<cwd>`); empty if it did not.
    cwd: String,
    /// How codex offers `apply_patch`: freeform (`custom`) or as a function.
    custom_patch: bool,
}

/// Ids unique in the server's life: agents keep a session's messages and
/// tool calls by id.
fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn answer(turn: &Turn) -> Answer {
    let words: Vec<&str> = turn.prompt.split_whitespace().collect();
    let plain = words.iter().take_while(|w| MODIFIERS.contains(w)).count();
    script(&words[plain..], turn.results, turn)
}

/// Leading words that change an answer's usage (Anthropic's; a Responses
/// answer's `expensive` too), not the answer.
const MODIFIERS: [&str; 2] = ["expensive", "uncached"];

/// The leading [`MODIFIERS`] of `prompt`.
fn modifiers(prompt: &str) -> Vec<&str> {
    prompt
        .split_whitespace()
        .take_while(|w| MODIFIERS.contains(w))
        .collect()
}

/// The input tokens an Anthropic answer to `expensive ...` reports: at
/// Sonnet's $3 per million, $0.30 a request.
pub const EXPENSIVE_INPUT: u64 = 100_000;

/// The answer to `words` once `results` tool results have come back.
fn script(words: &[&str], results: usize, turn: &Turn) -> Answer {
    let text = |s: &str| Answer::Text(vec![s.to_string()], Duration::ZERO);
    let first = words.first().copied().unwrap_or("");
    let rest = || words.get(1..).unwrap_or_default().join(" ");
    match first {
        "inspect" if results == 0 => match turn.codex {
            true => Answer::Tool {
                name: "exec_command",
                input: json!({"cmd": "ls"}),
            },
            false => Answer::Tool {
                name: "Bash",
                input: json!({"command": "ls", "description": "List files"}),
            },
        },
        "inspect" => script(&words[1..], results - 1, turn),
        "conduct" if results == 0 => {
            let agent = words.get(1).copied().unwrap_or("");
            let input =
                json!({"agent": agent, "input": words.get(2..).unwrap_or_default().join(" ")});
            match turn.codex {
                true => Answer::Namespaced {
                    namespace: "mcp__quorum",
                    name: "subagent",
                    input,
                },
                false => Answer::Tool {
                    name: "mcp__quorum__subagent",
                    input,
                },
            }
        }
        // The same call as the built-in chat's model makes it (Anthropic
        // `tool_use` named `subagent`): for comparing the two chats.
        "call" if results == 0 => Answer::Tool {
            name: "subagent",
            input: json!({"agent": words.get(1).copied().unwrap_or(""), "input": words.get(2..).unwrap_or_default().join(" ")}),
        },
        "review-quorum" if results == 0 => {
            let agents = words.get(1).copied().unwrap_or("");
            let input = words.get(2..).unwrap_or_default().join(" ");
            let tasks: Vec<Value> = agents
                .split(',')
                .map(|a| json!({"agent": a, "input": input, "code_review": true}))
                .collect();
            let input = json!({"tasks": tasks});
            match turn.codex {
                true => Answer::Namespaced {
                    namespace: "mcp__quorum",
                    name: "subagent",
                    input,
                },
                false => Answer::Tool {
                    name: "mcp__quorum__subagent",
                    input,
                },
            }
        }
        "review-quorum" => text(&format!(
            "The reviewers have spoken: {}",
            turn.last_output
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        )),
        "conduct" => text(&format!(
            "Conducted: {}",
            turn.last_output
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        )),
        "delegate" => match (results, turn.codex) {
            (0, false) => Answer::Tool {
                name: "Agent",
                input: json!({"description": "Review the change", "prompt": rest(), "subagent_type": "general-purpose"}),
            },
            (0, true) => Answer::Namespaced {
                namespace: "multi_agent_v1",
                name: "spawn_agent",
                input: json!({"message": rest()}),
            },
            (1, true) => Answer::Namespaced {
                namespace: "multi_agent_v1",
                name: "wait_agent",
                input: json!({"targets": [agent_id(&turn.last_output)], "timeout_ms": 60000}),
            },
            _ => text("Delegated; the sub-agent's report is in."),
        },
        _ if results > 0 => text(if turn.codex { "ran" } else { "written" }),
        "plain" => text("Plain answer."),
        // `quorum review`'s prompt: a review of the seeded bugs in its diff.
        "Review" => text(&seeded_review(&turn.prompt, turn.codex)),
        // A check of another reviewer's finding (`--verify`): claude
        // confirms it, codex refutes it.
        "Check" if turn.codex => text(
            "<!-- finding-check: refuted -->\nThe loop returns on the first success; nothing retries forever.",
        ),
        "Check" => text("<!-- finding-check: confirmed -->\nYes: nothing bounds the tries."),
        "review" => {
            let v = words.get(1).copied().unwrap_or("green");
            text(&format!("<!-- severity: {v} -->\n## Review\nLooks {v}."))
        }
        "count" => text(&format!("messages: {}", turn.prompts)),
        "slow" => Answer::Text(
            (0..40).map(|i| format!("word{i} ")).collect(),
            Duration::from_millis(250),
        ),
        "write" if !turn.codex => Answer::Tool {
            name: "Write",
            input: json!({"file_path": words.get(1).copied().unwrap_or(""), "content": "written by claude\n"}),
        },
        "greet" if turn.codex => {
            let path = words.get(1).copied().unwrap_or("greet.txt");
            let patch = format!(
                "*** Begin Patch\n*** Add File: {path}\n+hello from codex\n+and more\n*** End Patch\n"
            );
            match turn.custom_patch {
                true => Answer::Custom {
                    name: "apply_patch",
                    input: patch,
                },
                false => Answer::Tool {
                    name: "apply_patch",
                    input: json!({"input": patch}),
                },
            }
        }
        "greet" => {
            let path = words.get(1).copied().unwrap_or("greet.txt");
            let path = match turn.cwd.is_empty() {
                true => path.to_string(),
                false => format!("{}/{path}", turn.cwd.trim_end_matches('/')),
            };
            Answer::Tool {
                name: "Write",
                input: json!({"file_path": path, "content": "hello from claude\n"}),
            }
        }
        "run" if turn.codex => Answer::Tool {
            name: "exec_command",
            input: json!({"cmd": rest()}),
        },
        "run" => Answer::Tool {
            name: "Bash",
            input: json!({"command": rest(), "description": "Run a command"}),
        },
        other => text(&format!("unknown: {other}")),
    }
}

/// A review of the diff in `prompt` that finds each seeded bug on an added
/// line: `SEEDED SEVERITY: TITLE` (both agents find it), `SEEDED-claude
/// ...` or `SEEDED-codex ...` (only that agent does). Each is a finding of
/// the contract at its line of the new side; the header is the worst.
fn seeded_review(prompt: &str, codex: bool) -> String {
    let me = if codex {
        "SEEDED-codex "
    } else {
        "SEEDED-claude "
    };
    let (mut file, mut line) = (String::new(), 0u32);
    let mut found: Vec<(String, u32, String, String)> = Vec::new();
    for l in prompt.lines() {
        if let Some(path) = l.strip_prefix("+++ b/") {
            file = path.to_string();
        } else if let Some(h) = l.strip_prefix("@@ -") {
            // `@@ -a,b +c,d @@`: the new side starts at c.
            let new = h.split(" +").nth(1).unwrap_or("");
            line = new
                .split([',', ' '])
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
        } else if l.starts_with('+') || l.starts_with(' ') {
            let seed = l
                .split_once("SEEDED ")
                .map(|(_, s)| s)
                .or_else(|| l.split_once(me).map(|(_, s)| s));
            if let Some((severity, title)) = seed.and_then(|s| s.split_once(": ")) {
                found.push((
                    file.clone(),
                    line,
                    severity.to_string(),
                    title.trim().to_string(),
                ));
            }
            line += 1;
        }
    }
    let worst = ["red", "yellow"]
        .into_iter()
        .find(|s| found.iter().any(|f| f.2 == *s))
        .unwrap_or("green");
    let mut out = format!("<!-- severity: {worst} -->\n## Review\n");
    for (file, line, severity, title) in found {
        let finding = json!({"file": file, "line": line, "severity": severity, "title": title});
        out.push_str(&format!(
            "<!-- finding: {finding} -->\nSeen at {file}:{line}.\n\n"
        ));
    }
    out
}

/// The agent id in a `spawn_agent` result (`{"agent_id": ...}`).
fn agent_id(output: &str) -> String {
    serde_json::from_str::<Value>(output)
        .ok()
        .and_then(|v| v["agent_id"].as_str().map(str::to_string))
        .unwrap_or_else(|| output.trim().to_string())
}

/// The session's directory as the agent tells its model in `body`: a line
/// `Working directory: DIR` (claude's system prompt) or `<cwd>DIR</cwd>`
/// (codex's environment context).
fn cwd_of(body: &Value) -> String {
    fn walk(v: &Value) -> Option<String> {
        match v {
            Value::String(s) => {
                if let Some((_, rest)) = s.split_once("<cwd>") {
                    return rest.split_once("</cwd>").map(|(d, _)| d.trim().to_string());
                }
                s.lines().find_map(|l| {
                    let at = l.to_ascii_lowercase().find("working directory: ")?;
                    Some(l[at + "working directory: ".len()..].trim().to_string())
                })
            }
            Value::Array(a) => a.iter().find_map(walk),
            Value::Object(o) => o.values().find_map(walk),
            _ => None,
        }
    }
    walk(&body["system"])
        .or_else(|| walk(&body["messages"]))
        .or_else(|| walk(&body["input"]))
        .unwrap_or_default()
}

/// Text blocks of one message's `content` (a string or a list of blocks).
fn texts(content: &Value) -> Vec<String> {
    match content {
        Value::String(s) => vec![s.clone()],
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// A user message that carries a prompt (agents add messages of their own
/// context, like codex's `<environment_context>`).
fn is_prompt(content: &Value) -> bool {
    texts(content)
        .last()
        .is_some_and(|t| !t.trim_start().starts_with('<'))
}

/// The prompt a person typed is the last text of a user message; agents
/// add their own context blocks before it.
fn anthropic(body: &Value) -> Sse {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let has_result = |m: &Value| {
        m["content"]
            .as_array()
            .is_some_and(|b| b.iter().any(|b| b["type"] == "tool_result"))
    };
    let prompt = |m: &Value| m["role"] == "user" && !has_result(m) && is_prompt(&m["content"]);
    let at = messages.iter().rposition(prompt);
    let after = at.map_or(&messages[..], |i| &messages[i + 1..]);
    let results: Vec<&Value> = after
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .collect();
    let turn = Turn {
        prompt: at
            .and_then(|i| texts(&messages[i]["content"]).last().cloned())
            .unwrap_or_default(),
        prompts: messages.iter().filter(|m| prompt(m)).count(),
        results: results.len(),
        last_output: results
            .last()
            .map(|r| texts(&r["content"]).join("\n"))
            .unwrap_or_default(),
        codex: false,
        cwd: cwd_of(body),
        custom_patch: false,
    };
    let z = Duration::ZERO;
    let modifiers = modifiers(&turn.prompt);
    let input = match modifiers.contains(&"expensive") {
        true => EXPENSIVE_INPUT,
        false => 10,
    };
    let mut usage = json!({"input_tokens": input, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1});
    if modifiers.contains(&"uncached") {
        usage = json!({"input_tokens": input, "output_tokens": 1});
    }
    let mut out: Sse = vec![(
        z,
        "message_start",
        json!({"type": "message_start", "message": {"id": format!("msg_{}", next_id()), "type": "message", "role": "assistant", "model": "fake", "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage}}),
    )];
    let stop = match answer(&turn) {
        Answer::Text(chunks, delay) => {
            out.push((z, "content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})));
            for c in chunks {
                out.push((delay, "content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": c}})));
            }
            out.push((
                z,
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ));
            "end_turn"
        }
        Answer::Tool { name, input } | Answer::Namespaced { name, input, .. } => {
            out.push((z, "content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": format!("toolu_{}", next_id()), "name": name, "input": {}}})));
            out.push((z, "content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": input.to_string()}})));
            out.push((
                z,
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ));
            "tool_use"
        }
        // Never asked of claude: a freeform tool is the Responses API's.
        Answer::Custom { name, .. } => panic!("a freeform {name} call to claude"),
    };
    out.push((z, "message_delta", json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 5}})));
    out.push((z, "message_stop", json!({"type": "message_stop"})));
    out
}

fn responses(body: &Value) -> Sse {
    let items = body["input"].as_array().cloned().unwrap_or_default();
    let tool_result = items.last().is_some_and(|i| is_output(&i["type"]));
    let prompt =
        |i: &Value| i["type"] == "message" && i["role"] == "user" && is_prompt(&i["content"]);
    let at = items.iter().rposition(prompt);
    let after = at.map_or(&items[..], |i| &items[i + 1..]);
    let results: Vec<&Value> = after.iter().filter(|i| is_output(&i["type"])).collect();
    let turn = Turn {
        prompt: at
            .and_then(|i| texts(&items[i]["content"]).last().cloned())
            .unwrap_or_default(),
        prompts: items.iter().filter(|i| prompt(i)).count(),
        results: results.len(),
        last_output: results
            .last()
            .map(|r| match &r["output"] {
                Value::String(s) => s.clone(),
                other => texts(other).join("\n"),
            })
            .unwrap_or_default(),
        codex: true,
        cwd: cwd_of(body),
        custom_patch: body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["name"] == "apply_patch" && t["type"] == "custom"),
    };
    let z = Duration::ZERO;
    let id = format!("resp_{}", std::process::id());
    let mut out: Sse = vec![(
        z,
        "response.created",
        json!({"type": "response.created", "response": {"id": id}}),
    )];
    // codex can lose a command's completion update when the next answer
    // comes at once: give it a moment.
    let first = if tool_result {
        Duration::from_millis(1000)
    } else {
        z
    };
    let (msg, call) = (format!("msg_{}", next_id()), next_id());
    match answer(&turn) {
        Answer::Text(chunks, delay) => {
            let item = json!({"type": "message", "id": msg, "role": "assistant", "status": "in_progress", "content": []});
            out.push((
                first,
                "response.output_item.added",
                json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
            ));
            let mut all = String::new();
            for c in chunks {
                all.push_str(&c);
                out.push((delay, "response.output_text.delta", json!({"type": "response.output_text.delta", "item_id": msg, "output_index": 0, "content_index": 0, "delta": c})));
            }
            let done = json!({"type": "message", "id": msg, "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": all, "annotations": []}]});
            out.push((
                z,
                "response.output_item.done",
                json!({"type": "response.output_item.done", "output_index": 0, "item": done}),
            ));
        }
        answer @ (Answer::Tool { .. } | Answer::Namespaced { .. }) => {
            let (namespace, name, input) = match answer {
                Answer::Namespaced {
                    namespace,
                    name,
                    input,
                } => (Some(namespace), name, input),
                Answer::Tool { name, input } => (None, name, input),
                Answer::Text(..) | Answer::Custom { .. } => unreachable!(),
            };
            let mut item = json!({"type": "function_call", "id": format!("fc_{call}"), "call_id": format!("call_{call}"), "name": name, "arguments": input.to_string(), "status": "completed"});
            if let Some(namespace) = namespace {
                item["namespace"] = namespace.into();
            }
            out.push((
                first,
                "response.output_item.added",
                json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
            ));
            out.push((
                z,
                "response.output_item.done",
                json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
            ));
        }
        Answer::Custom { name, input } => {
            let item = json!({"type": "custom_tool_call", "id": format!("ctc_{call}"), "call_id": format!("call_{call}"), "name": name, "input": input, "status": "completed"});
            out.push((
                first,
                "response.output_item.added",
                json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
            ));
            out.push((
                z,
                "response.output_item.done",
                json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
            ));
        }
    }
    let input = match modifiers(&turn.prompt).contains(&"expensive") {
        true => EXPENSIVE_INPUT,
        false => 10,
    };
    out.push((z, "response.completed", json!({"type": "response.completed", "response": {"id": id, "usage": {"input_tokens": input, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": input + 5}}})));
    out
}

/// A Responses input item that is a tool's output: a function's, or a
/// freeform tool's (`apply_patch`).
fn is_output(kind: &Value) -> bool {
    kind == "function_call_output" || kind == "custom_tool_call_output"
}

/// Processes whose environment holds `HOME=home`: what an adapter run
/// with that private home left behind.
pub fn processes_with_home(home: &std::path::Path) -> Vec<String> {
    let wanted = format!("HOME={}", home.display()).into_bytes();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            let ours = environ.split(|b| *b == 0).any(|v| v == wanted.as_slice());
            if !ours || zombie {
                return None;
            }
            // A process whose memory is gone (no command line any more) is
            // in the middle of exiting: killed, and as good as ended. (A
            // loaded run caught one so, between its environment and its
            // command line: `left running: ["9770 "]`.)
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            (!cmd.is_empty())
                .then(|| format!("{pid} {}", String::from_utf8_lossy(&cmd).replace('\0', " ")))
        })
        .collect()
}

/// Waits (up to 10 s) until nothing runs with `HOME=home`; returns what is
/// still running then, killing it so the test leaves nothing behind.
pub fn leftovers(home: &std::path::Path) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_with_home(home);
        if left.is_empty() || std::time::Instant::now() > deadline {
            for p in &left {
                if let Some(pid) = p.split(' ').next().and_then(|p| p.parse().ok()) {
                    let pid = nix::unistd::Pid::from_raw(pid);
                    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                }
            }
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
