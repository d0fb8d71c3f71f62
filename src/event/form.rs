//! The form an agent asks the person to fill in (ACP `elicitation/create`
//! in form mode), as quorum records and shows it: its fields, and the one
//! validation of an answer against them that the screen (before sending)
//! and the engine (before answering the agent) both use.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One field of a form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FormField {
    /// The property's name: the key of its value in the answer.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub kind: FieldKind,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
    /// The schema's default value, when it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
}

/// What a field takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FieldKind {
    String {
        /// `email`, `uri`, `date` or `date-time`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        format: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min_length: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_length: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pattern: Option<String>,
    },
    Number {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        minimum: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        maximum: Option<f64>,
    },
    Integer {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        minimum: Option<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        maximum: Option<i64>,
    },
    Boolean,
    /// One of a list of strings.
    Enum {
        options: Vec<Choice>,
    },
    /// A kind quorum cannot fill in (a future type): its type name. Left
    /// out of an answer; a required one cannot be accepted.
    Unsupported {
        of: String,
    },
    /// Some of a list of strings (a multi-select): its answer is an array.
    Multi {
        options: Vec<Choice>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min_items: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_items: Option<u64>,
    },
}

/// One choice of an enum field: its value, and the title shown for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

impl Choice {
    /// Its title, else its value.
    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.value)
    }
}

impl FormField {
    /// Its title, else its name.
    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.name)
    }

    /// Text typed into a string, number or integer field, read as its
    /// value: `None` for empty text (the field is left out).
    pub fn parse(&self, text: &str) -> Result<Option<Value>, String> {
        let trimmed = text.trim();
        match &self.kind {
            FieldKind::String { .. } if text.is_empty() => Ok(None),
            FieldKind::String { .. } => Ok(Some(Value::String(text.to_string()))),
            _ if trimmed.is_empty() => Ok(None),
            FieldKind::Number { .. } => match trimmed.parse::<f64>() {
                Ok(n) if n.is_finite() => Ok(serde_json::Number::from_f64(n).map(Value::Number)),
                _ => Err(format!("{trimmed:?} is not a number")),
            },
            FieldKind::Integer { .. } => trimmed
                .parse::<i64>()
                .map(|n| Some(Value::from(n)))
                .map_err(|_| format!("{trimmed:?} is not a whole number")),
            FieldKind::Boolean => match trimmed {
                "true" | "yes" => Ok(Some(Value::Bool(true))),
                "false" | "no" => Ok(Some(Value::Bool(false))),
                _ => Err(format!("{trimmed:?} is not yes or no")),
            },
            FieldKind::Enum { options } => options
                .iter()
                .find(|o| o.value == trimmed)
                .map(|o| Some(Value::String(o.value.clone())))
                .ok_or_else(|| format!("{trimmed:?} is not one of the choices")),
            FieldKind::Unsupported { of } => Err(format!("quorum cannot fill in a {of} field")),
            FieldKind::Multi { .. } => {
                let picked: Vec<Value> = trimmed
                    .split(',')
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
                    .map(|v| Value::String(v.to_string()))
                    .collect();
                Ok(Some(Value::Array(picked)))
            }
        }
    }

    /// Whether `value` is a good answer for this field.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        match (&self.kind, value) {
            (
                FieldKind::String {
                    format,
                    min_length,
                    max_length,
                    pattern,
                },
                Value::String(s),
            ) => {
                let len = s.chars().count();
                if let Some(min) = min_length
                    && len < *min as usize
                {
                    return Err(format!("at least {min} characters (has {len})"));
                }
                if let Some(max) = max_length
                    && len > *max as usize
                {
                    return Err(format!("at most {max} characters (has {len})"));
                }
                if let Some(pattern) = pattern
                    && let Ok(re) = regex::Regex::new(pattern)
                    && !re.is_match(s)
                {
                    return Err(format!("must match {pattern}"));
                }
                match format.as_deref() {
                    Some(f) if !format_ok(f, s) => Err(format!("not a valid {f}")),
                    _ => Ok(()),
                }
            }
            (FieldKind::Number { minimum, maximum }, Value::Number(n)) => {
                let n = n.as_f64().unwrap_or(f64::NAN);
                bounds(n, *minimum, *maximum)
            }
            (FieldKind::Integer { minimum, maximum }, Value::Number(n)) => match n.as_i64() {
                Some(i) => bounds(i, *minimum, *maximum),
                None => Err("must be a whole number".into()),
            },
            (FieldKind::Boolean, Value::Bool(_)) => Ok(()),
            (FieldKind::Enum { options }, Value::String(s)) => {
                if options.iter().any(|o| &o.value == s) {
                    Ok(())
                } else {
                    Err(format!("{s:?} is not one of the choices"))
                }
            }
            (FieldKind::Unsupported { of }, _) => {
                Err(format!("quorum cannot fill in a {of} field"))
            }
            (
                FieldKind::Multi {
                    options,
                    min_items,
                    max_items,
                },
                Value::Array(items),
            ) => {
                let mut seen: Vec<&str> = Vec::new();
                for item in items {
                    match item.as_str() {
                        Some(s) if !options.iter().any(|o| o.value == s) => {
                            return Err(format!("{s:?} is not one of the choices"));
                        }
                        Some(s) if seen.contains(&s) => return Err(format!("{s:?} twice")),
                        Some(s) => seen.push(s),
                        None => return Err("must be some of the choices".into()),
                    }
                }
                let n = items.len() as u64;
                match (min_items, max_items) {
                    (Some(min), _) if n < *min => Err(format!("pick at least {min}")),
                    (_, Some(max)) if n > *max => Err(format!("pick at most {max}")),
                    _ => Ok(()),
                }
            }
            (kind, _) => Err(format!("must be {}", kind.noun())),
        }
    }
}

impl FieldKind {
    /// What its values are, for messages: `a number`, `text`.
    pub fn noun(&self) -> &'static str {
        match self {
            FieldKind::String { .. } => "text",
            FieldKind::Number { .. } => "a number",
            FieldKind::Integer { .. } => "a whole number",
            FieldKind::Boolean => "yes or no",
            FieldKind::Enum { .. } => "one of the choices",
            FieldKind::Unsupported { .. } => "a value quorum cannot give",
            FieldKind::Multi { .. } => "some of the choices",
        }
    }
}

fn bounds<T: PartialOrd + std::fmt::Display + Copy>(
    n: T,
    minimum: Option<T>,
    maximum: Option<T>,
) -> Result<(), String> {
    // Written so that a value that compares with nothing (NaN) fails.
    let low = minimum.is_none_or(|min| n >= min);
    let high = maximum.is_none_or(|max| n <= max);
    match (minimum, maximum) {
        (Some(min), Some(max)) if !(low && high) => Err(format!("must be from {min} to {max}")),
        (Some(min), _) if !low => Err(format!("must be at least {min}")),
        (_, Some(max)) if !high => Err(format!("must be at most {max}")),
        _ => Ok(()),
    }
}

/// Whether `s` reads as the string format `format` (a light check: the
/// agent validates for itself too).
fn format_ok(format: &str, s: &str) -> bool {
    let date = |d: &str| {
        let b = d.as_bytes();
        b.len() == 10
            && b[4] == b'-'
            && b[7] == b'-'
            && b.iter()
                .enumerate()
                .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
            && matches!(d[5..7].parse::<u32>(), Ok(1..=12))
            && matches!(d[8..10].parse::<u32>(), Ok(1..=31))
    };
    match format {
        "email" => match s.split_once('@') {
            Some((user, domain)) => {
                !user.is_empty()
                    && domain.contains('.')
                    && !domain.starts_with('.')
                    && !domain.ends_with('.')
                    && !s.contains(char::is_whitespace)
            }
            None => false,
        },
        "uri" => match s.split_once(':') {
            Some((scheme, rest)) => {
                !scheme.is_empty()
                    && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                    && scheme
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                    && !rest.is_empty()
                    && !s.contains(char::is_whitespace)
            }
            None => false,
        },
        "date" => date(s),
        "date-time" => s.len() > 11 && date(&s[..10]) && matches!(&s[10..11], "T" | "t" | " "),
        _ => true,
    }
}

/// Checks an answer against the form: every required field is there, and
/// every value given is good for its field. The problems found, by field
/// name, in the form's order (a value for no field last).
pub fn validate(
    fields: &[FormField],
    content: &Map<String, Value>,
) -> Result<(), Vec<(String, String)>> {
    let mut problems = Vec::new();
    for field in fields {
        match content.get(&field.name) {
            None if field.required => problems.push((field.name.clone(), "required".to_string())),
            None => {}
            Some(value) => {
                if let Err(e) = field.check(value) {
                    problems.push((field.name.clone(), e));
                }
            }
        }
    }
    for key in content.keys() {
        if !fields.iter().any(|f| &f.name == key) {
            problems.push((key.clone(), "is not a field of the form".to_string()));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// The answer that takes every default the form gives; an error naming
/// the first required field without a good default.
pub fn defaults(fields: &[FormField]) -> Result<Map<String, Value>, String> {
    let mut content = Map::new();
    for field in fields {
        match &field.default {
            Some(value) if field.check(value).is_ok() => {
                content.insert(field.name.clone(), value.clone());
            }
            Some(_) if field.required => {
                return Err(format!(
                    "the default of the required field {:?} is not valid",
                    field.name
                ));
            }
            None if field.required => {
                return Err(format!(
                    "the required field {:?} has no default",
                    field.name
                ));
            }
            _ => {}
        }
    }
    Ok(content)
}

/// An answer's content in one line, `name=value, …` (strings quoted), for
/// the box and stderr.
pub fn summary(content: &Map<String, Value>) -> String {
    content
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(name: &str, kind: FieldKind, required: bool) -> FormField {
        FormField {
            name: name.into(),
            title: None,
            description: None,
            kind,
            required,
            default: None,
        }
    }

    fn string() -> FieldKind {
        FieldKind::String {
            format: None,
            min_length: Some(2),
            max_length: Some(5),
            pattern: None,
        }
    }

    fn form() -> Vec<FormField> {
        vec![
            field("name", string(), true),
            field(
                "count",
                FieldKind::Integer {
                    minimum: Some(1),
                    maximum: Some(10),
                },
                false,
            ),
            field(
                "ratio",
                FieldKind::Number {
                    minimum: Some(0.0),
                    maximum: None,
                },
                false,
            ),
            field("ok", FieldKind::Boolean, false),
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
                            title: None,
                        },
                    ],
                },
                true,
            ),
        ]
    }

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_good_answer_passes() {
        let content =
            map(json!({"name": "abc", "count": 3, "ratio": 0.5, "ok": true, "colour": "r"}));
        assert_eq!(validate(&form(), &content), Ok(()));
        // Optional fields may be left out.
        assert_eq!(
            validate(&form(), &map(json!({"name": "ab", "colour": "g"}))),
            Ok(())
        );
    }

    #[test]
    fn each_problem_is_named_by_its_field() {
        let content =
            map(json!({"count": 11, "ratio": -1, "ok": "yes", "colour": "b", "extra": 1}));
        let problems = validate(&form(), &content).unwrap_err();
        assert_eq!(
            problems,
            vec![
                ("name".to_string(), "required".to_string()),
                ("count".to_string(), "must be from 1 to 10".to_string()),
                ("ratio".to_string(), "must be at least 0".to_string()),
                ("ok".to_string(), "must be yes or no".to_string()),
                (
                    "colour".to_string(),
                    "\"b\" is not one of the choices".to_string()
                ),
                (
                    "extra".to_string(),
                    "is not a field of the form".to_string()
                ),
            ]
        );
        let short = validate(&form(), &map(json!({"name": "a", "colour": "r"}))).unwrap_err();
        assert_eq!(short[0].1, "at least 2 characters (has 1)");
        let long = validate(&form(), &map(json!({"name": "abcdef", "colour": "r"}))).unwrap_err();
        assert_eq!(long[0].1, "at most 5 characters (has 6)");
        let fraction = validate(
            &form(),
            &map(json!({"name": "ab", "colour": "r", "count": 1.5})),
        );
        assert_eq!(fraction.unwrap_err()[0].1, "must be a whole number");
    }

    #[test]
    fn typed_text_is_read_as_the_fields_kind() {
        let f = form();
        assert_eq!(f[0].parse(""), Ok(None));
        assert_eq!(f[0].parse(" a "), Ok(Some(json!(" a "))));
        assert_eq!(f[1].parse(" 7 "), Ok(Some(json!(7))));
        assert_eq!(
            f[1].parse("seven"),
            Err("\"seven\" is not a whole number".into())
        );
        assert_eq!(f[2].parse("2.5"), Ok(Some(json!(2.5))));
        assert_eq!(f[2].parse("NaN"), Err("\"NaN\" is not a number".into()));
        assert_eq!(f[2].parse(""), Ok(None));
    }

    #[test]
    fn formats_and_patterns_are_checked() {
        let with = |format: Option<&str>, pattern: Option<&str>| FormField {
            kind: FieldKind::String {
                format: format.map(str::to_string),
                min_length: None,
                max_length: None,
                pattern: pattern.map(str::to_string),
            },
            ..field("f", FieldKind::Boolean, true)
        };
        let email = with(Some("email"), None);
        assert!(email.check(&json!("a@b.org")).is_ok());
        assert_eq!(email.check(&json!("a@b")), Err("not a valid email".into()));
        let uri = with(Some("uri"), None);
        assert!(uri.check(&json!("https://x.org/a")).is_ok());
        assert!(uri.check(&json!("not a uri")).is_err());
        let date = with(Some("date"), None);
        assert!(date.check(&json!("2026-12-01")).is_ok());
        assert!(date.check(&json!("2026-13-01")).is_err());
        let dt = with(Some("date-time"), None);
        assert!(dt.check(&json!("2026-12-01T10:00:00Z")).is_ok());
        assert!(dt.check(&json!("2026-12-01")).is_err());
        let pattern = with(None, Some("^[a-z]+$"));
        assert!(pattern.check(&json!("abc")).is_ok());
        assert_eq!(
            pattern.check(&json!("ab1")),
            Err("must match ^[a-z]+$".into())
        );
    }

    #[test]
    fn defaults_fill_the_answer_or_say_which_field_lacks_one() {
        let mut f = form();
        assert_eq!(
            defaults(&f),
            Err("the required field \"name\" has no default".into())
        );
        f[0].default = Some(json!("abc"));
        f[4].default = Some(json!("g"));
        f[3].default = Some(json!(false));
        let content = defaults(&f).unwrap();
        assert_eq!(
            content,
            map(json!({"name": "abc", "colour": "g", "ok": false}))
        );
        assert_eq!(validate(&f, &content), Ok(()));
        f[4].default = Some(json!("b"));
        assert_eq!(
            defaults(&f),
            Err("the default of the required field \"colour\" is not valid".into())
        );
    }

    #[test]
    fn an_unsupported_field_cannot_be_given_and_blocks_when_required() {
        let f = vec![field(
            "tags",
            FieldKind::Unsupported { of: "array".into() },
            true,
        )];
        assert_eq!(
            validate(&f, &Map::new()).unwrap_err(),
            vec![("tags".to_string(), "required".to_string())]
        );
        assert!(validate(&f, &map(json!({"tags": ["a"]}))).is_err());
    }

    #[test]
    fn a_multi_select_takes_some_of_its_choices_within_its_bounds() {
        let choice = |v: &str| Choice {
            value: v.into(),
            title: None,
        };
        let f = field(
            "tags",
            FieldKind::Multi {
                options: vec![choice("a"), choice("b"), choice("c")],
                min_items: Some(1),
                max_items: Some(2),
            },
            false,
        );
        assert_eq!(f.check(&json!(["a", "c"])), Ok(()));
        assert_eq!(f.check(&json!([])), Err("pick at least 1".into()));
        assert_eq!(
            f.check(&json!(["a", "b", "c"])),
            Err("pick at most 2".into())
        );
        assert_eq!(f.check(&json!(["a", "a"])), Err("\"a\" twice".into()));
        assert_eq!(
            f.check(&json!(["z"])),
            Err("\"z\" is not one of the choices".into())
        );
        assert_eq!(
            f.check(&json!("a")),
            Err("must be some of the choices".into())
        );
        assert_eq!(f.parse("a, c"), Ok(Some(json!(["a", "c"]))));
    }

    #[test]
    fn fields_round_trip() {
        for f in form() {
            let json = serde_json::to_value(&f).unwrap();
            assert_eq!(serde_json::from_value::<FormField>(json).unwrap(), f);
        }
        let json = serde_json::to_value(&form()[1]).unwrap();
        assert_eq!(
            json,
            json!({"name": "count", "kind": {"type": "integer", "minimum": 1, "maximum": 10}})
        );
    }
}
