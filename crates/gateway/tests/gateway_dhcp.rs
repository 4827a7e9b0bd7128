//! The gateway's DHCP and daemon lifecycle with real packets: leases on every
//! bridge, reservations reloaded without dropping leases, a port bound and
//! unbound through the gateway, restart and stop of dnsmasq, and a start that
//! fails with dnsmasq's own reason. Shares the netns lab of `gateway_netns.rs`.

// Test helpers outside #[test] fns unwrap too: a failed setup is a failed test.
#![allow(clippy::unwrap_used)]

mod gateway_lab;

use corral_drill::lab::Observed;
use corral_egress::host::Host;
use corral_egress::netns::Netns;
use corral_gateway::wire::TYPE_A;
use corral_gateway::{DnsTiming, Gateway, GatewaySpec, GatewayStatus};
use corral_sandbox_core::EgressMode;
use gateway_lab::{STATIC_ADDR, T, UPSTREAM, allowlist_profile, ask, dhcp_lease, env, tcp};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Instant;

#[test]
fn sandboxes_get_leases_on_every_bridge() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let env = env(gateway_lab::allowlist_and_offline(), DnsTiming::default());
    for gw in &env.gateways.0 {
        assert!(
            matches!(gw.status(), GatewayStatus::Running { .. }),
            "{:?}",
            gw.status()
        );
    }
    for p in &env.profiles {
        let sb = env.topo.sandbox(p.name.as_str()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (bound, took) = dhcp_lease(&sb.ns, dir.path());
        eprintln!("{}: {bound:?} in {took:?}", p.name);
        assert_eq!(bound.len(), 1, "{bound:?}");
        let line = &bound[0];
        let ip: Ipv4Addr = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("ip="))
            .unwrap()
            .parse()
            .unwrap();
        assert!(p.subnet_v4.contains(&ip) && ip != p.gateway_v4(), "{line}");
        assert!(
            line.contains(&format!("router={}", p.gateway_v4())),
            "{line}"
        );
        let dns = if p.mode == EgressMode::None {
            "dns= ".to_owned()
        } else {
            format!("dns={} ", p.gateway_v4())
        };
        assert!(line.contains(&dns), "{line}");
    }
    // A none profile has no resolver at all.
    let off = env.topo.sandbox("offline").unwrap();
    assert!(ask(&off.ns, off.gateway_v4, "api.corral.test", TYPE_A).is_err());
}

#[test]
fn restart_replaces_the_daemon_and_stop_ends_it() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let env = env(vec![allowlist_profile()], DnsTiming::default());
    let gw = &env.gateways.0[0];
    let GatewayStatus::Running { pid: first } = gw.status() else {
        panic!("not running: {:?}", gw.status());
    };
    let p = env.profiles.get("agent").unwrap();
    let spec = GatewaySpec::from_profile(
        p,
        &[SocketAddr::new(UPSTREAM.into(), 53)],
        DnsTiming::default(),
    )
    .unwrap();
    let start = Instant::now();
    let second = gw.start_in(&spec, &env.topo.host).unwrap();
    eprintln!("gateway restart took {:?}", start.elapsed());
    assert_ne!(first, second);
    assert!(
        !Path::new(&format!("/proc/{first}/cmdline")).exists() || {
            // Reaped later by init; until then it is a zombie with no cmdline.
            std::fs::read(format!("/proc/{first}/cmdline"))
                .unwrap_or_default()
                .is_empty()
        }
    );
    let sb = env.topo.sandbox("agent").unwrap();
    assert_eq!(
        ask(&sb.ns, sb.gateway_v4, "api.corral.test", TYPE_A)
            .unwrap()
            .answers
            .len(),
        1
    );
    assert_eq!(gw.stop().unwrap(), Some(second));
    assert_eq!(gw.status(), GatewayStatus::Stopped);
    assert!(ask(&sb.ns, sb.gateway_v4, "api.corral.test", TYPE_A).is_err());
}

#[test]
fn a_missing_gateway_address_fails_the_start_with_dnsmasqs_reason() {
    if !corral_test_support::gate::netns() {
        return;
    }
    // A namespace without the bridge: dnsmasq cannot bind the gateway address.
    let ns = Netns::new().unwrap();
    let state = tempfile::tempdir().unwrap();
    let p = allowlist_profile();
    let spec = GatewaySpec::from_profile(
        &p,
        &[SocketAddr::new(UPSTREAM.into(), 53)],
        DnsTiming::default(),
    )
    .unwrap();
    let gw = Gateway::new(state.path(), &p.bridge);
    let err = gw.start_in(&spec, &ns).unwrap_err().to_string();
    assert!(
        err.contains("10.99.7.1") && err.contains("dnsmasq.conf"),
        "{err}"
    );
    assert_eq!(gw.status(), GatewayStatus::Stopped);
}

/// A reservation added to a running gateway serves its port at once, the
/// leases already given stay, and a port without one gets no answer.
#[test]
fn reservations_reload_without_dropping_leases() {
    if !corral_test_support::gate::netns() {
        return;
    }
    use corral_drill::raw::PacketSocket;
    use corral_drill::raw::dhcp::obtain;
    use corral_gateway::ReservationOutcome;

    let env = env(vec![allowlist_profile()], DnsTiming::default());
    let gw = &env.gateways.0[0];
    let mut sbs = env.topo.sandboxes_of("agent");
    let (one, two) = (sbs.next().unwrap(), sbs.next().unwrap());
    let lease = |sb: &corral_drill::lab::SandboxNs, xid| {
        let sock = PacketSocket::open(&sb.ns, "eth0").unwrap();
        obtain(&sock, sock.mac(), sock.mac(), xid, T).unwrap()
    };
    let bindings = env.topo.bindings().unwrap();
    let only_one: Vec<_> = bindings
        .iter()
        .filter(|b| b.port.as_str() == one.port)
        .cloned()
        .collect();
    assert_eq!(
        gw.set_reservations(&only_one).unwrap(),
        ReservationOutcome::Reloaded
    );
    assert_eq!(lease(one, 1).map(|l| l.addr), Some(one.v4));
    assert_eq!(
        lease(two, 2),
        None,
        "a port without a reservation got a lease"
    );
    let leases = || std::fs::read_to_string(gw.paths().leases()).unwrap_or_default();
    assert!(leases().contains(&one.v4.to_string()), "{}", leases());
    assert_eq!(
        gw.set_reservations(&bindings).unwrap(),
        ReservationOutcome::Reloaded
    );
    assert_eq!(lease(two, 3).map(|l| l.addr), Some(two.v4));
    // The first lease survived the reload and renews as the same address.
    assert!(leases().contains(&one.v4.to_string()), "{}", leases());
    assert_eq!(lease(one, 4).map(|l| l.addr), Some(one.v4));
}

/// The binding API end to end: unbinding a port takes its lease and its
/// traffic away at once; binding it again gives both back.
#[test]
fn bind_and_unbind_a_port_through_the_gateway() {
    if !corral_test_support::gate::netns() {
        return;
    }
    use corral_drill::raw::PacketSocket;
    use corral_drill::raw::dhcp::obtain;

    let env = env(vec![allowlist_profile()], DnsTiming::default());
    let host = Host::in_netns(env.topo.host.try_clone().unwrap());
    let sb = env.topo.sandbox("agent").unwrap();
    let lease = |xid| {
        let sock = PacketSocket::open(&sb.ns, "eth0").unwrap();
        obtain(&sock, sock.mac(), sock.mac(), xid, T).unwrap()
    };
    assert_eq!(lease(1).map(|l| l.addr), Some(sb.v4), "control");
    assert_eq!(tcp(&sb.ns, STATIC_ADDR), Observed::Connected, "control");
    let binding = env.plan.binding(&sb.port).unwrap().clone();
    let unbound =
        corral_gateway::unbind_port(&host, env.state.path(), &env.plan, &env.profiles, &sb.port)
            .unwrap();
    assert!(unbound.binding(&sb.port).is_none());
    assert_eq!(lease(2), None, "an unbound port got a lease");
    assert!(tcp(&sb.ns, STATIC_ADDR).blocked());
    let bound =
        corral_gateway::bind_port(&host, env.state.path(), &unbound, &env.profiles, binding)
            .unwrap();
    assert_eq!(bound, env.plan);
    assert_eq!(lease(3).map(|l| l.addr), Some(sb.v4));
    assert_eq!(tcp(&sb.ns, STATIC_ADDR), Observed::Connected);
    assert!(host.verify(&bound).unwrap().is_empty());
}
