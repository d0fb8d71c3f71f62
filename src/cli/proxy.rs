//! `quorum proxy`: quorum on another machine, started there over ssh by
//! the quorum at home for one agent (`remote::launch`, `remote::relay`). It
//! starts the agent in the task's directory under the same supervisor and
//! sandbox as at home, answers its file and terminal requests there, passes
//! everything else home, and ends every process it started when home goes.

use std::path::PathBuf;

use anyhow::Result;

use crate::remote::relay::{Hosted, relay};
use crate::runtime::supervisor::Supervisor;

/// `quorum proxy`'s arguments (hidden: only quorum starts it).
#[derive(clap::Args)]
pub struct ProxyArgs {
    /// The task's directory on this machine (made if missing).
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// The agent, as the quorum at home describes it (JSON).
    #[arg(long, value_name = "JSON")]
    agent: String,
}

/// Relays until home or the agent goes; the agent's exit code (home tells
/// it, as for an agent of its own), or 2 when the agent could not be
/// started (said on stderr, which ssh carries home).
pub async fn command(args: ProxyArgs) -> Result<i32> {
    let hosted: Hosted = serde_json::from_str(&args.agent)
        .map_err(|e| anyhow::anyhow!("quorum proxy: --agent: {e}"))?;
    let supervisor = Supervisor::new();
    let done = relay(hosted, &args.dir, &supervisor).await;
    supervisor.shutdown_blocking();
    let code = match done {
        Ok(code) => code,
        Err(e) => {
            crate::say!("quorum proxy: {e}");
            2
        }
    };
    // Now: a read of stdin (home's) may still wait on a thread, which the
    // runtime's shutdown would wait for; everything started is ended.
    std::process::exit(code)
}
