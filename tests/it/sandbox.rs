//! Nothing an agent writes runs outside its sandbox (issue 24): probes that
//! plant something through the fake agent's terminals, file writes and own
//! tools, then look for their mark outside the session directory. The marks
//! go under `/var/tmp`, never `/tmp`: the sandbox has a private `/tmp`, so
//! a mark there could not tell confinement from escape.
#![cfg(target_os = "linux")]

use crate::common;

use common::Bounded;

use std::path::{Path, PathBuf};

use common::shell::{Shell, shell, shell_in, shell_with, text};

/// These tests are about bubblewrap: without it they fail, saying so
/// (`.ci/run` installs it).
fn need_bwrap() {
    assert!(
        quorum::runtime::path::locate("bwrap").is_some(),
        "the sandbox tests need bubblewrap: apt-get install bubblewrap"
    );
}

/// A directory outside the session directory and outside `/tmp`, where a
/// probe that escaped leaves its mark.
fn outside() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("quorum-probe-")
        .tempdir_in("/var/tmp")
        .unwrap()
}

/// `quorum call --agent fake --input INPUT` in the shell's directory; its
/// stdout (the agent's final message).
fn call(s: &Shell, input: &str) -> String {
    let o = s.run_unwedged(&["call", "--agent", "fake", "--input", input]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let reply = text(&o.stdout);
    reply.strip_suffix('\n').unwrap_or(&reply).to_string()
}

/// Runs git in `dir` with a home of the test's own.
fn git(dir: &Path, args: &[&str]) -> String {
    let home = dir.join(".test-home");
    std::fs::create_dir_all(&home).unwrap();
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("HOME", &home)
        .env("GIT_CONFIG_GLOBAL", home.join("gitconfig"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .output_bounded();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    text(&out.stdout)
}

/// A repository in the shell's directory with one commit.
fn repository(s: &Shell) -> PathBuf {
    let dir = s.dir.path().canonicalize().unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join(".gitignore"), ".test-home/\nquorum.toml\n").unwrap();
    std::fs::write(dir.join("a.txt"), "one\n").unwrap();
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "first"]);
    dir
}

/// Escape 1: the environment of `terminal/create` was set on the
/// processes that start bubblewrap, so an `LD_PRELOAD` the agent built in
/// its directory ran outside the sandbox. Now it reaches the command
/// inside only: the library runs there (its mark inside the session
/// directory) and cannot write outside.
#[test]
fn a_terminals_environment_reaches_only_the_command_inside_the_sandbox() {
    need_bwrap();
    let s = shell();
    let out = outside();
    let dir = s.dir.path().canonicalize().unwrap();
    let source = dir.join("probe.c");
    std::fs::write(
        &source,
        r#"#include <fcntl.h>
#include <unistd.h>
static void mark(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) { write(fd, "x\n", 2); close(fd); }
}
__attribute__((constructor)) static void probe(void) {
    mark(OUTSIDE "/escaped");
    mark(INSIDE "/ran-inside");
}
"#,
    )
    .unwrap();
    let built = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(dir.join("pre.so"))
        .arg(format!("-DOUTSIDE=\"{}\"", out.path().display()))
        .arg(format!("-DINSIDE=\"{}\"", dir.display()))
        .arg(&source)
        .output_bounded();
    assert!(built.status.success(), "{built:?}");
    let input = format!(
        "term run --env LD_PRELOAD={}/pre.so echo ran",
        dir.display()
    );
    let reply = call(&s, &input);
    assert!(reply.starts_with("exit: 0"), "{reply}");
    assert!(reply.contains("\nran\n"), "{reply}");
    assert!(
        !out.path().join("escaped").exists(),
        "the library the agent built ran outside the sandbox"
    );
    assert!(
        dir.join("ran-inside").exists(),
        "the variable reached the command inside the sandbox"
    );
}

/// A command's environment starts from a small known set, then what the
/// agent asked for: quorum's own secrets are not in it.
#[test]
fn a_terminals_environment_starts_from_a_known_set() {
    need_bwrap();
    let s = shell();
    let o = s.run_unwedged_with(
        &[
            "call",
            "--agent",
            "fake",
            "--input",
            "term run --env ASKED=yes env",
        ],
        &[("QUORUM_TEST_SECRET", "swordfish")],
    );
    let reply = text(&o.stdout);
    assert!(reply.contains("\nASKED=yes\n"), "{reply}");
    assert!(reply.contains("\nFAKE_TERM=set\n"), "{reply}");
    assert!(reply.contains("\nPATH="), "{reply}");
    assert!(!reply.contains("swordfish"), "{reply}");
}

/// Escapes 3: a terminal wrote `.git/hooks/pre-commit` (run by the
/// person's next commit) and `fs/write_text_file` changed `.git/config`
/// (`core.fsmonitor`, run by their next `git status`). Both are refused
/// now, in the repository's `.git` and its in-tree `core.hooksPath`; and
/// the person's git runs nothing the agent planted.
#[test]
fn the_repository_machinery_is_read_only_to_agents() {
    need_bwrap();
    let s = shell();
    let dir = repository(&s);
    let out = outside();
    let mark = out.path().join("escaped");
    std::fs::create_dir(dir.join(".husky")).unwrap();
    git(&dir, &["config", "core.hooksPath", ".husky"]);
    let config_before = std::fs::read_to_string(dir.join(".git/config")).unwrap();
    let hook = format!("#!/bin/sh\\ntouch {}\\n", mark.display());

    // Through a terminal: read-only file system, inside the sandbox.
    for path in [".git/hooks/pre-commit", ".husky/pre-commit", ".git/config"] {
        let input = format!("term run printf '{hook}' > {path}; chmod +x {path}");
        let reply = call(&s, &input);
        assert!(reply.starts_with("exit: 1"), "{path}: {reply}");
        assert!(reply.contains("Read-only file system"), "{path}: {reply}");
    }
    // Through fs/write_text_file: refused, saying why.
    let fsmonitor = format!("[core]\n\tfsmonitor = touch {}\n", mark.display());
    for (path, why) in [
        (".git/config", "inside the repository's .git"),
        (".git/hooks/pre-commit", "inside the repository's .git"),
        (
            ".husky/pre-commit",
            ".husky, the repository's core.hooksPath",
        ),
    ] {
        let reply = call(&s, &format!("write {path} {fsmonitor}"));
        assert!(
            reply.starts_with(&format!("write failed: {path}: refused: ")) && reply.contains(why),
            "{path}: {reply}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(dir.join(".git/config")).unwrap(),
        config_before
    );
    assert!(!dir.join(".git/hooks/pre-commit").exists());
    assert!(!dir.join(".husky/pre-commit").exists());
    // The person's own git, afterwards, runs nothing of the agent's.
    std::fs::write(dir.join("a.txt"), "two\n").unwrap();
    git(&dir, &["status", "--short"]);
    git(&dir, &["commit", "-qam", "the person's commit"]);
    assert!(!mark.exists(), "something the agent planted ran");
    // Its legitimate work goes on: sources in the tree are written.
    assert_eq!(call(&s, "write src/lib.rs fn main() {}"), "wrote");
    let reply = call(&s, "term run echo built > target.txt && cat target.txt");
    assert!(
        reply.starts_with("exit: 0") && reply.contains("built"),
        "{reply}"
    );
}

/// Escape 4: sandboxed commands reached a listener on loopback. Now they
/// run in a network namespace of their own, and the output says why a
/// connection failed; `terminal_network = true` lets them out.
#[test]
fn terminal_commands_have_no_network_unless_allowed() {
    need_bwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!(
        "term run python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2); print(\"connected\")'"
    );
    let reply = call(&shell(), &connect);
    assert!(reply.starts_with("exit: 1"), "{reply}");
    assert!(!reply.contains("\nconnected\n"), "{reply}");
    assert!(reply.contains("Connection refused"), "{reply}");
    assert!(
        reply.contains(
            "[quorum: this command ran without network access (sandboxed, in a network namespace of its own); terminal_network = true under [agents.fake] in the config lets commands reach the network]"
        ),
        "{reply}"
    );
    let reply = call(&shell_with("terminal_network = true\n"), &connect);
    assert!(reply.starts_with("exit: 0"), "{reply}");
    assert!(reply.contains("\nconnected\n"), "{reply}");
    assert!(!reply.contains("without network access"), "{reply}");
}

/// Item 6 of the issue: a command holding quorum's terminal could push
/// keystrokes into it (`TIOCSTI`). Run from a terminal, quorum's commands
/// have none: `/dev/tty` cannot be opened.
#[test]
fn a_terminal_command_has_no_controlling_terminal() {
    need_bwrap();
    let s = shell();
    let terminal = common::pty::Terminal::open(100, 30);
    let probe = "term run python3 -c 'import os; os.open(\"/dev/tty\", os.O_RDWR); print(\"TTY-\" + \"OPENED\")'";
    let mut command = s.command(&["call", "--agent", "fake", "--input", probe]);
    command
        .stdin(terminal.slave())
        .stdout(terminal.slave())
        .stderr(terminal.slave());
    // The terminal is quorum's controlling terminal, as a shell makes it.
    // SAFETY: between fork and exec, two async-signal-safe system calls.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, || {
            nix::unistd::setsid()?;
            if nix::libc::ioctl(0, nix::libc::TIOCSCTTY, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    assert!(
        common::pty::wait_until(std::time::Duration::from_secs(60), || child
            .try_wait()
            .unwrap()
            .is_some()),
        "quorum call ended"
    );
    // quorum may end before this end of the terminal has read its last
    // bytes: one of the two outcomes is waited for.
    common::pty::wait_until(std::time::Duration::from_secs(30), || {
        let out = terminal.output();
        out.contains("No such device or address") || out.contains("TTY-OPENED")
    });
    let screen = terminal.output();
    assert!(screen.contains("exit: 1"), "{screen}");
    assert!(screen.contains("No such device or address"), "{screen}");
    assert!(!screen.contains("TTY-OPENED"), "{screen}");
}

/// Issue 35, item 7: a folder of the session directory on `PATH` (direnv's
/// `layout node` puts `node_modules/.bin` there) is where an agent could
/// plant a program of an agent's name; the next start of that agent (not
/// sandboxed, by default) would run it. quorum skips such folders when it
/// looks for an agent's program: the real one, further on `PATH`, starts.
#[test]
fn a_program_planted_on_path_in_the_session_directory_is_never_started() {
    use std::os::unix::fs::PermissionsExt;
    let mark_dir = outside();
    let mark = mark_dir.path().join("planted-ran");
    let s = shell_with("[agents.npm]\ncommand = \"quorum-fake-agent\"\n");
    // The real program, on PATH outside the session directory.
    let bin = outside();
    let real = env!("CARGO_BIN_EXE_quorum-fake-agent");
    std::os::unix::fs::symlink(real, bin.path().join("quorum-fake-agent")).unwrap();
    // The planted one, in the session directory, ahead of it on PATH.
    let planted = s.dir.path().join("node_modules/.bin");
    std::fs::create_dir_all(&planted).unwrap();
    let script = planted.join("quorum-fake-agent");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho planted > '{}'\nexec '{real}' \"$@\"\n",
            mark.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path =
        std::env::join_paths([planted.as_path(), bin.path(), common::hermetic_path()]).unwrap();
    let o = s.run_unwedged_with(
        &[
            "call",
            "--agent",
            "npm",
            "--input",
            "echo from the real one",
        ],
        &[("PATH", path.to_str().unwrap())],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "from the real one\n");
    assert!(
        !mark.exists(),
        "the planted program ran: {}",
        std::fs::read_to_string(&mark).unwrap_or_default()
    );
    // Planted alone (the real one gone from PATH): not started either; the
    // error says where it is and why it is not run.
    let path = std::env::join_paths([planted.as_path(), common::hermetic_path()]).unwrap();
    let o = s.run_unwedged_with(
        &["call", "--agent", "npm", "--input", "echo hello"],
        &[("PATH", path.to_str().unwrap())],
    );
    assert_ne!(o.status.code(), Some(0), "{}", text(&o.stdout));
    let said = text(&o.stderr);
    assert!(said.contains(script.to_str().unwrap()), "{said}");
    assert!(said.contains("inside the session directory"), "{said}");
    assert!(!mark.exists(), "the planted program ran");
}

/// Item 5: an agent whose process runs sandboxed (`sandbox = "bwrap"`)
/// cannot write outside its session directory with its own tools, while
/// it still writes there and in its own state (`writable`), and its
/// configured environment reaches it.
#[test]
fn a_sandboxed_agent_writes_only_its_directory_and_its_state() {
    need_bwrap();
    let state = outside();
    let out = outside();
    let settings = state.path().join("agent-state/settings.json");
    let s = shell_with(&format!(
        "sandbox = \"bwrap\"\nwritable = [{:?}]\nprotect = [{:?}]\nenv = {{ FAKE_CONFIGURED = \"from the config\" }}\n",
        format!("{}/", state.path().join("agent-state").display()),
        settings.display().to_string(),
    ));
    let escaped = out.path().join("escaped");
    let reply = call(&s, &format!("own write {} x", escaped.display()));
    assert!(
        reply.starts_with("own write failed: Read-only file system"),
        "{reply}"
    );
    assert!(!escaped.exists());
    assert_eq!(call(&s, "own write inside.txt hello"), "own wrote");
    assert_eq!(
        std::fs::read_to_string(s.dir.path().join("inside.txt")).unwrap(),
        "hello"
    );
    let kept = state.path().join("agent-state/session.json");
    assert_eq!(
        call(&s, &format!("own write {} {{}}", kept.display())),
        "own wrote"
    );
    assert!(kept.exists());
    // Its settings (which its CLI would run later) stay read-only; missing,
    // they were made empty to be bound.
    let reply = call(&s, &format!("own write {} planted", settings.display()));
    assert!(
        reply.starts_with("own write failed: Read-only file system"),
        "{reply}"
    );
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), "{}\n");
    let reply = call(&s, "own run echo $FAKE_CONFIGURED");
    assert!(reply.contains("from the config"), "{reply}");
    // The agent keeps its network (it talks to its model).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let reply = call(
        &s,
        &format!(
            "own run python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2); print(\"connected\")'"
        ),
    );
    assert!(reply.contains("connected"), "{reply}");
    // Unsandboxed (the default outside worktrees), its own write lands.
    let plain = shell();
    assert_eq!(
        call(&plain, &format!("own write {} x", escaped.display())),
        "own wrote"
    );
    assert!(escaped.exists());
}

/// Item 5: a worktree task's agent runs sandboxed by default, so its own
/// tools cannot write the person's tree; what it writes in its worktree
/// is committed to the task's branch as ever. The person's tree is not
/// under `/tmp`, where a write would land in the sandbox's private `/tmp`
/// and prove nothing.
#[test]
fn a_worktree_tasks_agent_cannot_write_the_persons_tree() {
    need_bwrap();
    let s = shell_in(Path::new("/var/tmp"), "");
    let dir = repository(&s);
    let planted = dir.join("planted.txt");
    let input = format!("own write {} x", planted.display());
    let o = s.run_unwedged(&["call", "--agent", "fake", "--worktree", "--input", &input]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let reply = text(&o.stdout);
    assert!(
        reply.starts_with("own write failed: Read-only file system"),
        "{reply}"
    );
    assert!(
        !planted.exists(),
        "the worktree task wrote the person's tree"
    );
    assert!(
        !text(&o.stderr).contains("not sandboxed"),
        "{}",
        text(&o.stderr)
    );
    // Its own write into its worktree is its work, committed.
    let o = s.run_unwedged(&[
        "call",
        "--agent",
        "fake",
        "--worktree",
        "--input",
        "own write made.txt by the agent",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "own wrote\n");
    assert!(!dir.join("made.txt").exists());
    let branches = git(&dir, &["branch", "--list", "quorum/*"]);
    let branch = branches
        .lines()
        .map(|l| l.trim_start_matches(['*', '+', ' ']).trim())
        .find(|b| b.contains("own-write-made"))
        .unwrap_or_else(|| panic!("no branch for the task: {branches}"));
    assert_eq!(
        git(&dir, &["show", &format!("{branch}:made.txt")]),
        "by the agent"
    );
}

// Issue 35: no way out through what the sandbox can see.

/// `quorum call --agent fake --input INPUT` with `env` set; its stdout.
fn call_with(s: &Shell, input: &str, env: &[(&str, &str)]) -> String {
    let o = s.run_unwedged_with(&["call", "--agent", "fake", "--input", input], env);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    text(&o.stdout)
}

/// Item 1: the agent named a command under a scratch `/tmp/tmux-*` folder
/// (`/tmp/tmux-X/../../usr/bin/tmux -S /tmp/tmux-X/default run-shell …`),
/// and the sandbox bound that folder in: the person's tmux server ran the
/// command outside, with the person's rights. Now nothing the agent names
/// is bound: the command is refused, naming the folder it goes through,
/// and tmux on the sandbox's own `PATH` cannot reach the server either.
#[test]
fn a_terminal_cannot_reach_the_persons_tmux_server() {
    need_bwrap();
    let tmux = quorum::runtime::path::locate("tmux")
        .expect("the sandbox tests need tmux: apt-get install tmux");
    let out = outside();
    let mark = out.path().join("escaped");
    let sockets = tempfile::Builder::new()
        .prefix("tmux-probe-")
        .tempdir_in("/tmp")
        .unwrap();
    let socket = sockets.path().join("default");
    let started = std::process::Command::new(&tmux)
        .args(["-S"])
        .arg(&socket)
        .args(["-f", "/dev/null", "new-session", "-d", "sleep 600"])
        .output_bounded();
    assert!(started.status.success(), "{started:?}");
    struct Server(PathBuf, PathBuf);
    impl Drop for Server {
        fn drop(&mut self) {
            let _ = std::process::Command::new(&self.0)
                .arg("-S")
                .arg(&self.1)
                .arg("kill-server")
                .output();
        }
    }
    let _server = Server(tmux.clone(), socket.clone());
    let s = shell();
    let through = format!("{}/../../{}", sockets.path().display(), tmux.display());
    let reply = call(
        &s,
        &format!(
            "term run --program {through} -S {} run-shell touch${{IFS}}{}",
            socket.display(),
            mark.display()
        ),
    );
    assert!(
        reply.starts_with(&format!(
            "refused: `{through}` cannot be run in the sandbox: it goes through {}, and /tmp is private inside the sandbox",
            sockets.path().display()
        )),
        "{reply}"
    );
    // The same tmux, by name, on the sandbox's PATH: the socket is not
    // there, and no Unix socket can be opened anyway.
    let reply = call(
        &s,
        &format!(
            "term run tmux -S {} run-shell 'touch {}'",
            socket.display(),
            mark.display()
        ),
    );
    assert!(reply.starts_with("exit: 1"), "{reply}");
    // `run-shell` (no `-b`) returns once its command has run: had the
    // client reached the server, the mark would be there by its exit.
    assert!(!mark.exists(), "the person's tmux server ran the command");
    // The probe fires: the same command, run outside the sandbox, leaves it.
    let fired = std::process::Command::new(&tmux)
        .arg("-S")
        .arg(&socket)
        .arg("run-shell")
        .arg(format!("touch {}", mark.display()))
        .output_bounded();
    assert!(fired.status.success(), "{fired:?}");
    assert!(
        mark.exists(),
        "tmux run-shell left no mark outside the sandbox"
    );
}

/// Item 1: `command: "/tmp/../bin/sh"` bound `/tmp/..` (the host's `/`)
/// over the private `/tmp` and the new `/proc`: the command read a secret
/// in the host's `/tmp` and saw the host's processes. Now it runs `/bin/sh`
/// in the sandbox as it is: its `/tmp` private, its `/proc` its own.
#[test]
fn a_command_through_tmp_dot_dot_binds_nothing() {
    need_bwrap();
    let secret = tempfile::Builder::new()
        .prefix("quorum-secret-")
        .tempfile_in("/tmp")
        .unwrap();
    std::fs::write(secret.path(), "swordfish").unwrap();
    let name = secret
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let me = std::process::id();
    let s = shell();
    let script = format!(
        "cat /tmp/{name} /tmp/tmp/{name}; test -e /proc/{me} && echo SEES-HOST-PID; echo done"
    );
    std::fs::write(s.dir.path().join("probe.sh"), &script).unwrap();
    let probe = s.dir.path().canonicalize().unwrap().join("probe.sh");
    let reply = call(
        &s,
        &format!("term run --program /tmp/../bin/sh {}", probe.display()),
    );
    assert!(reply.contains("done"), "{reply}");
    assert!(!reply.contains("swordfish"), "{reply}");
    assert!(!reply.contains("SEES-HOST-PID"), "{reply}");
}

/// A Unix listener of the test's that notes whether anything connected.
struct Listener {
    socket: std::os::unix::net::UnixListener,
    name: String,
}

impl Listener {
    fn at(path: &Path) -> Self {
        let socket = std::os::unix::net::UnixListener::bind(path).unwrap();
        socket.set_nonblocking(true).unwrap();
        Self {
            socket,
            name: path.display().to_string(),
        }
    }

    fn abstract_named(name: &str) -> Self {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let socket = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
        socket.set_nonblocking(true).unwrap();
        Self {
            socket,
            name: format!("@{name}"),
        }
    }

    /// Whether a connection came (pending ones are in the backlog).
    fn reached(&self) -> bool {
        self.socket.accept().is_ok()
    }
}

/// The probe a command or an agent runs: connects to each Unix socket
/// named (`@name` for an abstract one), printing what it got.
const CONNECT: &str = r#"import socket, sys
for target in sys.argv[1:]:
    address = "\0" + target[1:] if target.startswith("@") else target
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(address)
        print("CONNECTED", target)
    except OSError as e:
        print("REFUSED", target, e.strerror)
"#;

/// A folder of the test's under `/run` (where the person's systemd, D-Bus,
/// ssh-agent and docker keep their sockets), and another standing for
/// `$XDG_RUNTIME_DIR` elsewhere.
fn socket_folders() -> (tempfile::TempDir, tempfile::TempDir) {
    let run = tempfile::Builder::new()
        .prefix("quorum-probe-")
        .tempdir_in("/run")
        .expect("the sandbox tests make a folder under /run (they run as root in CI)");
    let runtime = outside();
    (run, runtime)
}

/// Item 2: host Unix sockets answered sandboxed code: a client terminal
/// connected to a listener under `/run`, and a sandboxed agent's own
/// process (it keeps the network for its model) to that one and to an
/// abstract one. Now none of them is reached: the folders are masked and
/// the seccomp filter refuses `socket(AF_UNIX)`; a pair of sockets
/// (`socketpair`) still works.
#[test]
fn sandboxed_code_reaches_no_host_socket() {
    need_bwrap();
    let (run, runtime) = socket_folders();
    let in_run = Listener::at(&run.path().join("bus.sock"));
    let in_runtime = Listener::at(&runtime.path().join("agent.sock"));
    let name = format!("quorum-probe-{}", std::process::id());
    let hidden = Listener::abstract_named(&name);
    let targets = format!("{} {} {}", in_run.name, in_runtime.name, hidden.name);
    let env = [("XDG_RUNTIME_DIR", runtime.path().to_str().unwrap())];

    let s = shell();
    std::fs::write(s.dir.path().join("connect.py"), CONNECT).unwrap();
    let reply = call_with(&s, &format!("term run python3 connect.py {targets}"), &env);
    assert!(!reply.contains("CONNECTED"), "{reply}");
    assert!(reply.contains("Operation not permitted"), "{reply}");

    let agent = shell_with("sandbox = \"bwrap\"\n");
    std::fs::write(agent.dir.path().join("connect.py"), CONNECT).unwrap();
    let reply = call_with(
        &agent,
        &format!("own run python3 connect.py {targets}"),
        &env,
    );
    assert!(!reply.contains("CONNECTED"), "{reply}");
    assert_eq!(
        reply.matches("Operation not permitted").count(),
        3,
        "{reply}"
    );
    // A private pair is no way out, and still works.
    let reply = call_with(
        &agent,
        "own run python3 -c 'import socket; a, b = socket.socketpair(); a.send(b\"ok\"); print(\"PAIR\", b.recv(2))'",
        &env,
    );
    assert!(reply.contains("PAIR b'ok'"), "{reply}");

    for listener in [&in_run, &in_runtime, &hidden] {
        assert!(!listener.reached(), "{} was reached", listener.name);
    }
    // The folders are not even there to see.
    let reply = call_with(
        &s,
        &format!(
            "term run ls {} {}; echo listed",
            run.path().display(),
            runtime.path().display()
        ),
        &env,
    );
    assert!(
        !reply.contains("bus.sock") && !reply.contains("agent.sock"),
        "{reply}"
    );
}

/// Item 2: `unix_sockets` gives an agent the sockets it names, and only
/// those: the named one answers, another in the same folder does not.
#[test]
fn unix_sockets_are_given_by_name() {
    need_bwrap();
    let (run, _) = socket_folders();
    let given = Listener::at(&run.path().join("given.sock"));
    let other = Listener::at(&run.path().join("other.sock"));
    let s = shell_with(&format!("unix_sockets = [{:?}]\n", given.name));
    std::fs::write(s.dir.path().join("connect.py"), CONNECT).unwrap();
    let reply = call(
        &s,
        &format!("term run python3 connect.py {} {}", given.name, other.name),
    );
    assert!(
        reply.contains(&format!("CONNECTED {}", given.name)),
        "{reply}"
    );
    assert!(
        reply.contains(&format!("REFUSED {}", other.name)),
        "{reply}"
    );
    assert!(given.reached());
    assert!(!other.reached());
}

/// Item 2: the seccomp filter refuses what no agent's work needs:
/// tracing and reading other processes, the kernel keyrings, new user
/// namespaces; each answers `EPERM` inside, where it works outside.
#[test]
fn the_seccomp_filter_refuses_what_no_agent_needs() {
    need_bwrap();
    const PROBE: &str = r#"import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
arm = platform.machine() == "aarch64"
calls = {
    "ptrace": (117 if arm else 101, 0, 0, 0, 0),
    "keyctl": (219 if arm else 250, 0, ctypes.c_long(-3), 0, 0),
    "unshare_user": (97 if arm else 272, 0x10000000, 0, 0, 0),
    "process_vm_readv": (270 if arm else 310, 0, 0, 0, 0),
}
import os
for name, (nr, *args) in calls.items():
    if name == "process_vm_readv":
        args = [os.getpid(), 0, 0, 0, 0]
    ctypes.set_errno(0)
    r = libc.syscall(nr, *args)
    e = ctypes.get_errno()
    print(name, "EPERM" if r == -1 and e == 1 else "allowed(%d,%d)" % (r, e))
"#;
    let s = shell();
    std::fs::write(s.dir.path().join("calls.py"), PROBE).unwrap();
    let outside_sandbox = std::process::Command::new("python3")
        .arg(s.dir.path().join("calls.py"))
        .output_bounded();
    let outside_sandbox = text(&outside_sandbox.stdout);
    for name in ["ptrace", "keyctl", "process_vm_readv"] {
        assert!(
            outside_sandbox.contains(&format!("{name} allowed")),
            "{outside_sandbox}"
        );
    }
    let reply = call(&s, "term run python3 calls.py");
    for name in ["ptrace", "keyctl", "unshare_user", "process_vm_readv"] {
        assert!(reply.contains(&format!("{name} EPERM")), "{name}: {reply}");
    }
}

/// Issue 35 (4): a `.git` planted in a folder of the person's tree would
/// run its `core.fsmonitor` on their next `git status` there (or when a
/// git-aware shell prompt enters it). `fs/write_text_file` refuses to make
/// one; a terminal's command (which the sandbox cannot refuse a `mkdir`)
/// makes one, and the turn's box names it when the turn ends.
#[test]
fn a_planted_dot_git_is_refused_by_fs_and_named_after_a_terminal_made_one() {
    need_bwrap();
    let s = shell();
    let dir = repository(&s);
    let out = outside();
    let mark = out.path().join("fsmonitor-ran");
    let config = format!("[core]\n\tfsmonitor = touch {}\n", mark.display());
    for path in ["sub/.git/config", "sub/.git"] {
        let reply = call(&s, &format!("write {path} {config}"));
        assert!(
            reply.starts_with(&format!("write failed: {path}: refused: "))
                && reply.contains("inside the repository's .git"),
            "{path}: {reply}"
        );
    }
    assert!(!dir.join("sub").exists(), "nothing was made");

    let input = format!(
        "term run mkdir -p sub/.git/objects sub/.git/refs && echo 'ref: refs/heads/main' > \
         sub/.git/HEAD && printf '[core]\\n\\tfsmonitor = touch {}\\n' > sub/.git/config && \
         echo planted",
        mark.display()
    );
    let o = s.run_unwedged(&["call", "--agent", "fake", "--input", &input]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).starts_with("exit: 0"),
        "{}",
        text(&o.stdout)
    );
    assert!(dir.join("sub/.git/config").exists(), "the command made it");
    let said = text(&o.stderr);
    assert!(
        said.contains(&format!(
            "a git repository below {} appeared or changed during this turn: sub/.git (made)",
            dir.display()
        )),
        "the box does not name it: {said}"
    );
    assert!(said.contains("core.fsmonitor"), "{said}");
    assert!(
        said.contains(&format!(
            "remove it (`rm -rf {}`) if you did not make it",
            dir.join("sub/.git").display()
        )),
        "{said}"
    );
    assert!(!mark.exists(), "nothing ran it");
}

/// Issue 35 (5), husky 9 (`core.hooksPath = .husky/_`): the scripts in
/// `.husky/` run on the person's next commit, and `.envrc` when direnv
/// enters the folder. In the person's own tree a terminal's command
/// cannot change them (read-only), `fs/write_text_file` is refused with
/// nobody to ask (headless), naming the file and how to allow it; a file
/// other programs run that a command makes during a turn (none was there
/// to be bound) is named when the turn ends; the person's commit runs
/// nothing the agent wrote.
#[test]
fn husky_9_scripts_and_files_other_programs_run_are_kept_in_the_persons_tree() {
    need_bwrap();
    let s = shell();
    let dir = repository(&s);
    let out = outside();
    let mark = out.path().join("escaped");
    std::fs::create_dir_all(dir.join(".husky/_")).unwrap();
    std::fs::write(dir.join(".husky/_/pre-commit"), "#!/bin/sh\n").unwrap();
    std::fs::write(dir.join(".husky/pre-commit"), "exit 0\n").unwrap();
    std::fs::write(dir.join(".envrc"), "use nix\n").unwrap();
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "husky"]);
    git(&dir, &["config", "core.hooksPath", ".husky/_"]);
    let evil = format!("touch {}", mark.display());

    for path in [".husky/pre-commit", ".envrc"] {
        let reply = call(&s, &format!("term run echo '{evil}' >> {path}"));
        assert!(!reply.starts_with("exit: 0"), "{path}: {reply}");
        assert!(reply.contains("Read-only file system"), "{path}: {reply}");
        let reply = call(&s, &format!("write {path} {evil}"));
        assert!(
            reply.starts_with(&format!("write failed: {path}: refused: ")),
            "{path}: {reply}"
        );
        assert!(
            reply.contains("in your own tree an agent writes it only once you allow it")
                && reply.contains("give the task isolation \"worktree\""),
            "{path}: {reply}"
        );
    }
    assert!(
        call(&s, &format!("write .husky/pre-commit {evil}"))
            .contains("husky runs it as a git hook"),
    );
    assert_eq!(
        std::fs::read_to_string(dir.join(".husky/pre-commit")).unwrap(),
        "exit 0\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join(".envrc")).unwrap(),
        "use nix\n"
    );

    let o = s.run_unwedged(&[
        "call",
        "--agent",
        "fake",
        "--input",
        "term run mkdir -p .vscode && echo '{}' > .vscode/tasks.json && echo made",
    ]);
    assert!(
        text(&o.stdout).starts_with("exit: 0"),
        "{}",
        text(&o.stdout)
    );
    let said = text(&o.stderr);
    assert!(
        said.contains(".vscode/tasks.json (made: VS Code runs its tasks"),
        "not named after the turn: {said}"
    );

    // The person's next commit runs their hooks, none of the agent's.
    std::fs::write(dir.join("a.txt"), "two\n").unwrap();
    git(&dir, &["commit", "-qam", "the person's commit"]);
    assert!(!mark.exists(), "something the agent planted ran");
}
