//! A live sandbox's background commands (see [`super`]): started with [`Sandbox::spawn`] or
//! yielded by [`Sandbox::exec_or_yield`], their output collected as it comes, their stdin
//! written to through the pipe the sandbox keeps, their timeouts enforced, and their ends.

use super::*;

/// Why a write to a background command's stdin failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdinError {
    /// No background command has that id.
    Unknown,
    /// It has ended.
    Ended,
    /// Its stdin is closed (it was closed by an earlier `eof`, or it was started without one).
    Closed,
    /// It does not read its input: the pipe is full after `written` of the bytes.
    Full { written: usize },
    /// It closed its end of the pipe.
    Gone,
}

impl Sandbox {
    /// Make room for one more background command: past [`MAX_BACKGROUND`], the oldest that
    /// ended is forgotten (its output with it); when none has ended, the new one is refused, so
    /// that an agent cannot make the host keep the output of thousands of them.
    pub(super) fn make_room_in_background(&mut self) -> Result<(), SandboxError> {
        if self.background.len() < MAX_BACKGROUND {
            return Ok(());
        }
        self.background()?;
        if !self.background.iter().any(|b| b.ended) {
            self.await_an_end()?;
        }
        match self.background.iter().position(|b| b.ended) {
            Some(oldest) => {
                self.background.remove(oldest);
                Ok(())
            }
            None => Err(SandboxError::TooManyBackground(MAX_BACKGROUND)),
        }
    }

    /// Start a command in the background; its id. Its output is collected as it comes (see
    /// [`Sandbox::background`]); it is killed at its timeout (counted from now), at the
    /// sandbox's end or by [`Sandbox::kill_background`]. With [`StdinSource::Pipe`], its stdin
    /// takes what [`Sandbox::write_stdin`] writes. At most [`MAX_BACKGROUND`] are kept (see
    /// [`Sandbox::make_room_in_background`]).
    pub fn spawn(&mut self, request: &ExecRequest) -> Result<u64, SandboxError> {
        self.make_room_in_background()?;
        let start = Instant::now();
        let l = self.launch(request, false)?;
        let id = l.id;
        self.keep_in_background(
            id,
            request,
            (Some(l.out), Some(l.err)),
            l.direct,
            l.stdin,
            start + request.timeout,
            ExecResult::default(),
        )?;
        Ok(id)
    }

    /// Keep command `id` (whose launch gave `pipes`, `direct` and `stdin`) as a background
    /// command, with what it printed so far in `so_far`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn keep_in_background(
        &mut self,
        id: u64,
        request: &ExecRequest,
        pipes: (Option<OwnedFd>, Option<OwnedFd>),
        direct: Option<(Pid, OwnedFd)>,
        stdin: Option<OwnedFd>,
        deadline: Instant,
        so_far: ExecResult,
    ) -> Result<(), SandboxError> {
        for fd in [&pipes.0, &pipes.1].into_iter().flatten() {
            nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK))
                .map_err(nix_os("make a pipe non-blocking"))?;
        }
        self.background.push(Background {
            id,
            argv: request.argv.clone(),
            out: pipes.0,
            err: pipes.1,
            direct,
            stdin,
            deadline: Some(deadline),
            timed_out: false,
            cwd: request.cwd.clone(),
            stdout: so_far.stdout,
            stderr: so_far.stderr,
            stdout_truncated: so_far.stdout_truncated,
            stderr_truncated: so_far.stderr_truncated,
            exit_code: so_far.exit_code,
            signal: so_far.signal,
            ended: false,
        });
        Ok(())
    }

    /// Wait (at most 1 s) for one of the background commands to be reported ended: one that
    /// just exited, or was just killed, has its report on the way.
    pub(super) fn await_an_end(&mut self) -> Result<(), SandboxError> {
        self.await_end_of(None, Duration::from_secs(1))
    }

    /// Wait at most `limit` for background command `id` (any, without one) to be reported
    /// ended.
    fn await_end_of(&mut self, id: Option<u64>, limit: Duration) -> Result<(), SandboxError> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            let channel = self.channel();
            let mut fds = [PollFd::new(channel.as_fd(), PollFlags::POLLIN)];
            let _ = poll(&mut fds, PollTimeout::from(10u8));
            if self
                .background()?
                .iter()
                .any(|b| b.ended && id.is_none_or(|id| b.id == id))
            {
                break;
            }
        }
        Ok(())
    }

    /// Wait at most `limit` for background command `id` to end or print something past
    /// `seen` bytes of (stdout, stderr) (the wait of `process poll` with a timeout).
    pub fn await_news(
        &mut self,
        id: u64,
        seen: (usize, usize),
        limit: Duration,
    ) -> Result<(), SandboxError> {
        let deadline = Instant::now() + limit;
        loop {
            let news = self
                .background()?
                .iter()
                .find(|b| b.id == id)
                .is_none_or(|b| b.ended || b.stdout.len() > seen.0 || b.stderr.len() > seen.1);
            let left = deadline.saturating_duration_since(Instant::now());
            if news || left.is_zero() {
                return Ok(());
            }
            // Woken by the channel (an end) or the command's output, whichever comes first.
            let ms = left.as_millis().clamp(1, 50) as u8;
            let channel = self.channel();
            let mut fds = vec![PollFd::new(channel.as_fd(), PollFlags::POLLIN)];
            if let Some(b) = self.background.iter().find(|b| b.id == id) {
                for fd in [&b.out, &b.err].into_iter().flatten() {
                    fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
                }
            }
            let _ = poll(&mut fds, PollTimeout::from(ms));
        }
    }

    /// The background commands, with everything they printed and how they ended so far. One
    /// past its deadline is killed now (and marked `timed_out`).
    pub fn background(&mut self) -> Result<&[Background], SandboxError> {
        // Reports waiting on the channel (ends of background commands).
        loop {
            let channel = self.channel();
            let mut fds = [PollFd::new(channel.as_fd(), PollFlags::POLLIN)];
            if !matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0) {
                break;
            }
            match self.channel().recv() {
                Ok(Some((report, fds))) => {
                    if let Some(other) = self.absorb(report, fds)? {
                        self.pending.push(other);
                    }
                }
                _ => break,
            }
        }
        let cap = self.plan.output_bytes as usize;
        let mut buf = vec![0u8; 64 * 1024];
        let pending = std::mem::take(&mut self.pending);
        let mut keep = Vec::new();
        for report in pending {
            let target = match &report {
                Report::Exited { id, .. } | Report::Signaled { id, .. } => {
                    self.background.iter_mut().find(|b| b.id == *id)
                }
                _ => None,
            };
            match (target, report) {
                (Some(b), Report::Exited { code, .. }) => {
                    b.exit_code = Some(code);
                    b.ended = true;
                }
                (Some(b), Report::Signaled { signal, .. }) => {
                    b.signal = Some(signal);
                    b.ended = true;
                }
                (_, other) => keep.push(other),
            }
        }
        self.pending = keep;
        let now = Instant::now();
        let mut overdue = Vec::new();
        for b in &mut self.background {
            for (pipe, sink, truncated) in [
                (&mut b.out, &mut b.stdout, &mut b.stdout_truncated),
                (&mut b.err, &mut b.stderr, &mut b.stderr_truncated),
            ] {
                while let Some(fd) = pipe.as_ref() {
                    match nix::unistd::read(fd, &mut buf) {
                        Ok(0) => *pipe = None,
                        Ok(n) => *truncated |= append_capped(sink, &buf[..n], cap),
                        Err(nix::errno::Errno::EAGAIN) => break,
                        Err(_) => *pipe = None,
                    }
                }
            }
            if let Some((pid, _)) = &b.direct
                && !b.ended
            {
                match waitpid(*pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG)) {
                    Ok(WaitStatus::Exited(_, code)) => {
                        b.exit_code = Some(code);
                        b.ended = true;
                    }
                    Ok(WaitStatus::Signaled(_, s, _)) => {
                        b.signal = Some(s as i32);
                        b.ended = true;
                    }
                    _ => {}
                }
            }
            if b.ended {
                b.stdin = None;
            } else if b.deadline.is_some_and(|d| now >= d) && !b.timed_out {
                b.timed_out = true;
                overdue.push((b.id, b.direct.as_ref().map(|(p, _)| *p)));
            }
        }
        for (id, direct) in overdue {
            self.signal(id, direct, Signal::SIGKILL);
        }
        Ok(&self.background)
    }

    /// Kill background command `id` and its process group; false if there is none.
    pub fn kill_background(&mut self, id: u64) -> bool {
        let Some(b) = self.background.iter().find(|b| b.id == id) else {
            return false;
        };
        if !b.ended {
            let direct = b.direct.as_ref().map(|(p, _)| *p);
            self.signal(id, direct, Signal::SIGKILL);
        }
        true
    }

    /// Forget background command `id` and its output, killing it first if it still runs (its
    /// end is waited for, at most a second, so that no report of it is left to linger); false
    /// if there is none.
    pub fn forget_background(&mut self, id: u64) -> Result<bool, SandboxError> {
        if !self.kill_background(id) {
            return Ok(false);
        }
        if self.background()?.iter().any(|b| b.id == id && !b.ended) {
            self.await_end_of(Some(id), Duration::from_secs(1))?;
        }
        self.background.retain(|b| b.id != id);
        Ok(true)
    }

    /// Write `bytes` to background command `id`'s stdin (at once, never blocking: a command
    /// that does not read its input fills the pipe, which is an error); with `eof`, close it
    /// after. The number of bytes written.
    pub fn write_stdin(&mut self, id: u64, bytes: &[u8], eof: bool) -> Result<usize, StdinError> {
        let _ = self.background();
        let Some(b) = self.background.iter_mut().find(|b| b.id == id) else {
            return Err(StdinError::Unknown);
        };
        if b.ended {
            return Err(StdinError::Ended);
        }
        let Some(fd) = b.stdin.as_ref() else {
            return Err(StdinError::Closed);
        };
        let mut written = 0;
        while written < bytes.len() {
            match nix::unistd::write(fd, &bytes[written..]) {
                Ok(n) => written += n,
                Err(nix::errno::Errno::EINTR) => {}
                Err(nix::errno::Errno::EAGAIN) => return Err(StdinError::Full { written }),
                Err(_) => {
                    b.stdin = None;
                    return Err(StdinError::Gone);
                }
            }
        }
        if eof {
            b.stdin = None;
        }
        Ok(written)
    }
}

impl Background {
    /// Whether its stdin still takes input.
    pub fn stdin_open(&self) -> bool {
        self.stdin.is_some()
    }
}
