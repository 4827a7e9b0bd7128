//! What every handler shares: the service's settings (configuration,
//! target namespace, state directory — by the same rules as the CLI), the
//! sandbox lifecycle with the per-sandbox canary as its hand-out hook, and
//! the durable store (events, the verification gate) that `corral` opens
//! too.

use std::sync::Arc;

use anyhow::Context as _;
use corral_egress::host::StateStore;
use corral_service::host::{self, Planned};
use corral_service::verify::watchdog::Watchdog;
use corral_service::{
    Backend, HostService, SandboxService, Settings, Store, Target, Verifier, WallClock,
};

/// Shared state of the server.
#[derive(Debug, Clone)]
pub struct AppState {
    settings: Arc<Settings>,
    sandboxes: SandboxService,
    verifier: Verifier,
}

impl AppState {
    /// The state of a server with `settings`, driving sandboxes through
    /// `backend`, recording into `store`.
    pub fn new(settings: Settings, backend: Backend, store: Store) -> Self {
        let settings = Arc::new(settings);
        let backend = Arc::new(backend);
        let verifier = Verifier::new(Arc::clone(&settings), Arc::new(store), Arc::new(WallClock))
            .with_backend(Arc::clone(&backend));
        Self {
            sandboxes: SandboxService::new(Arc::clone(&settings), backend)
                .with_hooks(Arc::new(verifier.clone())),
            settings,
            verifier,
        }
    }

    /// The watchdog that re-verifies this server's sandboxes every
    /// `interval`.
    pub fn watchdog(&self, interval: std::time::Duration) -> Watchdog {
        Watchdog::new(self.verifier.clone(), self.sandboxes.clone(), interval)
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

    /// The canary, the gate and the store.
    pub fn verifier(&self) -> &Verifier {
        &self.verifier
    }

    /// The durable store.
    pub fn db(&self) -> &Store {
        self.verifier.store()
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
