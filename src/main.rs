//! The `quorum` binary: its arguments parsed, then one call per command,
//! each command's entry in `cli`.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};

use quorum::cli::{self, CallArgs, with_runtime};
use quorum::config::Location;
use quorum::engine::config::{self, ModelChoice};

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
    budget: cli::BudgetArgs,
    #[command(flatten)]
    tui: cli::tui::TuiArgs,
}

#[derive(clap::Args, Default, Clone)]
struct ModelArgs {
    /// The chat: PROVIDER:NAME (openai:gpt-4o, anthropic:claude-sonnet-4-5,
    /// openai:qwen with --base-url, script:FILE), acp:NAME (an ACP agent of
    /// yours as the chat) or none (no chat). Default: $QUORUM_MODEL, else
    /// [model] name, else the first agent installed (claude, codex, gemini,
    /// opencode, then the others), else a model whose API key is set.
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
    Tui(cli::tui::TuiArgs),
    /// Play a recorded transcript in the TUI, or render it to a screenshot.
    Replay(cli::replay::ReplayArgs),
    /// Run sub-agent calls on an ACP agent without a terminal UI.
    ///
    /// Prints each call's final message. Exit code: 0 when every call ended its turn
    /// normally, 1 when one stopped otherwise (cancelled, refusal, error, ...), 2 when a
    /// call could not run at all, 4 when a spending cap (--max-cost, --max-tokens)
    /// stopped work, 143 or 129 when ended by SIGTERM or SIGHUP.
    Call(CallArgs),
    /// List the known ACP agents and whether they are installed.
    Agents(cli::agents::AgentsArgs),
    /// Print the configuration in effect and where each value came from.
    Config(cli::config::ConfigArgs),
    /// Check what quorum's features need here, line by line: the config, the chat,
    /// git, bubblewrap, the state directory, each installed agent, the terminal,
    /// ssh to each host; and what to do about what is missing.
    ///
    /// Exit code: 0 when nothing failed (warnings allowed), 1 when a check failed.
    Doctor(cli::doctor::DoctorArgs),
    /// Run the chat loop without a terminal UI: one prompt, then the
    /// reports of background tasks.
    ///
    /// Exit code: 0 when the chat ended its turn, 1 when the model failed or the turn
    /// stopped otherwise, 2 on bad configuration, 3 with --no-wait when tasks still run,
    /// 4 when a spending cap stopped work, 143 or 129 when ended by SIGTERM or SIGHUP.
    Run(cli::run::RunArgs),
    /// Send `git diff REV` to several agents for review; print each verdict and the quorum.
    ///
    /// Exit code: 0 green, 1 yellow, 2 red, 3 error (a reviewer failed or gave no verdict),
    /// 4 when a spending cap kept a reviewer from its verdict.
    Review(cli::review::ReviewArgs),
    /// One task to several writers, each in a worktree; each branch reviewed
    /// by the others; the writers compared and the winner named.
    ///
    /// Exit code: 0 a winner, 3 none could be chosen (ties, every writer failed) or an error,
    /// 4 a spending cap stopped work.
    Arena(cli::arena::ArenaArgs),
    /// Turn a Claude Code session log or a Codex rollout into a quorum
    /// transcript (`quorum import claude FILE`, `quorum import codex FILE`).
    ///
    /// Sub-agents become boxes; a report starting with a severity header
    /// tints its box. Record types not known are counted on stderr.
    Import(cli::import::ImportArgs),
    /// List the sessions quorum recorded, newest first.
    ///
    /// This directory's, or every directory's with --all; not an agent's ACP session (`quorum call --resume SESSION_ID`).
    Sessions(cli::sessions::SessionsArgs),
    /// List the worktrees and branches quorum made for writers here; --prune removes
    /// those gone and merged; --fetch takes home what tasks on hosts left there.
    Worktrees(cli::worktrees::WorktreesArgs),
    /// quorum's tools (subagent, subagent_status) as an MCP server on stdio,
    /// for MCP hosts: `claude mcp add quorum -- quorum mcp`.
    Mcp(cli::mcp::McpArgs),
    /// quorum itself as an ACP agent on stdio, for Zed, Toad, acpx and other ACP clients.
    Acp(cli::acp::AcpArgs),
    /// Follow a session another quorum records (`quorum mcp`'s), live and read-only.
    Watch(cli::watch::WatchArgs),
    /// Joins stdio to a session's MCP socket (quorum's conductor agent starts it).
    #[command(name = "mcp-connect", hide = true)]
    McpConnect,
    /// quorum on an agent's host, relaying it home (quorum starts it over ssh).
    #[command(hide = true)]
    Proxy(cli::proxy::ProxyArgs),
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
        Err(e) if cli::is_broken_pipe(&e) => std::process::exit(0),
        Err(e) => {
            quorum::say!("quorum: {}", config::error_message(e.as_ref()));
            std::process::exit(2);
        }
    }
}

fn run(cli: Cli, outer: Option<String>) -> Result<i32> {
    // A panic ends every process quorum started.
    quorum::runtime::supervisor::kill_all_on_panic();
    let location = Location::find(cli.config.clone());
    let config = location.path.clone();
    // The model and budget options are global: they apply wherever they
    // are given.
    let model = cli.model.choice();
    cli.budget.apply();
    let code = match cli.command {
        Some(Command::Config(args)) => cli::config::command(args, &location, &model)?,
        Some(Command::Doctor(a)) => with_runtime(cli::doctor::command(a, &location, model))?,
        Some(Command::Call(args)) => with_runtime(args.command(config))?,
        Some(Command::Run(a)) => with_runtime(cli::run::command(a, model, config))?,
        Some(Command::Agents(args)) => with_runtime(cli::agents::command(args, config))?,
        Some(Command::Review(args)) => with_runtime(cli::review::command(args, config))?,
        Some(Command::Arena(args)) => with_runtime(cli::arena::command(args, config))?,
        Some(Command::Import(args)) => cli::import::command(args)?,
        Some(Command::Sessions(args)) => cli::sessions::command(args)?,
        Some(Command::Worktrees(a)) => with_runtime(cli::worktrees::command(a, config))?,
        Some(Command::Mcp(a)) => with_runtime(cli::mcp::command(a, config, model, outer))?,
        Some(Command::Acp(args)) => with_runtime(cli::acp::command(args, config, model))?,
        Some(Command::McpConnect) => with_runtime(cli::mcp_connect::command())?,
        Some(Command::Proxy(a)) => with_runtime(cli::proxy::command(a))?,
        Some(Command::Watch(args)) => with_runtime(cli::watch::command(args, config))?,
        Some(Command::Replay(args)) => cli::replay::command(args, config)?,
        Some(Command::Tui(args)) => with_runtime(cli::tui::command(args, model, config))?,
        None => with_runtime(cli::tui::command(cli.tui, model, config))?,
    };
    Ok(code)
}

impl ModelArgs {
    fn choice(&self) -> ModelChoice {
        ModelChoice {
            spec: self.model.clone(),
            base_url: self.base_url.clone(),
            agent_depth: self.agent_depth,
            chosen_only: false,
        }
    }
}
