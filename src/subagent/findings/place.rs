//! Where findings point: checked against the reviewed tree (a file that
//! is not in the repository, a line past its end: dropped with a notice),
//! and against the reviewed diff (a finding whose lines it does not touch
//! is outside it).
//!
//! The reviewed diff is the ```` ```diff ```` block of the review's
//! prompt, which both `quorum review` and a review of a branch send; a
//! review whose prompt holds none has no known diff, and nothing of it is
//! said to be outside.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Component, Path};

use super::Parsed;
use crate::event::finding::Finding;

/// The largest file whose lines are counted (a larger one is not checked
/// for a line past its end).
const MAX_COUNTED_BYTES: u64 = 16 << 20;

/// The text of a review's prompt's first ```` ```diff ```` block: the
/// reviewed diff.
pub fn diff_of_prompt(prompt: &str) -> Option<&str> {
    let open = prompt.find("```diff\n")?;
    let body = &prompt[open + 8..];
    let end = body
        .split_inclusive('\n')
        .scan(0, |at, l| {
            let start = *at;
            *at += l.len();
            Some((start, l))
        })
        .find(|(_, l)| l.trim_end() == "```")
        .map_or(body.len(), |(start, _)| start);
    Some(&body[..end])
}

/// The lines a diff adds or changes, by file (the new side's hunks).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiffRanges {
    files: BTreeMap<String, Vec<(u32, u32)>>,
}

impl DiffRanges {
    /// The diff of a review's prompt: its first ```` ```diff ```` block.
    pub fn of_prompt(prompt: &str) -> Option<Self> {
        diff_of_prompt(prompt).map(Self::of_diff)
    }

    /// The ranges of a unified diff (`git diff`'s).
    pub fn of_diff(diff: &str) -> Self {
        let mut files: BTreeMap<String, Vec<(u32, u32)>> = BTreeMap::new();
        let mut old: Option<String> = None;
        let mut current: Option<String> = None;
        for line in diff.lines() {
            if let Some(path) = line.strip_prefix("--- ") {
                old = path.strip_prefix("a/").map(str::to_string);
            } else if let Some(path) = line.strip_prefix("+++ ") {
                // A deleted file's findings name its old path.
                current = path.strip_prefix("b/").map(str::to_string).or(old.take());
                if let Some(f) = &current {
                    files.entry(f.clone()).or_default();
                }
            } else if let (Some(f), Some(hunk)) = (&current, line.strip_prefix("@@ "))
                && let Some(range) = new_range(hunk)
            {
                files.entry(f.clone()).or_default().push(range);
            }
        }
        Self { files }
    }

    /// The diff changes `file`.
    pub fn has(&self, file: &str) -> bool {
        self.files.contains_key(file)
    }

    /// The diff's hunks touch lines `line..=end` of `file` (a hunk that
    /// only removes lines touches the lines around where they were).
    pub fn touches(&self, file: &str, line: u32, end: u32) -> bool {
        self.files
            .get(file)
            .is_some_and(|hunks| hunks.iter().any(|&(a, b)| line <= b && a <= end))
    }

    /// The last line any hunk of `file` reaches.
    fn last_line(&self, file: &str) -> u32 {
        self.files
            .get(file)
            .and_then(|h| h.iter().map(|&(_, b)| b).max())
            .unwrap_or(0)
    }
}

/// `-a,b +c,d @@` to the new side's `c..=c+d-1` (`c..=c+1` for a hunk
/// that removes only: the lines on either side of the cut).
fn new_range(hunk: &str) -> Option<(u32, u32)> {
    let plus = hunk.split_whitespace().find(|w| w.starts_with('+'))?;
    let (start, len) = match plus[1..].split_once(',') {
        Some((s, l)) => (s.parse::<u32>().ok()?, l.parse::<u32>().ok()?),
        None => (plus[1..].parse::<u32>().ok()?, 1),
    };
    Some(match len {
        0 => (start, start + 1),
        n => (start, start + n - 1),
    })
}

/// Keeps the findings that point into the repository at `root`: a path
/// that leaves it (absolute, `..`, a link out), a file neither in it nor
/// in the diff, or a line past the file's end (and past every hunk of the
/// diff, for a file it changes) is dropped with a notice. With `rev` (a
/// review of a branch) the files are the revision's, read from git, not
/// the tree checked out.
pub fn check(parsed: &mut Parsed, root: &Path, diff: Option<&DiffRanges>, rev: Option<&str>) {
    let given = root;
    let Ok(root) = root.canonicalize() else {
        return;
    };
    let findings = std::mem::take(&mut parsed.findings);
    for mut f in findings {
        if let Some(rel) = inside(&f.file, [given, root.as_path()]) {
            f.file = rel;
        }
        let problem = match rev {
            Some(rev) => problem_at(&f, &root, rev, diff),
            None => problem(&f, &root, diff),
        };
        match problem {
            None => parsed.findings.push(f),
            Some(why) => parsed.notices.push(format!(
                "finding {:?} at {}:{} dropped: {why}",
                f.title, f.file, f.line
            )),
        }
    }
}

/// An absolute `file` under one of `tops` (the repository's top as
/// given, and its canonical path), relative to it; `None` for any other
/// (a relative one, one outside, one that climbs out with `..`).
fn inside<'a>(file: &str, tops: impl IntoIterator<Item = &'a Path>) -> Option<String> {
    let path = Path::new(file);
    if !path.is_absolute() {
        return None;
    }
    let rel = tops.into_iter().find_map(|t| path.strip_prefix(t).ok())?;
    (!leaves(rel) && rel.components().next().is_some()).then(|| rel.to_string_lossy().into_owned())
}

/// Whether a finding's path stays inside the repository (relative, no
/// `..`).
fn leaves(rel: &Path) -> bool {
    rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
}

/// What is wrong with where `f` points, if anything.
fn problem(f: &Finding, root: &Path, diff: Option<&DiffRanges>) -> Option<String> {
    let rel = Path::new(&f.file);
    if leaves(rel) {
        return Some("the path leaves the repository".into());
    }
    let in_diff = diff.is_some_and(|d| d.has(&f.file));
    let path = match root.join(rel).canonicalize() {
        Ok(p) => p,
        Err(_) if in_diff => return None,
        Err(_) => return Some(format!("{} is not in the repository", f.file)),
    };
    if !path.starts_with(root) {
        return Some("the path leaves the repository".into());
    }
    if !path.is_file() {
        return Some(format!("{} is not a file", f.file));
    }
    let lines = count_lines(&path)?;
    past_end(f, lines, diff, "")
}

/// What is wrong with where `f` points in revision `rev` of the
/// repository at `root`, if anything: its file is the blob git has there
/// (hardened git, `cat-file`, which runs no filter of the tree).
fn problem_at(f: &Finding, root: &Path, rev: &str, diff: Option<&DiffRanges>) -> Option<String> {
    let rel = Path::new(&f.file);
    if leaves(rel) {
        return Some("the path leaves the repository".into());
    }
    if rev.starts_with('-') {
        return None;
    }
    let out = crate::runtime::git::run(crate::runtime::git::in_dir(root).args([
        "cat-file",
        "blob",
        &format!("{rev}:{}", f.file),
    ]))
    .ok()?;
    if !out.status.success() {
        return Some(format!("{} is not in {rev}", f.file));
    }
    let lines = lines_of(&out.stdout[..out.stdout.len().min(MAX_COUNTED_BYTES as usize)]);
    past_end(f, lines, diff, &format!(" on {rev}"))
}

/// A line past the end of a file of `lines` lines (and of every hunk of
/// the diff): `where_` says whose file (` on BRANCH`).
fn past_end(f: &Finding, lines: u32, diff: Option<&DiffRanges>, where_: &str) -> Option<String> {
    let last = lines.max(diff.map_or(0, |d| d.last_line(&f.file)));
    (f.line > last.max(1)).then(|| {
        format!(
            "line {} is past the end of {} ({lines} lines{where_})",
            f.line, f.file
        )
    })
}

/// The lines of a file's bytes (its last one may lack its newline).
fn lines_of(bytes: &[u8]) -> u32 {
    let newlines = bytes.iter().filter(|&&b| b == b'\n').count();
    let unterminated = usize::from(bytes.last().is_some_and(|&b| b != b'\n'));
    (newlines + unterminated) as u32
}

/// The number of lines of a file (`None`: too large to count, or
/// unreadable).
fn count_lines(path: &Path) -> Option<u32> {
    let file = std::fs::File::open(path).ok()?;
    if file.metadata().ok()?.len() > MAX_COUNTED_BYTES {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_COUNTED_BYTES).read_to_end(&mut bytes).ok()?;
    Some(lines_of(&bytes))
}
