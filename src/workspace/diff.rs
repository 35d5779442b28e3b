//! The change list of a workspace, computed by walking its upper layer (or its full copy)
//! beside the template, with directory file descriptors rather than full paths.
//!
//! What the agent builds can be deeper than PATH_MAX, so no path handed to the kernel here is
//! longer than one name: each entry is opened relative to its parent's descriptor, by the rules
//! of [`super::tree`] (no link followed, `O_NONBLOCK` and an `fstat` check on every open). The
//! walk is iterative (no recursion to overflow), holds one descriptor per level and side, and
//! stops descending at [`MAX_DEPTH`] levels or [`tree::MAX_ENTRIES`] entries; a directory it did
//! not read whole is listed under `incomplete`. An entry that vanishes or changes type while it
//! is read (the agent's processes may still run) is listed as changed: no tree an agent builds,
//! and no move it makes, can make the report fail. Names are written as [`super::name`] says.

use std::ffi::{CStr, CString};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use nix::sys::stat::{FileStat, SFlag};

use super::name;
use super::tree::{self, kind, names, open_dir, open_file, read_link, stat_child};
use super::{Changes, WorkspaceError};
use crate::sys;

/// How deep the walk descends; below, directories are reported as `incomplete`.
pub const MAX_DEPTH: usize = tree::MAX_DEPTH;

/// What the walked tree is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// An overlay upper layer: it holds only what changed; whiteouts and opaque directories
    /// record deletions.
    Upper,
    /// A full copy of the template: whatever of the template it lacks was deleted.
    Copy,
}

fn open_root(path: &Path) -> Result<OwnedFd, WorkspaceError> {
    nix::fcntl::open(
        path,
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| WorkspaceError::Read {
        path: path.to_path_buf(),
        source: e.into(),
    })
}

fn is_dir(st: &FileStat) -> bool {
    kind(st) == SFlag::S_IFDIR
}

fn is_whiteout(st: &FileStat) -> bool {
    kind(st) == SFlag::S_IFCHR && st.st_rdev == 0
}

fn is_opaque(dir: &OwnedFd) -> bool {
    [c"user.overlay.opaque", c"trusted.overlay.opaque"]
        .iter()
        .any(|name| matches!(sys::fgetxattr(dir.as_raw_fd(), name), Ok(Some(v)) if v == b"y"))
}

/// Whether two regular files hold the same bytes. Either side that is no longer a regular
/// file when opened (a FIFO swapped in: opened without blocking, judged by `fstat`) differs.
fn same_content(a: &OwnedFd, b: &OwnedFd, name: &CStr) -> bool {
    let (Ok((mut fa, _)), Ok((mut fb, _))) = (open_file(a, name), open_file(b, name)) else {
        return false;
    };
    let (mut ba, mut bb) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        let Ok(n) = fa.read(&mut ba) else {
            return false;
        };
        if n == 0 {
            return matches!(fb.read(&mut bb[..1]), Ok(0));
        }
        if fb.read_exact(&mut bb[..n]).is_err() || ba[..n] != bb[..n] {
            return false;
        }
    }
}

/// Whether two non-directory entries differ in type, permission bits, link target or content;
/// what cannot be read as it was stated (it moved meanwhile) differs.
fn differs(upper: &OwnedFd, name: &CStr, ust: &FileStat, lower: &OwnedFd, lst: &FileStat) -> bool {
    if kind(ust) != kind(lst) || ust.st_mode & 0o7777 != lst.st_mode & 0o7777 {
        return true;
    }
    match kind(ust) {
        SFlag::S_IFLNK => match (read_link(upper, name), read_link(lower, name)) {
            (Ok(a), Ok(b)) => a != b,
            _ => true,
        },
        SFlag::S_IFREG => ust.st_size != lst.st_size || !same_content(upper, lower, name),
        _ => false,
    }
}

/// Every path below a template directory (the template is trusted: ordinary depth).
fn all_below(lower: &OwnedFd, name: &CStr, rel: &str, out: &mut Vec<String>) {
    let Ok((dir, _)) = open_dir(lower, name) else {
        return;
    };
    let mut stack = vec![(dir, rel.to_string(), 0usize)];
    while let Some((dir, rel, depth)) = stack.pop() {
        let (children, _) = names(&dir, tree::MAX_ENTRIES).unwrap_or_default();
        for child in children {
            let path = name::join(&rel, child.to_bytes());
            let sub = stat_child(&dir, &child)
                .filter(is_dir)
                .and_then(|_| open_dir(&dir, &child).ok());
            out.push(path.clone());
            if let Some((sub, _)) = sub
                && depth < MAX_DEPTH
            {
                stack.push((sub, path, depth + 1));
            }
        }
    }
}

/// One directory being walked: the upper (or copy) side, while the template has the same
/// directory the template side, and the names still to look at.
struct Level {
    upper: OwnedFd,
    lower: Option<OwnedFd>,
    names: Vec<CString>,
    next: usize,
    rel: String,
    depth: usize,
}

/// The walk's running state: what it found, and how many entries it has listed.
struct Walk {
    changes: Changes,
    layer: Layer,
    seen: usize,
}

impl Walk {
    /// Start reading the directory `upper` (at `rel`): its names, and the deletions a copy
    /// shows by lacking what the template has. A directory that cannot be listed whole is
    /// incomplete.
    fn level(
        &mut self,
        upper: OwnedFd,
        lower: Option<OwnedFd>,
        rel: String,
        depth: usize,
    ) -> Level {
        let room = tree::MAX_ENTRIES.saturating_sub(self.seen);
        let names = match names(&upper, room) {
            Ok((names, cut)) => {
                if cut {
                    self.changes.incomplete.push(rel.clone());
                }
                names
            }
            Err(_) => {
                self.changes.incomplete.push(rel.clone());
                Vec::new()
            }
        };
        self.seen += names.len();
        if self.layer == Layer::Copy
            && let Some(lower) = &lower
        {
            for name in names_of(lower) {
                if names.binary_search(&name).is_err() {
                    let path = name::join(&rel, name.to_bytes());
                    self.changes.deleted.push(path.clone());
                    if stat_child(lower, &name).is_some_and(|st| is_dir(&st)) {
                        all_below(lower, &name, &path, &mut self.changes.deleted);
                    }
                }
            }
        }
        Level {
            upper,
            lower,
            names,
            next: 0,
            rel,
            depth,
        }
    }

    /// Look at one entry of `level`; the level of a directory to descend into, if any.
    fn visit(&mut self, level: &Level, name: &CStr) -> Option<Level> {
        let rel = name::join(&level.rel, name.to_bytes());
        let ust = stat_child(&level.upper, name)?; // vanished: nothing there to list
        let lst = level.lower.as_ref().and_then(|l| stat_child(l, name));
        let lower = level.lower.as_ref();
        if self.layer == Layer::Upper && is_whiteout(&ust) {
            if let (Some(l), Some(lst)) = (lower, &lst) {
                self.changes.deleted.push(rel.clone());
                if is_dir(lst) {
                    all_below(l, name, &rel, &mut self.changes.deleted);
                }
            }
            return None;
        }
        let lower_is_dir = lst.as_ref().is_some_and(is_dir);
        if !is_dir(&ust) {
            match (lower, &lst) {
                (Some(l), Some(lst)) if is_dir(lst) => {
                    self.changes.modified.push(rel.clone());
                    all_below(l, name, &rel, &mut self.changes.deleted);
                }
                (Some(l), Some(lst)) => {
                    if differs(&level.upper, name, &ust, l, lst) {
                        self.changes.modified.push(rel);
                    }
                }
                _ => self.changes.added.push(rel),
            }
            return None;
        }
        // A directory; what is opened must still be one (else it moved: listed as changed).
        let Ok((sub, ust)) = open_dir(&level.upper, name) else {
            match &lst {
                None => self.changes.added.push(rel),
                Some(_) => self.changes.modified.push(rel),
            }
            return None;
        };
        let sub_lower = match (lower, lower_is_dir) {
            (Some(l), true) => open_dir(l, name).ok().map(|(fd, _)| fd),
            _ => None,
        };
        let opaque = self.layer == Layer::Upper && is_opaque(&sub);
        match (&lst, lower_is_dir) {
            (None, _) => self.changes.added.push(rel.clone()),
            (Some(_), false) => self.changes.modified.push(rel.clone()),
            (Some(lst), true) => {
                // A directory whose permission bits alone changed (chmod, or removed and made
                // again with another mode) is modified too.
                if ust.st_mode & 0o7777 != lst.st_mode & 0o7777 {
                    self.changes.modified.push(rel.clone());
                }
                if opaque && let (Some(l), Some(_)) = (lower, &sub_lower) {
                    // The template's directory was replaced: what the upper one lacks is gone.
                    let mut below = Vec::new();
                    all_below(l, name, &rel, &mut below);
                    for path in below {
                        let inner = name::decode(&path[rel.len() + 1..]).into_owned();
                        if !present_below(&sub, &inner) {
                            self.changes.deleted.push(path);
                        }
                    }
                }
            }
        }
        if level.depth + 1 >= MAX_DEPTH {
            self.changes.incomplete.push(rel);
            return None;
        }
        let child_lower = if opaque { None } else { sub_lower };
        Some(self.level(sub, child_lower, rel, level.depth + 1))
    }
}

/// Whether the `/`-separated `inner` path exists below `dir`, reached by directories alone.
fn present_below(dir: &OwnedFd, inner: &[u8]) -> bool {
    let parts: Vec<&[u8]> = inner.split(|b| *b == b'/').collect();
    let Some((last, parents)) = parts.split_last() else {
        return false;
    };
    let mut held: Option<OwnedFd> = None;
    for part in parents {
        let Ok(c) = CString::new(*part) else {
            return false;
        };
        let parent = held.as_ref().unwrap_or(dir);
        match open_dir(parent, &c) {
            Ok((fd, _)) => held = Some(fd),
            Err(_) => return false,
        }
    }
    let Ok(c) = CString::new(*last) else {
        return false;
    };
    stat_child(held.as_ref().unwrap_or(dir), &c).is_some()
}

fn names_of(dir: &OwnedFd) -> Vec<CString> {
    names(dir, tree::MAX_ENTRIES)
        .map(|(n, _)| n)
        .unwrap_or_default()
}

/// The changes recorded in `tree` (an upper layer or a copy) over `lower`. Only the two roots
/// (paths this process trusts) failing to open is an error.
pub fn changes(tree: &Path, lower: &Path, layer: Layer) -> Result<Changes, WorkspaceError> {
    let mut walk = Walk {
        changes: Changes::default(),
        layer,
        seen: 0,
    };
    let top = walk.level(open_root(tree)?, Some(open_root(lower)?), String::new(), 0);
    let mut stack = vec![top];
    while let Some(level) = stack.last_mut() {
        let Some(name) = level.names.get(level.next).cloned() else {
            stack.pop();
            continue;
        };
        level.next += 1;
        let Some(level) = stack.last() else { break };
        if let Some(sub) = walk.visit(level, &name) {
            stack.push(sub);
        }
    }
    walk.changes.sort();
    Ok(walk.changes)
}
