//! `quorum call`: sub-agent calls on one ACP agent, headless; final
//! messages on stdout.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use tokio::sync::mpsc;

use super::progress::{Printer, Progress};
use super::{EXIT_CANNOT_RUN, EXIT_OK, EXIT_STOPPED, HeadlessArgs, Setup, interrupts};
use crate::confine::sanitize::sanitize;
use crate::engine::{Session, config};
use crate::event::{Outcome, Stamped, StopReason};
use crate::subagent::dispatch::Reply;
use crate::subagent::input::SubAgentCallInput;

/// `quorum call`'s options.
#[derive(clap::Args)]
pub struct CallArgs {
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
    /// Resume this ACP session of the agent (its session id, as printed by
    /// an earlier --json call) instead of opening a fresh one. (To go on
    /// with a recorded quorum session, see `quorum --resume`.)
    #[arg(long, value_name = "SESSION_ID", conflicts_with = "new_session")]
    resume: Option<String>,
    /// Print one JSON object per call: output, stop_reason, severity,
    /// session, session_id (and with --worktree branch, worktree, diffstat;
    /// for a call that failed, error, with an empty output).
    #[arg(long)]
    json: bool,
    /// Run the agent in a git worktree of its own, on a new branch
    /// (quorum/c1-...) based on HEAD (or on your uncommitted changes);
    /// what it changed is committed there, your tree is not touched.
    #[arg(long)]
    worktree: bool,
    #[command(flatten)]
    headless: HeadlessArgs,
}

impl CallArgs {
    /// Runs `quorum call`; returns the exit code.
    pub async fn command(self, config: Option<PathBuf>) -> Result<i32> {
        let setup = self.headless.setup(config);
        let request = CallRequest {
            agent: self.agent,
            inputs: self.inputs,
            code_review: self.code_review,
            new_session: self.new_session,
            resume: self.resume,
            json: self.json,
            worktree: self.worktree,
        };
        call_command(setup, request).await
    }
}

/// `quorum call`: a problem with the setup is printed, exit code 2.
pub async fn call_command(setup: Setup, mut request: CallRequest) -> Result<i32> {
    config::init_logging();
    let session = match setup
        .config_file()
        .and_then(|file| Ok(setup.session(&file, None)?))
        .and_then(|session| {
            session.registry.get(&request.agent)?;
            Ok(session)
        }) {
        Ok(s) => s,
        Err(e) => {
            crate::say!("quorum: {}", config::error_message(e.as_ref()));
            return Ok(EXIT_CANNOT_RUN);
        }
    };
    if request.inputs.is_empty() {
        if std::io::stdin().is_terminal() {
            crate::say!("quorum: give the message with --input TEXT, or pipe it on stdin");
            return Ok(EXIT_CANNOT_RUN);
        }
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)?;
        request.inputs.push(text.trim_end().to_string());
    }
    let (session, events) = Session::start(session, Instant::now())?;
    Ok(call(&session, events, request).await)
}

/// One call's line of `--json`: the outcome, and `error` (what went
/// wrong) for a call that failed.
fn print_json(outcome: &Outcome, error: Option<&str>) {
    let text = match error {
        None => serde_json::to_string(outcome).expect("an outcome is JSON"),
        Some(error) => {
            let mut value = serde_json::to_value(outcome).expect("an outcome is JSON");
            if let Some(object) = value.as_object_mut() {
                object.insert("error".into(), error.into());
            }
            value.to_string()
        }
    };
    let text = crate::confine::sanitize::json(&text).into_owned();
    // A closed stdout (`| head`) is no reason to stop the calls.
    let _ = writeln!(std::io::stdout(), "{text}");
}

/// What `quorum call` does.
pub struct CallRequest {
    pub agent: String,
    /// One call per input, in turn, on the same session memory.
    pub inputs: Vec<String>,
    pub code_review: bool,
    /// Every call in a fresh session.
    pub new_session: bool,
    /// The agent's session to resume first (from an earlier process).
    pub resume: Option<String>,
    /// One JSON object per call instead of its final message.
    pub json: bool,
    /// Each call in a git worktree of its own.
    pub worktree: bool,
}

/// Runs `quorum call`'s calls; returns the exit code.
pub async fn call(
    session: &Session,
    events: mpsc::UnboundedReceiver<Stamped>,
    request: CallRequest,
) -> i32 {
    let mut progress = Progress::default();
    let printer = Printer::spawn(events, move |event| progress.print(&event.event));
    if let Some(id) = &request.resume {
        session.dispatcher().remember_session(&request.agent, id);
    }
    let mut interrupts = interrupts();
    let mut code = EXIT_OK;
    let mut interrupted = false;
    'calls: for input in &request.inputs {
        let call = SubAgentCallInput {
            agent: Some(request.agent.clone()),
            input: Some(input.clone()),
            code_review: request.code_review,
            continue_session: !request.new_session,
            isolation: request
                .worktree
                .then_some(crate::subagent::input::Isolation::Worktree),
            ..SubAgentCallInput::default()
        };
        let run = session.call(call);
        tokio::pin!(run);
        let reply = loop {
            tokio::select! {
                reply = &mut run => break reply,
                Some(interrupt) = interrupts.recv() => {
                    if let Some(exit) = interrupt.handle(&mut interrupted, || session.cancel_all()) {
                        code = exit;
                        break 'calls;
                    }
                }
            }
        };
        // The call's own lines first, then what is said of its outcome.
        printer.caught_up().await;
        match reply {
            Ok(Reply::Done(mut outcome)) => {
                // The verdict is the `severity` field (and a line on
                // stderr): the header is not part of what is printed.
                outcome.output = crate::subagent::severity::parse(&outcome.output)
                    .body
                    .to_string();
                // A call that failed has no answer: what went wrong goes
                // to stderr (and, with --json, to `error`), never where a
                // script reads the agent's answer.
                let failed = (outcome.stop_reason == StopReason::Error)
                    .then(|| std::mem::take(&mut outcome.output));
                if request.json {
                    print_json(&outcome, failed.as_deref());
                } else if failed.is_none() {
                    // A closed stdout (`| head`) is no reason to stop the calls.
                    let _ = writeln!(std::io::stdout(), "{}", sanitize(&outcome.output));
                }
                if let (false, Some(work)) = (request.json, &outcome.work) {
                    crate::say!(
                        "quorum: {} · {} · worktree {}{}",
                        sanitize(&work.branch),
                        work.diffstat,
                        sanitize(&work.worktree),
                        work.check
                            .as_ref()
                            .map(|c| format!(" · {c}"))
                            .unwrap_or_default()
                    );
                }
                if let Some(error) = &failed {
                    crate::say!("{}", sanitize(error));
                }
                if outcome.stop_reason != StopReason::EndTurn {
                    if !request.json {
                        crate::say!("quorum: stop reason: {}", outcome.stop_reason);
                    }
                    code = EXIT_STOPPED;
                }
            }
            Ok(_) => unreachable!("quorum call runs single calls in the foreground"),
            Err(e) => {
                crate::say!("quorum: {e}");
                if request.json {
                    print_json(&Outcome::error(""), Some(&e.to_string()));
                }
                code = EXIT_CANNOT_RUN;
                break;
            }
        }
        if interrupted {
            break;
        }
    }
    session.close_agent_sessions().await;
    session.shutdown();
    printer.finish().await;
    super::or_budget(code, session.budget_stopped())
}
