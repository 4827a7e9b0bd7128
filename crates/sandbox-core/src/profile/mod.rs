//! Network profiles: which bridge a sandbox sits on and what it may reach.
//!
//! A [`ProfileSet`] can only be built through validation, so every consumer
//! (the egress planner, providers, the CLI) may assume its invariants:
//! unique names and bridges, non-overlapping subnets, room for a gateway
//! and sandboxes, a non-empty allowlist in allowlist mode.

mod allow;
mod validate;

use core::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::{Deserialize, Serialize};

pub use allow::{AllowEntry, AllowParseError, AllowTarget, PortRange, PortRangeError, Protocol};
pub use validate::{MAX_V4_PREFIX, MAX_V6_PREFIX, ProfileField, ValidationError, ValidationErrors};

use crate::names::{BridgeName, ProfileName};

/// What a profile lets sandboxes reach beyond their bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EgressMode {
    /// Nothing leaves the bridge (leases only).
    None,
    /// Any public address; never private, reserved, link-local or metadata ranges.
    Internet,
    /// Only the profile's allow entries.
    Allowlist,
}

/// The verdict for traffic a profile does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BlockAction {
    /// Answer with an ICMP/TCP reset so agents fail fast (the default).
    #[default]
    Reject,
    /// Silently discard.
    Drop,
}

/// Whether sandboxes on the profile get a resolver on their gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DnsPolicy {
    /// The gateway resolves: allowlist profiles get a filtered resolver that
    /// answers only allowlisted names, internet profiles a forwarder to the
    /// host's upstream resolvers; `none` profiles get leases only.
    #[default]
    Gateway,
    /// corral's own gateway instead of dnsmasq, hosted by corrald or
    /// `corral host watch`: its DHCP server (reservations only) and router
    /// advertisements on every mode, and on allowlist and internet
    /// profiles its resolver on the gateway address (queries and answers
    /// rebuilt, every address learned before it is handed out, refusals
    /// that say why). A `none` profile still has no resolver.
    Corral,
    /// No resolver at all; sandboxes must use addresses.
    Off,
}

impl DnsPolicy {
    /// Whether the profile's gateway address answers DNS at all (given a
    /// mode that has a resolver): either resolver, not `off`.
    pub fn resolves(self) -> bool {
        self != DnsPolicy::Off
    }
}

/// One validated network profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    /// The profile's name, used by phases and sandbox specs.
    pub name: ProfileName,
    /// The Linux bridge its sandboxes attach to.
    pub bridge: BridgeName,
    /// IPv4 subnet of the bridge; the first host address is the gateway.
    pub subnet_v4: Ipv4Net,
    /// Optional IPv6 subnet; without one, sandboxes get no IPv6 egress at all.
    pub subnet_v6: Option<Ipv6Net>,
    /// What the profile may reach.
    pub mode: EgressMode,
    /// Allow entries (only meaningful in allowlist mode).
    pub allow: Vec<AllowEntry>,
    /// What happens to everything else.
    pub block: BlockAction,
    /// Gateway resolver policy.
    pub dns: DnsPolicy,
    /// Accept host names that resolve to nothing at apply time (they stay
    /// unreachable until they resolve) instead of refusing the apply.
    pub allow_unresolved: bool,
    /// Destinations this profile never reaches, whatever its mode and
    /// allow entries say (on top of the host-wide `deny` list).
    pub deny: Vec<IpNet>,
    /// Addresses each of the profile's learned sets (what the gateway
    /// resolver adds for listed names) may hold; the kernel refuses adds
    /// beyond it and keeps what is there ([`DEFAULT_LEARNED_MAX`]).
    #[serde(default = "default_learned_max")]
    pub learned_max: u32,
    /// How much of the host's conntrack table each of its sandboxes may
    /// take.
    #[serde(default)]
    pub flows: FlowLimits,
    /// Whether a lookup of a name the allowlist does not list is put to
    /// the operator (allowlist profiles on corral's resolver only).
    #[serde(default)]
    pub approvals: Approvals,
}

/// What corral's resolver does with a lookup of a name the profile's
/// allowlist does not list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Approvals {
    /// Refuses it (NXDOMAIN, with the reason).
    #[default]
    Off,
    /// Holds it for up to this many seconds while the operator is asked
    /// (`corral approvals`, `corral approve`, `corral deny`); approved,
    /// it is answered and its addresses open to the asking sandbox alone.
    Ask {
        /// How long a lookup waits for a decision.
        timeout_secs: u32,
    },
}

impl Approvals {
    /// How long a held lookup waits, when lookups are held.
    pub fn timeout(self) -> Option<std::time::Duration> {
        match self {
            Approvals::Off => None,
            Approvals::Ask { timeout_secs } => {
                Some(std::time::Duration::from_secs(u64::from(timeout_secs)))
            }
        }
    }
}

/// Seconds a held lookup waits for the operator when the profile does not
/// say (`approval_timeout`).
pub const DEFAULT_APPROVAL_TIMEOUT_SECS: u32 = 30;
/// The longest `approval_timeout` accepted.
pub const MAX_APPROVAL_TIMEOUT_SECS: u32 = 300;

/// Addresses a learned set holds when the profile does not say: far above
/// what one agent's listed names resolve to (a CDN name rotates through a
/// few dozen), far below what a hostile authority can answer.
pub const DEFAULT_LEARNED_MAX: u32 = 1024;
/// The largest `learned_max` accepted.
pub const MAX_LEARNED_MAX: u32 = 65_536;

fn default_learned_max() -> u32 {
    DEFAULT_LEARNED_MAX
}

/// Per-sandbox conntrack limits of a profile: the host's conntrack table
/// is one table for the host and every sandbox, so each sandbox (each
/// source address) gets a share of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FlowLimits {
    /// Tracked flows one source address may hold at once
    /// (`max_flows_per_source`).
    pub max_per_source: u32,
    /// New flows one source address may start per second, sustained
    /// (`new_flows_per_second`); twice as many may start at once.
    pub new_per_second: u32,
}

impl FlowLimits {
    /// Default of `max_flows_per_source`: far above what a build or a
    /// browser holds open (hundreds), and 1/128 of the kernel's default
    /// table of 262,144 entries.
    pub const DEFAULT_MAX_PER_SOURCE: u32 = 2_048;
    /// Default of `new_flows_per_second`: a package manager's parallel
    /// fetches start tens of connections a second.
    pub const DEFAULT_NEW_PER_SECOND: u32 = 200;
    /// Largest value either field takes (beyond it the limit would not
    /// protect a table of the kernel's default size).
    pub const MAX: u32 = 1_000_000;
}

impl Default for FlowLimits {
    fn default() -> Self {
        Self {
            max_per_source: Self::DEFAULT_MAX_PER_SOURCE,
            new_per_second: Self::DEFAULT_NEW_PER_SECOND,
        }
    }
}

impl Profile {
    /// The bridge's IPv4 gateway address: the subnet's first host address.
    pub fn gateway_v4(&self) -> Ipv4Addr {
        first_host_v4(self.subnet_v4)
    }

    /// The bridge's IPv6 gateway address, when the profile has an IPv6 subnet.
    pub fn gateway_v6(&self) -> Option<Ipv6Addr> {
        self.subnet_v6.map(|net| {
            let base = u128::from(net.network());
            Ipv6Addr::from(base.wrapping_add(1))
        })
    }
}

/// First usable host address of an IPv4 subnet (network + 1).
pub(crate) fn first_host_v4(net: Ipv4Net) -> Ipv4Addr {
    let base = u32::from(net.network());
    Ipv4Addr::from(base.wrapping_add(1))
}

/// A validated, ordered set of profiles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ProfileSet {
    profiles: Vec<Profile>,
}

impl ProfileSet {
    /// Wrap profiles that have already passed validation.
    pub(crate) fn from_validated(profiles: Vec<Profile>) -> Self {
        Self { profiles }
    }

    /// The profiles in configuration order.
    pub fn iter(&self) -> std::slice::Iter<'_, Profile> {
        self.profiles.iter()
    }

    /// Number of profiles.
    pub fn len(&self) -> usize {
        self.profiles.len()
    }

    /// True when there are no profiles.
    pub fn is_empty(&self) -> bool {
        self.profiles.is_empty()
    }

    /// Look a profile up by name.
    pub fn get(&self, name: &str) -> Option<&Profile> {
        self.profiles.iter().find(|p| p.name.as_str() == name)
    }

    /// Look a profile up by its bridge.
    pub fn by_bridge(&self, bridge: &str) -> Option<&Profile> {
        self.profiles.iter().find(|p| p.bridge.as_str() == bridge)
    }

    /// The configured profile names, for error messages that list them.
    pub fn names(&self) -> Vec<String> {
        self.profiles.iter().map(|p| p.name.to_string()).collect()
    }
}

impl<'a> IntoIterator for &'a ProfileSet {
    type Item = &'a Profile;
    type IntoIter = std::slice::Iter<'a, Profile>;
    fn into_iter(self) -> Self::IntoIter {
        self.profiles.iter()
    }
}
