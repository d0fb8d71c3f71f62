//! Lines of outside input, read the one way everywhere: an agent's stdout
//! at home (`acp::transport`), both sides of quorum's proxy on a host
//! (`remote::relay`: home's lines and its agent's), and transcripts
//! (`transcript`'s readers). A line is capped: one longer than the limit is
//! reported as such, read no further (so `/dev/zero` or an agent's endless
//! line costs the limit, not all memory). Its bytes are kept as they came;
//! [`text`] makes them text, bytes that are not UTF-8 replaced (U+FFFD)
//! and reported, so one bad byte costs that byte, never the reading.
//!
//! [`read_line`] reads a `BufRead`, [`read_line_async`] a tokio
//! `AsyncBufRead`; both end in [`Line::of`], so they cut and report alike.
//! A reader that goes on past a line too long skips the rest of it with
//! [`skip_rest`] or [`skip_rest_async`] (`quorum acp`'s host, the listing
//! of transcripts).

use std::borrow::Cow;

/// A line read into the caller's buffer, as [`read_line`] left it there:
/// the line and its newline, or a line's first `max + 1` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line {
    /// It ends in a newline (a last line cut short does not).
    pub complete: bool,
    /// It is longer than the limit: what the buffer holds is cut.
    pub too_long: bool,
}

impl Line {
    /// What the read left in `buf` says of the line, for a limit of `max`
    /// bytes (its newline aside).
    pub fn of(buf: &[u8], max: u64) -> Self {
        let complete = buf.last() == Some(&b'\n');
        let body = buf.len() - usize::from(complete);
        Self {
            complete,
            too_long: body as u64 > max,
        }
    }

    /// The line in `buf` without its line end (`\n` or `\r\n`).
    pub fn body(buf: &[u8]) -> &[u8] {
        let buf = buf.strip_suffix(b"\n").unwrap_or(buf);
        buf.strip_suffix(b"\r").unwrap_or(buf)
    }
}

/// What a line buffer may keep between lines: a longer line's room is
/// given back.
pub const KEPT_BUFFER: usize = 64 * 1024;

/// Why the reading of an agent (or, on a host, of home) stopped at a line
/// over `max` bytes (after the agent's name).
pub fn too_long(max: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!(
            "sent a message over {}, read no further (max_frame_bytes under [limits] in the config)",
            super::limits::size(max)
        ),
    )
}

/// Reads the next line of `input` into `buf` (cleared first, its newline
/// kept), at most `max` bytes of it and its newline: `None` at the end of
/// the input.
pub fn read_line(
    input: &mut impl std::io::BufRead,
    buf: &mut Vec<u8>,
    max: u64,
) -> std::io::Result<Option<Line>> {
    use std::io::{BufRead as _, Read as _};
    buf.clear();
    let n = input
        .by_ref()
        .take(max.saturating_add(1))
        .read_until(b'\n', buf)?;
    Ok((n > 0).then(|| Line::of(buf, max)))
}

/// [`read_line`] for a tokio reader.
pub async fn read_line_async<R>(
    input: &mut R,
    buf: &mut Vec<u8>,
    max: u64,
) -> std::io::Result<Option<Line>>
where
    R: tokio::io::AsyncBufRead + Unpin + ?Sized,
{
    use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _};
    buf.clear();
    let n = input
        .take(max.saturating_add(1))
        .read_until(b'\n', buf)
        .await?;
    Ok((n > 0).then(|| Line::of(buf, max)))
}

/// The rest of a line [`read_line`] found too long, read into nothing:
/// whether a newline ended it (else the input did).
pub fn skip_rest(input: &mut impl std::io::BufRead) -> std::io::Result<bool> {
    loop {
        let chunk = input.fill_buf()?;
        if chunk.is_empty() {
            return Ok(false);
        }
        if let Some(i) = chunk.iter().position(|&b| b == b'\n') {
            input.consume(i + 1);
            return Ok(true);
        }
        let len = chunk.len();
        input.consume(len);
    }
}

/// [`skip_rest`] for a tokio reader.
pub async fn skip_rest_async<R>(input: &mut R) -> std::io::Result<bool>
where
    R: tokio::io::AsyncBufRead + Unpin + ?Sized,
{
    use tokio::io::AsyncBufReadExt as _;
    loop {
        let chunk = input.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(false);
        }
        if let Some(i) = chunk.iter().position(|&b| b == b'\n') {
            input.consume(i + 1);
            return Ok(true);
        }
        let len = chunk.len();
        input.consume(len);
    }
}

/// `bytes` as text, and whether any were not UTF-8 (those show as U+FFFD).
pub fn text(bytes: &[u8]) -> (Cow<'_, str>, bool) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (Cow::Borrowed(text), false),
        Err(_) => (String::from_utf8_lossy(bytes), true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both readers on the same input: each line read, and what is left
    /// in the buffer.
    fn both(input: &[u8], max: u64) -> Vec<(Line, Vec<u8>)> {
        let mut sync = Vec::new();
        let mut reader = std::io::BufReader::with_capacity(4, input);
        let mut buf = Vec::new();
        while let Some(line) = read_line(&mut reader, &mut buf, max).unwrap() {
            sync.push((line, buf.clone()));
            if line.too_long {
                break;
            }
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let r#async = runtime.block_on(async {
            let mut out = Vec::new();
            let mut reader = tokio::io::BufReader::with_capacity(4, input);
            let mut buf = Vec::new();
            while let Some(line) = read_line_async(&mut reader, &mut buf, max).await.unwrap() {
                out.push((line, buf.clone()));
                if line.too_long {
                    break;
                }
            }
            out
        });
        assert_eq!(sync, r#async, "{input:?}");
        sync
    }

    #[test]
    fn lines_are_read_alike_capped_and_kept_as_they_came() {
        let whole = |b: &[u8]| {
            (
                Line {
                    complete: true,
                    too_long: false,
                },
                b.to_vec(),
            )
        };
        assert_eq!(
            both(b"one\r\ncaf\xff\n\nlast", 5),
            [
                whole(b"one\r\n"),
                whole(b"caf\xff\n"),
                whole(b"\n"),
                (
                    Line {
                        complete: false,
                        too_long: false
                    },
                    b"last".to_vec()
                ),
            ]
        );
        // At the limit, and past it: read no further than the limit and a
        // byte.
        assert_eq!(both(b"12345\n", 5), [whole(b"12345\n")]);
        let over = Line {
            complete: false,
            too_long: true,
        };
        assert_eq!(both(b"123456\nnext\n", 5), [(over, b"123456".to_vec())]);
        assert_eq!(both(b"", 5), []);
        assert_eq!(Line::body(b"one\r\n"), b"one");
        assert_eq!(Line::body(b"one\n"), b"one");
        assert_eq!(Line::body(b"one"), b"one");
    }

    #[test]
    fn text_replaces_bytes_that_are_not_utf8_and_says_so() {
        assert_eq!(text(b"caf\xc3\xa9"), (Cow::Borrowed("caf\u{e9}"), false));
        let (shown, bad) = text(b"caf\xff after");
        assert_eq!((shown.as_ref(), bad), ("caf\u{fffd} after", true));
    }
}
