//! Other machines, reached with the person's own OpenSSH: one connection
//! per host (a control master, `ssh -M`, owned by the supervisor like every
//! process quorum starts, so it ends with quorum; its socket in a private
//! directory of quorum's own), every other ssh a client of it. The
//! master's own session probes the host, once ([`connect`]): its state
//! directory made and resolved, its system and architecture, whether it
//! has git, and whether it has this very quorum, checked by its hash
//! (copied there, under the state directory's `bin/`, when it has not and
//! the system and architecture match: [`super::ship`]).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod connect;

pub use super::ship::use_binary;
use super::{RemoteError, Unreachable};
use crate::config::HostSpec;
use crate::confine::lock;
use crate::runtime::supervisor::{Group, Supervisor};

/// How long a host may take to answer before it is called unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// A host that is connected and probed.
pub struct Link {
    pub host: HostSpec,
    /// The control master's socket.
    socket: PathBuf,
    /// The state directory there, absolute.
    pub dir: String,
    /// quorum there (absolute).
    pub quorum: String,
    /// `git` there, if it has one.
    pub git: Option<String>,
    /// Owns every ssh run through the master: a session that ends ends them.
    supervisor: Supervisor,
    /// The hosts were closed (the session ended): an ssh still running
    /// through the master is ended, and none starts.
    closed: tokio::sync::watch::Receiver<bool>,
    /// The master's exit status, once it exited (the connection is gone).
    exited: tokio::sync::watch::Receiver<Option<std::process::ExitStatus>>,
    /// The master's own session's stdin: the probe there holds that
    /// session open until it closes (with this link).
    _hold: tokio::process::ChildStdin,
    _master: Group,
    _private: PrivateDir,
}

/// A host's connection: being made (once, shared), or made, or failed.
type Connecting = tokio::sync::OnceCell<Result<Arc<Link>, RemoteError>>;

/// The hosts of a session and their connections (made at first use).
pub struct Hosts {
    specs: BTreeMap<String, HostSpec>,
    supervisor: Supervisor,
    links: Mutex<HashMap<String, Arc<Connecting>>>,
    /// Closed with the session: no connection is made any more (a turn
    /// winding down must not start a master nothing would end), and one
    /// being made is given up, its master ended.
    closed: tokio::sync::watch::Sender<bool>,
}

impl Hosts {
    pub fn new(specs: BTreeMap<String, HostSpec>, supervisor: Supervisor) -> Self {
        Self {
            specs,
            supervisor,
            links: Mutex::default(),
            closed: tokio::sync::watch::Sender::new(false),
        }
    }

    /// The connection to host `name`, made (and the host probed) the first
    /// time; an error names the host and says what ssh said.
    pub async fn link(&self, name: &str) -> Result<Arc<Link>, RemoteError> {
        self.link_telling(name, None).await
    }

    /// [`Hosts::link`], what takes long in making it (the copy of quorum
    /// there) told to `tell` when this call makes the connection.
    pub async fn link_telling(
        &self,
        name: &str,
        tell: Option<super::Tell>,
    ) -> Result<Arc<Link>, RemoteError> {
        let closing = || RemoteError::Closing {
            host: name.to_string(),
        };
        if *self.closed.borrow() {
            return Err(closing());
        }
        if let Some(link) = self.live(name) {
            if link.alive() {
                return Ok(link);
            }
            // Its master is gone (the connection was lost): a new one.
            tracing::info!("host {name}: the connection was lost; connecting again");
            lock(&self.links).remove(name);
        }
        let spec = self
            .specs
            .get(name)
            .ok_or_else(|| RemoteError::NoHost {
                host: name.to_string(),
            })?
            .clone();
        let cell = lock(&self.links)
            .entry(name.to_string())
            .or_default()
            .clone();
        let mut closed = self.closed.subscribe();
        let link = cell
            .get_or_init(|| async {
                tokio::select! {
                    made = connect::connect(spec, &self.supervisor, self.closed.subscribe(), tell) => {
                        made.map(Arc::new)
                    }
                    // Closed while it connects: the master being made goes
                    // with the connection's future.
                    _ = closed.wait_for(|c| *c) => Err(closing()),
                }
            })
            .await
            .clone();
        if *self.closed.borrow() {
            // Closed while it connected: its master, made after the others
            // were ended, is ended too (with the last of it, dropped here).
            drop(link);
            drop(cell);
            return Err(closing());
        }
        if link.is_err() {
            // The next call tries again (the host may be back).
            lock(&self.links).remove(name);
        }
        link
    }

    /// Ends every host's connection (its master, asked to exit: it would
    /// take its time over a signal), and with it every session on it.
    pub fn close(&self) {
        self.closed.send_replace(true);
        let links: Vec<_> = lock(&self.links)
            .drain()
            .filter_map(|(_, cell)| cell.get().and_then(|l| l.as_ref().ok()).cloned())
            .collect();
        for link in links {
            link.exit();
        }
    }

    /// The live connection to `name`, if one was made and its master runs.
    pub fn live(&self, name: &str) -> Option<Arc<Link>> {
        let links = lock(&self.links);
        links.get(name)?.get()?.as_ref().ok().cloned()
    }
}

/// What every `ssh` but the master's is given (after `-S SOCKET`): it goes
/// through the master or fails. Without a master (gone with the session,
/// or lost) ssh would connect on its own, a connection nothing owns: a
/// git push still on its way as the session ends would reach the host
/// anyway. The proxy command is what ssh runs only to connect on its own,
/// so it is one that fails; given first, it wins over the person's own
/// (their `ProxyJump` is the master's).
const THROUGH_MASTER: [&str; 6] = [
    "-o",
    "ControlMaster=no",
    "-o",
    "BatchMode=yes",
    "-o",
    "ProxyCommand=false",
];

impl Link {
    /// The `ssh` arguments that reach the host through the master (the
    /// remote command follows).
    pub fn ssh_args(&self) -> Vec<String> {
        let mut args = vec!["-S".to_string(), self.socket.display().to_string()];
        args.extend(THROUGH_MASTER.map(str::to_string));
        args.push("-T".into());
        args.extend(self.host.ssh_args.iter().cloned());
        args.push("--".into());
        args.push(self.host.ssh.clone());
        args
    }

    /// `ssh` running `remote` (a shell command line) on the host.
    pub fn command(&self, remote: &str) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(ssh_program());
        cmd.args(self.ssh_args()).arg(remote);
        cmd.stdin(Stdio::null()).kill_on_drop(true);
        cmd
    }

    /// Starts `cmd` (one of [`Link::command`]'s) as a process the
    /// supervisor owns: a session that ends ends it. Once the master is
    /// gone (the session closed its hosts) it is not started: ssh would
    /// connect on its own.
    pub(super) fn spawn(
        &self,
        cmd: tokio::process::Command,
    ) -> std::io::Result<(tokio::process::Child, Group)> {
        if *self.closed.borrow() || !self.socket.exists() {
            return Err(closed_error());
        }
        self.supervisor.spawn(cmd, "ssh")
    }

    /// [`Link::spawn`], run to its end, its stderr (and stdout, when
    /// piped) collected; ended (an error) when the hosts are closed. A
    /// piped stdin is held open, unwritten, until then: its end is what
    /// ends a step there (see [`Link::run`]).
    async fn output(
        &self,
        mut cmd: tokio::process::Command,
    ) -> std::io::Result<std::process::Output> {
        cmd.stderr(Stdio::piped());
        let (mut child, _group) = self.spawn(cmd)?;
        let _held = child.stdin.take();
        self.until_closed(child.wait_with_output()).await?
    }

    /// `work`, or an error once the hosts are closed (what it held, its
    /// ssh among it, dropped and so ended).
    pub(super) async fn until_closed<T>(
        &self,
        work: impl std::future::Future<Output = T>,
    ) -> std::io::Result<T> {
        let mut closed = self.closed.clone();
        tokio::select! {
            done = work => Ok(done),
            _ = closed.wait_for(|c| *c) => Err(closed_error()),
        }
    }

    /// Runs `remote` there; its stdout, or an error naming the host, what
    /// was done (`what`) and what was said. It runs under quorum's reaper
    /// there, which ends it and all it started once its stdin, a pipe
    /// from here, closes: when this call is dropped, the session closes
    /// its hosts or the connection is lost. sshd itself would leave it
    /// running to its end.
    pub async fn run(&self, what: &'static str, remote: &str) -> Result<String, RemoteError> {
        use crate::runtime::reaper::{ARG, UNTIL_EOF};
        let step = format!(
            "exec {} {ARG} {UNTIL_EOF} sh -c {}",
            quote(&self.quorum),
            quote(remote)
        );
        let mut cmd = self.command(&step);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        let out = self.output(cmd).await.map_err(|e| RemoteError::Ssh {
            host: self.host.name.clone(),
            what,
            error: Arc::new(e),
        })?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        Err(RemoteError::Failed {
            host: self.host.name.clone(),
            what,
            status: out.status,
            said: said(&out.stderr),
        })
    }

    /// Writes `bytes` to a new private file `path` there (through ssh's
    /// stdin: nothing of it shows in a process listing, here or there).
    pub async fn write_private(&self, path: &str, bytes: &[u8]) -> Result<(), RemoteError> {
        use tokio::io::AsyncWriteExt;
        let p = quote(path);
        let remote =
            format!("umask 077 && mkdir -p \"$(dirname {p})\" && cat > {p}.$$ && mv -f {p}.$$ {p}");
        let mut cmd = self.command(&remote);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let fail = |why: String| RemoteError::Write {
            host: self.host.name.clone(),
            path: path.to_string(),
            why,
        };
        let (mut child, _group) = self.spawn(cmd).map_err(|e| fail(e.to_string()))?;
        let mut stdin = child.stdin.take().expect("piped");
        let written = async move {
            stdin.write_all(bytes).await?;
            drop(stdin);
            child.wait_with_output().await
        };
        let out = self
            .until_closed(written)
            .await
            .and_then(|out| out)
            .map_err(|e| fail(e.to_string()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(fail(said(&out.stderr)))
        }
    }

    /// The `ssh` command line git runs to reach the host through the master
    /// (`core.sshCommand`; git adds the destination and its command).
    pub fn git_ssh_command(&self) -> String {
        let mut words = vec![
            ssh_program().display().to_string(),
            "-S".into(),
            self.socket.display().to_string(),
        ];
        words.extend(THROUGH_MASTER.map(str::to_string));
        words.extend(self.host.ssh_args.iter().cloned());
        words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
    }

    /// Asks the master to exit (at once, ending every session on it).
    fn exit(&self) {
        let mut cmd = std::process::Command::new(ssh_program());
        cmd.arg("-S")
            .arg(&self.socket)
            .args(["-O", "exit"])
            .args(&self.host.ssh_args)
            .arg("--")
            .arg(&self.host.ssh)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let _ = crate::runtime::supervisor::status_owned(&mut cmd, "ssh -O exit");
    }

    /// Whether the master still runs (the connection is up): its process
    /// has not exited (no `ssh -O check`: a process of its own each call).
    pub fn alive(&self) -> bool {
        self.exited.borrow().is_none() && self.socket.exists()
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        if self.socket.exists() {
            self.exit();
        }
    }
}

/// What an ssh step says when the session closed its hosts under it.
fn closed_error() -> std::io::Error {
    std::io::Error::other("the connection to the host is closed")
}

/// `ssh` as found on `PATH`.
fn ssh_program() -> PathBuf {
    crate::runtime::path::locate_or_missing("ssh")
}

/// The last lines of what a program said on stderr, clean and short.
pub(super) fn said(stderr: &[u8]) -> String {
    let raw = String::from_utf8_lossy(stderr);
    let text = crate::confine::sanitize::sanitize(&raw);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let tail = lines[lines.len().saturating_sub(3)..].join(" / ");
    if tail.is_empty() {
        "nothing on stderr".to_string()
    } else {
        tail
    }
}

/// `word` quoted for a POSIX shell.
pub fn quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+%".contains(c))
    {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The shell expression of a directory given as `~/...`, absolute or
/// relative (to the home directory there).
pub(super) fn dir_expr(dir: Option<&str>) -> String {
    let dir = dir.unwrap_or("~/.local/state/quorum");
    match dir.strip_prefix("~/") {
        Some(rest) => format!("\"$HOME\"/{}", quote(rest)),
        None if dir == "~" => "\"$HOME\"".to_string(),
        None => quote(dir),
    }
}

/// A private directory of quorum's for control sockets, removed when
/// dropped.
struct PrivateDir(PathBuf);

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A new private directory for a control socket: under
/// `$XDG_RUNTIME_DIR/quorum`, else the temporary directory (socket paths
/// must be short). Made as the MCP endpoint's is
/// ([`crate::confine::private::new_dir`]): a random name, made new (never
/// a folder someone made before), mode 0700, owned by quorum's user.
fn private_dir() -> std::io::Result<PrivateDir> {
    let mut bases = Vec::new();
    if let Some(rt) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        bases.push(PathBuf::from(rt).join("quorum"));
    }
    bases.push(std::env::temp_dir());
    private_dir_in(&bases)
}

/// A new private directory for a control socket under the first of `bases`
/// where one can be made.
fn private_dir_in(bases: &[PathBuf]) -> std::io::Result<PrivateDir> {
    const PREFIX: &str = "quorum-ssh";
    let mut last = None;
    for base in bases {
        // The longest name it can get (the random part is 8 hex digits).
        let longest = base
            .join(format!("{PREFIX}-{}-00000000", std::process::id()))
            .join("m.sock");
        if longest.as_os_str().len() > 100 {
            continue;
        }
        let made = crate::confine::private::dir(base)
            .and_then(|()| crate::confine::private::new_dir(base, PREFIX));
        match made {
            Ok(dir) => return Ok(PrivateDir(dir)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no directory for a short socket path")))
}

/// How long `ssh HOST true` may take in [`reachable`] before it is called
/// unreachable (its own `ConnectTimeout` is 5 s; login takes the rest).
const CHECK_TIMEOUT: Duration = Duration::from_secs(15);

/// Whether `spec`'s host answers, for `quorum doctor`: `ssh HOST true`
/// with no control master, as the master is started (the person's options
/// first, then `BatchMode=yes`: no question asked of anyone, and a
/// `ConnectTimeout` of 5 s), owned by `supervisor`, for at most
/// [`CHECK_TIMEOUT`].
pub async fn reachable(spec: &HostSpec, supervisor: &Supervisor) -> Result<(), Unreachable> {
    let mut cmd = crate::runtime::supervisor::command(ssh_program());
    // No control master, the person's own included (one their ssh config
    // keeps alive would outlive the check).
    cmd.args(["-o", "ControlPath=none"])
        .args(&spec.ssh_args)
        .args(["-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-T"])
        .arg("--")
        .arg(&spec.ssh)
        .arg("true");
    let label = format!("ssh {} true", spec.name);
    let out = crate::runtime::probe::output(supervisor, cmd, &label, CHECK_TIMEOUT)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::TimedOut => Unreachable::NoAnswer {
                secs: CHECK_TIMEOUT.as_secs(),
            },
            _ => Unreachable::NoSsh(Arc::new(e)),
        })?;
    if out.status.success() {
        return Ok(());
    }
    Err(Unreachable::Refused {
        status: out.status,
        said: said(&out.stderr),
    })
}

/// The OpenSSH client's version (`OpenSSH_9.2p1`), as `ssh -V` says it;
/// `None` when there is no `ssh` on `PATH`, or it does not run.
pub fn version() -> Option<String> {
    let ssh = crate::runtime::path::locate("ssh")?;
    let mut cmd = std::process::Command::new(ssh);
    cmd.arg("-V").stdin(Stdio::null());
    let out = crate::runtime::supervisor::output_owned(&mut cmd, "ssh -V").ok()?;
    // It says it on stderr: `OpenSSH_9.2p1 Debian-2+deb12u3, OpenSSL 3.0.15 3 Sep 2024`.
    let text = String::from_utf8_lossy(if out.stderr.is_empty() {
        &out.stdout
    } else {
        &out.stderr
    })
    .into_owned();
    let first = text.split([',', ' ', '\n']).next()?.trim();
    (!first.is_empty()).then(|| crate::confine::sanitize::one_line(first))
}

/// The directory a host's task works in: `dir/NAME` (made by the proxy).
pub fn task_dir(link: &Link, leaf: &str) -> PathBuf {
    Path::new(&link.dir).join(leaf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_is_for_a_posix_shell() {
        assert_eq!(quote("plain/path-1.2"), "plain/path-1.2");
        assert_eq!(quote("two words"), "'two words'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("$(x)"), "'$(x)'");
        assert_eq!(dir_expr(None), "\"$HOME\"/.local/state/quorum");
        assert_eq!(dir_expr(Some("/srv/q")), "/srv/q");
        assert_eq!(dir_expr(Some("~/a b")), "\"$HOME\"/'a b'");
    }

    /// The control socket's folder is quorum's own: never one that was
    /// there before (another local user could have made it, at the name
    /// quorum used to pick: `quorum-ssh-PID-N`, and put a socket of theirs
    /// in it), always made new, mode 0700, owned by quorum's user.
    #[test]
    fn the_control_folder_is_new_private_and_ours() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let base = tempfile::tempdir().unwrap();
        // Someone else's folders, made first at every name quorum could pick.
        let pid = std::process::id();
        let planted: Vec<PathBuf> = (0..64)
            .map(|n| base.path().join(format!("quorum-ssh-{pid}-{n}")))
            .collect();
        for dir in &planted {
            std::fs::create_dir(dir).unwrap();
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        let made = private_dir_in(&[base.path().to_path_buf()]).unwrap();
        assert!(
            !planted.contains(&made.0),
            "a folder made before was used: {}",
            made.0.display()
        );
        let meta = std::fs::symlink_metadata(&made.0).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.mode() & 0o777, 0o700, "{}", made.0.display());
        assert_eq!(meta.uid(), nix::unistd::geteuid().as_raw());
        assert_eq!(made.0.parent(), Some(base.path()));
        // Two connections, two folders.
        let other = private_dir_in(&[base.path().to_path_buf()]).unwrap();
        assert_ne!(other.0, made.0);
        // Dropped: gone, and only it (the planted ones are not quorum's).
        let gone = made.0.clone();
        drop(made);
        assert!(!gone.exists());
        assert!(planted.iter().all(|d| d.is_dir()));
    }

    #[test]
    fn said_keeps_the_last_lines_clean() {
        assert_eq!(said(b""), "nothing on stderr");
        assert_eq!(said(b"a\n\nb\nc\nd\x1b[31m\n"), "b / c / d");
    }
}
