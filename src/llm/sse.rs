//! An incremental server-sent-events parser: bytes in, in whatever chunks
//! the network hands them over, complete events out.
//!
//! It follows the WHATWG event-stream rules where they matter here: lines
//! end with CRLF, LF or CR; a line starting with `:` is a comment; `field:
//! value` drops one space after the colon; several `data:` lines are joined
//! with `\n`; a blank line dispatches the event, and only when it had data.
//! Unlike a browser, it dispatches an event left without its blank line
//! when the stream ends cleanly, in [`SseParser::finish`] (some servers
//! close right after their last `data:` line); a cut stream never calls it.
//! And an `error: DATA` line, as older llama.cpp servers send their errors,
//! is an `error` event with that data.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, if the event had one.
    pub event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
    /// The `id:` field, if the event had one.
    pub id: Option<String>,
}

/// A line longer than this is a broken or hostile server; it is cut there.
const MAX_LINE: usize = 16 << 20;

#[derive(Debug, Default)]
pub struct SseParser {
    /// The unfinished line's bytes (decoded once the line ends, so a UTF-8
    /// character split across chunks survives).
    line: Vec<u8>,
    /// The last byte seen was a CR: a LF right after it ends no new line.
    after_cr: bool,
    /// Still at the very start of the stream (a BOM is dropped there).
    at_start: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    id: Option<String>,
}

impl SseParser {
    pub fn new() -> Self {
        Self {
            at_start: true,
            ..Self::default()
        }
    }

    /// Feeds the next bytes; returns the events they completed.
    pub fn push(&mut self, mut bytes: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        if self.at_start {
            // Wait for enough bytes to tell whether a BOM starts the stream.
            let bom = b"\xEF\xBB\xBF";
            let have = self.line.len() + bytes.len();
            let mut head = self.line.clone();
            head.extend_from_slice(&bytes[..bytes.len().min(3)]);
            if have < 3 && bom.starts_with(&head) {
                self.line = head;
                return out;
            }
            self.at_start = false;
            let pending = std::mem::take(&mut self.line);
            let mut joined = pending;
            joined.extend_from_slice(bytes);
            let rest = joined.strip_prefix(bom.as_slice()).unwrap_or(&joined);
            self.feed(rest, &mut out);
            return out;
        }
        // An empty read tells nothing: a CR before it may still be half
        // of a CRLF.
        if bytes.is_empty() {
            return out;
        }
        if self.after_cr && bytes.first() == Some(&b'\n') {
            bytes = &bytes[1..];
        }
        self.after_cr = false;
        self.feed(bytes, &mut out);
        out
    }

    fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        let mut i = 0;
        while i < bytes.len() {
            let Some(end) = bytes[i..].iter().position(|&b| b == b'\n' || b == b'\r') else {
                let room = MAX_LINE.saturating_sub(self.line.len());
                let take = (bytes.len() - i).min(room);
                self.line.extend_from_slice(&bytes[i..i + take]);
                break;
            };
            let end = i + end;
            let room = MAX_LINE.saturating_sub(self.line.len());
            self.line
                .extend_from_slice(&bytes[i..end.min(i.saturating_add(room))]);
            let line = std::mem::take(&mut self.line);
            if let Some(event) = self.line_done(&line) {
                out.push(event);
            }
            i = end + 1;
            if bytes[end] == b'\r' {
                match bytes.get(i) {
                    Some(b'\n') => i += 1,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
    }

    /// Ends a clean stream: dispatches the event that its last lines began.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let line = std::mem::take(&mut self.line);
        self.at_start = false;
        self.after_cr = false;
        if !line.is_empty()
            && let Some(event) = self.line_done(&line)
        {
            return Some(event);
        }
        self.dispatch()
    }

    fn line_done(&mut self, line: &[u8]) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return None;
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (&*line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            // llama.cpp's server long sent its stream errors as an `error:`
            // line: an `error` event with that data.
            "data" | "error" => {
                if field == "error" {
                    self.event = Some("error".to_string());
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.id = Some(value.to_string()),
            // `retry:` and unknown fields.
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        let id = self.id.take();
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(SseEvent {
            event,
            data: std::mem::take(&mut self.data),
            id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_string),
            data: data.to_string(),
            id: None,
        }
    }

    /// Events of `input` fed whole, and then fed one byte at a time.
    fn parse(input: &str) -> (Vec<SseEvent>, Option<SseEvent>) {
        let mut p = SseParser::new();
        let events = p.push(input.as_bytes());
        let last = p.finish();
        let mut q = SseParser::new();
        let mut bytewise = Vec::new();
        for b in input.as_bytes() {
            bytewise.extend(q.push(std::slice::from_ref(b)));
        }
        assert_eq!(bytewise, events, "byte by byte differs for {input:?}");
        assert_eq!(q.finish(), last);
        (events, last)
    }

    #[test]
    fn fields_comments_and_multiline_data() {
        let (events, last) = parse(
            ": a comment\n\
             event: message_start\n\
             data: {\"a\":1}\n\
             \n\
             data: one\n\
             data:two\n\
             data:  three\n\
             id: 7\n\
             retry: 100\n\
             \n",
        );
        assert_eq!(
            events,
            vec![
                ev(Some("message_start"), "{\"a\":1}"),
                SseEvent {
                    event: None,
                    data: "one\ntwo\n three".into(),
                    id: Some("7".into()),
                },
            ]
        );
        assert_eq!(last, None);
    }

    #[test]
    fn crlf_cr_and_lf_line_ends_are_alike() {
        let lf = "event: a\ndata: 1\n\ndata: 2\ndata: 3\n\n";
        let want = vec![ev(Some("a"), "1"), ev(None, "2\n3")];
        assert_eq!(parse(lf).0, want);
        assert_eq!(parse(&lf.replace('\n', "\r\n")).0, want);
        assert_eq!(parse(&lf.replace('\n', "\r")).0, want);
        // Mixed, and a CRLF split across two chunks is one line end.
        let mut p = SseParser::new();
        assert_eq!(p.push(b"data: x\r"), vec![]);
        assert_eq!(p.push(b"\n\r"), vec![ev(None, "x")]);
        assert_eq!(p.push(b"\ndata: y\n\r\n"), vec![ev(None, "y")]);
    }

    #[test]
    fn an_event_without_its_blank_line_waits_for_a_clean_end() {
        let mut p = SseParser::new();
        assert_eq!(p.push(b"data: [DONE]"), vec![]);
        assert_eq!(p.finish(), Some(ev(None, "[DONE]")));
        let mut p = SseParser::new();
        assert_eq!(p.push(b"data: a\n"), vec![]);
        assert_eq!(p.finish(), Some(ev(None, "a")));
        assert_eq!(p.finish(), None);
    }

    #[test]
    fn events_without_data_are_not_dispatched_but_empty_data_is() {
        let (events, _) = parse("event: ping\n\ndata\n\ndata:\n\n");
        assert_eq!(events, vec![ev(None, ""), ev(None, "")]);
        // The event type does not leak into the next event.
        let (events, _) = parse("event: ping\n\ndata: x\n\n");
        assert_eq!(events, vec![ev(None, "x")]);
    }

    #[test]
    fn an_error_line_is_an_error_event() {
        let (events, _) = parse("error: {\"code\":500}\n\ndata: x\n\n");
        assert_eq!(
            events,
            vec![ev(Some("error"), "{\"code\":500}"), ev(None, "x")]
        );
    }

    #[test]
    fn utf8_split_across_chunks_and_a_bom() {
        let bytes = "\u{feff}data: héllo ✓\n\n".as_bytes();
        for cut in 0..=bytes.len() {
            let mut p = SseParser::new();
            let mut events = p.push(&bytes[..cut]);
            events.extend(p.push(&bytes[cut..]));
            assert_eq!(events, vec![ev(None, "héllo ✓")], "cut at {cut}");
        }
    }
}
