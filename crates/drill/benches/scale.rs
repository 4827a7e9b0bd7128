//! A host of many profiles (issue 18), in one run: three simulated hosts
//! of 1, 100 and 500 allowlist profiles side by side, each with a sandbox
//! on one profile (the first of 1, the first of 100, the last of 500) and
//! a sink in its "internet".
//!
//! - Forwarding: one bulk TCP stream for 2 s and the median time to open a
//!   new TCP connection (over 200), through the probed profile, the three
//!   hosts interleaved round by round; ratios against the host of one.
//! - Apply wall time (what `corral host apply` does: `Host::apply` —
//!   bridges, sysctls, one nft transaction, read-back, verify, conntrack
//!   revocation — then the gateways' reservations and `start_all`): the
//!   first apply (bridges and gateways created), a re-apply of the same
//!   configuration, and a re-apply with one profile changed (how many
//!   gateways restarted); plus the nft transaction alone, `verify` and
//!   `status`.
//! - Gateway memory: RSS and PSS of every dnsmasq of the host, per profile.
//!
//! Needs root; run with `cargo bench -p corral-drill --bench scale`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use corral_drill::lab::{Lab, LabGateways};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::ProfileSet;
use corral_sandbox_core::config::Config;
use corral_test_support::bench::{self, median};
use corral_test_support::memory;

const SIZES: [usize; 3] = [1, 100, 500];
const RUNS: usize = 5;
const REAPPLIES: usize = 5;
const BULK: Duration = Duration::from_secs(2);
const CONNECTS: usize = 200;
const TARGET: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 10);
const PORT: u16 = 5201;
/// The far end of every forwarding measurement (`bench::sink`).
const SINK: SocketAddr = SocketAddr::new(IpAddr::V4(TARGET), PORT);

fn profiles(n: usize, changed: bool) -> ProfileSet {
    let mut text = String::new();
    for i in 0..n {
        // A name entry: the gateway's configuration (and the plan's
        // learned sets) change for this profile alone.
        let extra = if changed && i == 0 {
            ", \"*.corral-scale.test:443/tcp\"".to_owned()
        } else {
            String::new()
        };
        text.push_str(&format!(
            "[[profile]]\nname = \"s{i}\"\nbridge = \"cs{i}\"\nsubnet = \"10.{}.{}.0/24\"\nmode = \"allowlist\"\nallow = [\"{TARGET}:{PORT}/tcp\"{extra}]\n\n",
            100 + i / 256,
            i % 256
        ));
    }
    match Config::from_toml_str(&text, "scale") {
        Ok(c) => c.profiles,
        Err(e) => panic!("bench config: {e}"),
    }
}

/// The profile probed on a host of `n`: the first of 1 and of 100, the
/// last of 500 (the last element of every map).
fn probed(n: usize) -> usize {
    if n >= 500 { n - 1 } else { 0 }
}

struct Host {
    n: usize,
    lab: Lab,
    gateways: LabGateways,
    sandbox: usize,
    /// The first apply: (host, gateways).
    first: (Duration, Duration),
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Apply as `corral host apply` does (see [`LabGateways::apply_again`]).
fn apply_all(lab: &Lab, gateways: &LabGateways, set: &ProfileSet) -> (Duration, Duration, usize) {
    gateways
        .apply_again(lab, set)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn build(n: usize) -> Host {
    let set = profiles(n, false);
    let sandbox = probed(n);
    let lab = Lab::sparse(&set, &Resolution::new(), |i| usize::from(i == sandbox))
        .unwrap_or_else(|e| panic!("lab of {n}: {e}"));
    // Cold: bridges, rules and gateways created.
    let t = Instant::now();
    lab.apply().unwrap_or_else(|e| panic!("apply: {e}"));
    let host = t.elapsed();
    let t = Instant::now();
    let gateways = LabGateways::start(&lab).unwrap_or_else(|e| panic!("gateways: {e}"));
    let gw = t.elapsed();
    println!(
        "{n:>3} profiles: first apply {:.0} ms (host {:.0} ms + {n} gateways started {:.0} ms)",
        ms(host + gw),
        ms(host),
        ms(gw)
    );
    lab.topo
        .attach_sandboxes(true)
        .unwrap_or_else(|e| panic!("attach: {e}"));
    lab.topo
        .internet
        .run(|| bench::sink(SINK))
        .and_then(|r| r)
        .unwrap_or_else(|e| panic!("sink: {e}"));
    Host {
        n,
        lab,
        gateways,
        sandbox,
        first: (host, gw),
    }
}

fn main() {
    if !corral_test_support::gate::netns()
        || !corral_test_support::gate::tool("dnsmasq", "dnsmasq-base")
    {
        return;
    }
    let hosts: Vec<Host> = SIZES.iter().map(|n| build(*n)).collect();

    println!();
    println!(
        "| profiles | first apply (host + gateways) | re-apply, same config (host + gateways) | of it gateways | restarted | one profile changed (host + gateways) | restarted | nft transaction alone | verify | status | rules | gateway RSS / PSS per profile |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for h in &hosts {
        let same = profiles(h.n, false);
        let changed = profiles(h.n, true);
        let mut total = Vec::new();
        let mut gws = Vec::new();
        let mut restarted_same = 0;
        for _ in 0..REAPPLIES {
            let (host, gw, r) = apply_all(&h.lab, &h.gateways, &same);
            total.push(ms(host + gw));
            gws.push(ms(gw));
            restarted_same = restarted_same.max(r);
        }
        let (host, gw, restarted_one) = apply_all(&h.lab, &h.gateways, &changed);
        let one = ms(host + gw);
        // Back to the measured configuration (one restart again).
        apply_all(&h.lab, &h.gateways, &same);
        let mut nft_alone = Vec::new();
        let mut verify = Vec::new();
        let mut status = Vec::new();
        for _ in 0..REAPPLIES {
            let t = Instant::now();
            h.lab
                .topo
                .host
                .run(|| corral_egress::nft::apply(&h.lab.plan))
                .unwrap_or_else(|e| panic!("{e}"))
                .unwrap_or_else(|e| panic!("nft: {e}"));
            nft_alone.push(ms(t.elapsed()));
            let t = Instant::now();
            let drift = h
                .lab
                .host
                .verify(&h.lab.plan)
                .unwrap_or_else(|e| panic!("{e}"));
            verify.push(ms(t.elapsed()));
            assert!(drift.is_empty(), "{drift:?}");
            let t = Instant::now();
            h.lab
                .host
                .status(&h.lab.plan)
                .unwrap_or_else(|e| panic!("{e}"));
            status.push(ms(t.elapsed()));
        }
        let (mem, count) = memory::dnsmasq(h.gateways.state_dir());
        let (rss, pss) = (mem.rss_kib, mem.pss_kib);
        assert_eq!(count, h.n, "dnsmasq processes of the host of {}", h.n);
        println!(
            "| {} | {:.0} ms ({:.0} + {:.0}) | {:.0} ms | {:.0} ms | {restarted_same} | {one:.0} ms | {restarted_one} | {:.0} ms | {:.0} ms | {:.0} ms | {} | {:.2} / {:.2} MiB |",
            h.n,
            ms(h.first.0 + h.first.1),
            ms(h.first.0),
            ms(h.first.1),
            median(total),
            median(gws),
            median(nft_alone),
            median(verify),
            median(status),
            h.lab.plan.rule_count(),
            rss as f64 / 1024.0 / h.n as f64,
            pss as f64 / 1024.0 / h.n as f64,
        );
    }

    println!();
    println!("forwarding through the probed profile, median of {RUNS} interleaved rounds");
    let mut gbit = vec![Vec::new(); hosts.len()];
    let mut conn = vec![Vec::new(); hosts.len()];
    for round in 0..RUNS {
        for (i, h) in hosts.iter().enumerate() {
            let name = format!("s{}", h.sandbox);
            let sb = &h.lab.sandbox(&name).ns;
            let (g, c) = sb
                .run(|| bench::forwarding(SINK, BULK, CONNECTS))
                .and_then(|r| r)
                .unwrap_or_else(|e| panic!("forwarding: {e}"));
            println!(
                "round {round} profile {} of {:<3} {g:>6.2} Gbit/s {c:>6.0} µs/connect",
                h.sandbox + 1,
                h.n
            );
            gbit[i].push(g);
            conn[i].push(c);
        }
    }
    let g: Vec<f64> = gbit.into_iter().map(median).collect();
    let c: Vec<f64> = conn.into_iter().map(median).collect();
    println!();
    println!("| through | bulk TCP Gbit/s | ratio | new-connection latency µs | ratio |");
    println!("|---|---:|---:|---:|---:|");
    for (i, h) in hosts.iter().enumerate() {
        println!(
            "| profile {} of {} | {:.2} | {:.2} | {:.0} | {:.2} |",
            h.sandbox + 1,
            h.n,
            g[i],
            g[i] / g[0],
            c[i],
            c[i] / c[0]
        );
    }
}
