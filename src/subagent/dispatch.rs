//! The dispatcher: runs `subagent` calls on ACP agents, remembers their
//! sessions, and keeps the board of background tasks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;
use tokio::sync::{mpsc, watch};

use super::memory::{NoInput, SubAgent};
use super::types::{REVIEW_CONTRACT, SubAgentCallInput, SubAgentCallOutput};
use crate::acp::client::{
    Connection, PermissionAnswer, Policy, TurnControl, TurnRequest, TurnSink,
};
use crate::acp::fs::Root;
use crate::acp::registry::{Permissions, Registry, UnknownAgent};
use crate::event::{
    Activity, AgentRef, Emitter, Event, NoticeLevel, SessionKind, Severity, TaskState,
};

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error(transparent)]
    NoInput(#[from] NoInput),
    #[error(transparent)]
    UnknownAgent(#[from] UnknownAgent),
    #[error(
        "the internal agent is not available in this build of quorum; name an ACP agent with `agent`"
    )]
    NoInternalAgent,
    #[error("unknown task {0:?}; known tasks: {1}")]
    UnknownTask(String, String),
}

/// How permission requests are answered when the agent's policy is `ask`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// The person decides, in the TUI.
    Interactive,
    /// Headless: allow all, or none.
    All,
    None,
}

/// What a call returns: its output at once, or a task id for later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Done(CallOutcome),
    Started { task_id: String, call_id: String },
}

impl Reply {
    /// The tool result the model sees.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Reply::Done(o) => serde_json::to_value(SubAgentCallOutput {
                output: o.output.clone(),
                stop_reason: o.stop_reason.clone(),
            })
            .expect("plain data"),
            Reply::Started { task_id, .. } => {
                serde_json::json!({ "task_id": task_id, "status": "running" })
            }
        }
    }
}

/// A finished call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallOutcome {
    /// The agent's final message, as it wrote it.
    pub output: String,
    pub stop_reason: String,
    pub severity: Option<Severity>,
    /// How the session was opened (`None` if none could be).
    pub session: Option<SessionKind>,
    pub session_id: Option<String>,
}

/// A background task's completion, for the chat loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub task_id: String,
    pub agent: String,
    pub output: String,
    pub stop_reason: String,
    pub severity: Option<Severity>,
}

#[derive(Debug, Clone, Serialize)]
struct TaskEntry {
    task_id: String,
    #[serde(skip)]
    call_id: String,
    agent: String,
    state: TaskState,
    #[serde(skip)]
    started: Instant,
    elapsed_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_activity: Option<String>,
    tool_calls: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stop_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    severity: Option<Severity>,
}

struct Handle {
    cancel: watch::Sender<bool>,
    answers: mpsc::UnboundedSender<PermissionAnswer>,
}

pub struct Dispatcher {
    registry: Arc<Registry>,
    root: Root,
    emitter: Emitter,
    approval: Approval,
    memory: Mutex<SubAgent>,
    connections: tokio::sync::Mutex<HashMap<String, Arc<Connection>>>,
    tasks: Mutex<Vec<TaskEntry>>,
    running: Mutex<HashMap<String, Handle>>,
    /// Sessions a running turn is using, by `(agent, session id)`: a second
    /// call may not resume a session in the middle of a turn.
    busy: Mutex<std::collections::HashSet<(String, String)>>,
    next_id: AtomicU64,
    completions: mpsc::UnboundedSender<Completion>,
}

impl Dispatcher {
    pub fn new(
        registry: Arc<Registry>,
        root: Root,
        emitter: Emitter,
        approval: Approval,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<Completion>) {
        let (completions, rx) = mpsc::unbounded_channel();
        let d = Self {
            registry,
            root,
            emitter,
            approval,
            memory: Mutex::new(SubAgent::new()),
            connections: Default::default(),
            tasks: Default::default(),
            running: Default::default(),
            busy: Default::default(),
            next_id: AtomicU64::new(1),
            completions,
        };
        (Arc::new(d), rx)
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Runs a `subagent` call. A background call returns at once.
    pub async fn call(self: &Arc<Self>, input: SubAgentCallInput) -> Result<Reply, DispatchError> {
        let Some(agent) = input.acp_agent().map(str::to_string) else {
            return Err(DispatchError::NoInternalAgent);
        };
        let spec = self.registry.get(&agent)?.clone();
        let (message, mut resume) = {
            let mut memory = self.memory.lock().expect("not poisoned");
            let message = memory.resolve_input(input.input.as_deref())?;
            let resume = memory
                .resume_id(&agent, input.continue_session)
                .map(str::to_string);
            (message, resume)
        };
        if let Some(id) = &resume
            && self
                .busy
                .lock()
                .expect("not poisoned")
                .contains(&(agent.clone(), id.clone()))
        {
            self.emitter.emit(Event::Notice {
                level: NoticeLevel::Info,
                text: format!(
                    "{agent}'s session {id} is busy with another call; this one gets a new session"
                ),
            });
            resume = None;
        }
        let n = self.next_id.fetch_add(1, Ordering::SeqCst);
        let call_id = format!("call-{n}");
        let task_id = input.run_in_background.then(|| format!("t{n}"));
        let policy = match (spec.permissions, self.approval) {
            (Permissions::Allow, _) | (Permissions::Ask, Approval::All) => Policy::Allow,
            (Permissions::Deny, _) | (Permissions::Ask, Approval::None) => Policy::Deny,
            (Permissions::Ask, Approval::Interactive) => Policy::Ask,
        };
        self.emitter.emit(Event::SubagentStarted {
            call_id: call_id.clone(),
            task_id: task_id.clone(),
            agent: AgentRef::Acp(agent.clone()),
            input: message.clone(),
            code_review: input.code_review,
            background: input.run_in_background,
            session: None,
        });
        if let Some(task_id) = &task_id {
            self.tasks.lock().expect("not poisoned").push(TaskEntry {
                task_id: task_id.clone(),
                call_id: call_id.clone(),
                agent: agent.clone(),
                state: TaskState::Running,
                started: Instant::now(),
                elapsed_ms: 0,
                last_activity: None,
                tool_calls: 0,
                output: None,
                stop_reason: None,
                severity: None,
            });
        }
        let (cancel, cancel_rx) = watch::channel(false);
        let (answers, answers_rx) = mpsc::unbounded_channel();
        self.running
            .lock()
            .expect("not poisoned")
            .insert(call_id.clone(), Handle { cancel, answers });
        let control = TurnControl {
            cancel: cancel_rx,
            answers: answers_rx,
        };
        let mut prompt = message;
        if input.code_review {
            prompt.push_str(REVIEW_CONTRACT);
        }
        let job = CallJob {
            agent,
            call_id: call_id.clone(),
            task_id: task_id.clone(),
            prompt,
            code_review: input.code_review,
            resume,
            policy,
        };
        match task_id {
            Some(task_id) => {
                let this = self.clone();
                tokio::spawn(async move { this.run(job, control).await });
                Ok(Reply::Started { task_id, call_id })
            }
            None => Ok(Reply::Done(self.run(job, control).await)),
        }
    }

    async fn connection(&self, agent: &str) -> Result<Arc<Connection>, String> {
        let mut connections = self.connections.lock().await;
        if let Some(conn) = connections.get(agent) {
            if conn.alive() {
                return Ok(conn.clone());
            }
            self.emitter.emit(Event::Notice {
                level: NoticeLevel::Info,
                text: format!("{agent} had exited ({}); starting it again", conn.death()),
            });
        }
        let spec = self.registry.get(agent).map_err(|e| e.to_string())?;
        let conn = Connection::start(spec, &self.root)
            .await
            .map_err(|e| e.to_string())?;
        connections.insert(agent.to_string(), conn.clone());
        Ok(conn)
    }

    async fn run(&self, job: CallJob, mut control: TurnControl) -> CallOutcome {
        let sink = CallSink {
            dispatcher: self,
            agent: &job.agent,
            call_id: &job.call_id,
            task_id: job.task_id.as_deref(),
        };
        let result = match self.connection(&job.agent).await {
            Ok(conn) => {
                conn.turn(
                    TurnRequest {
                        prompt: &job.prompt,
                        root: self.root.path(),
                        resume: job.resume.as_deref(),
                        policy: job.policy,
                    },
                    &sink,
                    &mut control,
                )
                .await
            }
            Err(message) => crate::acp::client::TurnResult {
                output: message,
                stop_reason: "error".into(),
                session: None,
                session_id: None,
            },
        };
        self.running
            .lock()
            .expect("not poisoned")
            .remove(&job.call_id);
        if let Some(id) = &result.session_id {
            self.busy
                .lock()
                .expect("not poisoned")
                .remove(&(job.agent.clone(), id.clone()));
        }
        // Only a turn that succeeded moves the session on.
        if result.succeeded()
            && let Some(id) = &result.session_id
        {
            self.memory
                .lock()
                .expect("not poisoned")
                .store_session(&job.agent, id);
        }
        let events = super::finish(
            &job.call_id,
            &job.agent,
            &result.output,
            &result.stop_reason,
            job.code_review,
        );
        let mut severity = None;
        for event in events {
            if let Event::SubagentFinished { severity: s, .. } = &event {
                severity = *s;
            }
            self.emitter.emit(event);
        }
        if let Some(task_id) = &job.task_id {
            let shown = super::severity::parse(&result.output).body.to_string();
            if let Some(task) = self
                .tasks
                .lock()
                .expect("not poisoned")
                .iter_mut()
                .find(|t| &t.task_id == task_id)
            {
                task.state = TaskState::from_stop_reason(&result.stop_reason);
                task.elapsed_ms = task.started.elapsed().as_millis() as u64;
                task.output = Some(result.output.clone());
                task.stop_reason = Some(result.stop_reason.clone());
                task.severity = severity;
            }
            self.emitter.emit(Event::TaskCompleted {
                task_id: task_id.clone(),
                output: shown,
                stop_reason: result.stop_reason.clone(),
                severity,
            });
            let _ = self.completions.send(Completion {
                task_id: task_id.clone(),
                agent: job.agent.clone(),
                output: result.output.clone(),
                stop_reason: result.stop_reason.clone(),
                severity,
            });
        }
        CallOutcome {
            output: result.output,
            stop_reason: result.stop_reason,
            severity,
            session: result.session,
            session_id: result.session_id,
        }
    }

    /// Cancels a running call, by call id or task id. False if none runs.
    pub fn cancel(&self, id: &str) -> bool {
        let call_id = self
            .tasks
            .lock()
            .expect("not poisoned")
            .iter()
            .find(|t| t.task_id == id)
            .map_or(id.to_string(), |t| t.call_id.clone());
        match self.running.lock().expect("not poisoned").get(&call_id) {
            Some(handle) => handle.cancel.send(true).is_ok(),
            None => false,
        }
    }

    /// Cancels every running call.
    pub fn cancel_all(&self) {
        for handle in self.running.lock().expect("not poisoned").values() {
            let _ = handle.cancel.send(true);
        }
    }

    /// Answers a permission request shown in a call's box.
    pub fn answer(&self, call_id: &str, answer: PermissionAnswer) -> bool {
        match self.running.lock().expect("not poisoned").get(call_id) {
            Some(handle) => handle.answers.send(answer).is_ok(),
            None => false,
        }
    }

    /// The `subagent_status` tool: one task's state (and output once done),
    /// or every task.
    pub fn status(&self, task_id: Option<&str>) -> Result<serde_json::Value, DispatchError> {
        let mut tasks = self.tasks.lock().expect("not poisoned");
        for t in tasks.iter_mut().filter(|t| t.state == TaskState::Running) {
            t.elapsed_ms = t.started.elapsed().as_millis() as u64;
        }
        match task_id {
            Some(id) => match tasks.iter().find(|t| t.task_id == id) {
                Some(t) => Ok(serde_json::to_value(t).expect("plain data")),
                None => Err(DispatchError::UnknownTask(
                    id.to_string(),
                    if tasks.is_empty() {
                        "none".to_string()
                    } else {
                        tasks
                            .iter()
                            .map(|t| t.task_id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    },
                )),
            },
            None => Ok(serde_json::json!({ "tasks": *tasks })),
        }
    }

    /// Whether any call is still running.
    pub fn busy(&self) -> bool {
        !self.running.lock().expect("not poisoned").is_empty()
    }

    /// Forgets sessions and the last input (`/new`).
    pub fn forget(&self) {
        self.memory.lock().expect("not poisoned").clear();
    }

    /// The session stored for `agent`, if any.
    pub fn stored_session(&self, agent: &str) -> Option<String> {
        self.memory
            .lock()
            .expect("not poisoned")
            .stored_session(agent)
            .map(str::to_string)
    }

    /// Stops every agent process.
    pub async fn shutdown(&self) {
        for conn in self.connections.lock().await.drain().map(|(_, c)| c) {
            conn.close();
        }
    }
}

struct CallJob {
    agent: String,
    call_id: String,
    task_id: Option<String>,
    prompt: String,
    code_review: bool,
    resume: Option<String>,
    policy: Policy,
}

/// Turns a call's activity into events, and keeps its task's summary.
struct CallSink<'a> {
    dispatcher: &'a Dispatcher,
    agent: &'a str,
    call_id: &'a str,
    task_id: Option<&'a str>,
}

impl TurnSink for CallSink<'_> {
    fn activity(&self, activity: Activity) {
        if let Some(task_id) = self.task_id {
            let summary = match &activity {
                Activity::ToolCall { title, .. } => Some((format!("⚙ {title}"), true)),
                Activity::PermissionRequest { title, .. } => {
                    Some((format!("? permission: {title}"), false))
                }
                _ => None,
            };
            // Summaries change on tool calls and requests, not on every chunk.
            if let Some((text, tool)) = summary {
                let mut tasks = self.dispatcher.tasks.lock().expect("not poisoned");
                if let Some(t) = tasks.iter_mut().find(|t| t.task_id == task_id) {
                    t.tool_calls += u32::from(tool);
                    t.last_activity = Some(text.clone());
                    self.dispatcher.emitter.emit(Event::TaskProgress {
                        task_id: task_id.to_string(),
                        state: t.state,
                        last_activity: Some(text),
                        tool_calls: t.tool_calls,
                    });
                }
            }
        }
        self.dispatcher.emitter.emit(Event::SubagentActivity {
            call_id: self.call_id.to_string(),
            activity,
        });
    }

    fn session(&self, kind: SessionKind, session_id: &str) {
        self.dispatcher
            .busy
            .lock()
            .expect("not poisoned")
            .insert((self.agent.to_string(), session_id.to_string()));
        self.dispatcher.emitter.emit(Event::SubagentSession {
            call_id: self.call_id.to_string(),
            session: kind,
            session_id: Some(session_id.to_string()),
        });
    }

    fn notice(&self, text: &str) {
        self.dispatcher.emitter.emit(Event::Notice {
            level: NoticeLevel::Warning,
            text: text.to_string(),
        });
    }
}
