//! Class 9 (docs/security.md): an apply or refresh that narrows a profile
//! revokes the flows it no longer allows. Real TCP flows from a sandbox:
//! one to an address that stays allowed, one to an address the new plan
//! drops. After the narrowing returns, the de-listed flow is dead within
//! one echo round trip of at most 1 s, the other still echoes — through a
//! new apply and through an element-only refresh alike. (An established
//! flow is accepted before any address rule: without revocation the
//! de-listed one would live on.)

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod nft_support;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::Duration;

use corral_drill::lab::Lab;
use corral_drill::lab::topology::PUBLIC_V4;
use corral_egress::netns::Netns;
use corral_egress::plan::{HostPlan, PlanSettings};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::{EgressMode, ProfileSet};
use nft_support::profile;

const ONE_SECOND: Duration = Duration::from_secs(1);

fn profiles(allow: &[&str]) -> ProfileSet {
    ProfileSet::new(vec![profile(
        "rev",
        "cb-rev",
        "10.232.1.0/24",
        EgressMode::Allowlist,
        allow,
    )])
    .unwrap()
}

fn open(ns: &Netns, ip: std::net::Ipv4Addr) -> TcpStream {
    let to = SocketAddr::new(IpAddr::V4(ip), 443);
    let s = ns
        .run(|| TcpStream::connect_timeout(&to, ONE_SECOND))
        .unwrap()
        .unwrap_or_else(|e| panic!("control: connect {to}: {e}"));
    s.set_read_timeout(Some(ONE_SECOND)).unwrap();
    s.set_write_timeout(Some(ONE_SECOND)).unwrap();
    s
}

/// One echo round trip: true when it came back within a second.
fn alive(s: &mut TcpStream, msg: &[u8]) -> bool {
    let mut buf = vec![0u8; msg.len()];
    s.write_all(msg).is_ok() && s.read_exact(&mut buf).is_ok() && buf == msg
}

fn plan(lab: &Lab, allow: &[&str]) -> HostPlan {
    let settings = PlanSettings {
        host_networks: lab.plan.host_networks.clone(),
        ..PlanSettings::default()
    };
    // The lab's sandboxes stay bound: only the allowlist changes.
    let set = profiles(allow);
    HostPlan::build(&set, &settings, &Resolution::new())
        .unwrap()
        .with_bindings(&set, lab.plan.bindings.clone())
        .unwrap()
}

#[test]
fn class9_narrowing_revokes_delisted_flows_and_keeps_allowed_ones() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let (kept, dropped) = (PUBLIC_V4[2], PUBLIC_V4[3]);
    let wide = [format!("{kept}:443/tcp"), format!("{dropped}:443/tcp")];
    let wide: Vec<&str> = wide.iter().map(String::as_str).collect();
    let narrow_entry = format!("{kept}:443/tcp");
    let lab = Lab::new(&profiles(&wide), &Resolution::new()).unwrap();
    lab.control().unwrap();
    lab.apply().unwrap();
    let narrow = plan(&lab, &[narrow_entry.as_str()]);
    let ns = &lab.sandbox("rev").ns;

    // Through a new apply.
    let (mut a, mut b) = (open(ns, kept), open(ns, dropped));
    assert!(alive(&mut a, b"a1") && alive(&mut b, b"b1"), "control");
    let report = lab.host.apply(&narrow).unwrap();
    assert!(
        report
            .revoked
            .deleted
            .iter()
            .any(|d| d.contains(&dropped.to_string())),
        "{:?}",
        report.revoked
    );
    assert!(
        !report
            .revoked
            .deleted
            .iter()
            .any(|d| d.contains(&kept.to_string())),
        "{:?}",
        report.revoked
    );
    assert!(
        !alive(&mut b, b"b2"),
        "the de-listed flow lives on after apply"
    );
    assert!(alive(&mut a, b"a2"), "the allowed flow died with the apply");

    // Through an element-only refresh.
    let wide_plan = plan(&lab, &wide);
    lab.host.apply(&wide_plan).unwrap();
    let (mut a, mut b) = (open(ns, kept), open(ns, dropped));
    assert!(alive(&mut a, b"a3") && alive(&mut b, b"b3"), "control");
    let (_, revoked) = lab.host.refresh(&wide_plan, &narrow).unwrap();
    assert!(!revoked.deleted.is_empty(), "{revoked:?}");
    assert!(
        !alive(&mut b, b"b4"),
        "the de-listed flow lives on after refresh"
    );
    assert!(
        alive(&mut a, b"a4"),
        "the allowed flow died with the refresh"
    );
}
