//! Copy-on-write workspaces: what changed, read from the overlay's upper layer, and the copy
//! used where overlayfs is refused.
//!
//! The upper layer *is* the diff (DESIGN.md, principle 3): a regular file, directory or symlink
//! there was added or modified; a character device 0/0 is a whiteout (the lower path was
//! deleted); a directory with the `user.overlay.opaque` xattr replaced the lower directory of the
//! same name (everything below it in the lower layer that is not in the upper one was deleted).
//! Only the lower paths named by the upper layer are looked at, never the whole template.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::sys;

/// Paths (relative to the workspace root, `/`-separated, sorted) that a run changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Changes {
    pub added: Vec<String>,
    pub modified: Vec<String>,
    pub deleted: Vec<String>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.deleted.is_empty()
    }

    fn sort(&mut self) {
        for list in [&mut self.added, &mut self.modified, &mut self.deleted] {
            list.sort();
            list.dedup();
        }
    }
}

/// Why the workspace could not be read, copied or kept.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot copy {from} to {to}")]
    Copy {
        from: PathBuf,
        to: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("--keep-changes target {0} exists and is not an empty directory")]
    KeepTargetNotEmpty(PathBuf),
}

fn read_err(path: &Path) -> impl FnOnce(io::Error) -> WorkspaceError + '_ {
    move |source| WorkspaceError::Read {
        path: path.to_path_buf(),
        source,
    }
}

fn rel_string(rel: &Path) -> String {
    rel.to_string_lossy().into_owned()
}

fn is_whiteout(meta: &fs::Metadata) -> bool {
    meta.file_type().is_char_device() && meta.rdev() == 0
}

fn is_opaque(path: &Path) -> bool {
    let Ok(cpath) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    ["user.overlay.opaque", "trusted.overlay.opaque"]
        .iter()
        .any(|name| {
            let Ok(cname) = CString::new(*name) else {
                return false;
            };
            matches!(sys::lgetxattr(&cpath, &cname), Ok(Some(v)) if v == b"y")
        })
}

/// Whether two non-directory entries differ in type, mode, link target or content.
fn differs(a: &Path, a_meta: &fs::Metadata, b: &Path, b_meta: &fs::Metadata) -> io::Result<bool> {
    let (ta, tb) = (a_meta.file_type(), b_meta.file_type());
    if ta.is_symlink() || tb.is_symlink() {
        return Ok(!(ta.is_symlink() && tb.is_symlink() && fs::read_link(a)? == fs::read_link(b)?));
    }
    if ta.is_file() != tb.is_file()
        || a_meta.permissions().mode() & 0o7777 != b_meta.permissions().mode() & 0o7777
        || a_meta.len() != b_meta.len()
    {
        return Ok(true);
    }
    if !ta.is_file() {
        return Ok(false);
    }
    same_content(a, b).map(|same| !same)
}

fn same_content(a: &Path, b: &Path) -> io::Result<bool> {
    use std::io::Read;
    let (mut fa, mut fb) = (fs::File::open(a)?, fs::File::open(b)?);
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

/// Every path below `dir` (relative to `base`), for listing a deleted directory's content.
fn all_below(base: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), WorkspaceError> {
    for entry in walkdir::WalkDir::new(dir).min_depth(1).sort_by_file_name() {
        let entry = entry.map_err(|e| WorkspaceError::Read {
            path: dir.to_path_buf(),
            source: e.into(),
        })?;
        if let Ok(rel) = entry.path().strip_prefix(base) {
            out.push(rel_string(rel));
        }
    }
    Ok(())
}

/// The changes recorded in an overlay upper layer over `lower`.
pub fn changes_from_upper(upper: &Path, lower: &Path) -> Result<Changes, WorkspaceError> {
    let mut changes = Changes::default();
    let mut walker = walkdir::WalkDir::new(upper)
        .min_depth(1)
        .sort_by_file_name()
        .into_iter();
    while let Some(entry) = walker.next() {
        let entry = entry.map_err(|e| WorkspaceError::Read {
            path: upper.to_path_buf(),
            source: e.into(),
        })?;
        let Ok(rel) = entry.path().strip_prefix(upper) else {
            continue;
        };
        let meta = entry
            .path()
            .symlink_metadata()
            .map_err(read_err(entry.path()))?;
        let lower_path = lower.join(rel);
        let lower_meta = lower_path.symlink_metadata().ok();
        if is_whiteout(&meta) {
            if let Some(lm) = &lower_meta {
                changes.deleted.push(rel_string(rel));
                if lm.is_dir() {
                    all_below(lower, &lower_path, &mut changes.deleted)?;
                }
            }
            continue;
        }
        match (&lower_meta, meta.is_dir()) {
            (None, _) => changes.added.push(rel_string(rel)),
            (Some(lm), true) if lm.is_dir() => {
                if is_opaque(entry.path()) {
                    // The lower directory was replaced: whatever is not in the upper is gone.
                    let mut below = Vec::new();
                    all_below(lower, &lower_path, &mut below)?;
                    for path in below {
                        if upper.join(&path).symlink_metadata().is_err() {
                            changes.deleted.push(path);
                        }
                    }
                }
            }
            (Some(lm), true) => {
                // A file replaced by a directory.
                let _ = lm;
                changes.modified.push(rel_string(rel));
            }
            (Some(lm), false) => {
                if lm.is_dir() {
                    changes.modified.push(rel_string(rel));
                    all_below(lower, &lower_path, &mut changes.deleted)?;
                } else if differs(entry.path(), &meta, &lower_path, lm)
                    .map_err(read_err(entry.path()))?
                {
                    changes.modified.push(rel_string(rel));
                }
            }
        }
        if meta.is_dir() && lower_meta.as_ref().is_some_and(|m| !m.is_dir()) {
            // Everything under a directory that replaced a file is new.
            let mut below = Vec::new();
            all_below(upper, entry.path(), &mut below)?;
            changes.added.extend(below);
            walker.skip_current_dir();
        }
    }
    changes.sort();
    Ok(changes)
}

/// The changes between a template and a full copy of it (the fallback without overlayfs).
pub fn changes_between(lower: &Path, copy: &Path) -> Result<Changes, WorkspaceError> {
    let mut changes = Changes::default();
    for entry in walkdir::WalkDir::new(copy).min_depth(1).sort_by_file_name() {
        let entry = entry.map_err(|e| WorkspaceError::Read {
            path: copy.to_path_buf(),
            source: e.into(),
        })?;
        let Ok(rel) = entry.path().strip_prefix(copy) else {
            continue;
        };
        let meta = entry
            .path()
            .symlink_metadata()
            .map_err(read_err(entry.path()))?;
        let lower_path = lower.join(rel);
        match lower_path.symlink_metadata() {
            Err(_) => changes.added.push(rel_string(rel)),
            Ok(lm) if lm.is_dir() && meta.is_dir() => {}
            Ok(lm) if lm.is_dir() != meta.is_dir() => changes.modified.push(rel_string(rel)),
            Ok(lm) => {
                if differs(entry.path(), &meta, &lower_path, &lm).map_err(read_err(entry.path()))? {
                    changes.modified.push(rel_string(rel));
                }
            }
        }
    }
    for entry in walkdir::WalkDir::new(lower)
        .min_depth(1)
        .sort_by_file_name()
    {
        let entry = entry.map_err(|e| WorkspaceError::Read {
            path: lower.to_path_buf(),
            source: e.into(),
        })?;
        if let Ok(rel) = entry.path().strip_prefix(lower)
            && copy.join(rel).symlink_metadata().is_err()
        {
            changes.deleted.push(rel_string(rel));
        }
    }
    changes.sort();
    Ok(changes)
}

/// Copy a tree preserving file types, modes and symlinks (not owners: the copy belongs to the
/// caller). File data goes through `std::fs::copy`, which uses `copy_file_range` and so shares
/// extents (a reflink) where the filesystem can.
pub fn copy_tree(from: &Path, to: &Path) -> Result<(), WorkspaceError> {
    let copy_err = |f: &Path, t: &Path| {
        let (f, t) = (f.to_path_buf(), t.to_path_buf());
        move |source| WorkspaceError::Copy {
            from: f,
            to: t,
            source,
        }
    };
    fs::create_dir_all(to).map_err(copy_err(from, to))?;
    let mut dirs = Vec::new();
    for entry in walkdir::WalkDir::new(from).min_depth(1).sort_by_file_name() {
        let entry = entry.map_err(|e| WorkspaceError::Read {
            path: from.to_path_buf(),
            source: e.into(),
        })?;
        let Ok(rel) = entry.path().strip_prefix(from) else {
            continue;
        };
        let target = to.join(rel);
        let meta = entry
            .path()
            .symlink_metadata()
            .map_err(read_err(entry.path()))?;
        let ft = meta.file_type();
        if ft.is_dir() {
            fs::create_dir(&target).map_err(copy_err(entry.path(), &target))?;
            dirs.push((target, meta.permissions()));
        } else if ft.is_symlink() {
            let link = fs::read_link(entry.path()).map_err(read_err(entry.path()))?;
            std::os::unix::fs::symlink(link, &target).map_err(copy_err(entry.path(), &target))?;
        } else if ft.is_file() {
            fs::copy(entry.path(), &target).map_err(copy_err(entry.path(), &target))?;
        }
        // Devices, sockets and fifos are not part of a workspace and are not copied.
    }
    // Directory modes last, so a read-only directory can still be filled.
    for (dir, perms) in dirs.into_iter().rev() {
        fs::set_permissions(&dir, perms).map_err(copy_err(from, &dir))?;
    }
    Ok(())
}

/// Copy the changed paths of a workspace (from its upper layer or copy) to `out`, with a
/// `changes.json` listing added, modified and deleted paths (deletions have no file to copy).
pub fn keep_changes(source: &Path, changes: &Changes, out: &Path) -> Result<(), WorkspaceError> {
    if out.exists() && fs::read_dir(out).map_err(read_err(out))?.next().is_some() {
        return Err(WorkspaceError::KeepTargetNotEmpty(out.to_path_buf()));
    }
    let files = out.join("files");
    fs::create_dir_all(&files).map_err(read_err(out))?;
    for rel in changes.added.iter().chain(&changes.modified) {
        let from = source.join(rel);
        let to = files.join(rel);
        let Ok(meta) = from.symlink_metadata() else {
            continue;
        };
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent).map_err(copy_err_simple(&from, &to))?;
        }
        if meta.is_dir() {
            fs::create_dir_all(&to).map_err(copy_err_simple(&from, &to))?;
        } else if meta.file_type().is_symlink() {
            let link = fs::read_link(&from).map_err(read_err(&from))?;
            std::os::unix::fs::symlink(link, &to).map_err(copy_err_simple(&from, &to))?;
        } else if meta.is_file() {
            fs::copy(&from, &to).map_err(copy_err_simple(&from, &to))?;
        }
    }
    let json = serde_json::to_vec_pretty(changes).map_err(|e| WorkspaceError::Copy {
        from: source.to_path_buf(),
        to: out.join("changes.json"),
        source: io::Error::other(e),
    })?;
    fs::write(out.join("changes.json"), json).map_err(copy_err_simple(source, out))?;
    Ok(())
}

fn copy_err_simple<'a>(
    from: &'a Path,
    to: &'a Path,
) -> impl FnOnce(io::Error) -> WorkspaceError + 'a {
    move |source| WorkspaceError::Copy {
        from: from.to_path_buf(),
        to: to.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn changes_between_a_template_and_its_copy() {
        let dir = tempfile::tempdir().unwrap();
        let (lower, copy) = (dir.path().join("lower"), dir.path().join("copy"));
        write(&lower.join("keep.txt"), "same");
        write(&lower.join("edit.txt"), "old");
        write(&lower.join("gone/a.txt"), "a");
        copy_tree(&lower, &copy).unwrap();
        assert!(changes_between(&lower, &copy).unwrap().is_empty());
        write(&copy.join("edit.txt"), "new");
        write(&copy.join("new/b.txt"), "b");
        fs::remove_dir_all(copy.join("gone")).unwrap();
        let changes = changes_between(&lower, &copy).unwrap();
        assert_eq!(changes.added, vec!["new", "new/b.txt"]);
        assert_eq!(changes.modified, vec!["edit.txt"]);
        assert_eq!(changes.deleted, vec!["gone", "gone/a.txt"]);
    }

    #[test]
    fn an_upper_file_with_the_lower_content_is_not_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let (lower, upper) = (dir.path().join("lower"), dir.path().join("upper"));
        write(&lower.join("a.txt"), "same");
        write(&upper.join("a.txt"), "same");
        write(&upper.join("b.txt"), "new");
        let changes = changes_from_upper(&upper, &lower).unwrap();
        assert_eq!(changes.added, vec!["b.txt"]);
        assert!(changes.modified.is_empty());
    }

    #[test]
    fn copy_tree_keeps_symlinks_and_modes() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("from"), dir.path().join("to"));
        write(&from.join("x.sh"), "#!/bin/sh\n");
        fs::set_permissions(from.join("x.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("x.sh", from.join("link")).unwrap();
        copy_tree(&from, &to).unwrap();
        assert_eq!(fs::read_link(to.join("link")).unwrap(), Path::new("x.sh"));
        let mode = fs::metadata(to.join("x.sh")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
    }

    #[test]
    fn keep_changes_refuses_a_non_empty_target() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("out/x"), "x");
        let err = keep_changes(dir.path(), &Changes::default(), &dir.path().join("out"));
        assert!(matches!(err, Err(WorkspaceError::KeepTargetNotEmpty(_))));
    }
}
