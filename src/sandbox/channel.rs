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

/// What the sandbox's processes tell envcraft.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "report", rename_all = "snake_case")]
pub enum Report {
    /// Sent by the parent: the uid/gid maps are written; the init may build the root.
    Go,
    /// Sent by the parent with the run's cgroup membership files (`tasks` / `cgroup.procs`,
    /// opened by the parent; none without cgroups): the sandbox writes `0` to each to move
    /// itself in, and may then start the command.
    LimitsReady,
    /// A setup step failed; nothing was executed.
    SetupFailed {
        step: String,
        errno: i32,
        detail: String,
    },
    /// The workspace is mounted, as `kind`. Carries the layer directory's fd.
    WorkspaceReady { kind: WorkspaceKind },
    /// The cgroup namespace could (or could not) be entered.
    CgroupNamespace { entered: bool },
    /// The command process is about to `execve`, restricted as listed.
    CommandReady {
        landlock: LandlockOutcome,
        capabilities_dropped: bool,
        seccomp: bool,
        no_new_privs: bool,
    },
    /// `execve` failed (126: not executable, 127: not found).
    ExecFailed { errno: i32, exit_code: i32 },
    /// The command exited.
    Exited { code: i32 },
    /// The command was killed by a signal.
    Signaled { signal: i32 },
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
