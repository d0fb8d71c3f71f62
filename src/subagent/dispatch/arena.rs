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
use crate::event::arena::{ArenaRow, CheckCell, Comparison, FindingCounts};
use crate::event::{Event, Quorum, Stamped};
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
    /// reviewed, the rows filled, the winner chosen and told. (A boxed
    /// future: the reviews are batches, and this runs at a batch's end.)
    pub(in crate::subagent) fn compare<'a>(
        self: &'a Arc<Self>,
        task: &'a str,
        writers: &'a BatchResult,
        cancel: Option<watch::Receiver<bool>>,
        depth: u32,
    ) -> BoxFuture<'a, Comparison> {
        Box::pin(async move {
            let reviews = writers.tasks.iter().map(|t| {
                let cancel = cancel.clone();
                async move {
                    let branch = branch_of(t)?;
                    self.review_branch(task, &t.agent, &branch, cancel, depth)
                        .await
                }
            });
            let quorums = futures::future::join_all(reviews).await;
            let rows = writers
                .tasks
                .iter()
                .zip(quorums)
                .map(|(t, q)| self.row(t, q.as_ref()))
                .collect();
            let comparison = Comparison::decide(crate::worktree::first_line(task), rows);
            self.told(&writers.batch_id, &comparison);
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

    /// One writer's row: its branch measured, its review and its usage.
    fn row(&self, t: &TaskResult, quorum: Option<&Quorum>) -> ArenaRow {
        let mut row = ArenaRow {
            agent: t.agent.clone(),
            ..ArenaRow::default()
        };
        if let Some(q) = quorum {
            row.verdict = q.verdict;
            row.findings = FindingCounts::of(&q.findings);
        }
        let Some(branch) = branch_of(t) else {
            row.failed = Some(match &t.result {
                Err(e) => e.clone(),
                Ok(o) => format!("no branch ({})", o.stop_reason),
            });
            return row;
        };
        row.branch = branch.clone();
        self.measure(&mut row);
        if !t.succeeded() {
            row.failed = Some(match &t.result {
                Ok(o) => format!("its turn ended: {}", o.stop_reason),
                Err(e) => e.clone(),
            });
        } else if row.diffstat.files == 0 {
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
        if let Ok(diff) = repo.diff(&w.base_commit, &w.branch) {
            row.tests_touched = tests_touched(&diff);
        }
        if let Some((cell, touched)) = lock(&self.checks).get(&row.branch) {
            row.check = Some(*cell);
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

    /// Goes on from a recorded session: its last arena.
    pub(in crate::subagent) fn restore_arena(&self, events: &[Stamped]) {
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
                ..
            } = &s.event
            {
                let cell = CheckCell::of(*passed, *counts, *timed_out);
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

/// The branch a writer's work went to.
fn branch_of(t: &TaskResult) -> Option<String> {
    let work = t.result.as_ref().ok()?.work.as_ref()?;
    Some(work.branch.clone())
}

/// Files of `diff` (a `git diff`) that are tests or a test runner's
/// configuration: what a writer could pass a check by changing.
pub fn tests_touched(diff: &str) -> u32 {
    diff.lines()
        .filter_map(|l| l.strip_prefix("diff --git a/"))
        .filter_map(|l| l.split(" b/").next())
        .filter(|path| is_test_file(path))
        .count() as u32
}

/// A test file or a test runner's configuration, by its path.
fn is_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let in_tests = path
        .split('/')
        .any(|d| matches!(d, "tests" | "test" | "__tests__" | "spec"));
    in_tests
        || name.starts_with("test_")
        || name.contains("_test.")
        || name.contains(".test.")
        || name.contains(".spec.")
        || matches!(
            name,
            "conftest.py" | "pytest.ini" | "tox.ini" | "jest.config.js" | "vitest.config.ts"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_files_and_runner_configuration_are_counted() {
        let diff = "diff --git a/src/x.rs b/src/x.rs\n+a\n\
                    diff --git a/tests/it/x.rs b/tests/it/x.rs\n-b\n\
                    diff --git a/pkg/test_greet.py b/pkg/test_greet.py\n\
                    diff --git a/conftest.py b/conftest.py\n\
                    diff --git a/web/a.spec.ts b/web/a.spec.ts\n";
        assert_eq!(tests_touched(diff), 4);
        assert_eq!(
            tests_touched("diff --git a/src/latest.rs b/src/latest.rs\n"),
            0
        );
    }
}
