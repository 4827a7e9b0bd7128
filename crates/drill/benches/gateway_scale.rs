//! corral's gateway against dnsmasq on a host of many profiles, in one
//! run: for 1, 100 and 500 allowlist profiles (each listing a wildcard, so
//! every bridge has a resolver, a DHCP server and, with IPv6, an
//! advertiser), a simulated host served by corral's gateway (`dns =
//! "corral"`, hosted in this process as corrald hosts it), then one of the
//! same size served by dnsmasq (`dns = "gateway"`, a process per bridge).
//!
//! - **first apply**: the host's apply (bridges, rules, read-back) and the
//!   gateways' start (dnsmasq: configuration written, daemon spawned and
//!   confirmed, per bridge; corral: the record written by `start_all`, then
//!   each bridge's servers bound and running, as the supervisor does);
//! - **re-apply** of the same configuration, median of five;
//! - **memory per profile**: corral's, this process's resident and
//!   proportional set size after its gateways started less before, and the
//!   threads they added; dnsmasq's, the sum over its processes.
//!
//! Ratios are corral's over dnsmasq's at the same size, measured in this
//! run. DNS latency side by side is `gateway_compare`'s. Needs root; run
//! with `cargo bench -p corral-drill --bench gateway_scale`.

use std::time::{Duration, Instant};

use corral_drill::lab::{Lab, LabGateways};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::ProfileSet;
use corral_sandbox_core::config::Config;
use corral_test_support::bench::median;
use corral_test_support::memory;

const SIZES: [usize; 3] = [1, 100, 500];
const REAPPLIES: usize = 5;

fn profiles(n: usize, dns: &str) -> ProfileSet {
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!(
            "[[profile]]\nname = \"s{i}\"\nbridge = \"cs{i}\"\nsubnet = \"10.{}.{}.0/24\"\nsubnet_v6 = \"fd00:{:x}::/64\"\nmode = \"allowlist\"\ndns = \"{dns}\"\nallow = [\"*.corral-scale.test:443/tcp\"]\n\n",
            100 + i / 256,
            i % 256,
            0x100 + i,
        ));
    }
    match Config::from_toml_str(&text, "gateway_scale") {
        Ok(c) => c.profiles,
        Err(e) => panic!("bench config: {e}"),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One host measured.
struct Measured {
    host: Duration,
    gateways: Duration,
    reapply: f64,
    /// Per profile, KiB.
    rss: f64,
    pss: f64,
    threads: usize,
}

fn measure(n: usize, dns: &str) -> Measured {
    let set = profiles(n, dns);
    let lab =
        Lab::sparse(&set, &Resolution::new(), |_| 0).unwrap_or_else(|e| panic!("lab of {n}: {e}"));
    let t = Instant::now();
    lab.apply().unwrap_or_else(|e| panic!("apply: {e}"));
    let host = t.elapsed();
    let (before, threads_before) = (memory::own(), memory::own_threads());
    let t = Instant::now();
    let gateways = LabGateways::start(&lab).unwrap_or_else(|e| panic!("gateways: {e}"));
    let gw = t.elapsed();
    let (rss, pss, threads) = if dns == "corral" {
        assert_eq!(gateways.resolvers.len(), n, "hosted gateways");
        let after = memory::own();
        (
            after.rss_kib.saturating_sub(before.rss_kib),
            after.pss_kib.saturating_sub(before.pss_kib),
            memory::own_threads().saturating_sub(threads_before),
        )
    } else {
        let (sum, count) = memory::dnsmasq(gateways.state_dir());
        assert_eq!(count, n, "dnsmasq processes");
        (sum.rss_kib, sum.pss_kib, 0)
    };
    let mut again = Vec::new();
    for _ in 0..REAPPLIES {
        let (h, g, restarted) = gateways
            .apply_again(&lab, &set)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(restarted, 0, "a re-apply of the same configuration");
        again.push(ms(h + g));
    }
    println!(
        "{n:>3} profiles, {dns:>7}: first apply {:.0} ms (host {:.0} + gateways {:.0}), re-apply {:.0} ms, {:.0} KiB RSS / {:.0} KiB PSS per profile, {threads} threads",
        ms(host + gw),
        ms(host),
        ms(gw),
        median(again.clone()),
        rss as f64 / n as f64,
        pss as f64 / n as f64,
    );
    Measured {
        host,
        gateways: gw,
        reapply: median(again),
        rss: rss as f64 / n as f64,
        pss: pss as f64 / n as f64,
        threads,
    }
}

/// Waits for the kernel to finish with a dropped lab of `n` bridges.
fn settle(n: usize) {
    std::thread::sleep(Duration::from_millis(200 + 40 * n as u64));
}

fn main() {
    if !corral_test_support::gate::netns()
        || !corral_test_support::gate::tool("dnsmasq", "dnsmasq-base")
    {
        return;
    }
    let mut rows = Vec::new();
    for n in SIZES {
        // corral's first: what this process holds is measured around its
        // start, before a dnsmasq host's lab has come and gone. Between
        // hosts the kernel finishes tearing the last one down (its
        // namespaces' bridges go in the background, holding the lock
        // every bridge's creation takes), so the next starts as the
        // first did.
        let corral = measure(n, "corral");
        settle(n);
        let dnsmasq = measure(n, "gateway");
        settle(n);
        rows.push((n, corral, dnsmasq));
    }
    println!();
    println!(
        "| profiles | server | first apply (host + gateways) | of it gateways | ratio | re-apply | ratio | RSS / PSS per profile | threads |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for (n, c, d) in &rows {
        for (name, m) in [("dnsmasq", d), ("corral", c)] {
            println!(
                "| {n} | {name} | {:.0} ms ({:.0} + {:.0}) | {:.0} ms | {:.2} | {:.0} ms | {:.2} | {:.0} / {:.0} KiB | {} |",
                ms(m.host + m.gateways),
                ms(m.host),
                ms(m.gateways),
                ms(m.gateways),
                ms(m.gateways) / ms(d.gateways),
                m.reapply,
                m.reapply / d.reapply,
                m.rss,
                m.pss,
                m.threads,
            );
        }
    }
}
