//! Spec checks every VM-only backend without host mounts makes alike.

use corral_sandbox_core::sandbox::{InstanceType, ProviderError, SandboxSpec};

/// Refuse a spec that asks `tool` (named in the message) for anything but
/// a virtual machine, or for host mounts (`no_mounts` says why not and
/// what to do instead).
pub fn require_vm_without_mounts(
    spec: &SandboxSpec,
    tool: &str,
    no_mounts: &str,
) -> Result<(), ProviderError> {
    if spec.instance_type != InstanceType::Vm {
        return Err(ProviderError::InvalidSpec {
            field: "instance_type",
            reason: format!("{tool} makes virtual machines only; ask for a vm"),
        });
    }
    if let Some(mount) = spec.mounts.first() {
        return Err(ProviderError::Mount {
            source_path: mount.source.display().to_string(),
            reason: no_mounts.to_owned(),
        });
    }
    Ok(())
}

/// Refuse a clone from a snapshot where the backend clones an instance's
/// current state only (`instead` says what to do).
pub fn refuse_clone_from_snapshot(
    from_snapshot: Option<&str>,
    instead: &str,
) -> Result<(), ProviderError> {
    match from_snapshot {
        Some(_) => Err(ProviderError::InvalidSpec {
            field: "from_snapshot",
            reason: instead.to_owned(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SandboxSpec {
        let mut s = SandboxSpec::new("a".parse().unwrap(), "img");
        s.instance_type = InstanceType::Vm;
        s
    }

    #[test]
    fn only_vms_without_mounts_pass() {
        assert!(require_vm_without_mounts(&spec(), "Tool", "no").is_ok());
        let mut container = spec();
        container.instance_type = InstanceType::Container;
        let err = require_vm_without_mounts(&container, "Tool", "no").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid sandbox spec: instance_type: Tool makes virtual machines only; ask for a vm"
        );
    }
}
