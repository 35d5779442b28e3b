//! Bounded walks of the workspace for `glob` and `grep`: never following a symbolic link,
//! at most [`WALK_MAX_ENTRIES`] entries per directory and [`WALK_MAX_DEPTH`] levels.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, SFlag, fstatat};

use super::*;
use crate::tools::ToolError;

use super::resolve::*;

/// The names in a directory (without `.` and `..`), unsorted, at most [`WALK_MAX_ENTRIES`]
/// (an agent can make a directory of millions).
pub(crate) fn dir_names(dir: &mut nix::dir::Dir) -> Vec<OsString> {
    dir.iter()
        .filter_map(|e| e.ok())
        .map(|e| OsStr::from_bytes(e.file_name().to_bytes()).to_owned())
        .filter(|n| n != "." && n != "..")
        .take(WALK_MAX_ENTRIES)
        .collect()
}

/// What a walk found: workspace-relative paths with their status, and whether it saw all.
pub(crate) struct Walked {
    pub(crate) found: Vec<(PathBuf, FileStat)>,
    pub(crate) complete: bool,
}

/// Walk the tree under the directory `base` (which must resolve beneath the root), never
/// following a symbolic link, at most `max_depth` levels down, keeping what `keep` accepts.
/// Each directory is opened beneath the root with `O_NOFOLLOW` on its last component.
pub(crate) fn walk(
    root: &WorkspaceRoot,
    base: &Path,
    max_depth: usize,
    skip_dir: impl Fn(&OsStr) -> bool,
    mut keep: impl FnMut(&Path, &FileStat) -> bool,
) -> Result<Walked, Errno> {
    let mut found = Vec::new();
    let mut complete = true;
    let mut seen = 0usize;
    let mut stack = vec![(base.to_path_buf(), 0usize, open_dir(root, base)?)];
    while let Some((rel, depth, fd)) = stack.pop() {
        let Ok(mut dir) = nix::dir::Dir::from_fd(fd) else {
            complete = false;
            continue;
        };
        for name in dir_names(&mut dir) {
            seen += 1;
            if seen > WALK_MAX_ENTRIES {
                return Ok(Walked {
                    found,
                    complete: false,
                });
            }
            let Ok(st) = fstatat(&dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) else {
                continue;
            };
            let child = rel.join(&name);
            if keep(&child, &st) {
                found.push((child.clone(), st));
            }
            if kind(&st) == SFlag::S_IFDIR && !skip_dir(&name) {
                if depth + 1 >= max_depth {
                    complete = false;
                    continue;
                }
                match open_at(
                    root.dir(),
                    &child,
                    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW,
                    0,
                    BENEATH,
                ) {
                    Ok(fd) => stack.push((child, depth + 1, fd)),
                    Err(_) => complete = false,
                }
            }
        }
    }
    Ok(Walked { found, complete })
}

pub(crate) fn has_glob_meta(s: &OsStr) -> bool {
    s.as_bytes()
        .iter()
        .any(|b| matches!(b, b'*' | b'?' | b'[' | b']' | b'{' | b'}' | b'\\'))
}

pub(crate) fn compile_glob(pattern: &str, field: &str) -> Result<GlobMatcher, ToolError> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| {
            ToolError::invalid_argument(format!("`{field}` is not a valid glob pattern: {e}"))
        })
}
