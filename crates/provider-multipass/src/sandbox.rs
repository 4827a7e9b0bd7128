//! A handle on one Multipass sandbox. Every operation re-reads the
//! ownership stamp first, so a handle never acts on a VM corral does not own.

use std::sync::Arc;

use async_trait::async_trait;
use corral_provider_support::{VmBackend, exec_output, staging_error};
use corral_sandbox_core::sandbox::{
    ExecOutput, ExecRequest, Operation, ProviderError, Sandbox, SandboxInfo, SandboxState,
    SnapshotInfo, StopOptions,
};
use corral_sandbox_core::{SandboxKind, SandboxName};

use crate::argv::check_snapshot_name;
use crate::json;
use crate::shared::Shared;
use crate::ssh::SSH_FAILURE_EXIT;

/// One Multipass sandbox.
#[derive(Debug)]
pub struct MultipassSandbox {
    shared: Arc<Shared>,
    name: SandboxName,
    vm: String,
}

impl MultipassSandbox {
    pub(crate) fn new(shared: Arc<Shared>, name: SandboxName, vm: String) -> Self {
        Self { shared, name, vm }
    }

    /// The Multipass instance name (prefix + sandbox name).
    pub fn instance_name(&self) -> &str {
        &self.vm
    }

    /// Refuse unless the VM is stopped (Multipass snapshots, restores and
    /// clones only stopped instances).
    async fn require_stopped(&self, operation: Operation) -> Result<(), ProviderError> {
        let info = self.shared.info(&self.vm).await?;
        if info.state == SandboxState::Stopped {
            return Ok(());
        }
        Err(ProviderError::InvalidState {
            name: self.name.to_string(),
            state: info.state,
            operation,
            hint: "Multipass does this to stopped instances only; stop it first".to_owned(),
        })
    }
}

#[async_trait]
impl Sandbox for MultipassSandbox {
    fn name(&self) -> &SandboxName {
        &self.name
    }

    fn kind(&self) -> SandboxKind {
        self.shared.kind
    }

    async fn info(&self) -> Result<SandboxInfo, ProviderError> {
        let stamp = self.shared.owned(&self.vm).await?;
        let info = self.shared.info(&self.vm).await?;
        Ok(self.shared.sandbox_info(self.name.clone(), &stamp, info))
    }

    async fn start(&self) -> Result<(), ProviderError> {
        let s = &self.shared;
        s.owned(&self.vm).await?;
        s.run("start", &self.vm, s.argv.start(&self.vm)).await?;
        Ok(())
    }

    async fn stop(&self, options: StopOptions) -> Result<(), ProviderError> {
        let s = &self.shared;
        s.owned(&self.vm).await?;
        let timeout = options.timeout.unwrap_or(s.tool.command_timeout);
        s.run_for(
            "stop",
            &self.vm,
            s.argv.stop(&self.vm, options.force),
            timeout,
        )
        .await?;
        Ok(())
    }

    async fn restart(&self, options: StopOptions) -> Result<(), ProviderError> {
        if options.force {
            self.stop(options).await?;
            return self.start().await;
        }
        let s = &self.shared;
        s.owned(&self.vm).await?;
        let timeout = options.timeout.unwrap_or(s.tool.command_timeout);
        s.run_for("restart", &self.vm, s.argv.restart(&self.vm), timeout)
            .await?;
        Ok(())
    }

    async fn exec(&self, request: &ExecRequest) -> Result<ExecOutput, ProviderError> {
        let s = &self.shared;
        s.owned(&self.vm).await?;
        let argv = s.argv.exec(&self.vm, request)?;
        // Only failures to run at all (and ssh's own 255) are errors.
        let output = s
            .tool
            .exec(argv, request, s.timeouts.exec)
            .await
            .map_err(|e| s.errors.run_error("exec", &self.vm, e))?;
        if s.kind == SandboxKind::MultipassRemote && output.exit_code == SSH_FAILURE_EXIT {
            return Err(s.ssh_failure("exec", &output));
        }
        Ok(exec_output(output))
    }

    async fn delete(self: Box<Self>) -> Result<(), ProviderError> {
        let s = &self.shared;
        s.owned(&self.vm).await?;
        match s.run("delete", &self.vm, s.argv.delete(&self.vm)).await {
            // Already gone: finish the job by dropping the staging directory.
            Ok(_) | Err(ProviderError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        s.tool.staging.remove(&self.vm).map_err(staging_error)
    }

    async fn snapshot(&self, snapshot: &str) -> Result<(), ProviderError> {
        check_snapshot_name(snapshot)?;
        let s = &self.shared;
        s.owned(&self.vm).await?;
        self.require_stopped(Operation::Snapshot).await?;
        s.run("snapshot", &self.vm, s.argv.snapshot(&self.vm, snapshot))
            .await
            .map_err(|e| match e {
                ProviderError::AlreadyExists { .. } => ProviderError::AlreadyExists {
                    what: "snapshot",
                    name: snapshot.to_owned(),
                },
                other => other,
            })?;
        Ok(())
    }

    async fn restore(&self, snapshot: &str) -> Result<(), ProviderError> {
        check_snapshot_name(snapshot)?;
        let s = &self.shared;
        s.owned(&self.vm).await?;
        self.require_stopped(Operation::Restore).await?;
        let subject = format!("{}.{snapshot}", self.vm);
        s.run("restore", &subject, s.argv.restore(&self.vm, snapshot))
            .await?;
        Ok(())
    }

    async fn snapshots(&self) -> Result<Vec<SnapshotInfo>, ProviderError> {
        let s = &self.shared;
        s.owned(&self.vm).await?;
        let out = s.run("snapshots", &self.vm, s.argv.snapshots()).await?;
        json::parse_snapshots(&out.stdout, &self.vm).map_err(|e| s.malformed("snapshots", e))
    }

    async fn delete_snapshot(&self, snapshot: &str) -> Result<(), ProviderError> {
        check_snapshot_name(snapshot)?;
        let s = &self.shared;
        s.owned(&self.vm).await?;
        let subject = format!("{}.{snapshot}", self.vm);
        s.run(
            "delete snapshot",
            &subject,
            s.argv.delete_snapshot(&self.vm, snapshot),
        )
        .await?;
        Ok(())
    }

    async fn clone_to(
        &self,
        target: &SandboxName,
        from_snapshot: Option<&str>,
    ) -> Result<Box<dyn Sandbox>, ProviderError> {
        let s = &self.shared;
        let (stamp, target_vm) = s
            .clone_prelude(
                &self.vm,
                target,
                from_snapshot,
                "Multipass clones an instance's current state only; restore the snapshot first, then clone",
            )
            .await?;
        self.require_stopped(Operation::Clone).await?;
        // The clone keeps the source's NICs and route swap, so its profile
        // too, and lives where its source does.
        s.tool
            .staging
            .claim(&stamp.for_clone(&target_vm, target, stamp.location.clone()))?;
        let cloned = s
            .run("clone", &target_vm, s.argv.clone_vm(&self.vm, &target_vm))
            .await;
        s.tool.staging.discard_unless_timeout(&target_vm, cloned)?;
        Ok(s.handle(target.clone(), target_vm))
    }
}
