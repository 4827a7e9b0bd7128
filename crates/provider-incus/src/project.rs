//! corral's dedicated Incus project, created and converged on every start.
//!
//! Image access: the project has its **own** image store
//! (`features.images=true`), so nothing published in `default` is usable
//! until an operator imports or copies it into corral's project on purpose
//! (`scripts/incus-image.sh` does so for the test image). Profiles are the
//! project's own too, and corral attaches none.

use std::collections::BTreeMap;
use std::path::PathBuf;

use http::Method;
use serde::Deserialize;
use serde_json::json;

use crate::client::{ClientError, IncusClient};

/// The project corral uses unless configured otherwise.
pub const DEFAULT_PROJECT: &str = "corral";

/// The prefix of a granted user's project (`corral-u-alice`).
pub const USER_PROJECT_PREFIX: &str = "corral-u-";

/// Which of corral's projects a provider works in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ProjectRole {
    /// corral's own project: its own image store; NIC parents are left to
    /// the topology check (every NIC on its profile's bridge).
    #[default]
    Corral,
    /// A granted user's project (`corral grant`): the same restrictions,
    /// images from Incus's `default` project (nothing to copy per user),
    /// and NIC parents limited by Incus itself to `bridges`, corral's
    /// bridges (none: no NIC at all).
    User {
        /// The bridges a NIC may name as its parent.
        bridges: Vec<String>,
    },
}

/// `features.*` keys corral needs; Incus changes these only on an empty project.
const FEATURES: [(&str, &str); 4] = [
    ("features.images", "true"),
    ("features.profiles", "true"),
    ("features.storage.volumes", "true"),
    ("features.networks", "false"),
];

/// A project as Incus returns it.
#[derive(Debug, Clone, Deserialize)]
struct Project {
    #[serde(default)]
    config: BTreeMap<String, String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    used_by: Vec<String>,
}

/// Why the project could not be converged.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// A feature flag differs and Incus will not change it on a used project.
    #[error(
        "project `{project}` has {key}={actual:?} but corral needs {expected:?}, and Incus changes features only on an empty project; move its {used} instances/images elsewhere or configure another project"
    )]
    Feature {
        /// The project.
        project: String,
        /// The feature key.
        key: String,
        /// Its current value.
        actual: String,
        /// corral's value.
        expected: String,
        /// How many things use the project.
        used: usize,
    },
    /// Talking to Incus failed.
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// The configuration corral wants: restricted, no low-level or privileged
/// containers, no nesting, NICs allowed (bridged to host bridges), disks
/// limited to `disk_roots` (none: only pool-backed disks), snapshots and
/// backups allowed.
pub fn desired_config(disk_roots: &[PathBuf]) -> BTreeMap<String, String> {
    let mut config: BTreeMap<String, String> = FEATURES
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let restricted = [
        ("restricted", "true"),
        ("restricted.containers.nesting", "block"),
        ("restricted.containers.privilege", "unprivileged"),
        ("restricted.containers.lowlevel", "block"),
        ("restricted.virtual-machines.lowlevel", "block"),
        ("restricted.devices.nic", "allow"),
        ("restricted.devices.proxy", "block"),
        ("restricted.devices.gpu", "block"),
        ("restricted.devices.usb", "block"),
        ("restricted.devices.pci", "block"),
        ("restricted.devices.unix-char", "block"),
        ("restricted.devices.unix-block", "block"),
        ("restricted.devices.unix-hotplug", "block"),
        ("restricted.devices.infiniband", "block"),
        ("restricted.snapshots", "allow"),
        ("restricted.backups", "allow"),
        ("restricted.cluster.target", "block"),
    ];
    config.extend(
        restricted
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    if disk_roots.is_empty() {
        config.insert("restricted.devices.disk".into(), "managed".into());
    } else {
        config.insert("restricted.devices.disk".into(), "allow".into());
        let paths: Vec<String> = disk_roots.iter().map(|p| p.display().to_string()).collect();
        config.insert("restricted.devices.disk.paths".into(), paths.join(","));
    }
    config
}

/// The configuration of a project in `role`: [`desired_config`]'s
/// restrictions in both; a user's project takes images from Incus's
/// `default` project and lets a NIC's parent be one of corral's bridges
/// only. Incus 6.0 applies `restricted.networks.access` to the `parent` of
/// unmanaged NICs too ("Network not allowed in project"), whatever the
/// `nictype`; the one-NIC topology check (before every start) holds the
/// NIC to exactly `bridged` on its profile's bridge with corral's MAC.
pub fn config_for(role: &ProjectRole, disk_roots: &[PathBuf]) -> BTreeMap<String, String> {
    let mut config = desired_config(disk_roots);
    if let ProjectRole::User { bridges } = role {
        config.insert("features.images".into(), "false".into());
        if bridges.is_empty() {
            // An empty access list means "any network" to Incus.
            config.insert("restricted.devices.nic".into(), "block".into());
        } else {
            config.insert("restricted.networks.access".into(), bridges.join(","));
        }
    }
    config
}

/// The project of a granted user: `corral-u-NAME` when the name is plain
/// (letters, digits, `_`, `-`; at most 32 bytes), else `corral-u-UID`.
pub fn user_project(name: &str, uid: u32) -> String {
    let plain = !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if plain {
        format!("{USER_PROJECT_PREFIX}{name}")
    } else {
        format!("{USER_PROJECT_PREFIX}{uid}")
    }
}

/// Delete `project` (it must hold no instances, images or volumes; Incus
/// refuses otherwise). True when it existed.
pub async fn remove(client: &IncusClient, project: &str) -> Result<bool, ClientError> {
    let path = format!("/1.0/projects/{project}");
    // The project's own default profile does not stop the delete.
    match client.call(Method::DELETE, &path, None).await {
        Ok(_) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

/// True when `project` exists.
pub async fn exists(client: &IncusClient, project: &str) -> Result<bool, ClientError> {
    match client
        .get::<serde_json::Value>(&format!("/1.0/projects/{project}"))
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Create `project` if missing, else bring its config to `desired`
/// (keys corral does not manage, such as `limits.*`, are kept).
/// Returns true when something changed.
pub async fn converge(
    client: &IncusClient,
    project: &str,
    desired: &BTreeMap<String, String>,
) -> Result<bool, ProjectError> {
    let path = format!("/1.0/projects/{project}");
    let current: Project = match client.get(&path).await {
        Ok(p) => p,
        Err(e) if e.is_not_found() => {
            let body = json!({
                "name": project,
                "description": "corral sandboxes (managed by corral; converged on every start)",
                "config": desired,
            });
            match client
                .call(Method::POST, "/1.0/projects", Some(&body))
                .await
            {
                Ok(_) => return Ok(true),
                // Another corral process created it between our GET and
                // POST (two first connections to a fresh daemon): converge
                // the project it made instead of failing.
                Err(create_err) => match client.get(&path).await {
                    Ok(p) => p,
                    Err(_) => return Err(create_err.into()),
                },
            }
        }
        Err(e) => return Err(e.into()),
    };
    let mut merged = current.config.clone();
    for (key, value) in desired {
        if merged.get(key) == Some(value) {
            continue;
        }
        if key.starts_with("features.") && !current.used_by_anything() {
            // Empty project: Incus accepts the change below.
        } else if key.starts_with("features.") {
            return Err(ProjectError::Feature {
                project: project.to_owned(),
                key: key.clone(),
                actual: merged.get(key).cloned().unwrap_or_default(),
                expected: value.clone(),
                used: current.used_by.len(),
            });
        }
        merged.insert(key.clone(), value.clone());
    }
    // A path list corral no longer allows must not linger.
    if !desired.contains_key("restricted.devices.disk.paths") {
        merged.remove("restricted.devices.disk.paths");
    }
    if merged == current.config {
        return Ok(false);
    }
    let body = json!({ "config": merged, "description": current.description });
    client.call(Method::PUT, &path, Some(&body)).await?;
    Ok(true)
}

/// Set `restricted.containers.lowlevel` on `project` to `value`.
pub async fn set_lowlevel(
    client: &IncusClient,
    project: &str,
    value: &str,
) -> Result<(), ClientError> {
    // A full PUT: Incus 6.0's PATCH resets the `features.*` keys it is not sent.
    let path = format!("/1.0/projects/{project}");
    let mut current: Project = client.get(&path).await?;
    current.config.insert(
        "restricted.containers.lowlevel".to_owned(),
        value.to_owned(),
    );
    let body = json!({ "config": current.config, "description": current.description });
    client
        .call(Method::PUT, &path, Some(&body))
        .await
        .map(|_| ())
}

impl Project {
    /// Incus lists the project's own default profile in `used_by`; that one
    /// does not stop a feature change.
    fn used_by_anything(&self) -> bool {
        self.used_by
            .iter()
            .any(|u| !u.starts_with("/1.0/profiles/default"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_roots_only_pool_disks_are_allowed() {
        let config = desired_config(&[]);
        assert_eq!(config["restricted"], "true");
        assert_eq!(config["restricted.devices.disk"], "managed");
        assert!(!config.contains_key("restricted.devices.disk.paths"));
        assert_eq!(config["features.images"], "true");
        assert_eq!(config["features.profiles"], "true");
        assert_eq!(config["restricted.containers.nesting"], "block");
        assert_eq!(config["restricted.containers.lowlevel"], "block");
        assert_eq!(config["restricted.snapshots"], "allow");
        assert_eq!(config["restricted.backups"], "allow");
    }

    #[test]
    fn roots_become_the_disk_path_allowlist() {
        let config = desired_config(&[
            PathBuf::from("/srv/repos"),
            PathBuf::from("/var/lib/corral/staging"),
        ]);
        assert_eq!(config["restricted.devices.disk"], "allow");
        assert_eq!(
            config["restricted.devices.disk.paths"],
            "/srv/repos,/var/lib/corral/staging"
        );
    }

    #[test]
    fn a_users_project_has_the_same_restrictions_and_only_corrals_bridges() {
        let corral = config_for(&ProjectRole::Corral, &[]);
        assert_eq!(corral, desired_config(&[]));
        let user = config_for(
            &ProjectRole::User {
                bridges: vec!["crl-a".into(), "crl-b".into()],
            },
            &[],
        );
        for (k, v) in &corral {
            if k != "features.images" {
                assert_eq!(user.get(k), Some(v), "{k}");
            }
        }
        assert_eq!(user["features.images"], "false");
        assert_eq!(user["restricted.networks.access"], "crl-a,crl-b");
        // No bridges: no NIC at all, never an empty (= any) access list.
        let none = config_for(&ProjectRole::User { bridges: vec![] }, &[]);
        assert_eq!(none["restricted.devices.nic"], "block");
        assert!(!none.contains_key("restricted.networks.access"));
    }

    #[test]
    fn user_projects_are_named_for_plain_names_else_the_uid() {
        assert_eq!(user_project("alice", 1001), "corral-u-alice");
        assert_eq!(user_project("a.b", 1001), "corral-u-1001");
        assert_eq!(user_project("x$", 7), "corral-u-7");
        assert_eq!(user_project(&"a".repeat(33), 9), "corral-u-9");
    }

    #[test]
    fn the_default_profile_alone_does_not_count_as_use() {
        let p = Project {
            config: BTreeMap::new(),
            description: String::new(),
            used_by: vec!["/1.0/profiles/default?project=corral".into()],
        };
        assert!(!p.used_by_anything());
        let p = Project {
            used_by: vec!["/1.0/instances/a?project=corral".into()],
            ..p
        };
        assert!(p.used_by_anything());
    }
}
