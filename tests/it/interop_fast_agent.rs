//! Interop with a real third-party ACP agent: fast-agent with its
//! `passthrough` model (it echoes the prompt; `***CALL_TOOL name {json}`
//! makes it call a tool). `scripts/install-fast-agent.sh` installs it into
//! `.tools/` the first time; a failed install fails these tests.

use crate::common;
use common::shell::stderr;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;
use std::time::Duration;

use quorum::event::{Activity, Event, SessionKind};
use quorum::transcript;

fn fast_agent() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| common::install("install-fast-agent.sh"))
}

/// How long one `quorum call` may take before the test fails as wedged.
const LIMIT: Duration = Duration::from_secs(120);

/// A session directory with a config that runs fast-agent on passthrough;
/// quorum and the agent have a home of their own, by which what they left
/// running is found.
struct Session {
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
    config: PathBuf,
}

fn session() -> Session {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello from a file\n").unwrap();
    let config = dir.path().join("quorum.toml");
    std::fs::write(
        &config,
        format!(
            "[agents.fast-agent]\ncommand = {:?}\nargs = [\"--no-update-check\", \"acp\", \"--model\", \"passthrough\"]\n",
            fast_agent().display().to_string()
        ),
    )
    .unwrap();
    Session { dir, home, config }
}

impl Session {
    fn call(&self, extra: &[&str], record: &str) -> (Output, Vec<serde_json::Value>, Vec<Event>) {
        let record = self.dir.path().join(record);
        let mut cmd = common::quorum(self.home.path());
        cmd.arg("--config")
            .arg(&self.config)
            .args(["call", "--agent", "fast-agent", "--json", "--cwd"])
            .arg(self.dir.path())
            .arg("--record")
            .arg(&record)
            .args(extra);
        let out = common::output_within(cmd, LIMIT);
        let left = common::models::leftovers(self.home.path());
        assert!(
            left.is_empty(),
            "still running after quorum exited: {left:?}; stderr: {}",
            stderr(&out)
        );
        let results = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        let events = transcript::load(&record)
            .unwrap()
            .events
            .into_iter()
            .map(|s| s.event)
            .collect();
        (out, results, events)
    }
}

#[test]
fn plain_turn_then_continued_then_resumed_by_a_new_process_then_fresh() {
    let s = session();
    let (out, results, events) = s.call(
        &["--input", "hello world", "--input", "second turn"],
        "a.jsonl",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["output"], "hello world");
    assert_eq!(results[0]["stop_reason"], "end_turn");
    assert_eq!(results[0]["session"], "fresh");
    // The second call prompts the first call's session, still open on
    // fast-agent's connection: no session/resume.
    assert_eq!(results[1]["output"], "second turn");
    assert_eq!(results[1]["session"], "continued");
    assert_eq!(results[1]["session_id"], results[0]["session_id"]);
    let kinds: Vec<SessionKind> = events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentSession { session, .. } => Some(*session),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, [SessionKind::Fresh, SessionKind::Continued]);
    let chunks: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentActivity {
                activity: Activity::MessageChunk { text },
                ..
            } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(chunks.concat(), "hello worldsecond turn");

    // A new quorum process (and a new fast-agent) resumes it.
    let id = results[0]["session_id"].as_str().unwrap().to_string();
    let (out, again, events) = s.call(&["--resume", &id, "--input", "third turn"], "c.jsonl");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(again[0]["output"], "third turn");
    assert_eq!(again[0]["session"], "resumed");
    assert_eq!(again[0]["session_id"], id.as_str());
    // fast-agent replays history on resume; none of it shows as activity.
    let chunks: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentActivity {
                activity: Activity::MessageChunk { text },
                ..
            } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(chunks.concat(), "third turn");

    // A new session on request: a different id.
    let (out, fresh, _) = s.call(&["--new-session", "--input", "third"], "b.jsonl");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(fresh[0]["session"], "fresh");
    assert_ne!(fresh[0]["session_id"], results[0]["session_id"]);
}

#[test]
fn tool_call_asks_permission_then_reads_inside_the_session_directory() {
    let s = session();
    let notes = s.dir.path().join("notes.txt").canonicalize().unwrap();
    let prompt = format!(
        "***CALL_TOOL read_text_file {{\"path\": {:?}}}",
        notes.display().to_string()
    );
    let (out, results, events) = s.call(&["--approve", "all", "--input", &prompt], "c.jsonl");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        results[0]["output"], "hello from a file\n",
        "only the text after the tool call"
    );
    let asked = events.iter().any(|e| {
        matches!(
            e,
            Event::SubagentActivity {
                activity: Activity::PermissionRequest { .. },
                ..
            }
        )
    });
    let allowed = events.iter().any(|e| matches!(e, Event::SubagentActivity { activity: Activity::PermissionResolved { outcome, .. }, .. } if outcome.starts_with("Allow")));
    let tool = events.iter().any(|e| {
        matches!(
            e,
            Event::SubagentActivity {
                activity: Activity::ToolCall { .. },
                ..
            }
        )
    });
    assert!(asked && allowed && tool, "{events:#?}");
}

#[test]
fn denied_permission_and_reads_outside_are_refused() {
    let s = session();
    let notes = s.dir.path().join("notes.txt").canonicalize().unwrap();
    let prompt = format!(
        "***CALL_TOOL read_text_file {{\"path\": {:?}}}",
        notes.display().to_string()
    );
    // --approve none (the default): the agent asks, and is told no.
    let (out, results, events) = s.call(&["--input", &prompt], "d.jsonl");
    assert!(out.status.success(), "{}", stderr(&out));
    let asked: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentActivity {
                activity: Activity::PermissionRequest { id, .. },
                ..
            } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(asked.len(), 1, "one permission request: {events:#?}");
    let rejected = events.iter().any(|e| {
        matches!(e, Event::SubagentActivity {
            activity: Activity::PermissionResolved { id, outcome }, ..
        } if id == asked[0]
            && outcome.ends_with("(by policy)")
            && !outcome.to_lowercase().contains("allow"))
    });
    assert!(rejected, "the request is rejected by policy: {events:#?}");
    assert!(
        !results[0]["output"]
            .as_str()
            .unwrap()
            .contains("hello from a file"),
        "{results:?}"
    );

    // Allowed, but outside the session directory: refused, with a notice.
    let outside = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(outside.path(), "secret").unwrap();
    let prompt = format!(
        "***CALL_TOOL read_text_file {{\"path\": {:?}}}",
        outside.path().display().to_string()
    );
    let (out, results, events) = s.call(&["--approve", "all", "--input", &prompt], "e.jsonl");
    assert!(out.status.success(), "{}", stderr(&out));
    let output = results[0]["output"].as_str().unwrap();
    assert!(!output.contains("secret"), "{output}");
    // fast-agent names the path in its permission request, so quorum
    // refuses it there, whatever --approve says.
    assert!(
        events.iter().any(|e| matches!(e, Event::SubagentActivity {
            activity: Activity::PermissionResolved { outcome, .. }, ..
        } if outcome.starts_with("refused: ") && outcome.ends_with("is outside the session directory"))),
        "{events:#?}"
    );
    assert!(
        events.iter().any(|e| matches!(e, Event::Notice { text, .. } if text.contains("outside the session directory"))),
        "{events:#?}"
    );
}

/// fast-agent with its shell (`--shell`) runs commands through the client's
/// terminals when the client advertises `terminal: true`: quorum's, so the
/// command runs confined (under bubblewrap, a write outside the session
/// directory does not land) and its output is recorded and shows in the
/// opened box.
#[test]
fn fast_agent_runs_its_shell_commands_in_quorums_terminals() {
    let s = session();
    std::fs::write(
        &s.config,
        format!(
            "[agents.fast-agent]\ncommand = {:?}\nargs = [\"--no-update-check\", \"acp\", \"--model\", \"passthrough\", \"--shell\"]\npermissions = \"allow\"\n",
            fast_agent().display().to_string()
        ),
    )
    .unwrap();
    // Outside the session directory and outside `/tmp` (the sandbox's own
    // `/tmp` would turn a write there into a failure for a missing folder,
    // whatever the sandbox did).
    let outside_dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let outside = outside_dir.path().join("escaped.txt");
    let command = format!(
        "echo probe-$((6*7)); touch {} 2>&1 || echo write-refused",
        outside.display()
    );
    let input = format!(
        "***CALL_TOOL execute {}",
        serde_json::json!({ "command": command })
    );
    let (out, results, events) = s.call(&["--input", &input], "term.jsonl");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(results[0]["stop_reason"], "end_turn", "{}", stderr(&out));
    let activity: Vec<&Activity> = events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentActivity { activity, .. } => Some(activity),
            _ => None,
        })
        .collect();
    assert!(
        activity.iter().any(|a| matches!(a,
            Activity::TerminalStarted { command: c, .. } if c.contains("echo probe-"))),
        "no command in quorum's terminals: {activity:?}"
    );
    let output: String = activity
        .iter()
        .filter_map(|a| match a {
            Activity::TerminalOutput { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(output.contains("probe-42"), "{output}");
    assert!(
        activity.iter().any(|a| matches!(
            a,
            Activity::TerminalExit {
                exit_code: Some(0),
                ..
            }
        )),
        "{activity:?}"
    );
    // The opened box, replayed from the transcript, shows the output.
    let record = s.dir.path().join("term.jsonl");
    let opened = common::opened_box(&transcript::load(&record).unwrap().events, 120);
    assert!(opened.contains("probe-42"), "{opened}");
    // One command, though fast-agent's tool call does not show its terminal.
    assert!(opened.contains("ran 1 command"), "{opened}");
    assert!(
        quorum::runtime::path::locate("bwrap").is_some(),
        "the sandbox tests need bubblewrap: apt-get install bubblewrap"
    );
    assert!(
        !outside.exists(),
        "a write outside the session directory landed"
    );
    assert!(output.contains("write-refused"), "{output}");
}
