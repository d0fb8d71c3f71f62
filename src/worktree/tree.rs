//! A task's worktree itself: working in its copy of the session
//! directory, the git directory quorum recorded for it (never read back
//! from a `.git` file the agent could have changed), and the commit of
//! its work when a turn ends (never while a `.git` lies below its top, and
//! never entering a repository there).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

impl Worktree {
    /// Works in the worktree's copy of `dir`, a folder of the person's
    /// repository (its top: the worktree's top).
    pub fn in_dir(mut self, dir: &Path) -> Self {
        let top = self
            .repo
            .canonicalize()
            .unwrap_or_else(|_| self.repo.clone());
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        if let Ok(rel) = dir.strip_prefix(&top) {
            self.workdir = self.path.join(rel);
        }
        self
    }

    /// The worktree's own git directory: the one quorum recorded when it
    /// made the worktree, once its `.git` file is seen to still say exactly
    /// what git wrote then. A worktree an older quorum made (nothing
    /// recorded) is taken to be `<the repository's git directory>/worktrees/
    /// <its folder's name>` when that directory points back at the
    /// worktree's `.git` and the `.git` at it. Its `.git` gone: the
    /// worktree is ([`WorktreeError::Gone`]); saying anything else:
    /// [`WorktreeError::Repointed`].
    pub fn git_dir(&self) -> Result<PathBuf> {
        let dot_git = self.path.join(".git");
        // Its `.git` file ties it to the repository: without it, what is
        // left is no worktree.
        let Ok(meta) = dot_git.symlink_metadata() else {
            return Err(WorktreeError::Gone(self.path.clone()));
        };
        // Read only a small regular file: never a FIFO, a link or a folder.
        let says = (meta.is_file() && meta.len() <= 64 * 1024)
            .then(|| std::fs::read(&dot_git).ok())
            .flatten();
        let repo = self.repo();
        let recorded = repo
            .get(&self.branch, "gitdir")
            .zip(repo.get_exact(&self.branch, "dotgit"));
        if let Some((git_dir, made)) = recorded {
            return if says.as_deref() == Some(made.as_bytes()) {
                Ok(PathBuf::from(git_dir))
            } else {
                Err(self.repointed(git_dir))
            };
        }
        let Some(name) = self.path.file_name() else {
            return Err(self.repointed("none recorded".into()));
        };
        let git_dir = repo.common_dir()?.join("worktrees").join(name);
        let points_back = std::fs::read_to_string(git_dir.join("gitdir"))
            .is_ok_and(|back| same_file(Path::new(back.trim_end_matches('\n')), &dot_git));
        let points_there = says
            .as_deref()
            .and_then(|s| std::str::from_utf8(s).ok())
            .and_then(|s| s.strip_prefix("gitdir: "))
            .is_some_and(|to| same_file(&self.path.join(to.trim_end_matches('\n')), &git_dir));
        if points_back && points_there {
            Ok(git_dir)
        } else if points_back {
            Err(self.repointed(git_dir.display().to_string()))
        } else {
            Err(self.repointed(format!(
                "none recorded, and {} does not point back at it",
                git_dir.display()
            )))
        }
    }

    fn repointed(&self, git_dir: String) -> WorktreeError {
        WorktreeError::Repointed {
            worktree: self.path.clone(),
            git_dir,
        }
    }

    /// Puts back the `.git` file quorum made (what was recorded, else one
    /// pointing at the git directory that points back at the worktree),
    /// replacing whatever is there: for removing the worktree, which git
    /// refuses while its `.git` points elsewhere.
    pub(super) fn restore_dot_git(&self) -> Result<()> {
        let repo = self.repo();
        let made = match repo.get_exact(&self.branch, "dotgit") {
            Some(made) => made,
            None => {
                let name = self.path.file_name().unwrap_or_default();
                let git_dir = repo.common_dir()?.join("worktrees").join(name);
                let dot_git = self.path.join(".git");
                let back = std::fs::read_to_string(git_dir.join("gitdir")).unwrap_or_default();
                if !same_file(Path::new(back.trim_end_matches('\n')), &dot_git) {
                    return Err(self.repointed(format!(
                        "none recorded, and {} does not point back at it",
                        git_dir.display()
                    )));
                }
                format!("gitdir: {}\n", git_dir.display())
            }
        };
        let dot_git = self.path.join(".git");
        let io = |e: std::io::Error| WorktreeError::Io(format!("{}: {e}", dot_git.display()));
        match dot_git.symlink_metadata() {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&dot_git).map_err(io)?,
            Ok(_) => std::fs::remove_file(&dot_git).map_err(io)?,
            Err(_) => {}
        }
        std::fs::write(&dot_git, made).map_err(io)
    }

    /// The hardened `git` on this worktree: its git directory and work
    /// tree named (`git_dir`, from [`Worktree::git_dir`]), never found
    /// through its `.git`.
    fn command(&self, git_dir: &Path) -> Command {
        let mut cmd = hardened::in_dir(&self.path);
        cmd.arg(format!("--git-dir={}", git_dir.display()))
            .arg(format!("--work-tree={}", self.path.display()));
        cmd
    }

    /// Commits everything changed in the worktree to its branch; `None`
    /// when nothing changed. Refused, nothing staged, when its `.git` no
    /// longer points at the git directory quorum made, or when a `.git`
    /// lies below its top (a repository git would enter, running what its
    /// config says: [`WorktreeError::Nested`]).
    ///
    /// Git never enters a repository below the top, even one made while
    /// this runs: the gitlinks already in the index (the project's
    /// submodules) are left out of `git add`, a new one staged is taken
    /// back (the index read again from `HEAD`) and refused, and the commit
    /// is made from the index alone (`write-tree`, `commit-tree`,
    /// `update-ref`), never by `git commit`, which would ask each
    /// submodule for its status.
    ///
    /// The commit is quorum's scratch commit: unsigned whatever the
    /// person's config says (`commit.gpgsign`, `tag.gpgsign` off, and
    /// `--no-gpg-sign`), so no signing program runs or asks for a
    /// passphrase in the middle of the screen; with `sign` (`[worktree]
    /// sign = true`) it is signed (`-S`), and a signing failure is git's
    /// error, the work left in the worktree.
    pub fn commit(&self, message: &str, sign: bool) -> Result<Option<String>> {
        let git_dir = self.git_dir()?;
        let (nested, _) = machinery::nested_gits(&self.path, machinery::COMMIT_LIMIT);
        if !nested.is_empty() {
            return Err(self.nested(nested));
        }
        let links = self.gitlinks(&git_dir)?;
        let mut add = self.command(&git_dir);
        add.args(["add", "-A", "--", "."]);
        add.args(links.iter().map(|l| format!(":(exclude,literal){l}")));
        run(add, "staging the task's changes (git add -A)")?;
        let added: Vec<String> = self
            .gitlinks(&git_dir)?
            .into_iter()
            .filter(|l| !links.contains(l))
            .collect();
        if !added.is_empty() {
            let mut back = self.command(&git_dir);
            back.args(["read-tree", "HEAD"]);
            run(back, "taking back what was staged (git read-tree HEAD)")?;
            return Err(self.nested(
                added
                    .into_iter()
                    .map(|l| Path::new(&l).join(".git"))
                    .collect(),
            ));
        }
        let mut staged = self.command(&git_dir);
        staged.args([
            "diff",
            "--cached",
            "--quiet",
            "--no-ext-diff",
            "--no-textconv",
        ]);
        if succeeds(staged) {
            return Ok(None);
        }
        let mut tree = self.command(&git_dir);
        tree.arg("write-tree");
        let tree = run(tree, "writing the staged tree (git write-tree)")?;
        let mut commit = self.command(&git_dir);
        commit.args(signing(sign)).arg("commit-tree");
        commit.arg(if sign { "-S" } else { "--no-gpg-sign" });
        commit.args([&tree, "-p", "HEAD", "-m", message]);
        let commit = run(
            commit,
            &format!("committing to {} (git commit-tree)", self.branch),
        )?;
        let mut update = self.command(&git_dir);
        update.args([
            "update-ref",
            "-m",
            &format!("commit: {}", first_line(message)),
            "HEAD",
            &commit,
        ]);
        run(update, &format!("moving {} (git update-ref)", self.branch))?;
        let mut head = self.command(&git_dir);
        head.args(["rev-parse", "--short", "HEAD"]);
        run(head, "reading the new commit").map(Some)
    }

    /// The gitlinks (submodules) in the worktree's index, by path.
    fn gitlinks(&self, git_dir: &Path) -> Result<Vec<String>> {
        let mut ls = self.command(git_dir);
        ls.args(["ls-files", "--stage", "-z"]);
        let listed = run_exact(ls, "listing the index (git ls-files --stage)")?;
        Ok(listed
            .split('\0')
            .filter_map(|entry| {
                let (meta, path) = entry.split_once('\t')?;
                meta.starts_with("160000 ").then(|| path.to_string())
            })
            .collect())
    }

    fn nested(&self, paths: Vec<PathBuf>) -> WorktreeError {
        WorktreeError::Nested {
            worktree: self.path.clone(),
            paths: paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// The person's repository.
    pub fn repo(&self) -> Repo {
        Repo {
            top: self.repo.clone(),
        }
    }

    /// Sends the branch as it is here (at first: the commit it left from)
    /// to `url` (another machine's mirror, reached through `ssh_command`)
    /// as the branch there.
    pub fn push_branch(&self, url: &str, ssh_command: &str) -> Result<()> {
        let mut push = hardened::in_dir(&self.repo);
        push.arg("-c")
            .arg(format!("core.sshCommand={ssh_command}"))
            .args(["push", "--quiet", "--no-verify", "--force", url])
            .arg(format!("refs/heads/{0}:refs/heads/{0}", self.branch));
        run(
            push,
            &format!("pushing {} to {url} (git push)", self.branch),
        )?;
        Ok(())
    }

    /// Takes the branch's commits from `url` (the mirror the work was done
    /// in): fetched, and this worktree (which nobody works in meanwhile)
    /// reset to them. The new commit, short.
    pub fn take_from(&self, url: &str, ssh_command: &str) -> Result<String> {
        let git_dir = self.git_dir()?;
        let mut fetch = self.command(&git_dir);
        fetch
            .arg("-c")
            .arg(format!("core.sshCommand={ssh_command}"))
            .args(["fetch", "--quiet", "--no-tags", url])
            .arg(format!("refs/heads/{}", self.branch));
        run(
            fetch,
            &format!("fetching {} from {url} (git fetch)", self.branch),
        )?;
        let mut reset = self.command(&git_dir);
        reset.args(["reset", "--quiet", "--hard", "FETCH_HEAD"]);
        run(
            reset,
            &format!("moving {} to what was fetched", self.branch),
        )?;
        let mut head = self.command(&git_dir);
        head.args(["rev-parse", "--short", "HEAD"]);
        run(head, "reading the fetched commit")
    }
}

/// The configuration a scratch commit is made with: signing off
/// (`commit.gpgsign`, `tag.gpgsign`) unless `sign` asks for it.
pub fn signing(sign: bool) -> &'static [&'static str] {
    if sign {
        &[]
    } else {
        &["-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"]
    }
}
