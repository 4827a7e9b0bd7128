//! What a drain does to the sandboxes already on the member: each running
//! profiled sandbox there is verified again (the canary, as `corral
//! verify` runs it) and stopped when the canary fails or cannot run — fail
//! closed. One that passes keeps running: its own enforcement is proven,
//! and the watchdog keeps verifying it; the drain only stops new
//! placements.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use corral_sandbox_core::sandbox::{Sandbox, SandboxState, StopOptions};
use serde::{Deserialize, Serialize};

use crate::SandboxService;
use crate::hooks::Event;
use crate::verify::{Verifier, VerifyError};

/// What the re-verification did to one sandbox of a drained member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reverified {
    /// The sandbox.
    pub sandbox: String,
    /// The member it runs on.
    pub member: String,
    /// Its canary passed.
    pub passed: bool,
    /// `kept running`, `stopped`, `not running`, or `not stopped: WHY`.
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

/// A member's own corral running the canary for a sandbox located on it
/// (its host side is where the sandbox's enforcement is): the verdict, and
/// what it did (a failing sandbox is stopped there), else why there was
/// no answer.
#[async_trait]
pub trait MemberCanary: Send + Sync {
    /// Ask `member` to verify `sandbox`.
    async fn verify(&self, member: &str, sandbox: &str) -> Result<Reverified, String>;
}

/// Re-verification through the canary (see the module docs).
#[derive(Clone)]
pub struct Reverifier {
    service: SandboxService,
    verifier: Verifier,
    by_member: BTreeMap<String, Verifier>,
    members: Option<Arc<dyn MemberCanary>>,
}

impl std::fmt::Debug for Reverifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reverifier")
            .field("verifier", &self.verifier)
            .field("by_member", &self.by_member)
            .field("members", &self.members.is_some())
            .finish_non_exhaustive()
    }
}

impl Reverifier {
    /// Sandboxes of `service`'s backend, verified through `verifier`.
    pub fn new(service: SandboxService, verifier: Verifier) -> Self {
        Self {
            service,
            verifier,
            by_member: BTreeMap::new(),
            members: None,
        }
    }

    /// Verify `member`'s sandboxes through `verifier` (whose host side is
    /// that member's namespace: a lab whose members share one kernel).
    pub fn with_member(mut self, member: impl Into<String>, verifier: Verifier) -> Self {
        self.by_member.insert(member.into(), verifier);
        self
    }

    /// Ask each drained member's own corral to verify its sandboxes
    /// (members on separate machines: this side cannot see their host
    /// side); a sandbox whose member does not answer is stopped from here.
    pub fn with_member_canary(mut self, members: Arc<dyn MemberCanary>) -> Self {
        self.members = Some(members);
        self
    }
}

/// Verify `sandbox` (named `name`, on `member`) through `verifier`: kept
/// running when its canary passes, else stopped (fail closed, also when
/// the canary cannot run); `None` when it is not running.
pub async fn reverify(
    verifier: &Verifier,
    member: &str,
    name: &str,
    sandbox: &dyn Sandbox,
) -> Option<Reverified> {
    let done = |passed, action: String, detail: String| Reverified {
        sandbox: name.to_owned(),
        member: member.to_owned(),
        passed,
        action,
        detail,
    };
    match verifier.verify(sandbox).await {
        Ok(report) if report.passed => {
            Some(done(true, "kept running".into(), report.event.message))
        }
        Ok(report) => {
            let action = verifier.stop_failed(sandbox, &report).await.action();
            Some(done(false, action, report.event.message.clone()))
        }
        Err(VerifyError::NotRunning { .. }) => None,
        Err(e) => {
            let why = format!(
                "the sandbox could not be verified ({})",
                crate::error::chain(&e)
            );
            Some(stop_unverified(verifier, member, name, sandbox, why).await)
        }
    }
}

/// Stop `sandbox` (on drained `member`) that could not be verified, for
/// `why`; recorded with an alert.
async fn stop_unverified(
    verifier: &Verifier,
    member: &str,
    name: &str,
    sandbox: &dyn Sandbox,
    why: String,
) -> Reverified {
    let stopped = sandbox
        .stop(StopOptions {
            force: true,
            timeout: None,
        })
        .await;
    let action = match &stopped {
        Ok(()) => {
            verifier.record_now(&Event::Stopped {
                name: name.to_owned(),
            });
            "stopped".to_owned()
        }
        Err(e) => format!("not stopped: {e}"),
    };
    verifier.record_now(&Event::Alert {
        name: name.to_owned(),
        reason: format!("cluster member {member} drained and {why}; {action}"),
    });
    Reverified {
        sandbox: name.to_owned(),
        member: member.to_owned(),
        passed: false,
        action,
        detail: why,
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
        let local = self.by_member.get(member);
        let verifier = local.unwrap_or(&self.verifier);
        let mut out = Vec::new();
        for info in list {
            if info.location.as_deref() != Some(member)
                || info.state != SandboxState::Running
                || info.profile.is_none()
            {
                continue;
            }
            let name = info.name.to_string();
            // The member's own corral first: it sees the sandbox's host side.
            let asked = match (&self.members, local) {
                (Some(members), None) => Some(members.verify(member, &name).await),
                _ => None,
            };
            let unanswered = match asked {
                Some(Ok(answer)) => {
                    // "not running": stopped meanwhile (by the member itself).
                    if !answer.passed && answer.action != "not running" {
                        verifier.record_now(&Event::Alert {
                            name: name.clone(),
                            reason: format!(
                                "cluster member {member} drained and its corrald's canary failed ({}); {}",
                                answer.detail, answer.action
                            ),
                        });
                    }
                    out.push(answer);
                    continue;
                }
                Some(Err(why)) => Some(why),
                None => None,
            };
            let sandbox = match self.service.open(&name).await {
                Ok(s) => s,
                Err(e) => {
                    // Gone between the list and now: nothing runs to stop.
                    out.push(Reverified {
                        sandbox: name,
                        member: member.to_owned(),
                        passed: false,
                        action: "not found".into(),
                        detail: e.to_string(),
                    });
                    continue;
                }
            };
            let done = match unanswered {
                // No verdict from the member: fail closed.
                Some(why) => Some(
                    stop_unverified(
                        verifier,
                        member,
                        &name,
                        sandbox.as_ref(),
                        format!("its corrald did not verify the sandbox ({why})"),
                    )
                    .await,
                ),
                None => reverify(verifier, member, &name, sandbox.as_ref()).await,
            };
            out.extend(done);
        }
        out
    }
}
