//! Spending caps (issue 40): the fake agent reports usage (`usage USED
//! SIZE COST`, a session's cumulative cost), and the session's spending
//! is counted against `--max-cost`, `[budget]` and a call's `max_cost`.

use crate::common;

use std::time::Instant;

use common::shell::{shell, shell_with, text};
use quorum::event::budget::Unit;
use quorum::event::{Event, Stamped};

/// One call's turn: a fresh session of the fake agent that reports it cost
/// $0.30.
const THIRTY_CENTS: &str = "usage 1000 200000 0.30";

/// Five calls in turn, each a fresh session costing $0.30, under a $1.00
/// cap: the third passes 80 % (a warning), the fourth reaches the cap, the
/// fifth does not start; quorum says so on stderr and exits 4. The
/// transcript holds the spending and the cap reached.
#[test]
fn quorum_call_stops_at_the_cap_and_exits_4() {
    let s = shell();
    let record = s.dir.path().join("spent.jsonl");
    let mut args = vec![
        "call",
        "--agent",
        "fake",
        "--new-session",
        "--max-cost",
        "1.00",
        "--record",
        record.to_str().unwrap(),
    ];
    for _ in 0..5 {
        args.extend(["--input", THIRTY_CENTS]);
    }
    let o = s.run(&args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(
        err.contains("budget: $0.90 of the session's $1.00 cap spent"),
        "{err}"
    );
    assert!(
        err.contains("budget: the session has spent $1.20 of its $1.00 cap"),
        "{err}"
    );
    assert!(err.contains("no new call starts"), "{err}");
    let events = common::events(&record);
    let started = events
        .iter()
        .filter(|e| matches!(e.event, Event::SubagentStarted { .. }))
        .count();
    assert_eq!(started, 4, "the fifth call never started");
    let last_spend = events
        .iter()
        .rev()
        .find_map(|e| match &e.event {
            Event::SessionSpend { spent, by_agent } => Some((*spent, by_agent.clone())),
            _ => None,
        })
        .expect("the spending is recorded");
    assert!((last_spend.0.cost - 1.2).abs() < 1e-9, "{last_spend:?}");
    assert!((last_spend.1["fake"].cost - 1.2).abs() < 1e-9);
    assert!(events.iter().any(|e| matches!(
        e.event,
        Event::BudgetReached {
            call_id: None,
            unit: Unit::Usd,
            ..
        }
    )));
}

/// Without a cap the same calls all run and exit 0; a cap of 0, a
/// negative one or a bad `[budget]` value is refused before anything
/// runs, naming what is wrong.
#[test]
fn no_cap_runs_everything_and_a_bad_cap_is_refused() {
    let s = shell();
    let o = s.run(&[
        "call",
        "--agent",
        "fake",
        "--new-session",
        "--input",
        THIRTY_CENTS,
        "--input",
        THIRTY_CENTS,
        "--input",
        THIRTY_CENTS,
        "--input",
        THIRTY_CENTS,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    for bad in ["0", "-1", "lots"] {
        let flag = format!("--max-cost={bad}");
        let o = s.run(&["call", "--agent", "fake", &flag, "--input", "x"]);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        assert!(
            text(&o.stderr).contains("--max-cost"),
            "{}",
            text(&o.stderr)
        );
    }
    let o = s.run(&[
        "call",
        "--agent",
        "fake",
        "--max-tokens",
        "0",
        "--input",
        "x",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--max-tokens must be a number of tokens above 0"));
    let s = shell_with("[budget]\nsession_usd = 0\n");
    let o = s.run(&["call", "--agent", "fake", "--input", "x"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("line") && err.contains("session_usd"), "{err}");
}

/// A batch of background tasks, one at a time (`max_parallel = 1`), each
/// costing $0.30 under `[budget] session_usd = 1.0`: the fourth reaches
/// the cap and the two still queued do not start, each saying why; the
/// spending the panel shows is the sum of the boxes'; a continued session
/// keeps the spending, and its first call is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_stops_at_the_cap_and_a_continued_session_keeps_the_spend() {
    use quorum::acp::registry::Registry;
    use quorum::confine::fsroot::Root;
    use quorum::engine::{Session, SessionConfig};
    use quorum::subagent::input::{SubAgentCallInput, TaskInput};

    let s = shell_with("[budget]\nsession_usd = 1.0\n");
    let record = s.dir.path().join("batch.jsonl");
    let start = |resume: Option<std::path::PathBuf>| {
        let registry = Registry::load_only(&s.config).unwrap();
        let mut config = SessionConfig::new(registry, Root::new(s.dir.path()).unwrap());
        config.read_settings(Some(&s.config)).unwrap();
        config.max_parallel = 1;
        if resume.is_some() {
            config.resume = resume;
        } else {
            config.record = Some(record.clone());
        }
        Session::start(config, Instant::now()).unwrap()
    };
    let (session, mut events) = start(None);
    let batch = SubAgentCallInput {
        tasks: Some(
            (0..6)
                .map(|_| TaskInput {
                    agent: Some("fake".into()),
                    input: THIRTY_CENTS.into(),
                    ..TaskInput::default()
                })
                .collect(),
        ),
        continue_session: false,
        ..SubAgentCallInput::default()
    };
    let reply = session.call(batch).await.expect("the batch runs");
    let quorum::subagent::dispatch::Reply::Batch(result) = reply else {
        panic!("a foreground batch")
    };
    let stopped: Vec<String> = result
        .tasks
        .iter()
        .filter_map(|t| t.result.as_ref().ok())
        .filter(|o| o.output.contains("did not start"))
        .map(|o| o.output.clone())
        .collect();
    assert_eq!(stopped.len(), 2, "{:#?}", result.tasks);
    assert!(stopped[0].contains("budget: the session has spent $1.20 of its $1.00 cap"));
    assert!(session.budget_stopped());
    session.shutdown();
    drop(session);
    let mut live: Vec<Stamped> = Vec::new();
    while let Ok(e) = events.try_recv() {
        live.push(e);
    }
    // The panel's total is the sum of the boxes' parts.
    let mut state = quorum::tui::state::State::new();
    for e in &live {
        state.apply(e);
    }
    let boxes: f64 = live
        .iter()
        .filter_map(|e| match &e.event {
            Event::TaskProgress {
                call_id, summary, ..
            } => Some((call_id.clone(), summary)),
            _ => None,
        })
        .fold(std::collections::HashMap::new(), |mut m, (c, s)| {
            m.insert(
                c,
                s.share
                    .as_ref()
                    .and_then(|s| s.cost.as_ref())
                    .map_or(0.0, |c| c.amount),
            );
            m
        })
        .values()
        .sum();
    assert!((state.spending.spent.cost - boxes).abs() < 1e-9);
    assert!((boxes - 1.2).abs() < 1e-9, "{boxes}");
    // The screen says it: the panel's title, the status line (red: the
    // cap is reached), and the transcript's line.
    let screen = common::rows(&common::screen(&live, 140, 40, Some(true))).join("\n");
    assert!(screen.contains("agents Σ 4k tokens · $1.20"), "{screen}");
    assert!(screen.contains("· cap $1.20 of $1.00"), "{screen}");
    assert!(
        screen.contains("budget: the session has spent $1.20 of its $1.00 cap: no new call"),
        "{screen}"
    );

    // Continued: the spending is read back, the cap still holds.
    let (session, mut events) = start(Some(record.clone()));
    let refused = session
        .call(SubAgentCallInput {
            agent: Some("fake".into()),
            input: Some(THIRTY_CENTS.into()),
            ..SubAgentCallInput::default()
        })
        .await;
    let e = refused.expect_err("over the cap");
    assert!(
        e.to_string()
            .contains("the session has spent $1.20 of its $1.00 cap"),
        "{e}"
    );
    // `/spend` says it agent by agent, with the caps: read back.
    let mut session = session;
    let ops = session.serve();
    ops.send(quorum::event::Op::Submit("/spend".into()))
        .unwrap();
    let mut said: Vec<Stamped> = Vec::new();
    let spend = loop {
        let e = tokio::time::timeout(std::time::Duration::from_secs(10), events.recv())
            .await
            .expect("an answer")
            .expect("the session runs");
        said.push(e.clone());
        if let Event::Notice { text, .. } = &e.event
            && text.starts_with("Spent:")
        {
            break text.clone();
        }
    };
    assert_eq!(
        spend,
        "Spent: $1.20 · 4000 tokens (caps: session $1.00)\n  fake: $1.20 · 4000 tokens"
    );
    session.shutdown();
    drop(session);
    while let Ok(e) = events.try_recv() {
        said.push(e);
    }
    assert!(
        said.iter()
            .any(|e| matches!(e.event, Event::BudgetReached { .. })),
        "the continued session says the cap is reached"
    );
}

/// One call's turn on a fresh session of the fake agent, which reports
/// 1,000 tokens in context and no cost: priced by `[prices]` at $100 a
/// million read tokens, quorum estimates it at ~$0.10.
const TOKENS_ONLY: &str = "usage 1000 200000";

/// An agent that reports tokens but no cost is estimated from its price
/// (`[prices]`), marked `~`, and the estimate counts toward the cap: four
/// calls under $0.24, the second warns (~$0.20), the third reaches the cap
/// (~$0.30), the fourth never starts, exit 4. The transcript says which
/// prices were used; `quorum sessions --json` carries the spending; the
/// screen marks the estimate, and `$` shows it agent by agent.
#[test]
fn a_cost_not_reported_is_estimated_from_its_price_and_counts_toward_the_cap() {
    let s = shell_with(
        "[budget]\nsession_usd = 0.24\n[prices]\nfake = { input = 100.0, output = 0.0 }\n",
    );
    let sessions = s.dir.path().join("state/quorum/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let record = sessions.join("estimated.jsonl");
    let mut args = vec![
        "call",
        "--agent",
        "fake",
        "--new-session",
        "--record",
        record.to_str().unwrap(),
    ];
    for _ in 0..4 {
        args.extend(["--input", TOKENS_ONLY]);
    }
    let o = s.run(&args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(
        err.contains("budget: ~$0.20 of the session's $0.24 cap spent"),
        "{err}"
    );
    assert!(
        err.contains("budget: the session has spent ~$0.30 of its $0.24 cap"),
        "{err}"
    );
    let events = common::events(&record);
    let prices = events
        .iter()
        .find_map(|e| match &e.event {
            Event::PricesSet { prices } => Some(prices.clone()),
            _ => None,
        })
        .expect("the prices are recorded");
    assert_eq!(prices["fake"].input, 100.0);
    // The built-in agents' default models are priced too.
    assert_eq!(prices["codex"].input, 1.25);
    let started = events
        .iter()
        .filter(|e| matches!(e.event, Event::SubagentStarted { .. }))
        .count();
    assert_eq!(started, 3, "the fourth call never started");
    let shares: Vec<(f64, bool)> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::TaskProgress { summary, .. } => summary.share.as_ref()?.cost.as_ref(),
            _ => None,
        })
        .map(|c| (c.amount, c.estimated))
        .collect();
    assert!(!shares.is_empty() && shares.iter().all(|(a, e)| *e && (a - 0.1).abs() < 1e-9));

    // `quorum sessions --json`: the session's spending.
    let o = s.run(&["sessions", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON line");
    assert_eq!(listed["id"], "estimated");
    assert!(
        (listed["spent"]["cost"].as_f64().unwrap() - 0.3).abs() < 1e-9,
        "{listed}"
    );
    assert_eq!(listed["spent"]["tokens"], 3000);
    assert_eq!(listed["spent"]["estimated"], true);
    let o = s.run(&["sessions"]);
    assert!(
        text(&o.stdout).contains("spent ~$0.30 · 3000 tokens"),
        "{}",
        text(&o.stdout)
    );

    // The screen: boxes, the total and the cap marked as estimates; `$`
    // lists the spending by agent in the side panel, `$` again hides it.
    let mut app = quorum::tui::app::App::still();
    app.view.set_panel(Some(true));
    for e in &events {
        app.on_event(e.clone());
    }
    let shot = |app: &mut quorum::tui::app::App| {
        common::rows(&quorum::tui::screenshot::render(app, 150, 40)).join("\n")
    };
    let screen = shot(&mut app);
    assert!(screen.contains("1k / 200k tokens · ~$0.10"), "{screen}");
    assert!(screen.contains("agents Σ 3k tokens · ~$0.30"), "{screen}");
    assert!(screen.contains("· cap ~$0.30 of $0.24"), "{screen}");
    assert!(!screen.contains("fake: ~$0.30"), "{screen}");
    let dollar = ratatui::crossterm::event::KeyEvent::new(
        ratatui::crossterm::event::KeyCode::Char('$'),
        ratatui::crossterm::event::KeyModifiers::NONE,
    );
    app.handle(quorum::tui::app::Input::Key(dollar));
    let screen = shot(&mut app);
    assert!(screen.contains("spent ~$0.30 · 3k tokens"), "{screen}");
    assert!(screen.contains("fake: ~$0.30 · 3k tokens"), "{screen}");
    app.handle(quorum::tui::app::Input::Key(dollar));
    assert!(!shot(&mut app).contains("fake: ~$0.30"));
}

/// The chat is told once when the session's cap is reached: a background
/// task's $0.60 under a $0.50 cap, then its report. The next prompt the
/// chat's model gets starts with one automated message saying what the
/// budget stopped; a later call is refused, and quorum exits 4.
#[test]
fn the_chat_is_told_once_what_the_budget_stopped() {
    let s = shell();
    let log = s.dir.path().join("requests.jsonl");
    let script = serde_json::json!({"turns": [
        {"text": "Started.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "usage 1000 200000 0.60", "run_in_background": true}}]},
        {"text": "It runs."},
        {"text": "Trying again.", "tool_calls": [{"name": "subagent", "arguments": {"agent": "fake", "input": "hello"}}]},
        {"text": "The budget stopped it."}
    ], "log": log});
    let path = s.dir.path().join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let model = format!("script:{}", path.display());
    let o = s.run(&["run", "--model", &model, "--max-cost", "0.50", "-p", "go"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    let requests = std::fs::read_to_string(&log).unwrap();
    let told = "[automated message] budget: the session has spent $0.60 of its $0.50 cap. \
                The budget stopped the work: no new sub-agent call starts";
    assert_eq!(
        requests.matches(told).count(),
        // Each request carries the conversation so far: the message is in
        // the third and fourth, said once in each.
        2,
        "{requests}"
    );
    let third = requests.lines().nth(2).expect("a third request");
    assert_eq!(
        third.matches("[automated message] budget:").count(),
        1,
        "{third}"
    );
    assert!(
        requests.contains("no new call starts (raise it with --max-cost"),
        "the later call is refused: {requests}"
    );
}

/// `quorum mcp` under a cap: a host's first call spends $0.30 of $0.20,
/// the next is refused with the reason as the tool's error, and when the
/// host goes quorum exits 4 saying why.
#[test]
fn quorum_mcp_refuses_a_call_over_the_cap_and_exits_4() {
    let s = shell();
    let (mut mcp, _) = common::mcp::start(s.command(&["--max-cost", "0.20", "mcp", "--no-record"]));
    let call =
        serde_json::json!({"agent": "fake", "input": THIRTY_CENTS, "continue_session": false});
    let id = common::mcp::call(&mut mcp, call.clone());
    let first = mcp.answer(id);
    assert_ne!(first["result"]["isError"], true, "{first}");
    let id = common::mcp::call(&mut mcp, call);
    let second = mcp.answer(id);
    assert_eq!(second["result"]["isError"], true, "{second}");
    assert!(
        second
            .to_string()
            .contains("budget: the session has spent $0.30 of its $0.20 cap: no new call starts"),
        "{second}"
    );
    mcp.close();
    assert!(
        mcp.ended(common::mcp::WAIT),
        "quorum mcp did not end when the host went"
    );
    let child = mcp.child;
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains("a spending cap stopped work"), "{err}");
}

/// The chat's own tokens are priced by its model: none for a scripted
/// model; `/model openai:gpt-5-mini` sends the prices again, the chat's
/// now the built-in `gpt-5-mini` row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_prices_the_chat_it_picks() {
    use quorum::acp::registry::Registry;
    use quorum::confine::fsroot::Root;
    use quorum::engine::config::ModelChoice;
    use quorum::engine::{Session, SessionConfig};

    let s = shell_with("[prices]\nfake = { input = 1.0, output = 2.0 }\n");
    let script = s.dir.path().join("script.json");
    std::fs::write(&script, r#"[{"text": "hi"}]"#).unwrap();
    let file = quorum::config::ConfigFile::read(&s.config).unwrap();
    let mut config = SessionConfig::new(
        Registry::load_only(&s.config).unwrap(),
        Root::new(s.dir.path()).unwrap(),
    );
    config.take_settings(&file);
    let choice = ModelChoice {
        spec: Some(format!("script:{}", script.display())),
        base_url: Some("http://127.0.0.1:9/v1".into()),
        ..ModelChoice::default()
    };
    config.choose_model(&choice, &file).unwrap();
    let (mut session, mut events) = Session::start(config, Instant::now()).unwrap();
    let ops = session.serve();
    let first = common::events::until(&mut events, |e| matches!(e, Event::PricesSet { .. })).await;
    let Event::PricesSet { prices } = &first.last().unwrap().event else {
        unreachable!()
    };
    assert!(
        !prices.contains_key("chat"),
        "a scripted model has no price"
    );
    ops.send(quorum::event::Op::Submit("/model openai:gpt-5-mini".into()))
        .unwrap();
    let next = common::events::until(&mut events, |e| matches!(e, Event::PricesSet { .. })).await;
    let Event::PricesSet { prices } = &next.last().unwrap().event else {
        unreachable!()
    };
    assert_eq!(prices["chat"].input, 0.25);
    assert_eq!(prices["fake"].output, 2.0, "the agents' prices stay");
    session.shutdown();
}
