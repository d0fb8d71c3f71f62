//! `--continue` and `--resume`: which recorded quorum session to go on
//! with.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::engine::config;

/// Which recorded quorum session to go on with (these are quorum's own
/// sessions, as `quorum sessions` lists them; not an agent's ACP session).
#[derive(clap::Args, Default, Clone)]
pub struct ContinueArgs {
    /// Continue the newest quorum session recorded in this directory.
    #[arg(
        short = 'c',
        long = "continue",
        id = "continue_session",
        conflicts_with_all = ["resume", "record"]
    )]
    pub continue_session: bool,
    /// Continue a recorded quorum session: its id (as `quorum sessions`
    /// prints it, or a unique start of one) or its transcript file. The
    /// TUI without a value lists this directory's sessions to pick from.
    #[arg(
        long,
        value_name = "ID|FILE",
        num_args = 0..=1,
        default_missing_value = "",
        conflicts_with = "record"
    )]
    pub resume: Option<String>,
}

impl ContinueArgs {
    /// The transcript to continue: `--continue`'s newest session of the
    /// session directory, or `--resume`'s. `None` when neither is given,
    /// or when `--resume` without a value is left to a picker (`picker`).
    pub fn target(&self, cwd: Option<&Path>, picker: bool) -> Result<Option<PathBuf>> {
        let root = config::root(cwd)?;
        if self.continue_session {
            return Ok(Some(config::newest_session(root.path())?));
        }
        match self.resume.as_deref() {
            None => Ok(None),
            Some("") if picker => Ok(None),
            Some("") => anyhow::bail!(
                "--resume needs a session id or file here (`quorum sessions` lists them)"
            ),
            Some(id) => Ok(Some(config::find_session(id)?)),
        }
    }
}
