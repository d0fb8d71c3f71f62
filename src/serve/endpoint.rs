//! A session's MCP server, reached privately: a Unix socket in a directory
//! of its own (mode 0700; the socket 0600) under the runtime or state
//! directory, and a secret made for the session (32 random bytes, in hex)
//! that a client must send as its first line before any MCP traffic; a
//! client that does not is dropped, and the log says so. Clients of
//! another user are dropped before they can say anything.
//!
//! An agent reaches it through `quorum mcp-connect`, which it starts as a
//! stdio MCP server ([`Endpoint::server_spec`]): the socket and the secret
//! travel in its environment ([`SOCKET_ENV`], [`SECRET_ENV`]), never on a
//! command line where `ps` shows them. The endpoint ends with its value
//! (the session's end): its clients are dropped and the socket and its
//! directory removed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::BufReader;
use tokio::net::{UnixListener, UnixStream};

use super::mcp::{McpOptions, QuorumMcp};
use crate::acp::mcp::{McpServerSpec, McpTransport};
use crate::confine::private::{hex, random_bytes};
use crate::engine::Session;

/// The variable `quorum mcp-connect` finds the socket's path in.
pub use crate::acp::mcp::SOCKET_ENV;
/// The variable `quorum mcp-connect` finds the secret in.
pub const SECRET_ENV: &str = "QUORUM_MCP_SECRET";
/// The subcommand that joins its stdio to an endpoint.
pub const CONNECT_COMMAND: &str = "mcp-connect";
/// The name agents know the server by (their tools `mcp__quorum__subagent`).
pub const SERVER_NAME: &str = "quorum";
/// How long a client has to send the secret.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest first line read (the secret is 64 characters).
const MAX_HELLO: u64 = 256;
/// Unix socket paths are short (108 bytes on Linux, the NUL included).
const MAX_SOCKET_PATH: usize = 100;

/// A session's MCP server on a private socket. Dropping it ends it.
pub struct Endpoint {
    dir: PathBuf,
    socket: PathBuf,
    secret: String,
    /// Accepts clients; aborted (with every client it serves) on drop.
    listener: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("Endpoint")
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// Starts serving `session`'s tools (as [`QuorumMcp::for_session`]).
    /// Needs a tokio runtime.
    pub fn for_session(session: &Session, options: McpOptions) -> std::io::Result<Self> {
        Self::start(QuorumMcp::for_session(session, options))
    }

    /// Starts serving `server` on a new private socket, under the first of
    /// `$XDG_RUNTIME_DIR/quorum`, the state directory's `run/` and the
    /// temporary directory where a socket's path fits.
    pub fn start(server: QuorumMcp) -> std::io::Result<Self> {
        let mut bases = Vec::new();
        if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
            bases.push(PathBuf::from(runtime).join("quorum"));
        }
        if let Some(state) = crate::engine::config::state_dir() {
            bases.push(state.join("run"));
        }
        bases.push(std::env::temp_dir());
        let mut last = None;
        for base in bases {
            match Self::start_in(&base, server.clone()) {
                Ok(endpoint) => return Ok(endpoint),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no directory for the MCP socket")))
    }

    /// Starts serving `server` on a new private socket under `base`.
    pub fn start_in(base: &Path, server: QuorumMcp) -> std::io::Result<Self> {
        let secret = hex(&random_bytes::<32>()?);
        // The longest name the directory can get (8 random hex digits).
        let longest = base
            .join(format!("mcp-{}-00000000", std::process::id()))
            .join("s");
        if longest.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(std::io::Error::other(format!(
                "{}: too long a path for a socket",
                longest.display()
            )));
        }
        crate::confine::private::dir(base)?;
        // A directory of its own, new (never one someone made before).
        let dir = crate::confine::private::new_dir(base, "mcp")?;
        let socket = dir.join("s");
        let listener = match bind(&socket) {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                return Err(e);
            }
        };
        let owner = {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(&dir)?.uid()
        };
        tracing::info!(socket = %socket.display(), "MCP endpoint listening");
        let listener = tokio::spawn(accept(listener, server, secret.clone(), owner));
        Ok(Self {
            dir,
            socket,
            secret,
            listener,
        })
    }

    /// The socket clients connect to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The secret a client sends first.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The environment `quorum mcp-connect` reaches this endpoint with.
    pub fn env(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (
                SOCKET_ENV.to_string(),
                self.socket.to_string_lossy().into_owned(),
            ),
            (SECRET_ENV.to_string(), self.secret.clone()),
        ])
    }

    /// The stdio MCP server an agent starts to reach this endpoint:
    /// `quorum` (this very binary) `mcp-connect`, the socket and the
    /// secret in its environment; named [`SERVER_NAME`].
    pub fn server_spec(&self) -> std::io::Result<McpServerSpec> {
        let exe = std::env::current_exe()?;
        Ok(McpServerSpec {
            name: SERVER_NAME.to_string(),
            transport: McpTransport::Stdio {
                command: exe.to_string_lossy().into_owned(),
                args: vec![CONNECT_COMMAND.to_string()],
                env: self.env(),
            },
        })
    }

    /// [`Endpoint::server_spec`] as ACP's `session/new` takes it
    /// (`McpServer::Stdio`).
    pub fn mcp_server(&self) -> std::io::Result<agent_client_protocol::v1::schema::McpServer> {
        Ok(self.server_spec()?.wire())
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.listener.abort();
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Binds `socket`, readable and writable by its owner alone.
fn bind(socket: &Path) -> std::io::Result<UnixListener> {
    let listener = UnixListener::bind(socket)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Accepts clients until aborted; each is served in a task that ends with
/// this one.
async fn accept(listener: UnixListener, server: QuorumMcp, secret: String, owner: u32) {
    let mut clients = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let server = server.clone();
                    let secret = secret.clone();
                    clients.spawn(async move {
                        if let Some((read, write)) = admit(stream, &secret, owner).await
                            && let Err(e) = server.serve_on((read, write)).await
                        {
                            tracing::info!("MCP client ended: {}", super::causes(&e));
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!("MCP endpoint: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = clients.join_next(), if !clients.is_empty() => {}
        }
    }
}

type Halves = (
    BufReader<tokio::net::unix::OwnedReadHalf>,
    tokio::net::unix::OwnedWriteHalf,
);

/// A client of the socket's owner that sends the secret first, else
/// `None` (dropped, and logged).
async fn admit(stream: UnixStream, secret: &str, owner: u32) -> Option<Halves> {
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == owner => {}
        Ok(cred) => {
            tracing::warn!(
                uid = cred.uid(),
                pid = cred.pid(),
                "MCP endpoint: a client of another user was dropped"
            );
            return None;
        }
        Err(e) => {
            tracing::warn!("MCP endpoint: a client whose user cannot be told was dropped: {e}");
            return None;
        }
    }
    let pid = stream.peer_cred().ok().and_then(|c| c.pid());
    let (read, write) = stream.into_split();
    let mut read = BufReader::new(read);
    let mut line = Vec::new();
    let hello = tokio::time::timeout(
        HELLO_TIMEOUT,
        crate::confine::lines::read_line_async(&mut read, &mut line, MAX_HELLO),
    )
    .await;
    let said = match hello {
        Ok(Ok(_)) => crate::confine::lines::Line::body(&line),
        Ok(Err(e)) => {
            tracing::warn!(?pid, "MCP endpoint: a client was dropped: {e}");
            return None;
        }
        Err(_) => {
            tracing::warn!(
                ?pid,
                "MCP endpoint: a client sent no secret in time and was dropped"
            );
            return None;
        }
    };
    if !same(said, secret.as_bytes()) {
        tracing::warn!(
            ?pid,
            "MCP endpoint: a client without the session's secret was dropped"
        );
        return None;
    }
    Some((read, write))
}

/// Compares two secrets in a time that does not tell where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"ab", b"abc"));
        assert!(!same(b"", b"abc"));
        assert_eq!(hex(&[0, 15, 255]), "000fff");
        let a = hex(&random_bytes::<32>().unwrap());
        assert_eq!(a.len(), 64);
        assert_ne!(a, hex(&random_bytes::<32>().unwrap()));
    }
}
