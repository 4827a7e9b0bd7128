//! The probe list, derived from the profiles (never hand-written per
//! configuration): per allowlist profile an allowed endpoint reachable, the
//! same address on another port and an unlisted public address blocked;
//! per internet profile public reachable and private/LAN/metadata/uplink
//! blocked; per none profile nothing reachable; everywhere sandbox ↔
//! sandbox, host services, DNS to a non-gateway server and IPv6 per plan.

use std::net::{IpAddr, SocketAddr};

use corral_sandbox_core::{AllowEntry, AllowTarget, EgressMode, Profile, ProfileSet, Protocol};

use super::report::Expect;
use crate::lab::allowlisted_endpoints;
use crate::lab::topology::{
    HOST_SERVICE_PORT, HOST_UPLINK_V4, LAN_HOST_V4, LAN_PORT, PRIVATE, PUBLIC_RESOLVER_V4,
    PUBLIC_RESOLVER_V6, PUBLIC_V4, PUBLIC_V6, SANDBOX_PORT, TCP_PORTS, Topology,
};
use crate::lab::{Probe, Transport};
use corral_egress::resolve::Resolution;

/// One probe to run, before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedProbe {
    /// What it proves.
    pub what: String,
    /// Index into `Topology::sandboxes`.
    pub from: usize,
    /// The packet.
    pub probe: Probe,
    /// Reach or block.
    pub expect: Expect,
    /// A listener the internet namespace must have for the control to
    /// connect (an address:port not in the topology's defaults).
    pub needs: Option<(IpAddr, u16, Transport)>,
}

/// Whether `profile` allows `ip:port` over `t`, by its allow entries.
pub fn allows(
    profile: &Profile,
    resolution: &Resolution,
    ip: IpAddr,
    port: u16,
    t: Transport,
) -> bool {
    profile
        .allow
        .iter()
        .any(|e| entry_allows(e, resolution, ip, port, t))
}

fn entry_allows(
    e: &AllowEntry,
    resolution: &Resolution,
    ip: IpAddr,
    port: u16,
    t: Transport,
) -> bool {
    let addr_ok = match &e.target {
        AllowTarget::Net(n) => n.contains(&ip),
        AllowTarget::Host(h) => resolution.get(h).is_some_and(|a| a.contains(&ip)),
        AllowTarget::Wildcard(_) => false,
    };
    let port_ok = e
        .ports
        .is_none_or(|r| (r.start()..=r.end()).contains(&port));
    let proto_ok = matches!(
        (e.protocol, t),
        (None, _) | (Some(Protocol::Tcp), Transport::Tcp) | (Some(Protocol::Udp), Transport::Udp)
    );
    addr_ok && port_ok && proto_ok
}

/// Every probe for `profiles` in `topo`.
pub fn derive(
    profiles: &ProfileSet,
    resolution: &Resolution,
    topo: &Topology,
) -> Vec<PlannedProbe> {
    let mut out = Vec::new();
    let index_of = |profile: &str, nth: usize| {
        topo.sandboxes
            .iter()
            .enumerate()
            .filter(|(_, s)| s.profile == profile)
            .nth(nth)
            .map(|(i, _)| i)
    };
    let names: Vec<&str> = profiles.iter().map(|p| p.name.as_str()).collect();
    for (pi, p) in profiles.iter().enumerate() {
        let Some(a) = index_of(p.name.as_str(), 0) else {
            continue;
        };
        let sb = &topo.sandboxes[a];
        let has_v6 = sb.v6.is_some();
        let family_ok = |ip: &IpAddr| ip.is_ipv4() || has_v6;
        let mut push = |what: &str, probe: Probe, expect, needs| {
            out.push(PlannedProbe {
                what: what.to_owned(),
                from: a,
                probe,
                expect,
                needs,
            });
        };
        match p.mode {
            EgressMode::Allowlist => {
                let single = ProfileSet::new(vec![p.clone()]).ok();
                let eps = single
                    .map(|s| allowlisted_endpoints(&s, resolution))
                    .unwrap_or_default();
                for (ip, port, t) in eps.into_iter().filter(|(ip, _, _)| family_ok(ip)) {
                    let to = SocketAddr::new(ip, port);
                    push(
                        "allowlisted address:port reachable",
                        Probe::l4(t, to),
                        Expect::Reach,
                        Some((ip, port, t)),
                    );
                    if let Some(other) = TCP_PORTS
                        .iter()
                        .chain(&[22, 8080])
                        .copied()
                        .find(|o| !allows(p, resolution, ip, *o, Transport::Tcp))
                    {
                        push(
                            "same address, other port blocked",
                            Probe::Tcp {
                                to: SocketAddr::new(ip, other),
                            },
                            Expect::Block,
                            Some((ip, other, Transport::Tcp)),
                        );
                    }
                }
                let unlisted = PUBLIC_V4
                    .iter()
                    .map(|a| IpAddr::V4(*a))
                    .chain(PUBLIC_V6.iter().map(|a| IpAddr::V6(*a)).filter(|_| has_v6))
                    .filter(|ip| !allows(p, resolution, *ip, 443, Transport::Tcp));
                for ip in unlisted.take(2) {
                    push(
                        "unlisted public address blocked",
                        Probe::Tcp {
                            to: SocketAddr::new(ip, 443),
                        },
                        Expect::Block,
                        None,
                    );
                }
                push(
                    "metadata address blocked",
                    Probe::Tcp {
                        to: SocketAddr::new(PRIVATE[4], 80),
                    },
                    Expect::Block,
                    None,
                );
            }
            EgressMode::Internet => {
                push(
                    "public address reachable (tcp)",
                    Probe::Tcp {
                        to: SocketAddr::new(PUBLIC_V4[0].into(), 443),
                    },
                    Expect::Reach,
                    None,
                );
                push(
                    "public address reachable (udp)",
                    Probe::Udp {
                        to: SocketAddr::new(PUBLIC_V4[1].into(), 4500),
                    },
                    Expect::Reach,
                    None,
                );
                push(
                    "public address reachable (icmp)",
                    Probe::Icmp {
                        to: PUBLIC_V4[2].into(),
                    },
                    Expect::Reach,
                    None,
                );
                if has_v6 {
                    push(
                        "public IPv6 address reachable",
                        Probe::Tcp {
                            to: SocketAddr::new(PUBLIC_V6[0].into(), 443),
                        },
                        Expect::Reach,
                        None,
                    );
                }
                for ip in PRIVATE.iter().filter(|ip| family_ok(ip)) {
                    push(
                        private_label(ip),
                        Probe::Tcp {
                            to: SocketAddr::new(*ip, 443),
                        },
                        Expect::Block,
                        None,
                    );
                }
                push(
                    "LAN host blocked",
                    Probe::Tcp {
                        to: SocketAddr::new(LAN_HOST_V4.into(), LAN_PORT),
                    },
                    Expect::Block,
                    None,
                );
            }
            EgressMode::None => {
                push(
                    "public address blocked (tcp)",
                    Probe::Tcp {
                        to: SocketAddr::new(PUBLIC_V4[0].into(), 443),
                    },
                    Expect::Block,
                    None,
                );
                push(
                    "public address blocked (icmp)",
                    Probe::Icmp {
                        to: PUBLIC_V4[0].into(),
                    },
                    Expect::Block,
                    None,
                );
                push(
                    "private address blocked",
                    Probe::Tcp {
                        to: SocketAddr::new(PRIVATE[0], 443),
                    },
                    Expect::Block,
                    None,
                );
                push(
                    "LAN host blocked",
                    Probe::Tcp {
                        to: SocketAddr::new(LAN_HOST_V4.into(), LAN_PORT),
                    },
                    Expect::Block,
                    None,
                );
                if has_v6 {
                    push(
                        "public IPv6 address blocked",
                        Probe::Tcp {
                            to: SocketAddr::new(PUBLIC_V6[0].into(), 443),
                        },
                        Expect::Block,
                        None,
                    );
                }
            }
        }
        // Everywhere: the host and its services, DNS, other sandboxes.
        push(
            "host uplink address blocked",
            Probe::Tcp {
                to: SocketAddr::new(HOST_UPLINK_V4.into(), HOST_SERVICE_PORT),
            },
            Expect::Block,
            None,
        );
        push(
            "host service on the gateway blocked",
            Probe::Tcp {
                to: SocketAddr::new(sb.gateway_v4.into(), HOST_SERVICE_PORT),
            },
            Expect::Block,
            None,
        );
        push(
            "DNS to a non-gateway server blocked",
            Probe::Udp {
                to: SocketAddr::new(PUBLIC_RESOLVER_V4.into(), 53),
            },
            Expect::Block,
            None,
        );
        if has_v6 {
            push(
                "DNS over IPv6 to a non-gateway server blocked",
                Probe::Udp {
                    to: SocketAddr::new(PUBLIC_RESOLVER_V6.into(), 53),
                },
                Expect::Block,
                None,
            );
        }
        if let Some(b) = index_of(p.name.as_str(), 1) {
            let peer = &topo.sandboxes[b];
            push(
                "sandbox to sandbox, same bridge, blocked",
                Probe::Tcp {
                    to: SocketAddr::new(peer.v4.into(), SANDBOX_PORT),
                },
                Expect::Block,
                None,
            );
        }
        let next = names[(pi + 1) % names.len()];
        if next != p.name.as_str()
            && let Some(c) = index_of(next, 0)
        {
            let other = &topo.sandboxes[c];
            push(
                "sandbox to sandbox, across bridges, blocked",
                Probe::Tcp {
                    to: SocketAddr::new(other.v4.into(), SANDBOX_PORT),
                },
                Expect::Block,
                None,
            );
        }
    }
    // The second sandbox of each profile probes back, so both directions
    // on one bridge are covered.
    for p in profiles.iter() {
        if let (Some(a), Some(b)) = (index_of(p.name.as_str(), 0), index_of(p.name.as_str(), 1)) {
            out.push(PlannedProbe {
                what: "sandbox to sandbox, same bridge (reverse), blocked".to_owned(),
                from: b,
                probe: Probe::Tcp {
                    to: SocketAddr::new(topo.sandboxes[a].v4.into(), SANDBOX_PORT),
                },
                expect: Expect::Block,
                needs: None,
            });
        }
    }
    out
}

fn private_label(ip: &IpAddr) -> &'static str {
    match ip {
        IpAddr::V4(v4) if v4.octets()[..2] == [169, 254] => "metadata address blocked",
        IpAddr::V4(v4) if v4.octets()[0] == 100 => "shared (CGNAT) address blocked",
        IpAddr::V4(_) => "RFC 1918 address blocked",
        IpAddr::V6(_) => "private IPv6 (ULA) address blocked",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_sandbox_core::config::Config;

    #[test]
    fn allow_matching_follows_ports_and_protocols() {
        let cfg = Config::builtin_default();
        let p = cfg.profiles.get("allowlist").unwrap();
        let r = Resolution::new();
        let ip: IpAddr = "203.0.113.10".parse().unwrap();
        assert!(allows(p, &r, ip, 443, Transport::Tcp));
        assert!(!allows(p, &r, ip, 443, Transport::Udp));
        assert!(!allows(p, &r, ip, 80, Transport::Tcp));
        // 203.0.113.0/28 allows 8000-8100 for .10 too.
        assert!(allows(p, &r, ip, 8080, Transport::Tcp));
        assert!(!allows(
            p,
            &r,
            "198.51.100.10".parse().unwrap(),
            443,
            Transport::Tcp
        ));
    }
}
