//! How many sessions this machine can hold, and the answer when one more does not fit.
//!
//! At start the server raises its soft descriptor limit to the hard one, measures what one
//! session costs in descriptors and processes (a session made and closed before serving), and
//! plans: the descriptors left once accepting and answering are reserved, divided by a
//! session's cost, against `--max-sessions`, the pids limits and the memory available. The plan
//! is logged. Creates past the descriptor bound, and any create or fork the kernel refuses for
//! lack of descriptors, processes or memory, answer `capacity` 503 naming the resource, never
//! a 500 that blames the task.

use std::path::{Path, PathBuf};

use nix::sys::resource::{Resource, getrlimit, setrlimit};

use super::error::ApiError;
use crate::sandbox::SandboxError;
use crate::session::{Session, SessionError, SessionOptions};
use crate::spec::task::TaskSpec;

/// Descriptors kept for accepting and answering beyond one per connection (the listener, logs,
/// the files a call opens for a moment, the pipes of a command).
pub const ANSWER_MARGIN: u64 = 64;

/// Descriptors of one session when none could be measured (no task under the workspaces made
/// a session at start): the sandbox's channel and pidfd, the workspace and view descriptors,
/// the cgroup's, the transcript, rounded up.
pub const UNMEASURED_SESSION_FDS: u64 = 12;

/// Memory of the machine one idle session takes besides its memory cgroup's shrinker state,
/// measured system-wide (`/proc/meminfo`): 0.65-0.70 MiB at 1,000 and at 10,000 idle sessions
/// (the init's pages and page tables, the network and other namespaces, the mounts; see
/// bench/README.md), rounded up. An estimate, not measured at each start.
pub const SESSION_MEMORY_BYTES: u64 = 768 << 10;

/// Filesystem instances a session mounts (its scratch and layer tmpfs, its workspace overlay,
/// its `/proc`, its IPC namespace's `mqueue`): each is a memory-aware shrinker of the kernel.
pub const SESSION_SUPERBLOCKS: u64 = 5;

/// What a memory cgroup holds for every 64 shrinkers the machine has had at once, per NUMA
/// node: a 520-byte unit (their deferred counts and bitmap) in a `kmalloc-1k` object.
pub const SHRINKER_UNIT_BYTES: u64 = 1024;

/// The machine's memory one idle session costs while `sessions` are open: the part of its own
/// ([`SESSION_MEMORY_BYTES`]), and where each session has a memory cgroup (`memcg_nodes` > 0,
/// the NUMA nodes the kernel keeps shrinker state for) the state that cgroup holds for every
/// session's filesystems, which grows with the sessions open (see docs/http-api.md).
pub fn session_memory(sessions: u64, memcg_nodes: u64) -> u64 {
    let units = (sessions * SESSION_SUPERBLOCKS).div_ceil(64);
    SESSION_MEMORY_BYTES + units * SHRINKER_UNIT_BYTES * memcg_nodes
}

/// The most sessions whose memory ([`session_memory`] each) fits in `room` bytes.
pub fn sessions_in_memory(room: u64, memcg_nodes: u64) -> u64 {
    let fits = |n: u64| n.saturating_mul(session_memory(n, memcg_nodes)) <= room;
    let (mut low, mut high) = (0, room / SESSION_MEMORY_BYTES);
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        if fits(mid) {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    low
}

/// The resource a session could not get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scarce {
    Descriptors,
    Processes,
    Memory,
    /// Space or inodes of the state root's filesystem (ENOSPC, EDQUOT outside a clone).
    Disk,
    /// The kernel's bound on namespaces (`user.max_*_namespaces`: ENOSPC from a clone).
    Namespaces,
}

/// Free space a create needs in the state root's filesystem: a session's directory, state and
/// first transcript lines, and room for the open sessions' next appends.
pub const DISK_FLOOR_BYTES: u64 = 64 << 20;
/// Free inodes a create needs there (a session's directory and files, its sandbox's).
pub const DISK_FLOOR_INODES: u64 = 1024;

/// What one session costs the server process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionCost {
    /// While it holds its sandbox's workspace descriptors (as a call runs).
    pub descriptors: u64,
    /// Once it gave them back (see `sandbox::handback`): its sandbox's channel. Equal to
    /// `descriptors` where nothing can be given back (no namespaces).
    pub kept: u64,
    pub processes: u64,
    /// Whether it was measured (else the descriptors are [`UNMEASURED_SESSION_FDS`]).
    pub measured: bool,
}

/// What the machine offers, read at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Machine {
    /// The soft descriptor limit after raising it.
    pub fd_limit: u64,
    /// Descriptors open before any session.
    pub fds_open: u64,
    /// Processes this server may still make (pids limits), if any bound is known.
    pub processes_left: Option<u64>,
    /// `MemAvailable` of `/proc/meminfo`.
    pub memory_available: Option<u64>,
    /// `MemTotal` of `/proc/meminfo`.
    pub memory_total: Option<u64>,
    /// The NUMA nodes a memory cgroup holds shrinker state for where each session gets one,
    /// else 0 (no cgroup limits here).
    pub memcg_nodes: u64,
}

/// Where envcraft makes its runs' cgroups on a cgroup v2 host (see `sandbox::cgroup`).
const RUN_CGROUPS_V2: &str = "/sys/fs/cgroup/envcraft";

/// Calls that run at once at most: the runtime's blocking threads (tokio's default), each of
/// which may hold one session's workspace descriptors while its call runs.
pub const CALLS_AT_ONCE: u64 = 512;

/// How many sessions fit, and what bounds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Sessions the descriptors allow.
    pub by_descriptors: u64,
    /// Descriptors the sessions' sandboxes may hold in all: their channels, and the workspace
    /// descriptors of those that keep theirs (see `sandbox::handback`), beyond what the calls
    /// running at once hold.
    pub sandbox_room: u64,
    /// Sessions that may keep their workspace descriptors between calls once `sessions` are
    /// open (the others give them back after each request).
    pub holding: u64,
    pub by_processes: Option<u64>,
    pub by_memory: Option<u64>,
    /// What one idle session costs the machine once `sessions` are open ([`session_memory`]).
    pub memory_per_session: u64,
    pub max_sessions: u64,
    /// Descriptors kept for connections and answers.
    pub reserved: u64,
    /// The smallest bound: how many sessions this machine can hold.
    pub sessions: u64,
    /// What sets `sessions`: `descriptors`, `max_sessions`, `processes` or `memory`.
    pub bound: &'static str,
}

/// How many sandboxes of each kind and plan the server builds ahead (`--warm-sandboxes`, see
/// `sandbox::warm` and `sandbox::pool`): `requested`, cut so that all of them together take at
/// most an eighth of the descriptors and processes sessions could have (0 under a tight limit).
pub fn warm_sandboxes(
    machine: &Machine,
    cost: &SessionCost,
    max_connections: u64,
    requested: usize,
) -> usize {
    let left = machine.fd_limit.saturating_sub(machine.fds_open);
    let reserved = (max_connections + ANSWER_MARGIN).min(left / 2);
    let mut fit = left.saturating_sub(reserved) / 8 / pooled(1, cost.descriptors);
    if let Some(processes) = machine.processes_left {
        fit = fit.min(processes / 8 / pooled(1, cost.processes));
    }
    requested.min(usize::try_from(fit).unwrap_or(usize::MAX))
}

/// What `warm` sandboxes of each kind and plan hold at most, counted as `each` per sandbox: a
/// warm init of either kind and a whole sandbox of each of the pooled plans.
fn pooled(warm: u64, each: u64) -> u64 {
    warm * (2 + crate::sandbox::pool::MAX_PLANS as u64 * each.max(1))
}

impl Machine {
    /// This machine with what `warm` sandboxes built ahead hold taken as already used.
    pub fn less_warm(&self, warm: usize, cost: &SessionCost) -> Machine {
        let warm = warm as u64;
        Machine {
            fds_open: self.fds_open + pooled(warm, cost.descriptors),
            processes_left: self
                .processes_left
                .map(|left| left.saturating_sub(pooled(warm, cost.processes))),
            memory_available: self
                .memory_available
                .map(|m| m.saturating_sub(pooled(warm, SESSION_MEMORY_BYTES))),
            ..*self
        }
    }
}

/// Plan the sessions of a server with `max_connections` and `max_sessions` on `machine`.
/// The reserve for answering is `max_connections + ANSWER_MARGIN`, but never more than half of
/// what is left (a limit too low for every connection still holds sessions; connections past
/// it wait in the listen backlog).
pub fn plan(
    machine: &Machine,
    cost: &SessionCost,
    max_connections: u64,
    max_sessions: u64,
) -> Plan {
    let left = machine.fd_limit.saturating_sub(machine.fds_open);
    let reserved = (max_connections + ANSWER_MARGIN).min(left / 2);
    let kept = cost.kept.clamp(1, cost.descriptors.max(1));
    let set = cost.descriptors.saturating_sub(kept);
    let in_flight =
        (max_connections.min(CALLS_AT_ONCE) * set).min(left.saturating_sub(reserved) / 2);
    let sandbox_room = left.saturating_sub(reserved).saturating_sub(in_flight);
    let by_descriptors = sandbox_room / kept;
    let by_processes = machine
        .processes_left
        .map(|left| left / cost.processes.max(1));
    let by_memory = machine.memory_available.map(|m| {
        let room = m.saturating_sub(memory_floor(machine.memory_total.unwrap_or(m)));
        sessions_in_memory(room, machine.memcg_nodes)
    });
    let mut sessions = max_sessions;
    let mut bound = "max_sessions";
    for (candidate, name) in [
        (Some(by_descriptors), "descriptors"),
        (by_processes, "processes"),
        (by_memory, "memory"),
    ] {
        if let Some(n) = candidate
            && n < sessions
        {
            sessions = n;
            bound = name;
        }
    }
    let holding = match set {
        0 => sessions,
        set => sandbox_room.saturating_sub(sessions * kept) / set,
    };
    Plan {
        by_descriptors,
        sandbox_room,
        holding,
        by_processes,
        by_memory,
        memory_per_session: session_memory(sessions, machine.memcg_nodes),
        max_sessions,
        reserved,
        sessions,
        bound,
    }
}

/// Raise the soft descriptor limit to the hard one (an unlimited hard one: to the kernel's
/// `fs.nr_open`, the most a process may have); the soft limit now in force.
pub fn raise_descriptor_limit() -> u64 {
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 1024;
    };
    let target = read_number(Path::new("/proc/sys/fs/nr_open")).map_or(hard, |n| n.min(hard));
    if soft < target && setrlimit(Resource::RLIMIT_NOFILE, target, hard).is_ok() {
        return target;
    }
    soft
}

/// The soft descriptor limit in force.
pub fn descriptor_limit() -> u64 {
    getrlimit(Resource::RLIMIT_NOFILE).map_or(1024, |(soft, _)| soft)
}

/// Descriptors this process has open (entries of `/proc/self/fd`, less the one reading it).
pub fn open_descriptors() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .map(|dir| dir.count().saturating_sub(1) as u64)
        .unwrap_or(0)
}

/// Processes whose parent is this one.
fn children() -> u64 {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            // pid (comm) state ppid ...: comm may hold spaces, so split after its `)`.
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1).map(|p| p == me))
                .unwrap_or(false)
        })
        .count() as u64
}

fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// This process's cgroup (v2) directory.
fn own_cgroup() -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/')))
}

/// Processes this server may still make: the smallest of the kernel's `pid_max` and
/// `threads-max` and its cgroup's `pids.max`, less what exists.
fn processes_left() -> Option<u64> {
    let tasks_now = std::fs::read_dir("/proc").ok()?.count() as u64;
    let kernel = [
        read_number(Path::new("/proc/sys/kernel/pid_max")),
        read_number(Path::new("/proc/sys/kernel/threads-max")),
    ]
    .into_iter()
    .flatten()
    .min()
    .map(|n| n.saturating_sub(tasks_now));
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|text| {
            let path = text
                .lines()
                .find_map(|l| l.strip_prefix("0::"))?
                .to_string();
            let dir = Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
            let max = read_number(&dir.join("pids.max"))?;
            let current = read_number(&dir.join("pids.current")).unwrap_or(0);
            Some(max.saturating_sub(current))
        });
    [kernel, cgroup].into_iter().flatten().min()
}

fn memory_available() -> Option<u64> {
    meminfo("MemAvailable:")
}

fn memory_total() -> Option<u64> {
    meminfo("MemTotal:")
}

/// A `/proc/meminfo` field, in bytes. Read in one `read` of a buffer that holds the whole
/// file (about 1.5 KiB): `read_to_string` grows its buffer from 32 bytes, eight reads of a file
/// the kernel makes anew for each create.
fn meminfo(field: &str) -> Option<u64> {
    use std::io::Read;
    let mut buf = [0u8; 8192];
    let n = std::fs::File::open("/proc/meminfo")
        .ok()?
        .read(&mut buf)
        .ok()?;
    let text = std::str::from_utf8(&buf[..n]).ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// What the machine offers now (descriptors counted now: call before any session).
pub fn machine(fd_limit: u64) -> Machine {
    Machine {
        fd_limit,
        fds_open: open_descriptors(),
        processes_left: processes_left(),
        memory_available: memory_available(),
        memory_total: memory_total(),
        memcg_nodes: memcg_nodes(),
    }
}

/// The NUMA nodes the kernel keeps each memory cgroup's shrinker state for (its possible
/// nodes), where sessions get memory cgroups; 0 where they get none.
fn memcg_nodes() -> u64 {
    if !crate::sandbox::cgroup::memory_limited() {
        return 0;
    }
    std::fs::read_to_string("/sys/devices/system/node/possible")
        .ok()
        .and_then(|list| node_count(&list))
        .unwrap_or(1)
}

/// Nodes in a kernel node list (`0`, `0-3`, `0,2-3`).
fn node_count(list: &str) -> Option<u64> {
    let mut count = 0;
    for part in list.trim().split(',') {
        count += match part.split_once('-') {
            Some((a, b)) => b.parse::<u64>().ok()?.checked_sub(a.parse::<u64>().ok()?)? + 1,
            None => part.parse::<u64>().map(|_| 1).ok()?,
        };
    }
    Some(count)
}

/// Measure one session: make two of the first task under `workspaces` that makes one (at
/// most three tried), and count this process's descriptors and children before and after the
/// second (the first pays what is made once for all sessions: the owner locks), and again once
/// it gave its workspace descriptors back; close both.
pub fn measure_session(workspaces: &Path, options: &SessionOptions) -> SessionCost {
    let create = |task: &TaskSpec| {
        let _clone = crate::sandbox::maker::clone_lock();
        Session::create(task, options)
    };
    for dir in crate::spec::task::find_tasks(workspaces)
        .into_iter()
        .take(3)
    {
        let Ok(task) = TaskSpec::load(&dir) else {
            continue;
        };
        let first = match create(&task) {
            Ok(session) => session,
            Err(e) => {
                tracing::info!(task = %dir.display(), error = %crate::error::chain(&e), "capacity: no session to measure from this task");
                continue;
            }
        };
        let (fds, kids) = (open_descriptors(), children());
        let Ok(mut session) = create(&task) else {
            first.close();
            continue;
        };
        let descriptors = open_descriptors().saturating_sub(fds).max(1);
        let processes = children().saturating_sub(kids).max(1);
        session.give_back_descriptors();
        let kept = open_descriptors().saturating_sub(fds).clamp(1, descriptors);
        session.close();
        first.close();
        return SessionCost {
            descriptors,
            kept,
            processes,
            measured: true,
        };
    }
    UNMEASURED
}

/// What a session is taken to cost where none could be measured.
pub const UNMEASURED: SessionCost = SessionCost {
    descriptors: UNMEASURED_SESSION_FDS,
    kept: UNMEASURED_SESSION_FDS,
    processes: 1,
    measured: false,
};

/// The refusal for `scarce`, with what is open now for descriptors.
pub fn refusal(scarce: Scarce) -> ApiError {
    match scarce {
        Scarce::Descriptors => ApiError::capacity(format!(
            "no descriptors left for another session ({} open of a limit of {}): close sessions or raise the limit",
            open_descriptors(),
            descriptor_limit()
        )),
        Scarce::Processes => ApiError::capacity(
            "no processes left for another session (the kernel refused a new one): close sessions or raise the pids limit",
        ),
        Scarce::Memory => ApiError::capacity(
            "no memory left for another session (the kernel refused it): close sessions or add memory",
        ),
        Scarce::Disk => ApiError::capacity(
            "no disk left in the state root for another session (the kernel refused a write): close sessions or free space there",
        ),
        Scarce::Namespaces => ApiError::capacity(
            "no namespaces left for another session (the kernel's user.max_*_namespaces): close sessions or raise those limits",
        ),
    }
}

/// `capacity` when the state root's filesystem has less than [`DISK_FLOOR_BYTES`] free for
/// this user or fewer than [`DISK_FLOOR_INODES`] inodes (`None` where it cannot be read).
pub fn disk_verdict(state_root: &Path) -> Result<(), ApiError> {
    let Ok(st) = nix::sys::statvfs::statvfs(state_root) else {
        return Ok(());
    };
    let free = st.blocks_available().saturating_mul(st.fragment_size());
    let inodes = st.files_available();
    // A filesystem without inode counts (some report 0 files in all) is not bounded by them.
    let counts_inodes = st.files() > 0;
    if free < DISK_FLOOR_BYTES || (counts_inodes && inodes < DISK_FLOOR_INODES) {
        return Err(ApiError::capacity(format!(
            "no disk left in the state root {} for another session ({} MiB and {} inodes free; a session needs {} MiB and {} inodes): close sessions or free space there",
            state_root.display(),
            free >> 20,
            inodes,
            DISK_FLOOR_BYTES >> 20,
            DISK_FLOOR_INODES
        )));
    }
    Ok(())
}

/// `capacity` when the cgroup under which envcraft makes its runs' cgroups (cgroup v2) holds
/// as many descendants as its `cgroup.max.descendants` allows, less the two a session's
/// sandbox makes (cgroup v1 has no such bound).
pub fn cgroups_verdict(parent: &Path) -> Result<(), ApiError> {
    let Some(max) = std::fs::read_to_string(parent.join("cgroup.max.descendants"))
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
    else {
        return Ok(()); // "max", or no such file
    };
    let held = std::fs::read_to_string(parent.join("cgroup.stat"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("nr_descendants "))
                .and_then(|n| n.trim().parse::<u64>().ok())
        })
        .unwrap_or(0);
    if held + 2 > max {
        return Err(ApiError::capacity(format!(
            "no cgroups left for another session ({held} of the {max} that {}'s cgroup.max.descendants allows): close sessions or raise that limit",
            parent.display()
        )));
    }
    Ok(())
}

fn scarce_errno(errno: i32, from_clone: bool) -> Option<Scarce> {
    match errno {
        libc::EMFILE | libc::ENFILE => Some(Scarce::Descriptors),
        libc::ENOMEM => Some(Scarce::Memory),
        libc::EAGAIN if from_clone => Some(Scarce::Processes),
        libc::ENOSPC if from_clone => Some(Scarce::Namespaces),
        libc::ENOSPC | libc::EDQUOT => Some(Scarce::Disk),
        _ => None,
    }
}

/// `e` as a sandbox error, also inside a session error (whose `transparent` variant hands
/// on the sandbox error's source, never the sandbox error itself).
fn sandbox_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a SandboxError> {
    e.downcast_ref::<SandboxError>()
        .or_else(|| match e.downcast_ref::<SessionError>() {
            Some(SessionError::Sandbox(sandbox)) => Some(sandbox),
            _ => None,
        })
}

/// The resource the kernel refused somewhere in `error`'s chain: descriptors (EMFILE, ENFILE),
/// memory (ENOMEM), processes (EAGAIN from a clone, or from a step of the sandbox's setup).
pub fn scarce_in(error: &(dyn std::error::Error + 'static)) -> Option<Scarce> {
    let mut from_clone = false;
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(sandbox) = sandbox_error(e) {
            match sandbox {
                SandboxError::Os { what, .. } => from_clone = what.starts_with("clone"),
                SandboxError::Setup { errno, .. } => {
                    if let Some(scarce) = scarce_errno(*errno, true) {
                        return Some(scarce);
                    }
                }
                _ => {}
            }
        }
        let errno = e
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
            .or_else(|| e.downcast_ref::<nix::errno::Errno>().map(|n| *n as i32));
        if let Some(scarce) = errno.and_then(|n| scarce_errno(n, from_clone)) {
            return Some(scarce);
        }
        next = e.source();
    }
    None
}

/// Sessions past which every create counts the descriptors really open (a session may cost
/// more than the one measured at start).
pub const COUNTED_NEAR: u64 = 16;

/// Processes kept beyond one session's for the commands a call starts.
pub const PROCESS_MARGIN: u64 = 16;

/// The check made before each create or fork.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Headroom {
    pub fd_limit: u64,
    pub reserved: u64,
    pub per_session: u64,
    /// Sessions the descriptors allow.
    pub sessions: u64,
    pub processes_per_session: u64,
    /// The server's cgroup directory when it has a `pids.max` (read at each check).
    pub pids: Option<PathBuf>,
    /// The state root, whose filesystem's free space and inodes are checked.
    pub state_root: Option<PathBuf>,
    /// `MemTotal`, read at start (the memory floor is a share of it).
    pub memory_total: Option<u64>,
}

impl Headroom {
    pub fn new(plan: &Plan, machine: &Machine, cost: &SessionCost) -> Headroom {
        Headroom {
            fd_limit: machine.fd_limit,
            reserved: plan.reserved,
            per_session: cost.descriptors,
            sessions: plan.by_descriptors,
            processes_per_session: cost.processes,
            pids: own_cgroup().filter(|dir| read_number(&dir.join("pids.max")).is_some()),
            state_root: None,
            memory_total: machine.memory_total,
        }
    }

    /// The same, checking the free space and inodes of `state_root`'s filesystem too.
    pub fn with_state_root(self, state_root: &Path) -> Headroom {
        Headroom {
            state_root: Some(state_root.to_path_buf()),
            ..self
        }
    }

    /// Whether one more session fits beside the `held` ones (sessions open or being made,
    /// this one not counted): descriptors by the plan, and near its bound by those open now;
    /// processes by the cgroup's `pids.max`; memory by `MemAvailable`; the state root's disk
    /// by its free space and inodes; cgroups by `cgroup.max.descendants` (v2).
    pub fn check(&self, held: u64) -> Result<(), ApiError> {
        if held >= self.sessions {
            return Err(refusal(Scarce::Descriptors));
        }
        if self.sessions - held <= COUNTED_NEAR
            // The open connections' descriptors are within the reserve: not counted twice.
            && open_descriptors().saturating_sub(super::connections::open_connections())
                + self.per_session
                + self.reserved
                > self.fd_limit
        {
            return Err(refusal(Scarce::Descriptors));
        }
        if let Some(dir) = &self.pids
            && let Some(max) = read_number(&dir.join("pids.max"))
        {
            let current = read_number(&dir.join("pids.current")).unwrap_or(0);
            processes_verdict(current, max, self.processes_per_session)?;
        }
        if let Some(available) = memory_available() {
            memory_verdict(available, self.memory_total.unwrap_or(available))?;
        }
        if let Some(root) = &self.state_root {
            disk_verdict(root)?;
        }
        cgroups_verdict(Path::new(RUN_CGROUPS_V2))?;
        Ok(())
    }
}

/// `capacity` when `current` of `max` processes leave no room for a session of `per_session`
/// and the commands of a call.
pub fn processes_verdict(current: u64, max: u64, per_session: u64) -> Result<(), ApiError> {
    if current + per_session + PROCESS_MARGIN > max {
        return Err(ApiError::capacity(format!(
            "no processes left for another session ({current} in use of the pids limit of {max}): close sessions or raise the limit"
        )));
    }
    Ok(())
}

/// Memory kept free for the machine (the sessions' commands, the page cache, the kernel's
/// delayed frees) beyond two sessions' estimate: a twentieth of it, at least 512 MiB. What
/// one more session costs the kernel grows with the sessions already open (each memory cgroup
/// gets room for every filesystem alive: see docs/http-api.md), so a floor, not the estimate,
/// is what keeps the machine from running out.
pub fn memory_floor(total: u64) -> u64 {
    (total / 20).max(512 << 20) + 2 * SESSION_MEMORY_BYTES
}

/// `capacity` when `available` bytes of a machine of `total` are below [`memory_floor`].
pub fn memory_verdict(available: u64, total: u64) -> Result<(), ApiError> {
    let floor = memory_floor(total);
    if available < floor {
        return Err(ApiError::capacity(format!(
            "no memory left for another session ({} MiB available, {} MiB kept free): close sessions or add memory",
            available >> 20,
            floor >> 20
        )));
    }
    Ok(())
}

/// The `capacity` refusal when the kernel refused a resource somewhere in `error`'s chain
/// (logged), else `None`: the caller's own error applies.
pub fn refused_by_kernel(error: &(dyn std::error::Error + 'static)) -> Option<ApiError> {
    let scarce = scarce_in(error)?;
    tracing::warn!(error = %crate::error::chain(error), ?scarce, "out of capacity");
    Some(refusal(scarce))
}

/// The start log line: how many sessions fit and what bounds them (a warning when
/// `--max-sessions` asks for more than the descriptors allow).
pub fn log(plan: &Plan, machine: &Machine, cost: &SessionCost) {
    tracing::info!(
        sessions = plan.sessions,
        bound = plan.bound,
        by_descriptors = plan.by_descriptors,
        by_processes = ?plan.by_processes,
        by_memory = ?plan.by_memory,
        max_sessions = plan.max_sessions,
        descriptor_limit = machine.fd_limit,
        descriptors_open = machine.fds_open,
        descriptors_reserved = plan.reserved,
        descriptors_per_session = cost.descriptors,
        descriptors_kept_per_idle_session = cost.kept,
        sandbox_room = plan.sandbox_room,
        sessions_holding_workspace_descriptors = plan.holding,
        measured = cost.measured,
        processes_per_session = cost.processes,
        memory_per_session_estimate = plan.memory_per_session,
        memory_cgroup_nodes = machine.memcg_nodes,
        "capacity: this machine can hold {} sessions, bounded by {}",
        plan.sessions,
        plan.bound
    );
    if plan.max_sessions > plan.by_descriptors {
        tracing::warn!(
            max_sessions = plan.max_sessions,
            by_descriptors = plan.by_descriptors,
            descriptor_limit = machine.fd_limit,
            "capacity: --max-sessions {} exceeds the {} sessions the descriptor limit of {} allows: creates past it answer 503 capacity; raise the hard limit (ulimit -Hn) to hold more",
            plan.max_sessions,
            plan.by_descriptors,
            machine.fd_limit
        );
    }
}

#[cfg(test)]
#[path = "capacity_tests.rs"]
mod tests;
