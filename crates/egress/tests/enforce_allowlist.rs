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

/// Class 5 (docs/security.md), at apply: a host name the host's resolver
/// answers with the metadata address (seen with a hostile /etc/hosts) is
/// refused with a message naming the name and the address, instead of
/// landing in the allow set. Control: the address answers without rules.
#[test]
fn class5_apply_time_resolution_into_a_reserved_range_is_refused() {
    if !corral_test_support::gate::netns() {
        return;
    }
    use corral_drill::lab::topology::PRIVATE;
    let p = nft_support::profile(
        "meta",
        "cb-meta",
        "10.232.3.0/24",
        corral_sandbox_core::EgressMode::Allowlist,
        &["api.corral.test:80/tcp"],
    );
    let set = corral_sandbox_core::ProfileSet::new(vec![p]).unwrap();
    let mut res = corral_egress::resolve::Resolution::new();
    res.insert(&"api.corral.test".parse().unwrap(), [PRIVATE[4]]);
    match corral_drill::lab::Lab::new(&set, &res) {
        Err(corral_drill::lab::LabError::Plan(e)) => {
            let text = e.to_string();
            assert!(
                text.contains("api.corral.test")
                    && text.contains("169.254.169.254")
                    && text.contains("169.254.0.0/16"),
                "{text}"
            );
        }
        Err(e) => panic!("unexpected error: {e}"),
        Ok(lab) => {
            lab.control().unwrap();
            let r = nft_support::control_then_apply(
                &lab,
                "meta",
                &[corral_drill::lab::tcp(PRIVATE[4], 80)],
            );
            panic!("the plan admitted the metadata address; after apply a probe saw {r:?}");
        }
    }
}
