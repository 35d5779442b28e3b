//! A session's directory on disk: its state written atomically (temp file, fsync, rename) under
//! a file lock taken with a bounded wait, and its transcript appended call by call.
//!
//! A transcript append is one `write` to a file kept open, not flushed to disk: a killed
//! process loses nothing written (the page cache keeps it); a machine that loses power loses
//! the sandboxes too, whose changes live in memory.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Why the session directory could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("session {0} is busy: its lock was not released within the wait")]
    LockTimeout(String),
}

fn write_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// The directory of one session, with its lock file and transcript kept open.
#[derive(Debug)]
pub struct SessionDir {
    pub path: PathBuf,
    lock_file: File,
    transcript: File,
    /// Keeps the directory marked as alive (see `sandbox::stale`).
    _owner: Option<crate::sandbox::stale::OwnerMark>,
}

/// The transcript's file name in a session directory.
pub const TRANSCRIPT: &str = "transcript.jsonl";

/// A held session lock; released on drop.
pub struct SessionLock<'a> {
    file: &'a File,
}

impl Drop for SessionLock<'_> {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

impl SessionDir {
    /// Create the directory (mode 0700) for session `id` under `root`.
    pub fn create(root: &Path, id: &str) -> Result<SessionDir, StoreError> {
        let path = root.join(id);
        fs::create_dir_all(root).map_err(write_err(root))?;
        fs::create_dir(&path).map_err(write_err(&path))?;
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o700)).map_err(write_err(&path))?;
        let owner = crate::sandbox::stale::mark_owner(&path).map_err(write_err(&path))?;
        let lock_path = path.join("lock");
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(write_err(&lock_path))?;
        let transcript = open_append(&path.join(TRANSCRIPT))?;
        Ok(SessionDir {
            path,
            lock_file,
            transcript,
            _owner: Some(owner),
        })
    }

    /// Take the session's lock, waiting at most `wait`. The lock is the session's across
    /// processes (an flock on its lock file); within one process `&mut` access serializes.
    pub fn lock(&self, wait: Duration) -> Result<SessionLock<'_>, StoreError> {
        let deadline = Instant::now() + wait;
        loop {
            match self.lock_file.try_lock() {
                Ok(()) => {
                    return Ok(SessionLock {
                        file: &self.lock_file,
                    });
                }
                Err(fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(fs::TryLockError::WouldBlock) => {
                    let id = self
                        .path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    return Err(StoreError::LockTimeout(id));
                }
                Err(fs::TryLockError::Error(e)) => {
                    return Err(write_err(&self.path.join("lock"))(e));
                }
            }
        }
    }

    /// Replace `name` with `bytes` atomically: a reader sees the old content or the new, never
    /// a part, even if the process dies mid-write.
    pub fn write_atomic(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let target = self.path.join(name);
        let temp = self.path.join(format!(".{name}.tmp"));
        let mut file = File::create(&temp).map_err(write_err(&temp))?;
        file.write_all(bytes).map_err(write_err(&temp))?;
        file.sync_all().map_err(write_err(&temp))?;
        drop(file);
        fs::rename(&temp, &target).map_err(write_err(&target))?;
        File::open(&self.path)
            .and_then(|dir| nix::unistd::fsync(dir.as_fd()).map_err(io::Error::from))
            .map_err(write_err(&self.path))?;
        Ok(())
    }

    /// Append `lines` (each ending in a newline) to the transcript in one write: a reader
    /// never sees part of them, nor a call without its result.
    pub fn append_transcript(&self, lines: &[u8]) -> Result<(), StoreError> {
        (&self.transcript)
            .write_all(lines)
            .map_err(write_err(&self.path.join(TRANSCRIPT)))
    }

    /// Remove the directory and everything in it.
    pub fn remove(&self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

fn open_append(path: &Path) -> Result<File, StoreError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(write_err(path))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn atomic_write_replaces_whole_content() {
        let root = tempfile::tempdir().unwrap();
        let dir = SessionDir::create(root.path(), "s1").unwrap();
        dir.write_atomic("state.json", b"{\"a\":1}").unwrap();
        dir.write_atomic("state.json", b"{\"a\":2}").unwrap();
        assert_eq!(fs::read(dir.path.join("state.json")).unwrap(), b"{\"a\":2}");
        assert!(!dir.path.join(".state.json.tmp").exists());
    }

    #[test]
    fn a_second_lock_times_out_and_is_granted_after_release() {
        let root = tempfile::tempdir().unwrap();
        let dir = SessionDir::create(root.path(), "s2").unwrap();
        let held = dir.lock(Duration::from_millis(10)).unwrap();
        // Another process's view of the same session: its own open of the lock file.
        let other_dir = SessionDir {
            path: dir.path.clone(),
            lock_file: OpenOptions::new()
                .write(true)
                .open(dir.path.join("lock"))
                .unwrap(),
            transcript: open_append(&dir.path.join(TRANSCRIPT)).unwrap(),
            _owner: None,
        };
        let other = other_dir.lock(Duration::from_millis(30));
        assert!(matches!(other, Err(StoreError::LockTimeout(ref id)) if id == "s2"));
        drop(held);
        assert!(dir.lock(Duration::from_millis(10)).is_ok());
    }

    #[test]
    fn lines_are_appended_in_order() {
        let root = tempfile::tempdir().unwrap();
        let dir = SessionDir::create(root.path(), "s3").unwrap();
        dir.append_transcript(b"1\n").unwrap();
        dir.append_transcript(b"2\n3\n").unwrap();
        assert_eq!(
            fs::read_to_string(dir.path.join(TRANSCRIPT)).unwrap(),
            "1\n2\n3\n"
        );
    }
}
