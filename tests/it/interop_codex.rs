//! Interop with the real codex-acp (npm, with its native binary, installed
//! into `.tools/` by `scripts/install-acp-adapter.sh codex`), offline: its
//! model is a fake Responses server on loopback (`common::models`), set up
//! as a custom provider in a private `CODEX_HOME`. A plain turn, a review
//! verdict, a command and its permission request, resume in a new quorum
//! process, cancel, and nothing left running after any of it.
#![cfg(target_os = "linux")]

use crate::common;

use std::path::Path;

use common::adapter::Adapter;

/// codex-acp with the fake server as a custom Responses provider.
async fn codex() -> Adapter {
    codex_with(&std::env::temp_dir(), "").await
}

/// Codex as the chat's conductor: its model calls `subagent` in the
/// `mcp__quorum` namespace for the fake agent; the box appears and the
/// report reaches codex's next model request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_conducts_a_sub_agent_over_mcp() {
    let fake = format!(
        "[agents.fake]\ncommand = {:?}\n",
        env!("CARGO_BIN_EXE_quorum-fake-agent")
    );
    codex_with(&std::env::temp_dir(), Box::leak(fake.into_boxed_str()))
        .await
        .conducts_a_sub_agent()
        .await;
}

/// Sandboxed (`sandbox = "bwrap"`: its process under bubblewrap, its
/// `CODEX_HOME` writable), codex still answers, reviews, and resumes its
/// session in a new quorum process; its own exec cannot write outside its
/// session directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_sandboxed_answers_reviews_and_resumes_in_a_new_process() {
    let c = codex_with(Path::new("/var/tmp"), "sandbox = \"bwrap\"\n").await;
    c.answers_reviews_and_resumes_in_a_new_process().await;
    c.own_shell_cannot_write_outside().await;
}

/// Sandboxed, it still asks before running a command that writes, and
/// runs it when allowed; its own exec cannot write outside its session
/// directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_sandboxed_asks_before_running_a_command_and_runs_it() {
    let c = codex_with(Path::new("/var/tmp"), "sandbox = \"bwrap\"\n").await;
    let target = c.work().join("out.txt");
    c.asks_before_writing(
        "run echo ran by codex > out.txt",
        &target,
        "ran by codex\n",
        "ran",
    )
    .await;
    c.own_shell_cannot_write_outside().await;
}

/// In a worktree, codex's own exec cannot write the person's tree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_in_a_worktree_cannot_write_the_persons_tree_with_its_own_exec() {
    let c = codex_with(std::path::Path::new("/var/tmp"), "").await;
    c.own_shell_keeps_to_its_worktree().await;
    // Nor the person's codex config, whose `notify` command codex runs
    // outside quorum: the write lands in codex's private layer.
    c.own_shell_writes_only_its_layer(
        &c.dir.path().join("codex-home/config.toml"),
        "notify = [\"touch\", \"/var/tmp/notified\"]",
        true,
    )
    .await;
}

/// codex's own sandbox (`sandbox_mode = "workspace-write"`) nests
/// bubblewrap, which makes a user namespace: inside quorum's sandbox (a
/// worktree task) its commands run because the registry allows codex
/// `user_namespaces`; set to false, quorum's seccomp filter refuses the
/// namespace and codex's sandbox cannot start. Unix sockets stay refused
/// either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_own_sandbox_runs_inside_quorums() {
    for (extra, works) in [("", true), ("user_namespaces = false\n", false)] {
        let c = codex_in_mode(std::path::Path::new("/var/tmp"), extra, "workspace-write").await;
        let work = c.work();
        let git = |args: &[&str]| {
            let out = common::git(&c.home())
                .args(args)
                .current_dir(&work)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
        };
        git(&["init", "-q", "-b", "main"]);
        std::fs::write(work.join("a.txt"), "one\n").unwrap();
        git(&["add", "a.txt"]);
        git(&["commit", "-q", "-m", "first"]);
        let probe = "run echo made > made.txt; cat made.txt; python3 -c 'import socket; socket.socket(socket.AF_UNIX); print(\"UNIX-\" + \"OPENED\")'";
        let out = c
            .call(&["--worktree", "--approve", "all", "--input", probe])
            .await;
        assert_eq!(out.status.code(), Some(0), "{}", c.diagnose(&out));
        let said = serde_json::to_string(&*c.model.requests.lock().unwrap()).unwrap();
        assert!(!said.contains("UNIX-OPENED"), "{said}");
        if works {
            assert!(said.contains("Output:\\nmade\\n"), "{said}");
            assert!(said.contains("Operation not permitted"), "{said}");
        } else {
            assert!(!said.contains("Output:\\nmade\\n"), "{said}");
            assert!(said.contains("bwrap"), "{said}");
        }
    }
}

/// [`codex`] in a folder under `base`, with `extra` in its table.
async fn codex_with(base: &std::path::Path, extra: &'static str) -> Adapter {
    codex_in_mode(base, extra, "danger-full-access").await
}

/// The `[agents.codex]` table of codex-acp at `exe`, its model the
/// Responses server at `url` (a custom provider in `dir/codex-home`), its
/// own `sandbox_mode` as given.
pub fn codex_table(dir: &Path, url: &str, exe: &Path, mode: &str) -> String {
    let (home, codex_home, work) = (dir.join("home"), dir.join("codex-home"), dir.join("work"));
    std::fs::create_dir_all(&codex_home).unwrap();
    // Commands run unsandboxed by codex (danger-full-access), but in
    // the test of codex's own sandbox; `untrusted` makes codex ask
    // before each one.
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "model = \"gpt-5.4\"\nmodel_provider = \"fake\"\napproval_policy = \"untrusted\"\n\
             sandbox_mode = \"{mode}\"\n\n[model_providers.fake]\nname = \"fake\"\n\
             base_url = \"{url}/v1\"\nwire_api = \"responses\"\nenv_key = \"OPENAI_API_KEY\"\n\
             request_max_retries = 0\nstream_max_retries = 0\nsupports_websockets = false\n\n\
             [projects.{work:?}]\ntrust_level = \"trusted\"\n",
            work = work.display().to_string(),
        ),
    )
    .unwrap();
    format!(
        "[agents.codex]\ncommand = {exe:?}\nenv = {{ CODEX_HOME = {codex_home:?}, OPENAI_API_KEY = \"fake\", \
         HOME = {home:?} }}\n"
    )
}

/// [`codex_with`], its own `sandbox_mode` as given.
async fn codex_in_mode(base: &std::path::Path, extra: &'static str, mode: &'static str) -> Adapter {
    Adapter::start_in(base, "codex", move |dir, url, exe| {
        format!("{}{extra}", codex_table(dir, url, exe, mode))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_answers_reviews_and_resumes_in_a_new_process() {
    codex()
        .await
        .answers_reviews_and_resumes_in_a_new_process()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_asks_before_running_a_command_and_quorum_answers() {
    let c = codex().await;
    let target = c.work().join("out.txt");
    c.asks_before_writing(
        "run echo ran by codex > out.txt",
        &target,
        "ran by codex\n",
        "ran",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_is_cancelled_by_ctrl_c() {
    codex().await.is_cancelled_by_ctrl_c().await;
}

/// With `terminal: true` advertised, codex-acp runs a shell command itself
/// (not through quorum's terminals: no `terminal/create` arrives, as
/// measured with this version); its output still shows in the box.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_runs_commands_itself_and_their_output_shows_in_the_box() {
    let c = codex().await;
    let terminals = c.command_output_shows_in_the_box().await;
    assert_eq!(
        terminals, 0,
        "codex now runs commands in quorum's terminals: assert their output in the box and say so in the README"
    );
}

/// What codex announces of its session (its config options: model and
/// reasoning effort) reaches the box, recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_announces_its_options() {
    // Its options come with `session/new`. (Its commands come on their
    // own time, at times after both turns of a quick call: not asserted.)
    let announced = codex().await.announced().await;
    let option = |category: &str| {
        announced
            .options
            .iter()
            .find(|o| o.category.as_deref() == Some(category))
            .map(|o| (o.id.as_str(), o.current.as_str()))
    };
    assert_eq!(option("model"), Some(("model", "gpt-5.4")), "{announced:?}");
    assert_eq!(
        option("thought_level"),
        Some(("reasoning_effort", "medium")),
        "{announced:?}"
    );
}

/// `/set` from the TUI changes codex's reasoning effort: the next box's
/// badges show what codex then reports; a value it does not offer is
/// refused with those it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_takes_its_options_from_the_tui() {
    use common::app::{drive, line, text, until};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    let c = codex().await;
    let (session, mut app, mut ev_rx) = c.live();
    let mut terminal = Terminal::new(TestBackend::new(170, 50)).unwrap();
    drive(&mut terminal, &mut app, line("@codex plain"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("Plain answer.")
    })
    .await;
    assert!(
        text(&terminal)
            .contains("╭─ codex · acp · fresh · model gpt-5.4 · reasoning effort medium"),
        "{}",
        text(&terminal)
    );
    for (command, answer) in [
        (
            "/set codex reasoning_effort high",
            "codex: reasoning_effort high",
        ),
        (
            "/set codex reasoning_effort extreme",
            "/set: codex: reasoning_effort takes low, medium, high, xhigh, not \"extreme\"",
        ),
        ("/mode codex plan", "/mode: codex offers no modes"),
        // What codex answered to `session/set_config_option`.
        (
            "/agents codex",
            "Option reasoning_effort (Reasoning Effort): high (takes: low, medium, high, xhigh)",
        ),
    ] {
        drive(&mut terminal, &mut app, line(command), vec![]).await;
        until(&mut terminal, &mut app, &mut ev_rx, |s| s.contains(answer)).await;
    }
    // The next call prompts the session still open on the live connection
    // (no `session/resume`, which in codex-acp 0.16 answers with its
    // configured effort, medium, again): the effort set stays.
    drive(&mut terminal, &mut app, line("@codex count"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("messages: 2")
    })
    .await;
    assert!(
        text(&terminal)
            .contains("╭─ codex · acp · continued · model gpt-5.4 · reasoning effort high"),
        "{}",
        text(&terminal)
    );
    session.shutdown();
    let left = common::models::leftovers(&c.home());
    assert!(left.is_empty(), "still running: {left:?}");
}
