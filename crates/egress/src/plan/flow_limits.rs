//! What keeps one sandbox from filling the host's conntrack table: the
//! table is one for the host and every sandbox (`nf_conntrack_max`), and
//! once it is full new connections fail host-wide.
//!
//! - No loose pickup (`shared_guard`): a TCP packet from a sandbox that is
//!   not a plain SYN yet is `ct state new` (the kernel's
//!   `nf_conntrack_tcp_loose` picks up mid-stream flows) is dropped, so a
//!   bare ACK towards a destination that answers never becomes an assured
//!   entry with the 5-day established timeout. Dropped in prerouting, the
//!   entry is never confirmed.
//! - Per source (`<p>-out`, new flows only): more than
//!   `max_flows_per_source` tracked flows (`ct count` in a per-profile
//!   meter keyed by source address, as nftables counts them: flows still
//!   in the table) or more than `new_flows_per_second` new flows a second
//!   (twice that at once; a rate meter keyed by source) jump to
//!   `<p>-flowcap` / `<p>-flowrate`, which block by the profile's block
//!   action. A sandbox's source address is bound to its
//!   port (L2 bindings), so the key is the sandbox.
//!
//! Established packets never reach these rules (the own-flow accepts come
//! first, [`super::owner`]), so a sandbox at its limit keeps its open
//! flows and its siblings, other profiles and the host keep theirs.

use std::time::Duration;

use corral_sandbox_core::{EgressMode, Profile};

use super::keyed::{Field, KeyPart, KeyedKind, KeyedSetPlan, Limit, PROFILE_SOURCE_KEYS};
use super::model::{AddrFamily, ChainPlan, Match, RulePlan, Verdict};

/// How long the rate meter remembers a source that started nothing.
const RATE_TIMEOUT: Duration = Duration::from_secs(60);

fn digit(f: AddrFamily) -> char {
    match f {
        AddrFamily::V4 => '4',
        AddrFamily::V6 => '6',
    }
}

/// The meter of a profile's tracked flows per source.
pub fn count_set(p: &Profile, f: AddrFamily) -> String {
    format!("{}-flows{}", p.name, digit(f))
}

/// The meter of a profile's new flows per second per source.
pub fn rate_set(p: &Profile, f: AddrFamily) -> String {
    format!("{}-newflows{}", p.name, digit(f))
}

fn part(f: AddrFamily) -> KeyPart {
    match f {
        AddrFamily::V4 => KeyPart::Ipv4,
        AddrFamily::V6 => KeyPart::Ipv6,
    }
}

/// A `none` profile starts no flow through `<p>-out` (everything new is
/// blocked there): it needs no per-source limits.
fn starts_flows(p: &Profile) -> bool {
    p.mode != EgressMode::None
}

/// The profile's meters, two per family.
pub(super) fn sets(p: &Profile) -> Vec<KeyedSetPlan> {
    let mut v = Vec::new();
    if !starts_flows(p) {
        return v;
    }
    for f in super::build::families(p) {
        v.push(KeyedSetPlan::new(
            &count_set(p, f),
            vec![part(f)],
            KeyedKind::Meter {
                timeout: None,
                size: PROFILE_SOURCE_KEYS,
            },
        ));
        v.push(KeyedSetPlan::new(
            &rate_set(p, f),
            vec![part(f)],
            KeyedKind::Meter {
                timeout: Some(RATE_TIMEOUT),
                size: PROFILE_SOURCE_KEYS,
            },
        ));
    }
    v
}

/// The shared guard's rule against loose TCP pickup (the same for every
/// profile). `ct state new` comes first: every packet from a sandbox
/// meets this rule and its drop-log twins, and an established TCP segment
/// (not a plain SYN) would otherwise load and mask the TCP flags in each
/// before the state test fails.
pub(super) fn guard_rule() -> RulePlan {
    RulePlan::counted(vec![Match::CtNew, Match::TcpNotSyn], Verdict::Drop)
}

/// The chain a new flow over the per-source cap jumps to.
pub fn cap_chain(p: &Profile) -> String {
    format!("{}-flowcap", p.name)
}

/// The chain a new flow over the per-source rate jumps to.
pub fn rate_chain(p: &Profile) -> String {
    format!("{}-flowrate", p.name)
}

/// `<p>-out`, after the own-flow accepts: the per-source count and rate,
/// each one lookup that jumps to its blocking chain. One lookup per packet
/// matters: every `ct count` evaluation adds the packet's flow to the
/// source's list again (the kernel does not tell a flow it has not
/// confirmed yet from a new one), and every `limit` evaluation takes a
/// token, so the block action's rule pair and the drop log's twins, each
/// repeating the meter, would count a flow four times.
pub(super) fn out_rules(p: &Profile) -> Vec<RulePlan> {
    let mut rules = Vec::new();
    if !starts_flows(p) {
        return rules;
    }
    for f in super::build::families(p) {
        let count = Match::Meter {
            set: count_set(p, f),
            fields: vec![Field::IpSaddr(f)],
            limit: Limit::CountOver(p.flows.max_per_source),
        };
        rules.push(RulePlan::counted(
            vec![Match::CtNew, count],
            Verdict::Jump(cap_chain(p)),
        ));
        let rate = Match::Meter {
            set: rate_set(p, f),
            fields: vec![Field::IpSaddr(f)],
            limit: Limit::RateOver {
                per_second: u64::from(p.flows.new_per_second),
                burst: p.flows.new_per_second.saturating_mul(2),
            },
        };
        rules.push(RulePlan::counted(
            vec![Match::CtNew, rate],
            Verdict::Jump(rate_chain(p)),
        ));
    }
    rules
}

/// The two blocking chains (the profile's block action, logged as
/// `<p>-out/flow-cap` and `<p>-out/flow-rate`).
pub(super) fn chains(p: &Profile) -> Vec<ChainPlan> {
    if !starts_flows(p) {
        return Vec::new();
    }
    [(cap_chain(p), "flow-cap"), (rate_chain(p), "flow-rate")]
        .into_iter()
        .map(|(name, word)| {
            let rules =
                super::droplog::tap(&p.name, "out", word, super::build::block(vec![], p.block));
            super::build::chain(&name, p, rules)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::test_support::dev_profile;

    #[test]
    fn established_packets_fail_the_loose_pickup_drop_at_its_first_match() {
        let rules: Vec<RulePlan> = super::super::guard::shared_guard_rules()
            .into_iter()
            .filter(|r| r.matches.contains(&Match::TcpNotSyn))
            .collect();
        assert_eq!(rules.len(), 3, "the rule, its two twins: {rules:?}");
        for r in &rules {
            assert_eq!(r.matches.first(), Some(&Match::CtNew), "{r:?}");
            assert!(r.matches.contains(&Match::TcpNotSyn));
        }
    }

    #[test]
    fn limits_come_from_the_profile_and_apply_to_new_flows_only() {
        let mut p = dev_profile();
        p.flows.max_per_source = 7;
        p.flows.new_per_second = 3;
        let rules = out_rules(&p);
        assert!(!rules.is_empty());
        for r in &rules {
            assert!(r.matches.contains(&Match::CtNew));
            // One meter per rule, and the rule only jumps: the meter is
            // evaluated once per packet.
            let meters = r
                .matches
                .iter()
                .filter(|m| matches!(m, Match::Meter { .. }))
                .count();
            assert_eq!(meters, 1);
            assert!(matches!(r.verdict, Verdict::Jump(_)));
        }
        for c in chains(&p) {
            assert!(c.rules.iter().all(|r| {
                r.verdict.class() == super::super::VerdictClass::Blocked
                    && !r
                        .matches
                        .iter()
                        .any(|m| matches!(m, Match::Meter { set, .. } if set.contains("flows")))
            }));
        }
        let limits: Vec<Limit> = rules
            .iter()
            .flat_map(|r| &r.matches)
            .filter_map(|m| match m {
                Match::Meter { set, limit, .. } if !set.ends_with("-droplog") => Some(*limit),
                _ => None,
            })
            .collect();
        assert!(limits.contains(&Limit::CountOver(7)));
        assert!(limits.contains(&Limit::RateOver {
            per_second: 3,
            burst: 6
        }));
    }
}
