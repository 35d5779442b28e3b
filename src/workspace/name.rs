//! How a file name that is not UTF-8 is written in a change list or a manifest: injectively,
//! as JSON-safe text, and back.
//!
//! The encoding: every byte that is not part of valid UTF-8 becomes `\xNN` (two lowercase hex
//! digits); a backslash becomes `\\` when what follows it in the encoded text would start with
//! `x` or `\` (an `x`, a backslash, or an invalid byte), and stays a single `\` otherwise.
//! Everything else is kept as it is, so a UTF-8 name without `\x` or `\\` in it is written
//! unchanged. [`decode`] reads `\\` as `\`, `\xNN` as the byte NN, and any other backslash as
//! itself, so that `decode(encode(b)) == b` for every name: two different names never give the
//! same text.

use std::borrow::Cow;

/// One unit of a name: a character of its valid UTF-8, or a byte that is not.
#[derive(Clone, Copy)]
enum Unit {
    Char(char),
    Byte(u8),
}

fn units(name: &[u8]) -> Vec<Unit> {
    let mut out = Vec::with_capacity(name.len());
    for chunk in name.utf8_chunks() {
        out.extend(chunk.valid().chars().map(Unit::Char));
        out.extend(chunk.invalid().iter().copied().map(Unit::Byte));
    }
    out
}

/// The text of a name (one component or a `/`-separated path): see the module's encoding.
pub fn encode(name: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(name) {
        Ok(text) if !text.contains("\\x") && !text.contains("\\\\") => Cow::Borrowed(text),
        _ => Cow::Owned(encode_units(&units(name))),
    }
}

fn encode_units(units: &[Unit]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(units.len() + 8);
    for (i, unit) in units.iter().enumerate() {
        match *unit {
            Unit::Byte(b) => {
                out.push_str("\\x");
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 15)]));
            }
            Unit::Char('\\') => {
                let escape = matches!(
                    units.get(i + 1),
                    Some(Unit::Byte(_) | Unit::Char('x' | '\\'))
                );
                out.push_str(if escape { "\\\\" } else { "\\" });
            }
            Unit::Char(c) => out.push(c),
        }
    }
    out
}

/// The bytes of a name written by [`encode`] (or by hand, in a task's `expected.json`).
pub fn decode(text: &str) -> Cow<'_, [u8]> {
    if !text.contains('\\') {
        return Cow::Borrowed(text.as_bytes());
    }
    let bytes = text.as_bytes();
    let hex = |b: u8| char::from(b).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        match (bytes.get(i + 1), bytes.get(i + 2), bytes.get(i + 3)) {
            (Some(b'\\'), _, _) => {
                out.push(b'\\');
                i += 2;
            }
            (Some(b'x'), Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) << 4) | hex(l).unwrap_or(0));
                i += 4;
            }
            _ => {
                out.push(b'\\');
                i += 1;
            }
        }
    }
    Cow::Owned(out)
}

/// `prefix/name` (or `name` at the root), with `name` encoded.
pub fn join(prefix: &str, name: &[u8]) -> String {
    let name = encode(name);
    if prefix.is_empty() {
        name.into_owned()
    } else {
        format!("{prefix}/{name}")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn plain_names_are_written_unchanged() {
        for name in ["a.txt", "dir/é ü", "back\\slash", "trailing\\", "\\n"] {
            assert_eq!(encode(name.as_bytes()), name);
            assert_eq!(decode(name), name.as_bytes());
        }
    }

    #[test]
    fn invalid_bytes_and_the_backslashes_before_them_are_escaped() {
        assert_eq!(encode(b"a\xffb"), "a\\xffb");
        assert_eq!(encode(b"\\\xff"), "\\\\\\xff");
        assert_eq!(encode(b"\\x41"), "\\\\x41");
        assert_eq!(encode(b"\\\\"), "\\\\\\");
    }

    /// Every name of up to four units drawn from the troublesome ones round-trips, so no two
    /// of them share a text.
    #[test]
    fn the_encoding_is_injective_on_every_short_name_of_tricky_units() {
        let alphabet: [&[u8]; 6] = [b"\\", b"x", b"f", b"\xff", b"\xc3", b"\xc3\xa9"];
        let mut seen = std::collections::HashMap::new();
        let mut names: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..4 {
            let mut longer = Vec::new();
            for name in &names {
                for unit in alphabet {
                    let mut n = name.clone();
                    n.extend_from_slice(unit);
                    longer.push(n);
                }
            }
            names.extend(longer);
        }
        for name in names {
            let text = encode(&name).into_owned();
            assert_eq!(decode(&text), name.as_slice(), "{text:?}");
            if let Some(other) = seen.insert(text.clone(), name.clone()) {
                assert_eq!(other, name, "{text:?} written for two names");
            }
        }
    }
}
