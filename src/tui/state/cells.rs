//! The transcript's cells, and the chat's own events that add them: the
//! person's and the model's messages, the model's tool calls, notices and
//! errors.

use super::{BatchHeader, State, SubagentBox, clean};
use crate::event::{NoticeLevel, Severity, StopReason};

/// One item of the transcript. `rev` changes whenever the cell does, so
/// its layout can be cached.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub rev: u64,
    pub kind: CellKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum CellKind {
    User {
        text: String,
    },
    Assistant {
        text: String,
        done: bool,
    },
    /// (Boxed, as the rarer and larger kinds are: a cell costs what its
    /// commonest kinds do, a long session holding many.)
    Tool(Box<ToolCell>),
    Notice {
        level: NoticeLevel,
        text: String,
    },
    Error {
        text: String,
    },
    Subagent(Box<SubagentBox>),
    /// The chat's conductor asks the person's permission for one of its
    /// own tool calls; `answer` once answered.
    ChatPermission(Box<ChatPermission>),
    /// The header of a batch: its tasks' boxes follow, grouped under it.
    Batch(Box<BatchHeader>),
    /// An arena's comparison: a row per writer, the winner marked.
    Arena(Box<super::ArenaCell>),
    /// A background task's completion, reported back into the chat.
    TaskReport(Box<TaskReport>),
}

/// One of the chat model's own tool calls.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCell {
    pub name: String,
    pub summary: String,
    /// `(ok, summary)` once finished.
    pub result: Option<(bool, String)>,
}

/// The chat's conductor asks the person's permission for one of its own
/// tool calls.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatPermission {
    pub id: String,
    pub agent: String,
    pub title: String,
    pub options: Vec<String>,
    /// Once answered.
    pub answer: Option<String>,
}

/// A background task's completion, reported back into the chat.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskReport {
    pub task_id: String,
    pub agent: String,
    pub output: String,
    pub stop_reason: StopReason,
    pub severity: Option<Severity>,
}

impl State {
    pub(super) fn push(&mut self, kind: CellKind) -> usize {
        self.next_rev += 1;
        self.cells.push(Cell {
            rev: self.next_rev,
            kind,
        });
        self.cells.len() - 1
    }

    pub(super) fn touch(&mut self, index: usize) -> &mut CellKind {
        self.next_rev += 1;
        let cell = &mut self.cells[index];
        cell.rev = self.next_rev;
        &mut cell.kind
    }

    pub(super) fn on_user_message(&mut self, text: &str) {
        self.open_assistant = None;
        self.push(CellKind::User { text: clean(text) });
    }

    pub(super) fn on_assistant_delta(&mut self, text: &str) {
        let text = self.assistant_stream.push(text).into_owned();
        // What was held back was text after all.
        self.writing_call = None;
        match self.open_assistant {
            Some(i) => {
                if let CellKind::Assistant { text: t, .. } = self.touch(i) {
                    t.push_str(&text);
                }
            }
            None => {
                let i = self.push(CellKind::Assistant { text, done: false });
                self.open_assistant = Some(i);
            }
        }
    }

    pub(super) fn on_assistant_end(&mut self) {
        self.writing_call = None;
        if let Some(i) = self.open_assistant.take()
            && let CellKind::Assistant { done, text } = self.touch(i)
        {
            *done = true;
            // It streamed in, growing by doubling: keep just the text.
            text.shrink_to_fit();
        }
    }

    pub(super) fn on_tool_call_started(&mut self, id: &str, name: &str, summary: &str) {
        self.open_assistant = None;
        self.writing_call = None;
        let i = self.push(CellKind::Tool(Box::new(ToolCell {
            name: clean(name),
            summary: clean(summary),
            result: None,
        })));
        self.tools.insert(id.to_string(), i);
    }

    pub(super) fn on_tool_call_finished(&mut self, id: &str, ok: bool, summary: &str) {
        if let Some(&i) = self.tools.get(id)
            && let CellKind::Tool(tool) = self.touch(i)
        {
            tool.result = Some((ok, clean(summary)));
        }
    }

    pub(super) fn on_notice(&mut self, level: NoticeLevel, text: &str) {
        self.push(CellKind::Notice {
            level,
            text: clean(text),
        });
    }

    pub(super) fn on_error(&mut self, text: &str) {
        self.push(CellKind::Error { text: clean(text) });
    }
}

#[cfg(test)]
mod tests {
    //! What applying the chat's own events adds to the transcript.

    use super::*;
    use crate::event::Event;
    use crate::tui::state::fixtures::*;

    #[test]
    fn messages_open_cells_and_deltas_join_until_the_end() {
        let mut s = State::new();
        apply(
            &mut s,
            1,
            Event::UserMessage {
                text: "hi\x1b]0;x\x07".into(),
            },
        );
        apply(&mut s, 2, Event::AssistantDelta { text: "he".into() });
        apply(&mut s, 3, Event::AssistantDelta { text: "llo".into() });
        apply(&mut s, 4, Event::AssistantEnd);
        apply(&mut s, 5, Event::AssistantDelta { text: "new".into() });
        let kinds: Vec<&CellKind> = s.cells.iter().map(|c| &c.kind).collect();
        assert_eq!(
            kinds,
            [
                &CellKind::User { text: "hi".into() },
                &CellKind::Assistant {
                    text: "hello".into(),
                    done: true
                },
                &CellKind::Assistant {
                    text: "new".into(),
                    done: false
                },
            ]
        );
        assert_eq!((s.now, s.applied), (5, 5));
    }

    #[test]
    fn tool_calls_are_a_line_then_their_result() {
        let mut s = State::new();
        apply(
            &mut s,
            1,
            Event::ToolCallStarted {
                id: "1".into(),
                name: "subagent_status".into(),
                summary: "task_id: t1".into(),
            },
        );
        apply(
            &mut s,
            2,
            Event::ToolCallFinished {
                id: "1".into(),
                ok: false,
                summary: "unknown task".into(),
            },
        );
        assert_eq!(
            s.cells[0].kind,
            CellKind::Tool(Box::new(ToolCell {
                name: "subagent_status".into(),
                summary: "task_id: t1".into(),
                result: Some((false, "unknown task".into())),
            }))
        );
    }

    #[test]
    fn notices_and_errors_are_cells() {
        let mut s = State::new();
        apply(
            &mut s,
            1,
            Event::Notice {
                level: NoticeLevel::Warning,
                text: "careful".into(),
            },
        );
        apply(
            &mut s,
            2,
            Event::Error {
                text: "broke".into(),
            },
        );
        assert_eq!(
            s.cells.iter().map(|c| c.kind.clone()).collect::<Vec<_>>(),
            [
                CellKind::Notice {
                    level: NoticeLevel::Warning,
                    text: "careful".into()
                },
                CellKind::Error {
                    text: "broke".into()
                }
            ]
        );
    }
}
