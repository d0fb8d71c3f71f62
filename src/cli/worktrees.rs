//! `quorum worktrees`: the worktrees and branches quorum made for
//! isolated writers in this repository (task, branch, agent, state,
//! ahead/behind), `--prune`, which removes those whose session is gone
//! and whose branch is merged, and `--fetch`, which takes home the work of
//! the tasks that ran on other machines (`[hosts.NAME]`) and is still
//! there (a connection lost mid-turn).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;

use crate::acp::registry::Registry;
use crate::confine::sanitize::sanitize;
use crate::remote::git::{remove_there, take_home};
use crate::remote::ssh::{Hosts, Link};
use crate::runtime::supervisor::Supervisor;
use crate::transcript::sessions;
use crate::worktree::Repo;
use crate::worktree::list::Entry;

/// `quorum worktrees`'s options.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct WorktreesArgs {
    /// Remove the worktrees and branches whose session is gone (not
    /// running) and whose branch is merged into HEAD (a host's task's on
    /// its host too).
    #[arg(long)]
    pub prune: bool,
    /// For every task that ran on another machine: what it changed there
    /// committed there and its branch fetched home (after a connection
    /// lost mid-turn). Exit code 1 if any could not be fetched.
    #[arg(long, conflicts_with = "prune")]
    pub fetch: bool,
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

/// Lists (and prunes, or fetches); returns the exit code: 0, 1 when a
/// task's work could not be fetched, or 2 outside a repository (or with a
/// bad config file for `--fetch`).
pub async fn command(args: WorktreesArgs, config: Option<PathBuf>) -> Result<i32> {
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
    if args.fetch {
        return fetch(&repo, &entries, config.as_deref()).await;
    }
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
        let mut reach = None;
        for e in entries.iter().filter(|e| e.merged && !session_alive(e)) {
            let there = repo.worktree(&e.branch);
            match repo.discard(&e.branch) {
                Ok(()) => {
                    let _ = writeln!(out, "pruned {}", sanitize(&e.branch));
                }
                Err(err) => {
                    crate::say!("quorum worktrees: {}: {err}", e.branch);
                    continue;
                }
            }
            // A host's task: its worktree and branch there go too.
            let (Some(host), Some(w)) = (e.host.as_deref(), there) else {
                continue;
            };
            let reach = match &mut reach {
                Some(reach) => reach,
                None => reach.insert(Reach::new(
                    Registry::load(config.as_deref()).map_err(|e| e.to_string()),
                )),
            };
            let removed = match reach.link(host).await {
                Ok(link) => remove_there(link, &w).await.map_err(|e| e.to_string()),
                Err(err) => Err(err),
            };
            if let Err(err) = removed {
                crate::say!(
                    "quorum worktrees: {}: its worktree on host {} is left there: {}",
                    sanitize(&e.branch),
                    sanitize(host),
                    sanitize(&err)
                );
            }
        }
        if let Some(reach) = reach {
            reach.close();
        }
    }
    Ok(0)
}

/// The hosts of the config file, each connected once (a host that cannot
/// be reached is tried once).
struct Reach {
    hosts: Result<Hosts, String>,
    supervisor: Supervisor,
    reached: HashMap<String, Result<Arc<Link>, String>>,
}

impl Reach {
    /// The hosts of `registry` (the config file's), or why there are none.
    fn new(registry: Result<Registry, String>) -> Self {
        let supervisor = Supervisor::new();
        let hosts = registry.map(|r| Hosts::new(r.hosts().clone(), supervisor.clone()));
        Self {
            hosts,
            supervisor,
            reached: HashMap::new(),
        }
    }

    async fn link(&mut self, host: &str) -> Result<Arc<Link>, String> {
        if let Some(link) = self.reached.get(host) {
            return link.clone();
        }
        let link = match &self.hosts {
            Ok(hosts) => hosts.link(host).await.map_err(|e| e.to_string()),
            Err(e) => Err(e.clone()),
        };
        self.reached.insert(host.to_string(), link.clone());
        link
    }

    /// Ends every connection made.
    fn close(self) {
        drop(self.reached);
        if let Ok(hosts) = &self.hosts {
            hosts.close();
        }
        self.supervisor.shutdown_blocking();
    }
}

/// `--fetch`: each host's task, its work committed there and its branch
/// fetched home, one line each (what came home, or why not). A host that
/// cannot be reached is tried once; the other hosts' tasks go on.
async fn fetch(repo: &Repo, entries: &[Entry], config: Option<&Path>) -> Result<i32> {
    let registry = match Registry::load(config) {
        Ok(registry) => registry,
        Err(e) => {
            crate::say!("quorum worktrees: {e}");
            return Ok(2);
        }
    };
    let on_hosts: Vec<(&Entry, &str)> = entries
        .iter()
        .filter_map(|e| Some((e, e.host.as_deref()?)))
        .collect();
    let mut out = std::io::stdout();
    if on_hosts.is_empty() {
        let _ = writeln!(
            out,
            "No quorum task of {} ran on another machine.",
            repo.top.display()
        );
        return Ok(0);
    }
    let mut reach = Reach::new(Ok(registry));
    let mut failed = 0;
    for (e, host) in on_hosts {
        let branch = sanitize(&e.branch).into_owned();
        let said = if session_alive(e) {
            // Its session takes the work home itself (its turn's end,
            // `/retry`): two at once would race on the same branch.
            Ok(format!("{branch}: its session is running; /retry there"))
        } else if let Some(w) = repo.worktree(&e.branch).filter(|w| w.path.is_dir()) {
            let link = reach.link(host).await;
            let title = repo
                .get(&e.branch, "title")
                .unwrap_or_else(|| e.branch.clone());
            let message = format!("{title} ({})", e.agent.as_deref().unwrap_or("agent"));
            match link {
                Ok(link) => take_home(link, &w, &message)
                    .await
                    .map(|commit| {
                        format!("{branch}: fetched from host {} ({commit})", sanitize(host))
                    })
                    .map_err(|e| e.to_string()),
                Err(err) => Err(err),
            }
            .map_err(|err| format!("{branch}: not fetched: {}", sanitize(&err)))
        } else {
            Err(format!(
                "{branch}: not fetched: its worktree here is gone (`quorum worktrees --prune`)"
            ))
        };
        let line = said.unwrap_or_else(|line| {
            failed += 1;
            line
        });
        let _ = writeln!(out, "{line}");
    }
    reach.close();
    Ok(if failed > 0 { 1 } else { 0 })
}
