//! A live sandbox's commands (see [`super`]): signals, and the supervision of one command to
//! its end (output captured with a cap, the wall-clock limit) or to its yield to the background.

use super::*;

impl Sandbox {
    /// Run one command to its end with `run` and say whether the OOM killer ended it: it died
    /// of SIGKILL, not at its timeout, while the memory cgroup's count of OOM kills rose.
    pub(super) fn noting_oom(
        &mut self,
        run: impl FnOnce(&mut Sandbox) -> Result<ExecResult, SandboxError>,
    ) -> Result<ExecResult, SandboxError> {
        let kills = |sandbox: &Sandbox| sandbox.cgroup.as_ref().and_then(RunCgroup::oom_kills);
        let before = kills(self);
        let mut r = run(self)?;
        r.oom_killed = !r.timed_out
            && r.signal == Some(Signal::SIGKILL as i32)
            && matches!((before, kills(self)), (Some(b), Some(a)) if a > b);
        Ok(r)
    }

    /// The handle that cancels the command this sandbox runs in the foreground (made on the
    /// first ask; see [`crate::sandbox::cancel`]).
    pub fn cancel_handle(&mut self) -> io::Result<std::sync::Arc<crate::sandbox::cancel::Cancel>> {
        if let Some(cancel) = &self.cancel {
            return Ok(cancel.clone());
        }
        let cancel = std::sync::Arc::new(crate::sandbox::cancel::Cancel::new()?);
        self.cancel = Some(cancel.clone());
        Ok(cancel)
    }

    /// Ask the sandbox to signal command `id`'s process group.
    pub(super) fn signal(&self, id: u64, direct: Option<Pid>, signal: Signal) {
        match (&self.backend, direct) {
            (_, Some(pid)) => {
                let _ = killpg(pid, signal);
                let _ = kill(pid, signal);
            }
            (Backend::Namespaced { channel, .. }, None) => {
                let _ = channel.send(
                    &Report::Signal {
                        id,
                        signal: signal as i32,
                    },
                    &[],
                );
            }
            (Backend::Host { .. }, None) => {}
        }
    }

    pub(super) fn channel(&self) -> &Channel {
        match &self.backend {
            Backend::Namespaced { channel, .. } => channel,
            Backend::Host { parent_end, .. } => parent_end,
        }
    }

    /// Supervise launched command `l` to its end, or (with `yield_at`) until then: a command
    /// still running at `yield_at` is kept in the background (see
    /// [`Sandbox::exec_or_yield`]).
    pub(super) fn supervise(
        &mut self,
        l: Launched,
        request: &ExecRequest,
        start: Instant,
        yield_at: Option<Instant>,
    ) -> Result<ExecResult, SandboxError> {
        let Launched {
            id,
            out,
            err,
            mut direct,
            stdin,
        } = l;
        // The write end of a piped stdin lives as long as the command is supervised here.
        let mut stdin = stdin;
        let mut r = ExecResult::default();
        let cap = self.plan.output_bytes as usize;
        let deadline = start + request.timeout;
        // After the command ended, how long to keep draining output still held by processes
        // it left behind (in a session they live on; see the `process` tool).
        let grace = Duration::from_millis(200);
        let mut ended_at: Option<Instant> = None;
        let (mut out_open, mut err_open) = (true, true);
        // A pipe is closed once it is no longer read: at its end, or when passing its output
        // through failed (envcraft's own stdout went away, as in `envcraft exec ... | head`), so
        // that the command's next write fails as it would have without envcraft in between.
        let (mut out, mut err) = (Some(out), Some(err));
        let mut buf = vec![0u8; 64 * 1024];
        // Both stop being watched once they close after the command's end (after
        // `exec_last`, the init ends the sandbox and exits on its own).
        let mut channel_open = true;
        let mut init_pidfd = match &self.backend {
            Backend::Namespaced { init, .. } => Some(super::init_pidfd(*init)?),
            Backend::Host { .. } => None,
        };
        let direct_pid = direct.as_ref().map(|(p, _)| *p);
        let cancel = self.cancel.clone();
        loop {
            let now = Instant::now();
            let cancelled = cancel.as_ref().is_some_and(|c| c.is_fired());
            if ended_at.is_none() && cancelled && !r.cancelled && !r.timed_out {
                r.cancelled = true;
                self.signal(id, direct_pid, Signal::SIGKILL);
                if let Some(cg) = &self.cgroup
                    && direct.is_some()
                {
                    cg.kill_all();
                }
            }
            if ended_at.is_none() && now >= deadline && !r.timed_out && !r.cancelled {
                r.timed_out = true;
                self.signal(id, direct_pid, Signal::SIGKILL);
                if let Some(cg) = &self.cgroup
                    && direct.is_some()
                {
                    cg.kill_all();
                }
            }
            if let Some(t) = ended_at
                && (now >= t + grace || !(out_open || err_open))
            {
                break;
            }
            if ended_at.is_none()
                && !r.timed_out
                && !r.cancelled
                && yield_at.is_some_and(|y| now >= y)
            {
                let pipes = (
                    out.take().filter(|_| out_open),
                    err.take().filter(|_| err_open),
                );
                r.duration = start.elapsed();
                let so_far = r.clone();
                self.keep_in_background(
                    id,
                    request,
                    pipes,
                    direct.take(),
                    stdin.take(),
                    deadline,
                    so_far,
                )?;
                r.yielded = Some(id);
                return Ok(r);
            }
            let wait_until = match ended_at {
                Some(t) => t + grace,
                None if r.timed_out || r.cancelled => now + Duration::from_secs(5),
                None => yield_at.map_or(deadline, |y| y.min(deadline)),
            };
            let timeout_ms = wait_until
                .saturating_duration_since(now)
                .as_millis()
                .clamp(1, 60_000) as i32;
            let channel = self.channel();
            let mut fds = Vec::with_capacity(6);
            let mut slots = [usize::MAX; 6];
            if channel_open {
                slots[4] = 0;
                fds.push(PollFd::new(channel.as_fd(), PollFlags::POLLIN));
            }
            for (slot, (open, fd)) in [(out_open, &out), (err_open, &err)].into_iter().enumerate() {
                if let (true, Some(fd)) = (open, fd) {
                    slots[slot] = fds.len();
                    fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
                }
            }
            if let Some(pidfd) = &init_pidfd {
                slots[2] = fds.len();
                fds.push(PollFd::new(pidfd.as_fd(), PollFlags::POLLIN));
            }
            if let Some((_, pidfd)) = &direct {
                slots[3] = fds.len();
                fds.push(PollFd::new(pidfd.as_fd(), PollFlags::POLLIN));
            }
            // Woken by a cancel (once taken, `r.cancelled` keeps it from spinning the loop).
            if let Some(cancel) = cancel.as_ref().filter(|_| !r.cancelled) {
                slots[5] = fds.len();
                fds.push(PollFd::new(cancel.wake_fd(), PollFlags::POLLIN));
            }
            match poll(
                &mut fds,
                PollTimeout::try_from(timeout_ms).unwrap_or(PollTimeout::MAX),
            ) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(nix_os("poll the sandbox")(e)),
            }
            let ready = |slot: usize| {
                slots[slot] != usize::MAX
                    && fds[slots[slot]].revents().is_some_and(|r| !r.is_empty())
            };
            let ch_ready = ready(4);
            let (out_ready, err_ready, init_gone, direct_done) =
                (ready(0), ready(1), ready(2), ready(3));
            drop(fds);
            for (ready, pipe, open, sink, truncated, stream) in [
                (
                    out_ready,
                    &out,
                    &mut out_open,
                    &mut r.stdout,
                    &mut r.stdout_truncated,
                    1,
                ),
                (
                    err_ready,
                    &err,
                    &mut err_open,
                    &mut r.stderr,
                    &mut r.stderr_truncated,
                    2,
                ),
            ] {
                let (true, Some(pipe)) = (ready, pipe) else {
                    continue;
                };
                match nix::unistd::read(pipe, &mut buf) {
                    Ok(0) | Err(_) => *open = false,
                    Ok(n) => {
                        let kept = sink.len();
                        *truncated |= append_capped(sink, &buf[..n], cap);
                        if request.output == OutputMode::PassThrough {
                            let passed = match stream {
                                1 => io::stdout()
                                    .write_all(&sink[kept..])
                                    .and_then(|_| io::stdout().flush()),
                                _ => io::stderr().write_all(&sink[kept..]),
                            };
                            if passed.is_err() {
                                *open = false;
                            }
                        }
                    }
                }
            }
            if !out_open {
                out = None;
            }
            if !err_open {
                err = None;
            }
            if ch_ready {
                match self.channel().recv() {
                    Ok(Some((report, fds))) => {
                        if let Some(other) = self.absorb(report, fds)? {
                            self.pending.push(other);
                        }
                    }
                    Ok(None) | Err(_) => {
                        if init_pidfd.is_some() && ended_at.is_none() {
                            return Err(SandboxError::Lost);
                        }
                        channel_open = false;
                    }
                }
            }
            if let Some(ended) = self.take_ending(id, &mut r, request)? {
                ended_at.get_or_insert(ended);
            }
            if direct_done && ended_at.is_none() {
                if let Some((pid, _)) = &direct {
                    match waitpid(*pid, None) {
                        Ok(WaitStatus::Exited(_, code)) => r.exit_code = r.exit_code.or(Some(code)),
                        Ok(WaitStatus::Signaled(_, s, _)) => r.signal = Some(s as i32),
                        _ => {}
                    }
                    // Without a PID namespace what the command left behind ends now.
                    let _ = killpg(*pid, Signal::SIGKILL);
                }
                ended_at = Some(Instant::now());
            }
            if init_gone && ended_at.is_none() {
                // The init exited. After `exec_last` it does once the command has ended, and
                // the report of that end is queued; otherwise it died, and what it said last
                // (a failed setup step) explains why.
                while let Ok(Some((report, fds))) = self.channel().recv() {
                    if let Some(other) = self.absorb(report, fds)? {
                        self.pending.push(other);
                    }
                }
                channel_open = false;
                match self.take_ending(id, &mut r, request)? {
                    Some(ended) => ended_at = Some(ended),
                    None => return Err(SandboxError::Lost),
                }
            }
            if init_gone {
                init_pidfd = None;
            }
        }
        if r.exit_code.is_none() && r.signal.is_none() && r.timed_out {
            r.signal = Some(Signal::SIGKILL as i32);
        }
        drop(stdin);
        r.duration = start.elapsed();
        Ok(r)
    }

    /// Consume the pending reports about command `id`; `Some(now)` once it has ended.
    pub(super) fn take_ending(
        &mut self,
        id: u64,
        r: &mut ExecResult,
        request: &ExecRequest,
    ) -> Result<Option<Instant>, SandboxError> {
        let mut ended = None;
        let mut keep = Vec::new();
        for report in std::mem::take(&mut self.pending) {
            match report {
                Report::SetupFailed {
                    id: Some(i),
                    step,
                    errno,
                    detail,
                } if i == id => {
                    return Err(SandboxError::Setup {
                        step,
                        errno,
                        detail,
                    });
                }
                Report::CommandReady {
                    id: i, landlock, ..
                } if i == id => {
                    self.landlock = Some(landlock);
                }
                Report::ExecFailed {
                    id: i,
                    errno,
                    exit_code,
                } if i == id => {
                    let message = match exit_code {
                        127 => format!("envcraft: {}: command not found\n", request.argv[0]),
                        _ => format!(
                            "envcraft: {}: cannot execute: {}\n",
                            request.argv[0],
                            io::Error::from_raw_os_error(errno)
                        ),
                    };
                    r.stderr.extend_from_slice(message.as_bytes());
                    if request.output == OutputMode::PassThrough {
                        let _ = io::stderr().write_all(message.as_bytes());
                    }
                    r.exit_code = Some(exit_code);
                }
                Report::Exited { id: i, code } if i == id => {
                    r.exit_code = r.exit_code.or(Some(code));
                    ended = Some(Instant::now());
                }
                Report::Signaled { id: i, signal } if i == id => {
                    if r.exit_code.is_none() {
                        r.signal = Some(signal);
                    }
                    ended = Some(Instant::now());
                }
                other => keep.push(other),
            }
        }
        self.pending = keep;
        Ok(ended)
    }
}
