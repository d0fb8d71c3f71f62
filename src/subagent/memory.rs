//! Per-conversation memory of the `subagent` tool: the last message sent
//! to a sub-agent, and the last successful ACP session of each agent.

use std::collections::HashMap;

/// No message was given and none was sent before.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no input: this is the first sub-agent call of the conversation, so `input` must say what to do"
)]
pub struct NoInput;

/// One per chat loop.
#[derive(Debug, Default, Clone)]
pub struct SubAgent {
    last_input: Option<String>,
    sessions: HashMap<String, String>,
}

impl SubAgent {
    pub fn new() -> Self {
        Self::default()
    }

    /// The message to send: a non-empty `input` is stored and used; an
    /// omitted or empty one reuses the stored message.
    pub fn resolve_input(&mut self, input: Option<&str>) -> Result<String, NoInput> {
        match input.filter(|i| !i.trim().is_empty()) {
            Some(i) => {
                self.last_input = Some(i.to_string());
                Ok(i.to_string())
            }
            None => self.last_input.clone().ok_or(NoInput),
        }
    }

    /// Remembers `session_id` as `agent`'s session. Call only after a
    /// successful turn: a failed one leaves the older id in place.
    pub fn store_session(&mut self, agent: &str, session_id: &str) {
        self.sessions
            .insert(agent.to_string(), session_id.to_string());
    }

    pub fn stored_session(&self, agent: &str) -> Option<&str> {
        self.sessions.get(agent).map(String::as_str)
    }

    /// The session to resume: the stored one, unless a fresh one is asked for.
    pub fn resume_id(&self, agent: &str, continue_session: bool) -> Option<&str> {
        if continue_session {
            self.stored_session(agent)
        } else {
            None
        }
    }

    /// Forgets every session and the last input (`/new`).
    pub fn clear(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_is_stored_and_reused() {
        let mut m = SubAgent::new();
        assert_eq!(m.resolve_input(None), Err(NoInput));
        assert_eq!(m.resolve_input(Some("  ")), Err(NoInput));
        assert_eq!(m.resolve_input(Some("review it")).unwrap(), "review it");
        assert_eq!(m.resolve_input(None).unwrap(), "review it");
        assert_eq!(m.resolve_input(Some("")).unwrap(), "review it");
        assert_eq!(m.resolve_input(Some("again")).unwrap(), "again");
        assert_eq!(m.resolve_input(None).unwrap(), "again");
        assert!(NoInput.to_string().contains("`input` must say what to do"));
    }

    #[test]
    fn sessions_per_agent_and_fresh_on_request() {
        let mut m = SubAgent::new();
        assert_eq!(m.resume_id("claude", true), None);
        m.store_session("claude", "s1");
        m.store_session("gemini", "g1");
        assert_eq!(m.resume_id("claude", true), Some("s1"));
        assert_eq!(m.resume_id("claude", false), None);
        assert_eq!(m.stored_session("gemini"), Some("g1"));
        m.store_session("claude", "s2");
        assert_eq!(m.stored_session("claude"), Some("s2"));
    }

    #[test]
    fn clear_forgets_everything() {
        let mut m = SubAgent::new();
        m.store_session("claude", "s1");
        m.resolve_input(Some("x")).unwrap();
        m.clear();
        assert_eq!(m.stored_session("claude"), None);
        assert_eq!(m.resolve_input(None), Err(NoInput));
    }
}
