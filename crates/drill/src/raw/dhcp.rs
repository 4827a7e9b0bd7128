//! DHCPv4 as an attacker (or a measuring client) speaks it: DISCOVER and
//! REQUEST with any client hardware address in any frame, replies parsed
//! back, and a whole DISCOVER → OFFER → REQUEST → ACK exchange over a
//! [`PacketSocket`] ([`obtain`]), timed.
//!
//! The client hardware address (`chaddr`) inside the message and the
//! frame's source MAC are chosen separately: pool starvation forges the
//! first, FDB theft the second.

use std::io;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use etherparse::{NetSlice, SlicedPacket, TransportSlice};

use super::frame::{self, BROADCAST, FrameError, Link, Mac, Transport};
use super::socket::{Direction, PacketSocket};

/// The server port.
pub const SERVER_PORT: u16 = 67;
/// The client port.
pub const CLIENT_PORT: u16 = 68;

const MAGIC: [u8; 4] = [99, 130, 83, 99];
const OPT_MSG_TYPE: u8 = 53;
const OPT_REQUESTED_IP: u8 = 50;
const OPT_SERVER_ID: u8 = 54;
const OPT_PARAMS: u8 = 55;
const OPT_ROUTER: u8 = 3;
const OPT_DNS: u8 = 6;
const OPT_LEASE_TIME: u8 = 51;
const OPT_END: u8 = 255;
const OPT_PAD: u8 = 0;

/// A DHCP message type (option 53).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageType {
    /// 1.
    Discover,
    /// 2.
    Offer,
    /// 3.
    Request,
    /// 4: the client found the address in use (the server then holds it
    /// back).
    Decline,
    /// 5.
    Ack,
    /// 6.
    Nak,
    /// 7.
    Release,
    /// Any other value.
    Other(u8),
}

impl MessageType {
    fn code(self) -> u8 {
        match self {
            MessageType::Discover => 1,
            MessageType::Offer => 2,
            MessageType::Request => 3,
            MessageType::Decline => 4,
            MessageType::Ack => 5,
            MessageType::Nak => 6,
            MessageType::Release => 7,
            MessageType::Other(c) => c,
        }
    }

    fn from_code(c: u8) -> Self {
        match c {
            1 => MessageType::Discover,
            2 => MessageType::Offer,
            3 => MessageType::Request,
            4 => MessageType::Decline,
            5 => MessageType::Ack,
            6 => MessageType::Nak,
            7 => MessageType::Release,
            c => MessageType::Other(c),
        }
    }
}

/// A client message: every field an attacker would choose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientMessage {
    /// DISCOVER, REQUEST, RELEASE, ...
    pub kind: MessageType,
    /// Transaction id.
    pub xid: u32,
    /// The client hardware address the server leases to.
    pub chaddr: Mac,
    /// Option 50: the address asked for (REQUEST).
    pub requested: Option<Ipv4Addr>,
    /// Option 54: the server chosen (REQUEST after an OFFER).
    pub server: Option<Ipv4Addr>,
}

impl ClientMessage {
    /// A DISCOVER from `chaddr`.
    pub fn discover(xid: u32, chaddr: Mac) -> Self {
        Self {
            kind: MessageType::Discover,
            xid,
            chaddr,
            requested: None,
            server: None,
        }
    }

    /// A REQUEST for `requested` from `server`, as after an OFFER.
    pub fn request(xid: u32, chaddr: Mac, requested: Ipv4Addr, server: Ipv4Addr) -> Self {
        Self {
            kind: MessageType::Request,
            xid,
            chaddr,
            requested: Some(requested),
            server: Some(server),
        }
    }

    /// A DECLINE of `addr`, offered by `server` (broadcast, like a
    /// DISCOVER: the client has no address).
    pub fn decline(xid: u32, chaddr: Mac, addr: Ipv4Addr, server: Ipv4Addr) -> Self {
        Self {
            kind: MessageType::Decline,
            xid,
            chaddr,
            requested: Some(addr),
            server: Some(server),
        }
    }

    /// A RELEASE of `addr`, leased from `server`.
    pub fn release(xid: u32, chaddr: Mac, addr: Ipv4Addr, server: Ipv4Addr) -> Self {
        Self {
            kind: MessageType::Release,
            xid,
            chaddr,
            requested: Some(addr),
            server: Some(server),
        }
    }

    /// The BOOTP/DHCP payload (what follows the UDP header).
    pub fn payload(&self) -> Vec<u8> {
        let mut m = vec![0u8; 236];
        m[0] = 1; // BOOTREQUEST
        m[1] = 1; // Ethernet
        m[2] = 6;
        m[4..8].copy_from_slice(&self.xid.to_be_bytes());
        if self.kind == MessageType::Release {
            // A release names the address in `ciaddr`, not in option 50.
            if let Some(ip) = self.requested {
                m[12..16].copy_from_slice(&ip.octets());
            }
        } else {
            m[10] = 0x80; // broadcast replies: the client has no address yet
        }
        m[28..34].copy_from_slice(&self.chaddr);
        m.extend_from_slice(&MAGIC);
        m.extend_from_slice(&[OPT_MSG_TYPE, 1, self.kind.code()]);
        if let (Some(ip), false) = (self.requested, self.kind == MessageType::Release) {
            m.extend_from_slice(&[OPT_REQUESTED_IP, 4]);
            m.extend_from_slice(&ip.octets());
        }
        if let Some(ip) = self.server {
            m.extend_from_slice(&[OPT_SERVER_ID, 4]);
            m.extend_from_slice(&ip.octets());
        }
        m.extend_from_slice(&[OPT_PARAMS, 3, OPT_ROUTER, OPT_DNS, OPT_LEASE_TIME]);
        m.push(OPT_END);
        // BOOTP's minimum message size.
        m.resize(m.len().max(300), OPT_PAD);
        m
    }

    /// A RELEASE as a client sends it: from its address to the server's,
    /// unicast to `server_mac`.
    pub fn release_frame(&self, src_mac: Mac, server_mac: Mac) -> Result<Vec<u8>, FrameError> {
        let (Some(addr), Some(server)) = (self.requested, self.server) else {
            return Err(FrameError::Encode(
                "a release needs the leased address and the server".to_owned(),
            ));
        };
        frame::ip(
            &Link::new(src_mac, server_mac),
            addr.into(),
            server.into(),
            64,
            Transport::Udp {
                sport: CLIENT_PORT,
                dport: SERVER_PORT,
            },
            &self.payload(),
        )
    }

    /// The whole frame: 0.0.0.0:68 → 255.255.255.255:67, broadcast MAC,
    /// from `src_mac` (which need not be `chaddr`).
    pub fn frame(&self, src_mac: Mac) -> Result<Vec<u8>, FrameError> {
        frame::ip(
            &Link::new(src_mac, BROADCAST),
            Ipv4Addr::UNSPECIFIED.into(),
            Ipv4Addr::BROADCAST.into(),
            64,
            Transport::Udp {
                sport: CLIENT_PORT,
                dport: SERVER_PORT,
            },
            &self.payload(),
        )
    }
}

/// A server reply, as parsed from a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerReply {
    /// OFFER, ACK, NAK, ...
    pub kind: MessageType,
    /// Transaction id.
    pub xid: u32,
    /// The client hardware address it answers.
    pub chaddr: Mac,
    /// The address offered or acknowledged.
    pub yiaddr: Ipv4Addr,
    /// Option 54.
    pub server: Option<Ipv4Addr>,
    /// Option 3 (first router).
    pub router: Option<Ipv4Addr>,
    /// Option 6 (DNS servers).
    pub dns: Vec<Ipv4Addr>,
    /// The IPv4 source of the reply (who answered).
    pub from: Ipv4Addr,
}

/// Parses a frame as a DHCP reply (UDP 67 → 68, BOOTREPLY); `None` for any
/// other frame.
pub fn parse_reply(frame: &[u8]) -> Option<ServerReply> {
    let p = SlicedPacket::from_ethernet(frame).ok()?;
    let Some(NetSlice::Ipv4(v4)) = &p.net else {
        return None;
    };
    let from = Ipv4Addr::from(v4.header().source());
    let Some(TransportSlice::Udp(udp)) = &p.transport else {
        return None;
    };
    if udp.source_port() != SERVER_PORT || udp.destination_port() != CLIENT_PORT {
        return None;
    }
    let m = udp.payload();
    if m.len() < 240 || m[0] != 2 || m[236..240] != MAGIC {
        return None;
    }
    let mut reply = ServerReply {
        kind: MessageType::Other(0),
        xid: u32::from_be_bytes(m[4..8].try_into().ok()?),
        chaddr: m[28..34].try_into().ok()?,
        yiaddr: Ipv4Addr::new(m[16], m[17], m[18], m[19]),
        server: None,
        router: None,
        dns: Vec::new(),
        from,
    };
    let mut i = 240;
    while i < m.len() {
        let code = m[i];
        if code == OPT_END {
            break;
        }
        if code == OPT_PAD {
            i += 1;
            continue;
        }
        let len = usize::from(*m.get(i + 1)?);
        let val = m.get(i + 2..i + 2 + len)?;
        let addrs: Vec<Ipv4Addr> = val
            .chunks_exact(4)
            .map(|c| Ipv4Addr::new(c[0], c[1], c[2], c[3]))
            .collect();
        match code {
            OPT_MSG_TYPE if len == 1 => reply.kind = MessageType::from_code(val[0]),
            OPT_SERVER_ID => reply.server = addrs.first().copied(),
            OPT_ROUTER => reply.router = addrs.first().copied(),
            OPT_DNS => reply.dns = addrs,
            _ => {}
        }
        i += 2 + len;
    }
    Some(reply)
}

/// A lease obtained by [`obtain`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The acknowledged address.
    pub addr: Ipv4Addr,
    /// The server that acknowledged it.
    pub server: Ipv4Addr,
    /// The router it handed out.
    pub router: Option<Ipv4Addr>,
    /// The DNS servers it handed out.
    pub dns: Vec<Ipv4Addr>,
    /// DISCOVER sent → ACK received.
    pub took: Duration,
}

/// Waits on `sock` for a reply of `kind` to `xid`.
pub fn await_reply(
    sock: &PacketSocket,
    xid: u32,
    kinds: &[MessageType],
    timeout: Duration,
) -> io::Result<Option<ServerReply>> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        let Some(r) = sock.recv(left)? else {
            return Ok(None);
        };
        if r.direction != Direction::Incoming {
            continue;
        }
        if let Some(reply) = parse_reply(&r.frame)
            && reply.xid == xid
            && kinds.contains(&reply.kind)
        {
            return Ok(Some(reply));
        }
    }
}

/// A whole DHCP exchange from `sock`'s interface, as client `chaddr` in
/// frames from `src_mac`: DISCOVER, the first OFFER, REQUEST, ACK. `None`
/// when no OFFER or no ACK came within `timeout` each (a NAK ends it too).
/// The interface's kernel keeps its own addresses: this only proves what
/// the server would lease.
pub fn obtain(
    sock: &PacketSocket,
    src_mac: Mac,
    chaddr: Mac,
    xid: u32,
    timeout: Duration,
) -> io::Result<Option<Lease>> {
    let to_io = |e: FrameError| io::Error::new(io::ErrorKind::InvalidInput, e.to_string());
    let start = Instant::now();
    sock.send(
        &ClientMessage::discover(xid, chaddr)
            .frame(src_mac)
            .map_err(to_io)?,
    )?;
    let Some(offer) = await_reply(sock, xid, &[MessageType::Offer], timeout)? else {
        return Ok(None);
    };
    let server = offer.server.unwrap_or(offer.from);
    sock.send(
        &ClientMessage::request(xid, chaddr, offer.yiaddr, server)
            .frame(src_mac)
            .map_err(to_io)?,
    )?;
    let Some(ack) = await_reply(sock, xid, &[MessageType::Ack, MessageType::Nak], timeout)? else {
        return Ok(None);
    };
    if ack.kind != MessageType::Ack {
        return Ok(None);
    }
    Ok(Some(Lease {
        addr: ack.yiaddr,
        server,
        router: ack.router,
        dns: ack.dns,
        took: start.elapsed(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Mac = [2, 0, 0, 0, 0, 1];
    const B: Mac = [2, 0, 0, 0, 0, 2];

    /// The reply a server would send, built from a request by flipping it.
    fn reply_to(req: &[u8], kind: u8, yiaddr: Ipv4Addr) -> Vec<u8> {
        let mut m = req[..236].to_vec();
        m[0] = 2;
        m[16..20].copy_from_slice(&yiaddr.octets());
        m.extend_from_slice(&MAGIC);
        m.extend_from_slice(&[OPT_MSG_TYPE, 1, kind, OPT_SERVER_ID, 4, 10, 0, 0, 1]);
        m.extend_from_slice(&[
            OPT_ROUTER, 4, 10, 0, 0, 1, OPT_DNS, 8, 10, 0, 0, 1, 9, 9, 9, 9,
        ]);
        m.push(OPT_END);
        frame::ip(
            &Link::new(B, A),
            Ipv4Addr::new(10, 0, 0, 1).into(),
            Ipv4Addr::BROADCAST.into(),
            64,
            Transport::Udp {
                sport: SERVER_PORT,
                dport: CLIENT_PORT,
            },
            &m,
        )
        .unwrap()
    }

    #[test]
    fn a_forged_discover_carries_its_own_chaddr_and_parses_as_a_reply() {
        let msg = ClientMessage::discover(0x1234_5678, B);
        let f = msg.frame(A).unwrap();
        assert_eq!(&f[6..12], &A, "frame source");
        let p = msg.payload();
        assert_eq!(&p[28..34], &B, "chaddr");
        assert!(p.len() >= 300);
        let r = parse_reply(&reply_to(&p, 2, Ipv4Addr::new(10, 0, 0, 7))).unwrap();
        assert_eq!(r.kind, MessageType::Offer);
        assert_eq!(r.xid, 0x1234_5678);
        assert_eq!(r.chaddr, B);
        assert_eq!(r.yiaddr, Ipv4Addr::new(10, 0, 0, 7));
        assert_eq!(r.server, Some(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(r.router, Some(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(
            r.dns,
            vec![Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(9, 9, 9, 9)]
        );
        // A request is not a reply.
        assert_eq!(parse_reply(&f), None);
    }

    #[test]
    fn a_request_names_the_address_and_server() {
        let p =
            ClientMessage::request(7, A, Ipv4Addr::new(10, 0, 0, 9), Ipv4Addr::new(10, 0, 0, 1))
                .payload();
        let opts = &p[240..];
        assert_eq!(&opts[..3], &[OPT_MSG_TYPE, 1, 3]);
        assert_eq!(&opts[3..9], &[OPT_REQUESTED_IP, 4, 10, 0, 0, 9]);
        assert_eq!(&opts[9..15], &[OPT_SERVER_ID, 4, 10, 0, 0, 1]);
    }
}
