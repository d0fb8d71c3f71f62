//! A writer's check: the project's own test command (`[worktree] check`)
//! run on the commit of a turn, in a fresh checkout of it. What it found
//! (pass or fail, the counts its runner printed, whether it ran out of
//! time) and what the branch changes of the tests or the check's own
//! configuration, so a comparison can say a writer weakened the check.

use serde::{Deserialize, Serialize};

/// The counts a test runner printed (cargo test, pytest, go test, jest,
/// node's runner), summed over what it printed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckCounts {
    #[serde(default)]
    pub passed: u64,
    #[serde(default)]
    pub failed: u64,
}

/// A check as its box line says it: `✓ check passed · 12 passed`, `✗ check
/// failed · 2 failed of 14`, `⏱ check timed out after 600 s`, `✗ check
/// could not run: pytest is not installed`.
pub fn check_line(
    passed: bool,
    counts: Option<CheckCounts>,
    timed_out: Option<u64>,
    missing: Option<&str>,
) -> String {
    if let Some(seconds) = timed_out {
        return format!("⏱ check timed out after {seconds} s");
    }
    if let Some(tool) = missing {
        return format!("✗ check could not run: {tool} is not installed");
    }
    match (passed, counts) {
        (true, Some(c)) => format!("✓ check passed · {} passed", c.passed),
        (true, None) => "✓ check passed".to_string(),
        (false, Some(c)) => format!(
            "✗ check failed · {} failed of {}",
            c.failed,
            c.passed + c.failed
        ),
        (false, None) => "✗ check failed".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_what_the_check_found() {
        let c = |passed, failed| Some(CheckCounts { passed, failed });
        assert_eq!(
            check_line(true, c(12, 0), None, None),
            "✓ check passed · 12 passed"
        );
        assert_eq!(
            check_line(false, c(12, 2), None, None),
            "✗ check failed · 2 failed of 14"
        );
        assert_eq!(check_line(false, None, None, None), "✗ check failed");
        assert_eq!(
            check_line(false, None, Some(600), None),
            "⏱ check timed out after 600 s"
        );
        assert_eq!(
            check_line(false, None, None, Some("pytest")),
            "✗ check could not run: pytest is not installed"
        );
    }
}
