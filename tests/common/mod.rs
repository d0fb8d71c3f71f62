#![allow(dead_code)]

use std::path::PathBuf;

pub mod adapter;
pub mod app;
pub mod events;
pub mod jsonrpc;
pub mod mcp;
pub mod models;
#[cfg(unix)]
pub mod pty;
pub mod shell;

use quorum::event::Stamped;
use quorum::transcript;
use quorum::tui::app::App;
use quorum::tui::screenshot;
use ratatui::buffer::Buffer;
use ratatui::style::Color;

/// How long a process a test starts may run before the test gives up on it.
pub const PROCESS_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// A command run to its end with a bound: its output read as it comes
/// (a pipe left unread fills at 64 KiB and would stop it); killed, and the
/// test failed naming it, when it takes longer than [`PROCESS_LIMIT`].
pub trait Bounded {
    fn output_bounded(&mut self) -> std::process::Output;
}

impl Bounded for std::process::Command {
    fn output_bounded(&mut self) -> std::process::Output {
        let what = format!("{:?}", self);
        self.stdin(std::process::Stdio::null());
        let mut command = std::mem::replace(self, std::process::Command::new("true"));
        // `bounded` takes the command by value; the caller's is left spent.
        command.stdin(std::process::Stdio::null());
        shell::bounded(command, PROCESS_LIMIT)
            .unwrap_or_else(|| panic!("{what} ran longer than {PROCESS_LIMIT:?}: killed"))
    }
}

/// Waits for `child` (told to end) to exit, for at most [`PROCESS_LIMIT`]:
/// the test fails naming `what` when it does not.
pub fn wait_bounded(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > PROCESS_LIMIT {
            let _ = child.kill();
            panic!("{what}: still running after {PROCESS_LIMIT:?}; killed");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// [`wait_bounded`], with what the child wrote on the pipes it still has
/// (read as it comes).
pub fn wait_output_bounded(mut child: std::process::Child, what: &str) -> std::process::Output {
    use std::io::Read;
    fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    }
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = wait_bounded(&mut child, what);
    std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub fn demo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/demo.jsonl")
}

pub fn events(path: &std::path::Path) -> Vec<Stamped> {
    let loaded = transcript::load(path).expect("fixture loads");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    loaded.events
}

/// The screen after applying `events`, with the side panel as given.
/// The first box of `events`, replayed through `State::apply`, as its
/// opened view shows it `width` columns wide: one line of text per row.
pub fn opened_box(events: &[Stamped], width: usize) -> String {
    use quorum::tui::state::{CellKind, State};
    let mut state = State::new();
    for e in events {
        state.apply(e);
    }
    let b = state
        .cells
        .iter()
        .find_map(|c| match &c.kind {
            CellKind::Subagent(b) => Some(b),
            _ => None,
        })
        .expect("a box");
    quorum::tui::detail::render(b, width, state.now)
        .iter()
        .map(|l| {
            l.spans
                .iter()
                .map(|s| s.content.as_ref())
                .collect::<String>()
                + "\n"
        })
        .collect()
}

pub fn screen(events: &[Stamped], cols: u16, rows: u16, panel: Option<bool>) -> Buffer {
    let mut app = App::still();
    app.view.set_panel(panel);
    for e in events {
        app.on_event(e.clone());
    }
    screenshot::render(&mut app, cols, rows)
}

/// The buffer's text rows.
pub fn rows(buf: &Buffer) -> Vec<String> {
    screenshot::to_text(buf)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Position of the first occurrence of `needle` on screen (column in cells).
pub fn find(buf: &Buffer, needle: &str) -> Option<(u16, u16)> {
    for y in 0..buf.area.height {
        let row: String = (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect();
        if let Some(byte) = row.find(needle) {
            let col = row[..byte].chars().count() as u16;
            return Some((col, y));
        }
    }
    None
}

/// The colour of the rounded top-left corner of the box titled `agent`.
pub fn box_colour(buf: &Buffer, agent: &str) -> Color {
    let (x, y) = find(buf, &format!("╭─ {agent}"))
        .unwrap_or_else(|| panic!("no box for {agent}:\n{}", rows(buf).join("\n")));
    let corner = &buf[(x, y)];
    // The whole border is one colour: corner, left side, bottom.
    let below = &buf[(x, y + 1)];
    assert_eq!(below.symbol(), "│", "left border of {agent}");
    assert_eq!(below.fg, corner.fg, "left border of {agent}");
    corner.fg
}

/// Runs one of the repo's install scripts (idempotent) and returns the path
/// it prints last. A failed install fails the test.
pub fn install(script: &str) -> PathBuf {
    install_with(script, &[])
}

/// [`install`] with arguments for the script.
pub fn install_with(script: &str, args: &[&str]) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(script);
    let mut command = std::process::Command::new("bash");
    command.arg(&path).args(args);
    for (name, value) in original_env() {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let out = command.output_bounded();
    assert!(
        out.status.success(),
        "{script} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    PathBuf::from(
        stdout
            .lines()
            .last()
            .expect("the script prints the path")
            .trim(),
    )
}

/// The environment quorum runs in under a test: its state, config and home
/// in `home` (never the real ones of whoever runs the tests), a `PATH`
/// without any built-in agent ([`hermetic_path`]), a git configuration of
/// its own (`GIT_CONFIG_GLOBAL` a file in `home`, no system file) and a git
/// identity of its own. What it does not set, the git variables of the
/// environment the tests run in, go: [`inherited_git_vars`].
pub fn hermetic_env(home: &std::path::Path) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = vec![
        ("XDG_STATE_HOME".into(), home.join("state").into()),
        ("XDG_CONFIG_HOME".into(), home.join("config").into()),
        ("XDG_CACHE_HOME".into(), home.join("cache").into()),
        ("HOME".into(), home.into()),
        ("PATH".into(), hermetic_path().into()),
        ("GIT_CONFIG_GLOBAL".into(), home.join(".gitconfig").into()),
        ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
    ];
    for (key, value) in [
        ("GIT_AUTHOR_NAME", "quorum tests"),
        ("GIT_AUTHOR_EMAIL", "tests@quorum.invalid"),
        ("GIT_COMMITTER_NAME", "quorum tests"),
        ("GIT_COMMITTER_EMAIL", "tests@quorum.invalid"),
    ] {
        env.push((key.into(), value.into()));
    }
    env
}

/// The `GIT_*` variables of the environment the tests run in (`GIT_DIR`,
/// `GIT_WORK_TREE`, `GIT_INDEX_FILE`, `GIT_CONFIG_PARAMETERS`, ... as a
/// hook or `git rebase -x` sets them): removed from every command a test
/// runs, so no test's git reads another repository, index or
/// configuration. [`hermetic_env`] sets its own afterwards.
pub fn inherited_git_vars() -> Vec<std::ffi::OsString> {
    std::env::vars_os()
        .map(|(name, _)| name)
        .filter(|name| name.to_string_lossy().starts_with("GIT_"))
        .collect()
}

/// `quorum` (the binary under test) in [`hermetic_env`]`(home)`.
pub fn quorum(home: &std::path::Path) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_quorum"));
    for name in inherited_git_vars() {
        c.env_remove(name);
    }
    // Not as if an agent of another quorum had started it; no chat unless
    // the test chooses one.
    c.envs(hermetic_env(home))
        .env("QUORUM_MODEL", NO_CHAT)
        .env_remove("QUORUM_PROCESS");
    c
}

/// [`quorum`] as a tokio command.
pub fn quorum_async(home: &std::path::Path) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_quorum"));
    for name in inherited_git_vars() {
        c.env_remove(name);
    }
    // Not as if an agent of another quorum had started it; no chat unless
    // the test chooses one.
    c.envs(hermetic_env(home))
        .env("QUORUM_MODEL", NO_CHAT)
        .env_remove("QUORUM_PROCESS");
    c
}

/// `git` as a test runs it: in [`hermetic_env`]`(home)`, none of the
/// inherited git variables.
pub fn git(home: &std::path::Path) -> std::process::Command {
    let mut c = std::process::Command::new("git");
    for name in inherited_git_vars() {
        c.env_remove(name);
    }
    c.envs(hermetic_env(home))
        .stdin(std::process::Stdio::null());
    c
}

/// The environment of this test process itself, for the tests that run
/// quorum's engine (and so its git) in process: `HOME`, `XDG_CONFIG_HOME`
/// and `XDG_STATE_HOME` in a folder of this test program's own under
/// cargo's scratch directory, `GIT_CONFIG_GLOBAL` a file there, no system
/// git config, none of the inherited git variables, no chat by default
/// (`QUORUM_MODEL` is [`NO_CHAT`], none of [`NO_KEYS`]). Called once, by
/// the test program's constructor before `main` (`tests/it/main.rs`), when
/// the process has a single thread: no test ever sees it change. What was
/// there before is kept for the install scripts ([`original_env`]).
pub fn hermetic_process() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let binary = std::env::current_exe().unwrap();
        let name = binary.file_name().unwrap().to_string_lossy().into_owned();
        let home = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join("hermetic-home")
            .join(name);
        for sub in ["state", "config"] {
            std::fs::create_dir_all(home.join(sub)).unwrap();
        }
        std::fs::write(home.join(".gitconfig"), "").unwrap();
        let mut unset = inherited_git_vars();
        // No provider's key picks a chat (see `QUORUM_MODEL` below).
        unset.extend(NO_KEYS.iter().map(std::ffi::OsString::from));
        let set: [(&str, std::ffi::OsString); 7] = [
            // No chat unless a test chooses one: without it, the first agent
            // a test configures (or finds on PATH) would be the chat.
            ("QUORUM_MODEL", NO_CHAT.into()),
            ("HOME", home.clone().into()),
            ("XDG_CONFIG_HOME", home.join("config").into()),
            ("XDG_STATE_HOME", home.join("state").into()),
            ("XDG_CACHE_HOME", home.join("cache").into()),
            ("GIT_CONFIG_GLOBAL", home.join(".gitconfig").into()),
            ("GIT_CONFIG_NOSYSTEM", "1".into()),
        ];
        let mut original: Vec<(std::ffi::OsString, Option<std::ffi::OsString>)> = unset
            .iter()
            .map(|name| (name.clone(), std::env::var_os(name)))
            .collect();
        for (name, _) in &set {
            if !original.iter().any(|(n, _)| n == name) {
                original.push((name.into(), std::env::var_os(name)));
            }
        }
        let _ = ORIGINAL_ENV.set(original);
        // SAFETY: called from the constructor that runs before `main`, while
        // the process has one thread: nothing reads the environment meanwhile.
        unsafe {
            for name in unset {
                std::env::remove_var(name);
            }
            for (name, value) in set {
                std::env::set_var(name, value);
            }
        }
    });
}

/// What `QUORUM_MODEL` is in the tests' environment, unless a test
/// chooses: `none`, no chat (quorum's default chat, the first agent
/// installed, would otherwise be whichever agent a test configures).
/// The tests of that default remove it.
pub const NO_CHAT: &str = "none";

/// The API keys that would pick a provider's model as the default chat:
/// never inherited by the tests.
pub const NO_KEYS: [&str; 2] = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"];

static ORIGINAL_ENV: std::sync::OnceLock<Vec<(std::ffi::OsString, Option<std::ffi::OsString>)>> =
    std::sync::OnceLock::new();

/// The variables [`hermetic_process`] changed, as they were when the test
/// program started (`None`: unset): the install scripts run with them, so
/// that they find what the person's own environment has (`~/.pyenv`,
/// npm's cache).
pub fn original_env() -> &'static [(std::ffi::OsString, Option<std::ffi::OsString>)] {
    ORIGINAL_ENV.get().map_or(&[], Vec::as_slice)
}

/// For a test that acts on every process the test program started (ends
/// every process group of its supervisors, installs a panic hook that
/// does): runs the test `name` (its full name, `module::function`) alone
/// in a process of its own, this program started again for it alone.
/// Returns `true` in that process (the caller goes on with the test's
/// body) and `false` in the first one, once the test passed there; a
/// failure there, or no test of that name, fails the test here.
pub fn in_a_process_of_its_own(name: &str) -> bool {
    const ALONE: &str = "QUORUM_TEST_ALONE";
    if std::env::var_os(ALONE).is_some_and(|v| v == name) {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1"])
        .env(ALONE, name)
        .output_bounded();
    let said = format!("{}{}", shell::text(&out.stdout), shell::text(&out.stderr));
    assert!(
        out.status.success(),
        "{name}, in a process of its own:\n{said}"
    );
    assert!(
        said.contains("test result: ok. 1 passed"),
        "no test {name} ran in a process of its own:\n{said}"
    );
    false
}

/// A probe for code that git must not run: a fresh folder outside `/tmp`
/// (a sandbox hides the real one) and outside every session directory,
/// under cargo's scratch directory for tests, and scripts that leave a
/// file there when they run.
pub struct Probe {
    pub dir: tempfile::TempDir,
}

impl Probe {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("probe")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        Self { dir }
    }

    /// An executable script that, run, appends its arguments to `NAME.ran`
    /// in the probe's folder and prints a line.
    pub fn script(&self, name: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.path().join(format!("{name}.sh"));
        let marker = self.marker(name);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\necho \"$@\" >> '{}'\necho probed\n",
                marker.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// Where the script `name` leaves its mark.
    pub fn marker(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.ran"))
    }

    /// The scripts that ran.
    pub fn ran(&self) -> Vec<String> {
        let mut ran: Vec<String> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_suffix(".ran").map(str::to_string)
            })
            .collect();
        ran.sort();
        ran
    }
}

/// A `PATH` of one directory holding a link to every command of the
/// inherited `PATH` (the first of each name, as a shell finds it) except
/// the built-in agents' commands (`claude-agent-acp`, `opencode`, ...): the
/// tools quorum and the fake agents use are all there, and what agents the
/// machine has installed never changes what a test sees. Made once per
/// test binary, under cargo's scratch directory for tests.
pub fn hermetic_path() -> &'static std::path::Path {
    use std::collections::HashSet;
    use std::os::unix::fs::PermissionsExt;
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let agents: HashSet<String> = quorum::acp::registry::Registry::builtin()
            .all()
            .map(|a| a.command.clone())
            .collect();
        let binary = std::env::current_exe().unwrap();
        let name = binary.file_name().unwrap().to_string_lossy().into_owned();
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hermetic-path");
        let dir = root.join(&name);
        let building = root.join(format!("{name}.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&building);
        std::fs::create_dir_all(&building).unwrap();
        let mut seen = HashSet::new();
        let inherited = std::env::var_os("PATH").unwrap_or_default();
        for from in std::env::split_paths(&inherited) {
            let Ok(entries) = std::fs::read_dir(&from) else {
                continue;
            };
            for entry in entries.flatten() {
                let file = entry.file_name().to_string_lossy().into_owned();
                let path = entry.path();
                let executable = std::fs::metadata(&path)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
                if !executable || agents.contains(&file) || !seen.insert(file.clone()) {
                    continue;
                }
                std::os::unix::fs::symlink(&path, building.join(&file)).unwrap();
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::rename(&building, &dir).unwrap();
        dir
    })
}

/// Runs `cmd` to its end, its output collected; a run that takes longer
/// than `limit` is killed (`kill -9`: the reaper and the watchdog end its
/// agents) and the test fails saying so: a wedged agent shows as a
/// failure, never as a `cargo test` that hangs.
pub fn output_within(
    mut cmd: std::process::Command,
    limit: std::time::Duration,
) -> std::process::Output {
    use std::io::Read;
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("quorum runs");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = stderr.join().unwrap_or_default();
            panic!(
                "{cmd:?} was still running after {limit:?}; stderr: {}",
                String::from_utf8_lossy(&stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

/// The lines `out` (a child's stdout) writes, read on a thread of their
/// own, so that every wait for one can be bounded (`recv_timeout`).
pub fn lines_of(out: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    lines
}
