//! Internet profile, real packets: public-looking addresses answer (IPv4
//! and IPv6); RFC 1918, shared, metadata, the LAN host, the host's uplink
//! address and private IPv6 do not. Each probe is a control first.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::IpAddr;
use std::time::Duration;

mod nft_support;

use corral_drill::lab::tcp;
use corral_drill::lab::topology::{
    HOST_SERVICE_PORT, HOST_UPLINK_V4, HOST_UPLINK_V6, LAN_HOST_V4, LAN_PORT, PRIVATE, PUBLIC_V4,
    PUBLIC_V6,
};
use corral_drill::lab::{Lab, Observed, Probe};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::config::Config;
use corral_sandbox_core::{BlockAction, ProfileSet};
use nft_support::{builtin_lab, control_then_apply};

#[test]
fn public_addresses_are_reachable_v4_and_v6() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = builtin_lab();
    let probes = [
        tcp(PUBLIC_V4[0], 443),
        tcp(PUBLIC_V4[3], 80),
        Probe::Udp {
            to: (IpAddr::from(PUBLIC_V4[1]), 4500).into(),
        },
        Probe::Icmp {
            to: PUBLIC_V4[1].into(),
        },
        tcp(PUBLIC_V6[0], 443),
        Probe::Icmp {
            to: PUBLIC_V6[1].into(),
        },
    ];
    for (p, r) in probes
        .iter()
        .zip(control_then_apply(&lab, "internet", &probes))
    {
        assert_eq!(r.observed, Observed::Connected, "{p}: {r:?}");
    }
}

#[test]
fn private_metadata_lan_and_uplink_are_blocked() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = builtin_lab();
    let mut probes: Vec<Probe> = PRIVATE.iter().map(|ip| tcp(*ip, 443)).collect();
    probes.push(Probe::Icmp { to: PRIVATE[4] });
    probes.push(tcp(LAN_HOST_V4, LAN_PORT));
    probes.push(tcp(HOST_UPLINK_V4, HOST_SERVICE_PORT));
    probes.push(tcp(HOST_UPLINK_V6, HOST_SERVICE_PORT));
    for (p, r) in probes
        .iter()
        .zip(control_then_apply(&lab, "internet", &probes))
    {
        assert!(r.observed.blocked(), "{p}: {r:?}");
    }
}

#[test]
fn reject_fails_fast_and_drop_times_out() {
    if !corral_test_support::gate::netns() {
        return;
    }
    // Reject (the default): the forwarded probe to metadata is refused at once.
    let lab = builtin_lab();
    let r = control_then_apply(&lab, "internet", &[tcp(PRIVATE[4], 80)]).remove(0);
    assert!(matches!(r.observed, Observed::Rejected(_)), "{r:?}");
    assert!(r.ms < 500, "{r:?}");

    // The same profile with `block = drop`: the probe waits for its timeout.
    let cfg = Config::builtin_default();
    let mut profiles: Vec<_> = cfg.profiles.iter().cloned().collect();
    for p in &mut profiles {
        p.block = BlockAction::Drop;
    }
    let set = ProfileSet::new(profiles).unwrap();
    let lab = Lab::new(&set, &Resolution::new()).unwrap();
    lab.control().unwrap();
    let timeout = Duration::from_millis(700);
    let sb = lab.sandbox("internet");
    let p = tcp(PRIVATE[4], 80);
    assert_eq!(lab.probe(sb, &p, timeout).observed, Observed::Connected);
    lab.apply().unwrap();
    let r = lab.probe(sb, &p, timeout);
    assert_eq!(r.observed, Observed::TimedOut, "{r:?}");
    assert!(r.ms >= 650, "{r:?}");
}
