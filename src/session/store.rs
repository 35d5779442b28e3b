//! A session's directory on disk: its state written atomically (temp file, rename) under
//! the session's lock, and its transcript appended call by call, within the policy's
//! `limits.transcript_bytes`: the call that would pass it, and every later one, is replaced
//! by one truncation event (see [`super::transcript::truncated_line`]); the calls themselves
//! still run and answer the agent.
//!
//! The lock is the directory's owner mark (see `sandbox::stale`): an exclusive `flock` the
//! session's process takes when it makes the directory and holds for the session's life. No
//! other process writes a live session's directory (a sweeper or a resuming server takes only
//! directories whose owner died); within the process, `&mut` access serializes calls, and the
//! server waits a bounded time for a session before answering `lock_timeout`. Holding the lock
//! for the whole session costs nothing per call.
//!
//! Nothing is flushed to disk (no `fsync`): a killed process loses nothing written (the page
//! cache keeps it), and a machine that loses power loses the sandboxes too, whose changes live
//! in memory, so a state file that outlived them would resume nothing. (A flush of the state
//! file and its directory cost each create 37 ms on an ext4 state root, most of the create.)
//! A transcript append is one `write` to a file kept open.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Why the session directory could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn write_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Write {
        path: path.to_path_buf(),
        source,
    }
}

/// The directory of one session, locked (its owner mark). The transcript is opened for each
/// append, not kept open: a session holds as few descriptors as it can (a server holds
/// thousands of sessions under one descriptor limit), and an append after the transcript was
/// replaced whole ([`SessionDir::write_atomic`], an agent harness's own) lands in the new one.
#[derive(Debug)]
pub struct SessionDir {
    pub path: PathBuf,
    /// Bytes appended to the transcript so far.
    transcript_bytes: AtomicU64,
    /// Whether the transcript was cut at its limit (no call is recorded any more).
    transcript_cut: AtomicBool,
    /// An append failed (the state root full): the transcript misses a call the agent was
    /// answered, so the directory must not be resumed (see [`SessionDir::append_transcript`]).
    unrecorded: AtomicBool,
    /// Marks the directory as alive (see `sandbox::stale`: a link to this process's lock, no
    /// descriptor of its own).
    _owner: crate::sandbox::stale::OwnerMark,
}

/// The transcript's file name in a session directory.
pub const TRANSCRIPT: &str = "transcript.jsonl";
/// The state's file name in a session directory (what a resume starts from).
const STATE: &str = "state.json";

impl SessionDir {
    /// Create the directory (mode 0700) for session `id` under `root` (the state root's
    /// `sessions`), marked as owned by this process (see [`crate::sandbox::stale::mark_owner`]).
    pub fn create(root: &Path, id: &str) -> Result<SessionDir, StoreError> {
        let path = root.join(id);
        crate::workspace::state_root::prepare(root)
            .map_err(std::io::Error::other)
            .map_err(write_err(root))?;
        fs::create_dir(&path).map_err(write_err(&path))?;
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o700)).map_err(write_err(&path))?;
        // The process's lock lives in the state root, beside the sandboxes' directories.
        let locks = root.parent().unwrap_or(root);
        let owner = crate::sandbox::stale::mark_owner(&path, locks).map_err(write_err(&path))?;
        drop(open_append(&path.join(TRANSCRIPT))?);
        Ok(SessionDir {
            path,
            transcript_bytes: AtomicU64::new(0),
            transcript_cut: AtomicBool::new(false),
            unrecorded: AtomicBool::new(false),
            _owner: owner,
        })
    }

    /// Replace `name` with `bytes` atomically: a reader sees the old content or the new, never
    /// a part, even if the process dies mid-write.
    pub fn write_atomic(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        if self.unrecorded.load(Ordering::SeqCst) {
            // Nothing of an unrecorded session is kept: a state here would make it resumable.
            return Ok(());
        }
        let target = self.path.join(name);
        let temp = self.path.join(format!(".{name}.tmp"));
        let mut file = File::create(&temp).map_err(write_err(&temp))?;
        file.write_all(bytes).map_err(write_err(&temp))?;
        drop(file);
        fs::rename(&temp, &target).map_err(write_err(&target))?;
        Ok(())
    }

    /// Append `lines` (each ending in a newline) to the transcript in one write: a reader
    /// never sees part of them, nor a call without its result.
    ///
    /// When the write fails (the state root is full), the call has run and is answered, but
    /// a server resuming this directory after a kill would replay the transcript without it:
    /// an answered write would be gone from a session said to be resumed. So the session
    /// becomes unrecorded: `state.json` is removed at once (an unlink needs no free space), a
    /// restarted server drops the directory (`session_not_found`) instead of resuming it, and
    /// nothing more is written to it. The live session keeps working.
    pub fn append_transcript(&self, lines: &[u8]) -> Result<(), StoreError> {
        if self.unrecorded.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.transcript_bytes
            .fetch_add(lines.len() as u64, Ordering::SeqCst);
        let path = self.path.join(TRANSCRIPT);
        let written =
            open_append(&path).and_then(|mut file| file.write_all(lines).map_err(write_err(&path)));
        if written.is_err() {
            self.unrecorded.store(true, Ordering::SeqCst);
            let _ = fs::remove_file(self.path.join(STATE));
        }
        written
    }

    /// Append a call's `lines` unless the transcript would pass `limit` bytes: then append
    /// `cut_line()` instead, once, and nothing for any later call.
    pub fn append_call(
        &self,
        lines: &[u8],
        limit: u64,
        cut_line: impl FnOnce() -> Vec<u8>,
    ) -> Result<Appended, StoreError> {
        if self.transcript_cut.load(Ordering::SeqCst) {
            return Ok(Appended::Omitted);
        }
        let so_far = self.transcript_bytes.load(Ordering::SeqCst);
        if so_far.saturating_add(lines.len() as u64) <= limit {
            self.append_transcript(lines)?;
            return Ok(Appended::Recorded);
        }
        self.transcript_cut.store(true, Ordering::SeqCst);
        self.append_transcript(&cut_line())?;
        Ok(Appended::Cut)
    }

    /// Whether the transcript was cut at its limit.
    pub fn transcript_cut(&self) -> bool {
        self.transcript_cut.load(Ordering::SeqCst)
    }

    /// Bytes appended to the transcript so far.
    pub fn transcript_bytes(&self) -> u64 {
        self.transcript_bytes.load(Ordering::SeqCst)
    }

    /// Remove the directory and everything in it.
    pub fn remove(&self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// What [`SessionDir::append_call`] did with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// Written whole.
    Recorded,
    /// Not written: this call reached the limit, and the truncation event was written.
    Cut,
    /// Not written: the transcript had been cut before.
    Omitted,
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
        let dir = SessionDir::create(&root.path().join("sessions"), "s1").unwrap();
        dir.write_atomic("state.json", b"{\"a\":1}").unwrap();
        dir.write_atomic("state.json", b"{\"a\":2}").unwrap();
        assert_eq!(fs::read(dir.path.join("state.json")).unwrap(), b"{\"a\":2}");
        assert!(!dir.path.join(".state.json.tmp").exists());
    }

    #[test]
    fn a_failed_append_leaves_no_state_to_resume_and_writes_nothing_more() {
        let root = tempfile::tempdir().unwrap();
        let dir = SessionDir::create(&root.path().join("sessions"), "s1").unwrap();
        dir.write_atomic("state.json", b"{}").unwrap();
        dir.append_transcript(b"recorded\n").unwrap();
        // The state root full: every write of the transcript fails with ENOSPC.
        let transcript = dir.path.join(TRANSCRIPT);
        fs::remove_file(&transcript).unwrap();
        std::os::unix::fs::symlink("/dev/full", &transcript).unwrap();
        assert!(dir.append_transcript(b"lost\n").is_err());
        assert!(!dir.path.join("state.json").exists());
        dir.write_atomic("state.json", b"{}").unwrap();
        assert!(
            !dir.path.join("state.json").exists(),
            "a later save made the directory resumable again"
        );
        dir.append_transcript(b"later\n").unwrap();
    }

    #[test]
    fn the_directory_is_locked_for_the_sessions_life() {
        let root = tempfile::tempdir().unwrap();
        let dir = SessionDir::create(&root.path().join("sessions"), "s2").unwrap();
        assert!(!crate::sandbox::stale::owner_gone(&dir.path));
        let path = dir.path.clone();
        drop(dir);
        assert!(crate::sandbox::stale::owner_gone(&path));
    }

    #[test]
    fn the_directories_of_one_process_share_one_lock_descriptor() {
        let root = tempfile::tempdir().unwrap();
        let dirs: Vec<SessionDir> = (0..50)
            .map(|i| SessionDir::create(&root.path().join("sessions"), &format!("s{i}")).unwrap())
            .collect();
        // The descriptors this process holds on files under `root` (other tests of this
        // process open files of their own meanwhile: they are not counted).
        let held = fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter(|fd| fs::read_link(fd.path()).is_ok_and(|to| to.starts_with(root.path())))
            .count();
        assert_eq!(held, 1, "50 session directories hold {held} descriptors");
        assert!(
            dirs.iter()
                .all(|d| !crate::sandbox::stale::owner_gone(&d.path))
        );
        let paths: Vec<PathBuf> = dirs.iter().map(|d| d.path.clone()).collect();
        drop(dirs);
        assert!(paths.iter().all(|p| crate::sandbox::stale::owner_gone(p)));
        // The process's lock went with its last mark.
        let left: Vec<_> = fs::read_dir(root.path())
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(".envcraft-process-")
            })
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn lines_are_appended_in_order() {
        let root = tempfile::tempdir().unwrap();
        let dir = SessionDir::create(&root.path().join("sessions"), "s3").unwrap();
        dir.append_transcript(b"1\n").unwrap();
        dir.append_transcript(b"2\n3\n").unwrap();
        assert_eq!(
            fs::read_to_string(dir.path.join(TRANSCRIPT)).unwrap(),
            "1\n2\n3\n"
        );
    }

    #[test]
    fn calls_past_the_limit_leave_one_cut_event_and_nothing_more() {
        let root = tempfile::tempdir().unwrap();
        let dir = SessionDir::create(&root.path().join("sessions"), "s4").unwrap();
        let cut = || b"CUT\n".to_vec();
        assert_eq!(
            dir.append_call(b"aaaa\n", 10, cut).unwrap(),
            Appended::Recorded
        );
        assert_eq!(
            dir.append_call(b"bbbbbbbb\n", 10, cut).unwrap(),
            Appended::Cut
        );
        assert_eq!(dir.append_call(b"c\n", 10, cut).unwrap(), Appended::Omitted);
        assert!(dir.transcript_cut());
        assert_eq!(
            fs::read_to_string(dir.path.join(TRANSCRIPT)).unwrap(),
            "aaaa\nCUT\n"
        );
        assert_eq!(dir.transcript_bytes(), 9);
    }
}
