//! A session's events as the host sees them: ACP `session/update`s. Pure:
//! no I/O, no clock; the session's pump feeds it events and sends what it
//! returns (and a loaded session's history goes through the very same).
//!
//! - the chat's text: `agent_message_chunk`s (a loaded session's person:
//!   `user_message_chunk`s);
//! - each sub-agent call: a tool call (`claude · review`, pending, in
//!   progress, completed or failed), its activity streamed into its content
//!   as its last lines while it runs, its final report the content at the
//!   end, a review's verdict in its title;
//! - with a host that offers `subagents`: each call also a child session,
//!   announced with `subagent_update` and streaming its agent's own updates;
//! - a review batch's quorum: a tool call of its own with the verdict;
//! - background tasks: the session's `plan`, one entry each;
//! - the chat's context and the session's cost: `usage_update`.
//!
//! What needs an answer from the host (a permission, a question) comes out
//! as an [`Out::Ask`] for the pump to send as a request.

mod activity;
mod ask;
mod call;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Cost, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus,
    RunningStateUpdate, SessionCancelCapabilities, SessionId, SessionNotification,
    SessionReference, SessionUpdate, StateUpdate, SubagentSessionCapabilities, SubagentUpdate,
    ToolCall, ToolCallContent, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
    UsageUpdate,
};
use agent_client_protocol::v1::schema::{IdleStateUpdate, RequiresActionStateUpdate};

use crate::event::{
    Activity, Event, NoticeLevel, PlanStatus, Quorum, Severity, StopReason, Summary, TaskState,
    ToolDetail,
};
use activity::child_update;
pub use activity::{tool_content, tool_kind};
use ask::Asking;
use call::{CallView, TITLE_CHARS, raw_output};

/// Something for the host.
#[derive(Debug, Clone)]
pub enum Out {
    /// A `session/update` (on the session, or on a call's child session).
    Update(Box<SessionNotification>),
    /// A request for the person: a permission or a question.
    Ask(Ask),
    /// A request the host was sent is answered or moot now (the agent
    /// went on, the turn was cancelled): its request is withdrawn.
    Withdraw { call_id: String, request_id: String },
}

/// A request that the host answers.
#[derive(Debug, Clone)]
pub struct Ask {
    /// The call that asks (`event::CHAT_CALL` for the chat's conductor).
    pub call_id: String,
    /// The request's id in the engine (`Op::Answer`, `Op::Elicit`).
    pub request_id: String,
    /// The session the request is made on: the session, or the call's
    /// child session.
    pub session: SessionId,
    /// The tool call it is about, in that session.
    pub tool_call: String,
    /// Who asks: the agent's name (empty for the chat).
    pub agent: String,
    pub what: AskKind,
}

#[derive(Debug, Clone)]
pub enum AskKind {
    Permission {
        title: String,
        options: Vec<String>,
        detail: Box<ToolDetail>,
    },
    Question {
        message: String,
        form: Option<Vec<crate::event::form::FormField>>,
        url: Option<String>,
    },
}
/// What a `usage_update` said: used, size, cost (amount, currency).
type UsageKey = (u64, u64, Option<(String, String)>);

/// A background task, as an entry of the plan.
struct TaskEntry {
    task_id: String,
    text: String,
    state: TaskState,
    severity: Option<Severity>,
}

/// The events of one session, as ACP updates for its host.
pub struct Translator {
    session: SessionId,
    /// The host draws child sessions (`subagents`).
    children: bool,
    /// A loaded session's history: the person's messages are replayed, and
    /// nothing is asked.
    replay: bool,
    calls: HashMap<String, CallView>,
    /// Review batches with a tool call of their own.
    quorums: HashMap<String, u32>,
    tasks: Vec<TaskEntry>,
    /// The conductor's own plan, before the tasks.
    chat_plan: Vec<crate::event::PlanEntry>,
    plan_sent: Option<Vec<(String, PlanEntryStatus)>>,
    /// The chat's context (tokens used, the window) and cost; the calls'
    /// shares of the cost.
    chat_used: Option<u64>,
    chat_size: Option<u64>,
    chat_cost: Option<crate::event::Cost>,
    shares: HashMap<String, crate::event::Cost>,
    usage_sent: Option<UsageKey>,
    /// Say notices for the person (while a prompt runs, and always
    /// warnings and errors).
    talking: bool,
    /// The chat's conductor (`--model acp:NAME`), which names its requests.
    conductor: String,
    /// Requests for the host, sent at the flush: one answered by then (by
    /// a policy, in the same breath) is never asked.
    asks: Vec<Ask>,
}

impl Translator {
    /// For session `session`; `children`: the host advertised `subagents`.
    pub fn new(session: SessionId, children: bool) -> Self {
        Self {
            session,
            children,
            replay: false,
            calls: HashMap::new(),
            quorums: HashMap::new(),
            tasks: Vec::new(),
            chat_plan: Vec::new(),
            plan_sent: None,
            chat_used: None,
            chat_size: None,
            chat_cost: None,
            shares: HashMap::new(),
            usage_sent: None,
            talking: false,
            conductor: String::new(),
            asks: Vec::new(),
        }
    }

    /// Translates history (a loaded session's): the person's messages too,
    /// and nothing is asked.
    pub fn replaying(mut self) -> Self {
        self.replay = true;
        self.talking = true;
        self
    }

    /// Whether informational notices go to the host (they do while a
    /// prompt runs; warnings and errors always do).
    pub fn set_talking(&mut self, talking: bool) {
        self.talking = talking || self.replay;
    }

    /// The child session of call `call_id`, when it has one.
    pub fn child_of(&self, call_id: &str) -> Option<&SessionId> {
        self.calls.get(call_id).and_then(|c| c.child.as_ref())
    }

    /// The call whose child session is `session`, if one is.
    pub fn call_of_child(&self, session: &str) -> Option<String> {
        self.calls
            .iter()
            .find(|(_, c)| c.child.as_ref().is_some_and(|s| &*s.0 == session))
            .map(|(id, _)| id.clone())
    }

    fn update(&self, update: SessionUpdate) -> Out {
        note(SessionNotification::new(self.session.clone(), update))
    }

    fn text(&self, text: impl Into<String>) -> Out {
        self.update(SessionUpdate::AgentMessageChunk(ContentChunk::new(
            ContentBlock::from(text.into()),
        )))
    }

    /// One event's updates. Running calls' activity is gathered: [`flush`]
    /// sends it (after a batch of events, so a fast stream is coalesced).
    ///
    /// [`flush`]: Translator::flush
    pub fn event(&mut self, event: &Event) -> Vec<Out> {
        let mut out = Vec::new();
        match event {
            Event::UserMessage { text } if self.replay => out.push(self.update(
                SessionUpdate::UserMessageChunk(ContentChunk::new(ContentBlock::from(
                    text.clone(),
                ))),
            )),
            Event::AssistantDelta { text } => out.push(self.text(text.clone())),
            Event::AssistantEnd => {}
            Event::Error { text } => out.push(self.text(format!("\n\n⚠ error: {text}\n\n"))),
            // The TUI's welcome (no chat) is said to a prompt instead.
            Event::Notice { text, .. } if crate::engine::is_welcome(text) => {}
            Event::Notice { level, text } => out.extend(self.notice(*level, text)),
            Event::ToolCallStarted { id, name, summary } => {
                out.push(self.tool_started(id, name, summary))
            }
            Event::ToolCallFinished { id, ok, summary } => {
                out.push(self.tool_finished(id, *ok, summary))
            }
            started @ Event::SubagentStarted { .. } => self.started(&mut out, started),
            Event::SubagentDequeued { call_id } => out.push(self.in_progress(call_id)),
            Event::SubagentBackgrounded { call_id, task_id } => {
                out.extend(self.backgrounded(call_id, task_id))
            }
            Event::SubagentFollowup { call_id, input } => self.followup(&mut out, call_id, input),
            Event::SubagentActivity { call_id, activity } => {
                self.activity(&mut out, call_id, activity)
            }
            Event::SubagentCancelling { .. }
            | Event::SubagentChild { .. }
            | Event::SubagentChildActivity { .. }
            | Event::WorktreeReady { .. }
            | Event::WorktreeCommitted { .. } => self.call_line(event),
            Event::SubagentFinished {
                call_id,
                output,
                stop_reason,
                severity,
                findings,
            } => self.finished(
                &mut out,
                call_id,
                output,
                (*stop_reason, *severity),
                findings,
            ),
            Event::TaskProgress {
                call_id,
                task_id,
                summary,
            } => self.task_progress(call_id, task_id.as_deref(), summary),
            Event::BatchStarted {
                batch_id,
                tasks,
                review: true,
                ..
            } => out.push(self.quorum_started(batch_id, *tasks)),
            Event::ReviewQuorum {
                batch_id, quorum, ..
            } if self.quorums.contains_key(batch_id) => {
                out.push(self.quorum_reached(batch_id, quorum))
            }
            Event::BatchFinished {
                batch_id,
                succeeded,
                failed,
                ..
            } if self.quorums.contains_key(batch_id) => {
                out.push(self.quorum_failed(batch_id, *succeeded, *failed))
            }
            Event::Usage {
                input_tokens,
                output_tokens,
            } => self.chat_used = Some(input_tokens + output_tokens),
            Event::ChatActivity { activity } => self.chat_activity(&mut out, activity),
            Event::SessionInfo { model, .. } => {
                self.conductor = model
                    .as_deref()
                    .and_then(|m| m.strip_prefix("acp:"))
                    .unwrap_or_default()
                    .to_string();
            }
            _ => {}
        }
        out
    }

    /// A notice, for the person: warnings always, the rest while a prompt
    /// runs.
    fn notice(&self, level: NoticeLevel, text: &str) -> Option<Out> {
        if level == NoticeLevel::Warning {
            Some(self.text(format!("\n\n⚠ {text}\n\n")))
        } else if self.talking {
            Some(self.text(format!("\n\n{text}\n\n")))
        } else {
            None
        }
    }

    /// The chat's own tool call started: a tool call of the session.
    fn tool_started(&self, id: &str, name: &str, summary: &str) -> Out {
        let title = if summary.is_empty() {
            name.to_string()
        } else {
            format!("{name} {summary}")
        };
        self.update(SessionUpdate::ToolCall(
            ToolCall::new(format!("tool:{id}"), title)
                .kind(ToolKind::Other)
                .status(ToolCallStatus::InProgress),
        ))
    }

    /// The chat's own tool call finished.
    fn tool_finished(&self, id: &str, ok: bool, summary: &str) -> Out {
        let mut fields = ToolCallUpdateFields::new().status(if ok {
            ToolCallStatus::Completed
        } else {
            ToolCallStatus::Failed
        });
        if !summary.is_empty() {
            fields = fields.content(vec![ToolCallContent::from(summary.to_string())]);
        }
        self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            format!("tool:{id}"),
            fields,
        )))
    }

    /// A call's tool call is in progress (a queued call took its place, a
    /// follow-up runs).
    fn in_progress(&self, call_id: &str) -> Out {
        self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            call_id.to_string(),
            ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
        )))
    }

    /// A call went on in the background: its title says so, and it is a
    /// task of the plan.
    fn backgrounded(&mut self, call_id: &str, task_id: &str) -> Option<Out> {
        let call = self.calls.get_mut(call_id)?;
        call.task_id = Some(task_id.to_string());
        call.background = true;
        let (title, input, agent) = (call.title(), call.input.clone(), call.agent.clone());
        let out = self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            call_id.to_string(),
            ToolCallUpdateFields::new().title(title),
        )));
        self.task(task_id, &agent, &input);
        Some(out)
    }

    /// A follow-up message for a call: it runs again, and its child
    /// session (if any) is told the message.
    fn followup(&mut self, out: &mut Vec<Out>, call_id: &str, input: &str) {
        let child = self.calls.get_mut(call_id).map(|call| {
            call.done = false;
            call.push_line(format!("↪ {}", first_line(input, TITLE_CHARS)));
            call.child.clone()
        });
        let Some(child) = child else {
            return;
        };
        out.push(self.in_progress(call_id));
        if let Some(child) = child {
            out.push(self.child_state(&child, running()));
            out.push(note(SessionNotification::new(
                child,
                SessionUpdate::UserMessageChunk(ContentChunk::new(ContentBlock::from(
                    input.to_string(),
                ))),
            )));
        }
    }

    /// A line of a call's activity for what happened around it: a cancel,
    /// a child session (and its tool calls), its worktree.
    fn call_line(&mut self, event: &Event) {
        let (call_id, line) = match event {
            Event::SubagentCancelling { call_id } => (call_id, "cancelling…".to_string()),
            Event::SubagentChild {
                call_id,
                title: Some(title),
                ..
            } => (call_id, format!("↳ {title}")),
            Event::SubagentChildActivity {
                call_id,
                activity: Activity::ToolCall { title, .. },
                ..
            } => (call_id, format!("↳ ⚙ {title}")),
            Event::WorktreeReady {
                call_id, branch, ..
            } => (call_id, format!("⎇ {branch}")),
            Event::WorktreeCommitted {
                call_id,
                branch,
                diffstat,
                ..
            } => (call_id, format!("⎇ {branch} · {diffstat}")),
            _ => return,
        };
        if let Some(call) = self.calls.get_mut(call_id) {
            call.push_line(line);
        }
    }

    /// A call's snapshot: its share of the cost, and its task's state.
    fn task_progress(&mut self, call_id: &str, task_id: Option<&str>, summary: &Summary) {
        if let Some(share) = summary.share.as_ref().and_then(|s| s.cost.clone()) {
            self.shares.insert(call_id.to_string(), share);
        }
        if let Some(task_id) = task_id
            && let Some(entry) = self.tasks.iter_mut().find(|t| t.task_id == task_id)
        {
            entry.state = summary.state;
            entry.severity = summary.severity.or(entry.severity);
        }
    }

    /// A review batch started: a tool call of its own, for its quorum.
    fn quorum_started(&mut self, batch_id: &str, tasks: u32) -> Out {
        self.quorums.insert(batch_id.to_string(), tasks);
        self.update(SessionUpdate::ToolCall(
            ToolCall::new(
                quorum_id(batch_id),
                format!("review quorum · {tasks} reviewers"),
            )
            .kind(ToolKind::Think)
            .status(ToolCallStatus::InProgress),
        ))
    }

    /// A review batch's quorum: its tool call completed, with the verdicts.
    fn quorum_reached(&mut self, batch_id: &str, quorum: &Quorum) -> Out {
        self.quorums.remove(batch_id);
        self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            quorum_id(batch_id),
            ToolCallUpdateFields::new()
                .title(format!("review quorum · {}", quorum.label()))
                .status(ToolCallStatus::Completed)
                .content(vec![ToolCallContent::from(verdicts(quorum))]),
        )))
    }

    /// A review batch that ended without a quorum (none of its reviews
    /// could run): its tool call failed.
    fn quorum_failed(&mut self, batch_id: &str, succeeded: u32, failed: u32) -> Out {
        self.quorums.remove(batch_id);
        self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            quorum_id(batch_id),
            ToolCallUpdateFields::new()
                .status(ToolCallStatus::Failed)
                .content(vec![ToolCallContent::from(format!(
                    "{succeeded} reviews ended, {failed} failed: no quorum"
                ))]),
        )))
    }

    /// A call started (`subagent_started`): its tool call (pending while
    /// it is queued), and its child session when the host takes them.
    fn started(&mut self, out: &mut Vec<Out>, started: &Event) {
        let Event::SubagentStarted {
            call_id,
            task_id,
            agent,
            input,
            code_review: review,
            background,
            queued,
            ..
        } = started
        else {
            return;
        };
        let (review, background, queued) = (*review, *background, *queued);
        let child = self
            .children
            .then(|| SessionId::new(format!("{}/{call_id}", self.session)));
        let view = CallView {
            agent: agent.name().to_string(),
            input: input.to_string(),
            review,
            task_id: task_id.clone(),
            background,
            lines: VecDeque::new(),
            dropped: false,
            texting: false,
            dirty: false,
            done: false,
            child: child.clone(),
            asked: HashMap::new(),
            child_tools: Default::default(),
        };
        let title = view.title();
        let raw = serde_json::json!({
            "agent": view.agent,
            "input": input,
            "code_review": review,
            "run_in_background": background,
        });
        if let Some(child) = &child {
            self.child_opened(out, child, &title, input);
        }
        let mut call = ToolCall::new(call_id.to_string(), title)
            .kind(ToolKind::Other)
            .status(ToolCallStatus::Pending)
            .raw_input(raw);
        if let Some(child) = &child {
            call = call.content(vec![ToolCallContent::from(SessionReference::new(
                child.clone(),
            ))]);
        }
        out.push(self.update(SessionUpdate::ToolCall(call)));
        if !queued {
            out.push(self.in_progress(call_id));
        }
        self.calls.insert(call_id.to_string(), view);
        if let Some(task_id) = task_id.as_deref().filter(|_| background) {
            self.task(task_id, agent.name(), input);
        }
    }

    /// A call's child session opened: its state and capabilities, and the
    /// message it was given.
    fn child_opened(&self, out: &mut Vec<Out>, child: &SessionId, title: &str, input: &str) {
        out.push(
            self.update(SessionUpdate::SubagentUpdate(
                SubagentUpdate::new(child.clone())
                    .title(title.to_string())
                    .description(first_line(input, 200))
                    .capabilities(
                        SubagentSessionCapabilities::new().cancel(SessionCancelCapabilities::new()),
                    )
                    .state(running()),
            )),
        );
        out.push(note(SessionNotification::new(
            child.clone(),
            SessionUpdate::UserMessageChunk(ContentChunk::new(ContentBlock::from(
                input.to_string(),
            ))),
        )));
    }

    fn task(&mut self, task_id: &str, agent: &str, input: &str) {
        if self.tasks.iter().any(|t| t.task_id == task_id) {
            return;
        }
        self.tasks.push(TaskEntry {
            task_id: task_id.to_string(),
            text: format!("{task_id} · {agent} · {}", first_line(input, TITLE_CHARS)),
            state: TaskState::Running,
            severity: None,
        });
    }

    /// A call's activity: its lines, its requests for the host, and its
    /// child session's updates.
    fn activity(&mut self, out: &mut Vec<Out>, call_id: &str, activity: &Activity) {
        let session = self.session.clone();
        let Some(call) = self.calls.get_mut(call_id) else {
            return;
        };
        let child = call.child.clone();
        let mut asking = Asking {
            call_id,
            session: &session,
            child: child.as_ref(),
            replay: self.replay,
            asks: &mut self.asks,
        };
        match activity {
            Activity::MessageChunk { text } => call.push_text(text),
            Activity::ToolCall { title, .. } => call.push_line(format!("⚙ {title}")),
            Activity::ToolCallUpdate {
                title: Some(title),
                id,
                ..
            } if !call.child_tools.contains(id) => {
                call.child_tools.insert(id.clone());
                call.push_line(format!("⚙ {title}"))
            }
            Activity::Notice { text } => call.push_line(format!("ℹ {text}")),
            Activity::TerminalStarted { command, .. } => call.push_line(format!("$ {command}")),
            Activity::PermissionRequest {
                id,
                title,
                options,
                detail,
            } => asking.permission(call, id, (title, options, detail)),
            Activity::PermissionResolved { id, outcome } => {
                asking.permission_resolved(call, out, id, outcome)
            }
            Activity::Elicitation {
                id,
                message,
                form,
                url,
            } => asking.question(call, id, (message, form, url)),
            Activity::ElicitationResolved { id, outcome, .. } => {
                asking.question_resolved(call, out, id, outcome)
            }
            _ => {}
        }
        if let Activity::ToolCall { id, .. } = activity {
            call.child_tools.insert(id.clone());
        }
        // The child session streams its agent's own updates.
        if let Some(child) = child {
            self.child_activity(out, child, activity);
        }
    }

    /// What a call's child session shows of its activity: its state (a
    /// request waits for the person, or is answered) and its update.
    fn child_activity(&self, out: &mut Vec<Out>, child: SessionId, activity: &Activity) {
        let state = match activity {
            Activity::PermissionRequest { .. } | Activity::Elicitation { .. } => {
                Some(StateUpdate::RequiresAction(RequiresActionStateUpdate::new()))
            }
            Activity::PermissionResolved { .. } | Activity::ElicitationResolved { .. } => {
                Some(running())
            }
            _ => None,
        };
        if let Some(state) = state {
            out.push(self.child_state(&child, state));
        }
        if let Some(update) = child_update(activity) {
            out.push(note(SessionNotification::new(child, update)));
        }
    }

    fn child_state(&self, child: &SessionId, state: StateUpdate) -> Out {
        self.update(SessionUpdate::SubagentUpdate(
            SubagentUpdate::new(child.clone()).state(state),
        ))
    }

    fn finished(
        &mut self,
        out: &mut Vec<Out>,
        call_id: &str,
        output: &str,
        (stop_reason, severity): (StopReason, Option<Severity>),
        findings: &[crate::event::finding::Finding],
    ) {
        let Some(call) = self.calls.get_mut(call_id) else {
            return;
        };
        call.done = true;
        call.dirty = false;
        let mut title = call.title();
        if let Some(verdict) = severity {
            title.push_str(&format!(" · {}", verdict.as_str()));
        }
        if stop_reason != StopReason::EndTurn {
            title.push_str(&format!(" · {stop_reason}"));
        }
        let status = match stop_reason {
            StopReason::EndTurn | StopReason::MaxTokens | StopReason::MaxTurnRequests => {
                ToolCallStatus::Completed
            }
            _ => ToolCallStatus::Failed,
        };
        let mut content = Vec::new();
        if let Some(child) = &call.child {
            content.push(ToolCallContent::from(SessionReference::new(child.clone())));
        }
        content.push(ToolCallContent::from(output.to_string()));
        if !findings.is_empty() {
            let lines: Vec<String> = findings
                .iter()
                .map(|f| format!("- {}", f.line_text()))
                .collect();
            content.push(ToolCallContent::from(format!(
                "Findings:\n{}",
                lines.join("\n")
            )));
        }
        let child = call.child.clone();
        let task = call.task_id.clone();
        let update = ToolCallUpdate::new(
            call_id.to_string(),
            ToolCallUpdateFields::new()
                .title(title)
                .status(status)
                .content(content)
                .raw_output(raw_output(output, stop_reason, severity, findings)),
        );
        out.push(self.update(SessionUpdate::ToolCallUpdate(update)));
        if let Some(child) = child {
            out.push(self.child_state(&child, StateUpdate::Idle(IdleStateUpdate::new())));
        }
        if let Some(task) = task
            && let Some(entry) = self.tasks.iter_mut().find(|t| t.task_id == task)
        {
            entry.state = TaskState::from_stop_reason(stop_reason);
            entry.severity = severity;
        }
    }

    fn chat_activity(&mut self, out: &mut Vec<Out>, activity: &Activity) {
        match activity {
            Activity::Usage { usage } => {
                self.chat_used = Some(usage.used);
                self.chat_size = usage.size.or(self.chat_size);
                self.chat_cost = usage.cost.clone();
            }
            Activity::Plan { entries } => self.chat_plan = entries.clone(),
            Activity::PermissionRequest {
                id,
                title,
                options,
                detail,
            } if !self.replay => self.asks.push(Ask {
                call_id: crate::event::CHAT_CALL.to_string(),
                request_id: id.clone(),
                session: self.session.clone(),
                // The conductor's own tool line (`tool_call_started`).
                tool_call: format!("tool:{id}"),
                agent: self.conductor.clone(),
                what: AskKind::Permission {
                    title: title.clone(),
                    options: options.clone(),
                    detail: detail.clone(),
                },
            }),
            Activity::PermissionResolved { id, .. } => {
                let before = self.asks.len();
                self.asks
                    .retain(|a| !(a.call_id == crate::event::CHAT_CALL && &a.request_id == id));
                if self.asks.len() == before {
                    out.push(Out::Withdraw {
                        call_id: crate::event::CHAT_CALL.to_string(),
                        request_id: id.clone(),
                    });
                }
            }
            _ => {}
        }
    }

    /// What gathered since the last flush: running calls' activity, the
    /// plan and the usage, when they changed.
    pub fn flush(&mut self) -> Vec<Out> {
        let mut out = Vec::new();
        let mut dirty: Vec<&String> = self
            .calls
            .iter()
            .filter(|(_, c)| c.dirty && !c.done)
            .map(|(id, _)| id)
            .collect();
        dirty.sort();
        let mut updates = Vec::new();
        for id in dirty {
            let call = &self.calls[id];
            let mut content = Vec::new();
            if let Some(child) = &call.child {
                content.push(ToolCallContent::from(SessionReference::new(child.clone())));
            }
            content.push(ToolCallContent::from(call.activity()));
            updates.push(ToolCallUpdate::new(
                id.clone(),
                ToolCallUpdateFields::new().content(content),
            ));
        }
        for call in self.calls.values_mut() {
            call.dirty = false;
        }
        for update in updates {
            out.push(self.update(SessionUpdate::ToolCallUpdate(update)));
        }
        if let Some(plan) = self.plan() {
            out.push(self.update(SessionUpdate::Plan(plan)));
        }
        if let Some(usage) = self.usage() {
            out.push(self.update(SessionUpdate::UsageUpdate(usage)));
        }
        out.extend(self.asks.drain(..).map(Out::Ask));
        out
    }

    /// The plan, when it changed: the conductor's own entries, then one
    /// per background task.
    fn plan(&mut self) -> Option<Plan> {
        if self.tasks.is_empty() && self.chat_plan.is_empty() && self.plan_sent.is_none() {
            return None;
        }
        let mut entries: Vec<(String, PlanEntryStatus)> = self
            .chat_plan
            .iter()
            .map(|e| {
                let status = match e.status {
                    PlanStatus::Pending => PlanEntryStatus::Pending,
                    PlanStatus::InProgress => PlanEntryStatus::InProgress,
                    PlanStatus::Completed => PlanEntryStatus::Completed,
                };
                (e.content.clone(), status)
            })
            .collect();
        for task in &self.tasks {
            let (status, said) = match task.state {
                TaskState::Queued => (PlanEntryStatus::Pending, "queued"),
                TaskState::Running => (PlanEntryStatus::InProgress, "running"),
                other => (PlanEntryStatus::Completed, other.as_str()),
            };
            let verdict = task
                .severity
                .map(|s| format!(", {}", s.as_str()))
                .unwrap_or_default();
            entries.push((format!("{} ({said}{verdict})", task.text), status));
        }
        if self.plan_sent.as_ref() == Some(&entries) {
            return None;
        }
        self.plan_sent = Some(entries.clone());
        Some(Plan::new(
            entries
                .into_iter()
                .map(|(content, status)| PlanEntry::new(content, PlanEntryPriority::Medium, status))
                .collect(),
        ))
    }

    /// The usage, when it changed: the chat's context (when its window is
    /// known) and the session's cost (the chat's and every call's share).
    fn usage(&mut self) -> Option<UsageUpdate> {
        let mut cost: Option<(f64, String)> = self
            .chat_cost
            .as_ref()
            .map(|c| (c.amount, c.currency.clone()));
        for share in self.shares.values() {
            let (amount, currency) = cost.get_or_insert((0.0, share.currency.clone()));
            if *currency == share.currency || currency.is_empty() {
                *amount += share.amount;
                *currency = share.currency.clone();
            }
        }
        if self.chat_size.is_none() && cost.is_none() {
            return None;
        }
        let used = self.chat_used.unwrap_or(0);
        let size = self.chat_size.unwrap_or(0);
        let key = (
            used,
            size,
            cost.as_ref().map(|(a, c)| (format!("{a:.6}"), c.clone())),
        );
        if self.usage_sent.as_ref() == Some(&key) {
            return None;
        }
        self.usage_sent = Some(key);
        let mut usage = UsageUpdate::new(used, size);
        if let Some((amount, currency)) = cost {
            let currency = if currency.is_empty() {
                "USD".to_string()
            } else {
                currency
            };
            usage = usage.cost(Cost::new(amount, currency));
        }
        Some(usage)
    }
}

fn note(n: SessionNotification) -> Out {
    Out::Update(Box::new(n))
}

fn running() -> StateUpdate {
    StateUpdate::Running(RunningStateUpdate::new())
}

fn quorum_id(batch_id: &str) -> String {
    format!("quorum:{batch_id}")
}

/// Each reviewer's verdict, a line each.
fn verdicts(quorum: &Quorum) -> String {
    quorum
        .verdicts
        .iter()
        .map(|v| {
            let said = match (v.severity, v.failed) {
                (_, true) => "failed".to_string(),
                (Some(s), false) => s.as_str().to_string(),
                (None, false) => "no verdict".to_string(),
            };
            format!("{}: {said}", v.agent)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first line of `text`, cut to `max` characters with `…`.
pub fn first_line(text: &str, max: usize) -> String {
    let line = text.trim().lines().next().unwrap_or("").trim();
    if line.chars().count() <= max {
        return line.to_string();
    }
    let cut: String = line.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", cut.trim_end())
}
