//! The sandbox policy of an OpenClaw session: the environment's own, with what OpenClaw needs
//! and nothing more. The host's network namespace, where Landlock lets TCP connect only to the
//! model's port and bind nowhere, and scopes abstract Unix sockets to the sandbox (the
//! protections that stand in for a network namespace are made required, so a kernel without
//! them refuses the run); the workspace also at `/root/.openclaw/workspace` under HOME `/root`;
//! limits that let a Node process run a turn.

use std::path::PathBuf;

use crate::spec::policy::{NetworkMode, Policy, Protection};

use super::model_url::ModelUrl;

/// Where OpenClaw finds its workspace (its default, `~/.openclaw/workspace`, with HOME `/root`).
pub const WORKSPACE: &str = "/root/.openclaw/workspace";

/// HOME inside (a private tmpfs, as every policy's HOME is); OpenClaw's state dir is below it.
pub const HOME: &str = "/root";

/// Processes (threads count) a Node process and the commands of its `exec` tool may use.
const MIN_PROCESSES: u64 = 512;

/// Bytes of memory below which Node and OpenClaw do not start reliably.
const MIN_MEMORY: u64 = 2 << 30;

/// The policy for a session whose agent is OpenClaw, reaching only `url`'s port, each turn
/// given `turn_secs` of wall time (and as much CPU time).
pub fn sandbox_policy(mut policy: Policy, url: &ModelUrl, turn_secs: u64) -> Policy {
    policy.name = format!("{}+openclaw", policy.name);
    policy.description = format!(
        "{} (OpenClaw: host network, TCP connect to port {} only)",
        policy.description, url.port
    );
    let fs = &mut policy.filesystem;
    let workspace = PathBuf::from(WORKSPACE);
    if fs.workspace != workspace && !fs.workspace_aliases.contains(&workspace) {
        fs.workspace_aliases.push(workspace);
    }
    policy.environment.home = PathBuf::from(HOME);
    let net = &mut policy.network;
    net.mode = NetworkMode::Host;
    net.allow_tcp_connect = vec![url.port];
    net.allow_tcp_bind = Vec::new();
    net.allow_netlink = false;
    let protections = &mut policy.protections;
    protections
        .required
        .retain(|p| *p != Protection::NetworkNamespace);
    protections.best_effort.retain(|p| {
        !matches!(
            p,
            Protection::NetworkNamespace | Protection::LandlockNetwork | Protection::LandlockScope
        )
    });
    for p in [Protection::LandlockNetwork, Protection::LandlockScope] {
        if !protections.required.contains(&p) {
            protections.required.push(p);
        }
    }
    let limits = &mut policy.limits;
    limits.wall_time_secs = limits.wall_time_secs.max(turn_secs);
    limits.cpu_secs = limits.cpu_secs.max(turn_secs);
    limits.processes = limits.processes.max(MIN_PROCESSES);
    limits.memory_bytes = limits.memory_bytes.max(MIN_MEMORY);
    policy
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_policy_reaches_only_the_model_port_and_requires_landlock_for_it() {
        let base = Policy::load("default").unwrap();
        let url = ModelUrl::parse("http://127.0.0.1:8123/v1").unwrap();
        let turn = base.limits.wall_time_secs + 600;
        let p = sandbox_policy(base.clone(), &url, turn);
        assert_eq!(p.network.mode, NetworkMode::Host);
        assert_eq!(p.network.allow_tcp_connect, vec![8123]);
        assert!(p.network.allow_tcp_bind.is_empty());
        assert!(!p.protections.is_required(Protection::NetworkNamespace));
        assert!(p.protections.is_required(Protection::LandlockNetwork));
        assert!(p.protections.is_required(Protection::LandlockScope));
        assert!(
            !p.protections
                .best_effort
                .contains(&Protection::LandlockNetwork)
        );
        assert_eq!(p.limits.wall_time_secs, turn);
        assert_eq!(p.limits.cpu_secs, base.limits.cpu_secs.max(turn));
        // A shorter turn never shortens the environment's own limit.
        let short = sandbox_policy(base.clone(), &url, 1);
        assert_eq!(short.limits.wall_time_secs, base.limits.wall_time_secs);
        assert!(p.limits.processes >= MIN_PROCESSES);
        let aliases = &p.filesystem.workspace_aliases;
        assert_eq!(
            aliases
                .iter()
                .filter(|a| a.as_os_str() == WORKSPACE)
                .count(),
            1
        );
        assert_eq!(p.environment.home, PathBuf::from(HOME));
        // Everything else is the environment's policy.
        assert_eq!(p.filesystem.read_only, base.filesystem.read_only);
        assert_eq!(p.filesystem.hidden, base.filesystem.hidden);
    }
}
