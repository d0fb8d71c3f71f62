//! The `quorum` binary: the interactive TUI, replay and headless screenshots.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use quorum::cli::{self as headless, CallArgs, ContinueArgs, HeadlessArgs};
use quorum::config::{ConfigFile, Location};
use quorum::engine::Session;
use quorum::engine::config::{self, ModelChoice};
use quorum::tui::modes::{self as screen, ReplayArgs, WatchArgs};

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
    model: ModelArgs,
    #[command(flatten)]
    tui: TuiArgs,
}

#[derive(clap::Args, Default)]
struct TuiArgs {
    /// Record the session's events to this transcript file (JSONL);
    /// by default sessions are recorded under the state directory.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Do not record the session.
    #[arg(long, conflicts_with_all = ["record", "continue_session", "resume"])]
    no_record: bool,
    #[command(flatten)]
    continued: ContinueArgs,
    /// With --resume and no ID: list the sessions of every directory.
    #[arg(long, requires = "resume")]
    all: bool,
}

#[derive(clap::Args, Default, Clone)]
struct ModelArgs {
    /// The chat: PROVIDER:NAME (openai:gpt-4o, anthropic:claude-sonnet-4-5,
    /// openai:qwen with --base-url, script:FILE) or acp:NAME (an ACP agent of
    /// yours as the chat). Default: $QUORUM_MODEL, else [model] name.
    #[arg(long, global = true, value_name = "SPEC")]
    model: Option<String>,
    /// An OpenAI-compatible server (llama-server, Ollama, vLLM), e.g.
    /// http://127.0.0.1:8080/v1. Default: $OPENAI_BASE_URL, else [model] base_url.
    #[arg(long, global = true, value_name = "URL")]
    base_url: Option<String>,
    /// How deep internal agents may nest sub-agent calls of their own
    /// (0: the internal agent cannot call sub-agents).
    #[arg(long, global = true, default_value_t = 0, value_name = "N")]
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
    /// Prints each call's final message. Exit code: 0 when every call ended its turn
    /// normally, 1 when one stopped otherwise (cancelled, refusal, error, ...), 2 when a
    /// call could not run at all, 143 or 129 when ended by SIGTERM or SIGHUP.
    Call(CallArgs),
    /// List the known ACP agents and whether they are installed.
    Agents(AgentsArgs),
    /// Print the configuration in effect and where each value came from.
    Config(quorum::cli::config::ConfigArgs),
    /// Run the chat loop without a terminal UI: one prompt, then the
    /// reports of background tasks.
    ///
    /// Exit code: 0 when the chat ended its turn, 1 when the model failed or the turn
    /// stopped otherwise, 2 on bad configuration, 3 with --no-wait when tasks still run,
    /// 143 or 129 when ended by SIGTERM or SIGHUP.
    Run(RunArgs),
    /// Send `git diff REV` to several agents for review; print each verdict and the quorum.
    ///
    /// Exit code: 0 green, 1 yellow, 2 red, 3 error (a reviewer failed or gave no verdict).
    Review(quorum::cli::review::ReviewArgs),
    /// Turn a Claude Code session log or a Codex rollout into a quorum
    /// transcript (`quorum import claude FILE`, `quorum import codex FILE`).
    ///
    /// Sub-agents become boxes; a report starting with a severity header
    /// tints its box. Record types not known are counted on stderr.
    Import(quorum::cli::import::ImportArgs),
    /// List the sessions quorum recorded, newest first.
    ///
    /// This directory's, or every directory's with --all; not an agent's ACP session (`quorum call --resume SESSION_ID`).
    Sessions(quorum::cli::sessions::SessionsArgs),
    /// List the worktrees and branches quorum made for writers here; --prune removes
    /// those gone and merged; --fetch takes home what tasks on hosts left there.
    Worktrees(quorum::cli::worktrees::WorktreesArgs),
    /// quorum's tools (subagent, subagent_status) as an MCP server on stdio,
    /// for MCP hosts: `claude mcp add quorum -- quorum mcp`.
    Mcp(quorum::cli::mcp::McpArgs),
    /// quorum itself as an ACP agent on stdio, for Zed, Toad, acpx and other ACP clients.
    Acp(quorum::cli::acp::AcpArgs),
    /// Follow a session another quorum records (`quorum mcp`'s), live and read-only.
    Watch(WatchArgs),
    /// Joins stdio to a session's MCP socket (quorum's conductor agent starts it).
    #[command(name = "mcp-connect", hide = true)]
    McpConnect,
    /// quorum on an agent's host, relaying it home (quorum starts it over ssh).
    #[command(hide = true)]
    Proxy(quorum::cli::proxy::ProxyArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// The message for the chat.
    #[arg(short = 'p', long = "prompt", value_name = "PROMPT")]
    prompt: String,
    /// Print every event as one JSON object per line.
    #[arg(long)]
    json: bool,
    /// Exit after the first turn even if background tasks still run.
    #[arg(long)]
    no_wait: bool,
    /// Do not record the session (by default it is recorded under the
    /// state directory, as the TUI's are, and `quorum sessions` lists it).
    #[arg(long, conflicts_with_all = ["record", "continue_session", "resume"])]
    no_record: bool,
    #[command(flatten)]
    continued: ContinueArgs,
    #[command(flatten)]
    headless: HeadlessArgs,
}

#[derive(clap::Args)]
struct AgentsArgs {
    /// Start each installed agent and show what it says of itself.
    #[arg(long)]
    probe: bool,
}

fn main() {
    // Every child starts under quorum's own reaper (this binary, re-run).
    quorum::runtime::reaper::start();
    let outer = quorum::serve::mark_process();
    let cli = Cli::parse();
    // One way out for every command's error: `quorum: ` and the message,
    // each cause once, no backtrace (whatever RUST_BACKTRACE says); a
    // closed stdout (`| head`) is no error.
    match run(cli, outer) {
        Ok(code) => std::process::exit(code),
        Err(e) if headless::is_broken_pipe(&e) => std::process::exit(0),
        Err(e) => {
            quorum::say!("quorum: {}", config::error_message(&e));
            std::process::exit(2);
        }
    }
}

fn run(cli: Cli, outer: Option<String>) -> Result<i32> {
    // A panic ends every process quorum started.
    quorum::runtime::supervisor::kill_all_on_panic();
    let location = Location::find(cli.config.clone());
    let config = location.path.clone();
    // The model options are global: they apply wherever they are given.
    let model = cli.model.choice();
    let code = match cli.command {
        Some(Command::Config(args)) => quorum::cli::config::command(args, &location, &model)?,
        Some(Command::Call(args)) => with_runtime(args.command(config))?,
        Some(Command::Run(a)) => with_runtime(run_cmd(a, model, config))?,
        Some(Command::Agents(args)) => {
            with_runtime(quorum::cli::agents::command(config.as_deref(), args.probe))?
        }
        Some(Command::Review(args)) => with_runtime(quorum::cli::review::command(args, config))?,
        Some(Command::Import(args)) => quorum::cli::import::command(args)?,
        Some(Command::Sessions(args)) => quorum::cli::sessions::command(args)?,
        Some(Command::Worktrees(a)) => with_runtime(quorum::cli::worktrees::command(a, config))?,
        Some(Command::Mcp(a)) => with_runtime(quorum::cli::mcp::command(a, config, model, outer))?,
        Some(Command::Acp(args)) => with_runtime(quorum::cli::acp::command(args, config, model))?,
        Some(Command::McpConnect) => with_runtime(quorum::cli::mcp_connect::run())?,
        Some(Command::Proxy(a)) => with_runtime(quorum::cli::proxy::run(a))?,
        Some(Command::Watch(args)) => with_runtime(watch_cmd(args, config))?,
        Some(Command::Replay(args)) => replay_cmd(args, config)?,
        Some(Command::Tui(args)) => with_runtime(tui_cmd(args, model, config))?,
        None => with_runtime(tui_cmd(cli.tui, model, config))?,
    };
    Ok(code)
}

/// `quorum run`: the headless chat, recorded by default.
async fn run_cmd(a: RunArgs, model: ModelChoice, config: Option<PathBuf>) -> Result<i32> {
    let mut setup = a.headless.setup(config);
    setup.resume = a.continued.target(setup.cwd.as_deref(), false)?;
    if setup.resume.is_none() && setup.record.is_none() && !a.no_record {
        setup.record = config::default_record_path();
    }
    headless::run_command(setup, model, a.prompt, a.json, a.no_wait).await
}

/// `quorum watch`: a recorded session followed live.
async fn watch_cmd(args: WatchArgs, config: Option<PathBuf>) -> Result<i32> {
    let file = match &args.session {
        Some(id) => config::find_session(id)?,
        None => config::newest_session(config::root(None)?.path())?,
    };
    let (panel, max_line) = (args.panel.open(), max_line(&config)?);
    config::init_logging();
    screen::watch(&file, panel, max_line).await.map(|()| 0)
}

/// `quorum replay`: played in real time, or one screenshot.
fn replay_cmd(args: ReplayArgs, config: Option<PathBuf>) -> Result<i32> {
    let max_line = max_line(&config)?;
    match args.screenshot_options(max_line) {
        Some(shot) => screen::screenshot(&args.file, shot).map(|()| 0),
        None => with_runtime(async {
            config::init_logging();
            let options = args.replay_options(max_line);
            screen::replay(&args.file, options).await.map(|()| 0)
        }),
    }
}

/// The longest transcript line replayed (`[limits]` in the config).
fn max_line(config: &Option<PathBuf>) -> Result<u64> {
    let limits = ConfigFile::load(config.as_deref())?.limits();
    Ok(limits.max_transcript_line_bytes)
}

/// Runs `f`; then, however it returned and while the runtime is still
/// there, ends every process group quorum still owns (a session ends its
/// own when it is dropped; this is the backstop).
fn with_runtime<T>(f: impl Future<Output = Result<T>>) -> Result<T> {
    let runtime = quorum::runtime::builder()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(f);
    quorum::runtime::supervisor::kill_all_blocking();
    // A read of stdin that never ends (`quorum mcp` on SIGTERM) holds no exit.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    result
}

impl ModelArgs {
    fn choice(&self) -> ModelChoice {
        ModelChoice {
            spec: self.model.clone(),
            base_url: self.base_url.clone(),
            agent_depth: self.agent_depth,
        }
    }
}

async fn tui_cmd(args: TuiArgs, model: ModelChoice, config: Option<PathBuf>) -> Result<i32> {
    screen::require_terminal()?;
    let mut resume = args.continued.target(None, true)?;
    if resume.is_none() && args.continued.resume.is_some() {
        // `--resume` alone: the person picks one.
        let root = config::root(None)?;
        let dir =
            config::sessions_dir().context("no state directory (set HOME or XDG_STATE_HOME)")?;
        match screen::pick_session(&dir, root.path(), args.all).await? {
            Some(path) => resume = Some(path),
            None => return Ok(0),
        }
    }
    let record = (!args.no_record).then_some(args.record);
    let size = ratatui::crossterm::terminal::size().unwrap_or((80, 24));
    let file = ConfigFile::load(config.as_deref())?;
    let mut session = config::interactive(&file, &model, record, size)?;
    let earlier = screen::Earlier::default();
    if resume.is_some() {
        (session.record, session.resume) = (None, resume);
        session.on_history = Some(earlier.hook());
    }
    let (mut session, events) = Session::start(session, Instant::now())?;
    let _tools = quorum::serve::offer_tools(&session, &file)?;
    let (started, ops, bell) = (session.clock(), session.serve(), file.bell());
    let limit = file.limits().max_transcript_line_bytes;
    let files = screen::Files::new(config::history_path(), session.recording(), limit);
    let result = screen::live(ops, events, earlier, started, bell, files).await;
    session.close_agent_sessions().await;
    session.shutdown();
    if let Some(path) = session.recording() {
        let id = path.file_stem().unwrap_or_default().to_string_lossy();
        quorum::say!(
            "session recorded to {}\n  go on with it: quorum --resume {id} (or quorum -c here)",
            path.display()
        );
    }
    result.map(|()| 0)
}
