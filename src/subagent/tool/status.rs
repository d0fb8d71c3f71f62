//! The `subagent_status` tool: a background task's state (and its report
//! once done) or every task's, after the cancel, follow-up message and
//! wait it asks for.

use std::sync::Arc;

use crate::subagent::dispatch::{DispatchError, Dispatcher};
use crate::subagent::types::{MAX_WAIT_SECONDS, StatusInput};

impl Dispatcher {
    /// The `subagent_status` tool: one task's state (and report once
    /// done), or every task.
    pub fn status(&self, task_id: Option<&str>) -> Result<serde_json::Value, DispatchError> {
        let now = self.emitter.now();
        Ok(self.emitter.board(|b| b.status(task_id, now))?)
    }

    /// The whole `subagent_status` tool: cancels, sends a follow-up, waits
    /// (in that order), then answers with the status.
    pub async fn status_with(
        self: &Arc<Self>,
        input: StatusInput,
    ) -> Result<serde_json::Value, DispatchError> {
        let task_id = input.task_id.as_deref().map(str::trim);
        // An unknown task is an error that lists the known ones.
        if let Some(id) = task_id {
            self.status(Some(id))?;
        }
        let mut sent = None;
        if input.cancel {
            let id = task_id.ok_or(DispatchError::NeedsTask("cancel"))?;
            self.cancel(id);
        }
        if let Some(message) = &input.message {
            let id = task_id.ok_or(DispatchError::NeedsTask("message"))?;
            sent = Some(self.follow_up(id, message)?);
        }
        if let Some(wait) = wait_for(input.wait_seconds) {
            let _ = tokio::time::timeout(wait, self.until_idle(task_id)).await;
        }
        let mut status = self.status(task_id)?;
        if let (Some(sent), Some(map)) = (sent, status.as_object_mut()) {
            map.insert("message".into(), sent.into());
        }
        Ok(status)
    }
}

/// How long `wait_seconds` waits: at most [`MAX_WAIT_SECONDS`]; none for 0.
pub fn wait_for(wait_seconds: Option<u64>) -> Option<std::time::Duration> {
    wait_seconds
        .filter(|s| *s > 0)
        .map(|s| std::time::Duration::from_secs(s.min(MAX_WAIT_SECONDS)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_seconds_is_capped_at_600() {
        use std::time::Duration;
        assert_eq!(wait_for(None), None);
        assert_eq!(wait_for(Some(0)), None);
        assert_eq!(wait_for(Some(5)), Some(Duration::from_secs(5)));
        assert_eq!(wait_for(Some(86_400)), Some(Duration::from_secs(600)));
    }
}
