//! The canary plan: the checks a freshly created sandbox must pass, through
//! the normal exec path, before any work runs in it. The caller runs them
//! and reports [`CheckResult`]s; the gate judges.

use core::net::{IpAddr, SocketAddr};
use std::fmt;
use std::time::Duration;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::config::VerificationConfig;
use crate::names::{HostName, ProfileName};
use crate::profile::{AllowTarget, EgressMode, Profile, Protocol};

/// Port probed for an allow entry that names no port.
pub const DEFAULT_PROBE_PORT: u16 = 443;

/// What a check is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckKind {
    /// An allowed destination must connect (the filter lets policy through).
    AllowedConnects,
    /// The configured canary destination must not connect.
    CanaryBlocked,
    /// A global IPv6 address must not connect.
    Ipv6Blocked,
    /// The host's own LAN address must not connect.
    HostLanBlocked,
    /// A name on no allowlist must not resolve through the gateway.
    UnlistedNameUnresolved,
}

impl fmt::Display for CheckKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CheckKind::AllowedConnects => "allowed destination connects",
            CheckKind::CanaryBlocked => "canary destination blocked",
            CheckKind::Ipv6Blocked => "global IPv6 blocked",
            CheckKind::HostLanBlocked => "host LAN address blocked",
            CheckKind::UnlistedNameUnresolved => "unlisted name does not resolve",
        })
    }
}

/// What a check expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expectation {
    /// A TCP connection is established within the bound.
    Connects,
    /// The TCP connection fails (refused, unreachable or timed out) within the bound.
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
    /// A TCP connect to a name (resolved by the sandbox's gateway resolver).
    Name {
        /// The name.
        host: HostName,
        /// The port.
        port: u16,
    },
    /// A name lookup only.
    Lookup(HostName),
}

impl fmt::Display for ProbeTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeTarget::Addr(a) => write!(f, "{a}"),
            ProbeTarget::Name { host, port } => write!(f, "{host}:{port}"),
            ProbeTarget::Lookup(h) => write!(f, "{h}"),
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
}

/// Every check for one sandbox on one profile. Only [`plan`] builds one, so
/// nobody can hand the gate a plan with the hard checks left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CanaryPlan {
    profile: ProfileName,
    checks: Vec<CanaryCheck>,
}

impl CanaryPlan {
    /// The profile the sandbox is on.
    pub fn profile(&self) -> &ProfileName {
        &self.profile
    }

    /// The checks, in the order to run them.
    pub fn checks(&self) -> &[CanaryCheck] {
        &self.checks
    }
}

/// What the prober saw for one check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Observed {
    /// The connection was established.
    Connected,
    /// Refused (RST or ICMP unreachable/prohibited).
    Refused,
    /// No answer within the bound.
    TimedOut,
    /// No route to the destination.
    Unreachable,
    /// The name did not resolve (NXDOMAIN, refused or empty answer).
    NotResolved,
    /// The name resolved (to these addresses).
    Resolved(Vec<IpAddr>),
    /// The probe could not run; never a pass.
    ProbeError(String),
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

/// Build the plan for `profile`. `host_lan` is this host's LAN address and
/// a port to probe on it.
pub fn plan(
    profile: &Profile,
    cfg: &VerificationConfig,
    host_lan: SocketAddr,
) -> Result<CanaryPlan, PlanError> {
    let bound = cfg.options.check_timeout;
    let canary = cfg.canary.ok_or(PlanError::Missing { key: "canary" })?;
    let canary_v6 = cfg
        .canary_v6
        .ok_or(PlanError::Missing { key: "canary_v6" })?;
    let unlisted = cfg.unlisted_name.clone().ok_or(PlanError::Missing {
        key: "unlisted_name",
    })?;
    let check = |kind, target, expect| CanaryCheck {
        kind,
        target,
        expect,
        bound,
    };
    let allowlisted = |ip: IpAddr, key: &'static str| -> Result<(), PlanError> {
        if profile.mode == EgressMode::Allowlist && allows_ip(profile, ip) {
            return Err(PlanError::Allowlisted {
                profile: profile.name.to_string(),
                target: ip.to_string(),
                key,
            });
        }
        Ok(())
    };
    let mut checks = Vec::new();
    match profile.mode {
        EgressMode::None => {}
        EgressMode::Allowlist => checks.push(check(
            CheckKind::AllowedConnects,
            probe_target(profile).ok_or_else(|| PlanError::NoProbeableEntry {
                profile: profile.name.to_string(),
            })?,
            Expectation::Connects,
        )),
        // For an internet profile the canary is allowed traffic.
        EgressMode::Internet => checks.push(check(
            CheckKind::AllowedConnects,
            ProbeTarget::Addr(canary),
            Expectation::Connects,
        )),
    }
    if profile.mode != EgressMode::Internet {
        allowlisted(canary.ip(), "canary")?;
        checks.push(check(
            CheckKind::CanaryBlocked,
            ProbeTarget::Addr(canary),
            Expectation::Fails,
        ));
    }
    // IPv6 is allowed only to an internet profile that has an IPv6 subnet.
    if !(profile.mode == EgressMode::Internet && profile.subnet_v6.is_some()) {
        allowlisted(IpAddr::V6(*canary_v6.ip()), "canary_v6")?;
        checks.push(check(
            CheckKind::Ipv6Blocked,
            ProbeTarget::Addr(SocketAddr::V6(canary_v6)),
            Expectation::Fails,
        ));
    }
    checks.push(check(
        CheckKind::HostLanBlocked,
        ProbeTarget::Addr(host_lan),
        Expectation::Fails,
    ));
    if profile.mode == EgressMode::Allowlist {
        if allows_name(profile, &unlisted) {
            return Err(PlanError::Allowlisted {
                profile: profile.name.to_string(),
                target: unlisted.to_string(),
                key: "unlisted_name",
            });
        }
        checks.push(check(
            CheckKind::UnlistedNameUnresolved,
            ProbeTarget::Lookup(unlisted),
            Expectation::DoesNotResolve,
        ));
    }
    Ok(CanaryPlan {
        profile: profile.name.clone(),
        checks,
    })
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

    fn lan() -> SocketAddr {
        "192.168.1.10:22".parse().unwrap()
    }

    fn kinds(p: &CanaryPlan) -> Vec<CheckKind> {
        p.checks.iter().map(|c| c.kind).collect()
    }

    #[test]
    fn allowlist_plan_has_every_check() {
        let config = Config::builtin_default();
        let p = plan(config.profiles.get("allowlist").unwrap(), &cfg(), lan()).unwrap();
        assert_eq!(
            kinds(&p),
            [
                CheckKind::AllowedConnects,
                CheckKind::CanaryBlocked,
                CheckKind::Ipv6Blocked,
                CheckKind::HostLanBlocked,
                CheckKind::UnlistedNameUnresolved
            ]
        );
        assert_eq!(p.checks[0].target.to_string(), "203.0.113.10:443");
        assert!(p.checks.iter().all(|c| c.bound == Duration::from_secs(5)));
    }

    #[test]
    fn internet_and_none_plans() {
        let config = Config::builtin_default();
        let net = plan(config.profiles.get("internet").unwrap(), &cfg(), lan()).unwrap();
        // The internet profile has an IPv6 subnet: v6 egress is allowed there.
        assert_eq!(
            kinds(&net),
            [CheckKind::AllowedConnects, CheckKind::HostLanBlocked]
        );
        let iso = plan(config.profiles.get("isolated").unwrap(), &cfg(), lan()).unwrap();
        assert_eq!(
            kinds(&iso),
            [
                CheckKind::CanaryBlocked,
                CheckKind::Ipv6Blocked,
                CheckKind::HostLanBlocked
            ]
        );
    }

    #[test]
    fn allowlisted_canary_is_refused() {
        let config = Config::builtin_default();
        let mut c = cfg();
        c.canary = Some("203.0.113.5:443".parse().unwrap());
        let err = plan(config.profiles.get("allowlist").unwrap(), &c, lan()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "profile \"allowlist\" allows 203.0.113.5, which the canary expects to be \
                blocked; choose a host.verification.canary outside the profile's \
                allowlist"
        );
        let err = plan(
            config.profiles.get("allowlist").unwrap(),
            &VerificationConfig::default(),
            lan(),
        )
        .unwrap_err();
        assert_eq!(err, PlanError::Missing { key: "canary" });
    }
}
