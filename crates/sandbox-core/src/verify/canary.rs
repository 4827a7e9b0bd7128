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

use crate::config::VerificationConfig;
use crate::names::{HostName, ProfileName};
use crate::profile::{AllowTarget, EgressMode, Profile, Protocol};

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
}

/// Build the plan for `profile` under `cfg`, with what the host gathered in
/// `vantage`; `req` says whether missing settings are an error.
pub fn plan(
    profile: &Profile,
    cfg: &VerificationConfig,
    vantage: &Vantage,
    req: Requirement,
) -> Result<CanaryPlan, PlanError> {
    let mut b = Builder {
        profile,
        bound: cfg.options.check_timeout,
        checks: Vec::new(),
        not_planned: Vec::new(),
    };
    let strict = req == Requirement::Strict;
    let need = |key: &'static str, present: bool| -> Result<(), PlanError> {
        if strict && !present {
            return Err(PlanError::Missing { key });
        }
        Ok(())
    };
    need("canary", cfg.canary.is_some())?;
    need("canary_v6", cfg.canary_v6.is_some())?;
    need("unlisted_name", cfg.unlisted_name.is_some())?;
    let unset = |key: &str| format!("host.verification.{key} is not set");

    match profile.mode {
        EgressMode::None => {}
        EgressMode::Allowlist => match probe_target(profile) {
            Some(t) => b.check(CheckKind::AllowedConnects, t, Expectation::Connects, None),
            None if strict => {
                return Err(PlanError::NoProbeableEntry {
                    profile: profile.name.to_string(),
                });
            }
            None => b.skip(
                CheckKind::AllowedConnects,
                "no allow entry is a host name or single address with a TCP port",
            ),
        },
        // For an internet profile the canary is allowed traffic.
        EgressMode::Internet => match cfg.canary {
            Some(c) => b.check(
                CheckKind::AllowedConnects,
                ProbeTarget::Addr(c),
                Expectation::Connects,
                None,
            ),
            None => b.skip(CheckKind::AllowedConnects, unset("canary")),
        },
    }
    match (profile.mode, udp_target(profile, cfg)) {
        (EgressMode::None, _) => {}
        (_, Some(t)) => b.check(
            CheckKind::AllowedUdp,
            ProbeTarget::Udp(t),
            Expectation::Connects,
            None,
        ),
        (EgressMode::Internet, None) => b.skip(CheckKind::AllowedUdp, unset("canary")),
        (_, None) => b.skip(
            CheckKind::AllowedUdp,
            "no allow entry is a single address that allows UDP",
        ),
    }
    if profile.mode != EgressMode::Internet {
        match cfg.canary {
            Some(c) => {
                b.allowlisted(c.ip(), "canary")?;
                b.check(
                    CheckKind::CanaryBlocked,
                    ProbeTarget::Addr(c),
                    Expectation::Fails,
                    Some(ProbeTarget::Addr(c)),
                );
            }
            None => b.skip(CheckKind::CanaryBlocked, unset("canary")),
        }
    }
    // IPv6 is allowed only to an internet profile that has an IPv6 subnet.
    if !(profile.mode == EgressMode::Internet && profile.subnet_v6.is_some()) {
        match cfg.canary_v6 {
            Some(c) => {
                b.allowlisted(IpAddr::V6(*c.ip()), "canary_v6")?;
                let t = ProbeTarget::Addr(SocketAddr::V6(c));
                b.check(
                    CheckKind::Ipv6Blocked,
                    t.clone(),
                    Expectation::Fails,
                    Some(t),
                );
            }
            None => b.skip(CheckKind::Ipv6Blocked, unset("canary_v6")),
        }
    }
    match vantage.host_lan {
        Some(a) => b.check(
            CheckKind::HostLanBlocked,
            ProbeTarget::Addr(a),
            Expectation::Fails,
            Some(ProbeTarget::Addr(a)),
        ),
        None => b.skip(
            CheckKind::HostLanBlocked,
            "the host has no uplink address to listen on",
        ),
    }
    match vantage.gateway_port {
        Some(a) => b.check(
            CheckKind::GatewayPortBlocked,
            ProbeTarget::Addr(a),
            Expectation::Fails,
            Some(ProbeTarget::Addr(a)),
        ),
        None => b.skip(
            CheckKind::GatewayPortBlocked,
            "no port could be opened on the gateway address",
        ),
    }
    match vantage.sibling {
        Some(ip) => b.check(
            CheckKind::SiblingBlocked,
            ProbeTarget::Ping(ip),
            Expectation::Fails,
            Some(ProbeTarget::Ping(ip)),
        ),
        None => b.skip(
            CheckKind::SiblingBlocked,
            "no other running sandbox on the profile",
        ),
    }
    if allows_ip(profile, METADATA.ip()) {
        return Err(PlanError::Allowlisted {
            profile: profile.name.to_string(),
            target: METADATA.ip().to_string(),
            key: "(allow entries; the metadata address must never be allowed)",
        });
    }
    // No control: corral does not talk to a cloud's metadata service itself.
    b.check(
        CheckKind::MetadataBlocked,
        ProbeTarget::Addr(METADATA),
        Expectation::Fails,
        None,
    );
    match cfg.canary {
        Some(c) => {
            let server = SocketAddr::new(c.ip(), DNS_PORT);
            b.check(
                CheckKind::ForeignResolverBlocked,
                ProbeTarget::Resolver(server),
                Expectation::Fails,
                Some(ProbeTarget::Resolver(server)),
            );
        }
        None => b.skip(CheckKind::ForeignResolverBlocked, unset("canary")),
    }
    if profile.mode == EgressMode::Allowlist {
        match &cfg.unlisted_name {
            Some(name) => {
                if allows_name(profile, name) {
                    return Err(PlanError::Allowlisted {
                        profile: profile.name.to_string(),
                        target: name.to_string(),
                        key: "unlisted_name",
                    });
                }
                let control = vantage.upstream.map(|server| ProbeTarget::LookupAt {
                    server,
                    name: name.clone(),
                });
                b.check(
                    CheckKind::UnlistedNameUnresolved,
                    ProbeTarget::Lookup(name.clone()),
                    Expectation::DoesNotResolve,
                    control,
                );
            }
            None => b.skip(CheckKind::UnlistedNameUnresolved, unset("unlisted_name")),
        }
    }
    Ok(CanaryPlan {
        profile: profile.name.clone(),
        checks: b.checks,
        not_planned: b.not_planned,
    })
}

struct Builder<'a> {
    profile: &'a Profile,
    bound: Duration,
    checks: Vec<CanaryCheck>,
    not_planned: Vec<NotPlanned>,
}

impl Builder<'_> {
    fn check(
        &mut self,
        kind: CheckKind,
        target: ProbeTarget,
        expect: Expectation,
        control: Option<ProbeTarget>,
    ) {
        self.checks.push(CanaryCheck {
            kind,
            target,
            expect,
            bound: self.bound,
            control,
        });
    }

    fn skip(&mut self, kind: CheckKind, reason: impl Into<String>) {
        self.not_planned.push(NotPlanned {
            kind,
            reason: reason.into(),
        });
    }

    fn allowlisted(&self, ip: IpAddr, key: &'static str) -> Result<(), PlanError> {
        if self.profile.mode == EgressMode::Allowlist && allows_ip(self.profile, ip) {
            return Err(PlanError::Allowlisted {
                profile: self.profile.name.to_string(),
                target: ip.to_string(),
                key,
            });
        }
        Ok(())
    }
}

/// The first allow entry a TCP connect can reach: a host name or a single
/// address, not UDP-only, at its first port (or the default).
fn probe_target(profile: &Profile) -> Option<ProbeTarget> {
    profile.allow.iter().find_map(|e| {
        if e.protocol == Some(Protocol::Udp) {
            return None;
        }
        let port = e.ports.map_or(DEFAULT_PROBE_PORT, |p| p.start());
        match &e.target {
            AllowTarget::Host(h) => Some(ProbeTarget::Name {
                host: h.clone(),
                port,
            }),
            AllowTarget::Net(net) if net.prefix_len() == net.max_prefix_len() => {
                Some(ProbeTarget::Addr(SocketAddr::new(net.addr(), port)))
            }
            AllowTarget::Net(_) | AllowTarget::Wildcard(_) => None,
        }
    })
}

/// Where a UDP datagram is allowed: the canary's address and port on an
/// internet profile; on an allowlist, the first single-address entry that
/// allows UDP, at its first port (an entry needs a port to be probed).
fn udp_target(profile: &Profile, cfg: &VerificationConfig) -> Option<SocketAddr> {
    match profile.mode {
        EgressMode::None => None,
        EgressMode::Internet => cfg.canary,
        EgressMode::Allowlist => profile.allow.iter().find_map(|e| {
            if e.protocol == Some(Protocol::Tcp) {
                return None;
            }
            let port = e.ports?.start();
            match &e.target {
                AllowTarget::Net(net) if net.prefix_len() == net.max_prefix_len() => {
                    Some(SocketAddr::new(net.addr(), port))
                }
                _ => None,
            }
        }),
    }
}

fn allows_ip(profile: &Profile, ip: IpAddr) -> bool {
    profile.allow.iter().any(|e| match &e.target {
        AllowTarget::Net(net) => IpNet::contains(net, &ip),
        AllowTarget::Host(_) | AllowTarget::Wildcard(_) => false,
    })
}

fn allows_name(profile: &Profile, name: &HostName) -> bool {
    profile.allow.iter().any(|e| match &e.target {
        AllowTarget::Host(h) => h.normalized() == name.normalized(),
        AllowTarget::Wildcard(suffix) => {
            suffix.covers(name) && suffix.normalized() != name.normalized()
        }
        AllowTarget::Net(_) => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn cfg() -> VerificationConfig {
        VerificationConfig {
            canary: Some("198.51.100.7:443".parse().unwrap()),
            canary_v6: Some("[2001:db8::7]:443".parse().unwrap()),
            unlisted_name: Some("unlisted.example.org".parse().unwrap()),
            ..VerificationConfig::default()
        }
    }

    fn vantage() -> Vantage {
        Vantage {
            host_lan: Some("192.168.1.10:40001".parse().unwrap()),
            gateway_port: Some("10.231.3.1:40002".parse().unwrap()),
            sibling: None,
            upstream: Some("192.168.1.1:53".parse().unwrap()),
        }
    }

    fn kinds(p: &CanaryPlan) -> Vec<CheckKind> {
        p.checks.iter().map(|c| c.kind).collect()
    }

    #[test]
    fn allowlist_plan_has_every_check() {
        let config = Config::builtin_default();
        let p = plan(
            config.profiles.get("allowlist").unwrap(),
            &cfg(),
            &vantage(),
            Requirement::Strict,
        )
        .unwrap();
        assert_eq!(
            kinds(&p),
            [
                CheckKind::AllowedConnects,
                CheckKind::CanaryBlocked,
                CheckKind::Ipv6Blocked,
                CheckKind::HostLanBlocked,
                CheckKind::GatewayPortBlocked,
                CheckKind::MetadataBlocked,
                CheckKind::ForeignResolverBlocked,
                CheckKind::UnlistedNameUnresolved,
            ]
        );
        assert_eq!(p.checks[0].target.to_string(), "tcp 203.0.113.10:443");
        assert!(p.checks.iter().all(|c| c.bound == Duration::from_secs(5)));
        // Every must-fail check but the metadata one has a control.
        for c in &p.checks {
            let wants = c.expect != Expectation::Connects && c.kind != CheckKind::MetadataBlocked;
            assert_eq!(c.control.is_some(), wants, "{:?}", c.kind);
        }
        let skipped: Vec<CheckKind> = p.not_planned().iter().map(|n| n.kind).collect();
        assert_eq!(skipped, [CheckKind::AllowedUdp, CheckKind::SiblingBlocked]);
    }

    #[test]
    fn internet_and_none_plans() {
        let config = Config::builtin_default();
        let v = Vantage {
            sibling: Some("10.231.2.20".parse().unwrap()),
            ..vantage()
        };
        let net = plan(
            config.profiles.get("internet").unwrap(),
            &cfg(),
            &v,
            Requirement::Strict,
        )
        .unwrap();
        // The internet profile has an IPv6 subnet: v6 egress is allowed there.
        assert_eq!(
            kinds(&net),
            [
                CheckKind::AllowedConnects,
                CheckKind::AllowedUdp,
                CheckKind::HostLanBlocked,
                CheckKind::GatewayPortBlocked,
                CheckKind::SiblingBlocked,
                CheckKind::MetadataBlocked,
                CheckKind::ForeignResolverBlocked,
            ]
        );
        let iso = plan(
            config.profiles.get("isolated").unwrap(),
            &cfg(),
            &vantage(),
            Requirement::Strict,
        )
        .unwrap();
        assert_eq!(
            kinds(&iso),
            [
                CheckKind::CanaryBlocked,
                CheckKind::Ipv6Blocked,
                CheckKind::HostLanBlocked,
                CheckKind::GatewayPortBlocked,
                CheckKind::MetadataBlocked,
                CheckKind::ForeignResolverBlocked,
            ]
        );
    }

    #[test]
    fn without_settings_an_enforced_kind_runs_what_it_can() {
        let config = Config::builtin_default();
        let bare = VerificationConfig::default();
        let p = plan(
            config.profiles.get("isolated").unwrap(),
            &bare,
            &Vantage::default(),
            Requirement::Configured,
        )
        .unwrap();
        assert_eq!(kinds(&p), [CheckKind::MetadataBlocked]);
        let reasons: Vec<&str> = p.not_planned().iter().map(|n| n.reason.as_str()).collect();
        assert!(
            reasons.contains(&"host.verification.canary is not set"),
            "{reasons:?}"
        );
        let e = plan(
            config.profiles.get("isolated").unwrap(),
            &bare,
            &Vantage::default(),
            Requirement::Strict,
        )
        .unwrap_err();
        assert_eq!(e, PlanError::Missing { key: "canary" });
    }

    #[test]
    fn allowlisted_canary_is_refused() {
        let config = Config::builtin_default();
        let mut c = cfg();
        c.canary = Some("203.0.113.5:443".parse().unwrap());
        let err = plan(
            config.profiles.get("allowlist").unwrap(),
            &c,
            &vantage(),
            Requirement::Configured,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "profile \"allowlist\" allows 203.0.113.5, which the canary expects to be \
                blocked; choose a host.verification.canary outside the profile's \
                allowlist"
        );
    }

    #[test]
    fn observed_reached_only_for_answers() {
        assert!(Observed::Connected.reached());
        assert!(Observed::Resolved(vec!["192.0.2.1".parse().unwrap()]).reached());
        assert!(!Observed::Resolved(vec![]).reached());
        for o in [
            Observed::Refused,
            Observed::TimedOut,
            Observed::Unreachable,
            Observed::NotResolved,
            Observed::ProbeError("x".into()),
        ] {
            assert!(!o.reached(), "{o}");
        }
        assert_eq!(CheckKind::SiblingBlocked.as_str(), "sibling-blocked");
        assert_eq!(
            serde_json::to_value(CheckKind::SiblingBlocked).unwrap(),
            "sibling-blocked"
        );
    }
}
