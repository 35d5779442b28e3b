//! `envcraft manifest DIR [--json]`: the manifest of any directory, one line per entry as
//! `KIND MODE  SHA256  PATH` (the hash and path columns read as `sha256sum` output; `-` for
//! directories and special files), or the manifest's JSON.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::cli::error::Error;
use crate::verify::Manifest;

#[derive(Debug, Args)]
pub struct ManifestArgs {
    /// The directory to list (symlinks below it are listed, never followed).
    pub dir: PathBuf,
    /// Print the manifest as JSON: {"version": 1, "entries": [{"path", "kind", "mode",
    /// "sha256", "size"}, ...]}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ManifestArgs) -> Result<i32, Error> {
    let manifest = Manifest::of_dir(&args.dir)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if args.json {
        writeln!(out, "{}", manifest.to_json()).map_err(Error::Output)?;
    } else {
        for entry in manifest.entries() {
            writeln!(out, "{}", line(entry)).map_err(Error::Output)?;
        }
        for dir in manifest.incomplete() {
            writeln!(
                out,
                "# not listed (deeper than {} levels): {dir}/",
                crate::verify::manifest::MAX_DEPTH
            )
            .map_err(Error::Output)?;
        }
    }
    out.flush().map_err(Error::Output)?;
    Ok(0)
}

/// `file    0644  <sha256>  path`; a path with a newline or backslash is escaped and the line
/// starts with `\`, as `sha256sum` does.
fn line(entry: &crate::verify::Entry) -> String {
    let hash = entry
        .sha256
        .clone()
        .unwrap_or_else(|| format!("{:<64}", "-"));
    let escaped = entry.path.contains(['\n', '\\']);
    let path = if escaped {
        entry.path.replace('\\', "\\\\").replace('\n', "\\n")
    } else {
        entry.path.clone()
    };
    format!(
        "{}{:<7} {}  {hash}  {path}",
        if escaped { "\\" } else { "" },
        entry.kind.name(),
        crate::verify::manifest::octal_mode::format(entry.mode),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::verify::{Entry, EntryKind};

    #[test]
    fn lines_read_like_sha256sum_with_kind_and_mode() {
        let file = Entry {
            path: "a b.txt".into(),
            kind: EntryKind::File,
            mode: 0o644,
            sha256: Some("ab".repeat(32)),
            size: 3,
        };
        assert_eq!(
            line(&file),
            format!("file    0644  {}  a b.txt", "ab".repeat(32))
        );
        let dir = Entry {
            path: "d\nx".into(),
            kind: EntryKind::Dir,
            mode: 0o755,
            sha256: None,
            size: 0,
        };
        assert_eq!(
            line(&dir),
            format!("\\dir     0755  -{}  d\\nx", " ".repeat(63))
        );
    }
}
