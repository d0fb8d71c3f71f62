//! What the engine owns while a session runs: the task board (the one
//! source of task and call state), the event bus, the process supervisor
//! (every process quorum starts) and its reaper (every descendant),
//! cancellation, commands confined to the session directory (`sandbox`), the
//! `git` quorum runs (hardened: `git`), and where commands are found on `PATH`.

pub mod board;
pub mod bus;
pub mod cancel;
pub mod git;
pub mod path;
pub mod reaper;
pub mod sandbox;
pub mod ssh;
pub mod supervisor;

/// A mutex's guard, even when a panic elsewhere poisoned it: what it
/// guards is kept consistent by each holder, not by unwinding.
pub fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
