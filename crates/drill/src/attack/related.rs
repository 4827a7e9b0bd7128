//! ICMP errors as a cross-profile channel (docs/security.md, L3/L4 class
//! 11): conntrack calls an ICMP error *related* to whatever flow its quoted
//! header names, whoever sends it. Three shapes, IPv4 and IPv6:
//!
//! - out: the attacker sends "port unreachable" to a victim flow's peer,
//!   quoting the peer's packet to the victim, with a marker after the
//!   quoted header: does it reach the internet side (masqueraded as the
//!   victim's flow)?
//! - in: the attacker sends "port unreachable" to the victim, quoting the
//!   victim's masqueraded packet to its peer: is it delivered to the
//!   victim's interface?
//! - host: the attacker sends "fragmentation needed" / "packet too big"
//!   to the host quoting one of the host's own flows: does the host's path
//!   MTU towards that destination fall?
//!
//! The victim's flow is a real datagram from a socket in the victim's
//! namespace; the host's flow one from a socket in the host namespace to a
//! fresh address behind the uplink (the lab's internet side; nothing
//! leaves the machine), so each launch starts from an uncached path.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use corral_sandbox_core::{EgressMode, ProfileSet};

use super::l3::{Attack, Class, Shot as L3Shot};
use super::{gateway_mac, lands, mac_of, observed};
use crate::lab::Observed;
use crate::lab::topology::{
    HOST_UPLINK_V4, HOST_UPLINK_V6, PUBLIC_V4, PUBLIC_V6, SandboxNs, Topology,
};
use crate::raw::frame::{self, Link, Transport};
use crate::raw::{Capture, Marker};

/// The victim's source port of an "out" shot's flow (masquerade keeps a
/// free port as it is, so the victim's flow leaves the host from this
/// port too).
pub const VICTIM_PORT_OUT: u16 = 40_555;

/// The same for an "in" shot: its own port, because the drill launches
/// the two shots at the same time from one victim, and each binds its
/// port (one shared port made the second bind fail, now and then).
pub const VICTIM_PORT_IN: u16 = 40_556;

/// The path MTU the forged "fragmentation needed" asks for (the kernel's
/// `min_pmtu`), and IPv6's minimum for "packet too big".
const FORGED_MTU_V4: u16 = 552;
const FORGED_MTU_V6: u32 = 1280;

/// What the attack sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shot {
    /// An error to the victim flow's peer (see the module docs).
    Out {
        /// Index of the victim sandbox.
        victim: usize,
        /// The victim flow's peer, behind the uplink.
        peer: SocketAddr,
    },
    /// An error to the victim itself.
    In {
        /// Index of the victim sandbox.
        victim: usize,
        /// The victim flow's peer, behind the uplink.
        peer: SocketAddr,
    },
    /// "Fragmentation needed" / "packet too big" for a host flow.
    HostMtu {
        /// IPv6 instead of IPv4.
        v6: bool,
    },
}

impl Shot {
    /// For reports.
    pub fn target(&self) -> String {
        match self {
            Shot::Out { peer, .. } => format!("icmp error to {peer} quoting another flow"),
            Shot::In { peer, .. } => format!("icmp error to a sandbox quoting its flow to {peer}"),
            Shot::HostMtu { v6: false } => "icmp frag-needed to the host".to_owned(),
            Shot::HostMtu { v6: true } => "icmpv6 packet-too-big to the host".to_owned(),
        }
    }
}

/// The IP packet (no link header) of a UDP datagram `src → dst` carrying
/// `payload`: what an error quotes.
fn quoted(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> std::io::Result<Vec<u8>> {
    let link = Link::new([0; 6], [0; 6]);
    let f = frame::ip(
        &link,
        src.ip(),
        dst.ip(),
        64,
        Transport::Udp {
            sport: src.port(),
            dport: dst.port(),
        },
        payload,
    )
    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    Ok(f[14..].to_vec())
}

fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An ICMP(v6) error frame from the attacker `src` to `dst`: type and
/// code, the 4 bytes after the checksum (unused, or the MTU), and the
/// quoted packet.
pub fn error_frame(
    from_mac: [u8; 6],
    to_mac: [u8; 6],
    src: IpAddr,
    dst: IpAddr,
    (kind, code, rest): (u8, u8, [u8; 4]),
    quoted: &[u8],
) -> std::io::Result<Vec<u8>> {
    let link = Link::new(from_mac, to_mac);
    let enc = |e: frame::FrameError| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
    if src.is_ipv6() {
        return frame::ip(
            &link,
            src,
            dst,
            64,
            Transport::Icmpv6 { kind, code, rest },
            quoted,
        )
        .map_err(enc);
    }
    let mut icmp = vec![kind, code, 0, 0];
    icmp.extend_from_slice(&rest);
    icmp.extend_from_slice(quoted);
    let sum = checksum(&icmp).to_be_bytes();
    icmp[2..4].copy_from_slice(&sum);
    frame::ip(&link, src, dst, 64, Transport::Raw { protocol: 1 }, &icmp).map_err(enc)
}

/// Port unreachable: ICMP 3/3, ICMPv6 1/4.
fn port_unreachable(v6: bool) -> (u8, u8, [u8; 4]) {
    if v6 { (1, 4, [0; 4]) } else { (3, 3, [0; 4]) }
}

fn addr_of(sb: &SandboxNs, v6: bool) -> Option<IpAddr> {
    if v6 {
        sb.v6.map(IpAddr::V6)
    } else {
        Some(IpAddr::V4(sb.v4))
    }
}

/// A datagram from the victim's own socket to `peer`: the flow an error
/// will quote.
fn victim_flow(victim: &SandboxNs, peer: SocketAddr, port: u16) -> std::io::Result<SocketAddr> {
    let src = addr_of(victim, peer.is_ipv6())
        .ok_or_else(|| std::io::Error::other("the victim has no address of this family"))?;
    let local = SocketAddr::new(src, port);
    victim.ns.run(move || -> std::io::Result<()> {
        let s = UdpSocket::bind(local)?;
        s.send_to(b"victim flow", peer)?;
        Ok(())
    })??;
    Ok(local)
}

/// Runs `shot` from `attacker`; `Connected` when the error got where it
/// must not (see the module docs).
pub fn launch(topo: &Topology, attacker: &SandboxNs, shot: &Shot, timeout: Duration) -> Observed {
    observed(match shot {
        Shot::Out { victim, peer } => {
            error_out(topo, attacker, &topo.sandboxes[*victim], *peer, timeout)
        }
        Shot::In { victim, peer } => {
            error_in(topo, attacker, &topo.sandboxes[*victim], *peer, timeout)
        }
        Shot::HostMtu { v6 } => host_mtu(topo, attacker, *v6, timeout),
    })
}

/// `from` sends port unreachable to `peer`, quoting `peer`'s datagram to
/// `victim`'s flow, the marker after the quoted header. `from` may be the
/// victim itself (its own error for its own flow).
pub fn error_out(
    topo: &Topology,
    from: &SandboxNs,
    victim: &SandboxNs,
    peer: SocketAddr,
    timeout: Duration,
) -> std::io::Result<bool> {
    let v6 = peer.is_ipv6();
    let src = addr_of(from, v6)
        .ok_or_else(|| std::io::Error::other("the attacker has no address of this family"))?;
    let local = victim_flow(victim, peer, VICTIM_PORT_OUT)?;
    let marker = Marker::fresh();
    let q = quoted(peer, local, marker.bytes())?;
    let cap = Capture::open(&topo.internet, "eth0")?;
    let f = error_frame(
        mac_of(&from.ns, "eth0")?,
        gateway_mac(topo, from)?,
        src,
        peer.ip(),
        port_unreachable(v6),
        &q,
    )?;
    lands(from, &[f], &cap, &marker, timeout)
}

/// `from` sends port unreachable towards `victim`, quoting the victim's
/// datagram to `peer` as a router past the host would see it: addressed to
/// the quoted packet's source (conntrack relates an error only when its
/// destination is the quoted packet's source), so to the host's uplink
/// address, which undoing the masquerade turns into the victim's. A second
/// copy quotes the datagram as it left the victim, for a host that does
/// not masquerade (the drill's control, without corral's rules).
pub fn error_in(
    topo: &Topology,
    from: &SandboxNs,
    victim: &SandboxNs,
    peer: SocketAddr,
    timeout: Duration,
) -> std::io::Result<bool> {
    let v6 = peer.is_ipv6();
    let src = addr_of(from, v6)
        .ok_or_else(|| std::io::Error::other("the attacker has no address of this family"))?;
    let local = victim_flow(victim, peer, VICTIM_PORT_IN)?;
    let uplink = if v6 {
        IpAddr::V6(HOST_UPLINK_V6)
    } else {
        IpAddr::V4(HOST_UPLINK_V4)
    };
    let marker = Marker::fresh();
    let cap = Capture::open(&victim.ns, "eth0")?;
    let (me, gw) = (mac_of(&from.ns, "eth0")?, gateway_mac(topo, from)?);
    let mut frames = Vec::new();
    for seen_as in [SocketAddr::new(uplink, local.port()), local] {
        let q = quoted(seen_as, peer, marker.bytes())?;
        frames.push(error_frame(
            me,
            gw,
            src,
            seen_as.ip(),
            port_unreachable(v6),
            &q,
        )?);
    }
    lands(from, &frames, &cap, &marker, timeout)
}

/// A destination behind the uplink no launch has used: the last bytes
/// of a fresh marker in TEST-NET-3 / the documentation prefix.
fn fresh_destination(v6: bool) -> IpAddr {
    let m = Marker::fresh();
    let b = m.bytes();
    if v6 {
        let tail = u16::from_be_bytes([b[14], b[15]]);
        IpAddr::V6(Ipv6Addr::new(
            0x2001,
            0xdb8,
            0xf00d,
            0,
            0,
            0,
            u16::from(b[13]),
            tail,
        ))
    } else {
        IpAddr::V4(Ipv4Addr::new(203, 0, 113, 1 + b[15] % 254))
    }
}

/// The host's path MTU towards `dst`, as a fresh connected socket in the
/// host namespace reads it (`IP_MTU` / `IPV6_MTU`: the route with any
/// cached exception).
pub fn host_path_mtu(topo: &Topology, dst: SocketAddr) -> std::io::Result<u32> {
    topo.host.run(move || -> std::io::Result<u32> {
        let any: SocketAddr = if dst.is_ipv6() {
            "[::]:0".parse().map_err(std::io::Error::other)?
        } else {
            "0.0.0.0:0".parse().map_err(std::io::Error::other)?
        };
        let s = UdpSocket::bind(any)?;
        s.connect(dst)?;
        path_mtu(&s, dst.is_ipv6())
    })?
}

fn path_mtu(s: &UdpSocket, v6: bool) -> std::io::Result<u32> {
    use std::os::fd::AsRawFd;
    let (level, name) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU)
    } else {
        (libc::IPPROTO_IP, libc::IP_MTU)
    };
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a c_int out-parameter of the size passed, on an open socket.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            level,
            name,
            (&raw mut v).cast(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    u32::try_from(v).map_err(std::io::Error::other)
}

/// `from` sends "fragmentation needed" (IPv4) or "packet too big" (IPv6)
/// to the host quoting the host's own datagram to a fresh destination;
/// landed when the host's path MTU towards it falls.
pub fn host_mtu(
    topo: &Topology,
    from: &SandboxNs,
    v6: bool,
    timeout: Duration,
) -> std::io::Result<bool> {
    let src = addr_of(from, v6)
        .ok_or_else(|| std::io::Error::other("the attacker has no address of this family"))?;
    let dst = SocketAddr::new(fresh_destination(v6), 4500);
    let before = host_path_mtu(topo, dst)?;
    // The host's flow: its socket stays open, as the kernel updates the
    // path MTU only for an error a local socket would take.
    let (sock, local) = topo.host.run(move || -> std::io::Result<_> {
        let any: SocketAddr = if v6 {
            SocketAddr::new(IpAddr::V6(HOST_UPLINK_V6), 0)
        } else {
            SocketAddr::new(IpAddr::V4(HOST_UPLINK_V4), 0)
        };
        let s = UdpSocket::bind(any)?;
        s.connect(dst)?;
        s.send(&[0u8; 1000])?;
        let local = s.local_addr()?;
        Ok((s, local))
    })??;
    let q = quoted(local, dst, &[0u8; 64])?;
    let kind = if v6 {
        (2, 0, FORGED_MTU_V6.to_be_bytes())
    } else {
        let mut rest = [0u8; 4];
        rest[2..].copy_from_slice(&FORGED_MTU_V4.to_be_bytes());
        (3, 4, rest)
    };
    let f = error_frame(
        mac_of(&from.ns, "eth0")?,
        gateway_mac(topo, from)?,
        src,
        local.ip(),
        kind,
        &q,
    )?;
    let tx = crate::raw::PacketSocket::open(&from.ns, "eth0")?;
    let deadline = Instant::now() + timeout;
    let mut lowered = false;
    while !lowered && Instant::now() < deadline {
        tx.send(&f)?;
        std::thread::sleep(Duration::from_millis(50));
        lowered = host_path_mtu(topo, dst)? < before;
    }
    drop(sock);
    Ok(lowered)
}

/// The drill's rows: from a sandbox of the first profile that is not `internet`, errors
/// quoting an `internet` sandbox's flow (out to its peer, in to the
/// sandbox, each family both have); to the host, a "frag needed" for one
/// of its own flows from any sandbox of the family.
pub fn derive(profiles: &ProfileSet, topo: &Topology) -> Vec<Attack> {
    use Shot as R;
    let first = |pred: &dyn Fn(&corral_sandbox_core::Profile) -> bool| {
        let p = profiles.iter().find(|p| pred(p))?;
        topo.sandboxes
            .iter()
            .position(|s| s.profile == p.name.as_str())
    };
    let mut out = Vec::new();
    let mut push = |what: String, from: usize, shot| {
        out.push(Attack {
            class: Class::ForeignRelated,
            what,
            from,
            shot: L3Shot::Related(shot),
        });
    };
    let victim = first(&|p| p.mode == EgressMode::Internet);
    let attacker = first(&|p| p.mode != EgressMode::Internet);
    if let (Some(v), Some(a)) = (victim, attacker) {
        for v6 in [false, true] {
            let fam = if v6 { "IPv6" } else { "IPv4" };
            if v6 && (topo.sandboxes[v].v6.is_none() || topo.sandboxes[a].v6.is_none()) {
                continue;
            }
            let peer = if v6 {
                SocketAddr::new(IpAddr::V6(PUBLIC_V6[0]), 4500)
            } else {
                SocketAddr::new(IpAddr::V4(PUBLIC_V4[1]), 4500)
            };
            push(
                format!("{fam} error to the peer of another profile's flow"),
                a,
                R::Out { victim: v, peer },
            );
            push(
                format!("{fam} error injected into another profile's sandbox"),
                a,
                R::In { victim: v, peer },
            );
        }
    }
    if let Some(a) = attacker.or(victim) {
        push(
            "IPv4 frag needed for a host flow".to_owned(),
            a,
            R::HostMtu { v6: false },
        );
    }
    if let Some(a) = topo.sandboxes.iter().position(|s| s.v6.is_some()) {
        push(
            "IPv6 packet too big for a host flow".to_owned(),
            a,
            R::HostMtu { v6: true },
        );
    }
    out
}

/// `plan` with the profile chains' established/related handling as it was
/// before class 11: one `ct state established,related` accept per profile
/// chain (in the chain's direction), no ownership check, no
/// foreign-related drop — the control of a class-11 attack, and the
/// benches' "before" setup.
pub fn without_own_flow(plan: &corral_egress::plan::HostPlan) -> corral_egress::plan::HostPlan {
    use corral_egress::plan::{CtDir, Match, RulePlan, Verdict};
    let mut p = plan.clone();
    for c in p.inet.chains.iter_mut().filter(|c| c.profile.is_some()) {
        let dir = if c.name.ends_with("-out") {
            Some(CtDir::Original)
        } else if c.name.ends_with("-in") {
            Some(CtDir::Reply)
        } else if c.name.ends_with("-host") {
            None
        } else {
            continue;
        };
        c.rules.retain(|r| {
            !r.matches
                .iter()
                .any(|m| matches!(m, Match::CtOrigSaddrIn(_) | Match::CtRelated))
        });
        let mut m = vec![Match::CtEstablishedRelated];
        m.extend(dir.map(Match::CtDirection));
        c.rules.insert(0, RulePlan::counted(m, Verdict::Accept));
    }
    p
}
