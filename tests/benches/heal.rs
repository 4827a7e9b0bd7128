//! The kernel watch under tampering with live traffic: how long after a
//! change behind corral's back the first new connection meets corral's
//! rules again ("restored"), and how long until the watch's read-back is
//! clean ("healed"), for three tamperings — `nft delete table inet
//! corral`, one rule deleted, the profile's allow set flushed — over
//! several rounds each, p50/p99. The baseline, in the same run: one apply
//! of the same recorded plan (what a heal re-does), and one read-back.
//!
//! The lab: the drill's namespaces (an allowlist profile, its sandboxes on
//! the profile bridge, an echo "internet"), corral's plan applied and
//! recorded in a state directory, the watch running (reaction `heal`).
//! During each round a TCP flow to the allowed destination echoes a byte
//! every 5 ms, and a stream of new connections goes, back to back, to the
//! destination the tampering affects (an unlisted one for a deleted table
//! or rule, the allowed one for a flushed allow set). Time zero is the
//! moment `nft` exits (its change is committed by then). Needs root; run
//! with `cargo bench -p corral-tests --bench heal` (`ROUNDS=n`, default
//! 10).

// Bench code: a failed step aborts the run with its message, as in tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use corral_drill::lab::topology::PUBLIC_V4;
use corral_drill::lab::{Probe, probe_from};
use corral_egress::netns::Netns;
use corral_sandbox_core::WatchConfig;
use corral_service::watch::{Check, NoSandboxes, Outcome, Watcher};

#[path = "../tests/common/recorded_lab.rs"]
mod recorded_lab;

use recorded_lab::RecordedLab;

const ALLOWED: SocketAddr = SocketAddr::new(recorded_lab::ALLOWED.0, recorded_lab::ALLOWED.1);
const PROBE_TIMEOUT: Duration = Duration::from_millis(300);

fn main() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let recorded = RecordedLab::new("hb", "10.232.11.0/24");
    let (lab, planned) = (&recorded.lab, &recorded.planned);
    let service = || recorded.service();

    // Baseline: what a heal re-does (an apply of the recorded plan) and a
    // read-back, in this run.
    let mut apply_ms = Vec::new();
    let mut verify_ms = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        lab.host
            .apply_after(&planned.plan, Some(&planned.plan))
            .unwrap();
        apply_ms.push(ms(t.elapsed()));
        let t = Instant::now();
        assert!(lab.host.verify(&planned.plan).unwrap().is_empty());
        verify_ms.push(ms(t.elapsed()));
    }

    let watcher = Watcher::new(service(), Arc::new(NoSandboxes))
        .unwrap()
        .with_config(WatchConfig::default());
    let stop = watcher.stop_handle();
    let (tx, rx) = mpsc::channel::<(Instant, Check)>();
    let thread = std::thread::spawn(move || {
        watcher
            .run(|c| {
                let _ = tx.send((Instant::now(), c.clone()));
            })
            .unwrap();
    });
    let (_, first) = rx.recv().unwrap();
    assert!(matches!(first.outcome, Outcome::Clean { .. }), "{first:?}");

    let sandbox = lab.sandbox("hb").ns.try_clone().unwrap();
    let allow = planned
        .plan
        .inet
        .sets
        .iter()
        .find(|s| s.name.starts_with("hb-allow4"))
        .unwrap()
        .name
        .clone();
    let unlisted = SocketAddr::new(IpAddr::V4(PUBLIC_V4[0]), 443);
    let kinds: [(&str, SocketAddr, bool); 3] = [
        ("deleted table", unlisted, false),
        ("deleted rule (the allow set's accept)", ALLOWED, true),
        ("flushed allow set", ALLOWED, true),
    ];
    println!(
        "baseline: apply of the recorded plan p50 {:.1} ms, read-back p50 {:.1} ms ({rounds} each)",
        pct(&apply_ms, 50.0),
        pct(&verify_ms, 50.0)
    );
    let mut rows = Vec::new();
    for (kind, dest, enforced_connects) in kinds {
        // A flow of its own per kind, so a reset is charged to the
        // tampering that caused it.
        let flow = Flow::start(&sandbox);
        let mut restored = Vec::new();
        let mut healed = Vec::new();
        let mut leaked = 0usize;
        for _ in 0..rounds {
            // Quiet first: nothing of the last round left in the channel.
            while rx.recv_timeout(Duration::from_millis(300)).is_ok() {}
            let stream = Stream::start(&sandbox, dest);
            std::thread::sleep(Duration::from_millis(30));
            let t0 = match kind {
                "deleted table" => nft(&lab.topo.host, &["delete", "table", "inet", "corral"]),
                k if k.starts_with("deleted rule") => {
                    let listing = nft_out(
                        &lab.topo.host,
                        &["-a", "list", "chain", "inet", "corral", "hb-out"],
                    );
                    let handle = accept_rule(&listing, &allow);
                    nft(
                        &lab.topo.host,
                        &[
                            "delete", "rule", "inet", "corral", "hb-out", "handle", &handle,
                        ],
                    )
                }
                _ => nft(&lab.topo.host, &["flush", "set", "inet", "corral", &allow]),
            };
            let healed_at = loop {
                let (at, c) = rx
                    .recv_timeout(Duration::from_secs(10))
                    .expect("a read-back");
                match c.outcome {
                    Outcome::Healed { .. } => break at,
                    Outcome::Clean { .. } => {}
                    other => panic!("{kind}: {other:?}"),
                }
            };
            std::thread::sleep(Duration::from_millis(50));
            let probes = stream.stop();
            let after: Vec<&(Instant, bool)> = probes.iter().filter(|(s, _)| *s >= t0).collect();
            leaked += after
                .iter()
                .filter(|(s, connected)| *s < healed_at && *connected != enforced_connects)
                .count();
            let bad = first_bad_or(&after, t0, enforced_connects);
            let back = after
                .iter()
                .find(|(s, connected)| *s >= bad && *connected == enforced_connects)
                .map(|(s, _)| ms(s.duration_since(t0)));
            if let Some(b) = back {
                restored.push(b);
            }
            healed.push(ms(healed_at.duration_since(t0)));
        }
        rows.push((kind, restored, healed, leaked, flow.stop()));
    }
    stop.stop();
    let _ = thread.join();

    // Control for the running flow, with no watch and no corral code
    // between the deletion and the re-apply: the table deleted, left away
    // for as long as the watch's median heal took, then the same plan
    // applied by hand. A flow that dies here dies of the window itself
    // (the table took the NAT and the stateful accept with it), not of
    // anything the heal does.
    let window = Duration::from_secs_f64(pct(&rows[0].2, 50.0) / 1000.0);
    let mut survived = 0;
    for _ in 0..rounds {
        let flow = Flow::start(&sandbox);
        std::thread::sleep(Duration::from_millis(30));
        nft(&lab.topo.host, &["delete", "table", "inet", "corral"]);
        std::thread::sleep(window);
        lab.host.apply_after(&planned.plan, None).unwrap();
        std::thread::sleep(Duration::from_millis(600));
        let (echoes, failures, _) = flow.stop();
        if failures == 0 && echoes > 0 {
            survived += 1;
        }
    }
    println!(
        "control, no watch: table deleted and re-applied by hand after {:.0} ms: the running flow survived {survived} of {rounds} rounds",
        window.as_secs_f64() * 1000.0
    );

    println!(
        "| tampering | rounds | restored p50 (ms) | restored p99 (ms) | healed p50 (ms) | healed p99 (ms) | healed p50 / apply p50 | probes with the tampered outcome | running allowed flow: echoes / failed / longest gap (ms) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for (kind, restored, healed, leaked, (echoes, failures, gap)) in &rows {
        println!(
            "| {kind} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {leaked} | {echoes} / {failures} / {gap:.1} |",
            healed.len(),
            pct(restored, 50.0),
            pct(restored, 99.0),
            pct(healed, 50.0),
            pct(healed, 99.0),
            pct(healed, 50.0) / pct(&apply_ms, 50.0)
        );
    }
}

/// The start of the first probe after `t0` that got the tampered outcome
/// (the enforced outcome after it is the restore); `t0` when none did.
fn first_bad_or(after: &[&(Instant, bool)], t0: Instant, enforced_connects: bool) -> Instant {
    after
        .iter()
        .find(|(_, c)| *c != enforced_connects)
        .map_or(t0, |(s, _)| *s)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The `p`th percentile (nearest rank); NaN for no samples.
fn pct(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * s.len() as f64).ceil() as usize;
    s[rank.clamp(1, s.len()) - 1]
}

/// Runs `nft` in `ns`; the instant it exited.
fn nft(ns: &Netns, args: &[&str]) -> Instant {
    nft_out(ns, args);
    Instant::now()
}

fn nft_out(ns: &Netns, args: &[&str]) -> String {
    let mut cmd = std::process::Command::new("nft");
    cmd.args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = ns.spawn(cmd).and_then(|c| c.wait_with_output()).unwrap();
    assert!(
        out.status.success(),
        "nft {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The handle of the rule accepting the allow set's destinations: deleting
/// it cuts the allowed destination off (the catch-all rejects are
/// doubled, so no single blocking rule's loss lets anything through).
fn accept_rule(listing: &str, set: &str) -> String {
    listing
        .lines()
        .filter(|l| l.contains(&format!("@{set}")) && l.contains("accept"))
        .find_map(|l| l.rsplit_once("# handle ").map(|(_, h)| h.trim().to_owned()))
        .unwrap_or_else(|| panic!("no accept of @{set} in {listing}"))
}

/// New connections back to back from a sandbox: when each started and
/// whether it connected.
struct Stream {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<(Instant, bool)>>>,
    thread: std::thread::JoinHandle<()>,
}

impl Stream {
    fn start(ns: &Netns, to: SocketAddr) -> Self {
        let ns = ns.try_clone().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (s2, v2) = (stop.clone(), seen.clone());
        let thread = std::thread::spawn(move || {
            while !s2.load(Ordering::Relaxed) {
                let at = Instant::now();
                let r = probe_from(&ns, &Probe::Tcp { to }, PROBE_TIMEOUT);
                let connected = r.observed == corral_drill::lab::Observed::Connected;
                v2.lock().unwrap().push((at, connected));
            }
        });
        Self { stop, seen, thread }
    }

    fn stop(self) -> Vec<(Instant, bool)> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

/// One TCP connection to the allowed destination, echoing a byte every
/// 5 ms.
struct Flow {
    stop: Arc<AtomicBool>,
    echoes: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
    gap_us: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

impl Flow {
    fn start(ns: &Netns) -> Self {
        let mut conn = ns
            .run(|| TcpStream::connect_timeout(&ALLOWED, Duration::from_secs(2)))
            .unwrap()
            .unwrap();
        conn.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (echoes, failures, gap_us) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
        );
        let (s, e, f, g) = (
            stop.clone(),
            echoes.clone(),
            failures.clone(),
            gap_us.clone(),
        );
        let thread = std::thread::spawn(move || {
            let mut last = Instant::now();
            let mut b = [0u8; 1];
            while !s.load(Ordering::Relaxed) {
                let ok = conn.write_all(b"x").is_ok() && conn.read_exact(&mut b).is_ok();
                if ok {
                    let us = u64::try_from(last.elapsed().as_micros()).unwrap_or(u64::MAX);
                    g.fetch_max(us, Ordering::Relaxed);
                    last = Instant::now();
                    e.fetch_add(1, Ordering::Relaxed);
                } else {
                    f.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Self {
            stop,
            echoes,
            failures,
            gap_us,
            thread,
        }
    }

    fn stop(self) -> (u64, u64, f64) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        (
            self.echoes.load(Ordering::Relaxed),
            self.failures.load(Ordering::Relaxed),
            self.gap_us.load(Ordering::Relaxed) as f64 / 1000.0,
        )
    }
}
