//! `quorum worktrees`: the worktrees and branches quorum made for
//! isolated writers in this repository (task, branch, agent, state,
//! ahead/behind), and `--prune`, which removes those whose session is gone
//! and whose branch is merged.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use crate::confine::sanitize::sanitize;
use crate::transcript::sessions;
use crate::worktree::Repo;
use crate::worktree::list::Entry;

/// `quorum worktrees`'s options.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct WorktreesArgs {
    /// Remove the worktrees and branches whose session is gone (not
    /// running) and whose branch is merged into HEAD.
    #[arg(long)]
    pub prune: bool,
    /// The repository (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
}

/// Whether the session that made `entry` still runs.
fn session_alive(entry: &Entry) -> bool {
    entry
        .session
        .as_deref()
        .is_some_and(|s| s.exists() && sessions::open_in(s).is_some())
}

/// Lists (and prunes); returns the exit code: 0, or 2 outside a repository.
pub fn command(args: WorktreesArgs) -> Result<i32> {
    let dir = match args.cwd {
        Some(d) => d,
        None => std::env::current_dir()?,
    };
    let repo = match Repo::find(&dir) {
        Ok(r) => r,
        Err(e) => {
            crate::say!("quorum worktrees: {e}");
            return Ok(2);
        }
    };
    let entries = repo.entries()?;
    let mut out = std::io::stdout().lock();
    if entries.is_empty() {
        let _ = writeln!(
            out,
            "No quorum worktrees or branches in {}.",
            repo.top.display()
        );
        return Ok(0);
    }
    let width = entries.iter().map(|e| e.branch.len()).max().unwrap_or(0);
    // A host's task: its agent `@` the host it ran on.
    let agent = |e: &Entry| {
        let agent = e.agent.as_deref().unwrap_or("?");
        match &e.host {
            Some(host) => format!("{agent}@{host}"),
            None => agent.to_string(),
        }
    };
    for e in &entries {
        let alive = session_alive(e);
        let _ = writeln!(
            out,
            "{:<5} {:width$}  {:<10} {:<11} +{} -{}  {}{}",
            sanitize(e.task.as_deref().unwrap_or("?")),
            sanitize(&e.branch),
            sanitize(&agent(e)),
            e.state(),
            e.ahead,
            e.behind,
            e.worktree
                .as_ref()
                .map(|p| sanitize(&p.display().to_string()).into_owned())
                .unwrap_or_else(|| "(no worktree)".into()),
            if alive { "  (session running)" } else { "" },
        );
    }
    if args.prune {
        for e in entries.iter().filter(|e| e.merged && !session_alive(e)) {
            match repo.discard(&e.branch) {
                Ok(()) => {
                    let _ = writeln!(out, "pruned {}", sanitize(&e.branch));
                }
                Err(err) => crate::say!("quorum worktrees: {}: {err}", e.branch),
            }
        }
    }
    Ok(0)
}
