//! `quorum call` against its floors (`cargo bench --bench acp_stream`).
//!
//! The fake agent streams 100,000 message chunks in one turn, each sent
//! through the ACP SDK one by one, as a real agent sends them. Two floors
//! spawn the same agent and send the same three requests:
//! - the pipe: the agent alone writing its turn into a pipe; the reader
//!   only looks for the turn's answer in the bytes (no JSON parsed);
//! - a bare reader: it parses every line as JSON until the turn's answer.
//!
//! The ratio that counts is `quorum call`'s time over the pipe's; the
//! target is under 1.5. Runs alternate, so a slow moment of the machine
//! costs all three alike. Prints figures; asserts nothing.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHUNKS: u32 = 100_000;
const RUNS: usize = 5;

/// How the floor reads the agent's stdout.
#[derive(Clone, Copy)]
enum Reader {
    /// Lines as bytes; only the answer is looked for.
    Pipe,
    /// Every line parsed as JSON.
    Json,
}

fn floor(agent: &str, dir: &std::path::Path, reader: Reader) -> Duration {
    let start = Instant::now();
    let mut child = Command::new(agent)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("fake agent starts");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::with_capacity(64 * 1024, child.stdout.take().unwrap()).split(b'\n');
    let mut send = |line: String| {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    // Reads until the answer to `id`.
    let mut until = |id: u64| -> serde_json::Value {
        let answer = format!("\"id\":{id},");
        loop {
            let line = lines.next().expect("agent answers").unwrap();
            match reader {
                Reader::Pipe => {
                    // Notifications carry no id; requests to the client
                    // carry a method.
                    let text = String::from_utf8_lossy(&line);
                    if text.contains(&answer) && !text.contains("\"method\"") {
                        return serde_json::from_str(&text).expect("JSON");
                    }
                }
                Reader::Json => {
                    let v: serde_json::Value = serde_json::from_slice(&line).expect("JSON");
                    if v.get("id").and_then(|i| i.as_u64()) == Some(id) && v.get("method").is_none()
                    {
                        return v;
                    }
                }
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
        r#"{{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{{"sessionId":{session:?},"prompt":[{{"type":"text","text":"sdkstream {CHUNKS}"}}]}}}}"#
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
            &format!("sdkstream {CHUNKS}"),
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
    let (mut pipe, mut json, mut quorum) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        pipe.push(floor(agent, dir.path(), Reader::Pipe));
        json.push(floor(agent, dir.path(), Reader::Json));
        quorum.push(quorum_call(&config, dir.path()));
    }
    let (pipe, json, quorum) = (median(pipe), median(json), median(quorum));
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("acp stream: {CHUNKS} message chunks in one turn, median of {RUNS}");
    println!("  agent into a pipe (floor): {:8.1} ms", ms(pipe));
    println!("  bare JSON reader:          {:8.1} ms", ms(json));
    println!("  quorum call:               {:8.1} ms", ms(quorum));
    println!(
        "  ratio quorum / pipe: {:.2}x (target under 1.5x); quorum / JSON reader: {:.2}x",
        quorum.as_secs_f64() / pipe.as_secs_f64(),
        quorum.as_secs_f64() / json.as_secs_f64()
    );
}
