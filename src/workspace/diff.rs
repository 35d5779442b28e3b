//! The change list of a workspace, computed by walking its upper layer (or its full copy)
//! beside the template, with directory file descriptors rather than full paths.
//!
//! What the agent builds can be deeper than PATH_MAX, so no path handed to the kernel here is
//! longer than one name: each directory is opened relative to its parent's descriptor. The walk
//! is iterative (no recursion to overflow) and stops descending at [`MAX_DEPTH`] levels; a
//! directory it did not descend into is listed under `incomplete`, so a run can never hide its
//! changes by making the report fail.

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::fcntl::{AtFlags, OFlag, openat, readlinkat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstatat};

use super::{Changes, WorkspaceError};
use crate::sys;

/// How deep the walk descends; below, directories are reported as `incomplete`.
pub const MAX_DEPTH: usize = 256;

/// What the walked tree is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// An overlay upper layer: it holds only what changed; whiteouts and opaque directories
    /// record deletions.
    Upper,
    /// A full copy of the template: whatever of the template it lacks was deleted.
    Copy,
}

fn open_dir(parent: impl AsFd, name: &CStr) -> nix::Result<OwnedFd> {
    openat(
        parent,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

fn open_root(path: &Path) -> Result<OwnedFd, WorkspaceError> {
    nix::fcntl::open(
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| WorkspaceError::Read {
        path: path.to_path_buf(),
        source: e.into(),
    })
}

fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT
}

fn is_dir(st: &FileStat) -> bool {
    kind(st) == SFlag::S_IFDIR
}

fn is_whiteout(st: &FileStat) -> bool {
    kind(st) == SFlag::S_IFCHR && st.st_rdev == 0
}

/// The sorted names in a directory (without `.` and `..`).
fn names(dir: &OwnedFd) -> nix::Result<Vec<CString>> {
    let dup = dir
        .try_clone()
        .map_err(|e| nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
    let mut d = nix::dir::Dir::from_fd(dup)?;
    let mut out: Vec<CString> = d
        .iter()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_owned())
        .filter(|n| n.as_bytes() != b"." && n.as_bytes() != b"..")
        .collect();
    out.sort();
    Ok(out)
}

fn stat_at(dir: &OwnedFd, name: &CStr) -> Option<FileStat> {
    fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).ok()
}

fn is_opaque(dir: &OwnedFd) -> bool {
    [c"user.overlay.opaque", c"trusted.overlay.opaque"]
        .iter()
        .any(|name| matches!(sys::fgetxattr(dir.as_raw_fd(), name), Ok(Some(v)) if v == b"y"))
}

fn same_content(a: &OwnedFd, a_name: &CStr, b: &OwnedFd, b_name: &CStr) -> std::io::Result<bool> {
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut fa = File::from(openat(a, a_name, flags, Mode::empty())?);
    let mut fb = File::from(openat(b, b_name, flags, Mode::empty())?);
    let (mut ba, mut bb) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        let n = fa.read(&mut ba)?;
        if n == 0 {
            return Ok(fb.read(&mut bb[..1])? == 0);
        }
        fb.read_exact(&mut bb[..n])?;
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
    }
}

/// Whether two non-directory entries differ in type, permission bits, link target or content.
fn differs(
    upper: &OwnedFd,
    name: &CStr,
    ust: &FileStat,
    lower: &OwnedFd,
    lst: &FileStat,
) -> std::io::Result<bool> {
    if kind(ust) != kind(lst) || ust.st_mode & 0o7777 != lst.st_mode & 0o7777 {
        return Ok(true);
    }
    match kind(ust) {
        SFlag::S_IFLNK => Ok(readlinkat(upper, name)? != readlinkat(lower, name)?),
        SFlag::S_IFREG => {
            Ok(ust.st_size != lst.st_size || !same_content(upper, name, lower, name)?)
        }
        _ => Ok(false),
    }
}

fn join(prefix: &str, name: &CStr) -> String {
    let name = OsStr::from_bytes(name.to_bytes()).to_string_lossy();
    if prefix.is_empty() {
        name.into_owned()
    } else {
        format!("{prefix}/{name}")
    }
}

/// Every path below a template directory (the template is trusted: ordinary depth).
fn all_below(lower: &OwnedFd, name: &CStr, rel: &str, out: &mut Vec<String>) {
    let Ok(dir) = open_dir(lower, name) else {
        return;
    };
    let mut stack = vec![(dir, rel.to_string(), 0usize)];
    while let Some((dir, rel, depth)) = stack.pop() {
        for child in names(&dir).unwrap_or_default() {
            let path = join(&rel, &child);
            let sub = stat_at(&dir, &child)
                .filter(is_dir)
                .and_then(|_| open_dir(&dir, &child).ok());
            out.push(path.clone());
            if let Some(sub) = sub
                && depth < MAX_DEPTH
            {
                stack.push((sub, path, depth + 1));
            }
        }
    }
}

/// One directory being walked: the upper (or copy) side and, while the template has the same
/// directory, the template side.
struct Frame {
    upper: OwnedFd,
    lower: Option<OwnedFd>,
    rel: String,
    depth: usize,
}

/// The changes recorded in `tree` (an upper layer or a copy) over `lower`.
pub fn changes(tree: &Path, lower: &Path, layer: Layer) -> Result<Changes, WorkspaceError> {
    let mut changes = Changes::default();
    let mut stack = vec![Frame {
        upper: open_root(tree)?,
        lower: Some(open_root(lower)?),
        rel: String::new(),
        depth: 0,
    }];
    while let Some(frame) = stack.pop() {
        let entries = names(&frame.upper).map_err(|e| WorkspaceError::Read {
            path: tree.join(&frame.rel),
            source: e.into(),
        })?;
        if layer == Layer::Copy
            && let Some(lower) = &frame.lower
        {
            for name in names(lower).unwrap_or_default() {
                if entries.binary_search(&name).is_err() {
                    let rel = join(&frame.rel, &name);
                    changes.deleted.push(rel.clone());
                    if stat_at(lower, &name).is_some_and(|st| is_dir(&st)) {
                        all_below(lower, &name, &rel, &mut changes.deleted);
                    }
                }
            }
        }
        for name in entries {
            let rel = join(&frame.rel, &name);
            let Some(ust) = stat_at(&frame.upper, &name) else {
                continue;
            };
            let lst = frame.lower.as_ref().and_then(|l| stat_at(l, &name));
            if layer == Layer::Upper && is_whiteout(&ust) {
                if let (Some(l), Some(lst)) = (&frame.lower, &lst) {
                    changes.deleted.push(rel.clone());
                    if is_dir(lst) {
                        all_below(l, &name, &rel, &mut changes.deleted);
                    }
                }
                continue;
            }
            let lower_is_dir = lst.as_ref().is_some_and(is_dir);
            if is_dir(&ust) {
                let sub = open_dir(&frame.upper, &name).map_err(|e| WorkspaceError::Read {
                    path: tree.join(&frame.rel),
                    source: e.into(),
                })?;
                let sub_lower = match (&frame.lower, lower_is_dir) {
                    (Some(l), true) => open_dir(l, &name).ok(),
                    _ => None,
                };
                match (&lst, lower_is_dir) {
                    (None, _) => changes.added.push(rel.clone()),
                    (Some(_), false) => changes.modified.push(rel.clone()),
                    (Some(lst), true) => {
                        // A directory whose permission bits alone changed (chmod, or removed
                        // and made again with another mode) is modified too.
                        if ust.st_mode & 0o7777 != lst.st_mode & 0o7777 {
                            changes.modified.push(rel.clone());
                        }
                        if layer == Layer::Upper && is_opaque(&sub) {
                            // The template's directory was replaced: what the upper one
                            // lacks is gone.
                            if let (Some(l), Some(_)) = (&frame.lower, &sub_lower) {
                                let mut below = Vec::new();
                                all_below(l, &name, &rel, &mut below);
                                for path in below {
                                    let inner = &path[rel.len() + 1..];
                                    let Ok(c) = CString::new(inner) else { continue };
                                    if fstatat(&sub, c.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
                                        .is_err()
                                    {
                                        changes.deleted.push(path);
                                    }
                                }
                            }
                        }
                    }
                }
                let child_lower = if layer == Layer::Upper && is_opaque(&sub) {
                    None
                } else {
                    sub_lower
                };
                if frame.depth + 1 >= MAX_DEPTH {
                    changes.incomplete.push(rel);
                    continue;
                }
                stack.push(Frame {
                    upper: sub,
                    lower: child_lower,
                    rel,
                    depth: frame.depth + 1,
                });
                continue;
            }
            match (&frame.lower, &lst) {
                (Some(l), Some(lst)) if is_dir(lst) => {
                    changes.modified.push(rel.clone());
                    all_below(l, &name, &rel, &mut changes.deleted);
                }
                (Some(l), Some(lst)) => {
                    let changed = differs(&frame.upper, &name, &ust, l, lst).map_err(|source| {
                        WorkspaceError::Read {
                            path: tree.join(&frame.rel),
                            source,
                        }
                    })?;
                    if changed {
                        changes.modified.push(rel);
                    }
                }
                _ => changes.added.push(rel),
            }
        }
    }
    changes.sort();
    Ok(changes)
}
