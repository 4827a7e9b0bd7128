//! `none` profile, real packets: nothing leaves the bridge. Each probe is a
//! control first.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use corral_drill::lab::topology::{
    HOST_SERVICE_PORT, HOST_UPLINK_V4, LAN_HOST_V4, LAN_PORT, PRIVATE, PUBLIC_RESOLVER_V4,
    PUBLIC_V4,
};
use corral_drill::lab::{Lab, Observed, Probe};
use corral_drill::lab::{tcp, udp};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::config::Config;

const T: Duration = Duration::from_millis(1500);

#[test]
fn none_reaches_nothing() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let cfg = Config::builtin_default();
    let lab = Lab::new(&cfg.profiles, &Resolution::new()).unwrap();
    lab.control().unwrap();
    let sb = lab.sandbox("isolated");
    let probes = [
        tcp(PUBLIC_V4[0], 443),
        tcp(PUBLIC_V4[2], 443),
        udp(PUBLIC_V4[1], 443),
        Probe::Icmp {
            to: PUBLIC_V4[0].into(),
        },
        tcp(PRIVATE[0], 443),
        tcp(PRIVATE[4], 80),
        udp(PUBLIC_RESOLVER_V4, 53),
        tcp(LAN_HOST_V4, LAN_PORT),
        tcp(HOST_UPLINK_V4, HOST_SERVICE_PORT),
        tcp(sb.gateway_v4, HOST_SERVICE_PORT),
    ];
    for p in &probes {
        let r = lab.probe(sb, p, T);
        assert_eq!(r.observed, Observed::Connected, "control {p}: {r:?}");
    }
    lab.apply().unwrap();
    for p in &probes {
        let r = lab.probe(sb, p, T);
        assert!(r.observed.blocked(), "{p}: {r:?}");
    }
}
