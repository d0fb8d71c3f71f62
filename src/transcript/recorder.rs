use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::Header;
use crate::event::Stamped;
use crate::runtime::bus::Record;

/// Appends a session's events to a transcript file.
///
/// Every line goes to the OS in one `write` as soon as it is recorded: if
/// quorum dies, every event recorded before is in the file.
#[derive(Debug)]
pub struct Recorder {
    file: File,
    path: PathBuf,
    line: Vec<u8>,
}

impl Recorder {
    /// Creates `path` (mode 0600; an existing file is never overwritten) and
    /// writes the header.
    pub fn create(path: &Path, header: &Header) -> std::io::Result<Self> {
        let mut options = crate::confine::private::file_options();
        options.write(true).append(true).create_new(true);
        let file = options.open(path)?;
        let mut recorder = Self {
            file,
            path: path.to_path_buf(),
            line: Vec::with_capacity(256),
        };
        recorder.write_line(header)?;
        Ok(recorder)
    }

    /// Appends one event.
    pub fn record(&mut self, event: &Stamped) -> std::io::Result<()> {
        self.write_line(event)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write_line(&mut self, value: &impl serde::Serialize) -> std::io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, value)?;
        self.line.push(b'\n');
        self.file.write_all(&self.line)?;
        self.file.flush()
    }
}

impl Record for Recorder {
    fn record(&mut self, event: &Stamped) -> std::io::Result<()> {
        Recorder::record(self, event)
    }

    fn path(&self) -> &Path {
        Recorder::path(self)
    }
}
