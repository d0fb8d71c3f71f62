//! What a host is given: this very quorum, named on the host by the
//! SHA-256 of its bytes (`bin/quorum-HASH` under the host's state
//! directory), so that a host keeps one copy of each binary, whichever
//! build or session of quorum sent it, and byte-identical builds share it.
//!
//! The connection's own session probes the host (the control master runs
//! it: `ssh::connect`): the host says its directory, system, git and
//! how it unpacks an upload (`zstd`, `gzip`, or neither), and checks the
//! binary it has under that name by its hash (not by its mere presence: a
//! copy cut short, or changed since, is sent again). When it has none that
//! checks, the same session reads the upload from its stdin: compressed
//! with zstd, or gzip, when the host can unpack it, checked by its hash
//! before it is renamed into place. Hosts need a POSIX shell, `head`, and
//! `openssl`, `sha256sum` (GNU coreutils) or `shasum` (tried in that order:
//! OpenSSL's hashes a 21 MB binary in about 15 ms of CPU where coreutils'
//! takes 80, and the check runs at every session's start); `zstd` is used
//! when they have it (`zstd -dc` unpacks a 21 MB binary in about 25 ms
//! where `gzip -dc` takes 160), else `gzip`.

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
/// `uname -sm`, git's path or `-`, and how an upload comes ([`Pack`]).
fn probe_head(dir: &str) -> String {
    format!(
        "d={dir}; \
         s() {{ if command -v openssl >/dev/null 2>&1; then openssl dgst -sha256; \
         elif command -v sha256sum >/dev/null 2>&1; then sha256sum; else shasum -a 256; fi; }}; \
         ok() {{ r=$(s < \"$1\") && case \" $r \" in *\" $h \"*) true ;; *) false ;; esac; }}; \
         mkdir -p \"$d/bin\" && cd \"$d\" && pwd -P && uname -sm && (command -v git || echo -) && \
         if command -v zstd >/dev/null 2>&1; then z=zstd; \
         elif command -v gzip >/dev/null 2>&1; then z=gzip; else z=-; fi && echo $z || exit 1; "
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
/// what the person's own `bin/quorum --version` says (or `-`). When it has
/// not, it reads lines `send LEN`, each followed by an upload of LEN bytes
/// (a length: the session's stdin stays open, it holds the session),
/// unpacks it and checks it by its hash: renamed into place, `copied`
/// printed, and the binaries quorum copied there before that nothing ran
/// for a day removed (never the person's `bin/quorum` nor anything else
/// there); else it says why not and reads the next line (home may send it
/// again). So a cold host costs no session but the master's. Then it
/// holds the session, and with it the master, until its stdin closes (the
/// link is dropped, or quorum ends).
pub(super) fn probe_script(dir: &str) -> String {
    format!(
        "{head}IFS= read -r h || exit 1; case $h in ''|*[!0-9a-f]*) exit 1 ;; esac; n=quorum-$h; \
         if {HAVE}; then echo have; else {THEIRS}; cd bin || exit 1; \
         while IFS= read -r go; do \
         case $go in \"send \"*) ;; *) break ;; esac; \
         l=${{go#send }}; case $l in ''|*[!0-9]*) exit 1 ;; esac; t=\".$n.$$\"; \
         if {{ head -c \"$l\" | case $z in zstd) zstd -dcq ;; gzip) gzip -dc ;; *) cat ;; esac \
         > \"$t\" && ok \"$t\"; }}; \
         then chmod 700 \"$t\" && mv -f \"$t\" \"$n\" && echo copied || exit 1; \
         for old in quorum-*; do \
         [ \"$old\" = \"$n\" ] && continue; \
         printf '%s\\n' \"$old\" | grep -Eq '{OLD_BUILDS}' || continue; \
         [ -n \"$(find \"./$old\" -prune -type f -atime +0 2>/dev/null)\" ] && rm -f -- \"./$old\"; \
         done; break; \
         else rm -f \"$t\"; echo \"what arrived is not this quorum (its sha256 differs)\"; fi; \
         done; fi; cd / && exec cat >/dev/null",
        head = probe_head(dir)
    )
}

/// How a host unpacks what it is sent, as its probe says: the first of
/// `zstd` and `gzip` it has (the value: its place in [`PACKED`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pack {
    Zstd = 0,
    Gzip = 1,
}

impl Pack {
    /// What the probe's line said (`-`, `None`: neither; the binary is
    /// sent as it is).
    pub(super) fn said(line: &str) -> Option<Self> {
        match line {
            "zstd" => Some(Self::Zstd),
            "gzip" => Some(Self::Gzip),
            _ => None,
        }
    }

    /// The kept upload's suffix.
    fn suffix(self) -> &'static str {
        match self {
            Self::Zstd => "zst",
            Self::Gzip => "gz",
        }
    }
}

/// What a host is sent: this binary compressed as it unpacks it
/// ([`Pack`]), made once for each binary on this machine and kept in
/// quorum's cache directory (`quorum-HASH.zst`, `quorum-HASH.gz`), so that
/// only the first new host of a build waits for it (and not even that one:
/// the connection starts the zstd one while the host answers,
/// [`prepare`]); in memory when there is no cache directory.
#[derive(Debug)]
pub(super) enum Packed {
    Cached(PathBuf),
    Memory(Vec<u8>),
}

/// The level the gzip upload is compressed at: 2 of 9, about 150 ms of
/// CPU for a 21 MB binary here (level 1 saves 50 of them and sends a tenth
/// more, a second more at 10 Mbit/s; 6 takes seven times as long).
const LEVEL: u32 = 2;

/// The level the zstd upload is compressed at: 3 (zstd's default), about
/// 150 ms of CPU for a 21 MB binary here, within the connection's own
/// start, and a tenth smaller than gzip's at 2 (6 is 7 % smaller again,
/// and takes four times as long).
const ZSTD_LEVEL: i32 = 3;

/// This binary packed for a host that unpacks `pack` ([`Packed`]), made
/// the first time it is asked for (on a blocking thread) and shared by
/// every host after, until a host refuses it ([`forget`]).
pub(super) async fn prepare(bin: &'static Binary, pack: Pack) -> Result<Arc<Packed>, CopyFailure> {
    let mut slot = PACKED[pack as usize].lock().await;
    if let Some(packed) = &*slot {
        return Ok(packed.clone());
    }
    let cache = crate::runtime::cache_dir();
    let packed = tokio::task::spawn_blocking(move || packed(bin, pack, cache))
        .await
        .map_err(|e| CopyFailure::Ssh(Arc::new(std::io::Error::other(e))))??;
    let packed = Arc::new(packed);
    *slot = Some(packed.clone());
    Ok(packed)
}

/// What [`prepare`] made, once it did: the zstd upload, the gzip one (each
/// behind a lock of its own: a host with only gzip does not wait for the
/// zstd one being made).
static PACKED: [tokio::sync::Mutex<Option<Arc<Packed>>>; 2] = [
    tokio::sync::Mutex::const_new(None),
    tokio::sync::Mutex::const_new(None),
];

/// `bin` packed as `pack`: its `quorum-HASH.zst` (or `.gz`) in `cache` when
/// that is there, else compressed into it (and the others there that
/// nothing used for a day removed), else, when `cache` cannot be written,
/// into memory.
fn packed(bin: &Binary, pack: Pack, cache: Option<PathBuf>) -> Result<Packed, CopyFailure> {
    let failed = |e: std::io::Error| CopyFailure::Binary {
        path: bin.path.clone(),
        error: Arc::new(e),
    };
    let Some(cache) = cache else {
        let mut out = Vec::new();
        compress(&bin.path, pack, &mut out).map_err(failed)?;
        return Ok(Packed::Memory(out));
    };
    let suffix = pack.suffix();
    let path = cache.join(format!("{}.{suffix}", bin.name()));
    if let Ok(file) = std::fs::File::options().append(true).open(&path)
        && file.metadata().is_ok_and(|m| m.len() > 0)
    {
        // Used now: not one of the old ones another quorum removes.
        let _ = file.set_modified(std::time::SystemTime::now());
        return Ok(Packed::Cached(path));
    }
    match write_cache(bin, pack, &cache, &path) {
        Ok(()) => Ok(Packed::Cached(path)),
        Err(e) => {
            tracing::info!("packing quorum for hosts: {}: {e}", cache.display());
            packed(bin, pack, None)
        }
    }
}

/// Compresses `bin` to `path` in `cache` (by way of a file of its own
/// there, renamed: another quorum reads either none or all of it). Then
/// removes the others there that nothing used for a day, and what a quorum
/// that ended meanwhile left half written an hour ago.
fn write_cache(
    bin: &Binary,
    pack: Pack,
    cache: &std::path::Path,
    path: &std::path::Path,
) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(cache)?;
    let suffix = pack.suffix();
    let temp = cache.join(format!(".{}.{}.{suffix}", bin.name(), std::process::id()));
    let written = std::fs::File::create(&temp).and_then(|mut file| {
        compress(&bin.path, pack, &mut file)?;
        file.sync_data()?;
        std::fs::rename(&temp, path)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    for entry in std::fs::read_dir(cache)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // Another build's, or one a quorum that ended was still writing.
        let older_than = if name.starts_with("quorum-") {
            24 * 3600
        } else if name.starts_with(".quorum-") {
            3600
        } else {
            continue;
        };
        let old = (name.ends_with(".gz") || name.ends_with(".zst"))
            && entry.path() != path
            && entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|e| e.as_secs() > older_than));
        if old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    written
}

/// The file at `path`, compressed as `pack` (zstd at [`ZSTD_LEVEL`], else
/// gzip at [`LEVEL`]), to `out`.
fn compress(path: &std::path::Path, pack: Pack, out: &mut impl Write) -> std::io::Result<()> {
    let mut file = std::fs::File::open(path)?;
    if pack == Pack::Zstd {
        zstd::stream::copy_encode(&mut file, &mut *out, ZSTD_LEVEL)?;
        return out.flush();
    }
    let mut e = flate2::write::GzEncoder::new(out, flate2::Compression::new(LEVEL));
    std::io::copy(&mut file, &mut e)?;
    e.finish()?.flush()
}

/// A packed upload that did not unpack to the binary on a host (the cache
/// changed since it was written): removed, and what this process holds
/// dropped, so that the next copy (the same one, sent again, or another,
/// in this process or another) makes it again.
pub(super) async fn forget(packed: &Arc<Packed>) {
    for slot in &PACKED {
        let mut slot = slot.lock().await;
        if slot.as_ref().is_some_and(|m| Arc::ptr_eq(m, packed)) {
            *slot = None;
        }
    }
    if let Packed::Cached(path) = &**packed {
        tracing::warn!("{}: not this quorum; removed", path.display());
        let _ = std::fs::remove_file(path);
    }
}

/// Writes `send LEN` and the upload to `stdin`: `packed`, or without it
/// (the host unpacks neither) the binary at `path` as it is; LEN is
/// returned. The session the host reads it in goes on after it (its stdin
/// stays open): the length tells it where the upload ends.
pub(super) async fn upload(
    stdin: &mut tokio::process::ChildStdin,
    path: &std::path::Path,
    packed: Option<&Packed>,
) -> std::io::Result<u64> {
    let read;
    let bytes = match packed {
        Some(Packed::Memory(bytes)) => bytes,
        Some(Packed::Cached(file)) => {
            read = tokio::fs::read(file).await?;
            &read
        }
        None => {
            read = tokio::fs::read(path).await?;
            &read
        }
    };
    stdin
        .write_all(format!("send {}\n", bytes.len()).as_bytes())
        .await?;
    stdin.write_all(bytes).await?;
    stdin.flush().await?;
    Ok(bytes.len() as u64)
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

    /// `bytes` unpacked: zstd by the library (the tests of tests/it/remote.rs
    /// unpack it with hosts' own `zstd`), gzip by `gzip -dc`.
    fn unpack(pack: Pack, bytes: Vec<u8>) -> Vec<u8> {
        if pack == Pack::Zstd {
            return zstd::decode_all(&bytes[..]).unwrap();
        }
        let mut c = std::process::Command::new("gzip")
            .arg("-dc")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = c.stdin.take().unwrap();
        std::thread::spawn(move || stdin.write_all(&bytes).unwrap());
        c.wait_with_output().unwrap().stdout
    }

    /// What a host is sent unpacks, as zstd or with `gzip -dc`, to the
    /// binary; it is made once and kept in the cache
    /// directory (what is there is what is sent: the host checks it), one
    /// for each way, and made in memory when there is no cache directory
    /// to keep it in.
    #[test]
    fn the_upload_is_made_once_and_unpacks_to_the_binary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bin");
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let bin = Binary {
            path,
            hash: "ab".repeat(32),
        };
        let cache = dir.path().join("cache");
        for (pack, suffix) in [(Pack::Zstd, "zst"), (Pack::Gzip, "gz")] {
            let Packed::Cached(kept) = packed(&bin, pack, Some(cache.clone())).unwrap() else {
                panic!("not kept in the cache");
            };
            assert_eq!(kept, cache.join(format!("{}.{suffix}", bin.name())));
            let sent = std::fs::read(&kept).unwrap();
            assert!(sent.len() < bytes.len() / 10, "{}", sent.len());
            assert!(unpack(pack, sent) == bytes, "{pack:?}");
            std::fs::write(&kept, b"kept").unwrap();
            let Packed::Cached(again) = packed(&bin, pack, Some(cache.clone())).unwrap() else {
                panic!("not kept in the cache");
            };
            assert_eq!(std::fs::read(again).unwrap(), b"kept");
            let Packed::Memory(sent) = packed(&bin, pack, None).unwrap() else {
                panic!("not in memory");
            };
            assert!(unpack(pack, sent) == bytes, "{pack:?}");
            // A cache directory that cannot be made: in memory.
            let Packed::Memory(_) = packed(&bin, pack, Some(kept.join("sub"))).unwrap() else {
                panic!("not in memory");
            };
        }
    }

    /// Another build's upload that nothing used for a day goes when a new
    /// one is written, and one left half written an hour ago; one used
    /// since, one being written, and anything else there, stay.
    #[test]
    fn writing_an_upload_removes_the_ones_nothing_used_for_a_day() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bin");
        std::fs::write(&path, b"quorum").unwrap();
        let cache = dir.path().join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        let day_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(25 * 3600);
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3700);
        for (name, modified) in [
            ("quorum-old.gz", day_ago),
            ("quorum-old.zst", day_ago),
            ("quorum-new.gz", hour_ago),
            ("notes.gz", day_ago),
            (".quorum-cut.1.gz", hour_ago),
            (".quorum-writing.2.gz", std::time::SystemTime::now()),
        ] {
            let f = std::fs::File::create(cache.join(name)).unwrap();
            f.set_modified(modified).unwrap();
        }
        let bin = Binary {
            path,
            hash: "cd".repeat(32),
        };
        packed(&bin, Pack::Zstd, Some(cache.clone())).unwrap();
        let mut left: Vec<_> = std::fs::read_dir(&cache)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                ".quorum-writing.2.gz",
                "notes.gz",
                &format!("{}.zst", bin.name()),
                "quorum-new.gz"
            ]
        );
    }
}
