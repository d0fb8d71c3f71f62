//! The `quorum` binary: the interactive TUI, replay and headless screenshots.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};
use tokio::sync::mpsc;

use quorum::acp::fs::Root;
use quorum::acp::registry::{Registry, default_config_path};
use quorum::event::NoticeLevel;
use quorum::event::{Activity, Emitter, Event, Stamped};
use quorum::harness::chat::{Chat, ChatHandle};
use quorum::llm::Model;
use quorum::sanitize::sanitize;
use quorum::subagent::dispatch::{Approval, Dispatcher, Reply};
use quorum::subagent::types::SubAgentCallInput;
use quorum::supervisor::{self, Supervisor};
use quorum::transcript::{self, Header, Recorder, TerminalSize};
use quorum::tui::app::{self, App};
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
    /// Config file (default: $QUORUM_CONFIG, else ~/.config/quorum/config.toml).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    tui: TuiArgs,
}

#[derive(clap::Args, Default)]
struct TuiArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Record the session's events to this transcript file (JSONL);
    /// by default sessions are recorded under the state directory.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Do not record the session.
    #[arg(long, conflicts_with = "record")]
    no_record: bool,
}

#[derive(clap::Args, Default, Clone)]
struct ModelArgs {
    /// The chat model, PROVIDER:NAME: openai:gpt-4o, anthropic:claude-sonnet-4-5,
    /// openai:qwen (with --base-url), script:FILE. Default: $QUORUM_MODEL, else
    /// the config file's [model] name.
    #[arg(long, value_name = "SPEC")]
    model: Option<String>,
    /// An OpenAI-compatible server (llama-server, Ollama, vLLM), e.g.
    /// http://127.0.0.1:8080/v1. Default: $OPENAI_BASE_URL, else [model] base_url.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// How deep internal agents may nest sub-agent calls of their own
    /// (0: the internal agent cannot call sub-agents).
    #[arg(long, default_value_t = 0, value_name = "N")]
    agent_depth: u32,
}

#[derive(Subcommand)]
enum Command {
    /// The interactive TUI (the default).
    Tui(TuiArgs),
    /// Play a recorded transcript in the TUI, or render it to a screenshot.
    Replay(ReplayArgs),
    /// Run sub-agent calls on an ACP agent without a terminal UI.
    ///
    /// Prints each call's final message. Exit code: 0 when every call ended
    /// its turn normally, 1 when one stopped otherwise (cancelled, refusal,
    /// error, ...), 2 when a call could not run at all, 143 or 129 when
    /// ended by SIGTERM or SIGHUP.
    Call(CallArgs),
    /// List the known ACP agents and whether they are installed.
    Agents(AgentsArgs),
    /// Run the chat loop without a terminal UI: one prompt, then the
    /// reports of background tasks.
    ///
    /// Exit code: 0 when the chat ended its turn, 1 when the model failed
    /// or the turn stopped otherwise, 2 on bad configuration, 3 with
    /// --no-wait when tasks still run, 143 or 129 when ended by SIGTERM
    /// or SIGHUP.
    Run(RunArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The message for the chat.
    #[arg(short = 'p', long = "prompt", value_name = "PROMPT")]
    prompt: String,
    /// Print every event as one JSON object per line.
    #[arg(long)]
    json: bool,
    /// Exit after the first turn even if background tasks still run.
    #[arg(long)]
    no_wait: bool,
    /// Answer for permission requests of agents whose policy is `ask`.
    #[arg(long, value_enum, default_value_t)]
    approve: ApproveArg,
    /// The session directory (default: the current directory).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Record the events to this transcript file.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum, Default, PartialEq, Eq)]
enum ApproveArg {
    /// Allow every permission request.
    All,
    /// Reject every permission request.
    #[default]
    None,
}

impl From<ApproveArg> for Approval {
    fn from(a: ApproveArg) -> Self {
        match a {
            ApproveArg::All => Approval::All,
            ApproveArg::None => Approval::None,
        }
    }
}

#[derive(clap::Args)]
struct CallArgs {
    /// The agent to run (see `quorum agents`).
    #[arg(long)]
    agent: String,
    /// The message. Repeat to run several calls in turn, on the same
    /// session memory; without any, the message is read from stdin.
    #[arg(long = "input", value_name = "TEXT")]
    inputs: Vec<String>,
    /// Ask for a code review with a severity verdict.
    #[arg(long)]
    code_review: bool,
    /// Run every call in a fresh session (by default each call resumes the
    /// session of the call before it; sessions last one invocation).
    #[arg(long)]
    new_session: bool,
    /// Answer for permission requests of agents whose policy is `ask`.
    #[arg(long, value_enum, default_value_t)]
    approve: ApproveArg,
    /// The session directory: the agent runs there and may only read and
    /// write inside it (default: the current directory).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Print one JSON object per call: output, stop_reason, severity,
    /// session, session_id.
    #[arg(long)]
    json: bool,
    /// Record the events to this transcript file.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
}

#[derive(clap::Args)]
struct AgentsArgs {
    /// Start each installed agent and show what it says of itself.
    #[arg(long)]
    probe: bool,
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
    let config = cli.config.clone();
    supervisor::kill_all_on_panic();
    // Every process the commands start; ended before the runtime is.
    let sup = Supervisor::new();
    match cli.command {
        Some(Command::Call(args)) => {
            let code = with_runtime(&sup, call_cmd(args, config, sup.clone()))?;
            std::process::exit(code);
        }
        Some(Command::Agents(args)) => with_runtime(&sup, agents_cmd(args, config, sup.clone())),
        Some(Command::Run(args)) => {
            let code = with_runtime(&sup, run_cmd(args, config, sup.clone()))?;
            std::process::exit(code);
        }
        Some(Command::Replay(args)) if args.screenshot.is_some() => screenshot_cmd(args),
        Some(Command::Replay(args)) => with_runtime(&sup, replay_cmd(args)),
        Some(Command::Tui(args)) => with_runtime(&sup, tui_cmd(args, config, sup.clone())),
        None => with_runtime(&sup, tui_cmd(cli.tui, config, sup.clone())),
    }
}

/// Runs `f`, then ends every process group `sup` still owns, however `f`
/// returned, while the runtime is still there.
fn with_runtime<T>(sup: &Supervisor, f: impl Future<Output = Result<T>>) -> Result<T> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(f);
    sup.shutdown_blocking();
    result
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

async fn tui_cmd(args: TuiArgs, config: Option<PathBuf>, sup: Supervisor) -> Result<()> {
    require_terminal()?;
    let config = config.or_else(default_config_path);
    let registry = registry(config.clone())?;
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let root = Root::new(&cwd).context("reading the current directory")?;
    init_logging();
    let started = Instant::now();
    let (cols, rows) = ratatui::crossterm::terminal::size().unwrap_or((80, 24));
    let model = select_model(&args.model, config.as_deref())?;
    let record_path = match (&args.record, args.no_record) {
        (Some(path), _) => Some(path.clone()),
        (None, true) => None,
        (None, false) => default_record_path(),
    };
    let recorder = open_recorder(record_path.as_deref(), &cwd, TerminalSize { cols, rows })?;
    let (ops_tx, ops_rx) = mpsc::unbounded_channel();
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    let emitter = Emitter::new(started, events_tx);
    let agents = registry
        .installed()
        .iter()
        .map(|a| a.name.clone())
        .collect();
    emitter.emit(Event::SessionInfo {
        model: model.as_ref().map(|m| m.name()),
        agents,
    });
    let (dispatcher, completions) = Dispatcher::new(
        Arc::new(registry),
        root,
        emitter.clone(),
        Approval::Interactive,
        sup,
    );
    let chat = model.map(|model| {
        dispatcher.set_internal_model(model.clone(), args.model.agent_depth);
        ChatHandle::spawn(Chat::new(
            model,
            dispatcher.clone(),
            emitter.clone(),
            completions,
        ))
    });
    if chat.is_none() {
        emitter.emit(Event::Notice {
            level: NoticeLevel::Warning,
            text: quorum::tui::engine::WELCOME.into(),
        });
    }
    let make_model: quorum::tui::engine::ModelMaker = {
        let base_url = args.model.base_url.clone();
        Arc::new(move |spec: &str| {
            quorum::llm::select::from_spec(spec, base_url.as_deref(), &env_var)
                .map_err(|e| e.to_string())
        })
    };
    let engine = quorum::tui::engine::Engine {
        emitter,
        dispatcher: dispatcher.clone(),
        chat,
        make_model: Some(make_model),
    };
    tokio::spawn(engine.run(ops_rx));
    let mut app = App::live(ops_tx, started, recorder);
    let mut guard = TerminalGuard::enter().context("setting up the terminal")?;
    let mut inputs = spawn_input_reader();
    let result = app::run(&mut guard.terminal, &mut app, &mut inputs, &mut events_rx).await;
    drop(guard);
    dispatcher.cancel_all();
    dispatcher.shutdown().await;
    if let Some(path) = app.recording() {
        eprintln!("session recorded to {} (quorum replay {0})", path.display());
    }
    result
}

/// Records `event` headlessly; a failed write stops recording, said once.
fn record(recorder: &mut Option<Recorder>, event: &Stamped) {
    if let Some(r) = recorder
        && let Err(e) = r.record(event)
    {
        eprintln!("quorum: recording to {} stopped: {e}", r.path().display());
        *recorder = None;
    }
}

/// A new transcript at `path`, if one is asked for.
fn open_recorder(path: Option<&Path>, cwd: &Path, size: TerminalSize) -> Result<Option<Recorder>> {
    let Some(path) = path else { return Ok(None) };
    let header = Header::now(cwd, size);
    let recorder = Recorder::create(path, &header).with_context(|| {
        format!(
            "cannot record to {}: choose a new file name",
            path.display()
        )
    })?;
    Ok(Some(recorder))
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

fn registry(config: Option<PathBuf>) -> Result<Registry> {
    let path = config.or_else(default_config_path);
    Ok(Registry::load(path.as_deref())?)
}

/// Exit code for a call that could not run.
const EXIT_CANNOT_RUN: i32 = 2;

/// `quorum call`. SIGTERM or SIGHUP cancels the call and exits 143 or 129
/// (128 + the signal), through the same shutdown as any other exit.
async fn call_cmd(args: CallArgs, config: Option<PathBuf>, sup: Supervisor) -> Result<i32> {
    init_logging();
    let registry = match registry(config) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("quorum: {e:#}");
            return Ok(EXIT_CANNOT_RUN);
        }
    };
    if let Err(e) = registry.get(&args.agent) {
        eprintln!("quorum: {e}");
        return Ok(EXIT_CANNOT_RUN);
    }
    let dir = match &args.cwd {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("reading the current directory")?,
    };
    let root = match Root::new(&dir) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("quorum: --cwd {}: {e}", dir.display());
            return Ok(EXIT_CANNOT_RUN);
        }
    };
    let mut inputs = args.inputs.clone();
    if inputs.is_empty() {
        if std::io::stdin().is_terminal() {
            eprintln!("quorum: give the message with --input TEXT, or pipe it on stdin");
            return Ok(EXIT_CANNOT_RUN);
        }
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).context("reading stdin")?;
        inputs.push(text.trim_end().to_string());
    }
    let mut recorder = open_recorder(
        args.record.as_deref(),
        root.path(),
        TerminalSize { cols: 0, rows: 0 },
    )?;
    let started = Instant::now();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let emitter = Emitter::new(started, tx);
    let approval = args.approve.into();
    let (dispatcher, _completions) =
        Dispatcher::new(Arc::new(registry), root, emitter, approval, sup);
    let printer = tokio::spawn(async move {
        while let Some(event) = rx.recv().await {
            record(&mut recorder, &event);
            progress(&event.event);
        }
    });
    let terminated = supervisor::termination_signal();
    tokio::pin!(terminated);
    let mut code = 0;
    for input in &inputs {
        let call = SubAgentCallInput {
            agent: Some(args.agent.clone()),
            input: Some(input.clone()),
            code_review: args.code_review,
            continue_session: !args.new_session,
            run_in_background: false,
        };
        let run = dispatcher.call(call);
        tokio::pin!(run);
        let mut interrupted = false;
        let reply = loop {
            tokio::select! {
                reply = &mut run => break reply,
                _ = tokio::signal::ctrl_c() => {
                    if interrupted {
                        eprintln!("quorum: interrupted twice, exiting");
                        return Ok(130);
                    }
                    interrupted = true;
                    eprintln!("quorum: cancelling (Ctrl+C again to quit at once)");
                    dispatcher.cancel_all();
                }
                code = &mut terminated => {
                    eprintln!("quorum: terminated by a signal; stopping the agents");
                    dispatcher.cancel_all();
                    return Ok(code);
                }
            }
        };
        match reply {
            Ok(Reply::Done(outcome)) => {
                if args.json {
                    println!("{}", serde_json::to_string(&outcome)?);
                } else {
                    println!("{}", sanitize(&outcome.output));
                }
                if outcome.stop_reason != "end_turn" {
                    if !args.json {
                        eprintln!("quorum: stop reason: {}", outcome.stop_reason);
                    }
                    code = 1;
                }
            }
            Ok(Reply::Started { .. }) => unreachable!("quorum call runs in the foreground"),
            Err(e) => {
                eprintln!("quorum: {e}");
                code = EXIT_CANNOT_RUN;
                break;
            }
        }
    }
    dispatcher.shutdown().await;
    drop(dispatcher);
    let _ = printer.await;
    Ok(code)
}

/// A line on stderr for what a headless call is doing. Agent text is
/// untrusted: it is sanitized before it reaches the terminal.
fn progress(event: &Event) {
    let line = match event {
        Event::SubagentSession {
            session,
            session_id,
            ..
        } => format!(
            "session: {} {}",
            session.label(),
            session_id.as_deref().unwrap_or("")
        ),
        Event::SubagentActivity { activity, .. } => match activity {
            Activity::ToolCall { title, .. } => format!("⚙ {}", sanitize(title)),
            Activity::PermissionRequest { title, .. } => {
                format!("? permission: {}", sanitize(title))
            }
            Activity::PermissionResolved { outcome, .. } => {
                format!("  → {}", sanitize(outcome))
            }
            _ => return,
        },
        Event::Notice { text, .. } => format!("note: {}", sanitize(text)),
        Event::ModelRetry {
            attempt,
            wait_ms,
            reason,
        } => format!(
            "model: {}; retry {attempt} in {:.1} s",
            sanitize(reason),
            *wait_ms as f64 / 1000.0
        ),
        Event::Error { text } => format!("error: {}", sanitize(text)),
        _ => return,
    };
    eprintln!("{line}");
}

async fn agents_cmd(args: AgentsArgs, config: Option<PathBuf>, sup: Supervisor) -> Result<()> {
    init_logging();
    let registry = registry(config)?;
    let rows: Vec<_> = registry.all().collect();
    let name_w = rows.iter().map(|a| a.name.len()).max().unwrap_or(4).max(4);
    let launch = |a: &quorum::acp::registry::AgentSpec| {
        std::iter::once(a.command.as_str())
            .chain(a.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let cmd_w = rows
        .iter()
        .map(|a| launch(a).len())
        .max()
        .unwrap_or(7)
        .max(7);
    println!("{:name_w$}  {:cmd_w$}  INSTALLED", "NAME", "COMMAND");
    let root = Root::new(&std::env::current_dir()?)?;
    for a in rows {
        let installed = quorum::acp::registry::locate(&a.command);
        let where_ = installed
            .as_ref()
            .map_or("no".to_string(), |p| p.display().to_string());
        println!("{:name_w$}  {:cmd_w$}  {where_}", a.name, launch(a));
        if args.probe && installed.is_some() {
            let probe = tokio::time::timeout(
                std::time::Duration::from_secs(30),
                quorum::acp::client::Connection::start(a, &root, &sup),
            )
            .await;
            match probe {
                Ok(Ok(conn)) => {
                    let info = conn
                        .init
                        .agent_info
                        .as_ref()
                        .map_or("(no agentInfo)".to_string(), |i| {
                            format!("{} {}", sanitize(&i.name), sanitize(&i.version))
                        });
                    let mut caps = Vec::new();
                    if conn.can_load() {
                        caps.push("load");
                    }
                    if conn.can_resume() {
                        caps.push("resume");
                    }
                    if conn
                        .init
                        .agent_capabilities
                        .session_capabilities
                        .list
                        .is_some()
                    {
                        caps.push("list");
                    }
                    let caps = if caps.is_empty() {
                        "none".to_string()
                    } else {
                        caps.join(", ")
                    };
                    println!("{:name_w$}  ↳ {info}; sessions: {caps}", "");
                    conn.close();
                }
                Ok(Err(e)) => println!("{:name_w$}  ↳ probe failed: {e}", ""),
                Err(_) => println!(
                    "{:name_w$}  ↳ probe failed: no answer to initialize within 30 s",
                    ""
                ),
            }
        }
    }
    Ok(())
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[derive(serde::Deserialize, Default)]
struct ModelSection {
    name: Option<String>,
    base_url: Option<String>,
}

/// The `[model]` section of the config file, if there is one.
fn config_model(config: Option<&Path>) -> Result<ModelSection> {
    #[derive(serde::Deserialize, Default)]
    struct File {
        #[serde(default)]
        model: Option<ModelSection>,
    }
    let Some(path) = config else {
        return Ok(ModelSection::default());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    let file: File = toml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.message()))?;
    Ok(file.model.unwrap_or_default())
}

/// The chat model from the flags, the environment and the config file;
/// `None` when none is configured.
fn select_model(args: &ModelArgs, config: Option<&Path>) -> Result<Option<Arc<dyn Model>>> {
    let section = config_model(config)?;
    let spec = args
        .model
        .clone()
        .or_else(|| quorum::llm::select::default_spec(&env_var))
        .or(section.name);
    let Some(spec) = spec else { return Ok(None) };
    let base_url = args.base_url.clone().or(section.base_url);
    Ok(Some(quorum::llm::select::from_spec(
        &spec,
        base_url.as_deref(),
        &env_var,
    )?))
}

/// `<state dir>/sessions/<start time>-<pid>.jsonl`.
fn default_record_path() -> Option<PathBuf> {
    let dir = state_dir()?.join("sessions");
    std::fs::create_dir_all(&dir).ok()?;
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "-");
    Some(dir.join(format!("{stamp}-{}.jsonl", std::process::id())))
}

/// Exit code for `quorum run --no-wait` with tasks still running.
const EXIT_TASKS_RUNNING: i32 = 3;

/// `quorum run`. SIGTERM or SIGHUP cancels the turn and exits 143 or 129,
/// as in `quorum call`.
async fn run_cmd(args: RunArgs, config: Option<PathBuf>, sup: Supervisor) -> Result<i32> {
    init_logging();
    let config = config.or_else(default_config_path);
    let setup = (|| -> Result<_> {
        let registry = registry(config.clone())?;
        let model = select_model(&args.model, config.as_deref())?.context(
            "no chat model: give --model PROVIDER:NAME (or set QUORUM_MODEL, or [model] in the config file)",
        )?;
        let dir = match &args.cwd {
            Some(d) => d.clone(),
            None => std::env::current_dir()?,
        };
        let root = Root::new(&dir).with_context(|| format!("--cwd {}", dir.display()))?;
        Ok((registry, model, root))
    })();
    let (registry, model, root) = match setup {
        Ok(s) => s,
        Err(e) => {
            eprintln!("quorum: {e:#}");
            return Ok(EXIT_CANNOT_RUN);
        }
    };
    let mut recorder = open_recorder(
        args.record.as_deref(),
        root.path(),
        TerminalSize { cols: 0, rows: 0 },
    )?;
    let started = Instant::now();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let emitter = Emitter::new(started, tx);
    let approval = args.approve.into();
    emitter.emit(Event::SessionInfo {
        model: Some(model.name()),
        agents: registry
            .installed()
            .iter()
            .map(|a| a.name.clone())
            .collect(),
    });
    let (dispatcher, completions) =
        Dispatcher::new(Arc::new(registry), root, emitter.clone(), approval, sup);
    dispatcher.set_internal_model(model.clone(), args.model.agent_depth);
    let mut chat = Chat::new(model, dispatcher.clone(), emitter.clone(), completions);
    let json = args.json;
    let printer = tokio::spawn(async move {
        let mut out = std::io::stdout();
        while let Some(event) = rx.recv().await {
            record(&mut recorder, &event);
            if json {
                let _ = writeln!(
                    out,
                    "{}",
                    serde_json::to_string(&event).expect("events are JSON")
                );
                continue;
            }
            match &event.event {
                Event::AssistantDelta { text } => {
                    let _ = write!(out, "{}", sanitize(text));
                    let _ = out.flush();
                }
                Event::AssistantEnd => {
                    let _ = writeln!(out);
                }
                Event::SubagentStarted {
                    agent,
                    input,
                    task_id,
                    ..
                } => eprintln!(
                    "▶ {}{}: {}",
                    sanitize(agent.name()),
                    task_id
                        .as_ref()
                        .map(|t| format!(" [{t}]"))
                        .unwrap_or_default(),
                    sanitize(input.lines().next().unwrap_or(""))
                ),
                Event::SubagentFinished {
                    stop_reason,
                    severity,
                    ..
                } => eprintln!(
                    "■ {}{}",
                    sanitize(stop_reason),
                    severity
                        .map(|s| format!(" ({})", s.as_str()))
                        .unwrap_or_default()
                ),
                Event::TaskReported { task_id, .. } => {
                    eprintln!("↩ task {} reported to the chat", sanitize(task_id))
                }
                other => progress(other),
            }
        }
    });
    let terminated = supervisor::termination_signal();
    tokio::pin!(terminated);
    let mut code = 0;
    let mut interrupted = false;
    let mut message = Some(args.prompt.clone());
    let mut completion = None;
    loop {
        let (cancel_tx, cancel) = tokio::sync::watch::channel(false);
        let result = {
            let turn = chat.turn(message.take(), completion.take(), cancel);
            tokio::pin!(turn);
            loop {
                tokio::select! {
                    r = &mut turn => break r,
                    _ = tokio::signal::ctrl_c() => {
                        if interrupted {
                            return Ok(130);
                        }
                        interrupted = true;
                        eprintln!("quorum: cancelling (Ctrl+C again to quit at once)");
                        let _ = cancel_tx.send(true);
                        dispatcher.cancel_all();
                    }
                    code = &mut terminated => {
                        eprintln!("quorum: terminated by a signal; stopping the agents");
                        let _ = cancel_tx.send(true);
                        dispatcher.cancel_all();
                        return Ok(code);
                    }
                }
            }
        };
        match result {
            Ok(end) if end.stop_reason == "end_turn" => {}
            Ok(_) => code = code.max(1),
            Err(_) => {
                code = 1;
                break;
            }
        }
        if interrupted {
            break;
        }
        if let Some(c) = chat.try_completion() {
            completion = Some(c);
            continue;
        }
        if !dispatcher.busy() {
            break;
        }
        if args.no_wait {
            eprintln!("quorum: background tasks are still running; exiting (--no-wait)");
            code = EXIT_TASKS_RUNNING;
            break;
        }
        // A background task's report: the chat answers it in a turn.
        let next = tokio::select! {
            next = chat.next_completion() => next,
            code = &mut terminated => {
                eprintln!("quorum: terminated by a signal; stopping the agents");
                dispatcher.cancel_all();
                return Ok(code);
            }
        };
        match next {
            Some(c) => completion = Some(c),
            None => break,
        }
    }
    dispatcher.cancel_all();
    dispatcher.shutdown().await;
    drop(chat);
    drop(dispatcher);
    drop(emitter);
    let _ = printer.await;
    Ok(code)
}
