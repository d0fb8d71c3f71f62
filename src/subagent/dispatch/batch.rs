//! Batches in the dispatcher: several tasks of one call run in parallel,
//! at most `max_parallel` at once and the rest queued, with their results
//! in task order and, for a batch of code reviews, their quorum.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{Semaphore, watch};

use super::call::{Launch, Opened, Place, Prepared};
use super::detach::Detachable;
use super::verify::Verify;
use super::{Dispatcher, Reply};
use crate::confine::fsroot::Exclude;
use crate::event::finding::{Finding, QuorumFinding};
use crate::event::{Event, Outcome, Quorum, ReviewerVerdict, Severity, StopReason};
use crate::subagent::findings::merge::merge;
use crate::subagent::findings::place::{DiffRanges, diff_of_prompt};
use crate::subagent::input::{SubAgentCallInput, TaskSpec};

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
}

/// A batch's results, in the order of its tasks.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchResult {
    pub batch_id: String,
    pub tasks: Vec<TaskResult>,
    /// A review batch's quorum (every task a code review).
    pub quorum: Option<Quorum>,
    /// An arena's comparison (`compare`): its writers, reviewed and ranked.
    pub comparison: Option<crate::event::arena::Comparison>,
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

    /// The quorum of a batch whose tasks are all code reviews.
    pub(in crate::subagent) fn quorum_of(
        tasks: &[TaskResult],
        call_ids: &[Option<String>],
    ) -> Quorum {
        Quorum::of(verdicts(tasks, call_ids))
    }
}

/// Each task's verdict as its reviewer gave it (by call).
fn verdicts(tasks: &[TaskResult], call_ids: &[Option<String>]) -> Vec<ReviewerVerdict> {
    tasks
        .iter()
        .zip(call_ids)
        .map(|(t, call_id)| ReviewerVerdict {
            agent: t.agent.clone(),
            call_id: call_id.clone(),
            severity: t.severity(),
            failed: !t.succeeded(),
        })
        .collect()
}

/// The reviewers' findings, merged (see `findings::merge`).
fn merged(tasks: &[TaskResult], diff: Option<&DiffRanges>) -> Vec<QuorumFinding> {
    let reports: Vec<(&str, &[Finding])> = tasks
        .iter()
        .filter_map(|t| {
            Some((
                t.agent.as_str(),
                t.result.as_ref().ok()?.findings.as_slice(),
            ))
        })
        .collect();
    merge(&reports, tasks.len(), diff)
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

/// One task of a batch: its place in `tasks`, its agent, and what became
/// of it, or why it could not run (`tasks[i]: ...`).
type Task<T> = (usize, String, Result<T, String>);

impl Dispatcher {
    /// Runs a batch: its tasks in parallel, at most `max_parallel` at
    /// once, the rest queued. A task that cannot run is an error entry
    /// (`tasks[i]: ...`) and the others run all the same.
    pub(in crate::subagent) async fn batch(
        self: &Arc<Self>,
        input: &SubAgentCallInput,
        specs: Vec<TaskSpec>,
        cancel: Option<watch::Receiver<bool>>,
        depth: u32,
        exclude: Option<Exclude>,
        detach: Option<&Detachable>,
    ) -> Reply {
        let batch_id = format!("b{}", self.next_batch.fetch_add(1, Ordering::SeqCst));
        let review = specs.iter().all(|s| s.code_review);
        let total = specs.len();
        // The branch each review judges, for its verdict.
        let branches: Vec<Option<String>> = specs
            .iter()
            .map(|s| s.branch.clone().filter(|_| s.code_review))
            .collect();
        let all_isolated = specs.iter().all(|s| s.isolation);
        let task = specs
            .first()
            .and_then(|s| s.input.clone())
            .unwrap_or_default();
        let prepared = self.prepare_all(specs, input.continue_session, depth);
        let summary = self
            .summary_for(input.include_main_summary, cancel.as_ref())
            .await;
        // An arena: once every writer has finished, their branches are
        // reviewed and compared.
        let arena = input.compare && !review && all_isolated;
        self.emitter.emit(Event::BatchStarted {
            batch_id: batch_id.clone(),
            tasks: total as u32,
            review,
            arena,
        });
        if let Some(detach) = detach {
            detach.batch(&batch_id);
        }
        let launch = |index, place| Launch {
            background: input.run_in_background,
            batch_id: Some(&batch_id),
            place: Some(place),
            cancel: cancel.clone(),
            summary: summary.as_deref(),
            exclude: exclude.as_ref(),
            detach,
            index,
        };
        let runs = self.open_all(prepared, detach, launch).await;
        // A quorum that checks itself runs its checks as its caller would.
        let verify = (review && input.verify).then(|| Verify {
            depth,
            cancel: cancel.clone(),
            exclude: exclude.clone(),
        });
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
        let all = self
            .clone()
            .run_all(batch_id.clone(), runs, (review, verify), branches);
        let arena = arena.then(|| (task, cancel, self.clone()));
        let all = async move {
            let mut result = all.await;
            if let Some((task, cancel, this)) = arena {
                result.comparison = Some(this.compare(&task, &result, cancel, depth).await);
            }
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

    /// Resolves each task; one that cannot run is said at once.
    fn prepare_all(
        &self,
        specs: Vec<TaskSpec>,
        continue_session: bool,
        depth: u32,
    ) -> Vec<Task<Prepared>> {
        let prepared: Vec<Task<Prepared>> = specs
            .into_iter()
            .enumerate()
            .map(|(i, spec)| {
                let agent = spec.agent.clone().unwrap_or_else(|| "internal".into());
                let task = self
                    .prepare(spec, continue_session, depth, true)
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
        prepared
    }

    /// Opens the prepared tasks' boxes, each `launch`ed at its place: the
    /// first `max_parallel` take their places at once, in order, the rest
    /// wait for one. One that cannot open is said at once.
    async fn open_all<'a>(
        &self,
        prepared: Vec<Task<Prepared>>,
        detach: Option<&Detachable>,
        launch: impl Fn(usize, Place) -> Launch<'a>,
    ) -> Vec<Task<Opened>> {
        let places = Arc::new(Semaphore::new(self.max_parallel));
        let mut runs = Vec::with_capacity(prepared.len());
        for (index, agent, task) in prepared {
            let run = match task {
                Ok(task) => {
                    // The first `max_parallel` take their places at once, in order.
                    let place = match places.clone().try_acquire_owned() {
                        Ok(permit) => Place::Held(permit),
                        Err(_) => Place::Wait(places.clone()),
                    };
                    self.open(task, launch(index, place)).await.map_err(|e| {
                        let e = format!("tasks[{index}]: {e}");
                        self.emitter.emit(Event::Error {
                            text: format!("subagent: {e}"),
                        });
                        e
                    })
                }
                Err(e) => Err(e),
            };
            if let (Err(e), Some(detach)) = (&run, detach) {
                detach.failed(index, &agent, e);
            }
            runs.push((index, agent, run));
        }
        runs
    }

    /// Runs the opened tasks to their ends: their results in task order,
    /// the quorum of a review batch (its findings checked, with
    /// `verify`), each judged branch's verdict recorded, and the batch's
    /// end told.
    async fn run_all(
        self: Arc<Self>,
        batch_id: String,
        runs: Vec<Task<Opened>>,
        (review, verify): (bool, Option<Verify>),
        branches: Vec<Option<String>>,
    ) -> BatchResult {
        let call_ids: Vec<Option<String>> = runs
            .iter()
            .map(|(_, _, run)| run.as_ref().ok().map(|o| o.job.call_id.clone()))
            .collect();
        // The reviewed diff: the first a review's prompt holds.
        let diff_text = runs
            .iter()
            .filter_map(|(_, _, run)| run.as_ref().ok())
            .find_map(|o| diff_of_prompt(&o.job.prompt).map(str::to_string));
        let diff = diff_text.as_deref().map(DiffRanges::of_diff);
        let diff_text = diff_text
            .as_deref()
            .map(crate::event::finding::bounded_diff);
        let tasks = futures::future::join_all(runs.into_iter().map(|(index, agent, run)| {
            let this = self.clone();
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
        let mut quorum = review.then(|| {
            let mut quorum = BatchResult::quorum_of(&tasks, &call_ids);
            quorum.findings = merged(&tasks, diff.as_ref());
            quorum
        });
        if let (Some(quorum), Some(verify)) = (&mut quorum, &verify) {
            let reviewers: Vec<String> = tasks
                .iter()
                .filter(|t| t.succeeded())
                .map(|t| t.agent.clone())
                .collect();
            self.verify(quorum, &reviewers, diff_text.as_deref(), verify)
                .await;
        }
        // Each judged branch gets the verdict of its own reviewers.
        if branches.iter().any(Option::is_some) {
            let verdicts = verdicts(&tasks, &call_ids);
            for (branch, mut q) in super::isolate::branch_quorums(&branches, &verdicts) {
                // A branch every reviewer judged takes the quorum's verdict
                // (after its checks, with `verify`).
                if let Some(all) = quorum
                    .as_ref()
                    .filter(|_| branches.iter().all(|b| b.as_ref() == Some(&branch)))
                {
                    q = all.clone();
                }
                self.record_verdict(&branch, &batch_id, &q);
            }
        }
        let result = BatchResult {
            batch_id,
            tasks,
            quorum,
            comparison: None,
        };
        if let Some(quorum) = &result.quorum {
            self.emitter.emit(Event::ReviewQuorum {
                batch_id: result.batch_id.clone(),
                quorum: quorum.clone(),
                diff: diff_text,
            });
        }
        self.emitter.emit(Event::BatchFinished {
            batch_id: result.batch_id.clone(),
            total: result.tasks.len() as u32,
            succeeded: result.succeeded(),
            failed: result.failed(),
            worst_verdict: result.worst_verdict(),
        });
        result
    }
}
