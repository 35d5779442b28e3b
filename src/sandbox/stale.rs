//! What a killed envcraft leaves behind, and its removal.
//!
//! A sandbox's processes and mounts die with envcraft (the init has a parent-death signal and
//! the kernel then ends the PID and mount namespaces), but directories do not: a run's state
//! directory, a session's directory and a run's cgroups. Each is marked with its owner (pid
//! and start time, so a reused pid is not mistaken for it); the first sandbox a process starts
//! removes those whose owner is gone.

use std::fs;
use std::path::Path;
use std::sync::Once;

const OWNER: &str = ".envcraft-owner";

/// `pid start-time` of a process, from /proc (the start time tells a reused pid apart).
fn identity(pid: &str) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces: fields are counted after its closing parenthesis.
    let after = stat.rsplit_once(')')?.1;
    let start = after.split_whitespace().nth(19)?;
    Some(format!("{pid} {start}"))
}

/// Mark `dir` as owned by this process.
pub fn mark_owner(dir: &Path) -> std::io::Result<()> {
    let me = identity(&std::process::id().to_string()).unwrap_or_default();
    fs::write(dir.join(OWNER), me)
}

/// Whether the process that marked `dir` is gone (unmarked directories are left alone).
fn owner_gone(dir: &Path) -> bool {
    let Ok(mark) = fs::read_to_string(dir.join(OWNER)) else {
        return false;
    };
    let pid = mark.split_whitespace().next().unwrap_or_default();
    identity(pid).as_deref() != Some(mark.trim())
}

const CGROUP_PARENTS: &[&str] = &[
    "/sys/fs/cgroup/pids/envcraft",
    "/sys/fs/cgroup/memory/envcraft",
    "/sys/fs/cgroup/envcraft",
    "/sys/fs/cgroup/unified/envcraft",
];

/// Remove what dead owners left under `state_root` (run and session directories) and their
/// cgroups. Runs once per process.
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
            let _ = fs::remove_dir(Path::new(parent).join(name));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn directories_of_dead_owners_go_and_live_ones_stay() {
        let root = tempfile::tempdir().unwrap();
        let live = root.path().join("envcraft-live");
        let dead = root.path().join("envcraft-dead");
        let unmarked = root.path().join("envcraft-unmarked");
        for d in [&live, &dead, &unmarked] {
            fs::create_dir(d).unwrap();
        }
        mark_owner(&live).unwrap();
        // A pid that cannot be running (above pid_max), as a dead owner.
        fs::write(dead.join(OWNER), "4194305 1").unwrap();
        sweep(root.path());
        assert!(live.exists() && unmarked.exists());
        assert!(!dead.exists());
    }
}
