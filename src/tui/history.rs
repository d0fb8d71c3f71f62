//! The messages a person sent, oldest first, for the composer's ↑ and ↓;
//! kept in a file (one JSON string a line, so a message of several lines
//! stays one entry) that every session of the same person shares.
//!
//! A missing or unreadable file is an empty history, a line that is not a
//! JSON string is skipped, and a file that cannot be written leaves the
//! history in memory: none of it is worth an error on the screen.

use std::io::Write;
use std::path::{Path, PathBuf};

/// How many messages the file keeps.
pub const CAP: usize = 1000;

#[derive(Debug, Default)]
pub struct History {
    /// `None`: kept in memory only.
    path: Option<PathBuf>,
    cap: usize,
    entries: Vec<String>,
    /// Lines in the file, as far as this session knows: when it has grown
    /// well past the cap, the file is rewritten with the newest entries.
    lines: usize,
}

impl History {
    /// A history in memory only.
    pub fn in_memory() -> Self {
        Self {
            cap: CAP,
            ..Self::default()
        }
    }

    /// The history kept in `path`, at most `cap` messages.
    pub fn open(path: &Path, cap: usize) -> Self {
        let (entries, lines) = read(path);
        let skip = entries.len().saturating_sub(cap);
        Self {
            path: Some(path.to_path_buf()),
            cap: cap.max(1),
            entries: entries.into_iter().skip(skip).collect(),
            lines,
        }
    }

    pub fn entries(&self) -> &[String] {
        &self.entries
    }

    /// Remembers a sent message (not again when it repeats the last one).
    pub fn push(&mut self, text: &str) {
        if text.trim().is_empty() || self.entries.last().is_some_and(|e| e == text) {
            return;
        }
        self.entries.push(text.to_string());
        if self.entries.len() > self.cap {
            self.entries.remove(0);
        }
        let Some(path) = &self.path else { return };
        let line = serde_json::Value::String(text.to_string()).to_string();
        if append(path, &line).is_ok() {
            self.lines += 1;
        }
        // Other sessions append too: compact from what the file holds.
        if self.lines > self.cap + self.cap / 2 + 1 {
            let (entries, _) = read(path);
            let keep = &entries[entries.len().saturating_sub(self.cap)..];
            if rewrite(path, keep).is_ok() {
                self.lines = keep.len();
            }
        }
    }
}

/// The entries of the file, and how many lines it has.
fn read(path: &Path) -> (Vec<String>, usize) {
    let Ok(text) = std::fs::read(path) else {
        return (Vec::new(), 0);
    };
    let text = String::from_utf8_lossy(&text);
    let mut lines = 0;
    let entries = text
        .lines()
        .inspect(|_| lines += 1)
        .filter_map(|l| serde_json::from_str::<String>(l).ok())
        .collect();
    (entries, lines)
}

/// What a person typed is theirs alone.
fn options() -> std::fs::OpenOptions {
    let mut options = crate::confine::private::file_options();
    options.create(true);
    options
}

fn append(path: &Path, line: &str) -> std::io::Result<()> {
    let mut file = options().append(true).open(path)?;
    // One write: lines from two sessions do not interleave.
    file.write_all(format!("{line}\n").as_bytes())
}

/// Replaces the file with `entries`, through a new file renamed over it.
fn rewrite(path: &Path, entries: &[String]) -> std::io::Result<()> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(name);
    let mut text = String::new();
    for e in entries {
        text.push_str(&serde_json::Value::String(e.clone()).to_string());
        text.push('\n');
    }
    let written = options()
        .write(true)
        .truncate(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    match written {
        Ok(()) => std::fs::rename(&tmp, path),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_of_several_lines_survive_a_new_session() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history");
        let mut h = History::open(&path, 10);
        h.push("first");
        h.push("two\nlines \"quoted\"");
        h.push("two\nlines \"quoted\"");
        h.push("   ");
        let h = History::open(&path, 10);
        assert_eq!(h.entries(), ["first", "two\nlines \"quoted\""]);
    }

    #[test]
    fn a_missing_file_is_empty_and_bad_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            History::open(&dir.path().join("none"), 10)
                .entries()
                .is_empty()
        );
        let path = dir.path().join("history");
        std::fs::write(&path, b"\"a\"\nnot json\n{\"x\":1}\n\xff\xfe\n\"b\"\n").unwrap();
        assert_eq!(History::open(&path, 10).entries(), ["a", "b"]);
    }

    #[test]
    fn the_file_keeps_the_newest_messages_up_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history");
        let mut h = History::open(&path, 4);
        for i in 0..20 {
            h.push(&format!("m{i}"));
        }
        assert_eq!(h.entries(), ["m16", "m17", "m18", "m19"]);
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert!(lines <= 7, "compacted: {lines} lines");
        assert_eq!(
            History::open(&path, 4).entries(),
            ["m16", "m17", "m18", "m19"]
        );
    }

    #[cfg(unix)]
    #[test]
    fn the_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history");
        History::open(&path, 4).push("secret");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn an_unwritable_file_keeps_the_history_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should be: it cannot be written.
        let path = dir.path().join("history");
        std::fs::create_dir(&path).unwrap();
        let mut h = History::open(&path, 4);
        h.push("kept");
        assert_eq!(h.entries(), ["kept"]);
    }
}
