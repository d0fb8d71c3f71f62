//! A batch's header: its members as the board's snapshots say, its
//! outcome, its review quorum and the tint its group takes; and usage
//! added up over calls (a batch's, the session's).

use super::{CellKind, State, clean};
use crate::event::finding::{Check, Finding, QuorumFinding};
use crate::event::{Cost, Quorum, Severity, Summary, UsageShare};

/// One task of a batch, in its header.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub call_id: String,
    pub agent: String,
    /// The board's latest snapshot of it, sanitised: its state, its
    /// verdict, and its part of the batch's usage total.
    pub summary: Summary,
}

/// Usage added up over calls: tokens in context and cost (one amount per
/// currency, in the order first seen). Built from the board's shares,
/// which count a resumed session once.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UsageTotal {
    pub tokens: i64,
    pub costs: Vec<Cost>,
}

impl UsageTotal {
    /// The total of `shares`, or `None` when no call reported usage.
    pub fn of<'a>(shares: impl IntoIterator<Item = &'a UsageShare>) -> Option<Self> {
        let mut total: Option<Self> = None;
        for share in shares {
            let t = total.get_or_insert_with(Self::default);
            t.tokens += share.tokens;
            if let Some(c) = &share.cost {
                match t.costs.iter_mut().find(|x| x.currency == c.currency) {
                    Some(x) => {
                        x.amount += c.amount;
                        x.estimated |= c.estimated;
                    }
                    None => t.costs.push(c.clone()),
                }
            }
        }
        total
    }
}

/// A batch's header line: its tasks as they go, then its totals and, for
/// a review batch, the quorum.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchHeader {
    pub batch_id: String,
    /// How many tasks it has (those that could not start included).
    pub tasks: u32,
    pub review: bool,
    /// The tasks that have a box, in order.
    pub members: Vec<Member>,
    /// `(succeeded, failed, worst verdict)` once every task ended.
    pub finished: Option<(u32, u32, Option<Severity>)>,
    pub quorum: Option<Quorum>,
    /// The branch a review batch judged (its verdict is recorded there).
    pub branch: Option<String>,
    /// The reviewed diff, sanitised (none in older transcripts).
    pub diff: Option<String>,
}

impl BatchHeader {
    /// The verdict the group is tinted with: the quorum's, else the worst
    /// a task gave, once the batch is done.
    pub fn tint(&self) -> Option<Severity> {
        match (&self.quorum, self.finished) {
            (Some(q), _) => q.verdict,
            (None, Some((_, _, worst))) => worst,
            (None, None) => None,
        }
    }

    /// Its tasks' usage added up (a review quorum's cost).
    pub fn usage_total(&self) -> Option<UsageTotal> {
        UsageTotal::of(self.members.iter().filter_map(|m| m.summary.share.as_ref()))
    }
}

impl State {
    pub(super) fn batch(&mut self, batch_id: &str) -> Option<&mut BatchHeader> {
        let index = *self.batches.get(batch_id)?;
        match self.touch(index) {
            CellKind::Batch(b) => Some(b),
            _ => None,
        }
    }

    /// The batch a call's box belongs to.
    pub(super) fn batch_of(&self, call_id: &str) -> Option<String> {
        match &self.cells[*self.calls.get(call_id)?].kind {
            CellKind::Subagent(b) => b.batch.as_ref().map(|g| g.batch_id.clone()),
            _ => None,
        }
    }

    /// Tints a batch's header and the boxes grouped under it.
    fn tint_batch(&mut self, batch_id: &str) {
        let Some(header) = self.batch(batch_id) else {
            return;
        };
        let tint = header.tint();
        let done = header.finished.is_some();
        let calls: Vec<String> = header.members.iter().map(|m| m.call_id.clone()).collect();
        let count = calls.len();
        for (i, call_id) in calls.into_iter().enumerate() {
            if let Some(b) = self.subagent(&call_id)
                && let Some(group) = &mut b.batch
            {
                group.tint = tint;
                group.last = done && i + 1 == count;
            }
        }
    }

    pub(super) fn on_batch_started(&mut self, batch_id: &str, tasks: u32, review: bool) {
        self.open_assistant = None;
        let i = self.push(CellKind::Batch(Box::new(BatchHeader {
            branch: None,
            diff: None,
            batch_id: clean(batch_id),
            tasks,
            review,
            members: Vec::new(),
            finished: None,
            quorum: None,
        })));
        self.batches.insert(batch_id.to_string(), i);
    }

    pub(super) fn on_batch_finished(
        &mut self,
        batch_id: &str,
        succeeded: u32,
        failed: u32,
        worst_verdict: Option<Severity>,
    ) {
        if let Some(header) = self.batch(batch_id) {
            header.finished = Some((succeeded, failed, worst_verdict));
        }
        self.tint_batch(batch_id);
    }

    /// A review batch's verdict was recorded against a branch: its header
    /// names it.
    pub(super) fn on_branch_verdict(&mut self, batch_id: Option<&str>, branch: &str) {
        if let Some(header) = batch_id.and_then(|id| self.batch(id)) {
            header.branch = Some(clean(branch));
        }
    }

    pub(super) fn on_review_quorum(&mut self, batch_id: &str, quorum: &Quorum, diff: Option<&str>) {
        if let Some(header) = self.batch(batch_id) {
            let mut quorum = quorum.clone();
            for v in &mut quorum.verdicts {
                v.agent = clean(&v.agent);
            }
            header.quorum = Some(quorum);
            header.diff = diff.map(|d| crate::confine::sanitize::sanitize(d).into_owned());
        }
        self.tint_batch(batch_id);
        // Each reviewer's box learns what was said of its findings.
        for v in &quorum.verdicts {
            let Some(&index) = v.call_id.as_ref().and_then(|c| self.calls.get(c)) else {
                continue;
            };
            self.edit_box(index, |b| {
                b.checks = b
                    .findings
                    .iter()
                    .map(|f| check_of(&quorum.findings, &v.agent, f))
                    .collect();
            });
        }
    }

    /// The batch header at cell `index`, if it is one.
    pub fn batch_at(&self, index: usize) -> Option<&BatchHeader> {
        match &self.cells.get(index)?.kind {
            CellKind::Batch(b) => Some(b),
            _ => None,
        }
    }

    /// Who wrote `branch`: the name `/msg` takes for it (its task id, or
    /// `c4` for a foreground call) and its agent.
    pub fn branch_writer(&self, branch: &str) -> Option<(String, String)> {
        self.boxes
            .iter()
            .rev()
            .find_map(|&i| match &self.cells[i].kind {
                CellKind::Subagent(b)
                    if b.worktree.as_ref().is_some_and(|w| w.branch == branch) =>
                {
                    let name = b
                        .task_id
                        .clone()
                        .unwrap_or_else(|| b.call_id.replace("call-", "c"));
                    Some((name, b.agent.name().to_string()))
                }
                _ => None,
            })
    }

    /// The cells the focus moves through: the boxes, and the headers of
    /// review quorums that have findings (Enter opens their findings
    /// view), in order.
    pub fn focusable(&self) -> Vec<usize> {
        let mut out: Vec<usize> = self.boxes.clone();
        out.extend(self.batches.values().copied().filter(|&i| {
            self.batch_at(i)
                .and_then(|b| b.quorum.as_ref())
                .is_some_and(|q| !q.findings.is_empty())
        }));
        out.sort_unstable();
        out
    }
}

/// What was said of `agent`'s finding `f`: the check of the quorum's
/// finding it is part of (the same file, lines that overlap, `agent`
/// among who found it), its words sanitised.
fn check_of(merged: &[QuorumFinding], agent: &str, f: &Finding) -> Option<Check> {
    let end = |f: &Finding| f.end_line.unwrap_or(f.line).max(f.line);
    let q = merged.iter().find(|q| {
        q.by.iter().any(|b| b == agent)
            && q.finding.file == f.file
            && f.line <= end(&q.finding)
            && q.finding.line <= end(f)
    })?;
    Some(match q.check.as_ref()? {
        Check::Confirmed { by, reason } => Check::Confirmed {
            by: clean(by),
            reason: clean(reason),
        },
        Check::Refuted { by, reason } => Check::Refuted {
            by: clean(by),
            reason: clean(reason),
        },
    })
}

#[cfg(test)]
mod tests {
    //! What applying a batch's events changes in its header and group.

    use super::*;
    use crate::event::build;
    use crate::event::{Activity, AgentRef, Event, Summary, TaskState, Usage};
    use crate::tui::state::Grouped;
    use crate::tui::state::fixtures::*;

    fn usage_snapshot(call: &str, used: u64, tokens: i64, cost: f64, currency: &str) -> Event {
        let cost = Cost {
            amount: cost,
            currency: currency.into(),
            estimated: false,
        };
        Event::TaskProgress {
            call_id: call.into(),
            task_id: Some(format!("t-{call}")),
            summary: Summary {
                usage: Some(Usage {
                    used,
                    size: Some(200_000),
                    cost: Some(cost.clone()),
                }),
                share: Some(UsageShare {
                    tokens,
                    cost: Some(cost),
                }),
                ..Summary::default()
            },
        }
    }

    #[test]
    fn usage_is_copied_from_the_board_and_added_up_per_batch_and_session() {
        let mut s = State::new();
        apply(&mut s, 1, batch_started());
        apply(&mut s, 2, member("c1", "a", false));
        apply(&mut s, 2, member("c2", "b", false));
        // The activity itself changes nothing: the board's snapshot does.
        apply(
            &mut s,
            3,
            Event::SubagentActivity {
                call_id: "c1".into(),
                activity: Activity::Usage {
                    usage: Usage {
                        used: 9,
                        ..Usage::default()
                    },
                },
            },
        );
        assert_eq!(box_of(&s, "c1").summary.usage, None);
        assert_eq!(s.usage_total(), None, "no usage, no total");
        apply(&mut s, 4, usage_snapshot("c1", 1_000, 1_000, 0.01, "USD"));
        // A resumed session: the box shows the session's figures, its
        // share only what this call added.
        apply(
            &mut s,
            5,
            usage_snapshot("c2", 3_000, 500, 0.02, "USD\x1b[31m"),
        );
        let b = box_of(&s, "c2");
        assert_eq!(b.summary.usage.as_ref().unwrap().used, 3_000);
        assert_eq!(
            b.summary
                .usage
                .as_ref()
                .unwrap()
                .cost
                .as_ref()
                .unwrap()
                .currency,
            "USD",
            "sanitised"
        );
        assert_eq!(
            s.tasks[1].summary.usage, b.summary.usage,
            "the panel shows the same"
        );
        assert_eq!(header(&s).members[1].summary.share, b.summary.share);
        let total = header(&s).usage_total().unwrap();
        assert_eq!(total.tokens, 1_500);
        assert_eq!(total.costs.len(), 1);
        assert!((total.costs[0].amount - 0.03).abs() < 1e-9);
        // A call outside the batch counts for the session, not the batch;
        // each currency adds up on its own.
        apply(
            &mut s,
            6,
            build::started("solo", AgentRef::Internal)
                .input("x")
                .task("t-solo")
                .event(),
        );
        apply(&mut s, 7, usage_snapshot("solo", 2_000, 2_000, 2.0, "EUR"));
        assert_eq!(header(&s).usage_total().unwrap().tokens, 1_500);
        let session = s.usage_total().unwrap();
        assert_eq!(session.tokens, 3_500);
        assert_eq!(
            session
                .costs
                .iter()
                .map(|c| c.currency.as_str())
                .collect::<Vec<_>>(),
            ["USD", "EUR"]
        );
        apply(&mut s, 8, usage_snapshot("nobody", 5, 5, 5.0, "USD"));
        assert_eq!(
            s.usage_total().unwrap().tokens,
            3_500,
            "an unknown call adds nothing"
        );
    }

    #[test]
    fn batch_started_opens_a_header_that_groups_its_boxes() {
        let mut s = State::new();
        apply(&mut s, 1, batch_started());
        apply(&mut s, 2, member("c1", "a", false));
        apply(&mut s, 2, member("c2", "b", true));
        let h = header(&s);
        assert_eq!((h.tasks, h.review, h.finished), (3, true, None));
        assert_eq!(
            h.members
                .iter()
                .map(|m| (m.call_id.as_str(), m.agent.as_str(), m.summary.state))
                .collect::<Vec<_>>(),
            [
                ("c1", "a", TaskState::Running),
                ("c2", "b", TaskState::Queued)
            ]
        );
        assert!(
            matches!(s.cells[0].kind, CellKind::Batch(_)),
            "the header comes first"
        );
        for call in ["c1", "c2"] {
            assert_eq!(
                box_of(&s, call).batch,
                Some(Grouped {
                    batch_id: "b1".into(),
                    tint: None,
                    last: false
                })
            );
        }
        assert!(box_of(&s, "c2").queued());
        assert_eq!((s.running(), s.queued()), (2, 1));
        assert_eq!(s.tasks[1].summary.state, TaskState::Queued, "the panel too");
        // The board's snapshots reach the header's members.
        apply(
            &mut s,
            3,
            Event::TaskProgress {
                call_id: "c1".into(),
                task_id: Some("t-c1".into()),
                summary: Summary {
                    state: TaskState::Done,
                    severity: Some(Severity::Red),
                    ..Summary::default()
                },
            },
        );
        let m = &header(&s).members[0];
        assert_eq!(
            (m.summary.state, m.summary.severity),
            (TaskState::Done, Some(Severity::Red))
        );
        // A box of an unknown batch is drawn on its own.
        apply(
            &mut s,
            4,
            build::started("c3", AgentRef::Acp("c".into()))
                .input("x")
                .batch("b9")
                .event(),
        );
        assert_eq!(box_of(&s, "c3").batch, None);
    }

    #[test]
    fn batch_finished_totals_and_tints_the_group() {
        let mut s = State::new();
        apply(&mut s, 1, batch_started());
        apply(&mut s, 2, member("c1", "a", false));
        apply(&mut s, 2, member("c2", "b", false));
        apply(
            &mut s,
            9,
            Event::BatchFinished {
                batch_id: "b1".into(),
                total: 3,
                succeeded: 1,
                failed: 2,
                worst_verdict: Some(Severity::Yellow),
            },
        );
        let h = header(&s);
        assert_eq!(h.finished, Some((1, 2, Some(Severity::Yellow))));
        assert_eq!(h.tint(), Some(Severity::Yellow));
        let groups: Vec<_> = ["c1", "c2"]
            .iter()
            .map(|c| box_of(&s, c).batch.clone().unwrap())
            .collect();
        assert!(groups.iter().all(|g| g.tint == Some(Severity::Yellow)));
        assert_eq!(
            groups.iter().map(|g| g.last).collect::<Vec<_>>(),
            [false, true],
            "the last box closes the group"
        );
    }

    #[test]
    fn review_quorum_tints_the_group_with_its_verdict() {
        use crate::event::ReviewerVerdict;
        let mut s = State::new();
        apply(&mut s, 1, batch_started());
        apply(&mut s, 2, member("c1", "a", false));
        let verdict = |agent: &str, severity| ReviewerVerdict {
            agent: agent.into(),
            call_id: None,
            severity: Some(severity),
            failed: false,
        };
        apply(
            &mut s,
            9,
            Event::ReviewQuorum {
                batch_id: "b1".into(),
                quorum: Quorum::of(vec![
                    verdict("a\x1b[2J", Severity::Red),
                    verdict("b", Severity::Green),
                ]),
                diff: None,
            },
        );
        let h = header(&s);
        let q = h.quorum.as_ref().unwrap();
        assert_eq!((q.label().as_str(), q.unanimous()), ("red · 1 of 2", false));
        assert_eq!(q.verdicts[0].agent, "a", "sanitised");
        assert_eq!(h.tint(), Some(Severity::Red));
        assert_eq!(
            box_of(&s, "c1").batch.as_ref().unwrap().tint,
            Some(Severity::Red)
        );
    }
}
