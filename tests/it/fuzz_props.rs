//! Fuzzing by property tests (stable Rust has no `cargo fuzz`): every parser
//! of untrusted input is fed random and mutated input, and must not panic
//! and must keep the promise its module documents.
//!
//! One `fuzz_*` property per target. Each runs `QUORUM_FUZZ_CASES` cases
//! (256 unless set), so `cargo test` stays quick; `scripts/fuzz.sh` runs
//! each for a bounded time with many more. Inputs that once failed are kept
//! as the `regression_*` tests at the end.

use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, FileFailurePersistence};
use serde_json::{Value, json};

use quorum::confine::sanitize;
use quorum::llm::http::{EventDecoder, StreamDecoder};
use quorum::llm::sse::{SseEvent, SseParser};
use quorum::llm::{Delta, LlmError, ToolSpec, anthropic, openai, recover};
use quorum::subagent::severity;
use quorum::transcript::{self, TranscriptError};
use quorum::tui::wrap::{LLine, WrapMode};
use quorum::tui::{markdown, wrap};

fn config() -> Config {
    let cases = std::env::var("QUORUM_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    Config {
        cases,
        // Failures are kept in `tests/fuzz_props.proptest-regressions`
        // and tried first on every run.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..Config::default()
    }
}

/// Text made of the given fragments and of arbitrary characters.
fn text_of(fragments: &'static [&'static str], max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            3 => select(fragments).prop_map(String::from),
            1 => any::<char>().prop_map(String::from),
            1 => "\\PC{0,6}",
        ],
        0..max,
    )
    .prop_map(|parts| parts.concat())
}

/// `items` cut at the given points (sorted and clamped): the pieces, in
/// order, that make up the whole.
fn split_at<T: Clone>(items: &[T], cuts: &[usize]) -> Vec<Vec<T>> {
    let mut points: Vec<usize> = cuts.iter().map(|&c| c.min(items.len())).collect();
    points.sort_unstable();
    let mut pieces = Vec::new();
    let mut start = 0;
    for p in points.into_iter().chain(std::iter::once(items.len())) {
        pieces.push(items[start..p].to_vec());
        start = p;
    }
    pieces
}

fn cuts() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(0usize..4096, 0..12)
}

/// A JSON value to put in place of another: scalars of every kind, the
/// strings quorum gives meaning to, and small containers.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        // Floats that read back exactly (serde_json's parsing of long
        // ones may differ in the last digit).
        (-1_000_000i32..1_000_000).prop_map(|n| Value::from(f64::from(n) / 8.0)),
        select(
            &[
                "",
                "c1",
                "t1",
                "acp",
                "internal",
                "running",
                "completed",
                "failed",
                "end_turn",
                "cancelled",
                "error",
                "red",
                "text",
                "tool_use",
                "\u{1b}[31m",
                "\u{202e}x",
            ][..]
        )
        .prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z_]{1,12}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// How to change one JSON value: the `pick`th node (in a walk of the whole
/// value) is replaced, or removed from its object or array.
#[derive(Debug, Clone)]
enum JsonEdit {
    Replace(usize, Value),
    Remove(usize),
}

fn json_edit() -> impl Strategy<Value = JsonEdit> {
    prop_oneof![
        (any::<usize>(), json_value()).prop_map(|(i, v)| JsonEdit::Replace(i, v)),
        any::<usize>().prop_map(JsonEdit::Remove),
    ]
}

fn count_nodes(v: &Value) -> usize {
    1 + match v {
        Value::Array(items) => items.iter().map(count_nodes).sum(),
        Value::Object(map) => map.values().map(count_nodes).sum(),
        _ => 0,
    }
}

/// Applies `edit` to the node numbered `*n` in a depth-first walk.
fn edit_node(v: &mut Value, n: &mut usize, edit: &JsonEdit) -> bool {
    match v {
        Value::Array(items) => {
            for i in 0..items.len() {
                if *n == 1 {
                    match edit {
                        JsonEdit::Replace(_, with) => items[i] = with.clone(),
                        JsonEdit::Remove(_) => {
                            items.remove(i);
                        }
                    }
                    return true;
                }
                *n -= 1;
                if edit_node(&mut items[i], n, edit) {
                    return true;
                }
            }
        }
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                if *n == 1 {
                    match edit {
                        JsonEdit::Replace(_, with) => {
                            map.insert(key, with.clone());
                        }
                        JsonEdit::Remove(_) => {
                            map.remove(&key);
                        }
                    }
                    return true;
                }
                *n -= 1;
                if edit_node(map.get_mut(&key).unwrap(), n, edit) {
                    return true;
                }
            }
        }
        _ => {}
    }
    false
}

fn apply_edit(v: &mut Value, edit: &JsonEdit) {
    let total = count_nodes(v);
    let pick = match edit {
        JsonEdit::Replace(i, _) | JsonEdit::Remove(i) => i % total,
    };
    if pick == 0 {
        if let JsonEdit::Replace(_, with) = edit {
            *v = with.clone();
        }
        return;
    }
    let mut n = pick;
    edit_node(v, &mut n, edit);
}

/// A change to one line of text, below the JSON level.
#[derive(Debug, Clone)]
enum ByteEdit {
    /// Cut the line at this fraction of its length (any byte).
    Truncate(f64),
    /// Put these bytes in at this fraction of its length.
    Insert(f64, Vec<u8>),
}

const BYTES: &[&[u8]] = &[
    b"\xff",
    b"\xc3",
    b"\r",
    b"\n",
    b"\0",
    b"\"",
    b"}",
    b"{",
    b"\\",
    b"\xe2\x80\xae",
];

fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    let bytes = prop_oneof![
        proptest::collection::vec(any::<u8>(), 1..4),
        select(BYTES).prop_map(<[u8]>::to_vec),
    ];
    prop_oneof![
        (0.0f64..1.0).prop_map(ByteEdit::Truncate),
        (0.0f64..1.0, bytes).prop_map(|(at, b)| ByteEdit::Insert(at, b)),
    ]
}

fn apply_bytes(line: &mut Vec<u8>, edit: &ByteEdit) {
    match edit {
        ByteEdit::Truncate(at) => line.truncate((line.len() as f64 * at) as usize),
        ByteEdit::Insert(at, bytes) => {
            let at = (line.len() as f64 * at) as usize;
            line.splice(at..at, bytes.iter().copied());
        }
    }
}

// ------------------------------------------------------------- severity

fn random_case(word: &'static str) -> impl Strategy<Value = String> {
    proptest::collection::vec(any::<bool>(), word.len()).prop_map(move |upper| {
        word.chars()
            .zip(upper)
            .map(|(c, up)| if up { c.to_ascii_uppercase() } else { c })
            .collect()
    })
}

/// A severity header's parts: leading space, key, the spaces around the
/// colon and inside the comment, the value, the space after, the body.
fn severity_header() -> impl Strategy<Value = (String, String, [String; 4], String, String, String)>
{
    let sp = || "[ \t]{0,2}";
    (
        "[ \t\r\n\u{a0}\u{3000}]{0,3}",
        random_case("severity"),
        [sp(), sp(), sp(), sp()],
        prop_oneof![
            random_case("green"),
            random_case("yellow"),
            random_case("red"),
            "[a-zA-Z0-9 :_]{0,10}",
        ],
        "[ \t\r\n]{0,3}",
        any::<String>(),
    )
}

const SEVERITY_TEXT: &[&str] = &[
    "<!--", "-->", "severity", ":", " ", "\n", "red", "GREEN", "yellow", "purple", "-", "<", ">",
];

// ----------------------------------------------------------- transcript

const TRANSCRIPTS: [&str; 4] = [
    include_str!("../../assets/demo.jsonl"),
    include_str!("../fixtures/demo_v1.jsonl"),
    include_str!("../fixtures/batch.jsonl"),
    include_str!("../fixtures/colours.jsonl"),
];

/// Every event line of the recorded transcripts.
fn event_lines() -> Vec<&'static str> {
    TRANSCRIPTS
        .iter()
        .flat_map(|t| t.lines().skip(1))
        .filter(|l| !l.trim().is_empty())
        .collect()
}

const HEADER_V2: &str = r#"{"format":"quorum-transcript","version":2,"quorum_version":"0.1.0","cwd":"/w","started_at":"2026-01-01T00:00:00Z","terminal":{"cols":80,"rows":24}}"#;
const HEADER_V1: &str = r#"{"format":"quorum-transcript","version":1,"quorum_version":"0.1.0","cwd":"/w","started_at":"2026-01-01T00:00:00Z","terminal":{"cols":80,"rows":24}}"#;

#[derive(Debug, Clone)]
struct LineSpec {
    /// Which recorded line (modulo their number).
    pick: usize,
    json: Option<JsonEdit>,
    bytes: Option<ByteEdit>,
    crlf: bool,
}

fn line_spec() -> impl Strategy<Value = LineSpec> {
    (
        any::<usize>(),
        proptest::option::weighted(0.3, json_edit()),
        proptest::option::weighted(0.1, byte_edit()),
        proptest::bool::weighted(0.1),
    )
        .prop_map(|(pick, json, bytes, crlf)| LineSpec {
            pick,
            json,
            bytes,
            crlf,
        })
}

/// A transcript file's bytes: a header (v1, v2 or edited) and recorded
/// event lines, some edited; or bytes of any kind after a header, or none.
fn transcript_bytes() -> impl Strategy<Value = Vec<u8>> {
    let structured = (
        prop_oneof![Just(HEADER_V2), Just(HEADER_V1)],
        proptest::option::weighted(0.1, json_edit()),
        proptest::collection::vec(line_spec(), 0..16),
        proptest::bool::weighted(0.8),
    )
        .prop_map(|(header, header_edit, specs, last_newline)| {
            let lines = event_lines();
            let mut header: Value = serde_json::from_str(header).unwrap();
            if let Some(edit) = header_edit {
                apply_edit(&mut header, &edit);
            }
            let mut out = header.to_string().into_bytes();
            out.push(b'\n');
            for (i, spec) in specs.iter().enumerate() {
                let raw = lines[spec.pick % lines.len()];
                let mut line = match &spec.json {
                    Some(edit) => {
                        let mut v: Value = serde_json::from_str(raw).unwrap();
                        apply_edit(&mut v, edit);
                        v.to_string().into_bytes()
                    }
                    None => raw.as_bytes().to_vec(),
                };
                if let Some(edit) = &spec.bytes {
                    apply_bytes(&mut line, edit);
                }
                out.extend_from_slice(&line);
                if i + 1 < specs.len() || last_newline {
                    out.extend_from_slice(if spec.crlf { b"\r\n" } else { b"\n" });
                }
            }
            out
        });
    let raw = (
        prop_oneof![Just(""), Just(HEADER_V2), Just(HEADER_V1)],
        proptest::collection::vec(any::<u8>(), 0..300),
    )
        .prop_map(|(header, bytes)| {
            let mut out = header.as_bytes().to_vec();
            if !header.is_empty() {
                out.push(b'\n');
            }
            out.extend(bytes);
            out
        });
    prop_oneof![4 => structured, 1 => raw]
}

/// The line (1-based) of a reader error, if it names one.
fn error_line(e: &TranscriptError) -> Option<usize> {
    match e {
        TranscriptError::NotUtf8 { line, .. }
        | TranscriptError::NotJson { line, .. }
        | TranscriptError::UnknownEvent { line, .. }
        | TranscriptError::BadEvent { line, .. } => Some(*line),
        TranscriptError::BadHeader { .. } | TranscriptError::NewerVersion { .. } => Some(1),
        _ => None,
    }
}

/// Loads `bytes` from a file and checks what the reader promises: a clear
/// error naming the file (and the first bad line), or events that replay
/// and that the recorder writes back the same.
fn check_transcript(bytes: &[u8]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    std::fs::write(&path, bytes).unwrap();
    let lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    match transcript::load(&path) {
        Err(e) => {
            let message = e.to_string();
            let named = path.display().to_string();
            prop_assert!(message.starts_with(&named), "{message}");
            if let Some(line) = error_line(&e) {
                prop_assert!(
                    message.starts_with(&format!("{named}:{line}:")),
                    "{message}"
                );
                prop_assert!(line >= 1 && line <= lines.len(), "{message}");
            }
            match e {
                TranscriptError::NotUtf8 { line, column, .. } => {
                    // Everything before that byte is UTF-8; it starts no
                    // character.
                    let before: usize = lines[..line - 1].iter().map(|l| l.len() + 1).sum();
                    let at = before + column - 1;
                    prop_assert!(std::str::from_utf8(&bytes[..at]).is_ok(), "{message}");
                    let err = std::str::from_utf8(&bytes[at..]).unwrap_err();
                    prop_assert_eq!(err.valid_up_to(), 0, "{}", message);
                    prop_assert!(err.error_len().is_some(), "{message}");
                }
                TranscriptError::NotJson { line, .. }
                | TranscriptError::UnknownEvent { line, .. }
                | TranscriptError::BadEvent { line, .. } => {
                    // The line named is bad on its own, and the first bad
                    // one: each line before it reads on its own.
                    let header = std::str::from_utf8(lines[0]).unwrap();
                    let alone = |n: usize| {
                        // A last line cut inside a character is read up to
                        // the cut, as the loader reads it.
                        let bytes = lines[n - 1];
                        let text = match std::str::from_utf8(bytes) {
                            Ok(text) => text,
                            Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap(),
                        };
                        transcript::parse(&path, &format!("{header}\n{text}\n"))
                    };
                    prop_assert!(alone(line).is_err(), "{message}");
                    for n in 2..line {
                        prop_assert!(alone(n).is_ok(), "line {n} is bad too; {message}");
                    }
                }
                _ => {}
            }
        }
        Ok(loaded) => {
            for warning in &loaded.warnings {
                let transcript::Warning::TruncatedLastLine { line, .. } = warning;
                prop_assert!(!bytes.ends_with(b"\n"));
                prop_assert_eq!(*line, lines.len());
            }
            // What was read replays through the screen's state...
            let mut state = quorum::tui::state::State::new();
            for event in &loaded.events {
                state.apply(event);
            }
            // ...and is written back by the recorder as it was read.
            if loaded.header.version == transcript::VERSION {
                let mut text = serde_json::to_string(&loaded.header).unwrap();
                text.push('\n');
                for event in &loaded.events {
                    text.push_str(&serde_json::to_string(event).unwrap());
                    text.push('\n');
                }
                let again = transcript::parse(&path, &text).map_err(|e| {
                    TestCaseError::fail(format!("written back, it does not read: {e}"))
                })?;
                prop_assert_eq!(again.events, loaded.events);
            }
        }
    }
    Ok(())
}

// ------------------------------------------------------------- markdown

const MARKDOWN: &[&str] = &[
    "\n",
    "\n\n",
    " ",
    "  ",
    "\t",
    "\r\n",
    "# ",
    "## ",
    "###### ",
    "- ",
    "* ",
    "+ ",
    "1. ",
    "42) ",
    "  - ",
    "    ",
    "> ",
    ">> ",
    "> > ",
    "```",
    "```rust\n",
    "~~~\n",
    "\n```\n",
    "`",
    "``",
    "**",
    "*",
    "_",
    "__",
    "~~",
    "[link](http://example.com)",
    "[",
    "](",
    ")",
    "![img](x.png)",
    "<div>",
    "</div>",
    "<br>",
    "<!-- c -->",
    "| a | b |\n",
    "|---|:-:|\n",
    "| 1 | 2 |\n",
    "|",
    "---\n",
    "***",
    "- [ ] ",
    "- [x] ",
    "[^1]",
    "[^1]: note\n",
    "$x$",
    "\\",
    "&amp;",
    "&#0;",
    "&#27;",
    "&#127;",
    "&#x9b;",
    "&#x202E;",
    "&#9;",
    "&#13;",
    "word",
    "a longer sentence that wraps ",
    "日本語",
    "👩\u{200d}💻",
    "e\u{301}",
    "\u{1b}[31m",
    "\u{0}",
    "\u{ad}",
    "\u{200b}",
    "ｗｉｄｅ",
    "x",
];

/// The text of a wrapped row.
fn row_text(line: &ratatui::text::Line<'_>) -> String {
    line.spans.iter().map(|s| s.content.as_ref()).collect()
}

fn no_space(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Wraps one logical line at `width` and checks that the rows fit and that
/// no visible character is lost, added or moved.
fn check_wrap(line: &LLine, width: usize) -> Result<(), TestCaseError> {
    let mut rows = Vec::new();
    wrap::wrap(std::slice::from_ref(line), width, &mut rows);
    prop_assert!(!rows.is_empty());
    let first: String = line.first.iter().map(|s| s.content.as_ref()).collect();
    let rest: String = line.rest.iter().map(|s| s.content.as_ref()).collect();
    let mut content = String::new();
    for (i, row) in rows.iter().enumerate() {
        let w = wrap::spans_width(&row.spans);
        let text = row_text(row);
        let prefix = if i == 0 { &first } else { &rest };
        prop_assert!(text.starts_with(prefix.as_str()), "row {i}: {text:?}");
        let own = &text[prefix.len()..];
        // A row fits, unless one character is wider than what its prefix
        // leaves: then it holds that character alone (with any zero-width
        // marks).
        let visible = own
            .chars()
            .filter(|&c| unicode_width::UnicodeWidthChar::width(c).unwrap_or(0) > 0)
            .count();
        prop_assert!(
            w <= width.max(1) || visible <= 1,
            "row {i} is {w} wide at width {width}: {text:?}"
        );
        content.push_str(own);
    }
    if line.mode != WrapMode::Rule {
        let want: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
        prop_assert_eq!(no_space(&content), no_space(&want), "at width {}", width);
    }
    Ok(())
}

// ------------------------------------------------------------- sanitise

const TERMINAL: &[&str] = &[
    "\u{1b}",
    "[",
    "]",
    "3",
    "1",
    ";",
    "m",
    "\u{7}",
    "\\",
    "\u{1b}[31m",
    "\u{1b}[0m",
    "\u{1b}]0;",
    "\u{1b}]8;;http://e\u{1b}\\",
    "\u{1b}P",
    "\u{1b}(",
    "\u{1b}7",
    "\u{9b}",
    "\u{9c}",
    "\u{9d}",
    "\u{90}",
    "\u{85}",
    "\r",
    "\n",
    "\r\n",
    "\t",
    "\u{8}",
    "\u{7f}",
    "\u{0}",
    "\u{202e}",
    "\u{2066}",
    "\u{2069}",
    "\u{200b}",
    "\u{200d}",
    "\u{feff}",
    "\u{ad}",
    "\u{61c}",
    "\u{2028}",
    "a",
    "é",
    "日",
    "👩",
];

/// What the sanitiser promises never to let through: controls other than
/// `\n` (a tab becomes spaces), and the unseen characters its module names.
fn unsafe_char(c: char) -> bool {
    (c.is_control() && c != '\n')
        || matches!(
            c,
            '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{200b}'..='\u{200f}'
                | '\u{061c}'
                | '\u{2060}'
                | '\u{feff}'
                | '\u{ad}'
        )
}

fn nasty_string() -> impl Strategy<Value = String> {
    prop_oneof![text_of(TERMINAL, 12), any::<String>()]
}

fn nasty_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        nasty_string().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        Just(Value::Null),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            proptest::collection::btree_map(nasty_string(), inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

// ------------------------------------------------------------- recovery

fn tools() -> Vec<ToolSpec> {
    ["subagent", "list_agents", "subagent_status"]
        .into_iter()
        .map(|name| ToolSpec {
            name: name.into(),
            description: format!("the {name} tool"),
            parameters: json!({"type": "object", "properties": {"input": {"type": "string"}}}),
        })
        .collect()
}

const TOOL_TEXT: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\n",
    " ",
    "{\"name\": \"subagent\", ",
    "\"name\"",
    "\"subagent\"",
    "\"list_agents\"",
    "\"arguments\"",
    "\"parameters\"",
    "\"function\"",
    "\"description\"",
    "\"input\": \"hi\"",
    "{}",
    "null",
    "\"{\\\"agent\\\": 1}\"",
    "<tool_call>",
    "</tool_call>",
    "```",
    "```json\n",
    "```python\n",
    "\n```",
    "Sure, ",
    "[{",
    "}]",
    "\\u0000",
    "{\"name\": \"subagent\", \"arguments\": {\"input\": \"x\"}}",
];

/// A call as a model may write it, in one of the documented shapes.
#[derive(Debug, Clone)]
struct WrittenCall {
    name: &'static str,
    args: serde_json::Map<String, Value>,
    shape: u8,
}

impl WrittenCall {
    fn text(&self) -> String {
        let name = self.name;
        let args = Value::Object(self.args.clone());
        let v = match self.shape % 6 {
            0 => json!({"name": name, "arguments": args}),
            1 => json!({"name": name, "parameters": args}),
            2 => json!({"function": {"name": name, "arguments": args}}),
            3 => json!({"type": "function", "id": "call_1",
                        "function": {"name": name, "arguments": args.to_string()}}),
            4 => json!({"name": name, "arguments": args.to_string()}),
            _ => {
                // Flattened.
                let mut flat = self.args.clone();
                flat.insert("name".into(), name.into());
                Value::Object(flat)
            }
        };
        if self.shape & 8 != 0 {
            serde_json::to_string_pretty(&v).unwrap()
        } else {
            v.to_string()
        }
    }
}

fn written_call() -> impl Strategy<Value = WrittenCall> {
    let key = "(agent|input|code_review|tasks|task_id|[a-z]{1,6})".prop_filter(
        "keys that mean something else at the top of a call",
        |k| {
            ![
                "name",
                "arguments",
                "parameters",
                "function",
                "description",
                "type",
                "id",
            ]
            .contains(&k.as_str())
        },
    );
    (
        select(&["subagent", "list_agents", "subagent_status"][..]),
        proptest::collection::btree_map(key, json_value(), 0..4),
        any::<u8>(),
    )
        .prop_map(|(name, args, shape)| WrittenCall {
            name,
            args: args.into_iter().collect(),
            shape,
        })
}

/// Calls written one per line, as an array, each in tags or fences.
fn written_answer() -> impl Strategy<Value = (Vec<WrittenCall>, String)> {
    (
        proptest::collection::vec(written_call(), 1..4),
        0u8..5,
        "[ \n]{0,2}",
    )
        .prop_map(|(calls, layout, space)| {
            let texts: Vec<String> = calls.iter().map(WrittenCall::text).collect();
            let text = match layout {
                0 => texts.join("\n"),
                1 => format!("[{}]", texts.join(",\n")),
                2 => texts
                    .iter()
                    .map(|t| format!("<tool_call>\n{t}\n</tool_call>"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                3 => texts
                    .iter()
                    .map(|t| format!("```json\n{t}\n```"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                // The last closing tag cut off at a stop word.
                _ => format!("<tool_call>\n{}", texts.join("\n")),
            };
            (calls, format!("{space}{text}{space}"))
        })
}

// ------------------------------------------------------------------ SSE

const SSE: &[&str] = &[
    "data:",
    "data: ",
    "event:",
    "event: message",
    "id:",
    "id: 7",
    "retry: 10",
    "error: ",
    ":",
    ": comment",
    "\n",
    "\r",
    "\r\n",
    "\n\n",
    " ",
    "{\"a\":1}",
    "[DONE]",
    "\u{feff}",
    "x",
    "é",
    "\0",
    "data",
];

/// Bytes of SSE fragments, arbitrary text, and bytes that are not UTF-8.
fn sse_bytes() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            4 => select(SSE).prop_map(|s| s.as_bytes().to_vec()),
            1 => proptest::collection::vec(any::<u8>(), 1..4),
            1 => "\\PC{1,4}".prop_map(String::into_bytes),
        ],
        0..40,
    )
    .prop_map(|parts| parts.concat())
}

fn events_of(pieces: &[Vec<u8>]) -> Vec<SseEvent> {
    let mut parser = SseParser::new();
    let mut events: Vec<SseEvent> = pieces.iter().flat_map(|p| parser.push(p)).collect();
    events.extend(parser.finish());
    events
}

/// An event to write on the wire and read back.
fn sse_event() -> impl Strategy<Value = SseEvent> {
    let value = "[^\r\n\0]{0,12}";
    (
        proptest::option::of("[a-z_]{1,12}"),
        proptest::collection::vec(value, 1..4),
        proptest::option::of("[^\r\n\0]{0,8}"),
    )
        .prop_map(|(event, data, id)| SseEvent {
            event,
            data: data.join("\n"),
            id,
        })
}

/// `events` on the wire with the given line ends, comments, and with or
/// without a space after each colon.
fn write_sse(events: &[SseEvent], ends: &[u8], bom: bool) -> Vec<u8> {
    let mut out = String::new();
    if bom {
        out.push('\u{feff}');
    }
    let mut k = 0;
    let mut last = "";
    let mut end = || {
        k += 1;
        last = match (ends[k % ends.len()] % 3, last) {
            // A LF right after a CR would make one line end of the two.
            (0, "\r") => "\r\n",
            (0, _) => "\n",
            (1, _) => "\r\n",
            _ => "\r",
        };
        last
    };
    let field = |name: &str, value: &str, spaced: bool| {
        // A value that starts with a space needs the one that is dropped.
        if spaced || value.starts_with(' ') {
            format!("{name}: {value}")
        } else {
            format!("{name}:{value}")
        }
    };
    for (i, event) in events.iter().enumerate() {
        let spaced = i % 2 == 0;
        if i % 3 == 1 {
            out.push_str(": keep-alive");
            out.push_str(end());
        }
        if let Some(name) = &event.event {
            out.push_str(&field("event", name, spaced));
            out.push_str(end());
        }
        for line in event.data.split('\n') {
            out.push_str(&field("data", line, spaced));
            out.push_str(end());
        }
        if let Some(id) = &event.id {
            out.push_str(&field("id", id, spaced));
            out.push_str(end());
        }
        out.push_str(end());
    }
    out.into_bytes()
}

// ---------------------------------------------------- provider streams

/// The SSE events of a recorded body, one block each.
fn sse_blocks(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(str::to_string)
        .collect()
}

#[derive(Debug, Clone)]
struct BlockSpec {
    pick: usize,
    json: Option<JsonEdit>,
    bytes: Option<ByteEdit>,
}

/// A body made of recorded events (in any order, repeated, dropped), some
/// with their JSON edited or their bytes broken, with any line ends.
fn stream_body(bodies: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    let spec = || {
        (
            any::<usize>(),
            proptest::option::weighted(0.2, json_edit()),
            proptest::option::weighted(0.05, byte_edit()),
        )
            .prop_map(|(pick, json, bytes)| BlockSpec { pick, json, bytes })
    };
    let in_order = (0..bodies.len()).prop_map(move |i| {
        sse_blocks(bodies[i])
            .iter()
            .enumerate()
            .map(|(pick, _)| BlockSpec {
                pick,
                json: None,
                bytes: None,
            })
            .collect::<Vec<_>>()
    });
    let specs = prop_oneof![
        1 => (in_order, proptest::collection::vec(spec(), 0..3)).prop_map(|(mut a, b)| {
            a.extend(b);
            a
        }),
        2 => proptest::collection::vec(spec(), 0..24),
    ];
    (0..bodies.len(), specs, 0u8..3, any::<bool>()).prop_map(
        move |(from, specs, ending, ends_clean)| {
            let all: Vec<String> = bodies.iter().flat_map(|b| sse_blocks(b)).collect();
            let own = sse_blocks(bodies[from]);
            let mut out = Vec::new();
            for spec in specs {
                // In-order specs number the chosen body's own blocks.
                let block = if spec.json.is_none() && spec.bytes.is_none() && spec.pick < own.len()
                {
                    own[spec.pick].clone()
                } else {
                    all[spec.pick % all.len()].clone()
                };
                let mut block = match &spec.json {
                    Some(edit) => block
                        .lines()
                        .map(|line| match line.strip_prefix("data: ") {
                            Some(data) => match serde_json::from_str::<Value>(data) {
                                Ok(mut v) => {
                                    apply_edit(&mut v, edit);
                                    format!("data: {v}")
                                }
                                Err(_) => line.to_string(),
                            },
                            None => line.to_string(),
                        })
                        .collect::<Vec<_>>()
                        .join("\n"),
                    None => block,
                }
                .into_bytes();
                if let Some(edit) = &spec.bytes {
                    apply_bytes(&mut block, edit);
                }
                block.extend_from_slice(b"\n\n");
                out.extend(block);
            }
            if !ends_clean {
                out.truncate(out.len().saturating_sub(1));
            }
            let text = String::from_utf8_lossy(&out).into_owned();
            match ending {
                0 => out,
                1 => text.replace('\n', "\r\n").into_bytes(),
                _ => text.replace('\n', "\r").into_bytes(),
            }
        },
    )
}

const OPENAI: &[&str] = &[
    include_str!("../fixtures/sse/openai_text.sse"),
    include_str!("../fixtures/sse/openai_tool_call.sse"),
    include_str!("../fixtures/sse/openai_parallel_tool_calls.sse"),
    include_str!("../fixtures/sse/openai_length.sse"),
    include_str!("../fixtures/sse/openai_llamacpp_tool_as_text.sse"),
];

const ANTHROPIC: &[&str] = &[
    include_str!("../fixtures/sse/anthropic_text.sse"),
    include_str!("../fixtures/sse/anthropic_tool_use.sse"),
    include_str!("../fixtures/sse/anthropic_parallel_tool_use.sse"),
    include_str!("../fixtures/sse/anthropic_max_tokens.sse"),
    include_str!("../fixtures/sse/anthropic_error_event.sse"),
];

/// What a consumer gets from a body delivered in these pieces: every delta
/// until the stream finishes or fails, and how it ended.
fn outcome<D: EventDecoder>(
    mut decoder: StreamDecoder<D>,
    pieces: &[Vec<u8>],
) -> (Vec<Delta>, Result<(), LlmError>) {
    let mut deltas = Vec::new();
    for piece in pieces {
        match decoder.push(piece) {
            Ok(d) => deltas.extend(d),
            Err(e) => return (deltas, Err(e)),
        }
        if decoder.finished() {
            return (deltas, Ok(()));
        }
    }
    match decoder.finish() {
        Ok(d) => {
            deltas.extend(d);
            (deltas, Ok(()))
        }
        Err(e) => (deltas, Err(e)),
    }
}

/// The same outcome however the body is cut, and deltas in an order a
/// consumer can follow: a call's arguments after its start, a finish
/// only at the end of a stream that ended well.
fn check_stream<D: EventDecoder>(
    new: fn() -> StreamDecoder<D>,
    body: &[u8],
    cuts: &[usize],
) -> Result<(), TestCaseError> {
    let whole = outcome(new(), &[body.to_vec()]);
    let pieces = split_at(body, cuts);
    let split = outcome(new(), &pieces);
    prop_assert_eq!(&split, &whole, "cut into {} pieces", pieces.len());
    let (deltas, end) = whole;
    let mut started = std::collections::HashSet::new();
    for (i, delta) in deltas.iter().enumerate() {
        match delta {
            Delta::ToolCallStart { index, .. } => {
                prop_assert!(started.insert(*index), "call {index} started twice");
            }
            Delta::ToolCallArgs { index, .. } => {
                prop_assert!(
                    started.contains(index),
                    "arguments of call {index} before its start"
                );
            }
            Delta::Finish(_) => {
                prop_assert_eq!(i + 1, deltas.len(), "a delta after the finish");
            }
            _ => {}
        }
    }
    let finished = matches!(deltas.last(), Some(Delta::Finish(_)));
    prop_assert_eq!(end.is_ok(), finished, "{:?}", end);
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    /// The verdict header: any text parses without a panic, the body is
    /// always the report's tail, and a header written in any case and
    /// spacing is found and stripped, anything before it means no verdict.
    #[test]
    fn fuzz_severity(
        report in prop_oneof![any::<String>(), text_of(SEVERITY_TEXT, 12)],
        (lead, key, [s1, s2, s3, s4], value, after, body) in severity_header(),
        junk in "[a-zA-Z.#>]{1,4}",
    ) {
        let v = severity::parse(&report);
        prop_assert!(report.ends_with(v.body));
        prop_assert!(v.severity.is_none() || v.unknown.is_none());
        if v.severity.is_none() && v.unknown.is_none() {
            prop_assert_eq!(v.body, report.as_str());
        } else {
            prop_assert!(report.trim_start().starts_with("<!--"));
            prop_assert_eq!(v.body, v.body.trim_start());
        }

        let header = format!("<!--{s1}{key}{s2}:{s3}{value}{s4}-->");
        let full = format!("{lead}{header}{after}{body}");
        let v = severity::parse(&full);
        let want = match value.trim().to_ascii_lowercase().as_str() {
            "green" => Some(quorum::event::Severity::Green),
            "yellow" => Some(quorum::event::Severity::Yellow),
            "red" => Some(quorum::event::Severity::Red),
            _ => None,
        };
        prop_assert_eq!(v.severity, want);
        prop_assert_eq!(v.unknown, want.is_none().then_some(value.trim()));
        let rest = format!("{after}{body}");
        prop_assert_eq!(v.body, rest.trim_start());

        let late = format!("{junk}{lead}{header}{after}{body}");
        let v = severity::parse(&late);
        prop_assert_eq!((v.severity, v.unknown, v.body), (None, None, late.as_str()));
    }

    /// A transcript file of any bytes (recorded lines, edited or broken,
    /// or noise) loads or fails with an error naming the file and its
    /// first bad line; what loads replays and writes back the same.
    #[test]
    fn fuzz_transcript(bytes in transcript_bytes()) {
        check_transcript(&bytes)?;
    }

    /// Markdown of any shape renders, and its lines wrap at any width
    /// without losing a visible character or overflowing the width.
    #[test]
    fn fuzz_markdown(
        text in text_of(MARKDOWN, 40),
        widths in proptest::collection::vec(0usize..130, 1..4),
    ) {
        // Text reaches the renderer cleaned (agent output, messages).
        let text = sanitize::sanitize(&text);
        let lines = markdown::render(&text);
        for line in &lines {
            for span in line.first.iter().chain(&line.rest).chain(&line.spans) {
                prop_assert!(
                    !span.content.chars().any(unsafe_char),
                    "{:?} renders {:?}",
                    text,
                    span.content
                );
            }
            for &width in &widths {
                check_wrap(line, width)?;
            }
        }
    }

    /// Cleaned text has no control or unseen character; clean text comes
    /// back as it was; streaming in any pieces shows what cleaning whole
    /// shows; escaped JSON has none either and parses to the same value.
    #[test]
    fn fuzz_sanitize(
        text in nasty_string(),
        cuts in proptest::collection::vec(0usize..64, 0..8),
        value in nasty_json(),
    ) {
        let clean = sanitize::sanitize(&text);
        prop_assert!(!clean.chars().any(unsafe_char), "{:?}", clean);
        prop_assert_eq!(sanitize::sanitize(&clean), clean.clone(), "not idempotent");
        // Text without control characters, and without the characters the
        // sanitiser rewrites one by one (widths terminals disagree on),
        // comes back as it was.
        let rewritten = |c: char| {
            let one = c.to_string();
            sanitize::sanitize(&one) != one.as_str()
        };
        if !text.chars().any(|c| unsafe_char(c) || rewritten(c)) {
            prop_assert_eq!(clean.as_ref(), text.as_str());
        }

        let chars: Vec<char> = text.chars().collect();
        let mut stream = sanitize::Stream::default();
        let mut streamed = String::new();
        for piece in split_at(&chars, &cuts) {
            let piece: String = piece.into_iter().collect();
            streamed.push_str(&stream.push(&piece));
        }
        streamed.push_str(&stream.finish());
        prop_assert_eq!(streamed, clean.into_owned());

        // Compact, as every caller writes it: `json` promises nothing for
        // the raw newlines between tokens of pretty-printed JSON.
        let serialized = serde_json::to_string(&value).unwrap();
        let safe = sanitize::json(&serialized);
        prop_assert!(!safe.chars().any(unsafe_char), "{:?}", safe);
        prop_assert_eq!(serde_json::from_str::<Value>(&safe).unwrap(), value);
    }

    /// Any text: no panic, and what is recovered are calls to declared
    /// tools with object arguments. Calls written in any documented shape
    /// and layout come back exactly (the same call twice once); prose
    /// before them means none, prose on a line after them is dropped.
    #[test]
    fn fuzz_recover(
        text in prop_oneof![text_of(TOOL_TEXT, 16), any::<String>()],
        (calls, answer) in written_answer(),
        prose in "[A-Za-z][A-Za-z ,.!]{0,12}",
    ) {
        let tools = tools();
        if let Some(got) = recover::recover_tool_calls(&text, &tools) {
            prop_assert!(!got.is_empty());
            for (i, call) in got.iter().enumerate() {
                prop_assert_eq!(&call.id, &format!("recovered-{i}"));
                prop_assert!(tools.iter().any(|t| t.name == call.name));
                let args: Value = serde_json::from_str(&call.arguments).unwrap();
                prop_assert!(args.is_object());
            }
        }

        let got = recover::recover_tool_calls(&answer, &tools);
        // The same call twice is one call.
        let mut want: Vec<(String, Value)> = Vec::new();
        for c in &calls {
            let call = (c.name.to_string(), Value::Object(c.args.clone()));
            if !want.contains(&call) {
                want.push(call);
            }
        }
        let got: Option<Vec<(String, Value)>> = got.map(|calls| {
            calls
                .into_iter()
                .map(|c| (c.name, serde_json::from_str(&c.arguments).unwrap()))
                .collect()
        });
        prop_assert_eq!(got.clone(), Some(want.clone()), "{}", answer);
        // Prose before the calls: no calls; after them on a line of its own:
        // the calls, the prose dropped; on the same line: no calls.
        prop_assert_eq!(recover::recover_tool_calls(&format!("{prose}\n{answer}"), &tools), None);
        let after = recover::recover_tool_calls(&format!("{answer}\n{prose}"), &tools).map(|calls| {
            calls
                .into_iter()
                .map(|c| (c.name, serde_json::from_str::<Value>(&c.arguments).unwrap()))
                .collect::<Vec<_>>()
        });
        prop_assert_eq!(after, Some(want), "{}", answer);
    }

    /// Any bytes, cut anywhere (inside UTF-8 characters and CRLFs too),
    /// give the events they give whole; events written with any line ends,
    /// comments and spacing read back as written.
    #[test]
    fn fuzz_sse(
        bytes in sse_bytes(),
        cuts in cuts(),
        events in proptest::collection::vec(sse_event(), 0..6),
        ends in proptest::collection::vec(any::<u8>(), 1..8),
        bom in any::<bool>(),
        clean_end in any::<bool>(),
    ) {
        let whole = events_of(std::slice::from_ref(&bytes));
        prop_assert_eq!(events_of(&split_at(&bytes, &cuts)), whole);

        let mut wire = write_sse(&events, &ends, bom);
        if !clean_end && !events.is_empty() {
            // The last blank line missing: the clean end dispatches.
            let last_end = if wire.ends_with(b"\r\n") { 2 } else { 1 };
            wire.truncate(wire.len() - last_end);
        }
        prop_assert_eq!(events_of(&split_at(&wire, &cuts)), events);
    }

    /// OpenAI-style bodies made of recorded chunks, shuffled, edited and
    /// broken, cut anywhere: the same deltas and end as whole, in an order
    /// a consumer can follow.
    #[test]
    fn fuzz_openai_stream(body in stream_body(OPENAI), cuts in cuts()) {
        check_stream(openai::decoder, &body, &cuts)?;
    }

    /// The same for Anthropic-style bodies.
    #[test]
    fn fuzz_anthropic_stream(body in stream_body(ANTHROPIC), cuts in cuts()) {
        check_stream(anthropic::decoder, &body, &cuts)?;
    }
}

// ------------------------------------------------- found by the fuzzing

/// Markdown decodes character references, and `&#27;` is ESC: text that
/// was cleaned before rendering rendered a control (or a bidi override)
/// again, which wrapping then measured differently from the terminal.
#[test]
fn regression_markdown_entities_decode_to_no_control_characters() {
    for text in [
        "> &#27;",
        "&#27;]0;title&#7;x",
        "&#x9b;31mred",
        "&#127;",
        "if admin &#x202E;{ }&#x2066;",
        "- a&#x200B;b",
        "# &#13;h",
    ] {
        let lines = markdown::render(text);
        for line in &lines {
            for span in line.first.iter().chain(&line.rest).chain(&line.spans) {
                assert!(
                    !span.content.chars().any(unsafe_char),
                    "{text:?} renders {:?}",
                    span.content
                );
            }
        }
    }
    // What is left is shown as text.
    let shown: String = markdown::render("&#27;[31mred")
        .iter()
        .flat_map(|l| l.spans.iter().map(|s| s.content.to_string()))
        .collect();
    assert_eq!(shown, "[31mred");
}

/// A delta and an error that came in one read of the body: the delta was
/// dropped with the error, but kept when the read was cut between them;
/// so whether the text showed (and the request was retried) depended on
/// the network. Now the delta comes first however the body is cut.
#[test]
fn regression_openai_deltas_before_an_error_in_the_same_read_are_kept() {
    let body = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Asking both.\"}}]}\n\n",
        "data: {\"choices\":false}\n\n",
    )
    .as_bytes();
    let (deltas, end) = outcome(openai::decoder(), &[body.to_vec()]);
    assert_eq!(deltas, vec![Delta::Text("Asking both.".into())]);
    assert!(matches!(end, Err(LlmError::Decode(_))), "{end:?}");
    for cut in 0..=body.len() {
        check_stream(openai::decoder, body, &[cut]).unwrap();
    }
}

/// The same for Anthropic: a tool call's start, then an event cut short;
/// and the recorded text-then-`error` stream.
#[test]
fn regression_anthropic_deltas_before_an_error_in_the_same_read_are_kept() {
    let body = concat!(
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"subagent\",\"input\":{}}}\n\n",
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"usage\":\n\n",
    )
    .as_bytes();
    let (deltas, end) = outcome(anthropic::decoder(), &[body.to_vec()]);
    assert_eq!(
        deltas,
        vec![Delta::ToolCallStart {
            index: 0,
            id: "toolu_1".into(),
            name: "subagent".into()
        }]
    );
    assert!(matches!(end, Err(LlmError::Decode(_))), "{end:?}");
    for cut in 0..=body.len() {
        check_stream(anthropic::decoder, body, &[cut]).unwrap();
    }

    let body = include_bytes!("../fixtures/sse/anthropic_error_event.sse");
    let (deltas, end) = outcome(anthropic::decoder(), &[body.to_vec()]);
    assert_eq!(deltas, vec![Delta::Text("Let me".into())]);
    assert_eq!(
        end,
        Err(LlmError::Http {
            status: 529,
            message: "Overloaded".into()
        })
    );
}

/// A `\r` right after the `ESC` that ends a control string is text of its
/// own, and half of a `\r\n` when a chunk ends there: streamed, it showed
/// as two line ends where cleaning the whole text shows one.
#[test]
fn regression_stream_holds_a_cr_after_an_ended_control_string() {
    let chunks = ["\u{1b}]0;t\u{1b}\r", "\nnext"];
    let mut stream = sanitize::Stream::default();
    let mut streamed: String = chunks.iter().map(|c| stream.push(c)).collect();
    streamed.push_str(&stream.finish());
    assert_eq!(streamed, sanitize::sanitize(&chunks.concat()));
    assert_eq!(streamed, "\nnext");
}

/// A call in a fence whose arguments hold a fence of their own (a review
/// request quoting code): the first ``` inside the string ended the fence,
/// and the call was shown as text instead of made.
#[test]
fn regression_a_fence_inside_the_arguments_does_not_end_the_call() {
    let input = "Review:\n```rust\nfn main() {}\n```";
    let call = json!({"name": "subagent", "arguments": {"input": input}});
    for text in [
        format!("```json\n{call}\n```"),
        format!(
            "<tool_call>\n{}\n</tool_call>",
            json!({"name": "subagent", "arguments": {"input": "a </tool_call> b"}})
        ),
    ] {
        let got = recover::recover_tool_calls(&text, &tools()).expect(&text);
        assert_eq!(got.len(), 1, "{text}");
        assert_eq!(got[0].name, "subagent");
    }
    let got = recover::recover_tool_calls(&format!("```json\n{call}\n```"), &tools()).unwrap();
    let args: Value = serde_json::from_str(&got[0].arguments).unwrap();
    assert_eq!(args, json!({"input": input}));
}

/// Found by `scripts/fuzz.sh`: an empty read between the CR and the LF of
/// a CRLF made the LF a second line end, a blank line that dispatched the
/// event in the middle of its data.
#[test]
fn regression_sse_an_empty_read_between_cr_and_lf() {
    let mut parser = quorum::llm::sse::SseParser::new();
    let mut events = parser.push(b"data: one\r");
    events.extend(parser.push(b""));
    events.extend(parser.push(b"\ndata: two\r\n\r\n"));
    assert_eq!(
        events,
        [quorum::llm::sse::SseEvent {
            event: None,
            data: "one\ntwo".into(),
            id: None,
        }]
    );
}

/// Found by `scripts/fuzz.sh`: a last line cut inside a character whose
/// text up to the cut is a whole event of an unknown type is an error
/// naming that line (the test's own reading of the line was wrong).
#[test]
fn regression_transcript_a_cut_last_line_that_reads_as_an_unknown_event() {
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl");
    let header = std::fs::read_to_string(demo).unwrap();
    let header = header.lines().next().unwrap();
    let mut bytes = format!("{header}\n{{\"t\":0,\"type\":\"mystery\"}}").into_bytes();
    bytes.push(0xe2);
    check_transcript(&bytes).unwrap();
}
