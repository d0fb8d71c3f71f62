//! No terminal is too small: the whole app renders at every size from 0x0
//! up, at every step of the demo and the colours fixture, without a panic.

use crate::common;

use common::*;
use quorum::tui::{app::App, screenshot};

#[test]
fn every_tiny_size_renders_at_every_step() {
    for events in [events(&demo()), events(&fixture("colours.jsonl"))] {
        // A handful of steps across the session, and the end.
        let steps: Vec<usize> = (0..=events.len()).step_by(events.len() / 8 + 1).collect();
        for &n in steps.iter().chain(std::iter::once(&events.len())) {
            for panel in [Some(false), Some(true), None] {
                for cols in 0..=12u16 {
                    for rows in 0..=6u16 {
                        let buf = screen(&events[..n], cols, rows, panel);
                        assert_eq!(buf.area.width, cols);
                        assert_eq!(buf.area.height, rows);
                    }
                }
            }
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(200))]

    /// Random states (a prefix of a recorded session, the panel shown or
    /// hidden, scrolled anywhere) at random sizes up to 300x100, tiny ones
    /// half the time.
    #[test]
    fn random_states_render_at_random_sizes(
        which in 0usize..2,
        cut in 0.0f64..=1.0,
        panel in proptest::option::of(proptest::bool::ANY),
        scroll in -500isize..500,
        cols in proptest::prop_oneof![0u16..=8, 0u16..=300],
        rows in proptest::prop_oneof![0u16..=4, 0u16..=100],
    ) {
        let events = if which == 0 { events(&demo()) } else { events(&fixture("colours.jsonl")) };
        let n = (events.len() as f64 * cut) as usize;
        let mut app = App::still();
        app.view.set_panel(panel);
        for e in &events[..n] {
            app.on_event(e.clone());
        }
        // Lay out once at this size, then scroll anywhere and draw again.
        screenshot::render(&mut app, cols, rows);
        app.view.scroll(&app.state, scroll, 0);
        let buf = screenshot::render(&mut app, cols, rows);
        proptest::prop_assert_eq!((buf.area.width, buf.area.height), (cols, rows));
    }
}

/// An escape sequence cut between two chunks leaves no fragment on screen,
/// in a sub-agent's box and in the chat model's reply alike.
#[test]
fn a_sequence_split_across_chunks_leaves_no_fragment() {
    use quorum::event::{AgentRef, Event, Stamped, build};
    let chunk = |text: &str| Stamped::new(1, build::chunk("c1", text));
    let delta = |text: &str| Stamped::new(1, Event::AssistantDelta { text: text.into() });
    let events = vec![
        Stamped::new(
            0,
            build::started("c1", AgentRef::Acp("fake".into()))
                .input("colours")
                .event(),
        ),
        chunk("plain \u{1b}"),
        chunk("[31mred\u{1b}["),
        chunk("0m and \u{1b}]0;zz"),
        chunk("qq\u{7}titled"),
        delta("reply \u{1b}["),
        delta("1mbold\u{1b}[0m done"),
    ];
    let text = rows(&screen(&events, 100, 20, Some(false))).join("\n");
    assert!(text.contains("plain red and titled"), "{text}");
    assert!(text.contains("reply bold done"), "{text}");
    for fragment in ["[31m", "[0m", "0m", "31m", "[1m", "1mbold", "zz", "qq"] {
        assert!(!text.contains(fragment), "{fragment:?} in\n{text}");
    }
}
