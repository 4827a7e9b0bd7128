//! `corral new` to ready on each built-in profile with 0, 1 and 10
//! running siblings on the same profile: the real binary, one process per
//! command, against the local Incus daemon and the busybox test image, the
//! built-in profiles applied for real in the host namespace (the built-in
//! test lab).
//!
//! Per profile and sibling count: `N` timed `corral new --json` (each
//! removed again before the next), the wall time's median and p95, and
//! the steps the command reports (`ready.steps`: create, lease, exec
//! ready, canary), the canary's median and p95 apart. The baseline is the
//! same profile with no sibling, in the same run: the ratio says what a
//! sibling costs. With `CORRAL_BENCH_BASELINE=/path/to/an/older/corral`
//! that binary's wall time runs interleaved, round by round, in the same
//! lab (it reports no steps; only its wall time is read).
//!
//! `cargo bench --profile dev -p corral-cli --bench new_siblings [-- N]`
//! (root; Incus and the test image from scripts/incus-setup.sh and
//! scripts/incus-image.sh; the host must be free of corral state).

// A benchmark reports failures by panicking, like a test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use corral_provider_incus::TEST_IMAGE_ALIAS;
use corral_tests::builtin_lab::BuiltinLab;

const CORRAL: &str = env!("CARGO_BIN_EXE_corral");

/// A check's elapsed times and its control's (ms).
type Timings = (Vec<f64>, Vec<f64>);

/// Sibling counts measured.
const SIBLINGS: [usize; 3] = [0, 1, 10];

/// Force-deletes an instance when dropped (a panicking round leaves
/// nothing behind).
struct Gone(String);

impl Drop for Gone {
    fn drop(&mut self) {
        let _ = Command::new("incus")
            .args(["delete", "-f", &self.0, "--project", "corral"])
            .output();
    }
}

struct Lab<'a> {
    config: &'a str,
    state: &'a str,
}

impl Lab<'_> {
    /// `corral new NAME --profile P --json` with `corral`; its wall time
    /// and its JSON.
    fn new_sandbox(
        &self,
        corral: &str,
        name: &str,
        profile: &str,
    ) -> (Duration, serde_json::Value) {
        let t = Instant::now();
        let out = Command::new(corral)
            .args([
                "new",
                name,
                "--profile",
                profile,
                "--image",
                TEST_IMAGE_ALIAS,
                "--json",
                "--config",
                self.config,
                "--state-dir",
                self.state,
            ])
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let took = t.elapsed();
        assert!(
            out.status.success(),
            "{corral} new {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        (took, serde_json::from_slice(&out.stdout).unwrap())
    }

    /// Each check of `name`'s verification event: kind, elapsed and the
    /// control's elapsed (ms).
    fn checks(&self, name: &str) -> Vec<(String, f64, Option<f64>)> {
        let out = Command::new(CORRAL)
            .args([
                "events",
                "--sandbox",
                name,
                "--json",
                "--state-dir",
                self.state,
            ])
            .output()
            .unwrap();
        let events: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let v = events["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["event"] == "verification")
            .unwrap_or_else(|| panic!("no verification event for {name}: {events}"))
            .clone();
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["kind"].as_str().unwrap().to_owned(),
                    c["elapsed_ms"].as_f64().unwrap(),
                    c["control"]["elapsed_ms"].as_f64(),
                )
            })
            .collect()
    }

    fn rm(&self, name: &str) {
        let out = Command::new(CORRAL)
            .args(["rm", "--force", name, "--state-dir", self.state])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "rm {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The value at quantile `q` (nearest rank) of `v`, in milliseconds.
fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn step(json: &serde_json::Value, key: &str) -> f64 {
    json["ready"]["steps"][key].as_f64().unwrap_or(0.0)
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10);
    let baseline = std::env::var("CORRAL_BENCH_BASELINE").ok();
    let pid = std::process::id();
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    let (config, state) = (lab.config_path(), lab.state_dir());
    let l = Lab {
        config: config.to_str().unwrap(),
        state: state.to_str().unwrap(),
    };
    let apply = Command::new(CORRAL)
        .args([
            "host",
            "apply",
            "--config",
            l.config,
            "--state-dir",
            l.state,
        ])
        .output()
        .unwrap();
    assert!(
        apply.status.success(),
        "host apply: {}",
        String::from_utf8_lossy(&apply.stderr)
    );
    // One untimed round: the clients' caches warm.
    {
        let name = format!("bench-sib-warm-{pid}");
        let _gone = Gone(name.clone());
        l.new_sandbox(CORRAL, &name, "isolated");
        l.rm(&name);
    }
    println!("corral new to ready with running siblings on the profile, {n} runs each (ms)");
    println!(
        "| profile | siblings | wall median | wall p95 | canary median | canary p95 | create | lease | exec ready | wall / 0 siblings | baseline wall median | baseline p95 | baseline lease |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut per_check: BTreeMap<(&str, String), Timings> = BTreeMap::new();
    for profile in ["isolated", "internet", "allowlist"] {
        let mut siblings: Vec<Gone> = Vec::new();
        let mut zero_median = None;
        for count in SIBLINGS {
            while siblings.len() < count {
                let name = format!("bench-sib-{profile}-{pid}-s{}", siblings.len());
                let g = Gone(name.clone());
                l.new_sandbox(CORRAL, &name, profile);
                siblings.push(g);
            }
            let (mut wall, mut canary) = (Vec::new(), Vec::new());
            let (mut create, mut lease, mut exec) = (Vec::new(), Vec::new(), Vec::new());
            let (mut base, mut base_lease) = (Vec::new(), Vec::new());
            for i in 0..n {
                let name = format!("bench-sib-{profile}-{pid}-{count}-{i}");
                let _gone = Gone(name.clone());
                let (took, json) = l.new_sandbox(CORRAL, &name, profile);
                if count == 1 {
                    for (kind, e, c) in l.checks(&name) {
                        let slot = per_check
                            .entry((profile, kind))
                            .or_insert_with(|| (Vec::new(), Vec::new()));
                        slot.0.push(e);
                        slot.1.extend(c);
                    }
                }
                l.rm(&name);
                wall.push(ms(took));
                canary.push(step(&json, "canary_ms"));
                create.push(step(&json, "create_ms"));
                lease.push(step(&json, "lease_ms"));
                exec.push(step(&json, "exec_ms"));
                if let Some(b) = &baseline {
                    let name = format!("bench-sib-base-{profile}-{pid}-{count}-{i}");
                    let _gone = Gone(name.clone());
                    let (took, json) = l.new_sandbox(b, &name, profile);
                    l.rm(&name);
                    base.push(ms(took));
                    base_lease.extend(json["ready"]["steps"]["lease_ms"].as_f64());
                }
            }
            let med = quantile(&wall, 0.5);
            let zero = *zero_median.get_or_insert(med);
            let (bm, bp) = if base.is_empty() {
                ("-".to_owned(), "-".to_owned())
            } else {
                (
                    format!("{:.0}", quantile(&base, 0.5)),
                    format!("{:.0}", quantile(&base, 0.95)),
                )
            };
            // An older baseline may report no steps.
            let bl = if base_lease.is_empty() {
                "-".to_owned()
            } else {
                format!("{:.0}", quantile(&base_lease, 0.5))
            };
            println!(
                "| {profile} | {count} | {med:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {bm} | {bp} | {bl} |",
                quantile(&wall, 0.95),
                quantile(&canary, 0.5),
                quantile(&canary, 0.95),
                quantile(&create, 0.5),
                quantile(&lease, 0.5),
                quantile(&exec, 0.5),
                med / zero,
            );
        }
        for s in &siblings {
            l.rm(&s.0);
        }
    }
    println!("\nper check, one sibling running, {n} runs (ms)");
    println!("| profile | check | median | p95 | control median |");
    println!("|---|---|---|---|---|");
    for ((profile, kind), (e, c)) in &per_check {
        let control = if c.is_empty() {
            "-".to_owned()
        } else {
            format!("{:.0}", quantile(c, 0.5))
        };
        println!(
            "| {profile} | {kind} | {:.0} | {:.0} | {control} |",
            quantile(e, 0.5),
            quantile(e, 0.95)
        );
    }
    // The lab tears down what the apply made.
    drop(lab);
}
