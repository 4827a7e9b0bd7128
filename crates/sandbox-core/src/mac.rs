//! MAC addresses: what corral binds a sandbox's bridge port to (the
//! egress crate's port bindings) and what a provider gives the sandbox's
//! NIC.

use core::net::Ipv6Addr;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The bytes.
    pub fn octets(self) -> [u8; 6] {
        self.0
    }

    /// A unicast address (the group bit clear) that is not all zeros: the
    /// only kind a port can be bound to.
    pub fn is_assignable(self) -> bool {
        self.0[0] & 1 == 0 && self.0 != [0; 6]
    }

    /// The EUI-64 IPv6 link-local address the kernel derives from it.
    pub fn link_local(self) -> Ipv6Addr {
        let m = self.0;
        Ipv6Addr::from([
            0xfe,
            0x80,
            0,
            0,
            0,
            0,
            0,
            0,
            m[0] ^ 0x02,
            m[1],
            m[2],
            0xff,
            0xfe,
            m[3],
            m[4],
            m[5],
        ])
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// A MAC address could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a MAC address; write six hex bytes separated by `:`, e.g. 02:c0:0a:00:00:05")]
pub struct MacParseError(pub String);

impl FromStr for MacAddr {
    type Err = MacParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || MacParseError(s.to_owned());
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() != 6 {
            return Err(err());
        }
        let mut m = [0u8; 6];
        for (b, p) in m.iter_mut().zip(parts) {
            if p.len() != 2 {
                return Err(err());
            }
            *b = u8::from_str_radix(p, 16).map_err(|_| err())?;
        }
        Ok(Self(m))
    }
}

impl Serialize for MacAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MacAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse_and_print_round_trip() {
        let m: MacAddr = "02:c0:0a:5b:00:02".parse().unwrap();
        assert_eq!(m.to_string(), "02:c0:0a:5b:00:02");
        for bad in ["02:c0:0a:5b:00", "zz:c0:0a:5b:00:02", "2:c0:0a:5b:00:02:"] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad}");
        }
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(json, "\"02:c0:0a:5b:00:02\"");
        assert_eq!(serde_json::from_str::<MacAddr>(&json).unwrap(), m);
    }

    #[test]
    fn only_unicast_nonzero_macs_are_assignable() {
        assert!(MacAddr([2, 0xc0, 10, 0, 0, 2]).is_assignable());
        assert!(!MacAddr([1, 0, 0x5e, 0, 0, 1]).is_assignable());
        assert!(!MacAddr([0; 6]).is_assignable());
    }
}
