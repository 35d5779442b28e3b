//! The plan: what a policy turns into for one run, decided without touching the kernel.
//!
//! [`Plan::build`] is a pure function of the policy, the request and a description of the host
//! (what exists at each path, which uid runs us, what the kernel offers). Everything the child
//! process later applies (mounts, Landlock rules, seccomp rules, limits, environment, argv) is
//! data here, so it can be unit-tested exactly.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::spec::policy::{NetworkMode, Policy, Protection};

/// How the workspace was provided to a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceKind {
    /// An overlay over the read-only template; the upper layer is the diff.
    Overlay,
    /// A private copy of the template (overlayfs refused, or no namespaces).
    Copy,
    /// The template itself, bound read-only (policies with `workspace_writable = false`).
    ReadOnly,
}

/// What is at a host path (from `lstat`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostEntry {
    Missing,
    Dir,
    File,
    Symlink(PathBuf),
    /// Devices, sockets, fifos: never bound into a sandbox.
    Special,
}

/// How this process may limit resources through cgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CgroupSupport {
    /// Not available (not root, or no pids/memory controller).
    None,
    /// cgroup v1 `pids` and `memory` hierarchies under /sys/fs/cgroup.
    V1,
    /// cgroup v2 with `pids` and `memory` enabled at /sys/fs/cgroup (or .../unified).
    V2,
}

/// The host uid and gid that the sandbox's uid/gid 0 stand for when envcraft runs as root over
/// a root-owned template ([`UidMapping::Idmapped`]): `0x70000000`, the first id of the range
/// systemd leaves unused (above its container range `0x00080000-0x6FFFFFFF`, below its
/// foreign range at `0x7FFE0000`), far above any normal user, subuid range or dynamic user, and
/// below 2^31 (no tool misreads it as negative). One id for every sandbox: a fork's init reads
/// its parent's upper layer by owner permission, and no sandbox can reach another's files.
pub const SANDBOX_ROOT_HOST_ID: u32 = 0x7000_0000;

/// Who the sandbox's uid/gid 0 is on the host (`uid_mapping` in `enforced`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UidMapping {
    /// [`SANDBOX_ROOT_HOST_ID`]; the template's layers (and the directories bound for the
    /// run) are idmapped mounts that show their root-owned files as the sandbox's root's.
    /// Every other host file looks owned by nobody: root-only host files are unreadable.
    Idmapped,
    /// The template's owner (envcraft runs as root). When that is host root (idmapped mounts
    /// refused), the root-only files of the system paths and of `/proc` are masked.
    TemplateOwner,
    /// The invoking (unprivileged) user, the only one it may map.
    Invoker,
}

/// What the planner needs to know about the host; `stat` and `list` are injected for tests.
pub struct Host<'a> {
    /// Who runs envcraft.
    pub uid: u32,
    pub gid: u32,
    /// Who owns the template directory.
    pub template_owner: (u32, u32),
    pub landlock_abi: i32,
    pub cgroup: CgroupSupport,
    pub stat: &'a dyn Fn(&Path) -> HostEntry,
    pub list: &'a dyn Fn(&Path) -> Vec<PathBuf>,
    /// Whether the template may be shown through idmapped mounts (envcraft runs as root and
    /// no attempt was refused): see [`UidMapping::Idmapped`].
    pub idmap: bool,
    /// The entries below a directory (all the way down, or its children only) that the host
    /// ids `(uid, gid)` may read and others may not, each with whether it is a directory (not
    /// descended into); symlinks are never followed.
    pub private_to: &'a PrivateScan,
}

/// See [`Host::private_to`]: (directory, all the way down, host ids) to (path, is a directory).
pub type PrivateScan = dyn Fn(&Path, bool, (u32, u32)) -> Vec<(PathBuf, bool)>;

/// One run's request, after the CLI validated it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The template's layers (canonical, existing directories), topmost first; the workspace
    /// starts as their union.
    pub layers: Vec<PathBuf>,
    /// Host directories shown read-only inside at the given absolute paths (skills).
    pub binds: Vec<(PathBuf, PathBuf)>,
    pub argv: Vec<String>,
    /// Overrides the policy's wall-clock limit.
    pub timeout_secs: Option<u64>,
    /// The host's environment; only the policy's `pass` list is read from it.
    pub host_env: Vec<(String, String)>,
    /// Run without namespaces (Landlock + seccomp + rlimits on a copied workspace).
    pub without_namespaces: bool,
    /// The root filesystem from an image instead of the host's system paths.
    pub image: Option<super::image_root::ImageRoot>,
}

/// A mount step of the sandbox's root, applied in order below the new root.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum MountStep {
    /// A read-only, nosuid, nodev bind of a host path at the same place.
    BindReadOnly { path: PathBuf, dir: bool },
    /// A read-only, nosuid, nodev bind of a host directory at another place.
    BindDirAt { source: PathBuf, target: PathBuf },
    /// A symlink recreated as it is on the host (e.g. `/bin -> usr/bin`).
    Symlink { path: PathBuf, target: PathBuf },
    /// An empty, read-only directory or file over a path.
    Mask { path: PathBuf, dir: bool },
    /// A file envcraft writes (read-only, mode 0444) over a host file, to show the policy's
    /// value rather than the host's (`/etc/hostname`, `/etc/hosts`, `/etc/machine-id`).
    Generated { path: PathBuf, content: String },
    /// A private tmpfs (mode 1777 for /tmp, 0700 for HOME).
    Tmpfs {
        path: PathBuf,
        bytes: u64,
        mode: u32,
    },
    /// The minimal /dev: a tmpfs with bound device nodes, /dev/shm, and the fd symlinks.
    Dev { shm_bytes: u64 },
    /// The copy-on-write workspace (or its copy when overlayfs is refused).
    Workspace { path: PathBuf, writable: bool },
    /// A bind of the workspace at another place.
    WorkspaceAlias { path: PathBuf },
    /// A bind of the workspace's directory `dir` (made where missing) at `path` (a policy's
    /// `workspace_mounts`).
    WorkspaceDirAt { dir: PathBuf, path: PathBuf },
    /// The frozen-clock shim ([`crate::clock_shim`]) at [`crate::clock_shim::SHIM_PATH`], for
    /// the commands whose environment preloads it.
    ClockShim,
    /// /proc of the new PID namespace.
    Proc,
}

/// Device nodes bound into the sandbox's /dev.
pub const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// What Landlock should allow. Everything not granted here is denied.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct LandlockPlan {
    /// Read files, list directories, execute.
    pub read_exec: Vec<PathBuf>,
    /// List the directory hierarchy only.
    pub read_dir: Vec<PathBuf>,
    /// Full read-write (create, remove, rename, truncate).
    pub read_write: Vec<PathBuf>,
    /// Device nodes: read, write, ioctl.
    pub devices: Vec<PathBuf>,
    /// TCP ports that may be bound / connected to (all other TCP is denied).
    pub tcp_bind: Vec<u16>,
    pub tcp_connect: Vec<u16>,
    /// Deny abstract Unix sockets and signals that cross the sandbox boundary.
    pub scope: bool,
    /// Grant each command read access to its own `/proc/PID` (runs in the host's PID
    /// namespace, where `/proc` as a whole would show every host process).
    pub own_proc: bool,
}

/// What the seccomp filter must deny beyond its fixed list (see `seccomp.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct SeccompPlan {
    pub deny_netlink: bool,
    /// Deny AF_INET/AF_INET6 sockets altogether (used when there is no network namespace and
    /// the policy wants no network: Landlock covers TCP only).
    pub deny_inet: bool,
    /// Deny `socket(AF_UNIX, ...)` (used when there is no mount namespace, so that no host
    /// daemon's socket can be reached by path; Landlock cannot refuse a pathname `connect`).
    /// `socketpair` stays allowed.
    pub deny_unix: bool,
}

/// A resource limit set with setrlimit in the command process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rlimit {
    pub resource: RlimitKind,
    pub soft: u64,
    pub hard: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum RlimitKind {
    Cpu,
    AddressSpace,
    Processes,
    FileSize,
    OpenFiles,
    Core,
}

/// Limits enforced through a cgroup made for this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CgroupLimits {
    pub support: CgroupSupport,
    pub pids: u64,
    pub memory_bytes: u64,
}

/// Everything one run will enforce. The parent sends it to the sandbox's init, which was
/// cloned before it was made (see `live::Prestart`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Plan {
    pub policy_name: String,
    pub namespaced: bool,
    pub network_namespace: bool,
    /// The host user that uid/gid 0 inside maps to (see [`UidMapping`]): under root
    /// [`SANDBOX_ROOT_HOST_ID`] over a root-owned template, else the template's owner (so the
    /// agent may change the template's files in its own view); else the invoking user (the
    /// only one an unprivileged process may map).
    pub uid: u32,
    pub gid: u32,
    pub uid_mapping: UidMapping,
    /// Whether envcraft runs as root.
    pub invoker_is_root: bool,
    pub template_owner: (u32, u32),
    /// The template's layers, topmost first (a task's files over its environment's).
    pub lowers: Vec<PathBuf>,
    pub workspace: PathBuf,
    pub workspace_writable: bool,
    pub workspace_bytes: u64,
    pub mounts: Vec<MountStep>,
    pub hostname: String,
    pub landlock: LandlockPlan,
    pub seccomp: SeccompPlan,
    pub rlimits: Vec<Rlimit>,
    pub cgroup: Option<CgroupLimits>,
    pub env: Vec<(String, String)>,
    pub argv: Vec<String>,
    pub search_path: Vec<PathBuf>,
    pub wall_time_secs: u64,
    pub output_bytes: u64,
    pub required: Vec<Protection>,
    /// The image the root comes from (else the host's read-only system paths).
    pub image: Option<super::image_root::ImageRoot>,
}

/// Why no plan can be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("no command given: expected `-- CMD [ARGS...]`")]
    EmptyCommand,
    #[error("policy `{policy}` requires {protection}, which cannot be applied {reason}")]
    RequiredUnavailable {
        policy: String,
        protection: Protection,
        reason: String,
    },
    #[error("--timeout must be at least 1 second")]
    ZeroTimeout,
    #[error("a workspace needs at least one template directory")]
    NoLayers,
    #[error(
        "image `{image}` is a root filesystem, which needs a mount namespace: it cannot be used without namespaces (policy `{policy}`)"
    )]
    ImageWithoutNamespaces { image: String, policy: String },
    #[error(
        "policy `{policy}` names workspace mount points (filesystem.workspace_mounts), which need a mount namespace: they cannot be given without namespaces"
    )]
    MountsWithoutNamespaces { policy: String },
}

impl Plan {
    pub fn build(policy: &Policy, request: &Request, host: &Host<'_>) -> Result<Plan, PlanError> {
        if request.argv.is_empty() || request.argv[0].is_empty() {
            return Err(PlanError::EmptyCommand);
        }
        if request.layers.is_empty() {
            return Err(PlanError::NoLayers);
        }
        if request.timeout_secs == Some(0) {
            return Err(PlanError::ZeroTimeout);
        }
        let namespaced = !request.without_namespaces;
        if let (false, Some(image)) = (namespaced, &request.image) {
            return Err(PlanError::ImageWithoutNamespaces {
                image: image.name.clone(),
                policy: policy.name.clone(),
            });
        }
        if !namespaced && !policy.filesystem.workspace_mounts.is_empty() {
            return Err(PlanError::MountsWithoutNamespaces {
                policy: policy.name.clone(),
            });
        }
        // Over an image, what the policy's paths are is the image's, not the host's.
        let image_stat = |p: &Path| match &request.image {
            Some(image) => image.stat(p),
            None => (host.stat)(p),
        };
        let image_host = Host {
            stat: &image_stat,
            ..*host
        };
        let host = &image_host;
        if !namespaced {
            let required_ns = policy
                .protections
                .required
                .iter()
                .find(|p| p.needs_namespaces());
            if let Some(p) = required_ns {
                return Err(PlanError::RequiredUnavailable {
                    policy: policy.name.clone(),
                    protection: *p,
                    reason: "without user namespaces".into(),
                });
            }
        }
        let cgroup = match host.cgroup {
            CgroupSupport::None => None,
            support => Some(CgroupLimits {
                support,
                pids: policy.limits.processes,
                memory_bytes: policy.limits.memory_bytes,
            }),
        };
        if cgroup.is_none() && policy.protections.is_required(Protection::CgroupLimits) {
            return Err(PlanError::RequiredUnavailable {
                policy: policy.name.clone(),
                protection: Protection::CgroupLimits,
                reason: "here (needs root and a cgroup with the pids and memory controllers)"
                    .into(),
            });
        }
        let fs = &policy.filesystem;
        let (uid_mapping, uid, gid) = if host.uid != 0 {
            (UidMapping::Invoker, host.uid, host.gid)
        } else if namespaced && host.idmap && host.template_owner.0 == 0 {
            let id = SANDBOX_ROOT_HOST_ID;
            (UidMapping::Idmapped, id, id)
        } else {
            let (uid, gid) = host.template_owner;
            (UidMapping::TemplateOwner, uid, gid)
        };
        let (mounts, landlock_fs) = if namespaced {
            namespaced_root(policy, request, host, (uid, gid))
        } else {
            (Vec::new(), host_landlock(policy, host))
        };
        let network_namespace = namespaced && wants_network_namespace(policy);
        let landlock = LandlockPlan {
            tcp_bind: policy.network.allow_tcp_bind.clone(),
            tcp_connect: policy.network.allow_tcp_connect.clone(),
            scope: true,
            ..landlock_fs
        };
        let seccomp = SeccompPlan {
            deny_netlink: !policy.network.allow_netlink,
            deny_inet: !namespaced && policy.network.mode == NetworkMode::None,
            deny_unix: !namespaced && !policy.network.allow_unix_sockets,
        };
        let limits = &policy.limits;
        let mut rlimits = vec![
            Rlimit {
                resource: RlimitKind::Cpu,
                soft: limits.cpu_secs,
                hard: limits.cpu_secs + 1,
            },
            Rlimit {
                resource: RlimitKind::Processes,
                soft: limits.processes,
                hard: limits.processes,
            },
            Rlimit {
                resource: RlimitKind::FileSize,
                soft: limits.file_size_bytes,
                hard: limits.file_size_bytes,
            },
            Rlimit {
                resource: RlimitKind::OpenFiles,
                soft: limits.open_files,
                hard: limits.open_files,
            },
            Rlimit {
                resource: RlimitKind::Core,
                soft: 0,
                hard: 0,
            },
        ];
        if cgroup.is_none() {
            // Without a memory cgroup the address-space limit is the only memory bound we have.
            rlimits.push(Rlimit {
                resource: RlimitKind::AddressSpace,
                soft: limits.memory_bytes,
                hard: limits.memory_bytes,
            });
        }
        let workspace = if namespaced {
            fs.workspace.clone()
        } else {
            // Without a mount namespace the command sees the copy at its host path; the
            // executor fills this in once the copy exists.
            PathBuf::new()
        };
        let mut env = environment(policy, &request.host_env, &workspace);
        let mut search_path: Vec<PathBuf> = policy
            .environment
            .path
            .split(':')
            .map(PathBuf::from)
            .collect();
        if let Some(image) = &request.image
            && let Some(path) = super::image_root::merge_env(&mut env, image)
        {
            search_path = path;
        }
        Ok(Plan {
            policy_name: policy.name.clone(),
            namespaced,
            network_namespace,
            uid,
            gid,
            uid_mapping,
            invoker_is_root: host.uid == 0,
            template_owner: host.template_owner,
            lowers: request.layers.clone(),
            workspace: workspace.clone(),
            workspace_writable: fs.workspace_writable,
            workspace_bytes: limits.workspace_bytes,
            mounts,
            hostname: policy.environment.hostname.clone(),
            landlock,
            seccomp,
            rlimits,
            cgroup,
            env,
            argv: request.argv.clone(),
            search_path,
            wall_time_secs: request.timeout_secs.unwrap_or(limits.wall_time_secs),
            output_bytes: limits.output_bytes,
            required: policy.protections.required.clone(),
            image: request.image.clone(),
        })
    }
}

/// Whether a run under `policy`, with namespaces, gets a network namespace of its own (only
/// loopback); read before the plan too, to begin that namespace early (see `live::Prestart`).
pub fn wants_network_namespace(policy: &Policy) -> bool {
    policy.network.mode == NetworkMode::None
}

/// The mounts and Landlock rules of a sandbox with its own mount namespace.
fn namespaced_root(
    policy: &Policy,
    request: &Request,
    host: &Host<'_>,
    ids: (u32, u32),
) -> (Vec<MountStep>, LandlockPlan) {
    let fs = &policy.filesystem;
    let mut mounts = Vec::new();
    let mut landlock = LandlockPlan {
        read_dir: vec![PathBuf::from("/")],
        ..LandlockPlan::default()
    };
    // Private tmpfs first (HOME, /tmp), then the read-only binds: a read-only path below one of
    // them (a checkout under /tmp, a toolchain under /root) stays visible instead of being
    // covered by the tmpfs.
    let mut binds = Vec::new();
    let mut bound: Vec<PathBuf> = Vec::new();
    // Over an image, its root holds these paths already: they are granted, not bound; and
    // the whole image may be read (its /opt, /app, /var): nothing of the host's is in the
    // sandbox's mount namespace but what is mounted over it below, each with its own rule.
    let from_image = request.image.is_some();
    if from_image {
        landlock.read_exec.push(PathBuf::from("/"));
    }
    for path in &fs.read_only {
        match (host.stat)(path) {
            entry @ (HostEntry::Dir | HostEntry::File) => {
                if !from_image {
                    binds.push(MountStep::BindReadOnly {
                        path: path.clone(),
                        dir: entry == HostEntry::Dir,
                    });
                }
                landlock.read_exec.push(path.clone());
                bound.push(path.clone());
            }
            HostEntry::Symlink(target) if !from_image => binds.push(MountStep::Symlink {
                path: path.clone(),
                target,
            }),
            HostEntry::Symlink(_) | HostEntry::Missing | HostEntry::Special => {}
        }
    }
    let home = &policy.environment.home;
    if !fs.workspace.starts_with(home) && !bound.iter().any(|b| home.starts_with(b)) {
        mounts.push(MountStep::Tmpfs {
            path: home.clone(),
            bytes: fs.tmp_bytes,
            mode: 0o700,
        });
        landlock.read_write.push(home.clone());
    }
    mounts.push(MountStep::Tmpfs {
        path: PathBuf::from("/tmp"),
        bytes: fs.tmp_bytes,
        mode: 0o1777,
    });
    landlock.read_write.push(PathBuf::from("/tmp"));
    mounts.extend(binds);
    let identity = identity_files(policy);
    for hole in &fs.hidden {
        if !bound.iter().any(|b| hole.starts_with(b)) || identity.iter().any(|(p, _)| p == hole) {
            continue; // not visible inside anyway, or shown with the policy's value below
        }
        match (host.stat)(hole) {
            HostEntry::Dir => mounts.push(MountStep::Mask {
                path: hole.clone(),
                dir: true,
            }),
            HostEntry::File | HostEntry::Special => mounts.push(MountStep::Mask {
                path: hole.clone(),
                dir: false,
            }),
            // A symlink cannot be mounted over; what it points to is masked if listed itself.
            HostEntry::Symlink(_) | HostEntry::Missing => {}
        }
    }
    let root_ids = ids.0 == 0 || ids.1 == 0;
    // An image's files are the image's, not the host's: none of them is a host secret.
    if root_ids && !from_image {
        mounts.extend(private_masks(policy, host, &bound, ids, &mounts));
    }
    for (path, content) in identity {
        // Only over a host file that is visible inside: where there is none, the host's value
        // cannot show either (and a read-only bind leaves no room to create one).
        if bound.iter().any(|b| path.starts_with(b)) && (host.stat)(&path) == HostEntry::File {
            mounts.push(MountStep::Generated { path, content });
        }
    }
    mounts.push(MountStep::Dev {
        shm_bytes: fs.tmp_bytes,
    });
    landlock.read_write.push(PathBuf::from("/dev/shm"));
    landlock
        .devices
        .extend(DEVICES.iter().map(|d| Path::new("/dev").join(d)));
    mounts.push(MountStep::Workspace {
        path: fs.workspace.clone(),
        writable: fs.workspace_writable,
    });
    let workspace_access = if fs.workspace_writable {
        &mut landlock.read_write
    } else {
        &mut landlock.read_exec
    };
    workspace_access.push(fs.workspace.clone());
    for alias in &fs.workspace_aliases {
        mounts.push(MountStep::WorkspaceAlias {
            path: alias.clone(),
        });
        workspace_access.push(alias.clone());
    }
    for m in &fs.workspace_mounts {
        mounts.push(MountStep::WorkspaceDirAt {
            dir: m.dir.clone(),
            path: m.path.clone(),
        });
        workspace_access.push(m.path.clone());
    }
    for (source, target) in &request.binds {
        mounts.push(MountStep::BindDirAt {
            source: source.clone(),
            target: target.clone(),
        });
        landlock.read_exec.push(target.clone());
    }
    mounts.push(MountStep::ClockShim);
    if let Some(dir) = Path::new(crate::clock_shim::SHIM_PATH).parent() {
        landlock.read_exec.push(dir.to_path_buf());
    }
    mounts.push(MountStep::Proc);
    landlock.read_exec.push(PathBuf::from("/proc"));
    if root_ids {
        // Over the new /proc: its root-only files, and those whose content depends on who
        // reads them (the keys of uid 0).
        let proc = Path::new("/proc");
        let mut private = (host.private_to)(proc, false, ids);
        for name in PROC_PER_READER {
            private.push((proc.join(name), false));
        }
        private.sort();
        private.dedup();
        let numeric = |p: &Path| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        };
        mounts.extend(
            private
                .into_iter()
                .filter(|(p, _)| !numeric(p))
                .map(|(path, dir)| MountStep::Mask { path, dir }),
        );
    }
    (mounts, landlock)
}

/// `/proc` files that show the reader's own kernel objects: masked when uid 0 inside is host
/// root, though their mode lets anyone read them.
const PROC_PER_READER: &[&str] = &["keys", "key-users"];

/// Trees of packaged software, not scanned for root-only files (130,000 entries on a common
/// host: tens of seconds with a cold cache); what is known to be root-only in them is masked.
const PACKAGED_TREES: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"];
const PACKAGED_PRIVATE: &[&str] = &["/usr/share/polkit-1/rules.d"];

/// Masks for the files of the read-only system paths that only host root (uid or gid 0, the
/// sandbox's ids `ids` when it maps to them) may read, beyond those `already` masks: every
/// bound path outside the packaged trees is scanned (on this host `/etc`, 1,200 entries, a few
/// milliseconds), and the known root-only directories of the packaged trees are masked.
fn private_masks(
    policy: &Policy,
    host: &Host<'_>,
    bound: &[PathBuf],
    ids: (u32, u32),
    already: &[MountStep],
) -> Vec<MountStep> {
    let hidden = &policy.filesystem.hidden;
    let masked = |p: &Path| {
        hidden.iter().any(|h| p.starts_with(h))
            || already
                .iter()
                .any(|m| matches!(m, MountStep::Mask { path, .. } if p.starts_with(path)))
    };
    let mut found = Vec::new();
    for path in bound {
        if PACKAGED_TREES.iter().any(|t| path.starts_with(t)) {
            continue;
        }
        if (host.stat)(path) == HostEntry::Dir {
            found.extend((host.private_to)(path, true, ids));
        }
    }
    for known in PACKAGED_PRIVATE {
        let known = Path::new(known);
        if bound.iter().any(|b| known.starts_with(b)) && (host.stat)(known) == HostEntry::Dir {
            found.push((known.to_path_buf(), true));
        }
    }
    found.sort();
    found.dedup();
    found
        .into_iter()
        .filter(|(p, _)| !masked(p))
        .map(|(path, dir)| MountStep::Mask { path, dir })
        .collect()
}

/// The files that name the machine, with the policy's values: its hostname, a hosts file
/// naming only localhost and that hostname, and its machine id.
pub fn identity_files(policy: &Policy) -> Vec<(PathBuf, String)> {
    let e = &policy.environment;
    let hostname = &e.hostname;
    vec![
        (PathBuf::from("/etc/hostname"), format!("{hostname}\n")),
        (
            PathBuf::from("/etc/hosts"),
            format!(
                "127.0.0.1\tlocalhost\n127.0.1.1\t{hostname}\n::1\tlocalhost ip6-localhost ip6-loopback\n"
            ),
        ),
        (
            PathBuf::from("/etc/machine-id"),
            format!("{}\n", e.machine_id),
        ),
    ]
}

/// Landlock rules for a run in the host's mount namespace: the read-only paths minus the hidden
/// ones (a Landlock rule covers a whole hierarchy, so a directory that holds a hidden path is
/// granted child by child), the devices, and /proc. The workspace copy and the private temporary
/// directory are added by the executor once they exist.
fn host_landlock(policy: &Policy, host: &Host<'_>) -> LandlockPlan {
    let fs = &policy.filesystem;
    let mut read_exec = Vec::new();
    for path in &fs.read_only {
        if matches!((host.stat)(path), HostEntry::Dir | HostEntry::File) {
            read_exec.extend(grant_except(path, &fs.hidden, host));
        }
    }
    read_exec.extend(host_proc_grants(host));
    LandlockPlan {
        read_exec,
        devices: DEVICES.iter().map(|d| Path::new("/dev").join(d)).collect(),
        own_proc: true,
        ..LandlockPlan::default()
    }
}

/// What of the host's `/proc` a run in the host's PID namespace may read: the entries that
/// describe the machine (cpuinfo, meminfo, stat, sys, ...), not the host's processes (no
/// numeric directory; `self`, `mounts`, `net` are links into one), nothing only the invoker's
/// ids may read (root's `slabinfo`, `kcore`), nor the reader-dependent `keys` of root. Each
/// command adds its own process directory ([`LandlockPlan::own_proc`]).
fn host_proc_grants(host: &Host<'_>) -> Vec<PathBuf> {
    let proc = Path::new("/proc");
    let ids = (host.uid, host.gid);
    let private: Vec<PathBuf> = (host.private_to)(proc, false, ids)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    let mut grants: Vec<PathBuf> = (host.list)(proc)
        .into_iter()
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let numeric = !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit());
            let per_reader = host.uid == 0 && PROC_PER_READER.contains(&name);
            !numeric
                && !per_reader
                && !private.contains(p)
                && matches!((host.stat)(p), HostEntry::Dir | HostEntry::File)
        })
        .collect();
    grants.sort();
    grants
}

/// The smallest set of paths that covers `root` but none of `holes`.
pub fn grant_except(root: &Path, holes: &[PathBuf], host: &Host<'_>) -> Vec<PathBuf> {
    if holes.iter().any(|h| h == root) {
        return Vec::new();
    }
    if !holes.iter().any(|h| h.starts_with(root)) {
        return vec![root.to_path_buf()];
    }
    if (host.stat)(root) != HostEntry::Dir {
        return vec![root.to_path_buf()];
    }
    let mut children = (host.list)(root);
    children.sort();
    children
        .iter()
        .flat_map(|child| grant_except(child, holes, host))
        .collect()
}

/// The command's whole environment: fixed values, the policy's `set`, and the allowed host
/// variables. Nothing else of the host reaches the sandbox.
fn environment(
    policy: &Policy,
    host_env: &[(String, String)],
    workspace: &Path,
) -> Vec<(String, String)> {
    let e = &policy.environment;
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    for name in &e.pass {
        if let Some((_, value)) = host_env.iter().find(|(k, _)| k == name) {
            env.insert(name.clone(), value.clone());
        }
    }
    for (k, v) in &e.set {
        env.insert(k.clone(), v.clone());
    }
    env.insert("PATH".into(), e.path.clone());
    env.insert("HOME".into(), e.home.display().to_string());
    env.insert("TZ".into(), e.tz.clone());
    env.insert("LANG".into(), e.lang.clone());
    env.insert("HOSTNAME".into(), e.hostname.clone());
    env.insert("USER".into(), "root".into());
    env.insert("LOGNAME".into(), "root".into());
    env.insert("SHELL".into(), "/bin/sh".into());
    if !workspace.as_os_str().is_empty() {
        env.insert("PWD".into(), workspace.display().to_string());
    }
    env.into_iter().collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn fake_stat(path: &Path) -> HostEntry {
        match path.to_str().unwrap() {
            "/usr" | "/etc" | "/etc/ssh" | "/lib64real" => HostEntry::Dir,
            "/bin" => HostEntry::Symlink(PathBuf::from("usr/bin")),
            "/lib" => HostEntry::Symlink(PathBuf::from("usr/lib")),
            "/etc/shadow" | "/etc/passwd" | "/etc/hosts" => HostEntry::File,
            "/proc/cpuinfo" | "/proc/slabinfo" | "/proc/keys" => HostEntry::File,
            "/proc/1" | "/proc/sys" => HostEntry::Dir,
            "/proc/self" => HostEntry::Symlink(PathBuf::from("4242")),
            _ => HostEntry::Missing,
        }
    }

    fn fake_list(path: &Path) -> Vec<PathBuf> {
        match path.to_str().unwrap() {
            "/etc" => ["/etc/shadow", "/etc/passwd", "/etc/ssh", "/etc/hosts"]
                .iter()
                .map(PathBuf::from)
                .collect(),
            "/proc" => [
                "/proc/1",
                "/proc/cpuinfo",
                "/proc/keys",
                "/proc/self",
                "/proc/slabinfo",
                "/proc/sys",
            ]
            .iter()
            .map(PathBuf::from)
            .collect(),
            _ => Vec::new(),
        }
    }

    fn host(cgroup: CgroupSupport) -> Host<'static> {
        Host {
            uid: 1000,
            gid: 1000,
            template_owner: (1000, 1000),
            landlock_abi: 7,
            cgroup,
            stat: &fake_stat,
            list: &fake_list,
            idmap: true,
            private_to: &fake_private,
        }
    }

    fn fake_private(path: &Path, _deep: bool, _ids: (u32, u32)) -> Vec<(PathBuf, bool)> {
        match path.to_str().unwrap() {
            "/etc" => vec![
                (PathBuf::from("/etc/shadow"), false),
                (PathBuf::from("/etc/root-only.conf"), false),
            ],
            "/proc" => vec![(PathBuf::from("/proc/slabinfo"), false)],
            _ => Vec::new(),
        }
    }

    fn request(argv: &[&str]) -> Request {
        Request {
            layers: vec![PathBuf::from("/templates/a")],
            binds: Vec::new(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            timeout_secs: None,
            host_env: vec![
                ("SECRET_TOKEN".into(), "x".into()),
                ("TERM".into(), "xterm".into()),
            ],
            without_namespaces: false,
            image: None,
        }
    }

    #[test]
    fn default_policy_binds_system_paths_read_only_and_recreates_symlinks() {
        let policy = Policy::bundled("default").unwrap();
        let plan = Plan::build(&policy, &request(&["true"]), &host(CgroupSupport::None)).unwrap();
        assert!(plan.mounts.contains(&MountStep::BindReadOnly {
            path: "/usr".into(),
            dir: true
        }));
        assert!(plan.mounts.contains(&MountStep::Symlink {
            path: "/bin".into(),
            target: "usr/bin".into()
        }));
        // /lib64 is missing on this fake host: nothing is mounted for it.
        assert!(!plan.mounts.iter().any(|m| matches!(m,
            MountStep::BindReadOnly { path, .. } if path == Path::new("/lib64"))));
    }

    #[test]
    fn hidden_paths_are_masked_by_kind() {
        let policy = Policy::bundled("default").unwrap();
        let plan = Plan::build(&policy, &request(&["true"]), &host(CgroupSupport::None)).unwrap();
        assert!(plan.mounts.contains(&MountStep::Mask {
            path: "/etc/shadow".into(),
            dir: false
        }));
        assert!(plan.mounts.contains(&MountStep::Mask {
            path: "/etc/ssh".into(),
            dir: true
        }));
    }

    #[test]
    fn mount_order_puts_proc_last_and_aliases_after_the_workspace() {
        let policy = Policy::bundled("default").unwrap();
        let plan = Plan::build(&policy, &request(&["true"]), &host(CgroupSupport::None)).unwrap();
        let pos = |f: &dyn Fn(&MountStep) -> bool| plan.mounts.iter().position(f).unwrap();
        let ws = pos(&|m| matches!(m, MountStep::Workspace { .. }));
        let alias = pos(&|m| matches!(m, MountStep::WorkspaceAlias { .. }));
        let home =
            pos(&|m| matches!(m, MountStep::Tmpfs { path, .. } if path == Path::new("/root")));
        assert!(home < alias && ws < alias);
        assert_eq!(plan.mounts.last(), Some(&MountStep::Proc));
    }

    #[test]
    fn landlock_grants_write_only_to_workspace_tmp_home_and_shm() {
        let policy = Policy::bundled("default").unwrap();
        let plan = Plan::build(&policy, &request(&["true"]), &host(CgroupSupport::None)).unwrap();
        let mut rw = plan.landlock.read_write.clone();
        rw.sort();
        let expected: Vec<PathBuf> = [
            "/dev/shm",
            "/root",
            "/root/.openclaw/workspace",
            "/tmp",
            "/workspace",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(rw, expected);
        assert!(plan.landlock.tcp_bind.is_empty() && plan.landlock.tcp_connect.is_empty());
        assert!(plan.landlock.scope);
    }

    #[test]
    fn a_read_only_workspace_policy_makes_the_workspace_read_only_everywhere() {
        let mut policy = Policy::bundled("verifier").unwrap();
        policy.filesystem.workspace_writable = false;
        let plan = Plan::build(&policy, &request(&["true"]), &host(CgroupSupport::None)).unwrap();
        assert!(plan.mounts.contains(&MountStep::Workspace {
            path: "/workspace".into(),
            writable: false
        }));
        assert!(
            !plan
                .landlock
                .read_write
                .contains(&PathBuf::from("/workspace"))
        );
        assert!(
            plan.landlock
                .read_exec
                .contains(&PathBuf::from("/workspace"))
        );
    }

    #[test]
    fn environment_is_fixed_and_host_variables_do_not_leak() {
        let policy = Policy::bundled("default").unwrap();
        let plan = Plan::build(&policy, &request(&["true"]), &host(CgroupSupport::None)).unwrap();
        let env: BTreeMap<_, _> = plan.env.iter().cloned().collect();
        assert_eq!(env["TZ"], "UTC");
        assert_eq!(env["HOME"], "/root");
        assert_eq!(env["PWD"], "/workspace");
        assert!(!env.contains_key("SECRET_TOKEN"));
        assert!(!env.contains_key("TERM"));
    }

    #[test]
    fn address_space_limit_is_used_only_without_a_memory_cgroup() {
        let policy = Policy::bundled("default").unwrap();
        let without =
            Plan::build(&policy, &request(&["true"]), &host(CgroupSupport::None)).unwrap();
        let with = Plan::build(&policy, &request(&["true"]), &host(CgroupSupport::V1)).unwrap();
        let has_as = |p: &Plan| {
            p.rlimits
                .iter()
                .any(|r| r.resource == RlimitKind::AddressSpace)
        };
        assert!(has_as(&without));
        assert!(!has_as(&with));
        assert_eq!(with.cgroup.unwrap().pids, policy.limits.processes);
    }

    #[test]
    fn workspace_mount_points_are_bound_after_the_workspace_and_need_namespaces() {
        use crate::spec::workspace_mounts::WorkspaceMount;
        let mut policy = Policy::bundled("default").unwrap();
        policy.filesystem.workspace_mounts = vec![WorkspaceMount {
            path: PathBuf::from("/logs"),
            dir: PathBuf::from("logs"),
        }];
        let plan = Plan::build(&policy, &request(&["true"]), &host(CgroupSupport::None)).unwrap();
        let pos = |f: &dyn Fn(&MountStep) -> bool| plan.mounts.iter().position(f).unwrap();
        let ws = pos(&|m| matches!(m, MountStep::Workspace { .. }));
        let at = pos(
            &|m| matches!(m, MountStep::WorkspaceDirAt { path, .. } if path == Path::new("/logs")),
        );
        assert!(ws < at);
        assert!(plan.landlock.read_write.contains(&PathBuf::from("/logs")));
        let mut portable = Policy::bundled("portable").unwrap();
        portable.filesystem.workspace_mounts = policy.filesystem.workspace_mounts.clone();
        let mut req = request(&["true"]);
        req.without_namespaces = true;
        let err = Plan::build(&portable, &req, &host(CgroupSupport::None)).unwrap_err();
        assert!(
            matches!(err, PlanError::MountsWithoutNamespaces { .. }),
            "{err}"
        );
    }

    #[test]
    fn a_policy_that_requires_namespaces_refuses_to_run_without_them() {
        let policy = Policy::bundled("default").unwrap();
        let mut req = request(&["true"]);
        req.without_namespaces = true;
        let err = Plan::build(&policy, &req, &host(CgroupSupport::None)).unwrap_err();
        assert!(matches!(
            err,
            PlanError::RequiredUnavailable {
                protection: Protection::UserNamespace,
                ..
            }
        ));
        let portable = Policy::bundled("portable").unwrap();
        let plan = Plan::build(&portable, &req, &host(CgroupSupport::None)).unwrap();
        assert!(!plan.namespaced && plan.mounts.is_empty());
        assert!(
            plan.seccomp.deny_inet,
            "no netns and no network: IP sockets denied"
        );
    }

    #[test]
    fn without_namespaces_landlock_grants_etc_child_by_child_around_holes() {
        let policy = Policy::bundled("portable").unwrap();
        let mut req = request(&["true"]);
        req.without_namespaces = true;
        let plan = Plan::build(&policy, &req, &host(CgroupSupport::None)).unwrap();
        let ro = &plan.landlock.read_exec;
        assert!(ro.contains(&PathBuf::from("/etc/passwd")));
        assert!(ro.contains(&PathBuf::from("/etc/hosts")));
        assert!(!ro.iter().any(|p| p == Path::new("/etc")));
        assert!(
            !ro.iter()
                .any(|p| p.starts_with("/etc/shadow") || p.starts_with("/etc/ssh"))
        );
        assert!(ro.contains(&PathBuf::from("/usr")));
    }

    #[test]
    fn without_a_pid_namespace_landlock_shows_no_host_process_in_proc() {
        let policy = Policy::bundled("portable").unwrap();
        let mut req = request(&["true"]);
        req.without_namespaces = true;
        let mut h = host(CgroupSupport::None);
        (h.uid, h.gid) = (0, 0);
        let plan = Plan::build(&policy, &req, &h).unwrap();
        let ro = &plan.landlock.read_exec;
        assert!(
            plan.landlock.own_proc,
            "each command gets its own /proc/PID"
        );
        assert!(ro.contains(&PathBuf::from("/proc/cpuinfo")));
        assert!(ro.contains(&PathBuf::from("/proc/sys")));
        for hidden in [
            "/proc",
            "/proc/1",
            "/proc/self",
            "/proc/slabinfo",
            "/proc/keys",
        ] {
            assert!(
                !ro.contains(&PathBuf::from(hidden)),
                "{hidden} granted: {ro:?}"
            );
        }
    }

    #[test]
    fn empty_command_and_zero_timeout_are_refused() {
        let policy = Policy::bundled("default").unwrap();
        assert!(matches!(
            Plan::build(&policy, &request(&[]), &host(CgroupSupport::None)),
            Err(PlanError::EmptyCommand)
        ));
        let mut req = request(&["true"]);
        req.timeout_secs = Some(0);
        assert!(matches!(
            Plan::build(&policy, &req, &host(CgroupSupport::None)),
            Err(PlanError::ZeroTimeout)
        ));
    }

    #[test]
    fn root_maps_the_template_owner_and_others_map_themselves() {
        let policy = Policy::bundled("default").unwrap();
        let mut h = host(CgroupSupport::None);
        h.template_owner = (1234, 99);
        let plan = Plan::build(&policy, &request(&["true"]), &h).unwrap();
        assert_eq!((plan.uid, plan.gid), (1000, 1000));
        h.uid = 0;
        h.gid = 0;
        let plan = Plan::build(&policy, &request(&["true"]), &h).unwrap();
        assert_eq!((plan.uid, plan.gid), (1234, 99));
        assert!(plan.invoker_is_root);
    }

    #[test]
    fn root_over_a_root_owned_template_maps_to_the_unused_id_through_idmapped_mounts() {
        let policy = Policy::bundled("default").unwrap();
        let mut h = host(CgroupSupport::None);
        (h.uid, h.gid, h.template_owner) = (0, 0, (0, 0));
        let plan = Plan::build(&policy, &request(&["true"]), &h).unwrap();
        assert_eq!(plan.uid_mapping, UidMapping::Idmapped);
        assert_eq!(
            (plan.uid, plan.gid),
            (SANDBOX_ROOT_HOST_ID, SANDBOX_ROOT_HOST_ID)
        );
        let masked = |p: &str| {
            plan.mounts
                .iter()
                .any(|m| matches!(m, MountStep::Mask { path, .. } if path == Path::new(p)))
        };
        // Nothing is host root inside: no list of root-only files is needed.
        assert!(!masked("/etc/root-only.conf") && !masked("/proc/slabinfo"));
    }

    #[test]
    fn where_idmapped_mounts_are_refused_root_only_host_files_are_masked() {
        let policy = Policy::bundled("default").unwrap();
        let mut h = host(CgroupSupport::None);
        (h.uid, h.gid, h.template_owner, h.idmap) = (0, 0, (0, 0), false);
        let plan = Plan::build(&policy, &request(&["true"]), &h).unwrap();
        assert_eq!(plan.uid_mapping, UidMapping::TemplateOwner);
        assert_eq!((plan.uid, plan.gid), (0, 0));
        let masks: Vec<&Path> = plan
            .mounts
            .iter()
            .filter_map(|m| match m {
                MountStep::Mask { path, .. } => Some(path.as_path()),
                _ => None,
            })
            .collect();
        for p in ["/etc/root-only.conf", "/proc/slabinfo", "/proc/keys"] {
            assert!(masks.contains(&Path::new(p)), "{p} not masked: {masks:?}");
        }
        let shadow = masks.iter().filter(|p| **p == Path::new("/etc/shadow"));
        assert_eq!(shadow.count(), 1, "a hidden path is masked once");
        // The /proc masks come after /proc is mounted.
        let proc = plan
            .mounts
            .iter()
            .position(|m| *m == MountStep::Proc)
            .unwrap();
        let slab = plan
            .mounts
            .iter()
            .position(|m| matches!(m, MountStep::Mask { path, .. } if path == Path::new("/proc/slabinfo")))
            .unwrap();
        assert!(proc < slab);
    }

    #[test]
    fn the_files_that_name_the_machine_show_the_policys_values() {
        let policy = Policy::bundled("default").unwrap();
        let plan = Plan::build(&policy, &request(&["true"]), &host(CgroupSupport::None)).unwrap();
        let hosts = plan.mounts.iter().find_map(|m| match m {
            MountStep::Generated { path, content } if path == Path::new("/etc/hosts") => {
                Some(content.clone())
            }
            _ => None,
        });
        let hosts = hosts.expect("/etc/hosts is replaced");
        assert!(hosts.contains("127.0.0.1\tlocalhost") && hosts.contains("\tenvcraft\n"));
        // The fake host has no /etc/hostname: nothing is made up for it.
        assert!(!plan.mounts.iter().any(|m| matches!(m,
            MountStep::Generated { path, .. } if path == Path::new("/etc/hostname"))));
        let id = &policy.environment.machine_id;
        assert_eq!(id.len(), 32);
        let files = identity_files(&policy);
        assert_eq!(
            files[2],
            (PathBuf::from("/etc/machine-id"), format!("{id}\n"))
        );
    }

    #[test]
    fn without_a_mount_namespace_unix_sockets_are_refused_unless_the_policy_allows_them() {
        let mut policy = Policy::bundled("portable").unwrap();
        let mut req = request(&["true"]);
        req.without_namespaces = true;
        let plan = Plan::build(&policy, &req, &host(CgroupSupport::None)).unwrap();
        assert!(plan.seccomp.deny_unix);
        policy.network.allow_unix_sockets = true;
        let plan = Plan::build(&policy, &req, &host(CgroupSupport::None)).unwrap();
        assert!(!plan.seccomp.deny_unix);
        req.without_namespaces = false;
        policy.network.allow_unix_sockets = false;
        let plan = Plan::build(&policy, &req, &host(CgroupSupport::None)).unwrap();
        assert!(
            !plan.seccomp.deny_unix,
            "a mount namespace keeps host sockets out of reach"
        );
    }

    #[test]
    fn private_tmpfs_come_before_read_only_binds_so_binds_below_them_stay_visible() {
        let policy = Policy::bundled("default").unwrap();
        let plan = Plan::build(&policy, &request(&["true"]), &host(CgroupSupport::None)).unwrap();
        let pos = |f: &dyn Fn(&MountStep) -> bool| plan.mounts.iter().position(f).unwrap();
        let tmp = pos(&|m| matches!(m, MountStep::Tmpfs { path, .. } if path == Path::new("/tmp")));
        let usr = pos(
            &|m| matches!(m, MountStep::BindReadOnly { path, .. } if path == Path::new("/usr")),
        );
        let shadow =
            pos(&|m| matches!(m, MountStep::Mask { path, .. } if path == Path::new("/etc/shadow")));
        assert!(tmp < usr && usr < shadow);
    }

    #[test]
    fn timeout_overrides_the_policy_wall_time() {
        let policy = Policy::bundled("default").unwrap();
        let mut req = request(&["true"]);
        req.timeout_secs = Some(3);
        let plan = Plan::build(&policy, &req, &host(CgroupSupport::None)).unwrap();
        assert_eq!(plan.wall_time_secs, 3);
    }
}
