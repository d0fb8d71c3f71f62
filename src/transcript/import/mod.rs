//! Importers: session logs that other tools recorded, turned into quorum
//! transcripts that replay through the same screen.
//!
//! - `claude`: a Claude Code session log,
//!   `~/.claude/projects/<dir>/<session>.jsonl`; each sub-agent (an `Agent`
//!   or `Task` tool call) is read from `<session>/subagents/agent-<id>.jsonl`.
//! - `codex`: a Codex rollout, `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`;
//!   each sub-agent (`spawn_agent`) is read from its own rollout, found
//!   beside it or elsewhere under the same `sessions/` directory.
//!
//! A sub-agent becomes a box with its tool calls and its final report; a
//! report that starts with a severity header (`<!-- severity: red -->`) is
//! taken as a code review, and its verdict tints the box. The task board's
//! snapshots (`task_progress`) are made by running the events through the
//! same [`Board`] the engine uses.
//!
//! Record types an importer does not know are counted and reported, never
//! fatal. A line that is not JSON is an error naming its file and line,
//! except a last line cut short (the tool was still writing, or was
//! killed): that one is skipped with a warning, as quorum's own transcript
//! reader does.

mod claude;
mod codex;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use serde_json::Value;

use super::{FORMAT, Header, TerminalSize, VERSION};
use crate::event::{
    Activity, AgentRef, Event, NoticeLevel, Stamped, StopReason, ToolContent, ToolDetail,
    ToolStatus, build,
};
use crate::runtime::board::Board;
use crate::subagent::severity::Verdict;

/// Tool output kept in a box's detail, in characters.
const MAX_OUTPUT: usize = 4000;

/// The tool that wrote a session log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Tool {
    /// Claude Code: ~/.claude/projects/<dir>/<session>.jsonl
    Claude,
    /// Codex: $CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl
    Codex,
}

/// Why a session log cannot be imported. Each names the file, and the
/// line and field where there is one.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: empty file, no records to import")]
    Empty { path: PathBuf },
    #[error("{path}:{line}: not UTF-8 text (byte {column} of the line)")]
    NotUtf8 {
        path: PathBuf,
        line: usize,
        column: usize,
    },
    #[error("{path}:{line}: not JSON: {reason}")]
    NotJson {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("{path}:{line}: bad {field:?}: {reason}")]
    BadRecord {
        path: PathBuf,
        line: usize,
        field: String,
        reason: String,
    },
}

/// One JSON object of a session log, with its line number.
#[derive(Debug)]
pub(crate) struct Record {
    pub line: usize,
    pub value: Value,
}

impl Record {
    /// The record's `type`; a record without one is counted in `skipped`
    /// and gives `None`.
    fn kind<'a>(
        &'a self,
        path: &Path,
        skipped: &mut Skipped,
    ) -> Result<Option<&'a str>, ImportError> {
        let kind = self.str_field(path, "type")?;
        if kind.is_none() {
            skipped.add("(no type)");
        }
        Ok(kind)
    }

    /// A field that must be a string (`None` when absent).
    fn str_field<'a>(&'a self, path: &Path, field: &str) -> Result<Option<&'a str>, ImportError> {
        match self.value.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.bad(
                path,
                field,
                format!("expected a string, found {}", kind(other)),
            )),
        }
    }

    fn bad(&self, path: &Path, field: &str, reason: String) -> ImportError {
        ImportError::BadRecord {
            path: path.to_path_buf(),
            line: self.line,
            field: field.to_string(),
            reason,
        }
    }

    /// The record's time (`timestamp`, RFC 3339), in ms since the epoch.
    fn time(&self) -> Option<u64> {
        self.value
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(parse_time)
    }
}

/// The JSON kind of `v`, for messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// An RFC 3339 time in ms since the epoch.
fn parse_time(s: &str) -> Option<u64> {
    let time = humantime::parse_rfc3339(s)
        .or_else(|_| humantime::parse_rfc3339_weak(s))
        .ok()?;
    Some(time.duration_since(UNIX_EPOCH).ok()?.as_millis() as u64)
}

/// A session log's records, and a warning if its last line was cut short.
pub(crate) fn read_records(path: &Path) -> Result<(Vec<Record>, Option<String>), ImportError> {
    let bytes = std::fs::read(path).map_err(|source| ImportError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut records = Vec::new();
    let mut warning = None;
    let mut lines = bytes.split(|b| *b == b'\n').enumerate().peekable();
    while let Some((i, raw)) = lines.next() {
        let line = i + 1;
        // The piece after the last newline: empty, or a line cut short.
        let last = lines.peek().is_none();
        let text = match std::str::from_utf8(raw) {
            Ok(text) => text,
            Err(_) if last => {
                warning = Some(cut(path, line));
                break;
            }
            Err(e) => {
                return Err(ImportError::NotUtf8 {
                    path: path.to_path_buf(),
                    line,
                    column: e.valid_up_to() + 1,
                });
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(text) {
            Ok(value @ Value::Object(_)) => records.push(Record { line, value }),
            Ok(other) => {
                return Err(ImportError::BadRecord {
                    path: path.to_path_buf(),
                    line,
                    field: "(record)".into(),
                    reason: format!("expected a JSON object, found {}", kind(&other)),
                });
            }
            Err(_) if last => warning = Some(cut(path, line)),
            Err(e) => {
                return Err(ImportError::NotJson {
                    path: path.to_path_buf(),
                    line,
                    reason: e.to_string(),
                });
            }
        }
    }
    if records.is_empty() {
        return Err(ImportError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok((records, warning))
}

fn cut(path: &Path, line: usize) -> String {
    format!(
        "{}:{line}: last line is cut short (file still being written?); imported the records before it",
        path.display()
    )
}

/// Record types skipped because the importer does not know them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Skipped(BTreeMap<String, usize>);

impl Skipped {
    pub fn add(&mut self, name: &str) {
        *self.0.entry(name.to_string()).or_default() += 1;
    }

    /// How many records were skipped, of each type.
    pub fn counts(&self) -> &BTreeMap<String, usize> {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `skipped 3 records of 2 unknown types: foo (2), bar (1)`, most
    /// frequent first; `None` when nothing was skipped.
    pub fn report(&self) -> Option<String> {
        if self.0.is_empty() {
            return None;
        }
        let total: usize = self.0.values().sum();
        let mut types: Vec<(&String, &usize)> = self.0.iter().collect();
        types.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let list: Vec<String> = types
            .iter()
            .map(|(name, n)| format!("{} ({n})", crate::confine::sanitize::sanitize(name)))
            .collect();
        Some(format!(
            "skipped {total} record{} of {} unknown type{}: {}",
            plural(total),
            types.len(),
            plural(types.len()),
            list.join(", ")
        ))
    }
}

pub(crate) fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A session log imported.
#[derive(Debug, Clone)]
pub struct Imported {
    pub header: Header,
    pub events: Vec<Stamped>,
    pub skipped: Skipped,
    /// What could not be imported whole (a cut last line, a sub-agent log
    /// not found), one sentence each.
    pub warnings: Vec<String>,
    /// The files read: the session log and its sub-agents' logs.
    pub files: usize,
}

/// Imports the session log at `path`, written by `tool`.
pub fn import(tool: Tool, path: &Path) -> Result<Imported, ImportError> {
    let parts = match tool {
        Tool::Claude => read::<claude::Import>(path)?,
        Tool::Codex => read::<codex::Import>(path)?,
    };
    Ok(parts.finish())
}

/// One importer's reading of a session log: made once the log is read,
/// told its records one by one, then finished into the parts it found.
pub(crate) trait Reader<'a>: Sized {
    /// A reader of the log at `path`, whose `records` are all there;
    /// `parts` already counts the log and holds its cut-line warning.
    fn new(path: &'a Path, records: &[Record], parts: Parts) -> Self;
    fn record(&mut self, r: &Record) -> Result<(), ImportError>;
    fn finish(self) -> Result<Parts, ImportError>;
}

/// Reads the session log at `path` with an `R`.
fn read<'a, R: Reader<'a>>(path: &'a Path) -> Result<Parts, ImportError> {
    let (records, cut) = read_records(path)?;
    let parts = Parts {
        files: 1,
        warnings: cut.into_iter().collect(),
        ..Parts::default()
    };
    let mut reader = R::new(path, &records, parts);
    for record in &records {
        reader.record(record)?;
    }
    reader.finish()
}

/// What an importer found: its streams of timed events, before they are
/// merged and stamped.
#[derive(Debug, Default)]
pub(crate) struct Parts {
    pub cwd: Option<String>,
    pub model: Option<String>,
    /// The main conversation.
    pub main: Stream,
    /// One stream per sub-agent, from its `subagent_started` on.
    pub subagents: Vec<Stream>,
    pub skipped: Skipped,
    pub warnings: Vec<String>,
    pub files: usize,
}

/// Events with their times (ms since the epoch), in the order they
/// happened in one log.
#[derive(Debug, Default)]
pub(crate) struct Stream {
    events: Vec<(u64, Event)>,
    /// The time of the last event: a record without a time, or with one
    /// earlier than the record before, keeps the order of the log.
    last: u64,
}

impl Stream {
    /// Appends `event` at `time` (or at the last time, if none or earlier).
    pub fn push(&mut self, time: Option<u64>, event: Event) {
        let t = time.unwrap_or(self.last).max(self.last);
        self.last = t;
        self.events.push((t, event));
    }

    pub fn last(&self) -> u64 {
        self.last
    }

    /// The assistant's `text`, a whole message, unless it is blank.
    pub fn assistant(&mut self, time: Option<u64>, text: &str) {
        if !text.trim().is_empty() {
            self.push(time, Event::AssistantDelta { text: clean(text) });
            self.push(time, Event::AssistantEnd);
        }
    }
}

impl Parts {
    /// The records of a sub-agent's log at `path`, counted among the files
    /// read, with a warning if its last line was cut short.
    pub fn read_log(&mut self, path: &Path) -> Result<Vec<Record>, ImportError> {
        self.files += 1;
        let (records, cut) = read_records(path)?;
        self.warnings.extend(cut);
        Ok(records)
    }
    /// Merges the streams by time (ties: the main conversation first),
    /// stamps them from the first, and adds the task board's snapshots.
    fn finish(self) -> Imported {
        let origin = std::iter::once(&self.main)
            .chain(&self.subagents)
            .filter_map(|s| s.events.first().map(|(t, _)| *t))
            .min()
            .unwrap_or(0);
        let mut streams: Vec<std::iter::Peekable<std::vec::IntoIter<(u64, Event)>>> =
            std::iter::once(self.main)
                .chain(self.subagents)
                .map(|s| s.events.into_iter().peekable())
                .collect();
        let mut board = Board::new();
        let mut events = vec![Stamped::new(
            0,
            Event::SessionInfo {
                model: self.model.as_deref().map(clean),
                agents: Vec::new(),
            },
        )];
        loop {
            let next = streams
                .iter_mut()
                .enumerate()
                .filter_map(|(i, s)| s.peek().map(|(t, _)| (*t, i)))
                .min();
            let Some((_, i)) = next else { break };
            let Some((t, event)) = streams[i].next() else {
                break;
            };
            let stamped = Stamped::new(t.saturating_sub(origin), event);
            let snapshot = board.observe(&stamped);
            let t = stamped.t;
            events.push(stamped);
            events.extend(snapshot.map(|s| Stamped::new(t, s)));
        }
        let started = UNIX_EPOCH + Duration::from_millis(origin);
        let header = Header {
            format: FORMAT.to_string(),
            version: VERSION,
            quorum_version: env!("CARGO_PKG_VERSION").to_string(),
            cwd: self.cwd.as_deref().map(clean).unwrap_or_default(),
            started_at: humantime::format_rfc3339_seconds(started).to_string(),
            terminal: TerminalSize {
                cols: 120,
                rows: 40,
            },
        };
        Imported {
            header,
            events,
            skipped: self.skipped,
            warnings: self.warnings,
            files: self.files,
        }
    }
}

/// One sub-agent call's stream, from its `subagent_started` on: its box,
/// what it did, and its end.
#[derive(Debug)]
pub(crate) struct Subagent {
    stream: Stream,
    call_id: String,
    agent: AgentRef,
}

impl Subagent {
    /// Call `call_id` (cleaned) on `agent` starts at `time`, asked
    /// `input`.
    pub fn start(
        time: Option<u64>,
        call_id: &str,
        agent: AgentRef,
        input: String,
        code_review: bool,
    ) -> Self {
        let call_id = clean(call_id);
        let mut stream = Stream::default();
        stream.push(
            time,
            build::started(call_id.clone(), agent.clone())
                .input(input)
                .code_review(code_review)
                .event(),
        );
        Self {
            stream,
            call_id,
            agent,
        }
    }

    /// What the sub-agent did, as its own log tells.
    pub fn activity(&mut self, activity: Vec<(Option<u64>, Activity)>) {
        for (time, activity) in activity {
            self.stream
                .push(time, build::activity(self.call_id.clone(), activity));
        }
    }

    /// Ends the stream: its `subagent_finished` with the report's body,
    /// preceded by a notice when a review's severity header has a value
    /// quorum does not know (as the engine does).
    pub fn finish(
        &mut self,
        time: Option<u64>,
        verdict: Verdict<'_>,
        code_review: bool,
        stop_reason: StopReason,
    ) {
        if code_review && let Some(value) = verdict.unknown {
            self.stream.push(
                time,
                Event::Notice {
                    level: NoticeLevel::Warning,
                    text: clean(&format!(
                        "{}: unknown review severity {value:?} (expected green, yellow or red); no verdict",
                        self.agent.name()
                    )),
                },
            );
        }
        self.stream.push(
            time,
            Event::SubagentFinished {
                call_id: self.call_id.clone(),
                output: clean(verdict.body),
                stop_reason,
                severity: if code_review { verdict.severity } else { None },
                // Read, not checked: the tree the log was made in is not here.
                findings: if code_review {
                    crate::subagent::findings::parse(verdict.body).findings
                } else {
                    Vec::new()
                },
            },
        );
    }

    pub fn into_stream(self) -> Stream {
        self.stream
    }
}

/// A report that starts with a severity header is a code review.
pub(crate) fn is_review(report: &str) -> bool {
    let v = crate::subagent::severity::parse(report);
    v.severity.is_some() || v.unknown.is_some()
}

/// A call of the main conversation's to a tool other than a sub-agent:
/// the tool's name, and its main argument as the summary.
pub(crate) fn tool_call_started(id: &str, name: &str, input: &Value) -> Event {
    let title = tool_title(name, input);
    let name = one_line(name, 60);
    Event::ToolCallStarted {
        id: clean(id),
        summary: title
            .strip_prefix(&name)
            .unwrap_or_default()
            .trim()
            .to_string(),
        name,
    }
}

/// The result of the main conversation's tool call `id`, on one line.
pub(crate) fn tool_call_finished(id: &str, ok: bool, result: &str) -> Event {
    Event::ToolCallFinished {
        id: clean(id),
        ok,
        summary: one_line(result, 100),
    }
}

/// A sub-agent's tool call `id` to tool `name` with `input`, as box
/// activity: running, titled by its main argument, with its kind and
/// input as detail.
pub(crate) fn tool_started(id: &str, name: &str, input: &Value) -> Activity {
    Activity::ToolCall {
        id: clean(id),
        title: tool_title(name, input),
        status: ToolStatus::InProgress,
        detail: Box::new(ToolDetail {
            kind: tool_kind(name),
            raw_input: Some(crate::confine::sanitize::value(input)),
            ..ToolDetail::default()
        }),
    }
}

/// A sub-agent's tool call `id` ended, `ok` or failed, with `output`: kept
/// as box detail, cleaned and cut to [`MAX_OUTPUT`] characters.
pub(crate) fn tool_ended(id: &str, ok: bool, output: &str) -> Activity {
    let content = if output.trim().is_empty() {
        Vec::new()
    } else {
        vec![ToolContent::Text {
            text: clean(output).chars().take(MAX_OUTPUT).collect(),
        }]
    };
    Activity::ToolCallUpdate {
        id: clean(id),
        title: None,
        status: Some(if ok {
            ToolStatus::Completed
        } else {
            ToolStatus::Failed
        }),
        detail: Box::new(ToolDetail {
            content,
            ..ToolDetail::default()
        }),
    }
}

/// Text from a log made safe for a terminal.
pub(crate) fn clean(s: &str) -> String {
    crate::confine::sanitize::sanitize(s).into_owned()
}

/// The first non-blank line of `s`, cleaned, at most `max` characters.
pub(crate) fn one_line(s: &str, max: usize) -> String {
    let line = s
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let line = clean(line);
    if line.chars().count() <= max {
        return line;
    }
    let mut out: String = line.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A tool call's title: its name and its main argument (`Bash ls`,
/// `Read src/main.rs`).
pub(crate) fn tool_title(name: &str, input: &Value) -> String {
    const KEYS: [&str; 10] = [
        "command",
        "cmd",
        "file_path",
        "path",
        "pattern",
        "url",
        "query",
        "description",
        "message",
        "prompt",
    ];
    let arg = KEYS.iter().find_map(|k| match input.get(*k)? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    });
    match arg {
        Some(arg) if !arg.trim().is_empty() => one_line(&format!("{name} {}", arg.trim()), 100),
        _ => one_line(name, 100),
    }
}

/// The ACP kind of a tool, by its name in Claude Code or Codex.
pub(crate) fn tool_kind(name: &str) -> Option<String> {
    let kind = match name {
        "Bash" | "exec_command" | "shell" | "local_shell" | "write_stdin" => "execute",
        "Read" | "NotebookRead" | "view_image" => "read",
        "Edit" | "MultiEdit" | "Write" | "NotebookEdit" | "apply_patch" => "edit",
        "Grep" | "Glob" | "LS" => "search",
        "WebFetch" | "WebSearch" | "web_search" => "fetch",
        "TodoWrite" | "update_plan" => "think",
        _ => return None,
    };
    Some(kind.to_string())
}

/// Where `quorum import` writes by default: FILE's name, `.jsonl`
/// replaced by `.quorum.jsonl`, in the current directory.
pub fn default_out(file: &Path) -> PathBuf {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "session".into());
    let stem = name.strip_suffix(".jsonl").unwrap_or(&name);
    PathBuf::from(format!("{stem}.quorum.jsonl"))
}

/// Writes `imported` as a transcript: the header, then one event a line,
/// none longer than the reader's default limit (as the recorder writes
/// them: an event's longest strings cut, the cut named).
pub fn write(imported: &Imported, out: &mut impl Write) -> std::io::Result<()> {
    let max = crate::confine::limits::MAX_TRANSCRIPT_LINE;
    let mut line = Vec::new();
    super::fit::push_line(&mut line, &imported.header, max)?;
    out.write_all(&line)?;
    for event in &imported.events {
        line.clear();
        super::fit::push_line(&mut line, event, max)?;
        out.write_all(&line)?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_report_counts_types_most_frequent_first() {
        let mut s = Skipped::default();
        assert_eq!(s.report(), None);
        s.add("bar");
        s.add("foo");
        s.add("foo");
        assert_eq!(
            s.report().unwrap(),
            "skipped 3 records of 2 unknown types: foo (2), bar (1)"
        );
        let mut one = Skipped::default();
        one.add("x\u{1b}[2J");
        assert_eq!(
            one.report().unwrap(),
            "skipped 1 record of 1 unknown type: x (1)"
        );
    }

    #[test]
    fn times_are_rfc3339_with_or_without_fractions() {
        assert_eq!(parse_time("1970-01-01T00:00:01.250Z"), Some(1250));
        assert_eq!(parse_time("1970-01-01T00:00:02Z"), Some(2000));
        assert_eq!(parse_time("yesterday"), None);
    }

    #[test]
    fn one_line_cuts_by_characters_not_bytes() {
        assert_eq!(one_line("\n  ééééé\nmore", 3), "éé…");
        assert_eq!(one_line("ok", 3), "ok");
    }

    #[test]
    fn default_out_is_in_the_current_directory() {
        assert_eq!(
            default_out(Path::new("/x/y/abc.jsonl")),
            PathBuf::from("abc.quorum.jsonl")
        );
        assert_eq!(
            default_out(Path::new("log")),
            PathBuf::from("log.quorum.jsonl")
        );
    }

    #[test]
    fn a_subagent_is_its_box_its_activity_and_its_end() {
        let mut sub = Subagent::start(
            Some(5),
            "c\u{1b}[1m1",
            AgentRef::Acp("codex".into()),
            "look".into(),
            true,
        );
        sub.activity(vec![(Some(6), Activity::Notice { text: "n".into() })]);
        let report = "<!-- severity: amber -->\nHmm.";
        sub.finish(
            Some(7),
            crate::subagent::severity::parse(report),
            is_review(report),
            StopReason::EndTurn,
        );
        let events = sub.into_stream().events;
        assert_eq!(
            events[..2],
            [
                (
                    5,
                    build::started("c1", AgentRef::Acp("codex".into()))
                        .input("look")
                        .review()
                        .event()
                ),
                (
                    6,
                    build::activity("c1", Activity::Notice { text: "n".into() })
                ),
            ]
        );
        assert!(
            matches!(&events[2], (7, Event::Notice { level: NoticeLevel::Warning, text })
            if text.starts_with("codex: unknown review severity \"amber\""))
        );
        assert_eq!(events[3], (7, build::finished("c1", "Hmm.").event()));
        assert!(!is_review("Hmm."));
    }

    /// An imported review's findings are read from its report.
    #[test]
    fn an_imported_reviews_findings_are_read() {
        let mut sub = Subagent::start(
            None,
            "c1",
            AgentRef::Acp("codex".into()),
            "look".into(),
            true,
        );
        let report = "<!-- severity: red -->\nBad.\n<!-- finding: {\"file\": \"a.rs\", \"line\": 3, \"severity\": \"red\", \"title\": \"t\"} -->\nwhy";
        sub.finish(
            None,
            crate::subagent::severity::parse(report),
            is_review(report),
            StopReason::EndTurn,
        );
        let events = sub.into_stream().events;
        let Some((_, Event::SubagentFinished { findings, .. })) = events.last() else {
            panic!("{events:?}")
        };
        assert_eq!(
            (findings.len(), findings[0].place()),
            (1, "a.rs:3".to_string())
        );
    }

    #[test]
    fn tool_lines_and_tool_activity() {
        let input = serde_json::json!({"command": "ls -l"});
        assert_eq!(
            tool_call_started("t\u{7}1", "Bash", &input),
            Event::ToolCallStarted {
                id: "t1".into(),
                name: "Bash".into(),
                summary: "ls -l".into(),
            }
        );
        assert_eq!(
            tool_call_finished("t1", false, "\nno such file\nmore"),
            Event::ToolCallFinished {
                id: "t1".into(),
                ok: false,
                summary: "no such file".into(),
            }
        );
        assert!(matches!(tool_started("t1", "Bash", &input),
            Activity::ToolCall { title, status: ToolStatus::InProgress, detail, .. }
            if title == "Bash ls -l" && detail.kind.as_deref() == Some("execute")
                && detail.raw_input == Some(input.clone())));
        let long = "x".repeat(MAX_OUTPUT + 10);
        let Activity::ToolCallUpdate { status, detail, .. } = tool_ended("t1", true, &long) else {
            panic!()
        };
        assert_eq!(status, Some(ToolStatus::Completed));
        assert!(matches!(&detail.content[..],
            [ToolContent::Text { text }] if text.chars().count() == MAX_OUTPUT));
        let Activity::ToolCallUpdate { status, detail, .. } = tool_ended("t1", false, " \n") else {
            panic!()
        };
        assert_eq!(status, Some(ToolStatus::Failed));
        assert!(detail.is_empty(), "blank output is no detail");
    }

    #[test]
    fn a_stream_keeps_log_order_when_times_go_back() {
        let mut s = Stream::default();
        s.push(Some(10), Event::AssistantEnd);
        s.push(Some(5), Event::AssistantEnd);
        s.push(None, Event::AssistantEnd);
        let times: Vec<u64> = s.events.iter().map(|(t, _)| *t).collect();
        assert_eq!(times, [10, 10, 10]);
    }

    #[test]
    fn bad_lines_name_file_and_line_and_a_cut_last_line_is_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        std::fs::write(&path, "{\"a\":1}\nnot json\n{\"b\":2}\n").unwrap();
        let e = read_records(&path).unwrap_err().to_string();
        assert!(
            e.ends_with("log.jsonl:2: not JSON: expected ident at line 1 column 2"),
            "{e}"
        );
        std::fs::write(&path, "{\"a\":1}\n[1]\n").unwrap();
        let e = read_records(&path).unwrap_err().to_string();
        assert!(
            e.contains("log.jsonl:2: bad \"(record)\": expected a JSON object, found a list"),
            "{e}"
        );
        std::fs::write(&path, "{\"a\":1}\n{\"b\":").unwrap();
        let (records, warning) = read_records(&path).unwrap();
        assert_eq!(records.len(), 1);
        assert!(
            warning
                .unwrap()
                .contains("log.jsonl:2: last line is cut short")
        );
    }
}
