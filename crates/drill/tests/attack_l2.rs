//! Layer-2 attacks with real frames (issue 11, classes 1–4): each attack
//! first lands on a lab without corral's rules (the control), then is
//! held once corral is applied, with br_netfilter on and "absent".

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use corral_drill::attack::Outcome;
use corral_drill::attack::l2::{self, ArpStyle, Attacker};
use corral_drill::lab::Lab;
use corral_drill::lab::topology::{HOST_UPLINK_V4, SandboxNs};
use corral_egress::host::HostDrift;
use corral_egress::link::{BridgeNetfilter, CORRAL_BRIDGE_NETFILTER, Links};
use corral_egress::plan::{SysctlPlan, TableFamily};
use corral_egress::resolve::Resolution;
use corral_egress::sysctl::Sysctls;
use corral_sandbox_core::config::Config;

const T: std::time::Duration = std::time::Duration::from_millis(1500);

fn lab() -> Lab {
    Lab::new(&Config::builtin_default().profiles, &Resolution::new()).unwrap()
}

fn pair(lab: &Lab) -> (&SandboxNs, &SandboxNs) {
    let mut it = lab.topo.sandboxes_of("internet");
    (it.next().unwrap(), it.next().unwrap())
}

/// br_netfilter on (as corral sets it) or as if the module were absent:
/// the host-wide switches and each bridge's own switches off, so the
/// kernel hands no bridged frame to the IP, IPv6 or ARP hooks. (The
/// module is built into this kernel and cannot be unloaded; with every
/// switch off its hooks return at once, which is what its absence does.)
fn br_netfilter(lab: &Lab, on: bool) {
    lab.topo
        .host
        .run_async(|| async {
            for key in [
                "net.bridge.bridge-nf-call-iptables",
                "net.bridge.bridge-nf-call-ip6tables",
                "net.bridge.bridge-nf-call-arptables",
            ] {
                Sysctls::default()
                    .apply_one(&SysctlPlan {
                        key: key.into(),
                        value: if on { "1" } else { "0" }.into(),
                        reason: "test".into(),
                    })
                    .unwrap();
            }
            let links = Links::connect().unwrap();
            let nf = if on {
                CORRAL_BRIDGE_NETFILTER
            } else {
                BridgeNetfilter {
                    iptables: false,
                    ip6tables: false,
                    arptables: false,
                }
            };
            for b in &lab.plan.bridges {
                if links.get(b.name.as_str()).await.unwrap().is_some() {
                    links
                        .set_bridge_netfilter(b.name.as_str(), nf)
                        .await
                        .unwrap();
                }
            }
        })
        .unwrap();
}

/// Turns bridge-port isolation off on every sandbox port behind corral's
/// back (a provider that never set it), so the rules alone are tested.
fn unisolate(lab: &Lab) {
    lab.topo
        .host
        .run_async(|| async {
            let links = Links::connect().unwrap();
            for sb in &lab.topo.sandboxes {
                links.set_port_isolated(&sb.port, false).await.unwrap();
            }
        })
        .unwrap();
}

/// After apply every port is isolated and verify is clean; with isolation
/// removed behind corral's back, verify names every port.
fn isolation_is_verified(lab: &Lab) {
    let ports = |d: &Vec<HostDrift>| -> Vec<HostDrift> {
        d.iter()
            .filter(|d| matches!(d, HostDrift::Port { .. }))
            .cloned()
            .collect()
    };
    let drift = lab.host.verify(&lab.plan).unwrap();
    assert!(ports(&drift).is_empty(), "{drift:#?}");
    unisolate(lab);
    let drift = lab.host.verify(&lab.plan).unwrap();
    for sb in &lab.topo.sandboxes {
        assert!(
            drift
                .iter()
                .any(|d| matches!(d, HostDrift::Port { port, problem, .. }
                if *port == sb.port && problem.contains("not isolated"))),
            "{} not reported: {drift:#?}",
            sb.port
        );
    }
}

fn landed(o: Outcome, what: &str) {
    assert!(o.landed, "control: {what} did not land: {}", o.detail);
}

fn held(o: Outcome, what: &str) {
    assert!(!o.landed, "{what} landed through corral: {}", o.detail);
}

/// Every attack of `run`: in the control each must land; enforced, none
/// may (all are tried before the test fails, so a failure lists them all).
fn judge(enforced: bool, run: impl Fn() -> Vec<(&'static str, Outcome)>) {
    let results = run();
    if !enforced {
        for (what, o) in results {
            landed(o, what);
        }
        return;
    }
    let through: Vec<String> = results
        .iter()
        .filter(|(_, o)| o.landed)
        .map(|(what, o)| format!("{what}: {}", o.detail))
        .collect();
    for (what, o) in &results {
        eprintln!("{what}: {}", o.detail);
    }
    assert!(
        through.is_empty(),
        "landed through corral:\n{}",
        through.join("\n")
    );
}

#[test]
fn class1_bridge_chain_runs_whatever_the_registration_order() {
    if !corral_test_support::gate::netns() {
        return;
    }
    // Control: bridges and ports, no rules.
    let control = lab();
    control.control().unwrap();
    let (a, b) = pair(&control);
    let gw = a.gateway_v4;
    landed(
        l2::arp_poison(&Attacker::new(a).unwrap(), &b.ns, gw, ArpStyle::Gratuitous).unwrap(),
        "gratuitous ARP for the gateway",
    );
    // A fresh namespace where corral's table exists before the first
    // bridge, as `host apply` orders it (and every boot does).
    let lab = lab();
    lab.apply().unwrap();
    lab.topo.attach_sandboxes(false).unwrap();
    let (a, b) = pair(&lab);
    held(
        l2::arp_poison(&Attacker::new(a).unwrap(), &b.ns, gw, ArpStyle::Gratuitous).unwrap(),
        "gratuitous ARP for the gateway",
    );
    let live = lab
        .topo
        .host
        .run(corral_egress::nft::read_live)
        .unwrap()
        .unwrap();
    let bridge = live
        .table(corral_egress::plan::TableFamily::Bridge)
        .unwrap();
    let packets: u64 = bridge
        .chains
        .iter()
        .flat_map(|c| &c.rules)
        .map(|r| r.packets)
        .sum();
    assert!(packets > 0, "the bridge chain never ran: {bridge:#?}");
    // The ports were hot-plugged after apply without isolation: verify
    // names them until a sweep isolates them.
    let drift = lab.host.verify(&lab.plan).unwrap();
    assert!(
        drift.iter().any(
            |d| matches!(d, HostDrift::Port { problem, .. } if problem.contains("not isolated"))
        ),
        "{drift:#?}"
    );
    let swept = lab.host.sweep_ports(&lab.plan).unwrap();
    assert!(swept.iter().all(|p| p.bound), "{swept:#?}");
    assert!(swept.iter().any(|p| p.isolated_now), "{swept:#?}");
    // verify proves the chains sit where they run first: the same table at
    // br_netfilter's priority (as before this fix) is reported.
    let drift = lab.host.verify(&lab.plan).unwrap();
    assert!(drift.is_empty(), "{drift:#?}");
    let mut old_style = lab.plan.clone();
    for c in &mut old_style.bridge.chains {
        if let Some(b) = &mut c.base {
            b.priority = 0;
        }
    }
    lab.topo
        .host
        .run(|| corral_egress::nft::apply(&old_style))
        .unwrap()
        .unwrap();
    let drift = lab.host.verify(&lab.plan).unwrap();
    assert!(
        drift.iter().any(|d| matches!(d, HostDrift::Nft(n)
            if n.family == TableFamily::Bridge && n.detail.contains("skipped"))),
        "{drift:#?}"
    );
}

fn class2(netfilter: bool) {
    let lab = lab();
    lab.control().unwrap();
    br_netfilter(&lab, netfilter);
    let (a, b) = pair(&lab);
    let att = Attacker::new(a).unwrap();
    let gw = a.gateway_v4;
    let attacks = || {
        vec![
            (
                "ARP request with the gateway as sender",
                l2::arp_poison(&att, &b.ns, gw, ArpStyle::ForgedSender).unwrap(),
            ),
            (
                "802.1Q-in-802.1Q VID 0",
                l2::tagged_udp(&att, b, &[0, 0]).unwrap(),
            ),
            ("802.1Q VID 0", l2::tagged_udp(&att, b, &[0]).unwrap()),
            (
                "untagged UDP to the sibling",
                l2::tagged_udp(&att, b, &[]).unwrap(),
            ),
        ]
    };
    judge(false, attacks);
    lab.apply().unwrap();
    br_netfilter(&lab, netfilter);
    // corral isolated every port and bound it: both layers.
    judge(true, attacks);
    // The rules alone.
    isolation_is_verified(&lab);
    judge(true, attacks);
}

#[test]
fn class2_no_frame_reaches_a_sibling_with_br_netfilter() {
    if !corral_test_support::gate::netns() {
        return;
    }
    class2(true);
}

#[test]
fn class2_no_frame_reaches_a_sibling_without_br_netfilter() {
    if !corral_test_support::gate::netns() {
        return;
    }
    class2(false);
}

fn class3(netfilter: bool) {
    let lab = lab();
    lab.control().unwrap();
    br_netfilter(&lab, netfilter);
    let (a, b) = pair(&lab);
    let att = Attacker::new(a).unwrap();
    let gw6 = a.gateway_v6.unwrap();
    let attacks = || {
        vec![
            ("IPv6 link-local UDP", l2::link_local_udp(&att, b).unwrap()),
            ("rogue RA", l2::rogue_router_advert(&att, b).unwrap()),
            ("rogue DHCP offer", l2::rogue_dhcp_offer(&att, b).unwrap()),
            ("broadcast frame", l2::broadcast_frame(&att, b).unwrap()),
            (
                "NA poisoning of the sibling's gateway entry",
                l2::na_poison(&att, &b.ns, gw6).unwrap(),
            ),
        ]
    };
    judge(false, attacks);
    lab.apply().unwrap();
    br_netfilter(&lab, netfilter);
    judge(true, attacks);
    isolation_is_verified(&lab);
    judge(true, attacks);
}

#[test]
fn class3_siblings_are_apart_with_br_netfilter() {
    if !corral_test_support::gate::netns() {
        return;
    }
    class3(true);
}

#[test]
fn class3_siblings_are_apart_without_br_netfilter() {
    if !corral_test_support::gate::netns() {
        return;
    }
    class3(false);
}

fn class4(netfilter: bool) {
    let lab = lab();
    // Ports isolated, as Incus attaches them: the host is the target.
    lab.topo.ensure_bridges(&lab.plan.bridges).unwrap();
    lab.topo.attach_sandboxes(true).unwrap();
    br_netfilter(&lab, netfilter);
    let (a, b) = pair(&lab);
    let att = Attacker::new(a).unwrap();
    let host = &lab.topo.host;
    let other_gw = lab.sandbox("allowlist").gateway_v4;
    let attacks = || {
        vec![
            (
                "ARP reply claiming the sibling's address",
                l2::arp_poison(&att, host, b.v4, ArpStyle::GratuitousReply).unwrap(),
            ),
            (
                "NA claiming the sibling's address",
                l2::na_poison(&att, host, b.v6.unwrap()).unwrap(),
            ),
            (
                "ARP for the host's uplink address",
                l2::host_answers_arp_for(&att, HOST_UPLINK_V4).unwrap(),
            ),
            (
                "ARP for another bridge's gateway",
                l2::host_answers_arp_for(&att, other_gw).unwrap(),
            ),
            ("FDB theft", l2::steal_fdb(&att, b, host).unwrap()),
        ]
    };
    judge(false, attacks);
    lab.apply().unwrap();
    br_netfilter(&lab, netfilter);
    judge(true, attacks);
}

#[test]
fn class4_host_neighbour_tables_hold_with_br_netfilter() {
    if !corral_test_support::gate::netns() {
        return;
    }
    class4(true);
}

#[test]
fn class4_host_neighbour_tables_hold_without_br_netfilter() {
    if !corral_test_support::gate::netns() {
        return;
    }
    class4(false);
}

/// A port nobody bound (a NIC a provider attached without corral) is
/// quarantined: it may ask for a lease and nothing else, never with a
/// bound sandbox's MAC, and verify names it until it is swept.
#[test]
fn an_unbound_port_gets_nothing_but_dhcp() {
    if !corral_test_support::gate::netns() {
        return;
    }
    use corral_drill::lab::{Observed, tcp};
    use corral_drill::raw::dhcp::ClientMessage;
    use corral_drill::raw::frame::{self, BROADCAST, Link, Transport};
    use corral_drill::raw::{Capture, Marker};

    let mut lab = lab();
    let (a, b) = pair(&lab);
    let (a_port, b_mac) = (a.port.clone(), b.mac.octets());
    let target = corral_drill::lab::topology::PUBLIC_V4[0];
    lab.control().unwrap();
    assert_eq!(
        lab.probe(a, &tcp(target, 443), T).observed,
        Observed::Connected
    );
    // Everyone but `a` bound.
    let rest: Vec<_> = lab
        .plan
        .bindings
        .iter()
        .filter(|x| x.port.as_str() != a_port)
        .cloned()
        .collect();
    lab.plan = lab.plan.with_bindings(&lab.profiles, rest).unwrap();
    let report = lab.apply().unwrap();
    assert!(
        report.ports.iter().any(|p| p.port == a_port && !p.bound),
        "{:#?}",
        report.ports
    );
    let (a, _) = pair(&lab);
    assert!(lab.probe(a, &tcp(target, 443), T).observed.blocked());
    let att = Attacker::new(a).unwrap();
    let seen_by_host = |build: &dyn Fn(&Marker) -> Vec<u8>| {
        let cap = Capture::open(&lab.topo.host, &a.bridge).unwrap();
        let m = Marker::fresh();
        att.send(&build(&m)).unwrap();
        cap.saw(&m, std::time::Duration::from_millis(500)).unwrap()
    };
    let dhcp = |m: &Marker, src: [u8; 6]| {
        let mut p = ClientMessage::discover(7, src).payload();
        p[44..60].copy_from_slice(m.bytes());
        frame::ip(
            &Link::new(src, BROADCAST),
            std::net::Ipv4Addr::UNSPECIFIED.into(),
            std::net::Ipv4Addr::BROADCAST.into(),
            64,
            Transport::Udp {
                sport: 68,
                dport: 67,
            },
            &p,
        )
        .unwrap()
    };
    let me = att.mac();
    assert!(seen_by_host(&|m| dhcp(m, me)), "a DHCP request was dropped");
    assert!(
        !seen_by_host(&|m| dhcp(m, b_mac)),
        "a DHCP request with a bound MAC got through"
    );
    assert!(
        !seen_by_host(&|m| frame::ip(
            &Link::new(me, BROADCAST),
            a.v4.into(),
            std::net::Ipv4Addr::BROADCAST.into(),
            64,
            Transport::Udp { sport: 9, dport: 9 },
            m.bytes(),
        )
        .unwrap()),
        "other traffic from a quarantined port got through"
    );
    // Its binding, added live, lets it out again.
    let binding = lab
        .topo
        .bindings()
        .unwrap()
        .into_iter()
        .find(|x| x.port.as_str() == a_port)
        .unwrap();
    let bound = lab
        .host
        .bind_port(&lab.plan, &lab.profiles, binding)
        .unwrap();
    assert!(lab.host.verify(&bound).unwrap().is_empty());
    assert_eq!(
        lab.probe(a, &tcp(target, 443), T).observed,
        Observed::Connected
    );
    // Unbinding quarantines it again.
    let unbound = lab
        .host
        .unbind_port(&bound, &lab.profiles, &a_port)
        .unwrap();
    assert!(lab.probe(a, &tcp(target, 443), T).observed.blocked());
    assert!(lab.host.verify(&unbound).unwrap().is_empty());
}
