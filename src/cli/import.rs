//! `quorum import`: another tool's session log becomes a transcript.

use std::path::PathBuf;

use anyhow::Context;

use crate::transcript::import::{Tool, default_out, import, plural, write};

/// `quorum import TOOL FILE`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The tool that wrote FILE.
    #[arg(value_enum)]
    pub tool: Tool,
    /// The session log: a Claude Code session (its sub-agents are read from
    /// <session>/subagents/ beside it) or a Codex rollout (its sub-agents'
    /// rollouts are found under the same sessions/ directory).
    pub file: PathBuf,
    /// Where to write the transcript; `-` writes to stdout. Default: FILE's
    /// name with `.jsonl` replaced by `.quorum.jsonl`, in the current
    /// directory.
    #[arg(short = 'o', long, value_name = "OUT")]
    pub out: Option<PathBuf>,
    /// Overwrite OUT if it exists (by default an existing file is kept and
    /// the import fails).
    #[arg(long)]
    pub force: bool,
}

/// `quorum import`: imports FILE and writes the transcript; what was
/// skipped goes to stderr. Exit code 0.
pub fn command(args: ImportArgs) -> anyhow::Result<i32> {
    let imported = import(args.tool, &args.file)?;
    let out = args.out.unwrap_or_else(|| default_out(&args.file));
    let to_stdout = out.as_os_str() == "-";
    if to_stdout {
        write(&imported, &mut std::io::stdout().lock())?;
    } else {
        let mut options = crate::confine::private::file_options();
        options.write(true);
        if args.force {
            options.create(true).truncate(true);
        } else {
            options.create_new(true);
        }
        let file = options.open(&out).with_context(|| {
            if out.exists() && !args.force {
                format!(
                    "{} exists; pass --force to overwrite it, or -o another file",
                    out.display()
                )
            } else {
                format!("creating {}", out.display())
            }
        })?;
        let mut file = std::io::BufWriter::new(file);
        write(&imported, &mut file).with_context(|| format!("writing {}", out.display()))?;
    }
    for w in &imported.warnings {
        crate::say!("warning: {w}");
    }
    if let Some(report) = imported.skipped.report() {
        crate::say!("{report}");
    }
    if !to_stdout {
        crate::say!(
            "imported {} ({} file{}) into {}: {} events (quorum replay {})",
            args.file.display(),
            imported.files,
            plural(imported.files),
            out.display(),
            imported.events.len(),
            out.display()
        );
    }
    Ok(0)
}
