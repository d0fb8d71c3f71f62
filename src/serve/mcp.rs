//! quorum's tools over MCP: `subagent` and `subagent_status`, with the
//! names, descriptions, schemas and replies the chat model gets, because
//! they are the chat's own tool ([`SubagentTool`]) on the session's
//! dispatcher. A failed call is a tool result with `isError: true` and the
//! text the chat model would read (`error: ...`); an unknown tool is a
//! JSON-RPC error naming the two there are.
//!
//! Hosts time tool calls out (codex after 60 s), and a sub-agent's turn
//! takes as long as it takes. So a `subagent` call still running after
//! `sync_seconds` returns its task ids instead and goes on in the
//! background ([`Dispatcher::detach`]); `subagent_status` waits at most as
//! long. While a call runs, a request that carried a `progressToken` gets
//! a progress notification every few seconds, with what its agent did
//! last.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt};
use serde::Serialize;
use tokio::sync::watch;

use crate::engine::Session;
use crate::event::{Severity, StopReason};
use crate::subagent::dispatch::Dispatcher;
use crate::subagent::dispatch::detach::{Detachable, Detached, DetachedCall};
use crate::subagent::tool::{SUBAGENT, SUBAGENT_STATUS, SubagentTool};

/// How long a `subagent` call runs before it goes on in the background,
/// unless `[mcp] sync_seconds` says otherwise.
pub const SYNC_SECONDS: u64 = 50;
/// How often a running call's progress is told at least (with a
/// `progressToken`).
const PROGRESS_EVERY: Duration = Duration::from_secs(3);
/// How often what a running call's agents do is looked at, to tell it.
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// How the server answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpOptions {
    /// A `subagent` call still running after this returns its task ids
    /// and goes on in the background; `subagent_status` waits no longer.
    pub sync: Duration,
    /// How often a running call's progress is told.
    pub progress_every: Duration,
    /// Background tasks' reports reach the caller by themselves (a
    /// conductor's chat is told when a task ends); otherwise the caller
    /// asks `subagent_status` for them.
    pub reports_delivered: bool,
}

impl Default for McpOptions {
    fn default() -> Self {
        Self {
            sync: Duration::from_secs(SYNC_SECONDS),
            progress_every: PROGRESS_EVERY,
            reports_delivered: false,
        }
    }
}

impl McpOptions {
    /// The options the config file's `[mcp]` gives (the defaults without
    /// it).
    pub fn from_config(file: &crate::config::ConfigFile) -> Self {
        let seconds = file.mcp.as_ref().and_then(|m| m.sync_seconds);
        Self {
            sync: Duration::from_secs(seconds.unwrap_or(SYNC_SECONDS)),
            ..Self::default()
        }
    }
}

/// Why serving one MCP client ended in error.
#[derive(Debug, thiserror::Error)]
pub enum McpServeError {
    #[error("MCP: the client's initialize failed")]
    Initialize(#[source] Box<rmcp::service::ServerInitializeError>),
    #[error("MCP: the server stopped")]
    Stopped(#[source] tokio::task::JoinError),
}

/// The MCP server of one session: its tools on its dispatcher.
#[derive(Clone)]
pub struct QuorumMcp {
    tool: SubagentTool,
    options: Arc<McpOptions>,
}

impl QuorumMcp {
    /// The server on `dispatcher`'s session, for calls made at depth 0
    /// (as the main chat makes them).
    pub fn new(dispatcher: Arc<Dispatcher>, options: McpOptions) -> Self {
        Self {
            tool: SubagentTool::new(dispatcher, 0),
            options: Arc::new(options),
        }
    }

    /// The server on `session`.
    pub fn for_session(session: &Session, options: McpOptions) -> Self {
        Self::new(session.dispatcher().clone(), options)
    }

    pub fn options(&self) -> &McpOptions {
        &self.options
    }

    /// The tools, as MCP lists them: the chat's own specs.
    pub fn tools(&self) -> Vec<Tool> {
        self.tool
            .specs()
            .into_iter()
            .map(|spec| {
                let schema = match spec.parameters {
                    serde_json::Value::Object(map) => map,
                    _ => JsonObject::new(),
                };
                Tool::new(spec.name, spec.description, Arc::new(schema))
            })
            .collect()
    }

    /// Serves one MCP client on `transport` until it goes (or the
    /// session's server is dropped).
    pub async fn serve_on<T, E, A>(self, transport: T) -> Result<(), McpServeError>
    where
        T: rmcp::transport::IntoTransport<RoleServer, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let running = ServiceExt::serve(self, transport)
            .await
            .map_err(|e| McpServeError::Initialize(Box::new(e)))?;
        running.waiting().await.map_err(McpServeError::Stopped)?;
        Ok(())
    }

    /// One tool call: the reply's text, or the text of why it failed
    /// (`Err`, as the chat model reads it: `error: ...`). `name` must be
    /// one of the two tools. `progress` is told (ms since the call started,
    /// and a line) what a `subagent` call's agents do while it runs; `cancel`
    /// turning true cancels it (until it goes on in the background).
    pub async fn call(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        cancel: watch::Receiver<bool>,
        progress: Option<&(dyn Fn(u64, String) + Sync)>,
    ) -> Result<String, String> {
        // What a status call waits for is told by its answer, not as progress.
        let progress = progress.filter(|_| name == SUBAGENT);
        let mut arguments = arguments.map(serde_json::Value::Object);
        if name == SUBAGENT_STATUS {
            // A host would time out a longer wait: it waits no longer
            // than a call does before going on in the background.
            if let Some(serde_json::Value::Object(map)) = &mut arguments
                && let Some(wait) = map.get("wait_seconds").and_then(|w| w.as_u64())
            {
                let cap = self.options.sync.as_secs().max(1);
                if wait > cap {
                    map.insert("wait_seconds".into(), cap.into());
                }
            }
        }
        let arguments = arguments.map_or_else(|| "{}".to_string(), |a| a.to_string());
        let detach = Detachable::new();
        let tool = self.tool.clone();
        let call = {
            let (name, detach) = (name.to_string(), detach.clone());
            tokio::spawn(async move {
                tool.call_detachable(&name, &arguments, cancel, Some(&detach))
                    .await
                    .map_err(|e| format!("error: {e}"))
            })
        };
        // Dropped (the host went), the call is cancelled by its `cancel`;
        // sent to the background, it goes on without this.
        let mut call = AbortOnDrop(Some(call));
        let started = Instant::now();
        let mut sync_at = (name == SUBAGENT).then(|| started + self.options.sync);
        // Progress is told when what the agents do changes, and every
        // `progress_every` at least (a host that waits sees life).
        let mut ticks = tokio::time::interval(LOOK_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut told: Option<(Instant, String)> = None;
        loop {
            tokio::select! {
                done = call.join() => {
                    return match done {
                        Ok(result) => result,
                        Err(e) => Err(format!("error: the call failed: {e}")),
                    };
                }
                _ = sleep_until(sync_at), if sync_at.is_some() => {
                    match self.tool.dispatcher().detach(&detach) {
                        Some(detached) => {
                            call.forget();
                            return Ok(self.detached_reply(&detached, started.elapsed()));
                        }
                        // Nothing opened yet: ask again in a moment.
                        None => sync_at = Some(Instant::now() + Duration::from_millis(200)),
                    }
                }
                _ = ticks.tick(), if progress.is_some() => {
                    let now = self.activity(&detach);
                    let due = match &told {
                        None => true,
                        Some((at, said)) => {
                            *said != now || at.elapsed() >= self.options.progress_every
                        }
                    };
                    if due && let Some(tell) = progress {
                        tell(started.elapsed().as_millis() as u64, now.clone());
                        told = Some((Instant::now(), now));
                    }
                }
            }
        }
    }

    /// What the calls of `detach` did last, for a progress notification.
    fn activity(&self, detach: &Detachable) -> String {
        let calls = detach.call_ids();
        let lines: Vec<String> = self.tool.dispatcher().emitter().board(|b| {
            calls
                .iter()
                .filter_map(|c| b.call(c))
                .filter(|e| e.summary.state.active())
                .map(|e| match &e.summary.last_activity {
                    Some(last) => format!("{}: {last}", e.agent),
                    None => format!("{}: working", e.agent),
                })
                .collect()
        });
        if lines.is_empty() {
            "starting".into()
        } else {
            lines.join("; ")
        }
    }

    /// The reply of a call that went on in the background: its task
    /// ids, what each is doing, and how its report comes.
    fn detached_reply(&self, detached: &Detached, after: Duration) -> String {
        let note = self.detached_note(detached, after);
        match (&detached.batch_id, detached.calls.as_slice()) {
            (
                None,
                [
                    DetachedCall::Background {
                        agent,
                        call_id,
                        task_id,
                        ..
                    },
                ],
            ) => serde_json::to_string(&Started {
                task_id,
                status: "running",
                agent,
                last_activity: self.last_activity(call_id),
                note,
            })
            .expect("a reply is JSON"),
            _ => {
                let tasks = detached.calls.iter().map(|c| self.entry(c)).collect();
                serde_json::to_string(&BatchStarted {
                    batch_id: detached.batch_id.as_deref(),
                    tasks,
                    note,
                })
                .expect("a reply is JSON")
            }
        }
    }

    /// What a call's agent did last, as its summary says.
    fn last_activity(&self, call_id: &str) -> Option<String> {
        self.tool.dispatcher().emitter().board(|b| {
            b.call(call_id)
                .and_then(|e| e.summary.last_activity.clone())
        })
    }

    /// The note of a detached reply: which tasks go on in the background
    /// after `after`, and how their reports come.
    fn detached_note(&self, detached: &Detached, after: Duration) -> String {
        let tasks: Vec<&str> = detached
            .calls
            .iter()
            .filter_map(|c| match c {
                DetachedCall::Background { task_id, .. } => Some(task_id.as_str()),
                _ => None,
            })
            .collect();
        let wait = self.options.sync.as_secs().max(1);
        let how = |ids: &str| {
            let ask = format!(
                "call subagent_status with task_id {ids} (wait_seconds up to {wait} waits for it \
                 to finish) for its report"
            );
            if self.options.reports_delivered {
                format!("its report will be delivered to you when it is done; or {ask}")
            } else {
                ask
            }
        };
        let seconds = after.as_secs();
        match tasks.as_slice() {
            [] => "every task had ended already".to_string(),
            [one] => format!(
                "still running after {seconds} s, so it goes on in the background as task {one}; {}",
                how(&format!("\"{one}\""))
            ),
            many => format!(
                "still running after {seconds} s, so {} go on in the background as tasks {}; {}",
                many.len(),
                many.join(", "),
                how("(each of them)")
            ),
        }
    }

    /// One task of a detached batch: its task id and what it does, or its
    /// outcome when it had ended already, or why it could not start.
    fn entry(&self, call: &DetachedCall) -> Entry {
        match call {
            DetachedCall::Background {
                index,
                agent,
                call_id,
                task_id,
            } => Entry {
                task: *index,
                agent: agent.clone(),
                task_id: Some(task_id.clone()),
                status: Some("running"),
                last_activity: self.last_activity(call_id),
                ..Entry::default()
            },
            DetachedCall::Done {
                index,
                agent,
                outcome,
            } => Entry {
                task: *index,
                agent: agent.clone(),
                output: Some(outcome.output.clone()),
                stop_reason: Some(outcome.stop_reason),
                severity: outcome.severity,
                ..Entry::default()
            },
            DetachedCall::Failed {
                index,
                agent,
                error,
            } => Entry {
                task: *index,
                agent: agent.clone(),
                error: Some(error.clone()),
                ..Entry::default()
            },
        }
    }
}

/// A call gone on in the background.
#[derive(Serialize)]
struct Started<'a> {
    task_id: &'a str,
    status: &'static str,
    agent: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_activity: Option<String>,
    note: String,
}

/// A batch gone on in the background: each task's id, or its outcome when
/// it had ended already, or why it could not start.
#[derive(Serialize)]
struct BatchStarted<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    batch_id: Option<&'a str>,
    tasks: Vec<Entry>,
    note: String,
}

#[derive(Serialize, Default)]
struct Entry {
    task: usize,
    agent: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    task_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_activity: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stop_reason: Option<StopReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    severity: Option<Severity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// A spawned call, aborted when dropped unless forgotten.
struct AbortOnDrop<T>(Option<tokio::task::JoinHandle<T>>);

impl<T> AbortOnDrop<T> {
    async fn join(&mut self) -> Result<T, tokio::task::JoinError> {
        match &mut self.0 {
            Some(handle) => handle.await,
            None => std::future::pending().await,
        }
    }

    /// It goes on by itself.
    fn forget(&mut self) {
        self.0 = None;
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            handle.abort();
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

impl ServerHandler for QuorumMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("quorum", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "quorum runs coding sub-agents (ACP agents such as claude, codex, gemini, \
                 opencode) for you: `subagent` sends one a task, or a batch of them, and \
                 returns its final report; `subagent_status` tells a background task's state \
                 and report. Each call is drawn as a box in the session quorum records \
                 (`quorum watch` shows it live).",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if name != SUBAGENT && name != SUBAGENT_STATUS {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool {name:?}: quorum's tools are {SUBAGENT} and {SUBAGENT_STATUS}"
                ),
                None,
            ));
        }
        // The host cancels the request (or goes): the call is cancelled.
        let (cancel_tx, cancel) = watch::channel(false);
        let ct = context.ct.clone();
        let watcher = tokio::spawn(async move {
            ct.cancelled().await;
            let _ = cancel_tx.send(true);
        });
        let peer = context.peer.clone();
        let token = context.meta.get_progress_token();
        let tell = token.map(|token| {
            move |ms: u64, message: String| {
                let peer = peer.clone();
                // The progress is the time the call has run, in seconds:
                // it only grows, as MCP asks.
                let param = ProgressNotificationParam::new(token.clone(), ms as f64 / 1000.0)
                    .with_message(message);
                tokio::spawn(async move {
                    let _ = peer.notify_progress(param).await;
                });
            }
        });
        let result = self
            .call(
                &name,
                request.arguments,
                cancel,
                tell.as_ref().map(|t| t as &(dyn Fn(u64, String) + Sync)),
            )
            .await;
        watcher.abort();
        Ok(match result {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(text) => CallToolResult::error(vec![ContentBlock::text(text)]),
        }
        .into())
    }
}
