//! `quorum acp`'s stdio as JSON-RPC lines: one message a line each way.
//! A line that is not UTF-8 has its bad bytes replaced; one longer than
//! `max_frame_bytes` is skipped, and what stands in for it gets the parse
//! error JSON-RPC names (the connection goes on).

use agent_client_protocol::Lines;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;

use crate::confine::lines::{self, Line};

/// Standard input and output as the host's connection; `max` bytes a line.
pub fn stdio(
    max: u64,
) -> Lines<
    impl futures::Sink<String, Error = std::io::Error> + Send + 'static,
    impl futures::Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    let outgoing = futures::sink::unfold(tokio::io::stdout(), async |mut out, line: String| {
        out.write_all(line.as_bytes()).await?;
        out.write_all(b"\n").await?;
        out.flush().await?;
        Ok::<_, std::io::Error>(out)
    });
    let reader = tokio::io::BufReader::with_capacity(64 * 1024, tokio::io::stdin());
    let incoming = futures::stream::unfold(Some(reader), move |reader| async move {
        let mut reader = reader?;
        match read_line(&mut reader, max).await {
            Ok(Some(line)) => Some((Ok(line), Some(reader))),
            Ok(None) => None,
            Err(e) => Some((Err(e), None)),
        }
    })
    .filter(|line| std::future::ready(!matches!(line, Ok(l) if l.trim().is_empty())));
    Lines::new(outgoing, incoming)
}

/// One line, without its end; `None` at the end of input.
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    max: u64,
) -> std::io::Result<Option<String>> {
    let mut buf = Vec::new();
    let Some(line) = lines::read_line_async(reader, &mut buf, max).await? else {
        return Ok(None);
    };
    if line.too_long {
        lines::skip_rest_async(reader).await?;
        tracing::warn!("quorum acp: the host sent a message over {max} bytes; skipped");
        return Ok(Some(format!(
            "a message over {} (max_frame_bytes under [limits] in quorum's config), not read",
            crate::confine::limits::size(max)
        )));
    }
    Ok(Some(lines::text(Line::body(&buf)).0.into_owned()))
}

#[cfg(test)]
mod tests {
    use super::read_line;

    #[tokio::test]
    async fn lines_are_read_and_an_overlong_one_is_skipped() {
        let input = format!("{{\"a\":1}}\r\n{}\n{{\"b\":2}}\n", "x".repeat(100));
        let mut reader = tokio::io::BufReader::with_capacity(16, input.as_bytes());
        assert_eq!(
            read_line(&mut reader, 50).await.unwrap().unwrap(),
            "{\"a\":1}"
        );
        let skipped = read_line(&mut reader, 50).await.unwrap().unwrap();
        assert!(skipped.contains("not read"), "{skipped}");
        assert_eq!(
            read_line(&mut reader, 50).await.unwrap().unwrap(),
            "{\"b\":2}"
        );
        assert_eq!(read_line(&mut reader, 50).await.unwrap(), None);
    }
}
