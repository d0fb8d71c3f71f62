//! The recorder's last line of defence: a line that would be longer than
//! the reader takes (`max_transcript_line_bytes`) is made to fit by cutting
//! its longest strings, each one's head kept and what was cut named ("[…
//! 1234 bytes cut by quorum]"), so every line recorded reads back. An
//! event that cutting strings cannot bring under the limit (one made of
//! many short ones) is recorded as a warning notice that says so.
//!
//! What is cut before it is recorded (an agent's final message, a
//! command's output) is capped where it is gathered; this is for the rest,
//! whatever an agent sends that no cap foresaw.

use serde_json::Value;

use crate::confine::limits::cut_note;

/// What a cut string ends with: " [… N bytes cut by quorum]".
fn note(cut: u64) -> String {
    format!(" [{}]", cut_note(cut))
}

/// The longest a note can be, as JSON.
fn note_max() -> usize {
    note(u64::MAX).len()
}

/// Appends `value` to `out` as one line, its newline too, made to fit
/// `max` bytes; the length it had when it had to be.
pub(super) fn push_line(
    out: &mut Vec<u8>,
    value: &impl serde::Serialize,
    max: u64,
) -> std::io::Result<Option<usize>> {
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    let start = out.len();
    serde_json::to_writer(&mut *out, value)?;
    let len = out.len() - start;
    let cut = (len > max).then(|| {
        out.truncate(start);
        out.extend_from_slice(&fit(value, len, max));
        len
    });
    out.push(b'\n');
    Ok(cut)
}

/// `value` (whose line, `len` bytes, is over `max`) as a line of at most
/// `max` bytes, without its newline: its longest strings cut; if that
/// cannot do, a notice (of the same time) saying the event was not
/// recorded.
fn fit(value: &impl serde::Serialize, len: usize, max: usize) -> Vec<u8> {
    let Ok(mut value) = serde_json::to_value(value) else {
        return notice(&Value::Null, len, max);
    };
    let mut lens = Vec::new();
    strings(&value, &mut lens);
    if let Some(keep) = budget(&lens, len - max.min(len)) {
        cut_strings(&mut value, keep);
        let line = line(&value);
        if line.len() <= max {
            return line;
        }
    }
    notice(&value, len, max)
}

/// `value` as a line, its time (`t`) first as the recorder writes it (the
/// reader's fast paths look for it there).
fn line(value: &Value) -> Vec<u8> {
    let Value::Object(map) = value else {
        return serde_json::to_vec(value).unwrap_or_default();
    };
    let mut out = b"{".to_vec();
    let t = map.get_key_value("t");
    for (i, (key, v)) in t
        .into_iter()
        .chain(map.iter().filter(|(k, _)| *k != "t"))
        .enumerate()
    {
        if i > 0 {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut out, key);
        out.push(b':');
        let _ = serde_json::to_writer(&mut out, v);
    }
    out.push(b'}');
    out
}

/// The notice recorded in place of an event that cannot be made to fit.
fn notice(value: &Value, len: usize, max: usize) -> Vec<u8> {
    let kind = value.get("type").and_then(Value::as_str).unwrap_or("?");
    let kind: String = kind.chars().take(64).collect();
    let mut map = serde_json::Map::new();
    map.insert(
        "t".into(),
        value.get("t").cloned().unwrap_or(Value::from(0)),
    );
    map.insert("type".into(), "notice".into());
    map.insert("level".into(), "warning".into());
    map.insert(
        "text".into(),
        format!(
            "quorum did not record a {kind:?} event: its line was {len} bytes, over the \
             transcript's limit of {max} (max_transcript_line_bytes under [limits])"
        )
        .into(),
    );
    line(&Value::Object(map))
}

/// The length, as JSON and without its quotes, of every string in `value`
/// (object keys aside), in the order [`cut_strings`] visits them.
fn strings(value: &Value, lens: &mut Vec<usize>) {
    match value {
        Value::String(s) => lens.push(escaped(s)),
        Value::Array(items) => items.iter().for_each(|v| strings(v, lens)),
        Value::Object(map) => map.values().for_each(|v| strings(v, lens)),
        _ => {}
    }
}

/// The bytes `c` takes in a JSON string as serde_json writes it.
fn escaped_char(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

fn escaped(s: &str) -> usize {
    s.chars().map(escaped_char).sum()
}

/// The most (as JSON) each string may keep so that cutting every longer
/// one, its note added, saves at least `need` bytes: the largest such, so
/// the shorter strings are left whole. `None` if cutting all of them to
/// their note would not save enough.
fn budget(lens: &[usize], need: usize) -> Option<usize> {
    let note = note_max();
    let saved = |keep: usize| -> usize {
        lens.iter()
            .filter(|&&l| l > keep + note)
            .map(|&l| l - keep - note)
            .sum()
    };
    if saved(0) < need {
        return None;
    }
    let (mut lo, mut hi) = (0, lens.iter().copied().max().unwrap_or(0));
    // saved(lo) >= need always; find the largest such.
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if saved(mid) >= need {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

/// Cuts every string of `value` longer than `keep` and a note to its first
/// `keep` bytes (as JSON, at a character boundary) and the note.
fn cut_strings(value: &mut Value, keep: usize) {
    match value {
        Value::String(s) => {
            if escaped(s) <= keep + note_max() {
                return;
            }
            let mut used = 0;
            let mut end = 0;
            for (i, c) in s.char_indices() {
                used += escaped_char(c);
                if used > keep {
                    break;
                }
                end = i + c.len_utf8();
            }
            let cut = (s.len() - end) as u64;
            s.truncate(end);
            s.push_str(&note(cut));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| cut_strings(v, keep)),
        Value::Object(map) => map.values_mut().for_each(|v| cut_strings(v, keep)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Activity, Event, Stamped};

    fn fitted(event: &Stamped, max: usize) -> (String, Stamped) {
        let len = serde_json::to_vec(event).unwrap().len();
        let line = String::from_utf8(fit(event, len, max)).unwrap();
        assert!(line.len() <= max, "{} > {max}", line.len());
        let back = super::super::reader::parse_event(std::path::Path::new("t"), 1, &line)
            .unwrap_or_else(|e| panic!("{e}: {line}"));
        (line, back)
    }

    #[test]
    fn the_longest_strings_are_cut_and_named_and_the_line_reads_back() {
        let event = Stamped::new(
            7,
            Event::SubagentFinished {
                call_id: "call-1".into(),
                output: format!("{}{}", "a".repeat(5000), "\"".repeat(1000)),
                stop_reason: crate::event::StopReason::EndTurn,
                severity: None,
                findings: Vec::new(),
            },
        );
        let (line, back) = fitted(&event, 1000);
        assert!(line.starts_with("{\"t\":7,"), "{line}");
        let Event::SubagentFinished {
            call_id, output, ..
        } = back.event
        else {
            panic!("{line}")
        };
        assert_eq!(back.t, 7);
        assert_eq!(call_id, "call-1");
        assert!(output.starts_with("aaaa"), "{output}");
        let kept = output.find(" [").unwrap();
        assert_eq!(
            &output[kept..],
            format!(" [… {} bytes cut by quorum]", 6000 - kept)
        );
        // Two long strings: both cut, to the same length, the short one left.
        let event = Stamped::new(
            8,
            Event::SubagentActivity {
                call_id: "c".into(),
                activity: Activity::ToolCall {
                    id: "t".repeat(3000),
                    title: "é".repeat(3000),
                    status: Default::default(),
                    detail: Default::default(),
                },
            },
        );
        let (line, back) = fitted(&event, 2000);
        let Event::SubagentActivity {
            activity: Activity::ToolCall { id, title, .. },
            ..
        } = back.event
        else {
            panic!("{line}")
        };
        assert!(id.ends_with(" bytes cut by quorum]") && title.ends_with("cut by quorum]"));
        let head = |s: &str| s.find(" [").unwrap();
        assert!(head(&id).abs_diff(head(&title)) <= 2, "{id} {title}");
    }

    #[test]
    fn an_event_of_many_short_strings_becomes_a_notice() {
        let event = Stamped::new(
            9,
            Event::SessionInfo {
                model: None,
                agents: vec!["agent".to_string(); 1000],
            },
        );
        let (line, back) = fitted(&event, 500);
        assert_eq!(back.t, 9);
        let Event::Notice { text, .. } = back.event else {
            panic!("{line}")
        };
        assert!(
            text.starts_with("quorum did not record a \"session_info\" event: its line was"),
            "{text}"
        );
    }
}
