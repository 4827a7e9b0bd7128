//! What the host facade returns (all serde, for `--json`).

use std::fmt;

use serde::Serialize;

use crate::drift::Drift;
use crate::link::BridgeOutcome;
use crate::nft::ProfileCounters;
use crate::sysctl::{SysctlDrift, SysctlReport};

/// What an apply did.
#[derive(Debug, Clone, Serialize)]
pub struct ApplyReport {
    /// Each planned sysctl and what happened to it.
    pub sysctls: Vec<SysctlReport>,
    /// Each profile bridge: created, already managed, or adopted.
    pub bridges: Vec<BridgeReport>,
    /// Object messages in the nftables transaction.
    pub nft_messages: usize,
    /// Bytes of the nftables transaction (sent in one `sendmsg`).
    pub nft_bytes: usize,
    /// Rules in the plan.
    pub rules: usize,
    /// Set elements in the plan.
    pub set_elements: usize,
    /// Learned elements (addresses the gateway resolver added) carried
    /// into the new ruleset with the lifetime they had left.
    pub carried: usize,
    /// Tracked flows the new plan no longer allows, deleted.
    pub revoked: super::RevokeReport,
    /// The ports of the profile bridges after the sweep: each isolated,
    /// bound or quarantined.
    pub ports: Vec<super::ports::PortReport>,
    /// Bridges no profile names any more (removed from the configuration,
    /// or stamped out of band): what was done with each.
    pub removed: Vec<RemovedBridge>,
    /// Every port in `cut_ports` after the apply (earlier cuts that still
    /// exist included): what the applied record must keep.
    pub cut_ports: Vec<String>,
    /// Wall time of the whole apply including read-back, milliseconds.
    pub ms: u64,
}

/// A bridge the plan no longer names, as an apply left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemovedBridge {
    /// Bridge name.
    pub name: String,
    /// Its ports, set down and named in `cut_ports` (only with `--force`).
    pub cut: Vec<String>,
    /// Deleted (corral created it); `false`: an adopted bridge, left in
    /// place without corral's group.
    pub deleted: bool,
}

/// One bridge of an apply.
#[derive(Debug, Clone, Serialize)]
pub struct BridgeReport {
    /// Bridge name.
    pub name: String,
    /// Profile it serves.
    pub profile: String,
    /// Created, managed (stamped earlier) or adopted.
    pub outcome: BridgeOutcome,
}

/// One difference between the plan and the live host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "area")]
pub enum HostDrift {
    /// An nftables object.
    Nft(Drift),
    /// A profile bridge is missing, down or lacks its gateway address.
    Bridge {
        /// Bridge name.
        name: String,
        /// What is wrong.
        problem: String,
    },
    /// A sysctl has another value.
    Sysctl(SysctlDrift),
    /// The host's directly connected networks or routers changed since the
    /// plan was applied (`corral host refresh` brings the sets up to date).
    #[serde(rename = "host_networks")]
    HostNetworks {
        /// Networks and routers the host has now that the plan lacks.
        new: String,
        /// Networks and routers in the plan the host no longer has.
        gone: String,
    },
    /// A bridge carrying corral's stamp (or group) that no profile of the
    /// plan names: its traffic is dropped by the fail-closed rules, but a
    /// sandbox on it is cut off rather than governed.
    #[serde(rename = "unplanned_bridge")]
    UnplannedBridge {
        /// Bridge name.
        name: String,
        /// Its ports (sandbox interfaces still attached).
        ports: Vec<String>,
    },
    /// Packets from a profile's subnet arrived on another interface than
    /// its bridge (and were dropped): a sandbox port is no longer on its
    /// bridge.
    #[serde(rename = "stray_source")]
    StraySource {
        /// The profile.
        profile: String,
        /// Its bridge.
        bridge: String,
        /// Packets dropped since the last apply.
        packets: u64,
    },
    /// A port of a profile bridge is not isolated, not governed (neither
    /// bound nor quarantined), or bound to another bridge.
    Port {
        /// Port name.
        port: String,
        /// The bridge it is a port of.
        bridge: String,
        /// What is wrong.
        problem: String,
    },
}

impl fmt::Display for HostDrift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostDrift::Nft(d) => write!(f, "{d}"),
            HostDrift::Bridge { name, problem } => write!(f, "bridge {name}: {problem}"),
            HostDrift::HostNetworks { new, gone } => write!(
                f,
                "the host's networks changed since apply (new: {}; gone: {}); run `corral host refresh`",
                if new.is_empty() { "none" } else { new },
                if gone.is_empty() { "none" } else { gone }
            ),
            HostDrift::StraySource {
                profile,
                bridge,
                packets,
            } => write!(
                f,
                "{packets} packet(s) from profile {profile}'s subnet arrived elsewhere than on bridge {bridge} (dropped): a sandbox port has left its bridge; re-attach or restart that sandbox"
            ),
            HostDrift::Port {
                port,
                bridge,
                problem,
            } => write!(f, "port {port} of bridge {bridge}: {problem}"),
            HostDrift::UnplannedBridge { name, ports } => write!(
                f,
                "bridge {name} carries corral's stamp but no profile names it (ports: {}); its traffic is dropped — `corral host apply` removes it (`--force` when ports are attached, which cuts them)",
                if ports.is_empty() {
                    "none".to_owned()
                } else {
                    ports.join(", ")
                }
            ),
            HostDrift::Sysctl(s) => write!(
                f,
                "sysctl {} is {} (planned {})",
                s.key,
                s.live.as_deref().unwrap_or("absent"),
                s.planned
            ),
        }
    }
}

/// `corral host status`.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// Profile bridges as they are.
    pub bridges: Vec<BridgeStatus>,
    /// Accepted/blocked counters per profile.
    pub counters: Vec<ProfileCounters>,
    /// Allowlist set sizes, planned vs live.
    pub sets: Vec<SetStatus>,
    /// Number of differences from the plan (see `verify`).
    pub drift: usize,
}

/// One bridge in `status`.
#[derive(Debug, Clone, Serialize)]
pub struct BridgeStatus {
    /// Bridge name.
    pub name: String,
    /// Profile it serves.
    pub profile: String,
    /// Exists.
    pub present: bool,
    /// Is up.
    pub up: bool,
    /// Carries corral's stamp (teardown would delete it).
    pub managed: bool,
    /// Its addresses.
    pub addresses: Vec<String>,
}

/// One set in `status`.
#[derive(Debug, Clone, Serialize)]
pub struct SetStatus {
    /// Set name.
    pub name: String,
    /// Elements in the plan.
    pub planned: usize,
    /// Elements in the kernel; `None` when the set is absent.
    pub live: Option<usize>,
}

/// What a teardown removed, and every failure on the way.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TeardownReport {
    /// Corral's tables are gone (or were never there).
    pub tables_deleted: bool,
    /// Stamped bridges deleted.
    pub bridges_deleted: Vec<String>,
    /// Gateways found running for a deleted bridge with no record of them
    /// (filled by the caller that knows the gateways), stopped.
    pub gateways_stopped: Vec<String>,
    /// Every error met; teardown does not stop at the first.
    pub errors: Vec<String>,
}

impl TeardownReport {
    /// True when nothing failed.
    pub fn is_clean(&self) -> bool {
        self.errors.is_empty()
    }
}
