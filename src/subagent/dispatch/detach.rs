//! Calls whose caller may stop waiting: a [`Detachable`] collects the calls
//! one `subagent` invocation opens (one, or a batch's), and
//! [`Dispatcher::detach`] turns those still running into background tasks,
//! as if they had been started with `run_in_background`: a task id each, a
//! side panel entry (`subagent_backgrounded`), a report kept for
//! `subagent_status` and a completion when done. Their caller's cancel no
//! longer reaches them. An MCP host that would time a long call out gets
//! the task ids instead of waiting (`[mcp] sync_seconds`).

use std::sync::{Arc, Mutex};

use super::Dispatcher;
use crate::event::Outcome;
use crate::subagent::lock;

/// The calls of one `subagent` invocation, for its caller to send to the
/// background while they run. Cheap to clone (one shared record).
#[derive(Clone, Default)]
pub struct Detachable(Arc<Mutex<Scope>>);

#[derive(Default)]
struct Scope {
    /// The caller stopped waiting: calls opened from now on start in the
    /// background.
    detached: bool,
    batch_id: Option<String>,
    calls: Vec<ScopeCall>,
    /// Batch tasks that could not start: index, agent, why.
    failed: Vec<(usize, String, String)>,
}

struct ScopeCall {
    call_id: String,
    /// Its place in the batch's `tasks` (0 for a single call).
    index: usize,
    agent: String,
    code_review: bool,
    /// Its last turn's outcome, once it ended.
    outcome: Option<Outcome>,
}

/// What became of one call of a [`Detachable`] when its caller stopped
/// waiting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DetachedCall {
    /// It goes on in the background as task `task_id`.
    Background {
        index: usize,
        agent: String,
        call_id: String,
        task_id: String,
    },
    /// It had ended already: its outcome (severity header parsed when it
    /// is a review).
    Done {
        index: usize,
        agent: String,
        outcome: Outcome,
    },
    /// A batch task that could not start (`tasks[i]: ...`).
    Failed {
        index: usize,
        agent: String,
        error: String,
    },
}

/// The calls of a [`Detachable`] once detached, in task order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detached {
    /// The batch they are the tasks of, for a batch.
    pub batch_id: Option<String>,
    pub calls: Vec<DetachedCall>,
}

impl Detachable {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Scope> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether its caller stopped waiting.
    pub fn is_detached(&self) -> bool {
        self.lock().detached
    }

    /// The calls it holds so far.
    pub fn call_ids(&self) -> Vec<String> {
        self.lock()
            .calls
            .iter()
            .map(|c| c.call_id.clone())
            .collect()
    }

    /// A call was opened for it.
    pub(in crate::subagent) fn opened(
        &self,
        call_id: &str,
        index: usize,
        agent: &str,
        code_review: bool,
    ) {
        self.lock().calls.push(ScopeCall {
            call_id: call_id.to_string(),
            index,
            agent: agent.to_string(),
            code_review,
            outcome: None,
        });
    }

    /// The batch its calls are the tasks of.
    pub(in crate::subagent) fn batch(&self, batch_id: &str) {
        self.lock().batch_id = Some(batch_id.to_string());
    }

    /// A batch task could not start.
    pub(in crate::subagent) fn failed(&self, index: usize, agent: &str, error: &str) {
        self.lock()
            .failed
            .push((index, agent.to_string(), error.to_string()));
    }

    /// A call's turn ended (recorded before its end is emitted, so a
    /// detach sees either its outcome or a call still running).
    pub(in crate::subagent) fn finished(&self, call_id: &str, outcome: &Outcome) {
        let mut scope = self.lock();
        if let Some(call) = scope.calls.iter_mut().find(|c| c.call_id == call_id) {
            call.outcome = Some(outcome.clone());
        }
    }
}

impl Dispatcher {
    /// Its caller stops waiting for `scope`'s calls: those still running
    /// go on as background tasks (`subagent_backgrounded`), and calls it
    /// opens later start in the background. `None` while it has opened no
    /// call yet (it is still preparing: try again later).
    pub fn detach(&self, scope: &Detachable) -> Option<Detached> {
        // The running calls' lock first, then the scope's: a call cannot
        // close (nor record its end) in the middle.
        let mut running = lock(&self.running);
        let mut s = scope.lock();
        if s.calls.is_empty() && s.failed.is_empty() {
            return None;
        }
        s.detached = true;
        let mut calls = Vec::new();
        for call in &s.calls {
            if let Some(outcome) = &call.outcome {
                let mut outcome = outcome.clone();
                if call.code_review {
                    let verdict = crate::subagent::severity::parse(&outcome.output);
                    outcome.severity = verdict.severity;
                    outcome.output = verdict.body.to_string();
                }
                calls.push(DetachedCall::Done {
                    index: call.index,
                    agent: call.agent.clone(),
                    outcome,
                });
                continue;
            }
            let Some(handle) = running.get_mut(&call.call_id) else {
                continue;
            };
            let task_id = match (&handle.task_id, handle.meta.take()) {
                (Some(task_id), _) => task_id.clone(),
                (None, Some(meta)) => {
                    // The caller's cancel reaches it no more.
                    if let Some(forward) = handle.forward.take() {
                        forward.abort();
                    }
                    let task_id = self.make_task(&call.call_id, meta);
                    handle.task_id = Some(task_id.clone());
                    task_id
                }
                // Not a call that can go on alone.
                (None, None) => continue,
            };
            calls.push(DetachedCall::Background {
                index: call.index,
                agent: call.agent.clone(),
                call_id: call.call_id.clone(),
                task_id,
            });
        }
        for (index, agent, error) in &s.failed {
            calls.push(DetachedCall::Failed {
                index: *index,
                agent: agent.clone(),
                error: error.clone(),
            });
        }
        calls.sort_by_key(|c| match c {
            DetachedCall::Background { index, .. }
            | DetachedCall::Done { index, .. }
            | DetachedCall::Failed { index, .. } => *index,
        });
        Some(Detached {
            batch_id: s.batch_id.clone(),
            calls,
        })
    }
}
