//! `corral new` as an operator runs it: the real binary, one process per
//! command, against the local Incus daemon and the busybox test image.
//!
//! 1. **new → exec `true` → rm** against `incus launch` → `incus exec` →
//!    `incus delete -f` of the same image in corral's project (no
//!    profiles, the same pool), interleaved round by round so load on the
//!    machine hits both alike; the ratio of medians. With
//!    `CORRAL_BENCH_BASELINE=/path/to/an/older/corral`, that binary runs
//!    the same cycle in the same rounds (its own state directory), for a
//!    before/after in one run.
//! 2. **new to ready on a built-in profile**: the built-in profiles applied
//!    for real in the host namespace (the built-in test lab), then `corral
//!    new --profile P --json` until it returns — start gate, create and
//!    start (one Incus request), a DHCP lease from the profile's gateway
//!    and exec answering while the template's context file is written, the
//!    canary — with the `ready.ms` it reports (start → lease and exec)
//!    beside it.
//!
//! `cargo bench --profile dev -p corral-cli --bench new [-- N]` (root; Incus and the test
//! image from scripts/incus-setup.sh and scripts/incus-image.sh; the host
//! must be free of corral state for part 2).

// A benchmark reports failures by panicking, like a test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use corral_provider_incus::TEST_IMAGE_ALIAS;
use corral_tests::builtin_lab::BuiltinLab;

const CORRAL: &str = env!("CARGO_BIN_EXE_corral");

/// Run a program; its wall time, or the failure with its stderr.
fn run(program: &str, args: &[&str]) -> Duration {
    let t = Instant::now();
    let out = Command::new(program)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let took = t.elapsed();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

/// Force-deletes an instance when dropped (a round that panicked leaves
/// nothing behind; one that finished deleted it already).
struct Gone(String);

impl Drop for Gone {
    fn drop(&mut self) {
        let _ = Command::new("incus")
            .args(["delete", "-f", &self.0, "--project", "corral"])
            .output();
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `corral new` (no network) → exec → rm with the `corral` binary at
/// `corral`; the time of each step.
fn corral_cycle(corral: &str, state: &Path, name: &str) -> [Duration; 3] {
    let _gone = Gone(name.to_owned());
    let s = state.to_str().unwrap();
    [
        run(
            corral,
            &[
                "new",
                name,
                "--no-network",
                "--image",
                TEST_IMAGE_ALIAS,
                "--state-dir",
                s,
            ],
        ),
        run(corral, &["exec", name, "-n", "--", "true"]),
        run(corral, &["rm", "--force", name, "--state-dir", s]),
    ]
}

/// `incus launch` → exec → delete; the time of each step.
fn incus_cycle(name: &str) -> [Duration; 3] {
    let _gone = Gone(name.to_owned());
    [
        run(
            "incus",
            &[
                "launch",
                TEST_IMAGE_ALIAS,
                name,
                "--no-profiles",
                "-s",
                "default",
                "--project",
                "corral",
            ],
        ),
        run(
            "incus",
            &["exec", name, "--project", "corral", "--", "true"],
        ),
        run("incus", &["delete", "-f", name, "--project", "corral"]),
    ]
}

fn phases(name: &str, all: &[[Duration; 3]]) -> String {
    let steps = ["new/launch", "exec", "rm/delete"];
    let parts: Vec<String> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{s} {:.0}", ms(median(all.iter().map(|p| p[i]).collect()))))
        .collect();
    format!("{name} medians (ms): {}", parts.join(", "))
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10);
    let state = tempfile::tempdir().unwrap();
    let pid = std::process::id();

    // Part 1. One untimed round each first: the clients' caches warm. An
    // older corral (CORRAL_BENCH_BASELINE: its binary) runs the same cycle
    // in the same rounds, with a state directory of its own.
    let baseline = std::env::var("CORRAL_BENCH_BASELINE").ok();
    let base_state = tempfile::tempdir().unwrap();
    corral_cycle(CORRAL, state.path(), &format!("bench-new-warm-{pid}"));
    incus_cycle(&format!("bench-launch-warm-{pid}"));
    if let Some(b) = &baseline {
        corral_cycle(b, base_state.path(), &format!("bench-base-warm-{pid}"));
    }
    let (mut ours, mut theirs, mut base) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        ours.push(corral_cycle(
            CORRAL,
            state.path(),
            &format!("bench-new-{pid}-{i}"),
        ));
        theirs.push(incus_cycle(&format!("bench-launch-{pid}-{i}")));
        if let Some(b) = &baseline {
            base.push(corral_cycle(
                b,
                base_state.path(),
                &format!("bench-base-{pid}-{i}"),
            ));
        }
    }
    let total = |p: &[Duration; 3]| p.iter().sum::<Duration>();
    let m_ours = median(ours.iter().map(total).collect());
    let m_theirs = median(theirs.iter().map(total).collect());
    println!(
        "new -> exec true -> rm (no network) vs incus launch -> exec -> delete -f, {n} rounds interleaved"
    );
    println!("corral: median {:.0} ms", ms(m_ours));
    println!("incus:  median {:.0} ms", ms(m_theirs));
    println!("{}", phases("corral", &ours));
    println!("{}", phases("incus", &theirs));
    println!(
        "ratio corral/incus (median): {:.2}",
        m_ours.as_secs_f64() / m_theirs.as_secs_f64()
    );
    if let Some(b) = &baseline {
        let m_base = median(base.iter().map(total).collect());
        println!("baseline ({b}): median {:.0} ms", ms(m_base));
        println!("{}", phases("baseline", &base));
        println!(
            "ratio baseline/incus (median): {:.2}",
            m_base.as_secs_f64() / m_theirs.as_secs_f64()
        );
    }

    // Part 2.
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    let (config, lab_state) = (lab.config_path(), lab.state_dir());
    let (c, s) = (config.to_str().unwrap(), lab_state.to_str().unwrap());
    run(CORRAL, &["host", "apply", "--config", c, "--state-dir", s]);
    println!(
        "\ncorral new to ready (gate, create and start, lease, exec, canary), {n} each, medians"
    );
    println!(
        "| profile | new wall (ms) | to `created` (ms) | `created` to `started` (ms) | of it, start -> ready (ms) | exec round trip (ms) |"
    );
    for profile in ["isolated", "internet", "allowlist"] {
        let (mut wall, mut ready, mut exec) = (Vec::new(), Vec::new(), Vec::new());
        let (mut to_created, mut to_started) = (Vec::new(), Vec::new());
        for i in 0..n {
            let name = format!("bench-ready-{profile}-{pid}-{i}");
            let _gone = Gone(name.clone());
            let since_epoch = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap();
            let t = Instant::now();
            let out = Command::new(CORRAL)
                .args([
                    "new",
                    &name,
                    "--profile",
                    profile,
                    "--image",
                    TEST_IMAGE_ALIAS,
                    "--json",
                    "--config",
                    c,
                    "--state-dir",
                    s,
                ])
                .output()
                .unwrap();
            wall.push(t.elapsed());
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert!(json["ready"]["lease"].is_string(), "{json}");
            ready.push(Duration::from_millis(
                json["ready"]["ms"].as_u64().unwrap_or(0),
            ));
            // Where the time went: the event log's timestamps (ms).
            let events = Command::new(CORRAL)
                .args(["events", "--sandbox", &name, "--json", "--state-dir", s])
                .output()
                .unwrap();
            let events: serde_json::Value = serde_json::from_slice(&events.stdout).unwrap();
            let at = |kind: &str| {
                events["events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|e| e["event"] == kind)
                    .and_then(|e| e["recorded"].as_u64())
                    .unwrap_or_else(|| panic!("no {kind} event: {events}"))
            };
            let start_ms = u64::try_from(since_epoch.as_millis()).unwrap();
            let (created, started) = (at("created"), at("started"));
            to_created.push(Duration::from_millis(created.saturating_sub(start_ms)));
            to_started.push(Duration::from_millis(started.saturating_sub(created)));
            exec.push(run(CORRAL, &["exec", &name, "-n", "--", "true"]));
            run(CORRAL, &["rm", "--force", &name, "--state-dir", s]);
        }
        println!(
            "| {profile} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
            ms(median(wall)),
            ms(median(to_created)),
            ms(median(to_started)),
            ms(median(ready)),
            ms(median(exec))
        );
    }
    // The lab tears down what the apply made.
    drop(lab);
}
