//! The documentation beside the code: every relative link in `README.md`
//! and `docs/*.md` names a file or folder of this repository, and its
//! `#anchor`, if it has one, a heading of the page it points at (as GitHub
//! makes a heading's anchor); every page of `docs/` is linked from the
//! README, and the README stays short.
//!
//! Links are read as Markdown reads them: `[text](target)`, `![alt](target)`
//! and `[label]: target`, outside fenced code blocks and code spans.
//! Headings are ATX headings (`#` to `######`). Plain `std`, no Markdown
//! crate.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// The README's longest (issue 36: "at most ~300 lines").
const README_LINES: usize = 300;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `README.md` and every `docs/*.md`, relative to the root.
fn pages() -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| p.strip_prefix(root()).unwrap().to_path_buf())
        .collect();
    docs.sort();
    out.extend(docs);
    out
}

/// A page's text outside fenced code blocks, as paragraphs (runs of
/// non-blank lines), each with the number of its first line.
fn paragraphs(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    let mut current: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        if let Some(c) = marker {
            let run = trimmed.chars().take_while(|x| *x == c).count();
            if run >= 3 {
                match fence {
                    None => {
                        fence = Some((c, run));
                        out.extend(current.take());
                        continue;
                    }
                    Some((open, len))
                        if open == c && run >= len && trimmed[run..].trim().is_empty() =>
                    {
                        fence = None;
                        continue;
                    }
                    Some(_) => {}
                }
            }
        }
        if fence.is_some() {
            continue;
        }
        if line.trim().is_empty() {
            out.extend(current.take());
            continue;
        }
        match &mut current {
            Some((_, text)) => {
                text.push('\n');
                text.push_str(line);
            }
            None => current = Some((i + 1, line.to_string())),
        }
    }
    out.extend(current);
    out
}

/// `text` without its code spans (a run of backticks up to the next run of
/// as many); a run that is never closed stays as it is.
fn without_code(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|c| **c == '`').count();
        let mut j = i + run;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let n = chars[j..].iter().take_while(|c| **c == '`').count();
                if n == run {
                    close = Some(j + n);
                    break;
                }
                j += n;
            } else {
                j += 1;
            }
        }
        match close {
            // A code span reads as nothing here, but keeps its lines.
            Some(end) => {
                out.extend(chars[i..end].iter().filter(|c| **c == '\n'));
                i = end;
            }
            None => {
                out.extend(&chars[i..i + run]);
                i += run;
            }
        }
    }
    out
}

/// The targets of a paragraph's links, each with its line (counted from
/// the paragraph's first, 0).
fn links(paragraph: &str) -> Vec<(usize, String)> {
    let text = without_code(paragraph);
    let mut out = Vec::new();
    // Reference definitions: `[label]: target`.
    for (n, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with('[')
            && let Some(end) = t.find("]:")
            && !t[1..end].contains(']')
            && let Some(target) = t[end + 2..].split_whitespace().next()
        {
            out.push((n, target.trim_matches(['<', '>']).to_string()));
        }
    }
    // Inline links and images: `](target)`, the target up to its closing
    // parenthesis (balanced ones inside it kept), a title after a space
    // dropped.
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("](") {
        let start = i + at + 2;
        let mut depth = 0usize;
        let mut end = None;
        for (k, b) in bytes[start..].iter().enumerate() {
            match b {
                b'(' => depth += 1,
                b')' if depth == 0 => {
                    end = Some(start + k);
                    break;
                }
                b')' => depth -= 1,
                b'\n' => break,
                _ => {}
            }
        }
        if let Some(end) = end {
            let raw = text[start..end].trim();
            let target = match raw.strip_prefix('<') {
                Some(rest) => rest.split('>').next().unwrap_or(""),
                None => raw.split_whitespace().next().unwrap_or(""),
            };
            let line = text[..start].matches('\n').count();
            out.push((line, target.to_string()));
            i = end;
        } else {
            i = start;
        }
    }
    out
}

/// A heading's anchor as GitHub makes it: its text without markup,
/// lowercased, everything but letters, digits, `-`, `_` and spaces dropped,
/// spaces made `-`.
fn slug(heading: &str) -> String {
    // Links and images keep their text.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](") else {
            break;
        };
        let Some(close) = rest[open + mid..].find(')') else {
            break;
        };
        text.push_str(rest[..open].trim_end_matches('!'));
        text.push_str(&rest[open + 1..open + mid]);
        rest = &rest[open + mid + close + 1..];
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings, a repeated one numbered as GitHub
/// numbers it (`x`, `x-1`, `x-2`).
fn anchors(text: &str) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for (_, paragraph) in paragraphs(text) {
        for line in paragraph.lines() {
            let t = line.trim_start();
            if line.len() - t.len() > 3 {
                continue;
            }
            let level = t.chars().take_while(|c| *c == '#').count();
            if !(1..=6).contains(&level) {
                continue;
            }
            let body = &t[level..];
            if !body.is_empty() && !body.starts_with([' ', '\t']) {
                continue;
            }
            // A closing run of `#`s is not the heading's.
            let body = body.trim();
            let body = match body.trim_end_matches('#') {
                b if b.is_empty() || b.ends_with([' ', '\t']) => b.trim_end(),
                _ => body,
            };
            let base = slug(body);
            let n = seen.entry(base.clone()).or_insert(0);
            out.push(if *n == 0 { base } else { format!("{base}-{n}") });
            *n += 1;
        }
    }
    out
}

/// `%XX` escapes decoded.
fn decoded(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = path.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `target` leaves the repository (an address with a scheme, or
/// one for another host).
fn external(target: &str) -> bool {
    if target.starts_with("//") {
        return true;
    }
    match target.find(':') {
        Some(colon) => {
            let scheme = &target[..colon];
            !scheme.is_empty()
                && scheme
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
                && !target[..colon].contains('/')
        }
        None => false,
    }
}

/// `path` with `.` and `..` taken away (it need not exist); `None` if it
/// climbs above its start.
fn normal(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// What is wrong with the link `target` on `page` (relative to the root),
/// if anything.
fn check(page: &Path, target: &str, cache: &mut BTreeMap<PathBuf, Vec<String>>) -> Option<String> {
    if target.is_empty() {
        return Some("an empty link".into());
    }
    if external(target) {
        return None;
    }
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let path = decoded(path);
    let file = if path.is_empty() {
        page.to_path_buf()
    } else {
        let joined = page.parent().unwrap_or(Path::new("")).join(&path);
        match normal(&joined) {
            Some(p) => p,
            None => return Some(format!("{target}: outside the repository")),
        }
    };
    let full = root().join(&file);
    if !full.exists() {
        return Some(format!("{target}: no such file ({})", file.display()));
    }
    let anchor = anchor?;
    if file.extension().is_none_or(|e| e != "md") {
        return Some(format!(
            "{target}: an anchor on a page that is not Markdown"
        ));
    }
    let known = cache
        .entry(file.clone())
        .or_insert_with(|| anchors(&std::fs::read_to_string(&full).unwrap_or_default()));
    if !known.iter().any(|a| a == &decoded(anchor)) {
        return Some(format!(
            "{target}: no heading #{anchor} in {} (it has: {})",
            file.display(),
            known.join(", ")
        ));
    }
    None
}

#[test]
fn every_relative_link_resolves() {
    let mut cache = BTreeMap::new();
    let mut broken = Vec::new();
    let mut seen = 0;
    for page in pages() {
        let text = std::fs::read_to_string(root().join(&page)).unwrap();
        for (first, paragraph) in paragraphs(&text) {
            for (n, target) in links(&paragraph) {
                seen += 1;
                if let Some(problem) = check(&page, &target, &mut cache) {
                    broken.push(format!("{}:{}: {problem}", page.display(), first + n));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(seen > 50, "only {seen} links read: is the reader broken?");
}

#[test]
fn every_docs_page_is_linked_from_the_readme() {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let linked: Vec<String> = paragraphs(&text)
        .iter()
        .flat_map(|(_, p)| links(p))
        .map(|(_, t)| t.split('#').next().unwrap_or("").to_string())
        .collect();
    let missing: Vec<String> = pages()
        .into_iter()
        .skip(1)
        .map(|p| p.display().to_string())
        .filter(|p| !linked.contains(p))
        .collect();
    assert!(missing.is_empty(), "not linked from README.md: {missing:?}");
}

#[test]
fn the_readme_stays_short() {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = text.lines().count();
    assert!(
        lines <= README_LINES,
        "README.md has {lines} lines (at most {README_LINES}): move the detail to a page of docs/"
    );
}

#[test]
fn anchors_are_githubs() {
    for (heading, anchor) in [
        ("Isolated writers: best of N", "isolated-writers-best-of-n"),
        (
            "quorum inside an editor: `quorum acp`",
            "quorum-inside-an-editor-quorum-acp",
        ),
        (
            "An agent's own commands, modes and options",
            "an-agents-own-commands-modes-and-options",
        ),
        ("Agents: `[agents.NAME]`", "agents-agentsname"),
        (
            "MCP servers: `[mcp_servers.NAME]`",
            "mcp-servers-mcp_serversname",
        ),
        ("The chat model's tools", "the-chat-models-tools"),
        ("Keys · replay → *fast*", "keys--replay--fast"),
        ("See [the map](docs/architecture.md)", "see-the-map"),
        ("Über 2 Tests", "über-2-tests"),
    ] {
        assert_eq!(slug(heading), anchor, "{heading}");
    }
    let page =
        "# Top #\n\n## Twice\n\n```\n# not a heading\n```\n\n## Twice\n\n####### seven\n\n#no\n";
    assert_eq!(anchors(page), ["top", "twice", "twice-1"]);
}

#[test]
fn links_are_read_as_markdown_reads_them() {
    let page = "See [a](a.md#x) and ![b](docs/b.svg \"title\"),\n\
                `[not](code.md)` and ``a `[nor](this.md)` b``; [c](<with space.md>)\n\
                and [d](f(1).md).\n\n\
                ```sh\n[fenced](no.md)\n```\n\n\
                [ref]: ref.md\n\
                [split\nlink](split.md) and [e](https://example.com)";
    let found: Vec<(usize, String)> = paragraphs(page)
        .iter()
        .flat_map(|(first, p)| links(p).into_iter().map(move |(n, t)| (first + n, t)))
        .collect();
    let found: Vec<(usize, &str)> = found.iter().map(|(n, t)| (*n, t.as_str())).collect();
    assert_eq!(
        found,
        [
            (1, "a.md#x"),
            (1, "docs/b.svg"),
            (2, "with space.md"),
            (3, "f(1).md"),
            (9, "ref.md"),
            (11, "split.md"),
            (11, "https://example.com"),
        ]
    );
    assert!(external("https://example.com") && external("mailto:a@b") && external("//x"));
    assert!(!external("docs/a.md") && !external("#a") && !external("a/b:c.md"));
    assert_eq!(
        normal(Path::new("docs/../README.md")),
        Some("README.md".into())
    );
    assert_eq!(normal(Path::new("docs/../../shared/DESIGN.md")), None);
}

/// The allow-list of the layering test (`const ALLOWED` in the file of
/// `tests/` that holds it): each room and what it may import, in order.
fn allow_list() -> Vec<(String, Vec<String>)> {
    let mut stack = vec![root().join("tests")];
    let mut text = None;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "docs.rs")
            {
                let t = std::fs::read_to_string(&path).unwrap();
                if t.contains("const ALLOWED: &[(&str, &[&str])]") {
                    text = Some(t);
                }
            }
        }
    }
    let text = text.expect("the layering test's `const ALLOWED` under tests/");
    let start = text.find("const ALLOWED").unwrap();
    let start = start + text[start..].find("= &[").unwrap() + 4;
    let end = start + text[start..].find("\n];").unwrap();
    let code: String = text[start..end]
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let strings = |s: &str| -> Vec<String> {
        s.split('"')
            .enumerate()
            .filter(|(i, _)| i % 2 == 1)
            .map(|(_, s)| s.to_string())
            .collect()
    };
    // Each entry is `("room", &[...])`, on one line or several: the room
    // is the last string before its `&[`.
    let mut out = Vec::new();
    let mut rest = code.as_str();
    while let Some(open) = rest.find("&[") {
        let name = strings(&rest[..open]).pop().expect("a room before &[");
        let close = open + rest[open..].find(']').unwrap();
        out.push((name, strings(&rest[open..close])));
        rest = &rest[close..];
    }
    out
}

/// The table of "Who may import whom" in `docs/architecture.md`: each
/// room and what it may import, in order.
fn import_table() -> Vec<(String, Vec<String>)> {
    let text = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("Who may import whom"))
        .expect("docs/architecture.md: ## Who may import whom");
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let names = |cell: &str| -> Vec<String> {
                cell.split('`')
                    .enumerate()
                    .filter(|(i, _)| i % 2 == 1)
                    .map(|(_, s)| s.to_string())
                    .collect()
            };
            (names(cells[1]).remove(0), names(cells[2]))
        })
        .collect()
}

#[test]
fn the_architecture_page_shows_the_layering_tests_allow_list() {
    let list = allow_list();
    assert!(list.len() >= 10, "read {list:?}");
    let table = import_table();
    let differ: Vec<String> = list
        .iter()
        .zip(&table)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("test: {a:?}, page: {b:?}"))
        .collect();
    assert!(
        differ.is_empty() && table.len() == list.len(),
        "docs/architecture.md's \"Who may import whom\" differs from the layering test's \
         ALLOWED ({} rows there, {} here):\n{}",
        list.len(),
        table.len(),
        differ.join("\n")
    );
}
