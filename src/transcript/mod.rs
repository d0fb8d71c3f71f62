//! Transcripts: a session's events as JSONL; and importers of other
//! tools' session logs ([`import`]).
//!
//! The first line is a [`Header`], then one [`Stamped`] event per line.
//! Version 2 added the task board's snapshots (`task_progress` for every
//! call) and dropped `task_completed`; version-1 files still replay (the
//! reader makes their snapshots with the same board). The recorder appends and flushes each line with a single write, so a
//! process that dies loses nothing already recorded; at worst the last line
//! is cut short, which the reader reports and skips. No line it writes is
//! over the reader's limit: an event that would be has its longest strings
//! cut, each cut named (`fit`).
//!
//! [`Stamped`]: crate::event::Stamped

mod fit;
pub mod follow;
pub mod import;
mod reader;
mod recorder;
pub mod sessions;
mod span;

pub use reader::{Loaded, Read, TranscriptError, Warning, load, load_capped, parse, read_each};
pub use recorder::{Lock, RecordError, Recorder, Reopened};
pub use span::read_since;

use serde::{Deserialize, Serialize};

/// The format name written in every header.
pub const FORMAT: &str = "quorum-transcript";
/// The newest format version this quorum reads and the one it writes.
pub const VERSION: u32 = 2;

/// The first line of a transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always [`FORMAT`].
    pub format: String,
    /// Format version; see [`VERSION`].
    pub version: u32,
    /// The quorum version that wrote the file.
    pub quorum_version: String,
    /// The session's working directory.
    pub cwd: String,
    /// Wall-clock start of the session, RFC 3339 UTC.
    pub started_at: String,
    /// The terminal size when the session started.
    pub terminal: TerminalSize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalSize {
    pub cols: u16,
    pub rows: u16,
}

impl Header {
    /// A header for a session starting now in `cwd`.
    pub fn now(cwd: &std::path::Path, terminal: TerminalSize) -> Self {
        Self {
            format: FORMAT.to_string(),
            version: VERSION,
            quorum_version: env!("CARGO_PKG_VERSION").to_string(),
            cwd: cwd.display().to_string(),
            started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            terminal,
        }
    }
}
