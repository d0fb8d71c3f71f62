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
    /// `ties`, `reason`, `reviews_ms`, and a row per writer (`--format
    /// json`).
    #[arg(long)]
    pub json: bool,
    /// What to print: the table, JSON, or a Markdown table (for a pull
    /// request or an issue).
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
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

/// What `quorum arena` prints.
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Format {
    #[default]
    Text,
    Json,
    Markdown,
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
    let stopped = session.budget_stopped();
    session.close_agent_sessions().await;
    session.shutdown();
    printer.finish().await;
    let code = match compared {
        Ok(c) => {
            let code = match c.winner {
                Some(_) => EXIT_WINNER,
                None => EXIT_NONE,
            };
            let code = super::or_budget(code, stopped);
            print(&c, if args.json { Format::Json } else { args.format }, code);
            let unreviewed: Vec<&str> = c
                .rows
                .iter()
                .filter(|r| r.failed.is_none() && r.verdict.is_none())
                .map(|r| r.label.as_str())
                .collect();
            if stopped && !unreviewed.is_empty() {
                crate::say!(
                    "quorum: the budget kept {} from being reviewed: {}",
                    if unreviewed.len() == 1 {
                        "a branch"
                    } else {
                        "branches"
                    },
                    unreviewed.join(", ")
                );
            }
            code
        }
        Err(e) => {
            crate::say!("quorum: {e}");
            super::or_budget(EXIT_NONE, stopped)
        }
    };
    Ok(code)
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

/// Prints the comparison as `format` says, with the exit `code` it gets.
fn print(c: &Comparison, format: Format, code: i32) {
    match format {
        Format::Json => {
            let value = json!({
                "winner": c.best().map(|r| json!({"agent": r.agent, "branch": r.branch})),
                "ties": c.ties.iter().filter_map(|&i| c.rows.get(i)).map(|r| &r.agent).collect::<Vec<_>>(),
                "reason": c.reason,
                "reviews_ms": c.reviews_ms,
                "rows": c.rows,
                "exit_code": code,
            });
            println!("{value:#}");
        }
        Format::Markdown => print!("{}", markdown(c)),
        Format::Text => print!("{}", table(c)),
    }
}

/// The comparison as a Markdown table: a row per writer, the winner in
/// bold and starred, the verdict on the last line. What an agent wrote is
/// one line, its `|` escaped.
pub fn markdown(c: &Comparison) -> String {
    let cell = |s: &str| one_line(s).replace('|', "\\|");
    let mut out = format!(
        "### Arena: {}\n\n| | writer | check | verdict | findings | diff | tests | cost | tokens | time |\n\
         |---|---|---|---|---|---|---:|---:|---:|---:|\n",
        cell(&c.task)
    );
    for (i, r) in c.rows.iter().enumerate() {
        let (mark, writer) = match (c.winner == Some(i), c.ties.contains(&i)) {
            (true, _) => ("★", format!("**{} {}**", cell(&r.agent), cell(&r.label))),
            (_, true) => ("=", format!("{} {}", cell(&r.agent), cell(&r.label))),
            _ => ("", format!("{} {}", cell(&r.agent), cell(&r.label))),
        };
        let rest = match &r.failed {
            Some(why) => format!("failed: {} | | | | | | | |", cell(why)),
            None => {
                let c = Cells::of(r);
                format!(
                    "{} | {} | {} | {} | {} | {} | {} | {}",
                    c.check,
                    c.verdict,
                    c.findings,
                    c.diff,
                    r.tests_touched,
                    c.cost,
                    r.tokens,
                    c.time
                )
            }
        };
        out.push_str(&format!("| {mark} | {writer} | {rest} |\n"));
    }
    out.push_str(&format!("\n{}\n", cell(&verdict_line(c))));
    out
}

/// The last line: the winner and why, or why there is none; how long the
/// reviews took.
fn verdict_line(c: &Comparison) -> String {
    let verdict = match c.best() {
        Some(r) => format!("winner: {} ({}): {}", r.agent, r.branch, c.reason),
        None => format!("no winner: {}", c.reason),
    };
    format!(
        "{verdict} · reviews took {:.1} s after the last writer ended",
        c.reviews_ms as f64 / 1000.0
    )
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
    out.push_str(&verdict_line(c));
    out.push('\n');
    out
}

/// A row's cells after the writer's, as text.
struct Cells {
    check: String,
    verdict: &'static str,
    findings: String,
    diff: String,
    cost: String,
    time: String,
}

impl Cells {
    fn of(r: &ArenaRow) -> Self {
        let f = r.findings;
        Self {
            check: r.check.as_ref().map_or("-".to_string(), CheckCell::label),
            verdict: r.verdict.map_or("-", |v| v.as_str()),
            findings: match (f.red, f.yellow) {
                (0, 0) => "none".to_string(),
                (red, 0) => format!("{red} red"),
                (0, y) => format!("{y} yellow"),
                (red, y) => format!("{red} red {y} yel"),
            },
            diff: r.diffstat.to_string(),
            cost: r.cost.map_or("-".to_string(), |c| format!("${c:.2}")),
            time: format!("{}s", r.ms / 1000),
        }
    }
}

/// A row's cells after the writer's, as the text table's columns.
fn cells(r: &ArenaRow) -> String {
    let c = Cells::of(r);
    format!(
        "{:<10}{:<9}{:<12}{:<18}{:>6}{:>8}{:>9}{:>7}\n",
        c.check, c.verdict, c.findings, c.diff, r.tests_touched, c.cost, r.tokens, c.time,
    )
}

fn one_line(s: &str) -> String {
    crate::confine::sanitize::one_line(s)
}
