//! Styled logical lines, wrapped to a width at draw time.
//!
//! Cells keep their text as unwrapped [`LLine`]s; [`wrap`] lays them out for
//! the current width, so a resize re-wraps without re-parsing anything.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

/// How a logical line breaks when it is wider than the screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WrapMode {
    /// Break between words; a word wider than the line breaks anywhere.
    #[default]
    Words,
    /// Break anywhere, keeping every space (code).
    Chars,
    /// A horizontal rule: `fill` repeated across the width.
    Rule,
}

/// One unwrapped line: a prefix for its first row, a prefix for the rows it
/// wraps onto (hanging indent, quote bars), and its content.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LLine {
    pub first: Vec<Span<'static>>,
    pub rest: Vec<Span<'static>>,
    pub spans: Vec<Span<'static>>,
    pub mode: WrapMode,
}

impl LLine {
    pub fn plain(spans: Vec<Span<'static>>) -> Self {
        Self {
            spans,
            ..Self::default()
        }
    }

    pub fn prefixed(
        first: Vec<Span<'static>>,
        rest: Vec<Span<'static>>,
        spans: Vec<Span<'static>>,
    ) -> Self {
        Self {
            first,
            rest,
            spans,
            mode: WrapMode::Words,
        }
    }
}

/// Display width of spans, as [`text_width`] counts it.
pub fn spans_width(spans: &[Span<'_>]) -> usize {
    spans.iter().map(|s| text_width(&s.content)).sum()
}

/// Columns `text` takes on screen: the sum of its characters' widths, which
/// is what ratatui draws and terminals count for sanitised text. (Not
/// `UnicodeWidthStr::width`: it counts `لا` as one column, a ligature,
/// while it is drawn in two cells.)
pub fn text_width(text: &str) -> usize {
    text.chars().map(char_width).sum()
}

/// Columns one character takes, as [`text_width`] counts it.
pub fn char_width(c: char) -> usize {
    unicode_width::UnicodeWidthChar::width(c).unwrap_or(0)
}

/// A row being filled.
struct Row {
    spans: Vec<Span<'static>>,
    width: usize,
    /// Whether any content (beyond the prefix) is on this row yet.
    has_content: bool,
}

impl Row {
    fn new(prefix: &[Span<'static>]) -> Self {
        Self {
            spans: prefix.to_vec(),
            width: spans_width(prefix),
            has_content: false,
        }
    }

    fn push(&mut self, text: &str, style: Style, width: usize) {
        if text.is_empty() {
            return;
        }
        self.width += width;
        self.has_content = true;
        if let Some(last) = self.spans.last_mut()
            && last.style == style
        {
            last.content.to_mut().push_str(text);
            return;
        }
        self.spans.push(Span::styled(text.to_string(), style));
    }
}

/// Wraps logical lines to `width` columns.
pub fn wrap(lines: &[LLine], width: usize, out: &mut Vec<Line<'static>>) {
    for line in lines {
        wrap_one(line, width.max(1), out);
    }
}

fn wrap_one(line: &LLine, width: usize, out: &mut Vec<Line<'static>>) {
    let mut row = Row::new(&line.first);
    if line.mode == WrapMode::Rule {
        let fill: String = line
            .spans
            .first()
            .map(|s| s.content.to_string())
            .unwrap_or_default();
        let style = line.spans.first().map(|s| s.style).unwrap_or_default();
        let n = width.saturating_sub(row.width);
        let c = fill.chars().next().unwrap_or('─');
        row.push(&c.to_string().repeat(n), style, n);
        out.push(Line::from(row.spans));
        return;
    }
    // Whitespace seen but not yet placed: it is only written when a word
    // follows on the same row.
    let mut pending: Vec<(Style, String, usize)> = Vec::new();
    for span in &line.spans {
        let style = span.style;
        let text: &str = &span.content;
        if line.mode == WrapMode::Chars {
            push_chars(text, style, width, &line.rest, &mut row, out);
            continue;
        }
        for token in tokens(text) {
            let w = text_width(token);
            if token.starts_with(char::is_whitespace) {
                pending.push((style, token.to_string(), w));
                continue;
            }
            // Whitespace at the start of a row is dropped.
            let pending_w: usize = if row.has_content {
                pending.iter().map(|p| p.2).sum()
            } else {
                0
            };
            if row.width + pending_w + w <= width {
                for (s, t, pw) in pending.drain(..) {
                    if row.has_content {
                        row.push(&t, s, pw);
                    }
                }
                row.push(token, style, w);
                continue;
            }
            pending.clear();
            // Doesn't fit here: continue on a new row, breaking the word
            // anywhere if it is wider than a whole row.
            if row.has_content {
                out.push(Line::from(
                    std::mem::replace(&mut row, Row::new(&line.rest)).spans,
                ));
            }
            push_chars(token, style, width, &line.rest, &mut row, out);
        }
    }
    out.push(Line::from(row.spans));
}

/// Pushes text character by character, starting new rows as needed.
fn push_chars(
    text: &str,
    style: Style,
    width: usize,
    rest: &[Span<'static>],
    row: &mut Row,
    out: &mut Vec<Line<'static>>,
) {
    let mut chunk = String::new();
    let mut chunk_w = 0;
    for c in text.chars() {
        let w = char_width(c);
        if row.width + chunk_w + w > width && (row.has_content || chunk_w > 0) {
            row.push(&chunk, style, chunk_w);
            chunk.clear();
            chunk_w = 0;
            out.push(Line::from(std::mem::replace(row, Row::new(rest)).spans));
        }
        chunk.push(c);
        chunk_w += w;
    }
    row.push(&chunk, style, chunk_w);
}

/// Splits text into alternating runs of whitespace and non-whitespace.
fn tokens(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let first = rest.chars().next()?;
        let ws = first.is_whitespace();
        let end = rest
            .char_indices()
            .find(|(_, c)| c.is_whitespace() != ws)
            .map_or(rest.len(), |(i, _)| i);
        let (token, tail) = rest.split_at(end);
        rest = tail;
        Some(token)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    fn wrapped(line: LLine, width: usize) -> Vec<String> {
        let mut out = Vec::new();
        wrap(&[line], width, &mut out);
        text(&out)
    }

    #[test]
    fn words_wrap_at_spaces() {
        let l = LLine::plain(vec![Span::raw("the quick brown fox jumps")]);
        assert_eq!(wrapped(l, 10), ["the quick", "brown fox", "jumps"]);
    }

    #[test]
    fn hanging_indent() {
        let l = LLine::prefixed(
            vec![Span::raw("• ")],
            vec![Span::raw("  ")],
            vec![Span::raw("alpha beta gamma")],
        );
        assert_eq!(wrapped(l, 12), ["• alpha beta", "  gamma"]);
    }

    #[test]
    fn long_words_break_anywhere() {
        let l = LLine::plain(vec![Span::raw("ab abcdefghij")]);
        assert_eq!(wrapped(l, 4), ["ab", "abcd", "efgh", "ij"]);
    }

    #[test]
    fn code_keeps_spaces() {
        let mut l = LLine::plain(vec![Span::raw("  let x =  1;")]);
        l.mode = WrapMode::Chars;
        assert_eq!(wrapped(l, 8), ["  let x ", "=  1;"]);
    }

    #[test]
    fn styles_survive_and_merge() {
        let bold = Style::default().add_modifier(ratatui::style::Modifier::BOLD);
        let l = LLine::plain(vec![
            Span::raw("a "),
            Span::styled("b c", bold),
            Span::raw(" d"),
        ]);
        let mut out = Vec::new();
        wrap(&[l], 80, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].spans[1].content, "b c");
        assert_eq!(out[0].spans[1].style, bold);
        assert_eq!(text(&out), ["a b c d"]);
    }

    #[test]
    fn wide_characters_count_double() {
        let l = LLine::plain(vec![Span::raw("日本語の文章")]);
        assert_eq!(wrapped(l, 6), ["日本語", "の文章"]);
    }

    #[test]
    fn rule_fills_the_width() {
        let mut l = LLine::plain(vec![Span::raw("─")]);
        l.mode = WrapMode::Rule;
        assert_eq!(wrapped(l, 5), ["─────"]);
    }

    #[test]
    fn empty_line_stays() {
        assert_eq!(wrapped(LLine::default(), 5), [""]);
    }
}
