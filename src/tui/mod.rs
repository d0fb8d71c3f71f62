//! The terminal UI: a pure state built from events, a view that draws it,
//! and an app loop generic over the backend.

pub mod app;
pub mod cells;
pub mod composer;
pub mod detail;
pub mod diff;
pub mod earlier;
pub mod findings_view;
pub mod form;
pub mod history;
pub mod markdown;
pub mod modes;
pub mod notify;
mod panel;
pub mod picker;
pub mod readback;
pub mod replay;
pub mod screenshot;
pub mod state;
pub mod terminal;
pub mod theme;
pub mod view;
pub mod wrap;

use std::path::PathBuf;

/// Why a screen could not be shown, or stopped. The text is what the
/// person reads.
#[derive(Debug, thiserror::Error)]
pub enum ScreenError {
    #[error(
        "quorum's TUI needs a terminal; for a picture without one, use \
         `quorum replay FILE --screenshot OUT.svg`"
    )]
    NoTerminal,
    #[error("setting up the terminal")]
    Setup(#[source] std::io::Error),
    /// Drawing on the terminal failed.
    #[error(transparent)]
    Draw(std::io::Error),
    #[error(transparent)]
    Transcript(#[from] crate::transcript::TranscriptError),
    #[error(transparent)]
    Sessions(#[from] crate::transcript::sessions::SessionError),
    /// `quorum --resume` with nothing recorded to pick from.
    #[error(
        "no session recorded for {} yet{}",
        root.display(),
        if *all { "" } else { " (`quorum --resume --all` picks from every directory's)" }
    )]
    NoSessions { root: PathBuf, all: bool },
    /// `quorum watch` of a file with no header yet.
    #[error("{}: not a transcript yet (no header line); is it being recorded?", file.display())]
    NotYet { file: PathBuf },
    #[error(
        "{}: unknown screenshot format; end the name with .txt, .ans or .svg",
        out.display()
    )]
    Format { out: PathBuf },
    #[error("--at {at} is past the end: {} has {total} events", file.display())]
    PastTheEnd {
        at: usize,
        file: PathBuf,
        total: usize,
    },
    #[error("writing {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
}

impl ScreenError {
    /// A backend's error drawing a frame.
    pub fn draw(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Draw(std::io::Error::other(e))
    }
}
