//! The drop log, kernel side: every blocking rule of a profile's chains
//! also sends the packet's header to NFLOG group [`GROUP`], rate-limited
//! per profile, and counts what the limit kept out of the log.
//!
//! A blocking rule `M V` (matches `M`, verdict drop or reject) becomes two
//! rules with the same matches and the same verdict:
//!
//! ```text
//! M update @<p>-droplog { iifname limit rate over R/second burst B packets } counter V
//! M counter log prefix "<rule id>:<verdict>" group G snaplen S V
//! ```
//!
//! A packet matching `M` meets the first rule: over the profile's log
//! budget it is counted there (the *suppressed* count) and blocked; within
//! the budget the meter takes a token and the packet falls to the second
//! rule, which logs and blocks it. Either way the verdict is `V`: logging
//! can be starved, flooded or broken (no reader, a full meter) and the
//! block still holds. The two counters together are the rule's blocked
//! count; the first alone is exactly the packets not logged.
//!
//! The budget is one meter element per arriving interface, so everything
//! a profile's bridge sends shares one token bucket ([`RATE`] per second
//! after a burst of [`BURST`]): the blocks of packets arriving on the
//! bridge (guard, out, host) all update [`SHARED_METER`] keyed by the
//! bridge; the blocks of packets arriving elsewhere (`<p>-in`, the
//! arrival check) update the profile's own meter, so one profile's flood
//! through a shared uplink does not spend another's budget.
//!
//! Rule ids are `<chain>/<what>` (`dev-out/unlisted`), made from the
//! profile's chain names and a fixed word per rule, so the same
//! configuration gives the same ids on every apply. [`RULE_IDS`] lists
//! the words.
//!
//! A rule of a chain every profile shares ([`SHARED_RULE_IDS`], the
//! shared guard) names no profile: its id is `<chain>/<word>`
//! (`shared_guard/invalid`), and the reader takes the profile from the
//! bridge the packet arrived on, as for the bridge table. Its twins do
//! not drop themselves: each ends in the profile's sink chain, found by
//! the bridge (`iifname vmap @blocked_by_iif`, `@suppressed_by_iif`),
//! whose counted drop is the profile's blocked or suppressed count; a
//! third rule drops what no sink took (a bridge missing from the maps),
//! so a tampered map fails closed.

use corral_sandbox_core::ProfileName;

use super::keyed::{Field, KeyPart, KeyedKind, KeyedSetPlan, Limit};
use super::model::{LogTap, Match, RulePlan, Verdict, VerdictClass};
use super::vmap::{self, MapField};

/// The NFLOG group corral's rules log to: any group no other logger on
/// the host uses would do (ulogd's examples use 0–2); a reader binding
/// it sees only corral's blocks.
pub const GROUP: u16 = 7307;

/// Bytes of each blocked packet copied to the log: enough for an IPv6
/// header with a few extension headers and the transport ports, never
/// the payload.
pub const SNAPLEN: u32 = 128;

/// Log records a profile may produce per second, after [`BURST`].
pub const RATE: u64 = 20;

/// Log records a profile may produce at once.
pub const BURST: u32 = 50;

/// How long the meter remembers an idle interface.
pub const METER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The longest prefix `nft_log` accepts (`NF_LOG_PREFIXLEN` − the NUL).
pub const PREFIX_MAX: usize = 127;

/// The rule words, per chain kind, with what they block. The ids are
/// `<profile>-<chain>/<word>`.
pub const RULE_IDS: &[(&str, &str, &str)] = &[
    (
        "guard",
        "wrong-bridge",
        "a profile's source arriving on another interface (prerouting)",
    ),
    (
        "guard",
        "invalid",
        "conntrack cannot place the packet in a flow",
    ),
    (
        "guard",
        "loose-pickup",
        "TCP starting a flow with anything but a SYN",
    ),
    (
        "guard",
        "forged-source",
        "a source outside the profile's subnet",
    ),
    ("guard", "no-ipv6", "IPv6 from a profile without IPv6"),
    (
        "guard",
        "source-type",
        "a source the host routes as local, broadcast or multicast",
    ),
    ("guard", "loopback", "a loopback destination"),
    (
        "in",
        "foreign-related",
        "an ICMP error from another profile's sandbox quoting a flow",
    ),
    (
        "in",
        "unsolicited",
        "traffic to a sandbox that is not a reply",
    ),
    (
        "out",
        "foreign-related",
        "an ICMP error quoting a flow the profile did not start",
    ),
    (
        "out",
        "flow-cap",
        "a new flow over the per-source tracked-flow cap",
    ),
    ("out", "flow-rate", "a new flow over the per-source rate"),
    ("out", "dns", "DNS to anything but the gateway"),
    ("out", "denied", "a destination on a deny list"),
    ("out", "reserved", "a reserved or private destination"),
    ("out", "hostnet", "the host's own networks"),
    ("out", "unlisted", "anything the profile does not allow"),
    (
        "host",
        "foreign-related",
        "an ICMP error to the host quoting a flow not the profile's",
    ),
    (
        "host",
        "dns-tcp-cap",
        "a TCP/53 connection over the per-source cap",
    ),
    (
        "host",
        "unlisted",
        "anything to the host but DHCP, DNS, neighbour discovery",
    ),
];

/// The rule words of `table bridge corral`'s shared chains, which hold
/// every profile's frames: their ids are `l2-<chain>/<word>` and name no
/// profile; the reader takes the profile from the bridge the frame
/// arrived on (the log's input interface is the bridge in the bridge
/// family). A profile's own `<p>-ports` chain uses `<p>-ports/<word>`.
pub const L2_RULE_IDS: &[(&str, &str, &str)] = &[
    (
        "forward",
        "port-to-port",
        "a frame between two sandbox ports (port isolation)",
    ),
    (
        "forward",
        "quarantined",
        "a frame to or from a quarantined port",
    ),
    (
        "port-in",
        "wrong-mac",
        "a source MAC its port was not bound to",
    ),
    ("port-in", "ethertype", "a frame neither ARP, IPv4 nor IPv6"),
    (
        "port-arp",
        "spoofed",
        "ARP whose sender is not the port's binding",
    ),
    ("port-ip4", "fragment", "an IPv4 fragment from a sandbox"),
    (
        "port-ip4",
        "dhcp-server",
        "a DHCP server reply from a sandbox",
    ),
    ("port-ip4", "dhcp-flood", "DHCP over the per-port rate"),
    (
        "port-ip4",
        "dhcp-chaddr",
        "DHCP naming another client hardware address",
    ),
    ("port-ip4", "dns-flood", "DNS over the per-port rate"),
    (
        "port-ip4",
        "forged-source",
        "IPv4 from an address its port was not bound to",
    ),
    (
        "port-ip6",
        "fragment",
        "an IPv6 packet with a fragment header from a sandbox",
    ),
    (
        "port-ip6",
        "router",
        "router advertisement, redirect or renumbering from a sandbox",
    ),
    (
        "port-ip6",
        "dhcp6-server",
        "a DHCPv6 server reply from a sandbox",
    ),
    ("port-ip6", "dns-flood", "DNS over the per-port rate"),
    (
        "port-ip6",
        "forged-source",
        "IPv6 from an address its port was not bound to",
    ),
    (
        "port-ip6-unspec",
        "unspecified",
        "IPv6 from :: other than duplicate-address detection",
    ),
    (
        "port-na",
        "spoofed",
        "a neighbour advertisement for another port's address or MAC",
    ),
    (
        "port-ns",
        "spoofed",
        "a neighbour solicitation naming another MAC",
    ),
    (
        "port-rs",
        "spoofed",
        "a router solicitation naming another MAC",
    ),
    (
        "quarantine-in",
        "quarantined",
        "a frame from a port nobody bound",
    ),
    (
        "quarantine-in",
        "fragment",
        "an IPv4 fragment from a port nobody bound",
    ),
    (
        "quarantine-in",
        "bound-chaddr",
        "DHCP from a port nobody bound naming a bound sandbox's MAC",
    ),
    (
        "postrouting",
        "dhcp-reply",
        "a DHCP server message to a port other than its client's",
    ),
    (
        "ports",
        "unbound",
        "a profile's addresses between ports corral does not know",
    ),
];

/// The rule words of `table inet corral`'s shared chains, per chain:
/// their ids are `<chain>/<word>` and name no profile.
pub const SHARED_RULE_IDS: &[(&str, &str, &str)] = &[
    (
        super::names::SHARED_GUARD,
        "invalid",
        "conntrack cannot place the packet in a flow",
    ),
    (
        super::names::SHARED_GUARD,
        "loose-pickup",
        "TCP starting a flow with anything but a SYN",
    ),
    (
        super::names::SHARED_GUARD,
        "source-type",
        "a source the host routes as local, broadcast or multicast",
    ),
    (
        super::names::SHARED_GUARD,
        "loopback",
        "a loopback destination",
    ),
];

/// The meter of log tokens of every block of a packet that arrived on a
/// profile's bridge (inet table): one bucket per bridge, so per profile.
pub const SHARED_METER: &str = "shared_droplog";

/// Keys of [`SHARED_METER`]: one per profile bridge.
pub const SHARED_METER_KEYS: u32 = 65_535;

/// The prefix of `table bridge corral`'s shared rule ids.
pub const L2_PREFIX: &str = "l2-";

/// The meter of log tokens of `table bridge corral`'s shared chains: one
/// bucket per port, so one sandbox's flood spends only its own budget.
pub const L2_METER: &str = "l2-droplog";

/// Keys of a profile's meter: the interfaces its blocked packets arrive
/// on. A packet whose interface finds the meter full is logged (its rule's
/// logging twin still drops it): a full meter costs log volume, never
/// enforcement.
pub const METER_KEYS: u32 = 1_024;

/// What a profile's meter set name adds to the profile's name.
pub const METER_SUFFIX: &str = "-droplog";

/// The profile's meter of log tokens.
pub fn meter_set(profile: &ProfileName) -> String {
    format!("{profile}{METER_SUFFIX}")
}

/// The meter's plan (inet table).
pub(super) fn meter_plan(profile: &ProfileName) -> KeyedSetPlan {
    KeyedSetPlan::new(
        &meter_set(profile),
        vec![KeyPart::IfName],
        KeyedKind::Meter {
            timeout: Some(METER_TIMEOUT),
            size: METER_KEYS,
        },
    )
}

/// [`SHARED_METER`]'s plan (inet table).
pub(super) fn shared_meter_plan() -> KeyedSetPlan {
    KeyedSetPlan::new(
        SHARED_METER,
        vec![KeyPart::IfName],
        KeyedKind::Meter {
            timeout: Some(METER_TIMEOUT),
            size: SHARED_METER_KEYS,
        },
    )
}

/// Whether the blocks of rule `word` of `kind` meet packets that arrived
/// on the profile's bridge (their budget is the bridge's bucket of
/// [`SHARED_METER`]): all but `<p>-in`'s (from the uplink or another
/// bridge) and the arrival check's (from the wrong interface).
fn arrives_on_bridge(kind: &str, word: &str) -> bool {
    kind != "in" && kind != "ports" && word != "wrong-bridge"
}

/// The rule id of `word` in `profile`'s chain `kind` (`out`, `in`,
/// `guard`, `host`).
pub fn rule_id(profile: &ProfileName, kind: &str, word: &str) -> String {
    format!("{profile}-{kind}/{word}")
}

/// The log prefix of a rule: its id and verdict.
pub fn prefix(id: &str, verdict: &Verdict) -> String {
    let v = match verdict {
        Verdict::Reject(_) => "reject",
        _ => "drop",
    };
    format!("{id}:{v}")
}

/// A log prefix taken apart: the profile, the rule id, the verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefix {
    /// The profile whose rule blocked.
    pub profile: String,
    /// The rule id (`dev-out/unlisted`).
    pub rule: String,
    /// `drop` or `reject`.
    pub verdict: String,
}

/// Parse a prefix [`prefix`] made; `None` for anything else (another
/// logger sharing the group). A shared bridge rule's prefix names no
/// profile: its `profile` is empty.
pub fn parse_prefix(text: &str) -> Option<Prefix> {
    let (rule, verdict) = text.rsplit_once(':')?;
    if verdict != "drop" && verdict != "reject" {
        return None;
    }
    let (chain, word) = rule.split_once('/')?;
    if SHARED_RULE_IDS
        .iter()
        .any(|(c, w, _)| *c == chain && *w == word)
    {
        return Some(Prefix {
            profile: String::new(),
            rule: rule.to_owned(),
            verdict: verdict.to_owned(),
        });
    }
    if let Some(kind) = chain.strip_prefix(L2_PREFIX)
        && L2_RULE_IDS
            .iter()
            .any(|(k, w, _)| *k == kind && *w == word && *k != "ports")
    {
        return Some(Prefix {
            profile: String::new(),
            rule: rule.to_owned(),
            verdict: verdict.to_owned(),
        });
    }
    let (profile, kind) = chain.rsplit_once('-')?;
    let known = RULE_IDS.iter().any(|(k, w, _)| *k == kind && *w == word)
        || (kind == "ports"
            && L2_RULE_IDS
                .iter()
                .any(|(k, w, _)| *k == "ports" && *w == word));
    if !known {
        return None;
    }
    Some(Prefix {
        profile: profile.to_owned(),
        rule: rule.to_owned(),
        verdict: verdict.to_owned(),
    })
}

/// `rules` (some blocking, some not) with every blocking rule split into
/// its suppressing and logging twins (see the module docs).
pub(super) fn tap(
    profile: &ProfileName,
    kind: &str,
    word: &str,
    rules: Vec<RulePlan>,
) -> Vec<RulePlan> {
    let meter = if arrives_on_bridge(kind, word) {
        SHARED_METER.to_owned()
    } else {
        meter_set(profile)
    };
    tap_with(&rule_id(profile, kind, word), &meter, rules)
}

/// Like [`tap`] for a rule of the inet table's shared `chain` (see the
/// module docs): id `<chain>/<word>`, budget [`SHARED_METER`], the twins
/// ending in the profile's sinks, then a drop of what no sink took.
/// Every blocking rule must drop (a shared chain's sinks drop).
pub(super) fn tap_shared(chain: &str, word: &str, rules: Vec<RulePlan>) -> Vec<RulePlan> {
    let id = format!("{chain}/{word}");
    let sink = |map: &str| Verdict::Vmap {
        field: MapField::IifName,
        map: map.to_owned(),
    };
    let mut out = Vec::with_capacity(rules.len() * 3);
    for r in rules {
        if r.verdict.class() != VerdictClass::Blocked {
            out.push(r);
            continue;
        }
        debug_assert_eq!(r.verdict, Verdict::Drop, "{id}: a shared block drops");
        let mut over = r.matches.clone();
        over.push(budget_match(SHARED_METER));
        out.push(RulePlan::counted(over, sink(vmap::SUPPRESSED_BY_IIF)));
        out.push(RulePlan {
            log: Some(LogTap {
                prefix: prefix(&id, &r.verdict),
                group: GROUP,
                snaplen: SNAPLEN,
            }),
            ..RulePlan::counted(r.matches.clone(), sink(vmap::BLOCKED_BY_IIF))
        });
        out.push(r);
    }
    out
}

fn budget_match(meter: &str) -> Match {
    Match::Meter {
        set: meter.to_owned(),
        fields: vec![Field::IifName],
        limit: Limit::RateOver {
            per_second: RATE,
            burst: BURST,
        },
    }
}

/// Like [`tap`] for a rule of `table bridge corral`'s shared `chain`: id
/// `l2-<chain>/<word>`, budget [`L2_METER`] (one bucket per port).
pub(super) fn tap_l2(chain: &str, word: &str, rules: Vec<RulePlan>) -> Vec<RulePlan> {
    tap_with(&format!("{L2_PREFIX}{chain}/{word}"), L2_METER, rules)
}

/// The bridge table's meter of log tokens (per port).
pub(super) fn l2_meter_plan() -> KeyedSetPlan {
    KeyedSetPlan::new(
        L2_METER,
        vec![KeyPart::IfName],
        KeyedKind::Meter {
            timeout: Some(METER_TIMEOUT),
            size: super::keyed::METER_SIZE,
        },
    )
}

fn tap_with(id: &str, meter: &str, rules: Vec<RulePlan>) -> Vec<RulePlan> {
    let id = id.to_owned();
    let mut out = Vec::with_capacity(rules.len() * 2);
    for r in rules {
        if r.verdict.class() != VerdictClass::Blocked {
            out.push(r);
            continue;
        }
        let mut over = r.matches.clone();
        over.push(budget_match(meter));
        out.push(RulePlan::counted(over, r.verdict.clone()));
        let log = LogTap {
            prefix: prefix(&id, &r.verdict),
            group: GROUP,
            snaplen: SNAPLEN,
        };
        out.push(RulePlan {
            log: Some(log),
            ..r
        });
    }
    out
}

/// Whether `rule` is the suppressing twin of a logged rule (it takes a
/// token of a drop-log meter): in a profile's chain its counter is part of
/// that profile's suppressed count; a shared chain's twin counts in the
/// profile's [`super::names::suppressed_chain`] instead.
pub fn is_suppressor(rule: &RulePlan) -> bool {
    rule.matches.iter().any(|m| match m {
        Match::Meter { set, .. } => {
            set.ends_with(METER_SUFFIX) || set == SHARED_METER || set == L2_METER
        }
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::test_support::sample_plan;

    #[test]
    fn prefixes_round_trip_and_fit() {
        let long = ProfileName::new("a".repeat(63)).unwrap();
        for (kind, word, _) in RULE_IDS {
            let id = rule_id(&long, kind, word);
            for v in [
                Verdict::Drop,
                Verdict::Reject(crate::plan::RejectKind::TcpReset),
            ] {
                let p = prefix(&id, &v);
                assert!(p.len() <= PREFIX_MAX, "{p} is {} bytes", p.len());
                let parsed = parse_prefix(&p).unwrap();
                assert_eq!(parsed.profile, long.as_str());
                assert_eq!(parsed.rule, id);
            }
        }
        let dashed = ProfileName::new("my-dev").unwrap();
        let p = parse_prefix(&prefix(
            &rule_id(&dashed, "out", "unlisted"),
            &Verdict::Drop,
        ))
        .unwrap();
        assert_eq!(
            (p.profile.as_str(), p.rule.as_str()),
            ("my-dev", "my-dev-out/unlisted")
        );
        for (chain, word, _) in SHARED_RULE_IDS {
            let p = parse_prefix(&prefix(&format!("{chain}/{word}"), &Verdict::Drop)).unwrap();
            assert_eq!(p.profile, "", "a shared rule names no profile");
            assert_eq!(p.rule, format!("{chain}/{word}"));
        }
        assert_eq!(parse_prefix("shared_guard/unlisted:drop"), None);
        assert_eq!(parse_prefix("IN=eth0 OUT="), None);
        assert_eq!(parse_prefix("dev-out/nothing:drop"), None);
    }

    #[test]
    fn every_block_of_a_profile_chain_is_logged_and_twinned() {
        let plan = sample_plan();
        let mut ids = std::collections::BTreeSet::new();
        for c in plan.inet.chains.iter().filter(|c| c.profile.is_some()) {
            let profile = c.profile.as_deref().unwrap();
            if crate::plan::names::is_sink(&c.name) {
                // Reached only from a shared chain's twins (the next test).
                assert!(c.rules.iter().all(|r| r.log.is_none() && !is_suppressor(r)));
                continue;
            }
            for (i, r) in c.rules.iter().enumerate() {
                if r.verdict.class() != VerdictClass::Blocked {
                    assert!(r.log.is_none());
                    continue;
                }
                if is_suppressor(r) {
                    assert!(r.log.is_none(), "{}: {r:?}", c.name);
                    let logged = &c.rules[i + 1];
                    assert_eq!(logged.verdict, r.verdict);
                    assert_eq!(logged.matches[..], r.matches[..r.matches.len() - 1]);
                    let tap = logged.log.as_ref().expect("the twin logs");
                    let p = parse_prefix(&tap.prefix).unwrap();
                    assert_eq!(p.profile, profile);
                    ids.insert(p.rule);
                } else {
                    assert!(r.log.is_some(), "{}: unlogged block {r:?}", c.name);
                    assert!(i > 0 && is_suppressor(&c.rules[i - 1]));
                }
            }
        }
        assert!(ids.contains("dev-out/unlisted"), "{ids:?}");
        assert!(ids.contains("dev-guard/forged-source"), "{ids:?}");
    }

    /// A shared chain's block: the suppressing twin to the profile's
    /// suppressed sink, the logging twin (naming the rule, no profile) to
    /// its blocked sink, then the plain drop of what no sink took.
    #[test]
    fn every_block_of_a_shared_chain_is_logged_and_ends_in_a_sink() {
        use crate::plan::vmap::{BLOCKED_BY_IIF, SUPPRESSED_BY_IIF};
        let plan = sample_plan();
        let shared = plan
            .inet
            .chains
            .iter()
            .find(|c| c.name == crate::plan::names::SHARED_GUARD)
            .expect("the shared guard");
        let to = |r: &RulePlan| match &r.verdict {
            Verdict::Vmap { map, .. } => Some(map.clone()),
            _ => None,
        };
        let mut ids = std::collections::BTreeSet::new();
        let mut blocks = 0;
        for (i, r) in shared.rules.iter().enumerate() {
            if r.verdict != Verdict::Drop {
                continue;
            }
            blocks += 1;
            assert!(r.log.is_none() && !is_suppressor(r), "{r:?}");
            let (over, logged) = (&shared.rules[i - 2], &shared.rules[i - 1]);
            assert!(is_suppressor(over) && over.log.is_none());
            assert_eq!(over.matches[..over.matches.len() - 1], r.matches[..]);
            assert_eq!(to(over).as_deref(), Some(SUPPRESSED_BY_IIF));
            assert_eq!(logged.matches, r.matches);
            assert_eq!(to(logged).as_deref(), Some(BLOCKED_BY_IIF));
            let p = parse_prefix(&logged.log.as_ref().expect("logs").prefix).unwrap();
            assert_eq!(p.profile, "");
            ids.insert(p.rule);
        }
        assert_eq!(blocks, 5, "{:#?}", shared.rules);
        assert_eq!(ids.len(), SHARED_RULE_IDS.len(), "{ids:?}");
        // Every profile has both sinks in the maps the twins look up.
        for m in [BLOCKED_BY_IIF, SUPPRESSED_BY_IIF] {
            let map = plan.inet.maps.iter().find(|x| x.name == m).unwrap();
            for b in &plan.bridges {
                let sink = map.chain_for_name(b.name.as_str()).unwrap();
                assert!(sink.starts_with(b.profile.as_str()) && crate::plan::names::is_sink(sink));
            }
        }
    }

    #[test]
    fn ids_are_stable_across_builds() {
        let ids = |p: &crate::plan::HostPlan| -> Vec<String> {
            p.inet
                .chains
                .iter()
                .flat_map(|c| &c.rules)
                .filter_map(|r| r.log.as_ref().map(|l| l.prefix.clone()))
                .collect()
        };
        assert_eq!(ids(&sample_plan()), ids(&sample_plan()));
    }
}
