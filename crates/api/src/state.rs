//! What every handler shares: the configuration loaded at start-up, the
//! target namespace, where state is recorded, the sandbox provider and the
//! verification gate.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use corral_egress::host::{Host, StateStore, plan_settings};
use corral_egress::netns::Netns;
use corral_egress::plan::HostPlan;
use corral_egress::resolve::{SystemResolver, resolve_profiles};
use corral_sandbox_core::config::Config;
use corral_sandbox_core::verify::Gate;

use crate::backend::Backend;
use crate::gate_store::GateStore;

/// corrald's settings, fixed at start-up.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The configuration.
    pub config: Config,
    /// Where it came from (file path or `built-in defaults`).
    pub source: String,
    /// Act inside this network namespace (name or path) instead of the host's.
    pub netns: Option<String>,
    /// Where applied inputs are recorded (default: the config's `state_dir`).
    pub state_dir: Option<PathBuf>,
}

impl Settings {
    /// Where state is recorded: `--state-dir`, else the config's `state_dir`.
    pub fn state_dir(&self) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(|| self.config.host.state_dir.clone())
    }
}

/// Shared, read-only state of the server.
#[derive(Debug, Clone)]
pub struct AppState {
    settings: Arc<Settings>,
    backend: Arc<Backend>,
    gate: Arc<Gate>,
}

/// A plan and where it came from.
#[derive(Debug)]
pub struct Planned {
    /// The plan.
    pub plan: HostPlan,
    /// `configuration` or `applied`.
    pub basis: &'static str,
}

impl AppState {
    /// The state of a server with `settings`, driving sandboxes through
    /// `backend`, with the verification `gate` loaded at start-up.
    pub fn new(settings: Settings, backend: Backend, gate: Gate) -> Self {
        Self {
            settings: Arc::new(settings),
            backend: Arc::new(backend),
            gate: Arc::new(gate),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The sandbox provider.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The verification gate as loaded at start-up.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The egress facade for the target namespace.
    pub fn host(&self) -> anyhow::Result<Host> {
        match &self.settings.netns {
            None => Host::current().context("cannot open this host's network namespace"),
            Some(name) => {
                Ok(Host::in_netns(Netns::open(name).with_context(|| {
                    format!("cannot open network namespace {name}")
                })?))
            }
        }
    }

    /// The store of applied inputs.
    pub fn store(&self) -> StateStore {
        StateStore::new(self.settings.state_dir())
    }

    /// The store of the verification gate.
    pub fn gate_store(&self) -> GateStore {
        GateStore::new(self.settings.state_dir())
    }

    /// The plan of the configuration, with names resolved now.
    pub fn configured_plan(&self) -> anyhow::Result<Planned> {
        let config = &self.settings.config;
        let resolution = resolve_profiles(&config.profiles, &SystemResolver)
            .context("resolving allowlisted host names")?;
        let plan = HostPlan::build(&config.profiles, &plan_settings(&config.host), &resolution)
            .context("the configuration cannot be planned")?;
        Ok(Planned {
            plan,
            basis: "configuration",
        })
    }

    /// The plan to check the live state against: what was applied when a
    /// record exists (names are not re-resolved), else the configuration's.
    pub fn plan_to_check(&self) -> anyhow::Result<Planned> {
        match self
            .store()
            .load_plan()
            .context("reading what was applied")?
        {
            Some((_, plan)) => Ok(Planned {
                plan,
                basis: "applied",
            }),
            None => self.configured_plan(),
        }
    }
}
