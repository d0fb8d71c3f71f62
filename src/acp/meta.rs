//! What an agent announces of each session on a connection: the commands it
//! offers (`available_commands_update`), its modes (the `modes` of
//! `session/new`, `load` and `resume`, and `current_mode_update`) and its
//! config options (their `configOptions`, and `config_option_update`).
//! The connection is their one owner: it takes in every such update as it
//! is read, whether or not a turn runs for the session (agents announce
//! commands right after `session/new`, before the prompt), so a turn can
//! show them from its start and `/agents NAME` can list them between
//! turns. What a connection does with them (`/mode`, `/set`, `/agents
//! NAME`) is `setting`'s; this is their one store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, SessionConfigKind, SessionConfigOption,
    SessionConfigOptionCategory, SessionConfigSelectOptions, SessionModeState, SessionUpdate,
};

use crate::event::{Activity, AgentCommand, ConfigInfo, ModeInfo};

/// How many sessions' announcements a connection keeps (the oldest go).
const SESSIONS: usize = 64;

/// Told, with the session and the activity, of what an agent announced
/// outside a turn (set once the connection's owner wants to know).
pub(crate) type Listener =
    Arc<std::sync::OnceLock<Box<dyn Fn(&str, crate::event::Activity) + Send + Sync>>>;

/// The connection's record of what its agent announced, by session.
pub(super) type Meta = Arc<Mutex<Store>>;

#[derive(Debug, Default)]
pub(super) struct Store {
    pub(super) sessions: HashMap<String, Announced>,
    /// Sessions in the order they were opened (for [`SESSIONS`]).
    order: Vec<String>,
    /// The session a turn opened last: what `/mode` and `/set` change.
    pub(super) last: Option<String>,
}

/// What an agent announced of one session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Announced {
    pub commands: Vec<AgentCommand>,
    pub modes: Option<SessionModeState>,
    pub options: Option<Vec<SessionConfigOption>>,
}

pub(super) fn lock(meta: &Meta) -> std::sync::MutexGuard<'_, Store> {
    crate::confine::lock(meta)
}

impl Store {
    pub(super) fn entry(&mut self, session: &str) -> &mut Announced {
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
pub(super) fn category(c: &SessionConfigOptionCategory) -> String {
    match serde_json::to_value(c)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
    {
        Some(name) => name,
        None => "other".into(),
    }
}

/// An option's current value and the values it takes.
pub(super) fn values(option: &SessionConfigOption) -> (String, Vec<String>) {
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
