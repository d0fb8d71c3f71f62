//! Interop with the real claude-agent-acp (npm, installed into `.tools/` by
//! `scripts/install-acp-adapter.sh claude`), offline: its model is a fake
//! Anthropic Messages server on loopback (`common::models`). A plain turn,
//! a review verdict, a tool call and its permission request, resume in a
//! new quorum process, cancel, and nothing left running after any of it.
#![cfg(target_os = "linux")]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::models::{FakeModel, leftovers};
use serde_json::Value;

struct Claude {
    dir: tempfile::TempDir,
    config: PathBuf,
    model: FakeModel,
}

impl Claude {
    async fn start() -> Claude {
        let exe = tokio::task::spawn_blocking(|| {
            common::install_with("install-acp-adapter.sh", &["claude"])
        })
        .await
        .unwrap();
        let model = FakeModel::start().await;
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        let config = dir.path().join("quorum.toml");
        std::fs::write(
            &config,
            format!(
                "[agents.claude]\ncommand = {exe:?}\nenv = {{ ANTHROPIC_BASE_URL = {url:?}, ANTHROPIC_API_KEY = \"fake\", \
                 IS_SANDBOX = \"1\", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = \"1\", DISABLE_TELEMETRY = \"1\", \
                 DISABLE_AUTOUPDATER = \"1\", HOME = {home:?} }}\n",
                url = model.url(),
            ),
        )
        .unwrap();
        Claude { dir, config, model }
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_quorum"));
        c.arg("--config")
            .arg(&self.config)
            .args(["call", "--agent", "claude", "--cwd"])
            .arg(self.work())
            .args(args)
            .env("XDG_STATE_HOME", self.dir.path().join("state"))
            .kill_on_drop(true);
        c
    }

    async fn call(&self, args: &[&str]) -> Output {
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(120),
            self.command(args).output(),
        )
        .await
        .expect("quorum call ends");
        let out = out.unwrap();
        assert_nothing_left(&self.home(), &out);
        out
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn json_lines(out: &Output) -> Vec<Value> {
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// claude-agent-acp does not exit when its stdin closes: quorum ends it.
fn assert_nothing_left(home: &Path, out: &Output) {
    let left = leftovers(home);
    assert!(
        left.is_empty(),
        "still running after quorum exited: {left:?}\nstderr: {}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_answers_reviews_and_resumes_in_a_new_process() {
    let c = Claude::start().await;
    let out = c
        .call(&["--json", "--input", "plain", "--input", "count"])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines = json_lines(&out);
    assert_eq!(lines[0]["output"], "Plain answer.");
    assert_eq!(lines[0]["session"], "fresh");
    assert_eq!(lines[1]["session"], "resumed", "{}", text(&out.stdout));
    assert_eq!(
        lines[1]["output"], "messages: 2",
        "the first turn came along"
    );
    let id = lines[1]["session_id"].as_str().unwrap().to_string();

    // A new quorum process resumes the same session.
    let out = c
        .call(&["--json", "--resume", &id, "--input", "count"])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let line = &json_lines(&out)[0];
    assert!(
        line["session"] == "resumed" || line["session"] == "loaded",
        "{line}"
    );
    assert_eq!(line["session_id"], id.as_str());
    assert_eq!(line["output"], "messages: 3");

    let out = c
        .call(&["--json", "--code-review", "--input", "review red"])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let line = &json_lines(&out)[0];
    assert_eq!(line["severity"], "red");
    assert!(line["output"].as_str().unwrap().contains("Looks red."));
    assert!(!c.model.requests.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_asks_before_writing_and_quorum_answers() {
    let c = Claude::start().await;
    let target = c.work().join("out.txt");
    let prompt = format!("write {}", target.display());
    let out = c.call(&["--approve", "none", "--input", &prompt]).await;
    assert!(!target.exists(), "written though refused");
    assert!(
        text(&out.stderr).contains("? permission"),
        "{}",
        text(&out.stderr)
    );
    let out = c.call(&["--approve", "all", "--input", &prompt]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("? permission"),
        "the request was shown: {}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "written by claude\n"
    );
    assert_eq!(text(&out.stdout).trim(), "written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_is_cancelled_by_ctrl_c() {
    let c = Claude::start().await;
    let child = c
        .command(&["--json", "--input", "slow"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the model is streaming.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while c.model.requests.lock().unwrap().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no model request");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("quorum exits after Ctrl+C")
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(json_lines(&out)[0]["stop_reason"], "cancelled");
    assert_nothing_left(&c.home(), &out);
}
