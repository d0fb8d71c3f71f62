//! What of a running turn the agent's stream changes: the turn's text and
//! final message (its head kept, at most `MAX_FINAL_TEXT` bytes, the rest
//! named), and the part of it the transport's reader may update itself (a
//! chunk of the turn's own session, taken on the spot).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::SessionUpdate;

use super::translate::{self, Translated};
use crate::agent::TurnSink;
use crate::confine::limits::{MAX_FINAL_TEXT, name_cut, push_capped};
use crate::event::{Activity, SessionKind};
use crate::runtime::lock;

/// An `agent_message_chunk` (or, `thought`, an `agent_thought_chunk`)
/// whose content is text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Chunk {
    pub(super) text: String,
    pub(super) thought: bool,
}

/// What of a turn the transport's reading may do itself: take the chunks
/// of the turn's own session while nothing is queued for the turn ahead of
/// them (so they keep their order with everything else it sends), where
/// the turn's sink lets them go out from there ([`TurnSink::stream`]).
pub(super) struct Stream {
    /// Where the chunks' activity goes; `None`: through the turn's task.
    direct: Option<Arc<dyn Fn(Activity) + Send + Sync>>,
    /// The turn's text (its own session's).
    pub(super) turn: Mutex<TurnText>,
    /// Whether the person asked the turn to stop: no more chunks shown.
    cancelled: AtomicBool,
    /// What was queued for the turn's task, and what it has taken in.
    queued: AtomicU64,
    taken: AtomicU64,
}

impl Stream {
    pub(super) fn new(direct: Option<Arc<dyn Fn(Activity) + Send + Sync>>) -> Self {
        Self {
            direct,
            turn: Mutex::new(TurnText::default()),
            cancelled: AtomicBool::new(false),
            queued: AtomicU64::new(0),
            taken: AtomicU64::new(0),
        }
    }

    /// Counts one more thing queued for the turn's task (before it is).
    pub(super) fn queue(&self) {
        self.queued.fetch_add(1, Ordering::AcqRel);
    }

    /// Counts one more thing the turn's task has taken in (after it did).
    pub(super) fn taken(&self) {
        self.taken.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether a chunk may be taken on the spot: the sink allows it and
    /// the turn's task has taken in all that was queued for it.
    pub(super) fn takes_chunks(&self) -> bool {
        self.direct.is_some()
            && self.taken.load(Ordering::Acquire) == self.queued.load(Ordering::Acquire)
    }

    /// The person asked the turn to stop: what the agent still says is
    /// not shown.
    pub(super) fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
    }

    pub(super) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    /// Takes a chunk of the turn's own session as the turn's task would.
    pub(super) fn chunk(&self, chunk: Chunk) {
        let Some(direct) = &self.direct else {
            return;
        };
        if self.is_cancelled() {
            return;
        }
        lock(&self.turn).chunk(chunk, &Direct(direct.as_ref()));
    }
}

/// The sink of the chunks a [`Stream`] takes.
struct Direct<'a>(&'a (dyn Fn(Activity) + Send + Sync));

impl TurnSink for Direct<'_> {
    fn activity(&self, activity: Activity) {
        (self.0)(activity);
    }
    fn session(&self, _kind: SessionKind, _session_id: &str) {}
    fn notice(&self, _text: &str) {}
}

/// The text of one turn, and its final message.
#[derive(Default)]
pub(super) struct TurnText {
    /// Text written since the last tool call: its first
    /// [`MAX_FINAL_TEXT`] bytes.
    pub(super) final_text: String,
    /// The bytes of it past [`MAX_FINAL_TEXT`], not kept.
    cut: u64,
}

impl TurnText {
    /// Translates `update` and sends what it means to `sink`; message
    /// text after the last tool call is the final message.
    pub(super) fn update(&mut self, update: SessionUpdate, sink: &dyn TurnSink) {
        match translate::update(update) {
            Translated::Activity(activity) => self.activity(activity, sink),
            Translated::ModelPicked(model) => sink.model_picked(&model),
            Translated::Nothing => {}
        }
    }

    /// A chunk of text: as [`TurnText::update`] takes the update it came as.
    pub(super) fn chunk(&mut self, chunk: Chunk, sink: &dyn TurnSink) {
        let activity = match chunk.thought {
            false => Activity::MessageChunk { text: chunk.text },
            true => Activity::ThoughtChunk { text: chunk.text },
        };
        self.activity(activity, sink);
    }

    fn activity(&mut self, activity: Activity, sink: &dyn TurnSink) {
        match &activity {
            Activity::MessageChunk { text } => {
                push_capped(&mut self.final_text, &mut self.cut, text, MAX_FINAL_TEXT);
            }
            Activity::ToolCall { .. } => {
                self.final_text.clear();
                self.cut = 0;
            }
            _ => {}
        }
        sink.activity(activity);
    }

    /// The final message, taken: what was cut of it named at its end.
    pub(super) fn take_final(&mut self) -> String {
        let mut text = std::mem::take(&mut self.final_text);
        let cut = std::mem::take(&mut self.cut);
        name_cut(&mut text, cut, "a final message", MAX_FINAL_TEXT);
        text
    }
}
