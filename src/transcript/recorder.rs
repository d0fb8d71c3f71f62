use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::Header;
use super::reader::{Loaded, TranscriptError, Warning};
use crate::event::Stamped;
use crate::runtime::bus::Record;

/// Appends a session's events to a transcript file.
///
/// Every line goes to the OS as soon as it is recorded, lines the bus
/// records together in one `write`: if quorum dies, every event recorded
/// before is in the file. While it
/// writes, it holds the transcript's lock: no second quorum writes the
/// same session.
///
/// No line it writes is longer than `max_line` bytes (the reader's limit,
/// `max_transcript_line_bytes`): an event that would be is made to fit,
/// its longest strings cut and the cuts named (see `fit`).
#[derive(Debug)]
pub struct Recorder {
    file: File,
    path: PathBuf,
    line: Vec<u8>,
    max_line: u64,
    _lock: Lock,
}

/// What the line buffer may keep between writes: a longer line's room is
/// given back.
const KEPT_BUFFER: usize = 1024 * 1024;

/// Why a transcript cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(
        "session {} is open in process {pid}: one quorum at a time writes a session",
        id(path)
    )]
    Open { path: PathBuf, pid: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
    #[error("{}: {reason}", path.display())]
    Refused { path: PathBuf, reason: String },
}

/// A session's id: its transcript's file name without `.jsonl`.
fn id(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// The lock of a transcript being written: `<transcript>.lock`, holding
/// the writer's PID, locked (`flock`) for as long as it writes. A lock
/// left by a process that died is not held, and is taken over.
#[derive(Debug)]
pub struct Lock {
    file: File,
    path: PathBuf,
}

impl Lock {
    /// Takes the lock of `transcript`, or says which process holds it.
    pub fn take(transcript: &Path) -> Result<Self, RecordError> {
        let path = super::sessions::lock_path(transcript);
        let io = |source| RecordError::Io {
            path: path.clone(),
            source,
        };
        let mut options = crate::confine::private::file_options();
        options.read(true).write(true).create(true).truncate(false);
        let mut file = options.open(&path).map_err(io)?;
        // A listing (`quorum sessions`) checks a lock by taking it shared
        // for an instant: a few tries tell that from a writer holding it.
        let mut tries = 0;
        let taken = loop {
            match file.try_lock() {
                Err(std::fs::TryLockError::WouldBlock) if tries < 5 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => break other,
            }
        };
        match taken {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                return Err(RecordError::Open {
                    path: transcript.to_path_buf(),
                    pid: if pid.is_empty() {
                        "?".into()
                    } else {
                        pid.into()
                    },
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        write!(file, "{}", std::process::id()).map_err(io)?;
        Ok(Self { file, path })
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

/// A recorded session opened to go on: what it holds, and the recorder
/// that appends to it.
#[derive(Debug)]
pub struct Reopened {
    pub loaded: Loaded,
    pub recorder: Recorder,
    /// The bytes of a last line cut short (a crash mid-write) that were
    /// cut off, so the file stays valid JSON lines.
    pub cut: Option<u64>,
}

impl Recorder {
    /// Creates `path` (mode 0600; an existing file is never overwritten) and
    /// writes the header.
    pub fn create(path: &Path, header: &Header) -> Result<Self, RecordError> {
        let lock = Lock::take(path)?;
        let io = |source| RecordError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut options = crate::confine::private::file_options();
        options.write(true).append(true).create_new(true);
        let file = options.open(path).map_err(io)?;
        let mut recorder = Self {
            file,
            path: path.to_path_buf(),
            line: Vec::with_capacity(256),
            max_line: crate::confine::limits::MAX_TRANSCRIPT_LINE,
            _lock: lock,
        };
        recorder.write_lines([header]).map_err(io)?;
        Ok(recorder)
    }

    /// Opens a recorded session to append to it: takes its lock, reads
    /// it (lines capped at `max_line` bytes), lets `check` refuse it, and
    /// cuts off a last line cut short. Nothing is written when it cannot
    /// be continued.
    pub fn reopen(
        path: &Path,
        max_line: u64,
        check: impl FnOnce(&Loaded) -> Result<(), String>,
    ) -> Result<Reopened, RecordError> {
        let lock = Lock::take(path)?;
        let loaded = super::load_capped(path, max_line)?;
        check(&loaded).map_err(|reason| RecordError::Refused {
            path: path.to_path_buf(),
            reason,
        })?;
        let io = |source| RecordError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true);
        let mut file = options.open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let mut cut = None;
        if len > 0 && last_byte(&mut file).map_err(io)? != b'\n' {
            if loaded
                .warnings
                .iter()
                .any(|w| matches!(w, Warning::TruncatedLastLine { .. }))
            {
                let keep = end_of_last_line(&mut file, len).map_err(io)?;
                file.set_len(keep).map_err(io)?;
                cut = Some(len - keep);
            } else {
                // The last event is whole but has no newline: end it.
                file.seek(SeekFrom::End(0)).map_err(io)?;
                file.write_all(b"\n").map_err(io)?;
            }
        }
        drop(file);
        let mut options = std::fs::OpenOptions::new();
        options.append(true);
        let file = options.open(path).map_err(io)?;
        let recorder = Self {
            file,
            path: path.to_path_buf(),
            line: Vec::with_capacity(256),
            max_line,
            _lock: lock,
        };
        Ok(Reopened {
            loaded,
            recorder,
            cut,
        })
    }

    /// The same recorder, its lines at most `bytes` long (by default the
    /// reader's default limit).
    pub fn max_line(mut self, bytes: u64) -> Self {
        self.max_line = bytes;
        self
    }

    /// Appends one event.
    pub fn record(&mut self, event: &Stamped) -> std::io::Result<()> {
        self.write_lines([event])
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `values` as JSON lines, in one `write`, each made to fit
    /// `max_line`.
    fn write_lines<'a, T: serde::Serialize + 'a>(
        &mut self,
        values: impl IntoIterator<Item = &'a T>,
    ) -> std::io::Result<()> {
        if self.line.capacity() > KEPT_BUFFER {
            self.line = Vec::with_capacity(256);
        }
        self.line.clear();
        for value in values {
            if let Some(len) = super::fit::push_line(&mut self.line, value, self.max_line)? {
                tracing::warn!(
                    "{}: an event's line of {len} bytes was cut to fit max_transcript_line_bytes ({})",
                    self.path.display(),
                    self.max_line
                );
            }
        }
        self.file.write_all(&self.line)?;
        self.file.flush()
    }
}

fn last_byte(file: &mut File) -> std::io::Result<u8> {
    file.seek(SeekFrom::End(-1))?;
    let mut byte = [0u8];
    file.read_exact(&mut byte)?;
    Ok(byte[0])
}

/// The offset just after the file's last newline (0 if it has none).
fn end_of_last_line(file: &mut File, len: u64) -> std::io::Result<u64> {
    let mut end = len;
    let mut buf = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let chunk = &mut buf[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|b| *b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

impl Record for Recorder {
    fn record(&mut self, event: &Stamped) -> std::io::Result<()> {
        Recorder::record(self, event)
    }

    /// One `write` for them all.
    fn record_all(&mut self, events: &[Stamped]) -> std::io::Result<()> {
        self.write_lines(events)
    }

    fn path(&self) -> &Path {
        Recorder::path(self)
    }
}
