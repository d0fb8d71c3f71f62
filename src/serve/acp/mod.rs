//! `quorum acp`: quorum itself as an ACP agent, for the editors and clients
//! that host agents (Zed, Toad, acpx, JetBrains, Neovim's plugins).
//!
//! Each ACP session is one quorum session (the engine's [`Session`], built
//! from a [`SessionConfig`] as every front end builds it, in the directory
//! the host names): recorded like any other, so `quorum sessions` lists it,
//! `quorum --resume ID` and `quorum watch ID` open it, and the host loads it
//! again after a restart by its id (the transcript's name). Its chat is the
//! configured one (a model, or an ACP conductor); `@NAME message` reaches an
//! agent directly. The host sees the sub-agents ([`translate`]), and is
//! asked what they ask ([`host`]).
//!
//! [`Session`]: crate::engine::Session

mod host;
mod live;
pub mod translate;
mod wire;

use crate::runtime::lock;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, CloseSessionRequest, CloseSessionResponse, ContentBlock,
    EmbeddedResourceResource, Implementation, InitializeRequest, InitializeResponse,
    ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, LoadSessionResponse,
    McpCapabilities, McpServer, NewSessionRequest, NewSessionResponse, PromptCapabilities,
    PromptRequest, PromptResponse, ResumeSessionRequest, ResumeSessionResponse,
    SessionCapabilities, SessionCloseCapabilities, SessionInfo, SessionListCapabilities,
    SessionResumeCapabilities,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ConnectTo, Error, ErrorCode};

pub use live::{HostCaps, NO_CHAT};
pub use wire::stdio;

use crate::acp::mcp::McpServerSpec;
use crate::engine::{Session, SessionConfig};
use crate::event::StopReason;
use live::{Live, PromptError};

/// What a new ACP session asks of the front end that makes sessions.
pub struct Opening {
    /// The session directory the host named.
    pub cwd: PathBuf,
    /// The recorded session to go on with (`session/load`, `resume`).
    pub resume: Option<PathBuf>,
    /// The host answers agents' questions (it offers elicitation).
    pub ask_questions: bool,
}

/// Makes a session's config (as `quorum acp`'s options and the config
/// file say), or says why it cannot.
pub type Factory =
    Arc<dyn Fn(&Opening) -> Result<SessionConfig, crate::engine::SetupError> + Send + Sync>;

/// How `quorum acp` serves.
pub struct AcpOptions {
    pub factory: Factory,
    /// The config file, read once (for the conductor's tools).
    pub config: Arc<crate::config::ConfigFile>,
    /// The host's MCP servers go to every sub-agent too, not only the
    /// chat's conductor (`[acp] share_mcp_servers = true`).
    pub share_mcp: bool,
}

impl AcpOptions {
    /// `[acp] share_mcp_servers` of the config file (default false).
    pub fn share(file: &crate::config::ConfigFile) -> bool {
        file.acp
            .as_ref()
            .and_then(|a| a.share_mcp_servers)
            .unwrap_or(false)
    }
}

/// quorum as an ACP agent: its sessions, for one host connection.
pub struct AcpServer {
    options: AcpOptions,
    caps: Mutex<HostCaps>,
    sessions: Mutex<HashMap<String, Arc<Live>>>,
    next: AtomicU64,
    /// A spending cap stopped work in a session of this connection (one
    /// closed since too): `quorum acp` exits 4.
    budget_stopped: std::sync::atomic::AtomicBool,
}

/// The directory a host names for a session: as given when absolute. ACP
/// asks for an absolute path, but not every client sends one (the ACP Rust
/// SDK's own `yopo` sends `.`): a relative one is read against quorum's
/// own working directory, with a debug line, rather than refused.
fn session_dir(cwd: &Path) -> Result<PathBuf, Error> {
    if cwd.is_absolute() {
        return Ok(cwd.to_path_buf());
    }
    let here = std::env::current_dir().map_err(|e| {
        Error::new(
            ErrorCode::INTERNAL_ERROR,
            format!(
                "cwd {} is relative, and quorum's own working directory cannot be read: {e}",
                cwd.display()
            ),
        )
    })?;
    // `.` parts dropped (`/w/.` is `/w`); `..` is left to the system.
    let dir: PathBuf = here.join(cwd).components().collect();
    tracing::debug!(
        "quorum acp: cwd {} is relative: read as {}",
        cwd.display(),
        dir.display()
    );
    Ok(dir)
}

fn unknown_session(id: &str) -> Error {
    Error::new(
        ErrorCode::RESOURCE_NOT_FOUND,
        format!(
            "unknown session {id}: no quorum session of that id is open on this connection \
             (session/load opens a recorded one; session/list lists them)"
        ),
    )
    .data(serde_json::json!({ "sessionId": id }))
}

impl AcpServer {
    pub fn new(options: AcpOptions) -> Arc<Self> {
        Arc::new(Self {
            options,
            caps: Mutex::default(),
            sessions: Mutex::default(),
            next: AtomicU64::new(1),
            budget_stopped: Default::default(),
        })
    }

    fn get(&self, id: &str) -> Option<Arc<Live>> {
        lock(&self.sessions).get(id).cloned()
    }

    /// Serves one host on `transport` until it goes.
    pub async fn serve(
        self: &Arc<Self>,
        transport: impl ConnectTo<Agent> + 'static,
    ) -> Result<(), Error> {
        let (s1, s2, s3, s4, s5, s6, s7, s8) = (
            self.clone(),
            self.clone(),
            self.clone(),
            self.clone(),
            self.clone(),
            self.clone(),
            self.clone(),
            self.clone(),
        );
        Agent
            .v1()
            .name("quorum")
            .on_receive_request(
                async move |request: InitializeRequest, responder, _cx| {
                    responder.respond(s1.initialize(&request))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: NewSessionRequest, responder, cx| {
                    s2.on_new(request, responder, &cx)
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: LoadSessionRequest, responder, cx| {
                    s3.on_load(request, responder, &cx)
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: ResumeSessionRequest, responder, cx| {
                    s4.on_resume(request, responder, &cx)
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: ListSessionsRequest, responder, _cx| match s5.list(&request) {
                    Ok(response) => responder.respond(response),
                    Err(e) => responder.respond_with_error(e),
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: PromptRequest, responder, _cx| {
                    s6.on_prompt(request, responder)
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: CloseSessionRequest, responder, _cx| {
                    s7.on_close(request, responder)
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_notification(
                async move |notification: CancelNotification, _cx| {
                    s8.cancel(&notification.session_id.0);
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_to(transport)
            .await
    }

    /// `session/new`: a session opened, and its events sent from then on.
    fn on_new(
        &self,
        request: NewSessionRequest,
        responder: Responder<NewSessionResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), Error> {
        match self.open(&request.cwd, None, &request.mcp_servers, cx, false) {
            Ok(live) => {
                responder.respond(NewSessionResponse::new(live.id.clone()))?;
                live.go(cx);
                Ok(())
            }
            Err(e) => responder.respond_with_error(e),
        }
    }

    /// `session/load`: a recorded session, its history told again.
    fn on_load(
        &self,
        request: LoadSessionRequest,
        responder: Responder<LoadSessionResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let id = request.session_id.0.to_string();
        match self.reopen(&id, &request.cwd, &request.mcp_servers, cx, true) {
            Ok(live) => {
                responder.respond(LoadSessionResponse::new())?;
                live.go(cx);
                Ok(())
            }
            Err(e) => responder.respond_with_error(e),
        }
    }

    /// `session/resume`: a recorded session, gone on with.
    fn on_resume(
        &self,
        request: ResumeSessionRequest,
        responder: Responder<ResumeSessionResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let id = request.session_id.0.to_string();
        match self.reopen(&id, &request.cwd, &request.mcp_servers, cx, false) {
            Ok(live) => {
                responder.respond(ResumeSessionResponse::new())?;
                live.go(cx);
                Ok(())
            }
            Err(e) => responder.respond_with_error(e),
        }
    }

    /// `session/prompt`: one at a time per session, answered from a task
    /// of its own once the chat's turn ends.
    fn on_prompt(
        &self,
        request: PromptRequest,
        responder: Responder<PromptResponse>,
    ) -> Result<(), Error> {
        let id = request.session_id.0.to_string();
        let live = match self.prompt_session(&id) {
            Ok(live) => live,
            Err(e) => return responder.respond_with_error(e),
        };
        let text = match prompt_text(&request.prompt) {
            Ok(text) => text,
            Err(e) => return responder.respond_with_error(e),
        };
        if !live.begin() {
            return responder.respond_with_error(Error::new(
                ErrorCode::INVALID_REQUEST,
                format!(
                    "session {id} is still answering a prompt: one prompt at a time \
                     (wait for its answer, or send session/cancel)"
                ),
            ));
        }
        tokio::spawn(async move {
            let answer = match live.prompt(text).await {
                Ok(stop) => responder.respond(PromptResponse::new(acp_stop(stop))),
                Err(PromptError::Failed(why)) => responder.respond_with_error(Error::new(
                    ErrorCode::INTERNAL_ERROR,
                    format!("the chat's turn failed: {why}"),
                )),
            };
            if let Err(e) = answer {
                tracing::debug!("quorum acp: a prompt's answer was not sent: {e:?}");
            }
        });
        Ok(())
    }

    /// `session/close`: the session ends, answered once its agents had a
    /// moment to end (not in the dispatch loop).
    fn on_close(
        &self,
        request: CloseSessionRequest,
        responder: Responder<CloseSessionResponse>,
    ) -> Result<(), Error> {
        let id = request.session_id.0.to_string();
        let Some(live) = lock(&self.sessions).remove(&id) else {
            return responder.respond_with_error(unknown_session(&id));
        };
        self.note_budget(&live);
        // Its agents get a moment to end: not in the dispatch loop.
        tokio::spawn(async move {
            live.close().await;
            let _ = responder.respond(CloseSessionResponse::new());
        });
        Ok(())
    }

    fn initialize(&self, request: &InitializeRequest) -> InitializeResponse {
        let client = &request.client_capabilities;
        let elicitation = client.elicitation.as_ref();
        *lock(&self.caps) = HostCaps {
            children: client.subagents.is_some(),
            forms: elicitation.is_some_and(|e| e.form.is_some()),
            urls: elicitation.is_some_and(|e| e.url.is_some()),
            files: client.fs.read_text_file && client.fs.write_text_file,
        };
        let capabilities = AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(
                PromptCapabilities::new()
                    .embedded_context(true)
                    .image(false)
                    .audio(false),
            )
            .mcp_capabilities(McpCapabilities::new().http(true).sse(true))
            .session_capabilities(
                SessionCapabilities::new()
                    .list(SessionListCapabilities::new())
                    .resume(SessionResumeCapabilities::new())
                    .close(SessionCloseCapabilities::new()),
            );
        InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(capabilities)
            .agent_info(Implementation::new("quorum", env!("CARGO_PKG_VERSION")).title("quorum"))
    }

    /// Opens a session in `cwd` (a recorded one with `resume`; a relative
    /// `cwd` read as [`session_dir`] reads it).
    fn open(
        &self,
        cwd: &Path,
        resume: Option<PathBuf>,
        servers: &[McpServer],
        cx: &ConnectionTo<Client>,
        replay: bool,
    ) -> Result<Arc<Live>, Error> {
        let cwd = &session_dir(cwd)?;
        let caps = *lock(&self.caps);
        let opening = Opening {
            cwd: cwd.to_path_buf(),
            resume: resume.clone(),
            ask_questions: caps.forms || caps.urls,
        };
        let cannot = |e: &(dyn std::error::Error + 'static)| {
            Error::new(
                ErrorCode::INVALID_PARAMS,
                format!(
                    "cannot open a quorum session in {}: {}",
                    cwd.display(),
                    crate::engine::config::error_message(e)
                ),
            )
        };
        let mut config = (self.options.factory)(&opening).map_err(|e| cannot(&e))?;
        let host: Vec<McpServerSpec> = servers
            .iter()
            .filter_map(McpServerSpec::from_wire)
            .collect();
        if !host.is_empty() {
            if let Some(conductor) = config.conductor.clone() {
                config.registry.add_mcp_servers(&host, Some(&conductor));
            }
            if self.options.share_mcp {
                config.registry.add_mcp_servers(&host, None);
            }
        }
        let (session, events) = Session::start(config, Instant::now()).map_err(|e| cannot(&e))?;
        let tools = if session.conducted() {
            Some(crate::serve::hand_tools(&session, &self.options.config).map_err(|e| cannot(&e))?)
        } else {
            None
        };
        let id = match session.recording() {
            Some(path) => path
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
            None => format!(
                "quorum-{}-{}",
                std::process::id(),
                self.next.fetch_add(1, Ordering::SeqCst)
            ),
        };
        if let Some(path) = session.recording() {
            tracing::info!("quorum acp: session {id} recorded to {}", path.display());
        }
        let live = Live::start(id.clone(), session, events, tools, cx.clone(), caps, replay);
        lock(&self.sessions).insert(id, live.clone());
        Ok(live)
    }

    /// `session/load` (with `replay`) and `session/resume`: the recorded
    /// session `id`, gone on with.
    fn reopen(
        &self,
        id: &str,
        cwd: &Path,
        servers: &[McpServer],
        cx: &ConnectionTo<Client>,
        replay: bool,
    ) -> Result<Arc<Live>, Error> {
        let dir = crate::engine::config::sessions_dir().ok_or_else(|| {
            Error::new(
                ErrorCode::INTERNAL_ERROR,
                "no state directory to find sessions in: set $XDG_STATE_HOME or $HOME",
            )
        })?;
        // Open here already: its history is told again.
        if let Some(live) = self.get(id) {
            if replay && let Some(path) = live.recording() {
                live::replay_file(cx, id, lock(&self.caps).children, &path).map_err(|e| {
                    Error::new(
                        ErrorCode::INTERNAL_ERROR,
                        format!("cannot read {id}: {}", crate::serve::causes(&e)),
                    )
                })?;
            }
            return Ok(live);
        }
        let path = crate::transcript::sessions::find(&dir, id).map_err(|e| {
            Error::new(ErrorCode::RESOURCE_NOT_FOUND, format!("session {id}: {e}"))
                .data(serde_json::json!({ "sessionId": id }))
        })?;
        self.open(cwd, Some(path), servers, cx, replay)
    }

    /// `session/list`: the sessions quorum recorded (of the directory the
    /// host names, else every one), newest first, 50 a page.
    fn list(&self, request: &ListSessionsRequest) -> Result<ListSessionsResponse, Error> {
        const PAGE: usize = 50;
        let Some(dir) = crate::engine::config::sessions_dir() else {
            return Ok(ListSessionsResponse::new(Vec::new()));
        };
        let mut listing = crate::transcript::sessions::list(&dir)
            .map_err(|e| Error::new(ErrorCode::INTERNAL_ERROR, e.to_string()))?;
        if let Some(cwd) = &request.cwd {
            listing = listing.in_dir(&session_dir(cwd)?);
        }
        let start = match &request.cursor {
            Some(c) => c.parse::<usize>().map_err(|_| {
                Error::new(
                    ErrorCode::INVALID_PARAMS,
                    format!("cursor {c:?} is not one session/list gave"),
                )
            })?,
            None => 0,
        };
        let total = listing.sessions.len();
        let sessions = listing
            .sessions
            .into_iter()
            .skip(start)
            .take(PAGE)
            .map(|s| {
                let mut info = SessionInfo::new(s.id.clone(), PathBuf::from(&s.cwd))
                    .updated_at(s.last_event_at());
                if let Some(first) = &s.first_message {
                    info = info.title(translate::first_line(first, 80));
                }
                info
            })
            .collect();
        let mut response = ListSessionsResponse::new(sessions);
        if start + PAGE < total {
            response = response.next_cursor((start + PAGE).to_string());
        }
        Ok(response)
    }

    /// The session a prompt is for.
    fn prompt_session(&self, id: &str) -> Result<Arc<Live>, Error> {
        if let Some(live) = self.get(id) {
            return Ok(live);
        }
        if let Some((parent, call)) = id.rsplit_once('/')
            && self.get(parent).is_some()
        {
            return Err(Error::new(
                ErrorCode::INVALID_REQUEST,
                format!(
                    "session {id} is the child session of call {call} of session {parent}: it \
                     takes no prompts (prompt {parent}; session/cancel of {id} stops the call)"
                ),
            ));
        }
        Err(unknown_session(id))
    }

    /// `session/cancel`: the session's prompt, or a child session's call.
    fn cancel(&self, id: &str) {
        if let Some(live) = self.get(id) {
            live.cancel();
        } else if let Some((parent, call)) = id.rsplit_once('/')
            && let Some(live) = self.get(parent)
        {
            live.cancel_call(call);
        }
    }

    /// Ends every session (the host went): their calls cancelled and
    /// given a moment, their processes stopped.
    pub async fn close_all(&self) {
        let sessions: Vec<Arc<Live>> = lock(&self.sessions).drain().map(|(_, l)| l).collect();
        for live in &sessions {
            self.note_budget(live);
        }
        let closing = sessions.iter().map(|live| live.close());
        futures::future::join_all(closing).await;
    }

    /// Whether a spending cap stopped work in a session of this
    /// connection: `quorum acp` exits 4 then.
    pub fn budget_stopped(&self) -> bool {
        self.budget_stopped.load(Ordering::Relaxed)
    }

    fn note_budget(&self, live: &Live) {
        if live.budget_stopped() {
            self.budget_stopped.store(true, Ordering::Relaxed);
        }
    }

    /// The transcripts of the sessions open now.
    pub fn recordings(&self) -> Vec<PathBuf> {
        lock(&self.sessions)
            .values()
            .filter_map(|l| l.recording())
            .collect()
    }
}

/// A prompt's content as the message quorum's chat gets: text, resource
/// links as links, embedded text resources as context after it. Images,
/// audio and binary resources are refused, saying so.
fn prompt_text(blocks: &[ContentBlock]) -> Result<String, Error> {
    let mut text = String::new();
    let mut context = String::new();
    for (i, block) in blocks.iter().enumerate() {
        let refuse = |what: &str| {
            Err(Error::new(
                ErrorCode::INVALID_PARAMS,
                format!(
                    "prompt[{i}] is {what}: quorum takes text, resource links and embedded text \
                     resources only (its initialize says image: false, audio: false), since its \
                     chat and agents are given the message as text"
                ),
            ))
        };
        match block {
            ContentBlock::Text(t) => text.push_str(&t.text),
            ContentBlock::ResourceLink(link) => {
                text.push_str(&format!("[{}]({})", link.name, link.uri))
            }
            ContentBlock::Resource(resource) => match &resource.resource {
                EmbeddedResourceResource::TextResourceContents(r) => {
                    context.push_str(&format!(
                        "\n\n## Context: {}\n\n```\n{}\n```\n",
                        r.uri, r.text
                    ));
                }
                EmbeddedResourceResource::BlobResourceContents(_) => {
                    return refuse("a binary resource");
                }
                _ => return refuse("a resource of a kind quorum does not know"),
            },
            ContentBlock::Image(_) => return refuse("an image"),
            ContentBlock::Audio(_) => return refuse("audio"),
            _ => return refuse("content of a kind quorum does not know"),
        }
    }
    text.push_str(&context);
    if text.trim().is_empty() {
        return Err(Error::new(
            ErrorCode::INVALID_PARAMS,
            "the prompt is empty: give quorum a message (text)",
        ));
    }
    Ok(text)
}

/// The ACP stop reason of a turn's end (`interrupted`, `error`: as
/// cancelled; a failed turn is answered with an error before this).
fn acp_stop(stop: StopReason) -> agent_client_protocol::v1::schema::StopReason {
    use agent_client_protocol::v1::schema::StopReason as Acp;
    match stop {
        StopReason::EndTurn => Acp::EndTurn,
        StopReason::MaxTokens => Acp::MaxTokens,
        StopReason::MaxTurnRequests => Acp::MaxTurnRequests,
        StopReason::Refusal => Acp::Refusal,
        StopReason::Cancelled | StopReason::Interrupted | StopReason::Error => Acp::Cancelled,
    }
}
