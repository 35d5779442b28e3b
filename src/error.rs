//! Formatting an error with its causes, for the two places errors become messages (the CLI and
//! the API/tool boundary's logs). A leaf: it imports nothing of the crate, so any module may use
//! it without tying itself to the others.

use std::error::Error;
use std::fmt::{self, Write as _};

/// An error and its causes as one line: `a: b: c` (a cause already quoted is not repeated).
pub fn chain(err: &dyn Error) -> String {
    Chain(err).to_string()
}

/// [`chain`] as a `Display`, which writes the line without allocating (for logs:
/// `tracing::error!(error = %Chain(&e), ...)`).
pub struct Chain<'a>(pub &'a dyn Error);

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut earlier: &dyn Error = self.0;
        let mut source = self.0.source();
        while let Some(s) = source {
            if !quoted_by(s, self.0, earlier) {
                write!(f, ": {s}")?;
            }
            earlier = s;
            source = s.source();
        }
        Ok(())
    }
}

/// Whether the text of `cause` already appears in one of the errors from `top` down to
/// `until` (inclusive), compared in fixed buffers on the stack. A text longer than the buffer is
/// compared by its start.
fn quoted_by(cause: &dyn Error, top: &dyn Error, until: &dyn Error) -> bool {
    let mut needle = StackText::new();
    let _ = write!(needle, "{cause}");
    let needle = needle.as_str();
    if needle.is_empty() {
        return true;
    }
    let mut level: Option<&dyn Error> = Some(top);
    while let Some(e) = level {
        let mut hay = StackText::new();
        let _ = write!(hay, "{e}");
        if hay.as_str().contains(needle) {
            return true;
        }
        if std::ptr::addr_eq(e as *const dyn Error, until as *const dyn Error) {
            return false;
        }
        level = e.source();
    }
    false
}

/// Text written into a fixed buffer; what does not fit is dropped.
struct StackText {
    buf: [u8; 1024],
    len: usize,
}

impl StackText {
    fn new() -> StackText {
        StackText {
            buf: [0; 1024],
            len: 0,
        }
    }

    fn as_str(&self) -> &str {
        let bytes = &self.buf[..self.len];
        match std::str::from_utf8(bytes) {
            Ok(s) => s,
            // Cut inside a character: up to its start.
            Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
        }
    }
}

impl fmt::Write for StackText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|l| l as &(dyn Error + 'static))
        }
    }

    fn layers(texts: &[&'static str]) -> Layer {
        texts
            .iter()
            .rev()
            .fold(None, |below, t| Some(Layer(t, below.map(Box::new))))
            .unwrap()
    }

    #[test]
    fn causes_are_joined_and_a_cause_already_quoted_is_not_repeated() {
        assert_eq!(chain(&layers(&["a", "b", "c"])), "a: b: c");
        assert_eq!(
            chain(&layers(&["cannot read x: No such file", "No such file"])),
            "cannot read x: No such file"
        );
        // Quoted two levels up, and an empty cause, are left out too.
        assert_eq!(chain(&layers(&["a: gone", "b", "gone", ""])), "a: gone: b");
    }

    #[test]
    fn the_display_writes_what_chain_returns() {
        let e = layers(&["policy t.toml", "line 2", "unknown field"]);
        assert_eq!(format!("{}", Chain(&e)), chain(&e));
    }
}
