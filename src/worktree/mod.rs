//! Git worktrees for isolated writers: a task's own worktree under
//! quorum's state directory, on a branch named after the task, its work
//! committed there when its turn ends, merged into the person's branch or
//! thrown away. Everything goes through the `git` the person has, never a
//! git library, and hardened (`runtime::git`): a tree an agent could write
//! never gets git to run its code (no hook, no fsmonitor, no textconv, no
//! external diff). A worktree's git directory is named explicitly, from
//! what quorum recorded when it made the worktree, never read back from
//! the `.git` file the agent could change, and never entering a repository
//! below the worktree's top (a nested `.git` refuses the commit). Only
//! `/merge`'s `git merge`, the person's own act, runs with their hooks,
//! after quorum named what the branch changes that git, hook managers,
//! editors or agent CLIs would run (`runtime::machinery::runs_later`).
//!
//! What quorum knows of a task's branch lives in the repository's own
//! config (`branch.<B>.quorum*`), so plain git sees it, it survives a
//! crash, and `git branch -D` takes it away with the branch.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::confine::lexical;
use crate::event::{Diffstat, Severity};
use crate::runtime::git as hardened;
use crate::runtime::machinery;

pub mod list;
pub mod ready;
mod tree;

pub use ready::Settings;

/// The longest diff an opened box keeps.
pub const MAX_DIFF_BYTES: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    #[error(
        "{dir} is not inside a git repository, and a task with isolation \"worktree\" needs one (git rev-parse: {git})"
    )]
    NotARepo { dir: PathBuf, git: String },
    #[error(
        "{0} is a bare repository: a task with isolation \"worktree\" needs a working tree to start from"
    )]
    Bare(PathBuf),
    #[error(
        "{0}: HEAD is detached; check out a branch first, so the task's branch has one to be merged into"
    )]
    Detached(PathBuf),
    #[error("{0}: the repository has no commit yet; make a first commit to start a worktree from")]
    NoCommit(PathBuf),
    #[error(
        "branch {0} already exists; remove it (`git branch -D {0}`) or give the task another first line"
    )]
    BranchExists(String),
    #[error("worktree: {step} failed: {git}")]
    Git { step: String, git: String },
    #[error("worktree: cannot run git for {step}: {source}")]
    Spawn {
        step: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the worktree {0} is gone (deleted during the turn?): nothing more is committed; its branch keeps the earlier commits"
    )]
    Gone(PathBuf),
    #[error(
        "cannot merge {branch}: your working tree has uncommitted changes ({files}); commit or stash them first"
    )]
    Dirty { branch: String, files: String },
    #[error(
        "cannot merge {branch}: it conflicts with your branch {into}; the merge was aborted and your tree is as it was. git said: {git}"
    )]
    Conflict {
        branch: String,
        into: String,
        git: String,
    },
    #[error(
        "{}/.git no longer points at the git directory quorum made ({git_dir}); nothing was committed, the work is left in the worktree for you",
        worktree.display()
    )]
    Repointed { worktree: PathBuf, git_dir: String },
    #[error(
        "{paths} in {}: a .git below the worktree's top makes a repository that git enters, running what its config says (an fsmonitor, filters); nothing was committed, the work is left in the worktree for you (once it is removed, the next turn's work is committed)",
        worktree.display()
    )]
    Nested { worktree: PathBuf, paths: String },
    #[error("worktree: {0}")]
    Io(String),
}

type Result<T> = std::result::Result<T, WorktreeError>;

/// Runs `cmd`, a hardened git with its arguments (stdin closed, output
/// captured): its stdout as git printed it, or git's own message as the
/// error, named by `step`.
fn run_exact(mut cmd: Command, step: &str) -> Result<String> {
    let out = hardened::run(&mut cmd).map_err(|source| WorktreeError::Spawn {
        step: step.to_string(),
        source,
    })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(WorktreeError::Git {
            step: step.to_string(),
            git: message(&out),
        })
    }
}

/// [`run_exact`], its stdout trimmed at the end.
fn run(cmd: Command, step: &str) -> Result<String> {
    run_exact(cmd, step).map(|out| out.trim_end().to_string())
}

/// Runs the hardened `git args` in `dir`, letting git find the repository
/// from there: only for the person's own tree (whose `.git` no agent may
/// write). Its stdout, or git's own message as the error, named by `step`.
fn git(dir: &Path, step: &str, args: &[&str]) -> Result<String> {
    let mut cmd = hardened::in_dir(dir);
    cmd.args(args);
    run(cmd, step)
}

/// What git said: stderr, else stdout (merge conflicts go there), trimmed.
fn message(out: &std::process::Output) -> String {
    let mut text = String::from_utf8_lossy(&out.stderr).trim().to_string();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !stdout.trim().is_empty() {
        if !text.is_empty() {
            text.push_str("; ");
        }
        text.push_str(stdout.trim());
    }
    if text.is_empty() {
        text = match out.status.code() {
            Some(code) => format!("git exited with status {code} and said nothing"),
            // `signal: 9 (SIGKILL)`.
            None => format!("git ended by {} and said nothing", out.status),
        };
    }
    text.replace('\n', " / ")
}

/// A new worktree's git directory and its `.git` file, as git made them.
fn git_files(path: &Path) -> Result<(String, String)> {
    let git_dir = git(
        path,
        "reading the worktree's git directory (git rev-parse --absolute-git-dir)",
        &["rev-parse", "--absolute-git-dir"],
    )?;
    let dot_git = std::fs::read_to_string(path.join(".git"))
        .map_err(|e| WorktreeError::Io(format!("{}: {e}", path.join(".git").display())))?;
    Ok((git_dir, dot_git))
}

/// Whether the hardened `git args` in `dir` succeeds (a question, not a
/// step).
fn git_ok(dir: &Path, args: &[&str]) -> bool {
    let mut cmd = hardened::in_dir(dir);
    cmd.args(args);
    succeeds(cmd)
}

/// Whether `cmd` runs and succeeds, its output thrown away.
fn succeeds(mut cmd: Command) -> bool {
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    hardened::status(&mut cmd).is_ok_and(|s| s.success())
}

/// What a task's worktree started from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Base {
    /// The person's `HEAD`: their tree was clean.
    Head,
    /// A commit of the person's uncommitted changes (`git stash create`)
    /// on top of `HEAD`.
    Uncommitted,
}

impl Base {
    pub fn as_str(self) -> &'static str {
        match self {
            Base::Head => "head",
            Base::Uncommitted => "uncommitted",
        }
    }

    /// How a box says it.
    pub fn describe(self) -> &'static str {
        match self {
            Base::Head => "from HEAD",
            Base::Uncommitted => "from HEAD + your uncommitted changes",
        }
    }
}

/// A task's worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    /// The person's repository (its top directory).
    pub repo: PathBuf,
    pub branch: String,
    pub path: PathBuf,
    /// Where the agent works: the worktree's copy of the session
    /// directory (its top, unless the session is in a subfolder).
    pub workdir: PathBuf,
    pub base: Base,
    /// The commit the branch left from.
    pub base_commit: String,
}

/// The person's repository.
#[derive(Debug, Clone)]
pub struct Repo {
    pub top: PathBuf,
}

/// `quorum/<task>-<words of the title>`: lower case, `-` between words,
/// at most 32 characters of words.
pub fn branch_name(task: &str, title: &str) -> String {
    let mut slug = String::new();
    for word in title
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if slug.len() + word.len() + 1 > 32 {
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(&word.to_ascii_lowercase());
    }
    let task: String = task
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    if slug.is_empty() {
        format!("quorum/{task}")
    } else {
        format!("quorum/{task}-{slug}")
    }
}

/// The first line of a task's message (its commit message's subject).
pub fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

impl Repo {
    /// The repository `dir` is in: a clear error when it is none, or bare.
    pub fn find(dir: &Path) -> Result<Self> {
        let bare = hardened::run(hardened::in_dir(dir).args(["rev-parse", "--is-bare-repository"]))
            .map_err(|source| WorktreeError::Spawn {
                step: "finding the repository".into(),
                source,
            })?;
        if !bare.status.success() {
            return Err(WorktreeError::NotARepo {
                dir: dir.to_path_buf(),
                git: message(&bare),
            });
        }
        if String::from_utf8_lossy(&bare.stdout).trim() == "true" {
            return Err(WorktreeError::Bare(dir.to_path_buf()));
        }
        let top = git(
            dir,
            "finding the repository's top (git rev-parse --show-toplevel)",
            &["rev-parse", "--show-toplevel"],
        )?;
        if top.is_empty() {
            return Err(WorktreeError::Bare(dir.to_path_buf()));
        }
        Ok(Self {
            top: PathBuf::from(top),
        })
    }

    fn git(&self, step: &str, args: &[&str]) -> Result<String> {
        git(&self.top, step, args)
    }

    /// The person's branch (`HEAD` must not be detached).
    pub fn current_branch(&self) -> Result<String> {
        if !git_ok(&self.top, &["rev-parse", "--verify", "--quiet", "HEAD"]) {
            return Err(WorktreeError::NoCommit(self.top.clone()));
        }
        self.git(
            "reading the current branch",
            &["symbolic-ref", "--quiet", "--short", "HEAD"],
        )
        .map_err(|_| WorktreeError::Detached(self.top.clone()))
    }

    /// The folder this repository's worktrees go in, under `state`.
    pub fn worktrees_dir(&self, state: &Path) -> PathBuf {
        let name = self
            .top
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "repo".into());
        let mut hash: u64 = 0xcbf29ce484222325;
        for b in self.top.as_os_str().as_encoded_bytes() {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x100000001b3);
        }
        state
            .join("worktrees")
            .join(format!("{name}-{:08x}", hash as u32))
    }

    pub fn branch_exists(&self, branch: &str) -> bool {
        git_ok(
            &self.top,
            &[
                "show-ref",
                "--verify",
                "--quiet",
                "--end-of-options",
                &format!("refs/heads/{branch}"),
            ],
        )
    }

    /// Makes `branch`'s worktree under `state`, based on `HEAD`, or on a
    /// commit of the person's uncommitted changes when there are any.
    /// Nothing half-made is left when a step fails.
    pub fn create(&self, state: &Path, branch: &str, meta: &[(&str, &str)]) -> Result<Worktree> {
        self.current_branch()?;
        self.check_new_branch(branch)?;
        let (base, base_commit) = self.base(branch)?;
        let path = self.new_worktree_path(state, branch)?;
        let path_text = path.to_string_lossy().into_owned();
        let added = self.git(
            "creating the worktree (git worktree add)",
            &[
                "worktree",
                "add",
                "--quiet",
                "-b",
                branch,
                "--end-of-options",
                &path_text,
                &base_commit,
            ],
        );
        let worktree = Worktree {
            repo: self.top.clone(),
            branch: branch.to_string(),
            path: path.clone(),
            workdir: path.clone(),
            base,
            base_commit: base_commit.clone(),
        };
        // The worktree's own git directory and its `.git` file as git made
        // them, read before any agent runs: every later step names that
        // directory, and the file must still say so.
        let (git_dir, dot_git) = match added.and_then(|_| git_files(&path)) {
            Ok(made) => made,
            Err(e) => {
                self.undo(&worktree);
                return Err(e);
            }
        };
        let mut meta: Vec<(&str, &str)> = meta.to_vec();
        meta.push(("base", &base_commit));
        meta.push(("basekind", base.as_str()));
        meta.push(("worktree", &path_text));
        meta.push(("gitdir", &git_dir));
        meta.push(("dotgit", &dot_git));
        for (key, value) in meta {
            if let Err(e) = self.set(branch, key, value) {
                self.undo(&worktree);
                return Err(e);
            }
        }
        Ok(worktree)
    }

    /// Refuses a name that is not a branch's, or a branch that exists.
    fn check_new_branch(&self, branch: &str) -> Result<()> {
        // `check-ref-format` takes no `--end-of-options`: a name that
        // looks like an option is none.
        if branch.starts_with('-') || !git_ok(&self.top, &["check-ref-format", "--branch", branch])
        {
            return Err(WorktreeError::Git {
                step: format!("naming the branch {branch:?}"),
                git: "not a valid branch name".into(),
            });
        }
        if self.branch_exists(branch) {
            return Err(WorktreeError::BranchExists(branch.to_string()));
        }
        Ok(())
    }

    /// What `branch` starts from, and its commit: `HEAD`, or a commit on
    /// it of the person's uncommitted changes when there are any.
    ///
    /// The index is refreshed first (as `git status` does): files touched
    /// but unchanged (a checkout, a copy, `touch`) would make `git stash
    /// create` find changes, then nothing to save, and fail saying nothing.
    /// One at a time: writers of one arena start together, and a refresh
    /// takes the index's lock.
    fn base(&self, branch: &str) -> Result<(Base, String)> {
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        // Its exit status says whether files changed: not an error here.
        let _ = git_ok(&self.top, &["update-index", "-q", "--refresh"]);
        let head = self.git("reading HEAD", &["rev-parse", "HEAD"])?;
        let stash = self.git(
            "saving your uncommitted changes (git stash create)",
            &["stash", "create"],
        )?;
        if stash.is_empty() {
            return Ok((Base::Head, head));
        }
        // The stash's tree as one plain commit on HEAD, so the branch's
        // history is HEAD, the person's changes, then the agent's.
        let tree = self.git(
            "reading your uncommitted changes",
            &["rev-parse", &format!("{stash}^{{tree}}")],
        )?;
        let commit = self.git(
            "committing your uncommitted changes for the worktree (git commit-tree)",
            &[
                "-c",
                "commit.gpgsign=false",
                "commit-tree",
                "--no-gpg-sign",
                &tree,
                "-p",
                &head,
                "-m",
                &format!("quorum: uncommitted changes {branch} started from"),
            ],
        )?;
        Ok((Base::Uncommitted, commit))
    }

    /// Where `branch`'s worktree goes under `state` (its folder made): a
    /// path nothing is at yet.
    fn new_worktree_path(&self, state: &Path, branch: &str) -> Result<PathBuf> {
        let path = self
            .worktrees_dir(state)
            .join(branch.replace('/', "-"))
            .to_path_buf();
        if path.exists() {
            return Err(WorktreeError::Io(format!(
                "{} already exists; `quorum worktrees --prune` or remove it",
                path.display()
            )));
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| WorktreeError::Io(format!("{}: {e}", parent.display())))?;
        }
        Ok(path)
    }

    /// Takes away what a failed `create` made: the worktree and the branch.
    fn undo(&self, worktree: &Worktree) {
        let path = worktree.path.to_string_lossy().into_owned();
        let _ = git_ok(
            &self.top,
            &["worktree", "remove", "--force", "--end-of-options", &path],
        );
        let _ = std::fs::remove_dir_all(&worktree.path);
        let _ = git_ok(&self.top, &["worktree", "prune"]);
        let _ = git_ok(
            &self.top,
            &["branch", "-D", "--end-of-options", &worktree.branch],
        );
    }

    /// Sets `branch.<branch>.quorum<key>` in the repository's config.
    pub fn set(&self, branch: &str, key: &str, value: &str) -> Result<()> {
        self.git(
            &format!("recording {key} of {branch} (git config)"),
            &[
                "config",
                "--end-of-options",
                &format!("branch.{branch}.quorum{key}"),
                value,
            ],
        )
        .map(drop)
    }

    /// `branch.<branch>.quorum<key>`, if set (trimmed at the end).
    pub fn get(&self, branch: &str, key: &str) -> Option<String> {
        self.get_exact(branch, key)
            .map(|v| v.trim_end().to_string())
            .filter(|v| !v.is_empty())
    }

    /// `branch.<branch>.quorum<key>` exactly as it was set, if it was.
    fn get_exact(&self, branch: &str, key: &str) -> Option<String> {
        let value = git(
            &self.top,
            "reading config",
            &[
                "config",
                "--null",
                "--get",
                "--end-of-options",
                &format!("branch.{branch}.quorum{key}"),
            ],
        )
        .ok()?;
        value.strip_suffix('\0').map(str::to_string)
    }

    /// The repository's git directory shared by its worktrees (absolute).
    fn common_dir(&self) -> Result<PathBuf> {
        self.git(
            "finding the repository's git directory (git rev-parse --git-common-dir)",
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        )
        .map(PathBuf::from)
    }

    /// The worktree of a branch quorum made, from what it recorded.
    pub fn worktree(&self, branch: &str) -> Option<Worktree> {
        Some(Worktree {
            repo: self.top.clone(),
            branch: branch.to_string(),
            path: PathBuf::from(self.get(branch, "worktree")?),
            workdir: PathBuf::from(self.get(branch, "worktree")?),
            base: match self.get(branch, "basekind").as_deref() {
                Some("uncommitted") => Base::Uncommitted,
                _ => Base::Head,
            },
            base_commit: self.get(branch, "base")?,
        })
    }

    /// Records a review quorum's verdict against `branch`.
    pub fn record_verdict(&self, branch: &str, verdict: Option<Severity>) -> Result<()> {
        if !self.branch_exists(branch) {
            return Err(WorktreeError::Git {
                step: format!("recording the verdict on {branch}"),
                git: format!("no branch {branch} in {}", self.top.display()),
            });
        }
        self.set(branch, "verdict", verdict.map_or("none", Severity::as_str))
    }

    /// The latest review quorum's verdict on `branch`, if one was
    /// recorded.
    pub fn verdict(&self, branch: &str) -> Option<Severity> {
        match self.get(branch, "verdict")?.as_str() {
            "green" => Some(Severity::Green),
            "yellow" => Some(Severity::Yellow),
            "red" => Some(Severity::Red),
            _ => None,
        }
    }

    /// Where `branch` left its base: the commit quorum started it from,
    /// else its merge base with `HEAD`.
    pub fn fork_point(&self, branch: &str) -> Result<String> {
        if !self.branch_exists(branch) {
            return Err(WorktreeError::Git {
                step: format!("finding the branch {branch}"),
                git: format!("no branch {branch} in {}", self.top.display()),
            });
        }
        match self.get(branch, "base") {
            Some(base) => Ok(base),
            None => self.git(
                &format!("finding where {branch} left HEAD (git merge-base)"),
                &["merge-base", "--end-of-options", "HEAD", branch],
            ),
        }
    }

    /// Commits on `branch` that the person's branch does not have (the
    /// commit of their own uncommitted changes aside).
    pub fn unmerged(&self, branch: &str) -> Result<u32> {
        let mut args = vec!["rev-list", "--count", "--end-of-options", branch, "^HEAD"];
        let base = self.get(branch, "base").map(|b| format!("^{b}"));
        if let Some(base) = &base {
            args.push(base);
        }
        let n = self.git(&format!("counting the commits of {branch}"), &args)?;
        Ok(n.parse().unwrap_or(0))
    }

    /// Merges `branch` into the person's current branch (with their own
    /// git: their config and hooks, as they would merge it themselves); on
    /// a conflict the merge is aborted and the tree is as it was. Its
    /// worktree is removed once it is merged, unless its `.git` no longer
    /// points at the git directory quorum made (then what is in it stays
    /// for the person to look at).
    pub fn merge(&self, branch: &str, message: &str) -> Result<Merged> {
        let into = self.current_branch()?;
        if !self.branch_exists(branch) {
            return Err(WorktreeError::Git {
                step: format!("finding the branch {branch}"),
                git: format!("no branch {branch}"),
            });
        }
        let dirty = self.git(
            "checking your tree (git status)",
            &["status", "--porcelain", "--untracked-files=no"],
        )?;
        if !dirty.is_empty() {
            let files: Vec<&str> = dirty.lines().map(|l| l.get(3..).unwrap_or(l)).collect();
            return Err(WorktreeError::Dirty {
                branch: branch.to_string(),
                files: files.join(", "),
            });
        }
        // The person's own git, as they would run it: in quorum's session,
        // where a hook or a signing key's prompt may ask for the terminal
        // (not one of quorum's owned commands, which have none).
        let out = hardened::as_configured(&self.top)
            .args([
                "merge",
                "--no-ff",
                "--no-edit",
                "-m",
                message,
                "--end-of-options",
                branch,
            ])
            .output()
            .map_err(|source| WorktreeError::Spawn {
                step: "merging".into(),
                source,
            })?;
        if !out.status.success() {
            let git_said = message_of(&out);
            if git_ok(
                &self.top,
                &["rev-parse", "--verify", "--quiet", "MERGE_HEAD"],
            ) {
                self.git(
                    "aborting the merge (git merge --abort)",
                    &["merge", "--abort"],
                )?;
            }
            return Err(WorktreeError::Conflict {
                branch: branch.to_string(),
                into,
                git: git_said,
            });
        }
        let mut kept = None;
        if let Some(worktree) = self.worktree(branch) {
            if worktree.path.exists() && worktree.git_dir().is_err() {
                kept = Some(worktree.path);
            } else {
                self.remove_worktree(&worktree)?;
            }
        }
        self.set(branch, "merged", "true")?;
        Ok(Merged { into, kept })
    }

    /// The files `branch` changes (since it left its base) that git, hook
    /// managers, editors or agent CLIs would run, or read as configuration,
    /// once it is merged (`runtime::machinery::runs_later`): those under
    /// the repository's `core.hooksPath` when that lies in the tree,
    /// `.husky/`, `.envrc`, `.claude/`, `.mcp.json`, ... and every
    /// `.gitattributes` and `.gitmodules`.
    pub fn files_run_later(&self, branch: &str) -> Result<Vec<String>> {
        let base = self.fork_point(branch)?;
        let names = self.changed_files(&base, branch)?;
        let hooks = hardened::hooks_path(&self.top).and_then(|h| {
            lexical(&h)
                .strip_prefix(lexical(&self.top))
                .ok()
                .map(Path::to_path_buf)
        });
        Ok(names
            .into_iter()
            .filter(|n| machinery::runs_later(Path::new(n), hooks.as_deref()).is_some())
            .collect())
    }

    /// Removes a task's worktree (its branch stays). A worktree whose
    /// `.git` was changed gets back the one quorum made first, so that git
    /// knows it again.
    pub fn remove_worktree(&self, worktree: &Worktree) -> Result<()> {
        if worktree.path.exists() {
            if worktree.git_dir().is_err() {
                worktree.restore_dot_git()?;
            }
            let path = worktree.path.to_string_lossy().into_owned();
            self.git(
                "removing the worktree (git worktree remove)",
                &["worktree", "remove", "--force", "--end-of-options", &path],
            )?;
        }
        self.git(
            "pruning worktrees (git worktree prune)",
            &["worktree", "prune"],
        )
        .map(drop)
    }

    /// Removes `branch`'s worktree and the branch.
    pub fn discard(&self, branch: &str) -> Result<()> {
        if let Some(worktree) = self.worktree(branch) {
            self.remove_worktree(&worktree)?;
        }
        self.git(
            &format!("deleting the branch {branch} (git branch -D)"),
            &["branch", "-D", "--end-of-options", branch],
        )
        .map(drop)
    }

    /// `git diff OPTIONS BASE BRANCH`, with no external diff or textconv
    /// (what the branch holds never runs), `BASE` and `BRANCH` only ever
    /// revisions; `step` says what it was for.
    fn git_diff(&self, step: &str, options: &[&str], base: &str, branch: &str) -> Result<String> {
        let mut args = vec!["diff"];
        args.extend_from_slice(options);
        args.extend([
            "--no-ext-diff",
            "--no-textconv",
            "--end-of-options",
            base,
            branch,
            "--",
        ]);
        self.git(step, &args)
    }

    /// `git diff BASE BRANCH` as numbers.
    pub fn diffstat(&self, base: &str, branch: &str) -> Result<Diffstat> {
        let numstat = self.git_diff(
            &format!("measuring {branch} (git diff --numstat)"),
            &["--numstat", "--no-renames"],
            base,
            branch,
        )?;
        Ok(parse_numstat(&numstat))
    }

    /// `git diff BASE BRANCH`, cut at [`MAX_DIFF_BYTES`].
    pub fn diff(&self, base: &str, branch: &str) -> Result<String> {
        let mut diff = self.git_diff(
            &format!("reading the diff of {branch} (git diff)"),
            &["--no-color"],
            base,
            branch,
        )?;
        if diff.len() > MAX_DIFF_BYTES {
            let mut cut = MAX_DIFF_BYTES;
            while !diff.is_char_boundary(cut) {
                cut -= 1;
            }
            diff.truncate(cut);
            diff.push_str("\n… (diff cut short; `git diff` shows the rest)");
        }
        Ok(diff)
    }
}

fn message_of(out: &std::process::Output) -> String {
    message(out)
}

/// What `/merge` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    /// The person's branch it went into.
    pub into: String,
    /// The task's worktree, kept because its `.git` no longer points at the
    /// git directory quorum made (what was left in it is the person's to
    /// look at); `None` when it was removed, or there was none.
    pub kept: Option<PathBuf>,
}

/// Whether `a` and `b` name the same file (as the file system resolves
/// them, when it can).
fn same_file(a: &Path, b: &Path) -> bool {
    let resolve = |p: &Path| p.canonicalize().unwrap_or_else(|_| lexical(p));
    resolve(a) == resolve(b)
}

/// Sums `git diff --numstat` (binary files count as files only).
pub fn parse_numstat(text: &str) -> Diffstat {
    let mut stat = Diffstat::default();
    for line in text.lines() {
        let mut parts = line.split('\t');
        let (Some(a), Some(r)) = (parts.next(), parts.next()) else {
            continue;
        };
        stat.files += 1;
        stat.added += a.parse::<u64>().unwrap_or(0);
        stat.removed += r.parse::<u64>().unwrap_or(0);
    }
    stat
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branches_are_named_after_the_task() {
        assert_eq!(
            branch_name("t3", "Fix the retries!\nand more"),
            "quorum/t3-fix-the-retries-and-more"
        );
        assert_eq!(branch_name("t1", "…"), "quorum/t1");
        assert!(branch_name("t2", &"word ".repeat(40)).len() <= "quorum/t2-".len() + 32);
    }

    #[test]
    fn numstat_sums() {
        let stat = parse_numstat("40\t7\tsrc/a.rs\n2\t0\tb\n-\t-\timg.png\n");
        assert_eq!(
            stat,
            Diffstat {
                added: 42,
                removed: 7,
                files: 3
            }
        );
        assert_eq!(stat.to_string(), "+42 −7 in 3 files");
    }
}

#[cfg(test)]
mod repo_tests {
    //! The git steps against a scratch repository.
    use super::*;

    /// The person's git config is not these tests': a home of their own
    /// (an empty `~/.gitconfig`), no `GIT_*` of whoever runs the tests (a
    /// hook exports `GIT_DIR`). Set once, before any test here runs git.
    fn hermetic() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let home =
                std::env::temp_dir().join(format!("quorum-repo-tests-{}", std::process::id()));
            std::fs::create_dir_all(&home).unwrap();
            std::fs::write(home.join(".gitconfig"), "").unwrap();
            let inherited: Vec<String> = std::env::vars_os()
                .filter_map(|(k, _)| k.into_string().ok())
                .filter(|k| k.starts_with("GIT_"))
                .collect();
            // std serialises its own reads and writes of the environment.
            unsafe {
                for name in inherited {
                    std::env::remove_var(name);
                }
                // quorum's git clears every `GIT_*` but the identity, so
                // the global file it reads is the one in `HOME`.
                std::env::set_var("HOME", &home);
                std::env::set_var("XDG_CONFIG_HOME", home.join("config"));
            }
        });
    }

    fn scratch() -> (tempfile::TempDir, Repo) {
        hermetic();
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("repo");
        std::fs::create_dir_all(&top).unwrap();
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["config", "user.name", "T"],
            &["config", "user.email", "t@example.com"],
        ] {
            git(&top, "setup", args).unwrap();
        }
        std::fs::write(top.join("a.txt"), "one\n").unwrap();
        git(&top, "setup", &["add", "a.txt"]).unwrap();
        git(&top, "setup", &["commit", "-q", "-m", "first"]).unwrap();
        let repo = Repo::find(&top).unwrap();
        (dir, repo)
    }

    /// A file touched but unchanged is no uncommitted change: the branch
    /// starts from HEAD (`git stash create` alone failed here, saying
    /// nothing).
    #[test]
    fn a_touched_but_unchanged_file_is_no_uncommitted_change() {
        let (_dir, repo) = scratch();
        let file = std::fs::File::options()
            .write(true)
            .open(repo.top.join("a.txt"))
            .unwrap();
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
        file.set_modified(later).unwrap();
        drop(file);
        let (base, commit) = repo.base("quorum/t1").unwrap();
        assert!(matches!(base, Base::Head), "{base:?}");
        assert_eq!(
            commit,
            git(&repo.top, "test", &["rev-parse", "HEAD"]).unwrap()
        );
    }

    /// A commit written out for its check: its files, an executable, a
    /// link, from git's objects alone: a clean or smudge filter the
    /// configuration defines for the tree's `.gitattributes` never runs,
    /// no hook runs, and no `.git` is made.
    #[test]
    fn a_commit_is_written_out_without_filters_hooks_or_dot_git() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, repo) = scratch();
        let top = repo.top.clone();
        std::fs::create_dir_all(top.join("tests")).unwrap();
        std::fs::write(top.join("tests/run.sh"), "#!/bin/sh\necho ok\n").unwrap();
        std::fs::set_permissions(
            top.join("tests/run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::os::unix::fs::symlink("a.txt", top.join("link")).unwrap();
        std::fs::write(top.join(".gitattributes"), "*.txt filter=mark\n").unwrap();
        git(&top, "setup", &["add", "-A"]).unwrap();
        git(&top, "setup", &["commit", "-q", "-m", "second"]).unwrap();
        let mark = dir.path().join("filter.ran");
        let filter = format!("sh -c 'echo ran >> {}; cat'", mark.display());
        for key in ["filter.mark.smudge", "filter.mark.clean"] {
            git(&top, "setup", &["config", key, &filter]).unwrap();
        }
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let head = git(&top, "setup", &["rev-parse", "HEAD"]).unwrap();
        repo.export(&head, &out).unwrap();
        assert_eq!(std::fs::read_to_string(out.join("a.txt")).unwrap(), "one\n");
        let mode = std::fs::metadata(out.join("tests/run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111, "{mode:o}");
        assert_eq!(
            std::fs::read_link(out.join("link")).unwrap(),
            Path::new("a.txt")
        );
        assert!(!out.join(".git").exists());
        assert!(!mark.exists(), "a filter ran");
        let changed = repo.changed_files("HEAD~1", "HEAD").unwrap();
        assert_eq!(changed, [".gitattributes", "link", "tests/run.sh"]);
    }

    #[test]
    fn an_existing_branch_is_refused_and_nothing_is_made() {
        let (dir, repo) = scratch();
        let state = dir.path().join("state");
        git(&repo.top, "setup", &["branch", "quorum/t1-x"]).unwrap();
        let e = repo.create(&state, "quorum/t1-x", &[]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("branch quorum/t1-x already exists"),
            "{e}"
        );
        assert!(!repo.worktrees_dir(&state).join("quorum-t1-x").exists());
    }

    #[test]
    fn a_failing_worktree_add_leaves_no_branch() {
        let (dir, repo) = scratch();
        let state = dir.path().join("state");
        // Something is in the way of the worktree's folder.
        let path = repo.worktrees_dir(&state).join("quorum-t2-y");
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(path.join("x"), "x").unwrap();
        let e = repo.create(&state, "quorum/t2-y", &[]).unwrap_err();
        assert!(e.to_string().contains("already exists"), "{e}");
        assert!(!repo.branch_exists("quorum/t2-y"));
    }

    #[test]
    fn bare_repositories_and_plain_folders_are_named() {
        hermetic();
        let dir = tempfile::tempdir().unwrap();
        let e = Repo::find(dir.path()).unwrap_err();
        assert!(matches!(e, WorktreeError::NotARepo { .. }), "{e}");
        assert!(e.to_string().contains("not a git repository"), "{e}");
        git(dir.path(), "setup", &["init", "-q", "--bare"]).unwrap();
        let e = Repo::find(dir.path()).unwrap_err();
        assert!(e.to_string().contains("is a bare repository"), "{e}");
    }

    #[test]
    fn a_commit_then_a_follow_up_commit_on_the_branch() {
        let (dir, repo) = scratch();
        let state = dir.path().join("state");
        let w = repo
            .create(&state, "quorum/t3-fix", &[("task", "t3")])
            .unwrap();
        assert_eq!(w.base, Base::Head);
        std::fs::write(w.path.join("b.txt"), "two\n").unwrap();
        assert!(w.commit("Fix it (fake)", false).unwrap().is_some());
        std::fs::write(w.path.join("b.txt"), "two\nthree\n").unwrap();
        assert!(w.commit("Fix it (fake)", false).unwrap().is_some());
        assert_eq!(
            w.commit("Fix it (fake)", false).unwrap(),
            None,
            "nothing changed"
        );
        let stat = repo.diffstat(&w.base_commit, &w.branch).unwrap();
        assert_eq!(stat.to_string(), "+2 −0 in 1 file");
        assert_eq!(repo.unmerged(&w.branch).unwrap(), 2);
        assert_eq!(repo.get(&w.branch, "task").as_deref(), Some("t3"));
        assert_eq!(repo.worktree(&w.branch), Some(w.clone()));
        std::fs::remove_dir_all(&w.path).unwrap();
        let e = w.commit("again", false).unwrap_err();
        assert!(matches!(e, WorktreeError::Gone(_)), "{e}");
    }

    /// Issue 24: what quorum made is recorded, and a `.git` that says
    /// anything else (repointed, a byte more, a folder) gets no commit;
    /// the work stays, and once the `.git` is back the commit goes on.
    #[test]
    fn the_git_directory_is_recorded_and_a_changed_dot_git_is_refused() {
        let (dir, repo) = scratch();
        let state = dir.path().join("state");
        let w = repo.create(&state, "quorum/t4-x", &[]).unwrap();
        let git_dir = repo.get(&w.branch, "gitdir").unwrap();
        let made = std::fs::read_to_string(w.path.join(".git")).unwrap();
        assert_eq!(made, format!("gitdir: {git_dir}\n"));
        assert_eq!(repo.get_exact(&w.branch, "dotgit"), Some(made.clone()));
        assert_eq!(w.git_dir().unwrap(), PathBuf::from(&git_dir));

        std::fs::write(w.path.join("work.txt"), "work").unwrap();
        let refused = format!(
            "{}/.git no longer points at the git directory quorum made ({git_dir}); nothing \
             was committed, the work is left in the worktree for you",
            w.path.display()
        );
        for changed in ["gitdir: .evil\n", &format!("{made}\n")] {
            std::fs::write(w.path.join(".git"), changed).unwrap();
            let e = w.commit("x", false).unwrap_err();
            assert!(matches!(e, WorktreeError::Repointed { .. }), "{e}");
            assert_eq!(e.to_string(), refused);
        }
        std::fs::remove_file(w.path.join(".git")).unwrap();
        std::fs::create_dir(w.path.join(".git")).unwrap();
        assert_eq!(w.commit("x", false).unwrap_err().to_string(), refused);
        assert_eq!(repo.unmerged(&w.branch).unwrap(), 0, "nothing committed");
        assert_eq!(
            std::fs::read_to_string(w.path.join("work.txt")).unwrap(),
            "work"
        );
        std::fs::remove_dir(w.path.join(".git")).unwrap();
        std::fs::write(w.path.join(".git"), &made).unwrap();
        assert!(w.commit("x", false).unwrap().is_some());
        assert_eq!(repo.unmerged(&w.branch).unwrap(), 1);
    }

    /// A worktree an older quorum made (nothing recorded): its git
    /// directory is `<common>/worktrees/<name>` only while that points back
    /// at it and its `.git` at that.
    #[test]
    fn an_older_worktree_is_found_only_where_it_points_back() {
        let (dir, repo) = scratch();
        let state = dir.path().join("state");
        let w = repo.create(&state, "quorum/t5-old", &[]).unwrap();
        let recorded = PathBuf::from(repo.get(&w.branch, "gitdir").unwrap());
        for key in ["gitdir", "dotgit"] {
            git(
                &repo.top,
                "setup",
                &[
                    "config",
                    "--unset",
                    &format!("branch.{}.quorum{key}", w.branch),
                ],
            )
            .unwrap();
        }
        assert_eq!(
            w.git_dir().unwrap().canonicalize().unwrap(),
            recorded.canonicalize().unwrap()
        );
        std::fs::write(w.path.join("b.txt"), "b").unwrap();
        assert!(w.commit("old", false).unwrap().is_some());

        // Its `.git` points elsewhere.
        let made = std::fs::read_to_string(w.path.join(".git")).unwrap();
        std::fs::write(w.path.join(".git"), "gitdir: .evil\n").unwrap();
        let e = w.commit("x", false).unwrap_err();
        assert!(matches!(e, WorktreeError::Repointed { .. }), "{e}");
        std::fs::write(w.path.join(".git"), &made).unwrap();
        // The git directory points at another worktree.
        let back = recorded.join("gitdir");
        let was = std::fs::read_to_string(&back).unwrap();
        std::fs::write(&back, "/elsewhere/.git\n").unwrap();
        let e = w.commit("x", false).unwrap_err();
        assert!(
            e.to_string().contains("none recorded, and")
                && e.to_string().contains("does not point back at it"),
            "{e}"
        );
        std::fs::write(&back, was).unwrap();
        std::fs::write(w.path.join("c.txt"), "c").unwrap();
        assert!(w.commit("again", false).unwrap().is_some());
    }

    /// A worktree whose `.git` was changed: `/discard` still removes it
    /// (putting back the `.git` quorum made for git to know it), and a
    /// merge of its branch keeps it, for the person to look at.
    #[test]
    fn discard_removes_a_repointed_worktree_and_merge_keeps_one() {
        let (dir, repo) = scratch();
        let state = dir.path().join("state");
        let w = repo.create(&state, "quorum/t6-gone", &[]).unwrap();
        std::fs::write(w.path.join(".git"), "gitdir: .evil\n").unwrap();
        repo.discard(&w.branch).unwrap();
        assert!(!w.path.exists());
        assert!(!repo.branch_exists(&w.branch));

        let w = repo.create(&state, "quorum/t7-kept", &[]).unwrap();
        std::fs::write(w.path.join("b.txt"), "b").unwrap();
        w.commit("b", false).unwrap();
        std::fs::write(w.path.join("left.txt"), "left").unwrap();
        std::fs::write(w.path.join(".git"), "gitdir: .evil\n").unwrap();
        let merged = repo.merge(&w.branch, "merge t7").unwrap();
        assert_eq!(
            merged,
            Merged {
                into: "main".into(),
                kept: Some(w.path.clone())
            }
        );
        assert!(repo.top.join("b.txt").exists());
        assert!(w.path.join("left.txt").exists());
        repo.discard(&w.branch).unwrap();
        assert!(!w.path.exists());
    }

    /// What `/merge` names: hooks under `core.hooksPath` (and the scripts
    /// husky 9's `.husky/_` runs), `.gitattributes` and `.gitmodules`
    /// anywhere, the files hook managers, editors and agent CLIs run
    /// (`runtime::machinery::runs_later` has the whole table); nothing else.
    #[test]
    fn what_other_programs_run_is_named() {
        let (dir, repo) = scratch();
        let state = dir.path().join("state");
        git(
            &repo.top,
            "setup",
            &["config", "core.hooksPath", "./.husky/../.husky"],
        )
        .unwrap();
        let w = repo.create(&state, "quorum/t8-names", &[]).unwrap();
        for name in [
            ".husky/pre-commit",
            "sub/.gitattributes",
            ".gitmodules",
            ".envrc",
            ".claude/settings.json",
            "plain.txt",
        ] {
            let path = w.path.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x").unwrap();
        }
        w.commit("names", false).unwrap();
        assert_eq!(
            repo.files_run_later(&w.branch).unwrap(),
            [
                ".claude/settings.json",
                ".envrc",
                ".gitmodules",
                ".husky/pre-commit",
                "sub/.gitattributes"
            ]
        );
    }
}
