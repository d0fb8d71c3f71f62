//! `quorum doctor`: what quorum's features need, checked on this machine,
//! one line each: `ok`, `warn` or `fail`, the thing checked, what was
//! found, and what to do when it is not right. The config file (read
//! strictly), the chat a session would have, git, bubblewrap (quorum's own
//! sandbox made once: `runtime::probe`), the state directory, each
//! installed agent (started as quorum starts it, `initialize` answered, its
//! sign-in: `agents`), the terminal and tmux (`terminal`), and ssh for each
//! `[hosts.NAME]` (`remote::ssh::reachable`). Every process it starts is
//! the supervisor's, and ended before it returns, whichever way it ends.
//!
//! Exit code 0 when nothing failed (warnings allowed), 1 otherwise;
//! `--json` prints the checks as one JSON document.

mod agents;
mod terminal;

use std::io::Write;

use anyhow::Result;
use serde::Serialize;

use crate::acp::registry::Registry;
use crate::config::{ConfigError, ConfigFile, Location, Source};
use crate::confine::fsroot::Root;
use crate::confine::sanitize::one_line;
use crate::engine::SessionConfig;
use crate::engine::config::{ModelChoice, ModelSettings, env_var};
use crate::runtime::probe::{self, StateDir, Tool};
use crate::runtime::supervisor::Supervisor;

/// Exit code: a check failed.
pub const EXIT_FAILED: i32 = 1;

/// `quorum doctor`'s options.
#[derive(clap::Args)]
pub struct DoctorArgs {
    /// Print the checks as one JSON document on stdout (`status`: the
    /// worst of them; `checks`: each with `name`, `status`, `detail`,
    /// `fix`).
    #[arg(long)]
    json: bool,
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }

    /// Its colour on a terminal (SGR).
    fn colour(self) -> &'static str {
        match self {
            Status::Ok => "\x1b[32m",
            Status::Warn => "\x1b[33m",
            Status::Fail => "\x1b[31m",
        }
    }
}

/// One line of the report: what was checked, how it came out, what was
/// found and, when it is not right, what to do. Text from outside (an
/// agent's, a config file's, ssh's) is made clean and one line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
    pub fix: Option<String>,
}

impl Check {
    fn new(name: &str, status: Status, detail: &str, fix: Option<&str>) -> Self {
        Self {
            name: one_line(name),
            status,
            detail: one_line(detail),
            fix: fix.map(one_line).filter(|f| !f.is_empty()),
        }
    }

    pub fn ok(name: &str, detail: &str) -> Self {
        Self::new(name, Status::Ok, detail, None)
    }

    pub fn warn(name: &str, detail: &str, fix: &str) -> Self {
        Self::new(name, Status::Warn, detail, Some(fix))
    }

    pub fn fail(name: &str, detail: &str, fix: &str) -> Self {
        Self::new(name, Status::Fail, detail, Some(fix))
    }
}

/// `quorum doctor [--json]`: the checks on stdout; exit code 0 when none
/// failed, 1 otherwise. A Ctrl+C, SIGTERM or SIGHUP stops it (130, 143,
/// 129), every process it started ended.
pub async fn command(args: DoctorArgs, location: &Location, model: ModelChoice) -> Result<i32> {
    let root = crate::engine::config::root(None)?;
    let supervisor = Supervisor::new();
    let checks = tokio::select! {
        checks = checks(location, &model, &root, &supervisor) => checks,
        code = interrupted() => {
            supervisor.shutdown_blocking();
            return Ok(code);
        }
    };
    // What it started is ended before it says anything.
    supervisor.shutdown_blocking();
    let mut out = std::io::stdout().lock();
    if args.json {
        write_json(&mut out, &checks)?;
    } else {
        use std::io::IsTerminal;
        let colour = std::io::stdout().is_terminal() && env_var("NO_COLOR").is_none();
        write_text(&mut out, &checks, colour)?;
    }
    out.flush()?;
    Ok(exit_code(&checks))
}

/// Resolves on Ctrl+C (130), SIGTERM (143) or SIGHUP (129).
async fn interrupted() -> i32 {
    tokio::select! {
        Ok(()) = tokio::signal::ctrl_c() => crate::cli::EXIT_INTERRUPTED,
        code = crate::runtime::cancel::termination_signal() => code,
    }
}

/// 0 when no check failed, else [`EXIT_FAILED`].
pub fn exit_code(checks: &[Check]) -> i32 {
    if checks.iter().any(|c| c.status == Status::Fail) {
        EXIT_FAILED
    } else {
        crate::cli::EXIT_OK
    }
}

/// Every check, in the order they are printed. Those that wait on other
/// programs (the sandbox, the agents, tmux, the hosts) run side by side.
async fn checks(
    location: &Location,
    model: &ModelChoice,
    root: &Root,
    supervisor: &Supervisor,
) -> Vec<Check> {
    let (config, file, registry) = config(location);
    let mut out = vec![config, chat(&file, &registry, root, model), git()];
    // As it is before an agent's private home is made in it.
    let state = state();
    let (sandbox, agents, terminal, hosts) = tokio::join!(
        sandbox(root, supervisor),
        agents::checks(&registry, root, supervisor),
        terminal::checks(supervisor, &env_var),
        hosts(&registry, supervisor),
    );
    out.push(sandbox);
    out.push(state);
    out.extend(agents);
    out.extend(terminal);
    out.extend(hosts);
    out
}

/// The config file, read and checked as every command reads it (its
/// agents and hosts too); the file and the registry the other checks use:
/// quorum's defaults when it cannot be taken.
fn config(location: &Location) -> (Check, ConfigFile, Registry) {
    let read = location
        .read()
        .and_then(|file| Registry::from_config(&file).map(|registry| (file, registry)));
    let named = match &location.source {
        Source::Default => "the default place".to_string(),
        source => source.to_string(),
    };
    match (read, &location.path) {
        (Ok((file, registry)), Some(path)) => {
            let detail = format!("{} (from {named}): read and checked", path.display());
            (Check::ok("config", &detail), file, registry)
        }
        (Ok((file, registry)), None) => {
            let default = crate::config::default_path().map_or("no HOME".to_string(), |p| {
                format!("{} does not exist", p.display())
            });
            let detail = format!("none ({default}): quorum's defaults");
            (Check::ok("config", &detail), file, registry)
        }
        (Err(e), _) => {
            let detail = format!(
                "{e}; the checks below use quorum's defaults, and every other command stops here"
            );
            let check = Check::fail("config", &detail, &config_fix(&e));
            (check, ConfigFile::default(), Registry::builtin())
        }
    }
}

/// What to do about a config file quorum cannot take.
fn config_fix(e: &ConfigError) -> String {
    match e {
        ConfigError::UnknownField(u) => {
            let place = format!("{}, line {}", u.path.display(), u.line);
            match &u.nearest {
                Some(n) if u.section => format!("in {place}, write [{n}] for [{}]", u.field),
                Some(n) => format!("in {place}, write `{n}` for `{}`", u.field),
                None => format!("in {place}, remove `{}`", u.field),
            }
        }
        ConfigError::Io { path, .. } => format!(
            "make {} a file you can read, or name another with --config or $QUORUM_CONFIG",
            path.display()
        ),
        ConfigError::Parse { path, .. } => {
            format!("mend {} where the message says", path.display())
        }
        ConfigError::MissingCommand { path, name } => format!(
            "give [agents.{name}] a `command` in {}, or name a built-in agent",
            path.display()
        ),
    }
}

/// The chat a session here would have, as a session chooses it (`--model`,
/// `$QUORUM_MODEL`, `[model] name`).
///
/// The chat a session here would have: the one chosen (`--model`,
/// `$QUORUM_MODEL`, `[model] name`), else quorum's default (the first
/// installed of claude, codex, gemini, opencode, then the registry's order;
/// else a provider whose key is set), as `SessionConfig::choose_model`
/// decides it for a session.
fn chat(file: &ConfigFile, registry: &Registry, root: &Root, model: &ModelChoice) -> Check {
    let settings = ModelSettings::resolve(model, file, &env_var);
    let (spec, from) = settings.spec.map_or(
        (String::new(), "quorum's default".to_string()),
        |(spec, source)| (spec, source.to_string()),
    );
    let mut session = SessionConfig::new(registry.clone(), root.clone());
    session.take_settings(file);
    if let Err(e) = session.choose_model(model, file) {
        let detail = format!("{e} (from {from})");
        let first = match crate::engine::config::conductor_of(&spec) {
            Some(_) => "install the agent (the line says how)",
            None => "set the provider's key or base URL (the line says which)",
        };
        let fix = format!(
            "{first}, or choose another chat: --model acp:NAME (an agent you have), --model PROVIDER:NAME, or [model] name in the config"
        );
        return Check::fail("chat", &detail, &fix);
    }
    match (&session.conductor, &session.model) {
        (Some(name), _) => Check::ok(
            "chat",
            &format!("acp:{name}: the agent {name} is the chat (from {from})"),
        ),
        (None, Some(m)) => Check::ok("chat", &format!("{} (from {from})", m.name())),
        (None, None) if crate::engine::chats::is_off(&spec) => Check::ok(
            "chat",
            &format!(
                "off (`none`, from {from}): plain messages have no one to answer; `@NAME message` talks to an agent"
            ),
        ),
        (None, None) => no_chat(),
    }
}

/// Nothing chosen, no agent installed and no key set: no chat.
fn no_chat() -> Check {
    Check::warn(
        "chat",
        "none: nothing chosen (no --model, $QUORUM_MODEL or [model] name), no agent installed to be the chat, and no API key set",
        "install an agent (the agents line says how) and it is the chat, or --model PROVIDER:NAME with its API key, or [model] name in the config",
    )
}

/// git, which worktree tasks, reviews of a diff and the session's checks
/// of its repository run.
fn git() -> Check {
    match probe::git() {
        Some(git) => Check::ok("git", &format!("{} ({})", git.version, git.path.display())),
        None => Check::fail(
            "git",
            "not found on PATH: worktree tasks, `quorum review` and the checks of the session's repository need it",
            &probe::install_line(Tool::Git),
        ),
    }
}

/// Bubblewrap, made to make quorum's own sandbox in the session directory.
async fn sandbox(root: &Root, supervisor: &Supervisor) -> Check {
    const NAME: &str = "bubblewrap";
    match probe::sandbox(root.path(), supervisor).await {
        Ok(works) => {
            let made = format!(
                "{} ({}) makes quorum's sandbox here: the file system read-only but the session directory, its own process ids and network",
                works.version,
                works.bwrap.display()
            );
            match works.weaker {
                None => Check::ok(NAME, &format!("{made}, the seccomp filter in force")),
                Some(why) => Check::warn(
                    NAME,
                    &format!("{made}; but {why}"),
                    "quorum's seccomp filter needs Linux on x86_64 or aarch64 and a kernel with seccomp filters",
                ),
            }
        }
        Err(fault) => Check::fail(NAME, &fault.to_string(), &fault.fix()),
    }
}

/// The state directory: sessions, logs, agents' private homes.
fn state() -> Check {
    const NAME: &str = "state";
    match probe::state_dir() {
        StateDir::Ready(dir) => Check::ok(
            NAME,
            &format!("{}: writable, private (0700)", dir.display()),
        ),
        StateDir::ToMake { dir, parent } => Check::ok(
            NAME,
            &format!(
                "{} is made at the first session (private, 0700): {} can be written",
                dir.display(),
                parent.display()
            ),
        ),
        StateDir::Open { dir, mode } => Check::warn(
            NAME,
            &format!(
                "{}: mode {mode:04o}, others can read it (sessions, logs, agents' private homes are there)",
                dir.display()
            ),
            &format!("chmod 700 {}", dir.display()),
        ),
        StateDir::Unusable { dir: None, why } => Check::fail(
            NAME,
            &format!("no state directory: {why}"),
            "set HOME, or XDG_STATE_HOME to a folder you can write",
        ),
        StateDir::Unusable {
            dir: Some(dir),
            why,
        } => Check::fail(
            NAME,
            &format!("{}: {why}", dir.display()),
            "make it a folder you can write, or set XDG_STATE_HOME to one",
        ),
    }
}

/// ssh, and each `[hosts.NAME]` reached with it.
async fn hosts(registry: &Registry, supervisor: &Supervisor) -> Vec<Check> {
    let hosts = registry.hosts();
    if hosts.is_empty() {
        return vec![Check::ok(
            "hosts",
            "none configured ([hosts.NAME] runs agents on other machines over ssh)",
        )];
    }
    let names: Vec<String> = hosts.keys().map(|n| format!("[hosts.{n}]")).collect();
    let Some(version) = crate::remote::ssh::version() else {
        return vec![Check::fail(
            "ssh",
            &format!("not found on PATH, and {} need it", names.join(", ")),
            &probe::install_line(Tool::Ssh),
        )];
    };
    let version = &version;
    let reached = hosts.values().map(|spec| async move {
        let name = format!("host {}", spec.name);
        match crate::remote::ssh::reachable(spec, supervisor).await {
            Ok(()) => Check::ok(&name, &format!("{} answers over ssh ({version})", spec.ssh)),
            Err(why) => {
                let mut line = vec!["ssh".to_string()];
                line.extend(spec.ssh_args.iter().cloned());
                line.push(spec.ssh.clone());
                line.push("true".to_string());
                let fix = format!(
                    "`{}` must work without a question (quorum runs ssh with BatchMode=yes): a key or an ssh agent to sign in, the host known in ~/.ssh/known_hosts",
                    line.join(" ")
                );
                Check::fail(&name, &format!("{}: {why}", spec.ssh), &fix)
            }
        }
    });
    futures::future::join_all(reached).await
}

/// The checks as aligned lines: status, name, what was found, and `fix:`
/// what to do. `colour`: the status coloured (stdout is a terminal).
pub fn write_text(out: &mut impl Write, checks: &[Check], colour: bool) -> std::io::Result<()> {
    let width = checks
        .iter()
        .map(|c| c.name.chars().count())
        .max()
        .unwrap_or(0);
    for c in checks {
        let word = format!("{:<4}", c.status.word());
        let word = if colour {
            format!("{}{word}\x1b[0m", c.status.colour())
        } else {
            word
        };
        let fix = c
            .fix
            .as_ref()
            .map_or(String::new(), |f| format!("; fix: {f}"));
        writeln!(out, "{word}  {:<width$}  {}{fix}", c.name, c.detail)?;
    }
    Ok(())
}

/// The report as one JSON document: `status` (the worst check's) and the
/// `checks`.
pub fn write_json(out: &mut impl Write, checks: &[Check]) -> std::io::Result<()> {
    #[derive(Serialize)]
    struct Report<'a> {
        status: Status,
        checks: &'a [Check],
    }
    let status = checks.iter().map(|c| c.status).max().unwrap_or(Status::Ok);
    let text =
        serde_json::to_string_pretty(&Report { status, checks }).map_err(std::io::Error::other)?;
    writeln!(out, "{text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Vec<Check> {
        vec![
            Check::ok("git", "2.47.3 (/usr/bin/git)"),
            Check::fail(
                "bubblewrap",
                "not installed",
                "sudo apt-get install bubblewrap",
            ),
            Check::warn("agent fake", "may need a sign-in\n\x1b[31mnow", "sign in"),
        ]
    }

    #[test]
    fn lines_are_aligned_plain_and_say_the_fix() {
        let mut out = Vec::new();
        write_text(&mut out, &report(), false).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "ok    git         2.47.3 (/usr/bin/git)\n\
             fail  bubblewrap  not installed; fix: sudo apt-get install bubblewrap\n\
             warn  agent fake  may need a sign-in now; fix: sign in\n"
        );
        let mut out = Vec::new();
        write_text(&mut out, &report(), true).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("\x1b[32mok  \x1b[0m  git"), "{text:?}");
    }

    #[test]
    fn json_carries_every_check_and_the_worst_status() {
        let mut out = Vec::new();
        write_json(&mut out, &report()).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["status"], "fail");
        assert_eq!(v["checks"][1]["name"], "bubblewrap");
        assert_eq!(v["checks"][1]["fix"], "sudo apt-get install bubblewrap");
        assert_eq!(v["checks"][0]["fix"], serde_json::Value::Null);
        assert_eq!(v["checks"][2]["status"], "warn");
    }

    #[test]
    fn only_a_failure_fails() {
        let mut checks = report();
        assert_eq!(exit_code(&checks), EXIT_FAILED);
        checks.remove(1);
        assert_eq!(exit_code(&checks), 0);
    }

    #[test]
    fn a_typo_is_mended_by_name_and_line() {
        let path = std::path::Path::new("/c/config.toml");
        let e = ConfigFile::parse(path, "max_paralel = 3\n").unwrap_err();
        assert_eq!(
            config_fix(&e),
            "in /c/config.toml, line 1, write `max_parallel` for `max_paralel`"
        );
        let e = ConfigFile::parse(path, "[limts]\n").unwrap_err();
        assert_eq!(
            config_fix(&e),
            "in /c/config.toml, line 1, write [limits] for [limts]"
        );
    }
}
