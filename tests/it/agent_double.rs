//! The dispatcher on a test double of the agent interface: a stub agent
//! that scripts its turns by their prompt, set in as the internal agent.
//! What a caller relies on is checked without any agent process: the
//! reply, the events of the call's box, the session the agent keeps, and
//! cancels and permission answers reaching the agent's turn.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use quorum::acp::registry::Registry;
use quorum::agent::{Agent, PermissionAnswer, Permissions, TurnControl, TurnInput, TurnSink};
use quorum::confine::fsroot::Root;
use quorum::event::{
    Activity, AgentRef, Event, Outcome, SessionKind, Severity, Stamped, StopReason,
};
use quorum::runtime::bus::Emitter;
use quorum::runtime::supervisor::Supervisor;
use quorum::subagent::dispatch::{Dispatcher, Reply};
use quorum::subagent::input::{REVIEW_CONTRACT, SubAgentCallInput};
use quorum::subagent::picks::ModelPicks;
use tokio::sync::mpsc;

/// What one turn was given.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    prompt: String,
    resume: Option<String>,
    depth: u32,
    exclude: Option<String>,
}

/// A stub agent. Its turns, by prompt: `wait` waits for a cancel (and
/// says so on `cancels`), then for the kill; `ask` asks for permission
/// and reports the answer; `review` gives a yellow review; anything else
/// opens session `s1` and answers `did: PROMPT`.
struct Stub {
    keeps_sessions: bool,
    seen: Mutex<Vec<Seen>>,
    cancels: mpsc::UnboundedSender<()>,
}

impl Agent for Stub {
    fn turn<'a>(
        &'a self,
        input: TurnInput<'a>,
        sink: &'a dyn TurnSink,
        control: &'a mut TurnControl,
    ) -> BoxFuture<'a, Outcome> {
        self.seen.lock().unwrap().push(Seen {
            prompt: input.prompt.to_string(),
            resume: input.resume.map(str::to_string),
            depth: input.depth,
            exclude: input.exclude.map(|e| e.pattern().to_string()),
        });
        async move {
            match input.prompt {
                "wait" => {
                    while !*control.cancel.borrow_and_update() {
                        control.cancel.changed().await.unwrap();
                    }
                    self.cancels.send(()).unwrap();
                    while !*control.kill.borrow_and_update() {
                        control.kill.changed().await.unwrap();
                    }
                    Outcome::new(StopReason::Cancelled, "killed")
                }
                "ask" => {
                    sink.activity(Activity::PermissionRequest {
                        id: "p1".into(),
                        title: "Delete build/".into(),
                        options: vec!["Allow".into(), "Reject".into()],
                        detail: Default::default(),
                    });
                    let answer = control.answers.recv().await.unwrap();
                    Outcome::new(
                        StopReason::EndTurn,
                        format!("{}: {:?}", answer.request_id, answer.option),
                    )
                }
                prompt if prompt.starts_with("review") => {
                    Outcome::new(StopReason::EndTurn, "<!-- severity: yellow -->\nNits.")
                }
                prompt => {
                    sink.session(SessionKind::Fresh, "s1");
                    sink.activity(Activity::MessageChunk {
                        text: "working\n".into(),
                    });
                    let mut outcome = Outcome::new(StopReason::EndTurn, format!("did: {prompt}"));
                    outcome.session = Some(SessionKind::Fresh);
                    outcome.session_id = Some("s1".into());
                    outcome
                }
            }
        }
        .boxed()
    }

    fn keeps_sessions(&self) -> bool {
        self.keeps_sessions
    }
}

struct Rig {
    dispatcher: Arc<Dispatcher>,
    stub: Arc<Stub>,
    events: mpsc::UnboundedReceiver<Stamped>,
    completions: mpsc::UnboundedReceiver<String>,
    cancels: mpsc::UnboundedReceiver<()>,
    _dir: tempfile::TempDir,
}

/// A dispatcher with no ACP agents and the stub as its internal agent;
/// permission requests are refused (as `--approve none` does).
fn rig(keeps_sessions: bool) -> Rig {
    rig_with(keeps_sessions, Permissions::Deny)
}

/// [`rig`] with `permissions` for the session's permission requests.
fn rig_with(keeps_sessions: bool, permissions: Permissions) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let (emitter, events) = Emitter::channel(Instant::now());
    let (dispatcher, completions) = Dispatcher::new(
        Arc::new(Registry::builtin()),
        Root::new(dir.path()).unwrap(),
        emitter,
        permissions,
        Supervisor::new(),
        ModelPicks::load(None),
        4,
    );
    let (cancels_tx, cancels) = mpsc::unbounded_channel();
    let stub = Arc::new(Stub {
        keeps_sessions,
        seen: Mutex::default(),
        cancels: cancels_tx,
    });
    dispatcher.set_internal(stub.clone());
    Rig {
        dispatcher,
        stub,
        events,
        completions,
        cancels,
        _dir: dir,
    }
}

fn call(text: &str) -> SubAgentCallInput {
    SubAgentCallInput {
        input: Some(text.into()),
        ..Default::default()
    }
}

impl Rig {
    async fn done(&self, input: SubAgentCallInput) -> Outcome {
        let reply = tokio::time::timeout(Duration::from_secs(10), self.dispatcher.call(input))
            .await
            .expect("the call ends")
            .expect("the call runs");
        match reply {
            Reply::Done(outcome) => outcome,
            other => panic!("a foreground call: {other:?}"),
        }
    }

    /// Events up to (and including) the first that matches `f`, the
    /// board's snapshots left out.
    async fn until(&mut self, f: impl Fn(&Event) -> bool) -> Vec<Event> {
        let progress = |e: &Event| matches!(e, Event::TaskProgress { .. });
        crate::common::events::until(&mut self.events, |e| !progress(e) && f(e))
            .await
            .into_iter()
            .map(|s| s.event)
            .filter(|e| !progress(e))
            .collect()
    }

    fn seen(&self) -> Vec<Seen> {
        self.stub.seen.lock().unwrap().clone()
    }
}

#[tokio::test]
async fn a_call_returns_the_agents_report_and_its_box_shows_what_it_did() {
    let mut r = rig(true);
    let outcome = r
        .done(SubAgentCallInput {
            exclude_files_pattern: Some(r"\.env$".into()),
            ..call("look around")
        })
        .await;
    assert_eq!(
        (outcome.output.as_str(), outcome.stop_reason),
        ("did: look around", StopReason::EndTurn)
    );
    assert_eq!(
        Reply::Done(outcome).to_json(),
        serde_json::json!({"output": "did: look around", "stop_reason": "end_turn"})
    );
    let events = r
        .until(|e| matches!(e, Event::SubagentFinished { .. }))
        .await;
    let call_id = match &events[0] {
        Event::SubagentStarted {
            call_id,
            agent,
            input,
            background,
            task_id,
            ..
        } => {
            assert_eq!(
                (agent, input.as_str(), *background, task_id),
                (&AgentRef::Internal, "look around", false, &None)
            );
            call_id.clone()
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(
        &events[1..],
        [
            Event::SubagentSession {
                call_id: call_id.clone(),
                session: SessionKind::Fresh,
                session_id: Some("s1".into()),
            },
            Event::SubagentActivity {
                call_id: call_id.clone(),
                activity: Activity::MessageChunk {
                    text: "working\n".into()
                },
            },
            Event::SubagentFinished {
                call_id,
                output: "did: look around".into(),
                stop_reason: StopReason::EndTurn,
                severity: None,
                findings: Vec::new(),
            },
        ]
    );
    // The agent got the message, at depth 1 (a call of the main chat),
    // with the paths it may not read.
    assert_eq!(
        r.seen(),
        [Seen {
            prompt: "look around".into(),
            resume: None,
            depth: 1,
            exclude: Some(r"\.env$".into()),
        }]
    );
}

#[tokio::test]
async fn a_review_gets_the_contract_and_its_box_the_verdict() {
    let mut r = rig(false);
    let outcome = r
        .done(SubAgentCallInput {
            code_review: true,
            ..call("review this")
        })
        .await;
    assert_eq!(outcome.severity, Some(Severity::Yellow));
    assert_eq!(r.seen()[0].prompt, format!("review this{REVIEW_CONTRACT}"));
    let events = r
        .until(|e| matches!(e, Event::SubagentFinished { .. }))
        .await;
    assert!(
        matches!(
            events.last(),
            Some(Event::SubagentFinished { output, severity: Some(Severity::Yellow), .. })
                if output == "Nits."
        ),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_session_the_agent_keeps_is_resumed_and_one_it_does_not_is_not() {
    let r = rig(true);
    r.done(call("one")).await;
    r.done(call("two")).await;
    // The last message is sent again when `input` is left out.
    r.done(SubAgentCallInput::default()).await;
    let resumed: Vec<(String, Option<String>)> =
        r.seen().into_iter().map(|s| (s.prompt, s.resume)).collect();
    assert_eq!(
        resumed,
        [
            ("one".to_string(), None),
            ("two".to_string(), Some("s1".to_string())),
            ("two".to_string(), Some("s1".to_string())),
        ]
    );
    assert_eq!(
        r.dispatcher.stored_session("internal").as_deref(),
        Some("s1")
    );
    let r = rig(false);
    r.done(call("one")).await;
    r.done(call("two")).await;
    assert!(
        r.seen().iter().all(|s| s.resume.is_none()),
        "{:?}",
        r.seen()
    );
}

#[tokio::test]
async fn cancel_reaches_the_agent_and_a_second_cancel_ends_it() {
    let mut r = rig(false);
    let reply = r
        .dispatcher
        .call(SubAgentCallInput {
            run_in_background: true,
            ..call("wait")
        })
        .await
        .unwrap();
    let Reply::Started { task_id, call_id } = &reply else {
        panic!("{reply:?}")
    };
    assert_eq!(
        reply.to_json(),
        serde_json::json!({"task_id": task_id, "status": "running"})
    );
    r.until(|e| matches!(e, Event::SubagentStarted { .. }))
        .await;
    // Once its turn runs, a cancel by task id reaches it, and its box says
    // that it is stopping.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while r.seen().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the stub's turn never started"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(r.dispatcher.busy());
    assert!(r.dispatcher.cancel(task_id));
    tokio::time::timeout(Duration::from_secs(10), r.cancels.recv())
        .await
        .expect("the cancel reaches the agent");
    r.until(|e| matches!(e, Event::SubagentCancelling { call_id: c } if c == call_id))
        .await;
    // The agent waits for the kill: the second cancel.
    assert!(r.dispatcher.cancel(task_id));
    let done = tokio::time::timeout(Duration::from_secs(10), r.completions.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&done, task_id);
    let events = r
        .until(|e| matches!(e, Event::SubagentFinished { .. }))
        .await;
    assert!(
        matches!(
            events.last(),
            Some(Event::SubagentFinished { output, stop_reason: StopReason::Cancelled, .. })
                if output == "killed"
        ),
        "{events:?}"
    );
    assert!(!r.dispatcher.busy());
    assert!(!r.dispatcher.cancel(task_id), "nothing runs any more");
}

#[tokio::test]
async fn a_permission_answer_reaches_the_agents_turn() {
    // The person is asked (as in the TUI): their answer reaches the turn.
    let mut r = rig_with(false, Permissions::Ask);
    let d = r.dispatcher.clone();
    let running = tokio::spawn(async move { d.call(call("ask")).await });
    let events = r
        .until(|e| {
            matches!(
                e,
                Event::SubagentActivity {
                    activity: Activity::PermissionRequest { .. },
                    ..
                }
            )
        })
        .await;
    let Event::SubagentStarted { call_id, .. } = &events[0] else {
        panic!("{events:?}")
    };
    assert!(r.dispatcher.answer(
        call_id,
        PermissionAnswer {
            request_id: "p1".into(),
            option: Some(1),
        }
    ));
    let reply = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let Reply::Done(outcome) = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(outcome.output, "p1: Some(1)");
    assert!(
        !r.dispatcher.answer(
            call_id,
            PermissionAnswer {
                request_id: "p1".into(),
                option: None,
            }
        ),
        "the call is over"
    );
}
