//! Writing in the workspace: files replaced atomically (a temporary file beside the target,
//! renamed over it), directories made one at a time through their parent's descriptor, owners
//! and the session clock's times set on what a call makes.

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, renameat};
use nix::sys::stat::{Mode, SFlag, fchmod, fstatat, futimens, mkdirat};
use nix::sys::time::TimeSpec;
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchown, unlinkat};

use super::*;
use crate::tools::ToolError;

use super::resolve::*;

pub(crate) fn timespec(t: SystemTime) -> TimeSpec {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => TimeSpec::new(
            d.as_secs() as libc::time_t,
            d.subsec_nanos() as libc::c_long,
        ),
        Err(e) => {
            let d = e.duration();
            let (mut secs, mut nanos) = (-(d.as_secs() as i64), -(d.subsec_nanos() as i64));
            if nanos < 0 {
                secs -= 1;
                nanos += 1_000_000_000;
            }
            TimeSpec::new(secs as libc::time_t, nanos as libc::c_long)
        }
    }
}

pub(crate) fn require_writable(root: &WorkspaceRoot, what: &str) -> Result<(), ToolError> {
    if root.shape.writable {
        Ok(())
    } else {
        Err(ToolError::permission(format!(
            "no write permission on `{what}`: the workspace is read-only in this session"
        )))
    }
}

pub(crate) fn set_owner(root: &WorkspaceRoot, fd: impl AsFd) -> Result<(), Errno> {
    match root.shape.owner {
        Some((uid, gid)) => fchown(fd, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid))),
        None => Ok(()),
    }
}

/// Best effort: a directory whose entries changed gets `now` too (it may belong to someone
/// else, in which case it keeps the kernel's time).
pub(crate) fn touch_dir(fd: impl AsFd, now: &TimeSpec) {
    if let Err(e) = futimens(fd, now, now) {
        tracing::debug!(errno = %e, "cannot set a directory's times");
    }
}

/// A directory this call created (removed again when the call fails).
#[derive(Debug)]
pub(crate) struct CreatedDir {
    pub(crate) parent: OwnedFd,
    pub(crate) name: OsString,
    pub(crate) fd: OwnedFd,
}

pub(crate) fn remove_dirs(created: Vec<CreatedDir>) {
    for c in created.into_iter().rev() {
        let _ = unlinkat(&c.parent, c.name.as_os_str(), UnlinkatFlags::RemoveDir);
    }
}

/// `mkdir -p` of `rel`, one directory at a time, each made through its parent's descriptor.
pub(crate) fn create_dirs(root: &WorkspaceRoot, rel: &Path) -> Result<Vec<CreatedDir>, Errno> {
    let mut created = Vec::new();
    match create_dirs_into(root, rel, &mut created) {
        Ok(()) => Ok(created),
        Err(e) => {
            remove_dirs(created);
            Err(e)
        }
    }
}

pub(crate) fn create_dirs_into(
    root: &WorkspaceRoot,
    rel: &Path,
    created: &mut Vec<CreatedDir>,
) -> Result<(), Errno> {
    if open_dir(root, rel).is_ok() {
        return Ok(());
    }
    let mut prefix = PathBuf::new();
    for comp in rel.components() {
        let parent_rel = prefix.clone();
        prefix.push(comp);
        match open_dir(root, &prefix) {
            Ok(_) => continue,
            Err(Errno::ENOENT) => {}
            Err(e) => return Err(e),
        }
        let Component::Normal(name) = comp else {
            return Err(Errno::ENOENT);
        };
        let parent = open_dir(root, &parent_rel)?;
        match mkdirat(&parent, name, Mode::from_bits_truncate(0o755)) {
            Ok(()) => {}
            // Made meanwhile by someone else: use it, but it is not ours to own or remove.
            Err(Errno::EEXIST) => continue,
            Err(e) => return Err(e),
        }
        let fd = open_at(
            parent.as_fd(),
            Path::new(name),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW,
            0,
            ONE_NAME,
        )?;
        let c = CreatedDir {
            parent,
            name: name.to_owned(),
            fd,
        };
        let owned = fchmod(&c.fd, Mode::from_bits_truncate(0o755)).and(set_owner(root, &c.fd));
        created.push(c);
        owned?;
    }
    Ok(())
}

/// Check, without creating anything, that the missing directories of `rel` could be made:
/// the part that exists resolves beneath the root and the rest is plain names.
pub(crate) fn check_creatable(root: &WorkspaceRoot, rel: &Path) -> Result<(), Errno> {
    let mut prefix = PathBuf::new();
    let mut comps = rel.components();
    for comp in comps.by_ref() {
        prefix.push(comp);
        match open_dir(root, &prefix) {
            Ok(_) => continue,
            Err(Errno::ENOENT) if matches!(comp, Component::Normal(_)) => {
                return if comps.all(|c| matches!(c, Component::Normal(_))) {
                    Ok(())
                } else {
                    Err(Errno::ENOENT)
                };
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub(crate) static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// A file written under a temporary name beside its target, waiting to be renamed over it.
#[derive(Debug)]
pub(crate) struct Staged {
    pub(crate) dir: OwnedFd,
    pub(crate) tmp: OsString,
    pub(crate) name: OsString,
}

impl Staged {
    pub(crate) fn commit(&self) -> Result<(), Errno> {
        renameat(
            &self.dir,
            self.tmp.as_os_str(),
            &self.dir,
            self.name.as_os_str(),
        )
    }

    pub(crate) fn discard(&self) {
        let _ = unlinkat(&self.dir, self.tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
    }
}

/// Write `content` to a new temporary file in `loc`'s directory with `mode`, the owner and
/// `now` as its times.
pub(crate) fn stage(
    root: &WorkspaceRoot,
    loc: Located,
    content: &[u8],
    mode: u32,
    now: &TimeSpec,
) -> Result<Staged, Errno> {
    let mut attempt = 0;
    let (fd, tmp) = loop {
        let tmp = OsString::from(format!(
            ".envcraft-{}-{}.tmp",
            std::process::id(),
            TMP_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        match open_at(
            loc.dir.as_fd(),
            Path::new(&tmp),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW,
            0o600,
            ONE_NAME,
        ) {
            Ok(fd) => break (fd, tmp),
            Err(Errno::EEXIST) if attempt < 100 => attempt += 1,
            Err(e) => return Err(e),
        }
    };
    let staged = Staged {
        dir: loc.dir,
        tmp,
        name: loc.name,
    };
    let mut file = File::from(fd);
    let written = file
        .write_all(content)
        .map_err(errno)
        .and_then(|()| fchmod(&file, Mode::from_bits_truncate(mode)))
        .and_then(|()| set_owner(root, &file))
        .and_then(|()| futimens(&file, now, now));
    match written {
        Ok(()) => Ok(staged),
        Err(e) => {
            staged.discard();
            Err(e)
        }
    }
}

/// The permission bits of the regular file at `loc` (`None`: nothing there yet).
pub(crate) fn existing_mode(loc: &Located) -> Result<Option<u32>, FsError> {
    match fstatat(&loc.dir, loc.name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => match kind(&st) {
            SFlag::S_IFREG => Ok(Some(st.st_mode & 0o777)),
            SFlag::S_IFDIR => Err(FsError::Os(Errno::EISDIR)),
            _ => Err(FsError::NotRegular),
        },
        Err(Errno::ENOENT) => Ok(None),
        Err(e) => Err(FsError::Os(e)),
    }
}

/// Replace (or create) the file `path` with `content`: parents made as needed, written beside
/// it and renamed over it. Returns whether it was created.
pub(crate) fn replace_file(
    root: &WorkspaceRoot,
    path: &AgentPath,
    content: &[u8],
    now: &TimeSpec,
) -> Result<bool, FsError> {
    let (parent, _) = split_last(&path.rel).ok_or(Errno::EISDIR)?;
    let created = create_dirs(root, &parent)?;
    let result = (|| {
        let loc = locate(root, &path.rel, true)?;
        let mode = existing_mode(&loc)?;
        let staged = stage(root, loc, content, mode.unwrap_or(0o644), now)?;
        if let Err(e) = staged.commit() {
            staged.discard();
            return Err(FsError::Os(e));
        }
        touch_dir(&staged.dir, now);
        Ok(mode.is_none())
    })();
    match result {
        Ok(new) => {
            for c in &created {
                touch_dir(&c.fd, now);
                touch_dir(&c.parent, now);
            }
            Ok(new)
        }
        Err(e) => {
            remove_dirs(created);
            Err(e)
        }
    }
}

pub(crate) fn too_large_to_write(path: &str, len: usize) -> ToolError {
    ToolError::too_large(format!(
        "`{path}` would be {len} bytes, over the {} MiB limit of one write",
        WRITE_MAX_BYTES >> 20
    ))
}
