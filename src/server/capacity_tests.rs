#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;

fn machine(fd_limit: u64, fds_open: u64) -> Machine {
    Machine {
        fd_limit,
        fds_open,
        processes_left: None,
        memory_available: None,
        memory_total: None,
        memcg_nodes: 0,
    }
}

const NINE: SessionCost = SessionCost {
    descriptors: 9,
    kept: 9,
    processes: 1,
    measured: true,
};

/// A session of four descriptors (its channel and its workspace's three) that keeps one idle.
const GIVING_BACK: SessionCost = SessionCost {
    descriptors: 4,
    kept: 1,
    processes: 1,
    measured: true,
};

#[test]
fn sessions_that_give_their_descriptors_back_are_counted_by_what_they_keep() {
    // 20,000 - 100 open - 4,160 reserved = 15,740; the 512 calls that may run at once hold
    // three each (1,536): 14,204 sessions of one descriptor, 10,000 and more.
    let plan = plan(&machine(20_000, 100), &GIVING_BACK, 4096, 100_000);
    assert_eq!(plan.sandbox_room, 15_740 - 1536);
    assert_eq!(plan.by_descriptors, 14_204);
    assert_eq!(
        plan.holding, 0,
        "at the descriptors' bound, none keeps its three"
    );
    let ten_thousand = plan_for_sessions(&machine(20_000, 100), &GIVING_BACK, 10_000);
    assert_eq!(ten_thousand.sessions, 10_000);
    assert_eq!(ten_thousand.holding, (14_204 - 10_000) / 3);
    // Few connections: fewer calls at once.
    let plan = plan_for(&machine(20_000, 100), &GIVING_BACK, 16);
    assert_eq!(
        plan.by_descriptors,
        20_000 - 100 - (16 + ANSWER_MARGIN) - 16 * 3
    );
}

fn plan_for_sessions(m: &Machine, cost: &SessionCost, sessions: u64) -> Plan {
    plan(m, cost, 4096, sessions)
}

fn plan_for(m: &Machine, cost: &SessionCost, connections: u64) -> Plan {
    plan(m, cost, connections, 100_000)
}

#[test]
fn descriptors_bound_the_sessions_once_connections_are_reserved() {
    // 20,000 - 100 open - (4,096 + 64) reserved = 15,740 left, 1,748 sessions of 9.
    let plan = plan(&machine(20_000, 100), &NINE, 4096, 100_000);
    assert_eq!(plan.reserved, 4096 + ANSWER_MARGIN);
    assert_eq!(plan.by_descriptors, 1748);
    assert_eq!((plan.sessions, plan.bound), (1748, "descriptors"));
}

#[test]
fn max_sessions_bounds_when_the_descriptors_allow_more() {
    let plan = plan(&machine(1 << 20, 100), &NINE, 4096, 1024);
    assert_eq!((plan.sessions, plan.bound), (1024, "max_sessions"));
}

#[test]
fn a_limit_too_low_for_every_connection_still_holds_sessions() {
    // 1,024 - 24 = 1,000 left: at most half (500) reserved, 500 / 9 = 55 sessions.
    let plan = plan(&machine(1024, 24), &NINE, 4096, 1024);
    assert_eq!(plan.reserved, 500);
    assert_eq!(plan.by_descriptors, 55);
}

#[test]
fn the_smallest_of_processes_and_memory_bounds_too() {
    // 8 GiB in all: 512 MiB and two sessions kept free, 200 sessions' worth beyond it.
    let floor = memory_floor(8 << 30);
    let m = Machine {
        processes_left: Some(300),
        memory_available: Some(floor + SESSION_MEMORY_BYTES * 200),
        memory_total: Some(8 << 30),
        ..machine(1 << 20, 100)
    };
    let plan = plan(&m, &NINE, 64, 10_000);
    assert_eq!((plan.sessions, plan.bound), (200, "memory"));
    assert_eq!(plan.by_processes, Some(300));
}

#[test]
fn a_sessions_memory_grows_with_the_sessions_where_each_has_a_memory_cgroup() {
    // Five filesystems a session: 1,000 sessions are 5,000 shrinkers, 79 units of 64.
    assert_eq!(session_memory(1000, 1), SESSION_MEMORY_BYTES + 79 * 1024);
    assert_eq!(session_memory(10_000, 1), SESSION_MEMORY_BYTES + 782 * 1024);
    assert_eq!(
        session_memory(10_000, 2),
        SESSION_MEMORY_BYTES + 2 * 782 * 1024
    );
    assert_eq!(session_memory(10_000, 0), SESSION_MEMORY_BYTES);
    // What the 10,000-session runs measured (1,426-1,500 KiB a session) is within the model.
    let ten = session_memory(10_000, 1) >> 10;
    assert!((1_400..=1_600).contains(&ten), "{ten} KiB");
}

#[test]
fn the_memory_bound_is_the_most_sessions_whose_growing_cost_fits() {
    let room = 22 << 30;
    let n = sessions_in_memory(room, 1);
    assert!(n * session_memory(n, 1) <= room);
    assert!((n + 1) * session_memory(n + 1, 1) > room);
    // Quadratic, not room / estimate: about 13,000 on 22 GiB, not 30,000.
    assert!((12_000..14_000).contains(&n), "{n}");
    assert_eq!(sessions_in_memory(room, 0), room / SESSION_MEMORY_BYTES);
    assert_eq!(sessions_in_memory(0, 1), 0);
    assert_eq!(sessions_in_memory(SESSION_MEMORY_BYTES, 1), 0);
    assert_eq!(sessions_in_memory(SESSION_MEMORY_BYTES + 1024, 1), 1);
}

#[test]
fn a_plan_under_memory_cgroups_states_the_cost_at_its_count() {
    let total = 24 << 30;
    let m = Machine {
        memory_available: Some(total - (1 << 30)),
        memory_total: Some(total),
        memcg_nodes: 1,
        ..machine(1 << 20, 100)
    };
    let plan = plan(&m, &GIVING_BACK, 4096, 100_000);
    assert_eq!(plan.bound, "memory");
    assert_eq!(plan.by_memory, Some(plan.sessions));
    assert_eq!(plan.memory_per_session, session_memory(plan.sessions, 1));
    let held = plan_for_sessions(&m, &GIVING_BACK, 1000);
    assert_eq!(held.memory_per_session, session_memory(1000, 1));
}

#[test]
fn node_lists_are_counted() {
    assert_eq!(node_count("0\n"), Some(1));
    assert_eq!(node_count("0-3"), Some(4));
    assert_eq!(node_count("0,2-3"), Some(3));
    assert_eq!(node_count("x"), None);
    assert_eq!(node_count("3-1"), None);
}

#[test]
fn a_full_headroom_refuses_with_capacity_naming_descriptors() {
    let headroom = Headroom {
        fd_limit: 1 << 20,
        reserved: 64,
        per_session: 9,
        sessions: 3,
        processes_per_session: 1,
        pids: None,
        state_root: None,
        memory_total: None,
    };
    assert!(headroom.check(2).is_ok());
    let refused = headroom.check(3).unwrap_err();
    assert_eq!(refused.category, "capacity");
    assert_eq!(refused.status.as_u16(), 503);
    assert_eq!(refused.retry_after, Some(5));
    assert!(
        refused.message.contains("no descriptors left"),
        "{}",
        refused.message
    );
}

#[test]
fn near_the_bound_the_descriptors_open_now_decide() {
    // Planned room for 10, but the limit is below what is open now: refused at once.
    let headroom = Headroom {
        fd_limit: 1,
        reserved: 0,
        per_session: 1,
        sessions: 10,
        processes_per_session: 1,
        pids: None,
        state_root: None,
        memory_total: None,
    };
    assert!(headroom.check(0).is_err());
}

#[test]
fn kernel_refusals_are_named_by_resource() {
    let emfile = std::io::Error::from_raw_os_error(libc::EMFILE);
    assert_eq!(scarce_in(&emfile), Some(Scarce::Descriptors));
    let enomem = std::io::Error::from_raw_os_error(libc::ENOMEM);
    assert_eq!(scarce_in(&enomem), Some(Scarce::Memory));
    let clone = SandboxError::Os {
        what: "clone the sandbox",
        source: std::io::Error::from_raw_os_error(libc::EAGAIN),
    };
    assert_eq!(scarce_in(&clone), Some(Scarce::Processes));
    // EAGAIN elsewhere (a read timing out) is not a capacity matter.
    let read = SandboxError::Os {
        what: "read the report",
        source: std::io::Error::from_raw_os_error(libc::EAGAIN),
    };
    assert_eq!(scarce_in(&read), None);
    let setup = SandboxError::Setup {
        step: "mount".into(),
        errno: libc::ENFILE,
        detail: String::new(),
    };
    assert_eq!(scarce_in(&setup), Some(Scarce::Descriptors));
    let eacces = std::io::Error::from_raw_os_error(libc::EACCES);
    assert_eq!(scarce_in(&eacces), None);
}

#[test]
fn kernel_refusals_are_found_inside_a_session_error() {
    let clone = SessionError::Sandbox(SandboxError::Os {
        what: "clone the sandbox",
        source: std::io::Error::from_raw_os_error(libc::EAGAIN),
    });
    assert_eq!(scarce_in(&clone), Some(Scarce::Processes));
    let setup = SessionError::Sandbox(SandboxError::Setup {
        step: "open the workspace".into(),
        errno: libc::EMFILE,
        detail: String::new(),
    });
    assert_eq!(scarce_in(&setup), Some(Scarce::Descriptors));
    let refused = refused_by_kernel(&setup).unwrap();
    assert_eq!(
        (refused.category, refused.status.as_u16()),
        ("capacity", 503)
    );
    assert!(!refused.message.contains("task"), "{}", refused.message);
    let descriptor = SessionError::Descriptor(std::io::Error::from_raw_os_error(libc::EMFILE));
    assert_eq!(scarce_in(&descriptor), Some(Scarce::Descriptors));
}

#[test]
fn processes_and_memory_near_their_end_refuse_naming_them() {
    assert!(processes_verdict(100, 1000, 1).is_ok());
    let refused = processes_verdict(990, 1000, 1).unwrap_err();
    assert_eq!(
        (refused.category, refused.status.as_u16()),
        ("capacity", 503)
    );
    assert!(
        refused.message.contains("no processes left")
            && refused
                .message
                .contains("990 in use of the pids limit of 1000"),
        "{}",
        refused.message
    );
    // A 24 GiB machine keeps 1.2 GiB free (and two sessions' estimate); an 8 GiB one 512 MiB.
    let total = 24u64 << 30;
    assert_eq!(memory_floor(total), total / 20 + 2 * SESSION_MEMORY_BYTES);
    assert_eq!(
        memory_floor(8 << 30),
        (512 << 20) + 2 * SESSION_MEMORY_BYTES
    );
    assert!(memory_verdict(2 << 30, total).is_ok());
    assert!(memory_verdict(1 << 30, total).is_err());
    let refused = memory_verdict(SESSION_MEMORY_BYTES, total).unwrap_err();
    assert!(
        refused.message.starts_with("no memory left"),
        "{}",
        refused.message
    );
    assert_eq!(refused.retry_after, Some(5));
}

#[test]
fn sandboxes_built_ahead_are_cut_to_an_eighth_of_the_descriptors_and_counted_as_used() {
    // A roomy limit: all 8 asked for; each holds 2 + 8 * 9 = 74 descriptors.
    let roomy = machine(1 << 20, 100);
    assert_eq!(warm_sandboxes(&roomy, &NINE, 4096, 8), 8);
    let less = roomy.less_warm(8, &NINE);
    assert_eq!(less.fds_open, 100 + 8 * 74);
    // 200 descriptors (the capacity test's limit): (200 - 13 - 93) / 8 < 74: none.
    let tight = machine(200, 13);
    assert_eq!(warm_sandboxes(&tight, &NINE, 8, 8), 0);
    assert_eq!(tight.less_warm(0, &NINE), tight);
    // Processes bound it too: 1,000 left, an eighth is 125, one of each holds 2 + 8 = 10.
    let pids = Machine {
        processes_left: Some(1000),
        ..roomy
    };
    assert_eq!(warm_sandboxes(&pids, &NINE, 4096, 64), 12);
}

#[test]
fn a_full_state_root_and_a_spent_cgroup_bound_refuse_with_capacity() {
    // A 1 MiB tmpfs is below the floor a create needs.
    let small = tempfile::tempdir().unwrap();
    let mounted = nix::mount::mount(
        Some("tmpfs"),
        small.path(),
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        Some("size=1m"),
    );
    match mounted {
        Ok(()) => {
            let verdict = disk_verdict(small.path());
            let _ = nix::mount::umount(small.path());
            let refused = verdict.unwrap_err();
            assert_eq!(refused.category, "capacity");
            assert!(
                refused
                    .message
                    .starts_with("no disk left in the state root"),
                "{}",
                refused.message
            );
        }
        Err(e) => {
            eprintln!("skipped: the full state root needs a tmpfs of its own (root): {e}");
            assert_ne!(std::env::var("ENVCRAFT_TEST_REQUIRE").as_deref(), Ok("all"));
        }
    }
    // A cgroup v2 parent as its files say: full at its max.descendants, room below it.
    let parent = tempfile::tempdir().unwrap();
    std::fs::write(parent.path().join("cgroup.max.descendants"), "10\n").unwrap();
    std::fs::write(
        parent.path().join("cgroup.stat"),
        "nr_descendants 9\nnr_dying_descendants 0\n",
    )
    .unwrap();
    let refused = cgroups_verdict(parent.path()).unwrap_err();
    assert!(
        refused.message.starts_with("no cgroups left"),
        "{}",
        refused.message
    );
    std::fs::write(parent.path().join("cgroup.stat"), "nr_descendants 8\n").unwrap();
    assert!(cgroups_verdict(parent.path()).is_ok());
    std::fs::write(parent.path().join("cgroup.max.descendants"), "max\n").unwrap();
    assert!(cgroups_verdict(parent.path()).is_ok());
    let enospc = std::io::Error::from_raw_os_error(libc::ENOSPC);
    assert_eq!(scarce_in(&enospc), Some(Scarce::Disk));
}
