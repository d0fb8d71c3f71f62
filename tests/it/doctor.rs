//! `quorum doctor`: on this machine (bubblewrap and git there), on one
//! without bubblewrap (a `PATH` without it), with an agent that announces
//! a sign-in in `initialize`, with a config typo, with tmux keeping
//! notifications in, with a host ssh cannot reach; `--json` carrying the
//! same; and nothing it started left running, however it ends.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::common;
use common::shell::{Shell, shell_with, text};

/// `quorum doctor ARGS` in `shell`, outside tmux whatever the tests run
/// in, with `env` set.
fn doctor_with(shell: &Shell, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut all = vec!["doctor"];
    all.extend(args);
    let mut command = shell.command(&all);
    command.env_remove("TMUX").env("TERM", "xterm-256color");
    command.envs(env.iter().copied());
    common::shell::bounded(command, Duration::from_secs(90))
        .unwrap_or_else(|| panic!("quorum doctor {args:?} is wedged"))
}

fn doctor(shell: &Shell) -> Output {
    doctor_with(shell, &[], &[])
}

/// The line of check `name` (`ok    git         2.47.3 …`).
fn line<'a>(stdout: &'a str, name: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| {
            l.get(6..)
                .is_some_and(|rest| rest.starts_with(&format!("{name} ")))
        })
        .unwrap_or_else(|| panic!("no line for {name}:\n{stdout}"))
}

/// Asserts the line of `name` has `status` and holds every one of `said`.
fn says(stdout: &str, name: &str, status: &str, said: &[&str]) {
    let line = line(stdout, name);
    assert!(
        line.starts_with(&format!("{status:<4}  ")),
        "{name} is not {status}:\n{stdout}"
    );
    for s in said {
        assert!(line.contains(s), "{name}'s line lacks {s:?}:\n{line}");
    }
}

#[test]
fn on_this_machine_each_line_says_what_it_found_and_it_exits_0() {
    let shell = shell_with("");
    let out = doctor(&shell);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let config = shell.config.display().to_string();
    says(&stdout, "config", "ok", &[&config, "read and checked"]);
    says(&stdout, "git", "ok", &["git"]);
    let git = line(&stdout, "git");
    assert!(
        git.split_whitespace()
            .nth(2)
            .is_some_and(|v| v.chars().next().is_some_and(|c| c.is_ascii_digit())),
        "no version: {git}"
    );
    says(
        &stdout,
        "bubblewrap",
        "ok",
        &[
            "bubblewrap 0.",
            "makes quorum's sandbox here",
            "the seccomp filter in force",
        ],
    );
    // The test's state directory is not made yet.
    says(&stdout, "state", "ok", &["is made at the first session"]);
    says(&stdout, "agents", "ok", &["installed: fake"]);
    says(
        &stdout,
        "agent fake",
        "ok",
        &[
            "quorum-fake-agent 1.0.0 answered initialize",
            "(sandboxed)",
            "it asks for no sign-in",
        ],
    );
    says(
        &stdout,
        "terminal",
        "ok",
        &["TERM=\"xterm-256color\"", "256 colours"],
    );
    says(&stdout, "tmux", "ok", &["not inside tmux"]);
    says(&stdout, "hosts", "ok", &["none configured"]);
    assert!(!stdout.contains('\x1b'), "colour on a pipe:\n{stdout}");
    // Aligned: every detail starts in the same column.
    let column = |l: &str| {
        let rest = &l[6..];
        let gap = rest.find("  ").unwrap();
        6 + gap + rest[gap..].find(|c: char| c != ' ').unwrap()
    };
    let first = column(stdout.lines().next().unwrap());
    for l in stdout.lines() {
        assert_eq!(column(l), first, "not aligned:\n{stdout}");
    }
    assert!(!stdout.lines().any(|l| l.starts_with("fail")), "{stdout}");
}

/// A folder of links to `tools` alone, found on the test's `PATH`: a
/// `PATH` without the rest. Outside the session directory (quorum finds
/// nothing on a `PATH` folder inside it).
fn path_of(tools: &[&str]) -> tempfile::TempDir {
    let bin = tempfile::tempdir().unwrap();
    for tool in tools {
        let found = quorum::runtime::path::locate(tool).unwrap_or_else(|| panic!("no {tool}"));
        std::os::unix::fs::symlink(found, bin.path().join(tool)).unwrap();
    }
    bin
}

#[test]
fn without_bubblewrap_its_line_fails_saying_how_to_install_it_and_it_exits_1() {
    let shell = shell_with("");
    let path = path_of(&["git"]);
    let out = doctor_with(&shell, &[], &[("PATH", &path.path().display().to_string())]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    says(
        &stdout,
        "bubblewrap",
        "fail",
        &[
            "not installed (no bwrap on PATH)",
            "nothing quorum runs is sandboxed",
            "; fix: ",
            "install bubblewrap",
        ],
    );
    // The rest goes on: git is there, the agent runs unsandboxed.
    says(&stdout, "git", "ok", &[]);
    says(
        &stdout,
        "agent fake",
        "ok",
        &["(not sandboxed: no bubblewrap)"],
    );
}

/// bubblewrap as a machine without user namespaces has it: it says so,
/// and fails.
#[test]
fn a_bubblewrap_that_cannot_make_namespaces_fails_saying_what_it_said_and_what_to_set() {
    use std::os::unix::fs::PermissionsExt;
    let path = path_of(&["git"]);
    let bwrap = path.path().join("bwrap");
    std::fs::write(
        &bwrap,
        "#!/bin/sh\n[ \"$1\" = --version ] && { echo 'bubblewrap 0.8.0'; exit 0; }\n\
         echo 'bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&bwrap, std::fs::Permissions::from_mode(0o755)).unwrap();
    let shell = shell_with("");
    let out = doctor_with(&shell, &[], &[("PATH", &path.path().display().to_string())]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    says(
        &stdout,
        "bubblewrap",
        "fail",
        &[
            "bubblewrap 0.8.0 cannot make quorum's sandbox here: bwrap: No permissions to create new namespace",
            "; fix: ",
            "user namespaces",
        ],
    );
    // Its agent, which worktree tasks start in the sandbox, cannot start there.
    says(
        &stdout,
        "agent fake",
        "fail",
        &["answers outside the sandbox, but not inside it"],
    );
}

#[test]
fn without_git_its_line_fails_saying_how_to_install_it() {
    let shell = shell_with("");
    let path = path_of(&["bwrap", "cat"]);
    let out = doctor_with(&shell, &[], &[("PATH", &path.path().display().to_string())]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    says(
        &stdout,
        "git",
        "fail",
        &["not found on PATH", "; fix: ", "install git"],
    );
    says(&stdout, "bubblewrap", "ok", &[]);
}

#[test]
fn an_agent_that_announces_a_sign_in_is_said_to_need_one_naming_its_methods() {
    let shell = shell_with("args = [\"--auth-required\"]\n");
    let out = doctor(&shell);
    let stdout = text(&out.stdout);
    // A warning: the defaults still work.
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    says(
        &stdout,
        "agent fake",
        "warn",
        &[
            "it may need a sign-in: it offers API key (api-key)",
            "Sign in with a browser (browser)",
            "; fix: run `",
            "quorum-fake-agent login` in a terminal to sign in",
        ],
    );
    // Its sign-in file there: no warning.
    let shell = shell_with("args = [\"--auth-required\"]\ncredentials = [\"~/fake-auth.json\"]\n");
    std::fs::write(shell.dir.path().join("fake-auth.json"), "{}").unwrap();
    let stdout = text(&doctor(&shell).stdout);
    says(
        &stdout,
        "agent fake",
        "ok",
        &["it offers a sign-in (API key (api-key)", "fake-auth.json"],
    );
}

/// An agent that starts only where it can write outside its session
/// directory: outside the sandbox, not inside it.
#[test]
fn an_agent_that_answers_only_outside_the_sandbox_is_said_to() {
    use std::os::unix::fs::PermissionsExt;
    // Not under /tmp, which is the sandbox's own (and writable) inside.
    let outside = tempfile::tempdir_in("/var/tmp").unwrap();
    let script = outside.path().join("picky-agent");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nmark=$1; shift\n: > \"$mark\" || {{ echo \"cannot write $mark\" >&2; exit 3; }}\nexec {} \"$@\"\n",
            env!("CARGO_BIN_EXE_quorum-fake-agent")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mark = outside.path().join("mark");
    let shell = shell_with(&format!(
        "[agents.picky]\ncommand = {:?}\nargs = [{:?}]\n",
        script.display().to_string(),
        mark.display().to_string()
    ));
    let out = doctor(&shell);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    says(
        &stdout,
        "agent picky",
        "fail",
        &[
            "quorum-fake-agent 1.0.0 answers outside the sandbox, but not inside it, where worktree tasks start it",
            "initialize failed: exited with code",
            "Read-only file system",
            "; fix: ",
            "sandbox = \"none\"",
        ],
    );
    assert!(mark.exists(), "it never ran outside the sandbox");
    says(&stdout, "agent fake", "ok", &["(sandboxed)"]);
}

/// The config file with `typo` as its first line.
fn with_typo(shell: &Shell, typo: &str) {
    let config = std::fs::read_to_string(&shell.config).unwrap();
    std::fs::write(&shell.config, format!("{typo}\n{config}")).unwrap();
}

#[test]
fn a_config_typo_fails_naming_the_file_the_line_and_the_nearest_name() {
    let shell = shell_with("");
    with_typo(&shell, "max_paralel = 3");
    let out = doctor(&shell);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    let config = shell.config.display().to_string();
    says(
        &stdout,
        "config",
        "fail",
        &[
            &format!("{config}: line 1, column 1: unknown field `max_paralel`"),
            "did you mean `max_parallel`?",
            &format!("; fix: in {config}, line 1, write `max_parallel` for `max_paralel`"),
        ],
    );
    // The other checks go on, on quorum's defaults.
    says(&stdout, "git", "ok", &[]);
    says(&stdout, "bubblewrap", "ok", &[]);
}

/// A `[hosts.NAME]` ssh cannot reach: a port on loopback nothing listens
/// on (yet), and the port.
fn unreachable_host(name: &str) -> (String, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let table =
        format!("[hosts.{name}]\nssh = \"nobody@127.0.0.1\"\nssh_args = [\"-p\", \"{port}\"]\n");
    (table, port)
}

#[test]
fn the_chat_line_names_the_chat_chosen_or_what_keeps_it_from_running() {
    let shell = shell_with("");
    let out = doctor_with(&shell, &["--model", "acp:fake"], &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    says(
        &stdout,
        "chat",
        "ok",
        &["acp:fake: the agent fake is the chat (from --model)"],
    );
    // Nothing chosen: quorum's default, the installed agent (the tests'
    // environment keeps the chat off with QUORUM_MODEL=none; not here).
    let mut command = shell.command(&["doctor"]);
    command.env_remove("QUORUM_MODEL").env_remove("TMUX");
    let out = common::shell::bounded(command, Duration::from_secs(90)).unwrap();
    says(
        &text(&out.stdout),
        "chat",
        "ok",
        &["acp:fake: the agent fake is the chat (from quorum's default)"],
    );
    let out = doctor_with(&shell, &["--model", "none"], &[]);
    says(
        &text(&out.stdout),
        "chat",
        "ok",
        &["off (`none`, from --model)"],
    );
    // Not installed here (the tests' PATH has none of the built-in agents).
    let out = doctor_with(&shell, &["--model", "acp:claude"], &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    says(
        &stdout,
        "chat",
        "fail",
        &[
            "claude is not installed",
            "npm i -g @zed-industries/claude-agent-acp",
            "; fix: install the agent",
        ],
    );
}

#[test]
fn json_carries_the_same_checks_as_the_lines() {
    let (host, _) = unreachable_host("gone");
    let shell = shell_with(&format!("args = [\"--auth-required\"]\n{host}"));
    let lines = doctor(&shell);
    let json = doctor_with(&shell, &["--json"], &[]);
    assert_eq!(json.status.code(), Some(1), "{}", text(&json.stderr));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&json.stdout)));
    assert_eq!(v["status"], "fail");
    let checks = v["checks"].as_array().unwrap();
    let stdout = text(&lines.stdout);
    assert_eq!(checks.len(), stdout.lines().count(), "{stdout}");
    for c in checks {
        let name = c["name"].as_str().unwrap();
        let status = c["status"].as_str().unwrap();
        let detail = c["detail"].as_str().unwrap();
        let mut said = vec![detail.to_string()];
        if let Some(fix) = c["fix"].as_str() {
            said.push(format!("; fix: {fix}"));
        }
        // The agent's time to answer differs from run to run.
        if name.starts_with("agent ") {
            said[0] = detail.split(" in ").next().unwrap().to_string();
        }
        let said: Vec<&str> = said.iter().map(String::as_str).collect();
        says(&stdout, name, status, &said);
    }
    let named = |name: &str| checks.iter().find(|c| c["name"] == name).unwrap();
    assert_eq!(named("config")["status"], "ok");
    assert_eq!(named("config")["fix"], serde_json::Value::Null);
    let agent = named("agent fake");
    assert_eq!(agent["status"], "warn");
    assert!(
        agent["detail"]
            .as_str()
            .unwrap()
            .contains("API key (api-key)")
            && agent["fix"].as_str().unwrap().contains("login"),
        "{agent}"
    );
    assert_eq!(named("host gone")["status"], "fail");
}

/// A tmux server of the test's own, its socket in `dir`: `TMUX` as tmux
/// sets it inside, pointing at it. Killed when dropped.
struct Tmux {
    socket: std::path::PathBuf,
}

impl Tmux {
    fn start(dir: &Path) -> Tmux {
        let socket = dir.join("tmux.sock");
        let tmux = Tmux { socket };
        tmux.run(&["new-session", "-d", "-s", "doctor"]);
        tmux
    }

    fn run(&self, args: &[&str]) {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("the tests need tmux: apt-get install tmux");
        assert!(out.status.success(), "tmux {args:?}: {}", text(&out.stderr));
    }

    fn env(&self) -> String {
        format!("{},1,0", self.socket.display())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

#[test]
fn inside_tmux_passthrough_and_focus_events_are_asked_of_the_server() {
    // A short socket path: tmux's are at most about 100 bytes.
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let tmux = Tmux::start(dir.path());
    tmux.run(&["set", "-g", "allow-passthrough", "off"]);
    tmux.run(&["set", "-g", "focus-events", "off"]);
    let shell = shell_with("");
    let out = doctor_with(&shell, &[], &[("TMUX", &tmux.env())]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    says(&stdout, "tmux", "ok", &["inside tmux 3."]);
    says(
        &stdout,
        "tmux passthrough",
        "warn",
        &[
            "allow-passthrough off",
            "; fix: set -g allow-passthrough on",
        ],
    );
    says(
        &stdout,
        "tmux focus-events",
        "warn",
        &["off", "; fix: set -g focus-events on"],
    );
    tmux.run(&["set", "-g", "allow-passthrough", "on"]);
    tmux.run(&["set", "-g", "focus-events", "on"]);
    let stdout = text(&doctor_with(&shell, &[], &[("TMUX", &tmux.env())]).stdout);
    says(
        &stdout,
        "tmux passthrough",
        "ok",
        &["allow-passthrough on: notifications reach your terminal"],
    );
    says(&stdout, "tmux focus-events", "ok", &["on"]);
}

#[test]
fn a_host_ssh_cannot_reach_fails_saying_what_ssh_said() {
    let (host, port) = unreachable_host("gone");
    let shell = shell_with(&host);
    let out = doctor(&shell);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    says(
        &stdout,
        "host gone",
        "fail",
        &[
            "nobody@127.0.0.1: cannot connect",
            "Connection refused",
            &format!("; fix: `ssh -p {port} nobody@127.0.0.1 true` must work without a question"),
        ],
    );
}

/// Agents that do not end by themselves: one that never answers
/// `initialize`, one that answers but ignores its closed stdin, both in
/// the sandbox and outside it.
const STUBBORN: &str = "
[agents.hang]
command = \"{agent}\"
args = [\"--hang-initialize\", \"--ignore-stdin-close\"]
startup_timeout = 1
[agents.deaf]
command = \"{agent}\"
args = [\"--ignore-stdin-close\"]
[agents.deaf-outside]
command = \"{agent}\"
args = [\"--ignore-stdin-close\"]
sandbox = \"none\"
";

fn stubborn() -> Shell {
    shell_with(&STUBBORN.replace("{agent}", env!("CARGO_BIN_EXE_quorum-fake-agent")))
}

#[test]
fn nothing_it_started_is_left_running_when_it_returns() {
    let shell = stubborn();
    let out = doctor(&shell);
    // At once: it ended them before it returned.
    let left = common::models::processes_with_home(shell.dir.path());
    let stdout = text(&out.stdout);
    assert!(left.is_empty(), "left running: {left:?}\n{stdout}");
    assert!(common::models::leftovers(shell.dir.path()).is_empty());
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    says(
        &stdout,
        "agent hang",
        "fail",
        &["no answer to initialize within 1 s", "startup_timeout"],
    );
    says(&stdout, "agent deaf", "ok", &["(sandboxed)"]);
    says(
        &stdout,
        "agent deaf-outside",
        "ok",
        &["(not sandboxed: sandbox = \"none\")"],
    );
}

#[test]
fn nothing_it_started_is_left_running_when_it_is_terminated() {
    use nix::sys::signal::{Signal, kill};
    let shell = shell_with(&format!(
        "[agents.hang]\ncommand = {:?}\nargs = [\"--hang-initialize\", \"--ignore-stdin-close\"]\nstartup_timeout = 60\n",
        env!("CARGO_BIN_EXE_quorum-fake-agent")
    ));
    let mut command = shell.command(&["doctor"]);
    command
        .env_remove("TMUX")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = command.spawn().unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let agent = env!("CARGO_BIN_EXE_quorum-fake-agent");
    // The hanging agent itself (not the reaper or bwrap that start it).
    let hanging = || {
        common::models::processes_with_home(shell.dir.path())
            .iter()
            .any(|p| {
                p.split_once(' ')
                    .is_some_and(|(_, cmd)| cmd.starts_with(&format!("{agent} --hang-initialize")))
            })
    };
    let started = common::pty::wait_until(Duration::from_secs(30), hanging);
    assert!(started, "the agents never started");
    kill(pid, Signal::SIGTERM).unwrap();
    let out = common::wait_output_bounded(child, "quorum doctor, terminated");
    assert_eq!(out.status.code(), Some(143), "{}", text(&out.stderr));
    let left = common::models::processes_with_home(shell.dir.path());
    assert!(left.is_empty(), "left running: {left:?}");
    assert!(common::models::leftovers(shell.dir.path()).is_empty());
}
