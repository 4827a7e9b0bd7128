//! Crafted packets from a sandbox with root, by class of hole (numbering
//! of docs/security.md): each attack first gets through without corral's
//! rules (the control), then must not with them. IPv4 and IPv6 wherever
//! the built-in profiles have both. The attacks themselves are the
//! drill's (`corral_drill::attack::l3`), so the drill and these tests
//! send the same packets.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod nft_support;

use corral_drill::attack::l3::Class;
use corral_egress::host::HostDrift;
use nft_support::{attack_control_then_apply, attacks_of, builtin_lab};

fn none_gets_through(class: Class) {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = builtin_lab();
    let attacks = attacks_of(&lab, class);
    let results = attack_control_then_apply(&lab, &attacks);
    let through: Vec<String> = attacks
        .iter()
        .zip(&results)
        .filter(|(_, r)| !r.blocked())
        .map(|(a, r)| {
            format!(
                "{} from {}: {} -> {r:?}",
                a.what,
                lab.topo.sandboxes[a.from].name,
                a.target()
            )
        })
        .collect();
    assert!(through.is_empty(), "{}: {through:#?}", class.label());
}

/// 1: another profile's IPv4 source, an IPv6 source outside the prefix,
/// the gateway's own address as source.
#[test]
fn class1_forged_sources_never_leave_the_host() {
    none_gets_through(Class::ForgedSource);
}

/// 2: a forged packet to DHCP (IPv4) or the gateway's DNS (IPv6) from a
/// forbidden destination, then the "reply" to it.
#[test]
fn class2_forged_conntrack_replies_are_not_established() {
    none_gets_through(Class::ReplyDirection);
}

/// 3: a forged-source query to a UDP service on the gateway; the answer
/// must not leave by the uplink.
#[test]
fn class3_the_gateway_reflects_nothing_to_a_forged_source() {
    none_gets_through(Class::Reflector);
}

/// 6: the host's neighbour on a public-looking LAN, IPv4 and IPv6.
#[test]
fn class6_the_hosts_own_networks_are_blocked_in_internet_mode() {
    none_gets_through(Class::HostNetworks);
}

/// 7: a sandbox whose port left its bridge reaches neither the internet
/// nor a host service, and `verify` reports it.
#[test]
fn class7_a_port_off_its_bridge_gets_nowhere_and_verify_says_so() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = builtin_lab();
    let attacks = attacks_of(&lab, Class::OffBridge);
    let results = attack_control_then_apply(&lab, &attacks);
    for (a, r) in attacks.iter().zip(&results) {
        assert!(r.blocked(), "{} {}: {r:?}", a.what, a.target());
    }
    let drift = lab.host.verify(&lab.plan).unwrap();
    assert!(
        drift
            .iter()
            .any(|d| matches!(d, HostDrift::StraySource { packets, .. } if *packets > 0)),
        "{drift:#?}"
    );
}
