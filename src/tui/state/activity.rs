//! What a box takes in of its agent's activity: its last few lines, its
//! log, the changes its tool calls made, its plan, its permission prompt
//! and notices; and the last lines of a child session's box.

use std::collections::VecDeque;

use super::lines::{ActivityLine, push_line};
use super::{CellKind, ChildBox, LogEntry, State, SubagentBox, ToolInfo, clean};
use crate::event::{Activity, PlanEntry, ToolDetail, ToolStatus};

/// How much streamed text a running box keeps (bytes, from the end).
const ACTIVITY_TEXT: usize = 2048;

/// How many of a call's notices its box keeps.
const NOTICES: usize = 3;

impl State {
    /// A call's own activity, into its box.
    pub(super) fn on_activity(&mut self, call_id: &str, activity: &Activity) {
        self.box_activity(call_id, activity);
        if matches!(
            activity,
            Activity::Elicitation { .. } | Activity::ElicitationResolved { .. }
        ) {
            self.track_question(call_id);
        }
        // The agent's commands, for Tab after `@NAME /`.
        if let Activity::Commands { commands } = activity
            && let Some(b) = self.subagent(call_id)
        {
            let agent = b.agent.name().to_string();
            let commands = super::announced::clean_commands(commands);
            self.agent_commands.insert(agent, commands);
        }
        // A request asked or answered: the box is noted among those that
        // wait for an answer, or no more.
        if matches!(
            activity,
            Activity::PermissionRequest { .. } | Activity::PermissionResolved { .. }
        ) && let Some(&index) = self.calls.get(call_id)
        {
            if matches!(&self.cells[index].kind, CellKind::Subagent(b) if b.permission.is_some()) {
                self.asking.insert(index);
            } else {
                self.asking.remove(&index);
            }
        }
    }

    /// A call's activity, into its box: each kind to its part of the box.
    fn box_activity(&mut self, call_id: &str, activity: &Activity) {
        let Some(b) = self.subagent(call_id) else {
            return;
        };
        match activity {
            Activity::MessageChunk { text } | Activity::ThoughtChunk { text } => {
                let thought = matches!(activity, Activity::ThoughtChunk { .. });
                let text = b.streams.clean(text, thought);
                push_text(&mut b.activity, &text, thought);
                b.log.text(&text, thought);
            }
            Activity::ToolCall {
                id,
                title,
                status,
                detail,
            } => tool_call(b, id, title, *status, detail),
            Activity::ToolCallUpdate {
                id,
                title,
                status,
                detail,
            } => tool_call_update(b, id, title.as_deref(), *status, detail),
            Activity::Plan { entries } => plan(b, entries),
            Activity::PermissionRequest {
                id,
                title,
                options,
                detail,
            } => permission_request(b, id, title, options, detail),
            Activity::PermissionResolved { id, outcome } => permission_resolved(b, id, outcome),
            // Its figures come with the board's snapshot.
            Activity::Usage { .. } => {}
            Activity::Elicitation { .. } | Activity::ElicitationResolved { .. } => {
                super::elicit::box_question(b, activity);
            }
            Activity::Commands { .. } | Activity::Mode { .. } | Activity::Config { .. } => {
                b.announced.apply(activity)
            }
            Activity::Notice { text } => notice(b, text),
            Activity::TerminalStarted {
                terminal_id,
                command,
            } => terminal_started(b, terminal_id, command),
            Activity::TerminalOutput { terminal_id, text } => terminal_output(b, terminal_id, text),
            Activity::TerminalExit {
                terminal_id,
                exit_code,
                signal,
            } => terminal_exit(b, terminal_id, *exit_code, signal.as_deref()),
        }
    }

    /// A child session's activity, into its box inside its call's box.
    pub(super) fn on_child_activity(&mut self, call_id: &str, child_id: &str, activity: &Activity) {
        if let Some(child) = self.child(call_id, child_id) {
            child_activity(child, activity);
        }
    }
}

/// A tool call started: a line of the box's last lines, an entry of its
/// log, and what it changes.
fn tool_call(b: &mut SubagentBox, id: &str, title: &str, status: ToolStatus, detail: &ToolDetail) {
    push_line(
        &mut b.activity,
        ActivityLine::Tool {
            id: id.to_string(),
            title: clean(title),
            status,
        },
    );
    let info = ToolInfo::from_detail(detail);
    b.changes.note(id, &info);
    if matches!(status, ToolStatus::Completed | ToolStatus::Failed) {
        b.changes.finished(id);
    }
    b.terminals.embed(info.terminal_ids());
    // Its terminals' output goes under it.
    for t in info.terminal_ids() {
        under_tool(&mut b.activity, t, true);
    }
    b.log.push(LogEntry::Tool {
        id: id.to_string(),
        title: clean(title),
        status,
        info,
    });
}

/// A tool call updated: its line and its log entry, if the box still has
/// them, and what it changes.
fn tool_call_update(
    b: &mut SubagentBox,
    id: &str,
    title: Option<&str>,
    status: Option<ToolStatus>,
    detail: &ToolDetail,
) {
    let line = b.activity.iter_mut().rev().find_map(|l| match l {
        ActivityLine::Tool {
            id: lid,
            title,
            status,
        } if lid == id => Some((title, status)),
        _ => None,
    });
    if let Some((t, s)) = line {
        if let Some(title) = title {
            *t = clean(title);
        }
        if let Some(status) = status {
            *s = status;
        }
    }
    let update = ToolInfo::from_detail(detail);
    let mut merged = None;
    b.log.update(|e| match e {
        LogEntry::Tool {
            id: eid,
            title: t,
            status: s,
            info,
        } if eid == id => {
            if let Some(title) = title {
                *t = clean(title);
            }
            if let Some(status) = status {
                *s = status;
            }
            info.merge(update.clone());
            merged = Some(info.clone());
            true
        }
        _ => false,
    });
    // A call dropped from the log still counts in the summary.
    let info = merged.unwrap_or(update);
    b.changes.note(id, &info);
    if matches!(status, Some(ToolStatus::Completed | ToolStatus::Failed)) {
        b.changes.finished(id);
    }
    b.terminals.embed(info.terminal_ids());
    for t in info.terminal_ids() {
        under_tool(&mut b.activity, t, false);
    }
}

/// The agent's plan, cleaned: the box's, and an entry of its log.
fn plan(b: &mut SubagentBox, entries: &[PlanEntry]) {
    b.plan = entries
        .iter()
        .map(|e| PlanEntry {
            content: clean(&e.content),
            status: e.status,
        })
        .collect();
    let plan = b.plan.clone();
    match b.log.entries.back_mut() {
        // A plan replaced at once replaces its entry.
        Some(LogEntry::Plan(p)) => *p = plan,
        _ => b.log.push(LogEntry::Plan(plan)),
    }
}

/// A permission asked: the box's prompt, and an entry of its log.
fn permission_request(
    b: &mut SubagentBox,
    id: &str,
    title: &str,
    options: &[String],
    detail: &ToolDetail,
) {
    let info = ToolInfo::from_detail(detail);
    let options: Vec<String> = options.iter().map(|o| clean(o)).collect();
    b.permission = Some((id.to_string(), clean(title), options.clone()));
    b.permission_detail = info.clone();
    b.log.push(LogEntry::Permission {
        id: id.to_string(),
        title: clean(title),
        options,
        info,
        outcome: None,
    });
}

/// A permission answered: its log entry takes the answer, and the prompt
/// it answers gives way to a note.
fn permission_resolved(b: &mut SubagentBox, id: &str, outcome: &str) {
    let answer = clean(outcome);
    b.log.update(|e| match e {
        LogEntry::Permission {
            id: eid,
            outcome: o,
            ..
        } if eid == id && o.is_none() => {
            *o = Some(answer.clone());
            true
        }
        _ => false,
    });
    if b.permission.as_ref().is_some_and(|p| p.0 == id) {
        let title = b.permission.take().map(|p| p.1).unwrap_or_default();
        b.permission_detail = ToolInfo::default();
        push_line(
            &mut b.activity,
            ActivityLine::Note(format!("permission {answer}: {title}")),
        );
    }
}

/// What quorum says of the call: a line, and one of its last notices.
fn notice(b: &mut SubagentBox, text: &str) {
    let text = clean(text);
    push_line(&mut b.activity, ActivityLine::Note(text.clone()));
    if b.notices.len() == NOTICES {
        b.notices.pop_front();
    }
    b.notices.push_back(text);
}

fn terminal_started(b: &mut SubagentBox, terminal_id: &str, command: &str) {
    b.terminals.started(terminal_id, command);
    b.changes.started(terminal_id);
    push_line(
        &mut b.activity,
        ActivityLine::Terminal {
            id: terminal_id.to_string(),
            command: clean(command),
            tail: String::new(),
            exit: None,
            under_tool: false,
        },
    );
    b.log.push(LogEntry::Terminal(terminal_id.to_string()));
}

fn terminal_output(b: &mut SubagentBox, terminal_id: &str, text: &str) {
    let text = clean(text);
    b.terminals.output(terminal_id, &text);
    match terminal_line(&mut b.activity, terminal_id) {
        Some((tail, _)) => {
            tail.push_str(&text);
            super::terminal::keep_newest(tail, super::terminal::TAIL_BYTES);
        }
        // Its line scrolled out of the box's last lines: a new one, with
        // what is known of it.
        None => {
            let command = b
                .terminals
                .get(terminal_id)
                .map(|t| t.command.clone())
                .unwrap_or_default();
            push_line(
                &mut b.activity,
                ActivityLine::Terminal {
                    id: terminal_id.to_string(),
                    command,
                    tail: text,
                    exit: None,
                    under_tool: b.terminals.get(terminal_id).is_some_and(|t| t.embedded),
                },
            );
        }
    }
}

fn terminal_exit(
    b: &mut SubagentBox,
    terminal_id: &str,
    exit_code: Option<u32>,
    signal: Option<&str>,
) {
    let how = super::terminal::exit_words(exit_code, signal);
    b.terminals.exited(terminal_id, how.clone());
    if let Some((_, exit)) = terminal_line(&mut b.activity, terminal_id) {
        *exit = Some(how);
    }
}

/// What a child's box keeps of its activity: the last lines.
fn child_activity(child: &mut ChildBox, activity: &Activity) {
    match activity {
        Activity::MessageChunk { text } => {
            let text = child.streams.clean(text, false);
            push_text(&mut child.activity, &text, false);
        }
        Activity::ThoughtChunk { text } => {
            let text = child.streams.clean(text, true);
            push_text(&mut child.activity, &text, true);
        }
        Activity::ToolCall {
            id, title, status, ..
        } => push_line(
            &mut child.activity,
            ActivityLine::Tool {
                id: id.clone(),
                title: clean(title),
                status: *status,
            },
        ),
        Activity::ToolCallUpdate {
            id, title, status, ..
        } => {
            for line in child.activity.iter_mut().rev() {
                if let ActivityLine::Tool {
                    id: lid,
                    title: t,
                    status: s,
                } = line
                    && lid == id
                {
                    if let Some(title) = title {
                        *t = clean(title);
                    }
                    if let Some(status) = status {
                        *s = *status;
                    }
                    break;
                }
            }
        }
        // A child's usage is its parent call's (the agent's session).
        Activity::Plan { .. } | Activity::Usage { .. } => {}
        // The session's, shown in the call's box.
        Activity::Commands { .. } | Activity::Mode { .. } | Activity::Config { .. } => {}
        Activity::PermissionRequest { title, .. } => {
            // The call's prompt names the child; its own box need not.
            let prefix = format!("{}: ", child.name());
            let title = clean(title.strip_prefix(&prefix).unwrap_or(title));
            push_line(
                &mut child.activity,
                ActivityLine::Note(format!("asks permission: {title}")),
            )
        }
        Activity::PermissionResolved { outcome, .. } => push_line(
            &mut child.activity,
            ActivityLine::Note(format!("permission {}", clean(outcome))),
        ),
        Activity::Notice { text } => {
            push_line(&mut child.activity, ActivityLine::Note(clean(text)))
        }
        Activity::Elicitation { .. } | Activity::ElicitationResolved { .. } => {
            super::elicit::child_question(child, activity)
        }
        // Terminals are the call's (their output shows in its box).
        Activity::TerminalStarted { .. }
        | Activity::TerminalOutput { .. }
        | Activity::TerminalExit { .. } => {}
    }
}

/// A tool call shows terminal `id`: its line is drawn under the call
/// (moved after it, when the call was just added).
fn under_tool(lines: &mut VecDeque<ActivityLine>, id: &str, move_after: bool) {
    let Some(at) = lines
        .iter()
        .position(|l| matches!(l, ActivityLine::Terminal { id: lid, .. } if lid == id))
    else {
        return;
    };
    if let Some(ActivityLine::Terminal { under_tool, .. }) = lines.get_mut(at) {
        *under_tool = true;
    }
    if move_after && let Some(line) = lines.remove(at) {
        lines.push_back(line);
    }
}

/// The running box's line of terminal `id`, if it is among its last lines:
/// its tail and its exit.
fn terminal_line<'a>(
    lines: &'a mut VecDeque<ActivityLine>,
    id: &str,
) -> Option<(&'a mut String, &'a mut Option<String>)> {
    lines.iter_mut().rev().find_map(|l| match l {
        ActivityLine::Terminal {
            id: lid,
            tail,
            exit,
            ..
        } if lid == id => Some((tail, exit)),
        _ => None,
    })
}

/// Appends streamed text (already clean) to the last text line of its
/// kind, or starts one.
fn push_text(lines: &mut VecDeque<ActivityLine>, chunk: &str, thought: bool) {
    let last = match lines.back_mut() {
        Some(ActivityLine::Text(t)) if !thought => Some(t),
        Some(ActivityLine::Thought(t)) if thought => Some(t),
        _ => None,
    };
    match last {
        Some(t) => {
            t.push_str(chunk);
            if t.len() > ACTIVITY_TEXT * 2 {
                let mut cut = t.len() - ACTIVITY_TEXT;
                while !t.is_char_boundary(cut) {
                    cut += 1;
                }
                t.drain(..cut);
            }
        }
        None => {
            let text = chunk.to_string();
            push_line(
                lines,
                if thought {
                    ActivityLine::Thought(text)
                } else {
                    ActivityLine::Text(text)
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    //! What applying an agent's activity changes in its box.

    use super::*;
    use crate::event::{ChildState, Event, PlanStatus, TaskState, ToolDetail};
    use crate::tui::state::fixtures::*;

    #[test]
    fn activity_fills_the_box_but_never_counts() {
        let mut s = State::new();
        apply(&mut s, 1, started(true));
        apply(
            &mut s,
            2,
            activity(Activity::ToolCall {
                id: "a".into(),
                title: "Read a.rs".into(),
                status: ToolStatus::Pending,
                detail: Default::default(),
            }),
        );
        apply(
            &mut s,
            3,
            activity(Activity::ToolCallUpdate {
                id: "a".into(),
                title: None,
                status: Some(ToolStatus::Completed),
                detail: Default::default(),
            }),
        );
        apply(
            &mut s,
            4,
            activity(Activity::MessageChunk {
                text: "Looks ".into(),
            }),
        );
        apply(
            &mut s,
            5,
            activity(Activity::MessageChunk {
                text: "fine.".into(),
            }),
        );
        apply(
            &mut s,
            6,
            activity(Activity::Plan {
                entries: vec![PlanEntry {
                    content: "step".into(),
                    status: PlanStatus::InProgress,
                }],
            }),
        );
        apply(
            &mut s,
            7,
            activity(Activity::PermissionRequest {
                id: "p".into(),
                title: "Delete build/".into(),
                options: vec!["Allow".into(), "Reject".into()],
                detail: Default::default(),
            }),
        );
        let b = the_box(&s);
        assert_eq!(
            b.activity.iter().cloned().collect::<Vec<_>>(),
            [
                ActivityLine::Tool {
                    id: "a".into(),
                    title: "Read a.rs".into(),
                    status: ToolStatus::Completed
                },
                ActivityLine::Text("Looks fine.".into()),
            ]
        );
        assert_eq!(b.plan.len(), 1);
        assert_eq!(
            b.summary.tool_calls, 0,
            "counts come from the board's snapshot"
        );
        assert_eq!(s.tasks[0].summary.tool_calls, 0);
        assert_eq!(s.pending_permission(), Some(("c1".into(), "p".into(), 2)));
        apply(
            &mut s,
            8,
            activity(Activity::PermissionResolved {
                id: "p".into(),
                outcome: "Allow".into(),
            }),
        );
        assert_eq!(s.pending_permission(), None);
        assert_eq!(
            the_box(&s).activity.back(),
            Some(&ActivityLine::Note(
                "permission Allow: Delete build/".into()
            ))
        );
    }

    #[test]
    fn permission_requests_keep_what_they_ask_and_the_answer() {
        let mut s = State::new();
        apply(&mut s, 1, started(true));
        apply(
            &mut s,
            2,
            activity(Activity::PermissionRequest {
                id: "p".into(),
                title: "write_text_file".into(),
                options: vec!["Allow".into()],
                detail: Box::new(ToolDetail {
                    kind: Some("edit".into()),
                    locations: vec!["/w/a.txt".into()],
                    ..ToolDetail::default()
                }),
            }),
        );
        assert_eq!(the_box(&s).permission_detail.locations, vec!["/w/a.txt"]);
        apply(&mut s, 3, snapshot(0, TaskState::Running, true));
        assert!(the_box(&s).summary.waiting);
        assert_eq!(s.needs_you(), 1);
        apply(
            &mut s,
            4,
            activity(Activity::PermissionResolved {
                id: "p".into(),
                outcome: "Allow".into(),
            }),
        );
        apply(&mut s, 5, snapshot(0, TaskState::Running, false));
        let b = the_box(&s);
        assert_eq!(b.permission_detail, ToolInfo::default());
        assert!(matches!(
            &b.log.entries[0],
            LogEntry::Permission { outcome: Some(o), info, .. } if o == "Allow" && info.locations == ["/w/a.txt"]
        ));
        assert_eq!(s.needs_you(), 0);
    }

    #[test]
    fn subagent_child_activity_goes_to_the_child_not_the_call() {
        let mut s = State::new();
        apply(&mut s, 1, started(false));
        apply(
            &mut s,
            2,
            child(Some("scout"), Some(ChildState::Running), true),
        );
        let on_child = |activity| Event::SubagentChildActivity {
            call_id: "c1".into(),
            child_id: "s-1-child".into(),
            activity,
        };
        apply(
            &mut s,
            3,
            on_child(Activity::MessageChunk {
                text: "looking\n".into(),
            }),
        );
        apply(
            &mut s,
            4,
            on_child(Activity::ToolCall {
                id: "k1".into(),
                title: "Delete target/".into(),
                status: ToolStatus::Pending,
                detail: Default::default(),
            }),
        );
        apply(
            &mut s,
            5,
            on_child(Activity::ToolCallUpdate {
                id: "k1".into(),
                title: None,
                status: Some(ToolStatus::Completed),
                detail: Default::default(),
            }),
        );
        apply(
            &mut s,
            6,
            on_child(Activity::PermissionRequest {
                id: "s-1-child/k2".into(),
                title: "scout: Run make".into(),
                options: vec!["Allow".into()],
                detail: Default::default(),
            }),
        );
        let b = the_box(&s);
        assert!(
            b.activity.is_empty(),
            "the call's own lines: {:?}",
            b.activity
        );
        assert!(
            b.permission.is_none(),
            "the call's prompt comes from its own activity"
        );
        assert_eq!(
            b.children[0].activity,
            VecDeque::from(vec![
                ActivityLine::Text("looking\n".into()),
                ActivityLine::Tool {
                    id: "k1".into(),
                    title: "Delete target/".into(),
                    status: ToolStatus::Completed,
                },
                ActivityLine::Note("asks permission: Run make".into()),
            ])
        );
    }
}
