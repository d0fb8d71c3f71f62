//! The agent's own settings, as the person changes them from quorum: what
//! an agent announced of its latest session (`/agents NAME`), its mode
//! (`/mode NAME MODE`) and its config options (`/set NAME OPTION VALUE`),
//! on that agent's live connection. The connection owns what was
//! announced; a model set this way is remembered, as a model the person
//! picks through the agent is.

use super::dispatch::Dispatcher;
use crate::acp::meta::Announced;

impl Dispatcher {
    /// What `agent` announced of its latest session (`None`: it has no
    /// live connection, or no session open on it yet).
    pub fn announced(&self, agent: &str) -> Option<(String, Announced)> {
        self.pool.live(agent)?.announced()
    }

    /// Sets `agent`'s mode on its latest session; says what was set.
    pub async fn set_mode(&self, agent: &str, mode: &str) -> Result<String, String> {
        self.known(agent)?;
        let conn = self.pool.live(agent).ok_or_else(|| no_connection(agent))?;
        let id = conn.set_mode(mode).await?;
        Ok(format!("{agent}: mode {id}"))
    }

    /// Sets one of `agent`'s config options on its latest session; a model
    /// is remembered for its next sessions.
    pub async fn set_option(
        &self,
        agent: &str,
        option: &str,
        value: &str,
    ) -> Result<String, String> {
        self.known(agent)?;
        let conn = self.pool.live(agent).ok_or_else(|| no_connection(agent))?;
        let changed = conn.set_option(option, value).await?;
        let mut text = format!("{agent}: {} {}", changed.option, changed.value);
        if changed.model {
            self.pool.pick(agent, &changed.value);
            text.push_str("; its next sessions start with this model");
        }
        Ok(text)
    }

    /// An error naming the agents there are, if `agent` is not one.
    fn known(&self, agent: &str) -> Result<(), String> {
        self.registry()
            .get(agent)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

fn no_connection(agent: &str) -> String {
    format!(
        "{agent} has no open session yet: `@{agent} message` opens one; then /mode and /set change it"
    )
}
