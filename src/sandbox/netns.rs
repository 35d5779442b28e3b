//! The sandbox's network namespace, made while the init builds the root.
//!
//! A new network namespace is the dearest part of a sandbox's start on these machines: a
//! `clone` into the user, mount, PID, IPC, UTS and cgroup namespaces takes about 0.1 ms, and
//! 0.55-0.65 ms with a network namespace as well (the kernel registers a loopback device, its
//! sysctl tables and every protocol's per-namespace state). Made by the clone, it delayed
//! everything after it. So the init is cloned without it, and at once starts a helper
//! (`clone(CLONE_FILES)` onto a stack of its own: the init's descriptors, and a copy-on-write
//! copy of its memory) that unshares a new network namespace, brings its loopback up and leaves
//! a descriptor of it, while the init mounts the root on the other core. The init joins it
//! (`setns`) before anything runs in the sandbox and before it restricts itself. The namespace
//! is the one a clone would have made: owned by the sandbox's user namespace, loopback only.
//!
//! The helper makes raw system calls, keeps its data on its own stack, and reports through
//! atomics in a shared mapping that the init reads once it has reaped it.
//!
//! Why a copy of the memory and not the memory itself (`CLONE_VM`, as this helper once had):
//! the kernel marks a process that ever shared its memory with another process, other than
//! through `vfork`, for good (`MMF_MULTIPROCESS`), and every later write of that process's
//! `oom_score_adj` then walks every process on the machine under one global mutex, to keep the
//! sharers' scores alike. The init writes its score twice for each command it starts (see
//! `serve::OomScore`): every `exec` call of every session took that walk, one at a time, so
//! `exec` calls grew dearer with every session the machine held (bench/README.md).

use std::ffi::c_void;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

use crate::sys::ChildStack;

/// The helper's steps, as reported when one fails.
const STEPS: [&str; 5] = [
    "create the network namespace",
    "open a socket in the network namespace",
    "read loopback's flags",
    "bring loopback up",
    "take a descriptor of the network namespace",
];

/// The helper's stack: a few frames of raw system calls, with room to spare.
const STACK_BYTES: usize = 64 * 1024;

/// How the helper is cloned: the init's descriptor table (the namespace's descriptor is left in
/// it), a copy of its memory (not `CLONE_VM`: see the module's text), reaped as a child.
const HELPER_CLONE_FLAGS: libc::c_int = libc::CLONE_FILES | libc::SIGCHLD;

/// What the helper reports: the namespace's descriptor (-1 until it has one: a helper killed
/// before reporting leaves no descriptor to take), or the failed step (1-based) and its errno.
struct Shared {
    netns: AtomicI32,
    failed: AtomicUsize,
    errno: AtomicI32,
}

/// A network namespace being made by the helper; [`Making::join`] moves the calling process
/// into it.
pub struct Making {
    pid: libc::pid_t,
    /// Dropped after `Drop::drop` has reaped the helper.
    _stack: ChildStack,
    shared: crate::sys::SharedValue<Shared>,
    reaped: bool,
}

/// Why the sandbox has no network namespace: the step and its errno.
#[derive(Debug, PartialEq, Eq)]
pub struct Failure {
    pub step: &'static str,
    pub errno: i32,
}

impl Making {
    /// Start the helper. Needs CAP_SYS_ADMIN and CAP_NET_ADMIN in the calling process's user
    /// namespace (the sandbox's init has every capability in its own from the clone on).
    pub fn start() -> io::Result<Making> {
        let stack = ChildStack::new(STACK_BYTES)?;
        let shared = crate::sys::SharedValue::new(Shared {
            netns: AtomicI32::new(-1),
            failed: AtomicUsize::new(0),
            errno: AtomicI32::new(0),
        })?;
        // SAFETY: `helper` writes only `shared` (atomics in a shared mapping, alive until the
        // helper is reaped: see `wait`) and its own copy of the stack, and makes raw system
        // calls; everything else it has is a copy of this process's memory.
        let pid = unsafe {
            libc::clone(
                helper,
                stack.top(),
                HELPER_CLONE_FLAGS,
                &*shared as *const Shared as *mut c_void,
            )
        };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Making {
            pid,
            _stack: stack,
            shared,
            reaped: false,
        })
    }

    /// Wait for the helper, then move this process into the namespace it made.
    pub fn join(mut self) -> Result<(), Failure> {
        self.wait();
        let failure = |step, errno| Failure { step, errno };
        match self.shared.failed.load(Ordering::SeqCst) {
            0 => {}
            n => {
                return Err(failure(
                    STEPS
                        .get(n - 1)
                        .copied()
                        .unwrap_or("make the network namespace"),
                    self.shared.errno.load(Ordering::SeqCst),
                ));
            }
        }
        let fd = self.shared.netns.swap(-1, Ordering::SeqCst);
        if fd < 0 {
            return Err(failure("make the network namespace", libc::ECHILD));
        }
        // SAFETY: the helper opened this descriptor in the table we share and exited: it is
        // ours alone now.
        let netns = unsafe { OwnedFd::from_raw_fd(fd) };
        nix::sched::setns(&netns, nix::sched::CloneFlags::CLONE_NEWNET)
            .map_err(|e| failure("join the network namespace", e as i32))
    }

    /// Reap the helper (it ends on its own in well under a millisecond).
    fn wait(&mut self) {
        while !self.reaped {
            match waitpid(Pid::from_raw(self.pid), Some(WaitPidFlag::__WALL)) {
                Err(nix::errno::Errno::EINTR) => continue,
                _ => self.reaped = true,
            }
        }
    }
}

impl Drop for Making {
    /// Reap the helper; a namespace it made and nobody joined is closed (and so goes away).
    fn drop(&mut self) {
        // The helper uses its stack and `shared` until it exits; both go after this.
        self.wait();
        let fd = self.shared.netns.swap(-1, Ordering::SeqCst);
        if fd >= 0 {
            // SAFETY: the helper opened it in the table we share and exited; `join` did not
            // take it (it swaps -1 in), so it is ours alone.
            drop(unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }
}

/// The helper, on its own stack, in a copy of the init's memory, sharing its descriptors.
extern "C" fn helper(arg: *mut c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Shared` of `Making::start`, alive until this process is reaped.
    let shared = unsafe { &*(arg as *const Shared) };
    let fail = |step: usize, ret: isize| -> libc::c_int {
        shared.errno.store((-ret) as i32, Ordering::SeqCst);
        shared.failed.store(step + 1, Ordering::SeqCst);
        1
    };
    let ret = raw::syscall3(libc::SYS_unshare, libc::CLONE_NEWNET as usize, 0, 0);
    if ret < 0 {
        return fail(0, ret);
    }
    let sock = raw::syscall3(
        libc::SYS_socket,
        libc::AF_INET as usize,
        (libc::SOCK_DGRAM | libc::SOCK_CLOEXEC) as usize,
        0,
    );
    if sock < 0 {
        return fail(1, sock);
    }
    let close = || raw::syscall3(libc::SYS_close, sock as usize, 0, 0);
    let ioctl = |request: libc::c_ulong, arg: usize| {
        raw::syscall3(libc::SYS_ioctl, sock as usize, request as usize, arg)
    };
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    let ret = ioctl(libc::SIOCGIFFLAGS, std::ptr::addr_of_mut!(req) as usize);
    if ret < 0 {
        close();
        return fail(2, ret);
    }
    // SAFETY: the flags member of the union is the one SIOCGIFFLAGS filled.
    unsafe {
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    }
    let ret = ioctl(libc::SIOCSIFFLAGS, std::ptr::addr_of!(req) as usize);
    if ret < 0 {
        close();
        return fail(3, ret);
    }
    // A descriptor of the socket's network namespace, close-on-exec.
    let netns = ioctl(SIOCGSKNS, 0);
    close();
    if netns < 0 {
        return fail(4, netns);
    }
    shared.netns.store(netns as i32, Ordering::SeqCst);
    0
}

/// `SIOCGSKNS` (Linux 4.9): a descriptor of a socket's network namespace.
const SIOCGSKNS: libc::c_ulong = 0x894C;

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("envcraft's sandbox runs on x86_64 and aarch64 Linux (raw system calls here)");

/// System calls without the C library: the result, or `-errno`; `errno` is not touched.
mod raw {
    #[cfg(target_arch = "x86_64")]
    pub fn syscall3(number: libc::c_long, a: usize, b: usize, c: usize) -> isize {
        let ret: isize;
        // SAFETY: the `syscall` instruction with the kernel's calling convention; it clobbers
        // rcx and r11 only. Each caller passes arguments valid for its call.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") number as isize => ret,
                in("rdi") a,
                in("rsi") b,
                in("rdx") c,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret
    }

    #[cfg(target_arch = "aarch64")]
    pub fn syscall3(number: libc::c_long, a: usize, b: usize, c: usize) -> isize {
        let ret: isize;
        // SAFETY: `svc 0` with the kernel's calling convention (number in x8, arguments and
        // result in x0-x2). Each caller passes arguments valid for its call.
        unsafe {
            std::arch::asm!(
                "svc 0",
                in("x8") number,
                inlateout("x0") a as isize => ret,
                in("x1") b,
                in("x2") c,
                options(nostack),
            );
        }
        ret
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// The helper makes a network namespace with loopback up, and `join` moves the calling
    /// thread into it (a network namespace is per thread: this test's own thread, which ends
    /// with the test, is the only one moved). Needs CAP_SYS_ADMIN, as root has.
    #[test]
    fn the_helper_makes_a_namespace_with_loopback_up_that_the_caller_joins() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: making a network namespace here needs root");
            assert_ne!(
                std::env::var("ENVCRAFT_TEST_REQUIRE").as_deref(),
                Ok("all"),
                "root is required (ENVCRAFT_TEST_REQUIRE=all)"
            );
            return;
        }
        let process = std::fs::read_link("/proc/self/ns/net").unwrap();
        Making::start().unwrap().join().unwrap();
        let thread = std::fs::read_link("/proc/thread-self/ns/net").unwrap();
        assert_ne!(process, thread);
        // 127.0.0.1 exists only once loopback is up.
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .send_to(b"ping", socket.local_addr().unwrap())
            .unwrap();
        let mut buf = [0u8; 4];
        socket
            .set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        assert_eq!(socket.recv(&mut buf).unwrap(), 4);
        assert_eq!(&buf, b"ping");
    }

    /// The helper writes a copy of the init's memory, not the memory itself: its stack, which
    /// it used, is still untouched in the process that started it (with `CLONE_VM` it held the
    /// helper's frames). The kernel then never marks the init as sharing its memory, and its
    /// `oom_score_adj` writes (two per command) stay off the walk of every process.
    #[test]
    fn the_helper_runs_in_a_copy_of_the_callers_memory() {
        let mut making = Making::start().unwrap();
        making.wait();
        // The C library's `clone` leaves the function and its argument at the top, in the caller.
        assert!(
            making._stack.is_untouched_below(64),
            "the helper wrote the caller's memory"
        );
        // It ran and reported through the shared mapping: a namespace, or the step it failed.
        assert!(
            making.shared.netns.load(Ordering::SeqCst) >= 0
                || making.shared.failed.load(Ordering::SeqCst) > 0
        );
    }

    #[test]
    fn raw_system_calls_return_minus_errno_and_leave_errno_alone() {
        // SAFETY: errno is this thread's; set to a marker the raw call must not change.
        unsafe { *libc::__errno_location() = 12345 };
        assert_eq!(
            raw::syscall3(libc::SYS_close, usize::MAX >> 1, 0, 0),
            -(libc::EBADF as isize)
        );
        // SAFETY: as above.
        assert_eq!(unsafe { *libc::__errno_location() }, 12345);
        assert_eq!(
            raw::syscall3(libc::SYS_getpid, 0, 0, 0),
            std::process::id() as isize
        );
    }
}
