//! The config file (`~/.config/quorum/config.toml`, `$QUORUM_CONFIG`,
//! `--config FILE`): one typed [`ConfigFile`] for all of it, read once per
//! process and strictly. A field no part of quorum knows, at any level, is
//! refused with the file, the line, the section and the nearest known name.
//! The parts of quorum take their sections from it: the registry
//! (`acp::registry`) its agents, hosts and MCP servers, the session
//! (`engine::config`) its settings, `serve` its `[mcp]` and `[acp]`.
//!
//! [`ConfigFile::parse`] is the check on its own, for a text in hand.

mod error;
mod hosts;
mod sections;

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use error::{ConfigError, UnknownField, distance, nearest};
pub use hosts::{HostError, HostSpec, check_host};
pub use sections::{
    AcpSection, AgentEntry, ArenaSection, BudgetSection, HostEntry, InternalSection, McpSection,
    McpServerEntry, ModelSection, NotifySection, WorktreeSection,
};

use crate::confine::limits::Limits;

/// The whole config file, as it says it: what is not set is `None` (or
/// empty); the defaults belong to the parts that take each setting.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Whether the TUI rings the terminal bell when a task starts waiting
    /// for the person (default true).
    pub bell: Option<bool>,
    /// How many tasks of one batch run at once.
    #[serde(default, deserialize_with = "sections::at_least_one")]
    pub max_parallel: Option<usize>,
    pub model: Option<ModelSection>,
    /// What one piece of outside input may cost.
    pub limits: Option<Limits>,
    pub internal: Option<InternalSection>,
    pub mcp: Option<McpSection>,
    pub acp: Option<AcpSection>,
    pub worktree: Option<WorktreeSection>,
    pub arena: Option<ArenaSection>,
    pub budget: Option<BudgetSection>,
    pub notify: Option<NotifySection>,
    /// `[prices]`: by model (or agent) name, what a million tokens cost
    /// (`input`, `output`, USD), over the built-in table.
    #[serde(default)]
    pub prices: BTreeMap<String, crate::event::budget::Price>,
    #[serde(default)]
    pub agents: BTreeMap<String, AgentEntry>,
    #[serde(default)]
    pub hosts: BTreeMap<String, HostEntry>,
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, McpServerEntry>,
    /// The file and where each of its keys is (`None`: no file).
    #[serde(skip)]
    origin: Option<Origin>,
}

/// What may name an agent, an MCP server or a host: letters, digits, `-`,
/// `_` and `.` (what `@NAME` in a message can say).
pub fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '-' || c == '_' || c == '.')
}

/// The text a [`ConfigFile`] was read from, for the places of its values.
#[derive(Debug, Clone)]
struct Origin {
    path: PathBuf,
    text: String,
    keys: Vec<Key>,
}

/// One key of the file: its path of names, where the key is (bytes), and
/// whether its value is a table.
#[derive(Debug, Clone)]
struct Key {
    path: Vec<String>,
    key: Range<usize>,
    table: bool,
}

/// The tables of the top level (the other names there are settings).
const SECTIONS: &[&str] = &[
    "model",
    "limits",
    "internal",
    "mcp",
    "acp",
    "worktree",
    "arena",
    "budget",
    "notify",
    "prices",
    "agents",
    "hosts",
    "mcp_servers",
];

impl ConfigFile {
    /// The file at `path`, read once and checked.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// [`ConfigFile::read`], or no file at all (every default).
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        path.map_or_else(|| Ok(Self::default()), Self::read)
    }

    /// `text` as the config file `path` (named in errors), checked: bad
    /// TOML, a value of the wrong kind, or a name no part of quorum knows
    /// is an error naming its line.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let bad = |message: String| ConfigError::Parse {
            path: path.to_path_buf(),
            message,
        };
        let document =
            toml::de::DeTable::parse(text).map_err(|e| bad(describe_toml_error(text, &e)))?;
        let mut keys = Vec::new();
        index(document.get_ref(), &mut Vec::new(), &mut keys);
        let mut file: ConfigFile = toml::from_str(text).map_err(|e| {
            unknown_field(path, text, &keys, &e)
                .unwrap_or_else(|| bad(describe_toml_error(text, &e) + &unknown_value(&e)))
        })?;
        file.origin = Some(Origin {
            path: path.to_path_buf(),
            text: text.to_string(),
            keys,
        });
        Ok(file)
    }

    /// The file it was read from (`None`: no file).
    pub fn path(&self) -> Option<&Path> {
        self.origin.as_ref().map(|o| o.path.as_path())
    }

    /// The line (from 1) of the key at `path` (`["limits",
    /// "max_read_bytes"]`, `["agents", "mine"]`), if the file sets it.
    pub fn line(&self, path: &[&str]) -> Option<usize> {
        let origin = self.origin.as_ref()?;
        let key = origin.keys.iter().find(|k| k.path == path)?;
        Some(position(&origin.text, key.key.start).0)
    }

    /// Where the value at `path` comes from: the file's line, else the
    /// default.
    pub fn source(&self, path: &[&str]) -> Source {
        match (self.path(), self.line(path)) {
            (Some(file), Some(line)) => Source::File {
                path: file.to_path_buf(),
                line,
            },
            _ => Source::Default,
        }
    }

    /// `line N, column M` of byte `at` of the file.
    pub fn describe_span(&self, at: usize) -> String {
        let text = self.origin.as_ref().map_or("", |o| o.text.as_str());
        let (line, column) = position(text, at);
        format!("line {line}, column {column}")
    }

    /// `bell` (default true).
    pub fn bell(&self) -> bool {
        self.bell.unwrap_or(true)
    }

    /// `[limits]` (the defaults without it).
    pub fn limits(&self) -> Limits {
        self.limits.unwrap_or_default()
    }
}

/// Where a setting in effect came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// quorum's own default.
    Default,
    /// Built into quorum (`assets/agents.toml`).
    BuiltIn,
    /// The config file, at this line.
    File { path: PathBuf, line: usize },
    /// An environment variable.
    Env(&'static str),
    /// A command-line flag.
    Flag(&'static str),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::BuiltIn => f.write_str("built in"),
            Source::File { path, line } => write!(f, "{}:{line}", path.display()),
            Source::Env(name) => write!(f, "${name}"),
            Source::Flag(flag) => f.write_str(flag),
        }
    }
}

/// Which config file a process reads, and what named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// `None`: no file (the default one does not exist).
    pub path: Option<PathBuf>,
    /// `--config`, `$QUORUM_CONFIG`, or the default place.
    pub source: Source,
}

impl Location {
    /// `--config FILE` (`flag`), else `$QUORUM_CONFIG`, else
    /// `$XDG_CONFIG_HOME/quorum/config.toml` (`~/.config/quorum/...`) if it
    /// exists.
    pub fn find(flag: Option<PathBuf>) -> Self {
        if let Some(path) = flag {
            return Self {
                path: Some(path),
                source: Source::Flag("--config"),
            };
        }
        if let Some(p) = std::env::var_os("QUORUM_CONFIG").filter(|p| !p.is_empty()) {
            return Self {
                path: Some(PathBuf::from(p)),
                source: Source::Env("QUORUM_CONFIG"),
            };
        }
        Self {
            path: default_path().filter(|p| p.exists()),
            source: Source::Default,
        }
    }

    /// The file, read and checked ([`ConfigFile::load`]).
    pub fn read(&self) -> Result<ConfigFile, ConfigError> {
        ConfigFile::load(self.path.as_deref())
    }
}

/// `$XDG_CONFIG_HOME/quorum/config.toml`, else `~/.config/quorum/config.toml`.
pub fn default_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".config")))?;
    Some(base.join("quorum/config.toml"))
}

/// Every key of `table` (and of the tables in it), under `path`.
fn index(table: &toml::de::DeTable<'_>, path: &mut Vec<String>, out: &mut Vec<Key>) {
    for (key, value) in table {
        path.push(key.get_ref().to_string());
        let inner = value.get_ref().as_table();
        out.push(Key {
            path: path.clone(),
            key: key.span(),
            table: inner.is_some(),
        });
        if let Some(inner) = inner {
            index(inner, path, out);
        }
        path.pop();
    }
}

/// A serde "unknown field" error as [`ConfigError::UnknownField`]: the key
/// it names found by its place in the text, its section, the names known
/// there and the nearest of them. `None` for any other error.
fn unknown_field(
    path: &Path,
    text: &str,
    keys: &[Key],
    e: &toml::de::Error,
) -> Option<ConfigError> {
    let message = e.message();
    let rest = message.strip_prefix("unknown field `")?;
    let (field, expected) = rest.split_once('`')?;
    // "expected `a`", "expected `a` or `b`", "expected one of `a`, `b`",
    // "there are no fields": the names are the quoted words.
    let known: Vec<String> = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    let at = e.span().map_or(0, |s| s.start);
    let key = keys
        .iter()
        .find(|k| k.key.contains(&at) && k.path.last().is_some_and(|l| l == field))
        .or_else(|| {
            keys.iter()
                .find(|k| k.path.last().is_some_and(|l| l == field))
        })?;
    let parent = &key.path[..key.path.len() - 1];
    let place = if parent.is_empty() {
        String::new()
    } else {
        format!(
            "[{}]",
            parent.iter().map(|p| bare(p)).collect::<Vec<_>>().join(".")
        )
    };
    let section = parent.is_empty() && key.table;
    let candidates: Vec<String> = if section {
        known
            .iter()
            .filter(|k| SECTIONS.contains(&k.as_str()))
            .cloned()
            .collect()
    } else {
        known.clone()
    };
    let nearest = nearest(field, &candidates).map(str::to_string);
    let (line, column) = position(text, key.key.start);
    Some(ConfigError::UnknownField(Box::new(UnknownField {
        path: path.to_path_buf(),
        line,
        column,
        field: field.to_string(),
        place,
        section,
        nearest,
        known: candidates,
    })))
}

/// For a serde "unknown variant" error (a value none of a setting's names,
/// `[notify] events = ["need_you"]`): `; did you mean `needs_you`?` when
/// one is near; else nothing (the error lists the names).
fn unknown_value(e: &toml::de::Error) -> String {
    let Some(rest) = e.message().strip_prefix("unknown variant `") else {
        return String::new();
    };
    let Some((value, expected)) = rest.split_once('`') else {
        return String::new();
    };
    let known: Vec<String> = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    nearest(value, &known).map_or_else(String::new, |n| format!("; did you mean `{n}`?"))
}

/// A key as TOML writes it: bare when it can be, else quoted.
fn bare(key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if plain {
        key.to_string()
    } else {
        format!("{key:?}")
    }
}

/// `line N, column M: message`, from a TOML error's byte span.
pub fn describe_toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim_end().to_string();
    match e.span() {
        Some(span) => {
            let (line, column) = position(text, span.start);
            format!("line {line}, column {column}: {message}")
        }
        None => message,
    }
}

/// The line and column (from 1) of byte `at` in `text`.
fn position(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        ConfigFile::parse(Path::new("/c/quorum.toml"), text)
            .unwrap_err()
            .to_string()
    }

    /// The typos found on 2569e21, each refused with the file, the line,
    /// the section and the nearest name.
    #[test]
    fn unknown_names_are_refused_with_their_place_and_nearest_name() {
        assert_eq!(
            error("bell = false\nmax_paralel = 3\n"),
            "/c/quorum.toml: line 2, column 1: unknown field `max_paralel` at the top level; \
             did you mean `max_parallel`?"
        );
        assert_eq!(
            error("[limts]\nmax_read_bytes = 10\n"),
            "/c/quorum.toml: line 1, column 2: unknown section [limts]; did you mean [limits]?"
        );
        assert_eq!(
            error("[mcp]\nsync_secs = 5\n"),
            "/c/quorum.toml: line 2, column 1: unknown field `sync_secs` in [mcp]; \
             did you mean `sync_seconds`?"
        );
        assert_eq!(
            error("[worktree]\nchek = \"cargo test\"\n"),
            "/c/quorum.toml: line 2, column 1: unknown field `chek` in [worktree]; \
             did you mean `check`?"
        );
        assert_eq!(
            error("[worktre]\ncheck = \"x\"\n"),
            "/c/quorum.toml: line 1, column 2: unknown section [worktre]; did you mean [worktree]?"
        );
        assert_eq!(
            error("# mine\n[model]\nnmae = \"openai:x\"\n"),
            "/c/quorum.toml: line 3, column 1: unknown field `nmae` in [model]; did you mean `name`?"
        );
        assert_eq!(
            error("[agents.mine]\ncommand = \"x\"\npermission = \"allow\"\n"),
            "/c/quorum.toml: line 3, column 1: unknown field `permission` in [agents.mine]; \
             did you mean `permissions`?"
        );
        // Dotted keys and inline tables name the same place.
        assert!(
            error("limits.max_reed_bytes = 1\n")
                .contains("line 1, column 8: unknown field `max_reed_bytes` in [limits]"),
        );
        assert!(
            error("[hosts.\"a b\"]\nssh = \"x\"\nport = 22\n")
                .contains("unknown field `port` in [hosts.\"a b\"]; known: ssh, ssh_args, dir"),
        );
    }

    #[test]
    fn the_arena_section_takes_its_reviewers_and_refuses_other_names() {
        let f = ConfigFile::parse(
            Path::new("q.toml"),
            "[arena]\nreviewers = [\"claude\", \"codex\"]\n",
        )
        .unwrap();
        let reviewers = f.arena.and_then(|a| a.reviewers).unwrap();
        assert_eq!(reviewers, ["claude", "codex"]);
        let e = error("[arena]\nreviewer = [\"claude\"]\n");
        assert!(e.contains("line 2") && e.contains("`reviewers`"), "{e}");
    }

    #[test]
    fn the_budget_section_takes_positive_caps_and_names_a_bad_one() {
        let f = ConfigFile::parse(
            Path::new("q.toml"),
            "[budget]\nsession_usd = 2.5\ntask_usd = 0.5\ntokens = 100000\n",
        )
        .unwrap();
        let b = f.budget.unwrap();
        assert_eq!(
            (b.session_usd, b.task_usd, b.tokens),
            (Some(2.5), Some(0.5), Some(100_000))
        );
        let e = error("[budget]\nsession_usd = 0.0\n");
        assert!(
            e.contains("line 2") && e.contains("session_usd must be an amount above 0"),
            "{e}"
        );
        let e = error("[budget]\ntask_usd = -1.0\n");
        assert!(e.contains("line 2") && e.contains("task_usd"), "{e}");
        let e = error("[budget]\nsesion_usd = 1.0\n");
        assert!(e.contains("line 2") && e.contains("`session_usd`"), "{e}");
    }

    #[test]
    fn prices_are_per_million_tokens_and_a_bad_one_is_named() {
        let f = ConfigFile::parse(
            Path::new("q.toml"),
            "[prices]\n\"gpt-5-codex\" = { input = 1.25, output = 10.0 }\nopencode = { input = 0, output = 0 }\n",
        )
        .unwrap();
        assert_eq!(f.prices["gpt-5-codex"].output, 10.0);
        assert_eq!(f.prices["opencode"].input, 0.0);
        let e = error("[prices]\nm = { input = -1.0, output = 2.0 }\n");
        assert!(
            e.contains("line 2") && e.contains("a price is USD per million tokens"),
            "{e}"
        );
        let e = error("[prices.m]\ninput = 1.0\noutptu = 2.0\n");
        assert!(e.contains("line 3") && e.contains("`output`"), "{e}");
    }

    #[test]
    fn notify_takes_its_events_and_refuses_unknown_names() {
        use crate::event::notify::NotifyKind;
        let f = ConfigFile::parse(
            Path::new("q.toml"),
            "[notify]\nevents = [\"task_done\", \"all_idle\"]\ndesktop = false\ncommand = [\"ntfy\", \"publish\", \"me\"]\n",
        )
        .unwrap();
        let n = f.notify.unwrap();
        assert_eq!(n.kinds(), [NotifyKind::TaskDone, NotifyKind::AllIdle]);
        assert_eq!((n.desktop, n.command.unwrap().len()), (Some(false), 3));
        assert_eq!(NotifySection::default().kinds(), NotifyKind::ALL);
        let e = error("[notify]\nevents = [\"task_done\",\n  \"need_you\"]\n");
        assert!(
            e.starts_with("/c/quorum.toml: line 3, column 3: unknown variant `need_you`")
                && e.ends_with("; did you mean `needs_you`?"),
            "{e}"
        );
        assert!(error("[notify]\nevent = []\n").contains("did you mean `events`?"));
        assert!(
            error("[notify]\ncommand = []\n")
                .contains("line 2, column 11: command needs a program")
        );
        assert!(error("[notfy]\n").contains("did you mean [notify]?"));
    }

    #[test]
    fn other_mistakes_name_their_line() {
        assert_eq!(
            error("\nmax_parallel = 0\n"),
            "/c/quorum.toml: line 2, column 16: max_parallel must be at least 1 (how many tasks \
             of a batch run at once)"
        );
        assert!(error("[mcp]\nsync_seconds = 0\n").contains("line 2, column 16: sync_seconds"));
        assert!(
            error("[worktree]\ncheck_timeout = 0\n")
                .contains("line 2, column 17: check_timeout must be at least 1")
        );
        assert!(error("[worktree]\nsign = \"yes\"\n").contains("line 2"));
        assert!(error("bell = \"yes\"\n").contains("line 1, column 8"));
        assert!(error("[model\n").contains("line 1"));
    }

    #[test]
    fn values_know_their_lines() {
        let f = ConfigFile::parse(
            Path::new("q.toml"),
            "max_parallel = 2\n\n[limits]\nmax_read_bytes = 10\n\n[agents.mine]\ncommand = \"x\"\n",
        )
        .unwrap();
        assert_eq!(f.max_parallel, Some(2));
        assert_eq!(f.limits().max_read_bytes, 10);
        assert_eq!(f.line(&["limits", "max_read_bytes"]), Some(4));
        assert_eq!(f.line(&["agents", "mine"]), Some(6));
        assert_eq!(f.line(&["bell"]), None);
        assert_eq!(f.source(&["max_parallel"]).to_string(), "q.toml:1");
        assert_eq!(f.source(&["bell"]), Source::Default);
        assert!(f.bell());
    }
}
