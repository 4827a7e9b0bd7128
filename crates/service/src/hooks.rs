//! Where later stages plug into the lifecycle without the front-ends
//! changing: a check that runs inside a started sandbox before it is handed
//! out (the per-sandbox canary), and a record of every event (a durable
//! store, an audit stream). The service's default is [`DefaultCanary`];
//! [`WithoutCanary`] is the named opt-out; [`NoHooks`] adds nothing (for
//! hooks that wrap others).

use std::fmt;

use async_trait::async_trait;
use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::sandbox::{Sandbox, SandboxInfo};
use corral_sandbox_core::verify::VerificationEvent;
use serde::{Deserialize, Serialize};

/// A hook refused a sandbox.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{check} refused sandbox `{sandbox}`: {reason}")]
pub struct HookError {
    /// Which check refused (e.g. `canary`).
    pub check: String,
    /// The sandbox.
    pub sandbox: String,
    /// Why, and what to do.
    pub reason: String,
}

/// Something that happened to a sandbox, after it happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// Created (not yet started).
    Created {
        /// The sandbox.
        name: String,
        /// Its backend.
        #[serde(default)]
        kind: Option<SandboxKind>,
        /// Its profile, if any.
        profile: Option<String>,
        /// The uid that asked for it, when the front-end knows.
        #[serde(default)]
        owner: Option<u32>,
        /// The image or template it was created from.
        #[serde(default)]
        template: Option<String>,
        /// What it is a copy of: `sandbox SRC`, `snapshot SRC/SNAP` (a
        /// clone) or `file PATH` (an import); `None` for a fresh sandbox.
        #[serde(default)]
        from: Option<String>,
        /// Its time to live, seconds (`corral new --ttl`, or the
        /// template's): deleted that long after this event.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl_secs: Option<u64>,
        /// Its idle limit, seconds (`--idle-stop`, or the template's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        idle_stop_secs: Option<u64>,
    },
    /// Corral is about to start it (recorded before the backend is asked,
    /// so a watcher of the backend's events tells corral's starts from
    /// anyone else's).
    Starting {
        /// The sandbox.
        name: String,
    },
    /// Started, ready and handed out.
    Started {
        /// The sandbox.
        name: String,
    },
    /// A start or create was refused by the start gate or a hook.
    Refused {
        /// The sandbox.
        name: String,
        /// Why.
        reason: String,
    },
    /// Stopped.
    Stopped {
        /// The sandbox.
        name: String,
    },
    /// Deleted.
    Deleted {
        /// The sandbox.
        name: String,
    },
    /// Its time to live (`corral new --ttl`) ran out: corral deletes it
    /// (a `deleted` event follows when it is gone).
    Expired {
        /// The sandbox.
        name: String,
        /// The lifetime it was given, seconds.
        ttl_secs: u64,
    },
    /// It sat idle (no exec session, no packet from it through its port)
    /// for its idle limit (`corral new --idle-stop`): corral stopped it.
    IdleStopped {
        /// The sandbox.
        name: String,
        /// The idle limit, seconds.
        idle_stop_secs: u64,
        /// How long corral saw it idle, seconds.
        idle_secs: u64,
    },
    /// A snapshot was taken.
    Snapshotted {
        /// The sandbox.
        name: String,
        /// The snapshot.
        snapshot: String,
    },
    /// The sandbox was put back to a snapshot.
    Restored {
        /// The sandbox.
        name: String,
        /// The snapshot.
        snapshot: String,
    },
    /// Renamed (the events before it carry the old name).
    Renamed {
        /// The new name.
        name: String,
        /// The old name.
        from: String,
    },
    /// Written to a backup file (which may hold credentials the agent left
    /// inside).
    Exported {
        /// The sandbox.
        name: String,
        /// The file.
        file: String,
        /// Its size in bytes.
        bytes: u64,
    },
    /// A file was copied into the sandbox.
    FilePushed {
        /// The sandbox.
        name: String,
        /// The path inside it.
        path: String,
        /// How many bytes.
        bytes: u64,
    },
    /// A file was copied out of the sandbox.
    FilePulled {
        /// The sandbox.
        name: String,
        /// The path inside it.
        path: String,
        /// How many bytes.
        bytes: u64,
    },
    /// An interactive shell (a command on a terminal) was opened in the
    /// sandbox.
    Shell {
        /// The sandbox.
        name: String,
    },
    /// The Incus client ran on the sandbox through `corral incus`.
    Hatch {
        /// The sandbox.
        name: String,
        /// The client's arguments.
        args: Vec<String>,
        /// The isolation-moving ones, let through by `--i-know`.
        #[serde(default)]
        moved: Vec<String>,
    },
    /// The canary ran and the gate judged it (per-check results and
    /// timings inside).
    Verification(Box<VerificationEvent>),
    /// Something an operator must look at: a sandbox failed verification
    /// or its filter died, and corral disposed of it or stopped it.
    Alert {
        /// The sandbox.
        name: String,
        /// What happened and what corral did.
        reason: String,
    },
    /// A cluster member was taken out of rotation: no new profiled
    /// placements there (docs/cluster.md).
    MemberDrained {
        /// The Incus member.
        member: String,
        /// Why (a failed attestation, none in time).
        reason: String,
    },
    /// A cluster member's attestation passed again: back in rotation.
    MemberRestored {
        /// The Incus member.
        member: String,
    },
    /// A profile's gateway (dnsmasq) exited without corral stopping it;
    /// the supervisor restarts it, and the profile's start gate refuses
    /// until it runs (docs/gateway.md).
    GatewayDied {
        /// The bridge it serves.
        bridge: String,
        /// The profile of that bridge, when the applied record names it.
        profile: Option<String>,
        /// The pid that exited (0: unknown, a pid file found stale).
        pid: u32,
        /// What was found.
        reason: String,
    },
    /// A gateway that died runs again, from its recorded configuration.
    GatewayRestarted {
        /// The bridge it serves.
        bridge: String,
        /// The profile of that bridge, when the applied record names it.
        profile: Option<String>,
        /// The new daemon's pid.
        pid: u32,
        /// Restart attempts it took (1: the first worked).
        attempts: u32,
        /// How long it was down, from its exit seen to the new daemon up.
        down_ms: u64,
    },
    /// A profiled sandbox was started by someone other than corral (an
    /// admin's plain `incus start`): it was put through the start gate,
    /// the topology check and the canary, and stopped when one failed.
    UnmanagedStart {
        /// The sandbox.
        name: String,
        /// True: every check passed and it keeps running.
        admitted: bool,
        /// What was checked and found, and what corral did.
        reason: String,
    },
    /// The kernel watch found corral's enforcement changed behind its
    /// back, and reacted (an alert; docs/security.md#watched).
    HostDrift {
        /// The profiles in scope of the drift.
        profiles: Vec<String>,
        /// What differed from what was applied (the first few).
        drift: Vec<String>,
        /// `healed`, `cut`, or `heal failed, cut`.
        reaction: String,
        /// From the read-back that found it to the end of the reaction, ms.
        ms: u64,
    },
}

impl Event {
    /// The sandbox the event is about (`None`: a cluster member's).
    pub fn sandbox(&self) -> Option<&str> {
        Some(match self {
            Event::Created { name, .. }
            | Event::Started { name }
            | Event::Starting { name }
            | Event::Refused { name, .. }
            | Event::Stopped { name }
            | Event::Deleted { name }
            | Event::Expired { name, .. }
            | Event::IdleStopped { name, .. }
            | Event::Snapshotted { name, .. }
            | Event::Restored { name, .. }
            | Event::Renamed { name, .. }
            | Event::Exported { name, .. }
            | Event::FilePushed { name, .. }
            | Event::FilePulled { name, .. }
            | Event::Shell { name }
            | Event::Hatch { name, .. }
            | Event::Alert { name, .. }
            | Event::UnmanagedStart { name, .. } => name,
            Event::Verification(v) => v.sandbox.as_str(),
            Event::MemberDrained { .. }
            | Event::MemberRestored { .. }
            | Event::GatewayDied { .. }
            | Event::GatewayRestarted { .. }
            | Event::HostDrift { .. } => return None,
        })
    }

    /// The cluster member the event is about, for a member's event.
    pub fn member(&self) -> Option<&str> {
        match self {
            Event::MemberDrained { member, .. } | Event::MemberRestored { member } => Some(member),
            _ => None,
        }
    }

    /// The event's type, as its JSON `event` field names it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Event::Created { .. } => "created",
            Event::Starting { .. } => "starting",
            Event::Started { .. } => "started",
            Event::Refused { .. } => "refused",
            Event::Stopped { .. } => "stopped",
            Event::Deleted { .. } => "deleted",
            Event::Expired { .. } => "expired",
            Event::IdleStopped { .. } => "idle_stopped",
            Event::Snapshotted { .. } => "snapshotted",
            Event::Restored { .. } => "restored",
            Event::Renamed { .. } => "renamed",
            Event::Exported { .. } => "exported",
            Event::FilePushed { .. } => "file_pushed",
            Event::FilePulled { .. } => "file_pulled",
            Event::Shell { .. } => "shell",
            Event::Hatch { .. } => "hatch",
            Event::Verification(_) => "verification",
            Event::Alert { .. } => "alert",
            Event::MemberDrained { .. } => "member_drained",
            Event::MemberRestored { .. } => "member_restored",
            Event::GatewayDied { .. } => "gateway_died",
            Event::GatewayRestarted { .. } => "gateway_restarted",
            Event::UnmanagedStart { .. } => "unmanaged_start",
            Event::HostDrift { .. } => "host_drift",
        }
    }

    /// True for events an operator must be told about at once.
    pub fn is_alert(&self) -> bool {
        matches!(
            self,
            Event::Alert { .. }
                | Event::MemberDrained { .. }
                | Event::GatewayDied { .. }
                | Event::HostDrift { .. }
                | Event::UnmanagedStart {
                    admitted: false,
                    ..
                }
        )
    }
}

/// Stages later components add to the lifecycle.
#[async_trait]
pub trait Hooks: Send + Sync + fmt::Debug {
    /// Runs after a sandbox is started (and, for a create, ready), before
    /// the caller gets it. An error refuses it: the service stops it (and
    /// deletes it, when it was just created).
    async fn before_handout(
        &self,
        _sandbox: &dyn Sandbox,
        _info: &SandboxInfo,
    ) -> Result<(), HookError> {
        Ok(())
    }

    /// Called after every event; must not fail the operation.
    async fn record(&self, _event: &Event) {}
}

/// No extra stages.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;

impl Hooks for NoHooks {}

/// The canary before every profiled hand-out, with the store under the
/// settings' state directory opened on first use (so building a service
/// never fails for it). A store that cannot be opened refuses the
/// hand-out: an embedder that forgot nothing gets verified sandboxes or
/// none.
#[derive(Debug)]
pub struct DefaultCanary {
    settings: std::sync::Arc<crate::Settings>,
    backend: std::sync::Arc<crate::provider::Backend>,
    verifier: tokio::sync::OnceCell<crate::verify::Verifier>,
}

impl DefaultCanary {
    /// The canary under `settings`, looking up siblings on `backend`.
    pub fn new(
        settings: std::sync::Arc<crate::Settings>,
        backend: std::sync::Arc<crate::provider::Backend>,
    ) -> Self {
        Self {
            settings,
            backend,
            verifier: tokio::sync::OnceCell::new(),
        }
    }

    async fn verifier(&self) -> Result<&crate::verify::Verifier, String> {
        self.verifier
            .get_or_try_init(|| async {
                let dir = self.settings.state_dir.clone();
                let store = tokio::task::spawn_blocking(move || crate::store::Store::open(&dir))
                    .await
                    .map_err(|e| format!("the store worker failed: {e}"))?
                    .map_err(|e| {
                        format!(
                            "{}; the canary records its judgement there (or build the service with without_canary(REASON))",
                            crate::error::chain(&e)
                        )
                    })?;
                Ok(crate::verify::Verifier::new(
                    std::sync::Arc::clone(&self.settings),
                    std::sync::Arc::new(store),
                    std::sync::Arc::new(crate::WallClock),
                )
                .with_backend(std::sync::Arc::clone(&self.backend)))
            })
            .await
    }
}

#[async_trait]
impl Hooks for DefaultCanary {
    async fn before_handout(
        &self,
        sandbox: &dyn Sandbox,
        info: &SandboxInfo,
    ) -> Result<(), HookError> {
        if info.profile.is_none() {
            return Ok(());
        }
        match self.verifier().await {
            Ok(v) => v.before_handout(sandbox, info).await,
            Err(reason) => Err(HookError {
                check: crate::verify::CHECK.to_owned(),
                sandbox: info.name.to_string(),
                reason: format!("the canary cannot run: {reason}"),
            }),
        }
    }

    async fn record(&self, event: &Event) {
        // Events before the first profiled hand-out open the store too:
        // the record is the canary's history.
        if let Ok(v) = self.verifier().await {
            v.record(event).await;
        }
    }
}

/// The named opt-out: no canary, for a reason the caller gave.
#[derive(Debug, Clone)]
pub struct WithoutCanary {
    /// Why this service hands sandboxes out unverified.
    pub reason: String,
}

#[async_trait]
impl Hooks for WithoutCanary {
    async fn before_handout(
        &self,
        _sandbox: &dyn Sandbox,
        info: &SandboxInfo,
    ) -> Result<(), HookError> {
        if info.profile.is_some() {
            tracing::info!(sandbox = %info.name, reason = %self.reason, "handed out without the canary");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use corral_sandbox_core::sandbox::{
        ExecOutput, ExecRequest, InstanceType, ProviderError, SandboxState, StopOptions,
    };
    use corral_sandbox_core::{Config, SandboxName};

    use super::*;
    use crate::config::{LoadedConfig, Origin};
    use crate::{Backend, Settings};

    /// A stopped sandbox: the canary refuses to probe it, which is how
    /// these tests see that it ran (no packet, no provider).
    #[derive(Debug)]
    struct Stopped(SandboxInfo);

    #[async_trait]
    impl Sandbox for Stopped {
        fn name(&self) -> &SandboxName {
            &self.0.name
        }
        fn kind(&self) -> SandboxKind {
            self.0.kind
        }
        async fn info(&self) -> Result<SandboxInfo, ProviderError> {
            Ok(self.0.clone())
        }
        async fn start(&self) -> Result<(), ProviderError> {
            Ok(())
        }
        async fn stop(&self, _: StopOptions) -> Result<(), ProviderError> {
            Ok(())
        }
        async fn exec(&self, _: &ExecRequest) -> Result<ExecOutput, ProviderError> {
            unreachable!("the canary never execs in a stopped sandbox")
        }
        async fn delete(self: Box<Self>) -> Result<(), ProviderError> {
            Ok(())
        }
    }

    fn stopped(profile: Option<&str>) -> Stopped {
        Stopped(SandboxInfo {
            name: SandboxName::new("hook-test").unwrap(),
            kind: SandboxKind::Incus,
            state: SandboxState::Stopped,
            instance_type: InstanceType::Container,
            profile: profile.map(|p| p.parse().unwrap()),
            image: None,
            created: None,
            addresses: Vec::new(),
            nic: None,
            location: None,
        })
    }

    fn service(state_dir: &Path) -> crate::SandboxService {
        let loaded = LoadedConfig {
            config: Config::builtin_default(),
            origin: Origin::Builtin,
        };
        let settings = Arc::new(Settings::new(loaded, None, Some(state_dir)));
        // Never connected: selecting a backend opens nothing.
        let backend = Backend::select(
            "linux",
            SandboxKind::Incus,
            &settings.config.host,
            state_dir.join("no-incus.socket"),
        )
        .unwrap();
        crate::SandboxService::new(settings, Arc::new(backend))
    }

    #[tokio::test]
    async fn the_canary_is_the_default_and_the_opt_out_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        let sandbox = stopped(Some("isolated"));
        let info = sandbox.0.clone();
        // The default runs the canary: it reads the sandbox, refuses to
        // hand out one it cannot probe, and records that in the store.
        let default = service(&state);
        let refused = default
            .hooks()
            .before_handout(&sandbox, &info)
            .await
            .unwrap_err();
        assert_eq!(refused.check, crate::verify::CHECK);
        assert!(refused.reason.contains("is stopped"), "{}", refused.reason);
        assert!(state.join("corral.db").exists(), "the judgement's store");
        // An unprofiled sandbox has nothing to verify.
        let plain = stopped(None);
        default
            .hooks()
            .before_handout(&plain, &plain.0)
            .await
            .unwrap();
        // The control: the same sandbox through the named opt-out is handed out.
        let off = service(&state).without_canary("a test of the opt-out");
        off.hooks().before_handout(&sandbox, &info).await.unwrap();
    }

    #[tokio::test]
    async fn a_store_that_cannot_open_refuses_the_handout() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the state directory should be.
        let state = dir.path().join("state");
        std::fs::write(&state, "not a directory").unwrap();
        let sandbox = stopped(Some("isolated"));
        let refused = service(&state)
            .hooks()
            .before_handout(&sandbox, &sandbox.0)
            .await
            .unwrap_err();
        assert!(
            refused.reason.contains("the canary cannot run")
                && refused.reason.contains("without_canary"),
            "{}",
            refused.reason
        );
    }
}
