//! The lines a unified diff (`git diff`) shows of the new side of each
//! file: where GitHub takes a review comment (`side: RIGHT`).

use std::collections::BTreeMap;

/// For each file of a diff (its new path), the new side's line ranges of
/// its hunks, context lines included.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DiffLines {
    files: BTreeMap<String, Vec<(u32, u32)>>,
}

impl DiffLines {
    /// Reads `git diff`'s output. A deleted file (`+++ /dev/null`) and a
    /// hunk that only removes lines have no line on the new side.
    pub fn parse(diff: &str) -> Self {
        let mut files: BTreeMap<String, Vec<(u32, u32)>> = BTreeMap::new();
        let mut file: Option<String> = None;
        // The old and new lines the hunk being read has yet to show: its
        // lines are never read as headers (an added `++ x` is `+++ x`).
        let mut left = (0u32, 0u32);
        for line in diff.lines() {
            if left != (0, 0) {
                let in_hunk = match line.as_bytes().first() {
                    Some(b' ') | None => Some((1, 1)),
                    Some(b'-') => Some((1, 0)),
                    Some(b'+') => Some((0, 1)),
                    Some(b'\\') => Some((0, 0)),
                    // A diff cut short: the hunk is over.
                    Some(_) => None,
                };
                if let Some((old, new)) = in_hunk {
                    left = (left.0.saturating_sub(old), left.1.saturating_sub(new));
                    continue;
                }
                left = (0, 0);
            }
            if let Some(path) = line.strip_prefix("+++ ") {
                file = new_path(path);
                if let Some(f) = &file {
                    files.entry(f.clone()).or_default();
                }
            } else if line.starts_with("diff ") {
                file = None;
            } else if let Some(hunk) = line.strip_prefix("@@ ")
                && let Some((old, (start, count))) = ranges(hunk)
            {
                left = (old, count);
                if let Some(f) = &file
                    && count > 0
                {
                    let ranges = files.entry(f.clone()).or_default();
                    ranges.push((start, start + count - 1));
                }
            }
        }
        Self { files }
    }

    /// The hunk (its index in the file) that shows `line` of `file`.
    pub fn hunk(&self, file: &str, line: u32) -> Option<usize> {
        self.files
            .get(file)?
            .iter()
            .position(|&(start, end)| (start..=end).contains(&line))
    }

    /// Whether lines `line..=end` of `file` are all in one hunk.
    pub fn holds(&self, file: &str, line: u32, end: u32) -> bool {
        self.hunk(file, line).is_some() && self.hunk(file, line) == self.hunk(file, end)
    }

    /// The files of the diff (new paths), sorted.
    pub fn files(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }
}

/// `b/src/a.rs` (or `"b/sp ace.rs"`) to `src/a.rs`; `/dev/null` to none.
fn new_path(path: &str) -> Option<String> {
    let path = path.trim_end_matches('\t').trim();
    let path = path
        .strip_prefix('"')
        .and_then(|p| p.strip_suffix('"'))
        .unwrap_or(path);
    if path == "/dev/null" {
        return None;
    }
    Some(path.strip_prefix("b/").unwrap_or(path).to_string())
}

/// `-a,b +c,d @@ …` to `(b, (c, d))`; a count left out is 1.
fn ranges(hunk: &str) -> Option<(u32, (u32, u32))> {
    let mut words = hunk.split_whitespace();
    let (_, old) = range(words.next()?.strip_prefix('-')?)?;
    let new = range(words.next()?.strip_prefix('+')?)?;
    Some((old, new))
}

/// `c,d` (or `c`) to `(c, d)`.
fn range(r: &str) -> Option<(u32, u32)> {
    Some(match r.split_once(',') {
        Some((s, c)) => (s.parse().ok()?, c.parse().ok()?),
        None => (r.parse().ok()?, 1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str = "diff --git a/src/a.rs b/src/a.rs\nindex 1..2 100644\n--- a/src/a.rs\n+++ b/src/a.rs\n\
        @@ -1,3 +1,4 @@\n a\n+++ b/added.rs\n c\n d\n@@ -20,2 +21,0 @@ fn g()\n-x\n-y\n@@ -30 +30 @@\n-p\n+q\n\\ No newline at end of file\n\
        diff --git a/gone.rs b/gone.rs\n--- a/gone.rs\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n\
        diff --git a/new.rs b/new.rs\n--- /dev/null\n+++ b/new.rs\n@@ -0,0 +1,2 @@\n+a\n+b\n";

    #[test]
    fn hunks_are_read_on_the_new_side() {
        let d = DiffLines::parse(DIFF);
        assert_eq!(d.files().collect::<Vec<_>>(), ["new.rs", "src/a.rs"]);
        assert_eq!(d.hunk("src/a.rs", 1), Some(0));
        assert_eq!(d.hunk("src/a.rs", 4), Some(0));
        assert_eq!(d.hunk("src/a.rs", 5), None, "past the hunk");
        assert_eq!(d.hunk("src/a.rs", 21), None, "a hunk that only removes");
        assert_eq!(d.hunk("src/a.rs", 30), Some(1), "a count left out is 1");
        assert_eq!(d.hunk("new.rs", 2), Some(0));
        assert_eq!(d.hunk("gone.rs", 1), None);
        assert!(d.holds("src/a.rs", 1, 4));
        assert!(!d.holds("src/a.rs", 4, 30), "two hunks");
        assert!(DiffLines::parse("").files().next().is_none());
    }
}
