//! quorum: a terminal client in which one chat agent convenes sub-agents.
//!
//! The map is `docs/architecture.md`: the rooms, the path of a streamed
//! chunk, the lock order and the layering rules. Data flows one way:
//! engine events go through [`tui::state::State::apply`] to the view, and
//! to the transcript recorder.

pub mod acp;
pub mod agent;
pub mod cli;
pub mod config;
pub mod confine;
pub mod engine;
pub mod event;
pub mod llm;
pub mod model_loop;
pub mod remote;
pub mod review;
pub mod runtime;
pub mod serve;
pub mod subagent;
pub mod transcript;
pub mod tui;
pub mod worktree;

/// `eprintln!` that never panics: with stderr closed (`2>&1 | head`), the
/// line is lost and nothing else.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
