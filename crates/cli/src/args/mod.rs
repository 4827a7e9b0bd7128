//! The command line, as clap derive types only: no logic lives here, so the
//! grammar can be read (and turned into completions and a man page) on its own.

mod host;
pub use host::{ConfigSource, HostArgs, HostCommand, TeardownArgs};
mod sandbox;
pub use sandbox::{
    DEFAULT_INCUS_SOCKET, ExecArgs, IncusArgs, InfoArgs, ListArgs, NewArgs, PowerArgs, RmArgs,
    SandboxContext, ShellArgs, SizeArg, StopArgs, TemplatesArgs,
};
mod state;
pub use state::{
    ExportArgs, ImportArgs, PullArgs, PushArgs, RenameArgs, RestoreArgs, SnapshotArgs,
};
mod egress;
pub use egress::{
    ApprovalsArgs, ClusterCommand, ClusterStatusArgs, DecideArgs, EventsArgs, ExplainArgs,
    GateArgs, GrantArgs, LogArgs, LogFormat, RevokeArgs, VerifyArgs,
};
mod config;
pub use config::{
    CompletionsArgs, ConfigCheckArgs, ConfigCommand, ConfigFormat, ConfigImportArgs, DrillArgs,
    HostOsArg, ManArgs, MatrixArgs, ProfilesArgs,
};

use clap::{Args, Parser, Subcommand, ValueEnum};

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
    /// Incus cluster members as corral trusts them (docs/cluster.md).
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Show the verification gate: each kind's standing and every sandbox's last verdict.
    Gate(GateArgs),
    /// Show the audit trail: blocked packets, DNS decisions, lifecycle and verification.
    Log(LogArgs),
    /// Say whether a sandbox of a profile may reach a destination, and which
    /// rule of the plan in force decides (and why: the allow entry, the
    /// learned address, the reserved range). Changes nothing but, for a host
    /// name, what the profile's resolver learns by resolving it.
    Explain(ExplainArgs),
    /// List the lookups corral's resolver holds for the operator: names a
    /// profile with `approvals = "ask"` does not list, each with the
    /// sandbox address that asked (admins only).
    Approvals(ApprovalsArgs),
    /// Let a held lookup through: it is answered and its addresses open to
    /// the sandbox that asked alone, for their TTL (admins only).
    Approve(DecideArgs),
    /// Refuse a held lookup: the sandbox gets NXDOMAIN saying the operator
    /// denied it (admins only).
    Deny(DecideArgs),
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
            include_str!("../../../../dist/systemd/corral-host.service"),
            include_str!("../../../../dist/systemd/corral-refresh.service"),
            include_str!("../../../../dist/systemd/corral-watch.service"),
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
        assert_eq!(seen, 4, "ExecStart/ExecReload lines found");
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
