//! What every handler shares: the service's settings (configuration,
//! target namespace, state directory — by the same rules as the CLI), the
//! sandbox lifecycle, and the verification gate.

use std::sync::Arc;

use anyhow::Context as _;
use corral_egress::host::StateStore;
use corral_sandbox_core::verify::Gate;
use corral_service::host::{self, Planned};
use corral_service::{Backend, HostService, SandboxService, Settings, Target};

use crate::gate_store::GateStore;

/// Shared, read-only state of the server.
#[derive(Debug, Clone)]
pub struct AppState {
    settings: Arc<Settings>,
    sandboxes: SandboxService,
    gate: Arc<Gate>,
}

impl AppState {
    /// The state of a server with `settings`, driving sandboxes through
    /// `backend`, with the verification `gate` loaded at start-up.
    pub fn new(settings: Settings, backend: Backend, gate: Gate) -> Self {
        let settings = Arc::new(settings);
        Self {
            sandboxes: SandboxService::new(Arc::clone(&settings), Arc::new(backend)),
            settings,
            gate: Arc::new(gate),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The sandbox lifecycle (start gate included).
    pub fn sandboxes(&self) -> &SandboxService {
        &self.sandboxes
    }

    /// The sandbox provider.
    pub fn backend(&self) -> &Backend {
        self.sandboxes.backend()
    }

    /// The verification gate as loaded at start-up.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The host commands for the target namespace.
    pub fn host(&self) -> anyhow::Result<HostService> {
        let target = Target::open(self.settings.netns.as_deref())
            .context("cannot open the target network namespace")?;
        Ok(HostService::new(target, self.settings.state_dir.clone()))
    }

    /// The store of applied inputs.
    pub fn store(&self) -> StateStore {
        StateStore::new(&self.settings.state_dir)
    }

    /// The store of the verification gate.
    pub fn gate_store(&self) -> GateStore {
        GateStore::new(&self.settings.state_dir)
    }

    /// The plan of the configuration, with names resolved now.
    pub fn configured_plan(&self) -> anyhow::Result<Planned> {
        Ok(host::plan_config(self.loaded())?)
    }

    /// The plan to check the live state against: what was applied when a
    /// record exists (names are not re-resolved), else the configuration's.
    pub fn plan_to_check(&self) -> anyhow::Result<Planned> {
        Ok(host::plan_to_check(self.loaded(), false, &self.store())?)
    }

    fn loaded(&self) -> corral_service::LoadedConfig {
        corral_service::LoadedConfig {
            config: self.settings.config.clone(),
            origin: self.settings.origin.clone(),
        }
    }
}
