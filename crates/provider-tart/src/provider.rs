//! The Tart [`SandboxProvider`]: configuration, platform refusal, and
//! create / open / list.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use corral_provider_support::setup::{self, SetupError};
use corral_provider_support::{VmBackend, VmTool, require_vm_without_mounts, vm_capabilities};
use corral_sandbox_core::sandbox::{
    Capabilities, Operation, ProviderError, Sandbox, SandboxInfo, SandboxProvider, SandboxSpec,
};
use corral_sandbox_core::{HostOs, ProfileSet, SandboxKind, SandboxName};

use crate::argv::{TartArgv, check_source};
use crate::health::FilterHealth;
use crate::runner::{ProcessRunner, Runner};
use crate::shared::Shared;
use crate::softnet::{DEFAULT_MAX_ALLOW, SoftnetError, SoftnetPolicy, check_extra_run_args};
use crate::staging::{Staging, StagingError, Stamp};

/// Time bounds on `tart` commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// `clone` (may pull a multi-GB image on first use).
    pub clone: Duration,
    /// Every other command.
    pub command: Duration,
    /// `exec`, when the request sets no timeout of its own.
    pub exec: Duration,
    /// How long `start` waits for the VM to report running.
    pub boot: Duration,
    /// How often `start` polls while waiting.
    pub poll: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            clone: Duration::from_secs(3600),
            command: Duration::from_secs(120),
            exec: Duration::from_secs(600),
            boot: Duration::from_secs(120),
            poll: Duration::from_millis(500),
        }
    }
}

/// How a Tart provider is set up.
#[derive(Debug, Clone)]
pub struct TartConfig {
    /// Private (0700) directory for stamps, policies, pids and logs.
    pub staging_root: PathBuf,
    /// The configured network profiles.
    pub profiles: ProfileSet,
    /// The `tart` program (name on `PATH` or a path).
    pub program: String,
    /// Prefix of every VM name corral creates.
    pub name_prefix: String,
    /// Extra `tart run` arguments (validated: long options, no `--net-*`).
    pub extra_run_args: Vec<String>,
    /// Bound on allowlisted addresses per VM.
    pub max_allow: usize,
    /// Time bounds.
    pub timeouts: Timeouts,
}

impl TartConfig {
    /// A configuration with default program, prefix (`corral-`), bound and timeouts.
    pub fn new(staging_root: impl Into<PathBuf>, profiles: ProfileSet) -> Self {
        Self {
            staging_root: staging_root.into(),
            profiles,
            program: "tart".to_owned(),
            name_prefix: "corral-".to_owned(),
            extra_run_args: Vec::new(),
            max_allow: DEFAULT_MAX_ALLOW,
            timeouts: Timeouts::default(),
        }
    }
}

/// Why a Tart provider could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The host, the platform matrix or the name prefix refuses it.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// Softnet is not installed where `tart` will look for it.
    #[error(
        "Softnet is not on PATH; install it (it must be able to run as root) — corral never runs Tart VMs without Softnet"
    )]
    SoftnetMissing,
    /// A configured run argument is refused.
    #[error(transparent)]
    RunArg(#[from] SoftnetError),
    /// The staging directory is unusable.
    #[error(transparent)]
    Staging(#[from] StagingError),
}

/// Refuse every host OS the platform matrix does not support Tart on.
pub fn check_platform(host: HostOs) -> Result<(), ConfigError> {
    Ok(setup::check_platform(host, SandboxKind::Tart)?)
}

/// Tart on this Mac, every VM under Softnet.
#[derive(Debug, Clone)]
pub struct TartProvider {
    shared: Arc<Shared>,
}

impl TartProvider {
    /// A provider on this host; refused unless the platform matrix supports
    /// Tart here (macOS) and Softnet is installed.
    pub fn on_this_host(config: TartConfig) -> Result<Self, ConfigError> {
        let host = setup::this_host(SandboxKind::Tart)?;
        Self::new(config, Arc::new(ProcessRunner::new()), host)
    }

    /// A provider that runs `tart` through `runner`, for a host running `host`.
    pub fn new(
        config: TartConfig,
        runner: Arc<dyn Runner>,
        host: HostOs,
    ) -> Result<Self, ConfigError> {
        check_platform(host)?;
        setup::check_prefix(&config.name_prefix)?;
        check_extra_run_args(&config.extra_run_args)?;
        if runner.find_program("softnet").is_none() {
            return Err(ConfigError::SoftnetMissing);
        }
        let staging = Staging::open(&config.staging_root)?;
        Ok(Self {
            shared: Arc::new(Shared {
                tool: VmTool {
                    runner,
                    command_timeout: config.timeouts.command,
                    staging,
                    prefix: config.name_prefix,
                },
                argv: TartArgv::new(config.program),
                profiles: config.profiles,
                extra_run_args: config.extra_run_args,
                max_allow: config.max_allow,
                timeouts: config.timeouts,
            }),
        })
    }

    /// The filter-health signal of sandbox `name`: `Alive` only while its
    /// Softnet process runs; callers must treat anything else as failed.
    pub async fn filter_health(&self, name: &SandboxName) -> Result<FilterHealth, ProviderError> {
        let vm = self.shared.vm_name(name)?;
        self.shared.owned(&vm).await?;
        Ok(self.shared.filter_health(&vm).await)
    }
}

#[async_trait]
impl SandboxProvider for TartProvider {
    fn kind(&self) -> SandboxKind {
        SandboxKind::Tart
    }

    fn capabilities(&self) -> Capabilities {
        vm_capabilities(&[Operation::Rename])
    }

    async fn create(&self, spec: &SandboxSpec) -> Result<Box<dyn Sandbox>, ProviderError> {
        let s = &self.shared;
        require_vm_without_mounts(
            spec,
            "Tart",
            "the Tart provider does not share host directories",
        )?;
        if spec.user_data.is_some() {
            return Err(ProviderError::InvalidSpec {
                field: "user_data",
                reason: "Tart has no cloud-init input; bake setup into the image".to_owned(),
            });
        }
        check_source(&spec.image)?;
        let vm = s.vm_name(&spec.name)?;
        let policy = match &spec.network {
            None => SoftnetPolicy::closed(),
            Some(att) => {
                let profile = s.profiles.get(att.profile.as_str()).ok_or_else(|| {
                    ProviderError::UnknownProfile {
                        profile: att.profile.to_string(),
                        configured: s.profiles.names(),
                    }
                })?;
                if profile.gateway_v4() != att.gateway_v4 || profile.subnet_v4 != att.subnet_v4 {
                    return Err(ProviderError::InvalidSpec {
                        field: "network",
                        reason: format!(
                            "the attachment for `{}` differs from the configured profile; rebuild it from the configuration",
                            profile.name
                        ),
                    });
                }
                SoftnetPolicy::for_attachment(att, s.max_allow).map_err(|e| {
                    ProviderError::InvalidSpec {
                        field: "network",
                        reason: e.to_string(),
                    }
                })?
            }
        };
        s.tool.staging.ensure_unclaimed(&vm, spec.name.as_str())?;
        s.tool.staging.claim(&Stamp::new(
            &vm,
            &spec.name,
            None,
            spec.network.as_ref().map(|n| n.profile.to_string()),
            &spec.image,
        ))?;
        s.store_policy(&vm, &policy)?;
        let cloned = s
            .run_for(
                "clone",
                &vm,
                s.argv.clone_vm(&spec.image, &vm),
                s.timeouts.clone,
            )
            .await;
        // After a timeout the clone may exist: its stamp stays so corral can delete it.
        s.tool.staging.discard_unless_timeout(&vm, cloned)?;
        if let Some(argv) = s.argv.set(&vm, &spec.resources) {
            s.run("set", &vm, argv).await?;
        }
        Ok(s.handle(spec.name.clone(), vm))
    }

    async fn open(&self, name: &SandboxName) -> Result<Box<dyn Sandbox>, ProviderError> {
        let s = &self.shared;
        let vm = s.vm_name(name)?;
        s.owned(&vm).await?;
        s.vm(&vm).await?;
        Ok(s.handle(name.clone(), vm))
    }

    async fn list(&self) -> Result<Vec<SandboxInfo>, ProviderError> {
        let s = &self.shared;
        let mut found = Vec::new();
        for entry in s.list_vms().await? {
            // A Tart stamp records no location.
            if let Some((name, stamp)) = s.tool.listed(&entry.name, None) {
                found.push(s.info_of(name, &stamp, &entry));
            }
        }
        Ok(found)
    }
}
