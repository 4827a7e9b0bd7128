//! Apply and refresh latency of corral's netlink path vs `nft -f`.
//!
//! Runs inside an anonymous network namespace (root needed). For each size,
//! one allowlist profile with that many distinct /32s: the median wall time
//! of `nft::apply` (build the batch + one sendmsg + acks) against `nft -f`
//! of `render_nft()` for the same plan (process start + parse + commit).
//! Then the latency of refreshing one set element at three set sizes.
//!
//! `cargo bench -p corral-egress --bench apply` prints a table.

// A benchmark harness: any failed step must abort the run loudly.
#![allow(clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::time::{Duration, Instant};

use corral_egress::nft;
use corral_egress::plan::{HostPlan, PlanSettings, Resolution};
use corral_sandbox_core::{
    AllowEntry, AllowTarget, BlockAction, BridgeName, DnsPolicy, EgressMode, Profile, ProfileName,
    ProfileSet,
};

const SIZES: [u32; 5] = [1, 100, 1_000, 10_000, 50_000];

fn plan_with(addrs: impl Iterator<Item = Ipv4Addr>) -> HostPlan {
    let profile = Profile {
        name: ProfileName::new("bench").expect("valid profile name"),
        bridge: BridgeName::new("cb-bench").expect("valid bridge name"),
        subnet_v4: "10.95.0.0/24".parse().expect("valid subnet"),
        subnet_v6: None,
        mode: EgressMode::Allowlist,
        allow: addrs
            .map(|a| AllowEntry {
                target: AllowTarget::Net(IpAddr::V4(a).into()),
                ports: None,
                protocol: None,
            })
            .collect(),
        block: BlockAction::Reject,
        dns: DnsPolicy::Gateway,
        allow_unresolved: false,
        learned_max: corral_sandbox_core::profile::DEFAULT_LEARNED_MAX,
        approvals: Default::default(),
        flows: Default::default(),
        deny: Vec::new(),
    };
    let set = ProfileSet::new(vec![profile]).expect("valid profile set");
    HostPlan::build(&set, &PlanSettings::default(), &Resolution::new()).expect("plan builds")
}

/// `n` distinct, non-adjacent /32s (every other address from 44.0.0.0).
fn addrs(n: u32) -> impl Iterator<Item = Ipv4Addr> {
    (0..n).map(|i| Ipv4Addr::from(0x2c00_0000u32 + 2 * i))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn nft_f(path: &str) -> Duration {
    let t = Instant::now();
    let out = Command::new("nft")
        .args(["-f", path])
        .output()
        .expect("the nft binary (apt package nftables) is the baseline");
    let d = t.elapsed();
    assert!(
        out.status.success(),
        "nft -f failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    d
}

fn run() {
    let dir = tempfile::tempdir().expect("temp dir");
    println!("## nftables apply latency (median wall time)");
    println!();
    println!(
        "| allowlisted /32s | iterations | corral netlink (ms) | nft -f (ms) | ratio corral/nft | batch messages | batch bytes |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    // Warm-up: first use loads nf_tables state in the namespace.
    nft::apply(&plan_with(addrs(10))).expect("warm-up apply");
    for n in SIZES {
        let plan = plan_with(addrs(n));
        let iters = if n >= 10_000 { 5 } else { 11 };
        let path = dir.path().join(format!("plan-{n}.nft"));
        std::fs::write(&path, plan.render_nft()).expect("write nft script");
        let path = path.to_str().expect("utf-8 temp path").to_owned();
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        let mut stats = nft::BatchStats::default();
        for _ in 0..iters {
            // Alternate, so both replace an equally large live table;
            // corral goes last so the read-back below checks its result.
            theirs.push(nft_f(&path));
            let t = Instant::now();
            stats = nft::apply(&plan).expect("apply");
            ours.push(t.elapsed());
        }
        let live = nft::read_live().expect("read back");
        assert!(
            corral_egress::drift::diff(&plan, &live).is_empty(),
            "drift at {n}"
        );
        let (a, b) = (median(ours), median(theirs));
        println!(
            "| {n} | {iters} | {:.2} | {:.2} | {:.2} | {} | {} |",
            ms(a),
            ms(b),
            a.as_secs_f64() / b.as_secs_f64(),
            stats.messages,
            stats.bytes
        );
    }

    println!();
    println!("## refresh: replace one element of an n-element set (median wall time)");
    println!();
    println!("| set size | samples (corral / nft) | corral netlink (ms) | nft -f (ms) | ratio |");
    println!("|---:|---:|---:|---:|---:|");
    for n in [100u32, 10_000, 50_000] {
        let (ours, theirs, samples) = refresh_latency(dir.path(), n);
        println!(
            "| {n} | {} / {} | {:.3} | {:.3} | {:.2} |",
            samples.0,
            samples.1,
            ms(ours),
            ms(theirs),
            ours.as_secs_f64() / theirs.as_secs_f64()
        );
    }
}

/// Median time to swap the last address of an `n`-element set for another
/// one and back: corral's `refresh_sets` vs `nft -f` of `delete element` +
/// `add element`.
fn refresh_latency(dir: &std::path::Path, n: u32) -> (Duration, Duration, (usize, usize)) {
    let old = plan_with(addrs(n));
    let new = plan_with(addrs(n - 1).chain([Ipv4Addr::new(45, 1, 2, 3)]));
    nft::apply(&old).expect("apply");
    let last = Ipv4Addr::from(0x2c00_0000u32 + 2 * (n - 1));
    let del_add = |from: &str, to: &str| {
        format!(
            "delete element inet corral bench-allow4 {{ {from} }}\nadd element inet corral bench-allow4 {{ {to} }}\n"
        )
    };
    let fwd = dir.join(format!("fwd-{n}.nft"));
    let back = dir.join(format!("back-{n}.nft"));
    std::fs::write(&fwd, del_add(&last.to_string(), "45.1.2.3")).expect("write");
    std::fs::write(&back, del_add("45.1.2.3", &last.to_string())).expect("write");
    let (ours_n, theirs_n) = if n >= 50_000 { (11, 3) } else { (21, 11) };
    let mut ours = Vec::new();
    for _ in 0..ours_n {
        let t = Instant::now();
        nft::refresh_sets(&old, &new).expect("refresh");
        ours.push(t.elapsed());
        let t = Instant::now();
        nft::refresh_sets(&new, &old).expect("refresh back");
        ours.push(t.elapsed());
    }
    let mut theirs = Vec::new();
    for _ in 0..theirs_n {
        theirs.push(nft_f(fwd.to_str().expect("utf-8")));
        theirs.push(nft_f(back.to_str().expect("utf-8")));
    }
    assert!(corral_egress::drift::diff(&old, &nft::read_live().expect("read")).is_empty());
    (median(ours), median(theirs), (2 * ours_n, 2 * theirs_n))
}

fn main() {
    let handle = std::thread::spawn(|| {
        // SAFETY: unshare affects only this throwaway thread.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            eprintln!(
                "skipped: cannot create a network namespace ({}); run as root",
                std::io::Error::last_os_error()
            );
            return;
        }
        run();
    });
    if let Err(panic) = handle.join() {
        std::panic::resume_unwind(panic);
    }
}
