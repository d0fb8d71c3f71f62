//! `quorum agents`: the known agents, whether each is installed, and, when
//! probed, what each says of itself.

use std::io::Write;

use crate::acp::client::Connection;
use crate::acp::registry::{AgentSpec, Registry};
use crate::confine::fsroot::Root;
use crate::confine::sanitize::sanitize;
use crate::runtime::path::locate;
use crate::runtime::supervisor::Supervisor;

// `quorum agents`' options (its help is the command's, in `main`).
#[derive(clap::Args)]
pub struct AgentsArgs {
    /// Start each installed agent and show what it says of itself.
    #[arg(long)]
    probe: bool,
}

/// `quorum agents [--probe]`, on stdout.
pub async fn command(
    AgentsArgs { probe }: AgentsArgs,
    config: Option<std::path::PathBuf>,
) -> anyhow::Result<i32> {
    crate::engine::config::init_logging();
    let file = crate::config::ConfigFile::load(config.as_deref())?;
    let registry = crate::engine::config::registry(&file)?;
    let root = crate::engine::config::root(None)?;
    let supervisor = Supervisor::new();
    let listed = list(&registry, &root, &supervisor, probe, &mut std::io::stdout()).await;
    // The probed agents are stopped before the runtime is.
    supervisor.shutdown_blocking();
    listed?;
    Ok(0)
}

/// Writes the table to `out`; `probe` starts each installed agent.
pub async fn list(
    registry: &Registry,
    root: &Root,
    supervisor: &Supervisor,
    probe: bool,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let rows: Vec<_> = registry.all().collect();
    let name_w = rows.iter().map(|a| a.name.len()).max().unwrap_or(4).max(4);
    // A command and its arguments come from config files: printed clean.
    let launch = |a: &AgentSpec| {
        let line = std::iter::once(a.command.as_str())
            .chain(a.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        sanitize(&line).into_owned()
    };
    let cmd_w = rows
        .iter()
        .map(|a| launch(a).len())
        .max()
        .unwrap_or(7)
        .max(7);
    writeln!(out, "{:name_w$}  {:cmd_w$}  INSTALLED", "NAME", "COMMAND")?;
    for a in rows {
        let installed = locate(&a.command);
        let where_ = installed.as_ref().map_or("no".to_string(), |p| {
            sanitize(&p.display().to_string()).into_owned()
        });
        writeln!(out, "{:name_w$}  {:cmd_w$}  {where_}", a.name, launch(a))?;
        writeln!(out, "{:name_w$}  ↳ {}", "", sanitize(&a.home_described()))?;
        if !a.mcp_servers.is_empty() {
            let servers: Vec<String> = a.mcp_servers.iter().map(|s| s.describe()).collect();
            writeln!(out, "{:name_w$}  ↳ MCP servers: {}", "", servers.join(", "))?;
        }
        if probe && installed.is_some() {
            let line = match Connection::start(
                a,
                root,
                supervisor,
                a.process_policy(false).as_ref(),
            )
            .await
            {
                Ok(conn) => {
                    let line = describe(&conn);
                    conn.close();
                    line
                }
                Err(e) => format!("probe failed: {}", sanitize(&e.to_string())),
            };
            writeln!(out, "{:name_w$}  ↳ {line}", "")?;
        }
    }
    Ok(())
}

/// `NAME VERSION; can: load, resume, ...; auth: ...`.
fn describe(conn: &Connection) -> String {
    let info = conn
        .init
        .agent_info
        .as_ref()
        .map_or("(no agentInfo)".to_string(), |i| {
            format!("{} {}", sanitize(&i.name), sanitize(&i.version))
        });
    let caps = conn.capabilities();
    let caps = if caps.is_empty() {
        "none".to_string()
    } else {
        caps.join(", ")
    };
    let auth = conn.auth_methods();
    let auth = if auth.is_empty() {
        "none".to_string()
    } else {
        auth.join("; ")
    };
    format!("{info}; can: {caps}; auth: {auth}")
}
