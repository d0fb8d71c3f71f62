//! The event vocabulary: everything that happens in a quorum session.
//!
//! Events are the one contract between the engine (chat loop, dispatcher,
//! ACP client, replay player) and every front end (TUI, headless printer,
//! recorder). Each event carries its time in milliseconds since the session
//! started, so the reducer never reads a clock.
//!
//! On disk an event is one JSON object: `{"t": 1200, "type": "user_message",
//! "text": "..."}`.

use serde::{Deserialize, Serialize};

/// What a sub-agent does, streamed into its box: its activity and what
/// that carries (tool calls' detail, plans, usage, commands, modes).
mod activity;
/// The arena: writers compared, and the winner rule.
pub mod arena;
/// Spending caps: what may be spent, what was, and what a cap reached says.
pub mod budget;
/// Builders of events for tests, benchmarks and importers.
pub mod build;
/// A writer's check: its counts and its box line.
mod check;
/// A quorum's verdict once it checked its own findings, and its labels.
mod checked;
/// What reviewers found, and where (a review's findings, a quorum's merged).
pub mod finding;
/// The forms agents ask the person to fill in, and their validation.
pub mod form;
/// Notifications: their kinds, and what the event stream makes due.
pub mod notify;
/// A review quorum: each reviewer's verdict, and the one they make.
mod quorum;
/// The slash commands: one table of names, usage and help.
mod slash;
/// Internally tagged enums read without serde's buffering.
mod tagged;

pub use activity::*;
pub use check::*;
pub use quorum::*;
pub use slash::*;
pub(crate) use tagged::Text;

/// An event with its time: milliseconds since the session started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stamped {
    pub t: u64,
    #[serde(flatten)]
    pub event: Event,
}

impl Stamped {
    pub fn new(t: u64, event: Event) -> Self {
        Self { t, event }
    }
}

/// Who runs a sub-agent call: the internal nested agent, or an external
/// harness over ACP, by its registry name.
///
/// JSON: `"internal"` or `{"acp": "claude"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentRef {
    Internal,
    Acp(String),
}

impl AgentRef {
    /// The name shown on screen: the ACP agent's name, or `internal`.
    pub fn name(&self) -> &str {
        match self {
            AgentRef::Internal => "internal",
            AgentRef::Acp(name) => name,
        }
    }
}

/// How a sub-agent's session was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionKind {
    /// A new session (first call, or `continue_session: false`).
    Fresh,
    /// `session/resume` of the last successful session.
    Resumed,
    /// `session/load` of the last successful session.
    Loaded,
    /// Resume or load failed for a stored id; a new session was opened.
    NewAfterStale,
    /// The stored session was still open on the agent's live connection:
    /// prompted as it is, with no load or resume.
    Continued,
}

impl SessionKind {
    pub fn label(self) -> &'static str {
        match self {
            SessionKind::Fresh => "fresh",
            SessionKind::Resumed => "resumed",
            SessionKind::Loaded => "loaded",
            SessionKind::NewAfterStale => "new after stale session",
            SessionKind::Continued => "continued",
        }
    }
}

/// A code review's verdict, parsed from the report's severity header.
/// Ordered from best to worst: `green < yellow < red`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Green,
    Yellow,
    Red,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Green => "green",
            Severity::Yellow => "yellow",
            Severity::Red => "red",
        }
    }
}

/// The call id under which the chat's conductor's permission requests are
/// answered (`Op::Answer`): it has no box of its own.
pub const CHAT_CALL: &str = "chat";

/// Why a turn ended: the ACP stop reasons, plus `error` for a turn that
/// failed (the agent died, a request failed, the model could not answer).
///
/// JSON: `"end_turn"`, `"max_tokens"`, `"max_turn_requests"`, `"refusal"`,
/// `"cancelled"`, `"error"`, and quorum's own `"interrupted"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    #[default]
    EndTurn,
    MaxTokens,
    MaxTurnRequests,
    Refusal,
    Cancelled,
    Error,
    /// quorum ended (quit, crash, lost terminal) while the turn ran; told
    /// when the session is continued. The turn's partial output is kept.
    Interrupted,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::MaxTokens => "max_tokens",
            StopReason::MaxTurnRequests => "max_turn_requests",
            StopReason::Refusal => "refusal",
            StopReason::Cancelled => "cancelled",
            StopReason::Error => "error",
            StopReason::Interrupted => "interrupted",
        }
    }

    /// The turn reached the agent and got an answer (anything but
    /// `error`): its session may be resumed.
    pub fn answered(self) -> bool {
        !matches!(self, StopReason::Error | StopReason::Interrupted)
    }

    /// A failure worth showing in red (`error`, `refusal`).
    pub fn is_failure(self) -> bool {
        matches!(self, StopReason::Error | StopReason::Refusal)
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How one sub-agent call ended: the one result type, from the ACP turn
/// or the internal agent up to the tool's answer and `quorum call --json`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Outcome {
    /// The agent's final message (its text after its last tool call), as it
    /// wrote it: a review's severity header is still there. For a call
    /// that failed, what went wrong.
    pub output: String,
    pub stop_reason: StopReason,
    /// A code review's verdict, parsed from the header.
    pub severity: Option<Severity>,
    /// A code review's findings, parsed from the report (checked,
    /// sanitised, bounded).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<finding::Finding>,
    /// How the session was opened (`None` if none was).
    pub session: Option<SessionKind>,
    pub session_id: Option<String>,
    /// A worktree task's branch, worktree and diffstat.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub work: Option<Work>,
}

impl Outcome {
    /// A call that ended with `stop_reason` and `output`, with no session.
    pub fn new(stop_reason: StopReason, output: impl Into<String>) -> Self {
        Self {
            output: output.into(),
            stop_reason,
            ..Self::default()
        }
    }

    /// A call that failed: `error` and what went wrong.
    pub fn error(message: impl Into<String>) -> Self {
        Self::new(StopReason::Error, message)
    }
}

/// A command from a front end to the engine.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// The person sent a message (a chat message, `@NAME message`, or a
    /// `/command`).
    Submit(String),
    /// Esc: cancel the running chat turn, else this sub-agent call (by call
    /// id; empty: none).
    Cancel(String),
    /// Answer a permission request: an option index, or `None` to cancel.
    Answer {
        call_id: String,
        request_id: String,
        option: Option<usize>,
    },
    /// Cancel one background task (from the side panel), by task id.
    CancelTask(String),
    /// Cancel the work of a call's child session (a nested sub-agent),
    /// where its agent allows it.
    CancelChild { call_id: String, child_id: String },
    /// Answer an elicitation (a form or a URL) shown in a call's box.
    Elicit {
        call_id: String,
        request_id: String,
        answer: ElicitAnswer,
    },
}

/// The person's answer to an elicitation.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitAnswer {
    /// Accept, with the form's values by field name (empty for a URL).
    Accept(serde_json::Map<String, serde_json::Value>),
    Decline,
    Cancel,
}

/// The task board's summary of one call: what a box's footer and the side
/// panel show of it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Summary {
    pub state: TaskState,
    #[serde(default)]
    pub tool_calls: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_activity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    /// Waiting for the person to answer a permission request.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub waiting: bool,
    /// Asked to stop, and not stopped yet.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cancelling: bool,
    /// Context and cost, as the agent last reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// This call's part of the session totals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<UsageShare>,
}

/// State of a sub-agent call or background task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// A batch task waiting for a free place (`max_parallel`).
    Queued,
    #[default]
    Running,
    Done,
    Failed,
    Cancelled,
    /// It was running when quorum ended; the session was continued since.
    Interrupted,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Queued => "queued",
            TaskState::Running => "running",
            TaskState::Done => "done",
            TaskState::Failed => "failed",
            TaskState::Cancelled => "cancelled",
            TaskState::Interrupted => "interrupted",
        }
    }

    /// The task state that a finished call with this stop reason leaves.
    pub fn from_stop_reason(stop_reason: StopReason) -> Self {
        match stop_reason {
            StopReason::Cancelled => TaskState::Cancelled,
            StopReason::Error => TaskState::Failed,
            StopReason::Interrupted => TaskState::Interrupted,
            _ => TaskState::Done,
        }
    }

    /// Queued or running: not ended yet.
    pub fn active(self) -> bool {
        matches!(self, TaskState::Queued | TaskState::Running)
    }
}

/// A child session's work state, as its agent reports it
/// (`subagent_update`'s `state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildState {
    Running,
    /// Ready for another prompt: its work is done for now.
    Idle,
    /// Blocked on the person (a permission request).
    RequiresAction,
    /// The agent cannot tell.
    Unknown,
}

impl ChildState {
    pub fn as_str(self) -> &'static str {
        match self {
            ChildState::Running => "running",
            ChildState::Idle => "idle",
            ChildState::RequiresAction => "needs you",
            ChildState::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeLevel {
    #[default]
    Info,
    Warning,
}

/// Declares [`Event`] with each variant's `type` name written once, as
/// `"name" => Variant`: that name is the variant's serde tag, and
/// [`Event::type_name`] and [`Event::TYPES`] are made from it.
macro_rules! events {
    (
        $(#[$meta:meta])*
        pub enum Event {
            $(
                $(#[$vmeta:meta])*
                $name:literal => $variant:ident $({
                    $( $(#[$fmeta:meta])* $field:ident : $fty:ty ),* $(,)?
                })?,
            )*
        }
    ) => {
        tagged::tagged_enum! {
            #[tag = "type"]
            #[twin()]
            $(#[$meta])*
            pub enum Event {
                $(
                    $(#[$vmeta])*
                    #[serde(rename = $name)]
                    $variant $({ $( $(#[$fmeta])* $field : $fty ),* })?,
                )*
            }
        }

        impl Event {
            /// Every event type name as written in the `type` field.
            pub const TYPES: &'static [&'static str] = &[$($name),*];

            /// This event's `type` name.
            pub fn type_name(&self) -> &'static str {
                match self {
                    $(Event::$variant { .. } => $name,)*
                }
            }
        }
    };
}

events! {
/// Everything that happens. Serialized with a `type` tag: the name given
/// to each variant (read by [`tagged`], the tag first or not).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum Event {
    /// What this session runs with, for the status line.
    "session_info" => SessionInfo {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        #[serde(default)]
        agents: Vec<String>,
    },
    /// The person sent a message.
    "user_message" => UserMessage {
        text: String,
    },
    /// A chunk of the main assistant's message.
    "assistant_delta" => AssistantDelta {
        text: String,
    },
    /// The main assistant's message is complete.
    "assistant_end" => AssistantEnd,
    /// The chat model is writing what may be a tool call as text (held
    /// back until its message ends): `bytes` so far.
    "assistant_writing_call" => AssistantWritingCall {
        bytes: u64,
    },
    /// The chat model starts working on a turn.
    "turn_started" => TurnStarted,
    /// The chat's turn ended (`end_turn`, `cancelled`, `max_tokens`,
    /// `max_turn_requests`, or `error`).
    "turn_ended" => TurnEnded {
        stop_reason: StopReason,
    },
    /// The main assistant called a tool (other than a sub-agent box).
    "tool_call_started" => ToolCallStarted {
        id: String,
        name: String,
        /// One-line summary of the arguments.
        #[serde(default)]
        summary: String,
    },
    "tool_call_finished" => ToolCallFinished {
        id: String,
        ok: bool,
        /// One-line summary of the result.
        #[serde(default)]
        summary: String,
    },
    /// A `subagent` call started: a box opens in the transcript.
    "subagent_started" => SubagentStarted {
        call_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_id: Option<String>,
        agent: AgentRef,
        input: String,
        #[serde(default)]
        code_review: bool,
        #[serde(default)]
        background: bool,
        /// How the session was opened, when known at start.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session: Option<SessionKind>,
        /// The batch this call is a task of: its box is grouped under the
        /// batch's header.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        batch_id: Option<String>,
        /// The call waits for a free place (`max_parallel`) before it runs;
        /// `subagent_dequeued` says when it starts.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        queued: bool,
        /// Its own cap, in USD (`max_cost`, else `[budget] task_usd`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_cost: Option<f64>,
    },
    /// A queued call got its place and runs from now.
    "subagent_dequeued" => SubagentDequeued {
        call_id: String,
    },
    /// A call its caller waited for went on in the background: from now
    /// on it is background task `task_id` (a side panel entry, a report
    /// when done), as if it had been started with `run_in_background`.
    /// Sent when an MCP host's call runs past `[mcp] sync_seconds`.
    "subagent_backgrounded" => SubagentBackgrounded {
        call_id: String,
        task_id: String,
    },
    /// The person asked a running call to stop: it is cancelling until its
    /// agent ends the turn (a second Esc ends the agent at once).
    "subagent_cancelling" => SubagentCancelling {
        call_id: String,
    },
    /// A batch of tasks (one `subagent` call with `tasks`) starts: the
    /// `subagent_started` of its tasks follow, each with its `batch_id`.
    "batch_started" => BatchStarted {
        batch_id: String,
        /// How many tasks it has, those that could not start included.
        tasks: u32,
        /// Every task is a code review: a quorum comes at the end.
        #[serde(default)]
        review: bool,
        /// An arena's writers: compared (`arena_compared`) once every one
        /// has finished; a continued session compares one it did not.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        arena: bool,
    },
    /// Every task of a batch has ended.
    "batch_finished" => BatchFinished {
        batch_id: String,
        total: u32,
        /// Tasks that ended their turn normally.
        succeeded: u32,
        /// The others: could not start, failed, cancelled, stopped early.
        failed: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worst_verdict: Option<Severity>,
    },
    /// A review batch's quorum: the worst verdict and how many reviewers
    /// gave it (sent before its `batch_finished`).
    "review_quorum" => ReviewQuorum {
        batch_id: String,
        #[serde(flatten)]
        quorum: Quorum,
        /// The reviewed diff, as the reviewers' prompts held it (at most
        /// [`finding::MAX_REVIEWED_DIFF`] bytes, a note at its end when cut): what
        /// the findings view shows (none in older transcripts).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<String>,
    },
    /// The call's session is open (sent when it was not known at start).
    "subagent_session" => SubagentSession {
        call_id: String,
        session: SessionKind,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<String>,
    },
    /// A follow-up message starts a new turn on a call's session (sent
    /// with `subagent_status`'s `message`, or `/msg TASK message`): its box
    /// reopens and runs again.
    "subagent_followup" => SubagentFollowup {
        call_id: String,
        input: String,
    },
    /// Something the sub-agent did.
    "subagent_activity" => SubagentActivity {
        call_id: String,
        activity: Activity,
    },
    /// The call's agent announced (or updated) a child session of its own,
    /// a nested sub-agent: its box is drawn inside the call's box. Later
    /// announcements of the same child replace what they carry.
    "subagent_child" => SubagentChild {
        call_id: String,
        /// The child's ACP session id.
        child_id: String,
        /// The parent's display title for the child.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// The child's work state as the agent reports it; `None` when it
        /// is not reported (or was cleared).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<ChildState>,
        /// The agent lets quorum cancel the child's work.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        can_cancel: bool,
    },
    /// Something a call's child session did.
    "subagent_child_activity" => SubagentChildActivity {
        call_id: String,
        child_id: String,
        activity: Activity,
    },
    /// The task board's summary of a child session changed (as
    /// `task_progress` for calls).
    "child_progress" => ChildProgress {
        call_id: String,
        child_id: String,
        #[serde(flatten)]
        summary: Summary,
    },
    /// The call ended: the one event that carries its output. `output` is
    /// the final report with any severity header already stripped.
    "subagent_finished" => SubagentFinished {
        call_id: String,
        output: String,
        stop_reason: StopReason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        severity: Option<Severity>,
        /// A code review's findings (none in older transcripts).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        findings: Vec<finding::Finding>,
    },
    /// The task board's summary of a call (and of its background task, if
    /// it is one) changed. A complete snapshot: the screen copies it, and
    /// box and side panel show the same numbers.
    "task_progress" => TaskProgress {
        call_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_id: Option<String>,
        #[serde(flatten)]
        summary: Summary,
    },
    /// A background task's report was delivered to the chat model (its
    /// output is the one its `subagent_finished` carried).
    "task_reported" => TaskReported {
        task_id: String,
    },
    /// The chat model's request is retried after a rate limit or a server
    /// error (shown in the status line until the model answers).
    "model_retry" => ModelRetry {
        attempt: u32,
        wait_ms: u64,
        reason: String,
    },
    /// The commands an agent announced while none of its calls ran (real
    /// agents send them when they have them): what Tab completes after
    /// `@NAME /`.
    "agent_commands" => AgentCommands {
        agent: String,
        commands: Vec<AgentCommand>,
    },
    /// The chats `/model` offers (`acp:NAME`, `PROVIDER:MODEL`): what Tab
    /// completes after `/model `. Sent when the session is served, and
    /// again each time `/model` lists them.
    "model_choices" => ModelChoices {
        #[serde(default)]
        specs: Vec<String>,
    },
    /// The chat's conductor (an ACP agent, `--model acp:NAME`) opened or
    /// reopened its session: recorded, so a continued session reattaches
    /// it.
    "conductor_session" => ConductorSession {
        agent: String,
        session: SessionKind,
        session_id: String,
    },
    /// What the chat's conductor did that is neither text nor a tool line:
    /// a permission request and its answer, its context and cost
    /// (`usage`), a notice.
    "chat_activity" => ChatActivity {
        activity: Activity,
    },
    /// Token usage of the main model.
    "usage" => Usage {
        input_tokens: u64,
        output_tokens: u64,
    },
    "notice" => Notice {
        #[serde(default)]
        level: NoticeLevel,
        text: String,
    },
    "error" => Error {
        text: String,
    },
    /// The session was continued (`--continue`, `--resume`): what follows
    /// was recorded by a later quorum process, appended to the same file.
    "session_resumed" => SessionResumed {
        /// Wall-clock time, RFC 3339 UTC.
        at: String,
        /// The quorum version that continued it.
        quorum_version: String,
    },
    /// A message added to the chat model's context, exactly as it is sent
    /// to the model: what continuing a session rebuilds the context from.
    /// Not drawn (the screen has the user and assistant events).
    "chat_message" => ChatMessage {
        message: ChatEntry,
    },
    /// The chat's context was cleared (`/new`): a continued session
    /// rebuilds it from the messages after this.
    "chat_reset" => ChatReset,
    /// A task with `isolation: "worktree"` got its own worktree, on a new
    /// branch (sent after its `subagent_started`): what a continued
    /// session finds its tasks' worktrees by.
    "worktree_ready" => WorktreeReady {
        call_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_id: Option<String>,
        branch: String,
        path: String,
        /// `head`, or `uncommitted` (a commit of the person's
        /// uncommitted changes on HEAD).
        base: String,
        base_commit: String,
    },
    /// A worktree task's turn ended and its changes were committed to its
    /// branch (`commit` is `None` when it changed nothing): the branch's
    /// diff against where it started.
    "worktree_committed" => WorktreeCommitted {
        call_id: String,
        branch: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
        diffstat: Diffstat,
        #[serde(default)]
        diff: String,
    },
    /// `[worktree] check` ran on a writer's commit, in a fresh checkout
    /// of it: passed or not, the runner's counts, the seconds it was
    /// allowed when it ran out of time, its output (bounded), and what the
    /// branch changes of the tests or the check's configuration.
    "check_finished" => CheckFinished {
        call_id: String,
        branch: String,
        #[serde(default)]
        commit: String,
        #[serde(default)]
        passed: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        counts: Option<CheckCounts>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timed_out: Option<u64>,
        #[serde(default)]
        output: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        touches_tests: Vec<String>,
        /// The program the check needs that is not there (`pytest`): it
        /// could not run, which says nothing of the branch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        missing: Option<String>,
        /// How long it ran, in milliseconds (none in older transcripts).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ms: Option<u64>,
    },
    /// A review quorum's verdict, recorded against the branch it judged.
    "branch_verdict" => BranchVerdict {
        branch: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        batch_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        verdict: Option<Severity>,
    },
    /// A task's branch was merged into the person's branch `into`; its
    /// worktree is removed.
    "branch_merged" => BranchMerged {
        branch: String,
        into: String,
    },
    /// A task's worktree and branch were thrown away (`/discard`).
    "branch_discarded" => BranchDiscarded {
        branch: String,
    },
    /// What the session has spent so far (the board's snapshot, after
    /// each change): the chat, every agent, nested sub-agents; and per
    /// agent (`chat` for the chat's model).
    "session_spend" => SessionSpend {
        spent: budget::Spent,
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        by_agent: std::collections::BTreeMap<String, budget::Spent>,
    },
    /// The session's spending caps (at its start, and when continued):
    /// the board counts against them.
    "budget_set" => BudgetSet {
        caps: budget::Caps,
    },
    /// The prices quorum estimates costs with, by agent (`chat` for the
    /// chat's model): for those that report tokens but no cost. Their
    /// model's entry in the built-in table or `[prices]`.
    "prices_set" => PricesSet {
        prices: std::collections::BTreeMap<String, budget::Price>,
    },
    /// Spending passed 80 % of a cap (said once per cap).
    "budget_warning" => BudgetWarning {
        unit: budget::Unit,
        spent: f64,
        cap: f64,
        /// Part of `spent` is an estimate (shown `~$0.90`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        estimated: bool,
    },
    /// A cap was reached: the session's (no new call, queued task or
    /// follow-up starts; calls in a turn finish it), or a task's own
    /// (`call_id`: nothing more of it starts).
    "budget_reached" => BudgetReached {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        unit: budget::Unit,
        spent: f64,
        cap: f64,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        estimated: bool,
    },
    /// An arena's writers (batch `batch_id`), each branch reviewed, compared
    /// by the winner rule (`arena::Comparison::decide`).
    "arena_compared" => ArenaCompared {
        batch_id: String,
        #[serde(default)]
        comparison: arena::Comparison,
    },
}
}

impl Event {
    /// A piece of text streaming into a message, a thought or a
    /// terminal's output: nothing starts, ends or waits on it, so the bus
    /// may hold it for a moment and record and send it with the events
    /// around it.
    pub fn is_streamed_text(&self) -> bool {
        use Activity::{MessageChunk, TerminalOutput, ThoughtChunk};
        match self {
            Event::AssistantDelta { .. } => true,
            Event::SubagentActivity { activity, .. }
            | Event::SubagentChildActivity { activity, .. } => matches!(
                activity,
                MessageChunk { .. } | ThoughtChunk { .. } | TerminalOutput { .. }
            ),
            _ => false,
        }
    }
}

/// How much a task's branch changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Diffstat {
    pub added: u64,
    pub removed: u64,
    pub files: u64,
}

impl std::fmt::Display for Diffstat {
    /// `+42 −7 in 3 files`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = if self.files == 1 { "" } else { "s" };
        write!(
            f,
            "+{} −{} in {} file{s}",
            self.added, self.removed, self.files
        )
    }
}

/// Where a worktree task's work is: `quorum call --json` and the tool's
/// answer name them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Work {
    pub branch: String,
    pub worktree: String,
    pub diffstat: String,
    /// What `[worktree] check` found on the turn's commit, as its box says
    /// it (`✗ check failed · 2 failed of 14`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// The tests and check configuration the branch changes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub touches_tests: Vec<String>,
}

/// One message of the chat model's context ([`Event::ChatMessage`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatEntry {
    User {
        content: String,
    },
    Assistant {
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ChatToolCall>,
    },
    /// The result of one tool call, as the model read it.
    Tool {
        tool_call_id: String,
        name: String,
        content: String,
    },
}

/// A tool call in the chat's context: `arguments` is JSON text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An event of each type (in [`Event::TYPES`]' order).
    fn sample_finding() -> finding::Finding {
        finding::Finding {
            file: "src/a.rs".into(),
            line: 3,
            end_line: Some(5),
            severity: Severity::Red,
            title: "retries a POST".into(),
            body: "Not idempotent.".into(),
        }
    }

    /// The quorum of `verdicts`, with a merged finding.
    fn with_findings(verdicts: Vec<ReviewerVerdict>) -> Quorum {
        let mut q = Quorum::of(verdicts);
        q.findings = vec![finding::QuorumFinding {
            finding: sample_finding(),
            by: vec!["claude".into()],
            of: 2,
            outside_diff: true,
            check: Some(finding::Check::Confirmed {
                by: "codex".into(),
                reason: "it is retried".into(),
            }),
        }];
        q
    }

    /// Transcripts written before findings still load: a review's end
    /// and a quorum without them.
    #[test]
    fn events_without_findings_still_load() {
        let finished: Event = serde_json::from_str(
            r#"{"type":"subagent_finished","call_id":"c1","output":"ok","stop_reason":"end_turn","severity":"red"}"#,
        )
        .unwrap();
        assert!(
            matches!(finished, Event::SubagentFinished { findings, .. } if findings.is_empty())
        );
        let quorum: Event = serde_json::from_str(
            r#"{"type":"review_quorum","batch_id":"b1","verdict":"red","agree":1,"total":2,"verdicts":[]}"#,
        )
        .unwrap();
        assert!(matches!(quorum, Event::ReviewQuorum { quorum, .. } if quorum.findings.is_empty()));
    }

    pub(crate) fn samples() -> Vec<Event> {
        vec![
            Event::SessionInfo {
                model: Some("openai:gpt".into()),
                agents: vec!["claude".into()],
            },
            Event::UserMessage { text: "hi".into() },
            Event::AssistantDelta { text: "he".into() },
            Event::AssistantEnd,
            Event::AssistantWritingCall { bytes: 1200 },
            Event::TurnStarted,
            Event::TurnEnded {
                stop_reason: StopReason::MaxTurnRequests,
            },
            Event::ToolCallStarted {
                id: "1".into(),
                name: "subagent_status".into(),
                summary: String::new(),
            },
            Event::ToolCallFinished {
                id: "1".into(),
                ok: true,
                summary: "2 tasks".into(),
            },
            build::started("c1", AgentRef::Acp("claude".into()))
                .input("review")
                .review()
                .background("t1")
                .session(SessionKind::NewAfterStale)
                .batch("b1")
                .queued()
                .event(),
            build::dequeued("c1"),
            build::backgrounded("c1", "t1"),
            build::cancelling("c1"),
            build::batch_started("b1", 3).review().event(),
            build::batch_finished("b1", 3)
                .failed(1)
                .worst(Severity::Red)
                .event(),
            Event::ReviewQuorum {
                batch_id: "b1".into(),
                quorum: with_findings(vec![
                    ReviewerVerdict {
                        agent: "claude".into(),
                        call_id: Some("c1".into()),
                        severity: Some(Severity::Red),
                        failed: false,
                    },
                    ReviewerVerdict {
                        agent: "nope".into(),
                        call_id: None,
                        severity: None,
                        failed: true,
                    },
                ]),
                diff: Some("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n".into()),
            },
            build::session("c1", SessionKind::Loaded).id("s").event(),
            build::followup("c1", "and now?"),
            Event::SubagentActivity {
                call_id: "c1".into(),
                activity: Activity::Plan {
                    entries: vec![PlanEntry {
                        content: "x".into(),
                        status: PlanStatus::InProgress,
                    }],
                },
            },
            Event::SubagentChild {
                call_id: "c1".into(),
                child_id: "s-child".into(),
                title: Some("scout".into()),
                description: Some("looks around".into()),
                state: Some(ChildState::RequiresAction),
                can_cancel: true,
            },
            Event::SubagentChildActivity {
                call_id: "c1".into(),
                child_id: "s-child".into(),
                activity: Activity::MessageChunk { text: "hi".into() },
            },
            Event::ChildProgress {
                call_id: "c1".into(),
                child_id: "s-child".into(),
                summary: Summary {
                    state: TaskState::Running,
                    tool_calls: 1,
                    last_activity: Some("hi".into()),
                    severity: None,
                    waiting: true,
                    cancelling: false,
                    usage: None,
                    share: None,
                },
            },
            build::finished("c1", "ok")
                .severity(Severity::Red)
                .findings(vec![sample_finding()])
                .event(),
            Event::TaskProgress {
                call_id: "c1".into(),
                task_id: Some("t1".into()),
                summary: Summary {
                    state: TaskState::Running,
                    tool_calls: 3,
                    last_activity: Some("⚙ Read".into()),
                    severity: Some(Severity::Yellow),
                    waiting: true,
                    cancelling: false,
                    usage: Some(Usage {
                        used: 10,
                        size: Some(100),
                        cost: None,
                    }),
                    share: Some(UsageShare {
                        tokens: 10,
                        cost: None,
                    }),
                },
            },
            Event::TaskReported {
                task_id: "t1".into(),
            },
            Event::ModelRetry {
                attempt: 2,
                wait_ms: 1500,
                reason: "rate limited".into(),
            },
            Event::AgentCommands {
                agent: "claude".into(),
                commands: vec![AgentCommand {
                    name: "review".into(),
                    description: "Review the changes".into(),
                    hint: None,
                }],
            },
            Event::ModelChoices {
                specs: vec!["acp:claude".into(), "openai:qwen".into()],
            },
            Event::ConductorSession {
                agent: "claude".into(),
                session: SessionKind::Resumed,
                session_id: "s-1".into(),
            },
            Event::ChatActivity {
                activity: Activity::PermissionResolved {
                    id: "p1".into(),
                    outcome: "Allow once".into(),
                },
            },
            Event::Usage {
                input_tokens: 1,
                output_tokens: 2,
            },
            Event::Notice {
                level: NoticeLevel::Warning,
                text: "n".into(),
            },
            Event::Error { text: "e".into() },
            Event::SessionResumed {
                at: "2026-12-01T18:00:00Z".into(),
                quorum_version: "0.1.0".into(),
            },
            Event::ChatMessage {
                message: ChatEntry::Assistant {
                    content: "on it".into(),
                    tool_calls: vec![ChatToolCall {
                        id: "1".into(),
                        name: "subagent".into(),
                        arguments: "{}".into(),
                    }],
                },
            },
            Event::ChatReset,
            Event::WorktreeReady {
                call_id: "call-1".into(),
                task_id: Some("t1".into()),
                branch: "quorum/t1-fix".into(),
                path: "/state/worktrees/r/quorum-t1-fix".into(),
                base: "head".into(),
                base_commit: "abc".into(),
            },
            Event::WorktreeCommitted {
                call_id: "call-1".into(),
                branch: "quorum/t1-fix".into(),
                commit: Some("def".into()),
                diffstat: Diffstat {
                    added: 42,
                    removed: 7,
                    files: 3,
                },
                diff: "+x".into(),
            },
            Event::CheckFinished {
                call_id: "call-1".into(),
                branch: "quorum/t1-fix".into(),
                commit: "def".into(),
                passed: false,
                counts: Some(CheckCounts {
                    passed: 12,
                    failed: 2,
                }),
                timed_out: None,
                output: "test result: FAILED. 12 passed; 2 failed".into(),
                touches_tests: vec!["tests/a.rs".into()],
                missing: None,
                ms: Some(1200),
            },
            Event::BranchVerdict {
                branch: "quorum/t1-fix".into(),
                batch_id: Some("b1".into()),
                verdict: Some(Severity::Red),
            },
            Event::BranchMerged {
                branch: "quorum/t1-fix".into(),
                into: "main".into(),
            },
            Event::BranchDiscarded {
                branch: "quorum/t1-fix".into(),
            },
            Event::SessionSpend {
                spent: budget::Spent {
                    cost: 0.9,
                    tokens: 3_000,
                    estimated: false,
                },
                by_agent: [(
                    "fake".to_string(),
                    budget::Spent {
                        cost: 0.9,
                        tokens: 3_000,
                        estimated: false,
                    },
                )]
                .into(),
            },
            Event::BudgetSet {
                caps: budget::Caps {
                    session_usd: Some(1.0),
                    ..budget::Caps::default()
                },
            },
            Event::PricesSet {
                prices: [(
                    "codex".to_string(),
                    budget::Price {
                        input: 1.25,
                        output: 10.0,
                    },
                )]
                .into(),
            },
            Event::BudgetWarning {
                unit: budget::Unit::Usd,
                spent: 0.9,
                cap: 1.0,
                estimated: true,
            },
            Event::BudgetReached {
                call_id: Some("call-2".into()),
                unit: budget::Unit::Usd,
                spent: 1.2,
                cap: 1.0,
                estimated: false,
            },
            Event::ArenaCompared {
                batch_id: "b1".into(),
                comparison: arena::Comparison::decide(
                    "fix",
                    vec![arena::ArenaRow {
                        agent: "claude".into(),
                        label: "c1".into(),
                        branch: "quorum/c1-fix".into(),
                        cost: Some(0.25),
                        ..arena::ArenaRow::default()
                    }],
                ),
            },
        ]
    }

    #[test]
    fn every_type_round_trips_under_its_listed_name() {
        let samples = samples();
        assert_eq!(samples.len(), Event::TYPES.len(), "a sample per type");
        for (i, event) in samples.into_iter().enumerate() {
            let stamped = Stamped::new(i as u64 * 10, event);
            let json = serde_json::to_value(&stamped).unwrap();
            assert_eq!(json["t"], i as u64 * 10);
            let name = json["type"].as_str().unwrap();
            assert_eq!(name, stamped.event.type_name());
            assert_eq!(name, Event::TYPES[i]);
            let back: Stamped = serde_json::from_value(json).unwrap();
            assert_eq!(back, stamped);
        }
    }

    /// An event reads the same with its `type` first (as the recorder
    /// writes it), last, or among its fields; and a missing, unknown or
    /// repeated `type` is an error that says so.
    #[test]
    fn an_event_reads_the_same_wherever_its_type_is() {
        for event in samples() {
            let first = serde_json::to_string(&event).unwrap();
            assert!(first.starts_with("{\"type\":"), "{first}");
            let serde_json::Value::Object(mut fields) = serde_json::to_value(&event).unwrap()
            else {
                panic!("an object: {first}");
            };
            let tag = fields.remove("type").unwrap();
            let mut last = serde_json::to_string(&fields).unwrap();
            last.pop();
            let comma = if fields.is_empty() { "" } else { "," };
            let last = format!("{last}{comma}\"type\":{tag}}}");
            for text in [&first, &last] {
                let back: Event = serde_json::from_str(text).unwrap();
                assert_eq!(back, event, "{text}");
                let stamped: Stamped =
                    serde_json::from_str(&format!("{{\"t\":5,{}", &text[1..])).unwrap();
                assert_eq!(stamped, Stamped::new(5, event.clone()), "{text}");
            }
        }
        // The same of an activity, tagged by its `kind`.
        let activity: Event = serde_json::from_str(
            r#"{"type":"subagent_activity","activity":{"text":"hi","kind":"message_chunk"},"call_id":"c1"}"#,
        )
        .unwrap();
        assert_eq!(
            activity,
            Event::SubagentActivity {
                call_id: "c1".into(),
                activity: Activity::MessageChunk { text: "hi".into() },
            }
        );
        let error = |text: &str| serde_json::from_str::<Event>(text).unwrap_err().to_string();
        assert!(error(r#"{"text":"hi"}"#).contains("missing field `type`"));
        assert!(error(r#"{}"#).contains("missing field `type`"));
        assert!(error(r#"{"type":"no_such"}"#).contains("unknown variant `no_such`"));
        assert!(error(r#"{"text":"hi","type":"no_such"}"#).contains("unknown variant `no_such`"));
        assert!(error(r#"{"type":3}"#).contains("invalid type"));
        assert!(error(r#"{"text":"a","type":3}"#).contains("invalid type"));
        assert!(error(r#"{"text":"a","type":"error","type":"error"}"#).contains("duplicate field"));
        assert!(error(r#"{"type":"user_message"}"#).contains("missing field `text`"));
        assert!(error(r#"{"type":"user_message","text":3}"#).contains("invalid type"));
    }

    #[test]
    fn stop_reasons_keep_their_wire_names() {
        for (reason, name) in [
            (StopReason::EndTurn, "end_turn"),
            (StopReason::MaxTokens, "max_tokens"),
            (StopReason::MaxTurnRequests, "max_turn_requests"),
            (StopReason::Refusal, "refusal"),
            (StopReason::Cancelled, "cancelled"),
            (StopReason::Error, "error"),
        ] {
            assert_eq!(serde_json::to_value(reason).unwrap(), name);
            assert_eq!(reason.as_str(), name);
            assert_eq!(
                serde_json::from_value::<StopReason>(name.into()).unwrap(),
                reason
            );
        }
    }

    /// A check's line with only its call and branch (a transcript written
    /// by a quorum that said less) loads with every other field empty.
    #[test]
    fn a_short_check_finished_still_loads() {
        let e: Event = serde_json::from_str(
            r#"{"type":"check_finished","call_id":"call-1","branch":"quorum/c1"}"#,
        )
        .unwrap();
        assert!(matches!(
            e,
            Event::CheckFinished { passed: false, counts: None, timed_out: None, ref touches_tests, .. }
                if touches_tests.is_empty()
        ));
    }

    #[test]
    fn tool_detail_round_trips_and_old_lines_still_load() {
        let call = Activity::ToolCall {
            id: "t1".into(),
            title: "Edit a.rs".into(),
            status: ToolStatus::Completed,
            detail: Box::new(ToolDetail {
                kind: Some("edit".into()),
                locations: vec!["a.rs".into()],
                raw_input: Some(serde_json::json!({"path": "a.rs"})),
                content: vec![
                    ToolContent::Diff {
                        path: "a.rs".into(),
                        old_text: Some("a".into()),
                        new_text: "b".into(),
                    },
                    ToolContent::Text { text: "ok".into() },
                    ToolContent::Terminal {
                        terminal_id: "term".into(),
                    },
                ],
                raw_output: Some(serde_json::json!({"exit_code": 0})),
            }),
        };
        let json = serde_json::to_value(&call).unwrap();
        assert_eq!(json["detail"]["kind"], "edit");
        assert_eq!(json["detail"]["content"][0]["type"], "diff");
        assert_eq!(serde_json::from_value::<Activity>(json).unwrap(), call);
        // A version-2 line has no detail.
        let old: Activity = serde_json::from_str(
            r#"{"kind":"tool_call","id":"t1","title":"Read","status":"pending"}"#,
        )
        .unwrap();
        assert!(matches!(old, Activity::ToolCall { detail, .. } if detail.is_empty()));
        let old: Activity = serde_json::from_str(
            r#"{"kind":"permission_request","id":"p","title":"Delete","options":["Allow"]}"#,
        )
        .unwrap();
        assert!(matches!(old, Activity::PermissionRequest { detail, .. } if detail.is_empty()));
    }

    #[test]
    fn usage_round_trips_and_old_summaries_have_none() {
        let usage = Activity::Usage {
            usage: Usage {
                used: 12_300,
                size: Some(200_000),
                cost: Some(Cost {
                    amount: 0.04,
                    currency: "USD".into(),
                    estimated: false,
                }),
            },
        };
        let json = serde_json::to_value(&usage).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"kind": "usage", "used": 12300, "size": 200000,
                "cost": {"amount": 0.04, "currency": "USD"}})
        );
        assert_eq!(serde_json::from_value::<Activity>(json).unwrap(), usage);
        // The internal agent knows no window and no cost.
        let bare: Activity = serde_json::from_str(r#"{"kind":"usage","used":5}"#).unwrap();
        assert_eq!(
            bare,
            Activity::Usage {
                usage: Usage {
                    used: 5,
                    ..Usage::default()
                }
            }
        );
        // A version-2 snapshot has no usage.
        let old: Event = serde_json::from_str(
            r#"{"type":"task_progress","call_id":"c","state":"running","tool_calls":2}"#,
        )
        .unwrap();
        assert!(matches!(old, Event::TaskProgress { summary, .. }
            if summary.usage.is_none() && summary.share.is_none() && summary.tool_calls == 2));
    }

    #[test]
    fn a_quorum_is_the_worst_verdict_and_who_agrees_with_it() {
        let v = |severity, failed| ReviewerVerdict {
            agent: "a".into(),
            call_id: None,
            severity,
            failed,
        };
        use Severity::*;
        let q = Quorum::of(vec![
            v(Some(Red), false),
            v(Some(Green), false),
            v(Some(Red), false),
        ]);
        assert_eq!((q.verdict, q.agree, q.total), (Some(Red), 2, 3));
        assert_eq!(q.label(), "red · 2 of 3");
        assert!(!q.unanimous() && !q.incomplete());
        let q = Quorum::of(vec![v(Some(Yellow), false); 2]);
        assert_eq!(q.label(), "yellow · 2 of 2");
        assert!(q.unanimous());
        let q = Quorum::of(vec![v(Some(Green), false), v(None, true)]);
        assert_eq!(q.label(), "green · 1 of 2");
        assert!(q.incomplete());
        let q = Quorum::of(vec![v(None, true)]);
        assert_eq!(
            (q.label().as_str(), q.unanimous()),
            ("no verdict · 0 of 1", false)
        );
        assert!(Green < Yellow && Yellow < Red, "ordered best to worst");
        // On the wire, the quorum's fields sit beside the event's.
        let json = serde_json::to_value(Event::ReviewQuorum {
            batch_id: "b1".into(),
            quorum: Quorum::of(vec![v(Some(Red), false)]),
            diff: None,
        })
        .unwrap();
        assert_eq!(
            json,
            serde_json::json!({"type": "review_quorum", "batch_id": "b1", "verdict": "red",
                "agree": 1, "total": 1, "verdicts": [{"agent": "a", "severity": "red"}]})
        );
        assert_eq!(serde_json::to_value(TaskState::Queued).unwrap(), "queued");
    }

    #[test]
    fn agent_ref_json_shape() {
        assert_eq!(
            serde_json::to_string(&AgentRef::Internal).unwrap(),
            "\"internal\""
        );
        assert_eq!(
            serde_json::to_string(&AgentRef::Acp("gemini".into())).unwrap(),
            "{\"acp\":\"gemini\"}"
        );
    }
}
