//! DHCP against a sibling's lease, and DHCP replies as a channel between
//! siblings (docs/security.md, L2 classes 6 and 7), from one lab sandbox
//! with the real gateway:
//! - a DISCOVER or DECLINE naming the sibling's MAC as `chaddr` (a bound
//!   port may name only its own; a quarantined port no bound one), and the
//!   same cut into IPv4 fragments so that the first ends before `chaddr`
//!   and the second has no transport header to check; a DECLINE the
//!   gateway takes disables the sibling's reservation for ten minutes;
//! - DNS queries cut into fragments (IPv4 and IPv6), which no per-port
//!   rate or shape check can read;
//! - the gateway's broadcast OFFER to one client, which echoes its
//!   transaction id: does a sibling port see it?

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::time::Duration;

use super::l2::Attacker;
use super::{AttackError, Outcome};
use crate::lab::Observed;
use crate::lab::topology::SandboxNs;
use crate::raw::dhcp::{self, ClientMessage, Lease, MessageType};
use crate::raw::frame::{self, BROADCAST, Link, Mac, Transport};
use crate::raw::{PacketSocket, fragment};
use corral_gateway::wire;

/// Where the first fragment of a DHCP message ends: after the UDP header
/// and the first 24 bytes of BOOTP, 12 bytes before `chaddr` ends.
pub const DHCP_CUT: usize = 32;
/// Where the first fragment of a DNS query ends: after the UDP header.
pub const DNS_CUT: usize = 8;

/// The name the DNS rows look up (the lab's upstream answers it).
pub const QUERY_NAME: &str = "fragment.corral.test";

/// Which way a message leaves the attacker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One datagram from 0.0.0.0, as a client without an address sends.
    Whole,
    /// Two IPv4 fragments from the attacker's own bound address (a
    /// fragment from 0.0.0.0 past the first has no port a rule could
    /// accept as DHCP; from a bound address it passes as that address's).
    Fragments,
}

/// `msg` from `a` as a frame (or its fragments), broadcast.
fn frames(
    a: &Attacker<'_>,
    msg: &ClientMessage,
    shape: Shape,
) -> Result<Vec<Vec<u8>>, AttackError> {
    let src = match shape {
        Shape::Whole => Ipv4Addr::UNSPECIFIED,
        Shape::Fragments => a.sb.v4,
    };
    let f = frame::ip(
        &Link::new(a.mac(), BROADCAST),
        src.into(),
        Ipv4Addr::BROADCAST.into(),
        64,
        Transport::Udp {
            sport: dhcp::CLIENT_PORT,
            dport: dhcp::SERVER_PORT,
        },
        &msg.payload(),
    )?;
    Ok(match shape {
        Shape::Whole => vec![f],
        Shape::Fragments => fragment::split(&f, DHCP_CUT)?.to_vec(),
    })
}

fn send_all(a: &Attacker<'_>, frames: &[Vec<u8>]) -> Result<(), AttackError> {
    for f in frames {
        a.sock.send(f)?;
    }
    Ok(())
}

/// A DISCOVER from `a` naming `chaddr`: landed when the gateway offers
/// an address for it.
pub fn offer_for(
    a: &Attacker<'_>,
    chaddr: Mac,
    xid: u32,
    shape: Shape,
    timeout: Duration,
) -> Result<Outcome, AttackError> {
    send_all(a, &frames(a, &ClientMessage::discover(xid, chaddr), shape)?)?;
    Ok(
        match dhcp::await_reply(&a.sock, xid, &[MessageType::Offer], timeout)? {
            Some(o) => Outcome::landed(format!("offered {} for {:02x?}", o.yiaddr, chaddr)),
            None => Outcome::held(format!("no offer for {chaddr:02x?}")),
        },
    )
}

/// A DECLINE from `a` of `victim`'s address, naming `victim`'s MAC.
pub fn decline(a: &Attacker<'_>, victim: &SandboxNs, shape: Shape) -> Result<(), AttackError> {
    let msg = ClientMessage::decline(
        0xdec1_0000 ^ u32::from(victim.v4),
        victim.mac.octets(),
        victim.v4,
        victim.gateway_v4,
    );
    send_all(a, &frames(a, &msg, shape)?)
}

/// `sb`'s own lease: DISCOVER → OFFER → REQUEST → ACK as its own MAC.
pub fn lease(sb: &SandboxNs, xid: u32, timeout: Duration) -> Result<Option<Lease>, AttackError> {
    let v = Attacker::new(sb)?;
    Ok(dhcp::obtain(&v.sock, v.mac(), v.mac(), xid, timeout)?)
}

/// `a` DECLINEs `victim`'s address; landed when the victim then gets no
/// lease of its own address.
pub fn declined(
    a: &Attacker<'_>,
    victim: &SandboxNs,
    shape: Shape,
    timeout: Duration,
) -> Result<Outcome, AttackError> {
    decline(a, victim, shape)?;
    // dnsmasq handles the DECLINE before the victim's DISCOVER only if it
    // read it first; a pause keeps the order.
    std::thread::sleep(Duration::from_millis(200));
    Ok(
        match lease(victim, 0x1ea5_0000 ^ u32::from(victim.v4), timeout)? {
            Some(l) if l.addr == victim.v4 => {
                Outcome::held(format!("the victim still leases {}", l.addr))
            }
            other => Outcome::landed(format!("the victim's lease after the DECLINE: {other:?}")),
        },
    )
}

/// `a` asks for its own lease; landed when `sibling` sees the reply
/// (matched by transaction id) on its port. Also returns whether `a`
/// got its offer (the reply exists).
pub fn broadcast_echo(
    a: &Attacker<'_>,
    sibling: &SandboxNs,
    xid: u32,
    timeout: Duration,
) -> Result<(bool, Outcome), AttackError> {
    // Opened first: a frame arriving before the socket exists is not seen.
    let watch = PacketSocket::open(&sibling.ns, "eth0")?;
    send_all(
        a,
        &frames(a, &ClientMessage::discover(xid, a.mac()), Shape::Whole)?,
    )?;
    let own = dhcp::await_reply(&a.sock, xid, &[MessageType::Offer], timeout)?.is_some();
    let seen = dhcp::await_reply(&watch, xid, &[MessageType::Offer], timeout / 2)?;
    let outcome = match seen {
        Some(r) => Outcome::landed(format!(
            "{} saw the offer of {} to {:02x?} (xid {xid:#x})",
            sibling.name, r.yiaddr, r.chaddr
        )),
        None => Outcome::held(format!("{} saw no offer with xid {xid:#x}", sibling.name)),
    };
    Ok((own, outcome))
}

/// A DNS query from `sb`'s bound address to `server` port 53, whole or cut
/// after the UDP header into two fragments (IPv4 or IPv6 by `server`):
/// whether an answer (any) reached a socket of `sb`.
pub fn dns_answered(
    sb: &SandboxNs,
    server: IpAddr,
    server_mac: Mac,
    fragmented: bool,
    timeout: Duration,
) -> Result<bool, AttackError> {
    let src: IpAddr = match server {
        IpAddr::V4(_) => sb.v4.into(),
        IpAddr::V6(_) => sb
            .v6
            .ok_or_else(|| AttackError::Setup(format!("{} has no IPv6 address", sb.name)))?
            .into(),
    };
    // A socket of the sandbox's own takes the answer (and keeps the
    // kernel from answering it with a port unreachable).
    let sock = sb
        .ns
        .run(move || UdpSocket::bind(SocketAddr::new(src, 0)))??;
    sock.set_read_timeout(Some(timeout))?;
    let sport = sock.local_addr()?.port();
    let id = (sport ^ 0x5a5a).max(1);
    let query = wire::encode_query(id, QUERY_NAME, wire::TYPE_A)
        .map_err(|e| AttackError::Setup(e.to_string()))?;
    let f = frame::ip(
        &Link::new(sb.mac.octets(), server_mac),
        src,
        server,
        64,
        Transport::Udp { sport, dport: 53 },
        &query,
    )?;
    let tx = PacketSocket::open(&sb.ns, "eth0")?;
    let frames = if fragmented {
        fragment::split(&f, DNS_CUT)?.to_vec()
    } else {
        vec![f]
    };
    for f in &frames {
        tx.send(f)?;
    }
    let mut buf = [0u8; 4096];
    loop {
        match sock.recv_from(&mut buf) {
            Ok((n, from))
                if from.ip() == server && buf[..n].get(..2) == Some(&id.to_be_bytes()) =>
            {
                return Ok(true);
            }
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn observed(r: Result<Outcome, AttackError>) -> Observed {
    match r {
        Ok(o) if o.landed => {
            tracing::warn!("DHCP attack landed: {}", o.detail);
            Observed::Connected
        }
        Ok(o) => Observed::Rejected(o.detail),
        Err(e) => Observed::Error(e.to_string()),
    }
}

fn victim_lease(b: &SandboxNs, xid: u32, timeout: Duration) -> Observed {
    match lease(b, xid, timeout) {
        Ok(Some(l)) if l.addr == b.v4 => Observed::Connected,
        Ok(other) => Observed::Error(format!("the victim's lease: {other:?}")),
        Err(e) => Observed::Error(e.to_string()),
    }
}

/// The drill's rows for L2 classes 6 and 7 (`DHCP class 6: …`), from the first two
/// sandboxes of a profile with a gateway (the capacity rows' pair), with
/// corral's rules in force and the real gateway. Each control is the
/// gateway serving what the attack aims at, before the attack: the
/// victim's lease, the attacker's own unfragmented offer and lookups.
pub fn rows(
    lab: &crate::lab::Lab,
    gateways: &crate::lab::LabGateways,
    timeout: Duration,
) -> Vec<crate::DrillRow> {
    let Some((a, b)) = super::gateway::pair(lab) else {
        return Vec::new();
    };
    gateways
        .upstream
        .set(QUERY_NAME, &[IpAddr::V4(Ipv4Addr::new(198, 18, 1, 2))], 60);
    let (a, b) = (&lab.topo.sandboxes[a], &lab.topo.sandboxes[b]);
    let att = match Attacker::new(a) {
        Ok(att) => att,
        Err(e) => {
            return vec![crate::dns::setup_error(format!(
                "DHCP attacks: cannot open {}'s port: {e}",
                a.name
            ))];
        }
    };
    let row = |class: u8, what: &str, to: String, control: Observed, observed: Observed| {
        crate::DrillRow {
            probe: format!("DHCP class {class}: {what}"),
            from: a.name.clone(),
            to,
            expected: crate::Expect::Block,
            verdict: crate::judge(crate::Expect::Block, &control, &observed),
            observed,
            control,
            ms: 0,
            packet: None,
        }
    };
    let gw = format!("gateway {} (victim {})", b.gateway_v4, b.name);
    let own_offer = |xid| match offer_for(&att, att.mac(), xid, Shape::Whole, timeout) {
        Ok(o) if o.landed => Observed::Connected,
        Ok(o) => Observed::Error(format!("the attacker's own DISCOVER: {}", o.detail)),
        Err(e) => Observed::Error(e.to_string()),
    };
    let mut rows = vec![
        row(
            6,
            "a DISCOVER cut into fragments gets no offer",
            gw.clone(),
            own_offer(0xf7a9_0001),
            observed(offer_for(
                &att,
                att.mac(),
                0xf7a9_0002,
                Shape::Fragments,
                timeout,
            )),
        ),
        row(
            6,
            "a DECLINE of a sibling's address naming its MAC leaves it its lease",
            gw.clone(),
            victim_lease(b, 0xf7a9_0003, timeout),
            observed(declined(&att, b, Shape::Whole, timeout)),
        ),
        row(
            6,
            "the same DECLINE cut into fragments leaves it its lease",
            gw.clone(),
            victim_lease(b, 0xf7a9_0004, timeout),
            observed(declined(&att, b, Shape::Fragments, timeout)),
        ),
    ];
    for server in [
        Some(IpAddr::from(a.gateway_v4)),
        a.gateway_v6.map(IpAddr::from),
    ]
    .into_iter()
    .flatten()
    {
        let mac = match super::gateway_mac(&lab.topo, a) {
            Ok(m) => m,
            Err(e) => {
                rows.push(row(
                    6,
                    "a fragmented DNS query",
                    server.to_string(),
                    Observed::Error(e.to_string()),
                    Observed::Error("not run".into()),
                ));
                continue;
            }
        };
        let ask = |fragmented| dns_answered(a, server, mac, fragmented, timeout);
        let control = match ask(false) {
            Ok(true) => Observed::Connected,
            Ok(false) => Observed::Error("the unfragmented query was not answered".to_owned()),
            Err(e) => Observed::Error(e.to_string()),
        };
        let observed = match ask(true) {
            Ok(true) => Observed::Connected,
            Ok(false) => Observed::Rejected("no answer to the fragments".to_owned()),
            Err(e) => Observed::Error(e.to_string()),
        };
        rows.push(row(
            6,
            "a DNS query cut into fragments is not answered",
            format!("gateway {server} port 53"),
            control,
            observed,
        ));
    }
    let (own, echo) = match broadcast_echo(&att, b, 0xf7a9_0005, timeout) {
        Ok((own, o)) => (own, Ok(o)),
        Err(e) => (false, Err(e)),
    };
    rows.push(row(
        7,
        "a sibling port sees no broadcast OFFER to another client",
        format!("{}'s port", b.name),
        if own {
            Observed::Connected
        } else {
            Observed::Error("the attacker got no offer of its own".to_owned())
        },
        observed(echo),
    ));
    rows
}
