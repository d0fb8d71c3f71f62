//! `quorum sessions`: the sessions quorum recorded (under
//! `<state dir>/sessions`), newest first; by default only those of the
//! current directory.

use std::io::Write;
use std::time::SystemTime;

use anyhow::{Context, Result};

use crate::confine::limits::approx_size;
use crate::confine::sanitize::{json, sanitize};
use crate::engine::config;
use crate::transcript::sessions::{self, SessionInfo, ago};

/// `quorum sessions [--all] [--json]`.
#[derive(Debug, clap::Args)]
pub struct SessionsArgs {
    /// Every directory's sessions (by default, the current directory's).
    #[arg(long)]
    pub all: bool,
    /// One JSON object per session and line: id, path, cwd, started_at,
    /// last_event_at, first_message, agents, running_tasks, spent (cost,
    /// tokens, estimated), events, bytes, open_in.
    #[arg(long)]
    pub json: bool,
}

/// Lists the sessions; files that are not transcripts are named on
/// stderr. Exit code 0, with or without sessions.
pub fn command(args: SessionsArgs) -> Result<i32> {
    let dir = config::sessions_dir()
        .context("no state directory to find sessions in: set $XDG_STATE_HOME or $HOME")?;
    let mut listing = sessions::list(&dir)?;
    for skipped in &listing.skipped {
        crate::say!("quorum: warning: {}", sanitize(&skipped.to_string()));
    }
    let here = std::env::current_dir().context("reading the current directory")?;
    if !args.all {
        listing = listing.in_dir(&here);
    }
    if listing.sessions.is_empty() {
        if args.all {
            crate::say!(
                "no sessions recorded (in {})",
                sanitize(&dir.display().to_string())
            );
        } else {
            let here = here.canonicalize().unwrap_or(here);
            crate::say!(
                "no sessions recorded for {}; `quorum sessions --all` lists every directory's",
                sanitize(&here.display().to_string())
            );
        }
        return Ok(0);
    }
    let mut out = std::io::stdout().lock();
    let now = SystemTime::now();
    for info in &listing.sessions {
        if args.json {
            let line = serde_json::to_string(info)?;
            writeln!(out, "{}", json(&line))?;
        } else {
            write!(out, "{}", human(info, args.all, now))?;
        }
    }
    out.flush()?;
    Ok(0)
}

/// Two lines for a person: the id, (the directory,) times, events and
/// size; then agents, running tasks and the first message.
pub fn human(info: &SessionInfo, dir: bool, now: SystemTime) -> String {
    let mut first = sanitize(&info.id).into_owned();
    if dir {
        first.push_str("  ");
        first.push_str(&sanitize(&info.cwd));
    }
    first.push_str(&format!(
        "  last {} ({})  started {}  {} event{}  {}",
        info.last_event_at(),
        ago(info.last_event, now),
        info.started_at(),
        info.events,
        if info.events == 1 { "" } else { "s" },
        approx_size(info.bytes)
    ));
    if let Some(pid) = info.open_in {
        first.push_str(&format!("  open in process {pid}"));
    }
    let mut second = Vec::new();
    second.push(if info.agents.is_empty() {
        "no agents".to_string()
    } else {
        format!("agents {}", sanitize(&info.agents.join(", ")))
    });
    if let Some(spent) = &info.spent {
        second.push(format!(
            "spent {} · {} tokens",
            spent.cost_text(),
            spent.tokens
        ));
    }
    if !info.running_tasks.is_empty() {
        second.push(format!(
            "running when it ended: {}",
            sanitize(&info.running_tasks.join(", "))
        ));
    }
    second.push(match &info.first_message {
        Some(text) => format!("“{}”", one_line(&sanitize(text))),
        None => "no message".to_string(),
    });
    format!("{first}\n    {}\n", second.join(" · "))
}

/// Sanitised text can still hold newlines (from a tab or `\r`): one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::time::Duration;

    #[test]
    fn two_lines_sanitised() {
        let started = humantime::parse_rfc3339("2026-12-01T18:00:54Z").unwrap();
        let info = SessionInfo {
            id: "2026-12-01T18-00-54Z-1234".into(),
            path: PathBuf::from("/s/x.jsonl"),
            cwd: "/home/me/p\x1b[31m".into(),
            started,
            last_event: started + Duration::from_secs(300),
            first_message: Some("fix \x1b]0;pwned\x07the bug".into()),
            agents: vec!["claude".into(), "internal".into()],
            running_tasks: vec!["t1".into()],
            spent: Some(crate::event::budget::Spent {
                cost: 0.42,
                tokens: 12_000,
                estimated: true,
            }),
            events: 1,
            bytes: 2048,
            open_in: Some(42),
            version: 2,
            quorum_version: "0.1.0".into(),
        };
        let now = started + Duration::from_secs(600);
        let text = human(&info, true, now);
        assert_eq!(
            text,
            "2026-12-01T18-00-54Z-1234  /home/me/p  last 2026-12-01T18:05:54Z (5m ago)  \
             started 2026-12-01T18:00:54Z  1 event  2.0 KB  open in process 42\n    \
             agents claude, internal · spent ~$0.42 · 12000 tokens · running when it ended: t1 · \
             “fix the bug”\n"
        );
        assert!(!human(&info, false, now).contains("/home/me"));
    }
}
