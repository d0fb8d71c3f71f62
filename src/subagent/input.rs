//! The arguments of the `subagent` and `subagent_status` tools, the JSON
//! schema the model sees, generated from the same types, and the message
//! a sub-agent gets from them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::confine::fsroot::Exclude;

fn yes() -> bool {
    true
}

/// Arguments of a `subagent` call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubAgentCallInput {
    /// The ACP agent to run, by name. Omit (or leave empty) to run the
    /// internal agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The message for the sub-agent. Omit (or leave empty) to send the
    /// last message given to a sub-agent in this conversation again.
    /// Not together with `tasks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// Several tasks at once, instead of `input`: they run in parallel (a
    /// few at a time; the rest wait, queued) and the result has a summary
    /// and one entry per task. A task without `agent` runs on this call's
    /// `agent` (or on the internal agent); `code_review` and
    /// `output_requirements` default to this call's. Give several agents
    /// the same message with `code_review` for a review quorum: the worst
    /// verdict, and how many reviewers agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Vec<TaskInput>>,
    /// Ask for a code review: the report must begin with
    /// `<!-- severity: green|yellow|red -->`.
    #[serde(default)]
    pub code_review: bool,
    /// With `tasks` of code reviews: the quorum checks itself. Each red or
    /// yellow finding only one reviewer made goes to another reviewer of
    /// the batch (never its author), with the diff, to confirm or refute
    /// with a reason; a refuted finding stays listed, struck, and no
    /// longer counts toward the verdict, which says so.
    #[serde(default)]
    pub verify: bool,
    /// Resume this agent's last successful session (false: a fresh one).
    /// Ignored for the internal agent.
    #[serde(default = "yes")]
    pub continue_session: bool,
    /// Return a task id at once (one per task of `tasks`); each report
    /// arrives later as a notification.
    #[serde(default)]
    pub run_in_background: bool,
    /// What the report must contain or look like; added to the
    /// sub-agent's message under its own heading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_requirements: Option<String>,
    /// Put a short summary of this conversation before the sub-agent's
    /// message (it knows nothing of it otherwise).
    #[serde(default)]
    pub include_main_summary: bool,
    /// A regular expression: files whose path (relative to the session
    /// directory) matches are kept out of what the internal agent reads,
    /// lists and greps, and ACP agents are refused them when they ask
    /// quorum for them. Agents that read the disk on their own (most
    /// external ones, the internal agent's shell) are not covered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_files_pattern: Option<String>,
    /// `"worktree"`: the sub-agent works in a git worktree of its own, on
    /// a new branch named after the task, and what it changed is
    /// committed there when its turn ends (the answer names the branch,
    /// the worktree and the diffstat); the person's tree is not touched.
    /// For a batch, every task's default. Needs the session directory to
    /// be in a git repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
    /// With `code_review`: the branch the review judges (its diff is
    /// added to the message); the review quorum's verdict is recorded
    /// against it, and a red one keeps it from being merged. For a batch,
    /// every task's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// With `tasks` and `isolation: "worktree"`: an arena. Once every
    /// writer has finished, each branch is reviewed by a quorum of the
    /// other agents (`[arena] reviewers`), and the writers are compared:
    /// check, verdict, findings, diffstat, cost; the winner is the one
    /// whose check passed, with no red finding, fewer yellow ones, then
    /// the smaller diff, then the lower cost.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compare: bool,
    /// The most this call may cost, in USD (for a batch: each of its
    /// tasks); when it is reached, nothing more of it starts. The
    /// session's own cap (`--max-cost`) applies as well.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
}

/// Where a sub-agent writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
// Inlined: some model servers do not follow `$ref`s in tool schemas.
#[schemars(inline)]
pub enum Isolation {
    /// In the session directory (the default).
    None,
    /// In a git worktree of its own, on a branch of its own.
    Worktree,
}

/// One task of a batch call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
// Inlined: some model servers do not follow `$ref`s in tool schemas.
#[schemars(inline)]
pub struct TaskInput {
    /// The ACP agent to run; default: the call's `agent`, else the
    /// internal agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The message for this task's sub-agent.
    pub input: String,
    /// Ask for a code review; default: the call's `code_review`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_review: Option<bool>,
    /// What this task's report must contain; default: the call's
    /// `output_requirements`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_requirements: Option<String>,
    /// `"worktree"` for a worktree of its own; default: the call's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
    /// The branch this review judges; default: the call's `branch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

impl Default for SubAgentCallInput {
    fn default() -> Self {
        Self {
            agent: None,
            input: None,
            tasks: None,
            code_review: false,
            verify: false,
            continue_session: true,
            run_in_background: false,
            output_requirements: None,
            include_main_summary: false,
            exclude_files_pattern: None,
            isolation: None,
            branch: None,
            compare: false,
            max_cost: None,
        }
    }
}

/// A call's arguments that do not fit together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error(
        "`input` and `tasks` are mutually exclusive: give each task its own `input`, or leave `tasks` out"
    )]
    InputAndTasks,
    #[error("`tasks` is empty: give at least one task, or leave `tasks` out and use `input`")]
    NoTasks,
    #[error("{0}")]
    BadPattern(String),
}

/// One task as the dispatcher runs it: the call's defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSpec {
    /// The ACP agent's name, or `None` for the internal agent.
    pub agent: Option<String>,
    /// `None` (single calls only): the last message again.
    pub input: Option<String>,
    pub code_review: bool,
    pub output_requirements: Option<String>,
    /// Runs in a worktree of its own.
    pub isolation: bool,
    /// The branch it reviews.
    pub branch: Option<String>,
    /// Its own spending cap, in USD.
    pub max_cost: Option<f64>,
}

/// `Some(text)` unless `text` is missing or blank.
fn given(text: Option<&str>) -> Option<&str> {
    text.map(str::trim).filter(|t| !t.is_empty())
}

impl SubAgentCallInput {
    /// The ACP agent's name, or `None` for the internal agent.
    pub fn acp_agent(&self) -> Option<&str> {
        given(self.agent.as_deref())
    }

    /// The call's tasks: one for a single call, each of `tasks` for a
    /// batch (`is_batch`), with the call's defaults applied.
    pub fn task_specs(&self) -> Result<Vec<TaskSpec>, InputError> {
        let requirements = given(self.output_requirements.as_deref()).map(str::to_string);
        let Some(tasks) = &self.tasks else {
            return Ok(vec![TaskSpec {
                agent: self.acp_agent().map(str::to_string),
                input: self.input.clone(),
                code_review: self.code_review,
                output_requirements: requirements,
                isolation: self.isolation == Some(Isolation::Worktree),
                branch: given(self.branch.as_deref()).map(str::to_string),
                max_cost: self.max_cost,
            }]);
        };
        if given(self.input.as_deref()).is_some() {
            return Err(InputError::InputAndTasks);
        }
        if tasks.is_empty() {
            return Err(InputError::NoTasks);
        }
        Ok(tasks
            .iter()
            .map(|t| TaskSpec {
                agent: given(t.agent.as_deref())
                    .or(self.acp_agent())
                    .map(str::to_string),
                input: Some(t.input.clone()),
                code_review: t.code_review.unwrap_or(self.code_review),
                output_requirements: given(t.output_requirements.as_deref())
                    .map(str::to_string)
                    .or_else(|| requirements.clone()),
                isolation: t.isolation.or(self.isolation) == Some(Isolation::Worktree),
                branch: given(t.branch.as_deref())
                    .or(given(self.branch.as_deref()))
                    .map(str::to_string),
                max_cost: self.max_cost,
            })
            .collect())
    }

    /// Whether this is a batch call (`tasks`).
    pub fn is_batch(&self) -> bool {
        self.tasks.is_some()
    }

    /// The compiled `exclude_files_pattern`, if one is given.
    pub fn exclude(&self) -> Result<Option<Exclude>, InputError> {
        match self.exclude_files_pattern.as_deref() {
            Some(p) if !p.is_empty() => Exclude::new(p).map(Some).map_err(InputError::BadPattern),
            _ => Ok(None),
        }
    }
}

/// The heading the main conversation's summary stands under.
pub const SUMMARY_HEADING: &str = "## Context: the conversation you were called from";
/// The heading the task stands under when a summary comes before it.
pub const TASK_HEADING: &str = "## Your task";
/// The heading `output_requirements` stand under.
pub const REQUIREMENTS_HEADING: &str = "## Output requirements";

/// The message a sub-agent gets: the summary of the main conversation
/// (if any) before the task, the output requirements (if any) after it,
/// and a code review's contract last.
pub fn compose_prompt(
    message: &str,
    summary: Option<&str>,
    requirements: Option<&str>,
    code_review: bool,
) -> String {
    let mut prompt = String::new();
    if let Some(summary) = given(summary) {
        prompt.push_str(&format!(
            "{SUMMARY_HEADING}\n\n{summary}\n\n{TASK_HEADING}\n\n"
        ));
    }
    prompt.push_str(message);
    if let Some(requirements) = given(requirements) {
        prompt.push_str(&format!("\n\n{REQUIREMENTS_HEADING}\n\n{requirements}"));
    }
    if code_review {
        prompt.push_str(REVIEW_CONTRACT);
    }
    prompt
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
    /// Run an interrupted or failed task again (needs `task_id`): a new
    /// background task with the same agent and message, on the agent's
    /// session; the answer is the new task's status.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retry: bool,
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
(green: good to go; yellow: fix soon, nothing blocking; red: must be fixed), then your findings. \
Write each problem you find as one finding: a line \
`<!-- finding: {\"file\": \"src/http.rs\", \"line\": 42, \"end_line\": 48, \"severity\": \"red\", \"title\": \"retries a POST that is not idempotent\"} -->` \
(`file` relative to the repository's top, `line` and the optional `end_line` the lines it is about, \
`severity` green, yellow or red, `title` one line), followed by what is wrong and how to fix it in Markdown, \
up to the next finding or the end of the report.";

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
            serde_json::to_string(&crate::subagent::dispatch::Reply::Done(out)).unwrap(),
            r#"{"output":"done","stop_reason":"end_turn"}"#
        );
    }

    #[test]
    fn tasks_take_the_calls_defaults() {
        let input: SubAgentCallInput = serde_json::from_str(
            r#"{"agent":"claude","code_review":true,"output_requirements":"A list.","tasks":[
                {"input":"one"},
                {"agent":"codex","input":"two","code_review":false,"output_requirements":"A table."},
                {"agent":" ","input":"three"}]}"#,
        )
        .unwrap();
        assert!(input.is_batch());
        let specs = input.task_specs().unwrap();
        assert_eq!(
            specs,
            [
                TaskSpec {
                    agent: Some("claude".into()),
                    input: Some("one".into()),
                    code_review: true,
                    output_requirements: Some("A list.".into()),
                    isolation: false,
                    branch: None,
                    max_cost: None,
                },
                TaskSpec {
                    agent: Some("codex".into()),
                    input: Some("two".into()),
                    code_review: false,
                    output_requirements: Some("A table.".into()),
                    isolation: false,
                    branch: None,
                    max_cost: None,
                },
                TaskSpec {
                    agent: Some("claude".into()),
                    input: Some("three".into()),
                    code_review: true,
                    output_requirements: Some("A list.".into()),
                    isolation: false,
                    branch: None,
                    max_cost: None,
                },
            ]
        );
        // Neither the task nor the call names an agent: the internal one.
        let input: SubAgentCallInput =
            serde_json::from_str(r#"{"tasks":[{"input":"x"}]}"#).unwrap();
        assert_eq!(input.task_specs().unwrap()[0].agent, None);
        // A single call is one task.
        let single: SubAgentCallInput =
            serde_json::from_str(r#"{"agent":"gemini","input":"hi"}"#).unwrap();
        assert!(!single.is_batch());
        assert_eq!(single.task_specs().unwrap().len(), 1);
    }

    #[test]
    fn isolation_and_branch_of_a_batch_are_its_tasks_defaults() {
        let input: SubAgentCallInput = serde_json::from_str(
            r#"{"isolation":"worktree","branch":"quorum/t1-x","tasks":[
                {"input":"one"},
                {"input":"two","isolation":"none","branch":"quorum/t2-y"}]}"#,
        )
        .unwrap();
        let specs = input.task_specs().unwrap();
        assert!(specs[0].isolation && !specs[1].isolation);
        assert_eq!(specs[0].branch.as_deref(), Some("quorum/t1-x"));
        assert_eq!(specs[1].branch.as_deref(), Some("quorum/t2-y"));
        let e =
            serde_json::from_str::<SubAgentCallInput>(r#"{"isolation":"sandbox"}"#).unwrap_err();
        assert!(e.to_string().contains("unknown variant `sandbox`"), "{e}");
    }

    #[test]
    fn input_and_tasks_do_not_mix_and_tasks_need_an_input() {
        let both: SubAgentCallInput =
            serde_json::from_str(r#"{"input":"x","tasks":[{"input":"y"}]}"#).unwrap();
        let e = both.task_specs().unwrap_err();
        assert_eq!(e, InputError::InputAndTasks);
        assert!(e.to_string().contains("mutually exclusive"), "{e}");
        let none: SubAgentCallInput = serde_json::from_str(r#"{"tasks":[]}"#).unwrap();
        assert_eq!(none.task_specs().unwrap_err(), InputError::NoTasks);
        let e =
            serde_json::from_str::<SubAgentCallInput>(r#"{"tasks":[{"agent":"x"}]}"#).unwrap_err();
        assert!(e.to_string().contains("missing field `input`"), "{e}");
        let e =
            serde_json::from_str::<SubAgentCallInput>(r#"{"tasks":[{"input":"x","agnet":"y"}]}"#)
                .unwrap_err();
        assert!(e.to_string().contains("agnet"), "{e}");
    }

    #[test]
    fn a_bad_exclude_pattern_is_named() {
        let input: SubAgentCallInput =
            serde_json::from_str(r#"{"input":"x","exclude_files_pattern":"[a-"}"#).unwrap();
        let e = input.exclude().unwrap_err();
        assert!(
            e.to_string()
                .starts_with("exclude_files_pattern \"[a-\" is not a valid regular expression"),
            "{e}"
        );
        let input: SubAgentCallInput =
            serde_json::from_str(r#"{"input":"x","exclude_files_pattern":"\\.env$"}"#).unwrap();
        assert_eq!(input.exclude().unwrap().unwrap().pattern(), r"\.env$");
    }

    #[test]
    fn the_prompt_has_the_summary_before_and_the_requirements_after() {
        assert_eq!(compose_prompt("Do it.", None, None, false), "Do it.");
        assert_eq!(
            compose_prompt("Do it.", Some("We talked."), Some("One line."), false),
            format!(
                "{SUMMARY_HEADING}\n\nWe talked.\n\n{TASK_HEADING}\n\nDo it.\n\n{REQUIREMENTS_HEADING}\n\nOne line."
            )
        );
        let review = compose_prompt("Check.", None, Some(" "), true);
        assert_eq!(
            review,
            format!("Check.{REVIEW_CONTRACT}"),
            "blank requirements are none"
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
            "tasks",
            "code_review",
            "verify",
            "continue_session",
            "run_in_background",
            "output_requirements",
            "include_main_summary",
            "exclude_files_pattern",
            "isolation",
            "branch",
            "compare",
        ] {
            assert!(props.get(field).is_some(), "{field} in {schema}");
        }
        assert_eq!(props["continue_session"]["default"], true);
        assert_eq!(props["code_review"]["default"], false);
        assert_eq!(props["verify"]["default"], false);
        assert_eq!(props["include_main_summary"]["default"], false);
        // A task's fields, and only `input` is required of it.
        let text = schema.to_string();
        assert!(!text.contains("$ref"), "inlined for model servers: {text}");
        let task = &schema["properties"]["tasks"]["items"];
        for field in [
            "agent",
            "input",
            "code_review",
            "output_requirements",
            "isolation",
            "branch",
        ] {
            assert!(task["properties"].get(field).is_some(), "{field} in {text}");
        }
        assert_eq!(task["required"], serde_json::json!(["input"]), "{text}");
        assert!(
            props["exclude_files_pattern"]["description"]
                .as_str()
                .unwrap()
                .contains("read the disk on their own"),
            "{text}"
        );
        assert!(
            schema
                .get("required")
                .is_none_or(|r| r.as_array().unwrap().is_empty()),
            "{schema}"
        );
    }
}
