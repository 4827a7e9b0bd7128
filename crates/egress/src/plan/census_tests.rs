//! What one profile adds to the plan, measured (issue 33, step 1). Run
//! with `--nocapture` to see the tables docs/benchmarks.md quotes.

use std::collections::BTreeMap;

use corral_sandbox_core::ProfileSet;
use corral_sandbox_core::config::Config;

use super::*;
use crate::plan::{PlanSettings, Resolution};

/// Profiles as the scale bench writes them (crates/drill/benches/scale.rs):
/// allowlist, IPv4 only, one address-and-port entry, every other field
/// the configuration's default.
fn bench_profiles(n: usize) -> ProfileSet {
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!(
            "[[profile]]\nname = \"prof{i}\"\nbridge = \"brx{i}\"\nsubnet = \"10.{}.{}.0/24\"\nmode = \"allowlist\"\nallow = [\"203.0.113.10:5201/tcp\"]\n\n",
            100 + i / 256,
            i % 256
        ));
    }
    Config::from_toml_str(&text, "census").unwrap().profiles
}

fn plan(n: usize) -> HostPlan {
    HostPlan::build(
        &bench_profiles(n),
        &PlanSettings::default(),
        &Resolution::new(),
    )
    .unwrap()
}

fn print_added(title: &str, added: &BTreeMap<RuleClass, i64>) {
    println!("{title}");
    let mut by_chain: BTreeMap<(TableFamily, &str), i64> = BTreeMap::new();
    for (c, n) in added {
        println!("  {:?} {:<14} {:<11} {n:>3}", c.table, c.chain, c.kind);
        *by_chain.entry((c.table, &c.chain)).or_insert(0) += n;
    }
    for ((t, c), n) in &by_chain {
        println!("  = {t:?} {c:<14} {n:>3}");
    }
    println!("  total {}", added.values().sum::<i64>());
}

#[test]
fn a_profile_adds_the_same_rules_to_a_host_of_one_as_to_a_host_of_a_hundred() {
    let one = rules(&plan(1));
    let second = added(&one, &rules(&plan(2)));
    let hundred = rules(&plan(100));
    let hundred_first = added(&hundred, &rules(&plan(101)));
    print_added("rules the second profile adds:", &second);
    assert_eq!(second, hundred_first);
    // Only per-profile chains grow: the base chains dispatch through maps.
    assert!(
        second.keys().all(|c| c.chain.starts_with("<p>")),
        "{second:?}"
    );
    let total: i64 = second.values().sum();
    let whole = |p: &HostPlan| i64::try_from(p.rule_count()).unwrap();
    assert_eq!(whole(&plan(2)) - whole(&plan(1)), total);
    // Linear in the number of profiles, nothing more.
    let at_500 = whole(&plan(500));
    assert_eq!(at_500, whole(&plan(1)) + 499 * total);
    println!(
        "rules at 1, 2, 100, 500 profiles: {}, {}, {}, {at_500}",
        plan(1).rule_count(),
        plan(2).rule_count(),
        plan(100).rule_count()
    );
    let sets = |p: &HostPlan| {
        (
            p.inet.sets.len(),
            p.inet.keyed_sets.len(),
            p.inet.maps.len(),
        )
    };
    let elements = |p: &HostPlan| p.inet.maps.iter().map(|m| m.elements.len()).sum::<usize>();
    println!(
        "inet sets, keyed sets, maps at 1 and 2 profiles: {:?} {:?}; map elements {} {}",
        sets(&plan(1)),
        sets(&plan(2)),
        elements(&plan(1)),
        elements(&plan(2))
    );
}

/// How a rule of the second profile differs from the first profile's
/// rule in the same place.
fn difference(a: &RulePlan, b: &RulePlan) -> &'static str {
    if a == b {
        return "identical";
    }
    let (a, b) = (format!("{a:?}"), format!("{b:?}"));
    // The drop log's rule id and budget meter name the profile.
    let b = b
        .replace("prefix: \"prof1-", "prefix: \"prof0-")
        .replace("\"prof1-droplog\"", "\"prof0-droplog\"");
    if a == b {
        return "drop-log name";
    }
    // The profile's own chains, sets and meters.
    let b = b.replace("prof1", "prof0");
    if a == b {
        return "own object name";
    }
    let b = b
        .replace("brx1", "brx0")
        .replace("10.100.1.", "10.100.0.")
        .replace("10, 100, 1,", "10, 100, 0,");
    if a == b {
        return "bridge or subnet";
    }
    "other"
}

#[test]
fn every_rule_a_profile_adds_differs_from_another_profiles_by_name_bridge_or_subnet_only() {
    let p = plan(2);
    let mut by: BTreeMap<(String, &'static str), usize> = BTreeMap::new();
    let mut compared = 0usize;
    for t in p.tables() {
        for c in t
            .chains
            .iter()
            .filter(|c| c.profile.as_deref() == Some("prof1"))
        {
            let twin_name = c.name.replacen("prof1", "prof0", 1);
            let twin = t
                .chains
                .iter()
                .find(|c| c.name == twin_name)
                .unwrap_or_else(|| panic!("no {twin_name} beside {}", c.name));
            assert_eq!(c.rules.len(), twin.rules.len(), "{}", c.name);
            for (a, b) in twin.rules.iter().zip(&c.rules) {
                let d = difference(a, b);
                assert_ne!(d, "other", "{a:?}\n{b:?}");
                *by.entry((chain_kind(c), d)).or_insert(0) += 1;
                compared += 1;
            }
        }
    }
    println!("rules of the second profile, by how they differ from the first's:");
    let mut totals: BTreeMap<&str, usize> = BTreeMap::new();
    for ((chain, d), n) in &by {
        println!("  {chain:<14} {d:<16} {n:>3}");
        *totals.entry(d).or_insert(0) += n;
    }
    println!("  totals {totals:?}");
    let added: i64 = added(&rules(&plan(1)), &rules(&p)).values().sum();
    assert_eq!(i64::try_from(compared).unwrap(), added);
}
