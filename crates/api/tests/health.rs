//! `/v1/health` reports each dependency separately, checked when asked:
//! the Incus daemon, the host's enforcement (drift), the gateways, and
//! whether the configuration corrald loaded is what was applied. And a
//! corrald started on a configuration that differs from the applied one
//! refuses to start, or serves with a failing check when told to. The
//! checks run with only the capabilities the shipped unit leaves corrald.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use common::Server;
use corral_service::config::{ConfigSource, load};
use corral_service::host::plan_config;
use corral_service::{HostService, Target};
use corral_tests::hostlab::HostLab;
use serde_json::Value;

fn checks(body: &Value) -> [(bool, String); 4] {
    ["provider", "host", "gateways", "config"].map(|k| {
        (
            body["checks"][k]["ok"].as_bool().unwrap(),
            body["checks"][k]["detail"].as_str().unwrap().to_owned(),
        )
    })
}

#[test]
fn a_missing_daemon_and_an_unapplied_host_are_named_separately() {
    let dir = tempfile::tempdir().unwrap();
    let absent = dir.path().join("incus.sock");
    let srv = Server::start(&[
        "--listen",
        "127.0.0.1:0",
        "--incus-socket",
        absent.to_str().unwrap(),
    ]);
    let (s, body) = srv.get("/v1/health");
    assert_eq!(s, 503, "{body}");
    assert_eq!(body["status"], "degraded");
    let [provider, host, gateways, config] = checks(&body);
    assert!(
        !provider.0 && provider.1.contains("cannot reach Incus"),
        "{body}"
    );
    assert!(
        !host.0 && host.1.contains("nothing has been applied"),
        "{body}"
    );
    assert!(!gateways.0, "{body}");
    assert!(
        !config.0 && config.1.contains("corral host apply"),
        "{body}"
    );
}

fn apply(lab: &HostLab) {
    let loaded = load(&ConfigSource {
        config: Some(lab.config_path()),
        networks_conf: None,
    })
    .unwrap();
    HostService::new(Target::open(None).unwrap(), lab.state_dir())
        .apply(&plan_config(loaded).unwrap())
        .unwrap();
}

#[test]
fn health_follows_the_host_and_the_configuration_must_be_the_applied_one() {
    if !corral_test_support::gate::netns() || !corral_test_support::gate::tool("nft", "nftables") {
        return;
    }
    let Some(socket) = corral_test_support::gate::incus() else {
        return;
    };
    let lab = HostLab::for_apply().unwrap_or_else(|e| panic!("{e}"));
    apply(&lab);
    let args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "--listen",
            "127.0.0.1:0",
            "--incus-socket",
            socket.to_str().unwrap(),
            "--state-dir",
            lab.state_dir().to_str().unwrap(),
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        v.extend(extra.iter().map(|s| (*s).to_owned()));
        v
    };
    let cfg = lab.config_path().display().to_string();
    // With only the capabilities the shipped unit leaves it: every check
    // can still look.
    if !corral_test_support::gate::tool("setpriv", "util-linux") {
        return;
    }
    let srv = Server::start_under(
        &corral_test_support::unit::as_unit("corrald.service"),
        &args(&["--config", &cfg]),
        &[],
        None,
    );
    let (s, body) = srv.get("/v1/health");
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["status"], "ok");
    assert!(checks(&body).iter().all(|c| c.0), "{body}");
    let status = std::fs::read_to_string(format!("/proc/{}/status", srv.pid())).unwrap();
    let bounding = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
        .unwrap();
    assert_eq!(
        bounding,
        corral_test_support::unit::Privileges::of_unit("corrald.service").mask(),
        "corrald ran with other than the unit gives"
    );

    // The gateway dies: only that check fails.
    let gw = corral_gateway::status_recorded(&lab.state_dir());
    let pid = gw
        .iter()
        .find_map(|g| match g.status {
            corral_gateway::GatewayStatus::Running { pid } => Some(pid),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no running gateway: {gw:?}"));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    // The pid file stays; the process goes (a zombie has no command line).
    let alive = || std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty());
    while alive() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (s, body) = srv.get("/v1/health");
    assert_eq!(s, 503, "{body}");
    let [provider, host, gateways, config] = checks(&body);
    assert!(provider.0 && host.0 && config.0, "{body}");
    assert!(!gateways.0, "{body}");

    // Applied again, then the rules deleted behind corral's back: drift.
    apply(&lab);
    let (s, body) = srv.get("/v1/health");
    assert_eq!(s, 200, "{body}");
    let out = Command::new("nft")
        .args(["delete", "table", "inet", "corral"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (s, body) = srv.get("/v1/health");
    assert_eq!(s, 503, "{body}");
    let [provider, host, _, config] = checks(&body);
    assert!(provider.0 && config.0, "{body}");
    assert!(!host.0 && host.1.contains("difference(s)"), "{body}");
    apply(&lab);
    drop(srv);

    // A configuration that is not the applied one: refused, naming the
    // profile; served (and reported) only when told to.
    let other = lab.state_dir().parent().unwrap().join("other.toml");
    let text = std::fs::read_to_string(lab.config_path()).unwrap();
    std::fs::write(
        &other,
        format!(
            "{text}\n[[profile]]\nname = \"late\"\nbridge = \"corral-late\"\nsubnet = \"10.231.77.0/24\"\nmode = \"none\"\n"
        ),
    )
    .unwrap();
    let other_arg = other.display().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_corrald"))
        .args([
            "--incus-socket",
            socket.to_str().unwrap(),
            "--config",
            &other_arg,
        ])
        .arg("--state-dir")
        .arg(lab.state_dir())
        .arg("--socket")
        .arg(lab.state_dir().parent().unwrap().join("d.sock"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("profile(s) not applied: late"), "{err}");
    assert!(err.contains("--allow-config-mismatch"), "{err}");

    let srv = Server::start_exact(&args(&["--config", &other_arg, "--allow-config-mismatch"]));
    let (s, body) = srv.get("/v1/health");
    assert_eq!(s, 503, "{body}");
    let [_, host, _, config] = checks(&body);
    assert!(host.0, "{body}");
    assert!(!config.0 && config.1.contains("late"), "{body}");
    drop(srv);
    drop(lab);
}
