use std::path::{Path, PathBuf};

use super::{FORMAT, Header, VERSION};
use crate::event::{Event, Stamped};

/// Why a transcript cannot be replayed. Each names the file and line.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path}:{line}: not UTF-8 text (byte {column} of the line); a transcript is JSON lines"
    )]
    NotUtf8 {
        path: PathBuf,
        line: usize,
        column: usize,
    },
    #[error("{path}: empty file, expected a quorum transcript header on line 1")]
    Empty { path: PathBuf },
    #[error("{path}:1: not a quorum transcript header: {reason}")]
    BadHeader { path: PathBuf, reason: String },
    #[error(
        "{path}:1: transcript format version {found} is newer than this quorum reads \
         (version {supported}); upgrade quorum to replay it"
    )]
    NewerVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("{path}:{line}: not JSON: {reason}")]
    NotJson {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("{path}:{line}: unknown event type {name:?} (known: {known})")]
    UnknownEvent {
        path: PathBuf,
        line: usize,
        name: String,
        known: String,
    },
    #[error("{path}:{line}: bad {name:?} event: {reason}")]
    BadEvent {
        path: PathBuf,
        line: usize,
        name: String,
        reason: String,
    },
}

/// Something wrong that still lets the rest replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// The last line has no newline and does not parse: the file was cut
    /// while being written (or is still being written). It is skipped.
    TruncatedLastLine { path: PathBuf, line: usize },
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Warning::TruncatedLastLine { path, line } => write!(
                f,
                "{}:{line}: last line is cut short (file still being written?); replaying the events before it",
                path.display()
            ),
        }
    }
}

/// A transcript read into memory.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub header: Header,
    pub events: Vec<Stamped>,
    pub warnings: Vec<Warning>,
}

/// Reads and checks a whole transcript file.
pub fn load(path: &Path) -> Result<Loaded, TranscriptError> {
    let bytes = std::fs::read(path).map_err(|source| TranscriptError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    match std::str::from_utf8(&bytes) {
        Ok(text) => parse(path, text),
        Err(e) => {
            let valid = &bytes[..e.valid_up_to()];
            // A character cut at the very end is a last line cut short,
            // as a `kill -9` mid-write leaves it: replay what came before.
            if e.error_len().is_none() {
                let text = std::str::from_utf8(valid).expect("valid up to here");
                return parse(path, text);
            }
            let line_start = valid.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            Err(TranscriptError::NotUtf8 {
                path: path.to_path_buf(),
                line: valid.iter().filter(|&&b| b == b'\n').count() + 1,
                column: valid.len() - line_start + 1,
            })
        }
    }
}

/// Parses transcript text; `path` is only used in messages.
pub fn parse(path: &Path, text: &str) -> Result<Loaded, TranscriptError> {
    let path_buf = || path.to_path_buf();
    let mut lines = text.split_inclusive('\n').enumerate();
    let header = match lines.next() {
        None => return Err(TranscriptError::Empty { path: path_buf() }),
        Some((_, first)) => parse_header(path, first)?,
    };
    let mut events = Vec::new();
    let mut warnings = Vec::new();
    // Version 1 had no task-board snapshots for calls: its `task_progress`
    // and `task_completed` lines are dropped, and the snapshots are made
    // by running its events through a board, as the engine does today.
    let mut upgrade = (header.version == 1).then(crate::board::Board::new);
    for (index, raw) in lines {
        let line = index + 1;
        let complete = raw.ends_with('\n');
        let body = raw.trim_end_matches(['\n', '\r']);
        if body.trim().is_empty() {
            continue;
        }
        let parsed = match &upgrade {
            Some(_) => parse_v1_event(path, line, body),
            None => parse_event(path, line, body).map(Some),
        };
        match parsed {
            Ok(None) => {}
            Ok(Some(event)) => {
                let snapshot = upgrade.as_mut().and_then(|b| b.observe(&event));
                let t = event.t;
                events.push(event);
                events.extend(snapshot.map(|s| Stamped::new(t, s)));
            }
            // A cut-short last line: report it and keep what came before.
            Err(TranscriptError::NotJson { .. }) if !complete => {
                warnings.push(Warning::TruncatedLastLine {
                    path: path_buf(),
                    line,
                });
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Loaded {
        header,
        events,
        warnings,
    })
}

fn parse_header(path: &Path, line: &str) -> Result<Header, TranscriptError> {
    let bad = |reason: String| TranscriptError::BadHeader {
        path: path.to_path_buf(),
        reason,
    };
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| bad(format!("not JSON ({e})")))?;
    if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
        return Err(bad(format!("expected \"format\": \"{FORMAT}\"")));
    }
    // Check the version before the rest: a newer format may change fields.
    let version = value
        .get("version")
        .and_then(|v| v.as_u64())
        .ok_or_else(|| bad("missing or non-numeric \"version\"".into()))?;
    if version > u64::from(VERSION) {
        return Err(TranscriptError::NewerVersion {
            path: path.to_path_buf(),
            found: u32::try_from(version).unwrap_or(u32::MAX),
            supported: VERSION,
        });
    }
    serde_json::from_value(value).map_err(|e| bad(e.to_string()))
}

/// Event types of version 1 that version 2 replaced by board snapshots.
const V1_DROPPED: [&str; 2] = ["task_progress", "task_completed"];

/// A version-1 line: `None` for a type the board now derives.
fn parse_v1_event(
    path: &Path,
    line: usize,
    text: &str,
) -> Result<Option<Stamped>, TranscriptError> {
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text)
        && value
            .get("type")
            .and_then(|t| t.as_str())
            .is_some_and(|t| V1_DROPPED.contains(&t))
    {
        return Ok(None);
    }
    parse_event(path, line, text).map(Some)
}

fn parse_event(path: &Path, line: usize, text: &str) -> Result<Stamped, TranscriptError> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| TranscriptError::NotJson {
            path: path.to_path_buf(),
            line,
            reason: e.to_string(),
        })?;
    let name = match value.get("type") {
        Some(serde_json::Value::String(name)) => name.clone(),
        Some(other) => {
            return Err(TranscriptError::BadEvent {
                path: path.to_path_buf(),
                line,
                name: other.to_string(),
                reason: "\"type\" must be a string".into(),
            });
        }
        None => {
            return Err(TranscriptError::BadEvent {
                path: path.to_path_buf(),
                line,
                name: String::new(),
                reason: "missing field \"type\"".into(),
            });
        }
    };
    if !Event::TYPES.contains(&name.as_str()) {
        return Err(TranscriptError::UnknownEvent {
            path: path.to_path_buf(),
            line,
            name,
            known: Event::TYPES.join(", "),
        });
    }
    serde_json::from_value(value).map_err(|e| TranscriptError::BadEvent {
        path: path.to_path_buf(),
        line,
        name,
        reason: e.to_string(),
    })
}
