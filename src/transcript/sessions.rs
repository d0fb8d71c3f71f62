//! PLACEHOLDER until the sessions listing lands (helper branch sessions16).
use std::path::{Path, PathBuf};

pub struct SessionInfo {
    pub path: PathBuf,
}

#[derive(Debug, thiserror::Error)]
#[error("unknown session {0:?} (`quorum sessions` lists them)")]
pub struct SessionError(String);

pub fn find(dir: &Path, id: &str) -> Result<PathBuf, SessionError> {
    let p = Path::new(id);
    if p.is_file() {
        return Ok(p.to_path_buf());
    }
    let p = dir.join(format!("{id}.jsonl"));
    if p.is_file() {
        return Ok(p);
    }
    Err(SessionError(id.to_string()))
}

pub fn newest_for(dir: &Path, cwd: &Path) -> Option<SessionInfo> {
    let mut best: Option<(std::time::SystemTime, PathBuf)> = None;
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "jsonl") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Some(first) = text.lines().next() else {
            continue;
        };
        let Ok(h) = serde_json::from_str::<super::Header>(first) else {
            continue;
        };
        if Path::new(&h.cwd) != cwd {
            continue;
        }
        let m = e.metadata().ok()?.modified().ok()?;
        if best.as_ref().is_none_or(|(t, _)| m > *t) {
            best = Some((m, path));
        }
    }
    best.map(|(_, path)| SessionInfo { path })
}
