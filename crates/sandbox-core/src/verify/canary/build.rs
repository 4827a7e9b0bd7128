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

    // corral's own targets stand in for the canaries not given; a given
    // one always wins (an operator's address proves the real uplink).
    let own = vantage.own_targets;
    let canary = cfg
        .canary
        .map(Canary::Given)
        .or(own.map(|o| Canary::Own(o.v4)));
    let canary_v6 = cfg
        .canary_v6
        .map(|c| Canary::Given(SocketAddr::V6(c)))
        .or(own.map(|o| Canary::Own(SocketAddr::V6(o.v6))));
    let missing = |b: &mut Builder, kind: CheckKind, key: &str| match &vantage.own_targets_failed {
        Some(why) => b.could_not_run(
            kind,
            format!(
                "{}, and corral's own target cannot be used: {why}",
                unset(key)
            ),
        ),
        None => b.skip(kind, unset(key)),
    };

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
        EgressMode::Internet => match canary {
            Some(c) => b.check(
                CheckKind::AllowedConnects,
                ProbeTarget::Addr(c.addr()),
                Expectation::Connects,
                None,
            ),
            None => missing(&mut b, CheckKind::AllowedConnects, "canary"),
        },
    }
    match (profile.mode, udp_target(profile, canary.map(Canary::addr))) {
        (EgressMode::None, _) => {}
        (_, Some(t)) => b.check(
            CheckKind::AllowedUdp,
            ProbeTarget::Udp(t),
            Expectation::Connects,
            None,
        ),
        (EgressMode::Internet, None) => missing(&mut b, CheckKind::AllowedUdp, "canary"),
        (_, None) => b.skip(
            CheckKind::AllowedUdp,
            "no allow entry is a single address that allows UDP",
        ),
    }
    if profile.mode != EgressMode::Internet {
        match canary {
            Some(c) => {
                if b.blockable(c, "canary", CheckKind::CanaryBlocked)? {
                    let t = ProbeTarget::Addr(c.addr());
                    b.check(
                        CheckKind::CanaryBlocked,
                        t.clone(),
                        Expectation::Fails,
                        Some(t),
                    );
                }
            }
            None => missing(&mut b, CheckKind::CanaryBlocked, "canary"),
        }
    }
    // IPv6 is allowed only to an internet profile that has an IPv6 subnet:
    // there the IPv6 canary is allowed traffic, as the IPv4 one is.
    if profile.mode == EgressMode::Internet && profile.subnet_v6.is_some() {
        match canary_v6 {
            Some(c) => {
                b.check(
                    CheckKind::Ipv6Allowed,
                    ProbeTarget::Addr(c.addr()),
                    Expectation::Connects,
                    None,
                );
                b.widen_last(IPV6_READY_BOUND);
            }
            None => missing(&mut b, CheckKind::Ipv6Allowed, "canary_v6"),
        }
    } else {
        match canary_v6 {
            Some(c) => {
                if b.blockable(c, "canary_v6", CheckKind::Ipv6Blocked)? {
                    let t = ProbeTarget::Addr(c.addr());
                    b.check(
                        CheckKind::Ipv6Blocked,
                        t.clone(),
                        Expectation::Fails,
                        Some(t),
                    );
                }
            }
            None => missing(&mut b, CheckKind::Ipv6Blocked, "canary_v6"),
        }
    }
    match vantage.host_lan {
        Some(a) => b.check(
            CheckKind::HostLanBlocked,
            ProbeTarget::Addr(a),
            Expectation::Fails,
            Some(ProbeTarget::Addr(a)),
        ),
        None => match &vantage.host_lan_failed {
            Some(why) => b.could_not_run(CheckKind::HostLanBlocked, why.clone()),
            None => b.skip(
                CheckKind::HostLanBlocked,
                "the host has no uplink address to listen on",
            ),
        },
    }
    match vantage.gateway_port {
        Some(a) => b.check(
            CheckKind::GatewayPortBlocked,
            ProbeTarget::Addr(a),
            Expectation::Fails,
            Some(ProbeTarget::Addr(a)),
        ),
        None => match &vantage.gateway_port_failed {
            Some(why) => b.could_not_run(CheckKind::GatewayPortBlocked, why.clone()),
            None => b.skip(
                CheckKind::GatewayPortBlocked,
                "the profile's gateway address is not on this host",
            ),
        },
    }
    match vantage.sibling {
        Some(ip) => {
            b.check(
                CheckKind::SiblingBlocked,
                ProbeTarget::Ping(ip),
                Expectation::Fails,
                Some(ProbeTarget::Ping(ip)),
            );
            b.tighten_last(SIBLING_BOUND);
        }
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
    match canary {
        Some(c) if b.blockable(c, "canary", CheckKind::ForeignResolverBlocked)? => {
            let server = SocketAddr::new(c.addr().ip(), DNS_PORT);
            b.check(
                CheckKind::ForeignResolverBlocked,
                ProbeTarget::Resolver(server),
                Expectation::Fails,
                Some(ProbeTarget::Resolver(server)),
            );
        }
        // Left out, with why, by `blockable`.
        Some(_) => {}
        None => missing(&mut b, CheckKind::ForeignResolverBlocked, "canary"),
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

    /// Give the last check at least `at_least`, whatever the configured
    /// bound.
    fn widen_last(&mut self, at_least: Duration) {
        if let Some(c) = self.checks.last_mut() {
            c.bound = c.bound.max(at_least);
        }
    }

    /// Bound the last check by `at_most` as well as the configured bound.
    fn tighten_last(&mut self, at_most: Duration) {
        if let Some(c) = self.checks.last_mut() {
            c.bound = c.bound.min(at_most);
        }
    }

    fn skip(&mut self, kind: CheckKind, reason: impl Into<String>) {
        self.not_planned.push(NotPlanned {
            kind,
            reason: reason.into(),
            could_not_run: false,
        });
    }

    fn could_not_run(&mut self, kind: CheckKind, reason: impl Into<String>) {
        self.not_planned.push(NotPlanned {
            kind,
            reason: reason.into(),
            could_not_run: true,
        });
    }

    /// Whether a must-fail check against `c` proves anything: a given
    /// canary on the allowlist refuses the plan (the operator must choose
    /// another); corral's own target on it leaves the check out, with why.
    fn blockable(
        &mut self,
        c: Canary,
        key: &'static str,
        kind: CheckKind,
    ) -> Result<bool, PlanError> {
        let ip = c.addr().ip();
        if !(self.profile.mode == EgressMode::Allowlist && allows_ip(self.profile, ip)) {
            return Ok(true);
        }
        match c {
            Canary::Given(_) => Err(PlanError::Allowlisted {
                profile: self.profile.name.to_string(),
                target: ip.to_string(),
                key,
            }),
            Canary::Own(_) => {
                self.skip(
                    kind,
                    format!(
                        "the profile allows corral's own target {ip}; set host.verification.{key} to an address it does not allow"
                    ),
                );
                Ok(false)
            }
        }
    }
}

/// A canary destination: the operator's, or corral's own host-local target.
#[derive(Debug, Clone, Copy)]
enum Canary {
    Given(SocketAddr),
    Own(SocketAddr),
}

impl Canary {
    fn addr(self) -> SocketAddr {
        match self {
            Canary::Given(a) | Canary::Own(a) => a,
        }
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
fn udp_target(profile: &Profile, canary: Option<SocketAddr>) -> Option<SocketAddr> {
    match profile.mode {
        EgressMode::None => None,
        EgressMode::Internet => canary,
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
    crate::admission::allowlist_admits(&profile.allow, name.as_str())
}
