//! The frames the layer-2 attacks send: ARP, tagged and link-local UDP,
//! broadcasts, rogue router adverts and DHCP offers.

use super::{Attacker, frame_reaches, mac_of};
use crate::attack::{AttackError, Outcome};
use crate::lab::topology::SandboxNs;
use crate::raw::frame::{self, ArpOp, BROADCAST, Link, Mac, Transport};
use crate::raw::{Marker, dhcp, nd};
use std::net::Ipv4Addr;

/// `aa:bb:cc:dd:ee:ff`.
pub fn fmt_mac(m: Mac) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// How a poisoning ARP packet is shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArpStyle {
    /// A broadcast request whose sender and target are the claimed address
    /// (a gratuitous ARP: it overrides at once).
    Gratuitous,
    /// A broadcast request *from* the claimed address for an unrelated
    /// target: only the sender pair is forged.
    ForgedSender,
    /// A gratuitous reply (sender and target the claimed address).
    GratuitousReply,
}

pub(super) fn arp_frame(
    a: &Attacker<'_>,
    claimed: Ipv4Addr,
    style: ArpStyle,
) -> Result<Vec<u8>, AttackError> {
    let me = a.mac();
    let link = Link::new(me, BROADCAST);
    // A gratuitous reply names the sender's MAC as the target's too, or
    // the kernel does not treat it as gratuitous.
    let (op, target_mac, target) = match style {
        ArpStyle::Gratuitous => (ArpOp::Request, [0; 6], claimed),
        ArpStyle::ForgedSender => (ArpOp::Request, [0; 6], Ipv4Addr::new(198, 51, 100, 99)),
        ArpStyle::GratuitousReply => (ArpOp::Reply, me, claimed),
    };
    Ok(frame::arp(&link, op, me, claimed, target_mac, target)?)
}

/// An IPv4 UDP frame to the victim's MAC and address, under `vlans`
/// 802.1Q tags (none, one, or 802.1Q-in-802.1Q).
pub fn tagged_udp(
    a: &Attacker<'_>,
    victim: &SandboxNs,
    vlans: &[u16],
) -> Result<Outcome, AttackError> {
    let dst = mac_of(&victim.ns, "eth0")?;
    let what = format!("UDP under 802.1Q tags {vlans:?}");
    frame_reaches(a, victim, &what, |m| {
        let mut link = Link::new(a.mac(), dst);
        for v in vlans {
            link = link.tagged(*v);
        }
        Ok(frame::ip(
            &link,
            a.sb.v4.into(),
            victim.v4.into(),
            64,
            Transport::Udp { sport: 9, dport: 9 },
            m.bytes(),
        )?)
    })
}

/// UDP from the attacker's IPv6 link-local address to the victim's.
pub fn link_local_udp(a: &Attacker<'_>, victim: &SandboxNs) -> Result<Outcome, AttackError> {
    let dst = mac_of(&victim.ns, "eth0")?;
    frame_reaches(a, victim, "IPv6 link-local UDP", |m| {
        Ok(frame::ip(
            &Link::new(a.mac(), dst),
            nd::link_local(a.mac()).into(),
            nd::link_local(dst).into(),
            64,
            Transport::Udp { sport: 9, dport: 9 },
            m.bytes(),
        )?)
    })
}

/// A broadcast frame of an experimental ethertype (0x88b5).
pub fn broadcast_frame(a: &Attacker<'_>, victim: &SandboxNs) -> Result<Outcome, AttackError> {
    frame_reaches(a, victim, "broadcast frame (ethertype 0x88b5)", |m| {
        Ok(frame::ethertype(
            &Link::new(a.mac(), BROADCAST),
            0x88b5,
            m.bytes(),
        ))
    })
}

/// A rogue router advertisement: the attacker as default router, to all
/// nodes (no prefix: a victim that took one would source its traffic from
/// an address nobody bound). The marker rides in an option type receivers
/// skip.
pub fn rogue_router_advert(a: &Attacker<'_>, victim: &SandboxNs) -> Result<Outcome, AttackError> {
    frame_reaches(a, victim, "router advertisement naming the attacker", |m| {
        let opts = marker_option(m);
        Ok(nd::router_advert(
            &Link::new(a.mac(), nd::multicast_mac(nd::ALL_NODES)),
            nd::link_local(a.mac()),
            nd::ALL_NODES,
            1800,
            &opts,
        )?)
    })
}

/// An ND option of an unassigned type carrying the marker (24 bytes).
pub(super) fn marker_option(m: &Marker) -> [u8; 24] {
    let mut o = [0u8; 24];
    o[0] = 253;
    o[1] = 3;
    o[2..18].copy_from_slice(m.bytes());
    o
}

/// A rogue DHCP OFFER, broadcast, naming the attacker as router and DNS.
pub fn rogue_dhcp_offer(a: &Attacker<'_>, victim: &SandboxNs) -> Result<Outcome, AttackError> {
    frame_reaches(a, victim, "DHCP offer naming the attacker", |m| {
        let mut payload = dhcp::ClientMessage::discover(0x0bad_f00d, [2, 0, 0, 0, 0, 9]).payload();
        payload[0] = 2; // BOOTREPLY
        payload[16..20].copy_from_slice(&victim.v4.octets());
        // The marker goes into the server host name field (sname).
        payload[44..60].copy_from_slice(m.bytes());
        Ok(frame::ip(
            &Link::new(a.mac(), BROADCAST),
            a.sb.v4.into(),
            Ipv4Addr::BROADCAST.into(),
            64,
            Transport::Udp {
                sport: dhcp::SERVER_PORT,
                dport: dhcp::CLIENT_PORT,
            },
            &payload,
        )?)
    })
}
