//! The dispatcher: runs `subagent` calls on ACP agents (through the
//! [`Pool`]) or on the internal agent (injected), both behind the
//! [`Agent`] interface, and remembers their sessions.
//!
//! Call and task state is not kept here: every call reports what happens
//! as events, and the session's task board (behind the [`Emitter`]) is the
//! one record of it. The dispatcher keeps only what steers running calls
//! (their cancel flags and permission answers) and the agent connections.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::BoxFuture;
use serde_json::json;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};

use super::memory::{NoInput, SubAgent};
use super::picks::ModelPicks;
use super::pool::Pool;
use super::types::{
    InputError, MAX_WAIT_SECONDS, REVIEW_CONTRACT, StatusInput, SubAgentCallInput, TaskSpec,
    compose_prompt,
};
use crate::acp::registry::{Registry, UnknownAgent};
use crate::agent::Permissions;
use crate::agent::{Agent, PermissionAnswer, TurnControl, TurnInput, TurnSink};
use crate::confine::fsroot::{Exclude, Root};
use crate::event::{
    Activity, AgentRef, Event, NoticeLevel, Outcome, Quorum, ReviewerVerdict, SessionKind,
    Severity, StopReason,
};
use crate::runtime::board::UnknownTask;
use crate::runtime::bus::Emitter;
use crate::runtime::cancel::cancelled;
use crate::runtime::supervisor::Supervisor;

/// How many tasks of one batch run at once unless the config file says
/// otherwise (`max_parallel`).
pub const MAX_PARALLEL: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error(transparent)]
    NoInput(#[from] NoInput),
    #[error("`input` is empty: say what this task should do")]
    EmptyInput,
    #[error("{source}{}", if *internal { "; to run the task on the internal agent instead, omit `agent` (leave it out of the call)" } else { "" })]
    UnknownAgent {
        source: UnknownAgent,
        /// The internal agent is there to take the task.
        internal: bool,
    },
    #[error(
        "the internal agent is not available in this session (it needs a chat model); name an ACP agent with `agent`"
    )]
    NoInternalAgent,
    #[error(transparent)]
    UnknownTask(#[from] UnknownTask),
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(
        "task {0} ran on the internal agent, which keeps no session: it cannot take a follow-up message; start a new `subagent` call instead"
    )]
    InternalFollowUp(String),
    #[error(
        "task {0} has no session to continue (it ended before its agent opened one); start a new `subagent` call instead"
    )]
    NoSession(String),
    #[error(
        "task {0}'s session is busy with another call; send the message when that call is done"
    )]
    SessionBusy(String),
    #[error("subagent_status: `{0}` needs a `task_id`")]
    NeedsTask(&'static str),
    #[error("subagent_status: `message` is empty")]
    EmptyMessage,
}

/// Writes the short summary of the main conversation that
/// `include_main_summary` puts before a sub-agent's message. Injected by
/// the chat, which owns the conversation (and the model that writes it).
pub trait MainSummary: Send + Sync {
    /// The summary, or `None` when there is no conversation yet.
    fn summary(&self, cancel: watch::Receiver<bool>) -> BoxFuture<'_, Option<String>>;
}

/// What a call returns: its outcome at once, or a task id for later; a
/// batch's results, or a task id for each of its tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Done(Outcome),
    Started {
        task_id: String,
        call_id: String,
    },
    Batch(BatchResult),
    BatchStarted {
        batch_id: String,
        tasks: Vec<TaskStart>,
    },
}

impl Reply {
    /// The tool result the model sees.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Reply::Done(o) => o.tool_json(),
            Reply::Started { task_id, .. } => {
                json!({ "task_id": task_id, "status": "running" })
            }
            Reply::Batch(batch) => batch.to_json(),
            Reply::BatchStarted { batch_id, tasks } => json!({
                "batch_id": batch_id,
                "tasks": tasks.iter().map(TaskStart::to_json).collect::<Vec<_>>(),
            }),
        }
    }
}

/// How one task of a batch ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskResult {
    /// Its place in `tasks`, from 0.
    pub index: usize,
    /// The agent it ran on (`internal` for the internal agent).
    pub agent: String,
    /// Its outcome, or why it could not run (`tasks[i]: ...`).
    pub result: Result<Outcome, String>,
}

impl TaskResult {
    /// It ended its turn normally.
    pub fn succeeded(&self) -> bool {
        matches!(&self.result, Ok(o) if o.stop_reason == StopReason::EndTurn)
    }

    pub fn severity(&self) -> Option<Severity> {
        self.result.as_ref().ok().and_then(|o| o.severity)
    }

    /// Its entry in the tool result.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = json!({ "task": self.index, "agent": self.agent });
        let map = v.as_object_mut().expect("an object");
        match &self.result {
            Ok(o) if o.stop_reason == StopReason::Error => {
                map.insert("stop_reason".into(), o.stop_reason.as_str().into());
                map.insert(
                    "error".into(),
                    format!("tasks[{}]: {}", self.index, o.output).into(),
                );
            }
            Ok(o) => {
                map.insert(
                    "output".into(),
                    super::severity::parse(&o.output).body.into(),
                );
                map.insert("stop_reason".into(), o.stop_reason.as_str().into());
                if let Some(s) = o.severity {
                    map.insert("severity".into(), s.as_str().into());
                }
            }
            Err(e) => {
                map.insert("error".into(), e.clone().into());
            }
        }
        v
    }
}

/// A batch's results, in the order of its tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchResult {
    pub batch_id: String,
    pub tasks: Vec<TaskResult>,
    /// A review batch's quorum (every task a code review).
    pub quorum: Option<Quorum>,
}

impl BatchResult {
    /// Tasks that ended their turn normally.
    pub fn succeeded(&self) -> u32 {
        self.tasks.iter().filter(|t| t.succeeded()).count() as u32
    }

    /// The others.
    pub fn failed(&self) -> u32 {
        self.tasks.len() as u32 - self.succeeded()
    }

    /// The worst verdict any task gave.
    pub fn worst_verdict(&self) -> Option<Severity> {
        self.tasks.iter().filter_map(TaskResult::severity).max()
    }

    /// The tool result: a summary, the quorum of a review batch, and one
    /// entry per task.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = json!({
            "summary": {
                "total": self.tasks.len(),
                "succeeded": self.succeeded(),
                "failed": self.failed(),
                "worst_verdict": self.worst_verdict().map(Severity::as_str),
            },
            "tasks": self.tasks.iter().map(TaskResult::to_json).collect::<Vec<_>>(),
        });
        if let Some(q) = &self.quorum {
            v["quorum"] = json!({
                "verdict": q.verdict.map(Severity::as_str),
                "agree": q.agree,
                "total": q.total,
                "text": q.label(),
            });
        }
        v
    }

    /// The quorum of a batch whose tasks are all code reviews.
    fn quorum_of(tasks: &[TaskResult], call_ids: &[Option<String>]) -> Quorum {
        Quorum::of(
            tasks
                .iter()
                .zip(call_ids)
                .map(|(t, call_id)| ReviewerVerdict {
                    agent: t.agent.clone(),
                    call_id: call_id.clone(),
                    severity: t.severity(),
                    failed: !t.succeeded(),
                })
                .collect(),
        )
    }
}

/// A background batch's task, as the call returns it at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskStart {
    pub index: usize,
    pub agent: String,
    /// Its task id and whether it waits for a place, or why it could not
    /// start (`tasks[i]: ...`).
    pub started: Result<(String, bool), String>,
}

impl TaskStart {
    pub fn to_json(&self) -> serde_json::Value {
        match &self.started {
            Ok((task_id, queued)) => json!({
                "task": self.index,
                "agent": self.agent,
                "task_id": task_id,
                "status": if *queued { "queued" } else { "running" },
            }),
            Err(e) => json!({ "task": self.index, "agent": self.agent, "error": e }),
        }
    }
}

struct Handle {
    cancel: watch::Sender<bool>,
    /// A second cancel: the agent is ended at once, not waited for.
    kill: watch::Sender<bool>,
    answers: mpsc::UnboundedSender<PermissionAnswer>,
    /// Child sessions to cancel (nested sub-agents), by session id.
    cancel_children: mpsc::UnboundedSender<String>,
    /// Follow-up messages for the call's session, sent in turn once the
    /// running turn ends.
    followups: Vec<String>,
}

/// A running call's controls: the handle the dispatcher keeps, and the
/// ends its turn reads.
fn controls() -> (Handle, TurnControl) {
    let (cancel, cancel_rx) = watch::channel(false);
    let (kill, kill_rx) = watch::channel(false);
    let (answers, answers_rx) = mpsc::unbounded_channel();
    let (cancel_children, cancel_children_rx) = mpsc::unbounded_channel();
    (
        Handle {
            cancel,
            kill,
            answers,
            cancel_children,
            followups: Vec::new(),
        },
        TurnControl {
            cancel: cancel_rx,
            kill: kill_rx,
            answers: answers_rx,
            cancel_children: cancel_children_rx,
        },
    )
}

/// What a background task needs to take a follow-up turn once it is done.
#[derive(Clone)]
struct TaskMeta {
    agent: AgentRef,
    runner: Arc<dyn Agent>,
    /// The nesting depth its turns run at.
    depth: u32,
    code_review: bool,
    exclude: Option<Exclude>,
    /// The session its last turn ran in.
    session_id: Option<String>,
}

pub struct Dispatcher {
    registry: Arc<Registry>,
    root: Root,
    emitter: Emitter,
    memory: Mutex<SubAgent>,
    /// The ACP agents.
    pool: Arc<Pool>,
    /// Running calls, by call id.
    running: Mutex<HashMap<String, Handle>>,
    /// Sessions a running turn is using, by `(agent, session id)`: a second
    /// call may not resume a session in the middle of a turn.
    busy: Mutex<HashSet<(String, String)>>,
    next_call: AtomicU64,
    next_task: AtomicU64,
    /// Background tasks that finished, by task id, for the chat loop.
    completions: mpsc::UnboundedSender<String>,
    /// Background calls, by call id: what a follow-up turn needs.
    tasks: Mutex<HashMap<String, TaskMeta>>,
    /// The internal agent, once there is one.
    internal: Mutex<Option<Arc<dyn Agent>>>,
    /// Writes the main conversation's summary for `include_main_summary`.
    main_summary: Mutex<Option<Arc<dyn MainSummary>>>,
    /// How many tasks of one batch run at once.
    max_parallel: usize,
    next_batch: AtomicU64,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Dispatcher {
    /// A dispatcher and the receiving end of its background completions
    /// (task ids; the task board has their outcome).
    pub fn new(
        registry: Arc<Registry>,
        root: Root,
        emitter: Emitter,
        permissions: Permissions,
        supervisor: Supervisor,
        picks: ModelPicks,
        max_parallel: usize,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<String>) {
        let (completions, rx) = mpsc::unbounded_channel();
        let pool = Pool::new(
            registry.clone(),
            root.clone(),
            emitter.clone(),
            permissions,
            supervisor,
            picks,
        );
        let d = Self {
            registry,
            root,
            emitter,
            memory: Mutex::new(SubAgent::new()),
            pool,
            running: Default::default(),
            busy: Default::default(),
            next_call: AtomicU64::new(1),
            next_task: AtomicU64::new(1),
            completions,
            tasks: Default::default(),
            internal: Mutex::new(None),
            main_summary: Mutex::new(None),
            max_parallel: max_parallel.max(1),
            next_batch: AtomicU64::new(1),
        };
        (Arc::new(d), rx)
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn root(&self) -> &Root {
        &self.root
    }

    pub fn emitter(&self) -> &Emitter {
        &self.emitter
    }

    /// Lets calls without an `agent` run the internal agent.
    pub fn set_internal(&self, runner: Arc<dyn Agent>) {
        *lock(&self.internal) = Some(runner);
    }

    /// Lets `include_main_summary` summarise the main conversation.
    pub fn set_main_summary(&self, summary: Arc<dyn MainSummary>) {
        *lock(&self.main_summary) = Some(summary);
    }

    /// How many tasks of one batch run at once.
    pub fn max_parallel(&self) -> usize {
        self.max_parallel
    }

    /// Runs a `subagent` call. A background call returns at once.
    pub async fn call(self: &Arc<Self>, input: SubAgentCallInput) -> Result<Reply, DispatchError> {
        self.call_with(input, None, 0).await
    }

    /// Runs a call whose turn is cancelled when `cancel` turns true (a
    /// foreground call; a background one only by [`Dispatcher::cancel`]),
    /// made at nesting `depth` (0: by the main chat).
    pub async fn call_with(
        self: &Arc<Self>,
        input: SubAgentCallInput,
        cancel: Option<watch::Receiver<bool>>,
        depth: u32,
    ) -> Result<Reply, DispatchError> {
        let specs = input.task_specs()?;
        let exclude = input.exclude()?;
        if input.is_batch() {
            return Ok(self.batch(&input, specs, cancel, depth, exclude).await);
        }
        let spec = specs.into_iter().next().expect("a single call is one task");
        let prepared = self.prepare(spec, input.continue_session, depth, false)?;
        let summary = self
            .summary_for(input.include_main_summary, cancel.as_ref())
            .await;
        let opened = self.open(
            prepared,
            Launch {
                background: input.run_in_background,
                batch_id: None,
                place: None,
                cancel,
                summary: summary.as_deref(),
                exclude: exclude.as_ref(),
            },
        );
        match opened.task_id.clone() {
            Some(task_id) => {
                let call_id = opened.job.call_id.clone();
                let this = self.clone();
                tokio::spawn(async move { this.run(opened).await });
                Ok(Reply::Started { task_id, call_id })
            }
            None => Ok(Reply::Done(self.run(opened).await)),
        }
    }

    /// The main conversation's summary, when asked for.
    async fn summary_for(
        &self,
        wanted: bool,
        cancel: Option<&watch::Receiver<bool>>,
    ) -> Option<String> {
        if !wanted {
            return None;
        }
        let source = lock(&self.main_summary).clone();
        let summary = match source {
            Some(source) => {
                // Without a caller's cancel, a receiver that never fires.
                let cancel = cancel.cloned().unwrap_or_else(|| watch::channel(false).1);
                source.summary(cancel).await
            }
            None => None,
        };
        if summary.is_none() {
            self.emitter.emit(Event::Notice {
                level: NoticeLevel::Info,
                text: "include_main_summary: there is no main conversation to summarise yet; \
                       the sub-agent gets its message alone"
                    .into(),
            });
        }
        summary
    }

    /// Resolves a task: its agent, its message and the session to resume
    /// (claimed, so no other call resumes it meanwhile).
    fn prepare(
        &self,
        spec: TaskSpec,
        continue_session: bool,
        depth: u32,
        in_batch: bool,
    ) -> Result<Prepared, DispatchError> {
        let (agent, runner) = match spec.agent.as_deref() {
            Some(agent) => {
                let runner =
                    self.pool
                        .agent(agent)
                        .map_err(|source| DispatchError::UnknownAgent {
                            source,
                            internal: lock(&self.internal).is_some(),
                        })?;
                (AgentRef::Acp(agent.to_string()), runner)
            }
            None => (
                AgentRef::Internal,
                lock(&self.internal)
                    .clone()
                    .ok_or(DispatchError::NoInternalAgent)?,
            ),
        };
        let (message, mut resume) = {
            let mut memory = lock(&self.memory);
            // A batch task says what to do itself; a single call may
            // send the last message again.
            let message = if in_batch {
                match spec.input.as_deref().map(str::trim) {
                    Some(m) if !m.is_empty() => m.to_string(),
                    _ => return Err(DispatchError::EmptyInput),
                }
            } else {
                memory.resolve_input(spec.input.as_deref())?
            };
            // The internal agent starts fresh every time.
            let resume = if runner.keeps_sessions() {
                memory
                    .resume_id(agent.name(), continue_session)
                    .map(str::to_string)
            } else {
                None
            };
            (message, resume)
        };
        // Claim the session to resume; one busy with another turn is not
        // resumed twice (checked and claimed under one lock).
        if let Some(id) = resume.clone() {
            let claimed = lock(&self.busy).insert((agent.name().to_string(), id.clone()));
            if !claimed {
                self.emitter.emit(Event::Notice {
                    level: NoticeLevel::Info,
                    text: format!(
                        "{}'s session {id} is busy with another call; this one gets a new session",
                        agent.name()
                    ),
                });
                resume = None;
            }
        }
        Ok(Prepared {
            agent,
            runner,
            depth: depth + 1,
            message,
            code_review: spec.code_review,
            requirements: spec.output_requirements,
            resume,
        })
    }

    /// Opens a prepared task's box: its ids, its steering handle, its
    /// `subagent_started`.
    fn open(&self, task: Prepared, launch: Launch<'_>) -> Opened {
        let call_id = format!("call-{}", self.next_call.fetch_add(1, Ordering::SeqCst));
        let task_id = launch
            .background
            .then(|| format!("t{}", self.next_task.fetch_add(1, Ordering::SeqCst)));
        let (handle, control) = controls();
        let cancel_tx = handle.cancel.clone();
        if let (Some(outer), None) = (&launch.cancel, &task_id) {
            // The caller's cancel reaches this call's turn (until the call
            // is over and nothing listens any more).
            let mut outer = outer.clone();
            let tx = cancel_tx.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = cancelled(&mut outer) => {
                        let _ = tx.send(true);
                    }
                    _ = tx.closed() => {}
                }
            });
        }
        lock(&self.running).insert(call_id.clone(), handle);
        if task_id.is_some() {
            lock(&self.tasks).insert(
                call_id.clone(),
                TaskMeta {
                    agent: task.agent.clone(),
                    runner: task.runner.clone(),
                    depth: task.depth,
                    code_review: task.code_review,
                    exclude: launch.exclude.cloned(),
                    session_id: None,
                },
            );
        }
        let queued = matches!(launch.place, Some(Place::Wait(_)));
        self.emitter.emit(Event::SubagentStarted {
            call_id: call_id.clone(),
            task_id: task_id.clone(),
            agent: task.agent.clone(),
            input: task.message.clone(),
            code_review: task.code_review,
            background: launch.background,
            session: None,
            batch_id: launch.batch_id.map(str::to_string),
            queued,
        });
        let prompt = compose_prompt(
            &task.message,
            launch.summary,
            task.requirements.as_deref(),
            task.code_review,
        );
        Opened {
            job: CallJob {
                agent: task.agent,
                runner: task.runner,
                depth: task.depth,
                call_id,
                task_id: task_id.clone(),
                prompt,
                code_review: task.code_review,
                resume: task.resume,
                exclude: launch.exclude.cloned(),
            },
            control,
            task_id,
            place: launch.place,
        }
    }

    /// Runs a batch: its tasks in parallel, at most `max_parallel` at
    /// once, the rest queued. A task that cannot run is an error entry
    /// (`tasks[i]: ...`) and the others run all the same.
    async fn batch(
        self: &Arc<Self>,
        input: &SubAgentCallInput,
        specs: Vec<TaskSpec>,
        cancel: Option<watch::Receiver<bool>>,
        depth: u32,
        exclude: Option<Exclude>,
    ) -> Reply {
        let batch_id = format!("b{}", self.next_batch.fetch_add(1, Ordering::SeqCst));
        let review = specs.iter().all(|s| s.code_review);
        let total = specs.len();
        let prepared: Vec<(usize, String, Result<Prepared, String>)> = specs
            .into_iter()
            .enumerate()
            .map(|(i, spec)| {
                let agent = spec.agent.clone().unwrap_or_else(|| "internal".into());
                let task = self
                    .prepare(spec, input.continue_session, depth, true)
                    .map_err(|e| format!("tasks[{i}]: {e}"));
                (i, agent, task)
            })
            .collect();
        for (_, _, task) in &prepared {
            if let Err(e) = task {
                self.emitter.emit(Event::Error {
                    text: format!("subagent: {e}"),
                });
            }
        }
        let summary = self
            .summary_for(input.include_main_summary, cancel.as_ref())
            .await;
        self.emitter.emit(Event::BatchStarted {
            batch_id: batch_id.clone(),
            tasks: total as u32,
            review,
        });
        let places = Arc::new(Semaphore::new(self.max_parallel));
        let mut runs = Vec::with_capacity(total);
        for (index, agent, task) in prepared {
            let run = task.map(|task| {
                // The first `max_parallel` take their places at once, in order.
                let place = match places.clone().try_acquire_owned() {
                    Ok(permit) => Place::Held(permit),
                    Err(_) => Place::Wait(places.clone()),
                };
                let launch = Launch {
                    background: input.run_in_background,
                    batch_id: Some(&batch_id),
                    place: Some(place),
                    cancel: cancel.clone(),
                    summary: summary.as_deref(),
                    exclude: exclude.as_ref(),
                };
                self.open(task, launch)
            });
            runs.push((index, agent, run));
        }
        let starts: Vec<TaskStart> = runs
            .iter()
            .map(|(index, agent, run)| TaskStart {
                index: *index,
                agent: agent.clone(),
                started: match run {
                    Ok(opened) => Ok((
                        opened.task_id.clone().unwrap_or_default(),
                        matches!(opened.place, Some(Place::Wait(_))),
                    )),
                    Err(e) => Err(e.clone()),
                },
            })
            .collect();
        let this = self.clone();
        let id = batch_id.clone();
        let all = async move {
            let call_ids: Vec<Option<String>> = runs
                .iter()
                .map(|(_, _, run)| run.as_ref().ok().map(|o| o.job.call_id.clone()))
                .collect();
            let tasks = futures::future::join_all(runs.into_iter().map(|(index, agent, run)| {
                let this = this.clone();
                async move {
                    let result = match run {
                        Ok(opened) => Ok(this.run(opened).await),
                        Err(e) => Err(e),
                    };
                    TaskResult {
                        index,
                        agent,
                        result,
                    }
                }
            }))
            .await;
            let quorum = review.then(|| BatchResult::quorum_of(&tasks, &call_ids));
            let result = BatchResult {
                batch_id: id,
                tasks,
                quorum,
            };
            if let Some(quorum) = &result.quorum {
                this.emitter.emit(Event::ReviewQuorum {
                    batch_id: result.batch_id.clone(),
                    quorum: quorum.clone(),
                });
            }
            this.emitter.emit(Event::BatchFinished {
                batch_id: result.batch_id.clone(),
                total: result.tasks.len() as u32,
                succeeded: result.succeeded(),
                failed: result.failed(),
                worst_verdict: result.worst_verdict(),
            });
            result
        };
        if input.run_in_background {
            tokio::spawn(all);
            Reply::BatchStarted {
                batch_id,
                tasks: starts,
            }
        } else {
            Reply::Batch(all.await)
        }
    }

    /// Runs a call: it waits for its place in a batch first, then its
    /// turn, then the follow-ups queued for it while it ran, each as a new
    /// turn on the same session; returns the last outcome.
    async fn run(self: &Arc<Self>, opened: Opened) -> Outcome {
        let Opened {
            mut job,
            mut control,
            place,
            ..
        } = opened;
        // A queued task waits for its place (or its cancel) first.
        let _place = match place {
            None => None,
            Some(Place::Held(permit)) => Some(permit),
            Some(Place::Wait(places)) => {
                let permit = tokio::select! {
                    biased;
                    _ = cancelled(&mut control.cancel) => None,
                    permit = places.acquire_owned() => permit.ok(),
                };
                match permit {
                    Some(permit) => {
                        self.emitter.emit(Event::SubagentDequeued {
                            call_id: job.call_id.clone(),
                        });
                        Some(permit)
                    }
                    None => {
                        let outcome = Outcome::new(
                            StopReason::Cancelled,
                            format!("{}: cancelled while queued", job.agent.name()),
                        );
                        let outcome = self.finish_turn(&job, outcome);
                        self.close(&job);
                        return outcome;
                    }
                }
            }
        };
        loop {
            let outcome = self.turn(&job, &mut control).await;
            // Queued follow-ups (checked and taken under the lock that
            // queues them, so none is lost), else the call is done.
            let next = {
                let mut running = lock(&self.running);
                let queued = running
                    .get_mut(&job.call_id)
                    .map(|h| std::mem::take(&mut h.followups))
                    .unwrap_or_default();
                if queued.is_empty()
                    || !outcome.stop_reason.answered()
                    || outcome.stop_reason == StopReason::Cancelled
                    || outcome.session_id.is_none()
                {
                    drop(running);
                    self.close(&job);
                    None
                } else {
                    Some(queued.join("\n\n"))
                }
            };
            let Some(message) = next else {
                return outcome;
            };
            let session_id = outcome.session_id.clone().expect("checked above");
            lock(&self.busy).insert((job.agent.name().to_string(), session_id.clone()));
            self.emitter.emit(Event::SubagentFollowup {
                call_id: job.call_id.clone(),
                input: message.clone(),
            });
            job.prompt = prompt_for(message, job.code_review);
            job.resume = Some(session_id);
        }
    }

    /// One turn of a call; its finish events are emitted.
    async fn turn(self: &Arc<Self>, job: &CallJob, control: &mut TurnControl) -> Outcome {
        // The moment the call is asked to stop, its box says so.
        let watcher = {
            let mut cancel = control.cancel.clone();
            let emitter = self.emitter.clone();
            let call_id = job.call_id.clone();
            tokio::spawn(async move {
                cancelled(&mut cancel).await;
                emitter.emit(Event::SubagentCancelling { call_id });
            })
        };
        let sink = CallSink {
            dispatcher: self,
            agent: job.agent.name(),
            call_id: &job.call_id,
        };
        let input = TurnInput {
            prompt: &job.prompt,
            resume: job.resume.as_deref(),
            exclude: job.exclude.as_ref(),
            depth: job.depth,
        };
        let result = job.runner.turn(input, &sink, control).await;
        watcher.abort();
        self.finish_turn(job, result)
    }

    /// Ends a turn: its session is freed (and stored, if the turn got an
    /// answer), its box closes.
    fn finish_turn(&self, job: &CallJob, result: Outcome) -> Outcome {
        {
            let mut busy = lock(&self.busy);
            for id in [&job.resume, &result.session_id].into_iter().flatten() {
                busy.remove(&(job.agent.name().to_string(), id.clone()));
            }
        }
        // Only a turn that got an answer moves the session on.
        if result.stop_reason.answered()
            && let Some(id) = &result.session_id
        {
            lock(&self.memory).store_session(job.agent.name(), id);
        }
        let mut outcome = result;
        for event in super::finish(&job.call_id, &job.agent, &outcome, job.code_review) {
            if let Event::SubagentFinished { severity, .. } = &event {
                outcome.severity = *severity;
            }
            self.emitter.emit(event);
        }
        if let Some(meta) = lock(&self.tasks).get_mut(&job.call_id)
            && outcome.session_id.is_some()
        {
            meta.session_id = outcome.session_id.clone();
        }
        outcome
    }

    /// Ends a call after its last turn: a background task reports (once),
    /// and only then stops counting as running, so a waiting chat never
    /// misses the report.
    fn close(&self, job: &CallJob) {
        if let Some(task_id) = &job.task_id {
            let _ = self.completions.send(task_id.clone());
        }
        lock(&self.running).remove(&job.call_id);
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

    /// Answers a permission request shown in a call's box.
    pub fn answer(&self, call_id: &str, answer: PermissionAnswer) -> bool {
        match lock(&self.running).get(call_id) {
            Some(handle) => handle.answers.send(answer).is_ok(),
            None => false,
        }
    }

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

    /// Waits until the task (or every task) is no longer running.
    async fn until_idle(&self, task_id: Option<&str>) {
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

    /// Sends a follow-up message to a background task: queued for its
    /// next turn while it runs (`"queued"`), or a new turn on its session
    /// once it is done (`"sent"`; its box reopens).
    pub fn follow_up(
        self: &Arc<Self>,
        task_id: &str,
        message: &str,
    ) -> Result<&'static str, DispatchError> {
        let message = message.trim();
        if message.is_empty() {
            return Err(DispatchError::EmptyMessage);
        }
        let call_id = self
            .emitter
            .board(|b| b.task(task_id).map(|t| t.call_id.clone()))
            .ok_or_else(|| UnknownTask {
                id: task_id.to_string(),
                known: self
                    .emitter
                    .board(|b| b.tasks().filter_map(|e| e.task_id.clone()).collect()),
            })?;
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
            return Ok("queued");
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
            resume: Some(session_id),
            exclude: meta.exclude,
        };
        let opened = Opened {
            job,
            control,
            task_id: Some(task_id.to_string()),
            place: None,
        };
        let this = self.clone();
        tokio::spawn(async move { this.run(opened).await });
        Ok("sent")
    }

    /// Whether any call is still running.
    pub fn busy(&self) -> bool {
        !lock(&self.running).is_empty()
    }

    /// Forgets sessions and the last input (`/new`).
    pub fn forget(&self) {
        lock(&self.memory).clear();
    }

    /// Remembers `id` as `agent`'s session, to be resumed by its next call
    /// (a session of an earlier quorum process).
    pub fn remember_session(&self, agent: &str, id: &str) {
        lock(&self.memory).store_session(agent, id);
    }

    /// The session stored for `agent`, if any.
    pub fn stored_session(&self, agent: &str) -> Option<String> {
        lock(&self.memory).stored_session(agent).map(str::to_string)
    }

    /// Stops every agent process (starts under way stop with their calls).
    pub fn shutdown(&self) {
        self.pool.shutdown();
    }
}

/// How long `wait_seconds` waits: at most [`MAX_WAIT_SECONDS`]; none for 0.
pub fn wait_for(wait_seconds: Option<u64>) -> Option<std::time::Duration> {
    wait_seconds
        .filter(|s| *s > 0)
        .map(|s| std::time::Duration::from_secs(s.min(MAX_WAIT_SECONDS)))
}

/// The message a follow-up turn sends: a review's contract appended.
fn prompt_for(mut message: String, code_review: bool) -> String {
    if code_review {
        message.push_str(REVIEW_CONTRACT);
    }
    message
}

struct CallJob {
    agent: AgentRef,
    /// The agent that runs its turns.
    runner: Arc<dyn Agent>,
    /// The nesting depth its turns run at.
    depth: u32,
    call_id: String,
    task_id: Option<String>,
    prompt: String,
    code_review: bool,
    resume: Option<String>,
    exclude: Option<Exclude>,
}

/// A task resolved but not started.
struct Prepared {
    agent: AgentRef,
    runner: Arc<dyn Agent>,
    /// The nesting depth its turns run at.
    depth: u32,
    message: String,
    code_review: bool,
    requirements: Option<String>,
    resume: Option<String>,
}

/// A batch task's place among the `max_parallel` that run at once: held
/// already, or to wait for.
enum Place {
    Held(OwnedSemaphorePermit),
    Wait(Arc<Semaphore>),
}

/// How a prepared task is opened.
struct Launch<'a> {
    background: bool,
    batch_id: Option<&'a str>,
    /// `None`: not in a batch, runs at once.
    place: Option<Place>,
    /// The caller's cancel (foreground calls).
    cancel: Option<watch::Receiver<bool>>,
    summary: Option<&'a str>,
    exclude: Option<&'a Exclude>,
}

/// A task whose box is open, ready to run.
struct Opened {
    job: CallJob,
    control: TurnControl,
    task_id: Option<String>,
    place: Option<Place>,
}

/// Turns a call's activity into events (the task board keeps its summary).
struct CallSink<'a> {
    dispatcher: &'a Dispatcher,
    agent: &'a str,
    call_id: &'a str,
}

impl TurnSink for CallSink<'_> {
    fn activity(&self, activity: Activity) {
        self.dispatcher.emitter.emit(Event::SubagentActivity {
            call_id: self.call_id.to_string(),
            activity,
        });
    }

    fn child(
        &self,
        child_id: &str,
        title: Option<&str>,
        description: Option<&str>,
        state: Option<crate::event::ChildState>,
        can_cancel: bool,
    ) {
        self.dispatcher.emitter.emit(Event::SubagentChild {
            call_id: self.call_id.to_string(),
            child_id: child_id.to_string(),
            title: title.map(str::to_string),
            description: description.map(str::to_string),
            state,
            can_cancel,
        });
    }

    fn child_activity(&self, child_id: &str, activity: Activity) {
        self.dispatcher.emitter.emit(Event::SubagentChildActivity {
            call_id: self.call_id.to_string(),
            child_id: child_id.to_string(),
            activity,
        });
    }

    fn session(&self, kind: SessionKind, session_id: &str) {
        lock(&self.dispatcher.busy).insert((self.agent.to_string(), session_id.to_string()));
        self.dispatcher.emitter.emit(Event::SubagentSession {
            call_id: self.call_id.to_string(),
            session: kind,
            session_id: Some(session_id.to_string()),
        });
    }

    fn notice(&self, text: &str) {
        self.dispatcher.emitter.emit(Event::Notice {
            level: NoticeLevel::Warning,
            text: text.to_string(),
        });
    }

    fn model_picked(&self, model: &str) {
        if self.dispatcher.pool.pick(self.agent, model) {
            self.dispatcher.emitter.emit(Event::Notice {
                level: NoticeLevel::Info,
                text: format!(
                    "{}: model {model} picked; its next sessions start with it",
                    self.agent
                ),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the model reads of a reply: the tool result's text.
    fn text(reply: &Reply) -> String {
        reply.to_json().to_string()
    }

    fn reviewed(stop_reason: StopReason, output: &str, severity: Option<Severity>) -> Outcome {
        let mut outcome = Outcome::new(stop_reason, output);
        outcome.severity = severity;
        outcome.session_id = Some("s1".into());
        outcome
    }

    #[test]
    fn a_single_call_reads_its_output_and_stop_reason() {
        let done = reviewed(
            StopReason::EndTurn,
            "<!-- severity: red -->\nBad.",
            Some(Severity::Red),
        );
        assert_eq!(
            text(&Reply::Done(done)),
            r#"{"output":"<!-- severity: red -->\nBad.","stop_reason":"end_turn"}"#
        );
        assert_eq!(
            text(&Reply::Done(Outcome::error("fake: exited"))),
            r#"{"output":"fake: exited","stop_reason":"error"}"#
        );
        let started = Reply::Started {
            task_id: "t1".into(),
            call_id: "call-1".into(),
        };
        assert_eq!(text(&started), r#"{"task_id":"t1","status":"running"}"#);
    }

    #[test]
    fn a_batch_reads_its_summary_tasks_and_quorum() {
        let tasks = vec![
            TaskResult {
                index: 0,
                agent: "fake".into(),
                result: Ok(reviewed(
                    StopReason::EndTurn,
                    "<!-- severity: yellow -->\nNits.",
                    Some(Severity::Yellow),
                )),
            },
            TaskResult {
                index: 1,
                agent: "fake-b".into(),
                result: Ok(reviewed(StopReason::EndTurn, "plain \"quoted\"", None)),
            },
            TaskResult {
                index: 2,
                agent: "fake-c".into(),
                result: Ok(Outcome::error("fake-c: exited")),
            },
            TaskResult {
                index: 3,
                agent: "nope".into(),
                result: Err("tasks[3]: unknown agent \"nope\"".into()),
            },
            TaskResult {
                index: 4,
                agent: "internal".into(),
                result: Ok(reviewed(StopReason::Cancelled, "cut", None)),
            },
        ];
        let call_ids: Vec<Option<String>> = (0..5).map(|i| Some(format!("call-{i}"))).collect();
        let quorum = Some(BatchResult::quorum_of(&tasks, &call_ids));
        let batch = BatchResult {
            batch_id: "b1".into(),
            tasks,
            quorum,
        };
        assert_eq!(
            text(&Reply::Batch(batch)),
            concat!(
                r#"{"summary":{"total":5,"succeeded":2,"failed":3,"worst_verdict":"yellow"},"#,
                r#""tasks":[{"task":0,"agent":"fake","output":"Nits.","stop_reason":"end_turn","severity":"yellow"},"#,
                r#"{"task":1,"agent":"fake-b","output":"plain \"quoted\"","stop_reason":"end_turn"},"#,
                r#"{"task":2,"agent":"fake-c","stop_reason":"error","error":"tasks[2]: fake-c: exited"},"#,
                r#"{"task":3,"agent":"nope","error":"tasks[3]: unknown agent \"nope\""},"#,
                r#"{"task":4,"agent":"internal","output":"cut","stop_reason":"cancelled"}],"#,
                r#""quorum":{"verdict":"yellow","agree":1,"total":5,"text":"yellow · 1 of 5"}}"#
            )
        );
        // No verdict: nulls, not left out; no quorum: left out.
        let tasks = vec![TaskResult {
            index: 0,
            agent: "fake".into(),
            result: Ok(reviewed(StopReason::EndTurn, "ok", None)),
        }];
        let quorum = Some(BatchResult::quorum_of(&tasks, &[None]));
        let mut batch = BatchResult {
            batch_id: "b2".into(),
            tasks,
            quorum,
        };
        assert_eq!(
            text(&Reply::Batch(batch.clone())),
            concat!(
                r#"{"summary":{"total":1,"succeeded":1,"failed":0,"worst_verdict":null},"#,
                r#""tasks":[{"task":0,"agent":"fake","output":"ok","stop_reason":"end_turn"}],"#,
                r#""quorum":{"verdict":null,"agree":0,"total":1,"text":"no verdict · 0 of 1"}}"#
            )
        );
        batch.quorum = None;
        assert_eq!(
            text(&Reply::Batch(batch)),
            concat!(
                r#"{"summary":{"total":1,"succeeded":1,"failed":0,"worst_verdict":null},"#,
                r#""tasks":[{"task":0,"agent":"fake","output":"ok","stop_reason":"end_turn"}]}"#
            )
        );
    }

    #[test]
    fn a_background_batch_reads_a_task_id_or_an_error_per_task() {
        let started = Reply::BatchStarted {
            batch_id: "b1".into(),
            tasks: vec![
                TaskStart {
                    index: 0,
                    agent: "fake".into(),
                    started: Ok(("t1".into(), false)),
                },
                TaskStart {
                    index: 1,
                    agent: "fake".into(),
                    started: Ok(("t2".into(), true)),
                },
                TaskStart {
                    index: 2,
                    agent: "internal".into(),
                    started: Err("tasks[2]: `input` is empty".into()),
                },
            ],
        };
        assert_eq!(
            text(&started),
            concat!(
                r#"{"batch_id":"b1","tasks":[{"task":0,"agent":"fake","task_id":"t1","status":"running"},"#,
                r#"{"task":1,"agent":"fake","task_id":"t2","status":"queued"},"#,
                r#"{"task":2,"agent":"internal","error":"tasks[2]: `input` is empty"}]}"#
            )
        );
    }

    #[test]
    fn wait_seconds_is_capped_at_600() {
        use std::time::Duration;
        assert_eq!(wait_for(None), None);
        assert_eq!(wait_for(Some(0)), None);
        assert_eq!(wait_for(Some(5)), Some(Duration::from_secs(5)));
        assert_eq!(wait_for(Some(86_400)), Some(Duration::from_secs(600)));
    }
}
