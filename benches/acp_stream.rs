//! `quorum call` against its floors (`cargo bench --bench acp_stream`).
//!
//! The fake agent streams 100,000 message chunks in one turn, each sent
//! through the ACP SDK one by one, as a real agent sends them. Two floors
//! spawn the same agent and send the same three requests:
//! - the pipe: the agent alone writing its turn into a pipe; the reader
//!   only looks for the turn's answer in the bytes (no JSON parsed);
//! - a bare reader: it parses every line as JSON until the turn's answer.
//!
//! Two figures count: `quorum call`'s wall time over the pipe's (target
//! under 1.5), and quorum's own CPU time a chunk: the CPU time of the call
//! (quorum and its agent) less the pipe's (the agent alone), over the
//! chunks (target under 3 µs). Runs alternate, so a slow moment of the
//! machine costs all alike; medians of 7. With `QUORUM_BASELINE=DIR` (a
//! directory holding another build's `quorum`, e.g. the release binary of
//! the commit before a change), that build's call runs in turn too, and
//! each figure is printed as a ratio against it. Prints figures; asserts
//! nothing.
//!
//! `cargo bench --bench acp_stream -- --in-process [CHUNKS]` runs one such
//! call inside the bench's own process instead (the library's `quorum
//! call`, on a runtime like quorum's, with no reaper process between quorum
//! and the agent) and prints nothing else: for `valgrind --tool=callgrind`
//! on the bench binary, whose instruction counts do not depend on the
//! machine's load (quorum's binary starts its agents through
//! `/proc/self/exe`, which valgrind cannot run). Build it with symbols,
//! `cargo bench --profile profiling --bench acp_stream --no-run` (the
//! release profile strips them), and run the binary it names.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHUNKS: u32 = 100_000;
const RUNS: usize = 7;

/// How the floor reads the agent's stdout.
#[derive(Clone, Copy)]
enum Reader {
    /// Lines as bytes; only the answer is looked for.
    Pipe,
    /// Every line parsed as JSON.
    Json,
}

/// The CPU time (user and system) of this process's children that were
/// waited for, so far: what a run cost is the difference across it.
fn children_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command's closing parenthesis: cutime is the 16th
    // field of the line, cstime the 17th.
    let rest = &stat[stat.rfind(')').expect("stat line") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[13].parse::<u64>().unwrap() + fields[14].parse::<u64>().unwrap();
    // In clock ticks (USER_HZ): 100 a second on Linux.
    Duration::from_millis(ticks * 10)
}

/// What one run cost: wall time and CPU time.
#[derive(Clone, Copy)]
struct Cost {
    wall: Duration,
    cpu: Duration,
}

/// Times `run`, its children's CPU time included.
fn measure(run: impl FnOnce()) -> Cost {
    let (cpu, start) = (children_cpu(), Instant::now());
    run();
    Cost {
        wall: start.elapsed(),
        cpu: children_cpu() - cpu,
    }
}

fn floor(agent: &str, dir: &std::path::Path, reader: Reader) {
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
    let _ = child.kill();
    let _ = child.wait();
}

fn quorum_call(bin: &std::path::Path, config: &std::path::Path, dir: &std::path::Path) {
    let out = Command::new(bin)
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
    assert!(out.status.success());
    assert_eq!(
        out.stdout.len(),
        CHUNKS as usize + 1,
        "all chunks in the output"
    );
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The figures of one build's calls, each run set against the floors'
/// runs made beside it.
struct Figures {
    /// Wall time (ms).
    wall: f64,
    /// Wall time over the pipe's, and over the JSON reader's.
    over_pipe: f64,
    over_json: f64,
    /// CPU time (ms) of the call, quorum and agent.
    cpu: f64,
    /// Quorum's own CPU a chunk (µs): the call's less the pipe's.
    per_chunk: f64,
}

fn figures(calls: &[Cost], pipe: &[Cost], json: &[Cost]) -> Figures {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let pairs = || calls.iter().zip(pipe);
    Figures {
        wall: median(calls.iter().map(|c| ms(c.wall)).collect()),
        over_pipe: median(pairs().map(|(c, p)| ms(c.wall) / ms(p.wall)).collect()),
        over_json: median(
            calls
                .iter()
                .zip(json)
                .map(|(c, j)| ms(c.wall) / ms(j.wall))
                .collect(),
        ),
        cpu: median(calls.iter().map(|c| ms(c.cpu)).collect()),
        per_chunk: median(
            pairs()
                .map(|(c, p)| (ms(c.cpu) - ms(p.cpu)) * 1000.0 / f64::from(CHUNKS))
                .collect(),
        ),
    }
}

/// One `quorum call` of `chunks` chunks in this process (`--in-process`).
fn in_process(chunks: u32) {
    let agent = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quorum.toml");
    std::fs::write(&config, format!("[agents.fake]\ncommand = {agent:?}\n")).unwrap();
    let setup = quorum::cli::Setup {
        config: Some(config),
        cwd: Some(dir.path().to_path_buf()),
        approve: Default::default(),
        record: None,
        resume: None,
        elicit: Default::default(),
    };
    let request = quorum::cli::CallRequest {
        agent: "fake".into(),
        inputs: vec![format!("sdkstream {chunks}")],
        code_review: false,
        new_session: false,
        resume: None,
        json: false,
        worktree: false,
    };
    let runtime = quorum::runtime::builder().build().unwrap();
    let code = runtime
        .block_on(quorum::cli::call_command(setup, request))
        .unwrap();
    quorum::runtime::supervisor::kill_all_blocking();
    assert_eq!(code, 0, "the call ends its turn");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--in-process") {
        let chunks = args.get(at + 1).and_then(|n| n.parse().ok());
        return in_process(chunks.unwrap_or(CHUNKS));
    }
    let agent = env!("CARGO_BIN_EXE_quorum-fake-agent");
    let bin = std::path::PathBuf::from(env!("CARGO_BIN_EXE_quorum"));
    let baseline = std::env::var_os("QUORUM_BASELINE")
        .map(|dir| std::path::PathBuf::from(dir).join("quorum"))
        .filter(|b| b.exists());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("quorum.toml");
    std::fs::write(&config, format!("[agents.fake]\ncommand = {agent:?}\n")).unwrap();
    let (mut pipe, mut json, mut quorum, mut base) = (vec![], vec![], vec![], vec![]);
    for _ in 0..RUNS {
        pipe.push(measure(|| floor(agent, dir.path(), Reader::Pipe)));
        json.push(measure(|| floor(agent, dir.path(), Reader::Json)));
        quorum.push(measure(|| quorum_call(&bin, &config, dir.path())));
        if let Some(b) = &baseline {
            base.push(measure(|| quorum_call(b, &config, dir.path())));
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let floor_wall = median(pipe.iter().map(|c| ms(c.wall)).collect());
    let floor_cpu = median(pipe.iter().map(|c| ms(c.cpu)).collect());
    let json_wall = median(json.iter().map(|c| ms(c.wall)).collect());
    let now = figures(&quorum, &pipe, &json);
    println!("acp stream: {CHUNKS} message chunks in one turn, median of {RUNS}");
    println!("  agent into a pipe (floor): {floor_wall:8.1} ms wall, {floor_cpu:6.0} ms CPU");
    println!("  bare JSON reader:          {json_wall:8.1} ms wall");
    println!(
        "  quorum call:               {:8.1} ms wall, {:6.0} ms CPU",
        now.wall, now.cpu
    );
    println!(
        "  ratio quorum / pipe: {:.2}x wall (target under 1.5x), {:.2}x CPU; quorum / JSON reader: {:.2}x",
        now.over_pipe,
        now.cpu / floor_cpu,
        now.over_json
    );
    println!(
        "  quorum's own CPU a chunk: {:.2} µs (target under 3 µs)",
        now.per_chunk
    );
    if let Some(b) = &baseline {
        let then = figures(&base, &pipe, &json);
        println!("  baseline {}:", b.display());
        println!(
            "    quorum call:             {:8.1} ms wall, {:6.0} ms CPU; {:.2}x the pipe, {:.2} µs CPU a chunk",
            then.wall, then.cpu, then.over_pipe, then.per_chunk
        );
        println!(
            "    now / baseline: {:.2}x the wall over the pipe, {:.2}x the CPU a chunk",
            now.over_pipe / then.over_pipe,
            now.per_chunk / then.per_chunk
        );
    }
}
