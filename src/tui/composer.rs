//! The composer: the draft, its cursor and the keys that edit it as
//! shells and editors do; the messages sent before (↑/↓); completion of
//! `@agent` names and `/commands` (Tab); and how a draft wraps to the
//! screen's width, which the keys that move between rows share with the
//! view that draws it.

use std::collections::HashMap;

use crate::event::AgentCommand;

use super::history::History;
use super::wrap::char_width;

/// The draft being written.
#[derive(Debug)]
pub struct Composer {
    text: String,
    /// Cursor position, in chars.
    cursor: usize,
    history: History,
    /// Browsing the history: the entry shown, and the draft it replaced
    /// (back when ↓ goes past the newest entry).
    browsing: Option<(usize, String)>,
    completion: Option<Completion>,
}

impl Default for Composer {
    fn default() -> Self {
        Self::new(History::in_memory())
    }
}

/// A Tab that found several names: Tab again puts them in turn.
#[derive(Debug)]
struct Completion {
    /// Where the name being completed starts (chars).
    start: usize,
    choices: Vec<String>,
    /// The choice the next Tab puts (`None`: the first Tab showed them).
    next: Option<usize>,
    /// What the choices are shown as, or why there are none.
    hint: String,
}

impl Composer {
    pub fn new(history: History) -> Self {
        Self {
            text: String::new(),
            cursor: 0,
            history,
            browsing: None,
            completion: None,
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// The names a Tab found, or why it found none.
    pub fn hint(&self) -> Option<&str> {
        self.completion.as_ref().map(|c| c.hint.as_str())
    }

    /// Any key but Tab ends a completion.
    pub fn end_completion(&mut self) {
        self.completion = None;
    }

    fn chars(&self) -> Vec<char> {
        self.text.chars().collect()
    }

    fn len(&self) -> usize {
        self.text.chars().count()
    }

    fn byte_at(&self, char_index: usize) -> usize {
        self.text
            .char_indices()
            .nth(char_index)
            .map_or(self.text.len(), |(i, _)| i)
    }

    /// Replaces chars `from..to` with `with`; the cursor goes after it.
    fn replace(&mut self, from: usize, to: usize, with: &str) {
        let (a, b) = (self.byte_at(from), self.byte_at(to));
        self.text.replace_range(a..b, with);
        self.cursor = from + with.chars().count();
    }

    pub fn insert(&mut self, s: &str) {
        self.replace(self.cursor, self.cursor, s);
    }

    pub fn backspace(&mut self) {
        if self.cursor > 0 {
            self.replace(self.cursor - 1, self.cursor, "");
        }
    }

    pub fn delete(&mut self) {
        if self.cursor < self.len() {
            let at = self.cursor;
            self.replace(at, at + 1, "");
            self.cursor = at;
        }
    }

    pub fn left(&mut self) {
        self.cursor = self.cursor.saturating_sub(1);
    }

    pub fn right(&mut self) {
        self.cursor = (self.cursor + 1).min(self.len());
    }

    /// The start of the word before the cursor (Ctrl+W, Alt+←).
    fn word_before(&self) -> usize {
        let chars = self.chars();
        let mut start = self.cursor;
        while start > 0 && chars[start - 1].is_whitespace() {
            start -= 1;
        }
        while start > 0 && !chars[start - 1].is_whitespace() {
            start -= 1;
        }
        start
    }

    /// The end of the word after the cursor (Alt+→).
    fn word_after(&self) -> usize {
        let chars = self.chars();
        let mut end = self.cursor;
        while end < chars.len() && chars[end].is_whitespace() {
            end += 1;
        }
        while end < chars.len() && !chars[end].is_whitespace() {
            end += 1;
        }
        end
    }

    pub fn delete_word(&mut self) {
        let start = self.word_before();
        self.replace(start, self.cursor, "");
    }

    pub fn word_left(&mut self) {
        self.cursor = self.word_before();
    }

    pub fn word_right(&mut self) {
        self.cursor = self.word_after();
    }

    /// The start and end (chars) of the line the cursor is on.
    fn line_bounds(&self) -> (usize, usize) {
        let chars = self.chars();
        let start = chars[..self.cursor]
            .iter()
            .rposition(|&c| c == '\n')
            .map_or(0, |i| i + 1);
        let end = chars[self.cursor..]
            .iter()
            .position(|&c| c == '\n')
            .map_or(chars.len(), |i| self.cursor + i);
        (start, end)
    }

    /// Ctrl+A, Home: the start of the line.
    pub fn line_start(&mut self) {
        self.cursor = self.line_bounds().0;
    }

    /// Ctrl+E, End: the end of the line.
    pub fn line_end(&mut self) {
        self.cursor = self.line_bounds().1;
    }

    /// Ctrl+U: deletes to the start of the line; at its start, the line
    /// break before it (so that Ctrl+U again goes on up).
    pub fn kill_to_line_start(&mut self) {
        let (start, _) = self.line_bounds();
        let from = if start == self.cursor {
            start.saturating_sub(1)
        } else {
            start
        };
        self.replace(from, self.cursor, "");
    }

    /// Ctrl+K: deletes to the end of the line; at its end, the line break.
    pub fn kill_to_line_end(&mut self) {
        let (_, end) = self.line_bounds();
        let at = self.cursor;
        let to = if end == at {
            (end + 1).min(self.len())
        } else {
            end
        };
        self.replace(at, to, "");
        self.cursor = at;
    }

    /// Empties the draft (Ctrl+C), and leaves the history.
    pub fn clear(&mut self) {
        self.text.clear();
        self.cursor = 0;
        self.browsing = None;
        self.completion = None;
    }

    /// Takes the draft to send it; the history remembers it.
    pub fn submit(&mut self) -> String {
        let text = std::mem::take(&mut self.text);
        self.clear();
        self.history.push(&text);
        text
    }

    /// Takes the draft out, to put it back after something (`/msg t1 `).
    pub fn take(&mut self) -> String {
        let text = std::mem::take(&mut self.text);
        self.cursor = 0;
        text
    }

    /// ↑: the row above, at the same column; on the first row, the message
    /// sent before the one shown. `width`: the columns the text wraps at.
    pub fn up(&mut self, width: usize) {
        let layout = Layout::new(&self.text, width);
        let (row, col) = layout.cursor(self.cursor);
        if row > 0 {
            self.cursor = layout.position(row - 1, col);
            return;
        }
        let older = match &self.browsing {
            Some((i, _)) => i.checked_sub(1),
            None => self.history.entries().len().checked_sub(1),
        };
        let Some(i) = older else { return };
        let draft = match self.browsing.take() {
            Some((_, draft)) => draft,
            None => std::mem::take(&mut self.text),
        };
        self.browsing = Some((i, draft));
        self.show(self.history.entries()[i].clone());
    }

    /// ↓: the row below, at the same column; on the last row, the message
    /// sent after the one shown, and past the newest the draft again.
    pub fn down(&mut self, width: usize) {
        let layout = Layout::new(&self.text, width);
        let (row, col) = layout.cursor(self.cursor);
        if row + 1 < layout.rows.len() {
            self.cursor = layout.position(row + 1, col);
            return;
        }
        let Some((i, draft)) = self.browsing.take() else {
            self.cursor = self.len();
            return;
        };
        match self.history.entries().get(i + 1) {
            Some(newer) => {
                let newer = newer.clone();
                self.browsing = Some((i + 1, draft));
                self.show(newer);
            }
            None => self.show(draft),
        }
    }

    fn show(&mut self, text: String) {
        self.text = text;
        self.cursor = self.len();
    }

    /// Tab: completes the `@agent` name (one of `agents`) or the
    /// `/command` at the cursor. One match is put whole, with a space
    /// after; several put what they share and are shown, and Tab again
    /// puts each in turn. Returns false when there is nothing to complete
    /// at the cursor (Tab does something else).
    pub fn complete(&mut self, agents: &[String], commands: &[&str]) -> bool {
        self.complete_with(agents, commands, &HashMap::new(), &[])
    }

    /// [`Composer::complete`], and after `@NAME /` the commands agent NAME
    /// announced (`agent_commands`, by agent), after `/model ` the chats
    /// it offers (`models`).
    pub fn complete_with(
        &mut self,
        agents: &[String],
        commands: &[&str],
        agent_commands: &HashMap<String, Vec<AgentCommand>>,
        models: &[String],
    ) -> bool {
        if self.next_choice() {
            return true;
        }
        let chars = self.chars();
        let word = chars[..self.cursor]
            .iter()
            .rposition(|c| c.is_whitespace())
            .map_or(0, |i| i + 1);
        let (sigil, start, names): (char, usize, Vec<String>) = match chars.get(word) {
            // `@a,b,c`: the name after the last comma.
            Some('@') if word < self.cursor => {
                let comma = chars[word..self.cursor]
                    .iter()
                    .rposition(|&c| c == ',')
                    .map_or(word + 1, |i| word + i + 1);
                ('@', comma, agents.to_vec())
            }
            // A command is the first word of the draft.
            Some('/') if word < self.cursor && chars[..word].iter().all(|c| c.is_whitespace()) => (
                '/',
                word + 1,
                commands.iter().map(|c| c.to_string()).collect(),
            ),
            // `@NAME /cmd`: one of the commands NAME announced.
            Some('/') if word < self.cursor && mentioned(&chars[..word]).is_some() => {
                let agent = mentioned(&chars[..word]).unwrap_or_default();
                let Some(announced) = agent_commands.get(&agent).filter(|c| !c.is_empty()) else {
                    self.completion = Some(Completion {
                        start: word + 1,
                        choices: Vec::new(),
                        next: None,
                        hint: format!("{agent} has announced no commands yet"),
                    });
                    return true;
                };
                (
                    '/',
                    word + 1,
                    announced.iter().map(|c| c.name.clone()).collect(),
                )
            }
            // `/model SPEC`: one of the chats it offers.
            _ if is_model_argument(&chars[..word]) => {
                if models.is_empty() {
                    self.completion = Some(Completion {
                        start: word,
                        choices: Vec::new(),
                        next: None,
                        hint: "no chat to offer: `/model` says why".to_string(),
                    });
                    return true;
                }
                ('\0', word, models.to_vec())
            }
            _ => return false,
        };
        self.complete_among(&chars, sigil, start, names);
        true
    }

    /// While Tab shows several choices, the next Tab puts the next one.
    /// True when it did.
    fn next_choice(&mut self) -> bool {
        let Some(c) = self.completion.as_mut().filter(|c| c.choices.len() > 1) else {
            return false;
        };
        let i = c.next.map_or(0, |i| (i + 1) % c.choices.len());
        c.next = Some(i);
        let (start, choice) = (c.start, c.choices[i].clone());
        self.replace(start, self.cursor, &choice);
        true
    }

    /// Completes the name from `start` to the cursor among `names`
    /// (after `sigil`): the one that matches is put (with a space after
    /// it), several put what they share and are shown, none is said.
    fn complete_among(&mut self, chars: &[char], sigil: char, start: usize, names: Vec<String>) {
        let prefix: String = chars[start..self.cursor].iter().collect();
        let mut matches: Vec<String> = names
            .into_iter()
            .filter(|n| n.starts_with(&prefix))
            .collect();
        matches.sort();
        matches.dedup();
        // A `/model` choice has no sigil (`\0`).
        let sigil = if sigil == '\0' {
            String::new()
        } else {
            sigil.to_string()
        };
        match matches.len() {
            0 => {
                let what = match sigil.as_str() {
                    "@" => "agent",
                    "/" => "command",
                    _ => "chat",
                };
                self.completion = Some(Completion {
                    start,
                    choices: Vec::new(),
                    next: None,
                    hint: format!("no {what} starts with {sigil}{prefix}"),
                });
            }
            1 => {
                let space = chars.get(self.cursor).is_none_or(|c| !c.is_whitespace());
                let name = matches.remove(0) + if space { " " } else { "" };
                self.replace(start, self.cursor, &name);
                self.completion = None;
            }
            _ => {
                let shared = common_prefix(&matches);
                self.replace(start, self.cursor, &shared);
                let hint = matches
                    .iter()
                    .map(|m| format!("{sigil}{m}"))
                    .collect::<Vec<_>>()
                    .join("  ");
                self.completion = Some(Completion {
                    start,
                    choices: matches,
                    next: None,
                    hint,
                });
            }
        }
    }
}

/// Whether `before` (the draft before the word at the cursor) is `/model`
/// and a space: the word is its argument.
fn is_model_argument(before: &[char]) -> bool {
    let text: String = before.iter().collect();
    text.trim_start()
        .strip_suffix(char::is_whitespace)
        .map(str::trim_end)
        == Some("/model")
}

/// The one agent `before` mentions, when it is `@NAME` (marks allowed)
/// and nothing else.
fn mentioned(before: &[char]) -> Option<String> {
    let text: String = before.iter().collect();
    let word = text.trim();
    let names = word.strip_prefix('@')?.trim_end_matches(['!', '?', '+']);
    let one = !names.is_empty()
        && !word.contains(char::is_whitespace)
        && names
            .chars()
            .all(|c| c.is_alphanumeric() || c == '-' || c == '_' || c == '.');
    one.then(|| names.to_string())
}

fn common_prefix(names: &[String]) -> String {
    let mut prefix = names[0].clone();
    for n in &names[1..] {
        while !n.starts_with(&prefix) {
            prefix.pop();
        }
    }
    prefix
}

/// One row of a laid-out draft: the chars `start..end` (a line break is
/// on no row). `soft`: the line goes on on the next row (it wrapped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub start: usize,
    pub end: usize,
    pub soft: bool,
}

/// A draft wrapped to a width: between words where it can, anywhere in a
/// word wider than the row. The last column is kept for the cursor (only
/// a space may go there), so the cursor after the last character is
/// always on screen; a row may end with the spaces it broke at.
#[derive(Debug, Clone)]
pub struct Layout {
    chars: Vec<char>,
    pub rows: Vec<Row>,
}

impl Layout {
    pub fn new(text: &str, width: usize) -> Self {
        let chars: Vec<char> = text.chars().collect();
        let width = width.max(2);
        let mut rows = Vec::new();
        let (mut start, mut col) = (0, 0);
        // Where the row could break: after its last space.
        let mut after_space: Option<usize> = None;
        for (i, &c) in chars.iter().enumerate() {
            if c == '\n' {
                if col >= width {
                    // A space in the last column: the cursor after it
                    // goes on a row of its own.
                    rows.push(Row {
                        start,
                        end: i,
                        soft: true,
                    });
                    start = i;
                }
                rows.push(Row {
                    start,
                    end: i,
                    soft: false,
                });
                (start, col, after_space) = (i + 1, 0, None);
                continue;
            }
            let w = char_width(c);
            let room = if c.is_whitespace() { width } else { width - 1 };
            if col + w > room && i > start {
                let at = match after_space {
                    Some(b) if b > start && !c.is_whitespace() => b,
                    _ => i,
                };
                rows.push(Row {
                    start,
                    end: at,
                    soft: true,
                });
                start = at;
                col = chars[start..i].iter().map(|&c| char_width(c)).sum();
                after_space = None;
                if col + w > room && i > start {
                    rows.push(Row {
                        start,
                        end: i,
                        soft: true,
                    });
                    (start, col) = (i, 0);
                }
            }
            col += w;
            if c.is_whitespace() {
                after_space = Some(i + 1);
            }
        }
        let end = chars.len();
        if col >= width {
            // The cursor after a full row goes on the next one.
            rows.push(Row {
                start,
                end,
                soft: true,
            });
            start = end;
        }
        rows.push(Row {
            start,
            end,
            soft: false,
        });
        Self { chars, rows }
    }

    /// The text of row `r`.
    pub fn text(&self, r: usize) -> String {
        let row = self.rows[r];
        self.chars[row.start..row.end].iter().collect()
    }

    /// The row and column (display columns) of the cursor at char `pos`.
    pub fn cursor(&self, pos: usize) -> (usize, usize) {
        let r = self
            .rows
            .iter()
            .position(|row| row.start <= pos && (pos < row.end || (pos == row.end && !row.soft)))
            .unwrap_or(self.rows.len() - 1);
        let row = self.rows[r];
        let pos = pos.clamp(row.start, row.end);
        let col = self.chars[row.start..pos]
            .iter()
            .map(|&c| char_width(c))
            .sum();
        (r, col)
    }

    /// The char position on row `r` nearest to column `col` (not past it).
    pub fn position(&self, r: usize, col: usize) -> usize {
        let row = self.rows[r];
        // A wrapped row's end is the next row's start.
        let last = if row.soft && row.end > row.start {
            row.end - 1
        } else {
            row.end
        };
        let mut at = row.start;
        let mut x = 0;
        while at < last {
            let w = char_width(self.chars[at]);
            if x + w > col {
                break;
            }
            x += w;
            at += 1;
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(text: &str, width: usize) -> Vec<String> {
        let l = Layout::new(text, width);
        (0..l.rows.len()).map(|r| l.text(r)).collect()
    }

    #[test]
    fn words_wrap_and_the_last_column_stays_free() {
        assert_eq!(rows("the quick brown fox", 10), ["the quick ", "brown fox"]);
        assert_eq!(rows("abcdefghijkl", 5), ["abcd", "efgh", "ijkl"]);
        assert_eq!(rows("a\n\nb", 5), ["a", "", "b"]);
        assert_eq!(rows("", 5), [""]);
    }

    #[test]
    fn the_cursor_after_a_full_row_is_on_the_next() {
        // Four letters and a space fill a row of five: the cursor after
        // them starts the next row.
        let l = Layout::new("abcd ", 5);
        assert_eq!(l.cursor(5), (1, 0));
        assert_eq!(l.cursor(4), (0, 4));
        let l = Layout::new("abcd", 5);
        assert_eq!(l.cursor(4), (0, 4));
    }

    #[test]
    fn wide_characters_take_two_columns() {
        assert_eq!(rows("日本語の文章", 7), ["日本語", "の文章"]);
        let l = Layout::new("日本語の文章", 7);
        assert_eq!(l.cursor(4), (1, 2));
        assert_eq!(l.position(0, 3), 1);
    }

    #[test]
    fn every_position_is_on_one_row_in_order() {
        let text = "one two three four five six\nseven eight  nine ten eleven  \n日本語 x";
        for width in 2..30 {
            let l = Layout::new(text, width);
            let mut last = (0, 0);
            for pos in 0..=text.chars().count() {
                let (r, c) = l.cursor(pos);
                assert!(c < width.max(2), "width {width} pos {pos}: col {c}");
                assert!((r, c) >= last || r > last.0, "width {width} pos {pos}");
                last = (r, c);
            }
        }
    }

    fn typed(text: &str) -> Composer {
        let mut c = Composer::default();
        c.insert(text);
        c
    }

    #[test]
    fn ctrl_u_and_ctrl_k_work_on_the_line() {
        let mut c = typed("first line\nsecond line");
        c.cursor = 18; // after "second "
        c.kill_to_line_start();
        assert_eq!((c.text(), c.cursor()), ("first line\nline", 11));
        c.kill_to_line_start();
        assert_eq!((c.text(), c.cursor()), ("first lineline", 10));
        c.kill_to_line_end();
        assert_eq!(c.text(), "first line");
        c.line_start();
        c.kill_to_line_end();
        assert_eq!(c.text(), "");
    }

    #[test]
    fn completion_of_an_agents_own_commands_after_its_mention() {
        let command = |name: &str| AgentCommand {
            name: name.into(),
            description: String::new(),
            hint: None,
        };
        let announced: HashMap<String, Vec<AgentCommand>> = [(
            "fake".to_string(),
            vec![command("review"), command("compact")],
        )]
        .into();
        let agents = ["fake".to_string()];
        let mut c = typed("@fake /");
        assert!(c.complete_with(&agents, &[], &announced, &[]));
        assert_eq!(c.text(), "@fake /");
        assert_eq!(c.hint(), Some("/compact  /review"));
        let mut c = typed("@fake! /r");
        assert!(c.complete_with(&agents, &[], &announced, &[]));
        assert_eq!(c.text(), "@fake! /review ");
        // Not after another word, nor for an agent that announced none.
        let mut c = typed("@fake look /r");
        assert!(!c.complete_with(&agents, &[], &announced, &[]));
        let mut c = typed("@other /r");
        assert!(c.complete_with(&agents, &[], &announced, &[]));
        assert_eq!(c.hint(), Some("other has announced no commands yet"));
        assert_eq!(c.text(), "@other /r");
    }

    #[test]
    fn completion_of_names_and_commands() {
        let agents = ["claude".to_string(), "codex".into(), "gemini".into()];
        let commands = ["model", "msg", "new"];
        let mut c = typed("@g");
        assert!(c.complete(&agents, &commands));
        assert_eq!(c.text(), "@gemini ");
        let mut c = typed("@claude,g");
        c.complete(&agents, &commands);
        assert_eq!(c.text(), "@claude,gemini ");
        let mut c = typed("@c");
        c.complete(&agents, &commands);
        assert_eq!((c.text(), c.hint()), ("@c", Some("@claude  @codex")));
        c.complete(&agents, &commands);
        assert_eq!(c.text(), "@claude");
        c.complete(&agents, &commands);
        assert_eq!(c.text(), "@codex");
        let mut c = typed("/m");
        c.complete(&agents, &commands);
        assert_eq!((c.text(), c.hint()), ("/m", Some("/model  /msg")));
        let mut c = typed("/mo");
        c.complete(&agents, &commands);
        assert_eq!(c.text(), "/model ");
        // Not a command in the middle of a message; a plain word: no Tab.
        assert!(!typed("a /mo").complete(&agents, &commands));
        assert!(!typed("hello").complete(&agents, &commands));
        let mut c = typed("@x");
        assert!(c.complete(&agents, &commands));
        assert_eq!(c.hint(), Some("no agent starts with @x"));
    }

    /// After `/model `, Tab offers the chats the engine listed.
    #[test]
    fn completion_of_the_chats_after_model() {
        let models = [
            "acp:claude".to_string(),
            "acp:codex".into(),
            "anthropic:claude-sonnet-4-5".into(),
        ];
        let complete = |c: &mut Composer| c.complete_with(&[], &[], &HashMap::new(), &models);
        let mut c = typed("/model acp:cl");
        assert!(complete(&mut c));
        assert_eq!(c.text(), "/model acp:claude ");
        // Several: what they share is put, and they are shown.
        let mut c = typed("/model ");
        assert!(complete(&mut c));
        assert_eq!(
            (c.text(), c.hint()),
            (
                "/model a",
                Some("acp:claude  acp:codex  anthropic:claude-sonnet-4-5")
            )
        );
        let mut c = typed("/model a");
        complete(&mut c);
        assert_eq!(c.text(), "/model a");
        complete(&mut c);
        assert_eq!(c.text(), "/model acp:claude");
        let mut c = typed("/model x");
        assert!(complete(&mut c));
        assert_eq!(c.hint(), Some("no chat starts with x"));
        // Not in a message, nor after `/model`'s argument.
        assert!(!complete(&mut typed("tell /model a")));
        assert!(!complete(&mut typed("/model acp:claude more")));
        let mut c = typed("/model ");
        assert!(c.complete_with(&[], &[], &HashMap::new(), &[]));
        assert_eq!(c.hint(), Some("no chat to offer: `/model` says why"));
    }

    #[test]
    fn common_prefixes() {
        let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(common_prefix(&v(&["fast-agent", "fast"])), "fast");
        assert_eq!(common_prefix(&v(&["abc", "abd", "ab"])), "ab");
        assert_eq!(common_prefix(&v(&["x", "y"])), "");
    }
}
