//! Tool calls written as text. Small local models (Qwen2.5-coder through
//! llama-server, for one) often answer a tool call with its JSON as plain
//! text instead of a structured call; this recognises such an answer.
//!
//! Only an answer that is nothing but calls counts: one or several JSON
//! objects (one per line, or in a JSON array), each optionally inside
//! `<tool_call>…</tool_call>` tags or a ```` ```json ```` fence, each naming
//! a declared tool in one of the shapes
//! `{"name": N, "arguments": {…}}`, `{"name": N, "parameters": {…}}`,
//! `{"function": {"name": N, "arguments": …}}`, where the arguments may be
//! an object or a JSON string holding one, or flattened,
//! `{"name": N, "agent": …, "input": …}`. Prose around them, an undeclared
//! tool, broken JSON, or a tool's declaration echoed back (with its
//! `description`, or its schema as the arguments) means it was not a call.

use serde_json::{Map, Value, json};

use super::{ToolCall, ToolSpec};

/// The calls that `text` consists of, with ids `recovered-0`, … and the
/// arguments as JSON text; `None` when it is anything else.
pub fn recover_tool_calls(text: &str, tools: &[ToolSpec]) -> Option<Vec<ToolCall>> {
    let mut values = Vec::new();
    collect(text, 0, &mut values)?;
    let mut calls = Vec::new();
    for value in values {
        match value {
            Value::Array(items) if !items.is_empty() => {
                for item in items {
                    calls.push(call(item, tools)?);
                }
            }
            value => calls.push(call(value, tools)?),
        }
    }
    if calls.is_empty() {
        return None;
    }
    Some(
        calls
            .into_iter()
            .enumerate()
            .map(|(i, (name, arguments))| ToolCall {
                id: format!("recovered-{i}"),
                name,
                arguments,
            })
            .collect(),
    )
}

const OPEN_TAG: &str = "<tool_call>";
const CLOSE_TAG: &str = "</tool_call>";

/// The JSON values that make up `text`, through tags and fences; `None` if
/// anything else is in it.
fn collect(text: &str, depth: u32, out: &mut Vec<Value>) -> Option<()> {
    if depth > 4 {
        return None;
    }
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix(OPEN_TAG) {
            // The last call may lack its closing tag (cut at a stop word).
            let tail = match enclosed(after, CLOSE_TAG, depth, out) {
                Some(tail) => tail,
                None => {
                    collect(after, depth + 1, out)?;
                    ""
                }
            };
            rest = tail.trim_start();
        } else if let Some(after) = rest.strip_prefix("```") {
            let newline = after.find('\n')?;
            let lang = after[..newline].trim().to_ascii_lowercase();
            if !matches!(lang.as_str(), "" | "json" | "tool_call" | "tool_code") {
                return None;
            }
            rest = enclosed(&after[newline + 1..], "```", depth, out)?.trim_start();
        } else {
            if !rest.starts_with(['{', '[']) {
                return None;
            }
            let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
            out.push(values.next()?.ok()?);
            rest = rest[values.byte_offset()..].trim_start();
        }
    }
    Some(())
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

/// One object as a call to a declared tool: its name and arguments text.
fn call(value: Value, tools: &[ToolSpec]) -> Option<(String, String)> {
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
        Some(Value::String(s)) => serde_json::from_str(&s).ok()?,
        Some(other) => other,
    };
    // The tool's schema given back as its arguments is an echo, not a call.
    if !arguments.is_object() || (arguments == tool.parameters && arguments != json!({})) {
        return None;
    }
    Some((name, arguments.to_string()))
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
            "{\"name\": \"subagent\", \"arguments\": {}}\nDone.",
            "```json\n{\"name\": \"subagent\", \"arguments\": {}}\n```\nThat should do it.",
            // An undeclared tool, alone or among declared ones.
            "{\"name\": \"rm_rf\", \"arguments\": {}}",
            "{\"name\": \"subagent\", \"arguments\": {}}\n{\"name\": \"shell\", \"arguments\": {}}",
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

    #[test]
    fn no_declared_tools_no_calls() {
        let text = r#"{"name": "subagent", "arguments": {}}"#;
        assert_eq!(recover_tool_calls(text, &[]), None);
    }
}
