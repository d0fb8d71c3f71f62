//! Steering running calls from outside: cancelling them (once: asked to
//! stop; twice: ended at once), their children's work, permission
//! answers, follow-up messages for a background task's session, and
//! waiting until tasks are idle.

use serde::Serialize;
use std::sync::Arc;

use super::call::{CallJob, Opened, prompt_for};
use super::{DispatchError, Dispatcher, Reply, controls};
use crate::agent::PermissionAnswer;
use crate::event::{AgentRef, Event, TaskState};
use crate::subagent::input::SubAgentCallInput;
use crate::subagent::lock;

/// What became of a follow-up message: queued for the running task's
/// next turn, or sent at once as a new turn on its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FollowUp {
    Queued,
    Sent,
}

impl Dispatcher {
    /// Runs an interrupted or failed call again (`/retry`, and
    /// `subagent_status` with `retry: true`), by task id or call id: a new
    /// background task with the same agent, message and review contract,
    /// on the agent's stored session.
    pub async fn retry(self: &Arc<Self>, id: &str) -> Result<Reply, DispatchError> {
        let id = id.trim();
        let entry = self.emitter.board(|b| {
            b.task(id).or_else(|| b.call(id)).map(|e| {
                (
                    e.target.clone(),
                    e.input.clone(),
                    e.code_review,
                    e.summary.state,
                    e.call_id.clone(),
                )
            })
        });
        let Some((agent, input, code_review, state, call_id)) = entry else {
            return Err(self
                .emitter
                .board(|b| b.known_task(id).map(|_| ()).unwrap_err())
                .into());
        };
        if !matches!(state, TaskState::Interrupted | TaskState::Failed) {
            return Err(DispatchError::NotRetryable {
                id: id.to_string(),
                state: state.as_str(),
            });
        }
        if let AgentRef::Acp(name) = &agent {
            self.remote_retrieve(&call_id, name, &input).await;
        }
        let call = SubAgentCallInput {
            agent: match agent {
                AgentRef::Internal => None,
                AgentRef::Acp(name) => Some(name),
            },
            input: Some(input),
            code_review,
            run_in_background: true,
            continue_session: true,
            // A worktree task runs again in a worktree (of its own: the
            // first one keeps what it had committed).
            isolation: lock(&self.worktrees)
                .by_call
                .contains_key(&call_id)
                .then_some(crate::subagent::input::Isolation::Worktree),
            ..SubAgentCallInput::default()
        };
        self.call(call).await
    }

    /// Cancels a running call, by call id or task id; a call already
    /// cancelling is ended at once (its agent stopped, not waited for).
    /// False if none runs.
    pub fn cancel(&self, id: &str) -> bool {
        let call_id = self
            .emitter
            .board(|b| b.task(id).map(|t| t.call_id.clone()))
            .unwrap_or_else(|| id.to_string());
        match lock(&self.running).get(&call_id) {
            Some(handle) if *handle.cancel.borrow() => handle.kill.send(true).is_ok(),
            Some(handle) => handle.cancel.send(true).is_ok(),
            None => false,
        }
    }

    /// Ends at once every call that was asked to stop and has not: the
    /// second Esc. False if there was none.
    pub fn kill_cancelling(&self) -> bool {
        let mut any = false;
        for handle in lock(&self.running).values() {
            if *handle.cancel.borrow() && !*handle.kill.borrow() {
                any |= handle.kill.send(true).is_ok();
            }
        }
        any
    }

    /// Cancels every running call.
    pub fn cancel_all(&self) {
        for handle in lock(&self.running).values() {
            let _ = handle.cancel.send(true);
        }
    }

    /// Cancels the work of a running call's child session (its turn
    /// checks that the agent allows it).
    pub fn cancel_child(&self, call_id: &str, child_id: &str) -> bool {
        match lock(&self.running).get(call_id) {
            Some(handle) => handle.cancel_children.send(child_id.to_string()).is_ok(),
            None => false,
        }
    }

    /// What agents' elicitations get (the TUI asks the person; headless,
    /// `--elicit`).
    pub fn set_elicit(&self, elicit: crate::agent::Elicit) {
        self.pool.set_elicit(elicit);
    }

    /// Agents' file requests in the session directory go to the editor
    /// quorum serves (`quorum acp`, a host that offers `fs`).
    pub fn set_files(&self, host: Arc<dyn crate::acp::HostFiles>) {
        self.pool.set_files(host);
    }

    /// Answers an elicitation shown in a call's box.
    pub fn elicit(&self, call_id: &str, answer: crate::agent::ElicitationAnswer) -> bool {
        match lock(&self.running).get(call_id) {
            Some(handle) => handle.elicitations.send(answer).is_ok(),
            None => false,
        }
    }

    /// Answers a permission request shown in a call's box.
    pub fn answer(&self, call_id: &str, answer: PermissionAnswer) -> bool {
        match lock(&self.running).get(call_id) {
            Some(handle) => handle.answers.send(answer).is_ok(),
            None => false,
        }
    }

    /// Sends a follow-up message to a background task: queued for its
    /// next turn while it runs ([`FollowUp::Queued`]), or a new turn on its
    /// session once it is done ([`FollowUp::Sent`]; its box reopens).
    pub fn follow_up(
        self: &Arc<Self>,
        task_id: &str,
        message: &str,
    ) -> Result<FollowUp, DispatchError> {
        self.open_for_calls()?;
        let message = message.trim();
        if message.is_empty() {
            return Err(DispatchError::EmptyMessage);
        }
        let known = self
            .emitter
            .board(|b| b.known_task(task_id).map(|t| t.call_id.clone()));
        // A foreground worktree call (`c4`) becomes a task to go on.
        let (call_id, task_id) = match known {
            Ok(call_id) => (call_id, task_id.to_string()),
            Err(unknown) => self.worktree_call_as_task(task_id)?.ok_or(unknown)?,
        };
        let task_id = task_id.as_str();
        let meta = lock(&self.tasks).get(&call_id).cloned();
        let Some(meta) = meta else {
            return Err(DispatchError::NoSession(task_id.to_string()));
        };
        if !meta.runner.keeps_sessions() {
            return Err(DispatchError::InternalFollowUp(task_id.to_string()));
        }
        let mut running = lock(&self.running);
        if let Some(handle) = running.get_mut(&call_id) {
            handle.followups.push(message.to_string());
            return Ok(FollowUp::Queued);
        }
        let session_id = meta
            .session_id
            .clone()
            .ok_or_else(|| DispatchError::NoSession(task_id.to_string()))?;
        // One turn at a time on a session.
        if !lock(&self.busy).insert((meta.agent.name().to_string(), session_id.clone())) {
            return Err(DispatchError::SessionBusy(task_id.to_string()));
        }
        let (handle, control) = controls();
        running.insert(call_id.clone(), handle);
        drop(running);
        self.emitter.emit(Event::SubagentFollowup {
            call_id: call_id.clone(),
            input: message.to_string(),
        });
        let job = CallJob {
            agent: meta.agent,
            runner: meta.runner,
            depth: meta.depth,
            call_id,
            task_id: Some(task_id.to_string()),
            prompt: prompt_for(message.to_string(), meta.code_review),
            code_review: meta.code_review,
            // A follow-up's findings are placed in the tree it ran in.
            reviewed: None,
            resume: Some(session_id),
            exclude: meta.exclude,
            worktree: meta.worktree,
            title: meta.title,
            detach: None,
            era: lock(&self.memory).era(),
        };
        let opened = Opened {
            job,
            control,
            task_id: Some(task_id.to_string()),
            place: None,
        };
        let this = self.clone();
        tokio::spawn(async move { this.run(opened).await });
        Ok(FollowUp::Sent)
    }

    /// The foreground worktree call `id` names (`c4`, its branch) as a
    /// task, to take a follow-up: one made a task already, or, finished,
    /// made one now (a task id of its own, `subagent_backgrounded`).
    /// `None`: `id` names no such call.
    fn worktree_call_as_task(&self, id: &str) -> Result<Option<(String, String)>, DispatchError> {
        let Some((call_id, isolated)) = self.find_isolated(id) else {
            return Ok(None);
        };
        // Made a task already (here, or in the session continued).
        let task_id = isolated.task_id.or_else(|| {
            self.emitter
                .board(|b| b.call(&call_id).and_then(|e| e.task_id.clone()))
        });
        if let Some(task_id) = task_id {
            return Ok(Some((call_id, task_id)));
        }
        if lock(&self.running).contains_key(&call_id) {
            return Err(DispatchError::StillRunning(id.to_string()));
        }
        let Some(meta) = lock(&self.foreground).get(&call_id).cloned() else {
            return Ok(None);
        };
        let task_id = self.make_task(&call_id, meta);
        if let Some(i) = lock(&self.worktrees).by_call.get_mut(&call_id) {
            i.task_id = Some(task_id.clone());
        }
        Ok(Some((call_id, task_id)))
    }

    /// Waits until the task (or every task) is no longer running.
    pub(in crate::subagent) async fn until_idle(&self, task_id: Option<&str>) {
        loop {
            let call = task_id.map(|id| {
                self.emitter
                    .board(|b| b.task(id).map(|t| t.call_id.clone()))
                    .unwrap_or_default()
            });
            let running = {
                let running = lock(&self.running);
                let tasks = lock(&self.tasks);
                match &call {
                    Some(call) => running.contains_key(call),
                    None => running.keys().any(|c| tasks.contains_key(c)),
                }
            };
            if !running {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}
