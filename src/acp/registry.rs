//! Which ACP agents quorum knows, how each is launched, and which are
//! installed.
//!
//! The built-in registry (`assets/agents.toml`) is merged with the user's
//! config file: `[agents.NAME]` tables with `command`, `args`, `env`,
//! `description`, `permissions`, `terminal_sandbox`, `terminal_network`, `sandbox`, `state`,
//! `credentials`, `writable`, `protect`, `unix_sockets`, `user_namespaces` and `host`. A user entry overrides a built-in one field by field; a new name must
//! give its `command`. `[hosts.NAME]` tables (`ssh`, `ssh_args`, `dir`) name other machines an
//! agent with `host = "NAME"` runs on (`config::hosts`, `remote`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::mcp::McpServerSpec;
use crate::agent::Permissions;
pub use crate::config::ConfigError;
use crate::config::{AgentEntry, ConfigFile, HostSpec, check_host, is_name};
use crate::confine::limits::Limits;
use crate::runtime::path::locate;
use crate::runtime::sandbox::{Policy, Sandbox};

const BUILTIN: &str = include_str!("../../assets/agents.toml");
/// How messages name the built-in registry.
const BUILTIN_PATH: &str = "assets/agents.toml";

/// How long an agent may take to answer `initialize` or `session/new`,
/// unless its config sets `startup_timeout` (seconds).
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// One launchable agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSpec {
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub description: String,
    pub permissions: Permissions,
    /// How long `initialize` and `session/new` may take.
    pub startup_timeout: Duration,
    /// How to install it (built-in agents), for the not-installed message.
    pub install: Option<String>,
    /// The model and mode its new sessions are set to, through the agent's
    /// config options.
    pub model: Option<String>,
    pub mode: Option<String>,
    /// The config file that set its `command`; `None` for a built-in one.
    pub source: Option<PathBuf>,
    /// Its longest message and how much of its stderr is kept
    /// (`[limits]` in the config file).
    pub limits: Limits,
    /// How commands it runs in quorum's terminals are confined
    /// (`terminal_sandbox = "bwrap" | "none"`; unset: bubblewrap when it
    /// is installed).
    pub terminal_sandbox: Option<Sandbox>,
    /// Whether those commands reach the network (`terminal_network`;
    /// default false: a network namespace of their own).
    pub terminal_network: bool,
    /// How the agent process itself is confined (`sandbox = "bwrap" |
    /// "none"`; unset: under bubblewrap for a worktree task when it is
    /// installed, else not).
    pub sandbox: Option<Sandbox>,
    /// The agent's own state (`state`, built in: `~/.claude/`,
    /// `~/.claude.json`, ...): a sandboxed agent process sees it through a
    /// private layer under quorum's state (`runtime::home`), so what it
    /// writes there never reaches the person's own files. `~/` is its
    /// home, `$NAME/` a variable of its environment (or quorum's); a
    /// trailing `/` marks a directory, made when it is missing.
    pub state: Vec<String>,
    /// Its credentials (`credentials`, built in: claude's
    /// `~/.claude/.credentials.json`, codex's `~/.codex/auth.json`, ...):
    /// the person's own files, shared read-write with a sandboxed agent so
    /// that a token it refreshes does not log the person out.
    pub credentials: Vec<String>,
    /// What else a sandboxed agent process may write, shared with the
    /// person (`writable`; none built in). Written as
    /// [`AgentSpec::state`].
    pub writable: Vec<String>,
    /// What inside `writable` stays read-only to it (`protect`). Written
    /// as [`AgentSpec::state`]; a missing one is made (a directory, `{}`
    /// for JSON, else empty) so that it can be bound read-only.
    pub protect: Vec<String>,
    /// Unix sockets its sandboxed processes (the agent's own, its
    /// terminals' commands) may connect to (`unix_sockets`): bound in,
    /// and the seccomp filter then lets them open Unix sockets.
    pub unix_sockets: Vec<String>,
    /// Whether its sandboxed process may make user namespaces
    /// (`user_namespaces`; built in for codex, whose own sandbox nests
    /// bubblewrap; default false).
    pub user_namespaces: bool,
    /// The `[mcp_servers]` it picked by name (`None`: all of them).
    pub mcp_pick: Option<Vec<String>>,
    /// The MCP servers its sessions are given (see `mcp`).
    pub mcp_servers: Vec<McpServerSpec>,
    /// The `[hosts.NAME]` it runs on; `None`: this machine. (For the
    /// `ssh` that starts quorum's proxy there: the host it reaches, whose
    /// proxy's `_quorum/relayed` notifications its connection reads.)
    pub host: Option<String>,
}

impl AgentSpec {
    /// How the commands it runs in quorum's terminals are confined.
    pub fn terminal_policy(&self) -> Policy {
        Policy {
            mode: self.terminal_sandbox,
            network: self.terminal_network,
            unix_sockets: self.paths(&self.unix_sockets, Make::Nothing),
            setting: "terminal_sandbox",
            ..Policy::default()
        }
    }

    /// How its own process is confined, if it is: `sandbox = "bwrap"`
    /// always, unset for a worktree task (`isolated`) when bubblewrap is
    /// installed. It reaches the network (it talks to its model) and
    /// writes its own state.
    pub fn process_policy(&self, isolated: bool) -> Option<Policy> {
        let mode = match (self.sandbox, isolated) {
            (Some(Sandbox::None), _) | (None, false) => return None,
            (Some(Sandbox::Bwrap), _) => Some(Sandbox::Bwrap),
            (None, true) => None,
        };
        Some(Policy {
            mode,
            network: true,
            writable: self.paths(&self.writable, Make::Folders),
            readonly: self.paths(&self.protect, Make::All),
            unix_sockets: self.paths(&self.unix_sockets, Make::Nothing),
            user_namespaces: self.user_namespaces,
            home: self.home(),
            setting: "sandbox",
        })
    }

    /// Its private home: its state seen through a layer under quorum's
    /// state (`<state>/homes/NAME`), its credentials shared. `None` when
    /// it names no state, or there is no state directory (no `HOME`).
    pub fn home(&self) -> Option<crate::runtime::home::Home> {
        self.home_making(Make::Folders)
    }

    /// What a sandboxed process of it keeps private and shares, as
    /// `quorum agents` says it (nothing made).
    pub fn home_described(&self) -> String {
        let Some(home) = self.home_making(Make::Nothing) else {
            return "sandboxed, it names no state of its own: your home is read-only to it"
                .to_string();
        };
        let person = self
            .env
            .get("HOME")
            .cloned()
            .or_else(|| std::env::var("HOME").ok());
        let short = |p: &Path| match person.as_deref().and_then(|h| p.strip_prefix(h).ok()) {
            Some(rest) => format!("~/{}", rest.display()),
            None => p.display().to_string(),
        };
        let list = |paths: &[PathBuf]| {
            paths
                .iter()
                .map(|p| short(p))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut line = format!(
            "sandboxed, its state is private: {} (kept in {})",
            list(&home.state),
            short(&home.store)
        );
        if !home.shared.is_empty() {
            line.push_str(&format!("; shared with you: {}", list(&home.shared)));
        }
        line
    }

    /// Its `credentials` that are there (nothing made): a sign-in it keeps
    /// in a file (claude's `~/.claude/.credentials.json`).
    pub fn credentials_found(&self) -> Vec<PathBuf> {
        self.paths(&self.credentials, Make::Nothing)
            .into_iter()
            .filter(|p| p.exists())
            .collect()
    }

    fn home_making(&self, make: Make) -> Option<crate::runtime::home::Home> {
        let store = crate::runtime::state_dir()?.join("homes").join(&self.name);
        let state = self.paths(&self.state, make);
        if state.is_empty() {
            return None;
        }
        Some(crate::runtime::home::Home {
            store,
            state,
            shared: self.paths(&self.credentials, Make::Nothing),
        })
    }

    /// `entries` ([`AgentSpec::state`], [`AgentSpec::writable`], ...) as
    /// paths: `~/` and `$NAME/` expanded from its environment, else
    /// quorum's (an entry whose variable is unset is left out). What is
    /// missing is made, private, so that it can be bound, as `make` says:
    /// a directory (trailing `/`); a `.json` file as `{}` (a file the agent
    /// would make itself, beside it in a read-only home, could not be
    /// bound); with [`Make::All`], any other file, empty (what must stay
    /// read-only must exist).
    fn paths(&self, entries: &[String], make: Make) -> Vec<PathBuf> {
        let var = |name: &str| {
            self.env
                .get(name)
                .cloned()
                .or_else(|| std::env::var(name).ok())
                .filter(|v| !v.is_empty())
        };
        let mut out = Vec::new();
        for entry in entries {
            let (base, rest) = if let Some(rest) = entry.strip_prefix("~/") {
                (var("HOME"), rest)
            } else if let Some(name) = entry.strip_prefix('$') {
                let (name, rest) = name.split_once('/').unwrap_or((name, ""));
                (var(name), rest)
            } else {
                (Some(String::new()), entry.as_str())
            };
            let Some(base) = base else { continue };
            let path = Path::new(&base).join(rest.trim_end_matches('/'));
            if !path.is_absolute() {
                continue;
            }
            if !path.exists() && make != Make::Nothing {
                if entry.ends_with('/') || rest.is_empty() {
                    let _ = crate::confine::private::dir(&path);
                } else {
                    let json = path.extension().is_some_and(|e| e == "json");
                    if json || make == Make::All {
                        let _ = make_file(&path, if json { b"{}\n" } else { b"" });
                    }
                }
            }
            out.push(path);
        }
        out
    }
}

/// What [`AgentSpec::paths`] makes of what is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Make {
    /// Nothing (credentials, sockets: they are the person's or not there).
    Nothing,
    /// Folders and JSON files.
    Folders,
    /// Any file too.
    All,
}

/// A new private file at `path` holding `content` (its folder made too).
fn make_file(path: &Path, content: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(parent) = path.parent() {
        crate::confine::private::dir(parent)?;
    }
    let mut options = crate::confine::private::file_options();
    options.write(true).create_new(true);
    options.open(path)?.write_all(content)
}

/// An agent that cannot be run: not in the registry, not installed, or
/// configured with a command that is not there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnknownAgent {
    #[error("unknown agent {name:?}; available: {}", if available.is_empty() { "none installed".to_string() } else { available.join(", ") })]
    Unknown {
        name: String,
        available: Vec<String>,
    },
    /// A built-in agent whose command is not on `PATH`.
    #[error("{name} is not installed: `{command}` is not on PATH{}", install.as_ref().map(|i| format!(" ({i})")).unwrap_or_default())]
    NotInstalled {
        name: String,
        command: String,
        install: Option<String>,
    },
    /// An agent whose command is on `PATH` only inside a session
    /// directory, where an agent could have put it (`runtime::path`).
    #[error(
        "{name}: `{command}` is on PATH only at {}, inside the session directory {}, where an agent could have put it: quorum does not start it (give its absolute path as agents.{name}.command to start it anyway)",
        found.display(),
        session.display()
    )]
    InSession {
        name: String,
        command: String,
        found: PathBuf,
        session: PathBuf,
    },
    /// An agent whose command was set in a config file and is not there.
    #[error("{name}: `{command}` {problem} (agents.{name}.command in {})", file.display())]
    BadCommand {
        name: String,
        command: String,
        file: PathBuf,
        /// "is not on PATH", "does not exist", "is not executable".
        problem: &'static str,
    },
}

#[derive(Debug, Clone)]
pub struct Registry {
    agents: BTreeMap<String, AgentSpec>,
    /// `[mcp_servers.NAME]`, by name.
    mcp: BTreeMap<String, McpServerSpec>,
    /// `[hosts.NAME]`, by name.
    hosts: BTreeMap<String, HostSpec>,
}

impl Registry {
    /// The built-in agents only.
    pub fn builtin() -> Self {
        let file = ConfigFile::parse(Path::new(BUILTIN_PATH), BUILTIN)
            .expect("assets/agents.toml is valid");
        let mut registry = Self::empty();
        registry
            .merge(&file)
            .expect("built-in agents all have commands");
        registry
    }

    fn empty() -> Self {
        Self {
            agents: BTreeMap::new(),
            mcp: BTreeMap::new(),
            hosts: BTreeMap::new(),
        }
    }

    /// The built-in agents with the config file's `[agents]`, `[hosts]`
    /// and `[mcp_servers]` merged in.
    pub fn from_config(file: &ConfigFile) -> Result<Self, ConfigError> {
        let mut registry = Self::builtin();
        registry.merge(file)?;
        Ok(registry)
    }

    /// The agents of the config file alone, no built-in one: for tests,
    /// whose agents must not depend on what the machine has on `PATH`.
    pub fn from_config_only(file: &ConfigFile) -> Result<Self, ConfigError> {
        let mut registry = Self::empty();
        registry.merge(file)?;
        Ok(registry)
    }

    /// [`Registry::from_config`] of the file at `path` (none: the built-in
    /// agents), read and checked whole: for tests, and commands that need
    /// nothing else of the file. A front end that needs more reads its file
    /// once ([`ConfigFile::load`]) and hands it on instead.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        Self::from_config(&ConfigFile::load(path)?)
    }

    /// [`Registry::from_config_only`] of the file at `path`, read on its
    /// own (tests).
    pub fn load_only(path: &Path) -> Result<Self, ConfigError> {
        Self::from_config_only(&ConfigFile::read(path)?)
    }

    fn merge(&mut self, file: &ConfigFile) -> Result<(), ConfigError> {
        let path = file.path().unwrap_or(Path::new(BUILTIN_PATH));
        for (name, host) in &file.hosts {
            let spec = check_host(name, host.clone()).map_err(|e| ConfigError::Parse {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
            self.hosts.insert(name.clone(), spec);
        }
        for (name, server) in &file.mcp_servers {
            let server = super::mcp::resolve(server.clone(), name).map_err(|message| {
                ConfigError::Parse {
                    path: path.to_path_buf(),
                    message,
                }
            })?;
            self.mcp.insert(name.clone(), server);
        }
        self.merge_agents(path, file)?;
        // Every agent's servers again: a file may add servers to all.
        for spec in self.agents.values_mut() {
            spec.mcp_servers = super::mcp::pick(&spec.name, spec.mcp_pick.as_deref(), &self.mcp)
                .map_err(|message| ConfigError::Parse {
                    path: path.to_path_buf(),
                    message,
                })?;
        }
        Ok(())
    }

    fn merge_agents(&mut self, path: &Path, file: &ConfigFile) -> Result<(), ConfigError> {
        for (name, entry) in file.agents.clone() {
            let startup_timeout = self.check_agent(path, file, &name, &entry)?;
            // The file that set the command, for messages about it.
            let source = entry
                .command
                .is_some()
                .then(|| path.to_path_buf())
                .filter(|p| p != Path::new(BUILTIN_PATH));
            let spec = match self.agents.remove(&name) {
                Some(base) => merged(&name, base, entry, (startup_timeout, source)),
                None => new_agent(path, &name, entry, (startup_timeout, source))?,
            };
            self.agents.insert(name, spec);
        }
        Ok(())
    }

    /// Checks `[agents.NAME]`: its host is one of `[hosts]`, its startup
    /// timeout a time, its name a name, its command not empty. Its startup
    /// timeout.
    fn check_agent(
        &self,
        path: &Path,
        file: &ConfigFile,
        name: &str,
        entry: &AgentEntry,
    ) -> Result<Option<Duration>, ConfigError> {
        let refuse = |message: String| ConfigError::Parse {
            path: path.to_path_buf(),
            message,
        };
        if let Some(host) = &entry.host
            && !self.hosts.contains_key(host.get_ref())
        {
            let at = file.describe_span(host.span().start);
            return Err(refuse(format!(
                "{at}: [agents.{name}] host = {:?}: there is no [hosts.{}] (known: {})",
                host.get_ref(),
                host.get_ref(),
                if self.hosts.is_empty() {
                    "none".to_string()
                } else {
                    self.hosts.keys().cloned().collect::<Vec<_>>().join(", ")
                }
            )));
        }
        let startup_timeout = match entry.startup_timeout {
            Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Some(Duration::from_secs_f64(s)),
            Some(s) => {
                return Err(refuse(format!(
                    "[agents.{name}] startup_timeout must be a number of seconds above 0, got {s}"
                )));
            }
            None => None,
        };
        if name.trim().is_empty() {
            return Err(refuse(format!("[agents.{name:?}]: an agent needs a name")));
        }
        if !is_name(name) {
            return Err(refuse(format!(
                "[agents.{name:?}]: an agent's name is letters, digits, `-`, `_` and `.` only (it follows @ in a message)"
            )));
        }
        if entry.command.as_ref().is_some_and(|c| c.trim().is_empty()) {
            return Err(refuse(format!("[agents.{name}] command is empty")));
        }
        Ok(startup_timeout)
    }

    /// Applies the config file's `[limits]` to every agent.
    pub fn set_limits(&mut self, limits: Limits) {
        for spec in self.agents.values_mut() {
            spec.limits = limits;
        }
    }

    /// Gives `servers` (a host's, say) to the agent `agent`, or to every
    /// agent: added to what the config file gives it, replacing a server of
    /// the same name.
    pub fn add_mcp_servers(&mut self, servers: &[McpServerSpec], agent: Option<&str>) {
        for spec in self.agents.values_mut() {
            if agent.is_some_and(|a| a != spec.name) {
                continue;
            }
            spec.mcp_servers
                .retain(|s| !servers.iter().any(|n| n.name == s.name));
            spec.mcp_servers.extend(servers.iter().cloned());
        }
    }

    /// The `[hosts.NAME]` of the config, by name.
    pub fn hosts(&self) -> &BTreeMap<String, HostSpec> {
        &self.hosts
    }

    pub fn all(&self) -> impl Iterator<Item = &AgentSpec> {
        self.agents.values()
    }

    /// The agents whose command is found (absolute path, or in `PATH`).
    pub fn installed(&self) -> Vec<&AgentSpec> {
        self.agents
            .values()
            .filter(|a| a.host.is_some() || locate(&a.command).is_some())
            .collect()
    }

    /// The agent called `name`, if it is known and installed; else what
    /// is wrong, and how to mend it.
    pub fn get(&self, name: &str) -> Result<&AgentSpec, UnknownAgent> {
        let Some(spec) = self.agents.get(name) else {
            return Err(UnknownAgent::Unknown {
                name: name.to_string(),
                available: self.installed().iter().map(|a| a.name.clone()).collect(),
            });
        };
        // A host's agent is found there, when it starts.
        if spec.host.is_some() || locate(&spec.command).is_some() {
            return Ok(spec);
        }
        if let Some((found, session)) = crate::runtime::path::shadowed(&spec.command) {
            return Err(UnknownAgent::InSession {
                name: name.to_string(),
                command: spec.command.clone(),
                found,
                session,
            });
        }
        Err(match &spec.source {
            Some(file) => UnknownAgent::BadCommand {
                name: name.to_string(),
                command: spec.command.clone(),
                file: file.clone(),
                problem: command_problem(&spec.command),
            },
            None => UnknownAgent::NotInstalled {
                name: name.to_string(),
                command: spec.command.clone(),
                install: spec.install.clone(),
            },
        })
    }
}

/// Why `command` cannot be run.
fn command_problem(command: &str) -> &'static str {
    if !command.contains('/') {
        "is not on PATH"
    } else if !Path::new(command).exists() {
        "does not exist"
    } else {
        "is not executable"
    }
}

/// A known agent (`base`: built in, or from an earlier file) with what
/// `entry` sets over it; lists (`writable`, `protect`, `unix_sockets`)
/// add to the base's.
fn merged(
    name: &str,
    base: AgentSpec,
    entry: AgentEntry,
    (startup_timeout, source): (Option<Duration>, Option<PathBuf>),
) -> AgentSpec {
    AgentSpec {
        name: name.to_string(),
        command: entry.command.unwrap_or(base.command),
        args: entry.args.unwrap_or(base.args),
        env: entry.env.unwrap_or(base.env),
        description: entry.description.unwrap_or(base.description),
        permissions: entry.permissions.unwrap_or(base.permissions),
        startup_timeout: startup_timeout.unwrap_or(base.startup_timeout),
        install: entry.install.or(base.install),
        model: entry.model.or(base.model),
        mode: entry.mode.or(base.mode),
        source: source.or(base.source),
        limits: base.limits,
        terminal_sandbox: entry.terminal_sandbox.or(base.terminal_sandbox),
        terminal_network: entry.terminal_network.unwrap_or(base.terminal_network),
        sandbox: entry.sandbox.or(base.sandbox),
        state: entry.state.unwrap_or(base.state),
        credentials: entry.credentials.unwrap_or(base.credentials),
        writable: base
            .writable
            .into_iter()
            .chain(entry.writable.unwrap_or_default())
            .collect(),
        protect: base
            .protect
            .into_iter()
            .chain(entry.protect.unwrap_or_default())
            .collect(),
        unix_sockets: base
            .unix_sockets
            .into_iter()
            .chain(entry.unix_sockets.unwrap_or_default())
            .collect(),
        user_namespaces: entry.user_namespaces.unwrap_or(base.user_namespaces),
        mcp_pick: entry.mcp_servers.or(base.mcp_pick),
        mcp_servers: Vec::new(),
        host: entry.host.map(toml::Spanned::into_inner).or(base.host),
    }
}

/// A new agent, as `entry` sets it: it needs a command.
fn new_agent(
    path: &Path,
    name: &str,
    entry: AgentEntry,
    (startup_timeout, source): (Option<Duration>, Option<PathBuf>),
) -> Result<AgentSpec, ConfigError> {
    Ok(AgentSpec {
        command: entry.command.ok_or_else(|| ConfigError::MissingCommand {
            path: path.to_path_buf(),
            name: name.to_string(),
        })?,
        name: name.to_string(),
        args: entry.args.unwrap_or_default(),
        env: entry.env.unwrap_or_default(),
        description: entry.description.unwrap_or_default(),
        permissions: entry.permissions.unwrap_or_default(),
        startup_timeout: startup_timeout.unwrap_or(STARTUP_TIMEOUT),
        install: entry.install,
        model: entry.model,
        mode: entry.mode,
        source,
        limits: Limits::default(),
        terminal_sandbox: entry.terminal_sandbox,
        terminal_network: entry.terminal_network.unwrap_or(false),
        sandbox: entry.sandbox,
        state: entry.state.unwrap_or_default(),
        credentials: entry.credentials.unwrap_or_default(),
        writable: entry.writable.unwrap_or_default(),
        protect: entry.protect.unwrap_or_default(),
        unix_sockets: entry.unix_sockets.unwrap_or_default(),
        user_namespaces: entry.user_namespaces.unwrap_or(false),
        mcp_pick: entry.mcp_servers,
        mcp_servers: Vec::new(),
        host: entry.host.map(toml::Spanned::into_inner),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write_config(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn builtin_knows_the_common_harnesses() {
        let r = Registry::builtin();
        let launch = |n: &str| {
            let a = r.agents.get(n).unwrap_or_else(|| panic!("{n}"));
            std::iter::once(a.command.as_str())
                .chain(a.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(launch("gemini"), "gemini --acp");
        assert_eq!(launch("claude"), "claude-agent-acp");
        assert_eq!(launch("codex"), "codex-acp");
        assert_eq!(launch("opencode"), "opencode acp");
        assert_eq!(launch("qwen"), "qwen --acp");
        assert_eq!(launch("fast-agent"), "fast-agent --no-update-check acp");
        assert_eq!(launch("goose"), "goose acp");
        assert_eq!(launch("kimi"), "kimi acp");
        assert_eq!(launch("vibe"), "vibe-acp");
        assert_eq!(launch("kilo"), "kilo acp");
        assert_eq!(launch("cline"), "cline --acp");
        assert_eq!(launch("devin"), "devin acp");
        assert_eq!(launch("copilot"), "copilot --acp");
    }

    #[test]
    fn config_overrides_field_by_field_and_adds_agents() {
        let f = write_config(
            "[agents.gemini]\npermissions = \"allow\"\n\n[agents.mine]\ncommand = \"/bin/true\"\nargs = [\"--acp\"]\nenv = { A = \"1\" }\n",
        );
        let r = Registry::load(Some(f.path())).unwrap();
        let g = &r.agents["gemini"];
        assert_eq!(
            (g.command.as_str(), g.permissions),
            ("gemini", Permissions::Allow)
        );
        assert_eq!(g.args, ["--acp"]);
        let m = &r.agents["mine"];
        assert_eq!(m.args, ["--acp"]);
        assert_eq!(m.env["A"], "1");
        assert_eq!(r.get("mine").unwrap().command, "/bin/true");
    }

    #[test]
    fn bad_config_names_file_line_and_field() {
        let f = write_config("[agents.x]\ncommand = \"a\"\npermission = \"allow\"\n");
        let e = Registry::load(Some(f.path())).unwrap_err().to_string();
        assert!(
            e.contains(&format!("{}: line 3", f.path().display())),
            "{e}"
        );
        assert!(e.contains("permission"), "{e}");

        let f = write_config("[agents.x]\ncommand = \"a\"\npermissions = \"maybe\"\n");
        let e = Registry::load(Some(f.path())).unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("maybe"), "{e}");

        let f = write_config("[agents.new]\nargs = []\n");
        let e = Registry::load(Some(f.path())).unwrap_err().to_string();
        assert!(e.contains("[agents.new] needs a `command`"), "{e}");

        let e = Registry::load(Some(Path::new("/no/such.toml")))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/no/such.toml: cannot read"), "{e}");
    }

    #[test]
    fn unknown_agent_lists_the_installed_ones() {
        let f = write_config("[agents.here]\ncommand = \"/bin/sh\"\n");
        let r = Registry::load(Some(f.path())).unwrap();
        let e = r.get("nope").unwrap_err();
        assert!(
            matches!(&e, UnknownAgent::Unknown { available, .. } if available.contains(&"here".to_string()))
        );
        assert!(
            e.to_string()
                .starts_with("unknown agent \"nope\"; available: "),
            "{e}"
        );
    }

    /// A built-in agent that is not installed says how to install it.
    #[test]
    fn a_missing_builtin_agent_says_how_to_install_it() {
        let mut r = Registry::builtin();
        // Whatever this machine has installed, make sure it is missing.
        r.agents.get_mut("claude").unwrap().command = "claude-agent-acp-not-here".into();
        assert_eq!(
            r.get("claude").unwrap_err().to_string(),
            "claude is not installed: `claude-agent-acp-not-here` is not on PATH \
             (npm i -g @zed-industries/claude-agent-acp)"
        );
        r.agents.get_mut("devin").unwrap().command = "devin-not-here".into();
        assert_eq!(
            r.get("devin").unwrap_err().to_string(),
            "devin is not installed: `devin-not-here` is not on PATH"
        );
        for a in [
            "claude",
            "codex",
            "gemini",
            "opencode",
            "qwen",
            "fast-agent",
            "vibe",
            "kilo",
            "cline",
            "copilot",
        ] {
            assert!(r.agents[a].install.is_some(), "{a} has an install hint");
        }
    }

    /// An agent whose command a config file set, and that is not there, is
    /// named with the file, the key and the command.
    #[test]
    fn a_configured_command_that_is_not_there_names_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain");
        std::fs::write(&plain, "").unwrap();
        let f = write_config(&format!(
            "[agents.gone]\ncommand = \"/no/such/agent\"\n\n[agents.plain]\ncommand = {plain:?}\n\n\
             [agents.claude]\ncommand = \"claude-acp-nowhere\"\n"
        ));
        let r = Registry::load(Some(f.path())).unwrap();
        let file = f.path().display();
        assert_eq!(
            r.get("gone").unwrap_err().to_string(),
            format!("gone: `/no/such/agent` does not exist (agents.gone.command in {file})")
        );
        assert_eq!(
            r.get("plain").unwrap_err().to_string(),
            format!(
                "plain: `{}` is not executable (agents.plain.command in {file})",
                plain.display()
            )
        );
        assert_eq!(
            r.get("claude").unwrap_err().to_string(),
            format!(
                "claude: `claude-acp-nowhere` is not on PATH (agents.claude.command in {file})"
            )
        );
        for (text, want) in [
            (
                "[agents.x]\ncommand = \"  \"\n",
                "[agents.x] command is empty",
            ),
            ("[agents.\" \"]\ncommand = \"a\"\n", "an agent needs a name"),
            (
                "[agents.\"ev\\u001b[31mil\"]\ncommand = \"a\"\n",
                "[agents.\"ev\\u{1b}[31mil\"]: an agent's name is letters, digits",
            ),
            (
                "[agents.\"two words\"]\ncommand = \"a\"\n",
                "[agents.\"two words\"]: an agent's name is letters, digits",
            ),
        ] {
            let f = write_config(text);
            let e = Registry::load(Some(f.path())).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{}: ", f.path().display())), "{e}");
            assert!(e.contains(want), "{e}");
        }
    }

    /// `[hosts.NAME]` and an agent's `host`: read, and bad input named
    /// with the file, the line and the field.
    #[test]
    fn hosts_are_read_and_bad_ones_named() {
        let f = write_config(
            "[hosts.big]\nssh = \"me@big\"\nssh_args = [\"-p\", \"2222\"]\ndir = \"~/q\"\n\n\
             [agents.far]\ncommand = \"far-acp\"\nhost = \"big\"\n",
        );
        let r = Registry::load_only(f.path()).unwrap();
        let far = r.get("far").unwrap();
        assert_eq!(far.host.as_deref(), Some("big"));
        let big = &r.hosts()["big"];
        assert_eq!(
            (big.ssh.as_str(), big.ssh_args.clone(), big.dir.as_deref()),
            (
                "me@big",
                vec!["-p".to_string(), "2222".to_string()],
                Some("~/q")
            )
        );
        for (text, want) in [
            (
                "[agents.far]\ncommand = \"x\"\nhost = \"nowhere\"\n",
                "line 3, column 8: [agents.far] host = \"nowhere\": there is no [hosts.nowhere] (known: none)",
            ),
            (
                "[hosts.h]\nssh = \"-oProxyCommand=x\"\n",
                "[hosts.h] ssh = \"-oProxyCommand=x\"",
            ),
            ("[hosts.h]\nssh = \"\"\n", "[hosts.h] ssh = \"\""),
            ("[hosts.h]\nssh = \"a\"\nport = 22\n", "line 3"),
            ("[hosts.h]\nssh_args = []\n", "ssh"),
            ("[hosts.h]\nssh = \"a\"\ndir = \" \"\n", "[hosts.h] dir"),
            ("[hosts.\"a b\"]\nssh = \"a\"\n", "a host's name"),
        ] {
            let f = write_config(text);
            let e = Registry::load_only(f.path()).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{}: ", f.path().display())), "{e}");
            assert!(e.contains(want), "{e}");
        }
    }
}
