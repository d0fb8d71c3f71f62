//! How an agent on a host is started: quorum there as its proxy (`quorum
//! proxy`, [`super::relay`]), run by `ssh` through the host's connection,
//! in a directory of its own there. What home then runs is an ordinary ACP
//! agent whose command is that `ssh`; the pool connects to it as to any.

use std::path::{Path, PathBuf};

use super::RemoteError;
use super::relay::Hosted;
use super::ssh::{Hosts, Link, quote, task_dir};
use crate::acp::registry::AgentSpec;
use crate::runtime::sandbox::Sandbox;

/// Where on its host a task in `dir` (a worktree at home) works, under
/// the host's state directory.
pub fn leaf(dir: &Path) -> String {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "task".into());
    format!("worktrees/{name}")
}

/// `spec` (an agent with `host = "NAME"`) as home starts it: its host
/// connected (the first time: `hosts` connects and probes it), quorum
/// there started as its proxy in `there` (a worktree task's directory on
/// the host, made before its first turn), else in `leaf` under the
/// host's state directory (what takes long in connecting told to
/// `tell`). The agent to start here, and the directory it works in there.
pub async fn on_host(
    hosts: &Hosts,
    spec: &AgentSpec,
    (there, leaf): (Option<PathBuf>, &str),
    isolated: bool,
    tell: Option<super::Tell>,
) -> Result<(AgentSpec, PathBuf), RemoteError> {
    let host = spec.host.clone().unwrap_or_default();
    let link = hosts.link_telling(&host, tell).await?;
    let dir = there.unwrap_or_else(|| task_dir(&link, leaf));
    let launch = launch(spec, &link, &dir, isolated).await?;
    Ok((launch, dir))
}

/// `spec` started on `link`'s host, in `dir` there: `ssh` through the
/// host's connection, running quorum there as a proxy for the agent. The
/// agent's environment goes to the host (inside the proxy's sandbox), not
/// to the ssh here, in a private file there (not on a command line).
async fn launch(
    spec: &AgentSpec,
    link: &Link,
    dir: &Path,
    isolated: bool,
) -> Result<AgentSpec, RemoteError> {
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
