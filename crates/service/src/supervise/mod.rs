//! Supervisors that hold isolation for a sandbox's whole life, run by
//! corrald and by `corral host watch`:
//!
//! - [`gateways`]: every recorded profile gateway (dnsmasq) watched
//!   through a pidfd, restarted from its recorded configuration with
//!   backoff when it dies, `gateway_died` / `gateway_restarted` on record;
//!   The same rescans host corral's own resolver on every bridge whose
//!   profile has `dns = "corral"` (`resolvers`);
//! - [`incus`]: Incus's lifecycle event stream watched; a start of a
//!   profiled corral sandbox that corral did not make is put through the
//!   start gate, the topology check and the canary, and stopped when one
//!   fails (`unmanaged_start`).
//!
//! Each runs as a tokio task: `spawn` returns a handle whose `stop` ends it
//! (and waits for it); `run_until` runs it in place until a future resolves.

pub mod gateways;
pub mod incus;
mod resolvers;

pub use gateways::{Backoff, GatewaySupervisor, SupervisorHandle};
pub use incus::{IncusStartWatcher, StartWatchHandle};

/// A supervisor could not start.
#[derive(Debug, thiserror::Error)]
pub enum SuperviseError {
    /// The network namespace gateways run in could not be opened.
    #[error(transparent)]
    Target(#[from] crate::target::TargetError),
}
