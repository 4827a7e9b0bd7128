//! Per-sandbox egress verification: the canary plan every profiled sandbox
//! runs before it is handed out (with a control per check where one is
//! possible), the gate that judges it (demotion, cool-down and probation
//! for kinds opted in to verification; dispose-only for kinds corral
//! enforces itself) and its events, with time injected through [`Clock`].

mod canary;
mod clock;
mod event;
mod gate;
mod options;

pub use canary::{
    CanaryCheck, CanaryPlan, CheckKind, CheckResult, ControlResult, DEFAULT_PROBE_PORT, DNS_PORT,
    Expectation, METADATA, NotPlanned, OWN_TARGET_V4, OWN_TARGET_V6, Observed, OwnTargets,
    PlanError, ProbeTarget, Requirement, SIBLING_BOUND, Vantage, plan,
};
pub use clock::{Clock, ManualClock, Timestamp};
pub use event::{CheckRecord, ControlRecord, EventOutcome, FilterHealth, VerificationEvent};
pub use gate::{Gate, HealthVerdict, Judgement, KindStatus, OVERRUN_GRACE, VerifiedSandbox};
pub use options::{
    DEFAULT_CHECK_TIMEOUT, DEFAULT_COOL_DOWN, DEFAULT_MAX_PROBE_OUTPUT, DEFAULT_REVERIFY_INTERVAL,
    MAX_CHECK_TIMEOUT, MIN_CHECK_TIMEOUT, MIN_REVERIFY_INTERVAL, OptionsError, PROBE_OUTPUT_RANGE,
    VerificationOptions,
};
