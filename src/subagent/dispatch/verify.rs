//! A review quorum that checks itself (`verify`): after its reviewers
//! end and their findings are merged, each red or yellow finding only one
//! reviewer made is sent to another reviewer of the batch (never its
//! author) as a call of its own (a box, a fresh session, no review
//! contract), at most `max_parallel` at once; its answer's
//! `<!-- finding-check: confirmed|refuted -->` sets the finding's `check`,
//! and the quorum's verdict is made again (`Quorum::checked`). A check
//! that cannot run, fails, or answers without the header leaves its
//! finding unchecked, with a notice; it never stops the review.

use std::sync::Arc;

use tokio::sync::{Semaphore, watch};

use super::Dispatcher;
use super::call::{Launch, Place};
use crate::confine::fsroot::Exclude;
use crate::event::{Event, NoticeLevel, Quorum, StopReason};
use crate::subagent::findings::check;
use crate::subagent::input::TaskSpec;

/// What the checks of a batch run with: its caller's.
pub(super) struct Verify {
    pub(super) depth: u32,
    pub(super) cancel: Option<watch::Receiver<bool>>,
    pub(super) exclude: Option<Exclude>,
}

impl Dispatcher {
    /// Checks `quorum`'s lone red and yellow findings with the other
    /// `reviewers` (the agents whose reviews answered, in task order),
    /// `diff` the reviewed diff; then makes its verdict again.
    pub(super) async fn verify(
        self: &Arc<Self>,
        quorum: &mut Quorum,
        reviewers: &[String],
        diff: Option<&str>,
        with: &Verify,
    ) {
        let places = Arc::new(Semaphore::new(self.max_parallel));
        let mut runs = Vec::new();
        for (index, checker) in check::checkers(&quorum.findings, reviewers) {
            let f = &quorum.findings[index];
            let what = format!("{} {}", f.finding.severity.as_str(), f.finding.place());
            let Some(checker) = checker else {
                self.verify_notice(format!(
                    "verify: the finding {what} stays unchecked: no other reviewer to check it"
                ));
                continue;
            };
            let spec = TaskSpec {
                agent: (checker != "internal").then(|| checker.clone()),
                input: Some(check::prompt(&f.by[0], &f.finding, diff)),
                code_review: false,
                output_requirements: None,
                isolation: false,
                branch: None,
                max_cost: None,
            };
            let place = match places.clone().try_acquire_owned() {
                Ok(permit) => Place::Held(permit),
                Err(_) => Place::Wait(places.clone()),
            };
            let launch = Launch {
                background: false,
                batch_id: None,
                place: Some(place),
                cancel: with.cancel.clone(),
                summary: None,
                exclude: with.exclude.as_ref(),
                detach: None,
                index: 0,
            };
            let opened = match self.prepare(spec, false, with.depth, true) {
                Ok(p) => self.open(p, launch).await,
                Err(e) => Err(e),
            };
            match opened {
                Ok(opened) => runs.push((index, checker, what, opened)),
                Err(e) => self.verify_notice(format!(
                    "verify: {checker} cannot check the finding {what} ({e}); it stays unchecked"
                )),
            }
        }
        let answers =
            futures::future::join_all(runs.into_iter().map(|(index, checker, what, opened)| {
                let this = self.clone();
                async move { (index, checker, what, this.run(opened).await) }
            }))
            .await;
        for (index, checker, what, outcome) in answers {
            let answer = (outcome.stop_reason == StopReason::EndTurn)
                .then(|| check::parse(&outcome.output, &checker))
                .flatten();
            match answer {
                Some(c) => quorum.findings[index].check = Some(c),
                None if outcome.stop_reason != StopReason::EndTurn => {
                    self.verify_notice(format!(
                        "verify: {checker}'s check of the finding {what} ended with {}; it stays unchecked",
                        outcome.stop_reason.as_str()
                    ))
                }
                None => self.verify_notice(format!(
                    "verify: {checker}'s check of the finding {what} has no \
                     `<!-- finding-check: confirmed|refuted -->` header; it stays unchecked"
                )),
            }
        }
        quorum.checked();
    }

    fn verify_notice(&self, text: String) {
        self.emitter.emit(Event::Notice {
            level: NoticeLevel::Warning,
            text,
        });
    }
}
