//! What a box keeps of the terminals its agent ran commands in (quorum's
//! client terminals): each one's command, its output (bounded, the newest
//! kept) and how it ended, for the running box's live lines and the
//! opened box's full output.

use std::collections::VecDeque;

use super::clean;

/// How many terminals a box keeps (the oldest go first).
pub const TERMINALS: usize = 64;
/// How much of one terminal's output a box keeps (bytes, the newest).
pub const TERMINAL_BYTES: usize = 64 * 1024;
/// How much of a terminal's output a running box's line keeps (bytes).
pub const TAIL_BYTES: usize = 2048;

/// One terminal, as the box shows it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TerminalView {
    pub id: String,
    pub command: String,
    /// Its output, cleaned; the newest [`TERMINAL_BYTES`] of it.
    pub output: String,
    /// Bytes of output let go from the front.
    pub dropped: usize,
    /// How it ended: `exit 0`, `killed by SIGTERM`; `None` while it runs.
    pub exit: Option<String>,
    /// A tool call shows it (its content names the terminal): the opened
    /// box shows its output under that call, not on its own.
    pub embedded: bool,
}

/// A box's terminals, oldest first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Terminals {
    pub list: VecDeque<TerminalView>,
}

impl Terminals {
    pub fn get(&self, id: &str) -> Option<&TerminalView> {
        self.list.iter().rev().find(|t| t.id == id)
    }

    fn get_mut(&mut self, id: &str) -> Option<&mut TerminalView> {
        self.list.iter_mut().rev().find(|t| t.id == id)
    }

    /// The terminal `id`, started now if the box has not seen it.
    fn entry(&mut self, id: &str) -> &mut TerminalView {
        if self.get(id).is_none() {
            if self.list.len() == TERMINALS {
                self.list.pop_front();
            }
            self.list.push_back(TerminalView {
                id: id.to_string(),
                ..TerminalView::default()
            });
        }
        self.get_mut(id).expect("just added")
    }

    pub(super) fn started(&mut self, id: &str, command: &str) {
        self.entry(id).command = clean(command);
    }

    /// Appends output (already clean).
    pub(super) fn output(&mut self, id: &str, text: &str) {
        let t = self.entry(id);
        t.output.push_str(text);
        t.dropped += keep_newest(&mut t.output, TERMINAL_BYTES);
    }

    pub(super) fn exited(&mut self, id: &str, how: String) {
        self.entry(id).exit = Some(how);
    }

    /// A tool call's content names these terminals.
    pub(super) fn embed<'a>(&mut self, ids: impl Iterator<Item = &'a str>) {
        for id in ids {
            if let Some(t) = self.get_mut(id) {
                t.embedded = true;
            }
        }
    }
}

/// Cuts `text` to its newest `limit` bytes (at a character boundary) once
/// it is twice that long; how many bytes went.
pub(super) fn keep_newest(text: &mut String, limit: usize) -> usize {
    if text.len() <= limit * 2 {
        return 0;
    }
    let mut cut = text.len() - limit;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    text.drain(..cut);
    cut
}

/// How a terminal's command ended, in words.
pub fn exit_words(exit_code: Option<u32>, signal: Option<&str>) -> String {
    match (exit_code, signal) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(sig)) => format!("killed by {}", clean(sig)),
        (None, None) => "ended".to_string(),
    }
}

#[cfg(test)]
mod tests {
    //! What a box takes in of its agent's terminals.

    use super::*;
    use crate::event::{Activity, ToolContent, ToolDetail, ToolStatus};
    use crate::tui::state::fixtures::*;
    use crate::tui::state::{ActivityLine, LogEntry, State};

    fn started(id: &str, command: &str) -> Activity {
        Activity::TerminalStarted {
            terminal_id: id.into(),
            command: command.into(),
        }
    }

    fn output(id: &str, text: &str) -> Activity {
        Activity::TerminalOutput {
            terminal_id: id.into(),
            text: text.into(),
        }
    }

    fn tool(id: &str, kind: &str, terminal: Option<&str>) -> Activity {
        Activity::ToolCall {
            id: id.into(),
            title: format!("Run {id}"),
            status: ToolStatus::InProgress,
            detail: Box::new(ToolDetail {
                kind: Some(kind.into()),
                content: terminal
                    .map(|t| ToolContent::Terminal {
                        terminal_id: t.into(),
                    })
                    .into_iter()
                    .collect(),
                ..ToolDetail::default()
            }),
        }
    }

    #[test]
    fn output_goes_under_the_tool_call_that_shows_its_terminal() {
        let mut s = State::new();
        apply(&mut s, 1, super::super::fixtures::started(false));
        apply(&mut s, 2, activity(started("term-1", "sh -c 'make'")));
        apply(&mut s, 3, activity(tool("x1", "execute", Some("term-1"))));
        apply(
            &mut s,
            4,
            activity(output("term-1", "cc a.c\n\u{1b}[31mcc b.c\n")),
        );
        apply(
            &mut s,
            5,
            activity(Activity::TerminalExit {
                terminal_id: "term-1".into(),
                exit_code: Some(2),
                signal: None,
            }),
        );
        let b = the_box(&s);
        let lines: Vec<&ActivityLine> = b.activity.iter().collect();
        assert!(matches!(lines[0], ActivityLine::Tool { id, .. } if id == "x1"));
        assert_eq!(
            lines[1],
            &ActivityLine::Terminal {
                id: "term-1".into(),
                command: "sh -c 'make'".into(),
                tail: "cc a.c\ncc b.c\n".into(),
                exit: Some("exit 2".into()),
                under_tool: true,
            },
            "cleaned, and moved under its call"
        );
        let t = b.terminals.get("term-1").unwrap();
        assert_eq!(t.output, "cc a.c\ncc b.c\n");
        assert!(t.embedded);
        assert!(matches!(&b.log.entries[0], LogEntry::Terminal(id) if id == "term-1"));
        assert_eq!(b.changes.summary().as_deref(), Some("ran 1 command"));
    }

    #[test]
    fn commands_count_once_whether_a_tool_call_shows_them_or_not() {
        let mut s = State::new();
        apply(&mut s, 1, super::super::fixtures::started(false));
        // A command the agent ran itself (an execute call, no terminal).
        apply(&mut s, 2, activity(tool("x0", "execute", None)));
        apply(&mut s, 2, activity(done("x0")));
        // A terminal shown by an execute call: one command, not two.
        apply(&mut s, 3, activity(started("term-1", "make")));
        apply(&mut s, 4, activity(tool("x1", "execute", Some("term-1"))));
        // A terminal no call shows, and one an untyped call shows.
        apply(&mut s, 5, activity(started("term-2", "ls")));
        apply(&mut s, 6, activity(started("term-3", "pwd")));
        apply(&mut s, 7, activity(tool("x3", "other", Some("term-3"))));
        assert_eq!(the_box(&s).changes.commands, 4);
        // An execute call counted alone, later shown with its terminal.
        apply(&mut s, 8, activity(tool("x4", "execute", None)));
        apply(&mut s, 9, activity(started("term-4", "true")));
        apply(
            &mut s,
            10,
            activity(Activity::ToolCallUpdate {
                id: "x4".into(),
                title: None,
                status: None,
                detail: Box::new(ToolDetail {
                    kind: Some("execute".into()),
                    content: vec![ToolContent::Terminal {
                        terminal_id: "term-4".into(),
                    }],
                    ..ToolDetail::default()
                }),
            }),
        );
        assert_eq!(the_box(&s).changes.commands, 5);
        assert_eq!(
            the_box(&s).changes.summary().as_deref(),
            Some("ran 5 commands")
        );
    }

    fn done(id: &str) -> Activity {
        Activity::ToolCallUpdate {
            id: id.into(),
            title: None,
            status: Some(crate::event::ToolStatus::Completed),
            detail: Box::default(),
        }
    }

    /// fast-agent's order: its `execute` tool call shows no terminal, and
    /// the terminal it runs the command in starts while the call runs: one
    /// command. A terminal started after the call ended is another.
    #[test]
    fn a_terminal_started_while_an_execute_call_runs_is_its_command() {
        let mut s = State::new();
        apply(&mut s, 1, super::super::fixtures::started(false));
        apply(&mut s, 2, activity(tool("x1", "execute", None)));
        apply(&mut s, 3, activity(started("term-1", "/bin/sh -lc 'make'")));
        apply(
            &mut s,
            4,
            activity(Activity::TerminalExit {
                terminal_id: "term-1".into(),
                exit_code: Some(0),
                signal: None,
            }),
        );
        apply(&mut s, 5, activity(done("x1")));
        assert_eq!(
            the_box(&s).changes.summary().as_deref(),
            Some("ran 1 command")
        );
        apply(&mut s, 6, activity(started("term-2", "ls")));
        assert_eq!(
            the_box(&s).changes.summary().as_deref(),
            Some("ran 2 commands")
        );
    }

    #[test]
    fn a_box_keeps_a_bounded_tail_and_output() {
        let mut s = State::new();
        apply(&mut s, 1, super::super::fixtures::started(false));
        apply(&mut s, 2, activity(started("term-1", "yes")));
        let chunk = "y\n".repeat(1000);
        for t in 0..200 {
            apply(&mut s, 3 + t, activity(output("term-1", &chunk)));
        }
        let b = the_box(&s);
        let t = b.terminals.get("term-1").unwrap();
        assert!(t.output.len() <= TERMINAL_BYTES * 2, "{}", t.output.len());
        assert_eq!(t.output.len() + t.dropped, 200 * chunk.len());
        let Some(ActivityLine::Terminal { tail, .. }) = b.activity.back() else {
            panic!("{:?}", b.activity);
        };
        assert!(tail.len() <= TAIL_BYTES * 2);
        // Many terminals: the oldest go.
        for i in 0..(TERMINALS + 5) {
            apply(
                &mut s,
                1000 + i as u64,
                activity(started(&format!("t{i}"), "true")),
            );
        }
        assert_eq!(the_box(&s).terminals.list.len(), TERMINALS);
        assert_eq!(the_box(&s).changes.commands as usize, TERMINALS + 6);
    }
}
