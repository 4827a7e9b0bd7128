//! Opening, listing, starting, stopping, deleting and running commands in
//! existing sandboxes.

use super::{HandedOut, SandboxService, elapsed_ms, real_elapsed, sandbox_name};
use crate::error::ServiceError;
use crate::gate::GatePass;
use crate::hooks::Event;
use corral_sandbox_core::sandbox::{
    ExecOutput, ExecRequest, ExecStreams, ProviderError, Sandbox, SandboxInfo, StopOptions,
};
use std::time::{Duration, Instant};

impl SandboxService {
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
        let gate = self.admit(name, &info).await?;
        self.start_admitted(sandbox.as_ref(), &info, gate, ready_timeout)
            .await
    }

    /// What every start of an existing sandbox passes first, before
    /// anything changes: its cluster member in rotation (a start is a
    /// placement), then the start gate for its profile.
    pub(super) async fn admit(
        &self,
        name: &str,
        info: &SandboxInfo,
    ) -> Result<Option<GatePass>, ServiceError> {
        self.refuse_unattested_member(name, info).await?;
        self.gate_or_record(name, info.profile.as_ref(), self.binding_check(info))
            .await
    }

    /// For a running sandbox someone else started (an admin's plain
    /// `incus start`): the admission corral's own start passes
    /// ([`Self::admit`]: its member in rotation, the start gate with the
    /// binding its NIC carries), then, once it is ready, the hooks' checks
    /// before hand-out (the canary). Stops nothing: the caller does, on an
    /// error. A gate refusal is recorded as for corral's own start.
    pub async fn admit_started(
        &self,
        sandbox: &dyn Sandbox,
        ready_timeout: Duration,
    ) -> Result<SandboxInfo, ServiceError> {
        let name = sandbox.name().to_string();
        let info = sandbox.info().await?;
        self.admit(&name, &info).await?;
        let profile = match info.profile.as_ref() {
            Some(p) => Some(self.profile(p.as_str())?),
            None => None,
        };
        let (_, info) = super::ready::wait_ready_with_info(
            sandbox,
            profile,
            &self.settings.state_dir,
            ready_timeout,
        )
        .await?;
        self.hooks.before_handout(sandbox, &info).await?;
        Ok(info)
    }

    /// Start an existing sandbox that passed [`Self::admit`] (`gate`),
    /// wait until it is ready and hand it out.
    pub(super) async fn start_admitted(
        &self,
        sandbox: &dyn Sandbox,
        info: &SandboxInfo,
        gate: Option<GatePass>,
        ready_timeout: Duration,
    ) -> Result<HandedOut, ServiceError> {
        let (info, ready, _) = self
            .start_and_hand_out(sandbox, None, info.profile.as_ref(), None, ready_timeout)
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
        let gate = self.admit(name, &info).await?;
        if info.state.can_stop() {
            sandbox.stop(options).await?;
        }
        self.start_admitted(sandbox.as_ref(), &info, gate, ready_timeout)
            .await
    }

    /// Delete a sandbox and its snapshots (stopping it first), then unbind
    /// its port (its DHCP reservation and rules go, and the record). A
    /// sandbox that disappears while this runs (another delete won the
    /// race, and unbinds it) is `NotFound`, like one that was never there.
    pub async fn delete(&self, name: &str) -> Result<(), ServiceError> {
        let sandbox = self.open(name).await?;
        let nic = match self.backend.binds_ports() {
            true => sandbox.nic().await?,
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
