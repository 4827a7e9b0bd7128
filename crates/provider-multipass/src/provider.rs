//! The Multipass [`SandboxProvider`]: configuration, platform checks, and
//! the create / open / list operations.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use corral_provider_support::setup::{self, SetupError};
use corral_provider_support::{
    VmBackend, VmTool, require_vm_without_mounts, staging_error, vm_capabilities,
};
use corral_sandbox_core::sandbox::{
    Capabilities, Operation, ProviderError, Sandbox, SandboxInfo, SandboxProvider, SandboxSpec,
};
use corral_sandbox_core::{HostOs, ProfileSet, SandboxKind, SandboxName};

use crate::argv::{CloudInitSource, MultipassArgv, check_image, check_image_access};
use crate::cloud_init;
use crate::json;
use crate::runner::{Invocation, ProcessRunner, RunError, Runner};
use crate::shared::{Shared, tool_errors};
use crate::ssh::SshRunner;
use crate::staging::{CLOUD_INIT_FILE, Staging, StagingError, Stamp};

/// Time bounds on `multipass` commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// `launch` (downloads an image on first use and waits for cloud-init).
    pub launch: Duration,
    /// Every other lifecycle command.
    pub command: Duration,
    /// `exec`, when the request sets no timeout of its own.
    pub exec: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            launch: Duration::from_secs(900),
            command: Duration::from_secs(180),
            exec: Duration::from_secs(600),
        }
    }
}

/// How a Multipass provider is set up.
#[derive(Debug, Clone)]
pub struct MultipassConfig {
    /// Private (0700) directory for user-data and ownership stamps. For the
    /// snap-packaged Multipass it must lie where the snap can read it
    /// (under `~/snap/multipass/common/`).
    pub staging_root: PathBuf,
    /// The configured network profiles.
    pub profiles: ProfileSet,
    /// The `multipass` program (name on `PATH` or a path).
    pub program: String,
    /// Prefix of every instance name corral creates.
    pub name_prefix: String,
    /// Time bounds.
    pub timeouts: Timeouts,
    /// Host directories whose image files a spec may name as `file://…`
    /// (operator's choice; empty: no local image file may be named, which
    /// is the default, and always the case for multipass-remote).
    pub local_image_dirs: Vec<PathBuf>,
}

impl MultipassConfig {
    /// A configuration with default program, prefix (`corral-`) and timeouts.
    pub fn new(staging_root: impl Into<PathBuf>, profiles: ProfileSet) -> Self {
        Self {
            staging_root: staging_root.into(),
            profiles,
            program: "multipass".to_owned(),
            name_prefix: "corral-".to_owned(),
            timeouts: Timeouts::default(),
            local_image_dirs: Vec::new(),
        }
    }
}

/// Why a provider could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The host, the platform matrix or the name prefix refuses it.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The kind is not a Multipass kind.
    #[error("a Multipass provider is `multipass` or `multipass-remote`, not `{0}`")]
    Kind(SandboxKind),
    /// The staging directory is unusable.
    #[error(transparent)]
    Staging(#[from] StagingError),
}

/// Refuse `kind` where the platform matrix does (local Multipass runs on
/// Linux only; multipass-remote everywhere).
pub fn check_platform(host: HostOs, kind: SandboxKind) -> Result<(), ConfigError> {
    Ok(setup::check_platform(host, kind)?)
}

/// Multipass, locally or on an executor over SSH.
#[derive(Debug, Clone)]
pub struct MultipassProvider {
    shared: Arc<Shared>,
}

impl MultipassProvider {
    /// Multipass on this host (refused where the platform matrix says so:
    /// everywhere but Linux).
    pub fn local(config: MultipassConfig) -> Result<Self, ConfigError> {
        check_platform(
            setup::this_host(SandboxKind::Multipass)?,
            SandboxKind::Multipass,
        )?;
        Self::with_runner(
            config,
            Arc::new(ProcessRunner::new()),
            SandboxKind::Multipass,
        )
    }

    /// Multipass on the executor `ssh` reaches (multipass-remote).
    pub fn remote(config: MultipassConfig, ssh: SshRunner) -> Result<Self, ConfigError> {
        check_platform(
            setup::this_host(SandboxKind::MultipassRemote)?,
            SandboxKind::MultipassRemote,
        )?;
        Self::with_runner(config, Arc::new(ssh), SandboxKind::MultipassRemote)
    }

    /// A provider of `kind` that runs its commands through `runner`.
    /// For `multipass-remote`, user-data goes over standard input, since the
    /// staging directory is not on the executor.
    pub fn with_runner(
        config: MultipassConfig,
        runner: Arc<dyn Runner>,
        kind: SandboxKind,
    ) -> Result<Self, ConfigError> {
        if !matches!(kind, SandboxKind::Multipass | SandboxKind::MultipassRemote) {
            return Err(ConfigError::Kind(kind));
        }
        setup::check_prefix(&config.name_prefix)?;
        let staging = Staging::open(&config.staging_root)?;
        Ok(Self {
            shared: Arc::new(Shared {
                tool: VmTool {
                    runner,
                    command_timeout: config.timeouts.command,
                    staging,
                    prefix: config.name_prefix,
                },
                kind,
                errors: tool_errors(kind),
                argv: MultipassArgv::new(config.program),
                profiles: config.profiles,
                timeouts: config.timeouts,
                // The executor's files cannot be checked from here.
                local_image_dirs: match kind {
                    SandboxKind::Multipass => config.local_image_dirs,
                    _ => Vec::new(),
                },
            }),
        })
    }

    /// The staging root in use.
    pub fn staging_root(&self) -> &std::path::Path {
        self.shared.tool.staging.root()
    }
}

#[async_trait]
impl SandboxProvider for MultipassProvider {
    fn kind(&self) -> SandboxKind {
        self.shared.kind
    }

    fn capabilities(&self) -> Capabilities {
        vm_capabilities(&[
            Operation::Snapshot,
            Operation::Restore,
            Operation::ManageSnapshots,
        ])
    }

    async fn create(&self, spec: &SandboxSpec) -> Result<Box<dyn Sandbox>, ProviderError> {
        let s = &self.shared;
        require_vm_without_mounts(
            spec,
            "Multipass",
            "the Multipass provider does not mount host directories; copy files in with exec instead",
        )?;
        check_image(&spec.image)?;
        check_image_access(&spec.image, &s.local_image_dirs)?;
        let swap = spec
            .network
            .as_ref()
            .map(|att| s.route_swap(att))
            .transpose()?;
        let vm = s.vm_name(&spec.name)?;
        let user_data = cloud_init::user_data(spec.user_data.as_deref(), swap).map_err(|e| {
            ProviderError::InvalidSpec {
                field: "user_data",
                reason: e.to_string(),
            }
        })?;
        if s.tool
            .staging
            .read_stamp(&vm)
            .map_err(staging_error)?
            .is_some()
        {
            match s.info(&vm).await {
                // A stamp whose VM is gone is left from a failed create: reuse the name.
                Err(ProviderError::NotFound { .. }) => {
                    s.tool.staging.remove(&vm).map_err(staging_error)?
                }
                Ok(_) => {
                    return Err(ProviderError::AlreadyExists {
                        what: "sandbox",
                        name: spec.name.to_string(),
                    });
                }
                Err(e) => return Err(e),
            }
        }
        // The stamp goes first, so a VM a failed launch leaves behind is
        // still corral's to delete.
        s.tool.staging.claim(&Stamp::new(
            &vm,
            &spec.name,
            Some(s.tool.runner.location()),
            spec.network.as_ref().map(|n| n.profile.to_string()),
            &spec.image,
        ))?;
        let network = spec
            .network
            .as_ref()
            .map(|n| (&n.bridge, n.nic.as_ref().map(|b| b.mac)));
        let invocation = if s.kind == SandboxKind::MultipassRemote {
            let argv = s.argv.launch(
                &vm,
                &spec.image,
                &spec.resources,
                CloudInitSource::Stdin,
                network,
            );
            Invocation::new(argv, s.timeouts.launch).with_stdin(user_data.into_bytes())
        } else {
            let path = s
                .tool
                .staging
                .write_file(&vm, CLOUD_INIT_FILE, user_data.as_bytes())
                .map_err(staging_error)?;
            let argv = s.argv.launch(
                &vm,
                &spec.image,
                &spec.resources,
                CloudInitSource::File(&path),
                network,
            );
            Invocation::new(argv, s.timeouts.launch)
        };
        let result = s.tool.runner.run(&invocation).await;
        let nothing_ran = result.as_ref().is_err_and(RunError::nothing_ran);
        match s.check("launch", &vm, result) {
            Ok(_) => {}
            Err(e) => {
                if nothing_ran || matches!(e, ProviderError::AlreadyExists { .. }) {
                    s.tool.staging.remove(&vm).map_err(staging_error)?;
                }
                return Err(e);
            }
        }
        // `launch` boots the VM (first boot runs the route swap); corral's
        // contract is that create leaves the sandbox stopped.
        s.run("stop", &vm, s.argv.stop(&vm, false)).await?;
        Ok(s.handle(spec.name.clone(), vm))
    }

    async fn open(&self, name: &SandboxName) -> Result<Box<dyn Sandbox>, ProviderError> {
        let s = &self.shared;
        let vm = s.vm_name(name)?;
        s.owned(&vm).await?;
        s.info(&vm).await?;
        Ok(s.handle(name.clone(), vm))
    }

    async fn list(&self) -> Result<Vec<SandboxInfo>, ProviderError> {
        let s = &self.shared;
        let out = s.run("list", "all", s.argv.list()).await?;
        let instances = json::parse_list(&out.stdout).map_err(|e| s.malformed("list", e))?;
        let location = s.tool.runner.location();
        let mut found = Vec::new();
        for info in instances {
            if let Some((name, stamp)) = s.tool.listed(&info.name, Some(&location)) {
                found.push(s.sandbox_info(name, &stamp, info));
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platform_matrix_is_consulted() {
        assert!(check_platform(HostOs::Linux, SandboxKind::Multipass).is_ok());
        for host in HostOs::ALL {
            assert!(check_platform(host, SandboxKind::MultipassRemote).is_ok());
        }
        let err = check_platform(HostOs::Macos, SandboxKind::Multipass).unwrap_err();
        assert!(err.to_string().contains("multipass-remote"), "{err}");
        assert!(check_platform(HostOs::Windows, SandboxKind::Multipass).is_err());
    }
}
