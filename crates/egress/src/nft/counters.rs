//! Per-profile accepted/blocked counters from a live read-back, for
//! `corral host status`.

use serde::Serialize;

use super::readback::LiveState;
use crate::plan::{HostPlan, VerdictClass, droplog, names};

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
            let (Some(profile), Some(lc)) = (&c.profile, lt.chain(&c.name)) else {
                continue;
            };
            let Some(acc) = out.iter_mut().find(|p| &p.profile == profile) else {
                continue;
            };
            acc.suppressed_packets += suppressed(t.family, c, lc);
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

/// The packets of `live` (the live `chain`, a profile's) that the log
/// budget kept out of the drop log: its rules that are the suppressing
/// twins of `chain`'s logged rules (found by their text, so an inserted
/// foreign rule shifts nothing), or all of it when it is the profile's
/// suppressed sink, where the shared chains' suppressing twins end.
fn suppressed(
    family: crate::plan::TableFamily,
    chain: &crate::plan::ChainPlan,
    live: &super::readback::LiveChain,
) -> u64 {
    let sink = chain.name.ends_with(names::SUPPRESSED_SUFFIX);
    let twins: Vec<String> = chain
        .rules
        .iter()
        .filter(|r| sink || droplog::is_suppressor(r))
        .filter_map(|r| super::fingerprint(family, &chain.name, r).ok())
        .collect();
    live.rules
        .iter()
        .filter(|r| twins.contains(&r.text))
        .map(|r| r.packets)
        .sum()
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
            .filter(|r| droplog::is_suppressor(r))
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

    /// What the shared guard blocked for a profile ends in that profile's
    /// sinks: both count as blocked, the suppressed sink as suppressed
    /// too, and the shared chain's own counters count for nobody.
    #[test]
    fn the_shared_chains_blocks_count_in_their_profiles_sinks() {
        let plan = sample_plan();
        let live_chain = |name: &str, packets: u64| {
            let planned = plan.inet.chains.iter().find(|c| c.name == name).unwrap();
            LiveChain {
                name: name.to_owned(),
                base: None,
                rules: planned
                    .rules
                    .iter()
                    .map(|r| LiveRule {
                        text: crate::nft::fingerprint(TableFamily::Inet, name, r).unwrap(),
                        ..rule(r.verdict.class(), packets)
                    })
                    .collect(),
            }
        };
        let live = LiveState {
            tables: vec![LiveTable {
                flags: 0,
                family: TableFamily::Inet,
                sets: vec![],
                chains: vec![
                    live_chain("dev-blocked", 4),
                    live_chain("dev-suppressed", 3),
                    live_chain(crate::plan::names::SHARED_GUARD, 1000),
                ],
            }],
        };
        let c = profile_counters(&plan, &live);
        assert_eq!(c[0].profile, "dev");
        assert_eq!((c[0].blocked_packets, c[0].suppressed_packets), (7, 3));
        assert!(
            c[1..]
                .iter()
                .all(|p| p.blocked_packets == 0 && p.suppressed_packets == 0)
        );
    }
}
