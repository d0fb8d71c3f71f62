//! An opened box: everything its agent did, laid out for a full screen.
//! Every tool call with its title, kind, paths, input and content (diffs
//! as diffs), thoughts, text, plans, permission requests and answers, the
//! session and the report. Renders from the box and the width alone; the
//! text was sanitised when the state took it in.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::diff::diff;
use super::markdown;
use super::state::{LOG_BYTES, LOG_ENTRIES, LogEntry, SubagentBox, TerminalView, ToolInfo};
use super::theme;
use super::wrap::{LLine, WrapMode, wrap};
use crate::event::form::FormField;
use crate::event::{AgentRef, PlanEntry, PlanStatus, StopReason, ToolContent, ToolStatus};

fn diff_style(marker: char) -> Style {
    match marker {
        '+' => Style::default().fg(theme::GREEN),
        '-' => Style::default().fg(theme::RED),
        '@' => Style::default().fg(Color::Cyan),
        _ => theme::dim(),
    }
}

/// A diff's rows, with its `--- path` / `+++ path` header, its hunks
/// (see [`diff`]), at most `limit` lines of them (then a note of how many
/// more).
pub fn diff_lines(
    path: &str,
    old: Option<&str>,
    new: &str,
    indent: &'static str,
    limit: usize,
) -> Vec<LLine> {
    let mut out = vec![
        code_line(
            indent,
            format!("--- {}", if old.is_some() { path } else { "/dev/null" }),
            theme::bold(),
        ),
        code_line(
            indent,
            format!(
                "+++ {path}{}",
                if old.is_none() { " (new file)" } else { "" }
            ),
            theme::bold(),
        ),
    ];
    let lines = diff(old, new);
    let more = lines.len().saturating_sub(limit);
    for (marker, line) in lines.into_iter().take(limit) {
        let text = match marker {
            '@' => line,
            '…' => format!("… {line}"),
            marker => format!("{marker}{line}"),
        };
        out.push(code_line(indent, text, diff_style(marker)));
    }
    if more > 0 {
        out.push(code_line(
            indent,
            format!("… {more} more diff lines"),
            theme::dim(),
        ));
    }
    out
}

fn code_line(indent: &'static str, text: String, style: Style) -> LLine {
    LLine {
        first: vec![Span::raw(indent)],
        rest: vec![Span::raw(indent)],
        spans: vec![Span::styled(text.replace('\t', "    "), style)],
        mode: WrapMode::Chars,
    }
}

fn text_lines(indent: &'static str, text: &str, style: Style) -> Vec<LLine> {
    text.split('\n')
        .map(|l| {
            LLine::prefixed(
                vec![Span::raw(indent)],
                vec![Span::raw(indent)],
                vec![Span::styled(l.to_string(), style)],
            )
        })
        .collect()
}

/// What a tool call (or a permission request) is about: kind, paths,
/// command, input and content, as logical lines.
pub fn info_lines(info: &ToolInfo, indent: &'static str, full: bool) -> Vec<LLine> {
    let mut out = Vec::new();
    let label = |name: &str, value: String| {
        LLine::prefixed(
            vec![Span::raw(indent)],
            vec![Span::raw(indent)],
            vec![
                Span::styled(format!("{name}: "), theme::dim()),
                Span::raw(value),
            ],
        )
    };
    if let Some(kind) = &info.kind
        && full
    {
        out.push(label("kind", kind.clone()));
    }
    if !info.locations.is_empty() {
        out.push(label("path", info.locations.join(", ")));
    }
    let command = info.command();
    if let Some(command) = &command {
        out.push(label("command", command.clone()));
    }
    if let Some(input) = &info.input
        && (full || (command.is_none() && info.locations.is_empty() && info.content.is_empty()))
    {
        out.push(label("input", String::new()));
        let limit = if full { usize::MAX } else { 6 };
        let lines: Vec<&str> = input.lines().collect();
        for l in lines.iter().take(limit) {
            out.push(code_line(indent, format!("  {l}"), theme::code()));
        }
        if lines.len() > limit {
            out.push(code_line(
                indent,
                format!("  … {} more lines", lines.len() - limit),
                theme::dim(),
            ));
        }
    }
    for c in &info.content {
        match c {
            ToolContent::Diff {
                path,
                old_text,
                new_text,
            } => out.extend(diff_lines(
                path,
                old_text.as_deref(),
                new_text,
                indent,
                if full { usize::MAX } else { 12 },
            )),
            ToolContent::Text { text } if full => {
                out.push(label("output", String::new()));
                for l in text.lines() {
                    out.push(code_line(indent, format!("  {l}"), Style::default()));
                }
            }
            ToolContent::Text { .. } => {}
            ToolContent::Terminal { terminal_id } => {
                out.push(label("terminal", terminal_id.clone()))
            }
        }
    }
    if let Some(output) = &info.output
        && full
    {
        out.push(label("raw output", String::new()));
        for l in output.lines() {
            out.push(code_line(indent, format!("  {l}"), Style::default()));
        }
    }
    out
}

/// A command run in one of quorum's terminals: its command line, how it
/// ended, and all the output the box kept.
fn terminal_lines(t: &TerminalView, indent: &'static str) -> Vec<LLine> {
    let (mark, style) = match t.exit.as_deref() {
        None => ("… running".to_string(), theme::dim()),
        Some(e @ "exit 0") => (format!("✓ {e}"), Style::default().fg(theme::GREEN)),
        Some(e) => (format!("✗ {e}"), Style::default().fg(theme::RED)),
    };
    let mut out = vec![LLine::prefixed(
        vec![Span::raw(indent), Span::styled("$ ", theme::dim())],
        vec![Span::raw(indent), Span::raw("  ")],
        vec![
            Span::styled(t.command.clone(), theme::bold()),
            Span::styled(format!("  {mark}"), style),
        ],
    )];
    if t.dropped > 0 {
        out.push(code_line(
            indent,
            format!("  … {} earlier bytes of output not kept", t.dropped),
            theme::dim(),
        ));
    }
    for l in t.output.lines() {
        out.push(code_line(indent, format!("  {l}"), theme::code()));
    }
    out
}

fn status_mark(status: ToolStatus) -> (&'static str, Style) {
    match status {
        ToolStatus::Pending => ("… pending", theme::dim()),
        ToolStatus::InProgress => ("… running", theme::dim()),
        ToolStatus::Completed => ("✓ completed", Style::default().fg(theme::GREEN)),
        ToolStatus::Failed => ("✗ failed", Style::default().fg(theme::RED)),
    }
}

/// What the agent announced of its session (sanitised as it came in): its
/// mode and the modes it has, its options with their values, and its
/// commands, one a line.
fn announced_lines(a: &crate::tui::state::Announced) -> Vec<LLine> {
    let mut lines = Vec::new();
    let field = |name: &'static str, text: String| {
        LLine::plain(vec![Span::styled(name, theme::dim()), Span::raw(text)])
    };
    if let Some(mode) = a.current_mode() {
        let mut text = mode;
        if !a.modes.is_empty() {
            let ids: Vec<&str> = a.modes.iter().map(|m| m.id.as_str()).collect();
            text.push_str(&format!(" (of {})", ids.join(", ")));
        }
        lines.push(field("mode: ", text));
    }
    if !a.options.is_empty() {
        let options: Vec<String> = a
            .options
            .iter()
            .map(|o| {
                let mut text = format!("{} {}", o.id, o.current);
                if !o.values.is_empty() {
                    text.push_str(&format!(" (of {})", o.values.join(", ")));
                }
                text
            })
            .collect();
        lines.push(field("options: ", options.join(" · ")));
    }
    if !a.commands.is_empty() {
        lines.push(field("commands: ", format!("{}", a.commands.len())));
        for c in &a.commands {
            let mut spans = vec![Span::styled(format!("  /{}", c.name), theme::bold())];
            if let Some(hint) = c.hint.as_deref().filter(|h| !h.is_empty()) {
                spans.push(Span::styled(format!(" <{hint}>"), theme::dim()));
            }
            if !c.description.is_empty() {
                spans.push(Span::raw(format!(" — {}", c.description)));
            }
            lines.push(LLine::plain(spans));
        }
    }
    lines
}

/// The opened box's rows at `width`.
pub fn render(b: &SubagentBox, width: usize, now: u64) -> Vec<Line<'static>> {
    let width = width.max(20);
    let color = theme::box_color(b.agent.name(), b.severity);
    let head_style = Style::default().fg(color).add_modifier(Modifier::BOLD);
    let mut lines: Vec<LLine> = vec![head_line(b, now, head_style)];
    facts_lines(b, &mut lines);
    lines.extend(announced_lines(&b.announced));
    lines.push(LLine::default());
    lines.extend(text_lines(
        "› ",
        &b.input,
        theme::dim().add_modifier(Modifier::ITALIC),
    ));
    lines.push(LLine::default());
    log_notes(b, &mut lines);
    for entry in &b.log.entries {
        entry_lines(b, entry, &mut lines);
    }
    if let Some(output) = &b.output {
        lines.push(LLine::default());
        lines.push(LLine::plain(vec![Span::styled("── report ──", head_style)]));
        lines.extend(markdown::render(output));
    }
    if let Some(w) = b.worktree.as_ref().filter(|w| !w.diff.is_empty()) {
        branch_diff_lines(&w.branch, &w.diff, head_style, &mut lines);
    }
    if let Some(check) = b.worktree.as_ref().and_then(|w| w.check.as_ref()) {
        lines.push(LLine::default());
        lines.push(LLine::plain(vec![Span::styled(
            format!("── check of {} · {} ──", check.commit, check.line),
            head_style,
        )]));
        lines.extend(
            check
                .output
                .lines()
                .map(|l| LLine::plain(vec![Span::raw(l.to_string())])),
        );
    }
    if let Some(reason) = b.stop_reason.filter(|r| *r != StopReason::EndTurn) {
        lines.push(LLine::plain(vec![
            Span::styled("stop reason: ", theme::dim()),
            Span::styled(reason.as_str(), theme::bold()),
        ]));
    }
    let mut out = Vec::new();
    wrap(&lines, width, &mut out);
    out
}

/// The first row: the agent, its task, its badges and its state.
fn head_line(b: &SubagentBox, now: u64, head_style: Style) -> LLine {
    let mut head = vec![Span::styled(b.agent.name().to_string(), head_style)];
    if let Some(task) = &b.task_id {
        head.push(Span::styled(format!(" [{task}]"), head_style));
    }
    let mut badges = match b.agent {
        AgentRef::Internal => vec!["internal".to_string()],
        AgentRef::Acp(_) => vec!["acp".to_string()],
    };
    if b.code_review {
        badges.push("review".into());
    }
    if b.background {
        badges.push("background".into());
    }
    if let Some(kind) = b.session {
        badges.push(kind.label().into());
    }
    head.push(Span::styled(
        format!(" · {}", badges.join(" · ")),
        theme::dim(),
    ));
    let elapsed = theme::elapsed(b.finished.unwrap_or(now).saturating_sub(b.started));
    let state = match (b.finished, b.stop_reason, b.severity) {
        (None, _, _) => format!("running {elapsed}"),
        (Some(_), _, Some(s)) => format!("● {} · {elapsed}", s.as_str()),
        (Some(_), Some(r), None) if r != StopReason::EndTurn => format!("{r} · {elapsed}"),
        _ => format!("done · {elapsed}"),
    };
    head.push(Span::styled(format!(" · {state}"), theme::bold()));
    LLine::plain(head)
}

/// The session, what the box changed, and its branch.
fn facts_lines(b: &SubagentBox, lines: &mut Vec<LLine>) {
    lines.push(LLine::plain(vec![
        Span::styled("session: ", theme::dim()),
        Span::raw(b.session_id.clone().unwrap_or_else(|| "none".into())),
    ]));
    if let Some(summary) = b.changes.summary() {
        lines.push(LLine::plain(vec![
            Span::styled("changes: ", theme::dim()),
            Span::raw(summary),
        ]));
    }
    if let Some(w) = &b.worktree {
        let mut text = format!("{} ({})", w.branch, w.base);
        if let Some(stat) = &w.diffstat {
            text.push_str(&format!(" · {stat}"));
        }
        if let Some(fate) = &w.fate {
            text.push_str(&format!(" · {fate}"));
        }
        lines.push(LLine::plain(vec![
            Span::styled("branch: ", theme::dim()),
            Span::raw(text),
        ]));
    }
}

/// What of the log the box no longer holds: spilled, or dropped.
fn log_notes(b: &SubagentBox, lines: &mut Vec<LLine>) {
    if b.log.spilled {
        lines.push(LLine::plain(vec![Span::styled(
            "… what this agent did before is kept in the transcript only, and could not be read back"
                .to_string(),
            theme::warning(),
        )]));
        lines.push(LLine::default());
    }
    if b.log.dropped > 0 {
        lines.push(LLine::plain(vec![Span::styled(
            format!(
                "… {} earlier entries were dropped (a box keeps its last {LOG_ENTRIES} entries, {} KiB)",
                b.log.dropped,
                LOG_BYTES / 1024
            ),
            theme::warning(),
        )]));
        lines.push(LLine::default());
    }
}

/// One entry of the box's log, by its kind.
fn entry_lines(b: &SubagentBox, entry: &LogEntry, lines: &mut Vec<LLine>) {
    match entry {
        LogEntry::Turn(input) => {
            lines.push(LLine::plain(vec![Span::styled(
                "── follow-up ──",
                theme::bold(),
            )]));
            lines.extend(text_lines(
                "› ",
                input,
                theme::dim().add_modifier(Modifier::ITALIC),
            ));
        }
        LogEntry::Text(text) => lines.extend(text_lines("", text.trim_end(), Style::default())),
        LogEntry::Thought(text) => lines.extend(text_lines(
            "  ",
            &format!("thinking: {}", text.trim()),
            theme::dim().add_modifier(Modifier::ITALIC),
        )),
        LogEntry::Tool {
            title,
            status,
            info,
            ..
        } => tool_entry_lines(b, title, *status, info, lines),
        // A terminal no tool call shows: on its own.
        LogEntry::Terminal(id) => {
            if let Some(t) = b.terminals.get(id).filter(|t| !t.embedded) {
                lines.extend(terminal_lines(t, "  "));
            }
        }
        LogEntry::Plan(plan) => plan_lines(plan, lines),
        LogEntry::Permission {
            title,
            options,
            info,
            outcome,
            ..
        } => permission_lines(title, options, info, outcome.as_deref(), lines),
        LogEntry::Question {
            message,
            form,
            url,
            outcome,
            ..
        } => question_lines(
            message,
            form.as_deref(),
            url.as_deref(),
            outcome.as_deref(),
            lines,
        ),
    }
}

/// A tool call: its title and mark, what it is about, and the commands it
/// ran in quorum's terminals, in full.
fn tool_entry_lines(
    b: &SubagentBox,
    title: &str,
    status: ToolStatus,
    info: &ToolInfo,
    lines: &mut Vec<LLine>,
) {
    let (mark, style) = status_mark(status);
    lines.push(LLine::prefixed(
        vec![Span::styled("⚙ ", theme::dim())],
        vec![Span::raw("  ")],
        vec![
            Span::styled(title.to_string(), theme::bold()),
            Span::styled(format!("  {mark}"), style),
        ],
    ));
    lines.extend(info_lines(info, "    ", true));
    for id in info.terminal_ids() {
        if let Some(t) = b.terminals.get(id) {
            lines.extend(terminal_lines(t, "    "));
        }
    }
}

fn plan_lines(plan: &[PlanEntry], lines: &mut Vec<LLine>) {
    lines.push(LLine::plain(vec![Span::styled("plan", theme::bold())]));
    for e in plan {
        let mark = match e.status {
            PlanStatus::Completed => "[x]",
            PlanStatus::InProgress => "[>]",
            PlanStatus::Pending => "[ ]",
        };
        lines.push(LLine::prefixed(
            vec![Span::styled(format!("  {mark} "), theme::dim())],
            vec![Span::raw("      ")],
            vec![Span::raw(e.content.clone())],
        ));
    }
}

/// The style of what an agent asks of the person.
fn ask_style() -> Style {
    Style::default()
        .fg(Color::Yellow)
        .add_modifier(Modifier::BOLD)
}

/// `→ answer`, or that the answer is awaited.
fn outcome_line(outcome: Option<&str>) -> LLine {
    LLine::plain(vec![match outcome {
        Some(o) => Span::styled(format!("    → {o}"), theme::bold()),
        None => Span::styled("    → waiting for your answer", theme::warning()),
    }])
}

fn permission_lines(
    title: &str,
    options: &[String],
    info: &ToolInfo,
    outcome: Option<&str>,
    lines: &mut Vec<LLine>,
) {
    let ask = ask_style();
    lines.push(LLine::prefixed(
        vec![Span::styled("? ", ask)],
        vec![Span::raw("  ")],
        vec![Span::styled(format!("permission: {title}"), ask)],
    ));
    lines.extend(info_lines(info, "    ", true));
    lines.push(LLine::prefixed(
        vec![Span::raw("    ")],
        vec![Span::raw("    ")],
        vec![
            Span::styled("options: ", theme::dim()),
            Span::raw(options.join(" · ")),
        ],
    ));
    lines.push(outcome_line(outcome));
}

fn question_lines(
    message: &str,
    form: Option<&[FormField]>,
    url: Option<&str>,
    outcome: Option<&str>,
    lines: &mut Vec<LLine>,
) {
    let ask = ask_style();
    lines.push(LLine::prefixed(
        vec![Span::styled("? ", ask)],
        vec![Span::raw("  ")],
        vec![Span::styled(format!("question: {message}"), ask)],
    ));
    if let Some(url) = url {
        lines.push(LLine::prefixed(
            vec![Span::styled("    open: ", theme::dim())],
            vec![Span::raw("      ")],
            vec![Span::styled(url.to_string(), theme::link())],
        ));
    }
    for f in form.into_iter().flatten() {
        let required = if f.required { " (required)" } else { "" };
        let mut spans = vec![
            Span::styled(
                crate::confine::sanitize::sanitize(f.label()).into_owned(),
                theme::bold(),
            ),
            Span::styled(format!(": {}{required}", f.kind.noun()), theme::dim()),
        ];
        if let Some(d) = &f.description {
            spans.push(Span::styled(format!(" · {d}"), theme::dim()));
        }
        lines.push(LLine::prefixed(
            vec![Span::raw("    ")],
            vec![Span::raw("      ")],
            spans,
        ));
    }
    lines.push(outcome_line(outcome));
}

/// `── diff of BRANCH ──` and the branch's diff, each line in its colour.
fn branch_diff_lines(branch: &str, diff: &str, head_style: Style, lines: &mut Vec<LLine>) {
    lines.push(LLine::default());
    lines.push(LLine::plain(vec![Span::styled(
        format!("── diff of {branch} ──"),
        head_style,
    )]));
    for l in diff.lines() {
        let marker = match l.chars().next() {
            Some('+') if !l.starts_with("+++") => '+',
            Some('-') if !l.starts_with("---") => '-',
            Some('@') => '@',
            _ => ' ',
        };
        lines.push(code_line("  ", l.to_string(), diff_style(marker)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen(lines: &[Line<'_>]) -> String {
        lines
            .iter()
            .map(|l| {
                l.spans
                    .iter()
                    .map(|s| s.content.as_ref())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Two edits far apart in one file: the box asking permission and the
    /// opened box show two hunks, and not the lines between them.
    #[test]
    fn edits_far_apart_show_as_two_hunks_in_the_box_and_opened() {
        use crate::event::{Activity, Stamped, ToolDetail, build};
        use crate::tui::state::{CellKind, State};
        let old: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        let new = old
            .replace("line 3\n", "line three\n")
            .replace("line 27\n", "line 27\nline 27½\n");
        let mut s = State::new();
        s.apply(&Stamped::new(
            1,
            build::started("c1", AgentRef::Acp("fake".into()))
                .input("go")
                .event(),
        ));
        s.apply(&Stamped::new(
            2,
            build::activity(
                "c1",
                Activity::PermissionRequest {
                    id: "p".into(),
                    title: "write_text_file".into(),
                    options: vec!["Allow".into(), "Reject".into()],
                    detail: Box::new(ToolDetail {
                        kind: Some("edit".into()),
                        content: vec![ToolContent::Diff {
                            path: "src/a.rs".into(),
                            old_text: Some(old),
                            new_text: new,
                        }],
                        ..ToolDetail::default()
                    }),
                },
            ),
        ));
        // The box: its first twelve diff lines, the second hunk begun.
        let shown = screen(&crate::tui::cells::render(&s.cells[0], 50, 5));
        for want in [
            "│   @@ -1,6 +1,6 @@ ",
            "│   -line 3 ",
            "│   +line three ",
            "│    line 6 ",
            "│   @@ -25,6 +25,7 @@ ",
            "│    line 27 ",
            "│   … 4 more diff lines ",
        ] {
            assert!(shown.contains(want), "{want}:\n{shown}");
        }
        assert!(!shown.contains("line 15"), "{shown}");
        // Opened: both hunks whole.
        let CellKind::Subagent(b) = &s.cells[0].kind else {
            panic!()
        };
        let opened = screen(&render(b, 50, 5));
        let rows: Vec<&str> = opened
            .lines()
            .skip_while(|l| !l.contains("--- src/a.rs"))
            .take(19)
            .map(str::trim_end)
            .collect();
        assert_eq!(
            rows,
            [
                "    --- src/a.rs",
                "    +++ src/a.rs",
                "    @@ -1,6 +1,6 @@",
                "     line 1",
                "     line 2",
                "    -line 3",
                "    +line three",
                "     line 4",
                "     line 5",
                "     line 6",
                "    @@ -25,6 +25,7 @@",
                "     line 25",
                "     line 26",
                "     line 27",
                "    +line 27½",
                "     line 28",
                "     line 29",
                "     line 30",
                "    options: Allow · Reject",
            ],
            "{opened}"
        );
    }

    #[test]
    fn a_permission_prompt_shows_the_path_command_and_diff_asked_about() {
        use crate::event::{Activity, Stamped, ToolDetail, build};
        use crate::tui::state::{CellKind, State};
        let mut s = State::new();
        s.apply(&Stamped::new(
            1,
            build::started("c1", AgentRef::Acp("fake".into()))
                .input("go")
                .event(),
        ));
        s.apply(&Stamped::new(
            2,
            build::activity(
                "c1",
                Activity::PermissionRequest {
                    id: "p".into(),
                    title: "write_text_file".into(),
                    options: vec!["Allow".into(), "Reject".into()],
                    detail: Box::new(ToolDetail {
                        kind: Some("edit".into()),
                        locations: vec!["src/a.rs".into()],
                        raw_input: Some(serde_json::json!({"command": "rm -rf build\u{1b}[2J"})),
                        content: vec![ToolContent::Diff {
                            path: "src/a.rs".into(),
                            old_text: Some("one\ntwo\n".into()),
                            new_text: "one\n2\n".into(),
                        }],
                        raw_output: None,
                    }),
                },
            ),
        ));
        let shown = screen(&crate::tui::cells::render(&s.cells[0], 70, 5));
        for want in [
            "? permission: write_text_file",
            "path: src/a.rs",
            "command: rm -rf build",
            "--- src/a.rs",
            "-two",
            "+2",
            "[1] Allow",
        ] {
            assert!(shown.contains(want), "{want}:\n{shown}");
        }
        assert!(!shown.contains('\u{1b}'), "sanitised:\n{shown}");
        // The opened box shows the request, and its answer once given.
        s.apply(&Stamped::new(
            3,
            build::activity(
                "c1",
                Activity::PermissionResolved {
                    id: "p".into(),
                    outcome: "Reject".into(),
                },
            ),
        ));
        let CellKind::Subagent(b) = &s.cells[0].kind else {
            panic!()
        };
        let opened = screen(&render(b, 70, 5));
        assert!(opened.contains("? permission: write_text_file"), "{opened}");
        assert!(opened.contains("→ Reject"), "{opened}");
        assert!(opened.contains("kind: edit"), "{opened}");
        assert!(opened.contains("session: none"), "{opened}");
    }
}
