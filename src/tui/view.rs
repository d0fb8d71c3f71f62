//! Drawing the whole screen from the state: transcript, side panel,
//! composer and status line.
//!
//! Only the visible part of the transcript is laid out. Each cell's rows
//! are cached per width and revision, so a frame costs the same for ten
//! cells or ten thousand, and a resize re-wraps only what is shown.

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Widget};

use std::collections::HashMap;

use super::cells::{self, truncate};
use super::composer::Layout;
use super::panel::draw_panel;
use super::state::{Cell, CellKind, State};
use super::theme;

/// Width of the side panel.
pub const PANEL_WIDTH: u16 = 40;
/// Below this terminal width the side panel starts hidden.
pub const PANEL_MIN_COLS: u16 = 100;

/// The top visible row: a cell and a row inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Anchor {
    pub cell: usize,
    pub row: usize,
}

struct Cached {
    width: usize,
    rev: u64,
    /// For animated cells, the moment they were laid out at.
    at: Option<Moment>,
    lines: Vec<Line<'static>>,
    /// The revision of the draft of an answer it was laid out with.
    form: Option<u64>,
}

/// How many cells' rows the view keeps laid out: past it, those farther
/// than half of it from the top row shown are dropped.
const CACHE_CELLS: usize = 4096;

/// What the screen remembers between frames: scroll position, panel
/// toggle, and layout caches. Never part of the recorded state.
#[derive(Default)]
pub struct View {
    /// `None`: follow the bottom. `Some`: the user scrolled; stay there.
    anchor: Option<Anchor>,
    /// The panel as toggled by the user; `None` follows the width rule.
    panel: Option<bool>,
    /// Laid-out rows by cell index: only cells that were on screen (or
    /// scrolled past) have an entry, so its cost follows what was shown,
    /// not the transcript's length. Kept near the top shown (see
    /// [`CACHE_CELLS`]).
    cache: HashMap<usize, Cached>,
    /// Transcript size at the last frame, for scrolling by pages.
    width: usize,
    height: usize,
    /// The top row shown in the last frame.
    top: Anchor,
    /// The box focused with Alt+↑/↓ (its cell index), marked in the margin.
    pub focus: Option<usize>,
    /// The side panel has the keys: the selected task's index.
    pub panel_focus: Option<usize>,
    /// The side panel shows the spending agent by agent (`$`).
    pub spend_open: bool,
    /// A box opened full screen.
    pub opened: Option<Opened>,
    /// A review quorum's findings view, full screen.
    pub findings: Option<super::findings_view::FindingsView>,
    /// Cells laid out so far (cache misses).
    laid_out: u64,
    /// Rows that moved with time alone laid out again so far, their
    /// cells' other rows kept (see [`cells::animated_row`]).
    ticked: u64,
    /// The composer's first visible row, when its draft is taller than
    /// its area.
    composer_top: usize,
    /// The person's draft of the answer to the question open in a box.
    pub form: Option<super::form::FormDraft>,
}

/// A box opened full screen: its call, and the top row shown.
#[derive(Debug, Clone, PartialEq)]
pub struct Opened {
    pub call_id: String,
    pub scroll: usize,
    /// Rows of the last frame (for paging and clamping).
    rows: usize,
    height: usize,
    /// The laid-out rows, for the box revision, width and second they
    /// were laid out at (a frame while nothing changed costs no layout).
    cache: Option<((u64, usize, u64), Vec<Line<'static>>)>,
}

impl Opened {
    pub fn new(call_id: String) -> Self {
        Self {
            call_id,
            scroll: 0,
            rows: 0,
            height: 0,
            cache: None,
        }
    }

    /// Scrolls by `delta` rows, within the content.
    pub fn scroll_by(&mut self, delta: isize) {
        let max = self.rows.saturating_sub(self.height);
        self.scroll = self.scroll.saturating_add_signed(delta).min(max);
    }

    pub fn page(&self) -> isize {
        self.height.saturating_sub(2).max(1) as isize
    }

    pub fn end(&mut self) {
        self.scroll = self.rows.saturating_sub(self.height);
    }
}

impl View {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the side panel shows on a terminal `cols` wide.
    pub fn panel_open(&self, cols: u16) -> bool {
        self.panel.unwrap_or(cols >= PANEL_MIN_COLS)
    }

    pub fn toggle_panel(&mut self, cols: u16) {
        self.panel = Some(!self.panel_open(cols));
    }

    pub fn set_panel(&mut self, open: Option<bool>) {
        self.panel = open;
    }

    /// How many times a cell was laid out (its cached rows were stale).
    pub fn laid_out(&self) -> u64 {
        self.laid_out
    }

    /// How many times only a cell's animated row was laid out again (the
    /// spinner turned, an elapsed second passed; nothing else changed).
    pub fn ticked(&self) -> u64 {
        self.ticked
    }

    /// Whether new output scrolls into view.
    pub fn following(&self) -> bool {
        self.anchor.is_none()
    }

    /// Rows of cell `i` at the current width.
    fn rows(&mut self, state: &State, i: usize, width: usize, now: u64) -> &[Line<'static>] {
        let cell = &state.cells[i];
        let at = moment(cell, now);
        // The box with the question open also shows the person's draft.
        let draft = self
            .form
            .as_ref()
            .filter(|d| state.box_index(&d.call_id) == Some(i));
        let form = draft.map(|d| d.rev);
        let laid = |c: &Cached| c.width == width && c.rev == cell.rev && c.form == form;
        let mut fresh = matches!(self.cache.get(&i), Some(c) if laid(c) && c.at == at);
        // Only time moved: a cell whose first row is all that moves with it
        // (a running box's title, a batch's header) gets that row again.
        if !fresh
            && at.is_some()
            && let Some(c) = self.cache.get_mut(&i).filter(|c| laid(c))
            && let Some(row) = cells::animated_row(cell, width, now)
            && let Some(first) = c.lines.first_mut()
        {
            *first = row;
            c.at = at;
            self.ticked += 1;
            fresh = true;
        }
        if !fresh {
            self.laid_out += 1;
            let lines = cells::render_asking(cell, width, now, draft);
            self.cache.insert(
                i,
                Cached {
                    width,
                    rev: cell.rev,
                    at,
                    lines,
                    form,
                },
            );
        }
        &self.cache[&i].lines
    }

    /// Drops the rows of cells far from `top` once more than
    /// [`CACHE_CELLS`] are kept.
    fn trim_cache(&mut self, top: usize) {
        if self.cache.len() > CACHE_CELLS {
            self.cache
                .retain(|&i, _| i.abs_diff(top) <= CACHE_CELLS / 2);
        }
    }

    fn height_of(&mut self, state: &State, i: usize, width: usize, now: u64) -> usize {
        self.rows(state, i, width, now).len()
    }

    /// The anchor that shows the last `height` rows (or the top, if all fit).
    fn bottom_anchor(&mut self, state: &State, width: usize, height: usize, now: u64) -> Anchor {
        let mut need = height;
        for i in (0..state.cells.len()).rev() {
            let h = self.height_of(state, i, width, now);
            if h >= need {
                return Anchor {
                    cell: i,
                    row: h - need,
                };
            }
            need -= h;
        }
        Anchor::default()
    }

    /// Whether at least `height` rows follow `anchor`.
    fn fills(
        &mut self,
        state: &State,
        anchor: Anchor,
        width: usize,
        height: usize,
        now: u64,
    ) -> bool {
        let mut have = 0;
        for i in anchor.cell..state.cells.len() {
            have += self.height_of(state, i, width, now)
                - if i == anchor.cell { anchor.row } else { 0 };
            if have >= height {
                return true;
            }
        }
        false
    }

    /// Scrolls by `delta` rows (negative: up, towards older output).
    pub fn scroll(&mut self, state: &State, delta: isize, now: u64) {
        let (width, height) = (self.width, self.height);
        if width == 0 || state.cells.is_empty() {
            return;
        }
        let mut a = self.anchor.unwrap_or(self.top);
        a.cell = a.cell.min(state.cells.len() - 1);
        if delta < 0 {
            let mut up = delta.unsigned_abs();
            while up > 0 {
                if a.row >= up {
                    a.row -= up;
                    break;
                }
                up -= a.row;
                if a.cell == 0 {
                    a.row = 0;
                    break;
                }
                a.cell -= 1;
                a.row = self.height_of(state, a.cell, width, now);
            }
            self.anchor = Some(a);
        } else {
            let mut down = delta as usize;
            while down > 0 {
                let h = self.height_of(state, a.cell, width, now);
                if a.row + down < h {
                    a.row += down;
                    break;
                }
                down -= h - a.row;
                if a.cell + 1 >= state.cells.len() {
                    a.row = h;
                    break;
                }
                a.cell += 1;
                a.row = 0;
            }
            self.anchor = if self.fills(state, a, width, height, now) {
                Some(a)
            } else {
                None
            };
        }
    }

    pub fn page_up(&mut self, state: &State, now: u64) {
        let page = self.height.saturating_sub(2).max(1) as isize;
        self.scroll(state, -page, now);
    }

    pub fn page_down(&mut self, state: &State, now: u64) {
        let page = self.height.saturating_sub(2).max(1) as isize;
        self.scroll(state, page, now);
    }

    pub fn home(&mut self) {
        self.anchor = Some(Anchor::default());
    }

    pub fn end(&mut self) {
        self.anchor = None;
    }

    /// Scrolls so that cell `i` starts at the top (or the bottom shows, if
    /// it is among the last rows).
    pub fn show_cell(&mut self, i: usize) {
        self.anchor = Some(Anchor { cell: i, row: 0 });
    }

    /// Draws the transcript into `area`.
    pub fn draw_transcript(&mut self, state: &State, area: Rect, buf: &mut Buffer, now: u64) {
        if area.is_empty() {
            return;
        }
        // One column of margin on each side.
        let area = Rect {
            x: area.x + 1,
            width: area.width.saturating_sub(2),
            ..area
        };
        let (width, height) = (area.width as usize, area.height as usize);
        self.width = width;
        self.height = height;
        if width == 0 || height == 0 || state.cells.is_empty() {
            return;
        }
        let anchored = self
            .anchor
            .filter(|a| a.cell < state.cells.len())
            .filter(|&a| self.fills(state, a, width, height, now));
        let top = match anchored {
            Some(a) => a,
            None => {
                self.anchor = None;
                self.bottom_anchor(state, width, height, now)
            }
        };
        self.top = top;
        self.trim_cache(top.cell);
        let mut y = area.y;
        let bottom = area.y + area.height;
        let focus = self.focus;
        'cells: for i in top.cell..state.cells.len() {
            let skip = if i == top.cell { top.row } else { 0 };
            let first = y;
            for line in self.rows(state, i, width, now).iter().skip(skip) {
                if y >= bottom {
                    break 'cells;
                }
                buf.set_line(area.x, y, line, area.width);
                y += 1;
            }
            // The focused box is marked in the margin.
            if focus == Some(i) && first < bottom && area.x > 0 {
                buf.set_string(
                    area.x - 1,
                    first,
                    "▶",
                    theme::bold().fg(ratatui::style::Color::White),
                );
            }
        }
    }
}

/// What an animated cell shows of the time: the spinner's frame and the
/// elapsed seconds. Its cached rows stay good while this stays the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Moment {
    spinner: u64,
    seconds: u64,
}

fn moment(cell: &Cell, now: u64) -> Option<Moment> {
    match &cell.kind {
        CellKind::Subagent(b) if cells::is_animated(cell) => Some(Moment {
            spinner: now / theme::SPINNER_FRAME_MS,
            seconds: now.saturating_sub(b.started) / 1000,
        }),
        // Any other animated cell: every millisecond counts.
        _ if cells::is_animated(cell) => Some(Moment {
            spinner: now,
            seconds: 0,
        }),
        _ => None,
    }
}

/// The composer as the screen shows it.
pub struct ComposerChrome<'a> {
    pub text: &'a str,
    /// In chars.
    pub cursor: usize,
    /// What a Tab found (the names to choose from), on the composer's top.
    pub hint: Option<&'a str>,
}

/// The columns a composer's text wraps at on a screen `cols` wide: all but
/// its prompt.
pub fn composer_width(cols: u16) -> usize {
    (cols as usize).saturating_sub(PROMPT_WIDTH as usize)
}

/// The composer's prompt, before its first row.
const PROMPT: &str = "› ";
const PROMPT_WIDTH: u16 = 2;

/// What the bottom of the screen shows besides the transcript.
pub struct Chrome<'a> {
    /// The composer, or `None` in replay.
    pub composer: Option<ComposerChrome<'a>>,
    /// The status line: facts first, then indicators, then `keys`.
    pub status: Vec<Span<'a>>,
    /// Key hints, last on the status line (cut first when narrow).
    pub keys: &'a str,
    /// A transient message shown above the status line's keys.
    pub banner: Option<&'a str>,
}

/// Draws the whole screen.
pub fn draw(frame: &mut Frame<'_>, state: &State, view: &mut View, chrome: &Chrome<'_>, now: u64) {
    let area = frame.area();
    // The composer grows with its draft up to a third of the screen.
    let layout = chrome
        .composer
        .as_ref()
        .map(|c| Layout::new(c.text, composer_width(area.width)));
    let composer_rows = layout.as_ref().map_or(0, |l| {
        let most = (area.height / 3).saturating_sub(1).max(1) as usize;
        1 + l.rows.len().clamp(1, most) as u16
    });
    let [main, composer, status] = ratatui::layout::Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(composer_rows),
        Constraint::Length(1),
    ])
    .areas(area);
    let panel_open = view.panel_open(area.width) && area.width > PANEL_WIDTH + 20;
    let (transcript, panel) = if panel_open {
        let [t, p] = ratatui::layout::Layout::horizontal([
            Constraint::Min(1),
            Constraint::Length(PANEL_WIDTH),
        ])
        .areas(main);
        (t, Some(p))
    } else {
        (main, None)
    };
    let opened = view.opened.as_ref().and_then(|o| {
        let i = state.box_index(&o.call_id)?;
        Some((state.subagent_box(&o.call_id)?, state.cells[i].rev))
    });
    match (opened, view.opened.as_mut()) {
        _ if view.findings.is_some() => {
            if let Some(f) = view.findings.as_mut() {
                f.draw(main, frame.buffer_mut());
            }
        }
        (Some((b, rev)), Some(o)) => draw_opened(b, rev, o, main, frame.buffer_mut(), now),
        _ => {
            view.opened = None;
            view.draw_transcript(state, transcript, frame.buffer_mut(), now);
            if let Some(p) = panel {
                let shown = (view.panel_focus, view.spend_open);
                draw_panel(state, shown, p, frame.buffer_mut(), now);
            }
        }
    }
    if let (Some(c), Some(layout)) = (&chrome.composer, &layout) {
        draw_composer(frame, composer, c, layout, &mut view.composer_top);
    }
    draw_status(state, view, chrome, status, frame.buffer_mut(), now);
}

/// An opened box, full screen, from its scroll position.
fn draw_opened(
    b: &super::state::SubagentBox,
    rev: u64,
    opened: &mut Opened,
    area: Rect,
    buf: &mut Buffer,
    now: u64,
) {
    if area.is_empty() {
        return;
    }
    let color = theme::box_color(b.agent.name(), b.severity);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(Style::default().fg(color))
        .title(Span::styled(
            " opened box · ↑/↓ PgUp/PgDn scroll · Esc back ",
            theme::bold(),
        ));
    let inner = block.inner(area);
    block.render(area, buf);
    let inner = Rect {
        x: inner.x + 1,
        width: inner.width.saturating_sub(2),
        ..inner
    };
    // Only a running box's header changes with time (its elapsed seconds).
    let second = if b.running() {
        now.saturating_sub(b.started) / 1000
    } else {
        0
    };
    let key = (rev, inner.width as usize, second);
    if opened.cache.as_ref().is_none_or(|(k, _)| *k != key) {
        opened.cache = Some((key, super::detail::render(b, inner.width as usize, now)));
    }
    let lines = &opened.cache.as_ref().expect("filled above").1;
    opened.rows = lines.len();
    opened.height = inner.height as usize;
    opened.scroll = opened.scroll.min(lines.len().saturating_sub(opened.height));
    for (y, line) in (inner.y..inner.bottom()).zip(lines.iter().skip(opened.scroll)) {
        buf.set_line(inner.x, y, line, inner.width);
    }
}

/// The composer: its draft wrapped to the width, scrolled so that the
/// cursor's row shows, and the terminal's cursor at the cursor.
fn draw_composer(
    frame: &mut Frame<'_>,
    area: Rect,
    composer: &ComposerChrome<'_>,
    layout: &Layout,
    top: &mut usize,
) {
    if area.is_empty() {
        return;
    }
    let mut block = Block::default()
        .borders(Borders::TOP)
        .border_style(theme::dim());
    if let Some(hint) = composer.hint {
        block = block.title(Line::from(vec![
            Span::styled("─", theme::dim()),
            Span::styled(format!(" Tab: {hint} "), theme::bold()),
        ]));
    }
    let inner = block.inner(area);
    block.render(area, frame.buffer_mut());
    if inner.is_empty() {
        return;
    }
    let buf = frame.buffer_mut();
    if composer.text.is_empty() {
        let line = Line::from(vec![
            Span::styled(PROMPT, theme::user()),
            Span::styled(
                "message the chat · @agent message to call an agent · Ctrl+C quits",
                theme::dim(),
            ),
        ]);
        buf.set_line(inner.x, inner.y, &line, inner.width);
        frame.set_cursor_position((inner.x + PROMPT_WIDTH.min(inner.width - 1), inner.y));
        return;
    }
    let (row, col) = layout.cursor(composer.cursor);
    let height = inner.height as usize;
    let rows = layout.rows.len();
    // Scroll as little as keeps the cursor's row in view.
    *top = (*top)
        .min(row)
        .max((row + 1).saturating_sub(height))
        .min(rows.saturating_sub(height));
    for (y, r) in (inner.y..inner.bottom()).zip(*top..rows) {
        // The prompt's column: the prompt, or where more rows are hidden.
        let mark = if r == 0 {
            Span::styled(PROMPT, theme::user())
        } else if r == *top && r > 0 {
            Span::styled("↑ ", theme::dim())
        } else if y + 1 == inner.bottom() && r + 1 < rows {
            Span::styled("↓ ", theme::dim())
        } else {
            Span::raw("  ")
        };
        let line = Line::from(vec![mark, Span::raw(layout.text(r))]);
        buf.set_line(inner.x, y, &line, inner.width);
    }
    let x = (inner.x + PROMPT_WIDTH + col as u16).min(inner.right() - 1);
    let y = inner.y + (row - *top) as u16;
    frame.set_cursor_position((x, y));
}

fn draw_status(
    state: &State,
    view: &View,
    chrome: &Chrome<'_>,
    area: Rect,
    buf: &mut Buffer,
    now: u64,
) {
    if area.is_empty() {
        return;
    }
    let mut spans: Vec<Span<'_>> = vec![Span::raw(" ")];
    if let Some(banner) = chrome.banner {
        spans.push(Span::styled(banner, theme::warning()));
        spans.push(Span::raw("  "));
    }
    spans.extend(chrome.status.iter().cloned());
    // The conductor's context and cost, as it reports them.
    if let Some(usage) = &state.chat_usage {
        spans.push(Span::styled(" · chat ", theme::dim()));
        spans.extend(cells::usage_spans(usage));
    }
    if !view.following() {
        spans.push(Span::styled(" · ↑ scrolled, End follows", theme::warning()));
    }
    work_spans(state, now, &mut spans);
    // The key hints that fit, in their order; the last one (how to quit)
    // is kept whatever else gives way.
    let used: usize = spans
        .iter()
        .map(|s| super::wrap::text_width(&s.content))
        .sum();
    let hints = fitting_hints(chrome.keys, (area.width as usize).saturating_sub(used));
    if !hints.is_empty() {
        spans.push(Span::styled(format!(" · {hints}"), theme::dim()));
    }
    let line = Line::from(truncate(
        spans.into_iter().map(owned).collect(),
        area.width as usize,
    ));
    buf.set_style(area, Style::default().bg(ratatui::style::Color::Black));
    buf.set_line(area.x, area.y, &line, area.width);
}

/// What the session is doing, for the status line: the chat's turn, the
/// model's retry, the calls cancelling, running, waiting for the person
/// and queued, and what the agents cost.
fn work_spans(state: &State, now: u64, spans: &mut Vec<Span<'_>>) {
    if state.turn_running {
        let doing = match state.writing_call {
            Some(bytes) => format!("chat writing a tool call ({})", size(bytes)),
            None => "chat working".to_string(),
        };
        spans.push(Span::styled(
            format!(" · {} {doing} (Esc cancels)", theme::spinner(now)),
            theme::bold(),
        ));
    }
    if let Some((attempt, wait_ms, reason)) = &state.retry {
        spans.push(Span::styled(
            format!(
                " · ⟳ model: {reason}, retry {attempt} in {:.1} s",
                *wait_ms as f64 / 1000.0
            ),
            theme::warning(),
        ));
    }
    let cancelling = state.cancelling();
    if cancelling > 0 {
        spans.push(Span::styled(
            format!(" · ⊘ {cancelling} cancelling (Esc again ends it now)"),
            theme::warning(),
        ));
    }
    let (running, queued) = (state.running() - state.queued(), state.queued());
    if running > 0 {
        spans.push(Span::styled(format!(" · {running} running"), theme::bold()));
    }
    let needs_you = state.needs_you();
    if needs_you > 0 {
        spans.push(Span::styled(
            format!(
                " · ? {needs_you} need{} you",
                if needs_you == 1 { "s" } else { "" }
            ),
            Style::default()
                .fg(theme::NEEDS_YOU)
                .add_modifier(Modifier::BOLD),
        ));
    }
    if queued > 0 {
        spans.push(Span::styled(format!(" · {queued} queued"), theme::dim()));
    }
    if let Some(total) = state.usage_total() {
        spans.push(Span::styled(
            format!(" · agents {}", cells::total_text(&total)),
            theme::dim(),
        ));
    }
}

/// `bytes` for the status line: "812 B", "1.2 KB", "3.4 MB".
fn size(bytes: u64) -> String {
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1024 * 1024 => format!("{:.1} KB", b as f64 / 1024.0),
        b => format!("{:.1} MB", b as f64 / (1024.0 * 1024.0)),
    }
}

/// The hints of `keys` (`a · b · c`) that fit in `room` columns with their
/// leading ` · `: the last hint first, then the others in order while they
/// fit; shown in their order.
fn fitting_hints(keys: &str, room: usize) -> String {
    let hints: Vec<&str> = keys.split(" · ").filter(|h| !h.is_empty()).collect();
    let Some((last, rest)) = hints.split_last() else {
        return String::new();
    };
    let width = |h: &str| super::wrap::text_width(h) + 3;
    let mut left = room.saturating_sub(width(last));
    if width(last) > room {
        return String::new();
    }
    let mut kept: Vec<&str> = Vec::new();
    for hint in rest {
        if width(hint) <= left {
            left -= width(hint);
            kept.push(hint);
        }
    }
    kept.push(last);
    kept.join(" · ")
}

fn owned(span: Span<'_>) -> Span<'static> {
    Span::styled(span.content.into_owned(), span.style)
}
