//! Batch tasks, context for a task and the review quorum, through the real
//! dispatcher and the fake ACP agent (and a scripted chat model where the
//! main conversation or the internal agent takes part).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use quorum::acp::registry::Registry;
use quorum::agent::Permissions;
use quorum::confine::fsroot::Root;
use quorum::engine::{Session, SessionConfig};
use quorum::event::{Activity, Event, Severity, Stamped};
use quorum::llm::script::{ScriptModel, Turn};
use quorum::llm::{Message, Model, Request};
use quorum::subagent::dispatch::batch::BatchResult;
use quorum::subagent::dispatch::{DispatchError, Reply};
use quorum::subagent::input::{
    REQUIREMENTS_HEADING, SUMMARY_HEADING, SubAgentCallInput, TASK_HEADING, TaskInput,
};
use tokio::sync::{mpsc, watch};

struct Rig {
    dir: tempfile::TempDir,
    session: Session,
    events: mpsc::UnboundedReceiver<Stamped>,
}

/// A session in a fresh directory with fake agents `fake`, `fake-b`,
/// `fake-c` and `echo-prompt` (which answers every prompt with the whole
/// prompt it got), running at most `max_parallel` tasks of a batch.
fn rig(max_parallel: usize, model: Option<Arc<dyn Model>>) -> Rig {
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("q.toml");
    let in_flight = dir.path().join("in-flight.log");
    std::fs::write(
        &config,
        format!(
            "max_parallel = {max_parallel}\n\
             [agents.fake]\ncommand = {fake:?}\nargs = [\"--in-flight\", {in_flight:?}]\n\
             [agents.fake-b]\ncommand = {fake:?}\n\
             [agents.fake-c]\ncommand = {fake:?}\n\
             [agents.echo-prompt]\ncommand = {fake:?}\nargs = [\"--scenario\", \"prompt\"]\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.path().join("inside.txt"), "inside content").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "the password is swordfish\n").unwrap();
    let registry = Registry::load_only(&config).unwrap();
    let mut config_ = SessionConfig::new(registry, Root::new(dir.path()).unwrap());
    config_.read_settings(Some(&config)).unwrap();
    assert_eq!(config_.max_parallel, max_parallel);
    config_.permissions = Permissions::Deny;
    config_.model = model;
    let (session, events) = Session::start(config_, Instant::now()).unwrap();
    Rig {
        dir,
        session,
        events,
    }
}

impl Rig {
    async fn call(&self, call: SubAgentCallInput) -> Result<Reply, DispatchError> {
        tokio::time::timeout(Duration::from_secs(60), self.session.call(call))
            .await
            .expect("the call ends")
    }

    async fn batch(&self, call: SubAgentCallInput) -> BatchResult {
        match self.call(call).await.expect("the batch runs") {
            Reply::Batch(b) => b,
            other => panic!("a foreground batch: {other:?}"),
        }
    }

    fn drain(&mut self) -> Vec<Event> {
        let mut out = Vec::new();
        while let Ok(e) = self.events.try_recv() {
            out.push(e.event);
        }
        out
    }
}

fn task(agent: &str, input: &str) -> TaskInput {
    TaskInput {
        agent: Some(agent.into()),
        input: input.into(),
        ..TaskInput::default()
    }
}

fn batch(tasks: Vec<TaskInput>) -> SubAgentCallInput {
    SubAgentCallInput {
        tasks: Some(tasks),
        ..SubAgentCallInput::default()
    }
}

fn output(reply: &Reply) -> String {
    match reply {
        Reply::Done(o) => o.output.clone(),
        other => panic!("a single call: {other:?}"),
    }
}

#[tokio::test]
async fn a_batch_of_mixed_tasks_reports_each_and_a_failure_hides_nothing() {
    let mut r = rig(4, None);
    let mut review = task("fake-b", "review red");
    review.code_review = Some(true);
    let result = r
        .batch(batch(vec![
            task("fake", "echo one"),
            review,
            task("nope", "echo x"),
            task("fake-c", "crash"),
        ]))
        .await;
    let json = Reply::Batch(result.clone()).to_json();
    assert_eq!(
        json["summary"],
        serde_json::json!({"total": 4, "succeeded": 2, "failed": 2, "worst_verdict": "red"})
    );
    let tasks = json["tasks"].as_array().unwrap();
    assert_eq!(
        tasks[0],
        serde_json::json!({"task": 0, "agent": "fake", "output": "one", "stop_reason": "end_turn"})
    );
    assert_eq!(tasks[1]["severity"], "red");
    assert_eq!(
        tasks[1]["output"], "## Review\nLooks red.",
        "header stripped"
    );
    let unknown = tasks[2]["error"].as_str().unwrap();
    assert!(
        unknown.starts_with("tasks[2]: unknown agent \"nope\""),
        "{unknown}"
    );
    let crashed = tasks[3]["error"].as_str().unwrap();
    assert!(
        crashed.starts_with("tasks[3]: fake-c exited during the turn"),
        "{crashed}"
    );
    assert_eq!(tasks[3]["stop_reason"], "error");
    assert!(json.get("quorum").is_none(), "not every task is a review");

    let events = r.drain();
    let error = events.iter().position(|e| matches!(e, Event::Error { text } if text.starts_with("subagent: tasks[2]: unknown agent"))).expect("the error is shown");
    let header = events
        .iter()
        .position(|e| {
            matches!(
                e,
                Event::BatchStarted {
                    tasks: 4,
                    review: false,
                    ..
                }
            )
        })
        .expect("the batch's header");
    assert!(error < header, "the error stands before the group");
    let boxes: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::SubagentStarted { .. }))
        .collect();
    assert_eq!(boxes.len(), 3, "a box per task that runs");
    assert!(boxes.iter().all(|e| matches!(e, Event::SubagentStarted { batch_id: Some(b), queued: false, .. } if b == &result.batch_id)));
    assert!(matches!(
        events.last(),
        Some(Event::BatchFinished {
            total: 4,
            succeeded: 2,
            failed: 2,
            worst_verdict: Some(Severity::Red),
            ..
        })
    ));
}

#[tokio::test]
async fn errors_name_the_task_and_bad_calls_are_refused_whole() {
    let r = rig(4, None);
    let result = r
        .batch(batch(vec![task("fake", "echo ok"), task("fake", "  ")]))
        .await;
    assert_eq!(
        result.tasks[1].result,
        Err("tasks[1]: `input` is empty: say what this task should do".into())
    );
    assert!(result.tasks[0].succeeded());
    let both = SubAgentCallInput {
        input: Some("x".into()),
        ..batch(vec![task("fake", "echo y")])
    };
    let e = r.call(both).await.unwrap_err().to_string();
    assert!(
        e.contains("`input` and `tasks` are mutually exclusive"),
        "{e}"
    );
    let e = r.call(batch(vec![])).await.unwrap_err().to_string();
    assert!(e.contains("`tasks` is empty"), "{e}");
    // No agent in the task or the call, and no model: no internal agent.
    let result = r.batch(batch(vec![task(" ", "echo x")])).await;
    let e = result.tasks[0].result.clone().unwrap_err();
    assert!(
        e.starts_with("tasks[0]: the internal agent is not available"),
        "{e}"
    );
    // A task without an agent takes the call's.
    let call = SubAgentCallInput {
        agent: Some("fake".into()),
        ..batch(vec![TaskInput {
            input: "echo from the call's agent".into(),
            ..TaskInput::default()
        }])
    };
    let result = r.batch(call).await;
    assert_eq!(result.tasks[0].agent, "fake");
    assert_eq!(
        result.tasks[0].result.as_ref().unwrap().output,
        "from the call's agent"
    );
}

/// Running calls, by replaying the events: started (not queued) and
/// dequeued ones run until they finish.
fn most_running_at_once(events: &[Event]) -> usize {
    let (mut running, mut most) = (0usize, 0usize);
    for e in events {
        match e {
            Event::SubagentStarted { queued: false, .. } | Event::SubagentDequeued { .. } => {
                running += 1
            }
            Event::SubagentFinished { .. } => running -= 1,
            _ => {}
        }
        most = most.max(running);
    }
    most
}

#[tokio::test]
async fn max_parallel_queues_the_rest_and_never_runs_more() {
    let mut r = rig(2, None);
    let tasks = (0..5).map(|_| task("fake", "slow 0.3")).collect();
    let call = SubAgentCallInput {
        run_in_background: true,
        ..batch(tasks)
    };
    let reply = r.call(call).await.unwrap();
    let Reply::BatchStarted { tasks, .. } = &reply else {
        panic!("{reply:?}")
    };
    // One task id per task, at once; three of them wait.
    let json = reply.to_json();
    let statuses: Vec<&str> = json["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        ["running", "running", "queued", "queued", "queued"]
    );
    let ids: Vec<String> = tasks.iter().map(|t| t.started.clone().unwrap().0).collect();
    assert_eq!(ids, ["t1", "t2", "t3", "t4", "t5"]);
    // The queued state is observable: on the board, in `subagent_status`.
    let status = r.session.dispatcher().status(Some("t5")).unwrap().to_json();
    assert_eq!(status["state"], "queued");
    // Each task reports on its own.
    let mut completions = r.session.take_completions().unwrap();
    let mut done = Vec::new();
    while done.len() < 5 {
        let id = tokio::time::timeout(Duration::from_secs(30), completions.recv())
            .await
            .unwrap()
            .unwrap();
        done.push(id);
    }
    done.sort();
    assert_eq!(done, ids);
    // Every event of the batch, to its end.
    let events: Vec<Event> =
        crate::common::events::until(&mut r.events, |e| matches!(e, Event::BatchFinished { .. }))
            .await
            .into_iter()
            .map(|e| e.event)
            .collect();
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Event::SubagentStarted { queued: true, .. }))
            .count(),
        3
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Event::SubagentDequeued { .. }))
            .count(),
        3
    );
    // The queued state is observable in the events the board sends: the
    // last three tasks start queued, and each is dequeued before it ends.
    let queued: Vec<(&str, &str)> = events
        .iter()
        .filter_map(|e| match e {
            Event::SubagentStarted {
                queued: true,
                task_id: Some(task),
                call_id,
                ..
            } => Some((task.as_str(), call_id.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        queued.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
        ["t3", "t4", "t5"]
    );
    for (task, call) in &queued {
        let at = |wanted: &dyn Fn(&Event) -> bool| events.iter().position(wanted);
        let dequeued = at(&|e| matches!(e, Event::SubagentDequeued { call_id } if call_id == call));
        let finished =
            at(&|e| matches!(e, Event::SubagentFinished { call_id, .. } if call_id == call));
        assert!(
            dequeued.is_some() && dequeued < finished,
            "{task}: dequeued at {dequeued:?}, finished at {finished:?}"
        );
    }
    assert_eq!(
        most_running_at_once(&events),
        2,
        "never more than 2 at once"
    );
    // What the agents had in flight at once, as they counted it: every
    // prompt arrived, never more than 2 at a time, and 2 at some point.
    let counts: Vec<usize> = std::fs::read_to_string(r.dir.path().join("in-flight.log"))
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(counts.len(), 5, "{counts:?}");
    assert_eq!(counts.iter().max(), Some(&2), "{counts:?}");
    assert!(matches!(
        events.last(),
        Some(Event::BatchFinished {
            total: 5,
            succeeded: 5,
            ..
        })
    ));
    for id in &ids {
        let status = r.session.dispatcher().status(Some(id)).unwrap().to_json();
        assert_eq!(status["state"], "done", "{id}");
    }
}

#[tokio::test]
async fn a_queued_task_cancelled_before_its_turn_never_runs() {
    let mut r = rig(1, None);
    let call = SubAgentCallInput {
        run_in_background: true,
        ..batch(vec![task("fake", "slow 30"), task("fake", "echo late")])
    };
    r.call(call).await.unwrap();
    assert_eq!(
        r.session.dispatcher().status(Some("t2")).unwrap().to_json()["state"],
        "queued"
    );
    assert!(r.session.dispatcher().cancel("t2"));
    assert!(r.session.dispatcher().cancel("t1"));
    let mut completions = r.session.take_completions().unwrap();
    for _ in 0..2 {
        tokio::time::timeout(Duration::from_secs(30), completions.recv())
            .await
            .unwrap();
    }
    let status = r.session.dispatcher().status(Some("t2")).unwrap().to_json();
    assert_eq!(status["state"], "cancelled");
    assert_eq!(status["output"], "fake: cancelled while queued");
    // Every task of the batch has ended once the batch has: a dequeue, had
    // there been one, is among the events before its end.
    let events =
        crate::common::events::until(&mut r.events, |e| matches!(e, Event::BatchFinished { .. }))
            .await;
    let dequeued: Vec<&Event> = events
        .iter()
        .map(|e| &e.event)
        .filter(|e| matches!(e, Event::SubagentDequeued { .. }))
        .collect();
    assert!(dequeued.is_empty(), "{dequeued:?}");
}

#[tokio::test]
async fn a_review_batch_gets_a_quorum() {
    let mut r = rig(4, None);
    let call = SubAgentCallInput {
        code_review: true,
        ..batch(vec![
            task("fake", "review red"),
            task("fake-b", "review green"),
            task("fake-c", "review red"),
        ])
    };
    let result = r.batch(call).await;
    let quorum = result.quorum.clone().expect("a quorum");
    assert_eq!(quorum.label(), "red · 2 of 3");
    let json = Reply::Batch(result).to_json();
    assert_eq!(
        json["quorum"],
        serde_json::json!({"verdict": "red", "agree": 2, "total": 3, "text": "red · 2 of 3"})
    );
    let events = r.drain();
    let q = events
        .iter()
        .position(|e| matches!(e, Event::ReviewQuorum { quorum: q, .. } if q == &quorum))
        .expect("the quorum is an event");
    let end = events
        .iter()
        .position(|e| matches!(e, Event::BatchFinished { .. }))
        .unwrap();
    assert!(q < end);
    assert!(events.iter().any(|e| matches!(
        e,
        Event::BatchStarted {
            review: true,
            tasks: 3,
            ..
        }
    )));
    let agents: Vec<(&str, Option<Severity>)> = quorum
        .verdicts
        .iter()
        .map(|v| (v.agent.as_str(), v.severity))
        .collect();
    assert_eq!(
        agents,
        [
            ("fake", Some(Severity::Red)),
            ("fake-b", Some(Severity::Green)),
            ("fake-c", Some(Severity::Red))
        ]
    );
}

#[tokio::test]
async fn output_requirements_reach_the_agent_under_their_heading() {
    let r = rig(4, None);
    let single = SubAgentCallInput {
        agent: Some("echo-prompt".into()),
        input: Some("List the modules.".into()),
        output_requirements: Some("At most three bullet points.".into()),
        ..SubAgentCallInput::default()
    };
    assert_eq!(
        output(&r.call(single).await.unwrap()),
        format!("List the modules.\n\n{REQUIREMENTS_HEADING}\n\nAt most three bullet points.")
    );
    // In a batch: the call's requirements, unless a task has its own.
    let mut own = task("echo-prompt", "Second.");
    own.output_requirements = Some("A table.".into());
    let call = SubAgentCallInput {
        output_requirements: Some("One line.".into()),
        ..batch(vec![task("echo-prompt", "First."), own])
    };
    let result = r.batch(call).await;
    let received: Vec<String> = result
        .tasks
        .iter()
        .map(|t| t.result.as_ref().unwrap().output.clone())
        .collect();
    assert_eq!(
        received,
        [
            format!("First.\n\n{REQUIREMENTS_HEADING}\n\nOne line."),
            format!("Second.\n\n{REQUIREMENTS_HEADING}\n\nA table."),
        ]
    );
}

/// A scripted model that remembers every request it got.
struct Recording {
    inner: ScriptModel,
    seen: Mutex<Vec<Request>>,
}

impl Recording {
    fn new(turns: serde_json::Value) -> Arc<Self> {
        let turns: Vec<Turn> = serde_json::from_value(turns).unwrap();
        Arc::new(Self {
            inner: ScriptModel::new("recording", turns),
            seen: Mutex::default(),
        })
    }

    fn requests(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }
}

impl Model for Recording {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn stream(
        &self,
        request: Request,
    ) -> futures::stream::BoxStream<'static, Result<quorum::llm::Delta, quorum::llm::LlmError>>
    {
        self.seen.lock().unwrap().push(request.clone());
        self.inner.stream(request)
    }
}

#[tokio::test]
async fn include_main_summary_puts_the_models_summary_before_the_message() {
    let model = Recording::new(serde_json::json!([
        {"text": "Asking.", "tool_calls": [{"name": "subagent", "arguments": {
            "agent": "echo-prompt", "input": "Fix it.", "include_main_summary": true}}]},
        {"text": "The person wants the login bug in src/auth.rs fixed."},
        {"text": "Done."}
    ]));
    let mut r = rig(4, Some(model.clone()));
    let mut chat = r.session.take_chat().unwrap();
    let (_tx, cancel) = watch::channel(false);
    let end = tokio::time::timeout(
        Duration::from_secs(60),
        chat.turn(
            Some("The login in src/auth.rs is broken.".into()),
            None,
            cancel,
        ),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(end.output, "Done.");
    let received = r
        .drain()
        .into_iter()
        .find_map(|e| match e {
            Event::SubagentFinished { output, .. } => Some(output),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        received,
        format!(
            "{SUMMARY_HEADING}\n\nThe person wants the login bug in src/auth.rs fixed.\n\n\
             {TASK_HEADING}\n\nFix it."
        )
    );
    // One extra request, with the conversation and no tools.
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let summary = &requests[1];
    assert!(summary.tools.is_empty());
    let Message::User { content } = &summary.messages[0] else {
        panic!("{summary:?}")
    };
    assert!(
        content.contains("Person: The login in src/auth.rs is broken."),
        "{content}"
    );
}

#[tokio::test]
async fn without_a_main_conversation_the_message_goes_alone() {
    let mut r = rig(4, None);
    let call = SubAgentCallInput {
        agent: Some("echo-prompt".into()),
        input: Some("Just this.".into()),
        include_main_summary: true,
        ..SubAgentCallInput::default()
    };
    assert_eq!(output(&r.call(call).await.unwrap()), "Just this.");
    assert!(r.drain().iter().any(|e| matches!(e, Event::Notice { text, .. } if text.starts_with("include_main_summary: there is no main conversation"))));
}

#[tokio::test]
async fn exclude_files_pattern_refuses_fs_read_to_an_acp_agent() {
    let mut r = rig(4, None);
    let call = |input: &str| SubAgentCallInput {
        agent: Some("fake".into()),
        input: Some(input.into()),
        exclude_files_pattern: Some("^secret".into()),
        ..SubAgentCallInput::default()
    };
    let refused = output(&r.call(call("read secret.txt")).await.unwrap());
    assert!(
        refused.starts_with("read failed: secret.txt: refused: the path matches this task's exclude_files_pattern \"^secret\""),
        "{refused}"
    );
    assert!(!refused.contains("swordfish"), "{refused}");
    let absolute = format!("read {}", r.dir.path().join("secret.txt").display());
    let refused = output(&r.call(call(&absolute)).await.unwrap());
    assert!(refused.contains("exclude_files_pattern"), "{refused}");
    assert!(r.drain().iter().any(|e| matches!(e, Event::SubagentActivity { activity: Activity::Notice { text }, .. } if text.starts_with("refused to read secret.txt"))));
    // What it may not read, it may not overwrite either.
    let refused = output(&r.call(call("write secret.txt overwritten")).await.unwrap());
    assert!(
        refused.starts_with("write failed: secret.txt: refused: the path matches this task's exclude_files_pattern \"^secret\", so it may not be read or written"),
        "{refused}"
    );
    assert_eq!(
        std::fs::read_to_string(r.dir.path().join("secret.txt")).unwrap(),
        "the password is swordfish\n"
    );
    // Other files are read as before, and the pattern holds for its call only.
    assert_eq!(
        output(&r.call(call("read inside.txt")).await.unwrap()),
        "read: inside content"
    );
    let plain = SubAgentCallInput {
        exclude_files_pattern: None,
        ..call("read secret.txt")
    };
    assert_eq!(
        output(&r.call(plain).await.unwrap()),
        "read: the password is swordfish\n"
    );
    // A bad pattern is an error that names it.
    let bad = SubAgentCallInput {
        exclude_files_pattern: Some("secret(".into()),
        ..call("read inside.txt")
    };
    let e = r.call(bad).await.unwrap_err().to_string();
    assert!(
        e.starts_with("exclude_files_pattern \"secret(\" is not a valid regular expression"),
        "{e}"
    );
}

#[tokio::test]
async fn exclude_files_pattern_hides_a_secret_from_the_internal_agent() {
    let model = Recording::new(serde_json::json!([
        {"tool_calls": [{"name": "subagent", "arguments": {
            "input": "Look around.", "exclude_files_pattern": "secret"}}]},
        {"tool_calls": [
            {"name": "list", "arguments": {}},
            {"name": "read", "arguments": {"path": "secret.txt"}},
            {"name": "grep", "arguments": {"pattern": "swordfish|inside"}}
        ]},
        {"text": "Nothing secret here."},
        {"text": "Done."}
    ]));
    let mut r = rig(4, Some(model.clone()));
    let mut chat = r.session.take_chat().unwrap();
    let (_tx, cancel) = watch::channel(false);
    tokio::time::timeout(
        Duration::from_secs(60),
        chat.turn(Some("Look.".into()), None, cancel),
    )
    .await
    .unwrap()
    .unwrap();
    // What the internal agent's model was given back by its tools.
    let results: Vec<(String, String)> = model
        .requests()
        .iter()
        .flat_map(|r| r.messages.clone())
        .filter_map(|m| match m {
            Message::Tool { name, content, .. } if name != "subagent" => Some((name, content)),
            _ => None,
        })
        .collect();
    let of = |tool: &str| {
        results
            .iter()
            .find(|(n, _)| n == tool)
            .map(|(_, c)| c.clone())
            .unwrap_or_else(|| panic!("no {tool} result in {results:?}"))
    };
    assert!(!of("list").contains("secret"), "{}", of("list"));
    assert!(of("list").contains("inside.txt"), "{}", of("list"));
    assert!(
        of("read").contains("exclude_files_pattern \"secret\""),
        "{}",
        of("read")
    );
    assert_eq!(of("grep"), "inside.txt:1: inside content");
    assert!(
        !results.iter().any(|(_, c)| c.contains("swordfish")),
        "{results:?}"
    );
}

/// A review quorum with findings, live and replayed from its transcript,
/// draws the same screen: each box lists its findings, the quorum's row
/// counts the merged ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorums_findings_draw_the_same_screen_live_and_replayed() {
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("q.toml");
    std::fs::write(
        &config,
        format!("[agents.fa]\ncommand = {fake:?}\n[agents.fb]\ncommand = {fake:?}\n"),
    )
    .unwrap();
    std::fs::write(dir.path().join("lib.rs"), "fn old() {}\nfn added() {}\n").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "a\nb\nteh c\nd\ne\n").unwrap();
    let record = dir.path().join("r.jsonl");
    let mut session_config = SessionConfig::new(
        Registry::load_only(&config).unwrap(),
        Root::new(dir.path()).unwrap(),
    );
    session_config.record = Some(record.clone());
    let (session, mut events) = Session::start(session_config, Instant::now()).unwrap();
    let mut input = batch(vec![task("fa", "findings a"), task("fb", "findings b")]);
    input.code_review = true;
    let reply = tokio::time::timeout(Duration::from_secs(60), session.call(input))
        .await
        .expect("the call ends")
        .expect("the batch runs");
    let Reply::Batch(result) = reply else {
        panic!("a foreground batch")
    };
    let quorum = result.quorum.expect("a review quorum");
    assert_eq!(quorum.findings.len(), 2, "{:?}", quorum.findings);
    assert_eq!(quorum.findings[0].who(), "fa, fb · 2 of 2");
    session.shutdown();
    let mut live = Vec::new();
    while let Ok(e) = events.try_recv() {
        live.push(e);
    }
    let replayed = crate::common::events(&record);
    let (a, b) = (
        crate::common::screen(&live, 120, 60, Some(false)),
        crate::common::screen(&replayed, 120, 60, Some(false)),
    );
    let text = crate::common::rows(&a).join("\n");
    for shown in [
        "● red    lib.rs:2  added() is never called",
        "● yellow lib.rs:1-2  added() has no caller",
        "2 findings: 1 red, 1 green · agreed: 1 by 2 of 2, 1 by 1 of 2",
    ] {
        assert!(text.contains(shown), "{shown}\n{text}");
    }
    assert_eq!(
        crate::common::rows(&a),
        crate::common::rows(&b),
        "the replay draws the live screen"
    );
}

/// A quorum that checks itself (`verify`): `fa`'s lone red finding goes
/// to `fr`, which refutes it; the verdict turns, the finding stays in
/// `fa`'s box, struck, with the reason, and the check has a box of its
/// own. Live and replayed from its transcript, the screen is the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refuted_finding_turns_the_verdict_live_and_replayed() {
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("q.toml");
    std::fs::write(
        &config,
        format!(
            "[agents.fa]\ncommand = {fake:?}\n\
             [agents.fr]\ncommand = {fake:?}\nargs = [\"--check\", \"refuted\"]\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.path().join("lib.rs"), "fn old() {}\nfn added() {}\n").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "a\nb\nteh c\nd\ne\n").unwrap();
    let record = dir.path().join("r.jsonl");
    let mut session_config = SessionConfig::new(
        Registry::load_only(&config).unwrap(),
        Root::new(dir.path()).unwrap(),
    );
    session_config.record = Some(record.clone());
    let (session, mut events) = Session::start(session_config, Instant::now()).unwrap();
    let mut input = batch(vec![task("fa", "findings a"), task("fr", "review green")]);
    input.code_review = true;
    input.verify = true;
    let reply = tokio::time::timeout(Duration::from_secs(60), session.call(input))
        .await
        .expect("the call ends")
        .expect("the batch runs");
    let Reply::Batch(result) = reply else {
        panic!("a foreground batch")
    };
    let quorum = result.quorum.expect("a review quorum");
    assert_eq!(
        (quorum.verdict, quorum.before),
        (Some(Severity::Green), Some(Severity::Red)),
        "{quorum:?}"
    );
    session.shutdown();
    let mut live = Vec::new();
    while let Ok(e) = events.try_recv() {
        live.push(e);
    }
    let replayed = crate::common::events(&record);
    let (a, b) = (
        crate::common::screen(&live, 120, 80, Some(false)),
        crate::common::screen(&replayed, 120, 80, Some(false)),
    );
    let text = crate::common::rows(&a).join("\n");
    for shown in [
        "quorum ● red → green after verification: 1 of 1 red finding refuted · 2 of 2",
        "● red    lib.rs:2  added() is never called",
        "refuted by fr: The finding is refuted: added() is called from main.",
        "Check a finding of fa's code review",
    ] {
        assert!(text.contains(shown), "{shown}\n{text}");
    }
    // The refuted finding's title is struck through; the kept one is not.
    let struck = |title: &str| {
        let rows = crate::common::rows(&a);
        let y = rows.iter().position(|r| r.contains(title)).unwrap();
        let at = rows[y].find(title).unwrap();
        let col = rows[y][..at].chars().count() as u16;
        a[(col, y as u16)]
            .modifier
            .contains(ratatui::style::Modifier::CROSSED_OUT)
    };
    assert!(struck("added() is never called"), "{text}");
    assert!(!struck("a typo in the notes"), "{text}");
    assert_eq!(a, b, "the replay draws the live screen, styles and all");
}

/// `verify` on a call that is no batch of reviews is said, and the call
/// runs as it would without it.
#[tokio::test]
async fn verify_outside_a_review_batch_is_said_and_ignored() {
    let mut r = rig(4, None);
    let mut call = batch(vec![task("fake", "echo one")]);
    call.verify = true;
    let result = r.batch(call).await;
    assert!(result.quorum.is_none());
    let events = r.drain();
    assert!(
        events.iter().any(|e| matches!(e, Event::Notice { text, .. }
            if text.starts_with("verify: only a batch of code reviews"))),
        "{events:?}"
    );
}
