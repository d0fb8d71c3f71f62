//! The session picker of `quorum --resume`: a full-screen list of recorded
//! sessions, newest first; Enter picks one, Esc leaves.
//!
//! Each row: when its last event was (`5m ago`), its events, the agents it
//! used, (its directory,) and its first message; a session whose tasks
//! were still running when it ended, or that another quorum has open, says
//! so. Keys: ↑/↓ or k/j, PgUp/PgDn, Home/End (g/G), Enter; Esc, q or
//! Ctrl+C cancel. The loop is generic over ratatui's backend like the
//! app's; [`Picker::render`] draws into any buffer (tests use
//! `TestBackend`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use ratatui::Terminal;
use ratatui::backend::Backend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEventKind};
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use tokio::sync::mpsc;

use super::app::Input;
use super::theme;
use super::wrap::{char_width, text_width};
use crate::confine::sanitize::sanitize;
use crate::transcript::sessions::{SessionInfo, ago};

/// What the picker shows besides the sessions.
#[derive(Debug, Clone)]
pub struct PickOptions {
    /// The top line, e.g. `Sessions of /home/me/project`.
    pub title: String,
    /// A column with each session's directory (`--all`).
    pub show_dirs: bool,
    /// The time "5m ago" counts from.
    pub now: SystemTime,
}

impl PickOptions {
    /// This directory's sessions, counted from now.
    pub fn new(title: impl Into<String>) -> Self {
        Self {
            title: title.into(),
            show_dirs: false,
            now: SystemTime::now(),
        }
    }
}

/// The list and its selection.
pub struct Picker {
    sessions: Vec<SessionInfo>,
    options: PickOptions,
    selected: usize,
    /// The first session shown.
    offset: usize,
    /// Rows of sessions the last frame had room for.
    page: usize,
}

/// Width of the time column (`2026-12-01`, `59m ago`).
const WHEN: usize = 10;
const EVENTS: usize = 7;
const AGENTS: usize = 18;

impl Picker {
    pub fn new(sessions: Vec<SessionInfo>, options: PickOptions) -> Self {
        Self {
            sessions,
            options,
            selected: 0,
            offset: 0,
            page: 1,
        }
    }

    /// The session under the cursor.
    pub fn selected(&self) -> Option<&SessionInfo> {
        self.sessions.get(self.selected)
    }

    /// Takes one input. `Some(choice)` when the picker is done: the
    /// transcript picked, or `None` for cancelled.
    pub fn handle(&mut self, input: &Input) -> Option<Option<PathBuf>> {
        match input {
            Input::Quit | Input::HungUp => Some(None),
            Input::Key(key) => self.key(key),
            Input::Mouse(m) => {
                match m.kind {
                    MouseEventKind::ScrollUp => self.move_by(-1),
                    MouseEventKind::ScrollDown => self.move_by(1),
                    _ => {}
                }
                None
            }
            Input::Paste(_) | Input::Resize | Input::Focus(_) => None,
        }
    }

    fn key(&mut self, key: &KeyEvent) -> Option<Option<PathBuf>> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        let page = self.page.max(1) as isize;
        match key.code {
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                return Some(None);
            }
            KeyCode::Esc | KeyCode::Char('q') => return Some(None),
            KeyCode::Enter => {
                if let Some(s) = self.selected() {
                    return Some(Some(s.path.clone()));
                }
            }
            KeyCode::Up | KeyCode::Char('k') => self.move_by(-1),
            KeyCode::Down | KeyCode::Char('j') => self.move_by(1),
            KeyCode::PageUp => self.move_by(-page),
            KeyCode::PageDown => self.move_by(page),
            KeyCode::Home | KeyCode::Char('g') => self.selected = 0,
            KeyCode::End | KeyCode::Char('G') => {
                self.selected = self.sessions.len().saturating_sub(1);
            }
            _ => {}
        }
        None
    }

    fn move_by(&mut self, delta: isize) {
        let last = self.sessions.len().saturating_sub(1);
        self.selected = self.selected.saturating_add_signed(delta).min(last);
    }

    /// Draws the whole picker into `area` of `buf`. Keeps the selection
    /// in view (the only state it changes).
    pub fn render(&mut self, area: Rect, buf: &mut Buffer) {
        if area.height == 0 || area.width == 0 {
            return;
        }
        let width = area.width as usize;
        let row = |i: u16| Rect::new(area.x, area.y + i, area.width, 1);
        let count = self.sessions.len();
        let title = Line::from(vec![
            Span::styled(clip(&sanitize(&self.options.title), width), theme::bold()),
            Span::styled(
                format!(" · {count} session{}", if count == 1 { "" } else { "s" }),
                theme::dim(),
            ),
        ]);
        buf.set_line(area.x, area.y, &title, area.width);
        if area.height < 3 {
            return;
        }
        let help = "↑/↓ move · PgUp/PgDn page · Enter resume · Esc cancel";
        buf.set_line(
            area.x,
            area.y + area.height - 1,
            &Line::styled(clip(help, width), theme::dim()),
            area.width,
        );
        let list = area.height.saturating_sub(3);
        if list == 0 {
            return;
        }
        if count == 0 {
            buf.set_line(
                area.x,
                area.y + 2,
                &Line::styled("  no sessions recorded", theme::dim()),
                area.width,
            );
            return;
        }
        buf.set_line(
            area.x,
            area.y + 1,
            &Line::styled(clip(&self.heading(width), width), theme::dim()),
            area.width,
        );
        self.page = list as usize;
        self.selected = self.selected.min(count - 1);
        if self.selected < self.offset {
            self.offset = self.selected;
        } else if self.selected >= self.offset + self.page {
            self.offset = self.selected + 1 - self.page;
        }
        // No empty rows below the last session while earlier ones are
        // scrolled out.
        self.offset = self.offset.min(count.saturating_sub(self.page));
        for (n, i) in (self.offset..count).take(self.page).enumerate() {
            let selected = i == self.selected;
            let line = self.row(&self.sessions[i], selected, width);
            let at = row(2 + n as u16);
            buf.set_line(at.x, at.y, &line, at.width);
            if selected {
                buf.set_style(at, Style::default().add_modifier(Modifier::REVERSED));
            }
        }
    }

    fn dir_width(&self, width: usize) -> usize {
        if self.options.show_dirs {
            (width / 4).clamp(8, 32)
        } else {
            0
        }
    }

    fn heading(&self, width: usize) -> String {
        let mut text = format!(
            "  {:<WHEN$}  {:>EVENTS$}  {:<AGENTS$}  ",
            "LAST EVENT", "EVENTS", "AGENTS"
        );
        let dirs = self.dir_width(width);
        if dirs > 0 {
            text.push_str(&format!("{:<dirs$}  ", "DIRECTORY"));
        }
        text.push_str("FIRST MESSAGE");
        text
    }

    fn row(&self, s: &SessionInfo, selected: bool, width: usize) -> Line<'static> {
        let mut spans = vec![Span::raw(if selected { "› " } else { "  " })];
        spans.push(Span::raw(format!(
            "{:<WHEN$}  {:>EVENTS$}  ",
            ago(s.last_event, self.options.now),
            s.events
        )));
        let agents = if s.agents.is_empty() {
            "-".to_string()
        } else {
            sanitize(&s.agents.join(", ")).into_owned()
        };
        spans.push(Span::raw(pad(&clip(&agents, AGENTS), AGENTS)));
        spans.push(Span::raw("  "));
        let dirs = self.dir_width(width);
        if dirs > 0 {
            spans.push(Span::raw(pad(&clip_left(&sanitize(&s.cwd), dirs), dirs)));
            spans.push(Span::raw("  "));
        }
        if let Some(pid) = s.open_in {
            spans.push(Span::styled(
                format!("open in process {pid} · "),
                theme::error(),
            ));
        }
        if !s.running_tasks.is_empty() {
            spans.push(Span::styled(
                format!("{} running · ", s.running_tasks.len()),
                theme::warning(),
            ));
        }
        let used: usize = spans.iter().map(|s| text_width(&s.content)).sum();
        let message = match &s.first_message {
            Some(m) => one_line(&sanitize(m)),
            None => "(no message)".to_string(),
        };
        spans.push(Span::styled(
            clip(&message, width.saturating_sub(used)),
            if s.first_message.is_some() {
                Style::default()
            } else {
                theme::dim()
            },
        ));
        Line::from(spans)
    }
}

/// Sanitised text may still hold newlines: one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` in at most `width` cells, ending in `…` when cut.
fn clip(text: &str, width: usize) -> String {
    if text_width(text) <= width {
        return text.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = char_width(c);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    if width > 0 {
        out.push('…');
    }
    out
}

/// `text` in at most `width` cells, keeping its end (`…/src/project`).
fn clip_left(text: &str, width: usize) -> String {
    if text_width(text) <= width {
        return text.to_string();
    }
    let mut kept = Vec::new();
    let mut used = 0;
    for c in text.chars().rev() {
        let w = char_width(c);
        if used + w + 1 > width {
            break;
        }
        kept.push(c);
        used += w;
    }
    let mut out = String::from("…");
    out.extend(kept.into_iter().rev());
    out
}

/// `text` padded with spaces to `width` cells.
fn pad(text: &str, width: usize) -> String {
    let w = text_width(text);
    format!("{text}{}", " ".repeat(width.saturating_sub(w)))
}

/// Shows the picker on `terminal` until a session is picked (its
/// transcript) or the picker is cancelled (`None`: Esc, q, Ctrl+C,
/// SIGTERM, or the inputs closed).
pub async fn pick<B: Backend>(
    sessions: Vec<SessionInfo>,
    options: PickOptions,
    terminal: &mut Terminal<B>,
    inputs: &mut mpsc::UnboundedReceiver<Input>,
) -> Result<Option<PathBuf>, super::ScreenError>
where
    B::Error: Send + Sync + 'static,
{
    let mut picker = Picker::new(sessions, options);
    loop {
        terminal
            .draw(|frame| picker.render(frame.area(), frame.buffer_mut()))
            .map_err(super::ScreenError::draw)?;
        let Some(input) = inputs.recv().await else {
            return Ok(None);
        };
        if let Some(choice) = picker.handle(&input) {
            return Ok(choice);
        }
        // Keys typed ahead before drawing again.
        while let Ok(input) = inputs.try_recv() {
            if let Some(choice) = picker.handle(&input) {
                return Ok(choice);
            }
        }
    }
}

/// [`pick`] on the real terminal: enters it, and restores it before
/// returning. Its reader of terminal events ends with it, so a TUI started
/// afterwards gets every key.
pub async fn pick_on_terminal(
    sessions: Vec<SessionInfo>,
    options: PickOptions,
) -> Result<Option<PathBuf>, super::ScreenError> {
    let mut guard = super::terminal::TerminalGuard::enter().map_err(super::ScreenError::Setup)?;
    let (tx, mut inputs) = mpsc::unbounded_channel();
    let stop = Arc::new(AtomicBool::new(false));
    let hung_up = Arc::new(AtomicBool::new(false));
    let signal = {
        let tx = tx.clone();
        let hung_up = hung_up.clone();
        tokio::spawn(async move {
            let input = super::terminal::ended().await;
            hung_up.store(matches!(input, Input::HungUp), Ordering::Relaxed);
            let _ = tx.send(input);
        })
    };
    let reader = {
        let stop = stop.clone();
        std::thread::spawn(move || read_inputs(&tx, &stop))
    };
    let result = pick(sessions, options, &mut guard.terminal, &mut inputs).await;
    stop.store(true, Ordering::Relaxed);
    signal.abort();
    // A reader on a terminal that hung up never returns (crossterm reads
    // nothing from it on and on): it ends with quorum.
    if !hung_up.load(Ordering::Relaxed) {
        let _ = tokio::task::spawn_blocking(move || reader.join()).await;
    }
    drop(guard);
    result
}

/// Terminal events as [`Input`], until `stop` is set (looked at every
/// 50 ms) or nobody listens.
fn read_inputs(tx: &mpsc::UnboundedSender<Input>, stop: &AtomicBool) {
    use ratatui::crossterm::event;
    while !stop.load(Ordering::Relaxed) {
        match event::poll(Duration::from_millis(50)) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(_) => return,
        }
        let input = match event::read() {
            Ok(event::Event::Key(k)) => Input::Key(k),
            Ok(event::Event::Mouse(m)) => Input::Mouse(m),
            Ok(event::Event::Resize(..)) => Input::Resize,
            Ok(_) => continue,
            Err(_) => return,
        };
        if tx.send(input).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipping_keeps_the_width() {
        assert_eq!(clip("hello", 10), "hello");
        assert_eq!(clip("hello world", 6), "hello…");
        assert_eq!(clip("日本語です", 5), "日本…");
        assert_eq!(clip_left("/home/me/project", 9), "…/project");
        assert_eq!(pad("ab", 4), "ab  ");
    }
}
