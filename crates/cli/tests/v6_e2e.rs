//! IPv6 for a real sandbox: the real `corral` binary, the real Incus daemon
//! and busybox test image, corral's rules and gateway applied in the HOST
//! network namespace by `corral host apply` (`corral_tests::hostlab`, with
//! a /64 on the profile and two global IPv6 destinations behind the host).
//!
//! The gateway announces the profile's /64 (router advertisements, SLAAC);
//! the container forms its address from the MAC corral bound its port to,
//! which is exactly the IPv6 address of its binding. Then, through the real
//! host rules: the allowlisted IPv6 address:port is reached; an unlisted
//! one is not — its control is the same probe with that address put on the
//! allowlist, which reaches it; and on `none` the allowlisted address is
//! blocked too (its control: reached a moment earlier under `allowlist`).

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::Ipv6Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::sandboxes::{Cleanup, in_dirs, in_lab, incus, reached_with, unique};
use common::{Run, corral, schema};
use corral_egress::plan::MacAddr;
use corral_egress::plan::bindings::slaac_address;
use corral_provider_incus::TEST_IMAGE_ALIAS;
use corral_tests::hostlab::HostLab;
use corral_tests::hostlab::v6::{ALLOWED6, UNLISTED6};
use serde_json::Value;

fn sh(state: &Path, name: &str, script: &str) -> Run {
    corral(&[
        "exec",
        name,
        "-n",
        "--state-dir",
        state.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        script,
    ])
}

/// The global IPv6 addresses on the sandbox's eth0.
fn global_v6(state: &Path, name: &str) -> Vec<String> {
    let run = sh(state, name, "ip -6 addr show dev eth0 scope global");
    run.stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("inet6 "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// Rewrites the lab's configuration with `edit` and applies it.
fn reconfigure(lab: &HostLab, edit: impl Fn(&str) -> String) {
    let path = lab.config_path();
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, edit(&text)).unwrap();
    in_lab(lab, &["host", "apply"]).expect_code(0);
}

fn reached(lab: &HostLab, name: &str, to: std::net::SocketAddr) -> bool {
    // A positive probe may take a second try right after an apply (the
    // gateway restarts; neighbour entries are re-learned).
    (0..2).any(|_| reached_with(Some(&lab.state_dir()), name, to))
}

#[test]
fn a_v6_sandbox_gets_its_bound_address_and_reaches_only_its_v6_allowlist() {
    if !corral_test_support::gate::netns() || !corral_test_support::gate::tool("nft", "nftables") {
        return;
    }
    let Some(client) = incus() else { return };
    let lab = HostLab::for_apply_v6().unwrap_or_else(|e| panic!("{e}"));
    let name = unique("six");
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone()],
    };
    let state = lab.state_dir();
    in_lab(&lab, &["host", "apply"]).expect_code(0);
    let made: Value = in_dirs(
        &lab.config_path(),
        &state,
        &[
            "new",
            &name,
            "--profile",
            "e2e",
            "--image",
            TEST_IMAGE_ALIAS,
            "--json",
        ],
    )
    .expect_code(0)
    .json();
    schema::check(&made);

    // The binding's IPv6 address is the SLAAC address of its MAC in the /64.
    let binding = &made["gate"]["binding"];
    let v6: Ipv6Addr = binding["v6"].as_str().unwrap().parse().unwrap();
    let mac: MacAddr = binding["mac"].as_str().unwrap().parse().unwrap();
    let subnet = corral_tests::hostlab::v6::subnet_of(&lab);
    assert!(subnet.contains(&v6), "{v6} outside {subnet}");
    assert_eq!(v6, slaac_address(subnet, mac));

    // The guest configures exactly that address from the announcement.
    let start = Instant::now();
    let mut addrs = Vec::new();
    while start.elapsed() < Duration::from_secs(20) {
        addrs = global_v6(&state, &name);
        if !addrs.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!(
        "global IPv6 {addrs:?} seen {} ms after `corral new` returned",
        start.elapsed().as_millis()
    );
    assert_eq!(
        addrs,
        [format!("{v6}/64")],
        "the guest's global IPv6 addresses"
    );
    let route = sh(&state, &name, "ip -6 route show default").stdout;
    assert!(
        route.contains("via fe80::"),
        "default route via the gateway: {route}"
    );
    in_lab(&lab, &["host", "verify"]).expect_code(0);

    // The allowlisted IPv6 destination is reached; the unlisted one is not.
    assert!(reached(&lab, &name, ALLOWED6), "the allowlisted {ALLOWED6}");
    assert!(
        !reached_with(Some(&state), &name, UNLISTED6),
        "the unlisted {UNLISTED6} was reached"
    );
    // Control: listed, the same address is reached (its listener and
    // route work; the rules are what blocked it).
    let listed = format!("\"[{}]:{}/tcp\", ", UNLISTED6.ip(), UNLISTED6.port());
    reconfigure(&lab, |t| {
        t.replacen("allow = [", &format!("allow = [{listed}"), 1)
    });
    assert!(
        reached(&lab, &name, UNLISTED6),
        "control: {UNLISTED6} listed"
    );
    reconfigure(&lab, |t| t.replacen(&listed, "", 1));
    assert!(
        !reached_with(Some(&state), &name, UNLISTED6),
        "{UNLISTED6} reached after it left the allowlist"
    );
    assert!(reached(&lab, &name, ALLOWED6), "control for `none`");

    // On `none` the same sandbox keeps its address and reaches nothing.
    reconfigure(&lab, |t| {
        t.lines()
            .filter(|l| !l.starts_with("allow"))
            .map(|l| match l {
                "mode = \"allowlist\"" => "mode = \"none\"".to_owned(),
                other => other.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    assert_eq!(global_v6(&state, &name), [format!("{v6}/64")]);
    assert!(
        !reached_with(Some(&state), &name, ALLOWED6),
        "a global IPv6 address reached on `none`"
    );
    in_lab(&lab, &["host", "verify"]).expect_code(0);
}
