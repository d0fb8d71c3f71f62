//! What quorum needs of this machine, asked of it (`quorum doctor`): git
//! and its version, whether bubblewrap makes quorum's own sandbox here (the
//! very command [`super::sandbox`] builds, with the seccomp filter of
//! [`super::seccomp`], run once), the state directory, and how to install
//! what is missing. Each answer is typed; its text is what the person
//! reads, and [`SandboxFault::fix`] what to do about it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::sandbox::{self, Env, Policy, Sandbox, SandboxError};
use super::supervisor::Supervisor;

/// How long the sandbox's trial run may take.
const SANDBOX_WAIT: Duration = Duration::from_secs(15);

/// A program found, and the version it says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    pub path: PathBuf,
    pub version: String,
}

/// git as quorum runs it (found the careful way, hardened), and its
/// version: `None` when there is none on `PATH`, or it does not run.
pub fn git() -> Option<Program> {
    let path = super::path::locate("git")?;
    let mut cmd = super::git::command();
    cmd.arg("--version");
    let said = super::git::output(cmd)?;
    // `git version 2.47.3`
    let version = said.strip_prefix("git version ").unwrap_or(&said).trim();
    Some(Program {
        path,
        version: version.to_string(),
    })
}

/// What quorum needs installed, for [`install_line`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Git,
    Bubblewrap,
    Ssh,
}

/// The package managers [`install_line`] knows, by the systems that use
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Packages {
    Apt,
    Dnf,
    Pacman,
    Apk,
    Zypper,
    Brew,
}

impl Tool {
    /// Its package's name for `packages`.
    fn package(self, packages: Packages) -> &'static str {
        match (self, packages) {
            (Tool::Git, _) => "git",
            (Tool::Bubblewrap, _) => "bubblewrap",
            (Tool::Ssh, Packages::Apt) => "openssh-client",
            (Tool::Ssh, Packages::Dnf | Packages::Zypper) => "openssh-clients",
            (Tool::Ssh, _) => "openssh",
        }
    }
}

/// How to install `tool` here: the command of this system's package
/// manager (as `/etc/os-release` names the system), else the common ones.
pub fn install_line(tool: Tool) -> String {
    let release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    install_line_for(tool, packages_of(&release))
}

fn install_line_for(tool: Tool, packages: Option<Packages>) -> String {
    let command = |packages: Packages| {
        let name = tool.package(packages);
        match packages {
            Packages::Apt => format!("sudo apt-get install {name}"),
            Packages::Dnf => format!("sudo dnf install {name}"),
            Packages::Pacman => format!("sudo pacman -S {name}"),
            Packages::Apk => format!("sudo apk add {name}"),
            Packages::Zypper => format!("sudo zypper install {name}"),
            Packages::Brew => format!("brew install {name}"),
        }
    };
    match packages {
        Some(packages) => command(packages),
        None => format!(
            "install it with your system's package manager ({}, {}, {})",
            command(Packages::Apt),
            command(Packages::Dnf),
            command(Packages::Pacman)
        ),
    }
}

/// The package manager of the system `/etc/os-release` (its text) names,
/// by its `ID` and `ID_LIKE`; Homebrew on macOS.
fn packages_of(os_release: &str) -> Option<Packages> {
    if cfg!(target_os = "macos") {
        return Some(Packages::Brew);
    }
    let mut ids = Vec::new();
    for line in os_release.lines() {
        if let Some(value) = line
            .strip_prefix("ID=")
            .or_else(|| line.strip_prefix("ID_LIKE="))
        {
            ids.extend(
                value
                    .trim_matches(['"', '\''])
                    .split_whitespace()
                    .map(str::to_string),
            );
        }
    }
    ids.iter().find_map(|id| match id.as_str() {
        "debian" | "ubuntu" => Some(Packages::Apt),
        "fedora" | "rhel" | "centos" => Some(Packages::Dnf),
        "arch" => Some(Packages::Pacman),
        "alpine" => Some(Packages::Apk),
        "suse" | "opensuse" => Some(Packages::Zypper),
        _ => None,
    })
}

/// Bubblewrap made quorum's sandbox here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxWorks {
    pub bwrap: PathBuf,
    /// `bubblewrap 0.8.0`, as it says it.
    pub version: String,
    /// Why the sandbox is weaker than it should be (no seccomp filter in
    /// force), if it is.
    pub weaker: Option<String>,
}

/// Why bubblewrap cannot make quorum's sandbox here.
#[derive(Debug, thiserror::Error)]
pub enum SandboxFault {
    #[error(
        "not installed (no bwrap on PATH): nothing quorum runs is sandboxed (agents' commands, worktree tasks' agents)"
    )]
    NotInstalled,
    #[error("the sandbox cannot be built: {0}")]
    Build(#[from] SandboxError),
    #[error("{bwrap} cannot be started: {error}", bwrap = bwrap.display())]
    Start {
        bwrap: PathBuf,
        error: std::io::Error,
    },
    #[error("bwrap did not finish within {} s", SANDBOX_WAIT.as_secs())]
    Timeout,
    /// bwrap ran and failed: what it said, and what that means.
    #[error("{version} cannot make quorum's sandbox here: {said}")]
    Refused {
        version: String,
        said: String,
        cause: Cause,
    },
}

/// What a bwrap that failed was refused, read from what it said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// New user namespaces (bwrap is not setuid: it makes one).
    UserNamespaces,
    /// The network namespace's loopback.
    Network,
    /// The seccomp filter.
    Seccomp,
    /// Mounting `/proc` (a container that masks it).
    Proc,
    Other,
}

impl Cause {
    /// The cause of what bwrap said on stderr.
    pub fn of(said: &str) -> Cause {
        let said = said.to_lowercase();
        if said.contains("seccomp") {
            Cause::Seccomp
        } else if said.contains("namespace")
            || said.contains("uid map")
            || said.contains("unshare")
            || said.contains("setting up uid")
        {
            Cause::UserNamespaces
        } else if said.contains("loopback") || said.contains("rtm_newaddr") {
            Cause::Network
        } else if said.contains("mount proc") || said.contains("on /newroot/proc") {
            Cause::Proc
        } else {
            Cause::Other
        }
    }
}

impl SandboxFault {
    /// What the person does about it.
    pub fn fix(&self) -> String {
        match self {
            SandboxFault::NotInstalled => install_line(Tool::Bubblewrap),
            SandboxFault::Build(_) | SandboxFault::Start { .. } | SandboxFault::Timeout => {
                "run `bwrap --ro-bind / / true` yourself to see what bubblewrap says".to_string()
            }
            SandboxFault::Refused { cause, .. } => match cause {
                Cause::UserNamespaces => user_namespaces_fix(&|name| {
                    std::fs::read_to_string(Path::new("/proc/sys").join(name)).ok()
                }),
                Cause::Network => "bubblewrap cannot set up a network namespace here (a container without the right to): run quorum outside it, or allow namespaces in the container (docker: --security-opt seccomp=unconfined)".to_string(),
                Cause::Seccomp => "the kernel refused quorum's seccomp filter: a kernel with CONFIG_SECCOMP_FILTER is needed (or a newer bubblewrap)".to_string(),
                Cause::Proc => "bubblewrap cannot mount /proc here (a container masks it): docker run --security-opt systempaths=unconfined, or run quorum outside the container".to_string(),
                Cause::Other => "run `bwrap --ro-bind / / --unshare-pid --unshare-net true` yourself to see what bubblewrap says".to_string(),
            },
        }
    }
}

/// How to allow unprivileged user namespaces, by the setting that forbids
/// them (`read` reads a file under `/proc/sys`): Ubuntu's AppArmor
/// restriction, Debian's older switch, or a limit of none.
pub fn user_namespaces_fix(read: &dyn Fn(&str) -> Option<String>) -> String {
    let is = |name: &str, value: &str| read(name).is_some_and(|v| v.trim() == value);
    let sysctl = |setting: &str| {
        format!(
            "sudo sysctl -w {setting} (and to keep it: echo '{setting}' | sudo tee /etc/sysctl.d/60-quorum-userns.conf)"
        )
    };
    if is("kernel/apparmor_restrict_unprivileged_userns", "1") {
        format!(
            "AppArmor keeps unprivileged programs from making user namespaces: {}; or give bwrap an AppArmor profile that allows `userns`",
            sysctl("kernel.apparmor_restrict_unprivileged_userns=0")
        )
    } else if is("kernel/unprivileged_userns_clone", "0") {
        format!(
            "unprivileged user namespaces are turned off: {}",
            sysctl("kernel.unprivileged_userns_clone=1")
        )
    } else if is("user/max_user_namespaces", "0") {
        format!(
            "user namespaces are limited to none: {}",
            sysctl("user.max_user_namespaces=28633")
        )
    } else {
        "user namespaces are refused here (a container without them?): allow them (docker: --security-opt seccomp=unconfined --security-opt apparmor=unconfined), or make bwrap setuid root (sudo chmod u+s $(command -v bwrap))".to_string()
    }
}

/// Whether bubblewrap makes quorum's sandbox in `root` (the session
/// directory): the command [`sandbox::command`] builds for an agent's
/// command (its mounts, its own process ids and network, the seccomp
/// filter) run once, owned by `supervisor`, reading its own
/// `/proc/self/status` to see the filter in force.
pub async fn sandbox(root: &Path, supervisor: &Supervisor) -> Result<SandboxWorks, SandboxFault> {
    let bwrap = super::path::locate("bwrap").ok_or(SandboxFault::NotInstalled)?;
    let version = bwrap_version(&bwrap).await;
    let policy = Policy {
        mode: Some(Sandbox::Bwrap),
        setting: "terminal_sandbox",
        ..Policy::default()
    };
    let confined = sandbox::command(
        "cat",
        ["/proc/self/status"],
        (root, root),
        &policy,
        Env::Command(&[]),
    )?;
    let out = output(
        supervisor,
        confined.cmd,
        "quorum doctor: bwrap",
        SANDBOX_WAIT,
    )
    .await
    .map_err(|error| match error.kind() {
        std::io::ErrorKind::TimedOut => SandboxFault::Timeout,
        _ => SandboxFault::Start {
            bwrap: bwrap.clone(),
            error,
        },
    })?;
    if !out.status.success() {
        let said = said(&out.stderr, out.status);
        return Err(SandboxFault::Refused {
            version,
            cause: Cause::of(&said),
            said,
        });
    }
    let status = String::from_utf8_lossy(&out.stdout);
    let weaker = confined.weaker.or_else(|| {
        (!seccomp_filtered(&status))
            .then(|| "the seccomp filter is not in force inside it (Seccomp is not 2 in /proc/self/status)".to_string())
    });
    Ok(SandboxWorks {
        bwrap,
        version,
        weaker,
    })
}

/// `cmd` run to its end, its stdin closed and its output collected, owned
/// by `supervisor` (as `label`) for at most `wait`: past it, an error of
/// kind `TimedOut`, and the process is killed, its group ended.
pub async fn output(
    supervisor: &Supervisor,
    mut cmd: tokio::process::Command,
    label: &str,
    wait: Duration,
) -> std::io::Result<std::process::Output> {
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let (child, group) = supervisor.spawn(cmd, label)?;
    match tokio::time::timeout(wait, child.wait_with_output()).await {
        Ok(out) => out,
        Err(_) => {
            // The child was dropped with the wait: killed (`kill_on_drop`);
            // what it started goes with its group.
            supervisor.terminate(&group, super::supervisor::GRACE).await;
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("{label}: no end within {} s", wait.as_secs()),
            ))
        }
    }
}

/// `bubblewrap 0.8.0`, as `bwrap --version` says it (`bubblewrap` when it
/// says nothing).
async fn bwrap_version(bwrap: &Path) -> String {
    let mut cmd = tokio::process::Command::new(bwrap);
    cmd.arg("--version")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(SANDBOX_WAIT, cmd.output()).await;
    let said = match out {
        Ok(Ok(out)) if out.status.success() => String::from_utf8_lossy(&out.stdout).into_owned(),
        _ => String::new(),
    };
    let said = crate::confine::sanitize::one_line(said.trim());
    if said.is_empty() {
        "bubblewrap".to_string()
    } else {
        said
    }
}

/// Whether a `/proc/self/status` says a seccomp filter is in force
/// (`Seccomp: 2`).
fn seccomp_filtered(status: &str) -> bool {
    status.lines().any(|l| {
        l.strip_prefix("Seccomp:")
            .is_some_and(|mode| mode.trim() == "2")
    })
}

/// The last lines of what bwrap said on stderr, clean, or its exit status
/// when it said nothing.
fn said(stderr: &[u8], status: std::process::ExitStatus) -> String {
    let text = String::from_utf8_lossy(stderr);
    let clean = crate::confine::sanitize::sanitize(&text);
    let lines: Vec<&str> = clean
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" / ");
    if tail.is_empty() {
        format!("it {status}, saying nothing")
    } else {
        crate::confine::sanitize::clip(&tail, 600)
    }
}

/// quorum's state directory, as quorum would use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateDir {
    /// There, writable, private (no one else's access).
    Ready(PathBuf),
    /// Not there yet: quorum makes it, mode 0700, in `parent` (the nearest
    /// folder that is there), which it can write.
    ToMake { dir: PathBuf, parent: PathBuf },
    /// There and writable, but others have access to it (`mode`).
    Open { dir: PathBuf, mode: u32 },
    /// quorum cannot use it (`dir`: `None` when there is no home to put it
    /// in): why.
    Unusable { dir: Option<PathBuf>, why: String },
}

/// [`StateDir`] of quorum's state directory ([`super::state_dir`]).
/// Nothing is made.
pub fn state_dir() -> StateDir {
    match super::state_dir() {
        Some(dir) => state_dir_at(&dir),
        None => StateDir::Unusable {
            dir: None,
            why: "neither XDG_STATE_HOME nor HOME is set".to_string(),
        },
    }
}

/// [`StateDir`] of `dir`.
#[cfg(unix)]
pub fn state_dir_at(dir: &Path) -> StateDir {
    use nix::unistd::{AccessFlags, access};
    use std::os::unix::fs::PermissionsExt;
    let unusable = |why: String| StateDir::Unusable {
        dir: Some(dir.to_path_buf()),
        why,
    };
    let writable = |p: &Path| access(p, AccessFlags::W_OK | AccessFlags::X_OK);
    match std::fs::metadata(dir) {
        Ok(meta) if !meta.is_dir() => unusable("it is not a folder".to_string()),
        Ok(meta) => match writable(dir) {
            Err(e) => unusable(format!("it cannot be written: {}", e.desc())),
            Ok(()) if meta.permissions().mode() & 0o077 != 0 => StateDir::Open {
                dir: dir.to_path_buf(),
                mode: meta.permissions().mode() & 0o7777,
            },
            Ok(()) => StateDir::Ready(dir.to_path_buf()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let Some(parent) = dir.ancestors().skip(1).find(|p| p.exists()) else {
                return unusable("no folder above it exists".to_string());
            };
            match (parent.is_dir(), writable(parent)) {
                (true, Ok(())) => StateDir::ToMake {
                    dir: dir.to_path_buf(),
                    parent: parent.to_path_buf(),
                },
                (false, _) => unusable(format!("{} is not a folder", parent.display())),
                (true, Err(e)) => unusable(format!(
                    "it cannot be made: {} cannot be written ({})",
                    parent.display(),
                    e.desc()
                )),
            }
        }
        Err(e) => unusable(format!("it cannot be read: {e}")),
    }
}

#[cfg(not(unix))]
pub fn state_dir_at(dir: &Path) -> StateDir {
    if dir.is_dir() {
        StateDir::Ready(dir.to_path_buf())
    } else {
        StateDir::ToMake {
            dir: dir.to_path_buf(),
            parent: dir.parent().unwrap_or(dir).to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_bwrap_said_is_read_for_its_cause() {
        for (said, cause) in [
            (
                "bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.",
                Cause::UserNamespaces,
            ),
            (
                "bwrap: setting up uid map: Permission denied",
                Cause::UserNamespaces,
            ),
            (
                "bwrap: Creating new namespace failed: Operation not permitted",
                Cause::UserNamespaces,
            ),
            (
                "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted",
                Cause::Network,
            ),
            (
                "bwrap: prctl(PR_SET_SECCOMP): Invalid argument",
                Cause::Seccomp,
            ),
            (
                "bwrap: Can't mount proc on /newroot/proc: Operation not permitted",
                Cause::Proc,
            ),
            ("bwrap: execvp cat: No such file or directory", Cause::Other),
        ] {
            assert_eq!(Cause::of(said), cause, "{said}");
        }
    }

    /// Each setting that forbids user namespaces gets its own sysctl.
    #[test]
    fn the_fix_for_user_namespaces_names_the_setting_that_forbids_them() {
        let machine = |files: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                files
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let ubuntu = user_namespaces_fix(&machine(&[
            ("kernel/apparmor_restrict_unprivileged_userns", "1\n"),
            ("user/max_user_namespaces", "63000\n"),
        ]));
        assert!(
            ubuntu.contains("sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"),
            "{ubuntu}"
        );
        let debian = user_namespaces_fix(&machine(&[
            ("kernel/apparmor_restrict_unprivileged_userns", "0\n"),
            ("kernel/unprivileged_userns_clone", "0\n"),
        ]));
        assert!(
            debian.contains("sudo sysctl -w kernel.unprivileged_userns_clone=1"),
            "{debian}"
        );
        let none = user_namespaces_fix(&machine(&[("user/max_user_namespaces", "0")]));
        assert!(none.contains("user.max_user_namespaces="), "{none}");
        let container = user_namespaces_fix(&machine(&[]));
        assert!(container.contains("container"), "{container}");
    }

    #[test]
    fn the_install_line_is_the_systems_package_manager() {
        let debian = "PRETTY_NAME=\"Debian GNU/Linux 12\"\nID=debian\n";
        let ubuntu = "ID=ubuntu\nID_LIKE=debian\n";
        let rocky = "ID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\n";
        if cfg!(target_os = "macos") {
            return;
        }
        assert_eq!(packages_of(debian), Some(Packages::Apt));
        assert_eq!(packages_of(ubuntu), Some(Packages::Apt));
        assert_eq!(packages_of(rocky), Some(Packages::Dnf));
        assert_eq!(packages_of("ID=plan9\n"), None);
        assert_eq!(
            install_line_for(Tool::Bubblewrap, Some(Packages::Apt)),
            "sudo apt-get install bubblewrap"
        );
        assert_eq!(
            install_line_for(Tool::Ssh, Some(Packages::Dnf)),
            "sudo dnf install openssh-clients"
        );
        let any = install_line_for(Tool::Git, None);
        assert!(
            any.contains("apt-get install git") && any.contains("dnf install git"),
            "{any}"
        );
    }

    #[test]
    fn a_filter_in_force_is_seccomp_mode_2() {
        assert!(seccomp_filtered(
            "Name:\tcat\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t2\n"
        ));
        assert!(!seccomp_filtered("Name:\tcat\nSeccomp:\t0\n"));
        assert!(!seccomp_filtered(""));
    }

    #[cfg(unix)]
    #[test]
    fn the_state_directory_is_ready_to_make_open_or_unusable() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state/quorum");
        assert_eq!(
            state_dir_at(&dir),
            StateDir::ToMake {
                dir: dir.clone(),
                parent: tmp.path().to_path_buf()
            }
        );
        crate::confine::private::dir(&dir).unwrap();
        assert_eq!(state_dir_at(&dir), StateDir::Ready(dir.clone()));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            state_dir_at(&dir),
            StateDir::Open {
                dir: dir.clone(),
                mode: 0o755
            }
        );
        let file = tmp.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert!(matches!(
            state_dir_at(&file),
            StateDir::Unusable { why, .. } if why.contains("not a folder")
        ));
        // Root reads and writes everything: the rest is for others.
        if nix::unistd::geteuid().is_root() {
            return;
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o500)).unwrap();
        let read_only = state_dir_at(&dir);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(
            matches!(&read_only, StateDir::Unusable { why, .. } if why.contains("cannot be written")),
            "{read_only:?}"
        );
    }
}
