//! What every `host` command needs before it can act: the configuration,
//! the privileges, the target namespace and the state directory — the
//! last two by the service's rules, so `corral` and `corrald` agree.

use corral_sandbox_core::SandboxKind;
use corral_service::host::wiring::Wiring;
use corral_service::host::{Planned, PlanningError};
use corral_service::{Backend, HostService, LoadedConfig, Settings, Target};

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
    service_for(&format!("`corral host {verb}`"), loaded, netns, state_dir)
}

/// [`service`] for any command (`what` names it in a privilege error).
pub fn service_for(
    what: &str,
    loaded: &LoadedConfig,
    netns: Option<&str>,
    state_dir: Option<&std::path::Path>,
) -> Result<HostService, CliError> {
    let needed: &[Capability] = match netns {
        None => &[Capability::NetAdmin],
        Some(_) => &[Capability::NetAdmin, Capability::SysAdmin],
    };
    privilege::require(what, needed).map_err(CliError::failure)?;
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

/// Which sandbox is on which of `loaded`'s bridges, from the local Incus
/// daemon at `socket`. `Ok(None)` with the reason when there is nothing to
/// look at: a target namespace (the local daemon's instances live in the
/// host's), or no daemon at `socket`.
pub fn wiring(
    loaded: &LoadedConfig,
    netns: Option<&str>,
    socket: &std::path::Path,
) -> Result<Result<Wiring, String>, anyhow::Error> {
    if netns.is_none() && !socket.exists() {
        return Ok(Err(format!(
            "not looked for: no Incus daemon at {}",
            socket.display()
        )));
    }
    let backend = Backend::select(
        std::env::consts::OS,
        SandboxKind::Incus,
        &loaded.config.host,
        socket.to_path_buf(),
    )?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok(runtime.block_on(corral_service::reports::wiring_for(
        &backend,
        &loaded.config.profiles,
        netns,
    )))
}
