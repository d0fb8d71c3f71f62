//! JSON-RPC errors from agents, made text: the one formatter every place
//! that shows an agent's error goes through (the box, `quorum call` and
//! `--json`, the tool result the chat model reads, notices).
//!
//! An error's `message` is short ("Invalid params"); what went wrong is
//! often in its `data` ("the model name 'gpt-9' is not available"). Both
//! are the agent's words: sanitised, made one line, and `data` clipped.

use agent_client_protocol::Error;

use crate::confine::sanitize::{clip, one_line};

/// How many characters of an error's `data` are kept.
pub(super) const DATA_CHARS: usize = 300;

/// `message: data` (or the message alone, or the code when the agent sent
/// neither): `data` a string as it is, other JSON compact, clipped to
/// [`DATA_CHARS`] characters; all of it sanitised and on one line.
pub(super) fn describe(e: &Error) -> String {
    let message = one_line(e.message.trim());
    let message = if message.is_empty() {
        format!("error {}", e.code.value())
    } else {
        message
    };
    let data = match &e.data {
        None | Some(serde_json::Value::Null) => return message,
        Some(serde_json::Value::String(s)) => s.trim().to_string(),
        Some(other) => other.to_string(),
    };
    let data = clip(&one_line(&data), DATA_CHARS);
    if data.is_empty() || data == message {
        return message;
    }
    format!("{message}: {data}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::ErrorCode;
    use serde_json::json;

    fn error(message: &str, data: Option<serde_json::Value>) -> Error {
        let e = Error::new(ErrorCode::INVALID_PARAMS, message.to_string());
        match data {
            Some(d) => e.data(d),
            None => e,
        }
    }

    #[test]
    fn a_string_datum_follows_the_message_as_it_is() {
        let e = error(
            "Invalid params",
            Some(json!(
                "the model name 'gpt-9' is not available for this account"
            )),
        );
        assert_eq!(
            describe(&e),
            "Invalid params: the model name 'gpt-9' is not available for this account"
        );
    }

    #[test]
    fn other_data_is_compact_json_and_none_or_null_adds_nothing() {
        let e = error("unknown session s1", Some(json!({"sessionId": "s1"})));
        assert_eq!(describe(&e), r#"unknown session s1: {"sessionId":"s1"}"#);
        assert_eq!(describe(&error("Internal error", None)), "Internal error");
        assert_eq!(
            describe(&error("Internal error", Some(serde_json::Value::Null))),
            "Internal error"
        );
        // No message: the code says what it was.
        assert_eq!(describe(&error("", None)), "error -32602");
        // A datum that repeats the message is not said twice.
        assert_eq!(describe(&error("busy", Some(json!("busy")))), "busy");
    }

    #[test]
    fn data_is_clipped_sanitised_and_one_line() {
        let long = "x".repeat(5000);
        let text = describe(&error("Bad", Some(json!(long))));
        assert_eq!(text.chars().count(), "Bad: ".len() + DATA_CHARS + 1);
        assert!(text.ends_with('…'));
        let text = describe(&error(
            "Bad\u{1b}[2J",
            Some(json!("line one\n\u{1b}]0;pwned\u{7}line two\r\n\ttabbed")),
        ));
        assert_eq!(text, "Bad: line one line two tabbed");
        // Multi-byte characters are cut at a character boundary.
        let text = describe(&error("Bad", Some(json!("é".repeat(400)))));
        assert!(text.ends_with("éé…"), "{text}");
    }
}
