//! The nfnetlink_log wire format: the configuration messages a reader
//! sends, the packet messages it receives, and the IP headers inside.
//! Numbers are from `linux/netfilter/nfnetlink_log.h`; attribute values
//! are big-endian.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, SystemTime};

/// `NFNL_SUBSYS_ULOG`.
const SUBSYS_ULOG: u16 = 4;
/// `NFULNL_MSG_PACKET`.
const MSG_PACKET: u16 = 0;
/// `NFULNL_MSG_CONFIG`.
const MSG_CONFIG: u16 = 1;

/// `NFULA_CFG_*`.
const CFG_CMD: u16 = 1;
const CFG_MODE: u16 = 2;
const CFG_NLBUFSIZ: u16 = 3;
const CFG_TIMEOUT: u16 = 4;
const CFG_QTHRESH: u16 = 5;
const CFG_FLAGS: u16 = 6;
/// `NFULNL_CFG_CMD_BIND` (closing the socket unbinds).
pub(super) const CMD_BIND: u8 = 1;
/// `NFULNL_COPY_PACKET`.
const COPY_PACKET: u8 = 2;
/// `NFULNL_CFG_F_SEQ`: number the instance's messages, so a gap shows
/// messages the socket lost.
const F_SEQ: u16 = 1;

/// `NFULA_*` of a packet message.
const A_PACKET_HDR: u16 = 1;
const A_TIMESTAMP: u16 = 3;
const A_IFINDEX_INDEV: u16 = 4;
const A_HWADDR: u16 = 8;
const A_PAYLOAD: u16 = 9;
const A_PREFIX: u16 = 10;
const A_SEQ: u16 = 12;
/// Attribute type bits that are flags, not the type.
const NLA_TYPE_MASK: u16 = 0x3fff;

const NLMSG_HDRLEN: usize = 16;
const NFGEN_HDRLEN: usize = 4;

fn push_attr(buf: &mut Vec<u8>, ty: u16, value: &[u8]) {
    let len = 4 + value.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(value);
    buf.resize(buf.len().next_multiple_of(4), 0);
}

/// A configuration message for `group` carrying `attrs`.
fn config(seq: u32, group: u16, attrs: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut buf = vec![0u8; NLMSG_HDRLEN];
    // nfgenmsg: family AF_UNSPEC, version 0, res_id = group (big-endian).
    buf.extend_from_slice(&[0, 0]);
    buf.extend_from_slice(&group.to_be_bytes());
    for (ty, v) in attrs {
        push_attr(&mut buf, *ty, v);
    }
    let len = buf.len() as u32;
    buf[0..4].copy_from_slice(&len.to_ne_bytes());
    buf[4..6].copy_from_slice(&((SUBSYS_ULOG << 8) | MSG_CONFIG).to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;
    buf[6..8].copy_from_slice(&flags.to_ne_bytes());
    buf[8..12].copy_from_slice(&seq.to_ne_bytes());
    buf
}

/// Bind the socket to `group`.
pub(super) fn command(seq: u32, group: u16, cmd: u8) -> Vec<u8> {
    config(seq, group, &[(CFG_CMD, vec![cmd])])
}

/// Copy `range` bytes of each packet, deliver each message at once
/// (threshold 1, flush timeout 10 ms), number messages, use a `bufsize`
/// kernel buffer per batch.
pub(super) fn mode(seq: u32, group: u16, range: u32, bufsize: u32) -> Vec<u8> {
    let mut mode = range.to_be_bytes().to_vec();
    mode.extend_from_slice(&[COPY_PACKET, 0]);
    config(
        seq,
        group,
        &[
            (CFG_MODE, mode),
            (CFG_NLBUFSIZ, bufsize.to_be_bytes().to_vec()),
            (CFG_TIMEOUT, 1u32.to_be_bytes().to_vec()),
            (CFG_QTHRESH, 1u32.to_be_bytes().to_vec()),
            (CFG_FLAGS, F_SEQ.to_be_bytes().to_vec()),
        ],
    )
}

/// One netlink message of a datagram.
#[derive(Debug)]
pub(super) enum Message<'a> {
    /// A logged packet's attributes.
    Packet(Packet<'a>),
    /// An acknowledgement (`errno` 0) or error for request `seq`.
    Ack { seq: u32, errno: i32 },
    /// Anything else (ignored).
    Other,
}

/// The attributes of one packet message corral reads.
#[derive(Debug, Default)]
pub(super) struct Packet<'a> {
    pub prefix: Option<&'a [u8]>,
    pub payload: Option<&'a [u8]>,
    pub hw_protocol: Option<u16>,
    pub timestamp: Option<SystemTime>,
    pub indev: Option<u32>,
    pub hwaddr: Option<[u8; 6]>,
    pub seq: Option<u32>,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be32(v: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(v.get(..4)?.try_into().ok()?))
}

fn be64(v: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(v.get(..8)?.try_into().ok()?))
}

/// Split a datagram into its messages (a truncated tail is dropped).
pub(super) fn messages(mut data: &[u8]) -> Vec<Message<'_>> {
    let mut out = Vec::new();
    while let (Some(len), Some(ty)) = (u32_at(data, 0), u16_at(data, 4)) {
        let len = len as usize;
        if len < NLMSG_HDRLEN || len > data.len() {
            break;
        }
        let body = &data[NLMSG_HDRLEN..len];
        out.push(match ty {
            t if t == libc::NLMSG_ERROR as u16 => Message::Ack {
                seq: body
                    .get(4 + 8..4 + 12)
                    .and_then(|s| u32_at(s, 0))
                    .unwrap_or(0),
                errno: u32_at(body, 0).map(|e| -(e as i32)).unwrap_or(0),
            },
            t if t == (SUBSYS_ULOG << 8) | MSG_PACKET => {
                Message::Packet(packet(body.get(NFGEN_HDRLEN..).unwrap_or_default()))
            }
            _ => Message::Other,
        });
        data = data.get(len.next_multiple_of(4)..).unwrap_or_default();
    }
    out
}

fn packet(mut attrs: &[u8]) -> Packet<'_> {
    let mut p = Packet::default();
    while let (Some(len), Some(ty)) = (u16_at(attrs, 0), u16_at(attrs, 2)) {
        let len = usize::from(len);
        if len < 4 || len > attrs.len() {
            break;
        }
        let v = &attrs[4..len];
        match ty & NLA_TYPE_MASK {
            A_PACKET_HDR => p.hw_protocol = v.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]])),
            A_TIMESTAMP => {
                p.timestamp = match (be64(v), v.get(8..).and_then(be64)) {
                    (Some(s), Some(us)) => SystemTime::UNIX_EPOCH
                        .checked_add(Duration::from_secs(s) + Duration::from_micros(us)),
                    _ => None,
                }
            }
            A_IFINDEX_INDEV => p.indev = be32(v),
            A_HWADDR => {
                let n = v.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]]));
                if n == Some(6) {
                    p.hwaddr = v.get(4..10).and_then(|m| m.try_into().ok());
                }
            }
            A_PAYLOAD => p.payload = Some(v),
            A_PREFIX => p.prefix = Some(v.split(|b| *b == 0).next().unwrap_or_default()),
            A_SEQ => p.seq = be32(v),
            _ => {}
        }
        attrs = attrs.get(len.next_multiple_of(4)..).unwrap_or_default();
    }
    p
}

/// What a packet's headers say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Headers {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: u8,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
}

/// Protocols whose first four bytes are the source and destination port.
fn has_ports(proto: u8) -> bool {
    matches!(proto, 6 | 17 | 132 | 136)
}

fn ports(l4: &[u8], proto: u8) -> (Option<u16>, Option<u16>) {
    match l4.get(..4) {
        Some(b) if has_ports(proto) => (
            Some(u16::from_be_bytes([b[0], b[1]])),
            Some(u16::from_be_bytes([b[2], b[3]])),
        ),
        _ => (None, None),
    }
}

/// Parse an IPv4 or IPv6 header (and the ports after it) from the
/// start of `p`, which may be cut short by the snap length.
pub(super) fn headers(p: &[u8]) -> Option<Headers> {
    match p.first()? >> 4 {
        4 => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            let b: [u8; 20] = p.get(..20)?.try_into().ok()?;
            let proto = b[9];
            let frag_offset = u16::from_be_bytes([b[6], b[7]]) & 0x1fff;
            let (sport, dport) = if frag_offset == 0 {
                ports(p.get(ihl..).unwrap_or_default(), proto)
            } else {
                (None, None)
            };
            Some(Headers {
                src: IpAddr::V4(Ipv4Addr::new(b[12], b[13], b[14], b[15])),
                dst: IpAddr::V4(Ipv4Addr::new(b[16], b[17], b[18], b[19])),
                protocol: proto,
                sport,
                dport,
            })
        }
        6 => {
            let b = p.get(..40)?;
            let src: [u8; 16] = b[8..24].try_into().ok()?;
            let dst: [u8; 16] = b[24..40].try_into().ok()?;
            let mut next = b[6];
            let mut at = 40;
            let mut first_fragment = true;
            // Extension headers: hop-by-hop, routing, fragment, AH,
            // destination options.
            for _ in 0..8 {
                let len = match next {
                    0 | 43 | 60 => (usize::from(*p.get(at + 1)?) + 1) * 8,
                    44 => {
                        let off = u16::from_be_bytes([*p.get(at + 2)?, *p.get(at + 3)?]) >> 3;
                        first_fragment = off == 0;
                        8
                    }
                    51 => (usize::from(*p.get(at + 1)?) + 2) * 4,
                    _ => break,
                };
                next = *p.get(at)?;
                at += len;
            }
            let (sport, dport) = if first_fragment {
                ports(p.get(at..).unwrap_or_default(), next)
            } else {
                (None, None)
            };
            Some(Headers {
                src: IpAddr::V6(Ipv6Addr::from(src)),
                dst: IpAddr::V6(Ipv6Addr::from(dst)),
                protocol: next,
                sport,
                dport,
            })
        }
        _ => None,
    }
}

/// The protocol's name as the audit record writes it.
pub(super) fn protocol_name(p: u8) -> String {
    match p {
        1 => "icmp".to_owned(),
        6 => "tcp".to_owned(),
        17 => "udp".to_owned(),
        58 => "icmpv6".to_owned(),
        132 => "sctp".to_owned(),
        136 => "udplite".to_owned(),
        n => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4_udp() -> Vec<u8> {
        let mut p = vec![
            0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 90, 0, 5, 192, 0, 2, 1,
        ];
        p.extend_from_slice(&[0x9c, 0x40, 0, 53, 0, 8, 0, 0]);
        p
    }

    #[test]
    fn ipv4_ports_and_fragments() {
        let h = headers(&ipv4_udp()).unwrap();
        assert_eq!(h.src, "10.90.0.5".parse::<IpAddr>().unwrap());
        assert_eq!(h.dst, "192.0.2.1".parse::<IpAddr>().unwrap());
        assert_eq!((h.protocol, h.sport, h.dport), (17, Some(40000), Some(53)));
        let mut frag = ipv4_udp();
        frag[7] = 3;
        assert_eq!(headers(&frag).unwrap().dport, None);
        assert_eq!(headers(&ipv4_udp()[..10]), None);
    }

    #[test]
    fn ipv6_skips_extension_headers() {
        let mut p = vec![0x60, 0, 0, 0, 0, 16, 0, 64];
        p.extend_from_slice(&"fd00::5".parse::<Ipv6Addr>().unwrap().octets());
        p.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        // Destination options (8 bytes) then TCP.
        p.extend_from_slice(&[6, 0, 1, 4, 0, 0, 0, 0]);
        p.extend_from_slice(&[0x04, 0xd2, 0x01, 0xbb]);
        p[6] = 60;
        let h = headers(&p).unwrap();
        assert_eq!((h.protocol, h.sport, h.dport), (6, Some(1234), Some(443)));
        assert_eq!(protocol_name(h.protocol), "tcp");
    }

    #[test]
    fn packet_messages_decode() {
        let mut attrs = Vec::new();
        push_attr(&mut attrs, A_PACKET_HDR, &[0x08, 0x00, 2, 0]);
        push_attr(&mut attrs, A_PREFIX, b"dev-out/unlisted:drop\0");
        push_attr(&mut attrs, A_PAYLOAD, &ipv4_udp());
        push_attr(&mut attrs, A_SEQ, &7u32.to_be_bytes());
        push_attr(
            &mut attrs,
            A_HWADDR,
            &[0, 6, 0, 0, 2, 0xc0, 10, 90, 0, 5, 0, 0],
        );
        let mut msg = vec![0u8; NLMSG_HDRLEN];
        msg.extend_from_slice(&[2, 0, 0x1c, 0x8b]);
        msg.extend_from_slice(&attrs);
        let len = msg.len() as u32;
        msg[0..4].copy_from_slice(&len.to_ne_bytes());
        msg[4..6].copy_from_slice(&(SUBSYS_ULOG << 8).to_ne_bytes());
        let two = [msg.clone(), msg].concat();
        let ms = messages(&two);
        assert_eq!(ms.len(), 2);
        let Message::Packet(p) = &ms[1] else {
            panic!("{ms:?}")
        };
        assert_eq!(p.prefix, Some(&b"dev-out/unlisted:drop"[..]));
        assert_eq!(p.seq, Some(7));
        assert_eq!(p.hw_protocol, Some(0x0800));
        assert_eq!(p.hwaddr, Some([2, 0xc0, 10, 90, 0, 5]));
        assert_eq!(headers(p.payload.unwrap()).unwrap().dport, Some(53));
    }
}
