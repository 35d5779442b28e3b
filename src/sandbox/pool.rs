//! Sandboxes built ahead of need, by plan: for a plan asked for more than once (the N
//! rollouts of one task), a few sandboxes of exactly that plan are built in the background and
//! wait, root built and restricted, for the next create to take one whole.
//!
//! A pooled sandbox is a fresh one built earlier: made by [`Sandbox::start`] from the same
//! [`Plan`] (so the same root, workspace, limits, environment, policy and protections), with
//! nothing run in it and nothing given to it but the plan; it is taken once and never handed
//! back (a closed session's sandbox is closed, never pooled). The session's clock and seed are
//! not part of the sandbox (they reach each command with the call), so they are the session's
//! own. What tells it from a fresh one is its start time in `/proc`, and that the template was
//! mounted when it was built: a template edited meanwhile shows as it would to a session
//! opened before the edit.
//!
//! Built when creates pause: a build starts no sooner than [`QUIET`] after the last create
//! asked for a sandbox, so that the create that took one is not slowed by the build of the one
//! that replaces it (on two cores they ran side by side: a taken sandbox's create took 1.2-1.9
//! ms instead of 0.6). Under a steady stream of creates nothing is built ahead: the creates
//! build their own, which is the same work, and the pool refills at the first pause.
//!
//! Bounded: [`start`]'s `per_plan` sandboxes for each of at most [`MAX_PLANS`] plans, the plans
//! used least recently dropped (their sandboxes closed). A plan whose build fails is no longer
//! pooled. A sandbox whose init died while it waited is closed when it is taken.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::plan::Plan;
use super::{Sandbox, SandboxError};

/// The most plans kept built at once.
pub const MAX_PLANS: usize = 8;

/// How many times a plan must be asked for before it is pooled: a task opened once costs no
/// sandboxes nobody takes.
const ASKS_BEFORE_POOLING: u64 = 2;

struct Pool {
    per_plan: usize,
    state: Mutex<Plans>,
    wanted: Condvar,
}

#[derive(Default)]
struct Plans {
    by_key: HashMap<Vec<u8>, Entry>,
    /// Keys, least recently asked for first.
    recent: VecDeque<Vec<u8>>,
    /// The server is stopping: nothing more is built or handed out.
    closed: bool,
    /// A sandbox is being built (outside the lock).
    building: bool,
}

struct Entry {
    plan: Plan,
    state_root: PathBuf,
    ready: Vec<Sandbox>,
    asks: u64,
    /// Building this plan failed once: it is no longer built ahead.
    failed: bool,
}

static POOL: OnceLock<Arc<Pool>> = OnceLock::new();

/// How long after a create asked for a sandbox nothing is built ahead (here, or a warm init).
pub const QUIET: Duration = Duration::from_millis(3);

/// When a create last asked for a sandbox: nanoseconds since [`EPOCH`], 0 for never.
static LAST_ASK: AtomicU64 = AtomicU64::new(0);
static EPOCH: OnceLock<Instant> = OnceLock::new();

fn since_epoch() -> u64 {
    let epoch = *EPOCH.get_or_init(Instant::now);
    u64::try_from(epoch.elapsed().as_nanos())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// Sleep until no create has asked for a sandbox for [`QUIET`] (at once when none has).
pub(super) fn wait_quiet() {
    loop {
        let last = LAST_ASK.load(Ordering::Relaxed);
        if last == 0 {
            return;
        }
        let since = Duration::from_nanos(since_epoch().saturating_sub(last));
        match QUIET.checked_sub(since) {
            Some(left) if !left.is_zero() => std::thread::sleep(left),
            _ => return,
        }
    }
}

/// Keep `per_plan` sandboxes built for each plan asked for more than once (nothing with 0).
/// Once per process; later calls do nothing. Scope: a process whose inits come from the
/// sandbox maker (a clone from this thread would copy the whole server otherwise).
pub fn start(per_plan: usize) -> Result<(), std::io::Error> {
    if per_plan == 0 || !super::maker::running() || POOL.get().is_some() {
        return Ok(());
    }
    let pool = Arc::new(Pool {
        per_plan,
        state: Mutex::new(Plans::default()),
        wanted: Condvar::new(),
    });
    let builder = pool.clone();
    std::thread::Builder::new()
        .name("envcraft-pool".into())
        .spawn(move || builder.build_forever())?;
    let _ = POOL.set(pool);
    Ok(())
}

/// Whether sandboxes are pooled in this process.
pub fn active() -> bool {
    POOL.get().is_some()
}

/// A sandbox built ahead for `plan` under `state_root`, if one is ready; records the ask
/// either way (the plan is pooled from its second ask on).
pub(super) fn take(plan: &Plan, state_root: &Path) -> Option<Sandbox> {
    let pool = POOL.get()?;
    LAST_ASK.store(since_epoch(), Ordering::Relaxed);
    let key = serde_json::to_vec(&(plan, state_root)).ok()?;
    let mut plans = pool.lock();
    if plans.closed {
        return None;
    }
    plans.touch(&key);
    let entry = plans.by_key.entry(key.clone()).or_insert_with(|| Entry {
        plan: plan.clone(),
        state_root: state_root.to_path_buf(),
        ready: Vec::new(),
        asks: 0,
        failed: false,
    });
    entry.asks += 1;
    let mut dead = Vec::new();
    let taken = loop {
        match entry.ready.pop() {
            Some(sandbox) if sandbox.init_alive() => break Some(sandbox),
            Some(sandbox) => dead.push(sandbox),
            None => break None,
        }
    };
    let evicted = plans.evict_beyond(MAX_PLANS);
    drop(plans);
    pool.wanted.notify_one();
    // Closed outside the lock: a close waits for the init to end.
    drop((dead, evicted));
    taken
}

/// Close every sandbox built ahead and build no more (the server is stopping): waits, up to
/// [`DRAIN_WAIT`], for a build under way, which is closed too. Their directories, cgroups and
/// processes go with them.
pub fn drain() {
    let Some(pool) = POOL.get() else {
        return;
    };
    let mut plans = pool.lock();
    plans.closed = true;
    let ready: Vec<Sandbox> = plans
        .by_key
        .drain()
        .flat_map(|(_, entry)| entry.ready)
        .collect();
    plans.recent.clear();
    pool.wanted.notify_all();
    let deadline = std::time::Instant::now() + DRAIN_WAIT;
    while plans.building {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        plans = pool
            .wanted
            .wait_timeout(plans, left)
            .map(|(guard, _)| guard)
            .unwrap_or_else(|poisoned| poisoned.into_inner().0);
    }
    drop(plans);
    drop(ready);
}

/// The longest [`drain`] waits for a sandbox being built.
pub const DRAIN_WAIT: Duration = Duration::from_secs(10);

/// How many sandboxes are built and waiting, over all plans.
pub fn ready() -> usize {
    POOL.get().map_or(0, |pool| {
        pool.lock().by_key.values().map(|e| e.ready.len()).sum()
    })
}

impl Plans {
    /// Move `key` to the most recent end.
    fn touch(&mut self, key: &[u8]) {
        if let Some(at) = self.recent.iter().position(|k| k == key) {
            self.recent.remove(at);
        }
        self.recent.push_back(key.to_vec());
    }

    /// Drop the plans used least recently beyond `max`; their sandboxes, to be closed.
    fn evict_beyond(&mut self, max: usize) -> Vec<Sandbox> {
        let mut closed = Vec::new();
        while self.recent.len() > max {
            if let Some(key) = self.recent.pop_front()
                && let Some(entry) = self.by_key.remove(&key)
            {
                closed.extend(entry.ready);
            }
        }
        closed
    }

    /// A plan to build one more sandbox for: asked for often enough, short, not failed.
    fn short(&self, per_plan: usize) -> Option<(Vec<u8>, Plan, PathBuf)> {
        self.recent.iter().rev().find_map(|key| {
            let entry = self.by_key.get(key)?;
            (entry.asks >= ASKS_BEFORE_POOLING && !entry.failed && entry.ready.len() < per_plan)
                .then(|| (key.clone(), entry.plan.clone(), entry.state_root.clone()))
        })
    }
}

impl Pool {
    fn lock(&self) -> std::sync::MutexGuard<'_, Plans> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Build sandboxes as they are wanted, forever (the thread ends with the process).
    fn build_forever(&self) {
        loop {
            let (key, plan, state_root) = {
                let mut plans = self.lock();
                loop {
                    if plans.closed {
                        return;
                    }
                    match plans.short(self.per_plan) {
                        Some(next) => {
                            plans.building = true;
                            break next;
                        }
                        None => {
                            plans = self
                                .wanted
                                .wait(plans)
                                .unwrap_or_else(|poisoned| poisoned.into_inner());
                        }
                    }
                }
            };
            wait_quiet();
            let built = build(&plan, &state_root);
            let mut plans = self.lock();
            if plans.closed {
                // Closed before the drain's wait ends: `building` is cleared only after.
                drop(plans);
                drop(built);
                self.lock().building = false;
                self.wanted.notify_all();
                return;
            }
            plans.building = false;
            let Some(entry) = plans.by_key.get_mut(&key) else {
                // Evicted while it was built: closed below, outside the lock.
                drop(plans);
                drop(built);
                continue;
            };
            match built {
                Ok(sandbox) => entry.ready.push(sandbox),
                Err(e) => {
                    entry.failed = true;
                    tracing::info!(error = %crate::error::Chain(&e), "a plan is no longer built ahead: building it failed");
                }
            }
        }
    }
}

/// One sandbox of `plan`, built and ready to serve.
fn build(plan: &Plan, state_root: &Path) -> Result<Sandbox, SandboxError> {
    let mut sandbox = Sandbox::start(plan, state_root)?;
    sandbox.wait_ready()?;
    Ok(sandbox)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_waits_until_no_create_has_asked_for_the_quiet_period() {
        // What `take` records when a create asks; the builders wait on it.
        LAST_ASK.store(since_epoch(), Ordering::Relaxed);
        let asked = Instant::now();
        wait_quiet();
        assert!(
            asked.elapsed() >= QUIET - Duration::from_micros(100),
            "waited {:?}, the quiet period is {QUIET:?}",
            asked.elapsed()
        );
        // A later ask starts the period again.
        LAST_ASK.store(since_epoch(), Ordering::Relaxed);
        let again = Instant::now();
        wait_quiet();
        assert!(again.elapsed() >= QUIET - Duration::from_micros(100));
    }
}
