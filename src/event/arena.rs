//! The arena: several writers given the same task, each on a branch of its
//! own, compared once every one of them has finished (issue 39). This
//! module holds the vocabulary (a row per writer, the comparison) and the
//! winner rule, which is pure: the dispatcher fills the rows, the screen
//! and `quorum arena` show them.
//!
//! The rule, in order: the check passed (a row without a check, or whose
//! check could not run, or that passed on a branch that changed or
//! deleted tests or the check's configuration, ranks after one that passed
//! and before one that failed or timed out), then no red
//! finding, then fewer yellow findings, then the smaller diff (lines added
//! and removed), then the lower cost (a row without a cost after one with
//! one). A red verdict without a red finding counts as one red finding, a
//! yellow one without findings as one yellow. Rows equal on all of these
//! are ties: the first of them is not chosen over the others, and they
//! are named; a writer whose turn failed or that changed nothing never
//! wins.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use std::collections::{HashMap, HashSet};

use super::{Diffstat, Event, Quorum, Severity, Stamped, StopReason};

/// What a writer's check said: `[worktree] check` run on the branch's
/// commit, from its `check_finished` ([`CheckCell::of`]); `None` in a row
/// whose branch was never checked (no `check` configured).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CheckCell {
    pub outcome: CheckOutcome,
    /// Tests that passed and failed, where the runner printed them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passed: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<u32>,
    /// The program it needs that is not installed (`could_not_run`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<String>,
    /// How long it ran, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms: Option<u64>,
}

/// How a check ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckOutcome {
    Passed,
    #[default]
    Failed,
    /// Killed at its time limit.
    TimedOut,
    /// A program it needs is not installed: it says nothing of the
    /// branch, and ranks as no check.
    CouldNotRun,
}

impl CheckCell {
    /// The cell of a `check_finished`: timed out, else passed or failed,
    /// with the counts the runner printed.
    pub fn of(
        passed: bool,
        counts: Option<super::check::CheckCounts>,
        timed_out: Option<u64>,
        missing: Option<&str>,
    ) -> Self {
        let outcome = match (timed_out, passed, missing) {
            (Some(_), _, _) => CheckOutcome::TimedOut,
            (None, true, _) => CheckOutcome::Passed,
            (None, false, Some(_)) => CheckOutcome::CouldNotRun,
            (None, false, None) => CheckOutcome::Failed,
        };
        let n = |k: u64| u32::try_from(k).unwrap_or(u32::MAX);
        Self {
            passed: counts.map(|c| n(c.passed)),
            failed: counts.map(|c| n(c.failed)),
            missing: missing
                .filter(|_| outcome == CheckOutcome::CouldNotRun)
                .map(str::to_string),
            outcome,
            ms: None,
        }
    }

    /// The same cell, with how long the check ran.
    pub fn took(mut self, ms: Option<u64>) -> Self {
        self.ms = ms;
        self
    }

    /// `pass 12`, `fail 1/12`, `timed out`, `no pytest`.
    pub fn label(&self) -> String {
        match self.outcome {
            CheckOutcome::CouldNotRun => {
                format!("no {}", self.missing.as_deref().unwrap_or("tool"))
            }
            CheckOutcome::Passed => match self.passed {
                Some(n) => format!("pass {n}"),
                None => "pass".into(),
            },
            CheckOutcome::Failed => match (self.failed, self.passed) {
                (Some(f), Some(p)) => format!("fail {f}/{}", f + p),
                (Some(f), None) => format!("fail {f}"),
                _ => "fail".into(),
            },
            CheckOutcome::TimedOut => "timed out".into(),
        }
    }
}

/// Findings that still count (not refuted), by severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FindingCounts {
    #[serde(default)]
    pub red: u32,
    #[serde(default)]
    pub yellow: u32,
    #[serde(default)]
    pub green: u32,
}

impl FindingCounts {
    /// The counts of `findings` that still count (`QuorumFinding::counts`).
    pub fn of(findings: &[super::finding::QuorumFinding]) -> Self {
        let mut c = Self::default();
        for f in findings.iter().filter(|f| f.counts()) {
            match f.finding.severity {
                Severity::Red => c.red += 1,
                Severity::Yellow => c.yellow += 1,
                Severity::Green => c.green += 1,
            }
        }
        c
    }
}

/// One writer of an arena, as compared.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ArenaRow {
    /// The agent that wrote it.
    pub agent: String,
    /// Its call's or task's name (`c4`, `t3`): what `/merge` and `/msg` take.
    pub label: String,
    /// Its branch (none when its worktree could not be made).
    #[serde(default)]
    pub branch: String,
    /// Its check (none until checks run, or when none is configured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckCell>,
    /// Its review quorum's verdict (none: no reviewer gave one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Severity>,
    #[serde(default)]
    pub findings: FindingCounts,
    #[serde(default)]
    pub diffstat: Diffstat,
    /// Test files (or the check's configuration) it changed or deleted.
    #[serde(default)]
    pub tests_touched: u32,
    /// What the writer cost, as its agent reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    #[serde(default)]
    pub tokens: u64,
    /// How long the writer ran, in milliseconds.
    #[serde(default)]
    pub ms: u64,
    /// Why it cannot win (its turn failed, no commit), if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

impl ArenaRow {
    /// Lines added and removed.
    pub fn diff_size(&self) -> u64 {
        self.diffstat.added + self.diffstat.removed
    }

    /// The check's rank: passed, none (or one that could not run, or
    /// passed on a branch that changed the tests: a writer cannot win by
    /// weakening the check), failed or timed out.
    fn check_rank(&self) -> u8 {
        match self.check.as_ref().map(|c| c.outcome) {
            Some(CheckOutcome::Passed) if self.tests_touched == 0 => 0,
            Some(CheckOutcome::Passed) | None | Some(CheckOutcome::CouldNotRun) => 1,
            Some(CheckOutcome::Failed | CheckOutcome::TimedOut) => 2,
        }
    }

    /// A red finding, or a red verdict.
    pub fn red(&self) -> bool {
        self.findings.red > 0 || self.verdict == Some(Severity::Red)
    }

    /// Yellow findings (a yellow verdict without any counts as one).
    pub fn yellow(&self) -> u32 {
        let verdict = u32::from(self.verdict == Some(Severity::Yellow));
        self.findings.yellow.max(verdict)
    }

    /// The winner rule, one row against another (`Less`: `self` is better).
    pub fn rank(&self, other: &Self) -> Ordering {
        let cost = |r: &Self| r.cost.unwrap_or(f64::INFINITY);
        self.failed
            .is_some()
            .cmp(&other.failed.is_some())
            .then(self.check_rank().cmp(&other.check_rank()))
            .then(self.red().cmp(&other.red()))
            .then(self.yellow().cmp(&other.yellow()))
            .then(self.diff_size().cmp(&other.diff_size()))
            .then(cost(self).total_cmp(&cost(other)))
    }
}

/// The writers of an arena compared, and the winner.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Comparison {
    /// The writers' task, its first line.
    #[serde(default)]
    pub task: String,
    pub rows: Vec<ArenaRow>,
    /// The row that won, if one could be chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winner: Option<usize>,
    /// Rows tied for the best place (no winner then).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ties: Vec<usize>,
    /// Why: what decided it, or why none could be chosen.
    #[serde(default)]
    pub reason: String,
    /// How long the branches' reviews took, from the last writer's end to
    /// the comparison, in milliseconds (each row's check says its own).
    #[serde(default)]
    pub reviews_ms: u64,
}

impl Comparison {
    /// The rows compared by the winner rule.
    pub fn decide(task: &str, rows: Vec<ArenaRow>) -> Self {
        let mut order: Vec<usize> = (0..rows.len())
            .filter(|&i| rows[i].failed.is_none())
            .collect();
        order.sort_by(|&a, &b| rows[a].rank(&rows[b]));
        let (winner, ties, reason) = match order.as_slice() {
            [] => (None, vec![], "no writer finished with a branch".to_string()),
            [only] => (Some(*only), vec![], "the only writer with a branch".into()),
            [best, next, ..] => {
                let (a, b) = (&rows[*best], &rows[*next]);
                if a.rank(b) == Ordering::Equal {
                    let ties: Vec<usize> = order
                        .iter()
                        .copied()
                        .filter(|&i| rows[i].rank(a) == Ordering::Equal)
                        .collect();
                    let names: Vec<&str> = ties.iter().map(|&i| rows[i].agent.as_str()).collect();
                    (None, ties, format!("tied: {}", names.join(", ")))
                } else {
                    (Some(*best), vec![], decided_by(a, b).to_string())
                }
            }
        };
        Self {
            task: task.to_string(),
            rows,
            winner,
            ties,
            reason,
            reviews_ms: 0,
        }
    }

    /// The winning row.
    pub fn best(&self) -> Option<&ArenaRow> {
        self.winner.and_then(|i| self.rows.get(i))
    }
}

/// The criterion that put `a` before `b`.
fn decided_by(a: &ArenaRow, b: &ArenaRow) -> &'static str {
    if a.check_rank() != b.check_rank() {
        "its check passed"
    } else if a.red() != b.red() {
        "no red finding"
    } else if a.yellow() != b.yellow() {
        "fewer yellow findings"
    } else if a.diff_size() != b.diff_size() {
        "the smaller diff"
    } else {
        "the lower cost"
    }
}

/// An arena its session ended before comparing: what a continued
/// session needs to compare it ([`unfinished`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Unfinished {
    pub batch_id: String,
    /// The writers' task (the first writer's message).
    pub task: String,
    pub writers: Vec<Writer>,
}

/// A writer of an unfinished arena, as the transcript left it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Writer {
    pub call_id: String,
    pub agent: String,
    /// Its branch (none: its worktree was never made).
    pub branch: Option<String>,
    /// Its branch's last commit (none: it committed nothing).
    pub commit: Option<String>,
    /// The check ran on that commit.
    pub checked: bool,
    /// How its turn ended (none: it was running when the session ended).
    pub ended: Option<StopReason>,
    /// Its branch's review quorum, when one finished after that commit.
    pub reviewed: Option<Quorum>,
}

/// The arenas of `events` (a recorded session) that were never compared:
/// each writer with what was done of it (committed, checked, reviewed), so
/// a continued session runs only what is missing.
pub fn unfinished(events: &[Stamped]) -> Vec<Unfinished> {
    let mut arenas: Vec<Unfinished> = Vec::new();
    let mut compared: HashSet<&str> = HashSet::new();
    // Writers by call and by branch: (arena, writer).
    let mut calls: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut branches: HashMap<&str, (usize, usize)> = HashMap::new();
    // Review batches by the branch they judged.
    let mut judged: HashMap<&str, &str> = HashMap::new();
    for s in events {
        let at = |key: &str, map: &HashMap<&str, (usize, usize)>| map.get(key).copied();
        match &s.event {
            Event::BatchStarted {
                batch_id,
                arena: true,
                ..
            } => arenas.push(Unfinished {
                batch_id: batch_id.clone(),
                ..Unfinished::default()
            }),
            Event::SubagentStarted {
                call_id,
                agent,
                input,
                batch_id: Some(b),
                ..
            } => {
                let Some(a) = arenas.iter().rposition(|u| &u.batch_id == b) else {
                    continue;
                };
                let arena = &mut arenas[a];
                if arena.task.is_empty() {
                    arena.task = input.clone();
                }
                calls.insert(call_id, (a, arena.writers.len()));
                arena.writers.push(Writer {
                    call_id: call_id.clone(),
                    agent: agent.name().to_string(),
                    ..Writer::default()
                });
            }
            Event::WorktreeReady {
                call_id, branch, ..
            } => {
                if let Some((a, w)) = at(call_id, &calls) {
                    arenas[a].writers[w].branch = Some(branch.clone());
                    branches.insert(branch, (a, w));
                }
            }
            Event::WorktreeCommitted {
                branch,
                commit: Some(commit),
                ..
            } => {
                if let Some((a, w)) = at(branch, &branches) {
                    let writer = &mut arenas[a].writers[w];
                    writer.commit = Some(commit.clone());
                    writer.checked = false;
                    writer.reviewed = None;
                }
            }
            Event::CheckFinished { branch, commit, .. } => {
                if let Some((a, w)) = at(branch, &branches) {
                    let writer = &mut arenas[a].writers[w];
                    writer.checked |= writer.commit.as_ref() == Some(commit);
                }
            }
            Event::SubagentFinished {
                call_id,
                stop_reason,
                ..
            } => {
                if let Some((a, w)) = at(call_id, &calls) {
                    arenas[a].writers[w].ended = Some(*stop_reason);
                }
            }
            Event::BranchVerdict {
                branch,
                batch_id: Some(b),
                ..
            } => {
                judged.insert(b, branch);
            }
            Event::ReviewQuorum {
                batch_id, quorum, ..
            } => {
                let writer = judged.get(batch_id.as_str()).and_then(|b| at(b, &branches));
                if let Some((a, w)) = writer {
                    arenas[a].writers[w].reviewed = Some(quorum.clone());
                }
            }
            Event::ArenaCompared { batch_id, .. } => {
                compared.insert(batch_id);
            }
            _ => {}
        }
    }
    arenas.retain(|a| !compared.contains(a.batch_id.as_str()));
    arenas
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(agent: &str) -> ArenaRow {
        ArenaRow {
            agent: agent.into(),
            label: agent.into(),
            branch: format!("quorum/{agent}"),
            diffstat: Diffstat {
                added: 10,
                removed: 0,
                files: 1,
            },
            cost: Some(0.1),
            ..ArenaRow::default()
        }
    }

    fn check(outcome: CheckOutcome) -> Option<CheckCell> {
        Some(CheckCell {
            outcome,
            ..CheckCell::default()
        })
    }

    fn winner(rows: Vec<ArenaRow>) -> (Option<String>, String) {
        let c = Comparison::decide("t", rows);
        (c.best().map(|r| r.agent.clone()), c.reason)
    }

    #[test]
    fn a_passed_check_wins_and_no_check_ranks_between_pass_and_fail() {
        let mut a = row("a");
        a.check = check(CheckOutcome::Failed);
        a.diffstat.added = 1;
        let b = row("b");
        let mut c = row("c");
        c.check = check(CheckOutcome::Passed);
        c.diffstat.added = 100;
        assert_eq!(
            winner(vec![a.clone(), b.clone(), c]),
            (Some("c".into()), "its check passed".into())
        );
        let mut t = row("t");
        t.check = check(CheckOutcome::TimedOut);
        assert_eq!(winner(vec![a, t, b]).0.as_deref(), Some("b"));
    }

    #[test]
    fn a_check_that_could_not_run_ranks_as_none_and_names_the_program() {
        let cell = CheckCell::of(false, None, None, Some("pytest"));
        assert_eq!(cell.outcome, CheckOutcome::CouldNotRun);
        assert_eq!(cell.label(), "no pytest");
        // It says nothing of the branch: the smaller diff wins over a
        // failed check, and loses to a passed one.
        let mut missing = row("missing");
        missing.check = Some(cell);
        missing.diffstat.added = 1;
        let mut failed = row("failed");
        failed.check = check(CheckOutcome::Failed);
        assert_eq!(
            winner(vec![failed, missing.clone()]).0.as_deref(),
            Some("missing")
        );
        let mut passed = row("passed");
        passed.check = check(CheckOutcome::Passed);
        assert_eq!(winner(vec![missing, passed]).0.as_deref(), Some("passed"));
        // A failed check that printed no such line is a failure.
        assert_eq!(
            CheckCell::of(false, None, None, None).outcome,
            CheckOutcome::Failed
        );
    }

    #[test]
    fn a_pass_on_a_branch_that_changed_the_tests_counts_as_no_check() {
        let mut weakened = row("weakened");
        weakened.check = check(CheckOutcome::Passed);
        weakened.tests_touched = 1;
        weakened.diffstat.added = 1;
        let mut honest = row("honest");
        honest.check = check(CheckOutcome::Passed);
        assert_eq!(
            winner(vec![weakened.clone(), honest]),
            (Some("honest".into()), "its check passed".into())
        );
        // Over a failed check it still wins.
        let mut failed = row("failed");
        failed.check = check(CheckOutcome::Failed);
        assert_eq!(
            winner(vec![failed, weakened]).0.as_deref(),
            Some("weakened")
        );
    }

    #[test]
    fn then_no_red_then_fewer_yellow_then_the_smaller_diff_then_the_lower_cost() {
        let mut red = row("red");
        red.findings.red = 1;
        red.diffstat.added = 1;
        let mut yellow2 = row("y2");
        yellow2.findings.yellow = 2;
        assert_eq!(
            winner(vec![red.clone(), yellow2.clone()]),
            (Some("y2".into()), "no red finding".into())
        );
        // A red verdict without findings is red all the same.
        let mut said_red = row("said");
        said_red.verdict = Some(Severity::Red);
        said_red.diffstat.added = 1;
        assert_eq!(winner(vec![said_red, row("b")]).0.as_deref(), Some("b"));
        let mut yellow1 = row("y1");
        yellow1.findings.yellow = 1;
        yellow1.diffstat.added = 50;
        assert_eq!(
            winner(vec![red.clone(), yellow2, yellow1]),
            (Some("y1".into()), "fewer yellow findings".into())
        );
        let mut small = row("small");
        small.diffstat.removed = 0;
        small.diffstat.added = 3;
        assert_eq!(
            winner(vec![row("big"), small]),
            (Some("small".into()), "the smaller diff".into())
        );
        let mut cheap = row("cheap");
        cheap.cost = Some(0.01);
        let mut unknown = row("unknown");
        unknown.cost = None;
        assert_eq!(
            winner(vec![unknown, row("dear"), cheap]),
            (Some("cheap".into()), "the lower cost".into())
        );
    }

    #[test]
    fn equal_rows_are_ties_named_and_a_failed_writer_never_wins() {
        let mut failed = row("failed");
        failed.failed = Some("no commit".into());
        failed.diffstat.added = 0;
        let c = Comparison::decide("t", vec![row("a"), failed.clone(), row("b")]);
        assert_eq!((c.winner, c.ties.clone()), (None, vec![0, 2]));
        assert_eq!(c.reason, "tied: a, b");
        let c = Comparison::decide("t", vec![failed.clone()]);
        assert_eq!(c.winner, None);
        let c = Comparison::decide("t", vec![failed, row("only")]);
        assert_eq!(c.winner, Some(1));
    }

    #[test]
    fn the_counts_leave_out_refuted_findings_and_the_check_reads_short() {
        use crate::event::finding::{Check, Finding, QuorumFinding};
        let f = |severity, refuted: bool| QuorumFinding {
            finding: Finding {
                file: "a.rs".into(),
                line: 1,
                end_line: None,
                severity,
                title: "t".into(),
                body: String::new(),
            },
            by: vec!["x".into()],
            of: 2,
            outside_diff: false,
            check: refuted.then(|| Check::Refuted {
                by: "y".into(),
                reason: String::new(),
            }),
        };
        let c = FindingCounts::of(&[
            f(Severity::Red, true),
            f(Severity::Yellow, false),
            f(Severity::Yellow, false),
        ]);
        assert_eq!((c.red, c.yellow), (0, 2));
        let cell = CheckCell {
            outcome: CheckOutcome::Failed,
            passed: Some(11),
            failed: Some(1),
            missing: None,
            ms: None,
        };
        assert_eq!(cell.label(), "fail 1/12");
        let json = serde_json::to_value(Comparison::decide("t", vec![row("a")])).unwrap();
        assert_eq!(json["winner"], 0);
        let back: Comparison = serde_json::from_value(json).unwrap();
        assert_eq!(back.rows[0].agent, "a");
    }
}
