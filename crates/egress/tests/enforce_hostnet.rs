//! Class 6 (docs/security.md), kept current: a network the host gains
//! after apply (a new address on its LAN side) is reported by `verify`,
//! and a refresh — which re-reads the host's networks — blocks it, with no
//! rule rebuilt. The neighbour answers before the refresh (the control).

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod nft_support;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use corral_drill::lab::topology::{LAN_IF, LAN_PORT};
use corral_drill::lab::{Listeners, Observed, Probe, Transport};
use corral_egress::host::HostDrift;
use corral_egress::link::Links;
use corral_egress::plan::{HostPlan, PlanSettings};
use corral_egress::resolve::Resolution;
use nft_support::{PROBE_TIMEOUT, builtin_lab};

#[test]
fn class6_a_network_gained_after_apply_is_reported_and_refresh_blocks_it() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = builtin_lab();
    lab.apply().unwrap();
    assert_eq!(lab.host.verify(&lab.plan).unwrap(), Vec::<HostDrift>::new());

    let host_addr = Ipv4Addr::new(198, 51, 100, 129);
    let neighbour = Ipv4Addr::new(198, 51, 100, 130);
    lab.topo
        .host
        .run_async(|| async {
            Links::connect()
                .unwrap()
                .add_address(LAN_IF, format!("{host_addr}/25").parse().unwrap())
                .await
                .unwrap();
        })
        .unwrap();
    lab.topo
        .lan
        .run_async(|| async {
            Links::connect()
                .unwrap()
                .add_address("eth0", format!("{neighbour}/25").parse().unwrap())
                .await
                .unwrap();
        })
        .unwrap();
    let lan = Listeners::start(&lab.topo.lan).unwrap();
    let to = SocketAddr::new(IpAddr::V4(neighbour), LAN_PORT);
    lan.add(to, Transport::Tcp).unwrap();
    let probe = Probe::Tcp { to };
    let sb = lab.sandbox("internet");
    assert_eq!(
        lab.probe(sb, &probe, PROBE_TIMEOUT).observed,
        Observed::Connected,
        "control: the new neighbour answers before a refresh"
    );

    let drift = lab.host.verify(&lab.plan).unwrap();
    assert!(
        drift
            .iter()
            .any(|d| matches!(d, HostDrift::HostNetworks { new, .. }
            if new.contains("198.51.100.128/25"))),
        "{drift:#?}"
    );

    let bridges: Vec<String> = lab
        .plan
        .bridges
        .iter()
        .map(|b| b.name.to_string())
        .collect();
    let settings = PlanSettings {
        host_networks: Some(lab.host.networks(&bridges).unwrap().to_nets()),
        ..PlanSettings::default()
    };
    // The same sandboxes stay bound: a refresh changes networks, not ports.
    let new = HostPlan::build(&lab.profiles, &settings, &Resolution::new())
        .unwrap()
        .with_bindings(&lab.profiles, lab.plan.bindings.clone())
        .unwrap();
    let (report, _) = lab.host.refresh(&lab.plan, &new).unwrap();
    assert!(report.sets.iter().any(|s| s == "hostnet4"), "{report:?}");
    let r = lab.probe(sb, &probe, PROBE_TIMEOUT);
    assert!(r.observed.blocked(), "after refresh: {r:?}");
    assert_eq!(lab.host.verify(&new).unwrap(), Vec::<HostDrift>::new());
}
