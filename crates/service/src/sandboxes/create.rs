//! Creating a sandbox: the template, the create pipeline and the hand-out
//! (start, ready, context file, hooks).

use super::{
    CreateOptions, CreatePlan, HandedOut, NewSandbox, Ready, SandboxService, plan,
    wait_ready_with_info,
};
use crate::error::ServiceError;
use crate::gate::GatePass;
use crate::hooks::Event;
use crate::limits::HostCapacity;
use crate::templates::{self, Catalog, Rendered, TemplateApplied};
use corral_egress::plan::PortBinding;
use corral_sandbox_core::ProfileName;
use corral_sandbox_core::sandbox::{
    InstanceType, ProviderError, Sandbox, SandboxInfo, StopOptions,
};
use std::time::{Duration, Instant};

impl SandboxService {
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
        let asked = Instant::now();
        let CreatePlan {
            mut spec,
            rendered,
            lifetime,
        } = plan(&self.settings.config, req, &self.templates()?)?;
        let capacity = HostCapacity::probe().map_err(|source| ProviderError::Io {
            context: "cannot read this host's CPUs and memory to check the resources asked for"
                .into(),
            source,
        })?;
        capacity.check(&spec.resources)?;
        let profile = spec.network.as_ref().map(|n| n.profile.clone());
        self.refuse_taken(&req.name).await?;
        if profile.is_some()
            && let Some(placed) = self.place_on_cluster(&mut spec.target).await?
        {
            placed.here(&req.name)?;
        }
        let mut gate = self
            .gate_or_record(&req.name, profile.as_ref(), None)
            .await?;
        let provider = self.backend.provider().await?;
        refuse_disk_beyond(provider, spec.resources.disk_gib).await?;
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
        // A create that starts at once asks the backend for both in one
        // step (Incus: one request, cheaper than a create and a start).
        let made = if options.start {
            provider
                .create_started(&spec)
                .await
                .map(|m| (m.sandbox, Some(m.started)))
        } else {
            provider.create(&spec).await.map(|s| (s, None))
        };
        let (sandbox, started) = match made {
            Ok(m) => m,
            Err(e) => {
                self.release(binding.as_ref()).await;
                return Err(e.into());
            }
        };
        drop(claim);
        let created = Event::Created {
            name: req.name.clone(),
            kind: Some(sandbox.kind()),
            profile: profile.as_ref().map(ToString::to_string),
            owner: options.owner,
            template: Some(rendered.template.clone()),
            from: None,
            ttl_secs: lifetime.ttl_secs,
            idle_stop_secs: lifetime.idle_stop_secs,
        };
        self.hand_out(
            sandbox,
            Fresh {
                created: &created,
                started,
                create_ms: Some(ms_since(asked)),
            },
            profile.as_ref(),
            gate,
            Some((&rendered, spec.instance_type)),
            None,
            options,
        )
        .await
    }

    /// On an Incus cluster, profiled work goes only to a member in
    /// rotation with a fresh attestation (the standings the controller
    /// wrote): `target` is checked, or chosen when absent (this member
    /// when it may take the work: its own kernel then holds the rules).
    /// Where it goes and where this corral runs; off a cluster nothing
    /// changes (`None`).
    async fn place_on_cluster(
        &self,
        target: &mut Option<String>,
    ) -> Result<Option<Placed>, ServiceError> {
        let Some(members) = self.backend.cluster_members().await? else {
            return Ok(None);
        };
        let local = self.backend.local_member().await?;
        let now = std::time::SystemTime::now();
        let state_dir = &self.settings.state_dir;
        let here = match (target.as_deref(), local.as_deref()) {
            (None, Some(l)) => crate::cluster::place(state_dir, &members, Some(l), now).ok(),
            _ => None,
        };
        let chosen = match here {
            Some(l) => l,
            None => crate::cluster::place(state_dir, &members, target.as_deref(), now)?,
        };
        *target = Some(chosen.clone());
        Ok(local.map(|local| Placed {
            member: chosen,
            local,
        }))
    }

    /// Where a create of `req` would go: on an Incus cluster with a
    /// profile, the member placement picks (refused as the create would
    /// be) and the one this corral runs on, once the name is known to be
    /// free (taken: refused as a create is); `None` off a cluster or
    /// without a profile. A caller that can reach the member's corral
    /// (corrald with `--cluster`) asks it when they differ.
    pub async fn placement(&self, req: &NewSandbox) -> Result<Option<Placed>, ServiceError> {
        self.refuse_taken(&req.name).await?;
        let CreatePlan { mut spec, .. } = plan(&self.settings.config, req, &self.templates()?)?;
        if spec.network.is_none() {
            return Ok(None);
        }
        self.place_on_cluster(&mut spec.target).await
    }

    /// The member `info`'s sandbox is on when it is profiled and that is
    /// not the member this corral runs on (its gate and canary belong
    /// there); `None` otherwise.
    pub async fn located_elsewhere(
        &self,
        info: &SandboxInfo,
    ) -> Result<Option<Placed>, ServiceError> {
        let (Some(_), Some(member)) = (&info.profile, &info.location) else {
            return Ok(None);
        };
        let Some(local) = self.backend.local_member().await? else {
            return Ok(None);
        };
        Ok((*member != local).then(|| Placed {
            member: member.clone(),
            local,
        }))
    }

    /// A profiled sandbox already on a cluster member starts only while
    /// that member is in rotation with a fresh attestation (a start is a
    /// placement of profiled work: a drained member's stopped sandboxes
    /// stay stopped) and only through that member's corral (its gate and
    /// canary run on its kernel). A refusal is recorded like the start
    /// gate's.
    pub(super) async fn refuse_unattested_member(
        &self,
        name: &str,
        info: &SandboxInfo,
    ) -> Result<(), ServiceError> {
        let (Some(_), Some(member)) = (&info.profile, &info.location) else {
            return Ok(());
        };
        let mut target = Some(member.clone());
        let placed = async {
            match self.place_on_cluster(&mut target).await? {
                Some(p) => p.here(name),
                None => Ok(()),
            }
        };
        match placed.await {
            Ok(()) => Ok(()),
            Err(e) => {
                if matches!(
                    e,
                    ServiceError::Placement(_) | ServiceError::OnAnotherMember { .. }
                ) {
                    self.hooks
                        .record(&Event::Refused {
                            name: name.to_owned(),
                            reason: e.to_string(),
                        })
                        .await;
                }
                Err(e)
            }
        }
    }

    /// Delete a sandbox whose create failed (a failure is logged: the
    /// original error is what the caller needs), then unbind its port.
    pub(super) async fn discard(&self, sandbox: Box<dyn Sandbox>, binding: Option<&PortBinding>) {
        let name = sandbox.name().to_string();
        if let Err(d) = sandbox.delete().await {
            // Its port stays bound: the sandbox still has it.
            tracing::warn!(sandbox = %name, error = %d, "could not delete a sandbox whose create failed");
        } else {
            self.hooks.record(&Event::Deleted { name }).await;
            self.release(binding).await;
        }
    }

    /// After the provider made `sandbox` (a create or a copy): record its
    /// creation, then put its template (`rendered`, a create's) in place
    /// and leave it stopped, or start it unless the provider did
    /// (recording the creation meanwhile) and hand it out; a failure
    /// deletes it again.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn hand_out(
        &self,
        sandbox: Box<dyn Sandbox>,
        fresh: Fresh<'_>,
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
            self.hooks.record(fresh.created).await;
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
            .start_and_hand_out(
                sandbox.as_ref(),
                Some(fresh),
                profile,
                rendered,
                options.ready_timeout,
            )
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

    /// Start (a fresh sandbox's creation is recorded meanwhile; one the
    /// provider started as it made it is not started again); wait until
    /// ready (its state is read meanwhile), while a fresh sandbox's
    /// template (`rendered`) is put in place (the file API takes a running
    /// container too, so neither waits for the other); run the hooks; on
    /// a hook refusal stop it.
    pub(super) async fn start_and_hand_out(
        &self,
        sandbox: &dyn Sandbox,
        fresh: Option<Fresh<'_>>,
        profile: Option<&ProfileName>,
        rendered: Option<(&Rendered, InstanceType)>,
        ready_timeout: Duration,
    ) -> Result<(SandboxInfo, Ready, Option<TemplateApplied>), ServiceError> {
        let (created, done, create_ms) = match fresh {
            Some(f) => (Some(f.created), f.started, f.create_ms),
            None => (None, None, None),
        };
        // A fresh sandbox's `created` vouches for its start already.
        if created.is_none() {
            self.hooks
                .record(&Event::Starting {
                    name: sandbox.name().to_string(),
                })
                .await;
        }
        let start_began = Instant::now();
        let start_ms = done.is_none().then_some(());
        let (started, ()) = tokio::join!(
            async {
                match done {
                    Some(result) => result,
                    None => sandbox.start().await,
                }
            },
            async {
                if let Some(event) = created {
                    self.hooks.record(event).await;
                }
            }
        );
        started?;
        let start_ms = start_ms.map(|()| ms_since(start_began));
        let profile = match profile {
            Some(p) => Some(self.profile(p.as_str())?),
            None => None,
        };
        let ((ready, info), template) = tokio::try_join!(
            wait_ready_with_info(sandbox, profile, &self.settings.state_dir, ready_timeout),
            async {
                match rendered {
                    Some((r, t)) => Ok(Some(templates::apply::apply(sandbox, r, t).await?)),
                    None => Ok(None),
                }
            }
        )?;
        let checks_began = Instant::now();
        let checked = self.hooks.before_handout(sandbox, &info).await;
        let mut ready = ready;
        ready.steps.create_ms = create_ms;
        ready.steps.start_ms = start_ms;
        ready.steps.canary_ms = ms_since(checks_began);
        if let Err(e) = checked {
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
}

/// Where profiled work goes on an Incus cluster, and where this corral
/// runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// The member it goes to (or is on).
    pub member: String,
    /// The member this corral's Incus daemon is.
    pub local: String,
}

impl Placed {
    /// `Ok` when the work is on this member; else the refusal for
    /// `sandbox` (nothing is done here for another member's kernel).
    pub fn here(&self, sandbox: &str) -> Result<(), ServiceError> {
        if self.member == self.local {
            return Ok(());
        }
        Err(ServiceError::OnAnotherMember {
            sandbox: sandbox.to_owned(),
            member: self.member.clone(),
            local: self.local.clone(),
        })
    }
}

/// A sandbox the provider just made: its creation event (recorded before
/// it is handed out) and, when the provider started it as it made it, how
/// that start went.
pub(super) struct Fresh<'a> {
    pub(super) created: &'a Event,
    pub(super) started: Option<Result<(), ProviderError>>,
    /// From the request until the provider had made it.
    pub(super) create_ms: Option<u64>,
}

fn ms_since(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// A root disk larger than the backend's free space is refused before
/// anything is made (a dir-backed pool would take it and fill the host).
async fn refuse_disk_beyond(
    provider: &dyn corral_sandbox_core::sandbox::SandboxProvider,
    disk_gib: Option<u64>,
) -> Result<(), ProviderError> {
    const GIB: u64 = 1024 * 1024 * 1024;
    let Some(gib) = disk_gib else { return Ok(()) };
    let Some(free) = provider.disk_free().await? else {
        return Ok(());
    };
    if gib.saturating_mul(GIB) > free {
        return Err(ProviderError::InvalidSpec {
            field: "resources.disk_gib",
            reason: format!(
                "{gib} GiB asked; the backend's storage has {} GiB free, so ask for at most that",
                free / GIB
            ),
        });
    }
    Ok(())
}
