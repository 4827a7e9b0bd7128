use super::*;
use crate::plan::eval::{Flow, Learned};
use crate::plan::test_support::sample_plan;
use crate::plan::trace::TraceVerdict;

fn q(s: &str) -> Question {
    s.parse().unwrap()
}

fn trace(plan: &HostPlan, profile: &str, s: &str, learned: &Learned) -> Trace {
    let q = q(s);
    let ip = q.ip().unwrap();
    plan.trace_profile(profile, q.proto.number(ip), ip, q.port, learned)
        .unwrap()
}

#[test]
fn questions_parse_and_print_back() {
    for (text, shown) in [
        ("203.0.113.7:443/tcp", "203.0.113.7:443/tcp"),
        ("203.0.113.7:443", "203.0.113.7:443/tcp"),
        ("203.0.113.7", "203.0.113.7/icmp"),
        ("[2001:db8::1]:53/udp", "[2001:db8::1]:53/udp"),
        ("2001:db8::1", "2001:db8::1/icmp"),
        ("API.Example.com.:8443/UDP", "api.example.com:8443/udp"),
        ("198.51.100.1/ping", "198.51.100.1/icmp"),
    ] {
        assert_eq!(q(text).to_string(), shown, "{text}");
    }
    for bad in [
        "",
        "1.2.3.4:0",
        "1.2.3.4:99999",
        "1.2.3.4/sctp",
        "1.2.3.4/tcp",
        "1.2.3.4:80/icmp",
        "[2001:db8::1",
        "2001:db8::zz",
        "exa mple.com:80",
    ] {
        let e = bad.parse::<Question>().unwrap_err();
        assert!(e.to_string().contains("expected DEST"), "{bad}: {e}");
    }
}

#[test]
fn an_accept_names_its_allow_entry_and_set() {
    let plan = sample_plan();
    let none = Learned::new();
    let t = trace(&plan, "dev", "192.0.2.10:443/tcp", &none);
    assert_eq!(t.verdict, TraceVerdict::Allow);
    assert_eq!(t.entries, vec!["api.example.com:443/tcp".to_owned()]);
    let set = t.set.as_ref().unwrap();
    assert_eq!(set.name, "dev-allow4-tcp-443");
    assert!(!set.learned);
    let rule = t.rule.as_ref().unwrap();
    assert_eq!(rule.chain, "dev-out");
    assert!(rule.nft.contains("@dev-allow4-tcp-443"), "{}", rule.nft);
    assert_eq!(
        t.path,
        vec![
            "prerouting",
            "dev-arrival",
            "shared_guard",
            "dev-guard",
            "forward",
            "dev-out"
        ]
    );
    let line = one_line(&t, "192.0.2.10:443/tcp");
    assert!(
        line.starts_with("allow 192.0.2.10:443/tcp from profile dev: dev-out#"),
        "{line}"
    );
    assert!(line.contains("`api.example.com:443/tcp`"), "{line}");

    let t = trace(&plan, "dev", "203.0.113.77/icmp", &none);
    assert_eq!(t.verdict, TraceVerdict::Allow);
    assert_eq!(t.entries, vec!["203.0.113.0/24".to_owned()]);
}

#[test]
fn a_learned_accept_names_the_set_element_and_the_names_behind_it() {
    let plan = sample_plan();
    let mut learned = Learned::new();
    learned.insert(
        "dev-dns4".to_owned(),
        vec![AddrRange::single("198.51.100.99".parse().unwrap()).into()],
    );
    let t = trace(&plan, "dev", "198.51.100.99:22", &learned);
    assert_eq!(t.verdict, TraceVerdict::Allow);
    let set = t.set.as_ref().unwrap();
    assert_eq!((set.name.as_str(), set.learned), ("dev-dns4", true));
    assert_eq!(t.entries, vec!["*.example.org".to_owned()]);
    assert!(
        reason(&t).contains("learned by the gateway resolver"),
        "{}",
        reason(&t)
    );
    // Not learned: blocked by the profile's final block rule.
    let t = trace(&plan, "dev", "198.51.100.99:22", &Learned::new());
    assert_eq!(t.verdict, TraceVerdict::Block);
    assert!(t.entries.is_empty());
    assert!(
        reason(&t).contains("nothing in profile dev allows it"),
        "{}",
        reason(&t)
    );
}

#[test]
fn blocks_say_which_rule_and_why() {
    let plan = sample_plan();
    let none = Learned::new();
    let cases = [
        ("web", "169.254.169.254:80", "reserved or private space"),
        ("web", "8.8.8.8:53/udp", "DNS leaves a sandbox only"),
        ("web", "10.92.0.5:22", "between sandboxes"),
        ("web", "[2001:db8::1]:443", "has no IPv6"),
        ("web", "10.91.0.1:22", "takes only DHCP, DNS"),
        ("iso", "8.8.8.8:443", "nothing in profile iso allows it"),
    ];
    for (profile, dest, why) in cases {
        let t = trace(&plan, profile, dest, &none);
        assert_eq!(t.verdict, TraceVerdict::Block, "{dest}: {t:?}");
        assert!(reason(&t).contains(why), "{dest}: {}", reason(&t));
    }
    let t = trace(&plan, "web", "8.8.8.8:443", &none);
    assert_eq!(t.verdict, TraceVerdict::Allow);
    assert!(reason(&t).contains("internet mode"), "{}", reason(&t));
    let t = trace(&plan, "dev", "10.90.0.1:53/udp", &none);
    assert_eq!(t.verdict, TraceVerdict::Allow);
    assert_eq!(
        t.path,
        vec![
            "prerouting",
            "dev-arrival",
            "shared_guard",
            "dev-guard",
            "input",
            "dev-host"
        ]
    );
}

#[test]
fn names_map_to_the_entries_listing_them() {
    let plan = sample_plan();
    assert_eq!(
        plan.entries_listing("dev", "api.example.com"),
        vec!["api.example.com:443/tcp".to_owned()]
    );
    assert_eq!(
        plan.entries_listing("dev", "cdn.example.org"),
        vec!["*.example.org".to_owned()]
    );
    assert!(plan.entries_listing("dev", "example.org").is_empty());
    assert!(plan.entries_listing("web", "api.example.com").is_empty());
}

#[test]
fn every_origin_names_sets_of_the_plan() {
    let plan = sample_plan();
    assert!(!plan.origins.is_empty());
    for o in &plan.origins {
        for s in o.sets.iter().chain(&o.learned_sets) {
            assert!(plan.set(s).is_some(), "{} names missing set {s}", o.entry);
        }
    }
}

#[test]
fn a_source_outside_every_profile_is_not_corrals() {
    let plan = sample_plan();
    let t = plan.trace(
        &Flow {
            protocol: 6,
            src: "192.168.1.5".parse().unwrap(),
            dst: "8.8.8.8".parse().unwrap(),
            dport: Some(443),
        },
        &Learned::new(),
    );
    assert_eq!(t.verdict, TraceVerdict::NotCorrals);
    assert!(t.rule.is_none());
}
