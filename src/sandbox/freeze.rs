//! Freezing a sandbox's processes while envcraft reads its upper layer (to keep, verify or
//! fork it), so that nothing moves under the walk; thawing them after, always.
//!
//! With namespaces the sandbox's init does it ([`Report::Freeze`]): as PID 1 of the sandbox's
//! PID namespace, it sends `SIGSTOP` to every other process its namespace's `/proc` lists
//! ([`signal_namespace`]), whatever session or process group it made for itself, again each
//! round until that `/proc` shows every task stopped (a process forked as the signals went out
//! is caught by the next), within [`FREEZE_WAIT`]. `SIGCONT` to all thaws ([`Report::Thaw`]).
//! This needs no cgroup, so it works for every namespaced run, root or not; the cgroup freezer
//! would need a third cgroup per run (v1 here mounts `freezer` apart from `pids` and `memory`).
//!
//! Without namespaces (`portable`) envcraft stops the process group of each running background
//! command and every process in the run's cgroup when there is one; a process that left both
//! is not stopped. That is a consistency aid only: the walks of [`crate::workspace::tree`] are
//! safe with every process running.
//!
//! A process the agent stopped itself is continued by the thaw.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use super::{Backend, Report, Sandbox, SandboxError};

/// The longest a freeze waits for every process to be stopped before the walk goes ahead
/// anyway (a task in uninterruptible sleep stops only when its call returns).
pub const FREEZE_WAIT: Duration = Duration::from_secs(2);

/// Whether every task of every process in `pids` (as `/proc` under `proc_root` shows them) is
/// stopped or dead. A process that is gone counts as stopped.
fn all_stopped(proc_root: &Path, pids: &[i32]) -> bool {
    pids.iter().all(|pid| {
        let tasks = proc_root.join(pid.to_string()).join("task");
        let Ok(entries) = std::fs::read_dir(&tasks) else {
            return true;
        };
        entries.flatten().all(|task| {
            match std::fs::read_to_string(task.path().join("stat")) {
                // The state follows the command name's closing parenthesis.
                Ok(stat) => match stat
                    .rsplit_once(')')
                    .and_then(|(_, rest)| rest.trim_start().chars().next())
                {
                    None | Some('T' | 't' | 'Z' | 'X') => true,
                    Some('D') => waits_for_its_vfork_child(&task.path()),
                    Some(_) => false,
                },
                Err(_) => true,
            }
        })
    })
}

/// Whether a task in uninterruptible sleep is the parent of a `vfork` waiting for its child
/// to exec or exit (dash runs simple commands so, Python's `subprocess` too). It cannot stop
/// before that, and cannot run either: its child, which `pids` lists too, is what must stop.
/// Such a parent once kept every freeze around a `mv` in a loop waiting its full 2 s.
fn waits_for_its_vfork_child(task: &Path) -> bool {
    std::fs::read_to_string(task.join("wchan"))
        .is_ok_and(|wchan| matches!(wchan.trim(), "kernel_clone" | "wait_for_vfork_done"))
}

/// The processes `/proc` lists, other than `except`.
fn proc_pids(proc_root: &Path, except: i32) -> Vec<i32> {
    std::fs::read_dir(proc_root)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                .filter(|pid| *pid != except)
                .collect()
        })
        .unwrap_or_default()
}

/// Repeat `stop` until `pids()` are all stopped or [`FREEZE_WAIT`] has passed; whether they
/// were. Between rounds the thread yields for a millisecond: the stopped processes are
/// scheduled out, the others need the CPU to reach their stop.
fn stop_until_stopped(
    mut stop: impl FnMut(),
    pids: impl Fn() -> Vec<i32>,
    proc_root: &Path,
) -> bool {
    let deadline = Instant::now() + FREEZE_WAIT;
    loop {
        stop();
        if all_stopped(proc_root, &pids()) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Send `signal` to every other process of the init's PID namespace: those its own `/proc`
/// lists. Not `kill(-1)` first: for that the kernel walks every process on the machine, under
/// the lock every fork and exit of the machine takes, and the walk grew with the sessions held
/// (bench/README.md). Where `/proc` is not this namespace's (`/proc/self` is not 1),
/// `kill(-1)`, which reaches the same processes. A process forked as the signals go out is not
/// reached: callers repeat until what they wait for holds.
/// Scope: the sandbox's init only (from anywhere else it reaches the host's processes).
pub fn signal_namespace(signal: Signal) {
    let proc_root = Path::new("/proc");
    let ours = std::fs::read_link(proc_root.join("self")).is_ok_and(|p| p.as_os_str() == "1");
    if !ours {
        let _ = kill(Pid::from_raw(-1), signal);
        return;
    }
    for pid in proc_pids(proc_root, 1) {
        let _ = kill(Pid::from_raw(pid), signal);
    }
}

/// The init's part of [`Report::Freeze`]: stop every other process of its PID namespace.
/// Scope: the sandbox's init only.
pub fn stop_namespace() -> bool {
    let proc_root = Path::new("/proc");
    stop_until_stopped(
        || signal_namespace(Signal::SIGSTOP),
        || proc_pids(proc_root, 1),
        proc_root,
    )
}

/// The init's part of [`Report::Thaw`]: nothing of the namespace forks while all is stopped, so
/// one round reaches every process. Scope: the sandbox's init only.
pub fn continue_namespace() {
    signal_namespace(Signal::SIGCONT);
}

impl Sandbox {
    /// The processes envcraft can reach without namespaces: each running background command's
    /// process group leader, and what the run's cgroup lists.
    fn host_processes(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = self
            .background
            .iter()
            .filter(|b| !b.ended)
            .filter_map(|b| b.direct.as_ref().map(|(pid, _)| pid.as_raw()))
            .collect();
        if let Some(cg) = &self.cgroup {
            pids.extend(cg.processes());
        }
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Whether the init has ended the sandbox (reported `Stopped`): nothing runs any more.
    fn ended(&self) -> bool {
        self.pending
            .iter()
            .any(|r| matches!(r, Report::Stopped { .. }))
    }

    /// Stop every process of the sandbox (see the module); whether all of them stopped.
    fn freeze(&mut self) -> Result<bool, SandboxError> {
        self.wait_ready()?;
        if let Backend::Host { .. } = self.backend {
            let leaders = self.host_processes();
            return Ok(stop_until_stopped(
                || {
                    for pid in &leaders {
                        let _ = killpg(Pid::from_raw(*pid), Signal::SIGSTOP);
                        let _ = kill(Pid::from_raw(*pid), Signal::SIGSTOP);
                    }
                    for pid in self.cgroup.iter().flat_map(|cg| cg.processes()) {
                        let _ = kill(Pid::from_raw(pid), Signal::SIGSTOP);
                    }
                },
                || self.host_processes(),
                Path::new("/proc"),
            ));
        }
        if self.ended() {
            return Ok(true);
        }
        // The init may have ended the sandbox already (after its last command): its `Stopped`
        // is then still to be read, though the request cannot be sent.
        let sent = self.channel().send(&Report::Freeze, &[]);
        loop {
            match self
                .channel()
                .recv()
                .map_err(super::os("read the sandbox's reports"))?
            {
                Some((Report::Frozen { stopped }, _)) => return Ok(stopped),
                // The init ended the sandbox (after its last command): every other process is
                // dead, which is as frozen as it gets. Kept for the sandbox's close.
                Some((stopped @ Report::Stopped { .. }, _)) => {
                    self.pending.push(stopped);
                    return Ok(true);
                }
                Some((report, fds)) => {
                    if let Some(other) = self.absorb(report, fds)? {
                        self.pending.push(other);
                    }
                }
                None => {
                    return Err(match sent {
                        Err(e) => super::os("freeze the sandbox")(e),
                        Ok(()) => SandboxError::Lost,
                    });
                }
            }
        }
    }

    /// Continue every process [`Sandbox::freeze`] stopped.
    fn thaw(&mut self) {
        match &self.backend {
            Backend::Host { .. } => {
                let pids = self.host_processes();
                for pid in pids {
                    let _ = killpg(Pid::from_raw(pid), Signal::SIGCONT);
                    let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
                }
            }
            Backend::Namespaced { .. } => {
                if self.ended() {
                    return;
                }
                if let Err(e) = self.channel().send(&Report::Thaw, &[]) {
                    tracing::error!(error = %e, "cannot thaw the sandbox");
                }
            }
        }
    }

    /// Run `read` with the sandbox's processes frozen (see the module), and thaw them after,
    /// whatever `read` returns.
    pub fn frozen<T, E: From<SandboxError>>(
        &mut self,
        read: impl FnOnce(&mut Sandbox) -> Result<T, E>,
    ) -> Result<T, E> {
        match self.freeze() {
            Ok(true) => {}
            Ok(false) => tracing::warn!("not every process of the sandbox stopped in time"),
            Err(e) => {
                self.thaw();
                return Err(e.into());
            }
        }
        let result = read(self);
        self.thaw();
        result
    }
}
