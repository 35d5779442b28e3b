//! How many sandboxes of this process keep their workspace descriptors.
//!
//! A sandbox's init hands its parent three descriptors once the workspace is mounted (the
//! layer, the workspace root, the template view: see `child`, step 6), and keeps its own
//! copies. A process holding thousands of sandboxes under one descriptor limit (a server) has
//! room for every sandbox's channel but not for every sandbox's three descriptors: it lets so
//! many sandboxes keep theirs ([`set_room`], from its capacity plan), and past that a sandbox
//! gives its three back after a call ([`crowded`]) and asks its init for them again when a
//! later call needs them (one round trip over the channel it keeps). Without a room set
//! (every command but `serve`), nothing is ever given back.

use std::sync::atomic::{AtomicU64, Ordering};

/// How many sandboxes may keep their workspace descriptors between calls (`u64::MAX`: all).
static MAY_HOLD: AtomicU64 = AtomicU64::new(u64::MAX);
/// Sandboxes alive with an init to ask.
static SANDBOXES: AtomicU64 = AtomicU64::new(0);
/// Of them, those holding their workspace descriptors.
static HOLDING: AtomicU64 = AtomicU64::new(0);

/// Let at most `sandboxes` keep their workspace descriptors between calls.
pub fn set_room(sandboxes: u64) {
    MAY_HOLD.store(sandboxes, Ordering::Relaxed);
}

/// Whether more sandboxes hold their workspace descriptors than may: one that holds them
/// should give them back.
pub fn crowded() -> bool {
    HOLDING.load(Ordering::Relaxed) > MAY_HOLD.load(Ordering::Relaxed)
}

/// Sandboxes alive with an init, and those holding their descriptors (for `/metrics`).
pub fn counts() -> (u64, u64) {
    (
        SANDBOXES.load(Ordering::Relaxed),
        HOLDING.load(Ordering::Relaxed),
    )
}

/// One sandbox's part in the counts.
#[derive(Debug, Default)]
pub(super) struct Handback {
    /// Counted among the sandboxes with an init.
    counted: bool,
    holding: bool,
    given_back: bool,
}

impl Handback {
    /// A sandbox with an init (which can hand its descriptors over again).
    pub(super) fn with_init() -> Handback {
        SANDBOXES.fetch_add(1, Ordering::Relaxed);
        Handback {
            counted: true,
            ..Handback::default()
        }
    }

    /// Its workspace descriptors came.
    pub(super) fn received(&mut self) {
        if self.counted && !self.holding {
            HOLDING.fetch_add(1, Ordering::Relaxed);
        }
        self.holding = self.counted;
        self.given_back = false;
    }

    /// They were given back, to be asked for again.
    pub(super) fn gave_back(&mut self) {
        self.drop_holding();
        self.given_back = true;
    }

    /// They were closed for good (the sandbox ends).
    pub(super) fn released(&mut self) {
        self.drop_holding();
        self.given_back = false;
    }

    pub(super) fn given_back(&self) -> bool {
        self.given_back
    }

    fn drop_holding(&mut self) {
        if self.holding {
            HOLDING.fetch_sub(1, Ordering::Relaxed);
        }
        self.holding = false;
    }
}

impl Drop for Handback {
    fn drop(&mut self) {
        self.drop_holding();
        if self.counted {
            SANDBOXES.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandbox_without_an_init_is_never_counted() {
        let mut host = Handback::default();
        host.received();
        assert!(!host.holding);
        host.gave_back();
        assert!(host.given_back());
        host.received();
        assert!(!host.given_back());
    }
}
