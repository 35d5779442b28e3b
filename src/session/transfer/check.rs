//! The first pass of an upload: the client's tar (plain, gzip or zstd) read whole and judged,
//! nothing written: names (no absolute name, no `..`), types (files, directories, symbolic
//! links, hard links; no device node, FIFO or sparse file), symbolic links' targets (relative
//! and, judged from where each is made, staying beneath the workspace root), hard links (to an
//! earlier file of the same tar only), one path one entry, and the bounds (entries,
//! decompressed bytes, depth). The result is a [`Plan`] the second pass (`upload`) follows.

use std::collections::HashMap;
use std::io::{self, Read};

use super::{TransferLimits, shown};
use crate::tools::ToolError;

/// One entry of the tar, as the first pass judged it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Planned {
    /// Nothing to write (a pax global header, the upload's directory itself).
    Skip,
    Dir {
        path: Vec<Vec<u8>>,
        mode: u32,
        mtime: u64,
    },
    File {
        path: Vec<Vec<u8>>,
        mode: u32,
        mtime: u64,
    },
    Symlink {
        path: Vec<Vec<u8>>,
        target: Vec<u8>,
    },
    HardLink {
        path: Vec<Vec<u8>>,
        /// The earlier file's path, workspace-relative.
        target: Vec<u8>,
    },
}

/// What the first pass found: one [`Planned`] per tar entry, in order.
#[derive(Debug)]
pub(super) struct Plan {
    pub(super) entries: Vec<Planned>,
    /// Entries to write (not skipped).
    pub(super) written: usize,
    /// Bytes of file data.
    pub(super) bytes: u64,
}

/// What a path of the upload is, to refuse a second entry of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Made {
    Dir,
    File,
    Link,
}

/// Set once a [`Bounded`] reader passed its bound.
type Passed = std::rc::Rc<std::cell::Cell<bool>>;

/// A reader that fails once more than `left` bytes came through it (and says so in `passed`).
struct Bounded<R> {
    inner: R,
    left: u64,
    passed: Passed,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let room = buf.len().min(self.left.saturating_add(1) as usize);
        let n = self.inner.read(&mut buf[..room])?;
        if n as u64 > self.left {
            self.passed.set(true);
            return Err(io::Error::other("the bytes bound is passed"));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// The body decompressed (by its magic number: gzip, zstd, else plain), bounded.
pub(super) fn expanded<'a>(
    body: &'a [u8],
    max: u64,
) -> Result<(Box<dyn Read + 'a>, Passed), ToolError> {
    let inner: Box<dyn Read + 'a> = if body.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::MultiGzDecoder::new(body))
    } else if body.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(zstd::stream::read::Decoder::with_buffer(body).map_err(|e| {
            ToolError::invalid_argument(format!(
                "the upload is refused: its zstd stream cannot be read: {e}"
            ))
        })?)
    } else {
        Box::new(body)
    };
    let passed = std::rc::Rc::new(std::cell::Cell::new(false));
    let bounded = Bounded {
        inner,
        left: max,
        passed: passed.clone(),
    };
    Ok((Box::new(bounded), passed))
}

/// A tar that cannot be read: past the bytes bound (a bomb), or not a tar.
pub(super) fn tar_error(passed: bool, max: u64, at: usize, e: &io::Error) -> ToolError {
    if passed {
        ToolError::too_large(format!(
            "the upload is refused: its tar is more than {max} bytes once decompressed (the \
             transfer's bytes bound)"
        ))
    } else {
        ToolError::invalid_argument(format!(
            "the upload is refused: the body is not a readable tar stream (plain, gzip or zstd) \
             at entry {at}: {e}"
        ))
    }
}

pub(super) fn depth_error(what: &str, depth: usize, max: usize) -> ToolError {
    ToolError::too_large(format!(
        "the upload is refused: `{what}` is {depth} names deep in the workspace, past the \
         transfer's depth bound of {max}"
    ))
}

fn refused(entry: &[u8], why: &str) -> ToolError {
    ToolError::permission(format!(
        "the upload is refused: entry `{}`: {why}",
        shown(entry)
    ))
}

fn invalid(entry: &[u8], why: &str) -> ToolError {
    ToolError::invalid_argument(format!(
        "the upload is refused: entry `{}`: {why}",
        shown(entry)
    ))
}

/// A tar name's components: `.` and empty ones dropped; an absolute name or `..` refused.
fn components(name: &[u8]) -> Result<Vec<Vec<u8>>, ToolError> {
    if name.starts_with(b"/") {
        return Err(refused(
            name,
            "an absolute name is refused: names are relative to the upload's directory",
        ));
    }
    let mut out = Vec::new();
    for c in name.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => return Err(refused(name, "`..` is refused")),
            _ => out.push(c.to_vec()),
        }
    }
    Ok(out)
}

/// Whether the symbolic link `target`, made `depth` directories below the workspace root,
/// names a path beneath that root (lexically, as the sandbox would resolve it from there).
fn stays_beneath(target: &[u8], depth: usize) -> bool {
    if target.is_empty() || target.starts_with(b"/") {
        return false;
    }
    let mut level = depth;
    for c in target.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => match level.checked_sub(1) {
                Some(up) => level = up,
                None => return false,
            },
            _ => level += 1,
        }
    }
    true
}

/// The first pass: every entry judged, nothing written. `base` is the upload's directory.
pub(super) fn check(
    body: &[u8],
    base: &[Vec<u8>],
    limits: TransferLimits,
) -> Result<Plan, ToolError> {
    let (input, passed) = expanded(body, limits.max_bytes)?;
    let mut archive = tar::Archive::new(input);
    let mut plan = Plan {
        entries: Vec::new(),
        written: 0,
        bytes: 0,
    };
    let mut made: HashMap<Vec<Vec<u8>>, Made> = HashMap::new();
    let entries = archive
        .entries()
        .map_err(|e| tar_error(passed.get(), limits.max_bytes, 0, &e))?;
    for (index, entry) in entries.enumerate() {
        let mut entry = entry.map_err(|e| tar_error(passed.get(), limits.max_bytes, index, &e))?;
        if index >= limits.max_entries {
            return Err(ToolError::too_large(format!(
                "the upload is refused: it has more than {} entries (the transfer's entry bound)",
                limits.max_entries
            )));
        }
        let planned = judge(&mut entry, base, limits, &mut made)?;
        if let Planned::File { .. } = planned {
            plan.bytes = plan.bytes.saturating_add(entry.size());
            // Read through, so that the bytes bound sees the data too.
            io::copy(&mut entry, &mut io::sink())
                .map_err(|e| tar_error(passed.get(), limits.max_bytes, index, &e))?;
        }
        if planned != Planned::Skip {
            plan.written += 1;
        }
        plan.entries.push(planned);
    }
    Ok(plan)
}

/// One entry of the first pass.
fn judge<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    base: &[Vec<u8>],
    limits: TransferLimits,
    made: &mut HashMap<Vec<Vec<u8>>, Made>,
) -> Result<Planned, ToolError> {
    let kind = entry.header().entry_type();
    if kind.is_pax_global_extensions() {
        return Ok(Planned::Skip);
    }
    let name = entry.path_bytes().into_owned();
    let comps = components(&name)?;
    let depth = base.len() + comps.len();
    if depth > limits.max_depth {
        return Err(depth_error(&shown(&name), depth, limits.max_depth));
    }
    if kind.is_block_special() || kind.is_character_special() || kind.is_fifo() {
        return Err(refused(
            &name,
            "device nodes and FIFOs are refused (only files, directories and links)",
        ));
    }
    let this = match kind {
        tar::EntryType::Directory => Made::Dir,
        tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::Link => Made::File,
        tar::EntryType::Symlink => Made::Link,
        other => {
            return Err(invalid(
                &name,
                &format!(
                    "tar entries of type `{}` are not supported (only files, directories and \
                     links)",
                    other.as_byte() as char
                ),
            ));
        }
    };
    if comps.is_empty() {
        return if this == Made::Dir {
            Ok(Planned::Skip)
        } else {
            Err(invalid(&name, "a file needs a name"))
        };
    }
    for i in 1..comps.len() {
        match made.get(&comps[..i]) {
            None => {
                made.insert(comps[..i].to_vec(), Made::Dir);
            }
            Some(Made::Dir) => {}
            Some(_) => {
                return Err(invalid(
                    &name,
                    &format!(
                        "`{}` is a file or link earlier in this upload, not a directory",
                        shown(&comps[..i].join(&b'/'))
                    ),
                ));
            }
        }
    }
    match made.insert(comps.clone(), this) {
        None => {}
        Some(Made::Dir) if this == Made::Dir => {}
        Some(_) => {
            return Err(invalid(&name, "this path appears twice in the upload"));
        }
    }
    let path: Vec<Vec<u8>> = base.iter().chain(&comps).cloned().collect();
    let header = entry.header();
    let mode = header.mode().unwrap_or(0o644);
    let mtime = header.mtime().unwrap_or(0);
    Ok(match kind {
        tar::EntryType::Directory => Planned::Dir {
            path,
            // The sticky bit is kept; setuid and setgid never enter.
            mode: mode & 0o1777,
            mtime,
        },
        tar::EntryType::Symlink => {
            let target = entry
                .link_name_bytes()
                .map(|t| t.into_owned())
                .unwrap_or_default();
            if !stays_beneath(&target, path.len() - 1) {
                return Err(refused(
                    &name,
                    &format!(
                        "a symbolic link to `{}` is refused: links must be relative and stay \
                         inside the workspace",
                        shown(&target)
                    ),
                ));
            }
            Planned::Symlink { path, target }
        }
        tar::EntryType::Link => {
            let target = entry
                .link_name_bytes()
                .map(|t| t.into_owned())
                .unwrap_or_default();
            let to = components(&target)?;
            if to.is_empty() || made.get(&to) != Some(&Made::File) || to == comps {
                return Err(refused(
                    &name,
                    &format!(
                        "a hard link to `{}` is refused: a hard link may only name a file \
                         earlier in the same upload",
                        shown(&target)
                    ),
                ));
            }
            Planned::HardLink {
                path,
                target: base
                    .iter()
                    .chain(&to)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(&b'/'),
            }
        }
        _ => Planned::File {
            path,
            mode: mode & 0o777,
            mtime,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_must_stay_beneath_the_workspace_root() {
        assert!(stays_beneath(b"b/c", 0));
        assert!(stays_beneath(b"../x", 1));
        assert!(!stays_beneath(b"../x", 0));
        assert!(!stays_beneath(b"a/../../x", 0));
        assert!(stays_beneath(b"a/../../x", 1));
        assert!(!stays_beneath(b"/etc/passwd", 5));
        assert!(!stays_beneath(b"../../../etc", 2));
        assert!(!stays_beneath(b"", 2));
    }

    #[test]
    fn names_with_dot_dot_or_a_leading_slash_are_refused() {
        assert_eq!(
            components(b"./a//b/").ok(),
            Some(vec![b"a".to_vec(), b"b".to_vec()])
        );
        assert!(components(b"a/../b").is_err());
        assert!(components(b"/etc/passwd").is_err());
        assert_eq!(components(b"./").ok(), Some(vec![]));
    }
}
