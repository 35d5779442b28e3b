//! Landlock: turn a [`LandlockPlan`] into a ruleset and restrict the calling thread with it.
//!
//! Every access right of the best ABI the kernel offers is *handled* (denied unless granted);
//! rules then grant read/execute, read-write or device access beneath the planned paths. The
//! result records how much the kernel actually enforced so the caller can fail closed.

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};
use serde::{Deserialize, Serialize};

use super::plan::LandlockPlan;

#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    #[error("cannot build the Landlock ruleset")]
    Ruleset(#[from] landlock::RulesetError),
    #[error("cannot duplicate the Landlock ruleset")]
    Clone(#[source] std::io::Error),
}

/// What the kernel enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LandlockOutcome {
    pub abi: i32,
    pub filesystem: bool,
    pub network: bool,
    pub scope: bool,
    /// All requested rights were enforced (not only some of them).
    pub fully: bool,
}

fn abi_from(version: i32) -> ABI {
    ABI::from(version)
}

/// A ruleset built once (by the init, after its mounts are final, or by envcraft without
/// namespaces) and applied by every command it starts: a command then makes one system call
/// for Landlock instead of one per rule.
pub struct Prepared {
    created: RulesetCreated,
    abi: i32,
    network: bool,
    scope: bool,
    /// The plan, when it grants each command its own `/proc/PID` ([`LandlockPlan::own_proc`]):
    /// such a ruleset is built anew by each command, for itself.
    own_proc: Option<Box<LandlockPlan>>,
}

impl Prepared {
    /// Build the ruleset of `plan` for the kernel's ABI `abi_version`. The paths are resolved
    /// now, in the caller's mount namespace.
    pub fn build(plan: &LandlockPlan, abi_version: i32) -> Result<Prepared, LandlockError> {
        build(plan, abi_version)
    }

    /// Restrict the calling thread with the prepared ruleset (and set `no_new_privs`). Scope:
    /// the command process only, before seccomp (whose filter would not let Landlock's calls
    /// be made) and `execve`.
    pub fn restrict_current_thread(&self) -> Result<LandlockOutcome, LandlockError> {
        if let Some(plan) = &self.own_proc {
            // `/proc/self` opened now is the calling process's own directory.
            let mut own = (**plan).clone();
            own.own_proc = false;
            own.read_exec.push(std::path::PathBuf::from("/proc/self"));
            return build(&own, self.abi)?.restrict_current_thread();
        }
        let created = self.created.try_clone().map_err(LandlockError::Clone)?;
        let status = created.restrict_self()?;
        let enforced = status.ruleset != RulesetStatus::NotEnforced;
        Ok(LandlockOutcome {
            abi: self.abi,
            filesystem: enforced,
            network: enforced && self.network,
            scope: enforced && self.scope,
            fully: status.ruleset == RulesetStatus::FullyEnforced,
        })
    }
}

fn build(plan: &LandlockPlan, abi_version: i32) -> Result<Prepared, LandlockError> {
    let abi = abi_from(abi_version);
    let read = AccessFs::from_read(abi);
    let all = AccessFs::from_all(abi);
    let device = read | AccessFs::WriteFile | AccessFs::IoctlDev | AccessFs::Truncate;
    let network = abi_version >= 4;
    let scope = abi_version >= 6;

    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?;
    if network {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
    }
    if scope && plan.scope {
        ruleset = ruleset.scope(Scope::from_all(abi))?;
    }
    // A path that does not exist inside (a /lib64 on a host without one) is simply not granted.
    let groups = [
        (&plan.read_exec, read),
        (&plan.read_dir, AccessFs::ReadDir.into()),
        (&plan.read_write, all),
        (&plan.devices, device & AccessFs::from_file(abi)),
    ];
    let mut rules = Vec::new();
    for (paths, access) in groups {
        for path in paths {
            if let Ok(fd) = PathFd::new(path) {
                rules.push(PathBeneath::new(fd, access));
            }
        }
    }
    let mut created = ruleset
        .create()?
        .add_rules(rules.into_iter().map(Ok::<_, landlock::RulesetError>))?;
    if network {
        for port in &plan.tcp_bind {
            created = created.add_rule(NetPort::new(*port, AccessNet::BindTcp))?;
        }
        for port in &plan.tcp_connect {
            created = created.add_rule(NetPort::new(*port, AccessNet::ConnectTcp))?;
        }
    }
    Ok(Prepared {
        created,
        abi: abi_version,
        network,
        scope: scope && plan.scope,
        own_proc: plan.own_proc.then(|| Box::new(plan.clone())),
    })
}
