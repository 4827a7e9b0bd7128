//! Creating, entering and managing sandboxes: `new`, `ls`, `info`, `shell`,
//! `exec`, `incus`, power, `rm` and the context they share.

use super::ConfigSource;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// Where sandbox commands find the profiles, the enforcement to check and
/// the backend.
#[derive(Debug, Clone, Args)]
pub struct SandboxContext {
    /// Profiles (the same file `host apply` used).
    #[command(flatten)]
    pub source: ConfigSource,
    /// The network namespace whose enforcement the start gate checks (where
    /// `host apply --netns` applied it).
    #[arg(long, value_name = "NAME|PATH")]
    pub netns: Option<String>,
    /// Where `host apply` recorded what it applied.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The local Incus daemon's socket.
    #[arg(long, value_name = "PATH", env = "CORRAL_INCUS_SOCKET", default_value = DEFAULT_INCUS_SOCKET, hide_default_value = true)]
    pub incus_socket: PathBuf,
}

/// The Incus daemon's socket unless told otherwise.
pub const DEFAULT_INCUS_SOCKET: &str = "/var/lib/incus/unix.socket";

/// A resource preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SizeArg {
    /// 1 CPU, 1 GiB memory, 5 GiB disk.
    Small,
    /// 2 CPUs, 4 GiB memory, 20 GiB disk.
    Medium,
    /// 4 CPUs, 8 GiB memory, 50 GiB disk.
    Large,
}

/// `corral new`.
#[derive(Debug, Clone, Args)]
pub struct NewArgs {
    /// The sandbox's name (letters, digits and `-`).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Network profile (default: the `[phases] work` profile of the config).
    #[arg(long, value_name = "PROFILE", conflicts_with = "no_network")]
    pub profile: Option<String>,
    /// No network at all: the sandbox gets no NIC.
    #[arg(long)]
    pub no_network: bool,
    /// The template: image, user, resources, packages, the agent-context
    /// file (`corral templates` lists them; default: blank).
    #[arg(long, value_name = "TEMPLATE")]
    pub template: Option<String>,
    /// Image: an alias or fingerprint the backend has (default: the template's).
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// Clone an existing sandbox, or one of its snapshots (SRC/SNAP): a
    /// fresh identity (MAC, interface names, machine-id) on the source's
    /// profile, through the same start gate and canary as a new one.
    #[arg(
        long,
        value_name = "SRC[/SNAP]",
        conflicts_with_all = ["profile", "no_network", "template", "image", "cpu", "memory", "disk", "size", "vm"]
    )]
    pub from: Option<String>,
    /// Virtual CPUs.
    #[arg(
        long,
        value_name = "N",
        conflicts_with = "size",
        allow_hyphen_values = true
    )]
    pub cpu: Option<u32>,
    /// Memory, e.g. 512MiB or 2GiB (a unit is required).
    #[arg(
        long,
        value_name = "SIZE",
        conflicts_with = "size",
        allow_hyphen_values = true
    )]
    pub memory: Option<String>,
    /// Root disk, e.g. 10GiB (a unit is required; more than the storage
    /// pool has free is refused).
    #[arg(
        long,
        value_name = "SIZE",
        conflicts_with = "size",
        allow_hyphen_values = true
    )]
    pub disk: Option<String>,
    /// A resource preset instead of --cpu/--memory/--disk.
    #[arg(long, value_enum)]
    pub size: Option<SizeArg>,
    /// A virtual machine instead of a container.
    #[arg(long)]
    pub vm: bool,
    /// The Incus cluster member to place it on (see docs/cluster.md);
    /// refused when Incus reports the member evacuated or offline.
    #[arg(long, value_name = "MEMBER", conflicts_with = "from")]
    pub target: Option<String>,
    /// Time to live (90s, 30m, 2h, 1d): corral deletes the sandbox that
    /// long after it is made, running or not (default: the template's, else
    /// never). Enforced by a running corrald.
    #[arg(long, value_name = "DURATION", value_parser = corral_service::lifetimes::parse_secs, conflicts_with = "from")]
    pub ttl: Option<u64>,
    /// Stop the sandbox once it has sat idle this long (90s, 30m, 2h, 1d):
    /// no exec session in it and no packet from it through its port
    /// (default: the template's, else never). Enforced by a running corrald.
    #[arg(long, value_name = "DURATION", value_parser = corral_service::lifetimes::parse_secs, conflicts_with = "from")]
    pub idle_stop: Option<u64>,
    /// Give up waiting for the sandbox to be ready after this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub timeout: u64,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the profiles and enforcement are.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral templates`.
#[derive(Debug, Clone, Args)]
pub struct TemplatesArgs {
    /// Show this template: its fields, and the context file and cloud-init
    /// user-data a sandbox on --profile would get.
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// The profile to render the shown template for (default: the
    /// `[phases] work` profile).
    #[arg(long, value_name = "PROFILE", requires = "name")]
    pub profile: Option<String>,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Profiles, and the templates directory beside the configuration.
    #[command(flatten)]
    pub source: ConfigSource,
}

/// `corral shell`.
#[derive(Debug, Clone, Args)]
pub struct ShellArgs {
    /// The sandbox (running).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Where the backend is.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral incus`.
#[derive(Debug, Clone, Args)]
pub struct IncusArgs {
    /// The sandbox (corral's own).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Run arguments that move the sandbox's isolation (profiles, networks,
    /// devices, security.*, raw.*, config edit, move, copy, publish,
    /// another project), with a warning naming what each moves.
    #[arg(long)]
    pub i_know: bool,
    /// Where the backend is.
    #[command(flatten)]
    pub ctx: SandboxContext,
    /// Incus's arguments, as they are (after `--`); they must name NAME.
    #[arg(value_name = "ARGS", last = true, required = true)]
    pub args: Vec<String>,
}

/// `corral ls`.
#[derive(Debug, Clone, Args)]
pub struct ListArgs {
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the backend is.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral info`.
#[derive(Debug, Clone, Args)]
pub struct InfoArgs {
    /// The sandbox.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the backend is.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral exec`.
#[derive(Debug, Clone, Args)]
pub struct ExecArgs {
    /// The sandbox.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Give the command an empty standard input instead of corral's.
    #[arg(short = 'n', long)]
    pub no_stdin: bool,
    /// Working directory inside the sandbox.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    /// Extra environment variable (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Where the backend is.
    #[command(flatten)]
    pub ctx: SandboxContext,
    /// The program and its arguments, passed as they are (after `--`).
    #[arg(value_name = "ARGV", last = true, required = true)]
    pub argv: Vec<String>,
}

/// `corral start`.
#[derive(Debug, Clone, Args)]
pub struct PowerArgs {
    /// The sandboxes.
    #[arg(
        value_name = "NAME",
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    pub names: Vec<String>,
    /// Every sandbox this state directory made (that the verb applies to;
    /// a caller who is not root: their own), not every corral instance the
    /// backend holds.
    #[arg(long)]
    pub all: bool,
    /// Wait at most this many seconds for each sandbox: to be ready after a
    /// start, to shut down cleanly on a stop.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub timeout: u64,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the profiles and enforcement are.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral stop` and `corral restart`.
#[derive(Debug, Clone, Args)]
pub struct StopArgs {
    /// Which sandboxes.
    #[command(flatten)]
    pub power: PowerArgs,
    /// Kill instead of a clean shutdown.
    #[arg(long)]
    pub force: bool,
}

/// `corral rm`.
#[derive(Debug, Clone, Args)]
pub struct RmArgs {
    /// The sandboxes.
    #[arg(value_name = "NAME", required = true)]
    pub names: Vec<String>,
    /// Do not ask; needed when standard input is not a terminal.
    #[arg(short, long)]
    pub force: bool,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the backend is.
    #[command(flatten)]
    pub ctx: SandboxContext,
}
