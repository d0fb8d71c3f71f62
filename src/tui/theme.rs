//! Colours and symbols. Named ANSI colours, so the terminal's own palette
//! decides the exact shades; the SVG screenshot maps them to xterm's.

use ratatui::style::{Color, Modifier, Style};

use crate::event::Severity;

pub const GREEN: Color = Color::Green;
pub const YELLOW: Color = Color::Yellow;
pub const RED: Color = Color::Red;

/// Neutral box colours: never green, yellow or red, so a box without a
/// verdict can't be mistaken for one with it.
/// (Dark blue is left out: it is hard to read on dark terminals.)
const NEUTRAL: [Color; 7] = [
    Color::Cyan,
    Color::Magenta,
    Color::LightBlue,
    Color::LightCyan,
    Color::LightMagenta,
    Color::White,
    Color::Gray,
];

/// A task waiting for the person (a permission answer): a colour no box
/// and no verdict has.
pub const NEEDS_YOU: Color = Color::LightYellow;

/// The internal agent's colour.
pub const INTERNAL: Color = Color::LightBlue;

/// A batch's group before it has a verdict (not a verdict colour).
pub const GROUP: Color = Color::Gray;

/// The mark of a task waiting for its place in a batch.
pub const QUEUED: &str = "◌";

pub fn severity_color(severity: Severity) -> Color {
    match severity {
        Severity::Green => GREEN,
        Severity::Yellow => YELLOW,
        Severity::Red => RED,
    }
}

/// The neutral colour of an agent: fixed per name, across runs and machines.
pub fn agent_color(name: &str) -> Color {
    if name == "internal" {
        return INTERNAL;
    }
    // FNV-1a: stable, unlike std's randomly seeded hasher.
    let mut hash: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    NEUTRAL[hash as usize % NEUTRAL.len()]
}

/// A batch group's colour: its verdict's, else neutral.
pub fn group_color(tint: Option<Severity>) -> Color {
    tint.map_or(GROUP, severity_color)
}

/// A box's border colour: its verdict's, else its agent's.
pub fn box_color(agent: &str, severity: Option<Severity>) -> Color {
    severity.map_or_else(|| agent_color(agent), severity_color)
}

pub fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

pub fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

pub fn user() -> Style {
    Style::default()
        .fg(Color::Cyan)
        .add_modifier(Modifier::BOLD)
}

pub fn code() -> Style {
    Style::default().fg(Color::LightYellow)
}

pub fn link() -> Style {
    Style::default()
        .fg(Color::LightBlue)
        .add_modifier(Modifier::UNDERLINED)
}

pub fn heading(level: u8) -> Style {
    let style = Style::default().add_modifier(Modifier::BOLD);
    match level {
        1 => style
            .fg(Color::LightMagenta)
            .add_modifier(Modifier::UNDERLINED),
        2 => style.fg(Color::LightMagenta),
        _ => style,
    }
}

pub fn quote() -> Style {
    Style::default().fg(Color::Green)
}

pub fn warning() -> Style {
    Style::default().fg(Color::Yellow)
}

pub fn error() -> Style {
    Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
}

pub const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// The spinner frame at `now` milliseconds.
/// How long the spinner shows each of its frames.
pub const SPINNER_FRAME_MS: u64 = 80;

pub fn spinner(now: u64) -> &'static str {
    SPINNER[(now / SPINNER_FRAME_MS) as usize % SPINNER.len()]
}

/// `42s`, `3m04s`, `1h02m`.
pub fn elapsed(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neutral_colours_are_stable_and_never_verdicts() {
        for name in ["claude", "gemini", "codex", "internal", "opencode", ""] {
            let c = agent_color(name);
            assert_eq!(c, agent_color(name));
            assert!(![GREEN, YELLOW, RED].contains(&c), "{name}: {c:?}");
        }
    }

    #[test]
    fn elapsed_formats() {
        assert_eq!(elapsed(999), "0s");
        assert_eq!(elapsed(42_000), "42s");
        assert_eq!(elapsed(184_000), "3m04s");
        assert_eq!(elapsed(3_720_000), "1h02m");
    }
}
