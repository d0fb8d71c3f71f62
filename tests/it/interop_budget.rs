//! Spending caps (issue 40) with the real claude-agent-acp, offline: its
//! model is the fake Anthropic server (`common::models`), whose answer to
//! `expensive ...` reports 100,000 input tokens. claude-agent-acp prices
//! them itself (Claude Code's `total_cost_usd`, at its default model's
//! price: $0.300075 a turn with 0.23.1, Sonnet's $3/$15 per million) and
//! sends the cost in its `usage_update`; quorum counts it against
//! `--max-cost`. The real codex-acp reports tokens and no cost: quorum
//! estimates it from the built-in price table.
#![cfg(target_os = "linux")]

use crate::common;

use std::collections::BTreeMap;

use common::adapter::Adapter;
use common::models::EXPENSIVE_INPUT;
use common::shell::text;
use quorum::event::Event;
use quorum::event::budget::Unit;
use serde_json::Value;

/// The cap: above one expensive turn's cost, below two's.
const CAP: f64 = 0.50;

/// Three expensive turns, each a fresh claude session, under a $0.50 cap:
/// the first spends $0.30 (claude's own figure), the second reaches the
/// cap, the third never starts; quorum says so and exits 4. The session's
/// spending is the sum of what claude reported of each call's session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_reported_cost_counts_toward_the_cap() {
    stops_at_the_cap("expensive plain").await;
}

/// The same when its model's answers carry no cache counts (as some
/// Anthropic-compatible servers' do not): claude-agent-acp 0.23.1 then
/// sends `"used": null` beside its cost, an update the ACP schema refuses
/// whole; quorum reads its cost all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_reported_cost_counts_when_its_context_is_unknown() {
    stops_at_the_cap("expensive uncached plain").await;
}

/// `turn` three times under [`CAP`]: two run, the cap stops the third.
async fn stops_at_the_cap(turn: &str) {
    let c = Adapter::start("claude", |dir, url, exe| {
        crate::interop_claude::claude_table(dir, url, exe)
    })
    .await;
    let (out, lines) = three_turns(&c, turn, &format!("{CAP:.2}")).await;
    let err = text(&out.stderr);
    let of = |kind: &str| -> Vec<&Value> { lines.iter().filter(|l| l["type"] == kind).collect() };

    // What claude itself reported: its session's cost, per call (each
    // call a fresh session, so its whole cost is the call's).
    let mut reported: BTreeMap<String, f64> = BTreeMap::new();
    for l in of("subagent_activity") {
        if l["activity"]["kind"] == "usage" {
            let cost = l["activity"]["cost"]["amount"].as_f64();
            let cost = cost.expect("claude's usage_update carries a cost");
            assert_eq!(l["activity"]["cost"]["currency"], "USD", "{l}");
            reported.insert(l["call_id"].as_str().unwrap().to_string(), cost);
        }
    }
    assert_eq!(
        reported.len(),
        2,
        "each started call got claude's usage_update with a cost: {reported:?}\n{}",
        c.diagnose(&out)
    );
    // Claude priced the fake server's tokens: at least $3 a million input
    // tokens (no Claude model is cheaper than Haiku's $1; Sonnet, its
    // default, is $3), and the cap lies between one turn and two.
    for (call, cost) in &reported {
        assert!(
            *cost >= EXPENSIVE_INPUT as f64 * 3e-6 && *cost < CAP,
            "{call}: claude reported ${cost} for {EXPENSIVE_INPUT} input tokens"
        );
    }

    // What quorum counted: each call's share, the last one per call.
    let mut shares: BTreeMap<String, f64> = BTreeMap::new();
    for l in of("task_progress") {
        if let Some(share) = l["share"]["cost"]["amount"].as_f64() {
            shares.insert(l["call_id"].as_str().unwrap().to_string(), share);
        }
    }
    assert_eq!(shares, reported, "each call's share is claude's cost");
    let sum: f64 = shares.values().sum();
    let last = of("session_spend")
        .last()
        .map(|l| {
            (
                l["spent"]["cost"].as_f64(),
                l["by_agent"]["claude"]["cost"].as_f64(),
            )
        })
        .expect("the spending is recorded");
    assert!(sum >= CAP, "two turns reach the cap: {sum}");
    assert!(
        (last.0.unwrap() - sum).abs() < 1e-9 && (last.1.unwrap() - sum).abs() < 1e-9,
        "the session spent the calls' shares: {last:?} vs {sum}"
    );

    assert_eq!(out.status.code(), Some(4), "{}", c.diagnose(&out));
    assert!(
        err.contains(&format!(
            "budget: the session has spent ${sum:.2} of its ${CAP:.2} cap"
        )),
        "{err}"
    );
    assert!(err.contains("no new call starts"), "{err}");
    let started = of("subagent_started").len();
    assert_eq!(started, 2, "the third call never started: {err}");
    let events = common::events(&c.dir.path().join("spent.jsonl"));
    assert!(
        events.iter().any(|e| matches!(
            e.event,
            Event::BudgetReached {
                call_id: None,
                unit: Unit::Usd,
                ..
            }
        )),
        "the cap reached is recorded"
    );
}

/// The real codex-acp reports its context's tokens but no cost: quorum
/// estimates it from codex's default model's price in the built-in table
/// (`gpt-5-codex`, $1.25 a million read tokens), marks it `~`, and counts
/// it toward the cap. Each expensive turn reads 100,000 tokens, so under a
/// $0.20 cap the second turn reaches it and the third never starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_tokens_are_priced_and_count_toward_the_cap() {
    let c = Adapter::start("codex", |dir, url, exe| {
        crate::interop_codex::codex_table(dir, url, exe, "danger-full-access")
    })
    .await;
    let (out, lines) = three_turns(&c, "expensive plain", "0.20").await;
    let err = text(&out.stderr);
    let of = |kind: &str| -> Vec<&Value> { lines.iter().filter(|l| l["type"] == kind).collect() };
    // What codex reported: tokens in context, and no cost.
    let reports: Vec<&Value> = of("subagent_activity")
        .into_iter()
        .filter(|l| l["activity"]["kind"] == "usage")
        .collect();
    assert!(!reports.is_empty(), "{}", c.diagnose(&out));
    for r in &reports {
        assert!(
            r["activity"]["cost"].is_null(),
            "codex reported a cost: {r}"
        );
    }
    // What quorum estimated: each report's context at $1.25 a million.
    let estimate: f64 = reports
        .iter()
        .map(|r| r["activity"]["used"].as_u64().unwrap() as f64 * 1.25e-6)
        .sum();
    let last = of("session_spend")
        .last()
        .map(|l| l["spent"].clone())
        .expect("spending");
    assert_eq!(last["estimated"], true, "{last}");
    assert!(
        (last["cost"].as_f64().unwrap() - estimate).abs() < 1e-9,
        "{last} vs {estimate}"
    );
    assert!(estimate >= 0.20, "two turns reach the cap: {estimate}");
    assert_eq!(out.status.code(), Some(4), "{}", c.diagnose(&out));
    assert!(err.contains("budget: the session has spent ~$"), "{err}");
    assert_eq!(
        of("subagent_started").len(),
        2,
        "the third call never started: {err}"
    );
}

/// `quorum call` of `turn` three times, each a fresh session, under
/// `--max-cost cap`: its output and the transcript's lines.
async fn three_turns(c: &Adapter, turn: &str, cap: &str) -> (std::process::Output, Vec<Value>) {
    let record = c.dir.path().join("spent.jsonl");
    let mut args = vec!["--new-session", "--max-cost", cap, "--record"];
    args.push(record.to_str().unwrap());
    for _ in 0..3 {
        args.extend(["--input", turn]);
    }
    let out = c.call(&args).await;
    let lines = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out, lines)
}
