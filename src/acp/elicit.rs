//! Elicitation: the questions an agent asks the person (`elicitation/create`,
//! a form to fill in or a URL to visit), and the agent's word that a URL's
//! interaction is done (`elicitation/complete`).
//!
//! As with permission requests, the handler hands the request and its
//! responder to the turn of its session; the turn shows it (an
//! [`Activity::Elicitation`]) and answers it by its policy, or keeps the
//! responder until the person answers through an `Op`. The answer is
//! validated against the form (the one validation in `event::form`) before
//! it is sent. A cancelled turn answers what is pending with `cancel`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use agent_client_protocol::v1::Responder;
use agent_client_protocol::v1::schema::{
    CompleteElicitationNotification, CreateElicitationRequest, CreateElicitationResponse,
    ElicitationAcceptAction, ElicitationAction, ElicitationContentValue, ElicitationMode,
    ElicitationPropertySchema, ElicitationSchema, ElicitationScope, MultiSelectItems,
    MultiSelectPropertySchema, StringPropertySchema,
};
use serde_json::{Map, Value};

use super::route::{Incoming, Routes, route};
use crate::agent::{Elicit, ElicitationAnswer, TurnSink};
use crate::event::form::{self, Choice, FieldKind, FormField};
use crate::event::{Activity, ElicitAnswer};

/// The most fields a form may have, and choices an enum field: a form
/// past them is declined (with a notice), not drawn.
const MAX_FIELDS: usize = 64;
const MAX_CHOICES: usize = 256;
/// The most of a message (and of a URL) kept, in characters.
const MAX_TEXT: usize = 4000;

/// Ids for elicitations in this process: `q1`, `q2`, ….
static NEXT: AtomicU64 = AtomicU64::new(1);

/// `elicitation/create`: handed to its session's turn; one for no running
/// turn (or tied to no session) is cancelled.
pub(super) fn on_elicitation_request(
    routes: &Routes,
    req: CreateElicitationRequest,
    responder: Responder<CreateElicitationResponse>,
) -> Result<(), agent_client_protocol::Error> {
    let ElicitationScope::Session(scope) = req.scope().clone() else {
        tracing::warn!("an elicitation tied to no session: cancelled");
        return responder.respond(CreateElicitationResponse::new(ElicitationAction::Cancel));
    };
    let session = scope.session_id.0.to_string();
    if let Some(Incoming::Elicitation(_, responder)) = route(
        routes,
        &session,
        Incoming::Elicitation(Box::new(req), responder),
    ) {
        responder.respond(CreateElicitationResponse::new(ElicitationAction::Cancel))?;
    }
    Ok(())
}

/// `elicitation/complete`: it names no session, so every turn on the
/// connection hears it; the one with that elicitation takes it.
pub(super) fn on_elicitation_complete(routes: &Routes, n: CompleteElicitationNotification) {
    let id = n.elicitation_id.0.to_string();
    super::route::tell_each_turn(routes, || Incoming::ElicitationComplete(id.clone()));
}

/// One elicitation waiting for the person.
struct Waiting {
    /// The form's fields (`None`: a URL).
    form: Option<Vec<FormField>>,
    /// A URL elicitation's id, as the agent named it.
    url_id: Option<String>,
    responder: Responder<CreateElicitationResponse>,
    /// The child session that asked, if one did.
    child: Option<String>,
}

/// Where a question's activity goes: the call's box, and the asking
/// child's box too when a child asked.
struct To<'a> {
    sink: &'a dyn TurnSink,
    child: Option<&'a str>,
}

impl To<'_> {
    fn activity(&self, activity: Activity) {
        if let Some(child) = self.child {
            self.sink.child_activity(child, activity.clone());
        }
        self.sink.activity(activity);
    }
}

/// A turn's elicitations: those waiting for the person, by quorum's id,
/// and the URLs accepted whose completion the agent has not told yet.
#[derive(Default)]
pub(super) struct Elicitations {
    waiting: HashMap<String, Waiting>,
    /// Accepted URL elicitations, by the agent's id: quorum's id, and
    /// the child that asked.
    accepted: HashMap<String, (String, Option<String>)>,
    /// Ids completed already (a second `complete` is ignored).
    completed: HashSet<String>,
}

/// What an elicitation asks: its message, and its form, or its URL (the
/// agent's elicitation id and the URL).
type Asked = (String, Option<Vec<FormField>>, Option<(String, String)>);

/// What an elicitation asks, read from the request; or why quorum cannot
/// show it.
fn read(req: &CreateElicitationRequest) -> Result<Asked, String> {
    let message = clip(&req.message);
    match &req.mode {
        ElicitationMode::Form(f) => Ok((message, Some(fields(&f.requested_schema)?), None)),
        ElicitationMode::Url(u) => Ok((
            message,
            None,
            Some((u.elicitation_id.0.to_string(), clip(&u.url))),
        )),
        ElicitationMode::Other(o) => Err(format!(
            "an elicitation of a mode quorum does not know ({})",
            crate::confine::sanitize::sanitize(&o.mode)
        )),
        _ => Err("an elicitation of a mode quorum does not know".into()),
    }
}

/// `s` cut to [`MAX_TEXT`] characters.
fn clip(s: &str) -> String {
    crate::confine::sanitize::clip(s, MAX_TEXT)
}

/// A form's fields, in the schema's (alphabetical) order.
pub(super) fn fields(schema: &ElicitationSchema) -> Result<Vec<FormField>, String> {
    if schema.properties.len() > MAX_FIELDS {
        return Err(format!(
            "a form of {} fields (quorum shows at most {MAX_FIELDS})",
            schema.properties.len()
        ));
    }
    let required = schema.required.clone().unwrap_or_default();
    schema
        .properties
        .iter()
        .map(|(name, property)| {
            let (title, description, kind, default) = property_of(property)?;
            Ok(FormField {
                name: name.clone(),
                title: title.map(|t| clip(&t)),
                description: description.map(|d| clip(&d)),
                kind,
                required: required.contains(name),
                default,
            })
        })
        .collect()
}

type Property = (Option<String>, Option<String>, FieldKind, Option<Value>);

/// A property of a form's schema as a field: its title, description,
/// kind and default.
fn property_of(property: &ElicitationPropertySchema) -> Result<Property, String> {
    Ok(match property {
        ElicitationPropertySchema::String(s) => string_property(s)?,
        ElicitationPropertySchema::Number(n) => (
            n.title.clone(),
            n.description.clone(),
            FieldKind::Number {
                minimum: n.minimum,
                maximum: n.maximum,
            },
            n.default
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number),
        ),
        ElicitationPropertySchema::Integer(i) => (
            i.title.clone(),
            i.description.clone(),
            FieldKind::Integer {
                minimum: i.minimum,
                maximum: i.maximum,
            },
            i.default.map(Value::from),
        ),
        ElicitationPropertySchema::Boolean(b) => (
            b.title.clone(),
            b.description.clone(),
            FieldKind::Boolean,
            b.default.map(Value::Bool),
        ),
        ElicitationPropertySchema::Array(a) => multi_property(a)?,
        ElicitationPropertySchema::Other(o) => (
            None,
            None,
            FieldKind::Unsupported {
                of: crate::confine::sanitize::sanitize(&o.type_).into_owned(),
            },
            None,
        ),
        _ => (
            None,
            None,
            FieldKind::Unsupported {
                of: "unknown".into(),
            },
            None,
        ),
    })
}

/// A string property: one of its choices (`oneOf`, or `enum`), or text.
fn string_property(s: &StringPropertySchema) -> Result<Property, String> {
    let choices: Option<Vec<Choice>> = match (&s.one_of, &s.enum_values) {
        (Some(one_of), _) => Some(
            one_of
                .iter()
                .map(|o| Choice {
                    value: o.value.clone(),
                    title: Some(clip(&o.title)),
                })
                .collect(),
        ),
        (None, Some(values)) => Some(
            values
                .iter()
                .map(|v| Choice {
                    value: v.clone(),
                    title: None,
                })
                .collect(),
        ),
        (None, None) => None,
    };
    let kind = match choices {
        Some(options) => FieldKind::Enum {
            options: at_most(options)?,
        },
        None => FieldKind::String {
            format: s
                .format
                .and_then(|f| serde_json::to_value(f).ok())
                .and_then(|v| v.as_str().map(str::to_string)),
            min_length: s.min_length,
            max_length: s.max_length,
            pattern: s.pattern.clone(),
        },
    };
    Ok((
        s.title.clone(),
        s.description.clone(),
        kind,
        s.default.clone().map(Value::String),
    ))
}

/// A multi-select property: several of its choices (plain or titled).
fn multi_property(a: &MultiSelectPropertySchema) -> Result<Property, String> {
    let options: Option<Vec<Choice>> = match &a.items {
        MultiSelectItems::String(items) => Some(
            items
                .values
                .iter()
                .map(|v| Choice {
                    value: v.clone(),
                    title: None,
                })
                .collect(),
        ),
        MultiSelectItems::Titled(items) => Some(
            items
                .options
                .iter()
                .map(|o| Choice {
                    value: o.value.clone(),
                    title: Some(clip(&o.title)),
                })
                .collect(),
        ),
        _ => None,
    };
    let kind = match options {
        Some(options) => FieldKind::Multi {
            options: at_most(options)?,
            min_items: a.min_items,
            max_items: a.max_items,
        },
        None => FieldKind::Unsupported {
            of: "multi-select".into(),
        },
    };
    Ok((
        a.title.clone(),
        a.description.clone(),
        kind,
        a.default
            .clone()
            .map(|d| Value::Array(d.into_iter().map(Value::String).collect())),
    ))
}

/// A field's choices, refused past [`MAX_CHOICES`].
fn at_most(options: Vec<Choice>) -> Result<Vec<Choice>, String> {
    if options.len() > MAX_CHOICES {
        return Err(format!(
            "a field of {} choices (quorum shows at most {MAX_CHOICES})",
            options.len()
        ));
    }
    Ok(options)
}

/// An accepted form's content as the schema's values: integers for
/// integer fields, numbers for number fields.
fn content_values(
    fields: &[FormField],
    content: &Map<String, Value>,
) -> BTreeMap<String, ElicitationContentValue> {
    content
        .iter()
        .filter_map(|(name, value)| {
            let kind = &fields.iter().find(|f| &f.name == name)?.kind;
            let value = match (kind, value) {
                (_, Value::String(s)) => ElicitationContentValue::String(s.clone()),
                (_, Value::Bool(b)) => ElicitationContentValue::Boolean(*b),
                (FieldKind::Integer { .. }, Value::Number(n)) => {
                    ElicitationContentValue::Integer(n.as_i64()?)
                }
                (_, Value::Number(n)) => ElicitationContentValue::Number(n.as_f64()?),
                (_, Value::Array(items)) => ElicitationContentValue::StringArray(
                    items
                        .iter()
                        .filter_map(|i| i.as_str().map(str::to_string))
                        .collect(),
                ),
                _ => return None,
            };
            Some((name.clone(), value))
        })
        .collect()
}

fn respond(responder: Responder<CreateElicitationResponse>, action: ElicitationAction) {
    if let Err(e) = responder.respond(CreateElicitationResponse::new(action)) {
        tracing::warn!("cannot answer an elicitation: {e}");
    }
}

fn resolved(
    id: &str,
    outcome: &str,
    content: Option<Map<String, Value>>,
    reason: Option<String>,
) -> Activity {
    Activity::ElicitationResolved {
        id: id.to_string(),
        outcome: outcome.to_string(),
        content,
        reason,
    }
}

/// Why quorum declines by itself, headless.
const HEADLESS: &str =
    "declined: no one to ask here (`--elicit accept-defaults` accepts a form's defaults)";

impl Elicitations {
    /// An elicitation from the agent (`child`: the child session that
    /// asked, by name): shown, then answered by `policy`, or kept for the
    /// person. A turn already cancelled answers `cancel`.
    pub(super) fn ask(
        &mut self,
        req: CreateElicitationRequest,
        responder: Responder<CreateElicitationResponse>,
        (policy, cancelled): (Elicit, bool),
        child: Option<(&str, &str)>,
        sink: &dyn TurnSink,
    ) {
        let id = format!("q{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let to = To {
            sink,
            child: child.map(|(id, _)| id),
        };
        let (message, form, url) = match read(&req) {
            Ok(read) => read,
            Err(why) => {
                to.activity(Activity::Notice {
                    text: format!("declined {why}"),
                });
                return respond(responder, ElicitationAction::Decline);
            }
        };
        let message = match child {
            Some((_, name)) => format!("{name}: {message}"),
            None => message,
        };
        to.activity(Activity::Elicitation {
            id: id.clone(),
            message,
            form: form.clone(),
            url: url.as_ref().map(|(_, u)| u.clone()),
        });
        if cancelled {
            to.activity(resolved(
                &id,
                "cancel",
                None,
                Some("the turn was cancelled".into()),
            ));
            return respond(responder, ElicitationAction::Cancel);
        }
        match (policy, &form) {
            (Elicit::Ask, _) => {
                self.waiting.insert(
                    id,
                    Waiting {
                        form,
                        url_id: url.map(|(u, _)| u),
                        responder,
                        child: child.map(|(id, _)| id.to_string()),
                    },
                );
            }
            (Elicit::AcceptDefaults, Some(fields)) => match form::defaults(fields) {
                Ok(content) => {
                    let values = content_values(fields, &content);
                    to.activity(resolved(
                        &id,
                        "accept",
                        Some(content),
                        Some("accepted with the form's defaults (--elicit accept-defaults)".into()),
                    ));
                    respond(
                        responder,
                        ElicitationAction::Accept(ElicitationAcceptAction::new().content(values)),
                    );
                }
                Err(why) => {
                    to.activity(resolved(
                        &id,
                        "decline",
                        None,
                        Some(format!("declined: {why} (--elicit accept-defaults)")),
                    ));
                    respond(responder, ElicitationAction::Decline);
                }
            },
            (Elicit::AcceptDefaults, None) => {
                to.activity(resolved(
                    &id,
                    "decline",
                    None,
                    Some("declined: a URL cannot be visited here".into()),
                ));
                respond(responder, ElicitationAction::Decline);
            }
            (Elicit::Decline, _) => {
                to.activity(resolved(&id, "decline", None, Some(HEADLESS.into())));
                respond(responder, ElicitationAction::Decline);
            }
        }
    }

    /// The person's answer. A form's answer that does not fit its form is
    /// not sent: the box is told why, and the question stays open.
    pub(super) fn answer(&mut self, answer: ElicitationAnswer, sink: &dyn TurnSink) {
        let Some(waiting) = self.waiting.remove(&answer.request_id) else {
            return;
        };
        let id = answer.request_id;
        let child = waiting.child.clone();
        let to = To {
            sink,
            child: child.as_deref(),
        };
        match answer.answer {
            ElicitAnswer::Accept(content) => match &waiting.form {
                Some(fields) => {
                    if let Err(problems) = form::validate(fields, &content) {
                        let problems: Vec<String> =
                            problems.iter().map(|(f, p)| format!("{f}: {p}")).collect();
                        to.activity(Activity::Notice {
                            text: format!(
                                "answer not sent (it does not fit the form): {}",
                                problems.join("; ")
                            ),
                        });
                        self.waiting.insert(id, waiting);
                        return;
                    }
                    let values = content_values(fields, &content);
                    to.activity(resolved(&id, "accept", Some(content), None));
                    respond(
                        waiting.responder,
                        ElicitationAction::Accept(ElicitationAcceptAction::new().content(values)),
                    );
                }
                None => {
                    if let Some(url_id) = waiting.url_id {
                        self.accepted.insert(url_id, (id.clone(), child.clone()));
                    }
                    to.activity(resolved(&id, "accept", None, None));
                    respond(
                        waiting.responder,
                        ElicitationAction::Accept(ElicitationAcceptAction::new()),
                    );
                }
            },
            ElicitAnswer::Decline => {
                to.activity(resolved(&id, "decline", None, None));
                respond(waiting.responder, ElicitationAction::Decline);
            }
            ElicitAnswer::Cancel => {
                to.activity(resolved(&id, "cancel", None, None));
                respond(waiting.responder, ElicitationAction::Cancel);
            }
        }
    }

    /// The agent says the URL elicitation `url_id` is done: one still
    /// waiting is answered `accept` (the person did what it asked), and
    /// the box says it completed.
    pub(super) fn complete(&mut self, url_id: &str, sink: &dyn TurnSink) {
        let waiting = self
            .waiting
            .iter()
            .find(|(_, w)| w.url_id.as_deref() == Some(url_id))
            .map(|(id, _)| id.clone());
        let (id, child) = match waiting {
            Some(id) => {
                let child = self.waiting.remove(&id).and_then(|w| {
                    respond(
                        w.responder,
                        ElicitationAction::Accept(ElicitationAcceptAction::new()),
                    );
                    w.child
                });
                (id, child)
            }
            None => match self.accepted.remove(url_id) {
                Some(accepted) => accepted,
                None => return,
            },
        };
        if self.completed.insert(id.clone()) {
            let to = To {
                sink,
                child: child.as_deref(),
            };
            to.activity(resolved(&id, "complete", None, None));
        }
    }

    /// The turn is cancelled (or ends): every question still waiting is
    /// answered `cancel`, and the box says why.
    pub(super) fn cancel_all(&mut self, sink: &dyn TurnSink, reason: &str) {
        let mut ids: Vec<String> = self.waiting.keys().cloned().collect();
        ids.sort();
        for id in ids {
            if let Some(w) = self.waiting.remove(&id) {
                let to = To {
                    sink,
                    child: w.child.as_deref(),
                };
                to.activity(resolved(&id, "cancel", None, Some(reason.to_string())));
                respond(w.responder, ElicitationAction::Cancel);
            }
        }
    }

    /// Answers what is still waiting `cancel`, showing nothing (the turn
    /// has ended).
    pub(super) fn drop_all(&mut self) {
        for (_, w) in self.waiting.drain() {
            respond(w.responder, ElicitationAction::Cancel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(v: Value) -> CreateElicitationRequest {
        serde_json::from_value(v).expect("an elicitation request")
    }

    #[test]
    fn a_schema_becomes_fields_with_kinds_defaults_and_required() {
        let req = request(json!({
            "sessionId": "s1",
            "mode": "form",
            "message": "Tell me",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "title": "Name", "description": "who", "minLength": 1, "format": "email"},
                    "count": {"type": "integer", "minimum": 1, "maximum": 9, "default": 3},
                    "ratio": {"type": "number", "default": 0.5},
                    "ok": {"type": "boolean", "default": true},
                    "colour": {"type": "string", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
                    "size": {"type": "string", "enum": ["s", "m"]},
                    "tags": {"type": "array", "items": {"type": "string", "enum": ["a"]}},
                },
                "required": ["name", "colour"],
            },
        }));
        let (message, form, url) = read(&req).unwrap();
        assert_eq!(message, "Tell me");
        assert!(url.is_none());
        let form = form.unwrap();
        let names: Vec<&str> = form.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            ["colour", "count", "name", "ok", "ratio", "size", "tags"]
        );
        assert!(form[0].required && form[2].required && !form[1].required);
        assert_eq!(form[1].default, Some(json!(3)));
        assert_eq!(form[3].default, Some(json!(true)));
        assert_eq!(form[4].default, Some(json!(0.5)));
        assert_eq!(
            form[2].kind,
            FieldKind::String {
                format: Some("email".into()),
                min_length: Some(1),
                max_length: None,
                pattern: None
            }
        );
        assert!(
            matches!(&form[0].kind, FieldKind::Enum { options } if options[0].label() == "Red")
        );
        assert!(matches!(&form[5].kind, FieldKind::Enum { options } if options[1].label() == "m"));
        assert!(
            matches!(&form[6].kind, FieldKind::Multi { options, .. } if options[0].value == "a")
        );
        // Values go back in the kinds the schema asks for.
        let content = json!({"count": 4, "ratio": 2, "ok": false, "colour": "g"});
        let values = content_values(&form, content.as_object().unwrap());
        assert_eq!(values["count"], ElicitationContentValue::Integer(4));
        assert_eq!(values["ratio"], ElicitationContentValue::Number(2.0));
        assert_eq!(values["ok"], ElicitationContentValue::Boolean(false));
        assert_eq!(
            values["colour"],
            ElicitationContentValue::String("g".into())
        );
    }

    #[test]
    fn a_url_and_an_unknown_mode() {
        let req = request(json!({
            "sessionId": "s1", "mode": "url", "message": "Sign in",
            "elicitationId": "e-9", "url": "https://example.com/login",
        }));
        let (_, form, url) = read(&req).unwrap();
        assert!(form.is_none());
        assert_eq!(
            url,
            Some(("e-9".into(), "https://example.com/login".into()))
        );
        let req = request(json!({"sessionId": "s1", "mode": "_telepathy", "message": "?"}));
        assert!(read(&req).unwrap_err().contains("_telepathy"));
    }

    #[test]
    fn too_big_a_form_is_refused() {
        let properties: Map<String, Value> = (0..=MAX_FIELDS)
            .map(|i| (format!("f{i}"), json!({"type": "boolean"})))
            .collect();
        let req = request(json!({
            "sessionId": "s1", "mode": "form", "message": "many",
            "requestedSchema": {"type": "object", "properties": properties},
        }));
        assert!(read(&req).unwrap_err().contains("at most 64"));
        assert_eq!(
            clip(&"x".repeat(MAX_TEXT + 5)).chars().count(),
            MAX_TEXT + 1
        );
    }
}
