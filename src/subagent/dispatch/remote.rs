//! A worktree task on another machine (`host = "NAME"`): the person's
//! commit pushed to a mirror there, a worktree there on the task's branch,
//! its work committed there and fetched home when the turn ends.

use std::path::{Path, PathBuf};

use super::Dispatcher;
use crate::event::{Activity, Event, NoticeLevel, Outcome, StopReason};
use crate::runtime::ssh::{Link, quote};
use crate::subagent::lock;
use crate::worktree::{Worktree, WorktreeError};

/// A host's worktree task, as its host has it: the mirror of the person's
/// repository there, the worktree there, and where in it the agent works.
struct There {
    link: std::sync::Arc<Link>,
    mirror: String,
    worktree: String,
    workdir: PathBuf,
}

impl There {
    /// Where `w` (a worktree at home) is on `link`'s host.
    fn of(link: std::sync::Arc<Link>, w: &Worktree) -> Self {
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
    fn url(&self) -> String {
        format!("{}:{}", self.link.host.ssh, self.mirror)
    }

    /// Hardened git there on the task's worktree (its git directory named,
    /// as quorum made it, never read from the worktree's `.git`).
    fn git(&self) -> String {
        let name = Path::new(&self.worktree)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        format!(
            "git {} --git-dir={} --work-tree={}",
            crate::runtime::git::HARDENING
                .iter()
                .map(|a| quote(a))
                .collect::<Vec<_>>()
                .join(" "),
            quote(&format!("{}/worktrees/{name}", self.mirror)),
            quote(&self.worktree)
        )
    }
}

/// Runs blocking git at home off the runtime.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, WorktreeError> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(WorktreeError::Io(format!("stopped: {e}"))))
        .map_err(|e| e.to_string())
}

impl Dispatcher {
    /// The host `agent` runs on and its connection, if it runs on one.
    async fn link_of(&self, agent: &str) -> Option<Result<std::sync::Arc<Link>, String>> {
        let host = self.pool.host_of(agent)?;
        Some(self.pool.hosts().link(&host).await)
    }

    /// Before a host's worktree task runs: the commit its branch left from
    /// is pushed to the mirror there (made the first time), a worktree is
    /// made there on the task's branch, and the agent will work in it. An
    /// error names the host and what ssh or git said.
    pub(in crate::subagent) async fn remote_prepare(
        &self,
        agent: &str,
        w: &Worktree,
    ) -> Result<(), String> {
        let Some(link) = self.link_of(agent).await else {
            return Ok(());
        };
        let link = link?;
        let host = link.host.name.clone();
        if link.git.is_none() {
            return Err(format!(
                "host {host}: git is not installed there (no `git` on its PATH): a worktree task needs it"
            ));
        }
        let there = There::of(link.clone(), w);
        link.run(
            "making the mirror",
            &format!(
                "test -d {m} || git init --quiet --bare {m}",
                m = quote(&there.mirror)
            ),
        )
        .await?;
        let (wt, url, ssh, on) = (w.clone(), there.url(), link.git_ssh_command(), host.clone());
        blocking(move || {
            // `quorum worktrees` names the host.
            wt.repo().set(&wt.branch, "host", &on)?;
            wt.push_base(&url, &ssh)
        })
        .await
        .map_err(|e| format!("host {host}: {e}"))?;
        let git = there.git();
        let rel = there.workdir.display().to_string();
        link.run(
            "making the task's worktree",
            &format!(
                "git {h} --git-dir={m} worktree add --quiet {wt} {b} && mkdir -p {rel} && {git} status --short >/dev/null",
                h = crate::runtime::git::HARDENING.join(" "),
                m = quote(&there.mirror),
                wt = quote(&there.worktree),
                b = quote(&w.branch),
                rel = quote(&rel),
            ),
        )
        .await?;
        self.pool
            .set_remote_workdir(&w.workdir, there.workdir.clone());
        Ok(())
    }

    /// After a host's worktree task's turn: what it changed there is
    /// committed there (hardened, the person's identity) and the branch
    /// fetched home into the task's worktree, which is then an ordinary
    /// worktree task. A host that cannot be reached leaves the work there
    /// (`/retry` fetches it); the outcome says so.
    pub(in crate::subagent) async fn remote_collect(
        &self,
        agent: &str,
        title: &str,
        w: &Worktree,
    ) -> Result<Option<String>, String> {
        let Some(link) = self.link_of(agent).await else {
            return Ok(None);
        };
        let link = link?;
        let host = link.host.name.clone();
        let there = There::of(link.clone(), w);
        let (name, email) = identity(&w.repo);
        let git = there.git();
        let message = format!("{} ({agent})", crate::worktree::first_line(title));
        link.run(
            "committing the task's work",
            &format!(
                "export GIT_AUTHOR_NAME={n} GIT_AUTHOR_EMAIL={e} GIT_COMMITTER_NAME={n} GIT_COMMITTER_EMAIL={e}; \
                 {git} add -A && ({git} diff --cached --quiet --no-ext-diff --no-textconv || \
                 {git} commit --quiet --no-verify -m {msg})",
                n = quote(&name),
                e = quote(&email),
                msg = quote(&message),
            ),
        )
        .await?;
        let (wt, url, ssh) = (w.clone(), there.url(), link.git_ssh_command());
        let commit = blocking(move || wt.take_from(&url, &ssh))
            .await
            .map_err(|e| format!("host {host}: {e}"))?;
        Ok(Some(commit))
    }
}

impl Dispatcher {
    /// After a host's worktree task's turn, before its work is committed
    /// here: a turn the connection lost (its ssh ended by a signal, or
    /// saying so with 255) is `interrupted`; its work is taken home now if
    /// the host answers, else it stays there for `/retry`.
    pub(in crate::subagent) async fn remote_finish(
        &self,
        call_id: &str,
        agent: &str,
        title: &str,
        w: &Worktree,
        outcome: &mut Outcome,
    ) {
        let Some(host) = self.pool.host_of(agent) else {
            return;
        };
        if outcome.stop_reason == StopReason::Error
            && (outcome.output.contains("exited with code 255")
                || outcome.output.contains("ended by"))
        {
            outcome.stop_reason = StopReason::Interrupted;
            outcome.output = format!(
                "the connection to host {host} was lost mid-turn ({}); /retry takes its work home",
                outcome.output
            );
        }
        let text = match self.remote_collect(agent, title, w).await {
            Ok(Some(commit)) => {
                format!("{agent}: {} fetched from host {host} ({commit})", w.branch)
            }
            Ok(None) => return,
            Err(e) => format!("{agent}: the work stays on host {host} until /retry: {e}"),
        };
        self.emitter.emit(Event::SubagentActivity {
            call_id: call_id.to_string(),
            activity: Activity::Notice { text },
        });
    }

    /// `/retry` of a host's worktree task: what it did there is taken home
    /// to its branch first.
    pub(in crate::subagent) async fn remote_retrieve(
        &self,
        call_id: &str,
        agent: &str,
        title: &str,
    ) {
        let old = lock(&self.worktrees)
            .by_call
            .get(call_id)
            .map(|i| i.worktree.clone());
        let (Some(w), Some(host)) = (old, self.pool.host_of(agent)) else {
            return;
        };
        let (level, text) = match self.remote_collect(agent, title, &w).await {
            Ok(Some(commit)) => (
                NoticeLevel::Info,
                format!("{} fetched from host {host} ({commit})", w.branch),
            ),
            Ok(None) => return,
            Err(e) => (
                NoticeLevel::Warning,
                format!("{}: not fetched: {e}", w.branch),
            ),
        };
        self.emitter.emit(Event::Notice { level, text });
    }
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
