//! What keeps one sandbox from using up its gateway's DNS over TCP: a cap
//! on the TCP/53 connections each source may have open to the gateway
//! (`ct count` in a per-profile meter, inet family, where conntrack is),
//! and on how fast it may open new ones: the same rate and burst a port
//! gets for UDP queries ([`super::bridge::DNS_RATE`], [`super::bridge::DNS_BURST`]),
//! so a sandbox cannot move its flood to TCP (where one answer can carry
//! thousands of records, each a learned-set add and a log line).
//!
//! dnsmasq serves each TCP connection in a child process and stops
//! accepting at its connection limit, so a sandbox holding idle
//! connections would otherwise starve its siblings' TCP lookups. The
//! per-port rate limits on DHCP and UDP DNS live in the bridge table
//! ([`super::bridge`]): a port is the one source identity a sandbox cannot
//! forge, and DHCP clients all send from 0.0.0.0.

use std::net::IpAddr;

use corral_sandbox_core::{EgressMode, PortRange, Profile};

use super::bridge::{DNS_BURST, DNS_RATE};
use super::keyed::{Field, KeyPart, KeyedKind, KeyedSetPlan, Limit};
use super::model::{AddrFamily, L4Proto, Match, RejectKind, RulePlan, Verdict};

/// TCP/53 connections one source may have open to its gateway.
pub const TCP_DNS_PER_SOURCE: u32 = 4;

/// The meter of a profile's TCP/53 connections per source.
pub fn tcp_dns_set(profile: &Profile, family: AddrFamily) -> String {
    format!("{}-dnstcp{}", profile.name, digit(family))
}

/// The meter of a profile's new TCP/53 connections a second per source.
pub fn tcp_dns_rate_set(profile: &Profile, family: AddrFamily) -> String {
    format!("{}-dnstcprate{}", profile.name, digit(family))
}

fn digit(family: AddrFamily) -> char {
    match family {
        AddrFamily::V4 => '4',
        AddrFamily::V6 => '6',
    }
}

fn has_resolver(p: &Profile) -> bool {
    p.dns.resolves() && p.mode != EgressMode::None
}

fn gateways(p: &Profile) -> Vec<IpAddr> {
    let mut v = vec![IpAddr::V4(p.gateway_v4())];
    v.extend(p.gateway_v6().map(IpAddr::V6));
    v
}

/// The meters a profile needs (none without a gateway resolver).
pub(super) fn sets(p: &Profile) -> Vec<KeyedSetPlan> {
    if !has_resolver(p) {
        return Vec::new();
    }
    gateways(p)
        .into_iter()
        .flat_map(|gw| {
            let fam = AddrFamily::of(gw);
            let part = match fam {
                AddrFamily::V4 => KeyPart::Ipv4,
                AddrFamily::V6 => KeyPart::Ipv6,
            };
            [
                KeyedSetPlan::new(
                    &tcp_dns_set(p, fam),
                    vec![part],
                    KeyedKind::Meter {
                        timeout: None,
                        size: super::keyed::PROFILE_SOURCE_KEYS,
                    },
                ),
                KeyedSetPlan::new(
                    &tcp_dns_rate_set(p, fam),
                    vec![part],
                    KeyedKind::Meter {
                        timeout: Some(super::bridge::METER_TIMEOUT),
                        size: super::keyed::PROFILE_SOURCE_KEYS,
                    },
                ),
            ]
        })
        .collect()
}

/// Rules for the profile's host chain, before its DNS accepts: a new
/// TCP/53 connection to the gateway from a source that already has
/// [`TCP_DNS_PER_SOURCE`], or that opens them faster than the UDP query
/// rate, is refused with a reset.
pub(super) fn rules(p: &Profile) -> Vec<RulePlan> {
    if !has_resolver(p) {
        return Vec::new();
    }
    let dns = PortRange::single(53).unwrap_or_else(|_| unreachable!("53 is a valid port"));
    gateways(p)
        .into_iter()
        .flat_map(|gw| {
            let fam = AddrFamily::of(gw);
            let refuse = |set: String, limit: Limit| {
                RulePlan::counted(
                    vec![
                        Match::Daddr(gw),
                        Match::L4Proto(L4Proto::Tcp),
                        Match::Dport(dns),
                        Match::CtNew,
                        Match::Meter {
                            set,
                            fields: vec![Field::IpSaddr(fam)],
                            limit,
                        },
                    ],
                    Verdict::Reject(RejectKind::TcpReset),
                )
            };
            [
                refuse(
                    tcp_dns_rate_set(p, fam),
                    Limit::RateOver {
                        per_second: DNS_RATE,
                        burst: DNS_BURST,
                    },
                ),
                refuse(tcp_dns_set(p, fam), Limit::CountOver(TCP_DNS_PER_SOURCE)),
            ]
        })
        .collect()
}
