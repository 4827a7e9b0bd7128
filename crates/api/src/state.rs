//! What every handler shares: the configuration loaded at start-up, the
//! target namespace and where applied inputs are recorded.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use corral_egress::host::{Host, StateStore, plan_settings};
use corral_egress::netns::Netns;
use corral_egress::plan::HostPlan;
use corral_egress::resolve::{SystemResolver, resolve_profiles};
use corral_sandbox_core::config::Config;

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

/// Shared, read-only state of the server.
#[derive(Debug, Clone)]
pub struct AppState(pub Arc<Settings>);

/// A plan and where it came from.
#[derive(Debug)]
pub struct Planned {
    /// The plan.
    pub plan: HostPlan,
    /// `configuration` or `applied`.
    pub basis: &'static str,
}

impl AppState {
    /// Wrap settings.
    pub fn new(settings: Settings) -> Self {
        Self(Arc::new(settings))
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.0
    }

    /// The egress facade for the target namespace.
    pub fn host(&self) -> anyhow::Result<Host> {
        match &self.0.netns {
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
        StateStore::new(
            self.0
                .state_dir
                .clone()
                .unwrap_or_else(|| self.0.config.host.state_dir.clone()),
        )
    }

    /// The plan of the configuration, with names resolved now.
    pub fn configured_plan(&self) -> anyhow::Result<Planned> {
        let config = &self.0.config;
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
