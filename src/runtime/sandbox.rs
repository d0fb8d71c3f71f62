//! Processes run for an agent, confined: under bubblewrap (when it is
//! installed and not turned off) the file system is read-only except the
//! session directory (and, for an agent process, its own state), with that
//! directory's `.git` and in-tree hooks read-only too (`super::git::
//! protected`), and, in the person's own tree, the files at its top that
//! other programs run (`super::machinery::readonly`); a private `/tmp`;
//! its own process ids; and its own network namespace unless the network
//! is allowed. It has no controlling terminal
//! to push keystrokes into: the supervisor starts every process in a new
//! session (not bubblewrap's `--new-session`, which would move the command
//! out of the process group the supervisor ends). Shared by the internal agent's
//! shell tool, the client terminals of ACP agents, and agent processes.
//!
//! The environment stays inside: what the agent asks for (a terminal's
//! `env`, an agent's configured `env`) is set by bubblewrap on the command
//! it starts, never on the processes that start it, which run with
//! quorum's own environment cleared of loader variables (`LD_PRELOAD`,
//! ...). A command's environment starts from a small known set; an agent
//! process's from quorum's. Both are handed to bubblewrap through a file
//! descriptor (`--args`), so no value shows in a process listing.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::supervisor;

/// How an agent's processes are confined (`terminal_sandbox` and
/// `sandbox` in its config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
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

/// Why a confined process could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("{0} = \"bwrap\", but bubblewrap (bwrap) is not installed")]
    NoBwrap(&'static str),
    #[error("cannot hand the sandbox its settings: {0}")]
    Io(#[from] std::io::Error),
}

/// What a confined process may do besides reading the file system.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// `None`: under bubblewrap when it is installed, else as it is.
    pub mode: Option<Sandbox>,
    /// Whether it reaches the network (else its own, empty namespace).
    pub network: bool,
    /// Paths it may write besides the session directory (an agent's own
    /// state: `~/.claude`, ...). Those that do not exist are skipped.
    pub writable: Vec<PathBuf>,
    /// Paths inside those it may not change (an agent's settings, which
    /// its own CLI runs later). Those that do not exist are skipped.
    pub readonly: Vec<PathBuf>,
    /// The setting that asked for bubblewrap, for the error when it is
    /// not installed (`terminal_sandbox`, `sandbox`).
    pub setting: &'static str,
}

/// The environment a confined process starts with.
#[derive(Debug, Clone, Copy)]
pub enum Env<'a> {
    /// A command's: [`KNOWN`] from quorum's environment, then these.
    Command(&'a [(String, String)]),
    /// An agent process's: quorum's environment (loader variables
    /// aside), then these.
    Agent(&'a BTreeMap<String, String>),
}

/// The variables a sandboxed command gets from quorum's environment.
pub const KNOWN: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LANGUAGE",
    "TZ",
    "COLORTERM",
];

/// Whether a variable changes how programs are loaded or linked: never
/// set on the processes that start a sandbox, whoever asked for it.
pub fn is_loader_var(name: &OsStr) -> bool {
    let name = name.as_encoded_bytes();
    name.starts_with(b"LD_")
        || name.starts_with(b"DYLD_")
        || matches!(name, b"GCONV_PATH" | b"LOCPATH" | b"HOSTALIASES")
}

/// A process ready for the supervisor, and whether it is sandboxed.
pub struct Confined {
    pub cmd: tokio::process::Command,
    pub sandboxed: bool,
}

/// `program args…` run in `cwd` (inside `root`), confined as `policy`
/// says, with the environment `env`.
pub fn command<I, S>(
    program: impl AsRef<OsStr>,
    args: I,
    (root, cwd): (&Path, &Path),
    policy: &Policy,
    env: Env<'_>,
) -> Result<Confined, SandboxError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let bwrap = match policy.mode {
        None => super::path::locate("bwrap"),
        Some(Sandbox::None) => None,
        Some(Sandbox::Bwrap) => {
            Some(super::path::locate("bwrap").ok_or(SandboxError::NoBwrap(policy.setting))?)
        }
    };
    let Some(bwrap) = bwrap else {
        // Not sandboxed: the command itself gets what it asked for.
        let mut cmd = supervisor::command(program.as_ref());
        cmd.args(args).current_dir(cwd);
        match env {
            Env::Command(vars) => cmd.envs(vars.iter().map(|(k, v)| (k, v))),
            Env::Agent(vars) => cmd.envs(vars),
        };
        return Ok(Confined {
            cmd,
            sandboxed: false,
        });
    };
    let agent = matches!(env, Env::Agent(_));
    let settings = environment(env);
    let fd = args_fd(&settings)?;
    let mut cmd = supervisor::command(&bwrap);
    clean_loader_vars(&mut cmd);
    cmd.args(["--args", &ARGS_FD.to_string()]);
    cmd.args(mounts(program.as_ref(), root, cwd, policy));
    // A command dies with bubblewrap. An agent does not: ended, its
    // process group gets SIGTERM and a grace to save its session (claude
    // writes its transcript then), where bubblewrap's death would SIGKILL
    // it at once. Its group is quorum's all the same (the reaper's, and
    // SIGKILL after the grace), so nothing of it outlives quorum.
    if !agent {
        cmd.arg("--die-with-parent");
    }
    cmd.arg("--").arg(program.as_ref()).args(args);
    cmd.current_dir(cwd);
    pass_fd(&mut cmd, fd);
    Ok(Confined {
        cmd,
        sandboxed: true,
    })
}

/// The descriptor bubblewrap reads its environment settings from.
const ARGS_FD: i32 = 3;

/// The loader variables of quorum's own environment, removed from `cmd`'s.
fn clean_loader_vars(cmd: &mut tokio::process::Command) {
    for (name, _) in std::env::vars_os() {
        if is_loader_var(&name) {
            cmd.env_remove(name);
        }
    }
}

/// `--clearenv` and a `--setenv` for each variable the process starts
/// with: [`KNOWN`] (a command) or all of quorum's but the loader ones (an
/// agent), then what was asked for.
fn environment(env: Env<'_>) -> Vec<OsString> {
    let mut vars: BTreeMap<OsString, OsString> = BTreeMap::new();
    for (name, value) in std::env::vars_os() {
        let keep = match env {
            Env::Command(_) => {
                KNOWN.iter().any(|k| name == *k) || name.as_encoded_bytes().starts_with(b"LC_")
            }
            Env::Agent(_) => !is_loader_var(&name),
        };
        if keep {
            vars.insert(name, value);
        }
    }
    match env {
        Env::Command(asked) => {
            for (k, v) in asked {
                vars.insert(k.into(), v.into());
            }
        }
        Env::Agent(asked) => {
            for (k, v) in asked {
                vars.insert(k.into(), v.into());
            }
        }
    }
    let mut out = vec![OsString::from("--clearenv")];
    for (name, value) in vars {
        out.push("--setenv".into());
        out.push(name);
        out.push(value);
    }
    out
}

/// The mounts and namespaces: `/` read-only, a new `/dev`, `/proc` and
/// `/tmp`; what the private `/tmp` would hide that the process needs to
/// find its programs, read-only; `root` and `policy.writable` writable;
/// `policy.readonly`, what git would run in `root` and what other programs run at its top
/// (`super::machinery::readonly`) read-only again; the working directory;
/// new process ids and session, no network unless allowed.
fn mounts(program: &OsStr, root: &Path, cwd: &Path, policy: &Policy) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::new();
    let mut push = |parts: &[&OsStr]| out.extend(parts.iter().map(|p| p.to_os_string()));
    push(&[
        "--ro-bind".as_ref(),
        "/".as_ref(),
        "/".as_ref(),
        "--dev".as_ref(),
        "/dev".as_ref(),
        "--proc".as_ref(),
        "/proc".as_ref(),
        "--tmpfs".as_ref(),
        "/tmp".as_ref(),
    ]);
    for dir in hidden_by_tmp(std::env::var_os("PATH").as_deref(), program, root) {
        push(&["--ro-bind".as_ref(), dir.as_os_str(), dir.as_os_str()]);
    }
    push(&["--bind".as_ref(), root.as_os_str(), root.as_os_str()]);
    for path in &policy.writable {
        push(&["--bind-try".as_ref(), path.as_os_str(), path.as_os_str()]);
    }
    for path in &policy.readonly {
        push(&["--ro-bind-try".as_ref(), path.as_os_str(), path.as_os_str()]);
    }
    for path in super::git::protected(root) {
        push(&["--ro-bind".as_ref(), path.as_os_str(), path.as_os_str()]);
    }
    for path in super::machinery::readonly(root, &policy.writable) {
        push(&["--ro-bind-try".as_ref(), path.as_os_str(), path.as_os_str()]);
    }
    push(&["--chdir".as_ref(), cwd.as_os_str()]);
    push(&["--unshare-pid".as_ref()]);
    if !policy.network {
        push(&["--unshare-net".as_ref()]);
    }
    out
}

/// What the sandbox's private `/tmp` would hide that a process needs to
/// find its programs: each directory on `path` (a `PATH` value) under
/// `/tmp`, and where `program` really is, as the top folder of `/tmp` they
/// lie in (`/tmp/clone` for `/tmp/clone/.tools/bin/x` and the package
/// its link leads into), bound read-only. Those inside `root` come with it.
fn hidden_by_tmp(path: Option<&OsStr>, program: &OsStr, root: &Path) -> Vec<PathBuf> {
    let mut wanted: Vec<PathBuf> = path
        .map(std::env::split_paths)
        .into_iter()
        .flatten()
        .filter(|d| d.is_absolute() && d.is_dir())
        .flat_map(|d| {
            let real = d.canonicalize().ok();
            std::iter::once(d).chain(real)
        })
        .collect();
    let program = Path::new(program);
    let found = if program.is_absolute() {
        Some(program.to_path_buf())
    } else {
        super::path::locate(&program.to_string_lossy())
    };
    if let Some(found) = found {
        wanted.extend(found.canonicalize().ok());
        wanted.push(found);
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for p in wanted {
        let Ok(rest) = p.strip_prefix("/tmp") else {
            continue;
        };
        if p.starts_with(root) {
            continue;
        }
        let Some(first) = rest.components().next() else {
            continue;
        };
        let top = Path::new("/tmp").join(first);
        if !root.starts_with(&top) && top.starts_with(root) {
            continue;
        }
        if top.is_dir() && !dirs.contains(&top) {
            dirs.push(top);
        }
    }
    dirs
}

/// A memory file holding bubblewrap's `--args`: NUL-separated.
fn args_fd(args: &[OsString]) -> std::io::Result<OwnedFd> {
    use std::io::{Seek, Write};
    let fd = nix::sys::memfd::memfd_create(
        c"quorum-sandbox-args",
        nix::sys::memfd::MFdFlags::MFD_CLOEXEC,
    )
    .map_err(std::io::Error::from)?;
    let mut file = std::fs::File::from(fd);
    for arg in args {
        file.write_all(arg.as_encoded_bytes())?;
        file.write_all(&[0])?;
    }
    file.rewind()?;
    Ok(OwnedFd::from(file))
}

/// Hands `fd` to the process as [`ARGS_FD`] (and only to it).
fn pass_fd(cmd: &mut tokio::process::Command, fd: OwnedFd) {
    // SAFETY: the closure runs in the child between fork and exec and
    // makes only dup2 and fcntl calls, which are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let raw = fd.as_raw_fd();
            if raw == ARGS_FD {
                // Already there: only its close-on-exec flag goes.
                if nix::libc::fcntl(raw, nix::libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if nix::libc::dup2(raw, ARGS_FD) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The line quorum adds to the output of a command that failed, ran
/// without the network, and said something of the network: it ran in a
/// namespace of its own, and how the person lets it out.
pub fn no_network_note(output: &str, setting: &str) -> Option<String> {
    const SIGNS: &[&str] = &[
        "network is unreachable",
        "could not resolve",
        "temporary failure in name resolution",
        "name or service not known",
        "name resolution",
        "getaddrinfo",
        "connection refused",
        "failed to connect",
        "could not connect",
        "couldn't connect",
        "no route to host",
        "enetunreach",
        "econnrefused",
        "eai_again",
    ];
    let lower = output.to_lowercase();
    SIGNS.iter().any(|s| lower.contains(s)).then(|| {
        format!(
            "[quorum: this command ran without network access (sandboxed, in a network namespace of its own); {setting} in the config lets commands reach the network]"
        )
    })
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

    fn policy(mode: Option<Sandbox>) -> Policy {
        Policy {
            mode,
            setting: "terminal_sandbox",
            ..Policy::default()
        }
    }

    #[test]
    fn none_runs_the_command_as_it_is_in_its_directory() {
        let vars = [("X".to_string(), "1".to_string())];
        let c = command(
            "sh",
            ["-c", "pwd"],
            (Path::new("/w"), Path::new("/w/sub")),
            &policy(Some(Sandbox::None)),
            Env::Command(&vars),
        )
        .unwrap();
        assert!(!c.sandboxed);
        assert!(argv(&c.cmd).ends_with(&["sh".into(), "-c".into(), "pwd".into()]));
        assert_eq!(c.cmd.as_std().get_current_dir(), Some(Path::new("/w/sub")));
        assert!(
            c.cmd
                .as_std()
                .get_envs()
                .any(|(k, v)| k == "X" && v == Some(OsStr::new("1")))
        );
    }

    /// A program on a `PATH` directory under `/tmp` is found inside the
    /// sandbox too (its private `/tmp` would hide it): the top folder it
    /// lies in is bound read-only; one inside the session directory comes
    /// with it.
    #[test]
    fn path_directories_under_tmp_are_kept_visible() {
        let tmp = tempfile::tempdir_in("/tmp").unwrap();
        let other = tempfile::tempdir_in("/tmp").unwrap();
        let bin = other.path().join("bin");
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
        assert_eq!(
            hidden_by_tmp(
                Some(&path),
                OsStr::new("/usr/bin/sh"),
                &tmp.path().join("w")
            ),
            vec![other.path().to_path_buf()]
        );
    }

    #[test]
    fn loader_variables_are_named() {
        for (name, loader) in [
            ("LD_PRELOAD", true),
            ("LD_LIBRARY_PATH", true),
            ("LD_AUDIT", true),
            ("DYLD_INSERT_LIBRARIES", true),
            ("GCONV_PATH", true),
            ("PATH", false),
            ("HOME", false),
            ("OLD_PRELOAD", false),
        ] {
            assert_eq!(is_loader_var(OsStr::new(name)), loader, "{name}");
        }
    }

    /// What a command asks for is set inside, after the known set; an
    /// agent keeps quorum's environment but its loader variables.
    #[test]
    fn the_environment_is_set_inside_from_a_known_set() {
        let asked = [("LD_PRELOAD".to_string(), "/w/pre.so".to_string())];
        let args = environment(Env::Command(&asked));
        assert_eq!(args[0], "--clearenv");
        let set: Vec<(&OsString, &OsString)> = args[1..]
            .chunks(3)
            .map(|c| {
                assert_eq!(c[0], "--setenv");
                (&c[1], &c[2])
            })
            .collect();
        assert!(
            set.iter()
                .any(|(k, v)| *k == "LD_PRELOAD" && *v == "/w/pre.so")
        );
        for (k, _) in &set {
            let k = k.to_string_lossy();
            assert!(
                KNOWN.contains(&k.as_ref()) || k.starts_with("LC_") || k == "LD_PRELOAD",
                "{k} is not in the known set"
            );
        }
    }

    #[test]
    fn bwrap_binds_only_the_session_directory_writable() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("w");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let r = root.display();
        match command(
            "ls",
            ["-l"],
            (&root, &root.join("sub")),
            &policy(Some(Sandbox::Bwrap)),
            Env::Command(&[]),
        ) {
            Ok(c) => {
                assert!(c.sandboxed);
                let argv = argv(&c.cmd).join(" ");
                assert!(
                    argv.contains(&format!(
                        "--args 3 --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --bind {r} {r} --ro-bind {r}/.git {r}/.git --chdir {r}/sub --unshare-pid --unshare-net --die-with-parent -- ls -l"
                    )),
                    "{argv}"
                );
            }
            Err(e) => panic!("the sandbox tests need bubblewrap (apt-get install bubblewrap): {e}"),
        }
    }

    #[test]
    fn network_failures_get_a_note_and_others_do_not() {
        assert!(
            no_network_note(
                "curl: (7) Failed to connect to 127.0.0.1 port 9: Connection refused",
                "terminal_network = true under [agents.x]"
            )
            .is_some_and(|n| n.contains("terminal_network = true under [agents.x]"))
        );
        assert!(no_network_note("cargo: error[E0308]: mismatched types", "x").is_none());
    }
}
