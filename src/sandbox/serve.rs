//! The init's service loop: start the commands envcraft asks for (see [`super::spawn`]),
//! report their ends, reap orphans, and at the end kill and reap everything left (steps 13-17
//! of the table in [`super::child`]).

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::channel::{Channel, Report};
use super::child::{Step, StepError, command_rlimits};
use super::command::resolve;
use super::landlock;
use super::plan::Plan;
use super::spawn;
use crate::sys;

/// The workspace's descriptors as the init keeps them (see `child`, step 6), in the order
/// [`Report::WorkspaceReady`] carries them: the layer, the workspace root, the template view.
pub(super) struct Workspace {
    pub kind: super::plan::WorkspaceKind,
    pub fds: [std::fs::File; 3],
}

impl Workspace {
    pub(super) fn send(&self, channel: &Channel) -> io::Result<()> {
        let fds = self.fds.each_ref().map(AsRawFd::as_raw_fd);
        channel.send(&Report::WorkspaceReady { kind: self.kind }, &fds)
    }
}

/// What the init keeps for its loop beyond the plan.
pub(super) struct Kept {
    pub oom_score: Option<OomScore>,
    /// The commands' memory cgroup's membership file, where they have one (see `cgroup`).
    pub commands_cgroup: Option<OwnedFd>,
    pub workspace: Workspace,
}

/// The init's loop: run the commands envcraft asks for, report their ends, reap orphans, stop
/// and continue every other process on `Freeze`/`Thaw` (see `live::freeze`), hand the
/// workspace's descriptors over again on `HandOver`, and return on `Shutdown`, after the last
/// command, or when envcraft goes away.
pub(super) fn serve(
    landlock: landlock::LandlockOutcome,
    plan: &Plan,
    channel: &Channel,
    kept: Kept,
) -> Result<(), StepError> {
    let Kept {
        oom_score,
        commands_cgroup,
        workspace,
    } = kept;
    let mut starter =
        Starter::new(plan, landlock, oom_score, commands_cgroup).step("map the commands' stack")?;
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    // Commands running: (id, pid, pidfd).
    let mut running: Vec<(u64, Pid, OwnedFd)> = Vec::new();
    // The command whose end ends the sandbox (`Exec { last: true }`).
    let mut last: Option<u64> = None;
    loop {
        let mut fds = vec![PollFd::new(channel.as_fd(), PollFlags::POLLIN)];
        fds.extend(
            running
                .iter()
                .map(|(_, _, fd)| PollFd::new(fd.as_fd(), PollFlags::POLLIN)),
        );
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e).step("wait for requests"),
        }
        let ready: Vec<bool> = fds
            .iter()
            .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
            .collect();
        drop(fds);
        // Ended commands first: their reports precede anything a new request causes.
        let mut still = Vec::with_capacity(running.len());
        for ((id, pid, fd), done) in running.into_iter().zip(ready.iter().skip(1)) {
            if !*done {
                still.push((id, pid, fd));
                continue;
            }
            let report = match waitpid(pid, Some(WaitPidFlag::__WALL)) {
                Ok(status) => match ended(id, status) {
                    Some(report) => report,
                    None => {
                        still.push((id, pid, fd));
                        continue;
                    }
                },
                // Reaped already: only the orphans' loop below reaps, and it reports what it
                // reaps of ours, so this cannot be; were it, keeping the (readable) pidfd would
                // spin this loop for good. Its status is lost.
                Err(nix::errno::Errno::ECHILD) => Report::Exited { id, code: -1 },
                Err(_) => {
                    still.push((id, pid, fd));
                    continue;
                }
            };
            if report_end(channel, pid, &report) == last {
                return Ok(());
            }
        }
        running = still;
        // Orphans reparented to us; and a command of ours that ended since the poll, which
        // `waitpid(-1)` reaps as well: it is reported here (left to the next poll, its pidfd
        // would be readable with nothing left to wait for).
        while let Ok(status) = waitpid(None, Some(WaitPidFlag::WNOHANG | WaitPidFlag::__WALL)) {
            let Some(pid) = status.pid() else {
                break;
            };
            let Some(at) = running.iter().position(|(_, p, _)| *p == pid) else {
                continue;
            };
            let (id, pid, _fd) = running.remove(at);
            if let Some(report) = ended(id, status)
                && report_end(channel, pid, &report) == last
            {
                return Ok(());
            }
        }
        if !ready[0] {
            continue;
        }
        match channel.recv() {
            Ok(Some((
                Report::Exec {
                    id,
                    argv,
                    env,
                    last: is_last,
                    cwd,
                },
                stdio,
            ))) if stdio.len() == 3 => {
                if is_last {
                    last = Some(id);
                }
                let fds = [
                    stdio[0].as_raw_fd(),
                    stdio[1].as_raw_fd(),
                    stdio[2].as_raw_fd(),
                ];
                let started = starter.start(id, &argv, &env, cwd.as_deref(), fds);
                drop(stdio);
                let (pid, report) = match started {
                    Ok((pid, report)) => (Some(pid), report),
                    Err(report) => (None, report),
                };
                let _ = channel.send(&report, &[]);
                if let Some(pid) = pid {
                    match sys::pidfd_open(pid.as_raw()) {
                        Ok(fd) => running.push((id, pid, fd)),
                        Err(e) => {
                            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                            let _ = channel.send(
                                &Report::SetupFailed {
                                    id: Some(id),
                                    step: "watch the command".into(),
                                    errno: e.raw_os_error().unwrap_or(0),
                                    detail: e.to_string(),
                                },
                                &[],
                            );
                        }
                    }
                }
            }
            Ok(Some((Report::Signal { id, signal }, _))) => {
                if let Some((_, pid, _)) = running.iter().find(|(i, _, _)| *i == id)
                    && let Ok(signal) = nix::sys::signal::Signal::try_from(signal)
                {
                    let _ = nix::sys::signal::killpg(*pid, signal);
                }
            }
            Ok(Some((Report::Freeze, _))) => {
                let stopped = super::live::freeze::stop_namespace();
                let _ = channel.send(&Report::Frozen { stopped }, &[]);
            }
            Ok(Some((Report::Thaw, _))) => super::live::freeze::continue_namespace(),
            Ok(Some((Report::HandOver, _))) => {
                if let Err(e) = workspace.send(channel) {
                    let _ = channel.send(
                        &Report::SetupFailed {
                            id: None,
                            step: "hand the workspace over again".into(),
                            errno: e.raw_os_error().unwrap_or(0),
                            detail: e.to_string(),
                        },
                        &[],
                    );
                }
            }
            Ok(Some((Report::Shutdown, _))) | Ok(None) | Err(_) => return Ok(()),
            Ok(Some(_)) => {} // nothing else is addressed to the init
        }
    }
}

/// The report of command `id`'s `status`, when it ended.
fn ended(id: u64, status: WaitStatus) -> Option<Report> {
    match status {
        WaitStatus::Exited(_, code) => Some(Report::Exited { id, code }),
        WaitStatus::Signaled(_, signal, _) => Some(Report::Signaled {
            id,
            signal: signal as i32,
        }),
        _ => None,
    }
}

/// Kill what an ended command left in its process group, and report its end; the id reported
/// (compared with the command whose end ends the sandbox).
fn report_end(channel: &Channel, pid: Pid, report: &Report) -> Option<u64> {
    let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
    let _ = channel.send(report, &[]);
    match report {
        Report::Exited { id, .. } | Report::Signaled { id, .. } => Some(*id),
        _ => None,
    }
}

/// The init's last step: kill and reap every other process in the PID namespace, move back to
/// envcraft's cgroups (`home`; none without cgroups), and say so. envcraft can then remove the
/// run's cgroup and state at once, without waiting for the init's own exit, whose teardown of
/// the namespaces (an RCU grace period for the mounts) takes milliseconds.
pub(super) fn stop(home: Vec<OwnedFd>, channel: &Channel) {
    use nix::errno::Errno;
    // Repeated until none is left to reap, in case one was being forked as the signals went
    // out: its parent's death makes it the init's child, and the next round kills it. Each
    // round kills what `/proc` listed: every process then alive descends from the init, so one
    // of the init's own children is among them, and the `waitpid` after it returns.
    let reaped = loop {
        super::live::freeze::signal_namespace(nix::sys::signal::Signal::SIGKILL);
        match waitpid(None, Some(WaitPidFlag::__WALL)) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(Errno::ECHILD) => break true,
            Err(_) => break false,
        }
    };
    let left_cgroup = reaped && !home.is_empty() && super::cgroup::join_self(home).is_ok();
    let _ = channel.send(&Report::Stopped { left_cgroup }, &[]);
}

/// The init's own `oom_score_adj`, opened before Landlock made `/proc` read-only. A sandbox
/// filling its memory limit (a tmpfs, the workspace: pages that count against the limit but
/// belong to no process) had the OOM killer pick the process with the most resident memory:
/// the init, a clone of envcraft, and with it went the session. Lowering the init's score
/// needs `CAP_SYS_RESOURCE`, which envcraft may not have; raising one's own score needs
/// nothing, and lowering it back to where it was neither. So the init raises its score to the
/// maximum for the clone of each command (the command inherits it, and so does whatever the
/// command forks) and puts its own back once the command runs. The commands, under the init's
/// Landlock domain, cannot write theirs: they stay the OOM killer's first choice, in the
/// sandbox's memory cgroup and on a host short of memory alike.
pub(super) struct OomScore {
    file: std::fs::File,
    /// The init's score as it came (envcraft's), written back after each clone.
    own: Vec<u8>,
    /// Off after a write failed, so that the init never stays at the commands' score.
    working: std::cell::Cell<bool>,
}

/// The score commands start with: the OOM killer's first choice (`OOM_SCORE_ADJ_MAX`).
const OOM_COMMAND: &[u8] = b"1000";

impl OomScore {
    /// `/proc/self/oom_score_adj`; `None` when it cannot be opened or read, or holds a
    /// negative score (set by someone privileged, who may not have let it be lowered back):
    /// the init then starts its commands with its own score.
    pub(super) fn open() -> Option<OomScore> {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/proc/self/oom_score_adj")
            .ok()?;
        let mut now = [0u8; 8];
        let n = file.read_at(&mut now, 0).ok()?;
        let own = now[..n].trim_ascii().to_vec();
        let score: i32 = std::str::from_utf8(&own).ok()?.parse().ok()?;
        (score >= 0).then(|| OomScore {
            file,
            own,
            working: std::cell::Cell::new(true),
        })
    }

    pub(super) fn raw_fd(&self) -> i32 {
        self.file.as_raw_fd()
    }

    /// Raise the init's score for the clone of a command; false when it is not done.
    fn raise(&self) -> bool {
        use std::os::unix::fs::FileExt;
        self.working.get() && self.file.write_at(OOM_COMMAND, 0).is_ok()
    }

    /// Put the init's own score back (after `raise`).
    fn restore(&self) {
        use std::os::unix::fs::FileExt;
        if self.file.write_at(&self.own, 0).is_err() {
            self.working.set(false);
        }
    }
}

/// What the init starts its commands with (see [`super::spawn`]).
struct Starter<'a> {
    spawner: spawn::Spawner,
    plan: &'a Plan,
    landlock: landlock::LandlockOutcome,
    rlimits: Vec<(libc::__rlimit_resource_t, u64, u64)>,
    oom_score: Option<OomScore>,
    /// The commands' memory cgroup's membership file, where they have one (see `cgroup`).
    commands_cgroup: Option<OwnedFd>,
}

impl<'a> Starter<'a> {
    fn new(
        plan: &'a Plan,
        landlock: landlock::LandlockOutcome,
        oom_score: Option<OomScore>,
        commands_cgroup: Option<OwnedFd>,
    ) -> io::Result<Starter<'a>> {
        Ok(Starter {
            spawner: spawn::Spawner::new()?,
            plan,
            landlock,
            rlimits: command_rlimits(plan),
            oom_score,
            commands_cgroup,
        })
    }

    /// Start command `id`: its pid once it runs, and the report that says so
    /// (`CommandReady`, or why it did not get to run; it has exited then and is reaped as any
    /// command). No process at all: the report of why.
    fn start(
        &mut self,
        id: u64,
        argv: &[String],
        env: &[(String, String)],
        cwd: Option<&std::path::Path>,
        stdio: [i32; 3],
    ) -> Result<(Pid, Report), Report> {
        let plan = self.plan;
        let rlimits = &self.rlimits;
        let landlock = self.landlock;
        let spawner = &mut self.spawner;
        let oom_score = self.oom_score.as_ref();
        let setup_failed = |step: &str, errno: i32, detail: String| Report::SetupFailed {
            id: Some(id),
            step: step.into(),
            errno,
            detail,
        };
        let Some(name) = argv.first() else {
            return Err(setup_failed("prepare argv", 0, "no command given".into()));
        };
        let program = resolve(name, &plan.search_path);
        let nul =
            |spawn::NulByte(what)| setup_failed("prepare the command", libc::EINVAL, what.into());
        let image = spawn::Image::new(program, argv, env).map_err(nul)?;
        let cgroup = self.commands_cgroup.as_ref().map(AsRawFd::as_raw_fd);
        let cwd = cwd.unwrap_or(&plan.workspace);
        let command = spawn::Prepared::new(image, cwd, stdio, rlimits, cgroup).map_err(nul)?;
        // The command is cloned with the highest OOM score; the init's own is back once it runs.
        let raised = oom_score.filter(|o| o.raise());
        let spawned = spawner.spawn(&command);
        raised.inspect(|o| o.restore());
        let (pid, failure) = spawned.map_err(|e| {
            setup_failed(
                "fork the command",
                e.raw_os_error().unwrap_or(0),
                e.to_string(),
            )
        })?;
        let report = match failure {
            None => Report::CommandReady {
                id,
                landlock,
                capabilities_dropped: true,
                seccomp: true,
                no_new_privs: true,
            },
            Some(f) if f.is_exec() => Report::ExecFailed {
                id,
                errno: f.errno,
                exit_code: f.exit_code,
            },
            Some(f) => setup_failed(
                f.step,
                f.errno,
                io::Error::from_raw_os_error(f.errno).to_string(),
            ),
        };
        Ok((Pid::from_raw(pid), report))
    }
}
