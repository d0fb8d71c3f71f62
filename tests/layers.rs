//! DESIGN.md's layers, which the compiler cannot check: the screen draws
//! events and sends commands and knows nothing of ACP or models; the
//! vocabulary imports nothing; the dispatcher reaches the chat loop only
//! through an injected runner.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    assert!(!out.is_empty(), "no sources under {}", dir.display());
    out
}

/// The modules of this crate that `text` names (`crate::NAME`, also inside
/// `crate::{...}` groups).
fn imports(text: &str) -> Vec<String> {
    let single = regex::Regex::new(r"crate::([a-z_]+)").unwrap();
    let group = regex::Regex::new(r"crate::\{([^}]*)\}").unwrap();
    let mut out: Vec<String> = single
        .captures_iter(text)
        .map(|c| c[1].to_string())
        .collect();
    for c in group.captures_iter(text) {
        out.extend(
            c[1].split(',')
                .filter_map(|item| item.trim().split("::").next())
                .filter(|m| !m.is_empty())
                .map(str::to_string),
        );
    }
    out
}

/// The files under `src/DIR` (or the file `src/DIR.rs`) that import one of
/// `forbidden`, with what they import.
fn violations(dir: &str, forbidden: &[&str]) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = if root.join(dir).is_dir() {
        sources(&root.join(dir))
    } else {
        vec![root.join(format!("{dir}.rs"))]
    };
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for m in imports(&text) {
            if forbidden.contains(&m.as_str()) {
                out.push(format!("{} imports crate::{m}", file.display()));
            }
        }
    }
    out
}

#[test]
fn the_screen_knows_nothing_of_agents_or_models() {
    let found = violations(
        "tui",
        &["acp", "llm", "harness", "subagent", "engine", "bus"],
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_vocabulary_imports_nothing_of_quorum() {
    let found = violations(
        "event",
        &[
            "acp",
            "board",
            "bus",
            "engine",
            "harness",
            "llm",
            "subagent",
            "transcript",
            "tui",
        ],
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn dispatcher_and_chat_loop_do_not_import_each_other_in_a_loop() {
    let found = violations("subagent", &["harness", "engine", "tui"]);
    assert!(found.is_empty(), "{found:#?}");
    let found = violations("harness", &["engine", "tui"]);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn lower_layers_do_not_reach_up() {
    for dir in ["acp", "llm", "board", "bus", "transcript"] {
        let found = violations(dir, &["engine", "harness", "subagent", "tui"]);
        assert!(found.is_empty(), "{found:#?}");
    }
}

#[test]
fn the_checker_sees_imports() {
    assert_eq!(
        imports("use crate::acp::client;\nuse crate::{llm::Model, event};"),
        ["acp", "llm", "event"]
    );
}

#[test]
fn main_is_argument_parsing_and_one_call_per_command() {
    let main = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/main.rs");
    let lines = std::fs::read_to_string(main).unwrap().lines().count();
    assert!(lines < 300, "src/main.rs has {lines} lines");
}
