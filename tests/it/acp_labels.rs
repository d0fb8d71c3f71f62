//! Honest labels (issue 18, item 7): a running box says `starting…` until
//! its session is open, then `waiting for NAME` until its agent sends
//! something, then what the agent does; and a box that took follow-up
//! turns shows each turn's input above its output (before, a follow-up's
//! answer appeared under the first turn's input, and the first turn's
//! output was gone).

use crate::common;

use common::app::*;
use common::{rows, screen};
use quorum::agent::Permissions;
use quorum::event::{AgentRef, SessionKind, Stamped, build};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn shown(events: &[quorum::event::Event]) -> String {
    let stamped: Vec<Stamped> = events
        .iter()
        .enumerate()
        .map(|(i, e)| Stamped::new(i as u64 * 10, e.clone()))
        .collect();
    rows(&screen(&stamped, 100, 20, Some(false))).join("\n")
}

#[test]
fn starting_until_the_session_is_open_then_waiting_for_the_agent_then_its_activity() {
    let mut events = vec![
        build::started("c1", AgentRef::Acp("fake".into()))
            .input("SLOW job")
            .event(),
    ];
    let s = shown(&events);
    assert!(s.contains("starting…"), "{s}");
    assert!(!s.contains("waiting for"), "{s}");
    events.push(build::session("c1", SessionKind::Fresh).id("s1").event());
    let s = shown(&events);
    assert!(s.contains("waiting for fake"), "{s}");
    assert!(!s.contains("starting…"), "{s}");
    events.push(build::chunk("c1", "working on it"));
    let s = shown(&events);
    assert!(s.contains("working on it"), "{s}");
    assert!(
        !s.contains("waiting for") && !s.contains("starting…"),
        "{s}"
    );
    // A follow-up turn reopens its session: starting again until it is.
    events.push(build::finished("c1", "first report").event());
    events.push(build::followup("c1", "and now?"));
    let s = shown(&events);
    assert!(s.contains("starting…"), "{s}");
    events.push(build::session("c1", SessionKind::Resumed).id("s1").event());
    let s = shown(&events);
    assert!(s.contains("waiting for fake"), "{s}");
}

/// The internal agent opens no session: it asks its model at once, so its
/// box waits for it rather than saying it is starting.
#[test]
fn the_internal_agent_is_waited_for_from_the_start() {
    let events = vec![
        build::started("c1", AgentRef::Internal)
            .input("look")
            .event(),
    ];
    let s = shown(&events);
    assert!(s.contains("waiting for internal"), "{s}");
    assert!(!s.contains("starting…"), "{s}");
}

/// The rows of the screen between the box's borders, trimmed.
fn box_rows(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let inner = l.strip_prefix('│')?;
            let end = inner.find('│')?;
            Some(inner[..end].trim().to_string())
        })
        .collect()
}

#[test]
fn a_box_with_follow_ups_shows_each_turns_input_above_its_output() {
    let events = vec![
        build::started("c1", AgentRef::Acp("fake".into()))
            .input("SLOW job")
            .background("t1")
            .event(),
        build::session("c1", SessionKind::Fresh).id("s1").event(),
        build::chunk("c1", "first answer"),
        build::finished("c1", "first answer").event(),
        build::followup("c1", "second question"),
        build::session("c1", SessionKind::Resumed).id("s1").event(),
        build::chunk("c1", "second answer"),
        build::finished("c1", "second answer").event(),
    ];
    let rows = box_rows(&shown(&events));
    assert_eq!(
        rows,
        [
            "› SLOW job",
            "first answer",
            "› second question",
            "second answer"
        ],
        "{}",
        shown(&events)
    );
    // While the follow-up runs, the first turn's output stays above it.
    let running = &events[..7];
    let rows = box_rows(&shown(running));
    assert_eq!(
        rows,
        [
            "› SLOW job",
            "first answer",
            "› second question",
            "second answer"
        ],
        "{}",
        shown(running)
    );
}

#[tokio::test]
async fn live_labels_and_a_follow_up_through_the_app_loop() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) = live_session(dir.path(), "", None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    drive(
        &mut terminal,
        &mut app,
        line("@fake! echo first answer"),
        vec![],
    )
    .await;
    // The session opens before the agent says anything.
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("waiting for fake")
    })
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("  done")
    })
    .await;
    drive(
        &mut terminal,
        &mut app,
        line("/msg t1 echo second answer"),
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        box_rows(s).iter().any(|r| r == "second answer")
    })
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| s.contains("✓")).await;
    let rows: Vec<String> = box_rows(&text(&terminal))
        .into_iter()
        .filter(|r| {
            !r.is_empty()
                && !r.starts_with("No background")
                && !r.starts_with("Ctrl+T")
                && !r.starts_with("t1")
        })
        .collect();
    let at = |needle: &str| {
        rows.iter()
            .position(|r| r == needle)
            .unwrap_or_else(|| panic!("no row {needle:?} in {rows:#?}"))
    };
    assert!(
        at("› echo first answer") < at("first answer")
            && at("first answer") < at("› echo second answer")
            && at("› echo second answer") < at("second answer"),
        "{rows:#?}"
    );
}

/// A box keeps its last few earlier turns (its cost stays the same however
/// many follow-ups it took) and counts the ones it let go.
#[test]
fn a_box_keeps_its_last_earlier_turns_and_counts_the_rest() {
    let mut events = vec![
        build::started("c1", AgentRef::Acp("fake".into()))
            .input("turn 0")
            .background("t1")
            .event(),
        build::finished("c1", "answer 0").event(),
    ];
    let kept = quorum::tui::state::EARLIER_TURNS;
    let turns = kept + 2;
    for i in 1..=turns {
        events.push(build::followup("c1", format!("turn {i}")));
        events.push(build::finished("c1", format!("answer {i}")).event());
    }
    let stamped: Vec<Stamped> = events
        .iter()
        .enumerate()
        .map(|(i, e)| Stamped::new(i as u64 * 10, e.clone()))
        .collect();
    let rows = box_rows(&rows(&screen(&stamped, 100, 60, Some(false))).join("\n"));
    let mut expected = vec![format!("… {} earlier turns", turns - kept)];
    for i in (turns - kept)..=turns {
        expected.push(format!("› turn {i}"));
        expected.push(format!("answer {i}"));
    }
    assert_eq!(rows, expected);
}
