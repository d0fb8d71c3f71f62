//! A real ACP adapter (claude-agent-acp, codex-acp) run by `quorum call`
//! against a fake model server, with a private home; what the interop
//! tests of both share.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use super::Bounded;
use super::models::{FakeModel, leftovers};

pub struct Adapter {
    pub dir: tempfile::TempDir,
    pub model: FakeModel,
    config: PathBuf,
    agent: &'static str,
}

impl Adapter {
    /// Installs `agent`'s adapter with `scripts/install-acp-adapter.sh`
    /// and writes a quorum config for it: `table(dir, model_url, exe)` is
    /// its `[agents.NAME]` table (and may write files of its own in `dir`,
    /// which has `home/` and `work/`).
    pub async fn start(
        agent: &'static str,
        table: impl FnOnce(&Path, &str, &Path) -> String,
    ) -> Adapter {
        Self::start_in(&std::env::temp_dir(), agent, table).await
    }

    /// [`Adapter::start`] with its folder made under `base` (`/var/tmp`:
    /// a tree that a sandbox's private `/tmp` does not hide).
    pub async fn start_in(
        base: &Path,
        agent: &'static str,
        table: impl FnOnce(&Path, &str, &Path) -> String,
    ) -> Adapter {
        let exe = tokio::task::spawn_blocking(move || {
            super::install_with("install-acp-adapter.sh", &[agent])
        })
        .await
        .unwrap();
        let model = FakeModel::start().await;
        let dir = tempfile::tempdir_in(base).unwrap();
        for d in ["home", "work"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        let config = dir.path().join("quorum.toml");
        std::fs::write(&config, table(dir.path(), &model.url(), &exe)).unwrap();
        Adapter {
            dir,
            model,
            config,
            agent,
        }
    }

    /// The quorum config file naming the adapter.
    pub fn config(&self) -> &Path {
        &self.config
    }

    /// The adapter's private `HOME`.
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// The session directory.
    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// `quorum call --agent AGENT --cwd WORK ARGS`.
    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = super::quorum_async(&self.home());
        c.arg("--config")
            .arg(&self.config)
            .args(["call", "--agent", self.agent, "--cwd"])
            .arg(self.work())
            .args(args)
            .kill_on_drop(true);
        c
    }

    /// Runs a call to its end; nothing it started may be left running.
    pub async fn call(&self, args: &[&str]) -> Output {
        let out = tokio::time::timeout(Duration::from_secs(120), self.command(args).output())
            .await
            .expect("quorum call ends");
        let out = out.unwrap();
        self.assert_nothing_left(&out);
        out
    }

    /// What a failed call said: its stderr, and the end of quorum's log
    /// (where an agent's error and stderr are written).
    pub fn diagnose(&self, out: &Output) -> String {
        let log = std::fs::read_to_string(self.home().join("state/quorum/quorum.log"))
            .unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!(
            "{}\n--- quorum.log (last lines) ---\n{}",
            text(&out.stderr),
            tail.join("\n")
        )
    }

    /// These adapters do not exit when their stdin closes: quorum ends them.
    pub fn assert_nothing_left(&self, out: &Output) {
        let left = leftovers(&self.home());
        assert!(
            left.is_empty(),
            "still running after quorum exited: {left:?}\nstderr: {}",
            text(&out.stderr)
        );
    }

    /// A plain turn, the next one continuing its open session, the same
    /// session resumed by a new quorum process, and a review verdict.
    pub async fn answers_reviews_and_resumes_in_a_new_process(&self) {
        let out = self
            .call(&["--json", "--input", "plain", "--input", "count"])
            .await;
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let lines = json_lines(&out);
        assert_eq!(lines[0]["output"], "Plain answer.");
        assert_eq!(lines[0]["session"], "fresh");
        // Still open on the adapter's connection: prompted with no
        // session/resume or load.
        assert_eq!(lines[1]["session"], "continued", "{}", text(&out.stdout));
        assert_eq!(
            lines[1]["output"], "messages: 2",
            "the first turn came along"
        );
        let id = lines[1]["session_id"].as_str().unwrap().to_string();

        let out = self
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

        let out = self
            .call(&["--json", "--code-review", "--input", "review red"])
            .await;
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let line = &json_lines(&out)[0];
        assert_eq!(line["severity"], "red");
        assert!(line["output"].as_str().unwrap().contains("Looks red."));
    }

    /// `prompt` makes the agent ask for a permission that writes `target`:
    /// refused, nothing is written; allowed, it is, and the request shows.
    pub async fn asks_before_writing(
        &self,
        prompt: &str,
        target: &Path,
        written: &str,
        said: &str,
    ) {
        let out = self.call(&["--approve", "none", "--input", prompt]).await;
        assert!(
            !target.exists(),
            "written though refused: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains("? permission"),
            "{}",
            text(&out.stderr)
        );
        let out = self.call(&["--approve", "all", "--input", prompt]).await;
        assert_eq!(out.status.code(), Some(0), "{}", self.diagnose(&out));
        assert!(
            text(&out.stderr).contains("? permission"),
            "the request was shown: {}",
            text(&out.stderr)
        );
        assert_eq!(std::fs::read_to_string(target).unwrap(), written);
        assert_eq!(text(&out.stdout).trim(), said);
    }

    /// Ctrl+C during a streaming turn cancels it, and quorum ends the
    /// adapter.
    pub async fn is_cancelled_by_ctrl_c(&self) {
        let child = self
            .command(&["--json", "--input", "slow"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Wait until the model is streaming.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while self.model.requests.lock().unwrap().is_empty() {
            assert!(std::time::Instant::now() < deadline, "no model request");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let pid = nix::unistd::Pid::from_raw(child.id().unwrap() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .expect("quorum exits after Ctrl+C")
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        assert_eq!(json_lines(&out)[0]["stop_reason"], "cancelled");
        self.assert_nothing_left(&out);
    }
}

impl Adapter {
    /// The model asks for a shell command (`run echo probe-$((6*7))`):
    /// allowed, it runs, and its output (`probe-42`) shows in the opened
    /// box, replayed from the recorded transcript. How many commands ran
    /// in quorum's terminals (`terminal/create`).
    pub async fn command_output_shows_in_the_box(&self) -> usize {
        use quorum::event::{Activity, Event};
        let record = self.dir.path().join("run.jsonl");
        let out = self
            .call(&[
                "--approve",
                "all",
                "--record",
                record.to_str().unwrap(),
                "--input",
                "run echo probe-$((6*7))",
            ])
            .await;
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let events = super::events(&record);
        let opened = super::opened_box(&events, 100);
        assert!(opened.contains("probe-42"), "{opened}");
        events
            .iter()
            .filter(|e| {
                matches!(
                    &e.event,
                    Event::SubagentActivity {
                        activity: Activity::TerminalStarted { .. },
                        ..
                    }
                )
            })
            .count()
    }
}

impl Adapter {
    /// Issue 24, item 5: a worktree task's agent runs under bubblewrap by
    /// default, so its own shell (not quorum's terminals) cannot write the
    /// person's tree, while what it writes in its worktree is committed to
    /// the task's branch. The adapter must have been started in a folder
    /// outside `/tmp` ([`Adapter::start_in`]).
    pub async fn own_shell_keeps_to_its_worktree(&self) {
        let work = self.work();
        assert!(!work.starts_with("/tmp"), "{}", work.display());
        let git = |args: &[&str]| {
            let out = super::git(&self.home())
                .args(args)
                .current_dir(&work)
                .output_bounded();
            assert!(out.status.success(), "git {args:?}: {out:?}");
            text(&out.stdout)
        };
        git(&["init", "-q", "-b", "main"]);
        std::fs::write(work.join("a.txt"), "one\n").unwrap();
        git(&["add", "a.txt"]);
        git(&["commit", "-q", "-m", "first"]);
        let escaped = work.join("escaped.txt");
        let prompt = format!(
            "run touch {}; echo made by the agent > made.txt",
            escaped.display()
        );
        let before = self.requests();
        let out = self
            .call(&[
                "--json",
                "--worktree",
                "--approve",
                "all",
                "--input",
                &prompt,
            ])
            .await;
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(
            !escaped.exists(),
            "the agent's own shell wrote the person's tree"
        );
        assert!(
            !text(&out.stderr).contains("not sandboxed"),
            "{}",
            text(&out.stderr)
        );
        // What its shell said came back to its model, in this call.
        let said = self.requests_since(before);
        let refused = format!(
            "touch: cannot touch '{}': Read-only file system",
            escaped.display()
        );
        assert!(said.contains(&refused), "{said}");
        let line = &json_lines(&out)[0];
        let branch = line["branch"].as_str().expect("a branch");
        assert_eq!(
            git(&["show", &format!("{branch}:made.txt")]),
            "made by the agent\n"
        );
        assert_eq!(
            git(&["status", "--porcelain"]),
            "",
            "the person's tree is clean"
        );
    }

    /// Sandboxed (`sandbox = "bwrap"` in its table), the agent's own shell
    /// (not quorum's terminals) cannot write outside its session
    /// directory: its `touch` of a file beside it fails with `Read-only
    /// file system`, said in this call's requests to its model, and
    /// nothing is made. The adapter must have been started outside `/tmp`
    /// ([`Adapter::start_in`]: a sandbox's private `/tmp` would take the
    /// write).
    pub async fn own_shell_cannot_write_outside(&self) {
        let outside = self.dir.path().join("outside.txt");
        assert!(!outside.starts_with("/tmp"), "{}", outside.display());
        let before = self.requests();
        // The folder named from the shell (a path in the request itself
        // quorum refuses before anything runs).
        let prompt = "run touch \"$(dirname \"$PWD\")/outside.txt\"";
        let out = self.call(&["--approve", "all", "--input", prompt]).await;
        assert_eq!(out.status.code(), Some(0), "{}", self.diagnose(&out));
        assert!(
            !outside.exists(),
            "the agent's own shell wrote outside its session directory"
        );
        let said = self.requests_since(before);
        let refused = format!(
            "touch: cannot touch '{}': Read-only file system",
            outside.display()
        );
        assert!(said.contains(&refused), "{said}");
    }

    /// How many requests its model has had.
    pub fn requests(&self) -> usize {
        self.model.requests.lock().unwrap().len()
    }

    /// The requests its model had after the first `from`, as JSON.
    pub fn requests_since(&self, from: usize) -> String {
        let requests = self.model.requests.lock().unwrap();
        serde_json::to_string(&requests[from.min(requests.len())..]).unwrap()
    }

    /// In a worktree (after [`Adapter::own_shell_keeps_to_its_worktree`]
    /// made the repository), the agent's own shell writes `content` to
    /// `path` (appends it, with `append`: a config the agent still needs), a file of its own state that its CLI reads (and runs what it
    /// says) the next time the person uses it outside quorum: the write
    /// lands in the agent's private layer under quorum's state, never in
    /// the person's file; the agent finds it there again in a later
    /// session (a new quorum process), while the person's file reads as
    /// before.
    pub async fn own_shell_writes_only_its_layer(&self, path: &Path, content: &str, append: bool) {
        let before = std::fs::read(path).ok();
        let to = if append { ">>" } else { ">" };
        let prompt = format!("run echo '{content}' {to} {}", path.display());
        let out = self
            .call(&["--worktree", "--approve", "all", "--input", &prompt])
            .await;
        assert_eq!(out.status.code(), Some(0), "{}", self.diagnose(&out));
        assert_eq!(
            std::fs::read(path).ok(),
            before,
            "the person's {} changed",
            path.display()
        );
        let layer = self
            .home()
            .join("state/quorum/homes")
            .join(self.agent)
            .join("layer")
            .join(path.strip_prefix("/").unwrap());
        let kept = std::fs::read_to_string(&layer).unwrap_or_default();
        // A JSON file the agent itself keeps (claude's `~/.claude.json`) it
        // may write again after the shell did, in its own form and with its
        // own keys added: what was written must still be there, as the
        // agent's CLI reads it.
        let as_json = |text: &str| serde_json::from_str::<Value>(text).ok();
        let landed = match (as_json(content), as_json(&kept)) {
            (Some(Value::Object(wrote)), Some(Value::Object(kept))) if !append => {
                wrote.iter().all(|(k, v)| kept.get(k) == Some(v))
            }
            _ => {
                kept.ends_with(&format!("{content}\n"))
                    && (append || kept == format!("{content}\n"))
            }
        };
        assert!(landed, "{}: {kept}", layer.display());
        // A later session sees its own write: its `cat` says it back (the
        // prompt of that call does not hold it).
        let prompt = format!("run cat {}", path.display());
        let before = self.requests();
        let out = self
            .call(&["--worktree", "--approve", "all", "--input", &prompt])
            .await;
        assert_eq!(out.status.code(), Some(0), "{}", self.diagnose(&out));
        let said = self.requests_since(before);
        // What was written, as the model gets it back (JSON-quoted); a JSON
        // file the agent keeps in its own form: each of its strings.
        fn strings(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::String(s) => out.push(s.clone()),
                Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
                Value::Object(o) => o.iter().for_each(|(k, v)| {
                    out.push(k.clone());
                    strings(v, out)
                }),
                _ => {}
            }
        }
        let mut wrote = Vec::new();
        match serde_json::from_str::<Value>(content) {
            Ok(v @ Value::Object(_)) => strings(&v, &mut wrote),
            _ => wrote.push(content.to_string()),
        }
        for piece in wrote {
            let quoted = serde_json::to_string(&piece).unwrap();
            let quoted = quoted.trim_matches('"');
            assert!(
                said.contains(quoted),
                "the write was not seen again ({piece}): {said}"
            );
        }
    }
}

impl Adapter {
    /// The adapter as the chat's conductor (`quorum run --model
    /// acp:AGENT`), its model scripted to call quorum's `subagent` tool
    /// over MCP for the fake agent (`conduct fake echo …`; the config must
    /// name `[agents.fake]`): the box appears, the sub-agent's report is in
    /// the conductor's next model request, and what it said last is the
    /// chat's text. Nothing is left running.
    pub async fn conducts_a_sub_agent(&self) {
        let mut c = super::quorum_async(&self.home());
        c.arg("--config")
            .arg(&self.config)
            .args(["run", "--json", "--no-record", "--cwd"])
            .arg(self.work())
            .args(["--model", &format!("acp:{}", self.agent)])
            .args(["-p", "conduct fake echo from the conductor"])
            .kill_on_drop(true);
        let out = tokio::time::timeout(Duration::from_secs(120), c.output())
            .await
            .expect("quorum run ends")
            .unwrap();
        self.assert_nothing_left(&out);
        assert_eq!(out.status.code(), Some(0), "{}", self.diagnose(&out));
        let events = json_lines(&out);
        let started = events
            .iter()
            .find(|e| e["type"] == "subagent_started")
            .unwrap_or_else(|| panic!("no box: {}", text(&out.stdout)));
        assert_eq!(started["agent"]["acp"], "fake", "{started}");
        assert_eq!(started["input"], "echo from the conductor");
        let finished = events
            .iter()
            .find(|e| e["type"] == "subagent_finished")
            .expect("the box finished");
        assert_eq!(finished["output"], "from the conductor");
        // The tool's reply reached the conductor's next model request, as
        // the tool result of its call (the prompt names the words too).
        let requests = self.model.requests.lock().unwrap().clone();
        let last = requests.last().expect("model requests");
        let results = tool_results(last);
        let reply: Vec<Value> = results
            .iter()
            .filter_map(|r| serde_json::from_str(r).ok())
            .collect();
        assert_eq!(
            reply,
            [serde_json::json!({"output": "from the conductor", "stop_reason": "end_turn"})],
            "{results:#?}"
        );
        let said: String = events
            .iter()
            .filter(|e| e["type"] == "assistant_delta")
            .filter_map(|e| e["text"].as_str())
            .collect();
        assert!(said.starts_with("Conducted: "), "{said}");
        assert!(said.contains("from the conductor"), "{said}");
        // Its own line for the call is the box.
        assert!(
            !events.iter().any(|e| e["type"] == "tool_call_started"
                && e["name"].as_str().is_some_and(|n| n.contains("subagent"))),
            "{}",
            text(&out.stdout)
        );
    }

    /// A plain turn, recorded: what the agent announced of its session
    /// (its commands, mode and config options) as the box's activity, the
    /// last of each kind.
    pub async fn announced(&self) -> Announced {
        let record = self.dir.path().join("announced.jsonl");
        let out = self
            .call(&[
                "--record",
                record.to_str().unwrap(),
                "--input",
                "plain",
                "--input",
                "count",
            ])
            .await;
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let mut announced = Announced::default();
        for e in quorum::transcript::load(&record).unwrap().events {
            if let quorum::event::Event::SubagentActivity { activity, .. } = e.event {
                match activity {
                    quorum::event::Activity::Commands { commands } => announced.commands = commands,
                    quorum::event::Activity::Mode { current, available } => {
                        announced.mode = Some((current, available))
                    }
                    quorum::event::Activity::Config { options } => announced.options = options,
                    _ => {}
                }
            }
        }
        announced
    }
}

impl Adapter {
    /// A TUI session (the app loop on a `TestBackend`) with this adapter
    /// configured, in the work directory.
    pub fn live(
        &self,
    ) -> (
        quorum::engine::Session,
        quorum::tui::app::App,
        tokio::sync::mpsc::UnboundedReceiver<quorum::event::Stamped>,
    ) {
        let registry = quorum::acp::registry::Registry::load_only(&self.config).unwrap();
        let config = quorum::engine::SessionConfig::new(
            registry,
            quorum::confine::fsroot::Root::new(&self.work()).unwrap(),
        );
        let started = std::time::Instant::now();
        let (mut session, events) = quorum::engine::Session::start(config, started).unwrap();
        let app = quorum::tui::app::App::live(session.serve(), started);
        (session, app, events)
    }
}

/// What an agent announced of its session, as recorded.
#[derive(Debug, Default)]
pub struct Announced {
    pub commands: Vec<quorum::event::AgentCommand>,
    pub mode: Option<(String, Vec<quorum::event::ModeInfo>)>,
    pub options: Vec<quorum::event::ConfigInfo>,
}

pub use super::shell::text;

/// The text of every tool result a model request carries: Anthropic's
/// `tool_result` blocks, the Responses API's `function_call_output` items.
pub fn tool_results(request: &Value) -> Vec<String> {
    fn text(content: &Value) -> String {
        match content {
            // codex gives an MCP tool's content blocks as JSON after the
            // call's wall time: `Wall time: …\nOutput:\n[{"type": "text", …}]`.
            Value::String(s) => match s.split_once("\nOutput:\n") {
                Some((_, blocks)) => match serde_json::from_str::<Value>(blocks) {
                    Ok(blocks @ Value::Array(_)) => text(&blocks),
                    _ => s.clone(),
                },
                None => s.clone(),
            },
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        }
    }
    let mut out = Vec::new();
    for message in request["messages"].as_array().into_iter().flatten() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" {
                out.push(text(&block["content"]));
            }
        }
    }
    for item in request["input"].as_array().into_iter().flatten() {
        if item["type"] == "function_call_output" {
            out.push(text(&item["output"]));
        }
    }
    out
}

pub fn json_lines(out: &Output) -> Vec<Value> {
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}
