//! Where a command is found: a path as given, or the first executable of
//! that name on `PATH`, looked up once per process. Only absolute `PATH`
//! entries count: an empty or relative one (`::`, `.`, `bin`) names the
//! current directory, where an agent's `./git` or `./bwrap` would win.
//!
//! Nor does a `PATH` folder inside a session directory (any directory quorum
//! made a session's or a task's root of in this process, [`session_dir`]:
//! the one it was started in, a host's `cwd`, a worktree), nor a program
//! whose real file lies in one: agents write there (direnv's `layout node`
//! puts the project's `node_modules/.bin` on `PATH`, where an agent could
//! plant a `claude-agent-acp`), and quorum starts what it finds here outside
//! any sandbox. A program found before its folder became a session
//! directory is looked up again, never taken from the cache.
//! [`shadowed`] says what was skipped, for the error that follows.

use crate::confine::lock;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The session directories of this process, as given and as they really
/// are (links resolved).
static SESSION_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Notes `dir` as a session directory: from now on no program on `PATH`
/// is found inside it.
pub fn session_dir(dir: &Path) {
    let mut dirs = lock(&SESSION_DIRS);
    for d in [Some(dir.to_path_buf()), dir.canonicalize().ok()]
        .into_iter()
        .flatten()
    {
        if d.is_absolute() && !dirs.contains(&d) {
            dirs.push(d);
        }
    }
}

fn session_dirs() -> Vec<PathBuf> {
    lock(&SESSION_DIRS).clone()
}

/// Where `command` is: itself if it is a path, else the first executable
/// of that name in `PATH` outside every session directory. Looked up once
/// per process for each command (again if what was found lies in a session
/// directory noted since).
pub fn locate(command: &str) -> Option<PathBuf> {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    cached(
        CACHE.get_or_init(Default::default),
        command,
        std::env::var_os("PATH").as_deref(),
        &session_dirs(),
    )
}

/// What was found for each command.
type Cache = Mutex<HashMap<String, Option<PathBuf>>>;

/// [`locate`] with its cache, `PATH` and session directories given.
fn cached(
    cache: &Cache,
    command: &str,
    path: Option<&std::ffi::OsStr>,
    sessions: &[PathBuf],
) -> Option<PathBuf> {
    if let Some(hit) = lock(cache).get(command)
        && hit
            .as_deref()
            .is_none_or(|p| command.contains('/') || inside(p, sessions).is_none())
    {
        return hit.clone();
    }
    let found = search_path(command, path, sessions);
    lock(cache).insert(command.to_string(), found.clone());
    found
}

/// [`locate`] for a program quorum runs itself (`git`, `ssh`): where it is,
/// else an absolute name that fails to start, saying so, never the bare
/// name, which the system would look up on `PATH` again, session
/// directories and relative entries included.
pub fn locate_or_missing(command: &str) -> PathBuf {
    locate(command).unwrap_or_else(|| {
        PathBuf::from(format!(
            "/{command} (not found on PATH outside the session directories)"
        ))
    })
}

/// The program `command` names on `PATH` that [`locate`] skips because it
/// lies in a session directory (the first such), and that directory.
pub fn shadowed(command: &str) -> Option<(PathBuf, PathBuf)> {
    if command.contains('/') {
        return None;
    }
    let dirs = session_dirs();
    std::env::split_paths(&std::env::var_os("PATH")?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(command))
        .filter(|p| is_executable(p))
        .find_map(|p| inside(&p, &dirs).map(|d| (p, d)))
}

fn search_path(
    command: &str,
    path: Option<&std::ffi::OsStr>,
    sessions: &[PathBuf],
) -> Option<PathBuf> {
    if command.contains('/') {
        let p = PathBuf::from(command);
        return is_executable(&p).then_some(p);
    }
    std::env::split_paths(path?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(command))
        .find(|p| is_executable(p) && inside(p, sessions).is_none())
}

/// The session directory `program` lies in, if any: its folder as written
/// or as it really is, or the file its links lead to.
fn inside(program: &Path, sessions: &[PathBuf]) -> Option<PathBuf> {
    if sessions.is_empty() {
        return None;
    }
    let folder = program.parent();
    let places = [
        folder.map(Path::to_path_buf),
        folder.and_then(|f| f.canonicalize().ok()),
        program.canonicalize().ok(),
    ];
    places.iter().flatten().find_map(|place| {
        sessions
            .iter()
            .find(|session| place.starts_with(session))
            .cloned()
    })
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
        assert_eq!(search_path("agent-x", Some(&path), &[]), Some(exe));
        assert_eq!(search_path("not-exec", Some(&path), &[]), None);
        assert_eq!(search_path("missing", Some(&path), &[]), None);
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
        assert_eq!(search_path("git", Some(&path), &[]), None);
        let abs = std::env::join_paths([dir.path()]).unwrap();
        assert_eq!(search_path("git", Some(&abs), &[]), Some(exe));
    }

    /// A `PATH` folder inside a session directory is skipped, and so is a
    /// link from elsewhere to a program in one: the next one on `PATH` is
    /// found.
    #[test]
    fn programs_in_a_session_directory_are_skipped() {
        use std::os::unix::fs::PermissionsExt;
        let session = tempfile::tempdir().unwrap();
        let planted = session.path().join("node_modules/.bin");
        std::fs::create_dir_all(&planted).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let real = tempfile::tempdir().unwrap();
        for dir in [planted.as_path(), real.path()] {
            let exe = dir.join("agent-y");
            std::fs::write(&exe, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        // A folder outside whose program is a link into the session.
        std::os::unix::fs::symlink(planted.join("agent-y"), elsewhere.path().join("agent-y"))
            .unwrap();
        let path = std::env::join_paths([&planted, elsewhere.path(), real.path()]).unwrap();
        assert_eq!(
            search_path("agent-y", Some(&path), &[]),
            Some(planted.join("agent-y"))
        );
        let sessions = [session.path().to_path_buf()];
        assert_eq!(
            search_path("agent-y", Some(&path), &sessions),
            Some(real.path().join("agent-y"))
        );
        // The session reached through a link to it is the same session.
        let link = elsewhere.path().join("project");
        std::os::unix::fs::symlink(session.path(), &link).unwrap();
        let path =
            std::env::join_paths([link.join("node_modules/.bin").as_path(), real.path()]).unwrap();
        assert_eq!(
            search_path("agent-y", Some(&path), &sessions),
            Some(real.path().join("agent-y"))
        );
        assert_eq!(
            inside(&planted.join("agent-y"), &sessions),
            Some(sessions[0].clone())
        );
        assert_eq!(inside(&real.path().join("agent-y"), &sessions), None);
    }

    /// What was found before its folder became a session directory is not
    /// taken from the cache afterwards.
    #[test]
    fn a_cached_program_in_a_session_directory_is_looked_up_again() {
        use std::os::unix::fs::PermissionsExt;
        let session = tempfile::tempdir().unwrap();
        let real = tempfile::tempdir().unwrap();
        for dir in [session.path(), real.path()] {
            let exe = dir.join("agent-z");
            std::fs::write(&exe, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = std::env::join_paths([session.path(), real.path()]).unwrap();
        let cache = Cache::default();
        assert_eq!(
            cached(&cache, "agent-z", Some(&path), &[]),
            Some(session.path().join("agent-z"))
        );
        let sessions = [session.path().to_path_buf()];
        assert_eq!(
            cached(&cache, "agent-z", Some(&path), &sessions),
            Some(real.path().join("agent-z"))
        );
        // And the new answer is the one kept.
        assert_eq!(
            cached(&cache, "agent-z", None, &sessions),
            Some(real.path().join("agent-z"))
        );
    }
}
