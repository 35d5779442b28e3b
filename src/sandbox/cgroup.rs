//! A cgroup per run, for the limits rlimits cannot give: a process count that also binds root
//! (RLIMIT_NPROC does not apply to uid 0 of the initial namespace) and a memory limit that
//! covers tmpfs pages and every process together.
//!
//! Needs root and the `pids` and `memory` controllers, on cgroup v2 (preferred) or v1. The
//! cgroup is created before the sandbox starts, the sandbox's first process joins it before it
//! runs anything, and [`RunCgroup`] removes it on drop (after killing what is left in it).
//!
//! On cgroup v1 the sandbox's init joins the run's pids cgroup only: its memory stays charged
//! to envcraft's own memory cgroup, and the run's memory cgroup, limited to the policy's memory,
//! holds its commands ([`RunCgroup::open_commands_membership_file`]: each command moves itself
//! in before it runs). A command's pages, and the tmpfs pages it writes (which belong to no
//! process and outlive it), are charged there, so the OOM killer acting in the run's cgroup
//! never has the init to choose: with the init in it, a `/tmp` filled to the limit left the
//! init, the only process, as its choice when it cloned a command, and the session ended. One
//! memory cgroup a run, not one for the init and one below it for the commands: each memory
//! cgroup costs the kernel a slab object per 64 filesystems mounted on the machine (its
//! shrinkers' state), the largest part of an idle session's memory at thousands of sessions.
//! What the init itself holds (its few pages, the mounts and namespaces it made, a fork's
//! copy of its parent's changes) is envcraft's, bounded by envcraft, not by the policy.
//!
//! On cgroup v1 an empty run cgroup is parked for the next run instead (renamed `spare-*`, at
//! most [`SPARES_MAX`] per hierarchy as this process counts them: it lists the parked ones
//! once, see [`SPARES`]), and a run takes a parked one before it makes one: making and
//! removing a memory cgroup (its per-CPU state, its offline and freeing after the rmdir)
//! cost 0.3 ms of every `envcraft exec` on the 2-core test machine, a tenth of its start. A
//! taken cgroup gets the run's limits written anew; what the previous run left charged to it
//! (page cache of files it read) is reclaimable and reclaimed under the new limit. v2 cannot
//! rename a cgroup, so there each run makes and removes its own.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::plan::{CgroupLimits, CgroupSupport};

const V2_ROOTS: &[&str] = &["/sys/fs/cgroup", "/sys/fs/cgroup/unified"];
const V1_PIDS: &str = "/sys/fs/cgroup/pids";
const V1_MEMORY: &str = "/sys/fs/cgroup/memory";
/// Most empty cgroups kept for reuse in one v1 hierarchy.
pub const SPARES_MAX: usize = 16;
/// The commands' memory cgroup that earlier envcraft made below a run's on v1: removed with the
/// run's where a cgroup parked by one still has it.
const OLD_COMMANDS: &str = "commands";
/// The name prefix of a parked cgroup (never an `envcraft-*` name, which the sweeper of killed
/// runs' cgroups removes once old and empty: see `stale`).
const SPARE_PREFIX: &str = "spare-";

#[derive(Debug, thiserror::Error)]
#[error("cannot set up cgroup {path}")]
pub struct CgroupError {
    path: PathBuf,
    #[source]
    source: io::Error,
}

fn err(path: &Path) -> impl FnOnce(io::Error) -> CgroupError + '_ {
    move |source| CgroupError {
        path: path.to_path_buf(),
        source,
    }
}

/// The v2 root whose `cgroup.subtree_control` can enable both controllers, if any.
fn v2_root() -> Option<&'static str> {
    V2_ROOTS.iter().copied().find(|root| {
        fs::read_to_string(Path::new(root).join("cgroup.controllers"))
            .map(|c| {
                let words: Vec<&str> = c.split_whitespace().collect();
                words.contains(&"pids") && words.contains(&"memory")
            })
            .unwrap_or(false)
    })
}

/// What this process can use. Reads a few files; no cgroup is created.
pub fn detect() -> CgroupSupport {
    if !nix::unistd::geteuid().is_root() {
        return CgroupSupport::None;
    }
    if v2_root().is_some() {
        return CgroupSupport::V2;
    }
    let v1 = |root: &str, file: &str| Path::new(root).join(file).exists();
    if v1(V1_PIDS, "pids.max")
        || v1(V1_PIDS, "cgroup.procs") && v1(V1_MEMORY, "memory.limit_in_bytes")
    {
        return CgroupSupport::V1;
    }
    CgroupSupport::None
}

/// Whether runs here get a memory cgroup (their memory limit): what `detect` offers, with the
/// memory controller mounted where it is v1.
pub fn memory_limited() -> bool {
    match detect() {
        CgroupSupport::None => false,
        CgroupSupport::V2 => true,
        CgroupSupport::V1 => Path::new(V1_MEMORY).join("memory.limit_in_bytes").exists(),
    }
}

/// The cgroup directories of one run: named first (so the sandbox can be told where to join
/// before they exist), made while the sandbox builds its root, removed on drop.
pub struct RunCgroup {
    limits: CgroupLimits,
    /// (directory, whether it holds the pids or the memory controller or both).
    dirs: Vec<PathBuf>,
    created: Vec<PathBuf>,
}

impl RunCgroup {
    /// Name the run's cgroup(s) `name`; nothing is created yet.
    pub fn new(name: &str, limits: &CgroupLimits) -> RunCgroup {
        let dirs = match limits.support {
            CgroupSupport::None => Vec::new(),
            CgroupSupport::V2 => {
                vec![
                    Path::new(v2_root().unwrap_or(V2_ROOTS[0]))
                        .join("envcraft")
                        .join(name),
                ]
            }
            CgroupSupport::V1 => [V1_PIDS, V1_MEMORY]
                .iter()
                .map(|root| Path::new(root).join("envcraft").join(name))
                .collect(),
        };
        RunCgroup {
            limits: *limits,
            dirs,
            created: Vec::new(),
        }
    }

    /// Create the cgroup(s) and write the limits.
    pub fn create(&mut self) -> Result<(), CgroupError> {
        let limits = self.limits;
        for dir in self.dirs.clone() {
            let parent = dir.parent().map(Path::to_path_buf).unwrap_or_default();
            if !parent.exists() {
                fs::create_dir(&parent).map_err(err(&parent))?;
            }
            if limits.support == CgroupSupport::V2 {
                let control = parent.join("cgroup.subtree_control");
                fs::write(&control, "+pids +memory").map_err(err(&control))?;
            }
            let reused = limits.support == CgroupSupport::V1 && claim_spare(&parent, &dir);
            if !reused {
                fs::create_dir(&dir).map_err(err(&dir))?;
            }
            self.created.push(dir.clone());
            if let Err(e) = apply_limits(&dir, &limits, reused) {
                if !reused {
                    return Err(e);
                }
                // What the previous run left charged could not be reclaimed under the new
                // limit: a new cgroup instead.
                remove_run_dir(&dir).map_err(err(&dir))?;
                fs::create_dir(&dir).map_err(err(&dir))?;
                apply_limits(&dir, &limits, false)?;
            }
        }
        Ok(())
    }

    /// The membership files the sandbox's init writes `0` to, to move itself in (see
    /// [`join_self`]), opened for writing here: the sandbox cannot see /sys by the time it
    /// joins, and the kernel checks the opener's credentials. On v1 the init joins no memory
    /// cgroup (see the module's text).
    pub fn open_membership_files(&self) -> Result<Vec<fs::File>, CgroupError> {
        self.created
            .iter()
            .filter(|d| Some(d.as_path()) != self.commands_dir())
            .map(|d| self.open_membership(d))
            .collect()
    }

    /// The membership file of the memory cgroup that each command moves itself into apart
    /// from its init (v1's run memory cgroup, see the module's text), opened for writing as
    /// [`RunCgroup::open_membership_files`]; `None` where commands share the init's cgroups.
    pub fn open_commands_membership_file(&self) -> Result<Option<fs::File>, CgroupError> {
        self.commands_dir()
            .map(|dir| self.open_membership(dir))
            .transpose()
    }

    /// The membership files a command without an init joins (the `Host` backend's): all of
    /// the run's.
    pub fn open_command_membership_files(&self) -> Result<Vec<fs::File>, CgroupError> {
        self.created
            .iter()
            .map(|d| self.open_membership(d))
            .collect()
    }

    fn open_membership(&self, dir: &Path) -> Result<fs::File, CgroupError> {
        let path = dir.join(match self.limits.support {
            CgroupSupport::V1 => "tasks",
            _ => "cgroup.procs",
        });
        fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(err(&path))
    }

    /// The run's v1 memory cgroup (once created), which holds the commands but not the init.
    fn commands_dir(&self) -> Option<&Path> {
        (self.limits.support == CgroupSupport::V1)
            .then(|| self.created.iter().find(|d| d.starts_with(V1_MEMORY)))
            .flatten()
            .map(PathBuf::as_path)
    }

    /// The membership files of the cgroups this process is in, one per hierarchy of the run's
    /// cgroups, opened for writing (see [`RunCgroup::open_membership_files`]): where the
    /// sandbox's init moves back to at its end, so that the run's cgroups are empty before
    /// its exit (the kernel's teardown of its namespaces, an RCU grace period) is over.
    /// `None` when any of them cannot be found or opened.
    pub fn open_home_membership_files(&self) -> Option<Vec<fs::File>> {
        let own = fs::read_to_string("/proc/self/cgroup").ok()?;
        let file = match self.limits.support {
            CgroupSupport::V1 => "tasks",
            _ => "cgroup.procs",
        };
        self.created
            .iter()
            .map(|dir| {
                // `<hierarchy root>/envcraft/<run>`
                let root = dir.parent()?.parent()?;
                let home = own_cgroup(&own, root, self.limits.support)?;
                fs::OpenOptions::new()
                    .write(true)
                    .open(home.join(file))
                    .ok()
            })
            .collect()
    }

    pub fn is_active(&self) -> bool {
        !self.created.is_empty()
    }

    /// The processes in the run's cgroup (the first hierarchy holds them all), as host pids.
    pub fn processes(&self) -> Vec<i32> {
        self.created
            .first()
            .and_then(|dir| fs::read_to_string(dir.join("cgroup.procs")).ok())
            .map(|procs| {
                procs
                    .lines()
                    .filter_map(|l| l.trim().parse::<i32>().ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// How many processes the kernel's OOM killer has killed in the run's memory cgroup so
    /// far (`oom_kill` of v2's `memory.events`, of v1's `memory.oom_control`); `None` without
    /// a memory cgroup or a kernel that counts them. A cgroup reused on v1 keeps its count:
    /// compare two readings, never one with zero.
    pub fn oom_kills(&self) -> Option<u64> {
        match self.limits.support {
            CgroupSupport::V1 => oom_kill_count(
                &fs::read_to_string(self.commands_dir()?.join("memory.oom_control")).ok()?,
            ),
            CgroupSupport::V2 => oom_kill_count(
                &fs::read_to_string(self.created.first()?.join("memory.events")).ok()?,
            ),
            CgroupSupport::None => None,
        }
    }

    /// Kill every process still in the cgroup.
    pub fn kill_all(&self) {
        for dir in &self.created {
            let kill = dir.join("cgroup.kill");
            if kill.exists() && fs::write(&kill, "1").is_ok() {
                continue;
            }
            if let Ok(procs) = fs::read_to_string(dir.join("cgroup.procs")) {
                for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
        }
    }
}

/// Where `/proc/self/cgroup` (given as `own`) places this process in the hierarchy mounted at
/// `root`: v2's single line (`0::/path`), or the v1 line naming the controller `root` holds.
fn own_cgroup(own: &str, root: &Path, support: CgroupSupport) -> Option<PathBuf> {
    let controller = match support {
        CgroupSupport::V1 if root == Path::new(V1_PIDS) => Some("pids"),
        CgroupSupport::V1 => Some("memory"),
        _ => None,
    };
    own.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let here = match controller {
            None => id == "0" && controllers.is_empty(),
            Some(c) => controllers.split(',').any(|name| name == c),
        };
        here.then(|| root.join(path.trim_start_matches('/')))
    })
}

/// Move the calling (single-threaded) process into the cgroups whose membership files are
/// given (open for writing). Scope:
/// the sandbox's first process, before anything else runs in it.
///
/// On cgroup v1 a thread that writes `0` to `tasks` moves itself without the global
/// threadgroup lock; writing a pid to `cgroup.procs` from outside takes that lock for writing,
/// which waits for an RCU grace period: milliseconds per run.
pub fn join_self(files: Vec<std::os::fd::OwnedFd>) -> io::Result<()> {
    use std::io::Write;
    for fd in files {
        fs::File::from(fd).write_all(b"0")?;
    }
    Ok(())
}

/// Remove a run's cgroup directory, a child [`OLD_COMMANDS`] first.
pub(super) fn remove_run_dir(dir: &Path) -> io::Result<()> {
    match fs::remove_dir(dir.join(OLD_COMMANDS)) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    fs::remove_dir(dir)
}

/// Write the run's limits into `dir`. A `reused` v1 memory cgroup may hold a previous run's
/// smaller limits: its memory+swap limit, which may never be below the memory limit, is lifted
/// first.
fn apply_limits(dir: &Path, limits: &CgroupLimits, reused: bool) -> Result<(), CgroupError> {
    let settings: &[(&str, u64)] = match (limits.support, dir.starts_with(V1_MEMORY)) {
        (CgroupSupport::V2, _) => &[
            ("pids.max", limits.pids),
            ("memory.max", limits.memory_bytes),
            ("memory.swap.max", 0),
        ],
        (_, true) => &[
            ("memory.limit_in_bytes", limits.memory_bytes),
            ("memory.memsw.limit_in_bytes", limits.memory_bytes),
        ],
        _ => &[("pids.max", limits.pids)],
    };
    let memsw = dir.join("memory.memsw.limit_in_bytes");
    if reused && memsw.exists() {
        fs::write(&memsw, "-1").map_err(err(&memsw))?;
    }
    for (file, value) in settings {
        let path = dir.join(file);
        // memory.swap.max and memory.memsw.* exist only with swap accounting.
        if path.exists() || !file.contains("sw") {
            write(&path, *value)?;
        }
    }
    Ok(())
}

/// The parked cgroups this process knows of, by parent: listed from the parent once (those
/// other processes parked, or a killed one left), then kept as this process parks and takes
/// them. Listing the parent at every take and park made each session's start and end read
/// every run's cgroup name: at 10,000 sessions, 10,000 names per create.
static SPARES: std::sync::Mutex<Option<std::collections::HashMap<PathBuf, Vec<PathBuf>>>> =
    std::sync::Mutex::new(None);

/// Run `f` on the spares known under `parent`, under the lock.
fn with_spares<T>(parent: &Path, f: impl FnOnce(&mut Vec<PathBuf>) -> T) -> T {
    let mut known = SPARES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let spares = known
        .get_or_insert_with(Default::default)
        .entry(parent.to_path_buf())
        .or_insert_with(|| list_spares(parent));
    f(spares)
}

fn list_spares(parent: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(parent) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(SPARE_PREFIX))
        .map(|e| e.path())
        .collect()
}

/// Take a cgroup parked under `parent` (v1), renamed to `dir`; false when none is left.
fn claim_spare(parent: &Path, dir: &Path) -> bool {
    while let Some(spare) = with_spares(parent, Vec::pop) {
        // Made new first: once renamed `envcraft-*`, an old empty cgroup is what the sweeper
        // of killed runs removes, and this one is empty until the sandbox joins it. Another
        // process may take it meanwhile (or have removed it): then the rename fails, and the
        // next is tried.
        let now = nix::sys::time::TimeSpec::from(libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        });
        let touched = nix::sys::stat::utimensat(
            nix::fcntl::AT_FDCWD,
            &spare,
            &now,
            &now,
            nix::sys::stat::UtimensatFlags::NoFollowSymlink,
        );
        if touched.is_ok() && fs::rename(&spare, dir).is_ok() {
            return true;
        }
    }
    false
}

/// Park the empty v1 cgroup `dir` for a later run; false when it holds a task or
/// [`SPARES_MAX`] are parked already (it is then removed as usual).
fn park(dir: &Path) -> bool {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) else {
        return false;
    };
    let empty = |d: &Path| matches!(fs::read_to_string(d.join("tasks")), Ok(t) if t.is_empty());
    let old = dir.join(OLD_COMMANDS);
    if !empty(dir) || old.exists() && !empty(&old) {
        return false;
    }
    let spare = parent.join(format!("{SPARE_PREFIX}{}", name.to_string_lossy()));
    with_spares(parent, |spares| {
        let parked = spares.len() < SPARES_MAX && fs::rename(dir, &spare).is_ok();
        if parked {
            spares.push(spare);
        }
        parked
    })
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        // A cgroup can be removed only once it is empty; its processes die asynchronously, so
        // retry a bounded number of times. An empty v1 one is parked for the next run instead.
        for dir in &self.created {
            if self.limits.support == CgroupSupport::V1 && park(dir) {
                continue;
            }
            for attempt in 0..200 {
                if remove_run_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                if attempt % 20 == 0 {
                    self.kill_all();
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
    }
}

/// The `oom_kill N` line of a `memory.events` or `memory.oom_control` file.
fn oom_kill_count(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|n| n.trim().parse().ok())
}

fn write(path: &Path, value: u64) -> Result<(), CgroupError> {
    fs::write(path, value.to_string()).map_err(err(path))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// A parent cgroup of this test's own in each v1 hierarchy, so that the spares it parks
    /// and takes are its own (runs of other tests park theirs under `envcraft`). None, said
    /// why, where the pool does not apply: not root (a failure under
    /// ENVCRAFT_TEST_REQUIRE=all), or cgroup v2, which makes and removes each run's cgroup.
    fn v1_parents(tag: &str) -> Option<Vec<PathBuf>> {
        match detect() {
            CgroupSupport::V1 => {}
            CgroupSupport::V2 => {
                eprintln!("not applicable: cgroup v2 has no spare cgroups (it cannot rename)");
                return None;
            }
            CgroupSupport::None => {
                eprintln!("skipped: cgroups need root and the pids and memory controllers");
                assert_ne!(
                    std::env::var("ENVCRAFT_TEST_REQUIRE").as_deref(),
                    Ok("all"),
                    "root and cgroups are required (ENVCRAFT_TEST_REQUIRE=all)"
                );
                return None;
            }
        }
        let parents: Vec<PathBuf> = [V1_PIDS, V1_MEMORY]
            .iter()
            .map(|root| Path::new(root).join(format!("envcraft-test-{tag}-{}", std::process::id())))
            .collect();
        for parent in &parents {
            fs::create_dir(parent).unwrap();
        }
        Some(parents)
    }

    fn remove_all(parent: &Path) {
        for entry in fs::read_dir(parent).unwrap().flatten() {
            if entry.file_type().unwrap().is_dir() {
                fs::remove_dir(entry.path()).unwrap();
            }
        }
        fs::remove_dir(parent).unwrap();
    }

    fn read_u64(path: &Path) -> u64 {
        fs::read_to_string(path).unwrap().trim().parse().unwrap()
    }

    #[test]
    fn a_parked_cgroup_is_taken_by_the_next_run_with_that_runs_limits() {
        let Some(parents) = v1_parents("reuse") else {
            return;
        };
        let small = CgroupLimits {
            support: CgroupSupport::V1,
            pids: 64,
            memory_bytes: 512 << 20,
        };
        let large = CgroupLimits {
            pids: 256,
            memory_bytes: 2 << 30,
            ..small
        };
        for parent in &parents {
            let first = parent.join("envcraft-first");
            fs::create_dir(&first).unwrap();
            apply_limits(&first, &small, false).unwrap();
            let inode = fs::metadata(&first).unwrap().ino();
            assert!(
                park(&first),
                "{}: an empty cgroup is parked",
                first.display()
            );
            assert!(!first.exists());
            let second = parent.join("envcraft-second");
            assert!(claim_spare(parent, &second), "{}", parent.display());
            assert_eq!(
                fs::metadata(&second).unwrap().ino(),
                inode,
                "the same cgroup"
            );
            // The larger limits go in over the smaller ones (memory+swap lifted first).
            apply_limits(&second, &large, true).unwrap();
            if second.starts_with(V1_MEMORY) {
                assert_eq!(read_u64(&second.join("memory.limit_in_bytes")), 2 << 30);
                let memsw = second.join("memory.memsw.limit_in_bytes");
                if memsw.exists() {
                    assert_eq!(read_u64(&memsw), 2 << 30);
                }
            } else {
                assert_eq!(read_u64(&second.join("pids.max")), 256);
            }
            // Taken just now: the sweeper of killed runs' cgroups would not take it for old.
            let age = fs::metadata(&second).unwrap().modified().unwrap().elapsed();
            assert!(age.unwrap_or_default() < std::time::Duration::from_secs(60));
            assert!(
                !claim_spare(parent, &parent.join("envcraft-third")),
                "none left"
            );
            remove_all(parent);
        }
    }

    #[test]
    fn a_cgroup_with_a_task_is_not_parked_nor_more_than_the_most_kept() {
        let Some(parents) = v1_parents("limits") else {
            return;
        };
        let parent = &parents[0];
        let busy = parent.join("envcraft-busy");
        fs::create_dir(&busy).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        fs::write(busy.join("tasks"), child.id().to_string()).unwrap();
        assert!(!park(&busy), "a cgroup with a task in it is not parked");
        assert!(busy.exists());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(park(&busy), "empty once its task is gone");
        for i in 1..SPARES_MAX {
            let cgroup = parent.join(format!("envcraft-{i}"));
            fs::create_dir(&cgroup).unwrap();
            assert!(park(&cgroup), "spare {i} of {SPARES_MAX}");
        }
        let one_more = parent.join("envcraft-one-more");
        fs::create_dir(&one_more).unwrap();
        assert!(!park(&one_more), "no more than {SPARES_MAX} are kept");
        assert!(one_more.exists());
        for parent in &parents {
            remove_all(parent);
        }
    }

    #[test]
    fn a_cgroup_another_process_parked_is_found_once_then_known_without_a_listing() {
        let Some(parents) = v1_parents("listed") else {
            return;
        };
        let parent = &parents[0];
        // Parked by "another process": made before this process looked at `parent`.
        fs::create_dir(parent.join(format!("{SPARE_PREFIX}envcraft-other"))).unwrap();
        let first = parent.join("envcraft-first");
        assert!(claim_spare(parent, &first), "the listed spare is taken");
        assert!(first.exists());
        // Now known: one this process parks is taken without the parent listed again, and
        // one made behind its back meanwhile is not seen (it is another process's to take).
        assert!(park(&first));
        fs::create_dir(parent.join(format!("{SPARE_PREFIX}envcraft-late"))).unwrap();
        let second = parent.join("envcraft-second");
        assert!(claim_spare(parent, &second));
        assert!(!claim_spare(parent, &parent.join("envcraft-third")));
        assert!(parent.join(format!("{SPARE_PREFIX}envcraft-late")).exists());
        for parent in &parents {
            remove_all(parent);
        }
    }

    #[test]
    fn oom_kill_count_reads_the_counter_of_v1_and_v2_not_the_group_one() {
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(oom_kill_count(v1), Some(3));
        let v2 = "low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\noom_group_kill 0\n";
        assert_eq!(oom_kill_count(v2), Some(2));
        assert_eq!(oom_kill_count("oom_kill_disable 0\n"), None);
    }

    #[test]
    fn own_cgroup_reads_the_line_of_the_hierarchy() {
        let own = "12:pids:/user.slice/a\n7:cpu,cpuacct:/x\n4:memory:/\n0::/init.scope\n";
        assert_eq!(
            own_cgroup(own, Path::new(V1_PIDS), CgroupSupport::V1),
            Some(PathBuf::from("/sys/fs/cgroup/pids/user.slice/a"))
        );
        assert_eq!(
            own_cgroup(own, Path::new(V1_MEMORY), CgroupSupport::V1),
            Some(PathBuf::from("/sys/fs/cgroup/memory/"))
        );
        assert_eq!(
            own_cgroup(own, Path::new("/sys/fs/cgroup"), CgroupSupport::V2),
            Some(PathBuf::from("/sys/fs/cgroup/init.scope"))
        );
        assert_eq!(
            own_cgroup("4:memory:/\n", Path::new(V1_PIDS), CgroupSupport::V1),
            None
        );
    }
}
