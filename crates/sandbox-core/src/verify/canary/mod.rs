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

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};
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

/// The sibling check's bound, for the probe and its control alike.
///
/// Bridge-port isolation drops a frame between two sandbox ports before
/// any netfilter hook (the bridge's `should_deliver`), so a blocked
/// sibling leaves no drop-log record and sends no reject: the sandbox's
/// ARP request for it just goes unanswered, and the kernel gives up only
/// after its neighbour retries (about 3 s). What bounds the wait instead
/// is the control: the same echo from the host, through the bridge's own
/// port, must be answered within this bound, so a sibling the sandbox
/// could reach would have answered the sandbox within it too (one ARP
/// exchange and one echo on the same bridge, microseconds apart). A
/// control slower than this fails the check rather than pass it on a
/// wait too short to mean anything. A container's prober usually ends
/// the check long before, on the bridge's own evidence that it sent the
/// sandbox's ARP request out of no port ([`Observed::Dropped`]); this
/// bound decides only when no such evidence comes.
pub const SIBLING_BOUND: Duration = Duration::from_millis(250);

/// The least bound of `ipv6-allowed`, whatever `check_timeout_secs` says:
/// a sandbox that has just started forms its IPv6 address from the
/// gateway's router advertisement and holds it tentative for duplicate
/// address detection (on a real container: there, tentative, 0.8 s after
/// its init started, and in use by 2.8 s), and the probe waits for that
/// address before it connects (docs/verification.md).
pub const IPV6_READY_BOUND: Duration = Duration::from_secs(5);

/// corral's own canary target (IPv4): an address in a documentation range
/// (RFC 5737) that `corral host apply` puts in a small namespace behind a
/// veth on this host, for the checks whose setting is not given. It routes
/// nowhere outside the machine.
pub const OWN_TARGET_V4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 253);

/// corral's own IPv6 canary target (RFC 3849), beside [`OWN_TARGET_V4`].
pub const OWN_TARGET_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xca7, 0, 0, 0, 0, 2);

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
    /// An IPv6 destination must connect (a profile with IPv6 egress).
    Ipv6Allowed,
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
            CheckKind::Ipv6Allowed => "IPv6 destination connects",
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
            CheckKind::Ipv6Allowed => "ipv6-allowed",
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

impl CanaryCheck {
    /// How many times the prober runs this check at most: a check that
    /// expects its destination reached and missed it is tried once more
    /// (one lost handshake or lookup on a loaded host is not a broken
    /// allowlist, and failing it would dispose of a sound sandbox); a
    /// check that proves a block runs once (a block seen once holds, and a
    /// destination reached once is a breach).
    pub fn tries(&self) -> u32 {
        match self.expect {
            Expectation::Connects => 2,
            Expectation::Fails | Expectation::DoesNotResolve => 1,
        }
    }

    /// The longest its result may take and still count: the bound of
    /// every try.
    pub fn time_allowed(&self) -> Duration {
        self.bound * self.tries()
    }
}

/// A check the plan leaves out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotPlanned {
    /// Which check.
    pub kind: CheckKind,
    /// Why it is not run.
    pub reason: String,
    /// The check applies to this sandbox but its target could not be set
    /// up (a listener, an address): a kind whose standing rests on the
    /// canary does not pass with it missing. False when there is nothing
    /// to check (no sibling running, no allow entry of the shape, a
    /// setting a kind corral enforces may leave out).
    #[serde(default)]
    pub could_not_run: bool,
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
    /// Seen dropped by the host before the bound ran out: the bridge took
    /// the packet (or the ARP request it needed first) in and sent it on
    /// to no port.
    Dropped,
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
            Observed::Dropped => f.write_str("dropped"),
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
    /// Why no listener could be opened on the host's uplink address, when
    /// it has one (the check applies but cannot run).
    pub host_lan_failed: Option<String>,
    /// Why no listener could be opened on the gateway address, when the
    /// address is this host's (the check applies but cannot run).
    pub gateway_port_failed: Option<String>,
    /// corral's own targets, listening for this run, standing in for
    /// `canary` and `canary_v6` when those are not set.
    pub own_targets: Option<OwnTargets>,
    /// Why corral's own targets could not be used, when a setting they
    /// stand in for is missing (the checks apply but cannot run).
    pub own_targets_failed: Option<String>,
}

/// corral's own canary targets as one run sees them: listeners on
/// [`OWN_TARGET_V4`] and [`OWN_TARGET_V6`], open for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnTargets {
    /// The IPv4 listener.
    pub v4: SocketAddr,
    /// The IPv6 listener.
    pub v6: SocketAddrV6,
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
