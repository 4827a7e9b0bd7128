//! Export to a backup file and import from one.
//!
//! What the file restores is the artifact's (disk, config, snapshots); what
//! import re-stamps is this host's: a fresh stamp and identity, the NIC
//! re-attached to the profile's bridge as this host maps it, host mounts
//! dropped (a host path is a fact about the host that made it), and the
//! topology checked before the sandbox is handed out. The file holds the
//! whole disk — credentials included — so it is written mode 0600.

use std::path::Path;
use std::time::Duration;

use corral_sandbox_core::SandboxName;
use corral_sandbox_core::sandbox::ProviderError;
use http::Method;
use serde_json::json;

use crate::api::{self, NIC_DEVICE, ROOT_DEVICE};
use crate::identity;
use crate::project;
use crate::provider::IncusProvider;
use crate::sandbox::IncusSandbox;
use crate::stamp::Stamp;

/// Write `sandbox` (with its snapshots) to `dest`, which must not exist.
pub async fn export(sandbox: &IncusSandbox, dest: &Path) -> Result<(), ProviderError> {
    let (_, stamp) = sandbox.owned().await?;
    if dest.exists() {
        return Err(ProviderError::AlreadyExists {
            what: "backup file",
            name: dest.display().to_string(),
        });
    }
    let provider = &sandbox.provider;
    let client = provider.client();
    let backup = format!("corral-export-{}", &stamp.id[..8.min(stamp.id.len())]);
    let body = json!({
        "name": backup,
        "instance_only": false,
        "optimized_storage": false,
        "compression_algorithm": "gzip",
    });
    let timeout = provider.config().operation_timeout;
    client
        .run(
            Method::POST,
            &sandbox.path("/backups"),
            Some(&body),
            timeout,
        )
        .await
        .map_err(|e| provider.err(e))?;
    let downloaded = client
        .download(
            &sandbox.path(&format!("/backups/{backup}/export")),
            dest,
            timeout,
        )
        .await;
    // The server-side copy is removed whatever happened to ours.
    let removed = client
        .run(
            Method::DELETE,
            &sandbox.path(&format!("/backups/{backup}")),
            None,
            timeout,
        )
        .await;
    // A failed download has removed what it created, and only that.
    downloaded.map_err(|e| provider.err(e))?;
    removed.map(|_| ()).map_err(|e| provider.err(e))
}

/// Create sandbox `name` from the backup file `source`.
pub async fn import(
    provider: &IncusProvider,
    source: &Path,
    name: &SandboxName,
) -> Result<(), ProviderError> {
    // Refused before any byte moves.
    provider.ensure_free(name.as_str()).await?;
    if !source.is_file() {
        return Err(ProviderError::NotFound {
            what: "backup file",
            name: source.display().to_string(),
        });
    }
    let config = provider.config();
    let headers = [
        ("X-Incus-name", name.to_string()),
        ("X-Incus-pool", config.storage_pool.clone()),
    ];
    // What the file would create is read first and held to the allowlists
    // (see `backup_index`): nothing unchecked is uploaded, and what is
    // uploaded is what was checked (see `backup_source`).
    let file = source.to_owned();
    let held = tokio::task::spawn_blocking(move || {
        let held = crate::backup_source::hold(&file)?;
        crate::backup_index::check(held.path()).map_err(|e| relabel(e, held.path(), &file))?;
        Ok::<_, ProviderError>(held)
    })
    .await
    .map_err(|e| ProviderError::Io {
        context: format!("checking {}", source.display()),
        source: std::io::Error::other(e),
    })??;
    let source = held.path();
    // Incus 6.0 counts the `volatile.*` keys every backup carries as
    // low-level settings and refuses them in a project restricted like
    // corral's, so the restriction is lifted for the upload alone (imports
    // are serialised) and put back whatever happens. If anything fails, what
    // was uploaded is deleted before the restriction is put back, so no
    // instance can keep the project from returning to `block`.
    let uploaded = {
        let _one_at_a_time = provider.inner.import_lock.lock().await;
        let mut attempt = 0;
        loop {
            attempt += 1;
            project::set_lowlevel(provider.client(), config.project.as_str(), "allow")
                .await
                .map_err(|e| provider.err(e))?;
            let uploaded = provider
                .client()
                .upload("/1.0/instances", &headers, source, config.operation_timeout)
                .await;
            // Another corral process converging the project at this moment
            // puts the restriction back mid-upload; try again, a few times.
            let raced = matches!(&uploaded, Err(e) if is_lowlevel_refusal(&e.to_string()));
            if raced && attempt < LOWLEVEL_TRIES {
                tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
                continue;
            }
            let mut restored =
                project::set_lowlevel(provider.client(), config.project.as_str(), "block").await;
            if uploaded.is_err() || restored.is_err() {
                remove_uploaded(provider, name).await;
                restored =
                    project::set_lowlevel(provider.client(), config.project.as_str(), "block")
                        .await;
            }
            restored.map_err(|e| provider.err(e))?;
            break uploaded;
        }
    };
    uploaded.map_err(|e| provider.err(e))?;
    let path = format!("/1.0/instances/{name}");
    let inst: api::Instance = provider
        .client()
        .get(&path)
        .await
        .map_err(|e| provider.err(e))?;
    let old = match Stamp::read(name.as_str(), &inst.config) {
        Ok(s) => s,
        Err(e) => {
            // corral does not adopt foreign instances through a side door.
            identity::discard(provider, name, &Stamp::new(None, None, "-")?).await;
            return Err(e);
        }
    };
    let bridge = match (&old.profile, config.profile_bridges.is_empty()) {
        (None, _) => None,
        (Some(_), true) => old.bridge.clone(),
        (Some(profile), false) => match config.profile_bridges.get(profile) {
            Some(b) => Some(b.clone()),
            None => {
                identity::discard(provider, name, &old).await;
                return Err(ProviderError::UnknownProfile {
                    profile: profile.to_string(),
                    configured: config
                        .profile_bridges
                        .keys()
                        .map(ToString::to_string)
                        .collect(),
                });
            }
        },
    };
    let mut stamp = old.renewed()?;
    stamp.bridge = bridge.clone();
    let pool = config.storage_pool.clone();
    let result = identity::renew(provider, name, &stamp, |mut devices| {
        devices.retain(|k, _| !k.starts_with(api::MOUNT_DEVICE_PREFIX));
        match &bridge {
            Some(b) => {
                // The backup's binding was another port's: the imported
                // instance starts unbound until corral binds it.
                devices.insert(NIC_DEVICE.to_owned(), api::nic_device(b.as_str(), None));
            }
            None => {
                devices.remove(NIC_DEVICE);
            }
        }
        if let Some(root) = devices.get_mut(ROOT_DEVICE) {
            root.insert("pool".into(), pool);
        }
        Ok(devices)
    })
    .await;
    if let Err(e) = result {
        identity::discard(provider, name, &stamp).await;
        return Err(e);
    }
    Ok(())
}

/// `e` naming the operator's `source` rather than the held copy `read`.
fn relabel(e: ProviderError, read: &Path, source: &Path) -> ProviderError {
    match e {
        ProviderError::InvalidSpec { field, reason } => ProviderError::InvalidSpec {
            field,
            reason: reason.replacen(
                &read.display().to_string(),
                &source.display().to_string(),
                1,
            ),
        },
        other => other,
    }
}

/// Force-delete instance `name` if the upload created it (the name was
/// checked free before), so the project's restriction can be put back.
async fn remove_uploaded(provider: &IncusProvider, name: &SandboxName) {
    let path = format!("/1.0/instances/{name}");
    let client = provider.client();
    if client.call(Method::GET, &path, None).await.is_err() {
        return;
    }
    let stop = crate::api::state_body("stop", true, None);
    let _ = client
        .run(
            Method::PUT,
            &format!("{path}/state"),
            Some(&stop),
            provider.config().operation_timeout,
        )
        .await;
    if let Err(e) = client
        .run(
            Method::DELETE,
            &path,
            None,
            provider.config().operation_timeout,
        )
        .await
    {
        tracing::warn!(error = %e, instance = %name, "could not delete a refused import");
    }
}

/// How many uploads an import tries while other corral processes put the
/// project's restriction back under it (each converges the project when it
/// connects; a full test run or a busy host has many at once: 3 were too
/// few beside other Incus tests).
const LOWLEVEL_TRIES: u32 = 8;

/// Incus's refusal of a backup's `volatile.*` keys in a restricted project.
fn is_lowlevel_refusal(message: &str) -> bool {
    message.contains("\"volatile.") && message.contains("is forbidden")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowlevel_refusal_is_recognised() {
        assert!(is_lowlevel_refusal(
            "Setting \"volatile.cloud-init.instance-id\" on container \"x\" in project \"corral\" is forbidden"
        ));
        assert!(!is_lowlevel_refusal("Instance not found"));
    }
}
