//! Agents on other machines (`[hosts.NAME]`, `host = "NAME"`), against an
//! OpenSSH server on loopback that each test starts for itself: Debian's
//! `openssh-server` (installed by `scripts/install-sshd.sh` when missing;
//! a test that cannot have it fails, it is never skipped), a key made for
//! the test, a free port, and the "host" side in a directory of its own,
//! so that every path there differs from the person's.

use crate::common;
use common::events::next_of;
use common::shell::text;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::Bounded;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use quorum::acp::registry::Registry;
use quorum::confine::fsroot::Root;
use quorum::engine::{Session, SessionConfig};
use quorum::event::{Activity, Event, Op, Stamped, StopReason};
use quorum::subagent::input::{Isolation, SubAgentCallInput};
use tokio::sync::mpsc;

/// sshd, installed if it must be (as CI does), else the test fails here.
fn sshd_program() -> &'static Path {
    static SSHD: OnceLock<PathBuf> = OnceLock::new();
    SSHD.get_or_init(|| {
        let path = common::install("install-sshd.sh");
        assert!(path.is_file(), "install-sshd.sh named no sshd: {path:?}");
        path
    })
}

/// A port nothing listens on (yet).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// What a host's shell needs to be given quorum (gzip its only unpacker)
/// and run it: no git, no zstd.
const HOST_TOOLS: &[&str] = &[
    "mkdir",
    "uname",
    "cat",
    "chmod",
    "mv",
    "rm",
    "head",
    "sha256sum",
    "gzip",
];

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Waits up to `limit` for `done`; whether it came.
fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

/// A loopback "host": its own sshd, a key for the test, the host's side in
/// `host/`, and the person's side (a config, a git repository) in `home/`.
struct Lab {
    dir: tempfile::TempDir,
    port: u16,
    sshd: Option<Child>,
    config: PathBuf,
}

impl Lab {
    fn new(extra: &str) -> Lab {
        Lab::with_sshd(extra, "")
    }

    /// A lab whose host runs `script` as `tool`: a shim first on the
    /// PATH its ssh sessions get, before the system's.
    fn with_shim(tool: &str, script: &str) -> Self {
        let lab = Lab::with_sshd("", "SetEnv PATH={lab}/shim:/usr/local/bin:/usr/bin:/bin\n");
        let shim = lab.path("shim");
        std::fs::create_dir_all(&shim).unwrap();
        std::fs::write(shim.join(tool), script).unwrap();
        std::fs::set_permissions(
            shim.join(tool),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        lab
    }

    /// A lab whose host's ssh sessions have a PATH of `tools` alone (each
    /// linked from /usr/bin or /bin, where the test machine has it).
    fn with_tools(tools: &[&str]) -> Self {
        let lab = Lab::with_sshd("", "SetEnv PATH={lab}/host-bin\n");
        let bin = lab.path("host-bin");
        std::fs::create_dir_all(&bin).unwrap();
        for tool in tools {
            let found = ["/usr/bin", "/bin"]
                .iter()
                .map(|d| Path::new(d).join(tool))
                .find(|p| p.exists())
                .unwrap_or_else(|| panic!("no {tool}"));
            std::os::unix::fs::symlink(found, bin.join(tool)).unwrap();
        }
        lab
    }

    /// As [`Lab::new`], `sshd_extra` added to sshd's config (`{lab}` in
    /// it: the lab's directory).
    fn with_sshd(extra: &str, sshd_extra: &str) -> Lab {
        sshd_program();
        // Not under /tmp: a sandbox's private /tmp would hide it.
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let p = |name: &str| dir.path().join(name);
        for sub in ["host", "home", "repo", "state", "config"] {
            std::fs::create_dir_all(p(sub)).unwrap();
        }
        for key in ["host_key", "id", "stranger"] {
            let out = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(p(key))
                .output_bounded();
            assert!(out.status.success(), "ssh-keygen: {}", text(&out.stderr));
        }
        std::fs::copy(p("id.pub"), p("authorized_keys")).unwrap();
        let id = |flag: &str| {
            let out = Command::new("id").arg(flag).output_bounded();
            text(&out.stdout).trim().to_string()
        };
        if id("-u") == "0" {
            // sshd's privilege separation directory, as root.
            std::fs::create_dir_all("/run/sshd").unwrap();
        }
        let port = free_port();
        let d = dir.path().display();
        std::fs::write(
            p("sshd_config"),
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n\
                 AuthorizedKeysFile {d}/authorized_keys\nPidFile {d}/sshd.pid\n\
                 UsePAM no\nStrictModes no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
                 PermitRootLogin yes\nMaxSessions 100\nMaxStartups 100\n{}",
                sshd_extra.replace("{lab}", &d.to_string())
            ),
        )
        .unwrap();
        let user = id("-un");
        for (name, key) in [("ssh_config", "id"), ("stranger_config", "stranger")] {
            std::fs::write(
                p(name),
                format!(
                    "Host lab\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n  \
                     IdentityFile {d}/{key}\n  IdentitiesOnly yes\n  \
                     UserKnownHostsFile /dev/null\n  StrictHostKeyChecking no\n  LogLevel ERROR\n"
                ),
            )
            .unwrap();
        }
        let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
        let config = p("config/quorum.toml");
        std::fs::write(
            &config,
            format!(
                "[hosts.lab]\nssh = \"lab\"\nssh_args = [\"-F\", \"{d}/ssh_config\"]\ndir = \"{d}/host\"\n\n\
                 [agents.far]\ncommand = {fake:?}\nhost = \"lab\"\n\n\
                 [agents.stubborn]\ncommand = {fake:?}\nargs = [\"--ignore-stdin-close\"]\nhost = \"lab\"\n\n\
                 [agents.green]\ncommand = {fake:?}\nargs = [\"--review\", \"green\"]\n\n{extra}"
            ),
        )
        .unwrap();
        let mut lab = Lab {
            dir,
            port,
            sshd: None,
            config,
        };
        lab.start_sshd();
        lab.git(&["init", "-q", "-b", "main"]);
        lab.git(&["config", "user.name", "Person"]);
        lab.git(&["config", "user.email", "person@example.com"]);
        std::fs::write(lab.repo().join("lib.rs"), "fn old() {}\n").unwrap();
        lab.git(&["add", "lib.rs"]);
        lab.git(&["commit", "-q", "-m", "first"]);
        lab
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn host(&self) -> PathBuf {
        self.path("host")
    }

    fn repo(&self) -> PathBuf {
        self.path("repo")
    }

    /// Starts (again) the lab's sshd and waits until it listens.
    fn start_sshd(&mut self) {
        let child = Command::new(sshd_program())
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(self.path("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.path("sshd.log")).unwrap())
            .spawn()
            .unwrap();
        self.sshd = Some(child);
        let port = self.port;
        let up = wait_until(Duration::from_secs(10), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(
            up,
            "sshd did not listen on {port}: {}",
            std::fs::read_to_string(self.path("sshd.log")).unwrap_or_default()
        );
    }

    /// Stops the lab's listening sshd (the sessions it forked go on).
    fn stop_sshd(&mut self) {
        if let Some(mut child) = self.sshd.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn env(&self, c: &mut Command) {
        for name in common::inherited_git_vars() {
            c.env_remove(name);
        }
        c.envs(common::hermetic_env(&self.path("home")))
            .env("XDG_STATE_HOME", self.path("state"))
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env("GIT_AUTHOR_NAME", "Person")
            .env("GIT_AUTHOR_EMAIL", "person@example.com")
            .env("GIT_COMMITTER_NAME", "Person")
            .env("GIT_COMMITTER_EMAIL", "person@example.com");
    }

    fn git(&self, args: &[&str]) -> String {
        let mut c = Command::new("git");
        c.args(args).current_dir(self.repo());
        self.env(&mut c);
        let out = c.output_bounded();
        assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
        text(&out.stdout).trim_end().to_string()
    }

    fn command(&self, args: &[&str]) -> Command {
        self.command_with(&self.config, args)
    }

    /// `quorum ARGS` with the config file `config`.
    fn command_with(&self, config: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_quorum"));
        c.arg("--config")
            .arg(config)
            .args(args)
            .current_dir(self.repo());
        self.env(&mut c);
        c
    }

    fn quorum(&self, args: &[&str]) -> Output {
        self.command(args).output_bounded()
    }

    /// The processes of this lab but its own sshd: those whose command line
    /// names its directory (ssh clients and the master at home, the
    /// proxies on the host), and those working in it (the agents on the
    /// host and whatever they started, which name nothing of it: their
    /// working directory is the task's, under `host/`).
    fn strays(&self) -> Vec<String> {
        let lab = self.dir.path();
        let needle = lab.display().to_string();
        let sshd = self.sshd.as_ref().map(|c| c.id() as i32);
        let mut out = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            if Some(pid) == sshd || pid == std::process::id() as i32 {
                continue;
            }
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let cmdline = text(&cmdline).replace('\0', " ");
            // After the command's name: its state (`S`, `D`, `Z`, ...)
            // and its parent.
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let mut fields = stat.rsplit(')').next().unwrap_or("").split_whitespace();
            let (state, parent) = (fields.next().unwrap_or("?"), fields.next().unwrap_or("?"));
            let working_here = std::fs::read_link(format!("/proc/{pid}/cwd"))
                .is_ok_and(|cwd| cwd.starts_with(lab));
            if (cmdline.contains(&needle) || working_here) && state != "Z" {
                let cwd = if working_here {
                    " (working in the lab)"
                } else {
                    ""
                };
                // Where it waits, for a stray a failed run names.
                let wchan =
                    std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
                out.push(format!(
                    "{pid}: {cmdline}{cwd} (state {state} in {wchan:?}, parent {parent})"
                ));
            }
        }
        out
    }

    /// Asserts that soon nothing of the lab runs but its sshd, and that the
    /// processes `pids` are gone.
    fn assert_nothing_left(&self, pids: &[i32]) {
        let gone = |pid: &i32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            })
        };
        wait_until(Duration::from_secs(15), || {
            self.strays().is_empty() && pids.iter().all(gone)
        });
        let strays = self.strays();
        assert!(strays.is_empty(), "still running: {strays:#?}");
        let alive: Vec<&i32> = pids.iter().filter(|p| !gone(p)).collect();
        assert!(alive.is_empty(), "still running on the host: {alive:?}");
    }

    /// The lab's host alone, as a session's connections to its hosts, with
    /// a supervisor of their own.
    fn hosts(&self) -> quorum::remote::ssh::Hosts {
        // What is copied to the host is quorum, not this test.
        quorum::remote::ssh::use_binary(env!("CARGO_BIN_EXE_quorum").into());
        let d = self.dir.path().display().to_string();
        let spec = quorum::config::HostSpec {
            name: "lab".into(),
            ssh: "lab".into(),
            ssh_args: vec!["-F".into(), format!("{d}/ssh_config")],
            dir: Some(format!("{d}/host")),
        };
        quorum::remote::ssh::Hosts::new(
            [("lab".to_string(), spec)].into(),
            quorum::runtime::supervisor::Supervisor::new(),
        )
    }

    /// [`Lab::assert_nothing_left`] from an async test, off its runtime's
    /// threads (the lab is dropped after).
    async fn nothing_left(self) {
        tokio::task::spawn_blocking(move || self.assert_nothing_left(&[]))
            .await
            .unwrap();
    }

    /// A session in the person's repository, as the TUI starts one.
    fn session(
        &self,
    ) -> (
        Session,
        mpsc::UnboundedSender<Op>,
        mpsc::UnboundedReceiver<Stamped>,
    ) {
        // What is copied to the host is quorum, not this test.
        quorum::remote::ssh::use_binary(env!("CARGO_BIN_EXE_quorum").into());
        let registry = Registry::load_only(&self.config).unwrap();
        let config = SessionConfig::new(registry, Root::new(&self.repo()).unwrap());
        let (mut session, events) = Session::start(config, Instant::now()).unwrap();
        session
            .dispatcher()
            .set_worktrees(Some(self.path("state")), None);
        let ops = session.serve();
        (session, ops, events)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.stop_sshd();
        // Whatever a failed test left of the lab.
        for line in self.strays() {
            if let Some(pid) = line.split(':').next().and_then(|p| p.parse().ok()) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

/// The `grandchild G agent A` pids an agent reported.
fn reported_pids(text: &str) -> Option<(i32, i32)> {
    let re = regex::Regex::new(r"grandchild (\d+) agent (\d+)").unwrap();
    re.captures(text)
        .map(|c| (c[1].parse().unwrap(), c[2].parse().unwrap()))
}

#[test]
fn a_call_runs_on_the_host_its_files_and_commands_there() {
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let lab = Lab::new(&format!(
        "[agents.keyed]\ncommand = {fake:?}\nhost = \"lab\"\nenv = {{ QUORUM_TEST_TOKEN = \"s3cr3t\" }}\n"
    ));
    let o = lab.quorum(&[
        "call",
        "--agent",
        "far",
        "--json",
        "--input",
        "write notes.txt written on the host",
        "--input",
        "term run pwd",
        "--input",
        "read ../../home/secret",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let lines: Vec<serde_json::Value> = text(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let out = |i: usize| lines[i]["output"].as_str().unwrap().to_string();
    assert_eq!(out(0), "wrote");
    // The file request was answered on the host, in the host's directory.
    let scratch = lab.host().join("scratch");
    assert_eq!(
        std::fs::read_to_string(scratch.join("notes.txt")).unwrap(),
        "written on the host"
    );
    assert!(!lab.repo().join("notes.txt").exists());
    // So was the terminal: it ran there.
    assert!(
        out(1).contains(&format!("\n{}", scratch.display())),
        "{}",
        out(1)
    );
    // Confined there: no way out of the task's directory.
    assert!(
        out(2).contains("outside the session directory"),
        "{}",
        out(2)
    );
    // quorum was copied there, under its state directory, named by its hash.
    assert_eq!(names(&lab.host().join("bin")), [our_name()]);
    // An agent that dies there is told as one that died here.
    let o = lab.quorum(&["call", "--agent", "far", "--input", "crash"]);
    let said = text(&o.stdout) + &text(&o.stderr);
    assert!(
        !o.status.success() && said.contains("exited with code 3"),
        "{said}"
    );
    // The agent's environment goes to the host in a private file, read and
    // removed by the proxy (never on a command line).
    let o = lab.quorum(&[
        "call",
        "--agent",
        "keyed",
        "--input",
        "own run echo token=$QUORUM_TEST_TOKEN",
    ]);
    assert!(
        text(&o.stdout).contains("token=s3cr3t"),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let left = names(&lab.host().join("run"));
    assert!(left.is_empty(), "{left:?}");
    lab.assert_nothing_left(&[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worktree_task_on_the_host_comes_home_reviewed_and_merged() {
    let lab = Lab::new("");
    // The person's uncommitted change goes along, as a commit of its own.
    std::fs::write(lab.repo().join("lib.rs"), "fn changed() {}\n").unwrap();
    let o = lab.quorum(&[
        "call",
        "--agent",
        "far",
        "--worktree",
        "--json",
        "--input",
        "write made-there.txt work done on the host",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    let branch = out["branch"].as_str().unwrap().to_string();
    // The work was done there, and the branch came home.
    assert!(
        lab.host().join("worktrees").is_dir() && lab.host().join("mirrors").is_dir(),
        "the host has the mirror and the task's worktree"
    );
    assert_eq!(
        lab.git(&["show", &format!("{branch}:made-there.txt")]),
        "work done on the host"
    );
    assert!(
        out["diffstat"].as_str().unwrap_or("").contains("1 file"),
        "{out}"
    );
    assert!(!lab.repo().join("made-there.txt").exists());
    let host_tree = std::fs::read_dir(lab.host().join("worktrees"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    assert_eq!(
        std::fs::read_to_string(host_tree.join("lib.rs")).unwrap(),
        "fn changed() {}\n",
        "the host's worktree has the uncommitted change"
    );
    assert_eq!(
        lab.git(&["show", &format!("{branch}:lib.rs")]),
        "fn changed() {}"
    );
    // An ordinary worktree task from now on: listed, reviewed, merged.
    let list = lab.quorum(&["worktrees"]);
    let listed = text(&list.stdout);
    assert!(
        listed.contains(&branch) && listed.contains("far@lab"),
        "{listed}"
    );
    assert_eq!(
        lab.quorum(&["review", "--branch", &branch, "--agents", "green"])
            .status
            .code(),
        Some(0)
    );
    // The change is on the branch: the person's tree gives it up to merge.
    lab.git(&["checkout", "--", "lib.rs"]);
    let (session, ops, mut events) = lab.session();
    ops.send(Op::Submit(format!("/merge {branch}"))).unwrap();
    // Merged, and its worktree on the host removed (in either order).
    let (mut merged, mut removed) = (false, false);
    while !(merged && removed) {
        next_of(&mut events, |e| match e {
            Event::Notice { text, .. } if text.contains("merged into main") => {
                merged = true;
                Some(())
            }
            Event::Notice { text, .. } if text.contains("on host lab are removed") => {
                removed = true;
                Some(())
            }
            Event::Error { text } => panic!("{text}"),
            _ => None,
        })
        .await;
    }
    assert_eq!(
        std::fs::read_to_string(lab.repo().join("made-there.txt")).unwrap(),
        "work done on the host"
    );
    session.shutdown();
    drop(session);
    lab.assert_nothing_left(&[]);
}

/// A worktree task's agent on a host runs in the sandbox there, as at
/// home: its own shell (not quorum's terminals) writes its worktree, and
/// nothing outside it (`Read-only file system`).
#[test]
fn a_worktree_tasks_agent_on_the_host_is_sandboxed_there() {
    let lab = Lab::new("");
    let outside = lab.host().join("outside.txt");
    let o = lab.quorum(&[
        "call",
        "--agent",
        "far",
        "--worktree",
        "--json",
        "--input",
        &format!(
            "own run echo inside > inside.txt && echo wrote inside; echo outside > {}",
            outside.display()
        ),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    let said = out["output"].as_str().unwrap_or_default();
    assert!(said.contains("wrote inside"), "{out}");
    assert!(
        said.contains(&format!("{}: Read-only file system", outside.display())),
        "{out}"
    );
    assert!(
        !outside.exists(),
        "the agent's own shell wrote outside its worktree"
    );
    let branch = out["branch"].as_str().unwrap();
    assert_eq!(
        lab.git(&["show", &format!("{branch}:inside.txt")]),
        "inside"
    );
    lab.assert_nothing_left(&[]);
}

#[test]
fn an_agent_that_ignores_its_closed_stdin_is_ended_on_the_host_after_the_call() {
    let lab = Lab::new("");
    let o = lab.quorum(&["call", "--agent", "stubborn", "--input", "grandchild 1"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let (grandchild, agent) = reported_pids(&text(&o.stdout)).expect("pids reported");
    lab.assert_nothing_left(&[grandchild, agent]);
}

#[test]
fn kill_9_of_quorum_at_home_ends_the_agent_on_the_host() {
    let lab = Lab::new("");
    let record = lab.path("call.jsonl");
    let mut quorum = lab
        .command(&["call", "--agent", "stubborn", "--input", "grandchild 600"])
        .arg("--record")
        .arg(&record)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut pids = None;
    wait_until(Duration::from_secs(60), || {
        pids = reported_pids(&std::fs::read_to_string(&record).unwrap_or_default());
        pids.is_some()
    });
    let (grandchild, agent) = pids.expect("the agent reported its grandchild");
    kill(Pid::from_raw(quorum.id() as i32), Signal::SIGKILL).unwrap();
    let _ = quorum.wait();
    lab.assert_nothing_left(&[grandchild, agent]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_lost_mid_turn_is_interrupted_and_retry_fetches_the_work() {
    // A worktree task's prompt is composed by quorum: the scenario is set.
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let mut lab = Lab::new(&format!(
        "[agents.busy]\ncommand = {fake:?}\nhost = \"lab\"\n\
         args = [\"--scenario\", \"own run echo kept > made.txt; sleep 600\"]\n"
    ));
    let (session, ops, mut events) = lab.session();
    let d = session.dispatcher().clone();
    let task = start_worktree_task(&d, "busy", "Make a file and take your time").await;
    let branch = next_of(&mut events, |e| match e {
        Event::WorktreeReady { branch, .. } => Some(branch.clone()),
        _ => None,
    })
    .await;
    // How many of the worktrees there the agent wrote in.
    let made = |lab: &Lab| {
        std::fs::read_dir(lab.host().join("worktrees")).map_or(0, |d| {
            d.flatten()
                .filter(|e| e.path().join("made.txt").exists())
                .count()
        })
    };
    let mut seen = Vec::new();
    let wrote = wait_until(Duration::from_secs(60), || {
        while let Ok(e) = events.try_recv() {
            seen.push(format!("{:?}", e.event));
        }
        made(&lab) == 1
    });
    assert!(wrote, "the agent never wrote on the host: {seen:#?}");
    // The host goes away: no new connection, and the one there is cut
    // (its ssh master killed).
    lab.stop_sshd();
    for line in lab.strays() {
        if line.contains(" -M ") {
            let pid: i32 = line.split(':').next().unwrap().parse().unwrap();
            kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
        }
    }
    let (stop_reason, output) = next_of(&mut events, |e| match e {
        Event::SubagentFinished {
            stop_reason,
            output,
            ..
        } => Some((*stop_reason, output.clone())),
        _ => None,
    })
    .await;
    assert_eq!(stop_reason, StopReason::Interrupted, "{output}");
    assert!(output.contains("host lab"), "{output}");
    assert!(
        !lab.git(&["ls-tree", "--name-only", &branch])
            .contains("made.txt"),
        "not home yet"
    );
    // The host is back: /retry takes the work home first.
    lab.start_sshd();
    ops.send(Op::Submit(format!("/retry {task}"))).unwrap();
    next_of(&mut events, |e| match e {
        Event::Notice { text, .. } if text.contains("fetched from host lab") => Some(()),
        Event::Notice { text, .. } if text.contains("not fetched") => panic!("{text}"),
        _ => None,
    })
    .await;
    assert_eq!(lab.git(&["show", &format!("{branch}:made.txt")]), "kept");
    // The retry is a new task with a worktree of its own, here and there:
    // quorum is ended once its agent works there (in its `sleep`), when no
    // git of quorum's runs. Ended in the middle of its git steps, a loaded
    // CI machine twice had a git of them (`git worktree add`, then one it
    // did not name) outlive the 15 s wait below: the git that goes on
    // until it is done.
    let both = wait_until(Duration::from_secs(60), || made(&lab) == 2);
    assert!(both, "the retry's agent never wrote on the host");
    session.shutdown();
    drop(session);
    lab.assert_nothing_left(&[]);
}

#[test]
fn a_host_that_cannot_be_reached_is_a_clear_error() {
    let lab = Lab::new("");
    // Nothing listens; a key the host does not know; a host that never
    // answers (it accepts, then says nothing).
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let d = lab.dir.path().display();
    let config = format!(
        "[hosts.closed]\nssh = \"127.0.0.1\"\nssh_args = [\"-p\", \"{closed}\", \"-F\", \"/dev/null\"]\n\
         [hosts.stranger]\nssh = \"lab\"\nssh_args = [\"-F\", \"{d}/stranger_config\"]\ndir = \"{d}/host\"\n\
         [hosts.silent]\nssh = \"127.0.0.1\"\nssh_args = [\"-p\", \"{silent_port}\", \"-F\", \"/dev/null\", \"-o\", \"ConnectTimeout=2\"]\n\
         [agents.a]\ncommand = \"x\"\nhost = \"closed\"\n\
         [agents.b]\ncommand = \"x\"\nhost = \"stranger\"\n\
         [agents.c]\ncommand = \"x\"\nhost = \"silent\"\n",
        closed = free_port()
    );
    let path = lab.path("config/unreachable.toml");
    std::fs::write(&path, config).unwrap();
    for (agent, host, said) in [
        ("a", "closed", "Connection refused"),
        ("b", "stranger", "Permission denied"),
        ("c", "silent", "timed out"),
    ] {
        let started = Instant::now();
        let mut c = Command::new(env!("CARGO_BIN_EXE_quorum"));
        c.arg("--config")
            .arg(&path)
            .args(["call", "--agent", agent, "--input", "echo hi"])
            .current_dir(lab.repo());
        lab.env(&mut c);
        let o = c.output_bounded();
        // The call's report (stdout) says what went wrong.
        let err = text(&o.stdout) + &text(&o.stderr);
        assert!(!o.status.success(), "{err}");
        assert!(
            err.contains(&format!("host {host}")) && err.contains(said),
            "{agent}: {err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{agent}: took {:?}",
            started.elapsed()
        );
    }
    drop(silent);
    lab.assert_nothing_left(&[]);
}

/// `quorum doctor` reaches a host the way quorum does (its `ssh_args`,
/// no question asked), and says what ssh said of one that refuses it.
#[test]
fn doctor_says_a_host_answers_and_what_ssh_said_of_one_that_does_not() {
    let lab = Lab::new("");
    let d = lab.dir.path().display();
    let config = std::fs::read_to_string(&lab.config).unwrap()
        + &format!(
            "\n[hosts.stranger]\nssh = \"lab\"\nssh_args = [\"-F\", \"{d}/stranger_config\"]\n"
        );
    let path = lab.path("config/doctor.toml");
    std::fs::write(&path, config).unwrap();
    let mut c = lab.command_with(&path, &["doctor"]);
    c.env_remove("TMUX");
    let o = c.output_bounded();
    let stdout = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}{}", text(&o.stderr));
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l[6..].starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name}:\n{stdout}"))
            .to_string()
    };
    let lab_line = line("host lab");
    assert!(
        lab_line.starts_with("ok    ") && lab_line.contains("lab answers over ssh (OpenSSH_"),
        "{stdout}"
    );
    let stranger = line("host stranger");
    assert!(
        stranger.starts_with("fail  ")
            && stranger.contains("Permission denied")
            && stranger.contains(&format!("; fix: `ssh -F {d}/stranger_config lab true`")),
        "{stdout}"
    );
    // Its agents there are not started here.
    assert!(
        line("agent far").contains("runs on host lab: not started here"),
        "{stdout}"
    );
    lab.assert_nothing_left(&[]);
}

#[test]
fn a_worktree_task_on_a_host_without_git_names_the_host_and_git() {
    // A host whose PATH has the shell's tools but no git.
    let lab = Lab::with_tools(&[HOST_TOOLS, &["dirname"]].concat());
    let d = lab.dir.path().display();
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let path = lab.path("config/nogit.toml");
    std::fs::write(
        &path,
        format!(
            "[hosts.bare]\nssh = \"lab\"\nssh_args = [\"-F\", \"{d}/ssh_config\"]\n\
             dir = \"{d}/host\"\n[agents.far]\ncommand = {fake:?}\nhost = \"bare\"\n"
        ),
    )
    .unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_quorum"));
    c.arg("--config")
        .arg(&path)
        .args(["call", "--agent", "far", "--worktree", "--input", "echo hi"])
        .current_dir(lab.repo());
    lab.env(&mut c);
    let o = c.output_bounded();
    let said = text(&o.stdout) + &text(&o.stderr);
    assert!(!o.status.success(), "{said}");
    assert!(
        said.contains("host bare: git is not installed there"),
        "{said}"
    );
    lab.assert_nothing_left(&[]);
}

/// The events a `--record` file holds.
fn recorded(path: &Path) -> Vec<Event> {
    quorum::transcript::load(path)
        .unwrap()
        .events
        .into_iter()
        .map(|s| s.event)
        .collect()
}

/// The activity each call's box showed, in order, as its Debug text (the
/// session's directory `root` written as `ROOT`, the agent's name before a
/// notice as `AGENT`, terminal ids as `TERM`), but what reaching a new host
/// says (quorum copied there), which is not the agent's.
fn box_activity(events: &[Event], root: &Path, agent: &str) -> Vec<String> {
    let id = regex::Regex::new(r"term-\d+").unwrap();
    let copy = regex::Regex::new(r"^host \S+: cop(ying|ied) quorum there").unwrap();
    events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentActivity {
                activity: Activity::Notice { text },
                ..
            } if copy.is_match(text) => None,
            Event::SubagentActivity { activity, .. } => {
                let shown = format!("{activity:?}")
                    .replace(&root.display().to_string(), "ROOT")
                    .replace(&format!("{agent}: "), "AGENT: ");
                Some(id.replace_all(&shown, "TERM").into_owned())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worktrees_fetch_takes_home_the_work_a_lost_connection_left_there() {
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let mut lab = Lab::new(&format!(
        "[agents.busy]\ncommand = {fake:?}\nhost = \"lab\"\n\
         args = [\"--scenario\", \"own run echo kept > made.txt; sleep 30\"]\n\
         [agents.far2]\ncommand = {fake:?}\nhost = \"lab2\"\n"
    ));
    // A second host (the same sshd, a directory of its own), with a task
    // of its own done there.
    let d = lab.dir.path().display().to_string();
    let config = std::fs::read_to_string(&lab.config).unwrap();
    let lab2 = format!(
        "[hosts.lab2]\nssh = \"lab\"\nssh_args = [\"-F\", \"{d}/ssh_config\"]\ndir = \"{d}/host2\"\n"
    );
    std::fs::write(&lab.config, format!("{config}\n{lab2}")).unwrap();
    let o = lab.quorum(&[
        "call",
        "--agent",
        "far2",
        "--worktree",
        "--json",
        "--input",
        "write other.txt elsewhere",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    let other = out["branch"].as_str().unwrap().to_string();
    // That host is gone from now on (nothing listens where it was).
    let gone = format!(
        "[hosts.lab2]\nssh = \"127.0.0.1\"\nssh_args = [\"-p\", \"{}\", \"-F\", \"/dev/null\"]\n",
        free_port()
    );
    std::fs::write(&lab.config, format!("{config}\n{gone}")).unwrap();
    let (session, _ops, mut events) = lab.session();
    let d = session.dispatcher().clone();
    start_worktree_task(&d, "busy", "Make a file and take your time").await;
    let branch = next_of(&mut events, |e| match e {
        Event::WorktreeReady { branch, .. } => Some(branch.clone()),
        _ => None,
    })
    .await;
    let wrote = wait_until(Duration::from_secs(60), || {
        while events.try_recv().is_ok() {}
        std::fs::read_dir(lab.host().join("worktrees"))
            .map(|d| d.flatten().any(|e| e.path().join("made.txt").exists()))
            .unwrap_or(false)
    });
    assert!(wrote, "the agent never wrote on the host");
    // The connection is cut mid-turn, and the host stays away.
    lab.stop_sshd();
    for line in lab.strays() {
        if line.contains(" -M ") {
            let pid: i32 = line.split(':').next().unwrap().parse().unwrap();
            kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
        }
    }
    let stop_reason = next_of(&mut events, |e| match e {
        Event::SubagentFinished { stop_reason, .. } => Some(*stop_reason),
        _ => None,
    })
    .await;
    assert_eq!(stop_reason, StopReason::Interrupted);
    // quorum ends with the work still there.
    session.shutdown();
    drop(session);
    assert!(
        !lab.git(&["ls-tree", "--name-only", &branch])
            .contains("made.txt"),
        "not home yet"
    );
    // While the host cannot be reached: the task named, the host and what
    // ssh said; exit code 1.
    let o = lab.quorum(&["worktrees", "--fetch"]);
    let said = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{said}{}", text(&o.stderr));
    assert!(
        said.contains(&format!("{branch}: not fetched: host lab"))
            && said.contains("Connection refused"),
        "{said}"
    );
    // The host is back: the work comes home; the task on the host that is
    // still gone says so, and the exit code too.
    lab.start_sshd();
    let o = lab.quorum(&["worktrees", "--fetch"]);
    let said = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{said}{}", text(&o.stderr));
    assert!(
        said.contains(&format!("{branch}: fetched from host lab (")),
        "{said}"
    );
    assert!(
        said.contains(&format!("{other}: not fetched: host lab2"))
            && said.contains("Connection refused"),
        "{said}"
    );
    assert_eq!(said.lines().count(), 2, "{said}");
    assert_eq!(lab.git(&["show", &format!("{branch}:made.txt")]), "kept");
    // Committed there with the task's message, as a turn's end does.
    assert_eq!(
        lab.git(&["log", "-1", "--format=%s%n%an", &branch]),
        "Make a file and take your time (busy)\nPerson"
    );
    // Merged by the person: `--prune` removes it here and on the host.
    lab.git(&["merge", "-q", "--no-ff", "--no-edit", &branch]);
    let o = lab.quorum(&["worktrees", "--prune"]);
    assert!(
        text(&o.stdout).contains(&format!("pruned {branch}")),
        "{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    assert_eq!(
        std::fs::read_dir(lab.host().join("worktrees"))
            .unwrap()
            .count(),
        0,
        "its worktree on the host is removed: {}",
        text(&o.stderr)
    );
    let mirror = std::fs::read_dir(lab.host().join("mirrors"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(&mirror)
        .args(["branch", "--list"])
        .output_bounded();
    assert_eq!(text(&out.stdout), "", "its branch there is removed");
    lab.assert_nothing_left(&[]);
}

#[test]
fn a_continued_session_resumes_the_agents_session_on_its_host() {
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let lab = Lab::new("");
    let d = lab.dir.path().display().to_string();
    std::fs::create_dir_all(lab.host().join("store")).unwrap();
    let config = lab.path("config/keeper.toml");
    std::fs::write(
        &config,
        format!(
            "[hosts.lab]\nssh = \"lab\"\nssh_args = [\"-F\", \"{d}/ssh_config\"]\ndir = \"{d}/host\"\n\
             [agents.keeper]\ncommand = {fake:?}\nhost = \"lab\"\n\
             args = [\"--store\", \"{d}/host/store\", \"--sessions\", \"{d}/host/sessions.log\"]\n"
        ),
    )
    .unwrap();
    let call = |input: &str| {
        serde_json::json!([
            {"text": "Asking.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "keeper", "input": input}}]},
            {"text": "Done."}
        ])
    };
    let record = lab.path("session.jsonl");
    let path = record.to_str().unwrap();
    run_script(
        &lab,
        &config,
        "first",
        call("echo the word is swordfish"),
        &["--record", path],
    );
    let sessions = |events: &[Event]| -> Vec<(quorum::event::SessionKind, Option<String>)> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::SubagentSession {
                    session,
                    session_id,
                    ..
                } => Some((*session, session_id.clone())),
                _ => None,
            })
            .collect()
    };
    let before = sessions(&recorded(&record));
    let [(quorum::event::SessionKind::Fresh, Some(id))] = &before[..] else {
        panic!("one fresh session: {before:?}");
    };
    // Continued in a new quorum: the agent's session on the host is
    // resumed, not opened anew.
    run_script(
        &lab,
        &config,
        "second",
        call("echo again"),
        &["--resume", path],
    );
    let after = sessions(&recorded(&record));
    assert_eq!(
        after[1..],
        [(quorum::event::SessionKind::Resumed, Some(id.clone()))],
        "{after:?}"
    );
    let asked = std::fs::read_to_string(lab.host().join("sessions.log")).unwrap();
    assert_eq!(
        asked.lines().collect::<Vec<_>>(),
        [format!("new {id}"), format!("resume {id}")],
        "{asked}"
    );
    lab.assert_nothing_left(&[]);
}

#[test]
fn a_refusal_on_the_host_shows_in_the_box_as_a_local_one_does() {
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let lab = Lab::new(&format!("[agents.near]\ncommand = {fake:?}\n"));
    let inputs = [
        "read ../../home/secret",
        "write .git/hooks/pre-commit evil",
        "term run --cwd /etc pwd",
        "term run echo ran",
    ];
    let mut shown = Vec::new();
    for (agent, root) in [("near", lab.repo()), ("far", lab.host().join("scratch"))] {
        let record = lab.path(&format!("{agent}.jsonl"));
        let mut args = vec![
            "call",
            "--agent",
            agent,
            "--record",
            record.to_str().unwrap(),
        ];
        for input in inputs {
            args.extend(["--input", input]);
        }
        let o = lab.quorum(&args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        shown.push(box_activity(&recorded(&record), &root, agent));
    }
    let [near, far] = &shown[..] else {
        unreachable!()
    };
    for refused in ["refused to read", "refused to write"] {
        assert!(
            near.iter().any(|a| a.contains(refused)),
            "{refused} at home: {near:#?}"
        );
    }
    assert!(
        near.iter().any(|a| a.contains("TerminalStarted")),
        "{near:#?}"
    );
    // The same lines in the host's box (what comes of the agent's updates
    // and what of quorum's answers may interleave otherwise).
    let sorted = |v: &Vec<String>| {
        let mut v = v.clone();
        v.sort();
        v
    };
    assert_eq!(sorted(far), sorted(near));
    lab.assert_nothing_left(&[]);
}

/// A line with a byte that is not UTF-8 from an agent on a host used to end
/// the proxy's reading there (tokio's `lines()` stops at it): the agent died
/// of a broken pipe and the call ended `error`. It now goes on as a local
/// agent's does: the byte shown as U+FFFD, the box told so, the rest read.
#[test]
fn a_line_that_is_not_utf8_from_a_hosts_agent_goes_on_as_a_local_ones_does() {
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let lab = Lab::new(&format!("[agents.near]\ncommand = {fake:?}\n"));
    let mut shown = Vec::new();
    for (agent, root) in [("near", lab.repo()), ("far", lab.host().join("scratch"))] {
        let record = lab.path(&format!("{agent}.jsonl"));
        let o = lab.quorum(&[
            "call",
            "--agent",
            agent,
            "--record",
            record.to_str().unwrap(),
            "--input",
            "badbyte",
            "--input",
            "echo and then",
        ]);
        let said = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{agent}: {said}");
        assert_eq!(
            text(&o.stdout),
            "caf\u{fffd} after\nand then\n",
            "{agent}: {said}"
        );
        assert!(
            said.contains(&format!(
                "{agent} sent a message with bytes that are not UTF-8; they show as \u{fffd}"
            )),
            "{agent}: {said}"
        );
        let activity = box_activity(&recorded(&record), &root, agent);
        let notice = format!("{agent} sent a message");
        // (Sorted: on the host the notice and the agent's lines come home
        // by two ways, and may interleave otherwise.)
        let mut activity: Vec<String> = activity
            .iter()
            .map(|a| a.replace(&notice, "AGENT sent a message"))
            .collect();
        activity.sort();
        shown.push(activity);
    }
    assert!(
        shown[0].iter().any(|a| a.contains("AGENT sent a message")),
        "{:#?}",
        shown[0]
    );
    assert_eq!(shown[1], shown[0]);
    lab.assert_nothing_left(&[]);
}

/// A line over `max_frame_bytes` from an agent on a host ends its call
/// as a local agent's does, naming the limit: the proxy there reads no
/// more of it than home would, and home reads it as far as it may.
#[test]
fn a_line_over_the_cap_from_a_hosts_agent_ends_the_call_as_a_local_ones_does() {
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let lab = Lab::new(&format!(
        "[agents.near]\ncommand = {fake:?}\n\n[limits]\nmax_frame_bytes = 100000\n"
    ));
    for agent in ["near", "far"] {
        let o = lab.quorum(&["call", "--agent", agent, "--input", "hugeline 1000000"]);
        assert_eq!(o.status.code(), Some(1), "{agent}: {}", text(&o.stderr));
        // The error is said on stderr; stdout, the agent's answer, is empty.
        assert_eq!(text(&o.stdout), "", "{agent}");
        let err = text(&o.stderr);
        assert!(
            err.contains(&format!(
                "{agent} exited during the turn: sent a message over 100000 bytes, read no \
                 further (max_frame_bytes under [limits] in the config)"
            )),
            "{agent}: {err}"
        );
    }
    lab.assert_nothing_left(&[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discard_and_merge_remove_the_tasks_worktree_and_branch_on_the_host() {
    let lab = Lab::new("");
    let mirror_branches = |lab: &Lab| {
        let mirrors: Vec<PathBuf> = std::fs::read_dir(lab.host().join("mirrors"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert_eq!(mirrors.len(), 1, "{mirrors:?}");
        let out = Command::new("git")
            .arg("--git-dir")
            .arg(&mirrors[0])
            .args(["branch", "--list", "--format=%(refname:short)"])
            .output_bounded();
        text(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let worktrees_there = |lab: &Lab| {
        std::fs::read_dir(lab.host().join("worktrees"))
            .unwrap()
            .flatten()
            .count()
    };
    let mut branches = Vec::new();
    for input in ["write kept.txt kept", "write thrown.txt thrown"] {
        let o = lab.quorum(&[
            "call",
            "--agent",
            "far",
            "--worktree",
            "--json",
            "--input",
            input,
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let out: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
        branches.push(out["branch"].as_str().unwrap().to_string());
    }
    let (kept, thrown) = (branches[0].clone(), branches[1].clone());
    assert_eq!(worktrees_there(&lab), 2);
    let mut both = mirror_branches(&lab);
    both.sort();
    let mut expected = branches.clone();
    expected.sort();
    assert_eq!(both, expected);
    let (session, ops, mut events) = lab.session();
    let removed = |branch: String| {
        move |e: &Event| match e {
            Event::Notice { text, .. } if text.contains("is left there") => panic!("{text}"),
            Event::Notice { text, .. }
                if text
                    == &format!("{branch}: its worktree and branch on host lab are removed") =>
            {
                Some(())
            }
            Event::Error { text } => panic!("{text}"),
            _ => None,
        }
    };
    // `/discard` (asked once: the branch has commits).
    for _ in 0..2 {
        ops.send(Op::Submit(format!("/discard {thrown}"))).unwrap();
    }
    next_of(&mut events, removed(thrown.clone())).await;
    assert_eq!(worktrees_there(&lab), 1);
    assert_eq!(mirror_branches(&lab), std::slice::from_ref(&kept));
    assert!(!lab.git(&["branch", "--list"]).contains(&thrown));
    // A finished `/merge`.
    ops.send(Op::Submit(format!("/merge {kept}"))).unwrap();
    next_of(&mut events, removed(kept.clone())).await;
    assert_eq!(worktrees_there(&lab), 0);
    assert!(mirror_branches(&lab).is_empty());
    assert_eq!(
        std::fs::read_to_string(lab.repo().join("kept.txt")).unwrap(),
        "kept"
    );
    session.shutdown();
    drop(session);
    lab.assert_nothing_left(&[]);
}

#[test]
fn copying_a_new_build_removes_the_older_builds_quorum_put_there_and_nothing_ran_for_a_day() {
    let lab = Lab::new("");
    let bin = lab.host().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // An older build quorum copied that nothing ran for two days, one
    // that ran an hour ago (another quorum at home may still use it), the
    // person's own quorum, and files of theirs whose names are like.
    let now = std::time::SystemTime::now();
    let (old_hash, recent_hash) = (
        format!("quorum-{}", "0a".repeat(32)),
        format!("quorum-{}", "0b".repeat(32)),
    );
    for (name, ago) in [
        ("quorum-0.0.1-1f00-18b2c3d4e5f60718", 2 * 86400),
        ("quorum-0.0.2-2f00-28b2c3d4e5f60718", 3600),
        (old_hash.as_str(), 2 * 86400),
        (recent_hash.as_str(), 3600),
        ("quorum", 3 * 86400),
        ("quorum-notes", 3 * 86400),
        ("quorum-0.0.1", 3 * 86400),
    ] {
        let file = std::fs::File::create(bin.join(name)).unwrap();
        let then = now - Duration::from_secs(ago);
        file.set_times(
            std::fs::FileTimes::new()
                .set_accessed(then)
                .set_modified(then),
        )
        .unwrap();
    }
    let o = lab.quorum(&["call", "--agent", "far", "--input", "echo hi"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let mut left = names(&bin);
    let ours = our_name();
    assert!(left.contains(&ours), "this build, copied: {left:?}");
    left.retain(|n| *n != ours);
    assert_eq!(
        left,
        [
            "quorum",
            "quorum-0.0.1",
            "quorum-0.0.2-2f00-28b2c3d4e5f60718",
            recent_hash.as_str(),
            "quorum-notes"
        ]
    );
    lab.assert_nothing_left(&[]);
}

/// The SHA-256 of the file at `path`, in hex (`sha256sum`'s).
fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output_bounded();
    assert!(out.status.success(), "sha256sum: {}", text(&out.stderr));
    text(&out.stdout)[..64].to_string()
}

/// The name quorum's binary has on a host: `quorum-` and its SHA-256.
fn our_name() -> String {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| format!("quorum-{}", sha256(Path::new(env!("CARGO_BIN_EXE_quorum")))))
        .clone()
}

impl Lab {
    /// The lab's host reached through `scripts/ssh-relay.py` (as
    /// `ProxyCommand`), which counts the bytes: what the last connection
    /// sent the host, once it ended.
    fn relayed(&self) -> impl Fn() -> u64 + '_ {
        let python = ["/usr/bin/python3", "/usr/local/bin/python3"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("python3");
        let relay = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ssh-relay.py");
        let count = self.path("relayed");
        let config = self.path("ssh_config");
        let before = std::fs::read_to_string(&config).unwrap();
        std::fs::write(
            &config,
            before.replace(
                "Host lab\n",
                &format!(
                    "Host lab\n  ProxyCommand {python} {} 127.0.0.1 {} --count {}\n",
                    relay.display(),
                    self.port,
                    count.display()
                ),
            ),
        )
        .unwrap();
        move || {
            // The relay ends with the connection; its last count is final.
            self.assert_nothing_left(&[]);
            let counts = std::fs::read_to_string(&count).unwrap();
            std::fs::remove_file(&count).unwrap();
            counts.split_whitespace().next().unwrap().parse().unwrap()
        }
    }
}

/// What goes to a new host is quorum compressed, once (the call says so
/// while it copies): the bytes sent are
/// under half the binary's size, the host's copy is the binary byte for
/// byte (named by its hash); a later session sends no copy again, nor does
/// a byte-identical build of quorum installed elsewhere (another path,
/// another time).
#[test]
fn quorum_goes_to_a_new_host_compressed_and_once_for_every_identical_build() {
    let lab = Lab::new("");
    let sent = lab.relayed();
    let binary = Path::new(env!("CARGO_BIN_EXE_quorum"));
    let size = std::fs::metadata(binary).unwrap().len();
    let call = |quorum: &Path| {
        let mut c = Command::new(quorum);
        c.arg("--config")
            .arg(&lab.config)
            .args(["call", "--agent", "far", "--input", "echo hi"])
            .current_dir(lab.repo());
        lab.env(&mut c);
        let o = c.output_bounded();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        assert!(text(&o.stdout).contains("hi"), "{}", text(&o.stdout));
        // The call's box says what it waits for while quorum is copied.
        let copying = text(&o.stderr).contains("host lab: copying quorum there");
        let copied = text(&o.stderr).contains("host lab: copied quorum there (");
        assert_eq!(copying, copied, "{}", text(&o.stderr));
        (sent(), copied)
    };
    let (first, told) = call(binary);
    assert!(told, "the first call did not say it copied quorum");
    assert!(
        first < size / 2,
        "sent {first} bytes for a binary of {size}"
    );
    let bin = lab.host().join("bin");
    assert_eq!(names(&bin), [our_name()]);
    assert!(std::fs::read(bin.join(our_name())).unwrap() == std::fs::read(binary).unwrap());
    // What a call sends without a copy: well under a megabyte.
    let (again, told) = call(binary);
    assert!(again < 1 << 20, "sent {again} bytes the second time");
    assert!(!told, "a call that copied nothing said it copied quorum");
    let elsewhere = lab.path("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    // A hard link where it can be: a copy just written can fail to start
    // ("text file busy") while another test's child, forked before the
    // copy's file was closed, still holds it open.
    if std::fs::hard_link(binary, elsewhere.join("quorum")).is_err() {
        std::fs::copy(binary, elsewhere.join("quorum")).unwrap();
    }
    let (other, _) = call(&elsewhere.join("quorum"));
    assert!(other < 1 << 20, "sent {other} bytes for an identical build");
    assert_eq!(std::fs::read_dir(&bin).unwrap().count(), 1);
}

/// What a new host is sent is made once on this machine and kept in
/// quorum's cache directory (`quorum-HASH.zst` for a host with zstd,
/// unpacking to the binary).
/// A kept one that changed since is no copy of quorum: the host refuses it
/// (by its hash), and the call goes on: the upload is made again from the
/// binary, kept again, and sent again.
#[test]
fn what_a_new_host_is_sent_is_kept_and_a_changed_one_is_made_and_sent_again() {
    let lab = Lab::new("");
    let call = || {
        let o = lab.quorum(&["call", "--agent", "far", "--input", "echo hi"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        assert!(text(&o.stdout).contains("hi"), "{}", text(&o.stdout));
    };
    let kept = lab
        .path("home")
        .join("cache/quorum")
        .join(format!("{}.zst", our_name()));
    let unpacks_to_quorum = || {
        let mut unzstd = Command::new("zstd");
        unzstd.arg("-dc").arg(&kept);
        let unpacked = unzstd.output_bounded();
        unpacked.status.success()
            && unpacked.stdout == std::fs::read(env!("CARGO_BIN_EXE_quorum")).unwrap()
    };
    call();
    assert!(unpacks_to_quorum());
    let copy = lab.host().join("bin").join(our_name());
    std::fs::remove_file(&copy).unwrap();
    let mut other = Command::new("sh");
    other
        .arg("-c")
        .arg(format!("echo not quorum | zstd -qc > '{}'", kept.display()));
    assert!(other.output_bounded().status.success());
    call();
    assert_eq!(sha256(&copy), our_name()["quorum-".len()..]);
    assert!(unpacks_to_quorum(), "the changed upload is still kept");
    lab.assert_nothing_left(&[]);
}

/// A host that refuses what it is sent (what it unpacks is not quorum, by
/// its hash) is a clear error, sent once more at most: the host named, and
/// why; nothing of it put in place there.
#[test]
fn a_host_that_refuses_the_copy_is_a_clear_error() {
    // The host's `zstd` unpacks anything to something else.
    let lab = Lab::with_shim("zstd", "#!/bin/sh\ncat >/dev/null\necho not quorum\n");
    let o = lab.quorum(&["call", "--agent", "far", "--input", "echo hi"]);
    let said = text(&o.stdout) + &text(&o.stderr);
    assert!(!o.status.success(), "{said}");
    assert!(
        said.contains("host lab: copying quorum to")
            && said.contains("what arrived is not this quorum (its sha256 differs)"),
        "{said}"
    );
    let there = names(&lab.host().join("bin"));
    assert!(there.is_empty(), "{there:?}");
    lab.assert_nothing_left(&[]);
}

/// A new host is sent quorum compressed as it can unpack it: with zstd
/// where it has `zstd` (seven times as fast to unpack as gzip), else with
/// gzip; either way the host's copy is the binary, and what was sent is
/// kept here for the next new host (the zstd one is made whatever the
/// host, while it answers; the gzip one only for a host without zstd).
#[test]
fn a_new_host_is_sent_zstd_where_it_has_it_else_gzip() {
    let binary = std::fs::read(env!("CARGO_BIN_EXE_quorum")).unwrap();
    // A host whose PATH has the tools a host needs, and gzip, but no zstd.
    let gzip_only = Lab::with_tools(HOST_TOOLS);
    let zst = format!("{}.zst", our_name());
    let gz = format!("{}.gz", our_name());
    for (lab, made) in [
        (Lab::new(""), vec![zst.clone()]),
        (gzip_only, vec![gz, zst]),
    ] {
        let o = lab.quorum(&["call", "--agent", "far", "--input", "echo hi"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        assert!(text(&o.stdout).contains("hi"), "{}", text(&o.stdout));
        assert_eq!(names(&lab.path("home").join("cache/quorum")), made);
        let copy = std::fs::read(lab.host().join("bin").join(our_name())).unwrap();
        assert!(copy == binary, "the host's copy is not the binary");
        lab.assert_nothing_left(&[]);
    }
}

/// A copy on the host that is not the binary any more (changed there, or
/// cut short) is found by its hash before it runs, and replaced.
#[test]
fn a_changed_copy_on_the_host_is_found_by_its_hash_and_replaced() {
    let lab = Lab::new("");
    let call = || {
        let o = lab.quorum(&["call", "--agent", "far", "--input", "echo hi"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        assert!(text(&o.stdout).contains("hi"), "{}", text(&o.stdout));
    };
    call();
    let copy = lab.host().join("bin").join(our_name());
    let marker = lab.path("ran-the-changed-copy");
    for changed in [
        format!("#!/bin/sh\ntouch {}\nexit 1\n", marker.display()).into_bytes(),
        std::fs::read(&copy).unwrap()[..1 << 20].to_vec(),
    ] {
        std::fs::write(&copy, changed).unwrap();
        call();
        assert!(!marker.exists(), "the changed copy ran");
        assert_eq!(sha256(&copy), our_name()["quorum-".len()..]);
    }
    lab.assert_nothing_left(&[]);
}

#[test]
fn a_host_of_another_architecture_is_a_clear_error_and_nothing_is_copied() {
    // The host's `uname -sm` says another machine.
    let uname = ["/usr/bin/uname", "/bin/uname"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("uname");
    let lab = Lab::with_shim(
        "uname",
        &format!(
            "#!/bin/sh\ncase \"$*\" in -sm) echo 'Linux riscv64' ;; *) exec {uname} \"$@\" ;; esac\n"
        ),
    );
    let o = lab.quorum(&["call", "--agent", "far", "--input", "echo hi"]);
    let said = text(&o.stdout) + &text(&o.stderr);
    assert!(!o.status.success(), "{said}");
    let ours = format!(
        "{} {}",
        match std::env::consts::OS {
            "linux" => "Linux",
            other => other,
        },
        std::env::consts::ARCH
    );
    assert!(
        said.contains(&format!(
            "host lab: it is Linux riscv64, this quorum is {ours}: quorum cannot copy itself there"
        )),
        "{said}"
    );
    // Nothing of quorum went there.
    let copied = names(&lab.host().join("bin"));
    assert!(copied.is_empty(), "{copied:?}");
    lab.assert_nothing_left(&[]);
}

/// A real agent on the host: claude-agent-acp (installed into `.tools/` by
/// `scripts/install-acp-adapter.sh claude`), offline, its model the fake
/// Anthropic server on loopback, its home private. A call answers through
/// the proxy there, and after the call nothing of it runs there (claude
/// does not exit when its stdin closes: the proxy ends it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_agent_acp_on_a_host_answers_and_is_ended_there() {
    let exe =
        tokio::task::spawn_blocking(|| common::install_with("install-acp-adapter.sh", &["claude"]))
            .await
            .unwrap();
    let model = common::models::FakeModel::start().await;
    let url = model.url();
    let lab = tokio::task::spawn_blocking(|| Lab::new("")).await.unwrap();
    let home = lab.path("claude-home");
    std::fs::create_dir_all(&home).unwrap();
    let d = lab.dir.path().display().to_string();
    let config = lab.path("config/claude.toml");
    std::fs::write(
        &config,
        format!(
            "[hosts.lab]\nssh = \"lab\"\nssh_args = [\"-F\", \"{d}/ssh_config\"]\ndir = \"{d}/host\"\n\
             [agents.claude]\ncommand = {exe:?}\nhost = \"lab\"\n\
             env = {{ ANTHROPIC_BASE_URL = {url:?}, ANTHROPIC_API_KEY = \"fake\", IS_SANDBOX = \"1\", \
             CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = \"1\", DISABLE_TELEMETRY = \"1\", \
             DISABLE_AUTOUPDATER = \"1\", HOME = {home:?} }}\n"
        ),
    )
    .unwrap();
    let mut c = lab.command_with(
        &config,
        &["call", "--agent", "claude", "--json", "--input", "plain"],
    );
    let o = tokio::task::spawn_blocking(move || c.output_bounded())
        .await
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let line: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    assert_eq!(line["output"], "Plain answer.", "{line}");
    // claude worked in the task's directory on the host, not in the
    // person's: its model was told so.
    let asked = serde_json::to_string(&*model.requests.lock().unwrap()).unwrap();
    let scratch = lab.host().join("scratch").display().to_string();
    assert!(asked.contains(&scratch), "{asked}");
    assert!(
        !asked.contains(&lab.repo().display().to_string()),
        "{asked}"
    );
    // It ran on the host, in the task's directory there, with the home it
    // was given there (its environment went there in a private file).
    assert!(home.join(".claude.json").exists() || home.join(".claude").is_dir());
    // Nothing of it runs any more.
    let left = common::models::leftovers(&home);
    assert!(left.is_empty(), "still running on the host: {left:?}");
    lab.nothing_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_of_a_hosts_worktree_task_works_on_in_its_worktree_there() {
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let lab = Lab::new(&format!(
        "[agents.tally]\ncommand = {fake:?}\nhost = \"lab\"\n\
         args = [\"--scenario\", \"own run echo turn >> turns.txt\"]\n"
    ));
    let (session, _ops, mut events) = lab.session();
    let d = session.dispatcher().clone();
    let task = start_worktree_task(&d, "tally", "Count the turns").await;
    let (stop, output) = finished(&mut events).await;
    assert_eq!(stop, StopReason::EndTurn, "{output}");
    d.follow_up(&task, "Once more").unwrap();
    let (stop, output) = finished(&mut events).await;
    assert_eq!(stop, StopReason::EndTurn, "{output}");
    let branch = lab.git(&[
        "for-each-ref",
        "--format=%(refname:short)",
        "refs/heads/quorum/",
    ]);
    assert_eq!(
        lab.git(&["show", &format!("{branch}:turns.txt")]),
        "turn\nturn",
        "both turns' work came home"
    );
    session.shutdown();
    drop(session);
    lab.assert_nothing_left(&[]);
}

/// A background worktree task of `agent` doing `input`, started: its
/// task id.
async fn start_worktree_task(
    d: &std::sync::Arc<quorum::subagent::dispatch::Dispatcher>,
    agent: &str,
    input: &str,
) -> String {
    let reply = d
        .call(SubAgentCallInput {
            agent: Some(agent.into()),
            input: Some(input.into()),
            run_in_background: true,
            isolation: Some(Isolation::Worktree),
            ..SubAgentCallInput::default()
        })
        .await
        .unwrap();
    let quorum::subagent::dispatch::Reply::Started { task_id, .. } = reply else {
        panic!("not started in the background: {reply:?}");
    };
    task_id
}

/// The next call's end: its stop reason and output.
async fn finished(events: &mut mpsc::UnboundedReceiver<Stamped>) -> (StopReason, String) {
    next_of(events, |e| match e {
        Event::SubagentFinished {
            stop_reason,
            output,
            ..
        } => Some((*stop_reason, output.clone())),
        _ => None,
    })
    .await
}

/// `quorum run` on the scripted model `turns` (its requests logged to
/// `NAME.log`), with the config file `config` and `extra` arguments; it
/// must succeed.
fn run_script(lab: &Lab, config: &Path, name: &str, turns: serde_json::Value, extra: &[&str]) {
    let script = lab.path(&format!("{name}.json"));
    let body = serde_json::json!({"turns": turns, "log": format!("{name}.log")});
    std::fs::write(&script, body.to_string()).unwrap();
    let mut c = lab.command_with(config, &["run", "--approve", "all", "--model"]);
    c.arg(format!("script:{}", script.display()))
        .args(["-p", "go"])
        .args(extra);
    let o = c.output_bounded();
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn a_hosts_worktree_task_goes_on_in_a_continued_session_on_its_session_there() {
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let lab = Lab::new("");
    let d = lab.dir.path().display().to_string();
    // Its sessions kept where its sandbox there (a worktree task's, when
    // the host has bubblewrap) lets it write, as a real agent's state is.
    std::fs::create_dir_all(lab.host().join("agent/store")).unwrap();
    let config = lab.path("config/tally.toml");
    std::fs::write(
        &config,
        format!(
            "[hosts.lab]\nssh = \"lab\"\nssh_args = [\"-F\", \"{d}/ssh_config\"]\ndir = \"{d}/host\"\n\
             [agents.tally]\ncommand = {fake:?}\nhost = \"lab\"\nwritable = [\"{d}/host/agent/\"]\n\
             args = [\"--store\", \"{d}/host/agent/store\", \"--sessions\", \"{d}/host/agent/sessions.log\", \
             \"--scenario\", \"own run echo turn >> turns.txt\"]\n"
        ),
    )
    .unwrap();
    let record = lab.path("session.jsonl");
    run_script(
        &lab,
        &config,
        "first",
        serde_json::json!([
            {"text": "", "tool_calls": [{"name": "subagent", "arguments": {"agent": "tally", "input": "Count the turns", "isolation": "worktree", "run_in_background": true}}]},
            {"text": "Started."},
            {"text": "It reported."}
        ]),
        &["--record", record.to_str().unwrap()],
    );
    let branch = lab.git(&[
        "for-each-ref",
        "--format=%(refname:short)",
        "refs/heads/quorum/",
    ]);
    assert_eq!(lab.git(&["show", &format!("{branch}:turns.txt")]), "turn");
    // A new quorum goes on with the session: a message to the task.
    run_script(
        &lab,
        &config,
        "second",
        serde_json::json!([
            {"text": "", "tool_calls": [{"name": "subagent_status", "arguments": {"task_id": "t1", "message": "Once more", "wait_seconds": 30}}]},
            {"text": "Again."},
            {"text": "Reported."}
        ]),
        &["--resume", record.to_str().unwrap()],
    );
    // It worked on in its worktree there, on its session there, resumed.
    assert_eq!(
        lab.git(&["show", &format!("{branch}:turns.txt")]),
        "turn\nturn"
    );
    let asked = std::fs::read_to_string(lab.host().join("agent/sessions.log")).unwrap();
    let asked: Vec<&str> = asked.lines().collect();
    let [new, resumed] = &asked[..] else {
        panic!("{asked:?}");
    };
    assert!(new.starts_with("new "), "{asked:?}");
    assert_eq!(resumed.replace("resume ", "new "), *new, "{asked:?}");
    lab.assert_nothing_left(&[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_being_made_as_the_session_ends_is_ended_too() {
    let lab = Lab::new("");
    let hosts = std::sync::Arc::new(lab.hosts());
    let connecting = tokio::spawn({
        let hosts = hosts.clone();
        async move { hosts.link("lab").await.map(drop) }
    });
    // Its master runs: the session ends while the host is being probed.
    let master = wait_until(Duration::from_secs(30), || {
        lab.strays().iter().any(|l| l.contains(" -M "))
    });
    assert!(master, "no ssh master started");
    hosts.close();
    let linked = connecting.await.unwrap();
    assert!(
        linked
            .as_ref()
            .is_err_and(|e| matches!(e, quorum::remote::RemoteError::Closing { .. })),
        "{linked:?}"
    );
    assert!(hosts.live("lab").is_none());
    lab.nothing_left().await;
}

/// Everything quorum runs over ssh goes through the host's master or not
/// at all: a git push or a step still on its way when the session closes
/// its hosts fails, where ssh would otherwise open a connection of its own
/// (its fallback when the master's socket is gone) that nothing owns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_the_hosts_are_closed_nothing_reaches_them_on_a_connection_of_its_own() {
    let lab = Lab::new("");
    let hosts = lab.hosts();
    let link = hosts.link("lab").await.unwrap();
    // git's ssh command (git adds the host and its command), and a step's.
    let git_ssh = format!("{} lab echo reached", link.git_ssh_command());
    let step = || {
        let mut c = Command::new("ssh");
        c.args(link.ssh_args()).arg("echo reached");
        c
    };
    let run = |mut c: Command| c.output_bounded();
    let sh = |line: &str| {
        let mut c = Command::new("sh");
        c.args(["-c", line]);
        c
    };
    for out in [run(sh(&git_ssh)), run(step())] {
        assert_eq!(text(&out.stdout), "reached\n", "{}", text(&out.stderr));
    }
    hosts.close();
    for out in [run(sh(&git_ssh)), run(step())] {
        assert!(!out.status.success(), "reached without the master");
        assert_eq!(text(&out.stdout), "", "{}", text(&out.stderr));
    }
    drop(link);
    lab.nothing_left().await;
}

/// A step quorum runs on a host (git there, for a worktree task) is ended
/// there with the call that runs it, and with the session: sshd would let
/// it run to its end, however long, with nothing here to own it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_on_the_host_ends_there_with_its_call_and_with_the_session() {
    let lab = Lab::new("");
    let hosts = lab.hosts();
    let link = hosts.link("lab").await.unwrap();
    let ran = link
        .run("echoing", "echo said; echo told >&2")
        .await
        .unwrap();
    assert_eq!(ran, "said\n");
    let failed = link
        .run("failing", "echo why >&2; exit 3")
        .await
        .unwrap_err();
    assert!(failed.to_string().contains("why"), "{failed}");
    let sleeping = format!("cd {} && exec sleep 600", lab.host().display());
    let asleep = |lab: &Lab| lab.strays().iter().any(|l| l.contains(": sleep 600"));
    // Its call dropped (its task aborted).
    let step = tokio::spawn({
        let (link, sleeping) = (link.clone(), sleeping.clone());
        async move { link.run("sleeping", &sleeping).await }
    });
    assert!(wait_until(Duration::from_secs(30), || asleep(&lab)));
    step.abort();
    let _ = step.await;
    assert!(
        wait_until(Duration::from_secs(15), || !asleep(&lab)),
        "{:#?}",
        lab.strays()
    );
    // The session's hosts closed.
    let step = tokio::spawn({
        let link = link.clone();
        async move { link.run("sleeping", &sleeping).await }
    });
    assert!(wait_until(Duration::from_secs(30), || asleep(&lab)));
    hosts.close();
    assert!(step.await.unwrap().is_err());
    drop(link);
    lab.nothing_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_call_opens_after_the_session_is_shut_down() {
    // As a `/retry` winding down after the session ended would: nothing of
    // it may start (a worktree, git, ssh) once the session is gone.
    let lab = Lab::new("");
    let (session, _ops, _events) = lab.session();
    let d = session.dispatcher().clone();
    session.shutdown();
    let refused = d
        .call(SubAgentCallInput {
            agent: Some("far".into()),
            input: Some("Write something".into()),
            run_in_background: true,
            isolation: Some(Isolation::Worktree),
            ..SubAgentCallInput::default()
        })
        .await;
    assert!(
        matches!(
            refused,
            Err(quorum::subagent::dispatch::DispatchError::Closed)
        ),
        "{refused:?}"
    );
    assert_eq!(
        lab.git(&["for-each-ref", "refs/heads/quorum/"]),
        "",
        "no branch made"
    );
    assert!(!lab.host().join("bin").exists(), "the host was not reached");
    drop(session);
    lab.assert_nothing_left(&[]);
}

/// What reaching a host costs in ssh: a call runs `ssh` twice, its
/// control master (whose own session probes the host, checks quorum there
/// by its hash, and on a new host takes the copy: its answer says the
/// connection is up) and the proxy's session over it, then asks the master
/// to exit; it polls nothing (`ssh -O check`) and opens no session of its
/// own for the probe or the copy. In a session, another agent on a host
/// already connected costs one `ssh`: its proxy's. Counted by an `ssh`
/// first on `PATH` that logs its arguments and runs the real one.
#[test]
fn a_call_runs_ssh_for_its_master_and_its_proxy_only() {
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let lab = Lab::new(&format!(
        "[agents.near]\ncommand = {fake:?}\nhost = \"lab\"\n"
    ));
    let shim = lab.path("ssh-shim");
    std::fs::create_dir_all(&shim).unwrap();
    let log = lab.path("ssh.log");
    let real = ["/usr/bin/ssh", "/usr/local/bin/ssh", "/bin/ssh"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("ssh");
    let wrapper = shim.join("ssh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> {}\nexec {real} \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = |args: &[&str]| {
        let mut c = lab.command(args);
        let path = common::hermetic_env(&lab.path("home"))
            .into_iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.to_string_lossy().into_owned())
            .unwrap_or_default();
        c.env("PATH", format!("{}:{path}", shim.display()));
        let o = c.output_bounded();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        assert!(text(&o.stdout).contains("hi"), "{}", text(&o.stdout));
        lab.assert_nothing_left(&[]);
        // What each ssh was for: the master, a session over it, or a
        // question to the master (`-O check`); not the `-O exit` that ends
        // it (once or twice: the link's drop asks again while the master's
        // socket is still there).
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        std::fs::remove_file(&log).unwrap();
        said.lines()
            .filter(|l| !l.contains("-O exit"))
            .map(|l| {
                if let Some(i) = l.find("-O ") {
                    format!("-O {}", l[i + 3..].split(' ').next().unwrap_or(""))
                } else if l.starts_with("-M ") {
                    "master".to_string()
                } else {
                    "session".to_string()
                }
            })
            .collect::<Vec<_>>()
    };
    // The first call copies quorum there, through the master's own
    // session (none of its own for that).
    let first = run(&["call", "--agent", "far", "--input", "echo hi"]);
    assert_eq!(first, ["master", "session"]);
    let later = run(&["call", "--agent", "far", "--input", "echo hi"]);
    assert_eq!(later, ["master", "session"]);
    // In one session: the master once, a session per agent.
    let script = lab.path("two.json");
    let turns = serde_json::json!({"turns": [
        {"text": "", "tool_calls": [{"name": "subagent", "arguments": {"agent": "far", "input": "echo hi"}}]},
        {"text": "", "tool_calls": [{"name": "subagent", "arguments": {"agent": "near", "input": "echo hi"}}]},
        {"text": "Done, hi."}
    ]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let model = format!("script:{}", script.display());
    let session = run(&["run", "--approve", "all", "--model", &model, "-p", "go"]);
    assert_eq!(session, ["master", "session", "session"]);
}
