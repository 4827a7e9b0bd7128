//! [`IncusSandbox`]: one corral-owned instance. Every operation re-reads the
//! instance and checks its stamp first; start also re-checks the topology.

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use corral_sandbox_core::sandbox::{
    BackendClient, BoundNic, ExecOutput, ExecRequest, ExecStreams, InstanceType, Operation,
    ProbeSite, ProviderError, Sandbox, SandboxInfo, SandboxState, SnapshotInfo, StopOptions,
    TerminalCommand,
};
use corral_sandbox_core::{SandboxKind, SandboxName};
use http::Method;
use serde_json::json;

use crate::api::{self, Instance, InstanceState, Snapshot};
use crate::config::Endpoint;
use crate::provider::IncusProvider;
use crate::stamp::Stamp;

/// Extra time given to Incus beyond a clean-shutdown timeout.
const STOP_MARGIN: Duration = Duration::from_secs(15);
/// Incus's own default clean-shutdown wait, when the caller gives none.
const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// A handle on one corral-owned Incus instance.
#[derive(Debug)]
pub struct IncusSandbox {
    pub(crate) provider: IncusProvider,
    pub(crate) name: SandboxName,
}

impl IncusSandbox {
    pub(crate) fn new(provider: IncusProvider, name: SandboxName) -> Self {
        Self { provider, name }
    }

    /// A handle on `name` without the ownership check `open` makes, so tests
    /// can prove every operation makes that check itself.
    #[doc(hidden)]
    pub fn for_tests(provider: &IncusProvider, name: &SandboxName) -> Box<Self> {
        Box::new(Self::new(provider.clone(), name.clone()))
    }

    pub(crate) fn path(&self, rest: &str) -> String {
        format!("/1.0/instances/{}{rest}", self.name)
    }

    pub(crate) async fn owned(&self) -> Result<(Instance, Stamp), ProviderError> {
        self.provider.owned(self.name.as_str()).await
    }

    fn invalid(&self, state: SandboxState, operation: Operation, hint: &str) -> ProviderError {
        ProviderError::InvalidState {
            name: self.name.to_string(),
            state,
            operation,
            hint: hint.to_owned(),
        }
    }

    /// Why a command cannot run in it, and what to do: a frozen sandbox
    /// is running but paused, so "start it first" would read as wrong.
    fn not_execable(&self, state: SandboxState) -> ProviderError {
        let hint = match state {
            SandboxState::Frozen => format!(
                "it is paused; `corral start {0}` thaws it (through the start gate), \
                 `corral stop {0}` stops it",
                self.name
            ),
            _ => format!("start it first (`corral start {}`)", self.name),
        };
        ProviderError::InvalidState {
            name: self.name.to_string(),
            state,
            operation: Operation::Exec,
            hint,
        }
    }

    fn check_snapshot_name(snapshot: &str) -> Result<(), ProviderError> {
        if snapshot.is_empty() || snapshot.contains('/') || snapshot.len() > 63 {
            return Err(ProviderError::InvalidSpec {
                field: "snapshot",
                reason: format!("{snapshot:?}; expected 1 to 63 characters without `/`"),
            });
        }
        Ok(())
    }

    async fn change_state(
        &self,
        body: serde_json::Value,
        wait: Duration,
    ) -> Result<(), ProviderError> {
        self.provider
            .client()
            .run(Method::PUT, &self.path("/state"), Some(&body), wait)
            .await
            .map(|_| ())
            .map_err(|e| self.provider.err(e))
    }

    fn op_timeout(&self) -> Duration {
        self.provider.config().operation_timeout
    }
}

#[async_trait]
impl Sandbox for IncusSandbox {
    fn name(&self) -> &SandboxName {
        &self.name
    }

    fn kind(&self) -> SandboxKind {
        self.provider.inner.kind
    }

    async fn info(&self) -> Result<SandboxInfo, ProviderError> {
        let (inst, stamp) = self.owned().await?;
        let addresses = self.provider.addresses(&inst).await?;
        self.provider.info_of(&inst, &stamp, addresses)
    }

    async fn nic(&self) -> Result<Option<BoundNic>, ProviderError> {
        let (inst, _) = self.owned().await?;
        Ok(inst.nic_device().and_then(api::bound_nic))
    }

    /// Incus lists every command running in an instance as a running
    /// "Executing command" operation on it (an `incus exec` as much as
    /// corral's), whoever started it.
    async fn exec_sessions(&self) -> Result<Option<u32>, ProviderError> {
        self.owned().await?;
        let ops: crate::api::Operations = self
            .provider
            .client()
            .get("/1.0/operations?recursion=1")
            .await
            .map_err(|e| self.provider.err(e))?;
        Ok(Some(ops.exec_sessions_on(self.name.as_str())))
    }

    /// A local container's network namespace is entered from the host
    /// through its init's pid; a VM, or any instance of a remote daemon,
    /// is probed through exec.
    async fn probe_site(&self) -> Result<ProbeSite, ProviderError> {
        let (inst, _) = self.owned().await?;
        let local = matches!(self.provider.config().endpoint, Endpoint::Unix(_));
        if !local || inst.instance_type() != InstanceType::Container {
            return Ok(ProbeSite::Guest);
        }
        if !inst.state().can_exec() {
            return Err(self.not_execable(inst.state()));
        }
        let state: InstanceState = self
            .provider
            .client()
            .get(&self.path("/state"))
            .await
            .map_err(|e| self.provider.err(e))?;
        match u32::try_from(state.pid) {
            Ok(pid) if pid > 1 => Ok(ProbeSite::HostNamespace { pid }),
            _ => Err(self.invalid(
                inst.state(),
                Operation::Exec,
                "Incus reports no init process for it; start it again",
            )),
        }
    }

    async fn start(&self) -> Result<(), ProviderError> {
        let (inst, stamp) = self.owned().await?;
        if !inst.state().can_start() {
            return Err(self.invalid(
                inst.state(),
                Operation::Start,
                "it is already running or busy",
            ));
        }
        self.provider.check_topology(&inst, &stamp)?;
        // Incus refuses to `start` a frozen instance ("already running"):
        // thawing is its start.
        let action = match inst.state() {
            SandboxState::Frozen => "unfreeze",
            _ => "start",
        };
        self.change_state(api::state_body(action, false, None), self.op_timeout())
            .await
    }

    async fn stop(&self, options: StopOptions) -> Result<(), ProviderError> {
        let (inst, _) = self.owned().await?;
        if !inst.state().can_stop() {
            return Err(self.invalid(inst.state(), Operation::Stop, "it is not running"));
        }
        // A frozen guest cannot act on the shutdown signal, so a clean stop
        // would wait out its deadline and fail: thaw it first.
        if inst.state() == SandboxState::Frozen && !options.force {
            self.change_state(api::state_body("unfreeze", false, None), self.op_timeout())
                .await?;
        }
        let clean = options.timeout.unwrap_or(DEFAULT_STOP_TIMEOUT);
        let body = api::state_body("stop", options.force, Some(clean.as_secs().max(1)));
        self.change_state(body, clean + STOP_MARGIN).await
    }

    async fn exec(&self, request: &ExecRequest) -> Result<ExecOutput, ProviderError> {
        let (inst, _) = self.owned().await?;
        if !inst.state().can_exec() {
            return Err(self.not_execable(inst.state()));
        }
        crate::exec::run(self, request).await
    }

    async fn exec_status(&self, request: &ExecRequest) -> Result<i32, ProviderError> {
        let (inst, _) = self.owned().await?;
        if !inst.state().can_exec() {
            return Err(self.not_execable(inst.state()));
        }
        crate::exec::status(self, request).await
    }

    async fn exec_streamed(
        &self,
        request: &ExecRequest,
        streams: ExecStreams,
    ) -> Result<i32, ProviderError> {
        let (inst, _) = self.owned().await?;
        if !inst.state().can_exec() {
            return Err(self.not_execable(inst.state()));
        }
        crate::exec_stream::run(self, request, streams).await
    }

    async fn terminal(&self, argv: &[String]) -> Result<TerminalCommand, ProviderError> {
        let (inst, _) = self.owned().await?;
        if !inst.state().can_exec() {
            return Err(self.not_execable(inst.state()));
        }
        crate::terminal::command(self, argv)
    }

    async fn client(&self) -> Result<BackendClient, ProviderError> {
        self.owned().await?;
        crate::terminal::hatch(self).await
    }

    async fn delete(self: Box<Self>) -> Result<(), ProviderError> {
        let (inst, stamp) = self.owned().await?;
        if inst.state() != SandboxState::Stopped {
            // A sandbox being deleted has no work worth a clean shutdown.
            self.change_state(api::state_body("stop", true, None), self.op_timeout())
                .await?;
        }
        self.provider
            .client()
            .run(Method::DELETE, &self.path(""), None, self.op_timeout())
            .await
            .map_err(|e| self.provider.err(e))?;
        self.provider.config().mounts.remove_staging(&stamp.id)
    }

    async fn snapshot(&self, snapshot: &str) -> Result<(), ProviderError> {
        Self::check_snapshot_name(snapshot)?;
        self.owned().await?;
        let body = json!({ "name": snapshot, "stateful": false });
        let client = self.provider.client();
        match client
            .run(
                Method::POST,
                &self.path("/snapshots"),
                Some(&body),
                self.op_timeout(),
            )
            .await
        {
            Ok(_) => Ok(()),
            // Incus words a taken snapshot name differently across versions;
            // ask rather than parse.
            Err(e) => match client
                .call(
                    Method::GET,
                    &self.path(&format!("/snapshots/{snapshot}")),
                    None,
                )
                .await
            {
                Ok(_) => Err(ProviderError::AlreadyExists {
                    what: "snapshot",
                    name: format!("{}/{snapshot}", self.name),
                }),
                Err(_) => Err(self.provider.err(e)),
            },
        }
    }

    async fn restore(&self, snapshot: &str) -> Result<(), ProviderError> {
        Self::check_snapshot_name(snapshot)?;
        let (inst, stamp) = self.owned().await?;
        if !inst.state().can_restore() {
            return Err(self.invalid(inst.state(), Operation::Restore, "stop it first"));
        }
        // A running instance restarts straight into the snapshot's config,
        // so that config must pass the topology check first.
        let snap: Instance = self
            .provider
            .client()
            .get(&self.path(&format!("/snapshots/{snapshot}")))
            .await
            .map_err(|e| {
                self.provider
                    .not_found_as(e, "snapshot", &format!("{}/{snapshot}", self.name))
            })?;
        let snap_stamp = Stamp::read(self.name.as_str(), &snap.config)?;
        let snap = Instance {
            name: inst.name.clone(),
            ..snap
        };
        self.provider.check_topology(&snap, &snap_stamp)?;
        if snap_stamp.id != stamp.id {
            return Err(ProviderError::NotOwned {
                name: format!("{}/{snapshot}", self.name),
                reason: "the snapshot carries another instance's stamp".into(),
            });
        }
        let body = json!({ "restore": snapshot });
        self.provider
            .client()
            .run(Method::PUT, &self.path(""), Some(&body), self.op_timeout())
            .await
            .map(|_| ())
            .map_err(|e| self.provider.err(e))
    }

    async fn snapshots(&self) -> Result<Vec<SnapshotInfo>, ProviderError> {
        self.owned().await?;
        let snaps: Vec<Snapshot> = self
            .provider
            .client()
            .get(&self.path("/snapshots?recursion=1"))
            .await
            .map_err(|e| self.provider.err(e))?;
        Ok(snaps
            .into_iter()
            .map(|s| SnapshotInfo {
                name: s.name.rsplit('/').next().unwrap_or(&s.name).to_owned(),
                created: (!s.created_at.is_empty()).then_some(s.created_at),
            })
            .collect())
    }

    async fn delete_snapshot(&self, snapshot: &str) -> Result<(), ProviderError> {
        Self::check_snapshot_name(snapshot)?;
        self.owned().await?;
        self.provider
            .client()
            .run(
                Method::DELETE,
                &self.path(&format!("/snapshots/{snapshot}")),
                None,
                self.op_timeout(),
            )
            .await
            .map(|_| ())
            .map_err(|e| {
                self.provider
                    .not_found_as(e, "snapshot", &format!("{}/{snapshot}", self.name))
            })
    }

    async fn clone_to(
        &self,
        target: &SandboxName,
        from_snapshot: Option<&str>,
    ) -> Result<Box<dyn Sandbox>, ProviderError> {
        if let Some(s) = from_snapshot {
            Self::check_snapshot_name(s)?;
        }
        crate::identity::clone(self, target, from_snapshot).await?;
        Ok(self.provider.handle(target.clone()))
    }

    async fn bind_nic(&self, nic: &BoundNic) -> Result<(), ProviderError> {
        crate::identity::bind_nic(self, nic).await
    }

    async fn rename(self: Box<Self>, to: &SandboxName) -> Result<Box<dyn Sandbox>, ProviderError> {
        let (inst, _) = self.owned().await?;
        if !inst.state().can_rename() {
            return Err(self.invalid(
                inst.state(),
                Operation::Rename,
                "Incus renames only stopped instances; stop it first",
            ));
        }
        self.provider.ensure_free(to.as_str()).await?;
        let body = json!({ "name": to.as_str() });
        self.provider
            .client()
            .run(Method::POST, &self.path(""), Some(&body), self.op_timeout())
            .await
            .map_err(|e| self.provider.err(e))?;
        Ok(self.provider.handle(to.clone()))
    }

    async fn export(&self, dest: &Path) -> Result<(), ProviderError> {
        crate::backup::export(self, dest).await
    }

    async fn push_file(&self, path: &str, contents: &[u8], mode: u32) -> Result<(), ProviderError> {
        self.owned().await?;
        crate::files::push(self, path, contents, mode).await
    }

    async fn pull_file(&self, path: &str) -> Result<Vec<u8>, ProviderError> {
        self.owned().await?;
        crate::files::pull(self, path).await
    }
}
