//! Per-sandbox egress verification for provider-host filters: the canary
//! plan, the gate (demotion, cool-down, re-verification) and its events,
//! with time injected through [`Clock`].

mod canary;
mod clock;
mod event;
mod gate;
mod options;

pub use canary::{
    CanaryCheck, CanaryPlan, CheckKind, CheckResult, DEFAULT_PROBE_PORT, Expectation, Observed,
    PlanError, ProbeTarget, plan,
};
pub use clock::{Clock, ManualClock, Timestamp};
pub use event::{CheckRecord, EventOutcome, FilterHealth, VerificationEvent};
pub use gate::{Gate, HealthVerdict, Judgement, KindStatus, OVERRUN_GRACE, VerifiedSandbox};
pub use options::{
    DEFAULT_CHECK_TIMEOUT, DEFAULT_COOL_DOWN, DEFAULT_MAX_PROBE_OUTPUT, DEFAULT_REVERIFY_INTERVAL,
    MAX_CHECK_TIMEOUT, MIN_CHECK_TIMEOUT, MIN_REVERIFY_INTERVAL, OptionsError, PROBE_OUTPUT_RANGE,
    VerificationOptions,
};
