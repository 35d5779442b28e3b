//! Text made safe for a page: every string from a run (the agent's, a grader's, a file's) goes
//! through [`text`] or [`attr`] before it is written, so none of it can become markup; links
//! are made from paths by [`href`] only. Characters that would hide or reorder what a reader
//! sees (control characters, bidirectional overrides) are shown as `\u{..}` escapes.

use std::fmt::Write;

/// A string of the page's markup (already escaped, or written by this module's callers).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Html(String);

impl Html {
    pub fn new() -> Html {
        Html(String::new())
    }

    /// Markup written by envcraft itself (never anything read from a run).
    pub fn raw(&mut self, markup: &str) -> &mut Html {
        self.0.push_str(markup);
        self
    }

    /// Text, escaped.
    pub fn text(&mut self, text: &str) -> &mut Html {
        push_escaped(&mut self.0, text);
        self
    }

    /// Another piece of markup.
    pub fn append(&mut self, other: &Html) -> &mut Html {
        self.0.push_str(&other.0);
        self
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// Whether a character is shown as an escape rather than as itself: C0 and C1 controls other
/// than tab and newline, DEL, and the bidirectional embeddings, overrides and isolates (which
/// can make text read in an order other than the one it has).
fn hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn push_escaped(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if hidden(c) => {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
}

/// `text` escaped for an element's content.
pub fn text(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    push_escaped(&mut out, text);
    out
}

/// `value` escaped for a double-quoted attribute value (the same escaping: quotes included).
pub fn attr(value: &str) -> String {
    text(value)
}

/// An `id` (and `#` anchor) made of any text: letters, digits, `-` and `_` kept, every other
/// byte as `.XX` hex, prefixed so that it never starts with a digit.
pub fn anchor(prefix: &str, name: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + name.len() + 1);
    out.push_str(prefix);
    out.push('-');
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            out.push(b as char);
        } else {
            let _ = write!(out, ".{b:02x}");
        }
    }
    out
}

/// A link to a file by its path: relative paths start with `./` and absolute ones are `file://`
/// URLs; every byte but letters, digits, `-._~/` is percent-encoded, so no path can name a
/// scheme (`javascript:`), a query or a fragment. Escaped for an attribute.
pub fn href(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 8);
    out.push_str(if path.starts_with('/') {
        "file://"
    } else {
        "./"
    });
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Bytes as text for a page: valid UTF-8 as it is, each invalid byte as `\xNN`.
pub fn lossless(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// At most `max` bytes of `text`, cut at a character boundary, and how many bytes were left out.
pub fn bounded(text: &str, max: usize) -> (&str, usize) {
    if text.len() <= max {
        return (text, 0);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], text.len() - end)
}

/// `text` (at most `max` bytes of it) in a `<pre>`, with a note of what was cut.
pub fn pre(class: &str, text: &str, max: usize) -> Html {
    let (shown, cut) = bounded(text, max);
    let mut h = Html::new();
    h.raw("<pre class=\"")
        .text(class)
        .raw("\">")
        .text(shown)
        .raw("</pre>");
    if cut > 0 {
        h.raw("<p class=\"cut\">")
            .text(&format!("… {} more bytes not shown", cut))
            .raw("</p>");
    }
    h
}

/// A byte count as a person reads it.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_text_is_escaped() {
        assert_eq!(
            text("</pre><script>alert('x')</script>&amp;"),
            "&lt;/pre&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;amp;"
        );
        assert_eq!(attr("a\" onload=\"x"), "a&quot; onload=&quot;x");
    }

    #[test]
    fn controls_and_bidi_overrides_are_shown_as_escapes() {
        assert_eq!(text("a\u{1b}[31mb\tc\nd"), "a\\u{001b}[31mb\tc\nd");
        assert_eq!(text("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        assert_eq!(text("\u{0}"), "\\u{0000}");
    }

    #[test]
    fn an_anchor_is_only_safe_characters() {
        assert_eq!(anchor("task", "env/a b"), "task-env.2fa.20b");
        assert_eq!(anchor("t", "\"><x"), "t-.22.3e.3cx");
    }

    #[test]
    fn a_link_cannot_name_a_scheme_or_leave_its_attribute() {
        assert_eq!(href("javascript:alert(1)"), "./javascript%3Aalert%281%29");
        assert_eq!(href("a/b c/view.html"), "./a/b%20c/view.html");
        assert_eq!(href("/tmp/x\"y#z?q"), "file:///tmp/x%22y%23z%3Fq");
    }

    #[test]
    fn invalid_utf8_is_kept_visible() {
        assert_eq!(lossless(b"ok\xff\xfe-\xc3\xa9"), "ok\\xff\\xfe-\u{e9}");
    }

    #[test]
    fn bounded_text_is_cut_on_a_character_and_says_how_much() {
        assert_eq!(bounded("abc", 5), ("abc", 0));
        assert_eq!(bounded("aéb", 2), ("a", 3));
        let p = pre("x", &"<".repeat(10), 4);
        assert_eq!(
            p.as_str(),
            "<pre class=\"x\">&lt;&lt;&lt;&lt;</pre><p class=\"cut\">… 6 more bytes not shown</p>"
        );
    }

    #[test]
    fn sizes_read_as_units() {
        assert_eq!(size(10), "10 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(3 << 20), "3.0 MiB");
    }
}
