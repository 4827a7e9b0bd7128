//! How a provider reaches Incus and what it may do there.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use corral_sandbox_core::{BridgeName, ProfileName};

use crate::client::{DEFAULT_REQUEST_TIMEOUT, DEFAULT_SOCKET, RemoteCredentials};
use crate::mounts::MountPolicy;
use crate::project::{DEFAULT_PROJECT, ProjectRole};

/// Where the daemon is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// The local daemon's unix socket (kind `incus`).
    Unix(PathBuf),
    /// A remote server or cluster member over HTTPS (kind `incus-remote`).
    Https {
        /// `host:port`.
        address: String,
        /// Pinned server certificate and corral's client certificate.
        credentials: RemoteCredentials,
    },
}

/// Everything an [`crate::IncusProvider`] needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncusConfig {
    /// The daemon.
    pub endpoint: Endpoint,
    /// corral's project (created and converged on connect).
    pub project: String,
    /// What that project is for: corral's own, or a granted user's.
    pub role: ProjectRole,
    /// The storage pool root disks go on.
    pub storage_pool: String,
    /// This host's profile → bridge map; import re-attaches an instance's
    /// NIC to its profile's bridge from here. Empty: keep the stamped bridge.
    pub profile_bridges: BTreeMap<ProfileName, BridgeName>,
    /// Host mount rules.
    pub mounts: MountPolicy,
    /// Bound on one plain request.
    pub request_timeout: Duration,
    /// Bound on one background operation (create, copy, backup…).
    pub operation_timeout: Duration,
    /// Largest guest file `pull` brings to the host.
    pub max_pull_bytes: u64,
    /// Most bytes of each exec output stream kept on the host; the rest
    /// is dropped and the output marked truncated.
    pub max_exec_output: u64,
}

/// Default [`IncusConfig::max_pull_bytes`]: 64 MiB.
pub const DEFAULT_MAX_PULL_BYTES: u64 = 64 << 20;
/// Default [`IncusConfig::max_exec_output`]: 16 MiB per stream.
pub const DEFAULT_MAX_EXEC_OUTPUT: u64 = 16 << 20;

impl IncusConfig {
    /// The local daemon on its default socket, project `corral`, pool `default`.
    pub fn local() -> Self {
        Self {
            endpoint: Endpoint::Unix(PathBuf::from(DEFAULT_SOCKET)),
            project: DEFAULT_PROJECT.to_owned(),
            role: ProjectRole::Corral,
            storage_pool: "default".to_owned(),
            profile_bridges: BTreeMap::new(),
            mounts: MountPolicy::default(),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            operation_timeout: Duration::from_secs(300),
            max_pull_bytes: DEFAULT_MAX_PULL_BYTES,
            max_exec_output: DEFAULT_MAX_EXEC_OUTPUT,
        }
    }

    /// A remote daemon at `address` (`host:port`).
    pub fn remote(address: impl Into<String>, credentials: RemoteCredentials) -> Self {
        Self {
            endpoint: Endpoint::Https {
                address: address.into(),
                credentials,
            },
            ..Self::local()
        }
    }
}
