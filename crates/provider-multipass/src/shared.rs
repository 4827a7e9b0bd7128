//! State every Multipass handle shares: the runner, the argv builder, the
//! staging directory, and the mapping of tool answers to `ProviderError`s,
//! ownership checks and profile checks.

use std::sync::Arc;

use corral_provider_support::{ToolErrors, VmBackend, VmTool};
use corral_sandbox_core::sandbox::{
    InstanceType, NetworkAttachment, ProviderError, Sandbox, SandboxInfo,
};
use corral_sandbox_core::{ProfileSet, SandboxKind, SandboxName};

use crate::argv::MultipassArgv;
use crate::cloud_init::RouteSwap;
use crate::json::{self, InstanceInfo};
use crate::provider::Timeouts;
use crate::runner::{RunError, RunOutput, Runner};
use crate::sandbox::MultipassSandbox;
use crate::ssh::SSH_FAILURE_EXIT;
use crate::staging::Stamp;

/// State shared by the provider and every sandbox handle.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) tool: VmTool,
    pub(crate) kind: SandboxKind,
    pub(crate) errors: ToolErrors,
    pub(crate) argv: MultipassArgv,
    pub(crate) profiles: ProfileSet,
    pub(crate) timeouts: Timeouts,
    pub(crate) local_image_dirs: Vec<std::path::PathBuf>,
}

/// How `multipass` failures read: "does not exist" names the instance, or
/// the snapshot when the message mentions one.
pub(crate) fn tool_errors(kind: SandboxKind) -> ToolErrors {
    ToolErrors {
        kind,
        not_found: &["does not exist"],
        snapshots: true,
    }
}

impl Shared {
    /// ssh itself failed (exit 255): unreachable executor or refused key.
    pub(crate) fn ssh_failure(&self, operation: &str, output: &RunOutput) -> ProviderError {
        ProviderError::Backend {
            kind: self.kind,
            operation: operation.to_owned(),
            message: format!(
                "ssh to {} failed (exit 255): {}; check the executor is reachable and key authentication works",
                self.tool.runner.location().trim_start_matches("ssh:"),
                output.message()
            ),
            code: Some(i64::from(output.exit_code)),
        }
    }

    pub(crate) fn malformed(&self, operation: &str, e: json::ParseError) -> ProviderError {
        ProviderError::Malformed {
            kind: self.kind,
            operation: operation.to_owned(),
            detail: e.0,
        }
    }

    /// Fresh `info` for `vm`.
    pub(crate) async fn info(&self, vm: &str) -> Result<InstanceInfo, ProviderError> {
        let out = self.run("info", vm, self.argv.info(vm)).await?;
        json::parse_info(&out.stdout, vm).map_err(|e| self.malformed("info", e))
    }

    /// The profile behind `attachment`, which must match the configuration.
    pub(crate) fn route_swap(
        &self,
        attachment: &NetworkAttachment,
    ) -> Result<RouteSwap, ProviderError> {
        let profile = self
            .profiles
            .get(attachment.profile.as_str())
            .ok_or_else(|| ProviderError::UnknownProfile {
                profile: attachment.profile.to_string(),
                configured: self.profiles.names(),
            })?;
        if profile.bridge != attachment.bridge
            || profile.subnet_v4 != attachment.subnet_v4
            || profile.gateway_v4() != attachment.gateway_v4
        {
            return Err(ProviderError::InvalidSpec {
                field: "network",
                reason: format!(
                    "the attachment for profile `{}` (bridge {}, {} via {}) differs from the configured profile (bridge {}, {} via {}); rebuild it from the configuration",
                    profile.name,
                    attachment.bridge,
                    attachment.subnet_v4,
                    attachment.gateway_v4,
                    profile.bridge,
                    profile.subnet_v4,
                    profile.gateway_v4()
                ),
            });
        }
        Ok(RouteSwap {
            subnet: profile.subnet_v4,
            gateway: profile.gateway_v4(),
        })
    }

    pub(crate) fn sandbox_info(
        &self,
        name: SandboxName,
        stamp: &Stamp,
        info: InstanceInfo,
    ) -> SandboxInfo {
        SandboxInfo {
            name,
            kind: self.kind,
            state: info.state,
            instance_type: InstanceType::Vm,
            profile: stamp.profile.as_deref().and_then(|p| p.parse().ok()),
            image: Some(stamp.image.clone()),
            created: None,
            addresses: info.addresses,
            // Multipass names the host side of a NIC itself.
            nic: None,
            location: None,
        }
    }

    pub(crate) fn handle(self: &Arc<Self>, name: SandboxName, vm: String) -> Box<dyn Sandbox> {
        Box::new(MultipassSandbox::new(Arc::clone(self), name, vm))
    }
}

impl VmBackend for Shared {
    type ToolRunner = dyn Runner;

    fn tool(&self) -> &VmTool {
        &self.tool
    }

    /// ssh's own failure (exit 255) on an executor reads as such, not as
    /// Multipass's.
    fn check(
        &self,
        operation: &str,
        subject: &str,
        result: Result<RunOutput, RunError>,
    ) -> Result<RunOutput, ProviderError> {
        self.errors
            .check_with(operation, subject, result, |output| {
                (self.kind == SandboxKind::MultipassRemote && output.exit_code == SSH_FAILURE_EXIT)
                    .then(|| self.ssh_failure(operation, output))
            })
    }

    fn vm_name(&self, name: &SandboxName) -> Result<String, ProviderError> {
        let vm = self.tool.vm_of(name);
        if vm.len() > 63 {
            return Err(ProviderError::InvalidSpec {
                field: "name",
                reason: format!(
                    "`{name}` plus the prefix `{}` is {} characters; Multipass names are limited to 63",
                    self.tool.prefix,
                    vm.len()
                ),
            });
        }
        Ok(vm)
    }

    /// The stamp must name this executor's location.
    async fn owned(&self, vm: &str) -> Result<Stamp, ProviderError> {
        // No stamp: say NotFound for a VM that is not there either.
        self.tool
            .staging
            .owned(vm, Some(&self.tool.runner.location()), self.info(vm))
            .await
    }
}
