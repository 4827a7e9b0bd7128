//! Stopping a sandbox that failed (or could not get) its verification:
//! retried with backoff, and reported as it went — "stopped", "stopped on
//! attempt N", or "not stopped: why" — never "stopped" when it runs on.

use std::time::Duration;

use corral_sandbox_core::sandbox::{Sandbox, SandboxState, StopOptions};

use super::{Report, Verifier};
use crate::hooks::Event;

/// Attempts at a forced stop before corral says it could not.
pub const STOP_ATTEMPTS: u32 = 4;
/// The wait after the first failed attempt; doubled after each.
pub const STOP_BACKOFF: Duration = Duration::from_millis(250);

/// How a fail-closed stop went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopOutcome {
    /// The sandbox stopped on attempt `attempt` (1: the first); `earlier`
    /// holds why each attempt before it failed.
    Stopped {
        /// The attempt that stopped it.
        attempt: u32,
        /// The errors of the attempts before.
        earlier: Vec<String>,
    },
    /// Every attempt failed: the sandbox may still run.
    NotStopped {
        /// Attempts made.
        attempts: u32,
        /// The last attempt's error.
        why: String,
    },
}

impl StopOutcome {
    /// True when the sandbox stopped.
    pub fn stopped(&self) -> bool {
        matches!(self, StopOutcome::Stopped { .. })
    }

    /// The report's `action`: `stopped`, `stopped on attempt N of M` or
    /// `not stopped: why`.
    pub fn action(&self) -> String {
        match self {
            StopOutcome::Stopped { attempt: 1, .. } => "stopped".to_owned(),
            StopOutcome::Stopped { attempt, .. } => {
                format!("stopped on attempt {attempt} of {STOP_ATTEMPTS}")
            }
            StopOutcome::NotStopped { attempts, why } => {
                format!("not stopped: {why} ({attempts} attempts)")
            }
        }
    }

    /// What corral did, for an alert.
    pub fn done(&self) -> String {
        match self {
            StopOutcome::Stopped { attempt: 1, .. } => "corral stopped it".to_owned(),
            StopOutcome::Stopped { attempt, earlier } => format!(
                "corral stopped it on attempt {attempt} of {STOP_ATTEMPTS} (before: {})",
                earlier.join("; ")
            ),
            StopOutcome::NotStopped { attempts, why } => format!(
                "not stopped: {why} ({attempts} attempts; it may still run — stop it by hand, e.g. `corral stop --force`, and look at the backend)"
            ),
        }
    }
}

impl Verifier {
    /// Force-stop `sandbox`, retrying with backoff; a `stopped` event is
    /// recorded when (and only when) it stopped. An attempt that errs
    /// while the backend then reports the sandbox stopped counts as done.
    pub async fn stop_retrying(&self, sandbox: &dyn Sandbox, name: &str) -> StopOutcome {
        let mut earlier = Vec::new();
        let mut wait = STOP_BACKOFF;
        for attempt in 1..=STOP_ATTEMPTS {
            let result = sandbox
                .stop(StopOptions {
                    force: true,
                    timeout: None,
                })
                .await;
            let stopped = match result {
                Ok(()) => true,
                // The stop erred but the backend has it stopped: done.
                Err(e) => {
                    let stopped = sandbox
                        .info()
                        .await
                        .is_ok_and(|i| i.state == SandboxState::Stopped);
                    if !stopped {
                        earlier.push(e.to_string());
                    }
                    stopped
                }
            };
            if stopped {
                self.record_now(&Event::Stopped {
                    name: name.to_owned(),
                });
                return StopOutcome::Stopped { attempt, earlier };
            }
            tracing::warn!(
                sandbox = name,
                attempt,
                error = earlier.last().map(String::as_str).unwrap_or_default(),
                "cannot stop a sandbox that failed verification; retrying"
            );
            if attempt < STOP_ATTEMPTS {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
        StopOutcome::NotStopped {
            attempts: STOP_ATTEMPTS,
            why: earlier.pop().unwrap_or_default(),
        }
    }

    /// Stop a sandbox whose verification failed, with an alert saying how
    /// it went; returns how it went (its [`StopOutcome::action`] is the
    /// report's `action`).
    pub async fn stop_failed(&self, sandbox: &dyn Sandbox, report: &Report) -> StopOutcome {
        let outcome = self.stop_retrying(sandbox, &report.sandbox).await;
        self.record_now(&Event::Alert {
            name: report.sandbox.clone(),
            reason: format!(
                "verification failed ({}); {}",
                report.event.message,
                outcome.done()
            ),
        });
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_say_what_happened() {
        let first = StopOutcome::Stopped {
            attempt: 1,
            earlier: vec![],
        };
        assert_eq!(first.action(), "stopped");
        assert_eq!(first.done(), "corral stopped it");
        let second = StopOutcome::Stopped {
            attempt: 2,
            earlier: vec!["busy".into()],
        };
        assert_eq!(second.action(), "stopped on attempt 2 of 4");
        assert!(
            second.done().contains("(before: busy)"),
            "{}",
            second.done()
        );
        let never = StopOutcome::NotStopped {
            attempts: 4,
            why: "wedged".into(),
        };
        assert!(!never.stopped());
        assert_eq!(never.action(), "not stopped: wedged (4 attempts)");
        assert!(
            never.done().starts_with("not stopped: wedged"),
            "{}",
            never.done()
        );
        assert!(!never.done().contains("corral stopped it"));
    }
}
