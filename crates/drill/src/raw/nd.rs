//! IPv6 neighbour discovery messages as an attacker writes them: neighbour
//! advertisements and solicitations with any target and link-layer option,
//! router advertisements with any prefix, all with hop limit 255 (receivers
//! ignore ND messages with any other hop limit).

use std::net::Ipv6Addr;

use super::frame::{self, FrameError, Link, Mac, Transport};

/// ICMPv6 type of a router solicitation.
pub const ROUTER_SOLICIT: u8 = 133;
/// ICMPv6 type of a router advertisement.
pub const ROUTER_ADVERT: u8 = 134;
/// ICMPv6 type of a neighbour solicitation.
pub const NEIGHBOR_SOLICIT: u8 = 135;
/// ICMPv6 type of a neighbour advertisement.
pub const NEIGHBOR_ADVERT: u8 = 136;

/// Option type: source link-layer address.
pub const OPT_SOURCE_LL: u8 = 1;
/// Option type: target link-layer address.
pub const OPT_TARGET_LL: u8 = 2;
/// Option type: prefix information.
pub const OPT_PREFIX: u8 = 3;

/// The all-nodes multicast address.
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// A link-layer address option (source or target), 8 bytes.
pub fn lladdr_option(kind: u8, mac: Mac) -> [u8; 8] {
    let mut o = [0u8; 8];
    o[0] = kind;
    o[1] = 1; // length in units of 8 bytes
    o[2..].copy_from_slice(&mac);
    o
}

/// A prefix information option for `prefix/len`, on-link and autonomous,
/// with the given lifetimes in seconds.
pub fn prefix_option(prefix: Ipv6Addr, len: u8, valid: u32, preferred: u32) -> [u8; 32] {
    let mut o = [0u8; 32];
    o[0] = OPT_PREFIX;
    o[1] = 4;
    o[2] = len;
    o[3] = 0xc0; // L and A
    o[4..8].copy_from_slice(&valid.to_be_bytes());
    o[8..12].copy_from_slice(&preferred.to_be_bytes());
    o[16..].copy_from_slice(&prefix.octets());
    o
}

/// The solicited-node multicast address of `addr` (ff02::1:ffXX:XXXX).
pub fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// The Ethernet multicast MAC of an IPv6 multicast address (33:33:…).
pub fn multicast_mac(group: Ipv6Addr) -> Mac {
    let o = group.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
}

/// The EUI-64 link-local address the kernel derives from `mac`.
pub fn link_local(mac: Mac) -> Ipv6Addr {
    let mut o = [0u8; 16];
    o[0] = 0xfe;
    o[1] = 0x80;
    o[8] = mac[0] ^ 0x02;
    o[9] = mac[1];
    o[10] = mac[2];
    o[11] = 0xff;
    o[12] = 0xfe;
    o[13] = mac[3];
    o[14] = mac[4];
    o[15] = mac[5];
    Ipv6Addr::from(o)
}

/// Flags of a neighbour advertisement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AdvertFlags {
    /// R: the sender is a router.
    pub router: bool,
    /// S: an answer to a solicitation.
    pub solicited: bool,
    /// O: replace an existing cache entry.
    pub override_: bool,
}

/// A neighbour advertisement claiming `target` for `tlla` (the target
/// link-layer option; `None` leaves it out), from `src` to `dst`.
pub fn neighbor_advert(
    link: &Link,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    target: Ipv6Addr,
    flags: AdvertFlags,
    tlla: Option<Mac>,
    extra: &[u8],
) -> Result<Vec<u8>, FrameError> {
    let mut body = target.octets().to_vec();
    if let Some(mac) = tlla {
        body.extend_from_slice(&lladdr_option(OPT_TARGET_LL, mac));
    }
    body.extend_from_slice(extra);
    let f = (u8::from(flags.router) << 7)
        | (u8::from(flags.solicited) << 6)
        | (u8::from(flags.override_) << 5);
    frame::ip(
        link,
        src.into(),
        dst.into(),
        255,
        Transport::Icmpv6 {
            kind: NEIGHBOR_ADVERT,
            code: 0,
            rest: [f, 0, 0, 0],
        },
        &body,
    )
}

/// A neighbour solicitation for `target` with an optional source
/// link-layer option.
pub fn neighbor_solicit(
    link: &Link,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    target: Ipv6Addr,
    slla: Option<Mac>,
) -> Result<Vec<u8>, FrameError> {
    let mut body = target.octets().to_vec();
    if let Some(mac) = slla {
        body.extend_from_slice(&lladdr_option(OPT_SOURCE_LL, mac));
    }
    frame::ip(
        link,
        src.into(),
        dst.into(),
        255,
        Transport::Icmpv6 {
            kind: NEIGHBOR_SOLICIT,
            code: 0,
            rest: [0; 4],
        },
        &body,
    )
}

/// A router advertisement: default-router lifetime `lifetime` seconds
/// (non-zero makes the sender a default router), the sender's link-layer
/// address and the given options (e.g. [`prefix_option`]).
pub fn router_advert(
    link: &Link,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    lifetime: u16,
    options: &[u8],
) -> Result<Vec<u8>, FrameError> {
    let [hi, lo] = lifetime.to_be_bytes();
    let mut body = vec![0u8; 8]; // reachable time, retransmission timer
    body.extend_from_slice(&lladdr_option(OPT_SOURCE_LL, link.src));
    body.extend_from_slice(options);
    frame::ip(
        link,
        src.into(),
        dst.into(),
        255,
        Transport::Icmpv6 {
            kind: ROUTER_ADVERT,
            code: 0,
            rest: [64, 0, hi, lo],
        },
        &body,
    )
}

#[cfg(test)]
mod tests {
    use etherparse::{Icmpv6Type, SlicedPacket, TransportSlice};

    use super::*;

    const A: Mac = [2, 0, 0, 0, 0, 1];

    #[test]
    fn an_advert_carries_target_flags_and_option_with_a_valid_checksum() {
        let target: Ipv6Addr = "fd00::1".parse().unwrap();
        let f = neighbor_advert(
            &Link::new(A, multicast_mac(ALL_NODES)),
            link_local(A),
            ALL_NODES,
            target,
            AdvertFlags {
                override_: true,
                ..AdvertFlags::default()
            },
            Some(A),
            &[],
        )
        .unwrap();
        let p = SlicedPacket::from_ethernet(&f).unwrap();
        let Some(TransportSlice::Icmpv6(icmp)) = p.transport else {
            panic!("not ICMPv6: {p:?}");
        };
        let Icmpv6Type::NeighborAdvertisement(h) = icmp.icmp_type() else {
            panic!("not an advertisement: {:?}", icmp.icmp_type());
        };
        assert!(h.r#override && !h.router && !h.solicited, "{h:?}");
        let body = icmp.payload();
        assert_eq!(&body[..16], &target.octets());
        assert_eq!(&body[16..], &lladdr_option(OPT_TARGET_LL, A));
        // etherparse checks the checksum when asked to.
        let (src, dst) = match p.net {
            Some(etherparse::NetSlice::Ipv6(v6)) => {
                (v6.header().source(), v6.header().destination())
            }
            _ => panic!("not IPv6"),
        };
        assert_eq!(
            icmp.header().checksum,
            icmp.icmp_type()
                .calc_checksum(src, dst, icmp.payload())
                .unwrap()
        );
    }

    #[test]
    fn addresses_derived_like_the_kernel() {
        assert_eq!(
            link_local([0x02, 0x11, 0x22, 0x33, 0x44, 0x55]),
            "fe80::11:22ff:fe33:4455".parse::<Ipv6Addr>().unwrap()
        );
        let sn = solicited_node("fd00::12:3456".parse().unwrap());
        assert_eq!(sn, "ff02::1:ff12:3456".parse::<Ipv6Addr>().unwrap());
        assert_eq!(multicast_mac(sn), [0x33, 0x33, 0xff, 0x12, 0x34, 0x56]);
    }
}
