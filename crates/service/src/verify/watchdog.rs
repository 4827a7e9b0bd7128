//! corrald's watchdog: long-lived profiled sandboxes (those its store
//! knows) are verified again every `reverify_interval`, independently of
//! exec, and at once when their
//! provider reports a filter that is not alive. A failed run stops the
//! sandbox (fail closed) and records why (a `verification` event with the
//! checks, a `stopped` event and an `alert`).

use std::time::Duration;

use corral_sandbox_core::sandbox::SandboxState;
use corral_sandbox_core::verify::Timestamp;
use serde::Serialize;

use super::{Report, Verifier};
use crate::SandboxService;

/// Shortest time between two passes.
const MIN_TICK: Duration = Duration::from_millis(250);
/// Longest time between two passes (a dead filter is noticed this fast).
const MAX_TICK: Duration = Duration::from_secs(30);

/// What one pass did to one sandbox.
#[derive(Debug, Clone, Serialize)]
pub struct Watched {
    /// The sandbox.
    pub sandbox: String,
    /// Why it was verified now.
    pub why: String,
    /// The run, when it could happen.
    pub report: Option<Report>,
    /// Why it could not, when it could not (the sandbox was stopped).
    pub error: Option<String>,
}

/// Re-verification of running profiled sandboxes.
#[derive(Debug, Clone)]
pub struct Watchdog {
    verifier: Verifier,
    service: SandboxService,
    interval: Duration,
}

impl Watchdog {
    /// Verify `service`'s sandboxes through `verifier` every `interval`.
    pub fn new(verifier: Verifier, service: SandboxService, interval: Duration) -> Self {
        Self {
            verifier,
            service,
            interval,
        }
    }

    /// Time between passes: a quarter of the interval, within bounds.
    pub fn tick(&self) -> Duration {
        (self.interval / 4).clamp(MIN_TICK, MAX_TICK)
    }

    fn due(&self, last: Option<Timestamp>, now: Timestamp) -> Option<String> {
        match last {
            None => Some("never verified".to_owned()),
            Some(t) if now.since(t) >= self.interval => Some(format!(
                "last verified {} s ago (interval {} s)",
                now.since(t).as_secs(),
                self.interval.as_secs()
            )),
            Some(_) => None,
        }
    }

    /// One pass over every running profiled sandbox this store knows
    /// (created or verified through it) whose last canary passed:
    /// sandboxes of another corral with another state directory on the
    /// same backend are not this one's to stop, and a sandbox being created
    /// or started is verified by its own hand-out.
    pub async fn pass(&self) -> Vec<Watched> {
        let list = match self.service.list().await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "watchdog: cannot list sandboxes");
                return Vec::new();
            }
        };
        // Only sandboxes whose last canary passed: one being created or
        // started is verified by its own hand-out, and one that stopped has
        // no verdict until it is handed out again.
        let known: Vec<String> = match self.verifier.store().sandboxes() {
            Ok(records) => records
                .into_iter()
                .filter(|r| r.verdict == Some(crate::store::Verdict::Passed))
                .map(|r| r.name)
                .collect(),
            Err(e) => {
                tracing::error!(error = %e, "watchdog: cannot read the store");
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for info in list {
            if info.state != SandboxState::Running
                || info.profile.is_none()
                || !known.iter().any(|k| k == info.name.as_str())
            {
                continue;
            }
            let name = info.name.to_string();
            let Ok(sandbox) = self.service.open(&name).await else {
                continue;
            };
            let now = self.verifier.clock().now();
            let last = self
                .verifier
                .store()
                .sandbox(&name)
                .ok()
                .flatten()
                .and_then(|r| r.last_verified);
            let health = sandbox.filter_health().await;
            let why = match &health {
                Ok(Some(h)) if !h.is_alive() => Some(format!("its filter is {h}")),
                Err(e) => Some(format!("its filter health is unknown ({e})")),
                _ => self.due(last, now),
            };
            let Some(why) = why else { continue };
            tracing::info!(sandbox = %name, "watchdog: verifying ({why})");
            match self.verifier.verify(sandbox.as_ref()).await {
                Ok(mut report) => {
                    if !report.passed {
                        report.action =
                            Some(self.verifier.stop_failed(sandbox.as_ref(), &report).await);
                    }
                    out.push(Watched {
                        sandbox: name,
                        why,
                        report: Some(report),
                        error: None,
                    });
                }
                Err(super::VerifyError::NotRunning { .. }) => {}
                Err(e) => {
                    // Could not verify: fail closed all the same.
                    let error = crate::error::chain(&e);
                    let _ = sandbox
                        .stop(corral_sandbox_core::sandbox::StopOptions {
                            force: true,
                            timeout: None,
                        })
                        .await;
                    self.verifier.record_now(&crate::hooks::Event::Alert {
                        name: name.clone(),
                        reason: format!(
                            "re-verification could not run ({error}); corral stopped it"
                        ),
                    });
                    out.push(Watched {
                        sandbox: name,
                        why,
                        report: None,
                        error: Some(error),
                    });
                }
            }
        }
        out
    }

    /// Passes until the task is dropped.
    pub async fn run(self) {
        let tick = self.tick();
        loop {
            tokio::time::sleep(tick).await;
            self.pass().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_after_the_interval_or_never_verified() {
        let settings = std::sync::Arc::new(crate::Settings {
            config: corral_sandbox_core::Config::builtin_default(),
            origin: crate::Origin::Builtin,
            netns: None,
            state_dir: "/nonexistent".into(),
        });
        let dir = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(crate::Store::open(dir.path()).unwrap());
        let backend = std::sync::Arc::new(
            crate::Backend::select(
                "linux",
                corral_sandbox_core::SandboxKind::Incus,
                &settings.config.host,
                "/nonexistent.sock".into(),
            )
            .unwrap(),
        );
        let verifier = Verifier::new(
            std::sync::Arc::clone(&settings),
            store,
            std::sync::Arc::new(crate::WallClock),
        );
        let w = Watchdog::new(
            verifier,
            SandboxService::new(settings, backend),
            Duration::from_secs(60),
        );
        assert_eq!(w.tick(), Duration::from_secs(15));
        let now = Timestamp(100_000);
        assert!(w.due(None, now).is_some());
        assert!(w.due(Some(Timestamp(50_000)), now).is_none());
        assert!(w.due(Some(Timestamp(40_000)), now).is_some());
    }
}
