//! Isolated writers in the dispatcher: a task with `isolation:
//! "worktree"` gets a git worktree of its own before its box opens, its
//! turns run there, and what it changed is committed to its branch when
//! each turn ends. Merging a branch into the person's tree (behind its
//! review quorum) and throwing one away are asked of the dispatcher too,
//! which knows the session's tasks and their worktrees.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::{DispatchError, Dispatcher};
use crate::event::{Activity, Event, NoticeLevel, Outcome, Quorum, Severity, Stamped, Work};
use crate::subagent::lock;
use crate::worktree::{self, Base, Repo, Worktree, WorktreeError};

/// The session's worktree tasks.
#[derive(Default)]
pub(in crate::subagent) struct Worktrees {
    /// quorum's state directory: worktrees go under it.
    pub(in crate::subagent) state: Option<PathBuf>,
    /// The session's transcript, recorded with each branch.
    pub(in crate::subagent) session: Option<PathBuf>,
    /// By call id.
    pub(in crate::subagent) by_call: HashMap<String, Isolated>,
    /// Branches whose `/discard` was asked once (they have unmerged
    /// commits): asked again, they go.
    pub(in crate::subagent) asked: HashSet<String>,
    /// `[worktree]`: setup, check, signing, shared caches.
    pub(in crate::subagent) settings: worktree::Settings,
    /// Branches whose worktree ran its setup.
    pub(in crate::subagent) set_up: HashSet<String>,
}

/// A worktree task.
#[derive(Debug, Clone)]
pub(in crate::subagent) struct Isolated {
    pub(in crate::subagent) worktree: Worktree,
    pub(in crate::subagent) task_id: Option<String>,
}

/// What `/discard` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Discarded {
    /// The branch has commits never merged: asked once; the same command
    /// again throws them away.
    Asked {
        branch: String,
        commits: u32,
    },
    Done {
        branch: String,
    },
}

impl Dispatcher {
    /// Where worktrees go (quorum's state directory) and the session's
    /// transcript, if it is recorded.
    pub fn set_worktrees(&self, state: Option<PathBuf>, session: Option<PathBuf>) {
        let mut w = lock(&self.worktrees);
        w.state = state;
        w.session = session;
    }

    /// The session directory's repository, checked before any agent
    /// starts: not a repository, bare, without a commit or on a detached
    /// HEAD is an error saying so.
    pub fn repo(&self) -> Result<Repo, DispatchError> {
        repo_at(self.root.path())
    }

    /// Makes a task's worktree on a branch named after it, and says so.
    /// Its git runs on a blocking thread: the runtime's threads, the one
    /// that takes a `SIGTERM` among them, never wait for it.
    pub(in crate::subagent) async fn make_worktree(
        &self,
        call_id: &str,
        task_id: Option<&str>,
        agent: &str,
        message: &str,
    ) -> Result<Worktree, DispatchError> {
        let (state, session) = {
            let w = lock(&self.worktrees);
            (w.state.clone(), w.session.clone())
        };
        let task = match task_id {
            Some(t) => t.to_string(),
            None => call_id.replace("call-", "c"),
        };
        let (dir, agent_name) = (self.root.path().to_path_buf(), agent.to_string());
        let title = worktree::first_line(message).to_string();
        let worktree = tokio::task::spawn_blocking(move || {
            let repo = repo_at(&dir)?;
            let state = state.ok_or(DispatchError::NoStateDir)?;
            // Task ids start again in every session: a name an earlier one
            // took gets a number.
            let name = worktree::branch_name(&task, &title);
            let mut branch = name.clone();
            for n in 2..100 {
                if !repo.branch_exists(&branch) {
                    break;
                }
                branch = format!("{name}-{n}");
            }
            let session = session.map(|p| p.display().to_string()).unwrap_or_default();
            let mut meta = vec![("task", task.as_str()), ("agent", agent_name.as_str())];
            if !session.is_empty() {
                meta.push(("session", &session));
            }
            let worktree = repo.create(&state, &branch, &meta)?.in_dir(&dir);
            // A session folder git does not track yet is made in the worktree.
            if let Err(e) = std::fs::create_dir_all(&worktree.workdir) {
                return Err(
                    WorktreeError::Io(format!("{}: {e}", worktree.workdir.display())).into(),
                );
            }
            // The files other programs run are the project's to change there.
            crate::runtime::machinery::mark_worktree(&worktree.path);
            Ok::<_, DispatchError>(worktree)
        })
        .await
        .unwrap_or_else(|e| {
            Err(WorktreeError::Io(format!("making the worktree stopped: {e}")).into())
        })?;
        lock(&self.worktrees).by_call.insert(
            call_id.to_string(),
            Isolated {
                worktree: worktree.clone(),
                task_id: task_id.map(str::to_string),
            },
        );
        Ok(worktree)
    }

    /// Announces a task's worktree (after its box opened).
    pub(in crate::subagent) fn worktree_ready(
        &self,
        call_id: &str,
        task_id: Option<&str>,
        w: &Worktree,
    ) {
        self.emitter.emit(Event::WorktreeReady {
            call_id: call_id.to_string(),
            task_id: task_id.map(str::to_string),
            branch: w.branch.clone(),
            path: w.path.display().to_string(),
            base: w.base.as_str().to_string(),
            base_commit: w.base_commit.clone(),
        });
    }

    /// Commits what a worktree task's turn changed to its branch; the
    /// outcome names the branch, the worktree and the diffstat.
    pub(in crate::subagent) async fn commit_work(
        &self,
        call_id: &str,
        (agent, title): (&str, &str),
        w: &Worktree,
        cancel: tokio::sync::watch::Receiver<bool>,
        outcome: &mut Outcome,
    ) {
        // The session ended under the turn: no git starts after it (nothing
        // quorum starts may outlive the session). The work stays in the
        // worktree; the task's next turn commits it.
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            self.emitter.emit(Event::SubagentActivity {
                call_id: call_id.to_string(),
                activity: crate::event::Activity::Notice {
                    text: format!(
                        "the session ended: the work stays uncommitted in {}; the task's next \
                         turn commits it",
                        w.path.display()
                    ),
                },
            });
            return;
        }
        let message = format!("{} ({agent})", worktree::first_line(title));
        let sign = self.worktree_settings().sign;
        let wt = w.clone();
        let done = tokio::task::spawn_blocking(move || {
            let commit = wt.commit(&message, sign)?;
            let repo = wt.repo();
            let stat = repo.diffstat(&wt.base_commit, &wt.branch)?;
            let diff = repo.diff(&wt.base_commit, &wt.branch)?;
            Ok::<_, WorktreeError>((commit, stat, diff))
        })
        .await
        .unwrap_or_else(|e| Err(WorktreeError::Io(format!("the commit stopped: {e}"))));
        let mut check = None;
        let stat = match done {
            Ok((commit, stat, diff)) => {
                self.emitter.emit(Event::WorktreeCommitted {
                    call_id: call_id.to_string(),
                    branch: w.branch.clone(),
                    commit: commit.clone(),
                    diffstat: stat,
                    diff,
                });
                if let Some(commit) = commit {
                    check = self.check_commit(call_id, w, &commit, cancel).await;
                }
                stat.to_string()
            }
            Err(e) => {
                // In the task's box (it stays when the box closes), and as a
                // notice of the session.
                self.emitter.emit(Event::SubagentActivity {
                    call_id: call_id.to_string(),
                    activity: Activity::Notice {
                        text: e.to_string(),
                    },
                });
                self.emitter.emit(Event::Notice {
                    level: NoticeLevel::Warning,
                    text: format!("{agent}: {e}"),
                });
                format!("unknown ({e})")
            }
        };
        let (check, touches_tests) = check.unzip();
        outcome.work = Some(Work {
            branch: w.branch.clone(),
            worktree: w.path.display().to_string(),
            diffstat: stat,
            check,
            touches_tests: touches_tests.unwrap_or_default(),
        });
    }

    /// The worktree task named `id`: a task id (`t3`), a call id, `c4`
    /// for a foreground call, or its branch.
    pub(super) fn find_isolated(&self, id: &str) -> Option<(String, Isolated)> {
        let id = id.trim();
        let w = lock(&self.worktrees);
        w.by_call
            .iter()
            .find(|(call, i)| {
                i.task_id.as_deref() == Some(id)
                    || call.as_str() == id
                    || call.replace("call-", "c") == id
                    || i.worktree.branch == id
            })
            .map(|(c, i)| (c.clone(), i.clone()))
    }

    /// The branch `id` names: a worktree task of this session, or a
    /// branch quorum made (`quorum/...`).
    fn branch_for(&self, repo: &Repo, id: &str) -> Result<(Option<String>, String), DispatchError> {
        if let Some((call, i)) = self.find_isolated(id) {
            if lock(&self.running).contains_key(&call) {
                return Err(DispatchError::StillRunning(id.to_string()));
            }
            return Ok((Some(call), i.worktree.branch));
        }
        if repo.branch_exists(id) && repo.get(id, "worktree").is_some() {
            return Ok((None, id.to_string()));
        }
        Err(DispatchError::NoWorktreeTask(id.to_string()))
    }

    /// `/merge TASK`: the task's branch merged into the person's current
    /// branch, by their own git (their hooks run); refused while its latest
    /// review quorum is red, and while it changes files other programs run
    /// or read as configuration (hooks, `.gitattributes`, `.gitmodules`,
    /// `.husky/`, `.envrc`, `.claude/`, `.mcp.json`, ...: `runtime::
    /// machinery::runs_later`), naming them (unless `force`: `/merge!`),
    /// and on a conflict (the merge aborted, the tree as it was). The merged task's
    /// worktree is removed (kept when its `.git` was changed, saying so).
    pub fn merge(&self, id: &str, force: bool) -> Result<String, DispatchError> {
        let repo = self.repo()?;
        let (call, branch) = self.branch_for(&repo, id)?;
        let id = id.trim().to_string();
        if !force && repo.verdict(&branch) == Some(Severity::Red) {
            return Err(DispatchError::RedQuorum { branch, id });
        }
        if !force {
            let files = repo.files_run_later(&branch)?;
            if !files.is_empty() {
                return Err(DispatchError::RunLater {
                    branch,
                    files: files.join(", "),
                    id,
                });
            }
        }
        let task = repo.get(&branch, "task").unwrap_or_else(|| id.clone());
        let there = (repo.get(&branch, "host"), repo.worktree(&branch));
        let merged = repo.merge(&branch, &format!("Merge quorum task {task} ({branch})"))?;
        if let Some(call) = call {
            lock(&self.worktrees).by_call.remove(&call);
        }
        self.remote_remove(there.0, there.1);
        self.emitter.emit(Event::BranchMerged {
            branch: branch.clone(),
            into: merged.into.clone(),
        });
        let into = merged.into;
        Ok(match merged.kept {
            None => format!("{branch} merged into {into}; its worktree is removed"),
            Some(path) => format!(
                "{branch} merged into {into}; its worktree {} is kept: its .git no longer points \
                 at the git directory quorum made, and what is left in it is yours to look at \
                 (`/discard {branch}` removes it)",
                path.display()
            ),
        })
    }

    /// `/discard TASK`: the task's worktree and branch removed; when the
    /// branch has commits that were never merged, asked once first.
    pub fn discard(&self, id: &str) -> Result<Discarded, DispatchError> {
        let repo = self.repo()?;
        let (call, branch) = self.branch_for(&repo, id)?;
        let commits = repo.unmerged(&branch)?;
        let asked = lock(&self.worktrees).asked.remove(&branch);
        if commits > 0 && !asked {
            lock(&self.worktrees).asked.insert(branch.clone());
            return Ok(Discarded::Asked { branch, commits });
        }
        let there = (repo.get(&branch, "host"), repo.worktree(&branch));
        repo.discard(&branch)?;
        if let Some(call) = call {
            lock(&self.worktrees).by_call.remove(&call);
        }
        self.remote_remove(there.0, there.1);
        self.emitter.emit(Event::BranchDiscarded {
            branch: branch.clone(),
        });
        Ok(Discarded::Done { branch })
    }

    /// Records a review quorum's verdict against the branch it judged.
    pub(in crate::subagent) fn record_verdict(
        &self,
        branch: &str,
        batch_id: &str,
        quorum: &Quorum,
    ) {
        let recorded = Repo::find(self.root.path())
            .map_err(DispatchError::from)
            .and_then(|repo| Ok(repo.record_verdict(branch, quorum.verdict)?));
        if let Err(e) = recorded {
            self.emitter.emit(Event::Notice {
                level: NoticeLevel::Warning,
                text: format!("review of {branch}: the verdict could not be recorded: {e}"),
            });
        }
        self.emitter.emit(Event::BranchVerdict {
            branch: branch.to_string(),
            batch_id: Some(batch_id.to_string()),
            verdict: quorum.verdict,
        });
    }

    /// The message of a review that judges `branch`: its diff against
    /// where it left its base follows the task.
    pub(in crate::subagent) fn with_branch_diff(&self, message: &str, branch: &str) -> String {
        let diff = Repo::find(self.root.path())
            .map_err(DispatchError::from)
            .and_then(|repo| {
                let base = repo.fork_point(branch)?;
                Ok(repo.diff(&base, branch)?)
            });
        match diff {
            Ok(diff) => branch_prompt(message, branch, &diff),
            Err(e) => format!("{message}\n\n(The diff of branch {branch} could not be read: {e})"),
        }
    }

    /// Goes on from a recorded session: its worktree tasks, found again
    /// (and said to be there, or gone).
    pub(in crate::subagent) fn restore_worktrees(&self, events: &[Stamped]) {
        let mut found: HashMap<String, Isolated> = HashMap::new();
        for stamped in events {
            match &stamped.event {
                Event::WorktreeReady {
                    call_id,
                    task_id,
                    branch,
                    path,
                    base,
                    base_commit,
                } => {
                    found.insert(
                        call_id.clone(),
                        Isolated {
                            worktree: Worktree {
                                repo: self.root.path().to_path_buf(),
                                branch: branch.clone(),
                                path: PathBuf::from(path),
                                workdir: PathBuf::from(path),
                                base: if base == "uncommitted" {
                                    Base::Uncommitted
                                } else {
                                    Base::Head
                                },
                                base_commit: base_commit.clone(),
                            },
                            task_id: task_id.clone(),
                        },
                    );
                }
                Event::BranchMerged { branch, .. } | Event::BranchDiscarded { branch } => {
                    found.retain(|_, i| &i.worktree.branch != branch);
                }
                _ => {}
            }
        }
        let top = Repo::find(self.root.path()).ok().map(|r| r.top);
        let mut found: Vec<(String, Isolated)> = found.into_iter().collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        for (call, mut i) in found {
            if let Some(top) = &top {
                i.worktree.repo = top.clone();
                i.worktree = i.worktree.in_dir(self.root.path());
            }
            let name = i
                .task_id
                .clone()
                .unwrap_or_else(|| call.replace("call-", "c"));
            let text = if i.worktree.path.is_dir() {
                format!(
                    "{name}: its worktree is still there ({}, branch {}); /merge {name}, /discard {name}{}",
                    i.worktree.path.display(),
                    i.worktree.branch,
                    if i.task_id.is_some() || lock(&self.foreground).contains_key(&call) {
                        format!(" or /msg {name} to go on")
                    } else {
                        String::new()
                    }
                )
            } else {
                format!(
                    "{name}: its worktree {} is gone; branch {} keeps what was committed",
                    i.worktree.path.display(),
                    i.worktree.branch
                )
            };
            self.emitter.emit(Event::Notice {
                level: NoticeLevel::Info,
                text,
            });
            crate::runtime::machinery::mark_worktree(&i.worktree.path);
            if let Some(meta) = lock(&self.tasks).get_mut(&call) {
                meta.worktree = Some(i.worktree.clone());
            }
            if let Some(meta) = lock(&self.foreground).get_mut(&call) {
                meta.worktree = Some(i.worktree.clone());
            }
            lock(&self.worktrees).by_call.insert(call, i);
        }
    }
}

/// A review's message with the branch's diff.
pub fn branch_prompt(message: &str, branch: &str, diff: &str) -> String {
    format!(
        "{message}\n\nThe change under review is branch `{branch}`, against the point where it \
         left its base:\n\n```diff\n{}\n```",
        diff.trim_end()
    )
}

/// A quorum of the verdicts in `tasks` that judged `branch`.
pub(in crate::subagent) fn branch_quorums(
    branches: &[Option<String>],
    verdicts: &[crate::event::ReviewerVerdict],
) -> Vec<(String, Quorum)> {
    let mut names: Vec<&String> = branches.iter().flatten().collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|b| {
            let of: Vec<_> = branches
                .iter()
                .zip(verdicts)
                .filter(|(x, _)| x.as_ref() == Some(b))
                .map(|(_, v)| v.clone())
                .collect();
            (b.clone(), Quorum::of(of))
        })
        .collect()
}

/// Checks a worktree is still there before a turn runs in it.
pub(in crate::subagent) fn still_there(path: &Path) -> Result<(), WorktreeError> {
    if path.is_dir() {
        Ok(())
    } else {
        Err(WorktreeError::Gone(path.to_path_buf()))
    }
}

/// The repository `dir` is in, checked as [`Dispatcher::repo`] says.
fn repo_at(dir: &Path) -> Result<Repo, DispatchError> {
    let repo = Repo::find(dir)?;
    repo.current_branch()?;
    Ok(repo)
}
