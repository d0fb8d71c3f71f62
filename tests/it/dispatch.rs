//! The dispatcher against the fake ACP agent: each scenario checks the
//! output, stop reason, verdict, session kind and the events recorded.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quorum::acp::registry::Registry;
use quorum::agent::PermissionAnswer;
use quorum::agent::Permissions;
use quorum::confine::fsroot::Root;
use quorum::engine::{Session, SessionConfig};
use quorum::event::{
    Activity, AgentRef, Event, Outcome, SessionKind, Severity, Stamped, StopReason, TaskState,
};
use quorum::subagent::dispatch::{DispatchError, Dispatcher, Reply};
use quorum::subagent::input::SubAgentCallInput;
use tokio::sync::mpsc;

struct Rig {
    dir: tempfile::TempDir,
    dispatcher: Arc<Dispatcher>,
    events: mpsc::UnboundedReceiver<Stamped>,
    completions: mpsc::UnboundedReceiver<String>,
    _session: Session,
    _config: tempfile::NamedTempFile,
    _store: tempfile::TempDir,
}

fn rig(approval: Permissions) -> Rig {
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    // Where `fake-load-store` keeps its sessions, for its later processes.
    let store_dir = tempfile::tempdir().unwrap();
    let store = store_dir.path().display().to_string();
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        format!(
            "[agents.fake]\ncommand = {fake:?}\n\n\
             [agents.fake-load]\ncommand = {fake:?}\nargs = [\"--no-resume\"]\n\n\
             [agents.fake-load-store]\ncommand = {fake:?}\nargs = [\"--no-resume\", \"--store\", {store:?}]\n\n\
             [agents.fake-plain]\ncommand = {fake:?}\nargs = [\"--no-load\", \"--no-resume\"]\n\n\
             [agents.fake-allow]\ncommand = {fake:?}\npermissions = \"allow\"\n\n\
             [agents.fake-hang]\ncommand = {fake:?}\nargs = [\"--hang-initialize\"]\nstartup_timeout = 0.5\n\n\
             [agents.fake-stuck]\ncommand = {fake:?}\nargs = [\"--hang-initialize\"]\n"
        ),
    )
    .unwrap();
    let registry = Registry::load_only(config.path()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("inside.txt"), "inside content").unwrap();
    let root = Root::new(dir.path()).unwrap();
    let mut config_ = SessionConfig::new(registry, root);
    config_.permissions = approval;
    let (mut session, mut events) = Session::start(config_, Instant::now()).unwrap();
    // The session's first event says what it runs with.
    assert!(matches!(
        events.try_recv().unwrap().event,
        Event::SessionInfo { .. }
    ));
    let completions = session.take_completions().unwrap();
    Rig {
        dir,
        dispatcher: session.dispatcher().clone(),
        events,
        completions,
        _session: session,
        _config: config,
        _store: store_dir,
    }
}

fn input(agent: &str, text: &str) -> SubAgentCallInput {
    SubAgentCallInput {
        agent: Some(agent.into()),
        input: Some(text.into()),
        ..Default::default()
    }
}

impl Rig {
    async fn call(&mut self, call: SubAgentCallInput) -> (Outcome, Vec<Event>) {
        let reply = tokio::time::timeout(Duration::from_secs(60), self.dispatcher.call(call))
            .await
            .expect("the call ends")
            .expect("the call runs");
        let Reply::Done(outcome) = reply else {
            panic!("foreground call: {reply:?}")
        };
        (outcome, self.drain())
    }

    fn drain(&mut self) -> Vec<Event> {
        let mut out = Vec::new();
        while let Ok(e) = self.events.try_recv() {
            out.push(e.event);
        }
        out
    }
}

/// A call running in its own task.
struct Running {
    task: tokio::task::JoinHandle<Result<Reply, DispatchError>>,
    call_id: String,
}

impl Running {
    async fn outcome(self) -> Outcome {
        match self.task.await.unwrap().unwrap() {
            Reply::Done(o) => o,
            other => panic!("foreground call: {other:?}"),
        }
    }
}

impl Rig {
    /// Starts a call in its own task and waits until an event matches
    /// `until`; returns the call and the events seen so far.
    async fn start(
        &mut self,
        call: SubAgentCallInput,
        until: fn(&Event) -> bool,
    ) -> (Running, Vec<Event>) {
        let d = self.dispatcher.clone();
        let task = tokio::spawn(async move { d.call(call).await });
        let mut seen = Vec::new();
        wait_for(&mut self.events, &mut seen, until).await;
        let call_id = match &seen[0] {
            Event::SubagentStarted { call_id, .. } => call_id.clone(),
            other => panic!("{other:?}"),
        };
        (Running { task, call_id }, seen)
    }
}

/// The agent asks for permission.
fn asking(e: &Event) -> bool {
    matches!(
        e,
        Event::SubagentActivity {
            activity: Activity::PermissionRequest { .. },
            ..
        }
    )
}

/// The agent has started writing.
fn streaming(e: &Event) -> bool {
    matches!(
        e,
        Event::SubagentActivity {
            activity: Activity::MessageChunk { .. },
            ..
        }
    )
}

fn chunks(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentActivity {
                activity: Activity::MessageChunk { text },
                ..
            } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn session_kinds(events: &[Event]) -> Vec<SessionKind> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentSession { session, .. } => Some(*session),
            _ => None,
        })
        .collect()
}

fn finished(events: &[Event]) -> (&str, StopReason, Option<Severity>) {
    events
        .iter()
        .find_map(|e| match e {
            Event::SubagentFinished {
                output,
                stop_reason,
                severity,
                ..
            } => Some((output.as_str(), *stop_reason, *severity)),
            _ => None,
        })
        .expect("a finished event")
}

/// What calls' boxes were told (`Activity::Notice`).
fn box_notices(events: &[Event]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentActivity {
                activity: Activity::Notice { text },
                ..
            } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn notices(events: &[Event]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Notice { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn streamed_text_in_a_fresh_session() {
    let mut r = rig(Permissions::Deny);
    let (o, events) = r.call(input("fake", "echo hello there, world")).await;
    assert_eq!(o.output, "hello there, world");
    assert_eq!(o.stop_reason, StopReason::EndTurn);
    assert_eq!(o.severity, None);
    assert_eq!(o.session, Some(SessionKind::Fresh));
    assert!(
        matches!(&events[0], Event::SubagentStarted { agent: AgentRef::Acp(a), code_review: false, background: false, .. } if a == "fake")
    );
    assert_eq!(session_kinds(&events), [SessionKind::Fresh]);
    assert_eq!(chunks(&events), "hello there, world");
    let n_chunks = events
        .iter()
        .filter(|e| matches!(e, Event::SubagentActivity { .. }))
        .count();
    assert_eq!(n_chunks, 3, "streamed as it came");
    assert_eq!(
        finished(&events),
        ("hello there, world", StopReason::EndTurn, None)
    );
}

#[tokio::test]
async fn only_the_text_after_the_last_tool_call_is_the_output() {
    let mut r = rig(Permissions::Deny);
    let (o, events) = r.call(input("fake", "tools")).await;
    assert_eq!(o.output, "Final answer.");
    assert_eq!(o.stop_reason, StopReason::EndTurn);
    let tools: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentActivity {
                activity: Activity::ToolCall { title, .. },
                ..
            } => Some(title.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(tools, ["Read README.md", "Search \"fn main\""]);
    // All the text still streamed into the box.
    assert_eq!(chunks(&events), "Let me look.Still looking.Final answer.");
}

#[tokio::test]
async fn reviews_carry_their_verdict() {
    let mut r = rig(Permissions::Deny);
    for (word, severity) in [
        ("green", Severity::Green),
        ("yellow", Severity::Yellow),
        ("red", Severity::Red),
    ] {
        let mut call = input("fake", &format!("review {word}"));
        call.code_review = true;
        let (o, events) = r.call(call).await;
        assert_eq!(o.severity, Some(severity), "{word}");
        assert_eq!(
            o.output,
            format!("<!-- severity: {word} -->\n## Review\nLooks {word}."),
            "the model sees the report as written"
        );
        assert_eq!(
            finished(&events),
            (
                format!("## Review\nLooks {word}.").as_str(),
                StopReason::EndTurn,
                Some(severity)
            ),
            "the box shows it stripped"
        );
        assert!(matches!(
            &events[0],
            Event::SubagentStarted {
                code_review: true,
                ..
            }
        ));
    }
    // An unknown value: no verdict, and a notice.
    let mut call = input("fake", "review purple");
    call.code_review = true;
    let (o, events) = r.call(call).await;
    assert_eq!(o.severity, None);
    assert!(
        notices(&events)
            .iter()
            .any(|n| n.contains("unknown review severity \"purple\"")),
        "{events:#?}"
    );
}

#[tokio::test]
async fn plans_stream_into_the_box() {
    let mut r = rig(Permissions::Deny);
    let (o, events) = r.call(input("fake", "plan")).await;
    assert_eq!(o.output, "planned");
    let plan = events.iter().find_map(|e| match e {
        Event::SubagentActivity {
            activity: Activity::Plan { entries },
            ..
        } => Some(entries.len()),
        _ => None,
    });
    assert_eq!(plan, Some(3));
}

fn permission_events(events: &[Event]) -> (Vec<Vec<String>>, Vec<String>) {
    let mut asked = Vec::new();
    let mut resolved = Vec::new();
    for e in events {
        match e {
            Event::SubagentActivity {
                activity: Activity::PermissionRequest { options, .. },
                ..
            } => asked.push(options.clone()),
            Event::SubagentActivity {
                activity: Activity::PermissionResolved { outcome, .. },
                ..
            } => resolved.push(outcome.clone()),
            _ => {}
        }
    }
    (asked, resolved)
}

#[tokio::test]
async fn permission_follows_the_policy() {
    let mut r = rig(Permissions::Allow);
    let (o, events) = r.call(input("fake", "permission")).await;
    assert_eq!(
        (o.output.as_str(), o.stop_reason.as_str()),
        ("permitted", "end_turn")
    );
    let (asked, resolved) = permission_events(&events);
    assert_eq!(
        asked,
        [vec![
            "Allow once".to_string(),
            "Allow always".into(),
            "Reject".into()
        ]]
    );
    assert_eq!(resolved, ["Allow once (by policy)"]);

    let mut r = rig(Permissions::Deny);
    let (o, events) = r.call(input("fake", "permission")).await;
    assert_eq!(o.output, "denied");
    assert_eq!(permission_events(&events).1, ["Reject (by policy)"]);
    // An agent configured `allow` is allowed even under --approve none.
    let (o, _) = r.call(input("fake-allow", "permission")).await;
    assert_eq!(o.output, "permitted");
}

/// Waits for the event matching `f`, collecting everything seen.
async fn wait_for(
    rx: &mut mpsc::UnboundedReceiver<Stamped>,
    seen: &mut Vec<Event>,
    f: impl Fn(&Event) -> bool,
) {
    loop {
        let e = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("in time")
            .expect("open");
        let hit = f(&e.event);
        seen.push(e.event);
        if hit {
            return;
        }
    }
}

#[tokio::test]
async fn interactive_permission_is_answered_by_the_person() {
    let mut r = rig(Permissions::Ask);
    let (call, mut seen) = r.start(input("fake", "permission"), asking).await;
    let call_id = call.call_id.clone();
    // The person picks the third option, "Reject".
    assert!(r.dispatcher.answer(
        &call_id,
        PermissionAnswer {
            request_id: "p1".into(),
            option: Some(2)
        }
    ));
    let o = call.outcome().await;
    assert_eq!(
        (o.output.as_str(), o.stop_reason.as_str()),
        ("denied", "end_turn")
    );
    seen.extend(r.drain());
    assert_eq!(permission_events(&seen).1, ["Reject"]);
}

#[tokio::test]
async fn cancel_while_asking_answers_cancelled() {
    let mut r = rig(Permissions::Ask);
    let (call, mut seen) = r.start(input("fake", "permission"), asking).await;
    let call_id = call.call_id.clone();
    assert!(r.dispatcher.cancel(&call_id));
    let o = call.outcome().await;
    assert_eq!(o.stop_reason, StopReason::Cancelled);
    seen.extend(r.drain());
    assert_eq!(permission_events(&seen).1, ["cancelled"]);
    assert_eq!(finished(&seen).1, StopReason::Cancelled);
}

#[tokio::test]
async fn a_slow_turn_is_cancelled() {
    let mut r = rig(Permissions::Deny);
    let started = Instant::now();
    let (call, _) = r.start(input("fake", "slow 30"), streaming).await;
    let call_id = call.call_id.clone();
    assert!(r.dispatcher.cancel(&call_id));
    let o = call.outcome().await;
    assert_eq!(o.stop_reason, StopReason::Cancelled);
    assert_eq!(o.output, "working");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "cancelled, not waited out"
    );
    assert!(!r.dispatcher.cancel(&call_id), "nothing left to cancel");
}

#[tokio::test]
async fn file_access_is_confined_to_the_session_directory() {
    let mut r = rig(Permissions::Deny);
    let root = r.dir.path().canonicalize().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();

    let (o, _) = r
        .call(input(
            "fake",
            &format!("read {}", root.join("inside.txt").display()),
        ))
        .await;
    assert_eq!(o.output, "read: inside content");

    let secret = outside.path().join("secret.txt");
    let dotdot = root
        .join("..")
        .join(outside.path().file_name().unwrap())
        .join("secret.txt");
    #[cfg(unix)]
    std::os::unix::fs::symlink(outside.path(), root.join("link")).unwrap();
    let via_link = root.join("link/secret.txt");
    for path in [&secret, &dotdot, &via_link] {
        let (o, events) = r
            .call(input("fake", &format!("read {}", path.display())))
            .await;
        assert!(
            o.output.starts_with("read failed: "),
            "{path:?}: {}",
            o.output
        );
        assert!(
            o.output.contains("outside the session directory"),
            "{}",
            o.output
        );
        assert!(
            box_notices(&events)
                .iter()
                .any(|n| n.starts_with("refused to read")),
            "{events:#?}"
        );
    }

    let (o, _) = r
        .call(input(
            "fake",
            &format!("write {} fresh words", root.join("new/file.txt").display()),
        ))
        .await;
    assert_eq!(o.output, "wrote");
    assert_eq!(
        std::fs::read_to_string(root.join("new/file.txt")).unwrap(),
        "fresh words"
    );
    for path in [
        outside.path().join("planted.txt"),
        root.join("link/planted.txt"),
    ] {
        let (o, events) = r
            .call(input("fake", &format!("write {} x", path.display())))
            .await;
        assert!(o.output.starts_with("write failed: "), "{}", o.output);
        assert!(
            box_notices(&events)
                .iter()
                .any(|n| n.starts_with("refused to write"))
        );
    }
    assert!(!outside.path().join("planted.txt").exists());
}

#[tokio::test]
async fn a_second_call_continues_the_open_session_and_fresh_on_request() {
    let mut r = rig(Permissions::Deny);
    let (a, _) = r.call(input("fake", "turns")).await;
    assert_eq!(
        (a.output.as_str(), a.session),
        ("turns: 1", Some(SessionKind::Fresh))
    );
    // Still open on the agent's connection: prompted as it is.
    let (b, events) = r.call(input("fake", "turns")).await;
    assert_eq!(
        (b.output.as_str(), b.session),
        ("turns: 2", Some(SessionKind::Continued))
    );
    assert_eq!(b.session_id, a.session_id);
    assert_eq!(session_kinds(&events), [SessionKind::Continued]);
    let mut fresh = input("fake", "turns");
    fresh.continue_session = false;
    let (c, _) = r.call(fresh).await;
    assert_eq!(
        (c.output.as_str(), c.session),
        ("turns: 1", Some(SessionKind::Fresh))
    );
    assert_ne!(c.session_id, a.session_id);
}

#[tokio::test]
async fn load_when_resume_is_not_offered_and_replay_is_not_shown() {
    let mut r = rig(Permissions::Deny);
    let (a, _) = r.call(input("fake-load-store", "echo first")).await;
    // The agent dies in a turn on the open session...
    let (c, _) = r.call(input("fake-load-store", "crash")).await;
    assert_eq!(
        (c.session, c.stop_reason),
        (Some(SessionKind::Continued), StopReason::Error)
    );
    // ...so the next call starts it again, and loads the stored session
    // on the new process.
    let (b, events) = r.call(input("fake-load-store", "turns")).await;
    assert_eq!(b.session, Some(SessionKind::Loaded));
    assert_eq!(b.session_id, a.session_id);
    assert_eq!(b.output, "turns: 2");
    assert_eq!(
        chunks(&events),
        "turns: 2",
        "the replayed history is not new activity"
    );
}

#[tokio::test]
async fn without_load_or_resume_a_session_lasts_as_long_as_its_agent() {
    let mut r = rig(Permissions::Deny);
    let (a, _) = r.call(input("fake-plain", "turns")).await;
    assert_eq!(a.session, Some(SessionKind::Fresh));
    // Open on the live connection, it needs neither.
    let (b, _) = r.call(input("fake-plain", "turns")).await;
    assert_eq!(
        (b.output.as_str(), b.session),
        ("turns: 2", Some(SessionKind::Continued))
    );
    assert_eq!(a.session_id, b.session_id);
    // A restarted agent cannot reopen it: a fresh session.
    r.call(input("fake-plain", "crash")).await;
    let (d, _) = r.call(input("fake-plain", "turns")).await;
    assert_eq!(
        (d.output.as_str(), d.session),
        ("turns: 1", Some(SessionKind::Fresh))
    );
    assert_ne!(a.session_id, d.session_id);
}

#[tokio::test]
async fn a_crash_mid_turn_is_an_error_keeps_the_older_session_and_heals() {
    let mut r = rig(Permissions::Deny);
    let (a, _) = r.call(input("fake", "turns")).await;
    // A crash in a new session: the turn fails...
    let mut crash = input("fake", "crash");
    crash.continue_session = false;
    let (c, events) = r.call(crash).await;
    assert_eq!(c.stop_reason, StopReason::Error);
    assert!(c.output.contains("exited during the turn"), "{}", c.output);
    assert!(c.output.contains("code 3"), "{}", c.output);
    assert_eq!(finished(&events).1, StopReason::Error);
    // ...and the older session id is kept.
    assert_eq!(r.dispatcher.stored_session("fake"), a.session_id);
    // The next call starts the agent again; the old id is stale there, so
    // a new session opens and the box says so.
    let (d, events) = r.call(input("fake", "turns")).await;
    assert_eq!(d.stop_reason, StopReason::EndTurn);
    assert_eq!(d.session, Some(SessionKind::NewAfterStale));
    assert_eq!(d.output, "turns: 1");
    let notes = notices(&events);
    assert!(notes.iter().any(|n| n.contains("had exited")), "{notes:?}");
    assert!(
        notes.iter().any(|n| n.contains("could not be reopened")),
        "{notes:?}"
    );
    assert_eq!(r.dispatcher.stored_session("fake"), d.session_id, "healed");
}

#[tokio::test]
async fn stale_load_heals_too() {
    let mut r = rig(Permissions::Deny);
    r.call(input("fake-load", "echo one")).await;
    let mut crash = input("fake-load", "crash");
    crash.continue_session = false;
    r.call(crash).await;
    let (o, _) = r.call(input("fake-load", "turns")).await;
    assert_eq!(o.session, Some(SessionKind::NewAfterStale));
    assert_eq!(o.output, "turns: 1");
}

#[tokio::test]
async fn other_stop_reasons_and_extensions() {
    let mut r = rig(Permissions::Deny);
    for reason in ["max_tokens", "max_turn_requests", "refusal"] {
        let (o, events) = r.call(input("fake", &format!("stop {reason}"))).await;
        assert_eq!(o.stop_reason.as_str(), reason);
        assert_eq!(finished(&events).1.as_str(), reason);
    }
    let (o, _) = r.call(input("fake", "ext")).await;
    assert_eq!(
        (o.output.as_str(), o.stop_reason.as_str()),
        ("ext ok", "end_turn")
    );
}

#[tokio::test]
async fn background_tasks_report_when_done() {
    let mut r = rig(Permissions::Deny);
    let mut call = input("fake", "slow 1");
    call.run_in_background = true;
    call.code_review = false;
    let reply = r.dispatcher.call(call).await.unwrap();
    let Reply::Started { task_id, .. } = &reply else {
        panic!("{reply:?}")
    };
    assert_eq!(
        reply.to_json(),
        serde_json::json!({ "task_id": task_id, "status": "running" })
    );
    let status = r.dispatcher.status(Some(task_id)).unwrap().to_json();
    assert_eq!(status["state"], "running");
    let done = tokio::time::timeout(Duration::from_secs(30), r.completions.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&done, task_id);
    let status = r.dispatcher.status(Some(task_id)).unwrap().to_json();
    assert_eq!(status["state"], "done");
    assert_eq!(status["output"], "working done");
    let all = r.dispatcher.status(None).unwrap().to_json();
    assert_eq!(all["tasks"].as_array().unwrap().len(), 1);
    let events = r.drain();
    assert!(
        matches!(&events[0], Event::SubagentStarted { task_id: Some(t), background: true, .. } if t == task_id)
    );
    assert_eq!(task_id, "t1", "background task ids count background tasks");
    assert!(
        events.iter().any(|e| matches!(e, Event::SubagentFinished { output, stop_reason: StopReason::EndTurn, .. } if output == "working done"))
    );
    // The board's snapshots follow the task to its end.
    assert!(events.iter().any(|e| matches!(e, Event::TaskProgress { task_id: Some(t), summary, .. } if t == task_id && summary.state == TaskState::Done)));
    match r.dispatcher.status(Some("t999")) {
        Err(DispatchError::UnknownTask(e)) => {
            assert_eq!(
                (e.id.as_str(), e.known.clone()),
                ("t999", vec![task_id.clone()])
            )
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn bad_calls_get_clear_errors() {
    let r = rig(Permissions::Deny);
    let err = r
        .dispatcher
        .call(input("nope", "hi"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("unknown agent \"nope\"; available: "),
        "{err}"
    );
    assert!(err.contains("fake"), "{err}");
    let err = r
        .dispatcher
        .call(SubAgentCallInput {
            agent: Some("fake".into()),
            ..Default::default()
        })
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("`input` must say what to do"), "{err}");
}

#[tokio::test]
async fn a_busy_session_is_not_taken_by_a_second_call() {
    let mut r = rig(Permissions::Deny);
    let (first, _) = r.call(input("fake", "turns")).await;
    // A long turn resumes the stored session...
    let (slow, _) = r.start(input("fake", "slow 2"), streaming).await;
    // ...so a call meanwhile opens its own, and says so.
    let (other, events) = r.call(input("fake", "turns")).await;
    assert_eq!(
        (other.output.as_str(), other.session),
        ("turns: 1", Some(SessionKind::Fresh))
    );
    assert_ne!(other.session_id, first.session_id);
    assert!(
        notices(&events)
            .iter()
            .any(|n| n.contains("is busy with another call")),
        "{events:#?}"
    );
    let s = slow.outcome().await;
    assert_eq!(
        (s.session, s.session_id),
        (Some(SessionKind::Continued), first.session_id)
    );
}

#[tokio::test]
async fn two_calls_started_together_do_not_share_a_session() {
    let mut r = rig(Permissions::Deny);
    let (first, _) = r.call(input("fake", "turns")).await;
    let (a, b) = tokio::join!(
        r.dispatcher.call(input("fake", "slow 1")),
        r.dispatcher.call(input("fake", "slow 1"))
    );
    let (Reply::Done(a), Reply::Done(b)) = (a.unwrap(), b.unwrap()) else {
        panic!()
    };
    let mut kinds = [a.session, b.session];
    kinds.sort_by_key(|k| format!("{k:?}"));
    assert_eq!(
        kinds,
        [Some(SessionKind::Continued), Some(SessionKind::Fresh)]
    );
    assert_ne!(a.session_id, b.session_id);
    assert!([&a.session_id, &b.session_id].contains(&&first.session_id));
}

#[tokio::test]
async fn permission_for_a_path_outside_the_session_directory_is_refused_whatever_the_policy() {
    let mut r = rig(Permissions::Allow);
    let outside = tempfile::tempdir().unwrap();
    let (o, events) = r
        .call(input(
            "fake",
            &format!("permission {}", outside.path().join("x").display()),
        ))
        .await;
    assert_eq!(o.output, "denied");
    let (asked, resolved) = permission_events(&events);
    assert_eq!(asked.len(), 1);
    assert!(
        resolved[0].starts_with("refused: ")
            && resolved[0].ends_with("is outside the session directory"),
        "{resolved:?}"
    );
    assert!(
        notices(&events)
            .iter()
            .any(|n| n.contains("outside the session directory"))
    );
    // Inside, the policy decides as usual.
    let inside = r.dir.path().join("build");
    let (o, _) = r
        .call(input("fake", &format!("permission {}", inside.display())))
        .await;
    assert_eq!(o.output, "permitted");
}

#[tokio::test]
async fn a_cancelled_turn_is_cancelled_even_if_the_agent_says_end_turn() {
    let mut r = rig(Permissions::Deny);
    let (call, _) = r.start(input("fake", "slow 30 end_turn"), streaming).await;
    let call_id = call.call_id.clone();
    assert!(r.dispatcher.cancel(&call_id));
    let o = call.outcome().await;
    assert_eq!(o.stop_reason, StopReason::Cancelled);
}

/// An agent that never answers `initialize` blocks nothing else: another
/// agent's call completes meanwhile, and the stuck start is cancelled like
/// a turn (Esc, `/cancel`, Ctrl+C all cancel the call).
#[tokio::test]
async fn a_stuck_start_blocks_no_one_and_is_cancellable() {
    let mut r = rig(Permissions::Deny);
    let (stuck, seen) = r
        .start(input("fake-stuck", "echo never"), |e| {
            matches!(e, Event::SubagentStarted { .. })
        })
        .await;
    assert_eq!(seen.len(), 1);
    // A second agent's call completes while the first is still starting.
    let (o, _) = r.call(input("fake", "echo meanwhile")).await;
    assert_eq!(
        (o.output.as_str(), o.stop_reason),
        ("meanwhile", StopReason::EndTurn)
    );
    assert!(!stuck.task.is_finished(), "still starting");
    // A second call to the stuck agent shares its start, and is cancelled
    // on its own.
    let (second, _) = r
        .start(input("fake-stuck", "echo again"), |e| {
            matches!(e, Event::SubagentStarted { .. })
        })
        .await;
    assert!(r.dispatcher.cancel(&second.call_id));
    let o = tokio::time::timeout(Duration::from_secs(10), second.outcome())
        .await
        .expect("a cancel ends a stuck start");
    assert_eq!(o.stop_reason, StopReason::Cancelled);
    assert_eq!(o.output, "fake-stuck: cancelled while starting");
    assert!(r.dispatcher.cancel(&stuck.call_id));
    let o = tokio::time::timeout(Duration::from_secs(10), stuck.outcome())
        .await
        .expect("a cancel ends a stuck start");
    assert_eq!(o.stop_reason, StopReason::Cancelled);
    let events = r.drain();
    assert!(
        events.iter().any(|e| matches!(
            e,
            Event::SubagentFinished {
                stop_reason: StopReason::Cancelled,
                ..
            }
        )),
        "the boxes close: {events:?}"
    );
}

/// `startup_timeout` ends a start that never answers, with an error naming
/// the agent and the step; the next call tries again.
#[tokio::test]
async fn startup_timeout_names_the_agent_and_the_step() {
    let mut r = rig(Permissions::Deny);
    for _ in 0..2 {
        let (o, events) = r.call(input("fake-hang", "echo never")).await;
        assert_eq!(o.stop_reason, StopReason::Error);
        assert_eq!(
            o.output,
            "fake-hang: no answer to initialize within 0.5 s (startup_timeout in its config)"
        );
        assert_eq!(finished(&events).1, StopReason::Error);
    }
}

/// Two calls to an agent that is not running yet share one start: one
/// process serves both (the fake agent's session ids carry its pid).
#[tokio::test]
async fn two_first_calls_share_one_agent_process() {
    let r = rig(Permissions::Deny);
    let (a, b) = tokio::join!(
        r.dispatcher.call(input("fake", "echo a")),
        r.dispatcher.call(input("fake", "echo b"))
    );
    let (Reply::Done(a), Reply::Done(b)) = (a.unwrap(), b.unwrap()) else {
        panic!()
    };
    let pid = |o: &Outcome| {
        let id = o.session_id.clone().expect("a session");
        id.split('-').nth(1).expect("fake-PID-N").to_string()
    };
    assert_ne!(a.session_id, b.session_id);
    assert_eq!(pid(&a), pid(&b), "{:?} {:?}", a.session_id, b.session_id);
}
