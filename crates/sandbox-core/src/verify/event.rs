//! What the gate records: one serde event per decision, with per-check
//! timings, for logs and the API.

use serde::{Deserialize, Serialize};

use std::fmt;

use super::canary::{CheckKind, Expectation, NotPlanned, Observed};
use super::clock::Timestamp;
use crate::names::{ProfileName, SandboxName};
use crate::platform::SandboxKind;

/// A provider's report on the filter that holds a sandbox's egress outside
/// corral's host (Tart's Softnet process). One type for the provider that
/// measures it and the gate that judges it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum FilterHealth {
    /// The filter is running.
    Alive,
    /// The filter is gone (its process, or the VM's, exited).
    Dead {
        /// What was found.
        reason: String,
    },
    /// Nobody can tell; treated as failed (fail closed).
    Unknown {
        /// Why not.
        reason: String,
    },
}

impl FilterHealth {
    /// True only for [`FilterHealth::Alive`]; `Unknown` is not alive.
    pub fn is_alive(&self) -> bool {
        matches!(self, FilterHealth::Alive)
    }
}

impl fmt::Display for FilterHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FilterHealth::Alive => f.write_str("alive"),
            FilterHealth::Dead { reason } => write!(f, "dead ({reason})"),
            FilterHealth::Unknown { reason } => write!(f, "unknown ({reason})"),
        }
    }
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
    /// The control, when the check has one.
    pub control: Option<ControlRecord>,
}

/// A check's control as recorded in an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlRecord {
    /// What the control probed, from the host.
    pub target: String,
    /// What it saw (`None`: it was never reported).
    pub observed: Option<Observed>,
    /// How long it took, in milliseconds.
    pub elapsed_ms: u64,
    /// True when it reached its destination (the check can prove something).
    pub reached: bool,
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
    /// Checks the plan left out, and why.
    #[serde(default)]
    pub not_planned: Vec<NotPlanned>,
    /// The filter's reported health.
    pub filter_health: Option<FilterHealth>,
    /// End of the demotion this event caused or met, if any.
    pub demoted_until: Option<Timestamp>,
    /// What happened, in words (a failure says which checks and what to do).
    pub message: String,
}
