//! A call's life in the dispatcher: the task resolved (its agent, its
//! message, the session to resume), its box opened, its turns run on its
//! agent (follow-ups queued meanwhile included), its end reported; and the
//! sink that turns the agent's activity into the box's events.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::watch;

use super::detach::Detachable;
use super::{DispatchError, Dispatcher, Handle, Reply, TaskMeta, controls};
use crate::agent::{Agent, TurnControl, TurnInput, TurnSink};
use crate::confine::fsroot::Exclude;
use crate::event::{Activity, AgentRef, Event, NoticeLevel, Outcome, SessionKind, StopReason};
use crate::runtime::cancel::cancelled;
use crate::subagent::input::{REVIEW_CONTRACT, SubAgentCallInput, TaskSpec, compose_prompt};
use crate::subagent::lock;

impl Dispatcher {
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
        self.call_in(input, cancel, depth, None).await
    }

    /// [`Dispatcher::call_with`], its calls collected in `detach` when
    /// given, so that its caller may stop waiting for them
    /// ([`Dispatcher::detach`]): they go on as background tasks.
    pub async fn call_in(
        self: &Arc<Self>,
        input: SubAgentCallInput,
        cancel: Option<watch::Receiver<bool>>,
        depth: u32,
        detach: Option<&Detachable>,
    ) -> Result<Reply, DispatchError> {
        let specs = input.task_specs()?;
        let exclude = input.exclude()?;
        // A worktree task needs a repository: said before any agent starts.
        if specs.iter().any(|s| s.isolation) {
            self.repo()?;
        }
        if input.verify && !(input.is_batch() && specs.iter().all(|s| s.code_review)) {
            self.emitter.emit(Event::Notice {
                level: NoticeLevel::Info,
                text: "verify: only a batch of code reviews (`tasks`, each a `code_review`) \
                       checks its findings; this call is not one, and runs unchecked"
                    .into(),
            });
        }
        if input.is_batch() {
            return Ok(self
                .batch(&input, specs, cancel, depth, exclude, detach)
                .await);
        }
        let spec = specs.into_iter().next().expect("a single call is one task");
        let prepared = self.prepare(spec, input.continue_session, depth, false)?;
        let summary = self
            .summary_for(input.include_main_summary, cancel.as_ref())
            .await;
        let opened = self
            .open(
                prepared,
                Launch {
                    background: input.run_in_background,
                    batch_id: None,
                    place: None,
                    cancel,
                    summary: summary.as_deref(),
                    exclude: exclude.as_ref(),
                    detach,
                    index: 0,
                },
            )
            .await?;
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
    pub(in crate::subagent) async fn summary_for(
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
    pub(in crate::subagent) fn prepare(
        &self,
        spec: TaskSpec,
        continue_session: bool,
        depth: u32,
        in_batch: bool,
    ) -> Result<Prepared, DispatchError> {
        // A cap reached: no new call starts.
        if let Some(why) = self.emitter.board(|b| b.ledger().refusal()) {
            return Err(DispatchError::Budget(why));
        }
        if let Some(cap) = spec.max_cost {
            crate::event::budget::check_usd("max_cost", cap).map_err(DispatchError::Budget)?;
        }
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
            // The internal agent starts fresh every time, and so does a
            // task in a new worktree (its agent's last session was
            // elsewhere).
            let resume = if runner.keeps_sessions() && !spec.isolation {
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
        // A review of a branch reads the branch's diff.
        let prompt_message = match spec.branch.as_deref().filter(|_| spec.code_review) {
            Some(branch) => self.with_branch_diff(&message, branch),
            None => message.clone(),
        };
        Ok(Prepared {
            agent,
            runner,
            depth: depth + 1,
            message,
            prompt_message,
            reviewed: spec.branch.clone().filter(|_| spec.code_review),
            code_review: spec.code_review,
            requirements: spec.output_requirements,
            resume,
            isolation: spec.isolation,
            max_cost: spec.max_cost,
        })
    }

    /// Opens a prepared task's box: its ids, its steering handle, its
    /// `subagent_started`. A worktree task's worktree is made first (its
    /// git off the runtime's threads); the rest is [`Dispatcher::open_box`].
    pub(in crate::subagent) async fn open(
        &self,
        task: Prepared,
        launch: Launch<'_>,
    ) -> Result<Opened, DispatchError> {
        self.open_for_calls()?;
        let call_id = format!("call-{}", self.next_call.fetch_add(1, Ordering::SeqCst));
        // A call opened after its caller stopped waiting starts in the
        // background.
        let background = launch.background || launch.detach.is_some_and(Detachable::is_detached);
        let task_id =
            background.then(|| format!("t{}", self.next_task.fetch_add(1, Ordering::SeqCst)));
        // A worktree task's worktree and branch, before its box opens.
        let worktree = if task.isolation {
            let made = self
                .make_worktree(
                    &call_id,
                    task_id.as_deref(),
                    task.agent.name(),
                    &task.message,
                )
                .await?;
            // The session may have ended while its git ran.
            self.open_for_calls()?;
            Some(made)
        } else {
            None
        };
        Ok(self.open_box(task, launch, (call_id, task_id), worktree))
    }

    /// [`Dispatcher::open`] once its ids are given and its worktree made.
    fn open_box(
        &self,
        task: Prepared,
        launch: Launch<'_>,
        (call_id, task_id): (String, Option<String>),
        worktree: Option<crate::worktree::Worktree>,
    ) -> Opened {
        let background = task_id.is_some();
        let detach = launch.detach.filter(|_| !background);
        let (mut handle, control) = controls();
        if let (Some(outer), None) = (&launch.cancel, &task_id) {
            handle.forward = Some(forward_cancel(outer.clone(), handle.cancel.clone()));
        }
        let meta = TaskMeta {
            agent: task.agent.clone(),
            runner: task.runner.clone(),
            depth: task.depth,
            code_review: task.code_review,
            exclude: launch.exclude.cloned(),
            session_id: None,
            worktree: worktree.clone(),
            title: crate::worktree::first_line(&task.message).to_string(),
        };
        if task_id.is_none() && worktree.is_some() {
            // A follow-up may name it once it is done (`/msg c4`).
            lock(&self.foreground).insert(call_id.clone(), meta.clone());
        }
        if task_id.is_some() {
            lock(&self.tasks).insert(call_id.clone(), meta);
        } else if let Some(detach) = detach {
            // What it needs to go on as a task, should its caller stop
            // waiting.
            handle.meta = Some(meta);
            detach.opened(&call_id, launch.index, task.agent.name(), task.code_review);
        }
        lock(&self.running).insert(call_id.clone(), handle);
        let queued = matches!(launch.place, Some(Place::Wait(_)));
        self.emitter.emit(Event::SubagentStarted {
            call_id: call_id.clone(),
            task_id: task_id.clone(),
            agent: task.agent.clone(),
            input: task.message.clone(),
            code_review: task.code_review,
            background,
            session: None,
            batch_id: launch.batch_id.map(str::to_string),
            queued,
            max_cost: task.max_cost,
        });
        if let Some(w) = &worktree {
            self.worktree_ready(&call_id, task_id.as_deref(), w);
        }
        let mut opened = opened(
            task,
            launch,
            (call_id, task_id),
            control,
            (worktree, detach),
        );
        opened.job.era = lock(&self.memory).era();
        opened
    }

    /// Runs a call: it waits for its place in a batch first, then its
    /// turn, then the follow-ups queued for it while it ran, each as a new
    /// turn on the same session; returns the last outcome.
    pub(in crate::subagent) async fn run(self: &Arc<Self>, opened: Opened) -> Outcome {
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
                // A cap reached while it waited: it does not start.
                let refused = self.emitter.board(|b| b.ledger().refusal());
                if let (Some(why), Some(_)) = (refused, &permit) {
                    let outcome = Outcome::new(
                        StopReason::Cancelled,
                        format!("{why}; {} was queued, and did not start", job.agent.name()),
                    );
                    return self.end(&job, outcome);
                }
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
                        return self.end(&job, outcome);
                    }
                }
            }
        };
        loop {
            let result = self.turn(&job, &mut control).await;
            let events = self.finish_events(&job, &result);
            // The turn's end and what comes after it, in one step under
            // the lock that queues follow-ups: none is lost, and a call
            // whose box says it finished no longer counts as running
            // (unless a follow-up takes it on).
            let (outcome, next) = {
                let mut running = lock(&self.running);
                let outcome = self.finish_turn(&job, result, events);
                let queued = running
                    .get_mut(&job.call_id)
                    .map(|h| std::mem::take(&mut h.followups))
                    .unwrap_or_default();
                let refused = (!queued.is_empty())
                    .then(|| self.emitter.board(|b| b.ledger().refusal_of(&job.call_id)))
                    .flatten();
                if let Some(why) = &refused {
                    self.emitter.emit(Event::SubagentActivity {
                        call_id: job.call_id.clone(),
                        activity: crate::event::Activity::Notice {
                            text: format!("{why}: its follow-up was not sent"),
                        },
                    });
                }
                if queued.is_empty()
                    || refused.is_some()
                    || !outcome.stop_reason.answered()
                    || outcome.stop_reason == StopReason::Cancelled
                    || outcome.session_id.is_none()
                {
                    self.close(&mut running, &job);
                    (outcome, None)
                } else {
                    let message = queued.join("\n\n");
                    let session_id = outcome.session_id.clone().expect("checked above");
                    lock(&self.busy).insert((job.agent.name().to_string(), session_id.clone()));
                    self.emitter.emit(Event::SubagentFollowup {
                        call_id: job.call_id.clone(),
                        input: message.clone(),
                    });
                    (outcome, Some((message, session_id)))
                }
            };
            let Some((message, session_id)) = next else {
                return outcome;
            };
            job.prompt = prompt_for(message, job.code_review);
            job.resume = Some(session_id);
        }
    }

    /// One turn of a call, up to its end (which [`Self::finish_turn`]
    /// says).
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
            root: job.worktree.as_ref().map(|w| w.workdir.as_path()),
            person: self.pool.asks_person(),
        };
        // A worktree task runs in its worktree, or not at all.
        let gone = job
            .worktree
            .as_ref()
            .and_then(|w| super::isolate::still_there(&w.workdir).err());
        // A host's worktree task: its worktree there first.
        let there = match (&job.worktree, gone) {
            (Some(w), None) => self
                .remote_prepare(job.agent.name(), &job.title, w)
                .await
                .err()
                .map(|e| e.to_string()),
            (_, gone) => gone.map(|e| e.to_string()),
        };
        // A new worktree's setup, before its agent's first turn.
        let there = match (there, &job.worktree) {
            // (A host's task works there: the setup is for worktrees here.)
            (None, Some(w)) if self.pool.host_of(job.agent.name()).is_none() => {
                self.set_up(&job.call_id, w, control.cancel.clone()).await
            }
            (there, _) => there,
        };
        // In the person's own tree, what the turn leaves there that other
        // programs run is named after it (a worktree task works in its
        // worktree, a host's agent on its host: neither in that tree).
        let elsewhere = job.worktree.is_some() || self.pool.host_of(job.agent.name()).is_some();
        let before = match there {
            Some(_) => None,
            None => self.before_turn(elsewhere).await,
        };
        let mut result = match there {
            Some(e) => Outcome::error(format!("{}: {e}", job.agent.name())),
            None => job.runner.turn(input, &sink, control).await,
        };
        watcher.abort();
        if let Some(before) = before {
            self.after_turn(&job.call_id, job.agent.name(), before)
                .await;
        }
        if let Some(w) = &job.worktree {
            self.remote_finish(&job.call_id, job.agent.name(), &job.title, w, &mut result)
                .await;
            let cancel = control.cancel.clone();
            self.commit_work(
                &job.call_id,
                (job.agent.name(), &job.title),
                w,
                cancel,
                &mut result,
            )
            .await;
            // A writer of the last arena: compared again.
            self.recompare(&w.branch);
        }
        result
    }

    /// Ends a call that ran no turn (or no more): its end said and the
    /// call closed in one step.
    fn end(&self, job: &CallJob, result: Outcome) -> Outcome {
        let events = self.finish_events(job, &result);
        let mut running = lock(&self.running);
        let outcome = self.finish_turn(job, result, events);
        self.close(&mut running, job);
        outcome
    }

    /// Ends a turn with its finish `events`: its session is freed (and
    /// stored, if the turn got an answer), its box closes. Called under
    /// the running calls' lock.
    fn finish_turn(&self, job: &CallJob, result: Outcome, events: Vec<Event>) -> Outcome {
        {
            let mut busy = lock(&self.busy);
            for id in [&job.resume, &result.session_id].into_iter().flatten() {
                busy.remove(&(job.agent.name().to_string(), id.clone()));
            }
        }
        let mut outcome = result;
        for event in &events {
            if let Event::SubagentFinished {
                severity, findings, ..
            } = event
            {
                outcome.severity = *severity;
                outcome.findings = findings.clone();
            }
        }
        // Its caller, if waiting, knows it ended before its box says so.
        if let Some(detach) = &job.detach {
            detach.finished(&job.call_id, &outcome);
        }
        // Only a turn that got an answer moves the session on; a worktree
        // task's session is its own (its agent's next call, elsewhere, does
        // not continue it: follow-ups reach it through its task).
        if outcome.stop_reason.answered()
            && job.worktree.is_none()
            && let Some(id) = &outcome.session_id
        {
            lock(&self.memory).store_session_of(job.era, job.agent.name(), id);
        }
        // A follow-up sent once its box says it finished finds its session.
        if outcome.session_id.is_some() {
            for map in [&self.tasks, &self.foreground] {
                if let Some(meta) = lock(map).get_mut(&job.call_id) {
                    meta.session_id = outcome.session_id.clone();
                }
            }
        }
        for event in events {
            self.emitter.emit(event);
        }
        outcome
    }

    /// The events that end a turn; a review's findings are checked
    /// against its tree (a worktree task's, else the repository's top) and
    /// the diff its prompt held.
    fn finish_events(&self, job: &CallJob, outcome: &Outcome) -> Vec<Event> {
        if !job.code_review {
            return crate::subagent::finish(&job.call_id, &job.agent, outcome, None);
        }
        // A reviewed branch's findings name the branch's files.
        let tree = match (&job.worktree, &job.reviewed) {
            (Some(w), None) => w.path.clone(),
            _ => crate::worktree::Repo::find(self.root.path())
                .map_or_else(|_| self.root.path().to_path_buf(), |r| r.top),
        };
        let diff = crate::subagent::findings::place::DiffRanges::of_prompt(&job.prompt);
        let reviewed = crate::subagent::Reviewed {
            tree: Some(&tree),
            diff: diff.as_ref(),
            rev: job.reviewed.as_deref(),
        };
        crate::subagent::finish(&job.call_id, &job.agent, outcome, Some(reviewed))
    }

    /// Ends a call after its last turn: a background task reports (once),
    /// and only then stops counting as running, so a waiting chat never
    /// misses the report. Under the lock a detach takes (`running`): a
    /// call sent to the background meanwhile reports as a task.
    fn close(&self, running: &mut HashMap<String, Handle>, job: &CallJob) {
        let detached = running.get(&job.call_id).and_then(|h| h.task_id.clone());
        if let Some(task_id) = job.task_id.clone().or(detached) {
            let _ = self.completions.send(task_id);
        }
        running.remove(&job.call_id);
    }
}

/// The message a follow-up turn sends: a review's contract appended.
pub(in crate::subagent) fn prompt_for(mut message: String, code_review: bool) -> String {
    if code_review {
        message.push_str(REVIEW_CONTRACT);
    }
    message
}

pub(in crate::subagent) struct CallJob {
    pub(in crate::subagent) agent: AgentRef,
    /// The agent that runs its turns.
    pub(in crate::subagent) runner: Arc<dyn Agent>,
    /// The nesting depth its turns run at.
    pub(in crate::subagent) depth: u32,
    pub(in crate::subagent) call_id: String,
    pub(in crate::subagent) task_id: Option<String>,
    pub(in crate::subagent) prompt: String,
    pub(in crate::subagent) code_review: bool,
    /// A review of a branch: the branch.
    pub(in crate::subagent) reviewed: Option<String>,
    pub(in crate::subagent) resume: Option<String>,
    pub(in crate::subagent) exclude: Option<Exclude>,
    /// A worktree task's worktree: its turns run there and are committed.
    pub(in crate::subagent) worktree: Option<crate::worktree::Worktree>,
    /// The first line of its message (its commits' subject).
    pub(in crate::subagent) title: String,
    /// Its caller may stop waiting for it.
    pub(in crate::subagent) detach: Option<Detachable>,
    /// The conversation it started in (`SubAgent::era`): after a `/new`
    /// its session is not remembered.
    pub(in crate::subagent) era: u64,
}

/// Passes the caller's `outer` cancel on to a call's turn (until the call
/// is over and nothing listens any more, or it goes on in the
/// background): the task that does, to abort.
fn forward_cancel(
    mut outer: watch::Receiver<bool>,
    tx: watch::Sender<bool>,
) -> tokio::task::AbortHandle {
    let forward = tokio::spawn(async move {
        tokio::select! {
            _ = cancelled(&mut outer) => {
                let _ = tx.send(true);
            }
            _ = tx.closed() => {}
        }
    });
    forward.abort_handle()
}

/// A call opened as `call_id` (and `task_id`): the job its turns run, and
/// the ends of its controls.
fn opened(
    task: Prepared,
    launch: Launch<'_>,
    (call_id, task_id): (String, Option<String>),
    control: TurnControl,
    (worktree, detach): (Option<crate::worktree::Worktree>, Option<&Detachable>),
) -> Opened {
    let prompt = compose_prompt(
        &task.prompt_message,
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
            reviewed: task.reviewed,
            resume: task.resume,
            exclude: launch.exclude.cloned(),
            title: crate::worktree::first_line(&task.message).to_string(),
            worktree,
            detach: detach.cloned(),
            era: 0,
        },
        control,
        task_id,
        place: launch.place,
    }
}

/// A task resolved but not started.
pub(in crate::subagent) struct Prepared {
    pub(in crate::subagent) agent: AgentRef,
    pub(in crate::subagent) runner: Arc<dyn Agent>,
    /// The nesting depth its turns run at.
    pub(in crate::subagent) depth: u32,
    pub(in crate::subagent) message: String,
    /// What the agent is sent: the message, with a reviewed branch's diff.
    pub(in crate::subagent) prompt_message: String,
    /// A review of a branch: the branch.
    pub(in crate::subagent) reviewed: Option<String>,
    pub(in crate::subagent) code_review: bool,
    pub(in crate::subagent) requirements: Option<String>,
    pub(in crate::subagent) resume: Option<String>,
    /// Runs in a worktree of its own.
    pub(in crate::subagent) isolation: bool,
    /// Its own spending cap, in USD.
    pub(in crate::subagent) max_cost: Option<f64>,
}

/// A batch task's place among the `max_parallel` that run at once: held
/// already, or to wait for.
pub(in crate::subagent) enum Place {
    Held(tokio::sync::OwnedSemaphorePermit),
    Wait(Arc<tokio::sync::Semaphore>),
}

/// How a prepared task is opened.
pub(in crate::subagent) struct Launch<'a> {
    pub(in crate::subagent) background: bool,
    pub(in crate::subagent) batch_id: Option<&'a str>,
    /// `None`: not in a batch, runs at once.
    pub(in crate::subagent) place: Option<Place>,
    /// The caller's cancel (foreground calls).
    pub(in crate::subagent) cancel: Option<watch::Receiver<bool>>,
    pub(in crate::subagent) summary: Option<&'a str>,
    pub(in crate::subagent) exclude: Option<&'a Exclude>,
    /// Its caller may stop waiting for it (a foreground call).
    pub(in crate::subagent) detach: Option<&'a Detachable>,
    /// Its place in its batch's `tasks` (0 for a single call).
    pub(in crate::subagent) index: usize,
}

/// A task whose box is open, ready to run.
pub(in crate::subagent) struct Opened {
    pub(in crate::subagent) job: CallJob,
    pub(in crate::subagent) control: TurnControl,
    pub(in crate::subagent) task_id: Option<String>,
    pub(in crate::subagent) place: Option<Place>,
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

    fn stream(&self) -> Option<std::sync::Arc<dyn Fn(Activity) + Send + Sync>> {
        let emitter = self.dispatcher.emitter.clone();
        let call_id = self.call_id.to_string();
        Some(std::sync::Arc::new(move |activity| {
            emitter.emit(Event::SubagentActivity {
                call_id: call_id.clone(),
                activity,
            });
        }))
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
