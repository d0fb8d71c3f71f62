//! The `subagent` tool's input and output, and the JSON schema the model
//! sees, generated from the same types.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

fn yes() -> bool {
    true
}

/// Arguments of a `subagent` call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubAgentCallInput {
    /// The ACP agent to run, by name. Omit (or leave empty) to run the
    /// internal agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The message for the sub-agent. Omit (or leave empty) to send the
    /// last message given to a sub-agent in this conversation again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// Ask for a code review: the report must begin with
    /// `<!-- severity: green|yellow|red -->`.
    #[serde(default)]
    pub code_review: bool,
    /// Resume this agent's last successful session (false: a fresh one).
    /// Ignored for the internal agent.
    #[serde(default = "yes")]
    pub continue_session: bool,
    /// Return a task id at once; the report arrives later as a notification.
    #[serde(default)]
    pub run_in_background: bool,
}

impl Default for SubAgentCallInput {
    fn default() -> Self {
        Self {
            agent: None,
            input: None,
            code_review: false,
            continue_session: true,
            run_in_background: false,
        }
    }
}

impl SubAgentCallInput {
    /// The ACP agent's name, or `None` for the internal agent.
    pub fn acp_agent(&self) -> Option<&str> {
        self.agent
            .as_deref()
            .map(str::trim)
            .filter(|a| !a.is_empty())
    }
}

/// Arguments of a `subagent_status` call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusInput {
    /// A background task's id; omit to list every task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// A follow-up message for the task's agent (needs `task_id`): queued
    /// and sent as its next turn while the task runs; sent at once, as a
    /// new turn on the same session, once it is done. Not for tasks of the
    /// internal agent, which keeps no session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Stop the task (needs `task_id`).
    #[serde(default)]
    pub cancel: bool,
    /// Wait up to this many seconds (at most 600) for the task (or, without
    /// `task_id`, every task) to finish before answering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<u64>,
}

/// The longest `wait_seconds` honoured.
pub const MAX_WAIT_SECONDS: u64 = 600;

/// The JSON schema of `subagent_status`'s parameters.
pub fn status_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(StatusInput)).expect("a schema is JSON")
}

/// The JSON schema of the tool's parameters.
pub fn input_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(SubAgentCallInput)).expect("a schema is JSON")
}

/// The review contract appended to a code-review request.
pub const REVIEW_CONTRACT: &str = "\n\nThis is a code review. Begin your final report with exactly one line \
`<!-- severity: green -->`, `<!-- severity: yellow -->` or `<!-- severity: red -->` \
(green: good to go; yellow: fix soon, nothing blocking; red: must be fixed), then your findings.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_contract() {
        let input: SubAgentCallInput = serde_json::from_str("{}").unwrap();
        assert_eq!(input, SubAgentCallInput::default());
        assert!(input.continue_session);
        assert!(!input.code_review && !input.run_in_background);
        assert_eq!(input.acp_agent(), None);
        let input: SubAgentCallInput =
            serde_json::from_str(r#"{"agent":"  ","input":"x"}"#).unwrap();
        assert_eq!(
            input.acp_agent(),
            None,
            "an empty agent is the internal one"
        );
    }

    #[test]
    fn exact_json_names() {
        let input: SubAgentCallInput = serde_json::from_str(
            r#"{"agent":"claude","input":"hi","code_review":true,"continue_session":false,"run_in_background":true}"#,
        )
        .unwrap();
        assert_eq!(input.acp_agent(), Some("claude"));
        assert!(input.code_review && !input.continue_session && input.run_in_background);
        let out = crate::event::Outcome::new(crate::event::StopReason::EndTurn, "done");
        assert_eq!(
            out.tool_json().to_string(),
            r#"{"output":"done","stop_reason":"end_turn"}"#
        );
    }

    #[test]
    fn unknown_fields_are_refused_by_name() {
        let err = serde_json::from_str::<SubAgentCallInput>(r#"{"agnet":"claude"}"#).unwrap_err();
        assert!(err.to_string().contains("agnet"), "{err}");
    }

    #[test]
    fn status_input_fields() {
        let input: StatusInput = serde_json::from_str(
            r#"{"task_id":"t1","message":"and tests?","cancel":true,"wait_seconds":5}"#,
        )
        .unwrap();
        assert_eq!(input.task_id.as_deref(), Some("t1"));
        assert_eq!(input.message.as_deref(), Some("and tests?"));
        assert!(input.cancel);
        assert_eq!(input.wait_seconds, Some(5));
        assert_eq!(
            serde_json::from_str::<StatusInput>("{}").unwrap(),
            StatusInput::default()
        );
        let schema = status_schema();
        for field in ["task_id", "message", "cancel", "wait_seconds"] {
            assert!(schema["properties"].get(field).is_some(), "{field}");
        }
    }

    #[test]
    fn schema_lists_the_fields_and_defaults() {
        let schema = input_schema();
        let props = &schema["properties"];
        for field in [
            "agent",
            "input",
            "code_review",
            "continue_session",
            "run_in_background",
        ] {
            assert!(props.get(field).is_some(), "{field} in {schema}");
        }
        assert_eq!(props["continue_session"]["default"], true);
        assert_eq!(props["code_review"]["default"], false);
        assert!(
            schema
                .get("required")
                .is_none_or(|r| r.as_array().unwrap().is_empty()),
            "{schema}"
        );
    }
}
