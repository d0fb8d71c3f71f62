//! A review's findings, read from its report: the contract's HTML comment
//! before each finding's body,
//! `<!-- finding: {"file": "src/http.rs", "line": 42, "end_line": 48,
//! "severity": "red", "title": "..."} -->`, its Markdown up to the next
//! finding or the end; or, when a report has no such comment, a fenced
//! ```` ```json ```` block holding a list of such objects (models write
//! that unasked). Tolerant: a malformed finding is dropped with a notice,
//! never the review; everything kept is sanitised and bounded.
//!
//! `place` checks the findings against the reviewed tree and its diff;
//! `merge` makes a quorum's findings of its reviewers'; `check` asks
//! another reviewer about a finding and reads its answer (`verify`).

pub mod check;
pub mod merge;
pub mod place;

use serde_json::Value;

use crate::confine::sanitize::{clip, one_line, sanitize};
use crate::event::Severity;
use crate::event::finding::Finding;

/// The most findings one report keeps; the rest are dropped, with a
/// notice that says how many.
pub const MAX_FINDINGS: usize = 200;
/// The longest title kept, in characters (longer ones are cut, `…`).
pub const MAX_TITLE: usize = 200;
/// The longest body kept, in characters.
pub const MAX_BODY: usize = 4_000;
/// The longest `file` accepted, in characters.
pub const MAX_FILE: usize = 400;
/// The most notices one report raises (the rest are counted in the last).
pub const MAX_NOTICES: usize = 10;

/// What a report's findings are, and what was wrong with the others.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    pub findings: Vec<Finding>,
    /// One line each: what was dropped, and why.
    pub notices: Vec<String>,
}

impl Parsed {
    /// A notice, unless there are too many already (then counted).
    pub fn notice(&mut self, text: String) {
        self.notices.push(text);
    }

    /// Says, first (so bounding the notices never hides it), how many of
    /// `total` findings were past [`MAX_FINDINGS`] and dropped.
    fn past_the_most(&mut self, total: usize) {
        if total > MAX_FINDINGS {
            let text = format!(
                "{} findings past the first {MAX_FINDINGS} dropped",
                total - MAX_FINDINGS
            );
            self.notices.insert(0, text);
        }
    }

    /// The notices bounded to [`MAX_NOTICES`]: the last one says how many
    /// more there were.
    pub fn bounded_notices(&self) -> Vec<String> {
        if self.notices.len() <= MAX_NOTICES {
            return self.notices.clone();
        }
        let mut kept = self.notices[..MAX_NOTICES - 1].to_vec();
        kept.push(format!(
            "and {} more findings dropped",
            self.notices.len() - (MAX_NOTICES - 1)
        ));
        kept
    }
}

/// One `<!-- finding: ... -->` in a report: where it starts and ends, and
/// its JSON.
struct Marker<'a> {
    start: usize,
    end: usize,
    json: &'a str,
}

/// Every `<!-- finding: ... -->` comment of `report`, in order.
fn markers(report: &str) -> Vec<Marker<'_>> {
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(open) = report[at..].find("<!--") {
        let start = at + open;
        let inner_from = start + 4;
        let Some(close) = report[inner_from..].find("-->") else {
            break;
        };
        let inner = &report[inner_from..inner_from + close];
        let end = inner_from + close + 3;
        at = end;
        let Some((key, json)) = inner.split_once(':') else {
            continue;
        };
        if key.trim().eq_ignore_ascii_case("finding") {
            found.push(Marker {
                start,
                end,
                json: json.trim(),
            });
        }
    }
    found
}

/// The findings of a report (its severity header already stripped or
/// not: it is not a finding).
pub fn parse(report: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let markers = markers(report);
    if markers.is_empty() {
        json_blocks(report, &mut parsed);
        return parsed;
    }
    let total = markers.len();
    for (i, m) in markers.iter().enumerate().take(MAX_FINDINGS) {
        let until = markers.get(i + 1).map_or(report.len(), |next| next.start);
        let body = &report[m.end..until];
        match serde_json::from_str::<Value>(m.json)
            .map_err(|e| format!("not JSON ({e})"))
            .and_then(|v| finding_of(&v, body))
        {
            Ok(f) => parsed.findings.push(f),
            Err(why) => parsed.notice(format!("finding {} dropped: {why}", i + 1)),
        }
    }
    parsed.past_the_most(total);
    parsed
}

/// The findings of the fenced `json` blocks of a report: each a list of
/// findings (or one). A block that is not about findings is left alone.
fn json_blocks(report: &str, parsed: &mut Parsed) {
    let mut items: Vec<Value> = Vec::new();
    let mut rest = report;
    while let Some(open) = rest.find("```json") {
        let after = &rest[open + 7..];
        let Some(nl) = after.find('\n') else { break };
        let content = &after[nl + 1..];
        let close = content.find("\n```").unwrap_or(content.len());
        match serde_json::from_str::<Value>(&content[..close]) {
            Ok(Value::Array(list)) if list.iter().any(looks_like_finding) => items.extend(list),
            Ok(v) if looks_like_finding(&v) => items.push(v),
            Ok(_) => {}
            Err(_) if content[..close].contains("\"file\"") => {
                parsed.notice("a ```json block of findings is not JSON; dropped".to_string());
            }
            Err(_) => {}
        }
        rest = &content[close.min(content.len())..];
        rest = rest.strip_prefix("\n```").unwrap_or(rest);
    }
    let total = items.len();
    for (i, v) in items.iter().enumerate().take(MAX_FINDINGS) {
        let body = v.get("body").and_then(Value::as_str).unwrap_or("");
        match finding_of(v, body) {
            Ok(f) => parsed.findings.push(f),
            Err(why) => parsed.notice(format!("finding {} dropped: {why}", i + 1)),
        }
    }
    parsed.past_the_most(total);
}

fn looks_like_finding(v: &Value) -> bool {
    v.get("file").is_some() && v.get("line").is_some()
}

/// A line number: a positive integer (or one written as a string).
fn line_of(v: Option<&Value>, name: &str) -> Result<Option<u32>, String> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let n = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    match n {
        Some(n) if n >= 1 && n <= u64::from(u32::MAX) => Ok(Some(n as u32)),
        _ => Err(format!(
            "`{name}` {} is not a line number",
            clip(&one_line(&v.to_string()), 40)
        )),
    }
}

/// One finding of its JSON and its body, checked, sanitised and bounded.
fn finding_of(v: &Value, body: &str) -> Result<Finding, String> {
    if !v.is_object() {
        return Err("not a JSON object".into());
    }
    // `./src/a.rs` is `src/a.rs`: one spelling, for the merge and the diff.
    let file = v.get("file").and_then(Value::as_str).map(|f| {
        let mut f = one_line(f);
        while let Some(rest) = f.strip_prefix("./") {
            f = rest.to_string();
        }
        f
    });
    let file = match file {
        Some(f) if !f.is_empty() && f.chars().count() <= MAX_FILE => f,
        Some(f) if !f.is_empty() => {
            return Err(format!("`file` is longer than {MAX_FILE} characters"));
        }
        _ => return Err("no `file`".into()),
    };
    let line = line_of(v.get("line"), "line")?.ok_or("no `line`")?;
    let end_line = line_of(v.get("end_line"), "end_line")?.filter(|&end| end > line);
    let severity = match v.get("severity").and_then(Value::as_str) {
        Some(s) => severity_of(s).ok_or_else(|| {
            format!(
                "severity {:?} is not green, yellow or red",
                clip(&one_line(s), 20)
            )
        })?,
        None => return Err("no `severity`".into()),
    };
    let title = v
        .get("title")
        .and_then(Value::as_str)
        .map(one_line)
        .filter(|t| !t.is_empty())
        .ok_or("no `title`")?;
    Ok(Finding {
        file,
        line,
        end_line,
        severity,
        title: clip(&title, MAX_TITLE),
        body: clip(sanitize(body).trim(), MAX_BODY),
    })
}

fn severity_of(s: &str) -> Option<Severity> {
    match s.trim().to_ascii_lowercase().as_str() {
        "green" => Some(Severity::Green),
        "yellow" => Some(Severity::Yellow),
        "red" => Some(Severity::Red),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
