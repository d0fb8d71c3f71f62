//! `quorum review` from the shell: a git repository with a change, fake
//! reviewers that answer every prompt with a set verdict, and the exit
//! codes CI reads (0 green, 1 yellow, 2 red, 3 error).

use crate::common;
use common::shell::text;

use common::Bounded;

use std::path::Path;
use std::process::{Command, Output};

struct Repo {
    dir: tempfile::TempDir,
    config: std::path::PathBuf,
}

/// `git args` in `dir`, at home in `dir/.git/home` as quorum is
/// ([`Repo::quorum`]); it must succeed.
fn git(dir: &Path, args: &[&str]) {
    let out = common::git(&dir.join(".git/home"))
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output_bounded();
    assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
}

/// A repository with one commit and an uncommitted change, and a config
/// with reviewers `green`, `yellow`, `red`, `red2`, `crash`, `silent` (no
/// verdict), `echo` (answers with the prompt it got), and `fa` and `fb`
/// (reviews with findings: the fake agent's `findings a` and `findings b`).
fn repo() -> Repo {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    std::fs::write(dir.path().join("lib.rs"), "fn old() {}\n").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "a\nb\nteh c\nd\ne\n").unwrap();
    git(dir.path(), &["add", "lib.rs", "notes.txt"]);
    git(dir.path(), &["commit", "-q", "-m", "first"]);
    std::fs::write(dir.path().join("lib.rs"), "fn old() {}\nfn added() {}\n").unwrap();
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let mut config = String::new();
    for (name, scenario) in [
        ("green", "review green"),
        ("yellow", "review yellow"),
        ("red", "review red"),
        ("red2", "review red"),
        ("crash", "crash"),
        ("silent", "echo fine"),
        ("echo", "prompt"),
        ("fa", "findings a"),
        ("fb", "findings b"),
    ] {
        config.push_str(&format!(
            "[agents.{name}]\ncommand = {fake:?}\nargs = [\"--scenario\", \"{scenario}\"]\n"
        ));
    }
    let path = dir.path().join(".git/quorum.toml");
    std::fs::write(&path, config).unwrap();
    Repo { dir, config: path }
}

impl Repo {
    /// `quorum` at home inside `.git` (so its state is no change to review).
    fn quorum(&self) -> Command {
        common::quorum(&self.dir.path().join(".git/home"))
    }

    fn review(&self, args: &[&str]) -> Output {
        self.review_with(args, &[])
    }

    /// [`Repo::review`] with `env` set too.
    fn review_with(&self, args: &[&str], env: &[(&str, &Path)]) -> Output {
        self.quorum()
            .arg("--config")
            .arg(&self.config)
            .arg("review")
            .args(args)
            .envs(env.iter().copied())
            .current_dir(self.dir.path())
            .output_bounded()
    }
}

#[test]
fn exit_codes_follow_the_quorum() {
    let r = repo();
    for (agents, code) in [
        ("green,green", 0),
        ("green,yellow", 1),
        ("red,green,red2", 2),
        ("green,crash", 3),
        ("green,silent", 3),
        ("red,crash", 2),
    ] {
        let o = r.review(&["--agents", agents]);
        assert_eq!(
            o.status.code(),
            Some(code),
            "{agents}:\n{}\n{}",
            text(&o.stdout),
            text(&o.stderr)
        );
    }
}

#[test]
fn prints_each_verdict_and_the_quorum() {
    let r = repo();
    let o = r.review(&["--agents", "red,green,red2"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "red    red      Looks red.\n\
         green  green    Looks green.\n\
         red2   red      Looks red.\n\
         quorum: red · 2 of 3 (reviewers disagree)\n"
    );
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains("red: ▶"),
        "progress names the reviewer: {stderr}"
    );
    assert!(stderr.contains("quorum: red · 2 of 3"), "{stderr}");
    let o = r.review(&["--agents", "green,crash"]);
    let stdout = text(&o.stdout);
    assert!(
        stdout.contains("crash  error    crash exited during the turn"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("quorum: green · 1 of 2 (reviewers disagree)\n"),
        "{stdout}"
    );
}

#[test]
fn json_has_the_summary_each_review_and_the_quorum() {
    let r = repo();
    let o = r.review(&["--agents", "yellow,green", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    assert_eq!(v["quorum"]["text"], "yellow · 1 of 2");
    assert_eq!(v["quorum"]["verdict"], "yellow");
    assert_eq!(v["exit_code"], 1);
    assert_eq!(v["base"], "HEAD");
    assert_eq!(
        v["summary"],
        serde_json::json!({"total": 2, "succeeded": 2, "failed": 0, "worst_verdict": "yellow"})
    );
    assert_eq!(v["tasks"][0]["agent"], "yellow");
    assert_eq!(v["tasks"][1]["severity"], "green");
}

#[test]
fn the_diff_reaches_each_reviewer() {
    let r = repo();
    let o = r.review(&["--agents", "echo", "--json"]);
    // `echo` gives no verdict: an error, but it shows what it was sent.
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    let prompt = v["tasks"][0]["output"].as_str().unwrap();
    assert!(prompt.contains("`git diff HEAD`"), "{prompt}");
    assert!(prompt.contains("+fn added() {}"), "{prompt}");
    assert!(
        prompt.contains("<!-- severity: green -->"),
        "the review contract: {prompt}"
    );
}

#[test]
fn base_picks_the_revision_and_an_empty_diff_is_green() {
    let r = repo();
    git(r.dir.path(), &["commit", "-q", "-am", "second"]);
    let o = r.review(&["--agents", "red"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("nothing to review: `git diff HEAD` is empty"),
        "{}",
        text(&o.stderr)
    );
    let o = r.review(&["--agents", "echo", "--base", "HEAD~1", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    assert!(
        v["tasks"][0]["output"]
            .as_str()
            .unwrap()
            .contains("+fn added() {}"),
        "{v}"
    );
    let o = r.review(&["--agents", "red", "--base", "no-such-rev"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        text(&o.stderr).contains("`git diff no-such-rev` failed"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn unknown_agents_and_no_agents_are_errors() {
    let r = repo();
    let o = r.review(&["--agents", "green,nobody"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        text(&o.stderr).contains("--agents: unknown agent \"nobody\""),
        "{}",
        text(&o.stderr)
    );
    assert!(o.stdout.is_empty());
}

/// Without `--agents`, every installed agent reviews (here: the two the
/// config names; no built-in agent is on this `PATH`).
#[cfg(unix)]
#[test]
fn by_default_every_installed_agent_reviews() {
    let r = repo();
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    std::fs::write(
        &r.config,
        format!(
            "[agents.first]\ncommand = {fake:?}\nargs = [\"--review\", \"green\"]\n\
             [agents.second]\ncommand = {fake:?}\nargs = [\"--review\", \"yellow\"]\n"
        ),
    )
    .unwrap();
    let bin = tempfile::tempdir().unwrap();
    let git = quorum::runtime::path::locate("git").expect("git is installed");
    std::os::unix::fs::symlink(git, bin.path().join("git")).unwrap();
    let o = r
        .quorum()
        .arg("--config")
        .arg(&r.config)
        .arg("review")
        .env("PATH", bin.path())
        .current_dir(r.dir.path())
        .output_bounded();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(stdout.starts_with("first   green"), "{stdout}");
    assert!(stdout.contains("second  yellow"), "{stdout}");
    assert!(
        stdout.ends_with("quorum: yellow · 1 of 2 (reviewers disagree)\n"),
        "{stdout}"
    );
    // No agent at all: an error that says so.
    std::fs::write(&r.config, "").unwrap();
    let o = r
        .quorum()
        .arg("--config")
        .arg(&r.config)
        .arg("review")
        .env("PATH", bin.path())
        .current_dir(r.dir.path())
        .output_bounded();
    assert_eq!(o.status.code(), Some(3));
    assert!(
        text(&o.stderr).contains("no agent is installed to review with"),
        "{}",
        text(&o.stderr)
    );
}

/// Issue 24 (6): the tree has a `.gitattributes` giving every file a diff
/// driver whose textconv is a command, and the repository's config an
/// external diff and an fsmonitor (`GIT_EXTERNAL_DIFF` in the environment
/// too). `quorum review`'s `git diff`, of the working tree and of a
/// branch, runs none of them, and the diff still reaches the reviewer.
#[test]
fn review_runs_no_textconv_external_diff_or_fsmonitor() {
    let r = repo();
    let probe = common::Probe::new();
    let dir = r.dir.path();
    // A branch with the change committed; then another change in the tree.
    git(dir, &["checkout", "-q", "-b", "feature"]);
    git(dir, &["commit", "-q", "-am", "feature"]);
    git(dir, &["checkout", "-q", "-"]);
    std::fs::write(dir.join("lib.rs"), "fn old() {}\nfn again() {}\n").unwrap();
    std::fs::write(dir.join(".gitattributes"), "* diff=evil\n").unwrap();
    for (key, name) in [
        ("diff.evil.textconv", "textconv"),
        ("diff.external", "external"),
        ("core.fsmonitor", "fsmonitor"),
    ] {
        let script = probe.script(name).display().to_string();
        git(dir, &["config", key, &script]);
    }
    let external = probe.script("env-external");
    let env = [("GIT_EXTERNAL_DIFF", external.as_path())];
    let o = r.review_with(&["--agents", "echo", "--json"], &env);
    assert_eq!(probe.ran(), Vec::<String>::new(), "quorum's git ran them");
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    let prompt = v["tasks"][0]["output"].as_str().unwrap();
    assert!(prompt.contains("+fn again() {}"), "{prompt}");
    assert!(!prompt.contains("probed"), "{prompt}");

    let o = r.review_with(&["--branch", "feature", "--agents", "echo", "--json"], &env);
    assert_eq!(probe.ran(), Vec::<String>::new(), "quorum's git ran them");
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    let prompt = v["tasks"][0]["output"].as_str().unwrap();
    assert!(prompt.contains("+fn added() {}"), "{prompt}");
    assert!(!prompt.contains("probed"), "{prompt}");
}

/// A `--base` that looks like an option of `git diff` is a revision to it,
/// never an option (`--output=FILE` would write a file).
#[test]
fn a_base_that_looks_like_an_option_is_only_a_revision() {
    let r = repo();
    let probe = common::Probe::new();
    let written = probe.dir.path().join("written");
    let base = format!("--base=--output={}", written.display());
    let o = r.review(&["--agents", "green", &base]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(!written.exists(), "git diff took it as an option");
    assert!(
        text(&o.stderr).contains(&format!("`git diff --output={}` failed", written.display())),
        "{}",
        text(&o.stderr)
    );
}

/// Two reviewers' findings: each review's in `--json`, checked (a bad
/// severity and a line past the end dropped with a notice in the box, an
/// escape stripped), and the quorum's merged: the shared place once, at
/// the worse severity, naming both; the notes' finding outside the diff.
/// The text report's quorum line counts them; the recorded transcript
/// replays to a screen that lists them.
#[test]
fn two_reviewers_findings_are_merged_and_shown() {
    let r = repo();
    let record = r.dir.path().join(".git/review.jsonl");
    let o = r.review(&[
        "--agents",
        "fa,fb",
        "--json",
        "--record",
        record.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    let a = &v["tasks"][0]["findings"];
    let b = &v["tasks"][1]["findings"];
    assert_eq!(a.as_array().unwrap().len(), 2, "{v}");
    assert_eq!(b.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(b[0]["title"], "added() has no caller");
    assert_eq!(b[0]["body"], "Dead code here.", "the escape is stripped");
    let q = &v["quorum"]["findings"];
    assert_eq!(q.as_array().unwrap().len(), 2, "{v}");
    assert_eq!(
        (
            &q[0]["file"],
            &q[0]["line"],
            &q[0]["end_line"],
            &q[0]["severity"]
        ),
        (&"lib.rs".into(), &1.into(), &2.into(), &"red".into())
    );
    assert_eq!(q[0]["by"], serde_json::json!(["fa", "fb"]));
    assert_eq!((&q[0]["of"], q[0].get("outside_diff")), (&2.into(), None));
    assert_eq!(
        (&q[1]["file"], &q[1]["outside_diff"]),
        (&"notes.txt".into(), &true.into())
    );
    assert_eq!(
        v["quorum"]["text"],
        "red · 1 of 2 · 2 findings: 1 red, 1 green · agreed: 1 by 2 of 2, 1 by 1 of 2"
    );
    let transcript = std::fs::read_to_string(&record).unwrap();
    for notice in [
        "finding 2 dropped: severity \\\"orange\\\" is not green, yellow or red",
        "finding \\\"past the end\\\" at lib.rs:99 dropped: line 99 is past the end of lib.rs (2 lines)",
    ] {
        assert!(transcript.contains(notice), "{notice}\n{transcript}");
    }
    // The text report's quorum line says it too; a reviewer's line is its
    // report's first line that says something (not a finding's comment).
    let o = r.review(&["--agents", "fa,fb"]);
    assert!(
        text(&o.stdout).starts_with("fa  red      Nothing calls it: remove it or call it.\n"),
        "{}",
        text(&o.stdout)
    );
    assert!(
        text(&o.stdout).ends_with(
            "quorum: red · 1 of 2 · 2 findings: 1 red, 1 green · agreed: 1 by 2 of 2, 1 by 1 of 2 (reviewers disagree)\n"
        ),
        "{}",
        text(&o.stdout)
    );
    // The recorded session replays to a screen listing them.
    let shot = r.dir.path().join(".git/shot.txt");
    let o = r
        .quorum()
        .args(["replay", record.to_str().unwrap(), "--screenshot"])
        .arg(&shot)
        .args(["--size", "120x80"])
        .output_bounded();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let screen = std::fs::read_to_string(&shot).unwrap();
    for line in [
        "● red    lib.rs:2  added() is never called",
        "● green  notes.txt:3  a typo in the notes",
        "● yellow lib.rs:1-2  added() has no caller",
        "2 findings: 1 red, 1 green · agreed: 1 by 2 of 2, 1 by 1 of 2",
        "finding 2 dropped: severity \"orange\"",
    ] {
        assert!(screen.contains(line), "{line}\n{screen}");
    }
    assert!(
        !screen.contains("<!-- finding"),
        "the comments are hidden: {screen}"
    );
}
