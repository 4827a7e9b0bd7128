//! A frame's IP datagram cut into fragments, as an attacker sends it to
//! slip a field past a rule: the first fragment ends before the field
//! (a rule whose load runs past the fragment's end does not match), the
//! second carries the rest and no transport header at all.

use super::frame::{FrameError, ethertype};

const ETH_HEADER: usize = 14;
const IPV4_HEADER: usize = 20;
const IPV6_HEADER: usize = 40;
/// IPv6's fragment header (next header 44), 8 bytes.
const IPV6_FRAGMENT: u8 = 44;
/// The identification both fragments carry.
const ID: u32 = 0x0c0a_11ed;

/// `frame` (an untagged Ethernet frame holding an IPv4 datagram without
/// options, or an IPv6 packet without extension headers) as two frames:
/// the first with the first `at` bytes of the IP payload (a multiple of
/// 8), the second with the rest.
pub fn split(frame: &[u8], at: usize) -> Result<[Vec<u8>; 2], FrameError> {
    let bad = |why: &str| FrameError::Encode(format!("cannot fragment: {why}"));
    if !at.is_multiple_of(8) || at == 0 {
        return Err(bad("the cut must be a non-zero multiple of 8 bytes"));
    }
    let et = frame
        .get(12..14)
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
        .ok_or_else(|| bad("no Ethernet header"))?;
    let (link, ip) = frame.split_at(ETH_HEADER);
    match et {
        ethertype::IPV4 => {
            if ip.first() != Some(&0x45) {
                return Err(bad("an IPv4 header with options"));
            }
            let (header, payload) = ip.split_at(IPV4_HEADER);
            if at >= payload.len() {
                return Err(bad("the cut is past the datagram"));
            }
            let piece = |data: &[u8], offset: usize, more: bool| {
                let mut h = header.to_vec();
                let total = (IPV4_HEADER + data.len()) as u16;
                h[2..4].copy_from_slice(&total.to_be_bytes());
                h[4..6].copy_from_slice(&(ID as u16).to_be_bytes());
                let flags_offset = ((offset / 8) as u16) | if more { 0x2000 } else { 0 };
                h[6..8].copy_from_slice(&flags_offset.to_be_bytes());
                h[10..12].copy_from_slice(&[0, 0]);
                let sum = checksum(&h);
                h[10..12].copy_from_slice(&sum.to_be_bytes());
                [link, &h, data].concat()
            };
            Ok([
                piece(&payload[..at], 0, true),
                piece(&payload[at..], at, false),
            ])
        }
        ethertype::IPV6 => {
            if ip.len() < IPV6_HEADER {
                return Err(bad("a short IPv6 header"));
            }
            let (header, payload) = ip.split_at(IPV6_HEADER);
            if at >= payload.len() {
                return Err(bad("the cut is past the packet"));
            }
            let next = header[6];
            let piece = |data: &[u8], offset: usize, more: bool| {
                let mut h = header.to_vec();
                h[6] = IPV6_FRAGMENT;
                let len = (8 + data.len()) as u16;
                h[4..6].copy_from_slice(&len.to_be_bytes());
                let off = ((offset as u16) & !7) | u16::from(more);
                let mut frag = vec![next, 0];
                frag.extend_from_slice(&off.to_be_bytes());
                frag.extend_from_slice(&ID.to_be_bytes());
                [link, &h, &frag, data].concat()
            };
            Ok([
                piece(&payload[..at], 0, true),
                piece(&payload[at..], at, false),
            ])
        }
        other => Err(bad(&format!("ethertype {other:#06x} is not IP"))),
    }
}

/// The IPv4 header checksum (RFC 791).
fn checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::frame::{self, BROADCAST, Link, Transport};
    use etherparse::{NetSlice, SlicedPacket};

    #[test]
    fn an_ipv4_datagram_splits_into_a_first_and_a_last_fragment() {
        let f = frame::ip(
            &Link::new([2, 0, 0, 0, 0, 1], BROADCAST),
            std::net::Ipv4Addr::UNSPECIFIED.into(),
            std::net::Ipv4Addr::BROADCAST.into(),
            64,
            Transport::Udp {
                sport: 68,
                dport: 67,
            },
            &[7u8; 300],
        )
        .unwrap();
        let [a, b] = split(&f, 24).unwrap();
        for (piece, offset, more, len) in [(&a, 0, true, 24), (&b, 24, false, 308 - 24)] {
            let p = SlicedPacket::from_ethernet(piece).unwrap();
            let Some(NetSlice::Ipv4(v4)) = p.net else {
                panic!("not IPv4")
            };
            let h = v4.header();
            assert_eq!(h.fragments_offset().value() as usize * 8, offset);
            assert_eq!(h.more_fragments(), more);
            assert_eq!(v4.payload().payload.len(), len);
            // The header checksum is right.
            assert_eq!(checksum(&piece[14..34]), 0);
        }
        assert!(split(&f, 12).is_err());
    }

    #[test]
    fn an_ipv6_packet_gets_a_fragment_header() {
        let f = frame::ip(
            &Link::new([2, 0, 0, 0, 0, 1], BROADCAST),
            "fe80::1".parse().unwrap(),
            "fe80::2".parse().unwrap(),
            64,
            Transport::Udp {
                sport: 5353,
                dport: 53,
            },
            &[7u8; 40],
        )
        .unwrap();
        let [a, b] = split(&f, 8).unwrap();
        assert_eq!(a[14 + 6], IPV6_FRAGMENT);
        assert_eq!(&a[14 + 40..14 + 44], &[17, 0, 0, 1]);
        assert_eq!(&b[14 + 40..14 + 44], &[17, 0, 0, 8]);
        assert_eq!(b.len(), 14 + 40 + 8 + 48 - 8);
    }
}
