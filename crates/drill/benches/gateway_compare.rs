//! corral's own gateway (`dns = "corral"`: its resolver and DHCP server,
//! hosted in this process) side by side with dnsmasq (`dns = "gateway"`),
//! in one lab, one run, against the same test upstream: two allowlist
//! profiles listing the same wildcard, corral's rules applied, every port
//! bound. Interleaved round by round, so both see the same machine:
//!
//! - **start**: what an apply pays for one bridge's gateway: dnsmasq's
//!   `Gateway::start_in` (config written, daemon spawned, sockets bound,
//!   its start confirmed) against `HostedGateway::start` (both servers'
//!   sockets bound, threads running); the old one stopped first, each time;
//! - **lease**: DISCOVER sent → ACK received over a raw socket in a
//!   sandbox (its reserved address), spaced for the port's DHCP rate limit;
//! - **DNS**: one A query for a fresh name (so each resolver asks the
//!   upstream, which answers at once), UDP from a sandbox to its gateway.
//!
//! Reported as p50 and p99 per server and the ratio corral / dnsmasq.
//! Queries per second are not measured here: every sandbox port is held
//! to the bridge's DNS rate limit in front of either resolver, and the
//! resolvers answer only on their bridge device. Needs root; run with
//! `cargo bench -p corral-drill --bench gateway_compare`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use corral_drill::lab::gateways::UPSTREAM;
use corral_drill::lab::{Lab, LabGateways};
use corral_drill::raw::PacketSocket;
use corral_drill::raw::dhcp::obtain;
use corral_egress::resolve::Resolution;
use corral_gateway::probe::query;
use corral_gateway::resolver::{Bounds, recorded};
use corral_gateway::wire::TYPE_A;
use corral_gateway::{DnsTiming, Gateway, GatewaySpec, HostedGateway};
use corral_sandbox_core::config::Config;

const ROUNDS: usize = 5;
const STARTS: usize = 4;
/// Leases per round, spaced so the port stays under its DHCP rate limit
/// (5 messages a second; a lease is two).
const LEASES: usize = 8;
const LEASE_GAP: Duration = Duration::from_millis(400);
/// Lookups per round: the lease phase refills the port's DNS budget.
const LOOKUPS: usize = 100;
const T: Duration = Duration::from_secs(2);

const CONFIG: &str = r#"
[[profile]]
name = "dm"
bridge = "cb-dm"
subnet = "10.9.1.0/24"
mode = "allowlist"
dns = "gateway"
allow = ["*.bench.test"]

[[profile]]
name = "cg"
bridge = "cb-cg"
subnet = "10.9.2.0/24"
mode = "allowlist"
dns = "corral"
allow = ["*.bench.test"]
"#;

#[derive(Default)]
struct Samples {
    start: Vec<Duration>,
    lease: Vec<Duration>,
    dns: Vec<Duration>,
    missed: usize,
}

fn pct(v: &[Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    let mut s = v.to_vec();
    s.sort();
    let len = s.len() as f64;
    let i = ((len - 1.0) * p).round();
    s[(i as usize).min(s.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

fn ratio(a: Duration, b: Duration) -> String {
    format!(
        "{:.2}",
        a.as_secs_f64() / b.as_secs_f64().max(f64::MIN_POSITIVE)
    )
}

fn restart_dnsmasq(lab: &Lab, gw: &LabGateways) -> Duration {
    let p = lab
        .profiles
        .get("dm")
        .unwrap_or_else(|| panic!("no dm profile"));
    let spec = GatewaySpec::from_profile(
        p,
        &[SocketAddr::new(UPSTREAM.into(), 53)],
        DnsTiming::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let g = Gateway::new(gw.state_dir(), &p.bridge);
    g.stop().unwrap_or_else(|e| panic!("{e}"));
    let start = Instant::now();
    g.start_in(&spec, &lab.topo.host)
        .unwrap_or_else(|e| panic!("{e}"));
    start.elapsed()
}

fn restart_corral(lab: &Lab, gw: &mut LabGateways) -> Duration {
    gw.resolvers.clear();
    let records = recorded(gw.state_dir());
    let r = records
        .first()
        .unwrap_or_else(|| panic!("no resolver record"));
    let start = Instant::now();
    let h = HostedGateway::start(gw.state_dir(), &lab.topo.host, r, Bounds::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let took = start.elapsed();
    gw.resolvers.push(h);
    took
}

fn measure(lab: &Lab, gw: &LabGateways, profile: &str, round: usize, into: &mut Samples) {
    let sb = lab
        .topo
        .sandboxes_of(profile)
        .next()
        .unwrap_or_else(|| panic!("no {profile} sandbox"));
    let sock = PacketSocket::open(&sb.ns, "eth0").unwrap_or_else(|e| panic!("{e}"));
    for i in 0..LEASES {
        std::thread::sleep(LEASE_GAP);
        let xid = 0x6763_0000 + u32::try_from(round * LEASES + i).unwrap_or(0);
        match obtain(&sock, sock.mac(), sock.mac(), xid, T) {
            Ok(Some(l)) if l.addr == sb.v4 => into.lease.push(l.took),
            _ => into.missed += 1,
        }
    }
    let dns = SocketAddr::new(sb.gateway_v4.into(), 53);
    for i in 0..LOOKUPS {
        let name = format!("q{round}-{i}-{profile}.bench.test");
        gw.upstream
            .set(&name, &[IpAddr::V4(Ipv4Addr::new(192, 175, 48, 10))], 60);
        let start = Instant::now();
        let ok = sb
            .ns
            .run(|| query(dns, &name, TYPE_A, T))
            .ok()
            .and_then(Result::ok)
            .is_some_and(|r| !r.answers.is_empty());
        if ok {
            into.dns.push(start.elapsed());
        } else {
            into.missed += 1;
        }
    }
}

fn main() {
    let cfg =
        Config::from_toml_str(CONFIG, "gateway_compare.toml").unwrap_or_else(|e| panic!("{e}"));
    let lab = Lab::new(&cfg.profiles, &Resolution::new()).unwrap_or_else(|e| panic!("{e}"));
    lab.apply().unwrap_or_else(|e| panic!("apply: {e}"));
    lab.topo
        .attach_sandboxes(true)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut gw = LabGateways::start(&lab).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(gw.resolvers.len(), 1, "corral's gateway is not hosted");
    let (mut dm, mut cg) = (Samples::default(), Samples::default());
    println!(
        "| round | start dnsmasq (ms) | start corral (ms) | lease p50 dnsmasq (ms) | lease p50 corral (ms) | DNS p50 dnsmasq (ms) | DNS p50 corral (ms) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for round in 0..ROUNDS {
        let (d0, c0) = (
            (dm.start.len(), dm.lease.len(), dm.dns.len()),
            (cg.start.len(), cg.lease.len(), cg.dns.len()),
        );
        for _ in 0..STARTS {
            dm.start.push(restart_dnsmasq(&lab, &gw));
            cg.start.push(restart_corral(&lab, &mut gw));
        }
        measure(&lab, &gw, "dm", round, &mut dm);
        measure(&lab, &gw, "cg", round, &mut cg);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            round + 1,
            ms(pct(&dm.start[d0.0..], 0.5)),
            ms(pct(&cg.start[c0.0..], 0.5)),
            ms(pct(&dm.lease[d0.1..], 0.5)),
            ms(pct(&cg.lease[c0.1..], 0.5)),
            ms(pct(&dm.dns[d0.2..], 0.5)),
            ms(pct(&cg.dns[c0.2..], 0.5)),
        );
    }
    println!();
    println!(
        "| measure | n (dnsmasq / corral) | dnsmasq p50 | corral p50 | ratio p50 | dnsmasq p99 | corral p99 | ratio p99 |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (what, a, b) in [
        ("gateway start (ms)", &dm.start, &cg.start),
        ("lease (ms)", &dm.lease, &cg.lease),
        ("DNS answer (ms)", &dm.dns, &cg.dns),
    ] {
        let (a50, b50, a99, b99) = (pct(a, 0.5), pct(b, 0.5), pct(a, 0.99), pct(b, 0.99));
        println!(
            "| {what} | {} / {} | {} | {} | {} | {} | {} | {} |",
            a.len(),
            b.len(),
            ms(a50),
            ms(b50),
            ratio(b50, a50),
            ms(a99),
            ms(b99),
            ratio(b99, a99)
        );
    }
    println!();
    println!(
        "missed: dnsmasq {} of {}, corral {} of {}",
        dm.missed,
        ROUNDS * (LEASES + LOOKUPS),
        cg.missed,
        ROUNDS * (LEASES + LOOKUPS)
    );
}
