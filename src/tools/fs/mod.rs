//! The file tools (`read`, `write`, `edit`, `apply_patch`, `ls`, `glob`, `grep`) over a
//! workspace reached only through a directory descriptor.
//!
//! What this module promises, whatever path an agent passes:
//!
//! - Nothing outside the workspace is read or written. Every lookup goes through `openat2`
//!   from the workspace's descriptor with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
//!   RESOLVE_NO_XDEV`, so `..`, absolute symbolic links, relative ones that climb out, magic
//!   links (`/proc/self/root`) and other mounts are refused by the kernel at any depth, in the
//!   same step as the lookup (no check-then-use race). Creating, renaming and removing use a
//!   parent directory descriptor obtained that way and a single name, never a host path.
//! - Writes never follow a symbolic link in the kernel: a file is written as a new temporary
//!   file (`O_CREAT | O_EXCL`, no symlinks allowed) in the target's directory, then renamed over
//!   the target. A symbolic link as the last component is followed here, in userspace, only
//!   when it is relative; where it leads is looked up beneath the root again.
//! - Every file or directory a call creates or modifies gets the session clock's `now` as its
//!   access and modification time, and the configured owner.
//! - Messages name workspace-relative or in-sandbox paths only.

//!
//! The security core, reviewable alone: [`resolve`] (every path the agent gives, resolved
//! beneath the root by the kernel; reading a regular file), [`writing`] (files replaced
//! atomically, directories made one at a time), [`walk`] (bounded walks for `glob` and `grep`).
//! The tools themselves are one file each beside this directory.

pub(crate) mod resolve;
pub(crate) mod walk;
pub(crate) mod writing;

use std::io::{self};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use serde_json::{Value, json};

/// The file tools, in the order [`schemas`] lists them.
pub const TOOLS: [&str; 7] = ["read", "write", "edit", "apply_patch", "ls", "glob", "grep"];

/// Files larger than this are refused by `read` and `edit` (and skipped by `grep`).
pub const MAX_FILE_BYTES: u64 = 16 << 20;
/// Lines `read` returns when no `limit` is given.
pub const READ_DEFAULT_LINES: usize = 2000;
/// Bytes of content `read` returns at most; the rest is left for a later `offset`.
pub const READ_MAX_OUTPUT_BYTES: usize = 100 << 10;
/// The largest content `write`, `edit` and `apply_patch` write to one file.
pub const WRITE_MAX_BYTES: usize = 64 << 20;
/// Entries `ls` lists at most.
pub const LS_MAX_ENTRIES: usize = 1000;
/// Paths `glob` returns at most.
pub const GLOB_MAX_RESULTS: usize = 1000;
/// Matches `grep` returns when no `limit` is given, and at most.
pub const GREP_DEFAULT_MATCHES: usize = 200;
pub const GREP_MAX_MATCHES: usize = 2000;
/// Characters of a matching line `grep` shows.
pub const GREP_MAX_LINE_CHARS: usize = 300;
/// Bytes `grep` reads in one call, over all files.
pub const GREP_MAX_TOTAL_BYTES: u64 = 256 << 20;
/// Entries a `glob` or `grep` walk looks at, and how deep it goes.
pub const WALK_MAX_ENTRIES: usize = 100_000;
pub const WALK_MAX_DEPTH: usize = 64;
/// Files one patch may touch.
pub const PATCH_MAX_FILES: usize = 1000;
/// Symbolic links followed (in userspace) for the last component of a path.
pub(crate) const MAX_SYMLINK_HOPS: usize = 40;
/// Bytes looked at to tell a binary file (one with a NUL byte) from text.
pub(crate) const BINARY_SNIFF_BYTES: usize = 8192;

/// How every path is resolved from the workspace's descriptor.
pub(crate) const BENEATH: u64 =
    libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS | libc::RESOLVE_NO_XDEV;
/// How a single name is opened in a directory already resolved: no symbolic link at all.
pub(crate) const ONE_NAME: u64 = BENEATH | libc::RESOLVE_NO_SYMLINKS;

pub(crate) const PATH_NAMES: &[&str] = &["path", "file_path", "file"];

/// The workspace the file tools work in: a directory descriptor for its root (the overlay's
/// root in a session) and how it is shown ([`RootShape`]).
#[derive(Debug)]
pub struct WorkspaceRoot {
    fd: OwnedFd,
    shape: RootShape,
}

/// How a workspace root is shown: where the sandbox mounts it and its aliases (absolute paths
/// under them are accepted), whether writes are allowed, and who owns what the tools create.
#[derive(Debug, Clone)]
pub struct RootShape {
    mount: PathBuf,
    aliases: Vec<PathBuf>,
    /// Directories of the workspace shown at paths of their own: (that path, the directory).
    mounts: Vec<(PathBuf, PathBuf)>,
    writable: bool,
    owner: Option<(u32, u32)>,
}

impl WorkspaceRoot {
    /// `fd` must be a directory (`O_PATH` is enough); `mount` and `aliases` are absolute
    /// in-sandbox paths (`/workspace`, `/root/.openclaw/workspace`); `owner` is the uid and gid
    /// every created file and directory is given (`None`: left as created).
    pub fn new(
        fd: OwnedFd,
        mount: impl Into<PathBuf>,
        aliases: Vec<PathBuf>,
        writable: bool,
        owner: Option<(u32, u32)>,
    ) -> Self {
        let shape = RootShape {
            mount: mount.into(),
            aliases,
            mounts: Vec::new(),
            writable,
            owner,
        };
        WorkspaceRoot { fd, shape }
    }

    /// The root `fd`, shown as `shape` says (the same workspace's root, opened again).
    pub fn reopened(fd: OwnedFd, shape: RootShape) -> Self {
        WorkspaceRoot { fd, shape }
    }

    /// How this root is shown.
    pub fn shape(&self) -> &RootShape {
        &self.shape
    }

    /// The same root, with the policy's workspace mount points (a path in the sandbox and the
    /// workspace-relative directory shown there): absolute paths under them are accepted.
    pub fn with_mounts(mut self, mounts: Vec<(PathBuf, PathBuf)>) -> Self {
        self.shape.mounts = mounts;
        self
    }

    /// Open the directory `dir` (`O_PATH | O_DIRECTORY`) as a workspace root.
    pub fn open(
        dir: &Path,
        mount: impl Into<PathBuf>,
        aliases: Vec<PathBuf>,
        writable: bool,
        owner: Option<(u32, u32)>,
    ) -> io::Result<Self> {
        let fd = nix::fcntl::open(
            dir,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Self::new(fd, mount, aliases, writable, owner))
    }

    /// The root as a path this process can open (`/proc/self/fd/N`), for readers that take a
    /// path (the verifier's manifests).
    pub fn proc_path(&self) -> PathBuf {
        PathBuf::from(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&self.fd)
        ))
    }

    pub fn mount(&self) -> &Path {
        self.shape.mount()
    }

    pub fn aliases(&self) -> &[PathBuf] {
        &self.shape.aliases
    }

    pub fn writable(&self) -> bool {
        self.shape.writable
    }

    pub fn owner(&self) -> Option<(u32, u32)> {
        self.shape.owner()
    }

    pub(crate) fn dir(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl RootShape {
    pub fn mount(&self) -> &Path {
        &self.mount
    }

    pub fn owner(&self) -> Option<(u32, u32)> {
        self.owner
    }
}

/// A path argument's schema: `what` it names.
pub(crate) fn path_param(what: &str) -> Value {
    json!({"type": "string", "description": what})
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
