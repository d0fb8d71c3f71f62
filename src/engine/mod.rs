//! The session engine: built once from a [`SessionConfig`] for the TUI,
//! `quorum call`, `quorum run` and the tests. It wires the dispatcher, the
//! chat loop and the internal agent together, owns the event bus (with the
//! task board and the recorder), takes commands ([`Op`]) and emits events.
//! Front ends know nothing of ACP or models: they send `Op`s and draw
//! `Event`s.
//!
//! [`Op`]: crate::event::Op

pub mod chats;
mod conductor;
pub mod config;
mod internal;
pub mod notify;
mod ops;
pub mod prices;
pub mod resume;
mod settings;
mod slash;
mod tools;

use crate::confine::lock;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;

pub use chats::{DefaultChat, default_chat, is_welcome};
pub use config::{SessionConfig, SetupError};
pub use ops::{Mention, parse_mention};

use crate::event::{Event, NoticeLevel, Op, Stamped, StopReason};
pub use crate::model_loop::chat::Chat;
use crate::model_loop::chat::ChatHandle;
use crate::runtime::bus::Emitter;
use crate::runtime::supervisor::Supervisor;
use crate::subagent::dispatch::{DispatchError, Dispatcher, Reply};
use crate::subagent::input::SubAgentCallInput;
use crate::subagent::picks::ModelPicks;
use crate::subagent::tool::SubagentTool;
use crate::transcript::{Header, Recorder, TerminalSize};

/// A running session.
pub struct Session {
    emitter: Emitter,
    dispatcher: Arc<Dispatcher>,
    /// The conversation with the chat model, until a front end takes it.
    chat: Option<Chat>,
    /// Background completions when there is no chat to deliver them to.
    completions: Option<mpsc::UnboundedReceiver<String>>,
    base_url: Option<String>,
    /// `[prices]`, for the chat `/model` picks.
    prices: std::collections::BTreeMap<String, crate::event::budget::Price>,
    terminal: TerminalSize,
    /// Every process the session starts: agents, their children, the
    /// internal agent's shell commands.
    supervisor: Supervisor,
    /// The session clock's zero: a continued session's clock goes on from
    /// its last recorded event.
    clock: Instant,
    /// A continued session's recorded events, for the front end to show
    /// before the new ones.
    history: Vec<Stamped>,
    /// Where the person's answers to a conductor's requests go.
    chat_answers: conductor::ChatAnswers,
    /// Makes a conductor (`/model acp:NAME`).
    conductors: conductor::Factory,
    /// The MCP server that carries the session's tools to a conductor.
    handed: conductor::HandedTools,
    /// Whether the chat is a conductor (it needs its tools handed).
    conducted: bool,
    /// No chat was chosen and none could be picked: the welcome says so.
    nothing_found: bool,
    /// Runs `[notify] command` for the session's notifications.
    notifier: Option<notify::Notifier>,
}

impl Session {
    /// Builds a session; its events arrive on the returned channel, the
    /// first of them `session_info`.
    pub fn start(
        mut config: SessionConfig,
        started: Instant,
    ) -> Result<(Self, mpsc::UnboundedReceiver<Stamped>), SetupError> {
        let on_history = config.on_history.take();
        let (history, recorder, resumed) = Self::read_back(&config)?;
        let Some(show) = on_history.filter(|_| !history.is_empty()) else {
            let (mut session, events) = Self::build(config, started, &history, recorder, resumed)?;
            session.history = history;
            return Ok((session, events));
        };
        // The front end takes the recorded events up on one core while
        // the engine does on the other; then nobody needs them any more.
        let built = std::thread::scope(|scope| {
            scope.spawn(|| show(&history));
            Self::build(config, started, &history, recorder, resumed)
        });
        std::thread::spawn(move || drop(history));
        built
    }

    /// A continued session's transcript read back, or a new session's
    /// opened: the recorded events, the recorder, and (when continued)
    /// the bytes of a last line cut short that were cut off.
    #[allow(clippy::type_complexity)]
    fn read_back(
        config: &SessionConfig,
    ) -> Result<(Vec<Stamped>, Option<Recorder>, Option<Option<u64>>), SetupError> {
        match &config.resume {
            Some(path) => {
                let root = config.root.path().to_path_buf();
                let reopened =
                    Recorder::reopen(path, config.limits.max_transcript_line_bytes, |loaded| {
                        same_directory(&loaded.header.cwd, &root)
                    })
                    .map_err(|error| SetupError::Continue {
                        path: path.clone(),
                        error,
                    })?;
                let recorder = Some(reopened.recorder);
                Ok((reopened.loaded.events, recorder, Some(reopened.cut)))
            }
            None => {
                let recorder = match &config.record {
                    Some(path) => Some(open_recorder(path, config, config.terminal)?),
                    None => None,
                };
                Ok((Vec::new(), recorder, None))
            }
        }
    }

    /// The session, from its config and what [`Session::read_back`] read:
    /// a continued one (`resumed`) carries on from its `history`.
    fn build(
        config: SessionConfig,
        started: Instant,
        history: &[Stamped],
        recorder: Option<Recorder>,
        resumed: Option<Option<u64>>,
    ) -> Result<(Self, mpsc::UnboundedReceiver<Stamped>), SetupError> {
        let continued = resumed.map(|cut| {
            (
                resume::Continued::of(history, config.limits.context_chars),
                cut,
            )
        });
        // A continued session's clock goes on from its last event (plus
        // one ms).
        let clock = match &continued {
            Some((c, _)) => started
                .checked_sub(std::time::Duration::from_millis(c.last_t + 1))
                .unwrap_or(started),
            None => started,
        };
        let (emitter, events) = Emitter::channel(clock);
        emitter.seed(history);
        if let Some(recorder) = recorder {
            let _ = emitter.record(recorder);
        }
        // The notifier reads the session's events from its first.
        let supervisor = Supervisor::new();
        let name = config.resume.as_ref().or(config.record.as_ref());
        let name = name
            .and_then(|p| p.file_stem())
            .map(|s| s.to_string_lossy().into_owned());
        let notifier = notify::Notifier::start(config.notify.clone(), &emitter, &supervisor, name);
        announce(&emitter, &config, continued.is_some());
        // The caps, counted against what was spent (a continued session's
        // too); none given: those it recorded stay.
        if !config.caps.is_empty() {
            emitter.emit(Event::BudgetSet { caps: config.caps });
        }
        let chat_model = config.model.as_ref().map(|m| m.name());
        let prices = prices::by_agent(&config.registry, &config.prices, chat_model.as_deref());
        if !prices.is_empty() {
            emitter.emit(Event::PricesSet { prices });
        }
        let mut session = Self::wire(config, (emitter, clock, supervisor), history, continued)?;
        session.notifier = notifier;
        Ok((session, events))
    }

    /// The session's parts wired to its bus: the dispatcher and its
    /// agents, the conductors, the chat; a continued session carries on.
    fn wire(
        config: SessionConfig,
        (emitter, clock, supervisor): (Emitter, Instant, Supervisor),
        history: &[Stamped],
        continued: Option<(resume::Continued, Option<u64>)>,
    ) -> Result<Self, SetupError> {
        let root = config.root.clone();
        let transcript = config.resume.clone().or_else(|| config.record.clone());
        let (dispatcher, completions) = Dispatcher::new(
            Arc::new(config.registry),
            config.root,
            emitter.clone(),
            config.permissions,
            supervisor.clone(),
            ModelPicks::load(config.model_picks),
            config.max_parallel,
        );
        dispatcher.set_worktrees(config::state_dir(), transcript);
        dispatcher.set_worktree_settings(config.worktree.clone());
        dispatcher.set_elicit(config.elicit);
        dispatcher.set_arena_reviewers(config.arena_reviewers);
        let chat_answers: conductor::ChatAnswers = Arc::default();
        let handed: conductor::HandedTools = Arc::default();
        let conductors = conductor_factory(
            &dispatcher,
            (&handed, &chat_answers),
            (&root, &supervisor, &emitter),
            (config.permissions, config.elicit),
        );
        let conducted = config.model.is_none() && config.conductor.is_some();
        let nothing_found = config.default_chat == Some(chats::DefaultChat::Nothing);
        let (chat, completions) = match config.model {
            None if config.conductor.is_some() => {
                let name = config.conductor.as_deref().unwrap_or_default();
                let mut conductor = conductors(name)?;
                if let Some(id) = conductor::recorded_session(history, name) {
                    conductor.reattach(id);
                }
                let tools = Arc::new(SubagentTool::new(dispatcher.clone(), 0));
                let chat = Chat::conducted(conductor, tools, emitter.clone(), completions);
                dispatcher.set_main_summary(Arc::new(chat.summary()));
                (Some(chat), None)
            }
            Some(model) => {
                dispatcher.set_internal(Arc::new(internal::Internal::new(
                    model.clone(),
                    config.agent_depth,
                    (root, config.internal_shell),
                    supervisor.clone(),
                    Arc::downgrade(&dispatcher),
                )));
                let tools = Arc::new(SubagentTool::new(dispatcher.clone(), 0));
                let chat = Chat::new(model, tools, emitter.clone(), completions);
                dispatcher.set_main_summary(Arc::new(chat.summary()));
                (Some(chat), None)
            }
            None => (None, Some(completions)),
        };
        let mut session = Self {
            emitter,
            dispatcher,
            chat,
            completions,
            base_url: config.base_url,
            prices: config.prices,
            terminal: config.terminal,
            supervisor,
            clock,
            history: Vec::new(),
            chat_answers,
            conductors,
            handed,
            conducted,
            nothing_found,
            notifier: None,
        };
        if let Some((continued, cut)) = continued {
            session.carry_on(continued, cut, history, config.resume.as_deref());
        }
        Ok(session)
    }

    /// Takes up where a recorded session ended: its sub-agent memory and
    /// ids, its running calls marked interrupted, its open turn and
    /// batches closed, and the chat's context rebuilt.
    fn carry_on(
        &mut self,
        continued: resume::Continued,
        cut: Option<u64>,
        history: &[Stamped],
        path: Option<&std::path::Path>,
    ) {
        let events = history.len();
        let emitter = self.emitter.clone();
        let path = path.map(|p| p.display().to_string()).unwrap_or_default();
        if let Some(bytes) = cut {
            emitter.emit(Event::Notice {
                level: NoticeLevel::Warning,
                text: format!(
                    "{path}: its last line was cut short ({bytes} bytes written by a process that \
                     died mid-write) and was cut off; every event before it is kept"
                ),
            });
        }
        self.dispatcher.restore(history);
        for call in &continued.interrupted {
            emitter.emit(Event::SubagentFinished {
                call_id: call.call_id.clone(),
                output: call.partial.clone(),
                stop_reason: StopReason::Interrupted,
                severity: None,
                findings: Vec::new(),
            });
        }
        for (batch_id, calls) in &continued.open_batches {
            emitter.emit(batch_end(&emitter, batch_id, calls, history));
        }
        if continued.open_turn {
            emitter.emit(Event::TurnEnded {
                stop_reason: StopReason::Interrupted,
            });
        }
        let tasks: Vec<&str> = continued
            .interrupted
            .iter()
            .filter_map(|c| c.task_id.as_deref())
            .collect();
        let mut text = format!("continued {path} ({events} events)");
        if !tasks.is_empty() {
            text.push_str(&format!(
                "; interrupted: {} (`/retry TASK` runs one again)",
                tasks.join(", ")
            ));
        }
        if continued.dropped_turns > 0 {
            text.push_str(&format!(
                "; the {} oldest turn(s) no longer fit the model's context and were left out \
                 ([limits] context_chars)",
                continued.dropped_turns
            ));
        }
        emitter.emit(Event::Notice {
            level: if continued.dropped_turns > 0 {
                NoticeLevel::Warning
            } else {
                NoticeLevel::Info
            },
            text,
        });
        let note = continued.note();
        if let Some(chat) = &mut self.chat {
            chat.restore(continued.context, note, continued.undelivered);
        }
    }

    /// Hands the session's tools to its conductor (now, or when one is
    /// chosen later): `spec` is the MCP server a front end serves them on.
    pub fn hand_tools(&self, spec: crate::acp::mcp::McpServerSpec) {
        *lock(&self.handed) = Some(spec);
    }

    /// Whether the chat is a conductor (an ACP agent), which calls the
    /// session's tools over MCP.
    pub fn conducted(&self) -> bool {
        self.conducted
    }

    /// Whether the session has a chat (a model or a conductor) that
    /// [`Session::serve`] runs; before `serve` takes it.
    pub fn has_chat(&self) -> bool {
        self.chat.is_some()
    }

    /// The session clock's zero, for the front end's elapsed times.
    pub fn clock(&self) -> Instant {
        self.clock
    }

    /// A continued session's recorded events (once): the front end shows
    /// them before the new ones.
    pub fn take_history(&mut self) -> Vec<Stamped> {
        std::mem::take(&mut self.history)
    }

    /// Serves a front end: the chat runs in its own task, and the returned
    /// sender takes the person's commands until it is dropped.
    pub fn serve(&mut self) -> mpsc::UnboundedSender<Op> {
        let chat = self.chat.take().map(ChatHandle::spawn);
        if chat.is_none() {
            self.emitter.emit(Event::Notice {
                level: NoticeLevel::Warning,
                text: chats::welcome(self.dispatcher.registry(), self.nothing_found),
            });
        }
        ops::offer_choices(&self.dispatcher, &self.emitter, self.base_url.clone(), None);
        // A continued session compares the arenas it left uncompared.
        self.dispatcher.resume_arenas();
        let (tx, rx) = mpsc::unbounded_channel();
        let ops = ops::Ops {
            emitter: self.emitter.clone(),
            dispatcher: self.dispatcher.clone(),
            chat,
            base_url: self.base_url.clone(),
            prices: self.prices.clone(),
            terminal: self.terminal,
            chat_answers: self.chat_answers.clone(),
            conductors: self.conductors.clone(),
        };
        tokio::spawn(ops.run(rx));
        tx
    }

    /// One `subagent` call, as the tool makes it.
    pub async fn call(&self, input: SubAgentCallInput) -> Result<Reply, DispatchError> {
        self.dispatcher.call(input).await
    }

    /// Cancels every running call.
    pub fn cancel_all(&self) {
        self.dispatcher.cancel_all();
    }

    /// Whether a spending cap was reached (the session's, or a task's):
    /// headless commands exit 4 then.
    pub fn budget_stopped(&self) -> bool {
        self.emitter.board(|b| b.ledger().stopped())
    }

    /// Whether any call is still running.
    pub fn busy(&self) -> bool {
        self.dispatcher.busy()
    }

    /// The chat, for a headless front end that runs its turns itself.
    pub fn take_chat(&mut self) -> Option<Chat> {
        self.chat.take()
    }

    /// Background completions (task ids), when no chat takes them.
    pub fn take_completions(&mut self) -> Option<mpsc::UnboundedReceiver<String>> {
        self.completions.take()
    }

    /// The dispatcher, to steer calls directly (tests, front ends).
    pub fn dispatcher(&self) -> &Arc<Dispatcher> {
        &self.dispatcher
    }

    pub fn emitter(&self) -> &Emitter {
        &self.emitter
    }

    /// Where the session is being recorded, if it is.
    pub fn recording(&self) -> Option<PathBuf> {
        self.emitter.recording()
    }

    /// Closes the agents' sessions quorum is done with (`session/close`
    /// where offered), after `[notify] command` has been run for what is
    /// due (a few seconds at most): before [`Session::shutdown`] at the end
    /// of a headless call or run, and at quit.
    pub async fn close_agent_sessions(&self) {
        if let Some(notifier) = &self.notifier {
            notifier.drain(&self.emitter).await;
        }
        self.dispatcher.close_sessions().await;
    }

    /// Cancels what still runs (foreground calls of a front end that went,
    /// and background tasks) and gives their agents a moment to end their
    /// turns, so the transcript says how each ended; then stops those that
    /// did not. Before [`Session::shutdown`] when a host goes (`quorum mcp`,
    /// `quorum acp`).
    pub async fn wind_down(&self) {
        self.dispatcher.wind_down().await;
    }

    /// Ends the session: running calls are cancelled, and every process
    /// it started is stopped (SIGTERM, then SIGKILL after a short grace)
    /// before this returns.
    pub fn shutdown(&self) {
        self.dispatcher.cancel_all();
        self.dispatcher.shutdown();
        self.supervisor.shutdown_blocking();
        // Streamed text the bus still holds goes to the transcript now.
        self.emitter.flush();
    }
}

impl Drop for Session {
    /// However the front end ends, nothing the session started outlives it.
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A continued session must be continued where it was recorded: its
/// agents' sessions and files are there.
fn same_directory(recorded: &str, root: &std::path::Path) -> Result<(), String> {
    let recorded_path = std::path::Path::new(recorded);
    let same =
        recorded_path == root || std::fs::canonicalize(recorded_path).is_ok_and(|p| p == root);
    if same {
        Ok(())
    } else {
        Err(format!(
            "this session was recorded in {recorded}, not in {}; continue it from there \
             (cd {recorded})",
            root.display()
        ))
    }
}

/// The `batch_finished` of a batch that was running when its session
/// ended, from what the board knows of its tasks.
fn batch_end(emitter: &Emitter, batch_id: &str, calls: &[String], history: &[Stamped]) -> Event {
    let total = history
        .iter()
        .find_map(|s| match &s.event {
            Event::BatchStarted {
                batch_id: b, tasks, ..
            } if b == batch_id => Some(*tasks),
            _ => None,
        })
        .unwrap_or(calls.len() as u32);
    let (succeeded, worst) = emitter.board(|b| {
        let entries: Vec<_> = calls.iter().filter_map(|c| b.call(c)).collect();
        let succeeded = entries
            .iter()
            .filter(|e| e.stop_reason == Some(StopReason::EndTurn))
            .count() as u32;
        let worst = entries.iter().filter_map(|e| e.summary.severity).max();
        (succeeded, worst)
    });
    Event::BatchFinished {
        batch_id: batch_id.to_string(),
        total,
        succeeded,
        failed: total.saturating_sub(succeeded),
        worst_verdict: worst,
    }
}

/// A new transcript at `path` for this session.
fn open_recorder(
    path: &std::path::Path,
    config: &SessionConfig,
    size: TerminalSize,
) -> Result<Recorder, SetupError> {
    let header = Header::now(config.root.path(), size);
    Recorder::create(path, &header)
        .map(|r| r.max_line(config.limits.max_transcript_line_bytes))
        .map_err(|error| SetupError::Record {
            path: path.to_path_buf(),
            error,
        })
}

/// Says the session began: continued (`resumed`), then its chat and the
/// agents installed.
fn announce(emitter: &Emitter, config: &SessionConfig, resumed: bool) {
    if resumed {
        emitter.emit(Event::SessionResumed {
            at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            quorum_version: env!("CARGO_PKG_VERSION").to_string(),
        });
    }
    emitter.emit(Event::SessionInfo {
        model: match (&config.model, &config.conductor) {
            (Some(m), _) => Some(m.name()),
            (None, Some(agent)) => Some(format!("acp:{agent}")),
            (None, None) => None,
        },
        agents: config
            .registry
            .installed()
            .iter()
            .map(|a| a.name.clone())
            .collect(),
    });
    if let Some(text) = config.default_chat.as_ref().and_then(|d| d.notice()) {
        emitter.emit(Event::Notice {
            level: NoticeLevel::Info,
            text,
        });
    }
}

/// Makes a conductor by its agent's name (the session's chat, or
/// `/model acp:NAME`), while the session lives.
fn conductor_factory(
    dispatcher: &Arc<Dispatcher>,
    (handed, answers): (&conductor::HandedTools, &conductor::ChatAnswers),
    (root, supervisor, emitter): (&crate::confine::fsroot::Root, &Supervisor, &Emitter),
    (permissions, elicit): (crate::agent::Permissions, crate::agent::Elicit),
) -> conductor::Factory {
    let handed = handed.clone();
    let (dispatcher, emitter) = (Arc::downgrade(dispatcher), emitter.clone());
    let (root, supervisor) = (root.clone(), supervisor.clone());
    let answers = answers.clone();
    Arc::new(move |name: &str| {
        let dispatcher = dispatcher
            .upgrade()
            .ok_or(conductor::ConductorError::Ended)?;
        let spec = dispatcher.registry().get(name)?.clone();
        let conductor = conductor::AcpConductor::new(
            spec,
            handed.clone(),
            (root.clone(), supervisor.clone(), emitter.clone()),
            (permissions, elicit),
            answers.clone(),
        );
        Ok(Box::new(conductor) as Box<dyn crate::model_loop::chat::Conductor>)
    })
}
