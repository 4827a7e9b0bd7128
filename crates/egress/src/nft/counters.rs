//! Per-profile accepted/blocked counters from a live read-back, for
//! `corral host status`.

use serde::Serialize;

use super::readback::LiveState;
use crate::plan::{HostPlan, VerdictClass, droplog};

/// Packets and bytes a profile's rules accepted and blocked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProfileCounters {
    /// Profile name.
    pub profile: String,
    /// Packets accepted by the profile's rules.
    pub accepted_packets: u64,
    /// Bytes accepted.
    pub accepted_bytes: u64,
    /// Packets dropped or rejected by the profile's rules.
    pub blocked_packets: u64,
    /// Bytes dropped or rejected.
    pub blocked_bytes: u64,
    /// Blocked packets (of `blocked_packets`) the profile's log budget
    /// kept out of the drop log ([`crate::plan::droplog`]).
    pub suppressed_packets: u64,
}

/// Sum the live counters of every profile chain of `plan` (both tables),
/// by the verdict of each rule. Profiles appear in plan order; a profile
/// whose chains are missing shows zeros (drift reports the absence).
pub fn profile_counters(plan: &HostPlan, live: &LiveState) -> Vec<ProfileCounters> {
    let mut out: Vec<ProfileCounters> = plan
        .bridges
        .iter()
        .map(|b| ProfileCounters {
            profile: b.profile.to_string(),
            ..ProfileCounters::default()
        })
        .collect();
    for t in plan.tables() {
        let Some(lt) = live.table(t.family) else {
            continue;
        };
        for c in &t.chains {
            if let Some(lc) = lt.chain(&c.name) {
                count_suppressed(t.family, c, lc, &mut out);
            }
            let (Some(profile), Some(lc)) = (&c.profile, lt.chain(&c.name)) else {
                continue;
            };
            let Some(acc) = out.iter_mut().find(|p| &p.profile == profile) else {
                continue;
            };
            for r in &lc.rules {
                match r.class {
                    VerdictClass::Accepted => {
                        acc.accepted_packets += r.packets;
                        acc.accepted_bytes += r.bytes;
                    }
                    VerdictClass::Blocked => {
                        acc.blocked_packets += r.packets;
                        acc.blocked_bytes += r.bytes;
                    }
                    VerdictClass::Other => {}
                }
            }
        }
    }
    out
}

/// Add the counters of `live`'s rules that are the suppressing twins of
/// `chain`'s logged rules to their profiles (found by their text, so an
/// inserted foreign rule shifts nothing).
fn count_suppressed(
    family: crate::plan::TableFamily,
    chain: &crate::plan::ChainPlan,
    live: &super::readback::LiveChain,
    out: &mut [ProfileCounters],
) {
    let mut twins: Vec<(String, &str)> = Vec::new();
    for r in &chain.rules {
        let Some(profile) = droplog::suppressor_profile(r) else {
            continue;
        };
        if let Ok(text) = super::fingerprint(family, &chain.name, r) {
            twins.push((text, profile));
        }
    }
    if twins.is_empty() {
        return;
    }
    for r in &live.rules {
        let Some((_, profile)) = twins.iter().find(|(t, _)| *t == r.text) else {
            continue;
        };
        if let Some(acc) = out.iter_mut().find(|p| p.profile == *profile) {
            acc.suppressed_packets += r.packets;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nft::readback::{LiveChain, LiveRule, LiveTable};
    use crate::plan::TableFamily;
    use crate::plan::test_support::sample_plan;

    fn rule(class: VerdictClass, packets: u64) -> LiveRule {
        LiveRule {
            handle: 1,
            text: String::new(),
            packets,
            bytes: packets * 100,
            class,
        }
    }

    #[test]
    fn sums_by_profile_and_verdict() {
        let plan = sample_plan();
        let live = LiveState {
            tables: vec![LiveTable {
                flags: 0,
                family: TableFamily::Inet,
                sets: vec![],
                chains: vec![
                    LiveChain {
                        name: "dev-out".to_owned(),
                        base: None,
                        rules: vec![
                            rule(VerdictClass::Accepted, 3),
                            rule(VerdictClass::Blocked, 2),
                            rule(VerdictClass::Other, 50),
                        ],
                    },
                    LiveChain {
                        name: "dev-host".to_owned(),
                        base: None,
                        rules: vec![rule(VerdictClass::Blocked, 1)],
                    },
                    LiveChain {
                        name: "forward".to_owned(),
                        base: None,
                        rules: vec![rule(VerdictClass::Blocked, 1000)],
                    },
                ],
            }],
        };
        let c = profile_counters(&plan, &live);
        assert_eq!(c.len(), 3);
        assert_eq!(
            (
                c[0].accepted_packets,
                c[0].blocked_packets,
                c[0].blocked_bytes
            ),
            (3, 3, 300)
        );
        assert_eq!(c[1].accepted_packets + c[1].blocked_packets, 0);
    }

    #[test]
    fn suppressed_counts_come_from_the_over_limit_twins() {
        let plan = sample_plan();
        let chain = plan
            .inet
            .chains
            .iter()
            .find(|c| c.name == "dev-out")
            .unwrap();
        let rules = chain
            .rules
            .iter()
            .map(|r| LiveRule {
                text: crate::nft::fingerprint(TableFamily::Inet, "dev-out", r).unwrap(),
                ..rule(r.verdict.class(), 5)
            })
            .collect::<Vec<_>>();
        let twins = chain
            .rules
            .iter()
            .filter(|r| droplog::suppressor_profile(r).is_some())
            .count() as u64;
        assert!(twins > 0);
        let live = LiveState {
            tables: vec![LiveTable {
                flags: 0,
                family: TableFamily::Inet,
                sets: vec![],
                chains: vec![LiveChain {
                    name: "dev-out".to_owned(),
                    base: None,
                    rules,
                }],
            }],
        };
        let c = profile_counters(&plan, &live);
        assert_eq!(c[0].suppressed_packets, 5 * twins);
        assert!(c[0].blocked_packets >= c[0].suppressed_packets);
    }
}
