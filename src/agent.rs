//! The agent interface: the [`Agent`] trait that runs one turn of a
//! sub-agent, what that turn takes (its input, the sink its activity goes
//! to, the controls that steer it from outside) and the permission policy
//! it follows. ACP agents and the internal agent both implement it, so the
//! dispatcher needs to know neither.

use std::path::Path;

use futures::future::BoxFuture;
use serde::Deserialize;
use tokio::sync::{mpsc, watch};

use crate::confine::fsroot::Exclude;
use crate::event::{Activity, ChildState, Outcome, SessionKind};

/// An agent a `subagent` call runs on: an ACP agent (one per agent name,
/// its process started once and shared by its calls) or the internal
/// agent. The dispatcher holds each as `Arc<dyn Agent>` and treats them
/// alike, as Zed's `AgentConnection` serves its native agent and external
/// ones; a test double implements it too.
pub trait Agent: Send + Sync {
    /// Runs one turn of `input`: its activity goes to `sink`, and
    /// `control` steers it (cancel, kill, permission answers, child
    /// sessions to cancel). It ends with the turn's outcome; what went
    /// wrong is an `error` outcome.
    fn turn<'a>(
        &'a self,
        input: TurnInput<'a>,
        sink: &'a dyn TurnSink,
        control: &'a mut TurnControl,
    ) -> BoxFuture<'a, Outcome>;

    /// Whether its sessions live on after a turn, to be resumed and to
    /// take follow-up messages (the internal agent keeps none).
    fn keeps_sessions(&self) -> bool;
}

/// What a call asks of one turn, whichever agent runs it.
#[derive(Debug, Clone, Copy)]
pub struct TurnInput<'a> {
    pub prompt: &'a str,
    /// The session to reopen, if any.
    pub resume: Option<&'a str>,
    /// Paths the agent may not read through quorum.
    pub exclude: Option<&'a Exclude>,
    /// The nesting depth the turn runs at (1: a call of the main chat);
    /// the internal agent's own sub-agent calls go one deeper.
    pub depth: u32,
    /// The directory this turn works in, when it is not the session's: a
    /// worktree task's worktree. Its file access is confined to it.
    pub root: Option<&'a Path>,
    /// Whether a person answers what is asked (the session's policy is
    /// `ask`): quorum asks them before an agent writes a file other
    /// programs run in their own tree; with nobody to ask, it is refused.
    pub person: bool,
}

/// What to do when an agent asks for permission: the one policy type,
/// for the config file (`permissions = "ask" | "allow" | "deny"`), for
/// `--approve all|none`, and for a running turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Permissions {
    /// Ask the person (in the TUI); headless, follow `--approve`.
    #[default]
    #[value(skip)]
    Ask,
    /// Allow every permission request.
    #[value(name = "all")]
    Allow,
    /// Reject every permission request.
    #[value(name = "none")]
    Deny,
}

impl Permissions {
    /// The policy a turn follows: an agent's own `allow` or `deny` wins;
    /// its `ask` follows the session's (`--approve`, or the person in the
    /// TUI).
    pub fn resolve(self, session: Permissions) -> Permissions {
        match self {
            Permissions::Ask => session,
            own => own,
        }
    }
}

/// Where a turn's activity goes.
pub trait TurnSink: Send + Sync {
    fn activity(&self, activity: Activity);
    fn session(&self, kind: SessionKind, session_id: &str);
    fn notice(&self, text: &str);
    /// The agent announced (or updated) a child session of this turn's.
    fn child(
        &self,
        _child_id: &str,
        _title: Option<&str>,
        _description: Option<&str>,
        _state: Option<ChildState>,
        _can_cancel: bool,
    ) {
    }
    /// Something a child session did.
    fn child_activity(&self, _child_id: &str, _activity: Activity) {}
    /// The agent's session now runs on `model` (a pick made through the
    /// agent, or one quorum set).
    fn model_picked(&self, _model: &str) {}
    /// Where the turn's streamed text may go straight from the agent's
    /// transport, as [`TurnSink::activity`] would send it, without a hop
    /// through the turn's task; `None` (the default): through the turn.
    fn stream(&self) -> Option<std::sync::Arc<dyn Fn(Activity) + Send + Sync>> {
        None
    }
}

/// What an ACP connection's turn takes: the call's [`TurnInput`] with the
/// agent's own settings (the session directory, the permission policy,
/// the model and mode).
pub struct TurnRequest<'a> {
    pub prompt: &'a str,
    pub root: &'a Path,
    /// The session to reopen, if any.
    pub resume: Option<&'a str>,
    pub policy: Permissions,
    /// The model and mode a new session is set to, where the agent offers
    /// them as config options.
    pub model: Option<&'a str>,
    pub mode: Option<&'a str>,
    /// Paths the agent's `fs/read_text_file` may not read.
    pub exclude: Option<&'a Exclude>,
    /// What to do when the agent asks the person something.
    pub elicit: Elicit,
    /// The MCP server whose tools the agent may call without asking: the
    /// `quorum` server a conductor is handed (its calls are the person's
    /// chat asking quorum; each sub-agent has its own permissions).
    pub trusted_mcp: Option<&'a str>,
    /// Whether a person answers what is asked (the session's policy is
    /// `ask`: the TUI, or an editor through `quorum acp`), whatever the
    /// agent's own policy: quorum asks them before an agent writes a file
    /// other programs run in their own tree; with nobody to ask, such a
    /// write is refused.
    pub person: bool,
}

/// The person's answer to a permission request: an option index, or
/// `None` to cancel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermissionAnswer {
    pub request_id: String,
    pub option: Option<usize>,
}

/// What steers a running turn from outside.
pub struct TurnControl {
    pub cancel: watch::Receiver<bool>,
    /// Turns true when the person asks again: the turn ends at once and
    /// the agent is stopped.
    pub kill: watch::Receiver<bool>,
    pub answers: mpsc::UnboundedReceiver<PermissionAnswer>,
    /// Child sessions whose work the person cancels, by session id.
    pub cancel_children: mpsc::UnboundedReceiver<String>,
    /// The person's answers to elicitations.
    pub elicitations: mpsc::UnboundedReceiver<ElicitationAnswer>,
}

/// What to do when an agent asks the person something (an elicitation):
/// the TUI asks; headless, `--elicit` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Elicit {
    /// Ask the person (in the TUI).
    #[default]
    #[value(skip)]
    Ask,
    /// Decline every elicitation (headless, by default).
    Decline,
    /// Accept a form with its defaults when every required field has one;
    /// else decline. A URL is declined.
    AcceptDefaults,
}

/// The person's answer to an elicitation shown in a call's box.
#[derive(Debug, Clone, PartialEq)]
pub struct ElicitationAnswer {
    pub request_id: String,
    pub answer: crate::event::ElicitAnswer,
}
