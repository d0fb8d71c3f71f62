//! The chat's conductor: an ACP agent (`--model acp:NAME`) that answers
//! the person's messages in place of a chat model, handed quorum's tools
//! (`subagent`, `subagent_status`) as an MCP server named `quorum`.
//!
//! Its message chunks are the chat's text and its own tool calls the chat's
//! tool lines; a call it makes of quorum's tools is the box the dispatcher
//! draws for it (its own line for that call is left out, so nothing is
//! drawn twice). Its permission requests, usage and notices go as chat
//! activity; the person answers its requests as any agent's (quorum's own
//! tools are allowed without asking: each sub-agent asks for itself). Its
//! session id is recorded (`conductor_session`), and a continued session
//! reattaches it.

use crate::runtime::lock;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};

use crate::acp::client::Connection;
use crate::acp::registry::AgentSpec;
use crate::agent::{Elicit, PermissionAnswer, Permissions, TurnControl, TurnRequest, TurnSink};
use crate::confine::fsroot::Root;
use crate::event::{Activity, Event, NoticeLevel, Outcome, SessionKind, StopReason, ToolStatus};
use crate::llm::ToolCall;
use crate::model_loop::chat::{ChatSink, Conductor};
use crate::model_loop::{Sink, ToolError};
use crate::runtime::bus::Emitter;
use crate::runtime::cancel::cancelled;
use crate::runtime::supervisor::Supervisor;

/// The name of the MCP server that carries quorum's tools to a conductor.
pub const MCP_SERVER: &str = "quorum";

/// Where the person's answers to the conductor's permission requests go
/// while one of its turns runs (the engine's commands send them there).
pub type ChatAnswers = Arc<Mutex<Option<mpsc::UnboundedSender<PermissionAnswer>>>>;

/// The MCP server (`quorum`) that carries the session's tools to its
/// conductor: set by the front end that serves them (`serve`), read when
/// the conductor starts.
pub type HandedTools = Arc<Mutex<Option<crate::acp::mcp::McpServerSpec>>>;

/// Makes the conductor for an agent's name (`/model acp:NAME`), or says
/// why it cannot.
pub type Factory = Arc<dyn Fn(&str) -> Result<Box<dyn Conductor>, ConductorError> + Send + Sync>;

/// Why no conductor was made.
#[derive(Debug, thiserror::Error)]
pub enum ConductorError {
    #[error("the session has ended")]
    Ended,
    #[error(transparent)]
    Unknown(#[from] crate::acp::registry::UnknownAgent),
}

/// The conductor session a recorded conversation left for `agent`: the
/// last one it opened since the conversation last started over.
pub fn recorded_session(events: &[crate::event::Stamped], agent: &str) -> Option<String> {
    let mut session = None;
    for e in events {
        match &e.event {
            Event::ChatReset => session = None,
            Event::ConductorSession {
                agent: a,
                session_id,
                ..
            } if a == agent => session = Some(session_id.clone()),
            _ => {}
        }
    }
    session
}

/// An ACP agent as the chat.
pub struct AcpConductor {
    spec: AgentSpec,
    root: Root,
    supervisor: Supervisor,
    /// The policy its permission requests follow (its own, else the
    /// session's: the person in the TUI, `--approve` headless).
    policy: Permissions,
    /// Whether the session's own policy is `ask` (a person answers).
    person: bool,
    elicit: Elicit,
    emitter: Emitter,
    conn: Option<Arc<Connection>>,
    /// Its session: the one its next turn continues (none: a new one).
    session: Option<String>,
    answers: ChatAnswers,
    tools: HandedTools,
}

impl AcpConductor {
    /// `spec`'s agent as the chat, working in `root`, its sessions given
    /// `tools` (quorum's, over MCP, once a front end serves them) besides
    /// its configured MCP servers.
    pub fn new(
        spec: AgentSpec,
        tools: HandedTools,
        (root, supervisor, emitter): (Root, Supervisor, Emitter),
        (permissions, elicit): (Permissions, Elicit),
        answers: ChatAnswers,
    ) -> Self {
        let policy = spec.permissions.resolve(permissions);
        Self {
            spec,
            root,
            supervisor,
            policy,
            person: permissions == Permissions::Ask,
            elicit,
            emitter,
            conn: None,
            session: None,
            answers,
            tools,
        }
    }

    /// Its live connection, started (again) when it has none.
    async fn connect(
        &mut self,
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<Arc<Connection>, String> {
        let agent = self.spec.name.clone();
        match &self.conn {
            Some(conn) if conn.alive() => return Ok(conn.clone()),
            Some(conn) => self.emitter.emit(Event::Notice {
                level: NoticeLevel::Warning,
                text: format!("{agent} had exited ({}); starting it again", conn.death()),
            }),
            None => {}
        }
        // Its sessions get quorum's tools, as the server named `quorum`.
        let mut spec = self.spec.clone();
        spec.mcp_servers.retain(|s| s.name != MCP_SERVER);
        match lock(&self.tools).clone() {
            Some(tools) => spec.mcp_servers.push(tools),
            None => self.emitter.emit(Event::Notice {
                level: NoticeLevel::Warning,
                text: format!(
                    "{agent} is the chat, but quorum's tools are not served to it: it cannot call sub-agents"
                ),
            }),
        }
        let mut policy = spec.process_policy(false);
        // Sandboxed, it reaches quorum's tools through their socket alone.
        if let Some(policy) = &mut policy {
            policy
                .unix_sockets
                .extend(spec.mcp_servers.iter().filter_map(|s| s.unix_socket()));
        }
        let start = Connection::start(&spec, &self.root, &self.supervisor, policy.as_ref());
        let conn = tokio::select! {
            started = start => started.map_err(|e| e.to_string())?,
            _ = cancelled(cancel) => return Err(format!("{agent}: cancelled while starting")),
        };
        self.conn = Some(conn.clone());
        Ok(conn)
    }
}

impl Conductor for AcpConductor {
    fn name(&self) -> String {
        format!("acp:{}", self.spec.name)
    }

    fn turn<'a>(
        &'a mut self,
        prompt: String,
        sink: &'a ChatSink,
        mut cancel: watch::Receiver<bool>,
    ) -> BoxFuture<'a, Result<Outcome, String>> {
        async move {
            let conn = self.connect(&mut cancel).await?;
            let (answers_tx, answers) = mpsc::unbounded_channel();
            *lock(&self.answers) = Some(answers_tx);
            let (_kill, kill) = watch::channel(false);
            let (_children, cancel_children) = mpsc::unbounded_channel();
            let (_questions, elicitations) = mpsc::unbounded_channel();
            let mut control = TurnControl {
                cancel,
                kill,
                answers,
                cancel_children,
                elicitations,
            };
            let request = TurnRequest {
                prompt: &prompt,
                root: self.root.path(),
                resume: self.session.as_deref(),
                policy: self.policy,
                model: self.spec.model.as_deref(),
                mode: self.spec.mode.as_deref(),
                exclude: None,
                // Its questions have no box to open in: declined, and said.
                elicit: match self.elicit {
                    Elicit::Ask => Elicit::Decline,
                    other => other,
                },
                trusted_mcp: Some(MCP_SERVER),
                person: self.person,
            };
            let lines = Lines::new(sink, &self.spec.name);
            let outcome = conn.turn(request, &lines, &mut control).await;
            *lock(&self.answers) = None;
            lines.end();
            if outcome.stop_reason.answered()
                && let Some(id) = &outcome.session_id
            {
                self.session = Some(id.clone());
            }
            match outcome.stop_reason {
                StopReason::Error => Err(format!("{}: {}", self.spec.name, outcome.output)),
                _ => Ok(outcome),
            }
        }
        .boxed()
    }

    fn reset(&mut self) {
        self.session = None;
    }

    fn reattach(&mut self, session: String) {
        self.session = Some(session);
    }
}

/// The conductor's turn, as the chat's events: its text, its tool lines
/// (a call of quorum's own tools is its box instead), and the rest as chat
/// activity.
struct Lines<'a> {
    chat: &'a ChatSink,
    agent: &'a str,
    state: Mutex<LineState>,
}

#[derive(Default)]
struct LineState {
    /// Text was streamed since the last tool line.
    texting: bool,
    /// Its tool calls: shown as lines (their name), or hidden (quorum's
    /// own, whose boxes show them); gone once finished.
    tools: std::collections::HashMap<String, Option<ToolCall>>,
}

impl<'a> Lines<'a> {
    fn new(chat: &'a ChatSink, agent: &'a str) -> Self {
        Self {
            chat,
            agent,
            state: Mutex::default(),
        }
    }

    fn emit(&self, event: Event) {
        self.chat.emitter.emit(event);
    }

    /// The turn ended: its last message too.
    fn end(&self) {
        if std::mem::take(&mut lock(&self.state).texting) {
            self.chat.message_end();
        }
    }

    /// A tool call seen for the first time (from its call or an update).
    fn started(&self, id: &str, title: &str, detail: &crate::event::ToolDetail) {
        let mut state = lock(&self.state);
        if state.tools.contains_key(id) {
            return;
        }
        if std::mem::take(&mut state.texting) {
            self.chat.message_end();
        }
        let input = detail
            .raw_input
            .as_ref()
            .map(|v| v.to_string())
            .unwrap_or_default();
        if crate::acp::mcp::names_mcp_tool(title, &input, MCP_SERVER) {
            state.tools.insert(id.to_string(), None);
            return;
        }
        let call = ToolCall {
            id: id.to_string(),
            name: title.to_string(),
            arguments: if input.is_empty() { "{}".into() } else { input },
        };
        self.chat.tool_started(&call);
        state.tools.insert(id.to_string(), Some(call));
    }

    /// A tool call ended: its line says how.
    fn finished(&self, id: &str, status: ToolStatus, detail: &crate::event::ToolDetail) {
        let shown = lock(&self.state).tools.get_mut(id).and_then(Option::take);
        let Some(call) = shown else { return };
        let said = detail
            .content
            .iter()
            .find_map(|c| match c {
                crate::event::ToolContent::Text { text } => Some(text.clone()),
                _ => None,
            })
            .or_else(|| detail.raw_output.as_ref().map(|v| v.to_string()))
            .unwrap_or_default();
        let result = match status {
            ToolStatus::Failed => Err(ToolError::Failed(if said.is_empty() {
                "failed".into()
            } else {
                said
            })),
            _ => Ok(said),
        };
        self.chat.tool_finished(&call, &result);
    }
}

impl TurnSink for Lines<'_> {
    fn activity(&self, activity: Activity) {
        match activity {
            Activity::MessageChunk { text } => {
                lock(&self.state).texting = true;
                self.chat.text(&text);
            }
            Activity::ToolCall {
                id,
                title,
                status,
                detail,
            } => {
                self.started(&id, &title, &detail);
                if matches!(status, ToolStatus::Completed | ToolStatus::Failed) {
                    self.finished(&id, status, &detail);
                }
            }
            Activity::ToolCallUpdate {
                id,
                title,
                status,
                detail,
            } => {
                if let Some(title) = &title {
                    self.started(&id, title, &detail);
                }
                if let Some(status @ (ToolStatus::Completed | ToolStatus::Failed)) = status {
                    self.finished(&id, status, &detail);
                }
            }
            // A permission for a call of quorum's tools (allowed without
            // asking) is its box's business, as its line is.
            Activity::PermissionRequest { ref id, .. }
            | Activity::PermissionResolved { ref id, .. }
                if matches!(lock(&self.state).tools.get(id), Some(None)) => {}
            activity @ (Activity::PermissionRequest { .. }
            | Activity::PermissionResolved { .. }
            | Activity::Usage { .. }
            | Activity::Plan { .. }) => self.emit(Event::ChatActivity { activity }),
            Activity::Notice { text } => self.notice(&text),
            _ => {}
        }
    }

    fn session(&self, kind: SessionKind, session_id: &str) {
        self.emit(Event::ConductorSession {
            agent: self.agent.to_string(),
            session: kind,
            session_id: session_id.to_string(),
        });
    }

    fn notice(&self, text: &str) {
        self.emit(Event::Notice {
            level: NoticeLevel::Info,
            text: text.to_string(),
        });
    }
}
