//! A gateway's `kill -9` to its resolver answering again, under the
//! supervisor: corral's built-in profiles applied inside an anonymous
//! network namespace (rules, bridges, real dnsmasq per bridge), the
//! allowlist profile's gateway killed with SIGKILL each round and a DNS
//! query for a name the gateway answers itself (nothing forwarded) sent
//! every 5 ms from the namespace until one is answered.
//!
//! Each round is a first death: the supervisor runs with `stable = 0`, so
//! the backoff starts at its first step (50 ms) every time, as it does for
//! a gateway that had been running a while (a crash loop instead doubles
//! the delay, by design).
//!
//! Baseline, measured in the same run on the same gateway: corral's own
//! restart path without supervision — the daemon stopped, then started
//! from its recorded configuration (`Gateway::restart_recorded`), timed to
//! the first answer the same way. The ratio is what detection (pidfd),
//! the host lock, the first backoff step and the events cost.
//!
//! `cargo bench -p corral-service --bench gateway_restart [-- ROUNDS]`
//! (root; dnsmasq installed).

// A benchmark reports failures by panicking, like a test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_egress::netns::Netns;
use corral_gateway::{Gateway, GatewayStatus};
use corral_sandbox_core::Config;
use corral_service::config::{LoadedConfig, Origin};
use corral_service::host::{HostService, plan_config};
use corral_service::store::Store;
use corral_service::supervise::{Backoff, GatewaySupervisor};
use corral_service::target::Target;

const PROFILE: &str = "allowlist";

fn pid(gw: &Gateway) -> Option<u32> {
    match gw.status() {
        GatewayStatus::Running { pid } => Some(pid),
        _ => None,
    }
}

/// From `from` until the resolver at `to` answers, asking every 5 ms.
fn until_answered(ns: &Netns, to: SocketAddr, from: Instant) -> Duration {
    let deadline = from + Duration::from_secs(30);
    loop {
        let ok = ns
            .run(|| {
                corral_gateway::probe::query(
                    to,
                    "corral-gate-check",
                    corral_gateway::wire::TYPE_A,
                    Duration::from_millis(5),
                )
            })
            .unwrap()
            .is_ok();
        if ok {
            return from.elapsed();
        }
        assert!(Instant::now() < deadline, "no answer within 30 s");
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let last = sorted.len() - 1;
    let rank = (last as f64 * p).round() as usize;
    sorted[rank.min(last)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn row(what: &str, sorted: &[Duration]) {
    println!(
        "| {what} | {:.1} | {:.1} | {:.1} |",
        ms(percentile(sorted, 0.5)),
        ms(percentile(sorted, 0.99)),
        ms(*sorted.last().unwrap())
    );
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20);
    let ns = Netns::new().unwrap();
    let path = format!("/proc/{}/fd/{}", std::process::id(), ns.fd().as_raw_fd());
    let state = tempfile::tempdir().unwrap();
    let service = || HostService::new(Target::open(Some(&path)).unwrap(), state.path().to_owned());
    let config = Config::builtin_default();
    let planned = plan_config(LoadedConfig {
        config: config.clone(),
        origin: Origin::Builtin,
    })
    .unwrap();
    service().apply(&planned).unwrap();
    let profile = config.profiles.get(PROFILE).unwrap();
    let gw = Gateway::new(state.path(), &profile.bridge);
    let to = SocketAddr::new(IpAddr::V4(profile.gateway_v4()), 53);
    until_answered(&ns, to, Instant::now());

    // Baseline: stop, then corral's restart path, by hand.
    let mut direct = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        gw.stop().unwrap();
        gw.restart_recorded(&ns).unwrap();
        direct.push(until_answered(&ns, to, t));
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let store = Arc::new(Store::open(state.path()).unwrap());
    let handle = rt.block_on(async {
        GatewaySupervisor::new(state.path(), Some(&path), store)
            .unwrap()
            .with_backoff(Backoff {
                stable: Duration::ZERO,
                ..Backoff::default()
            })
            .spawn()
    });
    // Its first scan picks the gateway up.
    std::thread::sleep(Duration::from_millis(300));
    let mut supervised = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let before = pid(&gw).unwrap();
        let t = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(before).unwrap()),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        supervised.push(until_answered(&ns, to, t));
        assert_ne!(pid(&gw), Some(before), "answered by the killed daemon");
        // The supervisor re-arms its pidfd on the new daemon right after
        // the restart; let it before the next kill.
        std::thread::sleep(Duration::from_millis(100));
    }
    rt.block_on(handle.stop());
    let _ = service().teardown();

    direct.sort();
    supervised.sort();
    println!("gateway back after a restart, {rounds} rounds each (ms to the first DNS answer)");
    println!("| path | p50 | p99 | max |");
    println!("|---|---|---|---|");
    row("stop + restart_recorded by hand (baseline)", &direct);
    row("kill -9 under the supervisor", &supervised);
    println!(
        "ratio supervised/baseline: p50 {:.2}, p99 {:.2}",
        ms(percentile(&supervised, 0.5)) / ms(percentile(&direct, 0.5)),
        ms(percentile(&supervised, 0.99)) / ms(percentile(&direct, 0.99))
    );
}
