//! Tool calls written as text. Small local models (Qwen2.5-coder through
//! llama-server, for one) often answer a tool call with its JSON as plain
//! text instead of a structured call; this recognises such an answer.
//!
//! An answer counts when it starts with calls: one or several JSON objects
//! (one per line, or in a JSON array), each optionally inside
//! `<tool_call>…</tool_call>` tags or a ```` ```json ```` fence, each naming
//! a declared tool in one of the shapes
//! `{"name": N, "arguments": {…}}`, `{"name": N, "parameters": {…}}`,
//! `{"function": {"name": N, "arguments": …}}`, where the arguments may be
//! an object or a JSON string holding one, or flattened,
//! `{"name": N, "agent": …, "input": …}`. What follows the calls on a later
//! line (a made-up result, more JSON, prose) is dropped: a small model often
//! goes on writing after its call. Prose before them or on the same line,
//! an undeclared tool among them, broken JSON, or a tool's declaration
//! echoed back (with its `description`, or its schema as the arguments)
//! means it was not a call. The same call written twice is one call.
//!
//! A call to a declared tool whose arguments are not an object (an array,
//! a number, a string that holds no JSON object) is a call all the same,
//! but a malformed one: [`recover_calls`] gives it with the reason, for the
//! model to be answered with a failed call it can act on.

use serde_json::{Map, Value, json};

use super::{ToolCall, ToolSpec};

/// One call recovered from text: the call, and why it cannot be run when
/// it is malformed (its arguments are then `{}`).
#[derive(Debug, Clone, PartialEq)]
pub struct Recovered {
    pub call: ToolCall,
    pub malformed: Option<String>,
}

/// The well-formed calls that `text` starts with, with ids
/// `recovered-0`, … and the arguments as JSON text; `None` when it is
/// anything else, or when a call among them is malformed.
pub fn recover_tool_calls(text: &str, tools: &[ToolSpec]) -> Option<Vec<ToolCall>> {
    let calls = recover_calls(text, tools)?;
    if calls.iter().any(|c| c.malformed.is_some()) {
        return None;
    }
    Some(calls.into_iter().map(|c| c.call).collect())
}

/// The calls that `text` starts with, as [`recover_tool_calls`], with the
/// malformed ones among them and why they are.
pub fn recover_calls(text: &str, tools: &[ToolSpec]) -> Option<Vec<Recovered>> {
    let mut calls: Vec<Parsed> = Vec::new();
    'units: for (values, on_new_line) in leading_units(text) {
        let mut found = Vec::new();
        for value in values {
            let items = match value {
                Value::Array(items) if !items.is_empty() => items,
                value => vec![value],
            };
            for item in items {
                match call(item, tools) {
                    Some(call) => found.push(call),
                    // Something else on a line after the calls: they are
                    // what the answer was; the rest is dropped.
                    None if on_new_line && !calls.is_empty() => break 'units,
                    None => return None,
                }
            }
        }
        for call in found {
            // The same call written twice runs once.
            if !calls.contains(&call) {
                calls.push(call);
            }
        }
    }
    if calls.is_empty() {
        return None;
    }
    Some(
        calls
            .into_iter()
            .enumerate()
            .map(|(i, parsed)| {
                let id = format!("recovered-{i}");
                match parsed {
                    Parsed::Call(name, arguments) => Recovered {
                        call: ToolCall {
                            id,
                            name,
                            arguments,
                        },
                        malformed: None,
                    },
                    Parsed::Malformed(name, reason) => Recovered {
                        call: ToolCall {
                            id,
                            name,
                            arguments: "{}".into(),
                        },
                        malformed: Some(reason),
                    },
                }
            })
            .collect(),
    )
}

/// A call read from text: a tool's name and its arguments as JSON text,
/// or a tool's name and why the call is malformed.
#[derive(Debug, Clone, PartialEq)]
enum Parsed {
    Call(String, String),
    Malformed(String, String),
}

/// Why `arguments` (what a call gave as its arguments) is no object.
fn malformed(tool: &str, arguments: &Value) -> String {
    let kind = match arguments {
        Value::Array(_) => "an array",
        Value::String(_) => "a string that holds no JSON object",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        Value::Null | Value::Object(_) => "something else",
    };
    let mut given = arguments.to_string();
    if given.len() > 200 {
        let mut cut = 200;
        while !given.is_char_boundary(cut) {
            cut -= 1;
        }
        given.truncate(cut);
        given.push('…');
    }
    format!(
        "malformed call of {tool}: its \"arguments\" must be a JSON object of the tool's parameters \
         (named as in its schema), not {kind} ({given}); the call was not run: write it again \
         with an object, e.g. {{\"name\": \"{tool}\", \"arguments\": {{...}}}}"
    )
}

/// The values `text` starts with, a unit at a time (a tag, a fence or a
/// bare JSON value), each with whether it began on a new line; text that is
/// none of these ends the list (as an empty unit, if on a new line after
/// something was found; else the answer is no call: an empty list).
fn leading_units(text: &str) -> Vec<(Vec<Value>, bool)> {
    let mut units = Vec::new();
    let mut rest = text;
    loop {
        let trimmed = rest.trim_start();
        let on_new_line = rest[..rest.len() - trimmed.len()].contains('\n');
        rest = trimmed;
        if rest.is_empty() {
            return units;
        }
        let mut values = Vec::new();
        match unit(rest, 0, &mut values) {
            Some(tail) => {
                units.push((values, on_new_line));
                rest = tail;
            }
            // The answer's only object, its last braces missing: a small
            // model's slip (seen with Qwen2.5-Coder 0.5B).
            None if units.is_empty()
                && let Some(value) = closed(rest) =>
            {
                units.push((vec![value], on_new_line));
                return units;
            }
            None if on_new_line && !units.is_empty() => {
                // Prose (or broken JSON) after the calls: it ends them.
                units.push((vec![Value::Null], true));
                return units;
            }
            None => return Vec::new(),
        }
    }
}

const OPEN_TAG: &str = "<tool_call>";
const CLOSE_TAG: &str = "</tool_call>";

/// The JSON values that make up `text`, through tags and fences; `None` if
/// anything else is in it.
fn collect(text: &str, depth: u32, out: &mut Vec<Value>) -> Option<()> {
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        rest = unit(rest, depth, out)?.trim_start();
    }
    Some(())
}

/// `text`, a JSON object that runs to the end of the text and lacks only
/// its last one to three closing braces, closed.
fn closed(text: &str) -> Option<Value> {
    let text = text.trim_end();
    if !text.starts_with('{') {
        return None;
    }
    match serde_json::from_str::<Value>(text) {
        Err(e) if e.is_eof() => {}
        _ => return None,
    }
    (1..=3).find_map(|n| serde_json::from_str(&format!("{text}{}", "}".repeat(n))).ok())
}

/// The values `text` starts with, up to text that is none on a later line;
/// what follows them.
fn leading<'a>(text: &'a str, depth: u32, out: &mut Vec<Value>) -> Option<&'a str> {
    let start = out.len();
    let mut rest = text;
    loop {
        let trimmed = rest.trim_start();
        let on_new_line = rest[..rest.len() - trimmed.len()].contains('\n');
        if trimmed.is_empty() {
            return Some(trimmed);
        }
        match unit(trimmed, depth, out) {
            Some(tail) => rest = tail,
            None if on_new_line && out.len() > start => return Some(rest),
            None => return None,
        }
    }
}

/// One tag, fence or JSON value at the start of `rest` (no leading space):
/// its values go to `out`; what follows it.
fn unit<'a>(rest: &'a str, depth: u32, out: &mut Vec<Value>) -> Option<&'a str> {
    if depth > 4 {
        return None;
    }
    if let Some(after) = rest.strip_prefix(OPEN_TAG) {
        // The last call may lack its closing tag (cut at a stop word); then
        // what follows its values on a later line is not part of it.
        return match enclosed(after, CLOSE_TAG, depth, out) {
            Some(tail) => Some(tail),
            None => leading(after, depth + 1, out),
        };
    }
    if let Some(after) = rest.strip_prefix("```") {
        let newline = after.find('\n')?;
        let lang = after[..newline].trim().to_ascii_lowercase();
        if !matches!(lang.as_str(), "" | "json" | "tool_call" | "tool_code") {
            return None;
        }
        return enclosed(&after[newline + 1..], "```", depth, out);
    }
    if !rest.starts_with(['{', '[']) {
        return None;
    }
    let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
    out.push(values.next()?.ok()?);
    Some(&rest[values.byte_offset()..])
}

/// The values inside a fence or tag, up to the first `close` before which
/// they read whole (a string in them may hold a `close` too); what follows
/// that `close`.
fn enclosed<'a>(body: &'a str, close: &str, depth: u32, out: &mut Vec<Value>) -> Option<&'a str> {
    let mut from = 0;
    while let Some(i) = body[from..].find(close) {
        let end = from + i;
        let mut values = Vec::new();
        if collect(&body[..end], depth + 1, &mut values).is_some() {
            out.extend(values);
            return Some(&body[end + close.len()..]);
        }
        from = end + 1;
    }
    None
}

/// One object as a call to a declared tool: its name and arguments text,
/// or, arguments that are no object, why it is malformed.
fn call(value: Value, tools: &[ToolSpec]) -> Option<Parsed> {
    let Value::Object(mut object) = value else {
        return None;
    };
    let (name, arguments) = match object.remove("function") {
        // A call's `function` has `arguments`; a declaration's (a small
        // model may echo its tools) has `parameters`.
        Some(Value::Object(mut function)) => {
            if function.contains_key("parameters") || function.contains_key("description") {
                return None;
            }
            (function.remove("name")?, function.remove("arguments"))
        }
        Some(_) => return None,
        None => {
            if object.contains_key("description") {
                return None;
            }
            let name = object.remove("name")?;
            let arguments = object
                .remove("arguments")
                .or_else(|| object.remove("parameters"))
                .or_else(|| {
                    // Flattened: `{"name": N, "agent": …, "input": …}`.
                    object.remove("type");
                    object.remove("id");
                    Some(Value::Object(std::mem::take(&mut object)))
                });
            (name, arguments)
        }
    };
    let Value::String(name) = name else {
        return None;
    };
    let tool = tools.iter().find(|t| t.name == name)?;
    let arguments = match arguments {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::String(s)) if s.trim().is_empty() => Value::Object(Map::new()),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(&s) {
            Ok(value) if value.is_object() => value,
            _ => {
                return Some(Parsed::Malformed(
                    name.clone(),
                    malformed(&name, &Value::String(s)),
                ));
            }
        },
        Some(other) => other,
    };
    // The tool's schema given back as its arguments is an echo, not a call.
    if arguments == tool.parameters && arguments != json!({}) {
        return None;
    }
    if !arguments.is_object() {
        return Some(Parsed::Malformed(
            name.clone(),
            malformed(&name, &arguments),
        ));
    }
    Some(Parsed::Call(name, arguments.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Vec<ToolSpec> {
        ["subagent", "list_agents"]
            .into_iter()
            .map(|name| ToolSpec {
                name: name.into(),
                description: String::new(),
                parameters: json!({"type": "object"}),
            })
            .collect()
    }

    fn calls(text: &str) -> Option<Vec<(String, Value)>> {
        recover_tool_calls(text, &tools()).map(|calls| {
            calls
                .into_iter()
                .enumerate()
                .map(|(i, c)| {
                    assert_eq!(c.id, format!("recovered-{i}"));
                    (c.name, serde_json::from_str(&c.arguments).unwrap())
                })
                .collect()
        })
    }

    fn one(name: &str, args: Value) -> Option<Vec<(String, Value)>> {
        Some(vec![(name.to_string(), args)])
    }

    #[test]
    fn the_plain_shapes() {
        let args = json!({"agent": "claude", "input": "Review src/"});
        for text in [
            r#"{"name": "subagent", "arguments": {"agent": "claude", "input": "Review src/"}}"#,
            r#"{"name": "subagent", "parameters": {"agent": "claude", "input": "Review src/"}}"#,
            r#"{"function": {"name": "subagent", "arguments": {"agent": "claude", "input": "Review src/"}}}"#,
            r#"{"type": "function", "id": "x", "function": {"name": "subagent", "arguments": "{\"agent\": \"claude\", \"input\": \"Review src/\"}"}}"#,
            r#"{"name": "subagent", "arguments": "{\"agent\":\"claude\",\"input\":\"Review src/\"}"}"#,
            "\n\n  {\"name\": \"subagent\", \"arguments\": {\"agent\": \"claude\", \"input\": \"Review src/\"}}  \n",
        ] {
            assert_eq!(calls(text), one("subagent", args.clone()), "{text}");
        }
    }

    #[test]
    fn arguments_keep_their_text_exactly_as_json() {
        let got = recover_tool_calls(
            r#"{"name": "subagent", "arguments": {"input": "a \"quoted\" ✓\nline"}}"#,
            &tools(),
        )
        .unwrap();
        assert_eq!(
            got,
            vec![ToolCall {
                id: "recovered-0".into(),
                name: "subagent".into(),
                arguments: r#"{"input":"a \"quoted\" ✓\nline"}"#.into(),
            }]
        );
    }

    /// A declared tool's call whose arguments are no object is a call,
    /// malformed, with the reason (not text to show, nor a call to run).
    #[test]
    fn malformed_arguments_are_a_malformed_call_with_the_reason() {
        for (text, kind) in [
            (
                r#"{"name": "subagent", "arguments": ["calc.py", "add"]}"#,
                "an array",
            ),
            (r#"{"name": "subagent", "arguments": 42}"#, "a number"),
            (
                r#"{"name": "subagent", "arguments": "review src/"}"#,
                "a string",
            ),
        ] {
            let got = recover_calls(text, &tools()).expect(text);
            assert_eq!(got.len(), 1, "{text}");
            assert_eq!(got[0].call.name, "subagent");
            assert_eq!(got[0].call.arguments, "{}");
            let reason = got[0].malformed.as_deref().expect(text);
            assert!(
                reason.starts_with(
                    "malformed call of subagent: its \"arguments\" must be a JSON object"
                ) && reason.contains(kind),
                "{reason}"
            );
            assert_eq!(recover_tool_calls(text, &tools()), None, "{text}");
        }
        // An undeclared tool is still no call at all.
        assert_eq!(
            recover_calls(r#"{"name": "nope", "arguments": [1]}"#, &tools()),
            None
        );
    }

    #[test]
    fn flattened_arguments() {
        // As Qwen2.5-coder 0.5B wrote one.
        let text = r#"{"name": "subagent", "input": "claude review src/llm/openai.rs for bugs."}"#;
        let want = json!({"input": "claude review src/llm/openai.rs for bugs."});
        assert_eq!(calls(text), one("subagent", want));
        let text = r#"{"type": "function", "name": "list_agents"}"#;
        assert_eq!(calls(text), one("list_agents", json!({})));
    }

    #[test]
    fn fences_and_tags() {
        let args = json!({"agent": "codex"});
        for text in [
            "```json\n{\"name\": \"subagent\", \"arguments\": {\"agent\": \"codex\"}}\n```",
            "```\n{\"name\": \"subagent\", \"arguments\": {\"agent\": \"codex\"}}\n```\n",
            "<tool_call>\n{\"name\": \"subagent\", \"arguments\": {\"agent\": \"codex\"}}\n</tool_call>",
            "<tool_call>\n{\"name\": \"subagent\", \"arguments\": {\"agent\": \"codex\"}}",
            "<tool_call>\n```json\n{\"name\": \"subagent\", \"arguments\": {\"agent\": \"codex\"}}\n```\n</tool_call>",
        ] {
            assert_eq!(calls(text), one("subagent", args.clone()), "{text:?}");
        }
    }

    #[test]
    fn several_calls() {
        let want = Some(vec![
            ("subagent".to_string(), json!({"agent": "claude"})),
            ("list_agents".to_string(), json!({})),
            ("subagent".to_string(), json!({"agent": "codex"})),
        ]);
        for text in [
            "{\"name\": \"subagent\", \"arguments\": {\"agent\": \"claude\"}}\n{\"name\": \"list_agents\", \"arguments\": {}}\n{\"name\": \"subagent\", \"arguments\": {\"agent\": \"codex\"}}",
            "[{\"name\": \"subagent\", \"arguments\": {\"agent\": \"claude\"}}, {\"name\": \"list_agents\"}, {\"name\": \"subagent\", \"arguments\": {\"agent\": \"codex\"}}]",
            "<tool_call>\n{\"name\": \"subagent\", \"arguments\": {\"agent\": \"claude\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"list_agents\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"subagent\", \"arguments\": {\"agent\": \"codex\"}}\n</tool_call>",
            "```json\n[\n  {\"name\": \"subagent\", \"arguments\": {\"agent\": \"claude\"}},\n  {\"name\": \"list_agents\", \"arguments\": null}\n]\n```\n```json\n{\"name\": \"subagent\", \"arguments\": {\"agent\": \"codex\"}}\n```",
        ] {
            assert_eq!(calls(text), want, "{text:?}");
        }
    }

    #[test]
    fn anything_else_is_not_a_call() {
        for text in [
            "",
            "   \n",
            "Sure! I will ask claude.",
            // Prose around the JSON.
            "I'll call it: {\"name\": \"subagent\", \"arguments\": {}}",
            "{\"name\": \"subagent\", \"arguments\": {}} Done.",
            // An undeclared tool, alone or among declared ones on a line.
            "{\"name\": \"rm_rf\", \"arguments\": {}}",
            "{\"name\": \"subagent\", \"arguments\": {}} {\"name\": \"shell\", \"arguments\": {}}",
            "[{\"name\": \"subagent\", \"arguments\": {}}, {\"name\": \"shell\", \"arguments\": {}}]",
            // Partial or broken JSON.
            "{\"name\": \"subagent\", \"arguments\": {\"agent\": \"cla",
            "<tool_call>\n{\"name\": \"subagent\", \"arguments\": {\"agent\"",
            "```json\n{\"name\": \"subagent\", \"arguments\": {}}",
            // JSON that is not a call.
            "{\"agent\": \"claude\", \"input\": \"hi\"}",
            "{\"name\": 3, \"arguments\": {}}",
            "{\"name\": \"subagent\", \"arguments\": [1, 2]}",
            "{\"name\": \"subagent\", \"arguments\": \"not json\"}",
            "{\"function\": \"subagent\", \"arguments\": {}}",
            "[]",
            "[{\"name\": \"subagent\"}, 3]",
            "\"subagent\"",
            "```python\n{\"name\": \"subagent\", \"arguments\": {}}\n```",
            // Tools echoed back, as Qwen2.5-coder 0.5B did once.
            "```json\n{\"name\": \"subagent\", \"function\": {\"name\": \"subagent\", \"description\": \"Send a task.\", \"parameters\": {\"type\": \"object\"}}, \"parallel\": true}\n```",
            "{\"type\": \"function\", \"function\": {\"name\": \"subagent\", \"parameters\": {\"type\": \"object\"}}}",
            "{\"name\": \"subagent\", \"description\": \"Send a task.\", \"parameters\": {\"type\": \"object\"}}",
            "{\"name\": \"subagent\", \"parameters\": {\"type\": \"object\"}}",
        ] {
            assert_eq!(calls(text), None, "{text:?}");
        }
    }

    /// A small model often goes on after its call: a made-up result, more
    /// JSON, or prose on the next lines. The calls are what it meant.
    #[test]
    fn what_follows_the_calls_on_a_later_line_is_dropped() {
        let want = one("subagent", json!({"agent": "codex"}));
        for text in [
            "{\"name\": \"subagent\", \"arguments\": {\"agent\": \"codex\"}}\nDone.",
            "```json\n{\"name\": \"subagent\", \"arguments\": {\"agent\": \"codex\"}}\n```\nThat should do it.",
            "{\"name\": \"subagent\", \"arguments\": {\"agent\": \"codex\"}}\n{\"output\": \"All good.\", \"stop_reason\": \"end_turn\"}",
            "{\"name\": \"subagent\", \"arguments\": {\"agent\": \"codex\"}}\n{\"name\": \"shell\", \"arguments\": {}}",
            "<tool_call>\n{\"name\": \"subagent\", \"arguments\": {\"agent\": \"codex\"}}\n</tool_call>\nThe review says: {\"broken\": ",
        ] {
            assert_eq!(calls(text), want, "{text:?}");
        }
    }

    /// A call whose last braces are missing (Qwen2.5-Coder 0.5B wrote one)
    /// is closed; one cut inside a string, or with more after it, is not.
    #[test]
    fn a_call_missing_its_last_braces_is_closed() {
        let text = r#"{"name": "subagent", "arguments": {"agent": "codex", "input": "review""#;
        assert_eq!(
            calls(text),
            one("subagent", json!({"agent": "codex", "input": "review"}))
        );
        let text = r#"{"name": "subagent", "arguments": {"agent": "codex"}"#;
        assert_eq!(calls(text), one("subagent", json!({"agent": "codex"})));
        for text in [
            r#"{"name": "subagent", "arguments": {"agent": "cod"#,
            r#"{"name": "subagent", "arguments": {"agent": "codex","#,
            r#"{"name": "subagent", "arguments": {"a": {"b": {"c": {"d": 1"#,
            "Sure: {\"name\": \"subagent\", \"arguments\": {}",
        ] {
            assert_eq!(calls(text), None, "{text}");
        }
    }

    /// A wall of the same call, as a small model wrote once: one call.
    #[test]
    fn the_same_call_repeated_is_one_call() {
        let call = "{\"name\": \"subagent\", \"arguments\": {\"agent\": \"codex\", \"input\": \"review\"}}";
        let wall = [call; 12].join("\n");
        assert_eq!(
            calls(&wall),
            one("subagent", json!({"agent": "codex", "input": "review"}))
        );
        let two = format!("{call}\n{{\"name\": \"list_agents\"}}\n{call}");
        assert_eq!(
            calls(&two),
            Some(vec![
                (
                    "subagent".to_string(),
                    json!({"agent": "codex", "input": "review"})
                ),
                ("list_agents".to_string(), json!({})),
            ])
        );
    }

    #[test]
    fn no_declared_tools_no_calls() {
        let text = r#"{"name": "subagent", "arguments": {}}"#;
        assert_eq!(recover_tool_calls(text, &[]), None);
    }
}
