//! The layers of `docs/architecture.md` ("Who may import whom" there
//! renders the allow-list below as a table; change both together), which
//! the compiler cannot check: for each layer of `src/` (a top-level
//! folder, or a loose file) the modules of quorum it **may** import.
//! Anything not listed is refused, so a new module is allowed nowhere
//! until it is placed here. Imports are read in every form the code uses:
//! `crate::a::b`, grouped `crate::{a::b, c}` (nested too), `super::` and
//! `super::super::` paths (resolved against the file's own module), and
//! `quorum::` in the binary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What each layer may import besides itself: a layer's name allows all of
/// it, `layer::module` just that module.
const ALLOWED: &[(&str, &[&str])] = &[
    // The vocabulary: what happened, and what the person asks for.
    ("event", &[]),
    // Untrusted input kept in bounds; below everything that reads it.
    ("confine", &[]),
    // The one config file, typed and checked: its sections use the
    // permission policy, the caps, the sandbox modes, the spending caps'
    // check (`[budget]`) and the kinds of notification (`[notify]
    // events`); the registry, the session and `serve` take their parts.
    ("config", &["agent", "confine", "event", "runtime::sandbox"]),
    // The model providers (and the one lock helper, in `confine`).
    ("llm", &["confine::lock"]),
    // Git worktrees for isolated writers (the git CLI, hardened): the
    // vocabulary's diffstat and severity, the hardened git, and what other
    // programs run from a tree (a nested `.git`, hooks, tool configs).
    (
        "worktree",
        &[
            "event",
            "confine::lexical",
            "runtime::git",
            "runtime::machinery",
        ],
    ),
    // Board, bus, supervisor, cancellation, PATH lookup.
    ("runtime", &["event", "confine"]),
    // The agent interface that ACP agents and the internal agent implement.
    ("agent", &["event", "confine"]),
    // Recorder, reader, importers: the board makes the importers' summaries,
    // the severity and findings parsers read their reports.
    (
        "transcript",
        &[
            "event",
            "confine",
            "runtime::board",
            "runtime::bus",
            "subagent::severity",
            "subagent::findings",
        ],
    ),
    ("acp", &["agent", "config", "event", "confine", "runtime"]),
    // Agents on other machines: ssh, the proxy and its relay (answering
    // with ACP's handlers), an agent's start there (an ACP agent whose
    // command is `ssh`), a worktree task's git there; the checked
    // `[hosts.NAME]` tables come from `config`.
    (
        "remote",
        &["acp", "config", "confine", "runtime", "worktree"],
    ),
    // The dispatcher, the ACP agents' pool, and the tool as the model sees
    // it (its specs are the model's `ToolSpec`s); a host's agents and
    // worktree tasks through `remote`.
    (
        "subagent",
        &[
            "agent", "acp", "llm", "event", "confine", "runtime", "worktree", "remote",
        ],
    ),
    // The chat loop and its tools: nothing of the sub-agent tool or ACP,
    // which the engine plugs in.
    ("model_loop", &["event", "confine", "llm", "runtime"]),
    // A review's findings in the forms code is reviewed in (SARIF, a pull
    // request's comment and review, terminal lines): pure, over the
    // vocabulary; the terminal's lines sanitised.
    ("review", &["event", "confine"]),
    (
        "engine",
        &[
            "agent",
            "acp",
            "config",
            "subagent",
            "model_loop",
            "llm",
            "event",
            "confine",
            "runtime",
            "transcript",
            "worktree",
        ],
    ),
    // quorum for other programs: its tools over MCP (the sub-agent tool on
    // a session's dispatcher), the stdio spec of its private endpoint (as
    // ACP's `McpServerSpec`), the state directory for its socket; and
    // quorum as an ACP agent (`quorum acp`: sessions, events as updates,
    // a host's MCP servers as agents' `McpServerSpec`s).
    (
        "serve",
        &[
            "engine",
            "config",
            "subagent",
            "event",
            "confine",
            "runtime",
            "transcript",
            "acp",
        ],
    ),
    // Every command's entry: the headless front ends, the TUI's start
    // (the session built here, the screen handed its channels: `tui`),
    // `quorum mcp` and `quorum acp` (on `serve`), `quorum proxy` and
    // `quorum worktrees --fetch` (on `remote`), `quorum review --format`
    // (on `review`).
    (
        "cli",
        &[
            "serve",
            "remote",
            "review",
            "tui",
            "engine",
            "config",
            "agent",
            "acp",
            "subagent",
            "event",
            "confine",
            "runtime",
            "transcript",
            "worktree",
        ],
    ),
    // The screen: draws events, sends commands; nothing of ACP or models.
    (
        "tui",
        &["event", "transcript", "confine", "runtime::cancel"],
    ),
    // The binary: argument parsing, then one call per command (each
    // command's entry in `cli`).
    ("main", &["cli", "config", "engine", "serve", "runtime"]),
    ("lib", &[]),
];

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
    out.sort();
    out
}

/// The module path of a file under `src/`: `acp/client.rs` is
/// `["acp", "client"]`, `acp/mod.rs` is `["acp"]`, `event.rs` `["event"]`.
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" {
        parts.push(stem.to_string());
    }
    parts
}

/// Reads one path tree after `crate::` (or a resolved `super::`): plain
/// segments and `{...}` groups, nested. Each leaf's first `keep` segments
/// go to `out`, after `prefix`.
fn read_tree(
    text: &[u8],
    mut at: usize,
    (prefix, keep): (Vec<String>, usize),
    out: &mut Vec<Vec<String>>,
) -> usize {
    let mut path = prefix;
    loop {
        if text.get(at) == Some(&b'{') {
            at += 1;
            loop {
                while text
                    .get(at)
                    .is_some_and(|c| c.is_ascii_whitespace() || *c == b',')
                {
                    at += 1;
                }
                match text.get(at) {
                    Some(b'}') => return at + 1,
                    None => return at,
                    _ => at = read_tree(text, at, (path.clone(), keep), out),
                }
            }
        }
        let start = at;
        while text
            .get(at)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            at += 1;
        }
        let word = String::from_utf8_lossy(&text[start..at]).into_owned();
        if word.is_empty() {
            break;
        }
        if text.get(at) == Some(&b'!') {
            // A macro at the crate's root (`crate::say!`), not a module.
            return at;
        }
        path.push(word);
        if text[at..].starts_with(b"::") {
            at += 2;
        } else {
            break;
        }
    }
    if !path.is_empty() && path[0] != "self" {
        path.truncate(keep);
        out.push(path);
    }
    at
}

/// The modules of quorum that a file at module path `module` names, as
/// absolute paths (at most two segments each). Past an inline `mod NAME {`
/// (a file's tests, at its end), `super::` starts from that module.
fn imports(text: &str, module: &[String]) -> Vec<Vec<String>> {
    imports_to(text, module, 2)
}

/// [`imports`], each path kept to `keep` segments.
fn imports_to(text: &str, module: &[String], keep: usize) -> Vec<Vec<String>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let inline: Vec<(usize, String)> =
        regex::Regex::new(r"(?m)^\s*(?:pub(?:\([a-z]+\))? )?mod ([a-z_0-9]+) \{")
            .unwrap()
            .captures_iter(text)
            .map(|c| (c.get(0).unwrap().start(), c[1].to_string()))
            .collect();
    let start = regex::Regex::new(r"\b(crate|quorum|super)::").unwrap();
    let mut next = 0;
    while let Some(m) = start.find_at(text, next) {
        next = m.end();
        let before = text[..m.start()].chars().next_back();
        if before.is_some_and(|c| c == ':' || c.is_alphanumeric() || c == '_') {
            continue; // part of a longer path, read with its head
        }
        let mut base: Vec<String> = Vec::new();
        let mut at = m.end();
        if m.as_str().starts_with("super") {
            base = module.to_vec();
            if let Some((_, name)) = inline.iter().rev().find(|(p, _)| *p < m.start()) {
                base.push(name.clone());
            }
            base.pop();
            while text[at..].starts_with("super::") {
                base.pop();
                at += "super::".len();
            }
        }
        let mut found = Vec::new();
        at = read_tree(bytes, at, (base, keep), &mut found);
        next = next.max(at);
        out.extend(found);
    }
    out
}

/// Whether `layer` may import `path`.
fn allowed(layer: &str, path: &[String]) -> bool {
    if path.is_empty() || path[0] == layer {
        return true;
    }
    let rules = ALLOWED
        .iter()
        .find(|(l, _)| *l == layer)
        .unwrap_or_else(|| panic!("layer {layer} has no allow-list in tests/layers.rs"))
        .1;
    let joined = path.join("::");
    rules
        .iter()
        .any(|rule| *rule == path[0] || joined == *rule || joined.starts_with(&format!("{rule}::")))
}

/// Every import in `src/` that its layer's allow-list refuses.
fn violations() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    for file in sources(&root) {
        let relative = file.strip_prefix(&root).unwrap();
        let module = module_of(relative);
        let layer = module.first().map(String::as_str).unwrap_or("lib");
        let text = std::fs::read_to_string(&file).unwrap();
        for path in imports(&text, &module) {
            if !allowed(layer, &path) {
                out.push(format!(
                    "src/{} ({layer}) imports crate::{}",
                    relative.display(),
                    path.join("::")
                ));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn every_import_is_on_its_layers_allow_list() {
    let found = violations();
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn every_layer_has_an_allow_list() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut layers: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    layers.sort();
    layers.dedup();
    let listed: BTreeMap<&str, ()> = ALLOWED.iter().map(|(l, _)| (*l, ())).collect();
    let missing: Vec<&String> = layers
        .iter()
        .filter(|l| !listed.contains_key(l.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "layers without an allow-list: {missing:?}"
    );
}

#[test]
fn src_has_at_most_five_loose_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let loose: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(loose.len() <= 5, "loose files in src/: {loose:?}");
}

#[test]
fn the_checker_sees_every_form_of_import() {
    let module = vec!["acp".to_string(), "client".to_string()];
    let text = "use crate::acp::client;\n\
                use crate::{llm::Model, event};\n\
                use crate::{runtime::{board::Board, bus}, confine::fsroot::Root};\n\
                use super::registry::Spec;\n\
                use super::super::tui::view;\n\
                crate::say!(\"x\");\n\
                let x = crate::subagent::severity::parse(r);\n";
    let got: Vec<String> = imports(text, &module)
        .iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        got,
        [
            "acp::client",
            "llm::Model",
            "event",
            "runtime::board",
            "runtime::bus",
            "confine::fsroot",
            "acp::registry",
            "tui::view",
            "subagent::severity",
        ]
    );
    assert!(!allowed("tui", &["acp".into(), "client".into()]));
    assert!(allowed(
        "transcript",
        &["subagent".into(), "severity".into()]
    ));
    assert!(!allowed(
        "transcript",
        &["subagent".into(), "dispatch".into()]
    ));
    assert!(allowed("tui", &["tui".into(), "view".into()]));
}

#[test]
fn the_checker_refuses_what_is_not_listed() {
    // A file of the screen that reached for the engine through `super::`.
    let module = vec!["tui".to_string(), "state".to_string(), "cells".to_string()];
    let found: Vec<bool> = imports("use super::super::super::engine::Session;", &module)
        .iter()
        .map(|p| allowed("tui", p))
        .collect();
    assert_eq!(found, [false]);
    // In a file's own tests, `super::` is the file.
    let text = "use super::*;\nmod tests {\n    use super::finish;\n}\n";
    let got: Vec<String> = imports(text, &["subagent".to_string()])
        .iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(got, ["subagent::finish"]);
    // So it is in an inline module of any visibility.
    for visibility in ["pub ", "pub(crate) ", "pub(super) "] {
        let text = format!("{visibility}mod terminals {{\n    use super::route;\n}}\n");
        let got: Vec<String> = imports(&text, &["acp".to_string(), "turn".to_string()])
            .iter()
            .map(|p| p.join("::"))
            .collect();
        assert_eq!(got, ["acp::turn"], "{visibility}mod");
    }
}

/// The arms of the commands' `match` in `src/main.rs`: each the text after
/// `Some(Command::…) =>` (or `None =>`) up to the next arm.
fn command_arms(main: &str) -> Vec<String> {
    let start = main
        .find("match cli.command {")
        .expect("main matches on cli.command");
    let body = &main[start..];
    let end = body.find("\n    };").expect("the match ends");
    let arm =
        regex::Regex::new(r"(?m)^\s*(Some\(Command::[A-Za-z]+(\([a-z_]+\))?\)|None) =>").unwrap();
    let starts: Vec<usize> = arm.find_iter(&body[..end]).map(|m| m.start()).collect();
    starts
        .iter()
        .enumerate()
        .map(|(i, &s)| body[s..starts.get(i + 1).copied().unwrap_or(end)].to_string())
        .collect()
}

/// An arm is one call: no statement (`;`), no binding (`let`), no loop,
/// no `match` of its own.
fn one_call(arm: &str) -> bool {
    !arm.contains(';')
        && !arm.contains("let ")
        && !arm.contains(" match ")
        && !arm.contains("for ")
        && !arm.contains("while ")
        && !arm.contains("loop ")
}

#[test]
fn main_is_argument_parsing_and_one_call_per_command() {
    let main = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/main.rs");
    let text = std::fs::read_to_string(main).unwrap();
    let lines = text.lines().count();
    assert!(lines < 300, "src/main.rs has {lines} lines");
    let arms = command_arms(&text);
    assert!(arms.len() >= 10, "{arms:?}");
    for arm in &arms {
        assert!(one_call(arm), "more than one call for a command: {arm}");
    }
    // The check sees what it refuses.
    assert!(!one_call(
        "Some(Command::Run(a)) => {\n let mut setup = a.setup();\n run(setup)?\n }"
    ));
    assert!(one_call(
        "Some(Command::Run(a)) => with_runtime(run_cmd(a, model, config))?,"
    ));
}

/// Each folder's modules and which of their siblings each imports (outside
/// tests): `folder -> module -> siblings`.
fn sibling_imports() -> BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for file in sources(&root) {
        let relative = file.strip_prefix(&root).unwrap();
        let module = module_of(relative);
        let Some((name, folder)) = module.split_last() else {
            continue;
        };
        let text = std::fs::read_to_string(&file).unwrap();
        // A file's tests may use its siblings: they are not its design.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let depth = folder.len() + 1;
        let mut siblings: Vec<String> = imports_to(code, &module, depth + 1)
            .into_iter()
            .filter(|p| p.len() >= depth && p[..folder.len()] == *folder)
            .map(|p| p[folder.len()].clone())
            .filter(|s| s != name)
            .collect();
        siblings.sort();
        siblings.dedup();
        out.entry(folder.to_vec())
            .or_default()
            .insert(name.clone(), siblings);
    }
    out
}

/// The circles of imports among one folder's modules (each circle's
/// modules, sorted).
fn circles(graph: &BTreeMap<String, Vec<String>>) -> Vec<Vec<String>> {
    // Which modules each reaches.
    let reach = |from: &str| {
        let mut seen: Vec<String> = Vec::new();
        let mut todo = vec![from.to_string()];
        while let Some(m) = todo.pop() {
            for next in graph.get(&m).into_iter().flatten() {
                if !seen.contains(next) {
                    seen.push(next.clone());
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let mut out: Vec<Vec<String>> = Vec::new();
    for m in graph.keys() {
        let mine = reach(m);
        if !mine.contains(m) {
            continue;
        }
        let mut circle: Vec<String> = mine
            .iter()
            .filter(|o| reach(o).contains(m))
            .cloned()
            .collect();
        circle.sort();
        if !out.contains(&circle) {
            out.push(circle);
        }
    }
    out
}

#[test]
fn no_folder_has_a_circle_of_imports() {
    let mut found = Vec::new();
    for (folder, graph) in sibling_imports() {
        for circle in circles(&graph) {
            found.push(format!("{}: {}", folder.join("/"), circle.join(", ")));
        }
    }
    assert!(found.is_empty(), "{found:#?}");
    // The check sees a circle when there is one.
    let graph: BTreeMap<String, Vec<String>> = [
        ("a".to_string(), vec!["b".to_string()]),
        ("b".to_string(), vec!["c".to_string()]),
        ("c".to_string(), vec!["a".to_string()]),
        ("d".to_string(), vec!["a".to_string()]),
    ]
    .into_iter()
    .collect();
    assert_eq!(circles(&graph), [["a", "b", "c"]]);
}

/// A file's lines before its tests (`#[cfg(test)]`, or tests for some
/// systems only: `#[cfg(all(test, ...))]`), or all of them.
fn lines_before_tests(text: &str) -> usize {
    text.lines()
        .take_while(|l| {
            let l = l.trim();
            l != "#[cfg(test)]" && !l.starts_with("#[cfg(all(test,")
        })
        .count()
}

#[test]
fn no_source_file_is_over_900_lines_before_its_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let long: Vec<String> = sources(&root)
        .into_iter()
        .filter_map(|file| {
            let n = lines_before_tests(&std::fs::read_to_string(&file).unwrap());
            (n > 900).then(|| format!("{}: {n}", file.display()))
        })
        .collect();
    assert!(long.is_empty(), "{long:#?}");
    // The count stops at the tests, and only there.
    assert_eq!(lines_before_tests("a\nb\n#[cfg(test)]\nmod tests {}\n"), 2);
    assert_eq!(lines_before_tests("a\nb\nc\n"), 3);
    assert_eq!(
        lines_before_tests("a\n#[cfg(all(test, target_os = \"linux\"))]\nmod tests {}\n"),
        1
    );
}

/// Where `anyhow` may be named in code (not in a comment): the front
/// ends; below them, errors are types a caller can tell apart.
fn names_anyhow_in_code(text: &str) -> bool {
    text.lines().any(|l| {
        let code = l.split("//").next().unwrap_or("");
        code.contains("anyhow")
    })
}

#[test]
fn anyhow_is_named_only_in_cli_and_main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let below: Vec<String> = sources(&root)
        .into_iter()
        .filter(|f| {
            let rel = f.strip_prefix(&root).unwrap();
            !rel.starts_with("cli") && rel != Path::new("main.rs")
        })
        .filter(|f| names_anyhow_in_code(&std::fs::read_to_string(f).unwrap()))
        .map(|f| f.display().to_string())
        .collect();
    assert!(below.is_empty(), "anyhow below the front ends: {below:#?}");
    assert!(names_anyhow_in_code("fn f() -> anyhow::Result<()> {"));
    assert!(!names_anyhow_in_code("/// as `anyhow` shows an error"));
}
