//! The event bus of a session: every event the engine emits is stamped
//! with the session clock, runs through the task board (which may add the
//! snapshot it changed), is written to the recorder when one is on, and is
//! sent to the front end, in that order and under one lock, so the
//! transcript, the board and the screen see the same sequence.
//!
//! Streamed text (a chunk of a message, a thought or a terminal's output)
//! may wait up to [`HOLD`] to be recorded and sent with what streams after
//! it: one write to the transcript and one wake-up of the front end for
//! many chunks, not one each. Any other event takes what waits with it at
//! once, in order; nothing is sent before it is recorded, so the screen
//! never shows what the transcript does not hold.
//!
//! The recorder is whatever implements [`Record`] (the transcript's
//! `Recorder`), attached by the engine: the bus knows no file format.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::event::{Event, Stamped};
use crate::runtime::board::Board;

/// The longest streamed text waits to be recorded and sent: well under
/// the screen's frame (30 a second), so it shows as soon as it would
/// have.
pub const HOLD: Duration = Duration::from_millis(8);

/// Where the bus writes every event, in the order it sends them: the
/// transcript recorder.
pub trait Record: Send {
    /// Writes one event; an error stops recording.
    fn record(&mut self, event: &Stamped) -> std::io::Result<()>;
    /// Writes events in order, at once where it can; an error stops
    /// recording.
    fn record_all(&mut self, events: &[Stamped]) -> std::io::Result<()> {
        events.iter().try_for_each(|e| self.record(e))
    }
    /// The file being written, for messages.
    fn path(&self) -> &Path;
}

struct Inner {
    tx: mpsc::UnboundedSender<Stamped>,
    board: Board,
    recorder: Option<Box<dyn Record>>,
    /// Events stamped and seen by the board, not yet recorded and sent:
    /// streamed text (and the snapshots it made) within [`HOLD`].
    held: Vec<Stamped>,
    /// A timer will flush `held`.
    due: bool,
    /// Who else is sent the events (those each wants), after the front end.
    taps: Vec<Tap>,
}

/// A second reader of the bus's events: only those `wants` takes.
struct Tap {
    wants: fn(&Event) -> bool,
    tx: mpsc::UnboundedSender<Stamped>,
}

/// Emits events. Cheap to clone; sending never blocks, and a closed
/// channel (the front end is gone) is not an error for the engine.
#[derive(Clone)]
pub struct Emitter {
    start: Instant,
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for Emitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emitter").finish_non_exhaustive()
    }
}

fn lock(inner: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    // A panic elsewhere while holding the lock leaves consistent data:
    // every step below completes or is skipped.
    inner.lock().unwrap_or_else(|e| e.into_inner())
}

impl Emitter {
    pub fn new(start: Instant, tx: mpsc::UnboundedSender<Stamped>) -> Self {
        Self {
            start,
            inner: Arc::new(Mutex::new(Inner {
                tx,
                board: Board::new(),
                recorder: None,
                held: Vec::new(),
                due: false,
                taps: Vec::new(),
            })),
        }
    }

    /// A bus and the receiving end of its events.
    pub fn channel(start: Instant) -> (Self, mpsc::UnboundedReceiver<Stamped>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self::new(start, tx), rx)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    /// Milliseconds since the session started.
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    pub fn emit(&self, event: Event) {
        let mut inner = self.lock();
        let stamped = Stamped::new(self.now(), event);
        let snapshot = inner.board.observe(&stamped);
        let (t, streamed) = (stamped.t, stamped.event.is_streamed_text());
        inner.held.push(stamped);
        if let Some(snapshot) = snapshot {
            inner.held.push(Stamped::new(t, snapshot));
        }
        // What it made the spending ledger say (never streamed text).
        let said = inner.board.take_said();
        let streamed = streamed && said.is_empty();
        for event in said {
            inner.held.push(Stamped::new(t, event));
        }
        if streamed && inner.due {
            return;
        }
        // Outside a runtime nothing can wake later: no holding.
        if streamed && let Ok(runtime) = tokio::runtime::Handle::try_current() {
            inner.due = true;
            runtime.spawn(flush_after(Arc::downgrade(&self.inner)));
            return;
        }
        inner.flush();
    }

    /// Records and sends what waits now (at the end of a session).
    pub fn flush(&self) {
        self.lock().flush();
    }

    /// Runs a recorded session's events through the task board, neither
    /// sent nor recorded again: a continued session's board knows its
    /// calls and tasks.
    pub fn seed(&self, events: &[Stamped]) {
        let mut inner = self.lock();
        for stamped in events {
            inner.board.observe(stamped);
        }
        // What they made the ledger say was said then.
        inner.board.take_said();
    }

    /// Reads the task board.
    pub fn board<T>(&self, read: impl FnOnce(&Board) -> T) -> T {
        read(&self.lock().board)
    }

    /// Records every event from now on to `recorder`. Fails when a
    /// recorder is already on.
    pub fn record(&self, recorder: impl Record + 'static) -> Result<(), PathBuf> {
        let mut inner = self.lock();
        if let Some(r) = &inner.recorder {
            return Err(r.path().to_path_buf());
        }
        // What was emitted before goes out unrecorded, as it would have.
        inner.flush();
        inner.recorder = Some(Box::new(recorder));
        Ok(())
    }

    /// Every event from now on that `wants` takes, sent on the returned
    /// channel too, in the same order, after the front end has it (the
    /// engine's notifier reads them: a reader of its own that never
    /// holds the bus up).
    pub fn tap(&self, wants: fn(&Event) -> bool) -> mpsc::UnboundedReceiver<Stamped> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.lock().taps.push(Tap { wants, tx });
        rx
    }

    /// Where events are being recorded, if they are.
    pub fn recording(&self) -> Option<PathBuf> {
        self.lock()
            .recorder
            .as_ref()
            .map(|r| r.path().to_path_buf())
    }
}

/// Flushes the bus's held events after [`HOLD`], if the bus is still there
/// (its last handle going flushes them too).
async fn flush_after(inner: Weak<Mutex<Inner>>) {
    tokio::time::sleep(HOLD).await;
    if let Some(inner) = inner.upgrade() {
        lock(&inner).flush();
    }
}

impl Inner {
    /// Records and sends the held events. A failed write stops recording,
    /// and the front end is told (once, and not in the transcript).
    fn flush(&mut self) {
        self.due = false;
        if self.held.is_empty() {
            return;
        }
        let failed = match &mut self.recorder {
            Some(r) => r
                .record_all(&self.held)
                .err()
                .map(|e| format!("recording to {} stopped: {e}", r.path().display())),
            None => None,
        };
        let t = self.held.last().map_or(0, |s| s.t);
        for stamped in self.held.drain(..) {
            for tap in &self.taps {
                if (tap.wants)(&stamped.event) {
                    let _ = tap.tx.send(stamped.clone());
                }
            }
            let _ = self.tx.send(stamped);
        }
        self.taps.retain(|tap| !tap.tx.is_closed());
        if let Some(text) = failed {
            tracing::warn!("{text}");
            self.recorder = None;
            let error = Stamped::new(t, Event::Error { text });
            for tap in self.taps.iter().filter(|tap| (tap.wants)(&error.event)) {
                let _ = tap.tx.send(error.clone());
            }
            let _ = self.tx.send(error);
        }
    }
}

impl Drop for Inner {
    /// The bus's last handle gone: what still waits is recorded and sent.
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::build;

    /// Keeps each `write` the bus makes: the events' types, one batch a
    /// write.
    #[derive(Clone, Default)]
    struct Writes(Arc<Mutex<Vec<Vec<&'static str>>>>);

    impl Record for Writes {
        fn record(&mut self, event: &Stamped) -> std::io::Result<()> {
            self.record_all(std::slice::from_ref(event))
        }
        fn record_all(&mut self, events: &[Stamped]) -> std::io::Result<()> {
            let batch = events.iter().map(|e| e.event.type_name()).collect();
            self.0.lock().unwrap().push(batch);
            Ok(())
        }
        fn path(&self) -> &Path {
            Path::new("writes")
        }
    }

    impl Writes {
        fn take(&self) -> Vec<Vec<&'static str>> {
            std::mem::take(&mut self.0.lock().unwrap())
        }
    }

    fn received(rx: &mut mpsc::UnboundedReceiver<Stamped>) -> Vec<&'static str> {
        std::iter::from_fn(|| rx.try_recv().ok())
            .map(|s| s.event.type_name())
            .collect()
    }

    fn bus() -> (Emitter, mpsc::UnboundedReceiver<Stamped>, Writes) {
        let (emitter, rx) = Emitter::channel(Instant::now());
        let writes = Writes::default();
        emitter.record(writes.clone()).unwrap();
        (emitter, rx, writes)
    }

    /// A tap gets what it wants of every event, in the bus's order, with
    /// the board's snapshots; streamed text it does not want never
    /// reaches it; a closed tap is dropped.
    #[tokio::test]
    async fn a_tap_reads_the_events_it_wants_in_order() {
        let (emitter, mut rx, _writes) = bus();
        let mut tap = emitter.tap(|e| !e.is_streamed_text());
        emitter.emit(build::started("c1", crate::event::AgentRef::Internal).event());
        emitter.emit(build::chunk("c1", "text"));
        emitter.emit(build::finished("c1", "text").event());
        let front = received(&mut rx);
        assert_eq!(front[0], "subagent_started");
        assert!(front.contains(&"subagent_activity"));
        let tapped = received(&mut tap);
        let without_text: Vec<&str> = front
            .into_iter()
            .filter(|t| *t != "subagent_activity")
            .collect();
        assert_eq!(tapped, without_text);
        assert!(tapped.contains(&"task_progress") && tapped.contains(&"subagent_finished"));
        drop(tap);
        emitter.emit(build::started("c2", crate::event::AgentRef::Internal).event());
        assert!(emitter.lock().taps.is_empty(), "a closed tap is dropped");
    }

    #[tokio::test]
    async fn streamed_text_is_recorded_in_one_write_with_the_event_after_it_and_never_shown_first()
    {
        let (emitter, mut rx, writes) = bus();
        let started = build::started("c1", crate::event::AgentRef::Internal).event();
        emitter.emit(started);
        assert_eq!(writes.take(), [["subagent_started"]], "at once");
        assert_eq!(received(&mut rx), ["subagent_started"]);
        for text in ["one ", "two ", "three"] {
            emitter.emit(build::chunk("c1", text));
        }
        // Held: neither in the transcript nor on screen yet.
        assert!(writes.take().is_empty());
        assert!(received(&mut rx).is_empty());
        emitter.emit(build::finished("c1", "one two three").event());
        let all = [
            "subagent_activity",
            "subagent_activity",
            "subagent_activity",
            "subagent_finished",
            // The board's snapshot of the call, after what changed it.
            "task_progress",
        ];
        assert_eq!(writes.take(), [all], "one write, in order");
        assert_eq!(received(&mut rx), all);
    }

    #[tokio::test]
    async fn held_text_goes_out_once_its_moment_is_over() {
        // A test on one thread: the bus's timer runs only when it awaits.
        let (emitter, mut rx, writes) = bus();
        emitter.emit(build::chunk("c1", "a"));
        emitter.emit(build::chunk("c1", "b"));
        assert!(received(&mut rx).is_empty(), "held");
        let mut got = Vec::new();
        for _ in 0..5000 {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            got.extend(received(&mut rx));
            if !got.is_empty() {
                break;
            }
        }
        assert_eq!(got, ["subagent_activity", "subagent_activity"]);
        assert_eq!(writes.take(), [["subagent_activity", "subagent_activity"]]);
        // The next chunk starts a new moment.
        emitter.emit(build::chunk("c1", "c"));
        assert!(received(&mut rx).is_empty(), "held");
        tokio::time::sleep(HOLD * 2).await;
        assert_eq!(writes.take(), [["subagent_activity"]]);
        assert_eq!(received(&mut rx).len(), 1);
    }

    #[tokio::test]
    async fn what_is_held_goes_out_when_flushed_or_the_bus_is_dropped() {
        let (emitter, mut rx, writes) = bus();
        emitter.emit(build::chunk("c1", "a"));
        emitter.flush();
        assert_eq!(writes.take(), [["subagent_activity"]]);
        assert_eq!(received(&mut rx).len(), 1);
        emitter.emit(build::chunk("c1", "b"));
        drop(emitter);
        assert_eq!(writes.take(), [["subagent_activity"]]);
        assert_eq!(received(&mut rx).len(), 1);
    }

    #[test]
    fn outside_a_runtime_nothing_is_held() {
        let (emitter, mut rx, writes) = bus();
        emitter.emit(build::chunk("c1", "a"));
        assert_eq!(writes.take(), [["subagent_activity"]]);
        assert_eq!(received(&mut rx).len(), 1);
    }
}
