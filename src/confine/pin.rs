//! A path another program opens for an agent: the editor that runs
//! `quorum acp` and offers its files reads and writes them itself, by path,
//! after quorum has checked the path (`acp::fs`). An agent that can write
//! the session directory (a sandboxed one can) could swap a folder on the
//! way for a link between quorum's check and the editor's open, and have
//! the editor write, or read, outside.
//!
//! So the path handed over is one with no link in it (quorum resolves the
//! links inside the root first), and right before it is handed over each
//! of its parts is opened with `O_PATH | O_NOFOLLOW` from the root's
//! descriptor: a link found then is refused, and the identity (device and
//! inode) of each folder is kept. When the editor has answered, the parts
//! are opened again the same way: a part that became a link, or a folder
//! that was moved or replaced, is reported by [`Pinned::verify`], naming
//! the path and where the link leads, so the agent is refused the answer
//! and the person is told.
//!
//! What remains, and cannot be closed while the editor opens a path by its
//! name (ACP gives it no descriptor): a swap made after the check and
//! undone before the editor has answered is not seen, and a write the
//! editor made through a swapped folder has been made when it is seen. The
//! check after the answer tells the person where it went; it cannot undo it.

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat, readlinkat};
use nix::sys::stat::{Mode, SFlag, fstat};

use super::fsroot::{FsError, Root};

/// What one part of a path is, opened without following it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Folder(Id),
    File { id: Id, regular: bool },
    Link(PathBuf),
}

/// A file's device and inode.
type Id = (u64, u64);

/// A path inside a root, with no link on the way when it was pinned, and
/// what each of its parts that existed then was.
#[derive(Debug)]
pub struct Pinned {
    root: Root,
    /// The root's own identity.
    root_id: Id,
    /// The path as the agent gave it (for messages).
    asked: PathBuf,
    /// The path handed over: inside the root, absolute, no link in it.
    path: PathBuf,
    /// Its names below the root.
    names: Vec<OsString>,
    /// What each existing part was (the first ones; a missing part ends it).
    seen: Vec<Part>,
}

/// A path whose parts changed while another program had it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {what} after quorum checked the path")]
pub struct Changed {
    pub path: PathBuf,
    pub what: String,
}

impl Pinned {
    /// Pins `real`, where `asked` leads inside `root` (as
    /// [`Root::resolve_write`] or [`Root::resolve_new`] found it): refused
    /// when a part of it is a link now, or the file is not a regular file.
    pub fn new(root: &Root, asked: &Path, real: &Path) -> Result<Self, FsError> {
        let io = |source: std::io::Error| FsError::Io {
            path: asked.to_path_buf(),
            source,
        };
        let below = real
            .strip_prefix(root.path())
            .map_err(|_| FsError::Outside {
                path: asked.to_path_buf(),
                root: root.path().to_path_buf(),
            })?;
        let names: Vec<OsString> = below
            .components()
            .map(|c| c.as_os_str().to_owned())
            .collect();
        let root_id = id(root.descriptor()).map_err(|e| io(e.into()))?;
        let seen = parts(root, &names).map_err(|e| io(e.into()))?;
        let last = names.len().saturating_sub(1);
        for (i, part) in seen.iter().enumerate() {
            match part {
                Part::Link(target) => {
                    return Err(FsError::Protected {
                        path: asked.to_path_buf(),
                        why: format!(
                            "{} became a link (to {}) while quorum checked the path",
                            shown(&names[..=i]),
                            target.display()
                        ),
                    });
                }
                Part::Folder(_) if i == last => {
                    return Err(FsError::NotRegular {
                        path: asked.to_path_buf(),
                        kind: "a directory",
                    });
                }
                Part::File { regular, .. } if i == last && !regular => {
                    return Err(FsError::NotRegular {
                        path: asked.to_path_buf(),
                        kind: "not a plain file",
                    });
                }
                Part::File { .. } if i < last => {
                    return Err(io(std::io::Error::from(Errno::ENOTDIR)));
                }
                _ => {}
            }
        }
        Ok(Self {
            root: root.clone(),
            root_id,
            asked: asked.to_path_buf(),
            path: real.to_path_buf(),
            names,
            seen,
        })
    }

    /// The path to hand over.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the path still leads where it did when it was pinned: no
    /// part of it a link, every folder that was there the same folder (the
    /// file itself may be new: editors save by renaming), the session
    /// directory itself still at its path.
    pub fn verify(&self) -> Result<(), Changed> {
        let changed = |what: String| Changed {
            path: self.asked.clone(),
            what,
        };
        let root_now = std::fs::metadata(self.root.path())
            .map(|m| {
                use std::os::unix::fs::MetadataExt;
                (m.dev(), m.ino())
            })
            .ok();
        if root_now != Some(self.root_id) {
            return Err(changed(format!(
                "the session directory {} was moved or replaced",
                self.root.path().display()
            )));
        }
        let now = parts(&self.root, &self.names)
            .map_err(|e| changed(format!("cannot be checked again ({e})")))?;
        for i in 0..self.names.len() {
            let name = shown(&self.names[..=i]);
            match (self.seen.get(i), now.get(i)) {
                (_, Some(Part::Link(target))) => {
                    return Err(changed(format!(
                        "{name} became a link to {}",
                        target.display()
                    )));
                }
                (Some(_), None) => {
                    return Err(changed(format!("{name} was moved or removed")));
                }
                (Some(Part::Folder(before)), Some(Part::Folder(after))) if before != after => {
                    return Err(changed(format!("{name} was replaced by another folder")));
                }
                (Some(Part::Folder(_)), Some(Part::File { .. })) => {
                    return Err(changed(format!("{name} was replaced by a file")));
                }
                (Some(Part::File { .. }), Some(Part::Folder(_))) => {
                    return Err(changed(format!("{name} was replaced by a folder")));
                }
                (_, Some(Part::File { regular: false, .. })) => {
                    return Err(changed(format!("{name} is no longer a plain file")));
                }
                (None, None) => break,
                _ => {}
            }
        }
        Ok(())
    }
}

/// `names` below the root as shown in a message.
fn shown(names: &[OsString]) -> String {
    format!("`{}`", names.iter().collect::<PathBuf>().display())
}

fn id(fd: impl AsFd) -> Result<Id, Errno> {
    let st = fstat(fd)?;
    Ok((st.st_dev, st.st_ino))
}

/// What each part of `names` below `root` is, opened with `O_PATH` and
/// `O_NOFOLLOW` one at a time from the root's descriptor; up to the first
/// that is missing, not a folder, or a link.
fn parts(root: &Root, names: &[OsString]) -> Result<Vec<Part>, Errno> {
    let mut out = Vec::new();
    let mut held: Option<OwnedFd> = None;
    for name in names {
        let here = held.as_ref().map_or(root.descriptor(), |fd| fd.as_fd());
        let fd = match openat(
            here,
            name.as_os_str(),
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => break,
            Err(e) => return Err(e),
        };
        let st = fstat(&fd)?;
        let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        let id = (st.st_dev, st.st_ino);
        if kind == SFlag::S_IFLNK {
            let target = readlinkat(here, name.as_os_str())
                .map(PathBuf::from)
                .unwrap_or_else(|_| PathBuf::from("?"));
            out.push(Part::Link(target));
            break;
        }
        if kind != SFlag::S_IFDIR {
            out.push(Part::File {
                id,
                regular: kind == SFlag::S_IFREG,
            });
            break;
        }
        out.push(Part::Folder(id));
        held = Some(fd);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, tempfile::TempDir, Root) {
        let root_dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root_dir.path().join("sub/deeper")).unwrap();
        std::fs::write(root_dir.path().join("sub/deeper/f.txt"), "x").unwrap();
        let root = Root::new(root_dir.path()).unwrap();
        (root_dir, outside, root)
    }

    fn pin(root: &Root, path: &Path) -> Result<Pinned, FsError> {
        let real = root.resolve_write(path)?;
        Pinned::new(root, path, &real)
    }

    #[test]
    fn an_unchanged_path_stays_pinned_and_new_parts_may_appear() {
        let (_dir, _outside, root) = setup();
        let file = root.path().join("sub/deeper/f.txt");
        let pinned = pin(&root, &file).unwrap();
        assert_eq!(pinned.path(), file);
        // The editor saves by renaming a new file over it.
        std::fs::write(root.path().join("sub/deeper/.f.tmp"), "y").unwrap();
        std::fs::rename(root.path().join("sub/deeper/.f.tmp"), &file).unwrap();
        assert_eq!(pinned.verify(), Ok(()));
        // A new file in a new folder: the editor makes both.
        let new = root.path().join("sub/made/new.txt");
        let pinned = pin(&root, &new).unwrap();
        std::fs::create_dir(root.path().join("sub/made")).unwrap();
        std::fs::write(&new, "z").unwrap();
        assert_eq!(pinned.verify(), Ok(()));
    }

    /// A folder swapped for a link out while the editor had the path: the
    /// check after names the path and where the link leads.
    #[test]
    fn a_folder_swapped_for_a_link_is_named() {
        let (_dir, outside, root) = setup();
        let file = root.path().join("sub/deeper/f.txt");
        let pinned = pin(&root, &file).unwrap();
        std::fs::rename(root.path().join("sub"), root.path().join("sub.old")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("sub")).unwrap();
        let e = pinned.verify().unwrap_err();
        assert_eq!(e.path, file);
        assert_eq!(
            e.to_string(),
            format!(
                "{}: `sub` became a link to {} after quorum checked the path",
                file.display(),
                outside.path().display()
            )
        );
        // Swapped for another folder, or moved away: named too.
        std::fs::remove_file(root.path().join("sub")).unwrap();
        std::fs::create_dir_all(root.path().join("sub/deeper")).unwrap();
        assert_eq!(
            pinned.verify().unwrap_err().what,
            "`sub` was replaced by another folder"
        );
        std::fs::remove_dir_all(root.path().join("sub")).unwrap();
        assert_eq!(
            pinned.verify().unwrap_err().what,
            "`sub` was moved or removed"
        );
        // The file itself made a link: named.
        std::fs::rename(root.path().join("sub.old"), root.path().join("sub")).unwrap();
        assert_eq!(pinned.verify(), Ok(()));
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(outside.path().join("x"), &file).unwrap();
        assert_eq!(
            pinned.verify().unwrap_err().what,
            format!(
                "`sub/deeper/f.txt` became a link to {}",
                outside.path().join("x").display()
            )
        );
    }

    /// A link on the way when the path is pinned (it appeared after the
    /// path was resolved) is refused, naming the path.
    #[test]
    fn a_link_found_when_pinning_is_refused() {
        let (_dir, outside, root) = setup();
        let file = root.path().join("sub/deeper/f.txt");
        let real = root.resolve_write(&file).unwrap();
        std::fs::rename(root.path().join("sub"), root.path().join("sub.old")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("sub")).unwrap();
        let e = Pinned::new(&root, &file, &real).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: refused: `sub` became a link (to {}) while quorum checked the path",
                file.display(),
                outside.path().display()
            )
        );
    }
}
