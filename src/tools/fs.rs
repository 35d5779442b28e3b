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

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use globset::{GlobBuilder, GlobMatcher};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, readlinkat, renameat};
use nix::sys::stat::{FileStat, Mode, SFlag, fchmod, fstat, fstatat, futimens, mkdirat};
use nix::sys::time::TimeSpec;
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchown, unlinkat};
use serde_json::{Value, json};

use super::patch::{self, FileChange, HunkError};
use super::{Args, ToolError, ToolResult, ToolSchema, shorten};
use crate::sys;

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
const MAX_SYMLINK_HOPS: usize = 40;
/// Bytes looked at to tell a binary file (one with a NUL byte) from text.
const BINARY_SNIFF_BYTES: usize = 8192;

/// How every path is resolved from the workspace's descriptor.
const BENEATH: u64 = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS | libc::RESOLVE_NO_XDEV;
/// How a single name is opened in a directory already resolved: no symbolic link at all.
const ONE_NAME: u64 = BENEATH | libc::RESOLVE_NO_SYMLINKS;

const PATH_NAMES: &[&str] = &["path", "file_path", "file"];

/// The workspace the file tools work in: a directory descriptor for its root (the overlay's
/// root in a session), where the sandbox mounts it and its aliases (absolute paths under them
/// are accepted), whether writes are allowed, and who owns what the tools create.
#[derive(Debug)]
pub struct WorkspaceRoot {
    fd: OwnedFd,
    mount: PathBuf,
    aliases: Vec<PathBuf>,
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
        WorkspaceRoot {
            fd,
            mount: mount.into(),
            aliases,
            writable,
            owner,
        }
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

    pub fn mount(&self) -> &Path {
        &self.mount
    }

    pub fn aliases(&self) -> &[PathBuf] {
        &self.aliases
    }

    pub fn writable(&self) -> bool {
        self.writable
    }

    pub fn owner(&self) -> Option<(u32, u32)> {
        self.owner
    }

    fn dir(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Run one file tool. `tool` must be one of [`TOOLS`].
pub fn call(root: &WorkspaceRoot, tool: &str, args: &Value, now: SystemTime) -> ToolResult {
    // As the sandbox's root (its own files, and the permissions it has), not host root.
    crate::sys::with_fs_ids(root.owner, || dispatch(root, tool, args, now))
}

fn dispatch(root: &WorkspaceRoot, tool: &str, args: &Value, now: SystemTime) -> ToolResult {
    let result = match tool {
        "read" => read(root, args),
        "write" => write(root, args, now),
        "edit" => edit(root, args, now),
        "apply_patch" => apply_patch(root, args, now),
        "ls" => ls(root, args),
        "glob" => glob(root, args),
        "grep" => grep(root, args),
        other => Err(ToolError::invalid_argument(format!(
            "unknown tool `{}`: the file tools are {}",
            shorten(other, 64),
            TOOLS.join(", ")
        ))),
    };
    result.into()
}

// ---------------------------------------------------------------------------------------------
// Paths

/// A path as the agent gave it, made relative to the workspace root (lexically: `.` dropped,
/// `..` kept for the kernel to refuse or resolve).
#[derive(Debug, Clone)]
struct AgentPath {
    /// The agent's own text, shortened, for messages.
    raw: String,
    rel: PathBuf,
    /// Ends with `/`, `/.` or `/..`: names a directory.
    names_dir: bool,
}

impl AgentPath {
    /// Workspace-relative, for results.
    fn shown(&self) -> String {
        display(&self.rel)
    }
}

fn display(rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        ".".to_owned()
    } else {
        rel.to_string_lossy().into_owned()
    }
}

fn parse_path(root: &WorkspaceRoot, raw: &str) -> Result<AgentPath, ToolError> {
    let shown_raw = shorten(raw, 200);
    if raw.is_empty() {
        return Err(ToolError::invalid_argument(
            "the path is empty: give a path relative to the workspace",
        ));
    }
    if raw.contains('\0') {
        return Err(ToolError::invalid_argument(format!(
            "`{}` contains a NUL byte",
            shown_raw.replace('\0', "\\0")
        )));
    }
    let path = Path::new(raw);
    let rel = if path.is_absolute() {
        let under = std::iter::once(&root.mount)
            .chain(&root.aliases)
            .find_map(|m| path.strip_prefix(m).ok());
        match under {
            Some(rel) => rel,
            None => {
                return Err(ToolError::permission(format!(
                    "`{shown_raw}` is outside the workspace: the file tools may only reach paths \
                     under {} (or relative to it)",
                    root.mount.display()
                )));
            }
        }
    } else {
        path
    };
    let rel: PathBuf = rel
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    let names_dir = raw.ends_with('/')
        || raw.ends_with("/.")
        || raw.ends_with("/..")
        || raw == "."
        || raw == "..";
    Ok(AgentPath {
        raw: shown_raw,
        rel,
        names_dir,
    })
}

/// What went wrong with a file system step, before it becomes a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FsError {
    Os(Errno),
    /// Not a regular file (a FIFO, socket, device).
    NotRegular,
    /// A symbolic link to an absolute path, which is never followed.
    AbsoluteLink,
}

impl From<Errno> for FsError {
    fn from(e: Errno) -> Self {
        FsError::Os(e)
    }
}

fn errno(e: io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

/// The agent-safe message for a failed step on `path`.
fn fs_error(e: FsError, path: &str, access: Access) -> ToolError {
    let errno = match e {
        FsError::NotRegular => {
            return ToolError::invalid_argument(format!("`{path}` is not a regular file"));
        }
        FsError::AbsoluteLink => {
            return ToolError::permission(format!(
                "`{path}` is a symbolic link to an absolute path: only relative links that stay \
                 inside the workspace are followed"
            ));
        }
        FsError::Os(errno) => errno,
    };
    match errno {
        Errno::ENOENT => ToolError::not_found(format!("`{path}` does not exist")),
        Errno::ENOTDIR => ToolError::invalid_argument(format!(
            "`{path}`: a component of the path is not a directory"
        )),
        Errno::EISDIR => ToolError::invalid_argument(format!("`{path}` is a directory")),
        Errno::EEXIST => ToolError::invalid_argument(format!("`{path}` already exists")),
        Errno::EXDEV => ToolError::permission(format!(
            "`{path}` leaves the workspace (through `..`, a symbolic link or a mount point): \
             access is refused"
        )),
        Errno::ELOOP => ToolError::permission(format!(
            "`{path}` cannot be resolved inside the workspace (a symbolic link loops, is a \
             kernel magic link or was swapped during the call): access is refused"
        )),
        Errno::EACCES | Errno::EPERM | Errno::EROFS => match access {
            Access::Read => ToolError::permission(format!("no read permission on `{path}`")),
            Access::Write => ToolError::permission(format!("no write permission on `{path}`")),
        },
        Errno::ENOSPC | Errno::EDQUOT => {
            ToolError::too_large(format!("the workspace is full: cannot write `{path}`"))
        }
        Errno::EFBIG => ToolError::too_large(format!("`{path}` is over the file size limit")),
        Errno::ENAMETOOLONG => ToolError::invalid_argument(format!(
            "`{path}` is too long (or has a component over 255 bytes)"
        )),
        Errno::EBUSY | Errno::ETXTBSY => ToolError::invalid_argument(format!("`{path}` is busy")),
        Errno::ENXIO | Errno::ENODEV => {
            ToolError::invalid_argument(format!("`{path}` is not a regular file"))
        }
        other => {
            tracing::warn!(errno = %other, "file tool failed on an unexpected error");
            let verb = match access {
                Access::Read => "read",
                Access::Write => "write",
            };
            ToolError::internal(format!("cannot {verb} `{path}`: {}", other.desc()))
        }
    }
}

fn cstring(path: &Path) -> Result<CString, Errno> {
    let bytes = path.as_os_str().as_bytes();
    let bytes = if bytes.is_empty() { b"." } else { bytes };
    CString::new(bytes).map_err(|_| Errno::EINVAL)
}

/// `openat2` from `dir`, retried when the kernel asks (EAGAIN: a rename raced the lookup).
fn open_at(
    dir: BorrowedFd<'_>,
    path: &Path,
    flags: OFlag,
    mode: u32,
    resolve: u64,
) -> Result<OwnedFd, Errno> {
    let c = cstring(path)?;
    let mut last = Errno::EAGAIN;
    for _ in 0..16 {
        match sys::openat2(dir, &c, flags.bits(), mode, resolve) {
            Ok(fd) => return Ok(fd),
            Err(e) => {
                last = errno(e);
                if last != Errno::EAGAIN {
                    break;
                }
            }
        }
    }
    Err(last)
}

/// A directory of the workspace, as a readable descriptor of its own (not a duplicate of the
/// root's: a duplicate would share the root's directory offset with every reader).
fn open_dir(root: &WorkspaceRoot, rel: &Path) -> Result<OwnedFd, Errno> {
    open_at(
        root.dir(),
        rel,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY,
        0,
        BENEATH,
    )
}

fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT
}

/// The last component of `rel` and the path of its directory; `None` when `rel` names the
/// root or ends with `..`.
fn split_last(rel: &Path) -> Option<(PathBuf, OsString)> {
    let mut comps: Vec<Component<'_>> = rel.components().collect();
    match comps.pop() {
        Some(Component::Normal(name)) => Some((comps.iter().collect(), name.to_owned())),
        _ => None,
    }
}

/// A file's directory (opened beneath the root) and its name there.
#[derive(Debug)]
struct Located {
    dir: OwnedFd,
    name: OsString,
    /// The workspace-relative path it was found at (after following symbolic links).
    rel: PathBuf,
    /// What the name was when it was located (known when links were followed).
    stat: Option<FileStat>,
}

/// Find the directory and name of `rel`, following symbolic links in the last component when
/// `follow` (relative ones only; each hop is looked up beneath the root again).
fn locate(root: &WorkspaceRoot, rel: &Path, follow: bool) -> Result<Located, FsError> {
    let mut rel = rel.to_path_buf();
    for _ in 0..=MAX_SYMLINK_HOPS {
        let (parent, name) = split_last(&rel).ok_or(Errno::EISDIR)?;
        let dir = open_dir(root, &parent)?;
        let stat = if follow {
            fstatat(&dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW).ok()
        } else {
            None
        };
        if stat.is_some_and(|st| kind(&st) == SFlag::S_IFLNK) {
            let target = readlinkat(&dir, name.as_os_str())?;
            if Path::new(&target).is_absolute() {
                return Err(FsError::AbsoluteLink);
            }
            rel = parent.join(target);
            continue;
        }
        return Ok(Located {
            dir,
            name,
            rel,
            stat,
        });
    }
    Err(FsError::Os(Errno::ELOOP))
}

/// Open a located regular file for reading: never a symbolic link, never a FIFO's blocking open
/// nor a device's (the type is checked before opening, and again on what was opened).
fn open_regular(loc: &Located) -> Result<(File, FileStat), FsError> {
    let before = match loc.stat {
        Some(st) => st,
        None => fstatat(&loc.dir, loc.name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)?,
    };
    match kind(&before) {
        SFlag::S_IFREG => {}
        SFlag::S_IFDIR => return Err(FsError::Os(Errno::EISDIR)),
        SFlag::S_IFLNK => return Err(FsError::Os(Errno::ELOOP)),
        _ => return Err(FsError::NotRegular),
    }
    let fd = open_at(
        loc.dir.as_fd(),
        Path::new(&loc.name),
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY,
        0,
        ONE_NAME,
    )?;
    let st = fstat(&fd)?;
    match kind(&st) {
        SFlag::S_IFREG => Ok((File::from(fd), st)),
        SFlag::S_IFDIR => Err(FsError::Os(Errno::EISDIR)),
        _ => Err(FsError::NotRegular),
    }
}

/// A regular file's whole content, refused past [`MAX_FILE_BYTES`], with where it was found.
fn load(
    root: &WorkspaceRoot,
    path: &AgentPath,
    tool: &str,
) -> Result<(Located, Vec<u8>, FileStat), ToolError> {
    let loc = locate(root, &path.rel, true).map_err(|e| fs_error(e, &path.raw, Access::Read))?;
    let (file, st) = open_regular(&loc).map_err(|e| match e {
        FsError::Os(Errno::EISDIR) => {
            ToolError::invalid_argument(format!("`{}` is a directory (ls lists it)", path.raw))
        }
        e => fs_error(e, &path.raw, Access::Read),
    })?;
    let content = read_regular(file, &st, path, tool)?;
    Ok((loc, content, st))
}

/// A regular file's whole content, when only the content is wanted: the short way when it
/// works (see [`open_regular_directly`]), else [`load`]'s, which names every problem.
fn load_content(root: &WorkspaceRoot, path: &AgentPath, tool: &str) -> Result<Vec<u8>, ToolError> {
    match open_regular_directly(root, &path.rel) {
        Some((file, st)) => read_regular(file, &st, path, tool),
        None => load(root, path, tool).map(|(_, content, _)| content),
    }
}

/// Open `rel` from the root in one `openat2` (the kernel follows the relative symbolic links
/// that stay beneath it and refuses everything else) if a `stat` of it says it is a regular
/// file, and keep it if `fstat` agrees. `None` on any error or any other type: the caller takes
/// the long way, which names every problem. The `stat` comes first so that a FIFO is never
/// opened (opening one would release a writer blocked on it); it reads nothing but the type,
/// and only the `openat2` decides what is reached.
fn open_regular_directly(root: &WorkspaceRoot, rel: &Path) -> Option<(File, FileStat)> {
    if rel.as_os_str().is_empty() {
        return None;
    }
    let before = fstatat(root.dir(), rel, AtFlags::empty()).ok()?;
    if kind(&before) != SFlag::S_IFREG {
        return None;
    }
    let fd = open_at(
        root.dir(),
        rel,
        OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY,
        0,
        BENEATH,
    )
    .ok()?;
    let st = fstat(&fd).ok()?;
    (kind(&st) == SFlag::S_IFREG).then(|| (File::from(fd), st))
}

/// Read an opened regular file whole, refused past [`MAX_FILE_BYTES`].
fn read_regular(
    file: File,
    st: &FileStat,
    path: &AgentPath,
    tool: &str,
) -> Result<Vec<u8>, ToolError> {
    let too_large = |size: u64| {
        ToolError::too_large(format!(
            "`{}` is {size} bytes, over the {} MiB that {tool} handles: use exec (head, sed, \
             split) on it",
            path.raw,
            MAX_FILE_BYTES >> 20
        ))
    };
    if st.st_size as u64 > MAX_FILE_BYTES {
        return Err(too_large(st.st_size as u64));
    }
    let content = read_all(file, st.st_size.max(0) as usize)
        .map_err(|e| fs_error(FsError::Os(errno(e)), &path.raw, Access::Read))?;
    if content.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(content.len() as u64));
    }
    Ok(content)
}

fn is_binary(content: &[u8]) -> bool {
    content[..content.len().min(BINARY_SNIFF_BYTES)].contains(&0)
}

// ---------------------------------------------------------------------------------------------
// Writing

fn timespec(t: SystemTime) -> TimeSpec {
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

fn require_writable(root: &WorkspaceRoot, what: &str) -> Result<(), ToolError> {
    if root.writable {
        Ok(())
    } else {
        Err(ToolError::permission(format!(
            "no write permission on `{what}`: the workspace is read-only in this session"
        )))
    }
}

fn set_owner(root: &WorkspaceRoot, fd: impl AsFd) -> Result<(), Errno> {
    match root.owner {
        Some((uid, gid)) => fchown(fd, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid))),
        None => Ok(()),
    }
}

/// Best effort: a directory whose entries changed gets `now` too (it may belong to someone
/// else, in which case it keeps the kernel's time).
fn touch_dir(fd: impl AsFd, now: &TimeSpec) {
    if let Err(e) = futimens(fd, now, now) {
        tracing::debug!(errno = %e, "cannot set a directory's times");
    }
}

/// A directory this call created (removed again when the call fails).
#[derive(Debug)]
struct CreatedDir {
    parent: OwnedFd,
    name: OsString,
    fd: OwnedFd,
}

fn remove_dirs(created: Vec<CreatedDir>) {
    for c in created.into_iter().rev() {
        let _ = unlinkat(&c.parent, c.name.as_os_str(), UnlinkatFlags::RemoveDir);
    }
}

/// `mkdir -p` of `rel`, one directory at a time, each made through its parent's descriptor.
fn create_dirs(root: &WorkspaceRoot, rel: &Path) -> Result<Vec<CreatedDir>, Errno> {
    let mut created = Vec::new();
    match create_dirs_into(root, rel, &mut created) {
        Ok(()) => Ok(created),
        Err(e) => {
            remove_dirs(created);
            Err(e)
        }
    }
}

fn create_dirs_into(
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
fn check_creatable(root: &WorkspaceRoot, rel: &Path) -> Result<(), Errno> {
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

static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// A file written under a temporary name beside its target, waiting to be renamed over it.
#[derive(Debug)]
struct Staged {
    dir: OwnedFd,
    tmp: OsString,
    name: OsString,
}

impl Staged {
    fn commit(&self) -> Result<(), Errno> {
        renameat(
            &self.dir,
            self.tmp.as_os_str(),
            &self.dir,
            self.name.as_os_str(),
        )
    }

    fn discard(&self) {
        let _ = unlinkat(&self.dir, self.tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
    }
}

/// Write `content` to a new temporary file in `loc`'s directory with `mode`, the owner and
/// `now` as its times.
fn stage(
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
fn existing_mode(loc: &Located) -> Result<Option<u32>, FsError> {
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
fn replace_file(
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

fn too_large_to_write(path: &str, len: usize) -> ToolError {
    ToolError::too_large(format!(
        "`{path}` would be {len} bytes, over the {} MiB limit of one write",
        WRITE_MAX_BYTES >> 20
    ))
}

// ---------------------------------------------------------------------------------------------
// The tools

/// A regular file's content, at most [`MAX_FILE_BYTES`] + 1 bytes, for a file `size` bytes
/// long when it was opened: one `read` into room for one byte more, and more reads only if
/// that filled it (the file grew); a short read of a regular file is its end.
fn read_all(mut file: File, size: usize) -> io::Result<Vec<u8>> {
    let limit = MAX_FILE_BYTES as usize + 1;
    let mut content = vec![0u8; size.saturating_add(1).min(limit)];
    let mut len = 0;
    loop {
        let n = match file.read(&mut content[len..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        len += n;
        if n == 0 || len < content.len() || len >= limit {
            content.truncate(len);
            return Ok(content);
        }
        content.resize(content.len().saturating_mul(2).min(limit), 0);
    }
}

fn read(root: &WorkspaceRoot, args: &Value) -> Result<Value, ToolError> {
    let a = Args::new("read", args)?;
    let raw = a.string(
        PATH_NAMES,
        "the file to read, relative to the workspace (or under its mount point)",
    )?;
    let offset = a.opt_uint(&["offset"], 1)?.unwrap_or(1) as usize;
    let limit = a
        .opt_uint(&["limit"], 1)?
        .map_or(READ_DEFAULT_LINES, |l| l as usize);
    let path = parse_path(root, raw)?;
    let content = load_content(root, &path, "read")?;
    if is_binary(&content) {
        return Err(ToolError::invalid_argument(format!(
            "`{}` is a binary file ({} bytes): read shows text only",
            path.raw,
            content.len()
        )));
    }
    // Valid UTF-8 becomes the text as it is (no copy); only invalid text takes the lossy walk
    // (which changes neither the newlines nor the last byte's being one).
    let total = line_count(&content);
    let text = String::from_utf8(content)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    if offset > total.max(1) {
        return Err(ToolError::invalid_argument(format!(
            "`offset` {offset} is past the end of `{}`, which has {total} line(s)",
            path.raw
        )));
    }
    let start = offset - 1;
    let (out, end, cut) = if start == 0 && total <= limit && text.len() <= READ_MAX_OUTPUT_BYTES {
        // The whole file fits: no need to cut it into lines.
        (text, total, false)
    } else {
        lines_window(&text, start, limit)
    };
    let mut result = json!({
        "path": path.shown(),
        "content": out,
        "offset": offset,
        "lines": end - start,
        "total_lines": total,
        "truncated": end < total || cut,
    });
    if end < total {
        result["next_offset"] = json!(end + 1);
    }
    Ok(result)
}

/// The number of lines of `content`, as `split_inclusive('\n')` cuts its text (a last line
/// without its newline counts).
fn line_count(content: &[u8]) -> usize {
    // Counted per block of 32 bytes into a byte (at most 32): vector compares and sums.
    let blocks = content.chunks_exact(32);
    let tail = blocks.remainder().iter().filter(|&&b| b == b'\n').count();
    let newlines: usize = blocks
        .map(|block| usize::from(block.iter().map(|&b| u8::from(b == b'\n')).sum::<u8>()))
        .sum();
    let unterminated = content.last().is_some_and(|&b| b != b'\n');
    newlines + tail + usize::from(unterminated)
}

/// Lines `start..` (0-based) of `text`, at most `limit` of them and at most
/// [`READ_MAX_OUTPUT_BYTES`] (a first line longer than that is cut): the text, the index of the
/// first line not shown, and whether a line was cut.
fn lines_window(text: &str, start: usize, limit: usize) -> (String, usize, bool) {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = String::new();
    let mut end = start;
    let mut cut = false;
    while end < lines.len() && end - start < limit {
        let line = lines[end];
        if out.len() + line.len() > READ_MAX_OUTPUT_BYTES {
            if end == start {
                // One line longer than the cap: show its beginning.
                let mut at = READ_MAX_OUTPUT_BYTES;
                while !line.is_char_boundary(at) {
                    at -= 1;
                }
                out.push_str(&line[..at]);
                end += 1;
                cut = true;
            }
            break;
        }
        out.push_str(line);
        end += 1;
    }
    (out, end, cut)
}

fn write(root: &WorkspaceRoot, args: &Value, now: SystemTime) -> Result<Value, ToolError> {
    let a = Args::new("write", args)?;
    let raw = a.string(
        PATH_NAMES,
        "the file to write, relative to the workspace (parent directories are created)",
    )?;
    let content = a.string(&["content"], "the whole new content of the file")?;
    let path = parse_path(root, raw)?;
    require_writable(root, &path.raw)?;
    if path.names_dir {
        return Err(ToolError::invalid_argument(format!(
            "`{}` names a directory: give a file path",
            path.raw
        )));
    }
    if content.len() > WRITE_MAX_BYTES {
        return Err(too_large_to_write(&path.raw, content.len()));
    }
    let created = replace_file(root, &path, content.as_bytes(), &timespec(now))
        .map_err(|e| fs_error(e, &path.raw, Access::Write))?;
    Ok(json!({"path": path.shown(), "bytes": content.len(), "created": created}))
}

fn edit(root: &WorkspaceRoot, args: &Value, now: SystemTime) -> Result<Value, ToolError> {
    let a = Args::new("edit", args)?;
    let raw = a.string(PATH_NAMES, "the file to edit, relative to the workspace")?;
    let old = a.string(
        &["old_string", "oldText", "old_str"],
        "the exact text to replace, as it appears in the file",
    )?;
    let new = a.string(
        &["new_string", "newText", "new_str"],
        "the text to put in its place",
    )?;
    let replace_all = a.opt_bool(&["replace_all", "replaceAll"])?.unwrap_or(false);
    let path = parse_path(root, raw)?;
    require_writable(root, &path.raw)?;
    if old.is_empty() {
        return Err(ToolError::invalid_argument(
            "`old_string` is empty: give the exact text to replace (write creates a file)",
        ));
    }
    if old == new {
        return Err(ToolError::invalid_argument(
            "`old_string` and `new_string` are the same: nothing would change",
        ));
    }
    let (loc, content, st) = load(root, &path, "edit")?;
    let finder = memchr::memmem::Finder::new(old.as_bytes());
    let count = finder.find_iter(&content).count();
    if count == 0 {
        return Err(ToolError::not_found(format!(
            "`old_string` was not found in `{}` (it must match exactly, including whitespace, \
             indentation and line endings)",
            path.raw
        )));
    }
    if count > 1 && !replace_all {
        return Err(ToolError::invalid_argument(format!(
            "`old_string` occurs {count} times in `{}`: include more surrounding text to make it \
             unique, or set `replace_all` to replace every occurrence",
            path.raw
        )));
    }
    let mut updated = Vec::with_capacity(content.len());
    let mut last = 0;
    let mut replaced = 0;
    for at in finder.find_iter(&content) {
        updated.extend_from_slice(&content[last..at]);
        updated.extend_from_slice(new.as_bytes());
        last = at + old.len();
        replaced += 1;
        if !replace_all {
            break;
        }
    }
    updated.extend_from_slice(&content[last..]);
    if updated.len() > WRITE_MAX_BYTES {
        return Err(too_large_to_write(&path.raw, updated.len()));
    }
    let now = timespec(now);
    let staged = stage(root, loc, &updated, st.st_mode & 0o777, &now)
        .map_err(|e| fs_error(FsError::Os(e), &path.raw, Access::Write))?;
    if let Err(e) = staged.commit() {
        staged.discard();
        return Err(fs_error(FsError::Os(e), &path.raw, Access::Write));
    }
    touch_dir(&staged.dir, &now);
    Ok(json!({"path": path.shown(), "replacements": replaced}))
}

/// One file's state while a patch is checked: what it held before and what it will hold.
#[derive(Debug)]
struct PatchedFile {
    /// The path as the patch named it, for messages and results.
    shown: String,
    before: Option<Vec<u8>>,
    after: Option<Vec<u8>>,
    mode: u32,
    /// Its directory does not exist yet (checked to be creatable).
    needs_dirs: bool,
}

/// Every file a patch touches, keyed by workspace-relative path, checked before anything is
/// written.
#[derive(Debug, Default)]
struct PatchPlan {
    files: std::collections::BTreeMap<PathBuf, PatchedFile>,
}

impl PatchPlan {
    /// Look `raw` up (once per patch; a symbolic link as its last component is followed, as
    /// for every file tool) and return its key: the path of the file it leads to.
    fn entry(&mut self, root: &WorkspaceRoot, raw: &str) -> Result<PathBuf, ToolError> {
        let path = parse_path(root, raw)?;
        if path.names_dir {
            return Err(ToolError::invalid_argument(format!(
                "`{}` names a directory: a patch changes files",
                path.raw
            )));
        }
        let write_err = |e| fs_error(e, &path.raw, Access::Write);
        match locate(root, &path.rel, true) {
            Ok(loc) => {
                if !self.files.contains_key(&loc.rel) {
                    let mode = existing_mode(&loc).map_err(write_err)?;
                    let before = match mode {
                        Some(_) => {
                            let target = AgentPath {
                                rel: loc.rel.clone(),
                                ..path.clone()
                            };
                            Some(load(root, &target, "apply_patch")?.1)
                        }
                        None => None,
                    };
                    self.files.insert(
                        loc.rel.clone(),
                        PatchedFile {
                            shown: path.shown(),
                            after: before.clone(),
                            before,
                            mode: mode.unwrap_or(0o644),
                            needs_dirs: false,
                        },
                    );
                }
                Ok(loc.rel)
            }
            Err(FsError::Os(Errno::ENOENT)) => {
                let (parent, _) = split_last(&path.rel).ok_or(write_err(Errno::EISDIR.into()))?;
                check_creatable(root, &parent).map_err(|e| write_err(e.into()))?;
                self.files
                    .entry(path.rel.clone())
                    .or_insert_with(|| PatchedFile {
                        shown: path.shown(),
                        before: None,
                        after: None,
                        mode: 0o644,
                        needs_dirs: true,
                    });
                Ok(path.rel)
            }
            Err(e) => Err(write_err(e)),
        }
    }

    fn file(&mut self, key: &Path) -> Result<&mut PatchedFile, ToolError> {
        self.files
            .get_mut(key)
            .ok_or_else(|| ToolError::internal("the patch plan lost a file"))
    }

    fn add(&mut self, root: &WorkspaceRoot, change: &FileChange) -> Result<(), ToolError> {
        match change {
            FileChange::Add { path, content } => {
                let key = self.entry(root, path)?;
                let f = self.file(&key)?;
                if f.after.is_some() {
                    return Err(ToolError::invalid_argument(format!(
                        "`{}` already exists: the patch adds it as a new file",
                        f.shown
                    )));
                }
                f.after = Some(content.clone());
            }
            FileChange::Delete { path, hunks } => {
                let key = self.entry(root, path)?;
                let f = self.file(&key)?;
                let Some(current) = &f.after else {
                    return Err(ToolError::not_found(format!(
                        "`{}` does not exist: the patch deletes it",
                        f.shown
                    )));
                };
                patch::check_delete(current, hunks).map_err(|e| hunk_error(&f.shown, e))?;
                f.after = None;
            }
            FileChange::Update {
                path,
                move_to,
                hunks,
            } => {
                let key = self.entry(root, path)?;
                let f = self.file(&key)?;
                let Some(current) = &f.after else {
                    return Err(ToolError::not_found(format!(
                        "`{}` does not exist: the patch updates it",
                        f.shown
                    )));
                };
                let updated =
                    patch::apply_hunks(current, hunks).map_err(|e| hunk_error(&f.shown, e))?;
                if updated.len() > WRITE_MAX_BYTES {
                    return Err(too_large_to_write(&f.shown, updated.len()));
                }
                let mode = f.mode;
                match move_to {
                    None => f.after = Some(updated),
                    Some(dest) => {
                        let dest_key = self.entry(root, dest)?;
                        if dest_key == key {
                            self.file(&key)?.after = Some(updated);
                            return Ok(());
                        }
                        let d = self.file(&dest_key)?;
                        if d.after.is_some() {
                            return Err(ToolError::invalid_argument(format!(
                                "`{}` already exists: the patch moves a file there",
                                d.shown
                            )));
                        }
                        d.after = Some(updated);
                        d.mode = mode;
                        self.file(&key)?.after = None;
                    }
                }
            }
        }
        Ok(())
    }

    /// Write everything: stage every new content beside its target, then rename them all,
    /// then delete. Nothing is renamed until every file is staged.
    fn commit(self, root: &WorkspaceRoot, now: &TimeSpec) -> Result<Value, ToolError> {
        let mut staged: Vec<Staged> = Vec::new();
        let mut deletes: Vec<Located> = Vec::new();
        let mut created: Vec<CreatedDir> = Vec::new();
        let (mut added, mut modified, mut deleted) = (Vec::new(), Vec::new(), Vec::new());
        let mut prepared = Ok(());
        for (key, f) in &self.files {
            if f.before == f.after {
                continue;
            }
            let step = (|| -> Result<(), FsError> {
                match &f.after {
                    Some(content) => {
                        if f.needs_dirs
                            && let Some((parent, _)) = split_last(key)
                        {
                            created.extend(create_dirs(root, &parent)?);
                        }
                        let loc = locate(root, key, false)?;
                        staged.push(stage(root, loc, content, f.mode, now)?);
                    }
                    None => deletes.push(locate(root, key, false)?),
                }
                Ok(())
            })();
            if let Err(e) = step {
                prepared = Err(fs_error(e, &f.shown, Access::Write));
                break;
            }
            match (&f.before, &f.after) {
                (None, Some(_)) => added.push(f.shown.clone()),
                (Some(_), Some(_)) => modified.push(f.shown.clone()),
                (Some(_), None) => deleted.push(f.shown.clone()),
                (None, None) => {}
            }
        }
        if let Err(e) = prepared {
            for s in &staged {
                s.discard();
            }
            remove_dirs(created);
            return Err(e);
        }
        for (n, s) in staged.iter().enumerate() {
            if let Err(e) = s.commit() {
                for rest in &staged[n..] {
                    rest.discard();
                }
                tracing::warn!(errno = %e, "apply_patch: a rename failed after others succeeded");
                return Err(ToolError::internal(format!(
                    "the patch was applied only in part: renaming a staged file failed ({})",
                    e.desc()
                )));
            }
            touch_dir(&s.dir, now);
        }
        for d in &deletes {
            if let Err(e) = unlinkat(&d.dir, d.name.as_os_str(), UnlinkatFlags::NoRemoveDir) {
                tracing::warn!(errno = %e, "apply_patch: a delete failed after the writes");
                return Err(ToolError::internal(format!(
                    "the patch was applied only in part: deleting `{}` failed ({})",
                    display(&d.rel),
                    e.desc()
                )));
            }
            touch_dir(&d.dir, now);
        }
        for c in &created {
            touch_dir(&c.fd, now);
            touch_dir(&c.parent, now);
        }
        added.sort();
        modified.sort();
        deleted.sort();
        Ok(json!({"added": added, "modified": modified, "deleted": deleted}))
    }
}

fn hunk_error(path: &str, e: HunkError) -> ToolError {
    match e {
        HunkError::NoMatch { hunk, what } => ToolError::not_found(format!(
            "hunk {hunk} of `{path}` does not apply: {what}; nothing was changed (read the file \
             and make the context lines match it exactly)"
        )),
        HunkError::DeleteMismatch => ToolError::not_found(format!(
            "`{path}` holds more than the patch deletes; nothing was changed"
        )),
    }
}

fn apply_patch(root: &WorkspaceRoot, args: &Value, now: SystemTime) -> Result<Value, ToolError> {
    let a = Args::new("apply_patch", args)?;
    let text = a.string(
        &["patch", "input"],
        "the patch: a unified diff (`--- a/PATH`, `+++ b/PATH`, `@@` hunks) or `*** Begin \
         Patch` ... `*** End Patch`",
    )?;
    require_writable(root, "the files of the patch")?;
    if text.len() > WRITE_MAX_BYTES {
        return Err(ToolError::too_large(format!(
            "the patch is {} bytes, over the {} MiB limit",
            text.len(),
            WRITE_MAX_BYTES >> 20
        )));
    }
    let changes = patch::parse(text).map_err(|e| {
        ToolError::invalid_argument(format!(
            "the patch cannot be read: {e}; nothing was changed"
        ))
    })?;
    if changes.len() > PATCH_MAX_FILES {
        return Err(ToolError::too_large(format!(
            "the patch changes {} files, over the limit of {PATCH_MAX_FILES}: split it",
            changes.len()
        )));
    }
    let mut plan = PatchPlan::default();
    for change in &changes {
        plan.add(root, change)?;
    }
    plan.commit(root, &timespec(now))
}

/// The names in a directory (without `.` and `..`), unsorted, at most [`WALK_MAX_ENTRIES`]
/// (an agent can make a directory of millions).
fn dir_names(dir: &mut nix::dir::Dir) -> Vec<OsString> {
    dir.iter()
        .filter_map(|e| e.ok())
        .map(|e| OsStr::from_bytes(e.file_name().to_bytes()).to_owned())
        .filter(|n| n != "." && n != "..")
        .take(WALK_MAX_ENTRIES)
        .collect()
}

fn kind_name(st: &FileStat) -> &'static str {
    match kind(st) {
        SFlag::S_IFREG => "file",
        SFlag::S_IFDIR => "dir",
        SFlag::S_IFLNK => "symlink",
        SFlag::S_IFIFO => "fifo",
        SFlag::S_IFSOCK => "socket",
        SFlag::S_IFCHR => "char_device",
        SFlag::S_IFBLK => "block_device",
        _ => "other",
    }
}

fn ls(root: &WorkspaceRoot, args: &Value) -> Result<Value, ToolError> {
    let a = Args::new("ls", args)?;
    let raw = a.opt_string(PATH_NAMES)?.unwrap_or(".");
    let path = parse_path(root, raw)?;
    let fd = open_dir(root, &path.rel).map_err(|e| match e {
        Errno::ENOTDIR => ToolError::invalid_argument(format!(
            "`{}` is not a directory (read shows a file)",
            path.raw
        )),
        e => fs_error(FsError::Os(e), &path.raw, Access::Read),
    })?;
    let mut dir = nix::dir::Dir::from_fd(fd)
        .map_err(|e| fs_error(FsError::Os(e), &path.raw, Access::Read))?;
    let mut names = dir_names(&mut dir);
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    let total = names.len();
    let entries: Vec<Value> = names
        .iter()
        .take(LS_MAX_ENTRIES)
        .filter_map(|name| {
            let st = fstatat(&dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW).ok()?;
            let mut entry = json!({"name": name.to_string_lossy(), "type": kind_name(&st)});
            if kind(&st) == SFlag::S_IFREG {
                entry["size"] = json!(st.st_size);
            }
            Some(entry)
        })
        .collect();
    Ok(json!({
        "path": path.shown(),
        "entries": entries,
        "total": total,
        "truncated": total > LS_MAX_ENTRIES,
    }))
}

/// What a walk found: workspace-relative paths with their status, and whether it saw all.
struct Walked {
    found: Vec<(PathBuf, FileStat)>,
    complete: bool,
}

/// Walk the tree under the directory `base` (which must resolve beneath the root), never
/// following a symbolic link, at most `max_depth` levels down, keeping what `keep` accepts.
/// Each directory is opened beneath the root with `O_NOFOLLOW` on its last component.
fn walk(
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

fn has_glob_meta(s: &OsStr) -> bool {
    s.as_bytes()
        .iter()
        .any(|b| matches!(b, b'*' | b'?' | b'[' | b']' | b'{' | b'}' | b'\\'))
}

fn compile_glob(pattern: &str, field: &str) -> Result<GlobMatcher, ToolError> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| {
            ToolError::invalid_argument(format!("`{field}` is not a valid glob pattern: {e}"))
        })
}

fn glob(root: &WorkspaceRoot, args: &Value) -> Result<Value, ToolError> {
    let a = Args::new("glob", args)?;
    let raw = a.string(
        &["pattern"],
        "a glob pattern relative to the workspace, such as `**/*.py` or `src/*.rs`",
    )?;
    let base = a.opt_string(PATH_NAMES)?;
    if raw.is_empty() {
        return Err(ToolError::invalid_argument("`pattern` is empty"));
    }
    let joined;
    let full = match base {
        Some(b) if !Path::new(raw).is_absolute() => {
            joined = format!("{}/{raw}", b.trim_end_matches('/'));
            joined.as_str()
        }
        _ => raw,
    };
    let path = parse_path(root, full)?;
    if path.rel.components().any(|c| c == Component::ParentDir) {
        return Err(ToolError::permission(format!(
            "`{}` leaves the workspace: `..` is not allowed in a glob pattern",
            path.raw
        )));
    }
    let pattern = path.rel.to_string_lossy().into_owned();
    if pattern.is_empty() {
        return Err(ToolError::invalid_argument(
            "`pattern` matches only the workspace itself",
        ));
    }
    let matcher = compile_glob(&pattern, "pattern")?;
    let comps: Vec<&OsStr> = path.rel.iter().collect();
    let literal = comps.iter().take_while(|c| !has_glob_meta(c)).count();
    let mut matches: Vec<String> = Vec::new();
    let mut complete = true;
    if literal == comps.len() {
        // No wildcard: the path itself, when it exists.
        if open_at(
            root.dir(),
            &path.rel,
            OFlag::O_PATH | OFlag::O_NOFOLLOW,
            0,
            BENEATH,
        )
        .is_ok()
        {
            matches.push(pattern.clone());
        }
    } else {
        let base: PathBuf = comps[..literal].iter().collect();
        let max_depth = if pattern.contains("**") {
            WALK_MAX_DEPTH
        } else {
            comps.len() - literal
        };
        match walk(
            root,
            &base,
            max_depth,
            |_| false,
            |rel, _| matcher.is_match(rel),
        ) {
            Ok(w) => {
                complete = w.complete;
                matches = w.found.iter().map(|(p, _)| display(p)).collect();
            }
            Err(Errno::ENOENT) | Err(Errno::ENOTDIR) => {}
            Err(e) => return Err(fs_error(FsError::Os(e), &display(&base), Access::Read)),
        }
    }
    matches.sort();
    let total = matches.len();
    matches.truncate(GLOB_MAX_RESULTS);
    Ok(json!({
        "pattern": pattern,
        "matches": matches,
        "count": matches.len(),
        "truncated": total > GLOB_MAX_RESULTS || !complete,
    }))
}

fn grep(root: &WorkspaceRoot, args: &Value) -> Result<Value, ToolError> {
    let a = Args::new("grep", args)?;
    let pattern = a.string(&["pattern"], "a regular expression to search for")?;
    let raw = a.opt_string(PATH_NAMES)?.unwrap_or(".");
    let glob = a.opt_string(&["glob"])?;
    let ignore_case = a
        .opt_bool(&["ignore_case", "ignoreCase", "-i"])?
        .unwrap_or(false);
    let limit = a
        .opt_uint(&["limit"], 1)?
        .map_or(GREP_DEFAULT_MATCHES, |l| (l as usize).min(GREP_MAX_MATCHES));
    let regex = regex::bytes::RegexBuilder::new(pattern)
        .case_insensitive(ignore_case)
        .size_limit(1 << 24)
        .build()
        .map_err(|e| {
            ToolError::invalid_argument(format!("`pattern` is not a valid regular expression: {e}"))
        })?;
    let filter = match glob {
        Some(g) if !g.is_empty() => Some((compile_glob(g, "glob")?, g.contains('/'))),
        _ => None,
    };
    let path = parse_path(root, raw)?;
    let mut files: Vec<PathBuf> = Vec::new();
    let mut complete = true;
    match open_dir(root, &path.rel) {
        Ok(_) => {
            let walked = walk(
                root,
                &path.rel,
                WALK_MAX_DEPTH,
                |name| name == ".git",
                |rel, st| {
                    kind(st) == SFlag::S_IFREG
                        && filter.as_ref().is_none_or(|(m, whole)| {
                            if *whole {
                                m.is_match(rel)
                            } else {
                                rel.file_name().is_some_and(|n| m.is_match(n))
                            }
                        })
                },
            )
            .map_err(|e| fs_error(FsError::Os(e), &path.raw, Access::Read))?;
            complete = walked.complete;
            files = walked.found.into_iter().map(|(p, _)| p).collect();
            files.sort_by(|a, b| a.as_os_str().as_bytes().cmp(b.as_os_str().as_bytes()));
        }
        Err(Errno::ENOTDIR) => {
            // One file, named by the agent: say why it cannot be searched.
            let (loc, _, _) = load(root, &path, "grep")?;
            files.push(loc.rel);
        }
        Err(e) => return Err(fs_error(FsError::Os(e), &path.raw, Access::Read)),
    }
    let mut matches: Vec<String> = Vec::new();
    let mut truncated = !complete;
    let mut budget = GREP_MAX_TOTAL_BYTES;
    'files: for rel in &files {
        let Some(content) = read_for_grep(root, rel, &mut budget) else {
            if budget == 0 {
                truncated = true;
                break;
            }
            continue;
        };
        let shown = display(rel);
        for (n, line) in content.split(|b| *b == b'\n').enumerate() {
            if regex.is_match(line) {
                if matches.len() == limit {
                    truncated = true;
                    break 'files;
                }
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                let text = String::from_utf8_lossy(line);
                matches.push(format!(
                    "{shown}:{}:{}",
                    n + 1,
                    shorten(&text, GREP_MAX_LINE_CHARS)
                ));
            }
        }
    }
    Ok(json!({
        "matches": matches,
        "count": matches.len(),
        "truncated": truncated,
    }))
}

/// A text file's content for grep, or `None` (binary, too large, gone, over the budget).
fn read_for_grep(root: &WorkspaceRoot, rel: &Path, budget: &mut u64) -> Option<Vec<u8>> {
    let loc = locate(root, rel, false).ok()?;
    let (file, st) = open_regular(&loc).ok()?;
    let size = st.st_size.max(0) as u64;
    if size > MAX_FILE_BYTES {
        return None;
    }
    if size > *budget {
        *budget = 0;
        return None;
    }
    let mut content = Vec::with_capacity(size as usize);
    file.take(size.min(*budget))
        .read_to_end(&mut content)
        .ok()?;
    *budget -= content.len() as u64;
    if is_binary(&content) {
        return None;
    }
    if content.ends_with(b"\n") {
        content.pop();
    }
    Some(content)
}

// ---------------------------------------------------------------------------------------------
// Schemas

/// The file tools' schemas (aliases accepted by [`call`] are not advertised).
pub fn schemas() -> Vec<ToolSchema> {
    let path = |what: &str| json!({"type": "string", "description": what});
    vec![
        ToolSchema {
            name: "read",
            description: "Read a text file of the workspace. Returns its lines from `offset` \
                          (default 1) up to `limit` lines (default 2000) or 100 KiB, the total \
                          line count, and whether more remains (`next_offset`). Binary files and \
                          files over 16 MiB are refused.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": path("File path, relative to the workspace or absolute under it"),
                    "offset": {"type": "integer", "minimum": 1,
                               "description": "First line to return (1-based)"},
                    "limit": {"type": "integer", "minimum": 1,
                              "description": "Maximum number of lines to return"},
                },
                "required": ["path"],
            }),
        },
        ToolSchema {
            name: "write",
            description: "Create or overwrite a file with the given content. Parent directories \
                          are created as needed.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": path("File path, relative to the workspace or absolute under it"),
                    "content": {"type": "string", "description": "The whole content to write"},
                },
                "required": ["path", "content"],
            }),
        },
        ToolSchema {
            name: "edit",
            description: "Replace an exact piece of text in a file. `old_string` must match the \
                          file exactly (whitespace and indentation included) and occur once, \
                          unless `replace_all` is set.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": path("File path, relative to the workspace or absolute under it"),
                    "old_string": {"type": "string", "description": "The exact text to replace"},
                    "new_string": {"type": "string", "description": "The text to put in its place"},
                    "replace_all": {"type": "boolean", "default": false,
                                    "description": "Replace every occurrence"},
                },
                "required": ["path", "old_string", "new_string"],
            }),
        },
        ToolSchema {
            name: "apply_patch",
            description: "Apply a patch to one or more files: a unified diff (`--- a/PATH`, \
                          `+++ b/PATH`, `@@ -l,n +l,n @@` hunks; /dev/null to add or delete) or \
                          the `*** Begin Patch` format (`*** Add File:`, `*** Update File:`, \
                          `*** Delete File:`, `*** End Patch`). Context lines must match \
                          exactly; if any hunk fails, no file is changed.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "patch": {"type": "string", "description": "The patch text"},
                },
                "required": ["patch"],
            }),
        },
        ToolSchema {
            name: "ls",
            description: "List a directory of the workspace: each entry's name, type and size, \
                          sorted by name.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": path("Directory, relative to the workspace (default: its root)"),
                },
                "required": [],
            }),
        },
        ToolSchema {
            name: "glob",
            description: "Find paths matching a glob pattern (`*`, `?`, `[abc]`, `{a,b}`, `**` \
                          for any number of directories). Returns workspace-relative paths, \
                          sorted. Symbolic links are listed but not followed.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string",
                                "description": "Glob relative to the workspace, e.g. `**/*.py`"},
                    "path": path("Directory the pattern is relative to (default: the root)"),
                },
                "required": ["pattern"],
            }),
        },
        ToolSchema {
            name: "grep",
            description: "Search text files for a regular expression (Rust regex syntax). \
                          Returns `path:line:text` matches, sorted by path and line, capped by \
                          `limit`. Binary files, files over 16 MiB and `.git` directories are \
                          skipped; symbolic links are not followed.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression"},
                    "path": path("File or directory to search (default: the workspace root)"),
                    "glob": {"type": "string",
                             "description": "Only files matching this glob: by file name \
                                             (`*.py`), or by workspace-relative path when it \
                                             contains `/` (`src/**/*.rs`)"},
                    "ignore_case": {"type": "boolean", "default": false,
                                    "description": "Match case-insensitively"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": GREP_MAX_MATCHES,
                              "description": "Maximum number of matches (default 200)"},
                },
                "required": ["pattern"],
            }),
        },
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::tools::{ErrorCategory, call as call_tool};
    use serde_json::Map;
    use std::collections::BTreeMap;
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
    use std::time::Duration;

    const SENTINEL: &str = "SENTINEL-SECRET-7f3a\n";

    #[test]
    fn the_whole_file_shortcut_agrees_with_the_line_window() {
        let long = "line\n".repeat(40) + "end";
        for text in ["", "a", "a\n", "a\nb", "a\n\nb\n", "\n", "é\nü", &long] {
            let lines = line_count(text.as_bytes());
            assert_eq!(lines, text.split_inclusive('\n').count(), "{text:?}");
            let (out, end, cut) = lines_window(text, 0, READ_DEFAULT_LINES);
            assert_eq!((out.as_str(), end, cut), (text, lines, false));
        }
    }

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789)
    }

    /// A temp dir holding `ws/` (the workspace) and `outside/sentinel.txt` beside it.
    struct Fixture {
        tmp: tempfile::TempDir,
        root: WorkspaceRoot,
    }

    fn fixture_with(writable: bool, owner: Option<(u32, u32)>) -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("ws")).unwrap();
        std::fs::create_dir(tmp.path().join("outside")).unwrap();
        std::fs::write(tmp.path().join("outside/sentinel.txt"), SENTINEL).unwrap();
        let root = WorkspaceRoot::open(
            &tmp.path().join("ws"),
            "/workspace",
            vec![PathBuf::from("/root/.openclaw/workspace")],
            writable,
            owner,
        )
        .unwrap();
        Fixture { tmp, root }
    }

    fn fixture() -> Fixture {
        fixture_with(true, None)
    }

    impl Fixture {
        fn ws(&self) -> PathBuf {
            self.tmp.path().join("ws")
        }

        fn put(&self, rel: &str, content: &str) {
            let p = self.ws().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        }

        fn get(&self, rel: &str) -> String {
            std::fs::read_to_string(self.ws().join(rel)).unwrap()
        }

        fn run(&self, tool: &str, args: Value) -> ToolResult {
            call_tool(&self.root, tool, &args, now())
        }

        fn ok(&self, tool: &str, args: Value) -> Map<String, Value> {
            match self.run(tool, args.clone()) {
                ToolResult::Ok(fields) => fields,
                ToolResult::Err(e) => panic!("{tool} {args}: {e}"),
            }
        }

        fn err(&self, tool: &str, args: Value) -> ToolError {
            match self.run(tool, args.clone()) {
                ToolResult::Ok(fields) => panic!("{tool} {args} succeeded: {fields:?}"),
                ToolResult::Err(e) => e,
            }
        }

        /// Every file under the temp dir outside the workspace: content and mtime.
        fn outside(&self) -> BTreeMap<PathBuf, (Vec<u8>, i64, i64)> {
            walkdir::WalkDir::new(self.tmp.path().join("outside"))
                .into_iter()
                .map(|e| e.unwrap())
                .map(|e| {
                    let m = std::fs::symlink_metadata(e.path()).unwrap();
                    let content = if m.is_file() {
                        std::fs::read(e.path()).unwrap()
                    } else {
                        Vec::new()
                    };
                    (e.path().to_path_buf(), (content, m.mtime(), m.mtime_nsec()))
                })
                .collect()
        }

        /// No temporary file of ours is left anywhere in the workspace.
        fn assert_no_temp_files(&self) {
            for e in walkdir::WalkDir::new(self.ws()) {
                let e = e.unwrap();
                let name = e.file_name().to_string_lossy();
                assert!(!name.starts_with(".envcraft-"), "left behind: {name}");
            }
        }
    }

    fn assert_mtime_is_now(path: &Path) {
        let m = std::fs::symlink_metadata(path).unwrap();
        let want = now().duration_since(UNIX_EPOCH).unwrap();
        assert_eq!(
            (m.mtime(), m.mtime_nsec()),
            (want.as_secs() as i64, want.subsec_nanos() as i64),
            "mtime of {}",
            path.display()
        );
        assert_eq!(
            (m.atime(), m.atime_nsec()),
            (want.as_secs() as i64, want.subsec_nanos() as i64),
            "atime of {}",
            path.display()
        );
    }

    fn is_root() -> bool {
        nix::unistd::geteuid().is_root()
    }

    // --- read ---------------------------------------------------------------------------------

    #[test]
    fn read_whole_file_with_line_count() {
        let f = fixture();
        f.put("a.txt", "one\ntwo\nthree\n");
        let r = f.ok("read", json!({"path": "a.txt"}));
        assert_eq!(r["content"], "one\ntwo\nthree\n");
        assert_eq!(r["total_lines"], 3);
        assert_eq!(r["lines"], 3);
        assert_eq!(r["truncated"], false);
        assert_eq!(r["path"], "a.txt");
        assert!(r.get("next_offset").is_none());
    }

    #[test]
    fn read_offset_and_limit() {
        let f = fixture();
        let text: String = (1..=10).map(|n| format!("line {n}\n")).collect();
        f.put("n.txt", &text);
        let r = f.ok("read", json!({"path": "n.txt", "offset": 3, "limit": 2}));
        assert_eq!(r["content"], "line 3\nline 4\n");
        assert_eq!(r["offset"], 3);
        assert_eq!(r["lines"], 2);
        assert_eq!(r["total_lines"], 10);
        assert_eq!(r["truncated"], true);
        assert_eq!(r["next_offset"], 5);
        let r = f.ok("read", json!({"path": "n.txt", "offset": 9}));
        assert_eq!(r["content"], "line 9\nline 10\n");
        assert_eq!(r["truncated"], false);
        let e = f.err("read", json!({"path": "n.txt", "offset": 11}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
        assert!(e.message.contains("10 line"), "{}", e.message);
        let e = f.err("read", json!({"path": "n.txt", "offset": 0}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
        let e = f.err("read", json!({"path": "n.txt", "limit": 0}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
    }

    #[test]
    fn read_caps_output_bytes_on_a_line_boundary() {
        let f = fixture();
        let line = "x".repeat(999) + "\n";
        f.put("big.txt", &line.repeat(300));
        let r = f.ok("read", json!({"path": "big.txt"}));
        let content = r["content"].as_str().unwrap();
        assert!(content.len() <= READ_MAX_OUTPUT_BYTES && content.ends_with('\n'));
        assert_eq!(r["truncated"], true);
        let lines = r["lines"].as_u64().unwrap();
        assert_eq!(r["next_offset"], lines + 1);
        assert_eq!(r["total_lines"], 300);
    }

    #[test]
    fn read_empty_file() {
        let f = fixture();
        f.put("empty", "");
        let r = f.ok("read", json!({"path": "empty"}));
        assert_eq!(r["content"], "");
        assert_eq!(r["total_lines"], 0);
        assert_eq!(r["truncated"], false);
    }

    #[test]
    fn read_refuses_binary_large_directories_and_fifos() {
        let f = fixture();
        std::fs::write(f.ws().join("bin"), b"ab\0cd").unwrap();
        let e = f.err("read", json!({"path": "bin"}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
        assert!(e.message.contains("binary"));

        let big = File::create(f.ws().join("huge")).unwrap();
        big.set_len(MAX_FILE_BYTES + 1).unwrap();
        let e = f.err("read", json!({"path": "huge"}));
        assert_eq!(e.category, ErrorCategory::TooLarge);
        assert!(e.message.contains("`huge`"));

        std::fs::create_dir(f.ws().join("d")).unwrap();
        let e = f.err("read", json!({"path": "d"}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
        assert!(e.message.contains("directory"));

        nix::unistd::mkfifo(&f.ws().join("fifo"), Mode::from_bits_truncate(0o644)).unwrap();
        let e = f.err("read", json!({"path": "fifo"}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
        assert!(e.message.contains("regular"));
    }

    #[test]
    fn read_missing_file_and_missing_field() {
        let f = fixture();
        let e = f.err("read", json!({"path": "nope.txt"}));
        assert_eq!(e.category, ErrorCategory::NotFound);
        assert!(e.message.contains("`nope.txt`"));
        let e = f.err("read", json!({}));
        assert_eq!(e.category, ErrorCategory::MissingField);
        assert!(e.message.contains("`path`"));
        let e = f.err("read", json!({"path": 3}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
    }

    #[test]
    fn read_path_aliases_and_mount_paths() {
        let f = fixture();
        f.put("sub/a.txt", "hello\n");
        for args in [
            json!({"file_path": "sub/a.txt"}),
            json!({"file": "sub/a.txt"}),
            json!({"path": "/workspace/sub/a.txt"}),
            json!({"path": "/root/.openclaw/workspace/sub/a.txt"}),
            json!({"path": "./sub/./a.txt"}),
            json!({"path": "sub/../sub/a.txt"}),
        ] {
            let r = f.ok("read", args);
            assert_eq!(r["content"], "hello\n");
        }
        let r = f.ok("read", json!({"path": "/workspace/sub/a.txt"}));
        assert_eq!(r["path"], "sub/a.txt");
    }

    #[test]
    fn read_follows_relative_symlinks_inside_the_workspace() {
        let f = fixture();
        f.put("real/a.txt", "via link\n");
        symlink("real/a.txt", f.ws().join("file_link")).unwrap();
        symlink("real", f.ws().join("dir_link")).unwrap();
        symlink("../a.txt", f.ws().join("real/up_link")).unwrap();
        for p in ["file_link", "dir_link/a.txt", "real/up_link"] {
            if p == "real/up_link" {
                f.put("a.txt", "via link\n");
            }
            assert_eq!(f.ok("read", json!({"path": p}))["content"], "via link\n");
        }
        symlink("loop_b", f.ws().join("loop_a")).unwrap();
        symlink("loop_a", f.ws().join("loop_b")).unwrap();
        let e = f.err("read", json!({"path": "loop_a"}));
        assert_eq!(e.category, ErrorCategory::Permission);
    }

    // --- write --------------------------------------------------------------------------------

    #[test]
    fn write_creates_parents_and_sets_times() {
        let f = fixture();
        let r = f.ok(
            "write",
            json!({"path": "new/deep/er/f.txt", "content": "hi\n"}),
        );
        assert_eq!(r["created"], true);
        assert_eq!(r["bytes"], 3);
        assert_eq!(r["path"], "new/deep/er/f.txt");
        for p in ["new/deep/er/f.txt", "new/deep/er", "new/deep", "new", ""] {
            assert_mtime_is_now(&f.ws().join(p));
        }
        assert_eq!(f.get("new/deep/er/f.txt"), "hi\n");
        let mode = std::fs::metadata(f.ws().join("new/deep/er/f.txt"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
        f.assert_no_temp_files();
    }

    #[test]
    fn write_overwrites_keeping_the_mode() {
        let f = fixture();
        f.put("run.sh", "old\n");
        std::fs::set_permissions(
            f.ws().join("run.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let r = f.ok(
            "write",
            json!({"file_path": "run.sh", "content": "#!/bin/sh\n"}),
        );
        assert_eq!(r["created"], false);
        assert_mtime_is_now(&f.ws().join("run.sh"));
        assert_eq!(f.get("run.sh"), "#!/bin/sh\n");
        let m = std::fs::metadata(f.ws().join("run.sh")).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o755);
        f.ok("write", json!({"file": "alias.txt", "content": ""}));
        assert_eq!(f.get("alias.txt"), "");
        f.assert_no_temp_files();
    }

    #[test]
    fn write_through_an_inner_symlink_keeps_the_link() {
        let f = fixture();
        f.put("real.txt", "old\n");
        symlink("real.txt", f.ws().join("link.txt")).unwrap();
        f.ok("write", json!({"path": "link.txt", "content": "new\n"}));
        assert_eq!(f.get("real.txt"), "new\n");
        assert!(
            std::fs::symlink_metadata(f.ws().join("link.txt"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn write_failures() {
        let f = fixture();
        std::fs::create_dir(f.ws().join("d")).unwrap();
        let e = f.err("write", json!({"path": "d", "content": "x"}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
        assert!(e.message.contains("directory"));
        let e = f.err("write", json!({"path": "x/", "content": "x"}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
        assert!(!f.ws().join("x").exists());
        let e = f.err("write", json!({"path": "", "content": "x"}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
        f.put("file", "x");
        let e = f.err("write", json!({"path": "file/under", "content": "x"}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
        let e = f.err("write", json!({"path": "a.txt"}));
        assert_eq!(e.category, ErrorCategory::MissingField);
        assert!(e.message.contains("`content`"));
        let e = f.err("write", json!({"content": "x"}));
        assert_eq!(e.category, ErrorCategory::MissingField);
        assert!(e.message.contains("`path`"));
        f.assert_no_temp_files();
    }

    #[test]
    fn write_sets_the_owner() {
        let f = if is_root() {
            fixture_with(true, Some((12345, 23456)))
        } else {
            let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
            fixture_with(true, Some((uid.as_raw(), gid.as_raw())))
        };
        let (uid, gid) = f.root.owner().unwrap();
        // The tools act as the owner (the sandbox's root), who owns the workspace.
        std::os::unix::fs::chown(f.ws(), Some(uid), Some(gid)).unwrap();
        f.ok("write", json!({"path": "o/f.txt", "content": "x"}));
        f.put("e.txt", "a");
        f.ok(
            "edit",
            json!({"path": "e.txt", "old_string": "a", "new_string": "b"}),
        );
        for p in ["o", "o/f.txt", "e.txt"] {
            let m = std::fs::metadata(f.ws().join(p)).unwrap();
            assert_eq!((m.uid(), m.gid()), (uid, gid), "{p}");
        }
    }

    // --- edit ---------------------------------------------------------------------------------

    #[test]
    fn edit_replaces_a_unique_string() {
        let f = fixture();
        f.put("c.py", "def f():\n    return 1\n");
        let r = f.ok(
            "edit",
            json!({"path": "c.py", "old_string": "return 1", "new_string": "return 2"}),
        );
        assert_eq!(r["replacements"], 1);
        assert_mtime_is_now(&f.ws().join("c.py"));
        assert_eq!(f.get("c.py"), "def f():\n    return 2\n");
        f.assert_no_temp_files();
    }

    #[test]
    fn edit_requires_uniqueness_unless_replace_all() {
        let f = fixture();
        f.put("r.txt", "a x a x a\n");
        let e = f.err(
            "edit",
            json!({"path": "r.txt", "old_string": "a", "new_string": "b"}),
        );
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
        assert!(e.message.contains("3 times"), "{}", e.message);
        assert_eq!(f.get("r.txt"), "a x a x a\n");
        let r = f.ok(
            "edit",
            json!({"path": "r.txt", "old_string": "a", "new_string": "b", "replace_all": true}),
        );
        assert_eq!(r["replacements"], 3);
        assert_eq!(f.get("r.txt"), "b x b x b\n");
    }

    #[test]
    fn edit_not_found_and_bad_arguments() {
        let f = fixture();
        f.put("r.txt", "hello\n");
        let e = f.err(
            "edit",
            json!({"path": "r.txt", "old_string": "bye", "new_string": "x"}),
        );
        assert_eq!(e.category, ErrorCategory::NotFound);
        assert!(e.message.contains("`old_string`") && e.message.contains("`r.txt`"));
        let e = f.err(
            "edit",
            json!({"path": "r.txt", "old_string": "", "new_string": "x"}),
        );
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
        let e = f.err(
            "edit",
            json!({"path": "r.txt", "old_string": "hello", "new_string": "hello"}),
        );
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
        let e = f.err(
            "edit",
            json!({"path": "nope", "old_string": "a", "new_string": "b"}),
        );
        assert_eq!(e.category, ErrorCategory::NotFound);
        let e = f.err("edit", json!({"path": "r.txt", "new_string": "b"}));
        assert_eq!(e.category, ErrorCategory::MissingField);
        assert!(e.message.contains("`old_string`"));
        let e = f.err("edit", json!({"path": "r.txt", "old_string": "b"}));
        assert_eq!(e.category, ErrorCategory::MissingField);
        assert!(e.message.contains("`new_string`"));
        assert_eq!(f.get("r.txt"), "hello\n");
    }

    #[test]
    fn edit_accepts_every_alias() {
        let f = fixture();
        f.put("al.txt", "1 1\n");
        f.ok(
            "edit",
            json!({"file_path": "al.txt", "oldText": "1 1", "newText": "2 2"}),
        );
        f.ok(
            "edit",
            json!({"file": "al.txt", "old_str": "2 2", "new_str": "3 3"}),
        );
        f.ok(
            "edit",
            json!({"path": "al.txt", "old_string": "3", "new_string": "4", "replaceAll": true}),
        );
        assert_eq!(f.get("al.txt"), "4 4\n");
    }

    #[test]
    fn edit_keeps_bytes_that_are_not_utf8() {
        let f = fixture();
        std::fs::write(f.ws().join("l1.txt"), b"caf\xe9 old\n").unwrap();
        f.ok(
            "edit",
            json!({"path": "l1.txt", "old_string": "old", "new_string": "new"}),
        );
        assert_eq!(
            std::fs::read(f.ws().join("l1.txt")).unwrap(),
            b"caf\xe9 new\n"
        );
    }

    // --- apply_patch --------------------------------------------------------------------------

    #[test]
    fn apply_patch_unified_multi_file() {
        let f = fixture();
        f.put("a.txt", "1\n2\n3\n");
        f.put("gone.txt", "bye\n");
        let patch = "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n 1\n-2\n+two\n 3\n\
                     --- /dev/null\n+++ b/new/dir/n.txt\n@@ -0,0 +1,2 @@\n+x\n+y\n\
                     --- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n";
        let r = f.ok("apply_patch", json!({"patch": patch}));
        assert_eq!(r["modified"], json!(["a.txt"]));
        assert_eq!(r["added"], json!(["new/dir/n.txt"]));
        assert_eq!(r["deleted"], json!(["gone.txt"]));
        for p in ["a.txt", "new/dir/n.txt", "new/dir", "new", ""] {
            assert_mtime_is_now(&f.ws().join(p));
        }
        assert_eq!(f.get("a.txt"), "1\ntwo\n3\n");
        assert_eq!(f.get("new/dir/n.txt"), "x\ny\n");
        assert!(!f.ws().join("gone.txt").exists());
        f.assert_no_temp_files();
    }

    #[test]
    fn apply_patch_failing_hunk_changes_nothing() {
        let f = fixture();
        f.put("first.txt", "a\nb\n");
        f.put("second.txt", "c\nd\n");
        let before = std::fs::metadata(f.ws().join("first.txt")).unwrap();
        let patch = "--- a/first.txt\n+++ b/first.txt\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n\
                     --- /dev/null\n+++ b/created/new.txt\n@@ -0,0 +1 @@\n+n\n\
                     --- a/second.txt\n+++ b/second.txt\n@@ -1,2 +1,2 @@\n c\n-NOT THERE\n+D\n";
        let e = f.err("apply_patch", json!({"patch": patch}));
        assert_eq!(e.category, ErrorCategory::NotFound);
        assert!(e.message.contains("`second.txt`") && e.message.contains("hunk 1"));
        assert_eq!(f.get("first.txt"), "a\nb\n");
        let after = std::fs::metadata(f.ws().join("first.txt")).unwrap();
        assert_eq!(
            (before.mtime(), before.mtime_nsec(), before.ino()),
            (after.mtime(), after.mtime_nsec(), after.ino())
        );
        assert!(!f.ws().join("created").exists());
        f.assert_no_temp_files();
    }

    #[test]
    fn apply_patch_second_hunk_of_one_file_fails() {
        let f = fixture();
        f.put("one.txt", "a\nb\nc\nd\n");
        let patch = "--- a/one.txt\n+++ b/one.txt\n@@ -1 +1 @@\n-a\n+A\n@@ -4 +4 @@\n-zzz\n+Z\n";
        let e = f.err("apply_patch", json!({"patch": patch}));
        assert_eq!(e.category, ErrorCategory::NotFound);
        assert!(e.message.contains("hunk 2"), "{}", e.message);
        assert_eq!(f.get("one.txt"), "a\nb\nc\nd\n");
    }

    #[test]
    fn apply_patch_begin_patch_format_with_input_alias() {
        let f = fixture();
        f.put("src/app.py", "def main():\n    return 1\n");
        f.put("old.txt", "x\n");
        let patch = "*** Begin Patch\n*** Add File: docs/new.md\n+# New\n\
                     *** Update File: src/app.py\n*** Move to: src/main.py\n@@ def main():\n-    return 1\n+    return 0\n\
                     *** Delete File: old.txt\n*** End Patch\n";
        let r = f.ok("apply_patch", json!({"input": patch}));
        assert_eq!(r["added"], json!(["docs/new.md", "src/main.py"]));
        assert_eq!(r["deleted"], json!(["old.txt", "src/app.py"]));
        assert_eq!(f.get("docs/new.md"), "# New\n");
        assert_eq!(f.get("src/main.py"), "def main():\n    return 0\n");
        assert!(!f.ws().join("src/app.py").exists() && !f.ws().join("old.txt").exists());
    }

    #[test]
    fn apply_patch_refusals() {
        let f = fixture();
        f.put("exists.txt", "x\n");
        let add = "--- /dev/null\n+++ b/exists.txt\n@@ -0,0 +1 @@\n+y\n";
        let e = f.err("apply_patch", json!({"patch": add}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
        assert!(e.message.contains("already exists"));
        let upd = "--- a/missing.txt\n+++ b/missing.txt\n@@ -1 +1 @@\n-a\n+b\n";
        let e = f.err("apply_patch", json!({"patch": upd}));
        assert_eq!(e.category, ErrorCategory::NotFound);
        assert!(e.message.contains("`missing.txt`"));
        let e = f.err("apply_patch", json!({"patch": "not a patch"}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
        let e = f.err("apply_patch", json!({}));
        assert_eq!(e.category, ErrorCategory::MissingField);
        assert!(e.message.contains("`patch`"));
        let del = "--- a/exists.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-other\n";
        let e = f.err("apply_patch", json!({"patch": del}));
        assert_eq!(e.category, ErrorCategory::NotFound);
        assert_eq!(f.get("exists.txt"), "x\n");
        f.assert_no_temp_files();
    }

    #[test]
    fn apply_patch_keeps_mode_and_sees_its_own_earlier_changes() {
        let f = fixture();
        f.put("s.sh", "echo 1\n");
        std::fs::set_permissions(f.ws().join("s.sh"), std::fs::Permissions::from_mode(0o750))
            .unwrap();
        let patch = "--- a/s.sh\n+++ b/s.sh\n@@ -1 +1 @@\n-echo 1\n+echo 2\n\
                     --- a/s.sh\n+++ b/s.sh\n@@ -1 +1 @@\n-echo 2\n+echo 3\n";
        let r = f.ok("apply_patch", json!({"patch": patch}));
        assert_eq!(r["modified"], json!(["s.sh"]));
        assert_eq!(f.get("s.sh"), "echo 3\n");
        let m = std::fs::metadata(f.ws().join("s.sh")).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o750);
    }

    // --- ls, glob, grep -----------------------------------------------------------------------

    #[test]
    fn ls_lists_sorted_entries_with_types() {
        let f = fixture();
        f.put("b.txt", "12345");
        f.put("a/x", "");
        symlink("b.txt", f.ws().join("c")).unwrap();
        let r = f.ok("ls", json!({}));
        assert_eq!(r["path"], ".");
        assert_eq!(
            r["entries"],
            json!([{"name": "a", "type": "dir"},
                   {"name": "b.txt", "type": "file", "size": 5},
                   {"name": "c", "type": "symlink"}])
        );
        let r = f.ok("ls", json!({"path": "/workspace/a"}));
        assert_eq!(
            r["entries"],
            json!([{"name": "x", "type": "file", "size": 0}])
        );
        let e = f.err("ls", json!({"path": "b.txt"}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
        let e = f.err("ls", json!({"path": "nope"}));
        assert_eq!(e.category, ErrorCategory::NotFound);
    }

    #[test]
    fn glob_returns_sorted_relative_paths() {
        let f = fixture();
        for p in [
            "z.txt",
            "a.txt",
            "sub/b.txt",
            "sub/deeper/c.txt",
            "sub/d.md",
        ] {
            f.put(p, "");
        }
        let r = f.ok("glob", json!({"pattern": "**/*.txt"}));
        assert_eq!(
            r["matches"],
            json!(["a.txt", "sub/b.txt", "sub/deeper/c.txt", "z.txt"])
        );
        assert_eq!(r["count"], 4);
        let r = f.ok("glob", json!({"pattern": "*.txt"}));
        assert_eq!(r["matches"], json!(["a.txt", "z.txt"]));
        let r = f.ok("glob", json!({"pattern": "/workspace/sub/*"}));
        assert_eq!(r["matches"], json!(["sub/b.txt", "sub/d.md", "sub/deeper"]));
        let r = f.ok("glob", json!({"pattern": "*.{md,txt}", "path": "sub"}));
        assert_eq!(r["matches"], json!(["sub/b.txt", "sub/d.md"]));
        let r = f.ok("glob", json!({"pattern": "sub/d.md"}));
        assert_eq!(r["matches"], json!(["sub/d.md"]));
        let r = f.ok("glob", json!({"pattern": "nothing/**/*.rs"}));
        assert_eq!(r["matches"], json!([]));
        let e = f.err("glob", json!({"pattern": "[unclosed"}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
        let e = f.err("glob", json!({}));
        assert_eq!(e.category, ErrorCategory::MissingField);
    }

    #[test]
    fn grep_returns_sorted_path_line_text() {
        let f = fixture();
        f.put("b.txt", "nothing\nneedle two\n");
        f.put("a/z.py", "needle one\nNEEDLE caps\n");
        f.put("a/y.txt", "x\r\nneedle crlf\r\n");
        f.put(".git/objects/x", "needle in git\n");
        std::fs::write(f.ws().join("bin"), b"needle\0").unwrap();
        let r = f.ok("grep", json!({"pattern": "needle"}));
        assert_eq!(
            r["matches"],
            json!([
                "a/y.txt:2:needle crlf",
                "a/z.py:1:needle one",
                "b.txt:2:needle two"
            ])
        );
        assert_eq!(r["truncated"], false);
        let r = f.ok(
            "grep",
            json!({"pattern": "needle", "glob": "*.py", "ignore_case": true}),
        );
        assert_eq!(
            r["matches"],
            json!(["a/z.py:1:needle one", "a/z.py:2:NEEDLE caps"])
        );
        let r = f.ok("grep", json!({"pattern": "needle", "glob": "a/*.txt"}));
        assert_eq!(r["matches"], json!(["a/y.txt:2:needle crlf"]));
        let r = f.ok("grep", json!({"pattern": "ne+dle", "path": "b.txt"}));
        assert_eq!(r["matches"], json!(["b.txt:2:needle two"]));
        let r = f.ok("grep", json!({"pattern": "needle", "limit": 1}));
        assert_eq!(r["matches"], json!(["a/y.txt:2:needle crlf"]));
        assert_eq!(r["truncated"], true);
        File::create(f.ws().join("huge.txt"))
            .unwrap()
            .set_len(MAX_FILE_BYTES + 1)
            .unwrap();
        let r = f.ok("grep", json!({"pattern": "absent"}));
        assert_eq!(r["matches"], json!([]));
        let e = f.err("grep", json!({"pattern": "("}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
        let e = f.err("grep", json!({"pattern": "x", "path": "nope"}));
        assert_eq!(e.category, ErrorCategory::NotFound);
        let e = f.err("grep", json!({}));
        assert_eq!(e.category, ErrorCategory::MissingField);
    }

    #[test]
    fn ls_caps_its_listing() {
        let f = fixture();
        for n in 0..LS_MAX_ENTRIES + 5 {
            std::fs::write(f.ws().join(format!("f{n:05}")), "").unwrap();
        }
        let r = f.ok("ls", json!({}));
        assert_eq!(r["entries"].as_array().unwrap().len(), LS_MAX_ENTRIES);
        assert_eq!(r["entries"][0]["name"], "f00000");
        assert_eq!(r["total"], LS_MAX_ENTRIES + 5);
        assert_eq!(r["truncated"], true);
    }

    #[test]
    fn fifos_and_sockets_never_block_a_tool() {
        let f = fixture();
        nix::unistd::mkfifo(&f.ws().join("fifo"), Mode::from_bits_truncate(0o644)).unwrap();
        let _listener = std::os::unix::net::UnixListener::bind(f.ws().join("sock")).unwrap();
        for p in ["fifo", "sock"] {
            let e = f.err("read", json!({"path": p}));
            assert_eq!(e.category, ErrorCategory::InvalidArgument, "{p}");
            let e = f.err(
                "edit",
                json!({"path": p, "old_string": "a", "new_string": "b"}),
            );
            assert_eq!(e.category, ErrorCategory::InvalidArgument, "{p}");
            let e = f.err("write", json!({"path": p, "content": "x"}));
            assert_eq!(e.category, ErrorCategory::InvalidArgument, "{p}");
            let patch = format!("--- a/{p}\n+++ b/{p}\n@@ -1 +1 @@\n-a\n+b\n");
            let e = f.err("apply_patch", json!({"patch": patch}));
            assert_eq!(e.category, ErrorCategory::InvalidArgument, "{p}");
            let e = f.err("grep", json!({"pattern": "x", "path": p}));
            assert_eq!(e.category, ErrorCategory::InvalidArgument, "{p}");
        }
        let r = f.ok("grep", json!({"pattern": "x"}));
        assert_eq!(r["matches"], json!([]));
        let r = f.ok("ls", json!({}));
        assert_eq!(r["entries"][0]["type"], "fifo");
        assert_eq!(r["entries"][1]["type"], "socket");
    }

    #[test]
    fn reading_a_fifo_never_opens_it() {
        // A writer blocked opening the FIFO would be released by any open for reading (and then
        // get EPIPE): the tools look at the type first.
        let f = fixture();
        let fifo = f.ws().join("fifo");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o644)).unwrap();
        let (opened, seen) = std::sync::mpsc::channel();
        let writer_path = fifo.clone();
        let writer = std::thread::spawn(move || {
            let file = std::fs::OpenOptions::new().write(true).open(&writer_path);
            let _ = opened.send(());
            file
        });
        for path in ["fifo", "./fifo", "/workspace/fifo"] {
            let e = f.err("read", json!({"path": path}));
            assert_eq!(e.category, ErrorCategory::InvalidArgument, "{path}");
        }
        assert!(
            seen.recv_timeout(Duration::from_millis(200)).is_err(),
            "read opened the FIFO"
        );
        // Release the writer.
        use std::os::unix::fs::OpenOptionsExt;
        let _reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        assert!(writer.join().unwrap().is_ok());
    }

    // --- read-only workspaces -----------------------------------------------------------------

    #[test]
    fn read_only_workspace_refuses_every_write_tool() {
        let f = fixture_with(false, None);
        f.put("a.txt", "a\n");
        let attempts = [
            ("write", json!({"path": "a.txt", "content": "x"})),
            ("write", json!({"path": "new.txt", "content": "x"})),
            (
                "edit",
                json!({"path": "a.txt", "old_string": "a", "new_string": "b"}),
            ),
            (
                "apply_patch",
                json!({"patch": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n"}),
            ),
        ];
        for (tool, args) in attempts {
            let e = f.err(tool, args);
            assert_eq!(e.category, ErrorCategory::Permission, "{tool}");
            assert!(e.message.contains("write permission"), "{}", e.message);
        }
        assert_eq!(f.get("a.txt"), "a\n");
        assert!(!f.ws().join("new.txt").exists());
        f.ok("read", json!({"path": "a.txt"}));
        f.ok("ls", json!({}));
        f.ok("glob", json!({"pattern": "*"}));
        f.ok("grep", json!({"pattern": "a"}));
    }

    // --- escapes ------------------------------------------------------------------------------

    /// Paths an agent might use to get out, each with a harmless probe name for creating.
    fn escape_fixture() -> (Fixture, Vec<String>) {
        let f = fixture();
        let ws = f.ws();
        let tmp_name = f
            .tmp
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        symlink("/etc", ws.join("etc_link")).unwrap();
        symlink("../..", ws.join("up2")).unwrap();
        symlink("../outside", ws.join("out")).unwrap();
        symlink("../outside/sentinel.txt", ws.join("sentinel_link")).unwrap();
        symlink(
            f.tmp.path().join("outside/sentinel.txt"),
            ws.join("abs_sentinel"),
        )
        .unwrap();
        symlink("/proc/self/root", ws.join("proc_root")).unwrap();
        std::fs::create_dir_all(ws.join("a/b/c")).unwrap();
        symlink("../../../../outside", ws.join("a/b/c/deep")).unwrap();
        symlink(f.tmp.path().join("outside"), ws.join("a/b/c/abs")).unwrap();
        let paths = vec![
            "../outside/sentinel.txt".to_owned(),
            "/etc/passwd".to_owned(),
            "/workspace/../../etc/passwd".to_owned(),
            "/workspace/../outside/sentinel.txt".to_owned(),
            "/proc/self/root/etc/passwd".to_owned(),
            "etc_link/passwd".to_owned(),
            format!("up2/{tmp_name}/outside/sentinel.txt"),
            "out/sentinel.txt".to_owned(),
            "sentinel_link".to_owned(),
            "abs_sentinel".to_owned(),
            "proc_root/etc/passwd".to_owned(),
            "a/b/c/deep/sentinel.txt".to_owned(),
            "a/b/c/abs/sentinel.txt".to_owned(),
            "a/b/../../a/b/c/deep/sentinel.txt".to_owned(),
        ];
        (f, paths)
    }

    /// A name to create next to `path` (never an existing system file).
    fn probe_beside(path: &str) -> String {
        match path.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/envcraft-probe-{}", std::process::id()),
            None => format!("{path}/envcraft-probe-{}", std::process::id()),
        }
    }

    fn assert_refused(f: &Fixture, tool: &str, args: Value) {
        let r = f.run(tool, args.clone());
        let text = serde_json::to_string(&r).unwrap();
        let e = r
            .error()
            .unwrap_or_else(|| panic!("{tool} {args} succeeded: {text}"));
        assert_eq!(
            e.category,
            ErrorCategory::Permission,
            "{tool} {args}: {text}"
        );
        assert!(!text.contains("SENTINEL"), "{text}");
        assert!(!text.contains("root:x:"), "{text}");
        assert!(
            !text.contains(&*f.tmp.path().to_string_lossy()),
            "host path in {text}"
        );
    }

    fn assert_nothing_escaped(f: &Fixture, before: &BTreeMap<PathBuf, (Vec<u8>, i64, i64)>) {
        assert_eq!(
            &f.outside(),
            before,
            "something outside the workspace changed"
        );
        let probe = format!("envcraft-probe-{}", std::process::id());
        assert!(!Path::new("/etc").join(&probe).exists());
        assert!(!f.tmp.path().join("outside").join(&probe).exists());
        assert!(!f.tmp.path().join(&probe).exists());
        f.assert_no_temp_files();
    }

    #[test]
    fn escapes_through_read() {
        let (f, paths) = escape_fixture();
        let before = f.outside();
        for p in &paths {
            assert_refused(&f, "read", json!({"path": p}));
            assert_refused(&f, "read", json!({"file_path": p}));
        }
        assert_nothing_escaped(&f, &before);
    }

    #[test]
    fn escapes_through_write() {
        let (f, paths) = escape_fixture();
        let before = f.outside();
        for p in &paths {
            let target = if p.contains("sentinel") {
                p.clone()
            } else {
                probe_beside(p)
            };
            assert_refused(&f, "write", json!({"path": target, "content": "PWNED"}));
            let probe = probe_beside(p);
            assert_refused(&f, "write", json!({"path": probe, "content": "PWNED"}));
            let nested = format!("{}/x/y.txt", probe_beside(p));
            assert_refused(&f, "write", json!({"path": nested, "content": "PWNED"}));
        }
        assert_nothing_escaped(&f, &before);
    }

    #[test]
    fn escapes_through_edit() {
        let (f, paths) = escape_fixture();
        let before = f.outside();
        for p in &paths {
            // On a system file, a string that is not there: even a broken check writes nothing.
            let old = if p.contains("sentinel") {
                "SENTINEL"
            } else {
                "envcraft-not-in-this-file"
            };
            assert_refused(
                &f,
                "edit",
                json!({"path": p, "old_string": old, "new_string": "PWNED"}),
            );
        }
        assert_nothing_escaped(&f, &before);
    }

    #[test]
    fn escapes_through_apply_patch() {
        let (f, paths) = escape_fixture();
        let before = f.outside();
        for p in &paths {
            let update = if p.contains("sentinel") {
                format!(
                    "--- {p}\n+++ {p}\n@@ -1 +1 @@\n-{}\n+PWNED\n",
                    SENTINEL.trim_end()
                )
            } else {
                format!("--- {p}\n+++ {p}\n@@ -1 +1 @@\n-envcraft-not-there\n+PWNED\n")
            };
            assert_refused(&f, "apply_patch", json!({"patch": update}));
            let probe = probe_beside(p);
            let add = format!("--- /dev/null\n+++ {probe}\n@@ -0,0 +1 @@\n+PWNED\n");
            assert_refused(&f, "apply_patch", json!({"patch": add}));
            let add = format!("*** Begin Patch\n*** Add File: {probe}/n\n+PWNED\n*** End Patch\n");
            assert_refused(&f, "apply_patch", json!({"patch": add}));
            if p.contains("sentinel") {
                let del = format!("*** Begin Patch\n*** Delete File: {p}\n*** End Patch\n");
                assert_refused(&f, "apply_patch", json!({"patch": del}));
            }
            // A move out of the workspace.
            f.put("movable.txt", "m\n");
            let mv = format!(
                "*** Begin Patch\n*** Update File: movable.txt\n*** Move to: {probe}\n@@\n-m\n+PWNED\n*** End Patch\n"
            );
            assert_refused(&f, "apply_patch", json!({"patch": mv}));
            assert_eq!(f.get("movable.txt"), "m\n");
        }
        assert_nothing_escaped(&f, &before);
    }

    #[test]
    fn escapes_through_ls_glob_grep() {
        let (f, paths) = escape_fixture();
        let before = f.outside();
        let dirs = [
            "..",
            "../outside",
            "/etc",
            "/workspace/../..",
            "/proc/self/root",
            "etc_link",
            "up2",
            "out",
            "proc_root",
            "a/b/c/deep",
            "a/b/c/abs",
        ];
        for d in dirs {
            assert_refused(&f, "ls", json!({"path": d}));
            assert_refused(&f, "glob", json!({"pattern": format!("{d}/*")}));
            assert_refused(&f, "glob", json!({"pattern": "*", "path": d}));
            assert_refused(&f, "grep", json!({"pattern": "SENTINEL|root:", "path": d}));
        }
        for p in &paths {
            assert_refused(&f, "grep", json!({"pattern": "SENTINEL|root:", "path": p}));
            // Globs through the links: refused, or only the links themselves (entries of the
            // workspace) found, never what lies beyond them.
            let r = f.run("glob", json!({"pattern": format!("{p}*")}));
            match r.category() {
                None => {
                    let text = serde_json::to_string(&r).unwrap();
                    assert!(
                        !text.contains("sentinel.txt") && !text.contains("passwd"),
                        "{text}"
                    );
                }
                Some(c) => assert_eq!(c, ErrorCategory::Permission, "{p}"),
            }
        }
        // Searching the whole workspace never follows a link out.
        let r = f.ok("grep", json!({"pattern": "SENTINEL|root:"}));
        assert_eq!(r["matches"], json!([]));
        let r = f.ok("glob", json!({"pattern": "**/sentinel.txt"}));
        assert_eq!(r["matches"], json!([]));
        let r = f.ok("glob", json!({"pattern": "**/passwd"}));
        assert_eq!(r["matches"], json!([]));
        assert_nothing_escaped(&f, &before);
    }

    #[test]
    fn magic_links_are_refused_at_any_depth() {
        // A root where magic links are reachable: /proc/self itself.
        let root = WorkspaceRoot::open(Path::new("/proc/self"), "/workspace", vec![], false, None)
            .unwrap();
        for p in [
            "root/etc/passwd",
            "cwd/Cargo.toml",
            "fd/0",
            "exe",
            "task/../root/etc/hostname",
        ] {
            let r = call_tool(&root, "read", &json!({"path": p}), now());
            assert_eq!(r.category(), Some(ErrorCategory::Permission), "{p}: {r:?}");
            let r = call_tool(&root, "ls", &json!({"path": p}), now());
            assert_eq!(r.category(), Some(ErrorCategory::Permission), "{p}: {r:?}");
        }
    }

    #[test]
    fn parse_path_rules() {
        let f = fixture();
        let p = parse_path(&f.root, "/workspace/./a/../b/").unwrap();
        assert_eq!(p.rel, PathBuf::from("a/../b"));
        assert!(p.names_dir);
        let p = parse_path(&f.root, "/root/.openclaw/workspace").unwrap();
        assert_eq!(p.shown(), ".");
        for outside in ["/workspacefoo/a", "/", "/root/.openclaw", "/tmp/x"] {
            let e = parse_path(&f.root, outside).unwrap_err();
            assert_eq!(e.category, ErrorCategory::Permission, "{outside}");
            assert!(e.message.contains("/workspace"));
        }
        assert!(parse_path(&f.root, "a\0b").is_err());
    }

    #[test]
    fn timespec_handles_times_before_the_epoch() {
        let t = timespec(UNIX_EPOCH - Duration::new(1, 250_000_000));
        assert_eq!((t.tv_sec(), t.tv_nsec()), (-2, 750_000_000));
        let t = timespec(now());
        assert_eq!((t.tv_sec(), t.tv_nsec()), (1_700_000_000, 123_456_789));
    }
}
