#![allow(dead_code)]

use std::path::PathBuf;

pub mod adapter;
pub mod app;
pub mod models;
#[cfg(unix)]
pub mod pty;
pub mod shell;

use quorum::event::Stamped;
use quorum::transcript;
use quorum::tui::app::App;
use quorum::tui::screenshot;
use ratatui::buffer::Buffer;
use ratatui::style::Color;

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub fn demo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl")
}

pub fn events(path: &std::path::Path) -> Vec<Stamped> {
    let loaded = transcript::load(path).expect("fixture loads");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    loaded.events
}

/// The screen after applying `events`, with the side panel as given.
pub fn screen(events: &[Stamped], cols: u16, rows: u16, panel: Option<bool>) -> Buffer {
    let mut app = App::still();
    app.view.set_panel(panel);
    for e in events {
        app.on_event(e.clone());
    }
    screenshot::render(&mut app, cols, rows)
}

/// The buffer's text rows.
pub fn rows(buf: &Buffer) -> Vec<String> {
    screenshot::to_text(buf)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Position of the first occurrence of `needle` on screen (column in cells).
pub fn find(buf: &Buffer, needle: &str) -> Option<(u16, u16)> {
    for y in 0..buf.area.height {
        let row: String = (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect();
        if let Some(byte) = row.find(needle) {
            let col = row[..byte].chars().count() as u16;
            return Some((col, y));
        }
    }
    None
}

/// The colour of the rounded top-left corner of the box titled `agent`.
pub fn box_colour(buf: &Buffer, agent: &str) -> Color {
    let (x, y) = find(buf, &format!("╭─ {agent}"))
        .unwrap_or_else(|| panic!("no box for {agent}:\n{}", rows(buf).join("\n")));
    let corner = &buf[(x, y)];
    // The whole border is one colour: corner, left side, bottom.
    let below = &buf[(x, y + 1)];
    assert_eq!(below.symbol(), "│", "left border of {agent}");
    assert_eq!(below.fg, corner.fg, "left border of {agent}");
    corner.fg
}

/// Runs one of the repo's install scripts (idempotent) and returns the path
/// it prints last. A failed install fails the test.
pub fn install(script: &str) -> PathBuf {
    install_with(script, &[])
}

/// [`install`] with arguments for the script.
pub fn install_with(script: &str, args: &[&str]) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(script);
    let out = std::process::Command::new("bash")
        .arg(&path)
        .args(args)
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{script} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    PathBuf::from(
        stdout
            .lines()
            .last()
            .expect("the script prints the path")
            .trim(),
    )
}
