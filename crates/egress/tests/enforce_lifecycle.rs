//! Apply, verify, re-apply, drift and teardown against a real kernel, in
//! namespaces the tests create.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use corral_drill::lab::tcp;
use corral_drill::lab::topology::PUBLIC_V4;
use corral_drill::lab::{Lab, Observed};
use corral_egress::host::HostDrift;
use corral_egress::link::{BridgeOutcome, Links, STAMP};
use corral_egress::netns::Netns;
use corral_egress::nft;
use corral_egress::plan::{BridgePlan, HostPlan, PlanSettings};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::config::Config;
use corral_sandbox_core::{AllowEntry, ProfileSet};

mod nft_support;
use nft_support::nft_in;

const T: Duration = Duration::from_millis(1500);

fn builtin() -> ProfileSet {
    Config::builtin_default().profiles
}

#[test]
fn apply_then_verify_is_empty_and_apply_is_idempotent() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = Lab::new(&builtin(), &Resolution::new()).unwrap();
    assert!(
        !lab.host.verify(&lab.plan).unwrap().is_empty(),
        "nothing applied yet"
    );
    let first = lab.apply().unwrap();
    assert!(
        first
            .bridges
            .iter()
            .all(|b| b.outcome == BridgeOutcome::Created)
    );
    assert_eq!(lab.host.verify(&lab.plan).unwrap(), Vec::<HostDrift>::new());
    let second = lab.apply().unwrap();
    assert!(
        second
            .bridges
            .iter()
            .all(|b| b.outcome == BridgeOutcome::Managed)
    );
    assert_eq!(lab.host.verify(&lab.plan).unwrap(), Vec::<HostDrift>::new());
    let status = lab.host.status(&lab.plan).unwrap();
    assert_eq!(status.drift, 0);
    assert!(
        status
            .bridges
            .iter()
            .all(|b| b.present && b.up && b.managed)
    );
}

#[test]
fn a_rule_deleted_behind_corrals_back_is_reported() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = Lab::new(&builtin(), &Resolution::new()).unwrap();
    lab.apply().unwrap();
    let chain = "internet-out";
    let handle = lab
        .topo
        .host
        .run(|| nft::read_live().unwrap())
        .unwrap()
        .tables
        .iter()
        .flat_map(|t| &t.chains)
        .find(|c| c.name == chain)
        .and_then(|c| c.rules.last())
        .map(|r| r.handle)
        .unwrap();
    nft_in(
        &lab.topo.host,
        &[
            "delete",
            "rule",
            "inet",
            "corral",
            chain,
            "handle",
            &handle.to_string(),
        ],
    );
    let drift = lab.host.verify(&lab.plan).unwrap();
    assert!(
        drift
            .iter()
            .any(|d| matches!(d, HostDrift::Nft(n) if n.location.contains(chain))),
        "{drift:#?}"
    );
    // Setting a bridge down is drift too.
    lab.topo
        .host
        .run_async(|| async {
            let links = Links::connect().unwrap();
            let br = links.require("corral-net").await.unwrap();
            let msg = rtnetlink::LinkUnspec::new_with_index(br.index)
                .down()
                .build();
            links.handle().link().set(msg).execute().await.unwrap();
        })
        .unwrap();
    let drift = lab.host.verify(&lab.plan).unwrap();
    assert!(drift.iter().any(|d| matches!(d, HostDrift::Bridge { name, problem } if name == "corral-net" && problem == "down")));
    // Re-apply repairs everything.
    lab.apply().unwrap();
    assert!(lab.host.verify(&lab.plan).unwrap().is_empty());
}

#[test]
fn teardown_removes_only_corrals_state() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = Lab::new(&builtin(), &Resolution::new()).unwrap();
    // An operator's bridge with the name of a profile bridge, made before
    // apply: corral adopts it and must never delete it. A foreign table too.
    let adopted = &lab.plan.bridges[0];
    lab.topo
        .host
        .run_async(|| async {
            let links = Links::connect().unwrap();
            let msg = rtnetlink::LinkBridge::new(adopted.name.as_str()).build();
            links.handle().link().add(msg).execute().await.unwrap();
        })
        .unwrap();
    nft_in(&lab.topo.host, &["add", "table", "inet", "operator"]);
    nft_in(
        &lab.topo.host,
        &["add", "chain", "inet", "operator", "keep"],
    );

    let report = lab.apply().unwrap();
    assert_eq!(report.bridges[0].outcome, BridgeOutcome::Adopted);
    assert!(
        report.bridges[1..]
            .iter()
            .all(|b| b.outcome == BridgeOutcome::Created)
    );

    let down = lab.host.teardown().unwrap();
    assert!(down.is_clean(), "{down:?}");
    assert!(down.tables_deleted);
    let mut deleted = down.bridges_deleted.clone();
    deleted.sort();
    let mut want: Vec<String> = lab.plan.bridges[1..]
        .iter()
        .map(|b| b.name.to_string())
        .collect();
    want.sort();
    assert_eq!(deleted, want);

    let (live, adopted_still_there, stamped_left) = lab
        .topo
        .host
        .run_async(|| async {
            let links = Links::connect().unwrap();
            (
                nft::read_live().unwrap(),
                links.get(adopted.name.as_str()).await.unwrap(),
                links.stamped_bridges().await.unwrap(),
            )
        })
        .unwrap();
    assert!(live.is_empty(), "corral tables remain: {live:?}");
    let adopted_link = adopted_still_there.expect("the adopted bridge was deleted");
    assert_ne!(
        adopted_link.alias.as_deref(),
        Some(STAMP),
        "an adopted bridge must not be stamped"
    );
    assert!(stamped_left.is_empty(), "{stamped_left:?}");
    let listing = nft_in(&lab.topo.host, &["list", "table", "inet", "operator"]);
    assert!(listing.contains("chain keep"), "{listing}");
    // A second teardown finds nothing and still succeeds.
    let again = lab.host.teardown().unwrap();
    assert!(
        again.is_clean() && again.bridges_deleted.is_empty(),
        "{again:?}"
    );
}

#[test]
fn an_established_allowed_flow_survives_a_new_plan() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = Lab::new(&builtin(), &Resolution::new()).unwrap();
    lab.apply().unwrap();
    lab.topo.attach_sandboxes(true).unwrap();
    let sb = lab.sandbox("allowlist");
    let to = SocketAddr::new(PUBLIC_V4[2].into(), 443);
    let mut stream: TcpStream = sb
        .ns
        .run(|| TcpStream::connect_timeout(&to, T))
        .unwrap()
        .unwrap();
    stream.set_read_timeout(Some(T)).unwrap();
    let echo = |s: &mut TcpStream, msg: &[u8]| {
        s.write_all(msg).unwrap();
        let mut buf = vec![0; msg.len()];
        s.read_exact(&mut buf).unwrap();
        assert_eq!(buf, msg);
    };
    echo(&mut stream, b"before");

    // A new plan: the allowlist profile gains an entry. The tables are
    // replaced in one transaction; conntrack keeps the flow established.
    let mut profiles: Vec<_> = builtin().iter().cloned().collect();
    for p in &mut profiles {
        if p.name.as_str() == "allowlist" {
            p.allow
                .push("198.51.100.20:8443/tcp".parse::<AllowEntry>().unwrap());
        }
    }
    let set = ProfileSet::new(profiles).unwrap();
    // The sandboxes stay bound (an unbound port gets nothing but DHCP).
    let new_plan = HostPlan::build(&set, &PlanSettings::default(), &Resolution::new())
        .unwrap()
        .with_bindings(&set, lab.plan.bindings.clone())
        .unwrap();
    assert_ne!(new_plan, lab.plan);
    lab.host.apply(&new_plan).unwrap();
    echo(&mut stream, b"after the new plan");
    assert!(lab.host.verify(&new_plan).unwrap().is_empty());
    // And the new entry works.
    let r = lab.probe(sb, &tcp(PUBLIC_V4[1], 8443), T);
    assert_eq!(r.observed, Observed::Connected, "{r:?}");
}

#[test]
fn bridges_come_up_only_with_their_gateway_addresses() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let ns = Netns::new().unwrap();
    let plan: BridgePlan =
        HostPlan::build(&builtin(), &PlanSettings::default(), &Resolution::new())
            .unwrap()
            .bridges
            .remove(1);
    let (outcome, state, addrs) = ns
        .run_async(|| async {
            let links = Links::connect().unwrap();
            let o = links.ensure_bridge(&plan).await.unwrap();
            (
                o,
                links.require(plan.name.as_str()).await.unwrap(),
                links.addresses(plan.name.as_str()).await.unwrap(),
            )
        })
        .unwrap();
    assert_eq!(outcome, BridgeOutcome::Created);
    assert!(state.up && state.is_stamped_bridge(), "{state:?}");
    assert!(
        addrs.contains(&ipnet::IpNet::V4(plan.gateway_v4)),
        "{addrs:?}"
    );
    assert!(
        addrs.contains(&ipnet::IpNet::V6(plan.gateway_v6.unwrap())),
        "{addrs:?}"
    );
}
