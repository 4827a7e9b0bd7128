//! corrald's watchdog with a short interval, on a real container on the
//! built-in `isolated` profile (applied for real in the host namespace; see
//! `corral_tests::builtin_lab`): the sandbox passes its canary when it
//! starts; an accept for the canary address is then inserted behind
//! corral's back; the next re-verification fails, the sandbox is stopped
//! and the failure is on record, while a sandbox on another profile keeps
//! running and passing. The watchdog's promise — no interval
//! passes with the sabotage unnoticed — is checked by order, not by the
//! clock: of the runs recorded after the sabotage, only the one already
//! under way may pass; the next one fails.
//! Then the endpoints `POST /v1/sandboxes/{name}/verify` and
//! `GET /v1/verification` are checked against the same sandbox. Last, the
//! stopped sandbox (verdict `failed`) is started behind corral's back with
//! Incus's API: the watchdog verifies it anyway, whatever its last verdict,
//! and stops it while the sabotage stands; the control, the sabotage taken
//! out and the same start behind corral's back, is verified, passes and
//! runs on.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use axum::http::Method;
use common::incus::{Cleanup, incus_socket, raw_client, runtime, status};
use common::{Server, assert_error};
use corral_provider_incus::{IncusClient, TEST_IMAGE_ALIAS};
use corral_tests::builtin_lab::{BuiltinLab, CANARY};
use serde_json::{Value, json};

/// The watchdog's interval in this test.
const INTERVAL_SECS: u64 = 2;
/// A generous bound for the watchdog to act (the machine is loaded; the
/// assertion about timeliness is the ordering one, not this).
const PATIENCE: Duration = Duration::from_secs(120);
/// The watchdog's hand-out grace in this test: longer than a start through
/// corrald takes here, so it never races the hand-outs the test makes.
const GRACE_SECS: u64 = 20;

fn events(srv: &Server, name: &str, after: i64) -> Vec<Value> {
    let (s, body) = srv.get(&format!("/v1/events?sandbox={name}&after={after}"));
    assert_eq!(s, 200, "{body}");
    body["events"].as_array().unwrap().clone()
}

#[test]
fn the_watchdog_stops_a_sandbox_whose_rules_were_sabotaged() {
    if !corral_test_support::gate::netns() || !corral_test_support::gate::tool("nft", "nftables") {
        return;
    }
    let Some(socket) = incus_socket("watchdog") else {
        return;
    };
    let client = raw_client(&socket);
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    let name = format!("t-api-wd-{}", std::process::id());
    let other = format!("t-api-wd2-{}", std::process::id());
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone(), other.clone()],
    };
    lab.apply().unwrap_or_else(|e| panic!("{e}"));
    let srv = Server::start_exact(&[
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--incus-socket".into(),
        socket.clone(),
        "--config".into(),
        lab.config_path().display().to_string(),
        "--state-dir".into(),
        lab.state_dir().display().to_string(),
        "--reverify-interval-secs".into(),
        INTERVAL_SECS.to_string(),
        "--handout-grace-secs".into(),
        GRACE_SECS.to_string(),
    ]);
    for (n, profile) in [(&name, "isolated"), (&other, "allowlist")] {
        let (s, body) = srv.call(
            "POST",
            "/v1/sandboxes",
            Some(&json!({"name": n, "image": TEST_IMAGE_ALIAS, "profile": profile})),
        );
        assert_eq!(s, 201, "{body}");
        let (s, body) = srv.call("POST", &format!("/v1/sandboxes/{n}/start"), None);
        assert_eq!(s, 200, "the canary passes at start: {body}");
    }
    // On demand: the same canary through the API.
    let (s, report) = srv.call("POST", &format!("/v1/sandboxes/{other}/verify"), None);
    assert_eq!(s, 200, "{report}");
    assert_eq!(report["passed"], true, "{report:#}");
    assert!(report["event"]["checks"].as_array().unwrap().len() >= 5);

    let before = events(&srv, &name, 0);
    assert!(
        before
            .iter()
            .any(|e| e["event"] == "verification" && e["outcome"] == "passed"),
        "{before:#?}"
    );
    let mark = before
        .iter()
        .filter_map(|e| e["id"].as_i64())
        .max()
        .unwrap();

    // Sabotage: an accept for the canary, first in the profile's egress chain.
    common::nft_accept_first("isolated-out", CANARY.ip());

    let started = Instant::now();
    let after = loop {
        let now = events(&srv, &name, mark);
        if now.iter().any(|e| e["event"] == "alert") {
            break now;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "no alert after {PATIENCE:?}: {now:#?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    eprintln!(
        "watchdog noticed the sabotage {} ms after it (interval {INTERVAL_SECS} s)",
        started.elapsed().as_millis()
    );
    // The run that was under way when the rule went in may still pass (its
    // canary probe went before the rule); the next one must fail.
    let runs: Vec<&Value> = after
        .iter()
        .filter(|e| e["event"] == "verification")
        .collect();
    let failed_at = runs
        .iter()
        .position(|e| e["outcome"] == "failed")
        .unwrap_or_else(|| panic!("no failed run: {runs:#?}"));
    assert!(
        failed_at <= 1,
        "the sabotage went unnoticed by {failed_at} runs: {runs:#?}"
    );
    let first = runs[failed_at];
    let canary = first["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "canary-blocked")
        .unwrap();
    assert_eq!(canary["passed"], false, "{canary:#}");
    assert!(after.iter().any(|e| e["event"] == "stopped"), "{after:#?}");
    assert_eq!(status(&client, &name).as_deref(), Some("Stopped"));

    // The sandbox on the profile nobody touched keeps running and passing.
    assert_eq!(status(&client, &other).as_deref(), Some("Running"));
    let (s, report) = srv.call("POST", &format!("/v1/sandboxes/{other}/verify"), None);
    assert_eq!(s, 200, "{report}");
    assert_eq!(report["passed"], true, "{report:#}");
    let (s, body) = srv.call("POST", &format!("/v1/sandboxes/{name}/verify"), None);
    assert_error(s, &body, 409, "invalid_state");

    let (s, gate) = srv.get("/v1/verification");
    assert_eq!(s, 200, "{gate}");
    let rec = gate["sandboxes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name.as_str())
        .unwrap_or_else(|| panic!("{gate:#}"));
    assert_eq!(rec["verdict"], "failed", "{rec}");
    // Incus never served this kind's opt-in: nothing is demoted.
    assert_eq!(gate["kinds"], json!([]));

    // Started behind corral's back with its verdict `failed` and the
    // sabotage still in: verified anyway, failed, stopped again.
    let mark = max_id(&events(&srv, &name, 0));
    start_behind_corrals_back(&client, &name);
    let after = wait_for(&srv, &name, mark, |e| e["event"] == "stopped");
    let run = after
        .iter()
        .find(|e| e["event"] == "verification")
        .unwrap_or_else(|| panic!("stopped without a run: {after:#?}"));
    assert_eq!(run["outcome"], "failed", "{run:#}");
    let alert = after
        .iter()
        .find(|e| e["event"] == "alert")
        .unwrap_or_else(|| panic!("{after:#?}"));
    assert!(
        alert["reason"]
            .as_str()
            .unwrap()
            .contains("corral stopped it"),
        "{alert:#}"
    );
    assert_eq!(status(&client, &name).as_deref(), Some("Stopped"));

    // Control: the sabotage taken out, the same start behind corral's
    // back: verified, passed, running.
    let listed = Command::new("nft")
        .args(["-a", "list", "chain", "inet", "corral", "isolated-out"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    let sabotage = format!("ip daddr {} accept # handle ", CANARY.ip());
    let handle = listed
        .lines()
        .find_map(|l| l.trim().strip_prefix(&sabotage))
        .unwrap_or_else(|| panic!("the inserted rule is gone: {listed}"));
    let out = Command::new("nft")
        .args(["delete", "rule", "inet", "corral", "isolated-out"])
        .args(["handle", handle.trim()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let mark = max_id(&events(&srv, &name, 0));
    start_behind_corrals_back(&client, &name);
    let after = wait_for(&srv, &name, mark, |e| e["event"] == "verification");
    let run = after.iter().find(|e| e["event"] == "verification").unwrap();
    assert_eq!(run["outcome"], "passed", "{run:#}");
    assert_eq!(status(&client, &name).as_deref(), Some("Running"));
}

fn max_id(events: &[Value]) -> i64 {
    events
        .iter()
        .filter_map(|e| e["id"].as_i64())
        .max()
        .unwrap_or(0)
}

/// `PUT /1.0/instances/NAME/state {"action": "start"}`: no gate, no canary.
fn start_behind_corrals_back(client: &IncusClient, name: &str) {
    let start = json!({"action": "start"});
    runtime()
        .block_on(client.run(
            Method::PUT,
            &format!("/1.0/instances/{name}/state"),
            Some(&start),
            Duration::from_secs(60),
        ))
        .unwrap();
    assert_eq!(status(client, name).as_deref(), Some("Running"));
}

/// The sandbox's events after `mark`, once one matches `until`.
fn wait_for(srv: &Server, name: &str, mark: i64, until: impl Fn(&Value) -> bool) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let now = events(srv, name, mark);
        if now.iter().any(&until) {
            eprintln!(
                "the watchdog acted {} ms after the start behind corral's back (grace {GRACE_SECS} s)",
                started.elapsed().as_millis()
            );
            return now;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "nothing after {PATIENCE:?}: {now:#?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}
