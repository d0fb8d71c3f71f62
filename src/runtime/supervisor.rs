//! Every process quorum starts, owned: each runs in a process group of its
//! own, recorded here, and the whole group ends with the call, the session,
//! or quorum itself.
//!
//! Three layers, from the polite to the last resort:
//!
//! 1. [`Supervisor::terminate`] (async, for cancel paths inside the
//!    runtime), [`Supervisor::terminate_blocking`], and
//!    [`Supervisor::shutdown_blocking`] / [`kill_all_blocking`] (for exit
//!    paths, before the runtime is dropped, and for a panic): `SIGTERM` to
//!    the whole group, a grace of at most [`GRACE`] that ends as soon as the
//!    group is empty, then `SIGKILL` to what is left.
//! 2. On Linux every child gets `PR_SET_PDEATHSIG` = `SIGTERM`: when quorum
//!    dies, even of `kill -9`, the direct child is told to stop. `SIGTERM`
//!    rather than `SIGKILL` because it is the same polite first step as
//!    layer 1 (an agent may flush its session files and stop helpers it
//!    started in other groups), and the watchdog below escalates to
//!    `SIGKILL` after the grace anyway.
//!
//!    The kernel sends the parent-death signal when the *thread* that forked
//!    the child exits, not the process. Tokio's blocking-pool threads exit
//!    after some idle seconds, and any caller could be on a short-lived
//!    thread; so every spawn happens on one dedicated spawner thread that
//!    lives as long as the process (the caller's runtime is entered there,
//!    so the child still belongs to it).
//! 3. The parent-death signal reaches only the direct child, not an agent's
//!    own children (a shell, `sleep 600`). So one watchdog per quorum
//!    process, a small `sh` script started on the first spawn, holds the
//!    read end of a pipe whose write end only quorum holds (close-on-exec,
//!    so agents do not inherit it). It learns each group as it is added
//!    (`+PGID`) and removed (`-PGID`); at end of file, however quorum ended,
//!    it sends `SIGTERM` to every group it still knows, waits up to the
//!    grace while any is left, sends `SIGKILL` and exits. It runs in its own
//!    process group and ignores `SIGINT`, `SIGHUP`, `SIGTERM` and `SIGQUIT`,
//!    so a Ctrl+C or a closed terminal does not take it down before quorum;
//!    it never outlives quorum by more than the grace. A script rather than
//!    a re-exec of quorum's own binary, because tests run this library
//!    inside the test binary, which cannot act as the watchdog.
//!
//! 4. What leaves its group *and* its parent (`setsid -f`, a double-forking
//!    daemon, a helper whose agent died first) is no descendant of any
//!    group's process any more. So commands made by [`command`] start under
//!    quorum's reaper (`super::reaper`), a subreaper that holds all of them,
//!    is the group's leader, ends every descendant it holds when told
//!    `SIGTERM` (by layers 1 to 3), and exits only once none is left.
//!
//! A group is forgotten (and never signalled again: its number may be
//! reused) once no live process is left in it. A group leader may be a
//! zombie that tokio has not reaped yet, so on Linux "empty" means no
//! process in `/proc` with that process group that is not a zombie;
//! elsewhere, `killpg(pgid, 0)` failing.

use super::lock;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock, Weak, mpsc};
use std::time::{Duration, Instant};

/// How long a group has, after `SIGTERM`, before it is sent `SIGKILL`.
pub const GRACE: Duration = Duration::from_secs(2);

/// How long a group has, after `SIGKILL`, to be seen empty before it is
/// left registered (for the next shutdown, or the watchdog, to try again).
const KILL_WAIT: Duration = Duration::from_millis(500);

/// Starts commands in process groups of their own and ends them.
/// Cheap to clone; one per session.
#[derive(Clone, Default)]
pub struct Supervisor {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    groups: Mutex<BTreeMap<i32, Arc<GroupState>>>,
}

struct GroupState {
    pgid: i32,
    label: String,
    owner: Weak<Inner>,
    /// Set once the group is empty; from then on it is never signalled.
    gone: Mutex<bool>,
}

/// One process group started by a [`Supervisor`]. Dropping it without
/// terminating it terminates the group on a thread of its own.
pub struct Group {
    state: Arc<GroupState>,
}

impl Group {
    /// The process group id (the id of the process spawned).
    pub fn pgid(&self) -> i32 {
        self.state.pgid
    }

    pub fn label(&self) -> &str {
        &self.state.label
    }

    /// True once no live process is left in the group.
    pub fn is_empty(&self) -> bool {
        self.state.settle()
    }
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("pgid", &self.state.pgid)
            .field("label", &self.state.label)
            .finish()
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if *lock(&self.state.gone) {
            return;
        }
        // A drop cannot wait for the grace: a thread of its own does. It
        // only signals, so its exit does not matter to anyone's parent-death
        // signal. The group stays registered until it is empty.
        let state = self.state.clone();
        let spawned = std::thread::Builder::new()
            .name("quorum-terminate".into())
            .spawn(move || end_blocking(&[state], GRACE));
        if spawned.is_err() {
            self.state.signal(sys::Sig::Kill);
        }
    }
}

impl GroupState {
    /// Sends `sig` to the group unless it is known to be gone.
    fn signal(&self, sig: sys::Sig) {
        let gone = lock(&self.gone);
        if !*gone {
            sys::signal_group(self.pgid, sig);
        }
    }

    /// True if the group is empty; the first time, it is forgotten.
    fn settle(self: &Arc<Self>) -> bool {
        {
            let mut gone = lock(&self.gone);
            if *gone {
                return true;
            }
            if sys::group_alive(self.pgid) {
                return false;
            }
            *gone = true;
        }
        tracing::debug!("process group {} ({}) is gone", self.pgid, self.label);
        forget(self);
        true
    }
}

/// A command for `program`, to be started by [`Supervisor::spawn`]: under
/// the reaper (see [`super::reaper`]) once quorum's binary has named it,
/// so that nothing the program starts can leave quorum's tree; else the
/// program itself. Arguments, environment and stdio are added as usual.
pub fn command(program: impl AsRef<std::ffi::OsStr>) -> tokio::process::Command {
    match super::reaper::program() {
        Some(reaper) => {
            let mut cmd = tokio::process::Command::new(reaper);
            cmd.arg(super::reaper::ARG).arg(program);
            cmd
        }
        None => tokio::process::Command::new(program),
    }
}

impl Supervisor {
    pub fn new() -> Self {
        Self::default()
    }

    /// Spawns `cmd` in a new session (and so a new process group, with no
    /// controlling terminal: nothing it runs can push keystrokes into the
    /// person's terminal with `TIOCSTI`, or read from it), records the
    /// group, and returns the child with the group's handle. Must be called inside a tokio
    /// runtime: the child belongs to it. The spawn itself happens on the
    /// spawner thread (see the module's notes on the parent-death signal).
    pub fn spawn(
        &self,
        mut cmd: tokio::process::Command,
        label: &str,
    ) -> std::io::Result<(tokio::process::Child, Group)> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| std::io::Error::other("a child process needs a tokio runtime"))?;
        cmd.kill_on_drop(true);
        watchdog_started();
        #[cfg(all(unix, not(target_os = "linux")))]
        cmd.process_group(0);
        #[cfg(target_os = "linux")]
        #[cfg(target_os = "linux")]
        let told = Told::new()?;
        #[cfg(target_os = "linux")]
        // SAFETY: see `in_a_session_of_its_own`.
        unsafe {
            cmd.pre_exec(in_a_session_of_its_own(&told));
        }
        let (reply, answer) = mpsc::sync_channel(1);
        spawner()
            .send(Request {
                cmd,
                runtime,
                owner: self.inner.clone(),
                label: label.to_string(),
                reply,
                #[cfg(target_os = "linux")]
                told,
            })
            .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
        answer
            .recv()
            .map_err(|_| std::io::Error::other("the spawner thread is gone"))?
    }

    /// Ends `group`: `SIGTERM`, up to `grace` while any of it is alive,
    /// then `SIGKILL`. For cancel paths inside the runtime.
    pub async fn terminate(&self, group: &Group, grace: Duration) {
        if group.state.settle() {
            return;
        }
        let state = group.state.clone();
        // The waiting is done on a blocking thread, as on the exit paths.
        let ended = tokio::task::spawn_blocking(move || end_blocking(&[state], grace));
        if ended.await.is_err() {
            group.state.signal(sys::Sig::Kill);
        }
    }

    /// [`Supervisor::terminate`] for exit paths: blocks the thread.
    pub fn terminate_blocking(&self, group: &Group, grace: Duration) {
        end_blocking(std::slice::from_ref(&group.state), grace);
    }

    /// Ends every group of this supervisor, all at once: `SIGTERM` to all,
    /// one shared grace ([`GRACE`]), `SIGKILL` to what is left. Blocks.
    pub fn shutdown_blocking(&self) {
        let groups: Vec<_> = lock(&self.inner.groups).values().cloned().collect();
        end_blocking(&groups, GRACE);
    }

    /// The live groups: process group id and label.
    pub fn groups(&self) -> Vec<(i32, String)> {
        lock(&self.inner.groups)
            .values()
            .map(|g| (g.pgid, g.label.clone()))
            .collect()
    }
}

/// What a child does between fork and exec (Linux): a session of its own
/// (its group is its id, as `process_group(0)` would make it, and it has
/// no controlling terminal), and the parent-death signal.
///
/// It also tells the watchdog its group itself (`+PGID` on the watchdog's
/// pipe, inherited until exec): a quorum killed between this child's exec
/// and the parent's registering it would otherwise leave the group
/// unknown to the watchdog, and what the child started running.
///
/// SAFETY (for the `pre_exec` given it): it only makes async-signal-safe
/// system calls (setsid, getpid, write, prctl, getppid), reads an atomic,
/// and builds its line and its error without allocating.
#[cfg(target_os = "linux")]
fn in_a_session_of_its_own(
    told: &Told,
) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
    let parent = std::process::id();
    let told = std::os::fd::AsRawFd::as_raw_fd(&told.write);
    move || {
        let pgid = nix::unistd::setsid()?;
        let fd = WATCHDOG_FD.load(std::sync::atomic::Ordering::SeqCst);
        if fd >= 0 {
            let mut line = [0u8; 24];
            let n = group_line(pgid.as_raw(), &mut line);
            let id = pgid.as_raw().to_ne_bytes();
            // SAFETY: writes of stack buffers to descriptors this process
            // inherited open: the watchdog's pipe (see `WATCHDOG_FD`), then
            // `Told`'s, so that a spawn that fails takes the line back.
            unsafe {
                nix::libc::write(fd, line.as_ptr().cast(), n);
                nix::libc::write(told, id.as_ptr().cast(), id.len());
            }
        }
        nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)?;
        // The parent may have died before prctl: then nobody would send
        // the signal. Checking closes that race.
        if nix::unistd::getppid().as_raw() as u32 != parent {
            return Err(std::io::Error::from_raw_os_error(nix::libc::ESRCH));
        }
        Ok(())
    }
}

/// What a child told the watchdog of itself (its group, on a pipe made
/// for its spawn), taken back when the spawn fails (`exec` did not
/// happen): the watchdog must never end a group whose number a process
/// that never ran had, and another may be given later.
#[cfg(target_os = "linux")]
struct Told {
    read: std::os::fd::OwnedFd,
    write: std::os::fd::OwnedFd,
}

#[cfg(target_os = "linux")]
impl Told {
    fn new() -> std::io::Result<Self> {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        Ok(Self { read, write })
    }

    /// After the spawn (`spawned`: whether it succeeded).
    fn settle(self, spawned: bool) {
        drop(self.write);
        if spawned {
            return;
        }
        let mut id = [0u8; 4];
        if std::io::Read::read_exact(&mut std::fs::File::from(self.read), &mut id).is_ok() {
            lock(&LIVE).tell(&format!("-{}\n", i32::from_ne_bytes(id)));
        }
    }
}

/// `+PGID\n` into `buf`, without allocating; its length.
#[cfg(target_os = "linux")]
fn group_line(pgid: i32, buf: &mut [u8; 24]) -> usize {
    let mut digits = [0u8; 12];
    let (mut n, mut v) = (0, pgid.unsigned_abs());
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf[0] = b'+';
    for i in 0..n {
        buf[1 + i] = digits[n - 1 - i];
    }
    buf[1 + n] = b'\n';
    n + 2
}

/// A short command of quorum's own, run to its end by the thread that
/// starts it, outside any runtime (git at home: a worktree made, work
/// committed, a branch merged or fetched), owned as the supervisor's
/// children are: a session of its own, the parent-death signal (the
/// thread waits for it, so the signal fires only when quorum ends), and
/// its group known, while it runs, to the watchdog and to the exit paths
/// ([`kill_all_blocking`]): whatever way quorum ends, the command and all
/// it started end too. It belongs to no session (a session that ends lets
/// it finish). Its stdin, stdout and stderr are as the caller set them.
pub fn spawn_owned(
    cmd: &mut std::process::Command,
    label: &str,
) -> std::io::Result<(std::process::Child, Group)> {
    static OWNER: OnceLock<Arc<Inner>> = OnceLock::new();
    watchdog_started();
    #[cfg(all(unix, not(target_os = "linux")))]
    std::os::unix::process::CommandExt::process_group(cmd, 0);
    #[cfg(target_os = "linux")]
    let told = Told::new()?;
    #[cfg(target_os = "linux")]
    // SAFETY: see `in_a_session_of_its_own`.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, in_a_session_of_its_own(&told));
    }
    let spawned = cmd.spawn();
    #[cfg(target_os = "linux")]
    told.settle(spawned.is_ok());
    let child = spawned?;
    let pgid = i32::try_from(child.id()).map_err(std::io::Error::other)?;
    Ok((
        child,
        register(OWNER.get_or_init(Arc::default), pgid, label),
    ))
}

/// [`spawn_owned`], waited for: its output (stdout and stderr
/// captured, as `Command::output` does).
pub fn output_owned(
    cmd: &mut std::process::Command,
    label: &str,
) -> std::io::Result<std::process::Output> {
    use std::process::Stdio;
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let (child, group) = spawn_owned(cmd, label)?;
    let out = child.wait_with_output();
    // Forgotten now if it is empty; else what it left is ended.
    group.is_empty();
    out
}

/// [`spawn_owned`], waited for: its exit status.
pub fn status_owned(
    cmd: &mut std::process::Command,
    label: &str,
) -> std::io::Result<std::process::ExitStatus> {
    let (mut child, group) = spawn_owned(cmd, label)?;
    let status = child.wait();
    group.is_empty();
    status
}

/// Ends every group any supervisor of this process started (see
/// [`Supervisor::shutdown_blocking`]), then whatever quorum adopted as a
/// subreaper (see [`super::reaper`]). For exit paths, panic hooks and
/// signal paths.
pub fn kill_all_blocking() {
    let (groups, watchdog) = {
        let live = lock(&LIVE);
        (
            live.groups.values().cloned().collect::<Vec<_>>(),
            live.watchdog_pid,
        )
    };
    end_blocking(&groups, GRACE);
    let spare = watchdog.into_iter().collect();
    super::reaper::end_adopted_blocking(&spare);
}

/// Chains a panic hook that, after the hooks before it (the message, the
/// terminal restored), ends every group of the process when the panic is
/// on the main thread: the thread quorum's commands run on, whose panic
/// ends quorum. A panic on another thread (a tokio task's, which tokio
/// catches) leaves a session that goes on, so its agents are left alone;
/// should quorum end anyway, the exit paths and the watchdog end them.
pub fn kill_all_on_panic() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        if std::thread::current().name() == Some("main") {
            kill_all_blocking();
        }
    }));
}

/// `SIGTERM` to every group, a shared grace, `SIGKILL` to the rest.
///
/// Some agents put helpers in process groups of their own (codex-acp's
/// login-shell snapshot, say): the groups of such descendants, found while
/// their parents still live, are ended alongside.
fn end_blocking(groups: &[Arc<GroupState>], grace: Duration) {
    let mut left: Vec<_> = groups.iter().filter(|g| !g.settle()).collect();
    if left.is_empty() {
        return;
    }
    let pgids: Vec<i32> = left.iter().map(|g| g.pgid).collect();
    let mut escaped = sys::escaped_groups(&pgids);
    for g in &left {
        tracing::debug!("terminating process group {} ({})", g.pgid, g.label);
        g.signal(sys::Sig::Term);
        g.signal(sys::Sig::Cont);
    }
    for &pgid in &escaped {
        tracing::debug!("terminating process group {pgid}, started by an agent");
        sys::signal_group(pgid, sys::Sig::Term);
        sys::signal_group(pgid, sys::Sig::Cont);
    }
    let deadline = Instant::now() + grace;
    let mut pause = Duration::from_millis(5);
    loop {
        left.retain(|g| !g.settle());
        escaped.retain(|&pgid| sys::group_alive(pgid));
        let now = Instant::now();
        if (left.is_empty() && escaped.is_empty()) || now >= deadline {
            break;
        }
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(50));
    }
    if left.is_empty() && escaped.is_empty() {
        return;
    }
    for g in &left {
        tracing::info!(
            "process group {} ({}) outlived the grace; killing it",
            g.pgid,
            g.label
        );
        g.signal(sys::Sig::Kill);
    }
    for &pgid in &escaped {
        sys::signal_group(pgid, sys::Sig::Kill);
    }
    let deadline = Instant::now() + KILL_WAIT;
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        left.retain(|g| !g.settle());
    }
}

// ---------------------------------------------------------------------------
// The registry of every live group in the process, and the watchdog
// ---------------------------------------------------------------------------

struct Live {
    groups: BTreeMap<i32, Arc<GroupState>>,
    /// The write end of the watchdog's stdin.
    watchdog: Option<std::process::ChildStdin>,
    watchdog_pid: Option<i32>,
    watchdog_tried: bool,
}

static LIVE: Mutex<Live> = Mutex::new(Live {
    groups: BTreeMap::new(),
    watchdog: None,
    watchdog_pid: None,
    watchdog_tried: false,
});

/// The watchdog's end of its pipe here, or -1: what a child writes its own
/// `+PGID` to between fork and exec (see `in_a_session_of_its_own`), so
/// that the watchdog knows its group even if quorum is killed before the
/// parent has registered it. Cleared before that end is closed.
static WATCHDOG_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// Starts the watchdog, the first time: before a child is forked, so that
/// the child can tell it its group.
fn watchdog_started() {
    lock(&LIVE).start_watchdog();
}

impl Live {
    /// Starts the watchdog unless that was tried already.
    fn start_watchdog(&mut self) {
        if self.watchdog_tried {
            return;
        }
        self.watchdog_tried = true;
        if let Some((stdin, pid)) = start_watchdog() {
            #[cfg(unix)]
            WATCHDOG_FD.store(
                std::os::fd::AsRawFd::as_raw_fd(&stdin),
                std::sync::atomic::Ordering::SeqCst,
            );
            self.watchdog = Some(stdin);
            self.watchdog_pid = Some(pid);
        }
    }

    /// Tells the watchdog a line; a watchdog that is gone is let go.
    fn tell(&mut self, line: &str) {
        if let Some(w) = &mut self.watchdog
            && let Err(e) = w.write_all(line.as_bytes())
        {
            tracing::warn!("the process watchdog is gone ({e}); groups are no longer watched");
            // Before its end of the pipe is closed: a child forked from
            // now on does not write to that descriptor (see `WATCHDOG_FD`).
            WATCHDOG_FD.store(-1, std::sync::atomic::Ordering::SeqCst);
            self.watchdog = None;
        }
    }
}

fn register(owner: &Arc<Inner>, pgid: i32, label: &str) -> Group {
    let state = Arc::new(GroupState {
        pgid,
        label: label.to_string(),
        owner: Arc::downgrade(owner),
        gone: Mutex::new(false),
    });
    lock(&owner.groups).insert(pgid, state.clone());
    {
        let mut live = lock(&LIVE);
        live.start_watchdog();
        live.groups.insert(pgid, state.clone());
        live.tell(&format!("+{pgid}\n"));
    }
    tracing::debug!("started process group {pgid} ({label})");
    Group { state }
}

fn forget(state: &Arc<GroupState>) {
    {
        let mut live = lock(&LIVE);
        if live
            .groups
            .get(&state.pgid)
            .is_some_and(|g| Arc::ptr_eq(g, state))
        {
            live.groups.remove(&state.pgid);
            live.tell(&format!("-{}\n", state.pgid));
        }
    }
    if let Some(owner) = state.owner.upgrade() {
        let mut groups = lock(&owner.groups);
        if groups
            .get(&state.pgid)
            .is_some_and(|g| Arc::ptr_eq(g, state))
        {
            groups.remove(&state.pgid);
        }
    }
}

/// The watchdog's script; `TICKS` tenths of a second is the grace.
const WATCHDOG: &str = r#"
trap '' INT HUP TERM QUIT
groups=
while IFS= read -r line; do
  g=${line#?}
  case $g in ''|*[!0-9]*|0|1) continue ;; esac
  case $line in
    +*) groups="$groups $g" ;;
    -*) left=; for x in $groups; do [ "$x" = "$g" ] || left="$left $x"; done; groups=$left ;;
  esac
done
[ -z "$groups" ] && exit 0
for g in $groups; do kill -TERM -"$g" 2>/dev/null; kill -CONT -"$g" 2>/dev/null; done
i=0
while [ "$i" -lt TICKS ]; do
  left=
  for g in $groups; do kill -0 -"$g" 2>/dev/null && left="$left $g"; done
  [ -z "$left" ] && exit 0
  groups=$left
  sleep 0.1 2>/dev/null || sleep 1
  i=$((i + 1))
done
for g in $groups; do kill -KILL -"$g" 2>/dev/null; done
"#;

/// Starts the watchdog (see the module's notes). Runs on the spawner
/// thread, without a parent-death signal: it must outlive quorum, briefly.
fn start_watchdog() -> Option<(std::process::ChildStdin, i32)> {
    let ticks = (GRACE.as_millis() / 100).max(1);
    let script = WATCHDOG.replace("TICKS", &ticks.to_string());
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(script)
        .current_dir("/")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    match cmd.spawn() {
        // std opens the pipe close-on-exec: children do not inherit our end.
        Ok(mut child) => {
            tracing::debug!("process watchdog {} started", child.id());
            Some((child.stdin.take()?, i32::try_from(child.id()).ok()?))
        }
        Err(e) => {
            tracing::warn!("cannot start the process watchdog: {e}");
            None
        }
    }
}

// ---------------------------------------------------------------------------
// The spawner thread
// ---------------------------------------------------------------------------

type Spawned = std::io::Result<(tokio::process::Child, Group)>;

struct Request {
    cmd: tokio::process::Command,
    runtime: tokio::runtime::Handle,
    owner: Arc<Inner>,
    label: String,
    reply: mpsc::SyncSender<Spawned>,
    #[cfg(target_os = "linux")]
    told: Told,
}

/// The one thread every child is forked from; it lives as long as the
/// process, so a parent-death signal fires only when quorum ends.
fn spawner() -> &'static mpsc::Sender<Request> {
    static SPAWNER: OnceLock<mpsc::Sender<Request>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("quorum-spawner".into())
            .spawn(move || {
                for mut req in rx {
                    let _runtime = req.runtime.enter();
                    let spawned = req.cmd.spawn();
                    #[cfg(target_os = "linux")]
                    req.told.settle(spawned.is_ok());
                    let spawned = spawned.and_then(|child| {
                        let pid = child.id().ok_or_else(|| {
                            std::io::Error::other("the child ended before it was seen")
                        })?;
                        let pgid = i32::try_from(pid).map_err(std::io::Error::other)?;
                        Ok((child, register(&req.owner, pgid, &req.label)))
                    });
                    let _ = req.reply.send(spawned);
                }
            })
            .expect("cannot start the spawner thread");
        tx
    })
}

// ---------------------------------------------------------------------------
// Signals and liveness
// ---------------------------------------------------------------------------

mod sys {
    #[derive(Clone, Copy, Debug)]
    pub enum Sig {
        Term,
        Cont,
        Kill,
    }

    /// Signals the process group `pgid`; never a pgid of 0 or 1 (which
    /// would mean our own group, or every process).
    #[cfg(unix)]
    pub fn signal_group(pgid: i32, sig: Sig) {
        use nix::sys::signal::Signal;
        if pgid <= 1 {
            return;
        }
        let sig = match sig {
            Sig::Term => Signal::SIGTERM,
            Sig::Cont => Signal::SIGCONT,
            Sig::Kill => Signal::SIGKILL,
        };
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), sig);
    }

    #[cfg(not(unix))]
    pub fn signal_group(_pgid: i32, _sig: Sig) {}

    /// Whether any process of group `pgid` is alive (not a zombie).
    #[cfg(unix)]
    pub fn group_alive(pgid: i32) -> bool {
        if pgid <= 1 {
            return false;
        }
        #[cfg(target_os = "linux")]
        if let Some(alive) = proc_group_alive(pgid) {
            return alive;
        }
        !matches!(
            nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), None),
            Err(nix::errno::Errno::ESRCH)
        )
    }

    #[cfg(not(unix))]
    pub fn group_alive(_pgid: i32) -> bool {
        false
    }

    /// The process groups, other than `pgids` and quorum's own, of the live
    /// descendants of the processes in `pgids`.
    #[cfg(target_os = "linux")]
    pub fn escaped_groups(pgids: &[i32]) -> Vec<i32> {
        use std::collections::{HashMap, HashSet};
        let own = nix::unistd::getpgrp().as_raw();
        // pid -> (ppid, pgrp), for every live process.
        let procs: HashMap<i32, (i32, i32)> = crate::runtime::reaper::table()
            .into_iter()
            .map(|(pid, p)| (pid, (p.ppid, p.pgrp)))
            .collect();
        let inside: HashSet<i32> = pgids.iter().copied().collect();
        let mut escaped = Vec::new();
        for (&pid, &(_, pgrp)) in &procs {
            if inside.contains(&pgrp) || pgrp == own || pgrp <= 1 || escaped.contains(&pgrp) {
                continue;
            }
            // Walk up: does an ancestor belong to one of the groups?
            let mut at = pid;
            for _ in 0..64 {
                let Some(&(ppid, ppgrp)) = procs.get(&at) else {
                    break;
                };
                if inside.contains(&ppgrp) && at != pid {
                    escaped.push(pgrp);
                    break;
                }
                at = ppid;
            }
        }
        escaped
    }

    #[cfg(not(target_os = "linux"))]
    pub fn escaped_groups(_pgids: &[i32]) -> Vec<i32> {
        Vec::new()
    }

    /// Scans `/proc` for a process of group `pgid` that is not a zombie;
    /// `None` if `/proc` cannot be read.
    #[cfg(target_os = "linux")]
    fn proc_group_alive(pgid: i32) -> Option<bool> {
        for entry in std::fs::read_dir("/proc").ok()?.flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            else {
                continue;
            };
            // Gone meanwhile: not alive.
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            if let Some((state, pgrp)) = parse_stat(&stat)
                && pgrp == pgid
                && state != "Z"
                && state != "X"
            {
                return Some(true);
            }
        }
        Some(false)
    }

    /// The state and process group of a `/proc/PID/stat` line:
    /// `pid (comm) state ppid pgrp ...`, where comm may hold anything.
    #[cfg(target_os = "linux")]
    pub fn parse_stat(stat: &str) -> Option<(&str, i32)> {
        crate::runtime::reaper::parse_stat(stat).map(|(state, _, pgrp)| (state, pgrp))
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_childs_line_to_the_watchdog_is_its_group() {
        let mut buf = [0u8; 24];
        for (pgid, line) in [
            (7, "+7\n"),
            (4_194_304, "+4194304\n"),
            (i32::MAX, "+2147483647\n"),
        ] {
            let n = group_line(pgid, &mut buf);
            assert_eq!(std::str::from_utf8(&buf[..n]).unwrap(), line);
        }
    }
    use std::os::unix::process::ExitStatusExt;
    use tokio::io::AsyncBufReadExt;

    /// A process by pid and start time (so a reused pid is not mistaken
    /// for it); alive while it exists and is not a zombie.
    struct Proc {
        pid: i32,
        start: String,
    }

    fn stat_fields(pid: i32) -> Option<Vec<String>> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (_, rest) = stat.rsplit_once(')')?;
        Some(rest.split_whitespace().map(str::to_string).collect())
    }

    impl Proc {
        fn new(pid: i32) -> Self {
            let start = stat_fields(pid).expect("the process exists")[19].clone();
            Proc { pid, start }
        }

        fn alive(&self) -> bool {
            stat_fields(self.pid).is_some_and(|f| f[19] == self.start && f[0] != "Z")
        }
    }

    impl Drop for Proc {
        fn drop(&mut self) {
            if self.alive() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(self.pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }

    fn sh(script: &str) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c")
            .arg(script)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped());
        cmd
    }

    /// Spawns `script`, which prints its background child's pid first.
    async fn spawn_with_child(
        sup: &Supervisor,
        script: &str,
    ) -> (tokio::process::Child, Group, Proc) {
        let (mut child, group) = sup.spawn(sh(script), "test").unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("the script prints its child's pid")
            .unwrap()
            .unwrap();
        let grandchild = Proc::new(line.trim().parse().unwrap());
        (child, group, grandchild)
    }

    #[tokio::test]
    async fn terminate_ends_the_group_with_its_grandchildren() {
        let sup = Supervisor::new();
        let (mut child, group, grandchild) =
            spawn_with_child(&sup, "sleep 600 & echo $!; wait").await;
        let leader = Proc::new(group.pgid());
        assert_eq!(sup.groups(), vec![(group.pgid(), "test".to_string())]);
        assert!(grandchild.alive() && leader.alive());
        sup.terminate(&group, GRACE).await;
        assert!(!grandchild.alive(), "the background sleep survived");
        assert!(group.is_empty());
        assert!(sup.groups().is_empty(), "an empty group is forgotten");
        let status = child.wait().await.unwrap();
        assert_eq!(status.signal(), Some(15), "{status}");
    }

    #[tokio::test]
    async fn a_group_that_ignores_sigterm_is_killed_after_the_grace() {
        let sup = Supervisor::new();
        let (mut child, group, grandchild) =
            spawn_with_child(&sup, "trap '' TERM; sleep 600 & echo $!; wait").await;
        sup.terminate(&group, Duration::from_millis(300)).await;
        assert!(!grandchild.alive(), "the sleep ignoring SIGTERM survived");
        let status = child.wait().await.unwrap();
        assert_eq!(status.signal(), Some(9), "{status}");
        assert!(sup.groups().is_empty());
    }

    #[tokio::test]
    async fn shutdown_blocking_ends_every_group_of_the_supervisor() {
        let sup = Supervisor::new();
        let other = Supervisor::new();
        let mut procs = Vec::new();
        let mut children = Vec::new();
        for script in [
            "sleep 600 & echo $!; wait",
            "sleep 600 & echo $!; wait",
            "trap '' TERM; sleep 600 & echo $!; wait",
        ] {
            let (child, group, grandchild) = spawn_with_child(&sup, script).await;
            procs.push((Proc::new(group.pgid()), grandchild));
            children.push((child, group));
        }
        let (_other_child, other_group, other_grandchild) =
            spawn_with_child(&other, "sleep 600 & echo $!; wait").await;
        assert_eq!(sup.groups().len(), 3);
        sup.shutdown_blocking();
        for (leader, grandchild) in &procs {
            assert!(!leader.alive() && !grandchild.alive());
        }
        assert!(sup.groups().is_empty());
        assert!(children.iter().all(|(_, g)| g.is_empty()));
        // Another supervisor's groups are not its business.
        assert!(other_grandchild.alive());
        other.terminate(&other_group, GRACE).await;
        assert!(!other_grandchild.alive());
    }

    /// Waits until `proc` has left `group` (setsid has run).
    async fn left_its_group(proc: &Proc, group: &Group) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while stat_fields(proc.pid).unwrap()[2] == group.pgid().to_string() {
            assert!(Instant::now() < deadline, "setsid never ran");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// A child that an agent put in a process group of its own (job
    /// control here; codex-acp's login-shell snapshot in the wild) is
    /// ended with the agent's group, on the exit path and on close.
    #[tokio::test]
    async fn descendants_in_groups_of_their_own_are_ended_too() {
        let sup = Supervisor::new();
        // setsid (util-linux, essential on Debian) puts the sleep in a
        // session and group of its own.
        let script = "setsid sleep 600 & echo $!; wait";
        let (_child, group, escaped) = spawn_with_child(&sup, script).await;
        assert!(escaped.alive());
        left_its_group(&escaped, &group).await;
        sup.shutdown_blocking();
        assert!(!escaped.alive(), "the escaped child outlived the shutdown");
        let (_child, group, escaped) = spawn_with_child(&sup, script).await;
        left_its_group(&escaped, &group).await;
        sup.terminate(&group, GRACE).await;
        assert!(!escaped.alive(), "the escaped child outlived terminate");
    }

    #[tokio::test]
    async fn dropping_a_group_terminates_it() {
        let sup = Supervisor::new();
        let (child, group, grandchild) = spawn_with_child(&sup, "sleep 600 & echo $!; wait").await;
        drop(child);
        drop(group);
        let deadline = Instant::now() + Duration::from_secs(10);
        while grandchild.alive() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!grandchild.alive());
    }

    /// A child spawned from a thread that then exits is not sent its
    /// parent-death signal: spawns happen on the long-lived spawner thread.
    #[tokio::test]
    async fn a_child_outlives_the_thread_that_asked_for_it() {
        let sup = Supervisor::new();
        let runtime = tokio::runtime::Handle::current();
        let spawned = {
            let sup = sup.clone();
            std::thread::spawn(move || {
                let _enter = runtime.enter();
                sup.spawn(sh("exec sleep 600"), "test").unwrap()
            })
            .join()
            .unwrap()
        };
        let (mut child, group) = spawned;
        let early = tokio::time::timeout(Duration::from_millis(500), child.wait()).await;
        assert!(
            early.is_err(),
            "the child died with the thread that asked for it: {early:?}"
        );
        sup.terminate(&group, GRACE).await;
        assert_eq!(child.wait().await.unwrap().signal(), Some(15));
    }

    #[test]
    fn stat_lines_with_odd_names_parse() {
        assert_eq!(
            sys::parse_stat("42 (a) b) c) S 1 4242 4242 0 -1"),
            Some(("S", 4242))
        );
        assert_eq!(sys::parse_stat("42 (x) Z 1 7 7"), Some(("Z", 7)));
        assert_eq!(sys::parse_stat("garbage"), None);
    }
}
