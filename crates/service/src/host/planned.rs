//! The plan a host command acts on: the configuration's (names resolved
//! now), or what was last applied (names as they resolved then).

use corral_egress::host::{AppliedInputs, Host, HostError, StateError, StateStore, plan_settings};
use corral_egress::plan::bindings::carry;
use corral_egress::plan::{HostPlan, PlanError, PlanSettings, PortBinding};
use corral_egress::resolve::{Resolution, ResolveError, SystemResolver, resolve_profiles};
use corral_sandbox_core::config::Config;

use crate::config::LoadedConfig;

/// A configuration with the addresses its names resolve to, and its plan.
#[derive(Debug, Clone)]
pub struct Planned {
    /// The configuration.
    pub config: Config,
    /// Where it came from, for messages (a path, `built-in defaults`, or
    /// `what was applied (<state file>)`).
    pub origin: String,
    /// Resolved host names.
    pub resolution: Resolution,
    /// The plan.
    pub plan: HostPlan,
    /// True when this is what was last applied rather than the configuration.
    pub from_applied: bool,
    /// The host's own networks and routers the plan blocks, when they were
    /// read (see [`with_host_networks`]).
    pub host_networks: Option<Vec<ipnet::IpNet>>,
}

impl Planned {
    /// The inputs to persist after an apply or refresh (the port bindings
    /// in force included).
    pub fn inputs(&self) -> AppliedInputs {
        AppliedInputs::new(&self.config, self.resolution.clone())
            .with_host_networks(self.host_networks.clone())
            .with_bindings(self.plan.bindings.clone())
            .with_fail_closed(self.plan.retired.clone(), self.plan.cut_ports.clone())
    }

    /// This plan with the bindings of `previous` that still fit its
    /// configuration (see `bindings::carry`): a re-apply or refresh must
    /// not cut bound sandboxes off.
    pub fn keeping_bindings(&self, previous: &[PortBinding]) -> Result<Planned, PlanningError> {
        let kept = carry(&self.config.profiles, previous);
        let plan = self
            .plan
            .with_bindings(&self.config.profiles, kept)
            .map_err(PlanningError::Plan)?;
        Ok(Planned {
            plan,
            ..self.clone()
        })
    }
}

/// The same plan, built with the host's directly connected networks and
/// routers read from `host` now (no sandbox reaches them; a name
/// resolving into one is refused). Apply, refresh and plan use it; a plan
/// rebuilt from what was applied already carries the networks of then.
pub fn with_host_networks(planned: &Planned, host: &Host) -> Result<Planned, PlanningError> {
    let bridges: Vec<String> = planned
        .config
        .profiles
        .iter()
        .map(|p| p.bridge.to_string())
        .collect();
    let nets = host
        .networks(&bridges)
        .map_err(|e| PlanningError::Networks(Box::new(e)))?
        .to_nets();
    let settings = PlanSettings {
        host_networks: Some(nets.clone()),
        ..plan_settings(&planned.config.host)
    };
    // The bindings the plan carried stay (they are in no configuration).
    let plan = HostPlan::build(&planned.config.profiles, &settings, &planned.resolution)
        .and_then(|p| p.with_bindings(&planned.config.profiles, planned.plan.bindings.clone()))
        .map_err(PlanningError::Plan)?
        .with_fail_closed(planned.plan.retired.clone(), planned.plan.cut_ports.clone());
    Ok(Planned {
        plan,
        host_networks: Some(nets),
        ..planned.clone()
    })
}

/// The configuration could not be planned.
#[derive(Debug, thiserror::Error)]
pub enum PlanningError {
    /// An allowlisted name could not be resolved.
    #[error("resolving allowlisted host names")]
    Resolve(#[source] ResolveError),
    /// The profiles cannot be turned into a plan (a usage error: the
    /// configuration must change).
    #[error("the configuration cannot be planned")]
    Plan(#[source] PlanError),
    /// What was applied could not be read back.
    #[error("reading what was applied")]
    State(#[source] StateError),
    /// The host's own networks and routers could not be read.
    #[error("reading the host's own networks and routers")]
    Networks(#[source] Box<HostError>),
}

impl PlanningError {
    /// True when the fix is a different configuration.
    pub fn is_usage(&self) -> bool {
        matches!(self, PlanningError::Plan(_))
    }
}

/// Resolve the allowlisted names with the host's resolver and build the plan.
pub fn plan_config(loaded: LoadedConfig) -> Result<Planned, PlanningError> {
    let config = loaded.config;
    let resolution =
        resolve_profiles(&config.profiles, &SystemResolver).map_err(PlanningError::Resolve)?;
    let plan = HostPlan::build(&config.profiles, &plan_settings(&config.host), &resolution)
        .map_err(PlanningError::Plan)?;
    Ok(Planned {
        config,
        origin: loaded.origin.to_string(),
        resolution,
        plan,
        from_applied: false,
        host_networks: None,
    })
}

/// What was last applied, rebuilt from the stored inputs; `None` when
/// nothing was applied.
pub fn applied(store: &StateStore) -> Result<Option<Planned>, PlanningError> {
    let Some(inputs) = store.load().map_err(PlanningError::State)? else {
        return Ok(None);
    };
    let config = inputs.config().map_err(|source| {
        PlanningError::State(StateError::Config {
            path: store.path(),
            source,
        })
    })?;
    let plan = HostPlan::build(
        &config.profiles,
        &inputs.settings(&config),
        &inputs.resolution,
    )
    .and_then(|p| p.with_bindings(&config.profiles, inputs.bindings.clone()))
    .map_err(|e| PlanningError::State(StateError::Plan(e)))?;
    Ok(Some(Planned {
        config,
        origin: format!("what was applied ({})", store.path().display()),
        resolution: inputs.resolution,
        plan,
        from_applied: true,
        host_networks: inputs.host_networks,
    }))
}

/// The plan to check the live state against (`status`, `verify`): an
/// explicitly named file wins (with the host networks and the port
/// bindings recorded by the last apply); otherwise what was last applied
/// (so names are not re-resolved), else the configuration.
pub fn plan_to_check(
    loaded: LoadedConfig,
    explicit: bool,
    store: &StateStore,
) -> Result<Planned, PlanningError> {
    let recorded = applied(store)?;
    match recorded {
        Some(planned) if !explicit => Ok(planned),
        // The file's plan, with the host networks and the port bindings the
        // last apply put in force (neither is in any configuration file).
        Some(planned) => {
            let file = plan_config(loaded)?;
            let settings = PlanSettings {
                host_networks: planned.host_networks.clone(),
                retired: planned.plan.retired.clone(),
                cut_ports: planned.plan.cut_ports.clone(),
                ..plan_settings(&file.config.host)
            };
            let plan = HostPlan::build(&file.config.profiles, &settings, &file.resolution)
                .map_err(PlanningError::Plan)?;
            Planned {
                plan,
                host_networks: planned.host_networks,
                ..file
            }
            .keeping_bindings(&planned.plan.bindings)
        }
        None => plan_config(loaded),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Origin;

    #[test]
    fn what_was_applied_wins_unless_a_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(dir.path());
        let builtin = LoadedConfig {
            config: Config::builtin_default(),
            origin: Origin::Builtin,
        };
        let p = plan_to_check(builtin.clone(), false, &store).unwrap();
        assert!(!p.from_applied);
        assert_eq!(p.origin, "built-in defaults");
        store.save(&p.inputs()).unwrap();
        let p = plan_to_check(builtin.clone(), false, &store).unwrap();
        assert!(p.from_applied);
        assert!(p.origin.starts_with("what was applied"), "{}", p.origin);
        assert!(!plan_to_check(builtin, true, &store).unwrap().from_applied);
    }

    #[test]
    fn a_named_file_is_checked_with_the_bindings_in_force() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(dir.path());
        let builtin = LoadedConfig {
            config: Config::builtin_default(),
            origin: Origin::Builtin,
        };
        let p = plan_to_check(builtin.clone(), false, &store).unwrap();
        let b = PortBinding::allocate(p.config.profiles.get("internet").unwrap(), &[]).unwrap();
        store
            .save(&p.inputs().with_bindings(vec![b.clone()]))
            .unwrap();
        for explicit in [false, true] {
            let checked = plan_to_check(builtin.clone(), explicit, &store).unwrap();
            assert_eq!(
                checked.plan.bindings,
                vec![b.clone()],
                "explicit: {explicit}"
            );
        }
    }
}
