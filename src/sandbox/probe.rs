//! What this machine can enforce: the facts a plan needs (cheap, read on every run) and the
//! full check behind `envcraft doctor` (each feature tried for real in a throwaway child).

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::cgroup;
use super::plan::{CgroupSupport, Host, HostEntry};
use super::seccomp;
use crate::spec::policy::{BUNDLED, Policy, Protection};
use crate::sys::{self, Cloned};

/// Cheap facts read for every run.
pub struct HostFacts {
    pub uid: u32,
    pub gid: u32,
    pub landlock_abi: i32,
    pub cgroup: CgroupSupport,
}

impl HostFacts {
    pub fn read() -> HostFacts {
        HostFacts {
            uid: nix::unistd::geteuid().as_raw(),
            gid: nix::unistd::getegid().as_raw(),
            landlock_abi: sys::landlock_abi_version(),
            cgroup: cgroup::detect(),
        }
    }

    /// The plan's view of the host for a template owned by `template_owner`; `idmap` says
    /// whether idmapped mounts may be tried (see `plan::UidMapping`).
    pub fn as_plan_host(&self, template_owner: (u32, u32), idmap: bool) -> Host<'static> {
        Host {
            idmap: idmap && self.uid == 0,
            private_to: &private_to_host,
            uid: self.uid,
            gid: self.gid,
            template_owner,
            landlock_abi: self.landlock_abi,
            cgroup: self.cgroup,
            stat: &stat_host,
            list: &list_host,
        }
    }
}

fn stat_host(path: &Path) -> HostEntry {
    match path.symlink_metadata() {
        Err(_) => HostEntry::Missing,
        Ok(m) if m.file_type().is_symlink() => fs::read_link(path)
            .map(HostEntry::Symlink)
            .unwrap_or(HostEntry::Missing),
        Ok(m) if m.is_dir() => HostEntry::Dir,
        Ok(m) if m.is_file() => HostEntry::File,
        Ok(_) => HostEntry::Special,
    }
}

/// How many entries one scan for root-only files looks at, at most, and how deep.
const PRIVATE_SCAN_ENTRIES: usize = 50_000;
const PRIVATE_SCAN_DEPTH: usize = 32;

/// The entries below `dir` (all the way down when `deep`) that `ids` may read by owner or group
/// permission and others may not; directories found so are not descended into.
fn private_to_host(dir: &Path, deep: bool, ids: (u32, u32)) -> Vec<(PathBuf, bool)> {
    use std::os::unix::fs::MetadataExt;
    let mut found = Vec::new();
    let mut budget = PRIVATE_SCAN_ENTRIES;
    let mut pending = vec![(dir.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = pending.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if budget == 0 {
                tracing::warn!(dir = %dir.display(), "scan for root-only files stopped at its bound");
                return found;
            }
            budget -= 1;
            let path = entry.path();
            let Ok(meta) = path.symlink_metadata() else {
                continue;
            };
            if meta.file_type().is_symlink() {
                continue;
            }
            let mode = meta.mode();
            let others_read = mode & 0o004 != 0;
            let by_owner = meta.uid() == ids.0 && mode & 0o400 != 0;
            let by_group = meta.gid() == ids.1 && mode & 0o040 != 0;
            if !others_read && (by_owner || by_group) {
                found.push((path, meta.is_dir()));
            } else if deep && meta.is_dir() && depth < PRIVATE_SCAN_DEPTH {
                pending.push((path, depth + 1));
            }
        }
    }
    found
}

fn list_host(path: &Path) -> Vec<PathBuf> {
    fs::read_dir(path)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default()
}

/// The report of `envcraft doctor`.
#[derive(Debug, Serialize)]
pub struct Doctor {
    pub kernel: String,
    pub invoker: &'static str,
    pub landlock_abi: i32,
    pub landlock_network: bool,
    pub landlock_scope: bool,
    pub user_namespaces: bool,
    pub overlay_in_user_namespace: bool,
    pub seccomp: bool,
    pub cgroup_limits: CgroupSupport,
    pub cgroup_v2_controllers: Vec<String>,
    pub cgroup_v1_controllers: Vec<String>,
    pub policies: Vec<PolicyReadiness>,
}

#[derive(Debug, Serialize)]
pub struct PolicyReadiness {
    pub name: String,
    pub can_run: bool,
    /// Required protections this machine cannot give.
    pub missing: Vec<Protection>,
    /// Best-effort protections that will not be applied here.
    pub degraded: Vec<Protection>,
}

/// Run `f` in a forked child and report whether it exited 0. The child's kernel state
/// (namespaces, filters) dies with it.
fn in_child(f: impl FnOnce() -> bool, flags: libc::c_int) -> bool {
    match sys::clone_process(flags) {
        Ok(Cloned::Child) => sys::exit_now(if f() { 0 } else { 1 }),
        Ok(Cloned::Parent(pid)) => matches!(
            nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None),
            Ok(nix::sys::wait::WaitStatus::Exited(_, 0))
        ),
        Err(_) => false,
    }
}

fn map_self(uid: u32, gid: u32) -> bool {
    fs::write("/proc/self/uid_map", format!("0 {uid} 1\n")).is_ok()
        && fs::write("/proc/self/setgroups", "deny").is_ok()
        && fs::write("/proc/self/gid_map", format!("0 {gid} 1\n")).is_ok()
}

fn probe_overlay(uid: u32, gid: u32) -> bool {
    let Ok(dir) = tempfile::Builder::new().prefix("envcraft-probe-").tempdir() else {
        return false;
    };
    let base = dir.path().to_path_buf();
    for d in ["lower", "upper", "work", "merged"] {
        if fs::create_dir(base.join(d)).is_err() {
            return false;
        }
    }
    in_child(
        || {
            use nix::mount::{MsFlags, mount};
            map_self(uid, gid)
                && nix::unistd::chdir(&base).is_ok()
                && mount(
                    Some("overlay"),
                    "merged",
                    Some("overlay"),
                    MsFlags::empty(),
                    Some("lowerdir=lower,upperdir=upper,workdir=work,userxattr"),
                )
                .is_ok()
        },
        libc::CLONE_NEWUSER | libc::CLONE_NEWNS,
    )
}

fn controllers(path: &str) -> Vec<String> {
    fs::read_to_string(path)
        .map(|s| s.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}

impl Doctor {
    /// Probe everything. Spawns a few short-lived children.
    pub fn run() -> Doctor {
        let facts = HostFacts::read();
        let user_namespaces = in_child(|| true, libc::CLONE_NEWUSER);
        let overlay = user_namespaces && probe_overlay(facts.uid, facts.gid);
        let seccomp = in_child(
            || {
                nix::sys::prctl::set_no_new_privs().is_ok()
                    && crate::sys::install_seccomp_program(&seccomp::guard()).is_ok()
            },
            0,
        );
        let mut v2 = controllers("/sys/fs/cgroup/cgroup.controllers");
        if v2.is_empty() {
            v2 = controllers("/sys/fs/cgroup/unified/cgroup.controllers");
        }
        let v1: Vec<String> = fs::read_to_string("/proc/cgroups")
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                (cols.len() >= 4 && cols[1] != "0" && cols[3] == "1").then(|| cols[0].to_string())
            })
            .collect();
        let available = |p: Protection| -> bool {
            match p {
                p if p.needs_namespaces() && p != Protection::OverlayWorkspace => user_namespaces,
                Protection::OverlayWorkspace => overlay,
                Protection::LandlockFilesystem => facts.landlock_abi >= 1,
                Protection::LandlockNetwork => facts.landlock_abi >= 4,
                Protection::LandlockScope => facts.landlock_abi >= 6,
                Protection::Seccomp => seccomp,
                Protection::CgroupLimits => facts.cgroup != CgroupSupport::None,
                _ => true,
            }
        };
        let policies = BUNDLED
            .iter()
            .filter_map(|(name, _)| Policy::bundled(name).ok())
            .map(|policy| {
                let missing: Vec<Protection> = policy
                    .protections
                    .required
                    .iter()
                    .copied()
                    .filter(|p| !available(*p))
                    .collect();
                // Without user namespaces a policy that allows it runs in the fallback mode.
                let degraded = policy
                    .protections
                    .best_effort
                    .iter()
                    .copied()
                    .filter(|p| !available(*p))
                    .collect();
                PolicyReadiness {
                    name: policy.name.clone(),
                    can_run: missing.is_empty(),
                    missing,
                    degraded,
                }
            })
            .collect();
        Doctor {
            kernel: nix::sys::utsname::uname()
                .map(|u| u.release().to_string_lossy().into_owned())
                .unwrap_or_default(),
            invoker: if facts.uid == 0 {
                "root"
            } else {
                "unprivileged"
            },
            landlock_abi: facts.landlock_abi,
            landlock_network: facts.landlock_abi >= 4,
            landlock_scope: facts.landlock_abi >= 6,
            user_namespaces,
            overlay_in_user_namespace: overlay,
            seccomp,
            cgroup_limits: facts.cgroup,
            cgroup_v2_controllers: v2,
            cgroup_v1_controllers: v1,
            policies,
        }
    }
}
