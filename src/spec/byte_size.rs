//! Byte counts in task and policy files: an integer, or a number with a binary unit
//! (`"256MiB"`, `"1G"`).

use serde::{Deserialize, Deserializer};

/// A byte count written either as an integer or as a string with a unit (`"256MiB"`, `"1G"`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct ByteSize(pub(super) u64);

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Int(i64),
            Text(String),
        }
        match Repr::deserialize(deserializer).map_err(|_| {
            serde::de::Error::custom(
                "expected a byte count: an integer or a string such as \"256MiB\", \"2GiB\", \"512K\"",
            )
        })? {
            Repr::Int(n) if n >= 0 => Ok(ByteSize(n as u64)),
            Repr::Int(n) => Err(serde::de::Error::custom(format!(
                "byte count {n} is negative; expected a non-negative size"
            ))),
            Repr::Text(s) => parse_byte_size(&s).map(ByteSize).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "`{s}` is not a byte count; expected an integer or a number with a unit (B, K, KiB, M, MiB, G, GiB)"
                ))
            }),
        }
    }
}

/// Parse `"256MiB"`, `"1G"`, `"4096"`. Units are binary (K = KiB).
fn parse_byte_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let value: u64 = digits.parse().ok()?;
    let multiplier: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KB" | "KiB" => 1 << 10,
        "M" | "MB" | "MiB" => 1 << 20,
        "G" | "GB" | "GiB" => 1 << 30,
        "T" | "TB" | "TiB" => 1 << 40,
        _ => return None,
    };
    value.checked_mul(multiplier)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_parse_with_binary_units() {
        assert_eq!(parse_byte_size("256MiB"), Some(256 << 20));
        assert_eq!(parse_byte_size("1G"), Some(1 << 30));
        assert_eq!(parse_byte_size("4096"), Some(4096));
        assert_eq!(parse_byte_size("12 parsecs"), None);
        assert_eq!(parse_byte_size("99999999999T"), None);
    }
}
