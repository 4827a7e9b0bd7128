//! The gateway under a sibling's flood: how long a sandbox waits for its
//! DHCP lease and for DNS answers while another sandbox on the same bridge
//! floods the gateway with forged DHCP requests (a new client hardware
//! address each) and with queries for random names under a domain whose
//! authority never answers — against the same measurements without the
//! flood, interleaved round by round in one run.
//!
//! Lease time: DISCOVER sent → ACK received, over a raw socket in the
//! victim's namespace (its reserved address), 8 leases 400 ms apart (the
//! victim's own port may send 5 DHCP messages a second). DNS: one query for a fresh
//! name each time (so dnsmasq forwards it; the test upstream answers at
//! once), UDP to the gateway. Needs root; run with
//! `cargo bench -p corral-drill --bench gateway_flood` (`FLOOD=dhcp` or
//! `FLOOD=dns` floods with one kind only; the default is both at once).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use corral_drill::attack::gateway::{DnsFlood, forged_mac};
use corral_drill::lab::{Lab, LabGateways};
use corral_drill::raw::PacketSocket;
use corral_drill::raw::dhcp::{ClientMessage, obtain};
use corral_egress::resolve::Resolution;
use corral_gateway::probe::query;
use corral_gateway::wire::TYPE_A;
use corral_sandbox_core::config::Config;

const ROUNDS: usize = 5;
/// Leases per measurement, spaced so the victim's own port stays under
/// its DHCP rate limit (5 messages a second; a lease is two).
const LEASES: usize = 8;
const LEASE_GAP: Duration = Duration::from_millis(400);
const LOOKUPS: usize = 100;
const T: Duration = Duration::from_secs(2);
/// How long the flood runs before the victim asks anything.
const FILL: Duration = Duration::from_secs(10);

/// A DHCP flood from `sock`: DISCOVERs from forged clients, as fast as the
/// socket sends, until dropped.
struct DhcpFlood {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl DhcpFlood {
    fn start(sock: PacketSocket) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let (s2, n2) = (Arc::clone(&stop), Arc::clone(&sent));
        let thread = std::thread::spawn(move || {
            let mut n: u32 = 0;
            while !s2.load(Ordering::Relaxed) {
                n = n.wrapping_add(1);
                let chaddr = forged_mac(n);
                if let Ok(f) = ClientMessage::discover(n, chaddr).frame(sock.mac())
                    && sock.send(&f).is_ok()
                {
                    n2.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        Self {
            stop,
            sent,
            thread: Some(thread),
        }
    }
}

impl Drop for DhcpFlood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

struct Sample {
    lease: Duration,
    leases_missed: usize,
    dns: Duration,
    dns_missed: usize,
    flood_sent: u64,
}

fn measure(lab: &Lab, gateways: &LabGateways, round: usize, flood: bool) -> Sample {
    let mut sbs = lab.topo.sandboxes_of("internet");
    let (a, b) = match (sbs.next(), sbs.next()) {
        (Some(a), Some(b)) => (a, b),
        _ => panic!("the lab has no two internet sandboxes"),
    };
    let dns = SocketAddr::new(b.gateway_v4.into(), 53);
    let which = std::env::var("FLOOD").unwrap_or_else(|_| "both".to_owned());
    let floods = flood.then(|| {
        let sock = PacketSocket::open(&a.ns, "eth0").unwrap_or_else(|e| panic!("{e}"));
        let dhcp = (which != "dns").then(|| DhcpFlood::start(sock));
        let a_dns = SocketAddr::new(a.gateway_v4.into(), 53);
        let dns = (which != "dhcp").then(|| {
            DnsFlood::start(&a.ns, a_dns, "silent.bench.test", true)
                .unwrap_or_else(|e| panic!("{e}"))
        });
        // Let the flood reach its steady state first: dnsmasq frees an
        // unanswered query's slot after 10 s.
        std::thread::sleep(FILL);
        (dhcp, dns)
    });
    let sock = PacketSocket::open(&b.ns, "eth0").unwrap_or_else(|e| panic!("{e}"));
    let mut leases = Vec::new();
    let mut leases_missed = 0;
    for i in 0..LEASES {
        std::thread::sleep(LEASE_GAP);
        let xid = 0x6265_0000 + u32::try_from(round * LEASES + i).unwrap_or(0);
        match obtain(&sock, sock.mac(), sock.mac(), xid, T) {
            Ok(Some(l)) if l.addr == b.v4 => leases.push(l.took),
            _ => leases_missed += 1,
        }
    }
    let mut answers = Vec::new();
    let mut dns_missed = 0;
    for i in 0..LOOKUPS {
        let name = format!("q{round}-{}-{i}.bench.test", u8::from(flood));
        gateways
            .upstream
            .set(&name, &[IpAddr::V4(Ipv4Addr::new(198, 18, 1, 1))], 60);
        let start = Instant::now();
        let ok =
            b.ns.run(|| query(dns, &name, TYPE_A, T))
                .ok()
                .and_then(Result::ok)
                .is_some_and(|r| !r.answers.is_empty());
        if ok {
            answers.push(start.elapsed());
        } else {
            dns_missed += 1;
        }
    }
    let flood_sent = floods.map_or(0, |(d, n)| {
        d.map_or(0, |d| d.sent.load(Ordering::Relaxed)) + n.map_or(0, |n| n.sent())
    });
    Sample {
        lease: median(leases),
        leases_missed,
        dns: median(answers),
        dns_missed,
        flood_sent,
    }
}

fn main() {
    let cfg = Config::builtin_default();
    let lab = Lab::new(&cfg.profiles, &Resolution::new()).unwrap_or_else(|e| panic!("{e}"));
    lab.apply().unwrap_or_else(|e| panic!("apply: {e}"));
    lab.topo
        .attach_sandboxes(true)
        .unwrap_or_else(|e| panic!("{e}"));
    let gateways = LabGateways::start(&lab).unwrap_or_else(|e| panic!("{e}"));
    gateways.upstream.silence("silent.bench.test");
    println!(
        "| round | lease p50 (ms) | lease p50 flooded (ms) | leases missed flooded | DNS p50 (ms) | DNS p50 flooded (ms) | lookups missed flooded | flood frames/queries sent |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut base = (Vec::new(), Vec::new());
    let mut hit = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let b = measure(&lab, &gateways, round, false);
        let f = measure(&lab, &gateways, round, true);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            round + 1,
            ms(b.lease),
            ms(f.lease),
            f.leases_missed,
            ms(b.dns),
            ms(f.dns),
            f.dns_missed,
            f.flood_sent
        );
        if b.leases_missed + b.dns_missed > 0 {
            println!(
                "(baseline round {}: {} leases and {} lookups missed)",
                round + 1,
                b.leases_missed,
                b.dns_missed
            );
        }
        base.0.push(b.lease);
        base.1.push(b.dns);
        hit.0.push(f.lease);
        hit.1.push(f.dns);
    }
    let (bl, bd, fl, fd) = (median(base.0), median(base.1), median(hit.0), median(hit.1));
    println!();
    println!(
        "median of rounds: lease {} ms → {} ms flooded (ratio {:.2}); DNS {} ms → {} ms flooded (ratio {:.2})",
        ms(bl),
        ms(fl),
        fl.as_secs_f64() / bl.as_secs_f64().max(f64::MIN_POSITIVE),
        ms(bd),
        ms(fd),
        fd.as_secs_f64() / bd.as_secs_f64().max(f64::MIN_POSITIVE),
    );
}
