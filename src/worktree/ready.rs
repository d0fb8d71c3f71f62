//! Worktrees made ready and checked (`[worktree]` in the config): the
//! settings, a commit checked out afresh for its check (files written from
//! git's objects alone: no hook, no filter, no `.git` in it), the counts a
//! test runner printed, and what of a branch's changes touches the tests
//! or the check's own configuration. Running the setup and the check
//! (sandboxed, timed) is the dispatcher's.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use crate::event::CheckCounts;

/// How long a check runs unless `check_timeout` says otherwise.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(600);

/// `[worktree]`, as quorum takes it.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Sign quorum's commits of each turn (default: unsigned).
    pub sign: bool,
    /// Run in each new worktree, sandboxed, before its agent starts.
    pub setup: Option<String>,
    /// Caches shared writable with the sandboxed setup and check.
    pub share: Vec<PathBuf>,
    /// The project's test command, run on each committed turn.
    pub check: Option<String>,
    pub check_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            sign: false,
            setup: None,
            share: Vec::new(),
            check: None,
            check_timeout: CHECK_TIMEOUT,
        }
    }
}

impl Repo {
    /// Writes the tree of `commit` into `dir` (a new, empty folder) from
    /// git's objects (`ls-tree`, `cat-file --batch`): no hook, no filter
    /// or attribute of the tree's runs, submodules are left out, and no
    /// `.git` is made.
    pub fn export(&self, commit: &str, dir: &Path) -> Result<()> {
        let listed = self.git(
            &format!("listing {commit} (git ls-tree)"),
            &[
                "ls-tree",
                "-r",
                "-z",
                "--full-tree",
                "--end-of-options",
                commit,
            ],
        )?;
        let mut entries: Vec<(&str, &str, &str)> = listed
            .split('\0')
            .filter_map(|e| {
                let (meta, path) = e.split_once('\t')?;
                let mut m = meta.split(' ');
                let (mode, kind, oid) = (m.next()?, m.next()?, m.next()?);
                (kind == "blob").then_some((mode, oid, path))
            })
            .collect();
        // Links last: nothing is ever written through one.
        entries.sort_by_key(|(mode, _, _)| *mode == "120000");
        let mut cat = hardened::in_dir(&self.top);
        cat.args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        let io = |e: std::io::Error| WorktreeError::Io(format!("{}: {e}", dir.display()));
        let (mut child, _group) =
            hardened::spawn(&mut cat).map_err(|source| WorktreeError::Spawn {
                step: "reading the commit's files (git cat-file)".into(),
                source,
            })?;
        let mut stdin = child.stdin.take().expect("piped");
        let oids: Vec<String> = entries
            .iter()
            .map(|(_, oid, _)| format!("{oid}\n"))
            .collect();
        let feeder = std::thread::spawn(move || {
            use std::io::Write;
            for oid in oids {
                if stdin.write_all(oid.as_bytes()).is_err() {
                    break;
                }
            }
        });
        let mut out = std::io::BufReader::new(child.stdout.take().expect("piped"));
        let written = entries.iter().try_for_each(|(mode, _, path)| {
            let bytes = read_object(&mut out)?;
            write_entry(dir, path, mode, &bytes)
        });
        drop(out);
        if written.is_err() {
            let _ = child.kill();
        }
        let _ = feeder.join();
        let _ = child.wait();
        written.map_err(io)
    }

    /// The files `branch` changes (added, changed, deleted) since `base`.
    pub fn changed_files(&self, base: &str, branch: &str) -> Result<Vec<String>> {
        self.diff_names(base, branch, &[])
    }

    /// What `branch` does to the tests and the check's configuration since
    /// `base`: the test files it changes or deletes (one it adds cannot
    /// weaken the check) and the configuration it adds, changes or
    /// deletes ([`touches_tests`]).
    pub fn tests_touched(&self, base: &str, branch: &str) -> Result<Vec<String>> {
        let changed = self.changed_files(base, branch)?;
        let added = self.diff_names(base, branch, &["--diff-filter=A"])?;
        Ok(touches_tests(&changed, None)
            .into_iter()
            .filter(|path| !added.contains(path) || is_check_config(path, None))
            .collect())
    }

    /// `git diff --name-only` of `base..branch`, with `options` (a
    /// `--diff-filter`).
    fn diff_names(&self, base: &str, branch: &str, options: &[&str]) -> Result<Vec<String>> {
        let mut args = vec!["--name-only", "-z", "--no-renames"];
        args.extend_from_slice(options);
        let names = self.git_diff(
            &format!("listing what {branch} changes (git diff --name-only)"),
            &args,
            base,
            branch,
        )?;
        Ok(names
            .split('\0')
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect())
    }
}

/// One object of `cat-file --batch`'s output: its header, its bytes, the
/// newline after them.
fn read_object(out: &mut impl std::io::BufRead) -> std::io::Result<Vec<u8>> {
    let mut header = String::new();
    out.read_line(&mut header)?;
    let size: usize = header
        .split(' ')
        .nth(2)
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("git cat-file said {header:?}")))?;
    let mut bytes = vec![0; size + 1];
    out.read_exact(&mut bytes)?;
    bytes.pop();
    Ok(bytes)
}

/// A file of the tree written at `path` under `dir` (a link made as a
/// link, an executable made executable). A path that would leave `dir`
/// is skipped (git never records one).
fn write_entry(dir: &Path, path: &str, mode: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let rel = Path::new(path);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return Ok(());
    }
    let to = dir.join(rel);
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if mode == "120000" {
        use std::os::unix::ffi::OsStrExt;
        return std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(bytes), &to);
    }
    std::fs::write(&to, bytes)?;
    if mode == "100755" {
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

/// The counts a test runner printed, summed over its summary lines: cargo
/// test (`test result: ok. N passed; M failed`), pytest (`N passed, M
/// failed`), go test (`ok` / `FAIL` lines, a package each), jest (`Tests:
/// N failed, M passed`), node's runner (`# pass N`, `# fail M`). `None`
/// when it printed none of them.
pub fn counts(output: &str) -> Option<CheckCounts> {
    let mut total = CheckCounts::default();
    let mut found = false;
    for line in output.lines() {
        let line = line.trim();
        let line = line.trim_matches('=').trim();
        let (passed, failed) = if let Some(rest) = line.strip_prefix("test result: ") {
            (number_before(rest, "passed"), number_before(rest, "failed"))
        } else if let Some(rest) = line.strip_prefix("Tests:") {
            (number_before(rest, "passed"), number_before(rest, "failed"))
        } else if let Some(n) = line.strip_prefix("# pass ") {
            (n.trim().parse().ok(), None)
        } else if let Some(n) = line.strip_prefix("# fail ") {
            (None, n.trim().parse().ok())
        } else if is_go_package(line, "ok") {
            (Some(1), None)
        } else if is_go_package(line, "FAIL") {
            (None, Some(1))
        } else if pytest_summary(line) {
            (number_before(line, "passed"), number_before(line, "failed"))
        } else {
            continue;
        };
        if passed.is_none() && failed.is_none() {
            continue;
        }
        found = true;
        total.passed += passed.unwrap_or(0);
        total.failed += failed.unwrap_or(0);
    }
    found.then_some(total)
}

/// `ok  <TAB>example.com/x<TAB>0.01s` or `FAIL<TAB>example.com/x<TAB>0.01s`: go test's
/// line for a package (not the lone `FAIL` or `ok` of a run).
fn is_go_package(line: &str, word: &str) -> bool {
    line.strip_prefix(word)
        .is_some_and(|rest| rest.starts_with('\t') || rest.starts_with("  "))
}

/// pytest's last line: `3 passed, 1 failed in 0.12s`, `2 passed in 0.01s`.
fn pytest_summary(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    words.len() >= 4
        && words[0].parse::<u64>().is_ok()
        && words.contains(&"in")
        && (line.contains(" passed") || line.contains(" failed"))
}

/// The number just before `word` in `text` (`2 failed` → 2).
fn number_before(text: &str, word: &str) -> Option<u64> {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == '.')
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .find(|w| w[1] == word)
        .and_then(|w| w[0].parse().ok())
}

/// The program a command that ended with `code` and printed `output`
/// could not find: the shell's `NAME: not found` (dash) or `NAME: command
/// not found` (bash) when it ended with 127, or Python's `No module named
/// NAME` (`python -m pytest` without pytest). `None`: it ran.
pub fn missing_tool(code: Option<i32>, output: &str) -> Option<String> {
    let name = |s: &str| {
        let s = s.trim().trim_matches(|c| c == '\'' || c == '"');
        (!s.is_empty() && s.len() <= 120 && !s.contains(char::is_whitespace)).then(|| s.to_string())
    };
    if code == Some(127) {
        let found = output.lines().find_map(|line| {
            let before = line
                .trim_end()
                .strip_suffix(": command not found")
                .or_else(|| line.trim_end().strip_suffix(": not found"))?;
            name(before.rsplit(": ").next()?)
        });
        if found.is_some() {
            return found;
        }
    }
    if code.is_some_and(|c| c != 0) {
        return output.lines().find_map(|line| {
            let (_, module) = line.split_once("No module named ")?;
            name(module.split(['.', ' ']).next()?)
        });
    }
    None
}

/// What of `changed` (a branch's changed files) is a test or the check's
/// own configuration: tests under `tests/`, `test/`, `__tests__/`,
/// `*_test.go`, `test_*.py`, `*_test.py`, `*.test.js|ts`, `*.spec.*`, and
/// `pytest.ini`, `pyproject.toml`, `setup.cfg`, `tox.ini`, `conftest.py`,
/// `package.json`, `Cargo.toml`, `jest.config.*`, `go.mod`, and the config
/// file `config` names (its name anywhere in the tree).
pub fn touches_tests(changed: &[String], config: Option<&str>) -> Vec<String> {
    changed
        .iter()
        .filter(|path| is_test_or_check_config(path, config))
        .cloned()
        .collect()
}

fn is_test_or_check_config(path: &str, config: Option<&str>) -> bool {
    is_test_file(path) || is_check_config(path, config)
}

/// A test, by its path.
fn is_test_file(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let name = parts.last().copied().unwrap_or_default();
    let folders = &parts[..parts.len().saturating_sub(1)];
    if folders
        .iter()
        .any(|f| matches!(*f, "tests" | "test" | "__tests__"))
    {
        return true;
    }
    name.ends_with("_test.go")
        || (name.starts_with("test_") && name.ends_with(".py"))
        || name.ends_with("_test.py")
        || [
            ".test.js",
            ".test.ts",
            ".test.jsx",
            ".test.tsx",
            ".test.mjs",
        ]
        .iter()
        .any(|s| name.ends_with(s))
        || name.contains(".spec.")
}

/// A test runner's or the check's configuration, by its path.
fn is_check_config(path: &str, config: Option<&str>) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    matches!(
        name,
        "pytest.ini"
            | "pyproject.toml"
            | "setup.cfg"
            | "tox.ini"
            | "conftest.py"
            | "package.json"
            | "Cargo.toml"
            | "go.mod"
    ) || name.starts_with("jest.config.")
        || config.is_some_and(|c| !c.is_empty() && name == c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(passed: u64, failed: u64) -> Option<CheckCounts> {
        Some(CheckCounts { passed, failed })
    }

    #[test]
    fn a_missing_program_is_named() {
        assert_eq!(
            missing_tool(Some(127), "sh: 1: pytest: not found\n").as_deref(),
            Some("pytest")
        );
        assert_eq!(
            missing_tool(Some(127), "sh: line 1: npx: command not found\n").as_deref(),
            Some("npx")
        );
        assert_eq!(
            missing_tool(Some(1), "/usr/bin/python3: No module named pytest\n").as_deref(),
            Some("pytest")
        );
        // A test that failed is not a missing program.
        assert_eq!(missing_tool(Some(1), "1 failed, 2 passed in 0.1s\n"), None);
        assert_eq!(missing_tool(Some(0), "No module named x (handled)\n"), None);
    }

    #[test]
    fn counts_are_read_from_each_runner() {
        let cargo = "running 3 tests\ntest a ... ok\n\ntest result: FAILED. 12 passed; 2 failed; \
                     0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\n\
                     test result: ok. 1 passed; 0 failed; 0 ignored\n";
        assert_eq!(counts(cargo), c(13, 2));
        assert_eq!(counts("==== 3 passed, 1 failed in 0.12s ====\n"), c(3, 1));
        assert_eq!(counts("===== 2 passed in 0.01s =====\n"), c(2, 0));
        assert_eq!(
            counts(
                "--- FAIL: TestX (0.00s)\nFAIL\nFAIL\texample.com/a\t0.01s\nok  \texample.com/b\t0.02s\n"
            ),
            c(1, 1)
        );
        assert_eq!(
            counts("Tests:       1 failed, 5 passed, 6 total\n"),
            c(5, 1)
        );
        assert_eq!(counts("# tests 4\n# pass 3\n# fail 1\n"), c(3, 1));
        assert_eq!(counts("all good\n"), None);
    }

    #[test]
    fn tests_and_the_checks_configuration_are_named() {
        let changed: Vec<String> = [
            "src/lib.rs",
            "tests/it.rs",
            "pkg/test/x.js",
            "src/__tests__/a.js",
            "x_test.go",
            "test_add.py",
            "add_test.py",
            "a.test.ts",
            "b.spec.js",
            "pytest.ini",
            "pyproject.toml",
            "package.json",
            "Cargo.toml",
            "jest.config.js",
            "go.mod",
            "README.md",
            "quorum.toml",
        ]
        .map(String::from)
        .to_vec();
        let touched = touches_tests(&changed, Some("quorum.toml"));
        assert!(!touched.contains(&"src/lib.rs".to_string()));
        assert!(!touched.contains(&"README.md".to_string()));
        assert_eq!(touched.len(), changed.len() - 2, "{touched:?}");
    }
}
