//! The session clock: `base_time + action_index × step`, never the wall clock.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A session's time, advanced by tool calls only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Clock {
    /// Unix seconds of action 0.
    pub base_unix: i64,
    /// Seconds between two actions (0: time stands still).
    pub step_secs: u64,
}

impl Clock {
    /// Unix seconds at action `index`.
    pub fn unix_at(&self, index: u64) -> i64 {
        self.base_unix
            .saturating_add((index.saturating_mul(self.step_secs)).min(i64::MAX as u64) as i64)
    }

    /// The instant of action `index` (for file times).
    pub fn at(&self, index: u64) -> SystemTime {
        let secs = self.unix_at(index);
        if secs >= 0 {
            UNIX_EPOCH + Duration::from_secs(secs as u64)
        } else {
            UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
        }
    }

    /// The variables that give a command in the sandbox this time (`ENVCRAFT_NOW`,
    /// `SOURCE_DATE_EPOCH`, and `LD_PRELOAD` of the frozen-clock shim).
    pub fn env_at(&self, index: u64) -> Vec<(String, String)> {
        let secs = self
            .unix_at(index)
            .clamp(0, crate::clock_shim::LATEST_UNIX_SECONDS as i64);
        crate::clock_shim::env_for(secs as f64)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn time_advances_by_step_per_action_only() {
        let c = Clock {
            base_unix: 1_772_442_000, // 2026-03-02T09:00:00Z, a Monday
            step_secs: 60,
        };
        assert_eq!(c.unix_at(0), 1_772_442_000);
        assert_eq!(c.unix_at(10), 1_772_442_600);
        let env = c.env_at(1);
        assert!(env.contains(&("ENVCRAFT_NOW".into(), "1772442060".into())));
        assert!(env.contains(&("SOURCE_DATE_EPOCH".into(), "1772442060".into())));
        assert_eq!(
            c.at(0).duration_since(UNIX_EPOCH).unwrap().as_secs(),
            1_772_442_000
        );
    }

    #[test]
    fn a_zero_step_freezes_time() {
        let c = Clock {
            base_unix: 100,
            step_secs: 0,
        };
        assert_eq!(c.unix_at(1_000_000), 100);
    }
}
