//! Bounds of the verification gate, validated once at load time.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Default per-check bound.
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(5);
/// Shortest per-check bound: below a second, slow but correct filters fail.
pub const MIN_CHECK_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest per-check bound: beyond this a `drop` verdict stalls placement.
pub const MAX_CHECK_TIMEOUT: Duration = Duration::from_secs(30);
/// Default demotion after a failed canary.
pub const DEFAULT_COOL_DOWN: Duration = Duration::from_secs(15 * 60);
/// Default re-verification cadence for running profiled sandboxes: minutes,
/// not hours, so what no kernel event shows is found soon.
pub const DEFAULT_REVERIFY_INTERVAL: Duration = Duration::from_secs(5 * 60);
/// Shortest re-verification cadence (a canary costs several checks).
pub const MIN_REVERIFY_INTERVAL: Duration = Duration::from_secs(60);
/// Default cap on probe output kept in an event.
pub const DEFAULT_MAX_PROBE_OUTPUT: usize = 4096;
/// Smallest and largest accepted probe-output caps, in bytes.
pub const PROBE_OUTPUT_RANGE: (usize, usize) = (256, 1024 * 1024);

/// Timing and size bounds of the verification gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerificationOptions {
    /// Each canary check must finish (and each must-fail check must fail)
    /// within this bound.
    pub check_timeout: Duration,
    /// How long a kind stays demoted after a failure.
    pub cool_down: Duration,
    /// How often a long-lived verified sandbox is checked again.
    pub reverify_interval: Duration,
    /// Bytes of probe output kept per check in an event.
    pub max_probe_output: usize,
}

impl Default for VerificationOptions {
    fn default() -> Self {
        Self {
            check_timeout: DEFAULT_CHECK_TIMEOUT,
            cool_down: DEFAULT_COOL_DOWN,
            reverify_interval: DEFAULT_REVERIFY_INTERVAL,
            max_probe_output: DEFAULT_MAX_PROBE_OUTPUT,
        }
    }
}

/// One option outside its bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {problem}")]
pub struct OptionsError {
    /// The `corral.toml` key under `[host.verification]`.
    pub key: &'static str,
    /// What is wrong and the accepted range.
    pub problem: String,
}

impl VerificationOptions {
    /// Every option outside its bounds (empty when all are fine).
    pub fn check(&self) -> Vec<OptionsError> {
        let mut out = Vec::new();
        if !(MIN_CHECK_TIMEOUT..=MAX_CHECK_TIMEOUT).contains(&self.check_timeout) {
            out.push(OptionsError {
                key: "check_timeout_secs",
                problem: format!(
                    "{} s is out of range; use {} to {} seconds (default {})",
                    self.check_timeout.as_secs_f64(),
                    MIN_CHECK_TIMEOUT.as_secs(),
                    MAX_CHECK_TIMEOUT.as_secs(),
                    DEFAULT_CHECK_TIMEOUT.as_secs()
                ),
            });
        }
        if self.cool_down.is_zero() {
            out.push(OptionsError {
                key: "cool_down_secs",
                problem: format!(
                    "0 would re-admit a failed kind at once; use a positive number of seconds \
                        (default {})",
                    DEFAULT_COOL_DOWN.as_secs()
                ),
            });
        }
        if self.reverify_interval < MIN_REVERIFY_INTERVAL {
            out.push(OptionsError {
                key: "reverify_interval_secs",
                problem: format!(
                    "{} s is too often; use at least {} seconds (default {})",
                    self.reverify_interval.as_secs(),
                    MIN_REVERIFY_INTERVAL.as_secs(),
                    DEFAULT_REVERIFY_INTERVAL.as_secs()
                ),
            });
        }
        let (lo, hi) = PROBE_OUTPUT_RANGE;
        if !(lo..=hi).contains(&self.max_probe_output) {
            out.push(OptionsError {
                key: "max_probe_output_bytes",
                problem: format!(
                    "{} is out of range; use {lo} to {hi} bytes (default \
                        {DEFAULT_MAX_PROBE_OUTPUT})",
                    self.max_probe_output
                ),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert!(VerificationOptions::default().check().is_empty());
    }

    #[test]
    fn each_bound_is_enforced() {
        let bad = VerificationOptions {
            check_timeout: Duration::from_secs(31),
            cool_down: Duration::ZERO,
            reverify_interval: Duration::from_secs(59),
            max_probe_output: 10,
        };
        let got: Vec<String> = bad.check().iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            [
                "check_timeout_secs: 31 s is out of range; use 1 to 30 seconds (default 5)",
                "cool_down_secs: 0 would re-admit a failed kind at once; use a positive \
                    number of seconds (default 900)",
                "reverify_interval_secs: 59 s is too often; use at least 60 seconds (default 300)",
                "max_probe_output_bytes: 10 is out of range; use 256 to 1048576 bytes \
                    (default 4096)",
            ]
        );
        let low = VerificationOptions {
            check_timeout: Duration::from_millis(500),
            ..VerificationOptions::default()
        };
        assert_eq!(low.check().len(), 1);
    }
}
