//! Interop with the real claude-agent-acp (npm, installed into `.tools/` by
//! `scripts/install-acp-adapter.sh claude`), offline: its model is a fake
//! Anthropic Messages server on loopback (`common::models`). A plain turn,
//! a review verdict, a tool call and its permission request, resume in a
//! new quorum process, cancel, and nothing left running after any of it.
#![cfg(target_os = "linux")]

use crate::common;

use std::path::Path;

use common::adapter::Adapter;

/// claude-agent-acp, its model the fake server, its home private (it
/// writes `~/.claude.json` and `~/.claude/`).
async fn claude() -> Adapter {
    claude_with(&std::env::temp_dir(), "").await
}

/// [`claude`] in a folder under `base`, with `extra` in its table.
async fn claude_with(base: &std::path::Path, extra: &'static str) -> Adapter {
    Adapter::start_in(base, "claude", move |dir, url, exe| {
        format!("{}{extra}", claude_table(dir, url, exe))
    })
    .await
}

/// The `[agents.claude]` table of claude-agent-acp at `exe`, its model at
/// `url`, its home `dir/home`.
pub fn claude_table(dir: &Path, url: &str, exe: &Path) -> String {
    let home = dir.join("home");
    format!(
        "[agents.claude]\ncommand = {exe:?}\nenv = {{ ANTHROPIC_BASE_URL = {url:?}, ANTHROPIC_API_KEY = \"fake\", \
         IS_SANDBOX = \"1\", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = \"1\", DISABLE_TELEMETRY = \"1\", \
         DISABLE_AUTOUPDATER = \"1\", HOME = {home:?} }}\n"
    )
}

/// Claude as the chat's conductor: its model calls
/// `mcp__quorum__subagent` for the fake agent; the box appears and the
/// report reaches claude's next model request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_conducts_a_sub_agent_over_mcp() {
    let fake = format!(
        "[agents.fake]\ncommand = {:?}\n",
        env!("CARGO_BIN_EXE_quorum-fake-agent")
    );
    claude_with(&std::env::temp_dir(), Box::leak(fake.into_boxed_str()))
        .await
        .conducts_a_sub_agent()
        .await;
}

/// Sandboxed (`sandbox = "bwrap"`: its process under bubblewrap, its
/// `~/.claude` and `~/.claude.json` writable), claude still answers,
/// reviews, and resumes its session in a new quorum process; its own Bash
/// cannot write outside its session directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_sandboxed_answers_reviews_and_resumes_in_a_new_process() {
    let c = claude_with(Path::new("/var/tmp"), "sandbox = \"bwrap\"\n").await;
    c.answers_reviews_and_resumes_in_a_new_process().await;
    c.own_shell_cannot_write_outside().await;
}

/// Sandboxed, it still asks before writing, and writes when allowed; its
/// own Bash cannot write outside its session directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_sandboxed_asks_before_writing_and_writes() {
    let c = claude_with(Path::new("/var/tmp"), "sandbox = \"bwrap\"\n").await;
    let target = c.work().join("out.txt");
    let prompt = format!("write {}", target.display());
    c.asks_before_writing(&prompt, &target, "written by claude\n", "written")
        .await;
    c.own_shell_cannot_write_outside().await;
}

/// In a worktree, claude's own Bash cannot write the person's tree (it
/// could, on d0bfa3a: the file landed there). Nor the person's own Claude
/// Code state: `mcpServers` it writes into `~/.claude.json` (which the
/// person's next `claude` would start without asking; on 2569e21 it
/// could), and hooks into `~/.claude/settings.json`, land in its private
/// layer, where it finds them again in a new process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_in_a_worktree_cannot_write_the_persons_tree_with_its_own_bash() {
    let c = claude_with(std::path::Path::new("/var/tmp"), "").await;
    c.own_shell_keeps_to_its_worktree().await;
    let config = c.home().join(".claude.json");
    c.own_shell_writes_only_its_layer(
        &config,
        r#"{"mcpServers": {"planted": {"command": "touch", "args": ["/var/tmp/planted"]}}}"#,
        false,
    )
    .await;
    // The person's own file, read as Claude Code reads it: no server.
    let person: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).unwrap_or("{}".into()))
            .unwrap_or_default();
    assert!(person.get("mcpServers").is_none(), "{person}");
    c.own_shell_writes_only_its_layer(
        &c.home().join(".claude/settings.json"),
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "touch /var/tmp/hook"}]}]}}"#,
        false,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_answers_reviews_and_resumes_in_a_new_process() {
    claude()
        .await
        .answers_reviews_and_resumes_in_a_new_process()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_asks_before_writing_and_quorum_answers() {
    let c = claude().await;
    let target = c.work().join("out.txt");
    let prompt = format!("write {}", target.display());
    c.asks_before_writing(&prompt, &target, "written by claude\n", "written")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_is_cancelled_by_ctrl_c() {
    claude().await.is_cancelled_by_ctrl_c().await;
}

/// With `terminal: true` advertised, claude-agent-acp runs a shell command itself
/// (not through quorum's terminals: no `terminal/create` arrives, as
/// measured with this version); its output still shows in the box.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_runs_commands_itself_and_their_output_shows_in_the_box() {
    let c = claude().await;
    let terminals = c.command_output_shows_in_the_box().await;
    assert_eq!(
        terminals, 0,
        "claude now runs commands in quorum's terminals: assert their output in the box and say so in the README"
    );
}

/// What claude announces of its session (its commands, its mode, its
/// config options) reaches the box, recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_announces_its_commands_mode_and_options() {
    let announced = claude().await.announced().await;
    let names: Vec<&str> = announced.commands.iter().map(|c| c.name.as_str()).collect();
    assert!(names.contains(&"review"), "{announced:?}");
    let (current, modes) = announced.mode.as_ref().expect("claude has modes");
    assert_eq!(current, "default");
    assert!(modes.iter().any(|m| m.id == "plan"), "{announced:?}");
    let model = announced
        .options
        .iter()
        .find(|o| o.category.as_deref() == Some("model"));
    assert!(
        model.is_some_and(|m| m.values.contains(&m.current)),
        "{announced:?}"
    );
}

/// `/mode` and `/set` from the TUI change claude's session: the next box's
/// badges show what claude then says it is in (its `current_mode_update`
/// and `config_option_update`), and a value it does not offer is refused
/// with those it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_takes_mode_and_model_from_the_tui() {
    use common::app::{drive, line, text, until};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    let c = claude().await;
    let (session, mut app, mut ev_rx) = c.live();
    let mut terminal = Terminal::new(TestBackend::new(170, 50)).unwrap();

    drive(&mut terminal, &mut app, line("@claude plain"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("Plain answer.")
    })
    .await;
    assert!(
        text(&terminal).contains("╭─ claude · acp · fresh · mode Default · model default"),
        "{}",
        text(&terminal)
    );
    for (command, answer) in [
        ("/mode claude plan", "claude: mode plan"),
        (
            "/set claude model haiku",
            "claude: model haiku; its next sessions start with this model",
        ),
        (
            "/mode claude fly",
            "/mode: claude offers no mode \"fly\"; its modes: default,",
        ),
    ] {
        drive(&mut terminal, &mut app, line(command), vec![]).await;
        until(&mut terminal, &mut app, &mut ev_rx, |s| s.contains(answer)).await;
    }
    drive(&mut terminal, &mut app, line("@claude count"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("messages: 2")
    })
    .await;
    assert!(
        text(&terminal).contains("╭─ claude · acp · continued · mode Plan Mode · model haiku"),
        "{}",
        text(&terminal)
    );
    session.shutdown();
    let left = common::models::leftovers(&c.home());
    assert!(left.is_empty(), "still running: {left:?}");
}

/// With claude-agent-acp installed and no model chosen, it is the chat
/// (issue 37): `quorum run` without `--model` is answered by claude as
/// the conductor, offline against the fake Anthropic server; the start
/// says so. (Before: exit 2, no chat model.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_installed_is_the_chat_by_default() {
    let c = claude().await;
    let mut run = common::quorum_async(&c.home());
    run.arg("--config")
        .arg(c.config())
        .args(["run", "--json", "--no-record", "--cwd"])
        .arg(c.work())
        .args(["-p", "plain"])
        // The tests keep the chat off (`main.rs`): here it is the default's.
        .env_remove("QUORUM_MODEL")
        .kill_on_drop(true);
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), run.output())
        .await
        .expect("quorum run ends")
        .unwrap();
    c.assert_nothing_left(&out);
    assert_eq!(out.status.code(), Some(0), "{}", c.diagnose(&out));
    let lines = common::adapter::json_lines(&out);
    assert_eq!(lines[0]["model"], "acp:claude", "{lines:?}");
    let notice = lines[1]["text"].as_str().unwrap_or_default();
    assert!(
        notice.starts_with("the chat is claude (acp:claude), an agent you have installed"),
        "{lines:?}"
    );
    let said: String = lines
        .iter()
        .filter(|l| l["type"] == "assistant_delta")
        .filter_map(|l| l["text"].as_str())
        .collect();
    assert_eq!(said, "Plain answer.");
}
