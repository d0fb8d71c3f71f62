//! The screen's state, built by applying events. Pure: no I/O, no clock.

use std::collections::{HashMap, VecDeque};

use crate::event::{
    Activity, AgentRef, ChildState, Cost, Event, NoticeLevel, PlanEntry, PlanStatus, Quorum,
    SessionKind, Severity, Stamped, StopReason, Summary, TaskState, ToolContent, ToolDetail,
    ToolStatus, Usage, UsageShare,
};

/// How many activity lines a running box keeps.
pub const ACTIVITY_LINES: usize = 4;
/// How much streamed text a running box keeps (bytes, from the end).
const ACTIVITY_TEXT: usize = 2048;
/// What a box keeps of everything its agent did, for the opened box: at
/// most this many entries, and this many bytes; the oldest go first.
pub const LOG_ENTRIES: usize = 300;
pub const LOG_BYTES: usize = 256 * 1024;
/// Longest piece of a tool call's content or input kept (bytes).
const PIECE_BYTES: usize = 32 * 1024;
/// Paths a box's change summary names, at most.
const CHANGED_PATHS: usize = 32;

/// One item of the transcript. `rev` changes whenever the cell does, so
/// its layout can be cached.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub rev: u64,
    pub kind: CellKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum CellKind {
    User {
        text: String,
    },
    Assistant {
        text: String,
        done: bool,
    },
    Tool {
        name: String,
        summary: String,
        /// `(ok, summary)` once finished.
        result: Option<(bool, String)>,
    },
    Notice {
        level: NoticeLevel,
        text: String,
    },
    Error {
        text: String,
    },
    Subagent(Box<SubagentBox>),
    /// The header of a batch: its tasks' boxes follow, grouped under it.
    Batch(Box<BatchHeader>),
    /// A background task's completion, reported back into the chat.
    TaskReport {
        task_id: String,
        agent: String,
        output: String,
        stop_reason: StopReason,
        severity: Option<Severity>,
    },
}

/// A `subagent` call's box.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentBox {
    pub call_id: String,
    pub task_id: Option<String>,
    pub agent: AgentRef,
    pub input: String,
    pub code_review: bool,
    pub background: bool,
    pub session: Option<SessionKind>,
    pub started: u64,
    pub finished: Option<u64>,
    /// The last few things the agent did, oldest first.
    pub activity: VecDeque<ActivityLine>,
    /// From the task board's snapshot, as the side panel shows it.
    pub tool_calls: u32,
    pub plan: Vec<PlanEntry>,
    /// An unanswered permission request: id, title, options.
    pub permission: Option<(String, String, Vec<String>)>,
    /// What that request asks about (path, command, diff).
    pub permission_detail: ToolInfo,
    pub output: Option<String>,
    pub stop_reason: Option<StopReason>,
    pub severity: Option<Severity>,
    /// Waiting for the person (from the board's snapshot).
    pub waiting: bool,
    /// Asked to stop, its agent not stopped yet (from the board's snapshot).
    pub cancelling: bool,
    /// What quorum told of the call (the last few), kept when it ends.
    pub notices: VecDeque<String>,
    pub session_id: Option<String>,
    /// Everything the agent did (bounded), for the opened box.
    pub log: Log,
    /// What its tool calls changed, for the finished box's summary line.
    pub changes: Changes,
    /// Queued until its place comes, then as the board's snapshots say.
    pub state: TaskState,
    /// The batch it is a task of: its box is drawn inside the group.
    pub batch: Option<Grouped>,
    /// Context and cost, and its part of the totals (board's snapshot).
    pub usage: Option<Usage>,
    pub share: Option<UsageShare>,
    /// The child sessions its agent announced, in order: drawn nested
    /// inside its box.
    pub children: Vec<ChildBox>,
    /// Its streamed text and thoughts, cleaned as they arrive.
    streams: Streams,
}

/// A box's two streams of text, each cleaned across its chunks.
#[derive(Debug, Clone, Default, PartialEq)]
struct Streams {
    text: crate::confine::sanitize::Stream,
    thought: crate::confine::sanitize::Stream,
}

impl Streams {
    fn clean<'a>(&mut self, chunk: &'a str, thought: bool) -> std::borrow::Cow<'a, str> {
        if thought {
            self.thought.push(chunk)
        } else {
            self.text.push(chunk)
        }
    }
}

/// A child session of a call's agent (a nested sub-agent), as its box
/// inside the call's box shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildBox {
    pub child_id: String,
    pub title: Option<String>,
    pub description: Option<String>,
    /// The agent's word on its work, when it gave one.
    pub state: Option<ChildState>,
    pub can_cancel: bool,
    /// The board's latest snapshot of it.
    pub summary: Summary,
    /// The last few things it did, oldest first.
    pub activity: VecDeque<ActivityLine>,
    streams: Streams,
}

impl ChildBox {
    /// Its title, else its session id.
    pub fn name(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.child_id)
    }

    /// Its agent lets it be cancelled alone, and it is not idle (while
    /// its call runs).
    pub fn cancellable(&self) -> bool {
        self.can_cancel && self.state != Some(ChildState::Idle)
    }
}

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
    fn from_detail(d: &ToolDetail) -> Self {
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
    fn merge(&mut self, other: ToolInfo) {
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

    fn bytes(&self) -> usize {
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
}

impl LogEntry {
    fn bytes(&self) -> usize {
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
}

impl Log {
    fn push(&mut self, entry: LogEntry) {
        self.bytes += entry.bytes();
        self.entries.push_back(entry);
        self.trim();
    }

    fn trim(&mut self) {
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
    fn text(&mut self, chunk: &str, thought: bool) {
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
    fn update(&mut self, mut pick: impl FnMut(&mut LogEntry) -> bool) {
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
    /// Tool call ids counted as commands.
    counted: Vec<String>,
}

impl Changes {
    fn note(&mut self, id: &str, info: &ToolInfo) {
        let list = match info.kind.as_deref() {
            Some("edit") => &mut self.edited,
            Some("delete") => &mut self.deleted,
            Some("move") => &mut self.moved,
            Some("execute") => {
                if !self.counted.iter().any(|c| c == id) {
                    self.counted.push(id.to_string());
                    self.commands += 1;
                }
                return;
            }
            _ => return,
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

/// A box's place in its batch's group.
#[derive(Debug, Clone, PartialEq)]
pub struct Grouped {
    pub batch_id: String,
    /// The batch's tint (its quorum's or worst verdict), once known.
    pub tint: Option<Severity>,
    /// The last box of a finished batch: it closes the group.
    pub last: bool,
}

impl SubagentBox {
    pub fn running(&self) -> bool {
        self.finished.is_none()
    }

    pub fn queued(&self) -> bool {
        self.running() && self.state == TaskState::Queued
    }
}

/// One task of a batch, in its header.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub call_id: String,
    pub agent: String,
    /// Copied from the board's snapshots.
    pub state: TaskState,
    pub severity: Option<Severity>,
    /// Its part of the batch's usage total.
    pub share: Option<UsageShare>,
}

/// Usage added up over calls: tokens in context and cost (one amount per
/// currency, in the order first seen). Built from the board's shares,
/// which count a resumed session once.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UsageTotal {
    pub tokens: i64,
    pub costs: Vec<Cost>,
}

impl UsageTotal {
    /// The total of `shares`, or `None` when no call reported usage.
    pub fn of<'a>(shares: impl IntoIterator<Item = &'a UsageShare>) -> Option<Self> {
        let mut total: Option<Self> = None;
        for share in shares {
            let t = total.get_or_insert_with(Self::default);
            t.tokens += share.tokens;
            if let Some(c) = &share.cost {
                match t.costs.iter_mut().find(|x| x.currency == c.currency) {
                    Some(x) => x.amount += c.amount,
                    None => t.costs.push(c.clone()),
                }
            }
        }
        total
    }
}

/// A board snapshot's usage, sanitised for the screen.
fn clean_usage(usage: &Option<Usage>) -> Option<Usage> {
    usage.as_ref().map(|u| Usage {
        used: u.used,
        size: u.size,
        cost: u.cost.as_ref().map(clean_cost),
    })
}

fn clean_share(share: &Option<UsageShare>) -> Option<UsageShare> {
    share.as_ref().map(|s| UsageShare {
        tokens: s.tokens,
        cost: s.cost.as_ref().map(clean_cost),
    })
}

fn clean_cost(c: &Cost) -> Cost {
    Cost {
        amount: c.amount,
        currency: clean(&c.currency),
    }
}

/// A batch's header line: its tasks as they go, then its totals and, for
/// a review batch, the quorum.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchHeader {
    pub batch_id: String,
    /// How many tasks it has (those that could not start included).
    pub tasks: u32,
    pub review: bool,
    /// The tasks that have a box, in order.
    pub members: Vec<Member>,
    /// `(succeeded, failed, worst verdict)` once every task ended.
    pub finished: Option<(u32, u32, Option<Severity>)>,
    pub quorum: Option<Quorum>,
}

impl BatchHeader {
    /// The verdict the group is tinted with: the quorum's, else the worst
    /// a task gave, once the batch is done.
    pub fn tint(&self) -> Option<Severity> {
        match (&self.quorum, self.finished) {
            (Some(q), _) => q.verdict,
            (None, Some((_, _, worst))) => worst,
            (None, None) => None,
        }
    }

    /// Its tasks' usage added up (a review quorum's cost).
    pub fn usage_total(&self) -> Option<UsageTotal> {
        UsageTotal::of(self.members.iter().filter_map(|m| m.share.as_ref()))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ActivityLine {
    Text(String),
    Thought(String),
    Tool {
        id: String,
        title: String,
        status: ToolStatus,
    },
    Note(String),
}

impl ActivityLine {
    /// A one-line summary, for the side panel.
    pub fn summary(&self) -> String {
        let one_line = |s: &str| {
            s.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
                .to_string()
        };
        match self {
            ActivityLine::Text(t) => one_line(t),
            ActivityLine::Thought(t) => format!("thinking: {}", one_line(t)),
            ActivityLine::Tool { title, .. } => format!("⚙ {title}"),
            ActivityLine::Note(t) => t.clone(),
        }
    }
}

/// A background task, as the side panel shows it: its summary is a copy
/// of the task board's latest snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub task_id: String,
    pub call_id: String,
    pub agent: String,
    /// The first line of the message the task was given.
    pub input: String,
    pub code_review: bool,
    pub started: u64,
    pub finished: Option<u64>,
    /// The board's latest snapshot.
    pub summary: Summary,
    pub reported: bool,
}

/// Everything the screen shows, as built from events.
#[derive(Debug, Default, Clone)]
pub struct State {
    pub cells: Vec<Cell>,
    pub tasks: Vec<Task>,
    /// Time of the latest event, ms since the session started.
    pub now: u64,
    pub model: Option<String>,
    pub agents: Vec<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// How many events were applied.
    pub applied: u64,
    /// Whether the chat model is working on a turn.
    pub turn_running: bool,
    /// How much of what may be a tool call the chat model has written as
    /// text (held back until its message ends).
    pub writing_call: Option<u64>,
    /// The chat model's pending retry: attempt, wait, reason.
    pub retry: Option<(u32, u64, String)>,
    /// Running boxes (queued ones included), and queued ones.
    running: usize,
    queued: usize,
    calls: HashMap<String, usize>,
    /// Batch headers, by batch id.
    batches: HashMap<String, usize>,
    tools: HashMap<String, usize>,
    task_index: HashMap<String, usize>,
    open_assistant: Option<usize>,
    /// The chat model's streamed reply, cleaned across its chunks.
    assistant_stream: crate::confine::sanitize::Stream,
    next_rev: u64,
}

impl State {
    pub fn new() -> Self {
        Self::default()
    }

    /// The call id of the newest running box.
    pub fn latest_running_call(&self) -> Option<String> {
        self.cells.iter().rev().find_map(|c| match &c.kind {
            CellKind::Subagent(b) if b.running() => Some(b.call_id.clone()),
            _ => None,
        })
    }

    /// The newest unanswered permission request: call id, request id and
    /// how many options it offers.
    pub fn pending_permission(&self) -> Option<(String, String, usize)> {
        self.cells.iter().rev().find_map(|c| match &c.kind {
            CellKind::Subagent(b) => b
                .permission
                .as_ref()
                .map(|(id, _, options)| (b.call_id.clone(), id.clone(), options.len())),
            _ => None,
        })
    }

    /// The newest child session whose work can be cancelled alone (its
    /// agent allows it, it is not idle, its call runs): call and child id.
    pub fn cancellable_child(&self) -> Option<(String, String)> {
        self.cells.iter().rev().find_map(|c| match &c.kind {
            CellKind::Subagent(b) if b.running() => b
                .children
                .iter()
                .rev()
                .find(|c| c.cancellable())
                .map(|c| (b.call_id.clone(), c.child_id.clone())),
            _ => None,
        })
    }

    /// How many sub-agent boxes are still running (queued ones included).
    pub fn running(&self) -> usize {
        self.running
    }

    /// How many boxes wait for their place in a batch.
    pub fn queued(&self) -> usize {
        self.queued
    }

    fn push(&mut self, kind: CellKind) -> usize {
        self.next_rev += 1;
        self.cells.push(Cell {
            rev: self.next_rev,
            kind,
        });
        self.cells.len() - 1
    }

    fn touch(&mut self, index: usize) -> &mut CellKind {
        self.next_rev += 1;
        let cell = &mut self.cells[index];
        cell.rev = self.next_rev;
        &mut cell.kind
    }

    fn subagent(&mut self, call_id: &str) -> Option<&mut SubagentBox> {
        let index = *self.calls.get(call_id)?;
        match self.touch(index) {
            CellKind::Subagent(b) => Some(b),
            _ => None,
        }
    }

    fn task(&mut self, task_id: &str) -> Option<&mut Task> {
        let index = *self.task_index.get(task_id)?;
        self.tasks.get_mut(index)
    }

    fn batch(&mut self, batch_id: &str) -> Option<&mut BatchHeader> {
        let index = *self.batches.get(batch_id)?;
        match self.touch(index) {
            CellKind::Batch(b) => Some(b),
            _ => None,
        }
    }

    /// The batch a call's box belongs to.
    fn batch_of(&self, call_id: &str) -> Option<String> {
        match &self.cells[*self.calls.get(call_id)?].kind {
            CellKind::Subagent(b) => b.batch.as_ref().map(|g| g.batch_id.clone()),
            _ => None,
        }
    }

    /// Tints a batch's header and the boxes grouped under it.
    fn tint_batch(&mut self, batch_id: &str) {
        let Some(header) = self.batch(batch_id) else {
            return;
        };
        let tint = header.tint();
        let done = header.finished.is_some();
        let calls: Vec<String> = header.members.iter().map(|m| m.call_id.clone()).collect();
        let count = calls.len();
        for (i, call_id) in calls.into_iter().enumerate() {
            if let Some(b) = self.subagent(&call_id)
                && let Some(group) = &mut b.batch
            {
                group.tint = tint;
                group.last = done && i + 1 == count;
            }
        }
    }

    /// Applies one event.
    pub fn apply(&mut self, stamped: &Stamped) {
        let t = stamped.t;
        self.now = self.now.max(t);
        self.applied += 1;
        // The model answered (or failed for good): no retry is pending.
        if matches!(
            stamped.event,
            Event::AssistantDelta { .. }
                | Event::Usage { .. }
                | Event::Error { .. }
                | Event::ToolCallStarted { .. }
        ) {
            self.retry = None;
        }
        match &stamped.event {
            Event::SessionInfo { model, agents } => {
                self.model = model.clone();
                self.agents = agents.clone();
            }
            Event::UserMessage { text } => {
                self.open_assistant = None;
                self.push(CellKind::User { text: clean(text) });
            }
            Event::AssistantDelta { text } => {
                let text = self.assistant_stream.push(text).into_owned();
                // What was held back was text after all.
                self.writing_call = None;
                match self.open_assistant {
                    Some(i) => {
                        if let CellKind::Assistant { text: t, .. } = self.touch(i) {
                            t.push_str(&text);
                        }
                    }
                    None => {
                        let i = self.push(CellKind::Assistant { text, done: false });
                        self.open_assistant = Some(i);
                    }
                }
            }
            Event::TurnStarted => self.turn_running = true,
            Event::TurnEnded { .. } => {
                self.turn_running = false;
                self.writing_call = None;
            }
            Event::AssistantWritingCall { bytes } => self.writing_call = Some(*bytes),
            Event::AssistantEnd => {
                self.writing_call = None;
                if let Some(i) = self.open_assistant.take()
                    && let CellKind::Assistant { done, .. } = self.touch(i)
                {
                    *done = true;
                }
            }
            Event::ToolCallStarted { id, name, summary } => {
                self.open_assistant = None;
                self.writing_call = None;
                let i = self.push(CellKind::Tool {
                    name: clean(name),
                    summary: clean(summary),
                    result: None,
                });
                self.tools.insert(id.clone(), i);
            }
            Event::ToolCallFinished { id, ok, summary } => {
                if let Some(&i) = self.tools.get(id)
                    && let CellKind::Tool { result, .. } = self.touch(i)
                {
                    *result = Some((*ok, clean(summary)));
                }
            }
            Event::SubagentStarted {
                call_id,
                task_id,
                agent,
                input,
                code_review,
                background,
                session,
                batch_id,
                queued,
            } => {
                self.open_assistant = None;
                // A call the model wrote as text runs: it is written.
                self.writing_call = None;
                let state = if *queued {
                    TaskState::Queued
                } else {
                    TaskState::Running
                };
                let agent = match agent {
                    AgentRef::Internal => AgentRef::Internal,
                    AgentRef::Acp(name) => AgentRef::Acp(clean(name)),
                };
                if let Some(task_id) = task_id {
                    self.task_index.insert(task_id.clone(), self.tasks.len());
                    self.tasks.push(Task {
                        task_id: clean(task_id),
                        call_id: call_id.clone(),
                        agent: agent.name().to_string(),
                        input: clean(input.lines().find(|l| !l.trim().is_empty()).unwrap_or("")),
                        code_review: *code_review,
                        started: t,
                        finished: None,
                        summary: Summary {
                            state,
                            ..Summary::default()
                        },
                        reported: false,
                    });
                }
                if let Some(header) = batch_id.as_deref().and_then(|id| self.batch(id)) {
                    header.members.push(Member {
                        call_id: call_id.clone(),
                        agent: agent.name().to_string(),
                        state,
                        severity: None,
                        share: None,
                    });
                }
                let i = self.push(CellKind::Subagent(Box::new(SubagentBox {
                    call_id: call_id.clone(),
                    task_id: task_id.clone(),
                    agent,
                    input: clean(input),
                    code_review: *code_review,
                    background: *background,
                    session: *session,
                    started: t,
                    finished: None,
                    activity: VecDeque::new(),
                    tool_calls: 0,
                    plan: Vec::new(),
                    permission: None,
                    permission_detail: ToolInfo::default(),
                    output: None,
                    stop_reason: None,
                    severity: None,
                    waiting: false,
                    cancelling: false,
                    notices: VecDeque::new(),
                    session_id: None,
                    log: Log::default(),
                    changes: Changes::default(),
                    state,
                    usage: None,
                    share: None,
                    children: Vec::new(),
                    streams: Streams::default(),
                    batch: batch_id
                        .as_ref()
                        .filter(|id| self.batches.contains_key(*id))
                        .map(|id| Grouped {
                            batch_id: id.clone(),
                            tint: None,
                            last: false,
                        }),
                })));
                // A call id used twice replaces the older box's entry.
                if let Some(old) = self.calls.insert(call_id.clone(), i)
                    && let CellKind::Subagent(b) = &self.cells[old].kind
                    && b.running()
                {
                    self.running -= 1;
                    if b.queued() {
                        self.queued -= 1;
                    }
                }
                self.running += 1;
                if *queued {
                    self.queued += 1;
                }
            }
            // The board's snapshot that follows says so: the box and the
            // panel copy it, as they copy every count.
            Event::SubagentCancelling { .. } => {}
            Event::SubagentDequeued { call_id } => {
                let Some(b) = self.subagent(call_id) else {
                    return;
                };
                if !b.queued() {
                    return;
                }
                // Its time counts from when it runs.
                b.state = TaskState::Running;
                b.started = t;
                let task_id = b.task_id.clone();
                self.queued -= 1;
                if let Some(task) = task_id.as_deref().and_then(|id| self.task(id)) {
                    task.started = t;
                    task.summary.state = TaskState::Running;
                }
            }
            Event::BatchStarted {
                batch_id,
                tasks,
                review,
            } => {
                self.open_assistant = None;
                let i = self.push(CellKind::Batch(Box::new(BatchHeader {
                    batch_id: clean(batch_id),
                    tasks: *tasks,
                    review: *review,
                    members: Vec::new(),
                    finished: None,
                    quorum: None,
                })));
                self.batches.insert(batch_id.clone(), i);
            }
            Event::BatchFinished {
                batch_id,
                succeeded,
                failed,
                worst_verdict,
                ..
            } => {
                if let Some(header) = self.batch(batch_id) {
                    header.finished = Some((*succeeded, *failed, *worst_verdict));
                }
                self.tint_batch(batch_id);
            }
            Event::ReviewQuorum { batch_id, quorum } => {
                if let Some(header) = self.batch(batch_id) {
                    let mut quorum = quorum.clone();
                    for v in &mut quorum.verdicts {
                        v.agent = clean(&v.agent);
                    }
                    header.quorum = Some(quorum);
                }
                self.tint_batch(batch_id);
            }
            Event::SubagentSession {
                call_id,
                session,
                session_id,
            } => {
                if let Some(b) = self.subagent(call_id) {
                    b.session = Some(*session);
                    if let Some(id) = session_id {
                        b.session_id = Some(clean(id));
                    }
                }
            }
            Event::SubagentFollowup { call_id, input } => {
                let Some(b) = self.subagent(call_id) else {
                    return;
                };
                // The box reopens for the new turn.
                let was_running = b.running();
                let input = clean(input);
                b.finished = None;
                b.output = None;
                b.stop_reason = None;
                b.severity = None;
                push_line(
                    &mut b.activity,
                    ActivityLine::Note(format!(
                        "› follow-up: {}",
                        input.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
                    )),
                );
                b.log.push(LogEntry::Turn(input));
                let task_id = b.task_id.clone();
                if !was_running {
                    self.running += 1;
                }
                if let Some(task) = task_id.as_deref().and_then(|id| self.task(id)) {
                    task.finished = None;
                    task.reported = false;
                    task.summary.state = TaskState::Running;
                    task.summary.severity = None;
                }
            }
            Event::SubagentActivity { call_id, activity } => self.activity(call_id, activity),
            Event::SubagentChild {
                call_id,
                child_id,
                title,
                description,
                state,
                can_cancel,
            } => {
                let Some(b) = self.subagent(call_id) else {
                    return;
                };
                let child = match b.children.iter().position(|c| &c.child_id == child_id) {
                    Some(i) => &mut b.children[i],
                    None => {
                        b.children.push(ChildBox {
                            child_id: clean(child_id),
                            title: None,
                            description: None,
                            state: None,
                            can_cancel: false,
                            summary: Summary::default(),
                            activity: VecDeque::new(),
                            streams: Streams::default(),
                        });
                        b.children.last_mut().expect("just pushed")
                    }
                };
                // Each announcement carries all that is known of it.
                child.title = title.as_deref().map(clean);
                child.description = description.as_deref().map(clean);
                child.state = *state;
                child.can_cancel = *can_cancel;
            }
            Event::SubagentChildActivity {
                call_id,
                child_id,
                activity,
            } => {
                if let Some(child) = self.child(call_id, child_id) {
                    child_activity(child, activity);
                }
            }
            Event::ChildProgress {
                call_id,
                child_id,
                summary,
            } => {
                if let Some(child) = self.child(call_id, child_id) {
                    child.summary = Summary {
                        last_activity: summary.last_activity.as_deref().map(clean),
                        ..summary.clone()
                    };
                }
            }
            Event::SubagentFinished {
                call_id,
                output,
                stop_reason,
                severity,
            } => {
                let Some(b) = self.subagent(call_id) else {
                    return;
                };
                let (was_running, was_queued) = (b.running(), b.queued());
                b.finished = Some(t);
                b.output = Some(clean(output));
                b.stop_reason = Some(*stop_reason);
                b.severity = *severity;
                b.permission = None;
                b.waiting = false;
                b.state = TaskState::from_stop_reason(*stop_reason);
                if was_running {
                    self.running -= 1;
                }
                if was_queued {
                    self.queued -= 1;
                }
            }
            Event::TaskProgress {
                call_id,
                task_id,
                summary,
            } => {
                // A copy of the board's snapshot: box, batch header and
                // panel show the same numbers.
                if let Some(b) = self.subagent(call_id) {
                    b.tool_calls = summary.tool_calls;
                    b.usage = clean_usage(&summary.usage);
                    b.share = clean_share(&summary.share);
                    b.waiting = summary.waiting && b.running();
                    b.cancelling = summary.cancelling && b.running();
                    let was_queued = b.queued();
                    if b.running() {
                        b.state = summary.state;
                    }
                    if was_queued && !b.queued() {
                        self.queued -= 1;
                    }
                }
                if let Some(batch_id) = self.batch_of(call_id)
                    && let Some(header) = self.batch(&batch_id)
                    && let Some(member) = header.members.iter_mut().find(|m| &m.call_id == call_id)
                {
                    member.state = summary.state;
                    member.severity = summary.severity;
                    member.share = clean_share(&summary.share);
                }
                if let Some(task) = task_id.as_deref().and_then(|id| self.task(id)) {
                    task.summary = Summary {
                        last_activity: summary.last_activity.as_deref().map(clean),
                        usage: clean_usage(&summary.usage),
                        share: clean_share(&summary.share),
                        ..summary.clone()
                    };
                    if !summary.state.active() && task.finished.is_none() {
                        task.finished = Some(t);
                    }
                }
            }
            Event::TaskReported { task_id } => {
                self.open_assistant = None;
                let Some(task) = self.task(task_id) else {
                    return;
                };
                task.reported = true;
                let (agent, call_id) = (task.agent.clone(), task.call_id.clone());
                let report = self
                    .calls
                    .get(&call_id)
                    .and_then(|&i| match &self.cells[i].kind {
                        CellKind::Subagent(b) => Some((
                            b.output.clone().unwrap_or_default(),
                            b.stop_reason.unwrap_or_default(),
                            b.severity,
                        )),
                        _ => None,
                    });
                let (output, stop_reason, severity) = report.unwrap_or_default();
                self.push(CellKind::TaskReport {
                    task_id: clean(task_id),
                    agent,
                    output,
                    stop_reason,
                    severity,
                });
            }
            Event::ModelRetry {
                attempt,
                wait_ms,
                reason,
            } => {
                self.retry = Some((*attempt, *wait_ms, clean(reason)));
            }
            Event::Usage {
                input_tokens,
                output_tokens,
            } => {
                self.input_tokens += input_tokens;
                self.output_tokens += output_tokens;
            }
            Event::Notice { level, text } => {
                self.push(CellKind::Notice {
                    level: *level,
                    text: clean(text),
                });
            }
            Event::Error { text } => {
                self.push(CellKind::Error { text: clean(text) });
            }
        }
    }

    /// Every sub-agent call's usage added up: the session total.
    pub fn usage_total(&self) -> Option<UsageTotal> {
        UsageTotal::of(self.cells.iter().filter_map(|c| match &c.kind {
            CellKind::Subagent(b) => b.share.as_ref(),
            _ => None,
        }))
    }

    /// Boxes waiting for the person (a permission answer), as the board
    /// says: the status line's "needs you" count.
    pub fn needs_you(&self) -> usize {
        self.cells
            .iter()
            .filter(|c| matches!(&c.kind, CellKind::Subagent(b) if b.waiting))
            .count()
    }

    /// Calls asked to stop whose agents have not stopped yet.
    pub fn cancelling(&self) -> usize {
        self.cells
            .iter()
            .filter(|c| matches!(&c.kind, CellKind::Subagent(b) if b.cancelling))
            .count()
    }

    fn child(&mut self, call_id: &str, child_id: &str) -> Option<&mut ChildBox> {
        self.subagent(call_id)?
            .children
            .iter_mut()
            .find(|c| c.child_id == child_id)
    }

    fn activity(&mut self, call_id: &str, activity: &Activity) {
        let Some(b) = self.subagent(call_id) else {
            return;
        };
        match activity {
            Activity::MessageChunk { text } | Activity::ThoughtChunk { text } => {
                let thought = matches!(activity, Activity::ThoughtChunk { .. });
                let text = b.streams.clean(text, thought);
                push_text(&mut b.activity, &text, thought);
                b.log.text(&text, thought);
            }
            Activity::ToolCall {
                id,
                title,
                status,
                detail,
            } => {
                push_line(
                    &mut b.activity,
                    ActivityLine::Tool {
                        id: id.clone(),
                        title: clean(title),
                        status: *status,
                    },
                );
                let info = ToolInfo::from_detail(detail);
                b.changes.note(id, &info);
                b.log.push(LogEntry::Tool {
                    id: id.clone(),
                    title: clean(title),
                    status: *status,
                    info,
                });
            }
            Activity::ToolCallUpdate {
                id,
                title,
                status,
                detail,
            } => {
                let line = b.activity.iter_mut().rev().find_map(|l| match l {
                    ActivityLine::Tool {
                        id: lid,
                        title,
                        status,
                    } if lid == id => Some((title, status)),
                    _ => None,
                });
                if let Some((t, s)) = line {
                    if let Some(title) = title {
                        *t = clean(title);
                    }
                    if let Some(status) = status {
                        *s = *status;
                    }
                }
                let update = ToolInfo::from_detail(detail);
                let mut merged = None;
                b.log.update(|e| match e {
                    LogEntry::Tool {
                        id: eid,
                        title: t,
                        status: s,
                        info,
                    } if eid == id => {
                        if let Some(title) = title {
                            *t = clean(title);
                        }
                        if let Some(status) = status {
                            *s = *status;
                        }
                        info.merge(update.clone());
                        merged = Some(info.clone());
                        true
                    }
                    _ => false,
                });
                // A call dropped from the log still counts in the summary.
                let info = merged.unwrap_or(update);
                b.changes.note(id, &info);
            }
            Activity::Plan { entries } => {
                b.plan = entries
                    .iter()
                    .map(|e| PlanEntry {
                        content: clean(&e.content),
                        status: e.status,
                    })
                    .collect();
                let plan = b.plan.clone();
                match b.log.entries.back_mut() {
                    // A plan replaced at once replaces its entry.
                    Some(LogEntry::Plan(p)) => *p = plan,
                    _ => b.log.push(LogEntry::Plan(plan)),
                }
            }
            Activity::PermissionRequest {
                id,
                title,
                options,
                detail,
            } => {
                let info = ToolInfo::from_detail(detail);
                let options: Vec<String> = options.iter().map(|o| clean(o)).collect();
                b.permission = Some((id.clone(), clean(title), options.clone()));
                b.permission_detail = info.clone();
                b.log.push(LogEntry::Permission {
                    id: id.clone(),
                    title: clean(title),
                    options,
                    info,
                    outcome: None,
                });
            }
            Activity::PermissionResolved { id, outcome } => {
                let answer = clean(outcome);
                b.log.update(|e| match e {
                    LogEntry::Permission {
                        id: eid,
                        outcome: o,
                        ..
                    } if eid == id && o.is_none() => {
                        *o = Some(answer.clone());
                        true
                    }
                    _ => false,
                });
                if b.permission.as_ref().is_some_and(|p| &p.0 == id) {
                    let title = b.permission.take().map(|p| p.1).unwrap_or_default();
                    b.permission_detail = ToolInfo::default();
                    push_line(
                        &mut b.activity,
                        ActivityLine::Note(format!("permission {answer}: {title}")),
                    );
                }
            }
            // Its figures come with the board's snapshot.
            Activity::Usage { .. } => {}
            Activity::Notice { text } => {
                let text = clean(text);
                push_line(&mut b.activity, ActivityLine::Note(text.clone()));
                if b.notices.len() == NOTICES {
                    b.notices.pop_front();
                }
                b.notices.push_back(text);
            }
        }
    }

    /// The box of a call, by call id.
    pub fn subagent_box(&self, call_id: &str) -> Option<&SubagentBox> {
        match &self.cells.get(*self.calls.get(call_id)?)?.kind {
            CellKind::Subagent(b) => Some(b),
            _ => None,
        }
    }

    /// The cell index of a call's box.
    pub fn box_index(&self, call_id: &str) -> Option<usize> {
        self.calls.get(call_id).copied()
    }
}

/// What a child's box keeps of its activity: the last lines.
fn child_activity(child: &mut ChildBox, activity: &Activity) {
    match activity {
        Activity::MessageChunk { text } => {
            let text = child.streams.clean(text, false);
            push_text(&mut child.activity, &text, false);
        }
        Activity::ThoughtChunk { text } => {
            let text = child.streams.clean(text, true);
            push_text(&mut child.activity, &text, true);
        }
        Activity::ToolCall {
            id, title, status, ..
        } => push_line(
            &mut child.activity,
            ActivityLine::Tool {
                id: id.clone(),
                title: clean(title),
                status: *status,
            },
        ),
        Activity::ToolCallUpdate {
            id, title, status, ..
        } => {
            for line in child.activity.iter_mut().rev() {
                if let ActivityLine::Tool {
                    id: lid,
                    title: t,
                    status: s,
                } = line
                    && lid == id
                {
                    if let Some(title) = title {
                        *t = clean(title);
                    }
                    if let Some(status) = status {
                        *s = *status;
                    }
                    break;
                }
            }
        }
        // A child's usage is its parent call's (the agent's session).
        Activity::Plan { .. } | Activity::Usage { .. } => {}
        Activity::PermissionRequest { title, .. } => {
            // The call's prompt names the child; its own box need not.
            let prefix = format!("{}: ", child.name());
            let title = clean(title.strip_prefix(&prefix).unwrap_or(title));
            push_line(
                &mut child.activity,
                ActivityLine::Note(format!("asks permission: {title}")),
            )
        }
        Activity::PermissionResolved { outcome, .. } => push_line(
            &mut child.activity,
            ActivityLine::Note(format!("permission {}", clean(outcome))),
        ),
        Activity::Notice { text } => {
            push_line(&mut child.activity, ActivityLine::Note(clean(text)))
        }
    }
}

/// How many of a call's notices its box keeps.
const NOTICES: usize = 3;

fn clean(s: &str) -> String {
    crate::confine::sanitize::sanitize(s).into_owned()
}

fn push_line(lines: &mut VecDeque<ActivityLine>, line: ActivityLine) {
    if lines.len() == ACTIVITY_LINES {
        lines.pop_front();
    }
    lines.push_back(line);
}

/// Appends streamed text (already clean) to the last text line of its
/// kind, or starts one.
fn push_text(lines: &mut VecDeque<ActivityLine>, chunk: &str, thought: bool) {
    let last = match lines.back_mut() {
        Some(ActivityLine::Text(t)) if !thought => Some(t),
        Some(ActivityLine::Thought(t)) if thought => Some(t),
        _ => None,
    };
    match last {
        Some(t) => {
            t.push_str(chunk);
            if t.len() > ACTIVITY_TEXT * 2 {
                let mut cut = t.len() - ACTIVITY_TEXT;
                while !t.is_char_boundary(cut) {
                    cut += 1;
                }
                t.drain(..cut);
            }
        }
        None => {
            let text = chunk.to_string();
            push_line(
                lines,
                if thought {
                    ActivityLine::Thought(text)
                } else {
                    ActivityLine::Text(text)
                },
            );
        }
    }
}

/// Plan progress: `(completed, total, current entry)`.
pub fn plan_progress(plan: &[PlanEntry]) -> (usize, usize, Option<&str>) {
    let done = plan
        .iter()
        .filter(|e| e.status == PlanStatus::Completed)
        .count();
    let current = plan
        .iter()
        .find(|e| e.status == PlanStatus::InProgress)
        .or_else(|| plan.iter().find(|e| e.status == PlanStatus::Pending))
        .map(|e| e.content.as_str());
    (done, plan.len(), current)
}

#[cfg(test)]
mod tests {
    //! One test per event kind: what applying it changes on screen.

    use super::*;
    use crate::event::{PlanEntry, PlanStatus};

    fn apply(state: &mut State, t: u64, event: Event) {
        state.apply(&Stamped::new(t, event));
    }

    fn started(background: bool) -> Event {
        Event::SubagentStarted {
            call_id: "c1".into(),
            task_id: background.then(|| "t1".into()),
            agent: AgentRef::Acp("fake\x1b[31m".into()),
            input: "\nreview it\nplease".into(),
            code_review: true,
            background,
            session: None,
            batch_id: None,
            queued: false,
        }
    }

    /// A box of batch `b1`: call `call`, on agent `agent`, maybe queued.
    fn member(call: &str, agent: &str, queued: bool) -> Event {
        Event::SubagentStarted {
            call_id: call.into(),
            task_id: Some(format!("t-{call}")),
            agent: AgentRef::Acp(agent.into()),
            input: "review it".into(),
            code_review: true,
            background: true,
            session: None,
            batch_id: Some("b1".into()),
            queued,
        }
    }

    fn batch_started() -> Event {
        Event::BatchStarted {
            batch_id: "b1".into(),
            tasks: 3,
            review: true,
        }
    }

    fn header(state: &State) -> &BatchHeader {
        state
            .cells
            .iter()
            .find_map(|c| match &c.kind {
                CellKind::Batch(h) => Some(&**h),
                _ => None,
            })
            .expect("a batch header")
    }

    fn box_of<'a>(state: &'a State, call: &str) -> &'a SubagentBox {
        state
            .cells
            .iter()
            .find_map(|c| match &c.kind {
                CellKind::Subagent(b) if b.call_id == call => Some(&**b),
                _ => None,
            })
            .expect("the box")
    }

    fn activity(activity: Activity) -> Event {
        Event::SubagentActivity {
            call_id: "c1".into(),
            activity,
        }
    }

    fn the_box(state: &State) -> &SubagentBox {
        state
            .cells
            .iter()
            .find_map(|c| match &c.kind {
                CellKind::Subagent(b) => Some(&**b),
                _ => None,
            })
            .expect("a box")
    }

    fn snapshot(tool_calls: u32, state: TaskState, waiting: bool) -> Event {
        Event::TaskProgress {
            call_id: "c1".into(),
            task_id: Some("t1".into()),
            summary: Summary {
                state,
                tool_calls,
                last_activity: Some("⚙ Read a.rs".into()),
                severity: None,
                waiting,
                cancelling: false,
                usage: None,
                share: None,
            },
        }
    }

    #[test]
    fn session_info_sets_the_status_line() {
        let mut s = State::new();
        apply(
            &mut s,
            0,
            Event::SessionInfo {
                model: Some("script:x".into()),
                agents: vec!["fake".into()],
            },
        );
        assert_eq!(
            (s.model.as_deref(), &s.agents[..]),
            (Some("script:x"), &["fake".to_string()][..])
        );
    }

    #[test]
    fn messages_open_cells_and_deltas_join_until_the_end() {
        let mut s = State::new();
        apply(
            &mut s,
            1,
            Event::UserMessage {
                text: "hi\x1b]0;x\x07".into(),
            },
        );
        apply(&mut s, 2, Event::AssistantDelta { text: "he".into() });
        apply(&mut s, 3, Event::AssistantDelta { text: "llo".into() });
        apply(&mut s, 4, Event::AssistantEnd);
        apply(&mut s, 5, Event::AssistantDelta { text: "new".into() });
        let kinds: Vec<&CellKind> = s.cells.iter().map(|c| &c.kind).collect();
        assert_eq!(
            kinds,
            [
                &CellKind::User { text: "hi".into() },
                &CellKind::Assistant {
                    text: "hello".into(),
                    done: true
                },
                &CellKind::Assistant {
                    text: "new".into(),
                    done: false
                },
            ]
        );
        assert_eq!((s.now, s.applied), (5, 5));
    }

    #[test]
    fn turn_started_and_ended_drive_the_working_mark() {
        let mut s = State::new();
        apply(&mut s, 1, Event::TurnStarted);
        assert!(s.turn_running);
        apply(
            &mut s,
            2,
            Event::TurnEnded {
                stop_reason: StopReason::Cancelled,
            },
        );
        assert!(!s.turn_running);
    }

    #[test]
    fn tool_calls_are_a_line_then_their_result() {
        let mut s = State::new();
        apply(
            &mut s,
            1,
            Event::ToolCallStarted {
                id: "1".into(),
                name: "subagent_status".into(),
                summary: "task_id: t1".into(),
            },
        );
        apply(
            &mut s,
            2,
            Event::ToolCallFinished {
                id: "1".into(),
                ok: false,
                summary: "unknown task".into(),
            },
        );
        assert_eq!(
            s.cells[0].kind,
            CellKind::Tool {
                name: "subagent_status".into(),
                summary: "task_id: t1".into(),
                result: Some((false, "unknown task".into())),
            }
        );
    }

    #[test]
    fn subagent_started_opens_a_box_and_a_task() {
        let mut s = State::new();
        apply(&mut s, 7, started(true));
        let b = the_box(&s);
        assert_eq!(b.agent, AgentRef::Acp("fake".into()), "sanitised");
        assert!(b.running() && b.code_review && b.background);
        assert_eq!(s.running(), 1);
        assert_eq!(s.tasks[0].task_id, "t1");
        assert_eq!(s.tasks[0].input, "review it", "the first line");
        assert_eq!(s.tasks[0].started, 7);
        assert_eq!(s.latest_running_call().as_deref(), Some("c1"));
    }

    fn usage_snapshot(call: &str, used: u64, tokens: i64, cost: f64, currency: &str) -> Event {
        let cost = Cost {
            amount: cost,
            currency: currency.into(),
        };
        Event::TaskProgress {
            call_id: call.into(),
            task_id: Some(format!("t-{call}")),
            summary: Summary {
                usage: Some(Usage {
                    used,
                    size: Some(200_000),
                    cost: Some(cost.clone()),
                }),
                share: Some(UsageShare {
                    tokens,
                    cost: Some(cost),
                }),
                ..Summary::default()
            },
        }
    }

    #[test]
    fn usage_is_copied_from_the_board_and_added_up_per_batch_and_session() {
        let mut s = State::new();
        apply(&mut s, 1, batch_started());
        apply(&mut s, 2, member("c1", "a", false));
        apply(&mut s, 2, member("c2", "b", false));
        // The activity itself changes nothing: the board's snapshot does.
        apply(
            &mut s,
            3,
            Event::SubagentActivity {
                call_id: "c1".into(),
                activity: Activity::Usage {
                    usage: Usage {
                        used: 9,
                        ..Usage::default()
                    },
                },
            },
        );
        assert_eq!(box_of(&s, "c1").usage, None);
        assert_eq!(s.usage_total(), None, "no usage, no total");
        apply(&mut s, 4, usage_snapshot("c1", 1_000, 1_000, 0.01, "USD"));
        // A resumed session: the box shows the session's figures, its
        // share only what this call added.
        apply(
            &mut s,
            5,
            usage_snapshot("c2", 3_000, 500, 0.02, "USD\x1b[31m"),
        );
        let b = box_of(&s, "c2");
        assert_eq!(b.usage.as_ref().unwrap().used, 3_000);
        assert_eq!(
            b.usage.as_ref().unwrap().cost.as_ref().unwrap().currency,
            "USD",
            "sanitised"
        );
        assert_eq!(
            s.tasks[1].summary.usage, b.usage,
            "the panel shows the same"
        );
        assert_eq!(header(&s).members[1].share, b.share);
        let total = header(&s).usage_total().unwrap();
        assert_eq!(total.tokens, 1_500);
        assert_eq!(total.costs.len(), 1);
        assert!((total.costs[0].amount - 0.03).abs() < 1e-9);
        // A call outside the batch counts for the session, not the batch;
        // each currency adds up on its own.
        apply(
            &mut s,
            6,
            Event::SubagentStarted {
                call_id: "solo".into(),
                task_id: Some("t-solo".into()),
                agent: AgentRef::Internal,
                input: "x".into(),
                code_review: false,
                background: false,
                session: None,
                batch_id: None,
                queued: false,
            },
        );
        apply(&mut s, 7, usage_snapshot("solo", 2_000, 2_000, 2.0, "EUR"));
        assert_eq!(header(&s).usage_total().unwrap().tokens, 1_500);
        let session = s.usage_total().unwrap();
        assert_eq!(session.tokens, 3_500);
        assert_eq!(
            session
                .costs
                .iter()
                .map(|c| c.currency.as_str())
                .collect::<Vec<_>>(),
            ["USD", "EUR"]
        );
        apply(&mut s, 8, usage_snapshot("nobody", 5, 5, 5.0, "USD"));
        assert_eq!(
            s.usage_total().unwrap().tokens,
            3_500,
            "an unknown call adds nothing"
        );
    }

    #[test]
    fn batch_started_opens_a_header_that_groups_its_boxes() {
        let mut s = State::new();
        apply(&mut s, 1, batch_started());
        apply(&mut s, 2, member("c1", "a", false));
        apply(&mut s, 2, member("c2", "b", true));
        let h = header(&s);
        assert_eq!((h.tasks, h.review, h.finished), (3, true, None));
        assert_eq!(
            h.members
                .iter()
                .map(|m| (m.call_id.as_str(), m.agent.as_str(), m.state))
                .collect::<Vec<_>>(),
            [
                ("c1", "a", TaskState::Running),
                ("c2", "b", TaskState::Queued)
            ]
        );
        assert!(
            matches!(s.cells[0].kind, CellKind::Batch(_)),
            "the header comes first"
        );
        for call in ["c1", "c2"] {
            assert_eq!(
                box_of(&s, call).batch,
                Some(Grouped {
                    batch_id: "b1".into(),
                    tint: None,
                    last: false
                })
            );
        }
        assert!(box_of(&s, "c2").queued());
        assert_eq!((s.running(), s.queued()), (2, 1));
        assert_eq!(s.tasks[1].summary.state, TaskState::Queued, "the panel too");
        // The board's snapshots reach the header's members.
        apply(
            &mut s,
            3,
            Event::TaskProgress {
                call_id: "c1".into(),
                task_id: Some("t-c1".into()),
                summary: Summary {
                    state: TaskState::Done,
                    severity: Some(Severity::Red),
                    ..Summary::default()
                },
            },
        );
        let m = &header(&s).members[0];
        assert_eq!(
            (m.state, m.severity),
            (TaskState::Done, Some(Severity::Red))
        );
        // A box of an unknown batch is drawn on its own.
        apply(
            &mut s,
            4,
            Event::SubagentStarted {
                call_id: "c3".into(),
                task_id: None,
                agent: AgentRef::Acp("c".into()),
                input: "x".into(),
                code_review: false,
                background: false,
                session: None,
                batch_id: Some("b9".into()),
                queued: false,
            },
        );
        assert_eq!(box_of(&s, "c3").batch, None);
    }

    #[test]
    fn subagent_dequeued_starts_a_queued_box_and_its_clock() {
        let mut s = State::new();
        apply(&mut s, 1, batch_started());
        apply(&mut s, 2, member("c1", "a", true));
        assert_eq!((s.running(), s.queued()), (1, 1));
        apply(
            &mut s,
            50,
            Event::SubagentDequeued {
                call_id: "c1".into(),
            },
        );
        let b = box_of(&s, "c1");
        assert_eq!(
            (b.state, b.started, b.queued()),
            (TaskState::Running, 50, false)
        );
        assert_eq!((s.running(), s.queued()), (1, 0));
        assert_eq!(
            (s.tasks[0].started, s.tasks[0].summary.state),
            (50, TaskState::Running)
        );
        // Only a queued box is dequeued.
        apply(
            &mut s,
            60,
            Event::SubagentDequeued {
                call_id: "c1".into(),
            },
        );
        assert_eq!(box_of(&s, "c1").started, 50);
        // A queued box that finishes (cancelled while queued) leaves the count.
        apply(&mut s, 70, member("c2", "b", true));
        apply(
            &mut s,
            80,
            Event::SubagentFinished {
                call_id: "c2".into(),
                output: "b: cancelled while queued".into(),
                stop_reason: StopReason::Cancelled,
                severity: None,
            },
        );
        assert_eq!((s.running(), s.queued()), (1, 0));
    }

    #[test]
    fn batch_finished_totals_and_tints_the_group() {
        let mut s = State::new();
        apply(&mut s, 1, batch_started());
        apply(&mut s, 2, member("c1", "a", false));
        apply(&mut s, 2, member("c2", "b", false));
        apply(
            &mut s,
            9,
            Event::BatchFinished {
                batch_id: "b1".into(),
                total: 3,
                succeeded: 1,
                failed: 2,
                worst_verdict: Some(Severity::Yellow),
            },
        );
        let h = header(&s);
        assert_eq!(h.finished, Some((1, 2, Some(Severity::Yellow))));
        assert_eq!(h.tint(), Some(Severity::Yellow));
        let groups: Vec<_> = ["c1", "c2"]
            .iter()
            .map(|c| box_of(&s, c).batch.clone().unwrap())
            .collect();
        assert!(groups.iter().all(|g| g.tint == Some(Severity::Yellow)));
        assert_eq!(
            groups.iter().map(|g| g.last).collect::<Vec<_>>(),
            [false, true],
            "the last box closes the group"
        );
    }

    #[test]
    fn review_quorum_tints_the_group_with_its_verdict() {
        use crate::event::ReviewerVerdict;
        let mut s = State::new();
        apply(&mut s, 1, batch_started());
        apply(&mut s, 2, member("c1", "a", false));
        let verdict = |agent: &str, severity| ReviewerVerdict {
            agent: agent.into(),
            call_id: None,
            severity: Some(severity),
            failed: false,
        };
        apply(
            &mut s,
            9,
            Event::ReviewQuorum {
                batch_id: "b1".into(),
                quorum: Quorum::of(vec![
                    verdict("a\x1b[2J", Severity::Red),
                    verdict("b", Severity::Green),
                ]),
            },
        );
        let h = header(&s);
        let q = h.quorum.as_ref().unwrap();
        assert_eq!((q.label().as_str(), q.unanimous()), ("red · 1 of 2", false));
        assert_eq!(q.verdicts[0].agent, "a", "sanitised");
        assert_eq!(h.tint(), Some(Severity::Red));
        assert_eq!(
            box_of(&s, "c1").batch.as_ref().unwrap().tint,
            Some(Severity::Red)
        );
    }

    #[test]
    fn subagent_session_sets_the_badge() {
        let mut s = State::new();
        apply(&mut s, 1, started(false));
        apply(
            &mut s,
            2,
            Event::SubagentSession {
                call_id: "c1".into(),
                session: SessionKind::Resumed,
                session_id: Some("s".into()),
            },
        );
        assert_eq!(the_box(&s).session, Some(SessionKind::Resumed));
    }

    #[test]
    fn activity_fills_the_box_but_never_counts() {
        let mut s = State::new();
        apply(&mut s, 1, started(true));
        apply(
            &mut s,
            2,
            activity(Activity::ToolCall {
                id: "a".into(),
                title: "Read a.rs".into(),
                status: ToolStatus::Pending,
                detail: Default::default(),
            }),
        );
        apply(
            &mut s,
            3,
            activity(Activity::ToolCallUpdate {
                id: "a".into(),
                title: None,
                status: Some(ToolStatus::Completed),
                detail: Default::default(),
            }),
        );
        apply(
            &mut s,
            4,
            activity(Activity::MessageChunk {
                text: "Looks ".into(),
            }),
        );
        apply(
            &mut s,
            5,
            activity(Activity::MessageChunk {
                text: "fine.".into(),
            }),
        );
        apply(
            &mut s,
            6,
            activity(Activity::Plan {
                entries: vec![PlanEntry {
                    content: "step".into(),
                    status: PlanStatus::InProgress,
                }],
            }),
        );
        apply(
            &mut s,
            7,
            activity(Activity::PermissionRequest {
                id: "p".into(),
                title: "Delete build/".into(),
                options: vec!["Allow".into(), "Reject".into()],
                detail: Default::default(),
            }),
        );
        let b = the_box(&s);
        assert_eq!(
            b.activity.iter().cloned().collect::<Vec<_>>(),
            [
                ActivityLine::Tool {
                    id: "a".into(),
                    title: "Read a.rs".into(),
                    status: ToolStatus::Completed
                },
                ActivityLine::Text("Looks fine.".into()),
            ]
        );
        assert_eq!(b.plan.len(), 1);
        assert_eq!(b.tool_calls, 0, "counts come from the board's snapshot");
        assert_eq!(s.tasks[0].summary.tool_calls, 0);
        assert_eq!(s.pending_permission(), Some(("c1".into(), "p".into(), 2)));
        apply(
            &mut s,
            8,
            activity(Activity::PermissionResolved {
                id: "p".into(),
                outcome: "Allow".into(),
            }),
        );
        assert_eq!(s.pending_permission(), None);
        assert_eq!(
            the_box(&s).activity.back(),
            Some(&ActivityLine::Note(
                "permission Allow: Delete build/".into()
            ))
        );
    }

    #[test]
    fn subagent_cancelling_shows_through_the_boards_snapshot() {
        let mut s = State::new();
        apply(&mut s, 1, started(true));
        // The event itself changes nothing: the board's snapshot does.
        apply(
            &mut s,
            2,
            Event::SubagentCancelling {
                call_id: "c1".into(),
            },
        );
        assert!(!the_box(&s).cancelling);
        let Event::TaskProgress {
            call_id,
            task_id,
            mut summary,
        } = snapshot(0, TaskState::Running, false)
        else {
            unreachable!()
        };
        summary.cancelling = true;
        apply(
            &mut s,
            3,
            Event::TaskProgress {
                call_id,
                task_id,
                summary,
            },
        );
        assert!(the_box(&s).cancelling);
        assert!(s.tasks[0].summary.cancelling);
        assert_eq!(s.cancelling(), 1);
    }

    #[test]
    fn task_progress_is_copied_into_box_and_panel() {
        let mut s = State::new();
        apply(&mut s, 1, started(true));
        apply(&mut s, 2, snapshot(3, TaskState::Running, true));
        assert_eq!(the_box(&s).tool_calls, 3);
        let task = &s.tasks[0].summary;
        assert_eq!((task.tool_calls, task.waiting), (3, true));
        assert_eq!(task.last_activity.as_deref(), Some("⚙ Read a.rs"));
        // Copied, never added to: the same snapshot twice is the same.
        apply(&mut s, 3, snapshot(3, TaskState::Running, false));
        assert_eq!(
            (the_box(&s).tool_calls, s.tasks[0].summary.tool_calls),
            (3, 3)
        );
        assert!(!s.tasks[0].summary.waiting);
        apply(&mut s, 9, snapshot(3, TaskState::Done, false));
        assert_eq!(s.tasks[0].finished, Some(9));
    }

    #[test]
    fn subagent_finished_closes_the_box() {
        let mut s = State::new();
        apply(&mut s, 1, started(false));
        apply(
            &mut s,
            5,
            Event::SubagentFinished {
                call_id: "c1".into(),
                output: "Done.".into(),
                stop_reason: StopReason::Refusal,
                severity: Some(Severity::Red),
            },
        );
        let b = the_box(&s);
        assert_eq!(b.finished, Some(5));
        assert_eq!(b.output.as_deref(), Some("Done."));
        assert_eq!(b.stop_reason, Some(StopReason::Refusal));
        assert_eq!(b.severity, Some(Severity::Red));
        assert_eq!(s.running(), 0);
    }

    #[test]
    fn task_reported_shows_the_report_of_its_box() {
        let mut s = State::new();
        apply(&mut s, 1, started(true));
        apply(
            &mut s,
            5,
            Event::SubagentFinished {
                call_id: "c1".into(),
                output: "All good.".into(),
                stop_reason: StopReason::EndTurn,
                severity: Some(Severity::Green),
            },
        );
        apply(
            &mut s,
            6,
            Event::TaskReported {
                task_id: "t1".into(),
            },
        );
        assert!(s.tasks[0].reported);
        assert_eq!(
            s.cells.last().unwrap().kind,
            CellKind::TaskReport {
                task_id: "t1".into(),
                agent: "fake".into(),
                output: "All good.".into(),
                stop_reason: StopReason::EndTurn,
                severity: Some(Severity::Green),
            }
        );
        // An unknown task is ignored.
        let cells = s.cells.len();
        apply(
            &mut s,
            7,
            Event::TaskReported {
                task_id: "t9".into(),
            },
        );
        assert_eq!(s.cells.len(), cells);
    }

    #[test]
    fn model_retry_shows_until_the_model_answers() {
        let mut s = State::new();
        apply(
            &mut s,
            1,
            Event::ModelRetry {
                attempt: 2,
                wait_ms: 1500,
                reason: "rate limited".into(),
            },
        );
        assert_eq!(s.retry, Some((2, 1500, "rate limited".into())));
        apply(&mut s, 2, Event::AssistantDelta { text: "ok".into() });
        assert_eq!(s.retry, None);
    }

    #[test]
    fn usage_adds_up() {
        let mut s = State::new();
        for t in 0..2 {
            apply(
                &mut s,
                t,
                Event::Usage {
                    input_tokens: 10,
                    output_tokens: 3,
                },
            );
        }
        assert_eq!((s.input_tokens, s.output_tokens), (20, 6));
    }

    #[test]
    fn notices_and_errors_are_cells() {
        let mut s = State::new();
        apply(
            &mut s,
            1,
            Event::Notice {
                level: NoticeLevel::Warning,
                text: "careful".into(),
            },
        );
        apply(
            &mut s,
            2,
            Event::Error {
                text: "broke".into(),
            },
        );
        assert_eq!(
            s.cells.iter().map(|c| c.kind.clone()).collect::<Vec<_>>(),
            [
                CellKind::Notice {
                    level: NoticeLevel::Warning,
                    text: "careful".into()
                },
                CellKind::Error {
                    text: "broke".into()
                }
            ]
        );
    }

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
    fn subagent_followup_reopens_the_box_and_its_task() {
        let mut s = State::new();
        apply(&mut s, 1, started(true));
        apply(
            &mut s,
            5,
            Event::SubagentFinished {
                call_id: "c1".into(),
                output: "first".into(),
                stop_reason: StopReason::EndTurn,
                severity: Some(Severity::Green),
            },
        );
        apply(&mut s, 6, snapshot(0, TaskState::Done, false));
        assert_eq!(s.running(), 0);
        apply(
            &mut s,
            8,
            Event::SubagentFollowup {
                call_id: "c1".into(),
                input: "and the tests?\x1b[31m".into(),
            },
        );
        let b = the_box(&s);
        assert!(b.running(), "the box runs again");
        assert_eq!((b.output.as_deref(), b.severity), (None, None));
        assert_eq!(
            b.activity.back(),
            Some(&ActivityLine::Note("› follow-up: and the tests?".into()))
        );
        assert_eq!(
            b.log.entries.back(),
            Some(&LogEntry::Turn("and the tests?".into()))
        );
        assert_eq!(s.running(), 1);
        assert_eq!(s.tasks[0].summary.state, TaskState::Running);
        assert_eq!(s.tasks[0].finished, None);
        // A follow-up for an unknown call changes nothing.
        apply(
            &mut s,
            9,
            Event::SubagentFollowup {
                call_id: "c9".into(),
                input: "x".into(),
            },
        );
        assert_eq!(s.running(), 1);
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

    #[test]
    fn permission_requests_keep_what_they_ask_and_the_answer() {
        let mut s = State::new();
        apply(&mut s, 1, started(true));
        apply(
            &mut s,
            2,
            activity(Activity::PermissionRequest {
                id: "p".into(),
                title: "write_text_file".into(),
                options: vec!["Allow".into()],
                detail: Box::new(ToolDetail {
                    kind: Some("edit".into()),
                    locations: vec!["/w/a.txt".into()],
                    ..ToolDetail::default()
                }),
            }),
        );
        assert_eq!(the_box(&s).permission_detail.locations, vec!["/w/a.txt"]);
        apply(&mut s, 3, snapshot(0, TaskState::Running, true));
        assert!(the_box(&s).waiting);
        assert_eq!(s.needs_you(), 1);
        apply(
            &mut s,
            4,
            activity(Activity::PermissionResolved {
                id: "p".into(),
                outcome: "Allow".into(),
            }),
        );
        apply(&mut s, 5, snapshot(0, TaskState::Running, false));
        let b = the_box(&s);
        assert_eq!(b.permission_detail, ToolInfo::default());
        assert!(matches!(
            &b.log.entries[0],
            LogEntry::Permission { outcome: Some(o), info, .. } if o == "Allow" && info.locations == ["/w/a.txt"]
        ));
        assert_eq!(s.needs_you(), 0);
    }

    /// Each event kind above has its test; a new kind must get one.
    fn child(title: Option<&str>, state: Option<ChildState>, can_cancel: bool) -> Event {
        Event::SubagentChild {
            call_id: "c1".into(),
            child_id: "s-1-child".into(),
            title: title.map(Into::into),
            description: Some("finds\x1b[2J tests".into()),
            state,
            can_cancel,
        }
    }

    #[test]
    fn subagent_child_opens_a_child_box_in_its_call_and_updates_replace_it() {
        let mut s = State::new();
        apply(&mut s, 1, started(false));
        apply(
            &mut s,
            2,
            child(Some("scout"), Some(ChildState::Running), true),
        );
        let c = &the_box(&s).children[0];
        assert_eq!(c.name(), "scout");
        assert_eq!(c.description.as_deref(), Some("finds tests"), "sanitised");
        assert_eq!(c.state, Some(ChildState::Running));
        assert!(c.can_cancel);
        // A later announcement of the same child replaces what it says.
        apply(&mut s, 3, child(None, Some(ChildState::Idle), false));
        let b = the_box(&s);
        assert_eq!(b.children.len(), 1, "the same child");
        assert_eq!(b.children[0].name(), "s-1-child", "its id without a title");
        assert_eq!(b.children[0].state, Some(ChildState::Idle));
        assert!(!b.children[0].can_cancel);
        // A child of an unknown call is ignored.
        apply(
            &mut s,
            4,
            Event::SubagentChild {
                call_id: "nope".into(),
                child_id: "x".into(),
                title: None,
                description: None,
                state: None,
                can_cancel: false,
            },
        );
        assert_eq!(the_box(&s).children.len(), 1);
    }

    #[test]
    fn subagent_child_activity_goes_to_the_child_not_the_call() {
        let mut s = State::new();
        apply(&mut s, 1, started(false));
        apply(
            &mut s,
            2,
            child(Some("scout"), Some(ChildState::Running), true),
        );
        let on_child = |activity| Event::SubagentChildActivity {
            call_id: "c1".into(),
            child_id: "s-1-child".into(),
            activity,
        };
        apply(
            &mut s,
            3,
            on_child(Activity::MessageChunk {
                text: "looking\n".into(),
            }),
        );
        apply(
            &mut s,
            4,
            on_child(Activity::ToolCall {
                id: "k1".into(),
                title: "Delete target/".into(),
                status: ToolStatus::Pending,
                detail: Default::default(),
            }),
        );
        apply(
            &mut s,
            5,
            on_child(Activity::ToolCallUpdate {
                id: "k1".into(),
                title: None,
                status: Some(ToolStatus::Completed),
                detail: Default::default(),
            }),
        );
        apply(
            &mut s,
            6,
            on_child(Activity::PermissionRequest {
                id: "s-1-child/k2".into(),
                title: "scout: Run make".into(),
                options: vec!["Allow".into()],
                detail: Default::default(),
            }),
        );
        let b = the_box(&s);
        assert!(
            b.activity.is_empty(),
            "the call's own lines: {:?}",
            b.activity
        );
        assert!(
            b.permission.is_none(),
            "the call's prompt comes from its own activity"
        );
        assert_eq!(
            b.children[0].activity,
            VecDeque::from(vec![
                ActivityLine::Text("looking\n".into()),
                ActivityLine::Tool {
                    id: "k1".into(),
                    title: "Delete target/".into(),
                    status: ToolStatus::Completed,
                },
                ActivityLine::Note("asks permission: Run make".into()),
            ])
        );
    }

    #[test]
    fn child_progress_copies_the_boards_snapshot() {
        let mut s = State::new();
        apply(&mut s, 1, started(false));
        apply(&mut s, 2, child(Some("scout"), None, false));
        let summary = Summary {
            state: TaskState::Running,
            tool_calls: 2,
            last_activity: Some("⚙ Read\x1b[31m".into()),
            severity: None,
            waiting: true,
            cancelling: false,
            usage: None,
            share: None,
        };
        apply(
            &mut s,
            3,
            Event::ChildProgress {
                call_id: "c1".into(),
                child_id: "s-1-child".into(),
                summary: summary.clone(),
            },
        );
        let c = &the_box(&s).children[0];
        assert_eq!(c.summary.tool_calls, 2);
        assert!(c.summary.waiting);
        assert_eq!(c.summary.last_activity.as_deref(), Some("⚙ Read"));
    }

    #[test]
    fn every_event_kind_is_covered() {
        let covered = [
            "session_info",
            "user_message",
            "assistant_delta",
            "assistant_end",
            "assistant_writing_call",
            "turn_started",
            "turn_ended",
            "tool_call_started",
            "tool_call_finished",
            "subagent_started",
            "subagent_dequeued",
            "subagent_cancelling",
            "batch_started",
            "batch_finished",
            "review_quorum",
            "subagent_session",
            "subagent_followup",
            "subagent_activity",
            "subagent_child",
            "subagent_child_activity",
            "child_progress",
            "subagent_finished",
            "task_progress",
            "task_reported",
            "model_retry",
            "usage",
            "notice",
            "error",
        ];
        assert_eq!(covered, Event::TYPES);
    }
}
