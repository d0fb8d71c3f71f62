//! A worktree task on its host: where it is there ([`There`]), its branch
//! pushed to a mirror there and a worktree made there on it before its
//! first turn ([`prepare`]), its work committed there and fetched home
//! ([`take_home`]: after a turn, on `/retry`, by `quorum worktrees
//! --fetch`), its worktree and branch removed there ([`remove_there`]).
//! The dispatcher's steps (`subagent/dispatch/remote.rs`) call these.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::RemoteError;
use super::ssh::{Link, quote};
use crate::worktree::{Worktree, WorktreeError};

/// A host's worktree task, as its host has it: the mirror of the person's
/// repository there, the worktree there, and where in it the agent works.
pub struct There {
    pub link: Arc<Link>,
    pub mirror: String,
    pub worktree: String,
    pub workdir: PathBuf,
}

impl There {
    /// Where `w` (a worktree at home) is on `link`'s host.
    pub fn of(link: Arc<Link>, w: &Worktree) -> Self {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        w.repo.hash(&mut h);
        let name = |p: &Path| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "repo".into())
        };
        let mirror = format!(
            "{}/mirrors/{}-{:08x}.git",
            link.dir,
            name(&w.repo),
            h.finish() as u32
        );
        let worktree = format!("{}/worktrees/{}", link.dir, name(&w.path));
        let workdir = match w.workdir.strip_prefix(&w.path) {
            Ok(rel) => Path::new(&worktree).join(rel),
            Err(_) => PathBuf::from(&worktree),
        };
        Self {
            link,
            mirror,
            worktree,
            workdir,
        }
    }

    /// The mirror as git at home reaches it.
    pub fn url(&self) -> String {
        format!("{}:{}", self.link.host.ssh, self.mirror)
    }

    /// The name of the task's worktree there, and of its git directory
    /// in the mirror.
    pub fn name(&self) -> String {
        Path::new(&self.worktree)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Hardened git there on the mirror.
    pub fn mirror_git(&self) -> String {
        hardened_git(&self.mirror)
    }

    /// Hardened git there on the task's worktree (its git directory named,
    /// as quorum made it, never read from the worktree's `.git`).
    pub fn git(&self) -> String {
        let git_dir = format!("{}/worktrees/{}", self.mirror, self.name());
        format!(
            "{} --work-tree={}",
            hardened_git(&git_dir),
            quote(&self.worktree)
        )
    }
}

/// A shell command's start: git with quorum's hardening, on the git
/// directory `git_dir` (on a host).
fn hardened_git(git_dir: &str) -> String {
    let hardening: Vec<String> = (crate::runtime::git::HARDENING.iter())
        .map(|a| quote(a))
        .collect();
    format!("git {} --git-dir={}", hardening.join(" "), quote(git_dir))
}

/// Runs blocking git at home off the runtime, for a task on `host`.
async fn blocking<T: Send + 'static>(
    host: &str,
    f: impl FnOnce() -> Result<T, WorktreeError> + Send + 'static,
) -> Result<T, RemoteError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(WorktreeError::Io(format!("stopped: {e}"))))
        .map_err(|e| RemoteError::git(host, e))
}

/// Before a host's worktree task's first turn: its branch (the commit it
/// left from) is pushed to the mirror there (made the first time), a
/// worktree is made there on the task's branch, and the agent will work in
/// it: where, on the host. Its later turns work on in that worktree (a
/// follow-up, a session continued: it is worked on in again, as it is).
/// `title`: the task's, which `quorum worktrees` shows and `--fetch`
/// commits with.
pub async fn prepare(link: Arc<Link>, w: &Worktree, title: &str) -> Result<PathBuf, RemoteError> {
    let host = link.host.name.clone();
    if link.git.is_none() {
        return Err(RemoteError::NoGit { host });
    }
    let there = There::of(link.clone(), w);
    let made = link
        .run(
            "making the mirror",
            &format!(
                "test -d {m} || git init --quiet --bare {m} || exit; \
                 if test -d {wt} && test -f {m}/worktrees/{n}/gitdir; then echo made; fi",
                m = quote(&there.mirror),
                wt = quote(&there.worktree),
                n = quote(&there.name()),
            ),
        )
        .await?;
    if made.trim() == "made" {
        return Ok(there.workdir);
    }
    let (wt, url, ssh, on) = (w.clone(), there.url(), link.git_ssh_command(), host.clone());
    let title = crate::worktree::first_line(title).to_string();
    blocking(&host, move || {
        // `quorum worktrees` names the host; `--fetch` commits there with
        // the message a turn's end would.
        wt.repo().set(&wt.branch, "host", &on)?;
        wt.repo().set(&wt.branch, "title", &title)?;
        wt.push_branch(&url, &ssh)
    })
    .await?;
    let git = there.git();
    let rel = there.workdir.display().to_string();
    link.run(
        "making the task's worktree",
        &format!(
            "{mirror} worktree prune && \
             {mirror} worktree add --quiet {wt} {b} && mkdir -p {rel} && {git} status --short >/dev/null",
            mirror = there.mirror_git(),
            wt = quote(&there.worktree),
            b = quote(&w.branch),
            rel = quote(&rel),
        ),
    )
    .await?;
    Ok(there.workdir)
}

/// What a host's worktree task changed there, committed there (hardened
/// git, the person's identity, `message` its message) and its branch
/// fetched home into the task's worktree `w`: the new commit, short. An
/// error names the host and what ssh or git said.
pub async fn take_home(
    link: Arc<Link>,
    w: &Worktree,
    message: &str,
) -> Result<String, RemoteError> {
    let host = link.host.name.clone();
    let there = There::of(link.clone(), w);
    let (name, email) = identity(&w.repo);
    let git = there.git();
    link.run(
        "committing the task's work",
        &format!(
            "export GIT_AUTHOR_NAME={n} GIT_AUTHOR_EMAIL={e} GIT_COMMITTER_NAME={n} GIT_COMMITTER_EMAIL={e}; \
             {git} add -A && ({git} diff --cached --quiet --no-ext-diff --no-textconv || \
             {git} -c commit.gpgsign=false commit --quiet --no-verify --no-gpg-sign -m {msg})",
            n = quote(&name),
            e = quote(&email),
            msg = quote(message),
        ),
    )
    .await?;
    let (wt, url, ssh) = (w.clone(), there.url(), link.git_ssh_command());
    blocking(&host, move || wt.take_from(&url, &ssh)).await
}

/// Removes a host's task (`w` at home) there: its worktree and its branch
/// in the mirror (the mirror stays, for the repository's other tasks).
/// Nothing else of the host is touched: the worktree is a folder quorum
/// named under its own state directory there.
pub async fn remove_there(link: Arc<Link>, w: &Worktree) -> Result<(), RemoteError> {
    let there = There::of(link.clone(), w);
    let git = there.mirror_git();
    // A worktree whose `.git` the agent changed is one git no longer
    // knows: its folder goes all the same (`rm` follows no link).
    link.run(
        "removing the task's worktree and branch",
        &format!(
            "test -d {m} || exit 0; \
             {git} worktree remove --force {wt} 2>/dev/null || rm -rf -- {wt}; \
             {git} worktree prune && \
             ({git} show-ref --verify --quiet refs/heads/{b} || exit 0; {git} branch -D --quiet {b})",
            m = quote(&there.mirror),
            wt = quote(&there.worktree),
            b = quote(&w.branch),
        ),
    )
    .await
    .map(drop)
}

/// The person's name and email as git at home has them for `repo`.
fn identity(repo: &Path) -> (String, String) {
    let get = |key: &str| {
        let var = match key {
            "user.name" => "GIT_AUTHOR_NAME",
            _ => "GIT_AUTHOR_EMAIL",
        };
        if let Some(v) = std::env::var(var).ok().filter(|v| !v.is_empty()) {
            return Some(v);
        }
        let mut cmd = crate::runtime::git::in_dir(repo);
        cmd.args(["config", "--get", key]);
        crate::runtime::git::output(cmd).filter(|v| !v.is_empty())
    };
    (
        get("user.name").unwrap_or_else(|| "quorum".into()),
        get("user.email").unwrap_or_else(|| "quorum@localhost".into()),
    )
}
