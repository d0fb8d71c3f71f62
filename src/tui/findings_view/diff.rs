//! The reviewed diff, read for display: files, hunks and lines with their
//! numbers on both sides, and where each finding belongs among them. Pure;
//! the text it is given is sanitised already.

/// What a line of a hunk does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Context,
    Added,
    Removed,
}

/// One line of a hunk, without its `+`/`-`/` ` mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffLine {
    pub kind: Kind,
    /// Its number on the old side (none for an added line).
    pub old: Option<u32>,
    /// Its number on the new side (none for a removed line).
    pub new: Option<u32>,
    pub text: String,
}

impl DiffLine {
    /// The line as a unified diff writes it.
    pub fn unified(&self) -> String {
        let mark = match self.kind {
            Kind::Context => ' ',
            Kind::Added => '+',
            Kind::Removed => '-',
        };
        format!("{mark}{}", self.text)
    }
}

/// `@@ -a,b +c,d @@ context` and its lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    pub header: String,
    pub lines: Vec<DiffLine>,
}

/// One file of the diff (its new path; a deleted file's old one).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DiffFile {
    pub path: String,
    pub hunks: Vec<Hunk>,
}

/// Where a finding (or a comment) sits: after line `line` of hunk `hunk`
/// of file `file`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct At {
    pub file: usize,
    pub hunk: usize,
    pub line: usize,
}

/// The files of a unified diff (`git diff`'s), in order.
pub fn parse(diff: &str) -> Vec<DiffFile> {
    let mut files: Vec<DiffFile> = Vec::new();
    let mut old_path: Option<String> = None;
    let (mut old, mut new) = (0u32, 0u32);
    let mut in_hunk = false;
    for line in diff.lines() {
        if line.starts_with("diff --git ") {
            in_hunk = false;
            old_path = None;
            continue;
        }
        if !in_hunk || line.starts_with("--- ") || line.starts_with("+++ ") {
            if let Some(p) = line.strip_prefix("--- ") {
                old_path = side_path(p, "a/");
                in_hunk = false;
                continue;
            }
            if let Some(p) = line.strip_prefix("+++ ") {
                let path = side_path(p, "b/").or(old_path.take()).unwrap_or_default();
                files.push(DiffFile {
                    path,
                    hunks: Vec::new(),
                });
                in_hunk = false;
                continue;
            }
        }
        if let Some(rest) = line.strip_prefix("@@ ") {
            let Some(file) = files.last_mut() else {
                continue;
            };
            let (o, n) = starts(rest);
            (old, new) = (o, n);
            file.hunks.push(Hunk {
                header: line.to_string(),
                lines: Vec::new(),
            });
            in_hunk = true;
            continue;
        }
        if !in_hunk {
            continue;
        }
        let Some(hunk) = files.last_mut().and_then(|f| f.hunks.last_mut()) else {
            continue;
        };
        let (kind, text) = match line.chars().next() {
            Some('+') => (Kind::Added, &line[1..]),
            Some('-') => (Kind::Removed, &line[1..]),
            Some(' ') => (Kind::Context, &line[1..]),
            // `\ No newline at end of file`
            Some('\\') => continue,
            None => (Kind::Context, ""),
            _ => {
                in_hunk = false;
                continue;
            }
        };
        let (o, n) = match kind {
            Kind::Added => (None, Some(new)),
            Kind::Removed => (Some(old), None),
            Kind::Context => (Some(old), Some(new)),
        };
        if o.is_some() {
            old += 1;
        }
        if n.is_some() {
            new += 1;
        }
        hunk.lines.push(DiffLine {
            kind,
            old: o,
            new: n,
            text: text.to_string(),
        });
    }
    files
}

/// `a/src/x.rs` to `src/x.rs`; `/dev/null` to none.
fn side_path(p: &str, prefix: &str) -> Option<String> {
    let p = p.split('\t').next().unwrap_or(p).trim_end();
    if p == "/dev/null" {
        return None;
    }
    Some(p.strip_prefix(prefix).unwrap_or(p).to_string())
}

/// `-a,b +c,d @@` to `(a, c)`.
fn starts(header: &str) -> (u32, u32) {
    let mut words = header.split_whitespace();
    let num = |w: Option<&str>, mark: char| {
        w.and_then(|w| w.strip_prefix(mark))
            .and_then(|w| w.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let old = num(words.next(), '-');
    let new = num(words.next(), '+');
    (old, new)
}

/// The place of lines `line..=end` of `path` in `files`: after the hunk
/// line numbered `end` on the new side, else after the last line of a hunk
/// within `line..=end`, else none (outside the diff).
pub fn place(files: &[DiffFile], path: &str, line: u32, end: u32) -> Option<At> {
    let file = files.iter().position(|f| f.path == path)?;
    let mut best: Option<At> = None;
    for (h, hunk) in files[file].hunks.iter().enumerate() {
        for (l, d) in hunk.lines.iter().enumerate() {
            match d.new {
                Some(n) if n == end => {
                    return Some(At {
                        file,
                        hunk: h,
                        line: l,
                    });
                }
                Some(n) if (line..=end).contains(&n) => {
                    best = Some(At {
                        file,
                        hunk: h,
                        line: l,
                    })
                }
                _ => {}
            }
        }
    }
    best
}

/// The most lines of a hunk a follow-up quotes.
const QUOTED_LINES: usize = 40;

/// The hunk around lines `line..=end` (its header, the lines that touch
/// them and three on each side), as a unified diff; `at` when the lines
/// have no new-side numbers (a comment on a removed line).
pub fn quote(files: &[DiffFile], at: At, line: u32, end: u32) -> String {
    let hunk = &files[at.file].hunks[at.hunk];
    let touching: Vec<usize> = hunk
        .lines
        .iter()
        .enumerate()
        .filter(|(_, d)| d.new.is_some_and(|n| (line..=end).contains(&n)))
        .map(|(i, _)| i)
        .collect();
    let first = touching.first().copied().unwrap_or(at.line);
    let last = touching.last().copied().unwrap_or(at.line);
    let from = first.saturating_sub(3);
    let to = (last + 4).min(hunk.lines.len());
    let mut out = vec![hunk.header.clone()];
    out.extend(
        hunk.lines[from..to]
            .iter()
            .take(QUOTED_LINES)
            .map(DiffLine::unified),
    );
    if to - from > QUOTED_LINES {
        out.push(format!("… {} more lines", to - from - QUOTED_LINES));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    pub const DIFF: &str = "diff --git a/src/a.rs b/src/a.rs
index 1..2 100644
--- a/src/a.rs
+++ b/src/a.rs
@@ -1,4 +1,5 @@ fn main
 one
-two
+deux
+zwei
 three
\\ No newline at end of file
@@ -10,2 +11,2 @@
 ten
-eleven
+onze
diff --git a/old.rs b/old.rs
deleted file mode 100644
--- a/old.rs
+++ /dev/null
@@ -1 +0,0 @@
-gone
";

    #[test]
    fn a_diff_reads_as_files_hunks_and_numbered_lines() {
        let files = parse(DIFF);
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].path, "src/a.rs");
        assert_eq!(files[1].path, "old.rs", "a deleted file keeps its old path");
        let h = &files[0].hunks[0];
        assert_eq!(h.header, "@@ -1,4 +1,5 @@ fn main");
        let numbered: Vec<_> = h.lines.iter().map(|l| (l.old, l.new)).collect();
        assert_eq!(
            numbered,
            vec![
                (Some(1), Some(1)),
                (Some(2), None),
                (None, Some(2)),
                (None, Some(3)),
                (Some(3), Some(4)),
            ]
        );
        assert_eq!(files[0].hunks[1].lines[2].new, Some(12));
        assert_eq!(files[1].hunks[0].lines[0].kind, Kind::Removed);
    }

    #[test]
    fn a_finding_sits_under_its_last_line_or_outside() {
        let files = parse(DIFF);
        let at = |f, h, l| At {
            file: f,
            hunk: h,
            line: l,
        };
        assert_eq!(place(&files, "src/a.rs", 2, 3), Some(at(0, 0, 3)));
        assert_eq!(place(&files, "src/a.rs", 12, 12), Some(at(0, 1, 2)));
        // Its end past the hunk: after the hunk's last line within it.
        assert_eq!(place(&files, "src/a.rs", 4, 8), Some(at(0, 0, 4)));
        assert_eq!(place(&files, "src/a.rs", 6, 8), None);
        assert_eq!(place(&files, "nope.rs", 1, 1), None);
    }

    #[test]
    fn a_quote_is_the_hunk_around_the_lines() {
        let files = parse(DIFF);
        let at = place(&files, "src/a.rs", 2, 3).unwrap();
        assert_eq!(
            quote(&files, at, 2, 3),
            "@@ -1,4 +1,5 @@ fn main\n one\n-two\n+deux\n+zwei\n three"
        );
    }
}
