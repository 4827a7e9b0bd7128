//! The wall clock the gate and the store read (the gate itself never
//! reads a clock: time is injected, and tests use a manual one).

use std::time::{SystemTime, UNIX_EPOCH};

use corral_sandbox_core::verify::{Clock, Timestamp};

/// Milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, Default)]
pub struct WallClock;

impl Clock for WallClock {
    fn now(&self) -> Timestamp {
        // Before 1970 only on a broken clock; epoch 0 then.
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Timestamp(ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_clock_is_after_2020() {
        assert!(WallClock.now() > Timestamp(1_577_836_800_000));
    }
}
