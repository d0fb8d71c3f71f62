//! `quorum mcp`: quorum's tools (`subagent`, `subagent_status`) as an MCP
//! server on stdio, for any MCP host (`claude mcp add quorum -- quorum
//! mcp`, codex's `[mcp_servers]`, Cursor, Zed), on the directory it was
//! started in. Its session is recorded like the TUI's (`quorum sessions`
//! lists it, `quorum watch` follows it), and it ends, with every process
//! it started, when the host closes its stdin or it gets SIGTERM, SIGINT
//! or SIGHUP.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::sync::mpsc;

use super::{EXIT_CANNOT_RUN, EXIT_INTERRUPTED, EXIT_OK, HeadlessArgs, Interrupt, interrupts};
use crate::confine::sanitize::sanitize;
use crate::engine::Session;
use crate::engine::config::{self, ModelChoice};
use crate::event::{Event, NoticeLevel, Stamped};
use crate::serve::{McpOptions, QuorumMcp};

/// `quorum mcp`'s options.
#[derive(clap::Args)]
pub struct McpArgs {
    /// Do not record the session (by default it is recorded under the
    /// state directory, as the TUI's are: `quorum sessions` lists it and
    /// `quorum watch` follows it).
    #[arg(long, conflicts_with = "record")]
    no_record: bool,
    #[command(flatten)]
    headless: HeadlessArgs,
}

/// Runs `quorum mcp` until the host goes or a signal comes; the exit code.
/// `outer`: the pid of the quorum whose agent started this one, if one did
/// (its tools are not for its own sub-agents).
pub async fn command(
    args: McpArgs,
    config: Option<PathBuf>,
    model: ModelChoice,
    outer: Option<String>,
) -> Result<i32> {
    config::init_logging();
    if let Some(pid) = outer {
        crate::say!(
            "quorum mcp: started by an agent of quorum (process {}): quorum's tools are not \
             given to its own sub-agents ({} is set)",
            sanitize(&pid),
            crate::serve::PROCESS_ENV
        );
        return Ok(EXIT_CANNOT_RUN);
    }
    let mut setup = args.headless.setup(config);
    if setup.record.is_none() && !args.no_record {
        setup.record = config::default_record_path();
    }
    // The host is the chat: no default one is picked.
    let model = ModelChoice {
        chosen_only: true,
        ..model
    };
    let prepared = setup.config_file().and_then(|file| {
        let options = McpOptions::from_config(&file);
        Ok((options, setup.session(&file, Some(&model))?))
    });
    let (options, session) = match prepared {
        Ok(p) => p,
        Err(e) => {
            crate::say!("quorum mcp: {}", config::error_message(e.as_ref()));
            return Ok(EXIT_CANNOT_RUN);
        }
    };
    let (mut session, events) = Session::start(session, Instant::now())?;
    // The host is the chat: a chat model, if one is configured, runs the
    // internal agent only.
    drop(session.take_chat());
    let told = tokio::spawn(tell(events));
    if let Some(path) = session.recording() {
        tracing::info!("quorum mcp: recording to {}", path.display());
    }
    let server = QuorumMcp::for_session(&session, options);
    let mut interrupts = interrupts();
    let code = tokio::select! {
        served = server.serve_on(rmcp::transport::stdio()) => {
            if let Err(e) = served {
                crate::say!("quorum mcp: {}", config::error_message(&e));
            }
            EXIT_OK
        }
        Some(interrupt) = interrupts.recv() => match interrupt {
            Interrupt::Cancel => EXIT_INTERRUPTED,
            Interrupt::Quit(code) => code,
        },
    };
    session.wind_down().await;
    session.close_agent_sessions().await;
    session.shutdown();
    let code = match super::or_budget(code, session.budget_stopped()) {
        super::EXIT_BUDGET => {
            crate::say!("quorum mcp: a spending cap stopped work (exit 4)");
            super::EXIT_BUDGET
        }
        code => code,
    };
    let recording = session.recording();
    drop(session);
    let _ = tokio::time::timeout(Duration::from_secs(2), told).await;
    if let Some(path) = recording {
        let id = path.file_stem().unwrap_or_default().to_string_lossy();
        crate::say!(
            "quorum mcp: session recorded to {} (quorum watch {id}, quorum replay {})",
            path.display(),
            path.display()
        );
    }
    Ok(code)
}

/// The session's errors and warnings go to stderr (hosts keep a server's
/// stderr in their logs); stdout is the host's.
async fn tell(mut events: mpsc::UnboundedReceiver<Stamped>) {
    while let Some(stamped) = events.recv().await {
        match &stamped.event {
            Event::Error { text } => crate::say!("quorum mcp: error: {}", sanitize(text)),
            Event::Notice {
                level: NoticeLevel::Warning,
                text,
            } => crate::say!("quorum mcp: {}", sanitize(text)),
            _ => {}
        }
    }
}
