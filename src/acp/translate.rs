//! The translation of ACP session updates into quorum's activity: pure
//! functions from the schema's values to `event` values (`Activity`,
//! `ToolDetail`, `StopReason`, ...), with no sink and no I/O. The turn
//! sends what they return.

use agent_client_protocol::schema::MaybeUndefined;
use agent_client_protocol::v1::schema::{
    ContentBlock, SessionConfigKind, SessionConfigOption, SessionConfigOptionCategory,
    SessionUpdate, StateUpdate, SubagentUpdate, ToolCallStatus,
};

use crate::event::{
    Activity, ChildState, Cost, PlanEntry, PlanStatus, StopReason, ToolContent, ToolDetail,
    ToolStatus, Usage,
};

/// What one session update means for quorum.
#[derive(Debug, PartialEq)]
pub(super) enum Translated {
    /// Something for the call's box.
    Activity(Activity),
    /// The agent's session now runs on this model.
    ModelPicked(String),
    /// Nothing quorum shows. (A `subagent_update` is taken in by the turn,
    /// which keeps its child sessions: see [`ChildInfo::apply`].)
    Nothing,
}

/// What `update` means for quorum. Text is moved out of the update, not
/// copied.
pub(super) fn update(update: SessionUpdate) -> Translated {
    match update {
        SessionUpdate::AgentMessageChunk(chunk) => match text_of(chunk.content) {
            Some(text) => Translated::Activity(Activity::MessageChunk { text }),
            None => Translated::Nothing,
        },
        SessionUpdate::AgentThoughtChunk(chunk) => match text_of(chunk.content) {
            Some(text) => Translated::Activity(Activity::ThoughtChunk { text }),
            None => Translated::Nothing,
        },
        SessionUpdate::ToolCall(call) => Translated::Activity(Activity::ToolCall {
            id: call.tool_call_id.0.to_string(),
            title: call.title,
            status: tool_status(call.status),
            detail: Box::new(ToolDetail {
                kind: tool_kind(&call.kind),
                locations: call.locations.iter().map(location).collect(),
                raw_input: call.raw_input,
                content: call.content.iter().filter_map(tool_content).collect(),
                raw_output: call.raw_output,
            }),
        }),
        SessionUpdate::ToolCallUpdate(update) => {
            let detail = update_detail(&update.fields);
            Translated::Activity(Activity::ToolCallUpdate {
                id: update.tool_call_id.0.to_string(),
                title: update.fields.title,
                status: update.fields.status.map(tool_status),
                detail: Box::new(detail),
            })
        }
        // The prompt response's usage is behind the schema's unstable
        // `unstable_end_turn_token_usage` feature: this is the one
        // report read.
        SessionUpdate::UsageUpdate(update) => Translated::Activity(Activity::Usage {
            usage: Usage {
                used: update.used,
                size: Some(update.size).filter(|s| *s > 0),
                cost: update.cost.map(|c| Cost {
                    amount: c.amount,
                    currency: c.currency,
                    estimated: false,
                }),
            },
        }),
        SessionUpdate::ConfigOptionUpdate(update) => match current_model(&update.config_options) {
            Some(model) => Translated::ModelPicked(model),
            None => Translated::Nothing,
        },
        SessionUpdate::Plan(plan) => Translated::Activity(Activity::Plan {
            entries: plan
                .entries
                .into_iter()
                .map(|e| PlanEntry {
                    content: e.content,
                    status: match serde_json::to_value(&e.status)
                        .ok()
                        .as_ref()
                        .and_then(|v| v.as_str())
                    {
                        Some("completed") => PlanStatus::Completed,
                        Some("in_progress") => PlanStatus::InProgress,
                        _ => PlanStatus::Pending,
                    },
                })
                .collect(),
        }),
        _ => Translated::Nothing,
    }
}

pub(super) fn stop_reason(reason: agent_client_protocol::v1::schema::StopReason) -> StopReason {
    use agent_client_protocol::v1::schema::StopReason as Acp;
    match reason {
        Acp::EndTurn => StopReason::EndTurn,
        Acp::MaxTokens => StopReason::MaxTokens,
        Acp::MaxTurnRequests => StopReason::MaxTurnRequests,
        Acp::Refusal => StopReason::Refusal,
        Acp::Cancelled => StopReason::Cancelled,
        // A reason newer than this client knows: the turn did end.
        _ => StopReason::EndTurn,
    }
}

/// A tool kind's wire name; `other` (the default) says nothing.
fn tool_kind(kind: &agent_client_protocol::v1::schema::ToolKind) -> Option<String> {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .filter(|k| k != "other")
}

fn location(l: &agent_client_protocol::v1::schema::ToolCallLocation) -> String {
    match l.line {
        Some(line) => format!("{}:{line}", l.path.display()),
        None => l.path.display().to_string(),
    }
}

fn tool_content(c: &agent_client_protocol::v1::schema::ToolCallContent) -> Option<ToolContent> {
    use agent_client_protocol::v1::schema::ToolCallContent as C;
    match c {
        C::Content(c) => super::content::text(&c.content).map(|text| ToolContent::Text { text }),
        C::Diff(d) => Some(ToolContent::Diff {
            path: d.path.display().to_string(),
            old_text: d.old_text.clone(),
            new_text: d.new_text.clone(),
        }),
        C::Terminal(t) => Some(ToolContent::Terminal {
            terminal_id: t.terminal_id.0.to_string(),
        }),
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// What a tool call update says about the call.
pub(super) fn update_detail(
    f: &agent_client_protocol::v1::schema::ToolCallUpdateFields,
) -> ToolDetail {
    ToolDetail {
        kind: f.kind.as_ref().and_then(tool_kind),
        locations: f
            .locations
            .as_ref()
            .map(|l| l.iter().map(location).collect())
            .unwrap_or_default(),
        raw_input: f.raw_input.clone(),
        content: f
            .content
            .as_ref()
            .map(|c| c.iter().filter_map(tool_content).collect())
            .unwrap_or_default(),
        raw_output: f.raw_output.clone(),
    }
}

fn tool_status(status: ToolCallStatus) -> ToolStatus {
    match status {
        ToolCallStatus::Pending => ToolStatus::Pending,
        ToolCallStatus::InProgress => ToolStatus::InProgress,
        ToolCallStatus::Completed => ToolStatus::Completed,
        ToolCallStatus::Failed => ToolStatus::Failed,
        _ => ToolStatus::InProgress,
    }
}

/// A content block's text, taken out of it: text as it is, an image,
/// audio or resource as its placeholder (see `content`).
fn text_of(block: ContentBlock) -> Option<String> {
    super::content::into_text(block)
}

/// The model a set of config options says is current, if it names one.
pub(super) fn current_model(options: &[SessionConfigOption]) -> Option<String> {
    options.iter().find_map(|o| match (&o.category, &o.kind) {
        (Some(SessionConfigOptionCategory::Model), SessionConfigKind::Select(s)) => {
            Some(s.current_value.to_string())
        }
        _ => None,
    })
}

/// What is known of a child session the agent announced, as far as its
/// `subagent_update`s told.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct ChildInfo {
    pub(super) title: Option<String>,
    pub(super) description: Option<String>,
    pub(super) state: Option<ChildState>,
    pub(super) can_cancel: bool,
}

impl ChildInfo {
    /// Takes in one `subagent_update` for this child: each field it omits
    /// is kept, each it sends `null` is cleared.
    pub(super) fn apply(&mut self, update: SubagentUpdate) {
        patch(&mut self.title, update.title);
        patch(&mut self.description, update.description);
        match update.capabilities {
            MaybeUndefined::Undefined => {}
            MaybeUndefined::Null => self.can_cancel = false,
            MaybeUndefined::Value(c) => self.can_cancel = c.cancel.is_some(),
        }
        match update.state {
            MaybeUndefined::Undefined => {}
            MaybeUndefined::Null => self.state = None,
            MaybeUndefined::Value(state) => self.state = Some(child_state(state)),
        }
    }
}

fn child_state(state: StateUpdate) -> ChildState {
    match state {
        StateUpdate::Running(_) => ChildState::Running,
        StateUpdate::Idle(_) => ChildState::Idle,
        StateUpdate::RequiresAction(_) => ChildState::RequiresAction,
        _ => ChildState::Unknown,
    }
}

/// Applies a `subagent_update` field patch: omitted keeps, `null` clears.
fn patch(field: &mut Option<String>, value: MaybeUndefined<String>) {
    match value {
        MaybeUndefined::Undefined => {}
        MaybeUndefined::Null => *field = None,
        MaybeUndefined::Value(v) => *field = Some(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A session update as an agent sends it on the wire.
    fn wire(value: serde_json::Value) -> SessionUpdate {
        serde_json::from_value(value).expect("a session update")
    }

    fn activity(value: serde_json::Value) -> Activity {
        match update(wire(value)) {
            Translated::Activity(a) => a,
            other => panic!("no activity: {other:?}"),
        }
    }

    #[test]
    fn message_and_thought_chunks_carry_their_text() {
        assert_eq!(
            activity(json!({
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "Hello"},
            })),
            Activity::MessageChunk {
                text: "Hello".into()
            }
        );
        assert_eq!(
            activity(json!({
                "sessionUpdate": "agent_thought_chunk",
                "content": {"type": "text", "text": "Hmm"},
            })),
            Activity::ThoughtChunk { text: "Hmm".into() }
        );
    }

    #[test]
    fn an_image_chunk_is_a_placeholder_and_the_users_own_chunks_say_nothing() {
        let image = json!({"type": "image", "data": "AAAA", "mimeType": "image/png"});
        assert_eq!(
            activity(json!({"sessionUpdate": "agent_message_chunk", "content": image})),
            Activity::MessageChunk {
                text: "[image · image/png]".into()
            }
        );
        assert_eq!(
            update(wire(json!({
                "sessionUpdate": "user_message_chunk",
                "content": {"type": "text", "text": "my prompt"},
            }))),
            Translated::Nothing
        );
    }

    #[test]
    fn a_tool_call_carries_kind_locations_input_content_and_output() {
        let call = activity(json!({
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "Edit src/main.rs",
            "kind": "edit",
            "status": "in_progress",
            "locations": [{"path": "/w/src/main.rs", "line": 12}, {"path": "/w/README.md"}],
            "rawInput": {"path": "/w/src/main.rs"},
            "rawOutput": {"ok": true},
            "content": [
                {"type": "diff", "path": "/w/src/main.rs", "oldText": "a", "newText": "b"},
                {"type": "diff", "path": "/w/new.rs", "newText": "fresh"},
                {"type": "content", "content": {"type": "text", "text": "done"}},
                {"type": "content", "content": {"type": "image", "data": "AAAA", "mimeType": "image/png"}},
                {"type": "terminal", "terminalId": "term-1"},
            ],
        }));
        assert_eq!(
            call,
            Activity::ToolCall {
                id: "t1".into(),
                title: "Edit src/main.rs".into(),
                status: ToolStatus::InProgress,
                detail: Box::new(ToolDetail {
                    kind: Some("edit".into()),
                    locations: vec!["/w/src/main.rs:12".into(), "/w/README.md".into()],
                    raw_input: Some(json!({"path": "/w/src/main.rs"})),
                    content: vec![
                        ToolContent::Diff {
                            path: "/w/src/main.rs".into(),
                            old_text: Some("a".into()),
                            new_text: "b".into(),
                        },
                        ToolContent::Diff {
                            path: "/w/new.rs".into(),
                            old_text: None,
                            new_text: "fresh".into(),
                        },
                        ToolContent::Text {
                            text: "done".into()
                        },
                        ToolContent::Text {
                            text: "[image · image/png]".into()
                        },
                        ToolContent::Terminal {
                            terminal_id: "term-1".into()
                        },
                    ],
                    raw_output: Some(json!({"ok": true})),
                }),
            }
        );
    }

    #[test]
    fn a_bare_tool_call_is_pending_with_no_kind() {
        // `other`, the default kind, says nothing; `pending` is the
        // default status.
        assert_eq!(
            activity(json!({"sessionUpdate": "tool_call", "toolCallId": "t2", "title": "Think"})),
            Activity::ToolCall {
                id: "t2".into(),
                title: "Think".into(),
                status: ToolStatus::Pending,
                detail: Box::default(),
            }
        );
    }

    #[test]
    fn tool_kinds_go_by_their_wire_names() {
        for kind in [
            "read", "edit", "delete", "move", "search", "execute", "think", "fetch",
        ] {
            let call = activity(json!({
                "sessionUpdate": "tool_call", "toolCallId": "t", "title": "x", "kind": kind,
            }));
            let Activity::ToolCall { detail, .. } = call else {
                panic!("not a tool call: {call:?}");
            };
            assert_eq!(detail.kind.as_deref(), Some(kind));
        }
    }

    #[test]
    fn tool_statuses_map_one_to_one() {
        for (wire_name, status) in [
            ("pending", ToolStatus::Pending),
            ("in_progress", ToolStatus::InProgress),
            ("completed", ToolStatus::Completed),
            ("failed", ToolStatus::Failed),
        ] {
            let update = activity(json!({
                "sessionUpdate": "tool_call_update", "toolCallId": "t", "status": wire_name,
            }));
            let Activity::ToolCallUpdate { status: got, .. } = update else {
                panic!("not a tool call update: {update:?}");
            };
            assert_eq!(got, Some(status), "{wire_name}");
        }
    }

    #[test]
    fn a_tool_call_update_carries_only_what_it_sends() {
        assert_eq!(
            activity(json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1"})),
            Activity::ToolCallUpdate {
                id: "t1".into(),
                title: None,
                status: None,
                detail: Box::default(),
            }
        );
        assert_eq!(
            activity(json!({
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t1",
                "title": "Ran cargo test",
                "status": "completed",
                "kind": "execute",
                "locations": [{"path": "/w", "line": 1}],
                "rawInput": {"command": "cargo test"},
                "rawOutput": "ok",
                "content": [{"type": "content", "content": {"type": "text", "text": "42 passed"}}],
            })),
            Activity::ToolCallUpdate {
                id: "t1".into(),
                title: Some("Ran cargo test".into()),
                status: Some(ToolStatus::Completed),
                detail: Box::new(ToolDetail {
                    kind: Some("execute".into()),
                    locations: vec!["/w:1".into()],
                    raw_input: Some(json!({"command": "cargo test"})),
                    content: vec![ToolContent::Text {
                        text: "42 passed".into()
                    }],
                    raw_output: Some(json!("ok")),
                }),
            }
        );
    }

    #[test]
    fn a_plan_keeps_its_entries_and_their_statuses() {
        assert_eq!(
            activity(json!({
                "sessionUpdate": "plan",
                "entries": [
                    {"content": "Read", "priority": "high", "status": "completed"},
                    {"content": "Fix", "priority": "medium", "status": "in_progress"},
                    {"content": "Test", "priority": "low", "status": "pending"},
                ],
            })),
            Activity::Plan {
                entries: vec![
                    PlanEntry {
                        content: "Read".into(),
                        status: PlanStatus::Completed
                    },
                    PlanEntry {
                        content: "Fix".into(),
                        status: PlanStatus::InProgress
                    },
                    PlanEntry {
                        content: "Test".into(),
                        status: PlanStatus::Pending
                    },
                ],
            }
        );
    }

    #[test]
    fn usage_keeps_a_known_window_and_the_cost() {
        assert_eq!(
            activity(json!({
                "sessionUpdate": "usage_update",
                "used": 1200,
                "size": 200000,
                "cost": {"amount": 0.04, "currency": "USD"},
            })),
            Activity::Usage {
                usage: Usage {
                    used: 1200,
                    size: Some(200000),
                    cost: Some(Cost {
                        amount: 0.04,
                        currency: "USD".into(),
                        estimated: false,
                    }),
                },
            }
        );
        // A window of 0 is not known.
        assert_eq!(
            activity(json!({"sessionUpdate": "usage_update", "used": 5, "size": 0})),
            Activity::Usage {
                usage: Usage {
                    used: 5,
                    size: None,
                    cost: None
                },
            }
        );
    }

    fn config_update(category: &str, current: &str) -> SessionUpdate {
        wire(json!({
            "sessionUpdate": "config_option_update",
            "configOptions": [{
                "id": category,
                "name": category,
                "category": category,
                "type": "select",
                "currentValue": current,
                "options": [{"value": "fast", "name": "fast"}, {"value": "smart", "name": "smart"}],
            }],
        }))
    }

    #[test]
    fn a_config_update_naming_a_model_picks_it() {
        assert_eq!(
            update(config_update("model", "smart")),
            Translated::ModelPicked("smart".into())
        );
        // A mode is no model.
        assert_eq!(update(config_update("mode", "fast")), Translated::Nothing);
    }

    #[test]
    fn commands_modes_session_info_and_child_announcements_show_nothing() {
        for value in [
            json!({"sessionUpdate": "available_commands_update", "availableCommands": [
                {"name": "web", "description": "Search the web"},
            ]}),
            json!({"sessionUpdate": "current_mode_update", "currentModeId": "code"}),
            json!({"sessionUpdate": "session_info_update", "title": "A session"}),
            json!({"sessionUpdate": "subagent_update", "sessionId": "child-1", "title": "scout"}),
        ] {
            assert_eq!(update(wire(value.clone())), Translated::Nothing, "{value}");
        }
    }

    #[test]
    fn stop_reasons_map_one_to_one() {
        use agent_client_protocol::v1::schema::StopReason as Acp;
        for (acp, ours) in [
            (Acp::EndTurn, StopReason::EndTurn),
            (Acp::MaxTokens, StopReason::MaxTokens),
            (Acp::MaxTurnRequests, StopReason::MaxTurnRequests),
            (Acp::Refusal, StopReason::Refusal),
            (Acp::Cancelled, StopReason::Cancelled),
        ] {
            assert_eq!(stop_reason(acp), ours);
        }
    }

    fn subagent(value: serde_json::Value) -> SubagentUpdate {
        serde_json::from_value(value).expect("a subagent update")
    }

    #[test]
    fn a_child_is_announced_then_patched() {
        let mut child = ChildInfo::default();
        child.apply(subagent(json!({
            "sessionId": "c1",
            "title": "scout",
            "description": "looks for the tests",
            "capabilities": {"cancel": {}},
            "state": {"state": "running"},
        })));
        assert_eq!(
            child,
            ChildInfo {
                title: Some("scout".into()),
                description: Some("looks for the tests".into()),
                state: Some(ChildState::Running),
                can_cancel: true,
            }
        );
        // Omitted fields are kept.
        child.apply(subagent(
            json!({"sessionId": "c1", "state": {"state": "requires_action"}}),
        ));
        assert_eq!(child.title.as_deref(), Some("scout"));
        assert_eq!(child.description.as_deref(), Some("looks for the tests"));
        assert!(child.can_cancel);
        assert_eq!(child.state, Some(ChildState::RequiresAction));
        // `null` clears; capabilities without `cancel` do not allow it.
        child.apply(subagent(json!({
            "sessionId": "c1", "title": null, "capabilities": {}, "state": null,
        })));
        assert_eq!(child.title, None);
        assert_eq!(child.description.as_deref(), Some("looks for the tests"));
        assert!(!child.can_cancel);
        assert_eq!(child.state, None);
        child.apply(subagent(
            json!({"sessionId": "c1", "capabilities": {"cancel": {}}}),
        ));
        child.apply(subagent(json!({"sessionId": "c1", "capabilities": null})));
        assert!(!child.can_cancel);
    }

    #[test]
    fn child_states_map_and_a_new_one_is_unknown() {
        for (wire_name, state) in [
            ("running", ChildState::Running),
            ("idle", ChildState::Idle),
            ("requires_action", ChildState::RequiresAction),
            ("unknown", ChildState::Unknown),
            ("_dreaming", ChildState::Unknown),
        ] {
            let mut child = ChildInfo::default();
            child.apply(subagent(
                json!({"sessionId": "c1", "state": {"state": wire_name}}),
            ));
            assert_eq!(child.state, Some(state), "{wire_name}");
        }
    }
}
