//! The open sessions: id → entry, a bound on how many there are, and when each was last used.
//! One entry's session sits behind an async mutex: calls on one session are serialized (with
//! a bounded wait), calls on different sessions run in parallel.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use super::capacity::Headroom;
use super::error::ApiError;
use crate::agent::AttachedAgent;
use crate::sandbox::cancel::Cancel;
use crate::session::Session;

/// One open session. `None` once it is closed (a request that found the entry just before it
/// was removed gets `invalid_transition`).
pub struct Entry {
    session: Arc<AsyncMutex<Option<Session>>>,
    /// The tools the session offers (to label metrics).
    pub tools: Vec<String>,
    /// Milliseconds since the registry's start at the last request.
    last_used_ms: AtomicU64,
    /// The MCP request whose call runs on the session now, and the handle that kills its
    /// command (see [`Entry::cancel_call`]).
    running: Mutex<Option<(String, Arc<Cancel>)>>,
    /// OpenClaw, when it is the session's agent (see [`super::agent`]).
    pub agent: Option<Arc<Mutex<AttachedAgent>>>,
}

/// The session of an entry, locked.
pub type Locked = OwnedMutexGuard<Option<Session>>;

impl Entry {
    /// Note that MCP request `rpc_id`'s call runs now (an earlier firing of `cancel` forgotten).
    pub fn begin_call(&self, rpc_id: String, cancel: Arc<Cancel>) {
        cancel.reset();
        *self.running.lock().unwrap_or_else(|p| p.into_inner()) = Some((rpc_id, cancel));
    }

    /// The call that [`Entry::begin_call`] noted ended.
    pub fn end_call(&self) {
        if let Some((_, cancel)) = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            cancel.reset();
        }
    }

    /// Cancel MCP request `rpc_id`'s call if it runs now (its command is killed); whether it
    /// did.
    pub fn cancel_call(&self, rpc_id: &str) -> bool {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        match running.as_ref() {
            Some((id, cancel)) if id == rpc_id => {
                cancel.fire();
                true
            }
            _ => false,
        }
    }

    /// Lock the session, waiting at most `wait` (else `lock_timeout`).
    pub async fn lock(&self, wait: Duration) -> Result<Locked, ApiError> {
        tokio::time::timeout(wait, self.session.clone().lock_owned())
            .await
            .map_err(|_| ApiError::lock_timeout())
    }
}

/// The server's sessions.
pub struct Registry {
    sessions: Mutex<HashMap<String, Arc<Entry>>>,
    /// Sessions held or being made (a slot is taken before a session is built).
    slots: AtomicUsize,
    pub max: usize,
    /// What the descriptors allow (see [`super::capacity`]).
    headroom: Headroom,
    started: Instant,
}

/// A place for one more session, given back on drop unless the session was inserted.
pub struct Slot<'a> {
    registry: &'a Registry,
    used: bool,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if !self.used {
            self.registry.slots.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Registry {
    pub fn new(max: usize, headroom: Headroom) -> Registry {
        Registry {
            sessions: Mutex::new(HashMap::new()),
            slots: AtomicUsize::new(0),
            max,
            headroom,
            started: Instant::now(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Entry>>> {
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Take a slot for a new session: `too_many_sessions` past `--max-sessions`, `capacity`
    /// when the descriptors left would not hold one more session beside what they must keep
    /// for answering.
    pub fn reserve(&self) -> Result<Slot<'_>, ApiError> {
        let held = self
            .slots
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max).then_some(n + 1)
            })
            .map_err(|_| ApiError::too_many_sessions(self.max))?;
        // Taken first, so that the slot given back on a refusal is this one.
        let slot = Slot {
            registry: self,
            used: false,
        };
        self.headroom.check(held as u64)?;
        Ok(slot)
    }

    /// Add a session in a reserved slot; its id.
    pub fn insert(&self, slot: Slot<'_>, session: Session) -> String {
        self.insert_attached(slot, session, None)
    }

    /// [`Registry::insert`], with the agent that runs the session's turns.
    pub fn insert_attached(
        &self,
        mut slot: Slot<'_>,
        session: Session,
        agent: Option<Arc<Mutex<AttachedAgent>>>,
    ) -> String {
        slot.used = true;
        let id = session.id().to_string();
        let tools = session
            .tool_schemas()
            .into_iter()
            .map(|(name, _, _)| name)
            .collect();
        let entry = Entry {
            session: Arc::new(AsyncMutex::new(Some(session))),
            tools,
            last_used_ms: AtomicU64::new(self.now_ms()),
            running: Mutex::new(None),
            agent,
        };
        self.map().insert(id.clone(), Arc::new(entry));
        id
    }

    /// The entry of `id` (marked as used now), or `session_not_found`.
    pub fn get(&self, id: &str) -> Result<Arc<Entry>, ApiError> {
        let entry = self
            .map()
            .get(id)
            .cloned()
            .ok_or_else(ApiError::session_not_found)?;
        entry.last_used_ms.store(self.now_ms(), Ordering::Relaxed);
        Ok(entry)
    }

    /// Take `id` out of the registry (its slot is freed): later requests get
    /// `session_not_found`.
    pub fn remove(&self, id: &str) -> Option<Arc<Entry>> {
        let entry = self.map().remove(id);
        if entry.is_some() {
            self.slots.fetch_sub(1, Ordering::SeqCst);
        }
        entry
    }

    pub fn len(&self) -> usize {
        self.map().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ids of sessions not used for `idle` (and not in use now).
    pub fn idle(&self, idle: Duration) -> Vec<String> {
        let now = self.now_ms();
        let limit = idle.as_millis() as u64;
        self.map()
            .iter()
            .filter(|(_, e)| now.saturating_sub(e.last_used_ms.load(Ordering::Relaxed)) >= limit)
            .filter(|(_, e)| e.session.try_lock().is_ok())
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Every id.
    pub fn ids(&self) -> Vec<String> {
        self.map().keys().cloned().collect()
    }
}

/// Close the session of a removed entry (waiting at most `wait` for a running call); the
/// blocking part off the async threads.
pub async fn close_entry(entry: Arc<Entry>, wait: Duration) -> bool {
    let Ok(mut locked) = tokio::time::timeout(wait, entry.session.clone().lock_owned()).await
    else {
        return false;
    };
    let Some(session) = locked.take() else {
        return true;
    };
    tokio::task::spawn_blocking(move || session.close())
        .await
        .is_ok()
}
