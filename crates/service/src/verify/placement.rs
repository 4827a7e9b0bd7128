//! Placing profiled work on a kind and, when a sandbox fails its canary,
//! placing it again — built on sandbox-core's `place` and
//! `replace_after_failure`: candidates ranked by the trust order, demoted
//! kinds skipped (the gate is read from the store each time, so the
//! demotion the failed canary just committed counts), the failed kind left
//! out, and nothing ever placed on a kind that is neither enforced nor
//! about to be verified. A canary failure on the last candidate leaves the
//! work unplaced; it never runs unverified.

use corral_sandbox_core::placement::{
    PlacementError, PlacementRequest, place, replace_after_failure,
};
use corral_sandbox_core::sandbox::InstanceType;
use corral_sandbox_core::{HostOs, Isolation, SandboxKind};
use serde::Serialize;

use super::{CHECK, Verifier};
use crate::error::ServiceError;
use crate::sandboxes::{CreateOptions, HandedOut, NewSandbox};
use crate::{SandboxService, StoreError};

/// One kind that was tried and failed the canary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attempt {
    /// The kind.
    pub kind: SandboxKind,
    /// Why its sandbox was refused.
    pub reason: String,
}

/// Where the work landed.
#[derive(Debug, Clone, Serialize)]
pub struct Placed {
    /// The kind that took it.
    pub kind: SandboxKind,
    /// The sandbox, handed out.
    pub handed: HandedOut,
    /// Kinds tried before, whose sandboxes failed the canary (and were disposed of).
    pub attempts: Vec<Attempt>,
}

/// The work could not be placed.
#[derive(Debug, thiserror::Error)]
pub enum PlaceError {
    /// No kind is left that may take it.
    #[error("{source}{}", tried(attempts))]
    NoKind {
        /// Kinds whose sandboxes failed the canary.
        attempts: Vec<Attempt>,
        /// sandbox-core's answer (every kind with why it was left out).
        #[source]
        source: PlacementError,
    },
    /// A create failed for another reason than the canary.
    #[error("creating the sandbox on {kind}{}", tried(attempts))]
    Service {
        /// The kind.
        kind: SandboxKind,
        /// Kinds tried before.
        attempts: Vec<Attempt>,
        /// The cause.
        #[source]
        source: ServiceError,
    },
    /// The gate could not be read.
    #[error("reading the verification gate")]
    Store(#[from] StoreError),
}

fn tried(attempts: &[Attempt]) -> String {
    if attempts.is_empty() {
        return String::new();
    }
    let list: Vec<String> = attempts
        .iter()
        .map(|a| format!("{} ({})", a.kind, a.reason))
        .collect();
    format!(
        "; tried and disposed of after a failed canary: {}",
        list.join(", ")
    )
}

/// The kinds this host can create sandboxes on, each with its lifecycle.
#[derive(Debug, Clone)]
pub struct Placer {
    host_os: HostOs,
    services: Vec<SandboxService>,
    verifier: Verifier,
}

impl Placer {
    /// Place on `services` (the operator's order of preference; each
    /// service's backend names its kind), judging through `verifier`.
    pub fn new(host_os: HostOs, services: Vec<SandboxService>, verifier: Verifier) -> Self {
        Self {
            host_os,
            services,
            verifier,
        }
    }

    fn kinds(&self) -> Vec<SandboxKind> {
        self.services
            .iter()
            .map(|s| s.backend().selection().kind)
            .collect()
    }

    fn service(&self, kind: SandboxKind) -> Option<&SandboxService> {
        self.services
            .iter()
            .find(|s| s.backend().selection().kind == kind)
    }

    /// Create `req` on the best kind; after a failed canary (the sandbox is
    /// already disposed of, and an opted-in kind demoted), on the next.
    pub async fn create(
        &self,
        req: &NewSandbox,
        options: CreateOptions,
    ) -> Result<Placed, PlaceError> {
        let kinds = self.kinds();
        let Some(first) = self.services.first() else {
            return Err(PlaceError::NoKind {
                attempts: Vec::new(),
                source: PlacementError {
                    skipped: Vec::new(),
                },
            });
        };
        let config = &first.settings().config;
        let profiled = spec_profiled(first, req);
        let mut attempts: Vec<Attempt> = Vec::new();
        let mut failed: Option<SandboxKind> = None;
        loop {
            let gate = self.verifier.store().gate(&config.host.verification)?;
            let now = self.verifier.clock().now();
            let exclude: Vec<SandboxKind> = attempts.iter().map(|a| a.kind).collect();
            let request = PlacementRequest {
                host_os: self.host_os,
                candidates: &kinds,
                host: &config.host,
                gate: &gate,
                now,
                profiled,
                exclude: &exclude,
            };
            let placed = match failed {
                None => place(&request),
                Some(kind) => replace_after_failure(&request, kind),
            };
            let placement = placed.map_err(|source| PlaceError::NoKind {
                attempts: attempts.clone(),
                source,
            })?;
            // `place` answers an error rather than an empty ranking, and the
            // candidates are exactly the services' kinds.
            let best = placement.best().map(|c| c.kind);
            let Some((kind, service)) = best.and_then(|k| Some((k, self.service(k)?))) else {
                return Err(PlaceError::NoKind {
                    attempts,
                    source: PlacementError {
                        skipped: placement.skipped,
                    },
                });
            };
            match service.create(&request_for(service, req), options).await {
                Ok(handed) => {
                    return Ok(Placed {
                        kind,
                        handed,
                        attempts,
                    });
                }
                Err(ServiceError::Hook(h)) if h.check == CHECK => {
                    tracing::warn!(%kind, "canary failed; placing the work again: {}", h.reason);
                    attempts.push(Attempt {
                        kind,
                        reason: h.reason,
                    });
                    failed = Some(kind);
                }
                Err(source) => {
                    return Err(PlaceError::Service {
                        kind,
                        attempts,
                        source,
                    });
                }
            }
        }
    }
}

/// `req` as `service`'s kind can take it: a kind whose sandboxes always
/// have their own kernel (Multipass, Tart) is asked for a VM.
fn request_for(service: &SandboxService, req: &NewSandbox) -> NewSandbox {
    let mut out = req.clone();
    if service.backend().selection().isolation == Isolation::DedicatedKernel {
        out.instance_type = InstanceType::Vm;
    }
    out
}

/// A request without a profile still lands on a profile when the
/// configuration gives the `work` phase one (the service's default rule).
fn spec_profiled(service: &SandboxService, req: &NewSandbox) -> bool {
    crate::sandboxes::spec_for(&service.settings().config, req)
        .map(|s| s.network.is_some())
        .unwrap_or(true)
}
