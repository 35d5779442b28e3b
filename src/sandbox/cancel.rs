//! Cancelling the command a sandbox is running in the foreground, from another thread.
//!
//! A caller that may give up on a call (an MCP client's `notifications/cancelled`) asks the
//! sandbox for its [`Cancel`] once, and [`Cancel::fire`]s it while a call runs. The command
//! being supervised (see `live_commands`) is then killed with its process group, as at its
//! deadline, and its result says `cancelled`. The handle costs the sandbox an eventfd (to wake
//! the supervisor's poll), made only for the sandboxes that are asked for one.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// A cancellation handle of one sandbox, shared by whoever may fire it.
#[derive(Debug)]
pub struct Cancel {
    fired: AtomicBool,
    /// Readable once fired (an eventfd; drained by [`Cancel::reset`]).
    wake: OwnedFd,
}

impl Cancel {
    pub fn new() -> io::Result<Cancel> {
        // SAFETY: eventfd takes no pointers; the descriptor it returns is ours alone.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Cancel {
            fired: AtomicBool::new(false),
            // SAFETY: `fd` was just returned by eventfd and is owned by nothing else.
            wake: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Cancel the foreground command running now (or the next one, until [`Cancel::reset`]).
    pub fn fire(&self) {
        self.fired.store(true, Ordering::SeqCst);
        let one: u64 = 1;
        // A full counter (never, at one write per cancel) would only mean it is readable.
        let _ = nix::unistd::write(&self.wake, &one.to_ne_bytes());
    }

    /// Whether it was fired since the last reset.
    pub fn is_fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// Forget a firing (before a call begins, and after it ended): whether there was one.
    pub fn reset(&self) -> bool {
        let mut count = [0u8; 8];
        let _ = nix::unistd::read(&self.wake, &mut count);
        self.fired.swap(false, Ordering::SeqCst)
    }

    /// The descriptor to poll: readable once fired.
    pub fn wake_fd(&self) -> BorrowedFd<'_> {
        self.wake.as_fd()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

    fn readable(cancel: &Cancel) -> bool {
        let mut fds = [PollFd::new(cancel.wake_fd(), PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::ZERO).unwrap() == 1
    }

    #[test]
    fn a_firing_wakes_a_poll_until_it_is_reset() {
        let cancel = Cancel::new().unwrap();
        assert!(!cancel.is_fired() && !readable(&cancel));
        cancel.fire();
        cancel.fire();
        assert!(cancel.is_fired() && readable(&cancel));
        assert!(cancel.reset());
        assert!(!cancel.is_fired() && !readable(&cancel));
        assert!(!cancel.reset());
    }
}
