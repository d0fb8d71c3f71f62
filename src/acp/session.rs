//! Sessions on a connection: opening one (resumed, loaded, or new, and a
//! new one when a stale id cannot be reopened), applying the configured
//! model and mode through its config options, and what the agent says of
//! itself (its capabilities, and the authentication it asks for).

use std::path::Path;

use agent_client_protocol::v1::schema::{
    InitializeResponse, LoadSessionRequest, McpServer, NewSessionRequest, ResumeSessionRequest,
    SessionConfigKind, SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelect,
    SessionConfigSelectOptions, SetSessionConfigOptionRequest,
};

use super::client::Connection;
use super::error::describe;
use crate::agent::TurnSink;
use crate::event::{Activity, SessionKind};

/// Why no session was opened for a turn. The text is what the box shows.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OpenError {
    /// The agent process ended: how, and its last output.
    #[error("{agent} exited: {death}")]
    Exited { agent: String, death: String },
    /// The agent asks to be authenticated first (`methods`: those it
    /// offers, described for a person).
    #[error("{}", auth_required(agent, methods))]
    AuthRequired { agent: String, methods: Vec<String> },
    /// The agent refused `session/new`: what it said.
    #[error("{agent}: session/new failed: {said}")]
    Refused { agent: String, said: String },
}

/// What to tell a person whose agent wants to be authenticated first:
/// the methods it offers and the environment variables they take.
fn auth_required(agent: &str, methods: &[String]) -> String {
    if methods.is_empty() {
        return format!(
            "{agent} needs authentication before it opens a session, and names no method; set it up with the agent's own CLI"
        );
    }
    format!(
        "{agent} needs authentication before it opens a session. It offers: {}. Set the variables in the agent's `env` in the config file, or sign in with the agent's own CLI.",
        methods.join("; ")
    )
}

impl Connection {
    pub(super) async fn open_session(
        &self,
        root: &Path,
        resume: Option<&str>,
        sink: &dyn TurnSink,
    ) -> Result<(String, SessionKind, Offered), OpenError> {
        // Open on this connection already: prompted as it is.
        if let Some(id) = resume.filter(|id| self.is_open(id)) {
            return Ok((id.to_string(), SessionKind::Continued, None));
        }
        let mcp = self.mcp_servers(sink);
        if let Some(id) = resume {
            // History replayed by load (or resume) arrives before the answer,
            // while no route exists for the session: it is not shown.
            let reopened = if self.can_resume() {
                Some((
                    self.cx
                        .send_request(
                            ResumeSessionRequest::new(id.to_string(), root.to_path_buf())
                                .mcp_servers(mcp.clone()),
                        )
                        .block_task()
                        .await
                        .map(|r| self.learn_session(id, r.modes, r.config_options)),
                    SessionKind::Resumed,
                ))
            } else if self.can_load() {
                Some((
                    self.cx
                        .send_request(
                            LoadSessionRequest::new(id.to_string(), root.to_path_buf())
                                .mcp_servers(mcp.clone()),
                        )
                        .block_task()
                        .await
                        .map(|r| self.learn_session(id, r.modes, r.config_options)),
                    SessionKind::Loaded,
                ))
            } else {
                None
            };
            match reopened {
                Some((Ok(()), kind)) => {
                    self.opened(id);
                    return Ok((id.to_string(), kind, None));
                }
                Some((Err(e), _)) => {
                    if !self.alive() {
                        return Err(self.exited());
                    }
                    sink.notice(&format!(
                        "{}: session {id} could not be reopened ({}); starting a new one",
                        self.agent,
                        describe(&e)
                    ));
                    return self
                        .new_session(root, mcp)
                        .await
                        .map(|(id, offered)| (id, SessionKind::NewAfterStale, offered));
                }
                None => {}
            }
        }
        self.new_session(root, mcp)
            .await
            .map(|(id, offered)| (id, SessionKind::Fresh, offered))
    }

    /// The configured MCP servers this agent accepts, as ACP sends them;
    /// each one it cannot take is named in the box.
    fn mcp_servers(&self, sink: &dyn TurnSink) -> Vec<McpServer> {
        let (servers, skipped) = super::mcp::offer(
            &self.agent,
            &self.mcp,
            &self.init.agent_capabilities.mcp_capabilities,
        );
        for text in skipped {
            sink.activity(Activity::Notice { text });
        }
        servers
    }

    /// Applies the configured (or remembered) model and mode to a new
    /// session through its config options; says so when it cannot.
    pub(super) async fn apply_settings(
        &self,
        session_id: &str,
        offered: Offered,
        wanted: [(&'static str, Option<&str>); 2],
        sink: &dyn TurnSink,
    ) {
        let mut wanted: Vec<(&str, &str)> = wanted
            .into_iter()
            .filter_map(|(key, value)| value.map(|v| (key, v)))
            .collect();
        // A mode the agent offers as a session mode, not a config option,
        // is set with `session/set_mode`.
        let mode_option = offered
            .iter()
            .flatten()
            .any(|o| o.category.as_ref() == Some(&SessionConfigOptionCategory::Mode));
        if !mode_option
            && self.offers_modes(session_id)
            && let Some(i) = wanted.iter().position(|(key, _)| *key == "mode")
        {
            let (_, mode) = wanted.remove(i);
            self.apply_mode(session_id, mode, sink).await;
        }
        if wanted.is_empty() {
            return;
        }
        let Some(offered) = offered else {
            let keys: Vec<&str> = wanted.iter().map(|(k, _)| *k).collect();
            sink.notice(&format!(
                "{} offers no config options: its {} from the config file is not applied",
                self.agent,
                keys.join(" and ")
            ));
            return;
        };
        for (key, value) in wanted {
            let category = match key {
                "model" => SessionConfigOptionCategory::Model,
                _ => SessionConfigOptionCategory::Mode,
            };
            let Some(option) = offered
                .iter()
                .find(|o| o.category.as_ref() == Some(&category))
            else {
                sink.notice(&format!(
                    "{} offers no {key} option: {key} {value:?} is not applied",
                    self.agent
                ));
                continue;
            };
            let SessionConfigKind::Select(select) = &option.kind else {
                continue;
            };
            let values = select_values(select);
            if !values.iter().any(|v| v == value) {
                sink.notice(&format!(
                    "{}: {key} {value:?} is not one it offers ({}); it keeps {}",
                    self.agent,
                    values.join(", "),
                    select.current_value
                ));
                continue;
            }
            if select.current_value.to_string() == value {
                continue;
            }
            let request = SetSessionConfigOptionRequest::new(
                session_id.to_string(),
                option.id.clone(),
                value,
            );
            match self.cx.send_request(request).block_task().await {
                Ok(answer) => self.options_now(session_id, answer.config_options),
                Err(e) => sink.notice(&format!(
                    "{}: setting {key} to {value:?} failed: {}",
                    self.agent,
                    describe(&e)
                )),
            }
        }
    }

    async fn new_session(
        &self,
        root: &Path,
        mcp: Vec<McpServer>,
    ) -> Result<(String, Offered), OpenError> {
        match self
            .cx
            .send_request(NewSessionRequest::new(root.to_path_buf()).mcp_servers(mcp))
            .block_task()
            .await
        {
            Ok(r) => {
                let id = r.session_id.0.to_string();
                self.opened(&id);
                self.learn_session(&id, r.modes, r.config_options.clone());
                Ok((id, r.config_options))
            }
            Err(e) if e.code == agent_client_protocol::ErrorCode::AUTH_REQUIRED => {
                Err(OpenError::AuthRequired {
                    agent: self.agent.clone(),
                    methods: auth_methods(&self.init),
                })
            }
            Err(e) if self.alive() => Err(OpenError::Refused {
                agent: self.agent.clone(),
                said: describe(&e),
            }),
            Err(_) => Err(self.exited()),
        }
    }

    /// The agent process ended, as a session could not be opened.
    fn exited(&self) -> OpenError {
        OpenError::Exited {
            agent: self.agent.clone(),
            death: self.death(),
        }
    }

    /// What the agent says it can do, for `quorum agents --probe`.
    pub fn capabilities(&self) -> Vec<&'static str> {
        let caps = &self.init.agent_capabilities;
        let sessions = &caps.session_capabilities;
        [
            ("load", caps.load_session),
            ("resume", sessions.resume.is_some()),
            ("list", sessions.list.is_some()),
            ("close", sessions.close.is_some()),
            ("images", caps.prompt_capabilities.image),
            (
                "MCP",
                caps.mcp_capabilities.http || caps.mcp_capabilities.sse,
            ),
        ]
        .into_iter()
        .filter_map(|(name, yes)| yes.then_some(name))
        .collect()
    }

    /// The agent's authentication methods, described for a person.
    pub fn auth_methods(&self) -> Vec<String> {
        auth_methods(&self.init)
    }
}

/// The config options a new session offers (`None`: the agent has none).
pub(super) type Offered = Option<Vec<SessionConfigOption>>;

/// The values a select option offers, grouped or not.
fn select_values(select: &SessionConfigSelect) -> Vec<String> {
    match &select.options {
        SessionConfigSelectOptions::Ungrouped(options) => {
            options.iter().map(|o| o.value.to_string()).collect()
        }
        SessionConfigSelectOptions::Grouped(groups) => groups
            .iter()
            .flat_map(|g| g.options.iter().map(|o| o.value.to_string()))
            .collect(),
        _ => Vec::new(),
    }
}

/// `name (id): description [env: A, B]` for each method the agent offers.
/// Agent text: sanitised.
fn auth_methods(init: &InitializeResponse) -> Vec<String> {
    use agent_client_protocol::v1::schema::AuthMethod;
    let clean = |s: &str| crate::confine::sanitize::sanitize(s).into_owned();
    init.auth_methods
        .iter()
        .map(|m| {
            let mut text = format!("{} ({})", clean(m.name()), clean(&m.id().0));
            if let Some(d) = m.description().filter(|d| !d.trim().is_empty()) {
                text.push_str(&format!(": {}", clean(d.trim())));
            }
            let mut vars: Vec<String> = match m {
                AuthMethod::Terminal(t) => t.env.keys().map(|k| clean(k)).collect(),
                _ => Vec::new(),
            };
            vars.sort();
            if !vars.is_empty() {
                text.push_str(&format!(" [env: {}]", vars.join(", ")));
            }
            text
        })
        .collect()
}
