//! Sandbox operations both front-ends call. Every operation that names a
//! sandbox goes through the provider's `open`, which checks corral's
//! ownership stamp; every create and start of a profiled sandbox passes the
//! start gate first.
//!
//! Create pipeline ([`SandboxService::create`]):
//! the template looked up and rendered (image, resources, cloud-init
//! user-data) → check the request (resources no bigger than the host) →
//! start gate → bind its port (on a local corral bridge: MAC, address and
//! port name chosen by corral, the DHCP reservation and the rules in force
//! and recorded, see [`crate::ports`]) → provider create with that MAC and
//! port name (and start, in the same step when the create starts at once:
//! [`create_started`]) → (ready: DHCP lease from the profile's gateway and
//! exec answering, while the template's context file is put in place where
//! the image has no cloud-init → [`Hooks::before_handout`]) → hand
//! out; a create left stopped gets its context file before it is handed
//! out. A failure after the binding deletes the sandbox again and unbinds
//! its port, so a failed create leaves nothing behind. Start and restart
//! check, besides the profile's enforcement, that the sandbox's NIC is
//! bound as applied; delete unbinds the port after the sandbox is gone. A clone
//! ([`SandboxService::clone_sandbox`]) takes the same path from the start
//! gate on, with the provider's copy (fresh identity) in place of its
//! create.
//!
//! The pipeline lives in `create` (and the port binding in `binding`);
//! open, list, power, delete and exec in `lifecycle`. The other verbs each
//! live in a module named for what they touch: [`copies`] (clone, export,
//! import), [`snapshots`], [`files`] (push, pull), [`terminal`] (shell),
//! [`rename`].
//!
//! [`create_started`]: corral_sandbox_core::sandbox::SandboxProvider::create_started

mod binding;
pub mod copies;
mod create;
pub mod files;
pub mod hatch;
mod lifecycle;
mod ready;
pub mod rename;
pub mod snapshots;
mod spec;
pub mod terminal;

use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_sandbox_core::sandbox::{BoundNic, ProviderError, SandboxInfo, SandboxState};
use corral_sandbox_core::{Profile, ProfileName};
use serde::Serialize;

pub use create::Placed;
pub use ready::{Ready, Steps, wait_ready, wait_ready_with_info};
pub use spec::{
    ByteSize, CreatePlan, NewSandbox, Size, SizeError, default_profile, filled, plan, sandbox_name,
    spec_for,
};

use crate::error::ServiceError;
use crate::gate::{self, GatePass};
use crate::hooks::{DefaultCanary, Event, Hooks, WithoutCanary};
use crate::provider::Backend;
use crate::settings::Settings;
use crate::templates::TemplateApplied;

/// How long a create waits for readiness unless told otherwise.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How a create proceeds after the provider made the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreateOptions {
    /// Start it, wait until it is ready and run the hooks; otherwise leave
    /// it stopped.
    pub start: bool,
    /// How long to wait for readiness.
    pub ready_timeout: Duration,
    /// The uid the sandbox is recorded as belonging to (the caller who
    /// asked for it); restricted callers act on their own sandboxes only.
    pub owner: Option<u32>,
}

impl Default for CreateOptions {
    fn default() -> Self {
        Self {
            start: true,
            ready_timeout: DEFAULT_READY_TIMEOUT,
            owner: None,
        }
    }
}

/// A sandbox the service handed out.
#[derive(Debug, Clone, Serialize)]
pub struct HandedOut {
    /// Its state after the operation.
    pub info: SandboxInfo,
    /// What the start gate checked (profiled sandboxes).
    pub gate: Option<GatePass>,
    /// What readiness found (started creates).
    pub ready: Option<Ready>,
    /// What became of its template (started creates).
    pub template: Option<TemplateApplied>,
    /// What it is a copy of (clones): `SRC` or `SRC/SNAP`.
    pub from: Option<String>,
}

/// The sandbox lifecycle on the selected provider.
#[derive(Debug, Clone)]
pub struct SandboxService {
    settings: Arc<Settings>,
    backend: Arc<Backend>,
    hooks: Arc<dyn Hooks>,
}

impl SandboxService {
    /// The lifecycle under `settings` on `backend`, with the canary: every
    /// profiled sandbox is verified before it is handed out, its judgement
    /// recorded in the store under `settings.state_dir` (opened on first
    /// use; a store that cannot be opened refuses the hand-out). Opt out
    /// by name with [`Self::without_canary`].
    pub fn new(settings: Arc<Settings>, backend: Arc<Backend>) -> Self {
        let hooks = Arc::new(DefaultCanary::new(
            Arc::clone(&settings),
            Arc::clone(&backend),
        ));
        Self {
            settings,
            backend,
            hooks,
        }
    }

    /// The same lifecycle with `hooks` in place of the default canary
    /// (a configured [`crate::verify::Verifier`], an audit stream).
    pub fn with_hooks(mut self, hooks: Arc<dyn Hooks>) -> Self {
        self.hooks = hooks;
        self
    }

    /// The same lifecycle handing sandboxes out without the canary, for
    /// `reason` (logged at each hand-out it skips): the opt-out is named,
    /// never a default.
    pub fn without_canary(mut self, reason: impl Into<String>) -> Self {
        self.hooks = Arc::new(WithoutCanary {
            reason: reason.into(),
        });
        self
    }

    /// The stages this lifecycle runs (the default canary, the caller's
    /// hooks, or the named opt-out).
    pub fn hooks(&self) -> &Arc<dyn Hooks> {
        &self.hooks
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The provider backend.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The same lifecycle creating in the granted user's Incus project
    /// `project` (every other operation finds a sandbox in whichever of
    /// corral's projects holds it). `None` for a provider the embedder
    /// built, which has no projects.
    pub fn in_project(&self, project: &str) -> Option<Self> {
        Some(Self {
            settings: Arc::clone(&self.settings),
            backend: Arc::new(self.backend.in_project(project)?),
            hooks: Arc::clone(&self.hooks),
        })
    }

    /// Refuse `name` when any of corral's projects holds an instance of
    /// that name: names are corral-wide (port bindings and records are
    /// keyed by them), though Incus scopes them to a project.
    pub(crate) async fn refuse_taken(&self, name: &str) -> Result<(), ServiceError> {
        let name = sandbox_name(name)?;
        for p in self.backend.providers().await? {
            match p.open(&name).await {
                Err(ProviderError::NotFound { .. }) => {}
                Ok(_) | Err(ProviderError::NotOwned { .. }) => {
                    return Err(ProviderError::AlreadyExists {
                        what: "sandbox",
                        name: name.to_string(),
                    }
                    .into());
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// The configured profile `name`, or `UnknownProfile`.
    fn profile(&self, name: &str) -> Result<&Profile, ServiceError> {
        self.settings.config.profiles.get(name).ok_or_else(|| {
            ServiceError::Provider(ProviderError::UnknownProfile {
                profile: name.to_owned(),
                configured: self.settings.config.profiles.names(),
            })
        })
    }

    /// The start gate for `profile` (blocking netlink work, run off the
    /// async threads).
    pub async fn gate(&self, profile: &ProfileName) -> Result<GatePass, ServiceError> {
        self.gate_for(profile, None).await
    }

    /// The start gate, and with `nic` the port binding of a sandbox whose
    /// NIC carries `nic.0` (see [`gate::check_sandbox`]).
    async fn gate_for(
        &self,
        profile: &ProfileName,
        nic: Option<Option<BoundNic>>,
    ) -> Result<GatePass, ServiceError> {
        let settings = Arc::clone(&self.settings);
        let profile = profile.clone();
        let result = tokio::task::spawn_blocking(move || match nic {
            None => gate::check(
                &settings.config,
                &profile,
                settings.netns.as_deref(),
                &settings.state_dir,
            ),
            Some(nic) => gate::check_sandbox(
                &settings.config,
                &profile,
                nic.as_ref(),
                settings.netns.as_deref(),
                &settings.state_dir,
            ),
        })
        .await
        .map_err(ServiceError::Worker)?;
        result.map_err(ServiceError::from)
    }

    /// What the gate holds a start of `info` to besides its profile: the
    /// binding its NIC carries, where the backend's NICs land on this
    /// host's bridges.
    fn binding_check(&self, info: &SandboxInfo) -> Option<Option<BoundNic>> {
        self.backend.binds_ports().then(|| info.nic.clone())
    }

    async fn gate_or_record(
        &self,
        name: &str,
        profile: Option<&ProfileName>,
        nic: Option<Option<BoundNic>>,
    ) -> Result<Option<GatePass>, ServiceError> {
        let Some(profile) = profile else {
            return Ok(None);
        };
        match self.gate_for(profile, nic).await {
            Ok(pass) => Ok(Some(pass)),
            Err(e) => {
                if let Some(r) = e.refusal() {
                    self.hooks
                        .record(&Event::Refused {
                            name: name.to_owned(),
                            reason: r.to_string(),
                        })
                        .await;
                }
                Err(e)
            }
        }
    }
}

/// Time since `started`, to the millisecond (what a caller reads).
fn elapsed_ms(started: Instant) -> Duration {
    Duration::from_millis(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX))
}

/// A timeout carries the bound the provider waited for, which can differ
/// from how long the caller waited: report the latter.
fn real_elapsed(e: ProviderError, started: Instant) -> ProviderError {
    match e {
        ProviderError::Timeout { operation, .. } => ProviderError::Timeout {
            operation,
            after: elapsed_ms(started),
        },
        e => e,
    }
}

/// True when `state` is one a start applies to (used by `--all`).
pub fn startable(state: SandboxState) -> bool {
    state.can_start()
}
