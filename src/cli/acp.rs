//! `quorum acp`: quorum itself as an ACP agent on stdio, for Zed, Toad,
//! acpx and the other clients that host agents. Each ACP session is a
//! quorum session in the directory the host names, recorded like the
//! TUI's; the process ends, with every process it started, when the host
//! closes its stdin, or on SIGTERM, SIGINT or SIGHUP.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;

use super::{EXIT_CANNOT_RUN, EXIT_INTERRUPTED, EXIT_OK, Interrupt, Setup, interrupts};
use crate::agent::{Elicit, Permissions};
use crate::config::ConfigFile;
use crate::engine::config::{self, ModelChoice};
use crate::serve::acp::{AcpOptions, AcpServer, Opening, stdio};

/// `quorum acp`'s options.
#[derive(clap::Args)]
pub struct AcpArgs {
    /// Do not record the sessions (by default each is recorded under the
    /// state directory, as the TUI's are: `quorum sessions` lists them, and
    /// the host can load them again).
    #[arg(long)]
    no_record: bool,
    /// Answer agents' permission requests with this instead of asking the
    /// host: all (allow) or none (reject).
    #[arg(long, value_enum, value_name = "ANSWER")]
    approve: Option<Permissions>,
}

/// Serves the host on stdio until it goes or a signal comes; the exit code.
pub async fn command(args: AcpArgs, config: Option<PathBuf>, model: ModelChoice) -> Result<i32> {
    config::init_logging();
    // The file is read once, and a mistake in it said at once, not at the
    // first session; every session takes its settings from it.
    let checked = ConfigFile::load(config.as_deref())
        .map_err(anyhow::Error::from)
        .and_then(|file| Ok(config::registry(&file).map(|_| Arc::new(file))?));
    let file = match checked {
        Ok(file) => file,
        Err(e) => {
            crate::say!("quorum acp: {}", config::error_message(e.as_ref()));
            return Ok(EXIT_CANNOT_RUN);
        }
    };
    let (limits, share_mcp) = (file.limits(), AcpOptions::share(&file));
    let (record, approve) = (!args.no_record, args.approve.unwrap_or(Permissions::Ask));
    let shared = file.clone();
    let factory = Arc::new(move |opening: &Opening| {
        let setup = Setup {
            config: config.clone(),
            cwd: Some(opening.cwd.clone()),
            approve,
            record: (record && opening.resume.is_none())
                .then(fresh_record_path)
                .flatten(),
            resume: opening.resume.clone(),
            elicit: if opening.ask_questions {
                Elicit::Ask
            } else {
                Elicit::Decline
            },
        };
        setup.session(&shared, Some(&model))
    });
    let server = AcpServer::new(AcpOptions {
        factory,
        config: file,
        share_mcp,
    });
    let mut interrupts = interrupts();
    let code = tokio::select! {
        served = server.serve(stdio(limits.max_frame_bytes)) => {
            if let Err(e) = served {
                crate::say!("quorum acp: the connection ended: {e}");
            }
            EXIT_OK
        }
        Some(interrupt) = interrupts.recv() => match interrupt {
            Interrupt::Cancel => EXIT_INTERRUPTED,
            Interrupt::Quit(code) => code,
        },
    };
    let recorded = server.recordings();
    server.close_all().await;
    let code = match super::or_budget(code, server.budget_stopped()) {
        super::EXIT_BUDGET => {
            crate::say!("quorum acp: a spending cap stopped work in a session (exit 4)");
            super::EXIT_BUDGET
        }
        code => code,
    };
    for path in recorded {
        let id = path.file_stem().unwrap_or_default().to_string_lossy();
        crate::say!(
            "quorum acp: session {id} recorded to {} (quorum --resume {id}, quorum replay {})",
            path.display(),
            path.display()
        );
    }
    Ok(code)
}

/// A new transcript under the state directory: the default name, made
/// unique when a session of this process already took it this second.
fn fresh_record_path() -> Option<PathBuf> {
    let path = config::default_record_path()?;
    if !path.exists() {
        return Some(path);
    }
    let stem = path.file_stem()?.to_string_lossy().into_owned();
    (2..1000)
        .map(|n| path.with_file_name(format!("{stem}-{n}.jsonl")))
        .find(|p| !p.exists())
}
