//! File access for agents, confined to the session's directory.
//!
//! The root is pinned as a directory descriptor, and every path is walked
//! one component at a time from it with `openat` and `O_NOFOLLOW`: a
//! symbolic link is read and followed by this code, never by the kernel,
//! and only while it stays inside the root. So neither `../x`, nor a link
//! pointing out (dangling or not), nor a directory swapped for a link
//! between a check and the open, reaches outside. Only regular files are
//! read or written (a FIFO would block forever), and reads are capped. A
//! path deeper than [`MAX_DEPTH`] is refused, and a walk holds no more than
//! a few descriptors at once, however deep it goes.
//!
//! Writes never go into a `.git` or a guarded folder; where the root is
//! the person's own tree, the files other programs run (`Root::asking`)
//! are written only once the person allowed that very path, checked at
//! each step of the walk that writes it.

mod walk;

use super::lexical;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("{path}: outside the session directory {root}")]
    Outside { path: PathBuf, root: PathBuf },
    #[error(
        "{path}: refused: the path matches this task's exclude_files_pattern {pattern:?}, so it may not be read or written"
    )]
    Excluded { path: PathBuf, pattern: String },
    #[error("{path}: refused: {why}")]
    Protected { path: PathBuf, why: String },
    #[error("{path}: refused: a path of {parts} components; quorum walks at most {limit}")]
    TooDeep {
        path: PathBuf,
        parts: usize,
        limit: usize,
    },
    /// A file other programs run, in the person's own tree, not allowed
    /// (yet): the person may be asked ([`Root::with_consent`]) for `below`,
    /// where the write would land.
    #[error(
        "{path}: refused: {why}; in your own tree an agent writes it only once you allow it, and you were not asked here: write it yourself, or give the task isolation \"worktree\" (/merge then names the file and asks for /merge! before it reaches your tree)"
    )]
    Unasked {
        path: PathBuf,
        below: PathBuf,
        why: &'static str,
    },
    #[error("{path}: not a regular file ({kind}); only regular files are read or written")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error(
        "{path}: {size} bytes, over the read limit of {} (max_read_bytes under [limits] in the config)",
        crate::confine::limits::size(*limit)
    )]
    TooBig {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Paths a task may not read: `exclude_files_pattern`, a regular
/// expression searched for in a path relative to the session directory
/// (`secrets/key.pem`, `/` between the parts).
#[derive(Debug, Clone)]
pub struct Exclude(regex::Regex);

impl Exclude {
    /// Compiles `pattern`; the error names it.
    pub fn new(pattern: &str) -> Result<Self, String> {
        regex::Regex::new(pattern).map(Self).map_err(|e| {
            format!("exclude_files_pattern {pattern:?} is not a valid regular expression: {e}")
        })
    }

    pub fn pattern(&self) -> &str {
        self.0.as_str()
    }

    /// Whether a path relative to the session directory matches.
    pub fn matches(&self, relative: &Path) -> bool {
        let text: Vec<String> = relative
            .components()
            .filter_map(|c| match c {
                Component::Normal(part) => Some(part.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        !text.is_empty() && self.0.is_match(&text.join("/"))
    }
}

/// How many symbolic links one path may pass through (as Linux allows).
const MAX_LINKS: usize = 40;
/// The most components a path may have, and the deepest below the root a
/// walk goes (links followed): a deeper path is refused.
pub const MAX_DEPTH: usize = 256;
/// The most folders on the way a walk keeps open (the nearest): `..` past
/// them opens the way again from the root.
const OPEN_DIRS: usize = 8;

/// One step of a path: up, or into a name.
enum Part {
    Up,
    Name(OsString),
}

fn parts(path: &Path) -> VecDeque<Part> {
    path.components()
        .filter_map(|c| match c {
            Component::ParentDir => Some(Part::Up),
            Component::Normal(n) => Some(Part::Name(n.to_owned())),
            _ => None,
        })
        .collect()
}

/// `names` (the path below the root so far) with `rest` applied as
/// written, `..` taking a name off; `None` if it leaves the root.
fn as_written<'a>(
    mut names: Vec<OsString>,
    rest: impl IntoIterator<Item = &'a Part>,
) -> Option<Vec<OsString>> {
    for part in rest {
        match part {
            Part::Up => {
                names.pop()?;
            }
            Part::Name(n) => names.push(n.clone()),
        }
    }
    Some(names)
}

/// What a walk ends with.
#[derive(Clone, Copy, PartialEq)]
enum Walk {
    /// Open the file for reading.
    Read,
    /// Open the file, if it exists, to learn what it is (creating the
    /// directories on the way): a write replaces it from its directory.
    Write,
    /// Open nothing: say where the path leads, following links as far as
    /// they exist.
    Probe,
}

/// Where a walk ended: the path below the root, and the file it opened;
/// for a write, also the directory the file is in and its name there.
struct Found {
    below: PathBuf,
    file: Option<File>,
    parent: Option<(OwnedFd, OsString)>,
}

fn kind(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "not a plain file"
    }
}

/// Which paths below a root (`/` between their parts) other programs run,
/// and why: written only with the person's leave ([`Root::asking`]).
#[derive(Clone)]
pub struct Asking(pub Arc<AskFor>);

/// Why a path below a root is asked for, if it is.
pub type AskFor = dyn Fn(&Path) -> Option<&'static str> + Send + Sync;

impl std::fmt::Debug for Asking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Asking(..)")
    }
}

/// The directory an agent may read and write, pinned by a descriptor.
/// Nothing inside a `.git` (a repository's machinery: its config and hooks
/// are run by git) is written, nor anything under the folders named by
/// [`Root::guarding`] (the repository's in-tree `core.hooksPath`); what
/// [`Root::asking`] names only once the person allowed it.
#[derive(Debug, Clone)]
pub struct Root {
    path: PathBuf,
    dir: Arc<OwnedFd>,
    max_read: u64,
    /// Folders below the root that are never written, as paths below it.
    guarded: Arc<[PathBuf]>,
    /// What is written only with the person's leave.
    asking: Option<Asking>,
    /// The one such path (below the root) the person allowed.
    consent: Option<PathBuf>,
}

impl PartialEq for Root {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
    }
}

impl Eq for Root {}

impl Root {
    pub fn new(dir: &Path) -> io::Result<Self> {
        let path = dir.canonicalize()?;
        let fd = nix::fcntl::open(
            &path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Self {
            path,
            dir: Arc::new(fd),
            max_read: crate::confine::limits::MAX_READ,
            guarded: Arc::from([]),
            asking: None,
            consent: None,
        })
    }

    /// The same root, writing what `asking` names only with the person's
    /// leave: refused with [`FsError::Unasked`] until it is given
    /// ([`Root::with_consent`]). Where links lead is what counts.
    pub fn asking(mut self, asking: Option<Asking>) -> Self {
        self.asking = asking;
        self
    }

    /// The same root, allowed to write `below` (a path below it, as
    /// [`FsError::Unasked`] named it) although it is asked for: the person
    /// said yes. Any other path it is asked for is still refused.
    pub fn with_consent(&self, below: &Path) -> Self {
        let mut root = self.clone();
        root.consent = Some(below.to_path_buf());
        root
    }

    /// Refuses a write through `below` (a path below the root, links
    /// followed) that [`Root::asking`] names, unless the person allowed
    /// it: the whole path (`last`), or one through it.
    fn ask(&self, path: &Path, below: &[OsString], last: bool) -> Result<(), FsError> {
        let Some(asking) = &self.asking else {
            return Ok(());
        };
        let below: PathBuf = below.iter().collect();
        let Some(why) = (asking.0)(&below) else {
            return Ok(());
        };
        let allowed = self.consent.as_ref().is_some_and(|c| {
            if last {
                *c == below
            } else {
                c.starts_with(&below)
            }
        });
        if allowed {
            Ok(())
        } else {
            Err(FsError::Unasked {
                path: path.to_path_buf(),
                below,
                why,
            })
        }
    }

    /// [`Root::ask`] for where a write to `path` lands (after
    /// [`Root::guard`]), before anything is made on the way.
    fn ask_first(&self, path: &Path) -> Result<(), FsError> {
        if self.asking.is_none() {
            return Ok(());
        }
        let below: Vec<OsString> = self
            .walk(path, Walk::Probe)?
            .below
            .components()
            .map(|c| c.as_os_str().to_owned())
            .collect();
        // What is never written is refused as such, asked for or not.
        self.guard(path, &below)?;
        self.ask(path, &below, true)
    }

    /// The same root, never writing under `paths` (absolute; those outside
    /// the root are outside it anyway): the hooks git would run.
    pub fn guarding(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        let below: Vec<PathBuf> = paths
            .into_iter()
            .filter_map(|p| {
                let p = p.canonicalize().unwrap_or(p);
                p.strip_prefix(&self.path).ok().map(Path::to_path_buf)
            })
            .filter(|p| p.components().next().is_some())
            .collect();
        self.guarded = Arc::from(below);
        self
    }

    /// A `.git` named anywhere in `path` refuses a write before any
    /// directory on the way is made (where links lead is checked as a
    /// walk follows them).
    fn guard_named(&self, path: &Path) -> Result<(), FsError> {
        let named: Vec<OsString> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_owned()),
                _ => None,
            })
            .collect();
        if named.iter().any(|n| n.eq_ignore_ascii_case(".git")) {
            self.guard(path, &named)?;
        }
        Ok(())
    }

    /// Why a write to `below` (a path below the root, links followed) is
    /// refused, if it is: it is inside a `.git`, or under a guarded folder.
    fn guard(&self, path: &Path, below: &[OsString]) -> Result<(), FsError> {
        let refuse = |why: String| {
            Err(FsError::Protected {
                path: path.to_path_buf(),
                why,
            })
        };
        if below.iter().any(|n| n.eq_ignore_ascii_case(".git")) {
            return refuse(
                "it is inside the repository's .git, whose config and hooks git runs; agents may not change it"
                    .into(),
            );
        }
        let below: PathBuf = below.iter().collect();
        if let Some(hooks) = self.guarded.iter().find(|g| below.starts_with(g)) {
            return refuse(format!(
                "it is under {}, the repository's core.hooksPath, whose hooks git runs; agents may not change them",
                hooks.display()
            ));
        }
        Ok(())
    }

    /// The largest file this root reads.
    pub fn max_read(&self) -> u64 {
        self.max_read
    }

    /// The same root, with reads capped at `bytes`.
    pub fn with_max_read(mut self, bytes: u64) -> Self {
        self.max_read = bytes;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The descriptor the root is pinned by.
    pub fn descriptor(&self) -> std::os::fd::BorrowedFd<'_> {
        self.dir.as_fd()
    }

    fn absolute(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.path.join(path)
        }
    }

    fn outside(&self, path: &Path) -> FsError {
        FsError::Outside {
            path: path.to_path_buf(),
            root: self.path.clone(),
        }
    }

    fn inside(&self, path: &Path, canonical: PathBuf) -> Result<PathBuf, FsError> {
        if canonical.starts_with(&self.path) {
            Ok(canonical)
        } else {
            Err(self.outside(path))
        }
    }

    /// The steps from the root to `path` (given relative to the root, or
    /// absolute).
    fn steps(&self, path: &Path) -> Result<VecDeque<Part>, FsError> {
        if !path.is_absolute() {
            return Ok(parts(path));
        }
        if let Ok(below) = path.strip_prefix(&self.path) {
            return Ok(parts(below));
        }
        if let Ok(below) = lexical(path).strip_prefix(&self.path) {
            return Ok(parts(below));
        }
        // The root reached by another name (a link to it, say).
        match path.canonicalize() {
            Ok(real) => match real.strip_prefix(&self.path) {
                Ok(below) => Ok(parts(below)),
                Err(_) => Err(self.outside(path)),
            },
            Err(_) => Err(self.outside(path)),
        }
    }

    /// The regular file `path` names, opened for `walk`.
    fn open(&self, path: &Path, walk: Walk) -> Result<File, FsError> {
        self.walk(path, walk)?
            .file
            .ok_or_else(|| FsError::NotRegular {
                path: path.to_path_buf(),
                kind: "a directory",
            })
    }

    /// The canonical path of an existing file inside the root.
    pub fn resolve_existing(&self, path: &Path) -> Result<PathBuf, FsError> {
        let abs = self.absolute(path);
        let canonical = abs.canonicalize().map_err(|source| FsError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        self.inside(path, canonical)
    }

    /// Where a write to `path` would land: links followed (a dangling one
    /// too) as far as they exist, the rest as written.
    pub fn resolve_new(&self, path: &Path) -> Result<PathBuf, FsError> {
        let found = self.walk(path, Walk::Probe)?;
        Ok(self.path.join(found.below))
    }

    /// Where a write to `path` would land, refused as [`Root::write`]
    /// refuses it (outside the root, inside a `.git`, under a guarded
    /// folder, asked for and not allowed), for a write someone else makes:
    /// no directory is made.
    pub fn resolve_write(&self, path: &Path) -> Result<PathBuf, FsError> {
        self.guard_named(path)?;
        let found = self.walk(path, Walk::Probe)?;
        let below: Vec<OsString> = found
            .below
            .components()
            .map(|c| c.as_os_str().to_owned())
            .collect();
        self.guard(path, &below)?;
        self.ask(path, &below, true)?;
        Ok(self.path.join(found.below))
    }

    /// `path` relative to the root, if it lies inside it.
    pub fn relative<'a>(&self, path: &'a Path) -> Option<&'a Path> {
        path.strip_prefix(&self.path).ok()
    }

    /// Whether `exclude` keeps `path` from being read: the path as given
    /// (`.` and `..` applied) or, when it exists, where it really leads
    /// (a symlink to an excluded file is excluded too).
    pub fn excluded(&self, path: &Path, exclude: &Exclude) -> bool {
        let literal = lexical(&self.absolute(path));
        let real = self.absolute(path).canonicalize().ok();
        [Some(literal), real]
            .iter()
            .flatten()
            .any(|p| self.relative(p).is_some_and(|rel| exclude.matches(rel)))
    }

    /// Refuses `path` when `exclude` keeps it from being read.
    pub fn check(&self, path: &Path, exclude: Option<&Exclude>) -> Result<(), FsError> {
        match exclude {
            Some(exclude) if self.excluded(path, exclude) => Err(FsError::Excluded {
                path: path.to_path_buf(),
                pattern: exclude.pattern().to_string(),
            }),
            _ => Ok(()),
        }
    }

    /// Reads a text file; `line` (1-based) and `limit` select lines. A file
    /// over the read limit is refused, not read.
    pub fn read(
        &self,
        path: &Path,
        line: Option<u32>,
        limit: Option<u32>,
    ) -> Result<String, FsError> {
        let io = |source| FsError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = self.open(path, Walk::Read)?;
        let too_big = |size| FsError::TooBig {
            path: path.to_path_buf(),
            size,
            limit: self.max_read,
        };
        let size = file.metadata().map_err(io)?.len();
        if size > self.max_read {
            return Err(too_big(size));
        }
        let mut bytes = Vec::with_capacity(size as usize);
        file.take(self.max_read + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        if bytes.len() as u64 > self.max_read {
            return Err(too_big(bytes.len() as u64));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            io(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
            ))
        })?;
        if line.is_none() && limit.is_none() {
            return Ok(text);
        }
        let skip = line.map_or(0, |l| l.saturating_sub(1) as usize);
        let take = limit.map_or(usize::MAX, |l| l as usize);
        Ok(text.split_inclusive('\n').skip(skip).take(take).collect())
    }

    /// Writes a text file, creating missing directories inside the root.
    /// The path is walked as for a read (no final link followed out; only
    /// a regular file is replaced); the content goes to a new file in the
    /// same directory, which is then renamed over the target: atomic, so a
    /// reader sees the old content or the new, never part of it, and a
    /// hard link to a file elsewhere is replaced, never written through.
    /// The target's permission bits are kept.
    pub fn write(&self, path: &Path, content: &str) -> Result<(), FsError> {
        use std::os::unix::fs::PermissionsExt;
        let io = |source| FsError::Io {
            path: path.to_path_buf(),
            source,
        };
        self.guard_named(path)?;
        self.ask_first(path)?;
        let found = self.walk(path, Walk::Write)?;
        let Some((dir, name)) = found.parent else {
            return Err(FsError::NotRegular {
                path: path.to_path_buf(),
                kind: "a directory",
            });
        };
        let mode = match &found.file {
            Some(file) => Some(file.metadata().map_err(io)?.permissions().mode() & 0o7777),
            None => None,
        };
        drop(found.file);
        let (temp, mut file) = temp_file(&dir, &name).map_err(io)?;
        let written = (|| {
            file.write_all(content.as_bytes())?;
            if let Some(mode) = mode {
                file.set_permissions(std::fs::Permissions::from_mode(mode))?;
            }
            file.sync_all()?;
            nix::fcntl::renameat(&dir, temp.as_os_str(), &dir, name.as_os_str())?;
            Ok(())
        })();
        if written.is_err() {
            let _ = nix::unistd::unlinkat(
                &dir,
                temp.as_os_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
        written.map_err(io)
    }
}

/// A new file beside `name` in `dir`, created exclusively (never an
/// existing file or link): its name there and the file.
fn temp_file(dir: &OwnedFd, name: &std::ffi::OsStr) -> io::Result<(OsString, File)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    loop {
        let mut temp = OsString::from(".");
        temp.push(name);
        temp.push(format!(
            ".quorum-{}-{}.tmp",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        ));
        match openat(
            dir,
            temp.as_os_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o666),
        ) {
            Ok(fd) => return Ok((temp, File::from(fd))),
            Err(Errno::EEXIST) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, tempfile::TempDir, Root) {
        let root_dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(root_dir.path().join("in.txt"), "one\ntwo\nthree\n").unwrap();
        std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
        let root = Root::new(root_dir.path()).unwrap();
        (root_dir, outside, root)
    }

    /// A repository's machinery is never written: nothing inside a `.git`
    /// (by any name a link gives it, in any case), a worktree's `.git`
    /// file, or a guarded hooks folder; no directory is made on the way;
    /// the refusal names the path and why. Its neighbours are written.
    #[test]
    fn the_repository_machinery_is_never_written() {
        let (dir, _o, root) = setup();
        let d = dir.path();
        std::fs::create_dir_all(d.join(".git/hooks")).unwrap();
        std::fs::write(d.join(".git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(d.join("wt")).unwrap();
        std::fs::write(d.join("wt/.git"), "gitdir: /elsewhere\n").unwrap();
        std::fs::create_dir_all(d.join(".husky")).unwrap();
        std::os::unix::fs::symlink(".git", d.join("machinery")).unwrap();
        std::os::unix::fs::symlink(d.join(".husky"), d.join("hooks-link")).unwrap();
        let root = root.guarding([d.join(".husky"), PathBuf::from("/elsewhere/hooks")]);
        for path in [
            ".git/config",
            ".git/hooks/pre-commit",
            ".git/hooks/new/dir/x",
            "sub/.GIT/config",
            "machinery/config",
            "wt/.git",
            ".husky/pre-commit",
            "hooks-link/pre-commit",
        ] {
            let e = root.write(Path::new(path), "evil").unwrap_err();
            assert!(matches!(e, FsError::Protected { .. }), "{path}: {e}");
            let text = e.to_string();
            assert!(text.starts_with(&format!("{path}: refused: ")), "{text}");
            assert!(
                text.contains(".git, whose config and hooks git runs")
                    || text.contains(".husky, the repository's core.hooksPath"),
                "{text}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(d.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert!(!d.join(".git/hooks/pre-commit").exists());
        assert!(!d.join(".git/hooks/new").exists(), "no directory was made");
        assert!(!d.join("sub").exists(), "no directory was made");
        assert_eq!(
            std::fs::read_to_string(d.join("wt/.git")).unwrap(),
            "gitdir: /elsewhere\n"
        );
        assert!(!d.join(".husky/pre-commit").exists());
        // Beside them, writing works as ever.
        root.write(Path::new(".github/ci.yml"), "ok").unwrap();
        root.write(Path::new("src/.gitignore"), "ok").unwrap();
        root.write(Path::new("husky.txt"), "ok").unwrap();
    }

    /// What the root asks for is refused, naming where the write lands,
    /// until that very path is allowed; nothing is made on the way, and an
    /// allowed path allows no other.
    #[test]
    fn what_is_asked_for_is_written_only_once_allowed() {
        let (dir, _o, root) = setup();
        let d = dir.path();
        let root = root.asking(Some(Asking(Arc::new(|below: &Path| {
            (below.starts_with(".claude") || below == Path::new(".envrc"))
                .then_some("another program runs it")
        }))));
        std::os::unix::fs::symlink(".envrc", d.join("innocent")).unwrap();
        for (path, lands) in [
            (".claude/settings.json", ".claude/settings.json"),
            ("innocent", ".envrc"),
            (".envrc", ".envrc"),
        ] {
            let e = root.write(Path::new(path), "x").unwrap_err();
            let FsError::Unasked { below, why, .. } = &e else {
                panic!("{path}: {e}")
            };
            assert_eq!(below, Path::new(lands), "{path}");
            assert_eq!(*why, "another program runs it");
            assert!(
                e.to_string().starts_with(&format!(
                    "{path}: refused: another program runs it; in your own tree an agent writes it only once you allow it"
                )),
                "{e}"
            );
            let e = root.resolve_write(Path::new(path)).unwrap_err();
            assert!(matches!(e, FsError::Unasked { .. }), "{e}");
        }
        assert!(!d.join(".claude").exists(), "no directory was made");
        assert!(!d.join(".envrc").exists());
        let allowed = root.with_consent(Path::new(".claude/settings.json"));
        allowed
            .write(Path::new(".claude/settings.json"), "{}")
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join(".claude/settings.json")).unwrap(),
            "{}"
        );
        for other in [".claude/commands/x.md", ".envrc", "innocent"] {
            let e = allowed.write(Path::new(other), "x").unwrap_err();
            assert!(matches!(e, FsError::Unasked { .. }), "{other}: {e}");
        }
        root.with_consent(Path::new(".envrc"))
            .write(Path::new("innocent"), "through the link")
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join(".envrc")).unwrap(),
            "through the link"
        );
        // What is never written stays refused, allowed or not.
        let hooks = Path::new(".claude/hooks/pre");
        let e = root
            .clone()
            .guarding([root.path().join(".claude/hooks")])
            .with_consent(hooks)
            .write(hooks, "x")
            .unwrap_err();
        assert!(matches!(e, FsError::Protected { .. }), "{e}");
        // Beside them, nothing is asked.
        root.write(Path::new("src/main.rs"), "ok").unwrap();
    }

    #[test]
    fn reads_inside_with_line_ranges() {
        let (dir, _o, root) = setup();
        assert_eq!(
            root.read(&dir.path().join("in.txt"), None, None).unwrap(),
            "one\ntwo\nthree\n"
        );
        assert_eq!(
            root.read(Path::new("in.txt"), Some(2), Some(1)).unwrap(),
            "two\n"
        );
    }

    #[test]
    fn refuses_dotdot_and_absolute_paths_outside() {
        let (dir, outside, root) = setup();
        let secret = outside.path().join("secret.txt");
        assert!(matches!(
            root.read(&secret, None, None),
            Err(FsError::Outside { .. })
        ));
        let sneaky = dir
            .path()
            .join("..")
            .join(outside.path().file_name().unwrap())
            .join("secret.txt");
        assert!(matches!(
            root.read(&sneaky, None, None),
            Err(FsError::Outside { .. })
        ));
        assert!(matches!(
            root.write(&secret, "x"),
            Err(FsError::Outside { .. })
        ));
        assert!(matches!(
            root.write(&dir.path().join("new/../../escape.txt"), "x"),
            Err(FsError::Outside { .. })
        ));
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret");
    }

    #[cfg(unix)]
    #[test]
    fn refuses_symlinks_pointing_out() {
        let (dir, outside, root) = setup();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(outside.path(), &link).unwrap();
        assert!(matches!(
            root.read(&link.join("secret.txt"), None, None),
            Err(FsError::Outside { .. })
        ));
        assert!(matches!(
            root.write(&link.join("planted.txt"), "x"),
            Err(FsError::Outside { .. })
        ));
        assert!(!outside.path().join("planted.txt").exists());
        let file_link = dir.path().join("file-link");
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), &file_link).unwrap();
        assert!(matches!(
            root.write(&file_link, "x"),
            Err(FsError::Outside { .. })
        ));
        assert_eq!(
            std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
            "secret"
        );
    }

    #[test]
    fn dotdot_through_existing_directories_is_resolved() {
        let (dir, _o, root) = setup();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        root.write(&dir.path().join("sub/../via-dotdot.txt"), "ok")
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("via-dotdot.txt")).unwrap(),
            "ok"
        );
        // Through a directory that does not exist: refused, nothing written.
        let escape = dir.path().join("missing/../../escape.txt");
        assert!(matches!(
            root.write(&escape, "x"),
            Err(FsError::Outside { .. })
        ));
        let inside = dir.path().join("missing/../still-inside.txt");
        assert!(matches!(root.write(&inside, "x"), Err(FsError::Io { .. })));
        assert!(!dir.path().parent().unwrap().join("escape.txt").exists());
    }

    #[test]
    fn excluded_paths_are_refused_by_name_and_through_symlinks() {
        let (dir, _o, root) = setup();
        std::fs::create_dir(dir.path().join("keys")).unwrap();
        std::fs::write(dir.path().join("keys/secret.pem"), "k").unwrap();
        let exclude = Exclude::new(r"^keys/|\.env$").unwrap();
        assert!(root.excluded(Path::new("keys/secret.pem"), &exclude));
        assert!(root.excluded(&dir.path().join("keys/../keys/secret.pem"), &exclude));
        assert!(
            root.excluded(Path::new(".env"), &exclude),
            "missing files too"
        );
        assert!(!root.excluded(Path::new("in.txt"), &exclude));
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.path().join("keys/secret.pem"), dir.path().join("x"))
                .unwrap();
            assert!(root.excluded(Path::new("x"), &exclude), "a symlink to it");
        }
        let e = root
            .check(Path::new("keys/secret.pem"), Some(&exclude))
            .unwrap_err();
        assert!(
            e.to_string()
                .contains(r#"exclude_files_pattern "^keys/|\\.env$""#),
            "{e}"
        );
        assert!(root.check(Path::new("in.txt"), Some(&exclude)).is_ok());
        assert!(root.check(Path::new("keys/secret.pem"), None).is_ok());
        let bad = Exclude::new("(unclosed").unwrap_err();
        assert!(bad.contains("exclude_files_pattern \"(unclosed\""), "{bad}");
    }

    #[test]
    fn writes_inside_creating_directories() {
        let (dir, _o, root) = setup();
        root.write(&dir.path().join("a/b/c.txt"), "hi").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
            "hi"
        );
    }

    /// A file inside that is a hard link to a file outside is replaced,
    /// never written through: the outside file keeps its content; the
    /// target keeps its permission bits.
    #[test]
    fn a_write_replaces_a_hard_link_and_never_writes_through_it() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, outside, root) = setup();
        let secret = outside.path().join("secret.txt");
        std::fs::hard_link(&secret, dir.path().join("linked.txt")).unwrap();
        std::fs::set_permissions(
            dir.path().join("linked.txt"),
            std::fs::Permissions::from_mode(0o640),
        )
        .unwrap();
        root.write(Path::new("linked.txt"), "replaced").unwrap();
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("linked.txt")).unwrap(),
            "replaced"
        );
        let mode = std::fs::metadata(dir.path().join("linked.txt"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o640);
        // No temporary file is left beside it.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    /// A reader sees the old content or the new, whole, never a part.
    #[test]
    fn a_reader_never_sees_a_partial_write() {
        let (dir, _o, root) = setup();
        let size = 1 << 20;
        let contents = ["a".repeat(size), "b".repeat(size)];
        root.write(Path::new("big.txt"), &contents[0]).unwrap();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (done, path) = (done.clone(), dir.path().join("big.txt"));
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    let text = std::fs::read_to_string(&path).unwrap();
                    let whole = text.len() == size
                        && (text.bytes().all(|b| b == b'a') || text.bytes().all(|b| b == b'b'));
                    if !whole {
                        seen.push(text.len());
                    }
                }
                seen
            })
        };
        for i in 0..200 {
            root.write(Path::new("big.txt"), &contents[i % 2]).unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        let partial = reader.join().unwrap();
        assert!(partial.is_empty(), "partial reads of sizes {partial:?}");
    }

    #[test]
    fn dangling_links_are_resolved_before_a_write() {
        let (dir, outside, root) = setup();
        let target = outside.path().join("new.txt");
        std::os::unix::fs::symlink(&target, dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink("../../x", dir.path().join("up")).unwrap();
        for name in ["out", "up"] {
            assert!(
                matches!(
                    root.write(Path::new(name), "x"),
                    Err(FsError::Outside { .. })
                ),
                "{name}"
            );
            assert!(matches!(
                root.resolve_new(Path::new(name)),
                Err(FsError::Outside { .. })
            ));
        }
        assert!(!target.exists());
        // A link to a directory inside, then a relative link back out of it.
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::os::unix::fs::symlink("d", dir.path().join("dlink")).unwrap();
        root.write(Path::new("dlink/f.txt"), "via link").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("d/f.txt")).unwrap(),
            "via link"
        );
        // A loop of links is an error, not a hang.
        std::os::unix::fs::symlink("loop2", dir.path().join("loop1")).unwrap();
        std::os::unix::fs::symlink("loop1", dir.path().join("loop2")).unwrap();
        assert!(matches!(
            root.read(Path::new("loop1"), None, None),
            Err(FsError::Io { .. })
        ));
    }

    #[test]
    fn only_regular_files_within_the_limit_are_read() {
        let (dir, _o, root) = setup();
        nix::unistd::mkfifo(&dir.path().join("fifo"), Mode::S_IRWXU).unwrap();
        let e = root.read(Path::new("fifo"), None, None).unwrap_err();
        assert!(
            matches!(e, FsError::NotRegular { kind: "a FIFO", .. }),
            "{e}"
        );
        let e = root.read(Path::new("."), None, None).unwrap_err();
        assert!(matches!(e, FsError::NotRegular { .. }), "{e}");
        let small = root.clone().with_max_read(5);
        let e = small.read(Path::new("in.txt"), None, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "in.txt: 14 bytes, over the read limit of 5 bytes (max_read_bytes under [limits] in the config)"
        );
        std::fs::write(dir.path().join("bin"), b"a\xffb").unwrap();
        let e = root.read(Path::new("bin"), None, None).unwrap_err();
        assert!(e.to_string().contains("not UTF-8 text (byte 1)"), "{e}");
    }

    #[test]
    fn a_directory_swapped_for_a_link_is_not_followed_out() {
        // Each walk opens every component anew with O_NOFOLLOW: a directory
        // replaced by a link to the outside since the last call is seen.
        let (dir, outside, root) = setup();
        std::fs::create_dir(dir.path().join("work")).unwrap();
        root.write(Path::new("work/a.txt"), "one").unwrap();
        std::fs::remove_dir_all(dir.path().join("work")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("work")).unwrap();
        assert!(matches!(
            root.write(Path::new("work/a.txt"), "two"),
            Err(FsError::Outside { .. })
        ));
        assert!(!outside.path().join("a.txt").exists());
    }

    /// A path of 3,000 components (an agent's `fs/write_text_file`) used to
    /// make 3,000 nested folders, holding a descriptor for each while it
    /// walked them. It is refused, naming the limit, and nothing is made.
    #[test]
    fn a_path_deeper_than_the_limit_is_refused_and_nothing_is_made() {
        let (dir, _o, root) = setup();
        let deep: PathBuf = std::iter::repeat_n("a", 3000).chain(["x.txt"]).collect();
        let said = format!(
            "{}: refused: a path of 3001 components; quorum walks at most {MAX_DEPTH}",
            deep.display()
        );
        let e = root.write(&deep, "x").unwrap_err();
        assert_eq!(e.to_string(), said);
        assert!(!dir.path().join("a").exists());
        for e in [
            root.read(&deep, None, None).unwrap_err(),
            root.resolve_new(&deep).unwrap_err(),
        ] {
            assert_eq!(e.to_string(), said);
        }
        // At the limit it is walked (and made).
        let most: PathBuf = std::iter::repeat_n("a", MAX_DEPTH - 1)
            .chain(["x.txt"])
            .collect();
        root.write(&most, "deep").unwrap();
        assert_eq!(root.read(&most, None, None).unwrap(), "deep");
    }

    /// A walk holds a few descriptors however deep it goes: in a process
    /// allowed 40 (`ulimit -n 40`), a file 200 folders deep is written and
    /// read, and `..` climbs back up past the folders it let go of (which
    /// it opens again from the root). Each folder's descriptor used to
    /// stay open until the walk ended.
    #[test]
    fn a_deep_walk_holds_a_few_descriptors() {
        const CHILD: &str = "QUORUM_TEST_FEW_DESCRIPTORS";
        let deep: PathBuf = std::iter::repeat_n("d", 200).chain(["f.txt"]).collect();
        if let Some(dir) = std::env::var_os(CHILD) {
            // Here in a process of its own, with few descriptors.
            let root = Root::new(Path::new(&dir)).unwrap();
            root.write(&deep, "deep").unwrap();
            assert_eq!(root.read(&deep, None, None).unwrap(), "deep");
            let mut back: PathBuf = std::iter::repeat_n("d", 60).collect();
            for _ in 0..50 {
                back.push("..");
            }
            back.push("up.txt");
            root.write(&back, "up").unwrap();
            let up: PathBuf = std::iter::repeat_n("d", 10).chain(["up.txt"]).collect();
            assert_eq!(root.read(&up, None, None).unwrap(), "up");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("sh")
            .args(["-c", "ulimit -n 40 && exec \"$0\" \"$@\""])
            .arg(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "confine::fsroot::tests::a_deep_walk_holds_a_few_descriptors",
                "--test-threads=1",
            ])
            .env(CHILD, dir.path())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{said}");
        assert!(said.contains("1 passed"), "the child ran it: {said}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(&deep)).unwrap(),
            "deep"
        );
    }
}
