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
//! port name → (start → ready: DHCP lease from the profile's gateway and
//! exec answering, while the template's context file is put in place
//! where the image has no cloud-init → [`Hooks::before_handout`]) → hand
//! out; a create left stopped gets its context file before it is handed
//! out. A failure after the binding deletes the sandbox again and unbinds
//! its port, so a failed create leaves nothing behind. Start and restart
//! check, besides the profile's enforcement, that the sandbox's NIC is
//! bound as applied; delete unbinds the port after the sandbox is gone. A clone
//! ([`SandboxService::clone_sandbox`]) takes the same path from the start
//! gate on, with the provider's copy (fresh identity) in place of its
//! create.
//!
//! The other verbs each live in a module named for what they touch:
//! [`copies`] (clone, export, import), [`snapshots`], [`files`] (push,
//! pull), [`terminal`] (shell), [`rename`].

pub mod copies;
pub mod files;
pub mod hatch;
mod ready;
pub mod rename;
pub mod snapshots;
mod spec;
pub mod terminal;

use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_egress::plan::PortBinding;
use corral_sandbox_core::sandbox::{
    BoundNic, ExecOutput, ExecRequest, ExecStreams, InstanceType, ProviderError, Sandbox,
    SandboxInfo, SandboxState, StopOptions,
};
use corral_sandbox_core::{Profile, ProfileName};
use serde::Serialize;

pub use ready::{Ready, wait_ready};
pub use spec::{
    ByteSize, CreatePlan, NewSandbox, Size, SizeError, default_profile, filled, plan, sandbox_name,
    spec_for,
};

use crate::error::ServiceError;
use crate::gate::{self, GatePass};
use crate::hooks::{Event, Hooks, NoHooks};
use crate::limits::HostCapacity;
use crate::provider::Backend;
use crate::settings::Settings;
use crate::templates::{self, Catalog, Rendered, TemplateApplied};

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
    /// The lifecycle under `settings` on `backend`, without extra stages.
    pub fn new(settings: Arc<Settings>, backend: Arc<Backend>) -> Self {
        Self {
            settings,
            backend,
            hooks: Arc::new(NoHooks),
        }
    }

    /// The same lifecycle with `hooks` added (canary, durable store).
    pub fn with_hooks(mut self, hooks: Arc<dyn Hooks>) -> Self {
        self.hooks = hooks;
        self
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

    /// Every template: the built-ins and the operator's files beside the
    /// configuration.
    pub fn templates(&self) -> Result<Catalog, ServiceError> {
        Ok(Catalog::for_origin(&self.settings.origin)?)
    }

    /// Create a sandbox (see the module docs for the pipeline).
    pub async fn create(
        &self,
        req: &NewSandbox,
        options: CreateOptions,
    ) -> Result<HandedOut, ServiceError> {
        let CreatePlan { mut spec, rendered } =
            plan(&self.settings.config, req, &self.templates()?)?;
        let capacity = HostCapacity::probe().map_err(|source| ProviderError::Io {
            context: "cannot read this host's CPUs and memory to check the resources asked for"
                .into(),
            source,
        })?;
        capacity.check(&spec.resources)?;
        let profile = spec.network.as_ref().map(|n| n.profile.clone());
        self.refuse_taken(&req.name).await?;
        let mut gate = self
            .gate_or_record(&req.name, profile.as_ref(), None)
            .await?;
        let provider = self.backend.provider().await?;
        // The claim is held until the provider has made the sandbox (its
        // NIC then names the port, which keeps a reconcile off it).
        let (binding, claim) = match (&profile, self.backend.binds_ports()) {
            (Some(p), true) => {
                let (b, c) = self.bind(p).await?;
                (Some(b), Some(c))
            }
            _ => (None, None),
        };
        if let (Some(net), Some(b)) = (spec.network.as_mut(), &binding) {
            net.nic = Some(b.nic());
        }
        if let Some(g) = gate.as_mut() {
            g.binding.clone_from(&binding);
        }
        let sandbox = match provider.create(&spec).await {
            Ok(s) => s,
            Err(e) => {
                self.release(binding.as_ref()).await;
                return Err(e.into());
            }
        };
        drop(claim);
        self.hooks
            .record(&Event::Created {
                name: req.name.clone(),
                kind: Some(sandbox.kind()),
                profile: profile.as_ref().map(ToString::to_string),
                owner: options.owner,
                template: Some(rendered.template.clone()),
                from: None,
            })
            .await;
        self.hand_out(
            sandbox,
            profile.as_ref(),
            gate,
            Some((&rendered, spec.instance_type)),
            None,
            options,
        )
        .await
    }

    /// Delete a sandbox whose create failed (a failure is logged: the
    /// original error is what the caller needs), then unbind its port.
    async fn discard(&self, sandbox: Box<dyn Sandbox>, binding: Option<&PortBinding>) {
        let name = sandbox.name().to_string();
        if let Err(d) = sandbox.delete().await {
            // Its port stays bound: the sandbox still has it.
            tracing::warn!(sandbox = %name, error = %d, "could not delete a sandbox whose create failed");
        } else {
            self.hooks.record(&Event::Deleted { name }).await;
            self.release(binding).await;
        }
    }

    /// Binds a fresh port on `profile` (blocking work, off the async
    /// threads).
    async fn bind(
        &self,
        profile: &ProfileName,
    ) -> Result<(PortBinding, crate::ports::PortClaim), ServiceError> {
        let settings = Arc::clone(&self.settings);
        let profile = profile.clone();
        // NICs the backend's sandboxes already carry (in every project):
        // never handed out twice.
        let in_use: Vec<BoundNic> = self
            .list()
            .await?
            .into_iter()
            .filter_map(|i| i.nic)
            .collect();
        tokio::task::spawn_blocking(move || {
            crate::ports::bind_new(
                settings.netns.as_deref(),
                &settings.state_dir,
                &profile,
                &in_use,
            )
        })
        .await
        .map_err(ServiceError::Worker)?
        .map_err(ServiceError::from)
    }

    /// Binds a fresh port on `profile` for the copy `sandbox` (a clone or
    /// an import, stopped, its NIC unbound) and gives its NIC that MAC and
    /// port name; the binding is released again if the NIC cannot take it.
    async fn bind_copy(
        &self,
        sandbox: &dyn Sandbox,
        profile: &ProfileName,
    ) -> Result<PortBinding, ServiceError> {
        // Claimed until the copy's NIC names the port (then a reconcile
        // sees the sandbox that uses it).
        let (binding, _claim) = self.bind(profile).await?;
        if let Err(e) = sandbox.bind_nic(&binding.nic()).await {
            self.release(Some(&binding)).await;
            return Err(e.into());
        }
        Ok(binding)
    }

    /// Removes the binding of `nic`'s port; the binding removed, if the
    /// record held it.
    async fn unbind(&self, nic: BoundNic) -> Result<Option<PortBinding>, ServiceError> {
        let settings = Arc::clone(&self.settings);
        tokio::task::spawn_blocking(move || {
            crate::ports::unbind(settings.netns.as_deref(), &settings.state_dir, &nic)
        })
        .await
        .map_err(ServiceError::Worker)?
        .map_err(ServiceError::from)
    }

    /// Unbinds a failed create's port; a failure is logged (the binding
    /// then only keeps its address taken).
    async fn release(&self, binding: Option<&PortBinding>) {
        let Some(b) = binding else { return };
        if let Err(e) = self.unbind(b.nic()).await {
            tracing::warn!(port = %b.port, error = %e, "could not unbind the port of a failed create");
        }
    }

    /// After the provider made `sandbox` (a create or a copy): put its
    /// template (`rendered`, a create's) in place and leave it stopped, or
    /// start it and hand it out; a failure deletes it again.
    async fn hand_out(
        &self,
        sandbox: Box<dyn Sandbox>,
        profile: Option<&ProfileName>,
        gate: Option<GatePass>,
        rendered: Option<(&Rendered, InstanceType)>,
        from: Option<String>,
        options: CreateOptions,
    ) -> Result<HandedOut, ServiceError> {
        // The port bound for it (a create's), released if it is discarded.
        let bound = gate.as_ref().and_then(|g| g.binding.clone());
        let binding = bound.as_ref();
        if !options.start {
            let done = async {
                let template = match rendered {
                    Some((r, t)) => Some(templates::apply::apply(sandbox.as_ref(), r, t).await?),
                    None => None,
                };
                Ok::<_, ProviderError>((sandbox.info().await?, template))
            }
            .await;
            let (info, template) = match done {
                Ok(d) => d,
                Err(e) => {
                    self.discard(sandbox, binding).await;
                    return Err(e.into());
                }
            };
            return Ok(HandedOut {
                info,
                gate,
                ready: None,
                template,
                from,
            });
        }
        match self
            .start_and_hand_out(sandbox.as_ref(), profile, rendered, options.ready_timeout)
            .await
        {
            Ok((info, ready, template)) => Ok(HandedOut {
                info,
                gate,
                ready: Some(ready),
                template,
                from,
            }),
            Err(e) => {
                // A create that failed leaves nothing behind.
                self.discard(sandbox, binding).await;
                Err(e)
            }
        }
    }

    /// Start; wait until ready while a fresh sandbox's template
    /// (`rendered`) is put in place (the file API takes a running
    /// container too, so neither waits for the other); run the hooks; on
    /// a hook refusal stop it.
    async fn start_and_hand_out(
        &self,
        sandbox: &dyn Sandbox,
        profile: Option<&ProfileName>,
        rendered: Option<(&Rendered, InstanceType)>,
        ready_timeout: Duration,
    ) -> Result<(SandboxInfo, Ready, Option<TemplateApplied>), ServiceError> {
        sandbox.start().await?;
        let profile = match profile {
            Some(p) => Some(self.profile(p.as_str())?),
            None => None,
        };
        let (ready, template) = tokio::try_join!(
            wait_ready(sandbox, profile, &self.settings.state_dir, ready_timeout),
            async {
                match rendered {
                    Some((r, t)) => Ok(Some(templates::apply::apply(sandbox, r, t).await?)),
                    None => Ok(None),
                }
            }
        )?;
        let info = sandbox.info().await?;
        if let Err(e) = self.hooks.before_handout(sandbox, &info).await {
            let _ = sandbox
                .stop(StopOptions {
                    force: true,
                    timeout: None,
                })
                .await;
            self.hooks
                .record(&Event::Refused {
                    name: info.name.to_string(),
                    reason: e.to_string(),
                })
                .await;
            return Err(e.into());
        }
        self.hooks
            .record(&Event::Started {
                name: info.name.to_string(),
            })
            .await;
        Ok((info, ready, template))
    }

    /// A handle on sandbox `name` (ownership checked by the provider), in
    /// whichever of corral's projects holds it.
    pub async fn open(&self, name: &str) -> Result<Box<dyn Sandbox>, ServiceError> {
        let name = sandbox_name(name)?;
        let providers = self.backend.providers().await?;
        let mut first = None;
        for p in &providers {
            match p.open(&name).await {
                Err(e @ ProviderError::NotFound { .. }) => {
                    first.get_or_insert(e);
                }
                other => return Ok(other?),
            }
        }
        Err(first
            .unwrap_or_else(|| ProviderError::NotFound {
                what: "sandbox",
                name: name.to_string(),
            })
            .into())
    }

    /// Every sandbox corral owns on the backend, in all of corral's
    /// projects.
    pub async fn list(&self) -> Result<Vec<SandboxInfo>, ServiceError> {
        let mut all = Vec::new();
        for p in self.backend.providers().await? {
            all.extend(p.list().await?);
        }
        Ok(all)
    }

    /// One sandbox's information.
    pub async fn info(&self, name: &str) -> Result<SandboxInfo, ServiceError> {
        Ok(self.open(name).await?.info().await?)
    }

    /// Start a stopped sandbox: the start gate for its (stamped) profile,
    /// the provider's topology check, then the hooks; waits until it is
    /// ready up to `ready_timeout`.
    pub async fn start(
        &self,
        name: &str,
        ready_timeout: Duration,
    ) -> Result<HandedOut, ServiceError> {
        let sandbox = self.open(name).await?;
        let info = sandbox.info().await?;
        let gate = self
            .gate_or_record(name, info.profile.as_ref(), self.binding_check(&info))
            .await?;
        let (info, ready, _) = self
            .start_and_hand_out(sandbox.as_ref(), info.profile.as_ref(), None, ready_timeout)
            .await?;
        Ok(HandedOut {
            info,
            gate,
            ready: Some(ready),
            template: None,
            from: None,
        })
    }

    /// Stop a sandbox. A timeout reports how long the stop really took
    /// (the backend's own shutdown deadline can end it before the wait).
    pub async fn stop(
        &self,
        name: &str,
        options: StopOptions,
    ) -> Result<SandboxInfo, ServiceError> {
        let sandbox = self.open(name).await?;
        let started = Instant::now();
        sandbox.stop(options).await.map_err(|e| match e {
            ProviderError::Timeout { .. } if !options.force => ProviderError::Timeout {
                operation: format!(
                    "a clean shutdown of sandbox `{name}` (stop it with force to kill it)"
                ),
                after: elapsed_ms(started),
            },
            e => real_elapsed(e, started),
        })?;
        self.hooks
            .record(&Event::Stopped {
                name: name.to_owned(),
            })
            .await;
        Ok(sandbox.info().await?)
    }

    /// Stop (when running) and start again, through the start gate.
    pub async fn restart(
        &self,
        name: &str,
        options: StopOptions,
        ready_timeout: Duration,
    ) -> Result<HandedOut, ServiceError> {
        let sandbox = self.open(name).await?;
        let info = sandbox.info().await?;
        // Check before stopping: a refused restart leaves it as it was.
        let gate = self
            .gate_or_record(name, info.profile.as_ref(), self.binding_check(&info))
            .await?;
        if info.state.can_stop() {
            sandbox.stop(options).await?;
        }
        let (info, ready, _) = self
            .start_and_hand_out(sandbox.as_ref(), info.profile.as_ref(), None, ready_timeout)
            .await?;
        Ok(HandedOut {
            info,
            gate,
            ready: Some(ready),
            template: None,
            from: None,
        })
    }

    /// Delete a sandbox and its snapshots (stopping it first), then unbind
    /// its port (its DHCP reservation and rules go, and the record). A
    /// sandbox that disappears while this runs (another delete won the
    /// race, and unbinds it) is `NotFound`, like one that was never there.
    pub async fn delete(&self, name: &str) -> Result<(), ServiceError> {
        let sandbox = self.open(name).await?;
        let nic = match self.backend.binds_ports() {
            true => sandbox.info().await?.nic,
            false => None,
        };
        if let Err(e) = sandbox.delete().await {
            if matches!(e, ProviderError::NotFound { .. }) {
                return Err(e.into());
            }
            return match self.open(name).await {
                Err(gone @ ServiceError::Provider(ProviderError::NotFound { .. })) => Err(gone),
                _ => Err(e.into()),
            };
        }
        self.hooks
            .record(&Event::Deleted {
                name: name.to_owned(),
            })
            .await;
        if let Some(nic) = nic {
            match self.unbind(nic.clone()).await {
                Ok(Some(_)) => {}
                Ok(None) => tracing::warn!(
                    sandbox = %name,
                    port = %nic.port,
                    state_dir = %self.settings.state_dir.display(),
                    "no binding of the deleted sandbox's port is recorded in this state directory"
                ),
                Err(source) => {
                    return Err(ServiceError::Unbind {
                        name: name.to_owned(),
                        source: Box::new(source),
                    });
                }
            }
        }
        Ok(())
    }

    /// Run a command with its standard streams connected to `streams`
    /// (live where the backend can); returns its exit status.
    pub async fn exec_streamed(
        &self,
        name: &str,
        request: &ExecRequest,
        streams: ExecStreams,
    ) -> Result<i32, ServiceError> {
        let sandbox = self.open(name).await?;
        if request.tty.is_some() {
            self.hooks
                .record(&Event::Shell {
                    name: name.to_owned(),
                })
                .await;
        }
        let started = Instant::now();
        sandbox
            .exec_streamed(request, streams)
            .await
            .map_err(|e| real_elapsed(e, started).into())
    }

    /// Run a command to completion and return what it printed.
    pub async fn exec(
        &self,
        name: &str,
        request: &ExecRequest,
    ) -> Result<ExecOutput, ServiceError> {
        let sandbox = self.open(name).await?;
        let started = Instant::now();
        sandbox
            .exec(request)
            .await
            .map_err(|e| real_elapsed(e, started).into())
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
