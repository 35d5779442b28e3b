//! The bytes `process send-keys` and `paste` write to a background command's stdin: key names
//! (`Enter`, `Tab`, `Up`, `C-c`, `^D`, `M-x`, `F5`, ...), hex bytes and literal text, encoded
//! as a terminal would send them (xterm's sequences), pure.
//!
//! A command's stdin here is a pipe, not a terminal: there is no line discipline to turn a
//! carriage return into a line feed, so `Enter` (and `process submit`) send `\n`, which is what
//! a program reading lines from a terminal receives; `C-m` or `^M` still send `\r`.

use super::ToolError;
use super::shorten;

const ESC: &str = "\x1b";

/// The start and end of a bracketed paste.
pub const PASTE_START: &str = "\x1b[200~";
pub const PASTE_END: &str = "\x1b[201~";

/// A named key's sequence, and whether xterm modifiers (`;N`) apply to it.
fn named(name: &str) -> Option<(&'static str, bool)> {
    Some(match name {
        "enter" | "return" => ("\n", false),
        "tab" => ("\t", false),
        "escape" | "esc" => (ESC, false),
        "space" => (" ", false),
        "backspace" | "bspace" => ("\x7f", false),
        "up" => ("\x1b[A", true),
        "down" => ("\x1b[B", true),
        "right" => ("\x1b[C", true),
        "left" => ("\x1b[D", true),
        "home" => ("\x1b[1~", true),
        "end" => ("\x1b[4~", true),
        "pageup" | "pgup" | "ppage" => ("\x1b[5~", true),
        "pagedown" | "pgdn" | "npage" => ("\x1b[6~", true),
        "insert" | "ic" => ("\x1b[2~", true),
        "delete" | "del" | "dc" => ("\x1b[3~", true),
        "btab" => ("\x1b[Z", false),
        "f1" => ("\x1bOP", false),
        "f2" => ("\x1bOQ", false),
        "f3" => ("\x1bOR", false),
        "f4" => ("\x1bOS", false),
        "f5" => ("\x1b[15~", false),
        "f6" => ("\x1b[17~", false),
        "f7" => ("\x1b[18~", false),
        "f8" => ("\x1b[19~", false),
        "f9" => ("\x1b[20~", false),
        "f10" => ("\x1b[21~", false),
        "f11" => ("\x1b[23~", false),
        "f12" => ("\x1b[24~", false),
        _ => return None,
    })
}

/// The control character of `c` (`a`..`z`, `@`, `[`, `\`, `]`, `^`, `_`; `?` is DEL).
fn control(c: char) -> Option<char> {
    if c == '?' {
        return Some('\x7f');
    }
    let upper = c.to_ascii_uppercase();
    ('@'..='_')
        .contains(&upper)
        .then_some(((upper as u8) & 0x1f) as char)
}

/// One key token as bytes.
fn key(token: &str) -> Result<String, ToolError> {
    let token = token.trim();
    if token.is_empty() {
        return Ok(String::new());
    }
    let mut chars = token.chars();
    if let (Some('^'), Some(c), None) = (chars.next(), chars.next(), chars.next())
        && let Some(ctrl) = control(c)
    {
        return Ok(ctrl.to_string());
    }
    // Modifier prefixes: C- (control), M- (meta/alt), S- (shift).
    let (mut ctrl, mut alt, mut shift) = (false, false, false);
    let mut base = token;
    while base.len() > 2 && base.as_bytes()[1] == b'-' {
        match base.as_bytes()[0].to_ascii_lowercase() {
            b'c' => ctrl = true,
            b'm' => alt = true,
            b's' => shift = true,
            _ => break,
        }
        base = &base[2..];
    }
    let lower = base.to_ascii_lowercase();
    if lower == "tab" && shift {
        return Ok("\x1b[Z".into());
    }
    if let Some((seq, modifiable)) = named(&lower) {
        let modifier = 1 + u8::from(shift) + 2 * u8::from(alt) + 4 * u8::from(ctrl);
        if modifiable && modifier > 1 {
            // xterm: CSI 1 ; N X for arrows, CSI n ; N ~ for the rest.
            let body = &seq[2..];
            return Ok(match body.strip_suffix('~') {
                Some(n) => format!("{ESC}[{n};{modifier}~"),
                None => format!("{ESC}[1;{modifier}{body}"),
            });
        }
        return Ok(if alt {
            format!("{ESC}{seq}")
        } else {
            seq.into()
        });
    }
    let mut chars = base.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        let mut c = if shift { c.to_ascii_uppercase() } else { c };
        if ctrl {
            c = control(c).ok_or_else(|| {
                ToolError::invalid_argument(format!("`C-{c}` is not a control key"))
            })?;
        }
        return Ok(if alt {
            format!("{ESC}{c}")
        } else {
            c.to_string()
        });
    }
    Err(ToolError::invalid_argument(format!(
        "unknown key `{}`: use names such as Enter, Tab, Escape, Up, C-c, ^D, M-x, F5, or \
         `literal` for text",
        shorten(token, 40)
    )))
}

/// One hex byte (`1b`, `0x03`).
fn hex_byte(raw: &str) -> Result<u8, ToolError> {
    let t = raw.trim();
    let digits = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    if digits.is_empty() || digits.len() > 2 {
        return Err(ToolError::invalid_argument(format!(
            "`hex`: `{}` is not a byte (one or two hex digits)",
            shorten(raw, 16)
        )));
    }
    u8::from_str_radix(digits, 16).map_err(|_| {
        ToolError::invalid_argument(format!(
            "`hex`: `{}` is not a byte (one or two hex digits)",
            shorten(raw, 16)
        ))
    })
}

/// The bytes of a `send-keys`: `literal` first, then the `hex` bytes, then the `keys`.
pub fn encode(
    keys: &[String],
    hex: &[String],
    literal: Option<&str>,
) -> Result<Vec<u8>, ToolError> {
    let mut out = Vec::new();
    if let Some(text) = literal {
        out.extend_from_slice(text.as_bytes());
    }
    for h in hex {
        out.push(hex_byte(h)?);
    }
    for k in keys {
        out.extend_from_slice(key(k)?.as_bytes());
    }
    Ok(out)
}

/// The bytes of a `paste` of `text`: wrapped in bracketed-paste markers unless told not to.
pub fn paste(text: &str, bracketed: bool) -> Vec<u8> {
    if bracketed {
        format!("{PASTE_START}{text}{PASTE_END}").into_bytes()
    } else {
        text.as_bytes().to_vec()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn keys(k: &[&str]) -> Vec<u8> {
        let k: Vec<String> = k.iter().map(|s| s.to_string()).collect();
        encode(&k, &[], None).unwrap()
    }

    #[test]
    fn named_keys_and_control_characters() {
        assert_eq!(keys(&["Enter"]), b"\n");
        assert_eq!(keys(&["tab", "Escape", "space"]), b"\t\x1b ");
        assert_eq!(keys(&["C-c"]), b"\x03");
        assert_eq!(keys(&["^D"]), b"\x04");
        assert_eq!(keys(&["C-m"]), b"\r");
        assert_eq!(keys(&["^?"]), b"\x7f");
        assert_eq!(keys(&["M-x"]), b"\x1bx");
        assert_eq!(keys(&["S-a"]), b"A");
        assert_eq!(keys(&["Up", "left"]), b"\x1b[A\x1b[D");
        assert_eq!(keys(&["F5"]), b"\x1b[15~");
        assert_eq!(keys(&["S-Tab"]), b"\x1b[Z");
        assert_eq!(keys(&["y", ""]), b"y");
    }

    #[test]
    fn modified_cursor_keys_use_xterm_parameters() {
        assert_eq!(keys(&["C-Up"]), b"\x1b[1;5A");
        assert_eq!(keys(&["S-Right"]), b"\x1b[1;2C");
        assert_eq!(keys(&["C-Delete"]), b"\x1b[3;5~");
        assert_eq!(keys(&["M-Enter"]), b"\x1b\n");
    }

    #[test]
    fn literal_then_hex_then_keys_and_bad_tokens_are_refused() {
        let out = encode(&["Enter".into()], &["0x1b".into(), "41".into()], Some("hi")).unwrap();
        assert_eq!(out, b"hi\x1bA\n");
        for bad in ["Hyper", "C-1"] {
            assert!(encode(&[bad.into()], &[], None).is_err(), "{bad}");
        }
        for bad in ["zz", "123", ""] {
            assert!(encode(&[], &[bad.into()], None).is_err(), "{bad}");
        }
    }

    #[test]
    fn paste_is_bracketed_unless_told_not_to_be() {
        assert_eq!(paste("a\nb", true), b"\x1b[200~a\nb\x1b[201~");
        assert_eq!(paste("a", false), b"a");
    }
}
