//! `quorum run`: the chat loop headless; its text on stdout, or every
//! event as JSON.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use tokio::sync::{mpsc, watch};

use super::progress::{Printer, Progress};
use super::{
    ContinueArgs, EXIT_CANNOT_RUN, EXIT_INTERRUPTED, EXIT_OK, EXIT_STOPPED, EXIT_TASKS_RUNNING,
    HeadlessArgs, Interrupt, Setup, interrupts,
};
use crate::confine::sanitize::sanitize;
use crate::engine::Session;
use crate::engine::config::{self, ModelChoice};
use crate::event::{Event, Stamped, StopReason};

// `quorum run`'s options (its help is the command's, in `main`).
#[derive(clap::Args)]
pub struct RunArgs {
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

/// `quorum run`: the headless chat, recorded by default.
pub async fn command(a: RunArgs, model: ModelChoice, config: Option<PathBuf>) -> Result<i32> {
    let mut setup = a.headless.setup(config);
    setup.resume = a.continued.target(setup.cwd.as_deref(), false)?;
    if setup.resume.is_none() && setup.record.is_none() && !a.no_record {
        setup.record = config::default_record_path();
    }
    run_command(setup, model, a.prompt, a.json, a.no_wait).await
}

/// `quorum run`: a problem with the setup is printed, exit code 2.
pub async fn run_command(
    setup: Setup,
    model: ModelChoice,
    prompt: String,
    json: bool,
    no_wait: bool,
) -> Result<i32> {
    config::init_logging();
    let prepared = setup
        .config_file()
        .and_then(|file| Ok((setup.session(&file, Some(&model))?, file)));
    let (session, file) = match prepared {
        Ok(p) => p,
        Err(e) => {
            crate::say!("quorum: {}", config::error_message(e.as_ref()));
            return Ok(EXIT_CANNOT_RUN);
        }
    };
    let (mut session, events) = Session::start(session, Instant::now())?;
    // A conductor calls the session's tools over MCP, served as long as
    // the session runs.
    let _tools = match session
        .conducted()
        .then(|| crate::serve::hand_tools(&session, &file))
        .transpose()
    {
        Ok(endpoint) => endpoint,
        Err(e) => {
            crate::say!(
                "quorum: cannot serve quorum's tools to the chat: {:#}",
                anyhow::Error::from(e)
            );
            return Ok(EXIT_CANNOT_RUN);
        }
    };
    let code = run(&mut session, events, prompt, json, no_wait).await;
    if let Some(path) = session.recording() {
        let id = path.file_stem().unwrap_or_default().to_string_lossy();
        crate::say!(
            "quorum: session recorded to {} (quorum run --resume {id} -p … goes on with it)",
            path.display()
        );
    }
    Ok(code)
}

/// Runs `quorum run`: one prompt, then (unless `no_wait`) the reports of
/// background tasks, each answered by the chat. Returns the exit code.
pub async fn run(
    session: &mut Session,
    events: mpsc::UnboundedReceiver<Stamped>,
    prompt: String,
    json: bool,
    no_wait: bool,
) -> i32 {
    let Some(mut chat) = session.take_chat() else {
        crate::say!(
            "quorum: no chat model: give --model acp:NAME (an agent you have installed) or \
             PROVIDER:NAME, or set QUORUM_MODEL, or [model] name in the config file (without any, \
             the first agent installed is the chat, else a model whose API key is set)"
        );
        return EXIT_CANNOT_RUN;
    };
    let mut out = std::io::stdout();
    let mut progress = Progress::default();
    let printer = Printer::spawn(events, move |event| {
        print_run(&mut out, &mut progress, event, json)
    });
    let mut interrupts = interrupts();
    let mut code = EXIT_OK;
    let mut interrupted = false;
    let mut message = Some(prompt);
    let mut completion = None;
    'turns: loop {
        let (cancel_tx, cancel) = watch::channel(false);
        let result = {
            let turn = chat.turn(message.take(), completion.take(), cancel);
            tokio::pin!(turn);
            loop {
                tokio::select! {
                    r = &mut turn => break r,
                    Some(interrupt) = interrupts.recv() => {
                        let cancel = || {
                            let _ = cancel_tx.send(true);
                            session.cancel_all();
                        };
                        if let Some(exit) = interrupt.handle(&mut interrupted, cancel) {
                            code = exit;
                            break 'turns;
                        }
                    }
                }
            }
        };
        match result {
            Ok(end) if end.stop_reason == StopReason::EndTurn => {}
            Ok(_) => code = code.max(EXIT_STOPPED),
            Err(_) => {
                code = EXIT_STOPPED;
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
        if !session.busy() {
            break;
        }
        if no_wait {
            crate::say!("quorum: background tasks are still running; exiting (--no-wait)");
            code = EXIT_TASKS_RUNNING;
            break;
        }
        match next_report(&mut chat, session, &mut interrupts).await {
            Ok(Some(c)) => completion = Some(c),
            Ok(None) => break,
            Err(exit) => {
                code = exit;
                break;
            }
        }
    }
    session.close_agent_sessions().await;
    session.shutdown();
    drop(chat);
    printer.finish().await;
    super::or_budget(code, session.budget_stopped())
}

/// A background task's report, for the chat to answer in a turn. The last
/// tasks may also end with their reports already delivered (a turn took
/// them as they came): then there is nothing to wait for (`None`). An
/// interrupt ends the wait (waiting is all there is to cancel): its exit
/// code.
async fn next_report(
    chat: &mut crate::engine::Chat,
    session: &Session,
    interrupts: &mut mpsc::UnboundedReceiver<Interrupt>,
) -> Result<Option<String>, i32> {
    loop {
        tokio::select! {
            c = chat.next_completion() => return Ok(c),
            _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {
                if !session.busy() {
                    return Ok(chat.try_completion());
                }
            }
            Some(interrupt) = interrupts.recv() => {
                return Err(match interrupt {
                    Interrupt::Cancel => EXIT_INTERRUPTED,
                    Interrupt::Quit(exit) => exit,
                });
            }
        }
    }
}

/// `quorum run`'s output: the chat's text on stdout and progress on
/// stderr, or every event as one JSON line.
fn print_run(out: &mut std::io::Stdout, progress: &mut Progress, event: &Stamped, json: bool) {
    if json {
        let _ = writeln!(
            out,
            "{}",
            crate::confine::sanitize::json(&serde_json::to_string(event).expect("events are JSON"))
        );
        // Questions asked and how they were answered are said on stderr too.
        progress.print_questions(&event.event);
        return;
    }
    {
        match &event.event {
            Event::AssistantDelta { text } => {
                let _ = write!(out, "{}", progress.reply.push(text));
                let _ = out.flush();
            }
            Event::AssistantEnd => {
                let _ = writeln!(out, "{}", progress.reply.finish());
            }
            Event::TaskReported { task_id } => {
                crate::say!("↩ task {} reported to the chat", sanitize(task_id))
            }
            other => progress.print(other),
        }
    }
}
