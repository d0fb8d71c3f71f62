//! The sessions recorded in a sessions directory (`<state dir>/sessions`):
//! what `quorum sessions` lists and the resume picker shows, and finding one
//! by its id.
//!
//! A session's **id** is its transcript's file stem
//! (`2026-12-01T18-00-54Z-1234`). Listing reads every `*.jsonl` file once,
//! line by line, without building events: each line is read for its `type`
//! and `t` alone, and the few events that matter here (`user_message`,
//! `subagent_started`, `subagent_followup`, `subagent_finished`,
//! `subagent_interrupted`) for the fields they need. A last line cut short
//! (a crash mid-write) is not counted; a file that is not a quorum
//! transcript is left out of the listing and said why ([`Skipped`]). What a
//! listing read is kept in the directory's index (`.index.json`, see
//! `index`): the next listing reads only the transcripts that changed.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::{FORMAT, Header};
use crate::confine::lines;
use crate::event::AgentRef;
use crate::event::budget::Spent;

mod index;

/// The first user message is kept to this many characters.
pub const FIRST_MESSAGE_CHARS: usize = 200;

/// The longest header line read: a header is a few hundred bytes.
const MAX_HEADER_LINE: u64 = 64 * 1024;

/// One recorded session, as listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionInfo {
    /// The transcript's file stem.
    pub id: String,
    /// The transcript file.
    pub path: PathBuf,
    /// The session's directory, as its header says.
    pub cwd: String,
    /// When the session started (the header's `started_at`; the file's
    /// modification time if that does not parse).
    #[serde(rename = "started_at", serialize_with = "rfc3339")]
    pub started: SystemTime,
    /// The wall time of its last event: the start plus the last event's `t`.
    #[serde(rename = "last_event_at", serialize_with = "rfc3339")]
    pub last_event: SystemTime,
    /// The first `user_message`'s text on one line (runs of white space
    /// made one space), cut to [`FIRST_MESSAGE_CHARS`] with `…`. Raw text:
    /// sanitise before showing it.
    pub first_message: Option<String>,
    /// The agents its sub-agent calls ran on, in order of first use
    /// (`internal` for the internal agent).
    pub agents: Vec<String>,
    /// Task ids of background tasks still running when the transcript ends
    /// (started or followed up, and neither finished nor interrupted), in
    /// the order they started.
    pub running_tasks: Vec<String>,
    /// What the session spent, as its last `session_spend` says (the
    /// chat, every agent, nested sub-agents): `cost` (USD), `tokens`, and
    /// `estimated` when part of the cost is quorum's estimate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spent: Option<Spent>,
    /// Events recorded (complete lines after the header).
    pub events: u64,
    /// The transcript's size in bytes.
    pub bytes: u64,
    /// The PID of the quorum process that has the session open (its lock
    /// file `<transcript>.lock` is locked); `0` if it holds the lock but
    /// its PID cannot be read.
    pub open_in: Option<u32>,
    /// The transcript format version (newer than [`super::VERSION`]: this
    /// quorum cannot continue it).
    #[serde(skip)]
    pub version: u32,
    /// The quorum version that started the session.
    #[serde(skip)]
    pub quorum_version: String,
}

impl SessionInfo {
    /// Whether the session was recorded in `dir` (its header's directory
    /// is `dir`, or `dir` canonicalized).
    pub fn is_in(&self, dir: &Path) -> bool {
        let cwd = Path::new(&self.cwd);
        cwd == dir || dir.canonicalize().is_ok_and(|d| d == cwd)
    }

    /// The start as RFC 3339 UTC, to the second.
    pub fn started_at(&self) -> String {
        humantime::format_rfc3339_seconds(self.started).to_string()
    }

    /// The last event's time as RFC 3339 UTC, to the second.
    pub fn last_event_at(&self) -> String {
        humantime::format_rfc3339_seconds(self.last_event).to_string()
    }
}

/// How long before `now` `then` was, for a person: `just now`, `42s ago`,
/// `5m ago`, `3h ago`, `6d ago`, else the date (`2026-12-01`).
pub fn ago(then: SystemTime, now: SystemTime) -> String {
    let s = now.duration_since(then).unwrap_or_default().as_secs();
    match s {
        0..10 => "just now".to_string(),
        10..60 => format!("{s}s ago"),
        60..3600 => format!("{}m ago", s / 60),
        3600..86_400 => format!("{}h ago", s / 3600),
        86_400..2_592_000 => format!("{}d ago", s / 86_400),
        _ => humantime::format_rfc3339_seconds(then).to_string()[..10].to_string(),
    }
}

fn rfc3339<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&humantime::format_rfc3339_seconds(*t))
}

/// A file of the sessions directory left out of the listing, and why.
#[derive(Debug)]
pub struct Skipped {
    pub path: PathBuf,
    pub error: ScanError,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "skipped {}: {}", self.path.display(), self.error)
    }
}

/// What a sessions directory holds.
#[derive(Debug, Default)]
pub struct Listing {
    /// Newest first (by last event).
    pub sessions: Vec<SessionInfo>,
    /// Files that are not quorum transcripts (or could not be read).
    pub skipped: Vec<Skipped>,
}

impl Listing {
    /// Only the sessions recorded in `dir` (see [`SessionInfo::is_in`]).
    pub fn in_dir(mut self, dir: &Path) -> Self {
        let canonical = dir.canonicalize().ok();
        self.sessions.retain(|s| {
            let cwd = Path::new(&s.cwd);
            cwd == dir || canonical.as_deref() == Some(cwd)
        });
        self
    }
}

/// Why one file is not listed.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
    #[error("empty file, not a quorum transcript")]
    Empty,
    #[error("not a quorum transcript: {0}")]
    NotTranscript(String),
}

/// Why a session cannot be found.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(
        "no session {id:?} in {}; `quorum sessions` lists this directory's sessions \
         (`quorum sessions --all`: every directory's)",
        dir.display()
    )]
    Unknown { id: String, dir: PathBuf },
    #[error("session id {prefix:?} is ambiguous: it starts {}; give more of it", matches.join(", "))]
    Ambiguous {
        prefix: String,
        matches: Vec<String>,
    },
    #[error("{}: no such transcript file", path.display())]
    NoSuchFile { path: PathBuf },
    #[error("cannot read the sessions directory {}: {source}", dir.display())]
    Io {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The transcripts (`*.jsonl` files) of `dir`. A missing directory has none.
fn transcripts(dir: &Path) -> Result<Vec<PathBuf>, SessionError> {
    let io = |source| SessionError::Io {
        dir: dir.to_path_buf(),
        source,
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(e)),
    };
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry.map_err(io)?.path();
        if path.extension().is_some_and(|e| e == "jsonl") && path.is_file() {
            paths.push(path);
        }
    }
    paths.sort();
    Ok(paths)
}

/// Every session in the sessions directory `dir`, newest first, and the
/// files left out. A missing directory lists nothing.
pub fn list(dir: &Path) -> Result<Listing, SessionError> {
    let mut listing = Listing::default();
    // What the last listing read of the files unchanged since is not read
    // again.
    let mut index = index::Index::read(dir);
    let mut names = std::collections::HashSet::new();
    for path in transcripts(dir)? {
        names.extend(index::name(&path).map(str::to_string));
        let meta = std::fs::metadata(&path).ok();
        if let Some(info) = meta.as_ref().and_then(|m| index.get(&path, m)) {
            listing.sessions.push(info);
            continue;
        }
        match scan(&path) {
            Ok(info) => {
                index.put(&info, meta.and_then(|m| m.modified().ok()));
                listing.sessions.push(info);
            }
            Err(error) => listing.skipped.push(Skipped { path, error }),
        }
    }
    index.keep_only(&names);
    index.write();
    listing
        .sessions
        .sort_by(|a, b| (b.last_event, &b.id).cmp(&(a.last_event, &a.id)));
    Ok(listing)
}

/// The transcript of the newest session of `dir` recorded in `cwd`: the
/// one a listing of the directory's sessions ([`list`], then
/// [`Listing::in_dir`]) shows first. Only what that order needs is read:
/// each transcript's header, and the last lines of those recorded in
/// `cwd` (a listing reads every line of every file).
pub fn newest_for(dir: &Path, cwd: &Path) -> Option<PathBuf> {
    let canonical = cwd.canonicalize().ok();
    let mut newest: Option<(SystemTime, String, PathBuf)> = None;
    for path in transcripts(dir).ok()? {
        let Ok(Some(last_event)) = last_event_in(&path, cwd, canonical.as_deref()) else {
            continue;
        };
        let id = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if newest
            .as_ref()
            .is_none_or(|(at, newest_id, _)| (last_event, &id) > (*at, newest_id))
        {
            newest = Some((last_event, id, path));
        }
    }
    newest.map(|(_, _, path)| path)
}

/// The wall time of a transcript's last event, as [`scan`] finds it, if
/// it was recorded in `cwd` (`canonical`: `cwd` canonicalized); `None`
/// for another directory's. An error where [`scan`] has one.
fn last_event_in(
    path: &Path,
    cwd: &Path,
    canonical: Option<&Path>,
) -> Result<Option<SystemTime>, ScanError> {
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    let mut input = std::io::BufReader::with_capacity(64 * 1024, file);
    let mut buf = Vec::with_capacity(4096);
    let (header, header_len) = match read_line(&mut input, &mut buf, MAX_HEADER_LINE)? {
        None => return Err(ScanError::Empty),
        Some((_, true)) => {
            return Err(ScanError::NotTranscript(
                "line 1 is far too long for a header".into(),
            ));
        }
        Some((complete, false)) => (parse_header(&buf)?, buf.len() + usize::from(complete)),
    };
    let recorded = Path::new(&header.cwd);
    if !(recorded == cwd || canonical == Some(recorded)) {
        return Ok(None);
    }
    let started = humantime::parse_rfc3339_weak(&header.started_at)
        .ok()
        .or_else(|| meta.modified().ok())
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut file = input.into_inner();
    let last_t = match last_t(&mut file, header_len as u64, meta.len())? {
        Some(t) => t,
        // Too far from the end to read backwards: the whole file, forwards.
        None => return scan(path).map(|info| Some(info.last_event)),
    };
    Ok(Some(started + Duration::from_millis(last_t)))
}

/// How far back from its end [`last_t`] reads a transcript before it
/// reads it forwards instead.
const MAX_TAIL: u64 = 16 * 1024 * 1024;

/// The `t` of the last event line of `file` (its lines from byte `from`
/// to `len`), as [`Tally`] would find it reading them all: the last line
/// no longer than a transcript line may be that parses as an event line,
/// read backwards from the end; 0 if none does. `None` when that line is
/// not within [`MAX_TAIL`] bytes of the end.
fn last_t(file: &mut std::fs::File, from: u64, len: u64) -> std::io::Result<Option<u64>> {
    use std::io::{Seek, SeekFrom};
    let max_line = crate::confine::limits::MAX_TRANSCRIPT_LINE;
    let mut window = 64 * 1024u64;
    loop {
        let start = len.saturating_sub(window).max(from);
        let mut tail = Vec::with_capacity((len - start) as usize);
        file.seek(SeekFrom::Start(start))?;
        file.by_ref().take(len - start).read_to_end(&mut tail)?;
        // The first line of a window that starts mid-line is not whole.
        let whole = if start == from {
            &tail[..]
        } else {
            match tail.iter().position(|&b| b == b'\n') {
                Some(i) => &tail[i + 1..],
                None => &[][..],
            }
        };
        let mut lines: Vec<&[u8]> = whole.split(|&b| b == b'\n').collect();
        // What follows the last newline: a line without one, or nothing.
        if lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        for body in lines.into_iter().rev() {
            if body.len() as u64 > max_line || body.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if let Ok(line) = serde_json::from_slice::<Line>(body) {
                return Ok(Some(line.t));
            }
        }
        if start == from {
            return Ok(Some(0));
        }
        if window >= MAX_TAIL {
            return Ok(None);
        }
        window *= 4;
    }
}

/// The transcript for `id_or_path`: a path to an existing file as is;
/// else a session id in `dir`, exact or a prefix of just one.
pub fn find(dir: &Path, id_or_path: &str) -> Result<PathBuf, SessionError> {
    let given = Path::new(id_or_path);
    if given.is_file() {
        return Ok(given.to_path_buf());
    }
    // Something that reads as a path is not looked up as an id.
    if id_or_path.contains(std::path::MAIN_SEPARATOR) || id_or_path.ends_with(".jsonl") {
        return Err(SessionError::NoSuchFile {
            path: given.to_path_buf(),
        });
    }
    let paths = transcripts(dir)?;
    let stem = |p: &PathBuf| {
        p.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    if let Some(exact) = paths.iter().find(|p| stem(p) == id_or_path) {
        return Ok(exact.clone());
    }
    let mut matches: Vec<&PathBuf> = if id_or_path.is_empty() {
        Vec::new()
    } else {
        paths
            .iter()
            .filter(|p| stem(p).starts_with(id_or_path))
            .collect()
    };
    match matches.len() {
        0 => Err(SessionError::Unknown {
            id: id_or_path.to_string(),
            dir: dir.to_path_buf(),
        }),
        1 => Ok(matches.remove(0).clone()),
        _ => Err(SessionError::Ambiguous {
            prefix: id_or_path.to_string(),
            matches: matches.into_iter().map(stem).collect(),
        }),
    }
}

/// The `type` and time of any event line; the rest is skipped unread.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(default)]
    t: u64,
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
}

/// The fields read of the events that matter here.
#[derive(Deserialize)]
struct Fields<'a> {
    #[serde(default, borrow)]
    call_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    task_id: Option<Cow<'a, str>>,
    #[serde(default)]
    agent: Option<AgentRef>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    spent: Option<Spent>,
}

/// What one pass over the events finds.
#[derive(Default)]
struct Tally {
    events: u64,
    last_t: u64,
    first_message: Option<String>,
    agents: Vec<String>,
    /// Task id of every call that is a task.
    tasks: HashMap<String, String>,
    /// Calls running now, with the order they (re)started in.
    running: HashMap<String, u64>,
    starts: u64,
    spent: Option<Spent>,
}

impl Tally {
    fn line(&mut self, body: &[u8]) -> bool {
        let Ok(line) = serde_json::from_slice::<Line>(body) else {
            return false;
        };
        self.events += 1;
        self.last_t = line.t;
        let kind = line.kind.as_ref();
        if !matches!(
            kind,
            "user_message"
                | "subagent_started"
                | "subagent_followup"
                | "subagent_backgrounded"
                | "subagent_finished"
                | "subagent_interrupted"
                | "session_spend"
        ) {
            return true;
        }
        let Ok(fields) = serde_json::from_slice::<Fields>(body) else {
            return true;
        };
        let call = fields.call_id.as_deref();
        match kind {
            "user_message" if self.first_message.is_none() => {
                self.first_message = fields.text.as_deref().map(one_line);
            }
            "subagent_started" => {
                if let Some(agent) = &fields.agent
                    && !self.agents.iter().any(|a| a == agent.name())
                {
                    self.agents.push(agent.name().to_string());
                }
                if let (Some(call), Some(task)) = (call, fields.task_id) {
                    self.tasks.insert(call.to_string(), task.into_owned());
                    self.start(call);
                }
            }
            // A call that went on in the background is a task, running.
            "subagent_backgrounded" => {
                if let (Some(call), Some(task)) = (call, fields.task_id) {
                    self.tasks.insert(call.to_string(), task.into_owned());
                    self.start(call);
                }
            }
            "subagent_followup" => {
                if let Some(call) = call
                    && self.tasks.contains_key(call)
                {
                    self.start(call);
                }
            }
            "session_spend" => self.spent = fields.spent.or(self.spent),
            "subagent_finished" | "subagent_interrupted" => {
                if let Some(call) = call {
                    self.running.remove(call);
                }
            }
            _ => {}
        }
        true
    }

    fn start(&mut self, call: &str) {
        self.starts += 1;
        self.running.insert(call.to_string(), self.starts);
    }

    fn running_tasks(&self) -> Vec<String> {
        let mut running: Vec<(&u64, &String)> = self
            .running
            .iter()
            .filter_map(|(call, n)| Some((n, self.tasks.get(call)?)))
            .collect();
        running.sort();
        running.into_iter().map(|(_, task)| task.clone()).collect()
    }
}

/// `text` on one line: white space runs made one space, cut to
/// [`FIRST_MESSAGE_CHARS`].
fn one_line(text: &str) -> String {
    let mut out = String::new();
    let mut chars = 0;
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
            chars += 1;
        }
        for c in word.chars() {
            if chars == FIRST_MESSAGE_CHARS {
                out.pop();
                out.push('…');
                return out;
            }
            out.push(c);
            chars += 1;
        }
    }
    out
}

/// Reads one line into `buf` (its newline dropped), at most `max` bytes
/// of it; the rest of a longer line is skipped. Returns whether a line was
/// there, whether it ended in a newline, and whether it was cut.
fn read_line(
    input: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max: u64,
) -> std::io::Result<Option<(bool, bool)>> {
    let Some(line) = lines::read_line(input, buf, max)? else {
        return Ok(None);
    };
    if line.too_long {
        return Ok(Some((lines::skip_rest(input)?, true)));
    }
    if line.complete {
        buf.pop();
    }
    Ok(Some((line.complete, false)))
}

/// Reads one transcript for its listing.
pub fn scan(path: &Path) -> Result<SessionInfo, ScanError> {
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    let mut input = std::io::BufReader::with_capacity(256 * 1024, file);
    let mut buf = Vec::with_capacity(4096);
    let header = match read_line(&mut input, &mut buf, MAX_HEADER_LINE)? {
        None => return Err(ScanError::Empty),
        Some((_, true)) => {
            return Err(ScanError::NotTranscript(
                "line 1 is far too long for a header".into(),
            ));
        }
        Some(_) => parse_header(&buf)?,
    };
    let max_line = crate::confine::limits::MAX_TRANSCRIPT_LINE;
    let mut tally = Tally::default();
    while let Some((_, cut)) = read_line(&mut input, &mut buf, max_line)? {
        if cut {
            // Too long to read: an event all the same.
            tally.events += 1;
            continue;
        }
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        // A line that does not parse (the last one cut short by a crash)
        // is not counted.
        tally.line(&buf);
    }
    let started = humantime::parse_rfc3339_weak(&header.started_at)
        .ok()
        .or_else(|| meta.modified().ok())
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let id = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(SessionInfo {
        id,
        path: path.to_path_buf(),
        cwd: header.cwd,
        started,
        last_event: started + Duration::from_millis(tally.last_t),
        running_tasks: tally.running_tasks(),
        first_message: tally.first_message,
        agents: tally.agents,
        spent: tally.spent,
        events: tally.events,
        bytes: meta.len(),
        open_in: open_in(path),
        version: header.version,
        quorum_version: header.quorum_version,
    })
}

fn parse_header(line: &[u8]) -> Result<Header, ScanError> {
    let not = |reason: String| ScanError::NotTranscript(reason);
    let value: serde_json::Value =
        serde_json::from_slice(line).map_err(|e| not(format!("line 1 is not JSON: {e}")))?;
    match value.get("format").and_then(|f| f.as_str()) {
        Some(FORMAT) => {}
        Some(other) => return Err(not(format!("line 1 has format {other:?}, not {FORMAT:?}"))),
        None => return Err(not(format!("line 1 has no \"format\": {FORMAT:?}"))),
    }
    serde_json::from_value(value).map_err(|e| not(format!("bad header on line 1: {e}")))
}

/// The lock file of a transcript: `<transcript>.lock`.
pub fn lock_path(transcript: &Path) -> PathBuf {
    let mut name = transcript.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// The PID in a transcript's lock file, when a process holds its lock (a
/// lock file nobody holds is stale: `None`).
pub fn open_in(transcript: &Path) -> Option<u32> {
    let mut file = std::fs::File::open(lock_path(transcript)).ok()?;
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            None
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = file.by_ref().take(64).read_to_string(&mut text);
            Some(text.trim().parse().unwrap_or(0))
        }
        Err(std::fs::TryLockError::Error(_)) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, Stamped, build};

    fn header(cwd: &str) -> String {
        format!(
            r#"{{"format":"quorum-transcript","version":2,"quorum_version":"0.1.0","cwd":"{cwd}","started_at":"2026-12-01T18:00:54Z","terminal":{{"cols":80,"rows":24}}}}"#
        )
    }

    fn write(dir: &Path, id: &str, cwd: &str, events: &[(u64, Event)]) -> PathBuf {
        let mut text = header(cwd);
        text.push('\n');
        for (t, e) in events {
            text.push_str(&serde_json::to_string(&Stamped::new(*t, e.clone())).unwrap());
            text.push('\n');
        }
        let path = dir.join(format!("{id}.jsonl"));
        std::fs::write(&path, text).unwrap();
        path
    }

    fn ids(dir: &Path) -> [PathBuf; 3] {
        [
            write(dir, "2026-12-01T18-00-54Z-1234", "/a", &[]),
            write(dir, "2026-12-01T18-00-54Z-1299", "/a", &[]),
            write(dir, "2026-12-02T09-10-00Z-77", "/b", &[]),
        ]
    }

    #[test]
    fn a_listing_reads_again_only_what_changed_since_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let message = |text: &str| Event::UserMessage { text: text.into() };
        let a = write(dir.path(), "a", "/a", &[(5, message("first"))]);
        write(dir.path(), "b", "/b", &[]);
        let first = list(dir.path()).unwrap().sessions;
        assert!(dir.path().join(index::FILE).is_file(), "the index is kept");
        // Unchanged: the same listing, from the index.
        assert_eq!(list(dir.path()).unwrap().sessions, first);
        // A session that went on is read again; one removed is gone.
        write(
            dir.path(),
            "a",
            "/a",
            &[(5, message("first")), (9000, message("more"))],
        );
        std::fs::remove_file(dir.path().join("b.jsonl")).unwrap();
        let again = list(dir.path()).unwrap().sessions;
        assert_eq!(again.len(), 1);
        assert_eq!((again[0].path.clone(), again[0].events), (a, 2));
        assert_eq!(again, scan_all(dir.path()));
        // A broken index is no index.
        std::fs::write(dir.path().join(index::FILE), "not json").unwrap();
        assert_eq!(list(dir.path()).unwrap().sessions, again);
    }

    /// Every transcript of `dir` read afresh, newest first.
    fn scan_all(dir: &Path) -> Vec<SessionInfo> {
        let mut all: Vec<SessionInfo> = transcripts(dir)
            .unwrap()
            .iter()
            .map(|p| scan(p).unwrap())
            .collect();
        all.sort_by(|a, b| (b.last_event, &b.id).cmp(&(a.last_event, &a.id)));
        all
    }

    #[test]
    fn find_an_exact_id() {
        let dir = tempfile::tempdir().unwrap();
        let [a, _, _] = ids(dir.path());
        assert_eq!(find(dir.path(), "2026-12-01T18-00-54Z-1234").unwrap(), a);
    }

    #[test]
    fn find_an_exact_id_that_prefixes_another() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "s-1", "/a", &[]);
        write(dir.path(), "s-12", "/a", &[]);
        assert_eq!(find(dir.path(), "s-1").unwrap(), a);
    }

    #[test]
    fn find_a_unique_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let [_, _, c] = ids(dir.path());
        assert_eq!(find(dir.path(), "2026-12-02").unwrap(), c);
    }

    #[test]
    fn an_ambiguous_prefix_lists_its_matches() {
        let dir = tempfile::tempdir().unwrap();
        ids(dir.path());
        let e = find(dir.path(), "2026-12-01T18").unwrap_err();
        assert!(matches!(&e, SessionError::Ambiguous { matches, .. } if matches.len() == 2));
        let text = e.to_string();
        assert!(text.contains("ambiguous"), "{text}");
        assert!(text.contains("2026-12-01T18-00-54Z-1234"), "{text}");
        assert!(text.contains("2026-12-01T18-00-54Z-1299"), "{text}");
    }

    #[test]
    fn an_unknown_id_is_named_with_how_to_list_ids() {
        let dir = tempfile::tempdir().unwrap();
        ids(dir.path());
        let text = find(dir.path(), "nope").unwrap_err().to_string();
        assert!(text.contains("\"nope\""), "{text}");
        assert!(text.contains("quorum sessions"), "{text}");
        // No sessions directory yet: the same error.
        let missing = dir.path().join("missing");
        assert!(matches!(
            find(&missing, "x"),
            Err(SessionError::Unknown { .. })
        ));
        assert!(matches!(
            find(dir.path(), ""),
            Err(SessionError::Unknown { .. })
        ));
    }

    #[test]
    fn a_path_is_used_as_is() {
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let path = write(other.path(), "elsewhere", "/x", &[]);
        let given = path.to_str().unwrap();
        assert_eq!(find(dir.path(), given).unwrap(), path);
        let gone = other.path().join("gone.jsonl");
        let e = find(dir.path(), gone.to_str().unwrap()).unwrap_err();
        assert!(matches!(e, SessionError::NoSuchFile { .. }), "{e}");
    }

    #[test]
    fn a_scan_reads_what_a_listing_shows() {
        let dir = tempfile::tempdir().unwrap();
        let claude = || AgentRef::Acp("claude".into());
        let path = write(
            dir.path(),
            "s",
            "/a",
            &[
                (
                    0,
                    Event::UserMessage {
                        text: "  fix\nthe   bug\t now ".into(),
                    },
                ),
                (
                    5,
                    Event::UserMessage {
                        text: "later".into(),
                    },
                ),
                (10, build::started("c1", claude()).background("t1").event()),
                (
                    11,
                    build::started("c2", AgentRef::Internal)
                        .background("t2")
                        .event(),
                ),
                (12, build::started("c3", claude()).event()),
                (
                    13,
                    build::started("c4", AgentRef::Acp("gemini".into()))
                        .background("t4")
                        .event(),
                ),
                (20, build::finished("c1", "done").event()),
                (21, build::finished("c3", "done").event()),
                (25, build::followup("c1", "more")),
                (30, build::finished("c4", "done").event()),
                (31, build::followup("c3", "not a task")),
                // A call that went on in the background is a running task.
                (32, build::started("c5", claude()).event()),
                (33, build::backgrounded("c5", "t5")),
                (
                    61_000,
                    Event::Notice {
                        level: Default::default(),
                        text: "n".into(),
                    },
                ),
            ],
        );
        let info = scan(&path).unwrap();
        assert_eq!(info.id, "s");
        assert_eq!(info.cwd, "/a");
        assert_eq!(info.first_message.as_deref(), Some("fix the bug now"));
        assert_eq!(info.agents, ["claude", "internal", "gemini"]);
        assert_eq!(info.running_tasks, ["t2", "t1", "t5"]);
        assert_eq!(info.events, 14);
        assert_eq!(info.started_at(), "2026-12-01T18:00:54Z");
        assert_eq!(info.last_event_at(), "2026-12-01T18:01:55Z");
        assert_eq!(info.bytes, std::fs::metadata(&path).unwrap().len());
        assert_eq!(info.open_in, None);
    }

    #[test]
    fn an_interrupted_call_no_longer_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "s",
            "/a",
            &[(
                1,
                build::started("c1", AgentRef::Internal)
                    .background("t1")
                    .event(),
            )],
        );
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"t\":2,\"type\":\"subagent_interrupted\",\"call_id\":\"c1\"}\n");
        // A last line cut short is not counted.
        text.push_str("{\"t\":3,\"type\":\"user_mes");
        std::fs::write(&path, text).unwrap();
        let info = scan(&path).unwrap();
        assert!(info.running_tasks.is_empty());
        assert_eq!(info.events, 2);
        assert_eq!(info.last_event_at(), "2026-12-01T18:00:54Z");
    }

    #[test]
    fn ages_for_a_person() {
        let now = humantime::parse_rfc3339("2026-12-31T12:00:00Z").unwrap();
        let before = |s| now - Duration::from_secs(s);
        assert_eq!(ago(before(3), now), "just now");
        assert_eq!(ago(now + Duration::from_secs(5), now), "just now");
        assert_eq!(ago(before(42), now), "42s ago");
        assert_eq!(ago(before(5 * 60 + 9), now), "5m ago");
        assert_eq!(ago(before(3 * 3600), now), "3h ago");
        assert_eq!(ago(before(6 * 86_400), now), "6d ago");
        assert_eq!(ago(before(40 * 86_400), now), "2026-11-21");
    }

    #[test]
    fn a_long_first_message_is_clipped() {
        let long = "word ".repeat(100);
        let line = one_line(&long);
        assert_eq!(line.chars().count(), FIRST_MESSAGE_CHARS);
        assert!(line.ends_with('…'));
        assert_eq!(one_line("short"), "short");
    }

    #[test]
    fn other_files_are_skipped_and_said_why() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "good", "/a", &[]);
        std::fs::write(dir.path().join("empty.jsonl"), "").unwrap();
        std::fs::write(dir.path().join("notes.jsonl"), "{\"hello\":1}\n").unwrap();
        std::fs::write(dir.path().join("bin.jsonl"), [0xff, 0xfe, 0, 1]).unwrap();
        std::fs::write(
            dir.path().join("other.jsonl"),
            "{\"format\":\"other\",\"version\":1}\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("readme.txt"), "not listed").unwrap();
        let listing = list(dir.path()).unwrap();
        assert_eq!(listing.sessions.len(), 1);
        let skipped: Vec<String> = listing.skipped.iter().map(|s| s.to_string()).collect();
        assert_eq!(skipped.len(), 4, "{skipped:?}");
        assert!(
            skipped
                .iter()
                .any(|s| s.contains("empty.jsonl") && s.contains("empty file"))
        );
        assert!(
            skipped
                .iter()
                .any(|s| s.contains("other.jsonl") && s.contains("\"other\""))
        );
        assert!(
            list(&dir.path().join("missing"))
                .unwrap()
                .sessions
                .is_empty()
        );
    }

    #[test]
    fn newest_first_and_newest_for_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let notice = |text: &str| Event::Notice {
            level: Default::default(),
            text: text.into(),
        };
        write(dir.path(), "old-a", "/a", &[(1_000, notice("x"))]);
        write(dir.path(), "new-a", "/a", &[(9_000, notice("x"))]);
        write(dir.path(), "newest-b", "/b", &[(20_000, notice("x"))]);
        let listing = list(dir.path()).unwrap();
        let order: Vec<&str> = listing.sessions.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(order, ["newest-b", "new-a", "old-a"]);
        let newest = newest_for(dir.path(), Path::new("/a")).unwrap();
        assert_eq!(newest, dir.path().join("new-a.jsonl"));
        assert!(newest_for(dir.path(), Path::new("/c")).is_none());
    }

    /// What a listing shows first for `cwd`, read the long way.
    fn listed_first(dir: &Path, cwd: &Path) -> Option<PathBuf> {
        let listing = list(dir).unwrap().in_dir(cwd);
        listing.sessions.into_iter().next().map(|s| s.path)
    }

    #[test]
    fn the_newest_session_is_the_one_a_listing_shows_first() {
        let dir = tempfile::tempdir().unwrap();
        let event = |t: u64| {
            serde_json::to_string(&Stamped::new(t, build::chunk("c1", "some text"))).unwrap()
        };
        // Each file: the header for /a, then `body`; `t` of the last event
        // line that parses is what orders them.
        let files: [(&str, String); 8] = [
            ("plain", format!("{}\n{}\n", event(10), event(5_000))),
            // A last line cut short by a crash does not count.
            (
                "cut",
                format!("{}\n{{\"t\":9000000,\"type\":\"no", event(6_000)),
            ),
            // Blank and white-space lines, and a line that is not an event.
            ("blank", format!("{}\n\n  \t\n[1,2]\n\n", event(7_000))),
            // A line that is not JSON in the middle, a good one after it.
            ("middle", format!("not json\n{}\n", event(4_000))),
            // No newline after the last event.
            ("no-newline", event(3_000)),
            // Only a header; only a header without its newline.
            ("header-only", String::new()),
            (
                "lines-without-t",
                "{\"type\":\"turn_started\"}\n".to_string(),
            ),
            // Events far from the end behind a long tail of lines that
            // do not parse: read back further than one window.
            (
                "long-tail",
                format!("{}\n{}", event(8_000), "nope\n".repeat(40_000)),
            ),
        ];
        for (id, body) in &files {
            std::fs::write(
                dir.path().join(format!("{id}.jsonl")),
                format!("{}\n{body}", header("/a")),
            )
            .unwrap();
        }
        std::fs::write(dir.path().join("bare.jsonl"), header("/a")).unwrap();
        write(
            dir.path(),
            "elsewhere",
            "/b",
            &[(99_000, build::chunk("c", "x"))],
        );
        std::fs::write(dir.path().join("empty.jsonl"), "").unwrap();
        let a = Path::new("/a");
        assert_eq!(newest_for(dir.path(), a), listed_first(dir.path(), a));
        assert_eq!(
            newest_for(dir.path(), a).unwrap(),
            dir.path().join("long-tail.jsonl")
        );
        // Each file alone: its last event's time, as the listing has it.
        let listing = list(dir.path()).unwrap();
        for info in &listing.sessions {
            let canonical = Path::new(&info.cwd).canonicalize().ok();
            let fast = last_event_in(&info.path, Path::new(&info.cwd), canonical.as_deref());
            assert_eq!(fast.unwrap(), Some(info.last_event), "{}", info.id);
        }
        // One by one, each file the newest of its directory.
        for (id, _) in &files {
            let alone = tempfile::tempdir().unwrap();
            let from = dir.path().join(format!("{id}.jsonl"));
            std::fs::copy(&from, alone.path().join(format!("{id}.jsonl"))).unwrap();
            write(alone.path(), "other", "/a", &[(1, build::chunk("c", "x"))]);
            assert_eq!(
                newest_for(alone.path(), a),
                listed_first(alone.path(), a),
                "{id}"
            );
        }
    }

    #[test]
    fn the_newest_of_real_recorded_sessions_is_the_one_a_listing_shows_first() {
        let dir = tempfile::tempdir().unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let recorded = [
            "assets/demo.jsonl",
            "tests/fixtures/batch.jsonl",
            "tests/fixtures/colours.jsonl",
            "tests/fixtures/quorum.jsonl",
            "tests/fixtures/wide.jsonl",
            "tests/fixtures/demo_v1.jsonl",
        ];
        for file in recorded {
            let to = dir.path().join(Path::new(file).file_name().unwrap());
            std::fs::copy(root.join(file), &to).unwrap();
        }
        let listing = list(dir.path()).unwrap();
        assert_eq!(
            listing.sessions.len(),
            recorded.len(),
            "{:?}",
            listing.skipped
        );
        for info in &listing.sessions {
            let cwd = Path::new(&info.cwd);
            assert_eq!(
                newest_for(dir.path(), cwd),
                listed_first(dir.path(), cwd),
                "{}",
                info.id
            );
            let fast = last_event_in(&info.path, cwd, cwd.canonicalize().ok().as_deref());
            assert_eq!(fast.unwrap(), Some(info.last_event), "{}", info.id);
        }
    }

    #[test]
    fn a_held_lock_says_which_process_has_it_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "s", "/a", &[]);
        let lock = lock_path(&path);
        assert_eq!(lock, dir.path().join("s.jsonl.lock"));
        std::fs::write(&lock, "4242\n").unwrap();
        // A lock file nobody holds is stale.
        assert_eq!(open_in(&path), None);
        let held = std::fs::OpenOptions::new().write(true).open(&lock).unwrap();
        held.try_lock().unwrap();
        assert_eq!(open_in(&path), Some(4242));
        assert_eq!(scan(&path).unwrap().open_in, Some(4242));
        held.unlock().unwrap();
        assert_eq!(open_in(&path), None);
    }

    #[test]
    fn a_hundred_thousand_events_list_fast() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.jsonl");
        let mut text = header("/a");
        text.push('\n');
        for i in 0..100_000u64 {
            let e = match i % 4 {
                0 => build::chunk("c1", "some streamed text of a sub-agent, a line or so"),
                1 => build::started(format!("c{i}"), AgentRef::Acp("claude".into()))
                    .input("review this please")
                    .event(),
                2 => build::finished(format!("c{}", i - 1), "a report").event(),
                _ => Event::AssistantDelta {
                    text: "hello there".into(),
                },
            };
            text.push_str(&serde_json::to_string(&Stamped::new(i, e)).unwrap());
            text.push('\n');
        }
        std::fs::write(&path, text).unwrap();
        let start = std::time::Instant::now();
        let info = scan(&path).unwrap();
        let took = start.elapsed();
        assert_eq!(info.events, 100_000);
        // Generous for a debug build on a busy machine; a release build
        // takes a few tens of milliseconds.
        eprintln!("scanned 100k events in {took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
    }
}
