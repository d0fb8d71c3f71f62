//! `[mcp_servers.NAME]` in the config file reaches agents in `session/new`,
//! `session/load` and `session/resume` exactly as configured; per agent,
//! `mcp_servers = [...]` picks which; a server an agent cannot take is
//! skipped with a notice naming it; bad config names file and field.

use crate::common;

use common::shell::{Shell, shell_with, text};
use serde_json::{Value, json};

/// A stdio server and an HTTP one, as configured below.
const SERVERS: &str = r#"
[mcp_servers.docs]
command = "/usr/bin/mcp-docs"
args = ["--read-only", "two words"]
env = { DOCS_TOKEN = "t-1", LANG = "C" }

[mcp_servers.web]
url = "https://mcp.example.test/mcp"
headers = { Authorization = "Bearer abc", "X-Team" = "q" }
"#;

fn docs() -> Value {
    json!({
        "name": "docs",
        "command": "/usr/bin/mcp-docs",
        "args": ["--read-only", "two words"],
        "env": [{"name": "DOCS_TOKEN", "value": "t-1"}, {"name": "LANG", "value": "C"}],
    })
}

fn web() -> Value {
    json!({
        "type": "http",
        "name": "web",
        "url": "https://mcp.example.test/mcp",
        "headers": [{"name": "Authorization", "value": "Bearer abc"}, {"name": "X-Team", "value": "q"}],
    })
}

/// A shell whose fake agent logs the MCP servers it is given, started with
/// `flags`, its table ending with `agent_extra`, and `SERVERS` configured.
fn mcp_shell(flags: &[&str], agent_extra: &str) -> (Shell, std::path::PathBuf) {
    // The agent runs in the session directory: the log lands there.
    let mut args = vec!["--mcp-log".to_string(), "mcp.jsonl".to_string()];
    args.extend(flags.iter().map(|f| f.to_string()));
    let s = shell_with(&format!("args = {args:?}\n{agent_extra}\n{SERVERS}"));
    let log = s.dir.path().join("mcp.jsonl");
    (s, log)
}

/// What the agent was given: (method, mcpServers) per session request.
fn seen(log: &std::path::Path) -> Vec<(String, Value)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["method"].as_str().unwrap().to_string(),
                v["mcpServers"].clone(),
            )
        })
        .collect()
}

/// Two `quorum call`s, the second one resuming (or loading) the first
/// one's session in a new agent process (the fake agent keeps its sessions
/// in `store/`): a second call in the same process would prompt the open
/// session directly, with no request that carries servers.
fn two_processes(flags: &[&str]) -> (Shell, std::path::PathBuf, std::process::Output) {
    let mut flags = flags.to_vec();
    flags.extend(["--store", "store"]);
    let (s, log) = mcp_shell(&flags, "");
    std::fs::create_dir_all(s.dir.path().join("store")).unwrap();
    let o = s.run(&["call", "--agent", "fake", "--json", "--input", "echo one"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let first: Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    let id = first["session_id"].as_str().unwrap().to_string();
    let o = s.run(&[
        "call", "--agent", "fake", "--resume", &id, "--input", "echo two",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    (s, log, o)
}

#[test]
fn new_and_resume_get_the_servers_exactly_as_configured() {
    let (_s, log, o) = two_processes(&["--mcp-http"]);
    assert_eq!(
        seen(&log),
        [
            ("session/new".to_string(), json!([docs(), web()])),
            ("session/resume".to_string(), json!([docs(), web()])),
        ]
    );
    assert!(!text(&o.stderr).contains("skipped"), "{}", text(&o.stderr));
}

#[test]
fn load_gets_them_too() {
    let (_s, log, _) = two_processes(&["--mcp-http", "--no-resume"]);
    assert_eq!(
        seen(&log),
        [
            ("session/new".to_string(), json!([docs(), web()])),
            ("session/load".to_string(), json!([docs(), web()])),
        ]
    );
}

#[test]
fn an_agent_picks_its_servers_by_name() {
    let (s, log) = mcp_shell(&["--mcp-http"], "mcp_servers = [\"web\"]");
    let o = s.run(&["call", "--agent", "fake", "--input", "echo one"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(seen(&log), [("session/new".to_string(), json!([web()]))]);

    let (s, log) = mcp_shell(&["--mcp-http"], "mcp_servers = []");
    let o = s.run(&["call", "--agent", "fake", "--input", "echo one"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(seen(&log), [("session/new".to_string(), json!([]))]);
}

#[test]
fn no_servers_configured_sends_none() {
    let s = shell_with("args = [\"--mcp-log\", \"mcp.jsonl\"]\n");
    let log = s.dir.path().join("mcp.jsonl");
    let o = s.run(&["call", "--agent", "fake", "--input", "echo one"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(seen(&log), [("session/new".to_string(), json!([]))]);
}

/// An agent without `mcpCapabilities.http` gets the stdio server only, and
/// the box (here, `call`'s progress) names the one skipped.
#[test]
fn an_http_server_is_skipped_with_a_notice_for_an_agent_that_cannot_take_it() {
    let (s, log) = mcp_shell(&[], "");
    let o = s.run(&["call", "--agent", "fake", "--json", "--input", "echo one"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(seen(&log), [("session/new".to_string(), json!([docs()]))]);
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains(
            "MCP server web skipped: fake does not accept HTTP MCP servers (its mcpCapabilities)"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("MCP server docs skipped"), "{stderr}");
}

/// `quorum agents` lists the servers each agent is given.
#[test]
fn quorum_agents_lists_each_agents_servers() {
    let (s, _) = mcp_shell(&[], "mcp_servers = [\"docs\"]");
    let o = s.run(&["agents"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    let fake = lines
        .iter()
        .position(|l| l.starts_with("fake "))
        .expect(&out);
    // Below its row: what it keeps private when sandboxed, then its servers.
    assert!(lines[fake + 1].trim().starts_with("↳ sandboxed"), "{out}");
    assert_eq!(
        lines[fake + 2].trim(),
        "↳ MCP servers: docs (stdio)",
        "{out}"
    );

    let (s, _) = mcp_shell(&[], "");
    let out = text(&s.run(&["agents"]).stdout);
    assert!(
        out.contains("↳ MCP servers: docs (stdio), web (HTTP)"),
        "{out}"
    );
}

#[test]
fn bad_mcp_config_names_the_file_and_the_field() {
    for (extra, want) in [
        (
            "\n[mcp_servers.none]\nargs = [\"x\"]\n",
            "[mcp_servers.none] needs a `command` (a stdio server) or a `url` (an HTTP server)",
        ),
        (
            "\n[mcp_servers.both]\ncommand = \"a\"\nurl = \"http://x.test\"\n",
            "[mcp_servers.both] has both `command` and `url`",
        ),
        (
            "\n[mcp_servers.typo]\ncommand = \"a\"\nargv = []\n",
            "unknown field `argv`",
        ),
        (
            "\n[mcp_servers.h]\ncommand = \"a\"\nheaders = { A = \"b\" }\n",
            "[mcp_servers.h] headers: only an HTTP server (`url`) takes headers",
        ),
        (
            "mcp_servers = [\"docs\", \"nope\"]\n\n[mcp_servers.docs]\ncommand = \"a\"\n",
            "[agents.fake] mcp_servers names \"nope\", which no [mcp_servers.nope] defines (defined: docs)",
        ),
    ] {
        let s = shell_with(extra);
        let o = s.run(&["call", "--agent", "fake", "--input", "echo one"]);
        assert_ne!(o.status.code(), Some(0), "{extra}");
        let stderr = text(&o.stderr);
        assert!(
            stderr.contains(&format!("{}: ", s.config.display())),
            "names the file: {stderr}"
        );
        assert!(stderr.contains(want), "{extra}\n{stderr}");
    }
}
