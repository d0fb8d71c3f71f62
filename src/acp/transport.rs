//! The framing of an agent's stdio: JSON-RPC lines out, lines in (read as
//! `confine::lines` reads every line of outside input, and as quorum's
//! proxy on a host reads its agent's: bad bytes replaced and told, over-long
//! lines refused), and the fast paths that parse `session/update`
//! notifications straight to their turn: text chunks into their text alone,
//! other updates into the schema's type.

use std::sync::{Arc, Mutex};

use agent_client_protocol::Lines;
use agent_client_protocol::v1::schema::SessionNotification;
use tokio::io::AsyncWriteExt;

use super::pipe::Pipe;
use super::route::{Chunk, Incoming, Routes, notify_all, route};
use crate::confine::lines::{self, KEPT_BUFFER, Line, read_line_async, too_long};

/// The agent's stdio as JSON-RPC lines.
///
/// `session/update` notifications are the stream of a turn, often one per
/// token: they are parsed here (a text chunk into its text alone, another
/// update straight into the schema's type) and handed to their session's
/// turn, instead of going through the SDK's generic dispatch (several
/// times slower per message). Everything else, and any
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
    // The agent's stdout is read in a task of its own, which hands the
    // session updates to their turns itself: a streamed chunk wakes that
    // task alone, not the SDK's connection (whose future polls all its
    // parts at each wake-up). The lines for the SDK follow in order.
    // After an error nothing more is read: the connection ends, and its
    // error says why. The task ends with the agent's stdout, or as soon as
    // the connection is gone.
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<String>>(SDK_LINES);
    tokio::spawn(async move {
        let mut reader = match Pipe::new(stdout) {
            Ok(pipe) => LineReader::new(reading, pipe),
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        loop {
            let next = tokio::select! {
                next = reader.next() => next,
                () = tx.closed() => return,
            };
            let (line, end) = match next {
                Ok(Some(line)) => (Ok(line), false),
                Ok(None) => return,
                Err(e) => (Err(e), true),
            };
            if tx.send(line).await.is_err() || end {
                return;
            }
        }
    });
    let incoming = futures::stream::unfold(rx, async |mut rx| {
        let line = rx.recv().await?;
        Some((line, rx))
    });
    Lines::new(outgoing, incoming)
}

/// Lines read for the SDK that it has not taken yet: beyond them the
/// reading waits for it.
const SDK_LINES: usize = 64;

/// The reading half: lines of the agent's stdout, read into one buffer
/// kept from line to line; a line the fast paths take costs no copy of
/// itself.
struct LineReader {
    reader: tokio::io::BufReader<Pipe>,
    buf: Vec<u8>,
    reading: Reading,
    /// Lines with bytes that were not UTF-8, so far.
    lossy_lines: u64,
}

impl LineReader {
    fn new(reading: Reading, stdout: Pipe) -> Self {
        Self {
            reader: tokio::io::BufReader::with_capacity(64 * 1024, stdout),
            buf: Vec::with_capacity(1024),
            reading,
            lossy_lines: 0,
        }
    }

    /// The next line for the SDK: the lines the fast paths take (session
    /// updates, handed to their turn here) are not. `None` at the end.
    async fn next(&mut self) -> std::io::Result<Option<String>> {
        loop {
            if self.buf.capacity() > KEPT_BUFFER {
                self.buf = Vec::with_capacity(1024);
            }
            let max = self.reading.max_frame;
            let read = read_line_async(&mut self.reader, &mut self.buf, max).await;
            let e = match read {
                Ok(Some(Line {
                    too_long: false, ..
                })) => None,
                Ok(Some(_)) => Some(too_long(max)),
                Ok(None) => return Ok(None),
                Err(e) => Some(e),
            };
            if let Some(e) = e {
                let text = format!("{} {e}", self.reading.agent);
                tracing::warn!("{text}");
                *self.reading.cause.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                return Err(std::io::Error::new(e.kind(), text));
            }
            // Bytes that are not UTF-8 are replaced (U+FFFD) rather than
            // ending the connection: one bad byte costs at most its message.
            let (line, bad) = lines::text(Line::body(&self.buf));
            if bad {
                lossy(
                    &mut self.lossy_lines,
                    &self.reading.agent,
                    &self.reading.routes,
                );
            }
            if !self.reading.fast(&line) {
                return Ok(Some(line.into_owned()));
            }
            // A streamed update, and all that came read: the agent is
            // streaming, and its pipe is read again at the next beat
            // (unless it floods: `Pipe::rest`).
            if self.reader.buffer().is_empty() {
                self.reader.get_mut().rest();
            }
        }
    }
}

/// A line with bytes that are not UTF-8 from `agent` (`count` so far,
/// this one included): the first, then the 10th, 100th, ... is told in the
/// boxes of the turns on `routes` (a stream of them does not flood them).
/// Home and the proxy on a host tell it alike.
pub(super) fn lossy(count: &mut u64, agent: &str, routes: &Routes) {
    *count += 1;
    if !power_of_ten(*count) {
        return;
    }
    let so_far = if *count == 1 {
        String::new()
    } else {
        format!(" ({count} so far)")
    };
    let text = format!(
        "{agent} sent a message with bytes that are not UTF-8; they show as \u{fffd}{so_far}"
    );
    tracing::warn!("{text}");
    notify_all(routes, &text);
}

impl Reading {
    /// Hands `line` to its turn if it is a session update; false if it is
    /// for the SDK.
    fn fast(&self, line: &str) -> bool {
        // From a host's proxy (quorum itself there): what its file and
        // terminal answers would show in the box, shown here.
        if self.relayed
            && let Some((session, incoming)) = super::relayed::relayed_from(line)
        {
            let _ = route(&self.routes, &session, incoming);
            return true;
        }
        // The commonest update first, read into no more than its text.
        if let Some((session, chunk)) = fast_chunk(line) {
            let _ = route(&self.routes, &session, Incoming::Chunk(chunk));
            return true;
        }
        let Some(n) = fast_update(line) else {
            return false;
        };
        super::meta::observe(&self.meta, &n.session_id.0, &n.update);
        let left = route(
            &self.routes,
            &n.session_id.0,
            Incoming::Update(Box::new(n.update)),
        );
        if let Some(Incoming::Update(update)) = left {
            unrouted(&self.announced, &self.meta, &n.session_id.0, &update);
        }
        true
    }
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
    /// The agent runs on another machine, behind quorum's proxy there,
    /// whose `_quorum/relayed` notifications are read.
    pub(super) relayed: bool,
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

/// An `agent_message_chunk` or `agent_thought_chunk` of text, if `line`
/// is one: its session and the chunk. The commonest update, often one per
/// token, is read here into its text alone (the rest of the line
/// borrowed, not copied, and nothing of it kept), where the schema's own
/// types would buffer the whole update to find its kind. What this reads
/// is what [`fast_update`] and the translation make of the same line: any
/// line it does not take (another update, another kind of content, or a
/// line that is not what it seems) goes that way instead.
fn fast_chunk(line: &str) -> Option<(std::borrow::Cow<'_, str>, Chunk)> {
    use std::borrow::Cow;
    #[derive(serde::Deserialize)]
    struct Frame<'a> {
        #[serde(borrow)]
        method: Cow<'a, str>,
        id: Option<serde::de::IgnoredAny>,
        #[serde(borrow)]
        params: Params<'a>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Params<'a> {
        #[serde(borrow)]
        session_id: Cow<'a, str>,
        #[serde(borrow)]
        update: Update<'a>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Update<'a> {
        #[serde(borrow)]
        session_update: Cow<'a, str>,
        #[serde(borrow)]
        content: Content<'a>,
    }
    #[derive(serde::Deserialize)]
    struct Content<'a> {
        #[serde(borrow, rename = "type")]
        kind: Cow<'a, str>,
        #[serde(borrow)]
        text: Cow<'a, str>,
    }
    // Cheap looks first: most lines that are not chunks go at once.
    if !line.contains("_chunk\"") || !line.contains("\"session/update\"") {
        return None;
    }
    let frame: Frame = serde_json::from_str(line).ok()?;
    let thought = match frame.params.update.session_update.as_ref() {
        "agent_message_chunk" => false,
        "agent_thought_chunk" => true,
        _ => return None,
    };
    if frame.method != "session/update"
        || frame.id.is_some()
        || frame.params.update.content.kind != "text"
    {
        return None;
    }
    Some((
        frame.params.session_id,
        Chunk {
            text: frame.params.update.content.text.into_owned(),
            thought,
        },
    ))
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
    let frame: Frame = match serde_json::from_str(line) {
        Ok(frame) => frame,
        Err(_) => serde_json::from_value(unknown_context(line)?).ok()?,
    };
    match frame {
        Frame {
            method: Some(m),
            id: None,
            params: Some(n),
        } if m == "session/update" => Some(n),
        _ => None,
    }
}

/// A `usage_update` whose `used` is not a count (`null`), made one of 0:
/// claude-agent-acp (0.23.1) sends `"used": null` when its model's answers
/// carry no cache counts (as some Anthropic-compatible servers' do not),
/// and the schema, which wants a number, would refuse the whole update:
/// its cost with it. An unknown context counts as none; the cost is kept.
fn unknown_context(line: &str) -> Option<serde_json::Value> {
    if !line.contains("\"usage_update\"") {
        return None;
    }
    let mut frame: serde_json::Value = serde_json::from_str(line).ok()?;
    let update = frame.pointer_mut("/params/update")?.as_object_mut()?;
    let bad = update.get("used").is_none_or(|u| !u.is_u64());
    if update.get("sessionUpdate")? != "usage_update" || !bad {
        return None;
    }
    update.insert("used".into(), 0.into());
    Some(frame)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::super::translate::{self, Translated};
    use super::{fast_chunk, fast_update, power_of_ten};
    use crate::event::Activity;

    /// What the general path makes of a line: its session and activity.
    fn slow(line: &str) -> Option<(String, Translated)> {
        let n = fast_update(line)?;
        Some((n.session_id.0.to_string(), translate::update(n.update)))
    }

    /// The chunk path takes `line` as the general path does, or leaves it.
    fn same(line: &str) -> bool {
        let Some((session, chunk)) = fast_chunk(line) else {
            return false;
        };
        let activity = match chunk.thought {
            false => Activity::MessageChunk { text: chunk.text },
            true => Activity::ThoughtChunk { text: chunk.text },
        };
        assert_eq!(
            slow(line),
            Some((session.into_owned(), Translated::Activity(activity))),
            "{line}"
        );
        true
    }

    #[test]
    fn chunks_are_read_as_the_general_path_reads_them() {
        let taken = [
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hm"}}}}"#,
            // Escapes, and fields in another order.
            r#"{"params":{"update":{"content":{"text":"a\"b\n\u00e9\ud83d\ude00","type":"text"},"sessionUpdate":"agent_message_chunk"},"sessionId":"s\u0031"},"method":"session/update","jsonrpc":"2.0"}"#,
            // What the schema reads and quorum ignores: _meta, annotations,
            // a message id (even a bad one), an id of null.
            r#"{"jsonrpc":"2.0","id":null,"method":"session/update","params":{"_meta":{"a":1},"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","messageId":7,"_meta":[],"content":{"type":"text","text":"y","annotations":{"priority":0.5},"_meta":"z","extra":1}}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":""}}}}"#,
        ];
        for line in taken {
            assert!(same(line), "not taken: {line}");
        }
        let left = [
            // Not a chunk of the agent's text.
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"x"}}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"","mimeType":"image/png"}}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"t","title":"x_chunk\""}}}"#,
            // Not a notification, or not this one.
            r#"{"jsonrpc":"2.0","id":4,"method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/updates","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}},"x":"\"session/update\""}"#,
            // Not what it seems.
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":5}}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a","text":"b"}}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk"}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}"#,
        ];
        for line in left {
            assert!(!same(line), "taken: {line}");
        }
    }

    proptest! {
        /// Lines made of the parts of chunks and of what may be around
        /// them, in any order: whatever the chunk path takes, the general
        /// path reads the same way, and it takes every text chunk of the
        /// agent's.
        #[test]
        fn the_chunk_path_agrees_with_the_general_path(
            kind in prop::sample::select(vec![
                "agent_message_chunk", "agent_thought_chunk", "user_message_chunk", "plan",
            ]),
            content in prop::sample::select(vec!["text", "image", "resource_link"]),
            text in any::<String>(),
            session in "[a-z0-9\\-\u{e9}\"]{0,12}",
            id in prop::sample::select(vec!["", "\"id\":null,", "\"id\":3,"]),
            extra in prop::sample::select(vec![
                "", "\"_meta\":{\"k\":[1]},", "\"annotations\":{\"priority\":1},",
                "\"messageId\":\"m1\",", "\"text\":\"twice\",",
            ]),
            reversed in any::<bool>(),
        ) {
            let text = serde_json::to_string(&text).unwrap();
            let session = serde_json::to_string(&session).unwrap();
            let body = match content {
                "text" => format!("{extra}\"type\":\"text\",\"text\":{text}"),
                "image" => format!("\"type\":\"image\",\"data\":\"\",\"mimeType\":\"image/png\",\"text\":{text}"),
                _ => format!("\"type\":\"resource_link\",\"uri\":\"file:///a\",\"name\":\"a\",\"text\":{text}"),
            };
            let update = match reversed {
                false => format!("{{\"sessionUpdate\":\"{kind}\",\"content\":{{{body}}}}}"),
                true => format!("{{\"content\":{{{body}}},{extra}\"sessionUpdate\":\"{kind}\"}}"),
            };
            let line = format!(
                "{{\"jsonrpc\":\"2.0\",{id}\"method\":\"session/update\",\"params\":{{\"sessionId\":{session},\"update\":{update}}}}}"
            );
            let taken = same(&line);
            let chunk = matches!(kind, "agent_message_chunk" | "agent_thought_chunk");
            let valid = slow(&line).is_some();
            prop_assert_eq!(taken, chunk && content == "text" && id != "\"id\":3," && valid, "{}", line);
        }
    }

    /// claude-agent-acp's `usage_update` when its model reported no cache
    /// counts (`used` null): its cost is read, its context as 0. A good
    /// `used` is read as it is; another bad field is still refused.
    #[test]
    fn a_usage_update_of_unknown_context_keeps_its_cost() {
        use crate::event::{Cost, Usage};
        let usage = |used: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"s1","update":{{"sessionUpdate":"usage_update","used":{used},"size":200000,"cost":{{"amount":0.000105,"currency":"USD"}}}}}}}}"#
            )
        };
        let read = |used: u64| {
            Some((
                "s1".to_string(),
                Translated::Activity(Activity::Usage {
                    usage: Usage {
                        used,
                        size: Some(200_000),
                        cost: Some(Cost {
                            amount: 0.000105,
                            currency: "USD".into(),
                            estimated: false,
                        }),
                    },
                }),
            ))
        };
        assert_eq!(slow(&usage("null")), read(0));
        assert_eq!(slow(&usage("-3")), read(0));
        assert_eq!(slow(&usage("11")), read(11));
        let line = usage("null").replace(r#""used":null,"#, "");
        assert_eq!(slow(&line), read(0));
        let size = usage("null").replace("200000", "\"big\"");
        assert_eq!(slow(&size), None);
    }

    #[test]
    fn a_chunk_line_is_what_the_schema_writes() {
        // The line an agent's SDK writes, for the test above's shape.
        let n = agent_client_protocol::v1::schema::SessionNotification::new(
            "s1",
            serde_json::from_value(json!({
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "x"},
            }))
            .unwrap(),
        );
        let line = json!({"jsonrpc": "2.0", "method": "session/update", "params": n}).to_string();
        assert!(same(&line), "{line}");
    }

    #[test]
    fn notices_of_bad_bytes_come_at_powers_of_ten() {
        let told: Vec<u64> = (0..=1200).filter(|&n| power_of_ten(n)).collect();
        assert_eq!(told, [1, 10, 100, 1000]);
    }
}
