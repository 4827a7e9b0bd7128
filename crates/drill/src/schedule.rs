//! What runs when: the drill's probes and attacks overlapped wherever
//! they share nothing, so a run waits about one timeout per step instead
//! of one per blocked probe or held attack.

use std::time::{Duration, Instant};

use crate::attack::l2::PlannedAttack;
use crate::attack::{self, AttackError, Outcome};
use crate::dns;
use crate::lab::{Lab, LabGateways, Observed, ProbeResult, probe_from};
use crate::{DrillRow, PlannedProbe};

/// Runs the attacks `which` (indices into `attacks`) at the same time,
/// except that the port-off-its-bridge attacks of one sandbox share one
/// detachment of its port (see [`attack::l3::launch_detached`]). Results
/// in the order of `which`.
pub(crate) fn run_attacks(
    lab: &Lab,
    attacks: &[attack::l3::Attack],
    which: &[usize],
    timeout: Duration,
) -> Vec<(Observed, u64)> {
    let ms = |start: Instant| u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    let mut out: Vec<Option<(Observed, u64)>> = vec![None; which.len()];
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        let mut detached: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
        for (slot, i) in which.iter().enumerate() {
            let a = &attacks[*i];
            if a.exclusive() {
                detached.entry(a.from).or_default().push(slot);
            } else {
                handles.push((
                    vec![slot],
                    scope.spawn(move || {
                        let start = Instant::now();
                        let o = attack::l3::launch(&lab.topo, a, timeout);
                        vec![(o, ms(start))]
                    }),
                ));
            }
        }
        for slots in detached.into_values() {
            let list: Vec<&attack::l3::Attack> =
                slots.iter().map(|s| &attacks[which[*s]]).collect();
            handles.push((
                slots,
                scope.spawn(move || {
                    let start = Instant::now();
                    let got = attack::l3::launch_detached(&lab.topo, &list, timeout);
                    let took = ms(start);
                    got.into_iter().map(|o| (o, took)).collect()
                }),
            ));
        }
        for (slots, h) in handles {
            let results = h.join().unwrap_or_else(|_| {
                vec![(Observed::Error("the attack thread panicked".to_owned()), 0); slots.len()]
            });
            for (s, r) in slots.into_iter().zip(results) {
                out[s] = Some(r);
            }
        }
    });
    out.into_iter()
        .map(|r| r.unwrap_or((Observed::Error("not run".to_owned()), 0)))
        .collect()
}

/// The enforced half of the drill: every probe and attack again, with
/// corral's rules, overlapped where they share nothing, so the drill
/// waits about one timeout per step rather than one per probe or attack:
/// 1. the probes and the attacks that leave the topology alone;
/// 2. the port-off-its-bridge attacks (one detachment per sandbox, the
///    sandboxes at once), while the gateways start;
/// 3. `checks` (read-back: every L3 attack done, no name answered yet);
/// 4. the DNS rows and the learned-set flood (which swaps rulesets for
///    its control), then the L2 attacks and the gateway capacity attacks
///    at the same time (the latter with controls of their own, the former
///    only ever dropping frames with the rules in force).
pub(crate) struct Enforced {
    pub(crate) probes: Vec<ProbeResult>,
    pub(crate) attacks: Vec<(Observed, u64)>,
    pub(crate) l2: Vec<Result<Outcome, AttackError>>,
    pub(crate) checks: Vec<DrillRow>,
    pub(crate) dns: Vec<DrillRow>,
}

impl Enforced {
    /// Runs the enforced half (see the type's docs).
    pub(crate) fn run(
        lab: &Lab,
        planned: &[PlannedProbe],
        attacks: &[attack::l3::Attack],
        l2_planned: &[PlannedAttack],
        timeout: Duration,
        checks: impl FnOnce() -> Vec<DrillRow>,
    ) -> Self {
        let (free, off): (Vec<usize>, Vec<usize>) =
            (0..attacks.len()).partition(|i| !attacks[*i].exclusive());
        let mut results: Vec<Option<(Observed, u64)>> = vec![None; attacks.len()];
        let mut keep = |idx: &[usize], r: Vec<(Observed, u64)>| {
            for (i, r) in idx.iter().zip(r) {
                results[*i] = Some(r);
            }
        };
        let (probes, got) = std::thread::scope(|s| {
            let probes = s.spawn(|| run_all(lab, planned, timeout));
            let got = run_attacks(lab, attacks, &free, timeout);
            (join_probes(probes, planned.len()), got)
        });
        keep(&free, got);
        let (gateways, got) = std::thread::scope(|s| {
            let gateways = s.spawn(|| LabGateways::start(lab));
            let got = run_attacks(lab, attacks, &off, timeout);
            (gateways.join(), got)
        });
        keep(&off, got);
        let checks = checks();
        let (dns, l2_results) = match gateways {
            Ok(Ok(g)) => {
                let mut dns = dns::profile_rows(lab, &g, timeout);
                // Alone: it swaps the ruleset for its control.
                dns.extend(attack::learned_flood::rows(lab, &g, timeout));
                let (l2_results, capacity) = std::thread::scope(|s| {
                    let capacity = s.spawn(|| {
                        // The same pair as the capacity rows: one after the other.
                        let mut rows = attack::gateway::rows(lab, &g, timeout);
                        rows.extend(attack::dhcp::rows(lab, &g, timeout));
                        rows
                    });
                    (l2(lab, l2_planned), capacity.join())
                });
                match capacity {
                    Ok(rows) => dns.extend(rows),
                    Err(_) => dns.push(dns::setup_error(
                        "the gateway capacity attacks panicked".to_owned(),
                    )),
                }
                (dns, l2_results)
            }
            Ok(Err(e)) => (vec![dns::setup_error(e.to_string())], l2(lab, l2_planned)),
            Err(_) => (
                vec![dns::setup_error(
                    "starting the gateways panicked".to_owned(),
                )],
                l2(lab, l2_planned),
            ),
        };
        Self {
            probes,
            attacks: results
                .into_iter()
                .map(|r| r.unwrap_or((Observed::Error("not run".to_owned()), 0)))
                .collect(),
            l2: l2_results,
            checks,
            dns,
        }
    }
}

fn join_probes(
    h: std::thread::ScopedJoinHandle<'_, Vec<ProbeResult>>,
    n: usize,
) -> Vec<ProbeResult> {
    h.join().unwrap_or_else(|_| {
        (0..n)
            .map(|_| ProbeResult {
                observed: Observed::Error("the probe thread panicked".to_owned()),
                ms: 0,
            })
            .collect()
    })
}

/// Runs every probe, in parallel (blocked probes under `drop` each wait for
/// the timeout; in parallel the drill takes about one timeout, not N).
pub(crate) fn run_all(lab: &Lab, planned: &[PlannedProbe], timeout: Duration) -> Vec<ProbeResult> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = planned
            .iter()
            .map(|p| {
                let ns = &lab.topo.sandboxes[p.from].ns;
                scope.spawn(move || probe_from(ns, &p.probe, timeout))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| ProbeResult {
                    observed: Observed::Error("the probe thread panicked".to_owned()),
                    ms: 0,
                })
            })
            .collect()
    })
}

/// Runs each planned attack once: stage by stage, independent lanes of a
/// stage at the same time (see [`PlannedAttack::stage`]), so the drill waits about one
/// watch window per stage and lane, not one per attack.
pub(crate) fn l2(lab: &Lab, planned: &[PlannedAttack]) -> Vec<Result<Outcome, AttackError>> {
    let mut out: Vec<Option<Result<Outcome, AttackError>>> = planned.iter().map(|_| None).collect();
    for stage in 1..=3 {
        let mut lanes: Vec<(Option<&'static str>, Vec<usize>)> = Vec::new();
        for (i, p) in planned.iter().enumerate() {
            let (s, lane) = p.stage();
            if s != stage {
                continue;
            }
            match lane.and_then(|l| lanes.iter_mut().find(|(k, _)| *k == Some(l))) {
                Some((_, v)) => v.push(i),
                None => lanes.push((lane, vec![i])),
            }
        }
        let results: Vec<(usize, Result<Outcome, AttackError>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = lanes
                .into_iter()
                .map(|(_, idx)| {
                    let mine = idx.clone();
                    let ran = scope.spawn(move || {
                        mine.iter()
                            .map(|i| (*i, attack::l2::run_one(lab, &planned[*i])))
                            .collect::<Vec<_>>()
                    });
                    (idx, ran)
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|(idx, h)| {
                    h.join().unwrap_or_else(|_| {
                        idx.iter()
                            .map(|i| {
                                (
                                    *i,
                                    Err(AttackError::Setup(
                                        "the attack thread panicked".to_owned(),
                                    )),
                                )
                            })
                            .collect()
                    })
                })
                .collect()
        });
        for (i, r) in results {
            out[i] = Some(r);
        }
    }
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Err(AttackError::Setup("not scheduled".to_owned()))))
        .collect()
}
