//! Untrusted input, kept in bounds: paths confined to the session's root
//! (`fsroot`), and pinned while another program opens them (`pin`), text
//! bound for a terminal (`sanitize`), files and folders only the user may
//! read (`private`), what one piece of outside input may cost (`limits`),
//! and lines of it read the one way everywhere (`lines`). Also the one way a
//! mutex is locked ([`lock`]) and the one way a path's `.` and `..` are
//! taken out by name ([`lexical`]).

pub mod fsroot;
pub mod limits;
pub mod lines;
pub mod pin;
pub mod private;
pub mod sanitize;

use std::path::{Component, Path, PathBuf};

/// A mutex's guard, even when a panic elsewhere poisoned it: what it
/// guards is kept consistent by each holder, not by unwinding. The one way
/// quorum locks a `std::sync::Mutex`.
pub fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `path` with `.` and `..` applied to its text alone: what the file
/// system says (a link) is not asked.
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}
