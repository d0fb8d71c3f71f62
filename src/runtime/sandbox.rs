//! Processes run for an agent, confined: under bubblewrap (when it is
//! installed and not turned off) the file system is read-only except the
//! session directory (and, for an agent process, its own state, seen
//! through a private layer: `super::home`), with that directory's `.git`
//! and in-tree hooks read-only too (`super::git::protected`), and, in the
//! person's own tree, the files at its top that other programs run
//! (`super::machinery::readonly`); a private `/tmp`; the host's socket
//! folders (`/run`, `/var/run`, the runtime directory, quorum's own)
//! masked; a seccomp filter that refuses Unix sockets and the calls no
//! agent needs (`super::seccomp`); its own process ids; and its own
//! network namespace unless the network is allowed. What it binds comes
//! from quorum's own environment and configuration, never from a path an
//! agent names. It has no controlling terminal
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
    /// A program named by a path the sandbox does not show (its private
    /// `/tmp`, a masked socket folder).
    #[error("`{program}` cannot be run in the sandbox: {why}")]
    Hidden { program: String, why: String },
    #[error("cannot prepare the agent's private state in {store}: {source}")]
    Home {
        store: PathBuf,
        #[source]
        source: std::io::Error,
    },
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
    /// Unix sockets it may connect to (`unix_sockets`): bound in, and the
    /// filter then lets it open Unix sockets (which the masks and mounts
    /// still keep from the rest).
    pub unix_sockets: Vec<PathBuf>,
    /// Whether it may make user namespaces (`user_namespaces`: an agent
    /// whose own sandbox nests bubblewrap, as codex's does).
    pub user_namespaces: bool,
    /// An agent process's own state, seen through a private layer.
    pub home: Option<super::home::Home>,
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
    /// Said once where the process runs, when the sandbox is weaker than
    /// it should be (no seccomp filter on this machine).
    pub weaker: Option<String>,
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
            weaker: None,
        });
    };
    let agent = matches!(env, Env::Agent(_));
    let program = program.as_ref();
    if let Some(why) = hidden(program, root, cwd, agent.then_some(program)) {
        return Err(SandboxError::Hidden {
            program: program.to_string_lossy().into_owned(),
            why,
        });
    }
    let home = match &policy.home {
        Some(home) => home.prepare().map_err(|source| SandboxError::Home {
            store: home.store.clone(),
            source,
        })?,
        None => Vec::new(),
    };
    let mut settings = environment(env);
    let filter = super::seccomp::Filter {
        unix_sockets: !policy.unix_sockets.is_empty(),
        user_namespaces: policy.user_namespaces,
    };
    let mut fds = Vec::new();
    let weaker = match seccomp_fd(filter) {
        Ok(fd) => {
            settings.extend(["--seccomp".into(), SECCOMP_FD.to_string().into()]);
            fds.push((fd, SECCOMP_FD));
            None
        }
        Err(e) => {
            tracing::warn!("{e}");
            Some(e.to_string())
        }
    };
    fds.push((args_fd(&settings)?, ARGS_FD));
    let mut cmd = supervisor::command(&bwrap);
    clean_loader_vars(&mut cmd);
    cmd.args(["--args", &ARGS_FD.to_string()]);
    cmd.args(mounts(agent.then_some(program), root, cwd, policy, &home));
    // A command dies with bubblewrap. An agent does not: ended, its
    // process group gets SIGTERM and a grace to save its session (claude
    // writes its transcript then), where bubblewrap's death would SIGKILL
    // it at once. Its group is quorum's all the same (the reaper's, and
    // SIGKILL after the grace), so nothing of it outlives quorum.
    if !agent {
        cmd.arg("--die-with-parent");
    }
    cmd.arg("--").arg(program).args(args);
    cmd.current_dir(cwd);
    pass_fds(&mut cmd, fds);
    Ok(Confined {
        cmd,
        sandboxed: true,
        weaker,
    })
}

/// The descriptor bubblewrap reads its environment settings from.
const ARGS_FD: i32 = 3;
/// The descriptor bubblewrap reads the seccomp filter from.
const SECCOMP_FD: i32 = 4;

/// The seccomp filter in a memory file, each kind compiled once per
/// process.
fn seccomp_fd(filter: super::seccomp::Filter) -> Result<OwnedFd, String> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    type Compiled = Result<Vec<u8>, super::seccomp::Unavailable>;
    static COMPILED: OnceLock<Mutex<HashMap<super::seccomp::Filter, Compiled>>> = OnceLock::new();
    let program = super::lock(COMPILED.get_or_init(Default::default))
        .entry(filter)
        .or_insert_with(|| super::seccomp::program(filter))
        .clone()
        .map_err(|e| e.to_string())?;
    memory_file(c"quorum-seccomp", &program).map_err(|e| {
        super::seccomp::Unavailable(format!("cannot hand it to bubblewrap: {e}")).to_string()
    })
}

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
/// `/tmp`; the host's socket folders masked ([`masked`]); what those would
/// hide that the process needs (its programs on quorum's `PATH`, an
/// agent's configured `program`, the files of `/etc` that lead there),
/// read-only; `root` writable; an agent's private state (`home`: each
/// bind from its layer, then its shared credentials) and `policy.writable`
/// writable; `policy.readonly`, what git would run in `root` and what other
/// programs run at its top (`super::machinery::readonly`) read-only again;
/// the Unix sockets it was given; the working directory; new process ids,
/// no network unless allowed.
fn mounts(
    program: Option<&OsStr>,
    root: &Path,
    cwd: &Path,
    policy: &Policy,
    home: &[super::home::Bind],
) -> Vec<OsString> {
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
    ]);
    let masks = masked();
    for dir in &masks {
        push(&["--tmpfs".as_ref(), dir.as_os_str()]);
    }
    let path = std::env::var_os("PATH");
    for dir in kept_visible(path.as_deref(), program, root, &masks) {
        push(&["--ro-bind".as_ref(), dir.as_os_str(), dir.as_os_str()]);
    }
    for target in etc_links_into(&masks) {
        push(&[
            "--ro-bind-try".as_ref(),
            target.as_os_str(),
            target.as_os_str(),
        ]);
    }
    push(&["--bind".as_ref(), root.as_os_str(), root.as_os_str()]);
    for bind in home {
        push(&[
            "--bind".as_ref(),
            bind.source.as_os_str(),
            bind.dest.as_os_str(),
        ]);
    }
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
    for socket in &policy.unix_sockets {
        push(&[
            "--bind-try".as_ref(),
            socket.as_os_str(),
            socket.as_os_str(),
        ]);
    }
    push(&["--chdir".as_ref(), cwd.as_os_str()]);
    push(&["--unshare-pid".as_ref()]);
    if !policy.network {
        push(&["--unshare-net".as_ref()]);
    }
    out
}

/// The folders a sandbox sees empty: `/tmp` (private to it), and where
/// the host keeps sockets that answer whoever connects (`/run` with
/// systemd's user manager, D-Bus, ssh-agent, docker; `/var/run` where it
/// is a folder of its own; `$XDG_RUNTIME_DIR` elsewhere; quorum's own
/// socket folder under its state). Looked up once per process.
pub fn masked() -> Vec<PathBuf> {
    use std::sync::OnceLock;
    static MASKED: OnceLock<Vec<PathBuf>> = OnceLock::new();
    MASKED
        .get_or_init(|| {
            let mut out = vec![PathBuf::from("/tmp")];
            let real_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
            for dir in ["/run", "/var/run"] {
                if real_dir(Path::new(dir)) {
                    out.push(PathBuf::from(dir));
                }
            }
            let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
            let state_run = super::state_dir().map(|d| d.join("run"));
            for dir in runtime.into_iter().chain(state_run) {
                let inside = out.iter().any(|m| dir.starts_with(m));
                if dir.is_absolute() && !inside && real_dir(&dir) {
                    out.push(dir);
                }
            }
            out
        })
        .clone()
}

/// Why `program` would not be found inside the sandbox: a path (absolute,
/// or relative to `cwd`) that passes through a folder the sandbox masks,
/// outside the session directory and what the sandbox shows of it again
/// (`/tmp/x/../../usr/bin/tmux` passes through `/tmp/x`, which the
/// sandbox does not have). `None` when it is a bare name (found on the
/// sandbox's `PATH`) or visible all the way.
fn hidden(program: &OsStr, root: &Path, cwd: &Path, configured: Option<&OsStr>) -> Option<String> {
    use std::path::Component;
    if !program.as_encoded_bytes().contains(&b'/') {
        return None;
    }
    let masks = masked();
    let shown = kept_visible(
        std::env::var_os("PATH").as_deref(),
        configured,
        root,
        &masks,
    );
    let mut walked = PathBuf::new();
    for part in cwd.join(program).components() {
        match part {
            Component::ParentDir => {
                walked.pop();
                continue;
            }
            Component::CurDir => continue,
            other => walked.push(other),
        }
        if walked.starts_with(root) || shown.iter().any(|d| walked.starts_with(d)) {
            continue;
        }
        if let Some(mask) = masks
            .iter()
            .find(|m| walked.starts_with(m) && walked != **m)
        {
            return Some(format!(
                "it goes through {}, and {} is {} inside the sandbox",
                walked.display(),
                mask.display(),
                if mask == Path::new("/tmp") {
                    "private"
                } else {
                    "empty"
                }
            ));
        }
    }
    None
}

/// What the masks would hide that a process needs to find its programs,
/// bound read-only again: the folders of quorum's own `PATH` (`path`),
/// and, for an agent process, where its configured `program` really is.
/// Under `/tmp` the top folder they lie in is kept (`/tmp/clone` for
/// `/tmp/clone/.tools/bin/x`, whose link leads into the same clone);
/// under the socket folders only the folder itself. Those inside `root`
/// come with it. Never a path an agent named: a terminal's command is not
/// among them, and a name with `..` in it is never kept.
fn kept_visible(
    path: Option<&OsStr>,
    program: Option<&OsStr>,
    root: &Path,
    masks: &[PathBuf],
) -> Vec<PathBuf> {
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
    if let Some(program) = program {
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
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for p in wanted {
        if p.components().any(|c| c == std::path::Component::ParentDir) || p.starts_with(root) {
            continue;
        }
        let Some(mask) = masks.iter().find(|m| p.starts_with(m) && p != **m) else {
            continue;
        };
        let keep = if mask == Path::new("/tmp") {
            let Some(first) = p
                .strip_prefix(mask)
                .ok()
                .and_then(|r| r.components().next())
            else {
                continue;
            };
            let top = mask.join(first);
            if !root.starts_with(&top) && top.starts_with(root) {
                continue;
            }
            top
        } else if p.is_dir() {
            p
        } else {
            match p.parent() {
                Some(parent) if parent != mask => parent.to_path_buf(),
                _ => continue,
            }
        };
        if keep.is_dir() && !dirs.contains(&keep) {
            dirs.push(keep);
        }
    }
    dirs
}

/// The files `/etc` leads into the masked folders (`/etc/resolv.conf` into
/// `/run/systemd/resolve/`): shown again, read-only, so that name
/// resolution works. Looked up once per process.
fn etc_links_into(masks: &[PathBuf]) -> Vec<PathBuf> {
    use std::sync::OnceLock;
    static LINKS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    LINKS
        .get_or_init(|| {
            let Ok(entries) = std::fs::read_dir("/etc") else {
                return Vec::new();
            };
            let mut out = Vec::new();
            for entry in entries.flatten() {
                let path = entry.path();
                if !entry.file_type().is_ok_and(|t| t.is_symlink()) {
                    continue;
                }
                let Ok(target) = path.canonicalize() else {
                    continue;
                };
                if target.is_file()
                    && masks
                        .iter()
                        .any(|m| m != Path::new("/tmp") && target.starts_with(m))
                {
                    out.push(target);
                }
            }
            out.sort();
            out
        })
        .clone()
}

/// A memory file holding bubblewrap's `--args`: NUL-separated.
fn args_fd(args: &[OsString]) -> std::io::Result<OwnedFd> {
    let mut bytes = Vec::new();
    for arg in args {
        bytes.extend_from_slice(arg.as_encoded_bytes());
        bytes.push(0);
    }
    memory_file(c"quorum-sandbox-args", &bytes)
}

/// A memory file holding `bytes`, read from its start.
fn memory_file(name: &std::ffi::CStr, bytes: &[u8]) -> std::io::Result<OwnedFd> {
    use std::io::{Seek, Write};
    let fd = nix::sys::memfd::memfd_create(name, nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
        .map_err(std::io::Error::from)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    file.rewind()?;
    Ok(OwnedFd::from(file))
}

/// Hands each `(fd, number)` to the process as that number (and only to
/// it). The numbers are small and fixed ([`ARGS_FD`], [`SECCOMP_FD`]);
/// each descriptor is first moved above them, so that placing one never
/// overwrites another still to be placed.
fn pass_fds(cmd: &mut tokio::process::Command, fds: Vec<(OwnedFd, i32)>) {
    // SAFETY: the closure runs in the child between fork and exec and
    // makes only fcntl and dup2 calls, which are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let mut moved = Vec::with_capacity(fds.len());
            for (fd, number) in &fds {
                let high = nix::libc::fcntl(fd.as_raw_fd(), nix::libc::F_DUPFD_CLOEXEC, 16);
                if high == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                moved.push((high, *number));
            }
            for (high, number) in moved {
                // dup2 clears close-on-exec on the copy it makes.
                if nix::libc::dup2(high, number) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
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
        let masks = [PathBuf::from("/tmp"), PathBuf::from("/run")];
        assert_eq!(
            kept_visible(
                Some(&path),
                Some(OsStr::new("/usr/bin/sh")),
                &tmp.path().join("w"),
                &masks,
            ),
            vec![other.path().to_path_buf()]
        );
        // Under a socket folder (one of the test's, standing for `/run`),
        // only the folder on `PATH` itself, never the whole socket folder.
        let run = tempfile::tempdir_in("/var/tmp").unwrap();
        let bin = run.path().join("user/1000/fnm_multishells/1_2/bin");
        std::fs::create_dir_all(&bin).unwrap();
        let masks = [PathBuf::from("/tmp"), run.path().to_path_buf()];
        let path = std::env::join_paths([bin.clone(), run.path().to_path_buf()]).unwrap();
        assert_eq!(
            kept_visible(Some(&path), None, &tmp.path().join("w"), &masks),
            vec![bin]
        );
    }

    /// Nothing an agent names is bound: a terminal's command is not among
    /// what is kept visible, and one that goes through a masked folder
    /// (`/tmp/x/../../usr/bin/tmux`, `/tmp/../bin/sh`) is refused, naming
    /// the folder, before bubblewrap starts.
    #[test]
    fn a_command_through_a_masked_folder_is_refused_not_bound() {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let root = dir.path().canonicalize().unwrap();
        let socket_dir = tempfile::tempdir_in("/tmp").unwrap();
        let tmux = format!("{}/../../usr/bin/tmux", socket_dir.path().display());
        let why = hidden(OsStr::new(&tmux), &root, &root, None).unwrap();
        assert!(
            why.contains(&format!("it goes through {}", socket_dir.path().display()))
                && why.contains("/tmp is private inside the sandbox"),
            "{why}"
        );
        // `/tmp/..` is `/` as the kernel walks it: nothing of /tmp is
        // bound, and `/bin/sh` is where it is.
        assert_eq!(
            hidden(OsStr::new("/tmp/../bin/sh"), &root, &root, None),
            None
        );
        assert_eq!(hidden(OsStr::new("sh"), &root, &root, None), None);
        assert_eq!(hidden(OsStr::new("./x"), &root, &root, None), None);
        let c = command(
            &tmux,
            ["-S", "x"],
            (&root, &root),
            &policy(Some(Sandbox::Bwrap)),
            Env::Command(&[]),
        );
        match c {
            Err(SandboxError::Hidden { program, why }) => {
                assert_eq!(program, tmux);
                assert!(why.contains("private inside the sandbox"), "{why}");
            }
            Err(e) => panic!("{e}"),
            Ok(c) => panic!("not refused: {:?}", argv(&c.cmd)),
        }
        let c = command(
            "/tmp/../bin/sh",
            ["-c", "true"],
            (&root, &root),
            &policy(Some(Sandbox::Bwrap)),
            Env::Command(&[]),
        )
        .unwrap();
        let argv = argv(&c.cmd);
        let binds: Vec<&String> = argv
            .windows(2)
            .filter(|w| w[0].ends_with("bind") || w[0].ends_with("bind-try"))
            .map(|w| &w[1])
            .collect();
        assert!(
            binds
                .iter()
                .all(|b| !b.contains("..") && b.as_str() != "/tmp/.."),
            "{argv:?}"
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
                let masks: String = masked()
                    .iter()
                    .map(|m| format!("--tmpfs {} ", m.display()))
                    .collect();
                assert!(masks.starts_with("--tmpfs /tmp "), "{masks}");
                let shown: String = etc_links_into(&masked())
                    .iter()
                    .map(|t| format!("--ro-bind-try {} {} ", t.display(), t.display()))
                    .collect();
                let kept: String =
                    kept_visible(std::env::var_os("PATH").as_deref(), None, &root, &masked())
                        .iter()
                        .map(|t| format!("--ro-bind {} {} ", t.display(), t.display()))
                        .collect();
                assert!(
                    argv.contains(&format!(
                        "--args 3 --ro-bind / / --dev /dev --proc /proc {masks}{kept}{shown}--bind {r} {r} --ro-bind {r}/.git {r}/.git --chdir {r}/sub --unshare-pid --unshare-net --die-with-parent -- ls -l"
                    )),
                    "{argv}"
                );
                assert_eq!(c.weaker, None, "the seccomp filter is built here");
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
