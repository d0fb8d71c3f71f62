//! What an agent announced of its session, as a box keeps it: the commands
//! it offers, its current mode and the modes it has, and its config
//! options (model, effort, ...) with their current values. All of it
//! agent text: sanitised as it comes in.

use super::clean;
use crate::event::{Activity, AgentCommand, ConfigInfo, ModeInfo};

/// How many of an agent's config options its box's title shows.
const OPTION_BADGES: usize = 3;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Announced {
    pub commands: Vec<AgentCommand>,
    /// The current mode's id.
    pub mode: Option<String>,
    pub modes: Vec<ModeInfo>,
    pub options: Vec<ConfigInfo>,
}

impl Announced {
    /// Takes in a `Commands`, `Mode` or `Config` activity (others are not
    /// its).
    pub(super) fn apply(&mut self, activity: &Activity) {
        match activity {
            Activity::Commands { commands } => self.commands = clean_commands(commands),
            Activity::Mode { current, available } => {
                self.mode = Some(clean(current));
                // A mode change alone keeps the modes known.
                if !available.is_empty() {
                    self.modes = available
                        .iter()
                        .map(|m| ModeInfo {
                            id: clean(&m.id),
                            name: clean(&m.name),
                        })
                        .collect();
                }
            }
            Activity::Config { options } => {
                self.options = options
                    .iter()
                    .map(|o| ConfigInfo {
                        id: clean(&o.id),
                        name: clean(&o.name),
                        category: o.category.as_deref().map(clean),
                        current: clean(&o.current),
                        values: o.values.iter().map(|v| clean(v)).collect(),
                    })
                    .collect();
            }
            _ => {}
        }
    }

    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
            && self.mode.is_none()
            && self.modes.is_empty()
            && self.options.is_empty()
    }

    /// The current mode, by name where the agent gave one; else the value
    /// of its `mode` config option.
    pub fn current_mode(&self) -> Option<String> {
        if let Some(id) = &self.mode {
            return Some(
                self.modes
                    .iter()
                    .find(|m| &m.id == id)
                    .map_or(id.clone(), |m| m.name.clone()),
            );
        }
        self.options
            .iter()
            .find(|o| o.category.as_deref() == Some("mode"))
            .map(|o| o.current.clone())
    }

    /// What the box's title shows: `mode NAME`, then the model and the
    /// other options' current values (`model smart`, `effort high`).
    pub fn badges(&self) -> Vec<String> {
        let mut badges = Vec::new();
        if let Some(mode) = self.current_mode() {
            badges.push(format!("mode {mode}"));
        }
        let shown = self
            .options
            .iter()
            .filter(|o| o.category.as_deref() != Some("mode"))
            .take(OPTION_BADGES);
        for o in shown {
            let label = match o.category.as_deref() {
                Some("model") => "model".to_string(),
                _ => o.name.to_lowercase(),
            };
            badges.push(format!("{label} {}", o.current));
        }
        badges
    }
}

pub(super) fn clean_commands(commands: &[AgentCommand]) -> Vec<AgentCommand> {
    commands
        .iter()
        .map(|c| AgentCommand {
            name: clean(&c.name),
            description: clean(&c.description),
            hint: c.hint.as_deref().map(clean),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn badges_name_the_mode_and_the_options_and_text_is_cleaned() {
        let mut a = Announced::default();
        a.apply(&Activity::Mode {
            current: "plan".into(),
            available: vec![
                ModeInfo {
                    id: "ask".into(),
                    name: "Ask".into(),
                },
                ModeInfo {
                    id: "plan".into(),
                    name: "Plan\u{1b}[31m".into(),
                },
            ],
        });
        a.apply(&Activity::Config {
            options: vec![
                ConfigInfo {
                    id: "model".into(),
                    name: "Model".into(),
                    category: Some("model".into()),
                    current: "smart".into(),
                    values: vec!["fast".into(), "smart".into()],
                },
                ConfigInfo {
                    id: "effort".into(),
                    name: "Effort".into(),
                    category: Some("thought_level".into()),
                    current: "high".into(),
                    values: vec![],
                },
            ],
        });
        assert_eq!(a.badges(), ["mode Plan", "model smart", "effort high"]);
        // A later mode change keeps the names known.
        a.apply(&Activity::Mode {
            current: "ask".into(),
            available: vec![],
        });
        assert_eq!(a.current_mode().as_deref(), Some("Ask"));
        a.apply(&Activity::Commands {
            commands: vec![AgentCommand {
                name: "rev\u{7}iew".into(),
                description: "d".into(),
                hint: None,
            }],
        });
        assert_eq!(a.commands[0].name, "review");
    }
}
