//! State every Tart handle shares: the runner, the argv builder, the
//! staging directory, the mapping of tool answers to `ProviderError`s,
//! ownership checks, the stored Softnet policy and the filter-health probe.

use std::sync::Arc;

use corral_provider_support::{ToolErrors, VmBackend, VmTool, staging_error};
use corral_sandbox_core::sandbox::{InstanceType, ProviderError, Sandbox, SandboxInfo};
use corral_sandbox_core::{ProfileSet, SandboxKind, SandboxName};

use crate::argv::{TartArgv, check_vm_name};
use crate::health::{self, FilterHealth};
use crate::json::{self, VmEntry};
use crate::provider::{ConfigError, Timeouts};
use crate::runner::{Invocation, RunError, RunOutput, Runner};
use crate::sandbox::TartSandbox;
use crate::softnet::SoftnetPolicy;
use crate::staging::{PID_FILE, POLICY_FILE, Stamp};

/// State shared by the provider and every sandbox handle.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) tool: VmTool<dyn Runner>,
    pub(crate) argv: TartArgv,
    pub(crate) profiles: ProfileSet,
    pub(crate) extra_run_args: Vec<String>,
    pub(crate) max_allow: usize,
    pub(crate) timeouts: Timeouts,
}

/// How `tart` failures read: "does not exist" or "not found" names the VM.
pub(crate) const TOOL_ERRORS: ToolErrors = ToolErrors {
    kind: SandboxKind::Tart,
    not_found: &["does not exist", "not found"],
    snapshots: false,
};

impl Shared {
    /// Every local VM.
    pub(crate) async fn list_vms(&self) -> Result<Vec<VmEntry>, ProviderError> {
        let out = self.run("list", "all", self.argv.list()).await?;
        json::parse_list(&out.stdout).map_err(|e| ProviderError::Malformed {
            kind: SandboxKind::Tart,
            operation: "list".to_owned(),
            detail: e.0,
        })
    }

    /// `vm`'s entry, or NotFound.
    pub(crate) async fn vm(&self, vm: &str) -> Result<VmEntry, ProviderError> {
        self.list_vms()
            .await?
            .into_iter()
            .find(|e| e.name == vm)
            .ok_or_else(|| ProviderError::NotFound {
                what: "sandbox",
                name: vm.to_owned(),
            })
    }

    /// The Softnet policy stored for `vm` at create.
    pub(crate) fn policy(&self, vm: &str) -> Result<SoftnetPolicy, ProviderError> {
        let bytes = self
            .tool
            .staging
            .read_file(vm, POLICY_FILE)
            .map_err(staging_error)?
            .ok_or_else(|| ProviderError::NotOwned {
                name: vm.to_owned(),
                reason: "its Softnet policy is missing from the staging directory".to_owned(),
            })?;
        serde_json::from_slice(&bytes).map_err(|e| ProviderError::Io {
            context: format!("Softnet policy of `{vm}` is unreadable: {e}"),
            source: std::io::Error::other(e),
        })
    }

    /// Store `policy` for `vm`.
    pub(crate) fn store_policy(
        &self,
        vm: &str,
        policy: &SoftnetPolicy,
    ) -> Result<(), ProviderError> {
        let json = serde_json::to_vec_pretty(policy).map_err(|e| ProviderError::Io {
            context: format!("cannot encode the Softnet policy of `{vm}`: {e}"),
            source: std::io::Error::other(e),
        })?;
        self.tool
            .staging
            .write_file(vm, POLICY_FILE, &json)
            .map_err(staging_error)?;
        Ok(())
    }

    /// Softnet must be on the PATH `tart` runs with; there is no NAT fallback.
    pub(crate) fn preflight_softnet(&self) -> Result<(), ProviderError> {
        if self.tool.runner.find_program("softnet").is_some() {
            return Ok(());
        }
        Err(ProviderError::Io {
            context: ConfigError::SoftnetMissing.to_string(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "softnet"),
        })
    }

    /// The pid of `vm`'s `tart run`, as corral recorded it.
    pub(crate) fn run_pid(&self, vm: &str) -> Result<Option<u32>, ProviderError> {
        let bytes = self
            .tool
            .staging
            .read_file(vm, PID_FILE)
            .map_err(staging_error)?;
        Ok(bytes.and_then(|b| String::from_utf8_lossy(&b).trim().parse().ok()))
    }

    /// The filter-health signal of `vm`.
    pub(crate) async fn filter_health(&self, vm: &str) -> FilterHealth {
        let pid = match self.run_pid(vm) {
            Ok(Some(pid)) => pid,
            Ok(None) => {
                return FilterHealth::Unknown {
                    reason: format!("corral has no record of starting `{vm}`"),
                };
            }
            Err(e) => {
                return FilterHealth::Unknown {
                    reason: e.to_string(),
                };
            }
        };
        let out = match self
            .tool
            .runner
            .run(&Invocation::new(
                health::ps_argv(),
                self.tool.command_timeout,
            ))
            .await
        {
            Ok(out) if out.success() => out,
            Ok(out) => {
                return FilterHealth::Unknown {
                    reason: format!("ps exited {}: {}", out.exit_code, out.message()),
                };
            }
            Err(e) => {
                return FilterHealth::Unknown {
                    reason: e.to_string(),
                };
            }
        };
        match health::parse_ps(&String::from_utf8_lossy(&out.stdout)) {
            Ok(table) => health::assess(&table, pid, vm),
            Err(e) => FilterHealth::Unknown {
                reason: e.to_string(),
            },
        }
    }

    pub(crate) fn handle(self: &Arc<Self>, name: SandboxName, vm: String) -> Box<dyn Sandbox> {
        Box::new(TartSandbox::new(Arc::clone(self), name, vm))
    }

    pub(crate) fn info_of(&self, name: SandboxName, stamp: &Stamp, entry: &VmEntry) -> SandboxInfo {
        SandboxInfo {
            name,
            kind: SandboxKind::Tart,
            state: entry.state,
            instance_type: InstanceType::Vm,
            profile: stamp.profile.as_deref().and_then(|p| p.parse().ok()),
            image: Some(stamp.image.clone()),
            created: None,
            addresses: Vec::new(),
            // Tart VMs sit on Softnet, never on a corral bridge.
            nic: None,
            location: None,
        }
    }
}

impl VmBackend for Shared {
    type ToolRunner = dyn Runner;

    fn tool(&self) -> &VmTool<dyn Runner> {
        &self.tool
    }

    fn check(
        &self,
        operation: &str,
        subject: &str,
        result: Result<RunOutput, RunError>,
    ) -> Result<RunOutput, ProviderError> {
        TOOL_ERRORS.check(operation, subject, result)
    }

    fn vm_name(&self, name: &SandboxName) -> Result<String, ProviderError> {
        let vm = self.tool.vm_of(name);
        check_vm_name(&vm)?;
        Ok(vm)
    }

    /// A Tart stamp records no location.
    async fn owned(&self, vm: &str) -> Result<Stamp, ProviderError> {
        self.tool.staging.owned(vm, None, self.vm(vm)).await
    }
}
