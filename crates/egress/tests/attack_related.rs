//! L3/L4 class 11 (docs/security.md): ICMP errors conntrack relates to a
//! flow that is not the sender's profile's. Real packets in the drill's
//! namespace lab, sandbox ports bound as the lifecycle binds them, IPv4 and
//! IPv6. The control of each attack is corral's plan with the related
//! accepts as they were before class 11 (`ct state established,related`
//! without asking whose flow), applied to the same lab: there the error
//! lands, so each test fails on the rules before the change.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod nft_support;

use corral_drill::attack::related::without_own_flow;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use corral_drill::attack::related::{self, Shot};
use corral_drill::lab::topology::{PUBLIC_V4, PUBLIC_V6};
use corral_drill::lab::{Lab, Observed};
use corral_egress::plan::Resolution;
use corral_sandbox_core::{EgressMode, ProfileSet};
use nft_support::profile;

const TIMEOUT: Duration = Duration::from_millis(1500);

/// A `none`, an `internet` and an `allowlist` profile, all with IPv6. The
/// allowlist lists [`peer`] (UDP), so its sandbox has a flow of its own
/// there for an error to quote; [`unlisted_peer`] it does not list.
fn profiles() -> ProfileSet {
    let mut iso = profile("iso", "cr-iso", "10.93.1.0/24", EgressMode::None, &[]);
    iso.subnet_v6 = Some("fd00:93:1::/64".parse().unwrap());
    let mut web = profile("web", "cr-web", "10.93.2.0/24", EgressMode::Internet, &[]);
    web.subnet_v6 = Some("fd00:93:2::/64".parse().unwrap());
    let listed = [
        format!("{}/udp", peer(false)),
        format!("{}/udp", peer(true)),
    ];
    let listed: Vec<&str> = listed.iter().map(String::as_str).collect();
    let mut alw = profile(
        "alw",
        "cr-alw",
        "10.93.3.0/24",
        EgressMode::Allowlist,
        &listed,
    );
    alw.subnet_v6 = Some("fd00:93:3::/64".parse().unwrap());
    ProfileSet::new(vec![iso, web, alw]).unwrap()
}

fn peer(v6: bool) -> SocketAddr {
    if v6 {
        SocketAddr::new(IpAddr::V6(PUBLIC_V6[0]), 4500)
    } else {
        SocketAddr::new(IpAddr::V4(PUBLIC_V4[1]), 4500)
    }
}

/// A public host the `alw` profile does not list.
fn unlisted_peer(v6: bool) -> SocketAddr {
    if v6 {
        SocketAddr::new(IpAddr::V6(PUBLIC_V6[1]), 4500)
    } else {
        SocketAddr::new(IpAddr::V4(PUBLIC_V4[2]), 4500)
    }
}

fn lab() -> Option<Lab> {
    if !corral_test_support::gate::netns() {
        return None;
    }
    let lab = Lab::new(&profiles(), &Resolution::new()).unwrap();
    lab.control().unwrap();
    Some(lab)
}

fn index(lab: &Lab, profile: &str) -> usize {
    lab.topo
        .sandboxes
        .iter()
        .position(|s| s.profile == profile)
        .unwrap()
}

/// Runs `shots` from the `iso` sandbox under the legacy plan (each must
/// land) and then under corral's plan (each must be blocked).
fn control_then_enforced(lab: &Lab, shots: &[Shot]) {
    control_then_enforced_from(lab, "iso", shots);
}

/// The same from a sandbox of `attacker`.
fn control_then_enforced_from(lab: &Lab, attacker: &str, shots: &[Shot]) {
    let from = &lab.topo.sandboxes[index(lab, attacker)];
    lab.host.apply(&without_own_flow(&lab.plan)).unwrap();
    for s in shots {
        let r = related::launch(&lab.topo, from, s, TIMEOUT);
        assert_eq!(
            r,
            Observed::Connected,
            "control ({}): with the old related accepts it must land",
            s.target()
        );
    }
    lab.apply().unwrap();
    for s in shots {
        let r = related::launch(&lab.topo, from, s, TIMEOUT);
        assert!(r.blocked(), "{}: {r:?}", s.target());
    }
}

/// From `none`, a port unreachable quoting an `internet` sandbox's flow
/// does not leave towards that flow's peer; the `internet` sandbox's own
/// error for its own flow still does (usefulness).
#[test]
fn class11_an_error_quoting_another_profiles_flow_does_not_leave() {
    let Some(lab) = lab() else { return };
    let web = index(&lab, "web");
    let shots: Vec<Shot> = [false, true]
        .map(|v6| Shot::Out {
            victim: web,
            peer: peer(v6),
        })
        .into();
    control_then_enforced(&lab, &shots);
    let w = &lab.topo.sandboxes[web];
    for v6 in [false, true] {
        let own = related::error_out(&lab.topo, w, w, peer(v6), TIMEOUT).unwrap();
        assert!(own, "the sandbox's own error for its own flow (v6 {v6})");
    }
}

/// From `none`, a port unreachable to an `internet` sandbox quoting that
/// sandbox's (masqueraded) flow is not delivered to it.
#[test]
fn class11_an_error_from_another_profile_is_not_injected() {
    let Some(lab) = lab() else { return };
    let web = index(&lab, "web");
    let shots: Vec<Shot> = [false, true]
        .map(|v6| Shot::In {
            victim: web,
            peer: peer(v6),
        })
        .into();
    control_then_enforced(&lab, &shots);
}

/// From `none`, "fragmentation needed" (IPv4) and "packet too big" (IPv6)
/// quoting one of the host's own flows leave the host's path MTU towards
/// that destination as it was (read from the kernel's route cache through
/// a connected socket, `IP_MTU` / `IPV6_MTU`).
#[test]
fn class11_a_sandbox_never_sets_the_hosts_path_mtu() {
    let Some(lab) = lab() else { return };
    control_then_enforced(
        &lab,
        &[Shot::HostMtu { v6: false }, Shot::HostMtu { v6: true }],
    );
}

/// From `allowlist` (the review's second sender), a port unreachable
/// quoting an `internet` sandbox's flow to a host the allowlist does not
/// list does not leave towards that host.
#[test]
fn class11_an_allowlist_sandbox_cannot_send_an_error_for_another_profiles_flow() {
    let Some(lab) = lab() else { return };
    let web = index(&lab, "web");
    let shots: Vec<Shot> = [false, true]
        .map(|v6| Shot::Out {
            victim: web,
            peer: unlisted_peer(v6),
        })
        .into();
    control_then_enforced_from(&lab, "alw", &shots);
}

/// The review's second inbound shape, internet → allowlist: a port
/// unreachable from an `internet` sandbox quoting an `allowlist`
/// sandbox's own (listed, masqueraded) flow is not delivered to it.
#[test]
fn class11_an_internet_sandbox_cannot_inject_an_error_into_an_allowlist_sandbox() {
    let Some(lab) = lab() else { return };
    let alw = index(&lab, "alw");
    let shots: Vec<Shot> = [false, true]
        .map(|v6| Shot::In {
            victim: alw,
            peer: peer(v6),
        })
        .into();
    control_then_enforced_from(&lab, "web", &shots);
}
