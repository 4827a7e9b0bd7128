//! The applied inputs, persisted so `status`, `verify` and `refresh` can
//! recompute the plan later.
//!
//! What is stored is the configuration (as `corral.toml` text, which parses
//! back to an equal `Config`) and the resolution results — never rendered
//! rules — so a newer corral recomputes the plan from the same inputs.

use std::path::{Path, PathBuf};

use corral_sandbox_core::config::{Config, ConfigErrors, HostConfig};
use corral_state_files::{HOST_LOCK, StateDir, StateFileError, StateLock};
use serde::{Deserialize, Serialize};

use crate::plan::{HostPlan, PlanError, PlanSettings, PortBinding};
use crate::resolve::Resolution;

/// File name of the applied inputs inside the state dir.
const FILE: &str = "applied.json";

/// Reading or writing the state failed.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The state file is not what this version writes.
    #[error("{path} is not a corral state file ({source}); remove it and apply again")]
    Corrupt {
        /// File.
        path: PathBuf,
        /// Cause.
        #[source]
        source: serde_json::Error,
    },
    /// The stored configuration no longer parses.
    #[error("the stored configuration in {path} no longer parses: {source}; apply again")]
    Config {
        /// File.
        path: PathBuf,
        /// Every problem.
        #[source]
        source: ConfigErrors,
    },
    /// The plan cannot be rebuilt from the stored inputs.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The state directory is not safe to use, or a file in it failed.
    #[error(transparent)]
    Files(#[from] StateFileError),
}

/// What was applied, as inputs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedInputs {
    /// Format version of this record.
    pub version: u32,
    /// The configuration as `corral.toml` text.
    pub config_toml: String,
    /// Host names and their addresses at apply (or last refresh) time.
    pub resolution: Resolution,
    /// When, seconds since the Unix epoch.
    pub applied_at: u64,
    /// The host's networks and routers at apply (or last refresh) time,
    /// blocked for every sandbox (absent in records of older versions).
    #[serde(default)]
    pub host_networks: Option<Vec<ipnet::IpNet>>,
    /// The port bindings in force (`Host::bind_port` returns the plan;
    /// store its `bindings` here so a later verify expects them).
    #[serde(default)]
    pub bindings: Vec<PortBinding>,
    /// Subnets corral planned here before and no longer does, dropped from
    /// and to whatever interface (absent in older records: none).
    #[serde(default)]
    pub retired: Vec<ipnet::IpNet>,
    /// Ports a forced apply cut off a removed bridge (absent in older
    /// records: none).
    #[serde(default)]
    pub cut_ports: Vec<String>,
}

impl AppliedInputs {
    /// Records `config` and `resolution` now.
    pub fn new(config: &Config, resolution: Resolution) -> Self {
        let applied_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Self {
            version: 1,
            config_toml: config.to_toml_string(),
            resolution,
            applied_at,
            host_networks: None,
            bindings: Vec::new(),
            retired: Vec::new(),
            cut_ports: Vec::new(),
        }
    }

    /// The same record with the retired subnets and cut ports in force.
    #[must_use]
    pub fn with_fail_closed(mut self, retired: Vec<ipnet::IpNet>, cut_ports: Vec<String>) -> Self {
        self.retired = retired;
        self.cut_ports = cut_ports;
        self
    }

    /// The same record with the host networks the plan was built with.
    #[must_use]
    pub fn with_host_networks(mut self, nets: Option<Vec<ipnet::IpNet>>) -> Self {
        self.host_networks = nets;
        self
    }

    /// The plan settings these inputs were applied with.
    pub fn settings(&self, config: &Config) -> PlanSettings {
        PlanSettings {
            host_networks: self.host_networks.clone(),
            retired: self.retired.clone(),
            cut_ports: self.cut_ports.clone(),
            ..plan_settings(&config.host)
        }
    }

    /// The same record with `bindings` in force.
    #[must_use]
    pub fn with_bindings(mut self, bindings: Vec<PortBinding>) -> Self {
        self.bindings = bindings;
        self
    }

    /// Parses the stored configuration back.
    pub fn config(&self) -> Result<Config, ConfigErrors> {
        Config::from_toml_str(&self.config_toml, "stored configuration")
    }
}

/// Where the applied inputs live (`<state_dir>/applied.json`).
#[derive(Debug, Clone)]
pub struct StateStore {
    dir: PathBuf,
}

impl StateStore {
    /// A store in `dir` (created on first save).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The state file.
    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE)
    }

    /// Saves atomically, mode 0600, in the trusted state directory.
    pub fn save(&self, inputs: &AppliedInputs) -> Result<(), StateError> {
        let text = serde_json::to_string_pretty(inputs).map_err(|e| StateError::Corrupt {
            path: self.path(),
            source: e,
        })?;
        StateDir::open(&self.dir)?.write(FILE, text.as_bytes())?;
        Ok(())
    }

    /// Loads the inputs; `None` when nothing was applied yet.
    pub fn load(&self) -> Result<Option<AppliedInputs>, StateError> {
        let path = self.path();
        let Some(dir) = StateDir::open_existing(&self.dir)? else {
            return Ok(None);
        };
        let Some(bytes) = dir.read(FILE)? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StateError::Corrupt { path, source: e })
    }

    /// Takes the host lock of this state directory (creating the directory
    /// if needed): applies, refreshes and teardowns that hold it never
    /// interleave. Waits while another holds it.
    pub fn lock(&self) -> Result<StateLock, StateError> {
        Ok(StateDir::open(&self.dir)?.lock(HOST_LOCK)?)
    }

    /// Rebuilds the applied plan from the stored inputs.
    pub fn load_plan(&self) -> Result<Option<(Config, HostPlan)>, StateError> {
        let Some(inputs) = self.load()? else {
            return Ok(None);
        };
        let config = inputs.config().map_err(|source| StateError::Config {
            path: self.path(),
            source,
        })?;
        let plan = HostPlan::build(
            &config.profiles,
            &inputs.settings(&config),
            &inputs.resolution,
        )?
        .with_bindings(&config.profiles, inputs.bindings)?;
        Ok(Some((config, plan)))
    }

    /// Forgets the applied inputs (after teardown).
    pub fn clear(&self) -> Result<(), StateError> {
        if let Some(dir) = StateDir::open_existing(&self.dir)? {
            dir.remove(FILE)?;
        }
        Ok(())
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The plan settings a configuration's `[host]` section implies. The host
/// networks are not configuration: the caller reads them from the host
/// (`Host::networks`) and sets `host_networks`.
pub fn plan_settings(host: &HostConfig) -> PlanSettings {
    PlanSettings {
        multipass_bridge: Some(host.multipass_bridge.clone()),
        uplink: host.uplink.as_ref().map(ToString::to_string),
        host_networks: None,
        deny: host.deny.clone(),
        retired: Vec::new(),
        cut_ports: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_round_trip_and_rebuild_the_same_plan() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(dir.path().join("state"));
        assert_eq!(store.load().unwrap(), None);
        let config = Config::builtin_default();
        let inputs = AppliedInputs::new(&config, Resolution::new());
        store.save(&inputs).unwrap();
        assert_eq!(store.load().unwrap(), Some(inputs));
        let (back, plan) = store.load_plan().unwrap().unwrap();
        assert_eq!(back, config);
        let direct = HostPlan::build(
            &config.profiles,
            &plan_settings(&config.host),
            &Resolution::new(),
        )
        .unwrap();
        assert_eq!(plan, direct);
        store.clear().unwrap();
        assert_eq!(store.load().unwrap(), None);
        store.clear().unwrap();
    }

    #[test]
    fn an_older_record_has_nothing_retired_or_cut_and_a_new_one_rebuilds_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(dir.path().join("state"));
        let config = Config::builtin_default();
        let mut old = serde_json::to_value(AppliedInputs::new(&config, Resolution::new())).unwrap();
        let obj = old.as_object_mut().unwrap();
        obj.remove("retired");
        obj.remove("cut_ports");
        std::fs::create_dir_all(store.dir()).unwrap();
        std::fs::write(store.path(), old.to_string()).unwrap();
        let back = store.load().unwrap().unwrap();
        assert!(back.retired.is_empty() && back.cut_ports.is_empty());

        let retired: ipnet::IpNet = "10.9.0.0/24".parse().unwrap();
        let inputs = back.with_fail_closed(vec![retired], vec!["veth9".to_owned()]);
        store.save(&inputs).unwrap();
        let (_, plan) = store.load_plan().unwrap().unwrap();
        assert_eq!(plan.retired, vec![retired]);
        assert_eq!(plan.cut_ports, vec!["veth9".to_owned()]);
        assert_eq!(plan.set("retired4").unwrap().elements.len(), 1);
        for t in plan.tables() {
            let cut = t.keyed_sets.iter().find(|s| s.name == "cut_ports").unwrap();
            assert_eq!(cut.elements.len(), 1, "{:?}", t.family);
        }
    }

    #[test]
    fn a_corrupt_file_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(dir.path());
        std::fs::write(store.path(), "{not json").unwrap();
        let err = store.load().unwrap_err();
        assert!(err.to_string().contains("apply again"), "{err}");
    }
}
