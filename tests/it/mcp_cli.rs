//! `quorum mcp` as an MCP host sees it: the official MCP Python SDK (PyPI
//! `mcp`, installed into `.tools/` by scripts/install-mcp-python.sh) starts
//! it on stdio and drives it (tests/mcp_client.py), against the fake
//! agent. Then what the person sees of that session: `quorum sessions`
//! lists it, `quorum replay` draws its boxes and its task, and nothing it
//! started is left running.

use crate::common;

use common::Bounded;

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use common::shell::{shell_with, steps, text};

fn reply(step: &Value) -> Value {
    assert_eq!(step["is_error"], false, "{step}");
    serde_json::from_str(step["text"].as_str().unwrap()).unwrap_or_else(|e| panic!("{e}: {step}"))
}

#[test]
fn an_mcp_host_lists_calls_and_waits_for_quorums_tools() {
    let python = common::install("install-mcp-python.sh");
    let shell = shell_with("\n[mcp]\nsync_seconds = 1\n");
    let work = shell.dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let client = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let out = shell.run_host(
        shell.dir.path(),
        &python,
        &[
            client.to_str().unwrap(),
            env!("CARGO_BIN_EXE_quorum"),
            shell.config.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "the client failed:\n{stderr}");
    let steps = steps(&out.stdout);
    assert!(steps.contains_key("closed"), "{stderr}");

    // The server says who it is, and offers the chat's two tools, with
    // their schemas.
    assert_eq!(steps["initialize"]["server"], "quorum");
    let tools = steps["tools"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["subagent", "subagent_status"]);
    assert_eq!(tools[0]["schema"], quorum::subagent::input::input_schema());
    assert_eq!(tools[1]["schema"], quorum::subagent::input::status_schema());
    let description = tools[0]["description"].as_str().unwrap();
    assert!(
        description.contains("`fake` (the test agent)")
            && description.contains(quorum::subagent::tool::description::INTERNAL_AGENT_NOTE),
        "{description}"
    );

    // A call returns the agent's final message, as the chat model gets it.
    assert_eq!(
        reply(&steps["echo"]),
        serde_json::json!({"output": "hello from mcp", "stop_reason": "end_turn"})
    );

    // A call past `sync_seconds` comes back as a running task, told as
    // progress while it ran...
    let slow = &steps["slow"];
    let started = reply(slow);
    let task_id = started["task_id"].as_str().unwrap().to_string();
    assert_eq!(
        (started["status"].as_str(), started["agent"].as_str()),
        (Some("running"), Some("fake"))
    );
    let note = started["note"].as_str().unwrap();
    assert!(
        note.contains(&format!("goes on in the background as task {task_id}"))
            && note.contains(&format!("call subagent_status with task_id \"{task_id}\"")),
        "{note}"
    );
    let progress = slow["progress"].as_array().unwrap();
    assert!(
        progress.iter().any(|p| p["message"] == "fake: working"),
        "{progress:?}"
    );
    // ... and `subagent_status` waits for its report.
    let waits = steps["status"]["waits"].as_array().unwrap();
    let last = reply(waits.last().unwrap());
    assert_eq!(
        (
            last["task_id"].as_str(),
            last["state"].as_str(),
            last["output"].as_str(),
            last["stop_reason"].as_str()
        ),
        (
            Some(task_id.as_str()),
            Some("done"),
            Some("working done"),
            Some("end_turn")
        ),
        "{waits:?}"
    );

    // Bad input: failed calls, each saying what and why.
    let unknown = &steps["unknown_agent"];
    assert_eq!(unknown["is_error"], true);
    assert_eq!(
        unknown["text"],
        "error: unknown agent \"nope\"; available: fake"
    );
    let bad = &steps["bad_arguments"];
    assert_eq!(bad["is_error"], true);
    assert!(
        bad["text"].as_str().unwrap().starts_with(
            "error: bad subagent arguments: unknown field `agnet`, expected one of `agent`"
        ),
        "{bad}"
    );
    let tool = &steps["unknown_tool"];
    assert_eq!(tool["code"], -32602, "{tool}");
    assert_eq!(
        tool["mcp_error"],
        "unknown tool \"read\": quorum's tools are subagent and subagent_status"
    );

    // The session is quorum's like any: listed, with its agent...
    let listed = shell.run(&["sessions", "--all", "--json"]);
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let sessions: Vec<Value> = text(&listed.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let session = &sessions[0];
    assert_eq!(session["agents"], serde_json::json!(["fake"]));
    assert_eq!(session["running_tasks"], serde_json::json!([]));
    assert!(
        session["cwd"].as_str().unwrap().ends_with("/work"),
        "{session}"
    );
    // ... and replayed, its boxes and its background task drawn.
    let shot = shell.dir.path().join("shot.txt");
    let replayed = shell.run(&[
        "replay",
        session["path"].as_str().unwrap(),
        "--screenshot",
        shot.to_str().unwrap(),
        "--size",
        "140x50",
        "--panel",
        "on",
    ]);
    assert!(replayed.status.success(), "{}", text(&replayed.stderr));
    let screen = std::fs::read_to_string(&shot).unwrap();
    assert!(screen.contains("hello from mcp"), "{screen}");
    assert!(screen.contains("working done"), "{screen}");
    assert!(
        screen.contains(&task_id),
        "the task in the panel:\n{screen}"
    );

    // Nothing quorum started outlives the host's session.
    let left = common::models::leftovers(shell.dir.path());
    assert!(left.is_empty(), "left running: {left:?}");
}

#[test]
fn quorum_mcp_started_by_one_of_quorums_agents_refuses_to_serve() {
    let shell = shell_with("");
    let out = shell
        .command(&["mcp", "--no-record"])
        .env(quorum::serve::PROCESS_ENV, "4242")
        .stdin(Stdio::null())
        .output_bounded();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "quorum mcp: started by an agent of quorum (process 4242): quorum's tools are not given \
         to its own sub-agents (QUORUM_PROCESS is set)\n"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn quorum_mcp_ends_with_every_agent_on_sigterm_and_when_the_host_goes() {
    for how in ["stdin closed", "SIGTERM", "SIGHUP", "SIGINT"] {
        let shell = shell_with("");
        let record = shell.dir.path().join("session.jsonl");
        let (mut mcp, initialized) =
            common::mcp::start(shell.command(&["mcp", "--record", record.to_str().unwrap()]));
        assert!(
            initialized["result"]["serverInfo"].is_object(),
            "{initialized}"
        );
        // A call that runs until it is stopped: its agent is running.
        common::mcp::call(
            &mut mcp,
            serde_json::json!({"agent": "fake", "input": "slow 60"}),
        );
        let running = common::pty::wait_until(Duration::from_secs(20), || {
            common::models::processes_with_home(shell.dir.path())
                .iter()
                .any(|p| p.contains("quorum-fake-agent"))
        });
        assert!(running, "{how}: the agent never started");
        // The agent carries quorum's mark: a `quorum mcp` it started would
        // refuse to serve (no recursion).
        let agent = common::models::processes_with_home(shell.dir.path())
            .into_iter()
            .find(|p| p.contains("quorum-fake-agent"))
            .unwrap();
        let agent_pid = agent.split(' ').next().unwrap();
        let environ = std::fs::read(format!("/proc/{agent_pid}/environ")).unwrap();
        let mark = format!("{}={}", quorum::serve::PROCESS_ENV, mcp.child.id());
        assert!(
            environ.split(|b| *b == 0).any(|v| v == mark.as_bytes()),
            "{how}: the agent lacks {mark}"
        );
        let pid = nix::unistd::Pid::from_raw(mcp.child.id() as i32);
        match how {
            "stdin closed" => mcp.close(),
            "SIGTERM" => nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap(),
            "SIGHUP" => nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap(),
            _ => nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap(),
        }
        assert!(
            mcp.ended(common::mcp::WAIT),
            "{how}: quorum mcp did not end"
        );
        let left = common::models::leftovers(shell.dir.path());
        assert!(left.is_empty(), "{how}: left running: {left:?}");
        // Nothing lost: the transcript says the call was cancelled.
        let events = common::events(&record);
        let ended: Vec<_> = events
            .iter()
            .filter_map(|s| match &s.event {
                quorum::event::Event::SubagentFinished { stop_reason, .. } => Some(*stop_reason),
                _ => None,
            })
            .collect();
        assert_eq!(
            ended,
            [quorum::event::StopReason::Cancelled],
            "{how}: {events:?}"
        );
    }
}
