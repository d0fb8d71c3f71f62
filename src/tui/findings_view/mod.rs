//! The findings view: a review quorum's diff, file by file, with each
//! finding under its lines; the person moves from finding to finding,
//! selects some, comments on lines, and sends them as one follow-up to the
//! branch's writer (or to the agent they name). Opened from the quorum's
//! header like a box's detail; drawn full screen.

pub mod diff;
pub mod followup;
mod layout;

use std::collections::BTreeSet;

use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Widget};

use self::diff::{At, DiffFile};
use self::followup::Comment;
use self::layout::Row;
use super::state::BatchHeader;
use super::theme;
use crate::confine::sanitize::{one_line, sanitize};
use crate::event::finding::QuorumFinding;

/// Where the follow-up goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The writer of the reviewed branch: its task, its agent.
    Writer {
        task: String,
        agent: String,
        branch: String,
    },
    /// The person names the agent (their own tree); `default` is offered.
    Ask { default: String },
}

/// A line of input in the view's footer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    /// A comment on the line at `at`.
    Comment {
        file: String,
        line: u32,
        at: At,
        text: String,
    },
    /// The agent to send to.
    SendTo(String),
}

/// What a key did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViewKey {
    /// Taken (nothing to do outside).
    Handled,
    /// Not one of the view's keys.
    Ignored,
    /// Close the view.
    Close,
    /// Send this message (`Op::Submit`), then close; `what` says what
    /// was sent and to whom.
    Send { text: String, what: String },
}

/// The findings view's state: what it shows, the cursor, the marks.
pub struct FindingsView {
    pub batch_id: String,
    title: String,
    files: Vec<DiffFile>,
    findings: Vec<QuorumFinding>,
    placed: Vec<Option<At>>,
    comments: Vec<Comment>,
    selected: BTreeSet<usize>,
    target: Target,
    /// The row the cursor is on, and the top row shown.
    cursor: usize,
    scroll: usize,
    height: usize,
    /// Laid-out rows and the width they were laid out at (`None`: stale).
    rows: Vec<Row>,
    laid: Option<usize>,
    pub prompt: Option<Prompt>,
    /// A word on what the last key could not do.
    note: Option<String>,
}

impl FindingsView {
    /// The view of a review batch's header (its quorum, its diff).
    pub fn new(header: &BatchHeader, target: Target) -> Self {
        let findings: Vec<QuorumFinding> = header
            .quorum
            .as_ref()
            .map(|q| q.findings.iter().map(clean_finding).collect())
            .unwrap_or_default();
        let files = header.diff.as_deref().map(diff::parse).unwrap_or_default();
        let placed = findings
            .iter()
            .map(|q| {
                let f = &q.finding;
                diff::place(&files, &f.file, f.line, f.end_line.unwrap_or(f.line))
            })
            .collect();
        let title = header
            .quorum
            .as_ref()
            .map_or_else(String::new, |q| one_line(&q.label()));
        Self {
            batch_id: header.batch_id.clone(),
            title,
            files,
            findings,
            placed,
            comments: Vec::new(),
            selected: BTreeSet::new(),
            target,
            cursor: 0,
            scroll: 0,
            height: 0,
            rows: Vec::new(),
            laid: None,
            prompt: None,
            note: None,
        }
    }

    /// How many findings are selected.
    pub fn selected(&self) -> usize {
        self.selected.len()
    }

    /// The cursor's finding, if it is on one.
    fn current(&self) -> Option<usize> {
        self.rows.get(self.cursor).and_then(|r| r.finding)
    }

    /// Moves the cursor by `delta` rows, the view following it.
    fn move_by(&mut self, delta: isize) {
        let last = self.rows.len().saturating_sub(1);
        self.cursor = self.cursor.saturating_add_signed(delta).min(last);
        self.follow();
    }

    /// Scrolls so that the cursor's row shows, with some rows around it.
    fn follow(&mut self) {
        let h = self.height.max(1);
        let margin = (h / 4).min(3);
        if self.cursor < self.scroll + margin {
            self.scroll = self.cursor.saturating_sub(margin);
        } else if self.cursor + margin >= self.scroll + h {
            self.scroll = (self.cursor + margin + 1).saturating_sub(h);
        }
        self.scroll = self.scroll.min(self.rows.len().saturating_sub(h));
    }

    /// The cursor to the next (or previous) finding's first row.
    fn jump(&mut self, forward: bool) {
        let starts = self.rows.iter().enumerate().filter(|(i, r)| {
            r.finding.is_some() && (*i == 0 || self.rows[i - 1].finding != r.finding)
        });
        let to = if forward {
            starts.map(|(i, _)| i).find(|&i| i > self.cursor)
        } else {
            starts.map(|(i, _)| i).rfind(|&i| i < self.cursor)
        };
        match to {
            Some(i) => {
                self.cursor = i;
                // A finding shows from its diff line on, when it fits.
                self.scroll = self.scroll.min(i.saturating_sub(2));
                self.follow();
                self.note = None;
            }
            None => {
                self.note = Some(
                    if forward {
                        "no finding after this one"
                    } else {
                        "no finding before this one"
                    }
                    .into(),
                )
            }
        }
    }

    /// A key: to the prompt when one is open, else the view's own.
    pub fn key(&mut self, key: KeyEvent) -> ViewKey {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return ViewKey::Ignored;
        }
        if self.prompt.is_some() {
            return self.prompt_key(key);
        }
        self.note = None;
        let page = self.height.saturating_sub(2).max(1) as isize;
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => return ViewKey::Close,
            KeyCode::Char('j') | KeyCode::Down => self.move_by(1),
            KeyCode::Char('k') | KeyCode::Up => self.move_by(-1),
            KeyCode::PageDown | KeyCode::Char('f') => self.move_by(page),
            KeyCode::PageUp | KeyCode::Char('b') => self.move_by(-page),
            KeyCode::Home | KeyCode::Char('g') => self.move_by(-(self.rows.len() as isize)),
            KeyCode::End | KeyCode::Char('G') => self.move_by(self.rows.len() as isize),
            KeyCode::Char('n') | KeyCode::Char(']') | KeyCode::Tab => self.jump(true),
            KeyCode::Char('N') | KeyCode::Char('[') | KeyCode::BackTab => self.jump(false),
            KeyCode::Char(' ') | KeyCode::Char('x') => self.toggle(),
            KeyCode::Char('c') => self.start_comment(),
            KeyCode::Char('s') | KeyCode::Enter => return self.send(),
            _ => {}
        }
        ViewKey::Handled
    }

    /// Space: the cursor's finding selected, or no more.
    fn toggle(&mut self) {
        match self.current() {
            Some(i) if !self.selected.remove(&i) => {
                self.selected.insert(i);
            }
            Some(_) => {}
            None => self.note = Some("no finding here: n goes to the next one".into()),
        }
        self.laid = None;
    }

    /// `c`: a comment on the cursor's line.
    fn start_comment(&mut self) {
        match self.rows.get(self.cursor).and_then(|r| r.line.clone()) {
            Some((file, line, at)) => {
                self.prompt = Some(Prompt::Comment {
                    file,
                    line,
                    at,
                    text: String::new(),
                })
            }
            None => self.note = Some("no line of the diff here to comment on".into()),
        }
    }

    /// `s`: the selected findings and the comments sent, or the agent
    /// asked for first.
    fn send(&mut self) -> ViewKey {
        if self.selected.is_empty() && self.comments.is_empty() {
            self.note = Some("nothing to send: space selects a finding, c comments".into());
            return ViewKey::Handled;
        }
        match &self.target {
            Target::Writer { task, .. } => {
                let task = task.clone();
                self.message(format!("/msg {task} "), &task)
            }
            Target::Ask { default } => {
                self.prompt = Some(Prompt::SendTo(default.clone()));
                ViewKey::Handled
            }
        }
    }

    /// The follow-up, after `lead` (`/msg TASK `, `@NAME `), to `to`.
    fn message(&self, lead: String, to: &str) -> ViewKey {
        let findings: Vec<(&QuorumFinding, Option<At>)> = self
            .selected
            .iter()
            .map(|&i| (&self.findings[i], self.placed[i]))
            .collect();
        let comments: Vec<&Comment> = self.comments.iter().collect();
        let branch = match &self.target {
            Target::Writer { branch, .. } => Some(branch.as_str()),
            Target::Ask { .. } => None,
        };
        let text = followup::text(&self.files, &findings, &comments, branch);
        let parts: Vec<String> = [(findings.len(), "finding"), (comments.len(), "comment")]
            .into_iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| count(n, what))
            .collect();
        let what = format!("{} sent to {to}", parts.join(" and "));
        ViewKey::Send {
            text: format!("{lead}{text}"),
            what,
        }
    }

    /// Keys of the footer's input: text, Backspace, Enter, Esc.
    fn prompt_key(&mut self, key: KeyEvent) -> ViewKey {
        let Some(prompt) = &mut self.prompt else {
            return ViewKey::Ignored;
        };
        let text = match prompt {
            Prompt::Comment { text, .. } | Prompt::SendTo(text) => text,
        };
        match key.code {
            KeyCode::Esc => self.prompt = None,
            KeyCode::Backspace => {
                text.pop();
            }
            KeyCode::Char(c) => text.push(c),
            KeyCode::Enter => return self.prompt_done(),
            _ => {}
        }
        ViewKey::Handled
    }

    /// Enter in the footer's input.
    fn prompt_done(&mut self) -> ViewKey {
        match self.prompt.take() {
            Some(Prompt::Comment {
                file,
                line,
                at,
                text,
            }) => {
                if !text.trim().is_empty() {
                    self.comments.push(Comment {
                        file,
                        line,
                        at,
                        text: one_line(&text),
                    });
                    self.laid = None;
                }
                ViewKey::Handled
            }
            Some(Prompt::SendTo(name)) => {
                let name = name.trim().trim_start_matches('@').to_string();
                if name.is_empty() || name.contains(char::is_whitespace) {
                    self.note = Some("name one agent to send to".into());
                    return ViewKey::Handled;
                }
                self.target = Target::Ask {
                    default: name.clone(),
                };
                self.message(format!("@{name} "), &name)
            }
            None => ViewKey::Handled,
        }
    }

    /// Text typed or pasted into the footer's input (newlines become
    /// spaces: the input is one line).
    pub fn paste(&mut self, pasted: &str) {
        if let Some(Prompt::Comment { text, .. } | Prompt::SendTo(text)) = &mut self.prompt {
            text.push_str(&one_line(pasted));
        }
    }

    /// The footer: the input, else the keys and what is selected.
    fn footer(&self) -> Line<'static> {
        if let Some(prompt) = &self.prompt {
            let (label, text) = match prompt {
                Prompt::Comment {
                    file, line, text, ..
                } => (format!("comment on {file}:{line}: "), text),
                Prompt::SendTo(text) => ("send to: @".to_string(), text),
            };
            return Line::from(vec![
                Span::styled(label, theme::bold()),
                Span::raw(one_line(text)),
                Span::styled("▏", theme::dim()),
                Span::styled("  Enter done · Esc cancel", theme::dim()),
            ]);
        }
        let to = match &self.target {
            Target::Writer { task, agent, .. } => format!("{agent} ({task})"),
            Target::Ask { .. } => "the agent you name".to_string(),
        };
        let mut spans = vec![Span::styled(
            format!(
                "{} selected · {} → {to}",
                self.selected.len(),
                count(self.comments.len(), "comment")
            ),
            theme::bold(),
        )];
        if let Some(note) = &self.note {
            spans.push(Span::styled(format!("  {note}"), theme::warning()));
        }
        spans.push(Span::styled(
            "  n/N next · space select · c comment · s send · q back",
            theme::dim(),
        ));
        Line::from(spans)
    }

    /// Draws the view in `area`.
    pub fn draw(&mut self, area: Rect, buf: &mut Buffer) {
        if area.is_empty() {
            return;
        }
        let block = Block::default()
            .borders(Borders::ALL)
            .border_type(BorderType::Rounded)
            .border_style(Style::default().fg(theme::GROUP))
            .title(Span::styled(
                format!(" findings · review {} · {} ", self.batch_id, self.title),
                theme::bold(),
            ));
        let inner = block.inner(area);
        block.render(area, buf);
        if inner.height < 2 {
            return;
        }
        let width = inner.width as usize;
        if self.laid != Some(width) {
            self.rows = layout::rows(self, width);
            self.laid = Some(width);
            self.cursor = self.cursor.min(self.rows.len().saturating_sub(1));
        }
        self.height = inner.height as usize - 1;
        self.scroll = self.scroll.min(self.rows.len().saturating_sub(self.height));
        let shown = self.rows.iter().enumerate().skip(self.scroll);
        for ((i, row), y) in shown.zip(inner.y..inner.bottom() - 1) {
            if i == self.cursor {
                let mut line = row.text.clone();
                line.style = line.style.bg(Color::DarkGray);
                buf.set_style(
                    Rect::new(inner.x, y, inner.width, 1),
                    Style::default().bg(Color::DarkGray),
                );
                buf.set_line(inner.x, y, &line, inner.width);
            } else {
                buf.set_line(inner.x, y, &row.text, inner.width);
            }
        }
        buf.set_line(inner.x, inner.bottom() - 1, &self.footer(), inner.width);
    }
}

/// `2 comments`, `1 selected finding`, `no comment`.
fn count(n: usize, what: &str) -> String {
    match n {
        0 => format!("no {what}"),
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    }
}

/// A finding with its text made safe for the terminal.
fn clean_finding(q: &QuorumFinding) -> QuorumFinding {
    let mut q = q.clone();
    let f = &mut q.finding;
    f.file = one_line(&f.file);
    f.title = one_line(&f.title);
    f.body = sanitize(&f.body).into_owned();
    for by in &mut q.by {
        *by = one_line(by);
    }
    q
}

#[cfg(test)]
mod tests;
