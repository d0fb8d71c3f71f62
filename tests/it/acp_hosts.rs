//! `quorum acp` as real ACP hosts see it: the ACP Python SDK's client
//! (PyPI `agent-client-protocol`, installed into `.tools/` by
//! scripts/install-acp-python.sh; tests/acp_client.py) and acpx (npm
//! `acpx` on a node 22 of its own, scripts/install-acpx.sh). The chat is a
//! scripted model that calls the fake agent in the foreground and in the
//! background; the host sees the tool calls, their updates, the plan and
//! the final text, answers a sub-agent's permission request, and loads the
//! session again after the process restarts. Nothing is left running.

use crate::common;

use std::time::Duration;

use serde_json::{Value, json};

use common::shell::{shell_with, text};

/// The updates of a step of one kind.
fn of_kind<'a>(step: &'a Value, kind: &str) -> Vec<&'a Value> {
    step["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

/// The agent's text in a step's updates.
fn said(step: &Value) -> String {
    of_kind(step, "agent_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

/// The last update of tool call `id` that set `field`.
fn last_with<'a>(step: &'a Value, id: &str, field: &str) -> Option<&'a Value> {
    step["updates"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|u| u["toolCallId"] == id && !u[field].is_null())
}

/// A tool call's text content.
fn content_text(update: &Value) -> String {
    update["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["content"]["text"].as_str())
        .collect()
}

/// The chat model: it asks the fake agent in the foreground, then starts
/// a background task, answers that task's report, then asks again (a
/// permission, and a call that costs money).
fn script(dir: &std::path::Path) -> std::path::PathBuf {
    let turns = json!([
        {"text": "Asking fake.", "tool_calls": [{"name": "subagent", "arguments":
            {"agent": "fake", "input": "slow 0.3 (streamed, then done)"}}]},
        {"text": "Starting a background task.", "tool_calls": [{"name": "subagent", "arguments":
            {"agent": "fake", "input": "slow 1", "run_in_background": true}}]},
        {"text": "Started it."},
        {"text": "The background task reported."},
        {"tool_calls": [
            {"name": "subagent", "arguments": {"agent": "fake", "input": "permission"}},
            {"name": "subagent", "arguments": {"agent": "fake", "input": "usage 1200 200000 0.04", "continue_session": false}}
        ]},
        {"text": "Permission handled."}
    ]);
    let path = dir.join("script.json");
    std::fs::write(&path, turns.to_string()).unwrap();
    path
}

#[test]
fn the_acp_python_sdk_drives_quorum_acp_and_loads_its_session_after_a_restart() {
    let python = common::install("install-acp-python.sh");
    let shell = shell_with("");
    let work = shell.dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let script = script(shell.dir.path());
    let client = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp_client.py");
    let args = |phase: &str| -> Vec<String> {
        vec![
            client.display().to_string(),
            env!("CARGO_BIN_EXE_quorum").to_string(),
            shell.config.display().to_string(),
            work.display().to_string(),
            script.display().to_string(),
            phase.to_string(),
        ]
    };
    let first: Vec<String> = args("first");
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    let out = shell.run_host(&work, &python, &first);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "the client failed:\n{stderr}");
    let steps = common::shell::steps(&out.stdout);
    assert!(
        steps.contains_key("closed"),
        "{stderr}\n{}",
        text(&out.stdout)
    );

    // quorum says what it can do.
    let caps = &steps["initialize"]["response"]["agentCapabilities"];
    assert_eq!(caps["loadSession"], true);
    assert_eq!(
        caps["sessionCapabilities"],
        json!({"list": {}, "resume": {}, "close": {}})
    );
    assert_eq!(caps["promptCapabilities"]["embeddedContext"], true);
    assert_eq!(caps["promptCapabilities"]["image"], false);
    assert_eq!(caps["mcpCapabilities"]["http"], true);
    assert_eq!(
        steps["initialize"]["response"]["agentInfo"]["name"],
        "quorum"
    );
    let sid = steps["new"]["session_id"].as_str().unwrap().to_string();

    // The foreground call: a tool call named after its agent and message,
    // pending, then in progress, its activity streamed into it, then
    // completed with the agent's report; the chat's text around it.
    let fg = &steps["foreground"];
    assert_eq!(fg["stop_reason"], "end_turn", "{fg}");
    let calls = of_kind(fg, "tool_call");
    assert_eq!(calls[0]["toolCallId"], "call-1");
    assert_eq!(calls[0]["title"], "fake · slow 0.3 (streamed, then done)");
    assert!(calls[0]["status"].is_null() || calls[0]["status"] == "pending");
    let statuses: Vec<&str> = of_kind(fg, "tool_call_update")
        .iter()
        .filter(|u| u["toolCallId"] == "call-1")
        .filter_map(|u| u["status"].as_str())
        .collect();
    assert_eq!(statuses, ["in_progress", "completed"], "{fg}");
    let streamed = of_kind(fg, "tool_call_update")
        .into_iter()
        .find(|u| u["toolCallId"] == "call-1" && u["status"].is_null())
        .expect("the call's activity, streamed while it runs");
    let so_far = content_text(streamed);
    assert!(
        !so_far.is_empty() && "working done".starts_with(&so_far),
        "{so_far:?}"
    );
    let done = last_with(fg, "call-1", "status").unwrap();
    assert_eq!(content_text(done), "working done");
    assert_eq!(
        said(fg),
        "Asking fake.Starting a background task.Started it.",
        "{fg}"
    );
    // The background call: its own tool call, and the plan's entry.
    assert_eq!(calls[1]["title"], "fake · slow 1 · background t1");
    let plan = of_kind(fg, "plan");
    assert_eq!(
        plan.last().unwrap()["entries"],
        json!([{"content": "t1 · fake · slow 1 (running)", "priority": "medium", "status": "in_progress"}])
    );

    // The task's report comes after the prompt's answer: its tool call
    // completes, its plan entry too, and the chat answers the report.
    let bg = &steps["background"];
    assert_eq!(bg["reported"], true, "{bg}");
    let done = last_with(bg, "call-2", "status").unwrap();
    assert_eq!(done["status"], "completed");
    assert_eq!(content_text(done), "working done");
    assert_eq!(
        of_kind(bg, "plan").last().unwrap()["entries"][0]["content"],
        "t1 · fake · slow 1 (done)"
    );
    assert!(said(bg).contains("The background task reported."));

    // The sub-agent's permission request reaches the host, naming the
    // agent and what it asks; the host's answer reaches the agent.
    let perm = &steps["permission"];
    assert_eq!(perm["stop_reason"], "end_turn", "{perm}");
    let asked = perm["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{perm}");
    assert_eq!(asked[0]["toolCall"]["title"], "fake: Delete build/");
    assert_eq!(asked[0]["toolCall"]["kind"], "delete");
    let options: Vec<(&str, &str)> = asked[0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["name"].as_str().unwrap(), o["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        options,
        [
            ("Allow once", "allow_once"),
            ("Allow always", "allow_always"),
            ("Reject", "reject_once")
        ]
    );
    let id = asked[0]["toolCall"]["toolCallId"].as_str().unwrap();
    assert_eq!(
        last_with(perm, id, "status").unwrap()["status"],
        "completed"
    );
    let permitted = of_kind(perm, "tool_call")
        .into_iter()
        .find(|c| c["title"] == "fake · permission")
        .unwrap();
    let call = permitted["toolCallId"].as_str().unwrap();
    let done = last_with(perm, call, "status").unwrap();
    assert_eq!(
        (done["status"].as_str(), content_text(done).as_str()),
        (Some("completed"), "permitted")
    );
    assert_eq!(said(perm), "Permission handled.");
    // The sub-agent's cost is the session's.
    let usage = of_kind(perm, "usage_update");
    assert_eq!(
        usage.last().unwrap()["cost"],
        json!({"amount": 0.04, "currency": "USD"})
    );

    // Bad input gets the error ACP names, saying what and why.
    let image = &steps["image"]["error"];
    assert_eq!(image["code"], -32602);
    assert!(
        image["message"]
            .as_str()
            .unwrap()
            .contains("prompt[1] is an image"),
        "{image}"
    );
    let unknown = &steps["unknown"]["error"];
    assert_eq!(unknown["code"], -32002);
    assert!(
        unknown["message"]
            .as_str()
            .unwrap()
            .contains("unknown session no-such-session"),
        "{unknown}"
    );

    // session/list: quorum's sessions of that directory.
    let listed = steps["list"]["response"]["sessions"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["sessionId"], sid.as_str());
    assert_eq!(
        listed[0]["title"],
        "Ask fake, then start a background task."
    );
    assert_eq!(
        std::path::Path::new(listed[0]["cwd"].as_str().unwrap()),
        work.canonicalize().unwrap()
    );
    let left = common::models::leftovers(shell.dir.path());
    assert!(left.is_empty(), "left running: {left:?}");

    // A new process: the host loads the session by its id, sees its
    // history again, and goes on with it.
    let again: Vec<String> = args("again").into_iter().chain([sid.clone()]).collect();
    let again: Vec<&str> = again.iter().map(String::as_str).collect();
    let out = shell.run_host(&work, &python, &again);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "the client failed:\n{stderr}");
    let steps = common::shell::steps(&out.stdout);
    let load = &steps["load"];
    let asked: Vec<&str> = of_kind(load, "user_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(
        asked,
        [
            "Ask fake, then start a background task.",
            "Delete the build, and count the cost."
        ]
    );
    let done = last_with(load, "call-1", "status").unwrap();
    assert_eq!(
        (done["status"].as_str(), content_text(done).as_str()),
        (Some("completed"), "working done")
    );
    assert!(said(load).contains("The background task reported."));
    let again = &steps["again"];
    assert_eq!(again["stop_reason"], "end_turn", "{again}");
    let call = of_kind(again, "tool_call")[0];
    assert_eq!(call["title"], "fake · echo after the restart");
    let id = call["toolCallId"].as_str().unwrap();
    assert_eq!(
        content_text(last_with(again, id, "status").unwrap()),
        "after the restart"
    );
    let left = common::models::leftovers(shell.dir.path());
    assert!(left.is_empty(), "left running: {left:?}");

    // The same session everywhere: `quorum sessions` lists it, with both
    // processes' work in its one transcript.
    let listed = shell.run(&["sessions", "--all", "--json"]);
    let line = text(&listed.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|s| s["id"] == sid.as_str())
        .unwrap_or_else(|| panic!("{}{}", text(&listed.stdout), text(&listed.stderr)));
    assert_eq!(
        line["first_message"],
        "Ask fake, then start a background task."
    );
    assert_eq!(line["agents"], json!(["fake"]));
    let events = common::events(std::path::Path::new(line["path"].as_str().unwrap()));
    let resumed = events
        .iter()
        .filter(|s| matches!(s.event, quorum::event::Event::SessionResumed { .. }))
        .count();
    assert_eq!(resumed, 1, "one transcript, continued once");
}

/// acpx (`acpx quorum …` with quorum in its config's agents) as a person
/// runs it: a session made, a prompt whose chat calls the fake agent in
/// the foreground and in the background, a permission the host answers
/// (`--approve-all`) in a new `quorum acp` process that resumes the
/// session, and a two-reviewer quorum.
/// A host that offers its files (`fs`, as Zed does) has sub-agents read
/// and write through it: a read sees its unsaved buffer, not the disk; a
/// write lands in the editor, not on disk. quorum checks each path first:
/// one outside the session directory, or in `.git`, never reaches it.
#[test]
fn sub_agents_read_and_write_through_a_host_that_offers_its_files() {
    let python = common::install("install-acp-python.sh");
    let shell = shell_with("");
    let work = shell.dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("notes.txt"), "saved on disk").unwrap();
    let script = script(shell.dir.path());
    let client = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp_client.py");
    let args = [
        client.display().to_string(),
        env!("CARGO_BIN_EXE_quorum").to_string(),
        shell.config.display().to_string(),
        work.display().to_string(),
        script.display().to_string(),
        "files".to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = shell.run_host(&work, &python, &args);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "the client failed:\n{stderr}");
    let steps = common::shell::steps(&out.stdout);
    assert!(
        steps.contains_key("files"),
        "{stderr}\n{}",
        text(&out.stdout)
    );
    let sid = steps["new"]["session_id"].as_str().unwrap();

    // Each step's sub-agent call: its report, as the host's last update
    // of the call gives it (the call's title echoes the prompt, and so its
    // paths: no test of what came back).
    let report = |step: &str| -> Value {
        let updates = steps[step]["updates"].as_array().unwrap();
        let last = updates
            .iter()
            .rev()
            .find(|u| u["status"] == "completed")
            .unwrap_or_else(|| panic!("{step}: no call completed: {updates:#?}"));
        last["rawOutput"].clone()
    };
    let said =
        |output: String| json!({"output": output, "stop_reason": "end_turn", "severity": null});
    assert_eq!(report("read"), said("read: unsaved in the editor".into()));
    assert_eq!(report("write"), said("wrote".into()));
    assert!(
        !work.join("made.txt").exists(),
        "the editor writes, not quorum"
    );
    let made = work.join("made.txt").display().to_string();
    assert_eq!(steps["files"]["buffers"][&made], "from the agent");
    // Refused by quorum before the host is asked.
    assert_eq!(
        report("outside"),
        said(format!(
            "read failed: /etc/hostname: outside the session directory {}",
            work.display()
        ))
    );
    assert_eq!(
        report("machinery"),
        said(format!(
            "write failed: {}: refused: it is inside the repository's .git, whose config and \
             hooks git runs; agents may not change it",
            work.join(".git/config").display()
        ))
    );
    let notes = work.join("notes.txt").display().to_string();
    assert_eq!(
        steps["files"]["requests"],
        json!([{"read": notes, "sessionId": sid}, {"write": made, "sessionId": sid}])
    );
}

#[test]
fn acpx_drives_quorum_acp_and_resumes_its_session_in_a_new_process() {
    let acpx = common::install("install-acpx.sh");
    let fake = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let shell = shell_with(&format!(
        "[agents.alpha]\ncommand = {fake:?}\nargs = [\"--review\", \"green\"]\n\
         [agents.beta]\ncommand = {fake:?}\nargs = [\"--review\", \"red\"]\n"
    ));
    let work = shell.dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let turns = json!([
        {"text": "Asking fake.", "tool_calls": [{"name": "subagent", "arguments":
            {"agent": "fake", "input": "echo hello from fake"}}]},
        {"text": "Starting a background task.", "tool_calls": [{"name": "subagent", "arguments":
            {"agent": "fake", "input": "slow 1", "run_in_background": true}}]},
        {"text": "Started it."},
        {"text": "The background task reported."}
    ]);
    let script = shell.dir.path().join("script.json");
    std::fs::write(&script, turns.to_string()).unwrap();
    // acpx's own config, in the test's home: quorum as an agent.
    let acpx_dir = shell.dir.path().join(".acpx");
    std::fs::create_dir(&acpx_dir).unwrap();
    let agent = json!({"agents": {"quorum": {
        "command": env!("CARGO_BIN_EXE_quorum"),
        "args": ["--config", shell.config, "acp", "--model", format!("script:{}", script.display())]
    }}});
    std::fs::write(acpx_dir.join("config.json"), agent.to_string()).unwrap();
    let home = shell.dir.path().to_path_buf();
    let run = |args: &[&str]| -> (String, String) {
        let out = shell.run_host(&work, &acpx, args);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "acpx {args:?}:\n{stdout}\n{stderr}");
        (stdout, stderr)
    };
    // Each acpx prompt's `quorum acp` goes when acpx lets it (`--ttl 1`).
    let gone = || {
        let ended = common::pty::wait_until(Duration::from_secs(30), || {
            !common::models::processes_with_home(&home)
                .iter()
                .any(|p| p.contains(" acp"))
        });
        assert!(ended, "quorum acp still runs");
    };

    let (stdout, stderr) = run(&["quorum", "sessions", "new"]);
    let sid = stdout.lines().last().unwrap_or_default().trim().to_string();
    assert!(
        stderr.contains(&format!("created session cwd ({sid})")),
        "{stdout}\n{stderr}"
    );
    gone();

    let (stdout, _) = run(&[
        "--approve-all",
        "--ttl",
        "1",
        "quorum",
        "Ask fake, then start a background task.",
    ]);
    for line in [
        "[client] session/resume (running)",
        "Asking fake.",
        "[tool] fake · echo hello from fake (running)",
        "[tool] fake · echo hello from fake (completed)",
        "    hello from fake",
        "Starting a background task.",
        "[tool] fake · slow 1 · background t1 (running)",
        "Started it.",
        "[plan]",
        "  - [in_progress] t1 · fake · slow 1 (running)",
        "[done] end_turn",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "no {line:?} in:\n{stdout}"
        );
    }
    gone();

    // A new process again: the session resumed, the sub-agent's
    // permission asked of the host, which allows it.
    let (stdout, _) = run(&["--approve-all", "--ttl", "1", "quorum", "@fake permission"]);
    for line in [
        "[client] session/resume (running)",
        "[client] session/request_permission (running)",
        "[tool] fake: Delete build/ (completed)",
        "[tool] fake · permission (completed)",
        "    permitted",
        "[done] end_turn",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "no {line:?} in:\n{stdout}"
        );
    }
    gone();

    // A review quorum of two: each reviewer a tool call with its verdict,
    // and the quorum its own.
    let (stdout, _) = run(&[
        "--approve-all",
        "quorum",
        "exec",
        "@alpha,beta? review the diff",
    ]);
    println!("acpx quorum exec \"@alpha,beta? review the diff\":\n{stdout}");
    for line in [
        "[tool] review quorum · 2 reviewers (running)",
        "[tool] alpha · review · green (completed)",
        "[tool] beta · review · red (completed)",
        "    Looks red.",
        "[tool] review quorum · red · 1 of 2 (completed)",
        "    alpha: green",
        "    beta: red",
        "[done] end_turn",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "no {line:?} in:\n{stdout}"
        );
    }
    let left = common::models::leftovers(&home);
    assert!(left.is_empty(), "left running: {left:?}");

    // The session acpx made is quorum's: listed, and continued twice.
    let listed = shell.run(&["sessions", "--all", "--json"]);
    let line = text(&listed.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|s| s["id"] == sid.as_str())
        .unwrap_or_else(|| panic!("{}", text(&listed.stdout)));
    assert_eq!(
        line["first_message"],
        "Ask fake, then start a background task."
    );
    let events = common::events(std::path::Path::new(line["path"].as_str().unwrap()));
    let resumed = events
        .iter()
        .filter(|s| matches!(s.event, quorum::event::Event::SessionResumed { .. }))
        .count();
    assert_eq!(resumed, 2, "two more processes went on with it");
}
