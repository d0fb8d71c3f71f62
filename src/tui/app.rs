//! The app: state, view and mode (its keys in `keys`), and the main loop
//! that is generic over ratatui's backend (a real terminal or `TestBackend`).

use std::time::{Duration, Instant};

use ratatui::crossterm::event::{KeyEvent, MouseEvent};
use ratatui::text::Span;
use ratatui::{Frame, Terminal, backend::Backend};
use tokio::sync::mpsc;

use super::composer::Composer;
use super::history::History;
use super::replay::Player;
use super::state::State;
use super::theme;
use super::view::{self, Chrome, View};
use crate::event::{Op, Stamped};

mod keys;

/// Input from the person at the terminal.
#[derive(Debug, Clone)]
pub enum Input {
    Key(KeyEvent),
    Mouse(MouseEvent),
    Paste(String),
    Resize,
    /// The terminal gained (`true`) or lost the focus.
    Focus(bool),
    /// SIGTERM or SIGHUP: quit now.
    Quit,
    /// The terminal hung up: quit now, drawing nothing more.
    HungUp,
}

/// The shortest time between two frames drawn for engine events or
/// animation: at most 30 frames a second (Ink, which draws Claude Code and
/// Gemini CLI, caps its frames there too). Streamed text reads as smooth,
/// and many agents streaming cost half the drawing of 60. A key, a paste
/// or a resize draws at once, whatever the budget.
pub const FRAME: Duration = Duration::from_nanos(1_000_000_000 / FRAMES_A_SECOND);
/// Frames a second at most, for engine events and animation.
pub const FRAMES_A_SECOND: u64 = 30;
/// Rows a mouse wheel notch scrolls.
const WHEEL_ROWS: isize = 3;

enum Mode {
    /// An interactive session: a composer, and the real clock.
    Live {
        composer: Composer,
        started: Instant,
        ops: mpsc::UnboundedSender<Op>,
    },
    /// A transcript replaying on the player's clock.
    Replay(Player),
    /// A session another process records, followed as it grows
    /// (`quorum watch`): read-only, its clock the last event's plus the
    /// time since it came.
    Watch {
        /// The session's name, for the status line.
        name: String,
        /// When the last event came.
        arrived: Instant,
    },
    /// A still picture: time stands at the last event (screenshots).
    Still,
}

/// What drawing has cost so far (for `scripts/soak.sh`, via the log).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameStats {
    /// Frames drawn.
    pub frames: u64,
    /// The slowest frame, from building it to flushing it.
    pub worst: Duration,
    /// All frames together.
    pub total: Duration,
}

pub struct App {
    pub state: State,
    pub view: View,
    mode: Mode,
    banner: Option<String>,
    quit: bool,
    /// The terminal is gone: nothing more is drawn.
    hung_up: bool,
    /// Ctrl+C with tasks running asked once; the next one quits.
    quit_asked: Option<String>,
    /// Ring the terminal bell when a task starts waiting for the person.
    bell: bool,
    /// A bell is due at the next frame.
    bell_due: bool,
    /// How many times the bell rang (tests look at it).
    pub bells: u64,
    /// Writes the bell to the terminal (the live terminal's writer).
    bell_writer: Option<Box<dyn FnMut() + Send>>,
    /// Desktop notifications, and what writes them to the terminal.
    desktop: Option<(super::notify::Desktop, super::notify::Write)>,
    /// The terminal size at the last frame.
    cols: u16,
    rows: u16,
    stats: FrameStats,
    /// The transcript of what is shown, which older boxes' detail is read
    /// back from when opened ([`App::set_transcript`]).
    transcript: Option<(std::path::PathBuf, u64)>,
    /// The agent last named for a findings view's follow-up.
    last_named: Option<String>,
    /// The banner to put back at the next key (a findings view's word on
    /// what it sent shows until then).
    banner_back: Option<Option<String>>,
}

impl App {
    fn with_mode(mode: Mode) -> Self {
        Self {
            state: State::new(),
            view: View::new(),
            mode,
            banner: None,
            quit: false,
            hung_up: false,
            quit_asked: None,
            bell: true,
            bell_due: false,
            bells: 0,
            bell_writer: None,
            desktop: None,
            cols: 0,
            rows: 0,
            stats: FrameStats::default(),
            transcript: None,
            last_named: None,
            banner_back: None,
        }
    }

    /// The transcript at `path` holds every event shown (recorded from
    /// the session's start, or replayed from it): only the newest
    /// finished boxes keep their detail in memory, and an older one's is
    /// read back from `path` (its lines at most `max_line` bytes, as the
    /// config's limits say) when the person opens it. Call it before any
    /// event is applied.
    pub fn set_transcript(&mut self, path: &std::path::Path, max_line: u64) {
        self.transcript = Some((path.to_path_buf(), max_line));
        self.state.keep_detail(super::state::DETAIL_WINDOW);
    }

    /// Reads the detail of the box at `index` back from the transcript if
    /// it let it go; says so on the status line when it cannot.
    fn read_back(&mut self, index: usize) {
        if !self.state.detail_spilled(index) {
            return;
        }
        let (Some((path, max_line)), Some(super::state::CellKind::Subagent(b))) = (
            &self.transcript,
            self.state.cells.get(index).map(|c| &c.kind),
        ) else {
            return;
        };
        match super::readback::detail(path, *max_line, b) {
            Ok((log, terminals)) => self.state.restore_detail(index, log, terminals),
            Err(e) => {
                tracing::warn!("reading a box's detail back: {e}");
                self.banner = Some(format!("this call's detail could not be read back: {e}"));
            }
        }
    }

    /// An interactive session: the person's commands go to `ops`.
    pub fn live(ops: mpsc::UnboundedSender<Op>, started: Instant) -> Self {
        Self::with_mode(Mode::Live {
            composer: Composer::default(),
            started,
            ops,
        })
    }

    /// A replay driven by `player`.
    pub fn replay(player: Player) -> Self {
        Self::with_mode(Mode::Replay(player))
    }

    /// A session followed as another process records it: its events
    /// come on the loop's event channel.
    pub fn watch(name: impl Into<String>) -> Self {
        Self::with_mode(Mode::Watch {
            name: name.into(),
            arrived: Instant::now(),
        })
    }

    /// A still picture of applied events.
    pub fn still() -> Self {
        Self::with_mode(Mode::Still)
    }

    /// Where the messages sent are kept for ↑/↓ (the history file, shared
    /// by every session of this person); without it, only in memory.
    pub fn set_history(&mut self, path: &std::path::Path) {
        if let Mode::Live { composer, .. } = &mut self.mode {
            *composer = Composer::new(History::open(path, super::history::CAP));
        }
    }

    pub fn set_banner(&mut self, banner: Option<String>) {
        self.banner = banner;
    }

    pub fn quitting(&self) -> bool {
        self.quit
    }

    /// Whether the bell rings when a task starts waiting (config `bell`).
    pub fn set_bell(&mut self, on: bool) {
        self.bell = on;
    }

    /// How the bell reaches the terminal: written between frames by the
    /// loop, through the terminal's own writer.
    pub fn set_bell_writer(&mut self, writer: Box<dyn FnMut() + Send>) {
        self.bell_writer = Some(writer);
    }

    /// Desktop notifications (`[notify] desktop`), written by `write`
    /// (the terminal's own writer) between frames while the terminal does
    /// not have the focus.
    pub fn set_desktop(&mut self, desktop: super::notify::Desktop, write: super::notify::Write) {
        self.desktop = Some((desktop, write));
    }

    /// The terminal gained or lost the focus.
    pub(super) fn focus(&mut self, focused: bool) {
        if let Some((desktop, _)) = &mut self.desktop {
            desktop.focus(focused);
        }
    }

    /// What is due after a frame: the bell, desktop notifications.
    pub fn alert(&mut self) {
        self.ring_bell();
        if let Some((desktop, write)) = &mut self.desktop {
            for sequence in desktop.take() {
                write(&sequence);
            }
        }
    }

    /// Rings the bell if one is due (called by the loop after a frame).
    pub fn ring_bell(&mut self) {
        // A request answered by policy at once is waiting no more: no bell.
        if std::mem::take(&mut self.bell_due) && self.bell && self.state.needs_you() > 0 {
            self.bells += 1;
            if let Some(write) = &mut self.bell_writer {
                write();
            }
        }
    }

    /// Frames drawn by [`run`] so far and what they cost.
    pub fn frame_stats(&self) -> FrameStats {
        self.stats
    }

    /// The time the screen shows, in ms since the session started.
    pub fn now(&self) -> u64 {
        let clock = match &self.mode {
            Mode::Live { started, .. } => started.elapsed().as_millis() as u64,
            Mode::Replay(p) => p.clock(Instant::now()),
            Mode::Watch { arrived, .. } => self.state.now + arrived.elapsed().as_millis() as u64,
            Mode::Still => 0,
        };
        clock.max(self.state.now)
    }

    /// Applies a continued session's recorded events: the screen shows
    /// where it was, and nothing of it rings the bell again.
    pub fn on_earlier(&mut self, events: &[Stamped]) {
        for event in events {
            self.state.apply(event);
        }
    }

    /// Starts from `earlier`'s state, if the continued session's events
    /// were taken up there ahead of the screen ([`Earlier::hook`]), as
    /// [`App::on_earlier`] would take them up: after
    /// [`App::set_transcript`] (a continued session is recorded to its own
    /// transcript), before any other event.
    ///
    /// [`Earlier::hook`]: super::earlier::Earlier::hook
    pub fn take_earlier(&mut self, earlier: &super::earlier::Earlier) {
        if let Some(state) = earlier.take() {
            debug_assert!(self.transcript.is_some() && self.state.applied == 0);
            self.state = state;
        }
    }

    /// Applies one event from the engine or the player.
    pub fn on_event(&mut self, event: Stamped) {
        if let Mode::Watch { arrived, .. } = &mut self.mode {
            *arrived = Instant::now();
        }
        let waiting = self.state.needs_you();
        // A follow-up reopens a box: its earlier detail comes back first.
        if let crate::event::Event::SubagentFollowup { call_id, .. } = &event.event
            && let Some(i) = self.state.box_index(call_id)
        {
            self.read_back(i);
        }
        self.state.apply(&event);
        // A task started waiting for the person: the bell, once (live only).
        if self.state.needs_you() > waiting && matches!(self.mode, Mode::Live { .. }) {
            self.bell_due = true;
        }
        if matches!(self.mode, Mode::Live { .. }) {
            self.sync_form();
            if let Some((desktop, _)) = &mut self.desktop {
                desktop.observe(&event.event);
            }
        }
    }

    /// The draft of an answer follows the newest question open in a box:
    /// a new question gets a fresh draft, an answered one loses it.
    fn sync_form(&mut self) {
        match (self.state.pending_question(), &self.view.form) {
            (Some((call, q)), Some(draft)) if draft.answers(&call, q) => {}
            (Some((call, q)), _) => {
                self.view.form = Some(super::form::FormDraft::new(&call, q));
            }
            (None, _) => self.view.form = None,
        }
    }

    /// Whether something on screen moves with time alone (spinners,
    /// elapsed times).
    fn animating(&self) -> bool {
        match &self.mode {
            Mode::Still => false,
            Mode::Replay(p) => self.state.running() > 0 && !p.paused() && !p.finished(),
            Mode::Live { .. } | Mode::Watch { .. } => {
                self.state.running() > 0 || self.state.turn_running
            }
        }
    }

    /// The animation step the screen shows now: the spinner's frame, which
    /// also paces elapsed times; `None` when nothing animates. The loop
    /// redraws for time alone only when this changes.
    pub fn animation(&self) -> Option<u64> {
        self.animating()
            .then(|| self.now() / theme::SPINNER_FRAME_MS)
    }

    /// When the loop must wake up with no input: the next replayed event,
    /// or the next animation step.
    pub fn deadline(&self) -> Option<Instant> {
        let tick = self.animating().then(|| {
            let step = theme::SPINNER_FRAME_MS;
            let wait = match &self.mode {
                // The next turn of the spinner on the session clock.
                Mode::Live { .. } | Mode::Watch { .. } => step - self.now() % step,
                // The player's clock runs at its speed: check each step.
                _ => step,
            };
            Instant::now() + Duration::from_millis(wait)
        });
        let due = match &self.mode {
            Mode::Replay(p) => p.deadline(),
            _ => None,
        };
        match (tick, due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Plays replayed events that are due.
    pub fn on_timer(&mut self) {
        let now = Instant::now();
        while let Mode::Replay(p) = &mut self.mode {
            let Some(event) = p.due(now) else { break };
            self.on_event(event);
        }
    }

    /// The columns the composer's text wraps at (the screen's width less
    /// its prompt), as the view draws it.
    fn composer_width(&self) -> usize {
        match self.cols {
            // Not drawn yet: no wrapping.
            0 => usize::MAX / 2,
            cols => view::composer_width(cols),
        }
    }

    fn status(&self) -> (Vec<Span<'static>>, &'static str) {
        match &self.mode {
            Mode::Replay(_) if self.view.findings.is_some() => {
                (vec![Span::styled("findings view", theme::bold())], "q back")
            }
            Mode::Replay(p) => {
                let (mark, word) = if p.finished() {
                    ("■", "replay done")
                } else if p.paused() {
                    ("⏸", "replay paused")
                } else {
                    ("▶", "replay")
                };
                let spans = vec![
                    Span::styled(format!("{mark} {word}"), theme::bold()),
                    Span::raw(format!(
                        " {}x · event {}/{}",
                        fmt_speed(p.speed()),
                        p.position(),
                        p.total()
                    )),
                ];
                (
                    spans,
                    "space pause · n step · +/- speed · e skip to end · PgUp/PgDn scroll · End follow · t tasks · q quit",
                )
            }
            Mode::Watch { name, .. } => {
                let spans = vec![
                    Span::styled("◉ watching", theme::bold()),
                    Span::raw(format!(" {name} · {} events", self.state.applied)),
                ];
                if self.view.findings.is_some() {
                    return (spans, "findings view · q back");
                }
                if self.view.opened.is_some() {
                    return (spans, "↑/↓ PgUp/PgDn scroll · Esc back");
                }
                (
                    spans,
                    "Alt+↑/↓ boxes · Enter open · PgUp/PgDn scroll · End follow · t tasks · q quit",
                )
            }
            _ => {
                let model = self.state.model.as_deref().unwrap_or("no model");
                let agents = if self.state.agents.is_empty() {
                    "no agents".to_string()
                } else {
                    self.state.agents.join(", ")
                };
                let mut spans = vec![
                    Span::styled("quorum", theme::bold()),
                    Span::raw(format!(" · {model} · {agents}")),
                ];
                if self.state.input_tokens + self.state.output_tokens > 0 {
                    spans.push(Span::styled(
                        format!(
                            " · {}↑ {}↓ tokens",
                            self.state.input_tokens, self.state.output_tokens
                        ),
                        theme::dim(),
                    ));
                }
                if let Some(span) = spending_span(&self.state.spending) {
                    spans.push(span);
                }
                let question = self.view.form.as_ref().and(self.state.pending_question());
                let keys = match self.mode {
                    _ if self.view.findings.is_some() => "findings view · q back",
                    Mode::Live { .. } if self.view.opened.is_some() => {
                        "↑/↓ PgUp/PgDn scroll · Esc back"
                    }
                    Mode::Live { .. } if self.view.panel_focus.is_some() => {
                        "↑/↓ select · Enter open · m message · c cancel · Esc back"
                    }
                    Mode::Live { .. } if let Some((_, q)) = question => super::form::keys(q),
                    Mode::Live { .. } if self.view.focus.is_some() => {
                        "Enter open box · Alt+↑/↓ move · Esc back"
                    }
                    Mode::Live { .. } => {
                        "Enter send · Esc cancel agent · Alt+↑/↓ boxes · Tab tasks · PgUp/PgDn scroll · Ctrl+T panel · Ctrl+C quit"
                    }
                    _ => "",
                };
                (spans, keys)
            }
        }
    }

    /// Draws the whole screen.
    pub fn draw(&mut self, frame: &mut Frame<'_>) {
        self.cols = frame.area().width;
        self.rows = frame.area().height;
        let now = self.now();
        let (status, keys) = self.status();
        let composer = match &self.mode {
            Mode::Live { composer, .. } => Some(view::ComposerChrome {
                text: composer.text(),
                cursor: composer.cursor(),
                hint: composer.hint(),
            }),
            _ => None,
        };
        let chrome = Chrome {
            composer,
            status,
            keys,
            banner: self.quit_asked.as_deref().or(self.banner.as_deref()),
        };
        view::draw(frame, &self.state, &mut self.view, &chrome, now);
    }
}

fn fmt_speed(speed: f64) -> String {
    if speed >= 1.0 {
        format!("{speed:.0}")
    } else {
        format!("{speed}")
    }
}

/// The main loop: applies input, engine events and replayed events as
/// they come, and draws when the screen changed.
///
/// Frames are coalesced: engine events and animation draw at most one
/// frame per [`FRAME`], and nothing is drawn when nothing changed (the
/// spinner and elapsed times redraw only when their frame or second
/// turns). Input is applied before any waiting event and drawn at once:
/// a key never waits behind a frame budget. Returns when the person quits
/// or `inputs` closes.
pub async fn run<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    inputs: &mut mpsc::UnboundedReceiver<Input>,
    events: &mut mpsc::UnboundedReceiver<Stamped>,
) -> Result<(), super::ScreenError>
where
    B::Error: Send + Sync + 'static,
{
    let mut events_open = true;
    // Something changed since the last frame; `urgent`: input, draw now.
    let (mut dirty, mut urgent) = (true, true);
    let mut last_frame: Option<Instant> = None;
    let mut shown = None;
    // The events applied when the screen was last looked at: one the wait
    // below takes is applied there, and counts at the next look.
    let mut applied = app.state.applied;
    loop {
        app.on_timer();
        // What the engine sent while a frame was held back.
        while events_open {
            match events.try_recv() {
                Ok(event) => app.on_event(event),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => events_open = false,
            }
        }
        let animation = app.animation();
        if animation != shown || app.state.applied != applied {
            dirty = true;
        }
        applied = app.state.applied;
        let due = last_frame.map(|t| t + FRAME);
        if dirty && !app.hung_up && (urgent || due.is_none_or(|d| Instant::now() >= d)) {
            frame(terminal, app)?;
            app.alert();
            last_frame = Some(Instant::now());
            shown = animation;
            (dirty, urgent) = (false, false);
        }
        if app.quitting() {
            return Ok(());
        }
        // A frame held back by the budget: engine events wait in the
        // channel until it is due (one wake-up a frame, not one an event).
        let held = dirty.then_some(due).flatten();
        let deadline = match (app.deadline(), held) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        tokio::select! {
            biased;
            input = inputs.recv() => match input {
                Some(input) => {
                    app.handle(input);
                    // Apply keys typed ahead before drawing again.
                    while !app.quitting() && let Ok(input) = inputs.try_recv() {
                        app.handle(input);
                    }
                    (dirty, urgent) = (true, true);
                }
                None => {
                    // No more input: apply what the engine already sent, then stop.
                    while let Ok(event) = events.try_recv() {
                        app.on_event(event);
                    }
                    if !app.hung_up {
                        frame(terminal, app)?;
                        app.alert();
                    }
                    return Ok(());
                }
            },
            event = events.recv(), if events_open && held.is_none() => match event {
                Some(event) => app.on_event(event),
                None => events_open = false,
            },
            _ = sleep_until(deadline), if deadline.is_some() => {}
        }
    }
}

/// Draws one frame and counts it.
fn frame<B: Backend>(terminal: &mut Terminal<B>, app: &mut App) -> Result<(), super::ScreenError>
where
    B::Error: Send + Sync + 'static,
{
    let start = Instant::now();
    terminal
        .draw(|frame| app.draw(frame))
        .map_err(super::ScreenError::draw)?;
    let took = start.elapsed();
    app.stats.frames += 1;
    app.stats.worst = app.stats.worst.max(took);
    app.stats.total += took;
    Ok(())
}

async fn sleep_until(deadline: Option<Instant>) {
    if let Some(d) = deadline {
        tokio::time::sleep_until(d.into()).await;
    }
}

/// The session's spending on the status line: its total without a cap
/// (` · Σ ~$0.42`: the chat, every agent, nested sub-agents), or against
/// its caps (` · cap $1.20 of $1.00`): dim, yellow past 80 % of a cap, red
/// once one is reached.
fn spending_span(s: &crate::tui::state::Spending) -> Option<Span<'static>> {
    let tokens = |n: u64| crate::tui::cells::tokens(n as i64);
    let mut parts = Vec::new();
    if let Some(cap) = s.caps.session_usd {
        parts.push(format!("{} of ${cap:.2}", s.spent.cost_text()));
    }
    if let Some(cap) = s.caps.tokens {
        parts.push(format!(
            "{} of {} tokens",
            tokens(s.spent.tokens),
            tokens(cap)
        ));
    }
    if parts.is_empty() {
        return (s.spent.cost > 0.0)
            .then(|| Span::styled(format!(" · Σ {}", s.spent.cost_text()), theme::dim()));
    }
    let text = format!(" · cap {}", parts.join(", "));
    let style = match s.share_of_cap() {
        _ if s.reached => ratatui::style::Style::default().fg(theme::RED),
        Some(share) if share >= 0.8 => ratatui::style::Style::default().fg(theme::YELLOW),
        _ => theme::dim(),
    };
    Some(Span::styled(text, style))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A screen that took a recorded session's events up itself.
    fn applied(events: &[Stamped], ops: mpsc::UnboundedSender<Op>) -> App {
        let mut app = App::live(ops, Instant::now());
        app.set_transcript(std::path::Path::new("session.jsonl"), 1 << 20);
        app.on_earlier(events);
        app
    }

    /// The same screen, from what [`Earlier::hook`] took up elsewhere.
    ///
    /// [`Earlier::hook`]: super::super::earlier::Earlier::hook
    fn taken(events: &[Stamped], ops: mpsc::UnboundedSender<Op>) -> App {
        let earlier = super::super::earlier::Earlier::default();
        let hook = earlier.hook();
        std::thread::scope(|s| {
            s.spawn(|| hook(events));
        });
        let mut app = App::live(ops, Instant::now());
        app.set_transcript(std::path::Path::new("session.jsonl"), 1 << 20);
        app.take_earlier(&earlier);
        assert!(earlier.take().is_none(), "taken once");
        app
    }

    #[test]
    fn earlier_events_taken_up_ahead_make_the_same_screen() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for file in [
            "assets/demo.jsonl",
            "tests/fixtures/batch.jsonl",
            "tests/fixtures/quorum.jsonl",
            "tests/fixtures/colours.jsonl",
            "tests/fixtures/wide.jsonl",
        ] {
            let events = crate::transcript::load(&root.join(file)).unwrap().events;
            let (ops, _keep) = mpsc::unbounded_channel();
            let (mut a, mut b) = (applied(&events, ops.clone()), taken(&events, ops));
            assert_eq!(a.state.applied, b.state.applied, "{file}");
            assert_eq!(
                format!("{:?}", (&a.state.cells, &a.state.tasks, a.state.now)),
                format!("{:?}", (&b.state.cells, &b.state.tasks, b.state.now)),
                "{file}"
            );
            for (cols, rows) in [(120, 40), (80, 24)] {
                let (x, y) = (
                    super::super::screenshot::render(&mut a, cols, rows),
                    super::super::screenshot::render(&mut b, cols, rows),
                );
                assert_eq!(x, y, "{file} at {cols}x{rows}");
            }
        }
    }
}
