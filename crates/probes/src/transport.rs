//! Which layer-4 protocol a probe or an echo service speaks.

use serde::{Deserialize, Serialize};

/// Transport of a listener or probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}
