//! Allowlist profile, real packets: the allowlisted address:port answers;
//! the same address on another port and other addresses do not. Every
//! probe first succeeds as a control without corral's rules.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod nft_support;

use corral_drill::lab::topology::{PUBLIC_V4, PUBLIC_V6};
use corral_drill::lab::{Observed, Probe};
use corral_drill::lab::{tcp, udp};
use nft_support::{PROBE_TIMEOUT as T, builtin_lab, control_then_apply};

#[test]
fn allowlisted_address_and_port_is_reachable() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = builtin_lab();
    let probes = [tcp(PUBLIC_V4[2], 443), tcp([203, 0, 113, 1], 8000)];
    for (p, r) in probes
        .iter()
        .zip(control_then_apply(&lab, "allowlist", &probes))
    {
        assert_eq!(r.observed, Observed::Connected, "{p}: {r:?}");
    }
}

#[test]
fn same_address_other_port_and_other_addresses_are_blocked_fast() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = builtin_lab();
    let probes = [
        tcp(PUBLIC_V4[2], 80),
        udp(PUBLIC_V4[2], 443),
        tcp(PUBLIC_V4[0], 443),
        tcp(PUBLIC_V4[3], 443),
        Probe::Icmp {
            to: PUBLIC_V4[0].into(),
        },
    ];
    for (p, r) in probes
        .iter()
        .zip(control_then_apply(&lab, "allowlist", &probes))
    {
        assert!(matches!(r.observed, Observed::Rejected(_)), "{p}: {r:?}");
        assert!(r.ms < 500, "reject must fail fast: {p}: {r:?}");
    }
}

#[test]
fn allowlist_without_ipv6_subnet_has_no_ipv6() {
    if !corral_test_support::gate::netns() {
        return;
    }
    // The built-in allowlist profile lists an IPv6 address but has no IPv6
    // subnet: from an IPv6-capable sandbox on another profile the address
    // answers (control), and the allowlist sandbox has no IPv6 at all.
    let lab = builtin_lab();
    assert!(lab.sandbox("allowlist").v6.is_none());
    let inet = lab.sandbox("internet");
    let r = lab.probe(inet, &tcp(PUBLIC_V6[0], 443), T);
    assert_eq!(r.observed, Observed::Connected, "{r:?}");
}
