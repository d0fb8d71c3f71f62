//! The side panel: the session's usage, then each background task (its
//! state, agent, elapsed time and last activity), scrolled so the
//! selected one shows. Only the tasks that show are laid out.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Paragraph, Widget};

use super::cells::{self, truncate};
use super::state::{State, Task};
use super::theme;
use crate::event::TaskState;

/// A task's lines in the side panel, the blank line after it included.
fn task_lines(task: &Task, selected: bool, width: usize, now: u64) -> Vec<Line<'static>> {
    let mut lines: Vec<Line<'static>> = Vec::new();
    let style = task_style(task);
    let elapsed = theme::elapsed(task.finished.unwrap_or(now).saturating_sub(task.started));
    let mark = match task.summary.state {
        TaskState::Running if task.summary.cancelling => "⊘",
        TaskState::Running if task.summary.waiting => "?",
        TaskState::Queued => theme::QUEUED,
        TaskState::Running => theme::spinner(now),
        TaskState::Done => "●",
        TaskState::Failed => "✗",
        TaskState::Cancelled => "⊘",
        TaskState::Interrupted => "↯",
    };
    let head = vec![
        Span::styled(
            format!("{mark} {} ", task.task_id),
            style.add_modifier(Modifier::BOLD),
        ),
        Span::styled(task.agent.clone(), style),
    ];
    let head_w = super::wrap::spans_width(&head);
    let mut head = truncate(head, width.saturating_sub(elapsed.len() + 1));
    let pad = width.saturating_sub(head_w.min(width) + elapsed.len());
    head.push(Span::raw(" ".repeat(pad)));
    head.push(Span::styled(elapsed, theme::dim()));
    let mut head = Line::from(head);
    if selected {
        head = head.patch_style(Style::default().add_modifier(Modifier::REVERSED));
    }
    lines.push(head);

    let state_style = match task.summary.state {
        TaskState::Failed => Style::default().fg(theme::RED),
        TaskState::Cancelled | TaskState::Interrupted => theme::warning(),
        TaskState::Queued => theme::dim(),
        _ => style,
    };
    let mut facts = vec![Span::styled(
        format!("  {}", task.summary.state.as_str()),
        state_style,
    )];
    if task.summary.waiting && task.summary.state == TaskState::Running {
        facts.push(Span::styled(
            " · needs you",
            style.add_modifier(Modifier::BOLD),
        ));
    }
    if let Some(s) = task.summary.severity {
        facts.push(Span::styled(
            format!(" · {}", s.as_str()),
            style.add_modifier(Modifier::BOLD),
        ));
    } else if task.code_review {
        facts.push(Span::styled(" · review", theme::dim()));
    }
    let tools = match task.summary.tool_calls {
        1 => " · 1 tool".to_string(),
        n => format!(" · {n} tools"),
    };
    facts.push(Span::styled(tools, theme::dim()));
    if task.reported {
        facts.push(Span::styled(" · reported", theme::dim()));
    }
    lines.push(Line::from(truncate(facts, width)));
    if let Some(u) = &task.summary.usage {
        let mut usage = vec![Span::raw("  ")];
        usage.extend(cells::usage_spans(u));
        lines.push(Line::from(truncate(usage, width)));
    }
    if !task.input.is_empty() {
        lines.push(Line::from(truncate(
            vec![Span::styled(
                format!("  › {}", task.input),
                theme::dim().add_modifier(Modifier::ITALIC),
            )],
            width,
        )));
    }
    if let Some(a) = &task.summary.last_activity {
        lines.push(Line::from(truncate(
            vec![Span::styled(format!("  {a}"), theme::dim())],
            width,
        )));
    }
    lines.push(Line::default());
    lines
}

fn task_style(task: &Task) -> Style {
    if task.summary.waiting && task.summary.state == TaskState::Running {
        // Waiting for the person: its own colour.
        return Style::default().fg(theme::NEEDS_YOU);
    }
    Style::default().fg(theme::box_color(&task.agent, task.summary.severity))
}

/// The side panel in `area`: its frame, then the session's total and the
/// tasks that fit, the selected one among them.
pub(super) fn draw_panel(
    state: &State,
    (selected, spend_open): (Option<usize>, bool),
    area: Rect,
    buf: &mut Buffer,
    now: u64,
) {
    if area.is_empty() {
        return;
    }
    let block = panel_block(state, selected);
    let inner = block.inner(area);
    block.render(area, buf);
    let width = inner.width.saturating_sub(2) as usize;
    // The session's total, every call's (foreground ones too), and with
    // `$` what each agent spent.
    let mut total: Vec<Line<'static>> = state
        .usage_total()
        .map(|t| format!("agents {}", cells::total_text(&t)))
        .into_iter()
        .chain(spend_lines(state, spend_open))
        .map(|text| Line::from(truncate(vec![Span::styled(text, theme::dim())], width)))
        .collect();
    // Inside the frame, a column from its left edge.
    let area = Rect {
        x: inner.x + 1,
        width: inner.width.saturating_sub(1),
        ..inner
    };
    if state.tasks.is_empty() {
        let mut lines = std::mem::take(&mut total);
        lines.push(Line::from(Span::styled(
            "No background tasks.",
            theme::dim(),
        )));
        lines.push(Line::from(Span::styled(
            "Ctrl+T hides this panel.",
            theme::dim(),
        )));
        Paragraph::new(lines).render(area, buf);
        return;
    }
    let height = inner.height as usize;
    let (lines, selected_at) = shown_lines(state, selected, total, width, height, now);
    let mut skip = lines.len().saturating_sub(height);
    if let Some(at) = selected_at {
        skip = skip.min(at);
    }
    for (y, line) in (area.y..area.bottom()).zip(lines.iter().skip(skip)) {
        buf.set_line(area.x, y, line, area.width);
    }
}

/// The session's spending (the chat, every agent, nested sub-agents),
/// and with `$` each agent's (`chat` for the chat's model).
fn spend_lines(state: &State, open: bool) -> Vec<String> {
    let s = &state.spending;
    if s.by_agent.is_empty() {
        return Vec::new();
    }
    let line = |spent: &crate::event::budget::Spent| {
        format!(
            "{} · {} tokens",
            spent.cost_text(),
            cells::tokens(spent.tokens as i64)
        )
    };
    let key = if open { "$ hides" } else { "$ by agent" };
    let mut lines = vec![format!("spent {} ({key})", line(&s.spent))];
    if open {
        lines.extend(
            s.by_agent
                .iter()
                .map(|(agent, spent)| format!("  {agent}: {}", line(spent))),
        );
    }
    lines
}

/// The panel's frame, titled with how many tasks run, wait and are done;
/// bright while the panel has the keys.
fn panel_block(state: &State, selected: Option<usize>) -> Block<'static> {
    let (running, queued) = state.task_counts();
    let title = if queued > 0 {
        format!(
            " Tasks · {running} running · {queued} queued · {} done ",
            state.tasks.len() - running - queued
        )
    } else {
        format!(
            " Tasks · {running} running · {} done ",
            state.tasks.len() - running
        )
    };
    Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(if selected.is_some() {
            theme::bold()
        } else {
            theme::dim()
        })
        .title(Span::styled(title, theme::bold()))
}

/// The lines of the tasks that can show, and where the selected one
/// starts among them. Show the newest tasks when they don't all fit, and
/// the selected one on top when it is above them. Only the tasks that can
/// show are laid out: the newest that fill the panel, or the selected one
/// and those after it.
fn shown_lines(
    state: &State,
    selected: Option<usize>,
    total: Vec<Line<'static>>,
    width: usize,
    height: usize,
    now: u64,
) -> (Vec<Line<'static>>, Option<usize>) {
    let count = state.tasks.len();
    let task = |i: usize| task_lines(&state.tasks[i], selected == Some(i), width, now);
    let mut newest = Vec::new();
    let (mut first, mut laid) = (count, 0);
    while first > 0 && laid < height {
        first -= 1;
        newest.push(task(first));
        laid += newest.last().map_or(0, Vec::len);
    }
    let mut lines: Vec<Line<'static>> = Vec::new();
    let mut selected_at = None;
    match selected.filter(|&s| s < first) {
        Some(s) => {
            selected_at = Some(0);
            for i in s..count {
                if lines.len() >= height {
                    break;
                }
                lines.extend(task(i));
            }
        }
        None => {
            if first == 0 && !total.is_empty() {
                lines.extend(total);
                lines.push(Line::default());
            }
            for (i, group) in (first..count).zip(newest.into_iter().rev()) {
                if selected == Some(i) {
                    selected_at = Some(lines.len());
                }
                lines.extend(group);
            }
        }
    }
    (lines, selected_at)
}

#[cfg(test)]
mod tests {
    //! The side panel laid out in part shows what laying out every task
    //! showed.

    use super::*;
    use crate::event::{AgentRef, Cost, Event, Stamped, Summary, UsageShare, build};

    /// The panel as it was drawn before: every task laid out, then the
    /// lines that show picked.
    fn every_task(state: &State, selected: Option<usize>, area: Rect, buf: &mut Buffer, now: u64) {
        draw_panel(state, (selected, false), area, buf, now);
        let inner = Block::default().borders(Borders::ALL).inner(area);
        let width = inner.width.saturating_sub(2) as usize;
        let mut lines: Vec<Line<'static>> = Vec::new();
        if let Some(t) = state.usage_total() {
            lines.push(Line::from(truncate(
                vec![Span::styled(
                    format!("agents {}", cells::total_text(&t)),
                    theme::dim(),
                )],
                width,
            )));
            lines.push(Line::default());
        }
        let mut selected_at = None;
        for (i, task) in state.tasks.iter().enumerate() {
            if selected == Some(i) {
                selected_at = Some(lines.len());
            }
            lines.extend(task_lines(task, selected == Some(i), width, now));
        }
        let mut skip = lines.len().saturating_sub(inner.height as usize);
        if let Some(at) = selected_at {
            skip = skip.min(at);
        }
        let area = Rect {
            x: inner.x + 1,
            width: inner.width.saturating_sub(1),
            ..inner
        };
        // Only the border and title are the new code's.
        for y in area.y..area.bottom() {
            for x in area.x..area.right() {
                buf[(x, y)].reset();
            }
        }
        for (y, line) in (area.y..area.bottom()).zip(lines.iter().skip(skip)) {
            buf.set_line(area.x, y, line, area.width);
        }
    }

    #[test]
    fn the_panel_lays_out_only_what_shows_and_shows_the_same() {
        let mut s = State::new();
        for i in 0..12u64 {
            let call = format!("c{i}");
            let started = build::started(call.clone(), AgentRef::Acp("fake".into()))
                .input(if i % 3 == 0 { "" } else { "look at it" })
                .background(format!("t{i}"))
                .event();
            s.apply(&Stamped::new(i, started));
            let share = (i == 4).then(|| UsageShare {
                tokens: 5,
                cost: Some(Cost {
                    amount: 0.5,
                    currency: "USD".into(),
                    estimated: false,
                }),
            });
            let snapshot = Event::TaskProgress {
                call_id: call,
                task_id: Some(format!("t{i}")),
                summary: Summary {
                    last_activity: (i % 2 == 0).then(|| "read a.rs".into()),
                    share,
                    ..Summary::default()
                },
            };
            s.apply(&Stamped::new(i, snapshot));
        }
        for rows in 3..70 {
            let area = Rect::new(0, 0, 40, rows);
            for selected in [
                None,
                Some(0),
                Some(3),
                Some(6),
                Some(10),
                Some(11),
                Some(40),
            ] {
                let mut kept = Buffer::empty(area);
                draw_panel(&s, (selected, false), area, &mut kept, 100);
                let mut all = Buffer::empty(area);
                every_task(&s, selected, area, &mut all, 100);
                assert_eq!(kept, all, "{rows} rows, selected {selected:?}");
            }
        }
    }
}
