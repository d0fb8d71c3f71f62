//! `quorum review` with the real claude-agent-acp and codex-acp as its
//! reviewers, offline: both adapters' models are one fake server on loopback
//! (`common::models`, Anthropic Messages and OpenAI Responses), which
//! answers a `quorum review` prompt with a finding per bug seeded in the
//! diff. Two reviewers of different vendors finding the same bug make one
//! finding that names both; the SARIF validates against the official
//! schema and `sarif-tools` reads it; the markdown comment says the same.
#![cfg(target_os = "linux")]

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::adapter::Adapter;
use common::shell::text;

/// `git args` in `dir` (quorum's home `home`); it must succeed.
fn git(home: &Path, dir: &Path, args: &[&str]) {
    let out = common::git(home)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
}

/// Both adapters in one config, their models the one fake server; `work`
/// a repository with one commit and a change that seeds three bugs: one
/// both reviewers find (red), one only claude finds and one only codex
/// finds (yellow each).
async fn reviewers() -> Adapter {
    let claude =
        tokio::task::spawn_blocking(|| common::install_with("install-acp-adapter.sh", &["claude"]))
            .await
            .unwrap();
    let a = Adapter::start_in(Path::new("/var/tmp"), "codex", move |dir, url, exe| {
        format!(
            "{}{}",
            crate::interop_codex::codex_table(dir, url, exe, "read-only"),
            crate::interop_claude::claude_table(dir, url, &claude)
        )
    })
    .await;
    let (home, work) = (a.home(), a.work());
    git(&home, &work, &["init", "-q"]);
    let before = "pub fn retry(req: &Request) -> Response {\n    send(req)\n}\n";
    std::fs::write(work.join("http.rs"), before).unwrap();
    git(&home, &work, &["add", "http.rs"]);
    git(&home, &work, &["commit", "-q", "-m", "first"]);
    let after = "pub fn retry(req: &Request) -> Response {\n    \
                 // SEEDED red: retries a POST that is not idempotent\n    \
                 loop { if let Ok(r) = send(req) { return r; } }\n    \
                 // SEEDED-claude yellow: no backoff between tries\n    \
                 // SEEDED-codex yellow: the loop never gives up\n\
                 }\n";
    std::fs::write(work.join("http.rs"), after).unwrap();
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_and_codex_review_to_sarif_and_their_shared_finding_is_one() {
    let a = reviewers().await;
    crate::review_formats::tools();
    let md = a.dir.path().join("review.md");
    let sarif = a.dir.path().join("review.sarif");
    let mut c = common::quorum_async(&a.home());
    c.arg("--config")
        .arg(a.config())
        .args(["review", "--agents", "claude,codex", "--cwd"])
        .arg(a.work())
        .args(["--format", "sarif", "--write"])
        .arg(format!("markdown={}", md.display()))
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(180), c.output())
        .await
        .expect("quorum review ends")
        .unwrap();
    a.assert_nothing_left(&out);
    // Red: exit 2, the SARIF on stdout.
    assert_eq!(out.status.code(), Some(2), "{}", a.diagnose(&out));
    std::fs::write(&sarif, &out.stdout).unwrap();
    crate::review_formats::valid_sarif(&sarif);
    let summary = crate::review_formats::summary(&sarif);
    // Summed over the three runs: the red one thrice (claude's, codex's,
    // the quorum's), the yellow ones twice each.
    assert!(summary.contains("error: 3"), "{summary}");
    assert!(summary.contains("warning: 4"), "{summary}");

    let log: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = log["runs"].as_array().unwrap();
    let names: Vec<&str> = runs
        .iter()
        .map(|r| r["properties"]["reviewer"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        names,
        ["claude", "codex", "quorum"],
        "a run per reviewer and the quorum's"
    );
    // The quorum's run: three findings, the red one found by both.
    let quorum = &runs[2];
    let results = quorum["results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "{quorum:#}");
    let red: Vec<&serde_json::Value> = results.iter().filter(|r| r["level"] == "error").collect();
    assert_eq!(red.len(), 1, "{quorum:#}");
    let place = &red[0]["locations"][0]["physicalLocation"];
    assert_eq!(place["artifactLocation"]["uri"], "http.rs");
    assert_eq!(place["region"]["startLine"], 2);
    let who = red[0].to_string();
    assert!(who.contains("claude") && who.contains("codex"), "{who}");
    for (i, agent) in ["claude", "codex"].iter().enumerate() {
        let mine = runs[i]["results"].as_array().unwrap();
        assert_eq!(mine.len(), 2, "{agent} found its own and the shared one");
    }

    // The pull-request comment: the verdict, the shared finding by both.
    let md = std::fs::read_to_string(&md).unwrap();
    // What a reader of the test's output sees (`--nocapture`).
    eprintln!("--- sarif summary ---\n{summary}\n--- review.md ---\n{md}");
    assert!(md.contains("http.rs:2"), "{md}");
    assert!(md.contains("claude, codex"), "{md}");
    assert!(md.contains("retries a POST that is not idempotent"), "{md}");
}

/// `--verify` with the real adapters: each lone finding goes to the other
/// vendor's reviewer. codex refutes claude's (struck, not counted), claude
/// confirms codex's; the shared red one needs no check, so the verdict
/// stays red. The recorded session replays to a screen that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_and_codex_check_each_others_lone_findings() {
    let a = reviewers().await;
    let record = a.dir.path().join("verify.jsonl");
    let mut c = common::quorum_async(&a.home());
    c.arg("--config")
        .arg(a.config())
        .args(["review", "--agents", "claude,codex", "--verify", "--json"])
        .arg("--cwd")
        .arg(a.work())
        .arg("--record")
        .arg(&record)
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(240), c.output())
        .await
        .expect("quorum review ends")
        .unwrap();
    a.assert_nothing_left(&out);
    assert_eq!(out.status.code(), Some(2), "{}", a.diagnose(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let found = v["quorum"]["findings"].as_array().unwrap();
    let check = |title: &str| {
        let f = found.iter().find(|f| f["title"] == title).unwrap();
        (f["check"]["verdict"].clone(), f["check"]["by"].clone())
    };
    assert_eq!(
        check("no backoff between tries"),
        ("refuted".into(), "codex".into()),
        "{v:#}"
    );
    assert_eq!(
        check("the loop never gives up"),
        ("confirmed".into(), "claude".into()),
        "{v:#}"
    );
    assert_eq!(
        check("retries a POST that is not idempotent").0,
        serde_json::Value::Null
    );
    assert_eq!(v["quorum"]["verdict"], "red");

    let shot = a.dir.path().join("shot.txt");
    let o = common::quorum(&a.home())
        .arg("replay")
        .arg(&record)
        .arg("--screenshot")
        .arg(&shot)
        .args(["--size", "140x100"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let screen = std::fs::read_to_string(&shot).unwrap();
    for said in [
        "refuted by codex: The loop returns on the first success",
        "confirmed by claude",
        "retries a POST that is not idempotent  claude, codex · 2 of 2",
    ] {
        assert!(screen.contains(said), "{said}\n{screen}");
    }
}
