//! A running box's body: its last lines of activity (text, thoughts, tool
//! calls, terminals with their last output), and its child sessions'
//! boxes nested inside it.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::super::state::{ActivityLine, ChildBox, SubagentBox, plan_progress};
use super::super::theme;
use super::super::wrap::{LLine, wrap};
use super::{ACTIVITY_ROWS, bottom_row, first_line, framed, last_lines, title_row, truncate};
use crate::event::{ChildState, ToolStatus};

/// Rows a child's box shows of its activity.
const CHILD_ROWS: usize = 3;

/// A child session's box, nested in its call's box (`width` columns):
/// title, state, description and last activity.
fn child_box(
    c: &ChildBox,
    parent_running: bool,
    width: usize,
    now: u64,
    out: &mut Vec<Line<'static>>,
) {
    let border = theme::dim();
    let inner = width.saturating_sub(4).max(1);
    let (mark, style) = child_mark(c, parent_running, now);
    let mut left = vec![
        Span::styled("╭─ ", border),
        Span::styled("↳ ", border),
        Span::styled(c.name().to_string(), theme::bold()),
    ];
    if parent_running && c.cancellable() {
        left.push(Span::styled(" · Ctrl+X cancels", theme::dim()));
    }
    left.push(Span::raw(" "));
    let right = vec![
        Span::styled(format!(" {mark} "), style),
        Span::styled("─╮", border),
    ];
    out.push(title_row(left, right, width, border));

    let mut rows: Vec<Line<'static>> = Vec::new();
    if let Some(d) = &c.description {
        rows.push(Line::from(truncate(
            vec![Span::styled(
                first_line(d).to_string(),
                theme::dim().add_modifier(Modifier::ITALIC),
            )],
            inner,
        )));
    }
    let activity = child_activity_rows(c, inner);
    let skip = activity.len().saturating_sub(CHILD_ROWS);
    rows.extend(activity.into_iter().skip(skip));
    framed(rows, inner, border, out);
    let counts = match c.summary.tool_calls {
        0 => String::new(),
        1 => " 1 tool call ".to_string(),
        n => format!(" {n} tool calls "),
    };
    out.push(bottom_row(
        vec![Span::styled(counts, theme::dim())],
        width,
        border,
    ));
}

/// A child's state mark: waiting for the person, idle, running (while
/// the agent says so and its call runs), or ended with its call.
fn child_mark(c: &ChildBox, parent_running: bool, now: u64) -> (String, Style) {
    let running = parent_running
        && match c.state {
            Some(ChildState::Running) => true,
            Some(_) => false,
            None => c.summary.state.active(),
        };
    match c.state {
        _ if c.summary.waiting && parent_running => (
            format!("? {}", ChildState::RequiresAction.as_str()),
            theme::warning(),
        ),
        Some(ChildState::Idle) => ("✓ idle".to_string(), Style::default().fg(theme::GREEN)),
        _ if running => (format!("{} running", theme::spinner(now)), theme::bold()),
        // Its call ended: so did whatever it was doing.
        _ if !parent_running => ("ended".to_string(), theme::dim()),
        Some(state) => (state.as_str().to_string(), theme::dim()),
        None => ("…".to_string(), theme::dim()),
    }
}

/// A child's last lines of activity, each one row.
fn child_activity_rows(c: &ChildBox, inner: usize) -> Vec<Line<'static>> {
    let mut activity: Vec<Line<'static>> = Vec::new();
    for line in &c.activity {
        match line {
            ActivityLine::Text(text) | ActivityLine::Thought(text) => {
                for l in last_lines(text) {
                    activity.push(Line::from(truncate(vec![Span::raw(l.to_string())], inner)));
                }
            }
            ActivityLine::Tool { title, status, .. } => {
                activity.push(tool_row(title, *status, inner))
            }
            ActivityLine::Note(text) => activity.push(note_row(text, inner)),
            ActivityLine::Terminal {
                command,
                tail,
                exit,
                under_tool,
                ..
            } => activity.extend(terminal_rows(
                command,
                tail,
                exit.as_deref(),
                *under_tool,
                inner,
            )),
        }
    }
    activity
}

/// `⚙ title ✓`: a tool call, one row.
fn tool_row(title: &str, status: ToolStatus, inner: usize) -> Line<'static> {
    let (mark, style) = tool_mark(status);
    Line::from(truncate(
        vec![
            Span::styled("⚙ ", theme::dim()),
            Span::raw(title.to_string()),
            Span::styled(format!(" {mark}"), style),
        ],
        inner,
    ))
}

/// A note, one row.
fn note_row(text: &str, inner: usize) -> Line<'static> {
    Line::from(truncate(
        vec![Span::styled(text.to_string(), theme::dim())],
        inner,
    ))
}

/// Rows of a terminal's output a running box shows, at most: while it
/// runs, and once it ended (the live output matters most).
const TERMINAL_ROWS: usize = 3;
const ENDED_TERMINAL_ROWS: usize = 1;

/// A command run in one of quorum's terminals, as a running box shows it:
/// `$ command` with how it ended (unless drawn under the tool call that
/// shows it, whose line names the command), then the last lines of its
/// output (fewer once it ended; how it ended is its tool call's mark, or
/// its own line's).
fn terminal_rows(
    command: &str,
    tail: &str,
    exit: Option<&str>,
    under_tool: bool,
    inner: usize,
) -> Vec<Line<'static>> {
    let (mark, style) = match exit {
        None => ("…".to_string(), theme::dim()),
        Some(e @ "exit 0") => (format!("✓ {e}"), Style::default().fg(theme::GREEN)),
        Some(e) => (format!("✗ {e}"), Style::default().fg(theme::RED)),
    };
    let mut rows = Vec::new();
    if !under_tool {
        rows.push(Line::from(truncate(
            vec![
                Span::styled("$ ", theme::dim()),
                Span::raw(command.to_string()),
                Span::styled(format!(" {mark}"), style),
            ],
            inner,
        )));
    }
    let lines: Vec<&str> = last_lines(tail).collect();
    let keep = match exit {
        None => TERMINAL_ROWS,
        Some(_) => ENDED_TERMINAL_ROWS,
    };
    let skip = lines.len().saturating_sub(keep);
    for l in &lines[skip..] {
        rows.push(Line::from(truncate(
            vec![
                Span::styled("│ ", theme::dim()),
                Span::styled(l.to_string(), theme::code()),
            ],
            inner,
        )));
    }
    rows
}

/// A tool call's status mark and its style.
fn tool_mark(status: ToolStatus) -> (&'static str, Style) {
    match status {
        ToolStatus::Pending | ToolStatus::InProgress => ("…", theme::dim()),
        ToolStatus::Completed => ("✓", Style::default().fg(theme::GREEN)),
        ToolStatus::Failed => ("✗", Style::default().fg(theme::RED)),
    }
}

/// The child sessions a call's agent announced, each a box of its own.
pub(super) fn children(b: &SubagentBox, inner: usize, now: u64, body: &mut Vec<Line<'static>>) {
    for child in &b.children {
        child_box(child, b.running(), inner, now, body);
    }
}

/// A running box's body: its plan's progress, its last rows of
/// activity, its child sessions, the permission it asks, and while it has
/// nothing to show, what it waits for.
pub(super) fn running_body(b: &SubagentBox, inner: usize, now: u64, body: &mut Vec<Line<'static>>) {
    if !b.plan.is_empty() {
        let (done, total, current) = plan_progress(&b.plan);
        let mut spans = vec![Span::styled(format!("plan {done}/{total}"), theme::bold())];
        if let Some(c) = current {
            spans.push(Span::styled(format!(" · {c}"), theme::dim()));
        }
        body.push(Line::from(truncate(spans, inner)));
    }
    let rows = activity_rows(b, inner);
    let skip = rows.len().saturating_sub(ACTIVITY_ROWS);
    body.extend(rows.into_iter().skip(skip));
    children(b, inner, now, body);
    if let Some((_, title, options)) = &b.permission {
        permission_rows(b, title, options, inner, body);
    }
    if b.queued() {
        body.push(Line::from(truncate(
            vec![Span::styled(
                "queued: starts when a place in its batch is free (max_parallel)",
                theme::dim(),
            )],
            inner,
        )));
    } else if b.activity.is_empty()
        && b.plan.is_empty()
        && b.permission.is_none()
        && b.question.is_none()
    {
        // Until its session is open the agent has not started; then it
        // has the prompt and has not said anything yet.
        let label = if b.opened {
            format!("waiting for {}", b.agent.name())
        } else {
            "starting…".to_string()
        };
        body.push(Line::from(truncate(
            vec![Span::styled(label, theme::dim())],
            inner,
        )));
    }
}

/// A running box's last lines of activity as rows: text and thoughts
/// wrapped, a tool call or a note a row each, terminals with their output.
fn activity_rows(b: &SubagentBox, inner: usize) -> Vec<Line<'static>> {
    let mut rows: Vec<Line<'static>> = Vec::new();
    for line in &b.activity {
        match line {
            ActivityLine::Text(text) => {
                let lines: Vec<LLine> = last_lines(text)
                    .map(|l| LLine::plain(vec![Span::raw(l.to_string())]))
                    .collect();
                wrap(&lines, inner, &mut rows);
            }
            ActivityLine::Thought(text) => {
                let style = theme::dim().add_modifier(Modifier::ITALIC);
                let lines: Vec<LLine> = last_lines(text)
                    .map(|l| LLine::plain(vec![Span::styled(l.to_string(), style)]))
                    .collect();
                wrap(&lines, inner, &mut rows);
            }
            ActivityLine::Tool { title, status, .. } => rows.push(tool_row(title, *status, inner)),
            ActivityLine::Note(text) => rows.push(note_row(text, inner)),
            ActivityLine::Terminal {
                command,
                tail,
                exit,
                under_tool,
                ..
            } => rows.extend(terminal_rows(
                command,
                tail,
                exit.as_deref(),
                *under_tool,
                inner,
            )),
        }
    }
    rows
}

/// The permission the box's agent asks: its title, what is asked (the
/// path, the command, the diff), the options and the keys that answer.
fn permission_rows(
    b: &SubagentBox,
    title: &str,
    options: &[String],
    inner: usize,
    body: &mut Vec<Line<'static>>,
) {
    let ask = Style::default()
        .fg(Color::Yellow)
        .add_modifier(Modifier::BOLD);
    wrap(
        &[LLine::prefixed(
            vec![Span::styled("? ", ask)],
            vec![Span::raw("  ")],
            vec![Span::styled(format!("permission: {title}"), ask)],
        )],
        inner,
        body,
    );
    wrap(
        &super::super::detail::info_lines(&b.permission_detail, "  ", false),
        inner,
        body,
    );
    let opts: Vec<Span<'static>> = options
        .iter()
        .enumerate()
        .map(|(i, o)| Span::styled(format!("[{}] {o}  ", i + 1), theme::warning()))
        .collect();
    wrap(
        &[LLine::prefixed(
            vec![Span::raw("  ")],
            vec![Span::raw("  ")],
            opts,
        )],
        inner,
        body,
    );
    body.push(Line::from(Span::styled(
        format!(
            "  press 1-{} to answer · Esc cancels the call",
            options.len().min(9)
        ),
        theme::dim(),
    )));
}
