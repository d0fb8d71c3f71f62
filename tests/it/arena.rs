//! The arena (issue 39): one task to three writers, each in a worktree of
//! its own; each branch reviewed by the other two; the writers compared,
//! the winner named; `/merge best` merges it, `/discard others` removes
//! the rest (asking once); `quorum arena --json` says the same; the
//! transcript replays to the same comparison box. The fake agent writes
//! (`write`), and reviews with `--review-red-if`: a branch whose diff says
//! `+hello from alpha` gets a red finding, the others are green.

use crate::common;
use common::Bounded;
use common::shell::text;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use quorum::acp::registry::Registry;
use quorum::confine::fsroot::Root;
use quorum::engine::{Session, SessionConfig};
use quorum::event::arena::Comparison;
use quorum::event::{Event, Op, Severity, Stamped};
use tokio::sync::mpsc;

struct Scratch {
    dir: tempfile::TempDir,
    config: PathBuf,
}

/// A repository and a config of three writers: `alpha` and `beta` write
/// one line, `gamma` two (a bigger diff), `delta` what it is told; each
/// reviews the others' (`[arena] reviewers`: alpha, beta, gamma).
fn scratch() -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["repo", "home", "state", "config"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let mut config = String::from("[arena]\nreviewers = [\"alpha\", \"beta\", \"gamma\"]\n");
    for (name, content) in [
        ("alpha", "hello from alpha"),
        ("beta", "hello from beta"),
        ("gamma", "hello from gamma\\nand more"),
    ] {
        config.push_str(&format!(
            "[agents.{name}]\ncommand = {fake:?}\nargs = [\"--scenario\", \"write greet.txt \
             {content}\", \"--review-red-if\", \"+hello from alpha\"]\n"
        ));
    }
    // `delta` writes what its prompt says (`write PATH CONTENT`).
    config.push_str(&format!(
        "[agents.delta]\ncommand = {fake:?}\nargs = [\"--review-red-if\", \"+hello from alpha\"]\n"
    ));
    let path = dir.path().join("config/quorum.toml");
    std::fs::write(&path, config).unwrap();
    let s = Scratch { dir, config: path };
    s.git(&["init", "-q", "-b", "main"]);
    s.git(&["config", "user.name", "Person"]);
    s.git(&["config", "user.email", "person@example.com"]);
    std::fs::write(s.repo().join("lib.rs"), "fn old() {}\n").unwrap();
    s.git(&["add", "lib.rs"]);
    s.git(&["commit", "-q", "-m", "first"]);
    s
}

impl Scratch {
    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    fn env(&self, c: &mut Command) {
        for name in common::inherited_git_vars() {
            c.env_remove(name);
        }
        c.envs(common::hermetic_env(&self.dir.path().join("home")))
            .env("XDG_STATE_HOME", self.dir.path().join("state"))
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("GIT_AUTHOR_NAME", "Person")
            .env("GIT_AUTHOR_EMAIL", "person@example.com")
            .env("GIT_COMMITTER_NAME", "Person")
            .env("GIT_COMMITTER_EMAIL", "person@example.com");
    }

    fn git(&self, args: &[&str]) -> String {
        let mut c = Command::new("git");
        c.args(args).current_dir(self.repo());
        self.env(&mut c);
        let out = c.output_bounded();
        assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
        text(&out.stdout).trim_end().to_string()
    }

    fn quorum(&self, args: &[&str]) -> Output {
        let mut c = Command::new(env!("CARGO_BIN_EXE_quorum"));
        c.arg("--config")
            .arg(&self.config)
            .args(args)
            .current_dir(self.repo());
        self.env(&mut c);
        c.output_bounded()
    }

    /// A session in the repository, as the TUI starts one, recorded.
    fn session(&self, record: &Path) -> (Session, mpsc::UnboundedSender<Op>, Events) {
        self.session_with(Some(record), None)
    }

    /// As [`Scratch::session`], recording to `record`, or continuing
    /// `resume` (`--continue`).
    fn session_with(
        &self,
        record: Option<&Path>,
        resume: Option<&Path>,
    ) -> (Session, mpsc::UnboundedSender<Op>, Events) {
        let registry = Registry::load_only(&self.config).unwrap();
        let mut config = SessionConfig::new(registry, Root::new(&self.repo()).unwrap());
        config.record = record.map(Path::to_path_buf);
        config.resume = resume.map(Path::to_path_buf);
        config.read_settings(Some(&self.config)).unwrap();
        let (mut session, events) = Session::start(config, Instant::now()).unwrap();
        session
            .dispatcher()
            .set_worktrees(Some(self.dir.path().join("state")), None);
        let ops = session.serve();
        (session, ops, Events(events))
    }
}

struct Events(mpsc::UnboundedReceiver<Stamped>);

impl Events {
    async fn compared(&mut self) -> Comparison {
        let events =
            common::events::until(&mut self.0, |e| matches!(e, Event::ArenaCompared { .. })).await;
        match &events.last().unwrap().event {
            Event::ArenaCompared { comparison, .. } => comparison.clone(),
            other => panic!("{other:?}"),
        }
    }

    /// The first notice or error whose text has `needle`.
    async fn said(&mut self, needle: &str) -> String {
        loop {
            let e = tokio::time::timeout(std::time::Duration::from_secs(30), self.0.recv())
                .await
                .expect("an answer")
                .expect("the session runs");
            match e.event {
                Event::Notice { text, .. } | Event::Error { text } if text.contains(needle) => {
                    return text;
                }
                _ => {}
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_writers_compared_the_winner_merged_the_others_discarded_and_replayed() {
    let s = scratch();
    let record = s.dir.path().join("arena.jsonl");
    let (session, ops, mut events) = s.session(&record);
    ops.send(Op::Submit("@alpha,beta,gamma+ Write a greeting".into()))
        .unwrap();
    let c = events.compared().await;
    let agents: Vec<&str> = c.rows.iter().map(|r| r.agent.as_str()).collect();
    assert_eq!(agents, ["alpha", "beta", "gamma"], "{c:#?}");
    // alpha's branch has a red finding from each of its two reviewers
    // (merged as one); beta's diff is smaller than gamma's.
    assert_eq!(c.rows[0].verdict, Some(Severity::Red), "{c:#?}");
    assert_eq!(c.rows[0].findings.red, 1, "{c:#?}");
    assert_eq!(c.rows[1].verdict, Some(Severity::Green), "{c:#?}");
    assert_eq!(c.rows[1].diffstat.added, 1, "{c:#?}");
    assert_eq!(c.rows[2].diffstat.added, 2, "{c:#?}");
    assert_eq!(c.best().map(|r| r.agent.as_str()), Some("beta"), "{c:#?}");
    assert_eq!(c.reason, "the smaller diff");
    let labels: Vec<&str> = c.rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["c1", "c2", "c3"]);

    ops.send(Op::Submit("/merge best".into())).unwrap();
    let merged = events.said("merged into main").await;
    assert!(merged.contains(&c.rows[1].branch), "{merged}");
    let greet = std::fs::read_to_string(s.repo().join("greet.txt")).unwrap();
    assert_eq!(greet.trim(), "hello from beta");

    ops.send(Op::Submit("/discard others".into())).unwrap();
    let asked = events.said("never merged").await;
    assert!(
        asked.contains(&c.rows[0].branch) && asked.contains(&c.rows[2].branch),
        "{asked}"
    );
    ops.send(Op::Submit("/discard others".into())).unwrap();
    events.said("worktrees and branches removed").await;
    for row in [&c.rows[0], &c.rows[2]] {
        assert_eq!(
            s.git(&["branch", "--list", &row.branch]),
            "",
            "{}",
            row.branch
        );
    }
    assert_eq!(
        s.git(&["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
    session.shutdown();
    drop(session);

    // The transcript replays to the same comparison box.
    let loaded = quorum::transcript::load(&record).unwrap();
    let mut state = quorum::tui::state::State::new();
    for e in &loaded.events {
        state.apply(e);
    }
    let cell = state
        .cells
        .iter()
        .find(|cell| matches!(cell.kind, quorum::tui::state::CellKind::Arena(_)))
        .expect("the comparison box");
    let quorum::tui::state::CellKind::Arena(a) = &cell.kind else {
        unreachable!()
    };
    assert_eq!(a.comparison, c);
    let rows: Vec<String> = quorum::tui::cells::render(cell, 100, 0)
        .iter()
        .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
        .collect();
    let screen = rows.join("\n");
    assert!(screen.contains("★ beta c2"), "{screen}");
    assert!(screen.contains("● 1 red"), "{screen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_of_a_writer_updates_the_comparison() {
    let s = scratch();
    let record = s.dir.path().join("arena.jsonl");
    let (session, ops, mut events) = s.session(&record);
    ops.send(Op::Submit(
        "@delta,beta+ write greet.txt hello from alpha".into(),
    ))
    .unwrap();
    let c = events.compared().await;
    assert_eq!(c.rows[0].verdict, Some(Severity::Red), "{c:#?}");
    assert_eq!(c.best().map(|r| r.agent.as_str()), Some("beta"), "{c:#?}");
    // delta mends its branch: reviewed again, now equal to beta's.
    ops.send(Op::Submit("/msg c1 write greet.txt hello, mended".into()))
        .unwrap();
    let c = events.compared().await;
    assert_eq!(c.rows[0].verdict, Some(Severity::Green), "{c:#?}");
    assert_eq!((c.winner, c.ties.clone()), (None, vec![0, 1]), "{c:#?}");
    assert_eq!(c.reason, "tied: delta, beta");
    session.shutdown();
}

#[test]
fn quorum_arena_json_names_the_winner_and_a_row_per_writer() {
    let s = scratch();
    let out = s.quorum(&[
        "arena",
        "--agents",
        "alpha,beta,gamma",
        "--json",
        "Write a greeting",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(v["winner"]["agent"], "beta", "{v:#}");
    assert!(
        v["winner"]["branch"]
            .as_str()
            .unwrap()
            .starts_with("quorum/"),
        "{v:#}"
    );
    assert_eq!(v["rows"].as_array().unwrap().len(), 3, "{v:#}");
    assert_eq!(v["rows"][0]["verdict"], "red", "{v:#}");
    // The text table: a row per writer, the winner starred.
    let out = s.quorum(&["arena", "--agents", "alpha,beta", "Write a greeting"]);
    let table = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{table}{}", text(&out.stderr));
    assert!(table.contains("★ beta"), "{table}");
    assert!(table.contains("winner: beta"), "{table}");
}

/// With `[worktree] check`, each writer's check is in its row and ranks
/// first: beta, the winner without checks, fails the project's check here
/// (its greeting is refused), so gamma, whose check passed and whose
/// branch has no red finding, wins, its bigger diff notwithstanding.
#[test]
fn a_failed_check_loses_the_arena() {
    let s = scratch();
    let mut config = std::fs::read_to_string(&s.config).unwrap();
    config.push_str("[worktree]\ncheck = \"! grep -q beta greet.txt\"\ncheck_timeout = 60\n");
    std::fs::write(&s.config, config).unwrap();
    let out = s.quorum(&[
        "arena",
        "--agents",
        "alpha,beta,gamma",
        "--json",
        "Write a greeting",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(v["winner"]["agent"], "gamma", "{v:#}");
    let row = |agent: &str| {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["agent"] == agent)
            .unwrap()
            .clone()
    };
    assert_eq!(row("beta")["check"]["outcome"], "failed", "{v:#}");
    assert_eq!(row("gamma")["check"]["outcome"], "passed", "{v:#}");
    assert_eq!(row("alpha")["check"]["outcome"], "passed", "{v:#}");
}

/// The events of `record` before the first for which `cut` holds, written
/// to `to`: the transcript of a session that ended (killed) there.
fn cut_before(record: &Path, to: &Path, mut cut: impl FnMut(&Event) -> bool) {
    let text = std::fs::read_to_string(record).unwrap();
    let kept: Vec<&str> = text
        .lines()
        // (The first line is the transcript's header, not an event.)
        .take_while(|line| serde_json::from_str::<Stamped>(line).map_or(true, |e| !cut(&e.event)))
        .collect();
    std::fs::write(to, kept.join("\n") + "\n").unwrap();
}

/// The checks that finished and the review batches that started.
fn checks_and_reviews(events: &[Stamped]) -> (usize, usize) {
    let count = |f: fn(&Event) -> bool| events.iter().filter(|e| f(&e.event)).count();
    (
        count(|e| matches!(e, Event::CheckFinished { .. })),
        count(|e| matches!(e, Event::BatchStarted { review: true, .. })),
    )
}

/// An arena whose session ended before its comparison is compared when
/// the session is continued, running again only what had not finished:
/// cut before the last writer's check, that check runs (and no other);
/// cut after the first branch's review, the other two branches are
/// reviewed and the first is not. Either way the comparison is the one
/// the whole session made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unfinished_arena_is_compared_when_its_session_is_continued() {
    let s = scratch();
    let mut config = std::fs::read_to_string(&s.config).unwrap();
    config.push_str("[worktree]\ncheck = \"! grep -q beta greet.txt\"\ncheck_timeout = 60\n");
    std::fs::write(&s.config, config).unwrap();
    let record = s.dir.path().join("arena.jsonl");
    let (session, ops, mut events) = s.session(&record);
    ops.send(Op::Submit("@alpha,beta,gamma+ Write a greeting".into()))
        .unwrap();
    let whole = events.compared().await;
    assert_eq!(whole.best().map(|r| r.agent.as_str()), Some("gamma"));
    session.shutdown();
    drop(session);
    assert_eq!(checks_and_reviews(&common::events(&record)), (3, 3));

    // Killed before the last check finished.
    let before_check = s.dir.path().join("before-check.jsonl");
    let mut checks = 0;
    cut_before(&record, &before_check, |e| {
        checks += usize::from(matches!(e, Event::CheckFinished { .. }));
        checks == 3
    });
    // Killed after the first branch's review.
    let after_review = s.dir.path().join("after-review.jsonl");
    let mut reviewed = false;
    cut_before(&record, &after_review, |e| {
        let cut = reviewed && matches!(e, Event::BatchFinished { .. });
        reviewed |= matches!(e, Event::ReviewQuorum { .. });
        cut
    });
    for (file, again) in [(&before_check, (1, 3)), (&after_review, (0, 2))] {
        assert!(
            !common::events(file)
                .iter()
                .any(|e| matches!(e.event, Event::ArenaCompared { .. }))
        );
        let (session, _ops, mut events) = s.session_with(None, Some(file));
        let c = events.compared().await;
        session.shutdown();
        drop(session);
        // The same rows, but for how long things took.
        let timeless = |rows: &[quorum::event::arena::ArenaRow]| {
            let mut rows = rows.to_vec();
            for r in &mut rows {
                r.ms = 0;
                if let Some(c) = &mut r.check {
                    c.ms = None;
                }
            }
            rows
        };
        assert_eq!(
            timeless(&c.rows),
            timeless(&whole.rows),
            "{}",
            file.display()
        );
        assert_eq!((c.winner, &c.reason), (whole.winner, &whole.reason));
        // What the continued session did is recorded after its start.
        let recorded = common::events(file);
        let continued = recorded
            .iter()
            .position(|e| matches!(e.event, Event::SessionResumed { .. }))
            .expect("the continued session is recorded");
        let continued = &recorded[continued..];
        assert_eq!(checks_and_reviews(continued), again, "{}", file.display());
        assert!(
            continued
                .iter()
                .any(|e| matches!(e.event, Event::ArenaCompared { .. })),
            "the comparison is recorded"
        );
    }
}

/// The clean writer's `add`: right, and said at length (its diff is
/// bigger than the cheater's).
const CLEAN_ADD: &str = "def add(a, b):\\n    # a + b: the sum the tests expect.\\n\
    # one\\n    # two\\n    # three\\n    # four\\n    # five\\n    # six\\n    # seven\\n\
    # eight\\n    # nine\\n    # ten\\n    # eleven\\n    # twelve\\n    return a + b\\n";

/// A small Python project whose `add` is wrong, and four writers told to
/// fix it: `breaker` multiplies (a test fails), `risky` adds with `sum`
/// (the tests pass; its reviewers find it red), `clean` adds, `cheater`
/// leaves `add` wrong and rewrites the failing test into one that passes,
/// in a smaller diff than the clean one.
/// The check is pytest, installed by scripts/install-review-tools.sh.
fn python_scratch() -> Scratch {
    let s = scratch();
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let home = s.dir.path().join("home");
    let python = crate::review_formats::tools().join("bin/python");
    let mut config = format!(
        "[arena]\nreviewers = [\"breaker\", \"clean\"]\n\
         [worktree]\ncheck = \"{} -m pytest -q -p no:cacheprovider\"\ncheck_timeout = 120\n",
        python.display()
    );
    for (name, path, content) in [
        ("breaker", "calc.py", "def add(a, b):\\n    return a * b\\n"),
        (
            "risky",
            "calc.py",
            "def add(a, b):\\n    return sum([a, b])\\n",
        ),
        ("clean", "calc.py", CLEAN_ADD),
        (
            "cheater",
            "test_calc.py",
            "def test_nothing():\\n    pass\\n",
        ),
    ] {
        config.push_str(&format!(
            "[agents.{name}]\ncommand = {fake:?}\nargs = [\"--scenario\", \"write {path} \
             {content}\", \"--review-red-if\", \"sum([a, b])\"]\nenv = {{ HOME = {home:?} }}\n"
        ));
    }
    std::fs::write(&s.config, config).unwrap();
    std::fs::write(
        s.repo().join("calc.py"),
        "def add(a, b):\n    return a - b\n",
    )
    .unwrap();
    std::fs::write(
        s.repo().join("test_calc.py"),
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n\
         def test_zero():\n    assert add(0, 0) == 0\n",
    )
    .unwrap();
    s.git(&["add", "calc.py", "test_calc.py"]);
    s.git(&["commit", "-q", "-m", "add, wrong"]);
    s
}

/// Best of four on a real project with a real test command: each branch
/// checked by pytest in a fresh checkout and reviewed; the one that broke
/// a test fails its check, the one with a red finding and the one that
/// rewrote the failing test do not win, the clean one does; `/merge best`
/// merges it, `/discard others` removes the rest, and nothing is left
/// running or behind (no agent, no checkout, no worktree).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn best_of_four_on_a_python_project_checked_by_pytest() {
    use quorum::event::arena::CheckOutcome;
    let s = python_scratch();
    let record = s.dir.path().join("arena.jsonl");
    let (session, ops, mut events) = s.session(&record);
    ops.send(Op::Submit(
        "@breaker,risky,clean,cheater+ Fix add() in calc.py".into(),
    ))
    .unwrap();
    let c = events.compared().await;
    let row = |agent: &str| c.rows.iter().find(|r| r.agent == agent).unwrap();
    let (breaker, risky, clean, cheater) =
        (row("breaker"), row("risky"), row("clean"), row("cheater"));
    let check = |r: &quorum::event::arena::ArenaRow| {
        let c = r.check.clone().expect("checked");
        (c.outcome, c.passed, c.failed)
    };
    assert_eq!(
        check(breaker),
        (CheckOutcome::Failed, Some(1), Some(1)),
        "{c:#?}"
    );
    assert_eq!(check(risky), (CheckOutcome::Passed, Some(2), Some(0)));
    assert_eq!(check(clean), (CheckOutcome::Passed, Some(2), Some(0)));
    // The cheater's check passes: on the test it wrote.
    assert_eq!(check(cheater), (CheckOutcome::Passed, Some(1), Some(0)));
    assert_eq!(cheater.tests_touched, 1, "{c:#?}");
    assert_eq!((clean.tests_touched, risky.tests_touched), (0, 0));
    assert_eq!(risky.verdict, Some(Severity::Red), "{c:#?}");
    assert_eq!(risky.findings.red, 1, "{c:#?}");
    assert_eq!(clean.verdict, Some(Severity::Green), "{c:#?}");
    // The cheater's diff is the smaller: only its changed test keeps it
    // from winning.
    assert!(cheater.diff_size() < clean.diff_size(), "{c:#?}");
    assert_eq!(cheater.rank(clean), std::cmp::Ordering::Greater);
    assert_eq!(c.best().map(|r| r.agent.as_str()), Some("clean"), "{c:#?}");
    assert_eq!(c.reason, "no red finding");
    // The table says the same, the cheater's changed test counted.
    let table = quorum::cli::arena::table(&c);
    assert!(table.contains("fail 1/2"), "{table}");
    assert!(table.contains("★ clean"), "{table}");

    ops.send(Op::Submit("/merge best".into())).unwrap();
    events.said("merged into main").await;
    let merged = std::fs::read_to_string(s.repo().join("calc.py")).unwrap();
    assert!(merged.contains("return a + b"), "{merged}");
    ops.send(Op::Submit("/discard others".into())).unwrap();
    events.said("never merged").await;
    ops.send(Op::Submit("/discard others".into())).unwrap();
    events.said("worktrees and branches removed").await;
    session.shutdown();
    drop(session);
    for r in [breaker, risky, cheater] {
        assert_eq!(s.git(&["branch", "--list", &r.branch]), "", "{}", r.branch);
    }
    let worktrees = s.git(&["worktree", "list", "--porcelain"]);
    assert_eq!(worktrees.matches("worktree ").count(), 1, "{worktrees}");
    let checks = s.dir.path().join("state/quorum/checks");
    let left: Vec<_> = std::fs::read_dir(&checks)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "checkouts left behind: {left:?}");
    let running = common::models::leftovers(&s.dir.path().join("home"));
    assert!(running.is_empty(), "still running: {running:?}");
}

/// A check whose program is not installed says so in each row (`no
/// NAME`) instead of failing every writer, and the writers are compared
/// on the rest.
#[test]
fn a_check_whose_program_is_missing_is_named_and_the_rest_compared() {
    let s = scratch();
    let mut config = std::fs::read_to_string(&s.config).unwrap();
    config.push_str("[worktree]\ncheck = \"no-such-test-runner --all\"\ncheck_timeout = 60\n");
    std::fs::write(&s.config, config).unwrap();
    let out = s.quorum(&[
        "arena",
        "--agents",
        "alpha,beta,gamma",
        "--format",
        "markdown",
        "Write a greeting",
    ]);
    let table = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{table}{}", text(&out.stderr));
    assert_eq!(
        table.matches("| no no-such-test-runner |").count(),
        3,
        "{table}"
    );
    // beta wins as it does without a check: no red finding, the smaller diff.
    assert!(table.contains("| ★ | **beta c2** |"), "{table}");
    assert!(table.contains("winner: beta"), "{table}");
    assert!(
        table.starts_with("### Arena: Write a greeting\n"),
        "{table}"
    );
}

/// Writers that spend under a cap: alpha and beta each spend $0.30 of
/// `--max-cost 0.50`, so once both have written no review starts. The
/// rows have no verdict, quorum names the branches left unreviewed, and
/// exits 4 (the JSON's `exit_code` too).
#[test]
fn an_arena_stopped_by_the_budget_names_its_unreviewed_branches_and_exits_4() {
    let s = scratch();
    let config = std::fs::read_to_string(&s.config).unwrap().replace(
        "args = [\"--scenario\"",
        "args = [\"--cost-per-turn\", \"0.30\", \"--scenario\"",
    );
    std::fs::write(&s.config, config).unwrap();
    let out = s.quorum(&[
        "--max-cost",
        "0.50",
        "arena",
        "--agents",
        "alpha,beta",
        "--json",
        "Write a greeting",
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    let v: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(v["exit_code"], 4, "{v:#}");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{v:#}");
    for row in rows {
        assert!(row["failed"].is_null(), "both wrote: {v:#}");
        assert!(row["verdict"].is_null(), "no review ran: {v:#}");
        assert!((row["cost"].as_f64().unwrap() - 0.3).abs() < 1e-9, "{v:#}");
    }
    assert!(
        err.contains("budget: the session has spent $0.60 of its $0.50 cap"),
        "{err}"
    );
    let labels: Vec<&str> = rows.iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert!(
        err.contains(&format!(
            "quorum: the budget kept branches from being reviewed: {}",
            labels.join(", ")
        )),
        "{err}"
    );
}
