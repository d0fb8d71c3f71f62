//! Agents on other machines (`host = "NAME"`): how the quorum there is
//! started for one (`quorum proxy` over the host's ssh connection), and
//! where on the host a task works. A worktree task's git there is the
//! dispatcher's (`dispatch/remote.rs`); what it shares with `quorum
//! worktrees --fetch` is here: where a task is on its host, its work
//! committed there and taken home, its worktree and branch removed there.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::acp::registry::AgentSpec;
use crate::acp::relay::Hosted;
use crate::runtime::sandbox::Sandbox;
use crate::runtime::ssh::{Link, quote};
use crate::worktree::{Worktree, WorktreeError};

/// Where on its host a task in `dir` (a worktree at home) works, under
/// the host's state directory.
pub(super) fn leaf(dir: &Path) -> String {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "task".into());
    format!("worktrees/{name}")
}

/// `spec` started on `link`'s host, in `dir` there: `ssh` through the
/// host's connection, running quorum there as a proxy for the agent. The
/// agent's environment goes to the host (inside the proxy's sandbox), not
/// to the ssh here, in a private file there (not on a command line).
pub(super) async fn launch(
    spec: &AgentSpec,
    link: &Link,
    dir: &Path,
    isolated: bool,
) -> Result<AgentSpec, String> {
    let mut hosted = Hosted::of(spec, isolated);
    if !hosted.env.is_empty() {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let file = format!("{}/run/env-{}-{n}.json", link.dir, std::process::id());
        let env = serde_json::to_vec(&hosted.env).expect("plain data");
        link.write_private(&file, &env).await?;
        hosted.env.clear();
        hosted.env_file = Some(file);
    }
    let json = serde_json::to_string(&hosted).expect("plain data");
    let remote = format!(
        "exec {} proxy --dir {} --agent {}",
        quote(&link.quorum),
        quote(&dir.display().to_string()),
        quote(&json)
    );
    let mut args = link.ssh_args();
    args.push(remote);
    Ok(AgentSpec {
        command: "ssh".into(),
        args,
        env: Default::default(),
        sandbox: Some(Sandbox::None),
        // The connection reads what the proxy there relays.
        host: Some(link.host.name.clone()),
        ..spec.clone()
    })
}

/// A host's worktree task, as its host has it: the mirror of the person's
/// repository there, the worktree there, and where in it the agent works.
pub(crate) struct There {
    pub(crate) link: Arc<Link>,
    pub(crate) mirror: String,
    pub(crate) worktree: String,
    pub(crate) workdir: PathBuf,
}

impl There {
    /// Where `w` (a worktree at home) is on `link`'s host.
    pub(crate) fn of(link: Arc<Link>, w: &Worktree) -> Self {
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
    pub(crate) fn url(&self) -> String {
        format!("{}:{}", self.link.host.ssh, self.mirror)
    }

    /// The name of the task's worktree there, and of its git directory
    /// in the mirror.
    pub(crate) fn name(&self) -> String {
        Path::new(&self.worktree)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Hardened git there on the mirror.
    pub(crate) fn mirror_git(&self) -> String {
        hardened_git(&self.mirror)
    }

    /// Hardened git there on the task's worktree (its git directory named,
    /// as quorum made it, never read from the worktree's `.git`).
    pub(crate) fn git(&self) -> String {
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

/// Runs blocking git at home off the runtime.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, WorktreeError> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(WorktreeError::Io(format!("stopped: {e}"))))
        .map_err(|e| e.to_string())
}

/// What a host's worktree task changed there, committed there (hardened
/// git, the person's identity, `message` its message) and its branch
/// fetched home into the task's worktree `w`: the new commit, short. An
/// error names the host and what ssh or git said.
pub async fn take_home(link: Arc<Link>, w: &Worktree, message: &str) -> Result<String, String> {
    let host = link.host.name.clone();
    let there = There::of(link.clone(), w);
    let (name, email) = identity(&w.repo);
    let git = there.git();
    link.run(
        "committing the task's work",
        &format!(
            "export GIT_AUTHOR_NAME={n} GIT_AUTHOR_EMAIL={e} GIT_COMMITTER_NAME={n} GIT_COMMITTER_EMAIL={e}; \
             {git} add -A && ({git} diff --cached --quiet --no-ext-diff --no-textconv || \
             {git} commit --quiet --no-verify -m {msg})",
            n = quote(&name),
            e = quote(&email),
            msg = quote(message),
        ),
    )
    .await?;
    let (wt, url, ssh) = (w.clone(), there.url(), link.git_ssh_command());
    blocking(move || wt.take_from(&url, &ssh))
        .await
        .map_err(|e| format!("host {host}: {e}"))
}

/// Removes a host's task (`w` at home) there: its worktree and its branch
/// in the mirror (the mirror stays, for the repository's other tasks).
/// Nothing else of the host is touched: the worktree is a folder quorum
/// named under its own state directory there.
pub async fn remove_there(link: Arc<Link>, w: &Worktree) -> Result<(), String> {
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
pub(crate) fn identity(repo: &Path) -> (String, String) {
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
