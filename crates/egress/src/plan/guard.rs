//! Rules that hold whatever a sandbox forges: what may arrive from a
//! sandbox bridge at all (source, arrival, conntrack state), which
//! conntrack direction counts as established, and what a sandbox may send
//! to the host itself.
//!
//! - `prerouting` (base, priority -150: after conntrack, before any NAT):
//!   a packet with a source in a profile's subnets that did not arrive on
//!   that profile's bridge (or from the host itself, `lo`) is dropped, so
//!   enforcement never depends on a sandbox port still being enslaved to
//!   its bridge; everything arriving on a profile bridge jumps to
//!   `shared_guard` (by `@shared_guard_by_iif`: planned bridges only).
//! - `shared_guard`, one chain for every profile (the profile's own part,
//!   `<p>-guard`, reached by interface in the middle): neighbour discovery
//!   from link-local and the DHCP broadcast from `0.0.0.0` pass; then
//!   `ct state invalid` is dropped, and TCP that is new but no SYN (no
//!   loose pickup, [`super::flow_limits`]); in `<p>-guard` the source must
//!   be in the profile's own subnet (IPv4; IPv6 only when the
//!   profile has an IPv6 subnet, else every IPv6 packet is dropped); a
//!   source the host's routing table does not call unicast (local,
//!   broadcast, multicast, ...) is dropped (a sandbox forging the
//!   gateway's address); loopback
//!   destinations are dropped (whatever `route_localnet` says).
//! - `<p>-out` accepts established/related only in the original direction
//!   of a flow the profile started (a sandbox's packets "answering" a flow
//!   it did not start are new traffic, judged by the profile; related
//!   packets of someone else's flow are dropped); `<p>-in` only in the
//!   reply direction of the profile's own flows (see [`super::owner`]).
//! - `<p>-host`: established/related of the profile's own flows, DHCP (IPv4, to the broadcast address
//!   or the gateway), DNS to the gateway when the profile has a resolver,
//!   neighbour discovery for IPv6 profiles; everything else dropped.
//! - `multipass_host`: from Multipass's control bridge only established
//!   traffic and DHCP reach the host (Multipass's own dnsmasq serves DHCP
//!   there; its DNS forwarder would be a way out of an allowlist).
//!
//! Drops here never reject: a reply to a forged source would reflect.

use std::net::{IpAddr, Ipv4Addr};

use corral_sandbox_core::{EgressMode, PortRange, Profile};
use ipnet::IpNet;

use super::model::{AddrFamily, AddrType, L4Proto, Match, RulePlan, Verdict};

/// ICMPv6 neighbour discovery types a v6 sandbox needs to reach its
/// gateway: router solicitation, neighbour solicitation and advertisement.
pub const ND_TYPES: [u8; 3] = [133, 135, 136];

/// The loopback interface: traffic the host sends to itself (e.g. to a
/// gateway address) arrives there with a source in a profile subnet.
const LOOPBACK: &str = "lo";

fn port(n: u16) -> PortRange {
    PortRange::single(n).unwrap_or_else(|_| unreachable!("{n} is a valid port"))
}

fn link_local() -> IpNet {
    let fe80 = std::net::Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0);
    IpNet::V6(ipnet::Ipv6Net::new(fe80, 10).unwrap_or_else(|_| unreachable!("/10 is valid")))
}

fn loopback_v4() -> IpNet {
    IpNet::V4(
        ipnet::Ipv4Net::new(Ipv4Addr::new(127, 0, 0, 0), 8)
            .unwrap_or_else(|_| unreachable!("/8 is valid")),
    )
}

/// A profile's subnets.
pub fn subnets(p: &Profile) -> Vec<IpNet> {
    let mut v = vec![IpNet::V4(p.subnet_v4.trunc())];
    v.extend(p.subnet_v6.map(|n| IpNet::V6(n.trunc())));
    v
}

/// `prerouting`: a profile subnet arriving anywhere but its bridge (or
/// `lo`) is dropped. One rule per subnet.
pub fn arrival_rules(p: &Profile) -> Vec<RulePlan> {
    let br = p.bridge.to_string();
    let rules = subnets(p)
        .into_iter()
        .map(|net| {
            RulePlan::counted(
                vec![
                    Match::SaddrIn(net),
                    Match::IifNameNot(br.clone()),
                    Match::IifNameNot(LOOPBACK.to_owned()),
                ],
                Verdict::Drop,
            )
        })
        .collect();
    tap(p, "guard", "wrong-bridge", rules)
}

fn tap(p: &Profile, kind: &str, word: &str, rules: Vec<RulePlan>) -> Vec<RulePlan> {
    super::droplog::tap(&p.name, kind, word, rules)
}

fn guard_tap(p: &Profile, word: &str, rule: RulePlan) -> Vec<RulePlan> {
    tap(p, "guard", word, vec![rule])
}

/// `shared_guard`, which every profile bridge's packets meet (see the
/// module docs for the order and why): the checks that are the same for
/// every profile, with the profile's own subnet checks (`<p>-guard`,
/// [`guard_rules`]) reached by interface in the middle, where they stood
/// when each profile held all of them.
pub fn shared_guard_rules() -> Vec<RulePlan> {
    let shared = |word: &str, rule: RulePlan| {
        super::droplog::tap_shared(super::names::SHARED_GUARD, word, vec![rule])
    };
    let mut rules = Vec::new();
    for t in ND_TYPES {
        rules.push(RulePlan::counted(
            vec![
                Match::SaddrIn(link_local()),
                Match::L4Proto(L4Proto::Icmpv6),
                Match::Icmpv6Type(t),
            ],
            Verdict::Return,
        ));
    }
    rules.push(RulePlan::counted(
        vec![
            Match::SaddrIn(IpNet::V4(ipnet::Ipv4Net::from(Ipv4Addr::UNSPECIFIED))),
            Match::Daddr(IpAddr::V4(Ipv4Addr::BROADCAST)),
            Match::L4Proto(L4Proto::Udp),
            Match::Dport(port(67)),
        ],
        Verdict::Return,
    ));
    rules.extend(shared(
        "invalid",
        RulePlan::counted(vec![Match::CtInvalid], Verdict::Drop),
    ));
    rules.extend(shared("loose-pickup", super::flow_limits::guard_rule()));
    rules.push(RulePlan::counted(
        vec![],
        Verdict::Vmap {
            field: super::vmap::MapField::IifName,
            map: super::vmap::GUARD_BY_IIF.to_owned(),
        },
    ));
    // One lookup for local, broadcast, multicast (and anycast, blackhole,
    // unreachable) sources: a sandbox's own address is a unicast one.
    rules.extend(shared(
        "source-type",
        RulePlan::counted(
            vec![Match::FibSaddrTypeNot(AddrType::Unicast)],
            Verdict::Drop,
        ),
    ));
    rules.extend(shared(
        "loopback",
        RulePlan::counted(vec![Match::DaddrIn(loopback_v4())], Verdict::Drop),
    ));
    // Reached by IPv6 only from profiles with IPv6: `<p>-guard` dropped
    // every other profile's IPv6.
    rules.extend(shared(
        "loopback",
        RulePlan::counted(
            vec![Match::Daddr(IpAddr::V6(std::net::Ipv6Addr::LOCALHOST))],
            Verdict::Drop,
        ),
    ));
    rules
}

/// `<p>-guard`, between the shared guard's state checks and its type
/// checks: the source must be in the profile's own subnet (IPv6 only when
/// the profile has an IPv6 subnet, else every IPv6 packet is dropped).
pub fn guard_rules(p: &Profile) -> Vec<RulePlan> {
    let mut rules = Vec::new();
    rules.extend(guard_tap(
        p,
        "forged-source",
        RulePlan::counted(
            vec![Match::SaddrNotIn(IpNet::V4(p.subnet_v4.trunc()))],
            Verdict::Drop,
        ),
    ));
    match p.subnet_v6 {
        Some(v6) => rules.extend(guard_tap(
            p,
            "forged-source",
            RulePlan::counted(
                vec![Match::SaddrNotIn(IpNet::V6(v6.trunc()))],
                Verdict::Drop,
            ),
        )),
        None => rules.extend(guard_tap(
            p,
            "no-ipv6",
            RulePlan::counted(vec![Match::NfProto(AddrFamily::V6)], Verdict::Drop),
        )),
    }
    rules
}

/// A profile's sinks for the shared chains' blocks (see
/// [`super::droplog`]): `(name, rules)` of its blocked and its suppressed
/// chain, each one counted drop.
pub fn sink_chains(p: &Profile) -> [(String, Vec<RulePlan>); 2] {
    let drop = || vec![RulePlan::counted(vec![], Verdict::Drop)];
    [
        (super::names::blocked_chain(&p.name), drop()),
        (super::names::suppressed_chain(&p.name), drop()),
    ]
}

/// `<p>-in` (world → sandbox): answers to the profile's own flows only
/// (see [`super::owner`]).
pub fn in_rules(p: &Profile) -> Vec<RulePlan> {
    let mut rules = super::owner::in_rules(p);
    rules.extend(tap(
        p,
        "in",
        "unsolicited",
        vec![RulePlan::counted(vec![], Verdict::Drop)],
    ));
    rules
}

fn dns_port() -> PortRange {
    port(53)
}

/// `<p>-host` (sandbox → host): DHCP, DNS to the gateway, neighbour
/// discovery; everything else blocked by the profile's block action.
pub fn host_rules(p: &Profile) -> Vec<RulePlan> {
    let mut rules = super::owner::host_rules(p);
    for to in [IpAddr::V4(Ipv4Addr::BROADCAST), IpAddr::V4(p.gateway_v4())] {
        rules.push(RulePlan::counted(
            vec![
                Match::Daddr(to),
                Match::L4Proto(L4Proto::Udp),
                Match::Dport(port(67)),
            ],
            Verdict::Accept,
        ));
    }
    // Before the DNS accepts: the per-source cap on TCP/53 connections.
    rules.extend(tap(
        p,
        "host",
        "dns-tcp-cap",
        super::gateway_guard::rules(p),
    ));
    if p.dns.resolves() && p.mode != EgressMode::None {
        let mut gateways = vec![IpAddr::V4(p.gateway_v4())];
        gateways.extend(p.gateway_v6().map(IpAddr::V6));
        for gw in gateways {
            for proto in [L4Proto::Udp, L4Proto::Tcp] {
                rules.push(RulePlan::counted(
                    vec![
                        Match::Daddr(gw),
                        Match::L4Proto(proto),
                        Match::Dport(dns_port()),
                    ],
                    Verdict::Accept,
                ));
            }
        }
    }
    if p.subnet_v6.is_some() {
        for t in ND_TYPES {
            rules.push(RulePlan::counted(
                vec![Match::L4Proto(L4Proto::Icmpv6), Match::Icmpv6Type(t)],
                Verdict::Accept,
            ));
        }
    }
    // The profile's block action, as for egress: with `reject` a probe of
    // the gateway's other ports fails fast (the per-sandbox canary's among
    // them); the sandbox learns nothing it did not know (the gateway is its
    // own gateway).
    rules.extend(tap(
        p,
        "host",
        "unlisted",
        super::build::block(vec![], p.block),
    ));
    rules
}

/// `multipass_host` (Multipass control bridge → host).
pub fn multipass_host_rules() -> Vec<RulePlan> {
    vec![
        RulePlan::counted(vec![Match::CtEstablishedRelated], Verdict::Accept),
        RulePlan::counted(
            vec![
                Match::NfProto(AddrFamily::V4),
                Match::L4Proto(L4Proto::Udp),
                Match::Dport(port(67)),
            ],
            Verdict::Accept,
        ),
        RulePlan::counted(vec![], Verdict::Drop),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::test_support::dev_profile;

    /// The shared guard with the profile's `<p>-guard` in place of the
    /// lookup that reaches it: the order one profile's packets meet.
    fn walked(p: &Profile) -> Vec<RulePlan> {
        shared_guard_rules()
            .into_iter()
            .flat_map(|r| match &r.verdict {
                Verdict::Vmap { map, .. } if map == crate::plan::vmap::GUARD_BY_IIF => {
                    guard_rules(p)
                }
                _ => vec![r],
            })
            .collect()
    }

    #[test]
    fn the_guard_checks_state_before_sources_and_sources_before_types() {
        let rules = walked(&dev_profile());
        let pos = |pred: &dyn Fn(&Match) -> bool| {
            rules
                .iter()
                .position(|r| r.matches.iter().any(pred))
                .unwrap()
        };
        let nd = pos(&|m| matches!(m, Match::Icmpv6Type(_)));
        let invalid = pos(&|m| *m == Match::CtInvalid);
        let source = pos(&|m| matches!(m, Match::SaddrNotIn(_)));
        let fib = pos(&|m| matches!(m, Match::FibSaddrTypeNot(_)));
        assert!(nd < invalid && invalid < source && source < fib);
        // Nothing in the guard accepts: it returns or drops (its shared
        // blocks through the profile's sinks, which drop), never rejects.
        assert!(rules.iter().all(|r| match &r.verdict {
            Verdict::Return | Verdict::Drop => true,
            Verdict::Vmap { map, .. } => {
                map == crate::plan::vmap::BLOCKED_BY_IIF
                    || map == crate::plan::vmap::SUPPRESSED_BY_IIF
            }
            _ => false,
        }));
        assert!(sink_chains(&dev_profile()).iter().all(|(_, rules)| {
            rules.len() == 1 && rules[0].verdict == Verdict::Drop && rules[0].matches.is_empty()
        }));
    }

    #[test]
    fn a_profile_without_ipv6_drops_all_ipv6_but_link_local_nd() {
        let mut p = dev_profile();
        p.subnet_v6 = None;
        let rules = guard_rules(&p);
        assert!(rules.iter().any(
            |r| r.matches == vec![Match::NfProto(AddrFamily::V6)] && r.verdict == Verdict::Drop
        ));
    }
}
