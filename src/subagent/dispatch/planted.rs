//! What a turn leaves in the person's own tree that other programs run
//! later: a `.git` below its top (git run in that folder, by the person or
//! their shell prompt, reads its config, which can run programs) and the
//! files hook managers, editors and agent CLIs run (`.husky/`, `.envrc`,
//! `.claude/`, ...). The sandbox keeps the existing ones at the top
//! read-only and file writes ask first; what neither can refuse (a
//! command's `mkdir sub/.git`, an unsandboxed agent's own write, a folder
//! renamed away from under a bound file) is found by comparing the tree
//! before and after each turn (`runtime::machinery::Snapshot`, bounded)
//! and named in the call's box. A worktree task's turn is not checked
//! here: its commit refuses a nested `.git`, and `/merge` names the rest.
//! Nor is the turn of an agent on another machine (`host = ...`): it
//! works in its directory there, where its file requests and terminals
//! are answered and confined (`remote::relay`), and the person's tree
//! here is out of its reach; walking that tree twice would only delay
//! the call (up to 100,000 entries each time).

use std::sync::atomic::Ordering;

use super::Dispatcher;
use crate::event::{Activity, Event, NoticeLevel};
use crate::runtime::git;
use crate::runtime::machinery::{self, Snapshot};

impl Dispatcher {
    /// The person's tree before a turn that runs in it (`None`: the turn
    /// runs `elsewhere`, in a worktree or on a host, or the tree could not
    /// be read).
    pub(in crate::subagent) async fn before_turn(&self, elsewhere: bool) -> Option<Snapshot> {
        if elsewhere {
            return None;
        }
        let top = self.root.path().to_path_buf();
        tokio::task::spawn_blocking(move || snapshot(&top))
            .await
            .ok()
    }

    /// Names in the call's box (and as a warning of the session) what the
    /// turn made or changed since `before` that other programs run.
    pub(in crate::subagent) async fn after_turn(
        &self,
        call_id: &str,
        agent: &str,
        before: Snapshot,
    ) {
        let top = self.root.path().to_path_buf();
        let after = {
            let top = top.clone();
            tokio::task::spawn_blocking(move || snapshot(&top)).await
        };
        let Ok(after) = after else {
            return;
        };
        if (before.cut || after.cut) && !self.cut_said.swap(true, Ordering::Relaxed) {
            self.emitter.emit(Event::Notice {
                level: NoticeLevel::Info,
                text: format!(
                    "{} holds more than {} entries: quorum's check after each turn for a planted \
                     .git and for files other programs run reads only that many, nearest the \
                     top first; what lies deeper is not checked",
                    top.display(),
                    machinery::TURN_LIMIT
                ),
            });
        }
        for text in machinery::notices(&top, &after.since(&before)) {
            self.emitter.emit(Event::SubagentActivity {
                call_id: call_id.to_string(),
                activity: Activity::Notice { text: text.clone() },
            });
            self.emitter.emit(Event::Notice {
                level: NoticeLevel::Warning,
                text: format!("{agent}: {text}"),
            });
        }
    }
}

/// The person's tree under `top` as it is now.
fn snapshot(top: &std::path::Path) -> Snapshot {
    Snapshot::take(top, git::hooks_path(top), machinery::TURN_LIMIT)
}
