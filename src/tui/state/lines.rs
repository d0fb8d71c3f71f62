//! A running box's last few lines of activity: what they are, how many
//! are kept, and the side panel's one-line summary of one.

use std::collections::VecDeque;

use crate::event::ToolStatus;

/// How many activity lines a running box keeps.
pub const ACTIVITY_LINES: usize = 4;

#[derive(Debug, Clone, PartialEq)]
pub enum ActivityLine {
    Text(String),
    Thought(String),
    Tool {
        id: String,
        title: String,
        status: ToolStatus,
    },
    Note(String),
    /// A command run in one of quorum's terminals: its command line, the
    /// last of its output (clean, at most `terminal::TAIL_BYTES`), and how
    /// it ended once it did.
    Terminal {
        id: String,
        command: String,
        tail: String,
        exit: Option<String>,
        /// Drawn under the tool call that shows it (whose title names the
        /// command), not on its own.
        under_tool: bool,
    },
}

impl ActivityLine {
    /// A one-line summary, for the side panel.
    pub fn summary(&self) -> String {
        let one_line = |s: &str| {
            s.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
                .to_string()
        };
        match self {
            ActivityLine::Text(t) => one_line(t),
            ActivityLine::Thought(t) => format!("thinking: {}", one_line(t)),
            ActivityLine::Tool { title, .. } => format!("⚙ {title}"),
            ActivityLine::Note(t) => t.clone(),
            ActivityLine::Terminal { command, tail, .. } => match one_line(tail) {
                last if last.is_empty() => format!("$ {command}"),
                last => last,
            },
        }
    }
}

/// Adds a line, dropping the oldest past [`ACTIVITY_LINES`].
pub(super) fn push_line(lines: &mut VecDeque<ActivityLine>, line: ActivityLine) {
    if lines.len() == ACTIVITY_LINES {
        lines.pop_front();
    }
    lines.push_back(line);
}
