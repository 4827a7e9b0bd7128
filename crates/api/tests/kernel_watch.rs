//! corrald's own kernel watch, on a real container on the built-in
//! `allowlist` profile (applied for real in the host namespace; see
//! `corral_tests::builtin_lab`): `nft delete table inet corral` behind
//! corral's back is healed by the server itself (no `corral host watch`
//! running), a `host_drift` alert is on record, and the heal asks the
//! watchdog to re-run the canary of the healed profile's running sandbox
//! at once — with the watchdog's own interval at an hour, so a
//! verification after the drift can only be the heal's.
//!
//! Control: the same server with `--no-kernel-watch` leaves the table
//! deleted, records no drift and verifies nothing.
//!
//! With `[host.watch] reaction = "cut"` the same deletion is not healed:
//! corrald cuts the profile's ports and stops its running sandbox, each
//! with an alert (control: under `heal`, above, the sandbox runs on).

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::Server;
use common::incus::{Cleanup, incus_socket, raw_client, status};
use corral_provider_incus::TEST_IMAGE_ALIAS;
use corral_sandbox_core::WatchReaction;
use corral_sandbox_core::config::Config;
use corral_tests::builtin_lab::BuiltinLab;
use serde_json::{Value, json};

/// Bound for the heal and the re-verification (the machine is loaded).
const PATIENCE: Duration = Duration::from_secs(90);
/// How long the control waits for a heal that must not come: several
/// times the watch's slowest heal measured here (under 0.4 s), and
/// longer than its periodic read-back.
const CONTROL_WAIT: Duration = Duration::from_secs(8);

fn events_after(srv: &Server, after: i64) -> Vec<Value> {
    let (s, body) = srv.get(&format!("/v1/events?after={after}"));
    assert_eq!(s, 200, "{body}");
    body["events"].as_array().unwrap().clone()
}

fn max_id(events: &[Value]) -> i64 {
    events
        .iter()
        .filter_map(|e| e["id"].as_i64())
        .max()
        .unwrap_or(0)
}

fn table_present() -> bool {
    Command::new("nft")
        .args(["list", "table", "inet", "corral"])
        .output()
        .unwrap()
        .status
        .success()
}

fn delete_table() {
    let out = Command::new("nft")
        .args(["delete", "table", "inet", "corral"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn server(socket: &str, lab: &BuiltinLab, watch: bool) -> Server {
    let mut args: Vec<String> = vec![
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--incus-socket".into(),
        socket.to_owned(),
        "--config".into(),
        lab.config_path().display().to_string(),
        "--state-dir".into(),
        lab.state_dir().display().to_string(),
        "--reverify-interval-secs".into(),
        "3600".into(),
    ];
    if !watch {
        args.push("--no-kernel-watch".into());
    }
    // The shared helper turns the watch off for every other test; this
    // one is about it.
    let on = if watch { "false" } else { "true" };
    Server::start_with(&args, &[("CORRALD_NO_KERNEL_WATCH", on)], None)
}

#[test]
fn corrald_heals_a_deleted_table_and_reverifies_the_profiles_sandboxes() {
    if !corral_test_support::gate::netns() || !corral_test_support::gate::tool("nft", "nftables") {
        return;
    }
    let Some(socket) = incus_socket("kernel_watch") else {
        return;
    };
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    let name = format!("t-api-kw-{}", std::process::id());
    let _guard = Cleanup {
        client: raw_client(&socket),
        names: vec![name.clone()],
    };
    lab.apply().unwrap_or_else(|e| panic!("{e}"));

    // Control first: no kernel watch, the deleted table stays deleted.
    {
        let srv = server(&socket, &lab, false);
        let mark = max_id(&events_after(&srv, 0));
        delete_table();
        std::thread::sleep(CONTROL_WAIT);
        assert!(!table_present(), "without the watch nothing heals");
        let after = events_after(&srv, mark);
        assert!(
            !after.iter().any(|e| e["event"] == "host_drift"),
            "{after:#?}"
        );
        srv.terminate();
        lab.apply().unwrap_or_else(|e| panic!("{e}"));
    }

    let srv = server(&socket, &lab, true);
    let (s, body) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": name, "image": TEST_IMAGE_ALIAS, "profile": "allowlist"})),
    );
    assert_eq!(s, 201, "{body}");
    let (s, body) = srv.call("POST", &format!("/v1/sandboxes/{name}/start"), None);
    assert_eq!(s, 200, "the canary passes at start: {body}");
    let mark = max_id(&events_after(&srv, 0));

    delete_table();
    let started = Instant::now();
    let after = loop {
        let now = events_after(&srv, mark);
        let drift = now.iter().position(|e| e["event"] == "host_drift");
        let run = now
            .iter()
            .position(|e| e["event"] == "verification" && e["sandbox"] == name.as_str());
        if let (Some(d), Some(r)) = (drift, run) {
            assert!(d < r, "the re-verification comes after the heal: {now:#?}");
            break now;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "no heal and re-verification after {PATIENCE:?}: {now:#?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!(
        "healed and re-verified {} ms after the deletion",
        started.elapsed().as_millis()
    );
    assert!(table_present(), "the heal put the table back");
    let drift = after.iter().find(|e| e["event"] == "host_drift").unwrap();
    assert_eq!(drift["reaction"], "healed", "{drift:#}");
    assert!(
        drift["profiles"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "allowlist"),
        "{drift:#}"
    );
    let run = after
        .iter()
        .find(|e| e["event"] == "verification" && e["sandbox"] == name.as_str())
        .unwrap();
    assert_eq!(run["outcome"], "passed", "{run:#}");
    let (s, info) = srv.get(&format!("/v1/sandboxes/{name}"));
    assert_eq!(s, 200, "{info}");
    assert_eq!(info["state"], "running", "{info:#}");
}

#[test]
fn with_cut_corrald_stops_the_profiles_sandboxes_instead_of_healing() {
    if !corral_test_support::gate::netns() || !corral_test_support::gate::tool("nft", "nftables") {
        return;
    }
    let Some(socket) = incus_socket("kernel_watch") else {
        return;
    };
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    let client = raw_client(&socket);
    let name = format!("t-api-kc-{}", std::process::id());
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone()],
    };
    // The reaction is read from what was applied: write it, then apply.
    let path = lab.config_path();
    let mut config = Config::from_toml_str(&std::fs::read_to_string(&path).unwrap(), "lab")
        .unwrap_or_else(|e| panic!("{e}"));
    config.host.watch.reaction = WatchReaction::Cut;
    std::fs::write(&path, config.to_toml_string()).unwrap();
    lab.apply().unwrap_or_else(|e| panic!("{e}"));

    let srv = server(&socket, &lab, true);
    let (s, body) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": name, "image": TEST_IMAGE_ALIAS, "profile": "allowlist"})),
    );
    assert_eq!(s, 201, "{body}");
    let (s, body) = srv.call("POST", &format!("/v1/sandboxes/{name}/start"), None);
    assert_eq!(s, 200, "the canary passes at start: {body}");
    assert_eq!(status(&client, &name).as_deref(), Some("Running"));
    let mark = max_id(&events_after(&srv, 0));

    delete_table();
    let started = Instant::now();
    let (drift, alert) = loop {
        let now = events_after(&srv, mark);
        let drift = now.iter().find(|e| e["event"] == "host_drift").cloned();
        let (s, mine) = srv.get(&format!("/v1/events?sandbox={name}&after={mark}"));
        assert_eq!(s, 200, "{mine}");
        let alert = mine["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["event"] == "alert")
            .cloned();
        if let (Some(d), Some(a)) = (drift, alert) {
            break (d, a);
        }
        assert!(
            started.elapsed() < PATIENCE,
            "no cut and stop after {PATIENCE:?}: {now:#?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!(
        "cut and stopped {} ms after the deletion",
        started.elapsed().as_millis()
    );
    assert_eq!(drift["reaction"], "cut", "{drift:#}");
    assert!(
        drift["profiles"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "allowlist"),
        "{drift:#}"
    );
    let reason = alert["reason"].as_str().unwrap();
    assert!(reason.contains("cut its port and stopped it"), "{alert:#}");
    assert_eq!(status(&client, &name).as_deref(), Some("Stopped"));
    assert!(!table_present(), "cut does not heal");
}
