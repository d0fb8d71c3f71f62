//! What the engine owns while a session runs: the task board (the one
//! source of task and call state), the event bus, the process supervisor
//! (every process quorum starts) and its reaper (every descendant),
//! cancellation, commands confined to the session directory (`sandbox`, with
//! its `seccomp` filter and the private `home` of a sandboxed agent), the
//! `git` quorum runs (hardened: `git`), what other programs run from a tree
//! an agent writes (`machinery`), where commands are found on `PATH`, and
//! what quorum needs of the machine, asked of it (`probe`: `quorum doctor`).

pub mod board;
pub mod bus;
pub mod cancel;
pub mod git;
pub mod home;
pub mod ledger;
pub mod machinery;
pub mod path;
pub mod probe;
pub mod reaper;
pub mod sandbox;
pub mod seccomp;
pub mod supervisor;

/// The async runtime quorum runs on: one worker thread for the engine,
/// beside the thread that called `block_on` (the TUI's, in the terminal).
///
/// The engine's tasks move bytes between pipes, sockets and channels; its
/// work that takes a core (file tools, transcripts, process ends) runs on
/// blocking threads. With more workers, each streamed chunk that wakes a
/// task also woke an idle worker to look for work (a futex and an
/// interrupt for nothing): with 16 agents streaming 200 chunks a second,
/// one worker took a fifth less CPU than two (scripts/soak.sh).
pub fn builder() -> tokio::runtime::Builder {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(1).enable_all();
    builder
}

/// quorum's state directory: `$XDG_STATE_HOME/quorum`, else
/// `~/.local/state/quorum`.
pub fn state_dir() -> Option<std::path::PathBuf> {
    xdg_dir("XDG_STATE_HOME", ".local/state")
}

/// quorum's cache directory (what it can make again): `$XDG_CACHE_HOME/quorum`,
/// else `~/.cache/quorum`.
pub fn cache_dir() -> Option<std::path::PathBuf> {
    xdg_dir("XDG_CACHE_HOME", ".cache")
}

/// quorum's folder in an XDG base directory: `$VAR/quorum` (when set and
/// not empty), else `~/DEFAULT/quorum`; `None` without `HOME` either.
/// (`config::default_path` reads `XDG_CONFIG_HOME` the same way on its
/// own: the config layer may not import this one.)
fn xdg_dir(var: &str, default: &str) -> Option<std::path::PathBuf> {
    let base = std::env::var_os(var)
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(default)))?;
    Some(base.join("quorum"))
}

pub use crate::confine::lock;
