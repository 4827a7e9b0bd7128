//! Verdict maps: how a base chain hands a packet to its profile's chain in
//! one lookup, whatever the number of profiles.
//!
//! A base chain used to hold one `iifname "br" jump <p>-out` rule per
//! profile, so every packet (established ones included) walked a list as
//! long as the host's profiles. Now it holds one rule per direction,
//! `iifname vmap @out_by_iif`, and the map holds one element per profile
//! (`"br" : jump <p>-out`): a hash lookup for interface keys, an interval
//! lookup for address keys (`ip saddr vmap @nat4_by_saddr`). A packet whose
//! key is in no element goes on to the base chain's next rule, exactly as
//! it fell through the jumps before.
//!
//! Map names hold an underscore, which no profile name has (profile names
//! are DNS labels), so they never collide with a profile's sets.

use std::net::IpAddr;

use serde::Serialize;

use super::model::{AddrFamily, AddrRange, to_u128};

/// Interface → profile guard chain (from the shared guard).
pub const GUARD_BY_IIF: &str = "guard_by_iif";
/// Profile bridge → the shared guard (prerouting): only what arrives on a
/// planned bridge meets it.
pub const SHARED_GUARD_BY_IIF: &str = "shared_guard_by_iif";
/// Input interface (a profile's bridge) → the profile's blocked sink.
pub const BLOCKED_BY_IIF: &str = "blocked_by_iif";
/// Input interface (a profile's bridge) → the profile's suppressed sink.
pub const SUPPRESSED_BY_IIF: &str = "suppressed_by_iif";
/// Output interface → profile in chain (forward, replies only).
pub const IN_BY_OIF: &str = "in_by_oif";
/// Input interface → profile out chain (forward).
pub const OUT_BY_IIF: &str = "out_by_iif";
/// Input interface → profile host chain (input).
pub const HOST_BY_IIF: &str = "host_by_iif";

/// Source subnet → the profile's arrival chain (prerouting: a profile's
/// source arriving anywhere but its bridge).
pub fn arrival_by_saddr(family: AddrFamily) -> &'static str {
    match family {
        AddrFamily::V4 => "arrival4_by_saddr",
        AddrFamily::V6 => "arrival6_by_saddr",
    }
}

/// A profile's subnet → its `<p>-ports` chain (bridge table, `forward`):
/// looked up by each address a frame carries (IP source and destination,
/// ARP sender and target), so a frame of a port corral does not know yet
/// meets the one profile whose subnet it names, whatever their number.
pub fn ports_by_addr(family: AddrFamily) -> &'static str {
    match family {
        AddrFamily::V4 => "ports4_by_addr",
        AddrFamily::V6 => "ports6_by_addr",
    }
}

/// Source subnet → the profile's NAT chain (postrouting).
pub fn nat_by_saddr(family: AddrFamily) -> &'static str {
    match family {
        AddrFamily::V4 => "nat4_by_saddr",
        AddrFamily::V6 => "nat6_by_saddr",
    }
}

/// What a verdict map is keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MapKey {
    /// An interface name (exact match).
    IfName,
    /// An address of the family, elements are ranges (`flags interval`).
    Addr(AddrFamily),
}

impl MapKey {
    /// Key length in bytes.
    pub fn len(self) -> u32 {
        match self {
            MapKey::IfName => 16,
            MapKey::Addr(f) => f.key_len() as u32,
        }
    }

    /// Always false (clippy's `len_without_is_empty`).
    pub fn is_empty(self) -> bool {
        false
    }
}

/// The packet field a dispatch rule looks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MapField {
    /// `iifname`.
    IifName,
    /// `oifname`.
    OifName,
    /// `ip saddr` / `ip6 saddr`.
    Saddr(AddrFamily),
    /// `ip daddr` / `ip6 daddr`.
    Daddr(AddrFamily),
    /// `arp saddr ip` (an Ethernet/IPv4 ARP packet's sender address).
    ArpSaddr,
    /// `arp daddr ip` (its target address).
    ArpDaddr,
}

impl MapField {
    /// The key a map looked up by this field has.
    pub fn key(self) -> MapKey {
        match self {
            MapField::IifName | MapField::OifName => MapKey::IfName,
            MapField::Saddr(f) | MapField::Daddr(f) => MapKey::Addr(f),
            MapField::ArpSaddr | MapField::ArpDaddr => MapKey::Addr(AddrFamily::V4),
        }
    }

    /// The field in `nft` syntax.
    pub fn keyword(self) -> &'static str {
        match self {
            MapField::IifName => "iifname",
            MapField::OifName => "oifname",
            MapField::Saddr(AddrFamily::V4) => "ip saddr",
            MapField::Saddr(AddrFamily::V6) => "ip6 saddr",
            MapField::Daddr(AddrFamily::V4) => "ip daddr",
            MapField::Daddr(AddrFamily::V6) => "ip6 daddr",
            MapField::ArpSaddr => "arp saddr ip",
            MapField::ArpDaddr => "arp daddr ip",
        }
    }
}

/// One element's key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MapKeyValue {
    /// An interface name.
    IfName(String),
    /// An address range.
    Range(AddrRange),
}

/// One element: key → `jump chain`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct MapElement {
    /// The key.
    pub key: MapKeyValue,
    /// The chain the packet jumps to.
    pub chain: String,
}

/// A named verdict map (`map NAME { type K : verdict; ... }`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VmapPlan {
    /// Map name (see the module docs).
    pub name: String,
    /// Key type.
    pub key: MapKey,
    /// Elements, sorted by key; address ranges never overlap.
    pub elements: Vec<MapElement>,
}

impl VmapPlan {
    /// An empty map.
    pub fn new(name: &str, key: MapKey) -> Self {
        Self {
            name: name.to_owned(),
            key,
            elements: Vec::new(),
        }
    }

    /// Adds `key → jump chain`.
    pub fn push(&mut self, key: MapKeyValue, chain: String) {
        self.elements.push(MapElement { key, chain });
    }

    /// The chain an interface name jumps to (`None`: no element).
    pub fn chain_for_name(&self, name: &str) -> Option<&str> {
        self.elements.iter().find_map(|e| match &e.key {
            MapKeyValue::IfName(n) if n == name => Some(e.chain.as_str()),
            _ => None,
        })
    }

    /// The chain an address jumps to (`None`: no element holds it).
    pub fn chain_for_addr(&self, a: IpAddr) -> Option<&str> {
        self.elements.iter().find_map(|e| match &e.key {
            MapKeyValue::Range(r)
                if r.family() == AddrFamily::of(a)
                    && to_u128(r.start) <= to_u128(a)
                    && to_u128(a) <= to_u128(r.end) =>
            {
                Some(e.chain.as_str())
            }
            _ => None,
        })
    }

    /// Every chain the map jumps to.
    pub fn chains(&self) -> impl Iterator<Item = &str> {
        self.elements.iter().map(|e| e.chain.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_find_the_element_holding_the_key() {
        let mut m = VmapPlan::new("m", MapKey::Addr(AddrFamily::V4));
        m.push(
            MapKeyValue::Range(AddrRange::from_net("10.0.1.0/24".parse().unwrap())),
            "a-nat".into(),
        );
        m.push(
            MapKeyValue::Range(AddrRange::from_net("10.0.2.0/24".parse().unwrap())),
            "b-nat".into(),
        );
        assert_eq!(m.chain_for_addr("10.0.2.9".parse().unwrap()), Some("b-nat"));
        assert_eq!(m.chain_for_addr("10.0.3.1".parse().unwrap()), None);
        assert_eq!(m.chain_for_addr("::1".parse().unwrap()), None);
        let mut i = VmapPlan::new("i", MapKey::IfName);
        i.push(MapKeyValue::IfName("br0".into()), "a-out".into());
        assert_eq!(i.chain_for_name("br0"), Some("a-out"));
        assert_eq!(i.chain_for_name("br1"), None);
    }
}
