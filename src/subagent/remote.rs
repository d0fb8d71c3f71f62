//! Agents on other machines (`host = "NAME"`): how the quorum there is
//! started for one (`quorum proxy` over the host's ssh connection), and
//! where on the host a task works. A worktree task's git there is the
//! dispatcher's (`dispatch/remote.rs`).

use std::path::Path;

use crate::acp::registry::AgentSpec;
use crate::acp::relay::Hosted;
use crate::runtime::sandbox::Sandbox;
use crate::runtime::ssh::{Link, quote};

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
        host: None,
        ..spec.clone()
    })
}
