//! A sub-agent's activity as ACP carries it: the updates of its child
//! session, tool kinds and contents.

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Cost, Diff, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus,
    SessionUpdate, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind, UsageUpdate,
};

use crate::event::{Activity, PlanStatus, ToolContent, ToolDetail, ToolStatus};

fn tool_status(status: ToolStatus) -> ToolCallStatus {
    match status {
        ToolStatus::Pending => ToolCallStatus::Pending,
        ToolStatus::InProgress => ToolCallStatus::InProgress,
        ToolStatus::Completed => ToolCallStatus::Completed,
        ToolStatus::Failed => ToolCallStatus::Failed,
    }
}

/// An ACP tool kind by its wire name.
pub fn tool_kind(kind: Option<&str>) -> ToolKind {
    match kind {
        Some("read") => ToolKind::Read,
        Some("edit") => ToolKind::Edit,
        Some("delete") => ToolKind::Delete,
        Some("move") => ToolKind::Move,
        Some("search") => ToolKind::Search,
        Some("execute") => ToolKind::Execute,
        Some("think") => ToolKind::Think,
        Some("fetch") => ToolKind::Fetch,
        _ => ToolKind::Other,
    }
}

/// A tool call's content as ACP carries it (a terminal of quorum's is
/// not the host's: its output is left out).
pub fn tool_content(detail: &ToolDetail) -> Vec<ToolCallContent> {
    detail
        .content
        .iter()
        .filter_map(|c| match c {
            ToolContent::Text { text } => Some(ToolCallContent::from(text.clone())),
            ToolContent::Diff {
                path,
                old_text,
                new_text,
            } => Some(ToolCallContent::from(
                Diff::new(path.clone(), new_text.clone()).old_text(old_text.clone()),
            )),
            ToolContent::Terminal { .. } => None,
        })
        .collect()
}

fn locations(detail: &ToolDetail) -> Vec<ToolCallLocation> {
    detail
        .locations
        .iter()
        .map(|p| ToolCallLocation::new(p.clone()))
        .collect()
}

/// A sub-agent's activity as an update of its own (child) session.
pub(super) fn child_update(activity: &Activity) -> Option<SessionUpdate> {
    let chunk = |text: &str| ContentChunk::new(ContentBlock::from(text.to_string()));
    Some(match activity {
        Activity::MessageChunk { text } => SessionUpdate::AgentMessageChunk(chunk(text)),
        Activity::ThoughtChunk { text } => SessionUpdate::AgentThoughtChunk(chunk(text)),
        Activity::ToolCall {
            id,
            title,
            status,
            detail,
        } => {
            let mut call = ToolCall::new(id.clone(), title.clone())
                .kind(tool_kind(detail.kind.as_deref()))
                .status(tool_status(*status))
                .content(tool_content(detail))
                .locations(locations(detail));
            if let Some(input) = &detail.raw_input {
                call = call.raw_input(input.clone());
            }
            if let Some(output) = &detail.raw_output {
                call = call.raw_output(output.clone());
            }
            SessionUpdate::ToolCall(call)
        }
        Activity::ToolCallUpdate {
            id,
            title,
            status,
            detail,
        } => {
            let mut fields = ToolCallUpdateFields::new();
            if let Some(title) = title {
                fields = fields.title(title.clone());
            }
            if let Some(status) = status {
                fields = fields.status(tool_status(*status));
            }
            if let Some(kind) = &detail.kind {
                fields = fields.kind(tool_kind(Some(kind)));
            }
            if !detail.content.is_empty() {
                fields = fields.content(tool_content(detail));
            }
            if !detail.locations.is_empty() {
                fields = fields.locations(locations(detail));
            }
            if let Some(input) = &detail.raw_input {
                fields = fields.raw_input(input.clone());
            }
            if let Some(output) = &detail.raw_output {
                fields = fields.raw_output(output.clone());
            }
            SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id.clone(), fields))
        }
        Activity::Plan { entries } => SessionUpdate::Plan(Plan::new(
            entries
                .iter()
                .map(|e| {
                    PlanEntry::new(
                        e.content.clone(),
                        PlanEntryPriority::Medium,
                        match e.status {
                            PlanStatus::Pending => PlanEntryStatus::Pending,
                            PlanStatus::InProgress => PlanEntryStatus::InProgress,
                            PlanStatus::Completed => PlanEntryStatus::Completed,
                        },
                    )
                })
                .collect(),
        )),
        Activity::Usage { usage } => {
            let mut update = UsageUpdate::new(usage.used, usage.size.unwrap_or(0));
            if let Some(cost) = &usage.cost {
                update = update.cost(Cost::new(cost.amount, cost.currency.clone()));
            }
            SessionUpdate::UsageUpdate(update)
        }
        Activity::Notice { text } => SessionUpdate::AgentThoughtChunk(chunk(text)),
        _ => return None,
    })
}
