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
    Connection, PermissionAnswer, Policy, TurnControl, TurnRequest, TurnResult, TurnSink,
};
use crate::acp::fs::Root;
use crate::acp::registry::{Permissions, Registry, UnknownAgent};
use crate::event::{
    Activity, AgentRef, Emitter, Event, NoticeLevel, SessionKind, Severity, TaskState,
};
use crate::harness::chat::ChatTools;
use crate::harness::tools::{FileTools, Union};
use crate::harness::{Harness, Sink, ToolSet};
use crate::llm::{Model, ToolCall};
use crate::supervisor::Supervisor;

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
    /// The model internal agents run on, and how deep they may nest.
    internal: Mutex<Option<(Arc<dyn Model>, u32)>>,
    /// Owns the agent processes and the internal agent's shell commands.
    supervisor: Supervisor,
}

impl Dispatcher {
    pub fn new(
        registry: Arc<Registry>,
        root: Root,
        emitter: Emitter,
        approval: Approval,
        supervisor: Supervisor,
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
            internal: Mutex::new(None),
            next_id: AtomicU64::new(1),
            completions,
            supervisor,
        };
        (Arc::new(d), rx)
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Lets calls without an `agent` run the internal agent on `model`.
    /// `max_depth` is how deep internal agents may nest further sub-agent
    /// calls (0: the internal agent gets no `subagent` tool).
    pub fn set_internal_model(&self, model: Arc<dyn Model>, max_depth: u32) {
        *self.internal.lock().expect("not poisoned") = Some((model, max_depth));
    }

    /// Runs a `subagent` call. A background call returns at once.
    pub async fn call(self: &Arc<Self>, input: SubAgentCallInput) -> Result<Reply, DispatchError> {
        self.call_with(input, None, 0).await
    }

    /// Runs a call whose turn is cancelled when `cancel` turns true (a
    /// foreground call; a background one only by [`Dispatcher::cancel`]),
    /// made at nesting `depth` (0: by the main chat).
    pub async fn call_with(
        self: &Arc<Self>,
        input: SubAgentCallInput,
        cancel: Option<watch::Receiver<bool>>,
        depth: u32,
    ) -> Result<Reply, DispatchError> {
        let target = match input.acp_agent() {
            Some(agent) => {
                let spec = self.registry.get(agent)?;
                let policy = match (spec.permissions, self.approval) {
                    (Permissions::Allow, _) | (Permissions::Ask, Approval::All) => Policy::Allow,
                    (Permissions::Deny, _) | (Permissions::Ask, Approval::None) => Policy::Deny,
                    (Permissions::Ask, Approval::Interactive) => Policy::Ask,
                };
                Target::Acp {
                    agent: agent.to_string(),
                    policy,
                }
            }
            None => {
                let (model, max_depth) = self
                    .internal
                    .lock()
                    .expect("not poisoned")
                    .clone()
                    .ok_or(DispatchError::NoInternalAgent)?;
                Target::Internal {
                    model,
                    nested: depth < max_depth,
                    depth: depth + 1,
                }
            }
        };
        let agent = match &target {
            Target::Acp { agent, .. } => agent.clone(),
            Target::Internal { .. } => "internal".to_string(),
        };
        let (message, mut resume) = {
            let mut memory = self.memory.lock().expect("not poisoned");
            let message = memory.resolve_input(input.input.as_deref())?;
            // The internal agent starts fresh every time.
            let resume = match target {
                Target::Acp { .. } => memory
                    .resume_id(&agent, input.continue_session)
                    .map(str::to_string),
                Target::Internal { .. } => None,
            };
            (message, resume)
        };
        // Claim the session to resume; one busy with another turn is not
        // resumed twice (checked and claimed under one lock).
        if let Some(id) = resume.clone() {
            let claimed = self
                .busy
                .lock()
                .expect("not poisoned")
                .insert((agent.clone(), id.clone()));
            if !claimed {
                self.emitter.emit(Event::Notice {
                    level: NoticeLevel::Info,
                    text: format!(
                        "{agent}'s session {id} is busy with another call; this one gets a new session"
                    ),
                });
                resume = None;
            }
        }
        let n = self.next_id.fetch_add(1, Ordering::SeqCst);
        let call_id = format!("call-{n}");
        let task_id = input.run_in_background.then(|| format!("t{n}"));
        self.emitter.emit(Event::SubagentStarted {
            call_id: call_id.clone(),
            task_id: task_id.clone(),
            agent: match &target {
                Target::Acp { agent, .. } => AgentRef::Acp(agent.clone()),
                Target::Internal { .. } => AgentRef::Internal,
            },
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
        let (cancel_tx, cancel_rx) = watch::channel(false);
        if let (Some(mut outer), None) = (cancel, &task_id) {
            // The caller's cancel reaches this call's turn.
            let tx = cancel_tx.clone();
            tokio::spawn(async move {
                crate::harness::cancelled(&mut outer).await;
                let _ = tx.send(true);
            });
        }
        let (answers, answers_rx) = mpsc::unbounded_channel();
        self.running.lock().expect("not poisoned").insert(
            call_id.clone(),
            Handle {
                cancel: cancel_tx,
                answers,
            },
        );
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
            target,
            call_id: call_id.clone(),
            task_id: task_id.clone(),
            prompt,
            code_review: input.code_review,
            resume,
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
        let conn = Connection::start(spec, &self.root, &self.supervisor)
            .await
            .map_err(|e| e.to_string())?;
        connections.insert(agent.to_string(), conn.clone());
        Ok(conn)
    }

    /// The internal agent: a fresh harness with an empty context, its file
    /// and shell tools auto-approved, nothing persisted; only its final
    /// report is returned.
    async fn run_internal(
        self: &Arc<Self>,
        model: Arc<dyn Model>,
        nested: bool,
        depth: u32,
        prompt: &str,
        sink: &CallSink<'_>,
        cancel: watch::Receiver<bool>,
    ) -> TurnResult {
        let files: Arc<dyn ToolSet> =
            Arc::new(FileTools::new(self.root.clone(), self.supervisor.clone()));
        let tools: Arc<dyn ToolSet> = if nested {
            Arc::new(Union(vec![
                files,
                Arc::new(ChatTools::new(self.clone(), depth)),
            ]))
        } else {
            files
        };
        let system = format!(
            "You are a helper agent working in the directory {}. Use your tools to look at and \
             change files there; paths are relative to it. Work until the task is done, then \
             answer with your final report only.",
            self.root.path().display()
        );
        let mut harness = Harness::new(model, tools, Some(system));
        let box_sink = BoxSink { inner: sink };
        match harness.turn(prompt.to_string(), &box_sink, cancel).await {
            Ok(end) => TurnResult {
                output: end.final_text,
                stop_reason: end.stop_reason,
                session: None,
                session_id: None,
            },
            Err(e) => TurnResult {
                output: format!("internal agent: {e}"),
                stop_reason: "error".into(),
                session: None,
                session_id: None,
            },
        }
    }

    async fn run(self: &Arc<Self>, job: CallJob, mut control: TurnControl) -> CallOutcome {
        let sink = CallSink {
            dispatcher: self,
            agent: &job.agent,
            call_id: &job.call_id,
            task_id: job.task_id.as_deref(),
        };
        let result = match &job.target {
            Target::Acp { policy, .. } => match self.connection(&job.agent).await {
                Ok(conn) => {
                    conn.turn(
                        TurnRequest {
                            prompt: &job.prompt,
                            root: self.root.path(),
                            resume: job.resume.as_deref(),
                            policy: *policy,
                        },
                        &sink,
                        &mut control,
                    )
                    .await
                }
                Err(message) => TurnResult {
                    output: message,
                    stop_reason: "error".into(),
                    session: None,
                    session_id: None,
                },
            },
            Target::Internal {
                model,
                nested,
                depth,
            } => {
                self.run_internal(
                    model.clone(),
                    *nested,
                    *depth,
                    &job.prompt,
                    &sink,
                    control.cancel.clone(),
                )
                .await
            }
        };
        {
            let mut busy = self.busy.lock().expect("not poisoned");
            for id in [&job.resume, &result.session_id].into_iter().flatten() {
                busy.remove(&(job.agent.clone(), id.clone()));
            }
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
        // Done only now: a completion is sent before the call stops counting
        // as running, so a waiting chat never misses it.
        self.running
            .lock()
            .expect("not poisoned")
            .remove(&job.call_id);
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

enum Target {
    Acp {
        agent: String,
        policy: Policy,
    },
    Internal {
        model: Arc<dyn Model>,
        /// Whether this internal agent may call sub-agents itself.
        nested: bool,
        depth: u32,
    },
}

struct CallJob {
    agent: String,
    target: Target,
    call_id: String,
    task_id: Option<String>,
    prompt: String,
    code_review: bool,
    resume: Option<String>,
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

/// An internal agent's harness reports into its box.
struct BoxSink<'a, 'b> {
    inner: &'a CallSink<'b>,
}

/// A one-line summary of a tool call's arguments.
pub fn summarize_args(call: &ToolCall) -> String {
    let summary = match serde_json::from_str::<serde_json::Value>(&call.arguments) {
        Ok(serde_json::Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => format!("{k}: {}", s.lines().next().unwrap_or("")),
                other => format!("{k}: {other}"),
            })
            .collect::<Vec<_>>()
            .join(", "),
        _ => call.arguments.clone(),
    };
    if summary.chars().count() > 120 {
        let cut: String = summary.chars().take(119).collect();
        format!("{cut}…")
    } else {
        summary
    }
}

impl Sink for BoxSink<'_, '_> {
    fn text(&self, text: &str) {
        self.inner.activity(Activity::MessageChunk {
            text: text.to_string(),
        });
    }

    fn message_end(&self) {}

    fn tool_started(&self, call: &ToolCall) {
        self.inner.activity(Activity::ToolCall {
            id: call.id.clone(),
            title: format!("{} {}", call.name, summarize_args(call)),
            status: crate::event::ToolStatus::InProgress,
        });
    }

    fn tool_finished(&self, call: &ToolCall, result: &Result<String, String>) {
        self.inner.activity(Activity::ToolCallUpdate {
            id: call.id.clone(),
            title: None,
            status: Some(if result.is_ok() {
                crate::event::ToolStatus::Completed
            } else {
                crate::event::ToolStatus::Failed
            }),
        });
    }

    fn usage(&self, _input_tokens: u64, _output_tokens: u64) {}

    fn retry(&self, attempt: u32, wait_ms: u64, reason: &str) {
        self.inner.notice(&format!(
            "internal agent's model: {reason}; retry {attempt} in {:.1} s",
            wait_ms as f64 / 1000.0
        ));
    }
}
