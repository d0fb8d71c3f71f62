//! Worktrees made ready and checked (`[worktree]`): the setup command run
//! in each new worktree before its agent's first turn, and the project's
//! check run on each turn's commit in a fresh checkout of it. Both run
//! sandboxed as an agent's terminal commands are (`runtime::sandbox`:
//! bubblewrap when it is installed, the directory writable and the caches
//! `share` names, no network for the check), in a process group the
//! supervisor owns, ended at its time limit; their output goes in the box,
//! bounded.

use std::path::Path;
use std::time::Duration;

use tokio::sync::watch;

use super::Dispatcher;
use crate::confine::limits::Tail;
use crate::event::{Activity, Event};
use crate::runtime::cancel::cancelled;
use crate::runtime::sandbox::{self, Policy};
use crate::runtime::supervisor::{self, Supervisor};
use crate::subagent::lock;
use crate::worktree::{self, Settings, Worktree};

/// The most of a setup's or check's output kept for the box.
pub const MAX_OUTPUT: usize = 16 * 1024;

/// How long a setup may run.
const SETUP_TIMEOUT: Duration = Duration::from_secs(3600);

/// How a sandboxed command ended.
#[derive(Debug)]
pub struct Ran {
    pub success: bool,
    /// Its exit code, `None` when a signal ended it.
    pub code: Option<i32>,
    pub timed_out: bool,
    /// Stopped because its call was cancelled.
    pub cancelled: bool,
    /// Its output (stderr with stdout), its newest [`MAX_OUTPUT`] bytes.
    pub output: String,
}

impl Dispatcher {
    /// Takes `[worktree]`'s settings.
    pub fn set_worktree_settings(&self, settings: Settings) {
        lock(&self.worktrees).settings = settings;
    }

    pub(super) fn worktree_settings(&self) -> Settings {
        lock(&self.worktrees).settings.clone()
    }

    /// Runs `[worktree] setup` in a new worktree (once per worktree),
    /// before its agent's first turn; its output in the box. A failure is
    /// the reason the task stops.
    pub(super) async fn set_up(
        &self,
        call_id: &str,
        w: &Worktree,
        cancel: watch::Receiver<bool>,
    ) -> Option<String> {
        let settings = self.worktree_settings();
        let setup = settings.setup.clone()?;
        if !lock(&self.worktrees).set_up.insert(w.branch.clone()) {
            return None;
        }
        self.box_notice(call_id, format!("setup: running `{setup}` in the worktree"));
        let policy = policy(&settings, true, "setup");
        let ran = run_confined(
            self.pool.supervisor(),
            &setup,
            &w.path,
            &policy,
            (SETUP_TIMEOUT, cancel),
        )
        .await;
        let ran = match ran {
            Ok(ran) if ran.success => {
                let tail = last_lines(&ran.output, 8);
                self.box_notice(call_id, format!("setup: `{setup}` done\n{tail}"));
                return None;
            }
            Ok(ran) => ran,
            Err(e) => {
                lock(&self.worktrees).set_up.remove(&w.branch);
                return Some(format!("setup `{setup}` could not run: {e}"));
            }
        };
        // A follow-up tries it again.
        lock(&self.worktrees).set_up.remove(&w.branch);
        let tail = last_lines(&ran.output, 8);
        let how = match (ran.timed_out, ran.code) {
            _ if ran.cancelled => "its call was cancelled".to_string(),
            (true, _) => format!("ran out of time after {} s", SETUP_TIMEOUT.as_secs()),
            (false, Some(code)) => format!("exit status {code}"),
            (false, None) => "ended by a signal".to_string(),
        };
        Some(format!(
            "setup `{setup}` failed ({how}), so the agent did not start:\n{tail}"
        ))
    }

    /// Runs `[worktree] check` on `commit` of a writer's branch, in a
    /// fresh checkout of it (removed afterwards), and says what it found:
    /// its box line and the tests the branch touches (`None`: no check,
    /// or no checkout to run it in, said in the box).
    pub(super) async fn check_commit(
        &self,
        call_id: &str,
        w: &Worktree,
        commit: &str,
        cancel: watch::Receiver<bool>,
    ) -> Option<(String, Vec<String>)> {
        let settings = self.worktree_settings();
        let check = settings.check.clone()?;
        self.box_notice(call_id, format!("check: running `{check}` on {commit}"));
        let state = lock(&self.worktrees).state.clone();
        let (repo, c, base, branch) = (
            w.repo(),
            commit.to_string(),
            w.base_commit.clone(),
            w.branch.clone(),
        );
        let made = tokio::task::spawn_blocking(move || {
            let parent = state
                .unwrap_or_else(std::env::temp_dir)
                .join("quorum/checks");
            std::fs::create_dir_all(&parent).map_err(|e| e.to_string())?;
            let dir = Checkout::new(&parent)?;
            repo.export(&c, &dir.0).map_err(|e| e.to_string())?;
            let touched: Vec<String> = repo.tests_touched(&base, &branch).unwrap_or_default();
            Ok::<_, String>((dir, touched))
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
        let (dir, touches_tests) = match made {
            Ok(made) => made,
            Err(e) => {
                self.box_notice(call_id, format!("check: no checkout of {commit}: {e}"));
                return None;
            }
        };
        let policy = policy(&settings, false, "check");
        let timeout = settings.check_timeout;
        let started = std::time::Instant::now();
        let ran = run_confined(
            self.pool.supervisor(),
            &check,
            &dir.0,
            &policy,
            (timeout, cancel),
        )
        .await;
        let _ = tokio::task::spawn_blocking(move || drop(dir)).await;
        let ran = ran.unwrap_or_else(|e| Ran {
            success: false,
            code: None,
            timed_out: false,
            cancelled: false,
            output: format!("`{check}` could not run: {e}"),
        });
        if ran.cancelled {
            self.box_notice(call_id, format!("check: `{check}` cancelled"));
            return None;
        }
        let ms = started.elapsed().as_millis() as u64;
        let counts = worktree::ready::counts(&ran.output);
        let timed_out = ran.timed_out.then_some(timeout.as_secs());
        let missing = worktree::ready::missing_tool(ran.code, &ran.output);
        let line = crate::event::check_line(ran.success, counts, timed_out, missing.as_deref());
        let cell =
            crate::event::arena::CheckCell::of(ran.success, counts, timed_out, missing.as_deref())
                .took(Some(ms));
        self.record_check(&w.branch, cell, touches_tests.clone());
        self.emitter.emit(Event::CheckFinished {
            call_id: call_id.to_string(),
            branch: w.branch.clone(),
            commit: commit.to_string(),
            passed: ran.success,
            counts,
            timed_out,
            output: ran.output,
            touches_tests: touches_tests.clone(),
            missing,
            ms: Some(ms),
        });
        Some((line, touches_tests))
    }

    fn box_notice(&self, call_id: &str, text: String) {
        self.emitter.emit(Event::SubagentActivity {
            call_id: call_id.to_string(),
            activity: Activity::Notice { text },
        });
    }
}

/// A fresh folder for a commit's checkout, removed when dropped.
struct Checkout(std::path::PathBuf);

impl Checkout {
    fn new(parent: &Path) -> Result<Self, String> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let dir = parent.join(format!("check-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Self(dir))
    }
}

impl Drop for Checkout {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The sandbox of a setup or a check: as an agent's terminal commands
/// (bubblewrap when installed), the caches `share` names writable; the
/// setup reaches the network (it installs: `npm ci`, `uv sync`), the check
/// does not.
fn policy(settings: &Settings, network: bool, setting: &'static str) -> Policy {
    Policy {
        network,
        writable: settings.share.clone(),
        setting,
        ..Policy::default()
    }
}

/// The last `n` lines of `text`.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `sh -c command` in `dir`, confined as `policy` says, in a process
/// group of its own that is ended when it exits, at `timeout`, or when
/// `cancel` is set (nothing it started outlives it); its output bounded.
pub async fn run_confined(
    supervisor: &Supervisor,
    command: &str,
    dir: &Path,
    policy: &Policy,
    (timeout, mut cancel): (Duration, watch::Receiver<bool>),
) -> Result<Ran, String> {
    use tokio::io::AsyncReadExt;
    let script = format!("exec 2>&1\n{command}");
    let confined = sandbox::command(
        "sh",
        ["-c", script.as_str()],
        (dir, dir),
        policy,
        sandbox::Env::Command(&[]),
    )
    .map_err(|e| e.to_string())?;
    let note = (!confined.sandboxed).then_some(
        "[not sandboxed: bubblewrap (bwrap) is not installed, so this command could write \
         outside its directory]\n",
    );
    let mut cmd = confined.cmd;
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let (mut child, group) = supervisor
        .spawn(cmd, "worktree command")
        .map_err(|e| format!("cannot run sh: {e}"))?;
    let kept = std::sync::Arc::new(std::sync::Mutex::new(Tail::new(MAX_OUTPUT)));
    let reader = {
        let (kept, stdout) = (kept.clone(), child.stdout.take());
        tokio::spawn(async move {
            let Some(mut pipe) = stdout else { return };
            let mut buf = vec![0; 16 * 1024];
            while let Ok(n @ 1..) = pipe.read(&mut buf).await {
                lock(&kept).push(&buf[..n]);
            }
        })
    };
    let ended = tokio::select! {
        ended = tokio::time::timeout(timeout, child.wait()) => Some(ended),
        _ = cancelled(&mut cancel) => None,
    };
    supervisor.terminate(&group, supervisor::GRACE).await;
    if tokio::time::timeout(Duration::from_secs(2), reader)
        .await
        .is_err()
    {
        tracing::warn!("a worktree command's output did not end with it");
    }
    let tail = std::mem::replace(&mut *lock(&kept), Tail::new(0));
    let (mut output, cut) = tail.into_text();
    if cut > 0 {
        output = format!("[quorum: the first {cut} bytes of output were cut]\n{output}");
    }
    let output = format!(
        "{}{}",
        note.unwrap_or_default(),
        crate::confine::sanitize::sanitize(&output)
    );
    let status = match ended {
        Some(Ok(status)) => status.map_err(|e| e.to_string())?,
        stopped => {
            let cancelled = stopped.is_none();
            let why = if cancelled {
                "[quorum: stopped: its call was cancelled]".to_string()
            } else {
                format!("[quorum: stopped after {} s]", timeout.as_secs())
            };
            return Ok(Ran {
                success: false,
                code: None,
                timed_out: !cancelled,
                cancelled,
                output: format!("{output}\n{why}"),
            });
        }
    };
    Ok(Ran {
        success: status.success(),
        code: status.code(),
        timed_out: false,
        cancelled: false,
        output,
    })
}
