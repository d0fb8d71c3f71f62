//! The arena in the dispatcher: a batch of writers, each in a worktree of
//! its own (`compare: true`, `@A,B,C+ task`), once every one has
//! finished: each branch reviewed by a quorum of the other agents
//! (`[arena] reviewers`, default every installed agent; a writer never
//! reviews its own branch), the writers compared (`event::arena`) and the
//! comparison told (`arena_compared`). `/merge best` and `/discard others`
//! act on the last one.
//!
//! Each row's check is its branch's last `check_finished` (a writer's check
//! runs before its box closes, so it is there when the writers are
//! compared); without `[worktree] check` a row has none, which the rule
//! ranks between a check that passed and one that failed.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::watch;

use super::batch::{BatchResult, TaskResult};
use super::isolate::Discarded;
use super::{DispatchError, Dispatcher, Reply};
use crate::event::arena::{ArenaRow, CheckCell, Comparison, FindingCounts, Unfinished, Writer};
use crate::event::{Event, Quorum, Stamped, StopReason};
use crate::subagent::input::{SubAgentCallInput, TaskInput};
use crate::subagent::lock;

/// What `/discard others` did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DiscardedOthers {
    /// Branches removed.
    pub done: Vec<String>,
    /// Branches with commits never merged, asked about once: the same
    /// command again removes them.
    pub asked: Vec<(String, u32)>,
}

impl Dispatcher {
    /// Who reviews an arena's branches (`[arena] reviewers`); `None`:
    /// every installed agent.
    pub fn set_arena_reviewers(&self, reviewers: Option<Vec<String>>) {
        *lock(&self.arena_reviewers) = reviewers;
    }

    /// The last arena's comparison, if there was one.
    pub fn last_arena(&self) -> Option<Comparison> {
        lock(&self.arena).clone().map(|(_, c)| c)
    }

    /// The reviewers of `writer`'s branch: the configured ones, or every
    /// installed agent, never the writer itself.
    fn reviewers_of(&self, writer: &str) -> Vec<String> {
        let all = lock(&self.arena_reviewers).clone().unwrap_or_else(|| {
            self.registry
                .installed()
                .into_iter()
                .map(|a| a.name.clone())
                .collect()
        });
        all.into_iter().filter(|r| r != writer).collect()
    }

    /// The writers of `writers` (a finished batch) compared: each branch
    /// reviewed, the rows filled, the winner chosen and told.
    pub(in crate::subagent) fn compare<'a>(
        self: &'a Arc<Self>,
        task: &'a str,
        writers: &'a BatchResult,
        cancel: Option<watch::Receiver<bool>>,
        depth: u32,
    ) -> BoxFuture<'a, Comparison> {
        let entries = writers.tasks.iter().map(Entry::of).collect();
        self.compare_entries(task, &writers.batch_id, entries, cancel, depth)
    }

    /// `entries` compared: each row measured, each branch that can still
    /// win and has no review yet reviewed (a writer that failed or changed
    /// nothing is not), the winner chosen and told. (A boxed future: the
    /// reviews are batches, and this runs at a batch's end.)
    fn compare_entries<'a>(
        self: &'a Arc<Self>,
        task: &'a str,
        batch_id: &'a str,
        entries: Vec<Entry>,
        cancel: Option<watch::Receiver<bool>>,
        depth: u32,
    ) -> BoxFuture<'a, Comparison> {
        Box::pin(async move {
            let started = std::time::Instant::now();
            let mut rows: Vec<ArenaRow> = entries.iter().map(|e| self.row(e)).collect();
            let reviews = entries.into_iter().zip(&rows).map(|(entry, row)| {
                let cancel = cancel.clone();
                async move {
                    if entry.reviewed.is_some() || row.failed.is_some() {
                        return entry.reviewed;
                    }
                    self.review_branch(task, &row.agent, &row.branch, cancel, depth)
                        .await
                }
            });
            let quorums = futures::future::join_all(reviews).await;
            for (row, q) in rows.iter_mut().zip(quorums) {
                if let Some(q) = q {
                    row.verdict = q.verdict;
                    row.findings = FindingCounts::of(&q.findings);
                }
            }
            let mut comparison = Comparison::decide(crate::worktree::first_line(task), rows);
            comparison.reviews_ms = started.elapsed().as_millis() as u64;
            self.told(batch_id, &comparison);
            comparison
        })
    }

    /// Keeps `comparison` as the last arena and tells it.
    fn told(&self, batch_id: &str, comparison: &Comparison) {
        *lock(&self.arena) = Some((batch_id.to_string(), comparison.clone()));
        self.emitter.emit(Event::ArenaCompared {
            batch_id: batch_id.to_string(),
            comparison: comparison.clone(),
        });
    }

    /// A writer of the last arena committed again (a follow-up, `/msg
    /// c3 …`): its branch is reviewed again, its row measured again, and
    /// the comparison told anew (in the background).
    pub(in crate::subagent) fn recompare(self: &Arc<Self>, branch: &str) {
        let Some((batch_id, c)) = lock(&self.arena).clone() else {
            return;
        };
        let Some(i) = c.rows.iter().position(|r| r.branch == branch) else {
            return;
        };
        let this = self.clone();
        tokio::spawn(async move {
            let mut row = c.rows[i].clone();
            let q = this
                .review_branch(&c.task, &row.agent, &row.branch, None, 0)
                .await;
            row.verdict = q.as_ref().and_then(|q| q.verdict);
            row.findings = q
                .as_ref()
                .map_or_else(FindingCounts::default, |q| FindingCounts::of(&q.findings));
            this.measure(&mut row);
            row.failed = (row.diffstat.files == 0).then(|| "it changed nothing".to_string());
            let mut rows = c.rows;
            rows[i] = row;
            this.told(&batch_id, &Comparison::decide(&c.task, rows));
        });
    }

    /// `branch` reviewed by a quorum of the agents other than `writer`.
    fn review_branch<'a>(
        self: &'a Arc<Self>,
        task: &str,
        writer: &str,
        branch: &str,
        cancel: Option<watch::Receiver<bool>>,
        depth: u32,
    ) -> BoxFuture<'a, Option<Quorum>> {
        let reviewers = self.reviewers_of(writer);
        let message = format!(
            "Review the change on branch `{branch}`, written by {writer} for this task:\n\n{}\n\n\
             Look for bugs, security problems and anything that must be fixed before it is \
             merged.",
            task.trim()
        );
        let input = SubAgentCallInput {
            tasks: Some(
                reviewers
                    .iter()
                    .map(|agent| TaskInput {
                        agent: Some(agent.clone()),
                        input: message.clone(),
                        ..TaskInput::default()
                    })
                    .collect(),
            ),
            code_review: true,
            branch: Some(branch.to_string()),
            continue_session: false,
            ..SubAgentCallInput::default()
        };
        Box::pin(async move {
            if reviewers.is_empty() {
                return None;
            }
            let specs = input.task_specs().ok()?;
            match self.batch(&input, specs, cancel, depth, None, None).await {
                Reply::Batch(result) => result.quorum,
                _ => None,
            }
        })
    }

    /// One writer's row before its review: its branch measured and its
    /// usage; why it cannot win, if so.
    fn row(&self, entry: &Entry) -> ArenaRow {
        let mut row = ArenaRow {
            agent: entry.agent.clone(),
            failed: entry.failed.clone(),
            ..ArenaRow::default()
        };
        let Some(branch) = &entry.branch else {
            return row;
        };
        row.branch = branch.clone();
        self.measure(&mut row);
        if row.failed.is_none() && row.diffstat.files == 0 {
            row.failed = Some("it changed nothing".into());
        }
        row
    }

    /// A row's branch measured (diffstat, tests touched) and its writer's
    /// call read off the board (time, tokens, cost).
    fn measure(&self, row: &mut ArenaRow) {
        let Some((call, isolated)) = self.find_isolated(&row.branch) else {
            return;
        };
        row.label = isolated
            .task_id
            .clone()
            .unwrap_or_else(|| call.replace("call-", "c"));
        let w = &isolated.worktree;
        let repo = w.repo();
        if let Ok(stat) = repo.diffstat(&w.base_commit, &w.branch) {
            row.diffstat = stat;
        }
        if let Ok(touched) = repo.tests_touched(&w.base_commit, &w.branch) {
            row.tests_touched = touched.len() as u32;
        }
        if let Some((cell, touched)) = lock(&self.checks).get(&row.branch) {
            row.check = Some(cell.clone());
            row.tests_touched = row.tests_touched.max(touched.len() as u32);
        }
        self.emitter.board(|b| {
            let Some(e) = b.call(&call) else {
                return;
            };
            row.ms = e.finished.unwrap_or(e.started).saturating_sub(e.started);
            let share = e.summary.share.as_ref();
            let usage = e.summary.usage.as_ref();
            row.tokens = share
                .map(|s| s.tokens.max(0) as u64)
                .or(usage.map(|u| u.used))
                .unwrap_or(0);
            row.cost = share
                .and_then(|s| s.cost.as_ref())
                .or(usage.and_then(|u| u.cost.as_ref()))
                .map(|c| c.amount);
        });
    }

    /// The last arena's row named by `which`: `best` (the winner), else
    /// the task (`c2`, `t3`) or branch itself.
    pub fn arena_pick(&self, which: &str) -> Result<String, DispatchError> {
        if which.trim() != "best" {
            return Ok(which.trim().to_string());
        }
        let arena = self.last_arena().ok_or(DispatchError::NoArena)?;
        match arena.best() {
            Some(row) => Ok(row.branch.clone()),
            None => Err(DispatchError::NoWinner(arena.reason.clone())),
        }
    }

    /// `/discard others`: every writer of the last arena but its winner,
    /// removed; those with commits never merged asked about once.
    pub fn discard_others(&self) -> Result<DiscardedOthers, DispatchError> {
        let arena = self.last_arena().ok_or(DispatchError::NoArena)?;
        let Some(best) = arena.winner else {
            return Err(DispatchError::NoWinner(arena.reason.clone()));
        };
        let repo = self.repo()?;
        let mut out = DiscardedOthers::default();
        for (i, row) in arena.rows.iter().enumerate() {
            if i == best || row.branch.is_empty() || !repo.branch_exists(&row.branch) {
                continue;
            }
            match self.discard(&row.branch)? {
                Discarded::Asked { branch, commits } => out.asked.push((branch, commits)),
                Discarded::Done { branch } => out.done.push(branch),
            }
        }
        Ok(out)
    }

    /// Compares the arenas a continued session's transcript left
    /// uncompared (its session ended first), in the background: the
    /// checks and reviews that did not finish run again, those that did
    /// are kept. A writer that was still running is a row that cannot win
    /// (`/msg` goes on with it, and the comparison updates).
    pub fn resume_arenas(self: &Arc<Self>) {
        let unfinished = std::mem::take(&mut *lock(&self.unfinished));
        for arena in unfinished {
            let this = self.clone();
            self.emitter.emit(Event::Notice {
                level: crate::event::NoticeLevel::Info,
                text: format!(
                    "the arena of {} writers ({}) was not compared when its session ended: \
                     comparing it now",
                    arena.writers.len(),
                    crate::worktree::first_line(&arena.task)
                ),
            });
            tokio::spawn(async move { this.resume_arena(arena).await });
        }
    }

    /// One unfinished arena: its pending checks, then its comparison.
    async fn resume_arena(self: Arc<Self>, arena: Unfinished) {
        let checks = arena.writers.iter().map(|w| self.check_again(w));
        futures::future::join_all(checks).await;
        let entries = arena
            .writers
            .into_iter()
            .map(|w| Entry {
                // A writer whose work was committed had ended its turn (its
                // check was pending); one still running cannot win.
                failed: match (&w.branch, w.ended) {
                    (None, _) => Some("its worktree was never made".into()),
                    (Some(_), None) if w.commit.is_some() => None,
                    (Some(_), None) => Some("its turn ended: interrupted".into()),
                    (Some(_), Some(StopReason::EndTurn)) => None,
                    (Some(_), Some(stop)) => Some(format!("its turn ended: {stop}")),
                },
                agent: w.agent,
                branch: w.branch,
                reviewed: w.reviewed,
            })
            .collect();
        self.compare_entries(&arena.task, &arena.batch_id, entries, None, 0)
            .await;
    }

    /// A writer's check again, when its last commit was never checked.
    async fn check_again(&self, w: &Writer) {
        let (Some(branch), Some(commit), false) = (&w.branch, &w.commit, w.checked) else {
            return;
        };
        let Some((call_id, isolated)) = self.find_isolated(branch) else {
            return;
        };
        let (_keep, cancel) = watch::channel(false);
        self.check_commit(&call_id, &isolated.worktree, commit, cancel)
            .await;
    }

    /// Goes on from a recorded session: its last arena, and those it left
    /// uncompared ([`Dispatcher::resume_arenas`] takes them up).
    pub(in crate::subagent) fn restore_arena(&self, events: &[Stamped]) {
        *lock(&self.unfinished) = crate::event::arena::unfinished(events);
        let last = events.iter().rev().find_map(|s| match &s.event {
            Event::ArenaCompared {
                batch_id,
                comparison,
            } => Some((batch_id.clone(), comparison.clone())),
            _ => None,
        });
        if last.is_some() {
            *lock(&self.arena) = last;
        }
        let mut checks = lock(&self.checks);
        for s in events {
            if let Event::CheckFinished {
                branch,
                passed,
                counts,
                timed_out,
                touches_tests,
                missing,
                ms,
                ..
            } = &s.event
            {
                let cell =
                    CheckCell::of(*passed, *counts, *timed_out, missing.as_deref()).took(*ms);
                checks.insert(branch.clone(), (cell, touches_tests.clone()));
            }
        }
    }

    /// A branch's check, as the next comparison takes it.
    pub(in crate::subagent) fn record_check(
        &self,
        branch: &str,
        cell: CheckCell,
        touched: Vec<String>,
    ) {
        lock(&self.checks).insert(branch.to_string(), (cell, touched));
    }
}

/// A writer as a comparison takes it: its agent, its branch, why it
/// cannot win, and its branch's review when one is done already.
pub(super) struct Entry {
    pub agent: String,
    pub branch: Option<String>,
    pub failed: Option<String>,
    pub reviewed: Option<Quorum>,
}

impl Entry {
    /// A writer of a batch that just finished.
    fn of(t: &TaskResult) -> Self {
        let branch = t
            .result
            .as_ref()
            .ok()
            .and_then(|o| o.work.as_ref())
            .map(|w| w.branch.clone());
        let failed = match (&t.result, &branch) {
            (Err(e), _) => Some(e.clone()),
            (Ok(o), None) => Some(format!("no branch ({})", o.stop_reason)),
            (Ok(o), Some(_)) if !t.succeeded() => {
                Some(format!("its turn ended: {}", o.stop_reason))
            }
            _ => None,
        };
        Self {
            agent: t.agent.clone(),
            branch,
            failed,
            reviewed: None,
        }
    }
}
