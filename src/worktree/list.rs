//! quorum's branches and worktrees in a repository, as `quorum worktrees`
//! lists them: read back from git (`for-each-ref`, the branch config), with
//! the hardened git of the module.

use std::path::PathBuf;

use super::{Repo, Result, git, git_ok};

/// One of quorum's task branches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub branch: String,
    pub task: Option<String>,
    pub agent: Option<String>,
    /// The host its agent ran on (`[hosts.NAME]`), if not this machine.
    pub host: Option<String>,
    /// The transcript of the session that made it.
    pub session: Option<PathBuf>,
    /// Its worktree, while it has one on disk.
    pub worktree: Option<PathBuf>,
    /// Commits the person's branch has that it lacks, and its own.
    pub behind: u32,
    pub ahead: u32,
    /// Every commit of it is in the person's `HEAD`.
    pub merged: bool,
}

impl Entry {
    /// `merged`, `worktree`, or `branch only` (its worktree is gone).
    pub fn state(&self) -> &'static str {
        match (self.merged, &self.worktree) {
            (true, _) => "merged",
            (false, Some(_)) => "worktree",
            (false, None) => "branch only",
        }
    }
}

impl Repo {
    /// Every `quorum/*` branch, sorted by name.
    pub fn entries(&self) -> Result<Vec<Entry>> {
        let refs = git(
            &self.top,
            "listing quorum's branches (git for-each-ref)",
            &[
                "for-each-ref",
                "--format=%(refname:short)",
                "refs/heads/quorum/",
            ],
        )?;
        let mut out = Vec::new();
        for branch in refs.lines().filter(|l| !l.is_empty()) {
            let counts = git(
                &self.top,
                &format!("comparing {branch} with HEAD (git rev-list)"),
                &[
                    "rev-list",
                    "--left-right",
                    "--count",
                    "--end-of-options",
                    &format!("HEAD...{branch}"),
                ],
            )?;
            let mut counts = counts.split_whitespace().map(|n| n.parse().unwrap_or(0));
            let behind = counts.next().unwrap_or(0);
            let ahead = counts.next().unwrap_or(0);
            let merged = git_ok(
                &self.top,
                &[
                    "merge-base",
                    "--is-ancestor",
                    "--end-of-options",
                    branch,
                    "HEAD",
                ],
            );
            out.push(Entry {
                branch: branch.to_string(),
                task: self.get(branch, "task"),
                agent: self.get(branch, "agent"),
                host: self.get(branch, "host"),
                session: self.get(branch, "session").map(PathBuf::from),
                worktree: self
                    .get(branch, "worktree")
                    .map(PathBuf::from)
                    .filter(|p| p.is_dir()),
                behind,
                ahead,
                merged,
            });
        }
        Ok(out)
    }
}
