//! Moving sandbox state and files: snapshots, restore, rename, export,
//! import, push and pull.

use super::SandboxContext;
use clap::Args;
use std::path::PathBuf;

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
