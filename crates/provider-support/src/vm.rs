//! The steps every CLI-driven VM provider (Multipass, Tart) takes alike,
//! over each one's shared state ([`VmBackend`]): running its tool under a
//! time bound, the operations both support, and the prelude of a clone
//! (the source corral's, the target's name free). What differs (how a
//! failure reads, where a VM lives, what else a clone copies) stays the
//! provider's, behind the trait.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use corral_sandbox_core::SandboxName;
use corral_sandbox_core::sandbox::{Capabilities, ExecRequest, Operation, ProviderError};

use crate::runner::{Invocation, RunError, RunOutput, Runner};
use crate::spec::refuse_clone_from_snapshot;
use crate::staging::Staging;
use crate::stamp::{STAMP_VERSION, VmStamp};

/// What every CLI-driven VM provider supports; each adds its own.
pub const VM_LIFECYCLE: [Operation; 7] = [
    Operation::Create,
    Operation::Start,
    Operation::Stop,
    Operation::Restart,
    Operation::Exec,
    Operation::Clone,
    Operation::Delete,
];

/// [`VM_LIFECYCLE`] and `extra`.
pub fn vm_capabilities(extra: &[Operation]) -> Capabilities {
    let mut ops = VM_LIFECYCLE.to_vec();
    ops.extend_from_slice(extra);
    Capabilities::of(&ops)
}

/// What every CLI-driven VM provider holds alike: where its tool runs,
/// how long an ordinary command may take, and its staging root.
/// `R` is the runner's trait: [`Runner`], or a provider's richer one
/// (Tart spawns detached processes through [`crate::LocalRunner`]).
#[derive(Debug)]
pub struct VmTool<R: ?Sized + Runner = dyn Runner> {
    /// The runner its tool's commands go through.
    pub runner: Arc<R>,
    /// The bound of an ordinary command.
    pub command_timeout: Duration,
    /// Its staging root (stamps, per-VM files).
    pub staging: Staging<VmStamp>,
    /// What corral puts before a sandbox's name to name its VM
    /// ([`crate::check_prefix`] accepted it).
    pub prefix: String,
}

impl<R: ?Sized + Runner> VmTool<R> {
    /// The VM name of sandbox `name`, before the backend's own limits.
    pub fn vm_of(&self, name: &SandboxName) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The sandbox behind `vm`, a name in the backend's listing, and its
    /// stamp — when the VM is corral's: it carries the prefix, a sandbox
    /// name after it, and a stamp written for it by a provider at
    /// `location`. Any other VM is left out of corral's listing.
    pub fn listed(&self, vm: &str, location: Option<&str>) -> Option<(SandboxName, VmStamp)> {
        let name = SandboxName::new(vm.strip_prefix(&self.prefix)?).ok()?;
        let stamp = self.staging.read_stamp(vm).ok()??;
        stamp
            .mismatch(vm, location)
            .is_none()
            .then_some((name, stamp))
    }

    /// Runs a sandbox's exec `argv` (built by the provider from `request`):
    /// bounded by the request's timeout or `default`, fed its stdin. A
    /// non-zero exit is the command's own answer, so it is an `Ok` here;
    /// only failing to run at all is an error.
    pub async fn exec(
        &self,
        argv: Vec<String>,
        request: &ExecRequest,
        default: Duration,
    ) -> Result<RunOutput, RunError> {
        let mut invocation = Invocation::new(argv, request.timeout.unwrap_or(default));
        if let Some(stdin) = &request.stdin {
            invocation = invocation.with_stdin(stdin.clone());
        }
        self.runner.run(&invocation).await
    }
}

/// A CLI-driven VM provider's shared state, as the steps written once
/// here need it.
pub trait VmBackend: Sync {
    /// The runner trait its tool's commands go through.
    type ToolRunner: ?Sized + Runner;
    /// What it holds like every other VM provider.
    fn tool(&self) -> &VmTool<Self::ToolRunner>;
    /// A finished (or failed) run in the provider's error vocabulary.
    fn check(
        &self,
        operation: &str,
        subject: &str,
        result: Result<RunOutput, RunError>,
    ) -> Result<RunOutput, ProviderError>;
    /// The backend's name of sandbox `name`.
    fn vm_name(&self, name: &SandboxName) -> Result<String, ProviderError>;
    /// The stamp of `vm`, refusing a VM corral does not own.
    fn owned(&self, vm: &str) -> impl Future<Output = Result<VmStamp, ProviderError>> + Send;

    /// Run `argv` within `timeout` and check it.
    fn run_for(
        &self,
        operation: &str,
        subject: &str,
        argv: Vec<String>,
        timeout: Duration,
    ) -> impl Future<Output = Result<RunOutput, ProviderError>> + Send {
        async move {
            let result = self
                .tool()
                .runner
                .run(&Invocation::new(argv, timeout))
                .await;
            self.check(operation, subject, result)
        }
    }

    /// Run `argv` with the ordinary command bound and check it.
    fn run(
        &self,
        operation: &str,
        subject: &str,
        argv: Vec<String>,
    ) -> impl Future<Output = Result<RunOutput, ProviderError>> + Send {
        self.run_for(operation, subject, argv, self.tool().command_timeout)
    }

    /// The prelude of a clone of `source_vm` to `target`: a clone from a
    /// snapshot refused (`instead` says what to do), the source corral's,
    /// the target's name valid and free. The source's stamp and the
    /// target's VM name.
    fn clone_prelude(
        &self,
        source_vm: &str,
        target: &SandboxName,
        from_snapshot: Option<&str>,
        instead: &str,
    ) -> impl Future<Output = Result<(VmStamp, String), ProviderError>> + Send {
        async move {
            refuse_clone_from_snapshot(from_snapshot, instead)?;
            let stamp = self.owned(source_vm).await?;
            Ok((stamp, self.unclaimed_vm(target)?))
        }
    }

    /// The backend's name of sandbox `name`, refused when a stamp claims
    /// it already (a clone's or a rename's target).
    fn unclaimed_vm(&self, name: &SandboxName) -> Result<String, ProviderError> {
        let vm = self.vm_name(name)?;
        self.tool().staging.ensure_unclaimed(&vm, name.as_str())?;
        Ok(vm)
    }
}

impl VmStamp {
    /// The stamp of a VM corral is about to create: `vm` for `sandbox`,
    /// at `location`, on `profile`, from `image`.
    pub fn new(
        vm: &str,
        sandbox: &SandboxName,
        location: Option<String>,
        profile: Option<String>,
        image: &str,
    ) -> Self {
        Self {
            version: STAMP_VERSION,
            vm: vm.to_owned(),
            sandbox: sandbox.to_string(),
            location,
            profile,
            image: image.to_owned(),
        }
    }

    /// The stamp of `vm`, a clone of this stamp's VM for `sandbox` at
    /// `location`: the same profile (a clone keeps its source's network)
    /// and image.
    pub fn for_clone(&self, vm: &str, sandbox: &SandboxName, location: Option<String>) -> Self {
        Self::new(vm, sandbox, location, self.profile.clone(), &self.image)
    }
}

impl Staging<VmStamp> {
    /// The stamp of `vm`, refused (not corral's) when it does not match
    /// `vm` and `location` (see [`VmStamp::mismatch`]); without a stamp,
    /// `probe` says whether `vm` exists at all (see
    /// [`Staging::stamp_or_refuse`]).
    pub async fn owned<T, F>(
        &self,
        vm: &str,
        location: Option<&str>,
        probe: F,
    ) -> Result<VmStamp, ProviderError>
    where
        F: Future<Output = Result<T, ProviderError>>,
    {
        let stamp = self.stamp_or_refuse(vm, probe).await?;
        match stamp.mismatch(vm, location) {
            Some(reason) => Err(ProviderError::NotOwned {
                name: vm.to_owned(),
                reason,
            }),
            None => Ok(stamp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lifecycle_and_each_providers_own() {
        let c = vm_capabilities(&[Operation::Rename]);
        assert!(c.supports(Operation::Rename) && c.supports(Operation::Clone));
        assert!(!c.supports(Operation::Snapshot));
        assert_eq!(c.0.len(), VM_LIFECYCLE.len() + 1);
    }

    #[test]
    fn a_clones_stamp_keeps_profile_and_image() {
        let name = |n: &str| SandboxName::new(n).unwrap();
        let source = VmStamp::new(
            "corral-a",
            &name("a"),
            Some("local".into()),
            Some("dev".into()),
            "24.04",
        );
        let clone = source.for_clone("corral-b", &name("b"), None);
        assert_eq!(
            clone,
            VmStamp {
                version: STAMP_VERSION,
                vm: "corral-b".into(),
                sandbox: "b".into(),
                location: None,
                profile: Some("dev".into()),
                image: "24.04".into(),
            }
        );
    }

    #[test]
    fn a_listing_keeps_only_corrals_vms() {
        let dir = tempfile::tempdir().unwrap();
        let tool: VmTool = VmTool {
            runner: Arc::new(crate::ProcessRunner::new()),
            command_timeout: Duration::from_secs(1),
            staging: Staging::open(dir.path()).unwrap(),
            prefix: "corral-".into(),
        };
        let a = SandboxName::new("a").unwrap();
        assert_eq!(tool.vm_of(&a), "corral-a");
        let stamp = VmStamp::new("corral-a", &a, Some("local".into()), None, "24.04");
        tool.staging.create_dir("corral-a").unwrap();
        tool.staging.write_stamp(&stamp).unwrap();
        assert_eq!(
            tool.listed("corral-a", Some("local")),
            Some((a, stamp.clone()))
        );
        // Written for another location, or no stamp, or no prefix: not corral's.
        assert_eq!(tool.listed("corral-a", Some("ssh:h")), None);
        assert_eq!(tool.listed("corral-b", Some("local")), None);
        assert_eq!(tool.listed("other-a", Some("local")), None);
        // A stamp that names another VM does not make this one corral's.
        let json = serde_json::to_vec(&stamp).unwrap();
        tool.staging.create_dir("corral-c").unwrap();
        tool.staging
            .write_file("corral-c", crate::staging::STAMP_FILE, &json)
            .unwrap();
        assert_eq!(tool.listed("corral-c", Some("local")), None);
    }
}
