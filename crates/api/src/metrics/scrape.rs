//! The state families, read at each scrape: what the provider lists, what
//! the kernel holds against the plan, which gateways run, the gate's
//! verdicts and the cluster's standings. A source that cannot be read
//! sets its `corral_scrape_source_up` to 0 and leaves its families as
//! last read, so one slow or broken dependency never empties the scrape
//! (and is logged at debug only: a scrape a second would flood the log;
//! the gauge is what an alert reads).

use std::collections::BTreeMap;
use std::time::Instant;

use corral_egress::host::HostDrift;
use corral_service::cluster::persisted::{RotationFile, StandingName};
use corral_service::store::Verdict;

use super::families::{
    AREAS, AreaLabels, Families, MemberLabels, ProfileLabels, SandboxLabels, SourceLabels,
    StandingLabels, VERDICTS, VerdictCounterLabels, VerdictLabels,
};
use crate::state::AppState;

/// A serde unit variant's name (`running`, `container`): the words the
/// JSON answers use, so a label reads the same as `corral ls --json`.
fn word<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "unknown".to_owned(),
    }
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The drift area a difference belongs to ([`AREAS`]).
pub fn area(d: &HostDrift) -> &'static str {
    match d {
        HostDrift::Nft(n) if n.family.keyword() == "bridge" => "nft_bridge",
        HostDrift::Nft(_) => "nft_inet",
        HostDrift::Bridge { .. } | HostDrift::UnplannedBridge { .. } => "bridge",
        HostDrift::Sysctl(_) => "sysctl",
        HostDrift::HostNetworks { .. } | HostDrift::StraySource { .. } => "host",
        HostDrift::Port { .. } => "port",
    }
}

/// Each profile's (accepted, blocked) packets as the kernel counts them.
type ProfileCounters = Vec<(String, u64, u64)>;

/// What the blocking part of a scrape read.
struct HostRead {
    applied_at: Option<u64>,
    /// The drift, and each profile's (accepted, blocked) packet counters.
    drift: Result<(Vec<HostDrift>, ProfileCounters), String>,
    gateways: Vec<(String, bool)>,
    verdicts: Result<BTreeMap<&'static str, usize>, String>,
    rotation: Result<Option<RotationFile>, String>,
}

fn read_host(state: &AppState, families: &Families) -> HostRead {
    let settings = state.settings();
    let applied_at = state.store().load().ok().flatten().map(|r| r.applied_at);
    // Nothing applied: nothing to hold the host to (planning the
    // configuration instead would resolve its names at every scrape).
    let drift = match applied_at {
        None => Ok((Vec::new(), Vec::new())),
        Some(_) => (|| {
            let planned = state.plan_to_check()?;
            let host = state.host()?;
            let started = Instant::now();
            let drift = host.verify(&planned)?;
            families
                .verify_duration
                .observe(started.elapsed().as_secs_f64());
            let (status, _) = host.status(&planned)?;
            let counters = status
                .counters
                .into_iter()
                .map(|c| (c.profile, c.accepted_packets, c.blocked_packets))
                .collect();
            Ok((drift, counters))
        })()
        .map_err(|e: crate::error::BoxError| e.to_string()),
    };
    let running: Vec<String> = corral_gateway::status_recorded(&settings.state_dir)
        .into_iter()
        .filter(|g| g.status.is_up())
        .map(|g| g.bridge)
        .collect();
    let gateways = settings
        .config
        .profiles
        .iter()
        .map(|p| {
            (
                p.name.to_string(),
                running.iter().any(|b| b.as_str() == p.bridge.as_str()),
            )
        })
        .collect();
    let verdicts = state
        .db()
        .sandboxes()
        .map(|recs| {
            let mut by: BTreeMap<&'static str, usize> = BTreeMap::new();
            for r in recs {
                let v = match r.verdict {
                    Some(Verdict::Passed) => "passed",
                    Some(Verdict::Failed) => "failed",
                    Some(Verdict::Refused) => "refused",
                    None => "none",
                };
                *by.entry(v).or_default() += 1;
            }
            by
        })
        .map_err(|e| e.to_string());
    let rotation = RotationFile::load(&settings.state_dir).map_err(|e| e.to_string());
    HostRead {
        applied_at,
        drift,
        gateways,
        verdicts,
        rotation,
    }
}

impl Families {
    /// Bring a kernel counter's series to `n`. The kernel's counter is the
    /// truth: one that went down (a new ruleset since the last scrape)
    /// starts again from it, which Prometheus reads as a reset.
    pub fn kernel_count(&self, labels: &VerdictCounterLabels, n: u64) {
        let had = self.kernel_packets.get_or_create_owned(labels).get();
        if n < had {
            self.kernel_packets.remove(labels);
            self.kernel_packets.get_or_create(labels).inc_by(n);
        } else {
            self.kernel_packets.get_or_create(labels).inc_by(n - had);
        }
    }

    fn source(&self, source: &str, up: bool) {
        self.source_up
            .get_or_create(&SourceLabels {
                source: source.to_owned(),
            })
            .set(i64::from(up));
    }

    /// Read every state family anew.
    pub async fn refresh(&self, state: &AppState) {
        match state.sandboxes().list().await {
            Ok(list) => {
                let mut by: BTreeMap<(String, String, String), i64> = BTreeMap::new();
                for s in &list {
                    let profile = s
                        .profile
                        .as_ref()
                        .map_or_else(|| "none".to_owned(), |p| p.as_str().to_owned());
                    *by.entry((word(&s.state), profile, word(&s.kind)))
                        .or_default() += 1;
                }
                self.sandboxes.clear();
                for ((state, profile, kind), n) in by {
                    self.sandboxes
                        .get_or_create(&SandboxLabels {
                            state,
                            profile,
                            kind,
                        })
                        .set(n);
                }
                self.source("sandboxes", true);
            }
            Err(e) => {
                tracing::debug!(error = %e, "metrics: cannot list the sandboxes");
                self.source("sandboxes", false);
            }
        }
        let (st, fam) = (state.clone(), self.clone());
        let read = match tokio::task::spawn_blocking(move || read_host(&st, &fam)).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "metrics: the host read failed");
                for s in ["host", "gateways", "store", "cluster"] {
                    self.source(s, false);
                }
                return;
            }
        };
        self.apply_host(read);
    }

    fn apply_host(&self, read: HostRead) {
        self.applied_at.set(
            read.applied_at
                .map_or(0, |t| i64::try_from(t).unwrap_or(i64::MAX)),
        );
        match read.drift {
            Ok((drift, counters)) => {
                for (profile, accepted, blocked) in counters {
                    for (verdict, n) in [("accepted", accepted), ("blocked", blocked)] {
                        self.kernel_count(
                            &VerdictCounterLabels {
                                profile: profile.clone(),
                                verdict: verdict.to_owned(),
                            },
                            n,
                        );
                    }
                }
                for a in AREAS {
                    let any = drift.iter().any(|d| area(d) == a);
                    self.drift
                        .get_or_create(&AreaLabels { area: a.to_owned() })
                        .set(i64::from(any));
                }
                self.drift_items.set(count(drift.len()));
                self.source("host", true);
            }
            Err(e) => {
                tracing::debug!(error = %e, "metrics: cannot read the host back");
                self.source("host", false);
            }
        }
        self.gateway_up.clear();
        for (profile, up) in read.gateways {
            self.gateway_up
                .get_or_create(&ProfileLabels { profile })
                .set(i64::from(up));
        }
        self.source("gateways", true);
        match read.verdicts {
            Ok(by) => {
                for v in VERDICTS {
                    self.verdicts
                        .get_or_create(&VerdictLabels {
                            verdict: v.to_owned(),
                        })
                        .set(count(by.get(v).copied().unwrap_or(0)));
                }
                self.source("store", true);
            }
            Err(e) => {
                tracing::debug!(error = %e, "metrics: cannot read the store");
                self.source("store", false);
            }
        }
        match read.rotation {
            Ok(file) => {
                let members = file.map(|f| f.members).unwrap_or_default();
                let drained = members
                    .iter()
                    .filter(|m| m.standing == StandingName::Drained)
                    .count();
                for (standing, n) in [
                    ("in_rotation", members.len() - drained),
                    ("drained", drained),
                ] {
                    self.members
                        .get_or_create(&StandingLabels {
                            standing: standing.to_owned(),
                        })
                        .set(count(n));
                }
                self.member_in_rotation.clear();
                for m in members {
                    self.member_in_rotation
                        .get_or_create(&MemberLabels { member: m.member })
                        .set(i64::from(m.standing == StandingName::InRotation));
                }
                self.source("cluster", true);
            }
            Err(e) => {
                tracing::debug!(error = %e, "metrics: cannot read the cluster rotation");
                self.source("cluster", false);
            }
        }
    }
}
