//! The fake model servers of the test suite (`tests/common/models.rs`) as a
//! program, for scripts that run a real agent CLI offline
//! (`scripts/make-import-fixtures.sh`): prints its URL on stdout, then
//! serves until killed. With `--log FILE`, every request body is appended
//! to FILE as one JSON line.
#![allow(dead_code)]

#[path = "../common/models.rs"]
mod models;

use std::io::Write;
use std::time::Duration;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let log = match args.as_slice() {
        [] => None,
        [flag, file] if flag == "--log" => Some(file.clone()),
        _ => {
            eprintln!("usage: quorum-fake-model [--log FILE]");
            std::process::exit(2);
        }
    };
    let model = models::FakeModel::start().await;
    println!("{}", model.url());
    let _ = std::io::stdout().flush();
    let mut written = 0;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
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
