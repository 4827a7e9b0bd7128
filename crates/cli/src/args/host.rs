//! `corral host …`: apply, status, teardown of host enforcement.

use super::DEFAULT_INCUS_SOCKET;
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// `corral host …`.
#[derive(Debug, Subcommand)]
pub enum HostCommand {
    /// Show the nftables ruleset corral would install and how it differs from the live state.
    Plan(HostArgs),
    /// Install the configured profiles: sysctls, nftables, bridges; then read back.
    Apply(ApplyArgs),
    /// Show bridges, profiles, sets and counters as they are now.
    Status(HostArgs),
    /// Compare the live state with the plan; exit 1 and list every difference on drift.
    Verify(HostArgs),
    /// Remove corral's tables and the bridges corral created (nothing else).
    Teardown(TeardownArgs),
    /// Re-resolve allowlisted host names and update set elements in place.
    Refresh(HostArgs),
    /// Watch the kernel until SIGINT/SIGTERM: on any change to corral's
    /// tables, bridges or ports that corral did not make, heal or cut
    /// (`[host.watch]`).
    Watch(HostArgs),
}

/// Where the profiles come from.
#[derive(Debug, Clone, Args)]
pub struct ConfigSource {
    /// corral.toml to use; when the default path is absent, built-in profiles are used.
    #[arg(long, value_name = "FILE", conflicts_with = "networks_conf")]
    pub config: Option<PathBuf>,
    /// A legacy networks.conf (`name bridge subnet allowed-hosts` per line) instead of corral.toml.
    #[arg(long, value_name = "FILE")]
    pub networks_conf: Option<PathBuf>,
}

/// Arguments shared by the `host` commands.
#[derive(Debug, Clone, Args)]
pub struct HostArgs {
    /// Profiles to enforce.
    #[command(flatten)]
    pub source: ConfigSource,
    /// Act inside this network namespace (a name under /run/netns, or a path
    /// such as /proc/PID/ns/net) instead of the host's.
    #[arg(long, value_name = "NAME|PATH")]
    pub netns: Option<String>,
    /// Where corral keeps what it applied (overrides the config's state_dir).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Print machine-readable JSON on stdout (schema: docs/json-schema.md).
    #[arg(long)]
    pub json: bool,
    /// The local Incus daemon's socket (whose instances `status` and
    /// `teardown` look for on corral's bridges).
    #[arg(long, value_name = "PATH", env = "CORRAL_INCUS_SOCKET", default_value = DEFAULT_INCUS_SOCKET, hide_default_value = true)]
    pub incus_socket: PathBuf,
}

/// `corral host apply`.
#[derive(Debug, Clone, Args)]
pub struct ApplyArgs {
    /// Everything `host plan` accepts.
    #[command(flatten)]
    pub host: HostArgs,
    /// Change nothing; print what `host plan` prints.
    #[arg(long)]
    pub dry_run: bool,
    /// Remove the bridges of profiles no longer configured even while
    /// sandboxes are attached: their ports are set down and cut off (they
    /// forward nothing, even brought up again), then the bridges deleted.
    #[arg(short, long)]
    pub force: bool,
}

/// `corral host teardown`.
#[derive(Debug, Clone, Args)]
pub struct TeardownArgs {
    /// Everything `host plan` accepts.
    #[command(flatten)]
    pub host: HostArgs,
    /// Tear down even while sandboxes are attached to corral's bridges (or
    /// when corral cannot tell): they lose their network and its rules.
    #[arg(short, long)]
    pub force: bool,
}
