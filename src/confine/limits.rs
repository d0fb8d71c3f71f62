//! What one piece of outside input may cost: caps on an agent's messages,
//! its stderr, the files it reads, and transcript lines. Each is settable
//! under `[limits]` in the config file; hitting one is a clear error that
//! names the agent or the file, never a hang.

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

#[cfg(test)]
mod tests {
    use super::*;

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
