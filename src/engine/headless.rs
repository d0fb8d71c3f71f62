//! The headless front ends: `quorum call` (sub-agent calls, final
//! messages on stdout) and `quorum run` (the chat loop, its text on stdout
//! or every event as JSON). Progress goes to stderr; agent text is
//! untrusted and sanitised before it reaches the terminal.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use tokio::sync::{mpsc, watch};

use super::config::{self, ModelChoice};
use super::{Session, SessionConfig};
use crate::acp::registry::Permissions;
use crate::event::{Activity, Event, Stamped, StopReason};
use crate::sanitize::sanitize;
use crate::subagent::dispatch::Reply;
use crate::subagent::types::SubAgentCallInput;

/// Exit code: every call ended its turn.
pub const EXIT_OK: i32 = 0;
/// Exit code: a call stopped otherwise (cancelled, refusal, error, ...).
pub const EXIT_STOPPED: i32 = 1;
/// Exit code: a call could not run (unknown agent, bad config or input).
pub const EXIT_CANNOT_RUN: i32 = 2;
/// Exit code for `quorum run --no-wait` with tasks still running.
pub const EXIT_TASKS_RUNNING: i32 = 3;
/// Exit code after a second Ctrl+C.
pub const EXIT_INTERRUPTED: i32 = 130;

/// Where and how a headless session runs.
pub struct Setup {
    /// The config file.
    pub config: Option<PathBuf>,
    /// `--cwd`: the session directory.
    pub cwd: Option<PathBuf>,
    /// `--approve`: the answer to permission requests.
    pub approve: Permissions,
    /// `--record FILE`.
    pub record: Option<PathBuf>,
}

impl Setup {
    pub(super) fn session(self, model: Option<&ModelChoice>) -> Result<SessionConfig> {
        let registry = config::registry(self.config.as_deref())?;
        let mut session = SessionConfig::new(registry, config::root(self.cwd.as_deref())?);
        session.read_settings(self.config.as_deref())?;
        session.permissions = self.approve;
        session.record = self.record;
        session.model_picks = config::model_picks_path();
        if let Some(choice) = model {
            session.choose_model(choice, self.config.as_deref())?;
        }
        Ok(session)
    }
}

/// `quorum call`: a problem with the setup is printed, exit code 2.
pub async fn call_command(setup: Setup, mut request: CallRequest) -> Result<i32> {
    config::init_logging();
    let session = match setup.session(None).and_then(|session| {
        session.registry.get(&request.agent)?;
        Ok(session)
    }) {
        Ok(s) => s,
        Err(e) => {
            crate::say!("quorum: {}", super::config::error_message(&e));
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

/// `quorum run`: a problem with the setup is printed, exit code 2.
pub async fn run_command(
    setup: Setup,
    model: ModelChoice,
    prompt: String,
    json: bool,
    no_wait: bool,
) -> Result<i32> {
    config::init_logging();
    let session = match setup.session(Some(&model)) {
        Ok(s) => s,
        Err(e) => {
            crate::say!("quorum: {}", super::config::error_message(&e));
            return Ok(EXIT_CANNOT_RUN);
        }
    };
    let (mut session, events) = Session::start(session, Instant::now())?;
    Ok(run(&mut session, events, prompt, json, no_wait).await)
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
    pub(super) fn handle(self, interrupted: &mut bool, cancel: impl FnOnce()) -> Option<i32> {
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
        let terminated = crate::cancel::termination_signal();
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
        match reply {
            Ok(Reply::Done(mut outcome)) => {
                // The verdict is the `severity` field (and a line on
                // stderr): the header is not part of what is printed.
                outcome.output = crate::subagent::severity::parse(&outcome.output)
                    .body
                    .to_string();
                let printed = if request.json {
                    let text = serde_json::to_string(&outcome).expect("an outcome is JSON");
                    crate::sanitize::json(&text).into_owned()
                } else {
                    sanitize(&outcome.output).into_owned()
                };
                // A closed stdout (`| head`) is no reason to stop the calls.
                let _ = writeln!(std::io::stdout(), "{printed}");
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
                code = EXIT_CANNOT_RUN;
                break;
            }
        }
        if interrupted {
            break;
        }
    }
    session.shutdown();
    printer.finish().await;
    code
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
            "quorum: no chat model: give --model PROVIDER:NAME (or set QUORUM_MODEL, or [model] in the config file)"
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
        // A background task's report: the chat answers it in a turn.
        tokio::select! {
            c = chat.next_completion() => match c {
                Some(c) => completion = Some(c),
                None => break,
            },
            Some(interrupt) = interrupts.recv() => {
                // Waiting is all there is to cancel: any interrupt ends it.
                code = match interrupt {
                    Interrupt::Cancel => EXIT_INTERRUPTED,
                    Interrupt::Quit(exit) => exit,
                };
                break;
            }
        }
    }
    session.shutdown();
    drop(chat);
    printer.finish().await;
    code
}

/// Prints events as they come, in a task of its own.
pub(super) struct Printer {
    task: tokio::task::JoinHandle<()>,
    done: tokio::sync::oneshot::Sender<()>,
}

impl Printer {
    pub(super) fn spawn(
        mut events: mpsc::UnboundedReceiver<Stamped>,
        mut print: impl FnMut(&Stamped) + Send + 'static,
    ) -> Self {
        let (done, mut finish) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    event = events.recv() => match event {
                        Some(event) => print(&event),
                        None => return,
                    },
                    _ = &mut finish => break,
                }
            }
            // Everything emitted before the end is already queued.
            while let Ok(event) = events.try_recv() {
                print(&event);
            }
        });
        Self { task, done }
    }

    /// Prints what is left, then stops.
    pub(super) async fn finish(self) {
        let _ = self.done.send(());
        let _ = self.task.await;
    }
}

/// `quorum run`'s output: the chat's text on stdout and progress on
/// stderr, or every event as one JSON line.
fn print_run(out: &mut std::io::Stdout, progress: &mut Progress, event: &Stamped, json: bool) {
    if json {
        let _ = writeln!(
            out,
            "{}",
            crate::sanitize::json(&serde_json::to_string(event).expect("events are JSON"))
        );
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

/// Lines on stderr for what headless calls are doing, each naming its
/// agent (and its task, for a background one). Agent text is untrusted:
/// sanitised.
#[derive(Default)]
pub(super) struct Progress {
    /// `agent` or `agent [t1]`, by call id.
    labels: std::collections::HashMap<String, String>,
    /// The chat model's reply, cleaned across its chunks.
    reply: crate::sanitize::Stream,
}

impl Progress {
    pub(super) fn print(&mut self, event: &Event) {
        if let Some(line) = self.line(event) {
            // Progress is a courtesy: a closed stderr is no reason to stop.
            let _ = writeln!(std::io::stderr(), "{line}");
        }
    }

    fn line(&mut self, event: &Event) -> Option<String> {
        let label = |labels: &std::collections::HashMap<String, String>, call_id: &str| {
            labels.get(call_id).cloned().unwrap_or_default()
        };
        let line = match event {
            Event::SubagentStarted {
                call_id,
                agent,
                input,
                task_id,
                queued,
                ..
            } => {
                let name = format!(
                    "{}{}",
                    sanitize(agent.name()),
                    task_id
                        .as_ref()
                        .map(|t| format!(" [{}]", sanitize(t)))
                        .unwrap_or_default()
                );
                self.labels.insert(call_id.clone(), name.clone());
                format!(
                    "{name}: ▶{} {}",
                    if *queued { " (queued)" } else { "" },
                    sanitize(input.lines().next().unwrap_or(""))
                )
            }
            Event::SubagentFinished {
                call_id,
                stop_reason,
                severity,
                ..
            } => format!(
                "{}: ■ {stop_reason}{}",
                label(&self.labels, call_id),
                severity
                    .map(|s| format!(", verdict {}", s.as_str()))
                    .unwrap_or_default()
            ),
            Event::SubagentSession {
                call_id,
                session,
                session_id,
            } => format!(
                "{}: session: {} {}",
                label(&self.labels, call_id),
                session.label(),
                sanitize(session_id.as_deref().unwrap_or(""))
            ),
            Event::SubagentCancelling { call_id } => format!(
                "{}: ⊘ cancelling… (Ctrl+C again exits at once)",
                label(&self.labels, call_id)
            ),
            Event::SubagentFollowup { call_id, input, .. } => format!(
                "{}: › follow-up: {}",
                label(&self.labels, call_id),
                sanitize(input.lines().next().unwrap_or(""))
            ),
            Event::SubagentActivity { call_id, activity } => {
                let what = match activity {
                    Activity::ToolCall { title, .. } => format!("⚙ {}", sanitize(title)),
                    Activity::PermissionRequest { title, .. } => {
                        format!("? permission: {}", sanitize(title))
                    }
                    Activity::PermissionResolved { outcome, .. } => {
                        format!("  → {}", sanitize(outcome))
                    }
                    Activity::Notice { text } => format!("! {}", sanitize(text)),
                    _ => return None,
                };
                format!("{}: {what}", label(&self.labels, call_id))
            }
            Event::BatchStarted { tasks, review, .. } => format!(
                "batch of {tasks} {}",
                if *review { "reviews" } else { "tasks" }
            ),
            Event::BatchFinished {
                total,
                succeeded,
                worst_verdict,
                ..
            } => format!(
                "batch done: {succeeded} of {total} succeeded{}",
                worst_verdict
                    .map(|s| format!(", worst verdict {}", s.as_str()))
                    .unwrap_or_default()
            ),
            Event::ReviewQuorum { quorum, .. } => {
                format!("quorum: {}", sanitize(&quorum.label()))
            }
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
            _ => return None,
        };
        Some(line)
    }
}
