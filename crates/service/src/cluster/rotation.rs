//! Which members may take profiled work, which are drained and why.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use corral_provider_incus::ClusterMember;
use corral_sandbox_core::platform::Classification;
use serde::Serialize;

use super::Attestation;

/// Where a member stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Takes profiled work; its last attestation passed at this time.
    InRotation {
        /// When.
        attested_at: SystemTime,
    },
    /// Takes no new work.
    Drained {
        /// Why, in words.
        reason: String,
        /// Since when.
        since: SystemTime,
    },
}

/// A change of standing, for the event log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// No new placements on `member`.
    Drained {
        /// The member.
        member: String,
        /// Why.
        reason: String,
    },
    /// `member` is back in rotation.
    Restored {
        /// The member.
        member: String,
    },
}

/// Every member's standing. A member never attested is drained.
#[derive(Debug, Clone)]
pub struct Rotation {
    interval: Duration,
    members: BTreeMap<String, Standing>,
}

impl Rotation {
    /// An empty rotation whose attestations hold for `interval`.
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            members: BTreeMap::new(),
        }
    }

    /// A rotation whose attestations hold for `interval`, with `members`
    /// standing as given (what the controller persisted, read back).
    pub fn with_standings(
        interval: Duration,
        members: impl IntoIterator<Item = (String, Standing)>,
    ) -> Self {
        Self {
            interval,
            members: members.into_iter().collect(),
        }
    }

    /// How long an attestation holds.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Every observed member and its standing, by name.
    pub fn standings(&self) -> impl Iterator<Item = (&str, &Standing)> {
        self.members.iter().map(|(m, s)| (m.as_str(), s))
    }

    /// `member`'s standing (`None`: never observed, which counts as drained).
    pub fn standing(&self, member: &str) -> Option<&Standing> {
        self.members.get(member)
    }

    /// Record what asking `member` for its attestation gave at `now`: an
    /// attestation, or why there was none (no answer, read-back error).
    pub fn observe(
        &mut self,
        member: &str,
        outcome: Result<&Attestation, &str>,
        now: SystemTime,
    ) -> Option<Change> {
        let failed = match outcome {
            Ok(a) => {
                let why = a.failures();
                (!why.is_empty()).then(|| format!("attestation failed: {}", why.join("; ")))
            }
            Err(e) => Some(format!("no attestation: {e}")),
        };
        match failed {
            None => self.restore(member, now),
            Some(reason) => self.drain(member, reason, now),
        }
    }

    /// Drain every member whose last passing attestation is older than the
    /// interval at `now`.
    pub fn expire(&mut self, now: SystemTime) -> Vec<Change> {
        let stale: Vec<(String, Duration)> = self
            .members
            .iter()
            .filter_map(|(m, s)| match s {
                Standing::InRotation { attested_at } => {
                    let age = now.duration_since(*attested_at).unwrap_or_default();
                    (age > self.interval).then(|| (m.clone(), age))
                }
                Standing::Drained { .. } => None,
            })
            .collect();
        stale
            .into_iter()
            .filter_map(|(m, age)| {
                let reason = format!(
                    "no attestation for {} s (interval {} s)",
                    age.as_secs(),
                    self.interval.as_secs()
                );
                self.drain(&m, reason, now)
            })
            .collect()
    }

    fn drain(&mut self, member: &str, reason: String, now: SystemTime) -> Option<Change> {
        let was_drained = matches!(self.members.get(member), Some(Standing::Drained { .. }));
        let since = match self.members.get(member) {
            Some(Standing::Drained { since, .. }) => *since,
            _ => now,
        };
        self.members.insert(
            member.to_owned(),
            Standing::Drained {
                reason: reason.clone(),
                since,
            },
        );
        (!was_drained).then(|| Change::Drained {
            member: member.to_owned(),
            reason,
        })
    }

    fn restore(&mut self, member: &str, now: SystemTime) -> Option<Change> {
        let was_in = matches!(self.members.get(member), Some(Standing::InRotation { .. }));
        self.members
            .insert(member.to_owned(), Standing::InRotation { attested_at: now });
        (!was_in).then(|| Change::Restored {
            member: member.to_owned(),
        })
    }

    /// Work on `member` in the trust order, given how this host classifies
    /// its kind (`local`): enforced (at the attested-member site) exactly
    /// while [`Rotation::choose`] would place there, else not enforced.
    pub fn classify(
        &self,
        incus: &[ClusterMember],
        member: &str,
        local: Classification,
        now: SystemTime,
    ) -> Classification {
        local.on_member(self.choose(incus, Some(member), now).is_ok())
    }

    /// The member profiled work goes to: `target` when it may take it,
    /// else (no target) the first member Incus reports online that is in
    /// rotation with an attestation younger than the interval at `now`.
    /// The error says why no member fits.
    pub fn choose(
        &self,
        incus: &[ClusterMember],
        target: Option<&str>,
        now: SystemTime,
    ) -> Result<String, String> {
        let why_not = |m: &ClusterMember| -> Option<String> {
            if !m.takes_work() {
                let status = m.status.to_lowercase();
                return Some(if status == "evacuated" {
                    format!(
                        "Incus reports it evacuated (`incus cluster restore {}` brings it back)",
                        m.name
                    )
                } else {
                    format!("Incus reports it {status}")
                });
            }
            match self.members.get(&m.name) {
                None => Some("never attested".to_owned()),
                Some(Standing::Drained { reason, .. }) => Some(format!("drained: {reason}")),
                Some(Standing::InRotation { attested_at }) => {
                    let age = now.duration_since(*attested_at).unwrap_or_default();
                    (age > self.interval).then(|| format!("attestation {} s old", age.as_secs()))
                }
            }
        };
        let candidates: Vec<&ClusterMember> = match target {
            Some(t) => {
                let m = incus
                    .iter()
                    .find(|m| m.name == t)
                    .ok_or_else(|| format!("`{t}` is not a cluster member"))?;
                vec![m]
            }
            None => incus.iter().collect(),
        };
        let mut refused = Vec::new();
        for m in candidates {
            match why_not(m) {
                None => return Ok(m.name.clone()),
                Some(why) => refused.push(format!("{}: {why}", m.name)),
            }
        }
        Err(match target {
            Some(_) => format!(
                "cluster member {} (profiled work goes only to members in rotation)",
                refused.join("; ")
            ),
            None => format!(
                "no cluster member may take profiled work ({})",
                refused.join("; ")
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use corral_sandbox_core::{Enforcement, EnforcementSite};
    use proptest::prelude::*;

    use super::*;

    const ENFORCED_HERE: Classification = Classification {
        enforcement: Enforcement::Enforced,
        site: Some(EnforcementSite::ThisHost),
    };

    proptest! {
        /// Whatever happened (attestations passing, failing, missing,
        /// time passing, Incus statuses): a member ranks as enforced
        /// exactly when it may take profiled work, and a member chosen
        /// without a target is always one that ranks as enforced.
        #[test]
        fn profiled_work_lands_only_where_the_trust_order_says_enforced(
            steps in prop::collection::vec((0usize..3, 0u8..4, 0u64..15), 1..40),
            statuses in prop::collection::vec(
                prop::sample::select(vec!["Online", "Offline", "Evacuated"]), 3),
        ) {
            let names = ["m1", "m2", "m3"];
            let incus: Vec<ClusterMember> = names
                .iter()
                .zip(&statuses)
                .map(|(n, s)| member(n, s))
                .collect();
            let mut r = Rotation::new(Duration::from_secs(10));
            let mut now = T0;
            for (who, op, dt) in steps {
                now += Duration::from_secs(dt);
                let m = names[who];
                match op {
                    0 => { r.observe(m, Ok(&attestation(m, &[])), now); }
                    1 => { r.observe(m, Ok(&attestation(m, &["drift"])), now); }
                    2 => { r.observe(m, Err("no answer"), now); }
                    _ => { r.expire(now); }
                }
                for m in names {
                    let c = r.classify(&incus, m, ENFORCED_HERE, now);
                    let placeable = r.choose(&incus, Some(m), now).is_ok();
                    prop_assert_eq!(c.enforcement == Enforcement::Enforced, placeable);
                    if placeable {
                        prop_assert_eq!(c.site, Some(EnforcementSite::AttestedMember));
                    } else {
                        prop_assert_eq!(c, Classification::NONE);
                    }
                }
                if let Ok(m) = r.choose(&incus, None, now) {
                    prop_assert_eq!(
                        r.classify(&incus, &m, ENFORCED_HERE, now).enforcement,
                        Enforcement::Enforced
                    );
                }
            }
        }
    }

    fn member(name: &str, status: &str) -> ClusterMember {
        ClusterMember {
            name: name.into(),
            url: String::new(),
            status: status.into(),
            message: String::new(),
            roles: Vec::new(),
        }
    }

    fn attestation(member: &str, drift: &[&str]) -> Attestation {
        Attestation {
            member: member.into(),
            taken_at: SystemTime::UNIX_EPOCH,
            config_matches: true,
            drift: drift.iter().map(|d| (*d).to_owned()).collect(),
            gateways_down: Vec::new(),
        }
    }

    const T0: SystemTime = SystemTime::UNIX_EPOCH;

    fn at(secs: u64) -> SystemTime {
        T0 + Duration::from_secs(secs)
    }

    #[test]
    fn an_unattested_member_takes_no_work() {
        let r = Rotation::new(Duration::from_secs(10));
        let ms = [member("m1", "Online")];
        let e = r.choose(&ms, None, at(0)).unwrap_err();
        assert!(e.contains("m1: never attested"), "{e}");
    }

    #[test]
    fn drift_drains_and_a_passing_attestation_restores_once_each() {
        let mut r = Rotation::new(Duration::from_secs(10));
        let ms = [member("m1", "Online"), member("m2", "Online")];
        assert_eq!(
            r.observe("m1", Ok(&attestation("m1", &[])), at(0)),
            Some(Change::Restored {
                member: "m1".into()
            })
        );
        r.observe("m2", Ok(&attestation("m2", &[])), at(0));
        assert_eq!(r.choose(&ms, Some("m2"), at(1)).unwrap(), "m2");

        let change = r.observe(
            "m2",
            Ok(&attestation("m2", &["table inet corral missing"])),
            at(2),
        );
        assert!(
            matches!(&change, Some(Change::Drained { member, reason }) if member == "m2" && reason.contains("table inet corral missing")),
            "{change:?}"
        );
        // Still failing: no second event.
        assert_eq!(r.observe("m2", Err("no answer"), at(3)), None);
        let e = r.choose(&ms, Some("m2"), at(3)).unwrap_err();
        assert!(e.contains("m2: drained"), "{e}");
        assert_eq!(r.choose(&ms, None, at(3)).unwrap(), "m1");

        assert_eq!(
            r.observe("m2", Ok(&attestation("m2", &[])), at(4)),
            Some(Change::Restored {
                member: "m2".into()
            })
        );
        assert_eq!(r.choose(&ms, Some("m2"), at(4)).unwrap(), "m2");
    }

    #[test]
    fn a_member_that_stops_answering_is_drained_after_one_interval() {
        let mut r = Rotation::new(Duration::from_secs(10));
        let ms = [member("m1", "Online")];
        r.observe("m1", Ok(&attestation("m1", &[])), at(0));
        assert!(r.expire(at(10)).is_empty());
        // Before expire runs, choose already refuses a stale attestation.
        assert!(
            r.choose(&ms, None, at(11))
                .unwrap_err()
                .contains("11 s old")
        );
        let changes = r.expire(at(11));
        assert!(
            matches!(&changes[..], [Change::Drained { member, reason }] if member == "m1" && reason.contains("no attestation for 11 s")),
            "{changes:?}"
        );
    }

    #[test]
    fn incus_offline_or_evacuated_wins_over_a_good_attestation() {
        let mut r = Rotation::new(Duration::from_secs(10));
        r.observe("m1", Ok(&attestation("m1", &[])), at(0));
        let e = r
            .choose(&[member("m1", "Offline")], None, at(1))
            .unwrap_err();
        assert!(e.contains("Incus reports it offline"), "{e}");
        let e = r
            .choose(&[member("m1", "Evacuated")], Some("m1"), at(1))
            .unwrap_err();
        assert!(
            e.contains("evacuated") && e.contains("incus cluster restore m1"),
            "{e}"
        );
    }

    #[test]
    fn a_different_configuration_or_a_dead_gateway_fails_the_attestation() {
        let mut a = attestation("m1", &[]);
        assert!(a.failures().is_empty());
        a.config_matches = false;
        a.gateways_down = vec!["corral-allow".into()];
        let why = a.failures().join("; ");
        assert!(
            why.contains("different configuration") && why.contains("corral-allow"),
            "{why}"
        );
    }
}
