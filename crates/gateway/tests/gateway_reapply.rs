//! A re-apply touches only the gateways whose configuration changed: with
//! real dnsmasq daemons in a lab, starting the fleet again with the same
//! profiles keeps every daemon (same pid, still answering), changing one
//! profile restarts exactly that profile's daemon, and a bridge named as
//! new restarts its daemon whatever its configuration.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use corral_drill::lab::gateways::UPSTREAM;
use corral_drill::lab::{Lab, LabGateways};
use corral_egress::resolve::Resolution;
use corral_gateway::probe::query;
use corral_gateway::wire::TYPE_A;
use corral_gateway::{Change, DnsTiming, Started, start_all};
use corral_sandbox_core::ProfileSet;
use corral_sandbox_core::config::Config;

const T: Duration = Duration::from_millis(1500);
/// AS112 space (RFC 7534): public-looking, so `stop-dns-rebind` keeps it.
const ANSWER: Ipv4Addr = Ipv4Addr::new(192, 175, 48, 9);

fn profiles(change_allow: &str) -> ProfileSet {
    let toml = format!(
        r#"
[[profile]]
name = "keep"
bridge = "corral-keep"
subnet = "10.231.21.0/24"
mode = "allowlist"
allow_unresolved = true
allow = ["*.corral-keep.test:443/tcp"]

[[profile]]
name = "change"
bridge = "corral-chg"
subnet = "10.231.22.0/24"
mode = "allowlist"
allow_unresolved = true
allow = [{change_allow}]
"#
    );
    Config::from_toml_str(&toml, "gateway_reapply")
        .unwrap()
        .profiles
}

fn by_bridge(started: &[Started]) -> BTreeMap<String, (u32, Change)> {
    started
        .iter()
        .map(|s| {
            let pid = s.pid.expect("every profile here is served by dnsmasq");
            (s.bridge.to_string(), (pid, s.change))
        })
        .collect()
}

/// Whether the `profile` sandbox's gateway answers `name` with [`ANSWER`].
fn answers(lab: &Lab, profile: &str, name: &str) -> bool {
    let sb = lab.sandbox(profile);
    let server = SocketAddr::new(sb.gateway_v4.into(), 53);
    sb.ns
        .run(|| query(server, name, TYPE_A, T))
        .ok()
        .and_then(Result::ok)
        .is_some_and(|r| r.answers.iter().any(|a| a.addr == IpAddr::V4(ANSWER)))
}

#[test]
fn a_reapply_restarts_only_the_changed_gateway() {
    if !corral_test_support::gate::netns()
        || !corral_test_support::gate::tool("dnsmasq", "dnsmasq-base")
    {
        return;
    }
    let first = profiles(r#""*.corral-change.test:443/tcp""#);
    let lab = Lab::new(&first, &Resolution::new()).unwrap();
    lab.apply().unwrap();
    lab.topo.attach_sandboxes(true).unwrap();
    let gateways = LabGateways::start(&lab).unwrap();
    for name in [
        "www.corral-keep.test",
        "www.corral-change.test",
        "api.corral-other.test",
    ] {
        gateways.upstream.set(name, &[IpAddr::V4(ANSWER)], 60);
    }
    let up = [SocketAddr::new(UPSTREAM.into(), 53)];
    let again = |set: &ProfileSet, fresh: &[corral_sandbox_core::BridgeName]| {
        by_bridge(
            &start_all(
                gateways.state_dir(),
                set,
                &up,
                DnsTiming::default(),
                &[],
                Some(&lab.topo.host),
                fresh,
            )
            .unwrap(),
        )
    };
    // Control: both gateways answer, and a name the change profile does
    // not list yet is refused (the test can tell the configurations apart).
    assert!(
        answers(&lab, "keep", "www.corral-keep.test"),
        "control: keep"
    );
    assert!(
        answers(&lab, "change", "www.corral-change.test"),
        "control: change"
    );
    assert!(
        !answers(&lab, "change", "api.corral-other.test"),
        "control: unlisted"
    );

    // The same profiles: nothing restarts.
    let same = again(&first, &[]);
    let same_again = again(&first, &[]);
    assert!(same.values().all(|(_, c)| *c == Change::Kept), "{same:?}");
    assert_eq!(same, same_again);

    // One profile changed: its daemon alone is replaced.
    let second = profiles(r#""*.corral-change.test:443/tcp", "*.corral-other.test:443/tcp""#);
    let after = again(&second, &[]);
    assert_eq!(after["corral-keep"], same["corral-keep"], "{after:?}");
    assert_eq!(after["corral-chg"].1, Change::Restarted, "{after:?}");
    assert_ne!(after["corral-chg"].0, same["corral-chg"].0);
    assert!(
        answers(&lab, "keep", "www.corral-keep.test"),
        "the kept gateway stopped answering"
    );
    assert!(
        answers(&lab, "change", "api.corral-other.test"),
        "the new entry is not served"
    );

    // A bridge created anew restarts its gateway, changed or not.
    let keep = lab
        .plan
        .bridges
        .iter()
        .find(|b| b.profile.as_str() == "keep")
        .unwrap();
    let forced = again(&second, std::slice::from_ref(&keep.name));
    assert_eq!(forced["corral-keep"].1, Change::Restarted, "{forced:?}");
    assert_ne!(forced["corral-keep"].0, same["corral-keep"].0);
    assert_eq!(forced["corral-chg"], (after["corral-chg"].0, Change::Kept));
    assert!(
        answers(&lab, "keep", "www.corral-keep.test"),
        "the restarted gateway is silent"
    );
}
