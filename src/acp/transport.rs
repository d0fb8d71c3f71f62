//! The framing of an agent's stdio: JSON-RPC lines out, lines in (bad
//! bytes replaced, over-long lines refused), and the fast path that parses
//! `session/update` notifications straight to their turn.

use std::sync::{Arc, Mutex};

use agent_client_protocol::Lines;
use agent_client_protocol::v1::schema::SessionNotification;
use futures::StreamExt;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use super::route::{Incoming, Routes, notify_all, route};

/// The agent's stdio as JSON-RPC lines.
///
/// `session/update` notifications are the stream of a turn, often one per
/// token: they are parsed here, straight into the schema's type, and handed
/// to their session's turn, instead of going through the SDK's generic
/// dispatch (several times slower per message). Everything else, and any
/// update this fast path cannot parse, goes to the SDK. Updates are still
/// delivered in order, and before the answer to the prompt that caused them.
pub(super) fn transport(
    stdin: tokio::process::ChildStdin,
    stdout: tokio::process::ChildStdout,
    reading: Reading,
) -> Lines<
    impl futures::Sink<String, Error = std::io::Error> + Send + 'static,
    impl futures::Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    let outgoing = futures::sink::unfold(stdin, async |mut stdin, line: String| {
        stdin.write_all(line.as_bytes()).await?;
        stdin.write_all(b"\n").await?;
        stdin.flush().await?;
        Ok::<_, std::io::Error>(stdin)
    });
    let Reading {
        agent,
        routes,
        max_frame,
        cause,
        meta,
        announced,
    } = reading;
    let reader = tokio::io::BufReader::with_capacity(64 * 1024, stdout);
    let mut lossy_lines = 0u64;
    // After an error nothing more is read: the connection ends, and its
    // error says why.
    let incoming = futures::stream::unfold(Some(reader), move |reader| async move {
        let mut reader = reader?;
        match read_frame(&mut reader, max_frame).await {
            Ok(Some(frame)) => Some((Ok(frame), Some(reader))),
            Ok(None) => None,
            Err(e) => Some((Err(e), None)),
        }
    })
    .filter_map(move |frame| {
        let line = match frame {
            Ok(Frame { line, lossy }) => {
                if lossy {
                    lossy_lines += 1;
                    // The first, then the 10th, 100th, ...: a stream of
                    // them does not flood the box.
                    if power_of_ten(lossy_lines) {
                        let count = if lossy_lines == 1 {
                            String::new()
                        } else {
                            format!(" ({lossy_lines} so far)")
                        };
                        let text = format!(
                            "{agent} sent a message with bytes that are not UTF-8; they show as \u{fffd}{count}"
                        );
                        tracing::warn!("{text}");
                        notify_all(&routes, &text);
                    }
                }
                Ok(line)
            }
            Err(e) => {
                let text = format!("{agent} {e}");
                tracing::warn!("{text}");
                *cause.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                Err(std::io::Error::new(e.kind(), text))
            }
        };
        let forward = match &line {
            Ok(text) => match fast_update(text) {
                Some(n) => {
                    super::meta::observe(&meta, &n.session_id.0, &n.update);
                    let left = route(
                        &routes,
                        &n.session_id.0,
                        Incoming::Update(Box::new(n.update)),
                    );
                    if let Some(Incoming::Update(update)) = left {
                        unrouted(&announced, &meta, &n.session_id.0, &update);
                    }
                    false
                }
                None => true,
            },
            Err(_) => true,
        };
        std::future::ready(forward.then_some(line))
    });
    Lines::new(outgoing, incoming)
}

/// 1, 10, 100, …
fn power_of_ten(mut n: u64) -> bool {
    while n >= 10 && n.is_multiple_of(10) {
        n /= 10;
    }
    n == 1
}

/// What the reading half of the transport needs.
pub(super) struct Reading {
    pub(super) agent: String,
    pub(super) routes: Routes,
    /// The longest message read (`max_frame_bytes`).
    pub(super) max_frame: u64,
    /// Set to the reason when reading stops on an error.
    pub(super) cause: Arc<Mutex<Option<String>>>,
    /// What the agent announces of its sessions (commands, modes, options).
    pub(super) meta: super::meta::Meta,
    /// Who is told what the agent announces while no turn of the session
    /// runs (its commands, after its session opened).
    pub(super) announced: super::meta::Listener,
}

/// An update no turn took: what it announces (commands, mode, options) is
/// told to whoever listens, so it is not known only to the next turn.
fn unrouted(
    announced: &super::meta::Listener,
    meta: &super::meta::Meta,
    session: &str,
    update: &agent_client_protocol::v1::schema::SessionUpdate,
) {
    if let Some(tell) = announced.get()
        && let Some(activity) = super::meta::announced_activity(meta, session, update)
    {
        tell(session, activity);
    }
}

/// One line of an agent's stdout; `lossy` when bytes that are not UTF-8
/// were replaced.
struct Frame {
    line: String,
    lossy: bool,
}

/// One line of the agent's stdout, without its line end. Bytes that are not
/// UTF-8 are replaced (U+FFFD) rather than ending the connection: one bad
/// byte costs at most its message. A line longer than `max` bytes is an
/// error, read no further.
async fn read_frame(
    reader: &mut tokio::io::BufReader<tokio::process::ChildStdout>,
    max: u64,
) -> std::io::Result<Option<Frame>> {
    let mut buf = Vec::new();
    let n = (&mut *reader)
        .take(max.saturating_add(1))
        .read_until(b'\n', &mut buf)
        .await?;
    if n == 0 {
        return Ok(None);
    }
    if buf.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "sent a message over {}, read no further (max_frame_bytes under [limits] in the config)",
                crate::confine::limits::size(max)
            ),
        ));
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
    }
    Ok(Some(match String::from_utf8(buf) {
        Ok(line) => Frame { line, lossy: false },
        Err(e) => Frame {
            line: String::from_utf8_lossy(e.as_bytes()).into_owned(),
            lossy: true,
        },
    }))
}

/// A `session/update` notification, if `line` is one this client knows.
fn fast_update(line: &str) -> Option<SessionNotification> {
    #[derive(serde::Deserialize)]
    struct Frame {
        method: Option<String>,
        id: Option<serde::de::IgnoredAny>,
        params: Option<SessionNotification>,
    }
    if !line.contains("\"session/update\"") {
        return None;
    }
    let frame: Frame = serde_json::from_str(line).ok()?;
    match frame {
        Frame {
            method: Some(m),
            id: None,
            params: Some(n),
        } if m == "session/update" => Some(n),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::power_of_ten;

    #[test]
    fn notices_of_bad_bytes_come_at_powers_of_ten() {
        let told: Vec<u64> = (0..=1200).filter(|&n| power_of_ten(n)).collect();
        assert_eq!(told, [1, 10, 100, 1000]);
    }
}
