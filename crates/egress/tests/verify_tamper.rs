//! Class 10 (docs/security.md): `verify` has no blind spot for tampering
//! that switches enforcement off or opens a reserved destination. `nft` is
//! the tamperer (test-only: someone acting behind corral's back); each
//! trick is first shown to matter with a real packet where it can be.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod nft_support;

use std::net::{IpAddr, SocketAddr};

use corral_drill::lab::topology::{PRIVATE, PUBLIC_V4};
use corral_drill::lab::{Lab, Observed, Probe};
use corral_egress::drift::{DriftKind, DriftObject};
use corral_egress::host::HostDrift;
use corral_egress::link::Links;
use corral_egress::resolve::Resolution;
use corral_egress::sysctl::Sysctls;
use corral_sandbox_core::{EgressMode, ProfileSet};
use nft_support::{PROBE_TIMEOUT, nft_in, profile};

fn lab() -> Lab {
    let p = profile(
        "tam",
        "cb-tam",
        "10.232.2.0/24",
        EgressMode::Allowlist,
        &["*.corral.test", "203.0.113.10:443/tcp"],
    );
    let lab = Lab::new(&ProfileSet::new(vec![p]).unwrap(), &Resolution::new()).unwrap();
    lab.control().unwrap();
    lab
}

fn probe(lab: &Lab, ip: IpAddr, port: u16) -> Observed {
    let p = Probe::Tcp {
        to: SocketAddr::new(ip, port),
    };
    lab.probe(lab.sandbox("tam"), &p, PROBE_TIMEOUT).observed
}

#[test]
fn class10_a_dormant_table_is_drift() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = lab();
    let unlisted = IpAddr::V4(PUBLIC_V4[0]);
    assert_eq!(probe(&lab, unlisted, 443), Observed::Connected, "control");
    lab.apply().unwrap();
    assert!(probe(&lab, unlisted, 443).blocked());
    assert_eq!(lab.host.verify(&lab.plan).unwrap(), Vec::<HostDrift>::new());

    nft_in(
        &lab.topo.host,
        &["add", "table", "inet", "corral", "{ flags dormant; }"],
    );
    assert_eq!(
        probe(&lab, unlisted, 443),
        Observed::Connected,
        "a dormant table enforces nothing"
    );
    let drift = lab.host.verify(&lab.plan).unwrap();
    assert!(
        drift.iter().any(|d| matches!(d, HostDrift::Nft(n)
            if n.object == DriftObject::Table && n.kind == DriftKind::Changed
                && n.detail.contains("dormant"))),
        "{drift:#?}"
    );
    lab.apply().unwrap();
    assert!(probe(&lab, unlisted, 443).blocked());
    assert_eq!(lab.host.verify(&lab.plan).unwrap(), Vec::<HostDrift>::new());
}

#[test]
fn class10_a_reserved_address_in_a_learned_set_opens_nothing_and_is_drift() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = lab();
    let metadata = PRIVATE[4];
    assert_eq!(probe(&lab, metadata, 80), Observed::Connected, "control");
    lab.apply().unwrap();
    let set = lab
        .plan
        .inet
        .sets
        .iter()
        .find(|s| s.name.starts_with("tam-dns4"))
        .unwrap()
        .name
        .clone();
    nft_in(
        &lab.topo.host,
        &[
            "add",
            "element",
            "inet",
            "corral",
            &set,
            "{ 169.254.169.254 }",
        ],
    );
    let o = probe(&lab, metadata, 80);
    assert!(o.blocked(), "metadata through a learned set: {o:?}");
    let drift = lab.host.verify(&lab.plan).unwrap();
    assert!(
        drift.iter().any(|d| matches!(d, HostDrift::Nft(n)
            if n.object == DriftObject::Element && n.location == format!("set {set}")
                && n.detail.contains("169.254.169.254"))),
        "{drift:#?}"
    );
}

#[test]
fn class10_bridge_sysctls_and_addresses_are_read_back() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = lab();
    lab.apply().unwrap();
    assert_eq!(lab.host.verify(&lab.plan).unwrap(), Vec::<HostDrift>::new());
    lab.topo
        .host
        .run(|| {
            let s = Sysctls::default();
            for (k, v) in [
                ("net.ipv4.conf.cb-tam.rp_filter", "0"),
                ("net.ipv4.conf.cb-tam.accept_local", "1"),
                ("net.ipv4.conf.cb-tam.route_localnet", "1"),
            ] {
                s.apply_one(&corral_egress::plan::SysctlPlan {
                    key: k.into(),
                    value: v.into(),
                    reason: "tamper".into(),
                })
                .unwrap();
            }
        })
        .unwrap();
    lab.topo
        .host
        .run_async(|| async {
            Links::connect()
                .unwrap()
                .add_address("cb-tam", "192.0.2.99/24".parse().unwrap())
                .await
                .unwrap();
        })
        .unwrap();
    let drift = lab.host.verify(&lab.plan).unwrap();
    for key in ["rp_filter", "accept_local", "route_localnet"] {
        assert!(
            drift
                .iter()
                .any(|d| matches!(d, HostDrift::Sysctl(s) if s.key.ends_with(key))),
            "{key}: {drift:#?}"
        );
    }
    assert!(
        drift
            .iter()
            .any(|d| matches!(d, HostDrift::Bridge { problem, .. }
            if problem.contains("192.0.2.99"))),
        "{drift:#?}"
    );
}
