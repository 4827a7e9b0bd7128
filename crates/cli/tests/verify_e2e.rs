//! Per-sandbox verification end to end: the real `corral` binary, real
//! Incus containers on each built-in profile (applied for real in the HOST
//! namespace by `corral host apply`; see `corral_tests::builtin_lab` for
//! what that lab refuses to touch and how it cleans up), and the canary
//! destinations in a namespace of the lab's own.
//!
//! Sabotage is done behind corral's back with `nft`, by what a rule does
//! (the profile's final reject rules; an accept for the canary address),
//! never by a rule's position.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use common::{Run, corral, schema};
use corral_provider_incus::api::Instance;
use corral_provider_incus::{IncusClient, IncusConfig, IncusProvider, TEST_IMAGE_ALIAS};
use corral_tests::builtin_lab::{BuiltinLab, CANARY};
use http::Method;
use serde_json::{Value, json};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Incus's own API on corral's project, or `None` (a counted skip).
fn incus() -> Option<IncusClient> {
    if !corral_test_support::gate::netns() || !corral_test_support::gate::tool("nft", "nftables") {
        return None;
    }
    corral_test_support::gate::incus()?;
    static ONCE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _once = ONCE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Some(
        runtime()
            .block_on(IncusProvider::connect(IncusConfig::local()))
            .unwrap_or_else(|e| panic!("cannot connect to Incus: {e}"))
            .client()
            .clone(),
    )
}

fn incus_status(client: &IncusClient, name: &str) -> Option<String> {
    runtime()
        .block_on(client.get::<Instance>(&format!("/1.0/instances/{name}")))
        .ok()
        .map(|i| i.status)
}

/// Force-deletes the named instances when dropped.
struct Cleanup {
    client: IncusClient,
    names: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let wait = Duration::from_secs(60);
        runtime().block_on(async {
            for name in &self.names {
                let path = format!("/1.0/instances/{name}");
                let stop = json!({"action": "stop", "force": true});
                let _ = self
                    .client
                    .run(Method::PUT, &format!("{path}/state"), Some(&stop), wait)
                    .await;
                let _ = self.client.run(Method::DELETE, &path, None, wait).await;
            }
        });
    }
}

fn unique(tag: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "t-vfy-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// `corral ARGS… --config C --state-dir S` for the lab.
fn in_lab(lab: &BuiltinLab, args: &[&str]) -> Run {
    let config = lab.config_path();
    let state = lab.state_dir();
    let mut all: Vec<&str> = args.to_vec();
    all.extend([
        "--config",
        config.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
    ]);
    corral(&all)
}

fn new(lab: &BuiltinLab, name: &str, profile: &str) -> Run {
    in_lab(
        lab,
        &[
            "new",
            name,
            "--profile",
            profile,
            "--image",
            TEST_IMAGE_ALIAS,
            "--json",
        ],
    )
}

/// The checks of a report (or a verification event), by kind.
fn checks(event: &Value) -> Vec<&Value> {
    event["checks"].as_array().unwrap().iter().collect()
}

fn kinds(event: &Value) -> BTreeSet<String> {
    checks(event)
        .iter()
        .map(|c| c["kind"].as_str().unwrap().to_owned())
        .collect()
}

fn set(words: &[&str]) -> BTreeSet<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// Every check passed, took a measured time within its bound, and every
/// control reached its destination.
fn assert_all_passed(event: &Value) {
    assert_eq!(event["outcome"], "passed", "{event:#}");
    for c in checks(event) {
        assert_eq!(c["passed"], true, "{c:#}");
        assert!(c["bound_ms"].as_u64().unwrap() > 0);
        assert!(c["elapsed_ms"].is_u64(), "{c:#}");
        if !c["control"].is_null() {
            assert_eq!(c["control"]["reached"], true, "{c:#}");
        }
    }
}

/// `nft` as an independent hand behind corral's back.
fn nft(args: &[&str]) -> String {
    let out = Command::new("nft").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "nft {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Delete the profile's final block rules from its `<profile>-out` chain:
/// the rules whose verdict is reject or drop and that match no port (the
/// DNS blocks match port 53 and stay). Returns how many were deleted.
fn delete_final_block_rules(profile: &str) -> usize {
    let chain = format!("{profile}-out");
    let listing = nft(&["-a", "list", "chain", "inet", "corral", &chain]);
    let mut handles = Vec::new();
    for line in listing.lines().map(str::trim) {
        let Some((rule, handle)) = line.rsplit_once(" # handle ") else {
            continue;
        };
        let blocks = rule.contains(" reject") || rule.ends_with(" drop");
        // The final block rules only: not a port's, not the drop of
        // related packets of flows the profile does not own.
        if blocks && !rule.contains("dport") && !rule.contains("ct state") {
            handles.push(handle.to_owned());
        }
    }
    for h in &handles {
        nft(&["delete", "rule", "inet", "corral", &chain, "handle", h]);
    }
    handles.len()
}

/// Insert, first in `<profile>-out`, an accept for the canary address.
fn accept_canary(profile: &str) {
    nft(&[
        "insert",
        "rule",
        "inet",
        "corral",
        &format!("{profile}-out"),
        "ip",
        "daddr",
        &CANARY.ip().to_string(),
        "accept",
    ]);
}

#[test]
fn every_builtin_profile_passes_its_canary_in_a_real_container() {
    let Some(client) = incus() else { return };
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<(String, &str)> = ["isolated", "internet", "allowlist"]
        .into_iter()
        .map(|p| (unique(&p[..3]), p))
        .collect();
    let sibling = unique("sib");
    let mut all: Vec<String> = names.iter().map(|(n, _)| n.clone()).collect();
    all.push(sibling.clone());
    let _guard = Cleanup {
        client: client.clone(),
        names: all,
    };
    in_lab(&lab, &["host", "apply"]).expect_code(0);

    let want = |profile: &str| match profile {
        "isolated" => set(&[
            "canary-blocked",
            "ipv6-blocked",
            "host-lan-blocked",
            "gateway-port-blocked",
            "metadata-blocked",
            "foreign-resolver-blocked",
        ]),
        "internet" => set(&[
            "allowed-connects",
            "allowed-udp",
            "ipv6-allowed",
            "host-lan-blocked",
            "gateway-port-blocked",
            "metadata-blocked",
            "foreign-resolver-blocked",
        ]),
        _ => set(&[
            "allowed-connects",
            "canary-blocked",
            "ipv6-blocked",
            "host-lan-blocked",
            "gateway-port-blocked",
            "metadata-blocked",
            "foreign-resolver-blocked",
            "unlisted-name-unresolved",
        ]),
    };
    for (name, profile) in &names {
        // `new` runs the canary before it hands the sandbox out.
        let made = new(&lab, name, profile).expect_code(0).json();
        assert_eq!(made["info"]["state"], "running", "{made}");
        let report = in_lab(&lab, &["verify", name, "--json"])
            .expect_code(0)
            .json();
        assert_eq!(report["schema"], "corral.verify.v1");
        schema::check(&report);
        assert_eq!(report["passed"], true, "{report:#}");
        assert_eq!(report["site"]["site"], "host-namespace", "{report:#}");
        assert_eq!(report["profile"], *profile);
        assert_eq!(kinds(&report["event"]), want(profile), "{profile}");
        assert_all_passed(&report["event"]);

        // Both runs are on record, with their per-check timings.
        let events = in_lab(&lab, &["events", "--sandbox", name, "--json"])
            .expect_code(0)
            .json();
        schema::check(&events);
        let runs: Vec<&Value> = events["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["event"] == "verification")
            .collect();
        assert_eq!(runs.len(), 2, "{events:#}");
        for run in runs {
            assert_all_passed(run);
            assert_eq!(kinds(run), want(profile));
        }
        let human = in_lab(&lab, &["verify", name]).expect_code(0);
        assert!(human.stdout.contains("verified"), "{}", human.stdout);
        assert!(human.stdout.contains("canary") || *profile == "internet");
    }

    // A second sandbox on a profile also proves it cannot reach the first
    // (the host's own ping of the first is the control).
    let made = new(&lab, &sibling, "allowlist").expect_code(0).json();
    assert_eq!(made["info"]["state"], "running");
    let report = in_lab(&lab, &["verify", &sibling, "--json"])
        .expect_code(0)
        .json();
    let sib = checks(&report["event"])
        .into_iter()
        .find(|c| c["kind"] == "sibling-blocked")
        .unwrap_or_else(|| panic!("no sibling check: {report:#}"))
        .clone();
    assert_eq!(sib["passed"], true, "{sib:#}");
    assert_eq!(sib["control"]["reached"], true, "{sib:#}");

    let gate = in_lab(&lab, &["gate", "--json"]).expect_code(0).json();
    schema::check(&gate);
    for (name, _) in &names {
        let rec = gate["sandboxes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name.as_str())
            .unwrap_or_else(|| panic!("{name} not in {gate:#}"));
        assert_eq!(rec["verdict"], "passed", "{rec}");
        assert!(rec["last_verified"].is_u64());
    }
}

#[test]
fn sabotage_behind_corrals_back_fails_corral_verify() {
    let Some(client) = incus() else { return };
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    let (iso, allow, refused) = (unique("iso"), unique("allow"), unique("refused"));
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![iso.clone(), allow.clone(), refused.clone()],
    };
    in_lab(&lab, &["host", "apply"]).expect_code(0);
    new(&lab, &iso, "isolated").expect_code(0);
    new(&lab, &allow, "allowlist").expect_code(0);

    // The profile's final reject rules deleted.
    // Each blocking rule comes with its drop-log twin (the over-budget
    // one): tcp reset and icmpx, twice.
    assert_eq!(
        delete_final_block_rules("isolated"),
        4,
        "tcp reset + icmpx, each logged and over budget"
    );
    // The base chains' fail-closed drop (a corral bridge whose profile's
    // chains let a packet fall through) still holds the canary back.
    let held = in_lab(&lab, &["verify", &iso, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(held["passed"], true, "{held:#}");
    // An accept for the canary address, inserted first: now it gets out.
    accept_canary("isolated");
    let run = in_lab(&lab, &["verify", &iso, "--json"]).expect_code(1);
    let report = run.json();
    schema::check(&report);
    assert_eq!(report["passed"], false);
    assert_eq!(report["action"], "stopped", "fail closed: {report:#}");
    let failed: BTreeSet<String> = checks(&report["event"])
        .into_iter()
        .filter(|c| c["passed"] == false)
        .map(|c| c["kind"].as_str().unwrap().to_owned())
        .collect();
    assert!(failed.contains("canary-blocked"), "{report:#}");
    let canary = checks(&report["event"])
        .into_iter()
        .find(|c| c["kind"] == "canary-blocked")
        .unwrap()
        .clone();
    assert_eq!(canary["observed"], "connected", "{canary:#}");
    assert_eq!(incus_status(&client, &iso).as_deref(), Some("Stopped"));
    // The start gate sees the same sabotage as drift: no new sandbox starts.
    let run = new(&lab, &refused, "isolated").expect_code(1);
    assert!(run.stderr.contains("not enforced"), "{}", run.stderr);
    assert_eq!(incus_status(&client, &refused), None);

    // An accept for the canary address, inserted before everything.
    accept_canary("allowlist");
    let human = in_lab(&lab, &["verify", &allow]).expect_code(1);
    assert!(
        human.stdout.contains("verification FAILED"),
        "{}",
        human.stdout
    );
    assert!(human.stdout.contains("canary-blocked"), "{}", human.stdout);
    assert!(human.stdout.contains("FAIL"), "{}", human.stdout);
    assert_eq!(incus_status(&client, &allow).as_deref(), Some("Stopped"));

    // Each failure is on record as a failed verification and an alert.
    let events = in_lab(&lab, &["events", "--json"]).expect_code(0).json();
    schema::check(&events);
    for name in [&iso, &allow] {
        let mine: Vec<&Value> = events["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"] == name.as_str() || e["sandbox"] == name.as_str())
            .collect();
        assert!(
            mine.iter()
                .any(|e| e["event"] == "verification" && e["outcome"] == "failed"),
            "{name}: {mine:#?}"
        );
        assert!(
            mine.iter()
                .any(|e| e["event"] == "alert" && e["alert"] == true),
            "{name}: {mine:#?}"
        );
    }
    let gate = in_lab(&lab, &["gate", "--json"]).expect_code(0).json();
    let verdict = |n: &str| {
        gate["sandboxes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == n)
            .map(|s| s["verdict"].clone())
    };
    assert_eq!(verdict(&iso), Some(json!("failed")));

    // Restored by apply: the sandbox starts (its canary passes again).
    in_lab(&lab, &["host", "apply"]).expect_code(0);
    in_lab(&lab, &["start", &iso]).expect_code(0);
    in_lab(&lab, &["verify", &iso]).expect_code(0);
}

/// The kinds a default host's canary plans on `profile` with no sibling
/// (sibling-blocked joins them on a second sandbox), and the ones it
/// leaves out.
fn default_host_plan(profile: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    match profile {
        "isolated" => (
            set(&[
                "canary-blocked",
                "ipv6-blocked",
                "host-lan-blocked",
                "gateway-port-blocked",
                "metadata-blocked",
                "foreign-resolver-blocked",
            ]),
            set(&["sibling-blocked"]),
        ),
        "internet" => (
            set(&[
                "allowed-connects",
                "allowed-udp",
                "ipv6-allowed",
                "host-lan-blocked",
                "gateway-port-blocked",
                "metadata-blocked",
                "foreign-resolver-blocked",
            ]),
            set(&["sibling-blocked"]),
        ),
        _ => (
            set(&[
                "allowed-connects",
                "canary-blocked",
                "ipv6-blocked",
                "host-lan-blocked",
                "gateway-port-blocked",
                "metadata-blocked",
                "foreign-resolver-blocked",
            ]),
            set(&["allowed-udp", "sibling-blocked", "unlisted-name-unresolved"]),
        ),
    }
}

fn not_planned(event: &Value) -> BTreeSet<String> {
    event["not_planned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            assert_eq!(n["could_not_run"], false, "{n:#}");
            n["kind"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// `accept_dad` of eth0 and of the namespace's default, read in `name`.
fn accept_dad(lab: &BuiltinLab, name: &str) -> Vec<String> {
    let config = lab.config_path();
    let state = lab.state_dir();
    let conf = "/proc/sys/net/ipv6/conf";
    corral(&[
        "exec",
        name,
        "-n",
        "--config",
        config.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "--",
        "cat",
        &format!("{conf}/eth0/accept_dad"),
        &format!("{conf}/default/accept_dad"),
    ])
    .expect_code(0)
    .stdout
    .split_whitespace()
    .map(str::to_owned)
    .collect()
}

fn own_link_exists() -> bool {
    std::path::Path::new("/sys/class/net/corral-canary").exists()
}

#[test]
fn a_default_host_runs_a_complete_canary_on_every_builtin_profile() {
    let Some(client) = incus() else { return };
    let lab = BuiltinLab::default_host().unwrap_or_else(|e| panic!("{e}"));
    let profiles = ["isolated", "internet", "allowlist"];
    let pairs: Vec<(String, String, &str)> = profiles
        .into_iter()
        .map(|p| (unique(&p[..3]), unique(&format!("{}2", &p[..3])), p))
        .collect();
    let _guard = Cleanup {
        client: client.clone(),
        names: pairs
            .iter()
            .flat_map(|(a, b, _)| [a.clone(), b.clone()])
            .collect(),
    };
    assert!(!own_link_exists(), "corral's targets before any apply");
    in_lab(&lab, &["host", "apply"]).expect_code(0);
    assert!(
        own_link_exists(),
        "`corral host apply` brings its own targets"
    );
    lab.route_own_targets().unwrap_or_else(|e| panic!("{e}"));

    for (first, second, profile) in &pairs {
        let (want, skipped) = default_host_plan(profile);
        let made = new(&lab, first, profile).expect_code(0).json();
        assert_eq!(made["info"]["state"], "running", "{made}");
        // corral turned duplicate address detection off on the NIC; the
        // control is the namespace's default, what eth0 had without it.
        assert_eq!(
            accept_dad(&lab, first),
            ["0", "1"],
            "{profile}: eth0, default"
        );
        let report = in_lab(&lab, &["verify", first, "--json"])
            .expect_code(0)
            .json();
        schema::check(&report);
        assert_eq!(kinds(&report["event"]), want, "{profile}: {report:#}");
        assert_eq!(not_planned(&report["event"]), skipped, "{profile}");
        assert_all_passed(&report["event"]);

        // A second sandbox adds the sibling check: nothing else is left out
        // but what has no target on a default host.
        let made = new(&lab, second, profile).expect_code(0).json();
        let report = in_lab(&lab, &["verify", second, "--json"])
            .expect_code(0)
            .json();
        let mut want = want.clone();
        want.insert("sibling-blocked".to_owned());
        let mut skipped = skipped.clone();
        skipped.remove("sibling-blocked");
        assert_eq!(kinds(&report["event"]), want, "{profile}: {report:#}");
        assert_eq!(not_planned(&report["event"]), skipped, "{profile}");
        assert_all_passed(&report["event"]);
        // What docs/verification.md's default-host table reports.
        let per_check: Vec<String> = checks(&report["event"])
            .iter()
            .map(|c| {
                format!(
                    "{} {} ms (control {})",
                    c["kind"].as_str().unwrap(),
                    c["elapsed_ms"],
                    c["control"]["elapsed_ms"]
                )
            })
            .collect();
        eprintln!(
            "default host {profile}: new canary {} ms; verify: {}",
            made["ready"]["steps"]["canary_ms"],
            per_check.join(", ")
        );
    }

    // The control that the target answers the sandbox when corral's rule
    // is not in the way: an accept for it, first in the profile's chain.
    let (iso, _, _) = &pairs[0];
    nft(&[
        "insert",
        "rule",
        "inet",
        "corral",
        "isolated-out",
        "ip",
        "daddr",
        "198.51.100.253",
        "accept",
    ]);
    let report = in_lab(&lab, &["verify", iso, "--json"])
        .expect_code(1)
        .json();
    let canary = checks(&report["event"])
        .into_iter()
        .find(|c| c["kind"] == "canary-blocked")
        .unwrap()
        .clone();
    assert_eq!(canary["passed"], false, "{canary:#}");
    assert_eq!(canary["observed"], "connected", "{canary:#}");
    // The IPv6 reach check can fail: a reject for corral's IPv6 target,
    // first in the internet profile's chain, and the same sandbox's
    // `ipv6-allowed` (which passed above) is refused.
    let (net, _, _) = &pairs[1];
    nft(&[
        "insert",
        "rule",
        "inet",
        "corral",
        "internet-out",
        "ip6",
        "daddr",
        "2001:db8:ca7::2",
        "reject",
    ]);
    let report = in_lab(&lab, &["verify", net, "--json"])
        .expect_code(1)
        .json();
    let v6 = checks(&report["event"])
        .into_iter()
        .find(|c| c["kind"] == "ipv6-allowed")
        .unwrap()
        .clone();
    assert_eq!(v6["passed"], false, "{v6:#}");
    assert_ne!(v6["observed"], "connected", "{v6:#}");
    // An apply puts the rules back and keeps the targets as they are.
    in_lab(&lab, &["host", "apply"]).expect_code(0);
    assert!(own_link_exists());
    // The failed canary stopped the sandbox (fail closed).
    in_lab(&lab, &["start", net]).expect_code(0);
    in_lab(&lab, &["verify", net]).expect_code(0);

    // Removing corral's host state removes its targets. The sandboxes go
    // first: a forced teardown under running containers leaves Incus their
    // host-side veths, whose names the next sandbox at that address needs.
    for (a, b, _) in &pairs {
        in_lab(&lab, &["rm", "--force", a]).expect_code(0);
        in_lab(&lab, &["rm", "--force", b]).expect_code(0);
    }
    in_lab(&lab, &["host", "teardown"]).expect_code(0);
    assert!(!own_link_exists(), "the targets outlived the teardown");
    assert!(!lab.state_dir().join("canary-netns").exists());
}
