//! The whole app rendered headlessly: snapshots of the buffer with its
//! styles, and the colours a person reads verdicts from.

use crate::common;

use common::*;
use quorum::tui::theme;
use ratatui::style::Color;

fn colours() -> Vec<quorum::event::Stamped> {
    events(&fixture("colours.jsonl"))
}

#[test]
fn boxes_take_their_verdict_colour_or_their_agents() {
    let buf = screen(&colours(), 120, 40, Some(false));
    assert_eq!(box_colour(&buf, "claude"), Color::Red);
    assert_eq!(box_colour(&buf, "codex"), Color::Yellow);
    assert_eq!(box_colour(&buf, "internal"), Color::Green);
    // No verdict: the agent's own neutral colour, which is none of the three.
    let neutral = box_colour(&buf, "opencode");
    assert_eq!(neutral, theme::agent_color("opencode"));
    assert!(![Color::Red, Color::Yellow, Color::Green].contains(&neutral));
}

#[test]
fn running_boxes_use_the_agents_colour_until_the_verdict() {
    let events = colours();
    // Before any call finished: every box is neutral.
    let buf = screen(&events[..6], 120, 40, Some(false));
    for agent in ["claude", "codex", "internal", "opencode"] {
        assert_eq!(
            box_colour(&buf, agent),
            theme::agent_color(agent),
            "{agent}"
        );
    }
}

#[test]
fn finished_box_shows_badges_verdict_and_stop_reason() {
    let text = rows(&screen(&colours(), 120, 40, Some(false))).join("\n");
    assert!(
        text.contains("╭─ claude · acp · review · resumed"),
        "{text}"
    );
    assert!(
        text.contains("╭─ codex [t1] · acp · review · background · fresh"),
        "{text}"
    );
    assert!(text.contains("● red"), "{text}");
    assert!(text.contains("● yellow"), "{text}");
    assert!(text.contains("● green"), "{text}");
    assert!(text.contains("new after stale session"), "{text}");
    // Only a stop reason other than end_turn is shown.
    assert!(text.contains("stop reason: max_tokens"), "{text}");
    assert_eq!(text.matches("stop reason").count(), 1, "{text}");
}

#[test]
fn side_panel_lists_tasks_in_their_verdict_colour() {
    let buf = screen(&colours(), 120, 40, None);
    let (x, y) = find(&buf, "t1 codex").expect("panel shows task t1");
    assert!(x > 70, "panel is on the right, found at column {x}");
    assert_eq!(buf[(x, y)].fg, Color::Yellow);
    let (x, y) = find(&buf, "t2 opencode").expect("panel shows task t2");
    assert_eq!(buf[(x, y)].fg, theme::agent_color("opencode"));
    let text = rows(&buf).join("\n");
    assert!(text.contains("done · yellow · 1 tool"), "{text}");
}

#[test]
fn side_panel_starts_hidden_below_100_columns() {
    let narrow = rows(&screen(&colours(), 99, 30, None)).join("\n");
    assert!(!narrow.contains("Tasks ·"), "{narrow}");
    let wide = rows(&screen(&colours(), 100, 30, None)).join("\n");
    assert!(wide.contains("Tasks ·"), "{wide}");
    let forced = rows(&screen(&colours(), 80, 24, Some(true))).join("\n");
    assert!(forced.contains("Tasks ·"), "{forced}");
}

/// Whole-screen snapshots, with styles: the Debug form of the buffer lists
/// every cell's colours, so a box changing colour changes the snapshot.
#[test]
fn snapshots_at_80x24_and_120x40_with_and_without_panel() {
    let events = colours();
    for (cols, rows) in [(80, 24), (120, 40)] {
        for panel in [false, true] {
            let buf = screen(&events, cols, rows, Some(panel));
            let name = format!(
                "colours_{cols}x{rows}_panel_{}",
                if panel { "on" } else { "off" }
            );
            insta::assert_debug_snapshot!(name, buf);
        }
    }
}

#[test]
fn agent_text_cannot_reach_the_terminal_raw() {
    use quorum::event::{AgentRef, Stamped, build};
    let evil = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[31mred\u{9b}1mtext";
    let events = vec![
        Stamped::new(
            0,
            build::started("x", AgentRef::Acp("evil\u{1b}[5m".into()))
                .input(evil)
                .event(),
        ),
        Stamped::new(1, build::chunk("x", evil)),
    ];
    let running = screen(&events, 80, 24, Some(false));
    let mut finished_events = events.clone();
    finished_events.push(Stamped::new(2, build::finished("x", evil).event()));
    let finished = screen(&finished_events, 80, 24, Some(false));
    for buf in [running, finished] {
        for cell in buf.content() {
            assert!(
                !cell.symbol().chars().any(char::is_control),
                "{:?}",
                cell.symbol()
            );
        }
        let text = rows(&buf).join("\n");
        assert!(text.contains("redtext"), "{text}");
    }
}

#[test]
fn a_model_retry_shows_in_the_status_line_until_the_model_answers() {
    use quorum::event::{Event, Stamped};
    let mut events = vec![
        Stamped::new(0, Event::UserMessage { text: "hi".into() }),
        Stamped::new(
            10,
            Event::ModelRetry {
                attempt: 2,
                wait_ms: 1500,
                reason: "rate limited (429)".into(),
            },
        ),
    ];
    let status = |events: &[Stamped]| {
        rows(&screen(events, 120, 10, Some(false)))
            .last()
            .cloned()
            .unwrap()
    };
    assert!(
        status(&events).contains("⟳ model: rate limited (429), retry 2 in 1.5 s"),
        "{}",
        status(&events)
    );
    events.push(Stamped::new(
        2000,
        Event::AssistantDelta {
            text: "hello".into(),
        },
    ));
    assert!(!status(&events).contains("retry"), "{}", status(&events));
}

/// Boxes holding text that terminals and ratatui measure differently (CJK,
/// ZWJ and VS16 emoji, flags, skin tones, keycaps, lam-alef, halfwidth
/// kana with sound marks, trigrams) and wide characters that reach a box's
/// right edge keep every row's right border in the top corner's column,
/// with nothing past it, and each cell is as wide to a terminal (the sum of
/// its code points) as ratatui draws it.
#[test]
fn box_borders_stay_in_one_column_whatever_the_text() {
    use ratatui::buffer::CellWidth;
    let events = events(&fixture("wide.jsonl"));
    for cols in [60, 61, 62, 63, 120] {
        let buf = screen(&events, cols, 80, Some(false));
        let text = rows(&buf).join("\n");
        let cell = |x: u16, y: u16| buf[(x, y)].symbol();
        let mut boxes = 0;
        for top in 0..buf.area.height {
            if cell(1, top) != "╭" {
                continue;
            }
            boxes += 1;
            let right = (0..cols)
                .rev()
                .find(|&x| cell(x, top) == "╮")
                .unwrap_or_else(|| panic!("row {top} has no corner:\n{text}"));
            let mut y = top + 1;
            loop {
                let bottom = cell(1, y) == "╰";
                let want = if bottom { "╯" } else { "│" };
                assert_eq!(cell(right, y), want, "{cols} cols, row {y}:\n{text}");
                for x in right + 1..cols {
                    assert_eq!(
                        cell(x, y),
                        " ",
                        "{cols} cols, past the border, row {y}:\n{text}"
                    );
                }
                // A terminal counts each cell as wide as ratatui drew it.
                let mut x = 0;
                while x < right {
                    let symbol = cell(x, y);
                    let drawn = symbol.cell_width();
                    let counted: usize = symbol
                        .chars()
                        .map(|c| unicode_width::UnicodeWidthChar::width(c).unwrap_or(0))
                        .sum();
                    assert_eq!(drawn as usize, counted, "{symbol:?}, row {y}:\n{text}");
                    x += drawn.max(1);
                }
                if bottom {
                    break;
                }
                y += 1;
            }
        }
        assert_eq!(boxes, 2, "{text}");
        // The text got there, in the forms every terminal measures alike.
        for seen in [
            "漢字かな交じり ＡＢＣ",
            "👩💻",
            "❤ ☀ ✔ ⚠",
            "JP US DE",
            "👍 👋",
            "لا شيء",
            "ｶ゛ｷ゛",
        ] {
            assert!(text.contains(seen), "{cols} cols: {seen:?} in\n{text}");
        }
    }
}

/// While the chat model writes what may be a tool call as text (held back
/// until its message ends), the status line says so, with the size so far,
/// instead of a bare "chat working"; once the call runs, it is gone.
#[test]
fn the_status_line_shows_a_tool_call_being_written() {
    use quorum::event::{Event, Stamped};
    let mut events = vec![
        Stamped::new(0, Event::TurnStarted),
        Stamped::new(10, Event::AssistantWritingCall { bytes: 300 }),
        Stamped::new(20, Event::AssistantWritingCall { bytes: 1290 }),
    ];
    let status = |events: &[Stamped]| rows(&screen(events, 120, 20, Some(false))).join("\n");
    let shown = status(&events);
    assert!(
        shown.contains("chat writing a tool call (1.3 KB) (Esc cancels)"),
        "{shown}"
    );
    events.push(Stamped::new(
        30,
        Event::ToolCallStarted {
            id: "recovered-2-0".into(),
            name: "subagent_status".into(),
            summary: String::new(),
        },
    ));
    let shown = status(&events);
    assert!(!shown.contains("writing a tool call"), "{shown}");
    assert!(shown.contains("chat working"), "{shown}");
    // A `subagent` call written as text opens a box instead of a tool
    // line: that ends the writing too.
    events.push(Stamped::new(40, Event::AssistantWritingCall { bytes: 90 }));
    assert!(status(&events).contains("chat writing a tool call (90 B)"));
    events.push(Stamped::new(
        50,
        quorum::event::build::started("c1", quorum::event::AgentRef::Acp("fake".into()))
            .input("hi")
            .event(),
    ));
    let shown = status(&events);
    assert!(!shown.contains("writing a tool call"), "{shown}");
}
