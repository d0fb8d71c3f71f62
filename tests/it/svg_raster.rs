//! The SVG screenshot as rasterisers draw it: every character's ink falls
//! in its own cell of the grid, and nothing is drawn where the screen has
//! blank cells. resvg stands in for the renderers people view the SVG with,
//! once as it is and once laying text out with its own font metrics, as
//! cairosvg does. It gets one font, a subset of DejaVu Sans Mono kept in
//! tests/fixtures/fonts (README there), so the picture is the same on every
//! machine whatever fonts it has installed.

use crate::common;

use common::*;
use quorum::tui::screenshot;
use ratatui::buffer::{Buffer, CellWidth};
use ratatui::style::Modifier;
use resvg::{tiny_skia, usvg};

/// The SVG's cell is 8.4 x 17 units; at this scale it is 21 pixels wide,
/// so every cell boundary falls on a pixel boundary.
const SCALE: f32 = 2.5;
const CELL_PX: usize = 21;
const ROW_PX: f32 = 42.5;

const FONT: &[u8] = include_bytes!("../fixtures/fonts/DejaVuSansMono-subset.ttf");

#[derive(Debug, Clone, Copy)]
enum Renderer {
    /// resvg as it is: it honours `textLength` and `xml:space` and has the
    /// font the SVG asks for, whose advance (8.43 units) is near the cell's.
    Resvg,
    /// A renderer that takes none of the SVG's hints about text width and
    /// spacing (cairosvg ignores `textLength`; `xml:space` is deprecated in
    /// SVG 2) and whose font advances by other than the cell's width, as
    /// cairosvg's hinted DejaVu Sans Mono does (8 units a character at 1:1,
    /// 8.5 at 2:1): here the same font at 12.8 units, advancing 7.7 as
    /// Consolas, the SVG's third choice, does at 14.
    OwnMetrics,
    /// A renderer that places a `<text>` by the first value of its `x`
    /// list alone and lays the rest out with the font's advances, as
    /// librsvg (`rsvg-convert`, GNOME's viewers) does.
    FirstXOnly,
}

struct Picture {
    buffer: Buffer,
    renderer: Renderer,
    pixmap: tiny_skia::Pixmap,
    /// Each row's [`Picture::ink_columns`], found once.
    ink: Vec<std::cell::OnceCell<Vec<usize>>>,
}

fn rasterise(buffer: Buffer, renderer: Renderer) -> Picture {
    let mut svg = screenshot::to_svg(&buffer);
    let mut options = usvg::Options::default();
    let fonts = options.fontdb_mut();
    fonts.load_font_data(FONT.to_vec());
    fonts.set_monospace_family("DejaVu Sans Mono");
    if let Renderer::OwnMetrics = renderer {
        let hints = regex::Regex::new(r#" (textLength|lengthAdjust|xml:space)="[^"]*""#).unwrap();
        svg = hints.replace_all(&svg, "").into_owned();
        options.style_sheet = Some("text { font-size: 12.8px }".into());
    }
    if let Renderer::FirstXOnly = renderer {
        let lists = regex::Regex::new(r#"<text x="([0-9.]+)[^"]*""#).unwrap();
        svg = lists.replace_all(&svg, r#"<text x="$1""#).into_owned();
    }
    let tree = usvg::Tree::from_str(&svg, &options).expect("the SVG parses");
    let size = tree.size();
    let (w, h) = (size.width() * SCALE, size.height() * SCALE);
    assert_eq!(w as usize, buffer.area.width as usize * CELL_PX);
    let mut pixmap = tiny_skia::Pixmap::new(w.ceil() as u32, h.ceil() as u32).unwrap();
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(SCALE, SCALE),
        &mut pixmap.as_mut(),
    );
    // To look at what the test sees.
    if let Ok(dir) = std::env::var("QUORUM_SVG_PNG_DIR") {
        let (w, h) = (buffer.area.width, buffer.area.height);
        let name = format!("{w}x{h}-{renderer:?}.png");
        pixmap
            .save_png(std::path::Path::new(&dir).join(name))
            .unwrap();
    }
    let ink = vec![std::cell::OnceCell::new(); buffer.area.height as usize];
    Picture {
        buffer,
        renderer,
        pixmap,
        ink,
    }
}

impl Picture {
    /// The pixel rows wholly inside screen row `row`.
    fn band(&self, row: u16) -> std::ops::Range<usize> {
        let top = (row as f32 * ROW_PX).ceil() as usize;
        let bottom = ((row + 1) as f32 * ROW_PX).floor() as usize;
        top..bottom
    }

    fn rgb(&self, x: usize, y: usize) -> [i32; 3] {
        let p = self.pixmap.pixel(x as u32, y as u32).unwrap().demultiply();
        [p.red().into(), p.green().into(), p.blue().into()]
    }

    /// The commonest colour of a cell: its background, since a glyph covers
    /// less than half of its cell.
    fn background(&self, col: u16, row: u16) -> [i32; 3] {
        // A cell has a few colours (its background, its glyph's shades):
        // counted in a list.
        let mut counts: Vec<([i32; 3], usize)> = Vec::new();
        for y in self.band(row) {
            for x in col as usize * CELL_PX..(col as usize + 1) * CELL_PX {
                let p = self.rgb(x, y);
                match counts.iter_mut().find(|(c, _)| *c == p) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((p, 1)),
                }
            }
        }
        counts.into_iter().max_by_key(|&(_, n)| n).unwrap().0
    }

    /// The pixel columns of `row` where something stands out from the
    /// background of the cell under it.
    fn ink_columns(&self, row: u16) -> Vec<usize> {
        self.ink[row as usize]
            .get_or_init(|| self.find_ink(row))
            .clone()
    }

    fn find_ink(&self, row: u16) -> Vec<usize> {
        let mut ink = Vec::new();
        for col in 0..self.buffer.area.width {
            let bg = self.background(col, row);
            for x in col as usize * CELL_PX..(col as usize + 1) * CELL_PX {
                let stands_out = self.band(row).any(|y| {
                    let p = self.rgb(x, y);
                    (0..3).map(|i| (p[i] - bg[i]).abs()).sum::<i32>() > 96
                });
                if stands_out {
                    ink.push(x);
                }
            }
        }
        ink
    }

    /// How many pixel columns of cell (`col`, `row`) hold ink.
    fn ink_in(&self, col: u16, row: u16) -> usize {
        let cell = col as usize * CELL_PX..(col as usize + 1) * CELL_PX;
        self.ink_columns(row)
            .into_iter()
            .filter(|x| cell.contains(x))
            .count()
    }

    /// The row's text and the renderer, for failure messages.
    fn row_text(&self, row: u16) -> String {
        let text = &rows(&self.buffer)[row as usize];
        format!("{:?}, row {row}:\n{text}", self.renderer)
    }

    /// Every visible ASCII character has ink in its own cell, and no ink
    /// falls on a cell that draws nothing (a blank not covered by a wide
    /// character, underline or strike-through).
    fn assert_on_grid(&self) {
        let width = self.buffer.area.width;
        for row in 0..self.buffer.area.height {
            let ink = self.ink_columns(row);
            let mut drawn = vec![false; width as usize];
            let mut col = 0;
            while col < width {
                let cell = &self.buffer[(col, row)];
                let symbol = cell.symbol();
                let span = cell.cell_width().max(1);
                let lines = cell
                    .modifier
                    .intersects(Modifier::UNDERLINED | Modifier::CROSSED_OUT);
                if !symbol.chars().all(char::is_whitespace) || lines {
                    for c in col..(col + span).min(width) {
                        drawn[c as usize] = true;
                    }
                }
                if symbol.len() == 1 && symbol.chars().all(|c| c.is_ascii_graphic()) {
                    let cells = col as usize * CELL_PX..(col as usize + 1) * CELL_PX;
                    assert!(
                        ink.iter().any(|x| cells.contains(x)),
                        "{symbol:?} at column {col} has no ink in its cell: {}",
                        self.row_text(row)
                    );
                }
                col += span;
            }
            // A glyph may reach one pixel past its cell: box-drawing lines
            // run to the edge of their advance, which is 8.43 units in
            // DejaVu Sans Mono at 14 px.
            let drawn_near = |x: usize| {
                [x.saturating_sub(1), x, x + 1]
                    .iter()
                    .any(|&x| drawn.get(x / CELL_PX) == Some(&true))
            };
            for x in ink {
                let col = x / CELL_PX;
                assert!(
                    drawn_near(x),
                    "ink at pixel {x}, in blank column {col}: {}",
                    self.row_text(row)
                );
            }
        }
    }
}

/// The README's picture: the demo at 120 x 40 after event 119. The status
/// line ends with " · 2 running" and every letter of it shows; "fetch_json",
/// a code span after a space, starts at its own column.
#[test]
fn demo_screenshot_keeps_every_character_in_its_cell() {
    let events = events(&demo());
    for renderer in [Renderer::Resvg, Renderer::OwnMetrics, Renderer::FirstXOnly] {
        let picture = rasterise(screen(&events[..119], 120, 40, None), renderer);
        picture.assert_on_grid();

        let status = 39;
        let text = picture.row_text(status);
        assert!(text.ends_with(" · 2 running"), "{text}");
        let last = rows(&picture.buffer)[status as usize].chars().count() as u16 - 1;
        for col in last - 6..=last {
            assert!(picture.ink_in(col, status) > 0, "column {col}: {text}");
        }
        let rightmost = *picture.ink_columns(status).last().unwrap();
        assert_eq!(rightmost / CELL_PX, last as usize, "{text}");

        let (col, row) = find(&picture.buffer, "retries in fetch_json").unwrap();
        let code = col + "retries in ".len() as u16;
        let text = picture.row_text(row);
        assert_eq!(picture.buffer[(code, row)].symbol(), "f");
        assert_ne!(
            picture.buffer[(code, row)].fg,
            picture.buffer[(code - 2, row)].fg,
            "fetch_json is a code span, in its own colour"
        );
        assert_eq!(picture.ink_in(code - 1, row), 0, "the space before: {text}");
        assert!(picture.ink_in(code, row) > 0, "its first letter: {text}");
    }
}

/// Rows mixing wide characters (CJK, emoji), combining marks and ASCII:
/// a wide character takes two cells, so the ASCII after it stays on the
/// grid and the box's right border keeps its column.
#[test]
fn wide_characters_take_two_cells_in_the_picture() {
    let events = events(&fixture("wide.jsonl"));
    for renderer in [Renderer::Resvg, Renderer::OwnMetrics, Renderer::FirstXOnly] {
        let picture = rasterise(screen(&events, 100, 20, Some(false)), renderer);
        picture.assert_on_grid();

        let (col, row) = find(&picture.buffer, "running: 漢").unwrap();
        let text = picture.row_text(row);
        assert!(text.contains("JP"), "{text}");
        // "漢字 " is five cells, not three: "J" of "JP" comes after the
        // emoji that follow.
        let j = (col..picture.buffer.area.width)
            .find(|&c| picture.buffer[(c, row)].symbol() == "J")
            .unwrap();
        assert!(picture.ink_in(j, row) > 0, "J at column {j}: {text}");
        assert_eq!(picture.ink_in(j - 1, row), 0, "the space before J: {text}");
    }
}

/// The SVG's text is the screen's, its spaces kept: each `<text>` is
/// words and the single spaces between them (as a person copies them
/// out), no space at its edges nor two in a row (nothing for a renderer to
/// collapse), and its characters placed at their columns rebuild every
/// row of the screen.
#[test]
fn the_svg_text_keeps_its_spaces() {
    let events = events(&demo());
    let buffer = screen(&events[..119], 120, 40, None);
    let svg = screenshot::to_svg(&buffer);
    let unescape = |t: &str| {
        t.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&")
    };
    let (w, h) = (buffer.area.width as usize, buffer.area.height as usize);
    let mut grid = vec![vec![String::from(" "); w]; h];
    let mut texts = Vec::new();
    let element =
        regex::Regex::new(r#"<text x="([^"]*)" y="([^"]*)"[^>]*>([^<]*)</text>"#).unwrap();
    for c in element.captures_iter(&svg) {
        let text = unescape(&c[3]);
        let row = (c[2].parse::<f64>().unwrap() / 17.0) as usize;
        let xs: Vec<f64> = c[1].split(' ').map(|x| x.parse().unwrap()).collect();
        let chars: Vec<char> = text.chars().collect();
        if xs.len() == chars.len() {
            for (x, ch) in xs.iter().zip(&chars) {
                grid[row][(x / 8.4).round() as usize] = ch.to_string();
            }
        } else {
            // A cell of several code points: one x for all of it.
            assert_eq!(xs.len(), 1, "{text:?}");
            grid[row][(xs[0] / 8.4).round() as usize] = text.clone();
        }
        texts.push(text);
    }
    let rebuilt: Vec<String> = grid
        .iter()
        .map(|row| row.concat().trim_end().to_string())
        .collect();
    let shown: Vec<String> = screenshot::to_text(&buffer)
        .lines()
        .map(|l| l.trim_end().to_string())
        .collect();
    for (row, (got, want)) in rebuilt.iter().zip(&shown).enumerate() {
        assert_eq!(got, want, "row {row}");
    }
    assert!(
        texts
            .iter()
            .any(|t| t.contains("Security review of src/auth/: token handling,")),
        "{texts:#?}"
    );
    assert!(
        texts
            .iter()
            .all(|t| !t.starts_with(' ') && !t.ends_with(' ') && !t.contains("  ")),
        "{texts:#?}"
    );
}
