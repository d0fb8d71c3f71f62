//! Reading a transcript from a moment on, without reading what came
//! before: the file is bisected on the `t` each event line starts with
//! (the recorder writes it first, and one session's clock never goes
//! back, a continued session's included), then read forward from there.
//! What reads back an old box's detail (the TUI, when the person opens a
//! box whose detail was let go) costs the span it reads, not the session.

use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom};
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::TranscriptError;
use super::reader::{Line, next_line, parse_event, parse_header};
use crate::event::Stamped;

/// Below this many bytes the bisection stops and the rest is read.
const SCAN: u64 = 64 * 1024;

/// Hands `each` the events of the transcript at `path` stamped at `from`
/// or later, in order, until it says to stop or the file ends. A version
/// 1 transcript (whose board snapshots are made by reading it all) is
/// read from its start.
pub fn read_since(
    path: &Path,
    from: u64,
    max_line: u64,
    each: &mut dyn FnMut(Stamped) -> ControlFlow<()>,
) -> Result<(), TranscriptError> {
    let io = |source| TranscriptError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let mut input = BufReader::with_capacity(64 * 1024, &file);
    let mut line = Vec::new();
    next_line(&mut input, &mut line, max_line).map_err(io)?;
    let header = parse_header(path, &String::from_utf8_lossy(&line))?;
    if header.version < 2 {
        let mut done = false;
        super::read_each(path, max_line, &mut |event| {
            if !done && event.t >= from {
                done = each(event).is_break();
            }
        })?;
        return Ok(());
    }
    let start = line.len() as u64;
    let len = file.metadata().map_err(io)?.len();
    let at = bisect(&file, start, len, from).map_err(io)?;
    input.seek(SeekFrom::Start(at)).map_err(io)?;
    while let Some(Line { complete, too_long }) =
        next_line(&mut input, &mut line, max_line).map_err(io)?
    {
        if too_long {
            return Err(TranscriptError::LineTooLong {
                path: path.to_path_buf(),
                line: 0,
                limit: max_line,
            });
        }
        let body = line.strip_suffix(b"\n").unwrap_or(&line);
        if stamp(body).is_some_and(|t| t < from) || body.trim_ascii().is_empty() {
            continue;
        }
        let Ok(text) = std::str::from_utf8(body) else {
            // A last line cut short, as a write cut by `kill -9` leaves it.
            if complete {
                return Err(TranscriptError::NotUtf8 {
                    path: path.to_path_buf(),
                    line: 0,
                    column: 0,
                });
            }
            return Ok(());
        };
        match parse_event(path, 0, text) {
            Ok(event) if event.t >= from => {
                if each(event).is_break() {
                    return Ok(());
                }
            }
            Ok(_) => {}
            Err(_) if !complete => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A line start at or before the first event line stamped `from` or
/// later, found by bisecting `[lo, hi)`: `lo` is the first event line.
fn bisect(file: &File, mut lo: u64, mut hi: u64, from: u64) -> std::io::Result<u64> {
    while hi - lo > SCAN {
        let mid = lo + (hi - lo) / 2;
        match line_at(file, mid, hi)? {
            Some((s, Some(t))) if t < from => lo = s,
            Some((_, Some(_))) | None => hi = mid,
            // A line that does not start with its stamp: read from `lo`.
            Some((_, None)) => break,
        }
    }
    Ok(lo)
}

/// The first line starting after `pos` (and before `hi`), with its stamp.
fn line_at(file: &File, pos: u64, hi: u64) -> std::io::Result<Option<(u64, Option<u64>)>> {
    let mut buf = [0u8; 4096];
    let mut at = pos;
    let start = loop {
        if at >= hi {
            return Ok(None);
        }
        let n = file.read_at(&mut buf, at)?;
        if n == 0 {
            return Ok(None);
        }
        if let Some(i) = buf[..n].iter().position(|&b| b == b'\n') {
            break at + i as u64 + 1;
        }
        at += n as u64;
    };
    if start >= hi {
        return Ok(None);
    }
    let n = file.read_at(&mut buf[..64], start)?;
    Ok(Some((start, stamp(&buf[..n]))))
}

/// The `t` an event line starts with (`{"t":123,`), as the recorder
/// writes it; `None` for a line written otherwise.
fn stamp(line: &[u8]) -> Option<u64> {
    let digits = line.strip_prefix(b"{\"t\":")?;
    let end = digits.iter().position(|b| !b.is_ascii_digit())?;
    std::str::from_utf8(&digits[..end]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;

    fn session(dir: &Path, events: &[(u64, &str)]) -> std::path::PathBuf {
        let path = dir.join("s.jsonl");
        let mut text = String::from(
            "{\"format\":\"quorum-transcript\",\"version\":2,\"quorum_version\":\"0\",\"cwd\":\"/\",\"started_at\":\"x\",\"terminal\":{\"cols\":80,\"rows\":24}}\n",
        );
        for (t, said) in events {
            text.push_str(&format!(
                "{{\"t\":{t},\"type\":\"user_message\",\"text\":\"{said}\"}}\n"
            ));
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    fn said_since(path: &Path, from: u64, stop_after: usize) -> Vec<(u64, String)> {
        let mut got = Vec::new();
        read_since(path, from, 1 << 20, &mut |e| {
            if let Event::UserMessage { text } = e.event {
                got.push((e.t, text));
            }
            if got.len() == stop_after {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
        got
    }

    #[test]
    fn reads_from_the_first_event_at_or_after_the_moment() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        // Long enough to bisect: many lines, several at the same moment.
        let events: Vec<(u64, String)> = (0..20_000u64).map(|i| (i / 3, format!("m{i}"))).collect();
        let refs: Vec<(u64, &str)> = events.iter().map(|(t, s)| (*t, s.as_str())).collect();
        let path = session(dir, &refs);
        assert!(std::fs::metadata(&path).unwrap().len() > 10 * SCAN);
        let got = said_since(&path, 5000, 4);
        let want: Vec<(u64, String)> = [15000, 15001, 15002, 15003]
            .iter()
            .map(|&i| (i as u64 / 3, format!("m{i}")))
            .collect();
        assert_eq!(got, want);
        assert_eq!(said_since(&path, 0, 1), vec![(0, "m0".to_string())]);
        assert!(said_since(&path, 7000, 1).is_empty());
    }

    #[test]
    fn a_last_line_cut_short_ends_the_read() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let path = session(dir, &[(1, "a"), (2, "b")]);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, b"{\"t\":3,\"type\":\"user_mess").unwrap();
        assert_eq!(said_since(&path, 2, 10), vec![(2, "b".to_string())]);
    }
}
