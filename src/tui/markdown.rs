//! Markdown (pulldown-cmark) to unwrapped styled lines.

use std::borrow::Cow;

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Modifier, Style};
use ratatui::text::Span;

use super::theme;
use super::wrap::{LLine, WrapMode, text_width};

/// Renders Markdown to logical lines, to be wrapped at draw time.
pub fn render(text: &str) -> Vec<LLine> {
    let mut r = Renderer::default();
    let options =
        Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS;
    for event in Parser::new_ext(text, options) {
        r.event(event);
    }
    r.flush();
    // Text was cleaned before it came here, but an entity (`&#27;`,
    // `&#x202E;`) decodes to the very characters cleaning removed.
    for line in &mut r.lines {
        for span in line
            .first
            .iter_mut()
            .chain(&mut line.rest)
            .chain(&mut line.spans)
        {
            if let Cow::Owned(clean) = crate::confine::sanitize::sanitize(&span.content) {
                span.content = clean.into();
            }
        }
    }
    r.lines
}

enum Container {
    Quote,
    Item { bullet: String, used: bool },
}

#[derive(Default)]
struct Renderer {
    lines: Vec<LLine>,
    spans: Vec<Span<'static>>,
    styles: Vec<Style>,
    containers: Vec<Container>,
    /// Ordered lists' next number, or `None` for bullets.
    lists: Vec<Option<u64>>,
    links: Vec<String>,
    code: Option<Style>,
    blank_before_next: bool,
}

impl Renderer {
    fn style(&self) -> Style {
        self.styles.last().copied().unwrap_or_default()
    }

    fn push_style(&mut self, f: impl FnOnce(Style) -> Style) {
        let s = f(self.style());
        self.styles.push(s);
    }

    /// Prefixes for a new line: first row and continuation rows.
    fn prefixes(&mut self) -> (Vec<Span<'static>>, Vec<Span<'static>>) {
        let mut first = Vec::new();
        let mut rest = Vec::new();
        for c in &mut self.containers {
            match c {
                Container::Quote => {
                    first.push(Span::styled("▌ ", theme::quote()));
                    rest.push(Span::styled("▌ ", theme::quote()));
                }
                Container::Item { bullet, used } => {
                    let pad = " ".repeat(text_width(bullet));
                    if *used {
                        first.push(Span::raw(pad.clone()));
                    } else {
                        first.push(Span::styled(bullet.clone(), theme::dim()));
                        *used = true;
                    }
                    rest.push(Span::raw(pad));
                }
            }
        }
        (first, rest)
    }

    /// Ends the current line, if it has anything.
    fn flush(&mut self) {
        if self.spans.is_empty() {
            return;
        }
        let spans = std::mem::take(&mut self.spans);
        let (first, rest) = self.prefixes();
        self.lines.push(LLine::prefixed(first, rest, spans));
    }

    /// Starts a block: a blank line separates it from the one before.
    fn start_block(&mut self) {
        self.flush();
        if self.blank_before_next && !self.lines.is_empty() {
            let quotes: Vec<Span<'static>> = self
                .containers
                .iter()
                .filter(|c| matches!(c, Container::Quote))
                .map(|_| Span::styled("▌", theme::quote()))
                .collect();
            self.lines.push(LLine::plain(quotes));
        }
        self.blank_before_next = false;
    }

    fn end_block(&mut self) {
        self.flush();
        self.blank_before_next = true;
    }

    fn text(&mut self, text: &str) {
        if let Some(style) = self.code {
            for (i, line) in text.split('\n').enumerate() {
                if i > 0 || !self.spans.is_empty() {
                    self.flush_code(style);
                }
                if !line.is_empty() {
                    self.spans.push(Span::styled(line.to_string(), style));
                }
            }
            return;
        }
        self.spans
            .push(Span::styled(text.to_string(), self.style()));
    }

    fn flush_code(&mut self, _style: Style) {
        let spans = std::mem::take(&mut self.spans);
        let (mut first, mut rest) = self.prefixes();
        first.push(Span::styled("  ", theme::dim()));
        rest.push(Span::styled("  ", theme::dim()));
        let mut line = LLine::prefixed(first, rest, spans);
        line.mode = WrapMode::Chars;
        self.lines.push(line);
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => self.text(&t),
            Event::Code(t) => self.spans.push(Span::styled(t.to_string(), theme::code())),
            Event::InlineMath(t) | Event::DisplayMath(t) => {
                self.spans.push(Span::styled(t.to_string(), theme::code()))
            }
            // A comment is hidden, as Markdown hides it (a review's
            // `<!-- finding: ... -->`, drawn from its event instead).
            Event::Html(t) | Event::InlineHtml(t) if is_comment(&t) => {}
            Event::Html(t) | Event::InlineHtml(t) => {
                let t = t.trim_end_matches('\n');
                self.spans.push(Span::styled(t.to_string(), theme::dim()));
            }
            // Text as written: a single newline is a line break, as GitHub
            // comments show it (a file list stays a list).
            Event::SoftBreak => self.flush(),
            Event::HardBreak => self.flush(),
            Event::Rule => {
                self.start_block();
                let (first, rest) = self.prefixes();
                let mut line = LLine::prefixed(first, rest, vec![Span::styled("─", theme::dim())]);
                line.mode = WrapMode::Rule;
                self.lines.push(line);
                self.blank_before_next = true;
            }
            Event::TaskListMarker(done) => {
                let mark = if done { "[x] " } else { "[ ] " };
                self.spans.push(Span::styled(mark, theme::dim()));
            }
            Event::FootnoteReference(name) => self
                .spans
                .push(Span::styled(format!("[{name}]"), theme::dim())),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => self.start_block(),
            Tag::Heading { level, .. } => {
                self.start_block();
                let n = match level {
                    HeadingLevel::H1 => 1,
                    HeadingLevel::H2 => 2,
                    HeadingLevel::H3 => 3,
                    HeadingLevel::H4 => 4,
                    HeadingLevel::H5 => 5,
                    HeadingLevel::H6 => 6,
                };
                let style = theme::heading(n);
                self.styles.push(style);
                self.spans
                    .push(Span::styled(format!("{} ", "#".repeat(n as usize)), style));
            }
            Tag::BlockQuote(_) => {
                self.start_block();
                self.containers.push(Container::Quote);
                self.push_style(|s| s.patch(theme::quote()));
            }
            Tag::CodeBlock(kind) => {
                self.start_block();
                if let CodeBlockKind::Fenced(lang) = kind
                    && !lang.is_empty()
                {
                    let (first, rest) = self.prefixes();
                    self.lines.push(LLine::prefixed(
                        first,
                        rest,
                        vec![Span::styled(lang.to_string(), theme::dim())],
                    ));
                }
                self.code = Some(theme::code());
            }
            Tag::List(start) => {
                if self.lists.is_empty() {
                    self.start_block();
                } else {
                    self.flush();
                }
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush();
                let bullet = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let b = format!("{n}. ");
                        *n += 1;
                        b
                    }
                    _ => ["• ", "◦ ", "▪ "][(self.lists.len().saturating_sub(1)) % 3].to_string(),
                };
                self.containers.push(Container::Item {
                    bullet,
                    used: false,
                });
                self.blank_before_next = false;
            }
            Tag::Emphasis => self.push_style(|s| s.add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(|s| s.add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self.push_style(|s| s.add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.links.push(dest_url.to_string());
                self.push_style(|s| s.patch(theme::link()));
            }
            Tag::Table(_) => self.start_block(),
            Tag::TableHead => {
                self.push_style(|s| s.add_modifier(Modifier::BOLD));
            }
            Tag::TableRow => {}
            Tag::TableCell if !self.spans.is_empty() => {
                self.spans.push(Span::styled(" │ ", theme::dim()));
            }
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.end_block(),
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.end_block();
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.containers.pop();
                self.styles.pop();
                self.blank_before_next = true;
            }
            TagEnd::CodeBlock => {
                if let Some(style) = self.code.take()
                    && !self.spans.is_empty()
                {
                    self.flush_code(style);
                }
                self.blank_before_next = true;
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                self.blank_before_next = true;
            }
            TagEnd::Item => {
                self.flush();
                self.containers.pop();
                self.blank_before_next = false;
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => {
                self.styles.pop();
            }
            TagEnd::Link | TagEnd::Image => {
                self.styles.pop();
                if let Some(url) = self.links.pop() {
                    let shown: String = self.spans.iter().map(|s| s.content.as_ref()).collect();
                    if !url.is_empty() && !shown.ends_with(&url) {
                        self.spans
                            .push(Span::styled(format!(" ({url})"), theme::dim()));
                    }
                }
            }
            TagEnd::TableHead => {
                self.styles.pop();
                self.flush();
            }
            TagEnd::TableRow => self.flush(),
            TagEnd::Table => self.end_block(),
            _ => {}
        }
    }
}

/// HTML that is one comment, `<!-- ... -->`, and nothing else.
fn is_comment(html: &str) -> bool {
    let t = html.trim();
    t.len() >= 7
        && t.starts_with("<!--")
        && t.ends_with("-->")
        && t[4..].find("-->") == Some(t.len() - 7)
}

#[cfg(test)]
mod tests {
    /// A comment alone is hidden (a review's findings); other HTML, and a
    /// comment with more after it, is shown.
    #[test]
    fn a_comment_alone_is_hidden() {
        assert!(is_comment("<!-- finding: {\"file\": \"a.rs\"} -->\n"));
        assert!(!is_comment("<!-- a --> and <b>more</b>"));
        assert!(!is_comment("<b>bold</b>"));
        assert!(!is_comment("<!-->"));
    }

    use super::*;
    use crate::tui::wrap::wrap;

    fn show(md: &str, width: usize) -> Vec<String> {
        let mut out = Vec::new();
        wrap(&render(md), width, &mut out);
        out.iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn paragraphs_and_headings() {
        assert_eq!(
            show("# Title\n\nSome *text* here.\n\n## Next", 40),
            ["# Title", "", "Some text here.", "", "## Next"]
        );
    }

    /// A model's file list, one name a line, stays one name a line.
    #[test]
    fn single_newlines_are_line_breaks() {
        assert_eq!(show("a.py\nb.py\nc.py", 40), ["a.py", "b.py", "c.py"]);
        assert_eq!(
            show("- one\n  still one\n- two", 40),
            ["• one", "  still one", "• two"]
        );
    }

    #[test]
    fn lists_with_hanging_indent() {
        assert_eq!(
            show("- one two three four\n- five\n  1. six\n  2. seven", 14),
            [
                "• one two",
                "  three four",
                "• five",
                "  1. six",
                "  2. seven"
            ]
        );
    }

    #[test]
    fn code_block_keeps_indentation() {
        assert_eq!(
            show("```rust\nfn main() {\n    x();\n}\n```\nafter", 40),
            ["rust", "  fn main() {", "      x();", "  }", "", "after"]
        );
    }

    #[test]
    fn quotes_and_links() {
        assert_eq!(
            show(
                "> quoted words here\n\n[docs](https://x.dev) and <https://y.dev>",
                60
            ),
            [
                "▌ quoted words here",
                "",
                "docs (https://x.dev) and https://y.dev"
            ]
        );
    }

    #[test]
    fn emphasis_is_styled() {
        let lines = render("a **b** *c* `d`");
        let spans = &lines[0].spans;
        assert!(spans[1].style.add_modifier.contains(Modifier::BOLD));
        assert!(spans[3].style.add_modifier.contains(Modifier::ITALIC));
        assert_eq!(spans[5].style, theme::code());
    }

    #[test]
    fn resizing_rewraps() {
        let md = "alpha beta gamma delta";
        assert_eq!(show(md, 11), ["alpha beta", "gamma delta"]);
        assert_eq!(show(md, 40), ["alpha beta gamma delta"]);
    }
}
