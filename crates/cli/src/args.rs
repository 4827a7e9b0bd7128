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
    /// Print a shell completion script.
    Completions(CompletionsArgs),
    /// Print the man page (roff) on stdout, or write one page per command.
    #[command(hide = true)]
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
    /// Act inside this network namespace (a name under /run/netns, or a path).
    #[arg(long, value_name = "NAME|PATH")]
    pub netns: Option<String>,
    /// Where corral keeps what it applied.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Print machine-readable JSON on stdout.
    #[arg(long)]
    pub json: bool,
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
    /// Also write the drill record as JSON to FILE (`-` for stdout, which then
    /// carries only the JSON).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// `corral man` (hidden; for packagers).
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
