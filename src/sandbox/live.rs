//! A live sandbox: built once, then runs any number of commands over the same workspace.
//!
//! With namespaces, [`Sandbox::start`] clones the init (see [`super::child`]), which builds
//! the root and then serves `Exec` requests; each command is forked by the init and restricts
//! itself before `execve`. Without namespaces each command is cloned by envcraft directly over
//! a private copy of the workspace. Either way [`Sandbox::exec`] captures output with a cap,
//! enforces a wall-clock limit (killing the command's process group) and reports how it ended;
//! [`Sandbox::close`] ends everything (the PID namespace makes that exact).
//!
//! Must be started from a single-threaded process (the clone copies only the calling thread).

use std::fs;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use super::cgroup::{self, RunCgroup};
use super::channel::{Channel, Report};
use super::child;
use super::child::StateDirs;
use super::command::{self, CommandSpec, Stdio};
use super::landlock::LandlockOutcome;
use super::plan::{Plan, UidMapping, WorkspaceKind};
use super::seccomp::Program;
use super::{OutputMode, SandboxError, nix_os, os};
use crate::sys::{self, Cloned};
use crate::workspace::{self, Changes};

#[path = "live_background.rs"]
mod background;
pub use self::background::StdinError;
#[path = "live_commands.rs"]
mod commands;
#[path = "freeze.rs"]
pub(crate) mod freeze;
#[path = "live_handback.rs"]
mod handback;
#[path = "live_start.rs"]
mod start;
pub use self::start::Prestart;

/// Where a sandbox's workspace state can be read (paths valid in this process only).
#[derive(Debug, Clone)]
pub struct StatePaths {
    pub view: PathBuf,
    pub changes: Option<PathBuf>,
}

/// A started command, before it is supervised.
struct Launched {
    id: u64,
    out: OwnedFd,
    err: OwnedFd,
    direct: Option<(Pid, OwnedFd)>,
    /// The write end of the command's stdin, under [`StdinSource::Pipe`].
    stdin: Option<OwnedFd>,
}

/// Background commands a sandbox keeps, running or ended with their output (see
/// [`Sandbox::spawn`]).
pub const MAX_BACKGROUND: usize = 64;

/// A command running (or ended) in the background.
#[derive(Debug)]
pub struct Background {
    pub id: u64,
    pub argv: Vec<String>,
    out: Option<OwnedFd>,
    err: Option<OwnedFd>,
    direct: Option<(Pid, OwnedFd)>,
    /// The write end of its stdin while it is open (see [`Sandbox::write_stdin`]).
    stdin: Option<OwnedFd>,
    /// When it is killed for running past its timeout (checked whenever the background
    /// commands are read: see [`Sandbox::background`]).
    deadline: Option<Instant>,
    /// It was killed at its deadline.
    pub timed_out: bool,
    /// The working directory it was started in, relative to the workspace.
    pub cwd: PathBuf,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub ended: bool,
}

/// One command for [`Sandbox::exec`].
#[derive(Debug, Clone)]
pub struct ExecRequest {
    pub argv: Vec<String>,
    /// Variables added to (or replacing) the policy's environment.
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    pub stdin: StdinSource,
    pub output: OutputMode,
    /// The working directory, relative to the workspace (checked by the caller to stay beneath
    /// it); empty: the workspace itself.
    pub cwd: PathBuf,
}

/// What a command reads on its standard input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdinSource {
    /// `/dev/null`.
    Null,
    /// envcraft's own standard input (interactive use).
    Inherit,
    /// These bytes, then end of file (at most [`STDIN_BYTES_MAX`]).
    Bytes(Vec<u8>),
    /// A pipe whose write end the sandbox keeps open, for what the caller writes later (to a
    /// command that went to the background: see [`Sandbox::write_stdin`]). A command run to its
    /// end in the foreground reads nothing from it; the pipe closes at its end.
    Pipe,
}

/// The most bytes [`StdinSource::Bytes`] carries: what a pipe holds without a reader, so the
/// whole input is written before the command starts.
pub const STDIN_BYTES_MAX: usize = 64 * 1024;

/// How one command ended and what it printed.
#[derive(Debug, Clone, Default)]
pub struct ExecResult {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub duration: Duration,
    /// The kernel's OOM killer ended it (SIGKILL as the sandbox's memory limit was reached);
    /// the sandbox itself lives on.
    pub oom_killed: bool,
    /// Its caller cancelled it (see [`super::cancel`]): killed with its process group.
    pub cancelled: bool,
    /// Still running when the caller's yield time came (see [`Sandbox::exec_or_yield`]): it
    /// goes on in the background under this id, and the output here is what it printed so far.
    pub yielded: Option<u64>,
}

enum Backend {
    /// The init of the sandbox's namespaces, serving requests over the channel. Its pidfd
    /// is opened when one is watched for its exit ([`init_pidfd`]), not kept: the init is
    /// this process's child, reaped only when the sandbox closes, so its pid names it until
    /// then, and a server holding thousands of sandboxes keeps one descriptor less for each.
    Namespaced { init: Pid, channel: Channel },
    /// No namespaces: envcraft clones each command itself over the copy.
    Host {
        parent_end: Channel,
        child_end: Channel,
        rules: super::landlock::Prepared,
        /// Compiled once, installed by each command (the init compiles its own).
        seccomp: Program,
    },
}

/// A built sandbox. Dropping it ends everything in it.
pub struct Sandbox {
    plan: Plan,
    state: Option<tempfile::TempDir>,
    /// Keeps the state directory marked as alive (see `stale`).
    _owner_mark: Option<super::stale::OwnerMark>,
    backend: Backend,
    cgroup: Option<RunCgroup>,
    kind: WorkspaceKind,
    cgroup_namespace: bool,
    /// The layer tmpfs (upper/, work/ or copy/), kept open so the changes stay readable.
    layer: Option<OwnedFd>,
    /// The workspace root as the sandbox sees it (for file tools).
    workspace_root: Option<OwnedFd>,
    /// The union of the template layers, as the workspace started.
    view: Option<OwnedFd>,
    /// Whether the three above are held, or were given back to the init (see
    /// [`super::handback`]).
    handback: super::handback::Handback,
    landlock: Option<LandlockOutcome>,
    next_id: u64,
    /// Reports read while waiting for something else.
    pending: Vec<Report>,
    /// The init reported that it serves requests (always true without namespaces).
    ready: bool,
    /// Commands started with [`Sandbox::spawn`].
    background: Vec<Background>,
    /// The handle that cancels the foreground command, once one was asked for.
    cancel: Option<std::sync::Arc<super::cancel::Cancel>>,
}

fn append_capped(buf: &mut Vec<u8>, data: &[u8], cap: usize) -> bool {
    let room = cap.saturating_sub(buf.len());
    buf.extend_from_slice(&data[..data.len().min(room)]);
    data.len() > room
}

impl Sandbox {
    /// Build the sandbox of `plan` under `state_root`.
    pub fn start(plan: &Plan, state_root: &Path) -> Result<Sandbox, SandboxError> {
        Sandbox::start_seeded(plan, state_root, None, None)
    }

    /// Build the sandbox of `plan` from an init cloned before the plan was made (see
    /// [`Prestart`]); without one, one is cloned now.
    pub fn start_prestarted(
        plan: &Plan,
        state_root: &Path,
        prestart: Option<Prestart>,
    ) -> Result<Sandbox, SandboxError> {
        Sandbox::start_seeded(plan, state_root, None, prestart)
    }

    /// A new sandbox like this one whose workspace starts from this one's current state (the
    /// N rollouts of one prompt). Costs a copy of the changes, not of the template.
    ///
    /// This sandbox's processes are frozen until the fork's init has copied the changes (see
    /// [`freeze`]), so the fork starts from one state, not from a tree moving under the copy.
    pub fn fork(&mut self) -> Result<Sandbox, SandboxError> {
        self.descriptors()?;
        let Some((source, _)) = self.changes_source() else {
            return Err(SandboxError::Lost);
        };
        let seed = crate::workspace::tree::open_root(&source)
            .map_err(|e| SandboxError::from(workspace::WorkspaceError::from(e)))?;
        let state_root = self
            .state
            .as_ref()
            .and_then(|s| s.path().parent())
            .map(Path::to_path_buf)
            .unwrap_or_else(std::env::temp_dir);
        let (plan, kind) = (self.plan.clone(), self.kind);
        self.frozen(|_| {
            let mut fork = Sandbox::start_seeded(&plan, &state_root, Some((seed, kind)), None)?;
            fork.wait_ready()?;
            Ok(fork)
        })
    }

    fn start_on_host(
        plan: &Plan,
        seccomp: Program,
        (state, owner): (tempfile::TempDir, super::stale::OwnerMark),
        mut cgroup: Option<RunCgroup>,
        seed: Option<(OwnedFd, WorkspaceKind)>,
    ) -> Result<Sandbox, SandboxError> {
        let base = state.path().to_path_buf();
        // The union of the layers (bottom first, upper ones laid over), kept pristine to
        // measure changes against, and the command's copy of it.
        let view = base.join("view");
        for layer in plan.lowers.iter().rev() {
            workspace::copy_tree(layer, &view)?;
        }
        let copy = base.join("copy");
        match &seed {
            // A fork starts from its parent's copy, which the agent made: on the host, so
            // without setuid and setgid bits.
            Some((fd, _)) => {
                workspace::copy::copy_tree_to_host(
                    Path::new(&format!("/proc/self/fd/{}", fd.as_raw_fd())),
                    &copy,
                    plan.workspace_bytes,
                )?;
            }
            None => workspace::copy_tree(&view, &copy)?,
        }
        let (tmp, home) = (base.join("tmp"), base.join("home"));
        for d in [&tmp, &home] {
            fs::create_dir(d).map_err(os("create the private tmp"))?;
        }
        let mut plan = plan.clone();
        plan.workspace = copy.clone();
        plan.env
            .retain(|(k, _)| !matches!(k.as_str(), "HOME" | "TMPDIR" | "PWD"));
        plan.env.push(("HOME".into(), home.display().to_string()));
        plan.env.push(("TMPDIR".into(), tmp.display().to_string()));
        plan.env.push(("PWD".into(), copy.display().to_string()));
        plan.env.sort();
        if let Some(cg) = cgroup.as_mut() {
            cg.create()?;
        }
        let (parent_end, child_end) = Channel::pair().map_err(os("create the report channel"))?;
        let mut landlock_plan = plan.landlock.clone();
        landlock_plan
            .read_write
            .extend([copy.clone(), tmp.clone(), home.clone()]);
        let rules = super::landlock::Prepared::build(&landlock_plan, sys::landlock_abi_version())
            .map_err(|e| SandboxError::Setup {
            step: "build the Landlock ruleset".into(),
            errno: 0,
            detail: crate::error::chain(&e),
        })?;
        let workspace_root = fs::File::open(&copy)
            .map(OwnedFd::from)
            .map_err(os("open the workspace copy"))?;
        let view_fd = fs::File::open(&view)
            .map(OwnedFd::from)
            .map_err(os("open the template view"))?;
        Ok(Sandbox {
            plan,
            state: Some(state),
            _owner_mark: Some(owner),
            backend: Backend::Host {
                parent_end,
                child_end,
                rules,
                seccomp,
            },
            cgroup,
            kind: WorkspaceKind::Copy,
            cgroup_namespace: false,
            layer: None,
            workspace_root: Some(workspace_root),
            view: Some(view_fd),
            handback: Default::default(),
            landlock: None,
            next_id: 1,
            pending: Vec::new(),
            ready: true,
            background: Vec::new(),
            cancel: None,
        })
    }

    /// Take in a report about the sandbox itself; hand back any other (about a command).
    fn absorb(
        &mut self,
        report: Report,
        fds: Vec<OwnedFd>,
    ) -> Result<Option<Report>, SandboxError> {
        match report {
            Report::Ready { landlock } => {
                self.ready = true;
                self.landlock = Some(landlock);
            }
            Report::WorkspaceReady { kind } => {
                self.kind = kind;
                let mut fds = fds.into_iter();
                self.layer = fds.next();
                self.workspace_root = fds.next();
                self.view = fds.next();
                self.handback.received();
            }
            Report::CgroupNamespace { entered } => self.cgroup_namespace = entered,
            Report::SetupFailed {
                id: None,
                step,
                errno,
                detail,
            } => {
                return Err(SandboxError::Setup {
                    step,
                    errno,
                    detail,
                });
            }
            other => return Ok(Some(other)),
        }
        Ok(None)
    }

    /// Read reports until the init says it serves requests (the workspace is then mounted and
    /// its descriptors are here).
    pub fn wait_ready(&mut self) -> Result<(), SandboxError> {
        while !self.ready {
            let Backend::Namespaced { channel, .. } = &self.backend else {
                return Ok(());
            };
            match channel.recv().map_err(os("read the sandbox's reports"))? {
                Some((report, fds)) => {
                    if let Some(other) = self.absorb(report, fds)? {
                        self.pending.push(other);
                    }
                }
                None => return Err(SandboxError::Lost),
            }
        }
        Ok(())
    }

    /// Whether the sandbox's init is still running (true without namespaces: there is none).
    pub fn init_alive(&self) -> bool {
        match &self.backend {
            Backend::Namespaced { init, .. } => start::still_running(*init),
            Backend::Host { .. } => true,
        }
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn workspace_kind(&self) -> WorkspaceKind {
        self.kind
    }

    pub fn cgroup_namespace(&self) -> bool {
        self.cgroup_namespace
    }

    pub fn cgroup_active(&self) -> bool {
        self.cgroup.as_ref().is_some_and(RunCgroup::is_active)
    }

    /// What Landlock enforced for the commands (known once one has run).
    pub fn landlock(&self) -> Option<LandlockOutcome> {
        self.landlock
    }

    /// The workspace root as the sandbox sees it (a directory descriptor), for file tools:
    /// handed over, not copied (the caller keeps the one descriptor; a server holds thousands
    /// of sandboxes under one descriptor limit). `None` once taken, or without a workspace.
    pub fn take_workspace_root(&mut self) -> Result<Option<OwnedFd>, SandboxError> {
        self.descriptors()?;
        Ok(self.workspace_root.take())
    }

    /// Where the workspace's changes live (upper layer or copy), as a path this process can
    /// open, and how to read them.
    fn changes_source(&self) -> Option<(PathBuf, WorkspaceKind)> {
        match (&self.layer, self.kind, &self.backend) {
            (_, WorkspaceKind::Copy, Backend::Host { .. }) => {
                Some((self.plan.workspace.clone(), self.kind))
            }
            (Some(layer), WorkspaceKind::Overlay, _) => Some((
                PathBuf::from(format!("/proc/self/fd/{}/upper", layer.as_raw_fd())),
                self.kind,
            )),
            (Some(layer), WorkspaceKind::Copy, _) => Some((
                PathBuf::from(format!("/proc/self/fd/{}/copy", layer.as_raw_fd())),
                self.kind,
            )),
            _ => None,
        }
    }

    /// Paths this process can read: the template view (the workspace's start) and where the
    /// changes are (upper layer or copy; none for a read-only workspace). The workspace as the
    /// sandbox sees it is the descriptor [`Sandbox::take_workspace_root`] handed over.
    pub fn state_paths(&mut self) -> Result<StatePaths, SandboxError> {
        self.descriptors()?;
        let fd_path = |fd: &OwnedFd| PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        let view = self.view.as_ref().map(fd_path).ok_or(SandboxError::Lost)?;
        Ok(StatePaths {
            view,
            changes: self.changes_source().map(|(p, _)| p),
        })
    }

    /// The changes so far: read from the upper layer, or by comparing the copy with the
    /// template.
    pub fn changes(&mut self) -> Result<Changes, SandboxError> {
        self.descriptors()?;
        let Some(view) = &self.view else {
            return Ok(Changes::default());
        };
        let view = PathBuf::from(format!("/proc/self/fd/{}", view.as_raw_fd()));
        Ok(match self.changes_source() {
            Some((upper, WorkspaceKind::Overlay)) => workspace::changes_from_upper(&upper, &view)?,
            Some((copy, _)) => workspace::changes_between(&view, &copy)?,
            None => Changes::default(),
        })
    }

    /// Copy the changed files out (see [`workspace::keep_changes`]).
    pub fn keep_changes(&mut self, changes: &Changes, out: &Path) -> Result<(), SandboxError> {
        self.descriptors()?;
        if let Some((source, _)) = self.changes_source() {
            workspace::keep_changes(&source, changes, out)?;
        }
        Ok(())
    }

    /// Start one command: its id, the read ends of its stdout and stderr, and (without
    /// namespaces) its pid and pidfd. With `last`, the init ends the sandbox once the command
    /// has ended (see [`Sandbox::exec_last`]).
    fn launch(&mut self, request: &ExecRequest, last: bool) -> Result<Launched, SandboxError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut env = self.plan.env.clone();
        for (k, v) in &request.env {
            env.retain(|(key, _)| key != k);
            env.push((k.clone(), v.clone()));
        }
        env.sort();
        let (out_r, out_w) =
            nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(nix_os("create a pipe"))?;
        let (err_r, err_w) =
            nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(nix_os("create a pipe"))?;
        let mut keep_stdin = None;
        let stdin: OwnedFd = match &request.stdin {
            StdinSource::Inherit => io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .map_err(os("duplicate stdin"))?,
            StdinSource::Null => fs::File::open("/dev/null")
                .map_err(os("open /dev/null"))?
                .into(),
            StdinSource::Bytes(bytes) => {
                if bytes.len() > STDIN_BYTES_MAX {
                    return Err(SandboxError::StdinTooLarge(bytes.len()));
                }
                let (r, w) =
                    nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(nix_os("create a pipe"))?;
                let mut w = fs::File::from(w);
                w.write_all(bytes)
                    .map_err(os("write the command's input"))?;
                drop(w);
                r
            }
            StdinSource::Pipe => {
                let (r, w) =
                    nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(nix_os("create a pipe"))?;
                // Written without blocking: a command that does not read cannot hold the caller.
                nix::fcntl::fcntl(&w, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK))
                    .map_err(nix_os("make a pipe non-blocking"))?;
                keep_stdin = Some(w);
                r
            }
        };
        let cwd = self.plan.workspace.join(&request.cwd);
        let mut direct: Option<(Pid, OwnedFd)> = None;
        match &self.backend {
            Backend::Namespaced { channel, .. } => {
                channel
                    .send(
                        &Report::Exec {
                            id,
                            argv: request.argv.clone(),
                            env,
                            last,
                            cwd: (!request.cwd.as_os_str().is_empty()).then(|| cwd.clone()),
                        },
                        &[stdin.as_raw_fd(), out_w.as_raw_fd(), err_w.as_raw_fd()],
                    )
                    .map_err(os("send the command to the sandbox"))?;
            }
            Backend::Host {
                child_end,
                rules,
                seccomp,
                ..
            } => {
                let membership = match &self.cgroup {
                    Some(cg) if cg.is_active() => cg.open_command_membership_files()?,
                    _ => Vec::new(),
                };
                let spec = CommandSpec {
                    id,
                    argv: &request.argv,
                    env: &env,
                };
                match sys::clone_process(0) {
                    Ok(Cloned::Child) => {
                        let fds = membership.into_iter().map(OwnedFd::from).collect();
                        if cgroup::join_self(fds).is_err() {
                            sys::exit_now(125)
                        }
                        let stdio = Stdio {
                            stdin: stdin.as_fd(),
                            stdout: out_w.as_fd(),
                            stderr: err_w.as_fd(),
                        };
                        command::command_main(
                            &self.plan, seccomp, rules, child_end, stdio, &spec, &cwd,
                        )
                    }
                    Ok(Cloned::Parent(pid)) => {
                        let pidfd = sys::pidfd_open(pid).map_err(os("open a pidfd"))?;
                        direct = Some((Pid::from_raw(pid), pidfd));
                    }
                    Err(e) => return Err(os("clone the command")(e)),
                }
            }
        }
        drop((out_w, err_w, stdin));
        Ok(Launched {
            id,
            out: out_r,
            err: err_r,
            direct,
            stdin: keep_stdin,
        })
    }

    /// Run one command to its end (or its timeout).
    pub fn exec(&mut self, request: &ExecRequest) -> Result<ExecResult, SandboxError> {
        let start = Instant::now();
        self.noting_oom(|sandbox| {
            let l = sandbox.launch(request, false)?;
            sandbox.supervise(l, request, start, None)
        })
    }

    /// Run one command to its end, or until `yield_after` has passed: then it goes on in the
    /// background (as if [`Sandbox::spawn`] had started it, its timeout still counted from its
    /// start) and the result says so in `yielded`, with what it printed so far. When the
    /// background is full (see [`Sandbox::spawn`]) it runs to its end as with
    /// [`Sandbox::exec`].
    pub fn exec_or_yield(
        &mut self,
        request: &ExecRequest,
        yield_after: Duration,
    ) -> Result<ExecResult, SandboxError> {
        let room = match self.make_room_in_background() {
            Ok(()) => true,
            Err(SandboxError::TooManyBackground(_)) => false,
            Err(e) => return Err(e),
        };
        let start = Instant::now();
        let yield_at = room.then(|| start + yield_after);
        self.noting_oom(|sandbox| {
            let l = sandbox.launch(request, false)?;
            sandbox.supervise(l, request, start, yield_at)
        })
    }

    /// Run the sandbox's last command to its end: as [`Sandbox::exec`], except that the init
    /// ends every process of the sandbox as soon as this one has ended, without waiting to be
    /// told (what is left in the background dies then). The workspace's changes stay
    /// readable; the sandbox runs nothing more and is to be closed.
    pub fn exec_last(&mut self, request: &ExecRequest) -> Result<ExecResult, SandboxError> {
        let start = Instant::now();
        self.noting_oom(|sandbox| {
            let l = sandbox.launch(request, true)?;
            sandbox.supervise(l, request, start, None)
        })
    }

    /// End the sandbox: every process in it, its mounts, its cgroup, its state directory.
    pub fn close(mut self) {
        self.shutdown(InitExit::Reap);
    }

    /// End the sandbox as [`Sandbox::close`] does, except that the init's own exit is not
    /// waited for: for a process that exits right after (`envcraft exec`). Every other process
    /// of the sandbox is dead, and its cgroup and state directory are gone, when this returns;
    /// the init is on its way out (its exit tears down the namespaces, which waits for an RCU
    /// grace period: milliseconds) and is reaped by whoever adopts it once this process has
    /// exited (it also gets SIGKILL then, as its parent-death signal).
    pub fn close_before_exit(mut self) {
        self.shutdown(InitExit::Leave);
    }

    fn shutdown(&mut self, init_exit: InitExit) {
        // The init still to reap once the rest is released.
        let mut reap = None;
        // Whether something may still run in the cgroup (without namespaces, what commands
        // left behind; with them, only if the init did not report it empty).
        let mut sweep_cgroup = true;
        if let Backend::Namespaced { channel, .. } = &self.backend {
            let _ = channel.send(&Report::Shutdown, &[]);
            if self.ready {
                // The init is past pivot_root: it never uses the state directory's path again,
                // and the layer has been read. The directory goes while the init stops, rather
                // than after.
                self.release_state();
            }
        }
        if let Backend::Namespaced { init, channel } = &self.backend {
            // The init is not reaped yet (below): its pid still names it.
            let pidfd = init_pidfd(*init).ok();
            // The init kills and reaps everything else, leaves the cgroup and says so at once
            // (it may have said so already, after the last command: see `exec_last`); if it
            // cannot leave the cgroup, its exit is what empties it. Either is given a second,
            // then it is killed.
            let reported = self.pending.iter().find_map(|r| match r {
                Report::Stopped { left_cgroup } => Some(*left_cgroup),
                _ => None,
            });
            let stopped = reported.or_else(|| {
                pidfd
                    .as_ref()
                    .and_then(|p| wait_stopped(channel, p, Duration::from_secs(1)))
            });
            let cgroup_empty = match stopped {
                Some(left_cgroup) => left_cgroup || self.cgroup.is_none(),
                None => false,
            };
            if !cgroup_empty {
                let exited = pidfd.as_ref().is_some_and(|p| {
                    let mut fds = [PollFd::new(p.as_fd(), PollFlags::POLLIN)];
                    matches!(poll(&mut fds, PollTimeout::from(1000u16)), Ok(n) if n > 0)
                });
                if !exited {
                    let _ = kill(*init, Signal::SIGKILL);
                }
            }
            if !cgroup_empty || init_exit == InitExit::Reap {
                reap = Some(*init);
            }
            sweep_cgroup = !cgroup_empty;
        }
        if let Some(cg) = &self.cgroup
            && sweep_cgroup
        {
            cg.kill_all();
        }
        self.cgroup = None; // removes the cgroup
        self.release_state();
        if let Some(init) = reap {
            let _ = waitpid(init, None);
        }
    }

    /// Close the layer's descriptors and remove the state directory.
    fn release_state(&mut self) {
        self.layer = None;
        self.workspace_root = None;
        self.view = None;
        self.handback.released();
        self.state = None; // removes the state directory
    }
}
/// A pidfd of the sandbox's `init`, which must not have been reaped (this process is its
/// parent and reaps it only when the sandbox closes).
pub(super) fn init_pidfd(init: Pid) -> Result<OwnedFd, SandboxError> {
    sys::pidfd_open(init.as_raw()).map_err(os("open a pidfd"))
}

/// Whether closing a sandbox waits for its init's exit.
#[derive(Clone, Copy, PartialEq, Eq)]
enum InitExit {
    Reap,
    Leave,
}

/// Read the init's reports until it says `Stopped` (with whether it left the run's cgroup);
/// `None` if it exits or goes silent for `limit` first.
fn wait_stopped(channel: &Channel, pidfd: &OwnedFd, limit: Duration) -> Option<bool> {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        let ms = u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX);
        let mut fds = [
            PollFd::new(channel.as_fd(), PollFlags::POLLIN),
            PollFd::new(pidfd.as_fd(), PollFlags::POLLIN),
        ];
        if !matches!(poll(&mut fds, PollTimeout::from(ms)), Ok(n) if n > 0) {
            continue;
        }
        let readable = fds[0].revents().is_some_and(|r| !r.is_empty());
        if !readable {
            return None; // the init exited without a word
        }
        match channel.recv() {
            Ok(Some((Report::Stopped { left_cgroup }, _))) => return Some(left_cgroup),
            Ok(Some(_)) => {} // ends of commands, no longer of interest
            Ok(None) | Err(_) => return None,
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if self.state.is_some() {
            self.shutdown(InitExit::Reap);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::sandbox::OutputMode;
    use crate::sandbox::plan::Request;
    use crate::sandbox::probe::HostFacts;
    use crate::spec::policy::{NetworkMode, Policy};

    /// Whether this test can make sandboxes here (root, as `make test` runs); a skip fails
    /// under ENVCRAFT_TEST_REQUIRE=all.
    fn can_make_sandboxes() -> bool {
        if nix::unistd::geteuid().is_root() {
            return true;
        }
        eprintln!("skipped: this test makes sandboxes with a network namespace: needs root");
        assert_ne!(
            std::env::var("ENVCRAFT_TEST_REQUIRE").as_deref(),
            Ok("all"),
            "root is required (ENVCRAFT_TEST_REQUIRE=all)"
        );
        false
    }

    #[test]
    fn an_unused_prestarted_init_is_killed_and_reaped() {
        if !can_make_sandboxes() {
            return;
        }
        let prestart = Prestart::clone(true).unwrap();
        let init = prestart.init;
        assert!(
            kill(init, None).is_ok(),
            "the init runs, waiting for its plan"
        );
        drop(prestart);
        // Reaped, not a zombie (a zombie still takes signal 0).
        assert_eq!(kill(init, None), Err(nix::errno::Errno::ESRCH));
    }

    /// The init begins a network namespace on a guess made before the plan exists; when the
    /// plan says otherwise, the command still gets what the plan says.
    #[test]
    fn a_wrong_network_guess_is_put_right_by_the_plan() {
        if !can_make_sandboxes() {
            return;
        }
        let host_netns = fs::read_link("/proc/self/ns/net").unwrap();
        let template = tempfile::tempdir().unwrap();
        let state_root = tempfile::tempdir().unwrap();
        for (guess, mode) in [(true, NetworkMode::Host), (false, NetworkMode::None)] {
            let mut policy = Policy::bundled("default").unwrap();
            policy.network.mode = mode;
            let request = Request {
                layers: vec![template.path().to_path_buf()],
                binds: Vec::new(),
                argv: vec!["readlink".into(), "/proc/self/ns/net".into()],
                timeout_secs: None,
                host_env: Vec::new(),
                without_namespaces: false,
                image: None,
            };
            let facts = HostFacts::read();
            let owner = nix::unistd::geteuid().as_raw();
            let plan = Plan::build(
                &policy,
                &request,
                &facts.as_plan_host((owner, owner), false),
            )
            .unwrap();
            assert_eq!(plan.network_namespace, mode == NetworkMode::None);
            let prestart = Prestart::clone(guess).unwrap();
            let mut sandbox =
                Sandbox::start_prestarted(&plan, state_root.path(), Some(prestart)).unwrap();
            let result = sandbox
                .exec_last(&ExecRequest {
                    argv: plan.argv.clone(),
                    env: Vec::new(),
                    timeout: Duration::from_secs(30),
                    stdin: StdinSource::Null,
                    output: OutputMode::Capture,
                    cwd: Default::default(),
                })
                .unwrap();
            assert_eq!(result.exit_code, Some(0), "{mode:?}: {result:?}");
            let inside = String::from_utf8(result.stdout).unwrap();
            assert_eq!(
                inside.trim() == host_netns.to_str().unwrap(),
                mode == NetworkMode::Host,
                "guess {guess}, mode {mode:?}: the command's network namespace is {inside}"
            );
        }
    }
}
