//! The findings view through the app loop (TestBackend) against a live
//! session: a review quorum's header opens it, `n`/`N` move between the
//! findings, space selects, `s` sends; the writer (the fake agent, which
//! answers each prompt with the prompt itself) gets the follow-up, and its
//! next prompt holds the quoted hunk.

use crate::common;

use common::app::*;
use quorum::agent::Permissions;
use quorum::event::finding::{Finding, QuorumFinding};
use quorum::event::{Event, Quorum, ReviewerVerdict, Severity, Stamped};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::KeyCode;

/// The fake agent answers every prompt with the prompt it got.
const ECHO: &str = "args = [\"--scenario\", \"prompt\"]\n";

const DIFF: &str = "diff --git a/lib.rs b/lib.rs
--- a/lib.rs
+++ b/lib.rs
@@ -1,3 +1,4 @@
 pub fn kept() {}
-pub fn old() {}
+pub fn added() {}
+pub fn other() {}
 // end
";

fn finding(line: u32, severity: Severity, title: &str, by: &[&str]) -> QuorumFinding {
    QuorumFinding {
        finding: Finding {
            file: "lib.rs".into(),
            line,
            end_line: None,
            severity,
            title: title.into(),
            body: format!("{title}, says the review."),
        },
        by: by.iter().map(|s| s.to_string()).collect(),
        of: 2,
        outside_diff: false,
        check: None,
    }
}

/// A two-reviewer quorum with one shared finding (of `branch`, when it
/// judged one), as the engine tells it.
fn quorum_events(branch: Option<&str>) -> Vec<Stamped> {
    let verdict = |agent: &str, severity| ReviewerVerdict {
        agent: agent.into(),
        call_id: None,
        severity: Some(severity),
        failed: false,
    };
    let mut quorum = Quorum::of(vec![
        verdict("alpha", Severity::Red),
        verdict("beta", Severity::Yellow),
    ]);
    quorum.findings = vec![
        finding(
            2,
            Severity::Red,
            "added() is never called",
            &["alpha", "beta"],
        ),
        finding(3, Severity::Yellow, "other() needs a doc", &["beta"]),
    ];
    let mut events = vec![
        Event::BatchStarted {
            batch_id: "b9".into(),
            tasks: 2,
            review: true,
            arena: false,
        },
        Event::ReviewQuorum {
            batch_id: "b9".into(),
            quorum,
            diff: Some(DIFF.into()),
        },
    ];
    if let Some(branch) = branch {
        events.push(Event::BranchVerdict {
            branch: branch.into(),
            batch_id: Some("b9".into()),
            verdict: Some(Severity::Red),
        });
    }
    events.push(Event::BatchFinished {
        batch_id: "b9".into(),
        total: 2,
        succeeded: 2,
        failed: 0,
        worst_verdict: Some(Severity::Red),
    });
    events
        .into_iter()
        .map(|event| Stamped { t: 1, event })
        .collect()
}

/// Alt+↑ focuses the quorum's header, Enter opens its findings view;
/// `n`, `n`, `N` come back to the first finding, space selects it.
async fn open_and_select(
    terminal: &mut Terminal<TestBackend>,
    app: &mut quorum::tui::app::App,
) -> String {
    drive(
        terminal,
        app,
        vec![alt(KeyCode::Up), key(KeyCode::Enter)],
        vec![],
    )
    .await;
    let screen = text(terminal);
    assert!(screen.contains("findings · review b9"), "{screen}");
    assert!(screen.contains("│+pub fn added() {}"), "{screen}");
    let keys = ['n', 'n', 'N', ' '].map(|c| key(KeyCode::Char(c))).to_vec();
    drive(terminal, app, keys, vec![]).await;
    let screen = text(terminal);
    assert!(
        screen.contains("[x] ● red    lib.rs:2  added() is never called"),
        "{screen}"
    );
    assert!(screen.contains("[ ] ● yellow lib.rs:3"), "{screen}");
    assert!(screen.contains("alpha, beta · 2 of 2"), "{screen}");
    assert!(screen.contains("1 selected · "), "{screen}");
    screen
}

/// What the writer's next turn answered: the prompt it got.
async fn next_prompt(
    terminal: &mut Terminal<TestBackend>,
    app: &mut quorum::tui::app::App,
    ev_rx: &mut tokio::sync::mpsc::UnboundedReceiver<Stamped>,
    skip: usize,
) -> String {
    let mut seen = 0;
    let Event::SubagentFinished { output, .. } = until_event(terminal, app, ev_rx, |e| {
        let done = matches!(e, Event::SubagentFinished { .. });
        seen += usize::from(done);
        done && seen > skip
    })
    .await
    else {
        unreachable!()
    };
    output
}

const QUOTED: &str = "```diff\n@@ -1,3 +1,4 @@\n pub fn kept() {}\n-pub fn old() {}\n+pub fn added() {}\n+pub fn other() {}\n // end\n```";

#[tokio::test]
async fn the_selected_findings_go_to_the_branchs_writer_with_their_hunk() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) =
        live_session(dir.path(), ECHO, None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(100, 40)).unwrap();
    drive(&mut terminal, &mut app, line("@fake! write it"), vec![]).await;
    let Event::SubagentStarted { call_id, .. } =
        until_event(&mut terminal, &mut app, &mut ev_rx, |e| {
            matches!(e, Event::SubagentStarted { .. })
        })
        .await
    else {
        unreachable!()
    };
    next_prompt(&mut terminal, &mut app, &mut ev_rx, 0).await;
    // Its branch, and a quorum that judged it.
    let mut events = vec![Stamped {
        t: 1,
        event: Event::WorktreeReady {
            call_id,
            task_id: Some("t1".into()),
            branch: "quorum/t1-write-it".into(),
            path: dir.path().display().to_string(),
            base: "head".into(),
            base_commit: "abc".into(),
        },
    }];
    events.extend(quorum_events(Some("quorum/t1-write-it")));
    drive(&mut terminal, &mut app, vec![], events).await;
    let screen = text(&terminal);
    assert!(
        screen.contains("● red    lib.rs:2  added() is never called  alpha,")
            && screen.contains("Alt+↑/↓ here, Enter: the findings view"),
        "the header lists the findings: {screen}"
    );
    let screen = open_and_select(&mut terminal, &mut app).await;
    assert!(screen.contains("→ fake (t1)"), "{screen}");
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Char('s'))],
        vec![],
    )
    .await;
    let screen = text(&terminal);
    assert!(screen.contains("1 finding sent to t1"), "{screen}");
    assert!(!screen.contains("findings · review b9"), "closed: {screen}");
    let prompt = next_prompt(&mut terminal, &mut app, &mut ev_rx, 0).await;
    assert!(
        prompt.contains("your branch `quorum/t1-write-it`"),
        "{prompt}"
    );
    assert!(
        prompt.contains("## 1. lib.rs:2 (red): added() is never called"),
        "{prompt}"
    );
    assert!(
        prompt.contains("Found by alpha, beta · 2 of 2."),
        "{prompt}"
    );
    assert!(prompt.contains(QUOTED), "{prompt}");
    assert!(!prompt.contains("other() needs a doc"), "{prompt}");
    // The word on what was sent goes at the next key.
    drive(&mut terminal, &mut app, vec![key(KeyCode::PageUp)], vec![]).await;
    let screen = text(&terminal);
    assert!(!screen.contains("1 finding sent to t1"), "{screen}");
}

/// A foreground writer (`@NAME+`, a best-of-N writer: no task id) is
/// named by its call, `c1`, which `/msg` takes: the view sends to it, not
/// to an agent the person must name.
#[tokio::test]
async fn a_foreground_writer_is_sent_to_by_its_calls_name() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) =
        live_session(dir.path(), ECHO, None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(100, 40)).unwrap();
    drive(&mut terminal, &mut app, line("@fake write it"), vec![]).await;
    let Event::SubagentStarted { call_id, .. } =
        until_event(&mut terminal, &mut app, &mut ev_rx, |e| {
            matches!(e, Event::SubagentStarted { .. })
        })
        .await
    else {
        unreachable!()
    };
    next_prompt(&mut terminal, &mut app, &mut ev_rx, 0).await;
    let label = call_id.replace("call-", "c");
    let mut events = vec![Stamped {
        t: 1,
        event: Event::WorktreeReady {
            call_id,
            task_id: None,
            branch: "quorum/c1-write-it".into(),
            path: dir.path().display().to_string(),
            base: "head".into(),
            base_commit: "abc".into(),
        },
    }];
    events.extend(quorum_events(Some("quorum/c1-write-it")));
    drive(&mut terminal, &mut app, vec![], events).await;
    let screen = open_and_select(&mut terminal, &mut app).await;
    assert!(screen.contains(&format!("→ fake ({label})")), "{screen}");
    drive(
        &mut terminal,
        &mut app,
        vec![key(KeyCode::Char('s'))],
        vec![],
    )
    .await;
    let Event::UserMessage { text: sent } = until_event(
        &mut terminal,
        &mut app,
        &mut ev_rx,
        |e| matches!(e, Event::UserMessage { text } if text.starts_with("/msg")),
    )
    .await
    else {
        unreachable!()
    };
    assert!(sent.starts_with(&format!("/msg {label} ")), "{sent}");
    assert!(sent.contains(QUOTED), "{sent}");
}

#[tokio::test]
async fn in_your_own_tree_the_follow_up_goes_to_the_agent_you_name() {
    let dir = tempfile::tempdir().unwrap();
    let (_session, mut app, mut ev_rx) =
        live_session(dir.path(), ECHO, None, Permissions::Ask, None);
    let mut terminal = Terminal::new(TestBackend::new(100, 40)).unwrap();
    until(&mut terminal, &mut app, &mut ev_rx, |s| s.contains("fake")).await;
    drive(&mut terminal, &mut app, vec![], quorum_events(None)).await;
    open_and_select(&mut terminal, &mut app).await;
    // A comment on the line under the cursor, then send: the agent is
    // asked for, the first one offered.
    let mut keys = vec![key(KeyCode::Char('c'))];
    keys.extend(line("rename it"));
    keys.push(key(KeyCode::Char('s')));
    drive(&mut terminal, &mut app, keys, vec![]).await;
    let screen = text(&terminal);
    assert!(screen.contains("✎ you: rename it"), "{screen}");
    assert!(screen.contains("send to: @fake"), "{screen}");
    drive(&mut terminal, &mut app, vec![key(KeyCode::Enter)], vec![]).await;
    let prompt = next_prompt(&mut terminal, &mut app, &mut ev_rx, 0).await;
    assert!(prompt.contains("A review of the change found"), "{prompt}");
    assert!(prompt.contains(QUOTED), "{prompt}");
    assert!(
        prompt.contains("## 2. lib.rs:2 (a comment from the person)"),
        "{prompt}"
    );
    assert!(prompt.contains("rename it"), "{prompt}");
}
