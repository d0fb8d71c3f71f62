//! The sections of the config file, as it says them: every field
//! optional, unknown ones refused. What they mean, and their defaults, is
//! the business of the parts of quorum that take them (`acp::registry` the
//! agents, hosts and MCP servers; `engine::config` the session's settings;
//! `serve` `[mcp]` and `[acp]`).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::agent::Permissions;
use crate::event::notify::NotifyKind;
use crate::runtime::sandbox::Sandbox;

/// `[model]`: the chat model when neither `--model` nor `$QUORUM_MODEL`
/// names one, and the base URL for it when `--base-url` gives none.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    pub name: Option<String>,
    pub base_url: Option<String>,
}

/// `[internal]`: how the internal agent's shell commands are confined, as
/// `terminal_sandbox` and `terminal_network` do for an ACP agent's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InternalSection {
    pub terminal_sandbox: Option<Sandbox>,
    pub terminal_network: Option<bool>,
}

/// `[mcp]`: `quorum mcp` and the conductor's tools.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    /// How long a call runs before it goes on in the background (seconds,
    /// at least 1).
    #[serde(default, deserialize_with = "seconds")]
    pub sync_seconds: Option<u64>,
}

/// `[arena]`: best of N compared (`@A,B,C+ task`, `quorum arena`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArenaSection {
    /// Who reviews each writer's branch (default: every installed agent;
    /// a writer never reviews its own).
    pub reviewers: Option<Vec<String>>,
}

/// `[budget]`: what the session, and each task, may spend (the command
/// line's `--max-cost` and `--max-tokens` go over it).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetSection {
    /// The whole session, in USD.
    #[serde(default, deserialize_with = "session_usd")]
    pub session_usd: Option<f64>,
    /// Each task (a call and its follow-ups), in USD.
    #[serde(default, deserialize_with = "task_usd")]
    pub task_usd: Option<f64>,
    /// The whole session, in tokens.
    #[serde(default, deserialize_with = "tokens")]
    pub tokens: Option<u64>,
}

fn usd<'de, D: serde::Deserializer<'de>>(d: D, what: &str) -> Result<Option<f64>, D::Error> {
    let value = <f64 as Deserialize>::deserialize(d)?;
    crate::event::budget::check_usd(what, value)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

fn session_usd<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    usd(d, "session_usd")
}

fn task_usd<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    usd(d, "task_usd")
}

fn tokens<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let value = <u64 as Deserialize>::deserialize(d)?;
    crate::event::budget::check_tokens("tokens", value)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// `[acp]`: `quorum acp`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcpSection {
    /// The host's MCP servers go to every sub-agent too, not only the
    /// chat's conductor.
    pub share_mcp_servers: Option<bool>,
}

/// `[worktree]`: isolated writers' worktrees, made ready and checked.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorktreeSection {
    /// Sign quorum's commits of each turn too (default false: unsigned).
    pub sign: Option<bool>,
    /// A command run in each new worktree before its agent starts.
    pub setup: Option<String>,
    /// Caches shared writable with the sandboxed setup and check.
    pub share: Option<Vec<String>>,
    /// The project's test command, run on each committed turn.
    pub check: Option<String>,
    /// Seconds the check may run (at least 1).
    #[serde(default, deserialize_with = "check_seconds")]
    pub check_timeout: Option<u64>,
}

/// `[notify]`: word when something needs the person or is done.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifySection {
    /// Which events notify (default: all of them).
    pub events: Option<Vec<NotifyKind>>,
    /// Desktop notifications through the terminal while it does not have
    /// the focus (the TUI only; default true).
    pub desktop: Option<bool>,
    /// A program (and its arguments) run with each notification as one
    /// JSON object on its stdin.
    #[serde(default, deserialize_with = "program")]
    pub command: Option<Vec<String>>,
}

impl NotifySection {
    /// `events`, or every kind.
    pub fn kinds(&self) -> Vec<NotifyKind> {
        self.events
            .clone()
            .unwrap_or_else(|| NotifyKind::ALL.to_vec())
    }
}

/// `[agents.NAME]`: a new agent, or a built-in one changed field by field.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentEntry {
    pub command: Option<String>,
    pub args: Option<Vec<String>>,
    pub env: Option<BTreeMap<String, String>>,
    pub description: Option<String>,
    pub permissions: Option<Permissions>,
    /// Seconds.
    pub startup_timeout: Option<f64>,
    pub install: Option<String>,
    pub model: Option<String>,
    pub mode: Option<String>,
    pub terminal_sandbox: Option<Sandbox>,
    pub terminal_network: Option<bool>,
    pub sandbox: Option<Sandbox>,
    /// The agent's own state, private when it is sandboxed (the built-in
    /// registry says it).
    pub state: Option<Vec<String>>,
    /// Its credentials, shared with the person's.
    pub credentials: Option<Vec<String>>,
    /// More paths a sandboxed agent may write, shared.
    pub writable: Option<Vec<String>>,
    /// Paths in those it may not change.
    pub protect: Option<Vec<String>>,
    /// Unix sockets its sandboxed processes may connect to.
    pub unix_sockets: Option<Vec<String>>,
    /// Whether its sandboxed process may make user namespaces.
    pub user_namespaces: Option<bool>,
    /// The `[mcp_servers]` it is given (default: all).
    pub mcp_servers: Option<Vec<String>>,
    /// The `[hosts.NAME]` it runs on.
    pub host: Option<toml::Spanned<String>>,
}

/// `[hosts.NAME]`: another machine agents run on.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostEntry {
    pub ssh: String,
    #[serde(default)]
    pub ssh_args: Vec<String>,
    pub dir: Option<String>,
}

/// `[mcp_servers.NAME]`: an MCP server given to the agents.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerEntry {
    pub command: Option<String>,
    pub args: Option<Vec<String>>,
    pub env: Option<BTreeMap<String, String>>,
    pub url: Option<String>,
    pub headers: Option<BTreeMap<String, String>>,
    /// `http` (the default) or `sse`, for a `url`.
    pub transport: Option<String>,
}

/// A count of at least 1 (`max_parallel`).
pub(super) fn at_least_one<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<usize>, D::Error> {
    let n = <usize as Deserialize>::deserialize(d)?;
    if n == 0 {
        return Err(serde::de::Error::custom(
            "max_parallel must be at least 1 (how many tasks of a batch run at once)",
        ));
    }
    Ok(Some(n))
}

/// `sync_seconds`: at least 1.
fn seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let n = <u64 as Deserialize>::deserialize(d)?;
    if n == 0 {
        return Err(serde::de::Error::custom(
            "sync_seconds must be at least 1 (how long a call runs before it goes on in the \
             background)",
        ));
    }
    Ok(Some(n))
}

/// `check_timeout`: at least 1.
fn check_seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let n = <u64 as Deserialize>::deserialize(d)?;
    if n == 0 {
        return Err(serde::de::Error::custom(
            "check_timeout must be at least 1 (seconds the check may run)",
        ));
    }
    Ok(Some(n))
}

/// `[notify] command`: a program, then its arguments.
fn program<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    let argv = <Vec<String> as Deserialize>::deserialize(d)?;
    if argv.first().is_none_or(|p| p.trim().is_empty()) {
        return Err(serde::de::Error::custom(
            "command needs a program: [\"PROGRAM\", \"ARG\", ...]",
        ));
    }
    Ok(Some(argv))
}
