//! What a box takes in of its agent's questions (elicitations): the form
//! or URL it asks about while it waits, the line it leaves once answered,
//! and its entry in the opened box's log. Agent text is cleaned here; a
//! field's name and a choice's value are kept as sent (they go back to the
//! agent in the answer) and cleaned where they are drawn.

use super::lines::{ActivityLine, push_line};
use super::{CellKind, ChildBox, LogEntry, State, SubagentBox, clean};
use crate::event::Activity;
use crate::event::form::{Choice, FieldKind, FormField};

/// A question a box's agent asks, waiting for the person.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub id: String,
    /// Cleaned.
    pub message: String,
    /// The form (titles, descriptions and choice titles cleaned), or
    /// `None` for a URL.
    pub form: Option<Vec<FormField>>,
    /// The URL to visit, cleaned.
    pub url: Option<String>,
}

impl Question {
    fn of(id: &str, message: &str, form: &Option<Vec<FormField>>, url: &Option<String>) -> Self {
        Self {
            id: id.to_string(),
            message: clean(message),
            form: form.as_ref().map(|f| f.iter().map(clean_field).collect()),
            url: url.as_deref().map(clean),
        }
    }
}

fn clean_field(f: &FormField) -> FormField {
    let kind = match &f.kind {
        FieldKind::Enum { options } => FieldKind::Enum {
            options: options
                .iter()
                .map(|o| Choice {
                    value: o.value.clone(),
                    title: o.title.as_deref().map(clean),
                })
                .collect(),
        },
        other => other.clone(),
    };
    FormField {
        name: f.name.clone(),
        title: f.title.as_deref().map(clean),
        description: f.description.as_deref().map(clean),
        kind,
        required: f.required,
        default: f.default.clone(),
    }
}

/// What an answer says in one line: `accept: name="x", n=3`, `decline`,
/// with quorum's reason when it answered by itself. Cleaned.
pub fn answer_line(
    outcome: &str,
    content: Option<&serde_json::Map<String, serde_json::Value>>,
    reason: Option<&str>,
) -> String {
    let mut line = match outcome {
        "complete" => "completed".to_string(),
        o => clean(o),
    };
    if let Some(c) = content.filter(|c| !c.is_empty()) {
        line.push_str(": ");
        line.push_str(&clean(&crate::event::form::summary(c)));
    }
    if let Some(r) = reason {
        line.push_str(&format!(" ({})", clean(r)));
    }
    line
}

impl State {
    /// The newest question waiting for the person: its call id and the
    /// question.
    pub fn pending_question(&self) -> Option<(String, &Question)> {
        let &i = self.eliciting.last()?;
        match &self.cells[i].kind {
            CellKind::Subagent(b) => b.question.as_deref().map(|q| (b.call_id.clone(), q)),
            _ => None,
        }
    }

    /// Notes whether the box of `call_id` has a question waiting.
    pub(super) fn track_question(&mut self, call_id: &str) {
        if let Some(&index) = self.calls.get(call_id) {
            if matches!(&self.cells[index].kind, CellKind::Subagent(b) if b.question.is_some()) {
                self.eliciting.insert(index);
            } else {
                self.eliciting.remove(&index);
            }
        }
    }
}

/// A question asked or answered, into its box (its prompt, its line, its
/// log); false for any other activity.
pub(super) fn box_question(b: &mut SubagentBox, activity: &Activity) -> bool {
    match activity {
        Activity::Elicitation {
            id,
            message,
            form,
            url,
        } => {
            // The box shows the question itself while it is open.
            let question = Question::of(id, message, form, url);
            b.log.push(LogEntry::Question {
                id: id.clone(),
                message: question.message.clone(),
                form: question.form.clone(),
                url: question.url.clone(),
                outcome: None,
            });
            b.question = Some(Box::new(question));
            true
        }
        Activity::ElicitationResolved {
            id,
            outcome,
            content,
            reason,
        } => {
            let answer = answer_line(outcome, content.as_ref(), reason.as_deref());
            let mut message = String::new();
            b.log.update(|e| match e {
                LogEntry::Question {
                    id: eid,
                    outcome: o,
                    message: m,
                    ..
                } if eid == id => {
                    message = m.clone();
                    match o {
                        // A URL accepted, then completed.
                        Some(before) if outcome == "complete" => {
                            *before = format!("{before}, then completed")
                        }
                        _ => *o = Some(answer.clone()),
                    }
                    true
                }
                _ => false,
            });
            if b.question.as_ref().is_some_and(|q| &q.id == id) {
                message = b.question.take().map(|q| q.message).unwrap_or(message);
            }
            push_line(
                &mut b.activity,
                ActivityLine::Note(format!("{} → {answer}", first_line(&message))),
            );
            true
        }
        _ => false,
    }
}

/// A child's question, as a line in its own box.
pub(super) fn child_question(child: &mut ChildBox, activity: &Activity) {
    let line = match activity {
        Activity::Elicitation { message, .. } => {
            let prefix = format!("{}: ", child.name());
            let message = clean(message.strip_prefix(&prefix).unwrap_or(message));
            format!("asks: {}", first_line(&message))
        }
        Activity::ElicitationResolved {
            outcome,
            content,
            reason,
            ..
        } => format!(
            "question {}",
            answer_line(outcome, content.as_ref(), reason.as_deref())
        ),
        _ => return,
    };
    push_line(&mut child.activity, ActivityLine::Note(line));
}

/// The first line of `s` that is not blank, trimmed.
fn first_line(s: &str) -> &str {
    super::subagent::first_line(s).trim()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use crate::event::{AgentRef, Event, Stamped, build};
    use serde_json::json;

    fn asked(call: &str, id: &str) -> Event {
        Event::SubagentActivity {
            call_id: call.into(),
            activity: Activity::Elicitation {
                id: id.into(),
                message: "Pick \u{1b}[31mone".into(),
                form: Some(vec![FormField {
                    name: "n".into(),
                    title: Some("N\u{7}".into()),
                    description: None,
                    kind: FieldKind::Boolean,
                    required: true,
                    default: None,
                }]),
                url: None,
            },
        }
    }

    fn answered(call: &str, id: &str, outcome: &str) -> Event {
        Event::SubagentActivity {
            call_id: call.into(),
            activity: Activity::ElicitationResolved {
                id: id.into(),
                outcome: outcome.into(),
                content: Some(json!({"n": true}).as_object().unwrap().clone()),
                reason: None,
            },
        }
    }

    #[test]
    fn a_question_waits_in_its_box_cleaned_then_leaves_its_answer() {
        let mut s = State::new();
        let mut t = 0;
        let mut apply = |s: &mut State, e: Event| {
            t += 10;
            s.apply(&Stamped::new(t, e));
        };
        apply(
            &mut s,
            build::started("c1", AgentRef::Acp("fake".into())).event(),
        );
        apply(&mut s, asked("c1", "q1"));
        let (call, q) = s.pending_question().expect("a question");
        assert_eq!(call, "c1");
        assert_eq!(q.message, "Pick one");
        assert_eq!(q.form.as_ref().unwrap()[0].title.as_deref(), Some("N"));
        apply(&mut s, answered("c1", "q1", "accept"));
        assert!(s.pending_question().is_none());
        let b = the_box(&s);
        assert_eq!(
            b.activity.back(),
            Some(&ActivityLine::Note("Pick one → accept: n=true".into()))
        );
        assert!(matches!(b.log.entries.back(),
            Some(LogEntry::Question { outcome: Some(o), .. }) if o == "accept: n=true"));
        // A box that ends with its question open has none.
        apply(&mut s, asked("c1", "q2"));
        assert!(s.pending_question().is_some());
        apply(&mut s, build::finished("c1", "done").event());
        assert!(s.pending_question().is_none());
    }
}
