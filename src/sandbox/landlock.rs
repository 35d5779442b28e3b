//! Landlock: turn a [`LandlockPlan`] into a ruleset and restrict the calling thread with it.
//!
//! Every access right of the best ABI the kernel offers is *handled* (denied unless granted);
//! rules then grant read/execute, read-write or device access beneath the planned paths. The
//! result records how much the kernel actually enforced so the caller can fail closed.

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};
use serde::{Deserialize, Serialize};

use super::plan::LandlockPlan;

#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    #[error("cannot build the Landlock ruleset")]
    Ruleset(#[from] landlock::RulesetError),
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

/// Build the ruleset and restrict the calling thread. Scope: the command process only, after
/// its mounts are final and before seccomp (whose filter would not allow Landlock's calls to
/// be reconsidered) and `execve`. Also sets `no_new_privs`.
pub fn restrict_current_thread(
    plan: &LandlockPlan,
    abi_version: i32,
) -> Result<LandlockOutcome, LandlockError> {
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
    let status = created.restrict_self()?;
    let enforced = status.ruleset != RulesetStatus::NotEnforced;
    Ok(LandlockOutcome {
        abi: abi_version,
        filesystem: enforced,
        network: enforced && network,
        scope: enforced && scope && plan.scope,
        fully: status.ruleset == RulesetStatus::FullyEnforced,
    })
}
