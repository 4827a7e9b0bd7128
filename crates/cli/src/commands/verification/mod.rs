//! The durable record of verification: `corral events` (the event log)
//! and `corral gate` (where each kind stands, and every sandbox's last
//! verdict). Both read the store corrald writes too.

mod events;
mod gate;

pub use events::run as events;
pub(crate) use events::summary;
pub use gate::run as gate;

use std::time::{Duration, UNIX_EPOCH};

use corral_sandbox_core::verify::Timestamp;

/// A stored time as UTC RFC 3339 (to the second).
pub fn utc(t: Timestamp) -> String {
    corral_provider_incus::stamp::rfc3339(UNIX_EPOCH + Duration::from_millis(t.millis()))
}
