//! quorum: a terminal client in which one chat agent convenes sub-agents.
//!
//! See DESIGN.md for the map. Data flows one way: engine events go through
//! [`tui::state::State::apply`] to the view, and to the transcript recorder.

pub mod acp;
pub mod board;
pub mod bus;
pub mod cancel;
pub mod engine;
pub mod event;
pub mod fsroot;
pub mod harness;
pub mod limits;
pub mod llm;
pub mod private;
pub mod sanitize;
pub mod severity;
pub mod subagent;
pub mod supervisor;
pub mod transcript;
pub mod tui;

/// `eprintln!` that never panics: with stderr closed (`2>&1 | head`), the
/// line is lost and nothing else.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
