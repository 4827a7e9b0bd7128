//! A fresh identity for copies: clones and imports get a new stamp id, new
//! MAC addresses (Incus regenerates any `volatile.*.hwaddr` that is absent)
//! and an emptied `/etc/machine-id` (systemd regenerates an empty one at
//! boot), so two sandboxes never share a network or host identity.

use std::collections::BTreeMap;

use corral_sandbox_core::SandboxName;
use corral_sandbox_core::sandbox::{
    BoundNic, InstanceType, Operation, ProviderError, SandboxState,
};
use http::Method;

use crate::api::{self, Device, Instance};
use crate::files::{self, Pulled};
use crate::provider::IncusProvider;
use crate::sandbox::IncusSandbox;
use crate::stamp::Stamp;

/// Volatile keys that tie an instance to its origin's identity.
pub fn is_identity_key(key: &str) -> bool {
    key.starts_with("volatile.")
        && (key.ends_with(".hwaddr")
            || key.ends_with(".host_name")
            || key == "volatile.uuid"
            || key == "volatile.uuid.generation")
}

/// `config` without identity keys and with `stamp`'s keys in place of any
/// earlier stamp.
pub fn renewed_config(
    config: &BTreeMap<String, String>,
    stamp: &Stamp,
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = config
        .iter()
        .filter(|(k, _)| !is_identity_key(k) && !k.starts_with(crate::stamp::PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    out.extend(stamp.to_config());
    out
}

/// Copy `source` (or its snapshot) to `target` with a fresh identity.
pub async fn clone(
    source: &IncusSandbox,
    target: &SandboxName,
    from_snapshot: Option<&str>,
) -> Result<(), ProviderError> {
    let provider = &source.provider;
    let (_, stamp) = source.owned().await?;
    provider.ensure_free(target.as_str()).await?;
    let origin = match from_snapshot {
        Some(snap) => {
            let snap_inst: Instance = provider
                .client()
                .get(&source.path(&format!("/snapshots/{snap}")))
                .await
                .map_err(|e| {
                    provider.not_found_as(e, "snapshot", &format!("{}/{snap}", source.name))
                })?;
            Stamp::read(&format!("{}/{snap}", source.name), &snap_inst.config)?;
            format!("{}/{snap}", source.name)
        }
        None => source.name.to_string(),
    };
    provider
        .client()
        .run(
            Method::POST,
            "/1.0/instances",
            Some(&api::copy_body(target, &origin)),
            provider.config().operation_timeout,
        )
        .await
        .map_err(|e| provider.err(e))?;
    let new_stamp = stamp.renewed()?;
    let policy = provider.config().mounts.clone();
    let old_id = stamp.id.clone();
    let result = renew(provider, target, &new_stamp, |devices| {
        let mut out = BTreeMap::new();
        for (name, mut device) in devices {
            if name == api::NIC_DEVICE {
                // The source's MAC and port name are bound to the source:
                // the copy gets neither (Incus gives it a fresh MAC) and
                // starts unbound until corral binds it.
                device.remove(api::NIC_HWADDR);
                device.remove(api::NIC_HOST_NAME);
            }
            if name.starts_with(api::MOUNT_DEVICE_PREFIX)
                && let Some(src) = device.get("source").cloned()
                && let Some(new_src) = policy.restage(&old_id, &new_stamp.id, &src)?
            {
                device.insert("source".into(), new_src);
            }
            out.insert(name, device);
        }
        Ok(out)
    })
    .await;
    if let Err(e) = result {
        discard(provider, target, &new_stamp).await;
        return Err(e);
    }
    Ok(())
}

/// Give the stopped copy `sandbox` (a clone's or an import's, whose NIC
/// carries no binding) the MAC and host-side name corral bound: on its
/// NIC device and in its stamp, then check the result's topology.
pub async fn bind_nic(sandbox: &IncusSandbox, nic: &BoundNic) -> Result<(), ProviderError> {
    let provider = &sandbox.provider;
    let (inst, stamp) = sandbox.owned().await?;
    if inst.state() != SandboxState::Stopped {
        return Err(ProviderError::InvalidState {
            name: sandbox.name.to_string(),
            state: inst.state(),
            operation: Operation::Clone,
            hint: "corral binds a copy's NIC before its first start; stop it first".into(),
        });
    }
    let Some(bridge) = stamp.bridge.clone() else {
        return Err(ProviderError::InvalidSpec {
            field: "nic",
            reason: format!("sandbox `{}` has no network to bind", sandbox.name),
        });
    };
    let bound = stamp.clone().with_nic(Some(nic.clone()));
    // The stamp's keys anew; the MAC Incus chose for the copy goes, the
    // device's own wins from here on.
    let nic_volatile = |k: &str| {
        k == format!("volatile.{}.hwaddr", api::NIC_DEVICE)
            || k == format!("volatile.{}.host_name", api::NIC_DEVICE)
    };
    let mut config: BTreeMap<String, String> = inst
        .config
        .iter()
        .filter(|(k, _)| !k.starts_with(crate::stamp::PREFIX) && !nic_volatile(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    config.extend(bound.to_config());
    let mut devices = inst.devices.clone();
    devices.insert(
        api::NIC_DEVICE.to_owned(),
        api::nic_device(bridge.as_str(), Some(nic)),
    );
    let path = format!("/1.0/instances/{}", sandbox.name);
    provider
        .client()
        .run(
            Method::PUT,
            &path,
            Some(&inst.put_body(&config, &devices)),
            provider.config().operation_timeout,
        )
        .await
        .map_err(|e| provider.err(e))?;
    let (after, after_stamp) = sandbox.owned().await?;
    provider.check_topology(&after, &after_stamp)
}

/// Give the (stopped, just copied or imported) instance `name` the stamp
/// `stamp`, devices rewritten by `devices`, no identity keys, an empty
/// machine-id, and check the result's topology.
pub async fn renew<F>(
    provider: &IncusProvider,
    name: &SandboxName,
    stamp: &Stamp,
    devices: F,
) -> Result<(), ProviderError>
where
    F: FnOnce(BTreeMap<String, Device>) -> Result<BTreeMap<String, Device>, ProviderError>,
{
    let path = format!("/1.0/instances/{name}");
    let inst: Instance = provider
        .client()
        .get(&path)
        .await
        .map_err(|e| provider.err(e))?;
    let config = renewed_config(&inst.config, stamp);
    let devices = devices(inst.devices.clone())?;
    provider
        .client()
        .run(
            Method::PUT,
            &path,
            Some(&inst.put_body(&config, &devices)),
            provider.config().operation_timeout,
        )
        .await
        .map_err(|e| provider.err(e))?;
    let handle = IncusSandbox::new(provider.clone(), name.clone());
    if inst.instance_type() == InstanceType::Container {
        reset_machine_id(&handle).await?;
    }
    let (after, after_stamp) = handle.owned().await?;
    provider.check_topology(&after, &after_stamp)
}

/// A machine id is 33 bytes; anything much larger is not one.
const MACHINE_ID_MAX: u64 = 4096;

/// Empty `/etc/machine-id` (if the image has one) and drop a separate
/// D-Bus copy, so the guest makes a new identity on its next boot.
async fn reset_machine_id(sandbox: &IncusSandbox) -> Result<(), ProviderError> {
    match files::pull_any(sandbox, "/etc/machine-id", MACHINE_ID_MAX).await {
        Ok(Pulled::File(bytes)) if !bytes.is_empty() => {
            files::push(sandbox, "/etc/machine-id", b"", 0o444).await?;
        }
        Ok(_) | Err(ProviderError::NotFound { .. }) => {}
        Err(e) => return Err(e),
    }
    if let Ok(Pulled::File(_)) =
        files::pull_any(sandbox, "/var/lib/dbus/machine-id", MACHINE_ID_MAX).await
    {
        let path = sandbox.path("/files?path=/var/lib/dbus/machine-id");
        sandbox
            .provider
            .client()
            .call(Method::DELETE, &path, None)
            .await
            .map_err(|e| sandbox.provider.err(e))?;
    }
    Ok(())
}

/// Best-effort removal of a half-made copy.
pub async fn discard(provider: &IncusProvider, name: &SandboxName, stamp: &Stamp) {
    let path = format!("/1.0/instances/{name}");
    if let Err(e) = provider
        .client()
        .run(
            Method::DELETE,
            &path,
            None,
            provider.config().operation_timeout,
        )
        .await
    {
        tracing::warn!(error = %e, sandbox = %name, "could not remove a half-made copy");
    }
    let _ = provider.config().mounts.remove_staging(&stamp.id);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_keys_are_dropped_and_the_stamp_replaced() {
        let old = Stamp::new(None, None, "img").unwrap_or_else(|e| panic!("{e}"));
        let mut config = old.to_config();
        config.insert("volatile.eth0.hwaddr".into(), "00:16:3e:00:00:01".into());
        config.insert("volatile.eth0.host_name".into(), "veth1234".into());
        config.insert("volatile.uuid".into(), "u".into());
        config.insert("volatile.base_image".into(), "abc".into());
        config.insert("limits.cpu".into(), "2".into());
        let new = old.renewed().unwrap_or_else(|e| panic!("{e}"));
        let out = renewed_config(&config, &new);
        assert!(
            !out.keys()
                .any(|k| k.ends_with(".hwaddr") || k == "volatile.uuid")
        );
        assert_eq!(
            out.get("volatile.base_image").map(String::as_str),
            Some("abc")
        );
        assert_eq!(out.get("limits.cpu").map(String::as_str), Some("2"));
        assert_eq!(Stamp::read("x", &out).ok(), Some(new));
    }
}
