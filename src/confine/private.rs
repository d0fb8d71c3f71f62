//! Files that hold what a person typed or what agents saw (transcripts,
//! logs, history, model picks): readable by their owner alone; and folders
//! of quorum's own for its sockets (an ssh control master's, the MCP
//! endpoint's): made new, never one someone else made first.

use std::fs::{DirBuilder, OpenOptions};
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// Options that create a file with mode 0600; the caller adds how it opens.
pub fn file_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// Creates `dir` and its parents, mode 0700.
pub fn dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// A new folder of quorum's own in `base`, named `PREFIX-PID-RANDOM`
/// (eight random hex digits): made with one `mkdir` (never recursively, so
/// a folder that is there already, a link too, is an error, never used),
/// mode 0700, then checked: a folder (not a link), owned by quorum's user,
/// no one else's access. `base` must exist and be safe to make it in:
/// ours and written by no one else, or a sticky folder of ours or root's
/// (`/tmp`), where no one else can rename what we made.
#[cfg(unix)]
pub fn new_dir(base: &Path, prefix: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let me = nix::unistd::geteuid().as_raw();
    let named = |what: &str| std::io::Error::other(format!("{}: {what}", base.display()));
    let at = |place: &Path| {
        let place = place.display().to_string();
        move |e: std::io::Error| std::io::Error::new(e.kind(), format!("{place}: {e}"))
    };
    let meta = std::fs::metadata(base).map_err(at(base))?;
    if !meta.is_dir() {
        return Err(named("not a folder"));
    }
    let sticky = meta.mode() & 0o1000 != 0;
    let others_write = meta.mode() & 0o022 != 0;
    let ok = if sticky {
        meta.uid() == me || meta.uid() == 0
    } else {
        meta.uid() == me && !others_write
    };
    if !ok {
        return Err(named(&format!(
            "owned by uid {} (mode {:o}): another user could replace what quorum makes there",
            meta.uid(),
            meta.mode() & 0o7777
        )));
    }
    let dir = base.join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        hex(&random_bytes::<4>()?)
    ));
    let mut builder = DirBuilder::new();
    builder.mode(0o700);
    builder.create(&dir).map_err(at(&dir))?;
    let made = std::fs::symlink_metadata(&dir).map_err(at(&dir))?;
    if !made.is_dir() || made.uid() != me {
        // Not what was made: left alone.
        return Err(std::io::Error::other(format!(
            "{}: not the folder quorum made",
            dir.display()
        )));
    }
    if made.mode() & 0o777 != 0o700 {
        // A umask took owner bits away.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(at(&dir))?;
    }
    Ok(dir)
}

/// `N` random bytes, from the kernel.
pub fn random_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// `bytes` in lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn a_new_dir_is_new_private_and_ours() {
        let base = tempfile::tempdir().unwrap();
        let a = new_dir(base.path(), "t").unwrap();
        let b = new_dir(base.path(), "t").unwrap();
        assert_ne!(a, b);
        for dir in [&a, &b] {
            let meta = std::fs::symlink_metadata(dir).unwrap();
            assert!(meta.is_dir());
            assert_eq!(meta.mode() & 0o777, 0o700);
            assert_eq!(meta.uid(), nix::unistd::geteuid().as_raw());
            assert_eq!(dir.parent(), Some(base.path()));
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            let prefix = format!("t-{}-", std::process::id());
            assert!(name.starts_with(&prefix), "{name}");
            assert_eq!(name.len(), prefix.len() + 8, "{name}");
        }
    }

    /// A folder anyone may write (and not sticky) is no place for one:
    /// another user could rename what quorum made and put theirs there.
    #[test]
    fn a_base_others_may_write_is_refused_unless_sticky() {
        let base = tempfile::tempdir().unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = new_dir(base.path(), "t").unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("{}: owned by uid", base.path().display())),
            "{e}"
        );
        assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 0);
        // Sticky, as /tmp is: no one else can rename what is made there.
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let made = new_dir(base.path(), "t").unwrap();
        assert!(made.is_dir());
    }
}
