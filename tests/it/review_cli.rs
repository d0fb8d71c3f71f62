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
/// verdict), `echo` (answers with the prompt it got), `finder` (red, with
/// a finding on the added line, [`FINDER`]), and `fa` and `fb` (reviews
/// with findings: the fake agent's `findings a` and `findings b`), and
/// `refuter` and `confirmer` (green, no findings; a finding they are asked
/// to check they refute, or confirm).
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
    for (name, scenario, check) in [
        ("green", "review green", None),
        ("yellow", "review yellow", None),
        ("red", "review red", None),
        ("red2", "review red", None),
        ("crash", "crash", None),
        ("silent", "echo fine", None),
        ("echo", "prompt", None),
        ("fa", "findings a", None),
        ("fb", "findings b", None),
        ("finder", FINDER, None),
        ("refuter", "review green", Some("refuted")),
        ("confirmer", "review green", Some("confirmed")),
        ("spender", "usage 1000 200000 0.30", None),
    ] {
        let check = check.map_or(String::new(), |v| format!(", \"--check\", \"{v}\""));
        config.push_str(&format!(
            "[agents.{name}]\ncommand = {fake:?}\nargs = [\"--scenario\", {}{check}]\n",
            toml::Value::String(scenario.into())
        ));
    }
    let path = dir.path().join(".git/quorum.toml");
    std::fs::write(&path, config).unwrap();
    Repo { dir, config: path }
}

/// The `finder` reviewer's report: red, a finding in the contract's form
/// (issue 38) on the added line of `lib.rs`, with an escape in its body.
const FINDER: &str = "echo <!-- severity: red -->\n\
    <!-- finding: {\"file\": \"lib.rs\", \"line\": 2, \"severity\": \"red\", \"title\": \"added is never called\"} -->\n\
    Nothing calls `added`.\x1b[31m\n";

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

/// A spending cap reached by the first reviewer (one at a time) keeps
/// the second from starting: the review has no verdict of it, and exits
/// 4, saying why; a red verdict still exits 2.
#[test]
fn a_review_stopped_by_the_budget_exits_4() {
    let r = repo();
    let config = std::fs::read_to_string(&r.config).unwrap();
    std::fs::write(&r.config, format!("max_parallel = 1\n{config}")).unwrap();
    let o = r.review(&["--agents", "spender,green", "--max-cost", "0.10"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{}\n{err}", text(&o.stdout));
    assert!(
        err.contains("budget: the session has spent $0.30 of its $0.10 cap"),
        "{err}"
    );
    assert!(err.contains("green: ■ cancelled"), "{err}");
    let o = r.review(&["--agents", "red,spender", "--max-cost", "0.10"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
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
    // The quorum's event carries the reviewed diff, for the findings view.
    let quorum: serde_json::Value = transcript
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["type"] == "review_quorum")
        .expect("a review_quorum event");
    let diff = quorum["diff"].as_str().unwrap_or_default();
    assert!(diff.contains("+++ b/lib.rs"), "{quorum}");
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
        // (The findings' list follows the quorum line.)
        text(&o.stdout).contains(
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
/// `--fail-on red` lets a yellow quorum pass; red and errors keep their
/// codes, and the default is yellow.
#[test]
fn fail_on_red_lets_yellow_pass() {
    let r = repo();
    for (agents, fail_on, code) in [
        ("green,yellow", None, 1),
        ("green,yellow", Some("yellow"), 1),
        ("green,yellow", Some("red"), 0),
        ("red,green", Some("red"), 2),
        ("green,crash", Some("red"), 3),
        ("green,green", Some("red"), 0),
    ] {
        let mut args = vec!["--agents", agents];
        if let Some(v) = fail_on {
            args.extend(["--fail-on", v]);
        }
        let o = r.review(&args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", text(&o.stderr));
    }
    let o = r.review(&["--agents", "green", "--fail-on", "green"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "clap refuses it: {}",
        text(&o.stderr)
    );
}

/// One review, every format: SARIF on stdout (valid against the official
/// schema, read by sarif-tools: a run per reviewer and the quorum's), and
/// the others written by `--write`. A reviewer's report holds a finding
/// in the contract's form; until reviews parse findings there are none
/// in the formats, and each still says the verdict.
#[test]
fn each_format_of_one_review() {
    let r = repo();
    let out = tempfile::tempdir().unwrap();
    let file = |name: &str| out.path().join(name);
    let write = |format: &str, name: &str| format!("{format}={}", file(name).display());
    let o = r.review(&[
        "--agents",
        "finder,green",
        "--format",
        "sarif",
        "--write",
        &write("markdown", "comment.md"),
        "--write",
        &write("github", "review.json"),
        "--write",
        &write("json", "out.json"),
        "--write",
        &write("text", "out.txt"),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    std::fs::write(file("review.sarif"), &o.stdout).unwrap();
    crate::review_formats::valid_sarif(&file("review.sarif"));
    crate::review_formats::summary(&file("review.sarif"));
    let sarif: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let runs: Vec<&str> = sarif["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["properties"]["reviewer"].as_str().unwrap())
        .collect();
    assert_eq!(runs, ["finder", "green", "quorum"]);
    assert_eq!(sarif["runs"][2]["properties"]["verdict"], "red");

    let md = std::fs::read_to_string(file("comment.md")).unwrap();
    assert!(
        md.starts_with("<!-- quorum-review -->\n## quorum review: 🔴 **red** · 1 of 2\n"),
        "{md}"
    );
    assert!(md.contains("finder red, green green"), "{md}");
    let review: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file("review.json")).unwrap()).unwrap();
    assert_eq!(review["event"], "REQUEST_CHANGES");
    assert!(review["comments"].is_array(), "{review}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file("out.json")).unwrap()).unwrap();
    assert_eq!(
        (json["exit_code"].as_i64(), json["base"].as_str()),
        (Some(2), Some("HEAD"))
    );
    assert!(
        json["findings"].is_array() && json["tasks"][0]["findings"].is_array(),
        "{json}"
    );
    let txt = std::fs::read_to_string(file("out.txt")).unwrap();
    assert!(txt.starts_with("finder  red"), "{txt}");
    // (Once reviews carry findings, the quorum's line counts them too.)
    assert!(txt.contains("\nquorum: red · 1 of 2"), "{txt}");
    assert!(!txt.contains('\x1b'), "sanitised: {txt:?}");

    let o = r.review(&["--agents", "green", "--write", "sarif"]);
    assert_eq!(o.status.code(), Some(2), "FORMAT=FILE: {}", text(&o.stderr));
    let gone = out.path().join("no/such/dir/x.md");
    let o = r.review(&[
        "--agents",
        "green",
        "--write",
        &format!("markdown={}", gone.display()),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("--write"), "{}", text(&o.stderr));
}

/// An empty diff is green in every format, and its SARIF is valid with
/// no results.
#[test]
fn an_empty_diff_in_each_format() {
    let r = repo();
    git(r.dir.path(), &["commit", "-qam", "second"]);
    let o = r.review(&["--agents", "green", "--format", "sarif"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("empty.sarif");
    std::fs::write(&log, &o.stdout).unwrap();
    crate::review_formats::valid_sarif(&log);
    let sarif: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(sarif["runs"][0]["results"], serde_json::json!([]));
    let o = r.review(&["--agents", "green", "--format", "markdown"]);
    assert!(
        text(&o.stdout).contains("🟢 **green** · nothing to review"),
        "{}",
        text(&o.stdout)
    );
    let o = r.review(&["--agents", "green", "--format", "github"]);
    let body: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(body["event"], "COMMENT");
    let o = r.review(&["--agents", "green", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["findings"], serde_json::json!([]));
    let o = r.review(&["--agents", "green", "--json", "--format", "sarif"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "--json is --format json: {}",
        text(&o.stderr)
    );
}

/// The Action's review step (action.yml's `run:` of step `review`, read by
/// PyPI yaml) run by bash as the runner would: `quorum` on `PATH`, the
/// inputs in its environment. It writes the SARIF (valid), the comment and
/// GitHub's review, and says their paths and the exit code in
/// `$GITHUB_OUTPUT`; the step itself succeeds (the verdict step fails).
#[cfg(unix)]
#[test]
fn the_actions_review_step_runs_quorum_review() {
    let r = repo();
    let tools = crate::review_formats::tools();
    let action = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("action.yml");
    let out = Command::new(tools.join("bin/python"))
        .args([
            "-c",
            "import sys, yaml\n\
             steps = yaml.safe_load(open(sys.argv[1]))['runs']['steps']\n\
             print(next(s['run'] for s in steps if s.get('id') == 'review'))",
        ])
        .arg(&action)
        .output_bounded();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let script = text(&out.stdout);
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_quorum"), bin.path().join("quorum")).unwrap();
    let temp = tempfile::tempdir().unwrap();
    let output = temp.path().join("github_output");
    let mut bash = Command::new("bash");
    let quorum = r.quorum();
    for (name, value) in quorum.get_envs() {
        match value {
            Some(v) => bash.env(name, v),
            None => bash.env_remove(name),
        };
    }
    let path = quorum
        .get_envs()
        .find(|(n, _)| *n == "PATH")
        .and_then(|(_, v)| v)
        .map(|v| v.to_os_string())
        .unwrap_or_else(|| std::env::var_os("PATH").unwrap());
    let mut paths = vec![bin.path().to_path_buf()];
    paths.extend(std::env::split_paths(&path));
    let o = bash
        .args(["-euo", "pipefail", "-c", &script])
        .env("PATH", std::env::join_paths(paths).unwrap())
        .env("AGENTS", "finder,green")
        .env("FAIL_ON", "red")
        .env("BASE", "HEAD")
        .env("BASE_SHA", "")
        .env("CONFIG", &r.config)
        .env("OUT", temp.path().join("quorum-review"))
        .env("GITHUB_OUTPUT", &output)
        .current_dir(r.dir.path())
        .output_bounded();
    assert!(
        o.status.success(),
        "{}\n{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let said = std::fs::read_to_string(&output).unwrap();
    let dir = temp.path().join("quorum-review");
    assert!(said.contains("exit-code=2\n"), "{said}");
    for (name, file) in [
        ("sarif", "review.sarif"),
        ("markdown", "comment.md"),
        ("review", "review.json"),
    ] {
        let line = format!("{name}={}\n", dir.join(file).display());
        assert!(said.contains(&line), "{line}: {said}");
    }
    crate::review_formats::valid_sarif(&dir.join("review.sarif"));
    let md = std::fs::read_to_string(dir.join("comment.md")).unwrap();
    assert!(md.contains("🔴 **red** · 1 of 2"), "{md}");
}

/// `--verify`: `fa`'s lone red finding goes to the other reviewer; refuted,
/// it stays listed, struck, and no longer counts: the verdict turns green
/// and says so, in the exit code, the JSON, the text, and the replayed
/// screen. Confirmed, the verdict stays red.
#[test]
fn verify_a_refuted_red_finding_turns_the_verdict() {
    let r = repo();
    let record = r.dir.path().join(".git/verify.jsonl");
    let o = r.review(&[
        "--agents",
        "fa,refuter",
        "--verify",
        "--json",
        "--record",
        record.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    let q = &v["quorum"];
    assert_eq!(
        (&q["verdict"], &q["before"]),
        (&"green".into(), &"red".into()),
        "{v}"
    );
    let check = &q["findings"][0]["check"];
    assert_eq!(
        (&check["verdict"], &check["by"], &check["reason"]),
        (
            &"refuted".into(),
            &"refuter".into(),
            &"The finding is refuted: added() is called from main.".into()
        ),
        "{v}"
    );
    assert_eq!(
        q["findings"][1].get("check"),
        None,
        "a green finding is not checked: {v}"
    );
    assert_eq!(
        q["text"],
        "red → green after verification: 1 of 1 red finding refuted · 2 of 2 · \
         2 findings: 1 red, 1 green · agreed: 2 by 1 of 2"
    );
    // The text report strikes nothing it cannot: it says who refuted it.
    let o = r.review(&["--agents", "fa,refuter", "--verify"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    assert!(
        stdout.contains(
            "quorum: red → green after verification: 1 of 1 red finding refuted · 2 of 2"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("added() is never called  (fa · 1 of 2) refuted by refuter"),
        "{stdout}"
    );
    // The recorded session replays to a screen that shows it.
    let shot = r.dir.path().join(".git/verify.txt");
    let o = r
        .quorum()
        .args(["replay", record.to_str().unwrap(), "--screenshot"])
        .arg(&shot)
        .args(["--size", "140x80"])
        .output_bounded();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let screen = std::fs::read_to_string(&shot).unwrap();
    for line in [
        "quorum ● red → green after verification: 1 of 1 red finding refuted · 2 of 2",
        "● red    lib.rs:2  added() is never called",
        "refuted by refuter: The finding is refuted: added() is called from main.",
        "Check a finding of fa's code review",
    ] {
        assert!(screen.contains(line), "{line}\n{screen}");
    }
    // Confirmed, the finding counts: red, as before.
    let o = r.review(&["--agents", "fa,confirmer", "--verify", "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    assert_eq!(
        v["quorum"]["findings"][0]["check"]["verdict"], "confirmed",
        "{v}"
    );
    assert_eq!(v["quorum"].get("before"), None, "{v}");
    // Without `--verify`, nothing is checked.
    let o = r.review(&["--agents", "fa,refuter"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}

/// `--verify` never stops a review: a checker that answers without the
/// header, or no other reviewer to ask, leaves the finding unchecked and
/// says why; the verdict stays as the reviewers gave it.
#[test]
fn verify_without_an_answer_leaves_the_finding_unchecked() {
    let r = repo();
    let o = r.review(&["--agents", "fa,green", "--verify", "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    assert_eq!(v["quorum"]["findings"][0].get("check"), None, "{v}");
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains(
            "verify: green's check of the finding red lib.rs:2 has no \
             `<!-- finding-check: confirmed|refuted -->` header; it stays unchecked"
        ),
        "{stderr}"
    );
    let o = r.review(&["--agents", "fa", "--verify"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let stderr = text(&o.stderr);
    assert!(
        stderr.contains(
            "verify: the finding red lib.rs:2 stays unchecked: no other reviewer to check it"
        ),
        "{stderr}"
    );
}

/// A branch's review places its findings in the branch, not in the tree
/// checked out: the branch put ten lines at the top of a 20-line file, and
/// a finding at its line 28 (the old line 18, outside the diff's hunk) is
/// kept, though the file checked out has 20 lines; one past the branch's
/// end (31) is dropped, naming the branch's length.
#[test]
fn a_branch_reviews_findings_are_placed_in_the_branch() {
    let r = repo();
    let dir = r.dir.path();
    let base: String = (1..=20).map(|i| format!("fn f{i}() {{}}\n")).collect();
    std::fs::write(dir.join("big.rs"), &base).unwrap();
    git(dir, &["add", "big.rs"]);
    git(dir, &["commit", "-q", "-m", "big"]);
    git(dir, &["checkout", "-q", "-b", "feature"]);
    let top: String = (1..=10).map(|i| format!("fn new{i}() {{}}\n")).collect();
    std::fs::write(dir.join("big.rs"), format!("{top}{base}")).unwrap();
    git(dir, &["commit", "-q", "-am", "grow"]);
    git(dir, &["checkout", "-q", "-"]);
    let report = "echo <!-- severity: yellow -->\n\
        <!-- finding: {\"file\": \"big.rs\", \"line\": 28, \"severity\": \"yellow\", \"title\": \"f18 is unused\"} -->\n\
        Nothing calls f18.\n\
        <!-- finding: {\"file\": \"big.rs\", \"line\": 31, \"severity\": \"yellow\", \"title\": \"past the end\"} -->\n";
    let mut config = std::fs::read_to_string(&r.config).unwrap();
    config.push_str(&format!(
        "[agents.late]\ncommand = {:?}\nargs = [\"--scenario\", {}]\n",
        env!("CARGO_BIN_EXE_quorum-fake-agent"),
        toml::Value::String(report.into())
    ));
    std::fs::write(&r.config, config).unwrap();
    let record = dir.join(".git/branch.jsonl");
    let o = r.review(&[
        "--branch",
        "feature",
        "--agents",
        "late",
        "--json",
        "--record",
        record.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    let found = v["tasks"][0]["findings"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{v}");
    assert_eq!(
        (&found[0]["line"], &found[0]["title"]),
        (&28.into(), &"f18 is unused".into())
    );
    let transcript = std::fs::read_to_string(&record).unwrap();
    let notice = "line 31 is past the end of big.rs (30 lines on feature)";
    assert!(transcript.contains(notice), "{transcript}");
}

/// A reviewer whose header says green but whose findings hold a red one
/// is counted red, and its box says why: a gate never passes a change
/// its own reviewer found a red problem in.
#[test]
fn a_green_header_over_a_red_finding_counts_red() {
    let r = repo();
    let report = "echo <!-- severity: green -->\n\
        <!-- finding: {\"file\": \"lib.rs\", \"line\": 2, \"severity\": \"red\", \"title\": \"added is never called\"} -->\n\
        Nothing calls it.\n";
    let mut config = std::fs::read_to_string(&r.config).unwrap();
    config.push_str(&format!(
        "[agents.mixed]\ncommand = {:?}\nargs = [\"--scenario\", {}]\n",
        env!("CARGO_BIN_EXE_quorum-fake-agent"),
        toml::Value::String(report.into())
    ));
    std::fs::write(&r.config, config).unwrap();
    let record = r.dir.path().join(".git/mixed.jsonl");
    let o = r.review(&[
        "--agents",
        "mixed",
        "--json",
        "--record",
        record.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stdout));
    let v: serde_json::Value = serde_json::from_str(&text(&o.stdout)).unwrap();
    assert_eq!(v["tasks"][0]["severity"], "red", "{v}");
    let transcript = std::fs::read_to_string(&record).unwrap();
    let notice = "mixed: the header says green, but a finding is red: counted red";
    assert!(transcript.contains(notice), "{transcript}");
}
