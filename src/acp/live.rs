//! The sessions open on a live connection: those quorum opened, loaded or
//! resumed on it (in this process, on this agent process). A call whose
//! stored session is among them prompts it directly, with no
//! `session/load` or `session/resume` (a session reloaded while open made
//! mistral-vibe run it twice, and every update came twice); a restarted
//! agent is a new connection, with none open. Sessions quorum is done
//! with are closed with `session/close` where the agent offers it.

use crate::confine::lock;
use std::time::Duration;

use agent_client_protocol::v1::schema::CloseSessionRequest;

use super::client::Connection;

/// How long an agent may take to answer `session/close`.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

impl Connection {
    fn open_sessions(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        lock(&self.open)
    }

    /// Whether session `id` is open on this connection.
    pub(super) fn is_open(&self, id: &str) -> bool {
        self.alive() && self.open_sessions().contains(id)
    }

    /// Session `id` was opened (new, loaded or resumed) on this connection.
    pub(super) fn opened(&self, id: &str) {
        self.open_sessions().insert(id.to_string());
    }

    /// Session `id` is no longer taken for open (the agent said it does
    /// not know it: the next call reopens it, which heals a lost session).
    pub(super) fn forget_open(&self, id: &str) {
        self.open_sessions().remove(id);
    }

    /// The agent offers `session/close`.
    pub fn can_close(&self) -> bool {
        self.init
            .agent_capabilities
            .session_capabilities
            .close
            .is_some()
    }

    /// Closes every session open on this connection that `busy` does not
    /// name (a turn runs on it), with `session/close` when the agent offers
    /// it, each within [`CLOSE_WAIT`]; returns the ids closed.
    pub async fn close_sessions(&self, busy: &(dyn Fn(&str) -> bool + Sync)) -> Vec<String> {
        let ids: Vec<String> = {
            let open = self.open_sessions();
            let mut ids: Vec<String> = open.iter().filter(|id| !busy(id)).cloned().collect();
            ids.sort();
            ids
        };
        if ids.is_empty() || !self.alive() || !self.can_close() {
            return Vec::new();
        }
        let mut closed = Vec::new();
        for id in ids {
            self.forget_open(&id);
            let request = self
                .cx
                .send_request(CloseSessionRequest::new(id.clone()))
                .block_task();
            match tokio::time::timeout(CLOSE_WAIT, request).await {
                Ok(Ok(_)) => closed.push(id),
                Ok(Err(e)) => tracing::info!(
                    "{}: session/close {id} failed: {}",
                    self.agent,
                    super::error::describe(&e)
                ),
                Err(_) => tracing::info!("{}: no answer to session/close {id}", self.agent),
            }
        }
        closed
    }
}
