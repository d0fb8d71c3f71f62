//! What the headless front ends print while they work: events as they
//! come, and a line on stderr for each step of a call.

use std::io::Write;

use tokio::sync::mpsc;

use crate::confine::sanitize::sanitize;
use crate::event::{Activity, Event, Stamped};

/// Prints events as they come, in a task of its own.
pub(super) struct Printer {
    task: tokio::task::JoinHandle<()>,
    done: tokio::sync::oneshot::Sender<()>,
    asked: mpsc::UnboundedSender<tokio::sync::oneshot::Sender<()>>,
}

impl Printer {
    pub(super) fn spawn(
        mut events: mpsc::UnboundedReceiver<Stamped>,
        mut print: impl FnMut(&Stamped) + Send + 'static,
    ) -> Self {
        let (done, mut finish) = tokio::sync::oneshot::channel();
        let (asked, mut asks) = mpsc::unbounded_channel::<tokio::sync::oneshot::Sender<()>>();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    event = events.recv() => match event {
                        Some(event) => print(&event),
                        None => return,
                    },
                    Some(printed) = asks.recv() => {
                        while let Ok(event) = events.try_recv() {
                            print(&event);
                        }
                        let _ = printed.send(());
                    }
                    _ = &mut finish => break,
                }
            }
            // Everything emitted before the end is already queued.
            while let Ok(event) = events.try_recv() {
                print(&event);
            }
        });
        Self { task, done, asked }
    }

    /// Returns once what was emitted before it is printed: a call's own
    /// lines (its end, `■`) come before what is then said of its outcome.
    pub(super) async fn caught_up(&self) {
        let (printed, waited) = tokio::sync::oneshot::channel();
        if self.asked.send(printed).is_ok() {
            let _ = waited.await;
        }
    }

    /// Prints what is left, then stops.
    pub(super) async fn finish(self) {
        let _ = self.done.send(());
        let _ = self.task.await;
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
    pub(super) reply: crate::confine::sanitize::Stream,
}

impl Progress {
    pub(super) fn print(&mut self, event: &Event) {
        if let Some(line) = self.line(event) {
            // Progress is a courtesy: a closed stderr is no reason to stop.
            let _ = writeln!(std::io::stderr(), "{line}");
        }
    }

    /// With every event on stdout (`--json`), stderr still tells the
    /// questions agents asked (elicitations) and their answers.
    pub(super) fn print_questions(&mut self, event: &Event) {
        let question = matches!(
            event,
            Event::SubagentActivity {
                activity: Activity::Elicitation { .. } | Activity::ElicitationResolved { .. },
                ..
            }
        );
        // Every event still goes through, for the agents' labels.
        if let Some(line) = self.line(event)
            && question
        {
            let _ = writeln!(std::io::stderr(), "{line}");
        }
    }

    /// The line for `event`, if it has one.
    fn line(&mut self, event: &Event) -> Option<String> {
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
                self.label(call_id),
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
                self.label(call_id),
                session.label(),
                sanitize(session_id.as_deref().unwrap_or(""))
            ),
            Event::SubagentCancelling { call_id } => format!(
                "{}: ⊘ cancelling… (Ctrl+C again exits at once)",
                self.label(call_id)
            ),
            Event::SubagentFollowup { call_id, input, .. } => format!(
                "{}: › follow-up: {}",
                self.label(call_id),
                sanitize(input.lines().next().unwrap_or(""))
            ),
            Event::SubagentActivity { call_id, activity } => {
                let what = activity_line(activity)?;
                format!("{}: {what}", self.label(call_id))
            }
            _ => return session_line(event),
        };
        Some(line)
    }

    /// How a call is named on its lines (`agent`, or `agent [t1]`).
    fn label(&self, call_id: &str) -> String {
        self.labels.get(call_id).cloned().unwrap_or_default()
    }
}

/// What a call's agent did, when that is worth a line.
fn activity_line(activity: &Activity) -> Option<String> {
    let what = match activity {
        Activity::ToolCall { title, .. } => format!("⚙ {}", sanitize(title)),
        Activity::PermissionRequest { title, .. } => {
            format!("? permission: {}", sanitize(title))
        }
        Activity::PermissionResolved { outcome, .. } => {
            format!("  → {}", sanitize(outcome))
        }
        Activity::Notice { text } => format!("! {}", sanitize(text)),
        Activity::Elicitation { message, url, .. } => {
            let url = url
                .as_ref()
                .map(|u| format!(" (open {})", sanitize(u)))
                .unwrap_or_default();
            format!(
                "? question: {}{url}",
                sanitize(message.lines().next().unwrap_or(""))
            )
        }
        Activity::ElicitationResolved {
            outcome,
            content,
            reason,
            ..
        } => {
            let content = content
                .as_ref()
                .filter(|c| !c.is_empty())
                .map(|c| format!(" {}", sanitize(&crate::event::form::summary(c))))
                .unwrap_or_default();
            let reason = reason
                .as_ref()
                .map(|r| format!(": {}", sanitize(r)))
                .unwrap_or_default();
            format!("  → {}{content}{reason}", sanitize(outcome))
        }
        // A command in one of quorum's terminals: its line and how it
        // ended (its output is the agent's to report).
        Activity::TerminalStarted { command, .. } => {
            format!("$ {}", sanitize(command))
        }
        Activity::TerminalExit {
            exit_code, signal, ..
        } => format!(
            "$ … {}",
            match (exit_code, signal) {
                (Some(code), _) => format!("exit {code}"),
                (None, Some(sig)) => format!("killed by {}", sanitize(sig)),
                (None, None) => "ended".to_string(),
            }
        ),
        _ => return None,
    };
    Some(what)
}

/// The line of an event of the session's own (batches, notes, the
/// model's retries, errors), if it has one.
fn session_line(event: &Event) -> Option<String> {
    let line = match event {
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
        Event::BudgetWarning {
            unit,
            spent,
            cap,
            estimated,
        } => crate::event::budget::warning_text(*unit, (*spent, *estimated), *cap),
        Event::BudgetReached {
            call_id,
            unit,
            spent,
            cap,
            estimated,
        } => crate::event::budget::reached_text(
            call_id.as_deref().map(sanitize).as_deref(),
            *unit,
            (*spent, *estimated),
            *cap,
        ),
        _ => return None,
    };
    Some(line)
}
