//! The internal nested agent, injected into the dispatcher: a fresh
//! harness with an empty context, its file and shell tools confined to the
//! session directory and auto-approved, nothing persisted; only its final
//! report is returned. Its activity goes into its box.

use std::sync::{Arc, Weak};

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::watch;

use crate::acp::client::TurnSink;
use crate::acp::fs::Root;
use crate::event::{Activity, Outcome, ToolStatus};
use crate::harness::chat::ChatTools;
use crate::harness::tools::{FileTools, Union};
use crate::harness::{Harness, Sink, ToolSet, summarize_args};
use crate::llm::{Model, ToolCall};
use crate::subagent::dispatch::{Dispatcher, InternalRunner, InternalTask};
use crate::supervisor::Supervisor;

pub struct Internal {
    model: Arc<dyn Model>,
    /// How deep internal agents may nest sub-agent calls of their own.
    max_depth: u32,
    root: Root,
    /// Owns the shell tool's commands.
    supervisor: Supervisor,
    /// For nested calls (weak: the dispatcher holds this runner).
    dispatcher: Weak<Dispatcher>,
}

impl Internal {
    pub fn new(
        model: Arc<dyn Model>,
        max_depth: u32,
        root: Root,
        supervisor: Supervisor,
        dispatcher: Weak<Dispatcher>,
    ) -> Self {
        Self {
            model,
            max_depth,
            root,
            supervisor,
            dispatcher,
        }
    }
}

impl InternalRunner for Internal {
    fn run<'a>(
        &'a self,
        task: InternalTask,
        sink: &'a dyn TurnSink,
        cancel: watch::Receiver<bool>,
    ) -> BoxFuture<'a, Outcome> {
        async move {
            let InternalTask {
                prompt,
                depth,
                exclude,
            } = task;
            let files: Arc<dyn ToolSet> = Arc::new(
                FileTools::new(self.root.clone(), self.supervisor.clone()).excluding(exclude),
            );
            let nested = (depth <= self.max_depth)
                .then(|| self.dispatcher.upgrade())
                .flatten();
            let tools: Arc<dyn ToolSet> = match nested {
                Some(dispatcher) => Arc::new(Union(vec![
                    files,
                    Arc::new(ChatTools::new(dispatcher, depth)),
                ])),
                None => files,
            };
            let system = format!(
                "You are a helper agent working in the directory {}. Use your tools to look at and \
                 change files there; paths are relative to it. Work until the task is done, then \
                 answer with your final report only.",
                self.root.path().display()
            );
            let mut harness = Harness::new(self.model.clone(), tools, Some(system));
            match harness.turn(prompt, &BoxSink(sink), cancel).await {
                Ok(outcome) => outcome,
                Err(e) => Outcome::error(format!("internal agent: {e}")),
            }
        }
        .boxed()
    }
}

/// The internal agent's harness reports into its box.
struct BoxSink<'a>(&'a dyn TurnSink);

impl Sink for BoxSink<'_> {
    fn text(&self, text: &str) {
        self.0.activity(Activity::MessageChunk {
            text: text.to_string(),
        });
    }

    fn message_end(&self) {}

    fn tool_started(&self, call: &ToolCall) {
        self.0.activity(Activity::ToolCall {
            id: call.id.clone(),
            title: format!("{} {}", call.name, summarize_args(call)),
            status: ToolStatus::InProgress,
        });
    }

    fn tool_finished(&self, call: &ToolCall, result: &Result<String, String>) {
        self.0.activity(Activity::ToolCallUpdate {
            id: call.id.clone(),
            title: None,
            status: Some(if result.is_ok() {
                ToolStatus::Completed
            } else {
                ToolStatus::Failed
            }),
        });
    }

    fn usage(&self, _input_tokens: u64, _output_tokens: u64) {}

    fn retry(&self, attempt: u32, wait_ms: u64, reason: &str) {
        self.0.notice(&format!(
            "internal agent's model: {reason}; retry {attempt} in {:.1} s",
            wait_ms as f64 / 1000.0
        ));
    }
}
