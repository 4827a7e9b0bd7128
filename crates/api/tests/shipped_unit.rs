//! The shipped corrald unit, run (issue 27, item 5): corrald started with
//! what `dist/systemd/corrald.service` leaves it, read from that file at
//! test time (`corral_test_support::unit`) — its `CapabilityBoundingSet=`
//! (as the bounding set, and so the capabilities of a root service, with
//! ambient and inheritable ones cleared) and `NoNewPrivileges=`
//! (`Privileges`), `ProtectProc=` (a private `/proc` with its `hidepid=`,
//! `ProcMount`), `RestrictNamespaces=` (the seccomp filter systemd installs
//! for it, `NamespaceFilter`) and `SystemCallFilter=` with
//! `SystemCallErrorNumber=` (an allow-list filter built from
//! `systemd-analyze syscall-filter`'s groups, `SyscallFilter`) and
//! `RestrictAddressFamilies=` (`socket(2)` of another family refused,
//! `FamilyFilter`), applied in
//! systemd's order in the child before it runs corrald — drives
//! a profiled sandbox through create → start with its canary → a gateway
//! restart (the profile's dnsmasq killed with SIGKILL; corrald's
//! supervisor starts it again, under the same bounding set) → stop and
//! start (a new lease from the restarted gateway, the canary at start) →
//! exec → the canary on demand → a sibling whose canary's sibling check is
//! ended by the bridge's evidence (its packet socket is the unit's to
//! allow) → delete, against
//! the real Incus daemon with the built-in profiles applied in the host
//! namespace (`corral_tests::builtin_lab`).
//!
//! Not reproduced (systemd is not PID 1 here): the rest of the mount
//! sandboxing (`ProtectSystem=`, `PrivateTmp=`, `PrivateDevices=`, …),
//! `MemoryDenyWriteExecute=`,
//! `LockPersonality=`, `RestrictRealtime=`, `RestrictSUIDSGID=` (seccomp
//! filters of their own) and the cgroup settings. The running corrald's
//! `/proc/PID/status` is checked to hold exactly what was applied.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use axum::http::Method;
use common::Server;
use corral_gateway::{Gateway, GatewayStatus};
use corral_provider_incus::{IncusClient, IncusConfig, IncusProvider, TEST_IMAGE_ALIAS};
use corral_sandbox_core::BridgeName;
use corral_test_support::unit::UnitSandbox;
use corral_tests::builtin_lab::BuiltinLab;
use serde_json::{Value, json};

const UNIT: &str = "corrald.service";
/// How long the supervisor may take to bring a killed gateway back.
const RESTART_PATIENCE: Duration = Duration::from_secs(60);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

struct Cleanup(IncusClient, String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let wait = Duration::from_secs(60);
        runtime().block_on(async {
            let path = format!("/1.0/instances/{}", self.1);
            let stop = json!({"action": "stop", "force": true});
            let _ = self
                .0
                .run(Method::PUT, &format!("{path}/state"), Some(&stop), wait)
                .await;
            let _ = self.0.run(Method::DELETE, &path, None, wait).await;
        });
    }
}

fn gateway_pid(lab: &BuiltinLab, bridge: &str) -> Option<u32> {
    match Gateway::new(&lab.state_dir(), &BridgeName::new(bridge).unwrap()).status() {
        GatewayStatus::Running { pid } => Some(pid),
        _ => None,
    }
}

fn verification_passed(srv: &Server, name: &str) -> Value {
    let (s, report) = srv.call("POST", &format!("/v1/sandboxes/{name}/verify"), None);
    assert_eq!(s, 200, "{report:#}");
    assert_eq!(report["passed"], true, "{report:#}");
    report
}

#[test]
fn corrald_under_its_shipped_unit_runs_a_profiled_sandbox_through_its_life() {
    if !corral_test_support::gate::netns()
        || !corral_test_support::gate::tool("nft", "nftables")
        || !corral_test_support::gate::tool("systemd-analyze", "systemd")
    {
        return;
    }
    let Some(socket) = corral_test_support::gate::incus() else {
        return;
    };
    let client = runtime()
        .block_on(IncusProvider::connect(IncusConfig::local()))
        .unwrap()
        .client()
        .clone();
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    let name = format!("t-api-unit-{}", std::process::id());
    let sibling = format!("{name}-b");
    let _guard = Cleanup(client.clone(), name.clone());
    let _sibling_guard = Cleanup(client, sibling.clone());
    lab.apply().unwrap_or_else(|e| panic!("{e}"));

    let sandbox = UnitSandbox::of_unit(UNIT);
    let problems_of = |pid| UnitSandbox::of_unit(UNIT).check(pid);
    let log = lab.state_dir().with_file_name("corrald.log");
    let srv = Server::start_prepared(
        &[],
        &[
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--incus-socket".into(),
            socket.display().to_string(),
            "--config".into(),
            lab.config_path().display().to_string(),
            "--state-dir".into(),
            lab.state_dir().display().to_string(),
        ],
        // The gateway supervisor is part of what runs under the unit.
        &[("CORRALD_NO_SUPERVISE", "false"), ("RUST_LOG", "info")],
        Some(log.clone()),
        |cmd| sandbox.apply_to(cmd),
    );
    let logs = || std::fs::read_to_string(&log).unwrap_or_default();

    // corrald holds exactly what the unit gives it, and no more.
    let problems = problems_of(srv.pid());
    assert!(problems.is_empty(), "{problems:?}");

    // Create and start: the start gate and the canary run under the unit.
    let (s, body) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": name, "image": TEST_IMAGE_ALIAS, "profile": "allowlist"})),
    );
    assert_eq!(s, 201, "{body:#}\n{}", logs());
    let (s, body) = srv.call("POST", &format!("/v1/sandboxes/{name}/start"), None);
    assert_eq!(s, 200, "the canary passes at start: {body:#}\n{}", logs());
    assert_eq!(body["results"][0]["state"], "running", "{body:#}");
    let report = verification_passed(&srv, &name);
    assert!(
        report["event"]["checks"].as_array().unwrap().len() >= 5,
        "{report:#}"
    );

    // Gateway restart: SIGKILL the profile's dnsmasq; corrald's supervisor
    // (with the unit's capabilities) starts a new one.
    let bridge = "corral-allow";
    let old = gateway_pid(&lab, bridge).expect("the allowlist gateway runs after apply");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(old).unwrap()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let started = Instant::now();
    let new = loop {
        // A new pid, still the one running a second later (a dnsmasq that
        // starts and fails does not count).
        if let Some(p) = gateway_pid(&lab, bridge).filter(|p| *p != old) {
            std::thread::sleep(Duration::from_secs(1));
            if gateway_pid(&lab, bridge) == Some(p) {
                break p;
            }
        }
        assert!(
            started.elapsed() < RESTART_PATIENCE,
            "the supervisor did not restart the gateway of {bridge} within {RESTART_PATIENCE:?}\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!(
        "gateway {bridge}: pid {old} killed, pid {new} running {} ms later",
        started.elapsed().as_millis()
    );

    // A stop and a start: the sandbox leases its address again from the
    // restarted gateway, and its canary passes at start.
    let (s, body) = srv.call(
        "POST",
        &format!("/v1/sandboxes/{name}/stop"),
        Some(&json!({"force": true})),
    );
    assert_eq!(s, 200, "{body:#}\n{}", logs());
    let (s, body) = srv.call("POST", &format!("/v1/sandboxes/{name}/start"), None);
    assert_eq!(
        s,
        200,
        "the canary passes at start after the gateway restart: {body:#}\n{}",
        logs()
    );

    // Exec, and the canary again on demand.
    let (s, out) = srv.call(
        "POST",
        &format!("/v1/sandboxes/{name}/exec"),
        Some(&json!({"argv": ["sh", "-c", "echo under-the-unit"]})),
    );
    assert_eq!(s, 200, "{out:#}\n{}", logs());
    assert_eq!(out["exit_code"], 0, "{out:#}");
    assert_eq!(out["stdout"], "under-the-unit\n", "{out:#}");
    verification_passed(&srv, &name);

    // A sibling on the profile: its canary's sibling check ends on the
    // bridge's evidence (the ARP request delivered to no port), which the
    // unit's packet socket (AF_PACKET, CAP_NET_RAW) lets corrald watch for;
    // without it the check could only wait out its bound.
    let (s, body) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": sibling, "image": TEST_IMAGE_ALIAS, "profile": "allowlist"})),
    );
    assert_eq!(s, 201, "{body:#}\n{}", logs());
    let (s, body) = srv.call("POST", &format!("/v1/sandboxes/{sibling}/start"), None);
    assert_eq!(s, 200, "the sibling's canary passes: {body:#}\n{}", logs());
    let report = verification_passed(&srv, &sibling);
    let check = report["event"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "sibling-blocked")
        .unwrap_or_else(|| panic!("no sibling check: {report:#}"))
        .clone();
    assert!(
        check["output"]
            .as_str()
            .is_some_and(|o| o.contains("no sibling was asked")),
        "the sibling check under {UNIT} is not ended by the bridge: {check:#}"
    );
    let (s, body) = srv.call(
        "POST",
        &format!("/v1/sandboxes/{sibling}/stop"),
        Some(&json!({"force": true})),
    );
    assert_eq!(s, 200, "{body:#}\n{}", logs());
    let (s, body) = srv.call("DELETE", &format!("/v1/sandboxes/{sibling}"), None);
    assert_eq!(s, 200, "{body:#}\n{}", logs());

    // Delete.
    let (s, body) = srv.call(
        "POST",
        &format!("/v1/sandboxes/{name}/stop"),
        Some(&json!({"force": true})),
    );
    assert_eq!(s, 200, "{body:#}\n{}", logs());
    let (s, body) = srv.call("DELETE", &format!("/v1/sandboxes/{name}"), None);
    assert_eq!(s, 200, "{body:#}\n{}", logs());
    let (s, _) = srv.get(&format!("/v1/sandboxes/{name}"));
    assert_eq!(s, 404);
}
