//! Agent output is untrusted: before any of it reaches the screen, terminal
//! control sequences and control characters are removed.
//!
//! Kept: printable text, `\n`. A tab becomes four spaces. Removed: ESC and
//! whole escape sequences (CSI `ESC [ ... final`, OSC `ESC ] ... BEL|ST`,
//! DCS/SOS/PM/APC `... ST`, two-byte `ESC x`), other C0 controls, DEL, and
//! the C1 controls U+0080..U+009F (8-bit CSI among them). `\r\n` becomes
//! `\n`; a lone `\r` (used to overwrite a line) becomes `\n`.
//!
//! Also removed: characters that change how text reads without being seen,
//! and that terminals disagree on the width of: the bidi embeddings,
//! overrides, isolates and marks (U+202A..U+202E, U+2066..U+2069, U+200E,
//! U+200F, U+061C), zero-width spaces and joiners (U+200B..U+200D, U+2060,
//! U+FEFF) and the soft hyphen (U+00AD). A ZWJ emoji shows as its parts.
//!
//! Last, what terminals measure differently from ratatui (which measures a
//! grapheme cluster with `unicode-width`, where tmux and most terminals add
//! up `wcwidth` of each code point) is made of characters both count alike
//! (see [`shown`]): emoji variation selectors and skin-tone modifiers are
//! dropped (`❤️` becomes `❤`, `👍🏽` becomes `👍`), a flag's regional
//! indicators become its letters (`🇯🇵` becomes `JP`), and so on. Boxes
//! then keep their right border in place.

use std::borrow::Cow;

fn needs_cleaning(s: &str) -> bool {
    if s.is_ascii() {
        return s.bytes().any(|b| (b < 0x20 && b != b'\n') || b == 0x7f);
    }
    s.chars()
        .any(|c| (c.is_control() && c != '\n') || invisible(c) || shown(c) != Shown::Same)
}

/// How [`sanitize`] writes a character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    Same,
    Dropped,
    As(char),
}

/// Characters whose width ratatui and terminals disagree on, and what is
/// written instead: something every one of them counts the same.
fn shown(c: char) -> Shown {
    match c {
        // Variation selectors: VS16 makes `❤` a 2-column emoji to
        // unicode-width and 1 column to wcwidth (tmux), VS15 the reverse.
        '\u{fe00}'..='\u{fe0f}' | '\u{e0100}'..='\u{e01ef}' => Shown::Dropped,
        // Skin tones: part of their emoji's 2 columns to unicode-width, 2
        // more to wcwidth.
        '\u{1f3fb}'..='\u{1f3ff}' => Shown::Dropped,
        // Tags (subdivision flags; they can also carry hidden ASCII), Hangul
        // fillers and interlinear annotation marks: unseen, yet 1 or 2
        // columns to some.
        '\u{e0000}'..='\u{e007f}' | '\u{3164}' | '\u{ffa0}' | '\u{fff9}'..='\u{fffb}' => {
            Shown::Dropped
        }
        // Regional indicators: a pair is one 2-column flag to some
        // terminals, two 1-column cells to tmux, two boxes to others.
        '\u{1f1e6}'..='\u{1f1ff}' => Shown::As(char::from(b'A' + (c as u32 - 0x1f1e6) as u8)),
        // Halfwidth (semi-)voiced sound marks: ratatui counts each twice
        // (3 columns for `ｶﾞ`, 2 to terminals); the spacing marks are 2
        // everywhere.
        '\u{ff9e}' => Shown::As('\u{309b}'),
        '\u{ff9f}' => Shown::As('\u{309c}'),
        // Wide since Unicode 16, narrow before: trigrams and digrams (`☰`),
        // Tai Xuan Jing symbols.
        '\u{2630}'..='\u{2637}'
        | '\u{268a}'..='\u{268f}'
        | '\u{1d300}'..='\u{1d356}'
        | '\u{1d360}'..='\u{1d376}' => Shown::As('\u{fffd}'),
        _ => Shown::Same,
    }
}

/// Unseen characters that reorder or join text (see the module comment).
fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
            | '\u{200b}'..='\u{200f}'
            | '\u{061c}'
            | '\u{2060}'
            | '\u{feff}'
            | '\u{ad}'
    )
}

/// A JSON value with every string in it, keys too, made safe as
/// [`sanitize`] makes text.
pub fn value(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::String(s) => Value::String(sanitize(s).into_owned()),
        Value::Array(items) => Value::Array(items.iter().map(value).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (sanitize(k).into_owned(), value(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Returns `s` without terminal control sequences; borrows when clean.
pub fn sanitize(s: &str) -> Cow<'_, str> {
    if !needs_cleaning(s) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if skip_sequence(c, &mut chars).is_some() {
            continue;
        }
        match c {
            '\n' => out.push('\n'),
            '\t' => out.push_str("    "),
            '\r' => {
                if chars.peek().map(|&(_, c)| c) != Some('\n') {
                    out.push('\n');
                }
            }
            c if c.is_control() || invisible(c) => {}
            c => match shown(c) {
                Shown::Same => out.push(c),
                Shown::Dropped => {}
                Shown::As(other) => out.push(other),
            },
        }
    }
    Cow::Owned(out)
}

/// `s` sanitised, its lines and runs of blanks joined by single spaces.
pub fn one_line(s: &str) -> String {
    sanitize(s).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `s` cut to `max` characters, with `…` after them when cut.
pub fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

/// Serialized JSON made safe to print: the control and unseen characters
/// that JSON leaves raw (DEL, C1, bidi, zero-width) written as `\uXXXX`
/// escapes, so the text reads the same to a parser and harmlessly to a
/// terminal. Only valid on JSON, where such characters sit inside strings.
pub fn json(serialized: &str) -> Cow<'_, str> {
    if !needs_cleaning(serialized) {
        return Cow::Borrowed(serialized);
    }
    let mut out = String::with_capacity(serialized.len() + 16);
    for c in serialized.chars() {
        if c.is_control() || invisible(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

type Chars<'a> = std::iter::Peekable<std::str::CharIndices<'a>>;

/// When `c` starts a sequence, consumes the rest of it and says whether it
/// was whole; `None` when `c` starts none.
fn skip_sequence(c: char, chars: &mut Chars<'_>) -> Option<bool> {
    match c {
        '\u{1b}' => Some(skip_escape(chars)),
        // 8-bit CSI: parameters and a final byte follow.
        '\u{9b}' => Some(skip_csi(chars)),
        // 8-bit OSC, DCS, SOS, PM, APC: a string up to ST or BEL follows.
        '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => Some(skip_string(chars)),
        _ => None,
    }
}

/// Each `skip_*` consumes one sequence and says whether it was whole
/// (`false`: the text ended inside it).
fn skip_escape(chars: &mut Chars<'_>) -> bool {
    match chars.next().map(|(_, c)| c) {
        None => false,
        Some('[') => skip_csi(chars),
        Some(']' | 'P' | 'X' | '^' | '_') => skip_string(chars),
        // Intermediate bytes, then one final byte (e.g. `ESC ( B`).
        Some(c) if ('\u{20}'..='\u{2f}').contains(&c) => {
            for (_, c) in chars.by_ref() {
                if !('\u{20}'..='\u{2f}').contains(&c) {
                    return true;
                }
            }
            false
        }
        Some(_) => true,
    }
}

/// CSI: parameter and intermediate bytes, then a final byte in `@..~`.
fn skip_csi(chars: &mut Chars<'_>) -> bool {
    for (_, c) in chars.by_ref() {
        if ('\u{40}'..='\u{7e}').contains(&c) || !('\u{20}'..='\u{7e}').contains(&c) {
            return true;
        }
    }
    false
}

/// A control string, ended by BEL, ST (`ESC \` or U+009C).
fn skip_string(chars: &mut Chars<'_>) -> bool {
    while let Some((_, c)) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => return true,
            '\u{1b}' => {
                return match chars.peek() {
                    Some((_, '\\')) => {
                        chars.next();
                        true
                    }
                    Some(_) => true,
                    None => false,
                };
            }
            _ => {}
        }
    }
    false
}

/// Where a sequence that `text` ends inside of starts, if it does.
fn cut_tail(text: &str) -> Option<usize> {
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if skip_sequence(c, &mut chars) == Some(false) {
            return Some(i);
        }
    }
    None
}

/// Whether `text` ends with a `\r` that no sequence takes in (one after
/// the `ESC` that ends a control string is still its own).
fn ends_with_own_cr(text: &str) -> bool {
    let mut chars = text.char_indices().peekable();
    let mut last_own = None;
    while let Some((i, c)) = chars.next() {
        if skip_sequence(c, &mut chars).is_none() {
            last_own = Some((i, c));
        }
    }
    last_own == Some((text.len().wrapping_sub(1), '\r'))
}

/// Streamed text (a message arriving in chunks) cleaned piece by piece: a
/// sequence cut between two chunks is held until its end arrives, so no
/// fragment of it (`[31m`) shows as text. At most [`Stream::MAX_HELD`]
/// bytes are held; a longer unfinished sequence is dropped.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Stream {
    held: String,
}

impl Stream {
    pub const MAX_HELD: usize = 64 * 1024;

    /// The clean text of `chunk`, less any unfinished sequence at its end.
    pub fn push<'a>(&mut self, chunk: &'a str) -> Cow<'a, str> {
        if self.held.is_empty() && !needs_cleaning(chunk) {
            return Cow::Borrowed(chunk);
        }
        let mut text = std::mem::take(&mut self.held);
        text.push_str(chunk);
        let cut = match cut_tail(&text) {
            Some(cut) => cut,
            // A final `\r` of its own (not inside a sequence) may be half
            // of a `\r\n`.
            None if ends_with_own_cr(&text) => text.len() - 1,
            None => text.len(),
        };
        if text.len() - cut <= Self::MAX_HELD {
            self.held = text[cut..].to_string();
        }
        Cow::Owned(sanitize(&text[..cut]).into_owned())
    }

    /// The end of the stream: what was held, cleaned.
    pub fn finish(&mut self) -> String {
        sanitize(&std::mem::take(&mut self.held)).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn clean_text_is_borrowed() {
        assert!(matches!(sanitize("héllo\nwörld ✓"), Cow::Borrowed(_)));
        assert!(matches!(sanitize("é café ¢"), Cow::Borrowed(_)));
    }

    #[test]
    fn strips_sequences() {
        let cases = [
            ("\u{1b}[31mred\u{1b}[0m", "red"),
            ("\u{1b}[2J\u{1b}[Hclear", "clear"),
            ("\u{1b}]0;evil title\u{7}x", "x"),
            ("\u{1b}]8;;http://e\u{1b}\\link\u{1b}]8;;\u{1b}\\", "link"),
            ("\u{1b}P1$r\u{1b}\\dcs", "dcs"),
            ("\u{1b}(Bcharset", "charset"),
            ("\u{1b}7save\u{1b}8", "save"),
            ("\u{9b}31mc1", "c1"),
            ("\u{9d}0;t\u{9c}osc8", "osc8"),
            ("bell\u{7}", "bell"),
            ("back\u{8}space", "backspace"),
            ("del\u{7f}", "del"),
            ("a\tb", "a    b"),
            ("a\r\nb", "a\nb"),
            ("progress 10%\rprogress 20%", "progress 10%\nprogress 20%"),
            ("\u{1b}", ""),
            ("\u{1b}[", ""),
            // Trojan Source: an override that makes code read backwards.
            ("if admin \u{202e}{ }\u{2066}x\u{2069}", "if admin { }x"),
            ("a\u{200b}b\u{feff}c\u{ad}d\u{200f}e", "abcde"),
            ("👩\u{200d}💻", "👩💻"),
        ];
        for (input, want) in cases {
            assert_eq!(sanitize(input), want, "{input:?}");
        }
    }

    #[test]
    fn what_terminals_measure_differently_is_written_so_all_agree() {
        let cases = [
            // VS16 asks for emoji presentation; VS15 for text.
            ("love ❤\u{fe0f} sun ☀\u{fe0f}", "love ❤ sun ☀"),
            ("watch ⌚\u{fe0e}", "watch ⌚"),
            ("keycap 1\u{fe0f}\u{20e3}", "keycap 1\u{20e3}"),
            ("👍🏽 👋🏿", "👍 👋"),
            ("🇯🇵 🇺🇸🇩🇪 🇦🇿", "JP USDE AZ"),
            // A subdivision flag: its tags go, the black flag stays.
            (
                "🏴\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f}",
                "🏴",
            ),
            ("🏳\u{fe0f}\u{200d}🌈", "🏳🌈"),
            ("a\u{3164}b\u{ffa0}c\u{fff9}d", "abcd"),
            ("ｶﾞｷﾟ", "ｶ\u{309b}ｷ\u{309c}"),
            ("menu ☰ ⚊", "menu \u{fffd} \u{fffd}"),
            // What both count alike is kept.
            (
                "漢字 ＡＢ 한국어 각 👩💻 ☺ ♥ ⚠ é e\u{301} لا",
                "漢字 ＡＢ 한국어 각 👩💻 ☺ ♥ ⚠ é e\u{301} لا",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(sanitize(input), want, "{input:?}");
        }
        assert!(matches!(sanitize("漢字 ＡＢ 👩 ☺"), Cow::Borrowed(_)));
    }

    /// Each cell ratatui fills when it draws `text`: its grapheme, the
    /// width ratatui gives it, and the width a terminal counts for it (the
    /// sum of its code points' widths, as wcwidth and tmux count).
    fn cells(text: &str) -> Vec<(String, usize, usize)> {
        use ratatui::buffer::{Buffer, CellWidth};
        use ratatui::layout::Rect;
        let mut buf = Buffer::empty(Rect::new(0, 0, 400, 1));
        buf.set_string(0, 0, text, ratatui::style::Style::default());
        let mut out = Vec::new();
        let mut x = 0;
        while x < buf.area.width {
            let symbol = buf[(x, 0)].symbol();
            let drawn = symbol.cell_width() as usize;
            let counted = symbol
                .chars()
                .map(|c| unicode_width::UnicodeWidthChar::width(c).unwrap_or(0))
                .sum();
            out.push((symbol.to_string(), drawn, counted));
            x += drawn.max(1) as u16;
        }
        out
    }

    #[test]
    fn sanitised_emoji_are_cells_that_terminals_count_alike() {
        for raw in ["❤\u{fe0f}", "👍🏽", "1\u{fe0f}\u{20e3}", "ｶﾞ", "⌚\u{fe0e}"] {
            // As sent, ratatui and a terminal disagree on the first cell...
            let (_, drawn, counted) = cells(raw).remove(0);
            assert_ne!(drawn, counted, "{raw:?}");
            // ...and no longer once sanitised.
            for (cell, drawn, counted) in cells(&sanitize(raw)) {
                assert_eq!(drawn, counted, "{raw:?}: {cell:?}");
            }
        }
    }

    proptest! {
        /// After sanitising, each cell ratatui draws is as wide as the sum
        /// of its code points, which is what tmux counts.
        #[test]
        fn every_cell_is_as_wide_as_its_code_points(
            s in "(a|漢|Ａ|❤|☀|👩|💻|👍|🏳|🌈|1|e|\u{301}|\u{fe0f}|\u{fe0e}|\u{200d}|\u{20e3}|\u{1f3fd}|\u{1f1ef}|\u{1f1f5}|ｶ|\u{ff9e}|\u{e0067}| )*",
        ) {
            let clean = sanitize(&s);
            for (cell, drawn, counted) in cells(&clean) {
                prop_assert_eq!(drawn, counted, "{:?} in {:?}", cell, clean);
            }
        }
    }

    #[test]
    fn json_escapes_what_json_leaves_raw() {
        let v = serde_json::json!({ "t": "a\u{202e}b\u{9b}31m\u{7f}\u{1b}c\u{feff}👩\u{200d}💻" });
        let text = serde_json::to_string(&v).unwrap();
        let safe = json(&text);
        assert_eq!(
            safe,
            r#"{"t":"a\u202eb\u009b31m\u007f\u001bc\ufeff👩\u200d💻"}"#
        );
        // Lossless: it parses back to the same value.
        assert_eq!(serde_json::from_str::<serde_json::Value>(&safe).unwrap(), v);
        assert!(matches!(json(r#"{"t":"héllo ✓"}"#), Cow::Borrowed(_)));
    }

    #[test]
    fn a_stream_holds_a_sequence_cut_between_chunks() {
        let cases: &[&[&str]] = &[
            &["ab\u{1b}", "[31mred\u{1b}[0m", "!"],
            &["ab\u{1b}[", "31mred"],
            &["\u{1b}]0;ti", "tle\u{7}text"],
            &["\u{1b}]8;;http://e\u{1b}", "\\link"],
            &["\u{9b}3", "1mred"],
            &["line\r", "\nnext"],
        ];
        for chunks in cases {
            let mut stream = Stream::default();
            let streamed: String = chunks.iter().map(|c| stream.push(c)).collect();
            let whole = sanitize(&chunks.concat()).into_owned();
            assert_eq!(streamed, whole, "{chunks:?}");
            assert!(!streamed.contains('['), "{chunks:?}: {streamed:?}");
        }
        // Held text is bounded: an endless sequence is dropped, not kept.
        let mut stream = Stream::default();
        stream.push("\u{1b}]0;");
        for _ in 0..100 {
            stream.push(&"x".repeat(1024));
        }
        assert!(stream.held.len() <= Stream::MAX_HELD);
    }

    proptest! {
        /// However a text is cut into chunks, streaming it shows what
        /// cleaning it whole shows.
        #[test]
        fn streaming_in_any_pieces_equals_cleaning_whole(
            s in "(\\x1b|\\[|3|1|m|]|;|\\x07|\\\\|\\r|\\n|a|b|\\u{9b})*",
            cuts in proptest::collection::vec(0usize..64, 0..6),
        ) {
            let chars: Vec<char> = s.chars().collect();
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c.min(chars.len())).collect();
            points.sort_unstable();
            let mut stream = Stream::default();
            let mut out = String::new();
            let mut start = 0;
            for p in points.into_iter().chain(std::iter::once(chars.len())) {
                let piece: String = chars[start..p].iter().collect();
                out.push_str(&stream.push(&piece));
                start = p;
            }
            out.push_str(&stream.finish());
            prop_assert_eq!(out, sanitize(&s));
        }

        #[test]
        fn output_has_no_control_characters(s in any::<String>()) {
            let clean = sanitize(&s);
            prop_assert!(
                !clean.chars().any(|c| (c.is_control() && c != '\n') || invisible(c)),
                "{:?}",
                clean
            );
        }
    }
}
