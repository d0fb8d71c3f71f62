//! `quorum sessions`: the recorded sessions of this directory or of every
//! directory, as a person reads them and as JSON lines; with a state, home
//! and config of the test's own.

use crate::common;
use common::shell::stderr;

use common::Bounded;

use std::path::{Path, PathBuf};
use std::process::Output;

use quorum::event::{AgentRef, Event, Stamped, build};
use serde_json::Value;

/// A home of its own: state, config and two project directories.
struct Home {
    root: tempfile::TempDir,
}

impl Home {
    fn new() -> Self {
        let home = Self {
            root: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(home.sessions()).unwrap();
        for p in ["a", "b"] {
            std::fs::create_dir_all(home.project(p)).unwrap();
        }
        home
    }

    fn sessions(&self) -> PathBuf {
        self.root.path().join("state/quorum/sessions")
    }

    /// A project directory, canonical (as a session's header holds it).
    fn project(&self, name: &str) -> PathBuf {
        let dir = self.root.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir.canonicalize().unwrap()
    }

    /// `quorum sessions ARGS` run in `cwd`.
    fn sessions_in(&self, cwd: &Path, args: &[&str]) -> Output {
        common::quorum(self.root.path())
            .arg("sessions")
            .args(args)
            .current_dir(cwd)
            .env("XDG_STATE_HOME", self.root.path().join("state"))
            .env("XDG_CONFIG_HOME", self.root.path().join("config"))
            .env("HOME", self.root.path())
            .env_remove("QUORUM_CONFIG")
            .output_bounded()
    }

    /// Writes session `id`, recorded in `cwd`, started at `started`.
    fn record(&self, id: &str, cwd: &Path, started: &str, events: &[(u64, Event)]) -> PathBuf {
        let mut text = serde_json::json!({
            "format": "quorum-transcript",
            "version": 2,
            "quorum_version": "0.1.0",
            "cwd": cwd.display().to_string(),
            "started_at": started,
            "terminal": {"cols": 120, "rows": 40},
        })
        .to_string();
        text.push('\n');
        for (t, e) in events {
            text.push_str(&serde_json::to_string(&Stamped::new(*t, e.clone())).unwrap());
            text.push('\n');
        }
        let path = self.sessions().join(format!("{id}.jsonl"));
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Session A (in project a, earlier) and session B (in project b, later).
    fn two_sessions(&self) -> (PathBuf, PathBuf) {
        let a = self.record(
            "2026-12-01T18-00-54Z-1234",
            &self.project("a"),
            "2026-12-01T18:00:54Z",
            &[
                (
                    0,
                    Event::UserMessage {
                        text: "review the parser\nplease".into(),
                    },
                ),
                (
                    100,
                    build::started("c1", AgentRef::Acp("claude".into()))
                        .background("t1")
                        .event(),
                ),
                (200, build::started("c2", AgentRef::Internal).event()),
                (300, build::finished("c2", "ok").event()),
                (60_000, Event::AssistantEnd),
            ],
        );
        let b = self.record(
            "2026-12-02T09-00-00Z-77",
            &self.project("b"),
            "2026-12-02T09:00:00Z",
            &[(
                0,
                Event::UserMessage {
                    text: "hello from b".into(),
                },
            )],
        );
        (a, b)
    }
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "{}", stderr(o));
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn json_lines(o: &Output) -> Vec<Value> {
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[test]
fn a_directory_shows_only_its_own_sessions() {
    let home = Home::new();
    home.two_sessions();
    let out = stdout(&home.sessions_in(&home.project("a"), &[]));
    assert!(out.contains("2026-12-01T18-00-54Z-1234"), "{out}");
    assert!(!out.contains("2026-12-02T09-00-00Z-77"), "{out}");
    assert!(out.contains("“review the parser please”"), "{out}");
    assert!(out.contains("agents claude, internal"), "{out}");
    assert!(out.contains("running when it ended: t1"), "{out}");
    assert!(out.contains("last 2026-12-01T18:01:54Z"), "{out}");
    assert!(out.contains("started 2026-12-01T18:00:54Z"), "{out}");
    assert!(out.contains("5 events"), "{out}");
    // The directory is said only with --all.
    assert!(
        !out.contains(&home.project("a").display().to_string()),
        "{out}"
    );
    // A subdirectory is another directory.
    let sub = home.project("a/sub");
    let o = home.sessions_in(&sub, &[]);
    assert_eq!(stdout(&o), "");
    let err = stderr(&o);
    assert!(
        err.contains(&format!("no sessions recorded for {}", sub.display())),
        "{err}"
    );
    assert!(err.contains("`quorum sessions --all`"), "{err}");
}

#[test]
fn all_lists_every_directory_newest_first() {
    let home = Home::new();
    home.two_sessions();
    let out = stdout(&home.sessions_in(&home.project("a"), &["--all"]));
    let a = out.find("2026-12-01T18-00-54Z-1234").expect(&out);
    let b = out.find("2026-12-02T09-00-00Z-77").expect(&out);
    assert!(b < a, "newest first:\n{out}");
    assert!(
        out.contains(&home.project("a").display().to_string()),
        "{out}"
    );
    assert!(
        out.contains(&home.project("b").display().to_string()),
        "{out}"
    );
    assert_eq!(out.lines().count(), 4, "two lines a session:\n{out}");
}

#[test]
fn json_lines_carry_every_field() {
    let home = Home::new();
    let (a, b) = home.two_sessions();
    let lines = json_lines(&home.sessions_in(&home.project("a"), &["--all", "--json"]));
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["id"], "2026-12-02T09-00-00Z-77");
    assert_eq!(lines[0]["path"], b.display().to_string());
    let s = &lines[1];
    let expected = serde_json::json!({
        "id": "2026-12-01T18-00-54Z-1234",
        "path": a.display().to_string(),
        "cwd": home.project("a").display().to_string(),
        "started_at": "2026-12-01T18:00:54Z",
        "last_event_at": "2026-12-01T18:01:54Z",
        "first_message": "review the parser please",
        "agents": ["claude", "internal"],
        "running_tasks": ["t1"],
        "events": 5,
        "bytes": std::fs::metadata(&a).unwrap().len(),
        "open_in": null,
    });
    assert_eq!(s, &expected);
    // This directory's only.
    let lines = json_lines(&home.sessions_in(&home.project("b"), &["--json"]));
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["id"], "2026-12-02T09-00-00Z-77");
    assert_eq!(lines[0]["agents"], serde_json::json!([]));
    assert_eq!(lines[0]["running_tasks"], serde_json::json!([]));
}

#[test]
fn a_file_that_is_not_a_transcript_is_skipped_with_a_warning() {
    let home = Home::new();
    home.two_sessions();
    std::fs::write(home.sessions().join("notes.jsonl"), "{\"a\":1}\n").unwrap();
    std::fs::write(home.sessions().join("junk.jsonl"), "not json at all\n").unwrap();
    let o = home.sessions_in(&home.project("a"), &["--all", "--json"]);
    assert_eq!(json_lines(&o).len(), 2);
    let err = stderr(&o);
    assert!(err.contains("notes.jsonl"), "{err}");
    assert!(err.contains("junk.jsonl"), "{err}");
    assert!(err.contains("not a quorum transcript"), "{err}");
    assert!(err.contains("warning"), "{err}");
}

#[test]
fn a_last_line_cut_short_still_lists() {
    let home = Home::new();
    let (a, _) = home.two_sessions();
    let mut text = std::fs::read_to_string(&a).unwrap();
    text.push_str("{\"t\":90000,\"type\":\"assistant_del");
    std::fs::write(&a, text).unwrap();
    let o = home.sessions_in(&home.project("a"), &["--json"]);
    let lines = json_lines(&o);
    assert_eq!(lines.len(), 1, "{}", stderr(&o));
    assert_eq!(lines[0]["events"], 5);
    assert_eq!(lines[0]["last_event_at"], "2026-12-01T18:01:54Z");
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
}

#[test]
fn running_tasks_are_reported() {
    let home = Home::new();
    let cwd = home.project("a");
    let claude = || AgentRef::Acp("claude".into());
    home.record(
        "s1",
        &cwd,
        "2026-12-01T10:00:00Z",
        &[
            (1, build::started("c1", claude()).background("t1").event()),
            (2, build::started("c2", claude()).background("t2").event()),
            (
                3,
                build::started("c3", AgentRef::Internal)
                    .background("t3")
                    .event(),
            ),
            (4, build::finished("c1", "done").event()),
            (5, build::finished("c2", "done").event()),
            // Reopened by a follow-up, not finished again.
            (6, build::followup("c2", "and the tests?")),
        ],
    );
    let lines = json_lines(&home.sessions_in(&cwd, &["--json"]));
    assert_eq!(lines[0]["running_tasks"], serde_json::json!(["t3", "t2"]));
    assert_eq!(lines[0]["first_message"], Value::Null);
    let out = stdout(&home.sessions_in(&cwd, &[]));
    assert!(out.contains("running when it ended: t3, t2"), "{out}");
    assert!(out.contains("no message"), "{out}");
}

#[test]
fn untrusted_text_is_sanitised() {
    let home = Home::new();
    let cwd = home.project("a");
    let evil = "evil \x1b]0;title\x07\x1b[2Jtext \u{9b}31m \u{202e}gnp.exe \u{200b}hidden";
    home.record(
        "s1",
        &cwd,
        "2026-12-01T10:00:00Z",
        &[(1, Event::UserMessage { text: evil.into() })],
    );
    let o = home.sessions_in(&cwd, &[]);
    let out = stdout(&o);
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\n')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200b}'..='\u{200f}')
    };
    assert!(!out.chars().any(unsafe_char), "{out:?}");
    assert!(out.contains("evil text"), "{out}");
    // `--json` keeps the text as it was, for a parser, and prints nothing a
    // terminal would act on: JSON escapes the C0 controls itself, quorum the
    // C1 controls, bidi marks and zero-width characters JSON leaves raw.
    let raw = String::from_utf8(home.sessions_in(&cwd, &["--json"]).stdout).unwrap();
    assert!(!raw.chars().any(unsafe_char), "{raw:?}");
    for escaped in ["\\u009b", "\\u202e", "\\u200b"] {
        assert!(raw.contains(escaped), "{escaped}: {raw}");
    }
    let line: serde_json::Value = serde_json::from_str(raw.lines().next().unwrap()).unwrap();
    assert_eq!(line["first_message"], evil);
}

#[test]
fn no_sessions_at_all_is_no_error() {
    let home = Home::new();
    std::fs::remove_dir_all(home.sessions()).unwrap();
    let o = home.sessions_in(&home.project("a"), &["--all"]);
    assert_eq!(stdout(&o), "");
    assert!(
        stderr(&o).contains("no sessions recorded"),
        "{}",
        stderr(&o)
    );
    let o = home.sessions_in(&home.project("a"), &["--json"]);
    assert_eq!(stdout(&o), "");
}

#[test]
fn help_says_which_sessions_these_are() {
    let home = Home::new();
    let out = stdout(&home.sessions_in(home.root.path(), &["--help"]));
    assert!(out.contains("sessions quorum recorded"), "{out}");
    assert!(out.contains("quorum call --resume SESSION_ID"), "{out}");
    assert!(out.contains("--all") && out.contains("--json"), "{out}");
}

#[test]
fn a_session_open_in_a_running_quorum_says_its_pid() {
    let home = Home::new();
    let (a, _) = home.two_sessions();
    let lock = quorum::transcript::sessions::lock_path(&a);
    std::fs::write(&lock, format!("{}\n", std::process::id())).unwrap();
    let lines = json_lines(&home.sessions_in(&home.project("a"), &["--json"]));
    assert_eq!(
        lines[0]["open_in"],
        Value::Null,
        "a lock nobody holds is stale"
    );
    let held = std::fs::OpenOptions::new().write(true).open(&lock).unwrap();
    held.try_lock().unwrap();
    let lines = json_lines(&home.sessions_in(&home.project("a"), &["--json"]));
    assert_eq!(lines[0]["open_in"], std::process::id());
    let out = stdout(&home.sessions_in(&home.project("a"), &[]));
    assert!(
        out.contains(&format!("open in process {}", std::process::id())),
        "{out}"
    );
    drop(held);
}
