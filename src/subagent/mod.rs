//! The sub-agent tool: the dispatcher (its state, a call's life, batches,
//! steering), the ACP agents' pool, session memory, model picks, the
//! severity verdict, and the tool as the model sees it; here, turning a
//! final report into the events that close a call's box.

pub mod dispatch;
pub mod findings;
pub mod input;
pub mod memory;
pub mod picks;
pub mod pool;
pub mod severity;
pub mod tool;

pub(crate) use crate::runtime::lock;

use std::path::Path;

use crate::event::{Activity, AgentRef, Event, NoticeLevel, Outcome};
use findings::place::DiffRanges;

/// Where a review's findings are checked: the reviewed tree (the
/// repository's top, or a worktree task's), and the reviewed diff when its
/// prompt held one.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reviewed<'a> {
    pub tree: Option<&'a Path>,
    pub diff: Option<&'a DiffRanges>,
    /// A review of a branch: the branch, whose files the findings name.
    pub rev: Option<&'a str>,
}

/// The events that end a call: its `SubagentFinished`, preceded by a
/// notice when a review's severity header has a value quorum does not know,
/// and by a notice in its box for each finding dropped.
///
/// The header is stripped from what is shown either way; it only tints the
/// box, and findings are only read, when the call asked for a code review
/// (`review` is `Some`).
pub fn finish(
    call_id: &str,
    agent: &AgentRef,
    outcome: &Outcome,
    review: Option<Reviewed<'_>>,
) -> Vec<Event> {
    let agent = agent.name();
    let verdict = severity::parse(&outcome.output);
    let mut events = Vec::with_capacity(2);
    if review.is_some()
        && let Some(value) = verdict.unknown
    {
        events.push(Event::Notice {
            level: NoticeLevel::Warning,
            text: format!(
                "{agent}: unknown review severity {value:?} (expected green, yellow or red); no verdict"
            ),
        });
    }
    let mut parsed = findings::Parsed::default();
    if let Some(review) = review {
        parsed = findings::parse(verdict.body);
        if let Some(tree) = review.tree
            && !parsed.findings.is_empty()
        {
            findings::place::check(&mut parsed, tree, review.diff, review.rev);
        }
        for text in parsed.bounded_notices() {
            events.push(Event::SubagentActivity {
                call_id: call_id.to_string(),
                activity: Activity::Notice { text },
            });
        }
    }
    // A header milder than its own worst finding counts as that finding.
    let worst = parsed.findings.iter().map(|f| f.severity).max();
    let severity = match (review.and(verdict.severity), worst) {
        (Some(said), Some(worst)) if worst > said => {
            events.push(Event::SubagentActivity {
                call_id: call_id.to_string(),
                activity: Activity::Notice {
                    text: format!(
                        "{agent}: the header says {}, but a finding is {}: counted {}",
                        said.as_str(),
                        worst.as_str(),
                        worst.as_str()
                    ),
                },
            });
            Some(worst)
        }
        (said, _) => said,
    };
    events.push(Event::SubagentFinished {
        call_id: call_id.to_string(),
        output: verdict.body.to_string(),
        stop_reason: outcome.stop_reason,
        severity,
        findings: parsed.findings,
    });
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Activity, Severity, StopReason};

    fn finish(agent: &str, report: &str, code_review: bool) -> Vec<Event> {
        super::finish(
            "c",
            &AgentRef::Acp(agent.into()),
            &Outcome::new(StopReason::EndTurn, report),
            code_review.then(Reviewed::default),
        )
    }

    #[test]
    fn review_header_tints_and_is_stripped() {
        let events = finish("claude", "<!-- severity: yellow -->\nTwo nits.", true);
        assert_eq!(
            events,
            [Event::SubagentFinished {
                call_id: "c".into(),
                output: "Two nits.".into(),
                stop_reason: StopReason::EndTurn,
                severity: Some(Severity::Yellow),
                findings: Vec::new(),
            }]
        );
    }

    /// A review's findings ride on its end; one dropped is a notice in
    /// its box (the review still counts); a call that is not a review
    /// has none.
    #[test]
    fn a_reviews_findings_end_it_and_bad_ones_are_told_in_its_box() {
        let report = "<!-- severity: red -->\nBad.\n\
            <!-- finding: {\"file\": \"a.rs\", \"line\": 2, \"severity\": \"red\", \"title\": \"t\"} -->\nwhy\n\
            <!-- finding: {\"file\": \"a.rs\", \"line\": 2, \"severity\": \"blue\", \"title\": \"u\"} -->\n";
        let events = finish("claude", report, true);
        match &events[..] {
            [
                Event::SubagentActivity {
                    activity: Activity::Notice { text },
                    ..
                },
                Event::SubagentFinished {
                    severity: Some(Severity::Red),
                    findings,
                    ..
                },
            ] => {
                assert_eq!(
                    text,
                    "finding 2 dropped: severity \"blue\" is not green, yellow or red"
                );
                assert_eq!(findings.len(), 1);
                assert_eq!(
                    (findings[0].place(), findings[0].body.as_str()),
                    ("a.rs:2".into(), "why")
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            &finish("claude", report, false)[..],
            [Event::SubagentFinished { findings, .. }] if findings.is_empty()
        ));
    }

    #[test]
    fn without_the_review_flag_there_is_no_tint() {
        let events = finish("claude", "<!-- severity: red -->\nHi.", false);
        assert!(matches!(
            &events[..],
            [Event::SubagentFinished { severity: None, output, .. }] if output == "Hi."
        ));
    }

    #[test]
    fn unknown_value_gives_a_notice_and_no_verdict() {
        let events = finish("codex", "<!-- severity: amber -->\nHmm.", true);
        match &events[..] {
            [
                Event::Notice {
                    level: NoticeLevel::Warning,
                    text,
                },
                Event::SubagentFinished {
                    severity: None,
                    output,
                    ..
                },
            ] => {
                assert!(
                    text.contains("codex: unknown review severity \"amber\""),
                    "{text}"
                );
                assert_eq!(output, "Hmm.");
            }
            other => panic!("{other:?}"),
        }
    }
}
