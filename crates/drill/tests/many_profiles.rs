//! Real packets on a host of 100 profiles (issue 18): the base chains
//! dispatch to each profile's chains through verdict maps, so the first
//! and the last profile must be enforced exactly as a host of one profile
//! enforces them — each reaches its own allowlisted destination and not
//! the other's, neither reaches the other's sandboxes, a profile in the
//! middle in mode `none` reaches nothing — and `HostPlan::trace` (what
//! `corral explain` says) agrees with every packet.
//!
//! Every packet is first sent with the bridges up and no corral rules
//! (the control): it must get through, so a packet stopped after apply
//! was stopped by the rules.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::IpAddr;
use std::time::Duration;

use corral_drill::lab::topology::{PUBLIC_V4, SANDBOX_PORT, SandboxNs};
use corral_drill::lab::{Lab, Probe, tcp};
use corral_egress::plan::eval::{Flow, Learned};
use corral_egress::plan::trace::TraceVerdict;
use corral_egress::resolve::Resolution;
use corral_sandbox_core::config::Config;

const PROFILES: usize = 100;
const T: Duration = Duration::from_millis(800);
/// The profile in the middle, in mode `none`.
const MIDDLE: usize = PROFILES / 2;

fn config() -> Config {
    let mut text = String::new();
    for i in 0..PROFILES {
        let mode = match i {
            0 => format!(
                "mode = \"allowlist\"\nallow = [\"{}:443/tcp\"]",
                PUBLIC_V4[0]
            ),
            i if i == PROFILES - 1 => {
                format!(
                    "mode = \"allowlist\"\nallow = [\"{}:443/tcp\"]",
                    PUBLIC_V4[1]
                )
            }
            MIDDLE => "mode = \"none\"".to_owned(),
            i if i % 2 == 0 => "mode = \"internet\"".to_owned(),
            _ => format!(
                "mode = \"allowlist\"\nallow = [\"{}:80/tcp\"]",
                PUBLIC_V4[2]
            ),
        };
        text.push_str(&format!(
            "[[profile]]\nname = \"p{i}\"\nbridge = \"cm{i}\"\nsubnet = \"10.210.{i}.0/24\"\n{mode}\n\n"
        ));
    }
    Config::from_toml_str(&text, "many_profiles").unwrap()
}

/// (from, probe, allowed by the profile).
fn cases(lab: &Lab) -> Vec<(&SandboxNs, Probe, bool)> {
    let first = lab.sandbox("p0");
    let last = lab.sandbox(&format!("p{}", PROFILES - 1));
    let middle = lab.sandbox(&format!("p{MIDDLE}"));
    vec![
        (first, tcp(PUBLIC_V4[0], 443), true),
        (first, tcp(PUBLIC_V4[1], 443), false),
        (first, tcp(PUBLIC_V4[2], 80), false),
        (first, tcp(last.v4, SANDBOX_PORT), false),
        (last, tcp(PUBLIC_V4[1], 443), true),
        (last, tcp(PUBLIC_V4[0], 443), false),
        (last, tcp(first.v4, SANDBOX_PORT), false),
        (middle, tcp(PUBLIC_V4[0], 443), false),
        (middle, tcp(first.v4, SANDBOX_PORT), false),
    ]
}

#[test]
fn the_first_and_the_last_of_100_profiles_are_enforced_and_explained() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let cfg = config();
    assert_eq!(cfg.profiles.len(), PROFILES);
    let probed = [0, MIDDLE, PROFILES - 1];
    let lab = Lab::sparse(&cfg.profiles, &Resolution::new(), |i| {
        usize::from(probed.contains(&i))
    })
    .unwrap();

    lab.control().unwrap();
    for (sb, p, _) in cases(&lab) {
        let r = lab.probe(sb, &p, T);
        assert!(r.observed.reached(), "control: {} -> {p:?}: {r:?}", sb.name);
    }

    let report = lab.apply().unwrap();
    assert_eq!(report.bridges.len(), PROFILES);
    lab.topo.attach_sandboxes(true).unwrap();
    assert_eq!(lab.host.verify(&lab.plan).unwrap(), vec![]);
    // The dispatch is constant: no base chain grows with the profiles (it
    // holds the verdict-map dispatches and the fail-closed drops, as with
    // one profile).
    let one = corral_egress::plan::HostPlan::build(
        &corral_sandbox_core::ProfileSet::new(vec![lab.profiles.iter().next().unwrap().clone()])
            .unwrap(),
        &corral_egress::plan::PlanSettings::default(),
        &corral_egress::resolve::Resolution::new(),
    )
    .unwrap();
    for c in lab.plan.inet.chains.iter().filter(|c| c.base.is_some()) {
        let single = one
            .inet
            .chains
            .iter()
            .find(|o| o.name == c.name)
            .map_or(0, |o| o.rules.len());
        assert!(
            c.rules.len() <= single.max(1),
            "{} has {} rules ({} with one profile)",
            c.name,
            c.rules.len(),
            single
        );
    }

    for (sb, p, allowed) in cases(&lab) {
        let r = lab.probe(sb, &p, T);
        let Probe::Tcp { to } = p else {
            unreachable!("every case is TCP")
        };
        let flow = Flow {
            protocol: 6,
            src: IpAddr::V4(sb.v4),
            dst: to.ip(),
            dport: Some(to.port()),
        };
        let trace = lab.plan.trace(&flow, &Learned::new());
        assert_eq!(
            r.observed.reached(),
            allowed,
            "{} -> {to}: {r:?} (trace {trace:?})",
            sb.name
        );
        assert!(
            allowed || r.observed.blocked(),
            "{} -> {to}: {r:?}",
            sb.name
        );
        let explained = trace.verdict == TraceVerdict::Allow;
        assert_eq!(explained, allowed, "{} -> {to}: {trace:#?}", sb.name);
    }
}
