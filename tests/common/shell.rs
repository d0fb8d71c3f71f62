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

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// As [`Shell::run`], but a run that takes over a minute is killed and
    /// the test fails saying so: a wedge shows as a failure, not a hang.
    pub fn run_unwedged(&self, args: &[&str]) -> Output {
        self.run_unwedged_with(args, &[])
    }

    /// [`Shell::run_unwedged`] with `env` set too.
    pub fn run_unwedged_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut child = self
            .command(args)
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let start = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > std::time::Duration::from_secs(60) {
                child.kill().unwrap();
                panic!("quorum {args:?} is wedged");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        child.wait_with_output().unwrap()
    }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
