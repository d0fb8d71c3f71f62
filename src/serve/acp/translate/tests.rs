use super::*;
use crate::event::build;
use crate::event::{Activity, AgentRef, Event, NoticeLevel, Severity, ToolStatus};

fn json(out: &[Out]) -> Vec<serde_json::Value> {
    out.iter()
        .filter_map(|o| match o {
            Out::Update(n) => Some(serde_json::to_value(n).unwrap()),
            _ => None,
        })
        .collect()
}

fn run(t: &mut Translator, events: &[Event]) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for e in events {
        out.extend(t.event(e));
    }
    out.extend(t.flush());
    json(&out)
}

fn activity(call: &str, activity: Activity) -> Event {
    Event::SubagentActivity {
        call_id: call.into(),
        activity,
    }
}

#[test]
fn a_review_is_a_tool_call_whose_title_takes_its_verdict() {
    let mut t = Translator::new("s".into(), false);
    let out = run(
        &mut t,
        &[
            build::started("c1", AgentRef::Acp("claude".into()))
                .input("look at it")
                .review()
                .queued()
                .event(),
            build::dequeued("c1"),
            activity(
                "c1",
                Activity::MessageChunk {
                    text: "Reading\nthe diff".into(),
                },
            ),
        ],
    );
    let updates: Vec<&serde_json::Value> = out.iter().map(|n| &n["update"]).collect();
    assert_eq!(updates[0]["title"], "claude · review");
    assert_eq!(updates[0]["status"], serde_json::Value::Null, "pending");
    assert_eq!(updates[1]["status"], "in_progress");
    assert_eq!(
        updates[2]["content"][0]["content"]["text"],
        "Reading\nthe diff"
    );
    let out = run(
        &mut t,
        &[build::finished("c1", "Bad.")
            .severity(Severity::Red)
            .event()],
    );
    let done = &out[0]["update"];
    assert_eq!(done["title"], "claude · review · red");
    assert_eq!(done["status"], "completed");
    assert_eq!(done["content"][0]["content"]["text"], "Bad.");
}

/// A review's findings are in its tool call: a text, one line each, and
/// the raw output's `findings`.
#[test]
fn a_reviews_findings_are_in_its_tool_call() {
    let mut t = Translator::new("s".into(), false);
    let finding = crate::event::finding::Finding {
        file: "src/a.rs".into(),
        line: 3,
        end_line: Some(5),
        severity: Severity::Red,
        title: "retries a POST".into(),
        body: "why".into(),
    };
    run(
        &mut t,
        &[build::started("c1", AgentRef::Acp("claude".into()))
            .input("look")
            .review()
            .event()],
    );
    let out = run(
        &mut t,
        &[build::finished("c1", "Bad.")
            .severity(Severity::Red)
            .findings(vec![finding])
            .event()],
    );
    let done = &out[0]["update"];
    assert_eq!(
        done["content"][1]["content"]["text"],
        "Findings:\n- red src/a.rs:3-5 retries a POST"
    );
    assert_eq!(done["rawOutput"]["findings"][0]["end_line"], 5);
}

#[test]
fn background_tasks_are_the_plan_sent_when_it_changes() {
    let mut t = Translator::new("s".into(), false);
    let started = build::started("c1", AgentRef::Acp("codex".into()))
        .input("Fix the retries\nand more")
        .background("t1")
        .event();
    let out = run(&mut t, &[started]);
    let plan = out
        .iter()
        .find(|n| n["update"]["sessionUpdate"] == "plan")
        .unwrap();
    assert_eq!(
        plan["update"]["entries"][0]["content"],
        "t1 · codex · Fix the retries (running)"
    );
    assert!(run(&mut t, &[]).is_empty(), "no change, nothing sent");
    let out = run(&mut t, &[build::finished("c1", "done").event()]);
    let plan = out
        .iter()
        .find(|n| n["update"]["sessionUpdate"] == "plan")
        .unwrap();
    assert_eq!(plan["update"]["entries"][0]["status"], "completed");
    assert_eq!(
        plan["update"]["entries"][0]["content"],
        "t1 · codex · Fix the retries (done)"
    );
}

#[test]
fn a_child_session_streams_its_agents_own_updates() {
    let mut t = Translator::new("s".into(), true);
    let out = run(
        &mut t,
        &[
            build::started("c1", AgentRef::Acp("fake".into()))
                .input("go")
                .event(),
            activity(
                "c1",
                Activity::ToolCall {
                    id: "k1".into(),
                    title: "Read a.rs".into(),
                    status: ToolStatus::Completed,
                    detail: Box::default(),
                },
            ),
        ],
    );
    assert_eq!(out[0]["update"]["sessionUpdate"], "subagent_update");
    assert_eq!(out[0]["update"]["sessionId"], "s/c1");
    assert_eq!(out[1]["sessionId"], "s/c1");
    assert_eq!(out[1]["update"]["sessionUpdate"], "user_message_chunk");
    let child_tool = out
        .iter()
        .find(|n| n["sessionId"] == "s/c1" && n["update"]["sessionUpdate"] == "tool_call")
        .unwrap();
    assert_eq!(child_tool["update"]["toolCallId"], "k1");
    assert_eq!(child_tool["update"]["status"], "completed");
    assert_eq!(t.call_of_child("s/c1").as_deref(), Some("c1"));
}

#[test]
fn a_request_answered_in_the_same_breath_is_never_asked() {
    let mut t = Translator::new("s".into(), false);
    run(
        &mut t,
        &[build::started("c1", AgentRef::Acp("fake".into())).event()],
    );
    let asked = Activity::PermissionRequest {
        id: "p1".into(),
        title: "Delete".into(),
        options: vec!["Allow".into()],
        detail: Box::default(),
    };
    let mut out = t.event(&activity("c1", asked.clone()));
    out.extend(t.event(&activity(
        "c1",
        Activity::PermissionResolved {
            id: "p1".into(),
            outcome: "Allow (by policy)".into(),
        },
    )));
    out.extend(t.flush());
    assert!(!out.iter().any(|o| matches!(o, Out::Ask(_))));
    // Asked, then answered later: withdrawn, and its tool call done.
    let out: Vec<Out> = t
        .event(&activity("c1", asked))
        .into_iter()
        .chain(t.flush())
        .collect();
    assert!(
        out.iter()
            .any(|o| matches!(o, Out::Ask(a) if a.tool_call == "c1/p1" && a.agent == "fake"))
    );
    let out = t.event(&activity(
        "c1",
        Activity::PermissionResolved {
            id: "p1".into(),
            outcome: "Reject".into(),
        },
    ));
    assert!(out.iter().any(|o| matches!(o, Out::Withdraw { .. })));
    let done = json(&out);
    assert_eq!(done[0]["update"]["toolCallId"], "c1/p1");
    assert_eq!(done[0]["update"]["status"], "failed");
    assert_eq!(done[0]["update"]["title"], "fake: Delete");
}

#[test]
fn notices_are_said_while_a_prompt_runs_and_warnings_always() {
    let mut t = Translator::new("s".into(), false);
    let info = |text: &str| Event::Notice {
        level: NoticeLevel::Info,
        text: text.into(),
    };
    assert!(run(&mut t, &[info("continued")]).is_empty());
    let welcome = Event::Notice {
        level: NoticeLevel::Warning,
        text: crate::engine::chats::welcome(&crate::acp::registry::Registry::builtin(), true),
    };
    assert!(
        run(&mut t, &[welcome]).is_empty(),
        "the TUI's welcome is not said"
    );
    t.set_talking(true);
    let out = run(&mut t, &[info("No background tasks.")]);
    assert_eq!(
        out[0]["update"]["content"]["text"],
        "\n\nNo background tasks.\n\n"
    );
}
