//! Following a transcript another process is writing (`quorum watch`):
//! each [`Follower::poll`] reads the complete lines appended since the
//! last one, from where it stopped. A last line without its newline yet is
//! left for the next poll (the writer is in the middle of it), never an
//! error; a line the reader would refuse is, with its file and line.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::reader::{parse_event, parse_header, parse_v1_event};
use super::{Header, TranscriptError};
use crate::event::Stamped;

/// The most read in one poll: the rest comes at the next.
const CHUNK: usize = 1 << 20;

/// A transcript being followed.
pub struct Follower {
    path: PathBuf,
    file: std::fs::File,
    /// Where the next read starts.
    offset: u64,
    /// Bytes of a line whose newline has not come yet.
    pending: Vec<u8>,
    max_line: u64,
    /// Lines read so far.
    line: usize,
    header: Option<Header>,
    /// A version-1 file's snapshots, made as the reader makes them.
    upgrade: Option<crate::runtime::board::Board>,
    last_t: u64,
}

impl Follower {
    /// Opens `path` to follow it from its start; lines are capped at
    /// `max_line` bytes.
    pub fn open(path: &Path, max_line: u64) -> Result<Self, TranscriptError> {
        let file = std::fs::File::open(path).map_err(|source| TranscriptError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            offset: 0,
            pending: Vec::new(),
            max_line,
            line: 0,
            header: None,
            upgrade: None,
            last_t: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The header, once read.
    pub fn header(&self) -> Option<&Header> {
        self.header.as_ref()
    }

    /// The time of the last event read (ms into the session).
    pub fn last_t(&self) -> u64 {
        self.last_t
    }

    /// Whether part of a line waits for the rest of it.
    pub fn mid_line(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The events of the complete lines appended since the last poll.
    pub fn poll(&mut self) -> Result<Vec<Stamped>, TranscriptError> {
        let io = |source| TranscriptError::Io {
            path: self.path.clone(),
            source,
        };
        let len = self.file.metadata().map_err(io)?.len();
        if len < self.offset {
            // Cut back (a continuing quorum cuts off a line cut short):
            // what was there is read; go on from the new end.
            self.offset = len;
            self.pending.clear();
        }
        let mut events = Vec::new();
        if len == self.offset {
            return Ok(events);
        }
        self.file.seek(SeekFrom::Start(self.offset)).map_err(io)?;
        let mut buf = Vec::with_capacity(((len - self.offset) as usize).min(CHUNK));
        (&mut self.file)
            .take(CHUNK as u64)
            .read_to_end(&mut buf)
            .map_err(io)?;
        self.offset += buf.len() as u64;
        let mut rest = &buf[..];
        while let Some(end) = rest.iter().position(|b| *b == b'\n') {
            self.pending.extend_from_slice(&rest[..end]);
            rest = &rest[end + 1..];
            let line = std::mem::take(&mut self.pending);
            self.take(&line, &mut events)?;
        }
        self.pending.extend_from_slice(rest);
        if self.pending.len() as u64 > self.max_line {
            return Err(TranscriptError::LineTooLong {
                path: self.path.clone(),
                line: self.line + 1,
                limit: self.max_line,
            });
        }
        Ok(events)
    }

    /// One complete line.
    fn take(&mut self, raw: &[u8], events: &mut Vec<Stamped>) -> Result<(), TranscriptError> {
        self.line += 1;
        let line = self.line;
        if raw.len() as u64 > self.max_line {
            return Err(TranscriptError::LineTooLong {
                path: self.path.clone(),
                line,
                limit: self.max_line,
            });
        }
        let text = std::str::from_utf8(raw).map_err(|e| TranscriptError::NotUtf8 {
            path: self.path.clone(),
            line,
            column: e.valid_up_to() + 1,
        })?;
        let text = text.trim_end_matches('\r');
        if self.header.is_none() {
            let header = parse_header(&self.path, text)?;
            self.upgrade = (header.version == 1).then(crate::runtime::board::Board::new);
            self.header = Some(header);
            return Ok(());
        }
        if text.trim().is_empty() {
            return Ok(());
        }
        let event = match &self.upgrade {
            Some(_) => parse_v1_event(&self.path, line, text)?,
            None => Some(parse_event(&self.path, line, text)?),
        };
        if let Some(event) = event {
            self.last_t = self.last_t.max(event.t);
            let snapshot = self.upgrade.as_mut().and_then(|b| b.observe(&event));
            let t = event.t;
            events.push(event);
            events.extend(snapshot.map(|s| Stamped::new(t, s)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;
    use std::io::Write;

    #[test]
    fn complete_lines_are_read_as_they_come_and_a_partial_one_waits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let header = serde_json::to_string(&Header::now(
            dir.path(),
            crate::transcript::TerminalSize { cols: 0, rows: 0 },
        ))
        .unwrap();
        let mut file = std::fs::File::create(&path).unwrap();
        writeln!(file, "{header}").unwrap();
        let mut f = Follower::open(&path, 1 << 20).unwrap();
        assert_eq!(f.poll().unwrap(), vec![]);
        assert!(f.header().is_some());
        let line = r#"{"t":5,"type":"user_message","text":"hi"}"#;
        file.write_all(&line.as_bytes()[..10]).unwrap();
        assert_eq!(f.poll().unwrap(), vec![], "half a line is not an event yet");
        assert!(f.mid_line());
        writeln!(file, "{}", &line[10..]).unwrap();
        let events = f.poll().unwrap();
        assert_eq!(
            events,
            vec![Stamped::new(5, Event::UserMessage { text: "hi".into() })]
        );
        assert!(!f.mid_line());
        assert_eq!(f.last_t(), 5);
        writeln!(file, "not json").unwrap();
        let e = f.poll().unwrap_err().to_string();
        assert!(e.contains("s.jsonl:3: not JSON"), "{e}");
    }
}
