//! How a host's connection is made: its control master started with the
//! probe as its own session (so the probe's answer is also the sign that
//! the connection is up: no polling of `ssh -O check`, no session of its
//! own for the probe), this binary hashed meanwhile and its hash given to
//! the probe, and, only when the host has no copy of this binary that
//! checks, the copy sent to that same session ([`super::super::ship`]).
//!
//! A call on a host so costs one connection (the master, whose session
//! probes, checks the binary by its hash and takes the copy when it must)
//! and one session over it (the proxy's, [`super::super::launch`]).

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::{CONNECT_TIMEOUT, Link, dir_expr, private_dir, said, ssh_program};
use crate::config::HostSpec;
use crate::confine::lock;
use crate::remote::ship;
use crate::remote::{CopyFailure, RemoteError, Unreachable};
use crate::runtime::supervisor::{Group, Supervisor};

/// How long a host may take to unpack and check the copy after its last
/// byte arrived (a second or so for a 21 MB binary on a slow machine).
const COPIED: Duration = Duration::from_secs(60);

/// What a control master said on stderr so far (at most 64 KiB of it).
type Said = Arc<Mutex<Vec<u8>>>;

/// A control master just started: its session's stdin (the probe reads
/// the binary's hash from it, and the copy when it must, then holds the
/// session until it closes), its stdout (the probe's answer), what it said
/// on stderr, and its exit status once it exited.
struct Master {
    stdin: Option<tokio::process::ChildStdin>,
    stdout: tokio::io::BufReader<tokio::process::ChildStdout>,
    group: Group,
    said: Said,
    exited: watch::Receiver<Option<ExitStatus>>,
}

/// Starts the control master for `spec` with the probe as its session,
/// gives the probe this binary's hash, reads its answer (the connection
/// is then up), and copies quorum there when it must.
pub(super) async fn connect(
    spec: HostSpec,
    supervisor: &Supervisor,
    closed: watch::Receiver<bool>,
    tell: Option<crate::remote::Tell>,
) -> Result<Link, RemoteError> {
    let unreachable = |why: Unreachable| RemoteError::Unreachable {
        host: spec.name.clone(),
        ssh: spec.ssh.clone(),
        why,
    };
    let private = private_dir().map_err(|e| unreachable(Unreachable::NoSocketDir(Arc::new(e))))?;
    let socket = private.0.join("m.sock");
    let probe = ship::probe_script(&dir_expr(spec.dir.as_deref()));
    let mut master = start_master(&spec, &socket, &probe, supervisor)
        .map_err(|e| unreachable(Unreachable::NoSsh(Arc::new(e))))?;
    // This binary is hashed (once a process) while the host answers: the
    // probe there reads its hash once it said where it is (and ends when
    // there is none: its stdin closed).
    let stdin = master.stdin.take().expect("given once");
    let give_hash = async move {
        let bin = ship::binary_hash().await?;
        // What a host without it is sent is made meanwhile too (once a
        // build on this machine: it is kept), in case this one has not:
        // the zstd one (a host with only gzip waits for its own).
        tokio::spawn(ship::prepare(bin, ship::Pack::Zstd));
        let mut stdin = stdin;
        // A master that is gone says why in its answer (none).
        let _ = stdin.write_all(format!("{}\n", bin.hash).as_bytes()).await;
        Ok::<_, CopyFailure>((bin, stdin))
    };
    let (given, answer) = tokio::join!(
        give_hash,
        read_answer(&mut master.stdout, &master.exited, &master.said)
    );
    let copy_failed = |why| RemoteError::Copy {
        host: spec.name.clone(),
        why,
    };
    // A host not reached says so first; then a binary not hashed (the
    // probe there ended for want of its hash); then a probe that failed.
    let (bin, mut hold, lines) = match (answer, given) {
        (Err(Failure::Unreachable(why)), _) => return Err(unreachable(why)),
        (_, Err(why)) => return Err(copy_failed(why)),
        (
            Err(Failure::Probe {
                status,
                lines,
                said,
            }),
            _,
        ) => {
            return Err(probe_failed(&spec.name, status, lines, said));
        }
        (Ok(lines), Ok((bin, hold))) => (bin, hold, lines),
    };
    let [dir, system, git, packer, quorum] = lines;
    let name = bin.name();
    let chosen = ship::choose(
        &spec.name,
        &dir,
        &system,
        &quorum,
        &name,
        &ship::local_system(),
    )?;
    let quorum = match chosen {
        Some(there) => there,
        None => {
            let pack = ship::Pack::said(&packer);
            let say = |text: String| {
                if let Some(tell) = &tell {
                    let _ = tell.send(text);
                }
            };
            say(format!(
                "host {}: copying quorum there (once for each build of quorum)",
                spec.name
            ));
            let started = std::time::Instant::now();
            let sent = copy(&spec.name, &dir, &mut hold, &mut master, bin, pack).await?;
            say(format!(
                "host {}: copied quorum there ({:.1} MB in {:.1} s)",
                spec.name,
                sent as f64 / 1e6,
                started.elapsed().as_secs_f64()
            ));
            format!("{dir}/bin/{name}")
        }
    };
    Ok(Link {
        dir,
        git: (git != "-").then_some(git),
        quorum,
        host: spec,
        socket,
        supervisor: supervisor.clone(),
        closed,
        exited: master.exited,
        _hold: hold,
        _master: master.group,
        _private: private,
    })
}

/// Starts `spec`'s control master on `socket`, owned by `supervisor`,
/// running `probe` as its session; what it says on stderr is kept.
fn start_master(
    spec: &HostSpec,
    socket: &Path,
    probe: &str,
    supervisor: &Supervisor,
) -> std::io::Result<Master> {
    let mut cmd = crate::runtime::supervisor::command(ssh_program());
    // The person's options before quorum's defaults (ssh keeps the first
    // value it is given), the master's own first of all.
    cmd.arg("-M")
        .arg("-S")
        .arg(socket)
        .args(["-o", "ControlPersist=no"])
        .args(&spec.ssh_args)
        .args(["-o", "BatchMode=yes", "-o", "ConnectTimeout=10"])
        .args([
            "-o",
            "ServerAliveInterval=15",
            "-o",
            "ServerAliveCountMax=2",
            "-T",
        ])
        .arg("--")
        .arg(&spec.ssh)
        .arg(probe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (mut child, group) = supervisor.spawn(cmd, &format!("ssh {}", spec.name))?;
    let mut stderr = child.stderr.take().expect("piped");
    let said: Said = Arc::default();
    let keep = said.clone();
    let reading = tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let mut kept = lock(&keep);
            if kept.len() < 64 * 1024 {
                kept.extend_from_slice(&buf[..n]);
            }
        }
    });
    let (tx, exited) = watch::channel(None);
    let stdin = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    // Reaped here (the group ends it); its status, once what it said on
    // stderr is read (a moment at most: a `ProxyCommand` that outlives it
    // may hold its stderr), tells that the connection is gone.
    tokio::spawn(async move {
        let status = child
            .wait()
            .await
            .unwrap_or_else(|_| ExitStatus::from_raw(255 << 8));
        let _ = tokio::time::timeout(Duration::from_millis(200), reading).await;
        tx.send_replace(Some(status));
    });
    Ok(Master {
        stdin: Some(stdin),
        stdout: tokio::io::BufReader::new(stdout),
        group,
        said,
        exited,
    })
}

/// Why the master's probe gave no answer.
enum Failure {
    /// The connection was not made (ssh's own failure, exit status 255,
    /// or no answer in time).
    Unreachable(Unreachable),
    /// The connection was made; the probe there failed or said too little.
    Probe {
        status: ExitStatus,
        lines: Vec<String>,
        said: String,
    },
}

/// The probe's five lines, read from the master's stdout within
/// [`CONNECT_TIMEOUT`]; else why not (the master's exit status and what it
/// said).
async fn read_answer(
    stdout: &mut (impl tokio::io::AsyncBufRead + Unpin),
    exited: &watch::Receiver<Option<ExitStatus>>,
    said_so_far: &Said,
) -> Result<[String; 5], Failure> {
    let mut lines = Vec::new();
    // An error reading counts as the end: the master's status says why.
    let read = probe_lines(stdout, &mut lines);
    if tokio::time::timeout(CONNECT_TIMEOUT, read).await.is_err() {
        return Err(Failure::Unreachable(Unreachable::NoAnswer {
            secs: CONNECT_TIMEOUT.as_secs(),
        }));
    }
    let lines = match <[String; 5]>::try_from(lines) {
        Ok(five) => return Ok(five),
        Err(fewer) => fewer,
    };
    // It said less: the master ended (or ends now), its status says why.
    let mut exited = exited.clone();
    let status = match tokio::time::timeout(
        Duration::from_secs(5),
        exited.wait_for(Option::is_some),
    )
    .await
    {
        Ok(Ok(status)) => status.expect("some"),
        _ => ExitStatus::from_raw(255 << 8),
    };
    let said = said(&lock(said_so_far));
    if status.code() == Some(255) || status.code().is_none() {
        return Err(Failure::Unreachable(Unreachable::Refused { status, said }));
    }
    Err(Failure::Probe {
        status,
        lines,
        said,
    })
}

/// The probe's five lines (its answer: [`ship::probe_script`]) from
/// `stdout` into `lines`, as far as they come.
async fn probe_lines(
    stdout: &mut (impl tokio::io::AsyncBufRead + Unpin),
    lines: &mut Vec<String>,
) -> std::io::Result<()> {
    let mut line = String::new();
    while lines.len() < 5 && stdout.read_line(&mut line).await? > 0 {
        lines.push(line.trim_end_matches('\n').to_string());
        line.clear();
    }
    Ok(())
}

/// The error of a probe that failed there (`status`) or said too little.
fn probe_failed(host: &str, status: ExitStatus, lines: Vec<String>, said: String) -> RemoteError {
    if status.success() {
        RemoteError::Probe {
            host: host.to_string(),
            answer: lines.join("\n"),
        }
    } else {
        RemoteError::Failed {
            host: host.to_string(),
            what: "probing it",
            status,
            said,
        }
    }
}

/// Copies this binary (`bin`) to `host` through the master's own session,
/// whose probe found no copy there that checks: `send` and the upload on
/// its stdin (`hold`, compressed as the host unpacks it: what
/// [`ship::prepare`] made), checked by its hash there before it is renamed
/// into place, and `copied` is its answer; the bytes sent. A kept upload
/// the host refuses (changed since it was written) is removed, made again
/// from the binary and sent once more. Else what the master said on stderr
/// and the host's answer.
async fn copy(
    host: &str,
    dir: &str,
    hold: &mut tokio::process::ChildStdin,
    master: &mut Master,
    bin: &'static ship::Binary,
    pack: Option<ship::Pack>,
) -> Result<u64, RemoteError> {
    let copy_failed = |why| RemoteError::Copy {
        host: host.to_string(),
        why,
    };
    let mut again = pack.is_some();
    loop {
        let packed = match pack {
            Some(pack) => Some(ship::prepare(bin, pack).await.map_err(copy_failed)?),
            None => None,
        };
        let (answer, failed, sent) = send(hold, master, bin, packed.as_deref()).await;
        if answer.trim_end() == "copied" {
            tracing::info!("host {host}: copied quorum there ({})", bin.name());
            return Ok(sent);
        }
        if let Some(packed) = &packed {
            ship::forget(packed).await;
        }
        let refused = failed.is_none() && answer.starts_with("what arrived is not this quorum");
        let kept = matches!(packed.as_deref(), Some(ship::Packed::Cached(_)));
        if refused && again && kept {
            tracing::warn!("host {host}: it refused the kept upload; made again, sent again");
            again = false;
            continue;
        }
        // It ends now: what it said on stderr before its answer, and its
        // answer (why not), in that order.
        let _ = tokio::time::timeout(
            Duration::from_secs(1),
            master.exited.wait_for(Option::is_some),
        )
        .await;
        let mut text = lock(&master.said).clone();
        text.extend_from_slice(answer.as_bytes());
        if let Some(e) = failed {
            text.extend_from_slice(format!("\nsending it: {e}").as_bytes());
        }
        return Err(copy_failed(CopyFailure::Failed {
            dir: dir.to_string(),
            said: said(&text),
        }));
    }
}

/// Sends `packed` (or, without it, the binary) on `hold` and reads the
/// host's answer: until the master ends (the host's session ended: it
/// stopped reading, and its answer, if any, is read), or the host says
/// nothing for COPIED after the last byte (a second once the upload
/// failed: what was sent, if anything, is answered at once). The answer,
/// why the upload failed, if it did, and the bytes it sent. An error
/// reading counts as no answer.
async fn send(
    hold: &mut tokio::process::ChildStdin,
    master: &mut Master,
    bin: &ship::Binary,
    packed: Option<&ship::Packed>,
) -> (String, Option<String>, u64) {
    let mut exited = master.exited.clone();
    let mut answer = String::new();
    let mut failed = None;
    let mut sent = 0;
    let copied = async {
        let wait = match ship::upload(hold, &bin.path, packed).await {
            Ok(n) => {
                sent = n;
                COPIED
            }
            Err(e) => {
                failed = Some(e.to_string());
                Duration::from_secs(1)
            }
        };
        let _ = tokio::time::timeout(wait, master.stdout.read_line(&mut answer)).await;
    };
    tokio::select! {
        _ = copied => {}
        _ = async { exited.wait_for(Option::is_some).await.is_ok() } => {
            let _ = tokio::time::timeout(
                Duration::from_millis(200),
                master.stdout.read_line(&mut answer),
            )
            .await;
        }
    }
    (answer, failed, sent)
}
