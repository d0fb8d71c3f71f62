//! `quorum call` against its floor (`cargo bench --bench acp_stream`).
//!
//! The fake agent streams 100,000 message chunks in one turn. The floor is
//! a bare reader: it spawns the same agent, sends the same three requests,
//! and reads and parses every line as JSON until the turn's answer. The
//! ratio is `quorum call`'s time over the floor's; the target is under 1.5.
//! Prints figures; asserts nothing.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHUNKS: u32 = 100_000;
const RUNS: usize = 5;

fn floor(agent: &str, dir: &std::path::Path) -> Duration {
    let start = Instant::now();
    let mut child = Command::new(agent)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("fake agent starts");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = |line: String| {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    // Reads until the answer to `id`, parsing every line.
    let mut until = |id: u64| -> serde_json::Value {
        loop {
            let line = lines.next().expect("agent answers").unwrap();
            let v: serde_json::Value = serde_json::from_str(&line).expect("JSON");
            if v.get("id").and_then(|i| i.as_u64()) == Some(id) && v.get("method").is_none() {
                return v;
            }
        }
    };
    send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true}}}}"#.into());
    until(1);
    send(format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"session/new","params":{{"cwd":{:?},"mcpServers":[]}}}}"#,
        dir.display().to_string()
    ));
    let session = until(2)["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    send(format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{{"sessionId":{session:?},"prompt":[{{"type":"text","text":"stream {CHUNKS}"}}]}}}}"#
    ));
    let answer = until(3);
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    let elapsed = start.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    elapsed
}

fn quorum_call(config: &std::path::Path, dir: &std::path::Path) -> Duration {
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_quorum"))
        .arg("--config")
        .arg(config)
        .args([
            "call",
            "--agent",
            "fake",
            "--input",
            &format!("stream {CHUNKS}"),
            "--cwd",
        ])
        .arg(dir)
        .stderr(Stdio::null())
        .output()
        .expect("quorum runs");
    let elapsed = start.elapsed();
    assert!(out.status.success());
    assert_eq!(
        out.stdout.len(),
        CHUNKS as usize + 1,
        "all chunks in the output"
    );
    elapsed
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let agent = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quorum.toml");
    std::fs::write(&config, format!("[agents.fake]\ncommand = {agent:?}\n")).unwrap();
    let floor = median((0..RUNS).map(|_| floor(agent, dir.path())).collect());
    let quorum = median(
        (0..RUNS)
            .map(|_| quorum_call(&config, dir.path()))
            .collect(),
    );
    println!("acp stream: {CHUNKS} message chunks in one turn, median of {RUNS}");
    println!(
        "  bare reader (floor): {:8.1} ms",
        floor.as_secs_f64() * 1000.0
    );
    println!(
        "  quorum call:         {:8.1} ms",
        quorum.as_secs_f64() * 1000.0
    );
    println!(
        "  ratio: {:.2}x (target under 1.5x)",
        quorum.as_secs_f64() / floor.as_secs_f64()
    );
}
