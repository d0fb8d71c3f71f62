//! A review's findings as rows of its box, and a quorum's as the end of
//! its header: drawn from the events, which carry them parsed.

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use crate::confine::sanitize::one_line;
use crate::event::Quorum;
use crate::event::finding::{Check, Finding};
use crate::tui::theme;
use crate::tui::wrap::{LLine, wrap};

/// The most findings a box lists (the rest are counted).
pub const SHOWN: usize = 20;

/// `● red  src/a.rs:3-5  the title`, one row (wrapped) each, under a
/// `findings` heading; at most [`SHOWN`] of them. With `checks` (what
/// another reviewer said of each, in the same order), a refuted finding
/// is struck through and followed by `refuted by X: reason`, a confirmed
/// one by `confirmed by X`.
pub fn box_findings(
    findings: &[Finding],
    checks: &[Option<Check>],
    inner: usize,
    body: &mut Vec<Line<'static>>,
) {
    if findings.is_empty() {
        return;
    }
    let n = findings.len();
    body.push(Line::from(Span::styled(
        format!("{n} finding{}", if n == 1 { "" } else { "s" }),
        theme::bold(),
    )));
    let mut lines: Vec<LLine> = Vec::new();
    for (i, f) in findings.iter().enumerate().take(SHOWN) {
        let check = checks.get(i).and_then(Option::as_ref);
        let struck = if matches!(check, Some(Check::Refuted { .. })) {
            Modifier::CROSSED_OUT
        } else {
            Modifier::empty()
        };
        let mark = Style::default()
            .fg(theme::severity_color(f.severity))
            .add_modifier(Modifier::BOLD | struck);
        lines.push(LLine::prefixed(
            vec![Span::styled(format!("● {:<6} ", f.severity.as_str()), mark)],
            vec![Span::raw("         ")],
            vec![
                Span::styled(one_line(&f.place()), theme::code().add_modifier(struck)),
                Span::styled("  ", Style::default().add_modifier(struck)),
                Span::styled(one_line(&f.title), Style::default().add_modifier(struck)),
            ],
        ));
        if let Some(check) = check {
            lines.push(LLine::prefixed(
                vec![Span::raw("         ")],
                vec![Span::raw("         ")],
                vec![Span::styled(one_line(&said(check)), theme::dim())],
            ));
        }
    }
    wrap(&lines, inner, body);
    if n > SHOWN {
        body.push(Line::from(Span::styled(
            format!("… and {} more", n - SHOWN),
            theme::dim(),
        )));
    }
}

/// `refuted by codex: REASON`, `confirmed by codex`.
fn said(check: &Check) -> String {
    match check {
        Check::Confirmed { by, .. } => format!("confirmed by {by}"),
        Check::Refuted { by, reason } if reason.is_empty() => format!("refuted by {by}"),
        Check::Refuted { by, reason } => format!("refuted by {by}: {reason}"),
    }
}

/// The most findings a quorum's header lists (the rest are counted).
pub const QUORUM_SHOWN: usize = 8;

/// `┃ 3 findings: 1 red, 2 yellow · agreed: 1 by 2 of 2, 2 by 1 of 2`,
/// then each finding (`┃ ● red  src/a.rs:3  the title  claude, codex · 2
/// of 2`, at most [`QUORUM_SHOWN`]) and the key that opens the findings
/// view: the rows under a quorum's header, when it has findings.
pub fn quorum_findings(q: &Quorum, gutter: Style, width: usize) -> Vec<Line<'static>> {
    let Some(label) = q.findings_label() else {
        return Vec::new();
    };
    let bar = || Span::styled("┃ ", gutter);
    let mut out = vec![Line::from(vec![
        bar(),
        Span::styled(one_line(&label), theme::bold()),
    ])];
    let mut lines: Vec<LLine> = Vec::new();
    for qf in q.findings.iter().take(QUORUM_SHOWN) {
        let f = &qf.finding;
        let mut title = Style::default();
        if !qf.counts() {
            title = title.add_modifier(Modifier::CROSSED_OUT);
        }
        lines.push(LLine::prefixed(
            vec![
                bar(),
                Span::styled(
                    format!("● {:<6} ", f.severity.as_str()),
                    Style::default()
                        .fg(theme::severity_color(f.severity))
                        .add_modifier(Modifier::BOLD),
                ),
            ],
            vec![bar(), Span::raw("         ")],
            vec![
                Span::styled(one_line(&f.place()), theme::code()),
                Span::raw("  "),
                Span::styled(one_line(&f.title), title),
                Span::raw("  "),
                Span::styled(one_line(&qf.who()), theme::dim()),
            ],
        ));
        // What the second reviewer said of it.
        if let Some(check) = &qf.check {
            lines.push(LLine::prefixed(
                vec![bar(), Span::raw("         ")],
                vec![bar(), Span::raw("         ")],
                vec![Span::styled(one_line(&said(check)), theme::dim())],
            ));
        }
    }
    wrap(&lines, width.saturating_sub(2), &mut out);
    let n = q.findings.len();
    let more = if n > QUORUM_SHOWN {
        format!("… and {} more · ", n - QUORUM_SHOWN)
    } else {
        String::new()
    };
    out.push(Line::from(vec![
        bar(),
        Span::styled(
            format!("{more}Alt+↑/↓ here, Enter: the findings view"),
            theme::dim(),
        ),
    ]));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Severity;

    fn text(lines: &[Line<'static>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    /// A box lists at most [`SHOWN`] findings and counts the rest; what a
    /// transcript says is drawn without its escapes.
    #[test]
    fn a_box_lists_its_findings_bounded_and_clean() {
        let findings: Vec<Finding> = (1..=25)
            .map(|i| Finding {
                file: "src/a.rs".into(),
                line: i,
                end_line: (i == 1).then_some(4),
                severity: Severity::Yellow,
                title: format!("issue {i}\u{1b}[2J"),
                body: String::new(),
            })
            .collect();
        let mut body = Vec::new();
        box_findings(&findings, &[], 60, &mut body);
        let rows = text(&body);
        assert_eq!(rows[0], "25 findings");
        assert_eq!(rows[1], "● yellow src/a.rs:1-4  issue 1");
        assert_eq!(rows.len(), 1 + SHOWN + 1, "{rows:?}");
        assert_eq!(rows[SHOWN + 1], "… and 5 more");
        assert!(rows.iter().all(|r| !r.contains('\u{1b}')), "{rows:?}");
        let mut none = Vec::new();
        box_findings(&[], &[], 60, &mut none);
        assert!(none.is_empty());
    }

    /// A refuted finding is struck through and says who refuted it and
    /// why; a confirmed one says who confirmed it; an unchecked one
    /// nothing more.
    #[test]
    fn checks_strike_the_refuted_and_name_the_checker() {
        let f = |line, title: &str| Finding {
            file: "lib.rs".into(),
            line,
            end_line: None,
            severity: Severity::Red,
            title: title.into(),
            body: String::new(),
        };
        let findings = vec![f(1, "wrong"), f(2, "right"), f(3, "unasked")];
        let checks = vec![
            Some(Check::Refuted {
                by: "codex".into(),
                reason: "it is called".into(),
            }),
            Some(Check::Confirmed {
                by: "gemini".into(),
                reason: "yes".into(),
            }),
        ];
        let mut body = Vec::new();
        box_findings(&findings, &checks, 80, &mut body);
        assert_eq!(
            text(&body),
            [
                "3 findings",
                "● red    lib.rs:1  wrong",
                "         refuted by codex: it is called",
                "● red    lib.rs:2  right",
                "         confirmed by gemini",
                "● red    lib.rs:3  unasked",
            ]
        );
        let struck = |row: &Line<'static>| {
            row.spans
                .iter()
                .any(|s| s.style.add_modifier.contains(Modifier::CROSSED_OUT))
        };
        assert!(struck(&body[1]) && !struck(&body[3]) && !struck(&body[5]));
    }
}
