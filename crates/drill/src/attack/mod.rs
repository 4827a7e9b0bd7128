//! The attacker: crafted packets sent from a simulated sandbox, as an
//! agent with root could send them, each judged by whether it got where it
//! must not (a frame seen on the far side of the host, a datagram received
//! by a host socket).
//!
//! Every attack runs twice, like every probe: first as a control without
//! corral's rules (it must get through, or the row proves nothing and is
//! "not run"), then with them. [`l3`] holds the attacks on corral's
//! L3/L4 rules, one or more per class of hole (see docs/security.md);
//! [`l2`] the frames between sandboxes and against the host's neighbour
//! tables and bridge forwarding database; [`gateway`] the attacks on the
//! gateway services' capacity (DHCP pool starvation, TCP/53 connection
//! exhaustion, a DNS flood); [`dhcp`] DHCP against a sibling's lease
//! (quarantine, fragments) and the gateway's replies as a channel
//! between siblings; [`learned_flood`] a hostile authority's answer
//! against the learned sets' bound. The helpers here are what any attack needs;
//! the L2 and gateway attacks return an [`Outcome`].

pub mod conntrack_fill;
pub mod dhcp;
pub mod gateway;
pub mod l2;
pub mod l3;
pub mod learned_flood;
pub mod related;

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use corral_egress::netns::Netns;

use crate::lab::Observed;
use crate::lab::topology::{SandboxNs, Topology};
use crate::raw::frame::{self, Link, Mac, Transport};
use crate::raw::{Capture, Marker, PacketSocket};

/// The MAC address of `ifname` inside `ns`.
pub fn mac_of(ns: &Netns, ifname: &str) -> io::Result<Mac> {
    Ok(PacketSocket::open(ns, ifname)?.mac())
}

/// The MAC a sandbox sends routed traffic to: its bridge's (the gateway).
pub fn gateway_mac(topo: &Topology, sb: &SandboxNs) -> io::Result<Mac> {
    mac_of(&topo.host, &sb.bridge)
}

/// A UDP datagram from `src` to `dst` carrying `marker`, in a frame from
/// the sandbox's own MAC to `to_mac`.
pub fn udp_frame(
    from_mac: Mac,
    to_mac: Mac,
    src: SocketAddr,
    dst: SocketAddr,
    marker: &Marker,
) -> io::Result<Vec<u8>> {
    frame::ip(
        &Link::new(from_mac, to_mac),
        src.ip(),
        dst.ip(),
        64,
        Transport::Udp {
            sport: src.port(),
            dport: dst.port(),
        },
        marker.bytes(),
    )
    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))
}

/// Sends `frames` out of the sandbox's `eth0`, in order, a few times (a
/// fresh port may drop the very first frames), and reports whether a
/// frame carrying `marker` arrived at `at` within `timeout`.
pub fn lands(
    from: &SandboxNs,
    frames: &[Vec<u8>],
    at: &Capture,
    marker: &Marker,
    timeout: Duration,
) -> io::Result<bool> {
    let tx = PacketSocket::open(&from.ns, "eth0")?;
    let tries = 3u32;
    for _ in 0..tries {
        for f in frames {
            tx.send(f)?;
        }
        if at.saw(marker, timeout / tries)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// What an attack saw, as a probe row reads it: `Connected` when the
/// crafted packets got through, `TimedOut` when nothing arrived.
pub fn observed(r: io::Result<bool>) -> Observed {
    match r {
        Ok(true) => Observed::Connected,
        Ok(false) => Observed::TimedOut,
        Err(e) => Observed::Error(e.to_string()),
    }
}

/// A UDP socket inside a namespace that reports whether a datagram
/// carrying a marker reached it (delivery to a local socket, i.e. after
/// the host's input hooks).
#[derive(Debug)]
pub struct UdpSink {
    sock: std::net::UdpSocket,
}

impl UdpSink {
    /// Binds `addr` inside `ns`.
    pub fn bind(ns: &Netns, addr: SocketAddr) -> io::Result<Self> {
        let sock = ns.run(move || std::net::UdpSocket::bind(addr))??;
        Ok(Self { sock })
    }

    /// The bound address.
    pub fn addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Whether a datagram carrying `marker` arrives within `timeout`.
    pub fn saw(&self, marker: &Marker, timeout: Duration) -> io::Result<bool> {
        let deadline = std::time::Instant::now() + timeout;
        let mut buf = [0u8; 2048];
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            self.sock.set_read_timeout(Some(left))?;
            match self.sock.recv_from(&mut buf) {
                Ok((n, _)) if marker.found_in(&buf[..n]) => return Ok(true),
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(false);
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// An address of the same family as `like`, from `v4` or `v6`.
pub(crate) fn same_family(like: IpAddr, v4: IpAddr, v6: IpAddr) -> IpAddr {
    if like.is_ipv4() { v4 } else { v6 }
}

/// The classes of hole of docs/security.md ("L3/L4"): number, title, and
/// where a class is proved when the drill has no row for it (it needs
/// names the profiles do not list, or changes the host behind the drill).
pub const CLASSES: [(u8, &str, &str); 12] = [
    (1, "forged sources", "egress tests/attack_l3.rs"),
    (2, "conntrack reply direction", "egress tests/attack_l3.rs"),
    (3, "gateway as a reflector", "egress tests/attack_l3.rs"),
    (
        4,
        "one learned set per class",
        "gateway tests/gateway_netns.rs class4 (needs an allowlisted name)",
    ),
    (
        5,
        "rebinding, reserved ranges",
        "gateway tests/gateway_netns.rs class5, egress tests/enforce_allowlist.rs (needs an allowlisted name)",
    ),
    (
        6,
        "the host's own networks",
        "egress tests/enforce_hostnet.rs",
    ),
    (7, "port off its bridge", "egress tests/attack_l3.rs"),
    (
        8,
        "the Multipass control bridge",
        "egress tests/enforce_multipass.rs",
    ),
    (9, "revocation", "egress tests/enforce_revocation.rs"),
    (10, "verify's blind spots", "egress tests/verify_tamper.rs"),
    (
        11,
        "ICMP errors related to another's flow",
        "egress tests/attack_related.rs",
    ),
    (
        12,
        "one sandbox filling the conntrack table",
        "egress tests/attack_conntrack.rs",
    ),
];

/// One class in a drill's summary.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClassLine {
    /// Class number.
    pub class: u8,
    /// Its title.
    pub title: &'static str,
    /// Drill rows attacking it.
    pub rows: usize,
    /// Where it is proved when `rows` is 0.
    pub proved_by: Option<&'static str>,
}

/// Every class with the number of rows of `report` attacking it.
pub fn class_lines(report: &crate::DrillReport) -> Vec<ClassLine> {
    CLASSES
        .iter()
        .map(|(n, title, by)| {
            let prefix = format!("attack {n} (");
            let rows = report
                .rows
                .iter()
                .filter(|r| r.probe.starts_with(&prefix))
                .count();
            ClassLine {
                class: *n,
                title,
                rows,
                proved_by: (rows == 0).then_some(*by),
            }
        })
        .collect()
}

/// What one attack did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The attack had its effect (a frame reached its victim, a cache was
    /// poisoned, a lease was taken, a lookup was starved).
    pub landed: bool,
    /// What was seen, for reports.
    pub detail: String,
}

impl Outcome {
    /// The attack landed.
    pub fn landed(detail: impl Into<String>) -> Self {
        Self {
            landed: true,
            detail: detail.into(),
        }
    }

    /// The attack had no effect.
    pub fn held(detail: impl Into<String>) -> Self {
        Self {
            landed: false,
            detail: detail.into(),
        }
    }
}

impl Outcome {
    /// The outcome as a drill observation: a landed attack "reached" its
    /// victim; a held one is blocked, with what was seen.
    pub fn observed(result: &Result<Outcome, AttackError>) -> crate::lab::Observed {
        use crate::lab::Observed;
        match result {
            Ok(o) if o.landed => Observed::Connected,
            Ok(o) => Observed::Rejected(o.detail.clone()),
            Err(e) => Observed::Error(e.to_string()),
        }
    }
}

/// An attack could not be carried out (a socket, a namespace, a build).
#[derive(Debug, thiserror::Error)]
pub enum AttackError {
    /// I/O in a namespace failed.
    #[error("attack: {0}")]
    Io(#[from] std::io::Error),
    /// A frame could not be built.
    #[error("attack: {0}")]
    Frame(#[from] crate::raw::frame::FrameError),
    /// A link lookup failed.
    #[error("attack: {0}")]
    Link(#[from] corral_egress::link::LinkError),
    /// The lab lacks what the attack needs.
    #[error("attack: {0}")]
    Setup(String),
}
