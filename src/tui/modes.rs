//! The screen's modes, as the commands start them (`cli`): a live session
//! on a real terminal, a replay, a session followed as it is recorded
//! (`quorum watch`), and a still screenshot with no terminal; and the
//! session picker of `quorum --resume`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use ratatui::crossterm::event::{KeyCode, KeyEvent};
use tokio::sync::mpsc;

use super::ScreenError;
use super::app::{self, App, Input};
use super::earlier::Earlier;
use super::replay::Player;
use super::screenshot::{self, Format};
use super::terminal::{TerminalGuard, spawn_input_reader};
use crate::event::{Op, Stamped};
use crate::transcript;

type Result<T, E = ScreenError> = std::result::Result<T, E>;

/// The TUI needs a terminal on both ends.
pub fn require_terminal() -> Result<()> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(ScreenError::NoTerminal);
    }
    Ok(())
}

/// The files an interactive session keeps.
pub struct Files {
    /// The messages sent, for ↑/↓ (every session of this person's).
    pub history: Option<PathBuf>,
    /// The file the session is recorded to from its start: older boxes'
    /// detail is read back from it when opened.
    pub transcript: Option<PathBuf>,
    /// The longest transcript line read back (`[limits]` in the config).
    pub max_line: u64,
}

impl Files {
    pub fn new(history: Option<PathBuf>, transcript: Option<PathBuf>, max_line: u64) -> Self {
        Self {
            history,
            transcript,
            max_line,
        }
    }
}

/// An interactive session: commands go to `ops`, `events` are drawn,
/// after a continued session's recorded events, taken up in `earlier`.
/// Returns when the person quits (or SIGTERM, SIGHUP), the terminal
/// restored. `alerts`: the bell when a task starts waiting, and desktop
/// notifications while the terminal does not have the focus; `files`: where the messages sent are kept, and the session's
/// transcript.
pub async fn live(
    ops: mpsc::UnboundedSender<Op>,
    mut events: mpsc::UnboundedReceiver<Stamped>,
    earlier: Earlier,
    started: Instant,
    alerts: super::notify::Alerts,
    files: Files,
) -> Result<()> {
    let mut app = App::live(ops, started);
    if let Some(path) = &files.transcript {
        app.set_transcript(path, files.max_line);
    }
    // A continued session's conversation shows at once.
    app.take_earlier(&earlier);
    app.set_bell(alerts.bell);
    let target = super::notify::Target::detect(|name| std::env::var(name).ok());
    if let (Some(kinds), Some(target)) = (alerts.desktop, target) {
        let desktop = super::notify::Desktop::new(kinds, target);
        app.set_desktop(
            desktop,
            Box::new(|bytes| {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(bytes);
                let _ = out.flush();
            }),
        );
    }
    if let Some(path) = &files.history {
        app.set_history(path);
    }
    // The bell goes to the terminal's own writer, between frames.
    app.set_bell_writer(Box::new(|| {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(b"\x07");
        let _ = out.flush();
    }));
    let mut guard = TerminalGuard::enter().map_err(ScreenError::Setup)?;
    let mut inputs = spawn_input_reader();
    let result = match app::run(&mut guard.terminal, &mut app, &mut inputs, &mut events).await {
        // A frame drawn on a terminal that just hung up: quitting.
        Err(e) if super::terminal::is_hung_up() => {
            tracing::debug!("the terminal hung up: {e}");
            Ok(())
        }
        result => result,
    };
    let stats = app.frame_stats();
    tracing::debug!(
        frames = stats.frames,
        worst_frame_us = stats.worst.as_micros() as u64,
        total_draw_ms = stats.total.as_millis() as u64,
        "frame stats"
    );
    result
}

/// `quorum --resume` without an id: the person picks one of `root`'s
/// sessions (every directory's with `all`); `None` when they pick none.
pub async fn pick_session(sessions_dir: &Path, root: &Path, all: bool) -> Result<Option<PathBuf>> {
    use crate::transcript::sessions;
    let listing = sessions::list(sessions_dir)?;
    let listing = if all { listing } else { listing.in_dir(root) };
    if listing.sessions.is_empty() {
        return Err(ScreenError::NoSessions {
            root: root.to_path_buf(),
            all,
        });
    }
    let mut options = super::picker::PickOptions::new(if all {
        "Continue a session (every directory)".to_string()
    } else {
        format!(
            "Continue a session of {}",
            crate::confine::sanitize::sanitize(&root.display().to_string())
        )
    });
    options.show_dirs = all;
    super::picker::pick_on_terminal(listing.sessions, options).await
}

/// How to replay.
pub struct ReplayOptions {
    pub speed: f64,
    pub instant: bool,
    pub paused: bool,
    /// The side panel: `None` for automatic.
    pub panel: Option<bool>,
    /// The longest transcript line read.
    pub max_line: u64,
}

/// Plays a transcript in the terminal.
pub async fn replay(file: &Path, options: ReplayOptions) -> Result<()> {
    let loaded = transcript::load_capped(file, options.max_line)?;
    require_terminal()?;
    let warnings: Vec<String> = loaded.warnings.iter().map(|w| w.to_string()).collect();
    let mut player = Player::new(loaded.events, options.speed, Instant::now());
    if options.paused {
        player.set_paused(true, Instant::now());
    }
    let mut app = App::replay(player);
    app.set_transcript(file, options.max_line);
    app.view.set_panel(options.panel);
    app.set_banner(warnings.first().cloned());
    if options.instant {
        app.handle(Input::Key(KeyEvent::from(KeyCode::Char('e'))));
    }
    let (_events_tx, mut events_rx) = mpsc::unbounded_channel::<Stamped>();
    let mut guard = TerminalGuard::enter().map_err(ScreenError::Setup)?;
    let mut inputs = spawn_input_reader();
    let result = app::run(&mut guard.terminal, &mut app, &mut inputs, &mut events_rx).await;
    drop(guard);
    for w in warnings {
        crate::say!("warning: {w}");
    }
    result
}

/// How often a followed transcript is read for new lines.
const WATCH_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Follows a session another process records (`quorum mcp`, a TUI): its
/// boxes, panel and verdicts as they come, read-only. `max_line`: the
/// longest transcript line read.
pub async fn watch(file: &Path, panel: Option<bool>, max_line: u64) -> Result<()> {
    let mut follower = transcript::follow::Follower::open(file, max_line)?;
    let earlier = follower.poll()?;
    if follower.header().is_none() {
        return Err(ScreenError::NotYet {
            file: file.to_path_buf(),
        });
    }
    require_terminal()?;
    let name = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut app = App::watch(crate::confine::sanitize::sanitize(&name).into_owned());
    app.set_transcript(file, max_line);
    app.view.set_panel(panel);
    app.on_earlier(&earlier);
    drop(earlier);
    let (tx, mut events) = mpsc::unbounded_channel();
    let following = tokio::spawn(follow(follower, tx, WATCH_POLL));
    let mut guard = TerminalGuard::enter().map_err(ScreenError::Setup)?;
    let mut inputs = spawn_input_reader();
    let result = app::run(&mut guard.terminal, &mut app, &mut inputs, &mut events).await;
    following.abort();
    result
}

/// Sends the events appended to a followed transcript, read every `every`,
/// until the receiver goes. When the process writing it lets it go (or
/// takes it up again), a notice says so; a line that cannot be read is an
/// error shown on screen, and following stops.
pub async fn follow(
    mut follower: transcript::follow::Follower,
    tx: mpsc::UnboundedSender<Stamped>,
    every: std::time::Duration,
) {
    use crate::event::{Event, NoticeLevel};
    let path = follower.path().to_path_buf();
    let mut writer = transcript::sessions::open_in(&path);
    let mut polls: u64 = 0;
    loop {
        tokio::time::sleep(every).await;
        let events = match follower.poll() {
            Ok(events) => events,
            Err(e) => {
                let _ = tx.send(Stamped::new(
                    follower.last_t(),
                    Event::Error {
                        text: format!("{e}; no longer following it"),
                    },
                ));
                return;
            }
        };
        for event in events {
            if tx.send(event).is_err() {
                return;
            }
        }
        // Who writes it, checked every tenth poll.
        polls += 1;
        if !polls.is_multiple_of(10) {
            continue;
        }
        let now = transcript::sessions::open_in(&path);
        let text = match (writer, now) {
            (Some(pid), None) => Some(format!(
                "process {pid} stopped recording this session; nothing more is being added{}",
                if follower.mid_line() {
                    " (its last line was cut short)"
                } else {
                    ""
                }
            )),
            (None, Some(pid)) => Some(format!("process {pid} is recording this session again")),
            _ => None,
        };
        writer = now;
        if let Some(text) = text
            && tx
                .send(Stamped::new(
                    follower.last_t(),
                    Event::Notice {
                        level: NoticeLevel::Info,
                        text,
                    },
                ))
                .is_err()
        {
            return;
        }
    }
}

/// What to render headlessly.
pub struct ScreenshotOptions {
    pub out: PathBuf,
    pub size: (u16, u16),
    /// After event N (default: the end).
    pub at: Option<usize>,
    pub panel: Option<bool>,
    /// The longest transcript line read.
    pub max_line: u64,
}

/// Renders the screen after some of a transcript's events to a file.
pub fn screenshot(file: &Path, options: ScreenshotOptions) -> Result<()> {
    let out = &options.out;
    let format = Format::from_path(out).ok_or_else(|| ScreenError::Format { out: out.clone() })?;
    // The events are applied as they are read, not kept: a long
    // session's screen costs its state, not the whole file's events.
    let mut app = App::still();
    app.set_transcript(file, options.max_line);
    app.view.set_panel(options.panel);
    let mut total = 0;
    let read = transcript::read_each(file, options.max_line, &mut |event| {
        total += 1;
        if options.at.is_none_or(|at| total <= at) {
            app.on_event(event);
        }
    })?;
    for w in &read.warnings {
        crate::say!("warning: {w}");
    }
    let at = options.at.unwrap_or(total);
    if at > total {
        return Err(ScreenError::PastTheEnd {
            at,
            file: file.to_path_buf(),
            total,
        });
    }
    let (cols, rows) = options.size;
    let buffer = screenshot::render(&mut app, cols, rows);
    std::fs::write(out, screenshot::write(&buffer, format)).map_err(|error| {
        ScreenError::Write {
            path: out.clone(),
            error,
        }
    })?;
    Ok(())
}
