//! The one way envcraft reads and copies a tree the agent controls (an overlay upper layer, a
//! workspace copy): every other module reaches agent-made files through this one or through
//! [`super::diff`] and the manifest walk, which follow the same rules.
//!
//! The rules, each against a move of the agent's made while we read (a `rename` swap of a
//! directory with a symlink, a FIFO put where a file was):
//!
//! - descriptor-relative, one name at a time: each child is opened from its parent's descriptor
//!   with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` and
//!   `O_NOFOLLOW` (or plain `openat` of one `O_NOFOLLOW` name where `openat2` is refused), so no
//!   path is resolved twice and no link is ever followed;
//! - `O_NONBLOCK | O_NOCTTY` on every open of something that may not be a regular file, and
//!   what was opened is judged by `fstat` of its descriptor, never by an earlier `stat`;
//! - the destination side likewise: children are made relative to the destination directory's
//!   descriptor (`mkdirat`, `openat(O_CREAT | O_EXCL | O_NOFOLLOW)`, `symlinkat`, `mknodat`),
//!   then set with `fchmod` and `futimens`;
//! - setuid and setgid bits are dropped on whatever reaches the host ([`Setid::Drop`]);
//! - bounded: at most [`MAX_DEPTH`] levels, [`MAX_ENTRIES`] entries and the caller's byte budget;
//!   what lies past a bound, vanished, or changed type mid-walk is listed in the
//!   [`CopyReport`], never a failure. Only the destination failing (ENOSPC, an existing name) is
//!   an error.

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, readlinkat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};
use nix::sys::time::TimeSpec;
use nix::unistd::{Whence, lseek};

use super::name;

/// How deep a walk or a copy descends; what lies deeper is reported (`incomplete`, skipped).
pub const MAX_DEPTH: usize = 256;

/// The most entries one copy makes; the rest is reported as skipped.
pub const MAX_ENTRIES: usize = 1_000_000;

/// The byte budget of a copy whose caller names none.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 30;

/// Whether setuid and setgid bits survive a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setid {
    /// The copy stays inside a sandbox (nosuid mounts): the bits are kept, as the agent set them.
    Keep,
    /// The copy reaches the host: the bits (and the sticky bit) are dropped.
    Drop,
}

/// What a copy makes of the tree.
#[derive(Debug, Clone, Copy)]
pub struct CopyOptions {
    /// An overlay layer: whiteouts (character devices 0/0), `user.overlay.opaque` and
    /// modification times are kept too.
    pub layer: bool,
    pub setid: Setid,
    /// The most bytes of file data copied in all.
    pub max_bytes: u64,
}

/// What a copy did, and what it did not copy and why (paths encoded as in [`super::name`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyReport {
    pub entries: usize,
    pub bytes: u64,
    pub skipped: Vec<(String, String)>,
}

/// A copy that could not be finished on the destination side.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error("cannot open the tree at {path}")]
    Root {
        path: std::path::PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write {path} ({what}) in the copy")]
    Write {
        path: String,
        what: &'static str,
        #[source]
        source: io::Error,
    },
}

fn write_err<'a>(path: &'a str, what: &'static str) -> impl FnOnce(io::Error) -> TreeError + 'a {
    move |source| TreeError::Write {
        path: path.to_string(),
        what,
        source,
    }
}

fn errno_io(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// Open a tree's root: a path of envcraft's own making (a state directory, or
/// `/proc/self/fd/N` of a descriptor it holds, which is why the path may pass a link).
pub fn open_root(path: &Path) -> Result<OwnedFd, TreeError> {
    nix::fcntl::open(
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| TreeError::Root {
        path: path.to_path_buf(),
        source: errno_io(e),
    })
}

fn valid_name(name: &CStr) -> bool {
    let b = name.to_bytes();
    !b.is_empty() && b != b"." && b != b".." && !b.contains(&b'/')
}

/// Open the child `name` of `dir` with `flags`, never following a link and never leaving
/// `dir`: `openat2` confined beneath `dir`, or, where the kernel or a seccomp filter refuses
/// `openat2`, `openat` of that one `O_NOFOLLOW` name.
pub fn open_child(dir: &impl AsFd, name: &CStr, flags: OFlag) -> io::Result<OwnedFd> {
    if !valid_name(name) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let flags = flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NOCTTY;
    let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    match crate::sys::openat2(dir.as_fd(), name, flags.bits(), 0, resolve) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
            openat(dir, name, flags, Mode::empty()).map_err(errno_io)
        }
        other => other,
    }
}

/// Open the directory `name` in `dir`; its `fstat` must say directory.
pub fn open_dir(dir: &impl AsFd, name: &CStr) -> io::Result<(OwnedFd, FileStat)> {
    let fd = open_child(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NONBLOCK,
    )?;
    let st = fstat(&fd).map_err(errno_io)?;
    if kind(&st) != SFlag::S_IFDIR {
        return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
    }
    Ok((fd, st))
}

/// Open the regular file `name` in `dir` for reading, without blocking on a FIFO put in its
/// place; its `fstat` must say regular file (else `EINVAL`).
pub fn open_file(dir: &impl AsFd, name: &CStr) -> io::Result<(File, FileStat)> {
    let fd = open_child(dir, name, OFlag::O_RDONLY | OFlag::O_NONBLOCK)?;
    let st = fstat(&fd).map_err(errno_io)?;
    if kind(&st) != SFlag::S_IFREG {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file when opened",
        ));
    }
    Ok((File::from(fd), st))
}

/// The target of the symlink `name` in `dir` (never followed).
pub fn read_link(dir: &impl AsFd, name: &CStr) -> io::Result<Vec<u8>> {
    readlinkat(dir, name)
        .map(|t| t.as_bytes().to_vec())
        .map_err(errno_io)
}

/// `lstat` of one child (no link followed): a guess of what it is, to be confirmed on open.
pub fn stat_child(dir: &impl AsFd, name: &CStr) -> Option<FileStat> {
    valid_name(name)
        .then(|| fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).ok())
        .flatten()
}

pub fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT
}

/// The sorted names in a directory (without `.` and `..`), at most `max` of them (the bool
/// says whether some were left out). Read through a descriptor of its own, so `dir`'s offset
/// is untouched.
pub fn names(dir: &impl AsFd, max: usize) -> io::Result<(Vec<CString>, bool)> {
    let own = openat(
        dir,
        c".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno_io)?;
    let mut d = nix::dir::Dir::from_fd(own).map_err(errno_io)?;
    let mut out = Vec::new();
    let mut cut = false;
    for entry in d.iter() {
        let entry = entry.map_err(errno_io)?;
        let n = entry.file_name();
        if n.to_bytes() == b"." || n.to_bytes() == b".." {
            continue;
        }
        if out.len() >= max {
            cut = true;
            break;
        }
        out.push(n.to_owned());
    }
    out.sort();
    Ok((out, cut))
}

/// Copy a regular file's data ranges only (SEEK_DATA/SEEK_HOLE), so holes stay holes, up to
/// `len` bytes (its size when opened: what is appended meanwhile is not chased). Data moves
/// through `copy_file_range`, which shares extents (a reflink) where the filesystem can.
fn copy_data(src: &File, dst: &File, len: u64) -> io::Result<u64> {
    let mut written = 0u64;
    let mut offset: i64 = 0;
    let end = i64::try_from(len).unwrap_or(i64::MAX);
    while offset < end {
        let data = match lseek(src.as_fd(), offset, Whence::SeekData) {
            Ok(o) => o,
            Err(Errno::ENXIO) => break, // only a hole remains
            Err(e) => return Err(errno_io(e)),
        };
        if data >= end {
            break;
        }
        let hole = lseek(src.as_fd(), data, Whence::SeekHole)
            .map_err(errno_io)?
            .min(end);
        written += copy_range(src, dst, data, hole)?;
        offset = hole;
    }
    dst.set_len(len)?;
    Ok(written)
}

/// Copy bytes `start..end` of `src` to the same place in `dst`: `copy_file_range`, or reads
/// and writes between filesystems that refuse it.
fn copy_range(src: &File, dst: &File, start: i64, end: i64) -> io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let (mut off_in, mut off_out) = (start, start);
    while off_in < end {
        let want = usize::try_from(end - off_in).unwrap_or(usize::MAX);
        match nix::fcntl::copy_file_range(
            src.as_fd(),
            Some(&mut off_in),
            dst.as_fd(),
            Some(&mut off_out),
            want,
        ) {
            Ok(0) => break, // shortened meanwhile
            Ok(_) => {}
            Err(Errno::EXDEV | Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP) => {
                let mut buf = vec![0u8; 256 * 1024];
                while off_in < end {
                    let chunk = usize::try_from(end - off_in)
                        .unwrap_or(usize::MAX)
                        .min(buf.len());
                    let n = src.read_at(&mut buf[..chunk], off_in as u64)?;
                    if n == 0 {
                        break;
                    }
                    dst.write_all_at(&buf[..n], off_in as u64)?;
                    off_in += n as i64;
                }
                break;
            }
            Err(e) => return Err(errno_io(e)),
        }
    }
    Ok((off_in - start) as u64)
}

fn mtime(st: &FileStat) -> TimeSpec {
    TimeSpec::new(st.st_mtime, st.st_mtime_nsec)
}

/// Permission bits to give a copy of an entry whose mode is `mode`.
fn copy_mode(mode: u32, setid: Setid) -> u32 {
    match setid {
        Setid::Keep => mode & 0o7777,
        Setid::Drop => mode & 0o777,
    }
}

/// One entry copied (not what is below a directory): what the destination now holds.
pub enum Copied {
    /// A directory, made and open; its mode and times are set by [`finish_dir`].
    Dir {
        dst: OwnedFd,
        src: OwnedFd,
        st: FileStat,
    },
    Other,
}

/// The running totals of one copy, against its bounds.
pub struct Budget {
    pub options: CopyOptions,
    pub report: CopyReport,
}

impl Budget {
    pub fn new(options: CopyOptions) -> Budget {
        Budget {
            options,
            report: CopyReport::default(),
        }
    }

    pub fn skip(&mut self, rel: &str, why: impl Into<String>) {
        self.report.skipped.push((rel.to_string(), why.into()));
    }
}

/// Copy the entry `name` of `src` (at `rel`) into `dst`. A directory is made (mode 0700 until
/// [`finish_dir`]) and both sides returned open; a file, symlink or whiteout is made whole.
/// `Ok(None)` when the entry was skipped (recorded in `budget`).
pub fn copy_entry(
    src: &OwnedFd,
    dst: &OwnedFd,
    name: &CStr,
    rel: &str,
    budget: &mut Budget,
) -> Result<Option<Copied>, TreeError> {
    if budget.report.entries >= MAX_ENTRIES {
        budget.skip(rel, format!("past the bound of {MAX_ENTRIES} entries"));
        return Ok(None);
    }
    let Some(guess) = stat_child(src, name) else {
        budget.skip(rel, "vanished while it was copied");
        return Ok(None);
    };
    let options = budget.options;
    let made = match kind(&guess) {
        SFlag::S_IFDIR => {
            let (sfd, st) = match open_dir(src, name) {
                Ok(found) => found,
                Err(e) => {
                    budget.skip(rel, format!("changed while it was copied: {e}"));
                    return Ok(None);
                }
            };
            // An existing directory (a layer laid over another) is entered, not an error.
            match nix::sys::stat::mkdirat(dst, name, Mode::S_IRWXU) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(write_err(rel, "make the directory")(errno_io(e))),
            }
            let (dfd, _) = open_dir(dst, name).map_err(write_err(rel, "open the directory"))?;
            if options.layer
                && let Ok(Some(v)) = crate::sys::fgetxattr(sfd.as_raw_fd(), c"user.overlay.opaque")
            {
                crate::sys::fsetxattr(dfd.as_raw_fd(), c"user.overlay.opaque", &v)
                    .map_err(write_err(rel, "mark the directory opaque"))?;
            }
            Some(Copied::Dir {
                dst: dfd,
                src: sfd,
                st,
            })
        }
        SFlag::S_IFLNK => {
            let target = match read_link(src, name) {
                Ok(t) => t,
                Err(e) => {
                    budget.skip(rel, format!("changed while it was copied: {e}"));
                    return Ok(None);
                }
            };
            nix::unistd::symlinkat(OsStr::from_bytes(&target), dst, name)
                .map_err(|e| write_err(rel, "make the symlink")(errno_io(e)))?;
            if options.layer {
                let t = mtime(&guess);
                let _ = nix::sys::stat::utimensat(
                    dst,
                    name,
                    &t,
                    &t,
                    nix::sys::stat::UtimensatFlags::NoFollowSymlink,
                );
            }
            Some(Copied::Other)
        }
        SFlag::S_IFREG => {
            let (file, st) = match open_file(src, name) {
                Ok(found) => found,
                Err(e) => {
                    budget.skip(rel, format!("changed while it was copied: {e}"));
                    return Ok(None);
                }
            };
            let len = u64::try_from(st.st_size).unwrap_or(0);
            let left = options.max_bytes.saturating_sub(budget.report.bytes);
            let cost = u64::try_from(st.st_blocks)
                .unwrap_or(0)
                .saturating_mul(512)
                .min(len);
            if cost > left {
                budget.skip(
                    rel,
                    format!("past the bound of {} bytes copied", options.max_bytes),
                );
                return Ok(None);
            }
            let out = open_child(dst, name, OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL)
                .map(File::from)
                .map_err(write_err(rel, "create the file"))?;
            let written = copy_data(&file, &out, len).map_err(write_err(rel, "copy the file"))?;
            budget.report.bytes += written;
            // The mode given at creation went through the umask: set it exactly.
            nix::sys::stat::fchmod(
                &out,
                Mode::from_bits_truncate(copy_mode(st.st_mode, options.setid)),
            )
            .map_err(|e| write_err(rel, "set the file's mode")(errno_io(e)))?;
            if options.layer {
                let t = mtime(&st);
                let _ = nix::sys::stat::futimens(&out, &t, &t);
            }
            Some(Copied::Other)
        }
        SFlag::S_IFCHR if options.layer && guess.st_rdev == 0 => {
            nix::sys::stat::mknodat(dst, name, SFlag::S_IFCHR, Mode::empty(), 0)
                .map_err(|e| write_err(rel, "make the whiteout")(errno_io(e)))?;
            Some(Copied::Other)
        }
        _ => {
            // FIFOs, sockets, devices: not part of a workspace; never opened.
            budget.skip(rel, "not a file, directory or symlink");
            None
        }
    };
    if made.is_some() {
        budget.report.entries += 1;
    }
    Ok(made)
}

/// Give a copied directory its source's permission bits (and, for a layer, its time), once
/// everything below it is made (a read-only directory can still be filled until then).
pub fn finish_dir(
    dst: &OwnedFd,
    st: &FileStat,
    rel: &str,
    options: &CopyOptions,
) -> Result<(), TreeError> {
    nix::sys::stat::fchmod(
        dst,
        Mode::from_bits_truncate(copy_mode(st.st_mode, options.setid)),
    )
    .map_err(|e| write_err(rel, "set the directory's mode")(errno_io(e)))?;
    if options.layer {
        let t = mtime(st);
        let _ = nix::sys::stat::futimens(dst, &t, &t);
    }
    Ok(())
}

/// One directory being copied: both sides open, its sorted names, the next one to copy.
struct Level {
    src: OwnedFd,
    dst: OwnedFd,
    st: Option<FileStat>,
    names: Vec<CString>,
    next: usize,
    rel: String,
    depth: usize,
}

/// Copy everything below `from` into the (empty) directory `to`, by the module's rules. Holds
/// two descriptors per level, so at most `2 × MAX_DEPTH` at once, whatever the tree.
pub fn copy(from: &OwnedFd, to: &OwnedFd, options: CopyOptions) -> Result<CopyReport, TreeError> {
    let mut budget = Budget::new(options);
    let listed = |dir: &OwnedFd, rel: &str, budget: &mut Budget| -> Vec<CString> {
        let room = MAX_ENTRIES.saturating_sub(budget.report.entries);
        match names(dir, room) {
            Ok((names, cut)) => {
                if cut {
                    budget.skip(rel, format!("past the bound of {MAX_ENTRIES} entries"));
                }
                names
            }
            Err(e) => {
                budget.skip(rel, format!("cannot be listed: {e}"));
                Vec::new()
            }
        }
    };
    let dup = |fd: &OwnedFd, path: &str| {
        fd.try_clone().map_err(|source| TreeError::Write {
            path: path.to_string(),
            what: "hold the directory",
            source,
        })
    };
    let top = Level {
        src: dup(from, "")?,
        dst: dup(to, "")?,
        st: None,
        names: listed(from, "", &mut budget),
        next: 0,
        rel: String::new(),
        depth: 0,
    };
    let mut stack = vec![top];
    while let Some(level) = stack.last_mut() {
        let Some(child) = level.names.get(level.next).cloned() else {
            if let Some(done) = stack.pop()
                && let Some(st) = &done.st
            {
                finish_dir(&done.dst, st, &done.rel, &budget.options)?;
            }
            continue;
        };
        level.next += 1;
        let rel = name::join(&level.rel, child.to_bytes());
        let depth = level.depth + 1;
        let copied = copy_entry(&level.src, &level.dst, &child, &rel, &mut budget)?;
        if let Some(Copied::Dir { dst, src, st }) = copied {
            if depth >= MAX_DEPTH {
                budget.skip(&rel, format!("below the bound of {MAX_DEPTH} levels"));
                finish_dir(&dst, &st, &rel, &budget.options)?;
                continue;
            }
            let names = listed(&src, &rel, &mut budget);
            stack.push(Level {
                src,
                dst,
                st: Some(st),
                names,
                next: 0,
                rel,
                depth,
            });
        }
    }
    Ok(budget.report)
}

/// Copy the given paths (encoded, `/`-separated, sorted or not) of the tree `from` into `to`,
/// each entry alone (a directory without what is below it; list that too), making the
/// directories on the way (mode 0755 where the path's own parent is not listed). A path that
/// cannot be reached in `from` by directories alone is skipped and reported.
pub fn copy_paths(
    from: &OwnedFd,
    to: &OwnedFd,
    paths: &[String],
    options: CopyOptions,
) -> Result<CopyReport, TreeError> {
    let mut budget = Budget::new(options);
    let mut sorted: Vec<&String> = paths.iter().collect();
    sorted.sort();
    sorted.dedup();
    // The directories of the previous path, both sides open: (name, src, dst).
    let mut chain: Vec<(Vec<u8>, OwnedFd, OwnedFd)> = Vec::new();
    // Directories copied, to get their modes once the rest is made (deepest first).
    let mut made_dirs: Vec<(OwnedFd, FileStat, String)> = Vec::new();
    for rel in sorted {
        let raw = name::decode(rel);
        let parts: Vec<&[u8]> = raw.split(|b| *b == b'/').collect();
        let Some((last, parents)) = parts.split_last() else {
            continue;
        };
        if parents.len() + 1 > MAX_DEPTH {
            budget.skip(rel, format!("below the bound of {MAX_DEPTH} levels"));
            continue;
        }
        let common = chain
            .iter()
            .zip(parents.iter())
            .take_while(|((n, _, _), p)| n.as_slice() == **p)
            .count();
        chain.truncate(common);
        let mut reached = true;
        for part in &parents[common..] {
            let Ok(cname) = CString::new(*part) else {
                reached = false;
                break;
            };
            let (src_parent, dst_parent) = match chain.last() {
                Some((_, s, d)) => (s, d),
                None => (from, to),
            };
            let Ok((sfd, _)) = open_dir(src_parent, &cname) else {
                reached = false;
                break;
            };
            match nix::sys::stat::mkdirat(
                dst_parent,
                cname.as_c_str(),
                Mode::from_bits_truncate(0o755),
            ) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(write_err(rel, "make a parent directory")(errno_io(e))),
            }
            // The name may have been kept as something else (a symlink, when the tree moved
            // after its change list was read): then this path is not kept.
            let dfd = match open_dir(dst_parent, &cname) {
                Ok((fd, _)) => fd,
                Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                    reached = false;
                    break;
                }
                Err(e) => return Err(write_err(rel, "open a parent directory")(e)),
            };
            chain.push((part.to_vec(), sfd, dfd));
        }
        let cname = CString::new(*last).ok().filter(|c| valid_name(c));
        let (Some(cname), true) = (cname, reached) else {
            budget.skip(rel, "its directory changed or vanished while it was copied");
            continue;
        };
        let (src_parent, dst_parent) = match chain.last() {
            Some((_, s, d)) => (s, d),
            None => (from, to),
        };
        // A directory listed after one of its descendants (it cannot be, sorted) or a
        // parent made above already exists: keep it, give it its own mode below.
        if let Some(st) = stat_child(dst_parent, &cname)
            && kind(&st) == SFlag::S_IFDIR
        {
            if let (Ok((sfd, sst)), Ok((dfd, _))) =
                (open_dir(src_parent, &cname), open_dir(dst_parent, &cname))
            {
                drop(sfd);
                made_dirs.push((dfd, sst, rel.clone()));
            }
            continue;
        }
        if let Some(Copied::Dir { dst, st, .. }) =
            copy_entry(src_parent, dst_parent, &cname, rel, &mut budget)?
        {
            made_dirs.push((dst, st, rel.clone()));
        }
        if made_dirs.len() > MAX_DEPTH {
            // Directories are set as they come, in bulk; a kept directory stays writable by
            // its owner, so the order does not matter here.
            for (fd, st, rel) in made_dirs.drain(..) {
                finish_kept_dir(&fd, &st, &rel, &budget.options)?;
            }
        }
    }
    for (fd, st, rel) in made_dirs.drain(..) {
        finish_kept_dir(&fd, &st, &rel, &budget.options)?;
    }
    Ok(budget.report)
}

/// A kept directory's mode: its own bits, plus the owner's, so what was copied can be read and
/// removed by whoever kept it.
fn finish_kept_dir(
    dst: &OwnedFd,
    st: &FileStat,
    rel: &str,
    options: &CopyOptions,
) -> Result<(), TreeError> {
    let mut st = *st;
    st.st_mode |= 0o700;
    finish_dir(dst, &st, rel, options)
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
