//! Address ranges: the elements of interval sets, and their merging.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use serde::Serialize;

use super::model::AddrFamily;

/// An inclusive address range `start..=end`; both ends share a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct AddrRange {
    /// First address.
    pub start: IpAddr,
    /// Last address (inclusive).
    pub end: IpAddr,
}

impl AddrRange {
    /// The range covering exactly `net`.
    pub fn from_net(net: IpNet) -> Self {
        let net = net.trunc();
        Self {
            start: net.network(),
            end: net.broadcast(),
        }
    }

    /// Whether `a` is in the range (of its family).
    pub fn contains(&self, a: IpAddr) -> bool {
        self.family() == AddrFamily::of(a)
            && to_u128(self.start) <= to_u128(a)
            && to_u128(a) <= to_u128(self.end)
    }

    /// The range holding only `addr`.
    pub fn single(addr: IpAddr) -> Self {
        Self {
            start: addr,
            end: addr,
        }
    }

    /// The family of the range.
    pub fn family(&self) -> AddrFamily {
        AddrFamily::of(self.start)
    }

    /// The range as one CIDR, when it is exactly one.
    pub fn as_net(&self) -> Option<IpNet> {
        let (start, end) = (to_u128(self.start), to_u128(self.end));
        let bits = match self.start {
            IpAddr::V4(_) => 32u32,
            IpAddr::V6(_) => 128u32,
        };
        let size = end.checked_sub(start)?.checked_add(1);
        let host_bits = match size {
            // The whole v6 space overflows u128 + 1.
            None => 128,
            Some(n) if n.is_power_of_two() => n.trailing_zeros(),
            Some(_) => return None,
        };
        if host_bits > bits || (host_bits < 128 && start & ((1u128 << host_bits) - 1) != 0) {
            return None;
        }
        let prefix = u8::try_from(bits - host_bits).ok()?;
        IpNet::new(self.start, prefix).ok()
    }
}

/// An address as an unsigned integer (IPv4 in the low 32 bits).
pub(crate) fn to_u128(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// The inverse of [`to_u128`] for a given family; `None` when out of range.
pub(crate) fn from_u128(family: AddrFamily, value: u128) -> Option<IpAddr> {
    match family {
        AddrFamily::V4 => u32::try_from(value)
            .ok()
            .map(|v| IpAddr::V4(Ipv4Addr::from(v))),
        AddrFamily::V6 => Some(IpAddr::V6(Ipv6Addr::from(value))),
    }
}

/// The largest address of a family.
pub(crate) fn max_value(family: AddrFamily) -> u128 {
    match family {
        AddrFamily::V4 => u128::from(u32::MAX),
        AddrFamily::V6 => u128::MAX,
    }
}

/// Sort and merge ranges of one family: overlapping and adjacent ranges
/// become one (the kernel's interval tree refuses overlaps, and adjacent
/// ranges would need an end and a start element on the same key).
pub fn merge_ranges(mut ranges: Vec<AddrRange>) -> Vec<AddrRange> {
    ranges.sort();
    let mut out: Vec<AddrRange> = Vec::with_capacity(ranges.len());
    for r in ranges {
        if let Some(last) = out.last_mut() {
            let last_end = to_u128(last.end);
            if last.family() == r.family()
                && to_u128(r.start) <= last_end.saturating_add(1)
                && last_end != max_value(last.family())
            {
                if to_u128(r.end) > last_end {
                    last.end = r.end;
                }
                continue;
            }
            if last.family() == r.family() && last_end == max_value(last.family()) {
                // Already covers everything above its start.
                continue;
            }
        }
        out.push(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(a: &str, b: &str) -> AddrRange {
        AddrRange {
            start: a.parse().unwrap(),
            end: b.parse().unwrap(),
        }
    }

    #[test]
    fn as_net_recognises_cidrs_only() {
        assert_eq!(
            r("10.0.0.0", "10.255.255.255").as_net(),
            Some("10.0.0.0/8".parse().unwrap())
        );
        assert_eq!(
            r("1.2.3.4", "1.2.3.4").as_net(),
            Some("1.2.3.4/32".parse().unwrap())
        );
        assert_eq!(
            r("1.2.3.4", "1.2.3.5").as_net(),
            Some("1.2.3.4/31".parse().unwrap())
        );
        assert_eq!(r("1.2.3.5", "1.2.3.6").as_net(), None);
        assert_eq!(r("1.2.3.1", "1.2.3.2").as_net(), None);
        assert_eq!(
            r("0.0.0.0", "255.255.255.255").as_net(),
            Some("0.0.0.0/0".parse().unwrap())
        );
        assert_eq!(
            r("::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff").as_net(),
            Some("::/0".parse().unwrap())
        );
    }

    #[test]
    fn merge_joins_overlaps_and_neighbours() {
        let merged = merge_ranges(vec![
            r("10.0.0.5", "10.0.0.9"),
            r("10.0.0.0", "10.0.0.4"),
            r("10.0.0.20", "10.0.0.30"),
            r("10.0.0.25", "10.0.0.26"),
            r("2001:db8::1", "2001:db8::1"),
        ]);
        assert_eq!(
            merged,
            vec![
                r("10.0.0.0", "10.0.0.9"),
                r("10.0.0.20", "10.0.0.30"),
                r("2001:db8::1", "2001:db8::1"),
            ]
        );
    }

    #[test]
    fn merge_handles_the_top_of_the_space() {
        let merged = merge_ranges(vec![
            r("224.0.0.0", "239.255.255.255"),
            r("240.0.0.0", "255.255.255.255"),
            r("250.0.0.0", "250.0.0.1"),
        ]);
        assert_eq!(merged, vec![r("224.0.0.0", "255.255.255.255")]);
    }
}
