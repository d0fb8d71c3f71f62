//! Headless screenshots: the screen rendered into a buffer with no
//! terminal attached, written as plain text, ANSI text or SVG.

use std::fmt::Write as _;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::{Buffer, Cell, CellWidth};
use ratatui::style::{Color, Modifier};

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

/// Each row's drawn cells with their column, skipping the columns a wide
/// character covers.
fn rows(buffer: &Buffer) -> impl Iterator<Item = Vec<(usize, &Cell)>> {
    let width = buffer.area.width as usize;
    buffer.content.chunks(width).map(|row| {
        let mut out = Vec::with_capacity(row.len());
        let mut skip = 0;
        for (col, cell) in row.iter().enumerate() {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            skip = usize::from(cell.cell_width()).saturating_sub(1);
            out.push((col, cell));
        }
        out
    })
}

/// Plain text, trailing spaces trimmed.
pub fn to_text(buffer: &Buffer) -> String {
    let mut out = String::new();
    for row in rows(buffer) {
        let line: String = row.iter().map(|(_, c)| c.symbol()).collect();
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
        for (_, cell) in row {
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

/// The SVG's grid and font size, in pixels.
const CELL_WIDTH: f64 = 8.4;
const CELL_HEIGHT: f64 = 17.0;
/// DejaVu Sans Mono (the first font asked for) advances 1233/2048 of its
/// size: at this size, the cell's width, so a renderer that lays a text out
/// by the font's advances (librsvg) keeps it on the grid.
const FONT_SIZE: f64 = 13.95;

/// The `x` of a column's left edge.
fn cell_x(col: usize) -> f64 {
    col as f64 * CELL_WIDTH
}

/// An SVG picture of the screen with its real colours.
///
/// Renderers differ in the font they find, in its advance widths, in
/// whether they honour `textLength` and `xml:space`, and in whether they
/// place each character by its own `x` (browsers, resvg) or only the first
/// (librsvg), so the grid depends on none of them. Within a style run,
/// words and the single spaces between them are one `<text>` whose `x`
/// lists the left edge of every character's own cell, spaces included: the
/// text reads (and copies) as the screen does, and a renderer that takes
/// only the first `x` lays out a short stretch of monospace text, whose
/// advance is the cell's. Two spaces or more end the text (nothing for a
/// renderer to collapse, nor to measure), and so does a wide character, a
/// cell of several code points (a base and its combining mark, an emoji
/// sequence) or of one outside the Basic Multilingual Plane (which some
/// renderers count as two characters of an `x` list): such a cell is a
/// `<text>` of its own. Underline and strike-through are lines across the
/// run's cells, spaces included.
pub fn to_svg(buffer: &Buffer) -> String {
    let (w, h) = (
        cell_x(buffer.area.width as usize),
        buffer.area.height as f64 * CELL_HEIGHT,
    );
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.1} {h:.1}\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"{BACKGROUND}\"/>\n\
         <g font-family=\"'DejaVu Sans Mono', Menlo, Consolas, monospace\" font-size=\"{FONT_SIZE}\">\n"
    );
    for (y, row) in rows(buffer).enumerate() {
        let top = y as f64 * CELL_HEIGHT;
        let style = |cell: &Cell| (cell.fg, cell.bg, cell.modifier);
        for run in row.chunk_by(|a, b| style(a.1) == style(b.1)) {
            write_run(&mut out, run, top);
        }
    }
    out.push_str("</g>\n</svg>\n");
    out
}

/// One run of cells of one style in the row at `top`: its background,
/// its texts, and its underline or strike-through.
fn write_run(out: &mut String, run: &[(usize, &Cell)], top: f64) {
    let baseline = top + CELL_HEIGHT * 0.78;
    let (start, cell) = run[0];
    let (last_col, last) = run[run.len() - 1];
    let end = last_col + usize::from(last.cell_width().max(1));
    let width = cell_x(end) - cell_x(start);
    let (mut fg, mut bg) = (hex(cell.fg), hex(cell.bg));
    if cell.modifier.contains(Modifier::REVERSED) {
        std::mem::swap(&mut fg, &mut bg);
        fg = fg.or(Some(BACKGROUND.into()));
        bg = bg.or(Some(FOREGROUND.into()));
    }
    if let Some(bg) = bg {
        let _ = writeln!(
            out,
            "<rect x=\"{:.1}\" y=\"{top:.1}\" width=\"{width:.1}\" height=\"{CELL_HEIGHT:.1}\" fill=\"{bg}\"/>",
            cell_x(start),
        );
    }
    let fg = fg.unwrap_or_else(|| FOREGROUND.into());
    let m = cell.modifier;
    let mut attrs = format!("y=\"{baseline:.1}\" fill=\"{fg}\"");
    if m.contains(Modifier::BOLD) {
        attrs.push_str(" font-weight=\"bold\"");
    }
    if m.contains(Modifier::ITALIC) {
        attrs.push_str(" font-style=\"italic\"");
    }
    let opacity = if m.contains(Modifier::DIM) {
        " opacity=\"0.6\""
    } else {
        ""
    };
    attrs.push_str(opacity);

    write_texts(out, run, &attrs);

    for (flag, y) in [
        (Modifier::UNDERLINED, baseline + 2.0),
        (Modifier::CROSSED_OUT, baseline - FONT_SIZE * 0.3),
    ] {
        if m.contains(flag) {
            let _ = writeln!(
                out,
                "<rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{width:.1}\" height=\"1\" fill=\"{fg}\"{opacity}/>",
                cell_x(start),
            );
        }
    }
}

/// A run's characters as `<text>`s: words and the single spaces between
/// them make one text; a longer gap (or the run's edge) ends it. A
/// character that is wide, of several code points or outside the Basic
/// Multilingual Plane is a text of its own.
fn write_texts(out: &mut String, run: &[(usize, &Cell)], attrs: &str) {
    let (mut text, mut cols) = (String::new(), Vec::new());
    let mut space: Option<usize> = None;
    for &(col, cell) in run {
        let symbol = cell.symbol();
        if symbol.chars().all(char::is_whitespace) {
            if space.is_some() || text.is_empty() {
                text_element(out, &cols, &text, attrs);
                (text, cols, space) = (String::new(), Vec::new(), None);
            } else {
                space = Some(col);
            }
            continue;
        }
        let mut chars = symbol.chars();
        let single = chars.next().is_some_and(|c| c.len_utf16() == 1);
        if single && chars.next().is_none() && cell.cell_width() <= 1 {
            if let Some(space) = space.take() {
                text.push(' ');
                cols.push(space);
            }
            text.push_str(symbol);
            cols.push(col);
        } else {
            text_element(out, &cols, &text, attrs);
            (text, cols, space) = (String::new(), Vec::new(), None);
            text_element(out, &[col], symbol, attrs);
        }
    }
    text_element(out, &cols, &text, attrs);
}

/// `<text>` with one `x` per character of `text`, at the left edge of
/// the matching column.
fn text_element(out: &mut String, cols: &[usize], text: &str, attrs: &str) {
    if text.is_empty() {
        return;
    }
    out.push_str("<text x=\"");
    for (i, &col) in cols.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let _ = write!(out, "{:.1}", cell_x(col));
    }
    let _ = write!(out, "\" {attrs}>");
    escape_xml(text, out);
    out.push_str("</text>\n");
}
