//! What is wrong with a config file, said with its place: the file, the
//! line, the section and the field; for an unknown field, the nearest
//! known name.

use std::path::PathBuf;

/// A config file that cannot be taken.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Bad TOML, a value of the wrong kind, or one the part of quorum that
    /// takes it refuses (`message` names the line or the section).
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    /// A field (or a section) no part of quorum knows.
    #[error("{0}")]
    UnknownField(Box<UnknownField>),
    #[error("{path}: [agents.{name}] needs a `command` (it is not a built-in agent)")]
    MissingCommand { path: PathBuf, name: String },
}

/// A field (or a section) no part of quorum knows, and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownField {
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
    pub field: String,
    /// The table it is in: `[limits]`, `[agents.mine]`; empty at the top
    /// level.
    pub place: String,
    /// A table at the top level: an unknown section.
    pub section: bool,
    /// The known name nearest to it, if one is near.
    pub nearest: Option<String>,
    /// Every name known there.
    pub known: Vec<String>,
}

/// `FILE: line 12, column 1: unknown field `max_paralel` at the top level;
/// did you mean `max_parallel`?`, `... unknown section [limts]; did you
/// mean [limits]?`.
impl std::fmt::Display for UnknownField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (field, place) = (&self.field, &self.place);
        write!(
            f,
            "{}: line {}, column {}: ",
            self.path.display(),
            self.line,
            self.column
        )?;
        match (self.section, place.as_str()) {
            (true, _) => write!(f, "unknown section [{field}]; ")?,
            (false, "") => write!(f, "unknown field `{field}` at the top level; ")?,
            (false, place) => write!(f, "unknown field `{field}` in {place}; ")?,
        }
        match &self.nearest {
            Some(n) if self.section => write!(f, "did you mean [{n}]?"),
            Some(n) => write!(f, "did you mean `{n}`?"),
            None if self.known.is_empty() => f.write_str("nothing may be set there"),
            None => write!(f, "known: {}", self.known.join(", ")),
        }
    }
}

/// The name in `known` nearest to `word`, if one is near: a few letters
/// changed, left out, added or swapped (about one in three), or one the
/// start of the other.
pub fn nearest<'a>(word: &str, known: &'a [String]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (distance(word, k), k))
        .filter(|(d, k)| {
            let longest = word.chars().count().max(k.chars().count());
            *d * 3 <= longest
                || (word.len() >= 3 && (k.starts_with(word) || word.starts_with(k.as_str())))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.as_str())
}

/// The edits (a letter changed, left out, added, or two side by side
/// swapped) that make `a` into `b`: the optimal string alignment distance.
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows of the table: two back, one back, this one.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut last: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut row = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (last[j] + 1).min(row[j - 1] + 1).min(last[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(before[j - 2] + 1);
            }
        }
        before = std::mem::replace(&mut last, row);
    }
    last[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn distances() {
        assert_eq!(distance("nmae", "name"), 1);
        assert_eq!(distance("max_paralel", "max_parallel"), 1);
        assert_eq!(distance("sync_secs", "sync_seconds"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("abc", "abc"), 0);
        assert_eq!(distance("kitten", "sitting"), 3);
    }

    #[test]
    fn the_nearest_name_or_none() {
        let names = known(&["name", "base_url"]);
        assert_eq!(nearest("nmae", &names), Some("name"));
        assert_eq!(nearest("base_ulr", &names), Some("base_url"));
        assert_eq!(nearest("colour", &names), None);
        let names = known(&["sync_seconds"]);
        assert_eq!(nearest("sync_secs", &names), Some("sync_seconds"));
        assert_eq!(nearest("sync", &names), Some("sync_seconds"));
        let names = known(&["ssh", "ssh_args", "dir"]);
        assert_eq!(nearest("port", &names), None);
    }
}
