//! The canary plan: the checks a freshly created (or long-lived) sandbox
//! must pass before work runs in it, each with its bound and, where one is
//! possible, a control run from the host. The caller runs them and reports
//! [`CheckResult`]s; the gate judges.
//!
//! A control proves that a must-fail check's destination answers when
//! corral's filter is not in the way (the same probe from the host's own
//! network stack, or a listener corral itself opened on the host). A
//! must-fail check whose control did not reach its destination proves
//! nothing and fails.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::fmt;
use std::time::Duration;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::names::{HostName, ProfileName};

mod build;
#[cfg(test)]
mod tests;

pub use build::plan;

/// Port probed for an allow entry that names no port.
pub const DEFAULT_PROBE_PORT: u16 = 443;

/// The cloud metadata service every provider network must keep out of reach.
pub const METADATA: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)), 80);

/// The DNS port.
pub const DNS_PORT: u16 = 53;

/// What a check is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckKind {
    /// An allowed destination must connect over TCP (the filter lets policy through).
    AllowedConnects,
    /// An allowed destination must be reached over UDP.
    AllowedUdp,
    /// The configured canary destination must not connect.
    CanaryBlocked,
    /// A global IPv6 address must not connect.
    Ipv6Blocked,
    /// The host's own LAN (uplink) address must not connect.
    HostLanBlocked,
    /// A port on the gateway that is not DNS or DHCP must not connect.
    GatewayPortBlocked,
    /// Another sandbox on the same profile must not answer.
    SiblingBlocked,
    /// The cloud metadata address must not connect.
    MetadataBlocked,
    /// A DNS server other than the gateway's resolver must not be reached.
    ForeignResolverBlocked,
    /// A name on no allowlist must not resolve through the gateway.
    UnlistedNameUnresolved,
}

impl fmt::Display for CheckKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CheckKind::AllowedConnects => "allowed destination connects",
            CheckKind::AllowedUdp => "allowed destination reached over UDP",
            CheckKind::CanaryBlocked => "canary destination blocked",
            CheckKind::Ipv6Blocked => "global IPv6 blocked",
            CheckKind::HostLanBlocked => "host LAN address blocked",
            CheckKind::GatewayPortBlocked => "gateway non-DNS port blocked",
            CheckKind::SiblingBlocked => "sibling sandbox blocked",
            CheckKind::MetadataBlocked => "metadata address blocked",
            CheckKind::ForeignResolverBlocked => "foreign resolver unreachable",
            CheckKind::UnlistedNameUnresolved => "unlisted name does not resolve",
        })
    }
}

impl CheckKind {
    /// The kebab-case name used in JSON and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckKind::AllowedConnects => "allowed-connects",
            CheckKind::AllowedUdp => "allowed-udp",
            CheckKind::CanaryBlocked => "canary-blocked",
            CheckKind::Ipv6Blocked => "ipv6-blocked",
            CheckKind::HostLanBlocked => "host-lan-blocked",
            CheckKind::GatewayPortBlocked => "gateway-port-blocked",
            CheckKind::SiblingBlocked => "sibling-blocked",
            CheckKind::MetadataBlocked => "metadata-blocked",
            CheckKind::ForeignResolverBlocked => "foreign-resolver-blocked",
            CheckKind::UnlistedNameUnresolved => "unlisted-name-unresolved",
        }
    }
}

/// What a check expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expectation {
    /// The destination is reached within the bound (a TCP connection is
    /// established; a UDP datagram is answered, or the destination's port
    /// unreachable comes back).
    Connects,
    /// The destination is not reached (refused, unreachable or timed out)
    /// within the bound.
    Fails,
    /// The name does not resolve.
    DoesNotResolve,
}

/// What a check probes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProbeTarget {
    /// A TCP connect to an address.
    Addr(SocketAddr),
    /// A TCP connect to a name (resolved by the sandbox's resolver).
    Name {
        /// The name.
        host: HostName,
        /// The port.
        port: u16,
    },
    /// One UDP datagram to an address.
    Udp(SocketAddr),
    /// One ICMP echo request.
    Ping(IpAddr),
    /// One DNS query (UDP) to a server: reached when any answer, or the
    /// server's port unreachable, comes back.
    Resolver(SocketAddr),
    /// A name lookup through the sandbox's own resolver (its gateway).
    Lookup(HostName),
    /// A name lookup at a given server.
    LookupAt {
        /// The server.
        server: SocketAddr,
        /// The name.
        name: HostName,
    },
}

impl fmt::Display for ProbeTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeTarget::Addr(a) => write!(f, "tcp {a}"),
            ProbeTarget::Name { host, port } => write!(f, "tcp {host}:{port}"),
            ProbeTarget::Udp(a) => write!(f, "udp {a}"),
            ProbeTarget::Ping(ip) => write!(f, "icmp {ip}"),
            ProbeTarget::Resolver(a) => write!(f, "dns query to {a}"),
            ProbeTarget::Lookup(h) => write!(f, "lookup {h}"),
            ProbeTarget::LookupAt { server, name } => write!(f, "lookup {name} at {server}"),
        }
    }
}

/// One check of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanaryCheck {
    /// What it is about.
    pub kind: CheckKind,
    /// What to probe.
    pub target: ProbeTarget,
    /// What must happen.
    pub expect: Expectation,
    /// The per-check bound; the prober uses it as its timeout.
    pub bound: Duration,
    /// The control, run from the host's network stack: it must reach
    /// (connect, be answered, resolve) or the check proves nothing and
    /// fails. `None` where no control is possible.
    pub control: Option<ProbeTarget>,
}

/// A check the plan leaves out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotPlanned {
    /// Which check.
    pub kind: CheckKind,
    /// Why it is not run.
    pub reason: String,
}

/// Every check for one sandbox on one profile. Only [`plan`] builds one, so
/// nobody can hand the gate a plan with the hard checks left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CanaryPlan {
    profile: ProfileName,
    checks: Vec<CanaryCheck>,
    not_planned: Vec<NotPlanned>,
}

impl CanaryPlan {
    /// The profile the sandbox is on.
    pub fn profile(&self) -> &ProfileName {
        &self.profile
    }

    /// The checks, in the order to report them.
    pub fn checks(&self) -> &[CanaryCheck] {
        &self.checks
    }

    /// Checks left out, with why (settings not given, no sibling running…).
    pub fn not_planned(&self) -> &[NotPlanned] {
        &self.not_planned
    }
}

/// What the prober saw for one probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Observed {
    /// The destination was reached: a TCP connection, a UDP or DNS answer,
    /// an ICMP echo reply, or the destination's own port unreachable.
    Connected,
    /// Refused (a TCP reset).
    Refused,
    /// No answer within the bound.
    TimedOut,
    /// No route, or an ICMP unreachable / administratively prohibited.
    Unreachable,
    /// The name did not resolve (NXDOMAIN, refused or empty answer).
    NotResolved,
    /// The name resolved (to these addresses).
    Resolved(Vec<IpAddr>),
    /// The probe could not run; never a pass.
    ProbeError(String),
}

impl Observed {
    /// True when the probe got to its destination (the control's test).
    pub fn reached(&self) -> bool {
        match self {
            Observed::Connected => true,
            Observed::Resolved(addrs) => !addrs.is_empty(),
            _ => false,
        }
    }
}

impl fmt::Display for Observed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Observed::Connected => f.write_str("reached"),
            Observed::Refused => f.write_str("refused"),
            Observed::TimedOut => f.write_str("timed out"),
            Observed::Unreachable => f.write_str("unreachable"),
            Observed::NotResolved => f.write_str("not resolved"),
            Observed::Resolved(a) => {
                let list: Vec<String> = a.iter().map(ToString::to_string).collect();
                write!(f, "resolved to {}", list.join(", "))
            }
            Observed::ProbeError(e) => write!(f, "probe error: {e}"),
        }
    }
}

/// What the control of a check saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlResult {
    /// What happened.
    pub observed: Observed,
    /// How long it took.
    pub elapsed: Duration,
}

/// The prober's report for one check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    /// Which check.
    pub kind: CheckKind,
    /// What happened.
    pub observed: Observed,
    /// How long it took.
    pub elapsed: Duration,
    /// The probe's output (bounded by the gate before it is recorded).
    pub output: String,
    /// The control's result, when the check has a control.
    pub control: Option<ControlResult>,
}

/// What the host knows about where the sandbox sits, gathered before the
/// plan is built (the plan itself does no I/O).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vantage {
    /// A TCP port the host listens on, on its uplink address, for this run.
    pub host_lan: Option<SocketAddr>,
    /// A TCP port the host listens on, on the profile's gateway address.
    pub gateway_port: Option<SocketAddr>,
    /// Another running sandbox on the same profile.
    pub sibling: Option<IpAddr>,
    /// The resolver the gateway forwards to, for the unlisted-name control.
    pub upstream: Option<SocketAddr>,
}

/// Which settings the plan insists on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
    /// A kind opted in to per-sandbox verification: its proof rests on the
    /// canary, so `canary`, `canary_v6` and `unlisted_name` are required.
    Strict,
    /// A kind corral enforces itself: checks whose setting is missing are
    /// left out (and listed as not planned).
    Configured,
}

/// Why a canary plan cannot be built; the sandbox must not be used for
/// profiled work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A host.verification setting the plan needs is missing.
    #[error("host.verification.{key} is not set; the canary cannot run without it")]
    Missing {
        /// The key.
        key: &'static str,
    },
    /// The allowlist has nothing a TCP probe can reach.
    #[error(
        "profile \"{profile}\" has no allow entry the canary can connect to; add \
            a host name or single address with a TCP port"
    )]
    NoProbeableEntry {
        /// The profile.
        profile: String,
    },
    /// A must-fail destination is allowed by the profile, so the check would prove nothing.
    #[error(
        "profile \"{profile}\" allows {target}, which the canary expects to be \
            blocked; choose a host.verification.{key} outside the profile's \
            allowlist"
    )]
    Allowlisted {
        /// The profile.
        profile: String,
        /// The destination.
        target: String,
        /// The setting to change.
        key: &'static str,
    },
    /// A canary target is in corral's reserved list: every mode refuses it,
    /// so its must-fail check proves nothing and an `internet` profile's
    /// must-connect check can never pass.
    #[error(
        "host.verification.{key} = {target} is in the reserved range {range}, which no \
            profile reaches; choose a public address outside corral's reserved list"
    )]
    Reserved {
        /// The setting to change.
        key: &'static str,
        /// The address.
        target: String,
        /// The reserved range holding it.
        range: String,
    },
}
