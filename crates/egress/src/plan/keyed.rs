//! Keyed sets: exact-match sets whose keys are one field or a
//! concatenation of fields (`iifname . ether saddr . ip saddr`), and the
//! fields rules load to look them up or to key a meter.
//!
//! Three kinds: [`KeyedKind::Static`] sets hold what the plan says (the
//! port bindings) and are compared element by element on verify;
//! [`KeyedKind::Runtime`] sets are filled by corral at run time from what
//! it finds on the host (quarantined ports) and are not compared;
//! [`KeyedKind::Meter`] sets are filled by the kernel itself (per-source
//! rate limits and connection counts).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use serde::Serialize;

use super::model::AddrFamily;

/// Where a raw payload field starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PayloadBase {
    /// The Ethernet header (`@ll`).
    Link,
    /// The network header (`@nh`): IPv4, IPv6 or ARP.
    Network,
    /// The transport header (`@th`): after the IP header and its extensions.
    Transport,
}

/// A value a rule loads into a register.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    /// The input interface's name (in the bridge family: the port).
    IifName,
    /// The output interface's name (in the bridge family: the port).
    OifName,
    /// The frame's source MAC.
    EtherSaddr,
    /// The ARP sender hardware address.
    ArpSenderMac,
    /// The ARP sender protocol address.
    ArpSenderIp,
    /// The IPv4 or IPv6 source address.
    IpSaddr(AddrFamily),
    /// The IPv4 or IPv6 destination address.
    IpDaddr(AddrFamily),
    /// `len` raw bytes at `offset` of `base`.
    Raw {
        /// Header the offset counts from.
        base: PayloadBase,
        /// Offset in bytes.
        offset: u32,
        /// Length in bytes.
        len: u32,
    },
}

impl Field {
    /// Bytes the field loads.
    pub fn len(self) -> u32 {
        match self {
            Field::IifName | Field::OifName => 16,
            Field::EtherSaddr | Field::ArpSenderMac => 6,
            Field::ArpSenderIp
            | Field::IpSaddr(AddrFamily::V4)
            | Field::IpDaddr(AddrFamily::V4) => 4,
            Field::IpSaddr(AddrFamily::V6) | Field::IpDaddr(AddrFamily::V6) => 16,
            Field::Raw { len, .. } => len,
        }
    }

    /// Always false: every field loads at least one byte (clippy's
    /// `len_without_is_empty`).
    pub fn is_empty(self) -> bool {
        false
    }

    /// The key part a set keyed by this field has.
    pub fn key_part(self) -> KeyPart {
        match self {
            Field::IifName | Field::OifName => KeyPart::IfName,
            Field::EtherSaddr | Field::ArpSenderMac => KeyPart::Ether,
            Field::ArpSenderIp
            | Field::IpSaddr(AddrFamily::V4)
            | Field::IpDaddr(AddrFamily::V4) => KeyPart::Ipv4,
            Field::IpSaddr(AddrFamily::V6) | Field::IpDaddr(AddrFamily::V6) => KeyPart::Ipv6,
            Field::Raw { .. } => KeyPart::Raw(self),
        }
    }
}

/// One part of a set key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyPart {
    /// An interface name (16 bytes, NUL padded).
    IfName,
    /// A MAC address.
    Ether,
    /// An IPv4 address.
    Ipv4,
    /// An IPv6 address.
    Ipv6,
    /// Raw bytes, as loaded by this field (`typeof` in `nft` syntax).
    Raw(Field),
}

impl KeyPart {
    /// Bytes of the value.
    pub fn len(self) -> u32 {
        match self {
            KeyPart::IfName | KeyPart::Ipv6 => 16,
            KeyPart::Ether => 6,
            KeyPart::Ipv4 => 4,
            KeyPart::Raw(f) => f.len(),
        }
    }

    /// Always false (clippy's `len_without_is_empty`).
    pub fn is_empty(self) -> bool {
        false
    }

    /// Bytes the part takes in a key: its length rounded up to whole
    /// 32-bit registers.
    pub fn padded_len(self) -> u32 {
        self.len().next_multiple_of(4)
    }

    /// The `nft` datatype number (`ifname` 41, `ether_addr` 9,
    /// `ipv4_addr` 7, `ipv6_addr` 8, `integer` 4).
    pub fn datatype(self) -> u32 {
        match self {
            KeyPart::IfName => 41,
            KeyPart::Ether => 9,
            KeyPart::Ipv4 => 7,
            KeyPart::Ipv6 => 8,
            KeyPart::Raw(_) => 4,
        }
    }
}

/// One value of a key part.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyValue {
    /// An interface name.
    IfName(String),
    /// A MAC address (also the value of a 6-byte raw part).
    Ether([u8; 6]),
    /// An IPv4 address.
    V4(Ipv4Addr),
    /// An IPv6 address (also the value of a 16-byte raw part).
    V6(Ipv6Addr),
}

impl KeyValue {
    /// The value's bytes, unpadded.
    pub fn bytes(&self) -> Vec<u8> {
        match self {
            KeyValue::IfName(n) => {
                let mut b = n.as_bytes().to_vec();
                b.resize(16, 0);
                b
            }
            KeyValue::Ether(m) => m.to_vec(),
            KeyValue::V4(a) => a.octets().to_vec(),
            KeyValue::V6(a) => a.octets().to_vec(),
        }
    }
}

/// A meter's limit: what makes the rule's other matches apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// More than `per_second` packets a second (after a burst of `burst`)
    /// for this key.
    RateOver {
        /// Sustained packets per second.
        per_second: u64,
        /// Packets allowed at once above the rate.
        burst: u32,
    },
    /// More than this many tracked connections for this key.
    CountOver(u32),
}

/// How a keyed set is filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyedKind {
    /// By the plan (bindings): verify compares every element.
    Static,
    /// By corral at run time from what it finds (quarantined ports): not
    /// compared with the plan.
    Runtime,
    /// By the kernel (`flags dynamic`), each key with its own limit state;
    /// keys idle for `timeout` are dropped (`None`: the kernel drops a key
    /// when its count reaches zero).
    Meter {
        /// Idle timeout of a key.
        timeout: Option<Duration>,
        /// Most keys it holds (`size`); the kernel also sizes the meter's
        /// hash table for this many up front, so a per-profile meter asks
        /// only for what its keys can number (see [`METER_SIZE`]).
        size: u32,
    },
}

/// Largest number of keys a shared meter holds (what `nft` gives dynamic
/// sets). The kernel allocates a meter's hash table for its size when it
/// creates it (about 1 MiB, zeroed, for this size): fine for the bridge
/// table's two shared meters, far too much for every profile's own (500
/// profiles would ask the kernel for gigabytes on every apply).
pub const METER_SIZE: u32 = 65_535;

/// Keys of a per-profile meter keyed by a sandbox's source address: one
/// of the bound addresses of its bridge's ports (a Linux bridge holds at
/// most 1,024 ports; each port an IPv4 address, or a global and a
/// link-local IPv6 one).
pub const PROFILE_SOURCE_KEYS: u32 = 2_048;

/// Length in bytes of a key of `parts`: a single part's own length; in a
/// concatenation each part padded to whole 32-bit registers.
pub fn key_len(parts: &[KeyPart]) -> u32 {
    match parts {
        [one] => one.len(),
        parts => parts.iter().map(|p| p.padded_len()).sum(),
    }
}

/// The `nft` datatype of a key of `parts` (a concatenation packs six bits
/// per part, first part highest, as `nft` does).
pub fn key_type(parts: &[KeyPart]) -> u32 {
    parts.iter().fold(0, |t, p| (t << 6) | p.datatype())
}

/// One element's key of `parts` as the kernel stores it.
pub fn key_bytes(parts: &[KeyPart], element: &[KeyValue]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key_len(parts) as usize);
    let concat = parts.len() > 1;
    for (part, v) in parts.iter().zip(element) {
        let mut b = v.bytes();
        b.resize(part.len() as usize, 0);
        if concat {
            b.resize(part.padded_len() as usize, 0);
        }
        out.extend(b);
    }
    out
}

/// One keyed set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyedSetPlan {
    /// Set name.
    pub name: String,
    /// Key parts, in concatenation order.
    pub key: Vec<KeyPart>,
    /// Static, runtime or meter.
    pub kind: KeyedKind,
    /// Elements, each a value per key part (static sets only), sorted.
    pub elements: Vec<Vec<KeyValue>>,
}

impl KeyedSetPlan {
    /// An empty set of `kind`.
    pub fn new(name: &str, key: Vec<KeyPart>, kind: KeyedKind) -> Self {
        Self {
            name: name.to_owned(),
            key,
            kind,
            elements: Vec::new(),
        }
    }

    /// Key length in bytes (see [`key_len`]).
    pub fn key_len(&self) -> u32 {
        key_len(&self.key)
    }

    /// The `nft` datatype of the key (see [`key_type`]).
    pub fn key_type(&self) -> u32 {
        key_type(&self.key)
    }

    /// One element's key as the kernel stores it (see [`key_bytes`]).
    pub fn key_bytes(&self, element: &[KeyValue]) -> Vec<u8> {
        key_bytes(&self.key, element)
    }

    /// Whether any part is raw (rendered with `typeof`).
    pub fn has_raw_part(&self) -> bool {
        self.key.iter().any(|p| matches!(p, KeyPart::Raw(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_padded_per_part_like_nft_concatenations() {
        let s = KeyedSetPlan::new(
            "ip4",
            vec![KeyPart::IfName, KeyPart::Ether, KeyPart::Ipv4],
            KeyedKind::Static,
        );
        assert_eq!(s.key_len(), 16 + 8 + 4);
        assert_eq!(s.key_type(), (41 << 12) | (9 << 6) | 7);
        let k = s.key_bytes(&[
            KeyValue::IfName("c0s1".into()),
            KeyValue::Ether([2, 0, 0, 0, 0, 7]),
            KeyValue::V4(Ipv4Addr::new(10, 0, 0, 9)),
        ]);
        assert_eq!(&k[..5], b"c0s1\0");
        assert_eq!(&k[16..24], &[2, 0, 0, 0, 0, 7, 0, 0]);
        assert_eq!(&k[24..], &[10, 0, 0, 9]);
        let macs = KeyedSetPlan::new("macs", vec![KeyPart::Ether], KeyedKind::Static);
        assert_eq!(macs.key_len(), 6);
        assert_eq!(
            macs.key_bytes(&[KeyValue::Ether([2, 0, 0, 0, 0, 7])]).len(),
            6
        );
    }
}
