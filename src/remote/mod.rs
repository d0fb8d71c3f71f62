//! Agents on other machines (`host = "NAME"` under `[agents.NAME]`, the
//! machine a `[hosts.NAME]` table: `config::hosts`). Home reaches a host
//! with the person's own OpenSSH, one connection per host ([`ssh`]); there
//! it starts quorum itself as a proxy for the agent ([`launch`]: `quorum
//! proxy` over that connection), which runs the agent under the same
//! supervisor and sandbox as at home and answers its file and terminal
//! requests there ([`relay`]). A worktree task's work is git's: the
//! person's branch pushed to a mirror there, a worktree there, its work
//! committed there and fetched home ([`git`]).
//!
//! Above `acp` (the relay answers with its handlers, the launch starts an
//! ACP connection), below the dispatcher (`subagent`, whose remote steps
//! call in here) and the commands (`cli`: `quorum proxy`, `quorum
//! worktrees --fetch`). What stays below: the checked `[hosts.NAME]`
//! tables (`config::hosts`, which the registry keeps), and the lines the
//! proxy sends home (`acp::relayed`, read by the transport's fast path).

pub mod git;
pub mod launch;
pub mod relay;
pub mod ship;
pub mod ssh;

use std::process::ExitStatus;
use std::sync::Arc;

use crate::worktree::WorktreeError;

/// Where what reaching a host takes long for is told (the copy of quorum
/// to a new host): the box of the call that made the connection shows it.
pub type Tell = tokio::sync::mpsc::UnboundedSender<String>;

/// Why something on a host could not be done. Each says the host; the
/// text is what the person reads (in a box, a notice, on stderr).
#[derive(Debug, Clone, thiserror::Error)]
pub enum RemoteError {
    /// quorum is ending: no connection is made any more.
    #[error("host {host}: quorum is ending; no new connection")]
    Closing { host: String },
    /// No `[hosts.NAME]` of that name.
    #[error("no [hosts.{host}] in the config")]
    NoHost { host: String },
    /// The host cannot be reached: its connection was not made.
    #[error("host {host} ({ssh}): {why}")]
    Unreachable {
        host: String,
        ssh: String,
        why: Unreachable,
    },
    /// `ssh` could not be run for a command there.
    #[error("host {host}: {what}: cannot run ssh: {error}")]
    Ssh {
        host: String,
        what: &'static str,
        error: Arc<std::io::Error>,
    },
    /// A command there failed; the last of what it said.
    #[error("host {host}: {what} failed ({status}): {said}")]
    Failed {
        host: String,
        what: &'static str,
        status: ExitStatus,
        said: String,
    },
    /// A private file could not be written there.
    #[error("host {host}: writing {path}: {why}")]
    Write {
        host: String,
        path: String,
        why: String,
    },
    /// The probe's answer is not what it asks for.
    #[error("host {host}: probing it: unexpected answer {answer:?}")]
    Probe { host: String, answer: String },
    /// The host is of another system, with no quorum of this version.
    #[error(
        "host {host}: it is {system}, this quorum is {ours}: quorum cannot copy itself there; \
         install {want} for {system} as {dir}/bin/quorum"
    )]
    OtherSystem {
        host: String,
        system: String,
        ours: String,
        want: String,
        dir: String,
    },
    /// This quorum could not be copied there.
    #[error("host {host}: {why}")]
    Copy { host: String, why: CopyFailure },
    /// A worktree task there needs git, which it has not.
    #[error(
        "host {host}: git is not installed there (no `git` on its PATH): a worktree task needs it"
    )]
    NoGit { host: String },
    /// Git at home, pushing to the host's mirror or fetching from it.
    #[error("host {host}: {error}")]
    Git {
        host: String,
        error: Arc<WorktreeError>,
    },
}

/// Why a host's connection was not made.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Unreachable {
    /// No private directory for its control socket.
    #[error("no socket directory: {0}")]
    NoSocketDir(Arc<std::io::Error>),
    /// `ssh` could not be run.
    #[error("cannot run ssh: {0}")]
    NoSsh(Arc<std::io::Error>),
    /// `ssh` exited: what it said.
    #[error("cannot connect (ssh {status}): {said}")]
    Refused { status: ExitStatus, said: String },
    /// It did not answer in time.
    #[error("did not answer within {secs}s")]
    NoAnswer { secs: u64 },
}

/// Why this quorum could not be copied to a host.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CopyFailure {
    #[error("cannot find quorum's binary: {0}")]
    NoBinary(Arc<std::io::Error>),
    #[error("{}: {error}", path.display())]
    Binary {
        path: std::path::PathBuf,
        error: Arc<std::io::Error>,
    },
    #[error("copying quorum: {0}")]
    Ssh(Arc<std::io::Error>),
    #[error("copying quorum to {dir}/bin failed: {said}")]
    Failed { dir: String, said: String },
}

impl RemoteError {
    /// Git at home failed for a task on `host`.
    pub fn git(host: &str, error: WorktreeError) -> Self {
        Self::Git {
            host: host.to_string(),
            error: Arc::new(error),
        }
    }
}
