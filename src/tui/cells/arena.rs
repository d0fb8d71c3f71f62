//! An arena's comparison box: one table, a row per writer (check, verdict,
//! findings by severity, diffstat, tests touched, cost, tokens, time), the
//! winner starred and ties named; made to be read at a glance at 100
//! columns.

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::{cost, tokens};
use crate::event::arena::{ArenaRow, CheckOutcome, Comparison};
use crate::event::{Cost, Severity};
use crate::tui::state::ArenaCell;
use crate::tui::theme;
use crate::tui::wrap::text_width;

/// The columns: heading and width (the writer's takes what is left).
const COLUMNS: [(&str, usize); 8] = [
    ("check", 10),
    ("verdict", 9),
    ("findings", 19),
    ("diff", 12),
    ("tests", 6),
    ("cost", 7),
    ("tokens", 7),
    ("time", 6),
];

/// The narrowest the writer's column gets.
const WRITER: usize = 12;

/// The comparison's rows for `width` columns.
pub fn arena(a: &ArenaCell, width: usize, out: &mut Vec<Line<'static>>) {
    let c = &a.comparison;
    let border = Style::default().fg(theme::group_color(c.best().and(Some(Severity::Green))));
    let fixed: usize = COLUMNS.iter().map(|(_, w)| w).sum();
    let writer = width.saturating_sub(fixed + 4).max(WRITER);
    let title = format!(
        "╭─ arena · {} writer{} · {} ",
        c.rows.len(),
        if c.rows.len() == 1 { "" } else { "s" },
        c.task
    );
    let title = cut(&title, width.saturating_sub(1));
    let fill = "─".repeat(width.saturating_sub(text_width(&title)));
    out.push(Line::from(vec![
        Span::styled(title, border.add_modifier(Modifier::BOLD)),
        Span::styled(fill, border),
    ]));
    let mut head = vec![Span::styled("│ ", border), Span::raw("  ")];
    head.push(Span::styled(pad("writer", writer), theme::dim()));
    for (name, w) in COLUMNS {
        head.push(Span::styled(pad(name, w), theme::dim()));
    }
    out.push(Line::from(head));
    for (i, row) in c.rows.iter().enumerate() {
        out.push(table_row(c, i, row, writer, border));
    }
    out.push(Line::from(vec![
        Span::styled("╰ ", border),
        Span::styled(
            cut(&verdict_line(c), width.saturating_sub(2)),
            theme::bold(),
        ),
    ]));
}

/// One writer's row.
fn table_row(
    c: &Comparison,
    i: usize,
    row: &ArenaRow,
    writer: usize,
    border: Style,
) -> Line<'static> {
    let (mark, name_style) = if c.winner == Some(i) {
        (
            "★ ",
            Style::default()
                .fg(theme::GREEN)
                .add_modifier(Modifier::BOLD),
        )
    } else if c.ties.contains(&i) {
        ("= ", theme::bold())
    } else {
        ("  ", Style::default())
    };
    let mut spans = vec![
        Span::styled("│ ", border),
        Span::styled(mark, name_style),
        Span::styled(
            pad(&format!("{} {}", row.agent, row.label), writer),
            name_style,
        ),
    ];
    let w = |n: usize| COLUMNS[n].1;
    if let Some(why) = &row.failed {
        spans.push(Span::styled(format!("✗ {why}"), theme::error()));
        return Line::from(spans);
    }
    spans.push(check(row, w(0)));
    spans.push(match row.verdict {
        Some(v) => Span::styled(
            pad(&format!("● {}", v.as_str()), w(1)),
            Style::default().fg(theme::severity_color(v)),
        ),
        None => Span::styled(pad("–", w(1)), theme::dim()),
    });
    spans.extend(findings(row, w(2)));
    let d = row.diffstat;
    spans.push(Span::raw(pad(
        &format!("+{} −{} ·{}", d.added, d.removed, d.files),
        w(3),
    )));
    spans.push(if row.tests_touched > 0 {
        Span::styled(
            pad(&format!("⚠ {}", row.tests_touched), w(4)),
            theme::warning(),
        )
    } else {
        Span::styled(pad("0", w(4)), theme::dim())
    });
    let money = row.cost.map(|amount| {
        cost(&Cost {
            amount,
            currency: String::new(),
            estimated: false,
        })
    });
    spans.push(Span::raw(pad(money.as_deref().unwrap_or("–"), w(5))));
    spans.push(Span::raw(pad(&tokens(row.tokens as i64), w(6))));
    spans.push(Span::raw(pad(&theme::elapsed(row.ms), w(7))));
    Line::from(spans)
}

/// `pass 12`, `fail 1/12`, `timed out`, or `–` before checks run.
fn check(row: &ArenaRow, w: usize) -> Span<'static> {
    match &row.check {
        None => Span::styled(pad("–", w), theme::dim()),
        Some(c) => {
            let color = match c.outcome {
                CheckOutcome::Passed => theme::GREEN,
                CheckOutcome::CouldNotRun => theme::YELLOW,
                CheckOutcome::Failed | CheckOutcome::TimedOut => theme::RED,
            };
            Span::styled(pad(&c.label(), w), Style::default().fg(color))
        }
    }
}

/// `● 1 red · 2 yellow`, coloured by the worst; `none` without any.
fn findings(row: &ArenaRow, w: usize) -> Vec<Span<'static>> {
    let f = row.findings;
    let mut parts = Vec::new();
    if f.red > 0 {
        parts.push(format!("{} red", f.red));
    }
    if f.yellow > 0 {
        parts.push(format!("{} yellow", f.yellow));
    }
    if parts.is_empty() {
        return vec![Span::styled(pad("none", w), theme::dim())];
    }
    let worst = if f.red > 0 {
        Severity::Red
    } else {
        Severity::Yellow
    };
    let text = parts.join(" · ");
    vec![
        Span::styled("● ", Style::default().fg(theme::severity_color(worst))),
        Span::raw(pad(&text, w.saturating_sub(2))),
    ]
}

/// `★ beta c2 wins: no red finding · /merge best, /discard others`, or
/// the ties, or why none won.
fn verdict_line(c: &Comparison) -> String {
    match c.best() {
        Some(row) => format!(
            "★ {} {} wins: {} · /merge best · /discard others",
            row.agent, row.label, c.reason
        ),
        None if !c.ties.is_empty() => {
            let names: Vec<String> = c
                .ties
                .iter()
                .filter_map(|&i| c.rows.get(i))
                .map(|r| format!("{} {}", r.agent, r.label))
                .collect();
            format!("no winner: tied {} · /merge one of them", names.join(", "))
        }
        None => format!("no winner: {}", c.reason),
    }
}

/// `text` cut or padded to `w` columns (one space kept after it).
fn pad(text: &str, w: usize) -> String {
    let text = cut(text, w.saturating_sub(1));
    let n = text_width(&text);
    format!("{text}{}", " ".repeat(w.saturating_sub(n)))
}

/// `text` cut to at most `w` columns, with `…` when cut.
fn cut(text: &str, w: usize) -> String {
    if text_width(text) <= w {
        return text.to_string();
    }
    let mut out = String::new();
    for ch in text.chars() {
        if text_width(&out) + 2 > w {
            break;
        }
        out.push(ch);
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Diffstat;
    use crate::event::arena::FindingCounts;

    fn rows() -> Vec<ArenaRow> {
        let row = |agent: &str, label: &str, red, yellow, added| ArenaRow {
            agent: agent.into(),
            label: label.into(),
            branch: format!("quorum/{label}-greet"),
            verdict: Some(if red > 0 {
                Severity::Red
            } else {
                Severity::Green
            }),
            findings: FindingCounts {
                red,
                yellow,
                green: 0,
            },
            diffstat: Diffstat {
                added,
                removed: 1,
                files: 1,
            },
            cost: Some(0.02),
            tokens: 12_300,
            ms: 42_000,
            ..ArenaRow::default()
        };
        vec![
            row("alpha", "c1", 1, 2, 3),
            row("beta", "c2", 0, 0, 5),
            row("gamma", "c3", 0, 1, 2),
        ]
    }

    fn text(c: Comparison, width: usize) -> Vec<String> {
        let mut out = Vec::new();
        let cell = ArenaCell {
            batch_id: "b1".into(),
            comparison: c,
        };
        arena(&cell, width, &mut out);
        out.iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn the_table_has_a_row_per_writer_the_winner_starred_within_100_columns() {
        let lines = text(Comparison::decide("Implement greet()", rows()), 100);
        assert_eq!(lines.len(), 6, "{lines:#?}");
        assert!(lines[0].contains("arena · 3 writers · Implement greet()"));
        for h in [
            "writer", "check", "verdict", "findings", "diff", "tests", "cost", "tokens",
        ] {
            assert!(lines[1].contains(h), "{h}: {}", lines[1]);
        }
        assert!(lines[2].contains("alpha c1") && lines[2].contains("● 1 red · 2 yellow"));
        assert!(lines[3].starts_with("│ ★ beta c2"), "{}", lines[3]);
        assert!(lines[3].contains("+5 −1 ·1") && lines[3].contains("$0.02"));
        assert!(lines[3].contains("12.3k") && lines[3].contains("42s"));
        assert!(lines[4].contains("● 1 yellow"));
        assert!(lines[5].contains("★ beta c2 wins: fewer yellow findings"));
        for l in &lines {
            assert!(text_width(l) <= 100, "{} columns: {l}", text_width(l));
        }
    }

    #[test]
    fn ties_are_named_and_a_failed_writer_says_why() {
        let mut rows = rows();
        rows[0].failed = Some("it changed nothing".into());
        rows[2] = ArenaRow {
            agent: "gamma".into(),
            label: "c3".into(),
            ..rows[1].clone()
        };
        let lines = text(Comparison::decide("t", rows), 100);
        assert!(lines[2].contains("✗ it changed nothing"), "{}", lines[2]);
        assert!(lines[3].starts_with("│ = beta c2"), "{}", lines[3]);
        assert!(
            lines[5].contains("no winner: tied beta c2, gamma c3"),
            "{}",
            lines[5]
        );
    }
}
