//! The fake model servers of the test suite (`tests/common/models.rs`) as a
//! program, for scripts that run a real agent CLI offline
//! (`scripts/make-import-fixtures.sh`): prints its URL on stdout, then
//! serves until killed. With `--log FILE`, every request body is appended
//! to FILE as one JSON line; with `--tool-times FILE`, the Unix time in ms
//! at which each answer that was a tool call had been sent, one a line.
#![allow(dead_code)]

#[path = "../common/models.rs"]
mod models;

use std::io::Write;
use std::time::Duration;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut log, mut times) = (None, None);
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        match (flag.as_str(), rest.next()) {
            ("--log", Some(file)) => log = Some(file.clone()),
            ("--tool-times", Some(file)) => times = Some(file.clone()),
            _ => {
                eprintln!("usage: quorum-fake-model [--log FILE] [--tool-times FILE]");
                std::process::exit(2);
            }
        }
    }
    let model = models::FakeModel::start().await;
    println!("{}", model.url());
    let _ = std::io::stdout().flush();
    let (mut written, mut timed) = (0, 0);
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Some(file) = &times {
            let new: Vec<u128> = models::TOOL_CALLS_SENT.lock().unwrap()[timed..].to_vec();
            timed += new.len();
            if !new.is_empty() {
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(file)
                    .unwrap_or_else(|e| panic!("{file}: {e}"));
                for ms in new {
                    writeln!(f, "{ms}").unwrap_or_else(|e| panic!("{file}: {e}"));
                }
            }
        }
        let Some(log) = &log else { continue };
        let new: Vec<String> = {
            let requests = model.requests.lock().unwrap();
            requests[written..].iter().map(|r| r.to_string()).collect()
        };
        if new.is_empty() {
            continue;
        }
        written += new.len();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("{log}: {e}"));
        for line in new {
            writeln!(file, "{line}").unwrap_or_else(|e| panic!("{log}: {e}"));
        }
    }
}
