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
    if let Some(loaded) = load_halves(path, max_line)? {
        return Ok(loaded);
    }
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
    read_lines(&mut input, &mut reader, max_line)?;
    reader.finish()
}

/// A transcript this long or longer is read in two halves at once (two
/// cores read it in half the time).
const HALVES_FROM: u64 = 4 * 1024 * 1024;

/// Reads the transcript at `path` as [`load_capped`] does, the events of
/// its second half on a thread of their own: the same events, warnings
/// and errors (the first in the file, naming its line). `None` when it is
/// not worth it or not possible: a short file, not a regular file, a
/// version-1 transcript (its events are upgraded in order, through one
/// board), a header that does not read (the whole file is read again,
/// to say so), or no line end near the middle.
fn load_halves(path: &Path, max_line: u64) -> Result<Option<Loaded>, TranscriptError> {
    use std::io::{Read as _, Seek, SeekFrom};
    let io = |source| TranscriptError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    let len = meta.len();
    if !meta.is_file() || len < HALVES_FROM {
        return Ok(None);
    }
    let mut input = std::io::BufReader::with_capacity(64 * 1024, file);
    let mut buf = Vec::new();
    let header = match next_line(&mut input, &mut buf, max_line).map_err(io)? {
        Some(Line {
            complete: true,
            too_long: false,
        }) => std::str::from_utf8(&buf)
            .ok()
            .and_then(|text| parse_header(path, text).ok()),
        _ => None,
    };
    let Some(header) = header.filter(|h| h.version != 1) else {
        return Ok(None);
    };
    let header_len = buf.len() as u64;
    // The second half starts at the first line that starts after the
    // middle of the file.
    let middle = len / 2;
    if header_len > middle {
        return Ok(None);
    }
    let mut file = input.into_inner();
    file.seek(SeekFrom::Start(middle)).map_err(io)?;
    let mut near = std::io::BufReader::with_capacity(64 * 1024, file);
    let Some(Line { complete: true, .. }) = next_line(&mut near, &mut buf, max_line).map_err(io)?
    else {
        return Ok(None);
    };
    let split = middle + buf.len() as u64;
    let (first, second) = std::thread::scope(|scope| {
        let second = scope.spawn(|| {
            let mut events = Vec::new();
            let mut each = |event| events.push(event);
            let mut reader = Reader::new(path, &mut each);
            reader.header = Some(header);
            let mut file = std::fs::File::open(path).map_err(io)?;
            file.seek(SeekFrom::Start(split)).map_err(io)?;
            let mut input = std::io::BufReader::with_capacity(64 * 1024, file);
            read_lines(&mut input, &mut reader, max_line)?;
            let Read { warnings, .. } = reader.finish()?;
            Ok::<_, TranscriptError>((events, warnings))
        });
        let first = (|| {
            let mut events = Vec::new();
            let mut each = |event| events.push(event);
            let mut reader = Reader::new(path, &mut each);
            let file = std::fs::File::open(path).map_err(io)?;
            let mut input = std::io::BufReader::with_capacity(64 * 1024, file.take(split));
            read_lines(&mut input, &mut reader, max_line)?;
            let lines = reader.line;
            let read = reader.finish()?;
            Ok::<_, TranscriptError>((events, read, lines))
        })();
        let second = second
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (first, second)
    });
    // An error in the first half is the first in the file.
    let (
        mut events,
        Read {
            header,
            mut warnings,
        },
        lines,
    ) = first?;
    let (mut more, more_warnings) = second.map_err(|e| e.after(lines))?;
    events.reserve_exact(more.len());
    events.append(&mut more);
    warnings.extend(more_warnings.into_iter().map(|w| w.after(lines)));
    Ok(Some(Loaded {
        header,
        events,
        warnings,
    }))
}

/// Hands each line of `input` to `reader`, each at most `max_line` bytes.
fn read_lines(
    input: &mut impl std::io::BufRead,
    reader: &mut Reader<'_>,
    max_line: u64,
) -> Result<(), TranscriptError> {
    let path = reader.path;
    let io = |source| TranscriptError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut buf = Vec::new();
    while let Some(Line { complete, too_long }) =
        next_line(input, &mut buf, max_line).map_err(io)?
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
    Ok(())
}

impl TranscriptError {
    /// The same error of a part of a transcript that starts after its
    /// first `lines` lines: its line counted from the file's start.
    fn after(mut self, lines: usize) -> Self {
        match &mut self {
            TranscriptError::NotUtf8 { line, .. }
            | TranscriptError::LineTooLong { line, .. }
            | TranscriptError::NotJson { line, .. }
            | TranscriptError::UnknownEvent { line, .. }
            | TranscriptError::BadEvent { line, .. } => *line += lines,
            TranscriptError::Io { .. }
            | TranscriptError::Empty { .. }
            | TranscriptError::BadHeader { .. }
            | TranscriptError::NewerVersion { .. } => {}
        }
        self
    }
}

impl Warning {
    /// As [`TranscriptError::after`].
    fn after(self, lines: usize) -> Self {
        match self {
            Warning::TruncatedLastLine { path, line } => Warning::TruncatedLastLine {
                path,
                line: line + lines,
            },
        }
    }
}

// A transcript's lines are read as every line of outside input is.
pub(super) use crate::confine::lines::{Line, read_line as next_line};

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

/// An event line as the recorder writes it, its time first
/// (`{"t":N,"type":...}`), parsed in one pass: the time, then the event
/// from the rest of the object. (A `Stamped` buffers its flattened event's
/// fields, and the event's tag buffers them once more.) What this takes
/// parses to the same `Stamped`; anything else (another order, a second
/// `t`) is left to `Stamped` itself.
mod recorded {
    use std::borrow::Cow;
    use std::fmt;

    use serde::Deserialize;
    use serde::de::value::{BorrowedStrDeserializer, MapAccessDeserializer, StringDeserializer};
    use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};

    use crate::event::{Event, Stamped, Text};

    pub(super) fn parse(text: &str) -> Option<Stamped> {
        let mut de = serde_json::Deserializer::from_str(text);
        let stamped = (&mut de).deserialize_map(TimeFirst).ok()?;
        de.end().ok()?;
        Some(stamped)
    }

    struct TimeFirst;

    impl<'de> Visitor<'de> for TimeFirst {
        type Value = Stamped;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an event line, its time first")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Stamped, A::Error> {
            match map.next_key::<Text<'de>>()? {
                Some(Text(key)) if key == "t" => {}
                _ => return Err(de::Error::custom("not the time first")),
            }
            let t: u64 = map.next_value()?;
            let event = Event::deserialize(MapAccessDeserializer::new(NoSecondTime(map)))?;
            Ok(Stamped { t, event })
        }
    }

    /// The rest of a line's fields, for its event; a second `t` is an
    /// error.
    struct NoSecondTime<A>(A);

    impl<'de, A: MapAccess<'de>> MapAccess<'de> for NoSecondTime<A> {
        type Error = A::Error;

        fn next_key_seed<K: DeserializeSeed<'de>>(
            &mut self,
            seed: K,
        ) -> Result<Option<K::Value>, A::Error> {
            match self.0.next_key::<Text<'de>>()? {
                None => Ok(None),
                Some(Text(key)) if key == "t" => Err(de::Error::custom("a second time")),
                Some(Text(Cow::Borrowed(key))) => seed
                    .deserialize(BorrowedStrDeserializer::new(key))
                    .map(Some),
                Some(Text(Cow::Owned(key))) => {
                    seed.deserialize(StringDeserializer::new(key)).map(Some)
                }
            }
        }

        fn next_value_seed<V: DeserializeSeed<'de>>(
            &mut self,
            seed: V,
        ) -> Result<V::Value, A::Error> {
            self.0.next_value_seed(seed)
        }

        fn size_hint(&self) -> Option<usize> {
            self.0.size_hint()
        }
    }
}

pub(super) fn parse_event(
    path: &Path,
    line: usize,
    text: &str,
) -> Result<Stamped, TranscriptError> {
    // A line as the recorder writes it parses in one pass; any other is
    // read as a `Stamped`, and one that does not parse as plain JSON, to
    // say what is wrong with it.
    if let Some(stamped) = recorded::parse(text) {
        return Ok(stamped);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    const RECORDED: [&str; 5] = [
        "assets/demo.jsonl",
        "tests/fixtures/batch.jsonl",
        "tests/fixtures/colours.jsonl",
        "tests/fixtures/quorum.jsonl",
        "tests/fixtures/wide.jsonl",
    ];

    fn repo(file: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(file)
    }

    /// The event lines of the recorded sessions, and one of each type.
    fn event_lines() -> Vec<String> {
        let mut lines: Vec<String> = RECORDED
            .iter()
            .flat_map(|file| {
                let text = std::fs::read_to_string(repo(file)).unwrap();
                text.lines().skip(1).map(String::from).collect::<Vec<_>>()
            })
            .collect();
        for (i, event) in crate::event::tests::samples().into_iter().enumerate() {
            let stamped = Stamped::new(i as u64 * 7, event);
            lines.push(serde_json::to_string(&stamped).unwrap());
        }
        lines.retain(|l| !l.trim().is_empty());
        lines
    }

    #[test]
    fn an_event_line_parses_as_it_does_through_stamped() {
        let path = Path::new("t.jsonl");
        for (n, line) in event_lines().iter().enumerate() {
            let slow: Stamped = serde_json::from_str(line).unwrap();
            assert_eq!(parse_event(path, n, line).unwrap(), slow, "{line}");
        }
        // Odd lines parse as they did before the one-pass path: straight
        // into a `Stamped`, else through a JSON value (where a second
        // field of the same name wins).
        for odd in [
            r#"{"type":"turn_started","t":3}"#,
            r#"{"type":"turn_started"}"#,
            r#"{"t":"1","type":"turn_started"}"#,
            r#"{"t":1,"t":2,"type":"turn_started"}"#,
            r#"{"t":1,"type":"user_message","text":"a","t":5}"#,
            r#"{"t":1,"type":"turn_started","type":"assistant_end"}"#,
            r#"{"t":1,"type":"user_message"}"#,
            r#"{"t":1,"type":"user_message","text":"a","extra":[1,{"t":2}]}"#,
            r#"{"t":1,"type":"nope"}"#,
            r#"{"t":1}"#,
            r#"{"t":1.5,"type":"turn_started"}"#,
            r#"{"t":1,"ty\u0070e":"user_message","te\u0078t":"a\nb"}"#,
            r#"{"t":1,"type":"user_message","text":"a","text":"b"}"#,
            r#"{"t":1,"type":"turn_started"} x"#,
            r#"[1,"turn_started"]"#,
        ] {
            let before = serde_json::from_str::<Stamped>(odd).ok().or_else(|| {
                let value: serde_json::Value = serde_json::from_str(odd).ok()?;
                serde_json::from_value(value).ok()
            });
            assert_eq!(parse_event(path, 1, odd).ok(), before, "{odd}");
        }
    }

    /// A transcript of the lines of [`event_lines`] over and over (at
    /// least [`HALVES_FROM`] bytes), with `early` a third of the way in
    /// (in its first half) and `tail` after them.
    fn long_transcript(early: &str, tail: &str) -> tempfile::NamedTempFile {
        let header = std::fs::read_to_string(repo(RECORDED[0])).unwrap();
        let header = header.lines().next().unwrap().to_string();
        let lines = event_lines();
        let mut body = Vec::new();
        let mut size = 0;
        while size < HALVES_FROM as usize + 1024 {
            for line in &lines {
                size += line.len() + 1;
                body.push(line.as_str());
            }
        }
        let mut text = format!("{header}\n");
        for (i, line) in body.iter().enumerate() {
            if i == body.len() / 3 {
                text.push_str(early);
            }
            text.push_str(line);
            text.push('\n');
        }
        text.push_str(tail);
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }

    /// The slow path: every line in order on one thread.
    fn one_by_one(path: &Path, max_line: u64) -> Result<Loaded, String> {
        let mut events = Vec::new();
        read_each(path, max_line, &mut |e| events.push(e))
            .map(|read| Loaded {
                header: read.header,
                events,
                warnings: read.warnings,
            })
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_long_transcript_read_in_halves_is_the_one_read_line_by_line() {
        let max = crate::confine::limits::MAX_TRANSCRIPT_LINE;
        let cases = [
            ("", ""),
            // A blank line, and a last line cut short.
            ("\n", r#"{"t":5,"type":"assistant_del"#),
            // Errors in the second half, and in the first.
            ("", "{\"t\":1,\"type\":\"nope\"}\n"),
            ("{\"t\":1,\"type\":\"nope\"}\n", "not json\n"),
            ("", "{\"t\":1,\"type\":\"user_message\"}\n"),
            ("", "\u{1F600}\u{1F600}\n"),
        ];
        for (early, tail) in cases {
            let file = long_transcript(early, tail);
            let halves = load_halves(file.path(), max).map_err(|e| e.to_string());
            let slow = one_by_one(file.path(), max);
            match (&halves, &slow) {
                (Ok(Some(a)), Ok(b)) => {
                    assert_eq!(a.header, b.header);
                    assert!(a.events == b.events, "{early:?} {tail:?}");
                    assert_eq!(a.warnings, b.warnings);
                    assert!(a.events.len() > 10_000);
                }
                (Err(a), Err(b)) => assert_eq!(a, b),
                _ => panic!("{early:?} {tail:?}: {halves:?} vs {slow:?}"),
            }
            let loaded = load_capped(file.path(), max).map_err(|e| e.to_string());
            assert_eq!(loaded.is_ok(), slow.is_ok());
        }
        // Bytes that are not UTF-8, and a line over the limit, after the middle.
        let file = long_transcript("", "");
        let mut bytes = std::fs::read(file.path()).unwrap();
        bytes.extend_from_slice(b"{\"t\":1,\"type\":\"user_message\",\"text\":\"\xff\"}\n");
        std::fs::write(file.path(), &bytes).unwrap();
        let a = load_halves(file.path(), max).unwrap_err().to_string();
        assert_eq!(Err(a), one_by_one(file.path(), max).map(|_| ()));
        let long = format!(
            "{{\"t\":1,\"type\":\"user_message\",\"text\":\"{}\"}}\n",
            "x".repeat(5000)
        );
        let file = long_transcript("", &long);
        let a = load_halves(file.path(), 4096).unwrap_err().to_string();
        assert!(a.contains("a line over"), "{a}");
        assert_eq!(Err(a), one_by_one(file.path(), 4096).map(|_| ()));
    }

    #[test]
    fn short_and_old_transcripts_are_read_line_by_line() {
        let max = crate::confine::limits::MAX_TRANSCRIPT_LINE;
        assert!(load_halves(&repo(RECORDED[0]), max).unwrap().is_none());
        let v1 = std::fs::read_to_string(repo("tests/fixtures/demo_v1.jsonl")).unwrap();
        let mut lines = v1.lines();
        let mut text = format!("{}\n", lines.next().unwrap());
        let body: Vec<&str> = lines.collect();
        while text.len() < HALVES_FROM as usize + 1024 {
            for line in &body {
                text.push_str(line);
                text.push('\n');
            }
        }
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        assert!(load_halves(file.path(), max).unwrap().is_none());
        assert!(load_capped(file.path(), max).unwrap().events.len() > 1000);
    }
}
