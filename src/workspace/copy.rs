//! Copies: a template into a private workspace (the fallback without overlayfs), and a run's
//! changed files out to the host (`--keep-changes`).
//!
//! What the agent wrote is hostile input to the host: kept files never keep setuid, setgid or
//! sticky bits, holes stay holes (a 1 GiB sparse file costs the host what it costs the
//! sandbox), and paths too deep to name are listed as not kept instead of failing the run.

use std::fs::{self, File};
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::unistd::{Whence, lseek};

use super::{Changes, WorkspaceError};

fn copy_err(from: &Path, to: &Path) -> impl FnOnce(io::Error) -> WorkspaceError {
    let (from, to) = (from.to_path_buf(), to.to_path_buf());
    move |source| WorkspaceError::Copy { from, to, source }
}

fn read_err(path: &Path) -> impl FnOnce(io::Error) -> WorkspaceError {
    let path = path.to_path_buf();
    move |source| WorkspaceError::Read { path, source }
}

/// Copy a regular file's data ranges only (SEEK_DATA/SEEK_HOLE), so holes stay holes, with
/// `mode` as its permission bits. Data moves through `copy_file_range`, which shares extents
/// (a reflink) where the filesystem can.
fn copy_file_sparse(from: &Path, to: &Path, mode: u32) -> io::Result<u64> {
    let src = File::open(from)?;
    let len = src.metadata()?.len();
    let dst = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(to)?;
    let mut written = 0u64;
    let mut offset: i64 = 0;
    while (offset as u64) < len {
        let data = match lseek(src.as_fd(), offset, Whence::SeekData) {
            Ok(o) => o,
            Err(nix::errno::Errno::ENXIO) => break, // only a hole remains
            Err(e) => return Err(e.into()),
        };
        let hole = lseek(src.as_fd(), data, Whence::SeekHole).map_err(io::Error::from)?;
        written += copy_range(&src, &dst, data, hole)?;
        offset = hole;
    }
    dst.set_len(len)?;
    // The mode given at creation went through the umask; set it exactly.
    fs::set_permissions(to, fs::Permissions::from_mode(mode))?;
    Ok(written)
}

/// Copy bytes `start..end` of `src` to the same place in `dst`: `copy_file_range` (a reflink
/// where the filesystem can), or plain reads and writes between filesystems that refuse it.
fn copy_range(src: &File, dst: &File, start: i64, end: i64) -> io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let (mut off_in, mut off_out) = (start, start);
    while off_in < end {
        let want = (end - off_in) as usize;
        match nix::fcntl::copy_file_range(
            src.as_fd(),
            Some(&mut off_in),
            dst.as_fd(),
            Some(&mut off_out),
            want,
        ) {
            Ok(0) => break,
            Ok(_) => {}
            Err(
                nix::errno::Errno::EXDEV
                | nix::errno::Errno::EINVAL
                | nix::errno::Errno::ENOSYS
                | nix::errno::Errno::EOPNOTSUPP,
            ) => {
                let mut buf = vec![0u8; 256 * 1024];
                while off_in < end {
                    let chunk = ((end - off_in) as usize).min(buf.len());
                    let n = src.read_at(&mut buf[..chunk], off_in as u64)?;
                    if n == 0 {
                        break;
                    }
                    dst.write_all_at(&buf[..n], off_in as u64)?;
                    off_in += n as i64;
                }
                break;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok((off_in - start) as u64)
}

/// Copy a tree preserving file types, permission bits and symlinks (not owners: the copy is the
/// caller's). Devices, sockets and fifos are not part of a workspace and are not copied.
pub fn copy_tree(from: &Path, to: &Path) -> Result<(), WorkspaceError> {
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
            copy_file_sparse(entry.path(), &target, meta.permissions().mode() & 0o7777)
                .map_err(copy_err(entry.path(), &target))?;
        }
    }
    // Directory modes last, so a read-only directory can still be filled.
    for (dir, perms) in dirs.into_iter().rev() {
        fs::set_permissions(&dir, perms).map_err(copy_err(from, &dir))?;
    }
    Ok(())
}

/// What `keep_changes` wrote beside the files: the change list and what could not be kept.
#[derive(serde::Serialize)]
struct KeptList<'a> {
    #[serde(flatten)]
    changes: &'a Changes,
    /// Changed paths that were not copied (too deep to name, or vanished), with the reason.
    not_kept: Vec<(String, String)>,
}

/// Copy the added and modified paths of a run (from its upper layer or copy at `source`) to
/// `out/files/`, and write `out/changes.json`. `out` must be new or empty.
pub fn keep_changes(source: &Path, changes: &Changes, out: &Path) -> Result<(), WorkspaceError> {
    if out.exists() && fs::read_dir(out).map_err(read_err(out))?.next().is_some() {
        return Err(WorkspaceError::KeepTargetNotEmpty(out.to_path_buf()));
    }
    let files = out.join("files");
    fs::create_dir_all(&files).map_err(read_err(out))?;
    let mut not_kept = Vec::new();
    for rel in changes.added.iter().chain(&changes.modified) {
        if let Err(e) = keep_one(&source.join(rel), &files.join(rel)) {
            not_kept.push((rel.clone(), e.to_string()));
        }
    }
    let list = KeptList { changes, not_kept };
    let json = serde_json::to_vec_pretty(&list).map_err(|e| WorkspaceError::Copy {
        from: source.to_path_buf(),
        to: out.join("changes.json"),
        source: io::Error::other(e),
    })?;
    let list_path: PathBuf = out.join("changes.json");
    fs::write(&list_path, json).map_err(copy_err(source, &list_path))?;
    Ok(())
}

fn keep_one(from: &Path, to: &Path) -> io::Result<()> {
    let meta = from.symlink_metadata()?;
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent)?;
    }
    // Never setuid, setgid or sticky on the host.
    let mode = meta.permissions().mode() & 0o777;
    if meta.is_dir() {
        fs::create_dir_all(to)?;
        fs::set_permissions(to, fs::Permissions::from_mode(mode | 0o700))
    } else if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(fs::read_link(from)?, to)
    } else if meta.is_file() {
        copy_file_sparse(from, to, mode).map(|_| ())
    } else {
        Ok(()) // fifos, sockets, devices: nothing to keep
    }
}

/// Copy an overlay upper layer (or a workspace copy) into an empty directory, keeping what
/// overlayfs reads in it: file data (holes kept), permission bits, modification times,
/// symlinks, whiteouts (character devices 0/0) and opaque directories (`user.overlay.opaque`).
/// Used to start a session's fork from its parent's current state. Setuid and setgid bits are
/// kept: the copy stays inside a sandbox (nosuid) and never reaches the host.
pub fn copy_layer(from: &Path, to: &Path) -> Result<(), WorkspaceError> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let opaque = c"user.overlay.opaque";
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
        let mtime = nix::sys::time::TimeSpec::new(meta.mtime(), meta.mtime_nsec());
        let set_times =
            |flags| nix::sys::stat::utimensat(nix::fcntl::AT_FDCWD, &target, &mtime, &mtime, flags);
        if ft.is_dir() {
            fs::create_dir(&target).map_err(copy_err(entry.path(), &target))?;
            let src = File::open(entry.path()).map_err(read_err(entry.path()))?;
            if let Ok(Some(v)) = crate::sys::fgetxattr(src.as_raw_fd(), opaque) {
                let dst = File::open(&target).map_err(read_err(&target))?;
                crate::sys::fsetxattr(dst.as_raw_fd(), opaque, &v)
                    .map_err(copy_err(entry.path(), &target))?;
            }
            dirs.push((target, meta.permissions(), mtime));
        } else if ft.is_symlink() {
            let link = fs::read_link(entry.path()).map_err(read_err(entry.path()))?;
            std::os::unix::fs::symlink(link, &target).map_err(copy_err(entry.path(), &target))?;
            let _ = set_times(nix::sys::stat::UtimensatFlags::NoFollowSymlink);
        } else if ft.is_char_device() && meta.rdev() == 0 {
            nix::sys::stat::mknod(
                &target,
                nix::sys::stat::SFlag::S_IFCHR,
                nix::sys::stat::Mode::empty(),
                0,
            )
            .map_err(|e| copy_err(entry.path(), &target)(e.into()))?;
        } else if ft.is_file() {
            copy_file_sparse(entry.path(), &target, meta.permissions().mode() & 0o7777)
                .map_err(copy_err(entry.path(), &target))?;
            let _ = set_times(nix::sys::stat::UtimensatFlags::FollowSymlink);
        }
    }
    for (dir, perms, mtime) in dirs.into_iter().rev() {
        fs::set_permissions(&dir, perms).map_err(copy_err(from, &dir))?;
        let _ = nix::sys::stat::utimensat(
            nix::fcntl::AT_FDCWD,
            &dir,
            &mtime,
            &mtime,
            nix::sys::stat::UtimensatFlags::FollowSymlink,
        );
    }
    Ok(())
}
