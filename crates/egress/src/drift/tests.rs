//! Drift against a mirror of the plan, one tampering at a time.

use super::*;
use crate::nft::fingerprint;
use crate::nft::{LiveChain, LiveRule};
use crate::plan::VerdictClass;
use crate::plan::render::rule_text;
use crate::plan::test_support::sample_plan;

/// A live state built from the plan itself: what a perfect apply reads back.
fn mirror(plan: &HostPlan) -> LiveState {
    LiveState {
        tables: plan
            .tables()
            .iter()
            .map(|t| LiveTable {
                family: t.family,
                flags: 0,
                sets: t
                    .sets
                    .iter()
                    .map(|s| LiveSet {
                        name: s.name.clone(),
                        family: Some(s.family),
                        flags: match s.kind {
                            SetKind::Interval => libc::NFT_SET_INTERVAL as u32,
                            SetKind::Dynamic => libc::NFT_SET_TIMEOUT as u32,
                        },
                        elements: s.elements.clone(),
                        timeout_ms: s.timeout.map_or(0, |t| t.as_millis() as u64),
                        size: s.size.unwrap_or(0),
                        expires_ms: Vec::new(),
                        pinned: false,
                        askers: Vec::new(),
                        key_len: s.family.key_len() as u32,
                        keys: Vec::new(),
                        userdata: crate::nft::set_userdata(t, &s.name)
                            .and_then(Result::ok)
                            .unwrap_or_default(),
                        jumps: Vec::new(),
                    })
                    .chain(t.keyed_sets.iter().map(|s| {
                        LiveSet {
                            name: s.name.clone(),
                            family: None,
                            flags: crate::nft::keyed_flags(s.kind),
                            elements: Vec::new(),
                            timeout_ms: match s.kind {
                                KeyedKind::Meter {
                                    timeout: Some(t), ..
                                } => t.as_millis() as u64,
                                _ => 0,
                            },
                            size: match s.kind {
                                KeyedKind::Meter { size, .. } => size,
                                _ => 0,
                            },
                            expires_ms: Vec::new(),
                            pinned: false,
                            askers: Vec::new(),
                            key_len: s.key_len(),
                            keys: s.elements.iter().map(|e| s.key_bytes(e)).collect(),
                            userdata: crate::nft::set_userdata(t, &s.name)
                                .and_then(Result::ok)
                                .unwrap_or_default(),
                            jumps: Vec::new(),
                        }
                    }))
                    .chain(t.maps.iter().map(|m| {
                        LiveSet {
                            name: m.name.clone(),
                            family: None,
                            flags: crate::nft::map_flags(m.key),
                            elements: Vec::new(),
                            timeout_ms: 0,
                            size: 0,
                            expires_ms: Vec::new(),
                            pinned: false,
                            askers: Vec::new(),
                            key_len: m.key.len(),
                            keys: Vec::new(),
                            userdata: crate::nft::set_userdata(t, &m.name)
                                .and_then(Result::ok)
                                .unwrap_or_default(),
                            jumps: super::map_jumps(m),
                        }
                    }))
                    .collect(),
                chains: t
                    .chains
                    .iter()
                    .map(|c| LiveChain {
                        name: c.name.clone(),
                        base: c.base.map(|b| LiveBase {
                            kind: b.kind.keyword().to_owned(),
                            hook: b.hook.number(),
                            priority: b.priority,
                            policy: libc::NF_ACCEPT as u32,
                        }),
                        rules: c
                            .rules
                            .iter()
                            .map(|r| LiveRule {
                                handle: 0,
                                text: fingerprint(t.family, &c.name, r).unwrap(),
                                packets: 0,
                                bytes: 0,
                                class: VerdictClass::Other,
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

#[test]
fn a_mirror_has_no_drift() {
    let plan = sample_plan();
    assert_eq!(diff(&plan, &mirror(&plan)), vec![]);
}

#[test]
fn a_dormant_table_and_a_reserved_learned_element_are_drift() {
    let plan = sample_plan();
    let mut live = mirror(&plan);
    live.tables[0].flags = 1;
    let learned = live.tables[0]
        .sets
        .iter_mut()
        .find(|s| s.name == "dev-dns4-tcp-443")
        .unwrap();
    learned
        .elements
        .push(AddrRange::single("169.254.169.254".parse().unwrap()));
    learned
        .elements
        .push(AddrRange::single("198.51.100.99".parse().unwrap()));
    let d = diff(&plan, &live);
    assert_eq!(d.len(), 2, "{d:#?}");
    assert!(d[0].detail.contains("dormant"), "{d:#?}");
    assert!(
        d[1].location == "set dev-dns4-tcp-443"
            && d[1].detail.contains("169.254.169.254")
            && d[1].detail.contains("169.254.0.0/16"),
        "{d:#?}"
    );
}

#[test]
fn each_kind_of_drift_is_reported_where_it_is() {
    let plan = sample_plan();
    let mut live = mirror(&plan);
    let inet = &mut live.tables[0];
    inet.sets.retain(|s| s.name != "dev-allow4-tcp-443");
    let r4 = inet
        .sets
        .iter_mut()
        .find(|s| s.name == "reserved4")
        .unwrap();
    r4.elements.remove(1);
    r4.elements
        .push(AddrRange::single("8.8.8.8".parse().unwrap()));
    let out = inet
        .chains
        .iter_mut()
        .find(|c| c.name == "dev-out")
        .unwrap();
    out.rules.pop();
    inet.chains.push(LiveChain {
        name: "intruder".to_owned(),
        base: None,
        rules: vec![],
    });
    live.tables.remove(1);
    let d = diff(&plan, &live);
    let has = |k: DriftKind, o: DriftObject, loc: &str| {
        d.iter()
            .any(|x| x.kind == k && x.object == o && x.location == loc)
    };
    assert!(
        has(
            DriftKind::Missing,
            DriftObject::Set,
            "set dev-allow4-tcp-443"
        ),
        "{d:#?}"
    );
    assert!(has(
        DriftKind::Missing,
        DriftObject::Element,
        "set reserved4"
    ));
    assert!(has(DriftKind::Extra, DriftObject::Element, "set reserved4"));
    let last = plan
        .inet
        .chains
        .iter()
        .find(|c| c.name == "dev-out")
        .unwrap()
        .rules
        .len();
    assert!(has(
        DriftKind::Missing,
        DriftObject::Rule,
        &format!("chain dev-out rule {last}")
    ));
    assert!(has(DriftKind::Extra, DriftObject::Chain, "chain intruder"));
    assert!(has(
        DriftKind::Missing,
        DriftObject::Table,
        "table bridge corral"
    ));
    assert!(
        d.iter().any(|x| x.to_string()
            == "set dev-allow4-tcp-443 in table inet corral is missing: the set does not exist"),
        "{d:#?}"
    );
}

fn dev_out(live: &mut LiveState) -> &mut Vec<LiveRule> {
    &mut live.tables[0]
        .chains
        .iter_mut()
        .find(|c| c.name == "dev-out")
        .unwrap()
        .rules
}

fn live_rule(text: &str) -> LiveRule {
    LiveRule {
        handle: 0,
        text: text.to_owned(),
        packets: 0,
        bytes: 0,
        class: VerdictClass::Other,
    }
}

#[test]
fn a_deleted_mid_chain_rule_is_one_missing_rule_in_nft_syntax() {
    let plan = sample_plan();
    let mut live = mirror(&plan);
    let rules = dev_out(&mut live);
    assert!(rules.len() >= 3);
    rules.remove(1);
    let d = diff(&plan, &live);
    let planned = &plan
        .inet
        .chains
        .iter()
        .find(|c| c.name == "dev-out")
        .unwrap()
        .rules[1];
    assert_eq!(
        d,
        vec![Drift {
            kind: DriftKind::Missing,
            object: DriftObject::Rule,
            family: TableFamily::Inet,
            location: "chain dev-out rule 2".to_owned(),
            detail: format!("`{}`", rule_text(planned)),
        }]
    );
    assert!(!d[0].detail.contains("reg "), "{d:#?}");
}

#[test]
fn an_inserted_rule_is_one_extra_rule_in_nft_syntax() {
    let plan = sample_plan();
    let mut live = mirror(&plan);
    // What `nft insert rule inet corral dev-out position 2 accept`
    // would leave: an unconditional accept, second in the chain.
    dev_out(&mut live).insert(1, live_rule("[ counter ] [ immediate reg 0 accept ]"));
    let d = diff(&plan, &live);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(
        (d[0].kind, d[0].location.as_str(), d[0].detail.as_str()),
        (DriftKind::Extra, "chain dev-out rule 2", "`counter accept`")
    );
}

#[test]
fn a_rule_replaced_in_place_is_one_change_showing_both_in_nft_syntax() {
    let plan = sample_plan();
    let mut live = mirror(&plan);
    let rules = dev_out(&mut live);
    let last = rules.len() - 1;
    rules[last] = live_rule("[ counter ] [ immediate reg 0 accept ]");
    let d = diff(&plan, &live);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].kind, DriftKind::Changed);
    assert!(
        d[0].detail.ends_with(", live `counter accept`") && d[0].detail.starts_with("planned `"),
        "{d:#?}"
    );
}

#[test]
fn a_moved_base_chain_reads_as_nft_chain_headers() {
    let plan = sample_plan();
    let mut live = mirror(&plan);
    let base = live.tables[0]
        .chains
        .iter_mut()
        .find_map(|c| c.base.as_mut())
        .unwrap();
    base.priority = 10;
    base.policy = libc::NF_DROP as u32;
    let d = diff(&plan, &live);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert!(d[0].detail.contains("priority 10; policy drop;`"), "{d:#?}");
    assert!(!d[0].detail.contains("Some("), "{d:#?}");
}

/// A dispatch element removed, redirected or added is drift in the map,
/// named in `nft` syntax where the plan has it.
#[test]
fn a_tampered_verdict_map_is_drift() {
    let plan = sample_plan();
    let mut live = mirror(&plan);
    let out = live.tables[0]
        .sets
        .iter_mut()
        .find(|s| s.name == "out_by_iif")
        .unwrap();
    // "cb-dev" now jumps to web's chain; a stranger's element appears.
    let dev = out
        .jumps
        .iter_mut()
        .find(|j| j.0.starts_with(b"cb-dev\0"))
        .unwrap();
    dev.2 = "web-out".to_owned();
    out.jumps.push((
        b"evil0\0\0\0\0\0\0\0\0\0\0\0".to_vec(),
        false,
        "web-out".into(),
    ));
    live.tables[0]
        .sets
        .iter_mut()
        .find(|s| s.name == "nat4_by_saddr")
        .unwrap()
        .jumps
        .clear();
    let d = diff(&plan, &live);
    let texts: Vec<String> = d.iter().map(ToString::to_string).collect();
    let missing = |location: &str, detail: &str| {
        d.iter().any(|x| {
            x.kind == DriftKind::Missing
                && x.object == DriftObject::Element
                && x.location == location
                && x.detail == detail
        })
    };
    assert!(
        missing("map out_by_iif", "\"cb-dev\" : jump dev-out"),
        "{texts:#?}"
    );
    assert!(
        missing("map nat4_by_saddr", "10.90.0.0/24 : jump dev-nat"),
        "{texts:#?}"
    );
    assert_eq!(
        d.iter()
            .filter(|x| x.kind == DriftKind::Extra && x.location == "map out_by_iif")
            .count(),
        2,
        "{texts:#?}"
    );
}
