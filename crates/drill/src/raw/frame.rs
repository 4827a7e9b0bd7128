//! Frames as an attacker writes them: every field chosen by the caller.
//!
//! The link layer is written here (so any stack of 802.1Q tags, with any
//! ethertype inside, is one call); the IP and transport layers, with their
//! lengths and checksums, come from `etherparse`.

use std::net::{IpAddr, Ipv4Addr};

use etherparse::{
    ArpHardwareId, ArpOperation, ArpPacket, EtherType, IpHeaders, IpNumber, Ipv4Header,
    Ipv6FlowLabel, Ipv6Header, PacketBuilder,
};

/// A MAC address.
pub type Mac = [u8; 6];

/// The broadcast MAC address.
pub const BROADCAST: Mac = [0xff; 6];

/// The 802.1Q tag protocol identifier.
pub const TPID_8021Q: u16 = 0x8100;

/// Ethertypes the attacks use.
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
}

/// A frame could not be built from the fields given.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// Source and destination are of different IP families.
    #[error("source {src} and destination {dst} are not of the same IP family")]
    MixedFamilies {
        /// The source address.
        src: IpAddr,
        /// The destination address.
        dst: IpAddr,
    },
    /// The transport does not exist in that family (e.g. ICMPv6 over IPv4).
    #[error("{what} cannot be carried over {family}")]
    WrongFamily {
        /// The transport.
        what: &'static str,
        /// `IPv4` or `IPv6`.
        family: &'static str,
    },
    /// etherparse refused a field (a length or value out of range).
    #[error("cannot encode the packet: {0}")]
    Encode(String),
}

/// The link layer of a frame: addresses and 802.1Q tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Source MAC.
    pub src: Mac,
    /// Destination MAC.
    pub dst: Mac,
    /// VLAN ids of 802.1Q tags, outermost first (each with TPID 0x8100;
    /// two tags make 802.1Q-in-802.1Q).
    pub vlans: Vec<u16>,
}

impl Link {
    /// An untagged link layer.
    pub fn new(src: Mac, dst: Mac) -> Self {
        Self {
            src,
            dst,
            vlans: Vec::new(),
        }
    }

    /// The same with one more (inner) 802.1Q tag.
    #[must_use]
    pub fn tagged(mut self, vlan: u16) -> Self {
        self.vlans.push(vlan & 0x0fff);
        self
    }

    fn write(&self, ethertype: u16, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.dst);
        out.extend_from_slice(&self.src);
        for vid in &self.vlans {
            out.extend_from_slice(&TPID_8021Q.to_be_bytes());
            out.extend_from_slice(&vid.to_be_bytes());
        }
        out.extend_from_slice(&ethertype.to_be_bytes());
    }
}

/// TCP flags an attack sets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpFlags {
    /// SYN.
    pub syn: bool,
    /// ACK (with [`Transport::Tcp::ack`] as the number).
    pub ack: bool,
    /// RST.
    pub rst: bool,
    /// FIN.
    pub fin: bool,
    /// PSH.
    pub psh: bool,
}

impl TcpFlags {
    /// A SYN.
    pub const SYN: Self = Self {
        syn: true,
        ack: false,
        rst: false,
        fin: false,
        psh: false,
    };
    /// A SYN-ACK.
    pub const SYN_ACK: Self = Self {
        syn: true,
        ack: true,
        rst: false,
        fin: false,
        psh: false,
    };
    /// A bare ACK.
    pub const ACK: Self = Self {
        syn: false,
        ack: true,
        rst: false,
        fin: false,
        psh: false,
    };
    /// ACK with data pushed.
    pub const PSH_ACK: Self = Self {
        syn: false,
        ack: true,
        rst: false,
        fin: false,
        psh: true,
    };
}

/// The transport layer of an IP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// UDP.
    Udp {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
    },
    /// TCP.
    Tcp {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
        /// Flags.
        flags: TcpFlags,
        /// Sequence number.
        seq: u32,
        /// Acknowledgment number (used when `flags.ack`).
        ack: u32,
    },
    /// ICMP (IPv4) or ICMPv6 echo request.
    EchoRequest {
        /// Identifier.
        id: u16,
        /// Sequence number.
        seq: u16,
    },
    /// Any ICMPv6 message: type, code, bytes 5–8 of the header; the rest
    /// (e.g. neighbour discovery fields and options) is the payload.
    Icmpv6 {
        /// Type (e.g. 134 router advertisement, 136 neighbour advertisement).
        kind: u8,
        /// Code.
        code: u8,
        /// Header bytes 5–8 (flags, reserved fields).
        rest: [u8; 4],
    },
    /// No transport header: the payload follows the IP header, which
    /// carries `protocol` as its protocol / next header.
    Raw {
        /// IP protocol number.
        protocol: u8,
    },
}

/// An IP packet in a frame: any source and destination (same family), any
/// TTL / hop limit, a transport, and the payload.
pub fn ip(
    link: &Link,
    src: IpAddr,
    dst: IpAddr,
    ttl: u8,
    transport: Transport,
    payload: &[u8],
) -> Result<Vec<u8>, FrameError> {
    let enc = |e: &dyn std::fmt::Display| FrameError::Encode(e.to_string());
    let (headers, ethertype, v6) = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => (
            IpHeaders::Ipv4(
                Ipv4Header::new(0, ttl, IpNumber::UDP, s.octets(), d.octets())
                    .map_err(|e| enc(&e))?,
                Default::default(),
            ),
            ethertype::IPV4,
            false,
        ),
        (IpAddr::V6(s), IpAddr::V6(d)) => (
            IpHeaders::Ipv6(
                Ipv6Header {
                    traffic_class: 0,
                    flow_label: Ipv6FlowLabel::ZERO,
                    payload_length: 0,
                    next_header: IpNumber::UDP,
                    hop_limit: ttl,
                    source: s.octets(),
                    destination: d.octets(),
                },
                Default::default(),
            ),
            ethertype::IPV6,
            true,
        ),
        (src, dst) => return Err(FrameError::MixedFamilies { src, dst }),
    };
    let family = if v6 { "IPv6" } else { "IPv4" };
    let step = PacketBuilder::ip(headers);
    let mut l3 = Vec::new();
    match transport {
        Transport::Udp { sport, dport } => step
            .udp(sport, dport)
            .write(&mut l3, payload)
            .map_err(|e| enc(&e))?,
        Transport::Tcp {
            sport,
            dport,
            flags,
            seq,
            ack,
        } => {
            let mut b = step.tcp(sport, dport, seq, 64240);
            if flags.syn {
                b = b.syn();
            }
            if flags.ack {
                b = b.ack(ack);
            }
            if flags.rst {
                b = b.rst();
            }
            if flags.fin {
                b = b.fin();
            }
            if flags.psh {
                b = b.psh();
            }
            b.write(&mut l3, payload).map_err(|e| enc(&e))?;
        }
        Transport::EchoRequest { id, seq } if v6 => step
            .icmpv6_echo_request(id, seq)
            .write(&mut l3, payload)
            .map_err(|e| enc(&e))?,
        Transport::EchoRequest { id, seq } => step
            .icmpv4_echo_request(id, seq)
            .write(&mut l3, payload)
            .map_err(|e| enc(&e))?,
        Transport::Icmpv6 { kind, code, rest } if v6 => step
            .icmpv6_raw(kind, code, rest)
            .write(&mut l3, payload)
            .map_err(|e| enc(&e))?,
        Transport::Icmpv6 { .. } => {
            return Err(FrameError::WrongFamily {
                what: "ICMPv6",
                family,
            });
        }
        Transport::Raw { protocol } => {
            l3 = raw_ip(src, dst, ttl, protocol, payload)?;
        }
    }
    let mut out = Vec::with_capacity(18 + 4 * link.vlans.len() + l3.len());
    link.write(ethertype, &mut out);
    out.extend_from_slice(&l3);
    Ok(out)
}

/// An IP header with `protocol` and the payload right after it.
fn raw_ip(
    src: IpAddr,
    dst: IpAddr,
    ttl: u8,
    protocol: u8,
    payload: &[u8],
) -> Result<Vec<u8>, FrameError> {
    let enc = |e: &dyn std::fmt::Display| FrameError::Encode(e.to_string());
    let len = u16::try_from(payload.len()).map_err(|e| enc(&e))?;
    let mut out = Vec::new();
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut h = Ipv4Header::new(len, ttl, IpNumber(protocol), s.octets(), d.octets())
                .map_err(|e| enc(&e))?;
            h.header_checksum = h.calc_header_checksum();
            h.write(&mut out).map_err(|e| enc(&e))?;
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let h = Ipv6Header {
                traffic_class: 0,
                flow_label: Ipv6FlowLabel::ZERO,
                payload_length: len,
                next_header: IpNumber(protocol),
                hop_limit: ttl,
                source: s.octets(),
                destination: d.octets(),
            };
            h.write(&mut out).map_err(|e| enc(&e))?;
        }
        (src, dst) => return Err(FrameError::MixedFamilies { src, dst }),
    }
    out.extend_from_slice(payload);
    Ok(out)
}

/// Whether an ARP packet asks or answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArpOp {
    /// Who has the target address?
    Request,
    /// The sender has the sender address.
    Reply,
}

/// An ARP packet for IPv4 over Ethernet, every field chosen by the caller
/// (the sender pair is what poisons neighbour caches).
pub fn arp(
    link: &Link,
    op: ArpOp,
    sender_mac: Mac,
    sender_ip: Ipv4Addr,
    target_mac: Mac,
    target_ip: Ipv4Addr,
) -> Result<Vec<u8>, FrameError> {
    let operation = match op {
        ArpOp::Request => ArpOperation::REQUEST,
        ArpOp::Reply => ArpOperation::REPLY,
    };
    let packet = ArpPacket::new(
        ArpHardwareId::ETHERNET,
        EtherType::IPV4,
        operation,
        &sender_mac,
        &sender_ip.octets(),
        &target_mac,
        &target_ip.octets(),
    )
    .map_err(|e| FrameError::Encode(e.to_string()))?;
    let mut out = Vec::new();
    link.write(ethertype::ARP, &mut out);
    out.extend_from_slice(&packet.to_bytes());
    Ok(out)
}

/// A frame of any ethertype with `payload` after the link layer.
pub fn ethertype(link: &Link, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(18 + payload.len());
    link.write(ethertype, &mut out);
    out.extend_from_slice(payload);
    out
}

#[cfg(test)]
mod tests {
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};

    use super::*;

    const A: Mac = [2, 0, 0, 0, 0, 1];
    const B: Mac = [2, 0, 0, 0, 0, 2];

    #[test]
    fn a_forged_udp_packet_parses_back_with_every_field() {
        let f = ip(
            &Link::new(A, B),
            "203.0.113.9".parse().unwrap(),
            "198.51.100.10".parse().unwrap(),
            64,
            Transport::Udp {
                sport: 5353,
                dport: 443,
            },
            b"payload",
        )
        .unwrap();
        let p = SlicedPacket::from_ethernet(&f).unwrap();
        let Some(NetSlice::Ipv4(v4)) = p.net else {
            panic!("not IPv4: {p:?}");
        };
        assert_eq!(v4.header().source(), [203, 0, 113, 9]);
        assert_eq!(v4.header().destination(), [198, 51, 100, 10]);
        let Some(TransportSlice::Udp(udp)) = p.transport else {
            panic!("not UDP");
        };
        assert_eq!((udp.source_port(), udp.destination_port()), (5353, 443));
        assert_eq!(udp.payload(), b"payload");
    }

    #[test]
    fn double_tags_and_tcp_flags_are_written() {
        let f = ip(
            &Link::new(A, B).tagged(0).tagged(0),
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
            64,
            Transport::Tcp {
                sport: 1,
                dport: 2,
                flags: TcpFlags::SYN_ACK,
                seq: 7,
                ack: 9,
            },
            b"",
        )
        .unwrap();
        assert_eq!(&f[12..14], &[0x81, 0x00]);
        assert_eq!(&f[16..18], &[0x81, 0x00]);
        assert_eq!(&f[20..22], &[0x86, 0xdd]);
        let p = SlicedPacket::from_ethernet(&f).unwrap();
        let Some(TransportSlice::Tcp(tcp)) = p.transport else {
            panic!("not TCP: {p:?}");
        };
        assert!(tcp.syn() && tcp.ack() && !tcp.rst());
        assert_eq!(tcp.acknowledgment_number(), 9);
    }

    #[test]
    fn mixed_families_and_icmpv6_over_v4_are_refused() {
        let l = Link::new(A, B);
        assert!(matches!(
            ip(
                &l,
                "10.0.0.1".parse().unwrap(),
                "::1".parse().unwrap(),
                1,
                Transport::Udp { sport: 1, dport: 1 },
                b""
            ),
            Err(FrameError::MixedFamilies { .. })
        ));
        assert!(matches!(
            ip(
                &l,
                "10.0.0.1".parse().unwrap(),
                "10.0.0.2".parse().unwrap(),
                1,
                Transport::Icmpv6 {
                    kind: 136,
                    code: 0,
                    rest: [0; 4]
                },
                b""
            ),
            Err(FrameError::WrongFamily { .. })
        ));
    }

    #[test]
    fn arp_carries_the_forged_sender_pair() {
        let f = arp(
            &Link::new(A, BROADCAST),
            ArpOp::Request,
            A,
            "10.0.0.1".parse().unwrap(),
            [0; 6],
            "10.0.0.9".parse().unwrap(),
        )
        .unwrap();
        assert_eq!(&f[12..14], &[0x08, 0x06]);
        let a = ArpPacket::from_slice(&f[14..]).unwrap();
        assert_eq!(a.sender_protocol_addr(), &[10, 0, 0, 1]);
        assert_eq!(a.sender_hw_addr(), &A);
    }

    #[test]
    fn raw_protocol_packets_have_a_valid_header_checksum() {
        let f = ip(
            &Link::new(A, B),
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            3,
            Transport::Raw { protocol: 253 },
            b"x",
        )
        .unwrap();
        let h = etherparse::Ipv4HeaderSlice::from_slice(&f[14..]).unwrap();
        assert_eq!(h.protocol(), IpNumber(253));
        assert_eq!(h.to_header().calc_header_checksum(), h.header_checksum());
    }
}
