//! `quorum review`: the repository's changes (`git diff REV`) sent to
//! several agents as one batch of code reviews; each verdict and their
//! quorum are printed (`--format`: text, JSON, SARIF, a pull request's
//! comment or review, made by `crate::review`), and the exit code says the
//! quorum's verdict (`--fail-on`), so CI can use it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Result;

use super::progress::{Printer, Progress};
use super::{Setup, interrupts};
use crate::agent::Permissions;
use crate::confine::sanitize::sanitize;
use crate::engine::{Session, config};
use crate::event::{Quorum, Severity, StopReason};
use crate::review::{DiffLines, Review, Reviewer};
use crate::subagent::dispatch::Reply;
use crate::subagent::dispatch::batch::BatchResult;
use crate::subagent::input::{SubAgentCallInput, TaskInput};

/// Exit code: the quorum is green.
pub const EXIT_GREEN: i32 = 0;
/// Exit code: the quorum is yellow.
pub const EXIT_YELLOW: i32 = 1;
/// Exit code: a reviewer said red.
pub const EXIT_RED: i32 = 2;
/// Exit code: the review could not be made (no diff to read, no agent,
/// bad config), or a reviewer failed or gave no verdict and none said red.
pub const EXIT_ERROR: i32 = 3;

/// `quorum review`'s options.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ReviewArgs {
    /// The reviewers, comma-separated (default: every installed agent).
    #[arg(long, value_delimiter = ',', value_name = "A,B")]
    pub agents: Vec<String>,
    /// Review `git diff REV` (default: HEAD, the working tree against the
    /// last commit; untracked files are not part of it).
    #[arg(long, value_name = "REV")]
    pub base: Option<String>,
    /// Review branch B (a worktree task's, say) against the point where it
    /// left its base; the quorum's verdict is recorded against the branch
    /// (a red one keeps `/merge` from merging it).
    #[arg(long, value_name = "B", conflicts_with = "base")]
    pub branch: Option<String>,
    /// The quorum checks itself: each red or yellow finding only one
    /// reviewer made goes to another reviewer, who confirms or refutes it;
    /// a refuted finding is shown struck and does not count toward the
    /// verdict (nor the exit code).
    #[arg(long)]
    pub verify: bool,
    /// Print one JSON object: the summary, each review, the quorum, the
    /// findings and the exit code (`--format json`).
    #[arg(long)]
    pub json: bool,
    /// How to print the review: `text` (each verdict, the quorum, the
    /// findings), `json` (as `--json`), `sarif` (SARIF 2.1.0, for code
    /// scanning), `markdown` (a pull request's comment), `github` (the body
    /// of GitHub's "create a review" request, for `gh api`).
    #[arg(long, value_enum, default_value = "text", conflicts_with = "json")]
    pub format: Format,
    /// The verdict from which the exit code is not 0: `yellow` (yellow 1,
    /// red 2) or `red` (yellow 0, red 2). A review that could not be made,
    /// or a reviewer that failed, exits 3 either way.
    #[arg(long, value_enum, default_value = "yellow", value_name = "VERDICT")]
    pub fail_on: FailOn,
    /// Also write the review in FORMAT to FILE (repeatable: one review,
    /// `--write sarif=review.sarif --write markdown=comment.md`).
    #[arg(long, value_name = "FORMAT=FILE", value_parser = parse_write)]
    pub write: Vec<(Format, PathBuf)>,
    /// Answer for permission requests of agents whose policy is `ask`.
    #[arg(long, value_enum, default_value = "none")]
    pub approve: Permissions,
    /// The repository (default: the current directory); the agents run
    /// there and may only read and write inside it.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Record the events to this transcript file.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
}

/// How `quorum review` prints the review.
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Format {
    #[default]
    Text,
    Json,
    Sarif,
    Markdown,
    Github,
}

/// The verdict from which `quorum review` exits non-zero.
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FailOn {
    #[default]
    Yellow,
    Red,
}

impl FailOn {
    /// [`exit_code`]'s code as this makes it: with `red`, yellow exits 0.
    pub fn exit(self, code: i32) -> i32 {
        match (self, code) {
            (FailOn::Red, EXIT_YELLOW) => EXIT_GREEN,
            _ => code,
        }
    }
}

/// `FORMAT=FILE` of `--write`.
fn parse_write(s: &str) -> Result<(Format, PathBuf), String> {
    use clap::ValueEnum;
    let (format, file) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}`: FORMAT=FILE, say `sarif=review.sarif`"))?;
    let format = Format::from_str(format, false)?;
    if file.is_empty() {
        return Err(format!("`{s}`: no FILE after `=`"));
    }
    Ok((format, PathBuf::from(file)))
}

impl ReviewArgs {
    /// `--format`, or `json` for `--json`.
    fn output(&self) -> Format {
        if self.json { Format::Json } else { self.format }
    }
}

/// The exit code of a quorum: red wins; otherwise a failed reviewer (or
/// one without a verdict) is an error; otherwise yellow or green.
pub fn exit_code(quorum: &Quorum) -> i32 {
    match quorum.verdict {
        Some(Severity::Red) => EXIT_RED,
        _ if quorum.incomplete() => EXIT_ERROR,
        Some(Severity::Yellow) => EXIT_YELLOW,
        Some(Severity::Green) => EXIT_GREEN,
        None => EXIT_ERROR,
    }
}

/// `git diff REV` in `dir`, hardened (`runtime::git`: no hook, fsmonitor
/// or external diff), without textconv, and `REV` only ever a revision.
fn diff(dir: &Path, rev: &str) -> Result<String, String> {
    let out = crate::runtime::git::run(crate::runtime::git::in_dir(dir).args([
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--end-of-options",
        rev,
        "--",
    ]))
    .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`git diff {rev}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The message every reviewer gets (the review contract follows it).
pub fn prompt(dir: &Path, rev: &str, diff: &str) -> String {
    format!(
        "Review this change to the repository in {} (the output of `git diff {rev}`). Look for \
         bugs, security problems and anything that must be fixed before it is merged; read the \
         surrounding code when the diff alone does not say enough.\n\n```diff\n{}\n```",
        dir.display(),
        diff.trim_end()
    )
}

/// `quorum review`: prints each verdict and the quorum; returns the exit
/// code.
pub async fn command(args: ReviewArgs, config: Option<PathBuf>) -> Result<i32> {
    config::init_logging();
    let setup = Setup {
        config,
        cwd: args.cwd.clone(),
        approve: args.approve,
        record: args.record.clone(),
        resume: None,
        elicit: crate::agent::Elicit::Decline,
    };
    let session = match setup
        .config_file()
        .and_then(|file| Ok(setup.session(&file, None)?))
    {
        Ok(s) => s,
        Err(e) => {
            crate::say!("quorum: {}", config::error_message(e.as_ref()));
            return Ok(EXIT_ERROR);
        }
    };
    let dir = session.root.path().to_path_buf();
    let (agents, rev, diff) = match reviewers(&args, &session.registry).and_then(|agents| {
        let rev = revision(&args, &dir)?;
        let diff = diff(&dir, &rev)?;
        Ok((agents, rev, diff))
    }) {
        Ok(found) => found,
        Err(e) => {
            crate::say!("quorum: {e}");
            return Ok(EXIT_ERROR);
        }
    };
    if diff.trim().is_empty() {
        crate::say!("quorum: nothing to review: `git diff {rev}` is empty");
        let empty = Review {
            base: rev.clone(),
            verdict: Some(Severity::Green),
            agreed: "nothing to review".into(),
            ..Review::default()
        };
        return Ok(print(&args, None, &empty, EXIT_GREEN));
    }
    let input = review_input(&args, &agents, (&dir, &rev, &diff));
    let (session, events) = Session::start(session, Instant::now())?;
    let mut progress = Progress::default();
    let printer = Printer::spawn(events, move |event| progress.print(&event.event));
    let code = run(&session, input, (&rev, &diff), &args).await;
    session.close_agent_sessions().await;
    session.shutdown();
    printer.finish().await;
    // A review left without some reviewer's verdict because a spending cap
    // stopped it says so (a red verdict still says red).
    if code == EXIT_ERROR && session.budget_stopped() {
        return Ok(super::EXIT_BUDGET);
    }
    Ok(code)
}

/// The reviewers: `--agents` (each known), or every installed agent.
fn reviewers(
    args: &ReviewArgs,
    registry: &crate::acp::registry::Registry,
) -> Result<Vec<String>, String> {
    let agents: Vec<String> = if args.agents.is_empty() {
        let installed = registry.installed();
        installed.iter().map(|a| a.name.clone()).collect()
    } else {
        args.agents.clone()
    };
    if agents.is_empty() {
        return Err("no agent is installed to review with (see `quorum agents`)".into());
    }
    for agent in &agents {
        if let Err(e) = registry.get(agent) {
            return Err(format!("--agents: {e}"));
        }
    }
    Ok(agents)
}

/// What `git diff` reviews: `--branch B` from where it left its base,
/// else `--base REV`, else `HEAD`.
fn revision(args: &ReviewArgs, dir: &Path) -> Result<String, String> {
    Ok(match &args.branch {
        Some(branch) => match crate::worktree::Repo::find(dir).and_then(|r| r.fork_point(branch)) {
            Ok(base) => format!("{base}...{branch}"),
            Err(e) => return Err(format!("--branch {branch}: {e}")),
        },
        None => args.base.clone().unwrap_or_else(|| "HEAD".to_string()),
    })
}

/// The batch of reviews: one task per reviewer, each a fresh session.
fn review_input(
    args: &ReviewArgs,
    agents: &[String],
    (dir, rev, diff): (&Path, &str, &str),
) -> SubAgentCallInput {
    let message = match &args.branch {
        // The dispatcher adds the branch's diff, and records the verdict.
        Some(branch) => format!(
            "Review the change on branch `{branch}` of the repository in {}. Look for bugs, \
             security problems and anything that must be fixed before it is merged.",
            dir.display()
        ),
        None => prompt(dir, rev, diff),
    };
    SubAgentCallInput {
        tasks: Some(
            agents
                .iter()
                .map(|agent| TaskInput {
                    agent: Some(agent.clone()),
                    input: message.clone(),
                    ..TaskInput::default()
                })
                .collect(),
        ),
        code_review: true,
        verify: args.verify,
        branch: args.branch.clone(),
        // Sessions last one invocation: every reviewer starts fresh.
        continue_session: false,
        ..SubAgentCallInput::default()
    }
}

/// Runs the review batch, prints its results and returns the exit code.
async fn run(
    session: &Session,
    input: SubAgentCallInput,
    (rev, diff): (&str, &str),
    args: &ReviewArgs,
) -> i32 {
    let mut interrupts = interrupts();
    let mut interrupted = false;
    let call = session.call(input);
    tokio::pin!(call);
    let reply = loop {
        tokio::select! {
            reply = &mut call => break reply,
            Some(interrupt) = interrupts.recv() => {
                if let Some(exit) = interrupt.handle(&mut interrupted, || session.cancel_all()) {
                    return exit;
                }
            }
        }
    };
    let batch = match reply {
        Ok(Reply::Batch(batch)) => batch,
        Ok(other) => unreachable!("a foreground batch: {other:?}"),
        Err(e) => {
            crate::say!("quorum: {e}");
            return EXIT_ERROR;
        }
    };
    let code = args
        .fail_on
        .exit(batch.quorum.as_ref().map_or(EXIT_ERROR, exit_code));
    let review = review_of(&batch, rev, diff);
    print(args, Some(&batch), &review, code)
}

/// What the formats read of a finished review batch. Each reviewer's
/// findings and the quorum's merged ones are empty until reviews carry
/// them (issue 38's findings in every review, and their merging).
fn review_of(batch: &BatchResult, rev: &str, diff: &str) -> Review {
    let quorum = batch.quorum.as_ref();
    Review {
        base: rev.to_string(),
        verdict: quorum.and_then(|q| q.verdict),
        agreed: quorum.map_or_else(String::new, |q| match q.refuted_label() {
            // What checking refuted, and how the verdict changed.
            Some(_) => format!("{} of {} · {}", q.agree, q.total, q.verdict_text()),
            None => format!("{} of {}", q.agree, q.total),
        }),
        reviewers: batch
            .tasks
            .iter()
            .map(|t| Reviewer {
                name: t.agent.clone(),
                verdict: t.severity(),
                failed: !t.succeeded(),
                findings: t
                    .result
                    .as_ref()
                    .map(|o| o.findings.clone())
                    .unwrap_or_default(),
            })
            .collect(),
        merged: quorum.map(|q| q.findings.clone()).unwrap_or_default(),
        diff: Some(DiffLines::parse(diff)),
    }
}

/// Prints the review in `--format` and writes each `--write`; returns
/// `code`, or [`EXIT_ERROR`] when a file could not be written.
fn print(args: &ReviewArgs, batch: Option<&BatchResult>, review: &Review, code: i32) -> i32 {
    // A reader gone (`| head`) leaves the exit code as it is.
    let _ = write!(
        std::io::stdout(),
        "{}",
        render(args.output(), batch, review, code)
    );
    for (format, file) in &args.write {
        if let Err(e) = std::fs::write(file, render(*format, batch, review, code)) {
            crate::say!("quorum: --write {}: {e}", file.display());
            return EXIT_ERROR;
        }
    }
    code
}

/// The review in `format` (SARIF and GitHub's JSON pretty-printed; all of
/// it made safe for a terminal). `batch` is none when there was nothing
/// to review.
fn render(format: Format, batch: Option<&BatchResult>, review: &Review, code: i32) -> String {
    let json = |v: serde_json::Value| {
        let text = serde_json::to_string_pretty(&v).expect("JSON");
        format!("{}\n", crate::confine::sanitize::json(&text))
    };
    match format {
        Format::Text => match batch {
            Some(batch) => report(batch) + &crate::review::text::findings(review),
            None => String::new(),
        },
        Format::Json => {
            let mut v = match batch {
                Some(batch) => serde_json::to_value(batch).expect("a batch is JSON"),
                None => serde_json::json!({ "tasks": [] }),
            };
            v["base"] = review.base.as_str().into();
            v["exit_code"] = code.into();
            v["findings"] = serde_json::to_value(review.findings()).expect("findings are JSON");
            let tasks = v["tasks"].as_array_mut().into_iter().flatten();
            for (task, reviewer) in tasks.zip(&review.reviewers) {
                task["findings"] =
                    serde_json::to_value(&reviewer.findings).expect("findings are JSON");
            }
            format!("{}\n", crate::confine::sanitize::json(&v.to_string()))
        }
        Format::Sarif => json(crate::review::sarif::sarif(review)),
        Format::Github => json(crate::review::github::github(review)),
        Format::Markdown => sanitize(&crate::review::markdown::markdown(review)).into_owned(),
    }
}

/// The first line of a report that says something: not blank, not an
/// HTML comment (a finding's), and not a heading when there is more.
fn first_line(report: &str) -> String {
    let mut lines = report
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("<!--"));
    let first = lines.clone().next().unwrap_or("");
    lines
        .find(|l| !l.starts_with('#'))
        .unwrap_or(first)
        .to_string()
}

/// Each review on a line (agent, verdict, the report's first line or
/// what went wrong), then the quorum.
pub fn report(batch: &BatchResult) -> String {
    let width = batch
        .tasks
        .iter()
        .map(|t| t.agent.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for task in &batch.tasks {
        let (verdict, text) = match &task.result {
            Ok(o) if o.stop_reason == StopReason::EndTurn => (
                o.severity.map_or("none", Severity::as_str).to_string(),
                first_line(crate::subagent::severity::parse(&o.output).body),
            ),
            Ok(o) => (
                o.stop_reason.as_str().to_string(),
                o.output.lines().next().unwrap_or("").to_string(),
            ),
            Err(e) => ("error".to_string(), e.clone()),
        };
        out.push_str(&format!(
            "{:width$}  {verdict:<7}  {}\n",
            sanitize(&task.agent),
            sanitize(&text)
        ));
    }
    if let Some(q) = &batch.quorum {
        let split = if q.unanimous() {
            ""
        } else {
            " (reviewers disagree)"
        };
        out.push_str(&format!("quorum: {}{split}\n", q.label()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::ReviewerVerdict;

    fn quorum(verdicts: &[(Option<Severity>, bool)]) -> Quorum {
        Quorum::of(
            verdicts
                .iter()
                .enumerate()
                .map(|(i, (severity, failed))| ReviewerVerdict {
                    agent: format!("a{i}"),
                    call_id: None,
                    severity: *severity,
                    failed: *failed,
                })
                .collect(),
        )
    }

    #[test]
    fn exit_codes_follow_the_quorum() {
        use Severity::*;
        assert_eq!(exit_code(&quorum(&[(Some(Green), false); 3])), EXIT_GREEN);
        assert_eq!(
            exit_code(&quorum(&[(Some(Green), false), (Some(Yellow), false)])),
            EXIT_YELLOW
        );
        assert_eq!(
            exit_code(&quorum(&[(Some(Red), false), (Some(Green), false)])),
            EXIT_RED
        );
        // Red wins over a failed reviewer; otherwise a failure is an error.
        assert_eq!(
            exit_code(&quorum(&[(Some(Red), false), (None, true)])),
            EXIT_RED
        );
        assert_eq!(
            exit_code(&quorum(&[(Some(Green), false), (None, true)])),
            EXIT_ERROR
        );
        assert_eq!(
            exit_code(&quorum(&[(Some(Yellow), false), (None, false)])),
            EXIT_ERROR,
            "a reviewer without a verdict"
        );
        assert_eq!(exit_code(&quorum(&[])), EXIT_ERROR);
    }

    #[test]
    fn fail_on_red_lets_yellow_pass() {
        for code in [EXIT_GREEN, EXIT_YELLOW, EXIT_RED, EXIT_ERROR] {
            assert_eq!(FailOn::Yellow.exit(code), code);
        }
        let red: Vec<i32> = [EXIT_GREEN, EXIT_YELLOW, EXIT_RED, EXIT_ERROR]
            .into_iter()
            .map(|c| FailOn::Red.exit(c))
            .collect();
        assert_eq!(red, [EXIT_GREEN, EXIT_GREEN, EXIT_RED, EXIT_ERROR]);
    }

    #[test]
    fn the_prompt_carries_the_diff() {
        let p = prompt(Path::new("/repo"), "HEAD~1", "+added\n");
        assert!(p.contains("`git diff HEAD~1`"), "{p}");
        assert!(p.ends_with("```diff\n+added\n```"), "{p}");
    }
}
