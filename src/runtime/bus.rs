//! The event bus of a session: every event the engine emits is stamped
//! with the session clock, runs through the task board (which may add the
//! snapshot it changed), is written to the recorder when one is on, and is
//! sent to the front end, in that order and under one lock, so the
//! transcript, the board and the screen see the same sequence.
//!
//! The recorder is whatever implements [`Record`] (the transcript's
//! `Recorder`), attached by the engine: the bus knows no file format.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::mpsc;

use crate::event::{Event, Stamped};
use crate::runtime::board::Board;

/// Where the bus writes every event, in the order it sends them: the
/// transcript recorder.
pub trait Record: Send {
    /// Writes one event; an error stops recording.
    fn record(&mut self, event: &Stamped) -> std::io::Result<()>;
    /// The file being written, for messages.
    fn path(&self) -> &Path;
}

struct Inner {
    board: Board,
    recorder: Option<Box<dyn Record>>,
}

/// Emits events. Cheap to clone; sending never blocks, and a closed
/// channel (the front end is gone) is not an error for the engine.
#[derive(Clone)]
pub struct Emitter {
    tx: mpsc::UnboundedSender<Stamped>,
    start: Instant,
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for Emitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emitter").finish_non_exhaustive()
    }
}

impl Emitter {
    pub fn new(start: Instant, tx: mpsc::UnboundedSender<Stamped>) -> Self {
        Self {
            tx,
            start,
            inner: Arc::new(Mutex::new(Inner {
                board: Board::new(),
                recorder: None,
            })),
        }
    }

    /// A bus and the receiving end of its events.
    pub fn channel(start: Instant) -> (Self, mpsc::UnboundedReceiver<Stamped>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self::new(start, tx), rx)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere while holding the lock leaves consistent data:
        // every step below completes or is skipped.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Milliseconds since the session started.
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    pub fn emit(&self, event: Event) {
        let mut inner = self.lock();
        let stamped = Stamped::new(self.now(), event);
        let snapshot = inner.board.observe(&stamped);
        let t = stamped.t;
        inner.send(&self.tx, stamped);
        if let Some(snapshot) = snapshot {
            inner.send(&self.tx, Stamped::new(t, snapshot));
        }
    }

    /// Runs a recorded session's events through the task board, neither
    /// sent nor recorded again: a continued session's board knows its
    /// calls and tasks.
    pub fn seed(&self, events: &[Stamped]) {
        let mut inner = self.lock();
        for stamped in events {
            inner.board.observe(stamped);
        }
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
        inner.recorder = Some(Box::new(recorder));
        Ok(())
    }

    /// Where events are being recorded, if they are.
    pub fn recording(&self) -> Option<PathBuf> {
        self.lock()
            .recorder
            .as_ref()
            .map(|r| r.path().to_path_buf())
    }
}

impl Inner {
    /// Records and sends one event. A failed write stops recording, and
    /// the front end is told (once, and not in the transcript).
    fn send(&mut self, tx: &mpsc::UnboundedSender<Stamped>, stamped: Stamped) {
        let t = stamped.t;
        let failed = match &mut self.recorder {
            Some(r) => r
                .record(&stamped)
                .err()
                .map(|e| format!("recording to {} stopped: {e}", r.path().display())),
            None => None,
        };
        let _ = tx.send(stamped);
        if let Some(text) = failed {
            tracing::warn!("{text}");
            self.recorder = None;
            let _ = tx.send(Stamped::new(t, Event::Error { text }));
        }
    }
}
