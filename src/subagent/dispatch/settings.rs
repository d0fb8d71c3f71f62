//! The agent's own settings, as the person changes them from quorum: what
//! an agent announced of its session (`/agents NAME`), its mode (`/mode
//! NAME MODE`) and its config options (`/set NAME OPTION VALUE`). They act
//! on the session the agent's next call continues (else the one its
//! running call has), open on its live connection, which owns what was
//! announced; a model set this way is remembered, as a model the person
//! picks through the agent is.

use std::sync::Arc;

use super::Dispatcher;
use crate::acp::SettingError;
use crate::acp::client::Connection;
use crate::acp::meta::Announced;
use crate::subagent::lock;

impl Dispatcher {
    /// What `agent` announced of the session `/mode` and `/set` change
    /// (else of its connection's latest); `None`: it has no live
    /// connection, or no session open on it yet.
    pub fn announced(&self, agent: &str) -> Option<(String, Announced)> {
        match self.target(agent) {
            Ok((conn, session)) => conn.announced_for(&session).map(|a| (session, a)),
            Err(_) => self.pool.live(agent)?.announced(),
        }
    }

    /// Sets `agent`'s mode on its session; says what was set.
    pub async fn set_mode(&self, agent: &str, mode: &str) -> Result<String, SettingError> {
        let (conn, session) = self.target(agent)?;
        let id = conn.set_mode(&session, mode).await?;
        Ok(format!("{agent}: mode {id}"))
    }

    /// Sets one of `agent`'s config options on its session; a model is
    /// remembered for its next sessions.
    pub async fn set_option(
        &self,
        agent: &str,
        option: &str,
        value: &str,
    ) -> Result<String, SettingError> {
        let (conn, session) = self.target(agent)?;
        let changed = conn.set_option(&session, option, value).await?;
        let mut text = format!("{agent}: {} {}", changed.option, changed.value);
        if changed.model {
            self.pool.pick(agent, &changed.value);
            text.push_str("; its next sessions start with this model");
        }
        Ok(text)
    }

    /// The session of `agent`'s that `/mode` and `/set` change: the one
    /// its next call continues, else one a call of it runs now, if it is
    /// open on its live connection.
    fn target(&self, agent: &str) -> Result<(Arc<Connection>, String), SettingError> {
        self.registry().get(agent)?;
        let none = || SettingError::NoSession {
            agent: agent.to_string(),
        };
        let conn = self.pool.live(agent).ok_or_else(none)?;
        let running: Vec<String> = lock(&self.busy)
            .iter()
            .filter(|(a, _)| a == agent)
            .map(|(_, s)| s.clone())
            .collect();
        let session = self
            .stored_session(agent)
            .into_iter()
            .chain(running)
            .find(|s| conn.announced_for(s).is_some())
            .ok_or_else(none)?;
        Ok((conn, session))
    }
}
