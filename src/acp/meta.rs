//! What an agent announces of each session on a connection: the commands it
//! offers (`available_commands_update`), its modes (the `modes` of
//! `session/new`, `load` and `resume`, and `current_mode_update`) and its
//! config options (their `configOptions`, and `config_option_update`).
//! The connection is their one owner: it takes in every such update as it
//! is read, whether or not a turn runs for the session (agents announce
//! commands right after `session/new`, before the prompt), so a turn can
//! show them from its start and `/agents NAME` can list them between
//! turns. Also `session/set_mode` and `session/set_config_option` on one of
//! its sessions (`/mode`, `/set`), checked against what the agent offered
//! for it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, SessionConfigKind, SessionConfigOption,
    SessionConfigOptionCategory, SessionConfigSelectOptions, SessionModeState, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionModeRequest,
};

use super::client::Connection;
use crate::event::{Activity, AgentCommand, ConfigInfo, ModeInfo};

/// How many sessions' announcements a connection keeps (the oldest go).
const SESSIONS: usize = 64;

/// The connection's record of what its agent announced, by session.
pub(super) type Meta = Arc<Mutex<Store>>;

#[derive(Debug, Default)]
pub(super) struct Store {
    sessions: HashMap<String, Announced>,
    /// Sessions in the order they were opened (for [`SESSIONS`]).
    order: Vec<String>,
    /// The session a turn opened last: what `/mode` and `/set` change.
    last: Option<String>,
}

/// What an agent announced of one session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Announced {
    pub commands: Vec<AgentCommand>,
    pub modes: Option<SessionModeState>,
    pub options: Option<Vec<SessionConfigOption>>,
}

fn lock(meta: &Meta) -> std::sync::MutexGuard<'_, Store> {
    meta.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Store {
    fn entry(&mut self, session: &str) -> &mut Announced {
        if !self.sessions.contains_key(session) {
            if self.order.len() >= SESSIONS {
                let oldest = self.order.remove(0);
                self.sessions.remove(&oldest);
            }
            self.order.push(session.to_string());
        }
        self.sessions.entry(session.to_string()).or_default()
    }
}

/// Takes in `update` if it announces commands, a mode or config options;
/// true if it did.
pub(super) fn observe(meta: &Meta, session: &str, update: &SessionUpdate) -> bool {
    if !announces(update) {
        return false;
    }
    let mut store = lock(meta);
    match update {
        SessionUpdate::AvailableCommandsUpdate(u) => {
            store.entry(session).commands = u.available_commands.iter().map(command).collect();
        }
        SessionUpdate::CurrentModeUpdate(u) => {
            let entry = store.entry(session);
            match &mut entry.modes {
                Some(modes) => modes.current_mode_id = u.current_mode_id.clone(),
                None => {
                    entry.modes = Some(SessionModeState::new(u.current_mode_id.clone(), vec![]))
                }
            }
        }
        SessionUpdate::ConfigOptionUpdate(u) => {
            store.entry(session).options = Some(u.config_options.clone());
        }
        _ => return false,
    }
    true
}

/// The activity for a commands, mode or config update of `session`
/// (already taken in by [`observe`]), if it is one.
pub(super) fn announced_activity(
    meta: &Meta,
    session: &str,
    update: &SessionUpdate,
) -> Option<Activity> {
    if !announces(update) {
        return None;
    }
    lock(meta).sessions.get(session)?.activity_for(update)
}

/// Whether `update` announces commands, a mode or config options: the
/// only updates the store takes in (the others are not looked at under its
/// lock).
fn announces(update: &SessionUpdate) -> bool {
    matches!(
        update,
        SessionUpdate::AvailableCommandsUpdate(_)
            | SessionUpdate::CurrentModeUpdate(_)
            | SessionUpdate::ConfigOptionUpdate(_)
    )
}

fn command(c: &AvailableCommand) -> AgentCommand {
    AgentCommand {
        name: c.name.clone(),
        description: c.description.clone(),
        hint: match &c.input {
            Some(AvailableCommandInput::Unstructured(i)) => Some(i.hint.clone()),
            _ => None,
        },
    }
}

/// The category's wire name (`model`, `thought_level`, ...).
fn category(c: &SessionConfigOptionCategory) -> String {
    match serde_json::to_value(c)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
    {
        Some(name) => name,
        None => "other".into(),
    }
}

/// An option's current value and the values it takes.
fn values(option: &SessionConfigOption) -> (String, Vec<String>) {
    match &option.kind {
        SessionConfigKind::Select(s) => {
            let values = match &s.options {
                SessionConfigSelectOptions::Ungrouped(o) => {
                    o.iter().map(|o| o.value.to_string()).collect()
                }
                SessionConfigSelectOptions::Grouped(g) => g
                    .iter()
                    .flat_map(|g| g.options.iter().map(|o| o.value.to_string()))
                    .collect(),
                _ => Vec::new(),
            };
            (s.current_value.to_string(), values)
        }
        SessionConfigKind::Boolean(b) => (
            b.current_value.to_string(),
            vec!["true".into(), "false".into()],
        ),
        _ => (String::new(), Vec::new()),
    }
}

impl Announced {
    /// The activities that show it in a box: its commands, its mode, its
    /// options (each only when announced).
    pub(super) fn activities(&self) -> Vec<Activity> {
        let mut out = Vec::new();
        if !self.commands.is_empty() {
            out.push(Activity::Commands {
                commands: self.commands.clone(),
            });
        }
        if let Some(a) = self.mode_activity() {
            out.push(a);
        }
        if let Some(a) = self.config_activity() {
            out.push(a);
        }
        out
    }

    fn mode_activity(&self) -> Option<Activity> {
        self.modes.as_ref().map(|m| Activity::Mode {
            current: m.current_mode_id.to_string(),
            available: m
                .available_modes
                .iter()
                .map(|m| ModeInfo {
                    id: m.id.to_string(),
                    name: m.name.clone(),
                })
                .collect(),
        })
    }

    fn config_activity(&self) -> Option<Activity> {
        let options = self.options.as_ref().filter(|o| !o.is_empty())?;
        Some(Activity::Config {
            options: options.iter().map(config_info).collect(),
        })
    }

    /// The activity that shows what `update` changed.
    fn activity_for(&self, update: &SessionUpdate) -> Option<Activity> {
        match update {
            SessionUpdate::AvailableCommandsUpdate(_) => Some(Activity::Commands {
                commands: self.commands.clone(),
            }),
            SessionUpdate::CurrentModeUpdate(_) => self.mode_activity(),
            SessionUpdate::ConfigOptionUpdate(_) => self.config_activity(),
            _ => None,
        }
    }

    /// Lines for a person (`/agents NAME`), agent text sanitised.
    pub fn describe(&self) -> Vec<String> {
        let clean = |s: &str| crate::confine::sanitize::sanitize(s).into_owned();
        let mut lines = Vec::new();
        if self.commands.is_empty() {
            lines.push("Commands: none announced.".to_string());
        } else {
            lines.push("Commands (send `@NAME /command args`):".to_string());
            for c in &self.commands {
                let mut line = format!("  /{}", clean(&c.name));
                if let Some(h) = c.hint.as_deref().filter(|h| !h.is_empty()) {
                    line.push_str(&format!(" <{}>", clean(h)));
                }
                if !c.description.is_empty() {
                    line.push_str(&format!(" — {}", clean(&c.description)));
                }
                lines.push(line);
            }
        }
        if let Some(m) = &self.modes {
            let ids: Vec<String> = m.available_modes.iter().map(|m| clean(&m.id.0)).collect();
            lines.push(format!(
                "Mode: {} (offers: {})",
                clean(&m.current_mode_id.0),
                if ids.is_empty() {
                    "not said".to_string()
                } else {
                    ids.join(", ")
                }
            ));
        }
        for o in self.options.iter().flatten() {
            let (current, values) = values(o);
            lines.push(format!(
                "Option {} ({}): {} (takes: {})",
                clean(&o.id.0),
                clean(&o.name),
                clean(&current),
                values
                    .iter()
                    .map(|v| clean(v))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        lines
    }
}

fn config_info(o: &SessionConfigOption) -> ConfigInfo {
    let (current, values) = values(o);
    ConfigInfo {
        id: o.id.to_string(),
        name: o.name.clone(),
        category: o.category.as_ref().map(category),
        current,
        values,
    }
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn wire(value: serde_json::Value) -> SessionUpdate {
        serde_json::from_value(value).expect("a session update")
    }

    /// What is announced before a turn runs (no route for the session
    /// yet) is kept, and a turn shows it all from its start.
    #[test]
    fn announcements_are_kept_per_session_and_shown_whole() {
        let meta: Meta = Arc::default();
        let commands = wire(json!({
            "sessionUpdate": "available_commands_update",
            "availableCommands": [
                {"name": "review", "description": "Review", "input": {"hint": "what"}},
                {"name": "compact", "description": "Compact"},
            ],
        }));
        assert!(observe(&meta, "s1", &commands));
        // A mode change with no modes known yet keeps the mode alone.
        let mode = wire(json!({"sessionUpdate": "current_mode_update", "currentModeId": "plan"}));
        assert!(observe(&meta, "s1", &mode));
        let text = wire(json!({
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "hi"},
        }));
        assert!(!observe(&meta, "s1", &text));
        let store = lock(&meta);
        let announced = &store.sessions["s1"];
        assert_eq!(
            announced.activities(),
            [
                Activity::Commands {
                    commands: vec![
                        AgentCommand {
                            name: "review".into(),
                            description: "Review".into(),
                            hint: Some("what".into()),
                        },
                        AgentCommand {
                            name: "compact".into(),
                            description: "Compact".into(),
                            hint: None,
                        },
                    ],
                },
                Activity::Mode {
                    current: "plan".into(),
                    available: vec![],
                },
            ]
        );
        assert!(!store.sessions.contains_key("s2"));
    }

    #[test]
    fn described_for_a_person_with_agent_text_sanitised() {
        let announced = Announced {
            commands: vec![AgentCommand {
                name: "rev\u{1b}[2Jiew".into(),
                description: "Review\u{7}".into(),
                hint: Some("what".into()),
            }],
            modes: Some(SessionModeState::new(
                "ask",
                vec![agent_client_protocol::v1::schema::SessionMode::new(
                    "ask", "Ask",
                )],
            )),
            options: Some(vec![
                serde_json::from_value(json!({
                    "id": "fast", "name": "Fast mode", "type": "boolean", "currentValue": false,
                }))
                .unwrap(),
            ]),
        };
        assert_eq!(
            announced.describe(),
            [
                "Commands (send `@NAME /command args`):",
                "  /review <what> — Review",
                "Mode: ask (offers: ask)",
                "Option fast (Fast mode): false (takes: true, false)",
            ]
        );
    }

    #[test]
    fn a_connection_keeps_a_bounded_number_of_sessions() {
        let meta: Meta = Arc::default();
        let mode = wire(json!({"sessionUpdate": "current_mode_update", "currentModeId": "a"}));
        for i in 0..SESSIONS + 10 {
            observe(&meta, &format!("s{i}"), &mode);
        }
        let store = lock(&meta);
        assert_eq!(store.sessions.len(), SESSIONS);
        assert!(!store.sessions.contains_key("s0"));
        assert!(store.sessions.contains_key(&format!("s{}", SESSIONS + 9)));
    }
}
