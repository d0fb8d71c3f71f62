//! The findings view laid out as rows: each file's header, its hunks'
//! numbered lines, each finding (and comment) right under its last line;
//! findings of a file outside its hunks at the file's end, findings of
//! files the diff does not change under a heading of their own.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::FindingsView;
use super::diff::{At, DiffLine, Kind};
use crate::confine::sanitize::one_line;
use crate::event::finding::Check;
use crate::tui::theme;
use crate::tui::wrap::{LLine, wrap};

/// One row of the view.
#[derive(Debug, Clone)]
pub struct Row {
    pub text: Line<'static>,
    /// The finding this row is part of.
    pub finding: Option<usize>,
    /// The diff line this row is (or is under): `file`, its line number,
    /// its place (what `c` comments on).
    pub line: Option<(String, u32, At)>,
}

impl Row {
    fn plain(text: Line<'static>) -> Self {
        Self {
            text,
            finding: None,
            line: None,
        }
    }
}

/// Columns of the line numbers.
const NUMBERS: usize = 6;

/// The view's rows at `width`.
pub fn rows(v: &FindingsView, width: usize) -> Vec<Row> {
    let mut out = Vec::new();
    if v.files.is_empty() {
        out.push(Row::plain(Line::from(Span::styled(
            "The reviewed diff was not recorded (an older transcript, or a review without a diff): \
             the findings alone.",
            theme::dim(),
        ))));
    }
    for (f, file) in v.files.iter().enumerate() {
        let n = v.placed_in(f).count();
        out.push(Row::plain(Line::from(vec![
            Span::styled("━━ ", theme::dim()),
            Span::styled(one_line(&file.path), theme::bold()),
            Span::styled(
                match n {
                    0 => String::new(),
                    1 => "  · 1 finding".into(),
                    n => format!("  · {n} findings"),
                },
                theme::dim(),
            ),
        ])));
        for (h, hunk) in file.hunks.iter().enumerate() {
            out.push(Row::plain(Line::from(Span::styled(
                one_line(&hunk.header),
                Style::default().fg(Color::Cyan),
            ))));
            for (l, d) in hunk.lines.iter().enumerate() {
                let at = At {
                    file: f,
                    hunk: h,
                    line: l,
                };
                let number = d.new.or(d.old).unwrap_or(0);
                let place = Some((file.path.clone(), number, at));
                out.push(Row {
                    text: diff_line(d),
                    finding: None,
                    line: place.clone(),
                });
                let here = v.placed.iter().enumerate().filter(|(_, p)| **p == Some(at));
                for (i, _) in here {
                    finding_rows(v, i, width, place.clone(), &mut out);
                }
                for c in v.comments.iter().filter(|c| c.at == at) {
                    comment_row(&c.text, width, place.clone(), &mut out);
                }
            }
        }
        let loose: Vec<usize> = v
            .unplaced()
            .filter(|&i| v.findings[i].finding.file == file.path)
            .collect();
        if !loose.is_empty() {
            out.push(Row::plain(Line::from(Span::styled(
                "  not on the lines of its hunks:",
                theme::dim(),
            ))));
            for i in loose {
                finding_rows(v, i, width, None, &mut out);
            }
        }
        out.push(Row::plain(Line::default()));
    }
    let outside: Vec<usize> = v
        .unplaced()
        .filter(|&i| !v.files.iter().any(|f| f.path == v.findings[i].finding.file))
        .collect();
    if !outside.is_empty() {
        if !v.files.is_empty() {
            out.push(Row::plain(Line::from(Span::styled(
                "━━ outside the diff",
                theme::bold(),
            ))));
        }
        for i in outside {
            finding_rows(v, i, width, None, &mut out);
        }
    }
    out
}

impl FindingsView {
    /// Findings placed in file `f`.
    fn placed_in(&self, f: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.findings.len()).filter(move |&i| {
            self.placed[i].is_some_and(|a| a.file == f)
                || self.findings[i].finding.file == self.files[f].path
        })
    }

    /// Findings the diff's lines do not hold.
    fn unplaced(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.findings.len()).filter(|&i| self.placed[i].is_none())
    }
}

/// `    42 │+text`: a numbered line of a hunk (the new side's number;
/// a removed line its old one, dimmed).
fn diff_line(d: &DiffLine) -> Line<'static> {
    let (mark, style) = match d.kind {
        Kind::Added => ("+", Style::default().fg(theme::GREEN)),
        Kind::Removed => ("-", Style::default().fg(theme::RED)),
        Kind::Context => (" ", Style::default()),
    };
    let number = match (d.new, d.old) {
        (Some(n), _) => Span::raw(format!("{n:>w$} ", w = NUMBERS - 1)),
        (None, Some(o)) => Span::styled(format!("{o:>w$} ", w = NUMBERS - 1), theme::dim()),
        (None, None) => Span::raw(" ".repeat(NUMBERS)),
    };
    Line::from(vec![
        number,
        Span::styled("│", theme::dim()),
        Span::styled(format!("{mark}{}", one_line_keep_spaces(&d.text)), style),
    ])
}

/// A diff line's text with its indentation kept (already sanitised).
fn one_line_keep_spaces(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

/// A finding's rows: `┃ [x] ● red  place  title`, who found it (and a
/// check), its body wrapped.
fn finding_rows(
    v: &FindingsView,
    i: usize,
    width: usize,
    line: Option<(String, u32, At)>,
    out: &mut Vec<Row>,
) {
    let q = &v.findings[i];
    let f = &q.finding;
    let color = theme::severity_color(f.severity);
    let gutter = || {
        Span::styled(
            format!("{:w$}┃ ", "", w = NUMBERS),
            Style::default().fg(color),
        )
    };
    let refuted = matches!(q.check, Some(Check::Refuted { .. }));
    let mark = if v.selected.contains(&i) {
        "[x] "
    } else {
        "[ ] "
    };
    let mut title = Style::default().add_modifier(Modifier::BOLD);
    if refuted {
        title = title
            .add_modifier(Modifier::CROSSED_OUT)
            .fg(Color::DarkGray);
    }
    let mut lines = vec![LLine::prefixed(
        vec![gutter(), Span::styled(mark, theme::bold())],
        vec![gutter(), Span::raw("    ")],
        vec![
            Span::styled(
                format!("● {:<6} ", f.severity.as_str()),
                Style::default().fg(color).add_modifier(Modifier::BOLD),
            ),
            Span::styled(f.place(), theme::code()),
            Span::raw("  "),
            Span::styled(f.title.clone(), title),
        ],
    )];
    let mut who = vec![Span::styled(q.who(), theme::dim())];
    match &q.check {
        Some(Check::Refuted { by, reason }) => who.push(Span::styled(
            format!(" · refuted by {}: {}", one_line(by), one_line(reason)),
            theme::warning(),
        )),
        Some(Check::Confirmed { by, .. }) => who.push(Span::styled(
            format!(" · confirmed by {}", one_line(by)),
            theme::dim(),
        )),
        None => {}
    }
    lines.push(LLine::prefixed(
        vec![gutter(), Span::raw("    ")],
        vec![gutter(), Span::raw("    ")],
        who,
    ));
    for body in f.body.lines().filter(|l| !l.trim().is_empty()) {
        lines.push(LLine::prefixed(
            vec![gutter(), Span::raw("    ")],
            vec![gutter(), Span::raw("    ")],
            vec![Span::raw(body.to_string())],
        ));
    }
    let mut wrapped = Vec::new();
    wrap(&lines, width, &mut wrapped);
    out.extend(wrapped.into_iter().map(|text| Row {
        text,
        finding: Some(i),
        line: line.clone(),
    }));
}

/// `┃ ✎ you: text`: a comment of the person's, under its line.
fn comment_row(text: &str, width: usize, line: Option<(String, u32, At)>, out: &mut Vec<Row>) {
    let gutter = || Span::styled(format!("{:w$}┃ ", "", w = NUMBERS), theme::user());
    let lines = [LLine::prefixed(
        vec![gutter(), Span::styled("✎ you: ", theme::user())],
        vec![gutter(), Span::raw("       ")],
        vec![Span::raw(text.to_string())],
    )];
    let mut wrapped = Vec::new();
    wrap(&lines, width, &mut wrapped);
    out.extend(wrapped.into_iter().map(|text| Row {
        text,
        finding: None,
        line: line.clone(),
    }));
}
