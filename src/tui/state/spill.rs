//! What a long session keeps of its boxes' detail: the opened box's log
//! and terminals are the bulk of a box (up to [`super::LOG_BYTES`] each),
//! and only the newest finished boxes keep theirs. An older box's detail
//! is let go (its log marked `spilled`) and read back from the transcript
//! when the person opens it (`tui::readback`): memory follows what is on
//! screen and a window, not the session's length.
//!
//! Off unless a front end turns it on ([`State::keep_detail`]), which it
//! does only when there is a transcript to read the detail back from.

use std::collections::VecDeque;

use super::{CellKind, Log, State, Terminals};

/// How many finished boxes keep their detail in memory.
pub const DETAIL_WINDOW: usize = 32;

/// The finished boxes holding their detail, oldest first, and the one the
/// person has open (never let go while open).
#[derive(Debug, Clone, Default)]
pub(super) struct Window {
    keep: usize,
    held: VecDeque<usize>,
    pinned: Option<usize>,
}

impl State {
    /// From now on only the newest `keep` finished boxes (at least one)
    /// keep their detail in memory.
    pub fn keep_detail(&mut self, keep: usize) {
        self.detail = Some(Window {
            keep: keep.max(1),
            ..Window::default()
        });
    }

    /// Whether the box at `index` let its detail go.
    pub fn detail_spilled(&self, index: usize) -> bool {
        matches!(self.cells.get(index).map(|c| &c.kind),
            Some(CellKind::Subagent(b)) if b.log.spilled)
    }

    /// The box the person has open keeps its detail while it is open.
    pub fn pin_detail(&mut self, index: Option<usize>) {
        if let Some(window) = &mut self.detail {
            window.pinned = index;
        }
    }

    /// Gives a box whose detail was let go the detail read back from the
    /// transcript. What came for it since (late activity) stays after it.
    pub fn restore_detail(&mut self, index: usize, mut log: Log, terminals: Terminals) {
        let mut held = None;
        self.edit_box(index, |b| {
            if !b.log.spilled {
                return;
            }
            for entry in std::mem::take(&mut b.log.entries) {
                log.push(entry);
            }
            log.spilled = false;
            b.log = log;
            b.terminals = terminals;
            held = b.finished.map(|_| index);
        });
        if let Some(index) = held {
            self.hold_detail(index);
        }
    }

    /// A box finished: it holds its detail as the newest of the window,
    /// and the oldest beyond the window lets its detail go.
    pub(super) fn hold_detail(&mut self, index: usize) {
        let Some(window) = &mut self.detail else {
            return;
        };
        window.held.retain(|&i| i != index);
        window.held.push_back(index);
        // The open box is not counted: it keeps its detail while open.
        let pinned = window.pinned;
        let mut excess = (window.held.iter())
            .filter(|&&i| Some(i) != pinned)
            .count()
            .saturating_sub(window.keep);
        let mut spill = Vec::new();
        window.held.retain(|&i| {
            if excess > 0 && Some(i) != pinned {
                excess -= 1;
                spill.push(i);
                return false;
            }
            true
        });
        for index in spill {
            if let Some(CellKind::Subagent(b)) = self.cells.get_mut(index).map(|c| &mut c.kind)
                && !b.running()
            {
                b.log = Log {
                    spilled: true,
                    ..Log::default()
                };
                b.terminals = Terminals::default();
                b.compact();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::box_of;
    use super::*;
    use crate::event::{Activity, AgentRef, Event, Stamped, StopReason};

    fn call(s: &mut State, t: u64, id: &str) {
        let ev = |t, event| Stamped::new(t, event);
        s.apply(&ev(
            t,
            Event::SubagentStarted {
                call_id: id.into(),
                task_id: None,
                agent: AgentRef::Acp("fake".into()),
                input: "go".into(),
                code_review: false,
                background: false,
                session: None,
                batch_id: None,
                queued: false,
                max_cost: None,
            },
        ));
        s.apply(&ev(
            t + 1,
            Event::SubagentActivity {
                call_id: id.into(),
                activity: Activity::MessageChunk {
                    text: format!("working on {id}"),
                },
            },
        ));
        s.apply(&ev(
            t + 2,
            Event::SubagentFinished {
                call_id: id.into(),
                output: format!("done {id}"),
                stop_reason: StopReason::EndTurn,
                severity: None,
                findings: Vec::new(),
            },
        ));
    }

    #[test]
    fn only_the_newest_finished_boxes_keep_their_detail() {
        let mut s = State::new();
        s.keep_detail(2);
        for (i, id) in ["a", "b", "c"].iter().enumerate() {
            call(&mut s, 10 * i as u64, id);
        }
        assert!(box_of(&s, "a").log.spilled);
        assert!(box_of(&s, "a").log.entries.is_empty());
        // What the transcript shows of it stays.
        assert_eq!(box_of(&s, "a").output.as_deref(), Some("done a"));
        for id in ["b", "c"] {
            assert!(!box_of(&s, id).log.spilled, "{id}");
            assert_eq!(box_of(&s, id).log.entries.len(), 1, "{id}");
        }
    }

    #[test]
    fn a_box_that_let_its_detail_go_is_drawn_as_before() {
        let (mut spilling, mut keeping) = (State::new(), State::new());
        spilling.keep_detail(1);
        for s in [&mut spilling, &mut keeping] {
            for (i, id) in ["a", "b"].iter().enumerate() {
                call(s, 10 * i as u64, id);
            }
        }
        assert!(box_of(&spilling, "a").log.spilled);
        let a = spilling.box_index("a").unwrap();
        for width in [20, 80] {
            assert_eq!(
                crate::tui::cells::render(&spilling.cells[a], width, 100),
                crate::tui::cells::render(&keeping.cells[a], width, 100),
            );
        }
    }

    #[test]
    fn without_a_window_every_box_keeps_its_detail() {
        let mut s = State::new();
        for (i, id) in ["a", "b", "c"].iter().enumerate() {
            call(&mut s, 10 * i as u64, id);
        }
        assert!(!box_of(&s, "a").log.spilled);
        assert_eq!(box_of(&s, "a").log.entries.len(), 1);
    }

    #[test]
    fn the_open_box_keeps_its_detail_and_a_restored_box_is_the_newest() {
        let mut s = State::new();
        s.keep_detail(1);
        call(&mut s, 0, "a");
        let a = s.box_index("a").unwrap();
        let kept = box_of(&s, "a").log.clone();
        s.pin_detail(Some(a));
        call(&mut s, 10, "b");
        call(&mut s, 20, "c");
        assert!(!box_of(&s, "a").log.spilled, "open, so kept");
        assert!(box_of(&s, "b").log.spilled);
        assert!(!box_of(&s, "c").log.spilled);
        s.pin_detail(None);
        call(&mut s, 30, "d");
        assert!(box_of(&s, "a").log.spilled);
        assert!(box_of(&s, "c").log.spilled);
        // Read back, `a` is the newest of the window.
        s.restore_detail(a, kept.clone(), Terminals::default());
        assert_eq!(box_of(&s, "a").log, kept);
        assert!(box_of(&s, "d").log.spilled);
    }
}
