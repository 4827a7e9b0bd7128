//! One sandbox filling the host's conntrack table (docs/security.md,
//! L3/L4 class 12): the table is one for the host and every sandbox.
//!
//! - bare ACKs: TCP segments with only ACK set, each from a fresh source
//!   port. With the kernel's loose pickup each becomes an entry (answered
//!   by anything but a reset, an assured one with the 5-day established
//!   timeout). Sent to [`SILENT_V4`] / [`SILENT_V6`], where nothing answers:
//!   a reset as the only answer makes conntrack drop the entry at once,
//!   which would hide the pickup. Landed when any of them is in the table.
//! - a flood of new flows: UDP datagrams, each from a fresh source port,
//!   more than the profile's per-source limit. Landed when the table holds
//!   more of them than that limit.
//!
//! Entries are counted over ctnetlink in the host namespace, only those of
//! this launch (its destination port is fresh), so leftovers of an earlier
//! launch (a control) never count.
//!
//! The drill's rows ([`rows`]) cannot take the drill's usual control (the
//! lab before any rule): a namespace with no rule that needs conntrack
//! tracks nothing, so neither shot could land there. Their control is
//! corral's own plan without class 12's rules ([`without_flow_limits`]),
//! which keeps conntrack and masquerade on: there the bare ACKs become
//! entries and the flood goes past the limit. They run after the rest of
//! the enforced half, each shot once under the control ruleset and once
//! under the full plan.

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use corral_egress::conntrack::Conntrack;
use corral_egress::plan::{HostPlan, Match};
use corral_sandbox_core::{EgressMode, ProfileSet};

use super::l3::{Attack, Class, Shot as L3Shot};
use super::{gateway_mac, mac_of, udp_frame};
use crate::lab::topology::{PUBLIC_V4, SandboxNs, Topology};
use crate::lab::{Lab, Observed};
use crate::raw::frame::{self, Link, TcpFlags, Transport};
use crate::raw::{Marker, PacketSocket};
use crate::report::{DrillRow, Expect, judge};

/// An address behind the uplink nobody holds (TEST-NET-3): the lab's
/// internet side routes it nowhere and nothing answers.
pub const SILENT_V4: std::net::Ipv4Addr = std::net::Ipv4Addr::new(203, 0, 113, 99);
/// IPv6 twin of [`SILENT_V4`] (documentation prefix).
pub const SILENT_V6: std::net::Ipv6Addr =
    std::net::Ipv6Addr::new(0x2001, 0xdb8, 0xf00d, 0, 0, 0, 0, 0x99);

/// What the attack sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shot {
    /// `count` bare ACKs to `to`.
    BareAcks {
        /// The destination.
        to: SocketAddr,
        /// Segments, each from its own source port.
        count: u16,
    },
    /// `count` new UDP flows to `to`'s address; landed when more than
    /// `limit` are tracked.
    Flood {
        /// The destination address (the port is fresh per launch).
        to: IpAddr,
        /// Datagrams, each from its own source port.
        count: u16,
        /// The per-source limit the profile states.
        limit: u32,
    },
}

impl Shot {
    /// For reports.
    pub fn target(&self) -> String {
        match self {
            Shot::BareAcks { to, count } => format!("{count} bare tcp acks to {to}"),
            Shot::Flood { to, count, limit } => {
                format!("{count} new udp flows to {to} (limit {limit})")
            }
        }
    }
}

/// A port in `base..base + 20,000` no earlier launch is likely to have
/// used (the last bytes of a fresh marker).
fn fresh_port(base: u16) -> u16 {
    let m = Marker::fresh();
    let b = m.bytes();
    base + u16::from_be_bytes([b[14], b[15]]) % 20_000
}

/// Tracked flows from `src` to destination port `dport`, in the host
/// namespace.
pub fn tracked(topo: &Topology, src: IpAddr, dport: u16) -> std::io::Result<usize> {
    let entries = topo
        .host
        .run(|| Conntrack::open().and_then(|mut c| c.list()))?
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(entries
        .iter()
        .filter(|e| e.flow.src == src && e.flow.dport == Some(dport))
        .count())
}

fn source(sb: &SandboxNs, to: IpAddr) -> std::io::Result<IpAddr> {
    match to {
        IpAddr::V4(_) => Ok(IpAddr::V4(sb.v4)),
        IpAddr::V6(_) => sb
            .v6
            .map(IpAddr::V6)
            .ok_or_else(|| std::io::Error::other("the sandbox has no IPv6 address")),
    }
}

/// Runs `shot` from `sb`: how many of its packets became tracked flows,
/// and whether that is more than the attack allows (see the module docs).
pub fn launch(topo: &Topology, sb: &SandboxNs, shot: &Shot) -> std::io::Result<(usize, bool)> {
    let tx = PacketSocket::open(&sb.ns, "eth0")?;
    let (me, gw) = (mac_of(&sb.ns, "eth0")?, gateway_mac(topo, sb)?);
    match shot {
        Shot::BareAcks { to, count } => {
            let src = source(sb, to.ip())?;
            // The service listens on one port, so each launch takes a
            // fresh range of source ports (a tuple an earlier launch left
            // in the table would be established, not new) and counts what
            // it added.
            let first = fresh_port(1_024);
            let before = tracked(topo, src, to.port())?;
            for i in 0..*count {
                let f = frame::ip(
                    &Link::new(me, gw),
                    src,
                    to.ip(),
                    64,
                    Transport::Tcp {
                        sport: first.wrapping_add(i),
                        dport: to.port(),
                        flags: TcpFlags::ACK,
                        seq: 0x1000,
                        ack: 0x2001,
                    },
                    &[],
                )
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
                tx.send(&f)?;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
            let n = tracked(topo, src, to.port())?.saturating_sub(before);
            Ok((n, n > 0))
        }
        Shot::Flood { to, count, limit } => {
            let src = source(sb, *to)?;
            let dport = fresh_port(30_000);
            let marker = Marker::fresh();
            for i in 0..*count {
                let f = udp_frame(
                    me,
                    gw,
                    SocketAddr::new(src, 20_000u16.wrapping_add(i)),
                    SocketAddr::new(*to, dport),
                    &marker,
                )?;
                tx.send(&f)?;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
            let n = tracked(topo, src, dport)?;
            Ok((n, n > *limit as usize))
        }
    }
}

/// `plan` without class 12's rules: no loose-pickup drop in the guards,
/// no per-source count or rate meter in the `-out` chains. Conntrack and
/// masquerade stay, so the control of a class-12 attack can land.
pub fn without_flow_limits(plan: &HostPlan) -> HostPlan {
    let mut p = plan.clone();
    for c in &mut p.inet.chains {
        c.rules.retain(|r| {
            !r.matches.iter().any(|m| match m {
                Match::TcpNotSyn => true,
                Match::Meter { set, .. } => set.contains("flows"),
                _ => false,
            })
        });
    }
    p
}

/// What one launch saw: landed, or held with the number it got tracked.
fn outcome(r: std::io::Result<(usize, bool)>) -> Observed {
    match r {
        Ok((_, true)) => Observed::Connected,
        Ok((n, false)) => Observed::Rejected(format!("{n} tracked")),
        Err(e) => Observed::Error(e.to_string()),
    }
}

/// The drill's class-12 rows (see the module docs): every shot of
/// [`derive`] under corral's plan without class 12's rules (the control),
/// then under the full plan, which is in force again when this returns
/// (or the rows say it could not be put back).
pub(crate) fn rows(lab: &Lab) -> Vec<DrillRow> {
    let attacks = derive(&lab.profiles, &lab.topo);
    if attacks.is_empty() {
        return Vec::new();
    }
    let run = |a: &Attack| match &a.shot {
        L3Shot::Conntrack(c) => outcome(launch(&lab.topo, &lab.topo.sandboxes[a.from], c)),
        _ => Observed::Error("not a conntrack attack".to_owned()),
    };
    let control: Vec<Observed> = match lab.load(&without_flow_limits(&lab.plan)) {
        Ok(()) => attacks.iter().map(run).collect(),
        Err(e) => vec![Observed::Error(format!("control ruleset: {e}")); attacks.len()],
    };
    let enforced: Vec<(Observed, u64)> = match lab.load(&lab.plan) {
        Ok(()) => attacks
            .iter()
            .map(|a| {
                let start = Instant::now();
                let o = run(a);
                (
                    o,
                    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
                )
            })
            .collect(),
        Err(e) => vec![(Observed::Error(format!("putting the plan back: {e}")), 0); attacks.len()],
    };
    attacks
        .iter()
        .zip(control)
        .zip(enforced)
        .map(|((a, c), (e, ms))| DrillRow {
            probe: format!("{}: {}", a.class.label(), a.what),
            from: lab.topo.sandboxes[a.from].name.clone(),
            to: a.target(),
            expected: Expect::Block,
            verdict: judge(Expect::Block, &c, &e),
            observed: e,
            control: c,
            ms,
            packet: None,
        })
        .collect()
}

/// The drill's rows: from an `internet` sandbox, bare ACKs, and more new
/// flows than its profile's per-source limits.
pub fn derive(profiles: &ProfileSet, topo: &Topology) -> Vec<Attack> {
    use Shot as C;
    let Some(p) = profiles.iter().find(|p| p.mode == EgressMode::Internet) else {
        return Vec::new();
    };
    let Some(from) = topo
        .sandboxes
        .iter()
        .position(|s| s.profile == p.name.as_str())
    else {
        return Vec::new();
    };
    let limit = p.flows.max_per_source;
    let rate = p.flows.new_per_second;
    let row = |what: &str, shot| Attack {
        class: Class::ConntrackFill,
        what: what.to_owned(),
        from,
        shot: L3Shot::Conntrack(shot),
    };
    vec![
        row(
            "bare TCP ACKs (loose pickup)",
            C::BareAcks {
                to: SocketAddr::new(IpAddr::V4(SILENT_V4), 80),
                count: 200,
            },
        ),
        row(
            &format!("more new flows than the per-source limits ({limit} tracked, {rate}/s)"),
            C::Flood {
                to: IpAddr::V4(PUBLIC_V4[1]),
                count: u16::try_from(limit.saturating_add(200)).unwrap_or(u16::MAX),
                limit,
            },
        ),
    ]
}
