//! A box's detail read back from the transcript: what an older box let go
//! to bound memory (`state::spill`), rebuilt by running the call's span of
//! the transcript through the same `State::apply` that built it the first
//! time, so the opened box shows what it showed before.

use std::ops::ControlFlow;
use std::path::Path;

use super::state::{Log, State, SubagentBox, Terminals};

/// The detail (log and terminals) of box `b` as the transcript at `path`
/// has it (its lines at most `max_line` bytes): its events from its start
/// to its end (or to the file's end, while it runs).
pub fn detail(path: &Path, max_line: u64, b: &SubagentBox) -> Result<(Log, Terminals), String> {
    let span = |from: u64| -> Result<Option<(Log, Terminals)>, String> {
        let mut scratch = State::new();
        let mut found = false;
        crate::transcript::read_since(path, from, max_line, &mut |event| {
            scratch.apply(&event);
            let Some(seen) = scratch.subagent_box(&b.call_id) else {
                return ControlFlow::Continue(());
            };
            if seen.started == b.started {
                found = true;
                // Up to its end: what it showed when it let its detail go.
                if b.finished.is_some() && seen.finished == b.finished {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        })
        .map_err(|e| e.to_string())?;
        let seen = scratch.subagent_box(&b.call_id).filter(|_| found);
        Ok(seen.map(|s| (s.log.clone(), s.terminals.clone())))
    };
    // Found by its start; a transcript whose clock went back (an import)
    // is read from its beginning.
    match span(b.started)? {
        Some(found) => Ok(found),
        None => span(0)?.ok_or_else(|| {
            format!(
                "the transcript {} has no call {}",
                path.display(),
                b.call_id
            )
        }),
    }
}
