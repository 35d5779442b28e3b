//! Starting a live sandbox (see [`super`]): the init cloned before the plan
//! ([`Prestart`]), its uid/gid maps and idmapped trees, `Start`, the run's cgroup; or, without
//! namespaces, the copied workspace each command is cloned over.

use super::*;

/// Map uid/gid 0 inside to `uid`/`gid` outside. An unprivileged invoker must deny setgroups
/// to write a gid map; root keeps it so the sandbox can drop its supplementary groups.
pub(super) fn write_id_maps(pid: Pid, uid: u32, gid: u32, root: bool) -> Result<(), SandboxError> {
    let proc_dir = PathBuf::from(format!("/proc/{}", pid.as_raw()));
    fs::write(proc_dir.join("uid_map"), format!("0 {uid} 1\n")).map_err(os("write uid_map"))?;
    if !root {
        fs::write(proc_dir.join("setgroups"), "deny").map_err(os("write setgroups"))?;
    }
    fs::write(proc_dir.join("gid_map"), format!("0 {gid} 1\n")).map_err(os("write gid_map"))?;
    Ok(())
}

/// Whether `pid`, a child of this process, has not ended (it is not reaped: a later wait still
/// sees it).
pub(super) fn still_running(pid: Pid) -> bool {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    matches!(
        waitid(
            Id::Pid(pid),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT,
        ),
        Ok(WaitStatus::StillAlive)
    )
}

/// A sandbox's init, cloned before the run is planned: its namespaces, above all the network
/// namespace (the longest to make), are made while envcraft plans, and the plan follows in
/// [`Report::Start`] (see `child`, step 1). Dropping an unused one kills it; it has made
/// nothing on the host.
pub struct Prestart {
    pub(super) init: Pid,
    /// Our end of its channel; `None` once taken by the sandbox it became.
    channel: Option<Channel>,
}

impl Prestart {
    /// Clone the init into new user, mount, PID, IPC and UTS namespaces: a warm one when one
    /// is ready (see [`crate::sandbox::warm`]), else by the sandbox maker when one runs in
    /// this process (see [`crate::sandbox::maker`]), else here. With `network` it
    /// begins a network namespace at once, as a plan for a policy without network will want.
    pub fn clone(network: bool) -> Result<Prestart, SandboxError> {
        match crate::sandbox::warm::take(network) {
            Some(warm) => Ok(warm),
            None => Prestart::clone_now(network),
        }
    }

    /// [`Prestart::clone`], never from the warm inits (see [`crate::sandbox::warm`]).
    pub(crate) fn clone_now(network: bool) -> Result<Prestart, SandboxError> {
        if let Some(made) = crate::sandbox::maker::make_init(network) {
            let (init, channel) = made?;
            return Ok(Prestart {
                init,
                channel: Some(channel),
            });
        }
        let (parent_end, child_end) = Channel::pair().map_err(os("create the report channel"))?;
        // The network namespace is made by the init, beside its other setup: see `netns`.
        match sys::clone_process(crate::sandbox::maker::INIT_NAMESPACES) {
            Ok(Cloned::Child) => {
                drop(parent_end);
                child::init_main(&child_end, network)
            }
            Ok(Cloned::Parent(pid)) => Ok(Prestart {
                init: Pid::from_raw(pid),
                channel: Some(parent_end),
            }),
            Err(e) => Err(crate::sandbox::maker::clone_error(e)),
        }
    }

    /// Whether the init is still running (it has not exited, nor been killed).
    pub(crate) fn alive(&self) -> bool {
        still_running(self.init)
    }

    /// The init and our end of its channel, for the sandbox it becomes.
    pub(super) fn take(mut self) -> (Pid, Channel) {
        let channel = self.channel.take();
        (
            self.init,
            channel.unwrap_or_else(|| unreachable!("taken once")),
        )
    }
}

impl Drop for Prestart {
    fn drop(&mut self) {
        if self.channel.take().is_some() {
            let _ = kill(self.init, Signal::SIGKILL);
            let _ = waitpid(self.init, None);
        }
    }
}

impl Sandbox {
    /// Build the sandbox of `plan`; with `seed`, its workspace starts as that one's changes
    /// (an upper layer, or a full copy, as the kind says).
    pub(super) fn start_seeded(
        plan: &Plan,
        state_root: &Path,
        seed: Option<(OwnedFd, WorkspaceKind)>,
        prestart: Option<Prestart>,
    ) -> Result<Sandbox, SandboxError> {
        let state = tempfile::Builder::new()
            .prefix("envcraft-")
            .tempdir_in(state_root)
            .map_err(|source| SandboxError::StateDir {
                path: state_root.to_path_buf(),
                source,
            })?;
        let owner =
            crate::sandbox::stale::mark_owner(state.path(), state_root).map_err(|source| {
                SandboxError::StateDir {
                    path: state_root.to_path_buf(),
                    source,
                }
            })?;
        let dirs = StateDirs {
            base: state.path().to_path_buf(),
        };
        let run_name = dirs
            .base
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "envcraft-run".into());
        let mut cgroup = plan.cgroup.map(|limits| RunCgroup::new(&run_name, &limits));
        if !plan.namespaced {
            drop(prestart);
            let seccomp = Program::compile(&plan.seccomp)?;
            crate::sandbox::stale::sweep_once(state_root);
            return Sandbox::start_on_host(plan, seccomp, (state, owner), cgroup, seed);
        }
        if let Some((_, kind)) = &seed
            && *kind == WorkspaceKind::ReadOnly
        {
            return Err(SandboxError::Setup {
                step: "fork".into(),
                errno: 0,
                detail: "a read-only workspace has no changes to fork".into(),
            });
        }
        if plan.uid != nix::unistd::geteuid().as_raw() {
            // Root maps the sandbox to the template's owner, who must reach the state directory.
            nix::unistd::chown(
                &dirs.base,
                Some(nix::unistd::Uid::from_raw(plan.uid)),
                Some(nix::unistd::Gid::from_raw(plan.gid)),
            )
            .map_err(nix_os("hand the state directory to the template's owner"))?;
        }
        let prestart = match prestart {
            Some(prestart) => prestart,
            None => Prestart::clone(plan.network_namespace)?,
        };
        let (init, parent_end) = prestart.take();
        // The init waits for its uid/gid maps and `Start` before anything else, so both come
        // first: every page this process writes from the clone on is copied (and costs a TLB
        // flush), and the init should not wait behind those copies.
        let seed_fds: Vec<i32> = seed.iter().map(|(fd, _)| fd.as_raw_fd()).collect();
        let start = Report::Start {
            plan: Box::new(plan.clone()),
            state_dir: dirs.base.clone(),
            seed: seed.as_ref().map(|(_, kind)| *kind),
        };
        let started = write_id_maps(init, plan.uid, plan.gid, plan.invoker_is_root)
            .and_then(|()| match plan.uid_mapping {
                UidMapping::Idmapped => crate::sandbox::idmap::trees_for(init, plan),
                _ => Ok(Vec::new()),
            })
            .and_then(|trees| {
                let fds: Vec<i32> = seed_fds
                    .iter()
                    .copied()
                    .chain(trees.iter().map(|t| t.as_raw_fd()))
                    .collect();
                parent_end
                    .send(&start, &fds)
                    .map_err(os("start the sandbox"))
            });
        drop(seed);
        if let Err(e) = started {
            let _ = kill(init, Signal::SIGKILL);
            let _ = waitpid(init, None);
            return Err(e);
        }
        let mut sandbox = Sandbox {
            plan: plan.clone(),
            state: Some(state),
            _owner_mark: Some(owner),
            backend: Backend::Namespaced {
                init,
                channel: parent_end,
            },
            cgroup: None,
            kind: WorkspaceKind::Overlay,
            cgroup_namespace: false,
            layer: None,
            workspace_root: None,
            view: None,
            handback: super::super::handback::Handback::with_init(),
            landlock: None,
            next_id: 1,
            pending: Vec::new(),
            ready: false,
            background: Vec::new(),
            cancel: None,
        };
        // From here on, dropping `sandbox` kills the init and cleans up.
        let Backend::Namespaced { channel, .. } = &sandbox.backend else {
            return Err(SandboxError::Lost);
        };
        let (membership, commands, home) = match cgroup.as_mut() {
            Some(cg) => {
                cg.create()?;
                let join = cg.open_membership_files()?;
                let commands = cg.open_commands_membership_file()?;
                let home = cg.open_home_membership_files().unwrap_or_default();
                (join, commands, home)
            }
            None => (Vec::new(), None, Vec::new()),
        };
        let raw: Vec<i32> = membership
            .iter()
            .chain(&commands)
            .chain(&home)
            .map(|f| f.as_raw_fd())
            .collect();
        channel
            .send(
                &Report::LimitsReady {
                    join: membership.len(),
                    commands: commands.is_some(),
                },
                &raw,
            )
            .map_err(os("start the sandbox"))?;
        drop((membership, commands, home));
        sandbox.cgroup = cgroup;
        // What killed runs left behind is swept while the init builds the root (this process
        // has nothing else to do until then): off the path to the command's start. Our own
        // state directory is marked as alive and our cgroup is new, so neither is swept.
        crate::sandbox::stale::sweep_once(state_root);
        // Not waiting for Ready: requests queue behind the setup, and its reports are read as
        // they come (see `absorb`).
        Ok(sandbox)
    }
}
