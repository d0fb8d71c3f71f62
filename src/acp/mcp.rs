//! The MCP servers quorum gives its agents: `[mcp_servers.NAME]` in the
//! config file (stdio: `command`, `args`, `env`; HTTP: `url`, `headers`,
//! and `transport = "sse"` for the older SSE transport), picked per agent
//! with `mcp_servers = ["a", "b"]` (default: all of them), and passed in
//! `session/new`, `session/load` and `session/resume` to an agent whose
//! capabilities accept their transport (stdio always; HTTP and SSE when its
//! `mcpCapabilities` say so).

use std::collections::BTreeMap;

use crate::config::McpServerEntry;
use agent_client_protocol::v1::schema::{
    EnvVariable, HttpHeader, McpCapabilities, McpServer, McpServerHttp, McpServerSse,
    McpServerStdio,
};

/// The variable that names the Unix socket of quorum's own endpoint to
/// `quorum mcp-connect` (`serve::endpoint`): a sandboxed agent handed that
/// server is given that socket.
pub const SOCKET_ENV: &str = "QUORUM_MCP_SOCKET";

/// One configured MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerSpec {
    pub name: String,
    pub transport: McpTransport,
}

impl McpServerSpec {
    /// The Unix socket this server reaches through [`SOCKET_ENV`] (quorum's
    /// own endpoint), if it does.
    pub fn unix_socket(&self) -> Option<std::path::PathBuf> {
        match &self.transport {
            McpTransport::Stdio { env, .. } => env.get(SOCKET_ENV).map(std::path::PathBuf::from),
            _ => None,
        }
    }
}

/// How an agent reaches an MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    /// The agent starts `command` with `args` and `env`.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    },
    /// Streamable HTTP at `url`, with `headers`.
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
    /// The older HTTP+SSE transport.
    Sse {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

/// The server `[mcp_servers.NAME]` describes, or what is wrong with it
/// (naming the field: the caller adds the file).
pub(super) fn resolve(entry: McpServerEntry, name: &str) -> Result<McpServerSpec, String> {
    let at = format!("[mcp_servers.{name}]");
    if !crate::config::is_name(name) {
        return Err(format!(
            "[mcp_servers.{name:?}]: a server's name is letters, digits, `-`, `_` and `.` only"
        ));
    }
    let transport = match (entry.command, entry.url) {
        (None, None) => {
            return Err(format!(
                "{at} needs a `command` (a stdio server) or a `url` (an HTTP server)"
            ));
        }
        (Some(_), Some(_)) => {
            return Err(format!(
                "{at} has both `command` and `url`: a server is either stdio (`command`) or HTTP (`url`)"
            ));
        }
        (Some(command), None) => {
            if command.trim().is_empty() {
                return Err(format!("{at} command is empty"));
            }
            if entry.headers.is_some() {
                return Err(format!(
                    "{at} headers: only an HTTP server (`url`) takes headers"
                ));
            }
            if entry.transport.is_some() {
                return Err(format!(
                    "{at} transport: only an HTTP server (`url`) takes a transport"
                ));
            }
            McpTransport::Stdio {
                command,
                args: entry.args.unwrap_or_default(),
                env: entry.env.unwrap_or_default(),
            }
        }
        (None, Some(url)) => {
            if entry.args.is_some() || entry.env.is_some() {
                let field = if entry.args.is_some() { "args" } else { "env" };
                return Err(format!(
                    "{at} {field}: only a stdio server (`command`) takes {field}"
                ));
            }
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!(
                    "{at} url must start with http:// or https://, got {url:?}"
                ));
            }
            let headers = entry.headers.unwrap_or_default();
            match entry.transport.as_deref() {
                None | Some("http") => McpTransport::Http { url, headers },
                Some("sse") => McpTransport::Sse { url, headers },
                Some(other) => {
                    return Err(format!(
                        "{at} transport must be \"http\" or \"sse\", got {other:?}"
                    ));
                }
            }
        }
    };
    Ok(McpServerSpec {
        name: name.to_string(),
        transport,
    })
}

impl McpServerSpec {
    /// `NAME (stdio)`, `NAME (HTTP)`, for a person.
    pub fn describe(&self) -> String {
        format!("{} ({})", self.name, self.kind())
    }

    /// What the transport is called in a notice.
    fn kind(&self) -> &'static str {
        match self.transport {
            McpTransport::Stdio { .. } => "stdio",
            McpTransport::Http { .. } => "HTTP",
            McpTransport::Sse { .. } => "SSE",
        }
    }

    /// Whether an agent with `caps` accepts it (stdio: always, as the
    /// schema asks of every agent).
    fn accepted_by(&self, caps: &McpCapabilities) -> bool {
        match self.transport {
            McpTransport::Stdio { .. } => true,
            McpTransport::Http { .. } => caps.http,
            McpTransport::Sse { .. } => caps.sse,
        }
    }

    /// A server as ACP sends it (a host's, in `session/new`); `None` for
    /// a transport quorum does not know.
    pub fn from_wire(server: &McpServer) -> Option<Self> {
        let headers = |h: &[HttpHeader]| {
            h.iter()
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect::<BTreeMap<_, _>>()
        };
        let (name, transport) = match server {
            McpServer::Stdio(s) => (
                s.name.clone(),
                McpTransport::Stdio {
                    command: s.command.display().to_string(),
                    args: s.args.clone(),
                    env: s
                        .env
                        .iter()
                        .map(|e| (e.name.clone(), e.value.clone()))
                        .collect(),
                },
            ),
            McpServer::Http(s) => (
                s.name.clone(),
                McpTransport::Http {
                    url: s.url.clone(),
                    headers: headers(&s.headers),
                },
            ),
            McpServer::Sse(s) => (
                s.name.clone(),
                McpTransport::Sse {
                    url: s.url.clone(),
                    headers: headers(&s.headers),
                },
            ),
            _ => return None,
        };
        Some(Self { name, transport })
    }

    /// It, as ACP sends it.
    pub fn wire(&self) -> McpServer {
        let headers = |h: &BTreeMap<String, String>| {
            h.iter()
                .map(|(k, v)| HttpHeader::new(k.clone(), v.clone()))
                .collect::<Vec<_>>()
        };
        match &self.transport {
            McpTransport::Stdio { command, args, env } => McpServer::Stdio(
                McpServerStdio::new(self.name.clone(), command.clone())
                    .args(args.clone())
                    .env(
                        env.iter()
                            .map(|(k, v)| EnvVariable::new(k.clone(), v.clone()))
                            .collect(),
                    ),
            ),
            McpTransport::Http { url, headers: h } => McpServer::Http(
                McpServerHttp::new(self.name.clone(), url.clone()).headers(headers(h)),
            ),
            McpTransport::Sse { url, headers: h } => McpServer::Sse(
                McpServerSse::new(self.name.clone(), url.clone()).headers(headers(h)),
            ),
        }
    }
}

/// The servers of `servers` an agent with `caps` accepts, as ACP sends
/// them, and a notice for each it cannot take.
pub(super) fn offer(
    agent: &str,
    servers: &[McpServerSpec],
    caps: &McpCapabilities,
) -> (Vec<McpServer>, Vec<String>) {
    let mut sent = Vec::new();
    let mut skipped = Vec::new();
    for server in servers {
        if server.accepted_by(caps) {
            sent.push(server.wire());
        } else {
            skipped.push(format!(
                "MCP server {} skipped: {agent} does not accept {} MCP servers (its mcpCapabilities)",
                server.name,
                server.kind()
            ));
        }
    }
    (sent, skipped)
}

/// The servers agent `agent` gets: those its `pick` names (all when it
/// names none), or the name it gives that no `[mcp_servers.NAME]` defines.
pub(super) fn pick(
    agent: &str,
    pick: Option<&[String]>,
    servers: &BTreeMap<String, McpServerSpec>,
) -> Result<Vec<McpServerSpec>, String> {
    let Some(names) = pick else {
        return Ok(servers.values().cloned().collect());
    };
    names
        .iter()
        .map(|name| {
            servers.get(name).cloned().ok_or_else(|| {
                let defined: Vec<&str> = servers.keys().map(String::as_str).collect();
                format!(
                    "[agents.{agent}] mcp_servers names {name:?}, which no [mcp_servers.{name}] defines ({})",
                    if defined.is_empty() {
                        "none is defined".to_string()
                    } else {
                        format!("defined: {}", defined.join(", "))
                    }
                )
            })
        })
        .collect()
}

/// Whether a tool call (its title, and its input as JSON text) is a call
/// of the MCP server `server`'s tools: `mcp__SERVER__TOOL` (claude), or
/// the server's name beside one of its tool names (`subagent`,
/// `subagent_status`) in the title or the input (codex names the server and
/// the tool in its MCP calls).
pub fn names_mcp_tool(title: &str, input: &str, server: &str) -> bool {
    let prefixed = format!("mcp__{server}__");
    if title.contains(&prefixed) {
        return true;
    }
    let text = format!("{title} {input}");
    text.contains(server) && text.contains("subagent")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<McpServerSpec, String> {
        let entry: McpServerEntry = toml::from_str(text).map_err(|e| e.to_string())?;
        resolve(entry, "docs")
    }

    #[test]
    fn stdio_and_http_servers_and_what_is_wrong_with_them() {
        let s = parse("command = \"mcp-docs\"\nargs = [\"--ro\"]\nenv = { K = \"v\" }\n").unwrap();
        assert_eq!(
            s.transport,
            McpTransport::Stdio {
                command: "mcp-docs".into(),
                args: vec!["--ro".into()],
                env: [("K".to_string(), "v".to_string())].into(),
            }
        );
        let h = parse("url = \"https://x.test/mcp\"\nheaders = { A = \"b\" }\n").unwrap();
        assert!(matches!(h.transport, McpTransport::Http { .. }));
        let e = parse("url = \"https://x.test/sse\"\ntransport = \"sse\"\n").unwrap();
        assert!(matches!(e.transport, McpTransport::Sse { .. }));
        for (text, want) in [
            (
                "args = []\n",
                "needs a `command` (a stdio server) or a `url`",
            ),
            ("command = \"a\"\nurl = \"http://x\"\n", "has both"),
            (
                "command = \"a\"\nheaders = {}\n",
                "headers: only an HTTP server",
            ),
            ("url = \"http://x\"\nenv = {}\n", "env: only a stdio server"),
            ("url = \"ftp://x\"\n", "must start with http://"),
            (
                "url = \"http://x\"\ntransport = \"ws\"\n",
                "\"http\" or \"sse\"",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn a_hosts_server_comes_back_as_it_went() {
        for text in [
            "command = \"/bin/docs\"\nargs = [\"-r\"]\nenv = { A = \"1\" }\n",
            "url = \"https://x/mcp\"\nheaders = { H = \"v\" }\n",
            "url = \"https://x/sse\"\ntransport = \"sse\"\n",
        ] {
            let spec = parse(text).unwrap();
            assert_eq!(McpServerSpec::from_wire(&spec.wire()), Some(spec));
        }
    }

    #[test]
    fn an_agent_without_http_capability_gets_only_stdio() {
        let stdio = parse("command = \"a\"\n").unwrap();
        let mut http = parse("url = \"http://x\"\n").unwrap();
        http.name = "web".into();
        let (sent, skipped) = offer(
            "fake",
            &[stdio.clone(), http.clone()],
            &McpCapabilities::new(),
        );
        assert_eq!(sent.len(), 1);
        assert_eq!(
            skipped,
            ["MCP server web skipped: fake does not accept HTTP MCP servers (its mcpCapabilities)"]
        );
        let (sent, skipped) = offer("fake", &[stdio, http], &McpCapabilities::new().http(true));
        assert_eq!((sent.len(), skipped.len()), (2, 0));
    }

    /// How real agents name an MCP server's tools: claude's
    /// `mcp__quorum__subagent`; codex's call names the server and tool.
    #[test]
    fn calls_of_a_servers_tools_are_recognised() {
        assert!(names_mcp_tool("mcp__quorum__subagent", "{}", "quorum"));
        assert!(names_mcp_tool(
            "Approve MCP tool call",
            r#"{"server":"quorum","tool":"subagent_status"}"#,
            "quorum"
        ));
        assert!(!names_mcp_tool("mcp__docs__search", "{}", "quorum"));
        assert!(!names_mcp_tool("Bash", r#"{"command":"ls"}"#, "quorum"));
    }
}
