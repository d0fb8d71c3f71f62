//! A continued session's recorded events taken up by a screen's state
//! ahead of the screen, on another core while the engine takes them up.

use super::state::{DETAIL_WINDOW, State};
use crate::confine::lock;
use crate::event::Stamped;

/// A continued session's recorded events taken up by a screen's state
/// ahead of the screen: [`Earlier::hook`] takes them up (on a thread of
/// the engine's, while the engine takes them up too), and
/// `App::take_earlier` starts from the result.
#[derive(Clone, Default)]
pub struct Earlier(std::sync::Arc<std::sync::Mutex<Option<State>>>);

/// What takes a continued session's recorded events up.
pub type Hook = Box<dyn FnOnce(&[Stamped]) + Send>;

impl Earlier {
    /// Applies `events` to a new screen's state as `App::on_earlier`
    /// does on a screen that reads older boxes' detail back from its
    /// transcript (`App::set_transcript`).
    pub fn hook(&self) -> Hook {
        let slot = self.0.clone();
        Box::new(move |events| {
            let mut state = State::new();
            state.keep_detail(DETAIL_WINDOW);
            for event in events {
                state.apply(event);
            }
            *lock(&slot) = Some(state);
        })
    }

    pub(super) fn take(&self) -> Option<State> {
        lock(&self.0).take()
    }
}
