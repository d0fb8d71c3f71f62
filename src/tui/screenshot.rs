//! Headless screenshots: the screen rendered into a buffer with no
//! terminal attached, written as plain text, ANSI text or SVG.

use std::fmt::Write as _;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};
use unicode_width::UnicodeWidthStr;

use super::app::App;

/// Output formats, chosen by the file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Ansi,
    Svg,
}

impl Format {
    pub fn from_path(path: &std::path::Path) -> Option<Self> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "txt" => Some(Format::Text),
            "ans" => Some(Format::Ansi),
            "svg" => Some(Format::Svg),
            _ => None,
        }
    }
}

/// Draws `app` into a buffer of `cols` x `rows`.
pub fn render(app: &mut App, cols: u16, rows: u16) -> Buffer {
    let mut terminal =
        Terminal::new(TestBackend::new(cols, rows)).expect("TestBackend never fails");
    terminal
        .draw(|f| app.draw(f))
        .expect("TestBackend never fails");
    terminal.backend().buffer().clone()
}

pub fn write(buffer: &Buffer, format: Format) -> String {
    match format {
        Format::Text => to_text(buffer),
        Format::Ansi => to_ansi(buffer),
        Format::Svg => to_svg(buffer),
    }
}

/// Each row's cells as `(symbol, cell)`, skipping the columns a wide
/// character covers.
fn rows(buffer: &Buffer) -> impl Iterator<Item = Vec<&ratatui::buffer::Cell>> {
    let width = buffer.area.width as usize;
    buffer.content.chunks(width).map(|row| {
        let mut out = Vec::with_capacity(row.len());
        let mut skip = 0;
        for cell in row {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            skip = cell.symbol().width().saturating_sub(1);
            out.push(cell);
        }
        out
    })
}

/// Plain text, trailing spaces trimmed.
pub fn to_text(buffer: &Buffer) -> String {
    let mut out = String::new();
    for row in rows(buffer) {
        let line: String = row.iter().map(|c| c.symbol()).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn sgr_color(color: Color, fg: bool) -> String {
    let base = if fg { 30 } else { 40 };
    match color {
        Color::Reset => format!("{}", base + 9),
        Color::Black => format!("{base}"),
        Color::Red => format!("{}", base + 1),
        Color::Green => format!("{}", base + 2),
        Color::Yellow => format!("{}", base + 3),
        Color::Blue => format!("{}", base + 4),
        Color::Magenta => format!("{}", base + 5),
        Color::Cyan => format!("{}", base + 6),
        Color::Gray => format!("{}", base + 7),
        Color::DarkGray => format!("{}", base + 60),
        Color::LightRed => format!("{}", base + 61),
        Color::LightGreen => format!("{}", base + 62),
        Color::LightYellow => format!("{}", base + 63),
        Color::LightBlue => format!("{}", base + 64),
        Color::LightMagenta => format!("{}", base + 65),
        Color::LightCyan => format!("{}", base + 66),
        Color::White => format!("{}", base + 67),
        Color::Indexed(i) => format!("{};5;{i}", base + 8),
        Color::Rgb(r, g, b) => format!("{};2;{r};{g};{b}", base + 8),
    }
}

/// Text with SGR colour codes, for `cat` in a terminal.
pub fn to_ansi(buffer: &Buffer) -> String {
    let mut out = String::new();
    for row in rows(buffer) {
        let mut last = None;
        for cell in row {
            let style = (cell.fg, cell.bg, cell.modifier);
            if last != Some(style) {
                out.push_str("\x1b[0");
                for (m, code) in [
                    (Modifier::BOLD, "1"),
                    (Modifier::DIM, "2"),
                    (Modifier::ITALIC, "3"),
                    (Modifier::UNDERLINED, "4"),
                    (Modifier::REVERSED, "7"),
                    (Modifier::CROSSED_OUT, "9"),
                ] {
                    if cell.modifier.contains(m) {
                        let _ = write!(out, ";{code}");
                    }
                }
                if cell.fg != Color::Reset {
                    let _ = write!(out, ";{}", sgr_color(cell.fg, true));
                }
                if cell.bg != Color::Reset {
                    let _ = write!(out, ";{}", sgr_color(cell.bg, false));
                }
                out.push('m');
                last = Some(style);
            }
            out.push_str(cell.symbol());
        }
        out.push_str("\x1b[0m\n");
    }
    out
}

const FOREGROUND: &str = "#d0d0d0";
const BACKGROUND: &str = "#1c1c1c";

/// xterm's default palette, as hex.
fn hex(color: Color) -> Option<String> {
    const ANSI: [&str; 16] = [
        "#000000", "#cd0000", "#00cd00", "#cdcd00", "#0000ee", "#cd00cd", "#00cdcd", "#e5e5e5",
        "#7f7f7f", "#ff0000", "#00ff00", "#ffff00", "#5c5cff", "#ff00ff", "#00ffff", "#ffffff",
    ];
    let index = match color {
        Color::Reset => return None,
        Color::Black => 0,
        Color::Red => 1,
        Color::Green => 2,
        Color::Yellow => 3,
        Color::Blue => 4,
        Color::Magenta => 5,
        Color::Cyan => 6,
        Color::Gray => 7,
        Color::DarkGray => 8,
        Color::LightRed => 9,
        Color::LightGreen => 10,
        Color::LightYellow => 11,
        Color::LightBlue => 12,
        Color::LightMagenta => 13,
        Color::LightCyan => 14,
        Color::White => 15,
        Color::Rgb(r, g, b) => return Some(format!("#{r:02x}{g:02x}{b:02x}")),
        Color::Indexed(i) if i < 16 => i as usize,
        Color::Indexed(i) if i >= 232 => {
            let v = 8 + 10 * (i - 232);
            return Some(format!("#{v:02x}{v:02x}{v:02x}"));
        }
        Color::Indexed(i) => {
            let i = i - 16;
            let level = |v: u8| if v == 0 { 0 } else { 55 + 40 * v };
            return Some(format!(
                "#{:02x}{:02x}{:02x}",
                level(i / 36),
                level((i / 6) % 6),
                level(i % 6)
            ));
        }
    };
    Some(ANSI[index].to_string())
}

fn escape_xml(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
}

/// An SVG picture of the screen with its real colours.
pub fn to_svg(buffer: &Buffer) -> String {
    const CW: f64 = 8.4;
    const CH: f64 = 17.0;
    const FONT: f64 = 14.0;
    let (w, h) = (
        buffer.area.width as f64 * CW,
        buffer.area.height as f64 * CH,
    );
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.1} {h:.1}\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"{BACKGROUND}\"/>\n\
         <g font-family=\"'DejaVu Sans Mono', Menlo, Consolas, monospace\" font-size=\"{FONT}\" xml:space=\"preserve\">\n"
    );
    for (y, row) in rows(buffer).enumerate() {
        let top = y as f64 * CH;
        let baseline = top + CH * 0.78;
        // Runs of cells with one style.
        let mut col = 0usize;
        let mut i = 0;
        while i < row.len() {
            let cell = row[i];
            let key = (cell.fg, cell.bg, cell.modifier);
            let start = col;
            let mut text = String::new();
            while i < row.len() && (row[i].fg, row[i].bg, row[i].modifier) == key {
                text.push_str(row[i].symbol());
                col += row[i].symbol().width().max(1);
                i += 1;
            }
            let cols = col - start;
            let (mut fg, mut bg) = (hex(cell.fg), hex(cell.bg));
            if cell.modifier.contains(Modifier::REVERSED) {
                std::mem::swap(&mut fg, &mut bg);
                fg = fg.or(Some(BACKGROUND.into()));
                bg = bg.or(Some(FOREGROUND.into()));
            }
            if let Some(bg) = bg {
                let _ = writeln!(
                    out,
                    "<rect x=\"{:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{CH:.1}\" fill=\"{bg}\"/>",
                    start as f64 * CW,
                    cols as f64 * CW
                );
            }
            if text.trim().is_empty() {
                continue;
            }
            let fg = fg.unwrap_or_else(|| FOREGROUND.into());
            let _ = write!(
                out,
                "<text x=\"{:.1}\" y=\"{baseline:.1}\" fill=\"{fg}\" textLength=\"{:.1}\" lengthAdjust=\"spacingAndGlyphs\"",
                start as f64 * CW,
                cols as f64 * CW
            );
            let m = cell.modifier;
            if m.contains(Modifier::BOLD) {
                out.push_str(" font-weight=\"bold\"");
            }
            if m.contains(Modifier::ITALIC) {
                out.push_str(" font-style=\"italic\"");
            }
            if m.contains(Modifier::DIM) {
                out.push_str(" opacity=\"0.6\"");
            }
            match (
                m.contains(Modifier::UNDERLINED),
                m.contains(Modifier::CROSSED_OUT),
            ) {
                (true, true) => out.push_str(" text-decoration=\"underline line-through\""),
                (true, false) => out.push_str(" text-decoration=\"underline\""),
                (false, true) => out.push_str(" text-decoration=\"line-through\""),
                _ => {}
            }
            out.push('>');
            escape_xml(&text, &mut out);
            out.push_str("</text>\n");
        }
    }
    out.push_str("</g>\n</svg>\n");
    out
}
