//! A review quorum's findings, merged from its reviewers'.
//!
//! The rule: two findings of different reviewers are the same finding
//! when they name the same file and their lines overlap (`line..=end_line`;
//! a finding without `end_line` is its one line). Titles are not compared:
//! two reviewers pointing at the same lines are, nearly always, pointing
//! at the same problem. A reviewer's own findings are never merged with
//! each other (it said two things). The merged finding has the highest
//! severity given, the first reviewer's title and body, the union of the
//! lines, and names who found it in the order they reported.

use super::place::DiffRanges;
use crate::event::finding::{Finding, QuorumFinding};

fn end(f: &Finding) -> u32 {
    f.end_line.unwrap_or(f.line).max(f.line)
}

/// The quorum's findings of each reviewer's (`(agent, findings)`, in the
/// order of the tasks), of `of` reviewers; with the reviewed diff, those
/// whose lines it does not touch are marked `outside_diff`. Sorted from
/// the worst severity down, then by how many found it, then by place.
pub fn merge(
    reports: &[(&str, &[Finding])],
    of: usize,
    diff: Option<&DiffRanges>,
) -> Vec<QuorumFinding> {
    let mut merged: Vec<QuorumFinding> = Vec::new();
    for (agent, findings) in reports {
        for f in *findings {
            let same = merged.iter_mut().find(|q| {
                q.finding.file == f.file
                    && f.line <= end(&q.finding)
                    && q.finding.line <= end(f)
                    && !q.by.iter().any(|b| b == agent)
            });
            match same {
                Some(q) => {
                    let last = end(&q.finding).max(end(f));
                    q.finding.line = q.finding.line.min(f.line);
                    q.finding.end_line = (last > q.finding.line).then_some(last);
                    q.finding.severity = q.finding.severity.max(f.severity);
                    q.by.push(agent.to_string());
                }
                None => merged.push(QuorumFinding {
                    finding: f.clone(),
                    by: vec![agent.to_string()],
                    of,
                    outside_diff: false,
                    check: None,
                }),
            }
        }
    }
    if let Some(diff) = diff {
        for q in &mut merged {
            let f = &q.finding;
            q.outside_diff = !diff.touches(&f.file, f.line, end(f));
        }
    }
    merged.sort_by(|a, b| {
        (b.finding.severity, b.by.len())
            .cmp(&(a.finding.severity, a.by.len()))
            .then_with(|| (&a.finding.file, a.finding.line).cmp(&(&b.finding.file, b.finding.line)))
    });
    merged
}
