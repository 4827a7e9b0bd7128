use super::*;
use crate::plan::test_support::sample_plan;

#[test]
fn fingerprints_read_like_nft_debug_output() {
    let plan = sample_plan();
    let chain = plan
        .inet
        .chains
        .iter()
        .find(|c| c.name == "dev-out")
        .unwrap();
    let first = fingerprint(TableFamily::Inet, &chain.name, &chain.rules[0]).unwrap();
    assert!(first.starts_with("[ ct load state => reg 1"), "{first}");
    assert!(first.contains("[ counter ]"), "{first}");
    assert!(first.ends_with("[ immediate reg 0 accept ]"), "{first}");
    let allow = chain
        .rules
        .iter()
        .find(|r| r.verdict == Verdict::Accept && r.matches.len() == 1)
        .unwrap();
    let lookup = fingerprint(TableFamily::Inet, &chain.name, allow).unwrap();
    assert!(lookup.contains("set dev-allow4"), "{lookup}");
}

#[test]
fn every_plan_rule_encodes() {
    let plan = sample_plan();
    for t in plan.tables() {
        for c in &t.chains {
            for r in &c.rules {
                fingerprint(t.family, &c.name, r).unwrap();
            }
        }
    }
}

#[test]
fn long_interface_names_are_refused() {
    assert!(ifname("0123456789abcdef").is_err());
    assert_eq!(&ifname("br0").unwrap()[..4], b"br0\0");
}
