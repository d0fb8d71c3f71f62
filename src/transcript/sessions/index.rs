//! What a listing found in each transcript, kept for the next listing:
//! `<sessions dir>/.index.json`, each file's summary under its name with
//! the size and modification time it was read at. A transcript unchanged
//! since (same size, same modification time) is not read again; one that
//! grew, or is new, is. Whether a session is open is never kept: it is
//! looked at every time.
//!
//! The index is a cache: a missing, unreadable or foreign one is read as
//! empty, and one that cannot be written is not (the listing is the same,
//! only slower).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::SessionInfo;

/// The index's file name in the sessions directory (not a `*.jsonl`:
/// never taken for a transcript).
pub const FILE: &str = ".index.json";

/// The index's format; another is read as empty (2: with `spent`).
const VERSION: u32 = 2;

/// A transcript's summary, as it was at `bytes` and `modified`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    bytes: u64,
    modified: SystemTime,
    cwd: String,
    started: SystemTime,
    last_event: SystemTime,
    first_message: Option<String>,
    agents: Vec<String>,
    running_tasks: Vec<String>,
    #[serde(default)]
    spent: Option<crate::event::budget::Spent>,
    events: u64,
    version: u32,
    quorum_version: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    entries: BTreeMap<String, Entry>,
}

/// The summaries of a sessions directory's transcripts, as last listed.
#[derive(Debug, Default)]
pub struct Index {
    path: PathBuf,
    file: File,
    /// Entries added, replaced or dropped since it was read.
    changed: bool,
}

impl Index {
    /// The index of the sessions directory `dir` (empty if there is none
    /// or it cannot be read).
    pub fn read(dir: &Path) -> Self {
        let path = dir.join(FILE);
        let file = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<File>(&bytes).ok())
            .filter(|f| f.version == VERSION)
            .unwrap_or_default();
        Self {
            path,
            file,
            changed: false,
        }
    }

    /// The summary of `path`, if it is the file's as it is now (`meta`).
    pub fn get(&self, path: &Path, meta: &std::fs::Metadata) -> Option<SessionInfo> {
        let entry = self.file.entries.get(name(path)?)?;
        let modified = meta.modified().ok()?;
        if entry.bytes != meta.len() || entry.modified != modified {
            return None;
        }
        Some(SessionInfo {
            id: path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            path: path.to_path_buf(),
            cwd: entry.cwd.clone(),
            started: entry.started,
            last_event: entry.last_event,
            running_tasks: entry.running_tasks.clone(),
            first_message: entry.first_message.clone(),
            agents: entry.agents.clone(),
            spent: entry.spent,
            events: entry.events,
            bytes: entry.bytes,
            open_in: super::open_in(path),
            version: entry.version,
            quorum_version: entry.quorum_version.clone(),
        })
    }

    /// Keeps `info`, read from its file as it was at `modified`.
    pub fn put(&mut self, info: &SessionInfo, modified: Option<SystemTime>) {
        let (Some(name), Some(modified)) = (name(&info.path), modified) else {
            return;
        };
        let entry = Entry {
            bytes: info.bytes,
            modified,
            cwd: info.cwd.clone(),
            started: info.started,
            last_event: info.last_event,
            first_message: info.first_message.clone(),
            agents: info.agents.clone(),
            running_tasks: info.running_tasks.clone(),
            spent: info.spent,
            events: info.events,
            version: info.version,
            quorum_version: info.quorum_version.clone(),
        };
        self.file.entries.insert(name.to_string(), entry);
        self.changed = true;
    }

    /// Drops the entries of files not in `listed` (their names).
    pub fn keep_only(&mut self, listed: &std::collections::HashSet<String>) {
        let before = self.file.entries.len();
        self.file.entries.retain(|name, _| listed.contains(name));
        self.changed |= self.file.entries.len() != before;
    }

    /// Writes the index back if it changed: through a new file renamed
    /// over it, readable by its owner alone. A failure is let go.
    pub fn write(mut self) {
        if !self.changed {
            return;
        }
        self.file.version = VERSION;
        let Ok(text) = serde_json::to_vec(&self.file) else {
            return;
        };
        let tmp = self
            .path
            .with_file_name(format!("{FILE}.{}.tmp", std::process::id()));
        let mut options = crate::confine::private::file_options();
        options.write(true).create(true).truncate(true);
        let written = options.open(&tmp).and_then(|mut f| {
            use std::io::Write;
            f.write_all(&text)
        });
        if written
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .is_err()
        {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// A transcript's file name, the key of its entry.
pub fn name(path: &Path) -> Option<&str> {
    path.file_name()?.to_str()
}
