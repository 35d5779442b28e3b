//! Reading what `run --keep DIR` left: every name beneath `DIR`, opened by descriptor one
//! component at a time, never through a link (what the agent made may be a link to a host
//! file: it is shown as a link, never read), and every read bounded.

use std::ffi::CString;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::sys::stat::SFlag;

use super::ViewError;
use crate::workspace::name;
use crate::workspace::tree;

/// One kept name, as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A regular file: its size and its first bytes (at most the bound asked for).
    File {
        size: u64,
        head: Vec<u8>,
    },
    /// A symbolic link and its target (never followed).
    Link(Vec<u8>),
    Dir,
    /// A FIFO, socket or device: named, not read.
    Special,
}

/// A kept run's directory, open.
pub struct Kept {
    root: OwnedFd,
    path: PathBuf,
}

impl Kept {
    pub fn open(path: &Path) -> Result<Kept, ViewError> {
        let root = tree::open_root(path).map_err(|e| ViewError::Open {
            path: path.to_path_buf(),
            source: std::io::Error::other(e),
        })?;
        Ok(Kept {
            root,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The entry at `rel` (an encoded `/`-separated path, see [`name`]), reading at most
    /// `max` bytes of a file; `None` when it is not there (or cannot be reached by
    /// directories alone).
    pub fn entry(&self, rel: &str, max: usize) -> Option<Entry> {
        let raw = name::decode(rel);
        let parts: Vec<&[u8]> = raw
            .split(|b| *b == b'/')
            .filter(|p| !p.is_empty())
            .collect();
        let (last, parents) = parts.split_last()?;
        let mut dir: Option<OwnedFd> = None;
        for part in parents {
            let c = CString::new(*part).ok()?;
            let (fd, _) = tree::open_dir(dir.as_ref().unwrap_or(&self.root), &c).ok()?;
            dir = Some(fd);
        }
        let parent = dir.as_ref().unwrap_or(&self.root);
        let c = CString::new(*last).ok()?;
        let st = tree::stat_child(parent, &c)?;
        let kind = tree::kind(&st);
        if kind == SFlag::S_IFLNK {
            return tree::read_link(parent, &c).ok().map(Entry::Link);
        }
        if kind == SFlag::S_IFDIR {
            return Some(Entry::Dir);
        }
        if kind != SFlag::S_IFREG {
            return Some(Entry::Special);
        }
        let (file, st) = tree::open_file(parent, &c).ok()?;
        let mut head = Vec::with_capacity(max.min(st.st_size.max(0) as usize));
        file.take(max as u64).read_to_end(&mut head).ok()?;
        Some(Entry::File {
            size: st.st_size.max(0) as u64,
            head,
        })
    }

    /// A top-level file of the kept directory (`transcript.jsonl`, `report.json`, ...), at
    /// most `max` bytes; `Ok(None)` when absent, an error when it is larger than `max`.
    pub fn file(&self, name: &str, max: usize) -> Result<Option<Vec<u8>>, ViewError> {
        match self.entry(name, max) {
            None => Ok(None),
            Some(Entry::File { size, head }) if size <= max as u64 => Ok(Some(head)),
            Some(Entry::File { size, .. }) => Err(ViewError::TooLarge {
                path: self.path.join(name),
                size,
                max: max as u64,
            }),
            Some(_) => Err(ViewError::NotAFile(self.path.join(name))),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn links_are_named_not_followed_and_reads_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "host secret").unwrap();
        let kept = dir.path().join("kept");
        std::fs::create_dir_all(kept.join("files/sub")).unwrap();
        std::fs::write(kept.join("files/sub/big.txt"), "0123456789").unwrap();
        std::os::unix::fs::symlink(&secret, kept.join("files/link")).unwrap();
        std::os::unix::fs::symlink(dir.path(), kept.join("files/dirlink")).unwrap();
        let k = Kept::open(&kept).unwrap();
        assert_eq!(
            k.entry("files/sub/big.txt", 4),
            Some(Entry::File {
                size: 10,
                head: b"0123".to_vec()
            })
        );
        assert_eq!(
            k.entry("files/link", 100),
            Some(Entry::Link(secret.as_os_str().as_encoded_bytes().to_vec()))
        );
        // Through a link to a directory: not reached.
        assert_eq!(k.entry("files/dirlink/secret", 100), None);
        assert_eq!(k.entry("files/../secret", 100), None);
        assert_eq!(k.entry("files/sub", 100), Some(Entry::Dir));
        assert!(matches!(
            k.file("files/sub/big.txt", 4),
            Err(ViewError::TooLarge { size: 10, .. })
        ));
        assert_eq!(k.file("absent.json", 4).unwrap(), None);
    }
}
