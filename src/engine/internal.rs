//! The internal nested agent, injected into the dispatcher as an
//! [`Agent`]: a fresh model loop with an empty context, its file and shell
//! tools confined to the session directory and auto-approved, nothing
//! persisted; only its final report is returned. Its activity goes into
//! its box.

use std::sync::{Arc, Weak};

use futures::FutureExt;
use futures::future::BoxFuture;

use crate::agent::{Agent, TurnControl, TurnInput, TurnSink};
use crate::confine::fsroot::Root;
use crate::event::{Activity, Outcome, ToolContent, ToolDetail, ToolStatus, Usage};
use crate::llm::{Model, ToolCall};
use crate::model_loop::tools::{FileTools, Union, WriteQuestion};
use crate::model_loop::{ModelLoop, Sink, ToolError, ToolSet, summarize_args};
use crate::runtime::sandbox::Policy;
use crate::runtime::supervisor::Supervisor;
use crate::subagent::dispatch::Dispatcher;
use crate::subagent::tool::SubagentTool;

pub struct Internal {
    model: Arc<dyn Model>,
    /// How deep internal agents may nest sub-agent calls of their own.
    max_depth: u32,
    root: Root,
    /// How its shell commands are confined.
    shell: Policy,
    /// Owns the shell tool's commands.
    supervisor: Supervisor,
    /// For nested calls (weak: the dispatcher holds this runner).
    dispatcher: Weak<Dispatcher>,
}

impl Internal {
    pub fn new(
        model: Arc<dyn Model>,
        max_depth: u32,
        (root, shell): (Root, Policy),
        supervisor: Supervisor,
        dispatcher: Weak<Dispatcher>,
    ) -> Self {
        Self {
            model,
            max_depth,
            root,
            shell,
            supervisor,
            dispatcher,
        }
    }
}

impl Agent for Internal {
    /// Runs the task of `input` at its depth; a session to resume is none
    /// of its business.
    fn turn<'a>(
        &'a self,
        input: TurnInput<'a>,
        sink: &'a dyn TurnSink,
        control: &'a mut TurnControl,
    ) -> BoxFuture<'a, Outcome> {
        let prompt = input.prompt.to_string();
        let depth = input.depth;
        let exclude = input.exclude.cloned();
        let person = input.person;
        let cancel = control.cancel.clone();
        // A worktree task's tools work in its worktree, and only there.
        let root = match input.root.map(crate::runtime::git::root) {
            None => Ok(self.root.clone()),
            Some(Ok(root)) => Ok(root.with_max_read(self.root.max_read())),
            Some(Err(e)) => Err(e),
        };
        async move {
            let root = match root {
                Ok(root) => root,
                Err(e) => return Outcome::error(format!("internal agent: {e}")),
            };
            let (asker, mut questions) = tokio::sync::mpsc::unbounded_channel();
            let files: Arc<dyn ToolSet> = Arc::new(
                FileTools::new(root.clone(), self.supervisor.clone())
                    .with_shell(self.shell.clone())
                    .excluding(exclude)
                    .asking(asker),
            );
            let nested = (depth <= self.max_depth)
                .then(|| self.dispatcher.upgrade())
                .flatten();
            let tools: Arc<dyn ToolSet> = match nested {
                Some(dispatcher) => Arc::new(Union(vec![
                    files,
                    Arc::new(SubagentTool::new(dispatcher, depth)),
                ])),
                None => files,
            };
            let system = format!(
                "You are a helper agent working in the directory {}. Use your tools to look at and \
                 change files there; paths are relative to it. Work until the task is done, then \
                 answer with your final report only.",
                root.path().display()
            );
            let mut model_loop = ModelLoop::new(self.model.clone(), tools, Some(system));
            let box_sink = BoxSink(sink);
            let turn = model_loop.turn(prompt, &box_sink, cancel);
            tokio::pin!(turn);
            // Its questions to the person (a write of a file other programs
            // run, in their tree), asked in its box, answered by the keys.
            let mut asked = Asked::default();
            let ended = loop {
                tokio::select! {
                    ended = &mut turn => break ended,
                    Some(question) = questions.recv() => asked.ask(question, person, sink),
                    Some(answer) = control.answers.recv() => asked.answer(answer, sink),
                }
            };
            match ended {
                Ok(outcome) => outcome,
                Err(e) => Outcome::error(format!("internal agent: {e}")),
            }
        }
        .boxed()
    }

    /// A fresh model loop every time: nothing to resume.
    fn keeps_sessions(&self) -> bool {
        false
    }
}

/// The internal agent's questions waiting for the person, by request id.
#[derive(Default)]
struct Asked {
    next: u32,
    waiting: std::collections::HashMap<String, tokio::sync::oneshot::Sender<bool>>,
}

impl Asked {
    /// Shows `question` in the box as a permission request, whatever the
    /// agent's permissions (an internal agent is auto-approved, but not
    /// for this); with nobody to ask it is refused at once.
    fn ask(&mut self, question: WriteQuestion, person: bool, sink: &dyn TurnSink) {
        if !person {
            let _ = question.reply.send(false);
            return;
        }
        self.next += 1;
        let id = format!("quorum-write-{}", self.next);
        let shown = question.below.display().to_string();
        sink.activity(Activity::PermissionRequest {
            id: id.clone(),
            title: format!(
                "write {shown}? {} (quorum asks: files other programs run are written in your tree only with your leave)",
                question.why
            ),
            options: vec!["Allow once".into(), "Reject".into()],
            detail: Box::new(ToolDetail {
                kind: Some("edit".into()),
                locations: vec![question.path.clone()],
                content: question
                    .new
                    .map(|new_text| ToolContent::Diff {
                        path: shown,
                        old_text: question.old,
                        new_text,
                    })
                    .into_iter()
                    .collect(),
                ..Default::default()
            }),
        });
        self.waiting.insert(id, question.reply);
    }

    /// The person's answer: option 0 allows.
    fn answer(&mut self, answer: crate::agent::PermissionAnswer, sink: &dyn TurnSink) {
        let Some(reply) = self.waiting.remove(&answer.request_id) else {
            return;
        };
        sink.activity(Activity::PermissionResolved {
            id: answer.request_id,
            outcome: match answer.option {
                Some(0) => "Allow once".into(),
                Some(_) => "Reject".into(),
                None => "cancelled".into(),
            },
        });
        let _ = reply.send(answer.option == Some(0));
    }
}

/// The internal agent's model loop reports into its box.
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
            detail: Box::new(tool_detail(call)),
        });
    }

    fn tool_finished(&self, call: &ToolCall, result: &Result<String, ToolError>) {
        let text = match result {
            Ok(text) => clip(text, RESULT_BYTES),
            Err(e) => clip(&e.to_string(), RESULT_BYTES),
        };
        self.0.activity(Activity::ToolCallUpdate {
            id: call.id.clone(),
            title: None,
            status: Some(if result.is_ok() {
                ToolStatus::Completed
            } else {
                ToolStatus::Failed
            }),
            detail: Box::new(ToolDetail {
                content: (!text.is_empty())
                    .then_some(ToolContent::Text { text })
                    .into_iter()
                    .collect(),
                ..ToolDetail::default()
            }),
        });
    }

    /// The last request's input and output are what the model holds in
    /// context now; the internal agent knows no window size and no cost.
    fn usage(&self, input_tokens: u64, output_tokens: u64) {
        self.0.activity(Activity::Usage {
            usage: Usage {
                used: input_tokens + output_tokens,
                ..Usage::default()
            },
        });
    }

    fn retry(&self, attempt: u32, wait_ms: u64, reason: &str) {
        self.0.notice(&format!(
            "internal agent's model: {reason}; retry {attempt} in {:.1} s",
            wait_ms as f64 / 1000.0
        ));
    }
}

/// How much of a tool's result goes into the box's record (bytes).
const RESULT_BYTES: usize = 4096;

/// The internal tools described as ACP describes tool calls: `write` and
/// `edit` are edits of their `path` (with the change as a diff), `shell`
/// runs a command, `read`/`list` read, `grep` searches.
fn tool_detail(call: &ToolCall) -> ToolDetail {
    let args = serde_json::from_str::<serde_json::Value>(&call.arguments).ok();
    let arg = |name: &str| {
        args.as_ref()
            .and_then(|a| a.get(name))
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    let kind = match call.name.as_str() {
        "write" | "edit" => "edit",
        "read" | "list" => "read",
        "grep" => "search",
        "shell" => "execute",
        _ => "other",
    };
    let path = arg("path");
    let content = match (call.name.as_str(), &path) {
        ("write", Some(path)) => vec![ToolContent::Diff {
            path: path.clone(),
            old_text: None,
            new_text: arg("content").unwrap_or_default(),
        }],
        ("edit", Some(path)) => vec![ToolContent::Diff {
            path: path.clone(),
            old_text: arg("old"),
            new_text: arg("new").unwrap_or_default(),
        }],
        _ => vec![],
    };
    ToolDetail {
        kind: (kind != "other").then(|| kind.to_string()),
        locations: path.into_iter().collect(),
        raw_input: args,
        content,
        raw_output: None,
    }
}

/// `text` cut to at most `max` bytes (on a char boundary), marked when cut.
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n… ({} more bytes)", &text[..end], text.len() - end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: serde_json::Value) -> ToolCall {
        ToolCall {
            id: "1".into(),
            name: name.into(),
            arguments: args.to_string(),
        }
    }

    #[test]
    fn internal_tools_get_kinds_paths_and_diffs() {
        let d = tool_detail(&call(
            "write",
            serde_json::json!({"path": "README.md", "content": "new"}),
        ));
        assert_eq!(d.kind.as_deref(), Some("edit"));
        assert_eq!(d.locations, vec!["README.md".to_string()]);
        assert_eq!(
            d.content,
            vec![ToolContent::Diff {
                path: "README.md".into(),
                old_text: None,
                new_text: "new".into()
            }]
        );
        let d = tool_detail(&call(
            "edit",
            serde_json::json!({"path": "a.rs", "old": "x", "new": "y"}),
        ));
        assert!(matches!(&d.content[0], ToolContent::Diff { old_text: Some(o), .. } if o == "x"));
        let d = tool_detail(&call("shell", serde_json::json!({"command": "ls"})));
        assert_eq!(d.kind.as_deref(), Some("execute"));
        assert_eq!(d.raw_input.unwrap()["command"], "ls");
        assert_eq!(clip("ééé", 3), "é\n… (4 more bytes)");
    }
}
