//! `quorum` run as a person runs it, with the fake agent configured.

use std::process::{Command, Output};

pub struct Shell {
    pub dir: tempfile::TempDir,
    pub config: std::path::PathBuf,
}

/// A directory with a config file naming the fake agent `fake`.
pub fn shell() -> Shell {
    shell_with("")
}

/// As [`shell`], with `extra` appended to the config file.
pub fn shell_with(extra: &str) -> Shell {
    shell_in(&std::env::temp_dir(), extra)
}

/// As [`shell_with`], its directory made in `base` (e.g. `/var/tmp`, for a
/// tree that a sandbox's private `/tmp` would not hide).
pub fn shell_in(base: &std::path::Path, extra: &str) -> Shell {
    let dir = tempfile::tempdir_in(base).unwrap();
    let config = dir.path().join("quorum.toml");
    std::fs::write(
        &config,
        format!(
            "[agents.fake]\ncommand = {:?}\ndescription = \"the test agent\"\n{extra}",
            env!("CARGO_BIN_EXE_quorum-fake-agent")
        ),
    )
    .unwrap();
    Shell { dir, config }
}

impl Shell {
    pub fn command(&self, args: &[&str]) -> Command {
        // Logs, remembered model picks and the agents found stay the
        // test's own.
        let mut c = super::quorum(self.dir.path());
        c.arg("--config")
            .arg(&self.config)
            .args(args)
            .current_dir(self.dir.path());
        c
    }

    /// Runs quorum to its end, bounded: see [`Shell::run_unwedged`].
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_unwedged(args)
    }

    /// As [`Shell::run`], but a run that takes over a minute is killed and
    /// the test fails saying so: a wedge shows as a failure, not a hang.
    pub fn run_unwedged(&self, args: &[&str]) -> Output {
        self.run_unwedged_with(args, &[])
    }

    /// [`Shell::run_unwedged`] with `env` set too. Its output is read as it
    /// comes (a pipe left unread fills at 64 KiB and would stop it).
    pub fn run_unwedged_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut command = self.command(args);
        command.envs(env.iter().copied());
        bounded(command, std::time::Duration::from_secs(60))
            .unwrap_or_else(|| panic!("quorum {args:?} is wedged"))
    }
}

/// How long a host program (an MCP or ACP client driving quorum) may run
/// before it is a wedge.
pub const HOST_LIMIT: std::time::Duration = std::time::Duration::from_secs(150);

impl Shell {
    /// Runs the host program `program` with `args` in the shell's hermetic
    /// environment, in `dir`, killed (and the test failed) if it runs past
    /// [`HOST_LIMIT`]. Its output is read as it comes: a chatty host never
    /// looks wedged.
    pub fn run_host(
        &self,
        dir: &std::path::Path,
        program: &std::path::Path,
        args: &[&str],
    ) -> Output {
        let mut command = Command::new(program);
        for name in super::inherited_git_vars() {
            command.env_remove(name);
        }
        command
            .args(args)
            .envs(super::hermetic_env(self.dir.path()))
            .env("QUORUM_MODEL", super::NO_CHAT)
            .env_remove(quorum::serve::PROCESS_ENV)
            .current_dir(dir)
            .stdin(std::process::Stdio::null());
        bounded(command, HOST_LIMIT).unwrap_or_else(|| {
            panic!(
                "{} {args:?} is wedged: killed after {HOST_LIMIT:?}",
                program.display()
            )
        })
    }
}

/// A host client's steps (its JSON lines, each named by `step`), by name.
pub fn steps(stdout: &[u8]) -> std::collections::HashMap<String, serde_json::Value> {
    text(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| (v["step"].as_str().unwrap_or_default().to_string(), v))
        .collect()
}

/// Runs `command` to its end, its stdout and stderr read as they come; if
/// it takes longer than `limit` it is killed and `None` is returned.
pub fn bounded(mut command: Command, limit: std::time::Duration) -> Option<Output> {
    use std::io::Read;
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    Some(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// Bytes a program wrote, as text (what is not UTF-8 as U+FFFD).
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// What a program wrote on its stderr, as text.
pub fn stderr(o: &std::process::Output) -> String {
    text(&o.stderr)
}
