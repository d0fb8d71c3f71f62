//! The dispatcher: runs `subagent` calls on ACP agents (through the
//! [`Pool`]) or on the internal agent (injected), both behind the
//! [`Agent`] interface, and remembers their sessions. This file holds its
//! state and what is asked of it as a whole; a call's life is in
//! `call.rs`, batches in `batch.rs`, steering running calls in `steer.rs`,
//! a foreground call sent to the background in `detach.rs`, a review quorum
//! that checks its findings in `verify.rs`, worktree tasks
//! in `isolate.rs`, what a turn leaves in the person's tree that other
//! programs run in `planted.rs`, the person's settings in `settings.rs`: its parts, which
//! use its state here and one another, never round in a circle.
//!
//! Call and task state is not kept here: every call reports what happens
//! as events, and the session's task board (behind the [`Emitter`]) is the
//! one record of it. The dispatcher keeps only what steers running calls
//! (their cancel flags and permission answers) and the agents they run on.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};

pub mod arena;
pub mod batch;
mod call;
pub mod detach;
pub mod isolate;
mod planted;
mod ready;
mod remote;
pub mod settings;
mod steer;
mod verify;

pub use steer::FollowUp;

use super::input::InputError;
use super::lock;
use super::memory::{NoInput, SubAgent};
use super::picks::ModelPicks;
use super::pool::Pool;
use crate::acp::registry::{Registry, UnknownAgent};
use crate::agent::{Agent, PermissionAnswer, Permissions, TurnControl};
use crate::confine::fsroot::{Exclude, Root};
use crate::event::{AgentRef, Event, Outcome, Stamped};
use crate::runtime::board::UnknownTask;
use crate::runtime::bus::Emitter;
use crate::runtime::supervisor::Supervisor;
use batch::{BatchResult, TaskStart};

/// How many tasks of one batch run at once unless the config file says
/// otherwise (`max_parallel`).
pub const MAX_PARALLEL: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error(transparent)]
    NoInput(#[from] NoInput),
    #[error("`input` is empty: say what this task should do")]
    EmptyInput,
    #[error("the session is ending: no new call")]
    Closed,
    /// A spending cap was reached: what was spent, of which cap.
    #[error("{0}")]
    Budget(String),
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
    #[error("{id} is {state}: only an interrupted or failed task runs again with `retry`")]
    NotRetryable { id: String, state: &'static str },
    #[error(transparent)]
    Worktree(#[from] crate::worktree::WorktreeError),
    #[error("no state directory to put worktrees in (set HOME or XDG_STATE_HOME)")]
    NoStateDir,
    #[error("{0} is still running: wait for it (or cancel it) first")]
    StillRunning(String),
    #[error(
        "{0} is not a worktree task of this session nor a branch quorum made (`quorum worktrees` lists them)"
    )]
    NoWorktreeTask(String),
    #[error(
        "{branch}: its latest review quorum is red, so it is not merged; fix it and review it again, or `/merge! {id}` to merge it anyway"
    )]
    RedQuorum { branch: String, id: String },
    #[error(
        "{branch} changes files that git, hook managers, editors or agent CLIs run or read as configuration once it is merged ({files}), so it is not merged; read them first, then `/merge! {id}` merges anyway"
    )]
    RunLater {
        branch: String,
        files: String,
        id: String,
    },
    #[error("no arena in this session yet: `@A,B,C+ task` runs one")]
    NoArena,
    #[error("the last arena has no winner ({0}): name the writer, `/merge c2`")]
    NoWinner(String),
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
#[derive(Debug, Clone, PartialEq)]
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

pub(super) struct Handle {
    pub(super) cancel: watch::Sender<bool>,
    /// A second cancel: the agent is ended at once, not waited for.
    pub(super) kill: watch::Sender<bool>,
    pub(super) answers: mpsc::UnboundedSender<PermissionAnswer>,
    /// Child sessions to cancel (nested sub-agents), by session id.
    pub(super) cancel_children: mpsc::UnboundedSender<String>,
    /// Follow-up messages for the call's session, sent in turn once the
    /// running turn ends.
    pub(super) followups: Vec<String>,
    pub(super) elicitations: mpsc::UnboundedSender<crate::agent::ElicitationAnswer>,
    /// A foreground call that may go on in the background
    /// ([`Dispatcher::detach`]): what it needs as a task.
    pub(super) meta: Option<TaskMeta>,
    /// The task it became when its caller stopped waiting.
    pub(super) task_id: Option<String>,
    /// Passes its caller's cancel on to it (a foreground call).
    pub(super) forward: Option<tokio::task::AbortHandle>,
}

/// A running call's controls: the handle the dispatcher keeps, and the
/// ends its turn reads.
pub(super) fn controls() -> (Handle, TurnControl) {
    let (cancel, cancel_rx) = watch::channel(false);
    let (kill, kill_rx) = watch::channel(false);
    let (answers, answers_rx) = mpsc::unbounded_channel();
    let (cancel_children, cancel_children_rx) = mpsc::unbounded_channel();
    let (elicitations, elicitations_rx) = mpsc::unbounded_channel();
    (
        Handle {
            cancel,
            kill,
            answers,
            cancel_children,
            followups: Vec::new(),
            elicitations,
            meta: None,
            task_id: None,
            forward: None,
        },
        TurnControl {
            cancel: cancel_rx,
            kill: kill_rx,
            answers: answers_rx,
            cancel_children: cancel_children_rx,
            elicitations: elicitations_rx,
        },
    )
}

/// What a background task needs to take a follow-up turn once it is done.
#[derive(Clone)]
pub(super) struct TaskMeta {
    pub(super) agent: AgentRef,
    pub(super) runner: Arc<dyn Agent>,
    /// The nesting depth its turns run at.
    pub(super) depth: u32,
    pub(super) code_review: bool,
    pub(super) exclude: Option<Exclude>,
    /// The session its last turn ran in.
    pub(super) session_id: Option<String>,
    /// Its worktree, for a worktree task: follow-ups run there too.
    pub(super) worktree: Option<crate::worktree::Worktree>,
    /// Its message's first line (its commits' subject).
    pub(super) title: String,
}

/// The session's `subagent` calls: one dispatcher per session, shared by
/// the chat, the internal agents' nested calls and the front ends.
pub struct Dispatcher {
    pub(super) registry: Arc<Registry>,
    pub(super) root: Root,
    pub(super) emitter: Emitter,
    pub(super) memory: Mutex<SubAgent>,
    /// The ACP agents.
    pub(super) pool: Arc<Pool>,
    /// Running calls, by call id.
    pub(super) running: Mutex<HashMap<String, Handle>>,
    /// Sessions a running turn is using, by `(agent, session id)`: a second
    /// call may not resume a session in the middle of a turn.
    pub(super) busy: Mutex<HashSet<(String, String)>>,
    pub(super) next_call: AtomicU64,
    pub(super) next_task: AtomicU64,
    /// Background tasks that finished, by task id, for the chat loop.
    pub(super) completions: mpsc::UnboundedSender<String>,
    /// Background calls, by call id: what a follow-up turn needs.
    pub(super) tasks: Mutex<HashMap<String, TaskMeta>>,
    /// Foreground worktree calls, by call id: what one needs to become a
    /// task when a follow-up names it (`/msg c4`).
    pub(super) foreground: Mutex<HashMap<String, TaskMeta>>,
    /// The internal agent, once there is one.
    pub(super) internal: Mutex<Option<Arc<dyn Agent>>>,
    /// Writes the main conversation's summary for `include_main_summary`.
    pub(super) main_summary: Mutex<Option<Arc<dyn MainSummary>>>,
    /// How many tasks of one batch run at once.
    pub(super) max_parallel: usize,
    pub(super) next_batch: AtomicU64,
    /// The session's worktree tasks.
    pub(super) worktrees: Mutex<isolate::Worktrees>,
    /// Shut down with the session: no call opens any more (a `/retry`
    /// winding down must not make worktrees and run git after it).
    pub(super) closed: std::sync::atomic::AtomicBool,
    /// Whether the check after a turn said it stopped at its bound (once).
    pub(super) cut_said: std::sync::atomic::AtomicBool,
    /// Who reviews an arena's branches (`None`: every installed agent).
    pub(super) arena_reviewers: Mutex<Option<Vec<String>>>,
    /// The session's last arena, for `/merge best` and `/discard others`.
    pub(super) arena: Mutex<Option<(String, crate::event::arena::Comparison)>>,
    /// Each writer branch's last check, and the test files it touched.
    pub(super) checks: Mutex<HashMap<String, (crate::event::arena::CheckCell, Vec<String>)>>,
    /// Arenas a continued session's transcript left uncompared, until
    /// [`Dispatcher::resume_arenas`] takes them up.
    pub(super) unfinished: Mutex<Vec<crate::event::arena::Unfinished>>,
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
            foreground: Default::default(),
            internal: Mutex::new(None),
            main_summary: Mutex::new(None),
            max_parallel: max_parallel.max(1),
            next_batch: AtomicU64::new(1),
            worktrees: Default::default(),
            closed: Default::default(),
            cut_said: Default::default(),
            arena_reviewers: Default::default(),
            arena: Default::default(),
            checks: Default::default(),
            unfinished: Default::default(),
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

    /// Whether any call is still running.
    pub fn busy(&self) -> bool {
        !lock(&self.running).is_empty()
    }

    /// Cancels what still runs and gives the agents a moment (5 s) to end
    /// their turns, so the transcript says how each ended; then ends those
    /// that did not, and waits a little (2 s) for them.
    pub async fn wind_down(&self) {
        use std::time::{Duration, Instant};
        if !self.busy() {
            return;
        }
        self.cancel_all();
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.busy() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if self.busy() {
            self.kill_cancelling();
            let deadline = Instant::now() + Duration::from_secs(2);
            while self.busy() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
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

    /// Goes on from a recorded session's events: the sub-agent memory they
    /// left (the last input, each agent's session), what a follow-up to
    /// each background task needs (its agent and session), and ids that
    /// follow theirs, so a new call never takes an old call's id. The task
    /// board is seeded by the bus.
    pub fn restore(&self, events: &[Stamped]) {
        *lock(&self.memory) = SubAgent::from_events(events.iter().map(|s| &s.event));
        let next = |counter: &AtomicU64, id: &str, prefix: &str| {
            if let Some(n) = id.strip_prefix(prefix).and_then(|n| n.parse::<u64>().ok()) {
                counter.fetch_max(n + 1, Ordering::SeqCst);
            }
        };
        // Each agent's runner, looked up once, not once a call: an agent
        // that is not installed costs a search of `PATH` every time.
        let mut runners: HashMap<&AgentRef, Option<Arc<dyn Agent>>> = HashMap::new();
        let mut meta = |agent, code_review, input: &str, session| {
            let runner = runners.entry(agent).or_insert_with(|| self.runner(agent));
            let runner = runner.clone()?;
            Some(task_meta(agent, runner, code_review, input, session))
        };
        let mut tasks = lock(&self.tasks);
        // Calls not (yet) tasks, and the sessions calls ran on.
        let mut foreground: HashMap<&String, (&AgentRef, bool, &String)> = HashMap::new();
        let mut sessions: HashMap<&str, &String> = HashMap::new();
        // Calls that had a worktree: of the foreground ones, the only ones
        // a follow-up can name once done (as in a live session).
        let mut isolated: HashSet<&str> = HashSet::new();
        for stamped in events {
            match &stamped.event {
                Event::SubagentStarted {
                    call_id,
                    task_id,
                    agent,
                    code_review,
                    input,
                    ..
                } => {
                    next(&self.next_call, call_id, "call-");
                    let Some(task_id) = task_id else {
                        // It may go on in the background later.
                        foreground.insert(call_id, (agent, *code_review, input));
                        continue;
                    };
                    next(&self.next_task, task_id, "t");
                    // What a follow-up message to the task needs: its
                    // agent, and (below) the session it ran on.
                    if let Some(meta) = meta(agent, *code_review, input, None) {
                        tasks.insert(call_id.clone(), meta);
                    }
                }
                Event::SubagentBackgrounded { call_id, task_id } => {
                    next(&self.next_task, task_id, "t");
                    let Some((agent, code_review, input)) = foreground.remove(call_id) else {
                        continue;
                    };
                    let session = sessions.get(call_id.as_str()).map(|id| id.to_string());
                    if let Some(meta) = meta(agent, code_review, input, session) {
                        tasks.insert(call_id.clone(), meta);
                    }
                }
                Event::WorktreeReady { call_id, .. } => {
                    isolated.insert(call_id);
                }
                Event::SubagentSession {
                    call_id,
                    session_id: Some(id),
                    ..
                } => {
                    sessions.insert(call_id, id);
                    if let Some(meta) = tasks.get_mut(call_id) {
                        meta.session_id = Some(id.clone());
                    }
                }
                Event::BatchStarted { batch_id, .. } => next(&self.next_batch, batch_id, "b"),
                _ => {}
            }
        }
        drop(tasks);
        // Worktree calls that stayed in the foreground: one becomes a task
        // when a follow-up names it (`restore_worktrees` keeps those whose
        // worktree is still there).
        let mut kept = lock(&self.foreground);
        for (call_id, (agent, code_review, input)) in foreground {
            if !isolated.contains(call_id.as_str()) {
                continue;
            }
            let session = sessions.get(call_id.as_str()).map(|id| id.to_string());
            if let Some(meta) = meta(agent, code_review, input, session) {
                kept.insert(call_id.clone(), meta);
            }
        }
        drop(kept);
        self.restore_worktrees(events);
        self.restore_arena(events);
    }

    /// What runs `agent`'s turns, if it is known and installed.
    fn runner(&self, agent: &AgentRef) -> Option<Arc<dyn Agent>> {
        match agent {
            AgentRef::Acp(name) => self.pool.agent(name).ok(),
            AgentRef::Internal => lock(&self.internal).clone(),
        }
    }

    /// Closes the agents' sessions quorum is done with: those open on
    /// their connections that no turn runs on (`session/close`, where an
    /// agent offers it). A closed session can still be reopened later.
    pub async fn close_sessions(&self) {
        let busy = lock(&self.busy).clone();
        self.pool.close_sessions(&busy).await;
    }

    /// Stops every agent process (starts under way stop with their calls).
    pub fn shutdown(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.pool.shutdown();
    }

    /// Makes call `call_id` a background task (its caller stopped waiting,
    /// or a follow-up named a finished foreground worktree call): a task
    /// id of its own, what its follow-ups need (`meta`), and
    /// `subagent_backgrounded` said. Its task id.
    pub(super) fn make_task(&self, call_id: &str, meta: TaskMeta) -> String {
        let task_id = format!("t{}", self.next_task.fetch_add(1, Ordering::SeqCst));
        lock(&self.tasks).insert(call_id.to_string(), meta);
        // A task now: its meta has one home.
        lock(&self.foreground).remove(call_id);
        self.emitter.emit(Event::SubagentBackgrounded {
            call_id: call_id.to_string(),
            task_id: task_id.clone(),
        });
        task_id
    }

    /// Refused once the session is shut down.
    pub(super) fn open_for_calls(&self) -> Result<(), DispatchError> {
        if self.closed.load(Ordering::SeqCst) {
            Err(DispatchError::Closed)
        } else {
            Ok(())
        }
    }
}

/// What a recorded background task's follow-ups need: its agent and what
/// runs it, and the session it ran on.
fn task_meta(
    agent: &AgentRef,
    runner: Arc<dyn Agent>,
    code_review: bool,
    input: &str,
    session_id: Option<String>,
) -> TaskMeta {
    TaskMeta {
        agent: agent.clone(),
        runner,
        depth: 1,
        code_review,
        exclude: None,
        session_id,
        worktree: None,
        title: crate::worktree::first_line(input).to_string(),
    }
}
