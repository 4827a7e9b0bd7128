//! Building a profile's canary plan: which checks, against which
//! destinations, with which controls.

use core::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::*;
use crate::config::VerificationConfig;
use crate::names::HostName;
use crate::profile::{AllowTarget, EgressMode, Profile, Protocol};
use crate::reserved;

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
    let canaries = [
        ("canary", cfg.canary.map(|c| c.ip())),
        ("canary_v6", cfg.canary_v6.map(|c| IpAddr::V6(*c.ip()))),
    ];
    for (key, ip) in canaries {
        if let Some((ip, range)) = ip.and_then(|ip| Some((ip, reserved::reserved_range(ip)?))) {
            return Err(PlanError::Reserved {
                key,
                target: ip.to_string(),
                range: range.to_string(),
            });
        }
    }

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
