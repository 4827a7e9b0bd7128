//! Lifetimes: a sandbox's time to live (`corral new --ttl`: deleted when it
//! runs out) and idle limit (`--idle-stop`: stopped when it sits idle that
//! long), set at create from the request or the template's defaults and
//! kept in the store; corrald's reaper ([`reaper`]) enforces them.
//!
//! Idle is what the host can measure without entering the guest: no exec
//! session running in it (the backend's list of running commands) and no
//! packet *from* it through its port (the host-side interface's
//! `rx_packets`, which counts what the guest sent; `tx_packets` also counts
//! what the bridge floods at every port, so it would keep an idle sandbox
//! awake). corral's own canary sends packets and runs commands in the
//! sandbox; what moved while a verification ran (its verdict time changed)
//! is the canary's and is not counted. The idle clock starts when the
//! reaper first sees the sandbox running, so a corrald restart or a start
//! gives it its full idle limit again.

pub mod duration;
pub mod reaper;

use corral_sandbox_core::verify::Timestamp;

pub use duration::{DurationError, parse_secs, show_secs};

use crate::store::LifetimeRecord;

/// The limits a create asks for (the request's, else the template's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Time to live, seconds.
    pub ttl_secs: Option<u64>,
    /// Idle limit, seconds.
    pub idle_stop_secs: Option<u64>,
}

impl Limits {
    /// The record of a sandbox created at `created` with these limits.
    pub fn record(self, created: Timestamp) -> LifetimeRecord {
        LifetimeRecord {
            ttl_secs: self.ttl_secs,
            expires: self
                .ttl_secs
                .map(|s| Timestamp(created.millis().saturating_add(s.saturating_mul(1000)))),
            idle_stop_secs: self.idle_stop_secs,
        }
    }
}

/// One look at a running sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// When (the reaper's clock).
    pub at: Timestamp,
    /// Packets it has sent through its port (`None`: no port, or not
    /// readable: it is never judged idle).
    pub sent_packets: Option<u64>,
    /// Commands running in it (`None`: the backend cannot tell: never
    /// judged idle).
    pub exec_sessions: Option<u32>,
    /// When its canary last ran (the store's verdict time).
    pub last_verified: Option<Timestamp>,
}

/// What the reaper has seen of one running sandbox since it first saw it
/// run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activity {
    last_active: Timestamp,
    packets: Option<u64>,
    verified: Option<Timestamp>,
    /// Packets moved (or a command ran) at this time with no verification
    /// seen yet: the
    /// canary's if its verdict lands by the next look, the guest's if not.
    pending: Option<Timestamp>,
}

impl Activity {
    /// The first look: active now (the idle clock starts here).
    pub fn first(sample: &Sample) -> Self {
        Self {
            last_active: sample.at,
            packets: sample.sent_packets,
            verified: sample.last_verified,
            pending: None,
        }
    }

    /// Take in the next look.
    pub fn observe(&mut self, s: &Sample) {
        let canary = s.last_verified != self.verified;
        let busy = s.sent_packets != self.packets || s.exec_sessions.is_some_and(|n| n > 0);
        match (canary, self.pending.take()) {
            // A verification ran since the last look: what moved then and
            // now was (as far as anything can tell) its canary.
            (true, _) => {}
            (false, Some(p)) => self.last_active = self.last_active.max(p),
            (false, None) => {}
        }
        if busy && !canary {
            self.pending = Some(s.at);
        }
        if s.sent_packets.is_none() || s.exec_sessions.is_none() {
            // Not measurable: never idle.
            self.last_active = self.last_active.max(s.at);
        }
        self.packets = s.sent_packets;
        self.verified = s.last_verified;
    }

    /// When it was last seen active (a pending movement counts, until a
    /// verdict shows it was the canary's).
    pub fn active_at(&self) -> Timestamp {
        self.pending
            .map_or(self.last_active, |p| self.last_active.max(p))
    }
}

/// What the reaper does with a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nothing.
    Keep,
    /// Its time to live ran out: delete it (running or not).
    Expire,
    /// Running and idle for its limit: stop it.
    IdleStop {
        /// How long it was idle, seconds.
        idle_secs: u64,
    },
}

/// The decision at `now` for a sandbox with `life`, and `activity` when it
/// runs (`None`: not running). Expiry comes first: an expired sandbox is
/// deleted, not merely stopped.
pub fn decide(now: Timestamp, life: &LifetimeRecord, activity: Option<&Activity>) -> Decision {
    if life.expires.is_some_and(|e| now >= e) {
        return Decision::Expire;
    }
    match (life.idle_stop_secs, activity) {
        (Some(limit), Some(a)) => {
            let idle_ms = now.millis().saturating_sub(a.active_at().millis());
            if idle_ms >= limit.saturating_mul(1000) {
                Decision::IdleStop {
                    idle_secs: idle_ms / 1000,
                }
            } else {
                Decision::Keep
            }
        }
        _ => Decision::Keep,
    }
}

#[cfg(test)]
mod tests;
