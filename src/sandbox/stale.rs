//! What a killed envcraft leaves behind, and its removal.
//!
//! A sandbox's processes and mounts die with envcraft (the init has a parent-death signal and
//! the kernel then ends the PID and mount namespaces), but directories do not: a run's state
//! directory, a session's directory and a run's cgroups. Each directory holds a file its owner
//! keeps locked; the first sandbox a process starts removes those whose lock is free (the
//! owner died), and their cgroups. A killed run whose state directory went with its state
//! root (a temporary one, say) leaves cgroups no state directory names: `envcraft-*` cgroups
//! older than [`CGROUP_GRACE`] go too when neither they nor the run's cgroup of the same name
//! in another hierarchy hold a process (a live run's pids cgroup is never empty for long: its
//! init joins it as soon as it is made; on v1 its memory cgroup is empty while no command
//! runs; and the kernel refuses to remove a cgroup that holds a process). Parked `spare-*` cgroups (see `cgroup`) are not removed: they are empty by
//! construction, at most `cgroup::SPARES_MAX` per hierarchy, and are the next runs' cgroups.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once, Weak};

const OWNER: &str = ".envcraft-owner";
/// The names of the locks a process's marks link to (see [`mark_owner`]).
const PROCESS_MARK: &str = ".envcraft-process-";

/// Mark `dir` as owned by this process for as long as the returned mark lives: `dir/.envcraft-owner`
/// is a hard link to a file in `locks` (the state root) that this process keeps locked (an exclusive `flock`, which the kernel
/// releases when the owner dies; pids would not do: envcraft may run in PID namespaces of its
/// own). One such file, and one descriptor, serves every directory a process marks under one
/// state root (a server marks two directories for each of thousands of sessions under one
/// descriptor limit); it is removed once the last of its marks is dropped. Links are made under
/// a temporary name and renamed into place, so a sweeper never sees a mark unlocked. Where no
/// link can be made (another filesystem, too many links), `dir` gets a lock of its own.
pub fn mark_owner(dir: &Path, locks: &Path) -> std::io::Result<OwnerMark> {
    if let Ok(shared) = process_mark(locks)
        && link_mark(&shared.path, dir).is_ok()
    {
        return Ok(OwnerMark {
            _shared: Some(shared),
            _own: None,
        });
    }
    let temp = dir.join(format!("{OWNER}.{}", std::process::id()));
    let file = fs::File::create(&temp)?;
    let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| std::io::Error::from(e))?;
    fs::rename(&temp, dir.join(OWNER))?;
    Ok(OwnerMark {
        _shared: None,
        _own: Some(lock),
    })
}

/// `dir/.envcraft-owner` made a hard link to `mark`.
fn link_mark(mark: &Path, dir: &Path) -> std::io::Result<()> {
    let temp = dir.join(format!("{OWNER}.{}", std::process::id()));
    fs::hard_link(mark, &temp)?;
    fs::rename(&temp, dir.join(OWNER))
}

/// The lock in `parent` this process's marks link to, made on first use.
fn process_mark(parent: &Path) -> std::io::Result<Arc<ProcessMark>> {
    static MARKS: Mutex<Vec<(PathBuf, Weak<ProcessMark>)>> = Mutex::new(Vec::new());
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut marks = MARKS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(mark) = marks
        .iter()
        .find(|(p, _)| p == parent)
        .and_then(|(_, mark)| mark.upgrade())
    {
        return Ok(mark);
    }
    let (path, lock) = new_lock(
        parent,
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
    )?;
    let mark = Arc::new(ProcessMark { path, _lock: lock });
    marks.retain(|(_, m)| m.strong_count() > 0);
    marks.push((parent.to_path_buf(), Arc::downgrade(&mark)));
    Ok(mark)
}

/// A new locked file in `parent` for this process's marks, under a name no other process uses:
/// the pid (`pid`) alone would not do, for two envcraft processes in two PID namespaces of their
/// own (`contained`, containers) have the same pids, and the second's lock took the first's name
/// (a rename replaces), so that the first's later marks linked to the second's lock and were
/// swept as soon as the second exited, its sessions' directories with them. So the name also
/// holds 64 random bits, and it is put in place by a link that fails where the name is taken.
fn new_lock(
    parent: &Path,
    pid: u32,
    serial: u64,
) -> std::io::Result<(PathBuf, nix::fcntl::Flock<fs::File>)> {
    use std::hash::BuildHasher;
    loop {
        let random = std::collections::hash_map::RandomState::new().hash_one(serial);
        let name = format!("{PROCESS_MARK}{pid}-{serial}-{random:016x}");
        let path = parent.join(&name);
        let temp = parent.join(format!("{name}.tmp"));
        let file = fs::File::create_new(&temp)?;
        let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .map_err(|(_, e)| std::io::Error::from(e));
        let placed = lock.and_then(|lock| fs::hard_link(&temp, &path).map(|()| lock));
        let _ = fs::remove_file(&temp);
        match placed {
            Ok(lock) => return Ok((path, lock)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// A lock of this process that marked directories link to; removed when the last goes.
#[derive(Debug)]
struct ProcessMark {
    path: PathBuf,
    _lock: nix::fcntl::Flock<fs::File>,
}

impl Drop for ProcessMark {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// A directory's owner mark: the directory counts as alive while this is held (this process's
/// lock, shared, or the directory's own).
#[derive(Debug)]
pub struct OwnerMark {
    _shared: Option<Arc<ProcessMark>>,
    _own: Option<nix::fcntl::Flock<fs::File>>,
}

/// Whether the owner of `dir` is gone: its lock can be taken (unmarked directories are left
/// alone).
pub(crate) fn owner_gone(dir: &Path) -> bool {
    let Ok(file) = fs::File::open(dir.join(OWNER)) else {
        return false;
    };
    lock_free(file)
}

/// Mark `dir` as a dead process would have left it: an owner file nobody holds locked.
#[cfg(test)]
pub(crate) fn mark_dead_owner(dir: &Path) {
    fs::write(dir.join(OWNER), b"").unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
}

fn lock_free(file: fs::File) -> bool {
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).is_ok()
}

const CGROUP_PARENTS: &[&str] = &[
    "/sys/fs/cgroup/pids/envcraft",
    "/sys/fs/cgroup/memory/envcraft",
    "/sys/fs/cgroup/envcraft",
    "/sys/fs/cgroup/unified/envcraft",
];

/// How old an empty run cgroup must be before any envcraft may remove it: far longer than a
/// run takes between making its cgroup and its init joining it.
pub const CGROUP_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Remove what dead owners left under `state_root` (run and session directories) and their
/// cgroups, and empty run cgroups past [`CGROUP_GRACE`]. Runs once per process.
pub fn sweep_once(state_root: &Path) {
    static SWEEP: Once = Once::new();
    SWEEP.call_once(|| sweep(state_root));
}

fn sweep(state_root: &Path) {
    let mut dead_runs = Vec::new();
    for dir in [state_root.to_path_buf(), state_root.join("sessions")] {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(PROCESS_MARK) {
                // A dead process's lock, which no marked directory links to any more.
                if fs::File::open(&path).is_ok_and(lock_free) {
                    let _ = fs::remove_file(&path);
                }
                continue;
            }
            let ours = name.starts_with("envcraft-") || dir.ends_with("sessions");
            if ours && path.is_dir() && owner_gone(&path) {
                tracing::info!(path = %path.display(), "removing what a killed envcraft left");
                let _ = fs::remove_dir_all(&path);
                dead_runs.push(name);
            }
        }
    }
    for parent in CGROUP_PARENTS {
        for name in &dead_runs {
            let _ = super::cgroup::remove_run_dir(&Path::new(parent).join(name));
        }
        remove_old_empty_cgroups(Path::new(parent), CGROUP_PARENTS, CGROUP_GRACE);
    }
}

/// Remove the `envcraft-*` cgroups under `parent` made more than `grace` ago that hold no
/// process, nor does the run's cgroup of that name under any of `hierarchies` (the kernel
/// refuses to remove one that holds a process: EBUSY). On cgroup v1 a live session's memory
/// cgroup is empty whenever no command runs (its init stays out of it, see `cgroup`): its pids
/// cgroup, which holds the init, says it is alive. Judged by the memory cgroup alone, every
/// session idle for a minute lost it to the sweep of the next envcraft process to start, and
/// its commands could no longer start.
fn remove_old_empty_cgroups(parent: &Path, hierarchies: &[&str], grace: std::time::Duration) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    let holds_process = |dir: &Path| match fs::read_to_string(dir.join("cgroup.procs")) {
        Ok(procs) => !procs.trim().is_empty(),
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with("envcraft-") {
            continue;
        }
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|made| made.elapsed().ok())
            .is_some_and(|age| age > grace);
        let alive = holds_process(&entry.path())
            || hierarchies
                .iter()
                .any(|h| holds_process(&Path::new(h).join(&name)));
        if old && !alive && super::cgroup::remove_run_dir(&entry.path()).is_ok() {
            tracing::debug!(cgroup = %entry.path().display(), "removed a killed run's cgroup");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn two_processes_of_one_pid_never_share_a_lock_name() {
        use std::os::unix::fs::MetadataExt;
        // As two envcraft processes in PID namespaces of their own: the same pid, the same
        // serial. Each keeps its own name, and a mark linked by name reaches its own lock.
        let parent = tempfile::tempdir().unwrap();
        let (first, first_lock) = new_lock(parent.path(), 2, 0).unwrap();
        let (second, _second_lock) = new_lock(parent.path(), 2, 0).unwrap();
        assert_ne!(first, second);
        let dir = parent.path().join("session");
        fs::create_dir(&dir).unwrap();
        link_mark(&first, &dir).unwrap();
        let locked = first_lock.metadata().unwrap().ino();
        assert_eq!(fs::metadata(dir.join(OWNER)).unwrap().ino(), locked);
        assert!(!owner_gone(&dir), "the first process's lock is held");
        drop(first_lock);
        assert!(owner_gone(&dir), "and free once that process is gone");
        let left: Vec<String> = fs::read_dir(parent.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn only_old_envcraft_entries_are_removed() {
        // A plain directory stands in for a cgroup hierarchy: an empty directory is what
        // the kernel lets go of.
        let parent = tempfile::tempdir().unwrap();
        for name in ["envcraft-old", "envcraft-new", "other-old"] {
            fs::create_dir(parent.path().join(name)).unwrap();
        }
        // Not empty: as a cgroup with a process in it, the kernel keeps it.
        fs::create_dir(parent.path().join("envcraft-old-busy")).unwrap();
        fs::write(parent.path().join("envcraft-old-busy/cgroup.procs"), b"1").unwrap();
        let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for name in ["envcraft-old", "other-old", "envcraft-old-busy"] {
            fs::File::open(parent.path().join(name))
                .unwrap()
                .set_modified(long_ago)
                .unwrap();
        }
        // A run whose pids cgroup (in another hierarchy) holds its init is alive, however old
        // and empty its memory cgroup.
        let pids = tempfile::tempdir().unwrap();
        for name in ["envcraft-idle", "envcraft-gone"] {
            fs::create_dir(parent.path().join(name)).unwrap();
            fs::File::open(parent.path().join(name))
                .unwrap()
                .set_modified(long_ago)
                .unwrap();
            fs::create_dir(pids.path().join(name)).unwrap();
        }
        fs::write(pids.path().join("envcraft-idle/cgroup.procs"), b"42\n").unwrap();
        fs::write(pids.path().join("envcraft-gone/cgroup.procs"), b"").unwrap();
        let hierarchies = [pids.path().to_str().unwrap()];
        remove_old_empty_cgroups(parent.path(), &hierarchies, CGROUP_GRACE);
        assert!(
            parent.path().join("envcraft-idle").exists(),
            "its init is alive"
        );
        assert!(!parent.path().join("envcraft-gone").exists());
        assert!(!parent.path().join("envcraft-old").exists());
        assert!(parent.path().join("envcraft-new").exists());
        assert!(parent.path().join("other-old").exists());
        assert!(parent.path().join("envcraft-old-busy").exists());
    }

    #[test]
    fn directories_of_dead_owners_go_and_live_ones_stay() {
        let root = tempfile::tempdir().unwrap();
        let live = root.path().join("envcraft-live");
        let dead = root.path().join("envcraft-dead");
        let unmarked = root.path().join("envcraft-unmarked");
        for d in [&live, &dead, &unmarked] {
            fs::create_dir(d).unwrap();
        }
        let _held = mark_owner(&live, root.path()).unwrap();
        // A dead owner: its mark links to a process's lock that nobody holds any more.
        let dead_process = root.path().join(format!("{PROCESS_MARK}999999-0"));
        fs::write(&dead_process, b"").unwrap();
        fs::hard_link(&dead_process, dead.join(OWNER)).unwrap();
        sweep(root.path());
        assert!(live.exists() && unmarked.exists());
        assert!(!dead.exists());
        assert!(!dead_process.exists(), "a dead process's lock goes too");
        let ours: Vec<_> = fs::read_dir(root.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(PROCESS_MARK))
            .collect();
        assert_eq!(ours.len(), 1, "this process's lock stays: {ours:?}");
    }
}
