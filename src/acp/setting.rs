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
use crate::event::Activity;

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
    pub async fn set_mode(&self, session: &str, mode: &str) -> Result<String, String> {
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
                return Err(format!(
                    "{agent} offers no mode {mode:?}; its modes: {}",
                    clean_list(&ids)
                ));
            };
            let id = found.id.clone();
            self.cx
                .send_request(SetSessionModeRequest::new(session.clone(), id.clone()))
                .block_task()
                .await
                .map_err(|e| {
                    format!(
                        "{agent}: session/set_mode failed: {}",
                        super::error::describe(&e)
                    )
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
        Err(format!("{agent} offers no modes"))
    }

    /// `/set`: sets one of `session`'s config options (by id, name or
    /// category) to a value it takes.
    pub async fn set_option(
        &self,
        session: &str,
        option: &str,
        value: &str,
    ) -> Result<Changed, String> {
        let agent = &self.agent;
        let session = session.to_string();
        let announced = self
            .announced_for(&session)
            .ok_or_else(|| no_session(agent))?;
        let options = announced.options.unwrap_or_default();
        let ids: Vec<String> = options.iter().map(|o| o.id.to_string()).collect();
        if options.is_empty() {
            return Err(format!("{agent} offers no config options"));
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
            .ok_or_else(|| {
                format!(
                    "{agent} has no option {option:?}; its options: {}",
                    clean_list(&ids)
                )
            })?;
        let (_, values) = values(found);
        let request = match &found.kind {
            SessionConfigKind::Boolean(_) => {
                let on = match value {
                    "true" | "on" | "yes" => true,
                    "false" | "off" | "no" => false,
                    _ => {
                        return Err(format!(
                            "{agent}: {} takes true or false, not {value:?}",
                            found.id
                        ));
                    }
                };
                SetSessionConfigOptionRequest::new(session.clone(), found.id.clone(), on)
            }
            _ => {
                if !values.iter().any(|v| v == value) {
                    return Err(format!(
                        "{agent}: {} takes {}, not {value:?}",
                        found.id,
                        clean_list(&values)
                    ));
                }
                SetSessionConfigOptionRequest::new(session.clone(), found.id.clone(), value)
            }
        };
        let answer = self
            .cx
            .send_request(request)
            .block_task()
            .await
            .map_err(|e| {
                format!(
                    "{agent}: session/set_config_option failed: {}",
                    super::error::describe(&e)
                )
            })?;
        self.options_now(&session, answer.config_options);
        Ok(Changed {
            option: found.id.to_string(),
            value: value.to_string(),
            model: found.category == Some(SessionConfigOptionCategory::Model),
        })
    }
}

fn no_session(agent: &str) -> String {
    format!("{agent}: that session is not open on its connection")
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
