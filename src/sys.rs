//! One-syscall wrappers for what `nix`, `landlock` and `seccompiler` do not cover.
//!
//! Nearly all of the crate's `unsafe` is here; the rest is where it cannot be a wrapper: the raw
//! children of `sandbox::spawn` and `sandbox::netns` (code that runs between `clone` and
//! `execve` on a stack of its own), one `setrlimit` in `sandbox::child`, and the binary's C entry
//! point in `main.rs`. Each function makes one system call (or one tight group of them) and
//! returns `io::Result`; each `unsafe` block says why it is sound.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::CStr;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Set while a thread clones a process: allocations wait until it is done.
static CLONING: AtomicBool = AtomicBool::new(false);
/// Allocator calls under way (through [`CloneSafeAlloc`]).
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, paused around [`clone_process`]: the binary's global allocator.
///
/// A clone copies only the calling thread; had another thread been inside `malloc` at that
/// moment, the child would inherit its arena lock held forever and hang at its first
/// allocation (as the server did, cloning sandboxes while other threads worked). Every
/// allocation enters a gate the cloning thread closes, and the clone waits until none is in
/// flight: the child starts with every allocator lock free.
pub struct CloneSafeAlloc;

impl CloneSafeAlloc {
    #[inline]
    fn enter() {
        loop {
            let mut spins = 0u32;
            while CLONING.load(Ordering::SeqCst) {
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
            if !CLONING.load(Ordering::SeqCst) {
                return;
            }
            IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
        }
    }

    #[inline]
    fn leave() {
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }
}

// SAFETY: every method forwards to `System` unchanged; the gate around it only delays calls.
unsafe impl GlobalAlloc for CloneSafeAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::enter();
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        Self::leave();
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::enter();
        // SAFETY: as above.
        let p = unsafe { System.alloc_zeroed(layout) };
        Self::leave();
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        Self::enter();
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) };
        Self::leave();
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::enter();
        // SAFETY: as above.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        Self::leave();
        p
    }
}

/// Set every signal this process ignores back to its default action. An ignored signal stays
/// ignored across `execve`: envcraft ignores SIGPIPE (see `start_process`), a shell's
/// background job ignores SIGINT and SIGQUIT, a supervisor may ignore anything (real-time
/// signals included, which glibc's `sigaction` refuses to show for the two it reserves: hence
/// the raw system call); a sandbox's commands must not inherit any of it. Handlers need no
/// reset (`execve` resets them).
pub fn reset_ignored_signals() -> io::Result<()> {
    /// The kernel's `struct sigaction` as `rt_sigaction` reads it (the handler first; the rest
    /// zero for the default action, whatever the architecture's order of the other fields).
    #[repr(C)]
    struct KernelSigaction {
        handler: usize,
        flags: u64,
        restorer: usize,
        mask: u64,
    }
    const SIG_IGN: usize = 1;
    let default = KernelSigaction {
        handler: 0,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    for signal in 1..=64 {
        if signal == libc::SIGKILL || signal == libc::SIGSTOP {
            continue;
        }
        let mut old = KernelSigaction {
            handler: 0,
            flags: 0,
            restorer: 0,
            mask: 0,
        };
        // SAFETY: rt_sigaction reads nothing (NULL) and writes `old`, a struct we own of at
        // least the kernel's size; the sigset size is the kernel's (8 bytes).
        let read = unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                signal,
                std::ptr::null::<KernelSigaction>(),
                &mut old as *mut KernelSigaction,
                8usize,
            )
        };
        if read != 0 || old.handler != SIG_IGN {
            continue;
        }
        // SAFETY: as above, reading our zeroed `default` (the default action, no flags).
        let set = unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                signal,
                &default as *const KernelSigaction,
                std::ptr::null_mut::<KernelSigaction>(),
                8usize,
            )
        };
        if set != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// What the Rust runtime's start-up does that envcraft relies on, for a binary that starts
/// without it (`#![no_main]`, see `src/main.rs`): descriptors 0, 1 and 2 are open (on
/// /dev/null when closed, so that no file envcraft opens later becomes its stdout), and SIGPIPE
/// is ignored, so a write to a closed pipe or socket returns an error instead of killing the
/// process. Commands never inherit the ignored SIGPIPE (the sandbox's init resets it).
pub fn start_process() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: poll reads and writes only the three pollfd entries it is given.
    let polled = unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) };
    if polled >= 0 {
        for pfd in &fds {
            if pfd.revents & libc::POLLNVAL != 0 {
                // SAFETY: the path is a NUL-terminated literal; the lowest free descriptor,
                // this one, is the one opened and it stays open for the process's life.
                if unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) } < 0 {
                    // Without a valid stdio descriptor nothing can be reported; stop as the
                    // Rust runtime does.
                    // SAFETY: abort never returns.
                    unsafe { libc::abort() };
                }
            }
        }
    }
    // SAFETY: setting a signal's disposition to SIG_IGN involves no handler code.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

/// Keep freed heap memory instead of handing it back to the kernel at every free of a large
/// block: each tool call allocates and frees some tens of KiB (file contents, JSON), and with
/// glibc's default (trim past 128 KiB at the top of the heap) every call paid to fault those
/// pages in again. At most `keep` bytes of free memory stay at the top of the heap.
pub fn keep_freed_heap(keep: usize) {
    let keep = libc::c_int::try_from(keep).unwrap_or(libc::c_int::MAX);
    // SAFETY: mallopt only sets allocator parameters; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, keep);
        libc::mallopt(libc::M_TOP_PAD, 1 << 20);
    }
}

/// Close the allocation gate (one cloner at a time) and wait for allocations in flight.
fn pause_allocations() {
    while CLONING
        .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        std::thread::yield_now();
    }
    while IN_FLIGHT.load(Ordering::SeqCst) != 0 {
        std::hint::spin_loop();
    }
}

fn resume_allocations() {
    CLONING.store(false, Ordering::SeqCst);
}

/// Result of [`clone_process`]: which side of the clone we are on.
pub enum Cloned {
    Parent(libc::pid_t),
    Child,
}

/// `clone(2)` without a new stack (fork semantics) into the namespaces named by `flags`.
///
/// The child starts with a copy of the calling thread only: a lock another thread held at the
/// clone stays held in the child forever. Allocations are paused around the clone (with
/// [`CloneSafeAlloc`] as the global allocator, as the binary has it) and the child sets its
/// ids with raw syscalls ([`become_namespace_root`]), so a multi-threaded caller (the server)
/// is safe as far as the allocator and glibc's set*id go; other C-library locks are not
/// covered, so callers serialize clones and start their threads up front.
pub fn clone_process(flags: libc::c_int) -> io::Result<Cloned> {
    let flags = (flags | libc::SIGCHLD) as libc::c_ulong;
    pause_allocations();
    // SAFETY: a raw clone with a NULL stack behaves as fork(2): the child gets a copy-on-write
    // copy of the address space and continues on its own copy of the stack. No pointer arguments
    // are passed (parent_tid, child_tid and tls are NULL/0).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_int>(),
            std::ptr::null_mut::<libc::c_int>(),
            0 as libc::c_ulong,
        )
    };
    // Both sides reopen the gate: the child's copy of it was closed too.
    let err = (ret == -1).then(io::Error::last_os_error);
    resume_allocations();
    match (ret, err) {
        (_, Some(e)) => Err(e),
        (0, None) => Ok(Cloned::Child),
        (pid, None) => Ok(Cloned::Parent(pid as libc::pid_t)),
    }
}

/// Drop the supplementary groups (when `drop_groups`), then set the real, effective and saved
/// gid and uid to 0: raw syscalls, for the calling thread only.
///
/// glibc's wrappers of these calls signal every other thread it believes the process has, so
/// that all change together (POSIX semantics), and wait for each to answer. In a child made by
/// [`clone_process`] from a multi-threaded process (the server) those threads do not exist,
/// and the wrapper would wait forever.
pub fn become_namespace_root(drop_groups: bool) -> io::Result<()> {
    let check = |ret: libc::c_long| {
        if ret < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    if drop_groups {
        // SAFETY: a zero-length list; the pointer is never read.
        check(unsafe {
            libc::syscall(
                libc::SYS_setgroups,
                0 as libc::c_ulong,
                std::ptr::null::<libc::gid_t>(),
            )
        })?;
    }
    // SAFETY: plain syscalls with integer arguments.
    check(unsafe { libc::syscall(libc::SYS_setresgid, 0u32, 0u32, 0u32) })?;
    // SAFETY: as above.
    check(unsafe { libc::syscall(libc::SYS_setresuid, 0u32, 0u32, 0u32) })
}

/// `pidfd_open(2)`: a file descriptor that becomes readable when the process exits.
pub fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with integer arguments.
    let ret = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0 as libc::c_uint) };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a fresh file descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as RawFd) })
}

/// How many threads this process has (the `Threads:` line of `/proc/self/status`).
pub fn thread_count() -> io::Result<usize> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| io::Error::other("/proc/self/status has no Threads line"))
}

/// `_exit(2)`: leave a forked child without running the parent's atexit handlers or flushing
/// buffers that belong to the parent.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and touches no Rust state.
    unsafe { libc::_exit(code) }
}

/// The Landlock ABI version the kernel offers (0 when Landlock is absent or disabled).
pub fn landlock_abi_version() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a NULL attribute, size 0 and the VERSION flag the call only returns an integer.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if ret < 0 { 0 } else { ret as i32 }
}

/// A fresh readable and writable anonymous mapping of `len` bytes (`flags`: private or shared).
fn map_anonymous(
    len: std::num::NonZeroUsize,
    flags: nix::sys::mman::MapFlags,
) -> io::Result<std::ptr::NonNull<libc::c_void>> {
    // SAFETY: a fresh anonymous mapping; no existing memory is touched.
    unsafe {
        nix::sys::mman::mmap_anonymous(
            None,
            len,
            nix::sys::mman::ProtFlags::PROT_READ | nix::sys::mman::ProtFlags::PROT_WRITE,
            flags,
        )
    }
    .map_err(io::Error::from)
}

/// One value in an anonymous shared mapping: the same memory in this process and in a child
/// cloned without `CLONE_VM` (a copy of everything else), so that such a child can report
/// through it. Unmapped on drop, which its owner lets happen only once the child has exited.
pub struct SharedValue<T: Sync> {
    value: std::ptr::NonNull<T>,
    len: std::num::NonZeroUsize,
}

impl<T: Sync> SharedValue<T> {
    pub fn new(value: T) -> io::Result<SharedValue<T>> {
        let len = std::num::NonZeroUsize::new(std::mem::size_of::<T>())
            .unwrap_or(std::num::NonZeroUsize::MIN);
        let value_ptr = map_anonymous(len, nix::sys::mman::MapFlags::MAP_SHARED)?.cast::<T>();
        // SAFETY: the mapping is page-aligned (so aligned for T), at least size_of::<T>() long,
        // and ours alone until this returns.
        unsafe { value_ptr.as_ptr().write(value) };
        Ok(SharedValue {
            value: value_ptr,
            len,
        })
    }
}

impl<T: Sync> std::ops::Deref for SharedValue<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: written in `new`, valid until drop; T is Sync, so sharing it is sound.
        unsafe { self.value.as_ref() }
    }
}

impl<T: Sync> Drop for SharedValue<T> {
    fn drop(&mut self) {
        // SAFETY: the value was written in `new` and is dropped once; then our own mapping of
        // this size is unmapped (the owner guarantees no child uses it any more).
        unsafe {
            std::ptr::drop_in_place(self.value.as_ptr());
            let _ = nix::sys::mman::munmap(self.value.cast(), self.len.get());
        }
    }
}

/// The stack of a raw child (`clone` onto a stack of its own): an anonymous private mapping, so
/// only the pages the child touches are ever made; unmapped on drop, which its owner lets happen
/// only once no child runs on it.
pub struct ChildStack {
    base: std::ptr::NonNull<libc::c_void>,
    len: usize,
}

impl ChildStack {
    pub fn new(len: usize) -> io::Result<ChildStack> {
        let size = std::num::NonZeroUsize::new(len)
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let flags = nix::sys::mman::MapFlags::MAP_PRIVATE | nix::sys::mman::MapFlags::MAP_STACK;
        let base = map_anonymous(size, flags)?;
        Ok(ChildStack { base, len })
    }

    /// Where the child's stack pointer starts: the (16-byte aligned) end, as stacks grow down.
    pub fn top(&self) -> *mut libc::c_void {
        ((self.base.as_ptr() as usize + self.len) & !15) as *mut libc::c_void
    }

    /// Whether every byte but the top `spared` is still zero, as mapped: no process sharing
    /// this memory ran on it (the C library's `clone` writes the child's function and argument
    /// at the top, in the parent). Only while no child runs on it.
    #[cfg(test)]
    pub fn is_untouched_below(&self, spared: usize) -> bool {
        // SAFETY: our own mapping of `len` bytes, readable; no child writes it meanwhile.
        let bytes =
            unsafe { std::slice::from_raw_parts(self.base.as_ptr().cast::<u8>(), self.len) };
        bytes[..self.len.saturating_sub(spared)]
            .iter()
            .all(|b| *b == 0)
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: our own mapping of this size; the owner guarantees no child uses it any more.
        let _ = unsafe { nix::sys::mman::munmap(self.base, self.len) };
    }
}

/// Close every file descriptor from `first` upwards except those in `keep`.
pub fn close_fds_except(first: RawFd, keep: &[RawFd]) -> io::Result<()> {
    let mut keep: Vec<RawFd> = keep.iter().copied().filter(|fd| *fd >= first).collect();
    keep.sort_unstable();
    let mut low = first;
    for fd in keep.into_iter().chain(std::iter::once(RawFd::MAX)) {
        if fd > low {
            let high = if fd == RawFd::MAX {
                u32::MAX
            } else {
                (fd - 1) as u32
            };
            // SAFETY: close_range only closes descriptors; the caller owns every descriptor in the
            // range (this runs in a freshly cloned child that is about to use only `keep`).
            let ret = unsafe { libc::syscall(libc::SYS_close_range, low as u32, high, 0u32) };
            if ret < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        low = fd.saturating_add(1);
    }
    Ok(())
}

/// `seccomp(SECCOMP_SET_MODE_FILTER)`: add `program` to the calling thread's filters. The thread
/// must already have `no_new_privs` (or CAP_SYS_ADMIN): unlike seccompiler's `apply_filter`
/// this does not set it again.
pub fn install_seccomp_program(program: &[libc::sock_filter]) -> io::Result<()> {
    let len =
        u16::try_from(program.len()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let prog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points at `len` valid instructions that outlive the call; the kernel copies
    // them and never writes through the pointer.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0 as libc::c_uint,
            &prog as *const libc::sock_fprog,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `prctl(PR_SET_SECUREBITS)`: make uid 0 an ordinary user for capability purposes, for good.
pub fn lock_securebits_noroot() -> io::Result<()> {
    const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
    const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
    const SECBIT_NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
    const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
    const SECBIT_KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
    const SECBIT_NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
    const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: libc::c_ulong = 1 << 7;
    let bits = SECBIT_NOROOT
        | SECBIT_NOROOT_LOCKED
        | SECBIT_NO_SETUID_FIXUP
        | SECBIT_NO_SETUID_FIXUP_LOCKED
        | SECBIT_KEEP_CAPS_LOCKED
        | SECBIT_NO_CAP_AMBIENT_RAISE
        | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_SECUREBITS, bits, 0, 0, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Take ownership of a descriptor that `recvmsg` just delivered through SCM_RIGHTS.
/// Call it only with such descriptors: the kernel installed them in this process for the
/// receiver alone, so nothing else owns or will close them.
pub fn adopt_received_fd(raw: RawFd) -> OwnedFd {
    // SAFETY: per the contract above, `raw` is a fresh descriptor owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(raw) }
}

/// `fgetxattr(2)` into a small buffer; `Ok(None)` when the attribute is absent.
pub fn fgetxattr(fd: RawFd, name: &CStr) -> io::Result<Option<Vec<u8>>> {
    let mut buf = vec![0u8; 256];
    // SAFETY: name is NUL-terminated; buf is valid for buf.len() bytes; fd is borrowed.
    let ret = unsafe {
        libc::fgetxattr(
            fd,
            name.as_ptr(),
            buf.as_mut_ptr().cast::<libc::c_void>(),
            buf.len(),
        )
    };
    if ret < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::ENODATA) | Some(libc::ENOTSUP) => Ok(None),
            _ => Err(err),
        };
    }
    buf.truncate(ret as usize);
    Ok(Some(buf))
}

/// `openat2(2)`: open `path` relative to `dirfd` with `flags` (and `mode` when creating), the
/// lookup constrained by `resolve` (`RESOLVE_*` bits, e.g. `RESOLVE_BENEATH`).
///
/// This is how the built-in file tools reach anything in a workspace: with `RESOLVE_BENEATH` the
/// kernel refuses (EXDEV) every lookup that would leave `dirfd`, through `..`, an absolute path
/// or any symbolic link, at any depth, and does so atomically with the lookup itself.
pub fn openat2(
    dirfd: std::os::fd::BorrowedFd<'_>,
    path: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
    resolve: u64,
) -> io::Result<OwnedFd> {
    use std::os::fd::AsRawFd;
    // SAFETY: open_how is plain old data and must be zero-initialised (unknown fields zero).
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    // O_TMPFILE includes the O_DIRECTORY bit, so test for all of its bits.
    let creates = flags & libc::O_CREAT != 0 || flags & libc::O_TMPFILE == libc::O_TMPFILE;
    how.mode = if creates { u64::from(mode) } else { 0 };
    how.resolve = resolve;
    // SAFETY: path is NUL-terminated and outlives the call; `how` is a valid open_how that
    // outlives the call and its exact size is passed; dirfd is borrowed, so it stays open.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a fresh file descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as RawFd) })
}

/// A close-on-exec duplicate of `fd` numbered `min` or above (`F_DUPFD_CLOEXEC`).
pub fn dup_above(fd: std::os::fd::BorrowedFd<'_>, min: RawFd) -> io::Result<OwnedFd> {
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl with F_DUPFD_CLOEXEC on a borrowed, open descriptor; integer arguments.
    let ret = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, min) };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret) })
}

/// `fsetxattr(2)`: set an extended attribute on an open file.
pub fn fsetxattr(fd: RawFd, name: &CStr, value: &[u8]) -> io::Result<()> {
    // SAFETY: name is NUL-terminated; value is valid for value.len() bytes; fd is borrowed.
    let ret = unsafe {
        libc::fsetxattr(
            fd,
            name.as_ptr(),
            value.as_ptr().cast::<libc::c_void>(),
            value.len(),
            0,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The length of the next message queued on the socket `fd`, without taking it (0 at the end of
/// the stream): `recv` of zero bytes with `MSG_PEEK | MSG_TRUNC`.
pub fn peek_message_len(fd: RawFd) -> io::Result<usize> {
    // SAFETY: a zero-length read into no buffer; MSG_PEEK leaves the message queued, and
    // MSG_TRUNC makes the call return its real length. fd is borrowed.
    let len = unsafe {
        libc::recv(
            fd,
            std::ptr::null_mut(),
            0,
            libc::MSG_PEEK | libc::MSG_TRUNC,
        )
    };
    usize::try_from(len).map_err(|_| io::Error::last_os_error())
}

// --- The sandbox's idmapped mounts (the sandbox work's wrappers) ---

/// `OPEN_TREE_CLONE`, `OPEN_TREE_CLOEXEC`, `AT_RECURSIVE` (linux/mount.h, linux/fcntl.h).
const OPEN_TREE_CLONE: u32 = 1;
const OPEN_TREE_CLOEXEC: u32 = libc::O_CLOEXEC as u32;
const AT_RECURSIVE: u32 = 0x8000;
/// `MOUNT_ATTR_*` (linux/mount.h).
pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
/// `MOVE_MOUNT_F_EMPTY_PATH` (linux/mount.h).
const MOVE_MOUNT_F_EMPTY_PATH: u32 = 0x4;

/// `struct mount_attr` (linux/mount.h), the argument of `mount_setattr`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `open_tree(path, OPEN_TREE_CLONE | AT_RECURSIVE)`: a detached copy of the mount tree at
/// `path` (needs CAP_SYS_ADMIN over the caller's mount namespace).
pub fn open_tree_clone(path: &std::path::Path) -> io::Result<OwnedFd> {
    let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: path is NUL-terminated and outlives the call; the rest are integers.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a fresh file descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as RawFd) })
}

/// `mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, {IDMAP | attrs, userns})`: make the
/// detached tree `tree` show file owners through the id maps of the user namespace `userns`
/// (whose maps must be written), with the extra `MOUNT_ATTR_*` flags `attrs`.
pub fn idmap_tree(
    tree: std::os::fd::BorrowedFd<'_>,
    userns: std::os::fd::BorrowedFd<'_>,
    attrs: u64,
) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP | attrs,
        attr_clr: 0,
        propagation: 0,
        userns_fd: std::os::fd::AsRawFd::as_raw_fd(&userns) as u64,
    };
    // SAFETY: an empty NUL-terminated path, a pointer to a live struct of the size passed;
    // both descriptors are borrowed and open.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            std::os::fd::AsRawFd::as_raw_fd(&tree),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as u32 | AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `move_mount(tree, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH)`: attach the detached
/// tree `tree` at `target`.
pub fn attach_tree(tree: std::os::fd::BorrowedFd<'_>, target: &std::path::Path) -> io::Result<()> {
    let target = std::ffi::CString::new(target.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: both paths are NUL-terminated and outlive the call; the descriptor is borrowed.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            std::os::fd::AsRawFd::as_raw_fd(&tree),
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Run `f` with the calling thread's filesystem ids (`setfsuid`/`setfsgid`) set to `ids`,
/// then put back the ones it had: what host-side code creates or opens in a sandbox's
/// workspace is then checked, and owned, as the sandbox's root (host root is not mapped into a
/// sandbox whose root is another host id, and could create nothing there). Per thread, as the
/// kernel keeps these ids; `None` runs `f` as it is.
pub fn with_fs_ids<T>(ids: Option<(u32, u32)>, f: impl FnOnce() -> T) -> T {
    let Some((uid, gid)) = ids else {
        return f();
    };
    // SAFETY: setfsgid/setfsuid take integers and cannot fail in a way that harms memory;
    // each returns the previous id, put back below.
    let (old_gid, old_uid) = unsafe { (libc::setfsgid(gid), libc::setfsuid(uid)) };
    let result = f();
    // SAFETY: as above, restoring the ids returned by the first calls.
    unsafe {
        libc::setfsuid(old_uid as libc::uid_t);
        libc::setfsgid(old_gid as libc::gid_t);
    }
    result
}
