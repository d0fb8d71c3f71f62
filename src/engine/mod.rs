//! The session engine: built once from a [`SessionConfig`] for the TUI,
//! `quorum call`, `quorum run` and the tests. It wires the dispatcher, the
//! chat loop and the internal agent together, owns the event bus (with the
//! task board and the recorder), takes commands ([`Op`]) and emits events.
//! Front ends know nothing of ACP or models: they send `Op`s and draw
//! `Event`s.
//!
//! [`Op`]: crate::event::Op

pub mod config;
mod internal;
mod ops;
mod tools;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use tokio::sync::mpsc;

pub use config::SessionConfig;
pub use ops::{Mention, WELCOME, parse_mention};

use crate::event::{Event, NoticeLevel, Op, Stamped};
use crate::harness::chat::{Chat, ChatHandle};
use crate::runtime::bus::Emitter;
use crate::runtime::supervisor::Supervisor;
use crate::subagent::dispatch::{DispatchError, Dispatcher, Reply};
use crate::subagent::picks::ModelPicks;
use crate::subagent::tool::SubagentTool;
use crate::subagent::tool::input::SubAgentCallInput;
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
    terminal: TerminalSize,
    /// Every process the session starts: agents, their children, the
    /// internal agent's shell commands.
    supervisor: Supervisor,
}

impl Session {
    /// Builds a session; its events arrive on the returned channel, the
    /// first of them `session_info`.
    pub fn start(
        config: SessionConfig,
        started: Instant,
    ) -> Result<(Self, mpsc::UnboundedReceiver<Stamped>)> {
        let (emitter, events) = Emitter::channel(started);
        if let Some(path) = &config.record {
            let recorder = open_recorder(path, &config, config.terminal)?;
            let _ = emitter.record(recorder);
        }
        emitter.emit(Event::SessionInfo {
            model: config.model.as_ref().map(|m| m.name()),
            agents: config
                .registry
                .installed()
                .iter()
                .map(|a| a.name.clone())
                .collect(),
        });
        let root = config.root.clone();
        let supervisor = Supervisor::new();
        let (dispatcher, completions) = Dispatcher::new(
            Arc::new(config.registry),
            config.root,
            emitter.clone(),
            config.permissions,
            supervisor.clone(),
            ModelPicks::load(config.model_picks),
            config.max_parallel,
        );
        let (chat, completions) = match config.model {
            Some(model) => {
                dispatcher.set_internal(Arc::new(internal::Internal::new(
                    model.clone(),
                    config.agent_depth,
                    root,
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
        let session = Self {
            emitter,
            dispatcher,
            chat,
            completions,
            base_url: config.base_url,
            terminal: config.terminal,
            supervisor,
        };
        Ok((session, events))
    }

    /// Serves a front end: the chat runs in its own task, and the returned
    /// sender takes the person's commands until it is dropped.
    pub fn serve(&mut self) -> mpsc::UnboundedSender<Op> {
        let chat = self.chat.take().map(ChatHandle::spawn);
        if chat.is_none() {
            self.emitter.emit(Event::Notice {
                level: NoticeLevel::Warning,
                text: WELCOME.into(),
            });
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let ops = ops::Ops {
            emitter: self.emitter.clone(),
            dispatcher: self.dispatcher.clone(),
            chat,
            base_url: self.base_url.clone(),
            terminal: self.terminal,
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

    /// Ends the session: running calls are cancelled, and every process
    /// it started is stopped (SIGTERM, then SIGKILL after a short grace)
    /// before this returns.
    pub fn shutdown(&self) {
        self.dispatcher.cancel_all();
        self.dispatcher.shutdown();
        self.supervisor.shutdown_blocking();
    }
}

impl Drop for Session {
    /// However the front end ends, nothing the session started outlives it.
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A new transcript at `path` for this session.
fn open_recorder(
    path: &std::path::Path,
    config: &SessionConfig,
    size: TerminalSize,
) -> Result<Recorder> {
    let header = Header::now(config.root.path(), size);
    Recorder::create(path, &header).with_context(|| {
        format!(
            "cannot record to {}: choose a new file name",
            path.display()
        )
    })
}
