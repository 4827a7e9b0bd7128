//! What the gate records: one serde event per decision, with per-check
//! timings, for logs and the API.

use serde::{Deserialize, Serialize};

use super::canary::{CheckKind, Expectation, Observed};
use super::clock::Timestamp;
use crate::names::{ProfileName, SandboxName};
use crate::platform::SandboxKind;

/// The provider's report on its filter process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FilterHealth {
    /// The filter is running.
    Alive,
    /// The filter has exited.
    Dead,
    /// Nobody knows; treated as failed (fail closed).
    Unknown,
}

/// How a gate decision ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventOutcome {
    /// Every check passed; the sandbox is verified.
    Passed,
    /// A check (or the filter's health) failed; the kind is demoted.
    Failed,
    /// The gate would not judge: the kind is not opted in or is demoted.
    Refused,
}

/// One check as recorded in an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckRecord {
    /// Which check.
    pub kind: CheckKind,
    /// Its target, as text.
    pub target: String,
    /// What was required.
    pub expect: Expectation,
    /// What the prober saw (`None`: the check was never reported).
    pub observed: Option<Observed>,
    /// How long it took, in milliseconds.
    pub elapsed_ms: u64,
    /// The bound, in milliseconds.
    pub bound_ms: u64,
    /// Whether it passed.
    pub passed: bool,
    /// Probe output, cut to the configured bound.
    pub output: String,
}

/// The record of one gate decision, for logs and the API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerificationEvent {
    /// The sandbox.
    pub sandbox: SandboxName,
    /// Its kind.
    pub kind: SandboxKind,
    /// Its profile, when a canary ran.
    pub profile: Option<ProfileName>,
    /// When the gate decided.
    pub at: Timestamp,
    /// The result.
    pub outcome: EventOutcome,
    /// Per-check results and timings.
    pub checks: Vec<CheckRecord>,
    /// The filter's reported health.
    pub filter_health: Option<FilterHealth>,
    /// End of the demotion this event caused or met, if any.
    pub demoted_until: Option<Timestamp>,
    /// What happened, in words (a failure says which checks and what to do).
    pub message: String,
}
