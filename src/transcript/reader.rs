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
    #[error(
        "{path}:{line}: a line over {}, read no further (max_transcript_line_bytes under [limits] in the config)",
        crate::confine::limits::size(*limit)
    )]
    LineTooLong {
        path: PathBuf,
        line: usize,
        limit: u64,
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

/// Reads and checks a whole transcript file, its lines capped at the
/// default [`crate::confine::limits::MAX_TRANSCRIPT_LINE`].
pub fn load(path: &Path) -> Result<Loaded, TranscriptError> {
    load_capped(path, crate::confine::limits::MAX_TRANSCRIPT_LINE)
}

/// Reads and checks a whole transcript file, one line at a time: a line
/// longer than `max_line` bytes is an error naming it, read no further
/// (so `/dev/zero` costs one line, not all memory).
pub fn load_capped(path: &Path, max_line: u64) -> Result<Loaded, TranscriptError> {
    let mut events = Vec::new();
    let Read { header, warnings } = read_each(path, max_line, &mut |event| events.push(event))?;
    Ok(Loaded {
        header,
        events,
        warnings,
    })
}

/// A transcript read by [`read_each`]: all but its events.
#[derive(Debug, Clone)]
pub struct Read {
    pub header: Header,
    pub warnings: Vec<Warning>,
}

/// Reads and checks a whole transcript file as [`load_capped`] does,
/// handing each event to `each` as it is read instead of keeping them all:
/// what reads a long session once, in order, holds none of it but what
/// it keeps itself. An error may come after some events were handed on.
pub fn read_each(
    path: &Path,
    max_line: u64,
    each: &mut dyn FnMut(Stamped),
) -> Result<Read, TranscriptError> {
    let io = |source| TranscriptError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut input = std::io::BufReader::with_capacity(64 * 1024, file);
    let mut reader = Reader::new(path, each);
    let mut buf = Vec::new();
    while let Some(Line { complete, too_long }) =
        next_line(&mut input, &mut buf, max_line).map_err(io)?
    {
        if too_long {
            return Err(TranscriptError::LineTooLong {
                path: path.to_path_buf(),
                line: reader.line + 1,
                limit: max_line,
            });
        }
        match std::str::from_utf8(&buf) {
            Ok(text) => reader.line(text)?,
            // A character cut at the very end is a last line cut short,
            // as a `kill -9` mid-write leaves it: replay what came before.
            Err(e) if !complete && e.error_len().is_none() => {
                let valid = std::str::from_utf8(&buf[..e.valid_up_to()]).unwrap_or_default();
                reader.line(valid)?;
            }
            Err(e) => {
                return Err(TranscriptError::NotUtf8 {
                    path: path.to_path_buf(),
                    line: reader.line + 1,
                    column: e.valid_up_to() + 1,
                });
            }
        }
    }
    reader.finish()
}

/// A line read by [`next_line`].
pub(super) struct Line {
    /// It ends in a newline (a last line cut short does not).
    pub complete: bool,
    /// It is longer than the longest allowed (what `buf` holds is cut).
    pub too_long: bool,
}

/// Reads the next line of `input` into `buf` (cleared first, its newline
/// kept), at most `max_line` bytes of it and its newline: `None` at the
/// end of the input.
pub(super) fn next_line(
    input: &mut impl std::io::BufRead,
    buf: &mut Vec<u8>,
    max_line: u64,
) -> std::io::Result<Option<Line>> {
    use std::io::{BufRead as _, Read as _};
    buf.clear();
    if input
        .by_ref()
        .take(max_line.saturating_add(1))
        .read_until(b'\n', buf)?
        == 0
    {
        return Ok(None);
    }
    let complete = buf.last() == Some(&b'\n');
    let body = buf.len() - usize::from(complete);
    Ok(Some(Line {
        complete,
        too_long: body as u64 > max_line,
    }))
}

/// Parses transcript text; `path` is only used in messages.
pub fn parse(path: &Path, text: &str) -> Result<Loaded, TranscriptError> {
    let mut events = Vec::new();
    let mut each = |event| events.push(event);
    let mut reader = Reader::new(path, &mut each);
    for raw in text.split_inclusive('\n') {
        reader.line(raw)?;
    }
    let Read { header, warnings } = reader.finish()?;
    Ok(Loaded {
        header,
        events,
        warnings,
    })
}

/// A transcript read a line at a time.
struct Reader<'a> {
    path: &'a Path,
    /// Lines read so far.
    line: usize,
    header: Option<Header>,
    /// Where each event goes.
    each: &'a mut dyn FnMut(Stamped),
    warnings: Vec<Warning>,
    /// Version 1 had no task-board snapshots for calls: its
    /// `task_progress` and `task_completed` lines are dropped, and the
    /// snapshots are made by running its events through a board, as the
    /// engine does today.
    upgrade: Option<crate::runtime::board::Board>,
}

impl<'a> Reader<'a> {
    fn new(path: &'a Path, each: &'a mut dyn FnMut(Stamped)) -> Self {
        Self {
            path,
            line: 0,
            header: None,
            each,
            warnings: Vec::new(),
            upgrade: None,
        }
    }

    /// Takes the next line, with its newline if it has one.
    fn line(&mut self, raw: &str) -> Result<(), TranscriptError> {
        self.line += 1;
        let (path, line) = (self.path, self.line);
        if self.header.is_none() {
            let header = parse_header(path, raw)?;
            self.upgrade = (header.version == 1).then(crate::runtime::board::Board::new);
            self.header = Some(header);
            return Ok(());
        }
        let complete = raw.ends_with('\n');
        let body = raw.trim_end_matches(['\n', '\r']);
        if body.trim().is_empty() {
            return Ok(());
        }
        let parsed = match &self.upgrade {
            Some(_) => parse_v1_event(path, line, body),
            None => parse_event(path, line, body).map(Some),
        };
        match parsed {
            Ok(None) => {}
            Ok(Some(event)) => {
                let snapshot = self.upgrade.as_mut().and_then(|b| b.observe(&event));
                let t = event.t;
                (self.each)(event);
                if let Some(snapshot) = snapshot {
                    (self.each)(Stamped::new(t, snapshot));
                }
            }
            // A cut-short last line: report it and keep what came before.
            Err(TranscriptError::NotJson { .. }) if !complete => {
                self.warnings.push(Warning::TruncatedLastLine {
                    path: path.to_path_buf(),
                    line,
                });
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    fn finish(self) -> Result<Read, TranscriptError> {
        let Some(header) = self.header else {
            return Err(TranscriptError::Empty {
                path: self.path.to_path_buf(),
            });
        };
        Ok(Read {
            header,
            warnings: self.warnings,
        })
    }
}

pub(super) fn parse_header(path: &Path, line: &str) -> Result<Header, TranscriptError> {
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
pub(super) fn parse_v1_event(
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

pub(super) fn parse_event(
    path: &Path,
    line: usize,
    text: &str,
) -> Result<Stamped, TranscriptError> {
    // A well-formed line parses straight into its event; only a line that
    // does not is read again as plain JSON, to say what is wrong with it.
    if let Ok(stamped) = serde_json::from_str::<Stamped>(text) {
        return Ok(stamped);
    }
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
