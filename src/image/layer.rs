//! Unpacking one layer (a tar stream, plain, gzip or zstd) into an empty directory: the rules
//! that make an untrusted layer harmless. Runs inside the unpacking sandbox of
//! [`super::unpack`]; nothing here trusts the stream.
//!
//! Promises, each entry judged on its own and the whole layer refused at the first bad one:
//!
//! - a path is relative, has no `..`, at most [`Limits::max_path`] bytes, names of at most 255
//!   bytes and at most [`Limits::max_depth`] components; `./` and empty components are dropped;
//! - every entry is made descriptor-relative, one name at a time from the layer's root
//!   ([`crate::workspace::tree::open_dir`]: no link is ever followed), so an entry below a
//!   symbolic link of the layer is refused rather than written through it; symbolic links
//!   themselves are kept as they are (they resolve inside the sandbox's root, not the host's);
//! - a hard link names an earlier non-directory entry of the same layer, and is made with
//!   `linkat` between two descriptors of the layer (no link followed);
//! - device nodes are refused, except below `dev/` (a root filesystem's own), where they are
//!   left out: the sandbox mounts its own `/dev` there; setuid, setgid and sticky bits of files are dropped, and
//!   ownership is the unpacker's (not the layer's);
//! - a path appears once (a directory may be listed again: its mode is taken from the last);
//! - bounded: at most [`Limits::max_entries`] entries, [`Limits::max_bytes`] of expanded data
//!   (a sparse file counts its full size, checked before it is written), and an expansion
//!   ratio of at most [`Limits::max_ratio`] once past [`Limits::ratio_floor`];
//! - OCI whiteouts become overlayfs ones: `.wh.NAME` a character device 0/0 `NAME`,
//!   `.wh..wh..opq` the `user.overlay.opaque` attribute of its directory (envcraft mounts its
//!   overlays with `userxattr`, see `sandbox::child`);
//! - the layer's digest (as stored) and diff id (of the uncompressed tar) are computed on the
//!   way, for the caller to check.

use std::collections::HashMap;
use std::ffi::CString;
use std::io::{self, BufRead, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fchmod, futimens, mkdirat, mknodat};
use nix::sys::time::TimeSpec;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

pub use super::blob::{Hashing, Source};
use super::oci::Digest;
use crate::workspace::tree;

/// Why a layer was refused (each names the entry, as the tar has it, escaped).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum LayerError {
    #[error("entry {entry}: a path with `..` is refused (it could climb out of the layer)")]
    ParentDir { entry: String },
    #[error("entry {entry}: an absolute path is refused (layer paths are relative)")]
    Absolute { entry: String },
    #[error(
        "entry {entry}: its path is {len} bytes (or a name over 255); at most {max} are accepted"
    )]
    PathTooLong {
        entry: String,
        len: usize,
        max: usize,
    },
    #[error("entry {entry}: {depth} directories deep; at most {max} are accepted")]
    TooDeep {
        entry: String,
        depth: usize,
        max: usize,
    },
    #[error(
        "entry {entry}: {component} is a symbolic link or not a directory of this layer; nothing is written through a link"
    )]
    ThroughLink { entry: String, component: String },
    #[error("entry {entry}: a hard link to {target}, which is not an earlier file of this layer")]
    HardLinkOutside { entry: String, target: String },
    #[error(
        "entry {entry}: device nodes are refused in a layer (outside dev/, whose nodes are left out)"
    )]
    Device { entry: String },
    #[error("entry {entry}: entry type {kind} is not supported")]
    Unsupported { entry: String, kind: u8 },
    #[error("entry {entry}: the path appears twice in the layer")]
    Duplicate { entry: String },
    #[error("entry {entry}: {size} bytes would take the layer past its bound of {max} bytes")]
    TooBig { entry: String, size: u64, max: u64 },
    #[error("the layer has more than {max} entries")]
    TooManyEntries { max: usize },
    #[error(
        "the layer expands {expanded} bytes from {compressed} (more than {max_ratio} times): refused as a decompression bomb"
    )]
    Bomb {
        compressed: u64,
        expanded: u64,
        max_ratio: u64,
    },
    #[error("the layer's uncompressed stream passes {max} bytes")]
    StreamTooBig { max: u64 },
    #[error("the layer is not a readable tar stream (at entry {entry}): {message}")]
    Tar { entry: String, message: String },
    #[error("entry {entry}: cannot {op}: {message}")]
    Write {
        entry: String,
        op: String,
        message: String,
    },
}

/// The bounds of one layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub max_bytes: u64,
    pub max_entries: usize,
    pub max_ratio: u64,
    pub ratio_floor: u64,
    pub max_path: usize,
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_bytes: 32 << 30,
            max_entries: 2_000_000,
            max_ratio: 1000,
            ratio_floor: 64 << 20,
            max_path: 4096,
            max_depth: 256,
        }
    }
}

/// What an unpacked layer is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unpacked {
    /// The digest of the stream as it was read (compressed or not).
    pub digest: Digest,
    /// The digest of the uncompressed tar stream (the config's `diff_id`).
    pub diff_id: Digest,
    pub compressed_bytes: u64,
    pub tar_bytes: u64,
    pub entries: usize,
    /// Device nodes below `dev/` left out (see [`LayerError::Device`]).
    #[serde(default)]
    pub skipped_devices: usize,
}

/// A reader that hashes and counts what passes through it (the uncompressed stream).
struct HashingReader<R> {
    inner: R,
    /// None where the blob's hasher sees the same bytes (an uncompressed layer's stream is its
    /// blob: hashed once).
    hasher: Option<Sha256>,
    bytes: u64,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(h) = &mut self.hasher {
            h.update(&buf[..n]);
        }
        self.bytes += n as u64;
        Ok(n)
    }
}

/// The uncompressed stream, its hash and count, bounded in size and in ratio to the
/// compressed count (read through a shared cell, as the decoder owns the compressed reader).
struct Expanded<R> {
    inner: HashingReader<R>,
    compressed: std::rc::Rc<std::cell::Cell<u64>>,
    limits: Limits,
    refusal: Option<LayerError>,
}

impl<R: Read> Read for Expanded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let expanded = self.inner.bytes;
        let compressed = self.compressed.get().max(1);
        if expanded > self.limits.max_bytes {
            self.refusal = Some(LayerError::StreamTooBig {
                max: self.limits.max_bytes,
            });
        } else if expanded > self.limits.ratio_floor
            && expanded / compressed > self.limits.max_ratio
        {
            self.refusal = Some(LayerError::Bomb {
                compressed,
                expanded,
                max_ratio: self.limits.max_ratio,
            });
        }
        if self.refusal.is_some() {
            return Err(io::Error::other("layer bound passed"));
        }
        Ok(n)
    }
}

/// Unpack the layer read from `input` into the empty directory `root`, its blob hashed as
/// `hashing` says ([`super::blob`]: on a thread of its own, beside the writing of its files, in
/// a clone of a single-threaded envcraft, for a blob in a regular file).
pub fn unpack<R: Read>(
    input: Source<R>,
    root: &OwnedFd,
    limits: Limits,
    hashing: Hashing,
) -> Result<Unpacked, LayerError> {
    let count = std::rc::Rc::new(std::cell::Cell::new(0));
    let (expansion, hasher, compressed_bytes) =
        super::blob::read_hashed(input, count.clone(), hashing, |raw| {
            let expansion = expand(raw, count, root, limits)?;
            // Whatever the decoder left unread of the blob still belongs to its digest.
            io::copy(raw, &mut io::sink()).map_err(|e| tar_err("(end)", &e))?;
            Ok(expansion)
        })
        .map_err(|e| LayerError::Write {
            entry: "(start)".into(),
            op: "start the hashing thread".into(),
            message: e.to_string(),
        })?;
    let Expansion {
        entries,
        skipped_devices,
        tar_bytes,
        diff_id,
    } = expansion?;
    let digest = Digest::from_hasher(hasher);
    Ok(Unpacked {
        diff_id: diff_id.unwrap_or_else(|| digest.clone()),
        digest,
        compressed_bytes,
        tar_bytes,
        entries,
        skipped_devices,
    })
}

/// What [`expand`] found: the entries made, the device nodes left out, the tar stream's size
/// and its digest (None where the stream is the blob itself: its digest is the blob's).
struct Expansion {
    entries: usize,
    skipped_devices: usize,
    tar_bytes: u64,
    diff_id: Option<Digest>,
}

/// The tar stream inside `raw`, decompressed as its first bytes say, unpacked into `root`:
/// the entry and left-out device counts, the stream's size and its digest.
fn expand<R: Read>(
    raw: &mut super::blob::Chunks<'_, R>,
    count: std::rc::Rc<std::cell::Cell<u64>>,
    root: &OwnedFd,
    limits: Limits,
) -> Result<Expansion, LayerError> {
    let start = raw.fill_buf().map_err(|e| tar_err("(start)", &e))?.to_vec();
    let plain = !start.starts_with(&[0x1f, 0x8b]) && !start.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]);
    let decoded: Box<dyn Read + '_> = if start.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::bufread::MultiGzDecoder::new(raw))
    } else if start.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Box::new(zstd::stream::read::Decoder::with_buffer(raw).map_err(|e| tar_err("(start)", &e))?)
    } else {
        Box::new(raw)
    };
    let mut expanded = Expanded {
        inner: HashingReader {
            inner: decoded,
            hasher: (!plain).then(Sha256::new),
            bytes: 0,
        },
        compressed: count,
        limits,
        refusal: None,
    };
    let (entries, skipped_devices) = {
        let mut writer = Writer::new(root, limits);
        let result = writer.all(&mut tar::Archive::new(&mut expanded));
        match result {
            Ok(()) => writer.finish()?,
            Err(e) => return Err(expanded.refusal.take().unwrap_or(e)),
        }
    };
    // The diff id covers the whole stream, past the tar's end-of-archive blocks.
    if let Err(e) = io::copy(&mut expanded, &mut io::sink()) {
        return Err(expanded
            .refusal
            .take()
            .unwrap_or_else(|| tar_err("(end)", &e)));
    }
    Ok(Expansion {
        entries,
        skipped_devices,
        tar_bytes: expanded.inner.bytes,
        diff_id: expanded.inner.hasher.map(Digest::from_hasher),
    })
}

fn tar_err(entry: &str, e: &io::Error) -> LayerError {
    LayerError::Tar {
        entry: entry.to_string(),
        message: e.to_string(),
    }
}

/// A path as shown in errors: printable ASCII kept, the rest escaped, cut at 200 bytes.
fn shown(path: &[u8]) -> String {
    let mut out = String::new();
    for &b in path.iter().take(200) {
        if (0x20..0x7f).contains(&b) && b != b'\\' {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    if path.len() > 200 {
        out.push_str("...");
    }
    out
}

/// The components of an entry's path, checked.
fn components<'a>(raw: &'a [u8], limits: &Limits) -> Result<Vec<&'a [u8]>, LayerError> {
    let entry = || shown(raw);
    if raw.len() > limits.max_path {
        return Err(LayerError::PathTooLong {
            entry: entry(),
            len: raw.len(),
            max: limits.max_path,
        });
    }
    if raw.starts_with(b"/") {
        return Err(LayerError::Absolute { entry: entry() });
    }
    let mut out = Vec::new();
    for c in raw.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => return Err(LayerError::ParentDir { entry: entry() }),
            c if c.len() > 255 => {
                return Err(LayerError::PathTooLong {
                    entry: entry(),
                    len: c.len(),
                    max: 255,
                });
            }
            c => out.push(c),
        }
    }
    if out.len() > limits.max_depth {
        return Err(LayerError::TooDeep {
            entry: entry(),
            depth: out.len(),
            max: limits.max_depth,
        });
    }
    Ok(out)
}

fn cstring(name: &[u8]) -> CString {
    // Components come from splitting a tar path, which cannot hold NUL.
    CString::new(name).unwrap_or_default()
}

/// The writer of one layer: the entries seen, the directories whose modes are set last.
struct Writer<'a> {
    root: &'a OwnedFd,
    limits: Limits,
    /// Every path made, and whether it is a directory.
    seen: HashMap<Vec<u8>, bool>,
    /// Directories with their final mode and mtime, applied at the end (a read-only directory
    /// must still take its entries).
    dirs: Vec<(Vec<u8>, u32, i64)>,
    opaque: Vec<Vec<u8>>,
    bytes: u64,
    skipped_devices: usize,
    /// The last parent opened, kept: entries come grouped by directory.
    parent: Option<(Vec<u8>, OwnedFd)>,
    /// What a file's data is copied through.
    buf: Vec<u8>,
}

impl<'a> Writer<'a> {
    fn new(root: &'a OwnedFd, limits: Limits) -> Writer<'a> {
        Writer {
            root,
            limits,
            seen: HashMap::new(),
            dirs: Vec::new(),
            opaque: Vec::new(),
            bytes: 0,
            skipped_devices: 0,
            parent: None,
            buf: vec![0; 256 << 10],
        }
    }

    fn all<R: Read>(&mut self, archive: &mut tar::Archive<R>) -> Result<(), LayerError> {
        let mut last = String::from("(start)");
        let entries = archive.entries().map_err(|e| tar_err(&last, &e))?;
        for (n, entry) in entries.enumerate() {
            if n >= self.limits.max_entries {
                return Err(LayerError::TooManyEntries {
                    max: self.limits.max_entries,
                });
            }
            let mut entry = entry.map_err(|e| tar_err(&format!("after {last}"), &e))?;
            let raw = entry.path_bytes().into_owned();
            last = shown(&raw);
            self.entry(&raw, &mut entry)?;
        }
        Ok(())
    }

    /// Open (making it where missing) the directory of `comps`, never through a link.
    fn open_parent(&mut self, entry: &[u8], comps: &[&[u8]]) -> Result<OwnedFd, LayerError> {
        let key = comps.join(&b'/');
        if let Some((path, fd)) = &self.parent
            && *path == key
        {
            return fd
                .try_clone()
                .map_err(|e| self.write_err(entry, "open", &e));
        }
        let mut dir = self
            .root
            .try_clone()
            .map_err(|e| self.write_err(entry, "open", &e))?;
        for (i, c) in comps.iter().enumerate() {
            let name = cstring(c);
            let through = || LayerError::ThroughLink {
                entry: shown(entry),
                component: shown(&comps[..=i].join(&b'/')),
            };
            dir = match tree::open_dir(&dir, &name) {
                Ok((fd, _)) => fd,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    mkdirat(&dir, name.as_c_str(), Mode::from_bits_truncate(0o755))
                        .map_err(|e| self.write_err(entry, "make a directory", &e.into()))?;
                    let path = comps[..=i].join(&b'/');
                    self.seen.insert(path, true);
                    tree::open_dir(&dir, &name).map_err(|_| through())?.0
                }
                Err(_) => return Err(through()),
            };
        }
        let keep = dir
            .try_clone()
            .map_err(|e| self.write_err(entry, "open", &e))?;
        self.parent = Some((key, keep));
        Ok(dir)
    }

    fn write_err(&self, entry: &[u8], op: &str, e: &io::Error) -> LayerError {
        LayerError::Write {
            entry: shown(entry),
            op: op.to_string(),
            message: e.to_string(),
        }
    }

    fn entry<R: Read>(
        &mut self,
        raw: &[u8],
        entry: &mut tar::Entry<'_, R>,
    ) -> Result<(), LayerError> {
        let shown_entry = || shown(raw);
        let comps = components(raw, &self.limits)?;
        let kind = entry.header().entry_type();
        let Some((&last, parents)) = comps.split_last() else {
            return Ok(()); // `./`: the layer's root itself
        };
        if kind.is_pax_global_extensions() || kind.is_pax_local_extensions() {
            return Ok(());
        }
        // Whiteouts.
        if let Some(hidden) = last.strip_prefix(b".wh.") {
            let dir = self.open_parent(raw, parents)?;
            if hidden == b".wh..opq" {
                crate::sys::fsetxattr(dir.as_raw_fd(), c"user.overlay.opaque", b"y")
                    .map_err(|e| self.write_err(raw, "mark the directory opaque", &e))?;
                self.opaque.push(parents.join(&b'/'));
                return Ok(());
            }
            if hidden.starts_with(b".wh.") {
                return Ok(()); // aufs's own bookkeeping (`.wh..wh.plnk`): not content
            }
            if hidden.is_empty() || hidden == b"." || hidden == b".." {
                return Err(LayerError::ParentDir {
                    entry: shown_entry(),
                });
            }
            let mut path = parents.join(&b'/');
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(hidden);
            self.claim(raw, path, false)?;
            return mknodat(
                &dir,
                cstring(hidden).as_c_str(),
                SFlag::S_IFCHR,
                Mode::empty(),
                0,
            )
            .map_err(|e| self.write_err(raw, "make a whiteout", &e.into()));
        }
        let path = comps.join(&b'/');
        let name = cstring(last);
        let mode = entry.header().mode().unwrap_or(0o644);
        let mtime = entry.header().mtime().unwrap_or(0) as i64;
        if kind.is_dir() {
            if self.seen.get(&path) == Some(&true) {
                self.dirs.push((path, mode, mtime));
                return Ok(());
            }
            let dir = self.open_parent(raw, parents)?;
            self.claim(raw, path.clone(), true)?;
            mkdirat(&dir, name.as_c_str(), Mode::from_bits_truncate(0o700))
                .map_err(|e| self.write_err(raw, "make a directory", &e.into()))?;
            self.dirs.push((path, mode, mtime));
            return Ok(());
        }
        if kind.is_block_special() || kind.is_character_special() {
            if comps.first() == Some(&&b"dev"[..]) {
                // A root filesystem's own /dev (mmdebstrap and debootstrap make one): the
                // sandbox mounts its own /dev over it, so the node is left out, not refused.
                self.skipped_devices += 1;
                return Ok(());
            }
            return Err(LayerError::Device {
                entry: shown_entry(),
            });
        }
        let dir = self.open_parent(raw, parents)?;
        if kind.is_file() || kind.is_contiguous() || kind.is_gnu_sparse() {
            let size = entry.size();
            let max = self.limits.max_bytes;
            if size > max.saturating_sub(self.bytes) {
                return Err(LayerError::TooBig {
                    entry: shown_entry(),
                    size,
                    max,
                });
            }
            self.claim(raw, path, false)?;
            let fd = openat(
                &dir,
                name.as_c_str(),
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o600),
            )
            .map_err(|e| self.write_err(raw, "create the file", &e.into()))?;
            let mut file = std::fs::File::from(fd);
            let mut limited = (&mut *entry).take(size);
            // Through the writer's own buffer: io::copy's 8 KiB would be a write per 8 KiB.
            loop {
                let n = match limited.read(&mut self.buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(tar_err(&shown(raw), &e)),
                };
                file.write_all(&self.buf[..n])
                    .map_err(|e| self.write_err(raw, "write the file", &e))?;
                self.bytes += n as u64;
            }
            // Permission bits only: setuid, setgid and sticky never reach the store.
            fchmod(&file, Mode::from_bits_truncate(mode & 0o777))
                .map_err(|e| self.write_err(raw, "set the mode", &e.into()))?;
            set_mtime(&file, mtime).map_err(|e| self.write_err(raw, "set the time", &e))?;
            return Ok(());
        }
        if kind.is_symlink() {
            let target = entry
                .link_name_bytes()
                .map(|t| t.into_owned())
                .unwrap_or_default();
            if target.is_empty() || target.len() > self.limits.max_path {
                return Err(LayerError::PathTooLong {
                    entry: shown_entry(),
                    len: target.len(),
                    max: self.limits.max_path,
                });
            }
            self.claim(raw, path, false)?;
            let target = CString::new(target).map_err(|_| LayerError::Unsupported {
                entry: shown_entry(),
                kind: b'2',
            })?;
            return nix::unistd::symlinkat(target.as_c_str(), &dir, name.as_c_str())
                .map_err(|e| self.write_err(raw, "make the symbolic link", &e.into()));
        }
        if kind.is_hard_link() {
            let target = entry
                .link_name_bytes()
                .map(|t| t.into_owned())
                .unwrap_or_default();
            let outside = || LayerError::HardLinkOutside {
                entry: shown_entry(),
                target: shown(&target),
            };
            let tcomps = components(&target, &self.limits).map_err(|_| outside())?;
            let tpath = tcomps.join(&b'/');
            if self.seen.get(&tpath) != Some(&false) {
                return Err(outside());
            }
            let Some((&tlast, tparents)) = tcomps.split_last() else {
                return Err(outside());
            };
            let tdir = self.open_parent(&target, tparents)?;
            let dir = self.open_parent(raw, parents)?;
            self.claim(raw, path, false)?;
            return nix::unistd::linkat(
                &tdir,
                cstring(tlast).as_c_str(),
                &dir,
                name.as_c_str(),
                AtFlags::empty(),
            )
            .map_err(|e| self.write_err(raw, "make the hard link", &e.into()));
        }
        if kind.is_fifo() {
            self.claim(raw, path, false)?;
            return mknodat(
                &dir,
                name.as_c_str(),
                SFlag::S_IFIFO,
                Mode::from_bits_truncate(mode & 0o777),
                0,
            )
            .map_err(|e| self.write_err(raw, "make the FIFO", &e.into()));
        }
        Err(LayerError::Unsupported {
            entry: shown_entry(),
            kind: kind.as_byte(),
        })
    }

    /// Record `path` as made, refusing a second entry of the same path.
    fn claim(&mut self, raw: &[u8], path: Vec<u8>, dir: bool) -> Result<(), LayerError> {
        if self.seen.insert(path, dir).is_some() {
            return Err(LayerError::Duplicate { entry: shown(raw) });
        }
        Ok(())
    }

    /// Set the directories' modes and times, deepest first; returns the entry count and the
    /// device nodes left out.
    fn finish(mut self) -> Result<(usize, usize), LayerError> {
        self.parent = None;
        let mut dirs = std::mem::take(&mut self.dirs);
        // The last listing of a directory wins; deepest first, so a parent made read-only
        // last does not stop its children's changes.
        dirs.reverse();
        let mut done = std::collections::HashSet::new();
        dirs.retain(|(p, _, _)| done.insert(p.clone()));
        dirs.sort_by_key(|(p, _, _)| std::cmp::Reverse(p.iter().filter(|&&b| b == b'/').count()));
        for (path, mode, mtime) in dirs {
            let comps: Vec<&[u8]> = path.split(|&b| b == b'/').collect();
            let fd = self.open_parent(&path, &comps)?;
            self.parent = None;
            fchmod(&fd, Mode::from_bits_truncate(mode & 0o1777))
                .map_err(|e| self.write_err(&path, "set the mode", &e.into()))?;
            set_mtime(&fd, mtime).map_err(|e| self.write_err(&path, "set the time", &e))?;
        }
        Ok((self.seen.len(), self.skipped_devices))
    }
}

fn set_mtime(fd: &impl AsFd, mtime: i64) -> io::Result<()> {
    let t = TimeSpec::new(mtime, 0);
    futimens(fd, &t, &t).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn entry_paths_drop_dot_components_and_refuse_climbing_absolute_and_deep_ones() {
        let l = Limits::default();
        assert_eq!(
            components(b"./a//b/./c", &l).unwrap(),
            [&b"a"[..], b"b", b"c"]
        );
        assert!(components(b"./", &l).unwrap().is_empty());
        assert!(matches!(
            components(b"a/../../x", &l),
            Err(LayerError::ParentDir { .. })
        ));
        assert!(matches!(
            components(b"/etc/x", &l),
            Err(LayerError::Absolute { .. })
        ));
        let deep = b"d/".repeat(257);
        assert!(matches!(
            components(&deep, &l),
            Err(LayerError::TooDeep { .. })
        ));
        let long_name = vec![b'n'; 256];
        assert!(matches!(
            components(&long_name, &l),
            Err(LayerError::PathTooLong { .. })
        ));
    }

    #[test]
    fn digest_and_diff_id_are_of_the_blob_and_its_tar_across_chunks_plain_and_gzip() {
        // Files larger than a chunk of the hashing thread, and bytes past the tar's end.
        let data: Vec<u8> = (0..700_000u32).map(|i| (i % 251) as u8).collect();
        let mut builder = tar::Builder::new(Vec::new());
        for name in ["a", "d/b"] {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            builder.append_data(&mut header, name, &data[..]).unwrap();
        }
        let mut tar = builder.into_inner().unwrap();
        tar.extend_from_slice(&[0; 4096]);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&tar).unwrap();
        let gz = gz.finish().unwrap();
        let in_file = |blob: &[u8]| {
            let file = tempfile::tempfile().unwrap();
            std::os::unix::fs::FileExt::write_all_at(&file, blob, 0).unwrap();
            Source::File {
                file,
                offset: 0,
                len: None,
            }
        };
        for (blob, hashing) in [&tar, &gz]
            .into_iter()
            .flat_map(|b| [(b, Hashing::Thread), (b, Hashing::Inline)])
        {
            let dir = tempfile::tempdir().unwrap();
            let root = tree::open_root(dir.path()).unwrap();
            let source = match hashing {
                Hashing::Thread => in_file(blob),
                Hashing::Inline => Source::Stream(&blob[..]),
            };
            let u = unpack(source, &root, Limits::default(), hashing).unwrap();
            assert_eq!(u.digest, Digest::of(blob));
            assert_eq!(u.diff_id, Digest::of(&tar));
            assert_eq!(u.compressed_bytes, blob.len() as u64);
            assert_eq!(u.tar_bytes, tar.len() as u64);
            assert_eq!(std::fs::read(dir.path().join("d/b")).unwrap(), data);
        }
    }

    #[test]
    fn entry_names_in_errors_escape_what_is_not_printable() {
        assert_eq!(shown(b"a\nb\xff\\"), "a\\x0ab\\xff\\x5c");
        assert!(shown(&[b'a'; 300]).ends_with("..."));
    }
}
