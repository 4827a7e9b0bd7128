//! Network namespaces for tests, the drill and benchmarks: anonymous
//! namespaces owned by an fd ([`Netns`]), echo listeners, packet probes and
//! the simulated host/sandbox/internet [`topology`].

mod icmp;
pub mod lab;
mod listen;
mod namespace;
pub mod probe;
pub mod topology;

pub use lab::{Lab, LabError};
pub use listen::{Listeners, Transport};
pub use namespace::Netns;
pub use probe::{Observed, Probe, ProbeResult};
pub use topology::{SandboxNs, Topology, TopologyError, probe_from};

/// Decides whether a privileged test may run.
///
/// Returns `true` when the process can create network namespaces (root with
/// CAP_SYS_ADMIN and CAP_NET_ADMIN). Otherwise it panics when the `CI`
/// environment variable is `true` (CI must never silently skip enforcement
/// tests) and else prints why the test is skipped and returns `false`.
pub fn require_root(test: &str) -> bool {
    let why = match Netns::new() {
        Ok(_) => return true,
        Err(e) => e,
    };
    let msg = format!(
        "{test}: needs root (CAP_SYS_ADMIN + CAP_NET_ADMIN) to create network namespaces: {why}"
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{msg}");
    }
    eprintln!("skipped: {msg}");
    false
}
