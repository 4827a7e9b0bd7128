//! The decoder against every rule corral plans, and against tampering.

use super::*;
use crate::host::plan_settings;
use crate::nft::fingerprint;
use crate::plan::render::rule_text;
use crate::plan::test_support::sample_plan;
use crate::plan::{HostPlan, Resolution};

fn plans() -> Vec<HostPlan> {
    let config = corral_sandbox_core::Config::builtin_default();
    let builtin = HostPlan::build(
        &config.profiles,
        &plan_settings(&config.host),
        &Resolution::new(),
    )
    .unwrap();
    vec![sample_plan(), builtin]
}

/// The law drift relies on: every rule corral plans, read back from
/// the kernel's encoding, prints exactly as the plan prints it. A new
/// kind of match must teach the decoder its encoding (this test names
/// the rule that does not decode).
#[test]
fn every_planned_rule_decodes_to_its_own_nft_text() {
    for plan in plans() {
        for t in plan.tables() {
            for c in &t.chains {
                for r in &c.rules {
                    let fp = fingerprint(t.family, &c.name, r).unwrap();
                    assert_eq!(nft_syntax(&fp), rule_text(r), "chain {}: {fp}", c.name);
                }
            }
        }
    }
}

#[test]
fn unknown_expressions_stay_visible() {
    let text = "[ meta load mark => reg 1 ] [ cmp eq reg 1 0x00000001 ] [ quota 10 bytes ] [ immediate reg 0 drop ]";
    assert_eq!(
        nft_syntax(text),
        "meta mark 0x01000000 [ quota 10 bytes ] drop"
    );
}

#[test]
fn tampered_rules_read_as_nft_would_print_them() {
    let cases = [
        (
            "[ meta load iifname => reg 1 ] [ cmp eq reg 1 0x72726f63 0x692d6c61 0x00006f73 0x00000000 ] [ counter pkts 0 bytes 0 ] [ immediate reg 0 accept ]",
            "iifname \"corral-iso\" counter accept",
        ),
        (
            "[ meta load nfproto => reg 1 ] [ cmp eq reg 1 0x00000002 ] [ payload load 4b @ network header + 16 => reg 1 ] [ cmp eq reg 1 0x076433c6 ] [ immediate reg 0 accept ]",
            "ip daddr 198.51.100.7 accept",
        ),
        (
            "[ meta load l4proto => reg 1 ] [ cmp eq reg 1 0x00000006 ] [ payload load 2b @ transport header + 2 => reg 1 ] [ cmp gte reg 1 0x0000401f ] [ cmp lte reg 1 0x0000a41f ] [ immediate reg 0 accept ]",
            "meta l4proto tcp th dport 8000-8100 accept",
        ),
        (
            "[ meta load nfproto => reg 1 ] [ cmp eq reg 1 0x00000002 ] [ payload load 4b @ network header + 12 => reg 1 ] [ dynset add reg_key 1 set internet-dnstcp4 timeout 0ms expr [ connlimit count 4 flags 1 ] ] [ counter ] [ reject type 1 code 0 ]",
            "add @internet-dnstcp4 { ip saddr ct count over 4 } counter reject with tcp reset",
        ),
        (
            "[ counter pkts 3 bytes 180 ] [ log prefix dev-out/unlisted:drop group 7307 snaplen 128 qthreshold 0 ] [ immediate reg 0 drop ]",
            "counter log prefix \"dev-out/unlisted:drop\" group 7307 snaplen 128 drop",
        ),
        (
            "[ log group 2 snaplen 0 qthreshold 5 ] [ immediate reg 0 accept ]",
            "log group 2 queue-threshold 5 accept",
        ),
        (
            "[ meta load iifname => reg 1 ] [ lookup reg 1 set ports 0x0 ] [ counter ] [ immediate reg 0 drop ]",
            "iifname @ports counter drop",
        ),
        (
            "[ payload load 2b @ link header + 12 => reg 1 ] [ cmp eq reg 1 0x00000608 ] [ payload load 3b @ network header + 14 => reg 1 ] [ cmp eq reg 1 0x0001e70a ] [ counter ] [ immediate reg 0 drop ]",
            "arp saddr ip 10.231.1.0/24 counter drop",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(nft_syntax(text), want, "{text}");
    }
}
