//! `quorum mcp-connect`: joins its stdio to a session's MCP endpoint
//! (`serve::endpoint`). The
//! agent that starts it as a stdio MCP server speaks MCP on its stdin and
//! stdout; it connects to the socket named in [`SOCKET_ENV`], sends the
//! secret in [`SECRET_ENV`] as its first line, then copies bytes both
//! ways until either side closes.

use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;

use crate::serve::endpoint::{SECRET_ENV, SOCKET_ENV};

/// How long the endpoint has to finish once stdin closed.
const LINGER: Duration = Duration::from_secs(10);

/// Runs `quorum mcp-connect`; the exit code.
pub async fn command() -> Result<i32> {
    let socket = std::env::var_os(SOCKET_ENV)
        .filter(|s| !s.is_empty())
        .with_context(|| {
            format!(
                "{SOCKET_ENV} is not set: quorum mcp-connect is started by quorum's conductor \
                 agent, with the socket and secret of a running session in its environment \
                 (for an MCP server of your own, use `quorum mcp`)"
            )
        })?;
    let secret = std::env::var(SECRET_ENV)
        .ok()
        .filter(|s| !s.is_empty())
        .with_context(|| format!("{SECRET_ENV} is not set"))?;
    let stream = UnixStream::connect(&socket).await.with_context(|| {
        format!(
            "cannot reach quorum's session at {} (has it ended?)",
            std::path::Path::new(&socket).display()
        )
    })?;
    let (mut from_quorum, mut to_quorum) = stream.into_split();
    to_quorum
        .write_all(format!("{secret}\n").as_bytes())
        .await
        .context("sending the session's secret")?;
    let up = async move {
        let mut stdin = tokio::io::stdin();
        let _ = tokio::io::copy(&mut stdin, &mut to_quorum).await;
        // The host is done: the session's server sees the end.
        let _ = to_quorum.shutdown().await;
    };
    let down = async move {
        let mut stdout = tokio::io::stdout();
        let _ = tokio::io::copy(&mut from_quorum, &mut stdout).await;
        let _ = stdout.flush().await;
    };
    tokio::pin!(up, down);
    tokio::select! {
        () = &mut down => {}
        () = &mut up => {
            // What the endpoint still answers goes out, for a while.
            let _ = tokio::time::timeout(LINGER, down).await;
        }
    }
    Ok(0)
}
