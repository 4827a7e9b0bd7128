//! What every `host` command needs before it can act: the configuration,
//! the privileges, the target namespace and the state directory — the
//! last two by the service's rules, so `corral` and `corrald` agree.

use corral_service::host::{Planned, PlanningError};
use corral_service::{HostService, LoadedConfig, Settings, Target};

use crate::args::ConfigSource;
use crate::error::CliError;
use crate::load;
use crate::privilege::{self, Capability};

/// A planning failure, classified (an unplannable configuration is usage).
pub fn planning_error(e: PlanningError) -> CliError {
    if e.is_usage() {
        CliError::usage(e)
    } else {
        CliError::failure(e)
    }
}

/// The configuration the user asked for, loaded before any privilege check
/// so a bad file is reported as such even without root.
pub fn load_config(source: &ConfigSource) -> Result<LoadedConfig, CliError> {
    let loaded = load::load(source)?;
    Ok(LoadedConfig {
        config: loaded.config,
        origin: loaded.origin,
    })
}

/// Check the capabilities host commands need, then open the target and
/// pick the state directory. Checked before any netlink work so the
/// message names what is missing. Entering another namespace (`--netns`)
/// also needs CAP_SYS_ADMIN; the host's own namespace needs only
/// CAP_NET_ADMIN.
pub fn service(
    verb: &str,
    loaded: &LoadedConfig,
    netns: Option<&str>,
    state_dir: Option<&std::path::Path>,
) -> Result<HostService, CliError> {
    let needed: &[Capability] = match netns {
        None => &[Capability::NetAdmin],
        Some(_) => &[Capability::NetAdmin, Capability::SysAdmin],
    };
    privilege::require(&format!("`corral host {verb}`"), needed).map_err(CliError::failure)?;
    let target = Target::open(netns).map_err(|e| {
        if e.is_usage() {
            CliError::usage(e)
        } else {
            CliError::failure(e)
        }
    })?;
    let settings = Settings::new(loaded.clone(), netns.map(str::to_owned), state_dir);
    Ok(HostService::new(target, settings.state_dir))
}

/// Resolve names and plan the configuration.
pub fn plan_config(loaded: LoadedConfig) -> Result<Planned, CliError> {
    corral_service::host::plan_config(loaded).map_err(planning_error)
}

/// The plan `status` and `verify` check against.
pub fn plan_to_check(
    loaded: LoadedConfig,
    source: &ConfigSource,
    service: &HostService,
) -> Result<Planned, CliError> {
    corral_service::host::plan_to_check(loaded, source.to_service().is_explicit(), &service.store())
        .map_err(planning_error)
}
