//! The `quorum` binary: the interactive TUI, replay and headless screenshots.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use tokio::sync::mpsc;

use quorum::event::{Event, NoticeLevel, Stamped};
use quorum::transcript::{self, Header, Recorder, TerminalSize};
use quorum::tui::app::{self, App, Op};
use quorum::tui::player::Player;
use quorum::tui::screenshot::{self, Format};
use quorum::tui::terminal::{TerminalGuard, spawn_input_reader};

#[derive(Parser)]
#[command(
    name = "quorum",
    version,
    about = "A terminal client in which one chat agent convenes many coding sub-agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    tui: TuiArgs,
}

#[derive(clap::Args, Default)]
struct TuiArgs {
    /// Record the session's events to this transcript file (JSONL).
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// The interactive TUI (the default).
    Tui(TuiArgs),
    /// Play a recorded transcript in the TUI, or render it to a screenshot.
    Replay(ReplayArgs),
}

#[derive(Clone, Copy, ValueEnum, Default)]
enum PanelArg {
    /// Shown when the terminal is at least 100 columns wide.
    #[default]
    Auto,
    On,
    Off,
}

impl PanelArg {
    fn open(self) -> Option<bool> {
        match self {
            PanelArg::Auto => None,
            PanelArg::On => Some(true),
            PanelArg::Off => Some(false),
        }
    }
}

#[derive(clap::Args)]
struct ReplayArgs {
    /// The transcript to play.
    file: PathBuf,
    /// Playback speed: 2 plays twice as fast as recorded.
    #[arg(long, default_value_t = 1.0, value_parser = parse_speed)]
    speed: f64,
    /// Show the end state at once.
    #[arg(long)]
    instant: bool,
    /// Start paused (space plays, n steps).
    #[arg(long)]
    paused: bool,
    /// Side panel of background tasks.
    #[arg(long, value_enum, default_value_t)]
    panel: PanelArg,
    /// Render with no terminal and write OUT: .txt (plain text), .ans
    /// (ANSI colours) or .svg (image).
    #[arg(long, value_name = "OUT")]
    screenshot: Option<PathBuf>,
    /// Screenshot size, COLSxROWS.
    #[arg(long, default_value = "120x40", value_parser = parse_size, requires = "screenshot")]
    size: (u16, u16),
    /// Screenshot after event N (1 is the first event; default: the end).
    #[arg(long, value_name = "N", requires = "screenshot")]
    at: Option<usize>,
}

fn parse_speed(s: &str) -> Result<f64, String> {
    let speed: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if speed.is_finite() && speed > 0.0 {
        Ok(speed)
    } else {
        Err(format!("speed must be above 0, got {s}"))
    }
}

fn parse_size(s: &str) -> Result<(u16, u16), String> {
    let bad = || format!("{s:?} is not a size like 120x40");
    let (c, r) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let (cols, rows): (u16, u16) = (
        c.trim().parse().map_err(|_| bad())?,
        r.trim().parse().map_err(|_| bad())?,
    );
    if !(20..=1000).contains(&cols) || !(5..=1000).contains(&rows) {
        return Err(format!(
            "{s}: size must be 20..1000 columns by 5..1000 rows"
        ));
    }
    Ok((cols, rows))
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Replay(args)) if args.screenshot.is_some() => screenshot_cmd(args),
        Some(Command::Replay(args)) => with_runtime(replay_cmd(args)),
        Some(Command::Tui(args)) => with_runtime(tui_cmd(args)),
        None => with_runtime(tui_cmd(cli.tui)),
    }
}

fn with_runtime(f: impl Future<Output = Result<()>>) -> Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(f)
}

/// `$XDG_STATE_HOME/quorum`, else `~/.local/state/quorum`.
fn state_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/state")))?;
    Some(base.join("quorum"))
}

/// Logs go to a file: nothing may print over the TUI.
fn init_logging() {
    let Some(dir) = state_dir() else { return };
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let Ok(file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("quorum.log"))
    else {
        return;
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("QUORUM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .with_env_filter(filter)
        .try_init();
}

fn require_terminal() -> Result<()> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        bail!(
            "quorum's TUI needs a terminal; for a picture without one, use \
             `quorum replay FILE --screenshot OUT.svg`"
        );
    }
    Ok(())
}

async fn tui_cmd(args: TuiArgs) -> Result<()> {
    require_terminal()?;
    init_logging();
    let started = Instant::now();
    let (cols, rows) = ratatui::crossterm::terminal::size().unwrap_or((80, 24));
    let recorder = match &args.record {
        Some(path) => {
            let cwd = std::env::current_dir().context("reading the current directory")?;
            let header = Header::now(&cwd, TerminalSize { cols, rows });
            Some(Recorder::create(path, &header).with_context(|| {
                format!(
                    "cannot record to {}: choose a new file name",
                    path.display()
                )
            })?)
        }
        None => None,
    };
    let (ops_tx, ops_rx) = mpsc::unbounded_channel();
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    tokio::spawn(engine(ops_rx, events_tx, started));
    let mut app = App::live(ops_tx, started, recorder);
    let mut guard = TerminalGuard::enter().context("setting up the terminal")?;
    let mut inputs = spawn_input_reader();
    let result = app::run(&mut guard.terminal, &mut app, &mut inputs, &mut events_rx).await;
    drop(guard);
    if let Some(path) = &args.record {
        eprintln!("session recorded to {}", path.display());
    }
    result
}

/// The engine for now: it records what the person says, and says that no
/// chat model is connected yet.
async fn engine(
    mut ops: mpsc::UnboundedReceiver<Op>,
    events: mpsc::Sender<Stamped>,
    started: Instant,
) {
    let stamp = |event| Stamped::new(started.elapsed().as_millis() as u64, event);
    let _ = events
        .send(stamp(Event::SessionInfo {
            model: None,
            agents: Vec::new(),
        }))
        .await;
    while let Some(op) = ops.recv().await {
        match op {
            Op::Submit(text) => {
                let _ = events.send(stamp(Event::UserMessage { text })).await;
                let _ = events
                    .send(stamp(Event::Notice {
                        level: NoticeLevel::Warning,
                        text: "No chat model is connected in this build of quorum, so nothing \
                               answers yet. `quorum replay assets/demo.jsonl` shows a whole session."
                            .into(),
                    }))
                    .await;
            }
        }
    }
}

fn load(path: &Path) -> Result<transcript::Loaded> {
    Ok(transcript::load(path)?)
}

async fn replay_cmd(args: ReplayArgs) -> Result<()> {
    let loaded = load(&args.file)?;
    require_terminal()?;
    init_logging();
    let warnings: Vec<String> = loaded.warnings.iter().map(|w| w.to_string()).collect();
    let mut player = Player::new(loaded.events, args.speed, Instant::now());
    if args.paused {
        player.set_paused(true, Instant::now());
    }
    let mut app = App::replay(player);
    app.view.set_panel(args.panel.open());
    app.set_banner(warnings.first().cloned());
    if args.instant {
        app.handle(app::Input::Key(ratatui::crossterm::event::KeyEvent::from(
            ratatui::crossterm::event::KeyCode::End,
        )));
    }
    let (_events_tx, mut events_rx) = mpsc::unbounded_channel::<Stamped>();
    let mut guard = TerminalGuard::enter().context("setting up the terminal")?;
    let mut inputs = spawn_input_reader();
    let result = app::run(&mut guard.terminal, &mut app, &mut inputs, &mut events_rx).await;
    drop(guard);
    for w in warnings {
        eprintln!("warning: {w}");
    }
    result
}

fn screenshot_cmd(args: ReplayArgs) -> Result<()> {
    let out = args.screenshot.as_deref().expect("checked by the caller");
    let format = Format::from_path(out).with_context(|| {
        format!(
            "{}: unknown screenshot format; end the name with .txt, .ans or .svg",
            out.display()
        )
    })?;
    let loaded = load(&args.file)?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    let total = loaded.events.len();
    let at = args.at.unwrap_or(total);
    if at > total {
        bail!(
            "--at {at} is past the end: {} has {total} events",
            args.file.display()
        );
    }
    let mut app = App::still();
    app.view.set_panel(args.panel.open());
    for event in loaded.events.into_iter().take(at) {
        app.on_event(event);
    }
    let (cols, rows) = args.size;
    let buffer = screenshot::render(&mut app, cols, rows);
    std::fs::write(out, screenshot::write(&buffer, format))
        .with_context(|| format!("writing {}", out.display()))?;
    Ok(())
}
