//! A file change as `git diff` shows it: a line diff (Myers, the crate
//! `similar`) in hunks, each with [`CONTEXT`] lines around its changes and
//! an `@@ -a,b +c,d @@` header. Pure: the same texts give the same rows.

use similar::udiff::UnifiedHunkHeader;
use similar::{Algorithm, ChangeTag, DiffOp};

/// Lines of context kept around a change, as `git diff` keeps.
pub const CONTEXT: usize = 3;

/// Most lines (old and new together, their common start and end set aside)
/// diffed line by line. Myers' work grows with those lines times the lines
/// that differ, and a box's diff is laid out again while it runs; past this
/// the change is shown whole, as one hunk, with a note. A bound and not a
/// deadline: the screen is the same on every machine and in every replay.
pub const DIFF_LINES: usize = 2_000;

/// The row a too-long change starts with (its marker is `'…'`).
pub const WHOLE_NOTE: &str = "too many lines changed to diff line by line: shown as one change";

/// A unified diff of `old` (none: a new file) against `new`: `(marker,
/// line)` pairs, marker `' '`, `'-'`, `'+'`, `'@'` (a hunk's header) or
/// `'…'` (a note). Lines are compared without their line ends.
pub fn diff(old: Option<&str>, new: &str) -> Vec<(char, String)> {
    let Some(old) = old else {
        return new.lines().map(|l| ('+', l.to_string())).collect();
    };
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    if a == b {
        return vec![];
    }
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (old_len, new_len) = (a.len() - prefix - suffix, b.len() - prefix - suffix);
    let mut out = Vec::new();
    let ops = if old_len + new_len > DIFF_LINES {
        out.push(('…', WHOLE_NOTE.to_string()));
        whole(prefix, old_len, new_len, suffix)
    } else {
        similar::capture_diff_slices(Algorithm::Myers, &a, &b)
    };
    for hunk in similar::group_diff_ops(ops, CONTEXT) {
        out.push(('@', UnifiedHunkHeader::new(&hunk).to_string()));
        for op in &hunk {
            out.extend(op.iter_changes(&a, &b).map(|c| {
                let marker = match c.tag() {
                    ChangeTag::Equal => ' ',
                    ChangeTag::Delete => '-',
                    ChangeTag::Insert => '+',
                };
                (marker, c.value().to_string())
            }));
        }
    }
    out
}

/// The change as one replacement between the common start (`prefix`
/// lines) and the common end (`suffix` lines).
fn whole(prefix: usize, old_len: usize, new_len: usize, suffix: usize) -> Vec<DiffOp> {
    let middle = match (old_len, new_len) {
        (0, new_len) => DiffOp::Insert {
            old_index: prefix,
            new_index: prefix,
            new_len,
        },
        (old_len, 0) => DiffOp::Delete {
            old_index: prefix,
            old_len,
            new_index: prefix,
        },
        (old_len, new_len) => DiffOp::Replace {
            old_index: prefix,
            old_len,
            new_index: prefix,
            new_len,
        },
    };
    let mut ops = Vec::new();
    if prefix > 0 {
        ops.push(DiffOp::Equal {
            old_index: 0,
            new_index: 0,
            len: prefix,
        });
    }
    ops.push(middle);
    if suffix > 0 {
        ops.push(DiffOp::Equal {
            old_index: prefix + old_len,
            new_index: prefix + new_len,
            len: suffix,
        });
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(d: &[(char, String)]) -> Vec<String> {
        d.iter()
            .map(|(m, l)| match m {
                '@' | '…' => l.clone(),
                m => format!("{m}{l}"),
            })
            .collect()
    }

    #[test]
    fn one_change_is_one_hunk_with_three_lines_around_it() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\n";
        assert_eq!(
            rows(&diff(Some(old), new)),
            [
                "@@ -2,7 +2,7 @@",
                " b",
                " c",
                " d",
                "-e",
                "+E",
                " f",
                " g",
                " h"
            ]
        );
        assert_eq!(rows(&diff(None, "x\ny")), ["+x", "+y"]);
        assert!(diff(Some("same"), "same").is_empty());
        assert!(diff(Some("same\n"), "same").is_empty(), "line ends aside");
    }

    /// Two edits far apart: two hunks, and the lines between them are
    /// not shown as removed and added again (as `git diff --no-index`
    /// shows the same two files).
    #[test]
    fn edits_far_apart_are_separate_hunks() {
        let old: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        let new = old
            .replace("line 3\n", "line three\n")
            .replace("line 27\n", "line 27\nline 27½\n");
        assert_eq!(
            rows(&diff(Some(&old), &new)),
            [
                "@@ -1,6 +1,6 @@",
                " line 1",
                " line 2",
                "-line 3",
                "+line three",
                " line 4",
                " line 5",
                " line 6",
                "@@ -25,6 +25,7 @@",
                " line 25",
                " line 26",
                " line 27",
                "+line 27½",
                " line 28",
                " line 29",
                " line 30",
            ]
        );
    }

    /// Headers as git writes them: a one-line side has no count, an empty
    /// side starts at the line before.
    #[test]
    fn hunk_headers_count_as_git_does() {
        assert_eq!(rows(&diff(Some("a\n"), "b\n")), ["@@ -1 +1 @@", "-a", "+b"]);
        assert_eq!(rows(&diff(Some(""), "x\n")), ["@@ -0,0 +1 @@", "+x"]);
        assert_eq!(
            rows(&diff(Some("a\nb\n"), "a\n")),
            ["@@ -1,2 +1 @@", " a", "-b"]
        );
        // Changes six lines apart share a hunk (their contexts touch).
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n";
        let new = "X\n2\n3\n4\n5\n6\n7\nY\n";
        assert_eq!(diff(Some(old), new)[0], ('@', "@@ -1,8 +1,8 @@".into()));
        assert_eq!(
            diff(Some(old), new)
                .iter()
                .filter(|(m, _)| *m == '@')
                .count(),
            1
        );
    }

    /// Past [`DIFF_LINES`] changed lines: the old whole-change form, with
    /// a note, and quickly.
    #[test]
    fn a_huge_change_is_shown_whole_with_a_note() {
        let old: String = (0..DIFF_LINES).map(|i| format!("old {i}\n")).collect();
        let new: String = (0..DIFF_LINES).map(|i| format!("new {i}\n")).collect();
        let (old, new) = (format!("head\n{old}tail\n"), format!("head\n{new}tail\n"));
        let started = std::time::Instant::now();
        let d = diff(Some(&old), &new);
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(d[0], ('…', WHOLE_NOTE.to_string()));
        let header = format!("@@ -1,{n} +1,{n} @@", n = DIFF_LINES + 2);
        assert_eq!(d[1], ('@', header));
        assert_eq!(d.len(), 2 + 2 + 2 * DIFF_LINES);
        assert_eq!(
            (&d[2], &d[3]),
            (&(' ', "head".into()), &('-', "old 0".into()))
        );
        assert_eq!(d.last(), Some(&(' ', "tail".into())));
        // Its first and its last line changed: at the bound, diffed line
        // by line (two hunks); one line more, shown whole.
        let ends_changed = |n: usize| {
            let old: String = (0..n).map(|i| format!("{i}\n")).collect();
            let new: String = (0..n)
                .map(|i| match i {
                    0 => "first\n".to_string(),
                    i if i == n - 1 => "last\n".to_string(),
                    i => format!("{i}\n"),
                })
                .collect();
            diff(Some(&old), &new)
        };
        let hunks = |d: &[(char, String)]| d.iter().filter(|(m, _)| *m == '@').count();
        let at = ends_changed(DIFF_LINES / 2);
        assert_eq!((hunks(&at), at[0].0), (2, '@'));
        let over = ends_changed(DIFF_LINES / 2 + 1);
        assert_eq!((hunks(&over), over[0].0), (1, '…'));
    }
}
