//! Commands run for an agent, confined: under bubblewrap (when it is
//! installed and not turned off) the file system is read-only except the
//! session directory and a private `/tmp`. Shared by the internal agent's
//! shell tool and the client terminals of ACP agents.

use std::ffi::OsStr;
use std::path::Path;

use serde::Deserialize;

use super::supervisor;

/// How an agent's commands are confined (`terminal_sandbox` in its config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sandbox {
    /// Under bubblewrap; refused when it is not installed.
    Bwrap,
    /// As they are: they can write anywhere the person can.
    None,
}

impl Sandbox {
    pub fn as_str(self) -> &'static str {
        match self {
            Sandbox::Bwrap => "bwrap",
            Sandbox::None => "none",
        }
    }
}

/// Why a confined command could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("terminal_sandbox = \"bwrap\", but bubblewrap (bwrap) is not installed")]
    NoBwrap,
}

/// `program args…` for the supervisor, run in `cwd` (inside `root`),
/// confined as `mode` asks (`None`: under bubblewrap when it is
/// installed). The second value says whether it is sandboxed.
pub fn command<I, S>(
    program: impl AsRef<OsStr>,
    args: I,
    root: &Path,
    cwd: &Path,
    mode: Option<Sandbox>,
) -> Result<(tokio::process::Command, bool), SandboxError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let bwrap = match mode {
        Some(Sandbox::None) => None,
        Some(Sandbox::Bwrap) => Some(super::path::locate("bwrap").ok_or(SandboxError::NoBwrap)?),
        None => super::path::locate("bwrap"),
    };
    let sandboxed = bwrap.is_some();
    let mut cmd = match bwrap {
        Some(bwrap) => {
            let mut cmd = supervisor::command(bwrap);
            cmd.args([
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--tmpfs",
                "/tmp",
            ])
            .arg("--bind")
            .arg(root)
            .arg(root)
            .arg("--chdir")
            .arg(cwd)
            .args(["--unshare-pid", "--die-with-parent", "--"])
            .arg(program)
            .args(args);
            cmd
        }
        None => {
            let mut cmd = supervisor::command(program);
            cmd.args(args);
            cmd
        }
    };
    cmd.current_dir(cwd);
    Ok((cmd, sandboxed))
}
