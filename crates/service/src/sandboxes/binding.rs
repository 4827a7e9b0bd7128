//! Binding a sandbox's port on a local corral bridge (and undoing it) for
//! create, clone and delete.

use super::SandboxService;
use crate::error::ServiceError;
use corral_egress::plan::PortBinding;
use corral_sandbox_core::ProfileName;
use corral_sandbox_core::sandbox::{BoundNic, Sandbox};
use std::sync::Arc;

impl SandboxService {
    /// Binds a fresh port on `profile` (blocking work, off the async
    /// threads).
    pub(super) async fn bind(
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
    pub(super) async fn bind_copy(
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
    pub(super) async fn unbind(&self, nic: BoundNic) -> Result<Option<PortBinding>, ServiceError> {
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
    pub(super) async fn release(&self, binding: Option<&PortBinding>) {
        let Some(b) = binding else { return };
        if let Err(e) = self.unbind(b.nic()).await {
            tracing::warn!(port = %b.port, error = %e, "could not unbind the port of a failed create");
        }
    }
}
