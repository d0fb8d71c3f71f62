//! The dispatcher's steps for a worktree task on another machine (`host =
//! "NAME"`), at the points of a call's life where they fall: the git of
//! it is `remote::git`'s (the person's commit pushed to a mirror there, a
//! worktree there on the task's branch, its work committed there and
//! fetched home when the turn ends); here, which host, and what the box
//! and the notices say.

use super::Dispatcher;
use crate::event::{Activity, Event, NoticeLevel, Outcome, StopReason};
use crate::remote::RemoteError;
use crate::remote::git::{prepare, remove_there, take_home};
use crate::remote::ssh::Link;
use crate::subagent::lock;
use crate::worktree::Worktree;

impl Dispatcher {
    /// The host `agent` runs on and its connection, if it runs on one.
    async fn link_of(&self, agent: &str) -> Option<Result<std::sync::Arc<Link>, RemoteError>> {
        let host = self.pool.host_of(agent)?;
        Some(self.pool.hosts().link(&host).await)
    }

    /// Before a host's worktree task's first turn: its branch pushed to
    /// the host and a worktree made there ([`prepare`]), where the agent
    /// will work. An error names the host and what ssh or git said.
    pub(in crate::subagent) async fn remote_prepare(
        &self,
        agent: &str,
        title: &str,
        w: &Worktree,
    ) -> Result<(), RemoteError> {
        let Some(link) = self.link_of(agent).await else {
            return Ok(());
        };
        let workdir = prepare(link?, w, title).await?;
        self.pool.set_remote_workdir(&w.workdir, workdir);
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
    ) -> Result<Option<String>, RemoteError> {
        let Some(link) = self.link_of(agent).await else {
            return Ok(None);
        };
        let message = format!("{} ({agent})", crate::worktree::first_line(title));
        let commit = take_home(link?, w, &message).await?;
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

impl Dispatcher {
    /// After `/merge` or `/discard` of a host's task (`host`, read before
    /// the branch went): its worktree and branch on the host removed too,
    /// from a task of their own; a notice says what was done, or why not.
    pub(in crate::subagent) fn remote_remove(&self, host: Option<String>, w: Option<Worktree>) {
        let (Some(host), Some(w)) = (host, w) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (hosts, emitter) = (self.pool.hosts().clone(), self.emitter.clone());
        runtime.spawn(async move {
            let removed = match hosts.link(&host).await {
                Ok(link) => remove_there(link, &w).await,
                Err(e) => Err(e),
            };
            let (level, text) = match removed {
                Ok(()) => (
                    NoticeLevel::Info,
                    format!(
                        "{}: its worktree and branch on host {host} are removed",
                        w.branch
                    ),
                ),
                Err(e) => (
                    NoticeLevel::Warning,
                    format!(
                        "{}: its worktree on host {host} is left there: {e}",
                        w.branch
                    ),
                ),
            };
            emitter.emit(Event::Notice { level, text });
        });
    }
}
