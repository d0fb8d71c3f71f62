//! What a running sub-agent does, streamed into its box ([`Activity`]),
//! and what that carries: tool calls' status and detail, plans, usage and
//! cost, the commands, modes and options an agent announces.

use serde::{Deserialize, Serialize};

use super::form;

/// Status of a tool call, as ACP names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    #[default]
    Pending,
    InProgress,
    Completed,
    Failed,
}

/// One entry of an agent's plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanEntry {
    pub content: String,
    #[serde(default)]
    pub status: PlanStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    #[default]
    Pending,
    InProgress,
    Completed,
}

super::tagged::tagged_enum! {
#[tag = "kind"]
#[twin(rename_all = "snake_case")]
/// What a running sub-agent does, streamed into its box.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Activity {
    /// A chunk of the agent's message text.
    MessageChunk { text: String },
    /// A chunk of the agent's reasoning.
    ThoughtChunk { text: String },
    /// The agent started a tool call.
    ToolCall {
        id: String,
        title: String,
        #[serde(default)]
        status: ToolStatus,
        /// Kind, locations, input and content (absent in version-2
        /// transcripts).
        #[serde(default, skip_serializing_if = "no_detail")]
        detail: Box<ToolDetail>,
    },
    /// A tool call changed: status and/or title, and any detail it sent
    /// (each field given replaces the one before).
    ToolCallUpdate {
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<ToolStatus>,
        #[serde(default, skip_serializing_if = "no_detail")]
        detail: Box<ToolDetail>,
    },
    /// The agent's plan, replaced whole.
    Plan { entries: Vec<PlanEntry> },
    /// The agent asks for permission; `options` are the choices offered.
    PermissionRequest {
        id: String,
        title: String,
        options: Vec<String>,
        /// What is asked: the tool call's kind, paths, input and diff.
        #[serde(default, skip_serializing_if = "no_detail")]
        detail: Box<ToolDetail>,
    },
    /// A permission request was answered (`outcome` is the option picked,
    /// or `cancelled`).
    PermissionResolved { id: String, outcome: String },
    /// Something quorum tells about the call, shown in its box: a file
    /// request refused, a message with bytes that are not UTF-8.
    Notice { text: String },
    /// The agent's context and cost, as it reports them (ACP
    /// `usage_update`; the internal agent's last request's tokens).
    Usage {
        #[serde(flatten)]
        usage: Usage,
    },
    /// The agent asks the person something (ACP `elicitation/create`): a
    /// form to fill in, or a URL to visit. Its text as the agent sent it.
    Elicitation {
        id: String,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        form: Option<Vec<form::FormField>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
    },
    /// An elicitation was answered: `outcome` is `accept` (with the form's
    /// `content`), `decline` or `cancel`; or `complete`, the agent said a
    /// URL's interaction is done. `reason`: why quorum answered by itself
    /// (headless, a cancelled turn).
    ElicitationResolved {
        id: String,
        outcome: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<serde_json::Map<String, serde_json::Value>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The agent started a command in a client terminal quorum runs
    /// (`terminal/create`): the command line as given, sanitised.
    TerminalStarted {
        terminal_id: String,
        command: String,
    },
    /// A terminal's output, sanitised for display, as appended chunks
    /// (coalesced: at most one every ~100 ms per terminal). The agent reads
    /// the raw bytes through `terminal/output`.
    TerminalOutput { terminal_id: String, text: String },
    /// A terminal's command ended: its exit code, or the signal that ended it.
    TerminalExit {
        terminal_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<String>,
    },
    /// The commands the agent offers (ACP `available_commands_update`),
    /// replaced whole: a message to it that starts `/name args` runs one.
    Commands { commands: Vec<AgentCommand> },
    /// The agent's session mode: the current one's id, and those it
    /// offers.
    Mode {
        current: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        available: Vec<ModeInfo>,
    },
    /// The agent's config options (model, effort, ...), replaced whole.
    Config { options: Vec<ConfigInfo> },
}
}

/// A command an agent offers: `/name`, what it does, and a hint of the
/// input it takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentCommand {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// A session mode an agent offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeInfo {
    pub id: String,
    pub name: String,
}

/// One of an agent's config options: its id and name, its category
/// (`model`, `mode`, `thought_level`, ...), its current value and the
/// values it takes (a boolean's: `true`, `false`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigInfo {
    pub id: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    pub current: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// A sub-agent's context and cost: `used` tokens in context of a `size`
/// window (when known), and its session's cumulative `cost` (when given).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub used: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
}

/// An amount of money, e.g. `{"amount": 0.04, "currency": "USD"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub amount: f64,
    #[serde(default)]
    pub currency: String,
    /// quorum's estimate from a price table, not the agent's report.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

/// One call's part of the session's totals: how far its usage moved its
/// agent session's figures (see `board.rs`). Summed over calls, a
/// session's parts add up to its latest figures, so a resumed session is
/// not counted twice.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UsageShare {
    /// Change in tokens in context (negative after a compaction).
    #[serde(default)]
    pub tokens: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
}

/// What a tool call is about, as far as the agent said: its kind (ACP's
/// `read`, `edit`, `delete`, `move`, `search`, `execute`, `think`,
/// `fetch`, `other`), the paths it touches, its raw input and its content.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolDetail {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<ToolContent>,
    /// What the tool returned, as the agent reports it (some agents send
    /// a command's output only here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_output: Option<serde_json::Value>,
}

/// Boxed: most activity has none, and events stay small.
#[allow(clippy::borrowed_box)]
fn no_detail(detail: &Box<ToolDetail>) -> bool {
    detail.is_empty()
}

impl ToolDetail {
    pub fn is_empty(&self) -> bool {
        self.kind.is_none()
            && self.locations.is_empty()
            && self.raw_input.is_none()
            && self.content.is_empty()
            && self.raw_output.is_none()
    }
}

/// One piece of a tool call's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolContent {
    Text {
        text: String,
    },
    /// A file change: `old_text` is `None` for a new file.
    Diff {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        old_text: Option<String>,
        new_text: String,
    },
    /// A terminal the agent runs a command in: when it is one of quorum's
    /// (`terminal/create`), its output is the `Terminal*` activity.
    Terminal {
        terminal_id: String,
    },
}
