//! The arena (issue 39) with the real claude-agent-acp and codex-acp as its
//! writers, offline: both adapters' models are one fake server on loopback
//! (`common::models`), scripted by `greet greet.txt` to write that file
//! with each agent's own edit tool (claude `Write`: `hello from claude`;
//! codex `apply_patch`: `hello from codex` and `and more`). The fake agent
//! is the only reviewer, red on claude's line. Each writer's work is on a
//! branch of its own; codex wins though its diff is the bigger; nothing
//! either adapter started is left running.
#![cfg(target_os = "linux")]

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::adapter::Adapter;
use common::shell::text;

/// `git args` in `dir` (quorum's home `home`); it must succeed. Its output.
fn git(home: &Path, dir: &Path, args: &[&str]) -> String {
    let out = common::git(home)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_and_codex_write_in_an_arena_and_the_fake_agent_reviews() {
    let claude =
        tokio::task::spawn_blocking(|| common::install_with("install-acp-adapter.sh", &["claude"]))
            .await
            .unwrap();
    // Under /var/tmp: a worktree task's agent runs under bubblewrap, whose
    // private /tmp would hide the worktree.
    let a = Adapter::start_in(Path::new("/var/tmp"), "codex", move |dir, url, exe| {
        format!(
            "{}{}[agents.fake]\ncommand = {:?}\nargs = [\"--review-red-if\", \"+hello from claude\"]\n",
            crate::interop_codex::codex_table(dir, url, exe, "danger-full-access"),
            crate::interop_claude::claude_table(dir, url, &claude),
            env!("CARGO_BIN_EXE_quorum-fake-agent"),
        )
    })
    .await;
    let (home, work) = (a.home(), a.work());
    git(&home, &work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("lib.rs"), "fn old() {}\n").unwrap();
    git(&home, &work, &["add", "lib.rs"]);
    git(&home, &work, &["commit", "-q", "-m", "first"]);

    let started = std::time::Instant::now();
    let mut c = common::quorum_async(&home);
    c.arg("--config")
        .arg(a.config())
        .args([
            "arena",
            "--agents",
            "claude,codex",
            "--reviewers",
            "fake",
            "--approve",
            "all",
            "--json",
            "--cwd",
        ])
        .arg(&work)
        .arg("greet greet.txt")
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(240), c.output())
        .await
        .expect("quorum arena ends")
        .unwrap();
    eprintln!("quorum arena took {:?}", started.elapsed());
    a.assert_nothing_left(&out);
    assert_eq!(out.status.code(), Some(0), "{}", a.diagnose(&out));
    // Each writer ran under bubblewrap, as a worktree task's agent does.
    assert!(
        !text(&out.stderr).contains("not sandboxed"),
        "{}",
        text(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), a.diagnose(&out)));
    let rows = v["rows"].as_array().unwrap();
    let agents: Vec<&str> = rows.iter().map(|r| r["agent"].as_str().unwrap()).collect();
    assert_eq!(agents, ["claude", "codex"], "{v:#}");

    // Each branch holds what its writer wrote with its own tool, committed.
    for (row, greet, added) in [
        (&rows[0], "hello from claude\n", 1),
        (&rows[1], "hello from codex\nand more\n", 2),
    ] {
        let branch = row["branch"].as_str().unwrap();
        assert!(branch.starts_with("quorum/"), "{v:#}");
        assert_eq!(
            git(&home, &work, &["show", &format!("{branch}:greet.txt")]),
            greet,
            "{v:#}"
        );
        assert_eq!(row["diffstat"]["added"], added, "{v:#}");
        assert_eq!(row["diffstat"]["files"], 1, "{v:#}");
        assert!(row.get("failed").is_none(), "{v:#}");
    }
    // The fake agent found claude's line red, codex's green: codex wins,
    // its bigger diff notwithstanding.
    assert_eq!(rows[0]["verdict"], "red", "{v:#}");
    assert_eq!(rows[0]["findings"]["red"], 1, "{v:#}");
    assert_eq!(rows[1]["verdict"], "green", "{v:#}");
    assert_eq!(v["winner"]["agent"], "codex", "{v:#}");
    assert_eq!(v["winner"]["branch"], rows[1]["branch"], "{v:#}");
    // The person's tree is as it was: the writers wrote their worktrees.
    assert!(!work.join("greet.txt").exists());
    assert_eq!(git(&home, &work, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&home, &work, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "main"
    );
}
