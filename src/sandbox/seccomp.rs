//! The seccomp program of the command process, built from a [`SeccompPlan`].
//!
//! One BPF program made of two parts, run in this order:
//! 1. the *guard*: kills any process that
//!    enters with another architecture (i386 via `int 0x80`), refuses every x32 system call
//!    (numbers with bit 30 set: they would otherwise bypass a filter keyed by x86-64 numbers),
//!    and makes `clone3` fail with ENOSYS, so that libc falls back to `clone`, whose flags the
//!    deny list can inspect (`clone3` passes them in memory, out of a filter's reach);
//! 2. the *deny list*: EPERM for the calls that let a process leave or attack the sandbox or
//!    the kernel, and for the dangerous arguments of `clone`, `socket` and `ioctl`. It is a
//!    binary search over the system call numbers it names (a leaf per number: refuse, or look
//!    at the arguments), so that any call is judged after a handful of comparisons.
//!
//! What the guard lets through falls through to the deny list. One program rather than two
//! filters, and a search rather than a chain of comparisons: the kernel runs every installed
//! filter on every system call that its per-number cache cannot decide, and at installation
//! validates, compiles and runs the program once for every system call number to build that
//! cache. The chain seccompiler built (383 instructions) made that installation cost ~0.3 ms.
//! The unit tests check the program's verdicts against seccompiler's rendering of the same
//! rules, for every system call number.

use super::plan::SeccompPlan;

/// Why the program could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("the seccomp program needs a jump of {0} instructions; BPF allows 255")]
    JumpTooFar(usize),
    #[error("cannot install the seccomp program")]
    Install(#[source] std::io::Error),
}

/// System calls denied outright, by name (for documentation and tests) and number.
pub const DENIED: &[(&str, i64)] = &[
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("open_tree", libc::SYS_open_tree),
    ("move_mount", libc::SYS_move_mount),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("mount_setattr", libc::SYS_mount_setattr),
    // The mount API's later calls (6.8 and 6.15): numbers the libc crate may not name yet.
    ("statmount", 457),
    ("listmount", 458),
    ("open_tree_attr", 467),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("syslog", libc::SYS_syslog),
    ("acct", libc::SYS_acct),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("adjtimex", libc::SYS_adjtimex),
    ("iopl", libc::SYS_iopl),
    ("ioperm", libc::SYS_ioperm),
    ("quotactl", libc::SYS_quotactl),
    ("lookup_dcookie", libc::SYS_lookup_dcookie),
    ("vhangup", libc::SYS_vhangup),
    ("personality", libc::SYS_personality),
    ("fanotify_init", libc::SYS_fanotify_init),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("kcmp", libc::SYS_kcmp),
    ("setdomainname", libc::SYS_setdomainname),
    ("sethostname", libc::SYS_sethostname),
];

/// `clone` flags that create namespaces (or share a parent's files in a way that escapes).
pub const CLONE_NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
    0x0000_0080, // CLONE_NEWTIME
];

/// Socket families never needed inside: VM sockets, raw packets, kernel crypto, key management.
const DENIED_FAMILIES: &[i32] = &[
    libc::AF_VSOCK,
    libc::AF_PACKET,
    libc::AF_KEY,
    libc::AF_ALG,
    libc::AF_BLUETOOTH,
];

/// ioctls that inject input into a terminal.
const DENIED_IOCTLS: &[u64] = &[libc::TIOCSTI, libc::TIOCLINUX];

const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K
/// Offsets in `struct seccomp_data`.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// The low 32 bits of argument `i` (little-endian).
const fn off_arg_low(i: u32) -> u32 {
    16 + 8 * i
}

const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const fn errno(e: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (e as u32 & libc::SECCOMP_RET_DATA)
}
const EPERM: u32 = errno(libc::EPERM);

fn ins(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

fn jump(len: usize) -> Result<u8, SeccompError> {
    u8::try_from(len).map_err(|_| SeccompError::JumpTooFar(len))
}

/// What the deny list does with one system call number it names.
#[derive(Debug, Clone)]
enum Verdict {
    /// EPERM, whatever the arguments.
    Refuse,
    /// EPERM when the low 32 bits of argument `arg` have any bit of `mask`.
    RefuseAnyBit { arg: u32, mask: u32 },
    /// EPERM when the low 32 bits of argument `arg` equal one of `values`.
    RefuseValues { arg: u32, values: Vec<u32> },
}

impl Verdict {
    /// The leaf's instructions; every path through them returns.
    fn code(&self) -> Result<Vec<libc::sock_filter>, SeccompError> {
        Ok(match self {
            Verdict::Refuse => vec![ins(RET_K, 0, 0, EPERM)],
            Verdict::RefuseAnyBit { arg, mask } => vec![
                ins(LD_W_ABS, 0, 0, off_arg_low(*arg)),
                ins(JSET_K, 0, 1, *mask),
                ins(RET_K, 0, 0, EPERM),
                ins(RET_K, 0, 0, ALLOW),
            ],
            Verdict::RefuseValues { arg, values } => {
                let mut code = vec![ins(LD_W_ABS, 0, 0, off_arg_low(*arg))];
                // Each match jumps over the remaining comparisons and the `allow`.
                for (i, value) in values.iter().enumerate() {
                    code.push(ins(JEQ_K, jump(values.len() - i)?, 0, *value));
                }
                code.push(ins(RET_K, 0, 0, ALLOW));
                code.push(ins(RET_K, 0, 0, EPERM));
                code
            }
        })
    }
}

/// The rules of the deny list for this plan: a verdict per system call number, by number.
fn deny_rules(plan: &SeccompPlan) -> Vec<(u32, Verdict)> {
    let mut rules: Vec<(u32, Verdict)> = DENIED
        .iter()
        .map(|(_, nr)| (*nr as u32, Verdict::Refuse))
        .collect();
    // Every namespace flag is in the low 32 bits of clone's first argument.
    let mask = CLONE_NAMESPACE_FLAGS
        .iter()
        .fold(0u32, |m, f| m | *f as u32);
    rules.push((
        libc::SYS_clone as u32,
        Verdict::RefuseAnyBit { arg: 0, mask },
    ));
    let mut families: Vec<i32> = DENIED_FAMILIES.to_vec();
    if plan.deny_netlink {
        families.push(libc::AF_NETLINK);
    }
    if plan.deny_inet {
        families.extend([libc::AF_INET, libc::AF_INET6]);
    }
    if plan.deny_unix {
        families.push(libc::AF_UNIX);
    }
    rules.push((
        libc::SYS_socket as u32,
        Verdict::RefuseValues {
            arg: 0,
            values: families.iter().map(|f| *f as u32).collect(),
        },
    ));
    rules.push((
        libc::SYS_ioctl as u32,
        Verdict::RefuseValues {
            arg: 1,
            values: DENIED_IOCTLS.iter().map(|c| *c as u32).collect(),
        },
    ));
    rules.sort_by_key(|(nr, _)| *nr);
    rules
}

/// Binary search over `rules` (sorted by number) with the system call number in the
/// accumulator: each leaf returns its verdict; a number not named is allowed.
fn search(rules: &[(u32, Verdict)]) -> Result<Vec<libc::sock_filter>, SeccompError> {
    if rules.len() <= 3 {
        let mut code = Vec::new();
        for (nr, verdict) in rules {
            let leaf = verdict.code()?;
            code.push(ins(JEQ_K, 0, jump(leaf.len())?, *nr));
            code.extend(leaf);
        }
        code.push(ins(RET_K, 0, 0, ALLOW));
        return Ok(code);
    }
    let (low, high) = rules.split_at(rules.len() / 2);
    let low = search(low)?;
    let high_code = search(high)?;
    let mut code = vec![ins(JGE_K, jump(low.len())?, 0, high[0].0)];
    code.extend(low);
    code.extend(high_code);
    Ok(code)
}

/// The deny list for this plan, for x86-64 system calls (the guard has checked the
/// architecture and loaded the number).
fn deny_list(plan: &SeccompPlan) -> Result<Vec<libc::sock_filter>, SeccompError> {
    let mut code = vec![ins(LD_W_ABS, 0, 0, OFF_NR)];
    code.extend(search(&deny_rules(plan))?);
    Ok(code)
}

/// The architecture / x32 / clone3 guard (see the module documentation), ending in `allow`.
pub fn guard() -> Vec<libc::sock_filter> {
    vec![
        ins(LD_W_ABS, 0, 0, OFF_ARCH),
        ins(JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        ins(RET_K, 0, 0, libc::SECCOMP_RET_KILL_PROCESS),
        ins(LD_W_ABS, 0, 0, OFF_NR),
        ins(JGE_K, 0, 1, X32_SYSCALL_BIT),
        ins(RET_K, 0, 0, EPERM),
        ins(JEQ_K, 0, 1, libc::SYS_clone3 as u32),
        ins(RET_K, 0, 0, errno(libc::ENOSYS)),
        ins(RET_K, 0, 0, ALLOW),
    ]
}

/// The guard and the deny list as one program, compiled (in envcraft, before the clone: the
/// sandbox only installs it).
pub struct Program {
    instructions: Vec<libc::sock_filter>,
}

impl Program {
    pub fn compile(plan: &SeccompPlan) -> Result<Program, SeccompError> {
        let mut instructions = guard();
        // The guard's closing `allow` gives way to the deny list: every jump of the guard that
        // led there now leads to the deny list's first instruction.
        instructions.pop();
        instructions.extend(deny_list(plan)?);
        Ok(Program { instructions })
    }

    /// Install the program on the calling thread; `no_new_privs` must already be set. Scope:
    /// the process that runs commands or forks them (the sandbox's init, or a command
    /// without namespaces), after every step the program would refuse.
    pub fn apply_to_current_thread(&self) -> Result<(), SeccompError> {
        crate::sys::install_seccomp_program(&self.instructions).map_err(SeccompError::Install)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn every_plan() -> Vec<SeccompPlan> {
        let mut plans = Vec::new();
        for bits in 0..8u8 {
            plans.push(SeccompPlan {
                deny_netlink: bits & 1 != 0,
                deny_inet: bits & 2 != 0,
                deny_unix: bits & 4 != 0,
            });
        }
        plans
    }

    #[test]
    fn deny_list_compiles_for_every_plan() {
        for plan in every_plan() {
            let prog = deny_list(&plan).unwrap();
            assert!(prog.len() > DENIED.len());
        }
    }

    #[test]
    fn deny_list_covers_what_the_design_requires() {
        let names: Vec<&str> = DENIED.iter().map(|(n, _)| *n).collect();
        for required in [
            "ptrace",
            "process_vm_readv",
            "process_vm_writev",
            "io_uring_setup",
            "mount",
            "umount2",
            "pivot_root",
            "unshare",
            "setns",
            "keyctl",
            "bpf",
            "perf_event_open",
            "init_module",
            "finit_module",
            "kexec_load",
            "open_by_handle_at",
            "open_tree_attr",
            "listmount",
            "statmount",
        ] {
            assert!(names.contains(&required), "{required} missing");
        }
    }

    #[test]
    fn netlink_is_denied_only_when_the_plan_says_so() {
        let with = deny_list(&SeccompPlan {
            deny_netlink: true,
            ..SeccompPlan::default()
        })
        .unwrap();
        let without = deny_list(&SeccompPlan::default()).unwrap();
        assert!(with.len() > without.len());
    }

    /// Run a classic BPF program on `struct seccomp_data` as the kernel would (the subset
    /// seccompiler and this module emit; anything else fails the test).
    fn run(program: &[libc::sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut data = vec![nr, arch, 0, 0];
        for a in args {
            data.extend([a as u32, (a >> 32) as u32]);
        }
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let i = program[pc];
            pc += 1;
            let jump = |taken: bool| if taken { i.jt as usize } else { i.jf as usize };
            match i.code {
                0x20 => acc = data[i.k as usize / 4], // ld [k]
                0x54 => acc &= i.k,                   // and #k
                0x05 => pc += i.k as usize,           // ja
                0x15 => pc += jump(acc == i.k),       // jeq #k
                0x25 => pc += jump(acc > i.k),        // jgt #k
                0x35 => pc += jump(acc >= i.k),       // jge #k
                0x45 => pc += jump(acc & i.k != 0),   // jset #k
                0x06 => return i.k,                   // ret #k
                code => panic!("opcode {code:#x} not interpreted"),
            }
        }
    }

    #[test]
    fn the_one_program_gives_the_verdicts_of_guard_then_deny_list() {
        let plan = SeccompPlan {
            deny_netlink: true,
            ..SeccompPlan::default()
        };
        let program = Program::compile(&plan).unwrap().instructions;
        let x86 = AUDIT_ARCH_X86_64;
        let nr = |n: i64| n as u32;
        let eperm = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
        let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
        let allow = libc::SECCOMP_RET_ALLOW;
        let none = [0u64; 6];
        let cases: &[(u32, u32, [u64; 6], u32)] = &[
            // The guard.
            (
                0x4000_0003,
                nr(libc::SYS_read),
                none,
                libc::SECCOMP_RET_KILL_PROCESS,
            ),
            (x86, X32_SYSCALL_BIT | nr(libc::SYS_read), none, eperm),
            (x86, X32_SYSCALL_BIT | nr(libc::SYS_ptrace), none, eperm),
            (x86, nr(libc::SYS_clone3), none, enosys),
            // The deny list behind it.
            (x86, nr(libc::SYS_read), none, allow),
            (x86, nr(libc::SYS_execve), none, allow),
            (x86, nr(libc::SYS_ptrace), none, eperm),
            (x86, nr(libc::SYS_mount), none, eperm),
            (x86, nr(libc::SYS_sethostname), none, eperm),
            (
                x86,
                nr(libc::SYS_clone),
                [libc::SIGCHLD as u64, 0, 0, 0, 0, 0],
                allow,
            ),
            (
                x86,
                nr(libc::SYS_clone),
                [(libc::CLONE_NEWUSER | libc::SIGCHLD) as u64, 0, 0, 0, 0, 0],
                eperm,
            ),
            (
                x86,
                nr(libc::SYS_socket),
                [libc::AF_UNIX as u64, 1, 0, 0, 0, 0],
                allow,
            ),
            (
                x86,
                nr(libc::SYS_socket),
                [libc::AF_INET as u64, 1, 0, 0, 0, 0],
                allow,
            ),
            (
                x86,
                nr(libc::SYS_socket),
                [libc::AF_PACKET as u64, 3, 0, 0, 0, 0],
                eperm,
            ),
            (
                x86,
                nr(libc::SYS_socket),
                [libc::AF_NETLINK as u64, 3, 0, 0, 0, 0],
                eperm,
            ),
            (
                x86,
                nr(libc::SYS_ioctl),
                [1, libc::TCGETS, 0, 0, 0, 0],
                allow,
            ),
            (
                x86,
                nr(libc::SYS_ioctl),
                [1, libc::TIOCSTI, 0, 0, 0, 0],
                eperm,
            ),
        ];
        for (arch, nr, args, verdict) in cases {
            assert_eq!(
                run(&program, *arch, *nr, *args),
                *verdict,
                "arch {arch:#x} nr {nr:#x} args {args:?}"
            );
        }
        // Every system call the deny list names is refused, whatever its arguments.
        for (name, nr) in DENIED {
            assert_eq!(run(&program, x86, *nr as u32, none), eperm, "{name}");
        }
    }

    #[test]
    fn a_plan_without_unix_sockets_refuses_socket_but_not_socketpair() {
        let plan = SeccompPlan {
            deny_unix: true,
            ..SeccompPlan::default()
        };
        let program = Program::compile(&plan).unwrap().instructions;
        let x86 = AUDIT_ARCH_X86_64;
        let eperm = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
        let unix = [libc::AF_UNIX as u64, libc::SOCK_STREAM as u64, 0, 0, 0, 0];
        let socket = libc::SYS_socket as u32;
        assert_eq!(run(&program, x86, socket, unix), eperm);
        let pair = libc::SYS_socketpair as u32;
        assert_eq!(run(&program, x86, pair, unix), libc::SECCOMP_RET_ALLOW);
        let allowing = Program::compile(&SeccompPlan::default())
            .unwrap()
            .instructions;
        assert_eq!(run(&allowing, x86, socket, unix), libc::SECCOMP_RET_ALLOW);
    }

    /// The same rules rendered by seccompiler (a linear chain): the reference the search is
    /// checked against.
    fn reference_deny_list(plan: &SeccompPlan) -> Vec<libc::sock_filter> {
        use seccompiler::{
            SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
            SeccompRule, TargetArch,
        };
        let cond = |arg, len, op, value| SeccompCondition::new(arg, len, op, value).unwrap();
        let mut rules = std::collections::BTreeMap::new();
        for (_, nr) in DENIED {
            rules.insert(*nr, Vec::new());
        }
        let clone = CLONE_NAMESPACE_FLAGS
            .iter()
            .map(|f| {
                let c = cond(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(*f), *f);
                SeccompRule::new(vec![c]).unwrap()
            })
            .collect();
        rules.insert(libc::SYS_clone, clone);
        let mut families: Vec<i32> = DENIED_FAMILIES.to_vec();
        if plan.deny_netlink {
            families.push(libc::AF_NETLINK);
        }
        if plan.deny_inet {
            families.extend([libc::AF_INET, libc::AF_INET6]);
        }
        if plan.deny_unix {
            families.push(libc::AF_UNIX);
        }
        let eq = |arg, value| {
            let c = cond(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value);
            SeccompRule::new(vec![c]).unwrap()
        };
        let socket = families.iter().map(|f| eq(0, *f as u64)).collect();
        rules.insert(libc::SYS_socket, socket);
        let ioctl = DENIED_IOCTLS.iter().map(|c| eq(1, *c)).collect();
        rules.insert(libc::SYS_ioctl, ioctl);
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM as u32),
            TargetArch::x86_64,
        )
        .unwrap();
        let program: seccompiler::BpfProgram = filter.try_into().unwrap();
        program
            .into_iter()
            .map(|i| ins(i.code, i.jt, i.jf, i.k))
            .collect()
    }

    /// The guard then the reference deny list as two filters, as the kernel combines them
    /// (the most restrictive verdict wins).
    fn reference_verdict(
        plan_deny: &[libc::sock_filter],
        arch: u32,
        nr: u32,
        args: [u64; 6],
    ) -> u32 {
        let guard = run(&guard(), arch, nr, args);
        let deny = run(plan_deny, arch, nr, args);
        let rank = |v: u32| match v & libc::SECCOMP_RET_ACTION_FULL {
            libc::SECCOMP_RET_KILL_PROCESS => 0,
            libc::SECCOMP_RET_ERRNO => 1,
            _ => 2,
        };
        if rank(guard) <= rank(deny) {
            guard
        } else {
            deny
        }
    }

    #[test]
    fn the_search_gives_the_verdicts_of_seccompilers_chain_for_every_call() {
        let mut args: Vec<[u64; 6]> = vec![[0; 6], [u64::MAX; 6]];
        let mut values: Vec<u64> = vec![libc::SIGCHLD as u64, libc::TCGETS, libc::FIONREAD];
        values.extend(CLONE_NAMESPACE_FLAGS);
        values.extend((0..48).map(|f: u64| f));
        values.extend(DENIED_IOCTLS);
        for v in values {
            for high in [0u64, 1 << 32, 0xffff_ffff << 32] {
                for arg in 0..2 {
                    let mut a = [0u64; 6];
                    a[arg] = v | high;
                    args.push(a);
                }
            }
        }
        // Each flag both ways (all eight plans would double the test's time for nothing more).
        let plans = every_plan();
        for plan in [plans[0], plans[3], plans[4], plans[7]] {
            {
                let program = Program::compile(&plan).unwrap().instructions;
                let reference = reference_deny_list(&plan);
                for arch in [AUDIT_ARCH_X86_64, 0x4000_0003] {
                    for nr in (0..600).chain((0..600).map(|n| n | X32_SYSCALL_BIT)) {
                        for a in &args {
                            assert_eq!(
                                run(&program, arch, nr, *a),
                                reference_verdict(&reference, arch, nr, *a),
                                "plan {plan:?} arch {arch:#x} nr {nr:#x} args {a:?}"
                            );
                        }
                    }
                }
                assert!(program.len() * 2 < reference.len(), "{}", program.len());
                // Every jump stays inside the program, and it ends in a return.
                for (i, ins) in program.iter().enumerate() {
                    let far = i + 1 + ins.jt.max(ins.jf) as usize;
                    assert!(far < program.len() || ins.code == RET_K, "at {i}");
                }
                assert_eq!(program.last().unwrap().code, RET_K);
            }
        }
    }

    #[test]
    fn guard_checks_the_architecture_first_and_ends_in_allow() {
        let g = guard();
        assert_eq!(g[0].k, 4);
        assert_eq!(g[1].k, AUDIT_ARCH_X86_64);
        assert_eq!(g[2].k, libc::SECCOMP_RET_KILL_PROCESS);
        assert_eq!(g.last().unwrap().k, libc::SECCOMP_RET_ALLOW);
        // Every jump stays inside the program.
        for (i, ins) in g.iter().enumerate() {
            assert!(i + 1 + (ins.jt.max(ins.jf) as usize) < g.len() || ins.code == 0x06);
        }
    }
}
