//! What agents send besides text, made text: images, audio and resources
//! in message chunks and tool call content become one-line placeholders
//! (`[image · image/png · 640×480]`, `[audio · audio/wav]`,
//! `[resource · file:///…/src/main.rs · 2.1 KB]`) instead of vanishing; a
//! resource's text is shown as text. Pure functions; what they return is
//! the agent's word and is sanitised (URIs, MIME types) or goes the way of
//! any agent text (a resource's text is cleaned where text is shown).

use agent_client_protocol::v1::schema::{ContentBlock, EmbeddedResourceResource};

use crate::confine::limits::approx_size;
use crate::confine::sanitize::{clip, one_line};

/// How many characters of a URI a placeholder shows.
const URI_CHARS: usize = 60;

/// The text a content block shows as, taken out of it (`None`: a block
/// of a kind this client does not know).
pub(super) fn into_text(block: ContentBlock) -> Option<String> {
    match block {
        ContentBlock::Text(t) => Some(t.text),
        ContentBlock::Resource(r)
            if matches!(
                r.resource,
                EmbeddedResourceResource::TextResourceContents(_)
            ) =>
        {
            match r.resource {
                EmbeddedResourceResource::TextResourceContents(t) => Some(t.text),
                _ => None,
            }
        }
        other => placeholder(&other),
    }
}

/// [`into_text`] of a borrowed block.
pub(super) fn text(block: &ContentBlock) -> Option<String> {
    match block {
        ContentBlock::Text(t) => Some(t.text.clone()),
        ContentBlock::Resource(r) => match &r.resource {
            EmbeddedResourceResource::TextResourceContents(t) => Some(t.text.clone()),
            _ => resource_placeholder(block),
        },
        other => placeholder(other),
    }
}

/// The one-line placeholder of an image, audio or resource block.
fn placeholder(block: &ContentBlock) -> Option<String> {
    match block {
        ContentBlock::Image(image) => {
            let mut parts = vec!["image".to_string(), mime(&image.mime_type)];
            if let Some((w, h)) = dimensions(&image.data) {
                parts.push(format!("{w}×{h}"));
            }
            if image.data.is_empty()
                && let Some(uri) = &image.uri
            {
                parts.push(short_uri(uri));
            }
            Some(format!("[{}]", parts.join(" · ")))
        }
        ContentBlock::Audio(audio) => Some(format!("[audio · {}]", mime(&audio.mime_type))),
        ContentBlock::ResourceLink(link) => {
            let mut parts = vec!["resource".to_string(), short_uri(&link.uri)];
            if let Some(size) = link.size.and_then(|s| u64::try_from(s).ok()) {
                parts.push(approx_size(size));
            }
            Some(format!("[{}]", parts.join(" · ")))
        }
        ContentBlock::Resource(_) => resource_placeholder(block),
        _ => None,
    }
}

/// An embedded resource that is no text: its URI and size.
fn resource_placeholder(block: &ContentBlock) -> Option<String> {
    let ContentBlock::Resource(r) = block else {
        return None;
    };
    match &r.resource {
        EmbeddedResourceResource::BlobResourceContents(b) => Some(format!(
            "[resource · {} · {}]",
            short_uri(&b.uri),
            approx_size(decoded_len(&b.blob))
        )),
        _ => Some("[resource]".to_string()),
    }
}

/// A MIME type, sanitised and kept short.
fn mime(m: &str) -> String {
    let m = one_line(m);
    match m.as_str() {
        "" => "unknown type".to_string(),
        _ => clip(&m, 40),
    }
}

/// A URI sanitised, and when long its scheme and host kept with the end
/// of its path: `file:///…/src/main.rs`.
pub(super) fn short_uri(uri: &str) -> String {
    let uri = one_line(uri);
    let total = uri.chars().count();
    if total <= URI_CHARS {
        return uri;
    }
    // `scheme://host` (the host part capped), else the first few characters.
    let head_end = match uri.find("://") {
        Some(i) => {
            let after = i + 3;
            let host = uri[after..].find('/').map_or(uri.len(), |j| after + j);
            if uri[..host].chars().count() <= URI_CHARS / 2 {
                host
            } else {
                after
            }
        }
        None => uri.char_indices().nth(12).map_or(uri.len(), |(i, _)| i),
    };
    let head = &uri[..head_end];
    let room = URI_CHARS.saturating_sub(head.chars().count() + 2);
    let tail_start = uri
        .char_indices()
        .nth(total - room)
        .map_or(uri.len(), |(i, _)| i);
    let tail = &uri[tail_start.max(head_end)..];
    // Begin the tail at a path component when one starts in it.
    let tail = match tail.find('/') {
        Some(j) if j + 1 < tail.len() => &tail[j..],
        _ => tail,
    };
    let sep = if tail.starts_with('/') {
        "/…"
    } else {
        "/…/"
    };
    format!("{head}{sep}{tail}")
}

/// How many bytes base64 `data` decodes to.
fn decoded_len(data: &str) -> u64 {
    let data = data.trim_end();
    let pad = data.bytes().rev().take_while(|&b| b == b'=').count();
    ((data.len() as u64) * 3 / 4).saturating_sub(pad as u64)
}

/// The value of one base64 character.
fn sextet(c: u8) -> Option<u32> {
    Some(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' | b'-' => 62,
        b'/' | b'_' => 63,
        _ => return None,
    } as u32)
}

/// Base64 read where it is needed: the byte at an offset decodes its
/// four characters alone, so a header deep in a large image costs no
/// more than one at its start. (Data with line breaks or other noise is
/// not read: its dimensions stay unknown.)
struct Lazy<'a>(&'a [u8]);

impl Lazy<'_> {
    fn byte(&self, n: usize) -> Option<u8> {
        let quad = self.0.get(n / 3 * 4..n / 3 * 4 + 4)?;
        let mut v = 0u32;
        for &c in quad {
            v = (v << 6) | if c == b'=' { 0 } else { sextet(c)? };
        }
        Some((v >> (16 - 8 * (n % 3) as u32)) as u8)
    }
    fn be16(&self, n: usize) -> Option<u32> {
        Some(u32::from(self.byte(n)?) << 8 | u32::from(self.byte(n + 1)?))
    }
    fn le16(&self, n: usize) -> Option<u32> {
        Some(u32::from(self.byte(n)?) | u32::from(self.byte(n + 1)?) << 8)
    }
    fn be32(&self, n: usize) -> Option<u32> {
        Some(self.be16(n)? << 16 | self.be16(n + 2)?)
    }
}

/// Width and height from a PNG, GIF or JPEG header in base64 `data`, when
/// it is one of those and the header says.
pub(super) fn dimensions(data: &str) -> Option<(u32, u32)> {
    let d = Lazy(data.as_bytes());
    let head: Vec<u8> = (0..8).map_while(|i| d.byte(i)).collect();
    let found = if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some((d.be32(16)?, d.be32(20)?))
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some((d.le16(6)?, d.le16(8)?))
    } else if head.starts_with(&[0xff, 0xd8]) {
        jpeg(&d)
    } else {
        None
    };
    found.filter(|&(w, h)| w > 0 && h > 0)
}

/// A JPEG's size from its first start-of-frame segment, hopping from
/// segment to segment (at most 64 of them).
fn jpeg(d: &Lazy<'_>) -> Option<(u32, u32)> {
    let mut at = 2;
    for _ in 0..64 {
        if d.byte(at)? != 0xff {
            return None;
        }
        let marker = d.byte(at + 1)?;
        match marker {
            // Fill bytes, and markers without a length.
            0xff => at += 1,
            0x01 | 0xd0..=0xd7 => at += 2,
            // Start of frame (not DHT, JPG, DAC).
            0xc0..=0xcf if !matches!(marker, 0xc4 | 0xc8 | 0xcc) => {
                return Some((d.be16(at + 7)?, d.be16(at + 5)?));
            }
            // Start of scan, end of image: no frame header before them.
            0xda | 0xd9 => return None,
            _ => at += 2 + d.be16(at + 2)? as usize,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Standard base64 of `bytes`, for headers made up here.
    fn b64(bytes: &[u8]) -> String {
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let mut v = 0u32;
            for (i, &b) in chunk.iter().enumerate() {
                v |= u32::from(b) << (16 - 8 * i);
            }
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(A[(v >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    pub(crate) fn png(w: u32, h: u32) -> Vec<u8> {
        let mut v = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        v.extend(w.to_be_bytes());
        v.extend(h.to_be_bytes());
        v.extend([8, 6, 0, 0, 0]);
        v
    }

    fn block(value: serde_json::Value) -> ContentBlock {
        serde_json::from_value(value).expect("a content block")
    }

    #[test]
    fn png_gif_and_jpeg_headers_give_their_dimensions() {
        assert_eq!(dimensions(&b64(&png(640, 480))), Some((640, 480)));
        let gif = [b"GIF89a".as_slice(), &[0x80, 0x02, 0xe0, 0x01, 0, 0, 0]].concat();
        assert_eq!(dimensions(&b64(&gif)), Some((640, 480)));
        // A JPEG with an APP0 segment before its frame header.
        let mut jpeg = vec![0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10];
        jpeg.extend(b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0");
        jpeg.extend([0xff, 0xc0, 0x00, 0x11, 0x08, 0x01, 0xe0, 0x02, 0x80, 0x03]);
        jpeg.extend([0; 12]);
        assert_eq!(dimensions(&b64(&jpeg)), Some((640, 480)));
        // Not an image we read, too short, or not base64: unknown.
        assert_eq!(dimensions(&b64(b"hello world, not an image")), None);
        assert_eq!(dimensions(&b64(&png(640, 480)[..18])), None);
        assert_eq!(dimensions("%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%%"), None);
        assert_eq!(dimensions(""), None);
    }

    #[test]
    fn images_and_audio_are_placeholders() {
        let data = b64(&png(640, 480));
        assert_eq!(
            text(&block(
                json!({"type": "image", "data": data, "mimeType": "image/png"})
            ))
            .as_deref(),
            Some("[image · image/png · 640×480]")
        );
        // Unknown dimensions are left out; the MIME type is sanitised.
        assert_eq!(
            text(&block(
                json!({"type": "image", "data": "AAAA", "mimeType": "image/\u{1b}[31mwebp"})
            ))
            .as_deref(),
            Some("[image · image/webp]")
        );
        assert_eq!(
            text(&block(
                json!({"type": "audio", "data": "AAAA", "mimeType": "audio/wav"})
            ))
            .as_deref(),
            Some("[audio · audio/wav]")
        );
    }

    #[test]
    fn resources_show_their_uri_and_size_and_their_text_as_text() {
        assert_eq!(
            into_text(block(json!({"type": "resource_link", "name": "main.rs",
                "uri": "file:///w/src/main.rs", "size": 2150})))
            .as_deref(),
            Some("[resource · file:///w/src/main.rs · 2.1 KB]")
        );
        assert_eq!(
            into_text(block(
                json!({"type": "resource_link", "name": "x", "uri": "https://example.com/x"})
            ))
            .as_deref(),
            Some("[resource · https://example.com/x]")
        );
        assert_eq!(
            into_text(block(json!({"type": "resource", "resource":
                {"uri": "file:///w/notes.md", "text": "# Notes\nhello"}})))
            .as_deref(),
            Some("# Notes\nhello")
        );
        let blob = b64(&[7u8; 3000]);
        assert_eq!(
            into_text(block(json!({"type": "resource", "resource":
                {"uri": "file:///w/data.bin", "blob": blob, "mimeType": "application/octet-stream"}})))
            .as_deref(),
            Some("[resource · file:///w/data.bin · 2.9 KB]")
        );
    }

    #[test]
    fn long_uris_keep_their_scheme_and_the_end_of_their_path() {
        let uri =
            "file:///home/someone/projects/quorum/src/acp/very/deeply/nested/module/content.rs";
        let short = short_uri(uri);
        assert!(short.starts_with("file:///…/"), "{short}");
        assert!(short.ends_with("/module/content.rs"), "{short}");
        assert!(short.chars().count() <= URI_CHARS + 2, "{short}");
        let short = short_uri(&format!("https://example.com/{}/end.txt", "a".repeat(200)));
        assert!(short.starts_with("https://example.com/…"), "{short}");
        assert!(short.ends_with("end.txt"), "{short}");
        // Control sequences and line breaks are gone.
        assert_eq!(short_uri("file:///a\u{1b}]0;x\u{7}/b\nc"), "file:///a/b c");
    }
}
