//! The chat by default (issue 37): with no model chosen, the first agent
//! installed is the chat (its conductor), said once at the start, started
//! only by the first plain message; with none installed, a provider's key
//! picks its default model; with neither, the welcome names `acp:NAME`
//! first. `none` keeps the chat off. `/model` alone lists the choices, and
//! Tab completes them after `/model `.
//!
//! The test environment keeps the chat off (`QUORUM_MODEL=none`, see
//! `main.rs`): these tests take it away from the quorum they start. The
//! fake agent is installed as `claude` (`[agents.claude] command = ...`),
//! on a `PATH` without any real agent.
#![cfg(target_os = "linux")]

use crate::common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::pty::{Terminal, wait_until};
use common::shell::{bounded, text};

/// Narrower than 100 columns: no side panel beside the notices.
const COLS: u16 = 99;
const ROWS: u16 = 60;

const FAKE: &str = env!("CARGO_BIN_EXE_quorum-fake-agent");

/// A directory with a config file holding `config`.
struct Dir {
    dir: tempfile::TempDir,
    config: PathBuf,
}

impl Dir {
    fn new(config: &str) -> Dir {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("quorum.toml");
        std::fs::write(&path, config).unwrap();
        Dir { dir, config: path }
    }

    /// The fake agent installed as `claude`.
    fn with_claude(extra: &str) -> Dir {
        Dir::new(&format!("[agents.claude]\ncommand = {FAKE:?}\n{extra}"))
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `quorum --config FILE ARGS` in the directory, no model chosen.
    fn quorum(&self, args: &[&str]) -> Command {
        let mut c = common::quorum(self.path());
        c.arg("--config")
            .arg(&self.config)
            .args(args)
            .current_dir(self.path())
            .env_remove("QUORUM_MODEL");
        c
    }

    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut c = self.quorum(args);
        c.envs(env.iter().copied());
        bounded(c, Duration::from_secs(60)).expect("quorum ends within a minute")
    }
}

/// The screen's text with every run of whitespace one space: what a
/// notice says, however it wrapped.
fn flat(screen: &vt100::Screen) -> String {
    screen
        .contents()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The processes whose parent is `pid`, as their command lines.
fn children(pid: u32) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| {
            let child: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).ok()?;
            let ppid: u32 = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            let cmd = std::fs::read(format!("/proc/{child}/cmdline")).ok()?;
            (ppid == pid).then(|| String::from_utf8_lossy(&cmd).replace('\0', " "))
        })
        .collect()
}

/// quorum's TUI in a terminal: killed if the test fails.
struct Tui {
    child: std::process::Child,
    terminal: Terminal,
}

impl Tui {
    fn start(dir: &Dir, env: &[(&str, &str)]) -> Tui {
        let terminal = Terminal::open(COLS, ROWS);
        let child = terminal.spawn(
            dir.quorum(&["--no-record"]).envs(env.iter().copied()),
            Stdio::from(std::fs::File::create(dir.path().join("stderr")).unwrap()),
        );
        let tui = Tui { child, terminal };
        tui.terminal.wait_for("Ctrl+C quits");
        tui
    }

    /// Waits until the screen (whitespace made single spaces) has `text`.
    fn shows(&self, text: &str) -> String {
        flat(&self.terminal.wait_for_screen(|s| flat(s).contains(text)))
    }

    /// Ctrl+C on an empty composer: quorum ends, the terminal restored.
    fn quit(mut self) {
        self.terminal.type_keys(b"\x15\x03");
        let child = &mut self.child;
        assert!(
            wait_until(Duration::from_secs(30), || child
                .try_wait()
                .unwrap()
                .is_some()),
            "quorum did not quit"
        );
        self.terminal.assert_restored();
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// With claude installed and no model chosen, claude is the chat: said
/// once at the start, nothing started until the first plain message,
/// which it answers as the conductor. (Before issue 37: no chat, the
/// welcome.)
#[test]
fn the_installed_agent_is_the_chat_and_starts_with_the_first_message() {
    let dir = Dir::with_claude("");
    let tui = Tui::start(&dir, &[]);
    let screen = tui.shows("an agent you have installed");
    assert!(
        screen.contains(
            "the chat is claude (acp:claude), an agent you have installed; /model changes it; \
             [model] name in the config keeps a choice"
        ),
        "{screen}"
    );
    assert_eq!(screen.matches("the chat is claude").count(), 1, "{screen}");
    assert!(!screen.contains("No chat model is configured"), "{screen}");
    std::thread::sleep(Duration::from_millis(300));
    let started = children(tui.child.id());
    assert!(
        !started.iter().any(|c| c.contains("quorum-fake-agent")),
        "started before the first message: {started:?}"
    );
    tui.terminal.type_keys(b"echo hello from the conductor\r");
    tui.shows("hello from the conductor");
    // Its answer, not only the message: the fake agent runs as the chat.
    let answered = wait_until(Duration::from_secs(30), || {
        flat(&tui.terminal.screen())
            .matches("hello from the conductor")
            .count()
            >= 2
    });
    assert!(answered, "{}", tui.terminal.screen().contents());
    let started = children(tui.child.id());
    assert!(
        started.iter().any(|c| c.contains("quorum-fake-agent")),
        "{started:?}"
    );
    tui.quit();
}

/// With no agent installed (a `PATH` without them, a config naming none)
/// and no key, the welcome names `acp:NAME` first, with the common agents'
/// install lines from the registry. (Before: `--model PROVIDER:NAME` only.)
#[test]
fn with_nothing_installed_the_welcome_names_agents_first() {
    let dir = Dir::new("");
    let tui = Tui::start(&dir, &[]);
    let screen = tui.shows("No chat model is configured");
    let agent = screen.find("--model acp:NAME").expect(&screen);
    assert!(agent < screen.find("PROVIDER:NAME").unwrap(), "{screen}");
    assert!(screen.contains("no API key is set"), "{screen}");
    for line in [
        "`acp:claude` (`npm i -g @zed-industries/claude-agent-acp`)",
        "`acp:codex` (`npm i -g @zed-industries/codex-acp`)",
        "`acp:gemini` (`npm i -g @google/gemini-cli`)",
    ] {
        assert!(screen.contains(line), "{line}: {screen}");
    }
    assert!(!screen.contains("the chat is"), "{screen}");
    tui.quit();
}

/// `quorum run` takes the same default: claude answers, and the events
/// say so. (Before: exit 2, no chat model.)
#[test]
fn quorum_run_takes_the_same_default() {
    let dir = Dir::with_claude("");
    let o = dir.run(&["run", "--no-record", "-p", "echo hi there"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "hi there\n");
    let o = dir.run(&["run", "--json", "--no-record", "-p", "echo again"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let events: Vec<serde_json::Value> = text(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(events[0]["type"], "session_info");
    assert_eq!(events[0]["model"], "acp:claude");
    assert_eq!(events[1]["type"], "notice", "{events:?}");
    assert!(
        events[1]["text"]
            .as_str()
            .unwrap()
            .starts_with("the chat is claude (acp:claude)"),
        "{events:?}"
    );
}

/// quorum itself, configured as an agent (`quorum acp`), is never the
/// default chat (its own default would be itself again, and so on): the
/// next agent is. (Before: no default at all, exit 2.)
#[test]
fn quorum_itself_is_never_the_default_chat() {
    let dir = Dir::new(&format!(
        "[agents.aaa]\ncommand = {:?}\nargs = [\"acp\"]\n\n[agents.zzz]\ncommand = {FAKE:?}\n",
        env!("CARGO_BIN_EXE_quorum")
    ));
    let o = dir.run(&["run", "--no-record", "-p", "echo from zzz"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "from zzz\n");
}

/// With no agent installed, a provider's key picks its default model: the
/// fake Anthropic server answers as `anthropic:claude-sonnet-4-5`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_agent_a_key_picks_its_providers_model() {
    let model = common::models::FakeModel::start().await;
    let dir = Dir::new("");
    let url = model.url();
    let o = tokio::task::spawn_blocking(move || {
        let env = [
            ("ANTHROPIC_API_KEY", "fake"),
            ("ANTHROPIC_BASE_URL", url.as_str()),
        ];
        dir.run(&["run", "--json", "--no-record", "-p", "plain"], &env)
    })
    .await
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("\"model\":\"anthropic:claude-sonnet-4-5\""),
        "{out}"
    );
    assert!(
        out.contains("the chat is anthropic:claude-sonnet-4-5, as ANTHROPIC_API_KEY is set"),
        "{out}"
    );
    assert!(out.contains("Plain answer."), "{out}");
    let requests = model.requests.lock().unwrap();
    assert_eq!(requests[0]["model"], "claude-sonnet-4-5");
}

/// `none` keeps the chat off, as `--model`, `QUORUM_MODEL` and `[model]
/// name`, even with claude installed; `quorum config` says it.
#[test]
fn none_keeps_the_chat_off_however_it_is_given() {
    let flag = Dir::with_claude("");
    let env = Dir::with_claude("");
    let file = Dir::with_claude("[model]\nname = \"none\"\n");
    for (dir, args, vars) in [
        (&flag, vec!["--model", "none"], vec![]),
        (&env, vec![], vec![("QUORUM_MODEL", "none")]),
        (&file, vec![], vec![]),
    ] {
        let mut run = args.clone();
        run.extend(["run", "--no-record", "-p", "echo hi"]);
        let o = dir.run(&run, &vars);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("no chat model"),
            "{}",
            text(&o.stderr)
        );
        assert!(text(&o.stdout).is_empty(), "{}", text(&o.stdout));
        let mut config = args.clone();
        config.push("config");
        let o = dir.run(&config, &vars);
        let row = text(&o.stdout)
            .lines()
            .find(|l| l.trim_start().starts_with("model.name"))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default();
        assert!(row.starts_with("model.name none "), "{args:?}: {row}");
    }
    // Without it, `quorum config` names the default.
    let o = Dir::with_claude("").run(&["config"], &[]);
    assert!(
        text(&o.stdout)
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["model.name", "acp:claude", "default"]),
        "{}",
        text(&o.stdout)
    );
}

/// A local OpenAI-compatible server on loopback that lists `models` at
/// `GET /v1/models` (and answers nothing else).
fn model_server(models: &'static [&'static str]) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut sock in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let n = sock.read(&mut buf).unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]).into_owned();
            let body = if head.starts_with("GET /v1/models ") {
                let data: Vec<_> = models
                    .iter()
                    .map(|id| serde_json::json!({"id": id}))
                    .collect();
                serde_json::json!({"object": "list", "data": data}).to_string()
            } else {
                String::new()
            };
            let status = if body.is_empty() {
                "404 Not Found"
            } else {
                "200 OK"
            };
            let _ = write!(
                sock,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

/// `/model` alone names the chat and the choices: the agents installed,
/// the providers whose key is set, the models of the local server at the
/// base URL; Tab completes them after `/model `. (Before: `Chat model:
/// NAME` alone, and no completion.)
#[test]
fn model_alone_lists_the_choices_and_tab_completes_them() {
    let url = model_server(&["qwen-local", "llama-local"]);
    let dir = Dir::with_claude(&format!("\n[model]\nbase_url = {url:?}\n"));
    let tui = Tui::start(&dir, &[("ANTHROPIC_API_KEY", "fake")]);
    tui.shows("the chat is claude (acp:claude)");
    tui.terminal.type_keys(b"/model\r");
    let screen = tui.shows("Choices:");
    let listing = &screen[screen.find("The chat: acp:claude.").expect(&screen)..];
    for choice in [
        "acp:claude (an agent you have installed)",
        "anthropic:claude-sonnet-4-5 (ANTHROPIC_API_KEY is set)",
        &format!("openai:qwen-local (served at {url})"),
        &format!("openai:llama-local (served at {url})"),
    ] {
        assert!(listing.contains(choice), "{choice}: {listing}");
    }
    assert!(!listing.contains("acp:codex"), "{listing}");
    // Tab after `/model `: one match is put whole, several are shown.
    tui.terminal.type_keys(b"/model openai:q\t");
    tui.shows("/model openai:qwen-local");
    tui.terminal.type_keys(b"\x15/model a\t");
    tui.shows("acp:claude anthropic:claude-sonnet-4-5");
    tui.quit();
}
