//! The model a person picked for each agent, remembered for that agent's
//! next sessions (as the agents' own CLIs do), in a small JSON file under
//! the state directory: `{"claude": "opus", ...}`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct ModelPicks {
    /// Where they are kept; `None`: only for this process.
    path: Option<PathBuf>,
    picks: Mutex<BTreeMap<String, String>>,
}

impl ModelPicks {
    /// The picks kept at `path` (none yet if the file is missing; a file
    /// that does not parse is logged and started over).
    pub fn load(path: Option<PathBuf>) -> Self {
        let picks = path
            .as_deref()
            .and_then(|p| match std::fs::read_to_string(p) {
                Ok(text) => serde_json::from_str(&text)
                    .inspect_err(|e| tracing::warn!("{}: {e}; starting over", p.display()))
                    .ok(),
                Err(_) => None,
            })
            .unwrap_or_default();
        Self {
            path,
            picks: Mutex::new(picks),
        }
    }

    pub fn get(&self, agent: &str) -> Option<String> {
        self.lock().get(agent).cloned()
    }

    /// Remembers `model` for `agent`; true if that is news.
    pub fn set(&self, agent: &str, model: &str) -> bool {
        let mut picks = self.lock();
        if picks.get(agent).map(String::as_str) == Some(model) {
            return false;
        }
        picks.insert(agent.to_string(), model.to_string());
        if let Some(path) = &self.path
            && let Err(e) = save(path, &picks)
        {
            tracing::warn!("{}: cannot keep model picks: {e}", path.display());
        }
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.picks.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Writes the file whole (a new file renamed over the old), private.
fn save(path: &Path, picks: &BTreeMap<String, String>) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(picks).expect("a map of strings is JSON");
    let tmp = path.with_extension("json.new");
    let mut options = crate::confine::private::file_options();
    options.write(true).create(true).truncate(true);
    std::io::Write::write_all(&mut options.open(&tmp)?, text.as_bytes())?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_are_kept_across_processes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model-picks.json");
        let picks = ModelPicks::load(Some(path.clone()));
        assert_eq!(picks.get("claude"), None);
        assert!(picks.set("claude", "opus"));
        assert!(!picks.set("claude", "opus"), "no news");
        let again = ModelPicks::load(Some(path.clone()));
        assert_eq!(again.get("claude").as_deref(), Some("opus"));
        std::fs::write(&path, "not json").unwrap();
        assert_eq!(ModelPicks::load(Some(path)).get("claude"), None);
    }
}
