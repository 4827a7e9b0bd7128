//! L3/L4 class 12 (docs/security.md): one sandbox filling the host's
//! conntrack table. Real packets in the drill's namespace lab (ports bound
//! as the lifecycle binds them), entries counted over ctnetlink in the
//! host namespace. The control of each attack is corral's plan without
//! the class-12 rules (no loose-pickup drop, no per-source meters) applied
//! to the same lab: there the flood goes past the limit, so each test
//! fails on the rules before the change.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod nft_support;

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use corral_drill::attack::conntrack_fill::{self, Shot, without_flow_limits};
use corral_drill::lab::topology::{PUBLIC_V4, PUBLIC_V6, SandboxNs, TCP_PORTS};
use corral_drill::lab::{Lab, Observed, tcp};
use corral_egress::plan::Resolution;
use corral_sandbox_core::{EgressMode, FlowLimits, ProfileSet};
use nft_support::profile;

/// Flows one `capped` sandbox may hold.
const CAP: u32 = 50;
/// New flows a second one `rated` sandbox may start (twice that at once).
const RATE: u32 = 20;

/// Two `internet` profiles: `capped` (a low flow cap, IPv4 and IPv6) and
/// `rated` (a low rate).
fn profiles() -> ProfileSet {
    let mut capped = profile(
        "capped",
        "cr-cap",
        "10.94.1.0/24",
        EgressMode::Internet,
        &[],
    );
    capped.subnet_v6 = Some("fd00:94:1::/64".parse().unwrap());
    capped.flows = FlowLimits {
        max_per_source: CAP,
        new_per_second: FlowLimits::MAX,
    };
    let mut rated = profile(
        "rated",
        "cr-rate",
        "10.94.2.0/24",
        EgressMode::Internet,
        &[],
    );
    rated.flows = FlowLimits {
        max_per_source: FlowLimits::MAX,
        new_per_second: RATE,
    };
    ProfileSet::new(vec![capped, rated]).unwrap()
}

fn lab() -> Option<Lab> {
    if !corral_test_support::gate::netns() {
        return None;
    }
    let lab = Lab::new(&profiles(), &Resolution::new()).unwrap();
    lab.control().unwrap();
    Some(lab)
}

fn sandbox<'a>(lab: &'a Lab, profile: &'a str, nth: usize) -> &'a SandboxNs {
    lab.topo.sandboxes_of(profile).nth(nth).unwrap()
}

fn public(v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(PUBLIC_V6[0])
    } else {
        IpAddr::V4(PUBLIC_V4[0])
    }
}

/// Bare ACKs (each from a fresh source port) towards the internet side
/// become entries without the rules (loose pickup) and none with them,
/// IPv4 and IPv6.
#[test]
fn class12_bare_acks_create_no_conntrack_entries() {
    let Some(lab) = lab() else { return };
    let sb = sandbox(&lab, "capped", 0);
    let silent = [
        IpAddr::V4(conntrack_fill::SILENT_V4),
        IpAddr::V6(conntrack_fill::SILENT_V6),
    ];
    let shots = silent.map(|to| Shot::BareAcks {
        to: SocketAddr::new(to, TCP_PORTS[0]),
        count: 40,
    });
    lab.host.apply(&without_flow_limits(&lab.plan)).unwrap();
    for s in &shots {
        let (n, landed) = conntrack_fill::launch(&lab.topo, sb, s).unwrap();
        eprintln!("control {}: {n} entries", s.target());
        assert!(
            landed,
            "control ({}): loose pickup made {n} entries",
            s.target()
        );
    }
    lab.apply().unwrap();
    for s in &shots {
        let (n, _) = conntrack_fill::launch(&lab.topo, sb, s).unwrap();
        eprintln!("enforced {}: {n} entries", s.target());
        assert_eq!(n, 0, "{}", s.target());
    }
}

/// The shared guard's drops end in the profile's sink chains, found by
/// the bridge in `blocked_by_iif` / `suppressed_by_iif`; with both maps
/// emptied (a tampered or half-applied ruleset) the bare ACKs are still
/// dropped, by the plain drop after each twin pair: the sinks fail
/// closed. Control: the plan without the loose-pickup rules, where they
/// become entries.
#[test]
fn class12_bare_acks_stay_dropped_without_the_profiles_sinks() {
    let Some(lab) = lab() else { return };
    let sb = sandbox(&lab, "capped", 0);
    let shot = Shot::BareAcks {
        to: SocketAddr::new(IpAddr::V4(conntrack_fill::SILENT_V4), TCP_PORTS[0]),
        count: 40,
    };
    lab.host.apply(&without_flow_limits(&lab.plan)).unwrap();
    let (n, landed) = conntrack_fill::launch(&lab.topo, sb, &shot).unwrap();
    eprintln!("control {}: {n} entries", shot.target());
    assert!(landed, "control ({}): {n} entries", shot.target());

    let mut sinkless = lab.plan.clone();
    let sinks = [
        corral_egress::plan::vmap::BLOCKED_BY_IIF,
        corral_egress::plan::vmap::SUPPRESSED_BY_IIF,
    ];
    let mut emptied = 0;
    for m in sinkless
        .inet
        .maps
        .iter_mut()
        .filter(|m| sinks.contains(&m.name.as_str()))
    {
        m.elements.clear();
        emptied += 1;
    }
    assert_eq!(emptied, 2, "both sink maps are planned");
    lab.host.apply(&sinkless).unwrap();
    let (n, _) = conntrack_fill::launch(&lab.topo, sb, &shot).unwrap();
    eprintln!("without sinks {}: {n} entries", shot.target());
    assert_eq!(n, 0, "{}", shot.target());
}

/// A sandbox starting six times its cap of new flows holds at most the
/// cap (IPv4 and IPv6, each its own source), and a sibling on the same
/// profile still connects; without the rules the same flood goes past
/// the cap.
#[test]
fn class12_a_flood_is_held_at_the_per_source_cap_and_a_sibling_still_connects() {
    let Some(lab) = lab() else { return };
    let (sb, sibling) = (sandbox(&lab, "capped", 0), sandbox(&lab, "capped", 1));
    let shots = [false, true].map(|v6| Shot::Flood {
        to: public(v6),
        count: 300,
        limit: CAP,
    });
    lab.host.apply(&without_flow_limits(&lab.plan)).unwrap();
    for s in &shots {
        let (n, landed) = conntrack_fill::launch(&lab.topo, sb, s).unwrap();
        eprintln!("control {}: {n} tracked", s.target());
        assert!(landed, "control ({}): {n} tracked", s.target());
    }
    lab.apply().unwrap();
    for s in &shots {
        let (n, landed) = conntrack_fill::launch(&lab.topo, sb, s).unwrap();
        eprintln!("enforced {}: {n} tracked", s.target());
        assert!(!landed && n > 0, "{}: {n} tracked", s.target());
    }
    for v6 in [false, true] {
        let r = lab.probe(
            sibling,
            &tcp(public(v6), TCP_PORTS[0]),
            Duration::from_millis(1500),
        );
        assert_eq!(r.observed, Observed::Connected, "sibling (v6 {v6}): {r:?}");
    }
}

/// A sandbox starting new flows as fast as it can gets at most the
/// profile's burst plus its rate for the time it took; without the rules
/// every flow is tracked.
#[test]
fn class12_new_flows_over_the_per_source_rate_are_refused() {
    let Some(lab) = lab() else { return };
    let sb = sandbox(&lab, "rated", 0);
    let shot = Shot::Flood {
        to: public(false),
        count: 300,
        limit: 299,
    };
    lab.host.apply(&without_flow_limits(&lab.plan)).unwrap();
    let (n, landed) = conntrack_fill::launch(&lab.topo, sb, &shot).unwrap();
    eprintln!("control rate: {n} of 300 tracked");
    assert!(landed, "control: {n} of 300 tracked");
    lab.apply().unwrap();
    let start = Instant::now();
    let (n, _) = conntrack_fill::launch(&lab.topo, sb, &shot).unwrap();
    // The bound follows from the time the launch took (its send loop and
    // the wait before counting), rounded up to whole seconds.
    let secs = start.elapsed().as_secs() + 1;
    let bound = u64::from(2 * RATE) + u64::from(RATE) * secs;
    eprintln!("enforced rate: {n} of 300 tracked (bound {bound})");
    assert!(
        n > 0 && (n as u64) <= bound,
        "{n} tracked, at most {bound} allowed"
    );
}
