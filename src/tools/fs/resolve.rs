//! Paths the agent gives, resolved beneath the workspace root by the kernel, and regular
//! files read through what was resolved (never a FIFO's blocking open, never past the size cap).

use std::ffi::{CString, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, readlinkat};
use nix::sys::stat::{FileStat, SFlag, fstat, fstatat};

use super::*;
use crate::sys;
use crate::tools::{ToolError, shorten};

/// A path as the agent gave it, made relative to the workspace root (lexically: `.` dropped,
/// `..` kept for the kernel to refuse or resolve).
#[derive(Debug, Clone)]
pub(crate) struct AgentPath {
    /// The agent's own text, shortened, for messages.
    pub(crate) raw: String,
    pub(crate) rel: PathBuf,
    /// Ends with `/`, `/.` or `/..`: names a directory.
    pub(crate) names_dir: bool,
}

impl AgentPath {
    /// Workspace-relative, for results.
    pub(crate) fn shown(&self) -> String {
        display(&self.rel)
    }
}

pub(crate) fn display(rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        ".".to_owned()
    } else {
        rel.to_string_lossy().into_owned()
    }
}

pub(crate) fn parse_path(root: &WorkspaceRoot, raw: &str) -> Result<AgentPath, ToolError> {
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
    let mounted = root
        .shape
        .mounts
        .iter()
        .find_map(|(at, dir)| path.strip_prefix(at).ok().map(|rest| dir.join(rest)));
    let rel = if let Some(rel) = &mounted {
        rel.as_path()
    } else if path.is_absolute() {
        let under = std::iter::once(&root.shape.mount)
            .chain(&root.shape.aliases)
            .find_map(|m| path.strip_prefix(m).ok());
        match under {
            Some(rel) => rel,
            None => {
                return Err(ToolError::permission(format!(
                    "`{shown_raw}` is outside the workspace: the file tools may only reach paths \
                     under {} (or relative to it)",
                    root.shape.mount.display()
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
pub(crate) enum FsError {
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

pub(crate) fn errno(e: io::Error) -> Errno {
    Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
}

/// The agent-safe message for a failed step on `path`.
pub(crate) fn fs_error(e: FsError, path: &str, access: Access) -> ToolError {
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

pub(crate) fn cstring(path: &Path) -> Result<CString, Errno> {
    let bytes = path.as_os_str().as_bytes();
    let bytes = if bytes.is_empty() { b"." } else { bytes };
    CString::new(bytes).map_err(|_| Errno::EINVAL)
}

/// `openat2` from `dir`, retried when the kernel asks (EAGAIN: a rename raced the lookup).
pub(crate) fn open_at(
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
pub(crate) fn open_dir(root: &WorkspaceRoot, rel: &Path) -> Result<OwnedFd, Errno> {
    open_at(
        root.dir(),
        rel,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY,
        0,
        BENEATH,
    )
}

pub(crate) fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT
}

/// The last component of `rel` and the path of its directory; `None` when `rel` names the
/// root or ends with `..`.
pub(crate) fn split_last(rel: &Path) -> Option<(PathBuf, OsString)> {
    let mut comps: Vec<Component<'_>> = rel.components().collect();
    match comps.pop() {
        Some(Component::Normal(name)) => Some((comps.iter().collect(), name.to_owned())),
        _ => None,
    }
}

/// A file's directory (opened beneath the root) and its name there.
#[derive(Debug)]
pub(crate) struct Located {
    pub(crate) dir: OwnedFd,
    pub(crate) name: OsString,
    /// The workspace-relative path it was found at (after following symbolic links).
    pub(crate) rel: PathBuf,
    /// What the name was when it was located (known when links were followed).
    pub(crate) stat: Option<FileStat>,
}

/// Find the directory and name of `rel`, following symbolic links in the last component when
/// `follow` (relative ones only; each hop is looked up beneath the root again).
pub(crate) fn locate(root: &WorkspaceRoot, rel: &Path, follow: bool) -> Result<Located, FsError> {
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
pub(crate) fn open_regular(loc: &Located) -> Result<(File, FileStat), FsError> {
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
pub(crate) fn load(
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
pub(crate) fn load_content(
    root: &WorkspaceRoot,
    path: &AgentPath,
    tool: &str,
) -> Result<Vec<u8>, ToolError> {
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
pub(crate) fn open_regular_directly(root: &WorkspaceRoot, rel: &Path) -> Option<(File, FileStat)> {
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
pub(crate) fn read_regular(
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

pub(crate) fn is_binary(content: &[u8]) -> bool {
    content[..content.len().min(BINARY_SNIFF_BYTES)].contains(&0)
}

/// A regular file's content, at most [`MAX_FILE_BYTES`] + 1 bytes, for a file `size` bytes
/// long when it was opened: one `read` into room for one byte more, and more reads only if
/// that filled it (the file grew); a short read of a regular file is its end.
pub(crate) fn read_all(mut file: File, size: usize) -> io::Result<Vec<u8>> {
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
