//! The test suite's own shape: one test program. Every `.rs` file of
//! `tests/it/` is one of its modules (a file not declared in `main.rs` is
//! never compiled: its tests would never run, and nothing would say so),
//! and nothing else in `tests/` is a test program of its own (cargo makes
//! one of every `tests/*.rs` and `tests/*/main.rs`, each linking quorum
//! again).

use std::collections::BTreeSet;
use std::path::Path;

#[test]
fn every_file_of_tests_it_is_a_module_and_it_is_the_only_test_program() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let main = std::fs::read_to_string(tests.join("it/main.rs")).unwrap();
    let declared: BTreeSet<String> = main
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';'))
        .filter(|m| *m != "common")
        .map(str::to_string)
        .collect();
    let files: BTreeSet<String> = std::fs::read_dir(tests.join("it"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".rs").map(str::to_string)
        })
        .filter(|m| m != "main")
        .collect();
    assert_eq!(
        declared, files,
        "tests/it/main.rs declares every file there"
    );
    let mut programs = Vec::new();
    for entry in std::fs::read_dir(&tests).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() && path.join("main.rs").exists() {
            programs.push(format!("{name}/main.rs"));
        } else if path.extension().is_some_and(|e| e == "rs") {
            programs.push(name);
        }
    }
    assert_eq!(programs, ["it/main.rs"], "tests/ holds one test program");
}
