//! `quorum watch`: a session another quorum records (`quorum mcp`'s, a
//! TUI's), followed live and read-only in the TUI (`tui::modes::watch`).

use std::path::PathBuf;

use anyhow::Result;

use super::{PanelArg, max_line};
use crate::engine::config;
use crate::tui::modes;

/// `quorum watch`'s options.
#[derive(clap::Args)]
pub struct WatchArgs {
    /// The session: an id as `quorum sessions` prints it (or a unique start
    /// of one), or a transcript file. Default: this directory's newest.
    pub session: Option<String>,
    /// Side panel of background tasks.
    #[arg(long, value_enum, default_value_t)]
    pub panel: PanelArg,
}

/// `quorum watch`: a recorded session followed live.
pub async fn command(args: WatchArgs, config: Option<PathBuf>) -> Result<i32> {
    let file = match &args.session {
        Some(id) => config::find_session(id)?,
        None => config::newest_session(config::root(None)?.path())?,
    };
    let (panel, max_line) = (args.panel.open(), max_line(&config)?);
    config::init_logging();
    modes::watch(&file, panel, max_line).await?;
    Ok(0)
}
