//! The sandbox provider both front-ends drive: chosen through the platform
//! matrix (`select_provider`), connected on first use so host commands and
//! corrald's host routes keep working while the backend daemon is down.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use corral_provider_incus::{Endpoint, IncusConfig, IncusProvider};
use corral_sandbox_core::config::HostConfig;
use corral_sandbox_core::platform::{SelectError, Selection};
use corral_sandbox_core::sandbox::{ProviderError, SandboxProvider};
use corral_sandbox_core::{HostOs, SandboxKind, select_provider};
use tokio::sync::OnceCell;

/// Why the requested provider was refused.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// This build does not know the host OS.
    #[error("corral does not know the host OS `{0}`; it runs on linux, macos or windows hosts")]
    UnknownHost(String),
    /// The matrix refuses the host/kind combination.
    #[error(transparent)]
    Refused(#[from] SelectError),
    /// The matrix allows it, but corral has no driver for it here yet.
    #[error(
        "corral can drive only incus sandboxes (the local daemon) from here; {0} is allowed on this host but not served — use incus"
    )]
    NotServed(SandboxKind),
}

/// The selected provider, connected lazily.
#[derive(Debug)]
pub struct Backend {
    selection: Selection,
    source: Source,
}

#[derive(Debug)]
enum Source {
    /// The local Incus daemon, connected on first use.
    Incus {
        config: Box<IncusConfig>,
        provider: OnceCell<IncusProvider>,
    },
    /// A provider the embedder built (another kind, or a test's fake tool).
    Given(Arc<dyn SandboxProvider>),
}

impl Backend {
    /// Select `kind` on `host_os` for profiled work under `host`; only the
    /// local Incus daemon at `incus_socket` is served.
    pub fn select(
        host_os: &str,
        kind: SandboxKind,
        host: &HostConfig,
        incus_socket: PathBuf,
    ) -> Result<Self, BackendError> {
        let os = HostOs::from_target_os(host_os)
            .ok_or_else(|| BackendError::UnknownHost(host_os.to_owned()))?;
        let selection = select_provider(os, kind, host, true)?;
        if kind != SandboxKind::Incus {
            return Err(BackendError::NotServed(kind));
        }
        let mut config = IncusConfig::local();
        config.endpoint = Endpoint::Unix(incus_socket);
        Ok(Self {
            selection,
            source: Source::Incus {
                config: Box::new(config),
                provider: OnceCell::new(),
            },
        })
    }

    /// `provider` (of any kind) for profiled work on `host_os`, checked
    /// against the platform matrix like [`Backend::select`]: for embedders
    /// that drive Multipass or Tart themselves, and for tests that drive a
    /// provider through a recording fake tool.
    pub fn with_provider(
        host_os: HostOs,
        host: &HostConfig,
        provider: Arc<dyn SandboxProvider>,
    ) -> Result<Self, BackendError> {
        let selection = select_provider(host_os, provider.kind(), host, true)?;
        Ok(Self {
            selection,
            source: Source::Given(provider),
        })
    }

    /// Keep at most `bytes` of each output stream of a buffered exec (the
    /// answer says when a stream was cut). A provider the embedder built
    /// keeps its own bound.
    pub fn with_max_exec_output(mut self, bytes: u64) -> Self {
        if let Source::Incus { config, .. } = &mut self.source {
            config.max_exec_output = bytes;
        }
        self
    }

    /// Map each of `profiles` to its bridge on this host, so an imported
    /// sandbox's NIC goes on its profile's bridge here (and a backup from
    /// a profile this host does not configure is refused). A provider the
    /// embedder built keeps its own map.
    pub fn with_profiles(mut self, profiles: &corral_sandbox_core::ProfileSet) -> Self {
        if let Source::Incus { config, .. } = &mut self.source {
            config.profile_bridges = profiles
                .iter()
                .map(|p| (p.name.clone(), p.bridge.clone()))
                .collect();
        }
        self
    }

    /// What the matrix said about the selected kind.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// Ask the backend whether it answers now (the Incus daemon: `GET
    /// /1.0`), giving it at most `within`.
    pub async fn ping(&self, within: Duration) -> Result<(), ProviderError> {
        let asked = async {
            match &self.source {
                Source::Incus { config, provider } => {
                    let p = provider
                        .get_or_try_init(|| IncusProvider::connect(config.as_ref().clone()))
                        .await?;
                    p.client()
                        .get::<serde_json::Value>("/1.0")
                        .await
                        .map(|_| ())
                        .map_err(|e| e.into_provider(SandboxKind::Incus))
                }
                // A provider the embedder built answers when it can list.
                Source::Given(p) => p.list().await.map(|_| ()),
            }
        };
        tokio::time::timeout(within, asked)
            .await
            .unwrap_or_else(|_| {
                Err(ProviderError::Timeout {
                    operation: "asking the Incus daemon whether it answers".into(),
                    after: within,
                })
            })
    }

    /// True when its sandboxes' NICs land on this host's corral bridges, so
    /// the service binds their ports (the local Incus daemon; a remote
    /// backend's bridges are another host's).
    pub fn binds_ports(&self) -> bool {
        self.selection.kind == SandboxKind::Incus
    }

    /// The provider, connecting (and converging corral's project) on first
    /// use; a failed connection is retried by the next call.
    pub async fn provider(&self) -> Result<&dyn SandboxProvider, ProviderError> {
        match &self.source {
            Source::Incus { config, provider } => {
                let p = provider
                    .get_or_try_init(|| IncusProvider::connect(config.as_ref().clone()))
                    .await?;
                Ok(p)
            }
            Source::Given(p) => Ok(p.as_ref()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_refusals_and_unserved_kinds() {
        let host = HostConfig::default();
        let sock = PathBuf::from("/nonexistent.sock");
        let ok = Backend::select("linux", SandboxKind::Incus, &host, sock.clone()).unwrap();
        assert_eq!(ok.selection().kind, SandboxKind::Incus);
        let e = Backend::select("windows", SandboxKind::Tart, &host, sock.clone()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("tart is not supported on windows"),
            "{e}"
        );
        let e = Backend::select("linux", SandboxKind::Process, &host, sock.clone()).unwrap_err();
        assert!(e.to_string().contains("does not enforce egress"), "{e}");
        let e = Backend::select("linux", SandboxKind::Multipass, &host, sock.clone()).unwrap_err();
        assert!(
            matches!(e, BackendError::NotServed(SandboxKind::Multipass)),
            "{e}"
        );
        let e = Backend::select("plan9", SandboxKind::Incus, &host, sock).unwrap_err();
        assert!(matches!(e, BackendError::UnknownHost(_)), "{e}");
    }

    #[tokio::test]
    async fn a_missing_daemon_is_an_io_error_and_is_retried() {
        let dir = tempfile::tempdir().unwrap();
        let b = Backend::select(
            "linux",
            SandboxKind::Incus,
            &HostConfig::default(),
            dir.path().join("none.sock"),
        )
        .unwrap();
        for _ in 0..2 {
            let e = b.provider().await.unwrap_err();
            assert!(matches!(e, ProviderError::Io { .. }), "{e}");
        }
    }
}
