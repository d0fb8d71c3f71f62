//! One sub-agent call as the host sees it: its title, and its activity's
//! last lines, streamed into its tool call while it runs.

use std::collections::{HashMap, HashSet, VecDeque};

use agent_client_protocol::v1::schema::SessionId;

use super::first_line;

/// How many lines of a running call's activity its content shows.
pub(super) const LINES: usize = 12;
/// How many characters of them, at most.
pub(super) const LINE_CHARS: usize = 4000;
/// A call's title says this much of its message.
pub(super) const TITLE_CHARS: usize = 60;

/// One sub-agent call as the host sees it.
pub(super) struct CallView {
    pub(super) agent: String,
    pub(super) input: String,
    pub(super) review: bool,
    pub(super) task_id: Option<String>,
    pub(super) background: bool,
    /// Its activity's last lines (a text line grows with its chunks).
    pub(super) lines: VecDeque<String>,
    /// Lines dropped from the front.
    pub(super) dropped: bool,
    /// The last line is text still being written.
    pub(super) texting: bool,
    /// Its content changed since it was last sent.
    pub(super) dirty: bool,
    pub(super) done: bool,
    /// Its child session, when the host takes them.
    pub(super) child: Option<SessionId>,
    /// What its permission requests asked, by request id (the request's
    /// tool call is named again when it is answered).
    pub(super) asked: HashMap<String, String>,
    /// Its sub-agent's tool calls seen so far.
    pub(super) child_tools: HashSet<String>,
}

impl CallView {
    pub(super) fn title(&self) -> String {
        let what = if self.review {
            "review".to_string()
        } else {
            first_line(&self.input, TITLE_CHARS)
        };
        let mut title = format!("{} · {what}", self.agent);
        if let Some(task) = self.task_id.as_deref().filter(|_| self.background) {
            title.push_str(&format!(" · background {task}"));
        }
        title
    }

    pub(super) fn push_line(&mut self, line: String) {
        self.texting = false;
        self.lines.push_back(line);
        self.trim();
        self.dirty = true;
    }

    pub(super) fn push_text(&mut self, text: &str) {
        if !self.texting {
            self.lines.push_back(String::new());
            self.texting = true;
        }
        let mut rest = text;
        while let Some((head, tail)) = rest.split_once('\n') {
            if let Some(last) = self.lines.back_mut() {
                last.push_str(head);
            }
            self.lines.push_back(String::new());
            rest = tail;
        }
        if let Some(last) = self.lines.back_mut() {
            last.push_str(rest);
        }
        self.trim();
        self.dirty = true;
    }

    pub(super) fn trim(&mut self) {
        while self.lines.len() > LINES
            || (self.lines.len() > 1
                && self.lines.iter().map(String::len).sum::<usize>() > LINE_CHARS)
        {
            self.lines.pop_front();
            self.dropped = true;
        }
        if let Some(only) = self.lines.front_mut()
            && only.len() > LINE_CHARS
        {
            let cut = only.len() - LINE_CHARS;
            let cut = (cut..only.len())
                .find(|i| only.is_char_boundary(*i))
                .unwrap_or(only.len());
            only.replace_range(..cut, "");
            self.dropped = true;
        }
    }

    /// What it is doing: its last lines.
    pub(super) fn activity(&self) -> String {
        let mut text = String::new();
        if self.dropped {
            text.push_str("…\n");
        }
        let lines: Vec<&str> = self
            .lines
            .iter()
            .map(String::as_str)
            .filter(|l| !l.trim().is_empty())
            .collect();
        text.push_str(&lines.join("\n"));
        text
    }
}

/// A finished call's raw output: its report, why it ended, its verdict,
/// and a review's findings when it has any.
pub(super) fn raw_output(
    output: &str,
    stop_reason: crate::event::StopReason,
    severity: Option<crate::event::Severity>,
    findings: &[crate::event::finding::Finding],
) -> serde_json::Value {
    let mut raw = serde_json::json!({
        "output": output,
        "stop_reason": stop_reason.as_str(),
        "severity": severity.map(crate::event::Severity::as_str),
    });
    if !findings.is_empty() {
        raw["findings"] = serde_json::json!(findings);
    }
    raw
}
