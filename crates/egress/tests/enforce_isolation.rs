//! Sandboxes cannot reach each other (same bridge, across bridges, both
//! ways) nor the host's services; DNS only via the gateway. Each probe is
//! a control first. Port isolation is OFF here so corral's rules alone are
//! tested; `port_isolation_*` covers the bridge-port flag.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

mod nft_support;

use corral_drill::lab::topology::{
    HOST_SERVICE_PORT, HOST_UPLINK_V4, PUBLIC_RESOLVER_V4, PUBLIC_RESOLVER_V6, SANDBOX_PORT,
};
use corral_drill::lab::{Lab, Observed, Probe, SandboxNs};
use corral_drill::lab::{tcp, udp};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::config::Config;
use nft_support::{PROBE_TIMEOUT as T, builtin_lab};

/// (from, probe) pairs: control must connect, enforced must be blocked.
fn control_apply_blocked(lab: &Lab, cases: &[(&SandboxNs, Probe)]) {
    for (sb, p) in cases {
        let r = lab.probe(sb, p, T);
        assert_eq!(
            r.observed,
            Observed::Connected,
            "control {} {p}: {r:?}",
            sb.name
        );
    }
    lab.apply().unwrap();
    for (sb, p) in cases {
        let r = lab.probe(sb, p, T);
        assert!(r.observed.blocked(), "{} {p}: {r:?}", sb.name);
    }
}

#[test]
fn sandboxes_cannot_reach_each_other() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = builtin_lab();
    let mut inet = lab.topo.sandboxes_of("internet");
    let (a, b) = (inet.next().unwrap(), inet.next().unwrap());
    let iso = lab.sandbox("isolated");
    let allow = lab.sandbox("allowlist");
    let cases = [
        (a, tcp(b.v4, SANDBOX_PORT)),
        (b, tcp(a.v4, SANDBOX_PORT)),
        (a, udp(b.v4, SANDBOX_PORT)),
        (a, tcp(b.v6.unwrap(), SANDBOX_PORT)),
        (a, tcp(iso.v4, SANDBOX_PORT)),
        (iso, tcp(a.v4, SANDBOX_PORT)),
        (allow, tcp(a.v4, SANDBOX_PORT)),
        (a, tcp(allow.v4, SANDBOX_PORT)),
    ];
    control_apply_blocked(&lab, &cases);
}

#[test]
fn host_services_are_not_reachable() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = builtin_lab();
    let mut cases = Vec::new();
    for profile in ["internet", "allowlist", "isolated"] {
        let sb = lab.sandbox(profile);
        cases.push((sb, tcp(sb.gateway_v4, HOST_SERVICE_PORT)));
        cases.push((sb, tcp(HOST_UPLINK_V4, HOST_SERVICE_PORT)));
    }
    let inet = lab.sandbox("internet");
    cases.push((inet, tcp(inet.gateway_v6.unwrap(), HOST_SERVICE_PORT)));
    control_apply_blocked(&lab, &cases);
}

#[test]
fn dns_to_a_non_gateway_server_is_blocked() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = builtin_lab();
    let inet = lab.sandbox("internet");
    let allow = lab.sandbox("allowlist");
    let cases = [
        (inet, udp(PUBLIC_RESOLVER_V4, 53)),
        (inet, tcp(PUBLIC_RESOLVER_V4, 53)),
        (inet, udp(PUBLIC_RESOLVER_V6, 53)),
        (allow, udp(PUBLIC_RESOLVER_V4, 53)),
    ];
    control_apply_blocked(&lab, &cases);
}

#[test]
fn port_isolation_and_rules_together_block_same_bridge() {
    if !corral_test_support::gate::netns() {
        return;
    }
    // Like a provider: apply first (bridges created by apply), then attach
    // the sandbox ports with isolation on.
    let cfg = Config::builtin_default();
    let lab = Lab::new(&cfg.profiles, &Resolution::new()).unwrap();
    let report = lab.apply().unwrap();
    assert!(
        report
            .bridges
            .iter()
            .all(|b| b.outcome == corral_egress::link::BridgeOutcome::Created)
    );
    lab.topo.attach_sandboxes(true).unwrap();
    let mut inet = lab.topo.sandboxes_of("internet");
    let (a, b) = (inet.next().unwrap(), inet.next().unwrap());
    let r = lab.probe(a, &tcp(b.v4, SANDBOX_PORT), Duration::from_millis(700));
    assert!(r.observed.blocked(), "{r:?}");
    // Egress still works through the non-isolated bridge port.
    let r = lab.probe(a, &tcp(corral_drill::lab::topology::PUBLIC_V4[0], 443), T);
    assert_eq!(r.observed, Observed::Connected, "{r:?}");
}
