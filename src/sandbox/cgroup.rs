//! A cgroup per run, for the limits rlimits cannot give: a process count that also binds root
//! (RLIMIT_NPROC does not apply to uid 0 of the initial namespace) and a memory limit that
//! covers tmpfs pages and every process together.
//!
//! Needs root and the `pids` and `memory` controllers, on cgroup v2 (preferred) or v1. The
//! cgroup is created before the sandbox starts, the sandbox's first process joins it before it
//! runs anything, and [`RunCgroup`] removes it on drop (after killing what is left in it).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::plan::{CgroupLimits, CgroupSupport};

const V2_ROOTS: &[&str] = &["/sys/fs/cgroup", "/sys/fs/cgroup/unified"];
const V1_PIDS: &str = "/sys/fs/cgroup/pids";
const V1_MEMORY: &str = "/sys/fs/cgroup/memory";

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
            fs::create_dir(&dir).map_err(err(&dir))?;
            self.created.push(dir.clone());
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
            for (file, value) in settings {
                let path = dir.join(file);
                // memory.swap.max and memory.memsw.* exist only with swap accounting.
                if path.exists() || !file.contains("sw") {
                    write(&path, *value)?;
                }
            }
        }
        Ok(())
    }

    /// The membership files the sandbox writes `0` to, to move itself in (see [`join_self`]),
    /// opened for writing here: the sandbox cannot see /sys by the time it joins, and the
    /// kernel checks the opener's credentials.
    pub fn open_membership_files(&self) -> Result<Vec<fs::File>, CgroupError> {
        let file = match self.limits.support {
            CgroupSupport::V1 => "tasks",
            _ => "cgroup.procs",
        };
        self.created
            .iter()
            .map(|d| {
                let path = d.join(file);
                fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(err(&path))
            })
            .collect()
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

impl Drop for RunCgroup {
    fn drop(&mut self) {
        // A cgroup can be removed only once it is empty; its processes die asynchronously, so
        // retry a bounded number of times.
        for dir in &self.created {
            for attempt in 0..200 {
                if fs::remove_dir(dir).is_ok() || !dir.exists() {
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

fn write(path: &Path, value: u64) -> Result<(), CgroupError> {
    fs::write(path, value.to_string()).map_err(err(path))
}

#[cfg(test)]
mod tests {
    use super::*;

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
