//! What the watch asks of the sandboxes in scope of a drift: re-verify them
//! after a heal, stop them after a cut. A trait, so a host without a
//! sandbox backend still watches its kernel, and so corrald can hand the
//! re-verification to its watchdog.

use std::fmt;
use std::sync::Arc;

use corral_sandbox_core::sandbox::{SandboxState, StopOptions};

use crate::sandboxes::SandboxService;

/// One sandbox the watch stopped, or could not stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    /// The sandbox.
    pub sandbox: String,
    /// Its profile.
    pub profile: String,
    /// `None` when it stopped; otherwise why not.
    pub error: Option<String>,
}

/// The sandboxes of the profiles a drift touched.
pub trait Affected: Send + Sync + fmt::Debug {
    /// After a heal: run the canary of the running sandboxes of `profiles`
    /// again (their enforcement was off for a moment). Must not block for
    /// long: the watch goes on listening.
    fn reverify(&self, profiles: &[String]);

    /// After a cut: stop every running sandbox of `profiles`, and say how
    /// each went.
    fn stop(&self, profiles: &[String]) -> Vec<Stopped>;
}

/// No sandbox backend: nothing to re-verify or stop (the ports are cut
/// all the same).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSandboxes;

impl Affected for NoSandboxes {
    fn reverify(&self, _profiles: &[String]) {}

    fn stop(&self, _profiles: &[String]) -> Vec<Stopped> {
        Vec::new()
    }
}

/// Re-verification of the sandboxes of some profiles (corrald plugs its
/// watchdog in here).
pub type Reverify = Arc<dyn Fn(&[String]) + Send + Sync>;

/// The sandboxes of a [`SandboxService`]: stopped through it (forced: a
/// sandbox whose enforcement drifted gets no clean shutdown), re-verified
/// through `reverify` when one is given.
pub struct ServiceSandboxes {
    service: SandboxService,
    runtime: tokio::runtime::Handle,
    reverify: Option<Reverify>,
}

impl fmt::Debug for ServiceSandboxes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceSandboxes")
            .field("reverify", &self.reverify.is_some())
            .finish_non_exhaustive()
    }
}

impl ServiceSandboxes {
    /// Through `service`, on `runtime` (the watch runs on a thread of its
    /// own); `reverify` runs the affected sandboxes' canary.
    pub fn new(
        service: SandboxService,
        runtime: tokio::runtime::Handle,
        reverify: Option<Reverify>,
    ) -> Self {
        Self {
            service,
            runtime,
            reverify,
        }
    }
}

impl ServiceSandboxes {
    /// Through `service`, re-verifying with `verifier`'s canary: every
    /// running sandbox of a healed profile is verified again, and one that
    /// fails is stopped with an alert (as the watchdog does). The runs go
    /// on in the background on `runtime`.
    pub fn with_canary(
        service: SandboxService,
        verifier: crate::Verifier,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        let (svc, handle) = (service.clone(), runtime.clone());
        let reverify: Reverify = Arc::new(move |profiles: &[String]| {
            let (svc, verifier, profiles) = (svc.clone(), verifier.clone(), profiles.to_vec());
            handle.spawn(async move { canary(&svc, &verifier, &profiles).await });
        });
        Self::new(service, runtime, Some(reverify))
    }
}

async fn canary(svc: &SandboxService, verifier: &crate::Verifier, profiles: &[String]) {
    let list = match svc.list().await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "kernel watch: cannot list the sandboxes to re-verify");
            return;
        }
    };
    for info in list {
        let on = info
            .profile
            .as_ref()
            .is_some_and(|p| profiles.contains(&p.to_string()));
        if !on || info.state != SandboxState::Running {
            continue;
        }
        let name = info.name.to_string();
        match verifier.verify_named(svc, &name).await {
            Ok(r) if r.passed => {
                tracing::info!(sandbox = %name, "kernel watch: re-verified after the heal: passed");
            }
            Ok(r) => tracing::error!(
                sandbox = %name,
                action = r.action.unwrap_or_default(),
                "kernel watch: re-verified after the heal: FAILED"
            ),
            Err(e) => tracing::error!(
                sandbox = %name,
                error = %crate::error::chain(&e),
                "kernel watch: re-verification after the heal could not run"
            ),
        }
    }
}

impl Affected for ServiceSandboxes {
    fn reverify(&self, profiles: &[String]) {
        match &self.reverify {
            Some(f) => f(profiles),
            None => tracing::warn!(
                profiles = profiles.join(","),
                "kernel watch: healed, but nothing here re-runs the canary (corrald's watchdog does)"
            ),
        }
    }

    fn stop(&self, profiles: &[String]) -> Vec<Stopped> {
        self.runtime.block_on(async {
            let list = match self.service.list().await {
                Ok(l) => l,
                Err(e) => {
                    return vec![Stopped {
                        sandbox: "*".to_owned(),
                        profile: profiles.join(","),
                        error: Some(format!(
                            "cannot list the sandboxes to stop: {}",
                            crate::error::chain(&e)
                        )),
                    }];
                }
            };
            let mut out = Vec::new();
            for info in list {
                let Some(profile) = info.profile.as_ref().map(ToString::to_string) else {
                    continue;
                };
                if info.state != SandboxState::Running || !profiles.contains(&profile) {
                    continue;
                }
                let name = info.name.to_string();
                let options = StopOptions {
                    force: true,
                    timeout: None,
                };
                let error = self
                    .service
                    .stop(&name, options)
                    .await
                    .err()
                    .map(|e| crate::error::chain(&e));
                out.push(Stopped {
                    sandbox: name,
                    profile,
                    error,
                });
            }
            out
        })
    }
}
