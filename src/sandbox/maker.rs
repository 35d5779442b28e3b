//! The sandbox maker: one single-threaded process that clones every sandbox's init for a
//! multi-threaded envcraft (the server: sessions, forks, graders, `exec` through the API).
//!
//! Why: a clone copies the calling process, with the calling thread only. Cloned from the
//! server, an init carried the server's whole address space (its page tables alone 1.2 MiB a
//! session at 1,000 sessions, and every page either side wrote afterwards copied), and
//! whatever C-library lock another thread held at that instant stayed held in the init
//! forever: the server had to make all its threads up front, serialize its clones, and pause
//! allocations around each. The maker is forked by [`start`] before the server makes any
//! thread; it holds nothing but this loop, and it clones each init with `CLONE_PARENT`, so the
//! init is the server's own child (the server waits for it and gets its pidfd, as before), a
//! copy of a small process, and no lock of the server's is in it.
//!
//! The protocol, over a `SOCK_SEQPACKET` pair: the server sends one byte (1: begin a network
//! namespace, as [`super::Prestart::clone`] takes it; 0: not); the maker answers with the init's
//! pid and an errno (0 when the clone worked) as two native-endian `i32`s, and on success the
//! server's end of the init's report channel as the message's one descriptor. The maker keeps
//! nothing of an init: its copy of the channel closes as the answer goes out.
//!
//! The maker dies with the server (`PR_SET_PDEATHSIG`, checked once against the race), and
//! ends when the server closes its end. A maker that is gone makes every later sandbox fail
//! with [`SandboxError::MakerGone`]; it is never replaced from the multi-threaded server.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::{Mutex, OnceLock};

use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};
use nix::unistd::Pid;

use super::channel::Channel;
use super::{SandboxError, child};
use crate::sys::{self, Cloned};

/// The namespaces every init is cloned into (the network namespace is made by the init
/// itself, see `netns`).
pub(super) const INIT_NAMESPACES: libc::c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS;

/// The server's side of the maker: one request at a time over its socket.
struct Maker {
    socket: Mutex<OwnedFd>,
    pid: Pid,
}

static MAKER: OnceLock<Maker> = OnceLock::new();

/// Why the maker could not be started (envcraft then clones inits itself, as a one-shot
/// command does).
#[derive(Debug, thiserror::Error)]
pub enum MakerError {
    #[error("the sandbox maker must be forked before any thread exists; this process has {0}")]
    Threaded(usize),
    #[error("cannot start the sandbox maker")]
    Os(#[source] std::io::Error),
}

/// Fork the maker. Scope: a process that is still single-threaded (checked), once; later
/// calls do nothing.
pub fn start() -> Result<(), MakerError> {
    if MAKER.get().is_some() {
        return Ok(());
    }
    let threads = sys::thread_count().map_err(MakerError::Os)?;
    if threads != 1 {
        return Err(MakerError::Threaded(threads));
    }
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| MakerError::Os(e.into()))?;
    let server = nix::unistd::getpid();
    match sys::clone_process(0).map_err(MakerError::Os)? {
        Cloned::Child => {
            drop(ours);
            maker_main(theirs, server)
        }
        Cloned::Parent(pid) => {
            drop(theirs);
            let _ = MAKER.set(Maker {
                socket: Mutex::new(ours),
                pid: Pid::from_raw(pid),
            });
            Ok(())
        }
    }
}

/// Whether inits are made by the maker (so this process itself clones none of them).
pub fn running() -> bool {
    MAKER.get().is_some()
}

/// End the maker (the server is stopping): its socket is shut, so it leaves its loop, and it
/// is waited for. Later sandboxes fail with [`SandboxError::MakerGone`].
pub fn stop() {
    let Some(maker) = MAKER.get() else {
        return;
    };
    let socket = maker
        .socket
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let _ = nix::sys::socket::shutdown(socket.as_raw_fd(), nix::sys::socket::Shutdown::Both);
    // It leaves at once; one that does not (stuck in a clone) is killed after a bound.
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let deadline = std::time::Instant::now() + STOP_WAIT;
    while let Ok(WaitStatus::StillAlive) = waitpid(maker.pid, Some(WaitPidFlag::WNOHANG)) {
        if std::time::Instant::now() >= deadline {
            tracing::warn!("the sandbox maker did not end when asked: killing it");
            let _ = nix::sys::signal::kill(maker.pid, nix::sys::signal::Signal::SIGKILL);
            let _ = waitpid(maker.pid, None);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// How long [`stop`] waits for the maker to end before it kills it.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The maker's pid, when it runs.
pub fn pid() -> Option<Pid> {
    MAKER.get().map(|m| m.pid)
}

/// An init cloned by the maker (`None`: no maker runs here; the caller clones it itself):
/// its pid and the server's end of its report channel.
pub(super) fn make_init(network: bool) -> Option<Result<(Pid, Channel), SandboxError>> {
    let maker = MAKER.get()?;
    let socket = maker
        .socket
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    Some(ask(socket.as_raw_fd(), network))
}

fn ask(socket: RawFd, network: bool) -> Result<(Pid, Channel), SandboxError> {
    let gone = |e: nix::Error| SandboxError::MakerGone(e.into());
    sendmsg::<()>(
        socket,
        &[IoSlice::new(&[u8::from(network)])],
        &[],
        MsgFlags::MSG_NOSIGNAL,
        None,
    )
    .map_err(gone)?;
    let mut answer = [0u8; 8];
    let mut cmsg = nix::cmsg_space!([RawFd; 1]);
    let (len, fd) = {
        let mut iov = [IoSliceMut::new(&mut answer)];
        let msg = recvmsg::<()>(
            socket,
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map_err(gone)?;
        let mut fd = None;
        for c in msg.cmsgs().map_err(gone)? {
            if let ControlMessageOwned::ScmRights(raw) = c {
                for raw in raw {
                    let owned = sys::adopt_received_fd(raw);
                    fd.get_or_insert(owned);
                }
            }
        }
        (msg.bytes, fd)
    };
    if len != answer.len() {
        return Err(SandboxError::MakerGone(std::io::Error::other(
            "the sandbox maker ended (its answer was cut short)",
        )));
    }
    let pid = i32::from_ne_bytes([answer[0], answer[1], answer[2], answer[3]]);
    let errno = i32::from_ne_bytes([answer[4], answer[5], answer[6], answer[7]]);
    match (errno, fd) {
        (0, Some(fd)) if pid > 0 => Ok((Pid::from_raw(pid), Channel::from_fd(fd))),
        (0, _) => Err(SandboxError::MakerGone(std::io::Error::other(
            "the sandbox maker answered without the init's channel",
        ))),
        (errno, _) => Err(clone_error(std::io::Error::from_raw_os_error(errno))),
    }
}

/// What a failed clone of an init means: namespaces refused here, or an OS error.
pub(super) fn clone_error(e: std::io::Error) -> SandboxError {
    match e.raw_os_error() {
        Some(libc::EPERM | libc::EINVAL | libc::ENOSPC | libc::EUSERS) => {
            SandboxError::NamespacesUnavailable(e)
        }
        _ => super::os("clone the sandbox")(e),
    }
}

/// The maker's loop: answer each request until the server closes its end.
fn maker_main(socket: OwnedFd, server: Pid) -> ! {
    if nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).is_err()
        || nix::unistd::getppid() != server
    {
        sys::exit_now(0);
    }
    let mut request = [0u8; 1];
    loop {
        let received = {
            let mut iov = [IoSliceMut::new(&mut request)];
            recvmsg::<()>(socket.as_raw_fd(), &mut iov, None, MsgFlags::empty()).map(|m| m.bytes)
        };
        match received {
            Ok(1) => answer(&socket, request[0] == 1),
            Err(nix::Error::EINTR) => continue,
            // End of stream (the server closed its end or died), or an unusable socket.
            _ => sys::exit_now(0),
        }
    }
}

/// Clone one init into its namespaces, as the server's child, and hand the server its channel.
fn answer(socket: &OwnedFd, network: bool) {
    let reply = |pid: i32, errno: i32, fds: &[RawFd]| {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&pid.to_ne_bytes());
        bytes[4..].copy_from_slice(&errno.to_ne_bytes());
        let rights = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage<'_>] = if fds.is_empty() { &[] } else { &rights };
        let _ = sendmsg::<()>(
            socket.as_raw_fd(),
            &[IoSlice::new(&bytes)],
            cmsgs,
            MsgFlags::MSG_NOSIGNAL,
            None,
        );
    };
    let (server_end, init_end) = match Channel::pair() {
        Ok(pair) => pair,
        Err(e) => return reply(0, e.raw_os_error().unwrap_or(libc::EIO), &[]),
    };
    match sys::clone_process(INIT_NAMESPACES | libc::CLONE_PARENT) {
        Ok(Cloned::Child) => {
            // The init keeps only its own end: not the maker's socket, not the server's end.
            // (This copy of the process never returns here, so `socket` is never dropped.)
            let _ = nix::unistd::close(socket.as_raw_fd());
            drop(server_end);
            child::init_main(&init_end, network)
        }
        Ok(Cloned::Parent(pid)) => {
            drop(init_end);
            reply(pid, 0, &[server_end.raw_fd()]);
        }
        Err(e) => reply(0, e.raw_os_error().unwrap_or(libc::EIO), &[]),
    }
}

/// Held while session work clones a process (creating or forking a session, running a
/// grader) or starts threads (hashing a manifest while verifying), when no sandbox maker runs
/// (see this module): a clone taken while another thread of this process is
/// being created inherits the locks that creation holds. Calls (`exec`, `process`, `skill`) go
/// through the sandbox's own init and need no lock; without namespaces (a fallback where user
/// namespaces are refused) envcraft clones commands itself, allocations paused around the
/// clone (`sys::CloneSafeAlloc`), and that case takes no lock.
static CLONE_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Take [`CLONE_LOCK`] when this process clones inits itself; nothing when the maker does.
/// (A panic while it was held does not matter: it guards no data.)
pub(crate) fn clone_lock() -> Option<std::sync::MutexGuard<'static, ()>> {
    if running() {
        return None;
    }
    Some(
        CLONE_LOCK
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()),
    )
}
