//! No terminal is too small: the whole app renders at every size from 0x0
//! up, at every step of the demo and the colours fixture, without a panic.

mod common;

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
                        let mut app = App::still();
                        app.view.set_panel(panel);
                        for e in &events[..n] {
                            app.on_event(e.clone());
                        }
                        let buf = screenshot::render(&mut app, cols, rows);
                        assert_eq!(buf.area.width, cols);
                        assert_eq!(buf.area.height, rows);
                    }
                }
            }
        }
    }
}
