//! Every descendant is quorum's (Linux): the reaper, a small process of
//! quorum's own that each child starts under, and quorum as a subreaper.
//!
//! A process that leaves its process group and its parent (`setsid -f`, a
//! double-forking daemon, an agent's helper when the agent dies first) is
//! re-parented by the kernel to its nearest *child subreaper*
//! (`PR_SET_CHILD_SUBREAPER`), or to init. So:
//!
//! - quorum's binary, run as `quorum __quorum-reaper PROGRAM ARGS...`, is a
//!   subreaper that starts `PROGRAM` with its own stdio (it keeps none of
//!   it: the agent alone holds its pipes), reaps whatever is re-parented to
//!   it, and exits, with `PROGRAM`'s status, once no descendant is left.
//!   Told `SIGTERM` (the supervisor ending the group, or the parent-death
//!   signal when quorum dies, even of `kill -9`), it sends `SIGTERM` to
//!   every descendant it holds, waits up to [`GRACE`] while any is left,
//!   sends `SIGKILL` to the rest and exits. Its grace is shorter than the
//!   supervisor's, so it is done before the supervisor's `SIGKILL`.
//! - quorum itself is a subreaper too ([`become_subreaper`]), so what a
//!   reaper killed early leaves behind comes back to quorum, whose exit
//!   path ends it ([`end_adopted_blocking`]).
//!
//! The supervisor starts commands through the reaper only when it knows
//! the program ([`use_reaper`]; quorum's `main` tells it `/proc/self/exe`,
//! which still runs quorum's binary when the file was replaced). A library
//! inside a test binary has no reaper and starts commands directly.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The first argument that makes quorum's binary the reaper.
pub const ARG: &str = "__quorum-reaper";

/// After [`ARG`]: the program's stdin is `/dev/null`, and the reaper's
/// own stdin closing (read to its end) is a `SIGTERM`: it ends the program
/// and every descendant. For a step run over ssh on a host (see
/// `remote::ssh::Link::run`), whose stdin is a pipe from home: when the
/// connection ends, so does the step, where sshd would leave it running.
pub const UNTIL_EOF: &str = "--until-eof";

/// How long the reaper's descendants have, after `SIGTERM`, before
/// `SIGKILL`: within the supervisor's grace.
pub const GRACE: Duration = Duration::from_millis(1500);

static PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// From now on, the supervisor starts every command under `program
/// __quorum-reaper` (quorum's own binary).
pub fn use_reaper(program: PathBuf) {
    let _ = PROGRAM.set(program);
}

/// The reaper's program, once [`use_reaper`] has named it.
pub fn program() -> Option<&'static Path> {
    PROGRAM.get().map(PathBuf::as_path)
}

/// Makes this process a child subreaper (Linux; elsewhere nothing).
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        tracing::warn!("cannot become a child subreaper: {e}");
    }
}

/// For quorum's binary, first thing in `main`: runs the reaper and exits if
/// that is what this process was started as; else (Linux) makes quorum a
/// subreaper and starts every later child under the reaper.
pub fn start() {
    run_if_asked();
    #[cfg(target_os = "linux")]
    {
        become_subreaper();
        use_reaper(PathBuf::from("/proc/self/exe"));
    }
}

/// If this process was started as the reaper (`ARG` first), runs it and
/// exits with its status; otherwise returns at once. First thing in `main`.
pub fn run_if_asked() {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(std::ffi::OsStr::new(ARG)) {
        return;
    }
    let code = run(args.collect());
    std::process::exit(code);
}

#[cfg(target_os = "linux")]
fn run(args: Vec<OsString>) -> i32 {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    use std::os::unix::process::CommandExt;

    let (until_eof, args) = until_eof(&args);
    let Some((program, rest)) = args.split_first() else {
        eprintln!(
            "quorum reaper: no program to run (usage: quorum {ARG} [{UNTIL_EOF}] PROGRAM [ARGS...])"
        );
        return 2;
    };
    become_subreaper();
    let me = std::process::id();
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest);
    if until_eof {
        cmd.stdin(std::process::Stdio::null());
    }
    // SAFETY: between fork and exec the closure makes only async-signal-safe
    // system calls (prctl, getppid) and builds its error without allocating.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)?;
            if nix::unistd::getppid().as_raw() as u32 != me {
                return Err(std::io::Error::from_raw_os_error(nix::libc::ESRCH));
            }
            Ok(())
        });
    }
    // Blocked before the fork, so none is lost; std gives the child an
    // empty signal mask before it execs.
    let mut signals = SigSet::empty();
    for sig in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGCHLD,
    ] {
        signals.add(sig);
    }
    let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&signals), None);
    let child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!(
                "quorum reaper: cannot start {}: {e}",
                program.to_string_lossy()
            );
            return 127;
        }
    };
    let child = nix::unistd::Pid::from_raw(child.id() as i32);
    if until_eof {
        // Started after the mask was set, the thread blocks the same
        // signals: its `SIGTERM`, sent to the process, waits for the
        // `wait` below, as one from outside does.
        let stdin = std::io::stdin();
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut stdin.lock(), &mut std::io::sink());
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(me as i32), Signal::SIGTERM);
        });
    }
    drop_stdio(!until_eof);
    let mut status = None;
    loop {
        // Reap what has ended; none left at all: every descendant is gone.
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => break,
                Ok(WaitStatus::Exited(pid, code)) if pid == child => status = Some(code),
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => {
                    status = Some(128 + sig as i32)
                }
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => return status.unwrap_or(0),
            }
        }
        match signals.wait() {
            Ok(Signal::SIGCHLD) | Err(_) => {}
            Ok(_) => break,
        }
    }
    end_descendants_blocking(me as i32, GRACE, &HashSet::new());
    status.unwrap_or(128 + Signal::SIGTERM as i32)
}

/// Whether the arguments start with [`UNTIL_EOF`], and the rest.
fn until_eof(args: &[OsString]) -> (bool, &[OsString]) {
    match args.split_first() {
        Some((first, rest)) if first == UNTIL_EOF => (true, rest),
        _ => (false, args),
    }
}

#[cfg(not(target_os = "linux"))]
fn run(args: Vec<OsString>) -> i32 {
    // Elsewhere the reaper is never asked for; run the program as it is
    // (a host step's stdin is left to it: it runs to its end).
    let (_, args) = until_eof(&args);
    let Some((program, rest)) = args.split_first() else {
        return 2;
    };
    match std::process::Command::new(program).args(rest).status() {
        Ok(status) => status.code().unwrap_or(1),
        Err(_) => 127,
    }
}

/// Points stdout (and `stdin`, when asked) at `/dev/null`: the reaper
/// keeps no end of the agent's pipes (its closed stdin and its stdout's
/// end are the agent's). Stderr is kept for the reaper's own messages.
#[cfg(target_os = "linux")]
fn drop_stdio(stdin: bool) {
    use std::os::fd::AsRawFd;
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        // SAFETY: dup2 onto the standard descriptors of this process; no
        // Rust object owns fds 0 and 1 here.
        unsafe {
            if stdin {
                nix::libc::dup2(null.as_raw_fd(), 0);
            }
            nix::libc::dup2(null.as_raw_fd(), 1);
        }
    }
}

/// Ends every live descendant of `root` except those in `spare` (and
/// theirs): `SIGTERM` (and `SIGCONT`) once to each as it is seen, up to
/// `grace` while any is left, then `SIGKILL` to the rest. Reaps what this
/// process may reap. Blocks.
#[cfg(target_os = "linux")]
pub fn end_descendants_blocking(root: i32, grace: Duration, spare: &HashSet<i32>) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let mine = root == std::process::id() as i32;
    let deadline = Instant::now() + grace;
    let kill_by = deadline + Duration::from_millis(500);
    let mut told = HashSet::new();
    loop {
        if mine {
            reap_any();
        }
        let left = descendants(root, spare);
        if left.is_empty() {
            return;
        }
        let now = Instant::now();
        if now >= kill_by {
            tracing::warn!("processes {left:?} outlived SIGKILL");
            return;
        }
        for &pid in &left {
            let pid_ = Pid::from_raw(pid);
            if now >= deadline {
                let _ = kill(pid_, Signal::SIGKILL);
            } else if told.insert(pid) {
                let _ = kill(pid_, Signal::SIGTERM);
                let _ = kill(pid_, Signal::SIGCONT);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reaps every child of this process that has ended (zombies re-parented
/// here); for the reaper, whose every child is its own business.
#[cfg(target_os = "linux")]
fn reap_any() {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    while let Ok(status) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
        if status == WaitStatus::StillAlive {
            break;
        }
    }
}

/// Ends what quorum adopted as a subreaper: its live descendants other
/// than those in `spare` (its own children it knows of, such as the
/// process watchdog) and theirs. For exit paths. Blocks.
#[cfg(target_os = "linux")]
pub fn end_adopted_blocking(spare: &HashSet<i32>) {
    let me = std::process::id() as i32;
    let procs = table();
    let adopted: Vec<i32> = procs
        .iter()
        .filter(|(pid, p)| p.ppid == me && !spare.contains(pid))
        .map(|(&pid, _)| pid)
        .collect();
    if adopted.is_empty() {
        return;
    }
    tracing::debug!("ending adopted processes {adopted:?}");
    // Not `reap_any`: quorum's runtime waits for its own children.
    let mut spare = spare.clone();
    spare.extend(
        procs
            .iter()
            .filter(|(pid, p)| p.ppid == me && !adopted.contains(pid))
            .map(|(&pid, _)| pid),
    );
    end_descendants_blocking(me, GRACE, &spare);
}

#[cfg(not(target_os = "linux"))]
pub fn end_adopted_blocking(_spare: &HashSet<i32>) {}

/// One live process as `/proc` shows it.
#[derive(Clone, Copy, Debug)]
pub struct ProcInfo {
    pub ppid: i32,
    pub pgrp: i32,
}

/// Every live (not zombie) process: pid to parent and group.
#[cfg(target_os = "linux")]
pub fn table() -> HashMap<i32, ProcInfo> {
    let mut procs = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return procs;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some((state, ppid, pgrp)) = parse_stat(&stat)
            && state != "Z"
            && state != "X"
        {
            procs.insert(pid, ProcInfo { ppid, pgrp });
        }
    }
    procs
}

/// The live descendants of `root`, leaving out `spare` and their own.
#[cfg(target_os = "linux")]
pub fn descendants(root: i32, spare: &HashSet<i32>) -> Vec<i32> {
    let procs = table();
    let mut found = Vec::new();
    for &pid in procs.keys() {
        let mut at = pid;
        for _ in 0..256 {
            let Some(p) = procs.get(&at) else { break };
            if spare.contains(&at) {
                break;
            }
            if p.ppid == root {
                found.push(pid);
                break;
            }
            at = p.ppid;
        }
    }
    found
}

/// State, parent and group of a `/proc/PID/stat` line: `pid (comm) state
/// ppid pgrp ...`, where comm may hold anything.
pub fn parse_stat(stat: &str) -> Option<(&str, i32, i32)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, ppid, pgrp))
}
