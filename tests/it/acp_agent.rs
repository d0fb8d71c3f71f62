//! `quorum acp` on the wire, driven line by line as a host would: child
//! sessions for a host that advertises `subagents`, the errors bad input
//! gets, and nothing left running however the host ends it (stdin closed,
//! SIGTERM, killed). `quorum_acp_latency` (ignored; run it by name) measures
//! what quorum adds between a sub-agent's chunk and the host.

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::jsonrpc::{Peer, WAIT, json_line};
use common::shell::{Shell, shell_with};

/// `quorum acp` and what it said.
struct Host(Peer);

impl std::ops::Deref for Host {
    type Target = Peer;
    fn deref(&self) -> &Peer {
        &self.0
    }
}

impl std::ops::DerefMut for Host {
    fn deref_mut(&mut self) -> &mut Peer {
        &mut self.0
    }
}

impl Host {
    fn start(shell: &Shell, args: &[&str]) -> Self {
        let mut full = vec!["acp"];
        full.extend_from_slice(args);
        Self::spawn(shell.command(&full))
    }

    fn spawn(command: std::process::Command) -> Self {
        Self(Peer::spawn(command, Stdio::null(), WAIT))
    }

    fn initialize(&mut self, caps: Value) {
        let id = self.send(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": caps}),
        );
        assert_eq!(self.answer(id)["result"]["protocolVersion"], 1);
    }

    fn new_session(&mut self, cwd: &std::path::Path) -> String {
        let id = self.send("session/new", json!({"cwd": cwd, "mcpServers": []}));
        let answer = self.answer(id);
        answer["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("{answer}"))
            .to_string()
    }

    fn prompt(&mut self, session: &str, text: &str) -> u64 {
        self.send(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
    }

    /// The updates of session `session` seen so far.
    fn updates(&self, session: &str) -> Vec<&Value> {
        self.seen
            .iter()
            .filter(|v| v["method"] == "session/update" && v["params"]["sessionId"] == session)
            .map(|v| &v["params"]["update"])
            .collect()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn work(shell: &Shell) -> std::path::PathBuf {
    let work = shell.dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    work.canonicalize().unwrap()
}

#[test]
fn a_host_that_takes_subagents_gets_each_call_as_a_child_session() {
    let shell = shell_with("");
    let work = work(&shell);
    let mut host = Host::start(&shell, &[]);
    host.initialize(json!({"subagents": {}}));
    let sid = host.new_session(&work);
    let prompt = host.prompt(&sid, "@fake permission");
    // The child's permission request comes on the child session, about its
    // agent's own tool call.
    let asked = host.wait_for(0, "a permission request", |v| {
        v["method"] == "session/request_permission"
    });
    let request = host.seen[asked].clone();
    let child = format!("{sid}/call-1");
    assert_eq!(request["params"]["sessionId"], child.as_str(), "{request}");
    assert_eq!(request["params"]["toolCall"]["toolCallId"], "p1");
    assert_eq!(
        request["params"]["toolCall"]["title"],
        "fake: Delete build/"
    );
    let answer = json!({"jsonrpc": "2.0", "id": request["id"],
        "result": {"outcome": {"outcome": "selected", "optionId": "0"}}});
    host.write(&answer.to_string());
    assert_eq!(host.answer(prompt)["result"]["stopReason"], "end_turn");

    // On the session: the child announced (title, what it does, that it
    // can be cancelled, its state), and the call's tool call pointing at it.
    let main = host.updates(&sid);
    let announced: Vec<&&Value> = main
        .iter()
        .filter(|u| u["sessionUpdate"] == "subagent_update")
        .collect();
    assert_eq!(announced[0]["sessionId"], child.as_str());
    assert_eq!(announced[0]["title"], "fake · permission");
    assert_eq!(announced[0]["description"], "permission");
    assert_eq!(announced[0]["capabilities"], json!({"cancel": {}}));
    assert_eq!(announced[0]["state"]["state"], "running");
    let states: Vec<&str> = announced
        .iter()
        .filter_map(|u| u["state"]["state"].as_str())
        .collect();
    assert_eq!(states, ["running", "requires_action", "running", "idle"]);
    let call = main
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .unwrap();
    assert_eq!(call["toolCallId"], "call-1");
    assert_eq!(
        call["content"][0],
        json!({"type": "session", "sessionId": child})
    );
    let done = main
        .iter()
        .rfind(|u| u["toolCallId"] == "call-1" && !u["status"].is_null())
        .unwrap();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["content"][1]["content"]["text"], "permitted");
    // On the child session: the message it was given, its agent's tool
    // call and text, as the agent sent them.
    let kids = host.updates(&child);
    assert_eq!(kids[0]["sessionUpdate"], "user_message_chunk");
    assert_eq!(kids[0]["content"]["text"], "permission");
    let tool = kids
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .unwrap();
    assert_eq!(
        (&tool["toolCallId"], &tool["title"], &tool["kind"]),
        (&json!("p1"), &json!("Delete build/"), &json!("delete"))
    );
    let text: String = kids
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "permitted");

    // A child session takes no prompt; its cancel stops its call alone.
    let id = host.prompt(&child, "hello");
    let refused = host.answer(id);
    assert_eq!(refused["error"]["code"], -32600);
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is the child session of call call-1"),
        "{refused}"
    );
    let from = host.seen.len();
    let prompt = host.prompt(&sid, "@fake slow 30");
    host.wait_for(from, "the second call's child", |v| {
        v["params"]["update"]["sessionUpdate"] == "subagent_update"
            && v["params"]["update"]["sessionId"] == format!("{sid}/call-2")
    });
    host.notify(
        "session/cancel",
        json!({"sessionId": format!("{sid}/call-2")}),
    );
    let answer = host.answer(prompt);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let done = host
        .updates(&sid)
        .into_iter()
        .rfind(|u| u["toolCallId"] == "call-2" && !u["status"].is_null())
        .unwrap();
    assert_eq!(
        (done["status"].as_str(), done["title"].as_str()),
        (Some("failed"), Some("fake · slow 30 · cancelled"))
    );
}

#[test]
fn bad_input_gets_the_error_json_rpc_names_and_says_why() {
    let shell = shell_with("");
    let work = work(&shell);
    let mut host = Host::start(&shell, &[]);
    host.initialize(json!({}));
    let sid = host.new_session(&work);
    let error = |host: &mut Host, id: u64| host.answer(id)["error"].clone();

    // Not JSON: a parse error (the line it could not read in `data`).
    host.write("{this is not json");
    let i = host.wait_for(0, "a parse error", |v| v["error"]["code"] == -32700);
    assert_eq!(host.seen[i]["id"], Value::Null);
    // A request without what it needs.
    let id = host.send("session/prompt", json!({"sessionId": sid}));
    assert_eq!(error(&mut host, id)["code"], -32602);
    // A method quorum does not have.
    let id = host.send("session/fork", json!({"sessionId": sid, "cwd": work}));
    assert_eq!(error(&mut host, id)["code"], -32601);
    // A session that is not open here.
    let id = host.prompt("nope", "hello");
    let e = error(&mut host, id);
    assert_eq!(e["code"], -32002);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("unknown session nope"),
        "{e}"
    );
    let id = host.send(
        "session/load",
        json!({"sessionId": "nope", "cwd": work, "mcpServers": []}),
    );
    let e = error(&mut host, id);
    assert_eq!(e["code"], -32002, "{e}");
    // A relative directory that is not there: named as quorum read it
    // (against its own working directory).
    let id = host.send(
        "session/new",
        json!({"cwd": "no-such-dir", "mcpServers": []}),
    );
    let e = error(&mut host, id);
    assert_eq!(e["code"], -32602);
    let missing = shell.dir.path().canonicalize().unwrap().join("no-such-dir");
    assert!(
        e["message"].as_str().unwrap().contains(&format!(
            "cannot open a quorum session in {}",
            missing.display()
        )),
        "{e}"
    );
    // Content quorum does not take: audio.
    let id = host.send(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]}),
    );
    let e = error(&mut host, id);
    assert_eq!(e["code"], -32602);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("prompt[0] is audio"),
        "{e}"
    );
    // A second prompt while one runs.
    let running = host.prompt(&sid, "@fake slow 30");
    host.wait_for(0, "the call running", |v| {
        v["params"]["update"]["toolCallId"] == "call-1"
            && v["params"]["update"]["status"] == "in_progress"
    });
    let id = host.prompt(&sid, "and another");
    let e = error(&mut host, id);
    assert_eq!(e["code"], -32600);
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("is still answering a prompt"),
        "{e}"
    );
    // session/cancel ends the running one, cancelled.
    host.notify("session/cancel", json!({"sessionId": sid}));
    assert_eq!(host.answer(running)["result"]["stopReason"], "cancelled");
    // Without a chat, a plain message is told how to set one.
    let from = host.seen.len();
    let id = host.prompt(&sid, "hello?");
    assert_eq!(host.answer(id)["result"]["stopReason"], "end_turn");
    let said: String = host.seen[from..]
        .iter()
        .filter(|v| v["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|v| v["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(
        said.contains("quorum has no chat model") && said.contains("--model PROVIDER:NAME"),
        "{said}"
    );
}

/// The text of call `call`'s last update that set its status.
fn call_text(host: &Host, session: &str, call: &str) -> String {
    let done = host
        .updates(session)
        .into_iter()
        .rfind(|u| u["toolCallId"] == call && !u["status"].is_null())
        .unwrap_or_else(|| panic!("no status of {call}: {:#?}", host.seen));
    done["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["content"]["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A client that sends a relative `cwd` (the ACP Rust SDK's own `yopo`
/// sends `.`) gets a session in quorum's working directory, not an error;
/// `session/list` takes one as well.
#[test]
fn a_relative_cwd_is_quorums_working_directory() {
    let shell = shell_with("");
    let here = shell.dir.path().canonicalize().unwrap();
    // quorum acp runs in the shell's directory.
    let mut host = Host::start(&shell, &[]);
    host.initialize(json!({}));
    let id = host.send("session/new", json!({"cwd": ".", "mcpServers": []}));
    let answer = host.answer(id);
    let sid = answer["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("session/new with cwd \".\" failed: {answer}"))
        .to_string();
    // The agent starts in the session's directory: quorum's own.
    let prompt = host.prompt(&sid, "@fake own run pwd");
    assert_eq!(host.answer(prompt)["result"]["stopReason"], "end_turn");
    let said = call_text(&host, &sid, "call-1");
    assert!(
        said.contains(&format!("own ran: exit status: 0\n{}\n", here.display())),
        "{said}"
    );
    let id = host.send("session/list", json!({"cwd": "."}));
    let listed = host.answer(id);
    let sessions = listed["result"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(
        sessions
            .iter()
            .any(|s| s["sessionId"] == sid.as_str() && s["cwd"] == here.to_str().unwrap()),
        "{listed}"
    );
}

/// When quorum serves an editor that offers its files, a sub-agent's write
/// is checked by quorum and made by the editor, later. A folder on the way
/// swapped for a link out in between (as a sandboxed agent could swap it)
/// is caught when the editor answers: the agent is told the write was not
/// safe, naming the path and where the link leads, and so is the host.
#[test]
fn a_folder_swapped_for_a_link_while_the_editor_writes_is_named() {
    let shell = shell_with("");
    let work = work(&shell);
    std::fs::create_dir(work.join("sub")).unwrap();
    // Outside the session directory (and outside /tmp).
    let outside = tempfile::Builder::new()
        .prefix("quorum-probe-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let mut host = Host::start(&shell, &[]);
    host.initialize(json!({"fs": {"readTextFile": true, "writeTextFile": true}}));
    let sid = host.new_session(&work);
    let target = work.join("sub/notes.txt");
    let prompt = host.prompt(&sid, &format!("@fake write {} hello", target.display()));
    let asked = host.wait_for(0, "the write asked of the editor", |v| {
        v["method"] == "fs/write_text_file"
    });
    let request = host.seen[asked].clone();
    assert_eq!(request["params"]["path"], target.to_str().unwrap());
    // Between quorum's check and the editor's write: the folder becomes a
    // link out, and the editor writes the path it was given (following
    // links, as editors do).
    std::fs::rename(work.join("sub"), work.join("sub.before")).unwrap();
    std::os::unix::fs::symlink(outside.path(), work.join("sub")).unwrap();
    std::fs::write(&target, request["params"]["content"].as_str().unwrap()).unwrap();
    assert!(outside.path().join("notes.txt").exists());
    host.write(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {}}).to_string());
    assert_eq!(host.answer(prompt)["result"]["stopReason"], "end_turn");
    let said = call_text(&host, &sid, "call-1");
    assert!(said.lines().all(|l| l != "wrote"), "{said}");
    assert!(said.contains("write failed:"), "{said}");
    assert!(said.contains(target.to_str().unwrap()), "{said}");
    assert!(said.contains(outside.path().to_str().unwrap()), "{said}");
}

/// What a recorded session says of how its calls ended.
fn endings(record: &std::path::Path) -> Vec<quorum::event::StopReason> {
    common::events(record)
        .iter()
        .filter_map(|s| match &s.event {
            quorum::event::Event::SubagentFinished { stop_reason, .. } => Some(*stop_reason),
            _ => None,
        })
        .collect()
}

#[test]
fn nothing_is_left_running_however_the_host_ends_it() {
    for how in ["stdin closed", "SIGTERM", "killed"] {
        let shell = shell_with("");
        let work = work(&shell);
        let mut host = Host::start(&shell, &[]);
        host.initialize(json!({}));
        let sid = host.new_session(&work);
        // A call mid-turn, and a background task: both have agents running.
        let background = host.prompt(&sid, "@fake! slow 60");
        assert_eq!(host.answer(background)["result"]["stopReason"], "end_turn");
        host.prompt(&sid, "@fake slow 60");
        for call in ["call-1", "call-2"] {
            host.wait_for(0, &format!("{how}: {call} running"), |v| {
                v["params"]["update"]["toolCallId"] == call
                    && v["params"]["update"]["status"] == "in_progress"
            });
        }
        let running = common::pty::wait_until(WAIT, || {
            common::models::processes_with_home(shell.dir.path())
                .iter()
                .any(|p| p.contains("quorum-fake-agent"))
        });
        assert!(running, "{how}: the agents never started");
        let pid = nix::unistd::Pid::from_raw(host.child.id() as i32);
        match how {
            "stdin closed" => drop(host.stdin.take()),
            "SIGTERM" => nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap(),
            _ => nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap(),
        }
        assert!(host.ended(WAIT), "{how}: quorum acp did not end");
        let left = common::models::leftovers(shell.dir.path());
        assert!(left.is_empty(), "{how}: left running: {left:?}");
        // Nothing recorded is lost: a host that went gets its calls ended
        // as cancelled in the transcript; a kill leaves what was written.
        let record = shell
            .dir
            .path()
            .join(format!("state/quorum/sessions/{sid}.jsonl"));
        let ended = endings(&record);
        if how == "killed" {
            assert!(ended.is_empty(), "{how}: {ended:?}");
            assert!(common::events(&record).len() > 3);
        } else {
            assert_eq!(ended, [quorum::event::StopReason::Cancelled; 2], "{how}");
        }
    }
}

/// The extra time quorum adds between a sub-agent writing a chunk and the
/// host reading it: the fake agent stamps each chunk with the wall clock
/// (`stamps N MS`), read once straight from the agent (the baseline, a host
/// of the agent itself) and once through `quorum acp` (the call's child
/// session carries each chunk as the agent sent it). Prints the medians.
///
/// `cargo test --release --test acp_agent quorum_acp_latency -- --ignored --nocapture`
#[test]
#[ignore]
fn quorum_acp_latency() {
    const CHUNKS: usize = 200;
    let shell = shell_with("");
    let work = work(&shell);
    let now_us = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as i64
    };
    let delays = |host: &mut Host, session: &str| -> Vec<i64> {
        let mut delays = Vec::new();
        let deadline = Instant::now() + WAIT;
        while delays.len() < CHUNKS && Instant::now() < deadline {
            let Ok(v) = host.lines.recv_timeout(WAIT).map(|l| json_line(&l)) else {
                break;
            };
            let arrived = now_us();
            let u = &v["params"]["update"];
            if v["params"]["sessionId"] == session
                && u["sessionUpdate"] == "agent_message_chunk"
                && let Some(stamp) = u["content"]["text"]
                    .as_str()
                    .and_then(|t| t.trim().strip_prefix("t="))
                    .and_then(|t| t.parse::<i64>().ok())
            {
                delays.push(arrived - stamp);
            }
            host.seen.push(v);
        }
        delays
    };
    let median = |mut v: Vec<i64>| {
        v.sort_unstable();
        v[v.len() / 2]
    };

    // The agent alone.
    let mut direct = Host::spawn(std::process::Command::new(env!(
        "CARGO_BIN_EXE_quorum-fake-agent"
    )));
    direct.initialize(json!({}));
    let session = direct.new_session(&work);
    direct.prompt(&session, &format!("stamps {CHUNKS} 5"));
    let alone = delays(&mut direct, &session);
    assert_eq!(alone.len(), CHUNKS);

    // Through quorum acp, on the call's child session.
    let mut host = Host::start(&shell, &[]);
    host.initialize(json!({"subagents": {}}));
    let sid = host.new_session(&work);
    host.prompt(&sid, &format!("@fake stamps {CHUNKS} 5"));
    let through = delays(&mut host, &format!("{sid}/call-1"));
    assert_eq!(through.len(), CHUNKS);
    let (a, t) = (median(alone), median(through));
    println!(
        "latency, median of {CHUNKS} chunks: agent alone {a} µs, through quorum acp {t} µs: quorum adds {} µs",
        t - a
    );
}

#[test]
fn a_conductor_chat_calls_quorums_tools_and_its_own_requests_reach_the_host() {
    let shell = shell_with("");
    let work = work(&shell);
    let mut host = Host::start(&shell, &["--model", "acp:fake"]);
    host.initialize(json!({}));
    let sid = host.new_session(&work);
    // The conductor's answer is the chat's text.
    let id = host.prompt(&sid, "echo I am the conductor");
    assert_eq!(host.answer(id)["result"]["stopReason"], "end_turn");
    let said: String = host
        .updates(&sid)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(said, "I am the conductor");
    // Its call of quorum's `subagent` tool (over the MCP server quorum
    // hands it) is a sub-agent call the host sees as such.
    let from = host.seen.len();
    let id = host.prompt(
        &sid,
        r#"mcp subagent {"agent": "fake", "input": "echo from the box"}"#,
    );
    assert_eq!(host.answer(id)["result"]["stopReason"], "end_turn");
    let updates: Vec<&Value> = host.seen[from..]
        .iter()
        .map(|v| &v["params"]["update"])
        .collect();
    let call = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .unwrap();
    assert_eq!(call["title"], "fake · echo from the box");
    let done = updates
        .iter()
        .rfind(|u| u["toolCallId"] == call["toolCallId"] && !u["status"].is_null())
        .unwrap();
    assert_eq!(done["content"][0]["content"]["text"], "from the box");
    // The conductor's own permission request is the host's to answer,
    // naming the conductor, on its tool line.
    let id = host.prompt(&sid, "permission");
    let asked = host.wait_for(0, "the conductor's request", |v| {
        v["method"] == "session/request_permission"
    });
    let request = host.seen[asked].clone();
    assert_eq!(
        request["params"]["toolCall"]["title"],
        "fake: Delete build/"
    );
    assert_eq!(request["params"]["toolCall"]["toolCallId"], "tool:p1");
    let answer = json!({"jsonrpc": "2.0", "id": request["id"],
        "result": {"outcome": {"outcome": "selected", "optionId": "0"}}});
    host.write(&answer.to_string());
    assert_eq!(host.answer(id)["result"]["stopReason"], "end_turn");
    let last = host.updates(&sid).into_iter().next_back().unwrap().clone();
    assert_eq!(last["content"]["text"], "permitted", "{last}");
    drop(host.stdin.take());
    assert!(host.ended(WAIT));
    let left = common::models::leftovers(shell.dir.path());
    assert!(left.is_empty(), "left running: {left:?}");
}

/// With no model chosen, `quorum acp`'s chat is the default one, as the
/// TUI's: here the only agent installed, the fake one. (Before issue 37:
/// no chat, and a plain prompt was told how to set one.)
#[test]
fn quorum_acp_takes_the_default_chat() {
    let shell = shell_with("");
    let work = work(&shell);
    let mut command = shell.command(&["acp"]);
    // The tests keep the chat off (`main.rs`): here it is the default's.
    command.env_remove("QUORUM_MODEL");
    let mut host = Host::spawn(command);
    host.initialize(json!({}));
    let sid = host.new_session(&work);
    let id = host.prompt(&sid, "echo the default answers");
    assert_eq!(host.answer(id)["result"]["stopReason"], "end_turn");
    let said: String = host
        .updates(&sid)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(said, "the default answers");
    drop(host.stdin.take());
    assert!(host.ended(WAIT));
}

#[test]
fn a_sub_agents_question_is_the_hosts_to_answer() {
    let shell = shell_with("");
    let work = work(&shell);
    let mut host = Host::start(&shell, &[]);
    host.initialize(json!({"elicitation": {"form": {}}}));
    let sid = host.new_session(&work);
    let id = host.prompt(&sid, "@fake form");
    let asked = host.wait_for(0, "the question", |v| v["method"] == "elicitation/create");
    let request = host.seen[asked].clone();
    let params = &request["params"];
    assert_eq!(params["message"], "fake asks: A few details, please");
    assert_eq!(params["mode"], "form");
    assert_eq!(params["sessionId"], sid.as_str());
    let schema = &params["requestedSchema"];
    assert_eq!(schema["properties"]["name"]["title"], "Your name");
    assert_eq!(schema["required"], json!(["colour", "name"]));
    let answer = json!({"jsonrpc": "2.0", "id": request["id"],
        "result": {"action": "accept", "content": {"name": "Ann", "colour": "red"}}});
    host.write(&answer.to_string());
    assert_eq!(host.answer(id)["result"]["stopReason"], "end_turn");
    let done = host
        .updates(&sid)
        .into_iter()
        .rfind(|u| u["toolCallId"] == "call-1" && !u["status"].is_null())
        .unwrap()
        .clone();
    let report = done["content"][0]["content"]["text"].as_str().unwrap();
    assert!(
        report.contains(r#"form answered: accept {"colour":"red","name":"Ann""#),
        "{report}"
    );
}

#[test]
fn the_hosts_mcp_servers_go_to_the_conductor_and_where_the_config_says_to_sub_agents() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let shell = shell_with(&format!(
        "args = [\"--mcp-log\", {:?}]\n\n[acp]\nshare_mcp_servers = true\n",
        log.path()
    ));
    let work = work(&shell);
    let mut host = Host::start(&shell, &["--model", "acp:fake"]);
    host.initialize(json!({}));
    let servers =
        json!([{"name": "docs", "command": "/bin/true", "args": ["--read-only"], "env": []}]);
    let id = host.send("session/new", json!({"cwd": work, "mcpServers": servers}));
    let sid = host.answer(id)["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    // The conductor's session, then a sub-agent's.
    let id = host.prompt(&sid, "echo hi");
    assert_eq!(host.answer(id)["result"]["stopReason"], "end_turn");
    let id = host.prompt(&sid, "@fake echo hello");
    assert_eq!(host.answer(id)["result"]["stopReason"], "end_turn");
    let seen: Vec<Vec<String>> = std::fs::read_to_string(log.path())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| {
            v["mcpServers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["name"].as_str().unwrap().to_string())
                .collect()
        })
        .collect();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(
        seen[0],
        ["docs", "quorum"],
        "the conductor: the host's and quorum's own"
    );
    assert_eq!(seen[1], ["docs"], "a sub-agent: the host's, shared");
    // session/close ends it: a prompt for it afterwards is for no session.
    let id = host.send("session/close", json!({"sessionId": sid}));
    assert_eq!(host.answer(id)["result"], json!({}));
    let id = host.prompt(&sid, "hello");
    assert_eq!(host.answer(id)["error"]["code"], -32002);
    // Its agents are gone; quorum acp serves on.
    let gone = common::pty::wait_until(WAIT, || {
        !common::models::processes_with_home(shell.dir.path())
            .iter()
            .any(|p| p.contains("quorum-fake-agent") || p.contains("mcp-connect"))
    });
    assert!(gone, "a closed session's agents still run");
    assert!(host.child.try_wait().unwrap().is_none());
    drop(host.stdin.take());
    assert!(host.ended(WAIT));
    let left = common::models::leftovers(shell.dir.path());
    assert!(left.is_empty(), "left running: {left:?}");
}

/// `quorum acp` under `[budget]`: a prompt's call spends $0.30 of $0.20;
/// the next call is refused, saying why; when the host goes, quorum exits
/// 4.
#[test]
fn a_session_stopped_by_the_budget_ends_quorum_acp_with_exit_4() {
    let shell = shell_with("[budget]\nsession_usd = 0.20\n");
    let work = work(&shell);
    let mut host = Host::start(&shell, &["--no-record"]);
    host.initialize(json!({}));
    let sid = host.new_session(&work);
    let first = host.prompt(&sid, "@fake usage 1000 200000 0.30");
    let answer = host.answer(first);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let second = host.prompt(&sid, "@fake hello");
    host.answer(second);
    let said = host
        .updates(&sid)
        .iter()
        .map(|u| u.to_string())
        .collect::<String>();
    assert!(
        said.contains("budget: the session has spent $0.30 of its $0.20 cap: no new call starts"),
        "{said}"
    );
    drop(host.stdin.take());
    assert!(
        host.ended(Duration::from_secs(30)),
        "quorum acp did not end"
    );
    assert_eq!(
        host.child.try_wait().unwrap().and_then(|s| s.code()),
        Some(4)
    );
}
