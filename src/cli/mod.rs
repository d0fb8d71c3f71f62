//! The headless front ends: `quorum call` (sub-agent calls, final
//! messages on stdout), `quorum run` (the chat loop, its text on stdout
//! or every event as JSON) and `quorum sessions` (the recorded sessions).
//! Progress goes to stderr; agent text is untrusted and sanitised before it
//! reaches the terminal.

pub mod acp;
pub mod agents;
pub mod arena;
mod call;
pub mod config;
pub mod doctor;
pub mod import;
pub mod mcp;
pub mod mcp_connect;
mod progress;
pub mod proxy;
pub mod replay;
mod resume;
pub mod review;
pub mod run;
pub mod sessions;
pub mod tui;
pub mod watch;
pub mod worktrees;

use std::path::PathBuf;

use anyhow::{Context, Result};
use tokio::sync::mpsc;

pub use call::{CallArgs, CallRequest, call, call_command};
pub use resume::ContinueArgs;

use crate::agent::{Elicit, Permissions};
use crate::config::ConfigFile;
use crate::engine::config::{ModelChoice, model_picks_path, registry, root};
use crate::engine::{SessionConfig, SetupError};

/// Exit code: every call ended its turn.
pub const EXIT_OK: i32 = 0;
/// Exit code: a call stopped otherwise (cancelled, refusal, error, ...).
pub const EXIT_STOPPED: i32 = 1;
/// Exit code: a call could not run (unknown agent, bad config or input).
pub const EXIT_CANNOT_RUN: i32 = 2;
/// Exit code for `quorum run --no-wait` with tasks still running.
pub const EXIT_TASKS_RUNNING: i32 = 3;
/// Exit code: a spending cap stopped work (`--max-cost`, `--max-tokens`,
/// `[budget]`, a call's `max_cost`).
pub const EXIT_BUDGET: i32 = 4;

/// `code`, or [`EXIT_BUDGET`] when a spending cap `stopped` work; a
/// signal's code (130, 143, 129) says more and stays.
pub fn or_budget(code: i32, stopped: bool) -> i32 {
    if stopped && code < 100 {
        EXIT_BUDGET
    } else {
        code
    }
}
/// Exit code after a second Ctrl+C.
pub const EXIT_INTERRUPTED: i32 = 130;

/// The options every headless command shares.
#[derive(clap::Args)]
pub struct HeadlessArgs {
    /// Answer for permission requests of agents whose policy is `ask`.
    #[arg(long, value_enum, default_value = "none")]
    pub approve: Permissions,
    /// The session directory: the agent runs there and may only read and
    /// write inside it (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Record the events to this transcript file.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Answer for questions agents ask (elicitations): decline them, or
    /// accept a form with its defaults when every required field has one.
    #[arg(long, value_enum, default_value = "decline", value_name = "ANSWER")]
    pub elicit: Elicit,
}

impl HeadlessArgs {
    pub fn setup(self, config: Option<PathBuf>) -> Setup {
        Setup {
            config,
            cwd: self.cwd,
            approve: self.approve,
            record: self.record,
            resume: None,
            elicit: self.elicit,
        }
    }
}

/// The spending caps of the command line: over the config file's
/// `[budget]`, for whichever command runs a session.
#[derive(clap::Args, Default, Clone)]
pub struct BudgetArgs {
    /// The most the whole session may cost, in USD (the chat, every agent,
    /// nested sub-agents): once reached, no new call starts. Over
    /// [budget] session_usd.
    #[arg(long, global = true, value_name = "USD", value_parser = usd)]
    pub max_cost: Option<f64>,
    /// The most tokens the session may use. Over [budget] tokens.
    #[arg(long, global = true, value_name = "N", value_parser = tokens)]
    pub max_tokens: Option<u64>,
}

impl BudgetArgs {
    /// Hands them to every session this process builds.
    pub fn apply(&self) {
        crate::engine::config::set_command_line_caps(self.max_cost, self.max_tokens);
    }
}

fn usd(s: &str) -> Result<f64, String> {
    let value: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not an amount in USD, like 2.50"))?;
    crate::event::budget::check_usd("--max-cost", value)
}

fn tokens(s: &str) -> Result<u64, String> {
    let value: u64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of tokens"))?;
    crate::event::budget::check_tokens("--max-tokens", value)
}

/// Where and how a headless session runs.
pub struct Setup {
    /// The config file (`None`: none), read once by the command
    /// ([`Setup::config_file`]) and handed on.
    pub config: Option<PathBuf>,
    /// `--cwd`: the session directory.
    pub cwd: Option<PathBuf>,
    /// `--approve`: the answer to permission requests.
    pub approve: Permissions,
    /// `--record FILE`.
    pub record: Option<PathBuf>,
    /// `--continue`, `--resume`: the recorded session to go on with.
    pub resume: Option<PathBuf>,
    /// `--elicit`: the answer to agents' questions.
    pub elicit: Elicit,
}

impl Setup {
    /// The config file, read and checked: once per command, which hands it
    /// on.
    pub fn config_file(&self) -> Result<ConfigFile> {
        Ok(ConfigFile::load(self.config.as_deref())?)
    }

    /// The session, its settings from `file`.
    fn session(
        self,
        file: &ConfigFile,
        model: Option<&ModelChoice>,
    ) -> Result<SessionConfig, SetupError> {
        let registry = registry(file)?;
        let mut session = SessionConfig::new(registry, root(self.cwd.as_deref())?);
        session.take_settings(file);
        session.permissions = self.approve;
        session.record = self.record;
        session.resume = self.resume;
        session.elicit = self.elicit;
        session.model_picks = model_picks_path();
        if let Some(choice) = model {
            session.choose_model(choice, file)?;
        }
        Ok(session)
    }
}

/// `--panel`: the side panel of background tasks.
#[derive(Clone, Copy, clap::ValueEnum, Default)]
pub enum PanelArg {
    /// Shown when the terminal is at least 100 columns wide.
    #[default]
    Auto,
    On,
    Off,
}

impl PanelArg {
    pub fn open(self) -> Option<bool> {
        match self {
            PanelArg::Auto => None,
            PanelArg::On => Some(true),
            PanelArg::Off => Some(false),
        }
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
pub fn with_runtime<T>(f: impl Future<Output = Result<T>>) -> Result<T> {
    let runtime = crate::runtime::builder()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(f);
    crate::runtime::supervisor::kill_all_blocking();
    // A read of stdin that never ends (`quorum mcp` on SIGTERM) holds no exit.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    result
}

/// Whether `e` is a closed stdout (`| head`): no error.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    let broken = |io: &std::io::Error| io.kind() == std::io::ErrorKind::BrokenPipe;
    e.chain().any(|c| c.downcast_ref().is_some_and(broken))
}

/// Why a headless command should stop early.
pub enum Interrupt {
    /// Ctrl+C: cancel; a second one quits.
    Cancel,
    /// SIGTERM or SIGHUP: cancel and quit.
    Quit(i32),
}

impl Interrupt {
    /// Acts on one interrupt: the first Ctrl+C runs `cancel` and the work
    /// goes on (`None`); a second one, or SIGTERM or SIGHUP, ends it with
    /// the exit code returned.
    fn handle(self, interrupted: &mut bool, cancel: impl FnOnce()) -> Option<i32> {
        match self {
            Interrupt::Cancel if !*interrupted => {
                *interrupted = true;
                crate::say!("quorum: cancelling (Ctrl+C again to quit at once)");
                cancel();
                None
            }
            Interrupt::Cancel => {
                crate::say!("quorum: interrupted twice, exiting");
                Some(EXIT_INTERRUPTED)
            }
            Interrupt::Quit(exit) => {
                crate::say!("quorum: terminated by a signal; stopping the agents");
                Some(exit)
            }
        }
    }
}

/// The interrupts a headless command listens to: Ctrl+C, SIGTERM, SIGHUP.
pub fn interrupts() -> mpsc::UnboundedReceiver<Interrupt> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let terminated = crate::runtime::cancel::termination_signal();
        tokio::pin!(terminated);
        loop {
            let interrupt = tokio::select! {
                pressed = tokio::signal::ctrl_c() => match pressed {
                    Ok(()) => Interrupt::Cancel,
                    Err(_) => return,
                },
                code = &mut terminated => Interrupt::Quit(code),
            };
            let quit = matches!(interrupt, Interrupt::Quit(_));
            if tx.send(interrupt).is_err() || quit {
                return;
            }
        }
    });
    rx
}
