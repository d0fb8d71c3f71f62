//! The `git` the person has, run so that nothing in a tree an agent could
//! write is run by it: hooks pointed nowhere, fsmonitor off, no external
//! diff or textconv (the callers of `diff` add `--no-ext-diff
//! --no-textconv`), the variables that would point git at another
//! repository cleared, and git found on `PATH` the careful way
//! (`super::path`). The identity variables (`GIT_AUTHOR_*`,
//! `GIT_COMMITTER_*`) are the person's own and kept.
//!
//! Also what the sandbox and the file tools keep read-only in a session
//! directory: its `.git` (a directory, or a worktree's `.git` file) and the
//! repository's `core.hooksPath` when that lies inside it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The configuration every hardened git runs with: no hook runs (the
/// hooks directory is one that cannot hold any), no fsmonitor command, no
/// external diff program.
pub const HARDENING: &[&str] = &[
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "diff.external=",
];

/// Whether an environment variable is one git must not see: it would
/// point git at another repository, index or configuration, or run a
/// program (`GIT_EXTERNAL_DIFF`, `GIT_SSH_COMMAND`, …). The identity ones
/// stay.
pub fn is_unsafe_var(name: &OsStr) -> bool {
    let name = name.to_string_lossy();
    name.starts_with("GIT_")
        && !["GIT_AUTHOR_", "GIT_COMMITTER_"]
            .iter()
            .any(|keep| name.starts_with(keep))
}

/// `git` (found on `PATH` outside the session directories, else a name
/// that fails to start, saying so), hardened: [`HARDENING`] first, the unsafe
/// variables cleared, stdin closed. The caller adds `--git-dir` /
/// `--work-tree` (before the subcommand) and the subcommand.
pub fn command() -> Command {
    let mut cmd = unhardened();
    cmd.args(HARDENING);
    cmd
}

/// `git` with the unsafe variables cleared and stdin closed, but without
/// [`HARDENING`]: for reading the configuration as it is (`git config`
/// runs no hook and no fsmonitor).
fn unhardened() -> Command {
    let program = super::path::locate_or_missing("git");
    let mut cmd = Command::new(program);
    for (name, _) in std::env::vars_os() {
        if is_unsafe_var(&name) {
            cmd.env_remove(name);
        }
    }
    cmd.stdin(Stdio::null());
    cmd
}

/// The hardened `git` run in `dir`, letting git find the repository from
/// there (for the person's own tree, whose `.git` no agent may write).
pub fn in_dir(dir: &Path) -> Command {
    let mut cmd = command();
    cmd.current_dir(dir);
    cmd
}

/// `git` run in `dir` with the person's own configuration and hooks, not
/// hardened (the unsafe variables still cleared, git still found the
/// careful way): only for what the person asks of their own repository
/// themselves, `/merge`'s `git merge`.
pub fn as_configured(dir: &Path) -> Command {
    let mut cmd = unhardened();
    cmd.current_dir(dir);
    cmd
}

/// Runs `cmd`, a git of this module's, to its end: its output (stdout and
/// stderr captured). Owned as every process quorum starts: it ends with
/// quorum, however quorum ends (`supervisor::spawn_owned`).
pub fn run(cmd: &mut Command) -> std::io::Result<std::process::Output> {
    super::supervisor::output_owned(cmd, "git")
}

/// [`run`], its exit status alone (stdout and stderr as `cmd` set them).
pub fn status(cmd: &mut Command) -> std::io::Result<std::process::ExitStatus> {
    super::supervisor::status_owned(cmd, "git")
}

/// [`run`], started: the child, and its group's handle to hold until it
/// is waited for.
pub fn spawn(
    cmd: &mut Command,
) -> std::io::Result<(std::process::Child, super::supervisor::Group)> {
    super::supervisor::spawn_owned(cmd, "git")
}

/// What git printed on stdout, trimmed at the end, if it succeeded.
pub fn output(mut cmd: Command) -> Option<String> {
    let out = run(&mut cmd).ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

/// The repository's hooks directory, when `core.hooksPath` names one
/// (husky's `.husky/`, `.githooks/`): absolute, resolved as git does
/// (relative to the top of the working tree). `None` when it is unset,
/// or `dir` is in no repository.
pub fn hooks_path(dir: &Path) -> Option<PathBuf> {
    let mut cmd = unhardened();
    cmd.current_dir(dir)
        .args(["config", "--path", "--get", "core.hooksPath"]);
    let value = output(cmd).filter(|v| !v.is_empty())?;
    let value = PathBuf::from(value);
    if value.is_absolute() {
        return Some(value);
    }
    let mut top = in_dir(dir);
    top.args(["rev-parse", "--show-toplevel"]);
    let top = output(top).filter(|t| !t.is_empty())?;
    Some(Path::new(&top).join(value))
}

/// What in `root` no agent may change, because git would run it or read
/// its configuration from it: `root/.git` (a directory, or a worktree's
/// file) when it exists, and the repository's hooks directory when it lies
/// inside `root`. Absolute paths, as the sandbox binds them.
pub fn protected(root: &Path) -> Vec<PathBuf> {
    protected_with(root, hooks_path(root))
}

/// [`protected`], given the repository's hooks directory ([`hooks_path`]
/// of `root`): for a caller that needs it too (git asked once).
fn protected_with(root: &Path, hooks: Option<PathBuf>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let dot_git = root.join(".git");
    if dot_git.symlink_metadata().is_ok() {
        out.push(dot_git);
    }
    if let Some(hooks) = hooks {
        let hooks = hooks.canonicalize().unwrap_or(hooks);
        let canonical_root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        if hooks.starts_with(&canonical_root) && !out.contains(&hooks) {
            out.push(hooks);
        }
    }
    out
}

/// The session directory `dir` as agents' file access sees it: confined
/// to it, never writing what [`protected`] names, and, in the person's own
/// tree, writing the files other programs run only once they allow it
/// (`super::machinery::asking`). Noted as a session directory: no program
/// quorum starts is found on `PATH` inside it ([`super::path::session_dir`]).
pub fn root(dir: &Path) -> std::io::Result<crate::confine::fsroot::Root> {
    super::path::session_dir(dir);
    let hooks = hooks_path(dir);
    Ok(crate::confine::fsroot::Root::new(dir)?
        .guarding(protected_with(dir, hooks.clone()))
        .asking(super::machinery::asking(dir, hooks)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &Path, args: &[&str]) {
        let out = in_dir(dir)
            .args(args)
            .env("HOME", dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    #[test]
    fn only_the_identity_variables_reach_git() {
        for (name, unsafe_) in [
            ("GIT_DIR", true),
            ("GIT_WORK_TREE", true),
            ("GIT_INDEX_FILE", true),
            ("GIT_CONFIG_GLOBAL", true),
            ("GIT_EXTERNAL_DIFF", true),
            ("GIT_SSH_COMMAND", true),
            ("GIT_AUTHOR_NAME", false),
            ("GIT_COMMITTER_EMAIL", false),
            ("PATH", false),
        ] {
            assert_eq!(is_unsafe_var(OsStr::new(name)), unsafe_, "{name}");
        }
    }

    #[test]
    fn the_hardening_comes_before_any_subcommand() {
        let cmd = command();
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy()).collect();
        assert_eq!(args, HARDENING);
    }

    /// The person's tree's root writes a file other programs run only
    /// once allowed (the internal agent, which cannot ask, is refused with
    /// what the person can do); a worktree quorum made writes it.
    #[test]
    fn the_persons_tree_asks_before_a_file_other_programs_run() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().canonicalize().unwrap().join("tree");
        let worktree = dir.path().canonicalize().unwrap().join("worktree");
        for d in [&tree, &worktree] {
            std::fs::create_dir_all(d).unwrap();
            run(d, &["init", "-q"]);
        }
        let e = root(&tree)
            .unwrap()
            .write(Path::new(".envrc"), "x")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            ".envrc: refused: direnv runs it when a shell enters its folder; in your own tree \
             an agent writes it only once you allow it, and you were not asked here: write it \
             yourself, or give the task isolation \"worktree\" (/merge then names the file and \
             asks for /merge! before it reaches your tree)"
        );
        assert!(!tree.join(".envrc").exists());
        root(&tree)
            .unwrap()
            .write(Path::new("src/lib.rs"), "x")
            .unwrap();
        super::super::machinery::mark_worktree(&worktree);
        root(&worktree)
            .unwrap()
            .write(Path::new(".envrc"), "x")
            .unwrap();
    }

    /// `.git` and an in-tree hooks directory are what must stay read-only;
    /// a hooks directory outside the root is not the root's to protect.
    #[test]
    fn protected_names_dot_git_and_an_inside_hooks_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        assert!(protected(&root).is_empty(), "not a repository");
        run(&root, &["init", "-q"]);
        assert_eq!(protected(&root), vec![root.join(".git")]);
        std::fs::create_dir(root.join(".husky")).unwrap();
        run(&root, &["config", "core.hooksPath", ".husky"]);
        assert_eq!(
            protected(&root),
            vec![root.join(".git"), root.join(".husky")]
        );
        // From a folder inside: the hooks are the top's, outside the folder.
        std::fs::create_dir(root.join("sub")).unwrap();
        assert!(protected(&root.join("sub")).is_empty());
        run(&root, &["config", "core.hooksPath", "/etc/hooks-elsewhere"]);
        assert_eq!(protected(&root), vec![root.join(".git")]);
    }
}
