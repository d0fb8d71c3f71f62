//! `quorum arena`: one task to several writers, each in a git worktree of
//! its own; once every one has finished, each branch is reviewed by a
//! quorum of the other agents (`--reviewers`, `[arena] reviewers`) and the
//! writers are compared by the winner rule (`event::arena`). Prints the
//! table (or JSON with `winner` and `rows`); the exit code says whether a
//! winner could be chosen.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use serde_json::json;

use super::progress::{Printer, Progress};
use super::{Setup, interrupts};
use crate::agent::Permissions;
use crate::engine::{Session, config};
use crate::event::arena::{ArenaRow, CheckCell, Comparison};
use crate::subagent::input::{Isolation, SubAgentCallInput, TaskInput};

/// Exit code: a winner was chosen.
pub const EXIT_WINNER: i32 = 0;
/// Exit code: no winner could be chosen (ties, every writer failed), or
/// the arena could not run.
pub const EXIT_NONE: i32 = 3;

/// `quorum arena`'s options.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ArenaArgs {
    /// The writers, comma-separated: each gets the task in a worktree of
    /// its own.
    #[arg(long, value_delimiter = ',', value_name = "A,B,C", required = true)]
    pub agents: Vec<String>,
    /// Who reviews each branch (default: `[arena] reviewers`, else every
    /// installed agent; a writer never reviews its own branch).
    #[arg(long, value_delimiter = ',', value_name = "R,S")]
    pub reviewers: Vec<String>,
    /// Print one JSON object: `winner` (`{"agent", "branch"}` or null),
    /// `ties`, `reason`, and a row per writer.
    #[arg(long)]
    pub json: bool,
    /// Answer for permission requests of agents whose policy is `ask`.
    #[arg(long, value_enum, default_value = "none")]
    pub approve: Permissions,
    /// The repository (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Record the events to this transcript file.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// The task.
    pub task: String,
}

/// `quorum arena`: runs it, prints the comparison, returns the exit code.
pub async fn command(args: ArenaArgs, config: Option<PathBuf>) -> Result<i32> {
    config::init_logging();
    let setup = Setup {
        config,
        cwd: args.cwd.clone(),
        approve: args.approve,
        record: args.record.clone(),
        resume: None,
        elicit: crate::agent::Elicit::Decline,
    };
    let mut session = match setup
        .config_file()
        .and_then(|file| Ok(setup.session(&file, None)?))
    {
        Ok(s) => s,
        Err(e) => {
            crate::say!("quorum: {}", config::error_message(e.as_ref()));
            return Ok(EXIT_NONE);
        }
    };
    for agent in args.agents.iter().chain(&args.reviewers) {
        if let Err(e) = session.registry.get(agent) {
            crate::say!("quorum: {e}");
            return Ok(EXIT_NONE);
        }
    }
    if !args.reviewers.is_empty() {
        session.arena_reviewers = Some(args.reviewers.clone());
    }
    let (session, events) = Session::start(session, Instant::now())?;
    let mut progress = Progress::default();
    let printer = Printer::spawn(events, move |event| progress.print(&event.event));
    let compared = run(&session, &args).await;
    session.close_agent_sessions().await;
    session.shutdown();
    printer.finish().await;
    Ok(match compared {
        Ok(c) => print(&c, args.json),
        Err(e) => {
            crate::say!("quorum: {e}");
            EXIT_NONE
        }
    })
}

/// The writers' batch, compared.
async fn run(session: &Session, args: &ArenaArgs) -> Result<Comparison, String> {
    let input = SubAgentCallInput {
        tasks: Some(
            args.agents
                .iter()
                .map(|agent| TaskInput {
                    agent: Some(agent.clone()),
                    input: args.task.clone(),
                    ..TaskInput::default()
                })
                .collect(),
        ),
        isolation: Some(Isolation::Worktree),
        compare: true,
        continue_session: false,
        ..SubAgentCallInput::default()
    };
    let mut interrupts = interrupts();
    let mut interrupted = false;
    let call = session.call(input);
    tokio::pin!(call);
    let reply = loop {
        tokio::select! {
            reply = &mut call => break reply,
            Some(interrupt) = interrupts.recv() => {
                if interrupt.handle(&mut interrupted, || session.cancel_all()).is_some() {
                    return Err("interrupted".into());
                }
            }
        }
    };
    match reply.map_err(|e| e.to_string())? {
        crate::subagent::dispatch::Reply::Batch(batch) => batch
            .comparison
            .ok_or_else(|| "the writers could not be compared".to_string()),
        other => Err(format!("not an arena: {other:?}")),
    }
}

/// Prints the comparison (text or JSON); returns the exit code.
fn print(c: &Comparison, as_json: bool) -> i32 {
    let code = if c.winner.is_some() {
        EXIT_WINNER
    } else {
        EXIT_NONE
    };
    if as_json {
        let value = json!({
            "winner": c.best().map(|r| json!({"agent": r.agent, "branch": r.branch})),
            "ties": c.ties.iter().filter_map(|&i| c.rows.get(i)).map(|r| &r.agent).collect::<Vec<_>>(),
            "reason": c.reason,
            "rows": c.rows,
            "exit_code": code,
        });
        println!("{value:#}");
    } else {
        print!("{}", table(c));
    }
    code
}

/// The comparison as a plain table, a row per writer, the winner starred.
pub fn table(c: &Comparison) -> String {
    let mut out = format!(
        "{:<2}{:<22}{:<10}{:<9}{:<12}{:<18}{:>6}{:>8}{:>9}{:>7}\n",
        "", "writer", "check", "verdict", "findings", "diff", "tests", "cost", "tokens", "time"
    );
    for (i, r) in c.rows.iter().enumerate() {
        let mark = if c.winner == Some(i) {
            "★ "
        } else if c.ties.contains(&i) {
            "= "
        } else {
            "  "
        };
        out.push_str(&format!("{mark}{:<22}", format!("{} {}", r.agent, r.label)));
        match &r.failed {
            Some(why) => out.push_str(&format!("failed: {}\n", one_line(why))),
            None => out.push_str(&cells(r)),
        }
    }
    out.push_str(&match c.best() {
        Some(r) => format!("winner: {} ({}): {}\n", r.agent, r.branch, c.reason),
        None => format!("no winner: {}\n", c.reason),
    });
    out
}

/// A row's cells after the writer's.
fn cells(r: &ArenaRow) -> String {
    let f = r.findings;
    let findings = match (f.red, f.yellow) {
        (0, 0) => "none".to_string(),
        (red, 0) => format!("{red} red"),
        (0, y) => format!("{y} yellow"),
        (red, y) => format!("{red} red {y} yel"),
    };
    format!(
        "{:<10}{:<9}{:<12}{:<18}{:>6}{:>8}{:>9}{:>7}\n",
        r.check.as_ref().map_or("-".to_string(), CheckCell::label),
        r.verdict.map_or("-", |v| v.as_str()),
        findings,
        r.diffstat.to_string(),
        r.tests_touched,
        r.cost.map_or("-".to_string(), |c| format!("${c:.2}")),
        r.tokens,
        format!("{}s", r.ms / 1000),
    )
}

fn one_line(s: &str) -> String {
    crate::confine::sanitize::one_line(s)
}
