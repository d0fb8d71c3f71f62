//! `quorum` (and `quorum tui`): the interactive TUI. The session is built
//! here, from the config file and the command line, and the screen
//! (`tui::modes::live`) is handed its commands' sender and its events.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};

use super::ContinueArgs;
use crate::config::ConfigFile;
use crate::engine::Session;
use crate::engine::config::{self, ModelChoice};
use crate::tui::earlier::Earlier;
use crate::tui::modes::{self, Files};

#[derive(clap::Args, Default)]
pub struct TuiArgs {
    /// Record the session's events to this transcript file (JSONL);
    /// by default sessions are recorded under the state directory.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Do not record the session.
    #[arg(long, conflicts_with_all = ["record", "continue_session", "resume"])]
    no_record: bool,
    #[command(flatten)]
    continued: ContinueArgs,
    /// With --resume and no ID: list the sessions of every directory.
    #[arg(long, requires = "resume")]
    all: bool,
}

/// The interactive session, until the person quits; how it can be gone on
/// with is said once the terminal is restored.
pub async fn command(args: TuiArgs, model: ModelChoice, config: Option<PathBuf>) -> Result<i32> {
    modes::require_terminal()?;
    let mut resume = args.continued.target(None, true)?;
    if resume.is_none() && args.continued.resume.is_some() {
        // `--resume` alone: the person picks one.
        let root = config::root(None)?;
        let dir =
            config::sessions_dir().context("no state directory (set HOME or XDG_STATE_HOME)")?;
        match modes::pick_session(&dir, root.path(), args.all).await? {
            Some(path) => resume = Some(path),
            None => return Ok(0),
        }
    }
    let record = (!args.no_record).then_some(args.record);
    let size = ratatui::crossterm::terminal::size().unwrap_or((80, 24));
    let file = ConfigFile::load(config.as_deref())?;
    let mut session = config::interactive(&file, &model, record, size)?;
    let earlier = Earlier::default();
    if resume.is_some() {
        (session.record, session.resume) = (None, resume);
        session.on_history = Some(earlier.hook());
    }
    let (mut session, events) = Session::start(session, Instant::now())?;
    let _tools = crate::serve::offer_tools(&session, &file)?;
    let (started, ops) = (session.clock(), session.serve());
    let notify = file.notify.clone().unwrap_or_default();
    let alerts = crate::tui::notify::Alerts {
        bell: file.bell(),
        desktop: notify.desktop.unwrap_or(true).then(|| notify.kinds()),
    };
    let limit = file.limits().max_transcript_line_bytes;
    let files = Files::new(config::history_path(), session.recording(), limit);
    let result = modes::live(ops, events, earlier, started, alerts, files).await;
    session.close_agent_sessions().await;
    session.shutdown();
    if let Some(path) = session.recording() {
        let id = path.file_stem().unwrap_or_default().to_string_lossy();
        crate::say!(
            "session recorded to {}\n  go on with it: quorum --resume {id} (or quorum -c here)",
            path.display()
        );
    }
    result?;
    Ok(0)
}
