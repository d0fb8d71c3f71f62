//! What the host is asked, and its answers as the engine's commands: a
//! sub-agent's (or the chat conductor's) permission request as
//! `session/request_permission`, its question as `elicitation/create`, the
//! asking agent named in each.

use agent_client_protocol::v1::schema::{
    CreateElicitationRequest, CreateElicitationResponse, ElicitationAction, PermissionOption,
    PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use serde_json::{Map, Value, json};

use super::translate::{Ask, AskKind, tool_content, tool_kind};
use crate::event::form::{FieldKind, FormField};
use crate::event::{ElicitAnswer, Op};

/// The permission request for `ask` (a permission), its options by index.
pub fn permission(ask: &Ask) -> Option<RequestPermissionRequest> {
    let AskKind::Permission {
        title,
        options,
        detail,
    } = &ask.what
    else {
        return None;
    };
    let named = if ask.agent.is_empty() {
        title.clone()
    } else {
        format!("{}: {title}", ask.agent)
    };
    let mut fields = ToolCallUpdateFields::new()
        .title(named)
        .kind(tool_kind(detail.kind.as_deref()))
        .status(ToolCallStatus::Pending);
    let content = tool_content(detail);
    if !content.is_empty() {
        fields = fields.content(content);
    }
    if let Some(input) = &detail.raw_input {
        fields = fields.raw_input(input.clone());
    }
    let options = options
        .iter()
        .enumerate()
        .map(|(i, name)| PermissionOption::new(i.to_string(), name.clone(), option_kind(name)))
        .collect();
    Some(RequestPermissionRequest::new(
        ask.session.clone(),
        ToolCallUpdate::new(ask.tool_call.clone(), fields),
        options,
    ))
}

/// What an option's name says it does (the engine keeps only names).
fn option_kind(name: &str) -> PermissionOptionKind {
    let name = name.to_lowercase();
    let always = name.contains("always");
    if [
        "reject", "deny", "don't", "do not", "no", "cancel", "refuse",
    ]
    .iter()
    .any(|w| {
        name.split(|c: char| !c.is_alphanumeric() && c != '\'')
            .any(|x| x == *w)
            || name.starts_with(w)
    }) {
        if always {
            PermissionOptionKind::RejectAlways
        } else {
            PermissionOptionKind::RejectOnce
        }
    } else if always {
        PermissionOptionKind::AllowAlways
    } else {
        PermissionOptionKind::AllowOnce
    }
}

/// The host's answer to a permission request as the engine's command;
/// an error or an unknown option cancels the request.
pub fn permission_answer(
    ask: &Ask,
    answer: Result<RequestPermissionResponse, agent_client_protocol::Error>,
) -> Op {
    let option = match answer.map(|r| r.outcome) {
        Ok(RequestPermissionOutcome::Selected(selected)) => {
            selected.option_id.0.parse::<usize>().ok()
        }
        _ => None,
    };
    Op::Answer {
        call_id: ask.call_id.clone(),
        request_id: ask.request_id.clone(),
        option,
    }
}

/// The question for `ask` (a question), as `elicitation/create` names it;
/// `None` when the host takes no question of its kind (form or URL).
pub fn question(ask: &Ask, form_ok: bool, url_ok: bool) -> Option<CreateElicitationRequest> {
    let AskKind::Question { message, form, url } = &ask.what else {
        return None;
    };
    let message = if ask.agent.is_empty() {
        message.clone()
    } else {
        format!("{} asks: {message}", ask.agent)
    };
    let mut request = json!({
        "sessionId": ask.session.0.as_ref(),
        "toolCallId": ask.tool_call,
        "message": message,
    });
    match (form, url) {
        (Some(fields), _) if form_ok => {
            request["mode"] = "form".into();
            request["requestedSchema"] = schema(fields);
        }
        (None, Some(url)) if url_ok => {
            request["mode"] = "url".into();
            request["url"] = url.clone().into();
            request["elicitationId"] = ask.request_id.clone().into();
        }
        _ => return None,
    }
    serde_json::from_value(request)
        .map_err(|e| tracing::warn!("quorum acp: cannot ask the host {message:?}: {e}"))
        .ok()
}

/// The host's answer to a question as the engine's command.
pub fn question_answer(
    ask: &Ask,
    answer: Result<CreateElicitationResponse, agent_client_protocol::Error>,
) -> Op {
    let answer = match answer.map(|r| r.action) {
        Ok(ElicitationAction::Accept(accepted)) => {
            let content: Map<String, Value> = accepted
                .content
                .map(|c| {
                    c.into_iter()
                        .filter_map(|(k, v)| Some((k, serde_json::to_value(v).ok()?)))
                        .collect()
                })
                .unwrap_or_default();
            ElicitAnswer::Accept(content)
        }
        Ok(ElicitationAction::Decline) => ElicitAnswer::Decline,
        _ => ElicitAnswer::Cancel,
    };
    Op::Elicit {
        call_id: ask.call_id.clone(),
        request_id: ask.request_id.clone(),
        answer,
    }
}

/// A form's fields as the restricted JSON schema of `elicitation/create`.
fn schema(fields: &[FormField]) -> Value {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for field in fields {
        let mut p = Map::new();
        match &field.kind {
            FieldKind::String {
                format,
                min_length,
                max_length,
                pattern,
            } => {
                p.insert("type".into(), "string".into());
                put(&mut p, "format", format.clone().map(Value::from));
                put(&mut p, "minLength", min_length.map(Value::from));
                put(&mut p, "maxLength", max_length.map(Value::from));
                put(&mut p, "pattern", pattern.clone().map(Value::from));
            }
            FieldKind::Number { minimum, maximum } => {
                p.insert("type".into(), "number".into());
                put(&mut p, "minimum", minimum.map(Value::from));
                put(&mut p, "maximum", maximum.map(Value::from));
            }
            FieldKind::Integer { minimum, maximum } => {
                p.insert("type".into(), "integer".into());
                put(&mut p, "minimum", minimum.map(Value::from));
                put(&mut p, "maximum", maximum.map(Value::from));
            }
            FieldKind::Boolean => {
                p.insert("type".into(), "boolean".into());
            }
            FieldKind::Enum { options } => {
                p.insert("type".into(), "string".into());
                p.insert("oneOf".into(), choices(options));
            }
            FieldKind::Multi {
                options,
                min_items,
                max_items,
            } => {
                p.insert("type".into(), "array".into());
                p.insert("items".into(), json!({ "anyOf": choices(options) }));
                put(&mut p, "minItems", min_items.map(Value::from));
                put(&mut p, "maxItems", max_items.map(Value::from));
            }
            // A kind quorum cannot describe again: left out (a required
            // one makes the form one the host cannot accept, as it is).
            FieldKind::Unsupported { .. } => continue,
        }
        put(&mut p, "title", field.title.clone().map(Value::from));
        put(
            &mut p,
            "description",
            field.description.clone().map(Value::from),
        );
        put(&mut p, "default", field.default.clone());
        if field.required {
            required.push(Value::from(field.name.clone()));
        }
        properties.insert(field.name.clone(), Value::Object(p));
    }
    json!({ "type": "object", "properties": properties, "required": required })
}

fn choices(options: &[crate::event::form::Choice]) -> Value {
    options
        .iter()
        .map(|c| json!({ "const": c.value, "title": c.label() }))
        .collect()
}

fn put(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(v) = value {
        map.insert(key.into(), v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_names_say_their_kind() {
        assert_eq!(option_kind("Allow once"), PermissionOptionKind::AllowOnce);
        assert_eq!(
            option_kind("Allow always"),
            PermissionOptionKind::AllowAlways
        );
        assert_eq!(option_kind("Reject"), PermissionOptionKind::RejectOnce);
        assert_eq!(
            option_kind("No, and tell Claude"),
            PermissionOptionKind::RejectOnce
        );
        assert_eq!(
            option_kind("Always deny"),
            PermissionOptionKind::RejectAlways
        );
        assert_eq!(option_kind("Yes"), PermissionOptionKind::AllowOnce);
    }

    #[test]
    fn a_form_is_asked_again_as_the_schema_it_came_as() {
        let fields: Vec<FormField> = serde_json::from_value(json!([
            {"name": "name", "title": "Your name", "kind": {"type": "string", "min_length": 1}, "required": true, "default": "Ada"},
            {"name": "count", "kind": {"type": "integer", "minimum": 1, "maximum": 9}},
            {"name": "colour", "kind": {"type": "enum", "options": [{"value": "red", "title": "Red"}]}},
            {"name": "tags", "kind": {"type": "multi", "options": [{"value": "fast"}], "max_items": 2}}
        ]))
        .unwrap();
        let s = schema(&fields);
        assert_eq!(s["required"], json!(["name"]));
        assert_eq!(
            s["properties"]["name"],
            json!({"type": "string", "minLength": 1, "title": "Your name", "default": "Ada"})
        );
        assert_eq!(
            s["properties"]["colour"]["oneOf"],
            json!([{"const": "red", "title": "Red"}])
        );
        assert_eq!(
            s["properties"]["tags"]["items"]["anyOf"],
            json!([{"const": "fast", "title": "fast"}])
        );
        let ask = Ask {
            call_id: "c1".into(),
            request_id: "e1".into(),
            session: "s".into(),
            tool_call: "c1".into(),
            agent: "fake".into(),
            what: AskKind::Question {
                message: "Which?".into(),
                form: Some(fields),
                url: None,
            },
        };
        let request = question(&ask, true, false).expect("a form the schema takes");
        assert_eq!(request.message, "fake asks: Which?");
        assert!(
            question(&ask, false, true).is_none(),
            "no form for a host without forms"
        );
    }
}
