//! JSON text of `serde_json` values, byte for byte what `serde_json` writes (keys in the map's
//! order, the same escapes, numbers by `serde_json` itself), with strings scanned in blocks of
//! 32 bytes (vector compares). A tool result holds whole files and is written twice per call
//! (as the answer, and in the transcript as the text of a `toolResult`, escaped again), so
//! escaping was most of the cost of a file call; `serde_json` looks at strings a byte at a
//! time.

use serde_json::Value;

/// `value` as JSON text.
pub fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    write_value(&mut out, value);
    out
}

/// Append `value` as JSON text to `out`.
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    write_tree(out, value, write_str);
}

/// Append `text` as a JSON string (quoted and escaped) to `out`.
pub fn write_str(out: &mut Vec<u8>, text: &str) {
    out.reserve(text.len() + 2);
    out.push(b'"');
    escape(out, text, Escape::Once);
    out.push(b'"');
}

/// Append the JSON text of `value` escaped as the inside of a JSON string (no quotes around):
/// what [`write_str`] makes of [`to_vec`]'s text, in one pass over each string (a transcript
/// stores a tool's result as the text of a message). Literals, numbers and the punctuation
/// hold nothing to escape; only the strings differ.
pub fn write_value_as_text(out: &mut Vec<u8>, value: &Value) {
    write_tree(out, value, write_str_as_text);
}

/// Append `value` as JSON text, each string (keys too) written by `string`.
fn write_tree(out: &mut Vec<u8>, value: &Value, string: fn(&mut Vec<u8>, &str)) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // Writing a number into a Vec cannot fail.
        Value::Number(n) => {
            let _ = serde_json::to_writer(&mut *out, n);
        }
        Value::String(s) => string(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_tree(out, item, string);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string(out, key);
                out.push(b':');
                write_tree(out, item, string);
            }
            out.push(b'}');
        }
    }
}

/// A JSON string inside a JSON string: its quotes escaped, its content escaped twice.
fn write_str_as_text(out: &mut Vec<u8>, text: &str) {
    out.reserve(text.len() + 4);
    out.extend_from_slice(b"\\\"");
    escape(out, text, Escape::Twice);
    out.extend_from_slice(b"\\\"");
}

/// How many times a string's content is escaped.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Escape {
    Once,
    Twice,
}

/// Append `text` escaped (without quotes): clean blocks copied whole, the rest a byte at a time.
fn escape(out: &mut Vec<u8>, text: &str, times: Escape) {
    let bytes = text.as_bytes();
    // `clean` is where the bytes not yet copied start.
    let mut clean = 0;
    let mut at = 0;
    while at < bytes.len() {
        at += clean_blocks(&bytes[at..]);
        // A block holding a byte to escape, or the last few bytes: one at a time.
        let end = (at + BLOCK).min(bytes.len());
        for (i, &b) in bytes.iter().enumerate().take(end).skip(at) {
            let unicode: [u8; 6];
            let once: &[u8] = match b {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                b'\n' => b"\\n",
                b'\r' => b"\\r",
                b'\t' => b"\\t",
                0x08 => b"\\b",
                0x0c => b"\\f",
                0x00..=0x1f => {
                    unicode = [
                        b'\\',
                        b'u',
                        b'0',
                        b'0',
                        HEX[usize::from(b >> 4)],
                        HEX[usize::from(b & 0xf)],
                    ];
                    &unicode
                }
                _ => continue,
            };
            out.extend_from_slice(&bytes[clean..i]);
            match times {
                Escape::Once => out.extend_from_slice(once),
                // The escape sequence escaped again: only its `\` and `"` need it.
                Escape::Twice => {
                    for &c in once {
                        if c == b'\\' || c == b'"' {
                            out.push(b'\\');
                        }
                        out.push(c);
                    }
                }
            }
            clean = i + 1;
        }
        at = end;
    }
    out.extend_from_slice(&bytes[clean..]);
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// How many bytes are looked at together: a block with nothing to escape is skipped whole.
const BLOCK: usize = 32;

/// The length of the leading whole blocks of `bytes` with no control character, `"` or `\`.
/// Written so that the compiler turns the inner loop into vector compares.
#[inline]
fn clean_blocks(bytes: &[u8]) -> usize {
    let mut len = 0;
    for block in bytes.chunks_exact(BLOCK) {
        let mut hits = 0u8;
        for &b in block {
            hits |= u8::from(b < 0x20) | u8::from(b == b'"') | u8::from(b == b'\\');
        }
        if hits != 0 {
            break;
        }
        len += BLOCK;
    }
    len
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn same_as_serde(value: &Value) {
        assert_eq!(
            String::from_utf8(to_vec(value)).unwrap(),
            serde_json::to_string(value).unwrap()
        );
    }

    #[test]
    fn every_byte_value_is_escaped_as_serde_json_does() {
        // Each character alone, and at every position of a word, among clean neighbours.
        for c in (0u32..0x80).chain([0xa2, 0xdc, 0x2028, 0x1f600]) {
            let c = char::from_u32(c).unwrap();
            for before in 0..10 {
                let text = format!("{}{c}{}", "a".repeat(before), "é".repeat(3));
                same_as_serde(&json!(text));
            }
        }
    }

    #[test]
    fn long_and_mixed_strings_match() {
        let mut text = String::new();
        for i in 0..5000u32 {
            text.push(char::from_u32((i * 7919) % 0x250).unwrap_or('?'));
        }
        same_as_serde(&json!(text));
        same_as_serde(&json!("x".repeat(4096)));
        same_as_serde(&json!(format!(
            "{}\"{}\\\n",
            "y".repeat(33),
            "z".repeat(17)
        )));
        same_as_serde(&json!(""));
    }

    #[test]
    fn values_as_text_are_their_json_escaped_again() {
        let mut texts: Vec<String> = (0u32..0x80)
            .chain([0xa2, 0x2028])
            .map(|c| format!("a{}b", char::from_u32(c).unwrap()))
            .collect();
        texts.push("x".repeat(4096) + "\"\\\n\u{1}");
        for text in texts {
            let value = json!({"content": text, "ok": true, "n": [1, -2.5, null], "k\"ey": {}});
            let mut once = Vec::new();
            write_str(&mut once, std::str::from_utf8(&to_vec(&value)).unwrap());
            let mut direct = vec![b'"'];
            write_value_as_text(&mut direct, &value);
            direct.push(b'"');
            assert_eq!(
                String::from_utf8(direct).unwrap(),
                String::from_utf8(once).unwrap()
            );
        }
    }

    #[test]
    fn whole_values_match() {
        same_as_serde(&json!({
            "ok": true, "none": null, "n": -3, "big": u64::MAX, "f": 1.0, "g": 2.5e-8,
            "list": [1, "two", {"three": [false]}, []], "empty": {},
            "content": "line 1\nline\t2 \"quoted\" \\ \u{1}",
        }));
    }
}
