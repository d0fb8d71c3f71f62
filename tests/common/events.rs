//! Waiting on a session's events: the next one a test looks for, and what
//! came before it.

use std::time::Duration;

use quorum::event::{Event, Stamped};
use tokio::sync::mpsc::UnboundedReceiver;

/// How long a test waits for the next event before it fails (a bound on a
/// wedge, never a measure of speed).
pub const PATIENCE: Duration = Duration::from_secs(60);

/// The events from now up to and including the first for which `done`
/// holds. The test fails if the session ends first, or if no event comes
/// for [`PATIENCE`].
pub async fn until(
    events: &mut UnboundedReceiver<Stamped>,
    mut done: impl FnMut(&Event) -> bool,
) -> Vec<Stamped> {
    let mut seen = Vec::new();
    loop {
        let e = next(events, &seen).await;
        let last = done(&e.event);
        seen.push(e);
        if last {
            return seen;
        }
    }
}

/// What `pick` takes from the first event it takes something from.
pub async fn next_of<T>(
    events: &mut UnboundedReceiver<Stamped>,
    mut pick: impl FnMut(&Event) -> Option<T>,
) -> T {
    let mut seen = Vec::new();
    loop {
        let e = next(events, &seen).await;
        if let Some(t) = pick(&e.event) {
            return t;
        }
        seen.push(e);
    }
}

async fn next(events: &mut UnboundedReceiver<Stamped>, seen: &[Stamped]) -> Stamped {
    let kinds = || {
        seen.iter()
            .map(|e| format!("{:?}", e.event))
            .collect::<Vec<_>>()
    };
    match tokio::time::timeout(PATIENCE, events.recv()).await {
        Ok(Some(e)) => e,
        Ok(None) => panic!("the session ended; seen: {:#?}", kinds()),
        Err(_) => panic!("no event for {PATIENCE:?}; seen: {:#?}", kinds()),
    }
}

/// Whether `done` holds within [`PATIENCE`], checked every 20 ms while the
/// runtime runs the test's other tasks (a test on tokio's current-thread
/// runtime that slept in a blocking loop would starve them).
pub async fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !done() {
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}
