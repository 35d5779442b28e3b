//! The upload rules: a client's tar (plain, gzip or zstd) checked whole, then written beneath a
//! directory of the workspace, all or nothing.
//!
//! Two passes over the same buffered body. The first ([`super::check`]) reads every header and
//! writes nothing. The second ([`Writing`]) makes the directories that are missing and writes every
//! file and link under a temporary name beside its target; then each is swapped in
//! (`renameat2`: `RENAME_EXCHANGE` over what is there, `RENAME_NOREPLACE` where nothing is),
//! and what was there is removed last. A failure at any step undoes the steps before it: the
//! swaps exchanged back, the temporary names removed, the directories made removed.
//!
//! Every name is opened from the workspace's descriptor by `openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`: a symbolic link on the way (one the agent made, or
//! swapped in meanwhile) refuses the upload, it is never passed.

use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};
use std::sync::atomic::Ordering;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, RenameFlags, renameat2};
use nix::sys::stat::{Mode, SFlag, fchmod, fstatat, futimens, mkdirat};
use nix::sys::time::TimeSpec;
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchownat, linkat, symlinkat, unlinkat};

use super::check::{Plan, Planned, check, depth_error, expanded, tar_error};
use super::{TransferLimits, Uploaded, shown};
use crate::tools::ToolError;
use crate::tools::fs::resolve::{Access, FsError, fs_error, kind, open_at, parse_path};
use crate::tools::fs::writing::{TMP_SEQ, require_writable, set_owner};
use crate::tools::fs::{ONE_NAME, WorkspaceRoot};

/// See [`super::Session::upload`].
pub(super) fn upload(
    root: &WorkspaceRoot,
    raw: &str,
    body: &[u8],
    limits: TransferLimits,
) -> Result<Uploaded, ToolError> {
    let dir = parse_path(root, raw)?;
    require_writable(root, &dir.raw)?;
    let mut base = Vec::new();
    for comp in dir.rel.components() {
        match comp {
            Component::Normal(name) => base.push(name.as_bytes().to_vec()),
            _ => {
                return Err(ToolError::permission(format!(
                    "`{}`: `..` is refused in an upload's directory",
                    dir.raw
                )));
            }
        }
    }
    if base.len() > limits.max_depth {
        return Err(depth_error(&dir.raw, base.len(), limits.max_depth));
    }
    let plan = check(body, &base, limits)?;
    let mut writing = Writing {
        root,
        made_dirs: Vec::new(),
        known_dirs: HashMap::new(),
        staged: Vec::new(),
        swapped: 0,
    };
    let written = writing
        .ensure_dir(&base, None)
        .and_then(|()| writing.stage_all(body, &plan, limits))
        .and_then(|()| writing.swap_in());
    match written {
        Ok(()) => {
            writing.finish();
            Ok(Uploaded {
                path: dir.shown(),
                entries: plan.written,
                bytes: plan.bytes,
            })
        }
        Err(e) => {
            writing.undo();
            Err(e)
        }
    }
}

/// A file or link written under a temporary name in `dir`, to be swapped in as `name`.
#[derive(Debug)]
struct Staged {
    /// The directory, workspace-relative.
    dir: Vec<u8>,
    tmp: CString,
    name: CString,
    /// Something is at `name` (it is exchanged, then removed).
    replaces: bool,
}

/// The second pass, and what it did (to be undone on failure).
struct Writing<'a> {
    root: &'a WorkspaceRoot,
    /// Directories made (workspace-relative, in the order made) and their final mode and time.
    made_dirs: Vec<(Vec<u8>, u32, u64)>,
    /// Directories known to be there (index into `made_dirs` when this upload made them).
    known_dirs: HashMap<Vec<u8>, Option<usize>>,
    staged: Vec<Staged>,
    /// How many of `staged` are swapped in.
    swapped: usize,
}

fn rel_path(key: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(key))
}

fn cname(name: &[u8]) -> Result<CString, ToolError> {
    CString::new(name).map_err(|_| ToolError::invalid_argument("a name holds a NUL byte"))
}

impl Writing<'_> {
    /// A directory of the workspace (workspace-relative), opened with no link on the way.
    fn open(&self, key: &[u8]) -> Result<OwnedFd, Errno> {
        open_at(
            self.root.dir(),
            rel_path(key),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY,
            0,
            ONE_NAME,
        )
    }

    /// The agent-safe message of a failed step on workspace path `key`.
    fn fail(&self, e: Errno, key: &[u8]) -> ToolError {
        let path = shown(key);
        match e {
            Errno::ELOOP => ToolError::permission(format!(
                "the upload is refused: `{path}` passes a symbolic link in the workspace: an \
                 upload never goes through one"
            )),
            Errno::ENOTDIR => ToolError::invalid_argument(format!(
                "the upload is refused: `{path}` is in the way: it is not a directory in the \
                 workspace"
            )),
            Errno::ENOSPC | Errno::EDQUOT => ToolError::too_large(format!(
                "the upload is refused: the workspace is full (the policy's workspace_size) at \
                 `{path}`; nothing was kept"
            )),
            e => {
                let e = fs_error(FsError::Os(e), &path, Access::Write);
                ToolError::new(e.category, format!("the upload is refused: {}", e.message))
            }
        }
    }

    /// Make every missing directory of `path`, one name at a time; `last` gives the mode and
    /// time of the last one when the tar has an entry for it.
    fn ensure_dir(&mut self, path: &[Vec<u8>], last: Option<(u32, u64)>) -> Result<(), ToolError> {
        for i in 0..=path.len() {
            let key = path[..i].join(&b'/');
            if let Some(&known) = self.known_dirs.get(&key) {
                if i == path.len()
                    && let (Some(index), Some((mode, mtime))) = (known, last)
                {
                    self.made_dirs[index].1 = mode;
                    self.made_dirs[index].2 = mtime;
                }
                continue;
            }
            match self.open(&key) {
                Ok(_) => {
                    self.known_dirs.insert(key, None);
                    continue;
                }
                Err(Errno::ENOENT) if i > 0 => {}
                Err(e) => return Err(self.fail(e, &key)),
            }
            let parent_key = path[..i - 1].join(&b'/');
            let parent = self
                .open(&parent_key)
                .map_err(|e| self.fail(e, &parent_key))?;
            let name = cname(&path[i - 1])?;
            mkdirat(&parent, name.as_c_str(), Mode::from_bits_truncate(0o700))
                .map_err(|e| self.fail(e, &key))?;
            let (mode, mtime) = match last {
                Some(given) if i == path.len() => given,
                _ => (0o755, 0),
            };
            self.made_dirs.push((key.clone(), mode, mtime));
            self.known_dirs
                .insert(key.clone(), Some(self.made_dirs.len() - 1));
            let fd = self.open(&key).map_err(|e| self.fail(e, &key))?;
            set_owner(self.root, &fd).map_err(|e| self.fail(e, &key))?;
        }
        Ok(())
    }

    /// The directory of `path` (made where missing), its key, and what is at `path` now.
    fn place(&mut self, path: &[Vec<u8>]) -> Result<(OwnedFd, Vec<u8>, CString, bool), ToolError> {
        let (name, parent) = path.split_last().ok_or_else(|| {
            ToolError::internal("the upload is refused: an entry without a name was planned")
        })?;
        self.ensure_dir(parent, None)?;
        let key = parent.join(&b'/');
        let dir = self.open(&key).map_err(|e| self.fail(e, &key))?;
        let name = cname(name)?;
        let replaces = match fstatat(&dir, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) if kind(&st) == SFlag::S_IFDIR => {
                return Err(ToolError::invalid_argument(format!(
                    "the upload is refused: `{}` is a directory in the workspace: a file or link \
                     cannot replace it",
                    shown(&path.join(&b'/'))
                )));
            }
            Ok(_) => true,
            Err(Errno::ENOENT) => false,
            Err(e) => return Err(self.fail(e, &path.join(&b'/'))),
        };
        Ok((dir, key, name, replaces))
    }

    /// A fresh temporary name in `dir`, made by `make` (which fails with `EEXIST` on a clash).
    fn temporary(
        &self,
        key: &[u8],
        mut make: impl FnMut(&CString) -> Result<(), Errno>,
    ) -> Result<CString, ToolError> {
        for _ in 0..100 {
            let tmp = CString::new(format!(
                ".envcraft-upload-{}-{}.tmp",
                std::process::id(),
                TMP_SEQ.fetch_add(1, Ordering::Relaxed)
            ))
            .map_err(|_| ToolError::internal("a temporary name holds a NUL byte"))?;
            match make(&tmp) {
                Ok(()) => return Ok(tmp),
                Err(Errno::EEXIST) => continue,
                Err(e) => return Err(self.fail(e, key)),
            }
        }
        Err(self.fail(Errno::EEXIST, key))
    }

    /// The second pass: the tar read again, every entry made as the first pass planned it.
    fn stage_all(
        &mut self,
        body: &[u8],
        plan: &Plan,
        limits: TransferLimits,
    ) -> Result<(), ToolError> {
        let (input, passed) = expanded(body, limits.max_bytes)?;
        let mut archive = tar::Archive::new(input);
        let entries = archive
            .entries()
            .map_err(|e| tar_error(passed.get(), limits.max_bytes, 0, &e))?;
        // Where each file of the upload was staged, for its hard links.
        let mut files: HashMap<Vec<u8>, usize> = HashMap::new();
        for (index, (entry, planned)) in entries.zip(&plan.entries).enumerate() {
            let mut entry =
                entry.map_err(|e| tar_error(passed.get(), limits.max_bytes, index, &e))?;
            match planned {
                Planned::Skip => {}
                Planned::Dir { path, mode, mtime } => {
                    self.ensure_dir(path, Some((*mode, *mtime)))?
                }
                Planned::File { path, mode, mtime } => {
                    let (dir, key, name, replaces) = self.place(path)?;
                    let full = path.join(&b'/');
                    let mut made = None;
                    let tmp = self.temporary(&full, |tmp| {
                        let fd = open_at(
                            dir.as_fd(),
                            rel_path(tmp.as_bytes()),
                            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW,
                            0o600,
                            ONE_NAME,
                        )?;
                        made = Some(fd);
                        Ok(())
                    })?;
                    self.staged.push(Staged {
                        dir: key,
                        tmp,
                        name,
                        replaces,
                    });
                    files.insert(full.clone(), self.staged.len() - 1);
                    let mut file = std::fs::File::from(made.ok_or_else(|| {
                        ToolError::internal("the upload is refused: a file was not made")
                    })?);
                    io::copy(&mut entry, &mut file).map_err(|e| {
                        if passed.get() {
                            tar_error(true, limits.max_bytes, index, &e)
                        } else {
                            self.fail(crate::tools::fs::resolve::errno(e), &full)
                        }
                    })?;
                    let t = TimeSpec::new(*mtime as libc::time_t, 0);
                    fchmod(&file, Mode::from_bits_truncate(*mode))
                        .and_then(|()| set_owner(self.root, &file))
                        .and_then(|()| futimens(&file, &t, &t))
                        .map_err(|e| self.fail(e, &full))?;
                }
                Planned::Symlink { path, target } => {
                    let (dir, key, name, replaces) = self.place(path)?;
                    let full = path.join(&b'/');
                    let target = cname(target)?;
                    let tmp = self.temporary(&full, |tmp| {
                        symlinkat(target.as_c_str(), &dir, tmp.as_c_str())
                    })?;
                    self.staged.push(Staged {
                        dir: key,
                        tmp: tmp.clone(),
                        name,
                        replaces,
                    });
                    if let Some((uid, gid)) = self.root.owner() {
                        fchownat(
                            &dir,
                            tmp.as_c_str(),
                            Some(Uid::from_raw(uid)),
                            Some(Gid::from_raw(gid)),
                            AtFlags::AT_SYMLINK_NOFOLLOW,
                        )
                        .map_err(|e| self.fail(e, &full))?;
                    }
                }
                Planned::HardLink { path, target } => {
                    let (dir, key, name, replaces) = self.place(path)?;
                    let full = path.join(&b'/');
                    let first = files.get(target).copied().ok_or_else(|| {
                        ToolError::internal(
                            "the upload is refused: a hard link's file was not made",
                        )
                    })?;
                    let from_key = self.staged[first].dir.clone();
                    let from_tmp = self.staged[first].tmp.clone();
                    let from = self.open(&from_key).map_err(|e| self.fail(e, &from_key))?;
                    let tmp = self.temporary(&full, |tmp| {
                        linkat(
                            &from,
                            from_tmp.as_c_str(),
                            &dir,
                            tmp.as_c_str(),
                            AtFlags::empty(),
                        )
                    })?;
                    self.staged.push(Staged {
                        dir: key,
                        tmp,
                        name,
                        replaces,
                    });
                    files.insert(full, self.staged.len() - 1);
                }
            }
        }
        Ok(())
    }

    /// Swap every staged entry in, in order.
    fn swap_in(&mut self) -> Result<(), ToolError> {
        for i in 0..self.staged.len() {
            let s = &self.staged[i];
            let full = [s.dir.as_slice(), s.name.as_bytes()].join(&b'/');
            let dir = self.open(&s.dir).map_err(|e| self.fail(e, &s.dir))?;
            let flags = if s.replaces {
                RenameFlags::RENAME_EXCHANGE
            } else {
                RenameFlags::RENAME_NOREPLACE
            };
            renameat2(&dir, s.tmp.as_c_str(), &dir, s.name.as_c_str(), flags).map_err(|e| {
                match e {
                    // Made, or removed, by the agent since it was looked at.
                    Errno::EEXIST | Errno::ENOENT => ToolError::invalid_argument(format!(
                        "the upload is refused: `{}` changed in the workspace while the upload \
                         was written; nothing was kept",
                        shown(&full)
                    )),
                    e => self.fail(e, &full),
                }
            })?;
            self.swapped = i + 1;
        }
        Ok(())
    }

    /// Done: what was replaced is removed, the directories made get their modes and times.
    fn finish(&mut self) {
        for s in self.staged.iter().filter(|s| s.replaces) {
            if let Ok(dir) = self.open(&s.dir) {
                let _ = unlinkat(&dir, s.tmp.as_c_str(), UnlinkatFlags::NoRemoveDir);
            }
        }
        for (key, mode, mtime) in self.made_dirs.iter().rev() {
            if let Ok(fd) = self.open(key) {
                let t = TimeSpec::new(*mtime as libc::time_t, 0);
                let _ = fchmod(&fd, Mode::from_bits_truncate(*mode));
                if *mtime > 0 {
                    let _ = futimens(&fd, &t, &t);
                }
            }
        }
    }

    /// Failed: every step undone, last first (best effort: what cannot be undone is logged).
    fn undo(&mut self) {
        for s in self.staged[..self.swapped].iter().rev() {
            let Ok(dir) = self.open(&s.dir) else {
                tracing::warn!("an upload's swap cannot be undone: its directory is gone");
                continue;
            };
            let back = if s.replaces {
                renameat2(
                    &dir,
                    s.tmp.as_c_str(),
                    &dir,
                    s.name.as_c_str(),
                    RenameFlags::RENAME_EXCHANGE,
                )
            } else {
                renameat2(
                    &dir,
                    s.name.as_c_str(),
                    &dir,
                    s.tmp.as_c_str(),
                    RenameFlags::RENAME_NOREPLACE,
                )
            };
            if let Err(e) = back {
                tracing::warn!(errno = %e, "an upload's swap cannot be undone");
            }
        }
        for s in &self.staged {
            if let Ok(dir) = self.open(&s.dir) {
                let _ = unlinkat(&dir, s.tmp.as_c_str(), UnlinkatFlags::NoRemoveDir);
            }
        }
        for (key, _, _) in self.made_dirs.iter().rev() {
            let (parent, name) = match key.iter().rposition(|&b| b == b'/') {
                Some(at) => (&key[..at], &key[at + 1..]),
                None => (&b""[..], &key[..]),
            };
            if let (Ok(dir), Ok(name)) = (self.open(parent), CString::new(name)) {
                let _ = unlinkat(&dir, name.as_c_str(), UnlinkatFlags::RemoveDir);
            }
        }
    }
}
