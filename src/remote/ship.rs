//! What a host is given: this very quorum, named on the host by the
//! SHA-256 of its bytes (`bin/quorum-HASH` under the host's state
//! directory), so that a host keeps one copy of each binary, whichever
//! build or session of quorum sent it, and byte-identical builds share it.
//!
//! The connection's own session probes the host (the control master runs
//! it: `ssh::connect`): the host says its directory, system, git and
//! whether it has `gzip`, and checks the binary it has under that name by
//! its hash (not by its mere presence: a copy cut short, or changed since,
//! is sent again). When it has none that checks, a session of its own
//! probes again and reads the upload from its stdin: compressed with gzip
//! when the host can unpack it, checked by its hash before it is renamed
//! into place. Hosts need a POSIX shell and `openssl`,
//! `sha256sum` (GNU coreutils) or `shasum` (tried in that order: OpenSSL's
//! hashes a 21 MB binary in about 15 ms of CPU where coreutils' takes 80,
//! and the check runs at every session's start); `gzip` is used when they
//! have it.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use tokio::io::AsyncWriteExt;

use super::{CopyFailure, RemoteError};

static BINARY: OnceLock<PathBuf> = OnceLock::new();

/// Names quorum's binary, the one copied to hosts (default: this process's
/// own): for a program that runs a session in-process but is not quorum
/// (the test suite).
pub fn use_binary(path: PathBuf) {
    let _ = BINARY.set(path);
}

/// The binary a host is given.
fn binary() -> std::io::Result<PathBuf> {
    match BINARY.get() {
        Some(path) => Ok(path.clone()),
        None => std::env::current_exe(),
    }
}

/// The binary a host is given and its SHA-256 (lowercase hex), read once
/// a process (tens of milliseconds for a release build).
#[derive(Debug)]
pub(super) struct Binary {
    pub(super) path: PathBuf,
    pub(super) hash: String,
}

impl Binary {
    /// Its name on a host: `quorum-HASH`.
    pub(super) fn name(&self) -> String {
        format!("quorum-{}", self.hash)
    }
}

/// This binary and its hash, computed the first time (on a blocking
/// thread: the connection starts it as it is made, so that it
/// costs nothing in wall time).
pub(super) async fn binary_hash() -> Result<&'static Binary, CopyFailure> {
    static HASHED: OnceLock<Result<Binary, CopyFailure>> = OnceLock::new();
    if let Some(done) = HASHED.get() {
        return done.as_ref().map_err(Clone::clone);
    }
    let done = tokio::task::spawn_blocking(|| HASHED.get_or_init(hash_binary))
        .await
        .map_err(|e| CopyFailure::Ssh(Arc::new(std::io::Error::other(e))))?;
    done.as_ref().map_err(Clone::clone)
}

fn hash_binary() -> Result<Binary, CopyFailure> {
    use sha2::Digest;
    let path = binary().map_err(|e| CopyFailure::NoBinary(Arc::new(e)))?;
    let failed = |e: std::io::Error| CopyFailure::Binary {
        path: path.clone(),
        error: Arc::new(e),
    };
    let mut file = std::fs::File::open(&path).map_err(failed)?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(failed)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let hash = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(Binary { path, hash })
}

/// This machine as `uname -sm` says it.
pub(super) fn local_system() -> String {
    let os = match std::env::consts::OS {
        "linux" => "Linux",
        "macos" => "Darwin",
        other => other,
    };
    format!("{os} {}", std::env::consts::ARCH)
}

/// The names of the binaries quorum copies to a host, as `grep -E` takes
/// them: `quorum-HASH`, and the `quorum-VERSION-SIZE-TIME` of the builds
/// before quorum named them by their hash.
const OLD_BUILDS: &str =
    r"^quorum-([0-9a-f]{64}|[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?-[0-9a-f]+-[0-9a-f]+)$";

/// What both probes say first, as shell (`dir`: the state directory's
/// shell expression): the functions that check a file by its hash (`$h`,
/// set before they run), then four lines: the directory made and resolved,
/// `uname -sm`, git's path or `-`, and `gzip` or `-` (how an upload comes).
fn probe_head(dir: &str) -> String {
    format!(
        "d={dir}; \
         s() {{ if command -v openssl >/dev/null 2>&1; then openssl dgst -sha256; \
         elif command -v sha256sum >/dev/null 2>&1; then sha256sum; else shasum -a 256; fi; }}; \
         ok() {{ r=$(s < \"$1\") && case \" $r \" in *\" $h \"*) true ;; *) false ;; esac; }}; \
         mkdir -p \"$d/bin\" && cd \"$d\" && pwd -P && uname -sm && (command -v git || echo -) && \
         if command -v gzip >/dev/null 2>&1; then z=gzip; else z=-; fi && echo $z || exit 1; "
    )
}

/// Whether `bin/$n` there is this binary, by its hash (not by its mere
/// presence: a copy cut short, or changed since, is not).
const HAVE: &str = "[ -f \"bin/$n\" ] && [ -x \"bin/$n\" ] && ok \"bin/$n\"";

/// What the person's own `bin/quorum --version` says there, or `-`.
const THEIRS: &str =
    "(test -x bin/quorum && bin/quorum --version 2>/dev/null </dev/null || echo -)";

/// The probe the control master runs as its own session (`dir`: the state
/// directory's shell expression): its answer is also the sign that the
/// connection is up. It prints the four lines of [`probe_head`], reads this
/// binary's hash from its stdin (home hashes it while the connection is
/// made), and prints `have` (the binary there is this one, by its hash) or
/// what the person's own `bin/quorum --version` says (or `-`). Then it
/// holds the session, and with it the master, until its stdin closes (the
/// link is dropped, or quorum ends).
pub(super) fn probe_script(dir: &str) -> String {
    format!(
        "{head}IFS= read -r h || exit 1; case $h in ''|*[!0-9a-f]*) exit 1 ;; esac; n=quorum-$h; \
         if {HAVE}; then echo have; else {THEIRS}; fi; cd / && exec cat >/dev/null",
        head = probe_head(dir)
    )
}

/// The probe and copy, as one shell command on the host (`dir`: the state
/// directory's shell expression), run when the master's probe found no
/// copy of this binary there. It prints the five lines of
/// [`probe_script`]. Then, unless it has it (another quorum copied it
/// meanwhile), it reads a line: `send` and the upload follow (checked by
/// its hash, renamed into place, `copied` printed, and the binaries quorum
/// copied there before that nothing ran for a day removed: never the
/// person's `bin/quorum` nor anything else there), anything else or
/// nothing, and it ends.
pub(super) fn script(dir: &str, bin: &Binary) -> String {
    let (name, hash) = (bin.name(), &bin.hash);
    format!(
        "h={hash}; n={name}; {head}\
         if {HAVE}; then echo have; exit 0; fi; {THEIRS}; \
         IFS= read -r go || exit 0; [ \"$go\" = send ] || exit 0; \
         cd bin && t=\".$n.$$\" && \
         if {{ if [ $z = gzip ]; then gzip -dc; else cat; fi > \"$t\" && ok \"$t\"; }}; \
         then chmod 700 \"$t\" && mv -f \"$t\" \"$n\" && echo copied; \
         else rm -f \"$t\"; echo \"what arrived is not this quorum (its sha256 differs)\" >&2; exit 1; fi && \
         {{ for old in quorum-*; do \
         [ \"$old\" = \"$n\" ] && continue; \
         printf '%s\\n' \"$old\" | grep -Eq '{OLD_BUILDS}' || continue; \
         [ -n \"$(find \"./$old\" -prune -type f -atime +0 2>/dev/null)\" ] && rm -f -- \"./$old\"; \
         done; true; }}",
        head = probe_head(dir)
    )
}

/// Writes `send` and the binary at `path` to `stdin`: gzip-compressed (the
/// fastest level: on a link of 10 Mbit/s a third of the bytes, and on
/// loopback compressing keeps up with the host unpacking it) when `gzip`,
/// as it is else. Compressed on a blocking thread, sent as it comes.
pub(super) async fn upload(
    stdin: &mut tokio::process::ChildStdin,
    path: &std::path::Path,
    gzip: bool,
) -> std::io::Result<()> {
    stdin.write_all(b"send\n").await?;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<std::io::Result<Vec<u8>>>(4);
    let path = path.to_path_buf();
    let packer = tokio::task::spawn_blocking(move || {
        let sent = pack(&path, gzip, &tx);
        if let Err(e) = sent {
            let _ = tx.blocking_send(Err(e));
        }
    });
    while let Some(chunk) = rx.recv().await {
        stdin.write_all(&chunk?).await?;
    }
    packer.await.map_err(std::io::Error::other)?;
    stdin.flush().await
}

/// Reads the file at `path` and sends it to `tx` in chunks of a megabyte
/// (stopping when nothing receives any more). When `gzip`, each chunk is a
/// gzip member of its own (`gzip -dc` unpacks their sequence as one
/// file), compressed at the fastest level while the link keeps up (nothing
/// waits to be sent: compressing is what the copy waits for, as on a fast
/// network) and at the default level while chunks wait (a slow link: the
/// time it takes is hidden, and it sends a tenth less).
fn pack(
    path: &std::path::Path,
    gzip: bool,
    tx: &tokio::sync::mpsc::Sender<std::io::Result<Vec<u8>>>,
) -> std::io::Result<()> {
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let mut n = 0;
        while n < buf.len() {
            match file.read(&mut buf[n..])? {
                0 => break,
                read => n += read,
            }
        }
        if n == 0 {
            return Ok(());
        }
        let chunk = if gzip {
            let level = if tx.capacity() == tx.max_capacity() {
                flate2::Compression::fast()
            } else {
                flate2::Compression::default()
            };
            let mut e = flate2::write::GzEncoder::new(Vec::with_capacity(n / 2), level);
            e.write_all(&buf[..n])?;
            e.finish()?
        } else {
            buf[..n].to_vec()
        };
        tx.blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::other("the host stopped reading"))?;
    }
}

/// Which quorum runs on a host whose state directory is `dir`, whose
/// `uname -sm` is `system` and which has this binary (`quorum` is `have`,
/// its name there `name`) or not (it is then what its `bin/quorum
/// --version` said, or `-`): this one there, the person's own `bin/quorum`
/// of this version on a host of another system, or `None`: copy this one
/// there (same system). Else an error saying what to install.
pub(super) fn choose(
    host: &str,
    dir: &str,
    system: &str,
    quorum: &str,
    name: &str,
    ours: &str,
) -> Result<Option<String>, RemoteError> {
    let want = format!("quorum {}", env!("CARGO_PKG_VERSION"));
    if quorum == "have" {
        Ok(Some(format!("{dir}/bin/{name}")))
    } else if system == ours {
        Ok(None)
    } else if quorum == want {
        Ok(Some(format!("{dir}/bin/quorum")))
    } else {
        Err(RemoteError::OtherSystem {
            host: host.to_string(),
            system: system.to_string(),
            ours: ours.to_string(),
            want,
            dir: dir.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_gets_this_binary_or_says_what_to_install() {
        let v = env!("CARGO_PKG_VERSION");
        let pick = |system: &str, quorum: &str| {
            choose("big", "/q", system, quorum, "quorum-b", "Linux x86_64")
        };
        assert_eq!(
            pick("Linux x86_64", "have").unwrap(),
            Some("/q/bin/quorum-b".into())
        );
        assert_eq!(pick("Linux x86_64", "-").unwrap(), None);
        assert_eq!(
            pick("Darwin arm64", &format!("quorum {v}")).unwrap(),
            Some("/q/bin/quorum".into())
        );
        let e = pick("Linux aarch64", "quorum 0.0.1").unwrap_err();
        assert!(matches!(e, RemoteError::OtherSystem { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!(
                "host big: it is Linux aarch64, this quorum is Linux x86_64: quorum cannot copy \
                 itself there; install quorum {v} for Linux aarch64 as /q/bin/quorum"
            )
        );
    }

    #[test]
    fn only_quorums_own_binaries_are_old_builds() {
        let matches = |name: &str| {
            std::process::Command::new("grep")
                .args(["-Eq", OLD_BUILDS])
                .stdin(std::process::Stdio::piped())
                .spawn()
                .and_then(|mut c| {
                    writeln!(c.stdin.take().unwrap(), "{name}")?;
                    c.wait()
                })
                .unwrap()
                .success()
        };
        let hash = "0123456789abcdef".repeat(4);
        let ours = Binary {
            path: PathBuf::new(),
            hash: hash.clone(),
        };
        assert!(matches(&ours.name()), "{}", ours.name());
        // The names of the builds before binaries were named by their hash.
        assert!(matches("quorum-0.1.0-1f00-18b2c3d4e5f60718"));
        assert!(matches("quorum-1.2.3-rc.1-10-20"));
        for other in [
            "quorum",
            "quorum-old",
            "quorum-0.1.0",
            "quorum-0.1.0-x-y",
            &format!("quorum-{}", &hash[1..]),
            &format!("quorum-{hash}.bak"),
            "notes",
        ] {
            assert!(!matches(other), "{other}");
        }
    }

    /// What is sent unpacks, with the host's own `gzip -dc`, to the binary.
    #[test]
    fn the_upload_unpacks_to_the_binary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bin");
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        for gzip in [true, false] {
            let (tx, mut rx) = tokio::sync::mpsc::channel(1 << 10);
            pack(&path, gzip, &tx).unwrap();
            drop(tx);
            let mut sent = Vec::new();
            while let Ok(chunk) = rx.try_recv() {
                sent.extend(chunk.unwrap());
            }
            let unpacked = if gzip {
                assert!(sent.len() < bytes.len() / 10, "{}", sent.len());
                let mut c = std::process::Command::new("gzip")
                    .arg("-dc")
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                let mut stdin = c.stdin.take().unwrap();
                std::thread::spawn(move || stdin.write_all(&sent).unwrap());
                c.wait_with_output().unwrap().stdout
            } else {
                sent
            };
            assert!(unpacked == bytes, "gzip {gzip}");
        }
    }
}
