//! The channel between envcraft and the processes it starts: a `SOCK_SEQPACKET` socket pair
//! carrying one JSON [`Report`] per message and, with [`Report::WorkspaceReady`], the file
//! descriptor of the sandbox's private layer directory (SCM_RIGHTS).
//!
//! The parent keeps one end; the sandbox's init and its command process share the other, which
//! is close-on-exec, so a successful `execve` closes the command's copy by itself.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};
use serde::{Deserialize, Serialize};

use super::landlock::LandlockOutcome;
use super::plan::WorkspaceKind;

/// What envcraft and the sandbox's processes tell each other. Reports about one command carry
/// the id envcraft gave it in [`Report::Exec`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "report", rename_all = "snake_case")]
pub enum Report {
    /// envcraft → init: the uid/gid maps are written; build the root. With `seed`, one
    /// descriptor comes along: the parent session's changes, of that kind, to start from.
    Go { seed: Option<WorkspaceKind> },
    /// envcraft → init, with cgroup membership files (`tasks` / `cgroup.procs`, opened by
    /// envcraft; none without cgroups): the first `join` are the run's, to write `0` to now
    /// (moving in); any after them are those of the cgroups envcraft itself is in, to move
    /// back to at `Shutdown`, so that the run's cgroup can be removed before the init's exit.
    LimitsReady { join: usize },
    /// envcraft → init, with three descriptors (stdin, stdout, stderr): run a command. With
    /// `last`, the init ends the sandbox as soon as it has reported this command's end, as
    /// on `Shutdown` (one round trip less for a sandbox of one command).
    Exec {
        id: u64,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        last: bool,
    },
    /// envcraft → init: send `signal` to command `id`'s process group.
    Signal { id: u64, signal: i32 },
    /// envcraft → init: end the sandbox: kill and reap every other process in it, leave the
    /// run's cgroup, report [`Report::Stopped`] and exit.
    Shutdown,
    /// init → envcraft: every other process of the sandbox is dead and reaped; the init left
    /// the run's cgroup (`left_cgroup`, so it is empty) or could not, and now exits.
    Stopped { left_cgroup: bool },
    /// A setup step failed: the init's (no id) or a command's; nothing was executed.
    SetupFailed {
        id: Option<u64>,
        step: String,
        errno: i32,
        detail: String,
    },
    /// init → envcraft: the workspace is mounted, as `kind`. Carries the layer directory's fd
    /// and the workspace root's fd.
    WorkspaceReady { kind: WorkspaceKind },
    /// init → envcraft: the cgroup namespace could (or could not) be entered.
    CgroupNamespace { entered: bool },
    /// init → envcraft: the root is built and the init serves `Exec` requests.
    Ready,
    /// command → envcraft: about to `execve`, restricted as listed.
    CommandReady {
        id: u64,
        landlock: LandlockOutcome,
        capabilities_dropped: bool,
        seccomp: bool,
        no_new_privs: bool,
    },
    /// command → envcraft: `execve` failed (126: not executable, 127: not found).
    ExecFailed { id: u64, errno: i32, exit_code: i32 },
    /// init → envcraft: command `id` exited.
    Exited { id: u64, code: i32 },
    /// init → envcraft: command `id` was killed by a signal.
    Signaled { id: u64, signal: i32 },
}

/// One end of the channel.
pub struct Channel {
    fd: OwnedFd,
}

/// Largest message: reports are small JSON objects.
const MAX_MESSAGE: usize = 4096;
/// Most descriptors one message carries.
const MAX_FDS: usize = 4;

impl AsFd for Channel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Channel {
    /// A connected pair, both ends close-on-exec.
    pub fn pair() -> std::io::Result<(Channel, Channel)> {
        let (a, b) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )?;
        Ok((Channel { fd: a }, Channel { fd: b }))
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Send a report, with file descriptors when given.
    pub fn send(&self, report: &Report, fds: &[RawFd]) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(report).map_err(std::io::Error::other)?;
        let iov = [IoSlice::new(&bytes)];
        let cmsgs: Vec<ControlMessage<'_>> = if fds.is_empty() {
            Vec::new()
        } else {
            vec![ControlMessage::ScmRights(fds)]
        };
        sendmsg::<()>(
            self.fd.as_raw_fd(),
            &iov,
            &cmsgs,
            MsgFlags::MSG_NOSIGNAL,
            None,
        )?;
        Ok(())
    }

    /// Receive one report and the descriptors sent with it; `Ok(None)` at end of stream
    /// (every sender closed its end).
    pub fn recv(&self) -> std::io::Result<Option<(Report, Vec<OwnedFd>)>> {
        let mut buf = vec![0u8; MAX_MESSAGE];
        let mut cmsg = nix::cmsg_space!([RawFd; MAX_FDS]);
        let (len, fds) = {
            let mut iov = [IoSliceMut::new(&mut buf)];
            let msg = recvmsg::<()>(
                self.fd.as_raw_fd(),
                &mut iov,
                Some(&mut cmsg),
                MsgFlags::MSG_CMSG_CLOEXEC,
            )?;
            let mut fds = Vec::new();
            for c in msg.cmsgs()? {
                if let ControlMessageOwned::ScmRights(raw) = c {
                    fds.extend(raw.into_iter().map(crate::sys::adopt_received_fd));
                }
            }
            (msg.bytes, fds)
        };
        if len == 0 {
            return Ok(None);
        }
        let report = serde_json::from_slice(&buf[..len]).map_err(std::io::Error::other)?;
        Ok(Some((report, fds)))
    }
}
