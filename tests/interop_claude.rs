//! Interop with the real claude-agent-acp (npm, installed into `.tools/` by
//! `scripts/install-acp-adapter.sh claude`), offline: its model is a fake
//! Anthropic Messages server on loopback (`common::models`). A plain turn,
//! a review verdict, a tool call and its permission request, resume in a
//! new quorum process, cancel, and nothing left running after any of it.
#![cfg(target_os = "linux")]

mod common;

use common::adapter::Adapter;

/// claude-agent-acp, its model the fake server, its home private (it
/// writes `~/.claude.json` and `~/.claude/`).
async fn claude() -> Adapter {
    Adapter::start("claude", |dir, url, exe| {
        let home = dir.join("home");
        format!(
            "[agents.claude]\ncommand = {exe:?}\nenv = {{ ANTHROPIC_BASE_URL = {url:?}, ANTHROPIC_API_KEY = \"fake\", \
             IS_SANDBOX = \"1\", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = \"1\", DISABLE_TELEMETRY = \"1\", \
             DISABLE_AUTOUPDATER = \"1\", HOME = {home:?} }}\n"
        )
    })
    .await
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
