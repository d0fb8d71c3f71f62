//! The sub-agent tool as the model sees it: the `subagent` and
//! `subagent_status` tools' specs (name, description, schema), their
//! calls from arguments to the text of the reply, and why a call failed.
//! Its arguments are in `input.rs`, its description in `description.rs`,
//! its replies in `reply.rs`, `subagent_status`'s answer in `status.rs`.
//! The engine plugs it into the chat loop.

pub mod description;
pub mod reply;
pub mod status;

use std::sync::Arc;

use tokio::sync::watch;

use self::description::{INTERNAL_AGENT_NOTE, ToolDescription};
use super::input::{StatusInput, SubAgentCallInput, input_schema, status_schema};
use crate::llm::ToolSpec;
use crate::runtime::cancel::cancelled;
use crate::subagent::dispatch::detach::Detachable;
use crate::subagent::dispatch::{DispatchError, Dispatcher};

/// The `subagent` tool's name.
pub const SUBAGENT: &str = "subagent";
/// The `subagent_status` tool's name.
pub const SUBAGENT_STATUS: &str = "subagent_status";

/// What `subagent_status` is for, as the model reads it.
const STATUS_DESCRIPTION: &str = "The state of a background sub-agent task (and its report once \
                                  done), or of every task when `task_id` is left out. With \
                                  `message`, steer the task: sent as its next turn (queued while \
                                  it runs; a new turn on the same session once done). `cancel` \
                                  stops it; `wait_seconds` (at most 600) waits for it to finish \
                                  before answering.";

/// Why a call of the sub-agent tools failed; the model reads its text.
#[derive(Debug, thiserror::Error)]
pub enum SubagentError {
    /// The arguments are not the tool's.
    #[error("bad {tool} arguments: {source}")]
    BadArguments {
        tool: &'static str,
        source: serde_json::Error,
    },
    /// The dispatcher could not run the call.
    #[error(transparent)]
    Dispatch(#[from] DispatchError),
    /// `subagent_status` was cancelled while it waited.
    #[error("subagent_status: cancelled")]
    StatusCancelled,
    /// Neither of the two tools.
    #[error("unknown tool {0:?}")]
    UnknownTool(String),
}

/// `subagent` and `subagent_status`, on a dispatcher.
#[derive(Clone)]
pub struct SubagentTool {
    dispatcher: Arc<Dispatcher>,
    /// Nesting depth of the calls these tools make (0: the main chat).
    depth: u32,
}

impl SubagentTool {
    pub fn new(dispatcher: Arc<Dispatcher>, depth: u32) -> Self {
        Self { dispatcher, depth }
    }

    /// The two tools as the model is offered them.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut description = ToolDescription::new(&self.dispatcher.registry().installed());
        description.set_note(INTERNAL_AGENT_NOTE);
        vec![
            ToolSpec {
                name: SUBAGENT.into(),
                description: description.text(),
                parameters: input_schema(),
            },
            ToolSpec {
                name: SUBAGENT_STATUS.into(),
                description: STATUS_DESCRIPTION.into(),
                parameters: status_schema(),
            },
        ]
    }

    /// Runs one call of tool `name` with its `arguments` (JSON; empty is
    /// `{}`); the reply's text, or why it failed. The call's turn is
    /// cancelled when `cancel` turns true.
    pub async fn call(
        &self,
        name: &str,
        arguments: &str,
        cancel: watch::Receiver<bool>,
    ) -> Result<String, SubagentError> {
        self.call_detachable(name, arguments, cancel, None).await
    }

    /// [`SubagentTool::call`], the `subagent` calls it opens collected in
    /// `detach` (when given), so that its caller may stop waiting for them
    /// and have them go on as background tasks ([`Dispatcher::detach`]).
    pub async fn call_detachable(
        &self,
        name: &str,
        arguments: &str,
        cancel: watch::Receiver<bool>,
        detach: Option<&Detachable>,
    ) -> Result<String, SubagentError> {
        let arguments = if arguments.trim().is_empty() {
            "{}"
        } else {
            arguments
        };
        match name {
            SUBAGENT => {
                let input: SubAgentCallInput =
                    serde_json::from_str(arguments).map_err(|source| {
                        SubagentError::BadArguments {
                            tool: SUBAGENT,
                            source,
                        }
                    })?;
                let reply = self
                    .dispatcher
                    .call_in(input, Some(cancel), self.depth, detach)
                    .await?;
                Ok(serde_json::to_string(&reply).expect("a reply is JSON"))
            }
            SUBAGENT_STATUS => {
                let input: StatusInput = serde_json::from_str(arguments).map_err(|source| {
                    SubagentError::BadArguments {
                        tool: SUBAGENT_STATUS,
                        source,
                    }
                })?;
                // Waiting (`wait_seconds`) ends with the turn.
                let mut cancel = cancel;
                let status = tokio::select! {
                    status = self.dispatcher.status_with(input) => status?,
                    _ = cancelled(&mut cancel) => return Err(SubagentError::StatusCancelled),
                };
                Ok(serde_json::to_string(&status).expect("a status is JSON"))
            }
            other => Err(SubagentError::UnknownTool(other.to_string())),
        }
    }

    /// The dispatcher its calls run on.
    pub fn dispatcher(&self) -> &Arc<Dispatcher> {
        &self.dispatcher
    }

    /// A new conversation: the sub-agents' sessions and the last message
    /// are forgotten.
    pub fn forget(&self) {
        self.dispatcher.forget();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::registry::Registry;
    use crate::agent::Permissions;
    use crate::confine::fsroot::Root;
    use crate::runtime::bus::Emitter;
    use crate::runtime::supervisor::Supervisor;
    use crate::subagent::picks::ModelPicks;

    fn never() -> watch::Receiver<bool> {
        watch::channel(false).1
    }

    #[tokio::test]
    async fn the_tools_failures_read_as_they_always_have() {
        let dir = tempfile::tempdir().unwrap();
        let (emitter, _events) = Emitter::channel(std::time::Instant::now());
        let config = dir.path().join("q.toml");
        std::fs::write(&config, "[agents.sh]\ncommand = \"/bin/sh\"\n").unwrap();
        let registry = Arc::new(Registry::load(Some(&config)).unwrap());
        let (dispatcher, _completions) = Dispatcher::new(
            registry.clone(),
            Root::new(dir.path()).unwrap(),
            emitter,
            Permissions::Deny,
            Supervisor::new(),
            ModelPicks::load(None),
            4,
        );
        let tools = SubagentTool::new(dispatcher, 0);
        let specs = tools.specs();
        let mut description = ToolDescription::new(&registry.installed());
        description.set_note(INTERNAL_AGENT_NOTE);
        assert_eq!(
            (
                specs[0].name.as_str(),
                &specs[0].description,
                &specs[0].parameters
            ),
            ("subagent", &description.text(), &input_schema())
        );
        assert_eq!(
            (specs[1].name.as_str(), &specs[1].parameters),
            ("subagent_status", &status_schema())
        );
        assert!(
            specs[1]
                .description
                .starts_with("The state of a background sub-agent task (and its report once done)")
                && specs[1].description.ends_with(
                    "`wait_seconds` (at most 600) waits for it to finish before answering."
                ),
            "{}",
            specs[1].description
        );
        let failure = async |name: &str, arguments: &str| {
            tools
                .call(name, arguments, never())
                .await
                .unwrap_err()
                .to_string()
        };
        let bad = r#"{"agnet":"x"}"#;
        assert_eq!(
            failure("subagent", bad).await,
            format!(
                "bad subagent arguments: {}",
                serde_json::from_str::<SubAgentCallInput>(bad).unwrap_err()
            )
        );
        assert_eq!(
            failure("subagent_status", bad).await,
            format!(
                "bad subagent_status arguments: {}",
                serde_json::from_str::<StatusInput>(bad).unwrap_err()
            )
        );
        // No input, and none sent before.
        assert_eq!(
            failure("subagent", r#"{"agent":"sh"}"#).await,
            "no input: this is the first sub-agent call of the conversation, so `input` must \
             say what to do"
        );
        assert_eq!(
            failure("subagent", r#"{"agent":"nope","input":"hi"}"#).await,
            registry.get("nope").unwrap_err().to_string()
        );
        // Empty arguments are `{}`: the internal agent, absent here.
        assert_eq!(
            failure("subagent", " ").await,
            "the internal agent is not available in this session (it needs a chat model); \
             name an ACP agent with `agent`"
        );
        assert_eq!(
            failure("subagent_status", r#"{"task_id":"t9"}"#).await,
            "unknown task \"t9\"; known tasks: none"
        );
        assert_eq!(
            failure("subagent_status", r#"{"cancel":true}"#).await,
            "subagent_status: `cancel` needs a `task_id`"
        );
        assert_eq!(failure("read", "{}").await, "unknown tool \"read\"");
    }
}
