//! What every `host` command needs before it can act: the configuration
//! (or what was applied), the privileges, the target namespace, the state
//! store and the plan. Building the plan is the egress crate's
//! (`HostPlan::build`); this module only gathers its inputs.

use std::path::PathBuf;

use corral_egress::host::{AppliedInputs, Host, StateStore, plan_settings};
use corral_egress::netns::Netns;
use corral_egress::plan::HostPlan;
use corral_egress::resolve::{Resolution, SystemResolver, resolve_profiles};
use corral_sandbox_core::config::Config;

use crate::args::{ConfigSource, HostArgs};
use crate::error::CliError;
use crate::load::{self, Origin};
use crate::privilege::{self, Capability};

/// Where host commands act: the host, or the namespace `--netns` names.
#[derive(Debug)]
pub struct Target {
    /// The egress facade bound to the namespace.
    pub host: Host,
    /// The `--netns` argument, if any.
    pub netns: Option<String>,
}

impl Target {
    /// For messages: `the host` or `network namespace NAME`.
    pub fn describe(&self) -> String {
        match &self.netns {
            None => "this host".to_owned(),
            Some(name) => format!("network namespace {name}"),
        }
    }
}

/// Check the capabilities host commands need, then open the target.
/// Checked before any netlink work so the message names what is missing.
/// Entering another namespace (`--netns`) also needs CAP_SYS_ADMIN; the
/// host's own namespace needs only CAP_NET_ADMIN.
pub fn target(verb: &str, netns: Option<&str>) -> Result<Target, CliError> {
    let needed: &[Capability] = match netns {
        None => &[Capability::NetAdmin],
        Some(_) => &[Capability::NetAdmin, Capability::SysAdmin],
    };
    privilege::require(&format!("`corral host {verb}`"), needed).map_err(CliError::failure)?;
    let host = match netns {
        None => Host::current().map_err(|e| {
            CliError::failure(
                anyhow::Error::new(e).context("cannot open this host's network namespace"),
            )
        })?,
        Some(name) => Host::in_netns(Netns::open(name).map_err(|e| {
            CliError::usage(anyhow::Error::new(e).context(format!(
                "--netns {name}: give a name under /run/netns or a path like /proc/PID/ns/net"
            )))
        })?),
    };
    Ok(Target {
        host,
        netns: netns.map(str::to_owned),
    })
}

/// Where applied inputs are kept: `--state-dir`, else the config's
/// `state_dir`, with a sub-directory per `--netns` target so acting on a
/// namespace never overwrites what was applied to the host.
pub fn state_store(
    state_dir: Option<&PathBuf>,
    config: &Config,
    netns: Option<&str>,
) -> StateStore {
    if let Some(dir) = state_dir {
        return StateStore::new(dir);
    }
    let base = config.host.state_dir.clone();
    match netns {
        None => StateStore::new(base),
        Some(name) => {
            let safe: String = name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            StateStore::new(base.join("netns").join(safe))
        }
    }
}

/// A configuration with the addresses its names resolve to, and its plan.
#[derive(Debug)]
pub struct Planned {
    /// The configuration.
    pub config: Config,
    /// Where it came from.
    pub origin: String,
    /// Resolved host names.
    pub resolution: Resolution,
    /// The plan.
    pub plan: HostPlan,
}

impl Planned {
    /// The inputs to persist after an apply or refresh.
    pub fn inputs(&self) -> AppliedInputs {
        AppliedInputs::new(&self.config, self.resolution.clone())
    }
}

/// Resolve the allowlisted names with the host's resolver and build the plan.
pub fn plan_config(config: Config, origin: String) -> Result<Planned, CliError> {
    let resolution = resolve_profiles(&config.profiles, &SystemResolver).map_err(|e| {
        CliError::failure(anyhow::Error::new(e).context("resolving allowlisted host names"))
    })?;
    let plan = HostPlan::build(&config.profiles, &plan_settings(&config.host), &resolution)
        .map_err(|e| {
            CliError::usage(anyhow::Error::new(e).context("the configuration cannot be planned"))
        })?;
    Ok(Planned {
        config,
        origin,
        resolution,
        plan,
    })
}

/// True when the user named a configuration file explicitly.
pub fn explicit(source: &ConfigSource) -> bool {
    source.config.is_some() || source.networks_conf.is_some()
}

/// The configuration the user asked for, loaded before any privilege check
/// so a bad file is reported as such even without root.
pub fn load_config(source: &ConfigSource) -> Result<(Config, String), CliError> {
    let loaded = load::load(source)?;
    let origin = match &loaded.origin {
        Origin::Builtin => "built-in defaults".to_owned(),
        Origin::File(p) => p.display().to_string(),
    };
    Ok((loaded.config, origin))
}

/// The plan to check the live state against (`status`, `verify`): an
/// explicitly named file wins; otherwise what was last applied (so names
/// are not re-resolved), else the default configuration.
pub fn plan_to_check(
    args: &HostArgs,
    config: Config,
    origin: String,
    store: &StateStore,
) -> Result<Planned, CliError> {
    if !explicit(&args.source) {
        let stored = store
            .load()
            .map_err(|e| CliError::failure(anyhow::Error::new(e)))?;
        if let Some(inputs) = stored {
            let config = inputs.config().map_err(|m| {
                CliError::failure(anyhow::anyhow!(
                    "the configuration stored in {} no longer parses: {m}; run `corral host apply` again",
                    store.path().display()
                ))
            })?;
            let plan = HostPlan::build(
                &config.profiles,
                &plan_settings(&config.host),
                &inputs.resolution,
            )
            .map_err(|e| {
                CliError::failure(anyhow::Error::new(e).context("rebuilding the applied plan"))
            })?;
            return Ok(Planned {
                config,
                origin: format!("what was applied ({})", store.path().display()),
                resolution: inputs.resolution,
                plan,
            });
        }
    }
    plan_config(config, origin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_netns_never_shares_the_hosts_state_file() {
        let config = Config::builtin_default();
        let host = state_store(None, &config, None);
        let ns = state_store(None, &config, Some("/proc/42/ns/net"));
        assert_eq!(host.dir(), config.host.state_dir.as_path());
        assert_ne!(host.path(), ns.path());
        assert!(ns.dir().starts_with(&config.host.state_dir));
        assert!(
            ns.dir().ends_with("netns/_proc_42_ns_net"),
            "{}",
            ns.dir().display()
        );
        let explicit = PathBuf::from("/tmp/x");
        assert_eq!(
            state_store(Some(&explicit), &config, Some("n")).dir(),
            explicit.as_path()
        );
    }
}
