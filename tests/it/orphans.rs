//! No process `quorum call` started outlives it: not the agent, not the
//! agent's own child (a `sleep 600` in the agent's process group, which the
//! fake agent never stops), whether the call is cancelled with SIGINT,
//! terminated with SIGTERM, killed with SIGKILL (the parent-death signal
//! and the watchdog), or ends normally with an agent that, like codex-acp
//! and claude-agent-acp, does not exit when its stdin closes. The same
//! for the TUI, quit with a background task running (Ctrl+C, SIGTERM,
//! SIGHUP), which also gives the terminal back as it found it; and for an
//! internal agent's shell command cancelled with Esc.
#![cfg(target_os = "linux")]

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::Duration;

use crate::common;

use common::pty::{Terminal, wait_until};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How long processes may take to disappear after quorum has exited.
const GONE_WITHIN: Duration = Duration::from_secs(10);
/// How long a call may take to start its agent, or to exit once told to.
const PATIENCE: Duration = Duration::from_secs(30);

fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// A process by pid and start time, so a reused pid is not mistaken for
/// it; alive while it exists and is not a zombie.
struct Proc {
    what: &'static str,
    pid: i32,
    start: String,
}

impl Proc {
    fn find(what: &'static str, pid: i32) -> Self {
        let fields = stat_fields(pid).unwrap_or_else(|| panic!("{what} {pid} is not running"));
        Proc {
            what,
            pid,
            start: fields[19].clone(),
        }
    }

    /// As [`Proc::find`], but a process already gone is never alive.
    fn find_or_gone(what: &'static str, pid: i32) -> Self {
        let start = stat_fields(pid).map(|f| f[19].clone()).unwrap_or_default();
        Proc { what, pid, start }
    }

    fn alive(&self) -> bool {
        !self.start.is_empty()
            && stat_fields(self.pid).is_some_and(|f| f[19] == self.start && f[0] != "Z")
    }
}

/// One `quorum call` (or `quorum run`) with a `grandchild` turn. Whatever is
/// still alive when it is dropped (the test failed) is killed, so no run
/// leaves strays.
struct Case {
    dir: tempfile::TempDir,
    quorum: Child,
    status: Option<ExitStatus>,
    agent: Proc,
    grandchild: Proc,
}

impl Case {
    /// Starts `quorum call --agent AGENT --input INPUT` and waits until the
    /// agent has started its grandchild.
    fn start(agent: &str, input: &str) -> Case {
        Case::start_with(&["call", "--json", "--agent", agent, "--input", input])
    }

    /// Starts quorum with `args` and waits until the agent has started its
    /// grandchild.
    fn start_with(args: &[&str]) -> Case {
        Case::spawn(args, None, |_| {})
    }

    /// As [`Case::start`], for an agent that may exit as soon as it has
    /// reported (the `orphan` scenario).
    fn start_crashing(agent: &str, input: &str) -> Case {
        let mut case = Case::spawn_any(
            &["call", "--json", "--agent", agent, "--input", input],
            None,
            |_| {},
        );
        case.agent = Proc::find_or_gone("the agent", case.agent.pid);
        case
    }

    /// The interactive TUI in a 120x40 pseudo-terminal; `type_keys` types
    /// into it once it runs.
    fn start_tui(type_keys: &[u8]) -> (Case, Terminal) {
        let terminal = Terminal::open(120, 40);
        let keys = type_keys.to_vec();
        let case = Case::spawn(&[], Some(&terminal), |t| {
            t.wait_for("Ctrl+C quits");
            t.type_keys(&keys);
        });
        (case, terminal)
    }

    fn spawn(args: &[&str], tty: Option<&Terminal>, after: impl FnOnce(&Terminal)) -> Case {
        let case = Case::spawn_any(args, tty, after);
        assert!(case.agent.alive() && case.grandchild.alive());
        case
    }

    /// Starts quorum and waits for the agent's report; only the grandchild
    /// must be alive then.
    fn spawn_any(args: &[&str], tty: Option<&Terminal>, after: impl FnOnce(&Terminal)) -> Case {
        let dir = tempfile::tempdir().unwrap();
        let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
        let config = dir.path().join("quorum.toml");
        std::fs::write(
            &config,
            format!(
                "[agents.fake]\ncommand = {fake:?}\n\n\
                 [agents.stubborn]\ncommand = {fake:?}\nargs = [\"--ignore-stdin-close\"]\n\n\
                 [agents.detached]\ncommand = \"setsid\"\n\
                 args = [\"-f\", {fake:?}, \"--ignore-stdin-close\"]\n"
            ),
        )
        .unwrap();
        let record = dir.path().join("call.jsonl");
        let file = |name: &str| Stdio::from(std::fs::File::create(dir.path().join(name)).unwrap());
        let mut command = common::quorum(dir.path());
        command
            .arg("--config")
            .arg(&config)
            .args(args)
            .arg("--record")
            .arg(&record)
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .env("TERM", "xterm-256color")
            .current_dir(dir.path());
        match tty {
            Some(t) => command
                .stdin(t.slave())
                .stdout(t.slave())
                .stderr(file("stderr")),
            None => command
                .stdin(Stdio::null())
                .stdout(file("stdout"))
                .stderr(file("stderr")),
        };
        let mut quorum = command.spawn().unwrap();
        if let Some(t) = tty {
            after(t);
        }
        let pattern = regex::Regex::new(r"grandchild (\d+) agent (\d+)").unwrap();
        let mut pids = None;
        let reported = wait_until(PATIENCE, || {
            let text = std::fs::read_to_string(&record).unwrap_or_default();
            pids = pattern
                .captures(&text)
                .map(|c| (c[1].parse().unwrap(), c[2].parse().unwrap()));
            pids.is_some() || quorum.try_wait().unwrap().is_some()
        });
        let Some((grandchild, agent)) = pids else {
            let _ = quorum.kill();
            let _ = quorum.wait();
            panic!(
                "the agent never reported its grandchild (reported: {reported}); stderr: {}",
                read(&dir.path().join("stderr"))
            );
        };
        let case = Case {
            quorum,
            status: None,
            agent: Proc::find_or_gone("the agent", agent),
            grandchild: Proc::find("the grandchild", grandchild),
            dir,
        };
        assert!(case.grandchild.alive());
        case
    }

    fn signal(&self, signal: Signal) {
        kill(Pid::from_raw(self.quorum.id() as i32), signal).unwrap();
    }

    /// Waits for quorum to exit.
    fn exit(&mut self) -> ExitStatus {
        let mut status = None;
        let exited = wait_until(PATIENCE, || {
            status = self.quorum.try_wait().unwrap();
            status.is_some()
        });
        assert!(exited, "quorum did not exit; stderr: {}", self.stderr());
        self.status = status;
        status.unwrap()
    }

    /// What quorum started that is still alive.
    fn left(&self) -> Vec<String> {
        [&self.agent, &self.grandchild]
            .into_iter()
            .filter(|p| p.alive())
            .map(|p| format!("{} (pid {})", p.what, p.pid))
            .collect()
    }

    /// Asserts that, the moment quorum has exited, nothing it started is
    /// alive: `call` and `run` wait for their agents before they exit.
    fn assert_gone_at_exit(&self) {
        let left = self.left();
        assert!(
            left.is_empty(),
            "still running as quorum exited: {left:?}; stderr: {}",
            self.stderr()
        );
    }

    /// Asserts that, soon after quorum's exit, nothing it started is alive.
    fn assert_nothing_left(&self) {
        wait_until(GONE_WITHIN, || self.left().is_empty());
        let left = self.left();
        assert!(
            left.is_empty(),
            "still running after quorum exited: {left:?}; stderr: {}",
            self.stderr()
        );
    }

    fn stderr(&self) -> String {
        read(&self.dir.path().join("stderr"))
    }

    fn stdout(&self) -> String {
        read(&self.dir.path().join("stdout"))
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(PathBuf::from(path)).unwrap_or_default()
}

impl Drop for Case {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.quorum.kill();
            let _ = self.quorum.wait();
        }
        for p in [&self.agent, &self.grandchild] {
            if p.alive() {
                let _ = kill(Pid::from_raw(p.pid), Signal::SIGKILL);
            }
        }
    }
}

#[test]
fn sigint_cancels_the_call_and_leaves_nothing_running() {
    let mut case = Case::start("fake", "grandchild 600");
    case.signal(Signal::SIGINT);
    let status = case.exit();
    assert_eq!(status.code(), Some(1), "{}", case.stderr());
    assert!(
        case.stdout().contains(r#""stop_reason":"cancelled""#),
        "{}",
        case.stdout()
    );
    case.assert_gone_at_exit();
}

#[test]
fn quorum_run_waits_for_its_agents_before_it_exits() {
    let mut case = run_case("stubborn", "grandchild 1");
    let status = case.exit();
    assert_eq!(status.code(), Some(0), "{}", case.stderr());
    case.assert_gone_at_exit();
}

#[test]
fn sigterm_ends_the_call_and_leaves_nothing_running() {
    let mut case = Case::start("fake", "grandchild 600");
    case.signal(Signal::SIGTERM);
    let status = case.exit();
    assert_eq!(status.code(), Some(143), "{}", case.stderr());
    case.assert_nothing_left();
}

/// `quorum run` on a scripted model whose one tool call asks `agent` for
/// `input`.
fn run_case(agent: &str, input: &str) -> Case {
    let scripts = tempfile::tempdir().unwrap();
    let script = scripts.path().join("model.json");
    let call =
        serde_json::json!({"name": "subagent", "arguments": {"agent": agent, "input": input}});
    std::fs::write(
        &script,
        serde_json::json!([{"tool_calls": [call]}, {"text": "done"}]).to_string(),
    )
    .unwrap();
    let model = format!("script:{}", script.display());
    // The model reads its script at start: the file may go with this call.
    Case::start_with(&["run", "--model", &model, "-p", "go"])
}

#[test]
fn sigterm_ends_quorum_run_and_leaves_nothing_running() {
    let mut case = run_case("fake", "grandchild 600");
    case.signal(Signal::SIGTERM);
    let status = case.exit();
    assert_eq!(status.code(), Some(143), "{}", case.stderr());
    case.assert_nothing_left();
}

#[test]
fn sigkill_of_quorum_leaves_nothing_running() {
    let mut case = Case::start("fake", "grandchild 600");
    case.signal(Signal::SIGKILL);
    let status = case.exit();
    assert_eq!(status.signal(), Some(9));
    case.assert_nothing_left();
}

#[test]
fn an_agent_that_ignores_its_closed_stdin_is_ended_after_a_normal_call() {
    let mut case = Case::start("stubborn", "grandchild 1");
    let status = case.exit();
    assert_eq!(status.code(), Some(0), "{}", case.stderr());
    assert!(
        case.stdout().contains("grandchild")
            && case.stdout().contains(r#""stop_reason":"end_turn""#),
        "{}",
        case.stdout()
    );
    case.assert_nothing_left();
}

/// An agent started through a launcher that re-spawns it in a session of
/// its own (`setsid -f`, as `npx`/`uvx`-style launchers and daemonising
/// agents do) and that ignores its closed stdin is ended when the call ends.
#[test]
fn an_agent_that_leaves_its_group_is_ended_after_a_normal_call() {
    let mut case = Case::start("detached", "grandchild 1");
    let status = case.exit();
    assert_eq!(status.code(), Some(0), "{}", case.stderr());
    case.assert_nothing_left();
}

/// The same agent outlives no `kill -9` of quorum.
#[test]
fn sigkill_of_quorum_ends_an_agent_that_left_its_group() {
    let mut case = Case::start("detached", "grandchild 600");
    case.signal(Signal::SIGKILL);
    let status = case.exit();
    assert_eq!(status.signal(), Some(9));
    case.assert_nothing_left();
}

/// A daemon an agent starts by double-forking (a shell that starts it in
/// a session of its own and exits) is ended with the call, and with a
/// `kill -9` of quorum.
#[test]
fn a_double_forking_daemon_is_ended_with_the_call_and_with_quorum() {
    let mut case = Case::start("stubborn", "daemon 1");
    let status = case.exit();
    assert_eq!(status.code(), Some(0), "{}", case.stderr());
    case.assert_nothing_left();
    let mut case = Case::start("fake", "daemon 600");
    case.signal(Signal::SIGKILL);
    let status = case.exit();
    assert_eq!(status.signal(), Some(9));
    case.assert_nothing_left();
}

/// A helper an agent put in a session of its own is ended when the agent
/// dies first (it crashes), by the time the call ends.
#[test]
fn a_helper_that_outlives_its_agent_is_ended() {
    let mut case = Case::start_crashing("fake", "orphan");
    let status = case.exit();
    assert_ne!(
        status.code(),
        Some(0),
        "the agent crashed: {}",
        case.stderr()
    );
    case.assert_nothing_left();
}

#[test]
fn quitting_the_tui_with_a_background_task_running_leaves_nothing_running() {
    let (mut case, terminal) = Case::start_tui(b"@fake! grandchild 600\r");
    terminal.wait_for("running");
    // Ctrl+C on an empty composer asks first (a task runs); the second quits.
    terminal.type_keys(b"\x03");
    terminal.wait_for("Ctrl+C again quits and cancels them");
    terminal.type_keys(b"\x03");
    let status = case.exit();
    assert_eq!(status.code(), Some(0), "{}", case.stderr());
    terminal.assert_restored();
    case.assert_nothing_left();
}

#[test]
fn sigterm_and_sighup_end_the_tui_and_give_the_terminal_back() {
    for signal in [Signal::SIGTERM, Signal::SIGHUP] {
        let (mut case, terminal) = Case::start_tui(b"@fake! grandchild 600\r");
        case.signal(signal);
        let status = case.exit();
        assert_eq!(status.code(), Some(0), "{signal}: {}", case.stderr());
        terminal.assert_restored();
        case.assert_nothing_left();
    }
}

/// A terminal that goes away with no SIGHUP for quorum (a terminal
/// without a session, or one whose session's leader outlives it, ignoring
/// SIGHUP: `perf`, a debugger) ends the TUI as SIGHUP does: it read
/// nothing, on and on, at 100 % of a core (crossterm's reader), and never
/// ended.
#[test]
fn a_terminal_closed_without_sighup_ends_the_tui_and_its_agents() {
    // Idle: nothing is drawn that would fail.
    let dir = tempfile::tempdir().unwrap();
    let mut terminal = Terminal::open(100, 30);
    let mut quorum = terminal.spawn(
        common::quorum(dir.path())
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .current_dir(dir.path()),
        Stdio::from(std::fs::File::create(dir.path().join("stderr")).unwrap()),
    );
    terminal.wait_for("Ctrl+C quits");
    terminal.hang_up();
    let status = exit_within(&mut quorum, GONE_WITHIN);
    let stderr = read(&dir.path().join("stderr"));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "quorum's exit once its terminal hung up (None: it ran on); stderr: {stderr}"
    );
    // An agent running: its box's spinner is drawn no more.
    let (mut case, mut terminal) = Case::start_tui(b"@fake! grandchild 600\r");
    terminal.wait_for("running");
    terminal.hang_up();
    let status = case.exit();
    assert_eq!(status.code(), Some(0), "{}", case.stderr());
    case.assert_nothing_left();
}

/// A replay, and a followed session, whose terminal closes: quorum ends
/// quietly, as the TUI does (a replay hides the cursor, and showing it
/// again on a terminal that is gone is not an error to print).
#[test]
fn a_replay_or_watch_whose_terminal_closes_ends_quietly() {
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl");
    for (args, shown) in [(["replay"], "replay 1x"), (["watch"], "watching")] {
        let dir = tempfile::tempdir().unwrap();
        let terminal = Terminal::open(100, 30);
        let stderr = dir.path().join("stderr");
        let mut quorum = terminal.spawn(
            common::quorum(dir.path())
                .args(args)
                .arg(&demo)
                .env("XDG_STATE_HOME", dir.path().join("state"))
                .current_dir(dir.path()),
            Stdio::from(std::fs::File::create(&stderr).unwrap()),
        );
        let mut terminal = terminal;
        terminal.wait_for(shown);
        terminal.hang_up();
        let status = exit_within(&mut quorum, GONE_WITHIN);
        let stderr = read(&stderr);
        assert_eq!(
            (status.and_then(|s| s.code()), stderr.as_str()),
            (Some(0), ""),
            "{args:?}: quorum's exit and stderr once its terminal hung up"
        );
    }
}

/// How `child` exited, if it did within `within`; else it is killed.
fn exit_within(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let mut status = None;
    wait_until(within, || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    status
}

/// Esc while the internal agent's shell command runs ends the command's
/// whole process group, its background children too, while quorum goes on.
#[test]
fn esc_ends_an_internal_shell_command_and_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("model.json");
    // A duration no other process has, to find the sleep by (its pid as the
    // shell sees it may be another namespace's).
    let duration = format!("{}.{}", 600 + std::process::id() % 1000, 417);
    let command = format!("sleep {duration} & echo started > started.txt; wait");
    let shell = serde_json::json!({"name": "shell", "arguments": {"command": command}});
    let call = serde_json::json!({"name": "subagent", "arguments": {"input": "run it"}});
    std::fs::write(
        &script,
        serde_json::json!([
            {"tool_calls": [call]},
            {"tool_calls": [shell]},
            {"text": "never"},
            {"text": "never"}
        ])
        .to_string(),
    )
    .unwrap();
    let terminal = Terminal::open(120, 40);
    let mut quorum = terminal.spawn(
        common::quorum(dir.path())
            .arg("--model")
            .arg(format!("script:{}", script.display()))
            .arg("--record")
            .arg(dir.path().join("session.jsonl"))
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .current_dir(dir.path()),
        Stdio::from(std::fs::File::create(dir.path().join("stderr")).unwrap()),
    );
    /// Kills what is left if the test fails.
    struct Guard(Vec<i32>);
    impl Drop for Guard {
        fn drop(&mut self) {
            for pid in &self.0 {
                let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
            }
        }
    }
    let mut guard = Guard(vec![quorum.id() as i32]);
    terminal.wait_for("Ctrl+C quits");
    terminal.type_keys(b"go\r");
    let started = dir.path().join("started.txt");
    assert!(
        wait_until(PATIENCE, || read(&started).ends_with('\n')),
        "the shell command never ran; stderr: {}",
        read(&dir.path().join("stderr"))
    );
    let mut found = None;
    assert!(wait_until(PATIENCE, || {
        found = find_by_cmdline(&["sleep", &duration]);
        found.is_some()
    }));
    let sleep = Proc::find("the shell's background sleep", found.unwrap());
    guard.0.push(sleep.pid);
    assert!(sleep.alive());
    terminal.type_keys(b"\x1b");
    assert!(
        wait_until(GONE_WITHIN, || !sleep.alive()),
        "the shell's child outlived Esc"
    );
    assert!(quorum.try_wait().unwrap().is_none(), "quorum goes on");
    // (The events, to say what happened if the turn's end is not shown.)
    let events = dir.path().join("session.jsonl");
    assert!(
        wait_until(PATIENCE, || read(&events).contains("turn cancelled")),
        "the chat's turn never ended as cancelled; the session's events:\n{}",
        read(&events)
    );
    terminal.wait_for("turn cancelled");
    terminal.type_keys(b"\x03");
    assert!(wait_until(PATIENCE, || quorum
        .try_wait()
        .unwrap()
        .is_some()));
    guard.0.clear();
}

/// The pid of a process whose command line is exactly `argv`.
fn find_by_cmdline(argv: &[&str]) -> Option<i32> {
    let wanted: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc").ok()?.find_map(|entry| {
        let pid: i32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        (cmdline == wanted).then_some(pid)
    })
}

/// A git quorum runs (here the `git worktree add` of `quorum call
/// --worktree`) ends with quorum, and so does what that git started,
/// whether quorum is terminated or killed: it runs in a session of its own
/// that the exit path and the watchdog end. The git is a shim first on
/// quorum's PATH that, for `worktree add`, starts a `sleep 600` and waits.
#[test]
fn a_git_quorum_runs_ends_with_quorum_and_so_does_what_it_started() {
    for signal in [Signal::SIGTERM, Signal::SIGKILL] {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let repo = home.join("repo");
        std::fs::create_dir(&repo).unwrap();
        for args in [
            &["init", "-q", "-b", "main"][..],
            &["commit", "-q", "--allow-empty", "-m", "first"],
        ] {
            let out = common::git(home)
                .args(args)
                .current_dir(&repo)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
        }
        let real = common::hermetic_path().join("git");
        let marks = home.join("marks");
        let shim = home.join("shim");
        std::fs::create_dir(&shim).unwrap();
        std::fs::write(
            shim.join("git"),
            format!(
                "#!/bin/sh\ncase \" $* \" in *\" worktree add \"*)\n  \
                 echo $$ >> {marks:?}; sleep 600 & echo $! >> {marks:?}; wait; exit 1 ;;\nesac\n\
                 exec {real:?} \"$@\"\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(
            shim.join("git"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
        let config = home.join("quorum.toml");
        std::fs::write(&config, format!("[agents.fake]\ncommand = {fake:?}\n")).unwrap();
        let path = format!("{}:{}", shim.display(), common::hermetic_path().display());
        let mut quorum = common::quorum(home)
            .env("PATH", path)
            .arg("--config")
            .arg(&config)
            .args(["call", "--agent", "fake", "--worktree", "--input", "hi"])
            .current_dir(&repo)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut pids: Vec<i32> = Vec::new();
        let started = wait_until(PATIENCE, || {
            pids = read(&marks)
                .lines()
                .filter_map(|l| l.parse().ok())
                .collect();
            pids.len() == 2 || quorum.try_wait().unwrap().is_some()
        });
        assert!(started && pids.len() == 2, "no git worktree add: {pids:?}");
        let procs = [
            Proc::find("the git", pids[0]),
            Proc::find("the git's sleep", pids[1]),
        ];
        kill(Pid::from_raw(quorum.id() as i32), signal).unwrap();
        // It does not wait for the git: its runtime never does.
        let status = exit_within(&mut quorum, PATIENCE);
        let expected = match signal {
            Signal::SIGTERM => (Some(143), None),
            _ => (None, Some(9)),
        };
        assert_eq!(
            status.map(|s| (s.code(), s.signal())),
            Some(expected),
            "quorum's exit after {signal}"
        );
        wait_until(GONE_WITHIN, || procs.iter().all(|p| !p.alive()));
        let left: Vec<_> = procs.iter().filter(|p| p.alive()).map(|p| p.what).collect();
        for p in &procs {
            let _ = kill(Pid::from_raw(p.pid), Signal::SIGKILL);
        }
        assert!(left.is_empty(), "after {signal}: still running: {left:?}");
    }
}
