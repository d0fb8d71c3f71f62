//! Per-conversation memory of the `subagent` tool: the last message sent
//! to a sub-agent, and the last successful ACP session of each agent.

use std::collections::HashMap;

use crate::event::{AgentRef, Event};

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
    /// How many times it was cleared: a call that started before the last
    /// `/new` keeps its session to itself ([`SubAgent::store_session_of`]).
    era: u64,
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

    /// The conversation a call starting now belongs to.
    pub fn era(&self) -> u64 {
        self.era
    }

    /// [`SubAgent::store_session`] for a call that started in `era`: a
    /// call that ends after a `/new` is not remembered.
    pub fn store_session_of(&mut self, era: u64, agent: &str, session_id: &str) {
        if era == self.era {
            self.store_session(agent, session_id);
        }
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

    /// The memory a recorded conversation left: the last message sent to
    /// a sub-agent, and each agent's last session whose turn got an answer.
    /// A `chat_reset` (`/new`) forgets what came before it, as it did then.
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a Event>) -> Self {
        let mut memory = Self::default();
        // The session each call's turn runs on: (agent, session id).
        let mut on: HashMap<&str, (&str, &str)> = HashMap::new();
        // The ACP agent of each call (the internal agent keeps no session).
        let mut agents: HashMap<&str, &str> = HashMap::new();
        for event in events {
            match event {
                // Calls that started before it are forgotten with it, as
                // their sessions were then.
                Event::ChatReset => {
                    memory.clear();
                    on.clear();
                    agents.clear();
                }
                // A worktree task's session is its own, not its agent's.
                Event::WorktreeReady { call_id, .. } => {
                    agents.remove(call_id.as_str());
                }
                Event::SubagentStarted {
                    call_id,
                    agent,
                    input,
                    ..
                } => {
                    if let AgentRef::Acp(name) = agent {
                        agents.insert(call_id, name);
                    }
                    if !input.trim().is_empty() {
                        memory.last_input = Some(input.clone());
                    }
                }
                Event::SubagentSession {
                    call_id,
                    session_id: Some(id),
                    ..
                } => {
                    if let Some(agent) = agents.get(call_id.as_str()) {
                        on.insert(call_id, (agent, id));
                    }
                }
                Event::SubagentFinished {
                    call_id,
                    stop_reason,
                    ..
                } if stop_reason.answered() => {
                    if let Some((agent, id)) = on.get(call_id.as_str()) {
                        memory.store_session(agent, id);
                    }
                }
                _ => {}
            }
        }
        memory
    }

    /// Forgets every session and the last input (`/new`).
    pub fn clear(&mut self) {
        *self = Self {
            era: self.era + 1,
            ..Self::default()
        };
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
    fn a_call_that_ends_after_new_is_not_remembered() {
        let mut m = SubAgent::new();
        let before = m.era();
        m.clear();
        m.store_session_of(before, "claude", "old");
        assert_eq!(m.stored_session("claude"), None);
        m.store_session_of(m.era(), "claude", "new");
        assert_eq!(m.stored_session("claude"), Some("new"));
        // So read back from a transcript, too.
        let started = |id: &str| Event::SubagentStarted {
            call_id: id.into(),
            task_id: None,
            agent: AgentRef::Acp("claude".into()),
            input: "x".into(),
            code_review: false,
            background: false,
            session: None,
            batch_id: None,
            queued: false,
            max_cost: None,
        };
        let session = |id: &str, s: &str| Event::SubagentSession {
            call_id: id.into(),
            session_id: Some(s.into()),
            session: crate::event::SessionKind::Fresh,
        };
        let finished = |id: &str| Event::SubagentFinished {
            call_id: id.into(),
            output: String::new(),
            stop_reason: crate::event::StopReason::EndTurn,
            severity: None,
            findings: Vec::new(),
        };
        let events = [
            started("call-1"),
            session("call-1", "old"),
            Event::ChatReset,
            finished("call-1"),
        ];
        assert_eq!(
            SubAgent::from_events(&events).stored_session("claude"),
            None
        );
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

    #[test]
    fn a_recorded_conversation_gives_back_its_memory() {
        use crate::event::build;
        let session = |call: &str, id: &str| Event::SubagentSession {
            call_id: call.into(),
            session: crate::event::SessionKind::Fresh,
            session_id: Some(id.into()),
        };
        let events = vec![
            build::started("c1", AgentRef::Acp("claude".into()))
                .input("review it")
                .event(),
            session("c1", "s1"),
            build::finished("c1", "ok").event(),
            // A failed turn leaves the older session in place.
            build::started("c2", AgentRef::Acp("claude".into()))
                .input("again")
                .event(),
            session("c2", "s2"),
            build::finished("c2", "")
                .stop(crate::event::StopReason::Error)
                .event(),
            // An interrupted one too.
            build::started("c3", AgentRef::Acp("gemini".into()))
                .input("and you")
                .event(),
            session("c3", "g1"),
            build::finished("c3", "")
                .stop(crate::event::StopReason::Interrupted)
                .event(),
        ];
        let mut events = events;
        // A worktree task's session is its own, not its agent's.
        events.extend([
            build::started("c4", AgentRef::Acp("claude".into()))
                .input("and you")
                .event(),
            Event::WorktreeReady {
                call_id: "c4".into(),
                task_id: None,
                branch: "quorum/c4-and-you".into(),
                path: "/w/c4".into(),
                base: "head".into(),
                base_commit: "abc".into(),
            },
            session("c4", "s4"),
            build::finished("c4", "ok").event(),
        ]);
        let m = SubAgent::from_events(&events);
        assert_eq!(m.stored_session("claude"), Some("s1"));
        assert_eq!(m.stored_session("gemini"), None);
        assert_eq!(m.last_input.as_deref(), Some("and you"));
        // `/new` forgot what came before it.
        let mut reset = events.clone();
        reset.push(Event::ChatReset);
        let m = SubAgent::from_events(&reset);
        assert_eq!(m.stored_session("claude"), None);
        assert_eq!(m.last_input, None);
    }
}
