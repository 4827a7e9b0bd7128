//! Destinations no sandbox reaches through a name: the reserved ranges (in
//! every mode, before any name-derived accept) and the check that keeps
//! apply-time name resolution out of them.
//!
//! The list itself is `corral_sandbox_core::reserved` (the IANA
//! special-purpose registries, one list for egress, the gateway, the canary
//! and Tart): private and shared space, loopback, link-local (and so the
//! cloud metadata address), benchmarking (198.18.0.0/15, 2001:2::/48),
//! multicast and class E, and for IPv6 also the transition prefixes that
//! tunnel to IPv4 or elsewhere (IPv4-compatible and -mapped, NAT64
//! well-known and local-use, 6to4, Teredo, discard-only), the IETF protocol
//! block 2001::/23 (ORCHIDv2 and the rest), SRv6 SIDs and the new
//! documentation prefix 3fff::/20. The older documentation ranges
//! (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32) are
//! deliberately absent: they route nowhere on the internet, and the drill
//! uses them as its "public" addresses.
//!
//! An operator's explicit CIDR entries stay as written (they are accepted
//! before the reserved check); only addresses that come from names — at
//! apply by the host's resolver, at run time by the gateway resolver — are
//! held to this list.

use std::net::IpAddr;

use ipnet::IpNet;

pub use corral_sandbox_core::reserved::{RESERVED_V4, RESERVED_V6, containing, reserved_nets};

/// Why a destination learned from a name must not be reachable: the range
/// of the reserved list, the host's networks or a deny list holding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A reserved range.
    Reserved(IpNet),
    /// One of the host's directly connected networks or its routers.
    HostNetwork(IpNet),
    /// A `deny` entry (host-wide or the profile's).
    Denied(IpNet),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Reserved(n) => write!(f, "it is in the reserved range {n}"),
            Refusal::HostNetwork(n) => write!(f, "it is in the host's own network {n}"),
            Refusal::Denied(n) => write!(f, "it is in the deny list entry {n}"),
        }
    }
}

/// Why `addr` must not be reached through a name, or `None` when it may.
pub fn refusal(addr: IpAddr, host_networks: &[IpNet], deny: &[IpNet]) -> Option<Refusal> {
    if let Some(n) = containing(addr, &reserved_nets()) {
        return Some(Refusal::Reserved(n));
    }
    if let Some(n) = containing(addr, host_networks) {
        return Some(Refusal::HostNetwork(n));
    }
    containing(addr, deny).map(Refusal::Denied)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_issue_list_is_reserved() {
        for a in [
            "100.64.0.10",
            "198.18.1.1",
            "224.0.0.1",
            "240.0.0.1",
            "255.255.255.255",
            "169.254.169.254",
            "127.0.0.1",
            "10.1.2.3",
            "fc00::1",
            "fd00::1",
            "64:ff9b::1.2.3.4",
            "64:ff9b:1::1",
            "2002:c000:204::1",
            "2001::1",
            "::1.2.3.4",
            "::1",
            "::",
            "::ffff:10.0.0.1",
            "2001:2::1",
            "2001:20::1",
            "3fff::1",
            "100::1",
            "fe80::1",
            "ff02::1",
        ] {
            assert!(
                matches!(refusal(ip(a), &[], &[]), Some(Refusal::Reserved(_))),
                "{a}"
            );
        }
    }

    #[test]
    fn public_and_documentation_addresses_are_not() {
        for a in [
            "8.8.8.8",
            "203.0.113.10",
            "198.51.100.7",
            "192.0.2.1",
            "2001:db8::1",
            "2606:4700::1111",
        ] {
            assert_eq!(refusal(ip(a), &[], &[]), None, "{a}");
        }
    }

    #[test]
    fn host_networks_and_deny_lists_refuse_too() {
        let hostnets = ["192.0.2.0/24".parse().unwrap()];
        let deny = ["203.0.113.0/25".parse().unwrap()];
        assert!(matches!(
            refusal(ip("192.0.2.9"), &hostnets, &deny),
            Some(Refusal::HostNetwork(_))
        ));
        assert!(matches!(
            refusal(ip("203.0.113.9"), &hostnets, &deny),
            Some(Refusal::Denied(_))
        ));
        assert_eq!(refusal(ip("203.0.113.200"), &hostnets, &deny), None);
    }
}
