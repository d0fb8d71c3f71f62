//! What one piece of outside input may cost: caps on an agent's messages,
//! its stderr, the files it reads, and transcript lines. Each is settable
//! under `[limits]` in the config file; hitting one is a clear error that
//! names the agent or the file, never a hang.
//!
//! Fixed caps on what is kept of output that may never end (a command's, a
//! turn's final message) cut instead of failing, and say what they cut:
//! [`Tail`] keeps the newest bytes of a stream, [`push_capped`] the head of
//! a text; [`cut_note`] names what was let go.

use serde::Deserialize;

/// The longest JSON-RPC message read from an agent.
pub const MAX_FRAME: u64 = 64 * 1024 * 1024;
/// How much of an agent's latest stderr is kept, for the message when it dies.
pub const STDERR_KEEP: u64 = 64 * 1024;
/// The largest file an agent may read through quorum.
pub const MAX_READ: u64 = 10 * 1024 * 1024;
/// The longest line of a transcript.
pub const MAX_TRANSCRIPT_LINE: u64 = 64 * 1024 * 1024;

/// How much of a continued session's conversation goes back to the chat
/// model (chars, about 100,000 tokens); older turns are dropped.
pub const CONTEXT_CHARS: u64 = 400_000;

/// The most output a command keeps, the newest (each of stdout and stderr):
/// an ACP client terminal's when its agent gives no `outputByteLimit`, and
/// the internal agent's shell's.
pub const MAX_OUTPUT: usize = 8 << 20;
/// The longest final message of a turn kept, its head (an ACP agent's and
/// the internal agent's); what follows is named, not kept.
pub const MAX_FINAL_TEXT: usize = 1 << 20;

/// The `[limits]` section of the config file, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// `max_frame_bytes`: the longest message an agent may send.
    #[serde(deserialize_with = "positive")]
    pub max_frame_bytes: u64,
    /// `stderr_bytes`: how much of an agent's latest stderr is kept.
    #[serde(deserialize_with = "positive")]
    pub stderr_bytes: u64,
    /// `max_read_bytes`: the largest file an agent may read.
    #[serde(deserialize_with = "positive")]
    pub max_read_bytes: u64,
    /// `max_transcript_line_bytes`: the longest transcript line replayed.
    #[serde(deserialize_with = "positive")]
    pub max_transcript_line_bytes: u64,
    /// `context_chars`: how much of a continued session's conversation
    /// goes back to the chat model (the newest turns are kept).
    #[serde(deserialize_with = "positive")]
    pub context_chars: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_frame_bytes: MAX_FRAME,
            stderr_bytes: STDERR_KEEP,
            max_read_bytes: MAX_READ,
            max_transcript_line_bytes: MAX_TRANSCRIPT_LINE,
            context_chars: CONTEXT_CHARS,
        }
    }
}

fn positive<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let n = u64::deserialize(d)?;
    if n == 0 {
        return Err(serde::de::Error::custom("a limit must be at least 1 byte"));
    }
    Ok(n)
}

/// `bytes` for a person: "64 MB", "10 KB", "300 bytes".
pub fn size(bytes: u64) -> String {
    const KB: u64 = 1024;
    const MB: u64 = 1024 * 1024;
    if bytes >= MB && bytes.is_multiple_of(MB) {
        format!("{} MB", bytes / MB)
    } else if bytes >= KB && bytes.is_multiple_of(KB) {
        format!("{} KB", bytes / KB)
    } else {
        format!("{bytes} bytes")
    }
}

/// `bytes` for a person, roughly: "812 bytes", "2.1 KB", "3.4 MB".
pub fn approx_size(bytes: u64) -> String {
    const KB: f64 = 1024.0;
    let b = bytes as f64;
    if bytes < 1024 {
        format!("{bytes} bytes")
    } else if b < KB * KB {
        format!("{:.1} KB", b / KB)
    } else if b < KB * KB * KB {
        format!("{:.1} MB", b / (KB * KB))
    } else {
        format!("{:.1} GB", b / (KB * KB * KB))
    }
}

/// What stands in the place of `bytes` bytes cut: "… 1234 bytes cut by
/// quorum".
pub fn cut_note(bytes: u64) -> String {
    format!("… {bytes} bytes cut by quorum")
}

/// Ends `text`, the first `kept` bytes of `what`, with a line naming the
/// `cut` bytes that followed (nothing when none did): "[… 1234 bytes cut
/// by quorum: a final message keeps its first 1 MB]".
pub fn name_cut(text: &mut String, cut: u64, what: &str, kept: usize) {
    if cut > 0 {
        text.push_str(&format!(
            "\n\n[{}: {what} keeps its first {}]",
            cut_note(cut),
            size(kept as u64)
        ));
    }
}

/// Appends `more` to `text` while `text` stays within `max` bytes (cut at
/// a character boundary); the bytes that do not fit are counted in `cut`,
/// and once some were, all that follows is (`text` stays the head).
pub fn push_capped(text: &mut String, cut: &mut u64, more: &str, max: usize) {
    let room = match *cut {
        0 => max.saturating_sub(text.len()),
        _ => 0,
    };
    if more.len() <= room {
        text.push_str(more);
        return;
    }
    let mut end = room;
    while !more.is_char_boundary(end) {
        end -= 1;
    }
    text.push_str(&more[..end]);
    *cut += (more.len() - end) as u64;
}

/// The newest bytes of a stream, at most `limit` of them, and how many
/// came before them: what it holds never grows past `limit`, however much
/// goes through.
#[derive(Debug)]
pub struct Tail {
    bytes: std::collections::VecDeque<u8>,
    limit: usize,
    cut: u64,
}

impl Tail {
    pub fn new(limit: usize) -> Self {
        Self {
            bytes: std::collections::VecDeque::new(),
            limit,
            cut: 0,
        }
    }

    /// Takes in `chunk`, letting go of the oldest bytes beyond the limit.
    pub fn push(&mut self, chunk: &[u8]) {
        let chunk = match chunk.len().checked_sub(self.limit) {
            Some(skip) if skip > 0 => {
                self.cut += skip as u64;
                &chunk[skip..]
            }
            _ => chunk,
        };
        let over = (self.bytes.len() + chunk.len()).saturating_sub(self.limit);
        if over > 0 {
            self.bytes.drain(..over);
            self.cut += over as u64;
        }
        self.bytes.extend(chunk);
    }

    /// The bytes let go of so far.
    pub fn cut(&self) -> u64 {
        self.cut
    }

    /// What it kept, as text (bytes that are not UTF-8 replaced; once bytes
    /// were let go, a character they cut in two is let go too), and the
    /// bytes let go of.
    pub fn into_text(self) -> (String, u64) {
        let (mut bytes, mut cut) = (Vec::from(self.bytes), self.cut);
        if cut > 0 {
            let partial = bytes
                .iter()
                .take(3)
                .take_while(|b| (**b & 0xc0) == 0x80)
                .count();
            bytes.drain(..partial);
            cut += partial as u64;
        }
        (String::from_utf8_lossy(&bytes).into_owned(), cut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_keeps_the_newest_bytes_and_counts_the_rest() {
        let mut tail = Tail::new(8);
        tail.push(b"abc");
        assert_eq!(tail.cut(), 0);
        tail.push(b"defghij");
        assert_eq!(tail.cut(), 2);
        // A chunk longer than the limit by itself.
        tail.push(b"0123456789xy");
        assert_eq!(tail.cut(), 2 + 4 + 8);
        assert_eq!(tail.into_text(), ("456789xy".to_string(), 14));
        // A character cut in two at the start is let go of too; nothing
        // cut, nothing dropped.
        let mut tail = Tail::new(5);
        tail.push("a\u{e9}\u{e9}\u{e9}".as_bytes());
        assert_eq!(tail.into_text(), ("\u{e9}\u{e9}".to_string(), 3));
        let mut tail = Tail::new(5);
        tail.push(b"ab\xffc");
        assert_eq!(tail.into_text(), ("ab\u{fffd}c".to_string(), 0));
    }

    #[test]
    fn capped_text_keeps_its_head_at_a_character_boundary() {
        let (mut text, mut cut) = (String::new(), 0);
        push_capped(&mut text, &mut cut, "ab", 4);
        push_capped(&mut text, &mut cut, "c\u{e9}d", 4);
        assert_eq!((text.as_str(), cut), ("abc", 3));
        push_capped(&mut text, &mut cut, "more", 4);
        assert_eq!((text.as_str(), cut), ("abc", 7));
        assert_eq!(cut_note(cut), "… 7 bytes cut by quorum");
    }

    #[test]
    fn defaults_and_sizes() {
        let l: Limits = toml::from_str("max_read_bytes = 1000").unwrap();
        assert_eq!(l.max_read_bytes, 1000);
        assert_eq!(l.max_frame_bytes, MAX_FRAME);
        assert_eq!(size(MAX_FRAME), "64 MB");
        assert_eq!(size(STDERR_KEEP), "64 KB");
        assert_eq!(size(1000), "1000 bytes");
        let e = toml::from_str::<Limits>("max_read_bytes = 0").unwrap_err();
        assert!(e.to_string().contains("at least 1 byte"), "{e}");
        let e = toml::from_str::<Limits>("max_reads = 1").unwrap_err();
        assert!(e.to_string().contains("unknown field `max_reads`"), "{e}");
    }

    #[test]
    fn approx_sizes() {
        assert_eq!(approx_size(300), "300 bytes");
        assert_eq!(approx_size(312), "312 bytes");
        assert_eq!(approx_size(49_357), "48.2 KB");
        assert_eq!(approx_size(3 * 1024 * 1024 + 100_000), "3.1 MB");
        assert_eq!(approx_size(3 * 1024 * 1024 + 400_000), "3.4 MB");
    }
}
