//! What a drain does to the sandboxes already on the member: each running
//! profiled sandbox there is verified again (the canary, as `corral
//! verify` runs it) and stopped when the canary fails or cannot run — fail
//! closed. One that passes keeps running: its own enforcement is proven,
//! and the watchdog keeps verifying it; the drain only stops new
//! placements.

use std::collections::BTreeMap;

use async_trait::async_trait;
use corral_sandbox_core::sandbox::{SandboxState, StopOptions};
use serde::Serialize;

use crate::SandboxService;
use crate::hooks::Event;
use crate::verify::{Verifier, VerifyError};

/// What the re-verification did to one sandbox of a drained member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reverified {
    /// The sandbox.
    pub sandbox: String,
    /// The member it runs on.
    pub member: String,
    /// Its canary passed.
    pub passed: bool,
    /// `kept running`, `stopped`, or `not stopped: WHY`.
    pub action: String,
    /// The canary's verdict, or why it could not run.
    pub detail: String,
}

/// Called once for each member that was just drained.
#[async_trait]
pub trait OnDrain: Send + Sync {
    /// Act on `member`'s running sandboxes; what was done to each.
    async fn drained(&self, member: &str) -> Vec<Reverified>;
}

/// Re-verification through the canary (see the module docs).
#[derive(Debug, Clone)]
pub struct Reverifier {
    service: SandboxService,
    verifier: Verifier,
    by_member: BTreeMap<String, Verifier>,
}

impl Reverifier {
    /// Sandboxes of `service`'s backend, verified through `verifier`.
    pub fn new(service: SandboxService, verifier: Verifier) -> Self {
        Self {
            service,
            verifier,
            by_member: BTreeMap::new(),
        }
    }

    /// Verify `member`'s sandboxes through `verifier` (whose host side is
    /// that member's namespace: a lab whose members share one kernel).
    pub fn with_member(mut self, member: impl Into<String>, verifier: Verifier) -> Self {
        self.by_member.insert(member.into(), verifier);
        self
    }
}

#[async_trait]
impl OnDrain for Reverifier {
    async fn drained(&self, member: &str) -> Vec<Reverified> {
        let list = match self.service.list().await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(member, error = %e, "cluster: cannot list the drained member's sandboxes");
                return Vec::new();
            }
        };
        let verifier = self.by_member.get(member).unwrap_or(&self.verifier);
        let mut out = Vec::new();
        for info in list {
            if info.location.as_deref() != Some(member)
                || info.state != SandboxState::Running
                || info.profile.is_none()
            {
                continue;
            }
            let name = info.name.to_string();
            let done = |passed, action: String, detail: String| Reverified {
                sandbox: name.clone(),
                member: member.to_owned(),
                passed,
                action,
                detail,
            };
            let sandbox = match self.service.open(&name).await {
                Ok(s) => s,
                Err(e) => {
                    // Gone between the list and now: nothing runs to stop.
                    out.push(done(false, "not found".into(), e.to_string()));
                    continue;
                }
            };
            match verifier.verify(sandbox.as_ref()).await {
                Ok(report) if report.passed => {
                    out.push(done(true, "kept running".into(), report.event.message));
                }
                Ok(report) => {
                    let action = verifier.stop_failed(sandbox.as_ref(), &report).await;
                    out.push(done(false, action, report.event.message.clone()));
                }
                Err(VerifyError::NotRunning { .. }) => {}
                Err(e) => {
                    // Could not verify: fail closed all the same.
                    let why = crate::error::chain(&e);
                    let stopped = sandbox
                        .stop(StopOptions {
                            force: true,
                            timeout: None,
                        })
                        .await;
                    let action = match &stopped {
                        Ok(()) => {
                            verifier.record_now(&Event::Stopped { name: name.clone() });
                            "stopped".to_owned()
                        }
                        Err(e) => format!("not stopped: {e}"),
                    };
                    verifier.record_now(&Event::Alert {
                        name: name.clone(),
                        reason: format!(
                            "cluster member {member} drained and the sandbox could not be verified ({why}); {action}"
                        ),
                    });
                    out.push(done(false, action, why));
                }
            }
        }
        out
    }
}
