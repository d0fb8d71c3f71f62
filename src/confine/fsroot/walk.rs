//! The walk from a root's descriptor to a path below it: one `openat` with
//! `O_NOFOLLOW` per component, links read and followed here, and only
//! inside the root.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat, readlinkat};
use nix::sys::stat::{Mode, mkdirat};

use super::{
    Found, FsError, MAX_DEPTH, MAX_LINKS, OPEN_DIRS, Part, Root, Walk, as_written, kind, lexical,
    parts,
};

impl Root {
    /// Walks `path` from the root descriptor, one `openat` with
    /// `O_NOFOLLOW` per component, following links here and only inside.
    /// A path of more than [`MAX_DEPTH`] components, or one that leads
    /// deeper, is refused; at most [`OPEN_DIRS`] folders on the way are
    /// held open at once.
    pub(super) fn walk(&self, path: &Path, walk: Walk) -> Result<Found, FsError> {
        let todo = self.steps(path)?;
        if todo.len() > MAX_DEPTH {
            return Err(self.too_deep(path, todo.len()));
        }
        let mut walker = Walker {
            root: self,
            path,
            walk,
            todo,
            dirs: VecDeque::new(),
            names: Vec::new(),
            links: 0,
        };
        while let Some(part) = walker.todo.pop_front() {
            match part {
                Part::Up => walker.up()?,
                Part::Name(name) => {
                    if let Some(found) = walker.step(name)? {
                        return Ok(found);
                    }
                }
            }
        }
        walker.at_root()
    }

    /// The descriptors of the nearest [`OPEN_DIRS`] folders of `names`
    /// (a path below the root that a walk went down), opened again from
    /// the root, each with `O_NOFOLLOW`: a folder swapped for a link since
    /// is not followed.
    fn reopen(&self, path: &Path, names: &[OsString]) -> Result<VecDeque<OwnedFd>, FsError> {
        let mut dirs: VecDeque<OwnedFd> = VecDeque::new();
        for name in names {
            let here = dirs.back().map_or(self.dir.as_fd(), |d| d.as_fd());
            let fd = openat(
                here,
                name.as_os_str(),
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| FsError::Io {
                path: path.to_path_buf(),
                source: io::Error::new(
                    io::Error::from(e).kind(),
                    format!("a folder on the way changed while it was walked ({e})"),
                ),
            })?;
            if dirs.len() == OPEN_DIRS {
                dirs.pop_front();
            }
            dirs.push_back(fd);
        }
        Ok(dirs)
    }

    fn too_deep(&self, path: &Path, parts: usize) -> FsError {
        FsError::TooDeep {
            path: path.to_path_buf(),
            parts,
            limit: MAX_DEPTH,
        }
    }
}

/// Flags to open a step's file with.
const FILE: OFlag = OFlag::O_RDONLY
    .union(OFlag::O_NOFOLLOW)
    .union(OFlag::O_NONBLOCK)
    .union(OFlag::O_NOCTTY)
    .union(OFlag::O_CLOEXEC);

/// One walk under way.
struct Walker<'a> {
    root: &'a Root,
    /// The path as it was asked for (for errors).
    path: &'a Path,
    walk: Walk,
    /// The steps still to take.
    todo: VecDeque<Part>,
    /// The nearest folders on the way (`names`' last ones), open.
    dirs: VecDeque<OwnedFd>,
    /// The path below the root so far.
    names: Vec<OsString>,
    /// How many links it followed.
    links: usize,
}

/// What opening one step came to.
enum Opened {
    /// The step's descriptor, or why `openat` refused it.
    Fd(nix::Result<OwnedFd>),
    /// A probe's last step names nothing that is a link: the walk ends.
    Probed,
    /// A probe's folder on the way does not exist: the rest is read as
    /// written.
    Missing,
    /// A write's last step names a new file, written beside in this
    /// folder, then named.
    New(OwnedFd),
}

impl Walker<'_> {
    fn io(&self, source: io::Error) -> FsError {
        FsError::Io {
            path: self.path.to_path_buf(),
            source,
        }
    }

    /// The folder the next step is in.
    fn here(&self) -> BorrowedFd<'_> {
        self.dirs
            .back()
            .map_or(self.root.dir.as_fd(), |d| d.as_fd())
    }

    /// Where the walk got to, as it ends with `file` (and `parent`).
    fn found(&self, file: Option<File>, parent: Option<(OwnedFd, OsString)>) -> Found {
        Found {
            below: self.names.iter().collect(),
            file,
            parent,
        }
    }

    /// `..`: a folder up, never above the root.
    fn up(&mut self) -> Result<(), FsError> {
        if self.names.pop().is_none() {
            return Err(self.root.outside(self.path));
        }
        self.dirs.pop_back();
        if self.dirs.is_empty() && !self.names.is_empty() {
            self.dirs = self.root.reopen(self.path, &self.names)?;
        }
        Ok(())
    }

    /// A step into `name`: where the walk ends, or `None` to go on.
    fn step(&mut self, name: OsString) -> Result<Option<Found>, FsError> {
        if self.names.len() >= MAX_DEPTH {
            let parts = self.names.len() + 1 + self.todo.len();
            return Err(self.root.too_deep(self.path, parts));
        }
        let last = self.todo.is_empty();
        if self.walk == Walk::Write {
            // Checked at every step, before a directory is made: where
            // a link leads is checked as it is followed.
            let mut next = self.names.clone();
            next.push(name.clone());
            self.root.guard(self.path, &next)?;
            self.root.ask(self.path, &next, last)?;
        }
        let opened = match (last, self.walk) {
            (true, Walk::Probe) => match readlinkat(self.here(), name.as_os_str()) {
                Ok(_) => Opened::Fd(Err(Errno::ELOOP)),
                Err(_) => Opened::Probed,
            },
            (true, Walk::Read) => Opened::Fd(self.open_file(&name)),
            (true, Walk::Write) => match self.open_file(&name) {
                Err(Errno::ENOENT) => {
                    Opened::New(self.here().try_clone_to_owned().map_err(|e| self.io(e))?)
                }
                other => Opened::Fd(other),
            },
            (false, _) => self.open_dir(&name)?,
        };
        let fd = match opened {
            Opened::Fd(fd) => fd,
            Opened::Probed => {
                self.names.push(name);
                return Ok(Some(self.found(None, None)));
            }
            Opened::Missing => {
                self.names.push(name);
                let names = std::mem::take(&mut self.names);
                let Some(names) = as_written(names, &self.todo) else {
                    return Err(self.root.outside(self.path));
                };
                self.names = names;
                return Ok(Some(self.found(None, None)));
            }
            Opened::New(parent) => {
                self.names.push(name.clone());
                return Ok(Some(self.found(None, Some((parent, name)))));
            }
        };
        match fd {
            Ok(fd) if last => self.file(fd, name).map(Some),
            Ok(fd) => {
                if self.dirs.len() == OPEN_DIRS {
                    self.dirs.pop_front();
                }
                self.dirs.push_back(fd);
                self.names.push(name);
                Ok(None)
            }
            // A link (O_NOFOLLOW refused it), or a file where a
            // directory was wanted.
            Err(Errno::ELOOP | Errno::ENOTDIR) => self.follow(&name).map(|()| None),
            Err(Errno::ENXIO) => Err(FsError::NotRegular {
                path: self.path.to_path_buf(),
                kind: "a FIFO or socket",
            }),
            Err(e) => Err(self.io(e.into())),
        }
    }

    /// The last step, a file, opened (never through a link).
    fn open_file(&self, name: &OsStr) -> nix::Result<OwnedFd> {
        openat(self.here(), name, FILE, Mode::empty())
    }

    /// A folder on the way, opened (never through a link); a write makes
    /// it when it does not exist.
    fn open_dir(&self, name: &OsStr) -> Result<Opened, FsError> {
        let here = self.here();
        let dir = || {
            openat(
                here,
                name,
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
        };
        let opened = match dir() {
            Err(Errno::ENOENT) if self.walk == Walk::Probe => return Ok(Opened::Missing),
            Err(Errno::ENOENT) if self.walk == Walk::Write => {
                if self.todo.iter().any(|p| matches!(p, Part::Up)) {
                    // `..` through a directory that does not exist:
                    // refused. Say "outside" when the path, read as
                    // written, leaves the root.
                    let mut with_name = self.names.clone();
                    with_name.push(name.to_owned());
                    if as_written(with_name, &self.todo).is_none() {
                        return Err(self.root.outside(self.path));
                    }
                    return Err(self.io(io::Error::new(
                        io::ErrorKind::NotFound,
                        "a directory on the way does not exist",
                    )));
                }
                match mkdirat(here, name, Mode::from_bits_truncate(0o777)) {
                    Ok(()) | Err(Errno::EEXIST) => dir(),
                    Err(e) => Err(e),
                }
            }
            other => other,
        };
        Ok(Opened::Fd(opened))
    }

    /// The walk ends at `name`, opened as `fd`: a regular file, or an
    /// error.
    fn file(&mut self, fd: OwnedFd, name: OsString) -> Result<Found, FsError> {
        let file = File::from(fd);
        let meta = file.metadata().map_err(|e| self.io(e))?;
        if !meta.is_file() {
            return Err(FsError::NotRegular {
                path: self.path.to_path_buf(),
                kind: kind(meta.file_type()),
            });
        }
        let parent = match self.walk {
            Walk::Write => Some((
                self.here().try_clone_to_owned().map_err(|e| self.io(e))?,
                name.clone(),
            )),
            _ => None,
        };
        self.names.push(name);
        Ok(self.found(Some(file), parent))
    }

    /// Follows the link `name` (one more), its target's steps before the
    /// rest; a file where a folder was wanted is refused.
    fn follow(&mut self, name: &OsStr) -> Result<(), FsError> {
        let Ok(target) = readlinkat(self.here(), name) else {
            return Err(self.io(io::Error::from(Errno::ENOTDIR)));
        };
        self.links += 1;
        if self.links > MAX_LINKS {
            return Err(self.io(io::Error::from(Errno::ELOOP)));
        }
        let target = PathBuf::from(target);
        let mut next = if target.is_absolute() {
            let Ok(below) = lexical(&target).strip_prefix(&self.root.path).map(parts) else {
                return Err(self.root.outside(self.path));
            };
            self.dirs.clear();
            self.names.clear();
            below
        } else {
            parts(&target)
        };
        next.extend(std::mem::take(&mut self.todo));
        self.todo = next;
        Ok(())
    }

    /// The walk ended at the root itself: a probe's answer, or no file.
    fn at_root(&self) -> Result<Found, FsError> {
        match self.walk {
            Walk::Probe => Ok(self.found(None, None)),
            _ => Err(FsError::NotRegular {
                path: self.path.to_path_buf(),
                kind: "a directory",
            }),
        }
    }
}
