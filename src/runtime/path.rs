//! Where a command is found: a path as given, or the first executable of
//! that name on `PATH`, looked up once per process. Only absolute `PATH`
//! entries count: an empty or relative one (`::`, `.`, `bin`) names the
//! current directory, where an agent's `./git` or `./bwrap` would win.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Where `command` is: itself if it is a path, else the first executable
/// of that name in `PATH`. Looked up once per process for each command.
pub fn locate(command: &str) -> Option<PathBuf> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<PathBuf>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(command)
    {
        return hit.clone();
    }
    let found = search_path(command, std::env::var_os("PATH").as_deref());
    cache
        .lock()
        .expect("not poisoned")
        .insert(command.to_string(), found.clone());
    found
}

fn search_path(command: &str, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    if command.contains('/') {
        let p = PathBuf::from(command);
        return is_executable(&p).then_some(p);
    }
    std::env::split_paths(path?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(command))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_search_finds_executables_only() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("agent-x");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        let plain = dir.path().join("not-exec");
        std::fs::write(&plain, "").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = std::env::join_paths([Path::new("/nonexistent"), dir.path()]).unwrap();
        assert_eq!(search_path("agent-x", Some(&path)), Some(exe));
        assert_eq!(search_path("not-exec", Some(&path)), None);
        assert_eq!(search_path("missing", Some(&path)), None);
    }

    /// A relative (or empty) `PATH` entry names a place relative to the
    /// current directory, which an agent may write: a program planted there
    /// is never found through it.
    #[test]
    fn relative_and_empty_path_entries_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("git");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        // The planted directory, relative to the current one.
        let cwd = std::env::current_dir().unwrap();
        let mut rel = PathBuf::new();
        for _ in cwd.components().skip(1) {
            rel.push("..");
        }
        rel.push(dir.path().strip_prefix("/").unwrap());
        assert!(
            is_executable(&rel.join("git")),
            "the relative entry leads to it"
        );
        let path = std::env::join_paths([rel.as_path(), Path::new(""), Path::new("/nonexistent")])
            .unwrap();
        assert_eq!(search_path("git", Some(&path)), None);
        let abs = std::env::join_paths([dir.path()]).unwrap();
        assert_eq!(search_path("git", Some(&abs)), Some(exe));
    }
}
