//! The sandbox: run one command in a fresh copy-on-write workspace under the OS isolation a
//! policy asks for, and report what happened and what was enforced.
//!
//! - [`plan`] (pure) turns a policy and a request into a [`plan::Plan`];
//! - [`child`] applies it in the cloned processes, in one documented order;
//! - this module starts the clone, supervises it (output capture with a cap, the wall-clock
//!   limit, the process tree killed at once through its PID namespace) and reads the changes
//!   from the upper layer the sandbox handed back;
//! - [`probe`] says what this machine can enforce (`envcraft doctor`).
//!
//! Restrictions are applied only in the cloned processes, never in envcraft itself.
//! [`execute`] must be called from a single-threaded process (the CLI is one).

pub mod cgroup;
pub mod channel;
pub mod child;
pub mod landlock;
pub mod plan;
pub mod probe;
pub mod seccomp;

use std::collections::BTreeMap;
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
use serde::Serialize;

use self::cgroup::{CgroupError, RunCgroup};
use self::channel::{Channel, Report};
use self::child::{StateDirs, Stdio};
use self::landlock::LandlockOutcome;
use self::plan::{CgroupSupport, Plan, PlanError, Request, WorkspaceKind};
use crate::spec::policy::{Policy, Protection};
use crate::sys::{self, Cloned};
use crate::workspace::{self, Changes, WorkspaceError};

/// Why a sandbox could not run the command.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("workspace {path} is not a readable directory")]
    WorkspaceMissing {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot create the run's state directory under {path}")]
    StateDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot {what}")]
    Os {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("user namespaces are not available here")]
    NamespacesUnavailable(#[source] io::Error),
    #[error("sandbox setup failed at step `{step}`: {detail}")]
    Setup {
        step: String,
        errno: i32,
        detail: String,
    },
    #[error("the sandbox's init ended without reporting the command's status")]
    Lost,
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    #[error(transparent)]
    Seccomp(#[from] seccomp::SeccompError),
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
}

fn os(what: &'static str) -> impl FnOnce(io::Error) -> SandboxError {
    move |source| SandboxError::Os { what, source }
}

fn nix_os(what: &'static str) -> impl FnOnce(nix::Error) -> SandboxError {
    move |e| SandboxError::Os {
        what,
        source: e.into(),
    }
}

/// How the command's output is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    /// Captured only (for `--json` and for callers).
    Capture,
    /// Captured and also written through to envcraft's own stdout/stderr as it arrives.
    PassThrough,
}

/// Options of one run besides the plan.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub output: OutputMode,
    /// Give the command envcraft's stdin (else /dev/null).
    pub inherit_stdin: bool,
    /// Copy the changed files out here after the run.
    pub keep_changes: Option<PathBuf>,
    /// Where per-run state directories are made: `ENVCRAFT_STATE_DIR`, else the user's
    /// runtime directory (`XDG_RUNTIME_DIR`), else `/dev/shm`, else the system temp dir. A
    /// memory-backed place keeps a run's one mkdir/rmdir cheap (ext4 with online discard makes
    /// an rmdir wait for the disk), and without namespaces it holds the workspace copy.
    pub state_root: PathBuf,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            output: OutputMode::Capture,
            inherit_stdin: false,
            keep_changes: None,
            state_root: default_state_root(),
        }
    }
}

fn default_state_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("ENVCRAFT_STATE_DIR") {
        return PathBuf::from(dir);
    }
    let writable_dir = |p: &Path| {
        p.is_dir()
            && nix::unistd::access(
                p,
                nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
            )
            .is_ok()
    };
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| writable_dir(p))
        .or_else(|| Some(PathBuf::from("/dev/shm")).filter(|p| writable_dir(p)))
        .unwrap_or_else(std::env::temp_dir)
}

/// What was actually applied to a run: each protection, and how.
#[derive(Debug, Clone, Serialize)]
pub struct Enforced {
    pub policy: String,
    #[serde(flatten)]
    pub protections: BTreeMap<&'static str, bool>,
    /// `overlay`, `copy` or `read_only`.
    pub workspace: WorkspaceKind,
    pub landlock_abi: i32,
    /// Landlock enforced every right that was asked for.
    pub landlock_fully: bool,
    pub cgroup: CgroupSupport,
    /// `cgroup` or `rlimit_as`.
    pub memory_limit: &'static str,
    /// `cgroup+rlimit`, `rlimit` (unprivileged: counts per user in the namespace) or
    /// `none_for_root` (root without a cgroup: RLIMIT_NPROC does not bind uid 0).
    pub process_limit: &'static str,
    /// `pid_namespace` (exact) or `process_group` (without namespaces).
    pub process_tree_kill: &'static str,
    /// The invoking user: `root` or `unprivileged`.
    pub invoker: &'static str,
    /// The host uid that uid 0 inside stands for (the template's owner when run by root).
    pub sandbox_uid_maps_to: u32,
    /// Whether the template's owner is the sandbox's user. When not (an unprivileged invoker
    /// and someone else's template), the template's files are read-only inside unless their
    /// mode lets anyone write them.
    pub template_owner_mapped: bool,
}

/// The result of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    #[serde(serialize_with = "lossy")]
    pub stdout: Vec<u8>,
    #[serde(serialize_with = "lossy")]
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub duration_ms: u64,
    pub enforced: Enforced,
    pub changes: Changes,
}

fn lossy<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(bytes))
}

impl Outcome {
    /// The exit code the CLI should use: the command's, 128+signal, or 124 on timeout.
    pub fn cli_exit_code(&self) -> i32 {
        if self.timed_out {
            124
        } else if let Some(code) = self.exit_code {
            code
        } else {
            128 + self.signal.unwrap_or(0)
        }
    }
}

/// Plan and run `request` under `policy`, falling back to the no-namespace mode when user
/// namespaces are refused and the policy does not require them.
pub fn execute(
    policy: &Policy,
    request: &Request,
    options: &RunOptions,
) -> Result<Outcome, SandboxError> {
    let meta =
        fs::metadata(&request.workspace).map_err(|source| SandboxError::WorkspaceMissing {
            path: request.workspace.clone(),
            source,
        })?;
    if !meta.is_dir() {
        return Err(SandboxError::WorkspaceMissing {
            path: request.workspace.clone(),
            source: io::Error::from(io::ErrorKind::NotADirectory),
        });
    }
    let host = probe::HostFacts::read();
    let owner = {
        use std::os::unix::fs::MetadataExt;
        (meta.uid(), meta.gid())
    };
    let plan = Plan::build(policy, request, &host.as_plan_host(owner))?;
    match run(&plan, options) {
        Err(SandboxError::NamespacesUnavailable(e))
            if !policy
                .protections
                .required
                .iter()
                .any(|p| p.needs_namespaces()) =>
        {
            tracing::warn!(error = %e, "user namespaces refused; running without namespaces");
            let fallback = Request {
                without_namespaces: true,
                ..request.clone()
            };
            let plan = Plan::build(policy, &fallback, &host.as_plan_host(owner))?;
            run(&plan, options)
        }
        Err(SandboxError::NamespacesUnavailable(e)) => {
            Err(SandboxError::Plan(PlanError::RequiredUnavailable {
                policy: policy.name.clone(),
                protection: Protection::UserNamespace,
                reason: format!("here: creating a user namespace failed ({e})"),
            }))
        }
        other => other,
    }
}

/// What the supervisor collected.
#[derive(Default)]
struct Collected {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    stdout_truncated: bool,
    stderr_truncated: bool,
    timed_out: bool,
    reports: Vec<Report>,
    layer: Option<OwnedFd>,
    direct_status: Option<WaitStatus>,
}

/// Run a plan. See the module documentation.
pub fn run(plan: &Plan, options: &RunOptions) -> Result<Outcome, SandboxError> {
    let start = Instant::now();
    let state = tempfile::Builder::new()
        .prefix("envcraft-")
        .tempdir_in(&options.state_root)
        .map_err(|source| SandboxError::StateDir {
            path: options.state_root.clone(),
            source,
        })?;
    let dirs = StateDirs {
        base: state.path().to_path_buf(),
    };
    for dir in [dirs.layer(), dirs.lower(), dirs.root()] {
        fs::create_dir(&dir).map_err(os("create the state directory"))?;
    }
    if plan.namespaced && plan.uid != nix::unistd::geteuid().as_raw() {
        // Root maps the sandbox to the template's owner, who must reach the mountpoints.
        let owner = (
            Some(nix::unistd::Uid::from_raw(plan.uid)),
            Some(nix::unistd::Gid::from_raw(plan.gid)),
        );
        for dir in [dirs.base.clone(), dirs.layer(), dirs.lower(), dirs.root()] {
            nix::unistd::chown(&dir, owner.0, owner.1)
                .map_err(nix_os("hand the state directory to the template's owner"))?;
        }
    }

    // Without namespaces the command works on a copy at a host path.
    let mut plan = plan.clone();
    let mut extra_write = Vec::new();
    let copy = dirs.base.join("copy");
    if !plan.namespaced {
        workspace::copy_tree(&plan.lower, &copy)?;
        let (tmp, home) = (dirs.base.join("tmp"), dirs.base.join("home"));
        for d in [&tmp, &home] {
            fs::create_dir(d).map_err(os("create the private tmp"))?;
        }
        plan.workspace = copy.clone();
        plan.env
            .retain(|(k, _)| !matches!(k.as_str(), "HOME" | "TMPDIR" | "PWD"));
        plan.env.push(("HOME".into(), home.display().to_string()));
        plan.env.push(("TMPDIR".into(), tmp.display().to_string()));
        plan.env.push(("PWD".into(), copy.display().to_string()));
        plan.env.sort();
        extra_write = vec![tmp, home];
    }

    let filters = seccomp::Filters::compile(&plan.seccomp)?;
    let (parent_end, child_end) = Channel::pair().map_err(os("create the report channel"))?;
    let (out_r, out_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(nix_os("create a pipe"))?;
    let (err_r, err_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(nix_os("create a pipe"))?;
    let devnull = fs::File::open("/dev/null").map_err(os("open /dev/null"))?;
    let stdin_fd = if options.inherit_stdin {
        io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .map_err(os("duplicate stdin"))?
    } else {
        OwnedFd::from(devnull)
    };
    let run_name = dirs
        .base
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "envcraft-run".into());
    let mut cgroup = plan.cgroup.map(|limits| RunCgroup::new(&run_name, &limits));

    let flags = if plan.namespaced {
        let mut f = libc::CLONE_NEWUSER
            | libc::CLONE_NEWNS
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUTS;
        if plan.network_namespace {
            f |= libc::CLONE_NEWNET;
        }
        f
    } else {
        0
    };
    let pid = match sys::clone_process(flags) {
        Ok(Cloned::Child) => {
            let stdio = Stdio {
                stdin: stdin_fd.as_fd(),
                stdout: out_w.as_fd(),
                stderr: err_w.as_fd(),
            };
            if plan.namespaced {
                child::init_main(&plan, &filters, &dirs, &child_end, stdio)
            }
            let joined = child::wait_for(&child_end, &Report::Go)
                .and_then(|_| child::wait_for(&child_end, &Report::LimitsReady))
                .map(cgroup::join_self);
            if !matches!(joined, Ok(Ok(()))) {
                sys::exit_now(125)
            }
            child::command_main(&plan, &filters, &child_end, stdio, &copy, &extra_write)
        }
        Ok(Cloned::Parent(pid)) => Pid::from_raw(pid),
        Err(e)
            if plan.namespaced
                && matches!(
                    e.raw_os_error(),
                    Some(libc::EPERM | libc::EINVAL | libc::ENOSPC | libc::EUSERS)
                ) =>
        {
            return Err(SandboxError::NamespacesUnavailable(e));
        }
        Err(e) => return Err(os("clone the sandbox")(e)),
    };
    drop((child_end, out_w, err_w, stdin_fd));

    let collected = (|| {
        let pidfd = sys::pidfd_open(pid.as_raw()).map_err(os("open a pidfd"))?;
        if plan.namespaced {
            write_id_maps(pid, plan.uid, plan.gid, plan.invoker_is_root)?;
        }
        parent_end
            .send(&Report::Go, &[])
            .map_err(os("start the sandbox"))?;
        let membership = match cgroup.as_mut() {
            Some(cg) => {
                cg.create()?;
                cg.open_membership_files()?
            }
            None => Vec::new(),
        };
        let raw: Vec<i32> = membership.iter().map(|f| f.as_raw_fd()).collect();
        parent_end
            .send(&Report::LimitsReady, &raw)
            .map_err(os("start the sandbox"))?;
        drop(membership);
        supervise(
            &plan,
            options,
            pid,
            &pidfd,
            &parent_end,
            &out_r,
            &err_r,
            cgroup.as_ref(),
        )
    })();
    let collected = match collected {
        Ok(c) => c,
        Err(e) => {
            let _ = kill(pid, Signal::SIGKILL);
            let _ = waitpid(pid, None);
            return Err(e);
        }
    };
    if let Some(cg) = &cgroup {
        cg.kill_all();
    }
    let duration_ms = start.elapsed().as_millis() as u64;
    finish(
        &plan,
        options,
        collected,
        duration_ms,
        &copy,
        cgroup.as_ref().is_some_and(RunCgroup::is_active),
    )
}

/// Map uid/gid 0 inside to `uid`/`gid` outside. An unprivileged invoker must deny setgroups
/// to write a gid map; root keeps it so the sandbox can drop its supplementary groups.
fn write_id_maps(pid: Pid, uid: u32, gid: u32, root: bool) -> Result<(), SandboxError> {
    let proc_dir = PathBuf::from(format!("/proc/{}", pid.as_raw()));
    fs::write(proc_dir.join("uid_map"), format!("0 {uid} 1\n")).map_err(os("write uid_map"))?;
    if !root {
        fs::write(proc_dir.join("setgroups"), "deny").map_err(os("write setgroups"))?;
    }
    fs::write(proc_dir.join("gid_map"), format!("0 {gid} 1\n")).map_err(os("write gid_map"))?;
    Ok(())
}

/// Append to a capped buffer; returns whether anything was dropped.
fn append_capped(buf: &mut Vec<u8>, data: &[u8], cap: usize) -> bool {
    let room = cap.saturating_sub(buf.len());
    buf.extend_from_slice(&data[..data.len().min(room)]);
    data.len() > room
}

#[allow(clippy::too_many_arguments)]
fn supervise(
    plan: &Plan,
    options: &RunOptions,
    pid: Pid,
    pidfd: &OwnedFd,
    channel: &Channel,
    out: &OwnedFd,
    err: &OwnedFd,
    cgroup: Option<&RunCgroup>,
) -> Result<Collected, SandboxError> {
    let mut c = Collected::default();
    let cap = plan.output_bytes as usize;
    let deadline = Instant::now() + Duration::from_secs(plan.wall_time_secs);
    // After the first process is gone, how long to keep draining output held by stragglers
    // (only possible without a PID namespace, whose end kills everything at once).
    let grace = Duration::from_secs(2);
    let mut exited_at: Option<Instant> = None;
    let (mut out_open, mut err_open, mut ch_open) = (true, true, true);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let now = Instant::now();
        if exited_at.is_none() && now >= deadline && !c.timed_out {
            c.timed_out = true;
            kill_tree(plan, pid, cgroup);
        }
        if let Some(t) = exited_at
            && (now >= t + grace || !(out_open || err_open || ch_open))
        {
            break;
        }
        let wait_until = match exited_at {
            Some(t) => t + grace,
            None if c.timed_out => now + grace,
            None => deadline,
        };
        let timeout_ms = wait_until
            .saturating_duration_since(now)
            .as_millis()
            .clamp(1, 60_000) as i32;
        let mut fds = Vec::with_capacity(4);
        fds.push(PollFd::new(pidfd.as_fd(), PollFlags::POLLIN));
        let watch = [(out_open, out.as_fd()), (err_open, err.as_fd())];
        for (open, fd) in watch {
            if open {
                fds.push(PollFd::new(fd, PollFlags::POLLIN));
            }
        }
        let ch_fd = channel.as_fd();
        if ch_open {
            fds.push(PollFd::new(ch_fd, PollFlags::POLLIN));
        }
        match poll(
            &mut fds,
            PollTimeout::try_from(timeout_ms.max(1)).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(nix_os("poll the sandbox")(e)),
        }
        let ready = |i: usize| {
            fds.get(i)
                .and_then(|f| f.revents())
                .is_some_and(|r| !r.is_empty())
        };
        let mut idx = 1;
        let pid_ready = ready(0);
        let out_ready = out_open && {
            let r = ready(idx);
            idx += 1;
            r
        };
        let err_ready = err_open && {
            let r = ready(idx);
            idx += 1;
            r
        };
        let ch_ready = ch_open && ready(idx);
        drop(fds);

        if out_ready {
            match nix::unistd::read(out, &mut buf) {
                Ok(0) | Err(_) => out_open = false,
                Ok(n) => {
                    let kept = c.stdout.len();
                    c.stdout_truncated |= append_capped(&mut c.stdout, &buf[..n], cap);
                    if options.output == OutputMode::PassThrough {
                        let _ = io::stdout().write_all(&c.stdout[kept..]);
                        let _ = io::stdout().flush();
                    }
                }
            }
        }
        if err_ready {
            match nix::unistd::read(err, &mut buf) {
                Ok(0) | Err(_) => err_open = false,
                Ok(n) => {
                    let kept = c.stderr.len();
                    c.stderr_truncated |= append_capped(&mut c.stderr, &buf[..n], cap);
                    if options.output == OutputMode::PassThrough {
                        let _ = io::stderr().write_all(&c.stderr[kept..]);
                    }
                }
            }
        }
        if ch_ready {
            match channel.recv() {
                Ok(Some((report, fds))) => {
                    if let Some(fd) = fds.into_iter().next() {
                        c.layer = Some(fd);
                    }
                    c.reports.push(report);
                }
                Ok(None) | Err(_) => ch_open = false,
            }
        }
        if pid_ready && exited_at.is_none() {
            c.direct_status = Some(waitpid(pid, None).map_err(nix_os("wait for the sandbox"))?);
            exited_at = Some(Instant::now());
            if !plan.namespaced {
                // Without a PID namespace the command's children may live on: end them now.
                kill_tree(plan, pid, cgroup);
            }
        }
    }
    Ok(c)
}

/// Kill everything the run started: through the init (the kernel then kills the whole PID
/// namespace), or without namespaces the command's process group and cgroup.
fn kill_tree(plan: &Plan, pid: Pid, cgroup: Option<&RunCgroup>) {
    if plan.namespaced {
        let _ = kill(pid, Signal::SIGKILL);
    } else {
        let _ = killpg(pid, Signal::SIGKILL);
        let _ = kill(pid, Signal::SIGKILL);
    }
    if let Some(cg) = cgroup {
        cg.kill_all();
    }
}

fn finish(
    plan: &Plan,
    options: &RunOptions,
    c: Collected,
    duration_ms: u64,
    copy: &Path,
    cgroup_active: bool,
) -> Result<Outcome, SandboxError> {
    let mut exit_code = None;
    let mut signal = None;
    let mut stderr = c.stderr;
    let mut kind = if plan.namespaced {
        WorkspaceKind::Overlay
    } else {
        WorkspaceKind::Copy
    };
    let mut landlock: Option<LandlockOutcome> = None;
    let mut cgroup_ns = false;
    let mut command_ready = false;
    let mut reported_status = false;
    for report in &c.reports {
        match report {
            Report::SetupFailed {
                step,
                errno,
                detail,
            } => {
                return Err(SandboxError::Setup {
                    step: step.clone(),
                    errno: *errno,
                    detail: detail.clone(),
                });
            }
            Report::WorkspaceReady { kind: k } => kind = *k,
            Report::CgroupNamespace { entered } => cgroup_ns = *entered,
            Report::CommandReady { landlock: l, .. } => {
                landlock = Some(*l);
                command_ready = true;
            }
            Report::ExecFailed {
                errno,
                exit_code: code,
            } => {
                let message = match *code {
                    127 => format!("envcraft: {}: command not found\n", plan.argv[0]),
                    _ => format!(
                        "envcraft: {}: cannot execute: {}\n",
                        plan.argv[0],
                        io::Error::from_raw_os_error(*errno)
                    ),
                };
                stderr.extend_from_slice(message.as_bytes());
                if options.output == OutputMode::PassThrough {
                    let _ = io::stderr().write_all(message.as_bytes());
                }
                exit_code = Some(*code);
                reported_status = true;
            }
            Report::Exited { code } if !reported_status => {
                exit_code = Some(*code);
                reported_status = true;
            }
            Report::Signaled { signal: s } if !reported_status => {
                signal = Some(*s);
                reported_status = true;
            }
            _ => {}
        }
    }
    if !plan.namespaced && !reported_status {
        match c.direct_status {
            Some(WaitStatus::Exited(_, code)) => exit_code = Some(code),
            Some(WaitStatus::Signaled(_, s, _)) => signal = Some(s as i32),
            _ => {}
        }
        reported_status = exit_code.is_some() || signal.is_some();
    }
    if !reported_status {
        if c.timed_out {
            signal = Some(Signal::SIGKILL as i32);
        } else if !command_ready {
            return Err(SandboxError::Lost);
        } else {
            match c.direct_status {
                Some(WaitStatus::Signaled(_, s, _)) => signal = Some(s as i32),
                Some(WaitStatus::Exited(_, code)) => exit_code = Some(code),
                _ => return Err(SandboxError::Lost),
            }
        }
    }

    // The changes: from the upper layer (overlay) or by comparing the copy with the template.
    let layer_path = c
        .layer
        .as_ref()
        .map(|fd| PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())));
    let (changes, source) = match (&layer_path, kind) {
        (Some(layer), WorkspaceKind::Overlay) => {
            let upper = layer.join("upper");
            (workspace::changes_from_upper(&upper, &plan.lower)?, upper)
        }
        (Some(layer), WorkspaceKind::Copy) => {
            let copy = layer.join("copy");
            (workspace::changes_between(&plan.lower, &copy)?, copy)
        }
        (None, WorkspaceKind::Copy) if !plan.namespaced => (
            workspace::changes_between(&plan.lower, copy)?,
            copy.to_path_buf(),
        ),
        _ => (Changes::default(), PathBuf::new()),
    };
    if let Some(out) = &options.keep_changes
        && !source.as_os_str().is_empty()
    {
        workspace::keep_changes(&source, &changes, out)?;
    }

    let enforced = enforced(plan, kind, landlock, cgroup_ns, cgroup_active);
    Ok(Outcome {
        exit_code,
        signal,
        timed_out: c.timed_out,
        stdout: c.stdout,
        stderr,
        stdout_truncated: c.stdout_truncated,
        stderr_truncated: c.stderr_truncated,
        duration_ms,
        enforced,
        changes,
    })
}

fn enforced(
    plan: &Plan,
    kind: WorkspaceKind,
    landlock: Option<LandlockOutcome>,
    cgroup_ns: bool,
    cgroup_active: bool,
) -> Enforced {
    let ns = plan.namespaced;
    let ll = landlock.unwrap_or(LandlockOutcome {
        abi: sys::landlock_abi_version(),
        filesystem: false,
        network: false,
        scope: false,
        fully: false,
    });
    let ran = landlock.is_some();
    let root = plan.invoker_is_root;
    let mut protections = BTreeMap::new();
    for p in Protection::ALL {
        let on = match p {
            Protection::UserNamespace
            | Protection::MountNamespace
            | Protection::PidNamespace
            | Protection::IpcNamespace
            | Protection::UtsNamespace => ns,
            Protection::NetworkNamespace => plan.network_namespace,
            Protection::CgroupNamespace => ns && cgroup_ns,
            Protection::OverlayWorkspace => ns && kind != WorkspaceKind::Copy,
            Protection::WorkspaceSizeLimit => ns,
            Protection::LandlockFilesystem => ll.filesystem,
            Protection::LandlockNetwork => ll.network,
            Protection::LandlockScope => ll.scope,
            Protection::Seccomp
            | Protection::NoNewPrivs
            | Protection::CapabilitiesDropped
            | Protection::Rlimits => ran,
            Protection::CgroupLimits => cgroup_active,
        };
        protections.insert(p.name(), on);
    }
    Enforced {
        policy: plan.policy_name.clone(),
        protections,
        workspace: kind,
        landlock_abi: ll.abi,
        landlock_fully: ll.fully,
        cgroup: plan
            .cgroup
            .map(|c| c.support)
            .unwrap_or(CgroupSupport::None),
        memory_limit: if cgroup_active { "cgroup" } else { "rlimit_as" },
        process_limit: match (cgroup_active, root) {
            (true, _) => "cgroup+rlimit",
            (false, false) => "rlimit",
            (false, true) => "none_for_root",
        },
        process_tree_kill: if ns { "pid_namespace" } else { "process_group" },
        invoker: if root { "root" } else { "unprivileged" },
        sandbox_uid_maps_to: plan.uid,
        template_owner_mapped: plan.template_owner == (plan.uid, plan.gid) || !ns,
    }
}
