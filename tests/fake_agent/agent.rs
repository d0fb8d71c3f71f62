//! `quorum-fake-agent`: a scripted ACP v1 agent for quorum's test suite.
//!
//! It speaks newline-delimited JSON-RPC on stdin/stdout and logs only to
//! stderr. Each prompt's first word selects a scenario; see
//! `tests/fake_agent/README.md` for the full list.
//!
//! The crate's `Stdio` transport needs its `stdio` feature, which quorum does
//! not enable, so this binary bridges stdin/stdout to the crate's in-memory
//! [`Channel`] transport with two plain threads.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AuthMethod, AuthMethodAgent, CancelNotification, CloseSessionRequest,
    ConfigOptionUpdate, ContentBlock, ContentChunk, Cost, Diff, Implementation, InitializeRequest,
    InitializeResponse, LoadSessionRequest, LoadSessionResponse, NewSessionRequest,
    NewSessionResponse, PermissionOption, PermissionOptionKind, Plan, PlanEntry, PlanEntryPriority,
    PlanEntryStatus, PromptRequest, PromptResponse, ReadTextFileRequest, RequestPermissionOutcome,
    RequestPermissionRequest, ResumeSessionRequest, ResumeSessionResponse, SessionCapabilities,
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption, SessionId,
    SessionNotification, SessionResumeCapabilities, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, StopReason, ToolCall, ToolCallContent, ToolCallLocation,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind, UsageUpdate,
    WriteTextFileRequest,
};
use agent_client_protocol::v1::schema::{
    IdleStateUpdate, RequiresActionStateUpdate, RunningStateUpdate, SessionCancelCapabilities,
    StateUpdate, SubagentSessionCapabilities, SubagentUpdate,
};
use agent_client_protocol::{
    Agent, Channel, Client, Error, ErrorCode, JsonRpcRequest, RawJsonRpcMessage,
    RequestCancellation, TransportFrame, UntypedMessage,
};
use tokio::sync::{Notify, oneshot};

mod elicit;

/// Method of the private marker notification that tells the stdout writer to
/// flush and exit with code 3 (the `crash` scenario). It is never written.
const CRASH_MARKER: &str = "_quorum_fake_agent/crash";

/// Method of the private marker notification that tells the stdout writer to
/// write `params.line` `params.count` times (the `stream` scenario). It is
/// never written itself.
const REPEAT_MARKER: &str = "_quorum_fake_agent/repeat";

/// `--scenario WORDS` (or `--review V`): the scenario every prompt runs,
/// whatever its first word.
static SCENARIO: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// `--check VERDICT`: a prompt that asks to check a finding (it holds
/// `finding-check`) is answered `<!-- finding-check: VERDICT -->` and a
/// reason, whatever the scenario.
static CHECK: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// `--review-red-if TEXT`: a prompt that holds quorum's review contract
/// (`<!-- severity: `) is answered as a review, whatever the scenario: red,
/// with a red finding at line 1 of the first file its diff changes, when
/// the prompt holds TEXT; else green (a writer of an arena that reviews
/// the others' branches).
static REVIEW_RED_IF: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// `--cost-per-turn USD`: every turn, whatever its scenario, ends with a
/// `usage_update` that reports its session cost USD (an arena's writers
/// that spend).
static COST_PER_TURN: std::sync::OnceLock<f64> = std::sync::OnceLock::new();

/// `--store DIR`: sessions are kept on disk there (one file per session,
/// its turns as JSON lines), as real agents keep theirs, so a later process
/// of the agent can load or resume them.
static STORE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// `--in-flight FILE`: each prompt, as it starts, leaves a marker in the
/// directory `FILE.running` (shared by every process given the same FILE)
/// and appends to FILE how many markers it sees there: the prompts in
/// flight at once, itself included; its marker goes when its turn ends.
/// The largest number in FILE is the most prompts the agents ever had at
/// once.
static IN_FLIGHT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// A prompt's marker in the `--in-flight` directory, removed on drop.
struct InFlight(Option<std::path::PathBuf>);

impl InFlight {
    fn start() -> InFlight {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let Some(file) = IN_FLIGHT.get() else {
            return InFlight(None);
        };
        let mut dir = file.clone().into_os_string();
        dir.push(".running");
        let dir = std::path::PathBuf::from(dir);
        let _ = std::fs::create_dir_all(&dir);
        let marker = dir.join(format!(
            "{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        if let Err(e) = std::fs::write(&marker, "") {
            log(format!("--in-flight: {}: {e}", marker.display()));
        }
        let count = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .and_then(|mut f| f.write_all(format!("{count}\n").as_bytes()));
        if let Err(e) = appended {
            log(format!("--in-flight: {}: {e}", file.display()));
        }
        InFlight(Some(marker))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(marker) = &self.0 {
            let _ = std::fs::remove_file(marker);
        }
    }
}

/// Writes a session's turns (and the directory it belongs to) to the
/// store, if there is one.
fn save(id: &str, session: &Session) {
    let Some(dir) = STORE.get() else { return };
    let text: String = session
        .history
        .iter()
        .map(|r| serde_json::json!({"prompt": r.prompt, "reply": r.reply}).to_string() + "\n")
        .collect();
    let written = std::fs::write(dir.join(format!("{id}.jsonl")), text).and_then(|()| {
        std::fs::write(
            dir.join(format!("{id}.cwd")),
            session.cwd.as_os_str().as_encoded_bytes(),
        )
    });
    if let Err(e) = written {
        log(format!("cannot store session {id}: {e}"));
    }
}

/// Makes sure session `id` of the directory `cwd` is open in memory: a
/// closed one opened again, or one read back from the store when an
/// earlier process of the agent kept it there. False if unknown, or if it
/// belongs to another directory (as real agents keep sessions per
/// project).
fn known(state: &mut State, id: &str, cwd: &std::path::Path) -> bool {
    let elsewhere = |session: &Session| {
        let other = session.cwd != cwd;
        if other {
            log(format!(
                "session {id} is of {}, not of {}",
                session.cwd.display(),
                cwd.display()
            ));
        }
        other
    };
    if let Some(session) = state.sessions.get(id) {
        return !elsewhere(session);
    }
    if let Some(session) = state.closed.remove(id) {
        if elsewhere(&session) {
            state.closed.insert(id.to_string(), session);
            return false;
        }
        state.sessions.insert(id.to_string(), session);
        return true;
    }
    let Some(dir) = STORE.get() else { return false };
    let Ok(text) = std::fs::read_to_string(dir.join(format!("{id}.jsonl"))) else {
        return false;
    };
    let stored_cwd = std::fs::read(dir.join(format!("{id}.cwd")))
        .map(|b| std::path::PathBuf::from(String::from_utf8_lossy(&b).into_owned()))
        .unwrap_or_default();
    let history = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| TurnRecord {
            prompt: v["prompt"].as_str().unwrap_or_default().to_string(),
            reply: v["reply"].as_str().unwrap_or_default().to_string(),
        })
        .collect();
    let session = Session {
        history,
        cwd: stored_cwd,
        model: "fast".into(),
        mode: "ask".into(),
        ..Session::default()
    };
    if elsewhere(&session) {
        return false;
    }
    log(format!("session {id} read back from the store"));
    state.sessions.insert(id.to_string(), session);
    true
}

/// `--mcp-log FILE`: the `mcpServers` of each `session/new`, `session/load`
/// and `session/resume`, one JSON line each: `{"method", "mcpServers"}`.
static MCP_LOG: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// `--mcp-http`: advertise `mcpCapabilities.http` (and `sse`).
static MCP_HTTP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The MCP servers the newest `session/new`, `load` or `resume` gave (what
/// `mcp TOOL ARGS` calls).
static MCP_SERVERS: std::sync::Mutex<Vec<agent_client_protocol::v1::schema::McpServer>> =
    std::sync::Mutex::new(Vec::new());

/// Appends what `method` was given as MCP servers to the `--mcp-log`.
fn mcp_seen(method: &str, servers: &[agent_client_protocol::v1::schema::McpServer]) {
    *MCP_SERVERS.lock().unwrap_or_else(|e| e.into_inner()) = servers.to_vec();
    let Some(file) = MCP_LOG.get() else { return };
    let line = serde_json::json!({ "method": method, "mcpServers": servers }).to_string() + "\n";
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        log(format!("--mcp-log: {}: {e}", file.display()));
    }
}

/// Whether the client advertised the `subagents` capability in
/// `initialize`: `nested` announces a child only then, as ACP asks.
static SUBAGENTS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
/// Whether the client advertised `terminal: true` (the `term` scenarios).
static TERMINAL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

fn log(message: impl std::fmt::Display) {
    eprintln!("quorum-fake-agent[{}]: {message}", std::process::id());
}

// ---------------------------------------------------------------------------
// Session state
// ---------------------------------------------------------------------------

#[derive(Default)]
struct TurnRecord {
    prompt: String,
    reply: String,
}

#[derive(Default)]
struct Session {
    history: Vec<TurnRecord>,
    /// The directory it was made in: real agents keep sessions per
    /// project, and a load or resume from another directory finds none.
    cwd: std::path::PathBuf,
    /// The running turn's number and cancel signal.
    running: Option<(u64, Arc<Notify>)>,
    /// The session's config options (with `--config-options`).
    model: String,
    mode: String,
    /// Its `effort` option (with `--commands`).
    effort: String,
}

/// `--config-options`: a model select (fast, smart) and a mode select
/// (ask, code), as session config options.
fn config_options(session: &Session) -> Vec<SessionConfigOption> {
    let pick = |values: &[&str]| -> Vec<SessionConfigSelectOption> {
        values
            .iter()
            .map(|v| SessionConfigSelectOption::new(v.to_string(), v.to_string()))
            .collect()
    };
    vec![
        SessionConfigOption::select(
            "model",
            "Model",
            session.model.clone(),
            pick(&["fast", "smart"]),
        )
        .category(SessionConfigOptionCategory::Model),
        SessionConfigOption::select("mode", "Mode", session.mode.clone(), pick(&["ask", "code"]))
            .category(SessionConfigOptionCategory::Mode),
    ]
}

#[derive(Default)]
struct State {
    sessions: HashMap<String, Session>,
    /// Sessions closed with `session/close`: a prompt finds them no more
    /// (as real agents answer), a load or resume opens them again.
    closed: HashMap<String, Session>,
    next_session: u64,
    next_turn: u64,
}

type Shared = Arc<Mutex<State>>;

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn unknown_session(session_id: &SessionId) -> Error {
    Error::new(
        ErrorCode::RESOURCE_NOT_FOUND,
        format!("unknown session {session_id}"),
    )
    .data(serde_json::json!({ "sessionId": session_id }))
}

// ---------------------------------------------------------------------------
// One prompt turn
// ---------------------------------------------------------------------------

struct Turn {
    cx: ConnectionTo<Client>,
    state: Shared,
    session_id: SessionId,
    /// Prompts this session has received, this one included.
    turns_so_far: usize,
    /// Message text sent since the last tool call: the turn's stored reply.
    reply: String,
}

impl Turn {
    fn update(&mut self, update: SessionUpdate) -> Result<(), Error> {
        match &update {
            SessionUpdate::AgentMessageChunk(ContentChunk {
                content: ContentBlock::Text(text),
                ..
            }) => self.reply.push_str(&text.text),
            SessionUpdate::ToolCall(_) | SessionUpdate::ToolCallUpdate(_) => self.reply.clear(),
            _ => {}
        }
        // `--double-on-reload`: a session reopened while open runs twice.
        for _ in 0..rest18::extra_copies(&self.session_id) {
            self.cx.send_notification(SessionNotification::new(
                self.session_id.clone(),
                update.clone(),
            ))?;
        }
        self.cx
            .send_notification(SessionNotification::new(self.session_id.clone(), update))?;
        Ok(())
    }

    fn chunk(&mut self, text: impl Into<String>) -> Result<(), Error> {
        let chunk = ContentChunk::new(ContentBlock::from(text.into()));
        self.update(SessionUpdate::AgentMessageChunk(chunk))
    }

    fn thought(&mut self, text: impl Into<String>) -> Result<(), Error> {
        let chunk = ContentChunk::new(ContentBlock::from(text.into()));
        self.update(SessionUpdate::AgentThoughtChunk(chunk))
    }

    fn tool_call(&mut self, call: ToolCall) -> Result<(), Error> {
        self.update(SessionUpdate::ToolCall(call))
    }

    fn tool_status(&mut self, id: &'static str, status: ToolCallStatus) -> Result<(), Error> {
        let fields = ToolCallUpdateFields::new().status(status);
        self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            id, fields,
        )))
    }
}

/// Sends `request` to the client from a task of its own and returns a
/// receiver for the answer. Unlike awaiting `block_task()` directly, giving up
/// on the receiver (on cancel) does not drop the request, so no
/// `$/cancel_request` is sent; the client's eventual answer is discarded.
fn request_in_background<Req>(
    cx: &ConnectionTo<Client>,
    request: Req,
) -> Result<oneshot::Receiver<Result<Req::Response, Error>>, Error>
where
    Req: JsonRpcRequest,
    Req::Response: Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let sent = cx.send_request(request);
    cx.spawn(async move {
        let _ = tx.send(sent.block_task().await);
        Ok(())
    })?;
    Ok(rx)
}

/// Splits `text` into at most three pieces of nearly equal length.
fn thirds(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let parts = chars.len().min(3);
    let mut pieces = Vec::with_capacity(parts);
    let mut start = 0;
    for i in 0..parts {
        let len = chars.len() / parts + usize::from(i < chars.len() % parts);
        pieces.push(chars[start..start + len].iter().collect());
        start += len;
    }
    pieces
}

/// The wire line of one `agent_message_chunk` update, for the stdout
/// writer to write as it is (see [`REPEAT_MARKER`]).
fn chunk_line(session_id: &SessionId, text: &str) -> Result<String, Error> {
    let chunk = ContentChunk::new(ContentBlock::from(text));
    let update =
        SessionNotification::new(session_id.clone(), SessionUpdate::AgentMessageChunk(chunk));
    let params = serde_json::to_value(&update).map_err(Error::into_internal_error)?;
    TransportFrame::Single(RawJsonRpcMessage::notification(
        "session/update".to_string(),
        params,
    )?)
    .to_json()
}

/// Splits off the first whitespace-separated word; the rest keeps everything
/// after the whitespace that follows the word.
fn first_word(text: &str) -> (&str, &str) {
    let text = text.trim_start();
    match text.find(char::is_whitespace) {
        Some(end) => (&text[..end], text[end..].trim_start()),
        None => (text, ""),
    }
}

/// Runs the scenario `text` selects. `cancel` fires on `session/cancel` for
/// the session; a `$/cancel_request` for the prompt request counts too.
async fn run_turn(
    turn: &mut Turn,
    text: &str,
    cancel: Arc<Notify>,
    request_cancellation: RequestCancellation,
) -> Result<StopReason, Error> {
    let cancelled = async {
        tokio::select! {
            () = cancel.notified() => {}
            () = request_cancellation.cancelled() => {}
        }
    };
    if let Some(verdict) = CHECK.get().filter(|_| text.contains("finding-check")) {
        turn.thought("Checking.")?;
        turn.chunk(format!(
            "<!-- finding-check: {verdict} -->\nThe finding is {verdict}: added() is \
             called from main.\n\nMore detail."
        ))?;
        return Ok(StopReason::EndTurn);
    }
    if let Some(red_if) = REVIEW_RED_IF
        .get()
        .filter(|_| text.contains("<!-- severity: "))
    {
        turn.thought("Reviewing.")?;
        if text.contains(red_if.as_str()) {
            let file = text
                .lines()
                .find_map(|l| l.strip_prefix("+++ b/"))
                .unwrap_or("lib.rs");
            turn.chunk(format!(
                "<!-- severity: red -->\n## Review\n<!-- finding: {{\"file\": \"{file}\", \
                 \"line\": 1, \"severity\": \"red\", \"title\": \"{red_if} is wrong\"}} -->\n\
                 It must not say {red_if}.\n"
            ))?;
        } else {
            turn.chunk("<!-- severity: green -->\n## Review\nLooks green.")?;
        }
        return Ok(StopReason::EndTurn);
    }
    let (word, rest) = match SCENARIO.get() {
        Some(scenario) => first_word(scenario),
        None => first_word(text),
    };
    match word {
        // The whole prompt, as it was received.
        "prompt" => turn.chunk(text)?,
        "echo" => {
            for piece in thirds(rest) {
                turn.chunk(piece)?;
            }
        }
        "stream" => {
            let count: u64 = rest.trim().parse().map_err(|_| {
                Error::invalid_params().data(format!("stream: bad count {:?}", rest.trim()))
            })?;
            // Going through `send_notification` costs ~15µs of CPU a message
            // in a debug build (15 s for a million). Instead serialize the
            // chunk once and have the stdout writer repeat the line: the
            // marker travels the connection's outgoing queue like any other
            // message, so wire order and bytes are unchanged.
            let line = chunk_line(&turn.session_id, "x")?;
            let repeat = serde_json::json!({ "line": line, "count": count });
            turn.cx
                .send_notification(UntypedMessage::new(REPEAT_MARKER, repeat)?)?;
            turn.reply = "x".repeat(usize::try_from(count).unwrap_or(usize::MAX));
        }
        // `sdkstream N`: as `stream`, but each chunk goes through the SDK
        // as a real agent's would (serialized one by one): the agent's own
        // cost of writing the turn, for the stream benchmark's floor.
        "sdkstream" => {
            let count: u64 = rest.trim().parse().map_err(|_| {
                Error::invalid_params().data(format!("sdkstream: bad count {:?}", rest.trim()))
            })?;
            for _ in 0..count {
                turn.chunk("x")?;
            }
        }
        // A message with a byte that is not UTF-8 in its text, then one
        // that is fine: the turn goes on.
        "badbyte" => {
            let line = chunk_line(&turn.session_id, "caf<FF> ")?;
            let raw = serde_json::json!({ "line": line, "count": 1, "raw": true });
            turn.cx
                .send_notification(UntypedMessage::new(REPEAT_MARKER, raw)?)?;
            turn.chunk("after")?;
        }
        // `bigtext MIB [CHUNKS]`: a final message of CHUNKS (default 2)
        // message chunks of MIB MiB of `x` each (each chunk one line,
        // written once and repeated); the stored reply is only its size.
        "bigtext" => {
            let mut words = rest.split_whitespace();
            let bad = || Error::invalid_params().data(format!("bigtext: bad size {rest:?}"));
            let mib: usize = words.next().unwrap_or("").parse().map_err(|_| bad())?;
            let chunks: u64 = words.next().unwrap_or("2").parse().map_err(|_| bad())?;
            let line = chunk_line(&turn.session_id, &"x".repeat(mib << 20))?;
            let repeat = serde_json::json!({ "line": line, "count": chunks });
            turn.cx
                .send_notification(UntypedMessage::new(REPEAT_MARKER, repeat)?)?;
            turn.reply = format!("bigtext: {} bytes", (mib as u64 * chunks) << 20);
        }
        // `hugeline BYTES`: one stdout line of BYTES bytes that never ends;
        // the agent then waits. Only a cap on a message ends the turn.
        "hugeline" => {
            let bytes: u64 = rest.trim().parse().unwrap_or(1 << 20);
            let repeat = serde_json::json!({
                "line": "x".repeat(1024),
                "count": bytes.div_ceil(1024),
                "newline": false,
            });
            turn.cx
                .send_notification(UntypedMessage::new(REPEAT_MARKER, repeat)?)?;
            std::future::pending::<()>().await;
        }
        // `hugestderr BYTES`: one stderr line of BYTES bytes, then a word of
        // stderr, then a reply.
        "hugestderr" => {
            use std::io::Write;
            let bytes: usize = rest.trim().parse().unwrap_or(1 << 20);
            let mut err = std::io::stderr().lock();
            let block = vec![b'y'; 1 << 16];
            let mut left = bytes;
            while left > 0 {
                let n = left.min(block.len());
                err.write_all(&block[..n])
                    .map_err(agent_client_protocol::Error::into_internal_error)?;
                left -= n;
            }
            err.write_all(b"\nlast words\n")
                .and_then(|()| err.flush())
                .map_err(agent_client_protocol::Error::into_internal_error)?;
            turn.chunk("still here")?;
        }
        "tools" => {
            turn.chunk("Let me look.")?;
            let read = ToolCall::new("t1", "Read README.md")
                .kind(ToolKind::Read)
                .status(ToolCallStatus::Pending);
            turn.tool_call(read)?;
            turn.tool_status("t1", ToolCallStatus::Completed)?;
            turn.chunk("Still looking.")?;
            let search =
                ToolCall::new("t2", "Search \"fn main\"").status(ToolCallStatus::InProgress);
            turn.tool_call(search)?;
            turn.tool_status("t2", ToolCallStatus::Completed)?;
            turn.chunk("Final ")?;
            turn.chunk("answer.")?;
        }
        "diff" => {
            // `diff PATH`: an edit of PATH, its change sent as a diff.
            let path = match rest.trim() {
                "" => "src/a.rs",
                p => p,
            };
            let diff = Diff::new(path, "one\n2\nthree\n").old_text("one\ntwo\nthree\n".to_string());
            let call = ToolCall::new("d1", format!("Edit {path}"))
                .kind(ToolKind::Edit)
                .status(ToolCallStatus::InProgress)
                .locations(vec![ToolCallLocation::new(path)])
                .raw_input(serde_json::json!({ "path": path }))
                .content(vec![ToolCallContent::Diff(diff)]);
            turn.tool_call(call)?;
            turn.tool_status("d1", ToolCallStatus::Completed)?;
            turn.chunk("edited")?;
        }
        "execute" => {
            // `execute CMD…`: a command run, its output sent as text.
            let command = match rest.trim() {
                "" => "cargo test",
                c => c,
            };
            let call = ToolCall::new("x1", format!("Run {command}"))
                .kind(ToolKind::Execute)
                .status(ToolCallStatus::InProgress)
                .raw_input(serde_json::json!({ "command": command }));
            turn.tool_call(call)?;
            let fields = ToolCallUpdateFields::new()
                .status(ToolCallStatus::Completed)
                .content(vec![ToolCallContent::from(format!(
                    "$ {command}\nall 3 tests passed"
                ))]);
            turn.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                "x1", fields,
            )))?;
            turn.chunk("ran")?;
        }
        "review" => {
            let value = rest.split_whitespace().next().unwrap_or("");
            turn.thought("Reviewing.")?;
            turn.chunk(format!("<!-- severity: {value} -->\n"))?;
            turn.chunk(format!("## Review\nLooks {value}."))?;
        }
        "findings" => {
            // `findings a|b`: a review with findings (`FINDINGS_A`,
            // `FINDINGS_B`), for quorum's parser and its merge.
            let report = match rest.split_whitespace().next() {
                Some("b") => FINDINGS_B,
                _ => FINDINGS_A,
            };
            turn.thought("Reviewing.")?;
            turn.chunk(report)?;
        }
        "usage" => {
            // `usage USED SIZE [COST [CURRENCY]]`: one usage_update.
            let mut words = rest.split_whitespace();
            let mut number = |what: &str| -> Result<Option<f64>, Error> {
                words
                    .next()
                    .map(|w| {
                        w.parse::<f64>().map_err(|_| {
                            Error::invalid_params().data(format!("usage: bad {what} {w:?}"))
                        })
                    })
                    .transpose()
            };
            let used = number("used")?.unwrap_or(0.0) as u64;
            let size = number("size")?.unwrap_or(0.0) as u64;
            let cost = number("cost")?;
            let currency = words.next().unwrap_or("USD").to_string();
            let mut update = UsageUpdate::new(used, size);
            if let Some(amount) = cost {
                update = update.cost(Cost::new(amount, currency));
            }
            turn.update(SessionUpdate::UsageUpdate(update))?;
            turn.chunk("counted")?;
        }
        "plan" => {
            let entries = vec![
                PlanEntry::new(
                    "Read the code",
                    PlanEntryPriority::High,
                    PlanEntryStatus::Completed,
                ),
                PlanEntry::new(
                    "Write the fix",
                    PlanEntryPriority::Medium,
                    PlanEntryStatus::InProgress,
                ),
                PlanEntry::new(
                    "Run the tests",
                    PlanEntryPriority::Low,
                    PlanEntryStatus::Pending,
                ),
            ];
            turn.update(SessionUpdate::Plan(Plan::new(entries)))?;
            turn.chunk("planned")?;
        }
        "permission" => {
            // `permission PATH`: the call names PATH as its location.
            // `permission {JSON}`: the call's raw input is JSON, and it
            // names no location.
            let target = rest.trim();
            let raw_input: Option<serde_json::Value> = target
                .starts_with('{')
                .then(|| serde_json::from_str(target).ok())
                .flatten();
            let title = if target.is_empty() {
                "Delete build/".to_string()
            } else if raw_input.is_some() {
                "Run a tool".to_string()
            } else {
                format!("Delete {target}")
            };
            let locations: Vec<ToolCallLocation> = if target.is_empty() || raw_input.is_some() {
                Vec::new()
            } else {
                vec![ToolCallLocation::new(target)]
            };
            let call = ToolCall::new("p1", title.clone())
                .kind(ToolKind::Delete)
                .status(ToolCallStatus::Pending)
                .locations(locations.clone());
            turn.tool_call(call)?;
            let options = vec![
                PermissionOption::new("allow", "Allow once", PermissionOptionKind::AllowOnce),
                PermissionOption::new("always", "Allow always", PermissionOptionKind::AllowAlways),
                PermissionOption::new("reject", "Reject", PermissionOptionKind::RejectOnce),
            ];
            let tool_call = ToolCallUpdate::new(
                "p1",
                ToolCallUpdateFields::new()
                    .title(title)
                    .kind(ToolKind::Delete)
                    .status(ToolCallStatus::Pending)
                    .locations(locations)
                    .raw_input(raw_input),
            );
            let request =
                RequestPermissionRequest::new(turn.session_id.clone(), tool_call, options);
            let answer = request_in_background(&turn.cx, request)?;
            let outcome = tokio::select! {
                () = cancelled => return Ok(StopReason::Cancelled),
                answer = answer => answer.unwrap_or_else(|_| Err(Error::internal_error())),
            };
            match outcome {
                Ok(response) => match response.outcome {
                    RequestPermissionOutcome::Selected(selected) => {
                        match selected.option_id.0.as_ref() {
                            "allow" | "always" => {
                                turn.tool_status("p1", ToolCallStatus::Completed)?;
                                turn.chunk("permitted")?;
                            }
                            "reject" => {
                                turn.tool_status("p1", ToolCallStatus::Failed)?;
                                turn.chunk("denied")?;
                            }
                            other => {
                                log(format!("permission: unknown option {other:?}"));
                                turn.chunk("permission error")?;
                            }
                        }
                    }
                    RequestPermissionOutcome::Cancelled => return Ok(StopReason::Cancelled),
                    _ => turn.chunk("permission error")?,
                },
                Err(error) => {
                    log(format!("permission request failed: {error:?}"));
                    turn.chunk("permission error")?;
                }
            }
        }
        "read" => {
            let request = ReadTextFileRequest::new(turn.session_id.clone(), rest.trim());
            match turn.cx.send_request(request).block_task().await {
                Ok(response) => turn.chunk(format!("read: {}", response.content))?,
                Err(error) => turn.chunk(format!("read failed: {}", error.message))?,
            }
        }
        "write" => {
            let (path, content) = first_word(rest);
            let request =
                WriteTextFileRequest::new(turn.session_id.clone(), path, content.to_string());
            match turn.cx.send_request(request).block_task().await {
                Ok(_) => turn.chunk("wrote")?,
                Err(error) => turn.chunk(format!("write failed: {}", error.message))?,
            }
        }
        // `mcp TOOL {ARGS}`: calls TOOL of the MCP server named `quorum` it
        // was given (stdio: started as given, spoken to with the official
        // SDK's client), as claude does: a tool call `mcp__quorum__TOOL`,
        // a permission request for it, then the call.
        "mcp" => {
            let (tool, args) = first_word(rest);
            let args: serde_json::Value = serde_json::from_str(args.trim())
                .map_err(|e| Error::invalid_params().data(format!("mcp: bad arguments: {e}")))?;
            let title = format!("mcp__quorum__{tool}");
            turn.tool_call(
                ToolCall::new("mcp1", title.clone())
                    .status(ToolCallStatus::Pending)
                    .raw_input(args.clone()),
            )?;
            let options = vec![
                PermissionOption::new("allow", "Allow once", PermissionOptionKind::AllowOnce),
                PermissionOption::new("reject", "Reject", PermissionOptionKind::RejectOnce),
            ];
            let ask = RequestPermissionRequest::new(
                turn.session_id.clone(),
                ToolCallUpdate::new(
                    "mcp1",
                    ToolCallUpdateFields::new()
                        .title(title)
                        .raw_input(args.clone()),
                ),
                options,
            );
            let answer = request_in_background(&turn.cx, ask)?;
            let allowed = tokio::select! {
                () = cancelled => return Ok(StopReason::Cancelled),
                answer = answer => matches!(
                    answer.map(|a| a.map(|r| r.outcome)),
                    Ok(Ok(RequestPermissionOutcome::Selected(ref s)))
                        if s.option_id.0.as_ref() == "allow"
                ),
            };
            if !allowed {
                turn.tool_status("mcp1", ToolCallStatus::Failed)?;
                turn.chunk("mcp: not allowed")?;
                return Ok(StopReason::EndTurn);
            }
            turn.tool_status("mcp1", ToolCallStatus::InProgress)?;
            match mcp_client::call(tool, args).await {
                Ok(text) => {
                    turn.tool_status("mcp1", ToolCallStatus::Completed)?;
                    turn.chunk(format!("mcp: {text}"))?;
                }
                Err(e) => {
                    turn.tool_status("mcp1", ToolCallStatus::Failed)?;
                    turn.chunk(format!("mcp failed: {e}"))?;
                }
            }
        }
        // Its own tools, not the client's: the agent process writes a file
        // (or runs a command) itself, as real agents run their shell.
        "own" => {
            let (what, rest) = first_word(rest);
            match what {
                "write" => {
                    let (path, content) = first_word(rest);
                    match std::fs::write(path, content) {
                        Ok(()) => turn.chunk("own wrote")?,
                        Err(e) => turn.chunk(format!("own write failed: {e}"))?,
                    }
                }
                "run" => match std::process::Command::new("sh").args(["-c", rest]).output() {
                    Ok(out) => turn.chunk(format!(
                        "own ran: {}\n{}{}",
                        out.status,
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    ))?,
                    Err(e) => turn.chunk(format!("own run failed: {e}"))?,
                },
                other => turn.chunk(format!("unknown own: {other}"))?,
            }
        }
        // Stderr that is no UTF-8, then one 1 MB line: more than a pipe
        // holds, so the turn ends only if quorum keeps reading.
        "noisy" => {
            use std::io::Write;
            let mut err = std::io::stderr().lock();
            let mut noise = b"bad \xff byte\n".to_vec();
            noise.extend(std::iter::repeat_n(b'x', 1 << 20));
            noise.extend_from_slice(b"\nlast words\n");
            err.write_all(&noise)
                .and_then(|()| err.flush())
                .map_err(agent_client_protocol::Error::into_internal_error)?;
            turn.chunk("still here")?;
        }
        "crash" => {
            turn.chunk("about to crash")?;
            // Outgoing messages are written in order, so the writer thread
            // sees this marker only after the chunk above; it then flushes
            // stdout and exits with code 3.
            turn.cx
                .send_notification(UntypedMessage::new(CRASH_MARKER, serde_json::json!({}))?)?;
            std::future::pending::<()>().await;
        }
        "nested" => return nested(turn, cancelled).await,
        "form" => return elicit::form(turn, rest, cancelled).await,
        "url" => return elicit::url(turn, rest, cancelled).await,
        "ask-anyway" => return elicit::ask_anyway(turn, cancelled).await,
        "child-form" => return elicit::child_form(turn, cancelled).await,
        "slow" => return slow(turn, rest, cancelled).await,
        "term" => return terminals::scenario(turn, rest, cancelled).await,
        "trickle" => return trickle(turn, rest, cancelled).await,
        // `deaf`: "tick N" every 50 ms for a minute, whatever
        // `session/cancel` says.
        "deaf" => {
            drop(cancelled);
            for i in 1..=1200 {
                turn.chunk(format!("tick {i}\n"))?;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        "grandchild" => {
            // `grandchild [SECONDS] [end_turn]`: a `sleep 600` in this
            // agent's process group (a grandchild of the client), which
            // nothing here ever stops; then as `slow`.
            let sleep = std::process::Command::new("sleep")
                .arg("600")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .map_err(|e| Error::internal_error().data(format!("grandchild: {e}")))?;
            turn.chunk(format!(
                "grandchild {} agent {}\n",
                sleep.id(),
                std::process::id()
            ))?;
            // Dropping std's `Child` neither kills nor waits for it.
            drop(sleep);
            return slow(turn, rest, cancelled).await;
        }
        "daemon" => {
            // `daemon [SECONDS] [end_turn]`: a double-forking daemon: a shell
            // that starts `sleep 600` in a session of its own and exits at
            // once, so the sleep is nobody's child and in nobody's group;
            // `grandchild G agent A\n`, then as `slow`.
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg("setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $!")
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .output()
                .map_err(|e| Error::internal_error().data(format!("daemon: {e}")))?;
            let pid = String::from_utf8_lossy(&out.stdout).trim().to_string();
            turn.chunk(format!("grandchild {pid} agent {}\n", std::process::id()))?;
            return slow(turn, rest, cancelled).await;
        }
        "orphan" => {
            // `orphan`: a helper (`sleep 600`) in a session of its own, then
            // this agent crashes (exit code 3), leaving the helper behind;
            // `grandchild G agent A\n` first.
            let helper = std::process::Command::new("setsid")
                .arg("sleep")
                .arg("600")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .map_err(|e| Error::internal_error().data(format!("orphan: {e}")))?;
            turn.chunk(format!(
                "grandchild {} agent {}\n",
                helper.id(),
                std::process::id()
            ))?;
            drop(helper);
            turn.cx
                .send_notification(UntypedMessage::new(CRASH_MARKER, serde_json::json!({}))?)?;
            std::future::pending::<()>().await;
        }
        "whoami" => {
            let key = turn.session_id.to_string();
            let line = lock(&turn.state)
                .sessions
                .get(&key)
                .map(|s| format!("model: {}, mode: {}", s.model, s.mode))
                .unwrap_or_default();
            turn.chunk(line)?;
        }
        "pick" => {
            // The person picked another model through the agent itself.
            let key = turn.session_id.to_string();
            let options = {
                let mut state = lock(&turn.state);
                let session = state.sessions.get_mut(&key).expect("the turn's session");
                session.model = rest.trim().to_string();
                config_options(session)
            };
            turn.update(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
                options,
            )))?;
            turn.chunk(format!("picked {}", rest.trim()))?;
        }
        // `stamps N MS`: N chunks `t=MICROS\n`, MS ms apart, each
        // stamped with the wall clock as it is sent (latency).
        "stamps" => {
            let mut words = rest.split_whitespace();
            let count: u64 = words.next().and_then(|w| w.parse().ok()).ok_or_else(|| {
                Error::invalid_params().data(format!("stamps: bad count {rest:?}"))
            })?;
            let gap: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(5);
            for _ in 0..count {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_micros();
                turn.chunk(format!("t={now}\n"))?;
                tokio::time::sleep(Duration::from_millis(gap)).await;
            }
        }
        "turns" => {
            // The handler recorded this prompt before the turn started.
            let count = turn.turns_so_far;
            turn.chunk(format!("turns: {count}"))?;
        }
        "stop" => {
            let reason = match rest.trim() {
                "max_tokens" => StopReason::MaxTokens,
                "max_turn_requests" => StopReason::MaxTurnRequests,
                "refusal" => StopReason::Refusal,
                other => {
                    return Err(Error::invalid_params().data(format!("stop: bad reason {other:?}")));
                }
            };
            turn.chunk("stopping")?;
            return Ok(reason);
        }
        "ext" => {
            turn.cx.send_notification(UntypedMessage::new(
                "_fake/hello",
                serde_json::json!({ "x": 1 }),
            )?)?;
            let ask = UntypedMessage::new("_fake/ask", serde_json::json!({}))?;
            if let Err(error) = turn.cx.send_request(ask).block_task().await {
                log(format!(
                    "_fake/ask answered with an error (expected): {error:?}"
                ));
            }
            turn.chunk("ext ok")?;
        }
        "rpcerror" => return Err(rest18::model_error()),
        "content" => rest18::content(turn)?,
        w if w.starts_with('/') || w == "settings" => cmd_report(turn, text)?,
        other => turn.chunk(format!("unknown scenario: {other}"))?,
    }
    Ok(StopReason::EndTurn)
}

/// `slow [SECONDS] [end_turn]`: with `end_turn`, a cancelled turn answers
/// `end_turn` (as opencode does) instead of `cancelled`.
/// `nested`: announces a child session (a sub-agent of this agent) with
/// `subagent_update`, streams the child's own updates on its session id,
/// and has the child ask a permission; the parent reports the answer.
async fn nested(
    turn: &mut Turn,
    cancelled: impl std::future::Future<Output = ()>,
) -> Result<StopReason, Error> {
    if !SUBAGENTS.get().copied().unwrap_or(false) {
        turn.chunk("no sub-agents: the client did not advertise subagents")?;
        return Ok(StopReason::EndTurn);
    }
    let child = SessionId::new(format!("{}-child-1", turn.session_id));
    let announce = |state: StateUpdate| {
        SessionUpdate::SubagentUpdate(SubagentUpdate::new(child.clone()).state(state))
    };
    turn.chunk("Delegating.\n")?;
    turn.update(SessionUpdate::SubagentUpdate(
        SubagentUpdate::new(child.clone())
            .title("scout")
            .description("looks for the tests")
            .capabilities(
                SubagentSessionCapabilities::new().cancel(SessionCancelCapabilities::new()),
            )
            .state(StateUpdate::Running(RunningStateUpdate::new())),
    ))?;
    let cx = turn.cx.clone();
    let child_update = |update: SessionUpdate| {
        cx.send_notification(SessionNotification::new(child.clone(), update))
    };
    child_update(SessionUpdate::AgentMessageChunk(ContentChunk::new(
        ContentBlock::from("scanning tests/\n".to_string()),
    )))?;
    child_update(SessionUpdate::ToolCall(
        ToolCall::new("k1", "Read tests/app_loop.rs")
            .kind(ToolKind::Read)
            .status(ToolCallStatus::Completed),
    ))?;
    child_update(SessionUpdate::ToolCall(
        ToolCall::new("k2", "Delete target/")
            .kind(ToolKind::Delete)
            .status(ToolCallStatus::Pending),
    ))?;
    turn.update(announce(StateUpdate::RequiresAction(
        RequiresActionStateUpdate::new(),
    )))?;
    let options = vec![
        PermissionOption::new("allow", "Allow once", PermissionOptionKind::AllowOnce),
        PermissionOption::new("reject", "Reject", PermissionOptionKind::RejectOnce),
    ];
    let tool_call = ToolCallUpdate::new(
        "k2",
        ToolCallUpdateFields::new()
            .title("Delete target/")
            .kind(ToolKind::Delete)
            .status(ToolCallStatus::Pending),
    );
    let request = RequestPermissionRequest::new(child.clone(), tool_call, options);
    let answer = request_in_background(&turn.cx, request)?;
    let outcome = tokio::select! {
        () = cancelled => return Ok(StopReason::Cancelled),
        answer = answer => answer.unwrap_or_else(|_| Err(Error::internal_error())),
    };
    // Cancelled: the child's work was cancelled (`session/cancel` on the
    // child session); the parent goes on.
    let (status, word) = match outcome {
        Ok(response) => match response.outcome {
            RequestPermissionOutcome::Selected(selected)
                if selected.option_id.0.as_ref() == "allow" =>
            {
                (ToolCallStatus::Completed, "permitted")
            }
            RequestPermissionOutcome::Selected(_) => (ToolCallStatus::Failed, "denied"),
            _ => (ToolCallStatus::Failed, "cancelled"),
        },
        Err(error) => {
            log(format!("nested: permission request failed: {error:?}"));
            (ToolCallStatus::Failed, "denied")
        }
    };
    child_update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        "k2",
        ToolCallUpdateFields::new().status(status),
    )))?;
    child_update(SessionUpdate::AgentMessageChunk(ContentChunk::new(
        ContentBlock::from(format!("child {word}\n")),
    )))?;
    turn.update(announce(StateUpdate::Idle(IdleStateUpdate::new())))?;
    turn.chunk(format!("nested done: {word}"))?;
    Ok(StopReason::EndTurn)
}

async fn slow(
    turn: &mut Turn,
    rest: &str,
    cancelled: impl std::future::Future<Output = ()>,
) -> Result<StopReason, Error> {
    let mut words = rest.split_whitespace();
    let seconds: f64 = match words.next() {
        None => 30.0,
        Some(value) => value
            .parse()
            .map_err(|_| Error::invalid_params().data(format!("slow: bad seconds {value:?}")))?,
    };
    let on_cancel = if words.next() == Some("end_turn") {
        StopReason::EndTurn
    } else {
        StopReason::Cancelled
    };
    turn.chunk("working")?;
    tokio::select! {
        () = cancelled => return Ok(on_cancel),
        () = tokio::time::sleep(Duration::from_secs_f64(seconds.max(0.0))) => {}
    }
    turn.chunk(" done")?;
    Ok(StopReason::EndTurn)
}

/// `trickle SECONDS RATE`: RATE chunks a second for SECONDS (a steady
/// stream, for soak runs): `w1 `, `w2 `, …, every 12th ending the line.
async fn trickle(
    turn: &mut Turn,
    rest: &str,
    cancelled: impl std::future::Future<Output = ()>,
) -> Result<StopReason, Error> {
    let mut words = rest.split_whitespace();
    let mut number = |what: &str, default: f64| -> Result<f64, Error> {
        match words.next() {
            None => Ok(default),
            Some(value) => value
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| {
                    Error::invalid_params().data(format!("trickle: bad {what} {value:?}"))
                }),
        }
    };
    let seconds = number("seconds", 10.0)?;
    let rate = number("rate", 200.0)?.max(0.001);
    let total = (seconds * rate).round() as u64;
    let period = Duration::from_secs_f64(1.0 / rate);
    let start = tokio::time::Instant::now();
    tokio::pin!(cancelled);
    for i in 1..=total {
        // Paced against the start, so a late wake-up catches up.
        let at = start + period.mul_f64(i as f64);
        tokio::select! {
            () = &mut cancelled => return Ok(StopReason::Cancelled),
            () = tokio::time::sleep_until(at) => {}
        }
        let end = if i % 12 == 0 { "\n" } else { " " };
        turn.chunk(format!("w{i}{end}"))?;
        // Only the last line is the stored reply; don't keep the whole stream.
        if end == "\n" {
            turn.reply.clear();
        }
    }
    Ok(StopReason::EndTurn)
}

// ---------------------------------------------------------------------------
// `--commands`: the agent's own commands, modes and config options
// ---------------------------------------------------------------------------

/// The modes a `--commands` session offers.
const CMD_MODES: &[(&str, &str)] = &[("ask", "Ask"), ("code", "Code"), ("plan", "Plan")];
/// Its config options' values: `model` (category model) and `effort`
/// (category thought_level).
const CMD_MODELS: &[&str] = &["fast", "smart"];
const CMD_EFFORTS: &[&str] = &["low", "high"];

/// A `--commands` session's config options.
fn cmd_options(session: &Session) -> Vec<SessionConfigOption> {
    let pick = |values: &[&str]| -> Vec<SessionConfigSelectOption> {
        values
            .iter()
            .map(|v| SessionConfigSelectOption::new(v.to_string(), v.to_string()))
            .collect()
    };
    vec![
        SessionConfigOption::select("model", "Model", session.model.clone(), pick(CMD_MODELS))
            .category(SessionConfigOptionCategory::Model),
        SessionConfigOption::select(
            "effort",
            "Effort",
            session.effort.clone(),
            pick(CMD_EFFORTS),
        )
        .category(SessionConfigOptionCategory::ThoughtLevel),
    ]
}

/// A `--commands` session's modes.
fn cmd_modes(session: &Session) -> agent_client_protocol::v1::schema::SessionModeState {
    use agent_client_protocol::v1::schema::{SessionMode, SessionModeState};
    SessionModeState::new(
        session.mode.clone(),
        CMD_MODES
            .iter()
            .map(|(id, name)| SessionMode::new(id.to_string(), name.to_string()))
            .collect(),
    )
}

/// A new `--commands` session's answer: its modes and options.
fn cmd_new_session(state: &Shared, id: &str, response: NewSessionResponse) -> NewSessionResponse {
    let mut state = lock(state);
    let Some(session) = state.sessions.get_mut(id) else {
        return response;
    };
    session.effort = "low".into();
    response
        .modes(cmd_modes(session))
        .config_options(cmd_options(session))
}

/// `--announce-after MS`: commands are announced this long after a new
/// session's answer.
static ANNOUNCE_AFTER: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// How long after a new session's answer its commands are announced:
/// `--announce-after`, else 20 to 220 ms, different each time (real agents
/// send them when they have them, not at once).
fn announce_delay() -> std::time::Duration {
    if let Some(&ms) = ANNOUNCE_AFTER.get() {
        return std::time::Duration::from_millis(ms);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let seed = u64::from(nanos) ^ u64::from(std::process::id()).rotate_left(17);
    std::time::Duration::from_millis(20 + seed % 200)
}

/// After a new `--commands` session's answer: the commands it offers.
fn cmd_announce(cx: &ConnectionTo<Client>, id: &str) -> Result<(), Error> {
    use agent_client_protocol::v1::schema::{
        AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, UnstructuredCommandInput,
    };
    let commands = vec![
        AvailableCommand::new("review", "Review the changes").input(
            AvailableCommandInput::Unstructured(UnstructuredCommandInput::new("what to review")),
        ),
        AvailableCommand::new("compact", "Compact the context"),
    ];
    cx.send_notification(SessionNotification::new(
        SessionId::new(id.to_string()),
        SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands)),
    ))
}

/// `session/set_mode` of a `--commands` session: the mode, then
/// `current_mode_update`.
fn cmd_set_mode(
    state: &Shared,
    request: agent_client_protocol::v1::schema::SetSessionModeRequest,
    responder: agent_client_protocol::v1::Responder<
        agent_client_protocol::v1::schema::SetSessionModeResponse,
    >,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    use agent_client_protocol::v1::schema::{CurrentModeUpdate, SetSessionModeResponse};
    let mode = request.mode_id.to_string();
    if !CMD_MODES.iter().any(|(id, _)| *id == mode) {
        return responder
            .respond_with_error(Error::invalid_params().data(format!("no mode {mode:?}")));
    }
    {
        let mut state = lock(state);
        let Some(session) = state.sessions.get_mut(&request.session_id.to_string()) else {
            return responder.respond_with_error(unknown_session(&request.session_id));
        };
        session.mode = mode.clone();
    }
    log(format!("{}: mode {mode}", request.session_id));
    responder.respond(SetSessionModeResponse::new())?;
    cx.send_notification(SessionNotification::new(
        request.session_id,
        SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode)),
    ))
}

/// `session/set_config_option` of a `--commands` session: the options
/// in the answer, then `config_option_update`.
fn cmd_set_option(
    state: &Shared,
    request: SetSessionConfigOptionRequest,
    responder: agent_client_protocol::v1::Responder<SetSessionConfigOptionResponse>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let value = request
        .value
        .as_value_id()
        .map(|v| v.to_string())
        .unwrap_or_default();
    let options = {
        let mut state = lock(state);
        let Some(session) = state.sessions.get_mut(&request.session_id.to_string()) else {
            return responder.respond_with_error(unknown_session(&request.session_id));
        };
        let (allowed, field) = match request.config_id.to_string().as_str() {
            "model" => (CMD_MODELS, &mut session.model),
            "effort" => (CMD_EFFORTS, &mut session.effort),
            other => {
                return responder.respond_with_error(
                    Error::invalid_params().data(format!("no option {other:?}")),
                );
            }
        };
        if !allowed.contains(&value.as_str()) {
            return responder
                .respond_with_error(Error::invalid_params().data(format!("bad value {value:?}")));
        }
        *field = value;
        cmd_options(session)
    };
    log(format!("{}: options set", request.session_id));
    responder.respond(SetSessionConfigOptionResponse::new(options.clone()))?;
    cx.send_notification(SessionNotification::new(
        request.session_id,
        SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(options)),
    ))
}

/// A prompt that starts with `/` (one of the agent's commands), or
/// `settings`: what it received and the session's mode and options.
fn cmd_report(turn: &mut Turn, text: &str) -> Result<(), Error> {
    let (mode, model, effort) = {
        let state = lock(&turn.state);
        match state.sessions.get(&turn.session_id.to_string()) {
            Some(s) => (s.mode.clone(), s.model.clone(), s.effort.clone()),
            None => Default::default(),
        }
    };
    turn.chunk(format!(
        "received {text:?}; mode {mode}; model {model}; effort {effort}"
    ))
}

// ---------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------

fn prompt_text(request: &PromptRequest) -> String {
    request
        .prompt
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect()
}

fn handle_prompt(
    state: &Shared,
    request: PromptRequest,
    responder: agent_client_protocol::v1::Responder<PromptResponse>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    let text = prompt_text(&request);
    let session_id = request.session_id;
    let key = session_id.to_string();
    // Record the prompt and register the turn's cancel signal here, inside
    // the dispatch loop, so a `session/cancel` that follows the prompt on the
    // wire always finds it.
    let (turn_number, index, cancel) = {
        let mut state = lock(state);
        state.next_turn += 1;
        let turn_number = state.next_turn;
        let Some(session) = state.sessions.get_mut(&key) else {
            return responder.respond_with_error(unknown_session(&session_id));
        };
        session.history.push(TurnRecord {
            prompt: text.clone(),
            reply: String::new(),
        });
        let cancel = Arc::new(Notify::new());
        session.running = Some((turn_number, cancel.clone()));
        (turn_number, session.history.len() - 1, cancel)
    };
    log(format!("{key}: prompt {text:?}"));

    let state = state.clone();
    let mut turn = Turn {
        cx: cx.clone(),
        state: state.clone(),
        session_id,
        turns_so_far: index + 1,
        reply: String::new(),
    };
    let request_cancellation = responder.cancellation();
    let in_flight = InFlight::start();
    cx.spawn(async move {
        let mut result = run_turn(&mut turn, &text, cancel, request_cancellation).await;
        if let (Ok(_), Some(cost)) = (&result, COST_PER_TURN.get()) {
            let update = UsageUpdate::new(1000, 200_000).cost(Cost::new(*cost, "USD"));
            if let Err(e) = turn.update(SessionUpdate::UsageUpdate(update)) {
                result = Err(e);
            }
        }
        drop(in_flight);
        {
            let mut state = lock(&state);
            if let Some(session) = state.sessions.get_mut(&key) {
                if let Some(record) = session.history.get_mut(index) {
                    record.reply = std::mem::take(&mut turn.reply);
                }
                save(&key, session);
                if session
                    .running
                    .as_ref()
                    .is_some_and(|(number, _)| *number == turn_number)
                {
                    session.running = None;
                }
            }
        }
        log(format!("{key}: turn ended with {result:?}"));
        responder.respond_with_result(result.map(PromptResponse::new))
    })
}

fn replay(
    state: &Shared,
    session_id: &SessionId,
    cwd: &std::path::Path,
    cx: &ConnectionTo<Client>,
) -> Result<bool, Error> {
    let mut state = lock(state);
    if !known(&mut state, &session_id.to_string(), cwd) {
        return Ok(false);
    }
    let Some(session) = state.sessions.get(&session_id.to_string()) else {
        return Ok(false);
    };
    for record in &session.history {
        let prompt = ContentChunk::new(ContentBlock::from(record.prompt.clone()));
        let mut updates = vec![SessionUpdate::UserMessageChunk(prompt)];
        // A turn that said nothing (e.g. `echo` alone) replays no reply.
        if !record.reply.is_empty() {
            let reply = ContentChunk::new(ContentBlock::from(record.reply.clone()));
            updates.push(SessionUpdate::AgentMessageChunk(reply));
        }
        for update in updates {
            cx.send_notification(SessionNotification::new(session_id.clone(), update))?;
        }
    }
    Ok(true)
}

struct Options {
    load: bool,
    resume: bool,
    /// Never answer `initialize`, and stay up after stdin closes: a wedged
    /// agent.
    hang_initialize: bool,
    /// Stay up when stdin closes, as codex-acp and claude-agent-acp do.
    ignore_stdin_close: bool,
    /// Offer two auth methods and refuse `session/new` with `auth_required`.
    auth_required: bool,
    /// Offer a model and a mode as session config options.
    config_options: bool,
    /// Offer commands, modes and two config options (`--commands`).
    commands: bool,
    /// The scenario every prompt runs (`--scenario`, `--review`).
    scenario: Option<String>,
    /// Answer `session/new` with [`rest18::model_error`].
    new_error: bool,
}

fn parse_options() -> Options {
    let mut options = Options {
        load: true,
        resume: true,
        hang_initialize: false,
        ignore_stdin_close: false,
        auth_required: false,
        config_options: false,
        commands: false,
        scenario: None,
        new_error: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--no-load" => options.load = false,
            "--no-resume" => options.resume = false,
            "--hang-initialize" => options.hang_initialize = true,
            "--ignore-stdin-close" => options.ignore_stdin_close = true,
            "--auth-required" => options.auth_required = true,
            "--config-options" => options.config_options = true,
            "--new-error" => options.new_error = true,
            "--commands" => options.commands = true,
            "--announce-after" => {
                let ms = args.next().and_then(|ms| ms.parse().ok());
                let _ = ANNOUNCE_AFTER.set(ms.unwrap_or(0));
            }
            "--scenario" => options.scenario = args.next(),
            "--review" => options.scenario = args.next().map(|v| format!("review {v}")),
            "--review-red-if" => {
                if let Some(text) = args.next() {
                    let _ = REVIEW_RED_IF.set(text);
                }
            }
            "--cost-per-turn" => {
                if let Some(cost) = args.next().and_then(|c| c.parse().ok()) {
                    let _ = COST_PER_TURN.set(cost);
                }
            }
            "--check" => {
                if let Some(verdict) = args.next() {
                    let _ = CHECK.set(verdict);
                }
            }
            "--mcp-http" => MCP_HTTP.store(true, std::sync::atomic::Ordering::SeqCst),
            "--mcp-log" => {
                if let Some(file) = args.next() {
                    let _ = MCP_LOG.set(std::path::PathBuf::from(file));
                }
            }
            "--in-flight" => {
                if let Some(file) = args.next() {
                    let _ = IN_FLIGHT.set(std::path::PathBuf::from(file));
                }
            }
            "--answers" => {
                if let Some(file) = args.next() {
                    let _ = elicit::ANSWERS.set(std::path::PathBuf::from(file));
                }
            }
            "--sessions" => rest18::log_sessions_to(args.next()),
            "--double-on-reload" => rest18::double_on_reload(),
            "--close" => rest18::offer_close(),
            "--store" => {
                if let Some(dir) = args.next() {
                    let _ = STORE.set(std::path::PathBuf::from(dir));
                }
            }
            other => log(format!("ignoring unknown argument {other:?}")),
        }
    }
    options
}

// ---------------------------------------------------------------------------
// stdin/stdout bridge
// ---------------------------------------------------------------------------

/// Exits on a broken stdout: there is nobody left to talk to.
fn write_or_exit(result: std::io::Result<()>) {
    if let Err(error) = result {
        log(format!("stdout: {error}"));
        std::process::exit(1);
    }
}

/// Writes one outgoing frame to stdout, acting on this binary's private
/// marker notifications instead of writing them.
fn write_frame(out: &mut impl Write, frame: &TransportFrame) {
    if let TransportFrame::Single(RawJsonRpcMessage::Notification(notification)) = frame {
        match &*notification.method {
            CRASH_MARKER => {
                write_or_exit(out.flush());
                log("crash scenario: exiting with code 3");
                std::process::exit(3);
            }
            REPEAT_MARKER => {
                let params = notification.params.clone().map(|p| p.into_value());
                let params = params.unwrap_or_default();
                let line = params["line"].as_str().unwrap_or_default();
                let count = params["count"].as_u64().unwrap_or_default();
                // `raw`: `<FF>` in the line is written as the byte 0xFF.
                let bytes: Vec<u8> = if params["raw"] == true {
                    line.split("<FF>")
                        .collect::<Vec<_>>()
                        .join("\u{0}")
                        .bytes()
                        .map(|b| if b == 0 { 0xff } else { b })
                        .collect()
                } else {
                    line.as_bytes().to_vec()
                };
                // `newline: false`: the copies make one line, never ended.
                let end: &[u8] = if params["newline"] == false {
                    b""
                } else {
                    b"\n"
                };
                for _ in 0..count {
                    write_or_exit(out.write_all(&bytes).and_then(|()| out.write_all(end)));
                }
                return;
            }
            _ => {}
        }
    }
    match frame.to_json() {
        Ok(line) => write_or_exit(writeln!(out, "{line}")),
        Err(error) => log(format!("cannot serialize outgoing frame: {error:?}")),
    }
}

#[tokio::main]
async fn main() {
    let options = parse_options();
    if options.hang_initialize {
        log("hanging: initialize is never answered");
        for line in std::io::stdin().lock().lines() {
            log(format!("ignoring {:?}", line.unwrap_or_default()));
        }
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
    log(format!(
        "started (loadSession: {}, resume: {}, scenario: {:?})",
        options.load, options.resume, options.scenario
    ));
    if let Some(scenario) = options.scenario.clone() {
        let _ = SCENARIO.set(scenario);
    }

    // The crate's `Stdio` transport needs the `stdio` feature; instead, hand
    // the connection one end of an in-memory `Channel` and pump the other end
    // to and from stdin/stdout on two threads.
    let (connection_end, bridge_end) = Channel::duplex();
    let (mut outgoing, incoming) = bridge_end.into_parts();

    // stdin -> connection. Dropping `incoming` at EOF closes the connection;
    // with --ignore-stdin-close it is kept, and the agent stays up.
    let ignore_stdin_close = options.ignore_stdin_close;
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let line = match line {
                Ok(line) => line,
                Err(error) => {
                    log(format!("stdin: {error}"));
                    break;
                }
            };
            if line.trim().is_empty() {
                continue;
            }
            if incoming
                .unbounded_send(TransportFrame::parse_json(&line))
                .is_err()
            {
                break;
            }
        }
        if ignore_stdin_close {
            log("stdin closed; staying up (--ignore-stdin-close)");
            loop {
                std::thread::park();
            }
        }
    });

    // connection -> stdout, flushing whenever the queue runs dry. The queue
    // ends when the connection drops its sender.
    let writer = {
        let runtime = tokio::runtime::Handle::current();
        std::thread::spawn(move || {
            let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            loop {
                let frame = match outgoing.try_recv() {
                    Ok(frame) => frame,
                    Err(_) => {
                        write_or_exit(out.flush());
                        match runtime.block_on(outgoing.recv()) {
                            Ok(frame) => frame,
                            Err(_) => break,
                        }
                    }
                };
                write_frame(&mut out, &frame);
            }
            write_or_exit(out.flush());
        })
    };

    let state: Shared = Arc::default();
    let result = Agent
        .v1()
        .name("quorum-fake-agent")
        .on_receive_request(
            async move |request: InitializeRequest, responder, _cx| {
                let _ = SUBAGENTS.set(request.client_capabilities.subagents.is_some());
                elicit::note_capabilities(&request.client_capabilities);
                let _ = TERMINAL.set(request.client_capabilities.terminal);
                let resume = options.resume.then(SessionResumeCapabilities::new);
                let capabilities = AgentCapabilities::new()
                    .load_session(options.load)
                    .session_capabilities(
                        SessionCapabilities::new()
                            .resume(resume)
                            .close(rest18::close_capability()),
                    )
                    .mcp_capabilities(
                        agent_client_protocol::v1::schema::McpCapabilities::new()
                            .http(MCP_HTTP.load(std::sync::atomic::Ordering::SeqCst))
                            .sse(MCP_HTTP.load(std::sync::atomic::Ordering::SeqCst)),
                    );
                let mut response = InitializeResponse::new(ProtocolVersion::V1)
                    .agent_capabilities(capabilities)
                    .agent_info(Implementation::new("quorum-fake-agent", "1.0.0"));
                if options.auth_required {
                    let terminal: AuthMethod = serde_json::from_value(serde_json::json!({
                        "type": "terminal", "id": "api-key", "name": "API key",
                        "description": "a key from your account page",
                        "args": ["login"], "env": {"FAKE_API_KEY": ""}
                    }))
                    .expect("a terminal auth method");
                    response = response.auth_methods(vec![
                        terminal,
                        AuthMethod::Agent(AuthMethodAgent::new(
                            "browser",
                            "Sign in with a browser",
                        )),
                    ]);
                }
                responder.respond(response)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: NewSessionRequest, responder, cx| {
                    mcp_seen("session/new", &request.mcp_servers);
                    if options.new_error {
                        return responder.respond_with_error(rest18::model_error());
                    }
                    if options.auth_required {
                        return responder
                            .respond_with_error(agent_client_protocol::Error::auth_required());
                    }
                    let (id, offered) = {
                        let mut state = lock(&state);
                        state.next_session += 1;
                        let id = format!("fake-{}-{}", std::process::id(), state.next_session);
                        let session = Session {
                            cwd: request.cwd.clone(),
                            model: "fast".into(),
                            mode: "ask".into(),
                            ..Session::default()
                        };
                        let offered = config_options(&session);
                        save(&id, &session);
                        state.sessions.insert(id.clone(), session);
                        (id, offered)
                    };
                    log(format!("new session {id}"));
                    rest18::opened("new", &id);
                    let mut response = NewSessionResponse::new(id.clone());
                    if options.config_options {
                        response = response.config_options(offered);
                    }
                    if options.commands {
                        response = cmd_new_session(&state, &id, response);
                        responder.respond(response)?;
                        // Later, as real agents send them: after their
                        // session is answered, at a moment of their own.
                        let later = cx.clone();
                        return cx.spawn(async move {
                            tokio::time::sleep(announce_delay()).await;
                            cmd_announce(&later, &id)
                        });
                    }
                    responder.respond(response)
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: LoadSessionRequest, responder, cx| {
                    rest18::opened("load", &request.session_id.to_string());
                    mcp_seen("session/load", &request.mcp_servers);
                    if !options.load {
                        return responder.respond_with_error(Error::method_not_found());
                    }
                    // Replay is sent before the response, in wire order.
                    if replay(&state, &request.session_id, &request.cwd, &cx)? {
                        responder.respond(LoadSessionResponse::new())
                    } else {
                        responder.respond_with_error(unknown_session(&request.session_id))
                    }
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: ResumeSessionRequest, responder, _cx| {
                    rest18::opened("resume", &request.session_id.to_string());
                    mcp_seen("session/resume", &request.mcp_servers);
                    if !options.resume {
                        return responder.respond_with_error(Error::method_not_found());
                    }
                    let known = known(
                        &mut lock(&state),
                        &request.session_id.to_string(),
                        &request.cwd,
                    );
                    if known {
                        responder.respond(ResumeSessionResponse::new())
                    } else {
                        responder.respond_with_error(unknown_session(&request.session_id))
                    }
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: SetSessionConfigOptionRequest, responder, cx| {
                    if options.commands {
                        return cmd_set_option(&state, request, responder, cx);
                    }
                    if !options.config_options {
                        return responder.respond_with_error(Error::method_not_found());
                    }
                    let mut state = lock(&state);
                    let Some(session) = state.sessions.get_mut(&request.session_id.to_string())
                    else {
                        return responder.respond_with_error(unknown_session(&request.session_id));
                    };
                    let value = request
                        .value
                        .as_value_id()
                        .map(|v| v.to_string())
                        .unwrap_or_default();
                    let allowed: &[&str] = match request.config_id.to_string().as_str() {
                        "model" => &["fast", "smart"],
                        "mode" => &["ask", "code"],
                        _ => &[],
                    };
                    if !allowed.contains(&value.as_str()) {
                        return responder.respond_with_error(
                            Error::invalid_params().data(format!("bad value {value:?}")),
                        );
                    }
                    match request.config_id.to_string().as_str() {
                        "model" => session.model = value,
                        _ => session.mode = value,
                    }
                    responder.respond(SetSessionConfigOptionResponse::new(config_options(session)))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: agent_client_protocol::v1::schema::SetSessionModeRequest,
                            responder,
                            cx| {
                    if !options.commands {
                        return responder.respond_with_error(Error::method_not_found());
                    }
                    cmd_set_mode(&state, request, responder, cx)
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: PromptRequest, responder, cx| {
                    handle_prompt(&state, request, responder, cx)
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let state = state.clone();
                async move |request: CloseSessionRequest, responder, _cx| {
                    rest18::close(&state, request, responder)
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            {
                let state = state.clone();
                async move |notification: CancelNotification, _cx| {
                    let key = notification.session_id.to_string();
                    let state = lock(&state);
                    match state.sessions.get(&key).and_then(|s| s.running.as_ref()) {
                        Some((_, cancel)) => {
                            log(format!("{key}: cancel"));
                            cancel.notify_one();
                        }
                        None => log(format!(
                            "{key}: cancel with no running turn (a child session, in `nested`)"
                        )),
                    }
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(connection_end)
        .await;

    if let Err(error) = &result {
        log(format!("connection ended with error: {error:?}"));
    }
    // The connection has dropped its sender, so the writer drains what is
    // left, flushes and stops.
    if writer.join().is_err() {
        log("stdout writer panicked");
    }
    log("exiting");
    if result.is_err() {
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------------------
// Issue 18 (errors, content, sessions): scenarios of their own
// ---------------------------------------------------------------------------

mod rest18 {
    use std::collections::HashMap;
    use std::io::Write;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Mutex, OnceLock};

    use agent_client_protocol::Error;
    use agent_client_protocol::v1::Responder;
    use agent_client_protocol::v1::schema::{
        CloseSessionRequest, CloseSessionResponse, SessionCloseCapabilities, SessionId,
    };

    /// `--sessions FILE`: each session request, as `new|load|resume|close ID`.
    static SESSIONS: OnceLock<PathBuf> = OnceLock::new();
    /// `--double-on-reload`: as mistral-vibe, a load or resume of a session
    /// open in this process starts a second loop for it: every later
    /// update of it is sent once more.
    static DOUBLE: AtomicBool = AtomicBool::new(false);
    /// `--close`: offer `session/close`.
    static CLOSE: AtomicBool = AtomicBool::new(false);
    /// The sessions open in this process, and the extra copies of each
    /// update they send.
    static OPEN: Mutex<Option<HashMap<String, usize>>> = Mutex::new(None);

    pub(super) fn log_sessions_to(file: Option<String>) {
        if let Some(file) = file {
            let _ = SESSIONS.set(PathBuf::from(file));
        }
    }

    pub(super) fn double_on_reload() {
        DOUBLE.store(true, Ordering::SeqCst);
    }

    pub(super) fn offer_close() {
        CLOSE.store(true, Ordering::SeqCst);
    }

    pub(super) fn close_capability() -> Option<SessionCloseCapabilities> {
        CLOSE
            .load(Ordering::SeqCst)
            .then(SessionCloseCapabilities::new)
    }

    /// Appends `what ID` to the `--sessions` file.
    fn record(what: &str, id: &str) {
        let Some(file) = SESSIONS.get() else { return };
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .and_then(|mut f| f.write_all(format!("{what} {id}\n").as_bytes()));
        if let Err(e) = written {
            super::log(format!("--sessions: {}: {e}", file.display()));
        }
    }

    fn open() -> std::sync::MutexGuard<'static, Option<HashMap<String, usize>>> {
        OPEN.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Session `id` was asked for with `what` (new, load, resume).
    pub(super) fn opened(what: &str, id: &str) {
        record(what, id);
        let mut open = open();
        let open = open.get_or_insert_with(HashMap::new);
        match open.get_mut(id) {
            Some(copies) if what != "new" && DOUBLE.load(Ordering::SeqCst) => {
                super::log(format!("{id}: {what} of an open session: a second loop"));
                *copies += 1;
            }
            Some(_) => {}
            None => {
                open.insert(id.to_string(), 0);
            }
        }
    }

    /// How many extra times each update of session `id` is sent.
    pub(super) fn extra_copies(id: &SessionId) -> usize {
        open()
            .as_ref()
            .and_then(|o| o.get(&id.to_string()).copied())
            .unwrap_or(0)
    }

    /// `session/close`: recorded; the session is no longer open here (it
    /// can be loaded again).
    /// `session/close`: the session is closed, as real agents close it: a
    /// prompt for it finds no session any more, and a load or resume opens
    /// it again.
    pub(super) fn close(
        state: &super::Shared,
        request: CloseSessionRequest,
        responder: Responder<CloseSessionResponse>,
    ) -> Result<(), Error> {
        if !CLOSE.load(Ordering::SeqCst) {
            return responder.respond_with_error(Error::method_not_found());
        }
        let id = request.session_id.to_string();
        record("close", &id);
        if let Some(open) = open().as_mut() {
            open.remove(&id);
        }
        let mut state = super::lock(state);
        match state.sessions.remove(&id) {
            Some(session) => {
                state.closed.insert(id, session);
            }
            None => {
                drop(state);
                return responder.respond_with_error(super::unknown_session(&request.session_id));
            }
        }
        responder.respond(CloseSessionResponse::new())
    }
    use agent_client_protocol::v1::schema::{
        AudioContent, BlobResourceContents, ContentBlock, ContentChunk, EmbeddedResource,
        EmbeddedResourceResource, ImageContent, ResourceLink, SessionUpdate, TextResourceContents,
        ToolCall, ToolCallContent, ToolCallStatus,
    };

    /// Standard base64 of `bytes`.
    fn b64(bytes: &[u8]) -> String {
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let mut v = 0u32;
            for (i, &b) in chunk.iter().enumerate() {
                v |= u32::from(b) << (16 - 8 * i);
            }
            for i in 0..4 {
                out.push(if i <= chunk.len() {
                    A[(v >> (18 - 6 * i) & 63) as usize] as char
                } else {
                    '='
                });
            }
        }
        out
    }

    /// The start of a 640×480 PNG: its signature and header chunk.
    fn png() -> String {
        let mut v = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        v.extend(640u32.to_be_bytes());
        v.extend(480u32.to_be_bytes());
        v.extend([8, 6, 0, 0, 0, 0, 0, 0, 0]);
        b64(&v)
    }

    fn link() -> ContentBlock {
        ContentBlock::ResourceLink(
            ResourceLink::new("report.pdf", "file:///w/report.pdf").size(2150),
        )
    }

    /// `content`: a tool call whose content is an image and a resource
    /// link, then a message of every kind of block.
    pub(super) fn content(turn: &mut super::Turn) -> Result<(), Error> {
        let image = ContentBlock::Image(ImageContent::new(png(), "image/png"));
        turn.tool_call(
            ToolCall::new("m1", "Render the chart")
                .status(ToolCallStatus::Completed)
                .content(vec![
                    ToolCallContent::from(image.clone()),
                    ToolCallContent::from(link()),
                ]),
        )?;
        let blocks = [
            ContentBlock::from("Chart: ".to_string()),
            image,
            ContentBlock::from(" ".to_string()),
            ContentBlock::Audio(AudioContent::new(b64(b"RIFF....WAVE"), "audio/wav")),
            ContentBlock::from(" ".to_string()),
            link(),
            ContentBlock::from(" ".to_string()),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                    "the notes say hello",
                    "file:///w/notes.md",
                )),
            )),
            ContentBlock::from(" ".to_string()),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::BlobResourceContents(BlobResourceContents::new(
                    b64(&[7u8; 3000]),
                    "file:///w/data.bin",
                )),
            )),
        ];
        for block in blocks {
            turn.update(SessionUpdate::AgentMessageChunk(ContentChunk::new(block)))?;
        }
        Ok(())
    }

    /// The error a model an account cannot use gets: its detail is in `data`.
    pub(super) fn model_error() -> Error {
        Error::invalid_params().data("the model name 'gpt-9' is not available for this account")
    }
}

// ---------------------------------------------------------------------------
// Client terminals (`term …`)
// ---------------------------------------------------------------------------

mod mcp_client {
    //! The client side of `mcp TOOL ARGS`: the `quorum` MCP server this
    //! agent was given, started as given and spoken to with the official
    //! Rust SDK's client.

    use agent_client_protocol::v1::schema::McpServer;
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;

    /// Calls `tool` with `args`; the text it returned (an error result's
    /// text after `error: `).
    pub(super) async fn call(tool: &str, args: serde_json::Value) -> Result<String, String> {
        let servers = super::MCP_SERVERS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let Some(McpServer::Stdio(server)) = servers
            .into_iter()
            .find(|s| matches!(s, McpServer::Stdio(s) if s.name == "quorum"))
        else {
            return Err("no stdio MCP server named quorum was given".into());
        };
        let mut child = tokio::process::Command::new(&server.command)
            .args(&server.args)
            .envs(server.env.iter().map(|v| (&v.name, &v.value)))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", server.command.display()))?;
        let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let client = ().serve((stdout, stdin)).await.map_err(|e| format!("MCP initialize: {e}"))?;
        let arguments = match args {
            serde_json::Value::Object(map) => Some(map),
            _ => None,
        };
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = arguments;
        let result = client
            .call_tool(params)
            .await
            .map_err(|e| format!("tools/call: {e}"));
        let _ = client.cancel().await;
        let result = result?;
        let text: Vec<String> = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect();
        let text = text.join("\n");
        Ok(if result.is_error == Some(true) {
            format!("error: {text}")
        } else {
            text
        })
    }
}

mod terminals {
    //! `term run|hold|kill|unknown …`: commands run in the client's
    //! terminals (`terminal/create` and the rest), reported in the final
    //! message so tests can assert what the agent saw.

    use agent_client_protocol::Error;
    use agent_client_protocol::v1::schema::{
        CreateTerminalRequest, KillTerminalRequest, ReleaseTerminalRequest, StopReason, Terminal,
        TerminalExitStatus, TerminalOutputRequest, ToolCall, ToolCallContent, ToolCallStatus,
        ToolKind, WaitForTerminalExitRequest,
    };

    use super::{Turn, first_word};

    /// `--limit N`, `--cwd DIR`, `--env NAME=VALUE` (repeatable) and
    /// `--program PATH` before the command.
    struct Flags {
        limit: Option<u64>,
        cwd: Option<String>,
        env: Vec<(String, String)>,
        /// The terminal's `command` as the agent names it, the rest of the
        /// line its arguments split on spaces (instead of `sh -c LINE`).
        program: Option<String>,
    }

    fn flags(mut rest: &str) -> Result<(Flags, &str), Error> {
        let mut flags = Flags {
            limit: None,
            cwd: None,
            env: Vec::new(),
            program: None,
        };
        loop {
            let (word, after) = first_word(rest);
            match word {
                "--limit" => {
                    let (n, after) = first_word(after);
                    flags.limit = Some(n.parse().map_err(|_| {
                        Error::invalid_params().data(format!("term: bad --limit {n:?}"))
                    })?);
                    rest = after;
                }
                "--cwd" => {
                    let (dir, after) = first_word(after);
                    flags.cwd = Some(dir.to_string());
                    rest = after;
                }
                "--program" => {
                    let (program, after) = first_word(after);
                    flags.program = Some(program.to_string());
                    rest = after;
                }
                "--env" => {
                    let (pair, after) = first_word(after);
                    let (name, value) = pair.split_once('=').ok_or_else(|| {
                        Error::invalid_params().data(format!("term: bad --env {pair:?}"))
                    })?;
                    flags.env.push((name.to_string(), value.to_string()));
                    rest = after;
                }
                _ => return Ok((flags, rest)),
            }
        }
    }

    fn status(s: &TerminalExitStatus) -> String {
        format!(
            "exit: {}, signal: {}",
            s.exit_code.map_or("none".to_string(), |c| c.to_string()),
            s.signal.as_deref().unwrap_or("none")
        )
    }

    /// Creates a terminal for `sh -c command`, shown in tool call `tool_id`
    /// (kind execute, its content the terminal); its id, or the error's
    /// message.
    async fn create(
        turn: &mut Turn,
        tool_id: &'static str,
        flags: &Flags,
        command: &str,
    ) -> Result<Result<String, String>, Error> {
        let mut request = match &flags.program {
            Some(program) => CreateTerminalRequest::new(turn.session_id.clone(), program.as_str())
                .args(command.split_whitespace().map(String::from).collect()),
            None => CreateTerminalRequest::new(turn.session_id.clone(), "sh")
                .args(vec!["-c".to_string(), command.to_string()]),
        };
        request.output_byte_limit = flags.limit;
        request.cwd = flags.cwd.as_ref().map(std::path::PathBuf::from);
        request.env = std::iter::once(("FAKE_TERM".to_string(), "set".to_string()))
            .chain(flags.env.iter().cloned())
            .map(|(k, v)| agent_client_protocol::v1::schema::EnvVariable::new(k, v))
            .collect();
        let id = match turn.cx.send_request(request).block_task().await {
            Ok(created) => created.terminal_id,
            Err(e) => return Ok(Err(e.message)),
        };
        turn.tool_call(
            ToolCall::new(tool_id, format!("Run {command}"))
                .kind(ToolKind::Execute)
                .status(ToolCallStatus::InProgress)
                .raw_input(serde_json::json!({ "command": command }))
                .content(vec![ToolCallContent::Terminal(Terminal::new(id.clone()))]),
        )?;
        Ok(Ok(id.0.to_string()))
    }

    pub(super) async fn scenario(
        turn: &mut Turn,
        rest: &str,
        cancelled: impl std::future::Future<Output = ()>,
    ) -> Result<StopReason, Error> {
        if !super::TERMINAL.get().copied().unwrap_or(false) {
            turn.chunk("no terminals: the client did not advertise terminal")?;
            return Ok(StopReason::EndTurn);
        }
        let (what, rest) = first_word(rest);
        let (flags, command) = flags(rest)?;
        let session = turn.session_id.clone();
        match what {
            // Runs it to its end: waits, reads, releases.
            "run" => {
                let id = match create(turn, "tm1", &flags, command).await? {
                    Ok(id) => id,
                    Err(message) => {
                        turn.chunk(format!("refused: {message}"))?;
                        return Ok(StopReason::EndTurn);
                    }
                };
                let exit = turn
                    .cx
                    .send_request(WaitForTerminalExitRequest::new(session.clone(), id.clone()))
                    .block_task()
                    .await?;
                let out = turn
                    .cx
                    .send_request(TerminalOutputRequest::new(session.clone(), id.clone()))
                    .block_task()
                    .await?;
                turn.tool_status("tm1", ToolCallStatus::Completed)?;
                turn.cx
                    .send_request(ReleaseTerminalRequest::new(session, id))
                    .block_task()
                    .await?;
                turn.chunk(format!(
                    "{}, truncated: {}, exit status in output: {}\n{}",
                    status(&exit.exit_status),
                    out.truncated,
                    out.exit_status.is_some(),
                    out.output
                ))?;
            }
            // Two commands, each run to its end.
            "two" => {
                for (tool, cmd) in [("tm1", "echo one"), ("tm2", "echo two")] {
                    let Ok(id) = create(turn, tool, &flags, cmd).await? else {
                        turn.chunk("refused")?;
                        return Ok(StopReason::EndTurn);
                    };
                    turn.cx
                        .send_request(WaitForTerminalExitRequest::new(session.clone(), id.clone()))
                        .block_task()
                        .await?;
                    turn.tool_status(tool, ToolCallStatus::Completed)?;
                    turn.cx
                        .send_request(ReleaseTerminalRequest::new(session.clone(), id))
                        .block_task()
                        .await?;
                }
                turn.chunk("ran two")?;
            }
            // Starts it, reads its output until there is some, kills it,
            // waits, reads again, releases, and reads once more.
            "kill" => {
                let Ok(id) = create(turn, "tm1", &flags, command).await? else {
                    turn.chunk("refused")?;
                    return Ok(StopReason::EndTurn);
                };
                let mut before = String::new();
                for _ in 0..200 {
                    let out = turn
                        .cx
                        .send_request(TerminalOutputRequest::new(session.clone(), id.clone()))
                        .block_task()
                        .await?;
                    if !out.output.is_empty() {
                        before = out.output;
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                turn.cx
                    .send_request(KillTerminalRequest::new(session.clone(), id.clone()))
                    .block_task()
                    .await?;
                let exit = turn
                    .cx
                    .send_request(WaitForTerminalExitRequest::new(session.clone(), id.clone()))
                    .block_task()
                    .await?;
                let after = turn
                    .cx
                    .send_request(TerminalOutputRequest::new(session.clone(), id.clone()))
                    .block_task()
                    .await?;
                turn.tool_status("tm1", ToolCallStatus::Failed)?;
                turn.cx
                    .send_request(ReleaseTerminalRequest::new(session.clone(), id.clone()))
                    .block_task()
                    .await?;
                let released = match turn
                    .cx
                    .send_request(TerminalOutputRequest::new(session, id))
                    .block_task()
                    .await
                {
                    Ok(_) => "still readable".to_string(),
                    Err(e) => format!("error {}: {}", i32::from(e.code), e.message),
                };
                turn.chunk(format!(
                    "killed: {}\nbefore kill: {}\nafter kill: {}\nafter release: {released}",
                    status(&exit.exit_status),
                    before.trim_end(),
                    after.output.trim_end(),
                ))?;
            }
            // Starts it and leaves it running, then waits, saying nothing,
            // for the turn's cancel (30 s at most: then `held`).
            "hold" => {
                if create(turn, "tm1", &flags, command).await?.is_err() {
                    turn.chunk("refused")?;
                    return Ok(StopReason::EndTurn);
                }
                tokio::select! {
                    () = cancelled => return Ok(StopReason::Cancelled),
                    () = tokio::time::sleep(std::time::Duration::from_secs(30)) => {}
                }
                turn.chunk("held")?;
            }
            // Starts it and ends the turn at once, leaving it running
            // and unreleased (the client ends it with the turn).
            "leave" => {
                let Ok(id) = create(turn, "tm1", &flags, command).await? else {
                    turn.chunk("refused")?;
                    return Ok(StopReason::EndTurn);
                };
                turn.chunk(format!("left {id} running"))?;
            }
            // `ps ARG`: how many processes on the machine have an argument
            // exactly ARG (a marker such as the `987.5` of `sleep 987.5`).
            "ps" => {
                let arg = command.trim();
                let mut found = 0;
                for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
                    let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                        continue;
                    };
                    if cmdline.split(|&b| b == 0).any(|a| a == arg.as_bytes()) {
                        found += 1;
                    }
                }
                turn.chunk(format!("processes with {arg}: {found}"))?;
            }
            // Asks for a terminal for `sh -c CMD` in a session no turn
            // runs (`<session>-gone`), as an agent whose turn ended would.
            "stray" => {
                let request = CreateTerminalRequest::new(format!("{session}-gone"), "sh")
                    .args(vec!["-c".to_string(), command.to_string()]);
                match turn.cx.send_request(request).block_task().await {
                    Ok(created) => turn.chunk(format!("created {}", created.terminal_id))?,
                    Err(e) => turn.chunk(format!("refused: {}", e.message))?,
                }
            }
            // After its turn has ended (its answer sent), asks for a
            // command on the same session, as an agent that goes on working
            // would: what it got is written to `late-terminal.txt` in its
            // directory (the turn can say nothing any more).
            "late" => {
                let cx = turn.cx.clone();
                let command = command.to_string();
                turn.cx.spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                    let request = CreateTerminalRequest::new(session, "sh")
                        .args(vec!["-c".to_string(), command]);
                    let said = match cx.send_request(request).block_task().await {
                        Ok(created) => format!("created {}", created.terminal_id),
                        Err(e) => format!("refused: {}", e.message),
                    };
                    let _ = std::fs::write("late-terminal.txt", said);
                    Ok(())
                })?;
                turn.chunk("ending; a command comes later")?;
            }
            // Asks for a command and ends its turn at once, not waiting
            // for the answer: the request and the turn's end race in the
            // client. What it got is written to `race-terminal.txt`.
            "race" => {
                let request = CreateTerminalRequest::new(session, "sh")
                    .args(vec!["-c".to_string(), command.to_string()]);
                let pending = turn.cx.send_request(request);
                turn.cx.spawn(async move {
                    let said = match pending.block_task().await {
                        Ok(created) => format!("created {}", created.terminal_id),
                        Err(e) => format!("refused: {}", e.message),
                    };
                    let _ = std::fs::write("race-terminal.txt", said);
                    Ok(())
                })?;
            }
            // Asks for the output of a terminal that never was.
            "unknown" => {
                match turn
                    .cx
                    .send_request(TerminalOutputRequest::new(session, "term-nope"))
                    .block_task()
                    .await
                {
                    Ok(_) => turn.chunk("unknown terminal answered")?,
                    Err(e) => turn.chunk(format!("error {}: {}", i32::from(e.code), e.message))?,
                }
            }
            other => turn.chunk(format!("unknown term step: {other}"))?,
        }
        Ok(StopReason::EndTurn)
    }
}

/// The `findings a` review: red, two findings (`lib.rs:2`, `notes.txt:3`).
const FINDINGS_A: &str = "<!-- severity: red -->\n## Review\n\n\
<!-- finding: {\"file\": \"lib.rs\", \"line\": 2, \"severity\": \"red\", \"title\": \"added() is never called\"} -->\n\
Nothing calls it: remove it or call it.\n\n\
<!-- finding: {\"file\": \"notes.txt\", \"line\": 3, \"severity\": \"green\", \"title\": \"a typo in the notes\"} -->\n\
`teh` for `the`.\n";

/// The `findings b` review: yellow; the same place as `findings a`'s
/// first, a finding with a bad severity, one past its file's end, and a
/// body with a terminal escape.
const FINDINGS_B: &str = "<!-- severity: yellow -->\n## Review\n\n\
<!-- finding: {\"file\": \"lib.rs\", \"line\": 1, \"end_line\": 2, \"severity\": \"yellow\", \"title\": \"added() has no caller\"} -->\n\
Dead code \u{1b}[31mhere\u{1b}[0m.\n\n\
<!-- finding: {\"file\": \"lib.rs\", \"line\": 1, \"severity\": \"orange\", \"title\": \"not a severity\"} -->\n\
x\n\n\
<!-- finding: {\"file\": \"lib.rs\", \"line\": 99, \"severity\": \"red\", \"title\": \"past the end\"} -->\n\
y\n";
