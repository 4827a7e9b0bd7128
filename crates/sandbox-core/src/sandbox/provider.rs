use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{
    BackendClient, BoundNic, ExecOutput, ExecRequest, ExecStreams, ProbeSite, ProviderError,
    SandboxInfo, SandboxSpec, SnapshotInfo, TerminalCommand,
};
use crate::names::SandboxName;
use crate::platform::SandboxKind;
use crate::verify::FilterHealth;

/// Every operation a sandbox may support; used for capability queries and
/// in `Unsupported` errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    /// Create a sandbox from a spec.
    Create,
    /// Start a stopped sandbox.
    Start,
    /// Stop a running sandbox.
    Stop,
    /// Stop then start.
    Restart,
    /// Run a command inside.
    Exec,
    /// Take a snapshot.
    Snapshot,
    /// Restore a snapshot.
    Restore,
    /// List or delete snapshots.
    ManageSnapshots,
    /// Copy a sandbox (or one of its snapshots) to a new one with a fresh identity.
    Clone,
    /// Rename.
    Rename,
    /// Delete.
    Delete,
    /// Write a backup file.
    Export,
    /// Create from a backup file.
    Import,
    /// Copy a file in.
    FilePush,
    /// Copy a file out.
    FilePull,
}

impl Operation {
    /// Every operation, in declaration order.
    pub const ALL: [Operation; 15] = [
        Operation::Create,
        Operation::Start,
        Operation::Stop,
        Operation::Restart,
        Operation::Exec,
        Operation::Snapshot,
        Operation::Restore,
        Operation::ManageSnapshots,
        Operation::Clone,
        Operation::Rename,
        Operation::Delete,
        Operation::Export,
        Operation::Import,
        Operation::FilePush,
        Operation::FilePull,
    ];
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operation::Create => "create",
            Operation::Start => "start",
            Operation::Stop => "stop",
            Operation::Restart => "restart",
            Operation::Exec => "exec",
            Operation::Snapshot => "snapshot",
            Operation::Restore => "restore",
            Operation::ManageSnapshots => "snapshot management",
            Operation::Clone => "clone",
            Operation::Rename => "rename",
            Operation::Delete => "delete",
            Operation::Export => "export",
            Operation::Import => "import",
            Operation::FilePush => "file push",
            Operation::FilePull => "file pull",
        })
    }
}

/// The operations a provider supports.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Capabilities(pub BTreeSet<Operation>);

impl Capabilities {
    /// Capabilities from a list of operations.
    pub fn of(ops: &[Operation]) -> Self {
        Self(ops.iter().copied().collect())
    }

    /// True when `op` is supported.
    pub fn supports(&self, op: Operation) -> bool {
        self.0.contains(&op)
    }
}

/// How to stop a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StopOptions {
    /// Kill instead of a clean shutdown.
    pub force: bool,
    /// Wait at most this long for a clean shutdown.
    pub timeout: Option<Duration>,
}

/// A sandbox [`SandboxProvider::create_started`] made, and how its start
/// went.
#[derive(Debug)]
pub struct Made {
    /// The sandbox (it exists on the backend).
    pub sandbox: Box<dyn Sandbox>,
    /// Its start: `Err` leaves it made but not running.
    pub started: Result<(), ProviderError>,
}

/// A backend that makes sandboxes. Object-safe: corral holds providers as
/// `Box<dyn SandboxProvider>` and picks one at start-up from the platform
/// matrix.
///
/// Every method that names an existing sandbox checks corral's ownership
/// stamp first and refuses with [`ProviderError::NotOwned`] otherwise.
#[async_trait]
pub trait SandboxProvider: Send + Sync + fmt::Debug {
    /// Which backend this is.
    fn kind(&self) -> SandboxKind;

    /// The operations this provider supports.
    fn capabilities(&self) -> Capabilities;

    /// Create (but do not start) a sandbox.
    async fn create(&self, spec: &SandboxSpec) -> Result<Box<dyn Sandbox>, ProviderError>;

    /// Create a sandbox and start it, as one step where the backend has
    /// one (Incus: one create request that also starts the instance; no
    /// window between the two). `Err`: nothing was made. A sandbox made
    /// whose start failed comes back with that failure in
    /// [`Made::started`], for the caller to dispose of.
    async fn create_started(&self, spec: &SandboxSpec) -> Result<Made, ProviderError> {
        let sandbox = self.create(spec).await?;
        let started = sandbox.start().await;
        Ok(Made { sandbox, started })
    }

    /// A handle on an existing sandbox corral owns.
    async fn open(&self, name: &SandboxName) -> Result<Box<dyn Sandbox>, ProviderError>;

    /// Every sandbox corral owns on this backend.
    async fn list(&self) -> Result<Vec<SandboxInfo>, ProviderError>;

    /// [`list`](Self::list), where a backend may leave `addresses` empty
    /// to save a state read per running sandbox (Incus), for a caller
    /// that needs the addresses of one or two at most.
    async fn list_without_addresses(&self) -> Result<Vec<SandboxInfo>, ProviderError> {
        self.list().await
    }

    /// Bytes free where a new sandbox's root disk would go (Incus: its
    /// storage pool), so a disk larger than that is refused before
    /// anything is made; `None` from a backend that cannot tell.
    async fn disk_free(&self) -> Result<Option<u64>, ProviderError> {
        Ok(None)
    }

    /// Every instance of the backend's scope (corral's or not) with the
    /// host bridges its network interfaces are on, for teardown safety and
    /// `host status`; `None` from a backend that cannot tell (its
    /// instances are not on this host's bridges).
    async fn attachments(&self) -> Result<Option<Vec<super::Attachment>>, ProviderError> {
        Ok(None)
    }

    /// Create sandbox `name` from a backup file written by [`Sandbox::export`].
    async fn import(
        &self,
        _source: &Path,
        _name: &SandboxName,
    ) -> Result<Box<dyn Sandbox>, ProviderError> {
        Err(ProviderError::Unsupported {
            kind: self.kind(),
            operation: Operation::Import,
        })
    }
}

/// One sandbox. Operations a backend cannot do return
/// [`ProviderError::Unsupported`] (the defaults below), never panic.
#[async_trait]
pub trait Sandbox: Send + Sync + fmt::Debug {
    /// Its name.
    fn name(&self) -> &SandboxName;

    /// Its backend.
    fn kind(&self) -> SandboxKind;

    /// Fresh information from the backend.
    async fn info(&self) -> Result<SandboxInfo, ProviderError>;

    /// The port binding its NIC carries (`info().nic`), fresh from the
    /// backend, which may read it for less than the whole information
    /// (Incus: no runtime state for the addresses).
    async fn nic(&self) -> Result<Option<BoundNic>, ProviderError> {
        Ok(self.info().await?.nic)
    }

    /// Start it (after the provider re-checks its topology).
    async fn start(&self) -> Result<(), ProviderError>;

    /// Stop it.
    async fn stop(&self, options: StopOptions) -> Result<(), ProviderError>;

    /// Run a command inside it.
    async fn exec(&self, request: &ExecRequest) -> Result<ExecOutput, ProviderError>;

    /// Run a command inside it for its exit status alone (a readiness
    /// probe): its output is discarded, which a backend may do without
    /// fetching it (Incus: no recorded logs to read and delete).
    async fn exec_status(&self, request: &ExecRequest) -> Result<i32, ProviderError> {
        Ok(self.exec(request).await?.exit_code)
    }

    /// Delete it, with its snapshots.
    async fn delete(self: Box<Self>) -> Result<(), ProviderError>;

    /// Run a command with its standard streams connected to `streams` and
    /// return its exit status (128 + signal when killed). `request.stdin`
    /// is ignored: input comes from `streams.stdin`. Backends that can
    /// stream do so as the command runs; this default reads the whole input
    /// first, runs [`Sandbox::exec`], then delivers the output.
    async fn exec_streamed(
        &self,
        request: &ExecRequest,
        mut streams: ExecStreams,
    ) -> Result<i32, ProviderError> {
        if request.tty.is_some() {
            return Err(ProviderError::InvalidSpec {
                field: "tty",
                reason: format!(
                    "{} sandboxes cannot give a command a terminal here; leave it out",
                    self.kind()
                ),
            });
        }
        let io_err = |what: &str, source: std::io::Error| ProviderError::Io {
            context: format!("exec in {}: {what}", self.name()),
            source,
        };
        let stdin = match streams.stdin.as_mut() {
            Some(source) => Some(
                super::read_all(source.as_mut())
                    .await
                    .map_err(|e| io_err("reading standard input", e))?,
            ),
            None => None,
        };
        let request = ExecRequest {
            stdin,
            ..request.clone()
        };
        let out = self.exec(&request).await?;
        streams
            .stdout
            .write(&out.stdout)
            .await
            .map_err(|e| io_err("writing standard output", e))?;
        streams
            .stderr
            .write(&out.stderr)
            .await
            .map_err(|e| io_err("writing standard error", e))?;
        Ok(out.exit_code)
    }

    /// The host command that runs `argv` inside this (running) sandbox with
    /// an interactive terminal, through the backend's own client; the
    /// caller has checked ownership and hands its terminal over to it.
    async fn terminal(&self, _argv: &[String]) -> Result<TerminalCommand, ProviderError> {
        Err(self.unsupported(Operation::Exec))
    }

    /// The backend's own client pointed at this sandbox's daemon and
    /// scope, with the other instances of that scope; the caller has
    /// checked ownership and judges the arguments it appends.
    async fn client(&self) -> Result<BackendClient, ProviderError> {
        Err(self.unsupported(Operation::Exec))
    }

    /// Where the per-sandbox canary can probe from. The default, the
    /// guest through exec, works for every backend that can exec.
    async fn probe_site(&self) -> Result<ProbeSite, ProviderError> {
        Ok(ProbeSite::Guest)
    }

    /// The health of a filter that holds this sandbox's egress outside
    /// corral's host rules (Tart's Softnet); `None` when no such filter
    /// exists (corral's own rules enforce, checked by the start gate).
    async fn filter_health(&self) -> Result<Option<FilterHealth>, ProviderError> {
        Ok(None)
    }

    /// How many commands run inside it right now (exec sessions, corral's
    /// or anyone's), when the backend can tell; `None` when it cannot (an
    /// idle stop then never judges it idle).
    async fn exec_sessions(&self) -> Result<Option<u32>, ProviderError> {
        Ok(None)
    }

    /// Stop then start.
    async fn restart(&self, options: StopOptions) -> Result<(), ProviderError> {
        self.stop(options).await?;
        self.start().await
    }

    /// Take a snapshot named `snapshot`.
    async fn snapshot(&self, _snapshot: &str) -> Result<(), ProviderError> {
        Err(self.unsupported(Operation::Snapshot))
    }

    /// Restore the snapshot named `snapshot`.
    async fn restore(&self, _snapshot: &str) -> Result<(), ProviderError> {
        Err(self.unsupported(Operation::Restore))
    }

    /// List snapshots.
    async fn snapshots(&self) -> Result<Vec<SnapshotInfo>, ProviderError> {
        Err(self.unsupported(Operation::ManageSnapshots))
    }

    /// Delete the snapshot named `snapshot`.
    async fn delete_snapshot(&self, _snapshot: &str) -> Result<(), ProviderError> {
        Err(self.unsupported(Operation::ManageSnapshots))
    }

    /// Copy this sandbox (or its snapshot) to `target` with a fresh identity.
    async fn clone_to(
        &self,
        _target: &SandboxName,
        _from_snapshot: Option<&str>,
    ) -> Result<Box<dyn Sandbox>, ProviderError> {
        Err(self.unsupported(Operation::Clone))
    }

    /// Give the (stopped) sandbox's NIC the MAC and host-side name corral
    /// bound (`nic`): for a copy, which never carries its source's binding
    /// (a clone, an import). Only backends whose NICs land on this host's
    /// bridges are asked.
    async fn bind_nic(&self, _nic: &BoundNic) -> Result<(), ProviderError> {
        Err(self.unsupported(Operation::Clone))
    }

    /// Rename it (backends refuse while it runs).
    async fn rename(self: Box<Self>, _to: &SandboxName) -> Result<Box<dyn Sandbox>, ProviderError> {
        Err(ProviderError::Unsupported {
            kind: self.kind(),
            operation: Operation::Rename,
        })
    }

    /// Write a backup file to `dest`.
    async fn export(&self, _dest: &Path) -> Result<(), ProviderError> {
        Err(self.unsupported(Operation::Export))
    }

    /// Copy `contents` to `path` inside the sandbox with `mode`.
    async fn push_file(
        &self,
        _path: &str,
        _contents: &[u8],
        _mode: u32,
    ) -> Result<(), ProviderError> {
        Err(self.unsupported(Operation::FilePush))
    }

    /// Read the file at `path` inside the sandbox.
    async fn pull_file(&self, _path: &str) -> Result<Vec<u8>, ProviderError> {
        Err(self.unsupported(Operation::FilePull))
    }

    /// The `Unsupported` error for `operation` on this sandbox's backend.
    fn unsupported(&self, operation: Operation) -> ProviderError {
        ProviderError::Unsupported {
            kind: self.kind(),
            operation,
        }
    }
}
