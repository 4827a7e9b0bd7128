//! [`IncusProvider`]: the `SandboxProvider` for Incus.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use corral_sandbox_core::sandbox::{
    Attachment, Capabilities, Made, Operation, ProviderError, Sandbox, SandboxInfo,
    SandboxProvider, SandboxSpec, SandboxState,
};
use corral_sandbox_core::{SandboxKind, SandboxName};
use futures::StreamExt as _;
use http::Method;

use crate::api::{self, Instance, InstanceState};
use crate::client::{ClientError, Connector, HttpsConnector, IncusClient, UnixConnector};
use crate::config::{Endpoint, IncusConfig};
use crate::project;
use crate::sandbox::IncusSandbox;
use crate::stamp::Stamp;
use crate::topology::{self, Expected};

/// Incus sandboxes, local (`incus`) or remote (`incus-remote`).
#[derive(Debug, Clone)]
pub struct IncusProvider {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) client: IncusClient,
    pub(crate) config: IncusConfig,
    pub(crate) kind: SandboxKind,
    /// Roots mount sources may lie beneath (allowed roots + staging root).
    pub(crate) disk_roots: Vec<PathBuf>,
    /// Imports lift a project restriction for their upload; one at a time.
    pub(crate) import_lock: tokio::sync::Mutex<()>,
}

impl IncusProvider {
    /// Connect to the daemon and create or converge corral's project.
    pub async fn connect(config: IncusConfig) -> Result<Self, ProviderError> {
        let (connector, kind): (Arc<dyn Connector>, _) = match &config.endpoint {
            Endpoint::Unix(path) => (
                Arc::new(UnixConnector::new(path.clone())),
                SandboxKind::Incus,
            ),
            Endpoint::Https {
                address,
                credentials,
            } => (
                Arc::new(
                    HttpsConnector::new(address, credentials)
                        .map_err(|e| e.into_provider(SandboxKind::IncusRemote))?,
                ),
                SandboxKind::IncusRemote,
            ),
        };
        let client = IncusClient::new(connector, config.project.clone(), config.request_timeout);
        let disk_roots = config.mounts.disk_roots();
        let desired = project::config_for(&config.role, &disk_roots);
        project::converge(&client, &config.project, &desired)
            .await
            .map_err(|e| match e {
                project::ProjectError::Client(c) => c.into_provider(kind),
                other => ProviderError::Backend {
                    kind,
                    operation: "project setup".into(),
                    message: other.to_string(),
                    code: None,
                },
            })?;
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                config,
                kind,
                disk_roots,
                import_lock: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// The REST client (for tests and tools that need a raw call).
    pub fn client(&self) -> &IncusClient {
        &self.inner.client
    }

    /// The configuration in force.
    pub fn config(&self) -> &IncusConfig {
        &self.inner.config
    }

    /// Refuse unless sandbox `name` (corral's, in this project) still has
    /// the topology its stamp promises: what a start checks, for a
    /// sandbox someone else started.
    pub async fn check_topology_of(&self, name: &str) -> Result<(), ProviderError> {
        let (inst, stamp) = self.owned(name).await?;
        self.check_topology(&inst, &stamp)
    }

    /// Subscribe to the lifecycle events of this provider's project.
    pub async fn lifecycle_events(&self) -> Result<crate::events::LifecycleStream, ProviderError> {
        crate::events::LifecycleStream::open(&self.inner.client, &self.inner.config.project)
            .await
            .map_err(|e| self.err(e))
    }

    pub(crate) fn err(&self, e: ClientError) -> ProviderError {
        e.into_provider(self.inner.kind)
    }

    /// Every instance name in corral's project, corral's or not.
    pub(crate) async fn instance_names(&self) -> Result<Vec<String>, ProviderError> {
        let urls: Vec<String> = self
            .inner
            .client
            .get("/1.0/instances")
            .await
            .map_err(|e| self.err(e))?;
        // `/1.0/instances/NAME`, possibly with a `?project=` query.
        Ok(urls
            .iter()
            .filter_map(|url| {
                let path = url.split('?').next()?;
                path.rsplit('/').next().map(str::to_owned)
            })
            .collect())
    }

    /// The instance `name`, if it exists and carries corral's stamp.
    pub(crate) async fn owned(&self, name: &str) -> Result<(Instance, Stamp), ProviderError> {
        let inst: Instance = self
            .inner
            .client
            .get(&format!("/1.0/instances/{name}"))
            .await
            .map_err(|e| self.not_found_as(e, "sandbox", name))?;
        let stamp = Stamp::read(name, &inst.config)?;
        Ok((inst, stamp))
    }

    /// Fail with `AlreadyExists` unless `name` is free.
    pub(crate) async fn ensure_free(&self, name: &str) -> Result<(), ProviderError> {
        match self
            .inner
            .client
            .call(Method::GET, &format!("/1.0/instances/{name}"), None)
            .await
        {
            Ok(_) => Err(ProviderError::AlreadyExists {
                what: "sandbox",
                name: name.to_owned(),
            }),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(self.err(e)),
        }
    }

    pub(crate) fn not_found_as(
        &self,
        e: ClientError,
        what: &'static str,
        name: &str,
    ) -> ProviderError {
        if e.is_not_found() {
            ProviderError::NotFound {
                what,
                name: name.to_owned(),
            }
        } else {
            self.err(e)
        }
    }

    /// Refuse unless `inst` still has the topology its stamp promises.
    pub(crate) fn check_topology(
        &self,
        inst: &Instance,
        stamp: &Stamp,
    ) -> Result<(), ProviderError> {
        let expected = Expected {
            pool: &self.inner.config.storage_pool,
            bridge: stamp.bridge.as_ref(),
            nic: stamp.nic.as_ref(),
            mount_roots: &self.inner.disk_roots,
        };
        let differences = topology::differences(inst, &expected);
        if differences.is_empty() {
            Ok(())
        } else {
            Err(ProviderError::Topology {
                name: inst.name.clone(),
                differences,
            })
        }
    }

    pub(crate) fn handle(&self, name: SandboxName) -> Box<dyn Sandbox> {
        Box::new(IncusSandbox::new(self.clone(), name))
    }

    /// The global addresses of a running instance, from its runtime state;
    /// none for one that is not running (its addresses are gone). Without a
    /// NIC it has loopback alone, which is not listed: no need for the
    /// runtime state (a costly read on a container that just started).
    pub(crate) async fn addresses(
        &self,
        inst: &Instance,
    ) -> Result<Vec<std::net::IpAddr>, ProviderError> {
        if inst.state() != SandboxState::Running || !inst.has_any_nic() {
            return Ok(Vec::new());
        }
        let path = format!("/1.0/instances/{}/state", inst.name);
        let state: InstanceState = match self.inner.client.get(&path).await {
            Ok(s) => s,
            // Deleted since it was listed: it has no addresses to show.
            Err(e) if e.is_not_found() => return Ok(Vec::new()),
            Err(e) => return Err(self.err(e)),
        };
        let mut addresses = Vec::new();
        for (ifname, net) in state.network.unwrap_or_default() {
            if ifname == "lo" {
                continue;
            }
            addresses.extend(
                net.addresses
                    .iter()
                    .filter(|a| a.scope == "global")
                    .filter_map(|a| a.address.parse::<std::net::IpAddr>().ok()),
            );
        }
        Ok(addresses)
    }

    /// Sandbox info from an instance record.
    pub(crate) fn info_of(
        &self,
        inst: &Instance,
        stamp: &Stamp,
        addresses: Vec<std::net::IpAddr>,
    ) -> Result<SandboxInfo, ProviderError> {
        Ok(SandboxInfo {
            name: SandboxName::new(inst.name.as_str()).map_err(|e| ProviderError::Malformed {
                kind: self.inner.kind,
                operation: "list".into(),
                detail: e.to_string(),
            })?,
            kind: self.inner.kind,
            state: inst.state(),
            instance_type: inst.instance_type(),
            profile: stamp.profile.clone(),
            image: Some(stamp.template.clone()),
            created: Some(stamp.created.clone()),
            addresses,
            nic: inst.nic_device().and_then(api::bound_nic),
            // A single server reports `none`.
            location: Some(inst.location.clone()).filter(|l| !l.is_empty() && l != "none"),
        })
    }

    /// Create (and with `start`, start) the instance `spec` asks for;
    /// `Err`: nothing was made (a mount's staging is removed again);
    /// `Ok(Err(_))`: made, but its start failed.
    async fn made(
        &self,
        spec: &SandboxSpec,
        start: bool,
    ) -> Result<Result<(), ProviderError>, ProviderError> {
        if self.inner.kind == SandboxKind::IncusRemote
            && let Some(m) = spec.mounts.first()
        {
            // A host path names a directory on this machine, not the remote's.
            return Err(ProviderError::Mount {
                source_path: m.source.display().to_string(),
                reason: "host mounts need the sandbox on this host; an incus-remote sandbox runs elsewhere".into(),
            });
        }
        let (profile, bridge, nic) = match &spec.network {
            Some(net) => (
                Some(net.profile.clone()),
                Some(net.bridge.clone()),
                net.nic.clone(),
            ),
            None => (None, None, None),
        };
        let stamp = Stamp::new(profile, bridge, spec.image.clone())?.with_nic(nic);
        match self.create_inner(spec, &stamp, start).await {
            Ok(started) => Ok(started),
            Err(e) => {
                let _ = self.inner.config.mounts.remove_staging(&stamp.id);
                Err(e)
            }
        }
    }

    /// Create the instance (and with `start`, start it in the same
    /// request). `Ok(Err(_))`: made, carrying `stamp`, but not started.
    async fn create_inner(
        &self,
        spec: &SandboxSpec,
        stamp: &Stamp,
        start: bool,
    ) -> Result<Result<(), ProviderError>, ProviderError> {
        let mounts = self.inner.config.mounts.prepare(&stamp.id, &spec.mounts)?;
        let mut body = api::create_body(spec, &self.inner.config.storage_pool, stamp, &mounts)?;
        if start {
            body["start"] = serde_json::Value::Bool(true);
        }
        let path = self.create_path(spec.target.as_deref()).await?;
        let created = self
            .inner
            .client
            .run(
                Method::POST,
                &path,
                Some(&body),
                self.inner.config.operation_timeout,
            )
            .await;
        match created {
            Ok(_) => Ok(Ok(())),
            // Made (it carries this create's stamp), but its start failed.
            Err(e)
                if start
                    && self
                        .owned(spec.name.as_str())
                        .await
                        .is_ok_and(|(_, s)| s.id == stamp.id) =>
            {
                Ok(Err(self.err(e)))
            }
            Err(e) => {
                // Say "no such image" plainly when that is what went wrong.
                let alias = format!("/1.0/images/aliases/{}", spec.image);
                if let Err(a) = self.inner.client.call(Method::GET, &alias, None).await
                    && a.is_not_found()
                {
                    return Err(missing_image(&spec.image, self.inner.client.project()));
                }
                // Incus reports a taken name as a database constraint error.
                if e.status() == Some(409) || self.ensure_free(spec.name.as_str()).await.is_err() {
                    return Err(ProviderError::AlreadyExists {
                        what: "sandbox",
                        name: spec.name.to_string(),
                    });
                }
                Err(self.err(e))
            }
        }
    }
}

#[async_trait]
impl SandboxProvider for IncusProvider {
    fn kind(&self) -> SandboxKind {
        self.inner.kind
    }

    fn capabilities(&self) -> Capabilities {
        // Incus does every operation the trait knows.
        Capabilities::of(&Operation::ALL)
    }

    async fn create(&self, spec: &SandboxSpec) -> Result<Box<dyn Sandbox>, ProviderError> {
        self.made(spec, false).await??;
        Ok(self.handle(spec.name.clone()))
    }

    async fn create_started(&self, spec: &SandboxSpec) -> Result<Made, ProviderError> {
        let started = self.made(spec, true).await?;
        Ok(Made {
            sandbox: self.handle(spec.name.clone()),
            started,
        })
    }

    async fn open(&self, name: &SandboxName) -> Result<Box<dyn Sandbox>, ProviderError> {
        self.owned(name.as_str()).await?;
        Ok(self.handle(name.clone()))
    }

    async fn disk_free(&self) -> Result<Option<u64>, ProviderError> {
        let path = format!(
            "/1.0/storage-pools/{}/resources",
            self.inner.config.storage_pool
        );
        let r: PoolResources = self
            .inner
            .client
            .get(&path)
            .await
            .map_err(|e| self.err(e))?;
        Ok(Some(r.space.total.saturating_sub(r.space.used)))
    }

    async fn list_without_addresses(&self) -> Result<Vec<SandboxInfo>, ProviderError> {
        let all: Vec<Instance> = self
            .inner
            .client
            .get("/1.0/instances?recursion=1")
            .await
            .map_err(|e| self.err(e))?;
        all.iter()
            .filter_map(|inst| {
                let stamp = Stamp::read(&inst.name, &inst.config).ok()?;
                Some(self.info_of(inst, &stamp, Vec::new()))
            })
            .collect()
    }

    async fn list(&self) -> Result<Vec<SandboxInfo>, ProviderError> {
        let all: Vec<Instance> = self
            .inner
            .client
            .get("/1.0/instances?recursion=1")
            .await
            .map_err(|e| self.err(e))?;
        // Not ours: not listed, never touched.
        let ours: Vec<(Instance, Stamp)> = all
            .into_iter()
            .filter_map(|inst| {
                Stamp::read(&inst.name, &inst.config)
                    .ok()
                    .map(|s| (inst, s))
            })
            .collect();
        // The list record carries no runtime state: the running ones' state
        // is read for their addresses, a bounded number at a time (a large
        // fleet must not open a connection per sandbox at once).
        // (Made first: a closure in the stream would not be `Send` for
        // every lifetime, as the trait's boxed future needs.)
        let reads: Vec<_> = ours.iter().map(|(inst, _)| self.addresses(inst)).collect();
        let read: Vec<Result<Vec<std::net::IpAddr>, ProviderError>> = futures::stream::iter(reads)
            .buffered(STATE_READS)
            .collect()
            .await;
        // A sandbox stopping or deleted between the list and its state read
        // (Incus then answers e.g. "Invalid PID") is listed without
        // addresses: the listing of every other sandbox must not fail on it.
        let addresses = ours.iter().zip(read).map(|((inst, _), r)| {
            r.unwrap_or_else(|e| {
                tracing::debug!(sandbox = %inst.name, error = %e, "no addresses: its state could not be read");
                Vec::new()
            })
        });
        ours.iter()
            .zip(addresses)
            .map(|((inst, stamp), a)| self.info_of(inst, stamp, a))
            .collect()
    }

    async fn attachments(&self) -> Result<Option<Vec<Attachment>>, ProviderError> {
        let all: Vec<Instance> = self
            .inner
            .client
            .get("/1.0/instances?recursion=1")
            .await
            .map_err(|e| self.err(e))?;
        Ok(Some(
            all.iter()
                .map(|inst| {
                    let stamp = Stamp::read(&inst.name, &inst.config).ok();
                    Attachment {
                        name: inst.name.clone(),
                        state: inst.state(),
                        owned: stamp.is_some(),
                        profile: stamp.and_then(|s| s.profile),
                        bridges: api::nic_bridges(inst),
                    }
                })
                .collect(),
        ))
    }

    async fn import(
        &self,
        source: &Path,
        name: &SandboxName,
    ) -> Result<Box<dyn Sandbox>, ProviderError> {
        crate::backup::import(self, source, name).await?;
        Ok(self.handle(name.clone()))
    }
}

/// `GET /1.0/storage-pools/NAME/resources`: the pool's space, in bytes.
#[derive(Debug, serde::Deserialize)]
struct PoolResources {
    space: PoolSpace,
}

#[derive(Debug, serde::Deserialize)]
struct PoolSpace {
    #[serde(default)]
    used: u64,
    total: u64,
}

/// Runtime-state reads `list` has in flight at once.
const STATE_READS: usize = 8;

/// The first-run error: the image is not in corral's project. The remedy
/// copies it from the public remote under the same alias, which is what a
/// default like `debian/12` names; an operator with no route out can name
/// an image the project has instead.
fn missing_image(image: &str, project: &str) -> ProviderError {
    ProviderError::ImageMissing {
        image: image.to_owned(),
        place: format!("Incus project `{project}`"),
        remedy: format!(
            "copy it in with `incus image copy images:{image} local: --alias {image} --project {project}`, \
             or pass `--image` an alias that `incus image list --project {project}` shows"
        ),
    }
}
