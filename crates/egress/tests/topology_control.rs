//! The netns topology without corral's rules: every probe the enforcement
//! tests rely on must succeed here, or those tests could pass vacuously.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use corral_drill::lab::topology::{
    self, HOST_SERVICE_PORT, HOST_UPLINK_V4, LAN_HOST_V4, LAN_PORT, PUBLIC_RESOLVER_V4,
    SANDBOX_PORT,
};
use corral_drill::lab::{Observed, Probe, Topology, probe_from};
use corral_egress::plan::{HostPlan, PlanSettings};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::config::Config;

const T: Duration = Duration::from_millis(1500);

#[test]
fn every_probe_succeeds_without_corral_rules() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let cfg = Config::builtin_default();
    let plan =
        HostPlan::build(&cfg.profiles, &PlanSettings::default(), &Resolution::new()).unwrap();

    let start = Instant::now();
    let topo = Topology::build(&cfg.profiles).unwrap();
    let built = start.elapsed();
    topo.ensure_bridges(&plan.bridges).unwrap();
    topo.attach_sandboxes(false).unwrap();
    eprintln!(
        "topology with {} sandboxes built in {built:?}",
        topo.sandboxes.len()
    );

    let inet = topo.sandbox("internet").unwrap();
    let other = topo.sandboxes_of("internet").nth(1).unwrap();
    let iso = topo.sandbox("isolated").unwrap();
    let mut probes: Vec<(&str, Probe)> = Vec::new();
    for ip in topology::internet_addresses() {
        probes.push((
            "internet addr tcp",
            Probe::Tcp {
                to: SocketAddr::new(ip, 443),
            },
        ));
        probes.push((
            "internet addr udp",
            Probe::Udp {
                to: SocketAddr::new(ip, 443),
            },
        ));
        probes.push(("internet addr icmp", Probe::Icmp { to: ip }));
    }
    probes.push((
        "resolver",
        Probe::Udp {
            to: SocketAddr::new(PUBLIC_RESOLVER_V4.into(), 53),
        },
    ));
    probes.push((
        "lan host",
        Probe::Tcp {
            to: SocketAddr::new(LAN_HOST_V4.into(), LAN_PORT),
        },
    ));
    probes.push((
        "lan host udp",
        Probe::Udp {
            to: SocketAddr::new(LAN_HOST_V4.into(), LAN_PORT),
        },
    ));
    probes.push((
        "host uplink service",
        Probe::Tcp {
            to: SocketAddr::new(HOST_UPLINK_V4.into(), HOST_SERVICE_PORT),
        },
    ));
    probes.push((
        "host gateway service",
        Probe::Tcp {
            to: SocketAddr::new(inet.gateway_v4.into(), HOST_SERVICE_PORT),
        },
    ));
    probes.push((
        "same-bridge sandbox",
        Probe::Tcp {
            to: SocketAddr::new(other.v4.into(), SANDBOX_PORT),
        },
    ));
    probes.push((
        "same-bridge sandbox v6",
        Probe::Tcp {
            to: SocketAddr::new(IpAddr::V6(other.v6.unwrap()), SANDBOX_PORT),
        },
    ));
    probes.push((
        "cross-bridge sandbox",
        Probe::Tcp {
            to: SocketAddr::new(iso.v4.into(), SANDBOX_PORT),
        },
    ));

    let mut failures = Vec::new();
    for (what, p) in &probes {
        let r = probe_from(&inet.ns, p, T);
        if r.observed != Observed::Connected {
            failures.push(format!("{what}: {p} -> {:?} in {} ms", r.observed, r.ms));
        }
    }
    // And back the other way across bridges.
    let r = probe_from(
        &iso.ns,
        &Probe::Tcp {
            to: SocketAddr::new(inet.v4.into(), SANDBOX_PORT),
        },
        T,
    );
    if r.observed != Observed::Connected {
        failures.push(format!("isolated -> internet sandbox: {:?}", r.observed));
    }
    assert!(
        failures.is_empty(),
        "control probes failed:\n{}",
        failures.join("\n")
    );
}

#[test]
fn a_port_without_a_listener_is_rejected_fast() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let cfg = Config::builtin_default();
    let plan =
        HostPlan::build(&cfg.profiles, &PlanSettings::default(), &Resolution::new()).unwrap();
    let topo = Topology::build(&cfg.profiles).unwrap();
    topo.ensure_bridges(&plan.bridges).unwrap();
    topo.attach_sandboxes(false).unwrap();
    let sb = topo.sandbox("internet").unwrap();
    let r = probe_from(
        &sb.ns,
        &Probe::Tcp {
            to: SocketAddr::new(topology::PUBLIC_V4[0].into(), 9),
        },
        T,
    );
    assert!(matches!(r.observed, Observed::Rejected(_)), "{r:?}");
    assert!(r.ms < 500, "{r:?}");
}

#[test]
fn port_isolation_blocks_same_bridge_traffic_only() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let cfg = Config::builtin_default();
    let plan =
        HostPlan::build(&cfg.profiles, &PlanSettings::default(), &Resolution::new()).unwrap();
    let topo = Topology::build(&cfg.profiles).unwrap();
    topo.ensure_bridges(&plan.bridges).unwrap();
    topo.attach_sandboxes(true).unwrap();
    let mut sbs = topo.sandboxes_of("internet");
    let (a, b) = (sbs.next().unwrap(), sbs.next().unwrap());
    let r = probe_from(
        &a.ns,
        &Probe::Tcp {
            to: SocketAddr::new(b.v4.into(), SANDBOX_PORT),
        },
        Duration::from_millis(500),
    );
    assert!(r.observed.blocked(), "{r:?}");
    // The gateway (a non-isolated port: the bridge itself) still answers.
    let r = probe_from(
        &a.ns,
        &Probe::Tcp {
            to: SocketAddr::new(a.gateway_v4.into(), HOST_SERVICE_PORT),
        },
        T,
    );
    assert_eq!(r.observed, Observed::Connected);
}
