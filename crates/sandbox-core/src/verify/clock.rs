//! Time, injected: the gate never reads a clock itself, so its cool-downs and
//! re-verification deadlines are tested by moving a manual clock.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A point in time, in milliseconds since the clock's epoch (the Unix epoch
/// for a wall clock).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// Milliseconds since the epoch.
    pub fn millis(self) -> u64 {
        self.0
    }

    /// This instant plus `d`, saturating at the end of time.
    pub fn plus(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(millis(d)))
    }

    /// Time from `earlier` to this instant (zero if `earlier` is later).
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ms", self.0)
    }
}

/// A duration in whole milliseconds, saturating.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A source of the current time.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Now.
    fn now(&self) -> Timestamp;
}

/// A clock that moves only when told to; for tests and simulations.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    /// A clock reading `start`.
    pub fn new(start: Timestamp) -> Self {
        Self {
            now: AtomicU64::new(start.0),
        }
    }

    /// Move forward by `d`.
    pub fn advance(&self, d: Duration) {
        let step = millis(d);
        // fetch_update cannot fail with a closure that always returns Some.
        let _ = self
            .now
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(step))
            });
    }

    /// Jump to `t`.
    pub fn set(&self, t: Timestamp) {
        self.now.store(t.0, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.now.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(Timestamp(1_000));
        assert_eq!(c.now(), Timestamp(1_000));
        c.advance(Duration::from_secs(2));
        assert_eq!(c.now(), Timestamp(3_000));
        c.set(Timestamp(5));
        assert_eq!(c.now().since(Timestamp(1)), Duration::from_millis(4));
        assert_eq!(Timestamp(1).since(Timestamp(5)), Duration::ZERO);
        assert_eq!(
            Timestamp(u64::MAX).plus(Duration::from_secs(1)),
            Timestamp(u64::MAX)
        );
    }
}
