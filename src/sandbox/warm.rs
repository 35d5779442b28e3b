//! Sandboxes begun ahead of need: a few inits cloned by the sandbox maker, their namespaces
//! made (the network namespace above all, the longest part of a sandbox's start), waiting for
//! a plan, so that a session's create does not wait for them.
//!
//! A warm init is what [`Prestart::clone`] makes, only earlier: it has been given nothing yet
//! (no plan, no uid map, no workspace, no limits, no clock, no environment: all of it comes
//! with `Start`, as for a fresh one), it has run nothing, and it serves one sandbox only: it is
//! never handed back. What tells it from a fresh one is its start time in `/proc` (seconds
//! earlier at most under load).
//!
//! Each kind (with or without a network namespace) is kept only once something asked for it,
//! up to [`start`]'s `size` each; a refill thread makes one whenever one is taken, once creates
//! pause (see [`super::pool::QUIET`]). An init
//! that died while it waited (killed from outside) is dropped when it is taken, and a fresh
//! one is cloned instead.

use std::sync::{Arc, Condvar, Mutex, OnceLock};

use super::{Prestart, SandboxError};

/// The warm inits of one process, by kind (index 1: with a network namespace).
struct Pool {
    size: usize,
    state: Mutex<Kinds>,
    wanted: Condvar,
}

#[derive(Default)]
struct Kinds {
    ready: [Vec<Prestart>; 2],
    /// Whether the kind was ever asked for (only those are kept warm).
    asked: [bool; 2],
    /// The server is stopping: nothing more is made or handed out.
    closed: bool,
    /// An init is being made (outside the lock).
    making: bool,
}

static POOL: OnceLock<Arc<Pool>> = OnceLock::new();

/// How long the refill waits after a clone failed (not for want of the maker).
const RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// Keep up to `size` inits of each kind warm, made by the sandbox maker (nothing without one,
/// or with `size` 0). Once per process; later calls do nothing.
pub fn start(size: usize) -> Result<(), std::io::Error> {
    if size == 0 || !super::maker::running() || POOL.get().is_some() {
        return Ok(());
    }
    let pool = Arc::new(Pool {
        size,
        state: Mutex::new(Kinds::default()),
        wanted: Condvar::new(),
    });
    let refill = pool.clone();
    std::thread::Builder::new()
        .name("envcraft-warm".into())
        .spawn(move || refill.refill())?;
    let _ = POOL.set(pool);
    Ok(())
}

/// A warm init of this kind, if one is ready (and records that the kind is wanted).
pub(super) fn take(network: bool) -> Option<Prestart> {
    let pool = POOL.get()?;
    let kind = usize::from(network);
    let mut state = pool.lock();
    if state.closed {
        return None;
    }
    state.asked[kind] = true;
    let taken = loop {
        match state.ready[kind].pop() {
            Some(init) if init.alive() => break Some(init),
            // Died while waiting: dropped (reaped) here; try the next.
            Some(_) => continue,
            None => break None,
        }
    };
    drop(state);
    pool.wanted.notify_one();
    taken
}

/// End every warm init and make no more (the server is stopping); waits, up to
/// [`super::pool::DRAIN_WAIT`], for one being made, which is ended too.
pub fn drain() {
    let Some(pool) = POOL.get() else {
        return;
    };
    let mut state = pool.lock();
    state.closed = true;
    let ready: Vec<Prestart> = state.ready.iter_mut().flat_map(std::mem::take).collect();
    pool.wanted.notify_all();
    let deadline = std::time::Instant::now() + super::pool::DRAIN_WAIT;
    while state.making {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        state = pool
            .wanted
            .wait_timeout(state, left)
            .map(|(guard, _)| guard)
            .unwrap_or_else(|poisoned| poisoned.into_inner().0);
    }
    drop(state);
    drop(ready);
}

/// How many warm inits are ready, of each kind (without, with a network namespace).
pub fn ready() -> [usize; 2] {
    POOL.get().map_or([0, 0], |pool| {
        let state = pool.lock();
        [state.ready[0].len(), state.ready[1].len()]
    })
}

impl Pool {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kinds> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The kind that is wanted and short, if any.
    fn short(&self, state: &Kinds) -> Option<bool> {
        [true, false].into_iter().find(|&network| {
            let kind = usize::from(network);
            state.asked[kind] && state.ready[kind].len() < self.size
        })
    }

    /// Make inits as they are taken, forever (the thread ends with the process).
    fn refill(&self) {
        loop {
            let network = {
                let mut state = self.lock();
                loop {
                    if state.closed {
                        return;
                    }
                    match self.short(&state) {
                        Some(network) => {
                            state.making = true;
                            break network;
                        }
                        None => {
                            state = self
                                .wanted
                                .wait(state)
                                .unwrap_or_else(|poisoned| poisoned.into_inner());
                        }
                    }
                }
            };
            super::pool::wait_quiet();
            let made = Prestart::clone_now(network);
            let mut state = self.lock();
            if state.closed {
                // Ended before the drain's wait ends: `making` is cleared only after.
                drop(state);
                drop(made);
                self.lock().making = false;
                self.wanted.notify_all();
                return;
            }
            state.making = false;
            drop(state);
            match made {
                Ok(init) => self.lock().ready[usize::from(network)].push(init),
                // The maker is gone: creates fail on their own.
                Err(e @ SandboxError::MakerGone(_)) => return log_stop(&e),
                // Clones fail for now (processes or memory at their limit): creates clone on
                // their own meanwhile; try again in a while rather than spin.
                Err(e) => {
                    tracing::debug!(error = %crate::error::Chain(&e), "cannot warm a sandbox now");
                    std::thread::sleep(RETRY_AFTER);
                }
            }
        }
    }
}

fn log_stop(e: &SandboxError) {
    tracing::warn!(error = %crate::error::Chain(e), "no more warm sandboxes: cloning one failed");
}
