//! An apply is one transaction to its end: a failure injected at every
//! step after the nftables commit leaves either the previous plan in force
//! (its ruleset committed again, its flows kept, new flows it allows
//! still opening) or, with no previous plan to return to, the new plan
//! complete (its revocation ran) — never the new rules with the old flows.
//! Real TCP flows from a lab sandbox: one to an address both plans allow,
//! one to an address only the previous plan allows.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod nft_support;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use corral_drill::lab::Lab;
use corral_drill::lab::topology::PUBLIC_V4;
use corral_egress::host::{ApplyStep, HostDrift, HostError, InForce};
use corral_egress::netns::Netns;
use corral_egress::plan::{HostPlan, PlanSettings};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::{EgressMode, ProfileSet};
use nft_support::profile;

const ONE_SECOND: Duration = Duration::from_secs(1);

fn profiles(allow: &[String]) -> ProfileSet {
    let allow: Vec<&str> = allow.iter().map(String::as_str).collect();
    ProfileSet::new(vec![profile(
        "txn",
        "cb-txn",
        "10.232.7.0/24",
        EgressMode::Allowlist,
        &allow,
    )])
    .unwrap()
}

fn connect(ns: &Netns, ip: Ipv4Addr) -> std::io::Result<TcpStream> {
    let to = SocketAddr::new(IpAddr::V4(ip), 443);
    let s = ns
        .run(|| TcpStream::connect_timeout(&to, ONE_SECOND))
        .unwrap()?;
    s.set_read_timeout(Some(ONE_SECOND))?;
    s.set_write_timeout(Some(ONE_SECOND))?;
    Ok(s)
}

/// One echo round trip: true when it came back within a second.
fn alive(s: &mut TcpStream, msg: &[u8]) -> bool {
    let mut buf = vec![0u8; msg.len()];
    s.write_all(msg).is_ok() && s.read_exact(&mut buf).is_ok() && buf == msg
}

fn plan(lab: &Lab, allow: &[String]) -> HostPlan {
    let settings = PlanSettings {
        host_networks: lab.plan.host_networks.clone(),
        ..PlanSettings::default()
    };
    let set = profiles(allow);
    HostPlan::build(&set, &settings, &Resolution::new())
        .unwrap()
        .with_bindings(&set, lab.plan.bindings.clone())
        .unwrap()
}

fn nft_drift(lab: &Lab, plan: &HostPlan) -> Vec<HostDrift> {
    lab.host
        .verify(plan)
        .unwrap()
        .into_iter()
        .filter(|d| matches!(d, HostDrift::Nft(_)))
        .collect()
}

#[test]
fn a_failure_after_the_commit_puts_the_previous_plan_back_or_completes_the_new_one() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let (kept, dropped) = (PUBLIC_V4[2], PUBLIC_V4[3]);
    let wide = vec![format!("{kept}:443/tcp"), format!("{dropped}:443/tcp")];
    let narrow = vec![format!("{kept}:443/tcp")];
    let lab = Lab::new(&profiles(&wide), &Resolution::new()).unwrap();
    lab.control().unwrap();
    lab.apply().unwrap();
    let (wide, narrow) = (plan(&lab, &wide), plan(&lab, &narrow));
    let ns = &lab.sandbox("txn").ns;

    for step in ApplyStep::ALL {
        // With the previous plan known: it is put back whole.
        lab.host.apply(&wide).unwrap();
        let mut a = connect(ns, kept).unwrap();
        let mut b = connect(ns, dropped).unwrap();
        assert!(
            alive(&mut a, b"a") && alive(&mut b, b"b"),
            "{step}: control"
        );
        let err = lab
            .host
            .apply_with_fault(&narrow, Some(&wide), step)
            .unwrap_err();
        let HostError::AfterCommit {
            step: failed,
            in_force: InForce::Previous { .. },
            ..
        } = &err
        else {
            panic!("{step}: expected the previous plan back in force, got {err:?}");
        };
        assert_eq!(*failed, step);
        assert!(err.to_string().contains("previous ruleset"), "{err}");
        let drift = nft_drift(&lab, &wide);
        assert!(
            drift.is_empty(),
            "{step}: the previous ruleset is not whole: {drift:#?}"
        );
        assert!(alive(&mut a, b"a"), "{step}: a flow both plans allow died");
        assert!(
            alive(&mut b, b"b"),
            "{step}: a flow the plan in force allows died"
        );
        let mut again = connect(ns, dropped)
            .unwrap_or_else(|e| panic!("{step}: the previous plan allows {dropped}: {e}"));
        assert!(alive(&mut again, b"c"), "{step}");

        // Without a previous plan to return to: the new one is completed,
        // its revocation included (before, an error here skipped it and
        // the de-listed flow lived on under the new rules).
        let err = lab.host.apply_with_fault(&narrow, None, step).unwrap_err();
        let HostError::AfterCommit {
            in_force: InForce::New { revoked, roll_back },
            ..
        } = &err
        else {
            panic!("{step}: expected the new plan completed, got {err:?}");
        };
        assert!(roll_back.is_none(), "{step}: {roll_back:?}");
        let revoked = revoked.as_ref().unwrap();
        assert!(
            revoked
                .deleted
                .iter()
                .any(|d| d.contains(&dropped.to_string())),
            "{step}: {revoked:?}"
        );
        let drift = nft_drift(&lab, &narrow);
        assert!(
            drift.is_empty(),
            "{step}: the new ruleset is not whole: {drift:#?}"
        );
        assert!(
            alive(&mut a, b"d"),
            "{step}: a flow the new plan allows died"
        );
        assert!(!alive(&mut b, b"e"), "{step}: a de-listed flow lives on");
        assert!(
            !alive(&mut again, b"f"),
            "{step}: a de-listed flow lives on"
        );
        assert!(
            connect(ns, dropped).is_err(),
            "{step}: the new plan lets {dropped} be reached"
        );
    }
}
