//! Attacks on corral's L3/L4 rules, by class of hole (the numbering of
//! docs/security.md, "L3/L4"). Each [`Attack`] is derived from the
//! profiles and the topology, never hand-written per configuration:
//!
//! 1. forged sources: a datagram from another profile's subnet, from an
//!    IPv6 prefix the profile does not have, and from the gateway's own
//!    address, towards the internet;
//! 2. conntrack reply direction: a packet "from" a destination the profile
//!    may not reach to one it may creates a conntrack entry, then the
//!    "reply" goes to the forbidden one;
//! 3. the gateway as a reflector: a query to a UDP service on the gateway
//!    with a forged source, whose answer must not leave by the uplink;
//! 6. the host's own networks: a neighbour of the host on a public-looking
//!    LAN (IPv4 and IPv6);
//! 7. a sandbox port off its bridge: the port is detached (as after a
//!    teardown and apply) and the sandbox sends to the internet and to a
//!    host service.
//!
//! Classes 4 and 5 (learned sets per class, rebinding) need the gateway
//! resolver and names: the drill's DNS rows cover them for profiles with
//! names. Classes 8 to 10 (the Multipass bridge, revocation, verify's blind
//! spots) change the host behind the drill's back and are proved by the
//! egress tests named in docs/security.md.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use corral_egress::link::Links;
use corral_egress::resolve::Resolution;
use corral_sandbox_core::{EgressMode, ProfileSet};
use serde::Serialize;

use super::{UdpSink, gateway_mac, lands, mac_of, observed, same_family, udp_frame};
use crate::lab::topology::{
    HOST_UPLINK_V4, LAN_PORT, LAN_PUBLIC_V4, LAN_PUBLIC_V6, PRIVATE, PUBLIC_V4, PUBLIC_V6,
    SandboxNs, Topology, probe_from,
};
use crate::lab::{Listeners, Observed, Probe, Transport};
use crate::raw::frame::{self, Link, Mac, TcpFlags};
use crate::raw::{Capture, Marker};

/// A TCP segment from `src` to `dst` with `flags` and `payload`.
fn tcp_frame(
    from_mac: Mac,
    to_mac: Mac,
    src: SocketAddr,
    dst: SocketAddr,
    flags: TcpFlags,
    payload: &[u8],
) -> std::io::Result<Vec<u8>> {
    frame::ip(
        &Link::new(from_mac, to_mac),
        src.ip(),
        dst.ip(),
        64,
        frame::Transport::Tcp {
            sport: src.port(),
            dport: dst.port(),
            flags,
            seq: 0x1000,
            ack: 0x2001,
        },
        payload,
    )
    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))
}

/// A class of hole an attack belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// 1: packets with a source outside the profile's subnets.
    ForgedSource,
    /// 2: packets accepted as a conntrack reply the sandbox did not earn.
    ReplyDirection,
    /// 3: a host service answering a forged source out of the uplink.
    Reflector,
    /// 5: reserved ranges (here the IPv6 ones issue 26 found missing).
    Reserved,
    /// 6: the host's directly connected networks and routers.
    HostNetworks,
    /// 7: a sandbox whose port is no longer on its bridge.
    OffBridge,
    /// 11: ICMP errors quoting a flow that is not the sender's profile's.
    ForeignRelated,
    /// 12: one sandbox filling the host's conntrack table.
    ConntrackFill,
}

impl Class {
    /// The class number of docs/security.md.
    pub fn number(self) -> u8 {
        match self {
            Class::ForgedSource => 1,
            Class::ReplyDirection => 2,
            Class::Reflector => 3,
            Class::Reserved => 5,
            Class::HostNetworks => 6,
            Class::OffBridge => 7,
            Class::ForeignRelated => 11,
            Class::ConntrackFill => 12,
        }
    }

    /// The class as the drill names it: `attack 1 (forged sources)`.
    pub fn label(self) -> String {
        let title = match self {
            Class::ForgedSource => "forged sources",
            Class::ReplyDirection => "conntrack reply direction",
            Class::Reflector => "gateway as a reflector",
            Class::Reserved => "rebinding, reserved ranges",
            Class::HostNetworks => "the host's own networks",
            Class::OffBridge => "port off its bridge",
            Class::ForeignRelated => "ICMP errors related to another's flow",
            Class::ConntrackFill => "one sandbox filling the conntrack table",
        };
        format!("attack {} ({title})", self.number())
    }
}

/// What an attack sends and where it looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shot {
    /// One UDP datagram from `src` to `to` (behind the uplink); seen on
    /// the internet side?
    Forged {
        /// The forged source.
        src: SocketAddr,
        /// The destination.
        to: SocketAddr,
    },
    /// A packet "from" `peer` to `via` (a destination the profile may
    /// reach: an allowlisted address, a public one, a service on the
    /// gateway), which makes conntrack record a flow `peer → via`; then a
    /// packet from `via` to `peer` — that flow's reply direction. Does it
    /// reach `peer`?
    Reply {
        /// The destination the profile may not reach.
        peer: SocketAddr,
        /// What the profile may reach.
        via: SocketAddr,
        /// TCP (a SYN, then the "reply" SYN-ACK) instead of UDP.
        tcp: bool,
    },
    /// A datagram "from" `forged` to a UDP echo service at `service` on the
    /// host: does the answer reach `forged` behind the uplink?
    Reflect {
        /// The forged source (a victim behind the uplink).
        forged: SocketAddr,
        /// The reflecting service.
        service: SocketAddr,
    },
    /// A plain probe.
    Probe(Probe),
    /// Detach the sandbox's port from its bridge, send one datagram to
    /// `to` (behind the uplink, or a socket on the host), re-attach.
    OffBridge {
        /// Where to send.
        to: SocketAddr,
        /// `to` is a host address: look for delivery to a socket there.
        host: bool,
    },
    /// An ICMP error quoting a flow of another profile or of the host
    /// (see [`super::related`]).
    Related(super::related::Shot),
    /// Bare ACKs or a flood of new flows (see [`super::conntrack_fill`]).
    Conntrack(super::conntrack_fill::Shot),
}

/// One attack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attack {
    /// Its class.
    pub class: Class,
    /// What it tries, e.g. `IPv4 source of another profile`.
    pub what: String,
    /// Index into `Topology::sandboxes`.
    pub from: usize,
    /// The packets.
    pub shot: Shot,
}

impl Attack {
    /// The destination, for reports.
    pub fn target(&self) -> String {
        match &self.shot {
            Shot::Forged { src, to } => format!("udp {to} from {src}"),
            Shot::Reply { peer, via, tcp } => {
                format!("{} {peer} via {via}", if *tcp { "tcp" } else { "udp" })
            }
            Shot::Reflect { forged, service } => format!("udp {service} from {forged}"),
            Shot::Probe(p) => p.to_string(),
            Shot::OffBridge { to, .. } => format!("udp {to} off the bridge"),
            Shot::Related(r) => r.target(),
            Shot::Conntrack(c) => c.target(),
        }
    }

    /// Whether it runs on its own (it changes the topology for a moment).
    pub fn exclusive(&self) -> bool {
        matches!(self.shot, Shot::OffBridge { .. })
    }
}

/// A sandbox-side UDP port for forged datagrams.
const SPORT: u16 = 40_123;

/// Class 5's targets: one address in each IPv6 range corral's first
/// reserved list missed (issue 26), each with a listener in the lab's
/// internet namespace.
pub const RESERVED_TARGETS_V6: [(Ipv6Addr, &str); 3] = [
    (
        Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 5),
        "IPv6 benchmarking space (2001:2::/48) from internet",
    ),
    (
        Ipv6Addr::new(0x2001, 0x20, 0, 0, 0, 0, 0, 5),
        "ORCHIDv2 (2001:20::/28) from internet",
    ),
    (
        Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 5),
        "IPv6 documentation space (3fff::/20) from internet",
    ),
];
/// The port class 5's targets listen on.
pub const RESERVED_PORT: u16 = 4_505;

/// The listeners `attacks` need in the lab's internet namespace.
pub fn listeners(attacks: &[Attack]) -> Vec<(IpAddr, u16, Transport)> {
    attacks
        .iter()
        .filter(|a| a.class == Class::Reserved)
        .filter_map(|a| match &a.shot {
            Shot::Probe(Probe::Tcp { to }) => Some((to.ip(), to.port(), Transport::Tcp)),
            _ => None,
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Every attack for `profiles` in `topo`.
pub fn derive(profiles: &ProfileSet, topo: &Topology) -> Vec<Attack> {
    let mut out = Vec::new();
    let index_of = |profile: &str, nth: usize| {
        topo.sandboxes
            .iter()
            .enumerate()
            .filter(|(_, s)| s.profile == profile)
            .nth(nth)
            .map(|(i, _)| i)
    };
    let other_subnet = |me: &str| {
        profiles
            .iter()
            .find(|p| p.name.as_str() != me)
            .map(|p| IpAddr::V4(Ipv4Addr::from(u32::from(p.subnet_v4.network()) + 77)))
    };
    for p in profiles {
        let Some(a) = index_of(p.name.as_str(), 0) else {
            continue;
        };
        let sb = &topo.sandboxes[a];
        let mut push = |class, what: &str, shot| {
            out.push(Attack {
                class,
                what: what.to_owned(),
                from: a,
                shot,
            });
        };
        let public4 = SocketAddr::new(IpAddr::V4(PUBLIC_V4[1]), 4500);
        let public6 = SocketAddr::new(IpAddr::V6(PUBLIC_V6[0]), 4500);
        // 1: forged sources. Only where a packet with the profile's own
        // source would get through (else the attack proves nothing new).
        if p.mode == EgressMode::Internet {
            if let Some(src) = other_subnet(p.name.as_str()) {
                push(
                    Class::ForgedSource,
                    "IPv4 source of another profile's subnet",
                    Shot::Forged {
                        src: SocketAddr::new(src, SPORT),
                        to: public4,
                    },
                );
            }
            if sb.v6.is_some() {
                push(
                    Class::ForgedSource,
                    "IPv6 source outside the profile's prefix",
                    Shot::Forged {
                        src: SocketAddr::new(
                            IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xdead, 0, 0, 0, 0, 1)),
                            SPORT,
                        ),
                        to: public6,
                    },
                );
            }
            // 5: reserved IPv6 ranges routed into the lab's internet (the
            // control reaches them without corral's rules).
            if sb.v6.is_some() {
                for (to, what) in RESERVED_TARGETS_V6 {
                    push(
                        Class::Reserved,
                        what,
                        Shot::Probe(Probe::Tcp {
                            to: SocketAddr::new(IpAddr::V6(to), RESERVED_PORT),
                        }),
                    );
                }
            }
            // 6: a neighbour of the host on a public-looking LAN.
            push(
                Class::HostNetworks,
                "host's LAN neighbour (IPv4, public-looking network)",
                Shot::Probe(Probe::Tcp {
                    to: SocketAddr::new(IpAddr::V4(LAN_PUBLIC_V4), LAN_PORT),
                }),
            );
            if sb.v6.is_some() {
                push(
                    Class::HostNetworks,
                    "host's LAN neighbour (IPv6)",
                    Shot::Probe(Probe::Tcp {
                        to: SocketAddr::new(IpAddr::V6(LAN_PUBLIC_V6), LAN_PORT),
                    }),
                );
            }
        }
        // 2: the reply-direction trick: a forged flow from a forbidden
        // peer to somewhere the profile may go, then its "reply".
        match p.mode {
            EgressMode::Internet => {
                push(
                    Class::ReplyDirection,
                    "IPv4 \"reply\" to a private address, via a public one",
                    Shot::Reply {
                        peer: SocketAddr::new(PRIVATE[0], 443),
                        via: public4,
                        tcp: false,
                    },
                );
                if sb.v6.is_some() {
                    push(
                        Class::ReplyDirection,
                        "IPv6 \"reply\" to a private address, via a public one",
                        Shot::Reply {
                            peer: SocketAddr::new(PRIVATE[5], 443),
                            via: public6,
                            tcp: false,
                        },
                    );
                }
            }
            EgressMode::Allowlist => {
                let single = ProfileSet::new(vec![p.clone()]).ok();
                let allowed = single
                    .map(|s| crate::lab::allowlisted_endpoints(&s, &Resolution::new()))
                    .unwrap_or_default();
                let forbidden = |v6: bool| {
                    let ip = if v6 {
                        IpAddr::V6(PUBLIC_V6[1])
                    } else {
                        IpAddr::V4(PUBLIC_V4[0])
                    };
                    SocketAddr::new(ip, 443)
                };
                for (ip, port, t) in allowed
                    .into_iter()
                    .filter(|(ip, _, _)| ip.is_ipv4() || sb.v6.is_some())
                    .take(2)
                {
                    push(
                        Class::ReplyDirection,
                        "\"reply\" to an unlisted address, via an allowlisted one",
                        Shot::Reply {
                            peer: forbidden(ip.is_ipv6()),
                            via: SocketAddr::new(ip, port),
                            tcp: t == Transport::Tcp,
                        },
                    );
                }
            }
            EgressMode::None => {}
        }
        let resolver = p.dns.resolves() && p.mode != EgressMode::None;
        if let Some(gw6) = sb.gateway_v6.filter(|_| p.mode == EgressMode::Internet) {
            push(
                Class::ForgedSource,
                "IPv6 source = the gateway's own address",
                Shot::Forged {
                    src: SocketAddr::new(IpAddr::V6(gw6), SPORT),
                    to: public6,
                },
            );
        }
        // 3: the gateway's resolver port as a reflector.
        if resolver {
            push(
                Class::Reflector,
                "IPv4 query with a forged source",
                Shot::Reflect {
                    forged: SocketAddr::new(IpAddr::V4(PUBLIC_V4[2]), 4500),
                    service: SocketAddr::new(IpAddr::V4(sb.gateway_v4), 53),
                },
            );
            if let Some(gw6) = sb.gateway_v6 {
                push(
                    Class::Reflector,
                    "IPv6 query with a forged source",
                    Shot::Reflect {
                        forged: SocketAddr::new(IpAddr::V6(PUBLIC_V6[1]), 4500),
                        service: SocketAddr::new(IpAddr::V6(gw6), 53),
                    },
                );
            }
        }
    }
    out.extend(super::related::derive(profiles, topo));
    // Class 12's rows are not here: their control is not the lab without
    // rules (it tracks nothing) but the plan without class 12's rules, so
    // they run on their own after the enforced half
    // (`conntrack_fill::rows`).
    // 7: off the bridge, from the second sandbox of the first profile (its
    // first sandbox stays attached for the other rows).
    if let Some(p) = profiles.iter().next()
        && let Some(b) = index_of(p.name.as_str(), 1)
    {
        let sb = &topo.sandboxes[b];
        out.push(Attack {
            class: Class::OffBridge,
            what: "to the internet with the port off its bridge".to_owned(),
            from: b,
            shot: Shot::OffBridge {
                to: SocketAddr::new(IpAddr::V4(PUBLIC_V4[3]), 4500),
                host: false,
            },
        });
        out.push(Attack {
            class: Class::OffBridge,
            what: "to a host service with the port off its bridge".to_owned(),
            from: b,
            shot: Shot::OffBridge {
                to: SocketAddr::new(IpAddr::V4(HOST_UPLINK_V4), 9_877),
                host: true,
            },
        });
        if let Some(v6) = profiles
            .iter()
            .find(|q| q.subnet_v6.is_some())
            .and_then(|q| index_of(q.name.as_str(), 1))
            .filter(|_| sb.v6.is_none())
        {
            out.push(Attack {
                class: Class::OffBridge,
                what: "IPv6 to the internet with the port off its bridge".to_owned(),
                from: v6,
                shot: Shot::OffBridge {
                    to: SocketAddr::new(IpAddr::V6(PUBLIC_V6[1]), 4500),
                    host: false,
                },
            });
        }
    }
    out
}

/// Runs `attack`; `Connected` means the crafted packets got through.
pub fn launch(topo: &Topology, attack: &Attack, timeout: Duration) -> Observed {
    let sb = &topo.sandboxes[attack.from];
    match &attack.shot {
        Shot::Probe(p) => probe_from(&sb.ns, p, timeout).observed,
        Shot::Forged { src, to } => observed((|| {
            let cap = Capture::open(&topo.internet, "eth0")?;
            let marker = Marker::fresh();
            let me = mac_of(&sb.ns, "eth0")?;
            let f = udp_frame(me, gateway_mac(topo, sb)?, *src, *to, &marker)?;
            lands(sb, &[f], &cap, &marker, timeout)
        })()),
        Shot::Reply { peer, via, tcp } => observed((|| {
            let cap = Capture::open(&topo.internet, "eth0")?;
            let marker = Marker::fresh();
            let (me, gw) = (mac_of(&sb.ns, "eth0")?, gateway_mac(topo, sb)?);
            let (open, reply) = if *tcp {
                (
                    tcp_frame(me, gw, *peer, *via, TcpFlags::SYN, &[])?,
                    tcp_frame(me, gw, *via, *peer, TcpFlags::SYN_ACK, marker.bytes())?,
                )
            } else {
                (
                    udp_frame(me, gw, *peer, *via, &Marker::fresh())?,
                    udp_frame(me, gw, *via, *peer, &marker)?,
                )
            };
            lands(sb, &[open, reply], &cap, &marker, timeout)
        })()),
        Shot::Reflect { forged, service } => observed((|| {
            let reflector = Listeners::start(&topo.host)?;
            reflector.add_reflector(*service)?;
            let cap = Capture::open(&topo.internet, "eth0")?;
            let marker = Marker::fresh();
            let me = mac_of(&sb.ns, "eth0")?;
            let f = udp_frame(me, gateway_mac(topo, sb)?, *forged, *service, &marker)?;
            lands(sb, &[f], &cap, &marker, timeout)
        })()),
        Shot::OffBridge { to, host } => observed(off_bridge(topo, sb, *to, *host, timeout)),
        Shot::Related(r) => super::related::launch(topo, sb, r, timeout),
        Shot::Conntrack(c) => {
            observed(super::conntrack_fill::launch(topo, sb, c).map(|(_, landed)| landed))
        }
    }
}

/// Detach, send, re-attach (whatever happened in between).
fn off_bridge(
    topo: &Topology,
    sb: &SandboxNs,
    to: SocketAddr,
    host: bool,
    timeout: Duration,
) -> std::io::Result<bool> {
    let isolated = set_port(topo, sb, None)?;
    let result = detached_shot(topo, sb, to, host, timeout);
    set_port(topo, sb, Some(isolated.unwrap_or(false)))?;
    result
}

/// Runs `attacks` — port-off-its-bridge attacks, all from one sandbox —
/// in one detachment: the port leaves its bridge once, every shot is sent
/// and watched at the same time, and the port goes back (whatever
/// happened in between). What each attack achieved, in order.
pub fn launch_detached(topo: &Topology, attacks: &[&Attack], timeout: Duration) -> Vec<Observed> {
    let Some(first) = attacks.first() else {
        return Vec::new();
    };
    let sb = &topo.sandboxes[first.from];
    let detached = match set_port(topo, sb, None) {
        Ok(isolated) => isolated,
        Err(e) => {
            return attacks
                .iter()
                .map(|_| Observed::Error(e.to_string()))
                .collect();
        }
    };
    let shots: Vec<Observed> = std::thread::scope(|scope| {
        let handles: Vec<_> = attacks
            .iter()
            .map(|a| {
                scope.spawn(move || match &a.shot {
                    Shot::OffBridge { to, host } if a.from == first.from => {
                        observed(detached_shot(topo, sb, *to, *host, timeout))
                    }
                    _ => Observed::Error(
                        "not a port-off-its-bridge attack from this sandbox".to_owned(),
                    ),
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Observed::Error("the attack thread panicked".to_owned()))
            })
            .collect()
    });
    match set_port(topo, sb, Some(detached.unwrap_or(false))) {
        Ok(_) => shots,
        Err(e) => shots
            .into_iter()
            .map(|_| Observed::Error(format!("re-attaching the port: {e}")))
            .collect(),
    }
}

/// One datagram from `sb` with its port off the bridge: landed when its
/// marker reaches `to` (the host's socket, or the internet's interface).
fn detached_shot(
    topo: &Topology,
    sb: &SandboxNs,
    to: SocketAddr,
    host: bool,
    timeout: Duration,
) -> std::io::Result<bool> {
    let src_ip = same_family(
        to.ip(),
        IpAddr::V4(sb.v4),
        sb.v6.map_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED), IpAddr::V6),
    );
    let marker = Marker::fresh();
    let me = mac_of(&sb.ns, "eth0")?;
    let port_mac = mac_of(&topo.host, &sb.port)?;
    let f = udp_frame(me, port_mac, SocketAddr::new(src_ip, SPORT), to, &marker)?;
    let tx = crate::raw::PacketSocket::open(&sb.ns, "eth0")?;
    if host {
        let sink = UdpSink::bind(&topo.host, to)?;
        for _ in 0..3 {
            tx.send(&f)?;
            if sink.saw(&marker, timeout / 3)? {
                return Ok(true);
            }
        }
        Ok(false)
    } else {
        let cap = Capture::open(&topo.internet, "eth0")?;
        lands(sb, &[f], &cap, &marker, timeout)
    }
}

/// Detaches the sandbox's port (`None`, returning its isolation flag) or
/// attaches it again with the given isolation.
fn set_port(
    topo: &Topology,
    sb: &SandboxNs,
    attach: Option<bool>,
) -> std::io::Result<Option<bool>> {
    let io = |e: corral_egress::link::LinkError| std::io::Error::other(e.to_string());
    topo.host.run_async(|| async {
        let links = Links::connect().map_err(io)?;
        match attach {
            Some(isolated) => {
                links
                    .attach_port(&sb.port, &sb.bridge, isolated)
                    .await
                    .map_err(io)?;
                Ok(None)
            }
            None => {
                let link = links.require(&sb.port).await.map_err(io)?;
                let msg = rtnetlink::LinkUnspec::new_with_index(link.index)
                    .nocontroller()
                    .build();
                links
                    .handle()
                    .link()
                    .set(msg)
                    .execute()
                    .await
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                Ok(link.isolated)
            }
        }
    })?
}
