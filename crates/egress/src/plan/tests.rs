//! Plan tests: examples as data, and the invariants as properties.

use std::net::{IpAddr, Ipv4Addr};

use corral_sandbox_core::{AllowEntry, AllowTarget, BlockAction, EgressMode, ProfileSet};
use proptest::prelude::*;

use super::test_support::{allowlist_plan, profile, sample, sample_plan};
use super::*;

fn chain<'a>(plan: &'a HostPlan, family: TableFamily, name: &str) -> &'a ChainPlan {
    plan.table(family)
        .chains
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("chain {name} missing"))
}

/// The chain's policy: its rules without the drop log (each logged block
/// once, without its suppressing twin or its `log`; `droplog`'s own tests
/// check those).
fn texts(c: &ChainPlan) -> Vec<String> {
    c.rules
        .iter()
        .filter(|r| !droplog::is_suppressor(r))
        .map(|r| {
            render::rule_text(&RulePlan {
                log: None,
                ..r.clone()
            })
        })
        .collect()
}

#[test]
fn allowlist_profile_rules_read_as_intended() {
    let plan = sample_plan();
    let out = texts(chain(&plan, TableFamily::Inet, "dev-out"));
    assert_eq!(
        out,
        vec![
            "ct state established,related ct direction original ct original ip saddr 10.90.0.0/24 counter accept",
            "ct state established,related ct direction original ct original ip6 saddr fd00:90::/64 counter accept",
            "ct state related counter drop",
            "ct state new add @dev-flows4 { ip saddr ct count over 2048 } counter jump dev-flowcap",
            "ct state new update @dev-newflows4 { ip saddr limit rate over 200/second burst 400 packets } counter jump dev-flowrate",
            "ct state new add @dev-flows6 { ip6 saddr ct count over 2048 } counter jump dev-flowcap",
            "ct state new update @dev-newflows6 { ip6 saddr limit rate over 200/second burst 400 packets } counter jump dev-flowrate",
            "meta l4proto udp th dport 53 counter reject with icmpx type admin-prohibited",
            "meta l4proto tcp th dport 53 counter reject with tcp reset",
            "ip daddr @dev-allow4 counter accept",
            "ip6 daddr @dev-allow6 counter accept",
            "ip daddr @dev-allow4-8000-8100 meta l4proto tcp th dport 8000-8100 counter accept",
            "ip daddr @dev-allow4-8000-8100 meta l4proto udp th dport 8000-8100 counter accept",
            "ip6 daddr @dev-allow6-8000-8100 meta l4proto tcp th dport 8000-8100 counter accept",
            "ip6 daddr @dev-allow6-8000-8100 meta l4proto udp th dport 8000-8100 counter accept",
            "ip daddr @dev-allow4-tcp-443 meta l4proto tcp th dport 443 counter accept",
            "ip6 daddr @dev-allow6-tcp-443 meta l4proto tcp th dport 443 counter accept",
            "ip daddr @dev-allow4-udp-443 meta l4proto udp th dport 443 counter accept",
            "ip6 daddr @dev-allow6-udp-443 meta l4proto udp th dport 443 counter accept",
            "ip daddr @reserved4 meta l4proto tcp counter reject with tcp reset",
            "ip daddr @reserved4 counter reject with icmpx type admin-prohibited",
            "ip daddr @hostnet4 meta l4proto tcp counter reject with tcp reset",
            "ip daddr @hostnet4 counter reject with icmpx type admin-prohibited",
            "ip6 daddr @reserved6 meta l4proto tcp counter reject with tcp reset",
            "ip6 daddr @reserved6 counter reject with icmpx type admin-prohibited",
            "ip6 daddr @hostnet6 meta l4proto tcp counter reject with tcp reset",
            "ip6 daddr @hostnet6 counter reject with icmpx type admin-prohibited",
            "ip daddr @dev-dns4 counter accept",
            "ip6 daddr @dev-dns6 counter accept",
            "ip daddr @dev-dns4-tcp-443 meta l4proto tcp th dport 443 counter accept",
            "ip6 daddr @dev-dns6-tcp-443 meta l4proto tcp th dport 443 counter accept",
            "meta l4proto tcp counter reject with tcp reset",
            "counter reject with icmpx type admin-prohibited",
        ]
    );
    let tcp443 = plan.set("dev-allow4-tcp-443").unwrap();
    assert_eq!(
        tcp443.elements,
        vec![AddrRange::single("192.0.2.10".parse().unwrap())]
    );
    let any6 = plan.set("dev-allow6-udp-443").unwrap();
    assert_eq!(
        any6.elements,
        vec![AddrRange::single("2001:db8::1".parse().unwrap())]
    );
    assert_eq!(plan.set("dev-dns4").unwrap().kind, SetKind::Dynamic);
    assert_eq!(plan.set("dev-dns4-tcp-443").unwrap().kind, SetKind::Dynamic);
    // Every learned set is bounded by the profile's learned_max.
    assert_eq!(
        plan.set("dev-dns4").unwrap().size,
        Some(corral_sandbox_core::profile::DEFAULT_LEARNED_MAX)
    );
    assert!(plan.render_nft().contains("timeout 600s\n\t\tsize 1024\n"));
    assert_eq!(plan.set("dev-dns4").unwrap().timeout, Some(DNS_SET_TIMEOUT));
    assert_eq!(plan.set("dev-allow4").unwrap().timeout, None);
    assert!(
        plan.render_nft()
            .contains("flags timeout\n\t\ttimeout 600s\n")
    );
}

#[test]
fn internet_none_host_and_bridge_chains() {
    let plan = sample_plan();
    assert_eq!(
        texts(chain(&plan, TableFamily::Inet, "web-out"))[6..],
        [
            "ip daddr @reserved4 meta l4proto tcp counter reject with tcp reset",
            "ip daddr @reserved4 counter reject with icmpx type admin-prohibited",
            "ip daddr @hostnet4 meta l4proto tcp counter reject with tcp reset",
            "ip daddr @hostnet4 counter reject with icmpx type admin-prohibited",
            "meta nfproto ipv4 counter accept",
            "meta l4proto tcp counter reject with tcp reset",
            "counter reject with icmpx type admin-prohibited",
        ]
    );
    assert_eq!(
        texts(chain(&plan, TableFamily::Inet, "iso-out")),
        [
            "ct state established,related ct direction original ct original ip saddr 10.92.0.0/24 counter accept",
            "ct state related counter drop",
            "meta l4proto udp th dport 53 counter drop",
            "meta l4proto tcp th dport 53 counter drop",
            "counter drop",
        ]
    );
    assert_eq!(
        texts(chain(&plan, TableFamily::Inet, "iso-host")),
        [
            "ct state established,related ct original ip saddr 10.92.0.0/24 counter accept",
            "ct state related counter drop",
            "ip daddr 255.255.255.255 meta l4proto udp th dport 67 counter accept",
            "ip daddr 10.92.0.1 meta l4proto udp th dport 67 counter accept",
            "counter drop",
        ]
    );
    let dev_host = texts(chain(&plan, TableFamily::Inet, "dev-host"));
    assert!(
        dev_host
            .contains(&"ip daddr 10.90.0.1 meta l4proto udp th dport 53 counter accept".to_owned())
    );
    assert!(
        dev_host.contains(
            &"ip6 daddr fd00:90::1 meta l4proto tcp th dport 53 counter accept".to_owned()
        )
    );
    assert!(dev_host.contains(
        &"meta l4proto ipv6-icmp icmpv6 type nd-neighbor-solicit counter accept".to_owned()
    ));
    assert_eq!(
        texts(chain(&plan, TableFamily::Inet, "forward")),
        [
            "iifname \"mpqemubr0\" counter drop",
            "oifname \"mpqemubr0\" counter drop",
            "counter oifname vmap @in_by_oif",
            "oifgroup 1668248172 counter drop",
            "ip daddr @retired4 counter drop",
            "ip6 daddr @retired6 counter drop",
            "oifname @cut_ports counter drop",
            "counter iifname vmap @out_by_iif",
            "iifgroup 1668248172 counter drop",
            "iifname @cut_ports counter drop",
        ]
    );
    assert_eq!(
        texts(chain(&plan, TableFamily::Inet, "prerouting"))[3..],
        [
            "iifname @cut_ports counter drop",
            "ip saddr @retired4 counter drop",
            "ip6 saddr @retired6 counter drop",
        ]
    );
    assert_eq!(
        texts(chain(&plan, TableFamily::Inet, "postrouting")),
        [
            "counter ip saddr vmap @nat4_by_saddr",
            "counter ip6 saddr vmap @nat6_by_saddr",
        ]
    );
    assert_eq!(
        texts(chain(&plan, TableFamily::Inet, "dev-nat")),
        [
            "ip saddr 10.90.0.0/24 oifname != \"cb-dev\" counter masquerade",
            "ip6 saddr fd00:90::/64 oifname != \"cb-dev\" counter masquerade",
        ]
    );
    assert_eq!(
        texts(chain(&plan, TableFamily::Inet, "web-nat")),
        ["ip saddr 10.91.0.0/24 oifname != \"cb-web\" counter masquerade"]
    );
    let nat4 = plan
        .inet
        .maps
        .iter()
        .find(|m| m.name == "nat4_by_saddr")
        .unwrap();
    assert_eq!(
        nat4.elements
            .iter()
            .map(render::map_element_text)
            .collect::<Vec<_>>(),
        ["10.90.0.0/24 : jump dev-nat", "10.91.0.0/24 : jump web-nat"]
    );
    assert_eq!(
        texts(chain(&plan, TableFamily::Bridge, "forward")),
        [
            "iifname @cut_ports counter drop",
            "oifname @cut_ports counter drop",
            "iifname @ports counter drop",
            "oifname @ports counter drop",
            "iifname @quarantine counter drop",
            "oifname @quarantine counter drop",
            "counter ip saddr vmap @ports4_by_addr",
            "counter ip daddr vmap @ports4_by_addr",
            "counter arp saddr ip vmap @ports4_by_addr",
            "counter arp daddr ip vmap @ports4_by_addr",
            "counter ip6 saddr vmap @ports6_by_addr",
            "counter ip6 daddr vmap @ports6_by_addr",
        ]
    );
    let bridge_map = |name: &str| {
        plan.bridge
            .maps
            .iter()
            .find(|m| m.name == name)
            .unwrap()
            .elements
            .iter()
            .map(render::map_element_text)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        bridge_map("ports4_by_addr"),
        [
            "10.90.0.0/24 : jump dev-ports",
            "10.91.0.0/24 : jump web-ports",
            "10.92.0.0/24 : jump iso-ports",
        ]
    );
    assert_eq!(
        bridge_map("ports6_by_addr"),
        ["fd00:90::/64 : jump dev-ports"]
    );
    // The maps found the profile's subnet: its chain only drops (one
    // rule and its drop-log twin, IPv4 only or dual stack alike).
    for p in ["iso-ports", "dev-ports"] {
        assert_eq!(
            texts(chain(&plan, TableFamily::Bridge, p)),
            ["counter drop"],
            "{p}"
        );
        assert_eq!(chain(&plan, TableFamily::Bridge, p).rules.len(), 2, "{p}");
    }
    assert_eq!(
        texts(chain(&plan, TableFamily::Bridge, "port-in")),
        [
            "iifname . ether saddr != @port-mac counter drop",
            "ether type arp counter jump port-arp",
            "ether type ip counter jump port-ip4",
            "ether type ip6 counter jump port-ip6",
            "counter drop",
        ]
    );
    assert_eq!(
        texts(chain(&plan, TableFamily::Bridge, "prerouting")),
        [
            "iifname @cut_ports counter drop",
            "iifname @ports counter jump port-in",
            "iifname @quarantine counter jump quarantine-in",
        ]
    );
    let dev_host = texts(chain(&plan, TableFamily::Inet, "dev-host"));
    // After the own-flow accepts (one per subnet), the foreign-related
    // drop and the two DHCP accepts (broadcast and gateway): the UDP query
    // rate for new connections first, so a refused one never holds a
    // count, then the cap on open ones.
    assert_eq!(
        dev_host[5..7],
        [
            "ip daddr 10.90.0.1 meta l4proto tcp th dport 53 ct state new update @dev-dnstcprate4 { ip saddr limit rate over 50/second burst 500 packets } counter reject with tcp reset",
            "ip daddr 10.90.0.1 meta l4proto tcp th dport 53 ct state new add @dev-dnstcp4 { ip saddr ct count over 4 } counter reject with tcp reset",
        ]
    );
}

#[test]
fn bridge_chains_run_before_br_netfilter_whatever_the_order() {
    let plan = sample_plan();
    let bases: Vec<_> = plan.bridge.chains.iter().filter_map(|c| c.base).collect();
    assert_eq!(bases.len(), 3);
    for b in bases {
        assert!(b.priority < bridge::BR_NETFILTER_LOWEST, "{b:?}");
    }
}

/// Issue 26, classes 2 and 3, as rules: fragments are dropped before any
/// rule reads a transport field; a quarantined port may not name a bound
/// MAC as `chaddr`; a DHCP server message leaves only by its client's
/// port (each with its drop-log twin first).
#[test]
fn dhcp_rules_read_chaddr_and_drop_fragments_first() {
    let plan = sample_plan();
    let first_drop = |name: &str| -> String {
        texts(chain(&plan, TableFamily::Bridge, name))
            .into_iter()
            .find(|t| t.ends_with("counter drop"))
            .unwrap()
    };
    assert_eq!(
        first_drop("port-ip4"),
        "ether type ip @nh,48,16 & 0x3fff != 0x0000 counter drop"
    );
    assert_eq!(
        first_drop("port-ip6"),
        "ether type ip6 exthdr frag exists counter drop"
    );
    let q = texts(chain(&plan, TableFamily::Bridge, "quarantine-in"));
    let at = |t: &str| q.iter().position(|x| x == t).unwrap();
    let frag = at("ether type ip @nh,48,16 & 0x3fff != 0x0000 counter drop");
    let chaddr =
        at("ether type ip meta l4proto udp th dport 67 @th,288,48 @bound-chaddr counter drop");
    let accept = q.iter().position(|x| x.ends_with("accept")).unwrap();
    assert!(frag < chaddr && chaddr < accept, "{q:#?}");
    let post = texts(chain(&plan, TableFamily::Bridge, "postrouting"));
    let drops: Vec<&String> = post
        .iter()
        .filter(|t| t.ends_with("counter drop"))
        .collect();
    assert_eq!(
        drops,
        [
            "ether type ip meta l4proto udp th sport 67 oifname @quarantine counter drop",
            "ether type ip meta l4proto udp th sport 67 oifname @ports oifname . @th,288,48 != @port-lladdr counter drop",
        ]
    );
    let post_chain = chain(&plan, TableFamily::Bridge, "postrouting");
    assert_eq!(post_chain.base.map(|b| b.hook), Some(Hook::Postrouting));
}

#[test]
fn bindings_change_only_set_elements() {
    let (set, _) = sample();
    let plan = sample_plan();
    let dev = set.get("dev").unwrap();
    let a = PortBinding::allocate(dev, &[]).unwrap();
    let b = PortBinding::allocate(dev, std::slice::from_ref(&a)).unwrap();
    let bound = plan
        .with_bindings(&set, vec![b.clone(), a.clone()])
        .unwrap();
    assert_eq!(bound.bindings, vec![a.clone(), b.clone()]);
    let mut skeleton = bound.clone();
    for s in &mut skeleton.bridge.keyed_sets {
        s.elements.clear();
    }
    skeleton.bindings.clear();
    assert_eq!(skeleton, plan, "only keyed elements and bindings differ");
    let elements = |name: &str| {
        bound
            .bridge
            .keyed_sets
            .iter()
            .find(|s| s.name == name)
            .unwrap()
            .elements
            .len()
    };
    assert_eq!(elements(bridge::sets::PORTS), 2);
    assert_eq!(elements(bridge::sets::PORT_IP4), 2);
    // Global and link-local per binding.
    assert_eq!(elements(bridge::sets::PORT_IP6), 4);
    assert_eq!(elements(bridge::sets::PORT_ND_TARGET), 4);
    assert_eq!(bound.binding(a.port.as_str()), Some(&a));
    // Unbinding is binding the rest.
    let back = bound.with_bindings(&set, vec![b]).unwrap();
    assert_eq!(back.bindings.len(), 1);
    assert_eq!(plan.with_bindings(&set, vec![]).unwrap(), plan);
}

/// `with_binding` replaces an earlier binding of the same port (what a
/// sandbox re-bound to a new MAC needs) and keeps the others;
/// `without_binding` drops only the port named, and nothing for a port
/// never bound.
#[test]
fn one_port_is_bound_or_unbound_without_touching_the_others() {
    let (set, _) = sample();
    let plan = sample_plan();
    let dev = set.get("dev").unwrap();
    let a = PortBinding::allocate(dev, &[]).unwrap();
    let b = PortBinding::allocate(dev, std::slice::from_ref(&a)).unwrap();
    let both = plan
        .with_binding(&set, a.clone())
        .unwrap()
        .with_binding(&set, b.clone())
        .unwrap();
    assert_eq!(
        both,
        plan.with_bindings(&set, vec![a.clone(), b.clone()])
            .unwrap()
    );
    let mut moved = PortBinding::allocate(dev, &[a.clone(), b.clone()]).unwrap();
    moved.port = a.port.clone();
    let rebound = both.with_binding(&set, moved.clone()).unwrap();
    assert_eq!(rebound.bindings.len(), 2);
    assert_eq!(rebound.binding(a.port.as_str()), Some(&moved));
    assert_eq!(rebound.binding(b.port.as_str()), Some(&b));
    let rest = rebound.without_binding(&set, a.port.as_str()).unwrap();
    assert_eq!(rest.bindings, vec![b.clone()]);
    assert_eq!(rest.without_binding(&set, "no-such-port").unwrap(), rest);
}

#[test]
fn reserved_sets_merge_the_top_ranges() {
    let plan = sample_plan();
    let r4 = plan.set("reserved4").unwrap();
    assert_eq!(r4.elements.len(), 11, "224/4 and 240/4 merge");
    assert_eq!(
        r4.elements.last().unwrap().end,
        IpAddr::V4(Ipv4Addr::BROADCAST)
    );
}

#[test]
fn sysctls_and_bridges() {
    let plan = sample_plan();
    let keys: Vec<&str> = plan.sysctls.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "net.ipv4.ip_forward",
            "net.ipv6.conf.all.forwarding",
            "net.ipv4.conf.cb-dev.rp_filter",
            "net.ipv4.conf.cb-dev.accept_local",
            "net.ipv4.conf.cb-dev.route_localnet",
            "net.ipv4.conf.cb-web.rp_filter",
            "net.ipv4.conf.cb-web.accept_local",
            "net.ipv4.conf.cb-web.route_localnet",
            "net.ipv4.conf.cb-iso.rp_filter",
            "net.ipv4.conf.cb-iso.accept_local",
            "net.ipv4.conf.cb-iso.route_localnet",
            "net.ipv4.conf.cb-dev.arp_ignore",
            "net.ipv4.conf.cb-dev.arp_announce",
            "net.ipv4.conf.cb-dev.drop_gratuitous_arp",
            "net.ipv6.conf.cb-dev.drop_unsolicited_na",
            "net.ipv6.conf.cb-dev.accept_ra",
            "net.ipv4.conf.cb-web.arp_ignore",
            "net.ipv4.conf.cb-web.arp_announce",
            "net.ipv4.conf.cb-web.drop_gratuitous_arp",
            "net.ipv4.conf.cb-iso.arp_ignore",
            "net.ipv4.conf.cb-iso.arp_announce",
            "net.ipv4.conf.cb-iso.drop_gratuitous_arp",
            "net.bridge.bridge-nf-call-iptables",
            "net.bridge.bridge-nf-call-ip6tables",
        ]
    );
    assert!(is_bridge_sysctl(
        "net.ipv4.conf.cb-dev.arp_ignore",
        &plan.bridges
    ));
    assert!(!is_bridge_sysctl("net.ipv4.ip_forward", &plan.bridges));
    assert_eq!(
        interface_sysctl("ipv4", "br.5", "arp_ignore"),
        "net.ipv4.conf.br/5.arp_ignore"
    );
    assert_eq!(plan.bridges[0].gateway_v4.to_string(), "10.90.0.1/24");
    assert_eq!(
        plan.bridges[0].gateway_v6.unwrap().to_string(),
        "fd00:90::1/64"
    );
}

#[test]
fn build_errors_say_what_to_fix() {
    let (set, _) = sample();
    let err = HostPlan::build(&set, &PlanSettings::default(), &Resolution::new()).unwrap_err();
    assert!(matches!(err, PlanError::NotResolved { .. }), "{err}");
    let mut res = Resolution::new();
    res.insert(&"api.example.com".parse().unwrap(), []);
    let err = HostPlan::build(&set, &PlanSettings::default(), &res).unwrap_err();
    assert!(err.to_string().contains("allow_unresolved"), "{err}");
    let mp = ProfileSet::new(vec![profile(
        "m",
        "mpqemubr0",
        "10.1.0.0/24",
        EgressMode::None,
        &[],
    )])
    .unwrap();
    let err = HostPlan::build(&mp, &PlanSettings::default(), &Resolution::new()).unwrap_err();
    assert!(matches!(err, PlanError::MultipassBridge { .. }), "{err}");
}

#[test]
fn uplink_setting_narrows_masquerade() {
    let (set, res) = sample();
    let settings = PlanSettings {
        multipass_bridge: None,
        uplink: Some("eth0".to_owned()),
        ..PlanSettings::default()
    };
    let plan = HostPlan::build(&set, &settings, &res).unwrap();
    let nat = texts(chain(&plan, TableFamily::Inet, "dev-nat"));
    assert_eq!(
        nat[0],
        "ip saddr 10.90.0.0/24 oifname \"eth0\" counter masquerade"
    );
    assert!(!texts(chain(&plan, TableFamily::Inet, "forward"))[0].contains("mpqemubr0"));
}

#[test]
fn rendering_contains_the_replace_preamble_and_ranges() {
    let text = sample_plan().render_nft();
    assert!(text.starts_with("table inet corral\ndelete table inet corral\ntable bridge corral\ndelete table bridge corral\n"));
    assert!(
        text.contains("elements = { 0.0.0.0/8, 10.0.0.0/8,"),
        "{text}"
    );
    assert!(text.contains(", 224.0.0.0/3 }"), "{text}");
    assert!(text.contains("198.51.100.7"), "{text}");
}

fn arb_profile(i: usize) -> impl Strategy<Value = corral_sandbox_core::Profile> {
    let modes = prop_oneof![
        Just(EgressMode::None),
        Just(EgressMode::Internet),
        Just(EgressMode::Allowlist)
    ];
    let entries = prop::collection::vec(
        (
            any::<u32>(),
            8u8..=32,
            prop::option::of(1u16..2000),
            prop::option::of(any::<bool>()),
        ),
        1..8,
    );
    (modes, entries, any::<bool>(), any::<bool>()).prop_map(move |(mode, entries, v6, drop)| {
        let mut p = profile(
            &format!("p{i}"),
            &format!("cb-p{i}"),
            &format!("10.{}.0.0/24", 100 + i),
            mode,
            &[],
        );
        if v6 {
            p.subnet_v6 = Some(format!("fd00:{i}::/64").parse().unwrap());
        }
        if drop {
            p.block = BlockAction::Drop;
        }
        p.allow = entries
            .into_iter()
            .map(|(addr, len, port, tcp)| {
                let net = ipnet::Ipv4Net::new(Ipv4Addr::from(addr), len)
                    .unwrap()
                    .trunc();
                AllowEntry {
                    target: AllowTarget::Net(net.into()),
                    ports: port.map(|p| corral_sandbox_core::PortRange::single(p).unwrap()),
                    protocol: tcp.map(|t| {
                        if t {
                            corral_sandbox_core::Protocol::Tcp
                        } else {
                            corral_sandbox_core::Protocol::Udp
                        }
                    }),
                }
            })
            .collect();
        if mode != EgressMode::Allowlist {
            p.allow.clear();
        }
        p
    })
}

fn arb_set() -> impl Strategy<Value = ProfileSet> {
    (arb_profile(0), arb_profile(1), arb_profile(2))
        .prop_map(|(a, b, c)| ProfileSet::new(vec![a, b, c]).unwrap())
}

proptest! {
    #[test]
    fn plan_invariants(set in arb_set()) {
        let plan = HostPlan::build(&set, &PlanSettings::default(), &Resolution::new()).unwrap();
        // Determinism.
        let again = HostPlan::build(&set, &PlanSettings::default(), &Resolution::new()).unwrap();
        prop_assert_eq!(&plan, &again);
        prop_assert_eq!(plan.render_nft(), again.render_nft());
        for p in &set {
            let br = p.bridge.to_string();
            let fwd = chain(&plan, TableFamily::Inet, "forward");
            // Every bridge has both forward directions and an input chain,
            // each one map element away from its base chain.
            let map = |name: &str| plan.inet.maps.iter().find(|m| m.name == name).unwrap();
            prop_assert_eq!(map(vmap::OUT_BY_IIF).chain_for_name(&br).map(str::to_owned), Some(names::out_chain(&p.name)));
            prop_assert_eq!(map(vmap::IN_BY_OIF).chain_for_name(&br).map(str::to_owned), Some(names::in_chain(&p.name)));
            prop_assert_eq!(map(vmap::HOST_BY_IIF).chain_for_name(&br).map(str::to_owned), Some(names::host_chain(&p.name)));
            prop_assert_eq!(map(vmap::GUARD_BY_IIF).chain_for_name(&br).map(str::to_owned), Some(names::guard_chain(&p.name)));
            let in_first = fwd.rules.iter().position(|r| matches!(&r.verdict,
                Verdict::Vmap { field: MapField::OifName, map } if map == vmap::IN_BY_OIF));
            let out_next = fwd.rules.iter().position(|r| matches!(&r.verdict,
                Verdict::Vmap { field: MapField::IifName, map } if map == vmap::OUT_BY_IIF));
            prop_assert!(in_first.is_some() && in_first < out_next);
            for net in guard::subnets(p) {
                let arrival = map(vmap::arrival_by_saddr(AddrFamily::of(net.addr())));
                prop_assert_eq!(arrival.chain_for_addr(net.addr()).map(str::to_owned), Some(names::arrival_chain(&p.name)));
            }
            // A none-profile never accepts toward the world except replies.
            if p.mode == EgressMode::None {
                let out = chain(&plan, TableFamily::Inet, &names::out_chain(&p.name));
                for r in &out.rules {
                    prop_assert!(r.verdict != Verdict::Accept || crate::plan::owner::out_rules(p).contains(r));
                }
            }
            // Every profile chain ends with its block verdict.
            let out = chain(&plan, TableFamily::Inet, &names::out_chain(&p.name));
            let last = out.rules.last().unwrap();
            prop_assert!(last.matches.is_empty() && last.verdict.class() == VerdictClass::Blocked);
            // So does every chain `forward` and `input` dispatch a planned
            // bridge to: its packets never reach the base chains' drops of
            // an unplanned bridge's group (`fail_closed`).
            for c in [names::in_chain(&p.name), names::host_chain(&p.name)] {
                let last = chain(&plan, TableFamily::Inet, &c).rules.last().unwrap();
                prop_assert!(last.matches.is_empty() && last.verdict.class() == VerdictClass::Blocked, "{}", c);
            }
        }
        // The inet base chains hold the same rules whatever the number of
        // profiles: dispatch is one map lookup per direction.
        for c in plan.inet.chains.iter().filter(|c| c.base.is_some()) {
            // (At most: the Multipass bridge's two drops, two lookups and
            // the six fail-closed drops of `forward`.)
            prop_assert!(c.rules.len() <= 10, "{} has {} rules", c.name, c.rules.len());
        }
        // So do the bridge table's: its `forward` reaches a profile's
        // `<p>-ports` by one lookup per address field.
        for c in plan.bridge.chains.iter().filter(|c| c.base.is_some()) {
            // (At most: the port and quarantine drops with their drop-log
            // twins, six lookups, the two cut-port drops.)
            prop_assert!(c.rules.len() <= 18, "bridge {} has {} rules", c.name, c.rules.len());
            prop_assert!(c.rules.iter().all(|r| !matches!(r.verdict, Verdict::Jump(ref to) if to.ends_with("-ports"))));
        }
        for p in &set {
            for net in guard::subnets(p) {
                let m = plan.bridge.maps.iter()
                    .find(|m| m.name == vmap::ports_by_addr(AddrFamily::of(net.addr())))
                    .unwrap();
                prop_assert_eq!(m.chain_for_addr(net.addr()).map(str::to_owned), Some(names::ports_chain(&p.name)));
            }
        }
        // Every map element jumps to a chain of its table.
        for t in plan.tables() {
            for m in &t.maps {
                for target in m.chains() {
                    prop_assert!(t.chains.iter().any(|c| c.name == target));
                }
            }
        }
        // Every rule has a counter; no bridge rule uses conntrack or reject.
        for t in plan.tables() {
            for c in &t.chains {
                for r in &c.rules {
                    prop_assert!(r.counter);
                    // Nothing from a sandbox bridge is accepted as established
                    // without a direction, except towards the host (replies
                    // to the host's own flows are legitimate there).
                    if t.family == TableFamily::Inet
                        && c.name.ends_with("-out")
                        && r.matches.contains(&Match::CtEstablishedRelated)
                    {
                        prop_assert!(r.matches.contains(&Match::CtDirection(CtDir::Original)));
                    }
                    if t.family == TableFamily::Bridge {
                        prop_assert!(!r.matches.contains(&Match::CtEstablishedRelated));
                        prop_assert!(!matches!(r.verdict, Verdict::Reject(_)));
                    }
                }
            }
        }
    }

    /// Retired subnets and cut ports are set elements only: the rules stay
    /// the same, and a rebinding keeps the cut ports.
    #[test]
    fn fail_closed_inputs_change_only_elements(
        set in arb_set(),
        nets in prop::collection::vec((0u8..=255, 16u8..=30), 0..5),
        ports in prop::collection::vec("[a-z]{1,8}", 0..4),
    ) {
        let plan = HostPlan::build(&set, &PlanSettings::default(), &Resolution::new()).unwrap();
        let retired: Vec<ipnet::IpNet> = nets.iter().map(|(o, l)| {
            ipnet::IpNet::V4(ipnet::Ipv4Net::new(Ipv4Addr::new(172, 16, *o, 0), *l).unwrap().trunc())
        }).collect();
        let cut = plan.with_fail_closed(retired.clone(), ports.clone());
        prop_assert_eq!(cut.rule_count(), plan.rule_count());
        let rules = |p: &HostPlan| p.tables().iter().flat_map(|t| t.chains.clone()).collect::<Vec<_>>();
        prop_assert_eq!(rules(&cut), rules(&plan));
        let rebound = cut.with_bindings(&set, Vec::new()).unwrap();
        let mut want = ports.clone();
        want.sort();
        want.dedup();
        for t in rebound.tables() {
            let s = t.keyed_sets.iter().find(|s| s.name == fail_closed::CUT_PORTS).unwrap();
            prop_assert_eq!(s.elements.len(), want.len());
        }
        // The same inputs through the settings build the same plan.
        let settings = PlanSettings { retired, cut_ports: ports, ..PlanSettings::default() };
        let built = HostPlan::build(&set, &settings, &Resolution::new()).unwrap();
        prop_assert_eq!(built.render_nft(), cut.render_nft());
    }

    #[test]
    fn rule_count_does_not_depend_on_address_count(n in 1u32..300, m in 1u32..300) {
        let a = allowlist_plan(n);
        let b = allowlist_plan(m);
        prop_assert_eq!(a.rule_count(), b.rule_count());
        prop_assert_eq!(a.element_count() as i64 - b.element_count() as i64, i64::from(n) - i64::from(m));
    }

    #[test]
    fn merged_ranges_are_sorted_disjoint_and_cover_the_input(
        raw in prop::collection::vec((any::<u32>(), 16u8..=32), 0..40)
    ) {
        let ranges: Vec<AddrRange> = raw.iter().map(|(a, l)| {
            AddrRange::from_net(ipnet::Ipv4Net::new(Ipv4Addr::from(*a), *l).unwrap().into())
        }).collect();
        let merged = model::merge_ranges(ranges.clone());
        for w in merged.windows(2) {
            // Strictly increasing with a gap of at least one address.
            prop_assert!(model::to_u128(w[0].end) + 1 < model::to_u128(w[1].start));
        }
        for r in &ranges {
            prop_assert!(merged.iter().any(|m| m.start <= r.start && r.end <= m.end));
        }
    }
}
