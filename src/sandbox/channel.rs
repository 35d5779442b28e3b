//! The channel between envcraft and the processes it starts: a `SOCK_SEQPACKET` socket pair
//! carrying one JSON [`Report`] per message and, with [`Report::WorkspaceReady`], the file
//! descriptor of the sandbox's private layer directory (SCM_RIGHTS).
//!
//! A report of any size gets through whole: the receiver sizes its buffer by the message, and a
//! report larger than [`INLINE_MAX`] (an `Exec` of a long command line or environment: the
//! kernel allows a command 2 MiB and more of them, a socket's send buffer far less) travels in
//! a sealed memfd sent as the message's first descriptor, the message itself being only
//! [`IN_MEMFD`].
//!
//! The parent keeps one end; the sandbox's init and its command process share the other, which
//! is close-on-exec, so a successful `execve` closes the command's copy by itself.

use std::io::{IoSlice, IoSliceMut, Read, Seek, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::PathBuf;

use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};
use serde::{Deserialize, Serialize};

use super::landlock::LandlockOutcome;
use super::plan::{Plan, WorkspaceKind};

/// What envcraft and the sandbox's processes tell each other. Reports about one command carry
/// the id envcraft gave it in [`Report::Exec`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "report", rename_all = "snake_case")]
pub enum Report {
    /// envcraft → init: the uid/gid maps are written; build the root of `plan` over the
    /// state directory `state_dir`. With `seed`, one descriptor comes along: the parent
    /// session's changes, of that kind, to start from. The init was cloned before the plan
    /// was made (see `live::Prestart`), so the plan comes whole in this message. Under
    /// `UidMapping::Idmapped` the idmapped trees of `idmap::sources` follow, in that order.
    Start {
        plan: Box<Plan>,
        state_dir: PathBuf,
        seed: Option<WorkspaceKind>,
    },
    /// envcraft → init, with cgroup membership files (`tasks` / `cgroup.procs`, opened by
    /// envcraft; none without cgroups): the first `join` are the run's, to write `0` to now
    /// (moving in); any after them are those of the cgroups envcraft itself is in, to move
    /// back to at `Shutdown`, so that the run's cgroup can be removed before the init's exit.
    /// With `commands`, the descriptor right after the first `join` is that of the memory
    /// cgroup each command moves itself into (v1's run memory cgroup, which the init does not
    /// join: see `cgroup`).
    LimitsReady { join: usize, commands: bool },
    /// envcraft → init, with three descriptors (stdin, stdout, stderr): run a command. With
    /// `last`, the init ends the sandbox as soon as it has reported this command's end, as
    /// on `Shutdown` (one round trip less for a sandbox of one command).
    Exec {
        id: u64,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        last: bool,
        /// Its working directory (beneath the workspace); `None`: the workspace.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<PathBuf>,
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
    /// init → envcraft: the workspace is mounted, as `kind`. Carries the layer directory's,
    /// the workspace root's and the template view's descriptors; sent again in answer to
    /// [`Report::HandOver`].
    WorkspaceReady { kind: WorkspaceKind },
    /// envcraft → init: send the workspace's descriptors again (envcraft gave its copies back:
    /// see `handback`); answered by [`Report::WorkspaceReady`].
    HandOver,
    /// init → envcraft: the cgroup namespace could (or could not) be entered.
    CgroupNamespace { entered: bool },
    /// init → envcraft: the root is built, the init is restricted as `landlock` says (every
    /// command inherits it), and it serves `Exec` requests.
    Ready { landlock: LandlockOutcome },
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
    /// envcraft → init: stop every other process of the sandbox (SIGSTOP) while envcraft
    /// reads its upper layer; answered by [`Report::Frozen`].
    Freeze,
    /// init → envcraft: every other process is stopped (`stopped`), or some were not within
    /// the freeze's wait.
    Frozen { stopped: bool },
    /// envcraft → init: continue what [`Report::Freeze`] stopped (no answer).
    Thaw,
}

/// One end of the channel.
pub struct Channel {
    fd: OwnedFd,
}

/// The largest report sent in the message itself; a larger one goes in a memfd.
pub const INLINE_MAX: usize = 32 * 1024;
/// The whole message when the report is in the memfd sent with it (a JSON report never starts
/// with `#`).
const IN_MEMFD: &[u8] = b"#memfd";
/// Most descriptors one report carries (one more when the report is in a memfd): `Start`
/// carries a seed and the idmapped trees of the template's layers and bound directories.
pub const MAX_FDS: usize = 64;

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

    /// The end whose descriptor is `fd` (an end handed over by the sandbox maker).
    pub fn from_fd(fd: OwnedFd) -> Channel {
        Channel { fd }
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Send a report, with file descriptors when given.
    pub fn send(&self, report: &Report, fds: &[RawFd]) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(report).map_err(std::io::Error::other)?;
        if bytes.len() > INLINE_MAX {
            let memfd = report_memfd(&bytes)?;
            let all: Vec<RawFd> = std::iter::once(memfd.as_raw_fd())
                .chain(fds.iter().copied())
                .collect();
            return self.send_message(IN_MEMFD, &all);
        }
        self.send_message(&bytes, fds)
    }

    fn send_message(&self, bytes: &[u8], fds: &[RawFd]) -> std::io::Result<()> {
        let iov = [IoSlice::new(bytes)];
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
    ///
    /// A peer that closed its end with a message of ours unread (the init ending the sandbox
    /// as a `Freeze` went out) makes the next read fail with `ECONNRESET` once, though what it
    /// sent before closing is still queued: the error is taken by that read, and the queue is
    /// read on.
    pub fn recv(&self) -> std::io::Result<Option<(Report, Vec<OwnedFd>)>> {
        match self.recv_once() {
            Err(e) if e.raw_os_error() == Some(libc::ECONNRESET) => self.recv_once(),
            other => other,
        }
    }

    fn recv_once(&self) -> std::io::Result<Option<(Report, Vec<OwnedFd>)>> {
        let mut buf = vec![0u8; self.next_message_len()?.max(1)];
        let mut cmsg = nix::cmsg_space!([RawFd; MAX_FDS + 1]);
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
        if &buf[..len] == IN_MEMFD {
            let mut fds = fds.into_iter();
            let memfd = fds.next().ok_or_else(|| {
                std::io::Error::other("a report said to be in a memfd came without one")
            })?;
            let mut bytes = Vec::new();
            std::fs::File::from(memfd).read_to_end(&mut bytes)?;
            let report = serde_json::from_slice(&bytes).map_err(std::io::Error::other)?;
            return Ok(Some((report, fds.collect())));
        }
        let report = serde_json::from_slice(&buf[..len]).map_err(std::io::Error::other)?;
        Ok(Some((report, fds)))
    }

    /// The length of the next message, without taking it (0 at end of stream).
    fn next_message_len(&self) -> std::io::Result<usize> {
        crate::sys::peek_message_len(self.fd.as_raw_fd())
    }
}

/// A sealed memfd holding `bytes`, read from its start by the receiver.
fn report_memfd(bytes: &[u8]) -> std::io::Result<OwnedFd> {
    use nix::sys::memfd::{MFdFlags, memfd_create};
    let memfd = memfd_create(
        c"envcraft-report",
        MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
    )?;
    let mut file = std::fs::File::from(memfd);
    file.write_all(bytes)?;
    file.seek(std::io::SeekFrom::Start(0))?;
    nix::fcntl::fcntl(
        &file,
        nix::fcntl::FcntlArg::F_ADD_SEALS(
            nix::fcntl::SealFlag::F_SEAL_SEAL
                | nix::fcntl::SealFlag::F_SEAL_SHRINK
                | nix::fcntl::SealFlag::F_SEAL_GROW
                | nix::fcntl::SealFlag::F_SEAL_WRITE,
        ),
    )?;
    Ok(file.into())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn exec_of(len: usize) -> Report {
        Report::Exec {
            id: 7,
            argv: vec!["sh".into(), "x".repeat(len)],
            env: vec![("K".into(), "v".repeat(len))],
            last: false,
            cwd: None,
        }
    }

    #[test]
    fn what_a_peer_sent_before_closing_on_an_unread_message_is_still_read() {
        let (a, b) = Channel::pair().unwrap();
        let stopped = Report::Thaw;
        b.send(&stopped, &[]).unwrap();
        a.send(&Report::Freeze, &[]).unwrap();
        // b closes with a's message unread: the kernel marks a's end ECONNRESET.
        drop(b);
        assert_eq!(a.recv().unwrap().map(|(r, _)| r), Some(stopped));
        assert!(a.recv().unwrap().is_none(), "then the end of the stream");
    }

    #[test]
    fn reports_of_every_size_arrive_whole_with_their_descriptors() {
        let (a, b) = Channel::pair().unwrap();
        // Small, past the old fixed 4 KiB buffer, just under and past the inline limit (the
        // latter in a memfd), and 1 MiB.
        for len in [10, 5_000, INLINE_MAX / 2 - 100, INLINE_MAX, 1 << 20] {
            let (r, w) = nix::unistd::pipe().unwrap();
            let sent = exec_of(len);
            a.send(&sent, &[w.as_raw_fd()]).unwrap();
            drop(w);
            let (got, fds) = b.recv().unwrap().unwrap();
            assert_eq!(got, sent, "{len}");
            assert_eq!(fds.len(), 1, "{len}: only the sender's descriptor arrives");
            // It is the pipe's write end: what is written comes out of `r`.
            nix::unistd::write(&fds[0], b"!").unwrap();
            let mut buf = [0u8; 1];
            nix::unistd::read(&r, &mut buf).unwrap();
            assert_eq!(&buf, b"!");
        }
        drop(a);
        assert!(
            b.recv().unwrap().is_none(),
            "end of stream once the sender is gone"
        );
    }
}
