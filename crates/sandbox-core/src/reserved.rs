//! The one list of address ranges no name may lead a sandbox to: egress's
//! plan drops them before any name-derived accept, the gateway resolver
//! turns answers holding them into NXDOMAIN (so they are never learned),
//! the canary refuses to take one for its public target, and Tart's
//! Softnet never opens one.
//!
//! It is the IANA IPv4 and IPv6 special-purpose registries (a copy lives in
//! `data/iana-special-purpose.csv`; a test holds this list to it): every
//! entry the registry does not call globally reachable is covered, and so
//! are a few that it does but that no sandbox should reach through a name
//! — the whole IETF protocol block 2001::/23 (it holds ORCHIDv2, anycast
//! services and AMT next to benchmarking space), NAT64's well-known prefix
//! (it tunnels to any IPv4 address, the host's neighbours included),
//! multicast, the deprecated IPv4-compatible and site-local blocks.
//!
//! The four documentation ranges of the 1990s and 2000s (192.0.2.0/24,
//! 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32) are held apart in
//! [`DOCUMENTATION_V4`] and [`DOCUMENTATION_V6`]: they route nowhere on the
//! internet, and corral's labs and drills use them as their "public"
//! addresses, so egress does not refuse them; [`is_global`] (what Tart
//! uses, where no lab stands in for the internet) does. The newer
//! documentation prefix 3fff::/20 (RFC 9637) is reserved like the rest.

use core::net::IpAddr;

use ipnet::IpNet;

/// IPv4 ranges no name may lead to (and `internet` never reaches).
pub const RESERVED_V4: [&str; 12] = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.88.99.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/4",
    "240.0.0.0/4",
];

/// IPv6 ranges no name may lead to (and `internet` never reaches).
pub const RESERVED_V6: [&str; 14] = [
    "::/96",
    "::ffff:0:0/96",
    "64:ff9b::/96",
    "64:ff9b:1::/48",
    "100::/64",
    "100:0:0:1::/64",
    "2001::/23",
    "2002::/16",
    "3fff::/20",
    "5f00::/16",
    "fc00::/7",
    "fe80::/10",
    "fec0::/10",
    "ff00::/8",
];

/// IPv4 documentation ranges: not global, but the labs' stand-in for the
/// internet (see the module text).
pub const DOCUMENTATION_V4: [&str; 3] = ["192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"];

/// The IPv6 documentation range the labs use (3fff::/20 is reserved).
pub const DOCUMENTATION_V6: [&str; 1] = ["2001:db8::/32"];

fn nets<'a>(lists: impl IntoIterator<Item = &'a str>) -> Vec<IpNet> {
    // Invariant: every literal above parses (tested).
    lists
        .into_iter()
        .filter_map(|n| n.parse::<IpNet>().ok())
        .collect()
}

/// Every reserved range, both families.
pub fn reserved_nets() -> Vec<IpNet> {
    nets(RESERVED_V4.iter().chain(RESERVED_V6.iter()).copied())
}

/// The documentation ranges held apart from [`reserved_nets`].
pub fn documentation_nets() -> Vec<IpNet> {
    nets(
        DOCUMENTATION_V4
            .iter()
            .chain(DOCUMENTATION_V6.iter())
            .copied(),
    )
}

/// The first of `nets` that contains `addr`.
pub fn containing(addr: IpAddr, nets: &[IpNet]) -> Option<IpNet> {
    nets.iter().copied().find(|n| n.contains(&addr))
}

/// The reserved range holding `addr`, if any.
pub fn reserved_range(addr: IpAddr) -> Option<IpNet> {
    containing(addr, &reserved_nets())
}

/// True for an address routable on the public internet: in no reserved
/// range and no documentation range.
pub fn is_global(addr: IpAddr) -> bool {
    reserved_range(addr).is_none() && containing(addr, &documentation_nets()).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The registry copy kept in the repo.
    const REGISTRY: &str = include_str!("../data/iana-special-purpose.csv");

    struct Entry {
        net: IpNet,
        name: String,
        reachable: String,
    }

    fn registry() -> Vec<Entry> {
        REGISTRY
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with("prefix,") && !l.is_empty())
            .map(|l| {
                let fields: Vec<&str> = l.split(',').collect();
                assert!(fields.len() >= 4, "short registry line {l:?}");
                Entry {
                    net: fields[0].parse().unwrap_or_else(|e| panic!("{l:?}: {e}")),
                    name: fields[1].trim_matches('"').to_owned(),
                    reachable: fields[fields.len() - 1].to_owned(),
                }
            })
            .collect()
    }

    fn covered_by(inner: IpNet, outer: &[IpNet]) -> bool {
        outer.iter().any(|o| o.contains(&inner))
    }

    #[test]
    fn every_literal_parses() {
        assert_eq!(reserved_nets().len(), RESERVED_V4.len() + RESERVED_V6.len());
        assert_eq!(
            documentation_nets().len(),
            DOCUMENTATION_V4.len() + DOCUMENTATION_V6.len()
        );
    }

    #[test]
    fn every_entry_the_registry_calls_not_global_is_covered() {
        let entries = registry();
        assert!(entries.len() > 40, "registry copy looks truncated");
        let reserved = reserved_nets();
        let docs = documentation_nets();
        let mut exempt = Vec::new();
        for e in &entries {
            assert!(
                ["true", "false", "n/a"].contains(&e.reachable.as_str()),
                "{}: globally_reachable {:?}",
                e.net,
                e.reachable
            );
            if e.reachable == "true" {
                continue;
            }
            if covered_by(e.net, &reserved) {
                continue;
            }
            assert!(
                covered_by(e.net, &docs) && e.name.starts_with("Documentation"),
                "registry entry {} ({}) is not global but not reserved",
                e.net,
                e.name
            );
            exempt.push(e.net);
        }
        // Exactly the held-apart documentation ranges are exempt, no more.
        exempt.sort();
        let mut want = docs.clone();
        want.sort();
        assert_eq!(exempt, want);
    }

    #[test]
    fn the_issue_ranges_are_reserved() {
        for a in [
            "2001:2::1",
            "2001:2:0:ffff::1",
            "2001:20::1",
            "3fff::1",
            "3fff:fff::1",
        ] {
            let ip: IpAddr = a.parse().unwrap();
            assert!(reserved_range(ip).is_some(), "{a}");
            assert!(!is_global(ip), "{a}");
        }
        for a in ["2001:db8::1", "192.0.2.1", "203.0.113.9"] {
            let ip: IpAddr = a.parse().unwrap();
            assert_eq!(reserved_range(ip), None, "{a} is held apart");
            assert!(!is_global(ip), "{a} is still not global");
        }
        for a in [
            "8.8.8.8",
            "2606:4700::1111",
            "2001:4860::8888",
            "192.175.48.1",
        ] {
            assert!(is_global(a.parse().unwrap()), "{a}");
        }
    }
}
