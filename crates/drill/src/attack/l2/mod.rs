//! Layer-2 attacks from one lab sandbox: on a sibling (frames that must not
//! reach it, ARP and neighbour-advertisement poisoning of its caches) and on
//! the host (its neighbour table, the bridge's forwarding database, ARP
//! answers for addresses that are not the bridge's).
//!
//! Each attack primes what it poisons first (the victim resolves the
//! address, so there is an entry to overwrite), sends its frames a few
//! times, and then reads the victim's state back over rtnetlink or waits
//! for its marker on the victim's interface.

mod frames;
use frames::arp_frame;
pub use frames::{
    ArpStyle, broadcast_frame, fmt_mac, link_local_udp, rogue_dhcp_offer, rogue_router_advert,
    tagged_udp,
};
mod neigh;
pub use neigh::{arp_poison, host_answers_arp_for, ifindex, mac_of, na_poison, prime, steal_fdb};

use super::{AttackError, Outcome};
use crate::lab::topology::SandboxNs;
use crate::raw::frame::Mac;
use crate::raw::{Capture, Marker, PacketSocket};
use std::net::Ipv6Addr;
use std::time::Duration;

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
