//! Commands run for an agent, confined: under bubblewrap (when it is
//! installed and not turned off) the file system is read-only except the
//! session directory and a private `/tmp`. Shared by the internal agent's
//! shell tool and the client terminals of ACP agents.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

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
        None => return Ok(auto(program, args, root, cwd)),
        Some(Sandbox::None) => None,
        Some(Sandbox::Bwrap) => Some(super::path::locate("bwrap").ok_or(SandboxError::NoBwrap)?),
    };
    let sandboxed = bwrap.is_some();
    Ok((build(program, args, root, cwd, bwrap.as_deref()), sandboxed))
}

/// [`command`] with the default: under bubblewrap when it is installed,
/// else as it is (the second value says which).
pub fn auto<I, S>(
    program: impl AsRef<OsStr>,
    args: I,
    root: &Path,
    cwd: &Path,
) -> (tokio::process::Command, bool)
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let bwrap = super::path::locate("bwrap");
    let sandboxed = bwrap.is_some();
    (build(program, args, root, cwd, bwrap.as_deref()), sandboxed)
}

/// The command: under `bwrap` (the file system read-only but `root`, a
/// private `/tmp`, its own process ids) when given.
fn build<I, S>(
    program: impl AsRef<OsStr>,
    args: I,
    root: &Path,
    cwd: &Path,
    bwrap: Option<&Path>,
) -> tokio::process::Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
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
            ]);
            for dir in tmp_path_dirs(std::env::var_os("PATH").as_deref(), root) {
                cmd.arg("--ro-bind").arg(&dir).arg(&dir);
            }
            cmd.arg("--bind")
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
    cmd
}

/// The directories on `path` (a `PATH` value) that lie under `/tmp`, which
/// the sandbox's private `/tmp` would hide: bound read-only, a command finds
/// the same programs inside as outside. Those inside `root` are bound with
/// it.
fn tmp_path_dirs(path: Option<&OsStr>, root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in path.map(std::env::split_paths).into_iter().flatten() {
        if dir.is_absolute()
            && dir.starts_with("/tmp")
            && !dir.starts_with(root)
            && dir.is_dir()
            && !dirs.contains(&dir)
        {
            dirs.push(dir);
        }
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(cmd: &tokio::process::Command) -> Vec<String> {
        let cmd = cmd.as_std();
        std::iter::once(cmd.get_program())
            .chain(cmd.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn none_runs_the_command_as_it_is_in_its_directory() {
        let (cmd, sandboxed) = command(
            "sh",
            ["-c", "pwd"],
            Path::new("/w"),
            Path::new("/w/sub"),
            Some(Sandbox::None),
        )
        .unwrap();
        assert!(!sandboxed);
        assert!(argv(&cmd).ends_with(&["sh".into(), "-c".into(), "pwd".into()]));
        assert_eq!(cmd.as_std().get_current_dir(), Some(Path::new("/w/sub")));
    }

    /// A program on a `PATH` directory under `/tmp` is found inside the
    /// sandbox too (its private `/tmp` would hide it): the directory is
    /// bound read-only; one inside the session directory comes with it.
    #[test]
    fn path_directories_under_tmp_are_kept_visible() {
        let tmp = tempfile::tempdir_in("/tmp").unwrap();
        let bin = tmp.path().join("bin");
        let inside = tmp.path().join("w/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&inside).unwrap();
        let path = std::env::join_paths([
            bin.clone(),
            PathBuf::from("/usr/bin"),
            inside,
            tmp.path().join("missing"),
            bin.clone(),
        ])
        .unwrap();
        assert_eq!(tmp_path_dirs(Some(&path), &tmp.path().join("w")), vec![bin]);
    }

    #[test]
    fn bwrap_binds_only_the_session_directory_writable() {
        match command(
            "ls",
            ["-l"],
            Path::new("/w"),
            Path::new("/w/sub"),
            Some(Sandbox::Bwrap),
        ) {
            Ok((cmd, sandboxed)) => {
                assert!(sandboxed);
                let argv = argv(&cmd).join(" ");
                assert!(
                    argv.contains(
                        "--ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --bind /w /w --chdir /w/sub --unshare-pid --die-with-parent -- ls -l"
                    ),
                    "{argv}"
                );
            }
            // Not installed: refused, saying so.
            Err(e) => {
                assert!(super::super::path::locate("bwrap").is_none());
                assert!(e.to_string().contains("bwrap) is not installed"), "{e}");
            }
        }
    }
}
