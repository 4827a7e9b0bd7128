//! The command line, as clap derive types only: no logic lives here, so the
//! grammar can be read (and turned into completions and a man page) on its own.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use clap_complete::Shell;

/// corral: network-isolated sandboxes for AI coding agents, with egress
/// enforced in the host kernel.
#[derive(Debug, Parser)]
#[command(
    name = "corral",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    /// Options every command accepts.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command accepts.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Print only the essential result (errors and requested data still print).
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// More log output on stderr (-v info, -vv debug); RUST_LOG overrides it.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// When to colour human output.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

/// When to colour human output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Colour when stdout is a terminal and NO_COLOR is unset.
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

/// The top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Plan, apply, check and remove corral's enforcement on this host.
    #[command(subcommand)]
    Host(HostCommand),
    /// Check or convert configuration files.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Show which sandbox kinds run on which host OS, and how egress is enforced.
    Matrix(MatrixArgs),
    /// List the configured network profiles.
    Profiles(ProfilesArgs),
    /// Prove isolation: build a simulated host in network namespaces, apply the
    /// profiles there and send real packets. Never touches this host's network.
    Drill(DrillArgs),
    /// Create a sandbox from a template (or clone one with --from) on a
    /// profile's bridge, start it, and wait until it holds its DHCP lease
    /// from the profile's gateway and answers exec.
    New(NewArgs),
    /// List the templates new sandboxes are made from, or show one.
    Templates(TemplatesArgs),
    /// List the sandboxes corral owns.
    Ls(ListArgs),
    /// Show one sandbox.
    Info(InfoArgs),
    /// Run a command in a sandbox; its exit status becomes corral's.
    Exec(ExecArgs),
    /// Start stopped sandboxes (each passes the start gate first).
    Start(PowerArgs),
    /// Stop running sandboxes.
    Stop(StopArgs),
    /// Stop and start sandboxes again (through the start gate).
    Restart(StopArgs),
    /// Delete sandboxes and their snapshots.
    Rm(RmArgs),
    /// Take a snapshot of a sandbox (default label: the first free snapN).
    Snapshot(SnapshotArgs),
    /// Put a sandbox back to one of its snapshots (a running one restarts
    /// into it through the start gate).
    Restore(RestoreArgs),
    /// Rename a stopped sandbox.
    Rename(RenameArgs),
    /// Write a sandbox (with its snapshots) to a backup file. The file may
    /// hold credentials the agent left inside.
    Export(ExportArgs),
    /// Make a sandbox from a backup file (checked before anything is
    /// uploaded; left stopped).
    Import(ImportArgs),
    /// Copy a file from this host into a sandbox.
    Push(PushArgs),
    /// Copy a file out of a sandbox to this host.
    Pull(PullArgs),
    /// Open an interactive shell in a running sandbox (needs a terminal).
    Shell(ShellArgs),
    /// Escape hatch: run Incus's own client on one sandbox corral owns
    /// (its daemon, corral's project). ARGS must name the sandbox and no
    /// other instance; isolation-moving arguments need --i-know.
    Incus(IncusArgs),
    /// Run the canary in a running profiled sandbox now: every check with what
    /// it observed, its control and its time; exit 1 (and the sandbox is
    /// stopped) when one fails.
    Verify(VerifyArgs),
    /// List recorded events: lifecycle, verification (with per-check timings), alerts.
    Events(EventsArgs),
    /// Show the verification gate: each kind's standing and every sandbox's last verdict.
    Gate(GateArgs),
    /// Show the audit trail: blocked packets, DNS decisions, lifecycle and verification.
    Log(LogArgs),
    /// Say whether a sandbox of a profile may reach a destination, and which
    /// rule of the plan in force decides (and why: the allow entry, the
    /// learned address, the reserved range). Changes nothing but, for a host
    /// name, what the profile's resolver learns by resolving it.
    Explain(ExplainArgs),
    /// Give USER sandbox rights (the restricted tier, through corrald's
    /// socket) in an Incus project of their own (admins only).
    Grant(GrantArgs),
    /// Take USER's sandbox rights away at once; --purge also deletes their
    /// sandboxes and project (admins only).
    Revoke(RevokeArgs),
    /// Print a shell completion script.
    Completions(CompletionsArgs),
    /// Print the man page (roff) on stdout, or write one page per command.
    Man(ManArgs),
}

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

/// `corral explain`.
#[derive(Debug, Clone, Args)]
pub struct ExplainArgs {
    /// The destination: an IP address (IPv6 in brackets when a port
    /// follows) or a host name, an optional port, and tcp, udp or icmp
    /// (default: tcp with a port, icmp without), e.g. `203.0.113.7:443`,
    /// `[2001:db8::1]:53/udp`, `api.example.com:443/tcp`.
    #[arg(value_name = "DEST[:PORT][/PROTO]")]
    pub dest: String,
    /// The profile whose sandboxes send the packet.
    #[arg(
        long,
        value_name = "PROFILE",
        required_unless_present = "sandbox",
        conflicts_with = "sandbox"
    )]
    pub profile: Option<String>,
    /// The sandbox that sends it (its profile, and its bound addresses as
    /// the source).
    #[arg(long, value_name = "NAME")]
    pub sandbox: Option<String>,
    /// Print machine-readable JSON on stdout (schema: docs/json-schema.md).
    #[arg(long)]
    pub json: bool,
    /// Where the profiles, the enforcement and the backend are.
    #[command(flatten)]
    pub ctx: SandboxContext,
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
    #[arg(long, value_name = "N", conflicts_with = "size")]
    pub cpu: Option<u32>,
    /// Memory, e.g. 512MiB or 2GiB.
    #[arg(long, value_name = "SIZE", conflicts_with = "size")]
    pub memory: Option<String>,
    /// Root disk, e.g. 10GiB.
    #[arg(long, value_name = "SIZE", conflicts_with = "size")]
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

/// `corral snapshot`.
#[derive(Debug, Clone, Args)]
pub struct SnapshotArgs {
    /// The sandbox.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The snapshot's name (default: the first free snapN).
    #[arg(value_name = "LABEL")]
    pub label: Option<String>,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the backend is.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral restore`.
#[derive(Debug, Clone, Args)]
pub struct RestoreArgs {
    /// The sandbox.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The snapshot (`corral info NAME` lists them).
    #[arg(value_name = "SNAP")]
    pub snapshot: String,
    /// Do not ask; needed when standard input is not a terminal.
    #[arg(short, long)]
    pub force: bool,
    /// Wait at most this many seconds for a running sandbox to be ready again.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub timeout: u64,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the profiles, enforcement and backend are.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral rename`.
#[derive(Debug, Clone, Args)]
pub struct RenameArgs {
    /// The sandbox (stopped).
    #[arg(value_name = "OLD")]
    pub old: String,
    /// Its new name.
    #[arg(value_name = "NEW")]
    pub new: String,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the backend is.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral export`.
#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// The sandbox.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The backup file to write (must not exist; default NAME.tar.gz here).
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the backend is.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral import`.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// A backup file `corral export` wrote.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The new sandbox's name (default: the file's name without .tar.gz).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the profiles and backend are.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral push`.
#[derive(Debug, Clone, Args)]
pub struct PushArgs {
    /// The sandbox.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The file on this host (`-`: standard input).
    #[arg(value_name = "LOCAL")]
    pub local: PathBuf,
    /// The absolute path to write inside the sandbox (replaced if it exists).
    #[arg(value_name = "PATH")]
    pub path: String,
    /// Permission bits of the written file, in octal.
    #[arg(long, value_name = "MODE", default_value = "644")]
    pub mode: String,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the backend is.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral pull`.
#[derive(Debug, Clone, Args)]
pub struct PullArgs {
    /// The sandbox.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The absolute path of a regular file inside the sandbox.
    #[arg(value_name = "PATH")]
    pub path: String,
    /// Where to write it on this host (default: its file name, here; `-`:
    /// standard output).
    #[arg(value_name = "LOCAL")]
    pub local: Option<PathBuf>,
    /// Replace LOCAL if it exists without asking; needed when standard
    /// input is not a terminal.
    #[arg(short, long)]
    pub force: bool,
    /// Print machine-readable JSON on stdout (not with LOCAL `-`).
    #[arg(long)]
    pub json: bool,
    /// Where the backend is.
    #[command(flatten)]
    pub ctx: SandboxContext,
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

/// `corral verify`.
#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// The sandbox.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the backend, profiles and store are.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral events`.
#[derive(Debug, Clone, Args)]
pub struct EventsArgs {
    /// Only this sandbox's events.
    #[arg(long, value_name = "NAME")]
    pub sandbox: Option<String>,
    /// Only events after this id.
    #[arg(long, value_name = "ID")]
    pub after: Option<i64>,
    /// At most this many, the newest (default 100).
    #[arg(long, value_name = "N")]
    pub limit: Option<u32>,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the store is.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral log`.
#[derive(Debug, Clone, Args)]
pub struct LogArgs {
    /// Only records about this sandbox.
    #[arg(long, value_name = "NAME")]
    pub sandbox: Option<String>,
    /// Only records naming this profile.
    #[arg(long, value_name = "PROFILE")]
    pub profile: Option<String>,
    /// Only records since this time: an age (90s, 10m, 2h, 1d) or a UTC date-time (2026-12-01T10:00:00Z).
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// Only these kinds of record (blocked, dns, lifecycle, verification, access); repeat or separate with commas.
    #[arg(long, value_name = "KIND", value_delimiter = ',')]
    pub kind: Vec<String>,
    /// At most this many records, the newest (default 100 unless --since is given).
    #[arg(long, value_name = "N")]
    pub last: Option<usize>,
    /// Keep printing records as they are written (Ctrl-C to stop).
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// One JSON object per line (the audit trail's own records) on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where corral's state (and so the trail) is.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral gate`.
#[derive(Debug, Clone, Args)]
pub struct GateArgs {
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the store is.
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
    /// Every sandbox corral owns (that the verb applies to).
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

/// `corral grant`.
#[derive(Debug, Clone, Args)]
pub struct GrantArgs {
    /// The user: a name, or a uid.
    #[arg(value_name = "USER")]
    pub user: String,
    /// corrald's --admin-group: its members are admins already and are
    /// refused.
    #[arg(long, value_name = "GROUP")]
    pub admin_group: Option<String>,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the store and the backend are.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral revoke`.
#[derive(Debug, Clone, Args)]
pub struct RevokeArgs {
    /// The user: a name, or a uid (also one whose account is gone).
    #[arg(value_name = "USER")]
    pub user: String,
    /// Also delete the user's sandboxes (and their snapshots) and project.
    #[arg(long)]
    pub purge: bool,
    /// Do not ask before --purge; needed when standard input is not a
    /// terminal.
    #[arg(short, long)]
    pub force: bool,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Where the store and the backend are.
    #[command(flatten)]
    pub ctx: SandboxContext,
}

/// `corral config …`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate a configuration file; every problem is listed with file:line and a fix.
    Check(ConfigCheckArgs),
    /// Convert a legacy networks.conf into the equivalent corral.toml.
    Import(ConfigImportArgs),
}

/// The format of a configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConfigFormat {
    /// corral.toml.
    Toml,
    /// The legacy networks.conf.
    NetworksConf,
}

/// `corral config check`.
#[derive(Debug, Clone, Args)]
pub struct ConfigCheckArgs {
    /// The file to check.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// File format; by default a name ending in `.conf` is networks.conf, anything else TOML.
    #[arg(long, value_enum)]
    pub format: Option<ConfigFormat>,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `corral config import`.
#[derive(Debug, Clone, Args)]
pub struct ConfigImportArgs {
    /// The networks.conf to convert.
    #[arg(value_name = "NETWORKS_CONF")]
    pub file: PathBuf,
    /// Write corral.toml here instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// A host OS, as written on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HostOsArg {
    /// Linux.
    Linux,
    /// macOS.
    Macos,
    /// Windows.
    Windows,
}

/// `corral matrix`.
#[derive(Debug, Clone, Args)]
pub struct MatrixArgs {
    /// Show only this host OS (default: every host OS).
    #[arg(long, value_enum)]
    pub host: Option<HostOsArg>,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `corral profiles`.
#[derive(Debug, Clone, Args)]
pub struct ProfilesArgs {
    /// Profiles to list.
    #[command(flatten)]
    pub source: ConfigSource,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `corral drill`.
#[derive(Debug, Clone, Args)]
pub struct DrillArgs {
    /// Profiles to drill (default: the config file, else the built-in profiles).
    #[command(flatten)]
    pub source: ConfigSource,
    /// Print the drill record as JSON on stdout (and nothing else there).
    #[arg(long)]
    pub json: bool,
    /// Also write the drill record as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `corral man`.
#[derive(Debug, Clone, Args)]
pub struct ManArgs {
    /// Write corral.1 and one page per subcommand (corral-host-apply.1, …) into DIR.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
}

/// `corral completions`.
#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell to print a completion script for.
    #[arg(value_enum)]
    pub shell: Shell,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn grammar_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn config_and_networks_conf_conflict() {
        let err = Cli::try_parse_from([
            "corral",
            "host",
            "plan",
            "--config",
            "a.toml",
            "--networks-conf",
            "b.conf",
        ])
        .unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
    }

    /// The systemd units run real command lines: each must parse with this
    /// grammar, so a renamed flag cannot silently break boot-time enforcement.
    #[test]
    fn systemd_unit_command_lines_parse() {
        let units = [
            include_str!("../../../dist/systemd/corral-host.service"),
            include_str!("../../../dist/systemd/corral-refresh.service"),
        ];
        let mut seen = 0;
        for unit in units {
            for line in unit.lines() {
                let Some(cmd) = line
                    .strip_prefix("ExecStart=")
                    .or_else(|| line.strip_prefix("ExecReload="))
                else {
                    continue;
                };
                let argv: Vec<&str> = cmd.split_whitespace().collect();
                assert_eq!(argv[0], "/usr/local/bin/corral", "{line}");
                if let Err(e) = Cli::try_parse_from(&argv) {
                    panic!("`{line}` does not parse: {e}");
                }
                seen += 1;
            }
        }
        assert_eq!(seen, 3, "ExecStart/ExecReload lines found");
        let host = units[0];
        assert!(host.contains("Before=network-pre.target"), "boot ordering");
        assert!(host.contains("Wants=network-pre.target"), "boot ordering");
        assert!(host.contains("ExecStart=/usr/local/bin/corral --quiet host apply"));
    }

    #[test]
    fn apply_dry_run_parses() {
        let cli =
            Cli::try_parse_from(["corral", "host", "apply", "--dry-run", "--netns", "x"]).unwrap();
        match cli.command {
            Command::Host(HostCommand::Apply(a)) => {
                assert!(a.dry_run);
                assert_eq!(a.host.netns.as_deref(), Some("x"));
            }
            other => panic!("parsed as {other:?}"),
        }
    }
}
