//! Each transcript cell laid out as rows for a width. Cells render from
//! their data, the width and the time alone.

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::markdown;
use super::state::{BatchHeader, Cell, CellKind, Grouped, Member, SubagentBox, UsageTotal};
use super::theme;
use super::wrap::{LLine, spans_width, text_width, wrap};
use crate::event::{AgentRef, Cost, NoticeLevel, Severity, StopReason, TaskState, Usage};

mod arena;
mod findings;
mod running;

use running::{children, running_body};

/// Rows a running box shows of its activity.
const ACTIVITY_ROWS: usize = 5;

/// Whether a cell's rows change with time alone (spinner, elapsed time).
pub fn is_animated(cell: &Cell) -> bool {
    match &cell.kind {
        CellKind::Subagent(b) => b.running(),
        CellKind::Batch(h) => h.finished.is_none(),
        _ => false,
    }
}

/// Lays out a cell for `width` columns at time `now`, followed by one blank
/// separator row.
pub fn render(cell: &Cell, width: usize, now: u64) -> Vec<Line<'static>> {
    render_asking(cell, width, now, None)
}

/// As [`render`], with the person's draft of the answer to the question
/// the cell's box asks, if it asks one.
pub fn render_asking(
    cell: &Cell,
    width: usize,
    now: u64,
    draft: Option<&super::form::FormDraft>,
) -> Vec<Line<'static>> {
    let width = width.max(8);
    let mut out = Vec::new();
    match &cell.kind {
        CellKind::User { text } => user(text, width, &mut out),
        CellKind::Assistant { text, .. } => assistant(text, width, &mut out),
        CellKind::Tool(t) => tool(&t.name, &t.summary, t.result.as_ref(), width, &mut out),
        CellKind::ChatPermission(p) => {
            let answer = p.answer.as_deref();
            chat_permission(&p.agent, &p.title, &p.options, answer, width, &mut out)
        }
        CellKind::Notice { level, text } => {
            let (mark, style) = match level {
                NoticeLevel::Info => ("  ℹ ", theme::dim()),
                NoticeLevel::Warning => ("  ⚠ ", theme::warning()),
            };
            note(text, mark, style, width, &mut out);
        }
        CellKind::Error { text } => note(text, "  ✗ ", theme::error(), width, &mut out),
        CellKind::Subagent(b) => match &b.batch {
            // Inside its batch's group: a gutter in the group's colour.
            Some(group) => {
                grouped_subagent(b, group, width, now, draft, &mut out);
                return out;
            }
            None => subagent(b, width, now, draft, &mut out),
        },
        CellKind::Batch(h) => {
            out.push(batch_header(h, width, now));
            let gutter = Style::default().fg(theme::group_color(h.tint()));
            if let Some(q) = &h.quorum {
                out.extend(findings::quorum_findings(q, gutter, width));
            }
            out.push(Line::from(Span::styled("┃", gutter)));
            return out;
        }
        CellKind::Arena(a) => arena::arena(a, width, &mut out),
        CellKind::TaskReport(r) => task_report(
            &r.task_id,
            &r.agent,
            r.stop_reason,
            r.severity,
            width,
            &mut out,
        ),
    }
    out.push(Line::default());
    out
}

/// The first row of an animated cell as [`render`] lays it out at `now`,
/// when that row is all of it that moves with time (a running box's title,
/// with its spinner and elapsed time; a batch's header): a spinner's tick
/// redraws that row, not the cell. `None` when more of it moves (a running
/// box with child sessions: their marks spin too) or nothing does.
pub fn animated_row(cell: &Cell, width: usize, now: u64) -> Option<Line<'static>> {
    let width = width.max(8);
    match &cell.kind {
        CellKind::Subagent(b) if b.running() && b.children.is_empty() => {
            let (width, gutter) = match &b.batch {
                Some(group) => (
                    width.saturating_sub(2),
                    Some(Style::default().fg(theme::group_color(group.tint))),
                ),
                None => (width, None),
            };
            let border = Style::default().fg(theme::box_color(b.agent.name(), b.severity));
            let title = title_row(
                title_left(b, border),
                title_right(b, now, border),
                width,
                border,
            );
            Some(match gutter {
                Some(gutter) => {
                    let mut spans = vec![Span::styled("┃ ", gutter)];
                    spans.extend(title.spans);
                    Line::from(spans)
                }
                None => title,
            })
        }
        CellKind::Batch(h) if h.finished.is_none() => Some(batch_header(h, width, now)),
        _ => None,
    }
}

/// `› text`: what the person wrote.
fn user(text: &str, width: usize, out: &mut Vec<Line<'static>>) {
    let lines: Vec<LLine> = text
        .split('\n')
        .enumerate()
        .map(|(i, l)| {
            let first = if i == 0 { "› " } else { "  " };
            LLine::prefixed(
                vec![Span::styled(first, theme::user())],
                vec![Span::raw("  ")],
                vec![Span::styled(l.to_string(), theme::bold())],
            )
        })
        .collect();
    wrap(&lines, width, out);
}

/// The chat's answer, as markdown, indented.
fn assistant(text: &str, width: usize, out: &mut Vec<Line<'static>>) {
    let mut lines = markdown::render(text);
    for l in &mut lines {
        l.first.insert(0, Span::raw("  "));
        l.rest.insert(0, Span::raw("  "));
    }
    wrap(&lines, width, out);
}

/// `⚙ name summary ✓ result`: one of the chat's own tool calls.
fn tool(
    name: &str,
    summary: &str,
    result: Option<&(bool, String)>,
    width: usize,
    out: &mut Vec<Line<'static>>,
) {
    let mut spans = vec![
        Span::styled(name.to_string(), theme::bold()),
        Span::raw(" "),
        Span::styled(summary.to_string(), theme::dim()),
    ];
    match result {
        None => spans.push(Span::styled(" …", theme::dim())),
        Some((true, s)) => {
            spans.push(Span::styled(" ✓ ", Style::default().fg(theme::GREEN)));
            spans.push(Span::styled(s.clone(), theme::dim()));
        }
        Some((false, s)) => {
            spans.push(Span::styled(" ✗ ", theme::error()));
            spans.push(Span::styled(s.clone(), Style::default().fg(theme::RED)));
        }
    }
    let line = LLine::prefixed(
        vec![Span::styled("  ⚙ ", theme::dim())],
        vec![Span::raw("    ")],
        spans,
    );
    wrap(&[line], width, out);
}

/// `? agent asks: title [1 yes · 2 no]`: the chat's agent asking for a
/// permission, or `→ answer` once answered.
fn chat_permission(
    agent: &str,
    title: &str,
    options: &[String],
    answer: Option<&str>,
    width: usize,
    out: &mut Vec<Line<'static>>,
) {
    let mut spans = vec![
        Span::styled(format!("{agent} asks: "), theme::bold()),
        Span::raw(title.to_string()),
    ];
    match answer {
        Some(a) => {
            spans.push(Span::styled(" → ", theme::dim()));
            spans.push(Span::styled(a.to_string(), theme::dim()));
        }
        None => {
            let choices: Vec<String> = options
                .iter()
                .enumerate()
                .map(|(i, o)| format!("{} {o}", i + 1))
                .collect();
            spans.push(Span::styled(
                format!("  [{}]", choices.join(" · ")),
                Style::default()
                    .fg(theme::NEEDS_YOU)
                    .add_modifier(ratatui::style::Modifier::BOLD),
            ));
        }
    }
    let line = LLine::prefixed(
        vec![Span::styled("  ? ", Style::default().fg(theme::NEEDS_YOU))],
        vec![Span::raw("    ")],
        spans,
    );
    wrap(&[line], width, out);
}

/// A box inside its batch's group: a gutter in the group's colour, and the
/// group's bottom edge after its last box.
fn grouped_subagent(
    b: &SubagentBox,
    group: &Grouped,
    width: usize,
    now: u64,
    draft: Option<&super::form::FormDraft>,
    out: &mut Vec<Line<'static>>,
) {
    let gutter = Style::default().fg(theme::group_color(group.tint));
    let mut inner = Vec::new();
    subagent(b, width.saturating_sub(2), now, draft, &mut inner);
    for line in inner {
        let mut spans = vec![Span::styled("┃ ", gutter)];
        spans.extend(line.spans);
        out.push(Line::from(spans));
    }
    if group.last {
        let close = format!("┗{}", "━".repeat(width.saturating_sub(1)));
        out.push(Line::from(Span::styled(close, gutter)));
        out.push(Line::default());
    } else {
        out.push(Line::from(Span::styled("┃", gutter)));
    }
}

/// `↩ task t1 (agent) finished — reported to the chat`.
fn task_report(
    task_id: &str,
    agent: &str,
    stop_reason: StopReason,
    severity: Option<Severity>,
    width: usize,
    out: &mut Vec<Line<'static>>,
) {
    let color = theme::box_color(agent, severity);
    let mut spans = vec![
        Span::styled(
            format!("task {task_id}"),
            Style::default().fg(color).add_modifier(Modifier::BOLD),
        ),
        Span::styled(format!(" ({agent}) finished"), theme::dim()),
    ];
    if let Some(s) = severity {
        spans.push(Span::styled(
            format!(" ● {}", s.as_str()),
            Style::default().fg(color),
        ));
    }
    if stop_reason != StopReason::EndTurn {
        spans.push(Span::styled(
            format!(" · {stop_reason}"),
            stop_style(stop_reason),
        ));
    }
    spans.push(Span::styled(" — reported to the chat", theme::dim()));
    let line = LLine::prefixed(
        vec![Span::styled("  ↩ ", Style::default().fg(color))],
        vec![Span::raw("    ")],
        spans,
    );
    wrap(&[line], width, out);
}

fn note(text: &str, mark: &'static str, style: Style, width: usize, out: &mut Vec<Line<'static>>) {
    let lines: Vec<LLine> = text
        .split('\n')
        .enumerate()
        .map(|(i, l)| {
            LLine::prefixed(
                vec![Span::styled(if i == 0 { mark } else { "    " }, style)],
                vec![Span::raw("    ")],
                vec![Span::styled(l.to_string(), style)],
            )
        })
        .collect();
    wrap(&lines, width, out);
}

fn stop_style(stop_reason: StopReason) -> Style {
    if stop_reason.is_failure() {
        Style::default().fg(theme::RED)
    } else {
        theme::warning()
    }
}

/// A box's top border: `left` truncated so `right` always fits, the gap
/// filled with `─`.
fn title_row(
    left: Vec<Span<'static>>,
    right: Vec<Span<'static>>,
    width: usize,
    border: Style,
) -> Line<'static> {
    let right_w = spans_width(&right);
    let mut title = truncate(left, width.saturating_sub(right_w + 1));
    let fill = width.saturating_sub(spans_width(&title) + right_w);
    title.push(Span::styled("─".repeat(fill), border));
    title.extend(right);
    Line::from(title)
}

/// Cuts spans to at most `width` columns, ending with `…` when cut.
pub fn truncate(spans: Vec<Span<'static>>, width: usize) -> Vec<Span<'static>> {
    if spans_width(&spans) <= width {
        return spans;
    }
    let mut out = Vec::new();
    let mut used = 0;
    for span in spans {
        let w = text_width(&span.content);
        if used + w < width {
            used += w;
            out.push(span);
            continue;
        }
        let mut s = String::new();
        for c in span.content.chars() {
            let cw = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
            if used + cw + 1 > width {
                break;
            }
            used += cw;
            s.push(c);
        }
        s.push('…');
        out.push(Span::styled(s, span.style));
        break;
    }
    out
}

fn first_line(text: &str) -> &str {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

/// A batch member's mark: its verdict, else its state.
fn member_mark(m: &Member, now: u64) -> Span<'static> {
    match (m.summary.state, m.summary.severity) {
        (_, Some(s)) => Span::styled(
            format!("● {}", s.as_str()),
            Style::default()
                .fg(theme::severity_color(s))
                .add_modifier(Modifier::BOLD),
        ),
        (TaskState::Queued, _) => Span::styled(format!("{} queued", theme::QUEUED), theme::dim()),
        (TaskState::Running, _) => Span::styled(theme::spinner(now), theme::bold()),
        (TaskState::Done, _) => Span::styled("✓", Style::default().fg(theme::GREEN)),
        (TaskState::Failed, _) => Span::styled("✗", Style::default().fg(theme::RED)),
        (TaskState::Cancelled, _) => Span::styled("⊘", theme::warning()),
        (TaskState::Interrupted, _) => Span::styled("↯ interrupted", theme::warning()),
    }
}

/// `┏━ quorum ● red · 2 of 3 · split: a ● red · b ● red · c ● green ━━━`:
/// one line, tinted with the batch's verdict once it has one.
fn batch_header(h: &BatchHeader, width: usize, now: u64) -> Line<'static> {
    let tint = theme::group_color(h.tint());
    let frame = Style::default().fg(tint);
    let strong = frame.add_modifier(Modifier::BOLD);
    let sep = || Span::styled(" · ", theme::dim());
    let mut spans = vec![Span::styled("┏━ ", frame)];
    match (&h.quorum, h.finished) {
        (Some(q), _) => {
            spans.push(Span::styled("quorum ", strong));
            if let Some(branch) = &h.branch {
                spans.push(Span::styled(format!("on {branch} "), strong));
            }
            let verdict = match q.verdict {
                Some(_) => format!("● {}", q.verdict_text()),
                None => q.verdict_text(),
            };
            spans.push(Span::styled(
                format!("{verdict} · {} of {}", q.agree, q.total),
                strong,
            ));
            spans.push(sep());
            spans.push(Span::styled(
                if q.unanimous() {
                    "unanimous:"
                } else {
                    "split:"
                },
                theme::bold(),
            ));
            for (i, v) in q.verdicts.iter().enumerate() {
                spans.push(if i == 0 { Span::raw(" ") } else { sep() });
                spans.push(Span::raw(format!("{} ", v.agent)));
                spans.push(match (v.severity, v.failed) {
                    (Some(s), _) => Span::styled(
                        format!("● {}", s.as_str()),
                        Style::default()
                            .fg(theme::severity_color(s))
                            .add_modifier(Modifier::BOLD),
                    ),
                    (None, true) => Span::styled("✗ failed", Style::default().fg(theme::RED)),
                    (None, false) => Span::styled("– no verdict", theme::dim()),
                });
            }
        }
        (None, Some((succeeded, failed, worst))) => {
            spans.push(Span::styled(format!("batch of {}", h.tasks), strong));
            if let Some(w) = worst {
                spans.push(Span::styled(format!(" ● {}", w.as_str()), strong));
            }
            spans.push(sep());
            spans.push(Span::styled(
                format!("{succeeded} succeeded"),
                Style::default().fg(theme::GREEN),
            ));
            if failed > 0 {
                spans.push(sep());
                spans.push(Span::styled(
                    format!("{failed} failed"),
                    Style::default().fg(theme::RED).add_modifier(Modifier::BOLD),
                ));
            }
        }
        (None, None) => {
            let title = if h.review {
                format!("review by {}", h.tasks)
            } else {
                format!("batch of {}", h.tasks)
            };
            spans.push(Span::styled(title, strong));
            for m in &h.members {
                spans.push(sep());
                spans.push(Span::raw(format!("{} ", m.agent)));
                spans.push(member_mark(m, now));
            }
        }
    }
    if let Some(total) = h.usage_total() {
        spans.push(sep());
        spans.push(Span::styled(total_text(&total), theme::dim()));
    }
    spans.push(Span::raw(" "));
    let mut line = truncate(spans, width);
    let fill = width.saturating_sub(spans_width(&line));
    line.push(Span::styled("━".repeat(fill), frame));
    Line::from(line)
}

/// A call's box: its title row, its body framed, and its footer.
fn subagent(
    b: &SubagentBox,
    width: usize,
    now: u64,
    draft: Option<&super::form::FormDraft>,
    out: &mut Vec<Line<'static>>,
) {
    let color = theme::box_color(b.agent.name(), b.severity);
    let border = Style::default().fg(color);
    let inner = width.saturating_sub(4).max(1);

    // Title: ╭─ name · badges ──── status ─╮
    out.push(title_row(
        title_left(b, border),
        title_right(b, now, border),
        width,
        border,
    ));

    // Body rows, each at most `inner` wide: the turns before this one
    // (follow-ups), each its input above its output, then this turn's.
    let mut body: Vec<Line<'static>> = Vec::new();
    earlier_turns(b, inner, &mut body);
    input_row(
        first_line(b.turn_input.as_deref().unwrap_or(&b.input)),
        inner,
        &mut body,
    );
    if let Some(w) = &b.worktree {
        let mut text = format!("{} · ", w.branch);
        match &w.diffstat {
            Some(stat) => text.push_str(&stat.to_string()),
            None => text.push_str(&w.base),
        }
        if let Some(fate) = &w.fate {
            text.push_str(&format!(" · {fate}"));
        }
        wrap(
            &[LLine::prefixed(
                vec![Span::styled("⎇ ", theme::dim())],
                vec![Span::raw("  ")],
                vec![Span::styled(text, theme::bold())],
            )],
            inner,
            &mut body,
        );
        if let Some(check) = &w.check {
            check_rows(check, inner, &mut body);
        }
    }
    if b.running() {
        running_body(b, inner, now, &mut body);
        // A question (a form, a URL) asked of the person, filled in here.
        if let Some(q) = &b.question {
            let draft = draft.filter(|d| d.answers(&b.call_id, q));
            wrap(&super::form::lines(q, draft), inner, &mut body);
        }
    } else {
        finished_body(b, inner, now, &mut body);
    }
    framed(body, inner, border, out);

    // Bottom: ╰──── 12.3k / 200k tokens · $0.04 · 3 tool calls ─╯
    out.push(bottom_row(footer(b, width), width, border));
}

/// `╭─ name [task] · badges `: the internal agent's name already says
/// what it is; the agent's mode and options (model, effort, ...) as it
/// announced them.
fn title_left(b: &SubagentBox, border: Style) -> Vec<Span<'static>> {
    let mut badges = match b.agent {
        AgentRef::Internal => vec![],
        AgentRef::Acp(_) => vec!["acp"],
    };
    if b.code_review {
        badges.push("review");
    }
    if b.background {
        badges.push("background");
    }
    if let Some(kind) = b.session {
        badges.push(kind.label());
    }
    let mut left = vec![
        Span::styled("╭─ ", border),
        Span::styled(
            b.agent.name().to_string(),
            border.add_modifier(Modifier::BOLD),
        ),
    ];
    if let Some(task) = &b.task_id {
        left.push(Span::styled(format!(" [{task}]"), border));
    }
    let announced = b.announced.badges();
    for badge in badges
        .into_iter()
        .chain(announced.iter().map(String::as_str))
    {
        left.push(Span::styled(format!(" · {badge}"), theme::dim()));
    }
    left.push(Span::raw(" "));
    left
}

/// ` ● verdict 12s ─╮`: the box's state (queued, cancelling, running, its
/// verdict, how it ended) and its time.
fn title_right(b: &SubagentBox, now: u64, border: Style) -> Vec<Span<'static>> {
    let elapsed = theme::elapsed(b.finished.unwrap_or(now).saturating_sub(b.started));
    let row = |mark: Span<'static>| {
        vec![
            mark,
            Span::styled(format!("{elapsed} "), theme::dim()),
            Span::styled("─╮", border),
        ]
    };
    match (b.finished, b.severity) {
        (None, _) if b.queued() => row(Span::styled(
            format!(" {} queued ", theme::QUEUED),
            theme::dim(),
        )),
        (None, _) if b.summary.cancelling => row(Span::styled(" ⊘ cancelling… ", theme::warning())),
        (None, _) => row(Span::styled(
            format!(" {} ", theme::spinner(now)),
            border.add_modifier(Modifier::BOLD),
        )),
        (Some(_), Some(s)) => row(Span::styled(
            format!(" ● {} ", s.as_str()),
            border.add_modifier(Modifier::BOLD),
        )),
        (Some(_), None) => {
            let (mark, style) = match b.stop_reason {
                Some(StopReason::EndTurn) | None => ("✓", Style::default().fg(theme::GREEN)),
                Some(StopReason::Cancelled) => ("⊘", theme::warning()),
                Some(reason) => (
                    if reason.is_failure() { "✗" } else { "!" },
                    stop_style(reason),
                ),
            };
            row(Span::styled(format!(" {mark} "), style))
        }
    }
}

/// A finished box's body: its report, what it changed, what quorum had
/// to say of it, its child sessions and why it stopped.
fn finished_body(b: &SubagentBox, inner: usize, now: u64, body: &mut Vec<Line<'static>>) {
    let output = b.output.as_deref().unwrap_or("");
    if output.trim().is_empty() {
        body.push(Line::from(Span::styled("(no output)", theme::dim())));
    } else {
        wrap(&markdown::render(output), inner, body);
    }
    findings::box_findings(&b.findings, &b.checks, inner, body);
    // What it changed stays visible when the box closes.
    if let Some(changes) = b.changes.summary() {
        wrap(
            &[LLine::prefixed(
                vec![Span::styled("✎ ", theme::dim())],
                vec![Span::raw("  ")],
                vec![Span::styled(changes, theme::dim())],
            )],
            inner,
            body,
        );
    }
    // So does what quorum had to say of it.
    for notice in &b.notices {
        wrap(
            &[LLine::prefixed(
                vec![Span::styled("! ", theme::warning())],
                vec![Span::raw("  ")],
                vec![Span::styled(notice.clone(), theme::dim())],
            )],
            inner,
            body,
        );
    }
    children(b, inner, now, body);
    if let Some(reason) = b.stop_reason.filter(|r| *r != StopReason::EndTurn) {
        body.push(Line::from(vec![
            Span::styled("stop reason: ", theme::dim()),
            Span::styled(
                reason.as_str(),
                stop_style(reason).add_modifier(Modifier::BOLD),
            ),
        ]));
    }
}

/// ` 12.3k / 200k tokens · $0.04 · 3 tool calls `: the usage is dropped
/// first when the box is too narrow for it.
fn footer(b: &SubagentBox, width: usize) -> Vec<Span<'static>> {
    let counts = match b.summary.tool_calls {
        0 => String::new(),
        1 => "1 tool call".to_string(),
        n => format!("{n} tool calls"),
    };
    let mut footer: Vec<Span<'static>> = Vec::new();
    if let Some(u) = &b.summary.usage {
        footer.extend(usage_spans(u));
        if spans_width(&footer) + text_width(&counts) + 12 > width {
            footer.clear();
        }
    }
    if !counts.is_empty() {
        if !footer.is_empty() {
            footer.push(Span::styled(" · ", theme::dim()));
        }
        footer.push(Span::styled(counts, theme::dim()));
    }
    if !footer.is_empty() {
        footer.insert(0, Span::styled(" ", theme::dim()));
        footer.push(Span::styled(" ", theme::dim()));
    }
    footer
}

/// `› input`, the first line of a turn's input (none when it is empty).
fn input_row(input: &str, inner: usize, body: &mut Vec<Line<'static>>) {
    if input.is_empty() {
        return;
    }
    body.push(Line::from(truncate(
        vec![
            Span::styled("› ", theme::dim()),
            Span::styled(
                input.to_string(),
                theme::dim().add_modifier(Modifier::ITALIC),
            ),
        ],
        inner,
    )));
}

/// Rows a running box shows of each earlier turn's output.
const EARLIER_ROWS: usize = 3;

/// A box's turns before its current one, each its input above its
/// output: whole once the box has finished; while it runs, the last
/// [`EARLIER_ROWS`] lines of each (so a running box costs the same each
/// frame whatever its turns wrote).
fn earlier_turns(b: &SubagentBox, inner: usize, body: &mut Vec<Line<'static>>) {
    if b.earlier_dropped > 0 {
        let s = if b.earlier_dropped == 1 { "" } else { "s" };
        body.push(Line::from(truncate(
            vec![Span::styled(
                format!("… {} earlier turn{s}", b.earlier_dropped),
                theme::dim(),
            )],
            inner,
        )));
    }
    for turn in &b.earlier {
        input_row(&turn.input, inner, body);
        let tail: String;
        let output = if b.running() {
            tail = last_lines(&turn.output)
                .skip(
                    last_lines(&turn.output)
                        .count()
                        .saturating_sub(EARLIER_ROWS),
                )
                .collect::<Vec<_>>()
                .join("\n");
            tail.as_str()
        } else {
            turn.output.as_str()
        };
        if output.trim().is_empty() {
            body.push(Line::from(Span::styled("(no output)", theme::dim())));
        } else {
            wrap(&markdown::render(output), inner, body);
        }
        if let Some(reason) = turn.stop_reason.filter(|r| *r != StopReason::EndTurn) {
            body.push(Line::from(vec![
                Span::styled("stop reason: ", theme::dim()),
                Span::styled(reason.as_str(), stop_style(reason)),
            ]));
        }
    }
}

/// A box's body rows between its side borders, `│ row │`, each padded to
/// `inner` columns.
fn framed(rows: Vec<Line<'static>>, inner: usize, border: Style, out: &mut Vec<Line<'static>>) {
    for row in rows {
        let pad = inner.saturating_sub(spans_width(&row.spans));
        let mut spans = vec![Span::styled("│ ", border)];
        spans.extend(row.spans);
        spans.push(Span::raw(" ".repeat(pad)));
        spans.push(Span::styled(" │", border));
        out.push(Line::from(spans));
    }
}

/// A box's bottom border, `╰──── footer ─╯`, `width` columns wide.
fn bottom_row(footer: Vec<Span<'static>>, width: usize, border: Style) -> Line<'static> {
    let fill = width.saturating_sub(3 + spans_width(&footer));
    let mut bottom = vec![Span::styled(format!("╰{}", "─".repeat(fill)), border)];
    bottom.extend(footer);
    bottom.push(Span::styled("─╯", border));
    Line::from(bottom)
}

/// Share of the window past which the context shows as nearly full.
const CONTEXT_FULL: f64 = 0.8;

/// `12.3k / 200k tokens · $0.04`: tokens in context, the window when
/// known (in the warning colour once it is nearly full), the cost when
/// given.
pub fn usage_spans(u: &Usage) -> Vec<Span<'static>> {
    let full = u
        .size
        .is_some_and(|size| size > 0 && u.used as f64 >= size as f64 * CONTEXT_FULL);
    let style = if full { theme::warning() } else { theme::dim() };
    let context = match u.size {
        Some(size) => format!("{} / {} tokens", tokens(u.used as i64), tokens(size as i64)),
        None => format!("{} tokens", tokens(u.used as i64)),
    };
    let mut spans = vec![Span::styled(context, style)];
    if let Some(c) = &u.cost {
        spans.push(Span::styled(" · ", theme::dim()));
        spans.push(Span::styled(cost(c), theme::dim()));
    }
    spans
}

/// `Σ 45.2k tokens · $0.12`: a total, for the status line, the side panel
/// and a batch's header.
pub fn total_text(t: &UsageTotal) -> String {
    let mut text = format!("Σ {} tokens", tokens(t.tokens));
    for c in &t.costs {
        text.push_str(" · ");
        text.push_str(&cost(c));
    }
    text
}

/// A token count, short: `950`, `12.3k`, `200k`, `1.2M`.
pub fn tokens(n: i64) -> String {
    let a = n.unsigned_abs() as f64;
    let sign = if n < 0 { "-" } else { "" };
    let short = if a < 1_000.0 {
        format!("{a}")
    } else if a < 100_000.0 {
        trim_zero(format!("{:.1}", a / 1_000.0)) + "k"
    } else if a < 1_000_000.0 {
        format!("{:.0}k", a / 1_000.0)
    } else {
        trim_zero(format!("{:.1}", a / 1_000_000.0)) + "M"
    };
    format!("{sign}{short}")
}

fn trim_zero(s: String) -> String {
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// `$0.04` for dollars, `0.04 EUR` (or `12 credits`) otherwise.
pub fn cost(c: &Cost) -> String {
    let about = if c.estimated { "~" } else { "" };
    match c.currency.as_str() {
        "USD" | "" => format!("{about}${:.2}", c.amount),
        other => format!("{about}{:.2} {other}", c.amount),
    }
}

/// The last non-empty lines of a streamed text, in order: only they can
/// reach the last `ACTIVITY_ROWS` rows (each line wraps to one row or
/// more), so a long stream is not wrapped whole on every frame.
pub(super) fn last_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut lines: Vec<&str> = text
        .rsplit('\n')
        .filter(|l| !l.trim().is_empty())
        .take(ACTIVITY_ROWS)
        .collect();
    lines.reverse();
    lines.into_iter()
}

/// Severity colour or the agent's, for other widgets.
pub fn verdict_style(agent: &str, severity: Option<Severity>) -> Style {
    Style::default().fg(theme::box_color(agent, severity))
}

/// A writer's check in its box: what it found, tinted, and the tests or
/// check configuration its branch changes.
fn check_rows(check: &crate::tui::state::CheckLine, inner: usize, body: &mut Vec<Line<'static>>) {
    let style = if check.passed {
        Style::default().fg(theme::GREEN)
    } else {
        theme::error()
    };
    let mut rows = vec![LLine::plain(vec![Span::styled(check.line.clone(), style)])];
    if !check.touches_tests.is_empty() {
        rows.push(LLine::plain(vec![Span::styled(
            format!(
                "⚠ changes tests or the check's configuration: {}",
                check.touches_tests.join(", ")
            ),
            theme::warning(),
        )]));
    }
    wrap(&rows, inner, body);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::ChildState;

    #[test]
    fn token_counts_and_costs_are_short() {
        let cases = [
            (950, "950"),
            (1_000, "1k"),
            (12_345, "12.3k"),
            (200_000, "200k"),
            (1_250_000, "1.2M"),
            (-2_000, "-2k"),
        ];
        for (n, text) in cases {
            assert_eq!(tokens(n), text, "{n}");
        }
        let c = |amount, currency: &str| Cost {
            amount,
            currency: currency.into(),
            estimated: false,
        };
        assert_eq!(cost(&c(0.041, "USD")), "$0.04");
        assert_eq!(cost(&c(3.0, "EUR")), "3.00 EUR");
    }
    use crate::event::{Activity, Event, Stamped, build};
    use crate::tui::state::State;

    fn text(lines: &[Line<'static>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    fn call_with_child(finished: bool) -> Vec<String> {
        let mut s = State::new();
        let events = [
            build::started("c1", AgentRef::Acp("fake".into()))
                .input("go")
                .event(),
            Event::SubagentChild {
                call_id: "c1".into(),
                child_id: "s-child".into(),
                title: Some("scout".into()),
                description: None,
                state: Some(ChildState::Running),
                can_cancel: true,
            },
            Event::SubagentChildActivity {
                call_id: "c1".into(),
                child_id: "s-child".into(),
                activity: Activity::MessageChunk {
                    text: "one\ntwo\nthree\nfour\n".into(),
                },
            },
        ];
        for e in events {
            s.apply(&Stamped::new(0, e));
        }
        if finished {
            s.apply(&Stamped::new(5, build::finished("c1", "done").event()));
        }
        text(&render(&s.cells[0], 60, 5))
    }

    #[test]
    fn framed_rows_and_the_bottom_border_fill_the_box_width() {
        let border = Style::default().fg(theme::GREEN);
        let mut out = Vec::new();
        framed(
            vec![
                Line::from("short"),
                Line::from(vec![Span::raw("two "), Span::raw("spans")]),
                Line::default(),
            ],
            12,
            border,
            &mut out,
        );
        out.push(bottom_row(vec![Span::raw(" 3 ")], 16, border));
        assert_eq!(
            text(&out),
            [
                "│ short        │",
                "│ two spans    │",
                "│              │",
                "╰────────── 3 ─╯",
            ]
        );
        assert!(out.iter().all(|l| spans_width(&l.spans) == 16));
        assert_eq!(out[0].spans[0].style, border, "the borders take its style");
    }

    #[test]
    fn a_child_box_is_drawn_inside_its_calls_box_with_its_last_lines() {
        let rows = call_with_child(false);
        let top = rows
            .iter()
            .position(|r| r.contains("↳ scout"))
            .expect("a child box");
        assert!(
            rows[top].starts_with("│ ╭─ ↳ scout · Ctrl+X cancels"),
            "{rows:#?}"
        );
        assert!(rows[top].contains("running ─╮ │"), "{rows:#?}");
        // Its last three lines, inside both borders.
        assert!(rows[top + 1].starts_with("│ │ two"), "{rows:#?}");
        assert!(rows[top + 3].starts_with("│ │ four"), "{rows:#?}");
        assert!(rows[top + 4].starts_with("│ ╰"), "{rows:#?}");
        assert!(rows.iter().all(|r| r.chars().count() == 60 || r.is_empty()));
    }

    #[test]
    fn a_child_of_a_finished_call_is_shown_ended_without_cancel() {
        let rows = call_with_child(true);
        let top = rows
            .iter()
            .position(|r| r.contains("↳ scout"))
            .expect("a child box");
        assert!(rows[top].contains(" ended ─╮"), "{rows:#?}");
        assert!(!rows[top].contains("Ctrl+X"), "{rows:#?}");
    }
}
