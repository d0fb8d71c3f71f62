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
