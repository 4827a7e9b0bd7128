// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::IpAddr;

use super::*;
use crate::nft::fingerprint;
use crate::nft::readback::{LiveBase, LiveRule, LiveSet, LiveTable};
use crate::plan::eval::{Flow, Learned};
use crate::plan::trace::TraceVerdict;
use crate::plan::{
    HostPlan, PlanSettings, Resolution, SetKind, TableFamily, VerdictClass, fail_closed,
};
use corral_sandbox_core::{EgressMode, ProfileSet};

/// `inet corral` as the kernel would hold it after applying `plan`, the
/// dynamic sets holding `learned`: every rule as its read-back text.
fn live_of(plan: &HostPlan, learned: &Learned) -> LiveTable {
    let t = &plan.inet;
    let mut sets: Vec<LiveSet> = t
        .sets
        .iter()
        .map(|s| {
            let mine = learned.get(&s.name).cloned().unwrap_or_default();
            let (flags, elements) = match s.kind {
                SetKind::Interval => (libc::NFT_SET_INTERVAL as u32, s.elements.clone()),
                SetKind::Dynamic => (
                    libc::NFT_SET_TIMEOUT as u32,
                    mine.iter().map(|e| e.addr).collect(),
                ),
            };
            let mut live = live_set(
                &s.name,
                Some(s.family),
                flags,
                crate::plan::keyed::key_len(&s.key()),
                elements,
            );
            if s.pinned {
                live.pinned = true;
                live.askers = mine.iter().filter_map(|e| e.asker).collect();
                live.keys = mine
                    .iter()
                    .map(|e| super::super::set::learned_key(s, e))
                    .collect();
            }
            live
        })
        .collect();
    sets.extend(t.keyed_sets.iter().map(|k| {
        let mut s = live_set(
            &k.name,
            None,
            super::super::keyed_flags(k.kind),
            k.key_len(),
            vec![],
        );
        s.keys = k.elements.iter().map(|e| k.key_bytes(e)).collect();
        s
    }));
    sets.extend(t.maps.iter().map(|m| {
        let mut s = live_set(
            &m.name,
            None,
            super::super::map_flags(m.key),
            m.key.len(),
            vec![],
        );
        s.jumps = super::super::map_wire_elements(&m.elements)
            .into_iter()
            .map(|(k, f, c)| (k, f.is_some(), c.unwrap_or_default()))
            .collect();
        s.jumps.sort();
        s
    }));
    let chains = t
        .chains
        .iter()
        .map(|c| LiveChain {
            name: c.name.clone(),
            base: c.base.map(|b| LiveBase {
                kind: b.kind.keyword().to_owned(),
                hook: b.hook.number(),
                priority: b.priority,
                policy: 1,
            }),
            rules: c
                .rules
                .iter()
                .enumerate()
                .map(|(i, r)| LiveRule {
                    handle: i as u64 + 2,
                    text: fingerprint(TableFamily::Inet, &c.name, r).unwrap(),
                    packets: 0,
                    bytes: 0,
                    class: VerdictClass::Other,
                })
                .collect(),
        })
        .collect();
    LiveTable {
        family: TableFamily::Inet,
        flags: 0,
        sets,
        chains,
    }
}

fn live_set(
    name: &str,
    family: Option<AddrFamily>,
    flags: u32,
    key_len: u32,
    elements: Vec<AddrRange>,
) -> LiveSet {
    LiveSet {
        name: name.to_owned(),
        family,
        flags,
        elements,
        timeout_ms: 0,
        size: 0,
        expires_ms: Vec::new(),
        pinned: false,
        askers: Vec::new(),
        key_len,
        keys: Vec::new(),
        userdata: Vec::new(),
        jumps: Vec::new(),
    }
}

/// The packet a sandbox of the profile owning `src` sends: in by its
/// bridge, out by the bridge holding `dst`, by an uplink otherwise, or to
/// the host when `dst` is a gateway.
fn packet(plan: &HostPlan, flow: &Flow) -> Packet {
    let holds = |b: &crate::plan::BridgePlan, a: IpAddr| match a {
        IpAddr::V4(v) => b.gateway_v4.trunc().contains(&v),
        IpAddr::V6(v) => b.gateway_v6.is_some_and(|n| n.trunc().contains(&v)),
    };
    let stamped = |name: &str| Iface {
        name: name.to_owned(),
        group: fail_closed::STAMP_GROUP,
    };
    let iif = plan.bridges.iter().find(|b| holds(b, flow.src)).unwrap();
    let route = if plan.is_gateway(flow.dst) {
        Route::Local
    } else {
        Route::Forward(
            plan.bridges
                .iter()
                .find(|b| holds(b, flow.dst))
                .map_or_else(
                    || Iface {
                        name: "uplink0".to_owned(),
                        group: 0,
                    },
                    |b| stamped(b.name.as_str()),
                ),
        )
    };
    Packet {
        protocol: flow.protocol,
        src: flow.src,
        dst: flow.dst,
        dport: flow.dport,
        iif: stamped(iif.name.as_str()),
        route,
    }
}

fn v(t: TraceVerdict) -> LiveVerdict {
    match t {
        TraceVerdict::Allow => LiveVerdict::Allow,
        _ => LiveVerdict::Block,
    }
}

fn sample() -> HostPlan {
    sample_with(|_| {})
}

/// [`sample`] with `dev` changed by `tweak`.
fn sample_with(tweak: impl FnOnce(&mut corral_sandbox_core::Profile)) -> HostPlan {
    use crate::plan::test_support::{dev_profile, profile};
    let mut dev = dev_profile();
    tweak(&mut dev);
    let mut web = profile("web", "cb-web", "10.91.0.0/22", EgressMode::Internet, &[]);
    web.subnet_v6 = Some("fd00:91::/64".parse().unwrap());
    let iso = profile("iso", "cb-iso", "10.92.0.0/23", EgressMode::None, &[]);
    let set = ProfileSet::new(vec![dev, web, iso]).unwrap();
    let mut r = Resolution::new();
    r.insert(
        &"api.example.com".parse().unwrap(),
        ["192.0.2.10".parse::<IpAddr>().unwrap()],
    );
    HostPlan::build(&set, &PlanSettings::default(), &r).unwrap()
}

fn builtin() -> HostPlan {
    let cfg = corral_sandbox_core::config::Config::builtin_default();
    HostPlan::build(&cfg.profiles, &PlanSettings::default(), &Resolution::new()).unwrap()
}

fn flows(plan: &HostPlan) -> Vec<Flow> {
    let dsts: Vec<IpAddr> = [
        "192.0.2.10",
        "203.0.113.9",
        "198.51.100.7",
        "198.51.100.8",
        "8.8.8.8",
        "10.0.0.1",
        "169.254.169.254",
        "10.90.0.1",
        "10.91.0.1",
        "10.92.0.5",
        "10.91.0.9",
        "2001:db8::1",
        "2606:4700::1",
        "fd00:90::1",
        "fd00:91::7",
        "93.184.215.14",
    ]
    .iter()
    .map(|a| a.parse().unwrap())
    .collect();
    let mut out = Vec::new();
    for b in &plan.bridges {
        let mut srcs = vec![IpAddr::V4((u32::from(b.gateway_v4.addr()) + 5).into())];
        if let Some(n) = b.gateway_v6 {
            srcs.push(IpAddr::V6((u128::from(n.addr()) + 5).into()));
        }
        for &src in &srcs {
            for &dst in dsts.iter().filter(|d| d.is_ipv4() == src.is_ipv4()) {
                for (protocol, ports) in [(6u8, &[443u16, 80, 53, 8050][..]), (17, &[53, 443, 67])]
                {
                    for &p in ports {
                        out.push(Flow {
                            protocol,
                            src,
                            dst,
                            dport: Some(p),
                        });
                    }
                }
                out.push(Flow {
                    protocol: if dst.is_ipv4() { 1 } else { 58 },
                    src,
                    dst,
                    dport: None,
                });
            }
        }
    }
    out
}

/// Untampered, the kernel's walk of the planned rules says what the
/// plan's walk says, for every flow of every profile; a learned element
/// counts in both.
#[test]
fn the_planned_ruleset_walks_as_the_plan() {
    for plan in [sample(), builtin()] {
        let mut learned = Learned::new();
        for s in plan.inet.sets.iter().filter(|s| s.kind == SetKind::Dynamic) {
            let a: IpAddr = match s.family {
                AddrFamily::V4 => "93.184.215.14".parse().unwrap(),
                AddrFamily::V6 => "2606:4700::1".parse().unwrap(),
            };
            learned.insert(s.name.clone(), vec![AddrRange::single(a).into()]);
        }
        let live = live_of(&plan, &learned);
        let (mut allowed, mut blocked) = (0, 0);
        for flow in flows(&plan) {
            let want = plan.trace(&flow, &learned);
            let got = trace_live(Some(&live), &packet(&plan, &flow));
            assert_eq!(
                got.verdict,
                v(want.verdict),
                "{flow:?}: live {got:#?}\nplan {want:#?}"
            );
            if let (Some(w), Some(g)) = (&want.rule, &got.rule) {
                assert_eq!((&w.chain, w.index), (&g.chain, g.index), "{flow:?}");
            }
            match got.verdict {
                LiveVerdict::Allow => allowed += 1,
                _ => blocked += 1,
            }
        }
        assert!(
            allowed > 0 && blocked > 0,
            "{allowed} allowed, {blocked} blocked"
        );
    }
}

/// On corral's gateway a learned element opens its address to the
/// sandbox address that asked, and both walks say so: the asker's flows
/// walk as the plan says (some allowed), a sibling's to the same address
/// likewise (none allowed by the learned set).
#[test]
fn a_pinned_element_walks_as_the_plan_for_its_asker_and_its_sibling() {
    let plan = sample_with(|dev| dev.dns = corral_sandbox_core::DnsPolicy::Corral);
    let (asker4, sibling4): (IpAddr, IpAddr) =
        ("10.90.0.5".parse().unwrap(), "10.90.0.6".parse().unwrap());
    let (asker6, sibling6): (IpAddr, IpAddr) =
        ("fd00:90::5".parse().unwrap(), "fd00:90::6".parse().unwrap());
    let (to4, to6): (IpAddr, IpAddr) = (
        "93.184.215.14".parse().unwrap(),
        "2606:4700::1".parse().unwrap(),
    );
    let mut learned = Learned::new();
    let dynamic: Vec<_> = plan
        .inet
        .sets
        .iter()
        .filter(|s| s.kind == SetKind::Dynamic)
        .collect();
    assert!(!dynamic.is_empty() && dynamic.iter().all(|s| s.pinned));
    for s in dynamic {
        let (asker, to) = match s.family {
            AddrFamily::V4 => (asker4, to4),
            AddrFamily::V6 => (asker6, to6),
        };
        learned.insert(
            s.name.clone(),
            vec![crate::plan::eval::LearnedAddr {
                asker: Some(asker),
                addr: AddrRange::single(to),
            }],
        );
    }
    let live = live_of(&plan, &learned);
    let mut allowed = std::collections::BTreeMap::new();
    for (src, dst) in [
        (asker4, to4),
        (sibling4, to4),
        (asker6, to6),
        (sibling6, to6),
    ] {
        for (protocol, port) in [(6u8, 443u16), (6, 22), (17, 443)] {
            let flow = Flow {
                protocol,
                src,
                dst,
                dport: Some(port),
            };
            let want = plan.trace(&flow, &learned);
            let got = trace_live(Some(&live), &packet(&plan, &flow));
            assert_eq!(
                got.verdict,
                v(want.verdict),
                "{flow:?}: live {got:#?}\nplan {want:#?}"
            );
            if want.verdict == TraceVerdict::Allow {
                let set = want.set.as_ref().unwrap();
                assert!(set.learned, "{flow:?}: {want:#?}");
                *allowed.entry(src).or_insert(0) += 1;
            }
        }
    }
    assert_eq!(allowed.get(&asker4), Some(&3), "{allowed:?}");
    assert_eq!(allowed.get(&asker6), Some(&3), "{allowed:?}");
    assert!(
        !allowed.contains_key(&sibling4) && !allowed.contains_key(&sibling6),
        "{allowed:?}"
    );
}

fn dev_flow(dst: &str, port: u16) -> (HostPlan, Flow) {
    let plan = sample();
    let flow = Flow {
        protocol: 6,
        src: "10.90.0.5".parse().unwrap(),
        dst: dst.parse().unwrap(),
        dport: Some(port),
    };
    (plan, flow)
}

/// An accept inserted at the top of the profile's chain lets through what
/// the plan blocks; the walk names the inserted rule.
#[test]
fn an_inserted_accept_decides() {
    let (plan, flow) = dev_flow("8.8.8.8", 443);
    assert_eq!(
        plan.trace(&flow, &Learned::new()).verdict,
        TraceVerdict::Block
    );
    let mut live = live_of(&plan, &Learned::new());
    let chain = live
        .chains
        .iter_mut()
        .find(|c| c.name == "dev-out")
        .unwrap();
    chain.rules.insert(
        0,
        LiveRule {
            handle: 999,
            text: "[ meta load nfproto => reg 1 ] [ cmp eq reg 1 0x00000002 ] [ payload load 4b @ network header + 16 => reg 1 ] [ cmp eq reg 1 0x08080808 ] [ immediate reg 0 accept ]".to_owned(),
            packets: 0,
            bytes: 0,
            class: VerdictClass::Accepted,
        },
    );
    let got = trace_live(Some(&live), &packet(&plan, &flow));
    assert_eq!(got.verdict, LiveVerdict::Allow, "{got:#?}");
    let hit = got.rule.unwrap();
    assert_eq!((hit.chain.as_str(), hit.handle), ("dev-out", 999));
    assert_eq!(hit.nft, "ip daddr 8.8.8.8 accept");
}

/// A base chain's policy turned to drop blocks what fell off its end.
#[test]
fn a_drop_policy_blocks() {
    let (plan, flow) = dev_flow("192.0.2.10", 443);
    assert_eq!(
        plan.trace(&flow, &Learned::new()).verdict,
        TraceVerdict::Allow
    );
    let mut live = live_of(&plan, &Learned::new());
    // The allowed flow is accepted in forward; the policy of input does
    // not apply to it, but a dropping postrouting chain's does.
    let post = live
        .chains
        .iter_mut()
        .find(|c| c.name == "postrouting")
        .unwrap();
    post.base.as_mut().unwrap().policy = 0;
    let got = trace_live(Some(&live), &packet(&plan, &flow));
    assert_eq!(got.verdict, LiveVerdict::Block, "{got:#?}");
    assert_eq!(got.policy.as_deref(), Some("postrouting"));
}

/// An element removed from an allow set blocks its address.
#[test]
fn a_removed_element_blocks() {
    let (plan, flow) = dev_flow("203.0.113.9", 443);
    assert_eq!(
        plan.trace(&flow, &Learned::new()).verdict,
        TraceVerdict::Allow
    );
    let mut live = live_of(&plan, &Learned::new());
    for s in &mut live.sets {
        s.elements.retain(|r| {
            !(to_u128(r.start) <= to_u128(flow.dst) && to_u128(flow.dst) <= to_u128(r.end))
                || s.name.starts_with("reserved")
        });
    }
    let got = trace_live(Some(&live), &packet(&plan, &flow));
    assert_eq!(got.verdict, LiveVerdict::Block, "{got:#?}");
}

/// An expression the walk does not model, on the packet's path, is
/// named, never guessed; the same expression off the path is not.
#[test]
fn an_unmodelled_expression_is_unknown_on_the_path_only() {
    let (plan, flow) = dev_flow("8.8.8.8", 443);
    let mut live = live_of(&plan, &Learned::new());
    let chain = live
        .chains
        .iter_mut()
        .find(|c| c.name == "dev-out")
        .unwrap();
    chain.rules.insert(
        0,
        LiveRule {
            handle: 998,
            text:
                "[ meta load mark => reg 1 ] [ cmp eq reg 1 0x00000001 ] [ immediate reg 0 accept ]"
                    .to_owned(),
            packets: 0,
            bytes: 0,
            class: VerdictClass::Accepted,
        },
    );
    let got = trace_live(Some(&live), &packet(&plan, &flow));
    assert_eq!(got.verdict, LiveVerdict::Unknown, "{got:#?}");
    assert!(
        got.unknown.as_deref().unwrap().contains("meta mark"),
        "{got:#?}"
    );
    // A packet of another profile never enters dev-out.
    let other = Flow {
        src: "10.91.0.5".parse().unwrap(),
        ..flow
    };
    let got = trace_live(Some(&live), &packet(&plan, &other));
    assert_eq!(got.verdict, LiveVerdict::Allow, "{got:#?}");
}

/// No table: nothing of corral's stops the packet, and the walk says why.
#[test]
fn no_table_allows_and_says_so() {
    let (plan, flow) = dev_flow("8.8.8.8", 443);
    let got = trace_live(None, &packet(&plan, &flow));
    assert_eq!(got.verdict, LiveVerdict::Allow);
    assert!(got.note.is_some());
}

/// A packet routing refuses is walked as leaving by a link that is not
/// corral's: the rules' verdict, with a note.
#[test]
fn a_refused_route_walks_as_an_uplink() {
    let (plan, flow) = dev_flow("192.0.2.10", 443);
    let live = live_of(&plan, &Learned::new());
    let mut pkt = packet(&plan, &flow);
    pkt.route = Route::Refused("no route".to_owned());
    let got = trace_live(Some(&live), &pkt);
    assert_eq!(got.verdict, LiveVerdict::Allow, "{got:#?}");
    assert!(
        got.note.as_deref().unwrap().contains("no route"),
        "{got:#?}"
    );
}
