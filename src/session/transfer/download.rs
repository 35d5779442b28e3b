//! A download: a tar of a file or directory of the workspace, walked one name at a time from
//! descriptors, refused whole past its bounds (never a truncated tar presented as complete).

use std::ffi::{CStr, CString, OsStr};
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::errno::Errno;
use nix::sys::stat::{FileStat, SFlag};

use super::{Downloaded, TransferLimits};
use crate::tools::ToolError;
use crate::tools::fs::WorkspaceRoot;
use crate::tools::fs::resolve::{
    Access, FsError, errno, fs_error, open_dir, open_regular_directly, parse_path,
};
use crate::workspace::tree;

/// See [`super::Session::download`].
pub(super) fn download(
    root: &WorkspaceRoot,
    raw: &str,
    limits: TransferLimits,
) -> Result<Downloaded, ToolError> {
    let path = parse_path(root, raw)?;
    let mut out = Archive {
        builder: tar::Builder::new(Vec::new()),
        limits,
        entries: 0,
        skipped: 0,
        shown: path.raw.clone(),
    };
    let kind = match open_dir(root, &path.rel) {
        Ok(dir) => {
            let st = nix::sys::stat::fstat(&dir).map_err(|e| read_error(e, &path.raw))?;
            out.walk(&dir, &st, &mut Vec::new(), 0)?;
            "directory"
        }
        Err(Errno::ENOTDIR) => {
            let Some((file, st)) = open_regular_directly(root, &path.rel) else {
                return Err(ToolError::invalid_argument(format!(
                    "`{}` is neither a regular file nor a directory (or a link that leads out of \
                     the workspace): only those are downloaded",
                    path.raw
                )));
            };
            let name = path
                .rel
                .file_name()
                .map(|n| n.as_bytes().to_vec())
                .unwrap_or_else(|| b"file".to_vec());
            out.file(file, &st, &name)?;
            "file"
        }
        Err(e) => return Err(read_error(e, &path.raw)),
    };
    let (entries, skipped) = (out.entries, out.skipped);
    let tar = out
        .builder
        .into_inner()
        .map_err(|e| ToolError::internal(format!("cannot finish the tar: {e}")))?;
    Ok(Downloaded {
        tar,
        kind,
        entries,
        skipped,
    })
}

fn read_error(e: Errno, path: &str) -> ToolError {
    fs_error(FsError::Os(e), path, Access::Read)
}

/// A download being written.
struct Archive {
    builder: tar::Builder<Vec<u8>>,
    limits: TransferLimits,
    entries: usize,
    skipped: usize,
    /// The path the client gave, for messages.
    shown: String,
}

impl Archive {
    fn too_large(&self, what: String) -> ToolError {
        ToolError::too_large(format!(
            "`{}` is too large to download: {what}; nothing was sent: download a part of it",
            self.shown
        ))
    }

    /// Count one more entry, refusing past the bound.
    fn count(&mut self) -> Result<(), ToolError> {
        self.entries += 1;
        if self.entries > self.limits.max_entries {
            return Err(self.too_large(format!(
                "more than {} entries (the transfer's entry bound)",
                self.limits.max_entries
            )));
        }
        Ok(())
    }

    /// Bytes of tar written so far.
    fn written(&self) -> u64 {
        self.builder.get_ref().len() as u64
    }

    /// Refuse when `more` bytes (and a header) would pass the bytes bound.
    fn room_for(&self, more: u64) -> Result<u64, ToolError> {
        let room = self
            .limits
            .max_bytes
            .saturating_sub(self.written())
            .saturating_sub(1536);
        if more > room {
            return Err(self.too_large(format!(
                "more than {} bytes of tar (the transfer's bytes bound)",
                self.limits.max_bytes
            )));
        }
        Ok(room)
    }

    fn header(&self, st: &FileStat, kind: tar::EntryType, size: u64) -> tar::Header {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        // Permission bits only (and the sticky bit of a directory): setuid and setgid never
        // leave the sandbox.
        let keep = if kind == tar::EntryType::Directory {
            0o1777
        } else {
            0o777
        };
        header.set_mode(st.st_mode & keep);
        header.set_mtime(st.st_mtime.max(0) as u64);
        header.set_uid(0);
        header.set_gid(0);
        header.set_size(size);
        header
    }

    fn append(
        &mut self,
        header: &mut tar::Header,
        name: &[u8],
        data: &[u8],
    ) -> Result<(), ToolError> {
        self.builder
            .append_data(header, Path::new(OsStr::from_bytes(name)), data)
            .map_err(|e| ToolError::internal(format!("cannot write the tar: {e}")))?;
        self.room_for(0).map(|_| ())
    }

    /// One regular file, read whole (at most the room left, plus one byte to notice more: a
    /// file that grows while it is read is measured by what was read).
    fn file(&mut self, file: std::fs::File, st: &FileStat, name: &[u8]) -> Result<(), ToolError> {
        self.count()?;
        let room = self.room_for(st.st_size.max(0) as u64)?;
        let mut data = Vec::with_capacity(st.st_size.max(0) as usize);
        file.take(room.saturating_add(1))
            .read_to_end(&mut data)
            .map_err(|e| read_error(errno(e), &self.shown))?;
        self.room_for(data.len() as u64)?;
        let mut header = self.header(st, tar::EntryType::Regular, data.len() as u64);
        self.append(&mut header, name, &data)
    }

    /// The directory `dir` (at `prefix`, `depth` names below the downloaded one): its own
    /// entry (not for the top one), then its children, sorted.
    fn walk(
        &mut self,
        dir: &OwnedFd,
        st: &FileStat,
        prefix: &mut Vec<u8>,
        depth: usize,
    ) -> Result<(), ToolError> {
        if depth > self.limits.max_depth {
            return Err(self.too_large(format!(
                "it goes more than {} names deep (the transfer's depth bound)",
                self.limits.max_depth
            )));
        }
        if !prefix.is_empty() {
            self.count()?;
            let mut header = self.header(st, tar::EntryType::Directory, 0);
            let mut name = prefix.clone();
            name.push(b'/');
            self.append(&mut header, &name, &[])?;
        }
        let left = self.limits.max_entries.saturating_sub(self.entries);
        let (names, cut) = tree::names(dir, left.saturating_add(1))
            .map_err(|e| read_error(errno(e), &self.shown))?;
        if cut || names.len() > left {
            return Err(self.too_large(format!(
                "more than {} entries (the transfer's entry bound)",
                self.limits.max_entries
            )));
        }
        for name in names {
            let len = prefix.len();
            if !prefix.is_empty() {
                prefix.push(b'/');
            }
            prefix.extend_from_slice(name.to_bytes());
            let done = self.child(dir, &name, prefix, depth);
            prefix.truncate(len);
            done?;
        }
        Ok(())
    }

    /// One child of a directory: judged by what opening it gives, never by the `lstat` alone.
    fn child(
        &mut self,
        dir: &OwnedFd,
        name: &CString,
        path: &mut Vec<u8>,
        depth: usize,
    ) -> Result<(), ToolError> {
        let Some(guess) = tree::stat_child(dir, name) else {
            return Ok(()); // gone meanwhile
        };
        match tree::kind(&guess) {
            SFlag::S_IFDIR => match tree::open_dir(dir, name) {
                Ok((child, st)) => self.walk(&child, &st, path, depth + 1),
                // Swapped for a link (or removed) since the `lstat`: a link is a link.
                Err(_) => self.link_or_skip(dir, name, path),
            },
            SFlag::S_IFREG => match tree::open_file(dir, name) {
                Ok((file, st)) => {
                    let name = path.clone();
                    self.file(file, &st, &name)
                }
                Err(_) => self.link_or_skip(dir, name, path),
            },
            SFlag::S_IFLNK => self.link_or_skip(dir, name, path),
            _ => self.skip(),
        }
    }

    fn skip(&mut self) -> Result<(), ToolError> {
        self.skipped += 1;
        Ok(())
    }

    /// A symbolic link, kept as one (never followed); anything else there now is skipped.
    fn link_or_skip(&mut self, dir: &OwnedFd, name: &CStr, path: &[u8]) -> Result<(), ToolError> {
        let Some(st) = tree::stat_child(dir, name).filter(|st| tree::kind(st) == SFlag::S_IFLNK)
        else {
            return self.skip();
        };
        let Ok(target) = tree::read_link(dir, name) else {
            return self.skip();
        };
        self.count()?;
        let mut header = self.header(&st, tar::EntryType::Symlink, 0);
        self.builder
            .append_link(
                &mut header,
                Path::new(OsStr::from_bytes(path)),
                Path::new(OsStr::from_bytes(&target)),
            )
            .map_err(|e| ToolError::internal(format!("cannot write the tar: {e}")))?;
        self.room_for(0).map(|_| ())
    }
}
