//! A task source read without following links: every file an importer looks at is opened
//! relative to the source's root directory with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` and `O_NOFOLLOW`, its type taken from
//! `fstat` on that descriptor, and its bytes read from that same descriptor.
//!
//! Promises: a symbolic link anywhere below the root (as the file itself or on the way to
//! it), a FIFO, a socket or a device is refused with [`ImportError::LinkOrSpecial`], naming
//! the task and the file; nothing is opened for reading before `fstat` said it is a regular
//! file (anything else is opened `O_PATH` only, so a FIFO can never block an import); a
//! walk is bounded in depth and in files. The root itself is the path the user named: links
//! on the way to it are the user's own and are followed.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::sys::stat::FileStat;

use super::ImportError;

/// The deepest directory a walk of a source descends to.
pub const MAX_WALK_DEPTH: usize = 64;
/// The most files one walk of a source plans.
pub const MAX_WALK_FILES: usize = 100_000;

const RESOLVE: u64 =
    libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;

/// A file of a source, planned to be copied: the root as the user named it and the file's
/// path below it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    pub root: PathBuf,
    pub rel: PathBuf,
}

/// What a path below the root is, looked at without following anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    File,
    Dir,
    /// Anything else: a symbolic link (the file itself or one on the way), a FIFO, a socket,
    /// a device; the words say which.
    Refused(&'static str),
}

/// The open root directory of a task source.
#[derive(Debug)]
pub struct SourceRoot {
    path: PathBuf,
    fd: OwnedFd,
}

impl SourceRoot {
    /// Open `path` (following links on the way: it is the path the user named).
    pub fn open(path: &Path) -> Result<SourceRoot, ImportError> {
        let at = if path.as_os_str().is_empty() {
            Path::new(".")
        } else {
            path
        };
        use std::os::unix::fs::OpenOptionsExt;
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY)
            .open(at)
            .map_err(|source| ImportError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(SourceRoot {
            path: at.to_path_buf(),
            fd: OwnedFd::from(dir),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `rel` as the user would name it (for messages).
    pub fn display(&self, rel: &Path) -> PathBuf {
        self.path.join(rel)
    }

    /// A planned copy of `rel`.
    pub fn file(&self, rel: &Path) -> SourceFile {
        SourceFile {
            root: self.path.clone(),
            rel: rel.to_path_buf(),
        }
    }

    fn refused(&self, task: &str, rel: &Path, kind: &'static str) -> ImportError {
        ImportError::LinkOrSpecial {
            task: task.to_string(),
            path: self.display(rel),
            kind,
        }
    }

    /// Open `rel` below the root with `flags`: links refused at every step.
    fn open_beneath(
        &self,
        dir: std::os::fd::BorrowedFd<'_>,
        rel: &Path,
        flags: libc::c_int,
    ) -> io::Result<OwnedFd> {
        let name = if rel.as_os_str().is_empty() {
            CString::new(".")
        } else {
            CString::new(rel.as_os_str().as_bytes())
        }
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        crate::sys::openat2(dir, &name, flags | libc::O_NOFOLLOW, 0, RESOLVE)
    }

    /// What `rel` is, without following anything; `None` when it does not exist.
    pub fn probe(&self, task: &str, rel: &Path) -> Result<Option<SourceKind>, ImportError> {
        self.probe_at(self.fd.as_fd(), task, rel, rel)
    }

    fn probe_at(
        &self,
        dir: std::os::fd::BorrowedFd<'_>,
        task: &str,
        name: &Path,
        rel: &Path,
    ) -> Result<Option<SourceKind>, ImportError> {
        if !is_below(rel) {
            return Err(self.refused(task, rel, "outside the task source"));
        }
        // O_PATH with O_NOFOLLOW gives the link itself when the last step is one.
        match self.open_beneath(dir, name, libc::O_PATH) {
            Ok(fd) => Ok(Some(kind_of(&stat(&fd).map_err(|source| {
                ImportError::Read {
                    path: self.display(rel),
                    source,
                }
            })?))),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            // A link on the way, or a way out of the root.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::EXDEV)) => {
                Ok(Some(SourceKind::Refused("reached through a symbolic link")))
            }
            Err(source) => Err(ImportError::Read {
                path: self.display(rel),
                source,
            }),
        }
    }

    /// Open the regular file `rel` for reading; anything else is refused.
    pub fn open_file(&self, task: &str, rel: &Path) -> Result<(File, FileStat), ImportError> {
        if !is_below(rel) {
            return Err(self.refused(task, rel, "outside the task source"));
        }
        let read_err = |source| ImportError::Read {
            path: self.display(rel),
            source,
        };
        // O_NONBLOCK: a FIFO swapped in opens at once (and is then refused), never blocks.
        let fd = match self.open_beneath(
            self.fd.as_fd(),
            rel,
            libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY,
        ) {
            Ok(fd) => fd,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::EXDEV)) => {
                return Err(self.refused(task, rel, "a symbolic link"));
            }
            Err(e) => return Err(read_err(e)),
        };
        let st = stat(&fd).map_err(read_err)?;
        match kind_of(&st) {
            SourceKind::File => Ok((File::from(fd), st)),
            SourceKind::Dir => Err(read_err(io::Error::from_raw_os_error(libc::EISDIR))),
            SourceKind::Refused(kind) => Err(self.refused(task, rel, kind)),
        }
    }

    /// The regular file `rel` as text, refused past `max` bytes.
    pub fn read_text(&self, task: &str, rel: &Path, max: u64) -> Result<String, ImportError> {
        let (file, st) = self.open_file(task, rel)?;
        if st.st_size as u64 > max {
            return Err(ImportError::Unrepresentable {
                path: self.display(rel),
                reason: format!(
                    "it holds {} bytes; task files of at most {max} bytes are read",
                    st.st_size
                ),
            });
        }
        let mut text = String::new();
        file.take(max)
            .read_to_string(&mut text)
            .map_err(|source| ImportError::Read {
                path: self.display(rel),
                source,
            })?;
        Ok(text)
    }

    /// Plan a copy of every regular file under the directory `from` to `to/REL`; links and
    /// special files are refused, directories descended into (at most [`MAX_WALK_DEPTH`]
    /// deep, [`MAX_WALK_FILES`] files).
    pub fn walk_files(
        &self,
        task: &str,
        from: &Path,
        to: &Path,
        files: &mut Vec<(PathBuf, SourceFile)>,
    ) -> Result<(), ImportError> {
        let read_err = |rel: &Path| {
            let path = self.display(rel);
            move |source| ImportError::Read { path, source }
        };
        let root_dir =
            match self.open_beneath(self.fd.as_fd(), from, libc::O_RDONLY | libc::O_DIRECTORY) {
                Ok(fd) => fd,
                Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::EXDEV)) => {
                    return Err(self.refused(task, from, "a symbolic link"));
                }
                Err(e) => return Err(read_err(from)(e)),
            };
        let mut stack: Vec<(OwnedFd, PathBuf, usize)> = vec![(root_dir, PathBuf::new(), 0)];
        let mut planned = 0usize;
        while let Some((dir_fd, inner, depth)) = stack.pop() {
            let here = from.join(&inner);
            let dup = dir_fd.try_clone().map_err(read_err(&here))?;
            let mut dir = nix::dir::Dir::from_fd(dup).map_err(|e| read_err(&here)(e.into()))?;
            let mut names: Vec<std::ffi::OsString> = Vec::new();
            for entry in dir.iter() {
                let entry = entry.map_err(|e| read_err(&here)(e.into()))?;
                let name = entry.file_name().to_bytes();
                if name != b"." && name != b".." {
                    names.push(std::ffi::OsStr::from_bytes(name).to_os_string());
                }
            }
            names.sort();
            for name in names {
                let rel = here.join(&name);
                let kind = self.probe_at(dir_fd.as_fd(), task, Path::new(&name), &rel)?;
                match kind {
                    Some(SourceKind::Dir) => {
                        if depth + 1 > MAX_WALK_DEPTH {
                            return Err(ImportError::Unrepresentable {
                                path: self.display(&rel),
                                reason: format!(
                                    "directories nest deeper than {MAX_WALK_DEPTH} levels"
                                ),
                            });
                        }
                        let fd = self
                            .open_beneath(
                                dir_fd.as_fd(),
                                Path::new(&name),
                                libc::O_RDONLY | libc::O_DIRECTORY,
                            )
                            .map_err(|e| match e.raw_os_error() {
                                Some(libc::ELOOP | libc::EXDEV | libc::ENOTDIR) => {
                                    self.refused(task, &rel, "a symbolic link")
                                }
                                _ => read_err(&rel)(e),
                            })?;
                        stack.push((fd, inner.join(&name), depth + 1));
                    }
                    Some(SourceKind::File) => {
                        planned += 1;
                        if planned > MAX_WALK_FILES {
                            return Err(ImportError::Unrepresentable {
                                path: self.display(from),
                                reason: format!("it holds more than {MAX_WALK_FILES} files"),
                            });
                        }
                        files.push((to.join(inner.join(&name)), self.file(&rel)));
                    }
                    Some(SourceKind::Refused(kind)) => return Err(self.refused(task, &rel, kind)),
                    // Gone since it was listed.
                    None => {}
                }
            }
        }
        Ok(())
    }
}

impl SourceFile {
    /// Copy this file (bytes, and permission bits without setuid/setgid/sticky) to a new file
    /// at `target`, checked on open as [`SourceRoot::open_file`] does.
    pub fn copy_to(&self, task: &str, target: &Path) -> Result<(), ImportError> {
        use std::os::unix::fs::PermissionsExt;
        let root = SourceRoot::open(&self.root)?;
        let (mut from, st) = root.open_file(task, &self.rel)?;
        let write_err = |source| ImportError::Write {
            path: target.to_path_buf(),
            source,
        };
        let mut to = File::create_new(target).map_err(write_err)?;
        io::copy(&mut from, &mut to).map_err(write_err)?;
        to.set_permissions(std::fs::Permissions::from_mode(st.st_mode & 0o777))
            .map_err(write_err)
    }
}

fn stat(fd: &OwnedFd) -> io::Result<FileStat> {
    nix::sys::stat::fstat(fd).map_err(io::Error::from)
}

fn kind_of(st: &FileStat) -> SourceKind {
    match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => SourceKind::File,
        libc::S_IFDIR => SourceKind::Dir,
        libc::S_IFLNK => SourceKind::Refused("a symbolic link"),
        libc::S_IFIFO => SourceKind::Refused("a FIFO"),
        libc::S_IFSOCK => SourceKind::Refused("a socket"),
        libc::S_IFCHR => SourceKind::Refused("a character device"),
        libc::S_IFBLK => SourceKind::Refused("a block device"),
        _ => SourceKind::Refused("a special file"),
    }
}

/// Whether `rel` is relative and stays below the root by its words alone (the kernel checks
/// the rest).
fn is_below(rel: &Path) -> bool {
    rel.components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}
