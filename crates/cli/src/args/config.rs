//! `corral config …` and the other profile tools: `matrix`, `profiles`,
//! `drill`, and the generated `man` and `completions`.

use super::ConfigSource;
use clap::{Args, Subcommand, ValueEnum};
use clap_complete::Shell;
use std::path::PathBuf;

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
    /// Every column in full (probe, from, to, expected, observed, verdict,
    /// ms); the default table fits 100 columns, and `--json` has all.
    #[arg(long)]
    pub wide: bool,
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
