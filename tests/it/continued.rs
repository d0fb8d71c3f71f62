//! Sessions that survive: `quorum run --resume`/`--continue`, and the
//! TUI continued after `kill -9`, on the scripted model and the fake ACP
//! agent (which keeps its sessions on disk with `--store`, as real agents
//! do, so a later process can resume them).

use crate::common;
use common::shell::stderr;

use common::Bounded;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use quorum::event::{Event, SessionKind, Stamped, StopReason};
use quorum::transcript;

/// A temp home: state and config of its own, a fake agent with a store,
/// and session directories.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Self {
        let home = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(home.store()).unwrap();
        std::fs::write(
            home.config(),
            format!(
                "[agents.fake]\ncommand = {:?}\nargs = [\"--store\", {:?}]\n",
                env!("CARGO_BIN_EXE_quorum-fake-agent"),
                home.store().display().to_string()
            ),
        )
        .unwrap();
        home
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn config(&self) -> PathBuf {
        self.path().join("quorum.toml")
    }
    fn store(&self) -> PathBuf {
        self.path().join("store")
    }
    fn state(&self) -> PathBuf {
        self.path().join("state")
    }
    fn sessions(&self) -> Vec<PathBuf> {
        let dir = self.state().join("quorum/sessions");
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.retain(|p| p.extension().is_some_and(|x| x == "jsonl"));
        files.sort();
        files
    }
    /// A session directory.
    fn workdir(&self, name: &str) -> PathBuf {
        let dir = self.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir.canonicalize().unwrap()
    }

    /// A script whose requests are logged to `<name>.log`; returns the
    /// script's path.
    fn script(&self, name: &str, turns: serde_json::Value) -> PathBuf {
        let path = self.path().join(format!("{name}.json"));
        let script = serde_json::json!({"turns": turns, "log": format!("{name}.log")});
        std::fs::write(&path, script.to_string()).unwrap();
        path
    }

    /// The requests the script `name`'s model got.
    fn requests(&self, name: &str) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.path().join(format!("{name}.log")))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn quorum(&self, cwd: &Path) -> Command {
        let mut cmd = common::quorum(self.path());
        cmd.arg("--config")
            .arg(self.config())
            .current_dir(cwd)
            .env("XDG_STATE_HOME", self.state())
            .env("HOME", self.path())
            .env_remove("QUORUM_CONFIG");
        cmd
    }

    /// `quorum run --resume RECORD`.
    fn resume(&self, cwd: &Path, script: &Path, prompt: &str, record: &Path) -> Output {
        self.run(cwd, script, prompt, &["--resume", record.to_str().unwrap()])
    }

    /// `quorum run`, ended (and the test failed) if it takes over two
    /// minutes: a hang fails the test instead of the whole suite.
    fn run(&self, cwd: &Path, script: &Path, prompt: &str, extra: &[&str]) -> Output {
        let out = self.path().join(format!("run-{}.out", std::process::id()));
        let err = self.path().join(format!("run-{}.err", std::process::id()));
        let mut child = self
            .quorum(cwd)
            .args(["run", "--approve", "all", "--model"])
            .arg(format!("script:{}", script.display()))
            .args(["-p", prompt])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let start = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > Duration::from_secs(120) {
                // SIGTERM: quorum ends what it started.
                let _ = Command::new("kill").arg(child.id().to_string()).status();
                let _ = child.wait();
                panic!(
                    "quorum run {prompt:?} still running after 120 s; stderr:\n{}",
                    std::fs::read_to_string(&err).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Output {
            status,
            stdout: std::fs::read(&out).unwrap(),
            stderr: std::fs::read(&err).unwrap(),
        }
    }
}

fn events(path: &Path) -> Vec<Event> {
    let loaded = transcript::load(path).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    loaded.events.into_iter().map(|s| s.event).collect()
}

/// Every line of the file is one JSON value: valid JSON lines.
fn assert_jsonl(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.ends_with('\n'), "ends with a newline");
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("line {}: {e}: {l}", i + 1))
        })
        .collect()
}

fn first_run(home: &Home, cwd: &Path, record: &Path) -> Output {
    let script = home.script(
        "first",
        serde_json::json!([
            {"text": "Asking the agent.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "echo the password is swordfish"}}]},
            {"text": "The agent answered."}
        ]),
    );
    let out = home.run(
        cwd,
        &script,
        "remember the password",
        &["--record", record.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

#[test]
fn run_resume_gives_the_model_the_first_runs_conversation_and_the_agent_its_session() {
    let home = Home::new();
    let cwd = home.workdir("project");
    let record = home.path().join("session.jsonl");
    first_run(&home, &cwd, &record);
    let before = events(&record);
    let first_session = before
        .iter()
        .find_map(|e| match e {
            Event::SubagentSession {
                session_id: Some(id),
                ..
            } => Some(id.clone()),
            _ => None,
        })
        .expect("the first call opened a session");

    let script = home.script(
        "second",
        serde_json::json!([
            {"text": "Asking again.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "echo again"}}]},
            {"text": "You asked me to remember the password."}
        ]),
    );
    let out = home.resume(&cwd, &script, "what did I ask first?", &record);
    assert!(out.status.success(), "{}", stderr(&out));

    // The model's first request of the second run holds the first run's
    // messages and the tool result, as they were sent, then the new one.
    let requests = home.requests("second");
    let messages = requests[0]["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant", "user"]);
    assert_eq!(messages[0]["content"], "remember the password");
    assert_eq!(
        messages[1]["tool_calls"][0]["arguments"],
        r#"{"agent":"fake","input":"echo the password is swordfish"}"#
    );
    let result: serde_json::Value =
        serde_json::from_str(messages[2]["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["output"], "the password is swordfish");
    assert_eq!(messages[3]["content"], "The agent answered.");
    assert_eq!(messages[4]["content"], "what did I ask first?");
    // Exactly what the first run's last request plus its answer held.
    let first = home.requests("first");
    assert_eq!(
        &messages[..3],
        first[1]["messages"].as_array().unwrap().as_slice()
    );

    // The agent's session was resumed, not opened anew.
    let after = events(&record);
    let resumed = after[before.len()..]
        .iter()
        .find_map(|e| match e {
            Event::SubagentSession {
                session,
                session_id,
                ..
            } => Some((*session, session_id.clone())),
            _ => None,
        })
        .expect("the second call opened a session");
    assert_eq!(resumed, (SessionKind::Resumed, Some(first_session)));

    // One file: one header, the first run's events unchanged, then
    // `session_resumed` and the second run's; it replays as one.
    let lines = assert_jsonl(&record);
    assert_eq!(
        lines.iter().filter(|l| l.get("format").is_some()).count(),
        1
    );
    assert_eq!(after[..before.len()], before[..]);
    assert!(matches!(after[before.len()], Event::SessionResumed { .. }));
    // No id is taken twice.
    let calls: Vec<&str> = after
        .iter()
        .filter_map(|e| match e {
            Event::SubagentStarted { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(calls, ["call-1", "call-2"]);
    let shot = home.path().join("shot.txt");
    let out = home
        .quorum(&cwd)
        .args(["replay", record.to_str().unwrap(), "--screenshot"])
        .arg(&shot)
        .args(["--size", "100x60"])
        .output_bounded();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&shot).unwrap();
    for seen in [
        "remember the password",
        "what did I ask first?",
        "session continued",
    ] {
        assert!(text.contains(seen), "{seen:?} in\n{text}");
    }
}

#[test]
fn run_records_by_default_and_continue_takes_the_newest_session_of_this_directory() {
    let home = Home::new();
    let (a, b) = (home.workdir("a"), home.workdir("b"));
    let say = |name: &str, text: &str| home.script(name, serde_json::json!([{ "text": text }]));
    let out = home.run(&a, &say("a1", "one"), "in a, first", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::thread::sleep(Duration::from_millis(1100));
    let out = home.run(&b, &say("b1", "two"), "in b, newer", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    // `--no-record` records nothing.
    let out = home.run(&b, &say("b2", "three"), "not kept", &["--no-record"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let sessions = home.sessions();
    assert_eq!(sessions.len(), 2, "{sessions:?}");

    // In a, --continue goes on with a's session, though b's is newer.
    let out = home.run(&a, &say("a2", "four"), "in a, again", &["--continue"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(home.sessions(), sessions, "no new file");
    let requests = home.requests("a2");
    let said: Vec<&str> = requests[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(said, ["in a, first", "one", "in a, again"]);
    let grown = sessions
        .iter()
        .find(|p| std::fs::read_to_string(p).unwrap().contains("in a, again"))
        .expect("a's session grew");
    assert!(
        std::fs::read_to_string(grown)
            .unwrap()
            .contains("in a, first")
    );

    // A directory with no session of its own: a clear error.
    let c = home.workdir("c");
    let out = home.run(&c, &say("c1", "x"), "hi", &["--continue"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(&format!("no session recorded for {}", c.display())),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_last_line_cut_short_is_cut_off_and_nothing_recorded_is_lost() {
    let home = Home::new();
    let cwd = home.workdir("project");
    let record = home.path().join("session.jsonl");
    first_run(&home, &cwd, &record);
    let whole = std::fs::read_to_string(&record).unwrap();
    // A crash in the middle of writing a line.
    std::fs::write(&record, format!("{whole}{{\"t\":99,\"type\":\"user_mes")).unwrap();

    let script = home.script("second", serde_json::json!([{"text": "ok"}]));
    let out = home.resume(&cwd, &script, "go on", &record);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("its last line was cut short"),
        "{}",
        stderr(&out)
    );
    let after = std::fs::read_to_string(&record).unwrap();
    assert!(after.starts_with(&whole), "every recorded line is kept");
    let lines = assert_jsonl(&record);
    assert!(lines.len() > whole.lines().count());
    assert!(after.contains("\"go on\""));
}

/// An agent's final message of 80 MiB (two 40 MiB chunks) was gathered
/// whole and recorded on one line, over the reader's 64 MiB: the session
/// could not be continued ("a line over 64 MB, read no further"). Now the
/// final message keeps its head and names what was cut, in the box and in
/// what the chat model reads; no line is over the limit, and it continues.
#[test]
fn an_80_mib_final_message_is_cut_and_the_session_continues() {
    use std::io::BufRead;
    let home = Home::new();
    let cwd = home.workdir("project");
    let record = home.path().join("session.jsonl");
    let script = home.script(
        "first",
        serde_json::json!([
            {"text": "Asking.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "bigtext 40"}}]},
            {"text": "Got a long one."}
        ]),
    );
    let out = home.run(
        &cwd,
        &script,
        "a long report, please",
        &["--record", record.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));

    // No line over the reader's limit.
    let max = quorum::confine::limits::MAX_TRANSCRIPT_LINE as usize;
    let file = std::io::BufReader::new(std::fs::File::open(&record).unwrap());
    for (n, line) in file.split(b'\n').enumerate() {
        let len = line.unwrap().len();
        assert!(len <= max, "line {}: {len} bytes", n + 1);
    }
    // The box: the report's head, and what was cut named.
    let events = events(&record);
    let output = events
        .iter()
        .find_map(|e| match e {
            Event::SubagentFinished {
                output,
                stop_reason: StopReason::EndTurn,
                ..
            } => Some(output.clone()),
            _ => None,
        })
        .expect("the call finished");
    assert!(output.starts_with("xxxxxxxx"), "{}", &output[..80]);
    let named = |text: &str| {
        let cut = 80 * 1024 * 1024 - quorum::confine::limits::MAX_FINAL_TEXT;
        text.contains(&format!("… {cut} bytes cut by quorum"))
    };
    assert!(named(&output), "{}", &output[output.len() - 200..]);
    assert!(output.len() < 2 * 1024 * 1024, "{}", output.len());
    // What the chat model read of it names the cut too.
    let requests = home.requests("first");
    let tool = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the tool result went back to the model");
    assert!(named(tool["content"].as_str().unwrap()));

    // And the session goes on.
    let script = home.script("second", serde_json::json!([{"text": "Going on."}]));
    let out = home.resume(&cwd, &script, "go on", &record);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(home.requests("second").len(), 1);
    assert!(
        std::fs::read_to_string(&record)
            .unwrap()
            .contains("\"go on\"")
    );
}

#[test]
fn a_session_open_in_another_quorum_is_refused_and_left_alone() {
    let home = Home::new();
    let cwd = home.workdir("project");
    let record = home.path().join("session.jsonl");
    first_run(&home, &cwd, &record);
    let before = std::fs::read(&record).unwrap();
    let script = home.script("second", serde_json::json!([{"text": "ok"}]));
    {
        let _writer = transcript::Lock::take(&record).unwrap();
        let out = home.resume(&cwd, &script, "go on", &record);
        assert_eq!(out.status.code(), Some(2));
        assert!(
            stderr(&out).contains(&format!("is open in process {}", std::process::id())),
            "{}",
            stderr(&out)
        );
        assert_eq!(std::fs::read(&record).unwrap(), before, "nothing written");
    }
    // Once the other writer is gone (its lock released), it continues.
    let out = home.resume(&cwd, &script, "go on", &record);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn bad_sessions_to_continue_are_clear_errors_and_nothing_is_written() {
    let home = Home::new();
    let cwd = home.workdir("project");
    let record = home.path().join("session.jsonl");
    first_run(&home, &cwd, &record);
    let script = home.script("second", serde_json::json!([{"text": "ok"}]));
    let not_a_transcript = home.path().join("notes.jsonl");
    std::fs::write(&not_a_transcript, "{\"hello\": 1}\n").unwrap();
    let newer = home.path().join("newer.jsonl");
    let text = std::fs::read_to_string(&record).unwrap();
    std::fs::write(&newer, text.replacen("\"version\":2", "\"version\":99", 1)).unwrap();
    let elsewhere = home.workdir("elsewhere");
    let cases: Vec<(&Path, String, &str)> = vec![
        (&cwd, "no-such-session".to_string(), "no-such-session"),
        (
            &cwd,
            not_a_transcript.display().to_string(),
            "not a quorum transcript header",
        ),
        (
            &cwd,
            newer.display().to_string(),
            "format version 99 is newer",
        ),
        (
            &elsewhere,
            record.display().to_string(),
            "this session was recorded in",
        ),
    ];
    for (dir, target, says) in cases {
        let files: Vec<(PathBuf, Vec<u8>)> = [&record, &not_a_transcript, &newer]
            .iter()
            .map(|p| (p.to_path_buf(), std::fs::read(p).unwrap()))
            .collect();
        let out = home.run(dir, &script, "go on", &["--resume", &target]);
        assert_eq!(out.status.code(), Some(2), "{target}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{target}: {}", stderr(&out));
        for (path, bytes) in files {
            assert_eq!(std::fs::read(&path).unwrap(), bytes, "{}", path.display());
        }
        assert!(
            home.requests("second").is_empty(),
            "the model was not asked"
        );
    }
    assert!(home.sessions().is_empty(), "no session was recorded");
}

/// PIDs of the processes, other than quorum's reapers, whose command line
/// mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        // quorum's reaper, which the agent runs under, names it too: it is
        // not an agent process.
        let reaper = cmdline.split(|&b| b == 0).nth(1) == Some(b"__quorum-reaper".as_slice());
        if String::from_utf8_lossy(&cmdline).contains(needle) && !reaper {
            found.push(pid);
        }
    }
    found
}

#[cfg(unix)]
#[test]
fn the_tui_killed_with_a_task_running_continues_with_the_task_interrupted_and_retried() {
    use common::pty::{Terminal, wait_until};
    let home = Home::new();
    let cwd = home.workdir("project");
    let script = home.script(
        "first",
        serde_json::json!([
            {"text": "Starting it.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "slow 300", "run_in_background": true}}]},
            {"text": "It runs as t1."}
        ]),
    );
    let terminal = Terminal::open(140, 40);
    let spawn = |terminal: &Terminal, args: &[&str]| {
        terminal.spawn(home.quorum(&cwd).args(args), Stdio::null())
    };
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let model = format!("script:{}", script.display());
    let first = Killed(spawn(&terminal, &["--model", &model]));
    terminal.wait_for("Ctrl+C quits");
    terminal.type_keys(b"start the slow job\r");
    // The agent has said something of its work: that is its partial output.
    terminal.wait_for_screen(|s| {
        s.contents().contains("It runs as t1.") && s.contents().contains("working")
    });
    let store = home.store().display().to_string();
    assert!(
        wait_until(Duration::from_secs(30), || !processes_mentioning(&store)
            .is_empty()),
        "the agent runs"
    );
    // kill -9: quorum has no say in it.
    let mut first = first;
    first.0.kill().unwrap();
    common::wait_bounded(&mut first.0, "quorum after kill -9");
    assert!(
        wait_until(Duration::from_secs(30), || processes_mentioning(&store)
            .is_empty()),
        "no agent process of the first run is left: {:?}",
        processes_mentioning(&store)
    );
    drop(first);

    let terminal = Terminal::open(140, 40);
    let again = home.script("second", serde_json::json!([{"text": "Noted."}]));
    let model = format!("script:{}", again.display());
    let mut second = Killed(spawn(&terminal, &["--model", &model, "--continue"]));
    // The earlier conversation at once; the task interrupted, in its box
    // (its partial output kept) and in the panel.
    // (The box and the panel are drawn from the same events, maybe in two
    // frames: both are waited for.)
    let screen = terminal.wait_for_screen(|s| {
        s.contents().contains("stop reason: interrupted")
            && s.contents().contains("interrupted · 0 tools")
    });
    let text = screen.contents();
    assert!(text.contains("start the slow job"), "{text}");
    assert!(text.contains("working"), "the partial output: {text}");
    assert!(text.contains("↯ t1 fake"), "the panel: {text}");
    assert!(text.contains("interrupted · 0 tools"), "{text}");

    terminal.type_keys(b"/retry t1\r");
    let screen = terminal.wait_for_screen(|s| s.contents().contains("t1 runs again as t2"));
    assert!(
        screen.contents().contains("fake [t2]"),
        "{}",
        screen.contents()
    );
    assert!(
        wait_until(Duration::from_secs(30), || processes_mentioning(&store)
            .len()
            == 1),
        "the retry runs the agent"
    );
    // Quit (a task runs: Ctrl+C asks once more): nothing is left running.
    terminal.type_keys(b"\x03");
    terminal.wait_for("Ctrl+C again quits");
    terminal.type_keys(b"\x03");
    assert!(wait_until(Duration::from_secs(30), || second
        .0
        .try_wait()
        .unwrap()
        .is_some()));
    assert!(
        wait_until(Duration::from_secs(30), || processes_mentioning(&store)
            .is_empty()),
        "{:?}",
        processes_mentioning(&store)
    );
    // The transcript tells it all, and the interrupted task's finish is
    // recorded once.
    let sessions = home.sessions();
    assert_eq!(sessions.len(), 1);
    let all: Vec<Stamped> = transcript::load(&sessions[0]).unwrap().events;
    let interrupted = all
        .iter()
        .filter(|s| {
            matches!(&s.event, Event::SubagentFinished { call_id, stop_reason: StopReason::Interrupted, .. } if call_id == "call-1")
        })
        .count();
    assert_eq!(interrupted, 1);
}

/// A transcript left by a quorum that died: the person asked for a
/// background task, t1 was running (its agent had said something), and
/// t2 had finished without its report reaching the model.
fn died_with_tasks_running(cwd: &Path, path: &Path) {
    use quorum::event::{AgentRef, ChatEntry, ChatToolCall, build};
    let header = transcript::Header::now(cwd, transcript::TerminalSize { cols: 0, rows: 0 });
    let fake = || AgentRef::Acp("fake".into());
    let call = |id: &str, input: &str| ChatToolCall {
        id: id.into(),
        name: "subagent".into(),
        arguments: serde_json::json!({"agent": "fake", "input": input, "run_in_background": true})
            .to_string(),
    };
    let events = vec![
        Event::UserMessage {
            text: "start two jobs".into(),
        },
        Event::ChatMessage {
            message: ChatEntry::User {
                content: "start two jobs".into(),
            },
        },
        Event::TurnStarted,
        Event::ChatMessage {
            message: ChatEntry::Assistant {
                content: "Starting.".into(),
                tool_calls: vec![call("a", "echo first job"), call("b", "echo second job")],
            },
        },
        build::started("call-1", fake())
            .input("echo first job")
            .background("t1")
            .event(),
        build::chunk("call-1", "halfway through"),
        build::started("call-2", fake())
            .input("echo second job")
            .background("t2")
            .event(),
        build::finished("call-2", "second job done").event(),
        Event::ChatMessage {
            message: ChatEntry::Tool {
                tool_call_id: "a".into(),
                name: "subagent".into(),
                content: r#"{"task_id":"t1"}"#.into(),
            },
        },
        Event::ChatMessage {
            message: ChatEntry::Tool {
                tool_call_id: "b".into(),
                name: "subagent".into(),
                content: r#"{"task_id":"t2"}"#.into(),
            },
        },
        Event::ChatMessage {
            message: ChatEntry::Assistant {
                content: "Both started.".into(),
                tool_calls: vec![],
            },
        },
        Event::TurnEnded {
            stop_reason: StopReason::EndTurn,
        },
    ];
    let mut text = serde_json::to_string(&header).unwrap() + "\n";
    for (i, event) in events.into_iter().enumerate() {
        text.push_str(&serde_json::to_string(&Stamped::new(i as u64 * 10, event)).unwrap());
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

#[test]
fn the_model_is_told_once_of_interrupted_tasks_and_may_retry_them() {
    let home = Home::new();
    let cwd = home.workdir("project");
    let record = home.path().join("died.jsonl");
    died_with_tasks_running(&cwd, &record);
    let script = home.script(
        "second",
        serde_json::json!([
            {"text": "", "tool_calls": [{"name": "subagent_status", "arguments": {"task_id": "t1", "retry": true}}]},
            {"text": "t1 runs again.", "tool_calls": [{"name": "subagent_status", "arguments": {"task_id": "t3", "wait_seconds": 30}}]},
            {"text": "It is done."},
            {"text": "Nothing new."}
        ]),
    );
    let resume = ["--resume", record.to_str().unwrap()];
    let out = home.run(&cwd, &script, "what happened?", &resume);
    assert!(out.status.success(), "{}", stderr(&out));
    let requests = home.requests("second");
    let last_user = |r: &serde_json::Value| -> String {
        r["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .map(|m| m["content"].as_str().unwrap().to_string())
            .unwrap()
    };
    let told = last_user(&requests[0]);
    // Told once, with the ids; t2's report, never delivered, comes along.
    assert!(
        told.contains("interrupted: t1 (fake)"),
        "the note names the task: {told}"
    );
    assert!(
        told.contains("Background task t2 (fake) finished"),
        "{told}"
    );
    assert!(told.contains("second job done"), "{told}");
    assert!(told.ends_with("what happened?"), "{told}");
    // The retry's answer is the new task's status.
    let tool = requests[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let status: serde_json::Value =
        serde_json::from_str(tool["content"].as_str().unwrap()).unwrap();
    assert_eq!(status["task_id"], "t3", "{status}");
    assert_eq!(status["retry_of"], "t1", "{status}");
    // t3 ran the same message on the agent.
    let tool = requests[2]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let status: serde_json::Value =
        serde_json::from_str(tool["content"].as_str().unwrap()).unwrap();
    assert_eq!(status["state"], "done", "{status}");
    assert_eq!(status["output"], "first job", "{status}");

    // The transcript: t1 interrupted once, with its partial output.
    let all = events(&record);
    let finished: Vec<(&str, &str)> = all
        .iter()
        .filter_map(|e| match e {
            Event::SubagentFinished {
                call_id,
                output,
                stop_reason: StopReason::Interrupted,
                ..
            } => Some((call_id.as_str(), output.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(finished, [("call-1", "halfway through")]);

    // A second continuation: nothing is told again.
    let script = home.script("third", serde_json::json!([{"text": "ok"}]));
    let out = home.run(&cwd, &script, "and now?", &resume);
    assert!(out.status.success(), "{}", stderr(&out));
    let requests = home.requests("third");
    assert_eq!(last_user(&requests[0]), "and now?");
}

#[test]
fn a_follow_up_reaches_a_background_task_of_the_earlier_run_on_its_session() {
    let home = Home::new();
    let cwd = home.workdir("project");
    let record = home.path().join("session.jsonl");
    let script = home.script(
        "first",
        serde_json::json!([
            {"text": "In the background.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "echo first turn", "run_in_background": true}}]},
            {"text": "Started."},
            {"text": "It reported."}
        ]),
    );
    let out = home.run(&cwd, &script, "go", &["--record", record.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let before = events(&record).len();

    let script = home.script(
        "second",
        serde_json::json!([
            {"text": "", "tool_calls": [{"name": "subagent_status", "arguments": {"task_id": "t1", "message": "echo second turn", "wait_seconds": 30}}]},
            {"text": "It answered again."},
            {"text": "Reported."}
        ]),
    );
    let out = home.resume(&cwd, &script, "ask t1 again", &record);
    assert!(out.status.success(), "{}", stderr(&out));
    let requests = home.requests("second");
    let tool = requests[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let status: serde_json::Value =
        serde_json::from_str(tool["content"].as_str().unwrap()).unwrap();
    assert_eq!(status["message"], "sent", "{status}");
    assert_eq!(status["output"], "second turn", "{status}");
    // On the task's own session, resumed by the new process.
    let all = events(&record);
    let first_id = all[..before].iter().find_map(|e| match e {
        Event::SubagentSession { session_id, .. } => session_id.clone(),
        _ => None,
    });
    let again = all[before..].iter().find_map(|e| match e {
        Event::SubagentSession {
            call_id,
            session,
            session_id,
        } => Some((call_id.as_str(), *session, session_id.clone())),
        _ => None,
    });
    assert!(first_id.is_some(), "the first turn had a session");
    assert_eq!(again, Some(("call-1", SessionKind::Resumed, first_id)));
}
