//! Steering running tasks through `subagent_status`: a follow-up message to
//! a running task and to a finished one (the fake agent's `turns` counts
//! the prompts of a session, so "turns: 2" proves the same session),
//! cancel, `wait_seconds`, and clear errors.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use quorum::acp::registry::Registry;
use quorum::agent::Permissions;
use quorum::agent::{Agent, PermissionAnswer, TurnControl, TurnInput, TurnSink};
use quorum::confine::fsroot::Root;
use quorum::engine::{Session, SessionConfig};
use quorum::event::{Activity, Event, Outcome, SessionKind, Stamped, StopReason};
use quorum::subagent::dispatch::{Dispatcher, Reply};
use quorum::subagent::input::{StatusInput, SubAgentCallInput};
use tokio::sync::mpsc;

struct Rig {
    dispatcher: Arc<Dispatcher>,
    events: mpsc::UnboundedReceiver<Stamped>,
    completions: mpsc::UnboundedReceiver<String>,
    _session: Session,
    _dir: tempfile::TempDir,
    _config: tempfile::NamedTempFile,
}

fn rig() -> Rig {
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        format!("[agents.fake]\ncommand = {fake:?}\n"),
    )
    .unwrap();
    let registry = Registry::load_only(config.path()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut session_config = SessionConfig::new(registry, Root::new(dir.path()).unwrap());
    session_config.permissions = Permissions::Ask;
    let (mut session, events) = Session::start(session_config, Instant::now()).unwrap();
    let completions = session.take_completions().unwrap();
    Rig {
        dispatcher: session.dispatcher().clone(),
        events,
        completions,
        _session: session,
        _dir: dir,
        _config: config,
    }
}

fn background(agent: Option<&str>, text: &str) -> SubAgentCallInput {
    SubAgentCallInput {
        agent: agent.map(Into::into),
        input: Some(text.into()),
        run_in_background: true,
        ..Default::default()
    }
}

fn status(task_id: &str) -> StatusInput {
    StatusInput {
        task_id: Some(task_id.into()),
        ..Default::default()
    }
}

impl Rig {
    async fn start(&self, call: SubAgentCallInput) -> (String, String) {
        match self.dispatcher.call(call).await.unwrap() {
            Reply::Started { task_id, call_id } => (task_id, call_id),
            other => panic!("{other:?}"),
        }
    }

    async fn completion(&mut self) -> String {
        tokio::time::timeout(Duration::from_secs(30), self.completions.recv())
            .await
            .expect("a completion in time")
            .expect("open")
    }

    /// Events up to (and including) the first that matches `f`.
    async fn until(&mut self, f: impl Fn(&Event) -> bool) -> Vec<Event> {
        crate::common::events::until(&mut self.events, f)
            .await
            .into_iter()
            .map(|s| s.event)
            .collect()
    }

    async fn steer(&self, input: StatusInput) -> serde_json::Value {
        tokio::time::timeout(Duration::from_secs(60), self.dispatcher.status_with(input))
            .await
            .expect("answers in time")
            .expect("no error")
            .to_json()
    }
}

fn outputs(events: &[Event]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentFinished { output, .. } => Some(output.as_str()),
            _ => None,
        })
        .collect()
}

fn session_ids(events: &[Event]) -> Vec<(SessionKind, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentSession {
                session,
                session_id,
                ..
            } => Some((*session, session_id.clone().unwrap_or_default())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_message_to_a_running_task_is_its_next_turn_on_the_same_session() {
    let mut r = rig();
    // The task waits for a permission answer: it is surely running.
    let (task, call) = r.start(background(Some("fake"), "permission")).await;
    let mut events = r
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
    let mut input = status(&task);
    input.message = Some("turns".into());
    let answer = r.steer(input).await;
    assert_eq!(answer["message"], "queued");
    assert_eq!(answer["state"], "running");
    r.dispatcher.answer(
        &call,
        PermissionAnswer {
            request_id: "p1".into(),
            option: Some(0),
        },
    );
    // The first turn ends, the follow-up runs as a new turn, and the task
    // reports once, after it.
    assert_eq!(r.completion().await, task);
    events.extend(
        r.until(
            |e| matches!(e, Event::SubagentFinished { output, .. } if output.starts_with("turns")),
        )
        .await,
    );
    assert_eq!(outputs(&events), ["permitted", "turns: 2"]);
    assert!(events.iter().any(
        |e| matches!(e, Event::SubagentFollowup { call_id, input } if *call_id == call && input == "turns")
    ));
    let sessions = session_ids(&events);
    assert_eq!(sessions.len(), 2, "{sessions:?}");
    assert_eq!(sessions[0].1, sessions[1].1, "the same session");
    // Still open on the agent's connection: prompted as it is.
    assert_eq!(sessions[1].0, SessionKind::Continued);
    assert!(r.completions.try_recv().is_err(), "one report");
    let done = r.dispatcher.status(Some(&task)).unwrap().to_json();
    assert_eq!(
        (done["state"].as_str(), done["output"].as_str()),
        (Some("done"), Some("turns: 2"))
    );
}

#[tokio::test]
async fn a_message_to_a_finished_task_reopens_it_on_the_same_session() {
    let mut r = rig();
    let (task, call) = r.start(background(Some("fake"), "echo first")).await;
    assert_eq!(r.completion().await, task);
    let mut input = status(&task);
    input.message = Some("turns".into());
    input.wait_seconds = Some(30);
    let answer = r.steer(input).await;
    assert_eq!(answer["message"], "sent");
    assert_eq!(
        answer["state"], "done",
        "wait_seconds waited for the new turn"
    );
    assert_eq!(
        answer["output"], "turns: 2",
        "the same session: its second prompt"
    );
    let events = r
        .until(|e| matches!(e, Event::SubagentFinished { output, .. } if output == "turns: 2"))
        .await;
    // The box reopens: the board says running again.
    let reopened = events
        .iter()
        .position(|e| matches!(e, Event::SubagentFollowup { .. }))
        .expect("a follow-up event");
    assert!(matches!(
        &events[reopened + 1],
        Event::TaskProgress { call_id: c, summary, .. } if *c == call && summary.state.as_str() == "running"
    ));
    let sessions = session_ids(&events);
    assert_eq!(sessions[0].1, sessions[1].1, "{sessions:?}");
}

#[tokio::test]
async fn wait_seconds_waits_for_the_task_or_the_deadline() {
    let mut r = rig();
    let (task, _) = r.start(background(Some("fake"), "slow 1")).await;
    let mut input = status(&task);
    input.wait_seconds = Some(60);
    let answer = r.steer(input).await;
    assert_eq!(answer["state"], "done");
    assert_eq!(answer["output"], "working done");
    r.completion().await;
    // A task that waits for the person is still running at the deadline.
    let (task, _) = r.start(background(Some("fake"), "permission")).await;
    let mut input = status(&task);
    input.wait_seconds = Some(1);
    let answer = r.steer(input).await;
    assert_eq!(answer["state"], "running");
}

#[tokio::test]
async fn cancel_stops_a_task() {
    let mut r = rig();
    let (task, _) = r.start(background(Some("fake"), "slow 30")).await;
    let mut input = status(&task);
    input.cancel = true;
    input.wait_seconds = Some(60);
    let answer = r.steer(input).await;
    assert_eq!(answer["state"], "cancelled");
    assert_eq!(answer["stop_reason"], "cancelled");
    assert_eq!(r.completion().await, task);
}

/// The internal agent, answering at once.
struct Instant_;

impl Agent for Instant_ {
    fn turn<'a>(
        &'a self,
        _input: TurnInput<'a>,
        _sink: &'a dyn TurnSink,
        _control: &'a mut TurnControl,
    ) -> BoxFuture<'a, Outcome> {
        async { Outcome::new(StopReason::EndTurn, "done") }.boxed()
    }

    fn keeps_sessions(&self) -> bool {
        false
    }
}

#[tokio::test]
async fn steering_errors_are_clear() {
    let mut r = rig();
    r.dispatcher.set_internal(Arc::new(Instant_));
    let (task, _) = r.start(background(None, "look around")).await;
    assert_eq!(r.completion().await, task);
    let mut input = status(&task);
    input.message = Some("and more".into());
    let err = r
        .dispatcher
        .status_with(input)
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "task {task} ran on the internal agent, which keeps no session: it cannot take a \
             follow-up message; start a new `subagent` call instead"
        )
    );
    let mut input = status("t42");
    input.message = Some("hi".into());
    let err = r
        .dispatcher
        .status_with(input)
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(err, format!("unknown task \"t42\"; known tasks: {task}"));
    let input = StatusInput {
        message: Some("hi".into()),
        ..Default::default()
    };
    let err = r
        .dispatcher
        .status_with(input)
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(err, "subagent_status: `message` needs a `task_id`");
    let mut input = status(&task);
    input.message = Some("  ".into());
    let err = r
        .dispatcher
        .status_with(input)
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(err, "subagent_status: `message` is empty");
}
