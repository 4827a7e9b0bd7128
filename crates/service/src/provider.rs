//! The sandbox provider both front-ends drive: chosen through the platform
//! matrix (`select_provider`), connected on first use so host commands and
//! corrald's host routes keep working while the backend daemon is down.
//!
//! The local Incus daemon holds corral's sandboxes in more than one
//! project: corral's own, and one per user `corral grant` named
//! ([`UserProjects`]). A backend creates in its own project (corral's, or
//! the user's from [`Backend::in_project`]) and sees every one of them:
//! [`Backend::providers`] lists corral's project first, then each user's,
//! so a listing, a name's lookup and the NICs already handed out span all
//! of them.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use corral_provider_incus::project::ProjectRole;
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

/// Where the projects of granted users are listed (corral's store).
pub trait UserProjects: Send + Sync + fmt::Debug {
    /// Every user project that may hold sandboxes (revoked users' too,
    /// until they are purged).
    fn projects(&self) -> Result<Vec<String>, String>;
}

impl UserProjects for crate::Store {
    fn projects(&self) -> Result<Vec<String>, String> {
        self.grants()
            .map(|g| g.into_iter().map(|g| g.project).collect())
            .map_err(|e| crate::error::chain(&e))
    }
}

/// The selected provider, connected lazily.
#[derive(Debug)]
pub struct Backend {
    selection: Selection,
    source: Source,
}

/// Connected providers of the other projects, by project.
type Connected = Arc<Mutex<BTreeMap<String, IncusProvider>>>;

#[derive(Debug)]
enum Source {
    /// The local Incus daemon, connected on first use.
    Incus {
        /// This backend's project (where it creates).
        config: Box<IncusConfig>,
        provider: OnceCell<IncusProvider>,
        /// corral's own project's configuration (the base of every user's).
        corral: Box<IncusConfig>,
        /// The user projects, when grants are kept.
        users: Option<Arc<dyn UserProjects>>,
        /// Providers of the other projects, connected on first use.
        others: Connected,
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
                corral: Box::new(config.clone()),
                config: Box::new(config),
                provider: OnceCell::new(),
                users: None,
                others: Connected::default(),
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
        if let Source::Incus { config, corral, .. } = &mut self.source {
            config.max_exec_output = bytes;
            corral.max_exec_output = bytes;
        }
        self
    }

    /// See (and act on) the sandboxes in the projects `users` lists, as
    /// well as this backend's own.
    pub fn with_user_projects(mut self, projects: Arc<dyn UserProjects>) -> Self {
        if let Source::Incus { users, .. } = &mut self.source {
            *users = Some(projects);
        }
        self
    }

    /// The same daemon, creating in the user project `project` (which it
    /// converges on first use: corral's restrictions, NIC parents limited
    /// to the configured profiles' bridges). `None` for a provider the
    /// embedder built.
    pub fn in_project(&self, project: &str) -> Option<Self> {
        let Source::Incus {
            corral,
            users,
            others,
            ..
        } = &self.source
        else {
            return None;
        };
        Some(Self {
            selection: self.selection,
            source: Source::Incus {
                config: Box::new(user_config(corral, project)),
                provider: OnceCell::new(),
                corral: corral.clone(),
                users: users.clone(),
                others: Arc::clone(others),
            },
        })
    }

    /// The project this backend creates in (`None`: not Incus).
    pub fn project(&self) -> Option<&str> {
        match &self.source {
            Source::Incus { config, .. } => Some(&config.project),
            Source::Given(_) => None,
        }
    }

    /// This backend's provider first, then those of every other project
    /// corral's sandboxes live in (corral's own, each granted user's).
    pub async fn providers(&self) -> Result<Vec<Arc<dyn SandboxProvider>>, ProviderError> {
        match self.incus_providers().await? {
            Some(all) => Ok(all
                .into_iter()
                .map(|p| Arc::new(p) as Arc<dyn SandboxProvider>)
                .collect()),
            None => Ok(vec![self.provider_arc().await?]),
        }
    }

    /// [`Self::providers`] as Incus providers (what a watcher of Incus's
    /// events needs: one per project); `None` for a provider the embedder
    /// built.
    pub async fn incus_providers(&self) -> Result<Option<Vec<IncusProvider>>, ProviderError> {
        let Source::Incus {
            config,
            provider,
            corral,
            users,
            others,
        } = &self.source
        else {
            return Ok(None);
        };
        let mine = provider
            .get_or_try_init(|| IncusProvider::connect(config.as_ref().clone()))
            .await?
            .clone();
        let mut projects = Vec::new();
        if config.project != corral.project {
            projects.push(corral.project.clone());
        }
        if let Some(users) = users {
            let listed = users.projects().map_err(|message| ProviderError::Backend {
                kind: SandboxKind::Incus,
                operation: "listing the granted users' projects".into(),
                message,
                code: None,
            })?;
            projects.extend(listed.into_iter().filter(|p| p != &config.project));
        }
        let mut out = vec![mine];
        for project in projects {
            let cached = others
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&project)
                .cloned();
            let p = match cached {
                Some(p) => p,
                None => {
                    let wanted = if project == corral.project {
                        corral.as_ref().clone()
                    } else {
                        user_config(corral, &project)
                    };
                    let p = IncusProvider::connect(wanted).await?;
                    others
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(project, p.clone());
                    p
                }
            };
            out.push(p);
        }
        Ok(Some(out))
    }

    /// True when Incus has `project` (`false` for a provider the embedder
    /// built).
    pub async fn project_exists(&self, project: &str) -> Result<bool, ProviderError> {
        let Some(p) = self.incus().await? else {
            return Ok(false);
        };
        corral_provider_incus::project::exists(p.client(), project)
            .await
            .map_err(|e| e.into_provider(SandboxKind::Incus))
    }

    /// Delete the (empty) project `project`; true when it existed.
    pub async fn remove_project(&self, project: &str) -> Result<bool, ProviderError> {
        let Some(p) = self.incus().await? else {
            return Ok(false);
        };
        let removed = corral_provider_incus::project::remove(p.client(), project)
            .await
            .map_err(|e| e.into_provider(SandboxKind::Incus))?;
        self.forget_project(project);
        Ok(removed)
    }

    /// A client on corral's own project (which always exists) for
    /// project-level calls.
    async fn incus(&self) -> Result<Option<IncusProvider>, ProviderError> {
        let Source::Incus { corral, others, .. } = &self.source else {
            return Ok(None);
        };
        let cached = others
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&corral.project)
            .cloned();
        if let Some(p) = cached {
            return Ok(Some(p));
        }
        let p = IncusProvider::connect(corral.as_ref().clone()).await?;
        others
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(corral.project.clone(), p.clone());
        Ok(Some(p))
    }

    /// The Incus cluster's members as Incus reports them (`None`: the
    /// server is not clustered, or the provider is not Incus).
    pub async fn cluster_members(
        &self,
    ) -> Result<Option<Vec<corral_provider_incus::ClusterMember>>, ProviderError> {
        match self.incus().await? {
            Some(p) => p.members().await,
            None => Ok(None),
        }
    }

    /// The cluster member this backend's Incus daemon is (`None`: not
    /// clustered, or not Incus): where this corral's kernel is.
    pub async fn local_member(&self) -> Result<Option<String>, ProviderError> {
        match self.incus().await? {
            Some(p) => p.local_member().await,
            None => Ok(None),
        }
    }

    /// Forget the connection to `project` (it was deleted).
    pub fn forget_project(&self, project: &str) {
        if let Source::Incus { others, .. } = &self.source {
            others
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(project);
        }
    }

    async fn provider_arc(&self) -> Result<Arc<dyn SandboxProvider>, ProviderError> {
        match &self.source {
            Source::Incus {
                config, provider, ..
            } => {
                let p = provider
                    .get_or_try_init(|| IncusProvider::connect(config.as_ref().clone()))
                    .await?;
                Ok(Arc::new(p.clone()))
            }
            Source::Given(p) => Ok(Arc::clone(p)),
        }
    }

    /// Map each of `profiles` to its bridge on this host, so an imported
    /// sandbox's NIC goes on its profile's bridge here (and a backup from
    /// a profile this host does not configure is refused). A provider the
    /// embedder built keeps its own map.
    pub fn with_profiles(mut self, profiles: &corral_sandbox_core::ProfileSet) -> Self {
        if let Source::Incus { config, corral, .. } = &mut self.source {
            config.profile_bridges = profiles
                .iter()
                .map(|p| (p.name.clone(), p.bridge.clone()))
                .collect();
            corral.profile_bridges = config.profile_bridges.clone();
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
                Source::Incus {
                    config, provider, ..
                } => {
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
            Source::Incus {
                config, provider, ..
            } => {
                let p = provider
                    .get_or_try_init(|| IncusProvider::connect(config.as_ref().clone()))
                    .await?;
                Ok(p)
            }
            Source::Given(p) => Ok(p.as_ref()),
        }
    }
}

/// A user project's configuration: corral's, in `project`, whose NICs may
/// have only the configured profiles' bridges as parents.
fn user_config(corral: &IncusConfig, project: &str) -> IncusConfig {
    let mut bridges: Vec<String> = corral
        .profile_bridges
        .values()
        .map(|b| b.as_str().to_owned())
        .collect();
    bridges.sort();
    bridges.dedup();
    IncusConfig {
        project: project.to_owned(),
        role: ProjectRole::User { bridges },
        ..corral.clone()
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
