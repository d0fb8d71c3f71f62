//! Batches and review quorums on screen: the group under its header, the
//! queued box, and the header tinted with the quorum's verdict. Snapshots
//! are of the buffer's Debug form, which lists every cell's colours.

use crate::common;

use common::*;
use quorum::event::{AgentRef, Event, Stamped, Summary, TaskState, build};
use quorum::tui::theme;
use ratatui::buffer::Buffer;
use ratatui::style::Color;

fn batch() -> Vec<Stamped> {
    events(&fixture("batch.jsonl"))
}

fn quorum() -> Vec<Stamped> {
    events(&fixture("quorum.jsonl"))
}

/// The events before the first task ends: three run, `gemini` is queued.
fn batch_running() -> Vec<Stamped> {
    let all = batch();
    let n = all
        .iter()
        .position(|e| matches!(e.event, Event::SubagentFinished { .. }))
        .expect("the fixture's tasks end");
    all[..n].to_vec()
}

/// The colours of the `len` cells from where `needle` starts.
fn colours_at(buf: &Buffer, needle: &str, len: u16) -> Vec<Color> {
    let (x, y) = find(buf, needle).unwrap_or_else(|| panic!("{needle}:\n{}", rows(buf).join("\n")));
    (x..x + len).map(|x| buf[(x, y)].fg).collect()
}

/// The row that holds `needle`.
fn row_of(buf: &Buffer, needle: &str) -> String {
    rows(buf)
        .into_iter()
        .find(|r| r.contains(needle))
        .unwrap_or_else(|| panic!("{needle}:\n{}", rows(buf).join("\n")))
}

#[test]
fn a_batch_of_four_mixed_tasks_while_running() {
    let buf = screen(&batch_running(), 120, 40, Some(false));
    let header = row_of(&buf, "┏━ batch of 4");
    assert!(
        header.contains("claude ⠴ · codex ⠴ · internal ⠴ · gemini ◌ queued"),
        "{header}"
    );
    // Not done yet: the group is neutral.
    assert!(
        colours_at(&buf, "┏━ batch of 4", 12)
            .iter()
            .all(|c| *c == theme::GROUP)
    );
    // The queued box says so, instead of a spinner's "starting…".
    let text = rows(&buf).join("\n");
    assert!(text.contains("◌ queued 3s ─╮"), "{text}");
    assert!(
        text.contains("queued: starts when a place in its batch is free"),
        "{text}"
    );
    assert!(!text.contains("starting…"), "{text}");
    let status = rows(&buf).last().cloned().unwrap();
    assert!(status.contains("3 running · 1 queued"), "{status}");
    // Every box of the batch sits inside the group's gutter.
    for agent in ["claude", "codex", "internal", "gemini"] {
        let (x, _) = find(&buf, &format!("╭─ {agent}")).unwrap();
        let (gx, _) = find(&buf, "┏━").unwrap();
        assert_eq!(x, gx + 2, "{agent} is indented under the header");
    }
    insta::assert_debug_snapshot!("batch_running", buf);
}

#[test]
fn a_batch_of_four_mixed_tasks_when_finished() {
    let buf = screen(&batch(), 120, 40, Some(false));
    let header = row_of(&buf, "┏━ batch of 4");
    assert!(
        header.contains("batch of 4 ● red · 3 succeeded · 1 failed"),
        "{header}"
    );
    // The worst verdict tints the header and the group's gutter; the
    // failed count is red.
    assert!(
        colours_at(&buf, "┏━ batch of 4 ● red", 19)
            .iter()
            .all(|c| *c == Color::Red)
    );
    assert!(
        colours_at(&buf, "1 failed", 8)
            .iter()
            .all(|c| *c == Color::Red)
    );
    assert!(
        colours_at(&buf, "3 succeeded", 11)
            .iter()
            .all(|c| *c == Color::Green)
    );
    let (gx, gy) = find(&buf, "┏━").unwrap();
    assert_eq!(buf[(gx, gy + 1)].symbol(), "┃");
    assert_eq!(buf[(gx, gy + 1)].fg, Color::Red);
    assert_eq!(
        find(&buf, "┗━").map(|(x, _)| x),
        Some(gx),
        "the group closes"
    );
    // Each box keeps its own colour: the red review, the failed gemini.
    assert_eq!(box_colour(&buf, "claude"), Color::Red);
    assert_eq!(box_colour(&buf, "gemini"), theme::agent_color("gemini"));
    let text = rows(&buf).join("\n");
    assert!(text.contains("stop reason: error"), "{text}");
    assert!(text.contains("gemini exited during the turn"), "{text}");
    insta::assert_debug_snapshot!("batch_finished", buf);
}

#[test]
fn three_reviewers_that_disagree() {
    let buf = screen(&quorum(), 120, 40, Some(false));
    let header = row_of(&buf, "┏━ quorum");
    assert!(
        header.contains(
            "┏━ quorum ● red · 2 of 3 · split: claude ● red · codex ● green · gemini ● red ━━"
        ),
        "{header}"
    );
    // The header is tinted with the quorum's verdict, cell by cell.
    let title = "┏━ quorum ● red · 2 of 3";
    assert!(
        colours_at(&buf, title, title.chars().count() as u16)
            .iter()
            .all(|c| *c == Color::Red),
        "{:?}",
        colours_at(&buf, title, title.chars().count() as u16)
    );
    let (x, y) = find(&buf, "━━━━━━━━").unwrap();
    assert_eq!(buf[(x, y)].fg, Color::Red, "the header's rule too");
    // Each reviewer's verdict in its own colour: the disagreement shows.
    assert!(
        colours_at(&buf, "● green", 7)
            .iter()
            .all(|c| *c == Color::Green)
    );
    let (x, y) = find(&buf, "gemini ● red").unwrap();
    assert_eq!(buf[(x + 7, y)].fg, Color::Red);
    for (agent, colour) in [
        ("claude", Color::Red),
        ("codex", Color::Green),
        ("gemini", Color::Red),
    ] {
        assert_eq!(box_colour(&buf, agent), colour, "{agent}");
    }
    insta::assert_debug_snapshot!("quorum_disagrees", buf);
    // While the reviewers work, the header lists them as they go.
    let all = quorum();
    let running = &all[..all
        .iter()
        .position(|e| matches!(e.event, Event::SubagentFinished { .. }))
        .unwrap()];
    let buf = screen(running, 120, 40, Some(false));
    let header = row_of(&buf, "┏━ review by 3");
    assert!(header.contains("claude ⠙ · codex ⠙ · gemini ⠙"), "{header}");
    // After the first verdict, before the quorum: that one shows.
    let first = &all[..all
        .iter()
        .position(|e| matches!(e.event, Event::SubagentFinished { .. }))
        .unwrap()
        + 2];
    let header = row_of(&screen(first, 120, 40, Some(false)), "┏━ review by 3");
    assert!(header.contains("codex ● green"), "{header}");
}

#[test]
fn a_queued_background_task_shows_in_the_side_panel() {
    let started = |call: &str, task: &str, queued| {
        let started = build::started(call, AgentRef::Acp("codex".into()))
            .input("write the docs")
            .background(task)
            .batch("b1");
        Stamped::new(10, if queued { started.queued() } else { started }.event())
    };
    let mut events = vec![
        Stamped::new(10, build::batch_started("b1", 2).event()),
        started("c1", "t1", false),
        started("c2", "t2", true),
    ];
    let buf = screen(&events, 120, 30, Some(true));
    let text = rows(&buf).join("\n");
    assert!(
        text.contains("Tasks · 1 running · 1 queued · 0 done"),
        "{text}"
    );
    assert!(text.contains("◌ t2 codex"), "{text}");
    assert!(text.contains("  queued · 0 tools"), "{text}");
    // Its place comes: it runs, in the panel as in its box.
    events.push(Stamped::new(900, build::dequeued("c2")));
    events.push(Stamped::new(
        900,
        build::progress(
            "c2",
            Summary {
                state: TaskState::Running,
                ..Summary::default()
            },
        )
        .task("t2")
        .event(),
    ));
    let text = rows(&screen(&events, 120, 30, Some(true))).join("\n");
    assert!(text.contains("Tasks · 2 running · 0 done"), "{text}");
    assert!(!text.contains("queued"), "{text}");
}
