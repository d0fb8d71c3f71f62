//! `quorum doctor`'s agents: which of the registry are installed, and each
//! installed one started as quorum starts it for a worktree task (under
//! bubblewrap when it is installed, unless its table says `sandbox =
//! "none"`), `initialize` answered within its `startup_timeout` (at most
//! [`WAIT`]), the sign-in it announces (`authMethods`), then ended. One
//! that answers only outside the sandbox says so.

use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::AuthMethod;

use super::Check;
use crate::acp::client::{AcpError, Connection};
use crate::acp::registry::{AgentSpec, Registry};
use crate::confine::fsroot::Root;
use crate::confine::sanitize::sanitize;
use crate::runtime::sandbox::Sandbox;
use crate::runtime::supervisor::Supervisor;

/// The longest an agent is given to answer `initialize` here (its
/// `startup_timeout`, when shorter).
pub const WAIT: Duration = Duration::from_secs(30);

/// The agents' line, then one line per installed agent (checked side by
/// side).
pub async fn checks(registry: &Registry, root: &Root, supervisor: &Supervisor) -> Vec<Check> {
    let installed = registry.installed();
    let mut out = vec![summary(registry, &installed)];
    let each = installed.iter().map(|spec| check(spec, root, supervisor));
    out.extend(futures::future::join_all(each).await);
    out
}

/// Which agents are installed; none is a warning, with the common ones'
/// install lines.
fn summary(registry: &Registry, installed: &[&AgentSpec]) -> Check {
    let known = registry.all().count();
    if installed.is_empty() {
        let common: Vec<String> = ["claude", "codex", "gemini"]
            .iter()
            .filter_map(|name| registry.all().find(|a| a.name == *name))
            .filter_map(|a| Some(format!("{} ({})", a.install.as_ref()?, a.name)))
            .collect();
        return Check::warn(
            "agents",
            &format!(
                "none of the {known} known agents is installed: the chat has no sub-agents but the internal one"
            ),
            &format!(
                "install one: {}; `quorum agents` lists them all",
                common.join(", ")
            ),
        );
    }
    let names: Vec<&str> = installed.iter().map(|a| a.name.as_str()).collect();
    Check::ok(
        "agents",
        &format!(
            "installed: {} ({} of {known} known; `quorum agents` says how to install the others)",
            names.join(", "),
            names.len()
        ),
    )
}

/// What an agent said when it answered.
struct Answer {
    /// `quorum-fake-agent 1.0.0`.
    info: String,
    sandboxed: bool,
    took: Duration,
    /// Its sign-in methods, described (`API key (api-key): …`).
    methods: Vec<String>,
    /// The arguments of its `terminal` methods (run as the agent's
    /// command with them, in a terminal, to sign in).
    terminal_args: Vec<Vec<String>>,
}

/// One installed agent: started, `initialize` answered, its sign-in.
async fn check(spec: &AgentSpec, root: &Root, supervisor: &Supervisor) -> Check {
    let name = format!("agent {}", spec.name);
    if let Some(host) = &spec.host {
        return Check::ok(
            &name,
            &format!(
                "runs on host {host}: not started here (the host's line says whether ssh reaches it)"
            ),
        );
    }
    let mut spec = spec.clone();
    spec.startup_timeout = spec.startup_timeout.min(WAIT);
    let policy = spec.process_policy(true);
    // Sandboxed because quorum sandboxes worktree tasks' agents, not
    // because its table asks for it: outside the sandbox is worth a try.
    let by_default = spec.sandbox.is_none() && crate::runtime::path::locate("bwrap").is_some();
    match start(&spec, root, supervisor, policy.as_ref()).await {
        Ok(answer) => answered(&name, &spec, &answer),
        // One that did not answer in time is not waited for twice.
        Err(e) if by_default && !matches!(e, AcpError::Timeout { .. }) => {
            match start(&spec, root, supervisor, None).await {
                Ok(answer) => Check::fail(
                    &name,
                    &format!(
                        "{} answers outside the sandbox, but not inside it, where worktree tasks start it: {e}",
                        answer.info
                    ),
                    &format!(
                        "what it lacks there is in the message; `writable = [...]` under [agents.{0}] shares more with it, `sandbox = \"none\"` runs it unsandboxed",
                        spec.name
                    ),
                ),
                Err(_) => failed(&name, &spec, &e),
            }
        }
        Err(e) => failed(&name, &spec, &e),
    }
}

/// Starts `spec` (under `policy`), waits for its answer to `initialize`,
/// and closes the connection (its process is ended).
async fn start(
    spec: &AgentSpec,
    root: &Root,
    supervisor: &Supervisor,
    policy: Option<&crate::runtime::sandbox::Policy>,
) -> Result<Answer, AcpError> {
    let started = Instant::now();
    let conn = Connection::start(spec, root, supervisor, policy).await?;
    let took = started.elapsed();
    let info = conn
        .init
        .agent_info
        .as_ref()
        .map_or(spec.command.clone(), |i| {
            format!("{} {}", i.name, i.version)
        });
    let terminal_args = conn
        .init
        .auth_methods
        .iter()
        .filter_map(|m| match m {
            AuthMethod::Terminal(t) => Some(t.args.clone()),
            _ => None,
        })
        .collect();
    let answer = Answer {
        info: sanitize(&info).into_owned(),
        sandboxed: conn.sandboxed(),
        took,
        methods: conn.auth_methods(),
        terminal_args,
    };
    conn.close();
    Ok(answer)
}

/// The line of an agent that answered: ok, or a warning when it announces
/// a sign-in and none of its credentials files is there.
fn answered(name: &str, spec: &AgentSpec, answer: &Answer) -> Check {
    let how = if answer.sandboxed {
        "sandboxed"
    } else if spec.sandbox == Some(Sandbox::None) {
        "not sandboxed: sandbox = \"none\""
    } else {
        "not sandboxed: no bubblewrap"
    };
    let said = format!(
        "{} answered initialize in {:.1} s ({how})",
        answer.info,
        answer.took.as_secs_f64()
    );
    if answer.methods.is_empty() {
        return Check::ok(name, &format!("{said}; it asks for no sign-in"));
    }
    let methods = answer.methods.join("; ");
    let found = spec.credentials_found();
    if let Some(file) = found.first() {
        return Check::ok(
            name,
            &format!(
                "{said}; it offers a sign-in ({methods}), and its sign-in file is there ({})",
                file.display()
            ),
        );
    }
    Check::warn(
        name,
        &format!("{said}; it may need a sign-in: it offers {methods}"),
        &sign_in(spec, &answer.terminal_args),
    )
}

/// How to sign in: a `terminal` method's command, else the agent's own
/// CLI, or the variables a method names in the agent's `env`.
fn sign_in(spec: &AgentSpec, terminal_args: &[Vec<String>]) -> String {
    let login = terminal_args.first().map(|args| {
        std::iter::once(spec.command.as_str())
            .chain(args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    });
    let first = match login {
        Some(command) => format!("run `{command}` in a terminal to sign in"),
        None => "sign in with the agent's own CLI".to_string(),
    };
    format!(
        "{first}, or set the variables a method names under [agents.{}] env in the config",
        spec.name
    )
}

/// The line of an agent that did not answer, and what to do.
fn failed(name: &str, spec: &AgentSpec, e: &AcpError) -> Check {
    let launch = std::iter::once(spec.command.as_str())
        .chain(spec.args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    let fix = match e {
        AcpError::Timeout { .. } => format!(
            "run `{launch}` yourself to see what it waits for; a slow first start (npx, a download) may need startup_timeout = 120 under [agents.{}]",
            spec.name
        ),
        AcpError::InSession { .. } => format!(
            "give its absolute path as agents.{}.command, or take that folder off PATH",
            spec.name
        ),
        AcpError::NotInstalled { .. } => spec
            .install
            .clone()
            .unwrap_or_else(|| format!("install it, or mend agents.{}.command", spec.name)),
        AcpError::Spawn { .. } | AcpError::Protocol { .. } => {
            format!("run `{launch}` yourself to see why it stops")
        }
    };
    Check::fail(name, &e.to_string(), &fix)
}
