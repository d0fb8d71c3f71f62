//! The opened box's log: everything a box's agent did, within a bound; a
//! tool call's detail as the screen keeps it (sanitised, clipped); and
//! what the calls changed, for the finished box's summary line.

use std::collections::{HashSet, VecDeque};

use super::clean;
use crate::event::{PlanEntry, ToolContent, ToolDetail, ToolStatus};

/// What a box keeps of everything its agent did, for the opened box: at
/// most this many entries, and this many bytes; the oldest go first.
pub const LOG_ENTRIES: usize = 300;
pub const LOG_BYTES: usize = 256 * 1024;
/// Longest piece of a tool call's content or input kept (bytes).
const PIECE_BYTES: usize = 32 * 1024;
/// Paths a box's change summary names, at most.
const CHANGED_PATHS: usize = 32;

/// A tool call's detail, sanitised for the screen: `input` is its raw
/// input as pretty JSON.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolInfo {
    pub kind: Option<String>,
    pub locations: Vec<String>,
    pub input: Option<String>,
    pub content: Vec<ToolContent>,
    /// The raw output: its text when it is one (or names one: `output`,
    /// `stdout`, `formatted_output`, `aggregated_output`), else pretty JSON.
    pub output: Option<String>,
}

impl ToolInfo {
    pub(super) fn from_detail(d: &ToolDetail) -> Self {
        Self {
            kind: d.kind.as_deref().map(clean),
            locations: d.locations.iter().map(|l| clean(l)).collect(),
            // Every string in it cleaned first: JSON escapes would carry
            // control characters past a cleaning of the JSON text.
            input: d.raw_input.as_ref().map(|v| {
                let v = crate::confine::sanitize::value(v);
                clip(&serde_json::to_string_pretty(&v).unwrap_or_else(|_| v.to_string()))
            }),
            content: d
                .content
                .iter()
                .map(|c| match c {
                    ToolContent::Text { text } => ToolContent::Text {
                        text: clip(&clean(text)),
                    },
                    ToolContent::Diff {
                        path,
                        old_text,
                        new_text,
                    } => ToolContent::Diff {
                        path: clean(path),
                        old_text: old_text.as_deref().map(|t| clip(&clean(t))),
                        new_text: clip(&clean(new_text)),
                    },
                    ToolContent::Terminal { terminal_id } => ToolContent::Terminal {
                        terminal_id: clean(terminal_id),
                    },
                })
                .collect(),
            output: d.raw_output.as_ref().map(|v| {
                let v = crate::confine::sanitize::value(v);
                let text = ["output", "stdout", "formatted_output", "aggregated_output"]
                    .iter()
                    .find_map(|k| v.get(k).and_then(|o| o.as_str()))
                    .or(v.as_str())
                    .map(str::to_string)
                    .unwrap_or_else(|| {
                        serde_json::to_string_pretty(&v).unwrap_or_else(|_| v.to_string())
                    });
                clip(&text)
            }),
        }
    }

    /// An update: each field it gives replaces the one before.
    pub(super) fn merge(&mut self, other: ToolInfo) {
        if other.kind.is_some() {
            self.kind = other.kind;
        }
        if !other.locations.is_empty() {
            self.locations = other.locations;
        }
        if other.input.is_some() {
            self.input = other.input;
        }
        if !other.content.is_empty() {
            self.content = other.content;
        }
        if other.output.is_some() {
            self.output = other.output;
        }
    }

    /// The command it runs, when its input names one.
    pub fn command(&self) -> Option<String> {
        let input: serde_json::Value = serde_json::from_str(self.input.as_deref()?).ok()?;
        match input.get("command")? {
            serde_json::Value::String(c) => Some(c.clone()),
            serde_json::Value::Array(parts) => Some(
                parts
                    .iter()
                    .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_string))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            _ => None,
        }
    }

    /// The terminals its content shows.
    pub fn terminal_ids(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(|c| match c {
            ToolContent::Terminal { terminal_id } => Some(terminal_id.as_str()),
            _ => None,
        })
    }

    /// The paths it touches: its locations and its diffs' paths.
    pub fn paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = self
            .locations
            .iter()
            .map(|l| match l.rsplit_once(':') {
                Some((p, line)) if line.chars().all(|c| c.is_ascii_digit()) => p.to_string(),
                _ => l.clone(),
            })
            .collect();
        for c in &self.content {
            if let ToolContent::Diff { path, .. } = c
                && !paths.contains(path)
            {
                paths.push(path.clone());
            }
        }
        paths
    }

    pub(super) fn bytes(&self) -> usize {
        self.input.as_ref().map_or(0, String::len)
            + self.output.as_ref().map_or(0, String::len)
            + self.locations.iter().map(String::len).sum::<usize>()
            + self
                .content
                .iter()
                .map(|c| match c {
                    ToolContent::Text { text } => text.len(),
                    ToolContent::Diff {
                        path,
                        old_text,
                        new_text,
                    } => path.len() + old_text.as_ref().map_or(0, String::len) + new_text.len(),
                    ToolContent::Terminal { terminal_id } => terminal_id.len(),
                })
                .sum::<usize>()
    }
}

/// One thing the agent did, as the opened box lists it.
#[derive(Debug, Clone, PartialEq)]
pub enum LogEntry {
    /// A follow-up message started a new turn.
    Turn(String),
    Text(String),
    Thought(String),
    Tool {
        id: String,
        title: String,
        status: ToolStatus,
        info: ToolInfo,
    },
    Plan(Vec<PlanEntry>),
    Permission {
        id: String,
        title: String,
        options: Vec<String>,
        info: ToolInfo,
        /// The answer, once given.
        outcome: Option<String>,
    },
    /// A question the agent asked (an elicitation), cleaned.
    Question {
        id: String,
        message: String,
        form: Option<Vec<crate::event::form::FormField>>,
        url: Option<String>,
        /// The answer, once given.
        outcome: Option<String>,
    },
    /// A command run in one of quorum's terminals (its output is the
    /// box's `terminals`).
    Terminal(String),
}

impl LogEntry {
    pub(super) fn bytes(&self) -> usize {
        match self {
            LogEntry::Turn(t) | LogEntry::Text(t) | LogEntry::Thought(t) => t.len(),
            LogEntry::Tool { title, info, .. } => 32 + title.len() + info.bytes(),
            LogEntry::Plan(p) => p.iter().map(|e| e.content.len() + 8).sum(),
            LogEntry::Permission {
                title,
                options,
                info,
                ..
            } => 32 + title.len() + options.iter().map(String::len).sum::<usize>() + info.bytes(),
            LogEntry::Question {
                message, form, url, ..
            } => {
                let fields = form.iter().flatten();
                32 + message.len()
                    + url.as_ref().map_or(0, String::len)
                    + fields
                        .map(|f| 32 + f.name.len() + f.title.as_ref().map_or(0, String::len))
                        .sum::<usize>()
            }
            LogEntry::Terminal(id) => 32 + id.len(),
        }
    }
}

/// Everything a box's agent did, oldest first, within [`LOG_ENTRIES`] and
/// [`LOG_BYTES`]; `dropped` counts the entries let go.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Log {
    pub entries: VecDeque<LogEntry>,
    pub bytes: usize,
    pub dropped: usize,
    /// Let go to bound memory: the entries are in the transcript
    /// (`State::keep_detail`), empty here until read back.
    pub spilled: bool,
}

impl Log {
    pub(super) fn push(&mut self, entry: LogEntry) {
        self.bytes += entry.bytes();
        self.entries.push_back(entry);
        self.trim();
    }

    pub(super) fn trim(&mut self) {
        while self.entries.len() > 1 && (self.entries.len() > LOG_ENTRIES || self.bytes > LOG_BYTES)
        {
            if let Some(old) = self.entries.pop_front() {
                self.bytes -= old.bytes().min(self.bytes);
                self.dropped += 1;
            }
        }
    }

    /// Appends streamed text to the last entry of its kind, or starts one.
    /// Streamed text, already clean.
    pub(super) fn text(&mut self, chunk: &str, thought: bool) {
        let chunk = chunk.to_string();
        match self.entries.back_mut() {
            Some(LogEntry::Text(t)) if !thought => t.push_str(&chunk),
            Some(LogEntry::Thought(t)) if thought => t.push_str(&chunk),
            _ => {
                return self.push(if thought {
                    LogEntry::Thought(chunk)
                } else {
                    LogEntry::Text(chunk)
                });
            }
        }
        self.bytes += chunk.len();
        self.trim();
    }

    /// Changes the newest entry that `pick` finds, keeping the byte count.
    pub(super) fn update(&mut self, mut pick: impl FnMut(&mut LogEntry) -> bool) {
        for entry in self.entries.iter_mut().rev() {
            let before = entry.bytes();
            if pick(entry) {
                self.bytes = (self.bytes + entry.bytes()).saturating_sub(before);
                break;
            }
        }
        self.trim();
    }
}

/// What a box's tool calls changed: paths edited, deleted or moved, and
/// commands run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Changes {
    pub edited: Vec<String>,
    pub deleted: Vec<String>,
    pub moved: Vec<String>,
    pub commands: u32,
    /// Paths let go past [`CHANGED_PATHS`].
    pub more: usize,
    /// What counts its commands once each: none until it runs one (a
    /// long session holds many boxes that never do).
    count: Option<Box<Counting>>,
}

/// What a box's command count remembers, so no command counts twice.
#[derive(Debug, Clone, PartialEq, Default)]
struct Counting {
    /// Tool call ids counted as commands (a set: a box that runs many
    /// commands looks each up in the same time).
    counted: HashSet<String>,
    /// Commands run in quorum's terminals, by terminal id: each counts
    /// once, whether an `execute` tool call shows it or not.
    terminals: HashSet<String>,
    /// `execute` tool calls that show a terminal (counted as their
    /// terminal).
    with_terminal: HashSet<String>,
    /// `execute` tool calls counted on their own and still running: a
    /// terminal started meanwhile is taken to be theirs (fast-agent runs
    /// its `execute` in a terminal it does not put in the tool call), so
    /// one command is not counted twice. At most [`RUNNING_EXECUTE`].
    running_execute: Vec<String>,
}

/// How many running `execute` tool calls a box remembers for its count.
const RUNNING_EXECUTE: usize = 16;

impl Changes {
    pub(super) fn note(&mut self, id: &str, info: &ToolInfo) {
        let list = match info.kind.as_deref() {
            Some("edit") => &mut self.edited,
            Some("delete") => &mut self.deleted,
            Some("move") => &mut self.moved,
            Some("execute") => {
                let terminals: Vec<&str> = info.terminal_ids().collect();
                let c = self.count.get_or_insert_default();
                if !terminals.is_empty() && !c.with_terminal.contains(id) {
                    // Counted as its terminals from now on.
                    c.with_terminal.insert(id.to_string());
                    if c.counted.remove(id) {
                        self.commands -= 1;
                    }
                    for t in terminals {
                        self.terminal(t);
                    }
                } else if !c.with_terminal.contains(id) && c.counted.insert(id.to_string()) {
                    self.commands += 1;
                    if c.running_execute.len() == RUNNING_EXECUTE {
                        c.running_execute.remove(0);
                    }
                    c.running_execute.push(id.to_string());
                }
                return;
            }
            _ => {
                for t in info.terminal_ids() {
                    self.terminal(t);
                }
                return;
            }
        };
        for path in info.paths() {
            if list.contains(&path) {
                continue;
            }
            if list.len() >= CHANGED_PATHS {
                self.more += 1;
            } else {
                list.push(path);
            }
        }
    }

    /// Tool call `id` ended: a terminal started later is not its.
    pub(super) fn finished(&mut self, id: &str) {
        if let Some(c) = &mut self.count {
            c.running_execute.retain(|t| t != id);
        }
    }

    /// A command started in terminal `id`: the command of a running
    /// `execute` tool call that shows no terminal (counted already), else
    /// one more.
    pub(super) fn started(&mut self, id: &str) {
        let c = self.count.get_or_insert_default();
        if c.terminals.contains(id) {
            return;
        }
        match c.running_execute.pop() {
            Some(call) => {
                c.terminals.insert(id.to_string());
                c.counted.remove(&call);
                c.with_terminal.insert(call);
            }
            None => self.terminal(id),
        }
    }

    /// A command run in terminal `id`: counted once.
    pub(super) fn terminal(&mut self, id: &str) {
        if self
            .count
            .get_or_insert_default()
            .terminals
            .insert(id.to_string())
        {
            self.commands += 1;
        }
    }

    /// The one-line summary: "edited README.md, src/a.rs · ran 3 commands".
    pub fn summary(&self) -> Option<String> {
        let mut parts = Vec::new();
        for (verb, list) in [
            ("edited", &self.edited),
            ("deleted", &self.deleted),
            ("moved", &self.moved),
        ] {
            if !list.is_empty() {
                parts.push(format!("{verb} {}", list.join(", ")));
            }
        }
        if self.more > 0 {
            parts.push(format!("{} more paths", self.more));
        }
        match self.commands {
            0 => {}
            1 => parts.push("ran 1 command".into()),
            n => parts.push(format!("ran {n} commands")),
        }
        (!parts.is_empty()).then(|| parts.join(" · "))
    }
}

/// `text` cut to [`PIECE_BYTES`] (on a char boundary), marked when cut.
fn clip(text: &str) -> String {
    if text.len() <= PIECE_BYTES {
        return text.to_string();
    }
    let mut end = PIECE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n… ({} more bytes not kept)",
        &text[..end],
        text.len() - end
    )
}

#[cfg(test)]
mod tests {
    //! What a box's log keeps of its agent's tool calls.

    use super::*;
    use crate::event::Activity;
    use crate::tui::state::State;
    use crate::tui::state::fixtures::*;

    fn edit(id: &str, path: &str) -> Activity {
        Activity::ToolCall {
            id: id.into(),
            title: format!("Edit {path}"),
            status: ToolStatus::Pending,
            detail: Box::new(ToolDetail {
                kind: Some("edit".into()),
                locations: vec![format!("{path}:3")],
                raw_input: Some(serde_json::json!({"path": path})),
                content: vec![ToolContent::Diff {
                    path: path.into(),
                    old_text: Some("old\x1b[2J".into()),
                    new_text: "new".into(),
                }],
                raw_output: None,
            }),
        }
    }

    #[test]
    fn tool_call_detail_is_kept_sanitised_and_updated() {
        let mut s = State::new();
        apply(&mut s, 1, started(false));
        apply(&mut s, 2, activity(edit("e1", "src/a.rs")));
        apply(
            &mut s,
            3,
            activity(Activity::ToolCallUpdate {
                id: "e1".into(),
                title: None,
                status: Some(ToolStatus::Completed),
                detail: Box::new(ToolDetail {
                    content: vec![ToolContent::Text {
                        text: "done\x07".into(),
                    }],
                    raw_output: Some(
                        serde_json::json!({"stdout": "ok\u{1b}[1m\n", "exit_code": 0}),
                    ),
                    ..ToolDetail::default()
                }),
            }),
        );
        let b = the_box(&s);
        let LogEntry::Tool { status, info, .. } = &b.log.entries[0] else {
            panic!("a tool entry: {:?}", b.log.entries);
        };
        assert_eq!(*status, ToolStatus::Completed);
        assert_eq!(info.kind.as_deref(), Some("edit"));
        assert_eq!(info.locations, vec!["src/a.rs:3".to_string()]);
        assert_eq!(info.paths(), vec!["src/a.rs".to_string()]);
        assert!(
            info.input
                .as_deref()
                .unwrap()
                .contains("\"path\": \"src/a.rs\"")
        );
        assert_eq!(
            info.content,
            vec![ToolContent::Text {
                text: "done".into()
            }],
            "the update's content replaced the diff, sanitised"
        );
        assert_eq!(
            info.output.as_deref(),
            Some("ok\n"),
            "its stdout, sanitised"
        );
        assert_eq!(b.log.bytes, b.log.entries[0].bytes());
    }

    #[test]
    fn tool_calls_add_up_to_a_change_summary() {
        let mut s = State::new();
        apply(&mut s, 1, started(false));
        apply(&mut s, 2, activity(edit("e1", "README.md")));
        apply(&mut s, 3, activity(edit("e2", "src/a.rs")));
        apply(&mut s, 4, activity(edit("e3", "README.md")));
        for (t, id) in [(5, "x1"), (6, "x2")] {
            apply(
                &mut s,
                t,
                activity(Activity::ToolCall {
                    id: id.into(),
                    title: "Run".into(),
                    status: ToolStatus::Pending,
                    detail: Box::new(ToolDetail {
                        kind: Some("execute".into()),
                        raw_input: Some(serde_json::json!({"command": ["cargo", "test"]})),
                        ..ToolDetail::default()
                    }),
                }),
            );
        }
        // An update that only now says what the call is counts it once.
        apply(
            &mut s,
            7,
            activity(Activity::ToolCall {
                id: "x3".into(),
                title: "Run".into(),
                status: ToolStatus::Pending,
                detail: Default::default(),
            }),
        );
        for t in [8, 9] {
            apply(
                &mut s,
                t,
                activity(Activity::ToolCallUpdate {
                    id: "x3".into(),
                    title: None,
                    status: None,
                    detail: Box::new(ToolDetail {
                        kind: Some("execute".into()),
                        ..ToolDetail::default()
                    }),
                }),
            );
        }
        apply(
            &mut s,
            10,
            activity(Activity::ToolCall {
                id: "d1".into(),
                title: "Delete".into(),
                status: ToolStatus::Pending,
                detail: Box::new(ToolDetail {
                    kind: Some("delete".into()),
                    locations: vec!["build/".into()],
                    ..ToolDetail::default()
                }),
            }),
        );
        let b = the_box(&s);
        assert_eq!(
            b.changes.summary().as_deref(),
            Some("edited README.md, src/a.rs · deleted build/ · ran 3 commands")
        );
        let LogEntry::Tool { info, .. } = &b.log.entries[3] else {
            panic!()
        };
        assert_eq!(info.command().as_deref(), Some("cargo test"));
    }

    #[test]
    fn a_box_log_is_bounded_and_counts_what_it_dropped() {
        let mut s = State::new();
        apply(&mut s, 1, started(false));
        for i in 0..(LOG_ENTRIES + 5) {
            apply(
                &mut s,
                2,
                activity(edit(&format!("e{i}"), &format!("f{i}"))),
            );
        }
        let b = the_box(&s);
        assert_eq!(b.log.entries.len(), LOG_ENTRIES);
        assert_eq!(b.log.dropped, 5);
        assert!(b.log.bytes <= LOG_BYTES);
        // The summary still names what the dropped calls changed.
        assert!(b.changes.edited.contains(&"f0".to_string()));
        assert_eq!(b.changes.edited.len() + b.changes.more, LOG_ENTRIES + 5);
        // A byte budget too: big diffs push old entries out.
        let mut s = State::new();
        apply(&mut s, 1, started(false));
        let big = "x".repeat(30 * 1024);
        for i in 0..20 {
            apply(
                &mut s,
                2,
                activity(Activity::ToolCall {
                    id: format!("w{i}"),
                    title: "Write".into(),
                    status: ToolStatus::Pending,
                    detail: Box::new(ToolDetail {
                        content: vec![ToolContent::Text { text: big.clone() }],
                        ..ToolDetail::default()
                    }),
                }),
            );
        }
        let b = the_box(&s);
        assert!(b.log.bytes <= LOG_BYTES, "{}", b.log.bytes);
        assert!(b.log.dropped > 0);
    }
}
