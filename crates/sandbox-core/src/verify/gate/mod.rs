//! The verification gate: host-owned state that decides whether an opted-in
//! kind may serve profiled work, judges canary runs, demotes a kind for the
//! cool-down on any failure, and is the only thing that can vouch for a
//! sandbox ([`VerifiedSandbox`] has no public constructor).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::canary::{CanaryPlan, CheckResult, Expectation, Observed};
use super::clock::{Timestamp, millis};
use super::event::{CheckRecord, ControlRecord, EventOutcome, FilterHealth, VerificationEvent};
use super::options::VerificationOptions;
use crate::config::VerificationConfig;
use crate::names::{ProfileName, SandboxName};
use crate::platform::{
    Classification, EgressClass, Enforcement, EnforcementSite, SandboxKind, egress_class,
};

#[cfg(test)]
mod tests;

/// Slack over the per-check bound before a probe counts as overrunning: the
/// prober's own timer fires at the bound and needs a moment to report.
pub const OVERRUN_GRACE: Duration = Duration::from_secs(1);

/// Where an opted-in kind stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "status")]
pub enum KindStatus {
    /// Not opted in by host config: never verified, never profiled.
    NotOptedIn,
    /// Failed recently; refused until `until`.
    Demoted {
        /// End of the cool-down.
        until: Timestamp,
    },
    /// The cool-down is over but no canary has passed since the failure; a
    /// new sandbox may try, and only a passing canary clears this.
    Probation {
        /// When the cool-down ended.
        since: Timestamp,
    },
    /// Opted in and in good standing.
    Eligible,
}

impl KindStatus {
    /// True when a new sandbox of the kind may be created and put through
    /// the canary.
    pub fn may_try(self) -> bool {
        matches!(self, KindStatus::Eligible | KindStatus::Probation { .. })
    }
}

/// Proof, issued only by the gate, that one sandbox passed its canary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifiedSandbox {
    sandbox: SandboxName,
    kind: SandboxKind,
    profile: ProfileName,
    verified_at: Timestamp,
}

impl VerifiedSandbox {
    /// The sandbox.
    pub fn sandbox(&self) -> &SandboxName {
        &self.sandbox
    }
    /// Its kind.
    pub fn kind(&self) -> SandboxKind {
        self.kind
    }
    /// The profile it was verified on.
    pub fn profile(&self) -> &ProfileName {
        &self.profile
    }
    /// When its canary passed.
    pub fn verified_at(&self) -> Timestamp {
        self.verified_at
    }

    /// Its egress classification: verified per sandbox, by a filter on the
    /// provider host. This is the only way to obtain that rank.
    pub fn classification(&self) -> Classification {
        Classification {
            enforcement: Enforcement::VerifiedPerSandbox,
            site: Some(EnforcementSite::ProviderHost),
        }
    }
}

/// The outcome of judging a canary run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    /// The event to record.
    pub event: VerificationEvent,
    /// The proof, when the run passed. Without it the sandbox must be
    /// disposed and the work re-placed.
    pub verified: Option<VerifiedSandbox>,
}

/// The outcome of a filter-health report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HealthVerdict {
    /// The filter is alive; the proof stands.
    StillVerified(VerifiedSandbox),
    /// The proof is revoked: stop the sandbox's work and re-place it.
    Revoked(VerificationEvent),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Demotion {
    until: Timestamp,
    reason: String,
}

/// The gate's state. Host-owned: built from host config, changed only by
/// canary judgements and health reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gate {
    opted_in: Vec<SandboxKind>,
    options: VerificationOptions,
    demotions: BTreeMap<SandboxKind, Demotion>,
}

impl Gate {
    /// A gate with no demotions.
    pub fn new(cfg: &VerificationConfig) -> Self {
        Self {
            opted_in: cfg.kinds.clone(),
            options: cfg.options,
            demotions: BTreeMap::new(),
        }
    }

    /// The gate's bounds.
    pub fn options(&self) -> &VerificationOptions {
        &self.options
    }

    /// Where `kind` stands at `now`.
    pub fn status(&self, kind: SandboxKind, now: Timestamp) -> KindStatus {
        if !self.opted_in.contains(&kind) {
            return KindStatus::NotOptedIn;
        }
        match self.demotions.get(&kind) {
            None => KindStatus::Eligible,
            Some(d) if now < d.until => KindStatus::Demoted { until: d.until },
            Some(d) => KindStatus::Probation { since: d.until },
        }
    }

    /// Why `kind` was last demoted, while the demotion is on record.
    pub fn demotion_reason(&self, kind: SandboxKind) -> Option<&str> {
        self.demotions.get(&kind).map(|d| d.reason.as_str())
    }

    /// True when a verified sandbox is due for another canary.
    pub fn reverify_due(&self, v: &VerifiedSandbox, now: Timestamp) -> bool {
        now.since(v.verified_at) >= self.options.reverify_interval
    }

    /// Every demotion on record: kind, end of its cool-down, reason. A
    /// record whose cool-down is over is the kind's probation.
    pub fn demotions(&self) -> Vec<(SandboxKind, Timestamp, String)> {
        self.demotions
            .iter()
            .map(|(k, d)| (*k, d.until, d.reason.clone()))
            .collect()
    }

    /// Put a stored demotion back (loading the gate from a durable store).
    pub fn restore_demotion(&mut self, kind: SandboxKind, until: Timestamp, reason: String) {
        self.demotions.insert(kind, Demotion { until, reason });
    }

    /// The kinds opted in to verification.
    pub fn opted_in(&self) -> &[SandboxKind] {
        &self.opted_in
    }

    fn demote(&mut self, kind: SandboxKind, now: Timestamp, reason: &str) -> Timestamp {
        let until = now.plus(self.options.cool_down);
        self.demotions.insert(
            kind,
            Demotion {
                until,
                reason: reason.to_owned(),
            },
        );
        until
    }

    fn bounded(&self, output: &str) -> String {
        let max = self.options.max_probe_output;
        if output.len() <= max {
            return output.to_owned();
        }
        let mut cut = max;
        while !output.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}…[{} more bytes]", &output[..cut], output.len() - cut)
    }

    /// How `kind`'s canary runs are judged: `Some(true)` for a kind opted
    /// in to per-sandbox verification (a failure demotes it), `Some(false)`
    /// for a kind corral's own host rules enforce (a failure disposes of the
    /// sandbox but demotes nothing), `None` for a kind the gate will not
    /// judge.
    fn judged_as_verified(&self, kind: SandboxKind) -> Option<bool> {
        if self.opted_in.contains(&kind) {
            return Some(true);
        }
        match egress_class(kind) {
            EgressClass::HostKernel | EgressClass::Executor => Some(false),
            EgressClass::ProviderHost | EgressClass::Unenforced => None,
        }
    }

    /// Judge `results` of running `plan` in `sandbox`. Any failed, missing
    /// or overrunning check, a check whose control did not reach its
    /// destination, or a provider filter that is not known to be alive,
    /// fails the run. For a kind opted in to verification a failure demotes
    /// the kind for the cool-down (`health` `None` counts as unknown there);
    /// for a kind corral enforces on a host, the run is judged the same way
    /// but nothing is demoted and no [`VerifiedSandbox`] is issued (its rank
    /// is already *enforced*).
    pub fn judge(
        &mut self,
        sandbox: &SandboxName,
        kind: SandboxKind,
        plan: &CanaryPlan,
        results: &[CheckResult],
        health: Option<&FilterHealth>,
        now: Timestamp,
    ) -> Judgement {
        let mut event = VerificationEvent {
            sandbox: sandbox.clone(),
            kind,
            profile: Some(plan.profile().clone()),
            at: now,
            outcome: EventOutcome::Refused,
            checks: Vec::new(),
            not_planned: plan.not_planned().to_vec(),
            filter_health: health.cloned(),
            demoted_until: None,
            message: String::new(),
        };
        let Some(verified_kind) = self.judged_as_verified(kind) else {
            event.message = format!(
                "{kind} is not opted in to verification (host.verification.kinds); \
                    profiled work cannot run on it"
            );
            return Judgement {
                event,
                verified: None,
            };
        };
        if let KindStatus::Demoted { until } = self.status(kind, now) {
            event.demoted_until = Some(until);
            event.message =
                format!("{kind} is demoted until {until}; re-place the work on an enforced kind");
            return Judgement {
                event,
                verified: None,
            };
        }
        let mut failed = Vec::new();
        for check in plan.checks() {
            let result = results.iter().find(|r| r.kind == check.kind);
            let control_reached = result
                .and_then(|r| r.control.as_ref())
                .is_some_and(|c| c.observed.reached());
            let passed = result.is_some_and(|r| {
                let in_time = r.elapsed <= check.time_allowed() + OVERRUN_GRACE;
                let as_expected = matches!(
                    (check.expect, &r.observed),
                    (Expectation::Connects, Observed::Connected)
                        | (
                            Expectation::Fails,
                            Observed::Refused
                                | Observed::TimedOut
                                | Observed::Unreachable
                                | Observed::Dropped,
                        )
                        | (Expectation::DoesNotResolve, Observed::NotResolved)
                );
                in_time && as_expected && (check.control.is_none() || control_reached)
            });
            if !passed {
                let why = match result {
                    Some(_) if check.control.is_some() && !control_reached => {
                        format!(
                            "{} (its control did not reach {})",
                            check.kind, check.target
                        )
                    }
                    _ => check.kind.to_string(),
                };
                failed.push(why);
            }
            event.checks.push(CheckRecord {
                kind: check.kind,
                target: check.target.to_string(),
                expect: check.expect,
                observed: result.map(|r| r.observed.clone()),
                elapsed_ms: result.map_or(0, |r| millis(r.elapsed)),
                bound_ms: millis(check.bound),
                passed,
                output: result.map_or_else(String::new, |r| self.bounded(&r.output)),
                control: check.control.as_ref().map(|target| {
                    let c = result.and_then(|r| r.control.as_ref());
                    ControlRecord {
                        target: target.to_string(),
                        observed: c.map(|c| c.observed.clone()),
                        elapsed_ms: c.map_or(0, |c| millis(c.elapsed)),
                        reached: control_reached,
                    }
                }),
            });
        }
        // A check that applies but could not run leaves the proof a kind's
        // standing rests on incomplete; for a kind corral enforces itself it
        // is counted and said, as every skip is.
        if verified_kind {
            for n in plan.not_planned().iter().filter(|n| n.could_not_run) {
                failed.push(format!("{} could not run ({})", n.kind, n.reason));
            }
        }
        match health {
            Some(h) if !h.is_alive() => failed.push(format!("filter health is {h}")),
            None if verified_kind => {
                failed.push("filter health is unknown (the provider reported none)".to_owned());
            }
            _ => {}
        }
        if failed.is_empty() {
            event.outcome = EventOutcome::Passed;
            event.message = passed_message(plan);
            if !verified_kind {
                return Judgement {
                    event,
                    verified: None,
                };
            }
            self.demotions.remove(&kind);
            let verified = VerifiedSandbox {
                sandbox: sandbox.clone(),
                kind,
                profile: plan.profile().clone(),
                verified_at: now,
            };
            return Judgement {
                event,
                verified: Some(verified),
            };
        }
        let reason = format!("failed: {}", failed.join("; "));
        event.outcome = EventOutcome::Failed;
        if !verified_kind {
            event.message = format!(
                "{reason}. The sandbox fails closed: dispose of it and check the host's \
                    enforcement (`corral host verify`)"
            );
            return Judgement {
                event,
                verified: None,
            };
        }
        let until = self.demote(kind, now, &reason);
        event.demoted_until = Some(until);
        event.message = format!(
            "{reason}. Dispose of the sandbox and re-place the work; {kind} is \
                demoted until {until}"
        );
        Judgement {
            event,
            verified: None,
        }
    }

    /// Take a filter-health report for a verified sandbox. Anything but
    /// `Alive` revokes the sandbox (the returned event says so) and demotes
    /// the kind.
    pub fn health(
        &mut self,
        verified: VerifiedSandbox,
        health: FilterHealth,
        now: Timestamp,
    ) -> HealthVerdict {
        if health.is_alive() {
            return HealthVerdict::StillVerified(verified);
        }
        let reason = format!("filter health is {health}");
        let until = self.demote(verified.kind, now, &reason);
        HealthVerdict::Revoked(VerificationEvent {
            sandbox: verified.sandbox,
            kind: verified.kind,
            profile: Some(verified.profile),
            at: now,
            outcome: EventOutcome::Failed,
            checks: Vec::new(),
            not_planned: Vec::new(),
            filter_health: Some(health),
            demoted_until: Some(until),
            message: format!(
                "{reason}: the sandbox fails closed; stop its work and re-place it; {} is \
                    demoted until {until}",
                verified.kind
            ),
        })
    }
}

/// "All N checks passed", with how many were skipped and why: a reader
/// must not take a short plan for a complete one.
fn passed_message(plan: &CanaryPlan) -> String {
    let n = plan.checks().len();
    let skipped = plan.not_planned();
    if skipped.is_empty() {
        return format!("all {n} checks passed, none skipped");
    }
    let why: Vec<String> = skipped
        .iter()
        .map(|s| format!("{}: {}", s.kind.as_str(), s.reason))
        .collect();
    format!(
        "all {n} planned checks passed; {} skipped ({})",
        skipped.len(),
        why.join("; ")
    )
}
