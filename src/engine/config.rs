//! Where a session's settings come from: the config file (read once, a
//! [`ConfigFile`]), the environment and the command line, taken into a
//! [`SessionConfig`]; and the state directory (logs, recorded sessions).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::acp::registry::{Registry, UnknownAgent};
use crate::agent::Permissions;
use crate::config::{ConfigError, ConfigFile, InternalSection, Source};
use crate::confine::fsroot::Root;
use crate::confine::limits::Limits;
use crate::llm::{LlmError, Model};
use crate::transcript::RecordError;
use crate::transcript::TerminalSize;
use crate::transcript::sessions::SessionError;

/// Why a session could not be set up: the config file, the command line's
/// `--cwd` and `--model`, the session to continue or the transcript to
/// record to. The text is what the person reads.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `--cwd DIR` is no session directory.
    #[error("--cwd {}: {error}", dir.display())]
    Cwd { dir: PathBuf, error: std::io::Error },
    #[error("reading the current directory")]
    CurrentDir(#[source] std::io::Error),
    /// `--model acp:NAME` names no agent that can be started.
    #[error("--model {spec}: {error}")]
    Conductor { spec: String, error: UnknownAgent },
    #[error(transparent)]
    Model(#[from] LlmError),
    /// The conductor could not be made.
    #[error(transparent)]
    NoConductor(#[from] super::conductor::ConductorError),
    #[error("no state directory (set HOME or XDG_STATE_HOME)")]
    NoStateDir,
    /// `--continue` with nothing recorded here.
    #[error(
        "no session recorded for {} yet (`quorum sessions --all` lists every directory's)",
        root.display()
    )]
    NothingRecorded { root: PathBuf },
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The recorded session cannot be continued.
    #[error("cannot continue {}", path.display())]
    Continue {
        path: PathBuf,
        #[source]
        error: RecordError,
    },
    /// The transcript cannot be recorded to.
    #[error("cannot record to {}: choose a new file name", path.display())]
    Record {
        path: PathBuf,
        #[source]
        error: RecordError,
    },
}

type Result<T, E = SetupError> = std::result::Result<T, E>;

/// Everything a session is built from, for the TUI, `call`, `run` and the
/// tests alike.
pub struct SessionConfig {
    pub registry: Registry,
    /// The session directory: agents run there, and may only read and
    /// write inside it.
    pub root: Root,
    /// The answer to permission requests of agents whose own policy is
    /// `ask`: `Ask` (the person decides, in the TUI), or `--approve`'s.
    pub permissions: Permissions,
    /// The chat model, if one is configured; internal agents run on it.
    pub model: Option<Arc<dyn Model>>,
    /// The chat's conductor instead of a model (`--model acp:NAME`): the
    /// registry's agent NAME.
    pub conductor: Option<String>,
    /// When no chat was chosen: the one quorum picked (an installed agent,
    /// a keyed provider's model, or nothing), said at the session's start.
    /// `None`: a chat was chosen (`none` too), or none was looked for.
    pub default_chat: Option<super::chats::DefaultChat>,
    /// For `/model SPEC`: the base URL new models use.
    pub base_url: Option<String>,
    /// How deep internal agents may nest sub-agent calls of their own.
    pub agent_depth: u32,
    /// Record the session's events to this new transcript file.
    pub record: Option<PathBuf>,
    /// The terminal size, for the transcript header (0x0 headless).
    pub terminal: TerminalSize,
    /// Where the models people pick for agents are kept (`None`: for this
    /// process only).
    pub model_picks: Option<PathBuf>,
    /// How many tasks of one batch run at once (`max_parallel` in the
    /// config file).
    pub max_parallel: usize,
    /// Who reviews an arena's branches (`[arena] reviewers`; `None`:
    /// every installed agent).
    pub arena_reviewers: Option<Vec<String>>,
    /// The config file's `[limits]`.
    pub limits: Limits,
    /// Spending caps (`[budget]`, `--max-cost`, `--max-tokens`); none set:
    /// a continued session keeps those it recorded.
    pub caps: crate::event::budget::Caps,
    /// `[prices]`, over the built-in table (`engine::prices`).
    pub prices: std::collections::BTreeMap<String, crate::event::budget::Price>,
    /// Go on with this recorded session (`--continue`, `--resume`): it is
    /// read back, and the session appends to it.
    pub resume: Option<PathBuf>,
    /// What agents' elicitations get: `Ask` (the person, in the TUI), or
    /// `--elicit`'s.
    pub elicit: crate::agent::Elicit,
    /// How the internal agent's shell commands are confined (`[internal]`
    /// in the config file: `terminal_sandbox`, `terminal_network`).
    pub internal_shell: crate::runtime::sandbox::Policy,
    /// `[worktree]`: isolated writers' setup, check, signing and caches.
    pub worktree: crate::worktree::Settings,
    /// `[notify]`: which events notify, and the program run for them.
    pub notify: super::notify::Settings,
    /// What a front end does with a continued session's recorded events
    /// (its screen takes them up): called once, on a thread of its own
    /// while the engine takes them up too. With it, the session keeps
    /// none of them ([`Session::take_history`] has nothing).
    ///
    /// [`Session::take_history`]: super::Session::take_history
    pub on_history: Option<OnHistory>,
}

/// `--max-cost` and `--max-tokens`, once for the process: over `[budget]`.
static COMMAND_LINE_CAPS: std::sync::OnceLock<(Option<f64>, Option<u64>)> =
    std::sync::OnceLock::new();

/// Sets the command line's caps (once, at start) for every session the
/// process builds.
pub fn set_command_line_caps(max_cost: Option<f64>, max_tokens: Option<u64>) {
    let _ = COMMAND_LINE_CAPS.set((max_cost, max_tokens));
}

/// See [`SessionConfig::on_history`].
pub type OnHistory = Box<dyn FnOnce(&[crate::event::Stamped]) + Send>;

impl SessionConfig {
    /// A session in `root` with `registry`, no model, no recording, and
    /// permission requests answered by the person.
    pub fn new(registry: Registry, root: Root) -> Self {
        Self {
            registry,
            root,
            permissions: Permissions::Ask,
            model: None,
            conductor: None,
            default_chat: None,
            base_url: None,
            agent_depth: 0,
            record: None,
            terminal: TerminalSize { cols: 0, rows: 0 },
            model_picks: None,
            max_parallel: crate::subagent::dispatch::MAX_PARALLEL,
            arena_reviewers: None,
            limits: Limits::default(),
            caps: crate::event::budget::Caps::default(),
            prices: std::collections::BTreeMap::new(),
            resume: None,
            elicit: crate::agent::Elicit::Ask,
            internal_shell: internal_policy(None),
            worktree: crate::worktree::Settings::default(),
            on_history: None,
            notify: super::notify::Settings::default(),
        }
    }

    /// Takes the config file's top-level settings (`max_parallel`), its
    /// `[limits]`, `[internal]`, `[worktree]`, `[arena]`, `[budget]` and `[notify]`.
    pub fn take_settings(&mut self, file: &ConfigFile) {
        self.max_parallel = file
            .max_parallel
            .unwrap_or(crate::subagent::dispatch::MAX_PARALLEL);
        self.internal_shell = internal_policy(file.internal.as_ref());
        self.worktree = worktree_settings(file);
        self.arena_reviewers = file.arena.as_ref().and_then(|a| a.reviewers.clone());
        let b = file.budget.clone().unwrap_or_default();
        let (max_cost, max_tokens) = *COMMAND_LINE_CAPS.get().unwrap_or(&(None, None));
        self.caps = crate::event::budget::Caps {
            session_usd: max_cost.or(b.session_usd),
            task_usd: b.task_usd,
            tokens: max_tokens.or(b.tokens),
        };
        self.prices = file.prices.clone();
        self.notify = super::notify::Settings {
            kinds: file.notify.clone().unwrap_or_default().kinds(),
            command: file.notify.as_ref().and_then(|n| n.command.clone()),
        };
        let limits = file.limits();
        self.limits = limits;
        self.registry.set_limits(limits);
        self.root = self.root.clone().with_max_read(limits.max_read_bytes);
    }

    /// [`SessionConfig::take_settings`] of the file at `config`, read and
    /// checked on its own: for tests, which have only a path. A front end
    /// reads its file once and hands the [`ConfigFile`] on.
    pub fn read_settings(&mut self, config: Option<&Path>) -> Result<()> {
        self.take_settings(&ConfigFile::load(config)?);
        Ok(())
    }
}

/// The interactive session: in the current directory, the person answers
/// permission requests, recorded to `record` (`Some(None)`: to the default
/// place under the state directory; `None`: not at all).
pub fn interactive(
    file: &ConfigFile,
    model: &ModelChoice,
    record: Option<Option<PathBuf>>,
    (cols, rows): (u16, u16),
) -> Result<SessionConfig> {
    init_logging();
    let mut session = SessionConfig::new(registry(file)?, root(None)?);
    session.take_settings(file);
    session.choose_model(model, file)?;
    session.record = record.and_then(|path| path.or_else(default_record_path));
    session.terminal = TerminalSize { cols, rows };
    session.model_picks = model_picks_path();
    Ok(session)
}

/// The model options of the command line.
#[derive(Debug, Clone, Default)]
pub struct ModelChoice {
    /// `--model PROVIDER:NAME`.
    pub spec: Option<String>,
    /// `--base-url URL`.
    pub base_url: Option<String>,
    /// `--agent-depth N`.
    pub agent_depth: u32,
    /// Take only a chat that was chosen, never the default one (`quorum
    /// mcp`, whose host is the chat).
    pub chosen_only: bool,
}

/// The agents: built in, with the config file's merged in.
pub fn registry(file: &ConfigFile) -> Result<Registry> {
    Ok(Registry::from_config(file)?)
}

/// The session directory: `--cwd DIR`, else the current directory.
pub fn root(cwd: Option<&Path>) -> Result<Root> {
    match cwd {
        Some(d) => crate::runtime::git::root(d).map_err(|error| SetupError::Cwd {
            dir: d.to_path_buf(),
            error,
        }),
        None => std::env::current_dir()
            .and_then(|d| crate::runtime::git::root(&d))
            .map_err(SetupError::CurrentDir),
    }
}

pub fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// How the internal agent's shell commands are confined (`[internal]`),
/// as `terminal_sandbox` and `terminal_network` do for an ACP agent's.
/// `[worktree]` as the dispatcher takes it: `share`'s `~/` expanded (a
/// path that is not absolute then is left out), `check_timeout` in
/// seconds.
pub fn worktree_settings(file: &ConfigFile) -> crate::worktree::Settings {
    let section = file.worktree.clone().unwrap_or_default();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let share = section
        .share
        .unwrap_or_default()
        .iter()
        .filter_map(|entry| match entry.strip_prefix("~/") {
            Some(rest) => home.as_ref().map(|h| h.join(rest)),
            None => Some(PathBuf::from(entry)),
        })
        .filter(|p| p.is_absolute())
        .collect();
    let defaults = crate::worktree::Settings::default();
    crate::worktree::Settings {
        sign: section.sign.unwrap_or(false),
        setup: section.setup.filter(|s| !s.trim().is_empty()),
        share,
        check: section.check.filter(|s| !s.trim().is_empty()),
        check_timeout: section
            .check_timeout
            .map_or(defaults.check_timeout, std::time::Duration::from_secs),
    }
}

fn internal_policy(section: Option<&InternalSection>) -> crate::runtime::sandbox::Policy {
    let section = section.cloned().unwrap_or_default();
    crate::runtime::sandbox::Policy {
        mode: section.terminal_sandbox,
        network: section.terminal_network.unwrap_or(false),
        setting: "terminal_sandbox",
        ..Default::default()
    }
}

/// The chat model's settings in effect, each with where it came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelSettings {
    /// `--model`, else `$QUORUM_MODEL`, else `[model] name`.
    pub spec: Option<(String, Source)>,
    /// `--base-url`, else (unless the provider's variable, `OPENAI_BASE_URL`
    /// say, is set: the provider reads it) `[model] base_url`; without
    /// any, the provider's own URL. As `--base-url`'s help says.
    pub base_url: Option<(String, Source)>,
}

impl ModelSettings {
    /// From the flags (`choice`), the environment (`env`) and the file.
    pub fn resolve(
        choice: &ModelChoice,
        file: &ConfigFile,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Self {
        let section = file.model.clone().unwrap_or_default();
        let spec = choice
            .spec
            .clone()
            .map(|s| (s, Source::Flag("--model")))
            .or_else(|| {
                crate::llm::select::default_spec(env).map(|s| (s, Source::Env("QUORUM_MODEL")))
            })
            .or_else(|| Some((section.name?, file.source(&["model", "name"]))));
        let variable_set = spec
            .as_ref()
            .and_then(|(spec, _)| crate::llm::select::base_url_variable(spec))
            .is_some_and(|v| env(v).is_some());
        let base_url = choice
            .base_url
            .clone()
            .map(|u| (u, Source::Flag("--base-url")))
            .or_else(|| {
                if variable_set {
                    return None;
                }
                Some((section.base_url?, file.source(&["model", "base_url"])))
            });
        Self { spec, base_url }
    }

    /// The base URL the model will use: [`ModelSettings::base_url`], else
    /// its provider's variable when set (`OPENAI_BASE_URL`, ...); `None`:
    /// the provider's own.
    pub fn base_url_in_effect(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<(String, Source)> {
        let variable = self
            .spec
            .as_ref()
            .and_then(|(spec, _)| crate::llm::select::base_url_variable(spec));
        let from_env = variable.and_then(|v| Some((env(v)?, Source::Env(v))));
        self.base_url.clone().or(from_env)
    }
}

impl SessionConfig {
    /// Sets the chat from the flags, the environment and the config file;
    /// when none names one, the default ([`super::chats::default_chat`]:
    /// an installed agent, else a keyed provider's model), unless
    /// `choice.chosen_only`; `none` keeps the chat off. Also the base URL
    /// `/model` uses, and how deep internal agents may nest.
    pub fn choose_model(&mut self, choice: &ModelChoice, file: &ConfigFile) -> Result<()> {
        let settings = ModelSettings::resolve(choice, file, &env_var);
        self.base_url = settings.base_url.map(|(url, _)| url);
        self.agent_depth = choice.agent_depth;
        self.model = None;
        self.conductor = None;
        self.default_chat = None;
        let spec = match settings.spec {
            Some((spec, _)) => spec,
            None if choice.chosen_only => return Ok(()),
            None => {
                let picked = super::chats::default_chat(&self.registry, &env_var);
                let spec = picked.spec();
                self.default_chat = Some(picked);
                let Some(spec) = spec else { return Ok(()) };
                spec
            }
        };
        if crate::llm::select::is_none(&spec) {
            return Ok(());
        }
        match conductor_of(&spec) {
            Some(name) => {
                self.registry
                    .get(name)
                    .map_err(|error| SetupError::Conductor {
                        spec: spec.clone(),
                        error,
                    })?;
                self.conductor = Some(name.to_string());
            }
            None => {
                self.model = Some(crate::llm::select::from_spec(
                    &spec,
                    self.base_url.as_deref(),
                    &env_var,
                )?)
            }
        }
        Ok(())
    }
}

/// The agent a `--model acp:NAME` names as the chat's conductor.
pub fn conductor_of(spec: &str) -> Option<&str> {
    spec.strip_prefix("acp:").map(str::trim)
}

pub use crate::runtime::state_dir;

/// Where sessions are recorded by default: `<state dir>/sessions`.
pub fn sessions_dir() -> Option<PathBuf> {
    state_dir().map(|d| d.join("sessions"))
}

/// Logs go to a file under the state directory: nothing may print over
/// the TUI.
pub fn init_logging() {
    let Some(dir) = state_dir() else { return };
    if crate::confine::private::dir(&dir).is_err() {
        return;
    }
    let mut options = crate::confine::private::file_options();
    options.create(true).append(true);
    let Ok(file) = options.open(dir.join("quorum.log")) else {
        return;
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("QUORUM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .with_env_filter(filter)
        .try_init();
}

/// `<state dir>/model-picks.json`.
pub fn model_picks_path() -> Option<PathBuf> {
    let dir = state_dir()?;
    crate::confine::private::dir(&dir).ok()?;
    Some(dir.join("model-picks.json"))
}

/// `<state dir>/history.jsonl`: the messages sent from the composer, for
/// ↑/↓ in every session of this person.
pub fn history_path() -> Option<PathBuf> {
    let dir = state_dir()?;
    crate::confine::private::dir(&dir).ok()?;
    Some(dir.join("history.jsonl"))
}

/// `<state dir>/sessions/<start time>-<pid>.jsonl`: where the TUI records
/// by default.
pub fn default_record_path() -> Option<PathBuf> {
    let dir = sessions_dir()?;
    crate::confine::private::dir(&dir).ok()?;
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "-");
    Some(dir.join(format!("{stamp}-{}.jsonl", std::process::id())))
}

/// The newest session recorded for the directory `root` (`--continue`).
pub fn newest_session(root: &Path) -> Result<PathBuf> {
    let dir = sessions_dir().ok_or(SetupError::NoStateDir)?;
    crate::transcript::sessions::newest_for(&dir, root).ok_or_else(|| SetupError::NothingRecorded {
        root: root.to_path_buf(),
    })
}

/// The session `--resume ID|FILE` names: a transcript file, or a session
/// id (or a unique start of one) under the sessions directory.
pub fn find_session(id: &str) -> Result<PathBuf> {
    let dir = sessions_dir().ok_or(SetupError::NoStateDir)?;
    Ok(crate::transcript::sessions::find(&dir, id)?)
}

/// The error and its causes, each said once: a cause whose text the
/// message before it already carries is left out. (An `anyhow::Error`'s
/// chain is its `as_ref()`'s.)
pub fn error_message(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    let chain = std::iter::successors(Some(e), |e| e.source());
    for cause in chain {
        let part = cause.to_string();
        if !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    }

    fn session() -> SessionConfig {
        let dir = std::env::temp_dir();
        SessionConfig::new(Registry::builtin(), Root::new(&dir).unwrap())
    }

    #[test]
    fn max_parallel_defaults_to_four_and_is_read_from_the_file() {
        let mut s = session();
        assert_eq!(s.max_parallel, 4);
        s.read_settings(None).unwrap();
        assert_eq!(s.max_parallel, 4);
        let f = file("max_parallel = 2\n\n[agents.x]\ncommand = \"/bin/sh\"\n");
        s.read_settings(Some(f.path())).unwrap();
        assert_eq!(s.max_parallel, 2);
        // The agents in the same file still load.
        assert!(Registry::load(Some(f.path())).unwrap().get("x").is_ok());
    }

    #[test]
    fn a_bad_max_parallel_names_the_line() {
        for (text, expect) in [
            (
                "\nmax_parallel = 0\n",
                "line 2, column 16: max_parallel must be at least 1",
            ),
            ("max_parallel = \"four\"\n", "line 1"),
            ("max_parallel = -1\n", "line 1"),
        ] {
            let f = file(text);
            let e = session().read_settings(Some(f.path())).unwrap_err();
            assert!(e.to_string().contains(expect), "{text}: {e}");
        }
    }

    /// `--model` over `$QUORUM_MODEL` over `[model] name`; `--base-url`
    /// over `[model] base_url` over the provider's variable: what the
    /// session takes and `quorum config` says.
    #[test]
    fn model_settings_come_from_flag_environment_then_file() {
        let f = file("[model]\nname = \"openai:filed\"\nbase_url = \"http://file/v1\"\n");
        let config = ConfigFile::read(f.path()).unwrap();
        let at = |line| Source::File {
            path: f.path().to_path_buf(),
            line,
        };
        let env = |name: &str| match name {
            "QUORUM_MODEL" => Some("openai:env".to_string()),
            "OPENAI_BASE_URL" => Some("http://env/v1".to_string()),
            _ => None,
        };
        let none = |_: &str| None;
        let flags = ModelChoice {
            spec: Some("openai:flag".into()),
            base_url: Some("http://flag/v1".into()),
            agent_depth: 0,
            chosen_only: false,
        };
        let s = ModelSettings::resolve(&flags, &config, &env);
        assert_eq!(
            s.spec,
            Some(("openai:flag".into(), Source::Flag("--model")))
        );
        assert_eq!(
            s.base_url_in_effect(&env),
            Some(("http://flag/v1".into(), Source::Flag("--base-url")))
        );
        let s = ModelSettings::resolve(&ModelChoice::default(), &config, &env);
        assert_eq!(
            s.spec,
            Some(("openai:env".into(), Source::Env("QUORUM_MODEL")))
        );
        // The provider's variable comes before the file's base URL.
        assert_eq!(
            s.base_url_in_effect(&env),
            Some(("http://env/v1".into(), Source::Env("OPENAI_BASE_URL")))
        );
        let s = ModelSettings::resolve(&ModelChoice::default(), &config, &none);
        assert_eq!(s.spec, Some(("openai:filed".into(), at(2))));
        assert_eq!(s.base_url, Some(("http://file/v1".into(), at(3))));
        let empty = ConfigFile::default();
        let s = ModelSettings::resolve(&ModelChoice::default(), &empty, &env);
        assert_eq!(
            s.base_url_in_effect(&env),
            Some(("http://env/v1".into(), Source::Env("OPENAI_BASE_URL")))
        );
        let s = ModelSettings::resolve(&ModelChoice::default(), &empty, &none);
        assert_eq!(s, ModelSettings::default());
    }
}
