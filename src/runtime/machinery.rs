//! What other programs run from a tree an agent writes: a `.git` below its
//! top (a repository git enters, whose config can run programs: an
//! fsmonitor, filters, hooks), and the files that git, hook managers,
//! editors and agent CLIs run or read as configuration (`.husky/`,
//! `.envrc`, `.claude/`, `.mcp.json`, ... : [`runs_later`]).
//!
//! In a task's worktree they are the project's own files and may change:
//! its commit refuses a nested `.git` (`worktree`), and `/merge` names the
//! others the branch changes. In the person's own tree (no worktree),
//! the sandbox binds the existing ones at its top read-only
//! ([`readonly`]), file writes ask the person first (`confine::fsroot`'s
//! asking, set by `git::root`), and what a turn made or changed is named
//! after it ([`Snapshot`]). Which trees are quorum's worktrees is recorded
//! here as quorum makes them ([`mark_worktree`]), never read from the tree.
//!
//! The walks are breadth first and bounded: a huge tree is checked as far
//! as the bound, its top first, and the result says it was cut.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

/// How many entries the check after a turn reads in the person's tree.
pub const TURN_LIMIT: usize = 100_000;
/// How many entries a worktree's commit reads looking for a nested `.git`.
pub const COMMIT_LIMIT: usize = 200_000;

/// Whether `name` is a `.git` (any case: some file systems ignore it).
pub fn is_dot_git(name: &OsStr) -> bool {
    name.eq_ignore_ascii_case(".git")
}

/// The lefthook configuration names: `lefthook` or `lefthook-local`, with
/// or without a leading dot, as YAML, JSON or TOML.
fn is_lefthook(name: &str) -> bool {
    let name = name.strip_prefix('.').unwrap_or(name);
    let Some((stem, ext)) = name.rsplit_once('.') else {
        return false;
    };
    matches!(stem, "lefthook" | "lefthook-local")
        && matches!(ext, "yml" | "yaml" | "json" | "jsonc" | "toml")
}

/// Why another program runs `below` (a path below the top of a tree, `/`
/// between its parts), or reads it as configuration that runs programs;
/// `None` when nothing does. `hooks` is the repository's `core.hooksPath`
/// below the same top, when it lies inside it: husky 9 points it at
/// `.husky/_`, whose hooks run the scripts in `.husky/`, so the folder
/// above an `_` counts too. Folders (`.claude/`, `.husky/`, ...) count in
/// any folder of the tree, as the programs find them where they run.
pub fn runs_later(below: &Path, hooks: Option<&Path>) -> Option<&'static str> {
    let parts: Vec<&str> = below
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => n.to_str(),
            _ => None,
        })
        .collect();
    let name = *parts.last()?;
    if let Some(hooks) = hooks.filter(|h| h.components().next().is_some()) {
        let husky = hooks
            .file_name()
            .is_some_and(|n| n == "_")
            .then(|| hooks.parent())
            .flatten()
            .filter(|h| !h.as_os_str().is_empty());
        if below.starts_with(hooks) {
            return Some("git runs it as a hook (core.hooksPath)");
        }
        if husky.is_some_and(|h| below.starts_with(h)) {
            return Some("husky runs it as a git hook");
        }
    }
    let within = |dir: &str| parts.contains(&dir);
    if within(".husky") {
        return Some("husky runs it as a git hook");
    }
    if within(".claude") {
        return Some("Claude Code reads it: its hooks, commands and agents run from it");
    }
    if within(".codex") {
        return Some("codex reads it: its config starts MCP servers and commands");
    }
    if within(".gemini") {
        return Some("gemini reads it: its settings start MCP servers and commands");
    }
    if within(".opencode") {
        return Some("opencode reads it: its plugins and MCP servers run");
    }
    let parent = parts.len().checked_sub(2).map(|i| parts[i]);
    Some(match name {
        ".gitattributes" => "git reads it: the filters and diff drivers it names run",
        ".gitmodules" => "git reads it: submodule URLs and update commands",
        ".envrc" => "direnv runs it when a shell enters its folder",
        ".pre-commit-config.yaml" | ".pre-commit-config.yml" => {
            "pre-commit runs the commands it names as git hooks"
        }
        ".mcp.json" => "Claude Code starts the MCP servers it names",
        "opencode.json" | "opencode.jsonc" => "opencode reads it: the MCP servers it names start",
        "tasks.json" if parent == Some(".vscode") => {
            "VS Code runs its tasks (some when the folder is opened)"
        }
        n if is_lefthook(n) => "lefthook runs the commands it names as git hooks",
        _ => return None,
    })
}

/// The names at the top of the person's tree that [`readonly`] binds
/// read-only when they exist: every folder and file [`runs_later`] names
/// by name, and `.vscode` as a whole (a folder below the top could be
/// renamed away from under a bound `tasks.json`; the top's own entries
/// cannot be, being bound themselves).
const AT_THE_TOP: &[&str] = &[
    ".husky",
    ".envrc",
    ".pre-commit-config.yaml",
    ".pre-commit-config.yml",
    "lefthook.yml",
    "lefthook.yaml",
    "lefthook.json",
    "lefthook.jsonc",
    "lefthook.toml",
    ".lefthook.yml",
    ".lefthook.yaml",
    ".lefthook.json",
    ".lefthook.jsonc",
    ".lefthook.toml",
    "lefthook-local.yml",
    "lefthook-local.yaml",
    ".lefthook-local.yml",
    ".lefthook-local.yaml",
    ".claude",
    ".mcp.json",
    ".codex",
    ".gemini",
    ".opencode",
    "opencode.json",
    "opencode.jsonc",
    ".vscode",
    ".gitattributes",
    ".gitmodules",
];

/// The worktrees quorum made (canonical paths), in this process.
static WORKTREES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Records `path` as a task's worktree that quorum made: inside it, the
/// files other programs run are the project's to change.
pub fn mark_worktree(path: &Path) {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let mut trees = super::lock(&WORKTREES);
    if !trees.contains(&path) {
        trees.push(path);
    }
}

/// Whether `dir` lies in a worktree quorum made ([`mark_worktree`]).
pub fn in_worktree(dir: &Path) -> bool {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    super::lock(&WORKTREES).iter().any(|t| dir.starts_with(t))
}

/// What in `root` a sandbox binds read-only besides `.git` and the hooks
/// (`git::protected`): in the person's own tree, the files and folders at
/// its top that other programs run ([`AT_THE_TOP`]) that exist (a link
/// among them is not followed: left out), but those `writable` names, or
/// that hold something it names. Nothing in a worktree quorum made.
pub fn readonly(root: &Path, writable: &[PathBuf]) -> Vec<PathBuf> {
    if in_worktree(root) {
        return Vec::new();
    }
    AT_THE_TOP
        .iter()
        .map(|name| root.join(name))
        .filter(|p| {
            p.symlink_metadata()
                .is_ok_and(|m| !m.file_type().is_symlink())
        })
        .filter(|p| {
            !writable
                .iter()
                .any(|w| p.starts_with(w) || w.starts_with(p))
        })
        .collect()
}

/// `hooks` (the repository's `core.hooksPath`, absolute: `git::
/// hooks_path`) below `top`, if it lies inside it.
fn hooks_below(top: &Path, hooks: Option<PathBuf>) -> Option<PathBuf> {
    let top = top.canonicalize().ok()?;
    let hooks = hooks?;
    let hooks = hooks.canonicalize().unwrap_or(hooks);
    hooks.strip_prefix(&top).ok().map(Path::to_path_buf)
}

/// What file writes in `root` ask the person for first: in their own
/// tree, what [`runs_later`] names (below `root`, with `hooks`, the
/// repository's `core.hooksPath`); `None` in a worktree quorum made.
pub fn asking(root: &Path, hooks: Option<PathBuf>) -> Option<crate::confine::fsroot::Asking> {
    if in_worktree(root) {
        return None;
    }
    let hooks = hooks_below(root, hooks);
    Some(crate::confine::fsroot::Asking(std::sync::Arc::new(
        move |below: &Path| runs_later(below, hooks.as_deref()),
    )))
}

/// Reads the tree under `top` breadth first, at most `limit` entries, never
/// following a link and never entering `top/.git`; `visit` gets each
/// entry's path below `top`, what it is (from the folder's listing: no
/// `stat` for the entries nobody records) and the entry, and says whether
/// to enter a folder. True when every entry was read.
fn walk(
    top: &Path,
    limit: usize,
    mut visit: impl FnMut(&Path, std::fs::FileType, &std::fs::DirEntry) -> bool,
) -> bool {
    let mut queue: VecDeque<PathBuf> = VecDeque::from([PathBuf::new()]);
    let mut read = 0usize;
    while let Some(below) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(top.join(&below)) else {
            continue;
        };
        for entry in entries.flatten() {
            read += 1;
            if read > limit {
                return false;
            }
            let name = entry.file_name();
            if below.as_os_str().is_empty() && is_dot_git(&name) {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = below.join(&name);
            if visit(&path, kind, &entry) && kind.is_dir() {
                queue.push_back(path);
            }
        }
    }
    true
}

/// Every `.git` (folder, file or link) below `top` (its own aside), as
/// paths below it, in the order met (shallow first); and whether the walk
/// read the whole tree (at most `limit` entries).
pub fn nested_gits(top: &Path, limit: usize) -> (Vec<PathBuf>, bool) {
    let mut found = Vec::new();
    let whole = walk(top, limit, |path, _, _| {
        let git = path.file_name().is_some_and(is_dot_git);
        if git {
            found.push(path.to_path_buf());
        }
        !git
    });
    (found, whole)
}

/// What the file system says of one entry, to tell it changed. For a
/// folder only what it is: its times change as git works in it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Id {
    dev: u64,
    ino: u64,
    kind: u32,
    /// Size, modification and change times (ns), for a file or link.
    times: Option<(u64, i64, i64)>,
}

impl Id {
    fn of(meta: &std::fs::Metadata) -> Self {
        let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            kind: meta.mode() & 0o170000,
            times: (!meta.is_dir()).then(|| {
                (
                    meta.size(),
                    ns(meta.mtime(), meta.mtime_nsec()),
                    ns(meta.ctime(), meta.ctime_nsec()),
                )
            }),
        }
    }
}

/// What a recorded entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A `.git` below the top, or what git runs inside one (its config,
    /// attributes, hooks).
    Git,
    /// A file another program runs, and why ([`runs_later`]).
    RunsLater(&'static str),
}

/// The `.git`s below the top of the person's tree and the files other
/// programs run, as they are: taken before a turn and after it, the
/// difference is what the turn made or changed ([`Snapshot::since`]).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    found: BTreeMap<PathBuf, (Kind, Id)>,
    /// Whether the walk stopped at its bound.
    pub cut: bool,
}

/// What inside a nested `.git` folder git runs or reads as configuration.
const IN_A_GIT_DIR: &[&str] = &["config", "config.worktree", "info/attributes", "hooks"];

/// Something a turn made or changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Below the top.
    pub path: PathBuf,
    pub kind: Kind,
    /// Made during the turn (else changed).
    pub new: bool,
}

impl Snapshot {
    /// The tree under `top` as it is now, read as far as `limit` entries;
    /// `hooks` is the repository's `core.hooksPath` (`git::hooks_path`).
    pub fn take(top: &Path, hooks: Option<PathBuf>, limit: usize) -> Self {
        let hooks = hooks_below(top, hooks);
        let mut found = BTreeMap::new();
        let whole = walk(top, limit, |path, kind, entry| {
            if path.file_name().is_some_and(is_dot_git) {
                if let Ok(meta) = entry.metadata() {
                    found.insert(path.to_path_buf(), (Kind::Git, Id::of(&meta)));
                }
                if kind.is_dir() {
                    record_git_dir(top, path, &mut found);
                }
                return false;
            }
            if !kind.is_dir()
                && let Some(why) = runs_later(path, hooks.as_deref())
                && let Ok(meta) = entry.metadata()
            {
                found.insert(path.to_path_buf(), (Kind::RunsLater(why), Id::of(&meta)));
            }
            true
        });
        Self { found, cut: !whole }
    }

    /// What is here and was not in `before`, or is and changed; shallow
    /// paths first.
    pub fn since(&self, before: &Snapshot) -> Vec<Change> {
        let mut out: Vec<Change> = self
            .found
            .iter()
            .filter_map(|(path, (kind, id))| match before.found.get(path) {
                Some((_, was)) if was == id => None,
                was => Some(Change {
                    path: path.clone(),
                    kind: *kind,
                    new: was.is_none(),
                }),
            })
            .collect();
        out.sort_by_key(|c| (c.path.components().count(), c.path.clone()));
        out
    }
}

/// What git runs in the nested `.git` folder `git` (below `top`), into
/// `found`: its config, attributes, hooks folder and each hook.
fn record_git_dir(top: &Path, git: &Path, found: &mut BTreeMap<PathBuf, (Kind, Id)>) {
    for name in IN_A_GIT_DIR {
        let path = git.join(name);
        let Ok(meta) = top.join(&path).symlink_metadata() else {
            continue;
        };
        if *name == "hooks" && meta.is_dir() {
            let hooks = std::fs::read_dir(top.join(&path)).into_iter().flatten();
            for hook in hooks.flatten().take(256) {
                if let Ok(m) = hook.metadata() {
                    found.insert(path.join(hook.file_name()), (Kind::Git, Id::of(&m)));
                }
            }
        }
        found.insert(path, (Kind::Git, Id::of(&meta)));
    }
}

/// The notices for what a turn left in the person's tree under `top`:
/// one for the `.git`s (where git would run their config), one for the
/// files other programs run; each names the paths (the first dozen, then
/// how many more), says why they matter and what the person can do.
pub fn notices(top: &Path, changes: &[Change]) -> Vec<String> {
    const SHOWN: usize = 12;
    let mut out = Vec::new();
    let gits: Vec<&Change> = changes.iter().filter(|c| c.kind == Kind::Git).collect();
    // A new `.git` says it all: what changed inside it is not listed too.
    let tops: Vec<&Change> = gits
        .iter()
        .copied()
        .filter(|c| {
            !gits
                .iter()
                .any(|o| o.path != c.path && c.path.starts_with(&o.path))
        })
        .collect();
    if !tops.is_empty() {
        let mut names: Vec<String> = tops
            .iter()
            .take(SHOWN)
            .map(|c| {
                format!(
                    "{} ({})",
                    c.path.display(),
                    if c.new { "made" } else { "changed" }
                )
            })
            .collect();
        if tops.len() > SHOWN {
            names.push(format!("and {} more", tops.len() - SHOWN));
        }
        // The folder of the first one's `.git`, and the `.git` itself.
        let first = &tops[0].path;
        let git: PathBuf = first
            .components()
            .take_while(|c| !is_dot_git(c.as_os_str()))
            .chain(first.components().find(|c| is_dot_git(c.as_os_str())))
            .collect();
        let repo = top.join(git.parent().unwrap_or(Path::new("")));
        let remove = if tops[0].new && git == *first {
            format!(
                ", and remove it (`rm -rf {}`) if you did not make it",
                top.join(&git).display()
            )
        } else {
            String::new()
        };
        out.push(format!(
            "a git repository below {} appeared or changed during this turn: {}. Git run in its \
             folder (your `git status` there, a shell prompt that shows git's state) reads its \
             config, which can run programs (core.fsmonitor, filters, hooks): look at it before \
             you enter {}{remove}",
            top.display(),
            names.join(", "),
            repo.display(),
        ));
    }
    let runs: Vec<(&Change, &'static str)> = changes
        .iter()
        .filter_map(|c| match c.kind {
            Kind::RunsLater(why) => Some((c, why)),
            Kind::Git => None,
        })
        .collect();
    if !runs.is_empty() {
        let mut names: Vec<String> = runs
            .iter()
            .take(SHOWN)
            .map(|(c, why)| {
                format!(
                    "{} ({}: {why})",
                    c.path.display(),
                    if c.new { "made" } else { "changed" }
                )
            })
            .collect();
        if runs.len() > SHOWN {
            names.push(format!("and {} more", runs.len() - SHOWN));
        }
        out.push(format!(
            "files other programs run were made or changed in {} during this turn: {}. Read \
             them (`git diff`, `git status`) before you commit, enter the folder or start \
             those programs there",
            top.display(),
            names.join("; "),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_other_programs_run_is_named() {
        let husky9 = Some(Path::new(".husky/_"));
        for (path, hooks, runs) in [
            (".gitattributes", None, true),
            ("docs/deep/.gitattributes", None, true),
            (".gitmodules", None, true),
            ("x.gitattributes", None, false),
            (".gitattributes.d/a", None, false),
            (".husky/pre-commit", None, true),
            (".husky/pre-commit", husky9, true),
            (".husky/_/h", husky9, true),
            (".huskyish/pre-commit", None, false),
            ("githooks/pre-push", Some(Path::new("githooks")), true),
            ("src/githooks/x", Some(Path::new("githooks")), false),
            ("_/x", Some(Path::new("_")), true),
            ("src/x", Some(Path::new("_")), false),
            (".envrc", None, true),
            ("sub/.envrc", None, true),
            (".envrc.bak", None, false),
            (".pre-commit-config.yaml", None, true),
            ("lefthook.yml", None, true),
            (".lefthook.yaml", None, true),
            ("lefthook-local.toml", None, true),
            ("lefthook.md", None, false),
            (".claude/settings.json", None, true),
            (".claude", None, true),
            ("pkg/.claude/commands/x.md", None, true),
            (".mcp.json", None, true),
            (".codex/config.toml", None, true),
            (".gemini/settings.json", None, true),
            ("opencode.json", None, true),
            (".opencode/plugin/x.ts", None, true),
            (".vscode/tasks.json", None, true),
            (".vscode/settings.json", None, false),
            ("tasks.json", None, false),
            ("src/main.rs", husky9, false),
            ("README.md", None, false),
        ] {
            assert_eq!(
                runs_later(Path::new(path), hooks).is_some(),
                runs,
                "{path} with {hooks:?}"
            );
        }
    }

    /// The sandbox's list: what exists at the top (a link left out), none
    /// of what `writable` names or holds, and nothing in a worktree.
    #[test]
    fn readonly_names_what_exists_at_the_top_of_the_persons_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap().join("tree");
        std::fs::create_dir_all(root.join(".husky/_")).unwrap();
        std::fs::create_dir_all(root.join(".claude/projects")).unwrap();
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join(".envrc"), "").unwrap();
        std::fs::write(root.join("sub/.envrc"), "").unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join(".mcp.json")).unwrap();
        assert_eq!(
            readonly(&root, &[]),
            vec![
                root.join(".husky"),
                root.join(".envrc"),
                root.join(".claude")
            ]
        );
        assert_eq!(
            readonly(&root, &[root.join(".claude/projects")]),
            vec![root.join(".husky"), root.join(".envrc")]
        );
        mark_worktree(&root);
        assert!(in_worktree(&root.join("sub")));
        assert!(readonly(&root, &[]).is_empty());
    }

    /// Breadth first, never into a `.git`, the top's own aside; a bound
    /// says the walk was cut.
    #[test]
    fn nested_gits_are_found_shallow_first_and_the_bound_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        for d in [".git/objects", "a/b/c/.git/x", "sub/.git", "z"] {
            std::fs::create_dir_all(top.join(d)).unwrap();
        }
        std::fs::write(top.join("z/.git"), "gitdir: elsewhere\n").unwrap();
        std::fs::write(top.join("a/.GIT"), "").unwrap();
        let (found, whole) = nested_gits(top, 1000);
        assert!(whole);
        let mut shallow = found[..3].to_vec();
        shallow.sort();
        assert_eq!(
            shallow,
            ["a/.GIT", "sub/.git", "z/.git"].map(PathBuf::from),
            "{found:?}"
        );
        assert_eq!(found[3..], [PathBuf::from("a/b/c/.git")], "{found:?}");
        let (_, whole) = nested_gits(top, 3);
        assert!(!whole, "cut at 3 entries");
    }

    /// Before and after a turn: a new `.git`, a hook added to an existing
    /// one's, a new `.envrc` and a changed `.claude/settings.json` are
    /// named; what did not change is not.
    #[test]
    fn a_snapshot_names_what_a_turn_made_or_changed() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        std::fs::create_dir_all(top.join("vendor/lib/.git/hooks")).unwrap();
        std::fs::write(top.join("vendor/lib/.git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(top.join(".claude")).unwrap();
        std::fs::write(top.join(".claude/settings.json"), "{}").unwrap();
        std::fs::write(top.join("README.md"), "x").unwrap();
        let before = Snapshot::take(top, None, 1000);
        assert!(!before.cut);
        assert!(Snapshot::take(top, None, 1000).since(&before).is_empty());

        std::fs::create_dir_all(top.join("sub/.git")).unwrap();
        std::fs::write(top.join("sub/.git/config"), "[core]\n\tfsmonitor = x\n").unwrap();
        std::fs::write(
            top.join("vendor/lib/.git/hooks/post-checkout"),
            "#!/bin/sh\n",
        )
        .unwrap();
        std::fs::write(top.join("sub/.envrc"), "evil").unwrap();
        // Replaced, as an agent would (a new file renamed over it).
        std::fs::write(top.join(".claude/new"), r#"{"hooks": {}}"#).unwrap();
        std::fs::rename(top.join(".claude/new"), top.join(".claude/settings.json")).unwrap();
        std::fs::write(top.join("README.md"), "changed, and nobody runs it").unwrap();
        let changes = Snapshot::take(top, None, 1000).since(&before);
        let named: Vec<(String, bool)> = changes
            .iter()
            .map(|c| (c.path.display().to_string(), c.new))
            .collect();
        assert_eq!(
            named,
            [
                (".claude/settings.json", false),
                ("sub/.envrc", true),
                ("sub/.git", true),
                ("sub/.git/config", true),
                ("vendor/lib/.git/hooks/post-checkout", true),
            ]
            .map(|(p, n)| (p.to_string(), n))
        );
        let said = notices(top, &changes);
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(
            said[0].contains("sub/.git (made), vendor/lib/.git/hooks/post-checkout (made)"),
            "{}",
            said[0]
        );
        assert!(said[0].contains("core.fsmonitor"), "{}", said[0]);
        assert!(
            said[0].contains(&format!("`rm -rf {}`", top.join("sub/.git").display())),
            "{}",
            said[0]
        );
        assert!(
            said[1].contains(".claude/settings.json (changed: Claude Code reads it"),
            "{}",
            said[1]
        );
        assert!(
            said[1].contains("sub/.envrc (made: direnv runs it"),
            "{}",
            said[1]
        );
    }
}
