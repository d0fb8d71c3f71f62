//! A sandboxed agent's own state, private: what it writes of its own
//! (sessions, settings, MCP servers, instructions) lands in a layer under
//! quorum's state, never in the person's files, so the person's next
//! `claude`, `codex` or `goose` outside quorum runs nothing a sandboxed
//! agent wrote.
//!
//! The layer is a copy, kept across sessions (so a session resumes in a
//! new process) at `<state>/homes/AGENT/layer/<path>`, bound over each
//! state path of the agent's inside the sandbox. Before each start it is
//! brought up to date with the person's state ([`Home::prepare`]): a file
//! the person added or changed since the last start is copied in, unless
//! the agent changed its copy since (its own write wins); files over
//! [`MAX_FILE`] (session logs, histories) and sockets are not copied.
//! The agent's credentials ([`Home::shared`]: claude's
//! `.credentials.json`, codex's `auth.json`, …) are the person's own file,
//! bound read-write over the layer, so a token refreshed inside does not
//! log the person out outside.
//!
//! (bubblewrap 0.10's `--overlay` would give the same view without the
//! copy; Debian 12 and Ubuntu 24.04 ship 0.8, which has none.)

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The largest file copied from the person's state into the layer.
pub const MAX_FILE: u64 = 8 << 20;
/// The most bytes one update copies; the rest waits for the next start.
const MAX_COPY: u64 = 256 << 20;
/// How deep the person's state is walked.
const MAX_DEPTH: usize = 32;

/// One agent's private home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    /// Where its layer is kept: `<state>/homes/AGENT`.
    pub store: PathBuf,
    /// Its state as the person has it, folders and files (absolute), each
    /// seen through the layer.
    pub state: Vec<PathBuf>,
    /// Files shared with the person's, read-write (credentials).
    pub shared: Vec<PathBuf>,
}

/// A bind the sandbox makes: `source` seen at `dest`, writable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    pub source: PathBuf,
    pub dest: PathBuf,
}

/// What the layer knows of each file it copied: the person's file as it
/// was then, and the copy as it was made (so a copy the agent changed
/// since is left alone).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Manifest {
    files: BTreeMap<PathBuf, Copied>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Copied {
    /// The person's file: size and modification time (ns).
    size: u64,
    mtime: i128,
    /// The copy's modification time (ns) as it was made.
    copy_mtime: i128,
}

impl Home {
    /// Where `path` (one of the person's) lives in the layer.
    pub fn layer_path(&self, path: &Path) -> PathBuf {
        let rel = path.strip_prefix("/").unwrap_or(path);
        self.store.join("layer").join(rel)
    }

    /// Brings the layer up to date with the person's state (one quorum
    /// at a time: a lock in the store) and returns the binds that show
    /// it: each state path from its layer, then each shared file that
    /// exists from the person's own. A state path that does not exist is
    /// left out (a bind needs a place to go; the registry makes the
    /// folders and JSON files it names before they get here).
    pub fn prepare(&self) -> io::Result<Vec<Bind>> {
        crate::confine::private::dir(&self.store)?;
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.store.join("lock"))?;
        let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| io::Error::from(e))?;
        let manifest_path = self.store.join("mirror.json");
        let mut manifest: Manifest = fs::read(&manifest_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let mut budget = MAX_COPY;
        let mut binds = Vec::new();
        for path in &self.state {
            // The person's own link (a home kept elsewhere) is followed.
            let Ok(meta) = fs::metadata(path) else {
                continue;
            };
            let layer = self.layer_path(path);
            if meta.is_dir() {
                crate::confine::private::dir(&layer)?;
                self.mirror_dir(path, &layer, 0, &mut manifest, &mut budget)?;
            } else {
                if let Some(parent) = layer.parent() {
                    crate::confine::private::dir(parent)?;
                }
                self.mirror_file(path, &meta, &layer, &mut manifest, &mut budget)?;
                if fs::symlink_metadata(&layer).is_err() {
                    // The agent removed its copy: an empty one to bind.
                    fs::write(&layer, b"")?;
                }
            }
            binds.push(Bind {
                source: layer,
                dest: path.clone(),
            });
        }
        for shared in &self.shared {
            if fs::metadata(shared).is_ok_and(|m| m.is_file()) {
                binds.push(Bind {
                    source: shared.clone(),
                    dest: shared.clone(),
                });
            }
        }
        let text = serde_json::to_vec(&manifest).map_err(io::Error::other)?;
        let tmp = self.store.join("mirror.json.new");
        fs::write(&tmp, text)?;
        fs::rename(&tmp, &manifest_path)?;
        Ok(binds)
    }

    fn mirror_dir(
        &self,
        dir: &Path,
        layer: &Path,
        depth: usize,
        manifest: &mut Manifest,
        budget: &mut u64,
    ) -> io::Result<()> {
        if depth >= MAX_DEPTH {
            return Ok(());
        }
        let Ok(entries) = fs::read_dir(dir) else {
            return Ok(());
        };
        for entry in entries.flatten() {
            let from = entry.path();
            let to = layer.join(entry.file_name());
            let Ok(meta) = fs::symlink_metadata(&from) else {
                continue;
            };
            if self.shared.contains(&from) {
                continue;
            }
            let kind = meta.file_type();
            if kind.is_dir() {
                if fs::symlink_metadata(&to).is_err() {
                    crate::confine::private::dir(&to)?;
                }
                if fs::symlink_metadata(&to).is_ok_and(|m| m.is_dir()) {
                    self.mirror_dir(&from, &to, depth + 1, manifest, budget)?;
                }
            } else if kind.is_symlink() {
                if fs::symlink_metadata(&to).is_err()
                    && let Ok(target) = fs::read_link(&from)
                {
                    let _ = std::os::unix::fs::symlink(target, &to);
                }
            } else if kind.is_file() {
                self.mirror_file(&from, &meta, &to, manifest, budget)?;
            }
            // Sockets, pipes and devices are not copied.
        }
        Ok(())
    }

    /// Copies the person's file `from` to `to` in the layer when the layer
    /// has no copy of it yet, or the person changed it since the last copy
    /// and the agent did not change the copy.
    fn mirror_file(
        &self,
        from: &Path,
        meta: &fs::Metadata,
        to: &Path,
        manifest: &mut Manifest,
        budget: &mut u64,
    ) -> io::Result<()> {
        if !meta.is_file() || meta.len() > MAX_FILE {
            return Ok(());
        }
        let person = (meta.len(), mtime(meta));
        let known = manifest.files.get(from).copied();
        let copy = fs::symlink_metadata(to).ok();
        let wanted = match (known, &copy) {
            // Never copied: unless the agent made one of its own.
            (None, None) => true,
            (None, Some(_)) => false,
            (Some(k), copy) => {
                let person_changed = (k.size, k.mtime) != person;
                let copy_untouched = copy.as_ref().is_some_and(|c| mtime(c) == k.copy_mtime);
                // Removed by the agent: gone until the person changes it.
                person_changed && (copy_untouched || copy.is_none())
            }
        };
        if !wanted || *budget < meta.len() {
            return Ok(());
        }
        *budget -= meta.len();
        let tmp = to.with_file_name(format!(
            ".{}.quorum-copy",
            to.file_name().unwrap_or_default().to_string_lossy()
        ));
        let mut options = crate::confine::private::file_options();
        options.write(true).create(true).truncate(true);
        {
            let mut out = options.open(&tmp)?;
            let mut input = fs::File::open(from)?;
            io::copy(&mut io::Read::take(&mut input, MAX_FILE), &mut out)?;
        }
        // Its owner's bits, as the person has them (a hook stays runnable
        // inside the sandbox); nobody else's.
        fs::set_permissions(
            &tmp,
            fs::Permissions::from_mode(meta.permissions().mode() & 0o700),
        )?;
        fs::rename(&tmp, to)?;
        let made = fs::symlink_metadata(to)?;
        manifest.files.insert(
            from.to_path_buf(),
            Copied {
                size: person.0,
                mtime: person.1,
                copy_mtime: mtime(&made),
            },
        );
        Ok(())
    }
}

fn mtime(meta: &fs::Metadata) -> i128 {
    i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home(dir: &Path) -> (Home, PathBuf) {
        let person = dir.join("person");
        fs::create_dir_all(person.join(".agent/sessions")).unwrap();
        fs::write(person.join(".agent/settings.json"), "{\"model\": \"a\"}").unwrap();
        fs::write(person.join(".agent/auth.json"), "token-1").unwrap();
        fs::write(person.join(".agent.json"), "{}").unwrap();
        (
            Home {
                store: dir.join("store/homes/agent"),
                state: vec![person.join(".agent"), person.join(".agent.json")],
                shared: vec![person.join(".agent/auth.json")],
            },
            person,
        )
    }

    fn bump(path: &Path, text: &str) {
        // A later modification time than the copy's, whatever the clock's
        // granularity.
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(path, text).unwrap();
    }

    /// The layer starts as the person's state; the agent's own writes stay
    /// in it; the person's later changes reach it unless the agent changed
    /// the same file; credentials are the person's own file, not copied.
    #[test]
    fn the_layer_follows_the_person_but_keeps_the_agents_writes() {
        let dir = tempfile::tempdir().unwrap();
        let (home, person) = home(dir.path());
        let binds = home.prepare().unwrap();
        let layer = home.layer_path(&person.join(".agent"));
        assert_eq!(
            binds,
            vec![
                Bind {
                    source: layer.clone(),
                    dest: person.join(".agent")
                },
                Bind {
                    source: home.layer_path(&person.join(".agent.json")),
                    dest: person.join(".agent.json")
                },
                Bind {
                    source: person.join(".agent/auth.json"),
                    dest: person.join(".agent/auth.json")
                },
            ]
        );
        assert_eq!(
            fs::read_to_string(layer.join("settings.json")).unwrap(),
            "{\"model\": \"a\"}"
        );
        assert!(layer.join("sessions").is_dir());
        assert!(!layer.join("auth.json").exists(), "credentials are shared");
        // The agent writes its own settings and a session in the layer.
        bump(&layer.join("settings.json"), "{\"hooks\": \"planted\"}");
        fs::write(layer.join("sessions/s1.jsonl"), "session").unwrap();
        // The person changes theirs, and adds a command.
        bump(&person.join(".agent/settings.json"), "{\"model\": \"b\"}");
        fs::create_dir(person.join(".agent/commands")).unwrap();
        fs::write(person.join(".agent/commands/x.md"), "do x").unwrap();
        home.prepare().unwrap();
        assert_eq!(
            fs::read_to_string(layer.join("settings.json")).unwrap(),
            "{\"hooks\": \"planted\"}",
            "the agent's own write wins"
        );
        assert_eq!(
            fs::read_to_string(layer.join("sessions/s1.jsonl")).unwrap(),
            "session"
        );
        assert_eq!(
            fs::read_to_string(layer.join("commands/x.md")).unwrap(),
            "do x"
        );
        // The person's files are as they left them.
        assert_eq!(
            fs::read_to_string(person.join(".agent/settings.json")).unwrap(),
            "{\"model\": \"b\"}"
        );
        assert!(!person.join(".agent/sessions/s1.jsonl").exists());
        // A file the agent left alone follows the person's changes.
        bump(&person.join(".agent.json"), "{\"changed\": true}");
        home.prepare().unwrap();
        assert_eq!(
            fs::read_to_string(home.layer_path(&person.join(".agent.json"))).unwrap(),
            "{\"changed\": true}"
        );
    }

    /// Big files (session logs) and sockets are not copied.
    #[test]
    fn big_files_and_sockets_stay_out_of_the_layer() {
        let dir = tempfile::tempdir().unwrap();
        let (home, person) = home(dir.path());
        let big = person.join(".agent/sessions/big.jsonl");
        let f = fs::File::create(&big).unwrap();
        f.set_len(MAX_FILE + 1).unwrap();
        let _socket =
            std::os::unix::net::UnixListener::bind(person.join(".agent/ipc.sock")).unwrap();
        home.prepare().unwrap();
        let layer = home.layer_path(&person.join(".agent"));
        assert!(!layer.join("sessions/big.jsonl").exists());
        assert!(!layer.join("ipc.sock").exists());
        assert!(layer.join("settings.json").exists());
    }
}
