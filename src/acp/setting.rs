//! What the person does with the modes and config options an agent
//! announced of a session on a connection: `session/set_mode` and
//! `session/set_config_option` (`/mode`, `/set`), checked against what the
//! agent offered for it, and what `/agents NAME` lists. The announcements
//! themselves are `meta`'s, their one store.

use agent_client_protocol::v1::schema::{
    SessionConfigKind, SessionConfigOption, SessionConfigOptionCategory, SessionModeState,
    SessionUpdate, SetSessionConfigOptionRequest, SetSessionModeRequest,
};

use super::client::Connection;
use super::meta::{Announced, announced_activity, category, lock, values};
use super::registry::UnknownAgent;
use crate::event::Activity;

/// Why `/mode` or `/set` changed nothing. The text is what the person
/// reads after `/mode: ` or `/set: `.
#[derive(Debug, thiserror::Error)]
pub enum SettingError {
    /// The agent is not known, or not installed.
    #[error(transparent)]
    Unknown(#[from] UnknownAgent),
    /// No session of the agent's is open to change.
    #[error(
        "{agent} has no open session to change: `@{agent} message` opens one (after /new, \
         its next call opens a new one); then /mode and /set change it"
    )]
    NoSession { agent: String },
    /// The session is not open on the agent's connection.
    #[error("{agent}: that session is not open on its connection")]
    NotOpen { agent: String },
    #[error("{agent} offers no mode {mode:?}; its modes: {modes}")]
    NoSuchMode {
        agent: String,
        mode: String,
        modes: String,
    },
    #[error("{agent} offers no modes")]
    NoModes { agent: String },
    #[error("{agent} offers no config options")]
    NoOptions { agent: String },
    #[error("{agent} has no option {option:?}; its options: {options}")]
    NoSuchOption {
        agent: String,
        option: String,
        options: String,
    },
    #[error("{agent}: {option} takes true or false, not {value:?}")]
    NotBoolean {
        agent: String,
        option: String,
        value: String,
    },
    #[error("{agent}: {option} takes {values}, not {value:?}")]
    NotOffered {
        agent: String,
        option: String,
        values: String,
        value: String,
    },
    /// The agent refused the request: what it said.
    #[error("{agent}: {method} failed: {said}")]
    Refused {
        agent: String,
        method: &'static str,
        said: String,
    },
}

/// What `/set` changed: the option's id, the value set, and whether it
/// is the agent's model (remembered for its next sessions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    pub option: String,
    pub value: String,
    pub model: bool,
}

impl Connection {
    /// Records what a session's opening answer says of it, and makes it
    /// the connection's latest session.
    pub(super) fn learn_session(
        &self,
        session: &str,
        modes: Option<SessionModeState>,
        options: Option<Vec<SessionConfigOption>>,
    ) {
        let mut store = lock(&self.meta);
        let entry = store.entry(session);
        if modes.is_some() {
            entry.modes = modes;
        }
        if options.is_some() {
            entry.options = options;
        }
        store.last = Some(session.to_string());
    }

    /// Records the config options an answer to `set_config_option` gives.
    pub(super) fn options_now(&self, session: &str, options: Vec<SessionConfigOption>) {
        lock(&self.meta).entry(session).options = Some(options);
    }

    /// What the agent announced of `session`, as box activities.
    pub(super) fn announced_activities(&self, session: &str) -> Vec<Activity> {
        lock(&self.meta)
            .sessions
            .get(session)
            .map(Announced::activities)
            .unwrap_or_default()
    }

    /// The activity for a commands, mode or config update of `session`
    /// (already taken in by [`observe`]).
    pub(super) fn announced_update(
        &self,
        session: &str,
        update: &SessionUpdate,
    ) -> Option<Activity> {
        announced_activity(&self.meta, session, update)
    }

    /// Whether the agent offered `session`'s modes (`modes` in its answer).
    pub(super) fn offers_modes(&self, session: &str) -> bool {
        lock(&self.meta)
            .sessions
            .get(session)
            .and_then(|a| a.modes.as_ref())
            .is_some_and(|m| !m.available_modes.is_empty())
    }

    /// Sets a new session's mode from the config file (`mode`) with
    /// `session/set_mode`, when it is one the agent offers; says so when
    /// it is not, or when setting it fails.
    pub(super) async fn apply_mode(
        &self,
        session: &str,
        mode: &str,
        sink: &dyn crate::agent::TurnSink,
    ) {
        let agent = &self.agent;
        let (ids, current) = {
            let store = lock(&self.meta);
            let Some(modes) = store.sessions.get(session).and_then(|a| a.modes.clone()) else {
                return;
            };
            let ids: Vec<String> = modes
                .available_modes
                .iter()
                .map(|m| m.id.to_string())
                .collect();
            (ids, modes.current_mode_id.to_string())
        };
        if current == mode {
            return;
        }
        if !ids.iter().any(|id| id == mode) {
            sink.notice(&format!(
                "{agent}: mode {mode:?} is not one it offers ({}); it keeps {}",
                clean_list(&ids),
                crate::confine::sanitize::sanitize(&current)
            ));
            return;
        }
        match self
            .cx
            .send_request(SetSessionModeRequest::new(
                session.to_string(),
                mode.to_string(),
            ))
            .block_task()
            .await
        {
            Ok(_) => {
                if let Some(modes) = lock(&self.meta)
                    .sessions
                    .get_mut(session)
                    .and_then(|a| a.modes.as_mut())
                {
                    modes.current_mode_id = mode.to_string().into();
                }
            }
            Err(e) => sink.notice(&format!(
                "{agent}: setting mode to {mode:?} failed: {}",
                super::error::describe(&e)
            )),
        }
    }

    /// The latest session and what its agent announced of it.
    pub fn announced(&self) -> Option<(String, Announced)> {
        let store = lock(&self.meta);
        let last = store.last.clone()?;
        let announced = store.sessions.get(&last).cloned().unwrap_or_default();
        Some((last, announced))
    }

    /// What the agent announced of `session`, if it was opened on this
    /// connection.
    pub fn announced_for(&self, session: &str) -> Option<Announced> {
        lock(&self.meta).sessions.get(session).cloned()
    }

    /// `/mode`: sets `session`'s mode, one the agent offers (through
    /// `session/set_mode`, or its `mode` config option when it offers modes
    /// that way). Says what was set, or why not.
    pub async fn set_mode(&self, session: &str, mode: &str) -> Result<String, SettingError> {
        let agent = &self.agent;
        let session = session.to_string();
        let announced = self
            .announced_for(&session)
            .ok_or_else(|| no_session(agent))?;
        if let Some(modes) = &announced.modes {
            let ids: Vec<String> = modes
                .available_modes
                .iter()
                .map(|m| m.id.to_string())
                .collect();
            let Some(found) = modes
                .available_modes
                .iter()
                .find(|m| *m.id.0 == *mode)
                .or_else(|| {
                    modes
                        .available_modes
                        .iter()
                        .find(|m| m.name.eq_ignore_ascii_case(mode))
                })
            else {
                return Err(SettingError::NoSuchMode {
                    agent: agent.clone(),
                    mode: mode.to_string(),
                    modes: clean_list(&ids),
                });
            };
            let id = found.id.clone();
            self.cx
                .send_request(SetSessionModeRequest::new(session.clone(), id.clone()))
                .block_task()
                .await
                .map_err(|e| SettingError::Refused {
                    agent: agent.clone(),
                    method: "session/set_mode",
                    said: super::error::describe(&e),
                })?;
            if let Some(entry) = lock(&self.meta).sessions.get_mut(&session)
                && let Some(modes) = &mut entry.modes
            {
                modes.current_mode_id = id.clone();
            }
            return Ok(id.to_string());
        }
        let has_mode_option = announced
            .options
            .iter()
            .flatten()
            .any(|o| o.category == Some(SessionConfigOptionCategory::Mode));
        if has_mode_option {
            return self
                .set_option(&session, "mode", mode)
                .await
                .map(|c| c.value);
        }
        Err(SettingError::NoModes {
            agent: agent.clone(),
        })
    }

    /// `/set`: sets one of `session`'s config options (by id, name or
    /// category) to a value it takes.
    pub async fn set_option(
        &self,
        session: &str,
        option: &str,
        value: &str,
    ) -> Result<Changed, SettingError> {
        let agent = &self.agent;
        let session = session.to_string();
        let announced = self
            .announced_for(&session)
            .ok_or_else(|| no_session(agent))?;
        let options = announced.options.unwrap_or_default();
        let ids: Vec<String> = options.iter().map(|o| o.id.to_string()).collect();
        if options.is_empty() {
            return Err(SettingError::NoOptions {
                agent: agent.clone(),
            });
        }
        let found = options
            .iter()
            .find(|o| *o.id.0 == *option)
            .or_else(|| options.iter().find(|o| o.name.eq_ignore_ascii_case(option)))
            .or_else(|| {
                options
                    .iter()
                    .find(|o| o.category.as_ref().is_some_and(|c| category(c) == option))
            })
            .ok_or_else(|| SettingError::NoSuchOption {
                agent: agent.clone(),
                option: option.to_string(),
                options: clean_list(&ids),
            })?;
        let (_, values) = values(found);
        let request = match &found.kind {
            SessionConfigKind::Boolean(_) => {
                let on = match value {
                    "true" | "on" | "yes" => true,
                    "false" | "off" | "no" => false,
                    _ => {
                        return Err(SettingError::NotBoolean {
                            agent: agent.clone(),
                            option: found.id.to_string(),
                            value: value.to_string(),
                        });
                    }
                };
                SetSessionConfigOptionRequest::new(session.clone(), found.id.clone(), on)
            }
            _ => {
                if !values.iter().any(|v| v == value) {
                    return Err(SettingError::NotOffered {
                        agent: agent.clone(),
                        option: found.id.to_string(),
                        values: clean_list(&values),
                        value: value.to_string(),
                    });
                }
                SetSessionConfigOptionRequest::new(session.clone(), found.id.clone(), value)
            }
        };
        let answer = self
            .cx
            .send_request(request)
            .block_task()
            .await
            .map_err(|e| SettingError::Refused {
                agent: agent.clone(),
                method: "session/set_config_option",
                said: super::error::describe(&e),
            })?;
        self.options_now(&session, answer.config_options);
        Ok(Changed {
            option: found.id.to_string(),
            value: value.to_string(),
            model: found.category == Some(SessionConfigOptionCategory::Model),
        })
    }
}

fn no_session(agent: &str) -> SettingError {
    SettingError::NotOpen {
        agent: agent.to_string(),
    }
}

/// Agent-given names, sanitised, for a message.
fn clean_list(items: &[String]) -> String {
    if items.is_empty() {
        return "none".into();
    }
    items
        .iter()
        .map(|i| crate::confine::sanitize::sanitize(i).into_owned())
        .collect::<Vec<_>>()
        .join(", ")
}
