//! Fail closed by construction, with real packets in the drill's lab
//! namespaces: a profile removed from the plan, a stamped bridge the plan
//! does not name, a retired subnet. Each guarantee has its control: the
//! same probe gets through under the plan as it was before (or without the
//! rules corral adds for it).

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use corral_drill::lab::topology::{
    HOST_LAN_V4, HOST_SERVICE_PORT, HOST_UPLINK_V4, LAN_HOST_V4, PUBLIC_V4, SANDBOX_PORT,
    probe_from,
};
use corral_drill::lab::{Lab, Observed, tcp};
use corral_drill::removed::{plan_without, without_fail_closed};
use corral_egress::host::{HostDrift, HostError};
use corral_egress::link::{Links, STAMP, STAMP_GROUP};
use corral_egress::netns::Netns;
use corral_egress::nft;
use corral_egress::resolve::Resolution;
use corral_sandbox_core::ProfileSet;
use corral_sandbox_core::config::Config;
use ipnet::IpNet;
use netlink_packet_route::link::LinkAttribute;

const T: Duration = Duration::from_millis(1500);
const REMOVED: &str = "internet";

fn builtin() -> ProfileSet {
    Config::builtin_default().profiles
}

#[test]
fn a_removed_profile_is_refused_with_ports_and_cut_with_force() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = Lab::new(&builtin(), &Resolution::new()).unwrap();
    lab.apply().unwrap();
    lab.topo.attach_sandboxes(true).unwrap();
    let sb = lab.sandbox(REMOVED);
    let sibling = lab.sandbox("allowlist");
    let world = tcp(PUBLIC_V4[0], 443);
    let host_service = tcp(sb.gateway_v4, HOST_SERVICE_PORT);
    let uplink_service = tcp(HOST_UPLINK_V4, HOST_SERVICE_PORT);
    let to_sibling = tcp(sibling.v4, SANDBOX_PORT);

    // Control: under its profile the sandbox reaches what it is allowed
    // (the world) and not the host's service.
    assert_eq!(lab.probe(sb, &world, T).observed, Observed::Connected);
    assert!(lab.probe(sb, &host_service, T).observed.blocked());

    // A plain apply of the plan without the profile refuses, naming the
    // bridge and its ports, and changes nothing.
    let gone = plan_without(&lab, REMOVED, &Resolution::new()).unwrap();
    let err = lab
        .host
        .apply_removing(&gone, Some(&lab.plan), false)
        .unwrap_err();
    let HostError::PortsAttached(bridges) = &err else {
        panic!("{err}");
    };
    let ports: Vec<&str> = lab
        .topo
        .sandboxes_of(REMOVED)
        .map(|s| s.port.as_str())
        .collect();
    assert_eq!(bridges.len(), 1, "{bridges:?}");
    assert_eq!(bridges[0].name, sb.bridge);
    assert_eq!(bridges[0].ports, ports);
    let text = err.to_string();
    assert!(
        text.contains(&sb.bridge) && text.contains(ports[0]) && text.contains("--force"),
        "{text}"
    );
    assert_eq!(lab.host.verify(&lab.plan).unwrap(), Vec::<HostDrift>::new());
    assert_eq!(lab.probe(sb, &world, T).observed, Observed::Connected);

    // The control for what follows: corral's old path (the new ruleset
    // without the fail-closed rules, the bridge left up with its gateway
    // address) lets the sandbox reach the host's TCP service.
    lab.topo
        .host
        .run(|| nft::apply(&without_fail_closed(&gone)))
        .unwrap()
        .unwrap();
    let r = lab.probe(sb, &host_service, T);
    assert_eq!(r.observed, Observed::Connected, "old path: {r:?}");
    // The fail-closed rules alone (bridge still up, nothing else changed)
    // already stop it: they do not depend on the removed profile's chains.
    lab.topo.host.run(|| nft::apply(&gone)).unwrap().unwrap();
    let r = lab.probe(sb, &host_service, T);
    assert!(r.observed.blocked(), "fail-closed rules: {r:?}");
    let drift = lab.host.verify(&gone).unwrap();
    assert!(
        drift.iter().any(
            |d| matches!(d, HostDrift::UnplannedBridge { name, ports: p }
            if *name == sb.bridge && p.iter().map(String::as_str).eq(ports.iter().copied()))
        ),
        "{drift:#?}"
    );

    // With force: ports cut, bridge deleted, the rest of the host enforced.
    let report = lab
        .host
        .apply_removing(&gone, Some(&lab.plan), true)
        .unwrap();
    assert_eq!(report.removed.len(), 1, "{:?}", report.removed);
    assert_eq!(report.removed[0].name, sb.bridge);
    assert!(report.removed[0].deleted);
    assert_eq!(report.removed[0].cut, ports);
    assert_eq!(report.cut_ports, ports);
    let recorded = gone.with_fail_closed(gone.retired.clone(), report.cut_ports.clone());
    assert_eq!(lab.host.verify(&recorded).unwrap(), Vec::<HostDrift>::new());
    for p in [&world, &host_service, &uplink_service, &to_sibling] {
        let r = lab.probe(sb, p, T);
        assert!(!r.observed.reached(), "after --force, {p:?}: {r:?}");
    }
    // A cut port brought up again still forwards nothing.
    let port = sb.port.clone();
    lab.topo
        .host
        .run_async(|| async { Links::connect().unwrap().set_up(&port).await.unwrap() })
        .unwrap();
    for p in [&world, &uplink_service, &to_sibling] {
        let r = lab.probe(sb, p, T);
        assert!(!r.observed.reached(), "port up again, {p:?}: {r:?}");
    }
    // The profile that stays is untouched.
    assert_eq!(
        lab.probe(sibling, &tcp(PUBLIC_V4[2], 443), T).observed,
        Observed::Connected
    );
}

/// Sets `name`'s alias and group.
fn stamp(ns: &Netns, name: &str, alias: &str, group: u32) {
    let name = name.to_owned();
    let alias = alias.to_owned();
    ns.run_async(|| async move {
        let links = Links::connect().unwrap();
        let l = links.require(&name).await.unwrap();
        let msg = rtnetlink::LinkUnspec::new_with_index(l.index)
            .alias(alias)
            .append_extra_attribute(LinkAttribute::Group(group))
            .build();
        links.handle().link().set(msg).execute().await.unwrap();
    })
    .unwrap();
}

#[test]
fn a_stamped_bridge_the_plan_does_not_name_is_dropped_and_reported() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = Lab::new(&builtin(), &Resolution::new()).unwrap();
    lab.apply().unwrap();
    // Out of band: a bridge with corral's stamp and a "sandbox" on it.
    let sandbox = Netns::new().unwrap();
    let gw = Ipv4Addr::new(10, 250, 0, 1);
    let me = Ipv4Addr::new(10, 250, 0, 10);
    let fd = sandbox.try_clone().unwrap();
    lab.topo
        .host
        .run_async(|| async {
            let links = Links::connect().unwrap();
            let msg = rtnetlink::LinkBridge::new("cb-oob").build();
            links.handle().link().add(msg).execute().await.unwrap();
            links
                .add_address("cb-oob", IpNet::V4("10.250.0.1/24".parse().unwrap()))
                .await
                .unwrap();
            links.set_up("cb-oob").await.unwrap();
            links
                .create_veth("oob0", "eth0", Some(fd.fd()))
                .await
                .unwrap();
            links.set_up("oob0").await.unwrap();
            links.attach_port("oob0", "cb-oob", false).await.unwrap();
        })
        .unwrap();
    sandbox
        .run_async(|| async {
            let links = Links::connect().unwrap();
            links
                .add_address("eth0", IpNet::V4(ipnet::Ipv4Net::new(me, 24).unwrap()))
                .await
                .unwrap();
            links.set_up("eth0").await.unwrap();
            links.set_up("lo").await.unwrap();
            links.add_default_route(IpAddr::V4(gw)).await.unwrap();
        })
        .unwrap();
    stamp(&lab.topo.host, "cb-oob", STAMP, STAMP_GROUP);
    let service = tcp(gw, HOST_SERVICE_PORT);

    let r = probe_from(&sandbox, &service, T);
    assert!(r.observed.blocked(), "stamped: {r:?}");
    let drift = lab.host.verify(&lab.plan).unwrap();
    assert!(
        drift
            .iter()
            .any(|d| matches!(d, HostDrift::UnplannedBridge { name, ports }
            if name == "cb-oob" && ports == &["oob0".to_owned()])),
        "{drift:#?}"
    );
    // A plain apply refuses to remove it while the port is attached.
    let err = lab.apply().unwrap_err();
    assert!(err.to_string().contains("cb-oob"), "{err}");

    // Control: without the stamp (alias and group) the same probe passes,
    // and verify no longer reports the bridge (only its subnet, a new
    // network of the host's).
    stamp(&lab.topo.host, "cb-oob", "operator's", 0);
    let r = probe_from(&sandbox, &service, T);
    assert_eq!(r.observed, Observed::Connected, "unstamped: {r:?}");
    let drift = lab.host.verify(&lab.plan).unwrap();
    assert!(
        !drift
            .iter()
            .any(|d| matches!(d, HostDrift::UnplannedBridge { .. })),
        "{drift:#?}"
    );
}

#[test]
fn a_retired_source_is_dropped_whatever_interface_it_arrives_on() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = Lab::new(&builtin(), &Resolution::new()).unwrap();
    lab.apply().unwrap();
    // The LAN machine's own address stands in for a sandbox address left
    // behind by a removed profile, arriving on the LAN interface.
    let service = tcp(HOST_LAN_V4, HOST_SERVICE_PORT);
    let r = probe_from(&lab.topo.lan, &service, T);
    assert_eq!(r.observed, Observed::Connected, "control: {r:?}");

    let retired: IpNet = IpNet::V4(ipnet::Ipv4Net::new(LAN_HOST_V4, 32).unwrap());
    let plan = lab.plan.with_fail_closed(vec![retired], Vec::new());
    lab.host.apply(&plan).unwrap();
    assert_eq!(lab.host.verify(&plan).unwrap(), Vec::<HostDrift>::new());
    let r = probe_from(&lab.topo.lan, &service, T);
    assert!(r.observed.blocked(), "retired: {r:?}");
    // The record of it is read back: a plan without it is drift.
    assert!(!lab.host.verify(&lab.plan).unwrap().is_empty());
}

#[test]
fn a_planned_bridge_out_of_corrals_group_is_drift_and_apply_restores_it() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = Lab::new(&builtin(), &Resolution::new()).unwrap();
    lab.apply().unwrap();
    assert_eq!(lab.host.verify(&lab.plan).unwrap(), Vec::<HostDrift>::new());
    let br = lab.plan.bridges[0].name.to_string();
    stamp(&lab.topo.host, &br, STAMP, 0);
    let drift = lab.host.verify(&lab.plan).unwrap();
    assert!(
        drift
            .iter()
            .any(|d| matches!(d, HostDrift::Bridge { name, problem }
            if *name == br && problem.contains("netdev group 0"))),
        "{drift:#?}"
    );
    lab.apply().unwrap();
    assert_eq!(lab.host.verify(&lab.plan).unwrap(), Vec::<HostDrift>::new());
}
