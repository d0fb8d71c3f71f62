//! `quorum config`: the configuration in effect, and where each value
//! came from (quorum's default, the config file and its line, an
//! environment variable, a flag, or the built-in registry). The values are
//! the ones a session takes: read from the one [`ConfigFile`] by the same
//! code.

use std::io::Write;

use anyhow::Result;

use crate::acp::registry::Registry;
use crate::config::{ConfigFile, Location, Source};
use crate::confine::sanitize::sanitize;
use crate::engine::SessionConfig;
use crate::engine::config::{self, ModelChoice, ModelSettings, env_var};
use crate::serve::McpOptions;
use crate::serve::acp::AcpOptions;

/// `quorum config`'s options (none yet: the global `--config`, `--model`,
/// `--base-url` and `--agent-depth` are taken into account).
#[derive(clap::Args)]
pub struct ConfigArgs {}

/// Prints the configuration in effect on stdout; a config file with a
/// mistake is an error (exit code 2).
pub fn command(_args: ConfigArgs, location: &Location, model: &ModelChoice) -> Result<i32> {
    let file = location.read()?;
    let rows = rows(&file, model, &env_var)?;
    let mut out = std::io::stdout().lock();
    write_table(&mut out, location, &rows)?;
    Ok(0)
}

/// One setting: its name (`limits.max_read_bytes`), its value, and where it
/// came from.
struct Row {
    name: String,
    value: String,
    source: String,
}

fn row(name: &str, value: impl ToString, source: Source) -> Row {
    Row {
        name: name.to_string(),
        value: value.to_string(),
        source: source.to_string(),
    }
}

/// The settings in effect: the top-level ones, `[model]`, `[limits]`,
/// `[mcp]`, `[acp]`, `[internal]`, then a line per host, MCP server and
/// agent. `env` reads the environment.
fn rows(
    file: &ConfigFile,
    model: &ModelChoice,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Row>> {
    // The session's own settings, taken as a session takes them.
    let registry = config::registry(file)?;
    let mut session = SessionConfig::new(registry, config::root(None)?);
    session.take_settings(file);
    let mut rows = vec![
        row("bell", file.bell(), file.source(&["bell"])),
        row(
            "max_parallel",
            session.max_parallel,
            file.source(&["max_parallel"]),
        ),
    ];
    model_rows(&mut rows, (file, &session.registry), model, env);
    section_rows(&mut rows, file, &session);
    named_rows(&mut rows, file, &session);
    Ok(rows)
}

/// `[model]` (its name, else the chat picked by default, and its base
/// URL) and `agent_depth`.
fn model_rows(
    rows: &mut Vec<Row>,
    (file, registry): (&ConfigFile, &Registry),
    model: &ModelChoice,
    env: &dyn Fn(&str) -> Option<String>,
) {
    let settings = ModelSettings::resolve(model, file, env);
    let picked = crate::engine::default_chat(registry, env);
    rows.push(match (&settings.spec, picked.spec()) {
        (Some((spec, source)), _) => row("model.name", spec, source.clone()),
        (None, Some(spec)) => row("model.name", spec, Source::Default),
        (None, None) => row(
            "model.name",
            "(none: no agent installed, no API key set)",
            Source::Default,
        ),
    });
    rows.push(match settings.base_url_in_effect(env) {
        Some((url, source)) => row("model.base_url", url, source),
        None => row("model.base_url", "(the provider's own)", Source::Default),
    });
    let depth = if model.agent_depth == 0 {
        Source::Default
    } else {
        Source::Flag("--agent-depth")
    };
    rows.push(row("agent_depth", model.agent_depth, depth));
}

/// `[limits]`, `[mcp]`, `[acp]` and `[internal]`, as `session` takes them.
fn section_rows(rows: &mut Vec<Row>, file: &ConfigFile, session: &SessionConfig) {
    let limits = session.limits;
    for (name, value) in [
        ("max_frame_bytes", limits.max_frame_bytes),
        ("stderr_bytes", limits.stderr_bytes),
        ("max_read_bytes", limits.max_read_bytes),
        (
            "max_transcript_line_bytes",
            limits.max_transcript_line_bytes,
        ),
        ("context_chars", limits.context_chars),
    ] {
        let source = file.source(&["limits", name]);
        rows.push(row(&format!("limits.{name}"), value, source));
    }
    let sync = McpOptions::from_config(file).sync.as_secs();
    rows.push(row(
        "mcp.sync_seconds",
        sync,
        file.source(&["mcp", "sync_seconds"]),
    ));
    rows.push(row(
        "acp.share_mcp_servers",
        AcpOptions::share(file),
        file.source(&["acp", "share_mcp_servers"]),
    ));
    let shell = &session.internal_shell;
    let sandbox = shell
        .mode
        .map_or("(unset: bwrap when it is installed)", |m| m.as_str());
    rows.push(row(
        "internal.terminal_sandbox",
        sandbox,
        file.source(&["internal", "terminal_sandbox"]),
    ));
    rows.push(row(
        "internal.terminal_network",
        shell.network,
        file.source(&["internal", "terminal_network"]),
    ));
    worktree_rows(rows, file, &session.worktree);
    notify_rows(rows, file, &session.notify);
}

/// `[notify]`, as the session and the screen take it.
fn notify_rows(rows: &mut Vec<Row>, file: &ConfigFile, n: &crate::engine::notify::Settings) {
    let source = |key: &str| file.source(&["notify", key]);
    let kinds: Vec<&str> = n.kinds.iter().map(|k| k.as_str()).collect();
    rows.push(row("notify.events", kinds.join(", "), source("events")));
    let desktop = file.notify.as_ref().and_then(|n| n.desktop).unwrap_or(true);
    rows.push(row("notify.desktop", desktop, source("desktop")));
    let command = n
        .command
        .as_ref()
        .map_or_else(|| "(unset)".to_string(), |c| format!("{c:?}"));
    rows.push(row("notify.command", command, source("command")));
}

/// `[worktree]`, as the session takes it.
fn worktree_rows(rows: &mut Vec<Row>, file: &ConfigFile, w: &crate::worktree::Settings) {
    let source = |key: &str| file.source(&["worktree", key]);
    let unset = |v: &Option<String>| v.clone().unwrap_or_else(|| "(unset)".to_string());
    rows.push(row("worktree.sign", w.sign, source("sign")));
    rows.push(row("worktree.setup", unset(&w.setup), source("setup")));
    let share: Vec<String> = w.share.iter().map(|p| p.display().to_string()).collect();
    rows.push(row("worktree.share", format!("{share:?}"), source("share")));
    rows.push(row("worktree.check", unset(&w.check), source("check")));
    rows.push(row(
        "worktree.check_timeout",
        w.check_timeout.as_secs(),
        source("check_timeout"),
    ));
}

/// A line per host, MCP server and agent (an agent built in says so, and
/// where the file changed it).
fn named_rows(rows: &mut Vec<Row>, file: &ConfigFile, session: &SessionConfig) {
    for (name, host) in session.registry.hosts() {
        let source = file.source(&["hosts", name]);
        rows.push(row(&format!("hosts.{name}"), &host.ssh, source));
    }
    for (name, server) in &file.mcp_servers {
        let source = file.source(&["mcp_servers", name]);
        let what = server.command.as_ref().or(server.url.as_ref());
        let what = what.map_or("", String::as_str);
        rows.push(row(&format!("mcp_servers.{name}"), what, source));
    }
    let builtin = Registry::builtin();
    for agent in session.registry.all() {
        let launch = std::iter::once(agent.command.as_str())
            .chain(agent.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        let built_in = builtin.all().any(|a| a.name == agent.name);
        let source = match (built_in, file.source(&["agents", &agent.name])) {
            (true, Source::Default) => Source::BuiltIn.to_string(),
            (true, file) => format!("{}, changed at {file}", Source::BuiltIn),
            (false, file) => file.to_string(),
        };
        rows.push(Row {
            name: format!("agents.{}", agent.name),
            value: launch,
            source,
        });
    }
}

/// The config file's line, then the rows as a table (names, values and
/// sources from a config file printed clean).
fn write_table(out: &mut impl Write, location: &Location, rows: &[Row]) -> std::io::Result<()> {
    let file = match (&location.path, crate::config::default_path()) {
        (Some(path), _) => format!("{} ({})", path.display(), location.source),
        (None, Some(default)) => format!("none ({} does not exist)", default.display()),
        (None, None) => "none".to_string(),
    };
    writeln!(out, "config file: {}", sanitize(&file))?;
    let clean = |s: &str| sanitize(s).into_owned();
    let name_w = rows
        .iter()
        .map(|r| clean(&r.name).chars().count())
        .max()
        .unwrap_or(7)
        .max(7);
    let value_w = rows
        .iter()
        .map(|r| clean(&r.value).chars().count())
        .max()
        .unwrap_or(5)
        .max(5);
    writeln!(out, "{:name_w$}  {:value_w$}  FROM", "SETTING", "VALUE")?;
    for r in rows {
        writeln!(
            out,
            "{:name_w$}  {:value_w$}  {}",
            clean(&r.name),
            clean(&r.value),
            clean(&r.source)
        )?;
    }
    Ok(())
}
