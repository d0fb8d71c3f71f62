//! File access for agents, confined to the session's directory.
//!
//! Paths are made canonical (symlinks resolved, `..` gone) before they are
//! compared with the root, so neither `../x` nor a symlink pointing out of
//! the directory reaches outside it.

use std::path::{Component, Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("{path}: outside the session directory {root}")]
    Outside { path: PathBuf, root: PathBuf },
    #[error(
        "{path}: refused: the path matches this task's exclude_files_pattern {pattern:?}, so it may not be read"
    )]
    Excluded { path: PathBuf, pattern: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// `path` with `.` and `..` applied to its text alone (no symlinks).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
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

/// The directory an agent may read and write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root(PathBuf);

impl Root {
    pub fn new(dir: &Path) -> std::io::Result<Self> {
        Ok(Self(dir.canonicalize()?))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    fn absolute(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.0.join(path)
        }
    }

    fn inside(&self, path: &Path, canonical: PathBuf) -> Result<PathBuf, FsError> {
        if canonical.starts_with(&self.0) {
            Ok(canonical)
        } else {
            Err(FsError::Outside {
                path: path.to_path_buf(),
                root: self.0.clone(),
            })
        }
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

    /// Where a write to `path` lands: its nearest existing ancestor made
    /// canonical, with the rest (plain names only) appended.
    pub fn resolve_new(&self, path: &Path) -> Result<PathBuf, FsError> {
        let abs = self.absolute(path);
        let mut existing = abs.as_path();
        let mut rest = Vec::new();
        while !existing.exists() {
            let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
                // `..` through a directory that does not exist: refused. Say
                // "outside" when the path, read literally, leaves the root.
                let inside = lexical(&abs).starts_with(&self.0);
                return Err(if inside {
                    FsError::Io {
                        path: path.to_path_buf(),
                        source: std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            "a directory on the way does not exist",
                        ),
                    }
                } else {
                    FsError::Outside {
                        path: path.to_path_buf(),
                        root: self.0.clone(),
                    }
                });
            };
            rest.push(name.to_owned());
            existing = parent;
        }
        let mut canonical = existing.canonicalize().map_err(|source| FsError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        canonical.extend(rest.iter().rev());
        self.inside(path, canonical)
    }

    /// `path` relative to the root, if it lies inside it.
    pub fn relative<'a>(&self, path: &'a Path) -> Option<&'a Path> {
        path.strip_prefix(&self.0).ok()
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

    /// Reads a text file; `line` (1-based) and `limit` select lines.
    pub fn read(
        &self,
        path: &Path,
        line: Option<u32>,
        limit: Option<u32>,
    ) -> Result<String, FsError> {
        let real = self.resolve_existing(path)?;
        let text = std::fs::read_to_string(&real).map_err(|source| FsError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if line.is_none() && limit.is_none() {
            return Ok(text);
        }
        let skip = line.map_or(0, |l| l.saturating_sub(1) as usize);
        let take = limit.map_or(usize::MAX, |l| l as usize);
        Ok(text.split_inclusive('\n').skip(skip).take(take).collect())
    }

    /// Writes a text file, creating missing directories inside the root.
    pub fn write(&self, path: &Path, content: &str) -> Result<(), FsError> {
        let real = self.resolve_new(path)?;
        let io = |source| FsError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = real.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(&real, content).map_err(io)
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
}
