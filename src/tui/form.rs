//! A question an agent asks (an elicitation), filled in in its box: the
//! person's draft of the answer (what each field holds, which has the
//! focus, what is wrong), the keys that edit it, and its rows.
//!
//! The draft is the screen's, never recorded: the question and its answer
//! are (as events). Before an answer is sent it is checked against the
//! form with the same validation the engine runs (`event::form`).

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Span;
use serde_json::{Map, Value};

use super::state::Question;
use super::theme;
use super::wrap::LLine;
use crate::confine::sanitize::sanitize;
use crate::event::ElicitAnswer;
use crate::event::form::{self, FieldKind, FormField};

/// What one field holds.
#[derive(Debug, Clone, PartialEq)]
enum Entry {
    /// Text typed (strings, numbers).
    Text(String),
    /// A boolean; `None`: not given.
    Flag(Option<bool>),
    /// An enum's choice, by index; `None`: none picked.
    Pick(Option<usize>),
    /// A field quorum cannot fill in.
    Nothing,
    /// A multi-select: which choices are picked, and the one under the
    /// cursor.
    Some { picked: Vec<bool>, cursor: usize },
}

/// The person's answer in the making.
#[derive(Debug, Clone, PartialEq)]
pub struct FormDraft {
    pub call_id: String,
    pub request_id: String,
    fields: Vec<FormField>,
    entries: Vec<Entry>,
    /// The field with the focus.
    focus: usize,
    /// What is wrong with each field, after a try to send.
    errors: Vec<Option<String>>,
    /// Bumped on every change: the box is laid out again.
    pub rev: u64,
}

/// What a key did to a draft.
#[derive(Debug, Clone, PartialEq)]
pub enum FormKey {
    /// Taken: the draft changed, or nothing happened.
    Handled,
    /// Not a key of the form: the screen's other keys take it.
    Ignored,
    /// The answer to send.
    Answer(ElicitAnswer),
}

impl FormDraft {
    /// A draft of the answer to `question` in call `call_id`, its fields
    /// holding their defaults.
    pub fn new(call_id: &str, question: &Question) -> Self {
        let fields = question.form.clone().unwrap_or_default();
        let entries = fields.iter().map(entry_of).collect();
        Self {
            call_id: call_id.to_string(),
            request_id: question.id.clone(),
            errors: vec![None; fields.len()],
            fields,
            entries,
            focus: 0,
            rev: 0,
        }
    }

    /// Whether this draft answers `question` of `call_id`.
    pub fn answers(&self, call_id: &str, question: &Question) -> bool {
        self.call_id == call_id && self.request_id == question.id
    }

    /// Applies a key.
    pub fn key(&mut self, key: KeyEvent) -> FormKey {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        // Alt+ and Ctrl+arrows move between boxes, as ever.
        if key.modifiers.contains(KeyModifiers::ALT)
            || (ctrl && matches!(key.code, KeyCode::Up | KeyCode::Down))
        {
            return FormKey::Ignored;
        }
        let count = self.fields.len();
        let entry = self.entries.get_mut(self.focus);
        let changed = match (key.code, entry) {
            (KeyCode::Char('c'), _) if ctrl => return FormKey::Answer(ElicitAnswer::Cancel),
            (KeyCode::Esc, _) => return FormKey::Answer(ElicitAnswer::Decline),
            (KeyCode::Enter, _) => {
                return match self.answer() {
                    Some(content) => FormKey::Answer(ElicitAnswer::Accept(content)),
                    None => {
                        self.rev += 1;
                        FormKey::Handled
                    }
                };
            }
            (KeyCode::Tab | KeyCode::Down, _) if count > 0 => {
                self.focus = (self.focus + 1) % count;
                true
            }
            (KeyCode::BackTab | KeyCode::Up, _) if count > 0 => {
                self.focus = (self.focus + count - 1) % count;
                true
            }
            (KeyCode::Backspace, Some(Entry::Text(t))) => t.pop().is_some(),
            (KeyCode::Backspace | KeyCode::Delete, Some(Entry::Flag(f))) => f.take().is_some(),
            (KeyCode::Backspace | KeyCode::Delete, Some(Entry::Pick(p))) => p.take().is_some(),
            (KeyCode::Char('u'), Some(Entry::Text(t))) if ctrl => {
                t.clear();
                true
            }
            (KeyCode::Char(' ') | KeyCode::Left | KeyCode::Right, Some(Entry::Flag(f))) => {
                *f = Some(!f.unwrap_or(false));
                true
            }
            (KeyCode::Left | KeyCode::Right | KeyCode::Char(' '), Some(Entry::Pick(p))) => {
                let n = match &self.fields[self.focus].kind {
                    FieldKind::Enum { options } => options.len(),
                    _ => 0,
                };
                if n > 0 {
                    *p = Some(match (*p, key.code) {
                        (None, KeyCode::Left) => n - 1,
                        (None, _) => 0,
                        (Some(i), KeyCode::Left) => (i + n - 1) % n,
                        (Some(i), _) => (i + 1) % n,
                    });
                }
                true
            }
            (KeyCode::Left | KeyCode::Right, Some(Entry::Some { picked, cursor })) => {
                let n = picked.len().max(1);
                *cursor = match key.code {
                    KeyCode::Left => (*cursor + n - 1) % n,
                    _ => (*cursor + 1) % n,
                };
                true
            }
            (KeyCode::Char(' '), Some(Entry::Some { picked, cursor })) => {
                if let Some(p) = picked.get_mut(*cursor) {
                    *p = !*p;
                }
                true
            }
            (KeyCode::Backspace | KeyCode::Delete, Some(Entry::Some { picked, .. })) => {
                picked.iter_mut().for_each(|p| *p = false);
                true
            }
            (KeyCode::Char(c), Some(Entry::Text(t))) if !ctrl => {
                t.push(c);
                true
            }
            // Typing goes nowhere else while the question is open.
            (KeyCode::Char(_), _) if !ctrl => false,
            (KeyCode::Backspace | KeyCode::Delete | KeyCode::Left | KeyCode::Right, _) => false,
            _ => return FormKey::Ignored,
        };
        if changed {
            if let Some(e) = self.errors.get_mut(self.focus) {
                *e = None;
            }
            self.rev += 1;
        }
        FormKey::Handled
    }

    /// The answer the draft gives, if it fits the form; else `None`, and
    /// each field's problem is noted (the focus goes to the first).
    fn answer(&mut self) -> Option<Map<String, Value>> {
        let mut content = Map::new();
        let mut errors = vec![None; self.fields.len()];
        for (i, (field, entry)) in self.fields.iter().zip(&self.entries).enumerate() {
            let value = match entry {
                Entry::Text(t) => match field.parse(t) {
                    Ok(v) => v,
                    Err(e) => {
                        errors[i] = Some(e);
                        continue;
                    }
                },
                Entry::Flag(f) => f.map(Value::Bool),
                Entry::Pick(p) => match (&field.kind, p) {
                    (FieldKind::Enum { options }, Some(k)) => {
                        options.get(*k).map(|o| Value::String(o.value.clone()))
                    }
                    _ => None,
                },
                Entry::Nothing => None,
                Entry::Some { picked, .. } => match &field.kind {
                    FieldKind::Multi { options, .. } if picked.contains(&true) => {
                        Some(Value::Array(
                            options
                                .iter()
                                .zip(picked)
                                .filter(|(_, p)| **p)
                                .map(|(o, _)| Value::String(o.value.clone()))
                                .collect(),
                        ))
                    }
                    _ => None,
                },
            };
            if let Some(v) = value {
                content.insert(field.name.clone(), v);
            }
        }
        if let Err(problems) = form::validate(&self.fields, &content) {
            for (name, problem) in problems {
                if let Some(i) = self.fields.iter().position(|f| f.name == name) {
                    errors[i].get_or_insert(problem);
                }
            }
        }
        self.errors = errors;
        match self.errors.iter().position(Option::is_some) {
            Some(first) => {
                self.focus = first;
                None
            }
            None => Some(content),
        }
    }
}

fn entry_of(field: &FormField) -> Entry {
    let default = field.default.as_ref();
    match &field.kind {
        FieldKind::String { .. } => Entry::Text(
            default
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        ),
        FieldKind::Number { .. } | FieldKind::Integer { .. } => Entry::Text(
            default
                .filter(|v| v.is_number())
                .map(Value::to_string)
                .unwrap_or_default(),
        ),
        FieldKind::Boolean => Entry::Flag(default.and_then(Value::as_bool)),
        FieldKind::Enum { options } => Entry::Pick(
            default
                .and_then(Value::as_str)
                .and_then(|d| options.iter().position(|o| o.value == d)),
        ),
        FieldKind::Unsupported { .. } => Entry::Nothing,
        FieldKind::Multi { options, .. } => {
            let given: Vec<&str> = default
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            Entry::Some {
                picked: options
                    .iter()
                    .map(|o| given.contains(&o.value.as_str()))
                    .collect(),
                cursor: 0,
            }
        }
    }
}

fn ask_style() -> Style {
    Style::default()
        .fg(Color::Yellow)
        .add_modifier(Modifier::BOLD)
}

/// The keys of an open question, for its box and the status line.
pub fn keys(question: &Question) -> &'static str {
    match question.form {
        Some(_) => {
            "Enter accept · Esc decline · Ctrl+C cancel · Tab/↑↓ field · Space toggle · ←/→ choose"
        }
        None => "Enter accept (done) · Esc decline · Ctrl+C cancel",
    }
}

/// The rows of a question in its box: its message, then its URL or its
/// fields (with what the draft holds, the focus and the problems), then
/// its keys. Without a draft (a replay, a still picture) the fields show
/// their defaults.
pub fn lines(question: &Question, draft: Option<&FormDraft>) -> Vec<LLine> {
    let ask = ask_style();
    let mut out = vec![LLine::prefixed(
        vec![Span::styled("? ", ask)],
        vec![Span::raw("  ")],
        vec![Span::styled(question.message.clone(), ask)],
    )];
    if let Some(url) = &question.url {
        out.push(LLine::prefixed(
            vec![Span::styled("  open: ", theme::dim())],
            vec![Span::raw("        ")],
            vec![Span::styled(url.clone(), theme::link())],
        ));
        out.push(LLine::prefixed(
            vec![Span::raw("  ")],
            vec![Span::raw("  ")],
            vec![Span::styled(
                "waiting for the agent to say it is done, or your answer",
                theme::dim(),
            )],
        ));
    }
    let fresh;
    let (draft, real) = match draft {
        Some(d) => (d, true),
        None => {
            fresh = FormDraft::new("", question);
            (&fresh, false)
        }
    };
    let focused = |i: usize| real && i == draft.focus;
    for (i, field) in draft.fields.iter().enumerate() {
        out.extend(field_lines(
            field,
            &draft.entries[i],
            focused(i),
            draft.errors[i].as_deref(),
        ));
    }
    out.push(LLine::prefixed(
        vec![Span::raw("  ")],
        vec![Span::raw("  ")],
        vec![Span::styled(keys(question), theme::dim())],
    ));
    out
}

/// A field's rows: its mark, label and value (with what it takes), its
/// description, and what is wrong with the answer.
fn field_lines(field: &FormField, entry: &Entry, focused: bool, error: Option<&str>) -> Vec<LLine> {
    let mark = if focused { "▸ " } else { "  " };
    let label_style = if focused {
        theme::bold().fg(Color::White)
    } else {
        theme::bold()
    };
    let mut label = vec![Span::styled(
        sanitize(field.label()).into_owned(),
        label_style,
    )];
    if field.required {
        label.push(Span::styled(" *", theme::warning()));
    }
    label.push(Span::raw(": "));
    let mut value = value_spans(field, entry, focused);
    if let Some(hint) = hint(field) {
        value.push(Span::styled(format!("  {hint}"), theme::dim()));
    }
    label.extend(value);
    // The mark is in the prefix: kept as it is, so the fields line up.
    let mut out = vec![LLine::prefixed(
        vec![Span::raw("  "), Span::styled(mark, label_style)],
        vec![Span::raw("      ")],
        label,
    )];
    if let Some(d) = &field.description {
        out.push(LLine::prefixed(
            vec![Span::raw("      ")],
            vec![Span::raw("      ")],
            vec![Span::styled(sanitize(d).into_owned(), theme::dim())],
        ));
    }
    if let Some(e) = error {
        out.push(LLine::prefixed(
            vec![Span::styled("      ✗ ", theme::error())],
            vec![Span::raw("        ")],
            vec![Span::styled(sanitize(e).into_owned(), theme::error())],
        ));
    }
    out
}

/// A field's value as the person filled it in: text with its cursor, a
/// flag, the option picked (and which of how many), the options ticked.
fn value_spans(field: &FormField, entry: &Entry, focused: bool) -> Vec<Span<'static>> {
    let value_style = if focused {
        Style::default().add_modifier(Modifier::REVERSED)
    } else {
        Style::default()
    };
    match (entry, &field.kind) {
        (Entry::Text(t), _) => {
            let mut text = sanitize(t).into_owned();
            if focused {
                text.push('▏');
            }
            if text.is_empty() {
                vec![Span::styled("·", theme::dim())]
            } else {
                vec![Span::styled(text, value_style)]
            }
        }
        (Entry::Flag(f), _) => vec![Span::styled(
            match f {
                Some(true) => "[x] yes",
                Some(false) => "[ ] no",
                None => "[ ] (not given)",
            },
            value_style,
        )],
        (Entry::Pick(p), FieldKind::Enum { options }) => {
            let shown = p
                .and_then(|k| options.get(k))
                .map(|o| sanitize(o.label()).into_owned())
                .unwrap_or_else(|| "(none)".into());
            let at = p
                .map(|k| format!(" {}/{}", k + 1, options.len()))
                .unwrap_or_default();
            vec![
                Span::styled(format!("‹ {shown} ›"), value_style),
                Span::styled(at, theme::dim()),
            ]
        }
        (Entry::Some { picked, cursor }, FieldKind::Multi { options, .. }) => {
            let mut spans = Vec::new();
            for (k, (o, p)) in options.iter().zip(picked).enumerate() {
                if k > 0 {
                    spans.push(Span::raw("  "));
                }
                let style = if focused && k == *cursor {
                    Style::default().add_modifier(Modifier::REVERSED)
                } else {
                    Style::default()
                };
                let mark = if *p { "[x] " } else { "[ ] " };
                spans.push(Span::styled(
                    format!("{mark}{}", sanitize(o.label())),
                    style,
                ));
            }
            spans
        }
        (_, FieldKind::Unsupported { of }) => vec![Span::styled(
            format!("({} field: quorum cannot fill it in)", sanitize(of)),
            theme::dim(),
        )],
        _ => vec![],
    }
}

/// What a field takes, when the schema bounds it: `1–9`, `email`, `≤ 20 chars`.
fn hint(field: &FormField) -> Option<String> {
    let range = |min: Option<String>, max: Option<String>| match (min, max) {
        (Some(a), Some(b)) => Some(format!("{a}–{b}")),
        (Some(a), None) => Some(format!("≥ {a}")),
        (None, Some(b)) => Some(format!("≤ {b}")),
        (None, None) => None,
    };
    match &field.kind {
        FieldKind::Number { minimum, maximum } => range(
            minimum.map(|v| v.to_string()),
            maximum.map(|v| v.to_string()),
        )
        .map(|r| format!("number {r}"))
        .or(Some("number".into())),
        FieldKind::Integer { minimum, maximum } => range(
            minimum.map(|v| v.to_string()),
            maximum.map(|v| v.to_string()),
        )
        .map(|r| format!("whole number {r}"))
        .or(Some("whole number".into())),
        FieldKind::String {
            format,
            min_length,
            max_length,
            ..
        } => {
            let len = range(
                min_length.map(|v| v.to_string()),
                max_length.map(|v| v.to_string()),
            )
            .map(|r| format!("{r} chars"));
            match (format, len) {
                (Some(f), Some(l)) => Some(format!("{} · {l}", sanitize(f))),
                (Some(f), None) => Some(sanitize(f).into_owned()),
                (None, l) => l,
            }
        }
        FieldKind::Multi {
            min_items,
            max_items,
            ..
        } => range(
            min_items.map(|v| v.to_string()),
            max_items.map(|v| v.to_string()),
        )
        .map(|r| format!("pick {r}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::form::Choice;
    use serde_json::json;

    fn question() -> Question {
        let field = |name: &str, kind, required, default| FormField {
            name: name.into(),
            title: None,
            description: None,
            kind,
            required,
            default,
        };
        Question {
            id: "q1".into(),
            message: "Tell me".into(),
            url: None,
            form: Some(vec![
                field(
                    "name",
                    FieldKind::String {
                        format: None,
                        min_length: None,
                        max_length: Some(4),
                        pattern: None,
                    },
                    true,
                    None,
                ),
                field(
                    "count",
                    FieldKind::Integer {
                        minimum: Some(1),
                        maximum: Some(9),
                    },
                    false,
                    Some(json!(3)),
                ),
                field("ok", FieldKind::Boolean, false, None),
                field(
                    "colour",
                    FieldKind::Enum {
                        options: vec![
                            Choice {
                                value: "r".into(),
                                title: Some("Red".into()),
                            },
                            Choice {
                                value: "g".into(),
                                title: Some("Green".into()),
                            },
                        ],
                    },
                    true,
                    None,
                ),
            ]),
        }
    }

    fn press(d: &mut FormDraft, code: KeyCode) -> FormKey {
        d.key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn text(lines: &[LLine]) -> String {
        lines
            .iter()
            .map(|l| {
                l.first
                    .iter()
                    .chain(&l.spans)
                    .map(|s| s.content.as_ref())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn keys_fill_the_form_and_enter_sends_what_fits() {
        let q = question();
        let mut d = FormDraft::new("c1", &q);
        // Nothing typed: the required fields say so, nothing is sent.
        assert_eq!(press(&mut d, KeyCode::Enter), FormKey::Handled);
        let shown = text(&lines(&q, Some(&d)));
        assert!(shown.contains("✗ required"), "{shown}");
        for c in "Ann".chars() {
            press(&mut d, KeyCode::Char(c));
        }
        // Tab to count: its default is there; replace it.
        press(&mut d, KeyCode::Tab);
        press(&mut d, KeyCode::Backspace);
        press(&mut d, KeyCode::Char('7'));
        press(&mut d, KeyCode::Tab);
        press(&mut d, KeyCode::Char(' '));
        press(&mut d, KeyCode::Tab);
        press(&mut d, KeyCode::Right);
        press(&mut d, KeyCode::Right);
        assert_eq!(
            press(&mut d, KeyCode::Enter),
            FormKey::Answer(ElicitAnswer::Accept(
                json!({"name": "Ann", "count": 7, "ok": true, "colour": "g"})
                    .as_object()
                    .unwrap()
                    .clone()
            ))
        );
    }

    #[test]
    fn a_bad_value_is_shown_by_its_field_and_not_sent() {
        let q = question();
        let mut d = FormDraft::new("c1", &q);
        for c in "Annabel".chars() {
            press(&mut d, KeyCode::Char(c));
        }
        press(&mut d, KeyCode::Tab);
        press(&mut d, KeyCode::Char('x'));
        press(&mut d, KeyCode::BackTab);
        assert_eq!(press(&mut d, KeyCode::Enter), FormKey::Handled);
        let shown = text(&lines(&q, Some(&d)));
        assert!(shown.contains("✗ at most 4 characters (has 7)"), "{shown}");
        assert!(shown.contains("✗ \"3x\" is not a whole number"), "{shown}");
        assert!(shown.contains("✗ required"), "the colour: {shown}");
        assert_eq!(d.focus, 0, "the focus goes to the first problem");
    }

    #[test]
    fn esc_declines_and_ctrl_c_cancels() {
        let q = question();
        let mut d = FormDraft::new("c1", &q);
        assert_eq!(
            press(&mut d, KeyCode::Esc),
            FormKey::Answer(ElicitAnswer::Decline)
        );
        assert_eq!(
            d.key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            FormKey::Answer(ElicitAnswer::Cancel)
        );
        assert_eq!(press(&mut d, KeyCode::PageUp), FormKey::Ignored);
    }

    #[test]
    fn without_a_draft_the_defaults_show_and_no_focus() {
        let shown = text(&lines(&question(), None));
        assert!(shown.contains("count: 3"), "{shown}");
        assert!(!shown.contains('▸'), "{shown}");
        assert!(shown.contains("Enter accept"), "{shown}");
    }
}
